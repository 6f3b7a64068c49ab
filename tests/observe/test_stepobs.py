"""An observation says what was known when it was made: the assembler goes on updating its message in place (the
usage at ``message_delta``), and a MessageStarted that shared its dicts read the final token counts from the start,
so time travel to the first event showed the output tokens of the last."""

from __future__ import annotations

from typing import Any

import orjson

from inspector.observe import observations as O
from inspector.observe.stepobs import step_observations
from inspector.state.travel import History
from inspector.stream.family import new_stream


def _sse(name: str, data: dict[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


START: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [],
    "stop_reason": None,
    "usage": {"input_tokens": 1480, "output_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 0}},
}
BODY = b"".join(
    [
        _sse("message_start", {"type": "message_start", "message": START}),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 74, "cache_creation": {"ephemeral_5m_input_tokens": 9}},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
)


def _observations() -> list[O.Observation]:
    ts = new_stream("anthropic")
    obs: list[O.Observation] = [O.TurnStarted(0.0, 0), O.AttemptStarted(0.0, 0, 0, "POST", "/v1/messages", {}, {})]
    prev = None
    for step in ts.feed(BODY):
        obs.extend(step_observations(step, ts.assembler, 0.0, 0, 0, prev_sse=prev))
        prev = step.sse
    ts.close()
    return obs


def test_message_started_keeps_the_usage_of_message_start() -> None:
    obs = _observations()
    (started,) = [o for o in obs if isinstance(o, O.MessageStarted)]
    (updated,) = [o for o in obs if isinstance(o, O.MessageUpdated)]
    assert updated.usage["output_tokens"] == 74  # (the stream did update it)
    assert started.message["usage"]["output_tokens"] == 1
    assert started.message["usage"]["cache_creation"] == {"ephemeral_5m_input_tokens": 0}
    assert started.message["stop_reason"] is None


def test_time_travel_to_the_first_event_shows_its_tokens() -> None:
    history = History(_observations())
    first = history.state_at(1)  # as of message_start
    (attempt,) = first.attempts.values()
    assert attempt.usage["output_tokens"] == 1
    (attempt,) = history.state_at(history.event_count).attempts.values()
    assert attempt.usage["output_tokens"] == 74

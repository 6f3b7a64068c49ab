"""One OpenAI SSE event can give several steps (a whole tool call in one chunk: the block opens and takes its
arguments; a finish_reason: the choice's blocks close, then the message delta). The event row (SSEEventSeen) is said
once per SSE event, not once per step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.observe.stepobs import step_observations
from inspector.stream.family import new_stream
from inspector.stream.openai_common import NeutralStream
from inspector.testing.openai_fake import chunk, sse, tool_delta


def _rows(data: bytes, cuts: list[int]) -> tuple[list[O.Observation], int, int]:
    ts = new_stream("openai_chat")
    assert isinstance(ts, NeutralStream)  # (an OpenAI family's stream counts its events)
    obs: list[O.Observation] = []
    prev = None
    steps = 0
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        for step in ts.feed(data[a:b]):
            steps += 1
            obs.extend(step_observations(step, ts.assembler, 0.0, 0, 0, prev_sse=prev))
            prev = step.sse
    ts.close()
    return obs, ts.events, steps


BODY = sse(
    chunk({"role": "assistant", "content": None}),
    chunk(tool_delta(0, id="call_a", name="alpha", args='{"v": 1}')),  # whole call: open + arguments
    chunk(tool_delta(1, id="call_b", name="beta", args='{"v": 2}')),
    chunk({}, "tool_calls"),  # two blocks close, then the message delta
    chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}),
    done=True,
)


def test_one_event_row_per_sse_event_even_when_it_gives_several_steps() -> None:
    obs, events, steps = _rows(BODY, [])
    assert steps > events  # the case: several steps share an SSE event
    rows = [o for o in obs if isinstance(o, O.SSEEventSeen)]
    assert len(rows) == events == 6
    assert [r.sse.seq for r in rows] == list(range(6))
    # nothing else is lost: both tool calls, every block open/close
    assert [u.id for u in obs if isinstance(u, O.ToolUse)] == ["call_a", "call_b"]
    assert len([o for o in obs if isinstance(o, O.BlockClosed)]) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_rows_do_not_depend_on_read_boundaries(cuts: list[int]) -> None:
    obs, events, _ = _rows(BODY, cuts)
    rows = [o for o in obs if isinstance(o, O.SSEEventSeen)]
    assert [r.sse.seq for r in rows] == list(range(events))


def test_without_prev_sse_every_step_still_gets_its_row() -> None:
    """The default (a caller that does not pass prev_sse: the proxy today) is unchanged: one row per step."""
    ts = new_stream("openai_chat")
    steps = ts.feed(BODY)
    rows = [o for s in steps for o in step_observations(s, ts.assembler, 0.0, 0, 0) if isinstance(o, O.SSEEventSeen)]
    assert len(rows) == len(steps)

"""A usage count that is not a count (a string, a boolean, an array, a float, a negative number) is diagnosed
(protocol.wrong_type, an error) and makes the usage unknown, in every family: it was taken as 0 without a word
(`replay` said "in 0", dump exited 0), where a usage the API did not send is already "unknown", never 0."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inspector.observe.usage import from_wire
from inspector.stream.family import new_stream
from inspector.stream.turn import TurnStream

BAD = ["lots", True, [1], 1.5, -3, 10**25 * -1]


def anthropic(value: Any) -> bytes:
    msg = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "x",
        "content": [],
        "usage": {"input_tokens": value},
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": msg},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def chat(value: Any) -> bytes:
    base: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": value, "completion_tokens": 2}},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def responses(value: Any) -> bytes:
    r = {"id": "r", "object": "response", "status": "completed", "output": [], "model": "m"}
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**r, "status": "in_progress"}},
        {
            "type": "response.completed",
            "sequence_number": 1,
            "response": {**r, "usage": {"input_tokens": value, "output_tokens": 2}},
        },
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("family", ["anthropic", "openai_chat", "openai_responses"])
def test_a_count_that_is_not_a_count_is_said_and_makes_the_usage_unknown(family: str, value: Any) -> None:
    data = {"anthropic": anthropic, "openai_chat": chat, "openai_responses": responses}[family](value)
    ts = TurnStream() if family == "anthropic" else new_stream(family)  # type: ignore[arg-type]
    ts.feed(data)
    ts.close()
    wrong = [d for d in ts.diagnostics if d.code == "protocol.wrong_type"]
    assert len(wrong) == 1 and wrong[0].severity == "error" and "the usage is unknown" in wrong[0].message
    usage = from_wire(ts.final_message()["usage"], "anthropic" if family == "anthropic" else "openai")
    assert not usage.reported and usage.to_json()["input_tokens"] is None  # unknown, not 0


@pytest.mark.parametrize("family", ["anthropic", "openai_chat", "openai_responses"])
def test_good_counts_are_counted_and_said_nothing_of(family: str) -> None:
    data = {"anthropic": anthropic, "openai_chat": chat, "openai_responses": responses}[family](7)
    ts = TurnStream() if family == "anthropic" else new_stream(family)  # type: ignore[arg-type]
    ts.feed(data)
    ts.close()
    assert not [d for d in ts.diagnostics if d.code == "protocol.wrong_type"]
    usage = from_wire(ts.final_message()["usage"], "anthropic" if family == "anthropic" else "openai")
    assert usage.reported and (usage.input, usage.output) == (7, 2)

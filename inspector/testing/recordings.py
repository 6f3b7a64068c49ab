"""Recordings written for tests and benchmarks: long conversations whose every request carries the whole history,
as the agent loop sends it (what makes replay memory grow with the square of the turns if bodies are kept)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from inspector.record.recording import RecordingWriter
from inspector.testing import streamgen

EVENTS_PER_TURN = 200


def sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def write_recording(path: Path, turns: int) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tool = {"name": "echo", "description": "echo", "input_schema": {"type": "object"}}
    with RecordingWriter(str(path), source={"type": "bench"}) as w:
        for t in range(turns):
            last = t == turns - 1
            body = {"model": "m", "max_tokens": 100, "messages": messages, "tools": [tool], "stream": True}
            w.request(t, 0, float(t), "POST", "http://bench/v1/messages", {}, body)
            w.response(t, 0, 0.01, 200, {"content-type": "text/event-stream"})
            msg: dict[str, Any] = {
                "id": f"msg_{t}",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
            }
            msg |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
            w.read(t, 0, 0.02, sse("message_start", {"type": "message_start", "message": msg}))
            start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            w.read(t, 0, 0.02, sse("content_block_start", start))
            text = []
            for i in range(EVENTS_PER_TURN):
                frag = f"word{i} "
                text.append(frag)
                delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": frag}}
                w.read(t, 0, 0.02, sse("content_block_delta", delta))
            w.read(t, 0, 0.02, sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
            content: list[dict[str, Any]] = [{"type": "text", "text": "".join(text)}]
            if not last:
                tid = f"toolu_{t:06d}"
                block = {"type": "tool_use", "id": tid, "name": "echo", "input": {}}
                w.read(
                    t,
                    0,
                    0.02,
                    sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block": block}),
                )
                d = {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '{"n": ' + str(t) + "}"},
                }
                w.read(t, 0, 0.02, sse("content_block_delta", d))
                w.read(t, 0, 0.02, sse("content_block_stop", {"type": "content_block_stop", "index": 1}))
                content.append({"type": "tool_use", "id": tid, "name": "echo", "input": {"n": t}})
            stop = "end_turn" if last else "tool_use"
            w.read(
                t,
                0,
                0.02,
                sse(
                    "message_delta",
                    {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
                ),
            )
            w.read(t, 0, 0.02, sse("message_stop", {"type": "message_stop"}))
            w.end(t, 0, 0.03, "complete")
            messages = [*messages, {"role": "assistant", "content": content}]
            if not last:
                result = {"type": "tool_result", "tool_use_id": f"toolu_{t:06d}", "content": f"echo {t}"}
                messages.append({"role": "user", "content": [result]})


CITY = {"c1": "Paris", "c2": "Rome", "c3": "Oslo"}
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]


def proxy_recording(
    path: Path, order: Sequence[tuple[str, int]] = (("c1", 0), ("c2", 0), ("c3", 0), ("c3", 1), ("c1", 1), ("c2", 1))
) -> str:
    """What `inspector proxy --record` writes for weather agents, interleaved; c2's first turn was closed by its
    client mid-stream and resent at once (attempt 2)."""
    with RecordingWriter(path, source={"type": "proxy"}) as w:
        for turn, (cid, ct) in enumerate(order):
            city, tid = CITY[cid], f"toolu_{cid}"
            msgs: list[dict[str, Any]] = [{"role": "user", "content": f"Weather in {city}?"}]
            if ct == 1:
                msgs += [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": tid, "name": "get_weather", "input": {"city": city}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"{city} 18 C"}],
                    },
                ]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": True, "messages": msgs, "tools": TOOLS}
            if ct == 0:
                data = streamgen.sse(*streamgen.tool_turn([f'{{"city": "{city}"}}'], name="get_weather", id=tid))
            else:
                data = streamgen.sse(*streamgen.text_turn(f"{city}: 18 C"))
            ends = (
                [("cancelled", data[: len(data) // 2]), ("complete", data)]
                if (cid, ct) == ("c2", 0)
                else [("complete", data)]
            )
            for a, (end, d) in enumerate(ends):
                how = "retry" if a else ("new" if ct == 0 else "continues")
                w.observation(
                    {
                        "type": "conversation",
                        "t": float(turn),
                        "turn": turn,
                        "conversation": cid,
                        "conversation_turn": ct,
                        "attempt": a,
                        "how": how,
                        "parent": None,
                        "side": None,
                    }
                )
                w.request(turn, a, float(turn), "POST", "http://up/v1/messages", {}, body)
                w.response(turn, a, 0.01, 200, {"content-type": "text/event-stream"})
                w.read(turn, a, 0.02, d)
                w.end(turn, a, 0.03, end, None if end == "complete" else "the client closed the connection")
    return str(path)

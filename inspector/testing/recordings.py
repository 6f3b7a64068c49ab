"""Recordings written for tests and benchmarks: long conversations whose every request carries the whole history,
as the agent loop sends it (what makes replay memory grow with the square of the turns if bodies are kept)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from inspector.record.recording import RecordingWriter

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

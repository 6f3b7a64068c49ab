"""The references for the OpenAI decoders' tests: the openai SDK's own SSE decoder, its stream loop's rules
([DONE] ends it, a data object with a truthy `error` raises APIError) and its accumulators
(`ChatCompletionStreamState`, `ResponseStreamState`); the corpus (tests/stream/fixtures/openai/*/MANIFEST.json, in
a source checkout); and the views a user compares (`chat_view`, `response_view`). The openai SDK is imported only
when a reference is asked for (it is in the `test` extra)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "stream" / "fixtures" / "openai"


@dataclass(frozen=True)
class CorpusStream:
    name: str
    family: str  # "chat" | "responses"
    provider: str
    source: str
    data: bytes  # the bytes as SSE


def frame(raw: bytes, framing: str, family: str) -> bytes:
    """A corpus file as SSE bytes. json-lines (vercel/ai's .chunks.txt): each line becomes `data: <line>` as
    vercel/ai's prepareChunksFixtureResponse does; chat streams get `data: [DONE]` after them as that harness and
    OpenAI send it; Responses streams none (OpenAI sends none)."""
    if framing == "sse":
        return raw
    out = b"".join(b"data: " + line + b"\n\n" for line in raw.split(b"\n") if line.strip())
    return out + (b"data: [DONE]\n\n" if family == "chat" else b"")


def corpus() -> list[CorpusStream]:
    out = []
    for man in sorted(FIXTURES.glob("*/MANIFEST.json")):
        doc = json.loads(man.read_text())
        for s in doc["streams"]:
            raw = (man.parent / s["file"]).read_bytes()
            out.append(
                CorpusStream(
                    f"{man.parent.name}/{s['file']}",
                    s["family"],
                    s["provider"],
                    s["source"],
                    frame(raw, s["framing"], s["family"]),
                )
            )
    return out


def sdk_events(data: bytes) -> list[Any]:
    """(event, data) pairs as the SDK's SSE decoder and stream loop give them; raises as the SDK does."""
    from openai import APIError
    from openai._streaming import SSEDecoder

    out = []
    for sse in SSEDecoder().iter_bytes(iter([data])):
        if sse.data.startswith("[DONE]"):
            break
        d = sse.json()
        if isinstance(d, dict) and d.get("error"):
            err = d.get("error")
            msg = err.get("message") if isinstance(err, dict) else None
            raise APIError(msg or "An error occurred during streaming", None, body=err)  # type: ignore[arg-type]
        out.append(d)
    return out


def sdk_chat(data: bytes) -> dict[str, Any]:
    """The SDK's chat.completion (its ChatCompletionStreamState snapshot, as a dict), as `.stream()` gets it: chunks
    whose `object` is not chat.completion.chunk are skipped (Azure filter events). Raises what the SDK raises."""
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state = ChatCompletionStreamState()
    n = 0
    for d in sdk_events(data):
        if d.get("object") != "chat.completion.chunk":
            continue
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=d))  # type: ignore[arg-type]
        n += 1
    if n == 0:
        raise RuntimeError("no chunk")
    return state.current_completion_snapshot.to_dict(warnings=False)


def sdk_response(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(final response, the delta-folded snapshot) from the SDK's ResponseStreamState. Raises what it raises
    (RuntimeError without response.completed)."""
    from openai import omit
    from openai._models import construct_type
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    # (Any: the reference result is read from its private, name-mangled state below, which mypy cannot see)
    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    for d in sdk_events(data):
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=d))
    # (SLF001: the SDK's own reference result, which it keeps only in private state: this is what we compare with)
    final = state._completed_response  # noqa: SLF001
    if final is None:
        raise RuntimeError("Didn't receive a `response.completed` event.")
    snap = state._ResponseStreamState__current_snapshot  # noqa: SLF001 (as above)
    return final.to_dict(warnings=False), snap.to_dict(warnings=False)


def sse(*objs: Any, done: bool = True, events: bool = False) -> bytes:
    """Objects as SSE `data:` events (with `event: <type>` lines when `events`), then `data: [DONE]`."""
    out = []
    for o in objs:
        head = f"event: {o['type']}\n".encode() if events and isinstance(o, dict) and "type" in o else b""
        out.append(head + b"data: " + (o if isinstance(o, bytes) else orjson.dumps(o)) + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def chat_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What a user compares in a chat.completion: per choice the text, refusal, reasoning, finish_reason and tool
    calls (id, type, name, arguments); the id and model."""
    choices = []
    for ch in sorted(obj.get("choices") or [], key=lambda c: c.get("index", 0)):
        m = ch.get("message") or {}
        calls = [
            (
                t.get("id"),
                t.get("type"),
                (t.get("function") or {}).get("name"),
                (t.get("function") or {}).get("arguments"),
            )
            for t in m.get("tool_calls") or []
        ]
        choices.append(
            {
                "index": ch.get("index"),
                "content": m.get("content"),
                "refusal": m.get("refusal"),
                "reasoning_content": m.get("reasoning_content"),
                "finish_reason": ch.get("finish_reason"),
                "tool_calls": calls,
            }
        )
    return {"id": obj.get("id"), "model": obj.get("model"), "choices": choices}


def response_view(r: dict[str, Any]) -> dict[str, Any]:
    """A response as a user compares it: id, status, model, usage, and per output item its type, id, call_id, name,
    arguments / input, and the text of its content parts and summaries."""
    items = []
    for it in r.get("output") or []:
        items.append(
            {
                k: it.get(k)
                for k in ("type", "id", "call_id", "name", "arguments", "input", "status")
                if it.get(k) is not None
            }
            | {
                "content": [(p.get("type"), p.get("text"), p.get("refusal")) for p in it.get("content") or []],
                "summary": [p.get("text") for p in it.get("summary") or []],
            }
        )
    return {k: r.get(k) for k in ("id", "status", "model", "usage")} | {"output": items}

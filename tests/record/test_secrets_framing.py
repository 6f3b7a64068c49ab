"""A key split across fragments that the stream engine joins is masked whatever the stream's framing: the redactor
reads events, their types, their blocks and their text fields as the engine does (core/wire.py), for every family.

Each case streams a text with the key in it, cut into fragments, in an SSE framing the engine reads (any line
ending, ``id:`` / ``retry:`` / comment lines, a byte-order mark) and with the shapes where a second reading could
differ: an Anthropic delta typed only by its ``event:`` name, a block whose start holds the first fragment, an
unrelated field with bytes that are not UTF-8; a chat choice without its ``index``, thinking text in
``reasoning_content`` and ``reasoning`` alike, tool-call deltas without ``index``; Responses text in an
``output_text`` and a ``refusal`` delta of one content part. The bytes the recording keeps (the StreamRedactor's),
assembled by the engine, hold no key, and the rest of the text is intact; the live observations (the
RedactingPublisher's) show no key in any text of the dashboard."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.redaction import StreamRedactor, mask_text
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.state.fold import DashboardState
from inspector.stream.family import new_stream
from inspector.stream.turn import TurnStream
from inspector.testing.hyp import examples
from inspector.testing.secrets import assert_no_key, dashboard_texts, stream_observations

KEY = "sk-ant-canary-0123456789abcdef"
FAMILIES = ("anthropic", "openai_chat", "openai_responses")
TEXT = st.text(alphabet="sk-ant ab\né", max_size=10)

Event = tuple[str | None, dict[str, Any]]


def anthropic_events(frags: list[str], shape: set[str]) -> list[Event]:
    kind = "thinking" if "thinking" in shape else "text"
    dtype = f"{kind}_delta"
    start_text = frags[0] if "start_text" in shape else ""
    rest = frags[1:] if "start_text" in shape else frags
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {}}
    out: list[Event] = [
        ("message_start", {"type": "message_start", "message": msg}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": kind, kind: start_text}},
        ),
    ]
    for frag in rest:
        data: dict[str, Any] = {"type": "content_block_delta", "index": 0, "delta": {"type": dtype, kind: frag}}
        if "untyped" in shape:
            del data["type"]  # typed by its `event:` line only
        if "bad_utf8" in shape:
            data["pad"] = "PADX"  # (made a byte that is not UTF-8 below)
        out.append(("content_block_delta", data))
    out += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return out


def chat_events(frags: list[str], shape: set[str]) -> list[Event]:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if "tool" in shape:  # the key in a tool call's arguments: {"q": "<text>"}, a JSON string
        deltas.append(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"q":"'}}
                ]
            }
        )
        for frag in [*[orjson.dumps(f).decode()[1:-1] for f in frags], '"}']:
            call: dict[str, Any] = {"function": {"arguments": frag}}
            if "no_tool_index" not in shape:
                call["index"] = 0
            deltas.append({"tool_calls": [call]})
    else:
        for n, frag in enumerate(frags):
            field = ("reasoning_content", "reasoning")[n % 2] if "thinking" in shape else "content"
            deltas.append({field: frag})
    chunks = []
    for n, delta in enumerate(deltas):
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        if "no_index" in shape and n % 2:
            del choice["index"]  # (taken as choice 0)
        chunks.append(dict(base, choices=[choice]))
    chunks.append(
        dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls" if "tool" in shape else "stop"}])
    )
    return [(None, c) for c in chunks]


def responses_events(frags: list[str], shape: set[str]) -> list[Event]:
    resp = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [], "model": "m"}
    part = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": resp},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", **part, "part": {"type": "output_text", "text": ""}},
    ]
    for n, frag in enumerate(frags):
        refusal = "refusal" in shape and n % 2
        events.append(
            {"type": "response.refusal.delta" if refusal else "response.output_text.delta", **part, "delta": frag}
        )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message"}},
        {"type": "response.completed", "response": dict(resp, status="completed")},
    ]
    for n, e in enumerate(events):
        e["sequence_number"] = n
    return [(e["type"], e) for e in events]


SHAPES = {
    "anthropic": ("untyped", "start_text", "bad_utf8", "thinking"),
    "openai_chat": ("no_index", "thinking", "tool", "no_tool_index"),
    "openai_responses": ("refusal",),
}
BUILD = {"anthropic": anthropic_events, "openai_chat": chat_events, "openai_responses": responses_events}
# (line ending, the blank line's): every pair the engine reads as the end of an event
ENDINGS = [("\n", "\n"), ("\r\n", "\r\n"), ("\r", "\r"), ("\n", "\r\n"), ("\r\n", "\n"), ("\r", "\r\n")]


def encode(events: list[Event], eol: str, blank: str, extra: set[str], family: str) -> bytes:
    out = ["\ufeff"] if "bom" in extra else []
    for n, (name, data) in enumerate(events):
        lines = []
        if "comment" in extra:
            lines.append(": keep-alive")
        if "id" in extra:
            lines.append(f"id: {n}")
        if name is not None:
            lines.append(f"event: {name}")
        if "retry" in extra:
            lines.append("retry: 1000")
        lines.append("data: " + orjson.dumps(data).decode())
        out.append("".join(line + eol for line in lines) + blank)
    if family == "openai_chat":
        out.append("data: [DONE]" + eol + blank)
    return "".join(out).encode().replace(b"PADX", b"\xff")


def assemble(data: bytes, family: str) -> dict[str, Any]:
    ts = TurnStream() if family == "anthropic" else new_stream(family)  # type: ignore[arg-type]
    ts.feed(data)
    ts.close()
    return ts.final_message()


def joined(message: dict[str, Any]) -> str:
    """The message's text as its blocks hold it (text, thinking, a tool call's input JSON's string)."""
    out = []
    for block in message["content"]:
        if block["type"] == "tool_use":
            out.append(block["input"].get("q", "") if isinstance(block["input"], dict) else "")
        else:
            out.append(block.get("text") or block.get("thinking") or "")
    return "".join(out)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, list[bytes]]:
    family = draw(st.sampled_from(FAMILIES))
    text = draw(TEXT) + KEY + draw(TEXT)
    points = sorted({c % (len(text) + 1) for c in draw(st.lists(st.integers(0, 100), min_size=1, max_size=12))})
    frags = [text[a:b] for a, b in itertools.pairwise([0, *points, len(text)])]
    shape = draw(st.sets(st.sampled_from(SHAPES[family])))
    eol, blank = draw(st.sampled_from(ENDINGS))
    extra = draw(st.sets(st.sampled_from(["id", "retry", "comment", "bom"])))
    data = encode(BUILD[family](frags, shape), eol, blank, extra, family)
    cuts = sorted({c % (len(data) + 1) for c in draw(st.lists(st.integers(0, 4000), max_size=20))})
    reads = [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]
    return family, text, reads


@settings(max_examples=examples(300), deadline=None)
@given(case=cases())
def test_the_recorded_bytes_hold_no_key_the_engine_can_join(case: tuple[str, str, list[bytes]]) -> None:
    family, text, reads = case
    original = assemble(b"".join(reads), family)
    assert joined(original) == text  # (the engine joins what the case cut: the key is whole in what it assembles)
    r = StreamRedactor([KEY])
    recorded = b"".join(r.feed(x) for x in reads) + r.flush()
    message = assemble(recorded, family)
    assert_no_key(KEY, {"bytes": recorded, "message": orjson.dumps(message)})
    assert joined(message) == mask_text(text, [KEY])  # the rest of the text intact


@settings(max_examples=examples(150), deadline=None)
@given(case=cases())
def test_the_live_observations_show_no_key_the_dashboard_can_join(case: tuple[str, str, list[bytes]]) -> None:
    family, _text, reads = case
    published: list[O.Observation] = []
    pub = RedactingPublisher(published.append, [KEY])
    for obs in stream_observations(reads, family=family):
        pub.publish(obs)
    pub.close()
    state = DashboardState().apply_all(published)
    reads_out = b"".join(o.data for o in published if isinstance(o, O.ReadReceived))
    texts = {f"text {n}": t for n, t in enumerate(dashboard_texts(state))}
    assert_no_key(KEY, {"reads": reads_out, **texts, "message": orjson.dumps(assemble(reads_out, family))})

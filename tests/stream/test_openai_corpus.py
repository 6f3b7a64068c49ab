"""The corpus (real recorded OpenAI-format streams from public SDK / framework fixtures, plus streams written to
reproduce each documented server quirk, every file with its source in a MANIFEST.json) against the openai SDK's own
accumulators: no stream crashes dump; where the SDK accepts a stream, our final object says what the SDK says; where
it rejects one, we give a named diagnostic."""

from __future__ import annotations

from typing import Any

import pytest

from inspector.stream.openai_chat import ChatStream
from inspector.stream.openai_common import NeutralStream
from inspector.stream.openai_responses import ResponsesStream
from inspector.testing.openai_ref import chat_view, corpus, response_view, sdk_chat, sdk_response

CORPUS = corpus()
KNOWN_OUTCOMES = {"tool_use", "text_finish", "truncated", "incomplete", "error"}


def run(s: Any) -> NeutralStream:
    ts: NeutralStream = ChatStream() if s.family == "chat" else ResponsesStream()
    ts.feed(s.data)
    ts.close()
    return ts


@pytest.mark.parametrize("s", CORPUS, ids=[s.name for s in CORPUS])
def test_corpus_stream(s: Any) -> None:
    ts = run(s)
    assert ts.outcome in KNOWN_OUTCOMES
    for d in ts.diagnostics:
        assert d.code and "." in d.code and d.severity in ("error", "warning", "info")
    ours = ts.final_object()
    try:
        ref = sdk_chat(s.data) if s.family == "chat" else sdk_response(s.data)[0]
    except Exception as exc:  # noqa: BLE001 (whatever the SDK raises, it rejects the stream: we must have named why)
        assert ts.diagnostics, f"the SDK rejects {s.name} ({type(exc).__name__}: {exc}) but we say nothing"
        return
    if s.family == "chat":
        mine, sdk = chat_view(ours), chat_view(ref)
        codes = {d.code for d in ts.diagnostics}
        if codes & {"openai.chat.tool_id_repeated", "openai.chat.tool_name_repeated"}:
            # where the SDK is wrong: it joins an id / name sent on every chunk ("call_0call_0...", a doubled name);
            # we keep the first. Its value must be ours repeated, and the rest must agree.
            for mc, sc in zip(mine["choices"], sdk["choices"], strict=True):
                fixed = []
                for (mid, mt, mn, ma), (sid, st, sn, sa) in zip(mc["tool_calls"], sc["tool_calls"], strict=True):
                    assert sid == mid * (len(sid) // len(mid)) and len(sid) > len(mid)
                    assert sn == mn * (len(sn) // len(mn))
                    fixed.append((mid, st, mn, sa))
                sc["tool_calls"] = fixed
        assert mine == sdk
        if ref.get("usage") is not None:
            assert ours["usage"] == ref["usage"]
    else:
        assert response_view(ours) == response_view(ref)


@pytest.mark.parametrize("s", [s for s in CORPUS if s.family == "responses"], ids=lambda s: s.name)
def test_responses_delta_folding_matches_the_done_values(s: Any) -> None:
    """The SDK's final object is the response.completed payload, not the deltas: our blocks (folded from the deltas)
    must say what the SDK's delta-folded snapshot says, and where that differs from the .done values we say so."""
    ts = run(s)
    try:
        final, snap = sdk_response(s.data)
    except Exception:  # noqa: BLE001 (whatever the SDK raises, it rejects the stream: nothing to compare)
        return
    asm = ts.assembler
    folded_text = [
        p.get("text")
        for it in snap.get("output") or []
        if it.get("type") == "message"
        for p in it.get("content") or []
        if p.get("type") == "output_text"
    ]
    ours_text = [b.joined() for i, b in sorted(asm.blocks.items()) if b.type == "text" and "openai" not in b.start]
    assert ours_text == folded_text
    folded_args = [it.get("arguments") for it in snap.get("output") or [] if it.get("type") == "function_call"]
    ours_args = [b.joined() for i, b in sorted(asm.blocks.items()) if b.type == "tool_use"]
    final_args = [it.get("arguments") for it in final.get("output") or [] if it.get("type") == "function_call"]
    if folded_args != ours_args:  # LM Studio: .done with no deltas, the SDK's snapshot has "" where we took .done
        assert any(d.code == "openai.responses.done_without_deltas" for d in ts.diagnostics)
        assert ours_args == final_args
    if folded_text != [
        p.get("text")
        for it in final.get("output") or []
        if it.get("type") == "message"
        for p in it.get("content") or []
        if p.get("type") == "output_text"
    ]:
        assert any(d.code.startswith("openai.responses.done") for d in ts.diagnostics)


def test_corpus_figures() -> None:
    """The corpus covers both families and at least eight sources (no tuning to one)."""
    providers = {s.provider for s in CORPUS}
    assert {s.family for s in CORPUS} == {"chat", "responses"}
    assert len(providers) >= 8, providers


_CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
)
_CREATED = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
    b'"response":{"id":"r","object":"response","status":"in_progress","output":[],"model":"m"}}\n\n'
)


@pytest.mark.parametrize("error_block", [b"event: error\n\n", b"event: error\ndata: overloaded\n\n"])
@pytest.mark.parametrize("family", ["chat", "responses"])
def test_an_error_event_the_sdk_cannot_read_ends_the_stream_in_an_error(family: str, error_block: bytes) -> None:
    """``event: error`` with no data or data that is not JSON: the openai SDK's stream raises on it (it reads every
    event's JSON), so the harness saw an error; the engine said text_finish (chat) or incomplete (Responses)."""
    from inspector.testing.openai_ref import sdk_events

    data = (_CHUNK if family == "chat" else _CREATED) + error_block
    with pytest.raises(ValueError):  # (json.JSONDecodeError, as the SDK's sse.json() raises it)
        sdk_events(data)
    ts: NeutralStream = ChatStream() if family == "chat" else ResponsesStream()
    ts.feed(data)
    ts.close()
    assert ts.outcome == "error"
    assert [d.severity for d in ts.diagnostics if d.code == "openai.error_in_stream"] == ["error"]

"""HAR import: text/event-stream entries become turns of a Recording (bytes exact, timing per response only)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from inspector.net.faults import BOM, render_faulted
from inspector.net.serve import assembled_message
from inspector.record.dump import dump_turns
from inspector.record.har import HAR_TIMING_NOTE, is_har, load_any, read_har
from inspector.record.recording import RecordingError, RecordingWriter, read_recording
from inspector.record.timing import format_timing, timing_json
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render import render_turn

KEY = "sk-ant-api03-CANARY-har-00000000000000000000"


def entry(
    body: bytes,
    *,
    base64_body: bool = False,
    mime: str = "text/event-stream",
    started: str,
    request_body: dict[str, Any] | None = None,
    status: int = 200,
    timings: dict[str, Any] | None = None,
    time_ms: float = 1500.0,
    ctype_header: bool = True,
) -> dict[str, Any]:
    content = {"size": len(body), "mimeType": mime}
    if base64_body:
        content.update(text=base64.b64encode(body).decode(), encoding="base64")
    else:
        content["text"] = body.decode("utf-8")
    headers = [{"name": "content-type", "value": mime}] if ctype_header else []
    return {
        "startedDateTime": started,
        "time": time_ms,
        "request": {
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages",
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "x-api-key", "value": KEY},
                {"name": "Authorization", "value": f"Bearer {KEY}"},
                {"name": "Cookie", "value": "a=b"},
                {"name": "anthropic-version", "value": "2023-06-01"},
            ],
            "postData": {"mimeType": "application/json", "text": json.dumps(request_body or {"model": "m"})},
        },
        "response": {
            "status": status,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": headers + [{"name": "set-cookie", "value": "s=1"}, {"name": "request-id", "value": "req_1"}],
            "content": content,
        },
        "timings": timings
        or {"blocked": 1.0, "dns": -1, "connect": -1, "send": 0.5, "wait": 398.5, "receive": 1100.0, "ssl": -1},
    }


def har(*entries: dict[str, Any], creator: str = "WebInspector") -> bytes:
    return json.dumps(
        {"log": {"version": "1.2", "creator": {"name": creator, "version": "537.36"}, "entries": list(entries)}}
    ).encode()


WEATHER0 = render_turn(get_scenario("weather"), 0, 0).body
WEATHER1 = render_turn(get_scenario("weather"), 1, 0).body
ODD = render_faulted(get_scenario("weather"), "bom,crlf", 0, 0).body  # a BOM and CRLF: kept byte for byte


def test_sse_entries_become_turns_with_exact_bytes(tmp_path: Path) -> None:
    json_entry = entry(b'{"data": []}', mime="application/json", started="2025-05-01T10:00:00.000Z")
    data = har(
        entry(WEATHER0, started="2025-05-01T10:00:01.000Z", request_body={"model": "m", "stream": True}),
        json_entry,
        entry(WEATHER1, base64_body=True, started="2025-05-01T10:00:03.250Z", time_ms=900),
        entry(ODD, base64_body=True, started="2025-05-01T10:00:05.000Z", ctype_header=False),
    )
    path = tmp_path / "devtools.har"
    path.write_bytes(data)
    rec = read_har(path)
    assert [t.turn for t in rec.turns] == [0, 1, 2]
    a0, a1, a2 = [t.attempts[0] for t in rec.turns]
    assert a0.data == WEATHER0 and a1.data == WEATHER1 and a2.data == ODD and a2.data.startswith(BOM)
    assert all(len(a.reads) == 1 and a.reads[0].t is None for a in (a0, a1, a2))
    assert a0.request is not None and a1.request is not None and a2.request is not None
    assert a0.response is not None and a0.end is not None and a1.end is not None
    assert (a0.request["t"], a1.request["t"], a2.request["t"]) == (0.0, 2.25, 4.0)
    assert a0.response["t"] == pytest.approx(0.4) and a0.end["t"] == 1.5 and a1.end["t"] == 0.9
    assert a0.response["status"] == 200 and a0.end["status"] == "complete"
    assert a0.request["body"] == {"model": "m", "stream": True} and a0.request["method"] == "POST"
    assert rec.header["format"] == "har" and rec.header["timing"] == "per-response"
    assert rec.header["source"]["creator"] == "WebInspector 537.36" and rec.header["skipped_entries"] == 1
    assert HAR_TIMING_NOTE in rec.warnings
    for a in (a0, a1, a2):  # credentials dropped like the recorder drops them
        assert a.request is not None and a.response is not None
        names = {h.lower() for h in a.request["headers"]} | {h.lower() for h in a.response["headers"]}
        assert not names & {"x-api-key", "authorization", "cookie", "set-cookie"}
        assert KEY not in json.dumps(a.request)


def test_dump_and_timing_of_a_har() -> None:
    rec = read_har(
        har(entry(WEATHER0, started="2025-05-01T10:00:00Z"), entry(WEATHER1, started="2025-05-01T10:00:02Z"))
    )
    turns = dump_turns(rec)
    assert [t["outcome"] for t in turns] == ["tool_use", "text_finish"]
    assert turns[0]["message"]["content"] == assembled_message(render_turn(get_scenario("weather"), 0, 0))["content"]
    text = format_timing(rec)
    assert text.startswith("note: timing is per response, not per read")
    data = timing_json(rec)
    assert data["timing"] == "per-response" and HAR_TIMING_NOTE in data["warnings"]
    assert data["attempts"][0]["headers_s"] == pytest.approx(0.4) and data["attempts"][0]["end_s"] == 1.5


def test_mitmproxy_style_export() -> None:
    """mitmproxy: base64 bodies, -1 timings where unknown, no startedDateTime offsets to speak of."""
    e = entry(
        WEATHER0,
        base64_body=True,
        started="2025-05-01T10:00:00.123456+00:00",
        timings={"send": -1, "wait": -1, "receive": -1},
        time_ms=-1,
    )
    rec = read_har(har(e, creator="mitmproxy"))
    a = next(rec.attempts())
    assert a.response is not None and a.end is not None
    assert a.data == WEATHER0 and a.response["t"] is None and a.end["t"] is None


def test_missing_bodies_errors_and_detection() -> None:
    e = entry(WEATHER0, started="2025-05-01T10:00:00Z")
    del e["response"]["content"]["text"]
    failed = entry(b"", started="2025-05-01T10:00:01Z", status=0)
    rec = read_har(har(e, failed))
    assert len(rec.turns) == 2 and rec.turns[0].attempts[0].reads == []
    assert any("no response body" in w for w in rec.warnings)
    assert (rec.turns[1].attempts[0].end or {})["status"] == "failed"
    assert read_har(har(entry(b"{}", mime="application/json", started="2025-05-01T10:00:00Z"))).warnings == [
        "no text/event-stream response in this HAR"
    ]
    with pytest.raises(RecordingError, match="not a HAR"):
        read_har(b"event: ping\ndata: {}\n\n")
    with pytest.raises(RecordingError, match="no log.entries"):
        read_har(b'{"log": {}}')
    assert is_har(har()) and is_har(b'\xef\xbb\xbf { "log": {') and not is_har(b'{"kind": "header"}')


def test_load_any_dispatches(tmp_path: Path) -> None:
    assert load_any(har(entry(WEATHER0, started="2025-05-01T10:00:00Z"))).header["format"] == "har"
    assert load_any(WEATHER0).is_plain
    path = tmp_path / "r.jsonl"
    with RecordingWriter(path, source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", "u", {}, {})
        w.read(0, 0, 0.1, WEATHER0)
    assert next(load_any(path).attempts()).data == WEATHER0
    hp = tmp_path / "x.har"
    hp.write_bytes(har(entry(WEATHER0, started="2025-05-01T10:00:00Z")))
    assert load_any(hp).header["source"]["file"] == str(hp)
    assert read_recording(path).turns[0].attempts[0].data == WEATHER0


def test_an_openai_call_answered_with_an_error_is_kept_as_an_attempt() -> None:
    """A HAR of an OpenAI harness: the 429 on /v1/chat/completions is an attempt (http_error), like a Messages 429,
    and the stream after it is its retry."""
    from inspector.record.har import load_any

    err = entry(
        b'{"error":{"message":"slow down","type":"rate_limit_error"}}',
        mime="application/json",
        started="2025-01-01T00:00:00.000Z",
        status=429,
    )
    err["request"]["url"] = "https://api.openai.com/v1/chat/completions"
    ok = entry(
        b'data: {"object":"chat.completion.chunk","choices":[]}\n\ndata: [DONE]\n\n', started="2025-01-01T00:00:01.000Z"
    )
    ok["request"]["url"] = "https://api.openai.com/v1/chat/completions"
    rec = load_any(har(err, ok))
    attempts = [a for t in rec.turns for a in t.attempts]
    assert [(a.response or {})["status"] for a in attempts] == [429, 200]
    assert len(rec.turns) == 1  # the stream is the 429's retry


def _text_stream(*fragments: str) -> bytes:
    def ev(name: str, obj: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **obj})}\n\n"

    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {}}
    out = ev("message_start", {"message": msg})
    out += ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for f in fragments:
        out += ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f}})
    out += ev("content_block_stop", {"index": 0})
    out += ev("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})
    return (out + ev("message_stop", {})).encode()


def test_the_keys_a_har_carries_are_masked_wherever_they_show_up(capsys: pytest.CaptureFixture[str]) -> None:
    """A HAR keeps the keys its requests sent: the credential headers were dropped, but their values reached the page,
    dump and replay through the URL's query, another header, the request body and the stream echoing the key
    (whole, and split across two deltas). They are learned from the requests first, then masked everywhere."""
    from inspector.record.htmlexport import build

    key = "sk-ant-api03-" + "harCanaryKEY0123456789" * 2
    e = entry(
        _text_stream("your key is " + key[:20], key[20:] + " and again " + key),
        started="2026-01-01T00:00:00Z",
        request_body={"model": "m", "messages": [{"role": "user", "content": f"hi {key}"}]},
    )
    e["request"]["url"] = f"https://api.anthropic.com/v1/messages?api_key={key}"
    e["request"]["headers"] = [{"name": "x-api-key", "value": key}, {"name": "x-custom", "value": f"key={key}"}]
    rec = read_har(har(e))
    turns = dump_turns(rec)
    outputs = {
        "recording": json.dumps([[a.request, a.response, [r.data.decode() for r in a.reads]] for a in rec.attempts()]),
        "dump": json.dumps(turns),
        "page": json.dumps(build(rec)),
        "timing": format_timing(rec),
    }
    assert "[redacted]" in outputs["dump"]
    for name, text in outputs.items():
        for i in range(0, len(key) - 11, 4):  # no 12 characters of it, anywhere (no fragments to join either)
            assert key[i : i + 12] not in text, (name, i)

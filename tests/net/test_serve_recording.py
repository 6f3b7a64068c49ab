"""`inspector serve --recording FILE`: a recording made by `proxy --record` (in front of serve), a HAR or plain SSE
served back to the official SDK; recorded timing; recorded failed attempts answer the retries; faults on top; a
request that differs from the recorded one is answered and flagged; bad files exit 2 with one line."""

from __future__ import annotations

import argparse
import base64
import math
import threading
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from anthropic.types import Message, TextBlock

from inspector.cli.serve import _announce
from inspector.cli.serve import main as serve_main
from inspector.core.errors import FaultError, RecordingError
from inspector.net.proxy import ProxyApp
from inspector.net.recorded import DIFF_LINES, RECORDING_FAULTS, RecordingSource, recording_faults, request_diff
from inspector.net.serve import ServeApp, format_exchange
from inspector.net.server import BackgroundServer
from inspector.record.recording import RecordingWriter, read_recording
from inspector.scenarios.bundled import get_scenario
from inspector.stream.assembler import assemble
from inspector.testing.serve import API_HEADERS, KEY, RawClient, kept_exchange, messages_body


def sdk(base_url: str, **kw: Any) -> anthropic.AsyncAnthropic:
    kw.setdefault("max_retries", 0)
    return anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, **kw)


async def converse(
    base_url: str, scenario: str, *, first: str = "go", headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A whole tool-using conversation through the SDK; the assembled message of every turn."""
    sc = get_scenario(scenario)
    messages: list[Any] = [{"role": "user", "content": first}]
    out: list[dict[str, Any]] = []
    async with sdk(base_url, max_retries=3) as client:
        for _ in range(len(sc.turns)):
            async with client.messages.stream(
                model=sc.model, max_tokens=100, messages=messages, extra_headers=headers or {}
            ) as s:
                msg = (await s.get_final_message()).model_dump(mode="json", exclude_none=True)
            out.append(msg)
            content = msg["content"]
            messages.append({"role": "assistant", "content": content})
            ids = [b["id"] for b in content if b["type"] == "tool_use"]
            if not ids:
                break
            messages.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]}
            )
    return out


def _text(msg: Message) -> str:
    """The text of a message's first block (a text block)."""
    block = msg.content[0]
    assert isinstance(block, TextBlock), block
    return block.text


@pytest.fixture(scope="module")
def weather_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """weather, recorded by `proxy --record` in front of `serve`, with an http_429 on each turn (a failed attempt
    recorded before each successful one)."""
    path = tmp_path_factory.mktemp("rec") / "weather.jsonl"
    up = ServeApp("weather", "http_429:0.01", speed=math.inf)
    with BackgroundServer(up) as upstream, BackgroundServer(ProxyApp(upstream.base_url, record=path)) as px:
        import asyncio

        messages = asyncio.run(converse(px.base_url, "weather"))
    return path, messages


def test_the_recording_has_failed_attempts_and_timing(weather_recording: tuple[Path, list[dict[str, Any]]]) -> None:
    path, _ = weather_recording
    rec = read_recording(path)
    assert len(rec.turns) >= 2
    for turn in rec.turns:
        assert [(a.response or {}).get("status") for a in turn.attempts][:2] == [429, 200]


async def test_recording_served_back_gives_the_same_messages(
    weather_recording: tuple[Path, list[dict[str, Any]]],
) -> None:
    path, recorded_messages = weather_recording
    source = RecordingSource.load(path)
    assert len(source.turns) == len(recorded_messages)
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        served = await converse(srv.base_url, "weather")
        exchanges = list(srv.owner.exchanges)
    assert served == recorded_messages
    # the recorded 429 answered the first attempt of each turn, the recorded 200 the SDK's retry
    statuses = [(e.turn, e.attempt, e.status) for e in exchanges]
    assert statuses[:2] == [(0, 0, 429), (0, 1, 200)]
    assert all(e.differs is None for e in exchanges)  # the same requests as recorded
    # the assembled recording agrees
    rec = read_recording(path)
    for k, msg in enumerate(served):
        ok = next(a for a in rec.turns[k].attempts if a.response is not None and a.response["status"] == 200)
        assert assemble(ok.data).final_message()["content"] == msg["content"]


def _write(
    tmp_path: Path,
    reads: list[tuple[float, bytes]],
    *,
    status: int = 200,
    response_t: float = 0.05,
    end: str = "complete",
    request: dict[str, Any] | None = None,
) -> str:
    path = tmp_path / "hand.jsonl"
    with RecordingWriter(path, source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", "http://x/v1/messages", {}, request or messages_body())
        w.response(0, 0, response_t, status, {"content-type": "text/event-stream", "content-length": "9"})
        for t, data in reads:
            w.read(0, 0, t, data)
        w.end(0, 0, reads[-1][0] if reads else 0.0, end)
    return str(path)


SSE = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":'
    b'"assistant","model":"rec-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":'
    b'{"input_tokens":3,"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"text_delta","text":"hello"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\nevent: message_delta\ndata: '
    b'{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}'
    b'\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
]


def test_recorded_timing_becomes_the_plan(tmp_path: Path) -> None:
    source = RecordingSource.load(_write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1]), (0.6, SSE[2])]))
    plan = source.plan(0, 0)
    assert plan.header_delay == pytest.approx(0.05)
    assert [r.delay for r in plan.reads] == pytest.approx([0.05, 0.2, 0.3])
    assert [r.data for r in plan.reads] == SSE and plan.end == "eof"
    assert "content-length" not in plan.headers  # the transfer is ours, not the recorded one


async def test_recorded_timing_is_served_scaled_by_speed(tmp_path: Path) -> None:
    source = RecordingSource.load(_write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1]), (0.6, SSE[2])]))
    asked: list[float] = []

    async def sleeper(seconds: float) -> None:  # virtual time: record the wall wait asked for, return at once
        asked.append(seconds)

    app = ServeApp(recording=source, speed=2.0)
    app.pacer.sleeper = sleeper
    with BackgroundServer(app) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
            async with h.stream("POST", "/v1/messages", json=messages_body()) as r:
                chunks = [c async for c in r.aiter_raw()]
    assert b"".join(chunks) == b"".join(SSE)
    assert asked == pytest.approx([0.025, 0.025, 0.1, 0.15])  # header delay, then each read's gap, halved


async def test_faults_apply_on_top_of_a_recording(tmp_path: Path) -> None:
    source = RecordingSource.load(_write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1]), (0.6, SSE[2])]))
    body = b"".join(SSE)
    # bom and drop_byte on the plan; relay_buffer merges the reads; http_429 answers first
    assert recording_faults(source, (), 0, 0).body == body
    from inspector.net.faults import parse_faults

    assert recording_faults(source, parse_faults("bom"), 0, 0).body == b"\xef\xbb\xbf" + body
    cut = recording_faults(source, parse_faults("drop_byte:100"), 0, 0)
    assert cut.body == body[:100] and cut.end == "drop"
    assert recording_faults(source, parse_faults("drop_byte:100"), 0, 1).body == body  # the retry is clean
    merged = recording_faults(source, parse_faults("relay_buffer"), 0, 0)
    assert [r.data for r in merged.reads] == [body] and merged.reads[0].delay == pytest.approx(0.55)
    first = recording_faults(source, parse_faults("http_429"), 0, 0)
    assert first.status == 429 and recording_faults(source, parse_faults("http_429"), 0, 1).body == body
    for name in ("cr", "slow_drip", "stall", "error_event", "invalid_tool_json"):
        assert name not in RECORDING_FAULTS
        with pytest.raises(FaultError, match="cannot apply to a recording"):
            ServeApp(recording=source, faults=name)
    # over HTTP: the same request three times gets the 429, the drop (an incomplete chunked body), the recording
    with BackgroundServer(ServeApp(recording=source, faults="http_429:0.01,drop_byte:100", speed=math.inf)) as srv:
        got: list[tuple[int | str, bytes | None]] = []
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
            for _ in range(3):
                try:
                    r = await h.post("/v1/messages", json=messages_body())
                    got.append((r.status_code, r.content))
                except httpx2.RemoteProtocolError:
                    got.append(("drop", None))
        assert [g[0] for g in got] == [429, "drop", 200] and got[2][1] == body
        # (serve keeps an exchange once its answer went out: the dropped one may be kept after the next one)
        kept_exchange(srv.owner, 2)
        assert sorted((e.attempt, e.status, e.end) for e in srv.owner.exchanges) == [
            (0, 429, "eof"),
            (1, 200, "drop"),
            (2, 200, "eof"),
        ]
        c = RawClient(srv.address)
        try:
            status, _, raw = c.request(
                "/v1/messages", messages_body(), headers={**API_HEADERS, "x-inspector-fault": "cr"}
            )
            assert status == 400 and b"cannot apply to a recording" in raw
        finally:
            c.close()
    # and the SDK retries the 429 by itself
    with BackgroundServer(ServeApp(recording=source, faults="http_429:0.01", speed=math.inf)) as srv:
        async with sdk(srv.base_url, max_retries=2) as client:
            msg = await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
    assert _text(msg) == "hello"


async def test_a_differing_request_is_answered_and_flagged(tmp_path: Path) -> None:
    source = RecordingSource.load(_write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1]), (0.6, SSE[2])]))
    lines: list[str] = []
    app = ServeApp(recording=source, speed=math.inf, on_exchange=lambda ex: lines.append(format_exchange(ex)))
    with BackgroundServer(app) as srv:
        async with sdk(srv.base_url) as client:
            same = await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
            other = await client.messages.create(
                model="claude-opus-4-7", max_tokens=16, messages=[{"role": "user", "content": "something else"}]
            )
        async with httpx2.AsyncClient(base_url=srv.base_url) as h:
            listed = (await h.get("/inspector/requests")).json()["data"]
    assert _text(same) == _text(other) == "hello"  # answered either way
    assert listed[0]["differs"] is None and listed[0]["diff"] == []
    differs = listed[1]["differs"]
    assert "model 'claude-sonnet-4-6' -> 'claude-opus-4-7'" in differs and "messages differ from messages.0" in differs
    diff = "\n".join(listed[1]["diff"])
    assert '-      "content": "hi"' in diff and '+      "content": "something else"' in diff
    assert "differs from the recording" in lines[1] and "\n" not in lines[1]


def test_har_and_plain_sse_are_served(tmp_path: Path) -> None:
    body = b"".join(SSE)
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2025-01-01T00:00:00.000Z",
                    "time": 50,
                    "request": {"method": "POST", "url": "https://api.anthropic.com/v1/messages", "headers": []},
                    "response": {
                        "status": 200,
                        "headers": [{"name": "content-type", "value": "text/event-stream"}],
                        "content": {
                            "mimeType": "text/event-stream",
                            "text": base64.b64encode(body).decode(),
                            "encoding": "base64",
                        },
                    },
                    "timings": {"send": 1, "wait": 10, "receive": 39},
                }
            ],
        }
    }
    (tmp_path / "a.har").write_bytes(orjson.dumps(har))
    (tmp_path / "a.sse").write_bytes(body)
    for name in ("a.har", "a.sse"):
        source = RecordingSource.load(tmp_path / name)
        assert source.plan(0, 0).body == body and len(source.turns) == 1
        assert any("not compared" in w for w in source.warnings)  # said once, at start, not silently


def _bad_files(tmp_path: Path) -> dict[str, str]:
    good = _write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1])])
    raw = open(good, "rb").read()
    files: dict[str, str | bytes] = {
        "missing": str(tmp_path / "nope.jsonl"),
        "empty": b"",
        "header_only": raw.split(b"\n", 1)[0] + b"\n",
        "header_cut": raw[:30],
        "wrong_version": b'{"kind": "header", "format": "stream-inspector-recording", "version": 99}\n',
        "binary": bytes(range(256)) * 4,
        "har_without_sse": orjson.dumps({"log": {"version": "1.2", "entries": []}}),
        "directory": str(tmp_path),
    }
    out: dict[str, str] = {}
    for k, v in files.items():
        if isinstance(v, bytes):
            p = tmp_path / f"{k}.bin"
            p.write_bytes(v)
            out[k] = str(p)
        else:
            out[k] = v
    return out


@pytest.mark.parametrize(
    "case",
    ["missing", "empty", "header_only", "header_cut", "wrong_version", "binary", "har_without_sse", "directory"],
)
def test_bad_recordings_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    path = _bad_files(tmp_path)[case]
    with pytest.raises(RecordingError):
        RecordingSource.load(path)
    assert serve_main(["--recording", path, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inspector serve: ") and "Traceback" not in err


def test_a_truncated_recording_is_served_with_its_warnings_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = open(_write(tmp_path, [(0.1, SSE[0]), (0.3, SSE[1]), (0.6, SSE[2])]), "rb").read()
    cut = tmp_path / "cut.jsonl"
    last = raw.rstrip(b"\n").rindex(b"\n") + 1
    cut.write_bytes(raw[: last + 10])  # the last line cut short (an interrupted recording)
    source = RecordingSource.load(cut)
    assert source.warnings and "cut short" in source.warnings[0]

    _announce(argparse.Namespace(scenario="x", speed=math.inf), "http://127.0.0.1:1", (), {"recording": source})
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("inspector serve: recording cut.jsonl (1 turns)")
    assert err[1].startswith("warning: ") and "cut short" in err[1]
    assert err[-1] == "ANTHROPIC_BASE_URL=http://127.0.0.1:1"


def test_every_serve_option_names_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        serve_main(["--help"])
    out = capsys.readouterr().out
    from inspector.cli.serve import _add_arguments

    p = argparse.ArgumentParser()
    _add_arguments(p)
    for action in p._actions:
        if action.dest in ("help", "list_faults") or action.help == argparse.SUPPRESS:  # (not shown: --watch-link)
            continue
        assert action.help and "default" in action.help, action.dest
    assert "--recording" in out and "--max-body" in out and "--history" in out


# ----------------------------------------------------------------------------------------------- bounded request diffs


def _deep(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


def _deep_recording(tmp_path: Path, depth: int) -> str:
    """A recording whose request nests ``depth`` levels (written by hand: orjson writes at most 255 levels)."""
    path = tmp_path / "deep.jsonl"
    _write(tmp_path, [(0.1, SSE[0]), (0.2, SSE[1]), (0.3, SSE[2])])
    lines = (tmp_path / "hand.jsonl").read_bytes().splitlines()
    deep = b"[" * depth + b'"x"' + b"]" * depth
    lines[1] = lines[1].replace(b'"messages":[', b'"extra":' + deep + b',"messages":[', 1)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


async def test_a_recorded_request_900_levels_deep_is_answered_and_not_compared(tmp_path: Path) -> None:
    source = RecordingSource.load(_deep_recording(tmp_path, 900))
    recorded = source.recorded_request(0)
    assert recorded is not None and "extra" in recorded
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        async with sdk(srv.base_url) as client:
            msg = await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
        async with httpx2.AsyncClient(base_url=srv.base_url) as h:
            listed = (await h.get("/inspector/requests")).json()["data"]
    assert _text(msg) == "hello"
    assert listed[0]["status"] == 200
    assert listed[0]["differs"] == "the recorded request nests deeper than 200 levels: not compared"


def test_a_huge_request_diff_shows_a_window_around_the_first_difference() -> None:
    recorded: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"message {i}"} for i in range(16_000)],
    }
    got: dict[str, Any] = {"model": "m", "messages": [dict(m) for m in recorded["messages"]]}
    got["messages"][9_000] = {"role": "user", "content": "changed"}
    differs, lines = request_diff(recorded, got)
    assert differs == "messages differ from messages.9000 (16000 recorded, 16000 received)"
    assert "messages.8998 to messages.9037 only" in lines[0]
    assert '-      "content": "message 9000",' in lines and '+      "content": "changed",' in lines
    assert len(lines) <= DIFF_LINES + 1


async def test_the_request_diff_runs_off_the_event_loop_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diff that never ends (here: one waiting on an event) delays neither its own response nor any other
    request; past the budget the exchange says so, and the printer gets the line then."""
    import inspector.net.serve as serve_mod

    release = threading.Event()
    started = threading.Event()

    def stuck(recorded: object, got: object) -> tuple[str, list[str]]:
        started.set()
        release.wait(30)
        return "late", []

    monkeypatch.setattr(serve_mod, "request_diff", stuck)
    source = RecordingSource.load(_write(tmp_path, [(0.1, SSE[0]), (0.2, SSE[1]), (0.3, SSE[2])]))
    printed: list[str | None] = []
    app = ServeApp(recording=source, speed=math.inf, diff_budget=0.3, on_exchange=lambda ex: printed.append(ex.differs))
    try:
        with BackgroundServer(app) as srv:
            async with sdk(srv.base_url) as client:
                msg = await client.messages.create(
                    model="claude-opus-4-7", max_tokens=16, messages=[{"role": "user", "content": "other"}]
                )
                assert _text(msg) == "hello" and started.is_set()  # answered while the diff is stuck
                async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
                    assert (await h.get("/v1/models")).status_code == 200  # the loop is free
                    listed = (await h.get("/inspector/requests")).json()["data"]
    finally:
        release.set()
    first = next(x for x in listed if x["path"] == "/v1/messages")
    assert first["differs"] == "not compared: the request diff took more than its 0.3 s"
    assert printed[0] == first["differs"]


async def test_a_recorded_tool_input_beyond_64_bits_is_served_exact_to_a_non_streamed_request(tmp_path: Path) -> None:
    """A recorded stream whose tool input holds an integer beyond 64 bits, asked for with stream: false: serve wrote
    the assembled message with orjson, which refuses it ("Exception in ASGI application", no answer). It answers the
    message, the integer exact (and a request differing from the recorded one is still diffed)."""
    from inspector.record.har import load_any
    from inspector.testing.streamgen import sse, tool_turn

    path = tmp_path / "big.sse"
    path.write_bytes(sse(*tool_turn(['{"a": 1844674407370955161', "55161}"])))
    source = RecordingSource(load_any(path))
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
            r = await h.post("/v1/messages", json=messages_body(stream=False, big=18446744073709551616))
    assert r.status_code == 200, r.text
    assert b'"input":{"a":184467440737095516155161}' in r.content

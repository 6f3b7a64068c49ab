"""Live faults: `inspector proxy --fault ...` / the ``x-inspector-fault`` header applied to what a real upstream sends
(here a clean `inspector serve`). Differential: each fault applied live lands where `serve` puts the same fault
(same events, same cut), and the recording marks what was injected."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.errors import FaultError
from inspector.net.faults import BOM, render_faulted
from inspector.net.livefaults import LiveStream, parse_live_faults
from inspector.net.proxy import ProxyApp, ProxyExchange
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.record.reader import RecordedAttempt
from inspector.record.recording import read_recording
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.fakeapi import message_seed
from inspector.stream.sse import SSEDecoder
from inspector.testing.hyp import examples

USER = [{"role": "user", "content": "why?"}]
BODY = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": USER})
SEED = message_seed({"messages": USER})  # what serve seeds this conversation's message ids with


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, echo_model=False)) as srv:
        yield srv


def events(body: bytes, pings: bool = False) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for e in SSEDecoder().feed(body):
        if e.event == "ping" and not pings:
            continue
        out.append((e.event, orjson.loads(e.data)))
    return out


def content(body: bytes) -> tuple[list[tuple[object, ...]], object]:
    """(blocks as (index, type, text or raw JSON, closed), stop_reason) of a stream, whatever its chunking."""
    blocks: dict[int, list[Any]] = {}
    stop = None
    for name, d in events(body):
        if name == "content_block_start":
            blocks[d["index"]] = [d["index"], d["content_block"]["type"], "", False]
        elif name == "content_block_delta":
            delta = d["delta"]
            blocks[d["index"]][2] += delta.get("text") or delta.get("partial_json") or delta.get("thinking") or ""
        elif name == "content_block_stop":
            blocks[d["index"]][3] = True
        elif name == "message_delta":
            stop = d["delta"]["stop_reason"]
    return [tuple(b) for b in blocks.values()], stop


async def fetch(
    h: httpx2.AsyncClient, headers: dict[str, str], hang_events: int | None = None
) -> tuple[int, bytes, bool]:
    """(status, body, dropped) of one streamed request; with ``hang_events`` the client leaves after that many
    events (pings included)."""
    body = b""
    try:
        async with h.stream("POST", "/v1/messages", content=BODY, headers=headers) as r:
            async for chunk in r.aiter_raw():
                body += chunk
                if hang_events is not None and len(events(body, pings=True)) >= hang_events:
                    break
            return r.status_code, body, False
    except httpx2.RemoteProtocolError:
        return 200, body, True


TRANSPORT = ("error_event", "drop_event", "drop_in_tool", "drop_byte", "stall")

# scenario, fault, what to compare with serve's rendering of the same fault
CASES = [
    ("parse_date", "error_event:3", "events"),
    ("parse_date", "drop_event:4", "events"),
    ("parse_date", "drop_in_tool:2", "events"),
    ("weather", "drop_byte:333", "bytes"),
    ("parse_date", "stall:2", "events"),
    ("parse_date", "split_events", "bytes"),
    ("parse_date", "cr", "bytes"),
    ("weather", "crlf", "bytes"),
    ("weather", "bom", "bytes"),
    ("parse_date", "invalid_tool_json", "content"),
    ("parse_date", "max_tokens_tool", "content"),
    ("weather", "max_tokens_tool", "content"),
]


@pytest.mark.parametrize(("name", "fault", "compare"), CASES)
async def test_live_fault_lands_where_serve_puts_it(
    upstream: BackgroundServer, tmp_path: Path, name: str, fault: str, compare: str
) -> None:
    record = tmp_path / "f.jsonl"
    sc = get_scenario(name)
    clean = render_faulted(sc, None, 0, 0, seed=SEED)
    served = render_faulted(sc, fault, 0, 0, seed=SEED)  # the same fault, as serve renders it
    hdr = {"x-inspector-scenario": name, "x-inspector-fault": fault, "x-inspector-session": f"live-{fault}"}
    loop = asyncio.get_running_loop()
    ended: asyncio.Queue[ProxyExchange] = asyncio.Queue()
    proxy = ProxyApp(
        upstream.base_url,
        record=record,
        fault_header=True,
        on_exchange=lambda ex: loop.call_soon_threadsafe(ended.put_nowait, ex),
    )
    with BackgroundServer(proxy) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            hang = len(events(served.body, pings=True)) if served.end == "hang" else None
            status, body, dropped = await fetch(h, hdr, hang)
            first = await asyncio.wait_for(ended.get(), 30)
            retry = await fetch(h, hdr)  # the same request again: a retry when the first failed or was cut
    assert status == 200
    assert dropped == (served.end == "drop")
    if compare == "bytes":
        assert body == served.body
    elif compare == "events":
        assert events(body, pings=True) == events(served.body, pings=True)
    else:
        assert content(body) == content(served.body)
        assert content(body) != content(clean.body)
    if fault == "split_events":  # no read of the recording holds a whole event
        (att, *_) = read_recording(record).attempts()
        assert all(r.data.count(b"\n\n") <= 1 for r in att.reads) and len(att.reads) >= 2 * len(clean.events)
    rec = read_recording(record)
    all_marks = [o for o in rec.observations if o.get("type") == "fault_injected"]
    marks = [o for o in all_marks if (o["turn"], o["attempt"]) == (0, 0)]
    assert len(marks) == 1 and marks[0]["fault"] in (fault, fault.split(":")[0])
    # content and format faults apply to every attempt, transport faults to the first that streams only
    assert len(all_marks) == (1 if fault.split(":")[0] in TRANSPORT else 2)
    assert first.fault is not None

    def started(a: RecordedAttempt) -> float:
        assert a.request is not None
        t: float = a.request["t"]
        return t

    attempts = sorted(rec.attempts(), key=started)
    transport = fault.split(":")[0] in TRANSPORT
    if transport:  # the retry is clean (transport faults hit the first streamed attempt only)
        assert [(a.turn, a.attempt) for a in attempts] == [(0, 0), (0, 1)]
        assert (
            retry[1] == render_faulted(sc, None, 0, 1, seed=SEED).body
        )  # upstream's attempt 1 (its ids are per attempt)
        assert attempts[0].data == body
    expected_at = {
        "error_event:3": 3,
        "drop_event:4": 4,
        "stall:2": 1,
        "bom": 0,
    }.get(fault)
    if expected_at is not None:
        assert marks[0]["at_event"] == expected_at


async def test_http_429_is_answered_by_the_proxy_and_the_retry_goes_upstream(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    record = tmp_path / "h.jsonl"
    app: ServeApp = upstream.owner
    hdr = {"x-inspector-scenario": "weather", "x-inspector-session": "live-429"}
    with BackgroundServer(ProxyApp(upstream.base_url, record=record, faults="http_429:2,http_529:0")) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            before = len(app.exchanges)
            r1 = await h.post("/v1/messages", content=BODY, headers=hdr)
            r2 = await h.post("/v1/messages", content=BODY, headers=hdr)
            seen_upstream = len(app.exchanges) - before
            r3 = await h.post("/v1/messages", content=BODY, headers=hdr)
    assert (r1.status_code, r1.headers["retry-after"], r1.headers["retry-after-ms"]) == (429, "2", "2000")
    assert r1.json()["error"]["type"] == "rate_limit_error"
    assert (r2.status_code, r2.json()["error"]["type"]) == (529, "overloaded_error")
    assert seen_upstream == 0  # upstream never saw the injected attempts
    assert r3.status_code == 200 and r3.content == render_faulted(get_scenario("weather"), None, 0, 0, seed=SEED).body
    rec = read_recording(record)
    answered = []
    for a in rec.attempts():
        assert a.response is not None
        answered.append((a.turn, a.attempt, a.response["status"]))
    assert answered == [
        (0, 0, 429),
        (0, 1, 529),
        (0, 2, 200),
    ]
    # an attempt answered with an error status failed, saying why (they ended "complete", no reason)
    ends = [(a.end or {}).get("status") for a in rec.attempts()]
    reasons = [str((a.end or {}).get("reason")) for a in rec.attempts()]
    assert ends == ["http_error", "http_error", "complete"]  # (as the loop's recording of such a try says it)
    assert reasons[0].startswith("HTTP 429 rate_limit_error: ") and reasons[1].startswith("HTTP 529 overloaded_error: ")
    marks = [(o["fault"], o["attempt"]) for o in rec.observations if o.get("type") == "fault_injected"]
    assert marks == [("http_429:2", 0), ("http_529:0", 1)]


async def test_the_fault_header_is_per_request_and_checked(upstream: BackgroundServer) -> None:
    hdr = {"x-inspector-scenario": "weather"}
    with BackgroundServer(ProxyApp(upstream.base_url, fault_header=True)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            bad = await h.post("/v1/messages", content=BODY, headers={**hdr, "x-inspector-fault": "nope"})
            slow = await h.post("/v1/messages", content=BODY, headers={**hdr, "x-inspector-fault": "slow_drip"})
            plain = await h.post("/v1/messages", content=BODY, headers={**hdr, "x-inspector-session": "plain"})
            bom = await h.post(
                "/v1/messages", content=BODY, headers={**hdr, "x-inspector-fault": "bom", "x-inspector-session": "b"}
            )
    assert bad.status_code == 400 and "unknown fault 'nope'" in bad.json()["error"]["message"]
    assert slow.status_code == 400 and "does not apply to a live stream" in slow.json()["error"]["message"]
    assert plain.status_code == 200 and not plain.content.startswith(BOM)
    assert bom.content.startswith(BOM) and bom.content[3:] == plain.content


def test_parse_live_faults() -> None:
    assert parse_live_faults(None) is None and parse_live_faults("none") is None
    lf = parse_live_faults("drop_event:5,bom")
    assert lf is not None and str(lf) == "drop_event:5,bom"
    with pytest.raises(FaultError):
        parse_live_faults("relay_buffer")
    with pytest.raises(FaultError):
        parse_live_faults("drop_event,stall")
    assert lf.stream(0) is not None
    s1 = lf.stream(1)
    assert s1 is not None and s1.transport is None
    assert isinstance(lf.stream(0), LiveStream)


def test_cli_rejects_a_fault_that_is_not_live(capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.cli.proxy import main

    assert main(["--listen", "127.0.0.1:0", "--headless", "--fault", "relay_buffer"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("inspector proxy: fault relay_buffer does not apply to a live stream") and "Traceback" not in err
    )


# ----------------------------------------------------------------------------------------------- fuzz: the live reader


class _Upstream:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(points)]


async def _run(fault: str, chunks: list[bytes]) -> tuple[bytes, dict[str, str | None], list[tuple[str, int | None]]]:
    from inspector.net.livefaults import run_live

    lf = parse_live_faults(fault)
    assert lf is not None
    stream = lf.stream(0)
    assert stream is not None
    out: list[bytes] = []
    marks: list[tuple[str, int | None]] = []
    state: dict[str, str | None] = {"end": "complete", "reason": None}

    async def emit(b: bytes) -> None:
        out.append(b)

    await asyncio.wait_for(run_live(stream, _Upstream(chunks), emit, state, lambda f, at: marks.append((f, at))), 10)
    return b"".join(out), state, marks


_sse_pieces = st.sampled_from(
    [
        b"event: ping\ndata: {}\n\n",
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use"}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"partial_json":"{\\"a\\": \\"bc"}}\n\n',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{}}\n\n',
        b"event: message_stop\r\ndata: {}\r\n\r\n",
        b"event: content_block_delta\n\n",  # no data: a ping, whatever its name
        b"data: not json\r\r",
        b"\n",
        b"\r",
        b"event: x\n",
    ]
)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.one_of(st.binary(max_size=300), st.lists(_sse_pieces, max_size=12).map(b"".join)), st.lists(st.integers(0, 400))
)
async def test_fuzz_live_reader_passes_any_bytes_through_unchanged_when_no_fault_fires(
    data: bytes, cuts: list[int]
) -> None:
    """Any upstream bytes, cut anywhere: with a fault that never fires (a drop after more bytes than there are) the
    client gets exactly upstream's bytes; no exception, no hang."""
    got, state, marks = await _run(f"drop_byte:{len(data) + 1}", _chunked(data, cuts))
    assert got == data and state["end"] == "complete" and marks == []


@settings(max_examples=examples(150), deadline=None)
@given(
    st.one_of(st.binary(max_size=300), st.lists(_sse_pieces, max_size=12).map(b"".join)),
    st.lists(st.integers(0, 400)),
    st.sampled_from(["error_event:1", "drop_event:2", "invalid_tool_json", "max_tokens_tool", "split_events", "cr"]),
)
async def test_fuzz_live_faults_never_raise_on_garbage(data: bytes, cuts: list[int], fault: str) -> None:
    got, state, _ = await _run(fault, _chunked(data, cuts))
    assert state["end"] in ("complete", "dropped")
    if fault in ("split_events",):  # splitting only moves write boundaries
        assert got == data


def _turn_body(question: str) -> bytes:  # a request of its own conversation (a new history): a turn of its own
    return orjson.dumps(
        {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": question}]}
    )


async def _two_turns(px_url: str, headers: dict[str, str], questions: tuple[str, str] = ("one?", "two?")) -> list[bool]:
    """Whether each of two different turns' first attempts was dropped (the same question again would be a retry)."""
    dropped = []
    async with httpx2.AsyncClient(base_url=px_url, timeout=30) as h:
        for q in questions:
            try:
                async with h.stream("POST", "/v1/messages", content=_turn_body(q), headers=headers) as r:
                    async for _ in r.aiter_raw():
                        pass
                dropped.append(False)
            except httpx2.RemoteProtocolError:
                dropped.append(True)
    return dropped


@pytest.mark.parametrize(
    ("spec", "want"),
    [("drop_event:3", [True, False]), ("drop_event:3@once", [True, False]), ("drop_event:3@turn", [True, True])],
)
async def test_a_live_transport_fault_is_once_by_default_and_each_turn_with_turn(
    upstream: BackgroundServer, spec: str, want: list[bool]
) -> None:
    hdr = {"x-inspector-scenario": "weather"}
    with BackgroundServer(ProxyApp(upstream.base_url, faults=spec)) as px:
        assert await _two_turns(px.base_url, hdr) == want


async def test_an_http_fault_at_once_answers_one_turns_attempts_only(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    hdr = {"x-inspector-scenario": "weather"}
    with BackgroundServer(ProxyApp(upstream.base_url, faults="http_529:0@once")) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            first = await h.post("/v1/messages", content=_turn_body("one?"), headers=hdr)
            retry = await h.post("/v1/messages", content=_turn_body("one?"), headers=hdr)  # its next attempt
            other = await h.post("/v1/messages", content=_turn_body("two?"), headers=hdr)
    assert (first.status_code, retry.status_code, other.status_code) == (529, 200, 200)


async def test_the_same_fault_header_keeps_its_once_state(upstream: BackgroundServer) -> None:
    hdr = {"x-inspector-scenario": "weather", "x-inspector-fault": "drop_event:3"}
    with BackgroundServer(ProxyApp(upstream.base_url, fault_header=True)) as px:
        assert await _two_turns(px.base_url, hdr) == [True, False]
        turn = {**hdr, "x-inspector-fault": "drop_event:3@turn"}
        assert await _two_turns(px.base_url, turn, ("three?", "four?")) == [True, True]


def test_a_client_varying_the_fault_header_cannot_grow_the_proxys_memory() -> None:
    # hostile input: every request names other faults (or garbage); the per-header state stays bounded, and an
    # invalid header is an error, never kept
    app = ProxyApp("http://127.0.0.1:9", fault_header=True)
    for i in range(2000):
        assert app._header_faults(f"drop_event:{i % 900 + 1}@turn") is not None
        assert isinstance(app._header_faults(f"nope{i}"), str)
    assert len(app._header_live) <= 256
    assert app._header_faults("drop_event:5") is app._header_faults("drop_event:5")  # the same state per value

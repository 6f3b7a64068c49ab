"""`inspector proxy` under stress and failure: its own headers, the retry rule, the upstream pool (sized, and a clear
503 when full), clients that leave before upstream's headers (no wedge), upstream timeouts, a recording that cannot
be written, and shutdown with open streams. Real sockets on loopback; upstreams are small ASGI apps whose answers
the tests release through events (no sleeps as synchronization)."""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import math
import re
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, cast

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net.faults import render_faulted
from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.record.reader import RecordedAttempt
from inspector.record.recording import read_recording
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.fakeapi import message_seed
from inspector.testing.hyp import examples

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

KEY = "sk-ant-api03-CANARY-robust-0123456789abcdefghij"
USER: list[Any] = [{"role": "user", "content": "hello"}]
BODY: dict[str, Any] = {"model": "m", "max_tokens": 5, "stream": True, "messages": USER}
SEED = message_seed({"messages": USER})  # what serve seeds this conversation's message ids with
SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    b'"model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}'
    b"\n\n"
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":"hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


class Gate:
    """An upstream ASGI app whose answers wait for the test: requests to ``/v1/messages`` are counted on arrival
    (``arrived``, thread-safe), then wait until ``release()``; ``/fast`` paths answer at once. It notes every
    request that saw its client (the proxy) go away (``disconnects``). ``mode``: "sse" (a complete stream),
    "silent" (headers, then nothing)."""

    def __init__(self, mode: str = "sse") -> None:
        self.mode = mode
        self.arrived = 0
        self.disconnects = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: asyncio.Event | None = None
        self.watchers: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.released = False

    def when_arrived(self, n: int) -> asyncio.Event:
        """An event (of the caller's loop) set once ``n`` requests arrived upstream."""
        ev = asyncio.Event()
        with self._lock:
            if self.arrived >= n:
                ev.set()
            else:
                self.watchers.append((n, asyncio.get_running_loop(), ev))
        return ev

    def release(self) -> None:
        with self._lock:
            self.released = True
            if self._loop is not None and self._open is not None:
                self._loop.call_soon_threadsafe(self._open.set)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        if scope["path"].startswith("/fast"):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"fast"})
            return
        with self._lock:
            if self._open is None:
                self._loop, self._open = asyncio.get_running_loop(), asyncio.Event()
                if self.released:
                    self._open.set()
            self.arrived += 1
            for n, loop, ev in self.watchers:
                if self.arrived >= n:
                    loop.call_soon_threadsafe(ev.set)
        opened = asyncio.ensure_future(self._open.wait())
        gone = asyncio.ensure_future(receive())  # the body was read: the next message is the disconnect
        done, _ = await asyncio.wait({opened, gone}, return_when=asyncio.FIRST_COMPLETED)
        if gone in done:
            opened.cancel()
            with self._lock:
                self.disconnects += 1
            return
        gone.cancel()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if self.mode == "silent":
            await asyncio.Event().wait()
        await send({"type": "http.response.body", "body": SSE})


def _post(
    client: httpx2.AsyncClient, path: str = "/v1/messages", body: dict[str, Any] | None = None, /, **headers: str
) -> Coroutine[Any, Any, httpx2.Response]:
    return client.post(path, content=orjson.dumps(body or BODY), headers={"x-api-key": KEY, **headers})


# ----------------------------------------------------------------------------------------------- headers


class _DateApp:
    """An upstream that sends its own date header (and uvicorn adds none to it)."""

    uvicorn_options: dict[str, Any] = {"date_header": False}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"date", b"Mon, 01 Jan 2001 00:00:00 GMT")],
            }
        )
        await send({"type": "http.response.body", "body": b"ok"})


async def test_response_headers_are_upstreams_only() -> None:
    """One date header (upstream's), no server header of the proxy's (uvicorn adds neither for the proxy)."""
    with BackgroundServer(_DateApp()) as up, BackgroundServer(ProxyApp(up.base_url)) as px:
        async with httpx2.AsyncClient() as h:
            direct = await h.get(f"{up.base_url}/x")
            via = await h.get(f"{px.base_url}/x")
    assert via.headers.get_list("date") == ["Mon, 01 Jan 2001 00:00:00 GMT"]
    assert direct.headers.get_list("date") == via.headers.get_list("date")
    assert "server" not in via.headers
    assert [k for k, _ in via.headers.raw if k.lower() not in (b"content-length", b"transfer-encoding")] == [
        k for k, _ in direct.headers.raw if k.lower() not in (b"content-length", b"transfer-encoding")
    ]


# ----------------------------------------------------------------------------------------------- the retry rule


def _sdk(base_url: str, retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=base_url, api_key=KEY, max_retries=retries, http_client=httpx2.AsyncClient(timeout=30)
    )


async def _stream(client: anthropic.AsyncAnthropic, headers: dict[str, str], messages: list[Any] = USER) -> str | None:
    try:
        async with client.messages.stream(model="m", max_tokens=5, messages=messages, extra_headers=headers) as s:
            m = await s.get_final_message()
        return m.stop_reason
    except (anthropic.APIError, httpx2.HTTPError):
        return None


@pytest.fixture(scope="module")
def serve() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, echo_model=False)) as srv:
        yield srv


async def test_identical_requests_after_a_success_are_new_turns(serve: BackgroundServer, tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    with BackgroundServer(ProxyApp(serve.base_url, record=record)) as px:
        c = _sdk(px.base_url)
        try:
            for i in range(3):
                assert await _stream(c, {"x-inspector-scenario": "weather", "x-inspector-session": f"s{i}"})
        finally:
            await c.close()
    assert [(a.turn, a.attempt) for a in read_recording(record).attempts()] == [(0, 0), (1, 0), (2, 0)]


async def test_concurrent_identical_requests_are_separate_turns(tmp_path: Path) -> None:
    gate = Gate()
    record = tmp_path / "c.jsonl"
    n = 12
    with BackgroundServer(gate) as up, BackgroundServer(ProxyApp(up.base_url, record=record)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            # identical requests are told apart by a session header (without one, an identical request while the
            # first has not ended well is its retry: the documented limit of the retry rule)
            tasks = [asyncio.ensure_future(_post(h, **{"x-inspector-session": f"s{i}"})) for i in range(n)]
            await asyncio.wait_for(gate.when_arrived(n).wait(), 30)  # all in flight at once
            gate.release()
            rs = await asyncio.gather(*tasks)
    assert all(r.status_code == 200 and r.content == SSE for r in rs)
    got = sorted((a.turn, a.attempt) for a in read_recording(record).attempts())
    assert got == [(t, 0) for t in range(n)]


@pytest.mark.parametrize(
    ("fault", "first_end"),
    [("http_429:0", "http_error"), ("drop_event:3", "failed"), ("error_event:2", "failed"), ("stall:0", None)],
)
async def test_a_repeat_after_a_failed_or_cut_attempt_is_its_retry(
    serve: BackgroundServer, tmp_path: Path, fault: str, first_end: str | None
) -> None:
    """429 (an error status), a dropped connection, a stream cut by an error event (no message_stop) and a stream
    the client gave up on: the identical request that follows is attempt 2 of the same turn; a later identical
    request after the successful retry is a new turn. The stream cut by an error event is a failed attempt, as the
    loop records the same bytes (the proxy said "complete": its transport ended well)."""
    record = tmp_path / "f.jsonl"
    hdr = {"x-inspector-scenario": "weather", "x-inspector-session": f"retry-{fault}", "x-inspector-fault": fault}
    plan = render_faulted(get_scenario("weather"), fault, 0, 0)
    loop = asyncio.get_running_loop()
    first_done = asyncio.Event()
    proxy = ProxyApp(serve.base_url, record=record, on_exchange=lambda ex: loop.call_soon_threadsafe(first_done.set))
    with BackgroundServer(proxy) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            if first_end is None:  # a stall: the client leaves once it has what upstream sends before hanging
                async with h.stream("POST", "/v1/messages", content=orjson.dumps(BODY), headers=hdr) as r:
                    got = b""
                    async for chunk in r.aiter_raw():
                        got += chunk
                        if len(got) >= len(plan.body):
                            break
                # the retry rule needs the first attempt to have ended: until then a repeat is a concurrent request
                await asyncio.wait_for(first_done.wait(), 30)
            else:
                with pytest.raises(httpx2.HTTPError) if fault.startswith("drop") else _nothing():
                    await _post(h, **hdr)
            second = await _post(h, **hdr)
            third = await _post(h, **hdr)
    assert second.status_code == third.status_code == 200
    attempts = sorted(read_recording(record).attempts(), key=_requested_at)
    assert [(a.turn, a.attempt) for a in attempts] == [(0, 0), (0, 1), (1, 0)]
    assert [(a.end or {}).get("status") for a in attempts] == [first_end or "cancelled", "complete", "complete"]
    if fault.startswith("error_event"):  # why, in the loop's words: the error event's type and message
        error = next(
            orjson.loads(line[6:]) for line in plan.body.split(b"\n") if line.startswith(b'data: {"type":"error"')
        )
        reason = f"error event: {error['error']['type']}: {error['error']['message']}"
        assert (attempts[0].end or {}).get("reason") == reason


def _requested_at(a: RecordedAttempt) -> float:
    assert a.request is not None  # every recorded attempt starts with its request
    t: float = a.request["t"]
    return t


class _nothing:
    def __enter__(self) -> _nothing:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["repeat", "next"]), st.booleans()), max_size=40))
def test_retry_rule_property(ops: list[tuple[str, bool]]) -> None:
    """Sequential requests of one agent, each either repeating its previous request or continuing it, and failing
    or not: a repeat is the next attempt of the same turn exactly when the previous attempt did not end well (the
    retry rule, now by conversation: docs/serve-and-proxy.md "Turns and attempts"); a repeat after a good end is a
    new conversation's turn; every other request opens the next global turn. (Before conversations, this pinned the
    failed-attempt memory by body digest, which it replaces.)"""
    proxy = ProxyApp("http://127.0.0.1:9")
    from inspector.net.turns import ProxyExchange

    messages = [{"role": "user", "content": "hello"}]
    turns = 0
    last: tuple[int, int, bool] | None = None  # (turn, attempt, ended well) of the previous request
    for i, (op, failed) in enumerate(ops):
        if op == "next" and last is not None:
            messages = [*messages, {"role": "assistant", "content": f"a{i}"}, {"role": "user", "content": f"u{i}"}]
        body = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": messages})
        ex = ProxyExchange("POST", "/v1/messages")
        a, parsed = proxy.tracker.assign(ex, "POST", "/v1/messages", [], body)
        track = proxy.tracker.new_track(ex, a, 0.0, parsed)
        if op == "repeat" and last is not None and not last[2]:
            assert (track.turn, track.attempt, a.how) == (last[0], last[1] + 1, "retry")
        else:
            assert (track.turn, track.attempt) == (turns, 0)
            turns += 1
        proxy.tracker.ended_well(track, not failed)
        last = (track.turn, track.attempt, not failed)
    assert proxy.turns == turns


# ----------------------------------------------------------------------------------------------- pool, wedge


async def test_more_than_100_concurrent_streams_complete() -> None:
    """The old pool held 100 connections: the 101st stream waited 30 s, then 502. 150 streams all in flight at once
    (upstream answers only when all arrived) complete byte-exact."""
    gate = Gate()
    n = 150
    proxy = ProxyApp("http://placeholder")
    with BackgroundServer(gate) as up:
        proxy.upstream = up.base_url
        with BackgroundServer(proxy) as px:
            limits = httpx2.Limits(max_connections=n + 10)
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=60, limits=limits) as h:
                tasks = [asyncio.ensure_future(_post(h)) for _ in range(n)]
                await asyncio.wait_for(gate.when_arrived(n).wait(), 60)
                assert proxy.active == n
                gate.release()
                rs = await asyncio.gather(*tasks)
    assert [r.status_code for r in rs] == [200] * n and all(r.content == SSE for r in rs)


async def test_a_full_pool_gives_a_clear_503_at_once() -> None:
    gate = Gate()
    proxy = ProxyApp("http://placeholder", max_connections=2)
    with BackgroundServer(gate) as up:
        proxy.upstream = up.base_url
        with BackgroundServer(proxy) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
                held = [asyncio.ensure_future(_post(h)) for _ in range(2)]
                await asyncio.wait_for(gate.when_arrived(2).wait(), 30)
                # bounded by a timeout far below the old 30 s pool wait: the answer does not wait for a connection
                busy = await asyncio.wait_for(_post(h), 5)
                gate.release()
                rs = await asyncio.gather(*held)
                after = await _post(h)
    assert busy.status_code == 503
    err = busy.json()["error"]
    assert err["message"] == "inspector proxy: all 2 upstream connections are busy (--max-connections)"
    assert "upstream" in err["message"] and "unreachable" not in err["message"]
    assert [r.status_code for r in rs] == [200, 200] and after.status_code == 200


async def test_clients_leaving_before_headers_do_not_wedge_the_proxy(tmp_path: Path) -> None:
    """Many clients leave while upstream holds its headers back: each upstream request is cancelled (its
    connection freed), so a normal request right after gets its answer at once."""
    gate = Gate()
    record = tmp_path / "w.jsonl"
    proxy = ProxyApp("http://placeholder", max_connections=10, record=record)
    n = 30  # three times the pool
    with BackgroundServer(gate) as up:
        proxy.upstream = up.base_url
        with BackgroundServer(proxy) as px:
            for wave in range(3):
                async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
                    tasks = [asyncio.ensure_future(_post(h)) for _ in range(n // 3)]
                    await asyncio.wait_for(gate.when_arrived((wave + 1) * n // 3).wait(), 30)
                    for t in tasks:
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                # closing the client closes its connections: the proxy sees each client go
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
                fast = await asyncio.wait_for(_post(h, "/fast"), 5)
                for _ in range(200):  # bounded: until the proxy has noted every departure
                    if proxy.active == 0 and len(proxy.exchanges) >= n + 1:
                        break
                    await asyncio.sleep(0.01)
    assert fast.status_code == 200 and fast.content == b"fast"
    assert proxy.active == 0
    cancelled = [e for e in proxy.exchanges if e.end == "cancelled"]
    assert len(cancelled) == n
    ends = [a.end for a in read_recording(record).attempts()]
    assert len(ends) == n and all(e is not None and e["status"] == "cancelled" for e in ends)


# ----------------------------------------------------------------------------------------------- timeouts


async def test_read_timeout_before_headers_is_a_504_and_after_headers_a_drop(tmp_path: Path) -> None:
    silent_headers = Gate()  # never released: no headers
    silent_body = Gate(mode="silent")
    record = tmp_path / "t.jsonl"
    with BackgroundServer(silent_headers) as up1, BackgroundServer(silent_body) as up2:
        p1 = ProxyApp(up1.base_url, read_timeout=0.3)
        p2 = ProxyApp(up2.base_url, read_timeout=0.3, record=record)
        with BackgroundServer(p1) as px1, BackgroundServer(p2) as px2:
            silent_body.release()
            async with httpx2.AsyncClient(timeout=30) as h:
                r1 = await _post(h, f"{px1.base_url}/v1/messages")
                with pytest.raises(httpx2.RemoteProtocolError):
                    await _post(h, f"{px2.base_url}/v1/messages")
    assert r1.status_code == 504
    assert r1.json()["error"]["message"] == (
        "inspector proxy: upstream sent no response headers within 0.3 s (--read-timeout)"
    )
    (att,) = read_recording(record).attempts()
    assert att.end is not None and att.end["status"] == "failed" and "--read-timeout" in att.end["reason"]


async def test_upstream_unreachable_is_502_not_a_hang() -> None:
    with BackgroundServer(ServeApp()) as dead:
        url = dead.base_url
    with BackgroundServer(ProxyApp(url, connect_timeout=2)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            r = await _post(h)
    assert r.status_code == 502 and "upstream unreachable" in r.json()["error"]["message"]


# ----------------------------------------------------------------------------------------------- recording failures


class FullDisk(io.RawIOBase):
    """A binary file that takes ``room`` bytes, then fails every write with ENOSPC (and every flush after)."""

    def __init__(self, room: int, err: int = errno.ENOSPC) -> None:
        self.room = room
        self.err = err
        self.data = bytearray()
        self.failed = False

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:  # (any buffer, as RawIOBase.write takes)
        if self.failed or len(self.data) + len(b) > self.room:
            self.failed = True
            raise OSError(self.err, "No space left on device" if self.err == errno.ENOSPC else "File too large")
        self.data += b
        return len(b)


@pytest.mark.parametrize("room", [0, 600, 3000])
async def test_a_failed_recording_write_stops_the_recording_not_the_stream(
    serve: BackgroundServer, room: int, caplog: pytest.LogCaptureFixture
) -> None:
    disk = FullDisk(room, errno.EFBIG if room == 600 else errno.ENOSPC)
    warnings: list[str] = []
    plan = render_faulted(get_scenario("weather"), None, 0, 0, seed=SEED)
    with caplog.at_level(logging.WARNING):
        proxy = ProxyApp(
            serve.base_url, record=cast(IO[bytes], disk), on_warning=warnings.append
        )  # room 0: not even the header
        with BackgroundServer(proxy) as px:
            c = _sdk(px.base_url)
            try:
                bodies = []
                async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
                    for i in range(4):
                        r = await _post(
                            h, **{"x-inspector-scenario": "weather", "x-inspector-session": f"disk{room}-{i}"}
                        )
                        bodies.append((r.status_code, r.content))
            finally:
                await c.close()
    assert bodies == [(200, plan.body)] * 4  # every stream passed whole
    assert len(warnings) == 1 and "recording stopped" in warnings[0] and "still forwarding" in warnings[0]
    assert proxy.recording_error == warnings[0]
    assert "Traceback" not in caplog.text
    assert all(e.end == "complete" for e in proxy.exchanges)


async def test_failed_recording_at_open_is_a_usage_error_of_the_cli(tmp_path: Path) -> None:
    from inspector.cli.common import record_problem

    problem = record_problem(tmp_path / "no" / "such" / "dir.jsonl")
    assert problem is not None and problem.startswith("cannot write the recording")


# ----------------------------------------------------------------------------------------------- shutdown


async def test_shutdown_with_open_streams_ends_every_attempt_without_tracebacks(
    serve: BackgroundServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = Gate()  # holds its headers
    record = tmp_path / "s.jsonl"
    plan = render_faulted(get_scenario("weather"), "stall:0", 0, 0)
    with caplog.at_level(logging.DEBUG):
        with BackgroundServer(gate) as held:
            proxy = ProxyApp(serve.base_url, record=record)
            px = BackgroundServer(proxy).start()
            h = httpx2.AsyncClient(base_url=px.base_url, timeout=30)
            try:
                hdr = {"x-inspector-scenario": "weather", "x-inspector-fault": "stall:0"}
                streams = []
                for i in range(3):  # streams that hang after their first event
                    cm = h.stream(
                        "POST",
                        "/v1/messages",
                        content=orjson.dumps(BODY),
                        headers={**hdr, "x-inspector-session": f"sd{i}"},
                    )
                    r = await cm.__aenter__()
                    it = r.aiter_raw()
                    got = b""
                    while len(got) < len(plan.body):
                        got += await it.__anext__()
                    streams.append((cm, it))
                proxy.upstream = held.base_url  # two more that wait for headers that never come
                waiting = [asyncio.ensure_future(_post(h)) for _ in range(2)]
                await asyncio.wait_for(held.owner.when_arrived(2).wait(), 30)
                await asyncio.to_thread(px.stop)
                results = await asyncio.gather(*waiting, return_exceptions=True)
                for _, it in streams:
                    with pytest.raises((httpx2.HTTPError, StopAsyncIteration)):
                        while True:
                            await it.__anext__()
            finally:
                await h.aclose()
    # those waiting for headers get an answer of the proxy's own, not a 500
    answers = [(r.status_code, r.json()["error"]["message"]) if isinstance(r, httpx2.Response) else r for r in results]
    assert answers == [(503, "inspector proxy: shutting down")] * 2
    rec = read_recording(record)
    attempts = list(rec.attempts())
    assert len(attempts) == 5
    assert all(a.end is not None and a.end["status"] == "failed" for a in attempts)
    assert all(a.end is not None and a.end["reason"] == "proxy shutting down" for a in attempts)
    assert "Traceback" not in caplog.text + capsys.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# ----------------------------------------------------------------------------------------------- CLI


def test_dashboard_path_prints_the_real_address_first_and_passes_the_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the dashboard opens, stderr has the address to point a harness at, with the real port even for an
    ephemeral --listen; the dashboard's proxy gets the command line's limits, timeouts and faults."""
    import argparse

    import inspector.tui.app as tui_app
    from inspector.cli import proxy as cli

    seen: dict[str, Any] = {}

    def fake_dashboard(factory: Callable[[], Any], source: object, made: object = None) -> None:
        seen["err_before"] = capsys.readouterr().err
        session = factory()
        seen["proxy"], seen["listen"] = session.proxy, session.source["listen"]
        session.close()

    monkeypatch.setattr(tui_app, "run_dashboard", fake_dashboard)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    p = argparse.ArgumentParser()
    cli._add_arguments(p)
    args = p.parse_args(
        ["--listen", "127.0.0.1:0", "--max-connections", "7", "--read-timeout", "9", "--fault", "drop_event:2"]
    )
    assert cli.cmd(args) == 0
    m = re.search(r"^ANTHROPIC_BASE_URL=http://127\.0\.0\.1:(\d+)$", seen["err_before"], re.M)
    assert m and int(m.group(1)) > 0
    assert seen["listen"] == f"http://127.0.0.1:{m.group(1)}"
    px = seen["proxy"]
    assert (px.max_connections, px.read_timeout, str(px.faults), px.fault_header) == (7, 9.0, "drop_event:2", True)


def test_the_proxy_keeps_a_bounded_history_of_exchanges() -> None:
    """A long-running proxy keeps only its last `history` exchanges: memory does not grow with every request."""
    from inspector.net.proxy import ProxyApp, ProxyExchange

    proxy = ProxyApp("http://upstream.invalid", history=3)
    for i in range(10):
        proxy._finish(ProxyExchange("GET", f"/v1/models/{i}"))
    assert [e.path for e in proxy.exchanges] == ["/v1/models/7", "/v1/models/8", "/v1/models/9"]

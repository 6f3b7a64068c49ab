"""The proxy's first-byte path under many streams (tools/bench_proxy.py phase 3 measures it): a new upstream
connection writes its request as soon as it is made, a request-target's upstream URL is built once, and every
exchange shares one shutdown watcher."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx2
import pytest

from inspector.net import proxy as P
from inspector.net import upstream as U
from inspector.net.upstream import UpstreamPool


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


async def test_a_new_connection_writes_its_request_when_it_is_made() -> None:
    """The request goes out in connection_made, not a turn of the loop later when the task that opened the
    connection resumes (under a burst each turn waits behind every other stream's work)."""
    pool = UpstreamPool("http://upstream.test")
    conn = U._Connection(pool, (b"POST /v1/messages HTTP/1.1\r\n\r\n", b"{}", b"POST"))
    t = FakeTransport()
    conn.connection_made(t)
    assert b"".join(t.written) == b"POST /v1/messages HTTP/1.1\r\n\r\n{}"
    assert conn.head_future is not None and conn.active
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    resp = await conn.head_future
    assert resp.status_code == 200 and [d for _, d in resp.take()] == [b"ok"]


async def test_a_request_through_a_new_connection_is_answered_once() -> None:
    """End to end on loopback: the request written by connection_made is the one answered (written once)."""
    got: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.readuntil(b"\r\n\r\n")
        got.append(data + await reader.readexactly(2))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
        await writer.drain()
        with contextlib_suppress():
            await reader.read()  # until the pool closes it
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}")
    try:
        resp = await pool.send("POST", "/v1/messages", [("content-type", "application/json")], b"{}")
        body = b""
        while not resp.complete:
            batch = resp.take()
            body += b"".join(d for _, d in batch)
            if not batch:
                await resp.wait()
        await resp.aclose()
        assert resp.status_code == 200 and body == b"hello"
        assert len(got) == 1 and got[0].startswith(b"POST /v1/messages HTTP/1.1\r\n") and got[0].endswith(b"{}")
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()


def contextlib_suppress() -> contextlib.suppress:
    return contextlib.suppress(ConnectionError, asyncio.IncompleteReadError)


def test_the_upstream_url_of_a_target_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = httpx2.URL

    def counting(*a: Any, **k: Any) -> httpx2.URL:
        built.append(str(a[0]) if a else "")
        return real(*a, **k)

    monkeypatch.setattr(httpx2, "URL", counting)  # (the module the proxy uses)
    app = P.ProxyApp("http://upstream.test/prefix")
    first = app._upstream_url(b"/v1/messages", b"beta=true")
    n = len(built)
    assert n > 0 and first == "http://upstream.test/prefix/v1/messages?beta=true"
    assert app._upstream_url(b"/v1/messages", b"beta=true") == first
    assert len(built) == n  # the second request with this target parsed nothing
    app.upstream = "http://other.test"  # upstream changed while running: its own URL, never the old one
    assert app._upstream_url(b"/v1/messages", b"beta=true") == "http://other.test/v1/messages?beta=true"


def test_a_refused_target_is_refused_every_time_and_the_memo_is_bounded() -> None:
    app = P.ProxyApp("http://upstream.test")
    for _ in range(2):
        with pytest.raises(P._Refused):
            app._upstream_url(b"/v1/\x00messages", b"")
    for i in range(P.URL_MEMO * 3):
        app._upstream_url(f"/v1/{i}".encode(), b"")
    assert 0 < len(app._urls) <= P.URL_MEMO


async def test_every_exchange_shares_one_shutdown_watcher() -> None:
    app = P.ProxyApp("http://upstream.test")
    stop = app._stopping()
    assert app._stopping() is stop  # not one more task per request
    assert not stop.task.done()
    app.begin_close()
    await asyncio.wait_for(stop.task, 5)
    app2 = P.ProxyApp("http://upstream.test")
    stop2 = app2._stopping()
    await app2.aclose()  # the proxy closed without shutting down: its watcher does not outlive it
    with pytest.raises(asyncio.CancelledError):
        await stop2.task

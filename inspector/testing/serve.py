"""Helpers for the `inspector serve` tests: a raw HTTP/1.1 client on one real socket (h11), and an event loop with a
virtual clock the test thread can move forward (uvicorn's and serve's timers all run on ``loop.time()``)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import h11
import orjson

KEY = "sk-ant-api03-CANARY-serve-limits-00000000000"
API_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}

RawResponse = tuple[int | None, dict[str, str], bytes]  # (status, headers, body) of RawClient.request


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector loop whose clock can jump forward: ``advance(seconds)`` (from any thread) moves ``time()`` on,
    so every timer due in that span fires at once, then waits until the loop has run a few iterations after the
    jump (enough for a due timer's callback and the connection close it schedules)."""

    def __init__(self) -> None:
        super().__init__()
        self.skew = 0.0

    def time(self) -> float:
        return super().time() + self.skew

    def advance(self, seconds: float, *, iterations: int = 8) -> None:
        """First let the loop run ``iterations`` times (so bytes the test already sent are received and handled),
        then jump, then let it run ``iterations`` times more (due timers fire, the closes they schedule happen)."""
        done = threading.Event()

        def chain(n: int, then: Callable[[], None]) -> None:
            if n == 0:
                then()
            else:
                self.call_soon(chain, n - 1, then)

        def jump() -> None:
            self.skew += seconds
            chain(iterations, done.set)

        self.call_soon_threadsafe(chain, iterations, jump)
        assert done.wait(10), "the server loop did not run after the clock jump"


def loop_factory(loops: list[VirtualClockLoop]) -> Callable[[], asyncio.AbstractEventLoop]:
    """A loop factory (``BackgroundServer(loop_factory=...)``) that makes virtual-clock loops and keeps them in
    ``loops``."""

    def make() -> asyncio.AbstractEventLoop:
        loop = VirtualClockLoop()
        loops.append(loop)
        return loop

    return make


class RawClient:
    """HTTP/1.1 over one socket, parsed by h11: several requests on the same connection, and a way to see that
    the server closed it."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.conn = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(
        self,
        path: str,
        body: dict[str, Any] | bytes | None = None,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> RawResponse:
        """Send one request and read its response: (status, headers dict, body bytes)."""
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        raw = body if isinstance(body, bytes) else (b"" if body is None else orjson.dumps(body))
        hdrs = [("host", "inspector"), ("content-length", str(len(raw)))]
        hdrs += list((headers if headers is not None else API_HEADERS).items())
        self.sock.sendall(self.conn.send(h11.Request(method=method, target=path, headers=hdrs)))
        if raw:
            self.sock.sendall(self.conn.send(h11.Data(data=raw)))
        self.sock.sendall(self.conn.send(h11.EndOfMessage()))
        return self.response()

    def response(self) -> RawResponse:
        """Read one response: (status, headers, body); the status is None when the server closed the connection
        before a response."""
        status: int | None = None
        headers: dict[str, str] = {}
        body = b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(65536))
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return status, headers, body

    def closed_by_server(self) -> bool:
        """Block until the server sends something or closes: True when it closed the connection (EOF / reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def kept_exchange(owner: Any, before: int, timeout: float = 10.0) -> Any:
    """The exchange serve (``owner``: a ServeApp) kept after ``before`` had been kept in all (``total_exchanges``),
    once it is kept: serve keeps an exchange after its answer has gone out, so the client may have read the answer
    first, and ``exchanges[-1]`` read at once can still be the one before."""
    deadline = time.monotonic() + timeout
    while owner.total_exchanges <= before:
        if time.monotonic() > deadline:
            raise AssertionError(f"serve kept no exchange after #{before} in {timeout} s")
        time.sleep(0.002)
    return owner.exchanges[-1]


def messages_body(model: str = "claude-sonnet-4-6", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    body.update(extra)
    return body

"""The proxy's upstream HTTP/1.1 client: one asyncio protocol per connection, built for forwarding streams read by read.

Why not httpx2 here: a streamed response read through ``httpx2`` -> ``httpcore2`` -> ``h11`` -> ``anyio`` costs about
twenty Python calls, a cancel scope and a pause/resume of the socket per network read. The proxy forwards SSE streams
of thousands of small reads, so that stack was most of its CPU (``tools/bench_proxy.py``). Here a read is one
``data_received`` call: the chunked framing is removed in place and the payload is queued, with its arrival time, for
the forwarding task, which takes everything queued at once (:meth:`UpstreamResponse.take`).

What it does, and only that:

- HTTP/1.1 with keep-alive, over TCP or TLS (the TLS context is the SDK's: ``httpx2.create_ssl_context``); idle
  connections are reused last-in first-out and dropped after ``keepalive_expiry`` seconds or when upstream closes them.
  A request that finds its reused connection closed before any byte of the answer is sent again on a new connection
  (upstream never saw it complete: this is the stale keep-alive race every pooled client handles).
- Bodies: ``Transfer-Encoding: chunked`` (payload only, trailers dropped, as httpx2's ``aiter_raw`` gives it),
  ``Content-Length``, or until the connection closes. No body for HEAD, 1xx, 204 and 304. Interim 1xx answers are
  skipped. ``Content-Encoding`` is not touched: the proxy forwards the bytes as they came.
- Timeouts: ``connect_timeout`` (TCP + TLS handshake) and ``read_timeout``, the longest silence allowed from upstream
  while an answer is awaited or streamed (pings count). One timer per connection, re-armed lazily.
- Back-pressure: past ``HIGH_WATER`` bytes queued and not yet taken, reading from upstream pauses.
- Errors are ``httpx2`` exception types (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``,
  ``RemoteProtocolError``, ``ReadError``) so the proxy reports them as it does for its httpx2 path.

Not here: HTTP proxies between the proxy and upstream (``HTTPS_PROXY``...), HTTP/2, and request bodies that stream.
:func:`usable_for` says when a URL needs none of them; otherwise the proxy uses httpx2.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2

__all__ = ["HIGH_WATER", "UpstreamPool", "UpstreamResponse", "usable_for"]

HIGH_WATER = 1 << 20  # bytes queued for the forwarding task before reading from upstream pauses
MAX_HEAD = 1 << 16  # bytes of a response's status line + headers
MAX_IDLE = 256  # idle keep-alive connections kept per pool

# body modes
_CHUNKED, _LENGTH, _CLOSE, _NONE = 1, 2, 3, 4
# chunked decoder states
_SIZE, _DATA, _DATA_END, _TRAILER = 1, 2, 3, 4


def usable_for(url: str, trust_env: bool = True) -> bool:
    """Whether this client can reach ``url`` itself: http(s), and no HTTP proxy from the environment applies."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if not trust_env:
        return True
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


class UpstreamResponse:
    """One answer from upstream: ``status_code``, ``headers`` (an ``httpx2.Headers``; ``.raw`` as sent), then the
    body: :meth:`take` what has arrived, :meth:`wait` for more; :meth:`aiter_raw` for callers that want one read at a
    time; :meth:`aclose` when done (the connection goes back to the pool only if the body was read to its end)."""

    __slots__ = ("_conn", "status_code", "reason", "headers", "t_head")

    def __init__(
        self, conn: _Connection, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], t_head: float
    ) -> None:
        self._conn = conn
        self.t_head = t_head  # when the headers arrived (the pool's clock)
        self.status_code = status
        self.reason = reason
        self.headers = httpx2.Headers(headers)

    def take(self) -> list[tuple[float, bytes]]:
        """The reads queued since the last call, as (arrival time on the pool's clock, payload); [] when none is
        waiting. Raises the connection's error once everything before it was taken."""
        c = self._conn
        q = c.queue
        if q:
            c.queue = []
            c.queued = 0
            if c.paused:
                c.paused = False
                if c.transport is not None and not c.transport.is_closing():
                    c.transport.resume_reading()
            return q
        if c.error is not None:
            raise c.error
        return q

    @property
    def complete(self) -> bool:
        """The body has been received to its end (and taken)."""
        c = self._conn
        return c.body_done and not c.queue

    async def wait(self) -> None:
        """Until a read is queued, the body ends or the connection fails."""
        c = self._conn
        if c.queue or c.body_done or c.error is not None:
            return
        fut = c.loop.create_future()
        c.waiter = fut
        try:
            await fut
        finally:
            c.waiter = None

    async def aiter_raw(self):
        while True:
            batch = self.take()
            if batch:
                for _, data in batch:
                    yield data
                continue
            if self._conn.body_done:
                return
            await self.wait()

    async def aclose(self) -> None:
        self._conn.release()


class _Connection(asyncio.Protocol):
    """One upstream connection and the response being read from it."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.head = bytearray()
        self.in_head = True
        self.head_future: asyncio.Future | None = None
        self.head_method = b""
        self.got_bytes = False
        self.mode = _NONE
        self.remaining = 0  # _LENGTH: bytes left; _CHUNKED: bytes left in the current chunk
        self.cstate = _SIZE
        self.line = bytearray()  # a chunk-size / trailer line split across reads
        self.queue: list[tuple[float, bytes]] = []
        self.queued = 0
        self.paused = False
        self.waiter: asyncio.Future | None = None
        self.body_done = False
        self.keep_alive = True
        self.error: BaseException | None = None
        self.active = False
        self.last_read = 0.0
        self.timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol -----------------------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.last_read = self.loop.time()
        if not self.active:  # bytes nobody asked for (an idle connection): it cannot be reused
            self._close()
            return
        self.got_bytes = True
        if self.in_head:
            self._head(data)
        else:
            self._body(data)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._stop_timer()
        if not self.active:
            self.pool._forget(self)
            return
        if self.in_head:
            self._fail(httpx2.RemoteProtocolError("upstream closed the connection without sending a response"))
        elif not self.body_done:
            if self.mode == _CLOSE:
                self._finish_body()
            else:
                self._fail(httpx2.RemoteProtocolError("upstream closed the connection before the end of the body"))

    def pause_writing(self) -> None:  # request bodies are written whole: nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # --- the request ----------------------------------------------------------------------------------------------
    def start(self, head: bytes, body: bytes, method: bytes) -> asyncio.Future:
        self._reset()
        self.active = True
        self.head_method = method
        self.head_future = self.loop.create_future()
        self.last_read = self.loop.time()
        self._arm()
        assert self.transport is not None
        if body and len(body) < 65536:
            self.transport.write(head + body)
        else:
            self.transport.write(head)
            if body:
                self.transport.write(body)
        return self.head_future

    # --- parsing --------------------------------------------------------------------------------------------------
    def _head(self, data: bytes) -> None:
        head = self.head
        start = max(0, len(head) - 3)
        head += data
        end = head.find(b"\r\n\r\n", start)
        if end < 0:
            if len(head) > MAX_HEAD:
                self._fail(httpx2.RemoteProtocolError("upstream's response headers are too large"))
            return
        try:
            status, reason, headers = _parse_head(bytes(head[:end]))
        except ValueError as e:
            self._fail(httpx2.RemoteProtocolError(f"upstream sent an invalid response: {e}"))
            return
        rest = bytes(head[end + 4 :])
        if 100 <= status < 200 and status != 101:  # interim: the real answer follows
            self.head = bytearray()
            if rest:
                self._head(rest)
            return
        self.in_head = False
        self.head = bytearray()
        self._body_mode(status, headers)
        fut = self.head_future
        if fut is not None and not fut.done():
            fut.set_result(UpstreamResponse(self, status, reason, headers, self.pool.clock()))
        if rest:
            self._body(rest)
        elif self.mode == _NONE or (self.mode == _LENGTH and self.remaining == 0):
            self._finish_body()

    def _body_mode(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        te = cl = None
        for k, v in headers:
            lk = k.lower()
            if lk == b"transfer-encoding":
                te = v.lower()
            elif lk == b"content-length":
                cl = v
            elif lk == b"connection" and b"close" in v.lower():
                self.keep_alive = False
        if self.head_method == b"HEAD" or status in (204, 304):
            self.mode = _NONE
        elif te is not None and te.rsplit(b",", 1)[-1].strip() == b"chunked":
            self.mode = _CHUNKED
        elif cl is not None:
            try:
                n = int(cl.split(b",")[0].strip())
                if n < 0:
                    raise ValueError
            except ValueError:
                self.mode = _CLOSE
                self.keep_alive = False
            else:
                self.mode, self.remaining = _LENGTH, n
        else:
            self.mode = _CLOSE
            self.keep_alive = False

    def _push(self, payload: bytes) -> None:
        self.queue.append((self.pool.clock(), payload))
        self.queued += len(payload)
        if self.queued > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _body(self, data: bytes) -> None:
        mode = self.mode
        if mode == _CHUNKED:
            payload = self._dechunk(data)
            if payload:
                self._push(payload)
            if self.body_done:
                self._wake()
        elif mode == _LENGTH:
            n = self.remaining
            if len(data) > n:  # bytes past the body: nothing was asked for them
                data = data[:n]
                self.keep_alive = False
            if data:
                self.remaining = n - len(data)
                self._push(data)
            if self.remaining == 0:
                self._finish_body()
        elif mode == _CLOSE:
            self._push(data)
        else:
            self.keep_alive = False

    def _dechunk(self, data: bytes) -> bytes:
        """The payload in ``data`` (framing removed). The common read is exactly one chunk: ``size\\r\\n...\\r\\n``."""
        out: list[bytes] = []
        i, n = 0, len(data)
        while i < n:
            st = self.cstate
            if st == _DATA:
                k = min(self.remaining, n - i)
                out.append(data[i : i + k] if (i or k != n) else data)
                i += k
                self.remaining -= k
                if self.remaining == 0:
                    self.cstate = _DATA_END
            elif st == _SIZE or st == _DATA_END or st == _TRAILER:
                j = data.find(b"\n", i)
                if j < 0:
                    self.line += data[i:]
                    if len(self.line) > 4096 or (st == _DATA_END and self.line.strip(b"\r")):
                        self._fail(httpx2.RemoteProtocolError("upstream sent an invalid chunked body"))
                    break
                line = bytes(self.line) + data[i:j] if self.line else data[i:j]
                self.line = bytearray()
                i = j + 1
                if st == _DATA_END:
                    if line.strip():
                        self._fail(httpx2.RemoteProtocolError("upstream sent an invalid chunked body"))
                        break
                    self.cstate = _SIZE
                elif st == _SIZE:
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                        if size < 0:
                            raise ValueError
                    except ValueError:
                        self._fail(httpx2.RemoteProtocolError("upstream sent an invalid chunk size"))
                        break
                    if size == 0:
                        self.cstate = _TRAILER
                    else:
                        self.remaining = size
                        self.cstate = _DATA
                elif not line.strip():  # the empty line after the trailers: the end
                    if i < n:
                        self.keep_alive = False  # bytes past the body
                    self.body_done = True
                    self.active = False
                    self._stop_timer()
                    break
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _finish_body(self) -> None:
        self.body_done = True
        self.active = False
        self._stop_timer()
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.keep_alive = False
        self._stop_timer()
        fut = self.head_future
        if fut is not None and not fut.done():
            fut.set_exception(error)
        self._wake()
        self._close()

    # --- read timeout ---------------------------------------------------------------------------------------------
    def _arm(self) -> None:
        t = self.pool.read_timeout
        if t is not None and self.timer is None:
            self.timer = self.loop.call_at(self.last_read + t, self._check_idle)

    def _check_idle(self) -> None:
        self.timer = None
        t = self.pool.read_timeout
        if t is None or not self.active:
            return
        if self.paused:  # we stopped reading: upstream is not silent, the client is slow
            self.last_read = self.loop.time()
        due = self.last_read + t
        if self.loop.time() >= due:
            what = "response headers" if self.in_head else "more of the body"
            self._fail(httpx2.ReadTimeout(f"upstream sent no {what} within {t:g} s"))
        else:
            self.timer = self.loop.call_at(due, self._check_idle)

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # --- end of use -----------------------------------------------------------------------------------------------
    def release(self) -> None:
        """The caller is done with the response: back to the pool when it was read to its end, else closed."""
        self._stop_timer()
        self.waiter = None
        if self.body_done and self.keep_alive and self.error is None and not self.closed and not self.queue:
            self.active = False
            self.pool._idle_put(self)
        else:
            self.active = False
            self._close()

    def _close(self) -> None:
        self.keep_alive = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        self.closed = True
        self.pool._forget(self)


def _parse_head(head: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    lines = head.split(b"\r\n")
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError(f"status line {status_line[:80]!r}")
    if len(parts[1]) != 3 or not parts[1].isdigit():
        raise ValueError(f"status line {status_line[:80]!r}")
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else b""
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if not line:
            continue
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: part of the previous value
            if not headers:
                raise ValueError("a continuation line before any header")
            k, v = headers[-1]
            headers[-1] = (k, v + b" " + line.strip())
            continue
        k, sep, v = line.partition(b":")
        if not sep or not k or k != k.strip() or b" " in k:
            raise ValueError(f"header line {line[:80]!r}")
        headers.append((k, v.strip()))
    return status, reason, headers


class UpstreamPool:
    """Keep-alive connections to one origin (``base``: ``scheme://host[:port][/prefix]``).

    :meth:`send` sends a request and returns the response once its headers are in. ``clock``: the arrival time of
    each read (the proxy's clock)."""

    def __init__(
        self,
        base: str,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float | None = 600.0,
        keepalive_expiry: float = 30.0,
        ssl_context: Callable[[], ssl.SSLContext] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.base = base
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if default_port else f"{host}:{self.port}").encode("idna")
        self.prefix = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive_expiry = keepalive_expiry
        self._ssl_factory = ssl_context
        self._ssl: ssl.SSLContext | None = None
        self.clock = clock or _monotonic()
        self.idle: list[_Connection] = []
        self.open: set[_Connection] = set()
        self.closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = self._ssl_factory() if self._ssl_factory else httpx2.create_ssl_context(trust_env=True)
        return self._ssl

    def request_head(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
        lines = [
            f"{method} {self.prefix}{target} HTTP/1.1".encode("latin-1"),
            b"Host: " + self.host_header,
            b"Connection: keep-alive",  # as httpx2 sends it (HTTP/1.1's default, said aloud)
        ]
        for k, v in headers:
            if "\r" in k or "\n" in k or "\r" in v or "\n" in v:
                raise httpx2.LocalProtocolError(f"invalid header {k!r}")
            lines.append(f"{k}: {v}".encode("latin-1"))
        if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS", "TRACE"):
            lines.append(b"Content-Length: %d" % len(body))
        lines.append(b"\r\n")
        return b"\r\n".join(lines)

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> UpstreamResponse:
        """Send the request (``target``: path + query, appended to the base's path) and wait for the response
        headers. A reused connection found closed before any answer is replaced once."""
        head = self.request_head(method, target, headers, body)
        m = method.encode("latin-1")
        for _ in range(3):
            conn = self._idle_get()
            fresh = conn is None
            if conn is None:
                conn = await self._connect()
            fut = conn.start(head, body, m)
            try:
                return await fut
            except httpx2.RemoteProtocolError:
                if fresh or conn.got_bytes:
                    raise
                # a kept-alive connection that upstream had closed: the request never reached it; once more
            except BaseException:
                conn.release()
                raise
        raise httpx2.RemoteProtocolError("upstream closed every connection before answering")

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        kw: dict[str, Any] = {}
        if self.scheme == "https":
            kw = {"ssl": self._ssl_context(), "server_hostname": self.host}
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, **kw)
        except TimeoutError:
            raise httpx2.ConnectTimeout(
                f"no connection to {self.host}:{self.port} within {self.connect_timeout:g} s"
            ) from None
        except ssl.SSLError as e:
            raise httpx2.ConnectError(f"TLS with {self.host}:{self.port} failed: {e}") from e
        except OSError as e:
            raise httpx2.ConnectError(f"{self.host}:{self.port}: {e.strerror or e}") from e
        self.open.add(conn)
        return conn

    def _idle_get(self) -> _Connection | None:
        now = asyncio.get_running_loop().time()
        while self.idle:
            conn = self.idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > self.keepalive_expiry:
                conn._close()
                continue
            return conn
        return None

    def _idle_put(self, conn: _Connection) -> None:
        if self.closed or len(self.idle) >= MAX_IDLE:
            conn._close()
            return
        conn.idle_since = conn.loop.time()
        self.idle.append(conn)

    def _forget(self, conn: _Connection) -> None:
        self.open.discard(conn)
        with contextlib.suppress(ValueError):
            self.idle.remove(conn)

    async def aclose(self) -> None:
        self.closed = True
        for conn in list(self.open):
            conn._close()
        self.idle.clear()


def _monotonic() -> Callable[[], float]:
    import time

    return time.monotonic

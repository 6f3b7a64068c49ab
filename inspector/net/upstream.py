"""The proxy's upstream HTTP/1.1 client: one asyncio protocol per connection, built for forwarding streams read by read.

Why not httpx2 here: a streamed response read through ``httpx2`` -> ``httpcore2`` -> ``h11`` -> ``anyio`` costs about
twenty Python calls, a cancel scope and a pause/resume of the socket per network read. The proxy forwards SSE streams
of thousands of small reads, so that stack was most of its CPU (``tools/bench_proxy.py``). Here a read is one
``data_received`` call: the bytes go to an ``h11.Connection`` (the framing is h11's: RFC 9112, strictly) and the
payload of the read is queued, with its arrival time, for the forwarding task, which takes everything queued at once
(:meth:`UpstreamResponse.take`).

What it does, and only that:

- HTTP/1.1 with keep-alive, over TCP or TLS (the TLS context is the SDK's: ``httpx2.create_ssl_context``, or the
  caller's); idle connections are reused last-in first-out and dropped after ``keepalive_expiry`` seconds, when
  upstream closes them, or when their socket has anything to read before reuse (upstream's close not yet delivered:
  :func:`_is_dead`). A request is written once: a connection that fails after the request went out fails the
  request; it is never sent again behind the client's back (upstream may have acted on it).
- Framing, by h11: ``Transfer-Encoding: chunked`` (payload only, trailers dropped, as httpx2's ``aiter_raw`` gives
  it), ``Content-Length``, or until the connection closes; no body for HEAD, 1xx, 204 and 304. What h11 refuses is
  refused (``Content-Length: +5``, conflicting lengths, ``0x7`` chunk sizes, two Transfer-Encodings, ``chunked,
  gzip``, bare CR or NUL in a header...), and on top of h11: a status past 599, Transfer-Encoding together with
  Content-Length, more than ``MAX_INTERIM`` interim answers. A response whose head and refused body arrive in one
  read fails before its head is handed out. HTTP/1.0 answers, ``Connection: close`` and bytes after the body leave
  the connection unreused (those bytes are not forwarded; ``UpstreamResponse.extra`` counts them, for the proxy's
  note). Error texts name the fault, never upstream's bytes (they may hold a key). Interim 1xx
  answers are skipped; 101 is refused (no upgrade is ever asked). ``Content-Encoding`` is not touched.
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
import re
import select
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any, cast
from urllib.parse import urlsplit

import h11
import httpx2

__all__ = [
    "HIGH_WATER",
    "UpstreamPool",
    "UpstreamResponse",
    "env_proxy",
    "error_text",
    "upstream_ssl_context",
    "usable_for",
]

HIGH_WATER = 1 << 20  # bytes queued for the forwarding task before reading from upstream pauses
MAX_HEAD = 1 << 16  # bytes of a response's status line + headers
MAX_IDLE = 256  # idle keep-alive connections kept per pool

MAX_INTERIM = 32  # interim (1xx) answers skipped before a request's response; past it upstream is refused


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

    __slots__ = ("_conn", "status_code", "reason", "raw_headers", "_headers", "t_head")

    def __init__(
        self, conn: _Connection, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], t_head: float
    ) -> None:
        self._conn = conn
        self.t_head = t_head  # when the headers arrived (the pool's clock)
        self.status_code = status
        self.reason = reason
        self.raw_headers = headers  # as sent (names in their case), in order
        self._headers: httpx2.Headers | None = None

    @property
    def headers(self) -> httpx2.Headers:
        """The headers as an ``httpx2.Headers`` (built when first asked for: the forwarding path reads
        ``raw_headers`` and :meth:`header`, and building one costs as much as parsing the response's head)."""
        if self._headers is None:
            self._headers = httpx2.Headers(self.raw_headers)
        return self._headers

    def header(self, name: bytes) -> str:
        """The value of the first header called ``name`` (lower-case), latin-1 decoded; "" when there is none."""
        for k, v in self.raw_headers:
            if k.lower() == name:
                return v.decode("latin-1")
        return ""

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
    def extra(self) -> int:
        """Bytes upstream sent after the end of the body (a Content-Length it overran, a body after a 204...), as
        far as they arrived before now: never forwarded (RFC 9112 section 6.3), and the connection is not reused."""
        return self._conn.extra

    @property
    def has_data(self) -> bool:
        """Reads are queued (:meth:`take` returns them without raising)."""
        return bool(self._conn.queue)

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

    async def aiter_raw(self) -> AsyncIterator[bytes]:
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
    """One upstream connection and the response being read from it. The framing is h11's (one ``h11.Connection``
    per request: its reader, RFC 9112's rules), fed once per network read; :func:`_refusal` adds the few rules h11
    leaves to its caller."""

    def __init__(self, pool: UpstreamPool, first: tuple[bytes, bytes, bytes] | None = None) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset()
        # the request of a new connection (head, body, method): written as soon as the connection is made, before
        # the task that opened it resumes (under a burst, each hop through the event loop waits behind every other
        # stream's work: the request goes out one hop earlier)
        self.first = first

    def _reset(self) -> None:
        self.h11: h11.Connection | None = None
        self.in_head = True
        self.head_seen = 0  # bytes received before the response's head was complete (for error texts)
        self.first_line = -1  # length of the status line once known (for error texts)
        self.interim = 0  # 1xx answers skipped
        self.head_future: asyncio.Future[UpstreamResponse] | None = None
        self.response: UpstreamResponse | None = None  # parsed, handed out at the end of its read
        self.head_method = b""
        self.got_bytes = False
        self.extra = 0  # bytes upstream sent after the end of the response's body (not forwarded)
        self.queue: list[tuple[float, bytes]] = []
        self.queued = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.body_done = False
        self.keep_alive = True
        self.error: BaseException | None = None
        self.active = False
        self.last_read = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.te = False  # the response's head has a Transfer-Encoding (h11 accepted it: chunked)
        self.chunk: _Chunked | None = None  # a chunked body decoded here (see _dechunk), else None: h11's

    # --- asyncio.Protocol -----------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # loop.create_connection gives a stream protocol a read/write Transport (typeshed types its result so)
        self.transport = cast(asyncio.Transport, transport)
        first, self.first = self.first, None
        if first is not None:
            self.start(*first)

    def data_received(self, data: bytes) -> None:
        self.last_read = self.loop.time()
        if not self.active or self.h11 is None:  # bytes nobody asked for (an idle connection): it cannot be reused
            if self.body_done:  # (after a body whose response may still be read: it says so)
                self.extra += len(data)
            self.abort()
            return
        if self.error is not None:  # refused already: the connection is closing
            return
        self.got_bytes = True
        if self.chunk is not None:
            self._chunked_read(data)
            return
        rest = None
        head_only = False
        if self.in_head:
            if self.first_line < 0:
                nl = data.find(b"\n")
                if nl >= 0:  # the line's length without its CR LF
                    self.first_line = self.head_seen + nl - (nl > 0 and data[nl - 1] == 13)
            self.head_seen += len(data)
            cut = _head_end(self.h11.trailing_data[0], data)
            if 0 < cut <= len(data):  # h11 is given the head alone: a chunked body after it is decoded here
                head_only = True
                if cut < len(data):
                    data, rest = data[:cut], data[cut:]
        self.h11.receive_data(data)
        self._events(rest=rest, head_only=head_only)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._stop_timer()
        if not self.active or self.error is not None:
            self.pool.forget(self)
            return
        if self.in_head:
            self._fail(httpx2.RemoteProtocolError("upstream closed the connection without sending a response"))
        elif not self.body_done:
            assert self.h11 is not None
            self.h11.receive_data(b"")  # the end of a body that lasts until the close; an error for any other
            self._events(closing=True)
            if not self.body_done:
                self._fail(httpx2.RemoteProtocolError("upstream closed the connection before the end of the body"))

    def pause_writing(self) -> None:  # request bodies are written whole: nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # --- the request ----------------------------------------------------------------------------------------------
    def start(self, head: bytes, body: bytes, method: bytes) -> asyncio.Future[UpstreamResponse]:
        self._reset()
        # h11 is told the request (method and framing are what the response's framing depends on); the bytes
        # written are the pool's own (request_head), whole
        c = self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        c.send(_told(method))
        c.send(_END)
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
    def _events(
        self,
        closing: bool = False,
        rest: bytes | None = None,
        payload: list[bytes] | None = None,
        head_only: bool = False,
    ) -> None:
        """Take every event h11 has for the bytes received so far: the payload of this read is queued as one piece;
        a response's head is handed out only after the whole read was parsed (a body refused in the same read
        fails the request itself, so the head never reaches the client).

        ``head_only``: h11 was given a response head and nothing after it; ``rest``: the bytes of this read after it.
        A chunked body is then decoded here (``_dechunk``: this read's rest, and the next reads), anything else
        goes to h11. ``payload``: what this read gave before (decoded here)."""
        c = self.h11
        assert c is not None
        if payload is None:
            payload = []
        try:
            while True:
                ev = c.next_event()
                t = type(ev)
                if t is h11.Data:
                    payload.append(ev.data)  # type: ignore[union-attr]
                elif ev is h11.NEED_DATA:
                    chunked = head_only and not self.in_head and self.te and c.their_state is h11.SEND_BODY
                    if chunked:  # (h11 has seen none of the body: it is at a chunk boundary)
                        self.chunk = _Chunked()
                    if rest is None:
                        break
                    more, rest = rest, None
                    head_only = False
                    if chunked:
                        give = self._dechunk(more, payload)
                        if give is None:
                            break
                        more = give  # from a chunk boundary: a chunk line it leaves to h11, or the last chunk
                    c.receive_data(more)
                elif t is h11.Response:
                    refusal = _refusal(ev)  # type: ignore[arg-type]
                    if refusal:
                        self._fail(httpx2.RemoteProtocolError(f"upstream sent an invalid response: {refusal}"))
                        return
                    self.in_head = False
                    self.te = any(name == b"transfer-encoding" for name, _ in ev.headers)  # type: ignore[union-attr]
                    self.response = UpstreamResponse(
                        self,
                        ev.status_code,  # type: ignore[union-attr]
                        ev.reason,  # type: ignore[union-attr]
                        list(ev.headers.raw_items()),  # type: ignore[union-attr]
                        self.pool.clock(),
                    )
                elif t is h11.InformationalResponse:  # interim (100, 103...): the real answer follows
                    self.interim += 1
                    if self.interim > MAX_INTERIM:
                        self._fail(
                            httpx2.RemoteProtocolError(f"upstream sent more than {MAX_INTERIM} interim (1xx) answers")
                        )
                        return
                    self.head_seen = 0
                    self.first_line = -1
                elif t is h11.EndOfMessage:
                    if rest:  # bytes after a body-less response's head: h11 keeps them (the connection is not reused)
                        c.receive_data(rest)
                        rest = None
                    self.body_done = True
                    self.extra = len(c.trailing_data[0])  # bytes after the end of the body, in this read
                    # reusable only when h11 says so (HTTP/1.1, no Connection: close) and nothing came after the end
                    if closing or c.their_state is not h11.DONE or c.trailing_data[0]:
                        self.keep_alive = False
                    break
                else:  # PAUSED or ConnectionClosed: nothing more for this request
                    if c.their_state is h11.SWITCHED_PROTOCOL:  # a 2xx to CONNECT: a tunnel, not an HTTP answer
                        self._fail(httpx2.RemoteProtocolError("upstream opened a tunnel (CONNECT): not forwarded"))
                        return
                    break
        except h11.RemoteProtocolError as e:
            if payload and not self.in_head:
                self._push(b"".join(payload))
            self._fail(httpx2.RemoteProtocolError(self._describe(e, closing)))
            return
        if payload:
            self._push(bytes(payload[0]) if len(payload) == 1 else b"".join(payload))
        resp = self.response
        if resp is not None:
            self.response = None
            fut = self.head_future
            if fut is not None and not fut.done():
                fut.set_result(resp)
        if self.body_done:
            self._finish_body()

    def _chunked_read(self, data: bytes) -> None:
        """A read of a chunked body decoded here; what ``_dechunk`` leaves to h11 goes to it, with this read's
        payload so far (one read, one queued piece)."""
        payload: list[bytes] = []
        try:
            give = self._dechunk(data, payload)
        except h11.RemoteProtocolError as e:
            if payload:
                self._push(b"".join(payload))
            self._fail(httpx2.RemoteProtocolError(self._describe(e, False)))
            return
        if give is None:
            if payload:
                self._push(payload[0] if len(payload) == 1 else b"".join(payload))
            return
        assert self.h11 is not None
        self.h11.receive_data(give)
        self._events(payload=payload)

    def _dechunk(self, data: bytes, out: list[bytes]) -> bytes | None:
        """Decode a chunked body here, as h11 would (its payload appended to ``out``), while its chunk lines are
        plain hex sizes: the common case, at a fraction of h11's cost per chunk (an event, a regex and a state
        machine step each). Returns None when the read is consumed; else the bytes h11 is to read from a chunk
        boundary on (h11, told nothing of the body so far, is at a boundary too): a chunk line with an extension,
        spaces or anything odd (h11 accepts it or refuses it), the last chunk (h11 reads the trailers and ends the
        message), and from then on h11 reads the rest of the body. A chunk's data not followed by CR LF raises the
        RemoteProtocolError h11 raises. tests/net/test_proxy_cpu.py checks it against h11 (hypothesis)."""
        st = self.chunk
        assert st is not None
        buf = st.buf + data if st.buf else data
        st.buf = b""
        pos, n = 0, len(buf)
        while pos < n:
            if st.remaining:
                take = min(st.remaining, n - pos)
                out.append(buf[pos : pos + take] if take < n else buf)
                pos += take
                st.remaining -= take
                if not st.remaining:
                    st.crlf = b"\r\n"
                continue
            if st.crlf:
                piece = buf[pos : pos + len(st.crlf)]
                if piece != st.crlf[: len(piece)]:
                    self.chunk = None
                    raise h11.RemoteProtocolError(
                        f"malformed chunk footer: {bytearray(piece)!r} (expected {st.crlf!r})"
                    )
                st.crlf = st.crlf[len(piece) :]
                pos += len(piece)
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                line = buf[pos:]
                if len(line) <= 21 and _HEX_PART.fullmatch(line):  # a size line not complete yet
                    st.buf = line
                    return None
                self.chunk = None
                return line
            size = buf[pos:nl]
            if not _HEX.fullmatch(size) or not int(size, 16):  # odd, or the last chunk: h11's from here
                self.chunk = None
                return buf[pos:]
            st.remaining = int(size, 16)
            pos = nl + 2
        return None

    def _describe(self, e: h11.RemoteProtocolError, closing: bool) -> str:
        """A one-line account of what h11 refused, without upstream's bytes (they may hold a key)."""
        what = _h11_words(str(e))
        if what == "Receive buffer too long":
            return (
                "upstream's response headers are too large" if self.in_head else "upstream sent a too-long chunk line"
            )
        if closing:
            return "upstream closed the connection before the end of the body"
        if "_SWITCH_UPGRADE" in what:
            return "upstream sent an invalid response: 101, a protocol switch nobody asked for"
        if self.in_head:
            if "status line" in what or "response line" in what:
                if self.first_line >= 0:
                    return f"upstream sent an invalid response: malformed status line ({self.first_line} bytes)"
                return "upstream sent an invalid response: malformed status line"
            return f"upstream sent an invalid response: {what} (in {self.head_seen} bytes of headers)"
        if "chunk header" in what:
            return "upstream sent an invalid chunk size line"
        if "chunk" in what:
            return f"upstream sent an invalid chunked body: {what}"
        return f"upstream sent an invalid body: {what}"

    def _push(self, payload: bytes) -> None:
        self.queue.append((self.pool.clock(), payload))
        self.queued += len(payload)
        if self.queued > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

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
        self.abort()

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
            self.pool.put_idle(self)
        else:
            self.active = False
            self.abort()

    def abort(self) -> None:
        """Close this connection now (its transport aborted) and take it out of its pool."""
        self.keep_alive = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        self.closed = True
        self.pool.forget(self)


_END = h11.EndOfMessage()
_HEX = re.compile(rb"[0-9A-Fa-f]{1,20}")  # a chunk size line h11 reads the same way (no extension, no spaces)
_HEX_PART = re.compile(rb"[0-9A-Fa-f]{0,20}\r?")  # the beginning of one
_BLANK = re.compile(rb"\n\r?\n")  # the end of a head, as h11 finds it (h11._receivebuffer's blank_line_regex)


class _Chunked:
    """Where a chunked body decoded by ``_Connection._dechunk`` is: in a chunk (``remaining`` bytes of it to come),
    after one (``crlf``: what is left of its CR LF), or at a size line (``buf``: its beginning)."""

    __slots__ = ("remaining", "crlf", "buf")

    def __init__(self) -> None:
        self.remaining = 0
        self.crlf = b""
        self.buf = b""


def _head_end(pending: bytes, data: bytes) -> int:
    """Where, in ``data`` (after the ``pending`` bytes h11 holds), the response head h11 is reading ends: past the
    first blank line (as h11 finds it); -1 when it is not in ``data``, or when h11 would not read a head there (the
    bytes begin with an empty line)."""
    buf = pending + data if pending else data
    if buf[:1] == b"\n" or buf[:2] == b"\r\n":
        return -1
    m = _BLANK.search(buf)
    return -1 if m is None else m.end() - len(pending)


_TOLD: dict[bytes, h11.Request] = {}


def _told(method: bytes) -> h11.Request:
    """The request h11 is told about (method and framing only; h11's events are immutable, so one per method is
    built and validated once)."""
    req = _TOLD.get(method)
    if req is None:
        req = h11.Request(method=method, target=b"/", headers=[(b"host", b"upstream")])
        if len(_TOLD) < 64:  # bounded: a method is whatever token the client sent
            _TOLD[method] = req
    return req


def _refusal(ev: h11.Response) -> str:
    """What the proxy refuses in a response h11 accepts ("" when nothing): a status outside RFC 9110's 100-599
    (the client could not be given it), and Transfer-Encoding together with Content-Length (RFC 9112 section 6.1:
    "ought to be handled as an error"; an intermediary must not forward both; mitmproxy refuses it too)."""
    if ev.status_code > 599:
        return f"status {ev.status_code} is outside 100-599"
    te = cl = False
    for name, _ in ev.headers:  # h11 gives the names lower-cased here
        if name == b"transfer-encoding":
            te = True
        elif name == b"content-length":
            cl = True
    if te and cl:
        return "both Transfer-Encoding and Content-Length"
    return ""


_REPR = re.compile(r":?\s*(?:bytearray\(|b'|b\")")


def _h11_words(message: str, limit: int = 80) -> str:
    """h11's error text without the bytes it quotes (``illegal status line: bytearray(b'...')`` -> ``illegal status
    line``): upstream's bytes may hold a key, and error texts reach stderr and the recording."""
    words = _REPR.split(message, maxsplit=1)[0].strip().rstrip(":")
    words = "".join(ch for ch in words if " " <= ch <= "~")[:limit]
    return words or "malformed"


def error_text(error: BaseException) -> str:
    """One line about an upstream failure (this module's or httpx2's), without any bytes the error quotes."""
    return _h11_words(str(error), 300) if str(error) else type(error).__name__


def upstream_ssl_context(ca_file: str | None = None, insecure: bool = False) -> ssl.SSLContext:
    """The TLS context for upstream: the SDK's (``httpx2.create_ssl_context``: certifi, ``SSL_CERT_FILE``...), or
    one that trusts only the CA certificates in ``ca_file`` (PEM; like curl's ``--cacert``), or with ``insecure``
    one that verifies nothing (for local relays; the caller says so loudly). OSError / ssl.SSLError for an unreadable
    or invalid ``ca_file``."""
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    return httpx2.create_ssl_context(trust_env=True)


def env_proxy(url: str) -> str | None:
    """The HTTP proxy the environment puts between us and ``url`` as ``host:port (VARIABLE)``, credentials left out;
    None when none applies."""
    parts = urlsplit(url)
    if not parts.hostname or usable_for(url):
        return None
    proxies = urllib.request.getproxies()
    key = parts.scheme if proxies.get(parts.scheme) else "all"
    p = urlsplit(proxies.get(key, ""))
    try:
        where = f"{p.hostname}:{p.port}" if p.port else str(p.hostname)
    except ValueError:
        where = str(p.hostname)
    return f"{where} ({key.upper()}_PROXY)"


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
        headers. A request is written once: an idle connection is checked before it is reused (:func:`_is_dead`),
        and a failure after the request was written is the request's failure, never a silent second send (upstream
        may have acted on it: RFC 9110 section 9.2.2, a POST is not idempotent)."""
        return await self.submit(method, target, headers, body)

    def submit(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> asyncio.Future[UpstreamResponse]:
        """`send`, as a future: on an idle connection the request is written before this returns (a proxy that
        takes 50 requests in one turn of its event loop sends each as soon as it is read, not all of them on the
        next turn, after every one's bookkeeping); a new connection is made by the task. Never raises: a request
        that cannot be written is the future's error, as `send`'s."""
        try:
            head = self.request_head(method, target, headers, body)
            m = method.encode("latin-1")
        except Exception as e:  # noqa: BLE001 (the future carries it, whatever it is)
            failed: asyncio.Future[UpstreamResponse] = asyncio.get_running_loop().create_future()
            failed.set_exception(e)
            return failed
        conn = self._idle_get()
        if conn is None:
            return asyncio.ensure_future(self._send_new(head, body, m))
        return asyncio.ensure_future(self._answer(conn, conn.start(head, body, m), reused=True))

    async def _send_new(self, head: bytes, body: bytes, m: bytes) -> UpstreamResponse:
        # a new connection writes the request itself, once made (_Connection.connection_made)
        conn = await self._connect((head, body, m))
        fut = conn.head_future
        if fut is None:  # (never: connection_made ran before the connection was handed out)
            fut = conn.start(head, body, m)
        return await self._answer(conn, fut, reused=False)

    async def _answer(
        self, conn: _Connection, fut: asyncio.Future[UpstreamResponse], *, reused: bool
    ) -> UpstreamResponse:
        """The response of a request written on ``conn`` (``reused``: a kept-alive connection)."""
        try:
            return await fut
        except httpx2.RemoteProtocolError as e:
            conn.release()
            if reused and not conn.got_bytes:
                raise httpx2.RemoteProtocolError(
                    "upstream closed a kept-alive connection after the request was written to it, without an answer;"
                    " not sent again (upstream may have acted on it)"
                ) from e
            raise
        except BaseException:
            conn.release()
            raise

    async def _connect(self, first: tuple[bytes, bytes, bytes] | None = None) -> _Connection:
        loop = asyncio.get_running_loop()
        kw: dict[str, Any] = {}
        if self.scheme == "https":
            kw = {"ssl": self._ssl_context(), "server_hostname": self.host}
        made: list[_Connection] = []

        def factory() -> _Connection:
            made.append(_Connection(self, first))
            return made[-1]

        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(factory, self.host, self.port, **kw)
        except asyncio.CancelledError:
            # cancelled (the client left) after the connection was made, before it was handed out: nobody will read
            # its answer, so it is closed now (else it stayed open until upstream or the read timeout ended it, and
            # its failure was logged as "Future exception was never retrieved")
            for orphan in made:
                if orphan.head_future is not None:
                    orphan.head_future.cancel()
                orphan.abort()
            raise
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
            if now - conn.idle_since > self.keepalive_expiry or _is_dead(conn.transport):
                conn.abort()
                continue
            return conn
        return None

    def put_idle(self, conn: _Connection) -> None:
        """Keep a finished connection for the next request (or close it: the pool is closed or full)."""
        if self.closed or len(self.idle) >= MAX_IDLE:
            conn.abort()
            return
        conn.idle_since = conn.loop.time()
        self.idle.append(conn)

    def forget(self, conn: _Connection) -> None:
        """A connection closed: no longer open, no longer idle."""
        self.open.discard(conn)
        with contextlib.suppress(ValueError):
            self.idle.remove(conn)

    async def aclose(self) -> None:
        self.closed = True
        for conn in list(self.open):
            conn.abort()
        self.idle.clear()


def _is_dead(transport: asyncio.BaseTransport) -> bool:
    """Whether an idle connection has something to read that the event loop has not delivered yet: upstream's close
    (EOF), a reset, or bytes nobody asked for. Either way it must not carry a request (httpcore checks the same
    before reusing a connection). A zero-timeout poll of the socket: no read, no wait."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        fd = sock.fileno()
        if fd < 0:
            return True
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(fd, select.POLLIN)
            return bool(p.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


def _monotonic() -> Callable[[], float]:
    import time

    return time.monotonic

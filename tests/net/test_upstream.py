"""The proxy's upstream HTTP/1.1 client (inspector/net/upstream.py): its response reader against h11 (the parser httpx2
uses) on every framing and every split into reads, a fuzz of the reader, and its connection handling on real loopback
sockets: keep-alive reuse, a stale keep-alive connection, drops, refusals, interim answers, back-pressure and the read
timeout. Servers are asyncio servers scripted byte by byte; nothing waits on a sleep."""

from __future__ import annotations

import asyncio
import contextlib

import h11
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net import upstream as U
from inspector.net.proxy import ProxyApp
from inspector.net.upstream import UpstreamPool, UpstreamResponse, usable_for

# ----------------------------------------------------------------------------------------------- the reader


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def feed(reads: list[bytes], method: bytes = b"GET", eof: bool = False) -> tuple[U._Connection, asyncio.Future, bytes]:
    """Run the reader over ``reads`` (then EOF): (connection, head future, payload taken)."""

    async def go():
        pool = UpstreamPool("http://upstream.test")
        conn = U._Connection(pool)
        conn.connection_made(FakeTransport())
        fut = conn.start(b"", b"", method)
        for r in reads:
            if conn.closed:
                break
            conn.data_received(r)
        if eof and not conn.closed:
            conn.connection_lost(None)
        payload = b""
        if fut.done() and not fut.exception():
            resp = fut.result()
            with contextlib.suppress(httpx2.HTTPError):
                payload = b"".join(d for _, d in resp.take())
        else:
            fut.cancel()
        return conn, fut, payload

    return asyncio.run(go())


def h11_reference(wire: bytes, method: bytes = b"GET") -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """(status, headers, payload, complete) as h11 reads the same bytes (then EOF)."""
    c = h11.Connection(h11.CLIENT)
    c.send(h11.Request(method=method, target="/", headers=[("Host", "upstream.test")]))
    c.send(h11.EndOfMessage())
    c.receive_data(wire)
    c.receive_data(b"")
    status, headers, payload, complete = 0, [], b"", False
    while True:
        e = c.next_event()
        if isinstance(e, h11.Response):
            status, headers = e.status_code, list(e.headers.raw_items())
        elif isinstance(e, h11.Data):
            payload += e.data
        elif isinstance(e, h11.EndOfMessage):
            complete = True
            break
        elif e is h11.NEED_DATA or e is h11.PAUSED or isinstance(e, h11.ConnectionClosed):
            break
    return status, headers, payload, complete


token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
    lambda s: s.lower() not in ("content-length", "transfer-encoding", "connection")
)
value = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 ;=/", max_size=20).map(str.strip)


@st.composite
def responses(draw) -> tuple[bytes, bytes, str]:
    """(wire bytes, payload, framing) of a valid response."""
    status = draw(st.sampled_from([200, 201, 400, 404, 429, 500, 529]))
    headers = draw(st.lists(st.tuples(token, value), max_size=4))
    framing = draw(st.sampled_from(["chunked", "length", "close"]))
    pieces = draw(st.lists(st.binary(max_size=300), max_size=6))
    payload = b"".join(pieces)
    head = [f"HTTP/1.1 {status} Whatever".encode(), *(f"{k}: {v}".encode() for k, v in headers)]
    if framing == "chunked":
        head.append(b"Transfer-Encoding: chunked")
        body = b""
        for p in pieces:
            if not p:
                continue
            size = f"{len(p):x}"
            size = size.upper() if draw(st.booleans()) else size
            ext = b";name=value" if draw(st.booleans()) else b""
            body += size.encode() + ext + b"\r\n" + p + b"\r\n"
        body += b"0\r\n" + (b"X-Trailer: t\r\n" if draw(st.booleans()) else b"") + b"\r\n"
    elif framing == "length":
        head.append(b"Content-Length: %d" % len(payload))
        body = payload
    else:
        body = payload
    return b"\r\n".join(head) + b"\r\n\r\n" + body, payload, framing


def splits(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    return [wire[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=300, deadline=None)
@given(responses(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_reader_agrees_with_h11_on_every_framing_and_every_split(resp, cuts):
    wire, payload, framing = resp
    conn, fut, got = feed(splits(wire, cuts), eof=framing == "close")
    status, headers, ref_payload, complete = h11_reference(wire)
    r = fut.result()
    assert isinstance(r, UpstreamResponse)
    assert r.status_code == status
    assert r.headers.raw == headers  # names as sent, values stripped, in order
    assert got == ref_payload == payload
    assert complete and conn.body_done and conn.error is None
    assert conn.keep_alive == (framing != "close")  # a close-delimited body leaves nothing to reuse


@settings(max_examples=300, deadline=None)
@given(responses(), st.integers(min_value=0), st.binary(min_size=1, max_size=8), st.integers(min_value=0, max_value=30))
def test_reader_fuzz_never_raises_and_never_hangs_silently(resp, at, noise, cut):
    """Mutated responses (bytes overwritten or the stream cut short): every outcome is a response, or an httpx2
    error on the connection; no exception escapes ``data_received``; a cut stream never looks complete."""
    wire, _, framing = resp
    i = at % (len(wire) + 1)
    mutated = wire[:i] + noise + wire[i + len(noise) :]
    for data in (mutated, wire[: max(0, len(wire) - 1 - cut)]):
        conn, fut, _ = feed(splits(data, [i, i + 3, i + 7]), eof=True)
        if conn.error is not None:
            assert isinstance(conn.error, httpx2.HTTPError)
        elif fut.done() and not fut.cancelled():
            assert isinstance(fut.result(), UpstreamResponse)
    conn, fut, _ = feed([wire[: len(wire) - 1]], eof=True)
    assert not (conn.body_done and conn.error is None and framing != "close")


def test_interim_answers_are_skipped_and_head_has_no_body():
    wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    conn, fut, payload = feed([wire], method=b"HEAD")
    assert fut.result().status_code == 200 and payload == b"" and conn.body_done and conn.keep_alive
    conn, fut, payload = feed([b"HTTP/1.1 204 No Content\r\n\r\n"])
    assert fut.result().status_code == 204 and conn.body_done


@pytest.mark.parametrize(
    "wire, message",
    [
        (b"HTTP/1.1 20 OK\r\n\r\n", "invalid response"),
        (b"SMTP ready\r\n\r\n", "invalid response"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "invalid response"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "invalid chunked body"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * (U.MAX_HEAD + 10), "too large"),
    ],
)
def test_bad_responses_are_named_protocol_errors(wire, message):
    conn, fut, _ = feed([wire])
    assert isinstance(conn.error, httpx2.RemoteProtocolError) and message in str(conn.error)
    assert conn.closed  # never reused


def test_a_cut_body_is_an_error_not_a_short_success():
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    conn, fut, payload = feed([wire], eof=True)
    assert payload == b"abc" and isinstance(conn.error, httpx2.RemoteProtocolError) and not conn.body_done


def test_request_head_keeps_the_base_path_and_refuses_header_injection():
    pool = UpstreamPool("https://api.example.test:8443/prefix/")
    head = pool.request_head("POST", "/v1/messages?beta=true", [("x-api-key", "k"), ("X-Custom", "v")], b"{}")
    assert head == (
        b"POST /prefix/v1/messages?beta=true HTTP/1.1\r\nHost: api.example.test:8443\r\nConnection: keep-alive\r\n"
        b"x-api-key: k\r\nX-Custom: v\r\nContent-Length: 2\r\n\r\n"
    )
    assert b"Content-Length" not in pool.request_head("GET", "/v1/models", [], b"")
    with pytest.raises(httpx2.LocalProtocolError):
        pool.request_head("GET", "/", [("x", "a\r\nInjected: yes")], b"")


def test_environment_proxies_send_the_proxy_back_to_httpx2(monkeypatch):
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)
    assert usable_for("https://api.anthropic.com") and ProxyApp("https://api.anthropic.com")._pool() is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://corporate.test:3128")
    assert not usable_for("https://api.anthropic.com")
    assert ProxyApp("https://api.anthropic.com")._pool() is None  # httpx2 goes through the proxy
    assert usable_for("http://127.0.0.1:9")  # only https is proxied
    monkeypatch.setenv("NO_PROXY", "api.anthropic.com")
    assert usable_for("https://api.anthropic.com")
    assert not usable_for("ftp://example.test") and not usable_for("not a url")
    assert ProxyApp("http://x.test", transport=httpx2.MockTransport(lambda r: httpx2.Response(200)))._pool() is None


# ----------------------------------------------------------------------------------------------- real sockets


class Script:
    """An asyncio server on loopback that answers each request on a connection with the next scripted answer;
    ``close_after``: close the connection after that many answers. Counts connections and requests."""

    def __init__(self, answers: list[bytes], close_after: int | None = None) -> None:
        self.answers = answers
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None
        self.closed_one = asyncio.Event()

    async def __aenter__(self) -> Script:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(n))
                answer = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
                writer.write(answer)
                await writer.drain()
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.closed_one.set()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def body_of(resp: UpstreamResponse) -> bytes:
    out = b""
    async for d in resp.aiter_raw():
        out += d
    return out


async def test_keep_alive_connections_are_reused():
    async with Script([OK]) as s:
        pool = UpstreamPool(s.url)
        for _ in range(3):
            r = await pool.send("POST", "/v1/messages", [], b"{}")
            assert await body_of(r) == b"ok"
            await r.aclose()
        await pool.aclose()
    assert s.connections == 1 and len(s.requests) == 3


async def test_a_stale_keep_alive_connection_is_replaced_once():
    async with Script([OK], close_after=1) as s:
        pool = UpstreamPool(s.url)
        r = await pool.send("GET", "/a", [], b"")
        assert await body_of(r) == b"ok"
        await r.aclose()
        await s.closed_one.wait()  # upstream closed the idle connection; the pool has not noticed yet maybe
        r = await pool.send("GET", "/b", [], b"")
        assert await body_of(r) == b"ok"
        await r.aclose()
        await pool.aclose()
    assert s.connections == 2 and [q.split(b" ")[1] for q in s.requests] == [b"/a", b"/b"]


async def test_a_fresh_connection_closed_before_answering_is_an_error_not_a_retry():
    async with Script([b""], close_after=1) as s:
        pool = UpstreamPool(s.url)
        with pytest.raises(httpx2.RemoteProtocolError, match="without sending a response"):
            await pool.send("POST", "/v1/messages", [], b"{}")
        await pool.aclose()
    assert len(s.requests) == 1  # sent once: never repeated behind the client's back


async def test_an_unfinished_body_is_not_reused_and_a_drop_is_an_error():
    partial = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
    async with Script([partial], close_after=1) as s:
        pool = UpstreamPool(s.url)
        r = await pool.send("GET", "/", [], b"")
        with pytest.raises(httpx2.RemoteProtocolError, match="before the end of the body"):
            await body_of(r)
        await r.aclose()
        assert not pool.idle
        await pool.aclose()


async def test_refused_and_timeouts_are_httpx2_errors():
    async with Script([OK]) as s:
        url = s.url
    with pytest.raises(httpx2.ConnectError):  # nobody listens there any more
        await UpstreamPool(url).send("GET", "/", [], b"")
    silent = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n"
    async with Script([silent, b""]) as s:
        pool = UpstreamPool(s.url, read_timeout=0.2)
        r = await pool.send("GET", "/", [], b"")
        with pytest.raises(httpx2.ReadTimeout, match="no more of the body within 0.2 s"):
            await body_of(r)
        await r.aclose()
        with pytest.raises(httpx2.ReadTimeout, match="no response headers"):
            await pool.send("GET", "/", [], b"")
        await pool.aclose()


async def test_reading_pauses_past_the_high_water_mark_and_resumes_when_taken():
    big = b"x" * (4 * U.HIGH_WATER)
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big
    async with Script([answer]) as s:
        pool = UpstreamPool(s.url)
        r = await pool.send("GET", "/", [], b"")
        conn = r._conn
        while not conn.paused:  # upstream writes as fast as it can; nobody takes
            await r.wait()
            if conn.body_done:
                break
            await asyncio.sleep(0)
        assert conn.paused and conn.queued < 2 * U.HIGH_WATER  # bounded: reading stopped
        got = b"".join(d for _, d in r.take()) + await body_of(r)
        assert got == big and not conn.paused
        await r.aclose()
        await pool.aclose()


async def test_a_request_that_meets_a_closed_idle_connection_goes_out_again_on_a_new_one(monkeypatch):
    """The stale keep-alive race, step by step: the request is written to an idle connection that upstream had
    already closed; the close arrives with no byte of an answer; the same request goes out once more, on a new
    connection, and its answer is the response."""
    pool = UpstreamPool("http://upstream.test")
    stale, fresh = U._Connection(pool), U._Connection(pool)
    for c in (stale, fresh):
        c.connection_made(FakeTransport())
    pool._idle_put(stale)

    async def connect():
        return fresh

    monkeypatch.setattr(pool, "_connect", connect)
    task = asyncio.ensure_future(pool.send("POST", "/v1/messages", [("x-a", "1")], b"{}"))
    while not stale.transport.written:  # type: ignore[union-attr]
        await asyncio.sleep(0)
    stale.connection_lost(None)
    while not fresh.transport.written:  # type: ignore[union-attr]
        await asyncio.sleep(0)
    fresh.data_received(OK)
    r = await task
    assert r.status_code == 200 and await body_of(r) == b"ok"
    assert stale.transport.written == fresh.transport.written  # type: ignore[union-attr]
    await r.aclose()
    assert pool.idle == [fresh]  # the answer was read to its end: kept for the next request


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A self-signed certificate for localhost / 127.0.0.1, made for this run (no key is kept in the repository)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_upstream_with_the_given_context_and_a_refused_certificate(tls_files):
    import ssl

    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    s = Script([chunked])
    s.server = await asyncio.start_server(s._serve, "127.0.0.1", 0, ssl=server_ctx)
    port = s.server.sockets[0].getsockname()[1]
    try:
        trusting = ssl.create_default_context(cafile=str(cert))
        pool = UpstreamPool(f"https://localhost:{port}", ssl_context=lambda: trusting)
        for _ in range(2):
            r = await pool.send("POST", "/v1/messages", [], b"{}")
            assert await body_of(r) == b"hello"
            await r.aclose()
        await pool.aclose()
        assert s.connections == 1  # kept alive over TLS too
        assert s.requests[0].startswith(b"POST /v1/messages HTTP/1.1\r\nHost: localhost:%d\r\n" % port)
        with pytest.raises(httpx2.ConnectError, match="TLS with localhost"):  # the default trust store refuses it
            await UpstreamPool(f"https://localhost:{port}").send("GET", "/", [], b"")
    finally:
        s.server.close()

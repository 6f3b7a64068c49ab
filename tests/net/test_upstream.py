"""The proxy's upstream HTTP/1.1 client (inspector/net/upstream.py): its response reader against h11 (the parser httpx2
uses) on every framing and every split into reads, a fuzz of the reader, and its connection handling on real loopback
sockets: keep-alive reuse, a stale keep-alive connection, drops, refusals, interim answers, back-pressure and the read
timeout. Servers are asyncio servers scripted byte by byte; nothing waits on a sleep."""

from __future__ import annotations

import asyncio
import contextlib
from itertools import pairwise
from pathlib import Path

import h11
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net import upstream as U
from inspector.net.proxy import ProxyApp
from inspector.net.upstream import UpstreamPool, UpstreamResponse, usable_for
from inspector.testing.hyp import examples

# ----------------------------------------------------------------------------------------------- the reader


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False
        self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default  # no socket: the pool's liveness check has nothing to poll


def feed(
    reads: list[bytes], method: bytes = b"GET", eof: bool = False
) -> tuple[U._Connection, asyncio.Future[UpstreamResponse], bytes]:
    """Run the reader over ``reads`` (then EOF): (connection, head future, payload taken)."""

    async def go() -> tuple[U._Connection, asyncio.Future[UpstreamResponse], bytes]:
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
def responses(draw: st.DrawFn) -> tuple[bytes, bytes, str]:
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
    return [wire[a:b] for a, b in pairwise(points)]


@settings(max_examples=examples(300), deadline=None)
@given(responses(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_reader_agrees_with_h11_on_every_framing_and_every_split(
    resp: tuple[bytes, bytes, str], cuts: list[int]
) -> None:
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


@settings(max_examples=examples(300), deadline=None)
@given(responses(), st.integers(min_value=0), st.binary(min_size=1, max_size=8), st.integers(min_value=0, max_value=30))
def test_reader_fuzz_never_raises_and_never_hangs_silently(
    resp: tuple[bytes, bytes, str], at: int, noise: bytes, cut: int
) -> None:
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


def h11_verdict(wire: bytes, method: bytes = b"GET") -> tuple[str, int, list[tuple[bytes, bytes]], bytes, bool]:
    """("accept" | "refuse", status, headers, payload, reusable) as h11 reads ``wire`` then EOF; "refuse": h11
    raised, or the response did not end."""
    c = h11.Connection(h11.CLIENT, max_incomplete_event_size=U.MAX_HEAD)
    c.send(h11.Request(method=method, target="/", headers=[("Host", "upstream.test")]))
    c.send(h11.EndOfMessage())
    status, headers, payload, eof = 0, [], b"", False
    try:
        c.receive_data(wire)
        while True:
            e = c.next_event()
            if isinstance(e, h11.Response):
                status, headers = e.status_code, list(e.headers.raw_items())
            elif isinstance(e, h11.Data):
                payload += e.data
            elif isinstance(e, h11.EndOfMessage):  # reusable: ended before EOF, h11 keeps it, no bytes after it
                reusable = not eof and c.their_state is h11.DONE and not c.trailing_data[0]
                return "accept", status, headers, payload, reusable
            elif e is h11.NEED_DATA and not eof:
                c.receive_data(b"")
                eof = True
            elif e is h11.NEED_DATA or e is h11.PAUSED or isinstance(e, h11.ConnectionClosed):
                return "refuse", status, headers, payload, False
    except h11.RemoteProtocolError:
        return "refuse", status, headers, payload, False


# pieces of a response head and body, one of them bent: what h11 (RFC 9112) refuses must be refused, what it reads
# must be read to the same bytes (issue 18). The reader accepted +5, 1_0, conflicting lengths, 0x7 chunk sizes...
LENGTHS = [
    b"5",
    b"+5",
    b"1_0",
    b"0x5",
    b"-1",
    b"5, 6",
    b"5, 5",
    b"5,5",
    b" 5 ",
    b"",
    b"5a",
    b"9" * 21,
    b"0" * 20 + b"5",
]
CHUNK_SIZES = [b"5", b"0x5", b"0_5", b"+5", b"-5", b"5 ", b"5;a=b", b" 5", b"05", b"g", b"5\r5", b"", b"00000005"]
STATUS_LINES = [
    b"HTTP/1.1 200 OK",
    b"HTTP/1.1 200",
    b"HTTP/1.1 200 ",
    b"HTTP/1.0 200 OK",
    b"HTTP/2.0 200 OK",
    b"HTTP/1.1 600 Odd",
    b"HTTP/1.1 999 Odd",
    b"HTTP/1.1 1000 Odd",
    b"HTTP/1.1 2OO OK",
    b"HTTP/1.1 099 Odd",
    b"HTTP/1.1  200 OK",
    b"http/1.1 200 OK",
    b" HTTP/1.1 200 OK",
    b"HTTP/1.1 200 OK sk-ant-api03-secret",
]
ODD_HEADERS = [
    b"X-A: a\rb",
    b"X-A: a\nb",
    b"X-A: a\nX-B: b",
    b"X-A: a\x00b",
    b"X A: a",
    b"X@A: a",
    b"X-A : a",
    b" X-A: folded",
    b"X-A",
    b":a",
    b"Connection: close",
    b"Connection: keep-alive",
    b"X-A: \xff\xfe",
    b"X-A:",
]
INTERIM = [
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
    b"HTTP/1.1 101 Up\r\n\r\n",
]


@st.composite
def malformed(draw: st.DrawFn) -> bytes:
    status: bytes = draw(st.sampled_from(STATUS_LINES))
    headers = draw(st.lists(st.sampled_from(ODD_HEADERS), max_size=2))
    framing = draw(st.sampled_from(["length", "lengths", "chunked", "te2", "te-list", "cl+te", "close", "none"]))
    payload = b"hello"
    body = payload
    if framing == "length":
        headers.append(b"Content-Length: " + draw(st.sampled_from(LENGTHS)))
    elif framing == "lengths":
        headers += [b"Content-Length: 5", b"Content-Length: " + draw(st.sampled_from(LENGTHS))]
    elif framing in ("chunked", "te2", "te-list", "cl+te"):
        headers.append(b"Transfer-Encoding: chunked")
        if framing == "te2":
            headers.append(b"Transfer-Encoding: " + draw(st.sampled_from([b"identity", b"chunked", b"gzip"])))
        elif framing == "te-list":
            headers[-1] = b"Transfer-Encoding: " + draw(
                st.sampled_from([b"chunked, gzip", b"gzip, chunked", b"CHUNKED"])
            )
        elif framing == "cl+te":
            headers.append(b"Content-Length: 5")
        body = draw(st.sampled_from(CHUNK_SIZES)) + b"\r\nhello\r\n0\r\n\r\n"
    elif framing == "none":
        body = b""
    eol: bytes = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    interim = b"".join(draw(st.lists(st.sampled_from(INTERIM), max_size=2)))
    extra = draw(st.sampled_from([b"", b"", b"HTTP/1.1 200 OK\r\n\r\n"]))
    return interim + eol.join([status, *headers]) + eol + eol + body + extra


@settings(max_examples=examples(600), deadline=None)
@given(malformed(), st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_reader_agrees_with_h11_on_malformed_responses(wire: bytes, cuts: list[int]) -> None:
    """The differential on bent responses: our reader and h11 agree on accept/refuse and on the body bytes, whatever
    the split into reads; beyond h11, a status past 599 and Transfer-Encoding with Content-Length are refused; an
    error text never carries upstream's bytes."""
    conn, fut, got = feed(splits(wire, cuts), eof=True)
    verdict, status, headers, payload, reusable = h11_verdict(wire)
    names = {k.lower() for k, _ in headers}
    if verdict == "accept" and (status > 599 or {b"transfer-encoding", b"content-length"} <= names):
        verdict = "refuse"  # the proxy's two rules on top of h11's
    ours = "accept" if (conn.body_done and conn.error is None and fut.done() and not fut.cancelled()) else "refuse"
    assert ours == verdict, (wire, conn.error)
    if verdict == "accept":
        r = fut.result()
        assert r.status_code == status and r.headers.raw == headers and got == payload
        assert conn.keep_alive == reusable and isinstance(got, bytes)
    else:
        assert isinstance(conn.error, httpx2.RemoteProtocolError)
        assert not (fut.done() and not fut.cancelled() and fut.exception() is None and conn.body_done)
        assert b"secret" not in str(conn.error).encode() and "bytearray" not in str(conn.error)


@pytest.mark.parametrize(
    "wire",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello",  # LF-only lines: RFC 9112 section 2.2 allows reading them
    ],
)
def test_a_well_framed_http11_answer_is_reused_and_http10_or_trailing_bytes_are_not(wire: bytes) -> None:
    conn, fut, got = feed([wire])
    assert got == b"hello" and conn.body_done and conn.keep_alive
    conn, fut, got = feed([wire.replace(b"HTTP/1.1", b"HTTP/1.0", 1)])  # 1.0: no keep-alive (it was kept)
    assert got == b"hello" and not conn.keep_alive
    conn, fut, got = feed([wire + b"HTTP/1.1 200 OK\r\n\r\n"])  # bytes nobody asked for
    assert got == b"hello" and not conn.keep_alive


@pytest.mark.parametrize(
    "wire, words",
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nhelloworld", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "conflicting"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x7\r\nhello!!\r\n0\r\n\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0_5\r\nhello\r\n0\r\n\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\nhello", "multiple"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "chunked"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "both"),
        (b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n", "outside 100-599"),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "101, a protocol switch nobody asked for"),
        (b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", "header"),
        (b"HTTP/1.1 100 Continue\r\n\r\n" * (U.MAX_INTERIM + 1) + b"HTTP/1.1 200 OK\r\n\r\n", "interim"),
    ],
)
def test_framing_h11_refuses_is_refused_with_a_named_reason(wire: bytes, words: str) -> None:
    """Issue 18, each reproduced on main: accepted there (last Content-Length won, 0x7 read as 7, the connection
    then reused), refused here, whatever the split."""
    for reads in ([wire], [wire[i : i + 1] for i in range(len(wire))]):
        conn, fut, got = feed(reads, eof=True)
        assert isinstance(conn.error, httpx2.RemoteProtocolError) and words in str(conn.error), conn.error
        assert not conn.keep_alive and conn.closed


def test_a_tunnel_answer_to_connect_is_refused_not_awaited() -> None:
    conn, fut, _ = feed([b"HTTP/1.1 200 Connection established\r\n\r\n"], method=b"CONNECT")
    assert isinstance(conn.error, httpx2.RemoteProtocolError) and "tunnel" in str(conn.error) and fut.done()


def test_many_interim_answers_in_one_read_are_no_recursion() -> None:
    wire = b"HTTP/1.1 100 Continue\r\n\r\n" * 5000 + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    conn, fut, _ = feed([wire])
    assert isinstance(conn.error, httpx2.RemoteProtocolError) and "interim" in str(conn.error)
    conn, fut, got = feed([b"HTTP/1.1 100 Continue\r\n\r\n" * 3 + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
    assert fut.result().status_code == 200 and got == b"ok"


def test_error_texts_never_echo_upstreams_bytes() -> None:
    """A key in a malformed status line or header reached stderr and the recording's end reason (80 bytes of it)."""
    key = b"sk-ant-api03-" + b"K" * 60
    for wire in (
        b"HTTP/1.1 2x0 " + key + b"\r\n\r\n",
        b"XTTP/1.1 200 " + key + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx-api-key " + key + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx-api-key: " + key + b"\x00\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + key + b"\r\n",
    ):
        conn, _, _ = feed([wire], eof=True)
        text = str(conn.error)
        assert isinstance(conn.error, httpx2.RemoteProtocolError) and b"KKKK" not in text.encode(), text
        assert "sk-ant" not in text
    conn, _, _ = feed([b"XTTP/1.1 200 " + key + b"\r\n\r\n"])
    assert str(conn.error) == "upstream sent an invalid response: malformed status line (86 bytes)"


def test_interim_answers_are_skipped_and_head_has_no_body() -> None:
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
def test_bad_responses_are_named_protocol_errors(wire: bytes, message: str) -> None:
    conn, fut, _ = feed([wire])
    assert isinstance(conn.error, httpx2.RemoteProtocolError) and message in str(conn.error)
    assert conn.closed  # never reused


def test_a_cut_body_is_an_error_not_a_short_success() -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    conn, fut, payload = feed([wire], eof=True)
    assert payload == b"abc" and isinstance(conn.error, httpx2.RemoteProtocolError) and not conn.body_done


def test_request_head_keeps_the_base_path_and_refuses_header_injection() -> None:
    pool = UpstreamPool("https://api.example.test:8443/prefix/")
    head = pool.request_head("POST", "/v1/messages?beta=true", [("x-api-key", "k"), ("X-Custom", "v")], b"{}")
    assert head == (
        b"POST /prefix/v1/messages?beta=true HTTP/1.1\r\nHost: api.example.test:8443\r\nConnection: keep-alive\r\n"
        b"x-api-key: k\r\nX-Custom: v\r\nContent-Length: 2\r\n\r\n"
    )
    assert b"Content-Length" not in pool.request_head("GET", "/v1/models", [], b"")
    with pytest.raises(httpx2.LocalProtocolError):
        pool.request_head("GET", "/", [("x", "a\r\nInjected: yes")], b"")


def test_environment_proxies_send_the_proxy_back_to_httpx2(monkeypatch: pytest.MonkeyPatch) -> None:
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
        self.close_on: set[int] = set()  # close (no answer) after reading these requests (1-based, all connections)

    async def __aenter__(self) -> Script:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
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
                if len(self.requests) in self.close_on:
                    break
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


async def test_keep_alive_connections_are_reused() -> None:
    async with Script([OK]) as s:
        pool = UpstreamPool(s.url)
        for _ in range(3):
            r = await pool.send("POST", "/v1/messages", [], b"{}")
            assert await body_of(r) == b"ok"
            await r.aclose()
        await pool.aclose()
    assert s.connections == 1 and len(s.requests) == 3


async def test_submit_writes_a_request_on_a_kept_alive_connection_before_it_returns() -> None:
    """A proxy reads many requests in one turn of its event loop: each one goes upstream as soon as it is read
    (`UpstreamPool.submit` writes it before returning), not on the next turn after every request's bookkeeping. On a
    new connection the task writes it once connected; a request that cannot be written is the future's error."""
    async with Script([OK]) as s:
        pool = UpstreamPool(s.url)
        r = await pool.submit("POST", "/v1/messages", [], b"{}")  # (a new connection: written by the task)
        assert await body_of(r) == b"ok"
        await r.aclose()
        conn = next(iter(pool.idle))
        written: list[bytes] = []
        assert conn.transport is not None
        real = conn.transport.write

        def write(data: bytes | bytearray | memoryview) -> None:
            written.append(bytes(data))
            real(data)

        conn.transport.write = write  # type: ignore[method-assign]
        fut = pool.submit("POST", "/v1/messages", [], b'{"n": 2}')
        assert written and written[0].startswith(b"POST /v1/messages HTTP/1.1") and written[-1].endswith(b'{"n": 2}')
        r = await fut
        assert await body_of(r) == b"ok"
        await r.aclose()
        bad = pool.submit("POST", "/v1/messages", [("x-a", "b\r\nx-injected: 1")], b"{}")
        with pytest.raises(httpx2.LocalProtocolError):
            await bad
        await pool.aclose()
    assert s.connections == 1 and len(s.requests) == 2


async def test_a_stale_keep_alive_connection_is_replaced_once() -> None:
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


async def test_a_fresh_connection_closed_before_answering_is_an_error_not_a_retry() -> None:
    async with Script([b""], close_after=1) as s:
        pool = UpstreamPool(s.url)
        with pytest.raises(httpx2.RemoteProtocolError, match="without sending a response"):
            await pool.send("POST", "/v1/messages", [], b"{}")
        await pool.aclose()
    assert len(s.requests) == 1  # sent once: never repeated behind the client's back


async def test_an_unfinished_body_is_not_reused_and_a_drop_is_an_error() -> None:
    partial = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
    async with Script([partial], close_after=1) as s:
        pool = UpstreamPool(s.url)
        r = await pool.send("GET", "/", [], b"")
        with pytest.raises(httpx2.RemoteProtocolError, match="before the end of the body"):
            await body_of(r)
        await r.aclose()
        assert not pool.idle
        await pool.aclose()


async def test_refused_and_timeouts_are_httpx2_errors() -> None:
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


async def test_reading_pauses_past_the_high_water_mark_and_resumes_when_taken() -> None:
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


async def test_a_request_that_meets_a_closed_idle_connection_is_failed_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stale keep-alive race, step by step: the request is written to an idle connection that upstream closes
    with no byte of an answer. Upstream may have read and acted on it, so it is not sent again on a new connection
    behind the client's back: the request fails, with a reason that says so (it re-sent it before)."""
    pool = UpstreamPool("http://upstream.test")
    stale, fresh = U._Connection(pool), U._Connection(pool)
    for c in (stale, fresh):
        c.connection_made(FakeTransport())
    pool.put_idle(stale)
    connects = []

    async def connect() -> U._Connection:
        connects.append(1)
        return fresh

    monkeypatch.setattr(pool, "_connect", connect)
    task = asyncio.ensure_future(pool.send("POST", "/v1/messages", [("x-a", "1")], b"{}"))
    # (ASYNC110: the fake transport has no event to wait on; each turn of the loop lets the send go one step)
    while not stale.transport.written:  # type: ignore[union-attr]  # noqa: ASYNC110
        await asyncio.sleep(0)
    stale.connection_lost(None)
    with pytest.raises(httpx2.RemoteProtocolError, match="not sent again"):
        await task
    assert connects == [] and fresh.transport.written == []  # type: ignore[union-attr]
    assert not pool.idle


async def test_a_reused_connection_upstream_drops_after_reading_the_request_is_not_re_sent() -> None:
    """A real upstream that reads the whole second request on a kept-alive connection, then closes without an
    answer: it sees that request once, and the client gets the failure (before: three requests arrived upstream
    and the client saw one success)."""
    async with Script([OK, b"", OK], close_after=None) as s:
        s.close_on = {2}
        pool = UpstreamPool(s.url)
        r = await pool.send("POST", "/v1/messages", [], b'{"n":1}')
        assert await body_of(r) == b"ok"
        await r.aclose()
        with pytest.raises(httpx2.RemoteProtocolError, match="not sent again"):
            await pool.send("POST", "/v1/messages", [], b'{"n":2}')
        await pool.aclose()
    assert len(s.requests) == 2 and s.connections == 1


async def test_an_idle_connection_closed_by_upstream_is_detected_before_reuse() -> None:
    """Upstream closed the idle connection and the close is waiting on the socket, not yet seen by the event loop:
    the pool polls the socket before reuse, and the request goes out on a new connection, written once."""
    import select
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    requests: list[bytes] = []
    first_closed = threading.Event()

    def serve() -> None:
        for i in range(2):
            c, _ = srv.accept()
            with c:
                data = b""
                while not data.endswith(b"\r\n\r\n"):
                    data += c.recv(65536)
                requests.append(data)
                c.sendall(OK)
                if i == 0:
                    c.shutdown(socket.SHUT_RDWR)
                    first_closed.set()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    pool = UpstreamPool(f"http://127.0.0.1:{port}")
    r = await pool.send("GET", "/a", [], b"")
    assert await body_of(r) == b"ok"
    stale = r._conn
    await r.aclose()
    assert pool.idle == [stale]
    assert first_closed.wait(10)  # blocking on purpose: the event loop must not see the close first
    sock = stale.transport.get_extra_info("socket")  # type: ignore[union-attr]
    assert select.select([sock.fileno()], [], [], 10)[0]  # the FIN is there, undelivered
    writes: list[bytes] = []
    stale.transport.write = writes.append  # type: ignore[method-assign,union-attr]
    r = await pool.send("GET", "/b", [], b"")
    assert await body_of(r) == b"ok"
    await r.aclose()
    await pool.aclose()
    t.join(10)
    assert writes == [] and [q.split(b" ")[1] for q in requests] == [b"/a", b"/b"]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
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


async def test_tls_upstream_with_the_given_context_and_a_refused_certificate(tls_files: tuple[Path, Path]) -> None:
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


async def test_a_request_cancelled_as_its_connection_is_made_leaves_no_failure_for_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy cancels the upstream request when its client leaves. Cancelled the moment its new connection is
    made (the request already written), the connection is closed and its request's future goes with it: before, the
    future failed later ("upstream closed the connection without sending a response") with nobody to read it, and
    asyncio logged three lines "Future exception was never retrieved" on the proxy's stderr, one per such client."""
    import gc

    loop = asyncio.get_running_loop()
    logged: list[str] = []
    loop.set_exception_handler(lambda _loop, context: logged.append(str(context.get("message"))))
    tasks: list[asyncio.Future[UpstreamResponse]] = []
    made = U._Connection.connection_made

    def cancel_when_made(self: U._Connection, transport: asyncio.BaseTransport) -> None:
        made(self, transport)
        tasks[0].cancel()

    monkeypatch.setattr(U._Connection, "connection_made", cancel_when_made)
    try:
        async with Script([OK]) as s:
            pool = UpstreamPool(s.url)
            tasks.append(pool.submit("POST", "/v1/messages", [], b"{}"))
            with pytest.raises(asyncio.CancelledError):
                await tasks[0]
            await asyncio.wait_for(s.closed_one.wait(), 5)  # upstream saw the connection close
            for _ in range(3):
                await asyncio.sleep(0)
            await pool.aclose()
        tasks.clear()
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert logged == []

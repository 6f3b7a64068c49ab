"""A hostile upstream behind the real proxy (issue 19): a raw-socket loopback server answers each request with bytes
the test chose. Whatever it sends, the client gets either a well-framed forward of what h11 (RFC 9112) reads in
those bytes, or a 502 with a one-line reason; refused framing never becomes a 200; the proxy stays up and logs no
traceback. Each case of the issue was reproduced on main ("Exception in ASGI application", 0 bytes to the client, or
a 504 after the read timeout). Then upstream TLS: ``--ca-file`` and ``--insecure``."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import h11
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli.proxy import tls_context
from inspector.core import exactjson
from inspector.core.errors import UsageError
from inspector.net.proxy import ProxyApp, format_exchange
from inspector.net.server import BackgroundServer
from inspector.record.dump import dump_turns
from inspector.record.recording import read_recording
from inspector.testing.hyp import examples
from inspector.testing.streamgen import sse, tool_turn


class RawUpstream:
    """A loopback server in a thread: for each connection, reads one request (head + Content-Length body), writes
    ``answer`` and closes. Counts requests. ``answer`` may be changed between requests."""

    def __init__(self, answer: bytes = b"") -> None:
        self.answer = answer
        self.requests = 0
        self.head = b""  # the last request's head
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __enter__(self) -> RawUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except TimeoutError:
                continue
            with c:
                c.settimeout(10)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        got = c.recv(65536)
                        if not got:
                            break
                        data += got
                    head, _, body = data.partition(b"\r\n\r\n")
                    self.head = head
                    n = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            n = int(line.split(b":")[1])
                    while len(body) < n:
                        body += c.recv(65536)
                    self.requests += 1
                    c.sendall(self.answer)
                    c.shutdown(socket.SHUT_WR)
                except OSError:
                    pass


def ask(base_url: str) -> tuple[int | None, bytes, str]:
    """POST through the proxy with a raw socket, read to EOF, parse with h11: (status, body, "" or the client-side
    failure: the answer was cut or malformed)."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(
            # a streamed call: a turn of a conversation, recorded as an attempt (a non-streamed call is a side request)
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16\r\n"
            b'Connection: close\r\n\r\n{"stream": true}'
        )
        raw = b""
        while True:
            got = s.recv(65536)
            if not got:
                break
            raw += got
    c = h11.Connection(h11.CLIENT)
    c.send(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "2")]))
    c.send(h11.Data(data=b"{}"))
    c.send(h11.EndOfMessage())
    c.receive_data(raw)
    c.receive_data(b"")
    status, body = None, b""
    try:
        while True:
            e = c.next_event()
            if isinstance(e, h11.Response):
                status = e.status_code
            elif isinstance(e, h11.Data):
                body += e.data
            elif isinstance(e, h11.EndOfMessage):
                return status, body, ""
            elif e is h11.NEED_DATA or isinstance(e, h11.ConnectionClosed):
                return status, body, "cut"
    except h11.RemoteProtocolError as e:
        return status, body, f"malformed: {e}"


def upstream_reads(wire: bytes) -> tuple[str, int, bytes]:
    """("accept" | "refuse", status, body) as h11 reads what upstream sent (then its close)."""
    c = h11.Connection(h11.CLIENT)
    c.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
    c.send(h11.EndOfMessage())
    c.receive_data(wire)
    c.receive_data(b"")
    status, body = 0, b""
    try:
        while True:
            e = c.next_event()
            if isinstance(e, h11.Response):
                status = e.status_code
            elif isinstance(e, h11.Data):
                body += e.data
            elif isinstance(e, h11.EndOfMessage):
                return "accept", status, body
            elif e is h11.NEED_DATA or isinstance(e, h11.ConnectionClosed):
                return "refuse", status, body
    except h11.RemoteProtocolError:
        return "refuse", status, body


HOSTILE = {
    "bare CR in a header": b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok",
    "bare LF splitting a header": b"HTTP/1.1 200 OK\r\nX-A: a\nb c\r\nContent-Length: 2\r\n\r\nok",
    "NUL in a header": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
    "invalid header name": b"HTTP/1.1 200 OK\r\nX(A): a\r\nContent-Length: 2\r\n\r\nok",
    "status 600": b"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok",
    "status 999": b"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok",
    "101 Upgrade": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    "conflicting Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
    "list Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok!",
    "signed Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    "underscored Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: 0_2\r\n\r\nok",
    "invalid Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok",
    "negative Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok",
    "huge Content-Length": b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 30 + b"\r\n\r\nok",
    "Content-Length with Transfer-Encoding": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    ),
    "many 1xx in one read": b"HTTP/1.1 100 Continue\r\n\r\n" * 3000 + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "chunked, gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "0x7 chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
    "chunked then identity": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    ),
    "malformed status line with a key": b"HTTP/1.1 2x0 sk-ant-api03-SECRETSECRETSECRET\r\n\r\n",
}


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog


def test_every_hostile_answer_is_a_502_with_a_one_line_reason_and_the_proxy_stays_up(
    logs: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = tmp_path / "run.jsonl"
    lines: list[str] = []
    with (
        RawUpstream() as up,
        BackgroundServer(
            ProxyApp(up.url, read_timeout=30, record=record, on_exchange=lambda ex: lines.append(format_exchange(ex)))
        ) as px,
    ):
        for name, wire in HOSTILE.items():
            up.answer = wire
            status, body, problem = ask(px.base_url)
            assert (status, problem) == (502, ""), name
            message = orjson.loads(body)["error"]["message"]
            assert "\n" not in message and "SECRET" not in message and "upstream sent" in message, name
            assert "unreachable" not in message, name
        up.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        assert ask(px.base_url) == (200, b"ok", "")  # still up, and still forwarding
    out = capfd.readouterr()
    assert "Traceback" not in logs.text + out.err + out.out and "Exception in ASGI" not in logs.text + out.err
    assert "SECRET" not in logs.text + out.err + out.out + "\n".join(lines)  # the headless exchange lines too
    assert b"SECRET" not in record.read_bytes() and b"malformed status line (44 bytes)" in record.read_bytes()


def test_an_lf_only_head_is_read_at_once_not_a_504() -> None:
    """RFC 9112 section 2.2 lets a recipient read LF as a line end; h11 does; main waited for CR LF CR LF until the
    read timeout and answered 504."""
    with RawUpstream(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok") as up:
        with BackgroundServer(ProxyApp(up.url, read_timeout=30)) as px:
            assert ask(px.base_url) == (200, b"ok", "")


def test_a_refused_chunk_size_after_the_head_is_a_cut_answer_never_a_complete_200() -> None:
    """The head went out before the bad chunk line arrived (upstream writes it once the client has the head): the
    client gets the head and a body that does not end, never a complete 200 (main read 0x2 as 2 and ended cleanly)."""
    first = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    second = b"0x2\r\nok\r\n0\r\n\r\n"
    go = threading.Event()

    class TwoWrites(RawUpstream):
        def _run(self) -> None:
            c, _ = self.sock.accept()
            with c:
                c.recv(65536)
                c.sendall(first)
                go.wait(10)
                c.sendall(second)

    with TwoWrites() as up:
        up.sock.settimeout(10)
        with BackgroundServer(ProxyApp(up.url, read_timeout=30)) as px:
            host, port = px.base_url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=30) as s:
                s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                raw = b""
                while b"\r\n\r\n" not in raw:
                    raw += s.recv(65536)
                go.set()  # the head reached the client: now the refused chunk line
                while got := s.recv(65536):
                    raw += got
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
    assert not rest.endswith(b"0\r\n\r\n") and b"ok" not in rest  # no payload, no last chunk: cut


RAW_PIECES = [
    b"HTTP/1.1 200 OK",
    b"HTTP/1.0 200 OK",
    b"HTTP/1.1 429 Too Many",
    b"HTTP/1.1 999 X",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    b"Content-Length: 2",
    b"Content-Length: 3",
    b"Content-Length: +2",
    b"Transfer-Encoding: chunked",
    b"Transfer-Encoding: gzip",
    b"X-A: a\rb",
    b"X-A: b\x00",
    b"X-B: ok",
    b"Connection: close",
    b"Bad Name: x",
]
BODIES = [b"ok", b"2\r\nok\r\n0\r\n\r\n", b"0x2\r\nok\r\n0\r\n\r\n", b"", b"okok", b"2\r\nok\r\n"]


@st.composite
def raw_answers(draw: st.DrawFn) -> bytes:
    status: bytes = draw(st.sampled_from(RAW_PIECES[:5]))
    headers = draw(st.lists(st.sampled_from(RAW_PIECES[5:]), max_size=3))
    eol: bytes = draw(st.sampled_from([b"\r\n", b"\n"]))
    wire = eol.join([status, *headers]) + eol + eol + draw(st.sampled_from(BODIES))
    if draw(st.booleans()):
        i = draw(st.integers(0, len(wire)))
        wire = wire[:i] + draw(st.binary(min_size=1, max_size=3)) + wire[i + 1 :]
    return wire


@pytest.fixture(scope="module")
def hostile_proxy() -> Iterator[tuple[RawUpstream, BackgroundServer]]:
    with RawUpstream() as up, BackgroundServer(ProxyApp(up.url, read_timeout=5)) as px:
        yield up, px


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw_answers())
def test_fuzz_raw_upstream_answers_through_the_proxy(
    hostile_proxy: tuple[RawUpstream, BackgroundServer], logs: pytest.LogCaptureFixture, wire: bytes
) -> None:
    """Any bytes from upstream: a forward of exactly what h11 reads (status and body), or a 502; a refused answer
    never reaches the client as a complete success; no traceback."""
    up, px = hostile_proxy
    up.answer = wire
    logs.clear()
    status, body, problem = ask(px.base_url)
    verdict, up_status, up_body = upstream_reads(wire)
    if status == 502:
        assert problem == "" and "\n" not in orjson.loads(body)["error"]["message"]
    elif verdict == "accept" and up_status <= 599:
        assert (status, body, problem) == (up_status, up_body, ""), wire
    else:  # refused after its head had gone out: the answer to the client is cut, never complete
        assert problem != "", wire
    assert "Traceback" not in logs.text and "Exception in ASGI" not in logs.text


@pytest.mark.parametrize(
    ("head", "after", "framing"),
    [
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 5\r\n\r\n",
            b"data:garbage!",
            "its Content-Length (5)",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n0\r\n\r\n",
            b"garbage!",
            "its last chunk",
        ),
    ],
)
def test_bytes_after_the_end_of_upstreams_body_are_named_in_the_recording(
    tmp_path: Path, head: bytes, after: bytes, framing: str
) -> None:
    """Upstream sends more than its framing says (a body longer than its Content-Length, bytes after the last chunk):
    the client gets the response as framed (RFC 9112 section 6.3: the rest is not forwarded), and the recording says
    so. The proxy dropped them with no word: the exchange 'complete', the recording as if upstream had sent nothing
    more."""
    record = tmp_path / "run.jsonl"
    with RawUpstream(head + (b"" if b"chunked" in head else b"data:") + after) as up:
        with BackgroundServer(ProxyApp(up.url, read_timeout=30, record=record)) as px:
            status, body, problem = ask(px.base_url)
    assert (status, body, problem) == (200, b"data:", "")
    recording = read_recording(record)
    notes = [o["note"] for o in recording.observations if o.get("type") == "proxy_note"]
    assert notes == [
        f"upstream sent {len(after)} bytes after the end of its body ({framing}): not forwarded, not recorded"
    ]


def test_the_headers_a_connection_header_lists_are_not_forwarded_either_way() -> None:
    """RFC 9110 section 7.6.1: a proxy removes the fields its Connection header names (hop-by-hop) before
    forwarding, with Connection itself. The proxy removed Connection and the fixed hop-by-hop names only: upstream got
    the client's `x-hop-req`, the client upstream's `x-hop`."""
    answer = b"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-Kept: 2\r\nContent-Length: 2\r\n\r\nok"
    with RawUpstream(answer) as up, BackgroundServer(ProxyApp(up.url, read_timeout=30)) as px:
        host, port = px.base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(
                b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close, X-Hop-Req ,\r\nX-Hop-Req: 1\r\n"
                b"X-Kept-Req: 2\r\n\r\n"
            )
            raw = b""
            while got := s.recv(65536):
                raw += got
    sent = up.head.lower()
    assert b"x-kept-req: 2" in sent and b"x-hop-req" not in sent
    head = raw.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 200") and b"x-kept: 2" in head and b"x-hop" not in head


def test_a_dead_environment_proxy_is_named_not_blamed_on_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS_PROXY / HTTP_PROXY pointing at nothing: the 502 names that proxy (host:port and the variable, never its
    credentials); main said "upstream unreachable"."""
    dead = socket.create_server(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nobody listens there now
    for k in (
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
    ):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:pa55word@127.0.0.1:{port}")
    with BackgroundServer(ProxyApp("http://upstream.invalid:8080", connect_timeout=5)) as px:
        status, body, problem = ask(px.base_url)  # a raw socket: no proxy on the test's own way
    message = orjson.loads(body)["error"]["message"]
    assert status == 502 and f"HTTP proxy 127.0.0.1:{port} (HTTP_PROXY)" in message, message
    assert "upstream unreachable" not in message and "alice" not in message and "pa55word" not in message


# ----------------------------------------------------------------------------------------------- upstream TLS
# `inspector proxy --ca-file` (a private CA: only it is trusted) and `--insecure` (nothing verified, said loudly at
# start), against a loopback TLS upstream with a certificate made for this run.

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cert_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
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


class TlsUpstream:
    """A TLS server on loopback in a thread: each connection gets one request answered ``ok`` and is closed."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ctx.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.served = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"https://localhost:{self.sock.getsockname()[1]}"

    def __enter__(self) -> TlsUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            try:
                raw.settimeout(10)
                with self.ctx.wrap_socket(raw, server_side=True) as c:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += c.recv(65536)
                    self.served += 1
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            except (OSError, ssl.SSLError):
                raw.close()  # a client that refused our certificate


def test_ca_file_trusts_the_private_ca_and_the_default_refuses_it(cert_files: tuple[Path, Path]) -> None:
    cert, key = cert_files
    with TlsUpstream(cert, key) as up:
        with BackgroundServer(ProxyApp(up.url, ssl_context=tls_context(str(cert), False))) as px:
            assert ask(px.base_url) == (200, b"ok", "")
        with BackgroundServer(ProxyApp(up.url)) as px:  # the SDK's trust store: a self-signed CA is refused
            status, body, problem = ask(px.base_url)
        assert status == 502 and "TLS with localhost" in orjson.loads(body)["error"]["message"]
        assert up.served == 1


def test_insecure_verifies_nothing(cert_files: tuple[Path, Path]) -> None:
    cert, key = cert_files
    with TlsUpstream(cert, key) as up:
        with BackgroundServer(ProxyApp(up.url, ssl_context=tls_context(None, True))) as px:
            assert ask(px.base_url) == (200, b"ok", "")


def test_an_unusable_ca_file_is_a_one_line_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    for path in (bad, tmp_path / "missing.pem"):
        with pytest.raises(UsageError, match="--ca-file"):
            tls_context(str(path), False)
    r = subprocess.run(
        [sys.executable, "-m", "inspector", "proxy", "--headless", "--listen", "127.0.0.1:0", "--ca-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--ca-file" in r.stderr and "Traceback" not in r.stderr


def test_insecure_is_said_at_start_on_stderr_and_in_the_start_up_line(cert_files: tuple[Path, Path]) -> None:
    cert, key = cert_files
    with TlsUpstream(cert, key) as up:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "inspector", "proxy", "--headless", "--quiet", "--listen", "127.0.0.1:0"),
                *("--upstream", up.url, "--insecure"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            first = proc.stdout.readline()
            base = proc.stdout.readline().strip().removeprefix("ANTHROPIC_BASE_URL=")
            assert "TLS NOT VERIFIED (--insecure)" in first and up.url in first
            assert ask(base) == (200, b"ok", "")
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
    assert "warning: --insecure: upstream's TLS certificate is NOT verified" in err


# --- a streamed tool input holding an integer beyond 64 bits: the tool call is tracked, recorded and forwarded
# byte-exact (found auditing orjson writes of wire values: the proxy's subagent hint serialized the input with
# orjson, which refuses such an integer, and the stream's bookkeeping raised in the middle of the forward:
# "Exception in ASGI application")


DEEP = '{"a": ' + "[" * 400 + "1" + "]" * 400 + "}"  # deeper than orjson writes (255 levels)
# as deep as orjson reads (1,024 levels): deeper than the standard library writes at its default recursion limit
DEEPEST = '{"a": ' + "[" * 1022 + "1" + "]" * 1022 + "}"


@pytest.mark.parametrize(
    ("fragments", "value"),
    [
        (['{"a": 1844674407370955161', "55161}"], {"a": 184467440737095516155161}),
        ([DEEP[:200], DEEP[200:]], orjson.loads(DEEP)),
        ([DEEPEST[:200], DEEPEST[200:]], orjson.loads(DEEPEST)),
    ],
    ids=["beyond-64-bits", "400-deep", "1023-deep"],
)
def test_a_tool_input_integer_beyond_64_bits_goes_through_the_proxy(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    fragments: list[str],
    value: dict[str, object],
) -> None:
    stream = sse(*tool_turn(fragments))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(stream)
    record = tmp_path / "big.jsonl"
    lines: list[str] = []
    with (
        caplog.at_level(logging.DEBUG),
        RawUpstream(head + stream) as up,
        BackgroundServer(
            ProxyApp(up.url, record=record, on_exchange=lambda ex: lines.append(format_exchange(ex)))
        ) as px,
    ):
        assert ask(px.base_url) == (200, stream, "")
    out = capfd.readouterr()
    assert "Traceback" not in caplog.text + out.err + out.out
    [turn] = dump_turns(read_recording(record))
    [use] = [b for b in turn["message"]["content"] if b.get("type") == "tool_use"]
    assert exactjson.dumps(use["input"]) == exactjson.dumps(value)  # (== recurses per level: too deep for 1023)
    assert lines and "complete" in lines[-1], lines

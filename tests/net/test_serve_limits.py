"""`inspector serve` connection limits on real loopback sockets: keep-alive long enough for real clients, idle and
slow (slowloris) connections closed, request bodies bounded (413) and timed (408). Timeouts are driven by a
virtual clock (the server's event loop time jumps forward), so no test waits for them in real time."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h11
import orjson
import pytest

from inspector.net.serve import BODY_TIMEOUT, DEFAULT_MAX_BODY, HEADER_TIMEOUT, KEEP_ALIVE, ServeApp
from inspector.net.server import BackgroundServer
from inspector.testing.serve import KEY, RawClient, VirtualClockLoop, kept_exchange, loop_factory, messages_body

ROOT = Path(__file__).resolve().parents[2]

if TYPE_CHECKING:
    from starlette.requests import Request


def server(**kw: Any) -> tuple[BackgroundServer, list[VirtualClockLoop]]:
    loops: list[VirtualClockLoop] = []
    srv = BackgroundServer(ServeApp(speed=math.inf, **kw), loop_factory=loop_factory(loops))
    return srv, loops


def test_defaults() -> None:
    app = ServeApp()
    assert KEEP_ALIVE >= 60 and app.uvicorn_options["timeout_keep_alive"] == KEEP_ALIVE
    assert DEFAULT_MAX_BODY == 32 * 1024 * 1024 and app.max_body == DEFAULT_MAX_BODY
    assert app.uvicorn_options["h11_max_incomplete_event_size"] <= 64 * 1024


@pytest.mark.parametrize("keep_alive, survives", [(KEEP_ALIVE, True), (5.0, False)])
def test_a_client_waiting_10s_between_requests_keeps_its_connection(keep_alive: float, survives: bool) -> None:
    """uvicorn's default (5 s) closes the idle connection and clients resend; serve keeps it 75 s. The control
    case (keep_alive=5) shows the test sees a close when there is one."""
    srv, loops = server(keep_alive=keep_alive)
    with srv:
        c = RawClient(srv.address)
        try:
            assert c.request("/v1/messages", messages_body())[0] == 200
            loops[0].advance(10.0)
            if survives:
                status, _, body = c.request("/v1/messages", messages_body(messages=[{"role": "user", "content": "2"}]))
                assert status == 200 and b"message_stop" in body
                loops[0].advance(KEEP_ALIVE + 1)
                assert c.closed_by_server()  # and an idle connection does end
            else:
                assert c.closed_by_server()
        finally:
            c.close()


def test_a_new_connection_that_sends_nothing_is_closed_after_the_keep_alive() -> None:
    srv, loops = server()
    with srv:
        c = RawClient(srv.address)
        try:
            loops[0].advance(KEEP_ALIVE - 5)
            assert c.request("/v1/messages", messages_body())[0] == 200  # still open before the timeout
            loops[0].advance(KEEP_ALIVE + 1)
            assert c.closed_by_server()
        finally:
            c.close()
        c = RawClient(srv.address)
        try:
            loops[0].advance(KEEP_ALIVE + 1)
            assert c.closed_by_server()
        finally:
            c.close()


def test_slowloris_headers_are_cut_off() -> None:
    srv, loops = server()
    with srv:
        c = RawClient(srv.address)
        try:
            c.send_raw(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
            loops[0].advance(HEADER_TIMEOUT / 2)
            c.send_raw(b"x-api-key: " + KEY.encode() + b"\r\n")  # a byte now and then must not keep it alive
            loops[0].advance(HEADER_TIMEOUT / 2 + 1)
            assert c.closed_by_server()
        finally:
            c.close()


def test_headers_that_arrive_in_time_are_served() -> None:
    srv, loops = server()
    with srv:
        c = RawClient(srv.address)
        try:
            body = orjson.dumps(messages_body())
            head = (
                f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 2023-06-01\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            ).encode()
            c.send_raw(head[:20])
            loops[0].advance(HEADER_TIMEOUT - 5)
            c.send_raw(head[20:] + b"\r\n" + body)
            c.conn.send(_request_for_state())  # let the h11 client expect the response
            c.conn.send(_end())
            status, _, raw = c.response()
            assert status == 200 and b"message_stop" in raw
        finally:
            c.close()


def _request_for_state() -> h11.Request:

    return h11.Request(method="POST", target="/", headers=[("host", "x"), ("content-length", "0")])


def _end() -> h11.EndOfMessage:

    return h11.EndOfMessage()


def test_oversized_headers_are_refused() -> None:
    srv, _ = server()
    with srv:
        c = RawClient(srv.address)
        try:
            c.send_raw(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 200_000)
            data = b""
            while chunk := _recv(c.sock):
                data += chunk
            assert data.startswith(b"HTTP/1.1 400")  # h11's limit: uvicorn answers 400 and closes
        finally:
            c.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def test_a_body_announced_too_large_is_413_without_reading_it() -> None:
    srv, _ = server(max_body=1000)
    with srv:
        c = RawClient(srv.address)
        before = srv.owner.total_exchanges
        try:
            c.send_raw(
                f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 1\r\n"
                f"content-type: application/json\r\ncontent-length: {200 * 1024 * 1024}\r\n\r\n".encode()
            )
            c.conn.send(_request_for_state())
            c.conn.send(_end())
            status, headers, raw = c.response()
            assert status == 413 and headers["connection"] == "close"
            assert orjson.loads(raw)["error"] == {
                "type": "request_too_large",
                "message": "Request exceeds the maximum allowed number of bytes.",
            }
            assert c.closed_by_server()
        finally:
            c.close()


def test_a_chunked_body_is_counted_as_it_arrives() -> None:
    srv, _ = server(max_body=1000)
    with srv:
        c = RawClient(srv.address)
        before = srv.owner.total_exchanges
        try:
            c.send_raw(
                f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 1\r\n"
                "content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".encode()
            )
            for _ in range(3):  # 1800 bytes; the server stops reading past 1000 and answers
                c.send_raw(b"258\r\n" + b"x" * 600 + b"\r\n")
            c.conn.send(_request_for_state())
            c.conn.send(_end())
            status, _, raw = c.response()
            assert status == 413 and orjson.loads(raw)["error"]["type"] == "request_too_large"
            assert c.closed_by_server()
            assert kept_exchange(srv.owner, before).status == 413
        finally:
            c.close()


def test_a_body_at_the_limit_is_served() -> None:
    body = orjson.dumps(messages_body())
    srv, _ = server(max_body=len(body))
    with srv:
        c = RawClient(srv.address)
        try:
            assert c.request("/v1/messages", body)[0] == 200
        finally:
            c.close()


def test_a_slow_body_times_out_with_408() -> None:
    import threading

    srv, loops = server()
    reading = threading.Event()
    original: Callable[[Request], Awaitable[bytes]] = srv.owner._read_body

    async def read_body(request: Request) -> bytes:
        reading.set()  # the body deadline is set right after this, before the first await
        return await original(request)

    srv.owner._read_body = read_body
    with srv:
        c = RawClient(srv.address)
        before = srv.owner.total_exchanges
        try:
            c.send_raw(
                f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 1\r\n"
                "content-type: application/json\r\ncontent-length: 100\r\n\r\n{".encode()
            )
            c.conn.send(_request_for_state())
            c.conn.send(_end())
            assert reading.wait(10)
            loops[0].advance(BODY_TIMEOUT + 1)
            status, _, raw = c.response()
            assert status == 408 and orjson.loads(raw)["error"]["type"] == "timeout_error"
            assert c.closed_by_server()
        finally:
            c.close()


def test_a_client_that_leaves_in_the_middle_of_its_body_logs_no_traceback(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """A client gone before its whole body came (its own timeout, a Ctrl-C during the upload): starlette raised
    ClientDisconnect out of the body's read, and uvicorn logged 'Exception in ASGI application' with a traceback for
    each such client. It is a planned drop now (as in the proxy): nothing logged, the server goes on."""
    import logging
    import threading

    app = ServeApp(speed=math.inf)
    begun, ended = threading.Event(), threading.Event()
    read_body = app._read_body

    async def watched(request: Any) -> bytes:
        begun.set()
        try:
            return await read_body(request)
        finally:
            ended.set()

    app._read_body = watched  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO), BackgroundServer(app) as srv:
        with socket.create_connection(srv.address, timeout=10) as s:
            s.sendall(
                f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 1\r\n"
                'content-type: application/json\r\ncontent-length: 100\r\n\r\n{"model":'.encode()
            )
            assert begun.wait(10)  # (the body's read has begun: the client leaves in the middle of it)
        assert ended.wait(10)  # (the read saw it leave)
        c = RawClient(srv.address)
        try:
            assert c.request("/v1/messages", messages_body())[0] == 200  # still serving
        finally:
            c.close()
    out = capfd.readouterr()
    assert "Traceback" not in caplog.text + out.err and "Exception in ASGI" not in caplog.text + out.err


def test_an_exchange_keeps_and_prints_a_bounded_model_name_and_rejection() -> None:
    """A client names a 4 MiB model: the 404 echoes it (as the API does), but the exchange kept it whole in the ring
    of --history exchanges (and in its 'rejected' text) and the server printed a 4 MiB line on stderr: 20 such
    requests grew serve by 167 MB and wrote 84 MB of log. What is kept and printed is cut to EXCHANGE_TEXT."""
    from inspector.net.serve import EXCHANGE_TEXT, format_exchange

    lines: list[str] = []
    big = "m" + "x" * (4 << 20)
    kept = []
    for lenient in (False, True):
        app = ServeApp(speed=math.inf, lenient=lenient, on_exchange=lambda ex: lines.append(format_exchange(ex)))
        with BackgroundServer(app) as srv:
            c = RawClient(srv.address)
            try:
                status, _, raw = c.request("/v1/messages", {**messages_body(), "model": big})
                if not lenient:  # (the answer echoes it whole, as the API's)
                    assert status == 404 and big in orjson.loads(raw)["error"]["message"]
            finally:
                c.close()
        kept.append(app.exchanges[-1])
    rejected, served = kept
    assert rejected.status == 404 and rejected.rejected is not None
    assert len(rejected.rejected) <= EXCHANGE_TEXT and len(rejected.model or "") <= EXCHANGE_TEXT
    assert served.status == 200 and served.model is not None and len(served.model) <= EXCHANGE_TEXT
    assert served.model.startswith("mxxx") and f"{len(big)} characters" in served.model
    assert all(len(line) < 3 * EXCHANGE_TEXT for line in lines)


def test_an_exchange_keeps_a_bounded_path() -> None:
    """A 60 KB request path (404) was kept whole in the exchange ring: 100 KB a request, a gigabyte at --history's
    10,000. It is cut to EXCHANGE_TEXT too."""
    from inspector.net.serve import EXCHANGE_TEXT

    app = ServeApp(speed=math.inf)
    with BackgroundServer(app) as srv:
        c = RawClient(srv.address)
        try:
            assert c.request("/v1/" + "p" * 60000, None, method="GET")[0] == 404
        finally:
            c.close()
    [ex] = list(app.exchanges)
    assert len(ex.path) <= EXCHANGE_TEXT and ex.path.startswith("/v1/ppp") and "60004 characters" in ex.path


def test_plans_for_a_long_model_name_are_not_cached() -> None:
    """With --lenient any model is served, and echoed in the plan: the plan caches (64 plans, 64 faulted scenarios,
    bounded by count only) kept each 4 MiB model's plan (9 MB of RSS per request, up to gigabytes with 32 MiB
    names). A plan for a model name past CACHED_MODEL characters is rendered for its request alone."""
    from inspector.net.serve import CACHED_MODEL

    app = ServeApp(speed=math.inf, lenient=True)
    with BackgroundServer(app) as srv:
        c = RawClient(srv.address)
        try:
            for i in range(3):
                big = f"m{i}" + "x" * (1 << 20)
                status, _, raw = c.request("/v1/messages", {**messages_body(), "model": big})
                assert status == 200 and big.encode() in raw  # (echoed, as before)
            assert c.request("/v1/messages", {**messages_body(), "model": "claude-sonnet-4-5"})[0] == 200
        finally:
            c.close()
    keys = [*app._plans, *app._faulted]
    assert keys and all(len(part) <= CACHED_MODEL for key in keys for part in key if isinstance(part, str))


def test_plans_echoing_big_request_fields_are_not_cached() -> None:
    """A Response echoes the request's instructions (and tools, metadata...) in its plan: the plan cache kept each
    4 MiB `instructions` (18 MB of RSS per request). Past CACHED_ECHO bytes the plan is rendered for its request
    alone; a small echo is cached as before."""
    app = ServeApp(speed=math.inf, lenient=True)
    body = {"model": "gpt-4o", "stream": True, "input": "hi"}
    with BackgroundServer(app) as srv:
        c = RawClient(srv.address)
        try:
            for i in range(2):
                big = f"i{i}" + "x" * (1 << 20)
                status, _, raw = c.request("/v1/responses", {**body, "instructions": big}, headers={})
                assert status == 200 and big.encode() in raw  # (echoed, as before)
            assert len(app._plans) == 0
            assert c.request("/v1/responses", {**body, "instructions": "be brief"}, headers={})[0] == 200
            assert len(app._plans) == 1
        finally:
            c.close()


def test_a_long_session_header_is_kept_by_its_digest() -> None:
    """The attempt counters and the @once faults are keyed by the x-inspector-session header, --history of them: a
    64 KiB header each was kept whole (200 requests: +12 MB). A long one is keyed by its digest; the same long
    session still counts its attempts."""
    from inspector.net.serve import SESSION_KEPT

    app = ServeApp(speed=math.inf)
    long_a, long_b = "a" * 60000, "b" * 60000
    with BackgroundServer(app) as srv:
        c = RawClient(srv.address)
        try:
            for session in (long_a, long_a, long_b):
                headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "x-inspector-session": session}
                assert c.request("/v1/messages", messages_body(), headers=headers)[0] == 200
        finally:
            c.close()
    keys = list(app.api.attempts)
    assert len(keys) == 2 and sorted(app.api.attempts.values()) == [1, 2]  # (a's two attempts, b's one)
    assert all(len(part) <= SESSION_KEPT + 7 for key in keys for part in key if isinstance(part, str))


def _serve_process() -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", "serve", "--scenario", "weather", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(ROOT),
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(b"ANTHROPIC_BASE_URL="):
            return proc, line.split(b"=", 1)[1].strip().decode()
    proc.kill()
    raise AssertionError("serve did not start")


def test_a_request_body_still_coming_at_shutdown_is_answered_503_without_a_traceback() -> None:
    """SIGTERM to `inspector serve` while a client was still sending a request body: uvicorn waited for it through
    its 2 s grace period, then cancelled it and printed 'Exception in ASGI application' and a traceback. The body
    read now stops when the shutdown begins: the client gets a 503 (overloaded_error, 'shutting down'), stderr has no
    traceback, and serve ends as it does when idle (its SIGTERM status)."""
    idle, _ = _serve_process()
    idle.terminate()
    idle.communicate(timeout=15)
    proc, base = _serve_process()
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        # uvicorn answers '100 Continue' when serve asks for the body: then it is reading it
        s.sendall(
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\nexpect: 100-continue\r\n"
            + f"x-api-key: {KEY}\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        assert answer == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b'{"model": "m", ')  # (a part of the body; the rest never comes)
        proc.terminate()
        _, raw_err = proc.communicate(timeout=15)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    err = raw_err.decode(errors="replace")
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err
    assert proc.returncode == idle.returncode, err
    assert answer.startswith(b"HTTP/1.1 503 "), answer
    body = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["type"] == "overloaded_error" and "shutting down" in body["error"]["message"], body

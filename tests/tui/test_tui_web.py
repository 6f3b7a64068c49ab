"""`inspector web`: arguments checked before serving; the dashboard process ends when its browser is gone, however
abruptly (stdin EOF, SIGTERM, a websocket client killed mid-session)."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from inspector.cli import main

ROOT = Path(__file__).resolve().parents[2]
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT)
    e["TEXTUAL_DRIVER"] = WEB_DRIVER  # what textual-serve sets for the app it runs
    e.pop("NO_COLOR", None)
    return e


class Drain:
    """Reads a pipe in a thread (a full pipe would block the app); `ready` is set once the driver's prelude shows."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        assert isinstance(pipe, io.BufferedReader)  # (a Popen pipe, read with read1)
        self.pipe = pipe
        self.ready = threading.Event()
        self.data = bytearray()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while chunk := self.pipe.read1(65536):
            self.data += chunk
            if b"__GANGLION__" in self.data:
                self.ready.set()


def start_app() -> tuple[subprocess.Popen[bytes], Drain, Drain]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", "run", "--scenario", "parse_date"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=ROOT,
    )
    out, err = Drain(proc.stdout), Drain(proc.stderr)
    assert out.ready.wait(60), f"the app did not start: {bytes(err.data[-2000:])!r}"
    return proc, out, err


def test_the_app_exits_when_its_input_ends() -> None:
    proc, _, err = start_app()
    try:
        assert proc.stdin is not None
        proc.stdin.close()  # the server (and its browser) is gone: EOF
        assert proc.wait(timeout=30) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in err.data


def test_the_app_exits_on_sigterm() -> None:
    proc, _, _ = start_app()
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_unknown_scenario_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--scenario", "parse_dat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown scenario 'parse_dat'" in err and "Traceback" not in err
    assert "(did you mean 'parse_date'?)" in err


def test_a_busy_port_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        assert main(["web", "--port", str(port)]) == 2
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err


def children(pid: int) -> list[int]:
    """Every descendant process of pid (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        threading.Event().wait(0.1)  # polling a process table: no event to wait on
    return cond()


@pytest.mark.parametrize("how", ["client killed", "server killed", "server stopped"])
def test_no_dashboard_process_remains_after_its_browser_is_gone(how: str) -> None:
    """A websocket client (the browser) connects through textual-serve; the client's connection is torn down with
    no close handshake, or the server is SIGKILLed: no dashboard process may remain. Stopped (SIGTERM, as Ctrl-C)
    with the tab still open, the server ends its dashboard and closes the tab's websocket at once: aiohttp waited
    for the websocket to end by itself, up to 60 s, so the server stayed as long as the tab did."""
    import asyncio

    aiohttp = pytest.importorskip("aiohttp")
    pytest.importorskip("textual_serve")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    e = env()
    e.pop("TEXTUAL_DRIVER")
    server = subprocess.Popen(
        [sys.executable, "-m", "inspector", "web", "--port", str(port), "--scenario", "parse_date"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=e,
        cwd=ROOT,
    )
    Drain(server.stdout)
    apps: list[int] = []
    try:

        async def client() -> None:
            async with aiohttp.ClientSession() as session:
                for _ in range(100):  # the server is starting
                    try:
                        ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws?width=80&height=24")
                        break
                    except aiohttp.ClientError:
                        await asyncio.sleep(0.2)
                else:
                    raise AssertionError("the web server did not start")
                got = 0
                async for msg in ws:  # the dashboard is drawing: it runs
                    got += len(msg.data) if isinstance(msg.data, (bytes, str)) else 0
                    if got > 5000:
                        break
                apps.extend(children(server.pid))
                assert apps, "no dashboard process was started"
                if how == "client killed":
                    ws._response.connection.transport.abort()  # no close frame: a killed browser
                elif how == "server killed":
                    server.kill()
                else:
                    server.terminate()

                    async def until_closed() -> None:
                        async for _ in ws:  # the tab stays open: the server must close it
                            pass

                    await asyncio.wait_for(until_closed(), 20)
                    assert await asyncio.to_thread(server.wait, 20) is not None

        asyncio.run(client())
        assert wait_until(lambda: not [p for p in apps if os.path.exists(f"/proc/{p}") and _alive(p)], 30), (
            f"left running: {[p for p in apps if _alive(p)]}"
        )
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(10)
        for p in apps:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_page_loads_nothing_from_another_site() -> None:
    """The page `inspector web` serves on loopback asked the browser for a stylesheet at fonts.googleapis.com
    (textual-serve's page, as it ships): every page load told another site that the dashboard was opened (tried as
    a new user: in chromium, offline, ERR_NAME_NOT_RESOLVED). It is textual-serve's page less that link."""
    import re

    import httpx2

    pytest.importorskip("textual_serve")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    e = env()
    e.pop("TEXTUAL_DRIVER")
    server = subprocess.Popen(
        [sys.executable, "-m", "inspector", "web", "--port", str(port), "--scenario", "parse_date"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=e,
        cwd=ROOT,
    )
    try:
        Drain(server.stdout)
        # (the connection is retried while the server starts: no line says when it listens)
        with httpx2.Client(transport=httpx2.HTTPTransport(retries=12), timeout=20) as client:
            page = client.get(f"http://127.0.0.1:{port}/").text
    finally:
        server.terminate()
        server.wait(20)
    assert "textual.js" in page and "xterm.css" in page  # (textual-serve's page: the terminal's script and styles)
    urls = re.findall(r"""(?:href|src)\s*=\s*["']?((?:https?:)?//[^"'\s>]+)""", page)
    assert urls, page  # (the page's own: its static files, from the server)
    outside = [u for u in urls if not u.startswith(f"http://127.0.0.1:{port}/")]
    assert outside == [], outside

"""`inspector proxy` and `inspector serve --tui` in the dashboard, stopped from outside (SIGTERM: kill, a CI runner's
timeout; SIGHUP: the terminal closed) while a stream is open: they end as `q` ends them, as `run` and `watch` do
(InspectorApp.quit_soon), their recording complete with its end lines, `--otel`'s spans flushed, the terminal given
back, and the process ends with 128 + N. They set no handler: the signal killed them where they were."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


class _Dashboard:
    """`inspector ARGS` in the dashboard on a terminal (a pty) of its own, read on a thread (a dashboard whose
    terminal is full blocks)."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
        self.p = subprocess.Popen(
            [sys.executable, "-m", "inspector", *args],
            env={**env, "TERM": "xterm-256color"},
            cwd=ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.screen: list[bytes] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # (EIO: every writer has closed the terminal)
                data = b""
            with self.changed:
                if data:
                    self.screen.append(data)
                self.changed.notify_all()
            if not data:
                return

    def text(self) -> bytes:
        return b"".join(self.screen)

    def wait_shown(self, what: bytes, timeout: float = 60) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: what in self.text() or not self.reader.is_alive(), timeout)
        assert ok and what in self.text(), self.text()[-2000:]

    def end(self) -> tuple[int, bytes]:
        """Its status once it has exited (killed after a minute), and what it wrote."""
        try:
            status = self.p.wait(60)
        finally:
            if self.p.poll() is None:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
            self.reader.join(10)
            os.close(self.master)
        return status, self.text()


def _recording(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1]]  # (a line being written is not one yet)


def _until(ready: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # another process's file: nothing to wait on but polling it


class _OpenStream:
    """A streamed Messages request to ``url`` whose answer stalls after message_start (the `stall` fault): the
    stream stays open until the server ends it."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "weather?"}],
        }
        headers = {
            "content-type": "application/json",
            "x-api-key": "sk-ant-offline-example",
            "anthropic-version": "2023-06-01",
        }
        self.conn.request("POST", "/v1/messages", json.dumps(body), headers)
        self.answer = self.conn.getresponse()
        assert self.answer.status == 200, self.answer.read()
        assert b"message_start" in self.answer.readline() + self.answer.readline()

    def close(self) -> None:
        self.conn.close()


def _address(dash: _Dashboard) -> str:
    dash.wait_shown(b"ANTHROPIC_BASE_URL=")
    found = re.search(rb"ANTHROPIC_BASE_URL=(http://[0-9.]+:[0-9]+)", dash.text())
    assert found, dash.text()[-2000:]
    return found.group(1).decode()


def _listening(url: str) -> bool:
    """Whether the dashboard's session listens at ``url`` (it binds its address once the dashboard runs it)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError:
        return False
    return True


def _stopped_mid_stream(dash: _Dashboard, rec: Path, sig: int) -> tuple[int, bytes]:
    """Once the dashboard holds the terminal and a stream through it is open (its first read recorded): ``sig``."""
    try:
        url = _address(dash)
        dash.wait_shown(b"\x1b[?1049h")  # the dashboard holds the terminal
        _until(lambda: _listening(url) or dash.p.poll() is not None, "the dashboard's session does not listen")
        stream = _OpenStream(url)
        try:
            _until(lambda: any(d.get("kind") == "read" for d in _recording(rec)), "no read recorded")
            assert dash.p.poll() is None
            dash.p.send_signal(sig)
            return dash.end()
        finally:
            stream.close()
    finally:
        if dash.p.poll() is None:
            os.killpg(dash.p.pid, signal.SIGKILL)
            dash.end()


def _ended_cleanly(status: int, screen: bytes, sig: int, rec: Path) -> None:
    assert status == 128 + sig, screen[-2000:]
    assert b"Traceback" not in screen, screen[-3000:]
    assert screen.rfind(b"\x1b[?1049l") > screen.rfind(b"\x1b[?1049h"), screen[-2000:]  # the terminal given back
    lines = _recording(rec)
    sent = {(d["turn"], d["attempt"]) for d in lines if d.get("kind") == "request"}
    ended = {(d["turn"], d["attempt"]) for d in lines if d.get("kind") == "end"}
    assert sent and sent == ended, (sent, ended)
    assert lines[-1].get("type") == "loop_finished" and lines[-1].get("status") == "cancelled", lines[-1]


@pytest.fixture
def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TEXTUAL_DRIVER")}
    out["PYTHONPATH"] = str(ROOT)
    return out


@pytest.fixture
def stalling_upstream() -> Iterator[str]:
    """The fake API in this process, its answers stalled after message_start."""
    from inspector.net.serve import ServeApp
    from inspector.net.server import BackgroundServer

    with BackgroundServer(ServeApp("weather", "stall:1000")) as up:
        yield up.base_url


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_proxy_dashboard_stopped_mid_stream_ends_its_recording_and_flushes_otel(
    env: dict[str, str], stalling_upstream: str, tmp_path: Path, sig: int
) -> None:
    """`proxy --otel --record F` in the dashboard, a stream open through it: killed where it was, the recording had
    no end line for the open attempt and no loop_finished, and the conversation's span never reached the
    collector."""
    pytest.importorskip("opentelemetry.sdk")
    from inspector.testing.otlp import Receiver

    rec = tmp_path / "proxy.jsonl"
    receiver = Receiver()
    try:
        env = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint.removesuffix("/v1/traces")}
        env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        dash = _Dashboard(
            env, "proxy", "--listen", "127.0.0.1:0", "--upstream", stalling_upstream, "--record", str(rec), "--otel"
        )
        status, screen = _stopped_mid_stream(dash, rec, sig)
        _ended_cleanly(status, screen, sig, rec)
        assert any(s["name"].startswith("invoke_agent ") for s in receiver.spans), receiver.spans
    finally:
        receiver.close()


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_serve_tui_stopped_mid_stream_ends_its_recording(env: dict[str, str], tmp_path: Path, sig: int) -> None:
    """`serve --tui --record F`, a stream open: killed where it was, the open attempt had no end line and the
    recording no loop_finished (and its fake server thread died with it)."""
    rec = tmp_path / "serve.jsonl"
    dash = _Dashboard(env, "serve", "--tui", "--scenario", "weather", "--fault", "stall:1000", "--record", str(rec))
    status, screen = _stopped_mid_stream(dash, rec, sig)
    _ended_cleanly(status, screen, sig, rec)

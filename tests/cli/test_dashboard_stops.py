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
from collections.abc import Iterator
from pathlib import Path

import pytest

from inspector.testing.processes import Dashboard, recording_lines, until

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


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


def _address(dash: Dashboard) -> str:
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


def _stopped_mid_stream(dash: Dashboard, rec: Path, sig: int) -> tuple[int, bytes]:
    """Once the dashboard holds the terminal and a stream through it is open (its first read recorded): ``sig``."""
    try:
        url = _address(dash)
        dash.wait_shown(b"\x1b[?1049h")  # the dashboard holds the terminal
        until(lambda: _listening(url) or dash.p.poll() is not None, "the dashboard's session does not listen")
        stream = _OpenStream(url)
        try:
            until(lambda: any(d.get("kind") == "read" for d in recording_lines(rec)), "no read recorded")
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
    lines = recording_lines(rec)
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
        dash = Dashboard(
            env,
            *("proxy", "--listen", "127.0.0.1:0", "--upstream", stalling_upstream, "--record", str(rec), "--otel"),
            cwd=ROOT,
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
    args = ("serve", "--tui", "--scenario", "weather", "--fault", "stall:1000", "--record", str(rec))
    dash = Dashboard(env, *args, cwd=ROOT)
    status, screen = _stopped_mid_stream(dash, rec, sig)
    _ended_cleanly(status, screen, sig, rec)

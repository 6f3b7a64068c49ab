"""`inspector web`: arguments checked before serving; the dashboard process ends when its browser is gone, however
abruptly (stdin EOF, SIGTERM, a websocket client killed mid-session)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

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

    def __init__(self, pipe) -> None:
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


def start_app() -> tuple[subprocess.Popen, Drain, Drain]:
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

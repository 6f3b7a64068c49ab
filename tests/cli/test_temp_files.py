"""The commands that make temporary files remove them however they end: a normal end, Ctrl-C, SIGTERM, SIGHUP (and,
where nothing needs a name on disk, SIGKILL). Each runs with TMPDIR a fresh directory of its own, empty afterwards.

/tmp held dozens left by earlier runs: `inspector-web-*` (the page templates of `inspector web`, left by SIGHUP and
SIGKILL)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmpdir_env() -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh TMPDIR (short: a Unix socket's path in it must fit), and the environment that names it."""
    tmp = Path(tempfile.mkdtemp(prefix="it-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TEXTUAL_DRIVER")}
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    try:
        yield tmp, env
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _left(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))


def _until(ready: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # another process's state: nothing to wait on but polling it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: signal.Signals(s).name
)
def test_inspector_web_leaves_nothing_in_tmpdir(tmpdir_env: tuple[Path, dict[str, str]], sig: int) -> None:
    """Its page templates (textual-serve's, less an outside link) were written to a temporary directory, removed by
    its cleanup only: SIGHUP (the terminal closed) and SIGKILL left it. They are served from memory now."""
    pytest.importorskip("textual_serve")
    tmp, env = tmpdir_env
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "inspector", "web", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    try:

        def serves() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    return page.status == 200 and b"textual.js" in page.read()
            except OSError:
                assert server.poll() is None, "the web server exited"
                return False

        _until(serves, "the web server did not serve its page")
        server.send_signal(sig)
        server.wait(30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert _left(tmp) == []

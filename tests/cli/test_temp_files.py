"""The commands that make temporary files remove them however they end: a normal end, Ctrl-C, SIGTERM, SIGHUP (and,
where nothing needs a name on disk, SIGKILL). Each runs with TMPDIR a fresh directory of its own, empty afterwards.

/tmp held dozens left by earlier runs: `inspector-web-*` (the page templates of `inspector web`, left by SIGHUP and
SIGKILL), `inspector-export-*` (left by SIGTERM and SIGHUP), `inspector-watch-*/link` (watch's link to its dashboard,
left when watch was killed, or stopped before its cleanup could run) and `inspector-watch-web-*.log`. (watch's
own `--split` cases, with a browser and in tmux, check their TMPDIR in test_watch_split.py.)"""

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
needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")


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


def _export(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "inspector", "export", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


def _record(scenario: str, path: Path) -> None:
    import asyncio
    import math

    from inspector.sessions import sources

    session = sources.scenario_session(scenario, speed=math.inf, record=path)
    try:
        asyncio.run(session.run())
    finally:
        session.close()


def _blocked_on_a_fifo(pid: int) -> bool:
    """Whether the process waits in the open of a FIFO nobody has opened from the other side."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"
    except OSError:
        return False


@pytest.mark.parametrize("scenario", [True, False], ids=["scenario", "recording"])
def test_inspector_export_leaves_nothing_in_tmpdir_when_it_ends(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, scenario: bool
) -> None:
    tmp, env = tmpdir_env
    source = ["--scenario", "parse_date"]
    if not scenario:
        source = [str(tmp_path / "run.jsonl")]
        _record("parse_date", Path(source[0]))
    p = _export(env, *source, "-o", str(tmp_path / "page.html"))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert (tmp_path / "page.html").stat().st_size > 0
    assert _left(tmp) == []


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("scenario", [True, False], ids=["scenario", "recording"])
def test_inspector_export_stopped_leaves_nothing_in_tmpdir(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, scenario: bool, sig: int
) -> None:
    """Stopped while it worked (here: waiting on a FIFO, as the page to write with --scenario, or as the recording
    to read): SIGTERM and SIGHUP killed it where it was, its temporary directory (the scenario's recording; made,
    empty, for a recording too) left in TMPDIR. Now they end it as Ctrl-C does, its cleanup run: 128 + N."""
    tmp, env = tmpdir_env
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = ["--scenario", "parse_date", "-o", str(fifo)] if scenario else [str(fifo), "-o", str(tmp_path / "p.html")]
    p = _export(env, *args)
    try:
        _until(lambda: _blocked_on_a_fifo(p.pid) or p.poll() is not None, "export did not reach the FIFO")
        assert p.poll() is None, p.communicate()[1]
        if scenario:
            assert _left(tmp), "no temporary directory while the scenario's page is written"
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert b"Traceback" not in err, err
    assert _left(tmp) == []


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_watch_split_stopped_while_waiting_for_a_browser_leaves_nothing(
    tmpdir_env: tuple[Path, dict[str, str]], sig: int
) -> None:
    """`watch --split` outside tmux, stopped before a browser opened its dashboard: it died where it was, its web
    server ran on (a session of its own) and its link's socket and the server's log stayed in TMPDIR. Now SIGTERM
    and SIGHUP end it as the stop it is (128 + N), its web server stopped and nothing left in TMPDIR."""
    pytest.importorskip("textual_serve")
    import pty

    tmp, env = tmpdir_env
    marker = tmp.parent / f"{tmp.name}-ran"
    master, slave = pty.openpty()
    watch = subprocess.Popen(
        [sys.executable, "-m", "inspector", "watch", "--split", "--serve", "weather", "--"]
        + [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        stdin=subprocess.DEVNULL,
        stdout=slave,  # a terminal: --split's command keeps it
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    children: list[int] = []
    try:
        assert watch.stderr is not None
        line = watch.stderr.readline()
        assert b"the dashboard is at http://127.0.0.1:" in line, line + watch.stderr.read()
        children = _descendants(watch.pid)  # its web server
        assert children
        watch.send_signal(sig)
        err = watch.communicate(timeout=60)[1]
        assert watch.returncode == 128 + sig, err
        assert b"Traceback" not in err, err
        _until(lambda: not [c for c in children if _alive(c)], "the web server is still running", 30)
        assert _left(tmp) == []
        assert not marker.exists()  # (the command never started)
    finally:
        if watch.poll() is None:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
        for c in children:
            if _alive(c):
                os.killpg(c, signal.SIGKILL)
        os.close(master)


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [c for c, pp in parents.items() if pp == parent]
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

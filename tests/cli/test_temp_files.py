"""The commands that make temporary files remove them however they end: a normal end, Ctrl-C, SIGTERM, SIGHUP (and,
where nothing needs a name on disk, SIGKILL). Each runs with TMPDIR a fresh directory of its own, empty afterwards.

/tmp held dozens left by earlier runs: `inspector-web-*` (the page templates of `inspector web`, left by SIGHUP and
SIGKILL), `inspector-export-*` (left by SIGTERM and SIGHUP), `inspector-watch-*/link` (watch's link to its dashboard,
left when watch was killed, or stopped before its cleanup could run) and `inspector-watch-web-*.log`. (watch's
own `--split` cases, with a browser and in tmux, check their TMPDIR in test_watch_split.py.) `inspector run` left
its scenario's workspace copy (`inspector-<scenario>-*`) on SIGTERM and SIGHUP with the dashboard, on SIGHUP
headless, its recording cut (no end lines)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from inspector.testing.processes import Dashboard, blocked_on_a_fifo, files_left, reaped, recording_lines, until

ROOT = Path(__file__).resolve().parents[2]
needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ended_cleanly_by(p: subprocess.Popen[bytes], sig: int, err: bytes, tmp: Path) -> None:
    """The process ended on ``sig`` as a shell reports it (128 + N), without a traceback, and left nothing in TMPDIR."""
    assert p.returncode == 128 + sig, err
    assert b"Traceback" not in err, err
    assert files_left(tmp) == []


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

        until(serves, "the web server did not serve its page")
        server.send_signal(sig)
        server.wait(30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert files_left(tmp) == []


def _export(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "inspector", "export", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


def _record(scenario: str, path: Path, speed: float = float("inf")) -> None:
    import asyncio

    from inspector.sessions import sources

    session = sources.scenario_session(scenario, speed=speed, record=path)
    try:
        asyncio.run(session.run())
    finally:
        session.close()


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
    assert files_left(tmp) == []


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
    with reaped(p):
        until(lambda: blocked_on_a_fifo(p.pid) or p.poll() is not None, "export did not reach the FIFO")
        assert p.poll() is None, p.communicate()[1]
        if scenario:
            assert files_left(tmp), "no temporary directory while the scenario's page is written"
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    _ended_cleanly_by(p, sig, err, tmp)


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
        until(lambda: not [c for c in children if _alive(c)], "the web server is still running", 30)
        assert files_left(tmp) == []
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


# --- inspector run / replay: a scenario's workspace copy (`inspector-<scenario>-*`) and the recording being written


def _streaming(path: Path) -> bool:
    """Whether the run's recording has its first read: the loop is in a stream."""
    return any(line.get("kind") == "read" for line in recording_lines(path))


def _ended(lines: list[dict[str, object]], status: str) -> None:
    """A recording closed with its end: every attempt that was sent has its end line, and the last line is the
    loop's end, with ``status``."""
    sent = {(d["turn"], d["attempt"]) for d in lines if d.get("kind") == "request"}
    ended = {(d["turn"], d["attempt"]) for d in lines if d.get("kind") == "end"}
    assert sent and sent == ended, (sent, ended)
    assert lines[-1].get("type") == "loop_finished" and lines[-1].get("status") == status, lines[-1]


def _inspector(env: dict[str, str], *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "inspector", *args], env=env, cwd=ROOT, **kw)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_inspector_run_headless_stopped_leaves_nothing_and_ends_its_recording(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, sig: int
) -> None:
    """Headless, stopped mid-stream: SIGHUP (the terminal closed) killed it where it was, its scenario's workspace
    copy left in TMPDIR and its recording cut (no end lines); SIGTERM ended it in order but said 130, as Ctrl-C.
    Now each cancels the loop as Ctrl-C does: the copy removed, the recording ended, exit 128 + N."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    args = ("run", "--headless", "--scenario", "exclusive_mix", "--speed", "0.2", "--record", str(rec))
    p = _inspector(env, *args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with reaped(p):
        until(lambda: _streaming(rec) or p.poll() is not None, "the run did not start streaming")
        assert p.poll() is None, p.communicate()[1]
        assert files_left(tmp), "no workspace copy while the scenario runs"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    _ended_cleanly_by(p, sig, err, tmp)
    _ended(recording_lines(rec), "cancelled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_inspector_replay_headless_stopped_says_the_signal(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, sig: int
) -> None:
    """`inspector replay` (the same command's code): SIGHUP killed it (-1), SIGTERM said 130. Now 128 + N, after
    the loop's end line."""
    import threading

    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    _record("exclusive_mix", rec, speed=4)  # (its times as paced at 4x, about 1.3 s: replayed at 0.1, about 13 s)
    p = _inspector(env, "replay", str(rec), "--headless", "--json", "--speed", "0.1", stdout=subprocess.PIPE)
    assert p.stdout is not None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.extend(iter(p.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    with reaped(p):
        until(lambda: any(b'"type":"block_delta"' in line for line in out) or p.poll() is not None, "no stream")
        assert p.poll() is None
        p.send_signal(sig)
        p.wait(60)
    reader.join(10)
    assert p.returncode == 128 + sig
    assert b'"type":"loop_finished"' in out[-1] and b'"status":"cancelled"' in out[-1], out[-1]
    assert files_left(tmp) == []


@pytest.mark.parametrize(
    "sig, closed",
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGHUP, True)],
    ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGHUP-terminal-closed"],
)
def test_inspector_run_dashboard_stopped_leaves_nothing_and_ends_its_recording(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, sig: int, closed: bool
) -> None:
    """The dashboard, stopped mid-stream: SIGTERM and SIGHUP killed it where it was (-15, -1), its scenario's
    workspace copy left in TMPDIR and its recording cut (no end lines); SIGINT (kill -INT: Ctrl-C on its terminal is
    a key) said 0. Now each quits it as `q` does: the copy removed, the recording ended, exit 128 + N."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    dash = Dashboard(env, "run", "--scenario", "exclusive_mix", "--speed", "0.2", "--record", str(rec), cwd=ROOT)
    try:
        until(lambda: _streaming(rec) or dash.p.poll() is not None, "the run did not start streaming")
        assert dash.p.poll() is None, b"".join(dash.screen)[-2000:]
        assert files_left(tmp), "no workspace copy while the scenario runs"
        if closed:
            dash.close_terminal()
        dash.p.send_signal(sig)
    finally:
        status, screen = dash.end()
    assert status == 128 + sig, screen[-2000:]
    assert b"Traceback" not in screen, screen[-2000:]
    assert files_left(tmp) == []
    _ended(recording_lines(rec), "cancelled")


def test_inspector_run_dashboard_stopped_as_its_session_starts_leaves_nothing(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """SIGTERM as soon as the workspace copy exists (the session made, maybe not run yet): the dashboard quits
    before its session ran, whose close was left to its run: the copy stayed. Now every session the dashboard made
    is closed after it quit (a recording that was not started stays empty: its loop never ran)."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    dash = Dashboard(env, "run", "--scenario", "exclusive_mix", "--speed", "0.2", "--record", str(rec), cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not files_left(tmp):  # (polled closely: the signal must come before the session runs, to be this case)
            assert time.monotonic() < deadline and dash.p.poll() is None, "no workspace copy was made"
            time.sleep(0.001)
        dash.p.send_signal(signal.SIGTERM)
    finally:
        status, screen = dash.end()
    assert status == 128 + signal.SIGTERM, screen[-2000:]
    assert b"Traceback" not in screen, screen[-2000:]
    assert files_left(tmp) == []
    lines = recording_lines(rec)
    if any(line.get("kind") == "request" for line in lines):
        _ended(lines, "cancelled")


def test_inspector_run_dashboard_stopped_while_it_starts_quits(tmpdir_env: tuple[Path, dict[str, str]]) -> None:
    """SIGTERM once the dashboard holds the terminal (the alternate screen entered), before its session started:
    killed where it was, the terminal was not given back (still in the alternate screen, raw). It quits as `q`
    does: exit 143, the alternate screen left, nothing in TMPDIR. (Its handler never raises into Textual's event
    loop, where one of Textual's tasks could swallow the exception: the dashboard ran on, or ended with a
    traceback.)"""
    tmp, env = tmpdir_env
    dash = Dashboard(env, "run", "--scenario", "exclusive_mix", "--speed", "0.2", cwd=ROOT)
    try:
        until(lambda: dash.shown(b"\x1b[?1049h") or dash.p.poll() is not None, "the dashboard did not start")
        dash.p.send_signal(signal.SIGTERM)
    finally:
        status, screen = dash.end()
    assert status == 128 + signal.SIGTERM, screen[-2000:]
    assert b"Traceback" not in screen, screen[-2000:]
    assert screen.rfind(b"\x1b[?1049l") > screen.rfind(b"\x1b[?1049h"), screen[-2000:]
    assert files_left(tmp) == []


@pytest.mark.parametrize("dashboard", [False, True], ids=["headless", "dashboard"])
def test_inspector_run_ends_normally_leaving_nothing(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, dashboard: bool
) -> None:
    """The normal end (the loop finished; the dashboard then quit with q): the copy removed, the recording ended.
    (The dashboard's session is now closed by `run` after the dashboard quit, see above: this is its normal path.)"""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    args = ("run", "--scenario", "exclusive_mix", "--speed", "max", "--record", str(rec))
    if dashboard:
        dash = Dashboard(env, *args, cwd=ROOT)
        try:
            until(
                lambda: recording_lines(rec)[-1:] and recording_lines(rec)[-1].get("type") == "loop_finished", "no end"
            )
            os.write(dash.master, b"q")
        finally:
            status, screen = dash.end()
    else:
        p = _inspector(env, *args, "--headless", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        screen = p.communicate(timeout=120)[1]
        status = p.returncode
    assert status == 0, screen[-2000:]
    assert files_left(tmp) == []
    _ended(recording_lines(rec), "finished")


def test_inspector_run_dashboard_quit_mid_run_cancels_the_loop(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """`q` while the loop streams: the run is cancelled, as Ctrl-C cancels it (README: exit 130, the recording ends
    "cancelled", every attempt sent has its end line), the terminal given back, nothing left in TMPDIR."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    dash = Dashboard(env, "run", "--scenario", "exclusive_mix", "--speed", "0.2", "--record", str(rec), cwd=ROOT)
    try:
        until(lambda: any(line.get("kind") == "read" for line in recording_lines(rec)), "no read recorded")
        os.write(dash.master, b"q")
    finally:
        status, screen = dash.end()
    assert status == 130, screen[-2000:]
    assert b"Traceback" not in screen, screen[-2000:]
    assert screen.rfind(b"\x1b[?1049l") > screen.rfind(b"\x1b[?1049h"), screen[-2000:]
    assert files_left(tmp) == []
    _ended(recording_lines(rec), "cancelled")

"""`inspector run --headless` and `replay --headless` stopped (Ctrl-C, SIGTERM, SIGHUP) at the edges of their run:
while the session is made (its workspace copy made, its recording being opened), once it is made but before its
loop runs. (Stopped mid-stream: test_interrupt.py and test_temp_files.py.)

Each moment is reached deterministically: a FIFO for the recording (the open blocks until a reader comes), or a
hook the child process runs at that moment (``python -c HOOK``: it sends the signal to itself, then calls the
real function), never a signal sent after a sleep."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from inspector.record.recorder import NOTHING_RAN
from inspector.testing.processes import blocked_on_a_fifo, recording_lines, until

ROOT = Path(__file__).resolve().parents[2]
STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process state from /proc")


@pytest.fixture
def tmpdir_env() -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh TMPDIR (where a scenario's workspace copy goes), and the environment that names it."""
    tmp = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TEXTUAL_DRIVER")}
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    try:
        yield tmp, env
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _left(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))


def _start(env: dict[str, str], *args: str, hook: str | None = None) -> subprocess.Popen[bytes]:
    """`inspector ARGS` (through ``inspector.__main__.entry``, as the console script), after ``hook`` (Python run
    first in the child) when given."""
    code = [sys.executable, "-m", "inspector"]
    if hook is not None:
        code = [sys.executable, "-c", f"{hook}\nimport sys\nfrom inspector.__main__ import entry\nsys.exit(entry())"]
    return subprocess.Popen([*code, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run_once(env: dict[str, str], *args: str, hook: str | None = None) -> tuple[int, bytes, bytes]:
    p = _start(env, *args, hook=hook)
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def _nothing_ran_line(sig: int) -> bytes:
    return f"inspector: stopped by {signal.Signals(sig).name} before the run started: nothing ran\n".encode()


# --- stopped before the loop ran ----------------------------------------------------------------------------------


@needs_proc
@pytest.mark.parametrize("sig", STOPS, ids=lambda s: signal.Signals(s).name)
def test_stopped_while_its_recording_opens(tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, sig: int) -> None:
    """The session being made, its workspace copy made, the open of its recording waiting (a FIFO nobody reads
    yet): Ctrl-C ended the process at once (the start-up handler's exit 130), the workspace copy left in TMPDIR and
    not a word said; SIGTERM and SIGHUP removed it but said nothing either. Now each ends it in order: the copy
    removed, exit 128 + N, one line on stderr."""
    tmp, env = tmpdir_env
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    p = _start(env, "run", "--headless", "--scenario", "exclusive_mix", "--record", str(fifo))
    try:
        until(lambda: blocked_on_a_fifo(p.pid) or p.poll() is not None, "the run did not reach its recording")
        assert p.poll() is None, p.communicate()[1]
        assert _left(tmp), "no workspace copy while the session is made"
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert _left(tmp) == []
    assert err == _nothing_ran_line(sig), err
    assert out == b""


# the signal sent once the session is made, as its loop is about to start: asyncio.run is what starts it
STOP_AS_IT_STARTS = """
import asyncio, os, signal
_run = asyncio.run
def _stopped_first(main, **kw):
    asyncio.run = _run
    os.kill(os.getpid(), {sig})
    return _run(main, **kw)
asyncio.run = _stopped_first
"""


@pytest.mark.parametrize("sig", STOPS, ids=lambda s: signal.Signals(s).name)
def test_run_stopped_once_its_session_is_made(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, sig: int
) -> None:
    """Its session made (the workspace copy, the recording's header written), its loop not started: Ctrl-C ended
    the process at once (exit 130, not a word), the recording holding its header alone and the workspace copy left
    in TMPDIR; SIGTERM and SIGHUP closed the session but said nothing. Now the loop does not run: the recording
    ends saying nothing ran, the copy is removed, exit 128 + N, one line on stderr."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    args = ("run", "--headless", "--scenario", "exclusive_mix", "--record", str(rec))
    status, out, err = _run_once(env, *args, hook=STOP_AS_IT_STARTS.format(sig=int(sig)))
    assert status == 128 + sig, err
    assert _left(tmp) == []
    lines = recording_lines(rec)
    assert [line.get("kind") for line in lines] == ["header", "obs"], lines
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["error"] == NOTHING_RAN, lines[-1]
    assert err == _nothing_ran_line(sig), err
    assert out == b""


# the signal sent while the session is made, once its recording is open: as the recorder is subscribed to its bus,
# or as `--otel` sets its exporter up (the factory's last steps)
STOP_AS_IT_SUBSCRIBES_THE_RECORDER = """
import os, signal
from inspector.observe.observations import ObservationBus
from inspector.record.recorder import Recorder
_subscribe = ObservationBus.subscribe
def _stopped_first(self, fn, *a, **kw):
    if isinstance(fn, Recorder):
        os.kill(os.getpid(), signal.SIGINT)
    return _subscribe(self, fn, *a, **kw)
ObservationBus.subscribe = _stopped_first
"""
STOP_AS_OTEL_STARTS = """
import os, signal
from inspector.record import otel
_make_provider = otel.make_provider
def _stopped_first(*a, **kw):
    os.kill(os.getpid(), signal.SIGINT)
    return _make_provider(*a, **kw)
otel.make_provider = _stopped_first
"""


@pytest.mark.parametrize(
    "hook, otel",
    [(STOP_AS_IT_SUBSCRIBES_THE_RECORDER, False), (STOP_AS_OTEL_STARTS, True)],
    ids=["recorder-subscribed", "otel-set-up"],
)
def test_run_stopped_as_its_session_is_made(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, hook: str, otel: bool
) -> None:
    """Ctrl-C as the last steps of making the session run, its recording open: the session was left half made (its
    recording with its header alone; with --otel, the workspace copy left in TMPDIR too). Now it is closed on the
    way out: its recording says nothing ran, the copy is removed, exit 130, one line."""
    if otel:
        pytest.importorskip("opentelemetry.sdk")
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    args = ["run", "--headless", "--scenario", "exclusive_mix", "--record", str(rec), *(["--otel"] if otel else [])]
    status, out, err = _run_once(env, *args, hook=hook)
    assert status == 130, err
    assert _left(tmp) == []
    lines = recording_lines(rec)
    assert [line.get("kind") for line in lines] == ["header", "obs"], lines
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["error"] == NOTHING_RAN, lines[-1]
    assert err == _nothing_ran_line(signal.SIGINT), err
    assert out == b""


def test_replay_stopped_once_its_session_is_made(tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """`replay --headless`, Ctrl-C once its session is made: exit 130 without a word; now one line says so."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    assert _run_once(env, "run", "--headless", "--scenario", "weather", "--record", str(rec))[0] == 0
    status, out, err = _run_once(env, "replay", "--headless", str(rec), hook=STOP_AS_IT_STARTS.format(sig=2))
    assert status == 130, err
    assert err == _nothing_ran_line(signal.SIGINT), err
    assert out == b""
    assert _left(tmp) == []

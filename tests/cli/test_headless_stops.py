"""`inspector run --headless` and `replay --headless` stopped (Ctrl-C, SIGTERM, SIGHUP) at the edges of their run:
while the session is made (its workspace copy made, its recording being opened), once it is made but before its
loop runs, and once the run has ended (its cleanup, the interpreter's exit). (Stopped mid-stream:
test_interrupt.py and test_temp_files.py.)

Each moment is reached deterministically: a FIFO for the recording (the open blocks until a reader comes), or a
hook the child process runs at that moment (``python -c HOOK``: it sends the signal to itself, then calls the
real function), never a signal sent after a sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from inspector.record.recorder import NOTHING_RAN
from inspector.testing.processes import blocked_on_a_fifo, files_left, reaped, recording_lines, until

ROOT = Path(__file__).resolve().parents[2]
STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process state from /proc")


def _start(env: dict[str, str], *args: str, hook: str | None = None) -> subprocess.Popen[bytes]:
    """`inspector ARGS` (through ``inspector.__main__.entry``, as the console script), after ``hook`` (Python run
    first in the child) when given."""
    code = [sys.executable, "-m", "inspector"]
    if hook is not None:
        code = [sys.executable, "-c", f"{hook}\nimport sys\nfrom inspector.__main__ import entry\nsys.exit(entry())"]
    return subprocess.Popen([*code, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run_once(env: dict[str, str], *args: str, hook: str | None = None) -> tuple[int, bytes, bytes]:
    p = _start(env, *args, hook=hook)
    with reaped(p):
        out, err = p.communicate(timeout=120)
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
    with reaped(p):
        until(lambda: blocked_on_a_fifo(p.pid) or p.poll() is not None, "the run did not reach its recording")
        assert p.poll() is None, p.communicate()[1]
        assert files_left(tmp), "no workspace copy while the session is made"
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    assert files_left(tmp) == []
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
    assert files_left(tmp) == []
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
    assert files_left(tmp) == []
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
    assert files_left(tmp) == []


# --- stopped once the run has ended ---------------------------------------------------------------------------------

# a stop as the session closes, its loop ended: the Nth time (1: in its run, 2: the command's cleanup after it)
STOP_AS_IT_CLOSES = """
import os, signal
from inspector.sessions.sources import Session
_close = Session.close
_closes = []
def _close_then_stopped(self):
    _close(self)
    _closes.append(self)
    if len(_closes) == {nth}:
        os.kill(os.getpid(), {sig})
Session.close = _close_then_stopped
"""

# Ctrl-C while the interpreter exits, once the command has returned its status (when Python tears its modules down,
# this one's globals with them, after it has put SIGINT's default action back)
STOP_AS_IT_EXITS = """
import os, signal
class _StoppedAtExit:
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=signal.SIGINT):
        kill(pid, sig)
_at_exit = _StoppedAtExit()
"""


@pytest.mark.parametrize(
    "hook",
    [STOP_AS_IT_CLOSES.format(nth=1, sig=2), STOP_AS_IT_CLOSES.format(nth=2, sig=2), STOP_AS_IT_EXITS],
    ids=["loop-end", "cleanup", "interpreter-exit"],
)
def test_ctrl_c_once_the_run_has_finished_changes_nothing(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, hook: str
) -> None:
    """Ctrl-C once the run has finished (its loop ended, its recording complete): as its session closed, or in the
    command's cleanup after it, it said 130 (the loop's handler still took it for a stop, then a KeyboardInterrupt
    once the loop had put Python's back); while the interpreter exited, it killed the process (-2: Python puts
    SIGINT's default action back before it tears its modules down, a few hundred ms with the SDK imported). It came
    too late to stop anything: the exit status is the run's own, 0 here, as its last line and its recording say."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    status, out, err = _run_once(env, "run", "--headless", "--scenario", "weather", "--record", str(rec), hook=hook)
    assert status == 0, (status, err)
    assert err == b"", err
    assert b"finished after 2 turns" in out.splitlines()[-1], out[-500:]
    lines = recording_lines(rec)
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["status"] == "finished", lines[-1]
    assert files_left(tmp) == []


@pytest.mark.parametrize("command", [["scenarios"], ["dump", "RECORDING"]], ids=["scenarios", "dump"])
def test_ctrl_c_as_any_command_exits_changes_nothing(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path, command: list[str]
) -> None:
    """Not only run and replay: any command whose status is final (its output written) keeps it when a Ctrl-C
    lands while the interpreter exits (it was killed: -2, its status lost)."""
    _, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    status, _, err = _run_once(env, "run", "--headless", "--scenario", "weather", "--record", str(rec))
    assert status == 0, err
    args = [str(rec) if a == "RECORDING" else a for a in command]
    status, out, err = _run_once(env, *args, hook=STOP_AS_IT_EXITS)
    assert status == 0, (status, err)
    assert out and err == b"", err


STOP_MID_WAY = """
import os, signal
import inspector.agent.loop as loop_module
from inspector.observe import observations as O
_publish = loop_module.AgentLoop._pub
def _pub(self, obs):
    _publish(self, obs)
    if isinstance(obs, O.ToolStateChanged) and obs.state == "running":
        os.kill(os.getpid(), signal.SIGINT)
loop_module.AgentLoop._pub = _pub
"""


def test_a_stop_after_a_cancelled_run_is_not_its_status(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """A stop that did stop the run still says so: Ctrl-C as the first tool runs, the loop cancelled, exit 130. The
    replay of that recording ends cancelled as recorded (exit 130); SIGTERM in its cleanup, once its run has
    returned, stops nothing: its status stays 130, not 143."""
    tmp, env = tmpdir_env
    rec = tmp_path / "run.jsonl"
    status, out, err = _run_once(
        env, "run", "--headless", "--scenario", "weather", "--record", str(rec), hook=STOP_MID_WAY
    )
    assert status == 130, err
    assert b"cancelled after" in out and b"Traceback" not in err, (out[-500:], err)
    ends = [orjson.loads(line) for line in rec.read_bytes().splitlines() if b'"loop_finished"' in line]
    assert [e["status"] for e in ends] == ["cancelled"]

    hook = STOP_AS_IT_CLOSES.format(nth=2, sig=int(signal.SIGTERM))
    status, out, err = _run_once(env, "replay", "--headless", str(rec), hook=hook)
    assert status == 130, (status, err)
    assert b"cancelled after" in out.splitlines()[-1] and err == b"", (out[-500:], err)
    assert files_left(tmp) == []


def test_a_run_stopped_mid_way_still_says_the_signal(tmp_path: Path) -> None:
    """(What a stop that did stop something still does: the loop cancelled, exit 128 + N.) Ctrl-C as the first
    tool runs (the hook: the scenario's tool), the recording ends `cancelled`."""
    rec = tmp_path / "run.jsonl"
    hook = STOP_MID_WAY
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_DRIVER"}
    env["PYTHONPATH"] = str(ROOT)
    status, out, err = _run_once(env, "run", "--headless", "--scenario", "weather", "--record", str(rec), hook=hook)
    assert status == 130, err
    assert b"cancelled after" in out and b"Traceback" not in err, (out[-500:], err)
    ends = [orjson.loads(line) for line in rec.read_bytes().splitlines() if b'"loop_finished"' in line]
    assert [e["status"] for e in ends] == ["cancelled"]

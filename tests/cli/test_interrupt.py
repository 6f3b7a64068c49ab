"""Ctrl-C at any point of `inspector run`: during the imports, while the loop starts, mid-stream. Always exit 130,
never a traceback; once the loop runs, the recording it writes is complete (its cancelled attempt has an `end` line)
and replays to the same cancelled end.

The signal is sent when the child reaches a point seen from outside (a shared library mapped in /proc/PID/maps, a
line of output), polled, never after a fixed sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inspector import cli
from inspector.record.recording import read_recording

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0  # a guard against a hang, never a synchronisation


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TEXTUAL_DRIVER", None)
    return subprocess.Popen(
        [sys.executable, "-m", "inspector", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )


def _wait_for_library(p: subprocess.Popen[bytes], marker: str) -> bool:
    """Poll until the child has `marker` mapped (it is importing our modules by then); False if it exited first."""
    end = time.monotonic() + DEADLINE
    while p.poll() is None and time.monotonic() < end:
        if marker in _maps(p.pid):
            return True
        os.sched_yield()
    return False


def _wait_for_lines(p: subprocess.Popen[bytes], n: int) -> list[bytes]:
    lines: list[bytes] = []
    assert p.stdout is not None
    while len(lines) < n:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines


@pytest.mark.parametrize("marker", ["orjson", "_ssl"])
def test_ctrl_c_during_the_imports_exits_130_without_a_traceback(marker: str) -> None:
    p = _start(["run", "--scenario", "parse_date", "--headless", "--speed", "1"])
    reached = _wait_for_library(p, marker)
    if reached:
        p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=DEADLINE)
    assert reached, f"the child never loaded {marker} (exit {p.returncode}): {err.decode()[-500:]}"
    assert p.returncode == 130, (p.returncode, err.decode()[-2000:])
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()[-2000:]


@pytest.mark.parametrize("lines", [1, 12])
def test_ctrl_c_while_the_loop_runs_cancels_and_keeps_a_replayable_recording(
    lines: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "run.jsonl"
    p = _start(["run", "--scenario", "parse_date", "--headless", "--speed", "0.5", "--record", str(rec)])
    got = _wait_for_lines(p, lines)
    assert len(got) == lines, got
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=DEADLINE)
    assert p.returncode == 130, (p.returncode, err.decode()[-2000:])
    assert b"Traceback" not in err, err.decode()[-2000:]
    assert b"cancelled after" in out
    recording = read_recording(rec)
    assert recording.warnings == []
    attempts = list(recording.attempts())
    assert attempts and all(a.end is not None for a in attempts)
    last = attempts[-1].end
    assert last is not None and last["status"] in ("cancelled", "complete")  # mid-stream, or while the tools ran
    # the replay ends where the run did: cancelled, exit 130, no error (in this process: the signal is the run's, and
    # a replay's own process boundary is tests/cli/test_broken_pipe.py's)
    capsys.readouterr()
    code = cli.main(["replay", str(rec), "--headless"])
    rout, rerr = capsys.readouterr()
    assert code == 130, (code, rerr[-2000:], rout[-2000:])
    assert "cancelled after" in rout and "Traceback" not in rerr

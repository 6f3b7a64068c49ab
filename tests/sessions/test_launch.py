"""The watched command's life (inspector/sessions/launch.py, reaper.py): a stop that lands while it starts is not
lost, and its watchdog stops it, with every process it started, once watch's end of the lifeline closes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from inspector.sessions.launch import Launched
from inspector.sessions.reaper import running, started_at, watch_over

needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")


def _until(ready: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # other processes' state: nothing to wait on but polling it


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="sets signal handlers")
def test_a_stop_that_lands_while_the_command_starts_stops_it() -> None:
    """SIGTERM between the command's start and watch's wait for it (its handlers not set yet): watch ended at once
    (as its cleanup's exception, or killed), the command left to run. Now the handlers are set before it starts,
    and a stop that came meanwhile stops it once started: its status is 143, not the 0 of its own end."""
    launched: Launched[Any] = Launched(session=None, argv=["sh", "-c", "sleep 20"], env=dict(os.environ))
    before = signal.getsignal(signal.SIGTERM)
    launched.catch_stops()
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # (its handler runs in this thread before the next line)
        launched.start_command()
    except BaseException:
        launched.release_stops()
        raise
    status = launched.wait()
    assert status == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # (released once it ended)


@needs_proc
def test_the_watchdog_stops_the_command_and_its_children_when_the_lifeline_ends() -> None:
    """The lifeline's end (watch gone, however: here closed while the command still runs) makes the watchdog stop the
    command and what it started; the command killed first, it stops what is left (its child ignores SIGTERM: killed
    after the grace)."""
    deaf = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(os.getpid(), flush=True)"
    deaf += "; time.sleep(60)"
    command = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "$0" & wait', deaf], stdout=subprocess.PIPE, start_new_session=True
    )
    assert command.stdout is not None
    child = int(command.stdout.readline())
    child_started = started_at(child)
    watchdog = watch_over(command.pid, 0.5)
    try:
        assert watchdog is not None
        watchdog.close()  # (watch's end of the pipe: as when its process is gone)
        command.wait(30)  # (sh: terminated)
        _until(lambda: not running(child, child_started), "the command's child is still running")
        assert command.returncode == -signal.SIGTERM
    finally:
        for pid in (command.pid, child):
            if running(pid, started_at(pid)):
                os.kill(pid, signal.SIGKILL)
        command.wait()


@needs_proc
def test_the_watchdog_of_a_command_that_ended_first_just_exits() -> None:
    """watch's own end: the command ended and was waited for, then the lifeline closes: the watchdog exits at once
    (its check of the pid's start time finds no such process running)."""
    done = subprocess.Popen(["true"])
    watchdog = watch_over(done.pid, 0.5)
    done.wait()
    assert watchdog is not None
    watchdog.close()
    assert watchdog.process.returncode == 0

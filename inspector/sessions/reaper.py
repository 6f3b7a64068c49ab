"""The watched command's watchdog: nothing of it is left running when `inspector watch` dies without a word.

watch passes its stops on (a second Ctrl-C, SIGTERM, SIGHUP: launch.py) to the command and every process it
started. SIGKILL (kill -9, the OOM killer, a CI runner's hard kill) or any end that skips watch's cleanup left the
command and its children running under PID 1, for ever. PR_SET_PDEATHSIG does not do it: it reaches the command
alone (the processes it started are orphaned just the same), it fires when the *thread* that forked the command
ends, not the process (watch starts the command from the dashboard's loop and has threads of its own), and it needs
a ``preexec_fn``, which is not safe in a process with threads.

So, right after the command started, watch starts this script (stdlib only: ``python -I -S reaper.py PID START
GRACE``) in a session of its own (the terminal's Ctrl-C and hang-up do not reach it), its stdin the read end of a
pipe whose only write end watch holds (close-on-exec: neither the command nor any other child inherits it). The
kernel closes that end when watch's process exits, however it exits, whichever thread started what. The watchdog
then reads end of file, and if the command still runs (the same process: its start time is checked, not a later one
with its pid) it stops it and every process it started as a second Ctrl-C does: SIGTERM, then SIGKILL for those
still running after the grace period. When the command ended first (watch's own end), it just exits.

Left running still: a process that left the command's tree on purpose (a daemon: double fork, its parent gone), as
after a second Ctrl-C; and a command whose watch was killed in the millisecond between the command's start and its
watchdog's. Without /proc (not Linux) there is no watchdog: no start time to tell the command from a later process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp...), or None (gone, or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def running(pid: int, started: int | None) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs (not a later one with its pid, not a
    zombie)."""
    fields = _stat(pid)
    return (
        started is not None
        and fields is not None
        and len(fields) > 19
        and fields[0] != "Z"
        and int(fields[19]) == started
    )


def started_at(pid: int) -> int | None:
    """When a process started (clock ticks since boot, /proc): what tells it from a later one with its pid."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def descendants(root: int) -> list[int]:
    """Every process started by ``root`` and by its children, found by their parent in /proc (none elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        fields = _stat(pid)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def stop_tree(pid: int, started: int, grace: float) -> None:
    """SIGTERM to the process (``pid``, ``started``) and every process it started, then SIGKILL to those still
    running after ``grace`` seconds (and to the ones they started meanwhile). Nothing when it is not running."""
    if not running(pid, started):
        return
    tree = {p: started_at(p) for p in [pid, *descendants(pid)]}
    for p, at in tree.items():
        if running(p, at):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(running(p, at) for p, at in tree.items()):
        time.sleep(0.05)  # (other processes' exits, none of them our children: nothing to wait on)
    if running(pid, started):
        tree.update({p: started_at(p) for p in descendants(pid) if p not in tree})
    for p, at in tree.items():
        if running(p, at):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)


class Watchdog:
    """watch's side: the watchdog process and the write end of its pipe (:meth:`close` once the command ended)."""

    def __init__(self, process: subprocess.Popen[bytes], lifeline: int) -> None:
        self.process = process
        self._lifeline: int | None = lifeline

    def close(self) -> None:
        """The command ended (or was stopped and waited for): the watchdog reads end of file, finds it gone and
        exits; waited for (briefly: it has nothing left to do)."""
        if self._lifeline is None:
            return
        os.close(self._lifeline)
        self._lifeline = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


def watch_over(pid: int, grace: float) -> Watchdog | None:
    """Start the watchdog of the command ``pid`` (just started by this process); None when there can be none (no
    /proc, or it cannot be started: the command runs unguarded, as before)."""
    started = started_at(pid)
    if started is None:
        return None
    read_end, write_end = os.pipe()  # (close-on-exec both: nothing but the watchdog's stdin gets a copy)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), str(pid), str(started), repr(grace)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the terminal's process group: its Ctrl-C and hang-up are watch's
        )
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return Watchdog(process, write_end)


def main(argv: list[str]) -> int:
    """``reaper.py PID START GRACE``: wait for the end of stdin (watch's end), then stop the command if it runs."""
    pid, started, grace = int(argv[0]), int(argv[1]), float(argv[2])
    with contextlib.suppress(OSError):
        while os.read(0, 4096):  # (watch writes nothing: only the end of file counts)
            pass
    stop_tree(pid, started, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Helpers for the tests that run the real `inspector` command in a process of its own and stop it from outside
(tests/cli: test_dashboard_stops, test_temp_files, test_headless_stops): the dashboard on a terminal (a pty) of its
own, the recording it writes read while it is written, another process's state polled (there is nothing else to
wait on), never a sleep as synchronisation. POSIX only (pty, /proc)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def until(ready: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Poll ``ready`` (another process's state) until it is true; an AssertionError saying ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # another process's state: nothing to wait on but polling it


@contextlib.contextmanager
def reaped(p: subprocess.Popen[Any]) -> Iterator[None]:
    """Whatever the block does (an assertion fails, a wait times out), the process is not left running."""
    try:
        yield
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def files_left(tmp: Path) -> list[str]:
    """What is left under ``tmp`` (a process's TMPDIR), as relative paths, sorted."""
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))


def recording_lines(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a recording being written (none while the file does not exist; a line being written is
    not one yet)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1]]


def blocked_on_a_fifo(pid: int) -> bool:
    """Whether the process waits in the open of a FIFO nobody has opened from the other side (Linux)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"
    except OSError:
        return False


class Dashboard:
    """`python -m inspector ARGS` on a terminal (a pty, 150x40) of its own, in a session of its own (its terminal's
    signals are its own), what it writes read on a thread (a dashboard whose terminal is full blocks)."""

    def __init__(self, env: dict[str, str], *args: str, cwd: Path | None = None) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
        self.p = subprocess.Popen(
            [sys.executable, "-m", "inspector", *args],
            env={**env, "TERM": "xterm-256color"},
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.screen: list[bytes] = []
        self.changed = threading.Condition()
        self.closing = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        import select

        while not self.closing.is_set():
            if not select.select([self.master], [], [], 0.1)[0]:  # (woken up to see `closing`)
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:  # (EIO: every writer has closed the terminal)
                data = b""
            with self.changed:
                if data:
                    self.screen.append(data)
                self.changed.notify_all()
            if not data:
                return
        with self.changed:
            self.changed.notify_all()

    def text(self) -> bytes:
        """Everything it wrote so far."""
        return b"".join(self.screen)

    def shown(self, what: bytes) -> bool:
        return what in self.text()

    def wait_shown(self, what: bytes, timeout: float = 60) -> None:
        """Until it has written ``what`` (an AssertionError with its last output if it did not within ``timeout``
        seconds, or stopped writing)."""
        with self.changed:
            ok = self.changed.wait_for(lambda: what in self.text() or not self.reader.is_alive(), timeout)
        assert ok and what in self.text(), self.text()[-2000:]

    def close_terminal(self) -> None:
        """Close the terminal's side (what a closed terminal window does), once the reader has let go of it."""
        self.closing.set()
        self.reader.join(10)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def end(self) -> tuple[int, bytes]:
        """Its status once it has exited (killed after a minute), and what it wrote."""
        try:
            status = self.p.wait(60)
        finally:
            if self.p.poll() is None:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
            self.reader.join(10)  # (it reads until the dashboard's side is closed: EIO)
            self.close_terminal()
        return status, self.text()

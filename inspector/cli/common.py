"""What every command shares: exit codes, the one-line error printer, the terminal test, the recording path check,
SIGTERM and SIGHUP as an exception (the cleanup runs)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Self

from inspector.core import signals

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def err(msg: str, prefix: str = "inspector") -> None:
    """One line on stderr: ``inspector: msg``, with every secret the process knows masked (also when no output guard
    is on, e.g. a command called from a test), then escaped for the terminal (``fmt.terminal``)."""
    say(f"{prefix}: {msg}")


def say(line: str) -> None:
    """A line on stderr: every secret the process knows masked (``core.redaction.mask_known``) first, then control
    characters escaped for the terminal."""
    from inspector.core.fmt import terminal
    from inspector.core.redaction import mask_known

    sys.stderr.write(terminal(mask_known(line)) + "\n")
    sys.stderr.flush()


def interactive() -> bool:
    """A terminal, or a browser through textual-serve (`inspector web` sets TEXTUAL_DRIVER for the app)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))


def record_error(path: str | Path, e: OSError) -> str:
    return f"cannot write the recording {path}: {e.strerror or e}"


def record_problem(path: str | Path) -> str | None:
    """Why a recording cannot be written at ``path`` (None when it can). Opens it for appending, which creates an
    empty file when missing and leaves an existing one as it is (the writer truncates it when it opens)."""
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        return record_error(path, e)
    return None


def record_if_nothing_ran(path: str | Path | None, source: dict[str, Any]) -> None:
    """After a dashboard whose session writes ``path``: when the session was never made (the dashboard quit while it
    started), the file :func:`record_problem` created is still empty; it becomes a recording that says nothing ran
    (``record.recorder.write_nothing_ran``), which `dump` reads. A file the session wrote is left as it is."""
    if not path:
        return
    from inspector.record.recorder import write_nothing_ran

    try:
        if os.path.getsize(path) == 0:
            write_nothing_ran(path, source)
    except OSError:  # (removed or unwritable since: nothing to say it in)
        pass


class Stopped(BaseException):
    """SIGTERM or SIGHUP, raised where the process was, as Ctrl-C raises KeyboardInterrupt: the ``finally`` blocks
    and context managers on the way run (temporary files removed, child processes stopped), and the command exits
    128 + N (``cli.main``), the status a shell gives a process the signal killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def stops_raise() -> Iterator[None]:
    """Within it, SIGTERM (kill, a CI runner's timeout) and SIGHUP (the terminal closed) raise :class:`Stopped`
    instead of ending the process where it was, its cleanup skipped (a temporary directory left in /tmp). A handler
    installed inside (watch's, passing the signal on to its command) wins while it is installed. Nothing outside
    the main thread (no handler can be set there)."""
    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signals.handle(sig, _raise_stopped)
    except ValueError:  # (not the main thread)
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP handled by :meth:`_stop` within ``with`` (the handlers in place before are put back
    after it); ``signals``: those that stopped something (the first one is the command's exit status: 128 + N).
    Nothing outside the main thread (no handler can be set there)."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        self._previous: dict[signal.Signals, Any] = {}

    def _stop(self, signum: int, _frame: object) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        with contextlib.suppress(ValueError):  # (not the main thread)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._previous[sig] = signals.handle(sig, self._stop)
        return self

    def __exit__(self, *_: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def raise_if_stopped(self) -> None:
        """A stop from outside ends the command (``cli.main``: exit 128 + N), once what it stopped has ended."""
        if self.signals:
            raise Stopped(self.signals[0])


class DashboardStops(StopSignals):
    """SIGTERM, SIGHUP and SIGINT (kill -INT: Ctrl-C on the dashboard's terminal is a key) while a dashboard runs
    (``with``): the dashboard quits as `q` does (``InspectorApp.quit_soon``, whenever the signal comes: also while it
    starts), its session ends in order (the recording's end lines written, `--otel`'s spans flushed, the terminal
    given back), then :meth:`raise_if_stopped` makes the command exit 128 + N (``cli.main``). Before the app is made
    (give :meth:`made` to ``run_dashboard(made=...)``) nothing runs yet: :class:`Stopped` is raised where the process
    was. Killed where it was, the dashboard left its recording without its end and the terminal in its mode."""

    def __init__(self) -> None:
        super().__init__()
        self.apps: list[Any] = []  # the dashboard, once made

    def made(self, app: Any) -> None:
        self.apps.append(app)

    def _stop(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)
        if not self.apps:  # (not made yet: nothing runs, nothing to quit)
            raise Stopped(signum)
        self.apps[0].quit_soon()

"""`python -m inspector` and the `inspector` console script.

Ctrl-C may come at any moment, even while the commands are still importing: from the first line of `entry()` until
a command takes Ctrl-C over, SIGINT ends the process at once with exit status 130 and no traceback. `inspector run`
and `inspector replay` keep this handler until they start making their session (headless: from then on Ctrl-C ends
the run in order, `inspector.cli.run._HeadlessStops`) or the dashboard starts; the other commands get the usual
KeyboardInterrupt back once imported (`inspector.cli.main` turns it into exit 130). Once a command has returned
its exit status, SIGINT, SIGTERM and SIGHUP are ignored until the process has exited (:func:`stopped_too_late`).
A signal that lands before Python runs this module (while the interpreter itself starts) is Python's own business.
"""

import os
import signal
import sys

# commands that keep the start-up handler until they take Ctrl-C over themselves (see inspector.cli.run)
_KEEPS_HANDLER = frozenset({None, "run", "replay"})


def interrupted_while_starting(signum: int, frame: object) -> None:
    os._exit(130)  # nothing to clean up yet: no output written, no file complete


def entry() -> int:
    from inspector.core import signals

    signals.remember_start()  # (before any handler: a stop signal the process was started with ignored stays so)
    previous = signals.handle(signal.SIGINT, interrupted_while_starting)
    from inspector.cli import main  # imported under the start-up handler, on purpose
    from inspector.core.gcpolicy import tune_gc

    tune_gc()  # a stream's garbage is freed by reference counting: collect cycles less often (see gcpolicy)

    words = [a for a in sys.argv[1:] if not a.startswith("-")]
    command = words[0] if words else None
    if command not in _KEEPS_HANDLER:
        signal.signal(signal.SIGINT, previous)  # the command takes Ctrl-C as KeyboardInterrupt
    status = main()
    stopped_too_late()  # (every command: its status is final)
    return status


def stopped_too_late() -> None:
    """The command has its exit status (its run ended, its recording closed, its workspace copy removed): a stop
    from now on comes too late to stop anything, and is ignored until the process has exited. Python's exit puts
    SIGINT's default action back before it tears its modules down (a few hundred ms once the SDK is imported): a
    Ctrl-C then killed the process (-2, its status lost), SIGTERM and SIGHUP too (-15, -1). (Python leaves an
    ignored signal ignored; the run's threads are daemons, nothing waits for them.)"""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


if __name__ == "__main__":
    raise SystemExit(entry())

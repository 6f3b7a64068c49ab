"""A stop signal the process was started with ignored stays ignored.

``nohup inspector proxy ... &`` starts the proxy with SIGHUP ignored, so that closing the terminal leaves it running;
a shell starts a script's background job (``inspector serve ... &``) with SIGINT ignored, so that a Ctrl-C meant for
the foreground command does not stop it. POSIX programs leave such a signal alone, as Python does with SIGINT (it
installs its KeyboardInterrupt handler only where SIGINT is not ignored). A command installs its handlers for
SIGINT, SIGTERM and SIGHUP through :func:`handle`, which leaves a signal ignored at the start ignored (before, the
proxy stopped on the hang-up that nohup was there to ignore, and exited 0).

The entry point calls :func:`remember_start` before anything installs a handler; a library caller that never did
gets what is ignored at its first :func:`handle`.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_ignored_at_start: frozenset[int] | None = None


def remember_start() -> None:
    """Note which stop signals the process was started with ignored (once: later calls change nothing)."""
    global _ignored_at_start
    if _ignored_at_start is None:
        _ignored_at_start = frozenset(s for s in STOPS if signal.getsignal(s) is signal.SIG_IGN)


def ignored_at_start(sig: int) -> bool:
    """Whether ``sig`` was ignored when the process started (nohup's SIGHUP, a background job's SIGINT)."""
    if _ignored_at_start is None:
        remember_start()
    assert _ignored_at_start is not None
    return sig in _ignored_at_start


def handle(sig: int, handler: Callable[[int, FrameType | None], Any] | int) -> Any:
    """``signal.signal(sig, handler)``, unless ``sig`` was ignored when the process started: then it stays ignored.
    Returns the handler in place before (to put back with ``signal.signal``: SIG_IGN for a signal left ignored)."""
    if ignored_at_start(sig):
        return signal.getsignal(sig)
    return signal.signal(sig, handler)


__all__ = ["STOPS", "handle", "ignored_at_start", "remember_start"]

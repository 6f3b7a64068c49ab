"""What every command shares: exit codes, the one-line error printer, the terminal test."""

from __future__ import annotations

import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def err(msg: str) -> None:
    """One line on stderr: ``inspector: msg``."""
    from inspector.core.fmt import terminal

    sys.stderr.write(f"inspector: {terminal(msg)}\n")
    sys.stderr.flush()


def interactive() -> bool:
    """A terminal, or a browser through textual-serve (`inspector web` sets TEXTUAL_DRIVER for the app)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))

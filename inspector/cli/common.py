"""What every command shares: exit codes, the one-line error printer, the terminal test."""

from __future__ import annotations

import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def err(msg: str, prefix: str = "inspector") -> None:
    """One line on stderr: ``inspector: msg``, with every secret the process knows masked (also when no output guard
    is on, e.g. a command called from a test)."""
    say(f"{prefix}: {msg}")


def say(line: str) -> None:
    """A line on stderr, with every secret the process knows masked (``core.redaction.mask_known``)."""
    from inspector.core.redaction import mask_known

    sys.stderr.write(mask_known(line) + "\n")
    sys.stderr.flush()


def interactive() -> bool:
    """A terminal, or a browser through textual-serve (`inspector web` sets TEXTUAL_DRIVER for the app)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))

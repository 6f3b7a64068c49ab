"""What every command shares: exit codes, the one-line error printer, the terminal test, the recording path check."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

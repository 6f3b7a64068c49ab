"""Fixtures of the CLI tests that run `inspector` in a process of its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmpdir_env() -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh TMPDIR (where a scenario's workspace copy goes; short: a Unix socket's path in it must fit), and the
    environment that names it (this tree first on the path, no tmux or Textual driver of the caller's)."""
    tmp = Path(tempfile.mkdtemp(prefix="it-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TEXTUAL_DRIVER")}
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    try:
        yield tmp, env
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

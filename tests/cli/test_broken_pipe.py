"""A closed stdout (`inspector ... | head -1`) ends every command quietly: exit 0, nothing on stderr (issue 18 §4;
`dump --events --json REC | head -1` said `cannot read REC: Broken pipe` and exited 2; `run --headless` exited 130)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inspector.testing.streamgen import text_stream

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("bp") / "big.sse"
    p.write_bytes(text_stream(20_000).data)  # ~2.4 MB: far more output than a pipe holds
    return str(p)


@pytest.mark.parametrize(
    "argv",
    [
        ["dump", "--events", "--json", "{}"],
        ["dump", "--json", "{}"],
        ["dump", "{}"],
        ["dump", "--timing", "{}"],
        ["replay", "{}", "--headless", "--speed", "max"],
        ["replay", "{}", "--headless", "--json", "--speed", "max"],
        ["run", "--headless", "--json", "--scenario", "weather", "--speed", "max"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_closed_stdout_ends_quietly_with_exit_0(big, argv):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", *[a.replace("{}", big) for a in argv]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)  # like `head -c 10`: read a little, then go away
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(60) == 0, err
    assert err == b""

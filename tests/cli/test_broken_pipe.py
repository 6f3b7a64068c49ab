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
def streams(tmp_path_factory) -> dict[int, str]:
    """Two streams by their event count: each row reads the smaller one that still makes it write far more than a
    pipe holds (64 KiB), so its writes are still going on when the reader leaves."""
    out = {}
    for n in (2_000, 20_000):
        p = tmp_path_factory.mktemp("bp") / f"{n}.sse"
        p.write_bytes(text_stream(n).data)  # ~0.24 MB and ~2.4 MB
        out[n] = str(p)
    return out


@pytest.mark.parametrize(
    "argv, events",
    [
        (["dump", "--events", "--json", "{}"], 2_000),  # ~330 KB of output
        (["dump", "--json", "{}"], 20_000),  # ~140 KB (a summary: 2,000 events give only 14 KB)
        (["dump", "{}"], 20_000),
        (["dump", "--timing", "{}"], 20_000),
        (["replay", "{}", "--headless", "--speed", "max"], 20_000),
        (["replay", "{}", "--headless", "--json", "--speed", "max"], 2_000),  # ~1.3 MB
        (["run", "--headless", "--json", "--scenario", "weather", "--speed", "max"], 0),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else str(a),
)
def test_a_closed_stdout_ends_quietly_with_exit_0(streams, argv, events):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    path = streams.get(events, "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", *[a.replace("{}", path) for a in argv]],
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

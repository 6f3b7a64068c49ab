"""Headless replay memory: peak RSS of `replay --headless --json` on synthetic recordings of growing length.

A recording of N turns (each: a text block of E deltas and one tool call; each request carries the whole history,
as the loop sends it) is replayed at max speed in a fresh process; the table gives the peak RSS and the recording's
size. Flat means: RSS grows with the recording (it is read into memory), not with the square of the turns.

    PYTHONPATH=. python tools/bench_replay_memory.py [turns ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from inspector.testing.recordings import EVENTS_PER_TURN, write_recording

CHILD = """
import resource, sys, runpy
sys.argv = ["inspector", "replay", sys.argv[1], "--headless", "--json"]
try:
    runpy.run_module("inspector", run_name="__main__")
except SystemExit as e:
    code = e.code
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code, file=sys.stderr)
"""


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [50, 100, 200, 400]
    print(f"{'turns':>6} {'events':>8} {'file MB':>8} {'peak RSS MB':>12} {'exit':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"r{n}.jsonl"
            write_recording(path, n)
            r = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=dict(os.environ),
                timeout=3600,
            )
            rss_kb, code = r.stderr.decode().split()[-2:]
            mb = path.stat().st_size / 1e6
            print(f"{n:>6} {n * (EVENTS_PER_TURN + 8):>8} {mb:>8.1f} {int(rss_kb) / 1024:>12.1f} {code:>5}")
            path.unlink()


if __name__ == "__main__":
    main()

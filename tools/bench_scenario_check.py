"""Benchmark: `inspector scenario check` on big scenario files of each shape (inspector/testing/bigscenario.py), each
in a fresh process: its CPU time and peak RSS, and how they grow when the file is 4 times bigger (about 4: linear;
16: quadratic).

    PYTHONPATH=. python tools/bench_scenario_check.py                          # every shape, 150 KB .. 2.4 MB
    PYTHONPATH=. python tools/bench_scenario_check.py --shape faults --sizes 100000 400000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from inspector.testing.bigscenario import SHAPES, big_scenario


def check(path: Path) -> tuple[float, float, str]:
    """(CPU seconds, peak RSS in MB, the output's last line) of `python -m inspector scenario check PATH`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", "scenario", "check", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = (out.strip().splitlines() or [""])[-1]
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, last[:60]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, action="append", help="repeatable (default: every shape)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[150_000, 600_000, 2_400_000], metavar="BYTES")
    args = parser.parse_args()
    print(f"{'shape':9} {'bytes':>9} {'cpu s':>7} {'x prev':>6} {'RSS MB':>7}  output")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shape or SHAPES:
            prev = None
            for size in args.sizes:
                path = Path(tmp) / f"{shape}.yaml"
                path.write_text(big_scenario(shape, size), encoding="utf-8")
                cpu, rss, last = check(path)
                grow = f"{cpu / prev:6.1f}" if prev else " " * 6
                print(f"{shape:9} {path.stat().st_size:9} {cpu:7.2f} {grow} {rss:7.0f}  {last}", flush=True)
                prev = cpu
    return 0


if __name__ == "__main__":
    sys.exit(main())

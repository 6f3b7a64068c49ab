"""Benchmark: `inspector scenario check` on big scenario files of each shape (inspector/testing/bigscenario.py), each
in a fresh process: its CPU and wall time, its peak RSS, and how the CPU time grows when the file is 4 times bigger
(about 4: linear; 16: quadratic). ``--compare DIR`` runs the same files through another checkout too (an older
commit: ``git worktree add DIR COMMIT``), side by side.

    PYTHONPATH=. python tools/bench_scenario_check.py                          # every shape, 150 KB .. 2.4 MB
    PYTHONPATH=. python tools/bench_scenario_check.py --shape faults --sizes 100000 400000
    PYTHONPATH=. python tools/bench_scenario_check.py --sizes 1M 4M 16M --compare /tmp/before

Measured here (2 shared cores, Python 3.11, PyYAML 6.0.4 with libyaml), before and after the reader composed its own
compact nodes (fileformat._compose_compact: a node keeps its tag, value and position, not two marks; short values
shared; reading stops past MAX_VALUES written values), ``--compare`` with the commit before:

    shape      size       peak RSS MB      CPU s (wall)              result
                         before  after    before         after
    numbers    1 MiB        223    129     3.3 (3.4)     2.4 (2.4)   ok (524,000 values)
    numbers    4 MiB       1107    199    13.6 (13.8)    2.2 (2.2)   refused: more than 1,000,000 values
    numbers   16 MiB       4155    217    76.4 (130.0)   2.2 (2.2)   refused: more than 1,000,000 values
    recorded   1 MiB        119     80     1.6 (1.6)     1.2 (1.4)   ok
    recorded   4 MiB        360    201     5.5 (5.6)     3.7 (3.9)   ok
    recorded  15.9 MiB     1792    225    19.7 (24.9)    2.6 (3.2)   refused: more than 1,000,000 values
    steps      1 MiB        140    113     1.9 (1.9)     1.8 (1.9)   ok
    steps      4 MiB        437    333     5.9 (6.4)     5.6 (6.1)   ok
    steps     15.9 MiB     1500    277    17.4 (23.4)    3.3 (4.1)   refused: more than 1,000,000 values

The biggest valid file of each shape (just under 1,000,000 values): numbers 1.9 MiB 393 -> 211 MB, recorded 5.1 MiB
431 -> 246, steps 6.2 MiB 643 -> 481, tools 9.5 MiB 631 -> 476, faults 8 MiB 539 -> 370, blocks 7 MiB 535 -> 373
(CPU time the same or less). Before, a refused file was read whole first (the numbers at 16 MiB: 8.4 million values).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inspector.testing.bigscenario import SHAPES, big_scenario

ROOT = Path(__file__).resolve().parents[1]


def check(path: Path, root: Path = ROOT) -> tuple[float, float, float, str]:
    """(CPU seconds, wall seconds, peak RSS in MB, the output's last line) of `python -m inspector scenario check
    PATH`, with the inspector of ``root``."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", "scenario", "check", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=str(root),
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    last = (out.strip().splitlines() or [""])[-1]
    last = last.removeprefix(f"{path}:")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, last[:70]


def size(text: str) -> int:
    """A size in bytes: 150000, or with a suffix, 1M (MiB) or 64K (KiB)."""
    units = {"K": 2**10, "M": 2**20}
    if text[-1:].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, action="append", help="repeatable (default: every shape)")
    parser.add_argument(
        "--sizes", type=size, nargs="+", default=[150_000, 600_000, 2_400_000], metavar="BYTES", help="150000, 1M, 64K"
    )
    parser.add_argument("--compare", type=Path, metavar="DIR", help="another checkout to run the same files through")
    args = parser.parse_args()
    other = "" if args.compare is None else f" {'cpu s':>7} {'wall s':>7} {'RSS MB':>7}  (--compare)"
    print(f"{'shape':9} {'bytes':>9} {'cpu s':>7} {'wall s':>7} {'x prev':>6} {'RSS MB':>7}{other}  output")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shape or SHAPES:
            prev = None
            for n in args.sizes:
                path = Path(tmp) / f"{shape}.yaml"
                path.write_text(big_scenario(shape, n), encoding="utf-8")
                cpu, wall, rss, last = check(path)
                grow = f"{cpu / prev:6.1f}" if prev else " " * 6
                then = ""
                if args.compare is not None:
                    cpu0, wall0, rss0, _ = check(path, args.compare)
                    then = f" {cpu0:7.2f} {wall0:7.2f} {rss0:7.0f}"
                print(
                    f"{shape:9} {path.stat().st_size:9} {cpu:7.2f} {wall:7.2f} {grow} {rss:7.0f}{then}  {last}",
                    flush=True,
                )
                prev = cpu
    return 0


if __name__ == "__main__":
    sys.exit(main())

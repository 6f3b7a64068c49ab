"""Start-up cost of the commands people type most: CPU time (user + sys) of the whole process, median of N runs.

    PYTHONPATH=. .venv/bin/python tools/bench_startup.py [--runs 5]

Targets (issue 8): `inspector --help` <= 0.2 s, `inspector dump` of a small recording <= 0.3 s, the dashboard's first
frame <= 1.0 s. The first frame is measured by running the dashboard headless on the default scenario (the path
`inspector` takes): the process's CPU time at the moment its first frame is on screen (the SDK is imported after it). Also reports whether each command imported
the SDK (`anthropic`) or Textual, which `--help`, `scenarios` and `dump` must not.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FIRST_FRAME = r"""
import argparse, resource, sys
from inspector.cli.run import _make_factory
from inspector.tui.app import InspectorApp

args = argparse.Namespace(command="run", scenario=None, model=None, prompt=None, speed=None, record=None,
                          retries=2, max_turns=20, idle_timeout=None, headless=False, json=False, tools=[])
factory, source = _make_factory(args, tui=True)

def painted(app):
    r = resource.getrusage(resource.RUSAGE_SELF)
    sys.stderr.write(f"FIRST_FRAME_CPU {r.ru_utime + r.ru_stime}\n")
    sys.stderr.write("MODULES " + ",".join(m for m in ("anthropic", "textual") if m in sys.modules) + "\n")
    app.exit(0)

async def first_frame(pilot):
    pilot.app.call_after_refresh(painted, pilot.app)  # right after the first frame is on screen

InspectorApp(factory, source=source).run(headless=True, auto_pilot=first_frame, size=(160, 48))
"""

REPORT = r"""
import runpy, sys
sys.argv = ["inspector", *sys.argv[1:]]
try:
    runpy.run_module("inspector", run_name="__main__")
except SystemExit:
    pass
finally:
    sys.stderr.write("MODULES " + ",".join(m for m in ("anthropic", "textual") if m in sys.modules) + "\n")
"""


def cpu_of(argv: list[str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, env=os.environ | {"NO_COLOR": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    modules = ""
    for line in proc.stderr.splitlines():
        if line.startswith("MODULES "):
            modules = line[8:]
        elif line.startswith("FIRST_FRAME_CPU "):  # the process's CPU time when its first frame was on screen
            cpu = float(line.split()[1])
    return cpu, modules


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "weather.jsonl"
        subprocess.run(
            [
                py,
                "-m",
                "inspector",
                "run",
                "--scenario",
                "weather",
                "--speed",
                "max",
                "--headless",
                "--record",
                str(rec),
            ],
            check=True,
            capture_output=True,
        )
        cases = [
            ("inspector --help", [py, "-c", REPORT, "--help"], 0.2),
            ("inspector scenarios", [py, "-c", REPORT, "scenarios"], 0.3),
            ("inspector dump (small recording)", [py, "-c", REPORT, "dump", str(rec)], 0.3),
            ("dashboard first frame", [py, "-c", FIRST_FRAME], 1.0),
        ]
        print(f"{'command':<34} {'CPU median':>10} {'min':>7} {'max':>7} {'target':>7}  met  imports")
        ok = True
        for name, argv, target in cases:
            runs = [cpu_of(argv) for _ in range(opts.runs)]
            cpus = [c for c, _ in runs]
            med = statistics.median(cpus)
            met = med <= target
            ok &= met
            print(
                f"{name:<34} {med:>9.3f}s {min(cpus):>6.3f}s {max(cpus):>6.3f}s {target:>6.1f}s  "
                f"{'yes' if met else 'NO ':<4} {runs[-1][1] or '-'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

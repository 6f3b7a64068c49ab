"""The dashboard's fold and spill, without Textual (issue 17): CPU per observation of a long generated session.

    PYTHONPATH=. python tools/bench_fold.py [--events 100000] [--batch 500] [--repeat 3] [--json]

Folds the observations of a generated session of about N SSE events (reads, events, block deltas: three
observations an event) the way the dashboard does, each variant from a fresh `History` and `DashboardState`:
  * fold: `DashboardState.apply` one observation at a time (the state only);
  * spill: `SpilledObservations.append` one at a time (the history's spill to disk only);
  * per observation: ``history.append(obs); live.apply(obs)`` (what the app's tick did per observation);
  * batch: `History.extend_live` on batches of ``--batch`` observations (the same fold, a few calls per batch).
Reported: the best of ``--repeat`` runs, in process CPU seconds and microseconds per observation, and the cyclic
GC's collections (generations 0, 1, 2) during the last run. The cyclic GC stays on with its default thresholds,
as in the dashboard, so its share counts; pass ``--no-gc`` to see the fold's own cost. Keep N so that a run stays
under a minute on a shared machine.

    PYTHONPATH=. python tools/bench_fold.py --instructions [--compare OTHER_TREE]

  * ``--instructions``: each variant's instructions per observation, counted by valgrind's cachegrind over a fifth
    of the events, less a run that only builds the observations (each variant in its own process; hash seed 0).
    A count is the same on every run whatever else the machine does, where one timed run moves by +-25% on a
    shared machine: the figure to judge a change of the fold or the spill by;
  * ``--compare OTHER_TREE``: the same report from another checkout (e.g. the code before a change), in this run,
    and this tree's figures over the other's.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def run(observations: Sequence[Any], variant: str, batch: int) -> tuple[float, list[int]]:
    from inspector.state.fold import DashboardState
    from inspector.state.travel import History

    history, live = History(), DashboardState()
    history.follow(live)
    before = [s["collections"] for s in gc.get_stats()]
    c0 = time.process_time()
    if variant == "fold":
        for obs in observations:
            live.apply(obs)
    elif variant == "spill":
        spilled = history.observations
        for obs in observations:
            spilled.append(obs)
    elif variant == "per observation":
        for obs in observations:
            history.append(obs)
            live.apply(obs)
    else:
        for i in range(0, len(observations), batch):
            history.extend_live(observations[i : i + batch])
    cpu = time.process_time() - c0
    return cpu, [s["collections"] - b for s, b in zip(gc.get_stats(), before, strict=True)]


def instructions(tree: Path, variant: str, events: int, batch: int) -> int:
    """Instructions of one run of this bench at ``tree`` with only ``variant`` (``none``: the observations only)."""
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable]
    argv += [str(Path(__file__).resolve()), "--only", variant, "--events", str(events), "--batch", str(batch)]
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree, timeout=3600)
    for line in proc.stderr.splitlines():  # "==123== I   refs:      1,234,567"
        if proc.returncode == 0 and "refs:" in line:
            return int(line.rsplit(":", 1)[1].replace(",", ""))
    raise SystemExit(f"{tree}: cachegrind of {variant!r} failed:\n{proc.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gc", action="store_true", help="turn the cyclic GC off while folding")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind's cachegrind)")
    ap.add_argument("--compare", metavar="OTHER_TREE", help="also report another checkout, in this run")
    ap.add_argument("--only", help=argparse.SUPPRESS)  # (one variant, once: what --instructions counts)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.compare:
        return compare(args)
    from inspector.testing.synthetic import generated_observations

    observations = generated_observations(args.events)
    gc.collect()
    gc.freeze()  # the session's observations are the caller's: not the fold's to scan
    if args.no_gc:
        gc.disable()
    report: dict[str, Any] = {"events": args.events, "observations": len(observations), "batch": args.batch}
    from inspector.state.travel import History

    names = ["fold", "spill", "per observation"] + (["batch"] if hasattr(History, "extend_live") else [])
    # (a tree from before the batch path has no History.extend_live: its figures without the batch variant)
    variants: dict[str, Callable[[], tuple[float, list[int]]]] = {
        v: (lambda v=v: run(observations, v, args.batch)) for v in names
    }
    if args.only:  # (counted from outside: nothing to report)
        if args.only != "none":
            variants[args.only]()
        return 0
    for name, f in variants.items():
        runs = [f() for _ in range(max(1, args.repeat))]
        cpu = min(r[0] for r in runs)
        report[name] = {
            "cpu_s": round(cpu, 3),
            "us_per_obs": round(cpu / len(observations) * 1e6, 2),
            "gc": runs[-1][1],
        }
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (apt install valgrind)")
        small = max(1000, args.events // 5)
        counted = len(generated_observations(small))
        import inspector

        tree = Path(inspector.__file__).resolve().parent.parent  # (the checkout measured: --compare's other one too)
        base = instructions(tree, "none", small, args.batch)
        for name in variants:
            if name != "per observation":  # (the batch path replaced it in the dashboard)
                report[name]["instructions"] = round((instructions(tree, name, small, args.batch) - base) / counted)
        report["instructions_events"] = small
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['observations']:,} observations ({args.events:,} SSE events), best of {args.repeat}:")
        for name in variants:
            r = report[name]
            count = f"  {r['instructions']:7,} instructions/observation" if "instructions" in r else ""
            print(f"  {name:16} {r['cpu_s']:7.3f} s CPU  {r['us_per_obs']:6.2f} us/observation  gc {r['gc']}{count}")
        if args.instructions:
            print(f"  (instructions: cachegrind over {report['instructions_events']:,} events)")
    return 0


def compare(args: argparse.Namespace) -> int:
    """This tree's report and OTHER_TREE's, one after the other, and this one's figures over the other's."""
    reports = []
    for tree in (Path(__file__).resolve().parent.parent, Path(args.compare).resolve()):
        argv = [sys.executable, str(Path(__file__).resolve()), "--json", "--events", str(args.events)]
        argv += ["--batch", str(args.batch), "--repeat", str(args.repeat)]
        argv += ["--instructions"] if args.instructions else []
        argv += ["--no-gc"] if args.no_gc else []
        env = dict(os.environ, PYTHONPATH=str(tree))
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree, timeout=7200)
        if proc.returncode != 0:
            raise SystemExit(f"{tree}: {proc.stderr[-2000:]}")
        reports.append((tree, json.loads(proc.stdout)))
    if args.json:
        print(json.dumps({str(t): r for t, r in reports}, indent=2))
        return 0
    (here, a), (there, b) = reports
    print(f"{a['observations']:,} observations, best of {args.repeat}; this tree ({here}) / {there}:")
    for name in ("fold", "spill", "per observation", "batch"):
        if name in a and name in b:
            x, y = a[name], b[name]
            line = f"  {name:16} {x['us_per_obs']:6.2f} / {y['us_per_obs']:6.2f} us = {x['cpu_s'] / y['cpu_s']:.2f}x"
            if "instructions" in x and "instructions" in y:
                line += f"   instructions {x['instructions']:,} / {y['instructions']:,}"
                line += f" = {x['instructions'] / y['instructions']:.3f}x"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

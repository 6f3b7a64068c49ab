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
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable, Sequence
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gc", action="store_true", help="turn the cyclic GC off while folding")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
    for name, f in variants.items():
        runs = [f() for _ in range(max(1, args.repeat))]
        cpu = min(r[0] for r in runs)
        report[name] = {
            "cpu_s": round(cpu, 3),
            "us_per_obs": round(cpu / len(observations) * 1e6, 2),
            "gc": runs[-1][1],
        }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['observations']:,} observations ({args.events:,} SSE events), best of {args.repeat}:")
        for name in variants:
            r = report[name]
            print(f"  {name:16} {r['cpu_s']:7.3f} s CPU  {r['us_per_obs']:6.2f} us/observation  gc {r['gc']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

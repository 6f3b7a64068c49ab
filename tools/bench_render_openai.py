"""Render time of every bundled scenario in the three wire formats (Anthropic, OpenAI chat, OpenAI Responses):
what a cold `inspector serve` request costs before its plan is cached (it renders in a worker thread).

    python tools/bench_render_openai.py [--repeat 3] [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import time

from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.render import render_turn
from inspector.scenarios.render_openai import render_openai_turn

FORMATS = {
    "anthropic": lambda sc, t: render_turn(sc, t, 0),
    "chat": lambda sc, t: render_openai_turn(sc, t, 0, api="chat", include_usage=True),
    "responses": lambda sc, t: render_openai_turn(sc, t, 0, api="responses"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scenario", action="append", help="a bundled scenario (default: all)")
    args = ap.parse_args()
    names = args.scenario or list(SCENARIOS)
    print(f"{'scenario':<22}" + "".join(f"{f:>22}" for f in FORMATS))
    for name in names:
        sc = SCENARIOS[name]
        cells = []
        for render in FORMATS.values():
            best, size = float("inf"), 0
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                size = sum(len(render(sc, t).body) for t in range(len(sc.turns)))
                best = min(best, time.perf_counter() - t0)
            cells.append(f"{best * 1000:8.1f} ms {size / 1024:7.0f} KiB")
        print(f"{name:<22}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()

"""HTML export benchmark: a generated session of N events exported with `inspector export`, then opened in
headless Chromium (Debian's `chromium`).

    .venv/bin/python tools/bench_export.py [--events 10000 100000] [--json]

Reports per size: the page's bytes (target for 10k events: < 5 MB), the export's wall time, and the page's own
load time (navigation start to the first render with every event listed: `data-load-ms` on <body>; target for
10k events: < 2 s), plus the wall time of the whole headless-browser run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_recording(path: Path, events: int) -> int:
    from inspector.testing.synthetic import generated_observations
    from inspector.tui.export import write_recording

    obs = generated_observations(events)
    write_recording(path, obs, {"type": "generated", "events": events})
    return sum(1 for o in obs if type(o).__name__ == "SSEEventSeen")


def measure(events: int, tmp: Path) -> dict:
    from inspector.record.har import load_any
    from inspector.record.htmlexport import export

    rec, page = tmp / f"s{events}.jsonl", tmp / f"s{events}.html"
    make_recording(rec, events)
    t0 = time.perf_counter()
    size = export(load_any(rec), page, title=f"{events} events")
    export_s = time.perf_counter() - t0
    out: dict = {"events": events, "bytes": size, "export_s": round(export_s, 3)}
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        t0 = time.perf_counter()
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=20000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
        out["browser_wall_s"] = round(time.perf_counter() - t0, 3)
        m = re.search(r'data-load-ms="(\d+)"', dom)
        out["page_load_ms"] = int(m.group(1)) if m else None
        m = re.search(r'data-events="(\d+)"', dom)
        out["page_events"] = int(m.group(1)) if m else None
        m = re.search(r'data-errors="(\d+)"', dom)
        out["page_errors"] = int(m.group(1)) if m else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(n, Path(tmp)) for n in args.events]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(
                f"{r['events']:>7} events: {r['bytes'] / 1e6:.2f} MB, export {r['export_s']:.2f} s, page load "
                f"{r.get('page_load_ms')} ms (browser run {r.get('browser_wall_s')} s), listed {r.get('page_events')}, "
                f"errors {r.get('page_errors')}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

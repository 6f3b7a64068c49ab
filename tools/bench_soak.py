"""Soak benchmark: memory over long sessions (issue 10 §5). Prints RSS over time and a summary table.

    PYTHONPATH=. .venv/bin/python tools/bench_soak.py [--events 1000000] [--turns 1000] [--only dashboard,replay,serve]

Each mode runs in a fresh subprocess (its RSS is its own):
  * dashboard: the dashboard's state without the UI, fed as the app feeds it (``History.append`` + ``live.apply``)
    with a generated session of N events in T turns; RSS every N/10 events; then time travel to random events
    (latency per jump). Targets: < 500 MB at 1M events, every jump < 200 ms.
  * replay: a recording of N events in T turns replayed headless through ``sources.replay_session`` at max speed
    (the loop, the SDK, the in-process transport), one counting subscriber; RSS sampled every 0.5 s. Target: < 200 MB
    and flat after warm-up.
  * serve / proxy: ``BackgroundServer(ServeApp)`` (and ``ProxyApp`` in front of it) in process, R sequential
    streamed requests over one client; RSS every R/10. Target: flat within 20 MB after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024 / 1024


def run_dashboard(events: int, turns: int) -> dict:
    import gc

    from inspector.observe import observations as O
    from inspector.state.fold import DashboardState
    from inspector.state.travel import History
    from inspector.testing.synthetic import generated_stream

    history, live = History(), DashboardState()
    history.follow(live)
    samples = []
    step = max(1, events // 10)
    nxt = step
    t0 = time.perf_counter()
    gc.freeze()  # the app freezes long-lived objects under a firehose, too
    for obs in generated_stream(events, tool_every=max(1, events // turns)):
        history.append(obs)
        live.apply(obs)
        if type(obs) is O.SSEEventSeen and live.status.events >= nxt:
            gc.freeze()  # as the app does under a firehose: long-lived objects out of the full collections
            samples.append((live.status.events, round(rss_mb(), 1), round(time.perf_counter() - t0, 1)))
            nxt += step
    fold_s = time.perf_counter() - t0
    n = history.event_count
    rnd = random.Random(1)
    jumps = [n, 0, n // 2, *(rnd.randrange(n + 1) for _ in range(20)), n - 1, 1]
    lat = []
    for k in jumps:
        t = time.perf_counter()
        s = history.state_at(k)
        lat.append((time.perf_counter() - t) * 1000)
        assert s.status.events == k, (s.status.events, k)
    return {
        "mode": "dashboard",
        "events": n,
        "fold_s": round(fold_s, 1),
        "samples": samples,
        "rss_end_mb": round(rss_mb(), 1),
        "travel_ms_max": round(max(lat), 1),
        "travel_ms_median": round(sorted(lat)[len(lat) // 2], 1),
        "rss_after_travel_mb": round(rss_mb(), 1),
    }


def run_replay(events: int, turns: int) -> dict:
    import asyncio
    import math
    import tempfile

    from inspector.observe import observations as O
    from inspector.sessions import sources

    path = Path(tempfile.mkdtemp()) / "soak.jsonl"
    cmd = [sys.executable, __file__, "--child", "write", "--path", str(path), "--events", str(events)]
    subprocess.run([*cmd, "--turns", str(turns)], check=True, capture_output=True)  # written by another process
    base = rss_mb()
    samples: list[tuple[float, float, int]] = []
    count = [0]

    def sub(o: O.Observation) -> None:
        if type(o) is O.SSEEventSeen:
            count[0] += 1

    async def main() -> str:
        session = sources.replay_session(path, speed=math.inf)
        session.bus.subscribe(sub)
        t0 = time.perf_counter()

        async def sample() -> None:
            while True:
                await asyncio.sleep(0.5)
                samples.append((round(time.perf_counter() - t0, 1), round(rss_mb(), 1), count[0]))

        task = asyncio.create_task(sample())
        result = await session.run()
        task.cancel()
        return str(result.status)

    status = asyncio.run(main())
    os.unlink(path)
    rss = [s[1] for s in samples] or [rss_mb()]
    warm = rss[len(rss) // 5 :] or rss
    return {
        "mode": "replay",
        "events": count[0],
        "status": status,
        "rss_start_mb": round(base, 1),
        "rss_peak_mb": max(rss),
        "rss_growth_after_warmup_mb": round(max(warm) - warm[0], 1),
        "samples": samples[:: max(1, len(samples) // 12)],
    }


def run_server(mode: str, requests: int) -> dict:
    """`serve` (or `proxy` in front of it) in process: R sequential streamed requests; RSS after each tenth."""
    import gc
    import math
    from contextlib import ExitStack

    import httpx2

    from inspector.net.serve import ServeApp
    from inspector.net.server import BackgroundServer

    samples = []
    step = max(1, requests // 10)
    with ExitStack() as stack:
        srv = stack.enter_context(BackgroundServer(ServeApp(speed=math.inf, lenient=True)))
        base = srv.base_url
        if mode == "proxy":
            from inspector.net.proxy import ProxyApp

            base = stack.enter_context(BackgroundServer(ProxyApp(srv.base_url))).base_url
        body = {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "x"}]}
        headers = {"x-api-key": "sk-soak", "anthropic-version": "2023-06-01"}
        with httpx2.Client(base_url=base, timeout=30) as client:
            for i in range(1, requests + 1):
                with client.stream("POST", "/v1/messages", json=body, headers=headers) as r:
                    for _ in r.iter_bytes():
                        pass
                    assert r.status_code == 200, r.status_code
                if i % step == 0:
                    gc.collect()
                    samples.append((i, round(rss_mb(), 1)))
    rss = [s[1] for s in samples]
    warm = rss[1:] or rss
    return {
        "mode": mode,
        "requests": requests,
        "samples": samples,
        "rss_growth_after_warmup_mb": round(max(warm) - warm[0], 1),
    }


def write(path: str, events: int, turns: int) -> dict:
    from inspector.testing.synthetic import generated_stream
    from inspector.tui.export import write_recording

    write_recording(Path(path), generated_stream(events, tool_every=max(1, events // turns)), {"type": "generated"})
    return {"mode": "write", "path": path}


def child(mode: str, args: argparse.Namespace) -> dict:
    if mode == "dashboard":
        return run_dashboard(args.events, args.turns)
    if mode == "replay":
        return run_replay(args.events, args.turns)
    if mode in ("serve", "proxy"):
        return run_server(mode, args.requests)
    if mode == "write":
        return write(args.path, args.events, args.turns)
    raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--only", default="dashboard,replay,serve,proxy")
    ap.add_argument("--child", default="")
    ap.add_argument("--path", default="")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    rows = []
    for mode in args.only.split(","):
        cmd = [sys.executable, __file__, "--child", mode, "--events", str(args.events), "--turns", str(args.turns)]
        cmd += ["--requests", str(args.requests)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            print(f"{mode}: failed\n{out.stderr[-2000:]}")
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(res)
        print(f"\n== {mode}")
        for s in res.get("samples", []):
            print("  ", s)
        print("  ", {k: v for k, v in res.items() if k != "samples"})
    print("\n| mode | size | figure | value | target |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r["mode"] == "dashboard":
            print(f"| dashboard | {r['events']:,} events | RSS at end | {r['rss_end_mb']} MB | < 500 MB |")
            print(
                f"| dashboard | | time travel, max / median | {r['travel_ms_max']} / {r['travel_ms_median']} ms | < 200 ms |"
            )
            print(f"| dashboard | | fold time | {r['fold_s']} s | |")
        elif r["mode"] == "replay":
            print(f"| replay (headless) | {r['events']:,} events | peak RSS | {r['rss_peak_mb']} MB | < 200 MB |")
            print(f"| replay (headless) | | growth after warm-up | {r['rss_growth_after_warmup_mb']} MB | flat |")
        elif r["mode"] in ("serve", "proxy"):
            grew = r["rss_growth_after_warmup_mb"]
            print(f"| {r['mode']} | {r['requests']:,} requests | growth after warm-up | {grew} MB | < 20 MB |")


if __name__ == "__main__":
    main()

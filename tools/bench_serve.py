"""Throughput and first-byte latency of `inspector serve --recording FILE --speed max` with many concurrent clients.

The server runs as its own process (the real CLI, loopback only); the clients are one asyncio process with one
httpx2 connection each. The recording is the bundled weather scenario's first turn, recorded through
`proxy --record`-compatible lines (RecordingWriter). Bounded: every client makes a fixed number of requests.

    python tools/bench_serve.py [--clients 200] [--requests 10] [--scenario weather]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

import httpx2

from inspector.record.recording import RecordingWriter
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render import render_turn

HEADERS = {"x-api-key": "bench-key-not-secret", "anthropic-version": "2023-06-01"}


def write_recording(path: str, scenario: str) -> tuple[int, int]:
    """Turn 0 of a scenario as a recording; returns (reads, body bytes)."""
    sc = get_scenario(scenario)
    plan = render_turn(sc, 0, 0)
    body = {"model": sc.model, "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with RecordingWriter(path, source={"type": "bench"}) as w:
        w.request(0, 0, 0.0, "POST", "http://127.0.0.1/v1/messages", {}, body)
        t = plan.header_delay
        w.response(0, 0, t, plan.status, plan.headers)
        for r in plan.reads:
            t += r.delay
            w.read(0, 0, t, r.data)
        w.end(0, 0, t, "complete")
    return len(plan.reads), len(plan.body)


def start_server(path: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "inspector.cli.serve", "--recording", path, "--speed", "max", "--quiet"]
    cmd += ["--port", "0", "--history", "1000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    assert proc.stdout is not None
    for _ in range(10):  # bounded: the banner is two lines
        line = proc.stdout.readline()
        m = re.match(r"ANTHROPIC_BASE_URL=(\S+)", line.strip())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("serve did not print its address")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def client(
    h: httpx2.AsyncClient, body: dict, n: int, ttfb: list[float], failures: list[str], start: asyncio.Event
) -> None:
    await start.wait()
    for _ in range(n):
        t0 = time.perf_counter()
        first = None
        try:
            async with h.stream("POST", "/v1/messages", json=body) as r:
                async for _chunk in r.aiter_raw():
                    if first is None:
                        first = time.perf_counter() - t0
                if r.status_code != 200:
                    failures.append(str(r.status_code))
                    continue
        except httpx2.HTTPError as e:
            failures.append(type(e).__name__)
            continue
        if first is not None:
            ttfb.append(first)


async def wait_ready(base_url: str) -> None:
    async with httpx2.AsyncClient(base_url=base_url, headers=HEADERS) as h:
        for _ in range(200):  # bounded: the socket is bound before uvicorn accepts
            try:
                await h.get("/v1/models")
                return
            except httpx2.ConnectError:
                await asyncio.sleep(0.05)
    raise RuntimeError("serve did not start")


async def run(base_url: str, clients: int, requests: int, body: dict) -> tuple[float, list[float], list[str]]:
    await wait_ready(base_url)
    ttfb: list[float] = []
    failures: list[str] = []
    tls = ssl.create_default_context()  # one context: building one per client costs ~50 ms of CPU each
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    hs = [
        httpx2.AsyncClient(base_url=base_url, headers=HEADERS, timeout=60, verify=tls, limits=limits)
        for _ in range(clients)
    ]
    try:
        # every client opens its connection first (untimed), so the timed part measures requests, not connects
        await asyncio.gather(*(h.get("/v1/models") for h in hs))
        start = asyncio.Event()
        tasks = [asyncio.ensure_future(client(h, body, requests, ttfb, failures, start)) for h in hs]
        t0 = time.perf_counter()
        start.set()
        await asyncio.gather(*tasks)
        return time.perf_counter() - t0, ttfb, failures
    finally:
        await asyncio.gather(*(h.aclose() for h in hs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=10, help="requests per client (default 10)")
    ap.add_argument("--scenario", default="weather")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.jsonl")
        reads, size = write_recording(path, a.scenario)
        sc = get_scenario(a.scenario)
        body = {"model": sc.model, "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        proc, url = start_server(path)
        try:
            cpu0 = cpu_seconds(proc.pid)
            elapsed, ttfb, failures = asyncio.run(run(url, a.clients, a.requests, body))
            server_cpu = cpu_seconds(proc.pid) - cpu0
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    done = len(ttfb)
    q = statistics.quantiles(ttfb, n=100) if len(ttfb) >= 2 else [float("nan")] * 99
    print(f"serve --recording ({a.scenario} turn 1: {reads} reads, {size} bytes) at max speed, loopback")
    print("| clients | requests | ok | failed | seconds | req/s | first byte p50 | p90 | p99 | server CPU/request |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {a.clients} | {a.clients * a.requests} | {done} | {len(failures)} | {elapsed:.2f} | "
        f"{done / elapsed:.0f} | {statistics.median(ttfb) * 1000:.1f} ms | {q[89] * 1000:.1f} ms | "
        f"{q[98] * 1000:.1f} ms | {server_cpu / max(1, done) * 1000:.2f} ms |"
    )
    print("(connections opened before the clock starts; clients and server share the machine's cores)")
    if failures:
        print("failures:", ", ".join(sorted(set(failures))))


if __name__ == "__main__":
    main()

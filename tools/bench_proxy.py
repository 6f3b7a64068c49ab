"""First-byte latency added by `inspector proxy`: the same streamed request straight to `inspector serve` and
through the proxy in front of it, measured side by side in one run (loopback, upstream at max speed).

    python tools/bench_proxy.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time

import httpx2

from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer

BODY = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def ttfb(client: httpx2.AsyncClient, session: str) -> float:
    t0 = time.perf_counter()
    async with client.stream(
        "POST", "/v1/messages", json=BODY, headers={"x-inspector-session": session, "x-api-key": "bench-key-not-secret"}
    ) as r:
        async for _ in r.aiter_raw():
            return time.perf_counter() - t0
    raise RuntimeError("no body")


async def main(runs: int) -> None:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as up, BackgroundServer(ProxyApp(up.base_url)) as px:
        async with (
            httpx2.AsyncClient(base_url=up.base_url) as direct,
            httpx2.AsyncClient(base_url=px.base_url) as proxied,
        ):
            for i in range(3):  # warm both connection pools
                await ttfb(direct, f"warm-d{i}")
                await ttfb(proxied, f"warm-p{i}")
            d, p = [], []
            for i in range(runs):  # interleaved, so a busy spell of the machine hits both alike
                d.append(await ttfb(direct, f"d{i}"))
                p.append(await ttfb(proxied, f"p{i}"))
    md, mp = statistics.median(d), statistics.median(p)
    q = lambda xs: statistics.quantiles(xs, n=100)[98] * 1000
    print(
        f"first byte over {runs} runs: direct median {md * 1000:.2f} ms (p99 {q(d):.2f}), "
        f"via proxy median {mp * 1000:.2f} ms (p99 {q(p):.2f})"
    )
    print(f"added by the proxy: {(mp - md) * 1000:.2f} ms at the median")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    asyncio.run(main(ap.parse_args().runs))

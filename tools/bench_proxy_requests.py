"""What the proxy's bookkeeping costs per request, in process (no sockets, no other process competing): C
conversations of T turns each (a tool call per turn; the history grows by two messages a turn, as an agent's does)
forwarded by `ProxyApp` from an in-memory upstream, with a client key known (every observation goes through the
redacting publisher's masking path), CPU time per request, best of N runs.

    python tools/bench_proxy_requests.py [--conversations 10] [--turns 20] [--runs 5] [--keys 1,300] [--json]
                                         [--compare OTHER_TREE [--rounds 3]]

``--keys K,...``: the same with K distinct keys learned first (K - 1 other clients' keys, one request each, before
the measured ones): the cost per request should not grow with the keys the proxy knows (it did: every string was
masked once per key, +1.3 ms a request with 300).

Modes: forwarding only (no recording, no bus); a recording (the Recorder on the proxy's bus); a watcher's bus
(every observation) and a recording. ``--compare``: the same figures from another checkout (e.g. the code before a
change), run in a subprocess of its own, in rounds interleaved with this tree's (the best round of each). Also prints the CPU of the last turns against the first ones (``late /
early``): the issue asks that the proxy's CPU per request stays flat as histories grow. Takes a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson
from bench_proxy_obs import post  # (tools/ is on the path when a bench runs as a script)

from inspector.net.proxy import ProxyApp
from inspector.observe import observations as O
from inspector.testing.streamgen import sse, tool_turn

KEY = "sk-ant-api03-BENCH-requests-0123456789abcdefghij"
TOOLS = [{"name": "step", "description": "One step.", "input_schema": {"type": "object", "properties": {}}}]


def answer(turn: int) -> bytes:
    return sse(*tool_turn(['{"n": ', f"{turn}}}"], name="step", id=f"toolu_{turn:04d}"))


async def run(conversations: int, turns: int, record: bool, bus: bool, keys: int = 1) -> list[list[float]]:
    """CPU seconds of each request, per conversation and turn (``keys``: distinct keys learned before)."""

    class Body(httpx2.AsyncByteStream):
        def __init__(self, data: bytes) -> None:
            self.data = data

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            yield self.data

    def handler(request: httpx2.Request) -> httpx2.Response:
        turn = len(orjson.loads(request.content)["messages"]) // 2
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body(answer(turn)))

    proxy = ProxyApp(
        "http://up.test",
        transport=httpx2.MockTransport(handler),
        record=io.BytesIO() if record else None,
        bus=O.ObservationBus() if bus else None,
    )
    hello = orjson.dumps(
        {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    )
    for k in range(keys - 1):  # other clients' keys, one request each
        await post(proxy, hello, f"sk-ant-api03-BENCH-other-{k:04d}-{'x' * 80}")
    out: list[list[float]] = []
    for c in range(conversations):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"conversation {c}: take {turns} steps"}]
        times: list[float] = []
        for turn in range(turns):
            body = orjson.dumps({"model": "m", "max_tokens": 256, "stream": True, "tools": TOOLS, "messages": messages})
            t = time.process_time()
            await post(proxy, body, KEY)
            times.append(time.process_time() - t)
            tid = f"toolu_{turn:04d}"
            messages = [
                *messages,
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": tid, "name": "step", "input": {"n": turn}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": "done " * 20}]},
            ]
        out.append(times)
    proxy.close()
    await proxy.aclose()
    return out


async def measure(conversations: int, turns: int, runs: int, keys: list[int]) -> dict[str, dict[str, float]]:
    res: dict[str, dict[str, float]] = {}
    await run(2, turns, True, True, 2)  # (a warm-up: the first requests of a process pay for its caches)
    modes = (("forward", False, False), ("recording", True, False), ("bus+recording", True, True))
    for (label, record, bus), nkeys in [(m, n) for n in keys for m in modes]:
        best: list[list[float]] | None = None
        for _ in range(runs):
            got = await run(conversations, turns, record, bus, nkeys)
            if best is None or sum(map(sum, got)) < sum(map(sum, best)):
                best = got
        assert best is not None
        n = conversations * turns
        k = max(1, turns // 4)
        early = sum(t for conv in best for t in conv[:k]) / (conversations * k)
        late = sum(t for conv in best for t in conv[-k:]) / (conversations * k)
        res[f"{label}, {nkeys} key{'s' if nkeys > 1 else ''}"] = {
            "ms_per_request": round(sum(map(sum, best)) / n * 1e3, 3),
            "early_ms": round(early * 1e3, 3),
            "late_ms": round(late * 1e3, 3),
            "late_over_early": round(late / early, 2) if early else float("nan"),
        }
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keys", default="1", help="distinct keys learned first, comma-separated (e.g. 1,300)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--compare", metavar="OTHER_TREE")
    ap.add_argument("--rounds", type=int, default=3, help="with --compare: rounds of both trees, interleaved")
    a = ap.parse_args()
    keys = [int(k) for k in a.keys.split(",")]
    rounds: dict[str, list[dict[str, dict[str, float]]]] = {"this": [], "compare": []}
    for _ in range(a.rounds if a.compare else 1):  # interleaved: a machine's load changes from minute to minute
        rounds["this"].append(asyncio.run(measure(a.conversations, a.turns, a.runs, keys)))
        if a.compare:
            argv = [sys.executable, str(Path(__file__).resolve()), "--json", "--conversations", str(a.conversations)]
            argv += ["--turns", str(a.turns), "--runs", str(a.runs), "--keys", a.keys]
            env = dict(os.environ, PYTHONPATH=str(Path(a.compare).resolve()))
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=True)
            rounds["compare"].append(json.loads(done.stdout)["this"])
    res = {
        tree: {mode: min((r[mode] for r in got), key=lambda x: x["ms_per_request"]) for mode in got[0]}
        for tree, got in rounds.items()
        if got
    }
    if a.json:
        print(json.dumps(res))
        return
    print(f"{a.conversations} conversations x {a.turns} turns; CPU per request, best of {a.runs}")
    for tree, rows in res.items():
        for label, r in rows.items():
            print(
                f"  {tree:8} {label:26} {r['ms_per_request']:7.3f} ms/request   first turns {r['early_ms']:.3f} ms,"
                f" last turns {r['late_ms']:.3f} ms (x{r['late_over_early']})"
            )


if __name__ == "__main__":
    main()

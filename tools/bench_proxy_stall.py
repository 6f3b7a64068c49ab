"""How long one large request body stalls the proxy's event loop: while the proxy handles a 16 MiB request (parse,
conversation grouping, digests, key learning, redaction, recording), does another client's stream through the same
proxy keep flowing?

    python tools/bench_proxy_stall.py [--mib 16] [--shape code|plain|all] [--runs 3] [--json]
                                      [--compare OTHER_TREE]

A real proxy (uvicorn on loopback, a recording and a watcher's bus; a process of its own) in front of a loopback
upstream (another process). Client B
streams from upstream, which sends an SSE event every 2 ms; once B's stream flows, client A posts a large body.
Measured on the proxy's own loop: a probe task that wakes every 0.5 ms records the longest gap between two wake-ups
while A is handled (the longest loop stall), and B's longest gap between two chunks as it receives them. Shapes:
``code``: an agent's history of file reads (source code: a backslash every few characters, JSON-escaped in the
body), a cache_control mark and a thinking block in every turn; ``plain``: the same number of turns of prose.
``--compare``: the same in a subprocess on another checkout (the code before a change). Takes ~10 s a shape.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson

from inspector.net.proxy import ProxyApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O

KEY = "sk-ant-api03-BENCH-stall-0123456789abcdefghij"
DRIP_S = 0.002  # upstream's pace for client B: an event every 2 ms
CODE = 'def f(x):\n    return re.sub(r"\\s+", "\\n", x)  # "quoted" \\ path C:\\Users\\n\n' * 40
PROSE = "The quick brown fox jumps over the lazy dog, and then it rests a while in the sun. " * 30


def body(mib: int, shape: str) -> bytes:
    """A Messages request of about ``mib`` MiB: turns of tool calls and results (``shape``: code or plain)."""
    text = CODE if shape == "code" else PROSE
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    i = size = 0
    while size < mib << 20:
        assistant: list[dict[str, Any]] = [{"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"p": i}}]
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
        if shape == "code":
            assistant.insert(0, {"type": "thinking", "thinking": "hmm", "signature": "c2ln"})
            result["cache_control"] = {"type": "ephemeral"}
        messages += [{"role": "assistant", "content": assistant}, {"role": "user", "content": [result]}]
        size += len(orjson.dumps(text)) + 200
        i += 1
    return orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": messages})


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Streams a short text answer; with ``x-drip: N``, N text deltas 2 ms apart."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    drip = int(dict(scope["headers"]).get(b"x-drip", b"0"))
    gone = asyncio.ensure_future(receive())  # (the client leaving: http.disconnect)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {}}
    head = _sse("message_start", {"message": msg}) + _sse(
        "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
    )
    await send({"type": "http.response.body", "body": head, "more_body": True})
    for k in range(max(1, drip)):
        delta = _sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f"w{k} "}})
        await send({"type": "http.response.body", "body": delta, "more_body": True})
        if drip:
            await asyncio.sleep(DRIP_S)
            if gone.done():
                return
    tail = _sse("content_block_stop", {"index": 0}) + _sse("message_delta", {"delta": {"stop_reason": "end_turn"}})
    await send({"type": "http.response.body", "body": tail + _sse("message_stop", {}), "more_body": False})
    gone.cancel()


def serve(role: str, upstream: str | None) -> None:
    """A process of its own (so that no other thread of the bench takes the proxy's GIL): upstream, or the proxy
    with a recording, a watcher's bus and the probe on its loop. Prints its URL; the proxy then reads a window
    ``t0 t1`` (monotonic seconds, one clock for every process) and prints the longest gap of its probe in it."""
    if role == "upstream":
        with BackgroundServer(upstream_app) as up:
            print(up.base_url, flush=True)
            sys.stdin.readline()
        return
    assert upstream is not None
    wakes: list[float] = []
    loops: list[asyncio.AbstractEventLoop] = []

    def loop_factory() -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        return loop

    async def probe() -> None:
        while True:
            wakes.append(time.monotonic())
            await asyncio.sleep(0.0005)

    with tempfile.TemporaryDirectory() as tmp:
        proxy = ProxyApp(upstream, record=Path(tmp) / "stall.jsonl", bus=O.ObservationBus())
        with BackgroundServer(proxy, loop_factory=loop_factory) as px:
            task = asyncio.run_coroutine_threadsafe(probe(), loops[0])
            print(px.base_url, flush=True)
            t0, t1 = map(float, sys.stdin.readline().split())
            loops[0].call_soon_threadsafe(task.cancel)
        proxy.close()
    gaps = [b - a for a, b in zip(wakes, wakes[1:], strict=False) if a >= t0 and b <= t1]
    print(json.dumps({"longest_loop_stall_ms": round(max(gaps, default=0.0) * 1e3, 1)}), flush=True)


def _spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def measure(mib: int, shape: str) -> dict[str, float]:
    big = body(mib, shape)
    up, up_url = _spawn("--role", "upstream")
    px, px_url = _spawn("--role", "proxy", "--upstream", up_url)
    try:
        t0, t1, chunks = asyncio.run(_clients(px_url, big))
        assert px.stdin is not None and px.stdout is not None
        px.stdin.write(f"{t0} {t1}\n")
        px.stdin.flush()
        stall = json.loads(px.stdout.readline())
    finally:
        for proc in (px, up):
            if proc.poll() is None:
                proc.communicate("\n", timeout=30)
    b_gaps = [b - a for a, b in zip(chunks, chunks[1:], strict=False) if a >= t0 and b <= t1]
    return {
        "body_mib": round(len(big) / (1 << 20), 1),
        "handled_s": round(t1 - t0, 3),
        **stall,
        "stream_b_longest_gap_ms": round(max(b_gaps, default=0.0) * 1e3, 1),
        "stream_b_chunks_meanwhile": float(sum(1 for c in chunks if t0 <= c <= t1)),
    }


async def _clients(base: str, big: bytes) -> tuple[float, float, list[float]]:
    """Client B's stream (chunk arrival times) and, once it flows, client A's large request (its start and end)."""
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    small = orjson.dumps(
        {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "b"}]}
    )
    chunks: list[float] = []
    flowing = asyncio.Event()
    done = threading.Event()
    async with (
        httpx2.AsyncClient(base_url=base, timeout=120) as b_client,
        httpx2.AsyncClient(base_url=base, timeout=120) as a_client,
    ):

        async def stream_b() -> None:
            async with b_client.stream(
                "POST", "/v1/messages", content=small, headers={**headers, "x-drip": "100000"}
            ) as r:
                async for _ in r.aiter_raw():
                    chunks.append(time.monotonic())
                    if len(chunks) > 20:
                        flowing.set()
                    if done.is_set():
                        return

        task = asyncio.ensure_future(stream_b())
        await flowing.wait()
        t0 = time.monotonic()
        r = await a_client.post("/v1/messages", content=big, headers=headers)
        r.raise_for_status()
        t1 = time.monotonic()
        done.set()
        await task
    return t0, t1, chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--shape", choices=("code", "plain", "all"), default="all")
    ap.add_argument("--runs", type=int, default=3, help="the run with the shortest stall is kept (a busy machine)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--compare", metavar="OTHER_TREE")
    ap.add_argument("--role", choices=("upstream", "proxy"), help=argparse.SUPPRESS)
    ap.add_argument("--upstream", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role:
        serve(a.role, a.upstream)
        return
    shapes = ("code", "plain") if a.shape == "all" else (a.shape,)
    res: dict[str, dict[str, dict[str, float]]] = {"this": {}}
    for shape in shapes:
        runs = [measure(a.mib, shape) for _ in range(a.runs)]
        res["this"][shape] = min(runs, key=lambda r: r["longest_loop_stall_ms"])
    if a.compare:
        argv = [sys.executable, str(Path(__file__).resolve()), "--json", "--mib", str(a.mib), "--shape", a.shape]
        env = dict(os.environ, PYTHONPATH=str(Path(a.compare).resolve()))
        done = subprocess.run(argv + ["--runs", str(a.runs)], env=env, capture_output=True, text=True, check=True)
        res["compare"] = json.loads(done.stdout)["this"]
    if a.json:
        print(json.dumps(res))
        return
    print(f"a {a.mib} MiB request while another stream flows (an event every {DRIP_S * 1e3:g} ms); best of {a.runs}")
    for tree, rows in res.items():
        for shape, r in rows.items():
            print(
                f"  {tree:8} {shape:6} body {r['body_mib']} MiB handled in {r['handled_s']:.2f} s: longest loop stall"
                f" {r['longest_loop_stall_ms']:7.1f} ms, stream B's longest gap {r['stream_b_longest_gap_ms']:7.1f} ms"
                f" ({r['stream_b_chunks_meanwhile']:.0f} chunks meanwhile)"
            )


if __name__ == "__main__":
    main()

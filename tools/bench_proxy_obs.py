"""What the proxy's bookkeeping costs per read, in process (no sockets): one stream of many small reads forwarded by
`ProxyApp` from an in-memory upstream, with a client key known (so every observation goes through the redacting
publisher's masking path), CPU time of the whole exchange, best of N.

    python tools/bench_proxy_obs.py [--deltas 6000] [--runs 5]

Modes: no recording and no bus (forwarding and turn numbering only); a recording (the Recorder on the proxy's bus:
reads, attempts and tools, no event observations); a watcher's bus (every observation, as the dashboard gets them);
both. Takes a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import time

import httpx2
import orjson

from inspector.net.proxy import ProxyApp
from inspector.observe import observations as O
from inspector.testing.streamgen import (
    block_stop,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
)

KEY = "sk-ant-api03-BENCH-proxy-0123456789abcdefghij"


def stream(deltas: int) -> list[bytes]:
    body = sse(
        message_start(), text_start(0), *[text_delta(0, f"word{i} ") for i in range(deltas)], block_stop(0),
        message_delta("end_turn"), message_stop(),
    )  # fmt: skip
    return [e + b"\n\n" for e in body.split(b"\n\n") if e]  # one read per event


async def post(proxy: ProxyApp, body: bytes, key: str) -> None:
    """One POST /v1/messages with ``body`` and the key, straight into the proxy's ASGI handler (no socket); the
    client stays connected until the answer is over, and what the proxy sends it is dropped."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"x-api-key", key.encode())],
    }
    sent = asyncio.Event()

    async def receive() -> dict:
        if sent.is_set():
            await asyncio.Event().wait()  # the client stays
        sent.set()
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        pass

    await proxy(scope, receive, send)  # (the ASGI entry: an exchange holds its keys in use while it lasts)


async def one(chunks: list[bytes], record: bool, bus: bool) -> float:
    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self):
            for c in chunks:
                yield c

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    proxy = ProxyApp(
        "http://up.test",
        transport=httpx2.MockTransport(handler),
        record=io.BytesIO() if record else None,
        bus=O.ObservationBus() if bus else None,
    )
    req = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    t = time.process_time()
    await post(proxy, req, KEY)
    proxy.close()
    elapsed = time.process_time() - t
    await proxy.aclose()
    return elapsed


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deltas", type=int, default=6000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    chunks = stream(args.deltas)
    print(f"one stream of {len(chunks)} reads, a key known; CPU, best of {args.runs}")
    for label, record, bus in (
        ("forward only", False, False),
        ("recording", True, False),
        ("bus", False, True),
        ("bus+recording", True, True),
    ):
        best = min([await one(chunks, record, bus) for _ in range(args.runs)])
        print(f"  {label:14} {best * 1e3:7.0f} ms   {best / len(chunks) * 1e6:6.1f} us/read")


if __name__ == "__main__":
    asyncio.run(main())

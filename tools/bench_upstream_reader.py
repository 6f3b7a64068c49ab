"""CPU of the proxy's upstream reader (inspector/net/upstream.py) per network read, in process, no sockets: a chunked
SSE answer of ``--reads`` chunks (default 11,600, the size of bench_proxy's many-reads stream), one chunk per
``data_received`` call, taken as the forwarding task takes it. Quick (a few seconds); compare two trees with
``--module``::

    python tools/bench_upstream_reader.py [--reads 11600] [--repeat 5] [--module path/to/upstream.py]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import time
from types import ModuleType


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default=None):
        return default


def _load(path: str | None) -> ModuleType:
    if path is None:
        from inspector.net import upstream

        return upstream
    spec = importlib.util.spec_from_file_location("upstream_under_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EVENT = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":"word "}}\n\n'
)


def _reads(n: int) -> list[bytes]:
    event = EVENT
    chunk = b"%x\r\n" % len(event) + event + b"\r\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return [head] + [chunk] * n + [b"0\r\n\r\n"]


async def _one(U: ModuleType, reads: list[bytes]) -> float:
    pool = U.UpstreamPool("http://upstream.test")
    conn = U._Connection(pool)
    conn.connection_made(_Transport())
    fut = conn.start(b"", b"", b"POST")
    t = time.process_time()
    conn.data_received(reads[0])
    resp = fut.result()
    got = 0
    for r in reads[1:]:
        conn.data_received(r)
        for _, d in resp.take():
            got += len(d)
    elapsed = time.process_time() - t
    assert conn.body_done and got == (len(reads) - 2) * len(EVENT), got
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=11_600)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--module", help="another upstream.py to measure (default: this tree's)")
    args = ap.parse_args()
    U = _load(args.module)
    reads = _reads(args.reads)
    runs = [asyncio.run(_one(U, reads)) for _ in range(args.repeat)]
    best, med = min(runs), statistics.median(runs)
    per = med / args.reads * 1e6
    print(f"{args.reads} reads: CPU best {best * 1e3:.1f} ms, median {med * 1e3:.1f} ms ({per:.2f} us/read)")


if __name__ == "__main__":
    main()

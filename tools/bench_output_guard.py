"""Benchmark: what the output guard costs on stdout (text and .buffer), with no secret known, one, and ten.

    PYTHONPATH=. python tools/bench_output_guard.py            # 100k lines
    PYTHONPATH=. python tools/bench_output_guard.py --lines 10000

Lines like `dump --events --json` writes (JSON, some with backslash escapes, some ending in "s", which could begin a
key and is held until the next write) go through the guard's stand-ins in front of in-memory streams. Prints MB/s
and µs per line; without a secret the guard only passes the writes on.
"""

from __future__ import annotations

import argparse
import io
import time

from inspector.core.redaction import PROCESS_SECRETS, _Masking


def lines(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        text = f"chunk {i} of the answer" + (" \\u00e9t\\u00e9" if i % 3 == 0 else "") + ("s" if i % 5 == 0 else "")
        out.append(
            b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"' + text.encode() + b'"}}\n'
        )
    return out


def run(data: list[bytes], n_secrets: int) -> tuple[float, float]:
    import threading

    saved = list(PROCESS_SECRETS.secrets)
    PROCESS_SECRETS.__init__([f"sk-ant-api03-bench-{k:02d}-Zq8VxW3kLm0pRt7uYb2NcE5hJf9" for k in range(n_secrets)])
    try:
        inner = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        guard = _Masking(inner, threading.RLock())
        out = guard.buffer
        text = [d.decode() for d in data]
        t0 = time.perf_counter()
        for d in data:
            out.write(d)
        t_bytes = time.perf_counter() - t0
        t0 = time.perf_counter()
        for t in text:
            guard.write(t)
        t_text = time.perf_counter() - t0
        guard.flush()
        return t_bytes, t_text
    finally:
        PROCESS_SECRETS.__init__(saved)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=100_000)
    args = p.parse_args()
    data = lines(args.lines)
    size = sum(map(len, data)) / 1e6
    print(f"{args.lines} lines, {size:.1f} MB")
    for n in (0, 1, 10):
        tb, tt = run(data, n)
        print(
            f"secrets {n:>2}: .buffer {size / tb:7.1f} MB/s ({tb / args.lines * 1e6:5.2f} µs/line)   "
            f"text {size / tt:7.1f} MB/s ({tt / args.lines * 1e6:5.2f} µs/line)"
        )


if __name__ == "__main__":
    main()

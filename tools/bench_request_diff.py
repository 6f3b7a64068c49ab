"""Benchmark: `serve --recording`'s request diff on a long conversation (issue 19 §3: a 16k-message request took 33 s,
on the event loop).

    PYTHONPATH=. python tools/bench_request_diff.py                # 16,000 messages
    PYTHONPATH=. python tools/bench_request_diff.py --messages 2000

Times ``request_diff`` (the summary and the unified diff of a window around the first difference) for a difference
near the start, in the middle and at the end, and for an equal request. Target: each under 0.5 s (serve runs it in
a worker thread anyway, within a 2 s budget).
"""

from __future__ import annotations

import argparse
import time

from inspector.net.recorded import request_diff


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--messages", type=int, default=16_000)
    n = p.parse_args().messages
    recorded = {
        "model": "claude-sonnet-4-6",
        "system": "s" * 2000,
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 200} for i in range(n)
        ],
    }
    for where in ("equal", 1, n // 2, n - 1):
        got = {**recorded, "messages": list(recorded["messages"])}
        if where != "equal":
            got["messages"][where] = {"role": "user", "content": "changed"}
        t0 = time.perf_counter()
        differs, lines = request_diff(recorded, got)
        dt = time.perf_counter() - t0
        print(f"{n} messages, difference at {where}: {dt * 1000:.0f} ms, {len(lines)} lines ({differs})")


if __name__ == "__main__":
    main()

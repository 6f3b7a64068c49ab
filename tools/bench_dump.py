"""Benchmark: peak memory of `inspector dump` on big and hostile inputs.

    PYTHONPATH=. python tools/bench_dump.py              # 200 MB inputs
    PYTHONPATH=. python tools/bench_dump.py --size 20    # smaller, for a smoke test

Each `dump` runs as a subprocess of a fresh wrapper process, which reports the peak RSS of its children
(`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`). Inputs:
  random      random bytes (read as plain SSE: one or two diagnostics per line, kept to 1000 + a count)
  recording   a valid recording (JSON Lines) of one long text turn, in 4 KiB reads
  damaged     a recording header followed by random bytes (one warning per line: kept to 1000 + a count)
  plain sse   a valid plain SSE file of one long text turn
  /dev/zero   `head -c SIZE /dev/zero | inspector dump -` (one endless line: cut at the line limit, reading stops)
Target: peak RSS <= 2 x input size + 100 MB on every input.

    PYTHONPATH=. python tools/bench_dump.py --vs-sdk 512   # whole-process time: dump vs the SDK's accumulation

`--vs-sdk KB`: one tool_use input of KB kilobytes in 20-byte input_json_delta fragments, as a plain SSE file. Timed as
whole processes (start-up included; CPU time of the process, best of 3 runs): `inspector dump FILE --json` against a Python process
that decodes the same file with the SDK's own SSE decoder and folds it with its `accumulate_event`.
Target (issue 17): dump >= 20x faster than the SDK's accumulation at 512 KB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from inspector.record.recording import RecordingWriter

MB = 1024 * 1024

WRAPPER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1], shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def text_events(size: int) -> bytes:
    """A plain SSE text turn of about `size` bytes (built as bytes, quickly)."""
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_b","type":"message","role":'
        b'"assistant","model":"claude-bench","content":[],"stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    end = (
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":{"output_tokens":99}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    words = [b"stream ", b"inspector ", b"delta ", b"bench ", b"memory ", b"tokens "]
    deltas = [
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"' + w * 3 + b'"}}\n\n'
        for w in words
    ]
    block = b"".join(deltas)
    n = max(1, (size - len(start) - len(end)) // len(block))
    return start + block * n + end


def make_inputs(directory: Path, size: int) -> list[tuple[str, str, int]]:
    """(name, shell command, input size)."""
    py = f"{sys.executable} -m inspector dump"
    rnd = directory / "random.bin"
    with open(rnd, "wb") as f:
        for _ in range(size // MB):
            f.write(os.urandom(MB))
    damaged = directory / "damaged.jsonl"  # a recording header, then random bytes: one warning per "line"
    with open(damaged, "wb") as f:
        f.write(b'{"kind":"header","format":"stream-inspector-recording","version":1,"source":{}}\n')
        with open(rnd, "rb") as r:
            while chunk := r.read(MB):
                f.write(chunk)
    plain = directory / "plain.sse"
    data = text_events(size)
    plain.write_bytes(data)
    rec = directory / "recording.jsonl"
    with RecordingWriter(rec, source={"type": "bench"}) as w:
        w.request(0, 0, 0.0, "POST", "http://bench/v1/messages", {}, {"model": "m", "stream": True})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        # a recording's lines are bigger than the SSE they hold (JSON escaping): aim at `size` bytes of file
        sse = text_events(int(size / 1.3))
        for i in range(0, len(sse), 4096):
            w.read(0, 0, 0.2 + i / 1e9, sse[i : i + 4096])
        w.end(0, 0, 9.0, "complete")
    del data, sse
    return [
        ("random", f"{py} {rnd}", rnd.stat().st_size),
        ("recording", f"{py} {rec} --json", rec.stat().st_size),
        ("damaged", f"{py} {damaged}", damaged.stat().st_size),
        ("plain sse", f"{py} {plain}", plain.stat().st_size),
        ("/dev/zero", f"head -c {size} /dev/zero | {py} -", size),
    ]


def measure(command: str) -> tuple[int, int, float]:
    """(exit code, peak RSS in bytes, seconds) of the command, run under a fresh wrapper."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAPPER, command], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t0
    code, rss_kb = out.stdout.split()
    return int(code), int(rss_kb) * 1024, elapsed


def redactor_throughput() -> list[tuple[str, int, float]]:
    """StreamRedactor (what RecordingWriter runs every read through when it has secrets) on 6 MB streams."""
    from inspector.core.redaction import StreamRedactor
    from inspector.testing.streamgen import big_tool_stream, text_stream

    rows = []
    for name, data in (("text", text_stream(50_000).data), ("tool input", big_tool_stream(1_000_000).data)):
        r = StreamRedactor(["sk-ant-api03-" + "x" * 95])
        t0 = time.perf_counter()
        out = b"".join(r.feed(data[i : i + 4096]) for i in range(0, len(data), 4096)) + r.flush()
        elapsed = time.perf_counter() - t0
        assert out == data
        rows.append((name, len(data), elapsed))
    return rows


SDK_ACCUMULATE = """
import sys, json
from anthropic._streaming import SSEDecoder
from anthropic._models import construct_type
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
with open(sys.argv[1], "rb") as f:
    data = f.read()
snapshot, bufs = None, {}
for sse in SSEDecoder().iter_bytes(iter([data])):
    if sse.event == "ping":
        continue
    ev = construct_type(type_=RawMessageStreamEvent, value=json.loads(sse.data))
    snapshot = accumulate_event(event=ev, current_snapshot=snapshot, json_bufs=bufs)
print(len(snapshot.content))
"""


def best_cpu(argv: list[str], runs: int = 3) -> float:
    """Best CPU time (user + system, of the child process: other work on a shared machine counts less) of `runs`."""
    import resource

    best = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def vs_sdk(kb: int) -> int:
    """Whole-process time of `inspector dump --json` vs the SDK's decoder + accumulate_event on one tool input."""
    from inspector.testing.streamgen import big_tool_stream

    with tempfile.TemporaryDirectory(prefix="bench-dump-sdk-") as tmp:
        path = Path(tmp) / "tool.sse"
        path.write_bytes(big_tool_stream(kb * 1024, fragment=20).data)
        nbytes = path.stat().st_size
        ours = best_cpu([sys.executable, "-m", "inspector", "dump", str(path), "--json"])
        sdk = best_cpu([sys.executable, "-c", SDK_ACCUMULATE, str(path)], runs=1)
    print(
        f"{kb} KB tool input ({nbytes:,} bytes of SSE): dump {ours:.2f} s, "
        f"SDK accumulation {sdk:.2f} s (whole processes): {sdk / ours:.1f}x (target >= 20x)"
    )
    return 0 if sdk / ours >= 20 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=200, help="input size in MB (default 200)")
    ap.add_argument("--vs-sdk", type=int, metavar="KB", help="only the whole-process comparison with the SDK")
    args = ap.parse_args()
    if args.vs_sdk:
        return vs_sdk(args.vs_sdk)
    size = args.size * MB
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dump-") as tmp:
        for name, command, n in make_inputs(Path(tmp), size):
            code, rss, elapsed = measure(command)
            limit = 2 * n + 100 * MB
            rows.append((name, n, rss, elapsed, code, limit, rss <= limit))
    print(f"{'input':<10} {'size':>9} {'peak RSS':>9} {'time':>8} {'exit':>4} {'limit':>9}  met?")
    for name, n, rss, elapsed, code, limit, ok in rows:
        print(
            f"{name:<10} {n / MB:>6.0f} MB {rss / MB:>6.0f} MB {elapsed:>6.1f} s {code:>4} {limit / MB:>6.0f} MB"
            f"  {'yes' if ok else 'NO'}"
        )
    print()
    print(f"{'redactor':<10} {'size':>9} {'time':>8} {'MB/s':>6}")
    for name, n, elapsed in redactor_throughput():
        print(f"{name:<10} {n / MB:>6.1f} MB {elapsed:>6.2f} s {n / MB / elapsed:>6.1f}")
    print(
        orjson.dumps(
            [dict(zip(("input", "size", "rss", "seconds", "exit", "limit", "met"), r, strict=True)) for r in rows]
        ).decode()
    )
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

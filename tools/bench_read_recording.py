"""Benchmark: the recording reader on a 100k-line recording (the hot path of `dump`, `replay` and the dashboard's
replay), with the lines validated against their declaration (inspector/record/format.py).

    PYTHONPATH=. python tools/bench_read_recording.py                # 100k lines, best CPU time of 5 runs
    PYTHONPATH=. python tools/bench_read_recording.py --lines 20000

The recording is written with RecordingWriter: 1000 attempts, each a request (with a body of 4 messages), a
response, 96 reads of about 200 bytes of SSE (every 8th invalid UTF-8, so stored as "b64"), an end and an obs
line: 100 lines an attempt. Timed: `read_recording(path, keep_reads=False, on_read=...)` as `dump` calls it. The
figure to watch is the time per line; the lines of rare kinds (all but `read`) are validated through the pydantic
model, the `read` lines through the checks compiled from the same declaration.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

from inspector.record.recording import RecordingWriter, read_recording

READ = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"the quick brown fox jumps over the lazy dog, again and again"}}\n\n'
)


def write(path: Path, lines: int) -> int:
    attempts = max(1, lines // 100)
    with RecordingWriter(path, source={"type": "bench"}) as w:
        for n in range(attempts):
            body = {"model": "claude-bench", "max_tokens": 1024, "stream": True}
            body["messages"] = [{"role": "user", "content": f"message {i}"} for i in range(4)]
            w.request(n, 0, n * 1.0, "POST", "http://127.0.0.1/v1/messages", {"content-type": "json"}, body)
            w.response(n, 0, 0.01, 200, {"content-type": "text/event-stream"})
            for i in range(96):
                w.read(n, 0, 0.01 + i * 0.001, READ[:-1] + b"\xff" if i % 8 == 7 else READ)
            w.end(n, 0, 0.2, "complete")
            w.observation({"type": "tool_state", "id": f"t{n}", "name": "bench", "state": "done", "t": n + 0.5})
        return w.lines_written


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        lines = write(path, args.lines)
        best = float("inf")
        reads = 0
        for _ in range(args.runs):
            seen: list[int] = []
            t0 = cpu()
            rec = read_recording(path, keep_reads=False, on_read=lambda a, r, seen=seen: seen.append(len(r.data)))
            best = min(best, cpu() - t0)
            reads = len(seen)
            assert not rec.warnings, rec.warnings[:3]
        size = path.stat().st_size
    print(
        f"{lines} lines ({size / 1e6:.1f} MB, {reads} reads): best {best * 1000:.0f} ms of {args.runs} runs, "
        f"{best / lines * 1e6:.2f} us a line, {size / best / 1e6:.0f} MB/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

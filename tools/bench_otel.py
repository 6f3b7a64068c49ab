"""What `--otel` costs per event: a generated recording replayed headless at max speed through the loop's observation
pipeline, with and without the OpenTelemetry sink exporting over OTLP/HTTP to a loopback receiver that accepts and
discards (and, a third run, to a collector that is down: a closed port).

    .venv/bin/python tools/bench_otel.py [--events 20000] [--runs 3]

Each run is a fresh subprocess; its CPU time (user + system, from getrusage) covers the replay and, with --otel, the
batch processor's thread and the final flush. Reported: CPU per event off / on / collector down, the added CPU per
event, and the ratio. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, json, math, resource, sys, time
from inspector.sessions import sources
from inspector.observe import observations as O

path, mode, endpoint = sys.argv[1], sys.argv[2], sys.argv[3]
session = sources.replay_session(path, speed=math.inf)
seen = [0]
session.bus.subscribe(lambda o: seen.__setitem__(0, seen[0] + (type(o) is O.SSEEventSeen)))
close = None
if mode != "off":
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from inspector.record import otel
    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=endpoint, timeout=2))
    close = otel.attach(session.bus, provider=provider, conversation="bench")
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
asyncio.run(session.run())
if close is not None:
    close()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                  "wall": time.perf_counter() - t0, "events": seen[0]}))
"""


class Sink(BaseHTTPRequestHandler):
    count = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.count += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a: object) -> None:
        pass


def make_recording(path: Path, events: int) -> None:
    sys.path.insert(0, str(ROOT))
    from inspector.testing.synthetic import generated_observations
    from inspector.tui.export import write_recording

    write_recording(path, generated_observations(events), {"type": "generated", "events": events})


def run(path: Path, mode: str, endpoint: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode, endpoint], capture_output=True, text=True, env=env, timeout=900
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    up = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    down = f"http://127.0.0.1:{s.getsockname()[1]}/v1/traces"
    s.close()
    with tempfile.TemporaryDirectory() as d:
        rec = Path(d) / "session.jsonl"
        make_recording(rec, a.events)
        results: dict[str, list[dict]] = {"off": [], "on": [], "down": []}
        for _ in range(a.runs):  # interleaved: the machine's load drifts the same way for each mode
            results["off"].append(run(rec, "off", up))
            results["on"].append(run(rec, "on", up))
            results["down"].append(run(rec, "down", down))
    server.shutdown()
    n = results["off"][0]["events"]
    med = {k: statistics.median(r["cpu"] for r in v) for k, v in results.items()}
    per = {k: v / n * 1e6 for k, v in med.items()}
    print(f"{n:,} events, {a.runs} runs each, median process CPU:")
    for k in ("off", "on", "down"):
        print(f"  --otel {k:4}  {med[k]:.3f} s   {per[k]:.1f} us/event")
    print(f"  added by --otel: {per['on'] - per['off']:.1f} us/event ({med['on'] / med['off']:.2f}x)")
    print(f"  collector down:  {per['down'] - per['off']:.1f} us/event ({med['down'] / med['off']:.2f}x)")
    print(f"  export requests received: {Sink.count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

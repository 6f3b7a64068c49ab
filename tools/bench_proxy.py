"""What `inspector proxy` costs, side by side with a direct connection and with mitmdump (optional contender):

1. added first byte (p50 / p99) on a short stream (`inspector serve --speed max`, paired runs, interleaved);
2. total time and CPU per stream on a many-small-reads stream (serve's big_input scenario, `serve --fault
   split_events`, at real pacing: 1.8 MB in ~11,600 reads), the proxy's CPU read from /proc for its own process;
3. 50 / 200 / 1,000 concurrent streams at real pacing (parse_date, 1.6 s each; ``--speed max``: a near-instant
   upstream): completed, byte-exact, the largest first-byte delay (and its ratio to direct's), the proxy's peak RSS
   and its CPU per request (and upstream's). ``--light``: one h11 connection per stream as the client (httpx2's
   pool of 1,000 connections costs the client ~8 ms of CPU per request, and hides the servers' costs);
   ``--compare TREE``: the proxy of another checkout too (before / after in the same run); ``--rounds N``;
   ``--pin``: the load (these clients and serve) on CPU 0, the proxy (or mitmdump) on the others, in every run
   (direct too). On a two-core machine the load is CPU-bound, so unpinned every ms the proxy spends is taken from
   the clients and serve, and shows up as first-byte delay whatever the proxy's own queueing; pinned, the figure is
   the proxy's own, as between a real agent and a remote API. Each round's ratio and the median are printed.

Every server (serve, the proxy, mitmdump) runs in a process of its own; the clients run here. Loopback only.

    python tools/bench_proxy.py [--runs 100] [--stream-runs 5] [--levels 50,200,1000] [--phases 1,2,3]
                                [--no-mitmproxy] [--speed 1|max] [--light] [--compare TREE] [--rounds N] [--pin]

mitmproxy is never a dependency of the project: the bench installs it (``pip install mitmproxy``) into a venv of its
own under /tmp (``--mitm-venv``), or skips it when that fails or with ``--no-mitmproxy``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import orjson

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# --pin: CPU sets for the load (the clients here and serve) and for the proxy under test; None: the OS decides
PIN: dict[str, set[int]] | None = None
BODY = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
TICK = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------------------------- processes


def launch(root: Path) -> dict:
    """How a server process of the tree at ``root`` is started (``subprocess`` keywords)."""
    # the working directory too: `python -m` puts it first on sys.path, ahead of PYTHONPATH
    return {"env": dict(os.environ, PYTHONPATH=str(root), PYTHONUNBUFFERED="1"), "cwd": root}


def cpu_split() -> dict[str, set[int]] | None:
    """``--pin``'s CPU sets (bench_watch's too): the load (clients, serve, an agent) on the first CPU, the proxy under
    test on the others; None with fewer than two CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    return {"load": {cpus[0]}, "proxy": set(cpus[1:])} if len(cpus) >= 2 else None


def pin_to(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins a child process to ``cpus`` (None: no pinning)."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def check_tree(root: Path) -> None:
    """Fail unless a process started as :func:`launch` says runs ``root``'s own package (bench_watch's too)."""
    code = "import inspector, sys; sys.stdout.write(inspector.__file__)"
    got = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True, **launch(root)).stdout
    if not Path(got).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"bench_proxy: the tree {root} would run {got}")


class Proc:
    def __init__(
        self,
        args: list[str],
        url_re: str = r"ANTHROPIC_BASE_URL=(\S+)",
        url: str | None = None,
        root: Path = ROOT,
        role: str = "proxy",
    ) -> None:
        self.p = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if os.environ.get("BENCH_STDERR") else subprocess.DEVNULL,
            text=True,
            preexec_fn=pin_to(PIN[role] if PIN is not None else None),
            **launch(root),
        )
        self.url = url
        if url is None:
            assert self.p.stdout is not None
            for _ in range(50):  # bounded: the URL line comes first
                line = self.p.stdout.readline()
                if not line:
                    break
                m = re.search(url_re, line)
                if m:
                    self.url = m.group(1)
                    break
            if self.url is None:
                self.stop()
                raise RuntimeError(f"{args[:4]} did not start")

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def serve(speed: str, *extra: str) -> Proc:
    args = [PY, "-m", "inspector", "serve", "--port", "0", "--speed", speed, "--quiet", "--lenient", *extra]
    return Proc(args, role="load")


def proxy(upstream: str, record: str | None = None, root: Path = ROOT) -> Proc:
    args = [PY, "-m", "inspector", "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream, "--headless", "--quiet"]
    return Proc(args + (["--record", record] if record else []), root=root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mitm_binary(venv: Path, install: bool) -> Path | None:
    exe = venv / "bin" / "mitmdump"
    if exe.exists():
        return exe
    if not install:
        return None
    print(f"installing mitmproxy into {venv} (a venv of the bench's own) ...", flush=True)
    try:
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "mitmproxy"], check=True, capture_output=True, timeout=900
        )
    except (subprocess.SubprocessError, OSError) as e:
        print(f"mitmproxy skipped: could not install it ({type(e).__name__})")
        return None
    return exe if exe.exists() else None


def mitmdump(exe: Path, upstream: str) -> Proc:
    port = free_port()
    args = [str(exe), "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1", "--listen-port", str(port)]
    p = Proc([*args, "--set", "stream_large_bodies=1", "--set", "connection_strategy=lazy", "-q"], url="")
    p.url = f"http://127.0.0.1:{port}"
    for _ in range(200):  # bounded: until it accepts
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.stop()
    raise RuntimeError("mitmdump did not start")


# ----------------------------------------------------------------------------------------------- clients


async def one(client: httpx2.AsyncClient, url: str, headers: dict, whole: bool = True) -> tuple[float, float, bytes]:
    """(first byte s, total s, body) of one streamed request."""
    t0 = time.perf_counter()
    first = None
    chunks = []
    async with client.stream("POST", url + "/v1/messages", content=BODY, headers=headers) as r:
        async for chunk in r.aiter_raw():
            if first is None:
                first = time.perf_counter() - t0
                if not whole:
                    break
            chunks.append(chunk)
    return first if first is not None else float("nan"), time.perf_counter() - t0, b"".join(chunks)


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


async def first_byte(targets: dict[str, str], runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in targets}
    clients = {k: httpx2.AsyncClient(timeout=60) for k in targets}
    try:
        for i in range(runs + 3):  # 3 warm-up rounds; interleaved so a busy spell hits all alike
            for k, url in targets.items():
                h = {"x-inspector-scenario": "weather", "x-inspector-session": f"fb-{k}-{i}"}
                fb, _, _ = await one(clients[k], url, h, whole=False)
                if i >= 3:
                    out[k].append(fb)
    finally:
        for c in clients.values():
            await c.aclose()
    return out


async def big_stream(url: str, tag: str, i: int) -> tuple[float, float, bytes]:
    # split_events is the upstream's (serve --fault): the proxy would take an x-inspector-fault header for itself
    h = {"x-inspector-scenario": "big_input", "x-inspector-session": f"{tag}{i}"}
    async with httpx2.AsyncClient(timeout=120) as c:
        return await one(c, url, h)


class _Light(asyncio.Protocol):
    """One request on its own connection, read with h11 (the light client of phase 3: httpx2's pool of 1,000
    connections costs ~8 ms of client CPU per request, which would hide what the server side costs)."""

    def __init__(self, request: bytes, t0: float, done: asyncio.Future) -> None:
        import h11

        self.h11 = h11
        self.conn = h11.Connection(h11.CLIENT)
        self.request, self.t0, self.done = request, t0, done
        self.first: float | None = None
        self.chunks: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        h11 = self.h11
        self.conn.receive_data(data)
        while True:
            ev = self.conn.next_event()
            if isinstance(ev, h11.Data):
                if self.first is None:
                    self.first = time.perf_counter() - self.t0
                self.chunks.append(bytes(ev.data))
            elif isinstance(ev, h11.EndOfMessage):
                self._end(None)
                return
            elif ev is h11.NEED_DATA:
                return
            elif isinstance(ev, h11.ConnectionClosed):
                self._end(ConnectionError("closed before the end"))
                return

    def connection_lost(self, exc) -> None:
        self._end(exc or ConnectionError("closed before the end"))

    def _end(self, exc: BaseException | None) -> None:
        if not self.done.done():
            if exc is None:
                first = self.first if self.first is not None else float("nan")
                self.done.set_result((first, time.perf_counter() - self.t0, b"".join(self.chunks)))
            else:
                self.done.set_exception(exc)
        if self.transport is not None:
            self.transport.close()


async def one_light(url: str, headers: dict) -> tuple[float, float, bytes]:
    """(first byte s, total s, body) of one streamed request over a fresh connection, h11 on an asyncio protocol."""
    host, _, port = url.split("//", 1)[1].rpartition(":")
    lines = [b"POST /v1/messages HTTP/1.1", b"host: " + f"{host}:{port}".encode(), b"content-type: application/json"]
    lines += [f"{k}: {v}".encode() for k, v in headers.items()]
    lines += [b"content-length: %d" % len(BODY), b"", BODY]
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    t0 = time.perf_counter()
    await loop.create_connection(lambda: _Light(b"\r\n".join(lines), t0, done), host, int(port))
    return await asyncio.wait_for(done, 120)


async def concurrent(url: str, n: int, tag: str, light: bool = False) -> tuple[int, list[float], list[bytes]]:
    if light:

        async def go_light(i: int):
            return await one_light(url, {"x-inspector-scenario": "parse_date", "x-inspector-session": f"{tag}-{n}-{i}"})

        res = await asyncio.gather(*(go_light(i) for i in range(n)), return_exceptions=True)
        ok = [r for r in res if not isinstance(r, BaseException)]
        return len(ok), [r[0] for r in ok], [r[2] for r in ok]
    limits = httpx2.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as c:

        async def go(i: int):
            h = {"x-inspector-scenario": "parse_date", "x-inspector-session": f"{tag}-{n}-{i}"}
            return await one(c, url, h)

        res = await asyncio.gather(*(go(i) for i in range(n)), return_exceptions=True)
    ok = [r for r in res if not isinstance(r, BaseException)]
    return len(ok), [r[0] for r in ok], [r[2] for r in ok]


# ----------------------------------------------------------------------------------------------- main


async def phase_first_byte(a: argparse.Namespace, mitm_exe: Path | None, procs: list[Proc]) -> None:
    fast = serve("max")
    procs.append(fast)
    px = proxy(fast.url or "")
    procs.append(px)
    targets = {"direct": fast.url or "", "proxy": px.url or ""}
    if mitm_exe:
        mp = mitmdump(mitm_exe, fast.url or "")
        procs.append(mp)
        targets["mitmdump"] = mp.url or ""
    fb = await first_byte(targets, a.runs)
    print(f"\n1. first byte, weather at --speed max, {a.runs} paired runs (ms)")
    print(f"{'':10} {'p50':>8} {'p99':>8} {'added p50':>10} {'added p99':>10}")
    d = fb["direct"]
    for k, xs in fb.items():
        added = [x - y for x, y in zip(xs, d, strict=True)]
        print(
            f"{k:10} {q(xs, 0.5) * 1e3:8.2f} {q(xs, 0.99) * 1e3:8.2f} "
            f"{q(added, 0.5) * 1e3:10.2f} {q(added, 0.99) * 1e3:10.2f}"
        )


async def phase_many_reads(a: argparse.Namespace, mitm_exe: Path | None, procs: list[Proc]) -> None:
    up = serve("1", "--fault", "split_events")
    procs.append(up)
    px = proxy(up.url or "")
    procs.append(px)
    rec = proxy(up.url or "", record="/tmp/bench_proxy_recording.jsonl")
    procs.append(rec)
    cont: dict[str, tuple[str, Proc | None]] = {
        "direct": (up.url or "", None),
        "proxy": (px.url or "", px),
        "proxy+rec": (rec.url or "", rec),  # with --record: every read decoded, assembled and written
    }
    if mitm_exe:
        mp = mitmdump(mitm_exe, up.url or "")
        procs.append(mp)
        cont["mitmdump"] = (mp.url or "", mp)
    ref: bytes | None = None
    rows: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cont}
    up_cpu: dict[str, list[float]] = {k: [] for k in cont}
    inexact = 0
    for i in range(a.stream_runs + 1):  # the first round warms up
        for k, (url, proc) in cont.items():
            c0 = proc.cpu() if proc else 0.0
            u0 = up.cpu()
            fbt, total, body = await big_stream(url, f"big-{k}-", i)
            cpu = (proc.cpu() - c0) if proc else 0.0
            if ref is None:
                ref = body
            inexact += body != ref
            if i:
                rows[k].append((fbt, total, cpu))
                up_cpu[k].append(up.cpu() - u0)
    print(
        f"\n2. big_input, serve --fault split_events at real pacing: {len(ref or b'')} bytes in ~11618 reads, "
        f"{a.stream_runs} runs, medians; {inexact} not byte-exact"
    )
    print(f"{'':10} {'total s':>8} {'added ms':>9} {'CPU ms/stream':>14} {'upstream CPU ms':>16}")
    dt = statistics.median(t for _, t, _ in rows["direct"])
    for k, rs in rows.items():
        t = statistics.median(x for _, x, _ in rs)
        cpu = statistics.median(c for _, _, c in rs) * 1e3
        ucpu = statistics.median(up_cpu[k]) * 1e3
        print(f"{k:10} {t:8.3f} {(t - dt) * 1e3:9.1f} {cpu if k != 'direct' else float('nan'):14.0f} {ucpu:16.0f}")


async def phase_concurrency(a: argparse.Namespace, mitm_exe: Path | None, procs: list[Proc]) -> None:
    up = serve(a.speed)
    procs.append(up)
    pacing = "real pacing (parse_date, 1.6 s each)" if a.speed == "1" else f"upstream --speed {a.speed} (parse_date)"
    print(f"\n3. concurrent streams at {pacing}")
    print(
        f"{'':10} {'streams':>8} {'done':>6} {'exact':>6} {'first byte max s':>17} {'x direct':>9} {'peak RSS MB':>12} "
        f"{'CPU ms/req':>10} {'upstream CPU':>12}"
    )
    expected = await big_stream_ref(up.url or "")
    contenders = ["direct", "proxy", *(["compare"] if a.compare else []), *(["mitmdump"] if mitm_exe else [])]
    ratios: dict[tuple[str, int], list[float]] = {}
    for n in a.levels:
        for rnd in range(a.rounds):
            base = float("nan")
            for k in contenders:
                proc = None
                url = up.url or ""
                if k == "proxy":
                    proc = proxy(url)
                elif k == "compare":
                    proc = proxy(url, root=a.compare)
                elif k == "mitmdump" and mitm_exe:
                    proc = mitmdump(mitm_exe, url)
                target = proc.url if proc else url
                try:
                    c0, u0 = (proc.cpu() if proc else 0.0), up.cpu()
                    done, fbs, bodies = await concurrent(target or "", n, f"c-{k}-{rnd}", light=a.light)
                    cpu = (proc.cpu() - c0) / n * 1e3 if proc else float("nan")
                    up_cpu = (up.cpu() - u0) / n * 1e3
                    rss = proc.peak_rss_mb() if proc else float("nan")
                finally:
                    if proc:
                        proc.stop()
                exact = sum(b == expected for b in bodies)
                worst = max(fbs) if fbs else float("nan")
                if k == "direct":
                    base = worst
                else:
                    ratios.setdefault((k, n), []).append(worst / base)
                print(
                    f"{k:10} {n:8d} {done:6d} {exact:6d} {worst:17.3f} {worst / base:9.2f} {rss:12.0f} "
                    f"{cpu:10.2f} {up_cpu:12.2f}",
                    flush=True,
                )
    if a.rounds > 1:
        print(f"\nslowest first byte over direct's, per round and median{' (pinned)' if PIN else ''}:")
        for (k, n), rs in ratios.items():
            within = sum(r <= 2 for r in rs)
            print(
                f"  {k:10} {n:6d} streams: {', '.join(f'{r:.2f}' for r in rs)}  median {statistics.median(rs):.2f}"
                f"  (within 2x in {within} of {len(rs)})"
            )


async def main(a: argparse.Namespace) -> None:
    mitm_exe = None if a.no_mitmproxy else mitm_binary(Path(a.mitm_venv), install=True)
    for phase, run in ((1, phase_first_byte), (2, phase_many_reads), (3, phase_concurrency)):
        if phase not in a.phases:
            continue
        procs: list[Proc] = []
        try:
            await run(a, mitm_exe, procs)
        finally:
            for p in procs:
                p.stop()


async def big_stream_ref(url: str) -> bytes:
    async with httpx2.AsyncClient(timeout=60) as c:
        _, _, body = await one(c, url, {"x-inspector-scenario": "parse_date", "x-inspector-session": "ref"})
    return body


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100, help="paired first-byte runs (default 100)")
    ap.add_argument("--stream-runs", type=int, default=5, help="runs of the many-reads stream (default 5)")
    ap.add_argument(
        "--levels",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[50, 200, 1000],
        help="concurrency levels (default 50,200,1000)",
    )
    ap.add_argument(
        "--speed", default="1", help="phase 3: the upstream's pacing (1: real time; max: near-instant; default 1)"
    )
    ap.add_argument(
        "--compare",
        metavar="OTHER_TREE",
        type=lambda s: Path(s).resolve(),
        help="phase 3: also run the proxy from this checkout (e.g. the code before a change), interleaved",
    )
    ap.add_argument("--rounds", type=int, default=1, help="phase 3: rounds at each level, interleaved (default 1)")
    ap.add_argument(
        "--light",
        action="store_true",
        help="phase 3: an h11 client per connection instead of one httpx2 client (whose pool of 1,000 connections "
        "costs ~8 ms of client CPU per request and hides the server side)",
    )
    ap.add_argument("--no-mitmproxy", action="store_true", help="do not install or run mitmdump")
    ap.add_argument(
        "--phases", type=lambda s: {int(x) for x in s.split(",")}, default={1, 2, 3}, help="which parts (default 1,2,3)"
    )
    ap.add_argument(
        "--mitm-venv", default="/tmp/bench-mitm", help="the venv mitmproxy lives in (default /tmp/bench-mitm)"
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="phase 3: the load (clients + serve) on CPU 0, the proxy on the others: the proxy's own queueing",
    )
    args = ap.parse_args()
    if args.pin:
        PIN = cpu_split()
        if PIN is None:
            ap.error("--pin needs two CPUs")
        os.sched_setaffinity(0, PIN["load"])  # the clients run in this process
    for tree in (ROOT, *([args.compare] if args.compare else [])):
        check_tree(tree)  # each contender runs its own tree's package (never this one's by accident)
    asyncio.run(main(args))

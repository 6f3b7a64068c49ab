"""`inspector watch` at scale: N concurrent conversations of T turns (a fake agent written here, raw HTTP over
httpx2), through `watch --headless --record` in front of `inspector serve --speed max` (``--speed 1``: at real
pacing, ~0.4 s to the first byte) with a T-turn tool scenario.

    python tools/bench_watch.py [--conversations 50] [--turns 20] [--json] [--compare OTHER_TREE]
                                [--single-rounds 3] [--rounds N] [--pin]

Reports:
  * first byte per request (p50 / p99 / max) direct to serve and through watch, each with 1 and with N
    conversations (direct(1), watch(1), direct(N), watch(N)); the added first byte (watch - direct, p50) at each
    level: the added first byte at N must stay within 2x of the single-conversation figure (``added_ratio``).
    Each watch(N) is paired with a direct(N) run just before it (the N-conversation figure drifts by tens of ms
    between runs on a shared machine); with ``--rounds``, each tree's median over the rounds too;
  * ``--compare OTHER_TREE``: watch also runs from another checkout of the project (e.g. the code before a change),
    interleaved with this one against the same serve, so before / after come from the same run;
  * lost requests (every turn of every conversation answered), byte-exact turns (each recorded attempt's bytes equal
    what the agent received), grouping (the recording's ``conversation`` lines: conversations, turns per conversation,
    and no recorded conversation holding two agents' requests);
  * the watch process's peak RSS (sampled from /proc).
  * ``--null-relay``: the same two runs (1 and N conversations, each paired with a direct run; with ``--paired``,
    side by side as below) through a relay that
    does nothing but copy bytes (asyncio streams, no HTTP parsing, no recording: NULL_RELAY below), a process of its
    own as watch is. Its added-first-byte ratio is the floor any proxy in Python meets here: unpinned at max speed the
    load is CPU-bound, and by Little's law N closed-loop conversations wait about N x (the relay's CPU per request)
    / cores more, whatever the relay's own queueing;
  * ``--paired``: the added first byte side by side, in place of the paired direct runs above: the agent sends N
    conversations through watch and N more straight to serve, from one process, started together, so that both
    halves meet the same load; added = the watch half's p50 - the direct half's, within one run (at 1: 1 + 1
    conversations). Separate direct and watch runs differ by the run-to-run drift (tens of ms at N), which swamps a
    proxy's few ms; side by side, only what watch adds remains. Also ``twin_added_ms_*``: the median of the
    request-by-request differences (each request through watch against its twin sent direct: same conversation
    number and turn, started together), with the single figure's p25..p75 (its noise);
  * ``--pin``: the load (the fake agent and serve) on CPU 0 and watch on the others, in every run (direct too). On
    one machine the load is CPU-bound, so unpinned every ms watch spends is taken from it and shows up as added
    first byte whatever watch's own queueing; pinned, the figure is watch's own, as in front of a remote API.
Loopback only; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench_proxy import check_tree, cpu_split, launch, pin_to  # (tools/ is on the path when a bench runs as a script)

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# --pin: CPU sets for the load (the fake agent and serve) and for watch; None: the OS schedules everything
PIN: dict[str, set[int]] | None = None


def _pinned(role: str) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the child to ``role``'s CPUs under --pin; else None."""
    return pin_to(PIN[role]) if PIN is not None else None


AGENT = r"""
import asyncio, hashlib, json, os, sys, time
import httpx2

N, T, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if os.environ.get("BENCH_AGENT_CPUS"):  # --pin: the agent on the load's core, whoever started it
    os.sched_setaffinity(0, {int(c) for c in os.environ["BENCH_AGENT_CPUS"].split(",")})
BASE = os.environ["ANTHROPIC_BASE_URL"]
HEADERS = {"x-api-key": "sk-ant-bench-not-a-key", "anthropic-version": "2023-06-01", "content-type": "application/json"}
TOOLS = [{"name": "step", "description": "One step.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]

async def conversation(client, i, stats, base=BASE, via="watch"):
    messages = [{"role": "user", "content": f"{'direct ' if via == 'direct' else ''}conversation {i}: take {T} steps"}]
    for turn in range(T):
        body = {"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": True, "tools": TOOLS, "messages": messages}
        t0 = time.perf_counter()
        first = None
        chunks = []
        async with client.stream("POST", base + "/v1/messages", json=body, headers=HEADERS) as r:
            async for chunk in r.aiter_raw():
                if first is None:
                    first = time.perf_counter() - t0
                chunks.append(chunk)
        data = b"".join(chunks)
        stats.append({"conv": i, "turn": turn, "status": r.status_code, "ttfb": first, "sha": hashlib.sha256(data).hexdigest(), "via": via})
        tool_id = None
        content = []
        for line in data.decode().splitlines():
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                if ev.get("type") == "content_block_start":
                    b = ev["content_block"]
                    if b["type"] == "tool_use":
                        tool_id = b["id"]
                        content.append({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {"n": turn}})
                    elif b["type"] == "text":
                        content.append({"type": "text", "text": "ok"})
        if tool_id is None:
            return
        messages = messages + [
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "done"}]},
        ]

async def main():
    stats = []
    limits = httpx2.Limits(max_connections=N * 2, max_keepalive_connections=N * 2)
    direct = os.environ.get("BENCH_DIRECT_URL")  # --paired: N more conversations straight to the API, alongside
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client, httpx2.AsyncClient(timeout=120, limits=limits) as other:
        runs = [conversation(client, i, stats) for i in range(N)]
        if direct:
            runs += [conversation(other, i, stats, direct, "direct") for i in range(N)]
            runs = [x for pair in zip(runs[:N], runs[N:]) for x in pair]  # (started interleaved)
        await asyncio.gather(*runs)
    with open(OUT, "w") as f:
        json.dump(stats, f)

asyncio.run(main())
"""

# --null-relay: a process that copies bytes both ways between each accepted connection and the upstream, and does
# nothing else (no HTTP parsing, no recording): the least any proxy in front of the agent costs
NULL_RELAY = r"""
import asyncio, sys
from urllib.parse import urlsplit

UP = urlsplit(sys.argv[1])

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()

async def handle(cr, cw):
    try:
        ur, uw = await asyncio.open_connection(UP.hostname, UP.port)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def start_null_relay(tmp: Path, upstream: str) -> tuple[subprocess.Popen, str]:
    script = tmp / "null_relay.py"
    script.write_text(NULL_RELAY)
    p = subprocess.Popen([PY, str(script), upstream], stdout=subprocess.PIPE, text=True, preexec_fn=_pinned("proxy"))
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def scenario_yaml(turns: int) -> str:
    lines = [
        "format: stream-inspector-scenario",
        "version: 1",
        "name: bench_steps",
        "description: Many tool steps, for the watch bench.",
        "prompt: take the steps",
        "system: null",
        "tools:",
        "- name: step",
        "  description: One step.",
        "  input_schema: {type: object, properties: {n: {type: integer}}}",
        "  result: done",
        "turns:",
    ]
    for t in range(turns - 1):
        lines += [
            "- blocks:",
            f"  - {{text: 'Step {t}.'}}",
            "  - tool_use: step",
            f"    input: {{n: {t}}}",
            "  stop_reason: tool_use",
            "  usage: {input_tokens: 100}",
        ]
    lines += ["- blocks:", "  - {text: 'All steps done.'}", "  usage: {input_tokens: 100}"]
    return "\n".join(lines) + "\n"


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def start_serve(scenario: Path, speed: str = "max") -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [
            PY,
            "-m",
            "inspector",
            "serve",
            "--scenario",
            str(scenario),
            "--speed",
            speed,
            "--quiet",
            "--history",
            "100000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_pinned("load"),
    )
    assert p.stderr is not None
    for _ in range(50):
        line = p.stderr.readline()
        m = re.search(r"ANTHROPIC_BASE_URL=(\S+)", line)
        if m:
            return p, m.group(1)
    p.kill()
    raise RuntimeError("serve did not start")


def rss_sampler(pid: int, peak: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
        except OSError:
            return
        time.sleep(0.05)


def run_agent(
    n: int,
    t: int,
    tmp: Path,
    upstream: str,
    *,
    through_watch: bool,
    record: Path | None,
    root: Path = ROOT,
    paired: bool = False,
    direct_url: str | None = None,
) -> dict:
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    out = tmp / f"stats-{n}-{through_watch}-{time.monotonic_ns()}.json"
    how = launch(root)  # watch from the tree at ``root`` (its environment is the agent's too)
    env = how["env"]
    if PIN is not None:
        env["BENCH_AGENT_CPUS"] = ",".join(map(str, sorted(PIN["load"])))
    if paired:  # n more conversations straight to the upstream, in the same agent process, at the same time
        env["BENCH_DIRECT_URL"] = direct_url or upstream
    argv = [PY, str(agent), str(n), str(t), str(out)]
    peak = [0]
    cpu = float("nan")
    t0 = time.perf_counter()
    if through_watch:
        cmd = [PY, "-m", "inspector", "watch", "--headless", "--upstream", upstream]
        if record is not None:
            cmd += ["--record", str(record)]
        p = subprocess.Popen(
            [*cmd, "--", *argv],
            **how,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_pinned("proxy"),
        )
        stop = threading.Event()
        th = threading.Thread(target=rss_sampler, args=(p.pid, peak, stop), daemon=True)
        th.start()
        cpu = exit_cpu(p)
        rc = p.wait(1800)
        stop.set()
    else:
        env["ANTHROPIC_BASE_URL"] = upstream
        rc = subprocess.run(argv, env=env, timeout=1800).returncode
    wall = time.perf_counter() - t0
    stats = json.loads(out.read_text()) if out.exists() else []
    return {"rc": rc, "wall": wall, "stats": stats, "rss_mb": peak[0] / 1024, "cpu_s": cpu}


def exit_cpu(p: subprocess.Popen) -> float:
    """The CPU seconds (user + system) a process used in all, read once it exited and before it is reaped (its own:
    not its children's, e.g. the agent watch runs)."""
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    try:
        fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_recording(record: Path, stats: list[dict], turns: int | None = None) -> dict:
    """Byte-exactness of the recorded attempts, and the grouping: the proxy's ``conversation`` obs lines (global turn
    -> conversation, its turn there) against what the agent did (conversation i's first message names i)."""
    lines = [json.loads(x) for x in record.read_text().splitlines() if x.strip()]
    reads: dict[tuple, list[bytes]] = {}
    requests = []
    where: dict[int, tuple[str, int]] = {}
    for x in lines:
        key = (x.get("turn"), x.get("attempt"))
        if x["kind"] == "request":
            requests.append(x)
            reads[key] = []
        elif x["kind"] == "read":
            data = x["data"].encode() if "data" in x else __import__("base64").b64decode(x["b64"])
            reads.setdefault(key, []).append(data)
        elif x["kind"] == "obs" and x.get("type") == "conversation":
            where[x["turn"]] = (x["conversation"], x["conversation_turn"])
    recorded = sorted(hashlib.sha256(b"".join(v)).hexdigest() for v in reads.values())
    received = sorted(s["sha"] for s in stats)
    if not where:
        return {
            "requests_recorded": len(requests),
            "byte_exact": sum(1 for a, b in zip(recorded, received, strict=False) if a == b),
            "conversations_in_recording": "not recorded (no conversation lines)",
        }
    per_conv: dict[str, set[int]] = {}
    agent_of: dict[str, set[str]] = {}  # recorded conversation -> the agent conversations whose requests it holds
    for x in requests:
        conv, ct = where.get(x["turn"], ("?", -1))
        per_conv.setdefault(conv, set()).add(ct)
        msgs = (x.get("body") or {}).get("messages") or [{}]
        agent_of.setdefault(conv, set()).add(str(msgs[0].get("content", ""))[:40])
    counts = sorted(len(v) for v in per_conv.values())
    mixed = sum(1 for v in agent_of.values() if len(v) != 1)
    ok = not mixed and "?" not in per_conv and (turns is None or all(c == turns for c in counts))
    return {
        "requests_recorded": len(requests),
        "byte_exact": sum(1 for a, b in zip(recorded, received, strict=False) if a == b),
        "conversations_in_recording": len(per_conv),
        "turns_per_conversation": f"min {counts[0]}, max {counts[-1]}" if counts else "-",
        "conversations_mixing_agents": mixed,
        "grouping": f"{'ok' if ok else 'WRONG'}: {len(per_conv)} conversations, turns per conversation "
        + (f"{counts[0]}..{counts[-1]}" if counts else "-"),
    }


def fb(run: dict) -> dict:
    xs = [s["ttfb"] * 1000 for s in run["stats"] if s["ttfb"] is not None]
    return {
        "p50_ms": q(xs, 0.5),
        "p90_ms": q(xs, 0.9),
        "p99_ms": q(xs, 0.99),
        "max_ms": max(xs) if xs else float("nan"),
        "n": len(xs),
    }


def pooled(runs: list[dict]) -> dict:
    """Several runs as one: their samples together."""
    return {
        "rc": max(r["rc"] for r in runs),
        "wall": sum(r["wall"] for r in runs),
        "stats": [x for r in runs for x in r["stats"]],
        "rss_mb": max(r["rss_mb"] for r in runs),
    }


def first_bytes(a: argparse.Namespace, direct1: dict, single: dict, directn: dict, many: dict) -> dict:
    """The first-byte figures of a relay's 1- and N-conversation runs against the direct ones, and what was lost."""
    d1, s, dn, m = fb(direct1), fb(single), fb(directn), fb(many)
    added_1 = s["p50_ms"] - d1["p50_ms"]
    added_n = m["p50_ms"] - dn["p50_ms"]
    return {
        "direct_n": dn,
        "watch_1": s,
        "watch_n": m,
        "added_p50_ms_1": added_1,
        "added_p50_ms_n": added_n,
        # the tail too (the target is set on the p50): at 1, and at N
        "added_p90_ms_1": s["p90_ms"] - d1["p90_ms"],
        "added_p90_ms_n": m["p90_ms"] - dn["p90_ms"],
        "direct_n_p50_ms": dn["p50_ms"],
        # the target: the added first byte at N conversations within 2x of the single-conversation figure
        "added_ratio": added_n / added_1 if added_1 > 0 else float("nan"),
        "lost": a.conversations * a.turns - len(many["stats"]),
    }


def measure(a: argparse.Namespace, tmp: Path, url: str, root: Path, direct1: dict) -> dict:
    """watch(1) and watch(N) (with --record) from the tree at ``root``, against direct(1) and a direct(N) run just
    before this watch(N) (on a shared machine the N-conversation figure drifts by tens of ms from run to run: a
    direct(N) measured once, minutes earlier, made the added figure of whichever tree ran first +25-39 ms)."""
    single = pooled(
        [run_agent(1, a.turns, tmp, url, through_watch=True, record=None, root=root) for _ in range(a.single_rounds)]
    )
    directn = run_agent(a.conversations, a.turns, tmp, url, through_watch=False, record=None)
    rec = tmp / f"watch-{time.monotonic_ns()}.jsonl"
    many = run_agent(a.conversations, a.turns, tmp, url, through_watch=True, record=rec, root=root)
    check = check_recording(rec, many["stats"], a.turns)
    expected = a.conversations * a.turns
    return {
        **first_bytes(a, direct1, single, directn, many),
        "non_200": sum(1 for x in many["stats"] if x["status"] != 200),
        "watch_rc": many["rc"],
        "watch_peak_rss_mb": round(many["rss_mb"], 1),
        # watch's own CPU per request at N conversations (the proxy, the recording): steadier than the first-byte
        # figures on a loaded machine
        "watch_cpu_ms_per_request": round(many["cpu_s"] * 1e3 / max(1, len(many["stats"])), 2),
        "watch_wall_s": round(many["wall"], 2),
        **check,
        "expected_requests": expected,
    }


def halves(run: dict) -> tuple[dict, dict]:
    """A paired run's two halves: (through watch, direct)."""
    return tuple({**run, "stats": [x for x in run["stats"] if x.get("via") == via]} for via in ("watch", "direct"))  # type: ignore[return-value]


def pair_differences(runs: list[dict]) -> list[float]:
    """Within each paired run, every request through the relay against its twin sent straight to the upstream (the
    same conversation number and turn, started together, paced alike): the relay's first byte minus the direct one's,
    in ms. Their median is the added first byte with the run's drift taken out request by request, not only half by
    half (the p50 of one half minus the p50 of the other moves by ~1 ms between runs on its own)."""
    out = []
    for run in runs:
        twins: dict[tuple[int, int], dict[str, float]] = {}
        for x in run["stats"]:
            if x["ttfb"] is not None:
                twins.setdefault((x["conv"], x["turn"]), {})[x["via"]] = x["ttfb"] * 1000
        out += [t["watch"] - t["direct"] for t in twins.values() if len(t) == 2]
    return out


def measure_paired(a: argparse.Namespace, tmp: Path, url: str, root: Path) -> dict:
    """The added first byte measured side by side: each run has N conversations through watch and N more straight to
    the upstream, in the same agent process and started together, so both halves meet the same load (the machine's,
    serve's, the agent's own). The added first byte is then the watch half's p50 minus the direct half's, from one
    run: at 1 (1 + 1 conversations, --single-rounds runs pooled) and at N."""
    singles = [
        run_agent(1, a.turns, tmp, url, through_watch=True, record=None, root=root, paired=True)
        for _ in range(a.single_rounds)
    ]
    rec = tmp / f"watch-{time.monotonic_ns()}.jsonl"
    many = run_agent(a.conversations, a.turns, tmp, url, through_watch=True, record=rec, root=root, paired=True)
    s_watch, s_direct = halves(pooled(singles))
    m_watch, m_direct = halves(many)
    out = first_bytes(a, s_direct, s_watch, m_direct, m_watch)
    out["lost"] = 2 * a.conversations * a.turns - len(many["stats"])
    return {
        **out,
        **twin_figures(singles, [many]),
        "direct_1": fb(s_direct),
        "non_200": sum(1 for x in many["stats"] if x["status"] != 200),
        "watch_rc": many["rc"],
        "watch_peak_rss_mb": round(many["rss_mb"], 1),
        "watch_cpu_ms_per_request": round(many["cpu_s"] * 1e3 / max(1, len(m_watch["stats"])), 2),
        "watch_wall_s": round(many["wall"], 2),
        **check_recording(rec, m_watch["stats"], a.turns),
        "expected_requests": a.conversations * a.turns,
    }


def twin_figures(singles: list[dict], many: list[dict]) -> dict:
    """The added first byte as the median of the request-by-request differences (``pair_differences``), at 1 and at
    N, with the spread of the single figure (its p25..p75: the noise the N figure is read against)."""
    one, n = pair_differences(singles), pair_differences(many)
    if not one or not n:
        return {}
    return {
        "twin_added_ms_1": statistics.median(one),
        "twin_added_ms_1_p25": q(one, 0.25),
        "twin_added_ms_1_p75": q(one, 0.75),
        "twin_added_ms_n": statistics.median(n),
        "twin_added_ms_n_p25": q(n, 0.25),
        "twin_added_ms_n_p75": q(n, 0.75),
        "twin_pairs": f"{len(one)} at 1, {len(n)} at N",
    }


def proc_cpu(pid: int) -> float:
    """The CPU seconds (user + system) a live process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_null(a: argparse.Namespace, tmp: Path, url: str, direct1: dict) -> dict:
    """As :func:`measure`, through the null relay instead of watch (nothing recorded: no byte-exact check)."""
    relay, relay_url = start_null_relay(tmp, url)
    try:
        single = pooled(
            [run_agent(1, a.turns, tmp, relay_url, through_watch=False, record=None) for _ in range(a.single_rounds)]
        )
        directn = run_agent(a.conversations, a.turns, tmp, url, through_watch=False, record=None)
        cpu0 = proc_cpu(relay.pid)
        many = run_agent(a.conversations, a.turns, tmp, relay_url, through_watch=False, record=None)
        cpu = proc_cpu(relay.pid) - cpu0
    finally:
        relay.terminate()
        relay.wait(10)
    return {
        **first_bytes(a, direct1, single, directn, many),
        "byte_exact": float("nan"),  # (nothing recorded)
        "watch_cpu_ms_per_request": round(cpu * 1e3 / max(1, len(many["stats"])), 2),
    }


def measure_null_paired(a: argparse.Namespace, tmp: Path, url: str) -> dict:
    """As :func:`measure_paired`, through the null relay instead of watch: each run sends N conversations through
    the relay and N more straight to serve, side by side (nothing recorded)."""
    relay, relay_url = start_null_relay(tmp, url)
    try:
        singles = [
            run_agent(1, a.turns, tmp, relay_url, through_watch=False, record=None, paired=True, direct_url=url)
            for _ in range(a.single_rounds)
        ]
        cpu0 = proc_cpu(relay.pid)
        many = run_agent(
            a.conversations, a.turns, tmp, relay_url, through_watch=False, record=None, paired=True, direct_url=url
        )
        cpu = proc_cpu(relay.pid) - cpu0
    finally:
        relay.terminate()
        relay.wait(10)
    # (the agent labels the relay's half "watch": it is the half sent to ANTHROPIC_BASE_URL)
    s_relay, s_direct = halves(pooled(singles))
    m_relay, m_direct = halves(many)
    return {
        **first_bytes(a, s_direct, s_relay, m_direct, m_relay),
        **twin_figures(singles, [many]),
        "lost": 2 * a.conversations * a.turns - len(many["stats"]),
        "byte_exact": float("nan"),  # (nothing recorded)
        "watch_cpu_ms_per_request": round(cpu * 1e3 / max(1, len(m_relay["stats"])), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=50)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--speed", default="max", help="serve's pacing (default max: no waits; 1: real time)")
    ap.add_argument("--single-rounds", type=int, default=3, help="runs of the single conversation, pooled (default 3)")
    ap.add_argument("--rounds", type=int, default=1, help="measure every tree this many times, interleaved")
    ap.add_argument("--compare", metavar="OTHER_TREE", help="also run watch from this checkout (e.g. the code before)")
    ap.add_argument(
        "--null-relay",
        action="store_true",
        help="also run the agent through a relay that only copies bytes (the floor of any proxy): reported as null.*",
    )
    ap.add_argument(
        "--paired",
        action="store_true",
        help="measure the added first byte side by side: every run also sends as many conversations straight to the"
        " upstream, at the same time, from the same agent (the direct figure then meets the same load as watch's)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="the load (agent + serve) on CPU 0, watch on CPU 1, in every run: watch's own queueing, apart from"
        " the CPU it takes from a load on the same cores (a real agent's API is remote)",
    )
    a = ap.parse_args()
    global PIN
    if a.pin:
        PIN = cpu_split()
        if PIN is None:
            ap.error("--pin needs two CPUs")
    trees = {"this": ROOT, **({"compare": Path(a.compare).resolve()} if a.compare else {})}
    for root in trees.values():
        check_tree(root)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        scen = tmp / "bench_steps.yaml"
        scen.write_text(scenario_yaml(a.turns))
        serve, url = start_serve(scen, a.speed)
        try:
            run_agent(1, a.turns, tmp, url, through_watch=False, record=None)  # warm-up (imports, serve's caches)
            # (and at N: serve's first burst of N conversations was slower than the next ones)
            run_agent(a.conversations, a.turns, tmp, url, through_watch=False, record=None)
            # the single conversation's p50 over --single-rounds runs (one run is only --turns samples)
            direct1 = pooled(
                [
                    run_agent(1, a.turns, tmp, url, through_watch=False, record=None)
                    for _ in range(0 if a.paired else a.single_rounds)  # (--paired: each run has its own)
                ]
                or [{"rc": 0, "wall": 0.0, "stats": [], "rss_mb": 0.0}]
            )
            rounds = []
            for _ in range(a.rounds):  # interleaved: every tree in each round, against the same serve
                if a.paired:
                    rnd = {name: measure_paired(a, tmp, url, root) for name, root in trees.items()}
                else:
                    rnd = {name: measure(a, tmp, url, root, direct1) for name, root in trees.items()}
                if a.null_relay:
                    rnd["null"] = measure_null_paired(a, tmp, url) if a.paired else measure_null(a, tmp, url, direct1)
                rounds.append(rnd)
            results = rounds[0]
        finally:
            serve.terminate()
            serve.wait(10)
    report: dict = {
        "pinned": "load on CPU 0, watch on the rest" if PIN else "no (the OS schedules every process on every CPU)",
        "conversations": a.conversations,
        "turns": a.turns,
        "direct_1": fb(direct1),
    }
    for name, r in results.items():
        report.update(r if name == "this" else {f"{name}.{k}": v for k, v in r.items()})
    names = [*trees, *(["null"] if a.null_relay else [])]
    if a.rounds > 1:  # each tree's median over the rounds (the figures above are round 1's)
        for name in names:
            ones = sorted(rnd[name]["added_p50_ms_1"] for rnd in rounds)
            ns = sorted(rnd[name]["added_p50_ms_n"] for rnd in rounds)
            one, n = statistics.median(ones), statistics.median(ns)
            prefix = "" if name == "this" else f"{name}."
            report[f"{prefix}median_added_p50_ms_1"] = one
            report[f"{prefix}median_added_p50_ms_n"] = n
            report[f"{prefix}median_added_ratio"] = n / one if one > 0 else float("nan")
            report[f"{prefix}median_added_p90_ms_n"] = statistics.median(rnd[name]["added_p90_ms_n"] for rnd in rounds)
            if all("twin_added_ms_1" in rnd[name] for rnd in rounds):
                for k in ("twin_added_ms_1", "twin_added_ms_n"):
                    report[f"{prefix}median_{k}"] = statistics.median(rnd[name][k] for rnd in rounds)
    if a.rounds > 1:
        report["rounds"] = [
            {
                name: {
                    k: r[k]
                    for k in (
                        "direct_n_p50_ms",
                        "added_p50_ms_1",
                        "added_p50_ms_n",
                        "added_ratio",
                        "added_p90_ms_n",
                        "lost",
                        "byte_exact",
                    )
                    + ("watch_cpu_ms_per_request",)
                    + (("twin_added_ms_1", "twin_added_ms_n") if "twin_added_ms_1" in r else ())
                }
                for name, r in rnd.items()
            }
            for rnd in rounds
        ]
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        for k, v in report.items():
            if k == "rounds":
                for i, rnd in enumerate(v):
                    for name, r in rnd.items():
                        print(f"round {i + 1} {name:8} " + " ".join(f"{kk} {vv:.2f}" for kk, vv in r.items()))
                continue
            print(f"{k:36} {v:.2f}" if isinstance(v, float) else f"{k:36} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

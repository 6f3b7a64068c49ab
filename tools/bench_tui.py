"""Dashboard cost benchmark: a generated 100,000-event recording replayed at max speed, with and without the UI.

    .venv/bin/python tools/bench_tui.py [--events 100000] [--rounds 3] [--json]

Reports, each measured in a fresh subprocess (so peak RSS is per mode) with the collector policy an `inspector`
process runs with (inspector/core/gcpolicy.py), in every mode alike:
  * no UI: the replay through the loop's observation pipeline with one cheap subscriber (wall time, peak RSS);
  * UI: the same replay driving the headless dashboard (`App.run_test`), until the final frame is folded, the
    session on the dashboard's event loop; and ("threaded") the same with the session on a thread of its own, as
    `inspector replay` and `run` run it (cli.run.run_tui): at max speed that costs more (the two threads share
    the GIL), which the ratio above does not show;
  * ratio UI / no UI (target <= 1.3, issue 17), both timed from the built session to its end; and the same
    ratio in process CPU time (on a shared machine other processes stretch wall time, not CPU time); ``--rounds``
    pairs of runs, one mode after the other, and the median round's figures (each round's ratios listed too);
  * with ``--one-core``, also the threaded run with its process held to one CPU (``os.sched_setaffinity``): a
    diagnostic, not a way to run the dashboard. The two threads take turns on the GIL either way; on two cores each
    hand-over moves the running thread's objects (the observations it relays, the refcounts every bytecode writes)
    between the cores' caches, on one they stay. What the threaded run costs over the one-loop run that this
    line does not is that placement, not dashboard work;
  * pause latency: replaying at max speed in the dashboard, the time from pressing space to the event counter
    standing still (target <= 100 ms), and how many events still arrived after the key press.

    .venv/bin/python tools/bench_tui.py --conversations 200 [--json]

The conversations variant (issue 21 §3): a proxied session of N interleaved conversations (and, to compare, of 3)
in the headless dashboard at 160x48; the frame cost, per frame, of folding one observation of a conversation and
repainting (the panes' `show`, plus rendering every visible line of the conversation list), with the panes on all
conversations and on one. The target: the cost at N is about the cost at 3 (it does not grow with conversations that
are not shown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def make_recording(path: Path, events: int) -> int:
    from inspector.testing.synthetic import generated_observations
    from inspector.tui.export import write_recording

    obs = generated_observations(events)
    write_recording(path, obs, {"type": "generated", "events": events})
    return sum(1 for o in obs if type(o).__name__ == "SSEEventSeen")


async def run_noui(path: Path) -> dict:
    from inspector.observe import observations as O
    from inspector.sessions import sources

    session = sources.replay_session(path, speed=math.inf)
    seen = []
    session.bus.subscribe(seen.append)  # what the dashboard's subscriber costs the loop: one append
    t0, c0 = time.perf_counter(), time.process_time()
    result = await session.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "status": result.status, "events": sum(type(o) is O.SSEEventSeen for o in seen)}


async def run_ui(path: Path, threaded: bool = False) -> dict:
    from inspector.sessions import sources
    from inspector.tui.app import InspectorApp

    started: list[float] = []

    def factory():
        # the clock starts once the session is built, as in run_noui (loading the recording is not the dashboard's)
        session = sources.replay_session(path, speed=math.inf)
        if threaded:  # as `inspector replay` runs it (cli.run.run_tui): the loop on a thread of its own
            session.threaded = True
        started.append(time.perf_counter())
        started.append(time.process_time())
        return session

    app = InspectorApp(factory, replay=True)
    async with app.run_test(size=(160, 48)) as pilot:
        # the end awaited, not polled: the bench's own wake-ups must not be the dashboard's cost. Polling every 5 ms
        # (as this did) woke the UI's event loop 200 times a second, each a GIL hand-over from a threaded session's
        # busy loop: ~0.1 s of the threaded run at 100k events (the ratio 0.03-0.05 higher than `inspector replay`'s)
        while app.session is None:  # noqa: ASYNC110 (the session is not built yet: the clock has not started)
            await asyncio.sleep(0.005)
        session_worker = next(w for w in app.workers if w.name.startswith("session-"))
        await session_worker.wait()  # (its task: the session has ended, and its end is posted to the app)
        while app.final_status is None:  # noqa: ASYNC110 (the end's message, already queued: a few yields)
            await asyncio.sleep(0)
        app.flush()
        wall, cpu = time.perf_counter() - started[0], time.process_time() - started[1]
        await pilot.pause()
        return {
            "wall": wall,
            "cpu": cpu,
            "status": app.final_status,
            "events": app.live.status.events,
            "flushes": app.flushes,
            "frames": app.budget.frames if hasattr(app, "budget") else None,  # (a tree from before the budget)
            "ticks": app.ticks,
        }


async def run_pause(path: Path, after_events: int) -> dict:
    from inspector.sessions import sources
    from inspector.tui.app import InspectorApp

    app = InspectorApp(lambda: sources.replay_session(path, speed=math.inf), replay=True)
    async with app.run_test(size=(160, 48)):
        while app.live.status.events < after_events:  # noqa: ASYNC110 (as above)
            await asyncio.sleep(0.001)
        shown_at_press = app.live.status.events
        t0 = time.perf_counter()
        app.simulate_key("space")  # the same path as a key press from the terminal
        last_value, last_change = app.live.status.events, t0
        stable_ticks, ticks = 0, app.ticks
        while stable_ticks < 5:  # unchanged for 5 frames (~170 ms): it stands still
            await asyncio.sleep(0.001)
            value = app.live.status.events
            if value != last_value:
                last_value, last_change, stable_ticks = value, time.perf_counter(), 0
            if app.ticks != ticks:
                ticks = app.ticks
                stable_ticks += 1
        latency = max(0.0, last_change - t0)
        state = app.session.controller.state if app.session else None
        app.session.controller.cancel()
        return {"latency": latency, "events_after_press": last_value - shown_at_press, "loop_state": state}


async def frame_cost(k: int, frames: int = 200) -> dict:
    """Mean ms per frame: fold one observation of a conversation, point the panes at the state, render the
    conversation list's visible lines; with the panes on all conversations, then on one (c1)."""
    from inspector.observe import observations as O
    from inspector.testing.conversations import interleaved_conversations
    from inspector.tui.app import InspectorApp

    obs = interleaved_conversations(k)
    app = InspectorApp(observations=obs, clock=lambda: 0.0)
    out: dict = {"conversations": k, "observations": len(obs)}
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        view = app.dashboard.conversations_view
        for label, chosen in (("all", None), ("one", "c1")):
            app.select_conversation(chosen)
            await pilot.pause()
            t = obs[-1].t
            t0 = time.perf_counter()
            for i in range(frames):
                t += 0.01
                cid = f"c{1 + (i * 7) % k}"  # side requests of varied conversations: every frame changes the table
                app.ingest([O.ExchangeForwarded(t, "POST", "/v1/messages/count_tokens", 200, 10, "ok", cid, "count")])
                for y in range(view.size.height):
                    view.render_line(y)
            out[f"{label}_ms"] = round((time.perf_counter() - t0) / frames * 1000, 3)
        # choosing the first conversation (whose view reads the whole history): the UI thread's part, and until ready
        app.select_conversation(None)
        t0 = time.perf_counter()
        app.select_conversation("c2")
        out["select_ui_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        await app.workers.wait_for_complete()
        while app.conversation_filter is None or app.conversation_filter.conversation != "c2":  # noqa: ASYNC110 (a bench polls the app)
            await asyncio.sleep(0.001)
        out["select_ready_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return out


async def run_conversations(k: int) -> dict:
    return {"small": await frame_cost(3), "large": await frame_cost(k)}


def child(mode: str, path: Path, after: int) -> None:
    try:  # the collector policy of an `inspector` process (its entry point applies it), in every mode alike
        from inspector.core.gcpolicy import tune_gc

        tune_gc()
    except ImportError:  # (a tree from before it: --compare)
        pass
    if mode.startswith("conv"):
        out = asyncio.run(run_conversations(int(mode[4:])))
    elif mode == "noui":
        out = asyncio.run(run_noui(path))
    elif mode == "ui":
        out = asyncio.run(run_ui(path))
    elif mode == "ui-threaded":
        out = asyncio.run(run_ui(path, threaded=True))
    elif mode == "ui-threaded-1cpu":  # (every thread started from here on inherits the mask: the session's too)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        out = asyncio.run(run_ui(path, threaded=True))
    else:
        out = asyncio.run(run_pause(path, after))
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(out))


def spawn(mode: str, path: Path, after: int) -> dict:
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--path", str(path), "--after", str(after)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--conversations", type=int, default=0, help="the conversations variant with N conversations")
    ap.add_argument(
        "--one-core",
        action="store_true",
        help="also the threaded run held to one CPU, each round (a diagnostic: what the threads' placement costs)",
    )
    ap.add_argument("--path")
    ap.add_argument("--after", type=int, default=20_000)
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="no-UI / UI pairs, one after the other (default 3): the ratio is the median round's (one run's ratio "
        "moves by +-0.3 on a shared machine)",
    )
    args = ap.parse_args()
    if args.child:
        child(args.child, Path(args.path), args.after)
        return 0
    if args.conversations:
        conv = spawn(f"conv{args.conversations}", Path("-"), 0)
        small, large = conv["small"], conv["large"]
        if args.json:
            print(json.dumps(conv, indent=2))
        else:
            print("frame cost (fold one observation + show + render the list's visible lines), ms per frame:")
            for c in (small, large):
                print(
                    f"  {c['conversations']:4d} conversations ({c['observations']:,} observations):"
                    f" panes on all {c['all_ms']:.2f} ms, on one {c['one_ms']:.2f} ms;"
                    f" choosing c2: {c['select_ui_ms']:.1f} ms on the UI thread, ready in {c['select_ready_ms']:.0f} ms"
                )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated.jsonl"
        t0 = time.perf_counter()
        n = make_recording(path, args.events)
        gen = time.perf_counter() - t0
        rounds = []
        threaded: list[float] = []  # the dashboard as `inspector replay` runs it: the session on a thread of its own
        threaded_cpu: list[float] = []
        one_core: list[float] = []  # (--one-core) the same, its process held to one CPU
        for _ in range(max(1, args.rounds)):  # (each round: the two modes one after the other, in fresh processes)
            noui = spawn("noui", path, 0)
            ui = spawn("ui", path, 0)
            th = spawn("ui-threaded", path, 0)
            assert noui["events"] == ui["events"] == th["events"] == n, (noui["events"], ui["events"], th["events"], n)
            rounds.append((noui, ui))
            threaded.append(th["wall"] / noui["wall"])
            threaded_cpu.append(th["cpu"] / noui["cpu"])
            if args.one_core:
                one = spawn("ui-threaded-1cpu", path, 0)
                assert one["events"] == n, (one["events"], n)
                one_core.append(one["wall"] / noui["wall"])
        pause = spawn("pause", path, min(args.after, n // 4))
    ratios = [u["wall"] / m["wall"] for m, u in rounds]
    mid = sorted(range(len(rounds)), key=ratios.__getitem__)[len(rounds) // 2]  # the round of the median ratio
    noui, ui = rounds[mid]
    report = {
        "events": n,
        "recording_mb": None,
        "generate_s": round(gen, 2),
        "rounds": len(rounds),
        "noui_s": round(noui["wall"], 2),
        "ui_s": round(ui["wall"], 2),
        "ratio": round(ratios[mid], 2),
        "noui_cpu_s": round(noui["cpu"], 2),
        "ui_cpu_s": round(ui["cpu"], 2),
        "cpu_ratio": round(ui["cpu"] / noui["cpu"], 2),
        "round_ratios": [round(r, 2) for r in ratios],
        "round_cpu_ratios": [round(u["cpu"] / m["cpu"], 2) for m, u in rounds],
        "noui_peak_rss_mb": noui["peak_rss_mb"],
        "ui_peak_rss_mb": ui["peak_rss_mb"],
        "ui_flushes": ui["flushes"],
        "ui_frames": ui["frames"],
        "pause_latency_ms": round(pause["latency"] * 1000, 1),
        "events_after_pause_press": pause["events_after_press"],
        "pause_loop_state": pause["loop_state"],
        "pause_peak_rss_mb": pause["peak_rss_mb"],
        "threaded_ratio": round(sorted(threaded)[len(threaded) // 2], 2),
        "round_threaded_ratios": [round(r, 2) for r in threaded],
        "round_threaded_cpu_ratios": [round(r, 2) for r in threaded_cpu],
        "one_core_ratio": round(sorted(one_core)[len(one_core) // 2], 2) if one_core else None,
        "round_one_core_ratios": [round(r, 2) for r in one_core],
        "ok": {
            "ratio<=1.3": ratios[mid] <= 1.3,
            "threaded<=1.3": sorted(threaded)[len(threaded) // 2] <= 1.3,
            "pause<=100ms": pause["latency"] <= 0.1,
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{n:,} events, replay at max speed")
        print(f"  no UI      {report['noui_s']:7.2f} s   peak RSS {report['noui_peak_rss_mb']:.0f} MB")
        print(
            f"  dashboard  {report['ui_s']:7.2f} s   peak RSS {report['ui_peak_rss_mb']:.0f} MB"
            f"   ({report['ui_flushes']} folds, {report['ui_frames']} frames)"
        )
        print(f"  ratio      {report['ratio']:7.2f}     (target <= 1.3)")
        if len(rounds) > 1:
            print(
                f"  rounds     {len(rounds)}: ratios {report['round_ratios']}, CPU {report['round_cpu_ratios']}"
                " (the lines above are the median round's)"
            )
        print(
            f"  CPU        {report['noui_cpu_s']:.2f} s vs {report['ui_cpu_s']:.2f} s: ratio {report['cpu_ratio']:.2f}"
            "  (process CPU time over the same span: steadier than wall time on a shared machine)"
        )
        print(
            f"  threaded   {report['threaded_ratio']:7.2f}     the dashboard as `inspector replay` runs it (the session on"
            f" a thread of its own): rounds {report['round_threaded_ratios']}, CPU {report['round_threaded_cpu_ratios']}"
        )
        if one_core:
            print(
                f"  one core   {report['one_core_ratio']:7.2f}     threaded, its process held to one CPU (a diagnostic):"
                f" rounds {report['round_one_core_ratios']}"
            )
        print(
            f"  pause      {report['pause_latency_ms']:7.1f} ms  from the key press to the counter standing still"
            f" ({report['events_after_pause_press']} events after the press; loop {report['pause_loop_state']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

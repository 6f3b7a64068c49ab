"""Benchmark: our streaming agent loop vs the ideal schedule vs the SDK's own tool runner, on `parse_date`.

    .venv/bin/python tools/bench_loop.py [--tool-seconds 1.0] [--speed 1] [--runs 300]

1. One run at real pacing, the three read_file calls made to take `--tool-seconds` each:
   - ours: `scenario_session("parse_date")`, read_file's ToolSpec.fn wrapped (still a sync function run in a thread);
   - ideal: from our own observations: every tool starts at its block's content_block_stop and takes exactly
     `--tool-seconds`; the next turn starts when both the stream (message_stop) and the last tool are done; later turns
     take what they took in our run;
   - the SDK: `client.beta.messages.tool_runner(stream=True, thread=False)` with a `beta_async_tool` read_file of the
     same duration, on the same scripted stream (ScenarioServer + make_client, same pacing): tools run one after
     another once the turn's stream has been consumed.
2. Dispatch delay: from the arrival of the read that completes a tool block's content_block_stop to the tool's
   `running` state, over `--runs` runs of turn 0 at max speed (3 tools per run), on `time.perf_counter`.

Targets (issue 3): ours within 5 % of the ideal; ours / SDK runner <= 0.6; p99 dispatch delay < 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import statistics
import sys
import time

from anthropic import beta_async_tool

from inspector.core.pacing import Pacer
from inspector.observe import observations as O
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.transport import ScenarioServer, make_client
from inspector.sessions.sources import scenario_session

SCENARIO = "parse_date"


def slow_session(speed: float, tool_seconds: float, **kw):
    s = scenario_session(SCENARIO, speed=speed, clock=time.perf_counter, **kw)
    spec = s.loop.tools["read_file"]
    original = spec.fn

    def read_file(args: dict):  # sync, like the built-in: runs in the executor's worker thread
        time.sleep(tool_seconds)
        return original(args)

    if tool_seconds > 0:
        s.loop.tools["read_file"] = dataclasses.replace(spec, fn=read_file)
    return s


async def run_ours(speed: float, tool_seconds: float) -> tuple[float, list[O.Observation], object]:
    s = slow_session(speed, tool_seconds)
    obs: list[O.Observation] = []
    s.bus.subscribe(obs.append)
    t0 = time.perf_counter()
    result = await s.run()
    wall = time.perf_counter() - t0
    assert result.status == "finished", result.error
    return wall, obs, result


def ideal_from(obs: list[O.Observation], tool_seconds: float) -> float:
    """The ideal wall time, from our run's stream timestamps (seconds since the loop started)."""
    turns = sorted({o.turn for o in obs if isinstance(o, O.TurnStarted)})
    end = next(o.t for o in obs if isinstance(o, O.LoopFinished))
    started = {o.turn: o.t for o in obs if isinstance(o, O.TurnStarted)}
    tool_blocks = {(o.turn, o.index) for o in obs if isinstance(o, O.ToolUse)}
    t = 0.0  # when the current turn starts in the ideal schedule
    for i, turn in enumerate(turns):
        offset = t - started[turn]  # shift our turn onto the ideal timeline
        stream_end = (
            next(
                o.t for o in obs if isinstance(o, O.SSEEventSeen) and o.turn == turn and o.event_type == "message_stop"
            )
            + offset
        )
        stops = [
            o.t + offset
            for o in obs
            if isinstance(o, O.SSEEventSeen)
            and o.turn == turn
            and o.event_type == "content_block_stop"
            and (turn, o.index) in tool_blocks
        ]
        turn_end = max([stream_end] + [s + tool_seconds for s in stops])
        if i == len(turns) - 1:
            # the last turn: whatever followed its stream in our run (appending, finishing) is not scheduling
            return turn_end + (end - (stream_end - offset))
        t = turn_end + (started[turns[i + 1]] - _turn_end_in_ours(obs, turn))
    return end


def _turn_end_in_ours(obs: list[O.Observation], turn: int) -> float:
    """When our turn's work was done: its stream and its tools (the gap to the next TurnStarted is bookkeeping)."""
    stream_end = next(
        o.t for o in obs if isinstance(o, O.SSEEventSeen) and o.turn == turn and o.event_type == "message_stop"
    )
    done = [
        o.t
        for o in obs
        if isinstance(o, O.ToolStateChanged) and o.turn == turn and o.state in ("succeeded", "failed", "timed_out")
    ]
    return max([stream_end] + done)


class StampingServer(ScenarioServer):
    """Notes when each request arrives (perf_counter)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.stamps: list[float] = []

    async def handler(self, request):
        self.stamps.append(time.perf_counter())
        return await super().handler(request)


async def run_sdk_runner(speed: float, tool_seconds: float) -> tuple[float, float]:
    """(wall time, time from the start to the request of turn 1: turn 0's stream + its tools)."""
    sc = get_scenario(SCENARIO)
    root = sc.workspace_path
    specs = sc.resolve_tools(root)
    server = StampingServer(sc, Pacer(speed))
    client = make_client(server)

    @beta_async_tool
    async def read_file(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: the file's path, relative to the workspace root
        """
        await asyncio.sleep(tool_seconds)
        return specs["read_file"].fn({"path": path})

    t0 = time.perf_counter()
    runner = client.beta.messages.tool_runner(
        model=sc.model,
        max_tokens=sc.max_tokens,
        system=sc.system,
        messages=[{"role": "user", "content": sc.prompt}],
        tools=[read_file],
        stream=True,
        thread=False,
    )
    turns = 0
    async for stream in runner:
        async for _event in stream:
            pass
        await stream.get_final_message()
        turns += 1
    wall = time.perf_counter() - t0
    assert [r.rejected for r in server.requests] == [None] * len(server.requests) and turns == 2
    await client.close()
    return wall, server.stamps[1] - t0


def dispatch_delays(obs: list[O.Observation]) -> list[float]:
    """Per tool: running time minus arrival time of the read completing its block's content_block_stop."""
    reads = {(o.turn, o.attempt, o.read_index): o.t for o in obs if isinstance(o, O.ReadReceived)}
    stops = {
        (o.turn, o.attempt, o.index): reads[(o.turn, o.attempt, o.sse.read_index)]
        for o in obs
        if isinstance(o, O.SSEEventSeen) and o.event_type == "content_block_stop"
    }
    out = []
    for o in obs:
        if isinstance(o, O.ToolStateChanged) and o.state == "running":
            out.append(o.t - stops[(o.turn, o.attempt, o.index)])
    return out


async def many_dispatch_delays(runs: int) -> list[float]:
    delays: list[float] = []
    for _ in range(runs):
        s = scenario_session(SCENARIO, speed=math.inf, clock=time.perf_counter, max_turns=1)
        obs: list[O.Observation] = []
        s.bus.subscribe(obs.append)
        result = await s.run()
        assert result.status == "finished"
        delays.extend(dispatch_delays(obs))
        await s.loop.client.close()
    return delays


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    k = max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))
    return v[k]


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool-seconds", type=float, default=1.0)
    ap.add_argument("--speed", type=float, default=1.0, help="pacing of the one-run comparison (1 = real time)")
    ap.add_argument("--runs", type=int, default=300, help="max-speed runs for the dispatch delay")
    args = ap.parse_args(argv)

    print(f"parse_date, 3 x read_file of {args.tool_seconds:g} s, pacing {args.speed:g}x, one run each")
    ours, obs, result = await run_ours(args.speed, args.tool_seconds)
    ideal = ideal_from(obs, args.tool_seconds)
    sdk, sdk_turn0 = await run_sdk_runner(args.speed, args.tool_seconds)
    stop0 = next(o.t for o in obs if isinstance(o, O.SSEEventSeen) and o.turn == 0 and o.event_type == "message_stop")
    block_stops = [
        o.t
        for o in obs
        if isinstance(o, O.SSEEventSeen) and o.turn == 0 and o.event_type == "content_block_stop" and o.index >= 1
    ]
    starts = [o.t for o in obs if isinstance(o, O.ToolStateChanged) and o.turn == 0 and o.state == "running"]
    ours_turn0 = next(o.t for o in obs if isinstance(o, O.AttemptStarted) and o.turn == 1)
    ideal_turn0 = max([stop0] + [b + args.tool_seconds for b in block_stops])
    print(
        f"  turn 0: tool blocks stop at {', '.join(f'{t:.3f}' for t in block_stops)} s, tools start at "
        f"{', '.join(f'{t:.3f}' for t in starts)} s, message_stop at {stop0:.3f} s"
    )
    print(f"  {'':12} {'whole run':>10} {'turn 0 (stream + tools)':>25}")
    print(f"  {'ours':12} {ours:9.3f}s {ours_turn0:24.3f}s")
    print(f"  {'ideal':12} {ideal:9.3f}s {ideal_turn0:24.3f}s")
    print(f"  {'SDK runner':12} {sdk:9.3f}s {sdk_turn0:24.3f}s")
    print(f"  ours/ideal   {ours / ideal:9.3f}  {ours_turn0 / ideal_turn0:24.3f}   (target <= 1.05)")
    print(f"  ours/SDK     {ours / sdk:9.3f}  {ours_turn0 / sdk_turn0:24.3f}   (target <= 0.60)")
    print(f"  ideal/SDK    {ideal / sdk:9.3f}  {ideal_turn0 / sdk_turn0:24.3f}   (the best any schedule can do)")
    one = dispatch_delays(obs)
    print(f"  dispatch delay in this run: {', '.join(f'{d * 1e3:.3f}' for d in one)} ms")

    delays = await many_dispatch_delays(args.runs)
    p50, p99, worst = pct(delays, 50), pct(delays, 99), max(delays)
    print(f"dispatch delay, block's last byte -> tool running, {len(delays)} tools over {args.runs} max-speed runs:")
    print(
        f"  p50 {p50 * 1e3:.3f} ms   p99 {p99 * 1e3:.3f} ms   max {worst * 1e3:.3f} ms   mean "
        f"{statistics.fmean(delays) * 1e3:.3f} ms  (target p99 < 2 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

"""A replay keeps the executor's concurrency rules: a tool recorded as not concurrency-safe (write_file) is still a
barrier the other calls of its turn may not overlap, though the replay runs no tool for real."""

from __future__ import annotations

import math
from pathlib import Path

from inspector.observe import observations as O
from inspector.sessions.sources import replay_session, scenario_session
from inspector.testing.loop import Observed, run_observed


def running_intervals(obs: Observed) -> dict[str, tuple[str, float, float]]:
    out: dict[str, tuple[str, float, float]] = {}
    for o in obs.of(O.ToolStateChanged):
        if "running" in o.times and o.state in ("succeeded", "failed", "timed_out"):
            out[o.id] = (o.name, o.times["running"], o.times[o.state])
    return out


def order_of_starts(obs: Observed) -> list[str]:
    return [o.name for o in obs.of(O.ToolStateChanged) if o.state == "running"]


async def test_replayed_exclusive_tool_is_still_a_barrier(tmp_path: Path) -> None:
    path = tmp_path / "mix.jsonl"
    original, obs1 = await run_observed(scenario_session("exclusive_mix", speed=math.inf, record=path))
    assert original.status == "finished"
    safety = {o.name: o.safe for o in obs1.of(O.ToolStateChanged)}
    assert safety == {"read_file": True, "write_file": False}

    replayed, obs2 = await run_observed(replay_session(path))
    assert replayed.status == "finished" and replayed.messages == original.messages
    assert {o.name: o.safe for o in obs2.of(O.ToolStateChanged)} == safety
    # the same admission order as the original run: the second read waited for the write
    assert order_of_starts(obs2) == order_of_starts(obs1)
    spans = running_intervals(obs2)
    writes = [(s, e) for name, s, e in spans.values() if name == "write_file"]
    reads = [(s, e) for name, s, e in spans.values() if name == "read_file"]
    assert writes and reads
    for ws, we in writes:
        for rs, re_ in reads:
            assert re_ <= ws or rs >= we, "a read overlapped the exclusive write in the replay"

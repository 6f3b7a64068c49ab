"""Issue 13: the demo teaches what streaming execution is for. On the virtual clock (nothing waits on the wall
clock), the default demo's tools take realistic time and starting them while the model still streams saves well
over a second; exclusive_mix's write is long enough that the read behind it is visibly queued."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inspector.agent.loop import LoopResult
from inspector.observe import observations as O
from inspector.sessions.sources import scenario_session
from inspector.testing.clock import VirtualTime
from inspector.testing.loop import Observed, run_observed


@pytest.fixture(autouse=True)
def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tools' real work (reading the small workspace files) runs inline, not in a worker thread: a thread's
    real duration could otherwise race the virtual clock (which jumps when the event loop is idle)."""
    from inspector.scenarios import model

    async def inline(fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    monkeypatch.setattr(model, "run_sync", inline)


async def _run_virtual(name: str, speed: float = 1.0) -> tuple[LoopResult, Observed]:
    vt = VirtualTime()
    s = scenario_session(name, speed=speed, clock=vt.clock)
    s.pacer.clock, s.pacer.sleeper = vt.clock, vt.sleep
    result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    return result, obs


def _tool_spans(obs: Observed, turn: int) -> dict[str, dict[str, Any]]:
    """tool id -> {"name", state -> first virtual time it was entered} for the tools of ``turn``."""
    spans: dict[str, dict[str, Any]] = {}
    for o in obs.of(O.ToolStateChanged):
        if o.turn == turn:
            spans.setdefault(o.id, {"name": o.name}).setdefault(o.state, o.t)
    return spans


def saved_seconds(obs: Observed, turn: int) -> tuple[float, dict[str, Any]]:
    """saved = (stream time + the tools' run times one after another) - the actual turn time, from observations."""
    attempt = max(o.attempt for o in obs.of(O.AttemptStarted) if o.turn == turn)
    start = next(o.t for o in obs.of(O.AttemptStarted) if (o.turn, o.attempt) == (turn, attempt))
    end = next(o.t for o in obs.of(O.AttemptEnded) if (o.turn, o.attempt) == (turn, attempt))
    spans = _tool_spans(obs, turn)
    runs = {tid: sp["succeeded"] - sp["running"] for tid, sp in spans.items()}
    last = max([end, *(sp["succeeded"] for sp in spans.values())])
    sequential = (end - start) + sum(runs.values())
    return sequential - (last - start), {"stream": end - start, "runs": runs, "spans": spans}


async def test_default_demo_saves_over_a_second_on_the_virtual_clock() -> None:
    result, obs = await _run_virtual("parse_date")
    saved, info = saved_seconds(obs, 0)
    names = {tid: sp["name"] for tid, sp in info["spans"].items()}
    runs: dict[str, list[float]] = {names[tid]: [] for tid in names}
    for tid, seconds in info["runs"].items():
        runs[names[tid]].append(seconds)
    assert runs["run_tests"] == [pytest.approx(1.5, abs=1e-6)]  # a test run of 1.5 s
    assert len(runs["read_file"]) == 3 and all(0.2 <= s <= 0.6 for s in runs["read_file"])  # reads of 0.2-0.6 s
    assert saved >= 1.0, info
    print(f"parse_date turn 1: stream {info['stream']:.2f} s, saved {saved:.2f} s")
    # the tools really started before the stream ended (that is where the time is saved)
    first_run = min(sp["running"] for sp in info["spans"].values())
    stream_end = next(o.t for o in obs.of(O.AttemptEnded) if o.turn == 0)
    assert first_run < stream_end


async def test_the_saving_scales_with_speed() -> None:
    _, obs1 = await _run_virtual("parse_date", 1.0)
    _, obs2 = await _run_virtual("parse_date", 2.0)
    s1, _ = saved_seconds(obs1, 0)
    s2, _ = saved_seconds(obs2, 0)
    assert s2 == pytest.approx(s1 / 2, rel=0.05)  # simulated durations are scenario seconds, scaled by the pacer


async def test_exclusive_mix_shows_the_barrier() -> None:
    _, obs = await _run_virtual("exclusive_mix")
    spans = list(_tool_spans(obs, 0).values())
    assert [sp["name"] for sp in spans] == ["read_file", "write_file", "read_file"]
    write, second_read = spans[1], spans[2]
    assert write["succeeded"] - write["running"] >= 1.2 - 1e-6
    assert "queued" in second_read
    queued_for = second_read["running"] - second_read["queued"]
    assert queued_for >= 0.5  # visibly queued behind the write
    assert second_read["running"] >= write["succeeded"] - 1e-9  # and it never overtook the write

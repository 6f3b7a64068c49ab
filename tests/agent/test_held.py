"""Pauses and steps as observations: every control is a ControlApplied, and every time the loop holds the stream
back is a StreamHeld ... StreamReleased interval that covers exactly the time held (a fake clock that only the test
moves: nothing else makes time pass)."""

from __future__ import annotations

import asyncio
import math

import pytest

from inspector.observe import observations as O
from inspector.sessions.sources import scenario_session
from inspector.testing.loop import Observed, assert_no_leftovers, assert_valid_history

TIMEOUT = 20.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def held_pairs(obs: Observed) -> list[tuple[O.StreamHeld, O.StreamReleased]]:
    items = obs.of(O.StreamHeld, O.StreamReleased)
    assert len(items) % 2 == 0
    pairs: list[tuple[O.StreamHeld, O.StreamReleased]] = []
    for h, r in zip(items[::2], items[1::2], strict=True):  # strictly alternating, for the same stream position
        assert isinstance(h, O.StreamHeld) and isinstance(r, O.StreamReleased)
        assert (h.turn, h.attempt) == (r.turn, r.attempt)
        pairs.append((h, r))
    return pairs


async def test_held_intervals_cover_exactly_the_time_held() -> None:
    clock = FakeClock()
    s = scenario_session("parse_date", speed=math.inf, clock=clock)
    obs = Observed(s.bus)
    c = s.controller

    def holds() -> int:
        return len(obs.of(O.StreamHeld))

    # pause in turn 2, at its third SSE event (inline: before the loop's next step)
    paused_turn2: list[O.Observation] = []

    def hook(o: O.Observation) -> None:
        if not paused_turn2 and isinstance(o, O.SSEEventSeen) and o.turn == 1 and len(obs.sse(1)) == 3:
            paused_turn2.append(o)
            c.pause()

    obs.on(hook)
    c.pause()  # before the start: held before the first request
    task = asyncio.ensure_future(s.run())
    async with asyncio.timeout(TIMEOUT):
        await obs.wait_for(lambda: holds() == 1)
        clock.now += 2.0
        c.step("event")  # one event, then held again (by the step)
        await obs.wait_for(lambda: holds() == 2)
        clock.now += 1.5
        c.step("block")  # to the end of the next block, then held again
        await obs.wait_for(lambda: holds() == 3)
        clock.now += 3.0
        c.resume()
        await obs.wait_for(lambda: holds() == 4)
        clock.now += 6.0  # the user looks at turn 2 for six seconds
        c.resume()
        result = await task
    assert result.status == "finished", result.error
    pairs = held_pairs(obs)
    assert [(h.by, r.held) for h, r in pairs] == [("pause", 2.0), ("step", 1.5), ("step", 3.0), ("pause", 6.0)]
    assert [(h.turn, h.attempt) for h, _ in pairs] == [(0, None), (0, 0), (0, 0), (1, 0)]
    for h, r in pairs:
        assert r.t - h.t == pytest.approx(r.held)
    # the clock moved only while held: the intervals cover all of the run's time, and nothing else
    assert sum(r.held for _, r in pairs) == pytest.approx(obs.of(O.LoopFinished)[0].t) == 12.5
    # nothing happened inside a held interval but the controls and the state changes they cause
    for h, r in pairs:
        inside = obs.items[obs.items.index(h) + 1 : obs.items.index(r)]
        assert all(isinstance(o, (O.ControlApplied, O.LoopStateChanged)) for o in inside), inside
    # the first read consumed after a hold of a stream may have waited in the socket: it says so; no other read does
    expected: list[O.ReadReceived] = []
    for h, r in pairs:
        after = [x for x in obs.items[obs.items.index(r) :] if isinstance(x, O.ReadReceived)]
        if h.attempt is not None and after and after[0] not in expected:
            expected.append(after[0])
    assert expected and [x for x in obs.of(O.ReadReceived) if x.held] == expected
    # every control is an observation, in order (the pause before the start is the first hold, not a control)
    assert [o.control for o in obs.of(O.ControlApplied)] == ["step_event", "step_block", "resume", "pause", "resume"]
    assert_valid_history(result.messages)
    assert_no_leftovers()


async def test_a_cancel_while_held_closes_the_interval() -> None:
    clock = FakeClock()
    s = scenario_session("parse_date", speed=math.inf, clock=clock)
    obs = Observed(s.bus)
    obs.on(lambda o: s.controller.pause() if isinstance(o, O.SSEEventSeen) and len(obs.sse(0)) == 4 else None)
    task = asyncio.ensure_future(s.run())
    async with asyncio.timeout(TIMEOUT):
        await obs.wait_for(lambda: len(obs.of(O.StreamHeld)) == 1)
        clock.now += 4.0
        s.controller.cancel()
        result = await task
    assert result.status == "cancelled"
    ((h, r),) = held_pairs(obs)
    assert h.by == "pause" and r.held == 4.0
    assert [o.control for o in obs.of(O.ControlApplied)] == ["pause", "cancel"]
    assert_no_leftovers()


async def test_speed_changes_are_controls() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    done: list[O.Observation] = []

    def hook(o: O.Observation) -> None:
        if not done and isinstance(o, O.SSEEventSeen):
            done.append(o)
            s.controller.set_speed(2.0)
            s.controller.set_speed(math.inf)

    obs.on(hook)
    async with asyncio.timeout(TIMEOUT):
        result = await s.run()
    assert result.status == "finished"
    assert [(o.control, o.detail) for o in obs.of(O.ControlApplied)] == [("speed", "2x"), ("speed", "max")]

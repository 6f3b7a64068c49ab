"""Controls: pause / resume / step(event | block | turn) / cancel / speed, driven the way the UI drives them.

Synchronisation is on observations only (a bus subscriber sets an asyncio.Event; hooks act inline, before the
loop's next step). "Nothing happens while paused" is checked by letting the event loop spin many times with data
available at max speed: if the loop were not paused it would move on within a few iterations.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from typing import Any, TypeGuard

import pytest

from inspector.agent.executor import ToolCall, ToolState
from inspector.agent.loop import LoopResult
from inspector.core.pacing import SPEED_LADDER
from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render import render_turn
from inspector.scenarios.transport import ScenarioServer
from inspector.sessions.sources import Session, scenario_session
from inspector.testing.clock import VirtualTime
from inspector.testing.loop import (
    Observed,
    assert_no_leftovers,
    assert_valid_history,
    history_tool_ids,
    with_tool,
)

TIMEOUT = 20.0


async def spin(n: int = 200) -> None:
    """Give every other task many chances to run (not a timed sleep)."""
    for _ in range(n):
        await asyncio.sleep(0)


def _server(s: Session) -> ScenarioServer:
    """The scripted server scenario_session serves the session from (``Session.server``)."""
    server = s.server
    assert isinstance(server, ScenarioServer)
    return server


def _calls(s: Session) -> list[ToolCall]:
    """The calls the loop's executor was given (asserting the loop has made its executor)."""
    assert s.loop._executor is not None
    return s.loop._executor.calls()


def start(session: Session) -> asyncio.Task[LoopResult]:
    return asyncio.ensure_future(session.run())


async def finish(task: asyncio.Task[LoopResult]) -> LoopResult:
    async with asyncio.timeout(TIMEOUT):
        return await task


def pause_at(obs: Observed, session: Session, pred: Callable[[O.Observation], bool]) -> None:
    """Pause inline when the first observation matching `pred` is published."""
    done: list[O.Observation] = []

    def hook(o: O.Observation) -> None:
        if not done and pred(o):
            done.append(o)
            session.controller.pause()

    obs.on(hook)


def is_sse(o: O.Observation, event_type: str | None = None, turn: int | None = 0) -> TypeGuard[O.SSEEventSeen]:
    return (
        isinstance(o, O.SSEEventSeen)
        and (turn is None or o.turn == turn)
        and (event_type is None or o.event_type == event_type)
    )


async def wait_paused(obs: Observed, session: Session) -> None:
    await obs.wait_for(lambda: session.controller.state == LoopState.PAUSED)


# ------------------------------------------------------------------------------------------------------ pause
async def test_pause_stops_event_flow_while_the_transport_has_data() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: is_sse(o) and len(obs.sse(0)) == 5)
    task = start(s)
    await wait_paused(obs, s)
    assert s.controller.paused
    n, n_obs, reads = s.controller.events_processed, len(obs.sse()), len(obs.of(O.ReadReceived))
    assert n == 5
    served = _server(s).responses[0]
    assert served.plan is not None
    assert served.state == "streaming" and served.reads_sent < len(served.plan.reads)  # more data is ready
    await spin()
    assert s.controller.events_processed == n and len(obs.sse()) == n_obs
    assert len(obs.of(O.ReadReceived)) == reads  # not even reading ahead
    assert not task.done()
    s.controller.resume()
    result = await finish(task)
    assert result.status == "finished"
    assert_valid_history(result.messages)
    assert s.controller.events_processed > n


async def test_pause_at_block_stop_queues_the_tool_without_starting_it() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: isinstance(o, O.BlockClosed) and o.turn == 0 and o.index == 1)
    task = start(s)
    await wait_paused(obs, s)
    await spin()
    call = _calls(s)[0]
    assert call.state is ToolState.QUEUED  # paused: no queued tool starts
    assert "running" not in obs.tool_states(call.id)
    s.controller.toggle_pause()
    assert not s.controller.paused
    result = await finish(task)
    assert result.status == "finished" and [call.state] == [ToolState.SUCCEEDED]  # (a list: mypy keeps it narrowed)


async def test_pause_lets_running_tools_finish_but_starts_nothing_new() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    release = asyncio.Event()
    original = s.loop.tools["read_file"].fn

    async def read_file(args: dict[str, Any]) -> object:
        await release.wait()
        return await asyncio.to_thread(original, args)

    with_tool(s, "read_file", read_file)
    obs = Observed(s.bus)
    task = start(s)
    await obs.wait_for(lambda: s.controller.state == LoopState.RUNNING_TOOLS)
    s.controller.pause()
    release.set()
    await obs.wait_for(lambda: all(c.state is ToolState.SUCCEEDED for c in s.loop.all_tools))
    await spin()
    assert not obs.of(O.TurnStarted)[1:]  # the next turn waits for resume
    assert len(_server(s).requests) == 1
    s.controller.resume()
    result = await finish(task)
    assert result.status == "finished" and len(_server(s).requests) == 2


# ------------------------------------------------------------------------------------------------------- step
async def test_step_event_advances_exactly_one_sse_event() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: is_sse(o) and len(obs.sse(0)) == 3)
    task = start(s)
    await wait_paused(obs, s)
    for _ in range(12):  # across reads (2 events per read) and block boundaries
        n, seen = s.controller.events_processed, len(obs.sse())
        s.controller.step("event")
        await obs.wait_for(lambda: s.controller.events_processed > n and s.controller.state == LoopState.PAUSED)
        await spin()
        assert s.controller.events_processed == n + 1
        assert len(obs.sse()) == seen + 1
    assert [o.state for o in obs.of(O.LoopStateChanged)].count(LoopState.STEPPING) >= 12
    s.controller.resume()
    result = await finish(task)
    assert result.status == "finished"
    assert_valid_history(result.messages)


@pytest.mark.parametrize("presses", [2, 5])
async def test_quick_step_presses_each_step_once(presses: int) -> None:
    """Presses of `n` that come before the previous step's event did (a user pressing five times quickly): each is
    one more event, none lost. Five quick presses moved three events (a press during a step replaced it)."""
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: is_sse(o) and len(obs.sse(0)) == 3)
    task = start(s)
    await wait_paused(obs, s)
    n = s.controller.events_processed
    for _ in range(presses):  # all before the loop runs again: each press comes while the first step is under way
        s.controller.step("event")
    await obs.wait_for(lambda: s.controller.events_processed >= n + presses and s.controller.state == LoopState.PAUSED)
    await spin()
    assert s.controller.events_processed == n + presses
    s.controller.step("event")  # and a press after them is one event again
    await obs.wait_for(lambda: s.controller.events_processed > n + presses and s.controller.state == LoopState.PAUSED)
    await spin()
    assert s.controller.events_processed == n + presses + 1
    s.controller.resume()
    result = await finish(task)
    assert result.status == "finished"


async def test_step_block_stops_right_after_the_next_content_block_stop() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    s.controller.pause()  # paused before the start: nothing is sent
    task = start(s)
    await wait_paused(obs, s)
    await spin()
    assert _server(s).requests == [] and s.controller.events_processed == 0
    for index in range(4):  # text, then three tool_use blocks
        before = len(obs.sse())
        s.controller.step("block")
        await obs.wait_for(lambda: len(obs.sse()) > before and s.controller.state == LoopState.PAUSED)
        await spin()
        new = obs.sse()[before:]
        assert new[-1].event_type == "content_block_stop" and new[-1].index == index
        assert [e.event_type for e in new].count("content_block_stop") == 1
        assert len(obs.sse()) == before + len(new)  # and nothing after it
    # the three tools were submitted at their stops while stepping
    assert [c.state for c in _calls(s)] == [ToolState.SUCCEEDED] * 3 or all(
        c.state in (ToolState.RUNNING, ToolState.SUCCEEDED) for c in _calls(s)
    )
    assert not [o for o in obs.sse() if o.event_type == "message_stop"]
    s.controller.resume()
    result = await finish(task)
    assert result.status == "finished"
    assert_valid_history(result.messages)


async def test_step_turn_runs_to_the_end_of_the_turn_then_pauses() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    s.controller.pause()
    task = start(s)
    await wait_paused(obs, s)
    s.controller.step("turn")
    await obs.wait_for(lambda: bool(obs.of(O.TurnEnded)) and s.controller.state == LoopState.PAUSED)
    await spin()
    assert [t.turn for t in obs.of(O.TurnEnded)] == [0]
    assert obs.sse()[-1].event_type == "message_stop"
    assert [t.turn for t in obs.of(O.TurnStarted)] == [0]  # turn 1 not started
    assert len(_server(s).requests) == 1
    msgs = s.loop.messages
    assert len(msgs) == 3 and [b["type"] for b in msgs[2]["content"]] == ["tool_result"] * 4  # run_tests + 3 reads
    s.controller.step("turn")
    result = await finish(task)  # the last turn ends the loop
    assert result.status == "finished" and result.turns == 2
    assert_valid_history(result.messages)


# ----------------------------------------------------------------------------------------------------- cancel
async def test_cancel_mid_stream_closes_the_response_and_keeps_a_valid_history() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: is_sse(o, "content_block_delta") and o.index == 0 and len(obs.sse(0)) == 6)
    task = start(s)
    await wait_paused(obs, s)
    assert _server(s).closed_early == 0
    s.controller.cancel()
    result = await finish(task)
    assert result.status == "cancelled" and s.controller.state == LoopState.CANCELLED
    assert _server(s).closed_early == 1 and _server(s).responses[0].state == "closed_early"
    assert _server(s).closed_early_event.is_set()
    assert_valid_history(result.messages)
    # the partial text that was shown is kept, nothing else
    assert [m["role"] for m in result.messages] == ["user", "assistant"]
    assert [b["type"] for b in result.messages[1]["content"]] == ["text"]
    fin = obs.of(O.LoopFinished)[-1]
    assert fin.status == "cancelled" and obs.items[-1] is fin
    assert_no_leftovers()


async def test_cancel_from_outside_while_streaming_is_never_lost() -> None:
    """The UI cancels from its own task while events flow at full speed (no pause first): at whatever point it
    lands, the loop ends cancelled with a valid history and the live response closed."""
    for k in range(2, 80, 5):
        s = scenario_session("parse_date", speed=math.inf)
        obs = Observed(s.bus)
        go = asyncio.Event()

        def hook(o: O.Observation, obs: Observed = obs, go: asyncio.Event = go, k: int = k) -> None:
            if is_sse(o, turn=None) and len(obs.sse()) == k:
                go.set()

        obs.on(hook)
        task = start(s)
        await go.wait()
        s.controller.cancel()
        result = await finish(task)
        assert result.status == "cancelled", (k, result.status)
        assert_valid_history(result.messages)
        last = _server(s).responses[-1]
        assert last.state in ("closed_early", "complete"), (k, last.state)
        assert _server(s).closed_early == (last.state == "closed_early")
        assert_no_leftovers()


async def test_cancel_mid_stream_with_a_running_tool() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    never = asyncio.Event()
    cancelled: list[str] = []

    async def blocked(args: dict[str, Any]) -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(args["path"])
            raise

    with_tool(s, "read_file", blocked)
    obs = Observed(s.bus)
    pause_at(obs, s, lambda o: isinstance(o, O.BlockOpened) and o.turn == 0 and o.index == 3)
    task = start(s)
    await wait_paused(obs, s)
    run_tests, first = _calls(s)[:2]  # parse_date: run_tests, then read_file src/dates.py
    assert first.state is ToolState.RUNNING
    s.controller.cancel()
    result = await finish(task)
    assert result.status == "cancelled"
    assert cancelled == ["src/dates.py"]
    assert _server(s).responses[0].state == "closed_early"
    assert_valid_history(result.messages)
    assert history_tool_ids(result.messages) == [run_tests.id, first.id]  # block 3 never closed: not in the history
    tr = result.messages[2]["content"][1]
    assert tr["tool_use_id"] == first.id and tr["is_error"] is True and "cancel" in tr["content"]
    assert [first.state] == [ToolState.CANCELLED]  # (a list: mypy keeps the state narrowed above)
    assert_no_leftovers()


async def test_cancel_mid_tool_after_the_stream() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    never = asyncio.Event()
    running: list[str] = []
    original = s.loop.tools["read_file"].fn

    async def read_file(args: dict[str, Any]) -> object:
        if args["path"] == "tests/test_dates.py":
            running.append(args["path"])
            await never.wait()
        if inspect.iscoroutinefunction(original):  # the scenario file gives read_file a simulated duration
            return await original(args)
        return await asyncio.to_thread(original, args)

    with_tool(s, "read_file", read_file)
    obs = Observed(s.bus)
    task = start(s)
    await obs.wait_for(
        lambda: (
            s.controller.state == LoopState.RUNNING_TOOLS
            and bool(running)
            and sum(c.state is ToolState.SUCCEEDED for c in s.loop.all_tools) == 3  # run_tests + 2 reads
        )
    )
    s.controller.cancel()
    result = await finish(task)
    assert result.status == "cancelled"
    assert _server(s).responses[0].state == "complete"  # the stream had ended normally
    assert_valid_history(result.messages)
    results = result.messages[2]["content"]
    assert [r.get("is_error", False) for r in results] == [False, False, True, False]
    assert [c.state for c in result.tools] == [
        ToolState.SUCCEEDED,
        ToolState.SUCCEEDED,
        ToolState.CANCELLED,
        ToolState.SUCCEEDED,
    ]
    assert len(_server(s).requests) == 1
    assert_no_leftovers()


async def test_cancel_while_paused_between_turns_does_not_duplicate_the_turn() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    obs = Observed(s.bus)
    s.controller.pause()
    task = start(s)
    await wait_paused(obs, s)
    s.controller.step("turn")
    await obs.wait_for(lambda: bool(obs.of(O.TurnEnded)) and s.controller.state == LoopState.PAUSED)
    s.controller.cancel()
    result = await finish(task)
    assert result.status == "cancelled"
    assert len(result.messages) == 3
    assert_valid_history(result.messages)
    assert len(_server(s).requests) == 1


async def test_cancel_during_retry_backoff_sends_nothing_of_the_failed_attempt() -> None:
    s = scenario_session("overloaded_midstream", speed=4.0)
    obs = Observed(s.bus)
    task = start(s)
    await obs.wait_for(lambda: s.controller.state == LoopState.WAITING_RETRY)
    s.controller.cancel()
    result = await finish(task)
    assert result.status == "cancelled"
    assert result.messages == [{"role": "user", "content": s.loop.config.prompt}]
    assert len(_server(s).requests) == 1
    assert_no_leftovers()


async def test_controls_after_the_end_are_harmless() -> None:
    s = scenario_session("weather", speed=math.inf)
    obs = Observed(s.bus)
    result = await finish(start(s))
    n = len(obs.items)
    for action in (s.controller.pause, s.controller.resume, lambda: s.controller.step("event"), s.controller.cancel):
        action()
    assert len(obs.items) == n and s.controller.state == LoopState.FINISHED and result.status == "finished"
    with pytest.raises(ValueError):
        s.controller.step("word")  # type: ignore[arg-type]


async def test_the_loops_public_control_method_is_what_the_controller_drives() -> None:
    """AgentLoop.control (public: LoopController calls it, no private member reached from outside): a pause holds
    the stream and a resume releases it, each published once as ControlApplied; an unknown control or step unit is
    refused before anything is published or changed."""
    s = scenario_session("weather", speed=math.inf)
    obs = Observed(s.bus)
    loop = s.loop
    done: list[O.Observation] = []

    def hook(o: O.Observation) -> None:
        if not done and is_sse(o):
            done.append(o)
            loop.control("pause")

    obs.on(hook)
    task = start(s)
    await wait_paused(obs, s)
    assert loop.paused and s.controller.paused
    n = len(obs.items)
    with pytest.raises(ValueError, match="unknown control"):
        loop.control("jump")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown step unit"):
        loop.control("step", "word")  # type: ignore[arg-type]
    await spin()
    assert len(obs.items) == n and loop.paused
    loop.control("resume")
    result = await finish(task)
    assert result.status == "finished" and not loop.paused
    assert [o.control for o in obs.of(O.ControlApplied)] == ["pause", "resume"]


# ------------------------------------------------------------------------------------------------------ speed
def test_faster_slower_change_the_pacer_speed() -> None:
    s = scenario_session("weather", speed=1.0)
    assert _server(s).pacer is s.pacer  # the transport is paced by the controller's pacer
    c = s.controller
    c.faster()
    assert (c.speed, c.speed_label, s.pacer.speed) == (2.0, "2x", 2.0)
    c.slower()
    c.slower()
    assert c.speed == 0.5 and c.speed_label == "0.5x"
    for _ in range(10):
        c.faster()
    assert math.isinf(c.speed) and c.speed_label == "max"
    for _ in range(10):
        c.slower()
    assert c.speed == SPEED_LADDER[0]
    c.set_speed(3)
    assert c.speed == 3.0
    with pytest.raises(ValueError):
        c.set_speed(0)
    s.close()


async def test_speed_change_takes_effect_at_once() -> None:
    """A speed change wakes the pacer's sleepers: the request is sent at 0.25x and the scripted server starts its
    wait for the first byte (4x the planned delay, in virtual time that only a wake-up can end); the controller then
    switches to max: the sleeper is woken, recomputes its rest at max speed, and nothing is slept from then on."""
    s = scenario_session("parse_date", speed=0.25)
    vt = VirtualTime(hold=True)  # no sleep ends on its own: the run can only finish if the speed change wakes it
    s.pacer.clock, s.pacer.sleeper = vt.clock, vt.sleep
    task = start(s)
    await vt.started(1)
    plan = render_turn(get_scenario("parse_date"), 0, 0)
    assert vt.asked == [pytest.approx(plan.header_delay / 0.25)] and not task.done()
    s.controller.set_speed(math.inf)
    result = await finish(task)
    assert result.status == "finished"
    assert len(vt.asked) == 1 and vt.slept == []  # the one wait was cut short; no other wall time was asked for
    assert s.pacer.requested > 6.0  # the whole script was paced (scenario seconds), just at max speed

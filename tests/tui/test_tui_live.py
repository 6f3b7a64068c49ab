"""The dashboard on the real agent loop (bundled scenarios, in-process SDK transport): controls change the loop."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.sessions import sources
from inspector.testing.dashboard import Factory, flushed, wait_for
from inspector.tui.app import InspectorApp

SIZE = (140, 42)


def scenario_app(
    name: str = "parse_date", *, speed: float = math.inf, paused: bool = False, **kw: Any
) -> tuple[InspectorApp, Factory[sources.Session]]:
    def make() -> sources.Session:
        session = sources.scenario_session(name, speed=speed)
        if paused:
            session.controller.pause()  # nothing is consumed until the test steps or resumes
        return session

    factory = Factory(make)
    return InspectorApp(factory, **kw), factory


def sse(app: InspectorApp) -> list[O.SSEEventSeen]:
    return [o for o in app.history.observations if isinstance(o, O.SSEEventSeen)]


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """Every tool_use is answered by exactly one tool_result, in order, in the next user message."""
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        ids = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        nxt = messages[i + 1]
        assert nxt["role"] == "user"
        assert [b["tool_use_id"] for b in nxt["content"] if b.get("type") == "tool_result"] == ids


async def test_the_whole_scenario_reaches_every_pane() -> None:
    app, factory = scenario_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.final_status == "finished", 30, "the loop to finish")
        await flushed(app)
        s = app.live
        assert s.status.loop_state == LoopState.FINISHED and s.status.events == len(sse(app)) > 50
        assert len(s.tools) == 4 and all(t.state == "succeeded" for t in s.tools.values())  # run_tests + 3 reads
        assert app.events_view.row_count == len(s.events)
        assert app.tools_view.row_count >= 4 and app.blocks_view.row_count > 10
        assert [i[0] for i in s.transcript][:2] == ["turn", "text"]
        assert app.status_bar.state is s


async def test_step_event_advances_exactly_one_event() -> None:
    app, factory = scenario_app(paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(factory.sessions) and len(app.history) >= 1, 10, "the loop to start")
        await flushed(app, 2)
        assert len(sse(app)) == 0
        for expected in (1, 2, 3):
            await pilot.press("n")
            await wait_for(lambda: len(sse(app)) >= expected, 10, f"event {expected}")
            await wait_for(lambda: factory.last.controller.state == LoopState.PAUSED, 10, "the loop to pause again")
            await flushed(app, 2)
            assert len(sse(app)) == expected  # exactly one per step
            assert app.live.status.events == expected


async def test_step_block_stops_right_after_a_block_stop() -> None:
    app, factory = scenario_app(paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(factory.sessions) and len(app.history) >= 1, 10, "the loop to start")
        for _ in range(2):
            n = len(sse(app))
            await pilot.press("b")
            await wait_for(
                lambda: factory.last.controller.state == LoopState.PAUSED and len(sse(app)) > n, 10, "the step to end"
            )
            await flushed(app, 2)
            assert sse(app)[-1].event_type == "content_block_stop"


async def test_step_turn_runs_the_tools_and_stops_at_the_turn_end() -> None:
    app, factory = scenario_app(paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(factory.sessions) and len(app.history) >= 1, 10, "the loop to start")
        await pilot.press("t")
        await wait_for(lambda: any(isinstance(o, O.TurnEnded) for o in app.history.observations), 20, "turn end")
        await wait_for(lambda: factory.last.controller.state == LoopState.PAUSED, 10, "the loop to pause")
        await flushed(app, 2)
        n = len(sse(app))
        assert (
            all(t.state == "succeeded" for t in app.live.tools.values()) and len(app.live.tools) == 4
        )  # run_tests + 3 reads
        await flushed(app, 3)
        assert len(sse(app)) == n  # and stays there


async def test_pause_really_stops_events_and_resume_goes_on() -> None:
    app, factory = scenario_app(speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: len(sse(app)) >= 3, 20, "some events")
        await pilot.press("space")
        await wait_for(lambda: factory.last.controller.state == LoopState.PAUSED, 10, "the loop to pause")
        await flushed(app, 2)
        n = len(sse(app))
        assert app.live.status.loop_state == LoopState.PAUSED
        await flushed(app, 6)  # 200 ms at 30 Hz: at 1x the scenario sends an event every ~30-60 ms
        assert len(sse(app)) == n
        factory.last.controller.set_speed(math.inf)
        await pilot.press("space")
        await wait_for(lambda: app.final_status == "finished", 30, "the loop to finish")
        assert len(sse(app)) > n


async def test_cancel_mid_tool_leaves_a_valid_history(monkeypatch: pytest.MonkeyPatch) -> None:
    # the hanging tool's own 1.5 s timeout must not end it before the key press lands: on a loaded machine it once
    # did (the tool ended 'timed_out', not 'cancelled'); here it would time out after 10 minutes
    from inspector.scenarios import bundled

    real = bundled.get_scenario

    def long_timeout(name: str) -> Any:
        s = real(name)
        tools = [dataclasses.replace(t, timeout=600.0) for t in s.simulated_tools]
        return dataclasses.replace(s, simulated_tools=tools)

    monkeypatch.setattr(bundled, "get_scenario", long_timeout)
    app, factory = scenario_app("tool_hangs")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(
            lambda: any(t.name == "wait_for_ci" and t.state == "running" for t in app.live.tools.values()),
            20,
            "the hanging tool to run",
        )
        await pilot.press("c")
        await wait_for(lambda: app.final_status == "cancelled", 10, "the cancel")
        await flushed(app)
        finished = [o for o in app.history.observations if isinstance(o, O.LoopFinished)]
        assert len(finished) == 1 and finished[0].status == "cancelled"
        assert_valid_history(list(finished[0].messages))
        assert app.live.status.loop_state == LoopState.CANCELLED
        assert {t.name: t.state for t in app.live.tools.values()}["wait_for_ci"] == "cancelled"
        await pilot.press("r")  # and the scenario can start again
        await wait_for(lambda: len(factory.sessions) == 2 and app.session_running, 10, "the restart")
        await pilot.press("c")


async def test_faults_end_in_a_state_not_a_traceback() -> None:
    for name in ("overloaded_midstream", "invalid_json", "max_tokens_cut", "tool_raises", "drop_mid_json"):
        app, factory = scenario_app(name)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.final_status is not None, 30, f"{name} to end")
            await flushed(app)
            assert app.live.status.finished in ("finished", "error")
            assert app.live.diagnostics or name == "tool_raises"


async def test_speed_controls_drive_the_pacer() -> None:
    app, factory = scenario_app(speed=1.0, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(factory.sessions) and len(app.history) >= 1, 10, "the loop to start")
        await pilot.press("plus", "plus")
        assert factory.last.controller.speed == 4.0
        await pilot.press("minus")
        assert factory.last.controller.speed == 2.0
        await flushed(app)
        assert app.status_bar.info.speed == "2x"
        await pilot.press("c")
        await wait_for(lambda: app.final_status == "cancelled", 10, "the cancel")


async def test_keys_enabled_or_disabled_as_the_loop_runs_and_ends_are_updated_in_place() -> None:
    """The footer's keys follow the loop (step keys on while it runs, off once it is cancelled) without being mounted
    again: a recompose laid the whole screen out again (~50 ms of the UI thread) at each start, pause and end."""
    from textual.widgets._footer import FooterKey

    from inspector.tui.widgets.footer import KeyFooter

    app, factory = scenario_app(paused=True)
    async with app.run_test(size=SIZE) as pilot:
        footer = app.dashboard.query_one(KeyFooter)

        def step_key() -> FooterKey | None:  # (None while the footer is being composed)
            return next((k for k in footer.query(FooterKey) if k.action == "step('event')"), None)

        def step_disabled() -> bool | None:
            key = step_key()
            return None if key is None else key.has_class("-disabled")

        await wait_for(
            lambda: app.session_running and app.live.status.loop_state == LoopState.PAUSED, 20, "a paused loop"
        )
        await wait_for(lambda: step_disabled() is False, 10, "the step key enabled")
        keys, composed = list(footer.query(FooterKey)), footer.recomposed
        await pilot.press("c")
        await wait_for(lambda: app.final_status == "cancelled", 10, "the cancel")
        await wait_for(lambda: step_disabled() is True, 10, "the step key disabled")
        await pilot.pause()
        assert footer.recomposed == composed and list(footer.query(FooterKey)) == keys  # the same widgets
        key = step_key()
        assert key is not None and key._disabled and key.tooltip  # what a click reads, and the hint kept
        await pilot.click(key)  # a disabled key clicked says why, as before
        await wait_for(lambda: bool(app._notifications), 5, "the reason")

"""What a frame of the dashboard costs, as behaviour (the figures are in tools/bench_tui.py, never timed here):
the panes are repainted as the frame budget allows (tui/budget.py) whatever the fold per frame, and the timeline's
height stops asking for a screen relayout once it fills its pane."""

from __future__ import annotations

from typing import Any

import pytest

from inspector.observe import observations as O
from inspector.state.fold import DashboardState
from inspector.testing.synthetic import generated_observations
from inspector.tui import app as app_module
from inspector.tui.app import InspectorApp
from inspector.tui.budget import MAX_INTERVAL, SHARE_K
from inspector.tui.widgets.base import SectionView
from inspector.tui.widgets.timeline import TurnFigures

SIZE = (160, 48)


class FrameClock:
    """The app's frame clock, stepped by the test (a frame every `step` seconds)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def count_calls(obj: object, name: str) -> list[int]:
    calls: list[int] = []
    inner = getattr(obj, name)

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return inner(*a, **k)

    setattr(obj, name, counted)
    return calls


class CostlyShow:
    """The dashboard's `show`, made to cost `cost` seconds of the test's frame clock (a frame of a known cost)."""

    def __init__(self, app: InspectorApp, clock: FrameClock, cost: float) -> None:
        self.calls = 0
        self.cost = cost
        inner = app.dashboard.show

        def costly(*a: Any, **k: Any) -> Any:
            self.calls += 1
            clock.t += self.cost
            return inner(*a, **k)

        app.dashboard.show = costly  # type: ignore[method-assign]


async def test_a_firehose_repaints_the_panes_within_the_frame_budget_and_a_calm_stream_every_frame() -> None:
    """6,000 observations a second, folded 200 at a time, with frames that cost 20 ms: every observation is folded at
    every tick, but the panes are repainted only once the budget allows (SHARE_K x 20 ms after the last frame: a few
    times a second, never fewer than twice); frames that cost nothing (a calm stream) repaint at every tick.
    (Replaces the firehose detector's BUSY_HZ rule: the budget follows what a frame costs, not the rate.)"""
    obs = generated_observations(4000)
    app = InspectorApp(clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE):
        app.frame_clock = clock
        show = CostlyShow(app, clock, 0.020)
        fed = 0
        for _ in range(60):  # two seconds at 30 ticks a second
            clock.t += 1 / 30
            app._pending.extend(obs[fed : fed + 200])
            fed += 200
            app.flush(force=False)
            assert app.live.n == fed  # the fold never waits for the budget
        interval = max(1 / 30, min(MAX_INTERVAL, SHARE_K * 0.020))
        assert 2 * 2 <= show.calls <= 2 / interval + 1, show.calls
        # a calm stream whose frames cost nothing measurable: every tick repaints
        show.cost = 0.0
        clock.t += 1.0
        show.calls = 0
        for _ in range(30):
            clock.t += 1 / 30
            app._pending.extend(obs[fed : fed + 3])
            fed += 3
            app.flush(force=False)
        assert app.live.n == fed
        assert show.calls == 30


async def test_a_burst_is_shown_at_the_first_quiet_tick_whatever_the_budget() -> None:
    """A burst (a network read's worth, a step) folded while the budget holds the frames back is shown at the next
    tick that brings nothing new: only a flood (something new at every tick) waits for the budget."""
    obs = generated_observations(1000)
    app = InspectorApp(clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE):
        app.frame_clock = clock
        show = CostlyShow(app, clock, 0.3)
        app.ingest(obs[:300])  # a costly frame: the next one not before the maximum wait
        shown = show.calls
        clock.t += 1 / 30
        app._pending.extend(obs[300:340])  # a burst, mid-budget: folded, not shown
        app.flush(force=False)
        assert show.calls == shown and app.live.n == 340
        clock.t += 1 / 30
        app.flush(force=False)  # a quiet tick: shown at once
        assert show.calls == shown + 1
        assert not app.budget.due(clock.t)
        clock.t += 1 / 30
        app.flush(force=False)  # quiet, nothing new to show: no frame
        assert show.calls == shown + 1


async def test_textuals_paint_counts_in_the_frame_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout and paint Textual does after a frame (the screen's update, timed by DashboardScreen) is charged to
    that frame: paints that took 40 ms each hold the next frame back SHARE_K times as long. (Textual is pinned; if
    its screen update hook is renamed, the paint is no longer seen and this test fails.)"""
    from textual.screen import Screen

    obs = generated_observations(600)
    app = InspectorApp(clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE) as pilot:
        app.ingest(obs[:300])
        await pilot.pause()
        assert app.dashboard.take_paint_seconds() > 0  # (real time: the hook ran)
        app.frame_clock = clock
        inner = Screen._on_timer_update

        def slow_paint(screen: Screen[object]) -> None:  # Textual's update, made to take 40 ms of the frame clock
            clock.t += 0.040
            inner(screen)

        show = CostlyShow(app, clock, 0.0)
        monkeypatch.setattr(Screen, "_on_timer_update", slow_paint)
        t0 = clock.t
        app.ingest(obs[300:400])  # a forced frame at t0 (costing nothing itself), then its paint
        await pilot.pause()
        monkeypatch.undo()
        app.flush(force=False)  # (charges what no tick has charged yet)
        budget = app.budget
        assert budget.started is not None and budget.started >= t0
        assert budget.cost >= 0.039  # the frame itself cost nothing on this clock: that is the paint
        wait = min(MAX_INTERVAL, SHARE_K * budget.cost)
        shown = show.calls
        clock.t = budget.started + wait - 0.01  # before the budget allows the next frame
        app._pending.extend(obs[400:450])
        app.flush(force=False)
        assert show.calls == shown and app.live.n == 450
        clock.t = budget.started + wait + 0.01
        app._pending.extend(obs[450:460])
        app.flush(force=False)
        assert show.calls == shown + 1


async def test_a_control_key_and_the_end_of_the_session_paint_at_once_whatever_the_budget() -> None:
    """Mid-flood, with the budget holding the panes back (a frame that cost 0.4 s: the next one not before the
    maximum wait), pressing space pauses at once and the status line says so in the same frame; the session's end
    shows the final state at once too."""
    from inspector.testing.dashboard import Factory, FakeSession, wait_for

    obs = generated_observations(1500)
    cut = len(obs) // 2  # mid-stream: the loop is still streaming
    factory = Factory(lambda: FakeSession(obs[:cut]))
    app = InspectorApp(factory, clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(factory.sessions) and factory.last.started, what="the session to start")
        await wait_for(lambda: len(app.history) >= cut, what="observations to be folded")
        app.frame_clock = clock
        show = CostlyShow(app, clock, 0.4)
        app.flush()  # a costly frame: the budget now holds the next one back
        assert not app.budget.due(clock.t)
        shown = show.calls
        await pilot.press("space")
        assert factory.last.controller.calls == ["toggle_pause"]
        assert show.calls == shown + 1  # painted at once, though the budget was not due
        assert app.status_bar.info is not None and app.status_bar.state is app.live
        assert not app.budget.due(clock.t)
        for o in obs[cut:]:  # the rest of the stream, its end included, in one flood
            factory.last.bus.publish(o)
        assert not app.budget.due(clock.t)
        factory.last.finish()
        await wait_for(lambda: app.final_status == "finished", what="the end of the session")
        assert show.calls == shown + 2  # the final frame, at once
        assert app.status_bar.state is app.live and app.live.status.finished == "finished"
        assert app.live.n == len(obs)


async def test_the_rate_threshold_sits_far_above_a_real_stream() -> None:
    """A real stream (up to ~600 observations a second: a read, an event and a delta per token) is never a
    firehose, even when a frame comes late and folds what came meanwhile at once."""
    obs = generated_observations(400)
    app = InspectorApp(clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE):
        app.frame_clock = clock
        app.flush(force=False)
        shows = count_calls(app.dashboard, "show")
        clock.t += 0.4  # a frame 0.4 s late: 240 observations arrived meanwhile (200 tokens a second)
        app._pending.extend(obs[:240])
        app.flush(force=False)
        for k in range(10):  # then the same rate, frame after frame
            clock.t += 1 / 30
            app._pending.extend(obs[240 + 20 * k : 260 + 20 * k])
            app.flush(force=False)
        assert len(shows) == 11
    assert app_module.BUSY_RATE >= 600


def turns_of(obs: list[O.Observation], turns: int) -> list[O.Observation]:
    """The observations up to the start of turn `turns` (a session `turns` turns long, the last one ended)."""
    seen = 0
    for i, o in enumerate(obs):
        if isinstance(o, O.TurnStarted):
            seen += 1
            if seen > turns:
                return obs[:i]
    return obs


async def test_the_timeline_stops_relayouting_the_screen_once_it_fills_its_pane() -> None:
    """Each new turn used to ask for more rows (all turns in full), a full-screen relayout per turn for the whole
    session although the CSS caps the timeline; now its height stops at the terminal's, and counting it reads only
    the newest turns."""
    obs = generated_observations(12_000, tool_every=100)
    assert sum(isinstance(o, O.TurnStarted) for o in obs) >= 25
    app = InspectorApp(observations=turns_of(obs, 3), clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        timeline = app.timeline
        pane_height = app.size.height  # (the CSS caps it lower still)
        relayouts: list[bool] = []
        refresh = timeline.refresh

        def recorded(*a: Any, layout: bool = False, **k: Any) -> Any:
            relayouts.append(layout)
            return refresh(*a, layout=layout, **k)

        timeline.refresh = recorded  # type: ignore[method-assign]
        for turns in range(4, 26):
            app.ingest(turns_of(obs, turns)[len(app.history) :])
            await pilot.pause()
        assert timeline._wanted <= pane_height
        # the rows it asks for reach the cap within the first turns; after that no turn relayouts the screen
        assert timeline._wanted == pane_height
        # (it used to relayout until the asked rows reached the terminal's height; the CSS cap, reached within the
        # first 3 turns here, now ends the relayouts: test_the_timeline_asks_for_no_relayout_once_its_css_cap_holds_it)
        assert not any(relayouts[-8:]), relayouts


async def test_the_timeline_asks_for_no_relayout_once_its_css_cap_holds_it() -> None:
    """The CSS caps the timeline (max-height: 60% of the Tools pane, ~12 rows at 160x48) well below the terminal's
    height that its wanted rows grow to: once its drawn height is below what it asks for, a turn that asks for
    more rows changes nothing on screen and must not relayout the screen (each relayout is a full-screen reflow;
    it used to cost one per turn until the wanted rows reached the terminal's height)."""
    obs = generated_observations(12_000, tool_every=100)
    app = InspectorApp(observations=turns_of(obs, 1), clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        timeline = app.timeline
        asked: list[tuple[bool, int, int]] = []  # (relayout, drawn height, rows asked before): by `show` only
        refresh, show = timeline.refresh, timeline.show
        showing: list[bool] = []

        def recorded(*a: Any, layout: bool = False, **k: Any) -> Any:
            if showing:  # (not Textual's own refreshes: a size that changed, new styles)
                asked.append((layout, timeline.size.height, timeline._wanted))
            return refresh(*a, layout=layout, **k)

        def shown(*a: Any, **k: Any) -> Any:
            showing.append(True)
            try:
                return show(*a, **k)
            finally:
                showing.pop()

        timeline.refresh = recorded  # type: ignore[method-assign]
        timeline.show = shown  # type: ignore[method-assign]
        for turns in range(2, 26):
            app.ingest(turns_of(obs, turns)[len(app.history) :])
            await pilot.pause()
        capped = [i for i, (_, height, wanted) in enumerate(asked) if 0 < height < wanted]
        assert capped, asked  # the cap was reached (and the wanted rows kept growing past it)
        assert timeline._wanted > timeline.size.height
        assert not any(layout for layout, _, _ in asked[capped[0] :]), asked
        assert any(layout for layout, _, _ in asked[: capped[0]])  # growing up to the cap did relayout
        # what it draws fills the capped height
        assert len(timeline.render().plain.splitlines()) >= timeline.size.height


async def test_a_timeline_frame_recomputes_the_changed_turns_only_and_draws_the_same() -> None:
    """A long session (25+ turns): a frame where only the newest turn moved computes that turn's figures, not every
    turn's (it used to recompute the whole history twice a frame); what it draws is what a fresh timeline draws."""
    from inspector.tui.widgets import timeline as timeline_module

    obs = generated_observations(12_000, tool_every=100)
    app = InspectorApp(observations=turns_of(obs, 25), clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        timeline = app.timeline
        assert len(app.live.turns) == 25
        timeline.render()
        computed: list[int] = []
        inner = timeline_module.figures

        def counted(state: DashboardState, turn: int, now: float) -> TurnFigures:
            computed.append(turn)
            return inner(state, turn, now)

        timeline_module.figures = counted
        try:
            start = len(app.history)
            for o in turns_of(obs, 26)[start : start + 40]:  # the 26th turn begins
                app.ingest([o])
                cached = timeline.render().plain
                timeline._figs = {}
                assert timeline.render().plain == cached
            computed.clear()
            app.ingest(turns_of(obs, 26)[start + 40 : start + 41])
            timeline.render()
        finally:
            timeline_module.figures = inner
        assert set(computed) <= {max(app.live.turns)}, computed


def plain_rows(view: SectionView) -> list[str]:
    return [strip.text for strip in view._lines]


async def test_blocks_and_assistant_frames_walk_only_what_can_still_change_and_draw_what_a_full_rebuild_draws() -> None:
    """Folded a few observations at a time, the Blocks and Assistant panes keep the rows of ended attempts (finished
    tools, turn rules, notes) and walk only the tail; at every step their rows are those of a rebuild from scratch
    (the pane reset, as a restart does), time travel and the end of the loop included."""
    obs = generated_observations(1200, tool_every=150)
    app = InspectorApp(clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        blocks, assistant = app.blocks_view, app.assistant_view
        step, fed, checks = 7, 0, 0
        while fed < len(obs):
            app.ingest(obs[fed : fed + step])
            fed += step
            step = 3 + (step * 7) % 97  # varied batches: a cut anywhere in a turn
            incremental = (plain_rows(blocks), plain_rows(assistant))
            for view in (blocks, assistant):
                view.reset()
            app.show()
            assert (plain_rows(blocks), plain_rows(assistant)) == incremental
            checks += 1
        assert checks > 20 and app.live.status.finished
        order = app.live.block_order
        assert blocks._done[0] == len(order)  # the loop has ended: every block is kept
        # the travel state is another state: its own rows, from scratch, then kept again
        app.set_cursor(app.history.event_count // 2)
        travelled = (plain_rows(blocks), plain_rows(assistant))
        for view in (blocks, assistant):
            view.reset()
        app.show()
        assert (plain_rows(blocks), plain_rows(assistant)) == travelled
        # mid-session the kept prefix reaches the attempt that is still running
        app.set_cursor(None)
        cut = next(i for i in range(len(obs) // 2, len(obs)) if isinstance(obs[i], O.BlockDelta))
        mid = InspectorApp(observations=obs[: cut + 1], clock=lambda: 0.0)  # inside a streaming attempt
        async with mid.run_test(size=SIZE) as pilot2:
            await pilot2.pause()
            state = mid.live
            running = state.current_attempt
            assert running is not None and running.status is None
            tail = sum(1 for k in state.block_order if (k[0], k[1]) == (running.turn, running.attempt))
            assert mid.blocks_view._done[0] >= len(state.block_order) - tail


FIRST_FRAME = r"""
import sys, threading
from inspector.testing.dashboard import Factory, FakeSession
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.app import InspectorApp

def painted(app):
    loaded = [m for m in ("genai_prices", "inspector.state.costs", "inspector.record.accounting") if m in sys.modules]
    threads = [t.name for t in threading.enumerate() if t.name == "inspector-prices"]
    print("FIRST_FRAME", ",".join(loaded + threads))
    app.exit(0)

async def first_frame(pilot):
    pilot.app.call_after_refresh(painted, pilot.app)

app = InspectorApp(Factory(lambda: FakeSession(parse_date_observations())), clock=lambda: 0.0)
app.run(headless=True, auto_pilot=first_frame, size=(160, 48))
"""


def test_the_first_frame_loads_nothing_of_the_pricing() -> None:
    """Pricing (genai-prices, its warm-up thread, the cost modules) waits for the first frame: the status line has
    nothing to price before an attempt ends (tools/bench_startup.py measures the first frame's CPU)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TEXTUAL_THEME", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME], capture_output=True, text=True, env=env, cwd=root, timeout=120
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("FIRST_FRAME")), None)
    assert line is not None, proc.stderr[-2000:]
    assert line.split() == ["FIRST_FRAME"], line


async def test_the_status_line_styles_follow_a_theme_change() -> None:
    """The status line keeps its component styles between renders (some 30 reads a render, 10 renders a second):
    a new theme drops them, and the line is drawn in the new theme's colors."""
    app = InspectorApp(observations=generated_observations(50), clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.status_bar
        names = sorted(bar.COMPONENT_CLASSES)
        before = [bar.cstyle(n) for n in names]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        after = [bar.cstyle(n) for n in names]
        assert after == [bar.get_component_rich_style(n, partial=True) for n in names]
        assert after != before


async def test_the_panes_component_styles_are_read_once_and_follow_a_theme_change() -> None:
    """The panes read their component styles (some ten per rendered row) from a cache: frames that render hundreds
    of new rows read each style from Textual's styles at most once; a new theme drops them, and the rows are drawn in
    its colors."""
    from inspector.tui.widgets.base import LineView

    obs = generated_observations(3000, tool_every=300)
    app = InspectorApp(observations=obs[:1500], clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        views = [v for v in app.dashboard.query(LineView)]
        reads: list[tuple[int, tuple[str, ...]]] = []
        for view in views:
            inner = view.get_component_rich_style

            def counted(*names: str, _inner: Any = inner, _view: int = id(view), **k: Any) -> Any:
                reads.append((_view, names))
                return _inner(*names, **k)

            view.get_component_rich_style = counted  # type: ignore[method-assign]
        app.ingest(obs[1500:])  # new rows everywhere: rendered with the styles already read
        for view in views:
            for y in range(view.size.height):
                view.render_line(y)
        # a style not needed before is read once (a row of a kind not drawn yet); none is read twice
        assert len(reads) == len(set(reads)) <= 12, reads
        events = app.events_view
        names = ["ev--num", "ev--time", "ev--summary"]
        before = [events.cstyle(n) for n in names]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        after = [events.cstyle(n) for n in names]
        assert after != before
        for view in views:
            del view.get_component_rich_style  # (the instance's counter: back to the class's method)
        assert after == [events.get_component_rich_style(n, partial=True) for n in names]

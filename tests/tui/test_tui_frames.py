"""What a frame of the dashboard costs, as behaviour (the figures are in tools/bench_tui.py, never timed here):
under a firehose the panes are repainted a few times a second whatever the fold per frame, and the timeline's
height stops asking for a screen relayout once it fills its pane."""

from __future__ import annotations

from inspector.observe import observations as O
from inspector.testing.synthetic import generated_observations
from inspector.tui import app as app_module
from inspector.tui.app import BUSY_FOLDS, BUSY_HZ, InspectorApp

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

    def counted(*a, **k):
        calls.append(1)
        return inner(*a, **k)

    setattr(obj, name, counted)
    return calls


async def test_a_firehose_folded_in_small_batches_repaints_the_panes_a_few_times_a_second() -> None:
    """6,000 observations a second, folded 200 at a time (a frame that came late, a loaded machine: fewer than the
    old per-fold threshold of 300): the panes are repainted at most BUSY_HZ times a second, the status line stays
    live, every observation is folded; once the stream calms down, every frame repaints again."""
    obs = generated_observations(4000)
    app = InspectorApp(clock=lambda: 0.0)
    clock = FrameClock()
    async with app.run_test(size=SIZE):
        app.frame_clock = clock
        shows = count_calls(app.dashboard, "show")
        statuses = count_calls(app.dashboard, "show_status")
        fed = 0
        for _ in range(60):  # two seconds at 30 frames a second
            clock.t += 1 / 30
            app._pending.extend(obs[fed : fed + 200])
            fed += 200
            app.flush(force=False)
        assert app.live.n == fed
        assert 1 <= len(shows) <= BUSY_FOLDS + 2 * BUSY_HZ, len(shows)  # (the first frames, then BUSY_HZ)
        assert len(statuses) >= 2 * 5  # the counters: ~10 times a second
        # a calm stream (a real API: tens of observations a second), a second after the firehose: every frame
        clock.t += 1.0
        shows.clear()
        for _ in range(30):
            clock.t += 1 / 30
            app._pending.extend(obs[fed : fed + 3])
            fed += 3
            app.flush(force=False)
        assert app.live.n == fed
        assert len(shows) == 30


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

        def recorded(*a, layout: bool = False, **k):
            relayouts.append(layout)
            return refresh(*a, layout=layout, **k)

        timeline.refresh = recorded  # type: ignore[method-assign]
        for turns in range(4, 26):
            app.ingest(turns_of(obs, turns)[len(app.history) :])
            await pilot.pause()
        assert timeline._wanted <= pane_height
        # the rows it asks for reach the cap within the first turns; after that no turn relayouts the screen
        assert timeline._wanted == pane_height
        assert any(relayouts) and not any(relayouts[-8:]), relayouts


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

        def counted(state, turn, now):
            computed.append(turn)
            return inner(state, turn, now)

        timeline_module.figures = counted  # type: ignore[assignment]
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
            timeline_module.figures = inner  # type: ignore[assignment]
        assert set(computed) <= {max(app.live.turns)}, computed


def plain_rows(view) -> list[str]:
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
        before = [bar.c(n) for n in names]
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        after = [bar.c(n) for n in names]
        assert after == [bar.get_component_rich_style(n, partial=True) for n in names]
        assert after != before

"""What the dashboard says is true: HTTP tries the SDK retried, the user's holds marked and left out of the timing,
time travel that shows the moment's figures beside the live loop state, and a status line that stays in view when a
pane is maximized. Snapshots (fixed size, frozen clock) and Pilot checks on the rendered status line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.testing.synthetic import INTRO, StreamScript, parse_date_observations, rate_limited_observations
from inspector.tui.app import InspectorApp

WIDE = (140, 42)

SnapCompare = Callable[..., bool]  # pytest-textual-snapshot's snap_compare fixture


def app_of(observations: list[O.Observation], **kw: Any) -> InspectorApp:
    return InspectorApp(observations=list(observations), clock=lambda: 0.0, **kw)


def held_stream(*, release: bool) -> list[O.Observation]:
    """A text turn paused by the user for 6 s after its second delta (still paused unless `release`)."""
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt(ttfb=0.3)
    s.message_start()
    s.block_start(0, {"type": "text", "text": ""})
    for piece in INTRO[:2]:
        s.delta(0, piece)
    if not release:
        s.emit(O.ControlApplied(s.t, "pause"))
        s.emit(O.StreamHeld(s.t, 0, 0, "pause"))
        s.state(LoopState.PAUSED, "paused by user")
        s.wait(6.0)
        return s.obs
    s.hold(6.0)
    for piece in INTRO[2:]:
        s.delta(0, piece)
    s.block_stop(0)
    s.message_delta("end_turn", 30)
    s.message_stop()
    s.end_attempt("complete", None, "text_finish")
    return s.obs


def until_waiting_retry() -> list[O.Observation]:
    obs = rate_limited_observations()
    k = next(i for i, o in enumerate(obs) if isinstance(o, O.LoopStateChanged) and o.state == LoopState.WAITING_RETRY)
    return obs[: k + 1]


def status_text(app: InspectorApp) -> str:
    return str(app.status_bar.render())


# --- snapshots -------------------------------------------------------------------------------------------------------


class TestTruthSnapshots:
    def test_time_travel_while_paused(self, snap_compare: SnapCompare) -> None:
        """The loop is paused mid tool JSON; the cursor is back at event 12: the moment's figures (no stop reason,
        fewer tokens, tools still streaming) and `loop paused` beside them."""
        assert snap_compare(app_of(parse_date_observations("mid_tool_json"), cursor=12), terminal_size=WIDE)

    def test_sdk_waiting_to_retry_after_429(self, snap_compare: SnapCompare) -> None:
        """HTTP 429 before the stream: the try's row in the SSE pane, the SDK's wait on the timeline, the reason in
        the status line."""
        assert snap_compare(app_of(until_waiting_retry()), terminal_size=WIDE)

    def test_rate_limited_shows_four_requests(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(app_of(rate_limited_observations()), terminal_size=WIDE)

    def test_paused_stream_is_marked_and_not_timed(self, snap_compare: SnapCompare) -> None:
        """Paused for 6 s, then resumed: the hold's rows in the SSE pane and its span on the timeline; the figures
        are the stream's own (first token well under a second)."""
        assert snap_compare(app_of(held_stream(release=True)), terminal_size=WIDE)


# --- behaviour ------------------------------------------------------------------------------------------------------


async def test_time_travel_shows_the_moment_and_the_live_loop_state() -> None:
    obs = parse_date_observations()
    obs = obs[: next(i for i, o in enumerate(obs) if isinstance(o, O.AttemptEnded))]
    obs.append(O.LoopStateChanged(obs[-1].t, LoopState.PAUSED, "paused by user"))
    app = app_of(obs)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        live = status_text(app)
        assert "stop tool_use" in live and "❚❚ paused" in live
        app.set_cursor(12)
        app.flush()
        await pilot.pause()
        past = status_text(app)
        total = app.history.event_count
        assert f"◀ viewing event 12 of {total} · loop paused" in past
        assert "● streaming" in past  # the state at that moment
        assert "stop " not in past  # no stop reason yet at event 12
        tin, tout = app.cursor_state.tokens()  # type: ignore[union-attr]
        assert f"{tin:,} in / {tout:,} out" in past and (tin, tout) != app.live.tokens()


async def test_a_maximized_pane_keeps_the_loop_state_visible() -> None:
    app = app_of(parse_date_observations("mid_tool_json"))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen.maximized is not None
            assert app.status_bar.region.height >= 1 and app.status_bar.region.width == WIDE[0]
            assert "❚❚ paused" in status_text(app)
            await pilot.press(key)  # back
            await pilot.pause()
            assert app.screen.maximized is None


async def test_waiting_retry_status_names_the_http_error() -> None:
    app = app_of(until_waiting_retry())
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = status_text(app)
        assert "↻ waiting to retry" in text
        assert "HTTP 429 rate_limit_error · SDK retries in 0.2 s" in text


async def test_paused_figures_are_the_streams_own() -> None:
    app = app_of(held_stream(release=True))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = status_text(app)
        a = app.live.current_attempt
        assert a is not None and a.first_token is not None and a.first_token < 1.0
        assert "first token 350 ms" in text and "held 6.00 s (not counted)" in text


# --- the timeline's span -----------------------------------------------------------------------------------------


async def test_the_timeline_header_spans_the_whole_run_at_any_size() -> None:
    """Issue 18 §4: at 80x24 after a cancel the header said `span 1.00 s` (the run spans 3.41 s): with no room to
    draw a turn in full it measured the drawn turns, i.e. none."""
    from inspector.tui.widgets.timeline import figures, run_span

    obs = parse_date_observations(variant="cancelled")
    heads = {}
    for size in ((80, 24), (160, 48)):
        app = app_of(obs)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            header = app.timeline.render().plain.split("\n")[0]
            figs = [figures(app.live, t, app.now()) for t in sorted(app.live.turns)]
            heads[size] = header[header.index("span ") :]
    want = f"span {run_span(figs):.2f} s"
    assert want != "span 1.00 s"
    assert heads == {(80, 24): want, (160, 48): want}


# --- the notes' wording is the tui's ---------------------------------------------------------------------------


async def test_notes_are_worded_by_the_tui() -> None:
    """Issue 17 §4: the fold keeps what happened (0-based data); the Assistant pane words it, counting from 1."""
    from inspector.tui.widgets.assistant import note_text

    app = app_of(parse_date_observations(variant="overloaded"))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        view = app.assistant_view
        text = "\n".join(view.render_line(y).text for y in range(view.row_count))
    assert "✗ attempt 1 of turn 2 failed: overloaded_error" in text
    assert "⚠ retry: attempt 2 of turn 2" in text
    assert note_text(("loop_finished", "cancelled", "cancelled by user")) == "loop cancelled: cancelled by user"
    assert note_text(("attempt_ended", 0, 1, "cancelled", None)) == "attempt 2 of turn 1 cancelled"


async def test_a_streaming_tool_line_follows_its_buffer_in_time_travel() -> None:
    """The Assistant pane's "receiving input" line is the block's partial parse: cached by the tool's version only,
    it showed the live buffer (or an older one) when time travel went back (found by the parallel_buffers snapshot)."""
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt()
    s.message_start()
    s.block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}})
    for piece in ['{"location": "Pa', "ris, Fr", 'ance"']:
        s.delta(0, piece)
    app = app_of(s.obs)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()

        def line() -> str:
            view = app.assistant_view
            return next(t for y in range(view.size.height) if "receiving input" in (t := view.render_line(y).text))

        assert 'location="Paris, France"' in line()
        app.set_cursor(app.history.event_count - 2)  # before the last two deltas
        await pilot.pause()
        assert 'location="Pa"' in line()


# --- 80x24: the status line's fields whole ---------------------------------------------------------------------------


def painted_status(app: InspectorApp) -> list[str]:
    """The status line's two lines as painted (the strips Textual draws, not a fresh render)."""
    bar = app.status_bar
    return [bar.render_line(y).text.rstrip() for y in range(2)]


async def test_at_80x24_the_status_line_says_the_cancel_and_cuts_no_field_in_the_middle() -> None:
    """At 80x24 the second line was cut at the end (`tok 3,400 in / 38 out   cancelled…`, `stop max…`): the reason
    of a cancel or an error was lost, and a long figure could be cut in the middle of its number; time travel said
    `◀ viewing event 150 of 151 · loop finishe…`. Fields are now whole or left out (`…`); the reason is said."""
    app = app_of(parse_date_observations(variant="cancelled"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        first, second = painted_status(app)
        assert "cancelled by user" in second and "⊘ cancelled" in first
        for field in second.split("   ")[0].split(" · "):
            assert re.fullmatch(r" ?(TTFB|1st token|gap|tok|stop) [^…]+( …)?", field), (field, second)
        total = app.history.event_count
        app.set_cursor(12)
        app.flush()
        await pilot.pause()
        first, second = painted_status(app)
        assert f"◀ event 12/{total} · loop cancelled" in first, first
        assert len(first) <= 80 and len(second) <= 80

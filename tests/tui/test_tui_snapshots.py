"""What the dashboard looks like, frozen as SVG snapshots (deterministic: fake clock, no animations).

Synthetic sessions (`inspector.testing.synthetic`) give exact moments: opening, paused mid tool JSON, tools running in
parallel, finished, faults. `TestRealScenarios` drives the real loop on built-in scenarios at max speed with a
clock that stands still (every time reads 0), so the frame depends only on the scripted bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from inspector.observe import observations as O
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.app import InspectorApp

WIDE = (140, 42)
SMALL = (80, 24)

SnapCompare = Callable[..., bool]  # pytest-textual-snapshot's snap_compare fixture


def synthetic(stop: str | None = None, variant: str = "ok", **kw: Any) -> InspectorApp:
    return InspectorApp(observations=parse_date_observations(stop, variant=variant), clock=lambda: 0.0, **kw)


class TestLiveMoments:
    """The parse_date session at the moments a user stops to look at."""

    def test_opening_frame(self, snap_compare: SnapCompare) -> None:
        """The request is sent; nothing has arrived yet."""
        assert snap_compare(synthetic("opening"), terminal_size=WIDE)

    def test_paused_mid_tool_json(self, snap_compare: SnapCompare) -> None:
        """Paused while the second read_file input streams: its buffer, fragments and the partial preview."""
        assert snap_compare(synthetic("mid_tool_json"), terminal_size=WIDE)

    def test_three_tools_running_with_timeline(self, snap_compare: SnapCompare) -> None:
        """The stream has ended; three read_file calls run in parallel, drawn on the timeline."""
        assert snap_compare(synthetic("tools_running"), terminal_size=WIDE)

    def test_finished_session(self, snap_compare: SnapCompare) -> None:
        """Both turns done: the answer, the tool lines inline, 'saved vs sequential'."""
        assert snap_compare(synthetic(), terminal_size=WIDE)

    def test_small_terminal(self, snap_compare: SnapCompare) -> None:
        """80x24 still shows every pane, the status line and the footer."""
        assert snap_compare(synthetic(), terminal_size=SMALL)


class TestFaults:
    def test_overloaded_error_then_gave_up(self, snap_compare: SnapCompare) -> None:
        """An overloaded_error event after HTTP 200, retries exhausted: the loop's error state, not a traceback."""
        assert snap_compare(synthetic(variant="overloaded_fatal"), terminal_size=WIDE)

    def test_overloaded_then_retried(self, snap_compare: SnapCompare) -> None:
        """The failed attempt is shaded and marked; the retry completes."""
        assert snap_compare(synthetic(variant="overloaded"), terminal_size=WIDE)

    def test_invalid_tool_json_caret(self, snap_compare: SnapCompare) -> None:
        """Blocks maximized: the broken input with a caret at the error, and the tool not run."""
        assert snap_compare(synthetic("turn1", variant="invalid_json"), terminal_size=WIDE, press=["2"])

    def test_cancelled_mid_tool(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(synthetic(variant="cancelled"), terminal_size=WIDE)


class TestViews:
    def test_raw_bytes_with_read_boundaries(self, snap_compare: SnapCompare) -> None:
        """The SSE pane toggled to raw bytes (maximized): reads, their timing, a read ending mid-line."""
        assert snap_compare(synthetic("mid_tool_json"), terminal_size=WIDE, press=["v", "1"])

    def test_replay_scrubbed_back(self, snap_compare: SnapCompare) -> None:
        """Time travel: home, then forward to the middle of the second tool's input."""
        assert snap_compare(synthetic(replay=True), terminal_size=WIDE, press=["home", *["right"] * 17])

    def test_maximized_assistant(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(synthetic(), terminal_size=WIDE, press=["4"])


class TestRealScenarios:
    """The real loop (SDK, in-process transport, executor) on bundled scenarios, frozen clock, max speed."""

    @staticmethod
    def app(name: str) -> InspectorApp:
        from inspector.sessions import sources

        return InspectorApp(
            lambda: sources.scenario_session(name, speed=math.inf, clock=lambda: 0.0), clock=lambda: 0.0
        )

    @staticmethod
    async def until_done(pilot: Pilot[int]) -> None:
        from inspector.testing.dashboard import wait_for

        app = pilot.app
        assert isinstance(app, InspectorApp)
        await wait_for(lambda: app.final_status is not None, 30, "the loop to finish")
        ticks = app.ticks
        await wait_for(lambda: app.ticks >= ticks + 2, 10, "two refresh ticks")
        await pilot.pause()

    @pytest.mark.parametrize("name", ["parse_date", "invalid_json", "cache_break"])
    def test_scenario_final_frame(self, snap_compare: SnapCompare, name: str) -> None:
        assert snap_compare(self.app(name), terminal_size=WIDE, run_before=self.until_done)

    def test_parallel_buffers_fill_side_by_side(self, snap_compare: SnapCompare) -> None:
        """parallel_buffers (interleave_blocks): two get_weather blocks open at once, their input deltas alternating;
        time travel to the 9th input delta shows both buffers half filled, one per index, in the Blocks pane."""

        async def mid_stream(pilot: Pilot[int]) -> None:
            await self.until_done(pilot)
            app = pilot.app
            assert isinstance(app, InspectorApp)
            ev = app.live.events
            rows = [r for r in ev.event_rows if ev.etype[r] == "content_block_delta" and ev.index[r] in (1, 2)]
            assert [ev.index[r] for r in rows[:8]] == [1, 2] * 4  # the fault really interleaves
            app.set_cursor(ev.evno[rows[8]])
            await pilot.pause()

        assert snap_compare(self.app("parallel_buffers"), terminal_size=WIDE, run_before=mid_stream)


class TestTimingView:
    """The timing view (key i) over the dashboard."""

    def test_timing_of_the_finished_parse_date_session(self, snap_compare: SnapCompare) -> None:
        """Per-turn times, gap histograms, events per read, pings; verdict not buffered."""
        assert snap_compare(synthetic(), terminal_size=WIDE, press=["i"])

    def test_timing_of_a_buffered_stream(self, snap_compare: SnapCompare) -> None:
        """proxy_buffered on the real loop, clock = scenario time: one held burst after 7.9 s, BUFFERED."""
        from inspector.testing.dashboard import paced_session

        app = InspectorApp(lambda: paced_session("proxy_buffered"), clock=lambda: 0.0)

        async def run_before(pilot: Pilot[int]) -> None:
            await TestRealScenarios.until_done(pilot)
            await pilot.press("i")
            await pilot.pause()

        assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def _with_history() -> list[O.Observation]:
    """parse_date where turn 2's request carries the conversation so far (for the request diff)."""
    import dataclasses

    from inspector.observe import observations as O

    messages: list[dict[str, Any]] = [{"role": "user", "content": "The parse_date tests fail: find out why."}]
    out = []
    for o in parse_date_observations():
        if isinstance(o, O.AttemptStarted):
            if o.turn == 1:
                messages = [
                    *messages,
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01Rd1", "name": "read_file"}]},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_01Rd1", "content": "def parse..."}],
                    },
                ]
            o = dataclasses.replace(o, body={**o.body, "system": "You are a careful engineer.", "messages": messages})
        out.append(o)
    return out


async def _select_and_open(pilot: Pilot[int], view_name: str, kind: str, nth: int = 0) -> None:
    app = pilot.app
    view = getattr(app, view_name)
    view.focus()
    rows = [r for r in range(view.row_count) if (view.detail_at(r) or ("",))[0] == kind]
    view.selected = rows[nth]
    await pilot.press("enter")
    await pilot.pause()


class TestDetailViews:
    """Enter on a row: the row read in full."""

    def test_event_detail(self, snap_compare: SnapCompare) -> None:
        """An input_json_delta event: pretty JSON data, raw bytes with read boundaries."""

        async def run_before(pilot: Pilot[int]) -> None:
            await _select_and_open(pilot, "events_view", "event", 12)

        assert snap_compare(synthetic(), terminal_size=WIDE, run_before=run_before)

    def test_tool_detail(self, snap_compare: SnapCompare) -> None:
        """A tool call: input, result, state history with times."""

        async def run_before(pilot: Pilot[int]) -> None:
            await _select_and_open(pilot, "tools_view", "tool", 1)

        assert snap_compare(synthetic(), terminal_size=WIDE, run_before=run_before)

    def test_diagnostic_detail(self, snap_compare: SnapCompare) -> None:
        """A diagnostic: its full text and the bytes it points at."""

        async def run_before(pilot: Pilot[int]) -> None:
            await _select_and_open(pilot, "diagnostics_view", "diagnostic", 0)

        assert snap_compare(synthetic("turn1", variant="invalid_json"), terminal_size=WIDE, run_before=run_before)

    def test_request_view_with_its_diff(self, snap_compare: SnapCompare) -> None:
        """s: what the harness sent for turn 2, and what changed since turn 1's request."""
        app = InspectorApp(observations=_with_history(), clock=lambda: 0.0)
        assert snap_compare(app, terminal_size=WIDE, press=["s"])

    def test_request_view_of_cache_break_turn_two(self, snap_compare: SnapCompare) -> None:
        """s at the end of cache_break: turn 2's usage, cost and cache verdict ("system changed at char 69") beside
        its diff with turn 1's request."""

        async def run_before(pilot: Pilot[int]) -> None:
            await TestRealScenarios.until_done(pilot)
            await pilot.press("s")
            await pilot.pause()

        assert snap_compare(TestRealScenarios.app("cache_break"), terminal_size=WIDE, run_before=run_before)


class TestSmallAndTeaching:
    def test_80x24_after_a_fault(self, snap_compare: SnapCompare) -> None:
        """A retried overloaded error at 80x24: the fault summary in the diagnostics border, essentials in the footer."""
        assert snap_compare(synthetic(variant="overloaded"), terminal_size=SMALL)

    def test_too_small_message(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(synthetic(), terminal_size=(50, 14))

    def test_timeline_legend_and_ghost_bar(self, snap_compare: SnapCompare) -> None:
        """Tools maximized after turn 1: the bars, the sequential ghost bar, the legend, how saved is computed."""
        assert snap_compare(synthetic("turn1"), terminal_size=WIDE, press=["3"])

    def test_repaired_preview_is_labelled(self, snap_compare: SnapCompare) -> None:
        """Blocks maximized mid tool JSON: the preview says it repairs a buffer that is not valid JSON yet."""
        assert snap_compare(synthetic("mid_tool_json"), terminal_size=SMALL, press=["2"])

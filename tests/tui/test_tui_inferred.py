"""The proxy's inferred tool times on the dashboard (issue 18 §4): the Tools pane row says "inferred from the next
request" and gives its time as an upper bound; the timeline draws it with its own glyph and style, in the legend,
and "saved vs sequential" leaves it out."""

from __future__ import annotations

from inspector.observe import observations as O
from inspector.state.entries import ToolEntry
from inspector.testing.dashboard import wait_for
from inspector.tui.app import InspectorApp
from inspector.tui.widgets.tools import INFERRED_GLYPH, INFERRED_LABEL

WIDE = (140, 42)
URL = "http://127.0.0.1:8787/v1/messages"


def proxy_session(*, inferred: bool) -> list[O.Observation]:
    """A client that ran its two tools after the stream ended (stream 0 - 1.2 s, next request at 3.5 s)."""

    def tool(t: float, tid: str, index: int, state: str, times: dict[str, float]) -> O.ToolStateChanged:
        return O.ToolStateChanged(
            t, 0, 0, tid, "read_file", index, state, {"path": tid}, None, None, times, inferred=inferred
        )

    return [
        O.LoopStarted(0.0, {"type": "proxy", "upstream": "http://up"}, "m", None),
        O.TurnStarted(0.0, 0),
        O.AttemptStarted(0.0, 0, 0, "POST", URL, {}, {"model": "m"}),
        tool(0.6, "A", 1, "running", {"running": 0.6}),
        tool(1.0, "B", 2, "running", {"running": 1.0}),
        O.AttemptEnded(1.2, 0, 0, "complete", None, "tool_use"),
        O.TurnEnded(1.2, 0, "tool_use", "tool_use", {}),
        O.TurnStarted(3.5, 1),
        O.AttemptStarted(3.5, 1, 0, "POST", URL, {}, {"model": "m"}),
        tool(3.5, "A", 1, "succeeded", {"running": 0.6, "succeeded": 3.5}),
        tool(3.5, "B", 2, "succeeded", {"running": 1.0, "succeeded": 3.5}),
        O.AttemptEnded(4.0, 1, 0, "complete", None, "text_finish"),
    ]


def _known(tool: ToolEntry | None) -> ToolEntry:
    assert tool is not None
    return tool


async def _texts(inferred: bool) -> tuple[str, str, str]:
    app = InspectorApp(observations=proxy_session(inferred=inferred), clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(lambda: app.timeline.state is not None and len(app.live.tools) == 2, what="the tools")
        await pilot.pause()
        timeline = app.timeline.render().plain
        state = app.live
        rows = [
            "\n".join(
                "".join(seg.text for seg in line)
                for line in app.tools_view.render_tool(_known(state.tool(t)), False, 120)
            )
            for t in ("A", "B")
        ]
        said = [
            "".join(seg.text for line in app.assistant_view._tool(_known(state.tool(t)), 120) for seg in line)
            for t in ("A", "B")
        ]
    return timeline, "\n".join(rows), "\n".join(said)


async def test_inferred_tools_are_labelled_drawn_apart_and_not_saved() -> None:
    timeline, rows, _ = await _texts(inferred=True)
    assert rows.count(INFERRED_LABEL) == 2 and "≤2.9" in rows.replace(" ", "")
    assert "saved" not in timeline.split("\n")[0]  # no "saved vs sequential" figure in the header
    assert f"{INFERRED_GLYPH} {INFERRED_LABEL}" in timeline  # the legend names the glyph
    bars = [line for line in timeline.split("\n") if line.startswith(f"{INFERRED_GLYPH}read_file")]
    assert len(bars) == 2 and all(INFERRED_GLYPH * 3 in line and "█" not in line for line in bars)


async def test_measured_tools_keep_their_drawing_and_their_saved_figure() -> None:
    """The control: the same times, measured, are drawn solid and counted."""
    timeline, rows, said = await _texts(inferred=False)
    assert INFERRED_LABEL not in rows and INFERRED_LABEL not in timeline
    assert said.split("\n") == ["  ✓ read_file done in 2.90 s", "  ✓ read_file done in 2.50 s"]
    assert "saved vs sequential" in timeline.split("\n")[0]


async def test_the_assistant_pane_gives_an_inferred_time_as_a_bound_too() -> None:
    """The Assistant pane's tool line said "done in 2.90 s" for a run the proxy inferred, a measurement the Tools
    pane beside it gave as "≤2.90 s inferred from the next request": it says the same bound, marked inferred."""
    _, _, said = await _texts(inferred=True)
    assert said.split("\n") == [
        f"  ✓ read_file done in ≤2.90 s {INFERRED_GLYPH} inferred",
        f"  ✓ read_file done in ≤2.50 s {INFERRED_GLYPH} inferred",
    ]


async def test_a_tool_whose_result_never_came_reads_unknown_with_no_time_growing() -> None:
    """The session ended (the watched command exited) with the tools still running (inferred): the Tools and
    Assistant panes say "unknown" and why, with no time (it said "▶ running" with a time that grew for ever), no
    inferred bound, and the timeline draws no run."""
    why = "the command ended before a next request showed its result"
    obs = proxy_session(inferred=True)[:7]  # the first turn: both tools left running in the other harness
    obs += [
        O.ToolStateChanged(9.0, 0, 0, t, "read_file", i, "unknown", None, why, None, {"unknown": 9.0}, inferred=True)
        for t, i in (("A", 1), ("B", 2))
    ]
    obs.append(O.LoopFinished(9.0, "finished", 1, [], [], None))
    app = InspectorApp(observations=obs, clock=lambda: 100.0)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(lambda: len(app.live.tools) == 2 and all(t.state == "unknown" for t in app.live.tools.values()))
        await pilot.pause()
        state = app.live
        rows = ["".join(s.text for s in app.tools_view.render_tool(_known(state.tool("A")), False, 200)[0])]
        said = "".join(s.text for line in app.assistant_view._tool(_known(state.tool("A")), 200) for s in line)
        timeline = app.timeline.render().plain
    assert rows[0].startswith("? unknown ") and why in rows[0] and "≤" not in rows[0] and " s " not in rows[0]
    assert said == f"  ? read_file: outcome unknown: {why}"
    bars = [line for line in timeline.split("\n") if line.startswith(f"{INFERRED_GLYPH}read_file")]
    assert len(bars) == 2 and all(INFERRED_GLYPH not in line[len(INFERRED_GLYPH) + 9 :] for line in bars)

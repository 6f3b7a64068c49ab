"""The proxy's tool times are inferred (another harness ran the tools; the proxy sees only the block stop and the
next request): they are never counted in "saved vs sequential" (issue 18 §4)."""

from __future__ import annotations

from typing import Any

import pytest

from inspector.observe import observations as O
from inspector.state.fold import DashboardState

URL = "http://127.0.0.1:8787/v1/messages"


def proxy_turns(*, inferred: bool) -> list[O.Observation]:
    """What the proxy publishes for a client that runs its two tools only AFTER the stream ended: the stream is
    0 - 1.2 s, the tool blocks stop at 0.6 and 1.0 s (shown running from there), the next request comes at 3.5 s
    with both results. Measured, that would look like two tools overlapping the stream and "saving" time."""

    def tool(t: float, tid: str, index: int, state: str, times: dict[str, Any]) -> O.ToolStateChanged:
        return O.ToolStateChanged(
            t, 0, 0, tid, "read_file", index, state, {"path": tid}, None, None, times, inferred=inferred
        )

    return [
        O.LoopStarted(0.0, {"type": "proxy", "upstream": "http://up"}, "m", None),
        O.TurnStarted(0.0, 0),
        O.AttemptStarted(0.0, 0, 0, "POST", URL, {}, {"model": "m"}),
        tool(0.4, "A", 1, "streaming_input", {"streaming_input": 0.4}),
        tool(0.6, "A", 1, "running", {"running": 0.6}),
        tool(0.8, "B", 2, "streaming_input", {"streaming_input": 0.8}),
        tool(1.0, "B", 2, "running", {"running": 1.0}),
        O.AttemptEnded(1.2, 0, 0, "complete", None, "tool_use"),
        O.TurnEnded(1.2, 0, "tool_use", "tool_use", {}),
        O.TurnStarted(3.5, 1),
        O.AttemptStarted(3.5, 1, 0, "POST", URL, {}, {"model": "m"}),
        tool(3.5, "A", 1, "succeeded", {"running": 0.6, "succeeded": 3.5}),
        tool(3.5, "B", 2, "succeeded", {"running": 1.0, "succeeded": 3.5}),
    ]


def test_inferred_tool_times_are_never_counted_as_saved() -> None:
    measured = DashboardState().apply_all(proxy_turns(inferred=False)).turn_savings(0)
    # the same numbers taken as measured: 1.2 s stream + 2.9 + 2.5 s of "runs" - 3.5 s actual = 3.1 s "saved"
    assert measured is not None and measured.saved == pytest.approx(3.1)
    s = DashboardState().apply_all(proxy_turns(inferred=True))
    assert s.turn_savings(0) is None  # nothing measured ran: no figure at all
    assert all(t.inferred for t in s.tools.values())
    assert [t.state for t in s.tools.values()] == ["succeeded", "succeeded"]


def test_a_running_inferred_tool_does_not_hold_the_figure_back() -> None:
    """Measured tools still count beside inferred ones; an inferred tool still 'running' (the other harness has it)
    is left out instead of making the turn look unfinished."""
    obs = proxy_turns(inferred=True)[:9]  # the first turn, its tools still with the other harness
    obs.insert(
        5,
        O.ToolStateChanged(0.7, 0, 0, "M", "grep", 3, "running", {}, None, None, {"running": 0.7}),
    )
    obs.append(
        O.ToolStateChanged(1.1, 0, 0, "M", "grep", 3, "succeeded", {}, None, None, {"running": 0.7, "succeeded": 1.1})
    )
    sav = DashboardState().apply_all(obs).turn_savings(0)
    assert sav is not None and sav.counted == 1 and sav.left_out == 2
    assert sav.tools == pytest.approx(0.4)

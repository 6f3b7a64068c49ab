"""Figures that describe the stream, not the user's keypresses; tool figures that add up; HTTP tries in the fold;
time travel that does not mix past and present; copies that cannot forget a field (issues 8 and 9)."""

from __future__ import annotations

import dataclasses
import math
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.record.recording import RecordedAttempt, RecordedRead
from inspector.record.timing import (
    analyze_attempt,
    buffering_verdict,
    held_intervals,
    recording_from_observations,
    timing_json,
    unhold,
)
from inspector.state.fold import (
    F_MARKER,
    AttemptEntry,
    BlockEntry,
    DashboardState,
    EventTable,
    ReadTable,
    Status,
    ToolEntry,
    TurnEntry,
    clone,
)
from inspector.state.travel import History
from inspector.testing.hyp import examples
from inspector.testing.synthetic import StreamScript, parse_date_observations, rate_limited_observations
from inspector.tui.widgets.wording import marker_label, savings_text, try_label

# --- a stream, with and without the user's holds ------------------------------------------------------------------

N_DELTAS = 14


def stream(holds: dict[int, tuple[float, str]] | None = None) -> list[O.Observation]:
    """One turn: message_start, a text block of N_DELTAS deltas, message_delta, message_stop. ``holds`` maps a step
    number (0: after the response headers, before the first byte; k: before the k-th event) to (seconds, by): the
    user holds the stream there. Same reads either way; with a hold, every later time is shifted by it."""
    holds = holds or {}
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt(ttfb=0.3)
    step = 0

    def maybe_hold() -> None:
        nonlocal step
        if step in holds:
            seconds, by = holds[step]
            s.hold(seconds, by)
        step += 1

    maybe_hold()
    s.message_start()
    maybe_hold()
    s.block_start(0, {"type": "text", "text": ""}, gap=0.05)
    for i in range(N_DELTAS):
        maybe_hold()
        s.delta(0, f"word{i} ", gap=0.03 + 0.01 * (i % 3))
    maybe_hold()
    s.block_stop(0)
    maybe_hold()
    s.message_delta("end_turn", 40)
    maybe_hold()
    s.message_stop()
    s.end_attempt("complete", None, "text_finish")
    s.end_turn("text_finish")
    s.finish()
    return s.obs


STEPS = N_DELTAS + 5


def figures(obs: list[O.Observation]) -> dict[str, Any]:
    s = DashboardState().apply_all(obs)
    a = s.attempts[(0, 0)]
    return {"ttfb": a.ttfb, "first_token": a.first_token, "last_gap": a.last_gap, "last_read": a.last_read_t}


def timing_figures(obs: list[O.Observation]) -> dict[str, Any]:
    data = timing_json(recording_from_observations(obs))
    (a,) = data["attempts"]
    keys = ("headers_s", "first_byte_s", "first_content_s", "message_stop_s", "last_byte_s", "end_s")
    out = {k: a[k] for k in keys}
    out["read_gaps"] = a["read_gaps"]
    out["event_gaps"] = a["event_gaps"]
    out["buffering"] = {k: v for k, v in a["buffering"].items() if k != "reason"}
    return out


def approx_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(approx_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(approx_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, abs_tol=2e-6)
    return bool(a == b)


def test_a_six_second_pause_before_the_first_token_is_not_in_the_figures() -> None:
    """The issue's case: a 6 s pause after the first read used to read `TTFB 931 ms · first token 8.31 s`."""
    plain = figures(stream())
    paused = figures(stream({1: (6.0, "pause")}))
    assert paused == pytest.approx(plain, abs=1e-6)
    assert plain["first_token"] < 1.0
    s = DashboardState().apply_all(stream({1: (6.0, "pause")}))
    assert s.attempts[(0, 0)].held == pytest.approx(6.0)
    assert s.status.held_total == pytest.approx(6.0) and s.status.held_by is None


@settings(max_examples=examples(40), deadline=None)
@given(
    st.dictionaries(
        st.integers(0, STEPS - 1),
        st.tuples(st.floats(0.01, 30.0).map(lambda x: round(x, 3)), st.sampled_from(["pause", "step"])),
        max_size=6,
    )
)
def test_held_intervals_leave_every_figure_as_in_the_unheld_run(holds: dict[int, tuple[float, str]]) -> None:
    """Fold figures and the recording's timing analysis (TTFB, first token, gaps, histograms, verdict) of a run
    with holds equal those of the same stream without them."""
    assert approx_equal(figures(stream(holds)), figures(stream()))
    assert approx_equal(timing_figures(stream(holds)), timing_figures(stream()))


def test_without_the_hold_observations_the_pause_would_count() -> None:
    """The same shifted reads, with the StreamHeld / StreamReleased observations dropped: the figures differ (so
    the tests above can fail)."""
    obs = [o for o in stream({1: (6.0, "pause")}) if not isinstance(o, (O.StreamHeld, O.StreamReleased))]
    assert figures(obs)["first_token"] > 6.0
    assert timing_figures(obs)["first_content_s"] > 6.0


def test_the_socket_backlog_after_a_hold_is_never_a_held_burst() -> None:
    """A slow start, a long pause, then 30 events read at once (they waited in the socket): without the holds the
    rule calls it buffered; with them, never."""
    reads = [(0.4, 400, 1), (0.9, 60, 1)] + [(31.5 + 0.001 * i, 80, 1) for i in range(30)]
    assert buffering_verdict(reads)["verdict"] == "buffered"
    holds = [(1.5, 31.5)]  # loop time == attempt time here (request at 0)
    unheld = [(unhold(t, holds), n, e) for t, n, e in reads]
    # the model's own 0.6 s pause before the hold, then the backlog: a held burst by the rule's numbers...
    assert buffering_verdict(unheld)["verdict"] == "buffered"
    # ...but it follows the user's hold
    assert buffering_verdict(unheld, released=[unhold(31.5, holds)])["verdict"] == "not buffered"
    att = RecordedAttempt(
        0,
        0,
        {"t": 0.0},
        {"t": 0.3, "status": 200},
        [RecordedRead(t, b"event: ping\ndata: {}\n\n" + b" " * (n - 22)) for t, n, _e in reads],
        {"t": 31.6},
    )
    assert analyze_attempt(att)["buffering"]["verdict"] == "buffered"
    verdict = analyze_attempt(att, holds)
    assert verdict["buffering"]["verdict"] == "not buffered"
    assert verdict["held"] == {"count": 1, "seconds": 30.0}


def test_held_intervals_and_unhold() -> None:
    obs = stream({0: (2.0, "pause"), 5: (1.0, "step")})
    rec = recording_from_observations(obs)
    holds = held_intervals(rec)
    assert len(holds) == 2 and [round(e - s, 6) for s, e in holds] == [2.0, 1.0]
    assert unhold(10.0, [(1.0, 3.0), (5.0, 6.0)]) == 7.0
    assert unhold(2.0, [(1.0, 3.0)]) == 1.0
    assert unhold(0.5, [(1.0, 3.0)]) == 0.5
    still = held_intervals(recording_from_observations(stream()[:8] + [O.StreamHeld(9.0, 0, 0, "pause")]))
    assert still == [(9.0, math.inf)]


def test_a_recording_file_keeps_the_holds(tmp_path: Path) -> None:
    """`--record` writes the holds (obs lines), so `dump --timing` of a paused session is right too."""
    from inspector.record.recorder import Recorder
    from inspector.record.recording import read_recording

    path = tmp_path / "r.jsonl"
    rec = Recorder(path)
    for o in stream({1: (6.0, "pause")}):
        rec(o)
    rec.close()
    got = timing_json(read_recording(path))["attempts"][0]
    assert got["first_content_s"] == pytest.approx(timing_figures(stream())["first_content_s"], abs=1e-5)


def test_holds_are_marked_in_the_sse_pane() -> None:
    s = DashboardState().apply_all(stream({1: (6.0, "pause"), 4: (0.5, "step")}))
    ev = s.events
    rows = [i for i in range(len(ev)) if ev.flags[i] & F_MARKER and ev.etype[i] in ("held", "released")]
    facts = [(s.markers[i].kind, s.markers[i].by, round(s.markers[i].held, 6)) for i in rows]
    assert facts == [("held", "pause", 0.0), ("released", "pause", 6.0), ("released", "step", 0.5)]
    marks = [marker_label(s.markers[i]) for i in rows]  # (the tui's words)
    assert marks[0].startswith("❚❚ stream held by pause")
    assert "held 6.00 s by pause" in marks[1]
    assert len(marks) == 3 and "by step" in marks[2]  # a step's hold: one row, at its release
    assert [None if e is None else round(e - b, 6) for b, e, _ in s.holds] == [6.0, 0.5]
    # the marker rows do not shift the event numbering nor the diagnostics' pointers
    assert s.status.events == N_DELTAS + 5
    assert [ev.evno[r] for r in ev.event_rows] == list(range(1, s.status.events + 1))


def test_diagnostics_point_at_their_event_across_marker_rows() -> None:
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt(failed_tries=((429, "rate_limit_error", "slow down", 0.5),))
    s.message_start()
    s.hold(1.0)
    s.error_event()
    st_ = DashboardState().apply_all(s.obs)
    (d,) = st_.diagnostics
    assert d.evno == 2
    row = st_.events.event_rows[1]
    assert st_.events.etype[row] == "error" and st_.events.flags[row] & 1


# --- HTTP tries ----------------------------------------------------------------------------------------------------


def test_rate_limited_shows_its_four_requests() -> None:
    s = DashboardState().apply_all(rate_limited_observations())
    ev = s.events
    rows = [marker_label(s.markers[i]) for i in range(len(ev)) if ev.etype[i] == "try"]  # (the tui's words)
    assert rows == [
        "try 1 · HTTP 429 rate_limit_error · SDK retries in 0.2 s",
        "try 2 · HTTP 200",
        "try 1 · HTTP 529 overloaded_error · SDK retries in 0.3 s",
        "try 2 · HTTP 200",
    ]
    assert sum(a.requests for a in s.attempts.values()) == 4
    t = s.attempts[(0, 0)].tries[0]
    assert t.t_retry == pytest.approx(t.t + 0.2) and t.headers == {"retry-after-ms": "200"}


def test_waiting_retry_status_names_the_try() -> None:
    obs = rate_limited_observations()
    k = next(i for i, o in enumerate(obs) if isinstance(o, O.LoopStateChanged) and o.state == LoopState.WAITING_RETRY)
    s = DashboardState().apply_all(obs[: k + 1])
    assert s.status.loop_state == LoopState.WAITING_RETRY
    last = s.status.last_try  # the try, as facts; the status line words it
    assert last is not None and (last.status, last.error_type, last.retry_in) == (429, "rate_limit_error", 0.2)
    assert try_label(last) == "HTTP 429 rate_limit_error · SDK retries in 0.2 s"


def test_connection_failure_and_giving_up() -> None:
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt()
    s.failed_try(None, connection_error="ConnectError: connection refused", retry_in=0.5)
    s.failed_try(503, "api_error", "down", retry_in=None)
    st_ = DashboardState().apply_all(s.obs)
    a = st_.attempts[(0, 0)]
    assert [try_label(t) for t in a.tries] == [  # (the tui's words)
        "connection error: ConnectError: connection refused · SDK retries in 0.5 s",
        "HTTP 503 api_error · SDK gives up",
    ]
    assert [t.try_index for t in a.tries] == [0, 1]


# --- tools: run times and savings that add up --------------------------------------------------------------------


def tool_obs(t: float, attempt: int, tid: str, state: str, times: dict[str, Any]) -> O.ToolStateChanged:
    return O.ToolStateChanged(t, 0, attempt, tid, "read_file", 1, state, {"path": tid}, None, None, dict(times))


def fault_turn() -> list[O.Observation]:
    """Round numbers. Attempt 1 (0 - 3 s) fails; its tool A ran 1 - 2 s and is discarded at 3 s. Attempt 2 streams
    3.5 - 5.5 s; tool B runs 4 - 5 s, tool C 4.5 - 6.5 s."""
    url = "https://api.anthropic.com/v1/messages"
    a_times = {"queued": 1.0, "running": 1.0, "succeeded": 2.0}
    obs: list[O.Observation] = [
        O.LoopStarted(0.0, {"type": "scenario", "name": "fault"}, "m", "p"),
        O.TurnStarted(0.0, 0),
        O.AttemptStarted(0.0, 0, 0, "POST", url, {}, {}),
        tool_obs(1.0, 0, "A", "queued", {"queued": 1.0}),
        tool_obs(1.0, 0, "A", "running", {"queued": 1.0, "running": 1.0}),
        tool_obs(2.0, 0, "A", "succeeded", a_times),
        O.AttemptEnded(3.0, 0, 0, "failed", "overloaded_error", "error"),
        tool_obs(3.0, 0, "A", "discarded", {**a_times, "discarded": 3.0}),
        O.AttemptStarted(3.5, 0, 1, "POST", url, {}, {}),
        tool_obs(4.0, 1, "B", "running", {"queued": 4.0, "running": 4.0}),
        tool_obs(4.5, 1, "C", "running", {"queued": 4.5, "running": 4.5}),
        tool_obs(5.0, 1, "B", "succeeded", {"queued": 4.0, "running": 4.0, "succeeded": 5.0}),
        O.AttemptEnded(5.5, 0, 1, "complete", None, "tool_use"),
        tool_obs(6.5, 1, "C", "succeeded", {"queued": 4.5, "running": 4.5, "succeeded": 6.5}),
        O.TurnEnded(6.5, 0, "tool_use", "tool_use", {}),
    ]
    return obs


def test_a_discarded_tool_shows_its_own_run_time() -> None:
    s = DashboardState().apply_all(fault_turn())
    a = s.tool("A")
    assert a is not None
    assert a.state == "discarded" and a.elapsed(100.0) == pytest.approx(1.0)  # not 2.0: the time until the discard
    assert [h[0] for h in a.history] == ["queued", "running", "succeeded", "discarded"]


def test_savings_count_only_the_tools_whose_results_were_used() -> None:
    s = DashboardState().apply_all(fault_turn())
    sav = s.turn_savings(0)
    assert sav is not None
    assert (sav.stream, sav.tools, sav.actual, sav.counted, sav.left_out) == pytest.approx((2.0, 3.0, 3.0, 2, 1))
    assert sav.sequential == pytest.approx(5.0) and sav.saved == pytest.approx(2.0)
    assert savings_text(sav) == "= stream 2.00 + 2 used tools 3.00 − actual 3.00 s (1 discarded/not run: not counted)"


def test_savings_wait_for_the_turn_to_be_done() -> None:
    obs = fault_turn()
    assert DashboardState().apply_all(obs[:-3]).turn_savings(0) is None  # stream done, tool C still running
    assert DashboardState().apply_all(obs[:-1]).turn_savings(0) is not None


def _run_time(t: ToolEntry) -> float:
    assert t.t_started is not None and t.t_finished is not None, t
    return t.t_finished - t.t_started


def test_savings_of_the_parse_date_session() -> None:
    s = DashboardState().apply_all(parse_date_observations())
    sav = s.turn_savings(0)
    assert sav is not None and sav.counted == 3 and sav.left_out == 0
    runs = sum(_run_time(t) for t in s.turn_tools(0))
    assert sav.tools == pytest.approx(runs)
    assert s.turn_savings(1) is None  # no tools in turn 2


# --- time travel: the figures of the moment ------------------------------------------------------------------------


def test_time_travel_figures_are_those_of_the_moment() -> None:
    obs = parse_date_observations()
    h = History(obs)
    live = DashboardState().apply_all(obs)
    k = 12
    past = h.state_at(k)
    assert past.status.events == k
    assert past.tokens() != live.tokens()
    assert past.current_attempt is not None and past.current_attempt.stop_reason is None
    assert live.current_attempt is not None and live.current_attempt.stop_reason == "end_turn"
    assert {t.state for t in past.tools.values()} <= {"streaming_input", "queued", "running"}
    assert past.status.loop_state == LoopState.STREAMING and live.status.loop_state == LoopState.FINISHED


# --- copies that cannot forget a field -----------------------------------------------------------------------------

ENTRIES: list[tuple[type[Any], tuple[Any, ...]]] = [
    (BlockEntry, (0, 0, 0, "text", None, None, {}, 0.0, 1)),
    (ToolEntry, ("t", "n", 0, 0, 0, "queued", 0.0)),
    (AttemptEntry, (0, 0, 0.0)),
    (TurnEntry, (0, 0.0)),
    (Status, ()),
]


@pytest.mark.parametrize("cls,args", ENTRIES, ids=[c.__name__ for c, _ in ENTRIES])
def test_every_field_is_copied_and_independent(cls: type[Any], args: tuple[Any, ...]) -> None:
    """A field added later is carried by clone() too: every field of the copy equals the original's, and every
    mutable container is a different object (the fold mutates those in place)."""
    entry = cls(*args)
    for i, f in enumerate(dataclasses.fields(cls)):  # a distinct value in every field
        v = getattr(entry, f.name)
        if isinstance(v, list):
            v.append(i)
        elif isinstance(v, dict):
            v[f.name] = i
    c = clone(entry)
    shared: frozenset[str] = getattr(cls, "SHARED", frozenset())
    for f in dataclasses.fields(cls):
        v, w = getattr(entry, f.name), getattr(c, f.name)
        assert w == v, f.name
        if isinstance(v, (list, dict)) and f.name not in shared:
            assert w is not v, f"{cls.__name__}.{f.name} is shared between copies"


@pytest.mark.parametrize("cls", [EventTable, ReadTable])
def test_tables_are_copied_column_by_column(cls: type[EventTable | ReadTable]) -> None:
    t = cls()
    c = clone(t)
    for name in cls.__slots__:
        v = getattr(t, name)
        assert getattr(c, name) == v
        if isinstance(v, (list, array)):
            assert getattr(c, name) is not v


def test_state_copy_carries_every_attribute() -> None:
    s = DashboardState().apply_all(parse_date_observations("turn1"))
    c = s.copy()
    assert set(vars(c)) == set(vars(s))
    for name, v in vars(s).items():
        if isinstance(v, (list, dict, EventTable, ReadTable, Status)):
            assert getattr(c, name) is not v, name
    s.apply(O.StreamHeld(99.0, 0, 0, "pause"))
    assert c.holds == [] and c.status.held_by is None


def test_a_new_turn_is_at_its_first_attempt_until_that_starts() -> None:
    """A turn answered at its second attempt, then the next turn starts: the status said "turn 2 · attempt 2" (the
    last turn's attempt number) until turn 2's first request went out."""
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    for outcome in ("failed", "complete"):
        s.start_attempt(ttfb=0.2)
        s.message_start()
        s.end_attempt(outcome, "overloaded_error: Overloaded" if outcome == "failed" else None)
    s.end_turn("tool_use")
    s.start_turn()
    state = DashboardState().apply_all(s.obs)
    assert (state.status.turn, state.status.attempt) == (1, 0)
    s.start_attempt(ttfb=0.2)
    state.apply_all(s.obs[len(s.obs) - 1 :])
    assert (state.status.turn, state.status.attempt) == (1, 0)

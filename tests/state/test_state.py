"""The dashboard state: a pure, linear fold over observations, with time travel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.state.columns import CHUNK
from inspector.state.fold import (
    F_DIAG,
    F_ERROR,
    F_MARKER,
    MARKER,
    DashboardState,
    call_summary,
    error_position,
    fold,
    result_summary,
)
from inspector.state.travel import History, cut_index, state_at
from inspector.testing.hyp import examples
from inspector.testing.state import canon
from inspector.testing.synthetic import FILES, generated_observations, parse_date_observations
from inspector.tui.widgets.wording import marker_label

FULL = parse_date_observations()


def fold_all(observations: Iterable[O.Observation]) -> DashboardState:
    s = DashboardState()
    for o in observations:
        s = fold(s, o)
    return s


# --- the parse_date session ----------------------------------------------------------------------------------------


def test_parse_date_session_folds_to_a_finished_state() -> None:
    s = fold_all(FULL)
    assert s.status.loop_state == LoopState.FINISHED and s.status.finished == "finished"
    assert s.status.source == {"type": "scenario", "name": "parse_date"}
    assert s.status.turn == 1 and s.status.attempt == 0
    n_sse = sum(isinstance(o, O.SSEEventSeen) for o in FULL)
    assert s.status.events == n_sse == len(s.events.event_rows)
    # one marker row per attempt, before that attempt's events
    markers = [i for i in range(len(s.events)) if s.events.flags[i] & F_MARKER]
    assert len(markers) == 2 and s.events.etype[markers[0]] == MARKER
    m = s.markers[markers[0]]  # its facts; the tui words them (tui/widgets/wording.py; the snapshots show them)
    assert (m.kind, m.turn, m.attempt, m.method, m.path, m.answers) == (MARKER, 0, 0, "POST", "/v1/messages", (200,))
    assert marker_label(m) == "turn 1 · attempt 1 · POST /v1/messages → 200" and s.events.summary[markers[0]] == ""
    assert s.events.etype[markers[0] + 1] == "message_start"
    # event numbers are 1..n in order
    assert [s.events.evno[r] for r in s.events.event_rows] == list(range(1, n_sse + 1))
    assert s.tokens() == (1850 + 2630, 187 + 164)


def test_blocks_keep_fragments_per_index() -> None:
    s = fold_all(FULL)
    assert [k for k in s.block_order] == [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (1, 0, 0)]
    b1 = s.blocks[(0, 0, 1)]
    assert b1.type == "tool_use" and b1.name == "read_file" and b1.id == "toolu_01Rd1" and b1.closed
    assert b1.fragments == ["", '{"pa', 'th": "src/d', "ates/par", 'se.py"}']  # the empty first fragment is kept
    assert b1.joined() == '{"path": "src/dates/parse.py"}' and b1.nbytes == len(b1.joined())
    assert b1.parsed_input == {"path": "src/dates/parse.py"}
    assert b1.first_event < b1.last_event
    text = s.blocks[(0, 0, 0)]
    assert text.joined().startswith("I'll look at the date parser")


def test_tools_follow_the_executor() -> None:
    s = fold_all(FULL)
    assert s.tool_order == [("", f) for f in FILES]  # (conversation, tool id): none here
    for tool in s.tools.values():
        assert tool.state == "succeeded" and not tool.is_error
        assert [h[0] for h in tool.history] == ["streaming_input", "queued", "running", "succeeded"]
        assert tool.t_queued is not None and tool.t_started is not None and tool.t_finished is not None
        assert tool.t_created <= tool.t_queued <= tool.t_started <= tool.t_finished
        assert tool.input_summary.startswith('read_file(path="')
    # streaming execution: the first tool started before the turn's message_stop
    stop_t = max(
        s.events.t[r] for r in s.events.event_rows if s.events.etype[r] == "message_stop" and s.events.turn[r] == 0
    )
    first = s.tool("toolu_01Rd1")
    assert first is not None and first.t_started is not None
    assert first.t_started < stop_t
    assert first.result_summary.startswith("def parse_date(")


def test_transcript_interleaves_text_and_tool_activity() -> None:
    s = fold_all(FULL)
    assert s.transcript == [
        ("turn", 0),
        ("text", (0, 0, 0)),
        ("tool", ("", "toolu_01Rd1")),
        ("tool", ("", "toolu_01Rd2")),
        ("tool", ("", "toolu_01Rd3")),
        ("turn", 1),
        ("text", (1, 0, 0)),
    ]


def test_status_timings() -> None:
    s = fold_all(FULL)
    a = s.attempts[(0, 0)]
    assert a.ttfb == pytest.approx(0.35)
    assert a.t_first_token is not None and a.t_response is not None and a.t_first_token > a.t_response
    assert a.last_gap is not None and a.last_gap >= 0
    assert a.reads == len([o for o in FULL if isinstance(o, O.ReadReceived) and o.turn == 0])
    assert a.stop_reason == "tool_use" and a.usage == {"input_tokens": 1850, "output_tokens": 187}
    assert s.turns[0].outcome == "tool_use" and s.turns[1].outcome == "text_finish"


def test_reads_map_to_raw_lines() -> None:
    s = fold_all(FULL)
    r = s.reads
    assert r.lines == r.line_start[-1] + 1 + r.data[-1].count(b"\n")
    # the split read: its first half ends without a newline, so it takes one raw line of its own
    split = next(i for i in range(len(r)) if not r.data[i].endswith(b"\n"))
    assert r.line_start[split + 1] == r.line_start[split] + 1 + r.data[split].count(b"\n") + 1
    assert r.locate(r.line_start[split]) == (split, -1)
    assert r.locate(r.line_start[split] + 1) == (split, 0)
    # offsets are per attempt and contiguous
    assert r.offset[0] == 0 and r.offset[1] == len(r.data[0])


# --- faults ----------------------------------------------------------------------------------------------------------


def test_invalid_tool_json_is_shown_with_its_position() -> None:
    s = fold_all(parse_date_observations(variant="invalid_json"))
    b = s.blocks[(0, 0, 2)]
    assert b.closed and b.input_error and b.content is not None and b.content["input"] is None
    assert b.error_pos is not None and b.joined()[b.error_pos - 1 : b.error_pos + 1] in ("1-", "-4")
    assert b.id is not None
    tool = s.tool(b.id)
    assert tool is not None and tool.state == "not_run" and tool.is_error and tool.t_started is None
    d = s.diagnostics[b.diagnostics[0]]
    assert d.code == "tool_input.invalid_json" and d.severity == "error" and d.evno is not None
    row = s.events.event_rows[d.evno - 1]
    assert s.events.flags[row] & F_ERROR and s.events.flags[row] & F_DIAG
    assert s.events.etype[row] == "content_block_stop"


def test_overloaded_midstream_marks_the_attempt_failed_and_retries() -> None:
    s = fold_all(parse_date_observations(variant="overloaded"))
    assert s.attempts[(1, 0)].status == "failed" and s.attempt_failed(1, 0)
    assert s.attempts[(1, 1)].status == "complete"
    err_rows = [i for i in range(len(s.events)) if s.events.etype[i] == "error"]
    assert len(err_rows) == 1 and s.events.flags[err_rows[0]] & F_ERROR
    notes = [item for item in s.transcript if item[0] == "note"]
    # what happened, as data (0-based); the wording is the tui's (tests/tui: test_notes_are_worded_by_the_tui)
    assert notes[0][1][:4] == ("attempt_ended", 1, 0, "failed") and notes[0][1][4].startswith("overloaded_error")
    assert notes[0][2] == "error" and notes[1][1] == ("retry", 1, 1)
    assert s.status.loop_state == LoopState.FINISHED


def test_fatal_error_and_cancel_end_states() -> None:
    s = fold_all(parse_date_observations(variant="overloaded_fatal"))
    assert s.status.loop_state == LoopState.ERROR and s.status.finished == "error"
    assert s.status.error is not None and "overloaded" in s.status.error
    c = fold_all(parse_date_observations(variant="cancelled"))
    assert c.status.loop_state == LoopState.CANCELLED
    assert {t.state for t in c.tools.values()} == {"cancelled"}


def test_partial_preview_of_an_open_tool_block() -> None:
    s = fold_all(parse_date_observations("mid_tool_json"))
    b = s.blocks[(0, 0, 2)]
    assert not b.closed and b.joined() == '{"path": "tests/t'
    assert b.preview() == ({"path": "tests/t"}, None)  # the unfinished string is kept
    assert b.id is not None
    tool = s.tool(b.id)
    assert tool is not None and tool.state == "streaming_input"
    assert s.status.loop_state == LoopState.PAUSED


def test_robust_to_missing_and_unknown_observations() -> None:
    # a stream without turn/attempt starts, and an observation type the state does not know
    obs = [o for o in FULL if not isinstance(o, (O.TurnStarted, O.AttemptStarted, O.BlockOpened))]
    s = fold_all(obs + [O.Observation(9.0)])
    assert s.status.events == sum(isinstance(o, O.SSEEventSeen) for o in FULL)
    assert s.status.t_last == 9.0


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(0, len(FULL) - 1), unique=True, max_size=40))
def test_fold_never_raises_when_observations_are_dropped(drop: list[int]) -> None:
    kept = [o for i, o in enumerate(FULL) if i not in set(drop)]
    fold_all(kept)


# --- time travel -----------------------------------------------------------------------------------------------------


def test_state_at_is_the_prefix_fold() -> None:
    n = sum(isinstance(o, O.SSEEventSeen) for o in FULL)
    assert state_at(FULL, 0).status.events == 0
    assert cut_index(FULL, n) == len(FULL)
    for k in (1, 5, 17, n - 1, n):
        s = state_at(FULL, k)
        assert s.status.events == k
        cut = cut_index(FULL, k)
        assert canon(s) == canon(fold_all(FULL[:cut]))
        # the cut is right before the next event: everything the loop did after event k is in
        if k < n:
            assert isinstance(FULL[cut], O.SSEEventSeen)


def test_state_at_mid_tool_json_shows_the_partial_buffer() -> None:
    s = fold_all(FULL)
    b = s.blocks[(0, 0, 2)]
    k = b.first_event + 2  # start, then two fragments
    past = state_at(FULL, k).blocks[(0, 0, 2)]
    assert not past.closed and past.fragments == b.fragments[:2]


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(0, 45), min_size=1, max_size=12))
def test_history_matches_state_at_in_any_order(ks: list[int]) -> None:
    h = History(FULL, spacing=7)
    for k in ks:
        assert canon(h.state_at(k)) == canon(state_at(FULL, k))


def test_history_results_are_independent() -> None:
    h = History(FULL, spacing=5)
    a = h.state_at(20)
    before = canon(a)
    b = h.state_at(20)
    b.apply(FULL[-1])
    b.blocks[(0, 0, 1)].fragments.append("zzz")
    assert canon(h.state_at(20)) == before == canon(a)


def test_history_grows_while_scrubbing() -> None:
    h = History(spacing=4)
    h.extend(FULL[:60])
    k = h.event_count
    first = h.state_at(k)
    h.extend(FULL[60:])
    assert canon(h.state_at(k)) == canon(state_at(FULL, k))
    assert first.n <= h.cut(k)
    assert canon(h.state_at(h.event_count)) == canon(fold_all(FULL))


def test_copy_is_deep_enough() -> None:
    s = fold_all(FULL[:80])
    c = s.copy()
    for o in FULL[80:]:
        s.apply(o)
    assert canon(c) == canon(fold_all(FULL[:80]))


# --- cost ------------------------------------------------------------------------------------------------------------


def test_fold_of_a_long_session() -> None:
    """Many turns of text and tools, past several column chunks (columns.CHUNK rows each). (Its cost per observation
    is measured by tools/bench_tui.py with 60,000 events, not asserted here.)"""
    obs = generated_observations(6_000)
    s = DashboardState()
    for o in obs:
        s.apply(o)
    assert s.status.events >= 6_000
    assert len(s.events) > 4 * CHUNK


def test_time_travel_on_a_long_session() -> None:
    """A long session at a tenth of the scale, checkpoints a tenth as far apart: the same 30 checkpoints and the
    same moments (at a checkpoint, just after one, near the end, before the first) as 60,000 events at the default
    spacing, over several observation blocks."""
    obs = generated_observations(6_000)
    h = History(obs, spacing=200)
    h.state_at(h.event_count)  # builds the checkpoints once
    assert len(h._checkpoints) >= 29
    for k in (5_900, 3_001, 3_000, 100):
        assert h.state_at(k).status.events == k


# --- summaries -------------------------------------------------------------------------------------------------------


def test_call_and_result_summaries() -> None:
    assert call_summary("read_file", {"path": "src/x.py"}) == 'read_file(path="src/x.py")'
    assert call_summary("w", None) == "w(…)"
    long = call_summary("write_file", {"path": "a.txt", "content": "x" * 500})
    assert len(long) <= 62 and long.endswith("…)")
    assert result_summary("one") == "one"
    assert result_summary("a\nb\nc") == "a  (3 lines, 5 B)"
    assert result_summary([{"type": "text", "text": "hi"}]) == "hi"
    assert error_position('{"a": 1-4}', None) == 7
    assert error_position("x", "bad at line 1 column 3 (char 2)") == 2


def test_state_and_synthetic_do_not_import_textual() -> None:
    """Only inspector.tui's widgets and app may import Textual: the state is a plain fold."""
    import subprocess
    import sys

    code = (
        "import sys, inspector.state.fold, inspector.testing.synthetic, inspector.tui.export; "
        "print([m for m in sys.modules if m == 'textual' or m.startswith('textual.')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- timing.buffered ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"buffered": False}, {"hold_in_silence": 3.5}])
def test_a_buffered_attempt_is_the_named_diagnostic_the_timing_view_agrees_with(kw: dict[str, Any]) -> None:
    """Issue 18 §4: the main screen said "no diagnostics: the stream was well-formed" while `i` said BUFFERED."""
    from inspector.record.timing import BUFFERED_CODE, recording_from_observations, timing_json
    from inspector.testing.synthetic import buffered_observations

    obs = buffered_observations(**kw)
    s = DashboardState().apply_all(obs)
    verdicts = [a["buffering"]["verdict"] for a in timing_json(recording_from_observations(obs))["attempts"]]
    codes = [d.code for d in s.diagnostics]
    assert (BUFFERED_CODE in codes) == (verdicts == ["buffered"])
    assert verdicts == (["buffered"] if not kw else ["not buffered"])
    if not kw:
        (d,) = s.diagnostics
        assert d.severity == "error" and "BUFFERED" in d.message and (d.turn, d.attempt) == (0, 0)
        # time travel rebuilds it too (the fold is the only source)
        assert [x.code for x in state_at(obs, 10_000).diagnostics] == [BUFFERED_CODE]


def test_the_parse_date_run_has_no_buffering_diagnostic() -> None:
    assert not [d for d in fold_all(FULL).diagnostics if d.code.startswith("timing.")]

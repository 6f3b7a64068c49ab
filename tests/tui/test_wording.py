"""The words of the fold's facts (tui/widgets/wording.py): the SSE pane's marker rows, a failed HTTP try, the
savings line. The fold keeps kinds, numbers and names; these say them (the snapshots show them in place)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from inspector.state.entries import Marker, Savings, TryEntry
from inspector.tui.widgets.wording import marker_label, savings_text, try_label


def a_try(status: int | None = 429, retry_in: float | None = 1.25, error: str | None = "rate_limit_error") -> TryEntry:
    return TryEntry(0, 1.0, 1.5, status, error, "slow down", "ConnectError: refused" if status is None else None,
                    retry_in, {})  # fmt: skip


def test_each_marker_kind_in_words() -> None:
    assert marker_label(Marker("attempt", 0, 1, "POST", "/v1/messages")) == "turn 1 · attempt 2 · POST /v1/messages"
    answered = Marker("attempt", 2, 0, "POST", "/v1/messages", answers=(200,))
    assert marker_label(answered) == "turn 3 · attempt 1 · POST /v1/messages → 200"
    twice = Marker("attempt", 0, 0, "POST", "/x", answers=(200, 200))  # a second response start is shown, not merged
    assert marker_label(twice) == "turn 1 · attempt 1 · POST /x → 200 → 200"
    assert marker_label(Marker("try", 0, 0, try_no=1, failure=a_try())) == (
        "try 1 · HTTP 429 rate_limit_error · SDK retries in 1.2 s"
    )
    assert marker_label(Marker("try", 0, 0, try_no=2, status=200)) == "try 2 · HTTP 200"
    assert marker_label(Marker("held", 0, 0, by="pause")) == "❚❚ stream held by pause · not counted in timing"
    assert marker_label(Marker("released", 0, 0, by="step", held=6.0)) == (
        "▶ stream released: held 6.00 s by step · not counted in timing"
    )


def test_a_failed_try_in_words() -> None:
    assert try_label(a_try(retry_in=None)) == "HTTP 429 rate_limit_error · SDK gives up"
    assert try_label(a_try(status=503, error=None, retry_in=0.5)) == "HTTP 503 · SDK retries in 0.5 s"
    assert try_label(a_try(status=None, error=None)) == "connection error: ConnectError: refused · SDK retries in 1.2 s"


def test_the_savings_line() -> None:
    assert savings_text(Savings(2.0, 3.0, 3.0, 1, 0)) == "= stream 2.00 + 1 used tool 3.00 − actual 3.00 s"


@given(
    st.builds(
        Marker,
        kind=st.sampled_from(["attempt", "try", "held", "released"]),
        turn=st.integers(0, 10**9),
        attempt=st.integers(0, 10**6),
        method=st.text(max_size=10),
        path=st.text(max_size=40),
        answers=st.lists(st.integers(100, 599), max_size=3).map(tuple),
        try_no=st.integers(1, 1000),
        status=st.none() | st.integers(100, 599),
        failure=st.none() | st.builds(a_try, st.none() | st.integers(100, 599), st.none() | st.floats(0, 1e6)),
        by=st.sampled_from(["pause", "step"]),
        held=st.floats(0, 1e9),
    )
)
def test_any_marker_is_worded_with_its_numbers(m: Marker) -> None:
    """Whatever the facts, a marker has words, and they carry its numbers (counted from 1)."""
    label = marker_label(m)
    assert label
    if m.kind == "attempt":
        assert label.startswith(f"turn {m.turn + 1} · attempt {m.attempt + 1} · ")
        assert label.count(" → ") >= len(m.answers)
    elif m.kind == "try":
        assert label.startswith(f"try {m.try_no} · ")
    else:
        assert f"by {m.by}" in label and label.endswith("not counted in timing")

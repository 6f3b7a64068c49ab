"""The words of what the fold keeps as facts: the SSE pane's marker rows (an attempt, an HTTP try, a hold of the
stream), a failed HTTP try (the status line, the Assistant pane's notes) and what streamed execution saved (the
timeline). The fold (inspector/state) keeps kinds, numbers and names; the panes say them with these."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspector.core import fmt
from inspector.state.entries import Marker, Savings, TryEntry

if TYPE_CHECKING:
    from inspector.state.fold import DashboardState


def whose_turn(state: DashboardState | None, turn: int) -> tuple[str, int] | None:
    """In a session of several conversations, (the conversation, its own turn) of the session's ``turn`` (in the
    view of all of them or of one: its own turns are not the session's); None in a session of one (or a turn no
    conversation holds)."""
    if state is None:
        return None
    table = state.conversations
    cid = table.by_turn.get(turn) if table else None
    entry = table.by_id.get(cid) if cid is not None else None
    own = entry.own_turn(turn) if entry is not None else None
    # (one conversation whose turns are the session's 0, 1, 2...: a session of one, its numbers say it all; one
    # conversation's view of many names its turns on every rule, its first one too: its turns are not 0, 1, 2...)
    if (
        cid is None
        or own is None
        or (len(table) == 1 and entry is not None and entry.turns[-1] == len(entry.turns) - 1)
    ):
        return None
    return cid, own


def turn_label(state: DashboardState | None, turn: int) -> str:
    """``turn 2``; in a session of several conversations, whose turn: ``[c2] turn 1 (#3)`` (its own turn, then the
    session's, as the conversation list and the status line count them). Every pane's turn rule says it so."""
    whose = whose_turn(state, turn)
    if whose is None:
        return f"turn {turn + 1}"
    return f"[{whose[0]}] turn {whose[1] + 1} (#{turn + 1})"


def turn_attempt_label(state: DashboardState | None, turn: int, attempt: int) -> str:
    """``turn 2.1`` (turn 2, attempt 1); in a session of several conversations ``[c2] turn 1.1 (#2)``."""
    whose = whose_turn(state, turn)
    if whose is None:
        return f"turn {turn + 1}.{attempt + 1}"
    return f"[{whose[0]}] turn {whose[1] + 1}.{attempt + 1} (#{turn + 1})"


def turn_tag(state: DashboardState | None, turn: int) -> str:
    """The short form, for a label column: ``t2``; in a session of several conversations ``c2 t1``."""
    whose = whose_turn(state, turn)
    return f"t{turn + 1}" if whose is None else f"{whose[0]} t{whose[1] + 1}"


def try_label(t: TryEntry) -> str:
    """``HTTP 429 rate_limit_error · SDK retries in 1.2 s`` (connection failures: ``connection error: ...``)."""
    if t.status is not None:
        what = f"HTTP {t.status}" + (f" {t.error_type}" if t.error_type else "")
    else:
        what = f"connection error: {fmt.short_text(t.connection_error or 'no response', 48)}"
    if t.retry_in is None:
        return f"{what} · SDK gives up"
    return f"{what} · SDK retries in {t.retry_in:.1f} s"


def marker_label(m: Marker, state: DashboardState | None = None) -> str:
    """The words of a marker row (turns, attempts and tries count from 1; ``state``: whose turn, see `turn_label`)."""
    if m.kind == "held":
        return f"❚❚ stream held by {m.by} · not counted in timing"
    if m.kind == "released":
        return f"▶ stream released: held {fmt.duration(m.held)} by {m.by} · not counted in timing"
    if m.kind == "try":
        what = try_label(m.failure) if m.failure is not None else f"HTTP {m.status}"
        return f"try {m.try_no} · {what}"
    answers = "".join(f" → {s}" for s in m.answers)
    return f"{turn_label(state, m.turn)} · attempt {m.attempt + 1} · {m.method} {m.path}{answers}"


def savings_text(s: Savings) -> str:
    """How the saved time is computed, with the numbers (one line under the timeline)."""
    n = f"{s.counted} used tool{'s' if s.counted != 1 else ''}"
    out = f"= stream {s.stream:.2f} + {n} {s.tools:.2f} − actual {s.actual:.2f} s"
    if s.left_out:
        out += f" ({s.left_out} discarded/not run: not counted)"
    return out


__all__ = ["marker_label", "savings_text", "try_label", "turn_attempt_label", "turn_label", "turn_tag", "whose_turn"]

"""The words of what the fold keeps as facts: the SSE pane's marker rows (an attempt, an HTTP try, a hold of the
stream), a failed HTTP try (the status line, the Assistant pane's notes) and what streamed execution saved (the
timeline). The fold (inspector/state) keeps kinds, numbers and names; the panes say them with these."""

from __future__ import annotations

from inspector.core import fmt
from inspector.state.entries import Marker, Savings, TryEntry


def try_label(t: TryEntry) -> str:
    """``HTTP 429 rate_limit_error · SDK retries in 1.2 s`` (connection failures: ``connection error: ...``)."""
    if t.status is not None:
        what = f"HTTP {t.status}" + (f" {t.error_type}" if t.error_type else "")
    else:
        what = f"connection error: {fmt.short_text(t.connection_error or 'no response', 48)}"
    if t.retry_in is None:
        return f"{what} · SDK gives up"
    return f"{what} · SDK retries in {t.retry_in:.1f} s"


def marker_label(m: Marker) -> str:
    """The words of a marker row (turns, attempts and tries count from 1)."""
    if m.kind == "held":
        return f"❚❚ stream held by {m.by} · not counted in timing"
    if m.kind == "released":
        return f"▶ stream released: held {fmt.duration(m.held)} by {m.by} · not counted in timing"
    if m.kind == "try":
        what = try_label(m.failure) if m.failure is not None else f"HTTP {m.status}"
        return f"try {m.try_no} · {what}"
    answers = "".join(f" → {s}" for s in m.answers)
    return f"turn {m.turn + 1} · attempt {m.attempt + 1} · {m.method} {m.path}{answers}"


def savings_text(s: Savings) -> str:
    """How the saved time is computed, with the numbers (one line under the timeline)."""
    n = f"{s.counted} used tool{'s' if s.counted != 1 else ''}"
    out = f"= stream {s.stream:.2f} + {n} {s.tools:.2f} − actual {s.actual:.2f} s"
    if s.left_out:
        out += f" ({s.left_out} discarded/not run: not counted)"
    return out


__all__ = ["marker_label", "savings_text", "try_label"]

"""The one-line fault summary that stays visible after a fault: `1 failed attempt · 2 tools discarded · 4
diagnostics`. Pure: from the folded state."""

from __future__ import annotations

from inspector.state.fold import DashboardState

BAD_TOOL_STATES = ("failed", "timed_out", "not_run", "cancelled", "discarded")
TOOL_WORDS = {"timed_out": "timed out", "not_run": "not run"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def fault_summary(state: DashboardState) -> str:
    """What went wrong so far, in one line ("" when nothing did)."""
    parts: list[str] = []
    failed = sum(1 for a in state.attempts.values() if a.failed)
    if failed:
        parts.append(_plural(failed, "failed attempt"))
    counts: dict[str, int] = {}
    for t in state.tools.values():
        if t.state in BAD_TOOL_STATES:
            counts[t.state] = counts.get(t.state, 0) + 1
    for st in BAD_TOOL_STATES:
        if counts.get(st):
            parts.append(f"{_plural(counts[st], 'tool')} {TOOL_WORDS.get(st, st)}")
    n = len(state.diagnostics)
    if n:
        errors = sum(1 for d in state.diagnostics if d.severity == "error")
        parts.append(_plural(n, "diagnostic") + (f" ({errors} error{'s' if errors != 1 else ''})" if errors else ""))
    return " · ".join(parts)


__all__ = ["fault_summary"]

"""Shared helpers of the dashboard-state tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from inspector.state.fold import DashboardState

__all__ = ["canon"]


def canon(s: DashboardState) -> dict[str, Any]:
    """Everything a view can see, as plain data (versions included: caches are keyed on them)."""
    ev = s.events
    return {
        "n": s.n,
        "events": [ev.row(i) for i in range(len(ev))],
        "reads": [(s.reads.turn[i], s.reads.read_index[i], s.reads.data[i]) for i in range(len(s.reads))],
        "blocks": {
            k: (b.fragments, b.closed, b.content, b.input_error, b.error_pos, b.diagnostics, b.version)
            for k, b in s.blocks.items()
        },
        "tools": {k: dataclasses.astuple(t) for k, t in s.tools.items()},
        "attempts": {k: dataclasses.astuple(a) for k, a in s.attempts.items()},
        "turns": {k: dataclasses.astuple(t) for k, t in s.turns.items()},
        "transcript": list(s.transcript),
        "diagnostics": list(s.diagnostics),
        "markers": dict(s.markers),
        "status": dataclasses.astuple(s.status),
        "revs": (s.rev_events, s.rev_blocks, s.rev_tools, s.rev_transcript, s.rev_diag, s.rev_status),
    }

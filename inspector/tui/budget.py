"""The dashboard's frame budget: how soon the panes may be repainted after a frame that cost `c` seconds.

The rule (docs: README, "How the dashboard refreshes"): the observations are folded into the state at every tick
(`refresh_hz`, 30 a second), but the UI work of a frame (pointing the panes at the state, then Textual's layout and
paint of what changed) keeps to a share of the time: after a frame that cost `c`, the next one comes at least
`max(1 / refresh_hz, SHARE_K * c)` after the start of that one, and never later than `MAX_INTERVAL`. A cheap frame
(a calm stream: a few ms) changes nothing, the screen keeps 30 frames a second; under a flood (a replay at max speed)
a 20 ms frame is followed by ~0.5 s of folding at full speed (the App shows a burst folded meanwhile at the first
tick that brings nothing new: only a flood waits). A control key (pause, step, cancel), a time-travel key,
the end of the session and every other forced refresh paint at once, whatever the budget says.

Pure: no Textual, no clock of its own (the App gives it its frame clock's readings; tests give it theirs).
"""

from __future__ import annotations

SHARE_K = 24.0  # after a frame that cost c, the next at least SHARE_K * c later: the UI keeps to ~1/25 of the time
# (it was 12, ~1/13: under a flood that was ~0.2 s of the dashboard's ~1.3 s over no UI at 100k events, issue 17)
# ... but the screen is repainted at least once a second, whatever a frame costs. (It was 0.5 s: under a flood a
# full frame at 160x48 costs 50-80 ms, so the cap, not the share, set the pace, and the UI took ~1/8 of the time
# instead of ~1/13; a second lets the share hold for frames up to ~40 ms, and caps the rest at one a second.)
MAX_INTERVAL = 1.0


class FrameBudget:
    """When the next frame is due, from what the last one cost (its own work, then the paint that followed it)."""

    def __init__(self, min_interval: float, *, k: float = SHARE_K, max_interval: float = MAX_INTERVAL) -> None:
        self.min_interval = min_interval
        self.k = k
        self.max_interval = max(max_interval, min_interval)
        self.started: float | None = None  # when the last frame started (None: no frame yet)
        self.cost = 0.0  # what the last frame cost so far (seconds)
        self.next_at = float("-inf")  # the earliest time the next frame may start
        self.frames = 0  # frames so far (benchmarks)

    def due(self, now: float) -> bool:
        """May a frame start now? (Also when the clock reads before the last frame: a clock that was replaced.)"""
        return now >= self.next_at or (self.started is not None and now < self.started)

    def frame(self, started: float, cost: float) -> None:
        """A frame started at `started` and its own work took `cost` seconds (a forced frame counts too)."""
        self.started, self.cost = started, max(0.0, cost)
        self.frames += 1
        self._schedule()

    def spent(self, cost: float) -> None:
        """More work of the last frame, done after it returned (Textual's layout and paint of what it changed)."""
        if self.started is None or cost <= 0:
            return
        self.cost += cost
        self._schedule()

    def _schedule(self) -> None:
        assert self.started is not None
        wait = min(self.max_interval, max(self.min_interval, self.k * self.cost))
        self.next_at = self.started + wait


__all__ = ["FrameBudget", "SHARE_K", "MAX_INTERVAL"]

"""Time travel over the fold: the state as of any event, rebuilt from checkpoints."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from inspector.agent import observations as O
from inspector.state.fold import DashboardState

# ------------------------------------------------------------------------------------------------ time travel


def cut_index(observations: Sequence[O.Observation], k: int) -> int:
    """How many observations make up the state "as of event k": everything before the (k+1)-th SSE event."""
    if k < 0:
        raise ValueError("k must be >= 0")
    seen = 0
    for i, obs in enumerate(observations):
        if type(obs) is O.SSEEventSeen:
            if seen == k:
                return i
            seen += 1
    return len(observations)


def state_at(observations: Sequence[O.Observation], k: int) -> DashboardState:
    """The state right after the k-th SSE event (k=0: before the first one), rebuilt from the start."""
    state = DashboardState()
    for obs in observations[: cut_index(observations, k)]:
        state.apply(obs)
    return state


class History:
    """The observations received so far, with time travel in near-constant time.

    `append` is O(1). `state_at(k)` starts from the nearest checkpoint at or before event k (a `copy()` of the
    state taken during an earlier fold) and folds forward; checkpoints are made lazily, every `spacing` events.
    """

    def __init__(self, observations: Iterable[O.Observation] = (), *, spacing: int = 2000) -> None:
        self.observations: list[O.Observation] = []
        self.event_pos = array("q")  # observation index of each SSE event
        self.spacing = spacing
        self._checkpoints: dict[int, DashboardState] = {}  # event number k -> state as of k (read only)
        self._cursor_state: DashboardState | None = None
        self._cursor_k = -1
        for obs in observations:
            self.append(obs)

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def event_count(self) -> int:
        return len(self.event_pos)

    def append(self, obs: O.Observation) -> None:
        if type(obs) is O.SSEEventSeen:
            self.event_pos.append(len(self.observations))
        self.observations.append(obs)

    def extend(self, observations: Iterable[O.Observation]) -> None:
        for obs in observations:
            self.append(obs)

    def cut(self, k: int) -> int:
        """Observation count of the state as of event k."""
        return self.event_pos[k] if k < len(self.event_pos) else len(self.observations)

    def state_at(self, k: int) -> DashboardState:
        """The state right after the k-th SSE event. The result is the caller's (never shared)."""
        k = max(0, min(k, self.event_count))
        end = self.cut(k)
        # move forward from the last answer when possible (stepping right is the common case)
        if self._cursor_state is not None and self._cursor_k <= k and self._cursor_state.n <= end:
            base_k, state = self._cursor_k, self._cursor_state.copy()
        else:
            base_k = max((c for c in self._checkpoints if c <= k), default=0)
            state = self._checkpoints[base_k].copy() if base_k in self._checkpoints else DashboardState()
        obs = self.observations
        pos = state.n  # a state folded from the start of this history has applied exactly its first n observations
        sp = self.spacing
        next_ck = (base_k // sp + 1) * sp
        while next_ck <= k and next_ck < self.event_count:
            ck_end = self.cut(next_ck)
            for i in range(pos, ck_end):
                state.apply(obs[i])
            pos = ck_end
            if next_ck not in self._checkpoints:
                self._checkpoints[next_ck] = state.copy()
            next_ck += sp
        for i in range(pos, end):
            state.apply(obs[i])
        self._cursor_state, self._cursor_k = state.copy(), k
        return state

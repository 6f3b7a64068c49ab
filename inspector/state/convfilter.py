"""One conversation's view of the session (the dashboard's conversation list chooses it): a `DashboardState` folded
from that conversation's turns only. Apart from state/conversations.py (which the fold imports): this module imports
the fold, and nothing in the fold imports it (no import circle in the state package)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from inspector.observe import observations as O
from inspector.state.conversations import ConversationEvents, EventSource
from inspector.state.fold import DashboardState


class ConversationFilter:
    """One conversation's view of the session: a `DashboardState` folded from its turns' observations only (and
    from those that belong to no turn: the loop's state, holds without a turn). Fed in order, O(1) per observation;
    an observation of another conversation's turn is skipped without being folded."""

    def __init__(self, conversation: str, seed: DashboardState | None = None, events_before: int = 0) -> None:
        """`seed`: the session's state before the conversation's first observation; what belongs to no turn (the
        source, the loop's state) is carried over from it, so the filter can start at that observation.
        `events_before`: the session's SSE events before that observation (to number events as the session does)."""
        self.conversation = conversation
        self.turns: set[int] = set()
        self.state: DashboardState = DashboardState()
        self.seen = 0  # observations offered (folded or skipped)
        self.session_events = events_before  # the session's SSE events offered so far
        # the session's event number of each of this view's events (its own are numbered 1, 2, ... like any state)
        self.event_map = array("q")
        if seed is not None:
            st, src = self.state.status, seed.status
            st.source, st.model, st.prompt = dict(src.source), src.model, src.prompt
            st.loop_state, st.detail, st.control = src.loop_state, src.detail, src.control

    def apply(self, obs: O.Observation) -> None:
        self.seen += 1
        if type(obs) is O.ConversationAssigned:
            if obs.conversation == self.conversation:
                self.turns.add(obs.turn)
            else:  # that turn number is another conversation's from now on (a replay's loops start over at 0)
                self.turns.discard(obs.turn)
                return
        elif type(obs) is O.ExchangeForwarded:
            if obs.conversation != self.conversation:
                return
        elif type(obs) is O.LoopStarted:
            # a replay of many conversations starts one loop per conversation: another one's start (its prompt,
            # its source) is not this conversation's
            cid = (obs.source or {}).get("conversation")
            if isinstance(cid, str) and cid != self.conversation:
                return
        else:
            turn = getattr(obs, "turn", None)
            is_event = type(obs) is O.SSEEventSeen
            if is_event:
                self.session_events += 1
            if turn is not None and turn not in self.turns:
                return
            if is_event:
                self.event_map.append(self.session_events)
        self.state.apply(obs)

    def apply_all(self, observations: Iterable[O.Observation]) -> ConversationFilter:
        for obs in observations:
            self.apply(obs)
        return self

    def session_event(self, evno: int) -> int | None:
        """The session's number of this view's event `evno` (1-based), or None."""
        return self.event_map[evno - 1] if 1 <= evno <= len(self.event_map) else None

    def events_of(self, history: EventSource) -> ConversationEvents:
        """The session's history seen through this view's event numbers (for the detail views)."""
        return ConversationEvents(history, self.event_map)

"""The conversations of a proxied session, folded from observations (no Textual here).

The proxy publishes a `ConversationAssigned` before each turn's request (global turn -> conversation, its own turn,
attempt, how, parent); every other observation carries the global turn. `ConversationTable.apply` keeps, per
conversation: model, turns, state, last activity, tokens and side requests, in O(1) per observation. Side requests
(`ExchangeForwarded`) are counted with their conversation, or as "other requests"; never as turns.

`ConversationFilter` folds only one conversation's observations (and those of no turn) into its own
`DashboardState`: the four panes shown on that state list that conversation's rows only, with no change to them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from inspector.observe import observations as O

if TYPE_CHECKING:
    pass

# the states a conversation is in, as the list shows them
STREAMING = "streaming"
WAITING_TOOLS = "waiting for tools"
IDLE = "idle"
FINISHED = "finished"
FAILED = "failed"
# the session ended (the watched command exited) while the conversation waited for tools or was idle: it will not go
# on, and it did not finish
ENDED = "ended unfinished"
# stop reasons after which the model is done with the conversation (until a person writes again)
_FINAL_STOPS = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal", "model_context_window_exceeded"})


@dataclass(slots=True)
class ConversationEntry:
    id: str
    number: int  # 1, 2, ... in order of appearance
    t_start: float
    first_obs: int = 0  # the index of its first observation (its first ConversationAssigned) in the session
    parent: str | None = None  # the conversation whose tool call started this one (a subagent)
    model: str | None = None
    turns: list[int] = field(default_factory=list)  # its global turn numbers, in order
    attempts: int = 0  # attempts over all its turns (retries included)
    open_attempt: tuple[int, int] | None = None  # the attempt streaming now
    last_status: str | None = None  # the last attempt's end: complete | failed | cancelled
    stop_reason: str | None = None  # its last turn's
    t_last: float = 0.0  # last activity (loop time)
    tokens_in: int = 0
    tokens_out: int = 0
    side_requests: int = 0
    version: int = 0
    turn_usage: dict[int, tuple[int, int]] = field(default_factory=dict)  # global turn -> its last attempt's tokens
    ended: bool = False  # the session ended after its last turn (a LoopFinished): no next request can come
    # its turns that started so far (`turns` may be ahead: a replay of many conversations assigns each one's turns
    # before its loop runs them; a proxy assigns a turn as its request comes, the two are then the same)
    started: int = 0

    def own_turn(self, turn: int) -> int | None:
        """A session turn's number within this conversation (0-based), or None when it is not one of its turns."""
        try:
            return self.turns.index(turn)
        except ValueError:
            return None

    @property
    def state(self) -> str:
        if self.open_attempt is not None:
            return STREAMING
        if self.last_status in ("failed", "cancelled"):
            return FAILED
        if self.stop_reason in _FINAL_STOPS:
            return FINISHED
        return ENDED if self.ended else WAITING_TOOLS if self.stop_reason == "tool_use" else IDLE

    def copy(self) -> ConversationEntry:
        return ConversationEntry(
            self.id,
            self.number,
            self.t_start,
            self.first_obs,
            self.parent,
            self.model,
            list(self.turns),
            self.attempts,
            self.open_attempt,
            self.last_status,
            self.stop_reason,
            self.t_last,
            self.tokens_in,
            self.tokens_out,
            self.side_requests,
            self.version,
            dict(self.turn_usage),
            self.ended,
            self.started,
        )


def _tokens(usage: dict[str, Any]) -> tuple[int, int]:
    def num(k: str) -> int:
        v = usage.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    return (
        num("input_tokens") + num("cache_read_input_tokens") + num("cache_creation_input_tokens"),
        num("output_tokens"),
    )


class ConversationTable:
    """Conversations in order of appearance; `by_turn` maps a global turn to its conversation.

    While `by_turn` is empty, `apply` of an observation whose type is not in `ROUTING` only counts it (``n += 1``):
    a batch fold (`DashboardState.apply_all`) does just that without the call."""

    ROUTING: frozenset[type] = frozenset({O.ConversationAssigned, O.ExchangeForwarded})

    def __init__(self) -> None:
        self.by_id: dict[str, ConversationEntry] = {}
        self.order: list[str] = []
        self.by_turn: dict[int, str] = {}
        self.other_requests = 0  # side requests of no conversation
        self.side_requests = 0  # side requests in all (of a conversation or none): the status line's count
        # side requests by why they are no turns ("not streamed", "count_tokens", "GET", "other path": the kind, not
        # the path, so a few keys whatever the requests)
        self.side_why: dict[str, int] = {}
        self.streaming = 0  # conversations with an attempt streaming now
        self.rev = 0  # the observation count when anything here last changed
        self.n = 0

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[ConversationEntry]:
        return (self.by_id[c] for c in self.order)

    @property
    def newest(self) -> str | None:
        return self.order[-1] if self.order else None

    def turns_of(self, cid: str) -> list[int]:
        entry = self.by_id.get(cid)
        return [] if entry is None else entry.turns

    def apply(self, obs: O.Observation) -> None:
        self.n += 1
        # obs is of the exact class tp: mypy does not narrow by a stored type(obs) (one call here, not one per
        # branch), so the branch taken casts it (one branch per observation)
        tp = type(obs)
        if tp is O.ConversationAssigned:
            self._assigned(cast(O.ConversationAssigned, obs))
            return
        if tp is O.ExchangeForwarded:
            self._side(cast(O.ExchangeForwarded, obs))
            return
        if not self.by_turn:  # (no conversation yet: every observation of a session that is not a proxy's)
            return
        if tp is O.LoopFinished:  # the session (a replay: a conversation's loop) ended: nothing more will come
            self._ended()
            return
        turn = getattr(obs, "turn", None)
        if turn is None:
            return
        cid = self.by_turn.get(turn)
        if cid is None:
            return
        c = self.by_id[cid]
        if tp is not O.ToolStateChanged or cast(O.ToolStateChanged, obs).state != "unknown":
            c.t_last = max(c.t_last, obs.t)  # (a call ended unknown at the session's end is not its activity)
        if tp is O.TurnStarted:
            c.started += 1
        elif tp is O.AttemptStarted:
            started = cast(O.AttemptStarted, obs)
            if c.open_attempt is None:
                self.streaming += 1
            c.open_attempt = (turn, started.attempt)
            c.attempts += 1
            body = started.body
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                c.model = c.model or body["model"]
        elif tp is O.MessageStarted:
            msg = cast(O.MessageStarted, obs).message or {}
            if isinstance(msg.get("model"), str):
                c.model = msg["model"]
            if isinstance(msg.get("usage"), dict):
                self._usage(c, turn, msg["usage"], merge=False)
        elif tp is O.MessageUpdated:
            updated = cast(O.MessageUpdated, obs)
            if updated.usage:
                self._usage(c, turn, updated.usage, merge=True)
            if updated.stop_reason is not None:
                c.stop_reason = updated.stop_reason
        elif tp is O.AttemptEnded:
            ended = cast(O.AttemptEnded, obs)
            if c.open_attempt == (turn, ended.attempt):
                c.open_attempt = None
                self.streaming -= 1
            c.last_status = ended.status
        elif tp is O.TurnEnded:
            turn_ended = cast(O.TurnEnded, obs)
            c.stop_reason = turn_ended.stop_reason
            if turn_ended.usage:
                self._usage(c, turn, turn_ended.usage, merge=False)
        c.version = self.n
        self.rev = self.n

    def _assigned(self, obs: O.ConversationAssigned) -> None:
        c = self.by_id.get(obs.conversation)
        if c is None:
            c = ConversationEntry(obs.conversation, len(self.order) + 1, obs.t, self.n - 1, obs.parent)
            self.by_id[obs.conversation] = c
            self.order.append(obs.conversation)
        if self.by_turn.get(obs.turn) != obs.conversation:
            # (a replay of a recording of many conversations runs each in its own loop, one after the other: their
            # turn numbers start over; a turn number is that of the conversation that was assigned it last)
            c.turns.append(obs.turn)
        self.by_turn[obs.turn] = obs.conversation
        if obs.parent and not c.parent:
            c.parent = obs.parent
        if obs.attempt == 0:  # a new turn: the previous turn's end no longer describes it
            c.stop_reason = None
        c.ended = False
        c.t_last = max(c.t_last, obs.t)
        c.version = self.rev = self.n

    def _ended(self) -> None:
        for c in self.by_id.values():
            if not c.ended and c.open_attempt is None:
                c.ended = True
                c.version = self.n
                self.rev = self.n

    def _side(self, obs: O.ExchangeForwarded) -> None:
        self.side_requests += 1
        why = (obs.side or "other").split(" /", 1)[0]
        if why in self.side_why or len(self.side_why) < 8:
            self.side_why[why] = self.side_why.get(why, 0) + 1
        c = self.by_id.get(obs.conversation or "")
        if c is None:
            self.other_requests += 1
        else:
            c.side_requests += 1
            c.t_last = max(c.t_last, obs.t)
            c.version = self.n
        self.rev = self.n

    def _usage(self, c: ConversationEntry, turn: int, usage: dict[str, Any], *, merge: bool) -> None:
        """A turn's usage (cumulative per attempt): the conversation's totals count each turn's latest value. A
        usage with no count (a chat stream's, without stream_options.include_usage) is none: ``turn_usage`` keeps
        only turns whose usage the API reported."""
        if not any(isinstance(v, int) and not isinstance(v, bool) for v in usage.values()):
            return
        tin, tout = _tokens(usage)
        old_in, old_out = c.turn_usage.get(turn, (0, 0))
        if merge:  # a message_delta may carry output tokens only: keep the input the message_start said
            tin = tin or old_in
            tout = tout or old_out
        c.turn_usage[turn] = (tin, tout)
        c.tokens_in += tin - old_in
        c.tokens_out += tout - old_out

    def cow_copy(self) -> ConversationTable:
        """An independent copy (a checkpoint): conversations are few and small next to the session's rows."""
        new = ConversationTable()
        new.by_id = {k: v.copy() for k, v in self.by_id.items()}
        new.order = list(self.order)
        new.by_turn = dict(self.by_turn)
        new.other_requests, new.streaming, new.rev, new.n = self.other_requests, self.streaming, self.rev, self.n
        new.side_requests = self.side_requests
        new.side_why = dict(self.side_why)
        return new


class EventSource(Protocol):
    """Where a detail view finds event k's own observation: `observations[event_pos[k - 1]]` (a `History`)."""

    @property
    def observations(self) -> Sequence[O.Observation]: ...
    @property
    def event_pos(self) -> Sequence[int]: ...
    @property
    def event_count(self) -> int: ...


class _Positions(Sequence[int]):
    def __init__(self, pos: Sequence[int], event_map: Sequence[int]) -> None:
        self.pos, self.map = pos, event_map

    def __len__(self) -> int:
        return len(self.map)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.pos[g - 1] for g in self.map[i]]
        return self.pos[self.map[i] - 1]


class ConversationEvents:
    """A session's history as one conversation's view numbers its events (an `EventSource`)."""

    def __init__(self, history: EventSource, event_map: Sequence[int]) -> None:
        self.observations = history.observations
        self.event_pos = _Positions(history.event_pos, event_map)

    @property
    def event_count(self) -> int:
        return len(self.event_pos)


__all__ = [
    "ConversationEntry",
    "ConversationTable",
    "ConversationEvents",
    "EventSource",
    "STREAMING",
    "WAITING_TOOLS",
    "IDLE",
    "FINISHED",
    "FAILED",
    "ENDED",
]

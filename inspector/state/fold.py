"""The dashboard's state: a pure, linear fold over the loop's observations (no Textual here).

`DashboardState.apply(obs)` folds one observation in O(1) (amortised): rows are appended to compact columns,
blocks keep their fragments as a list (joined lazily, cached), nothing is re-parsed per delta. The same fold serves
the live view and time travel: `state_at(observations, k)` rebuilds the state as it was right after the k-th SSE
event (and before the (k+1)-th), and `History` does the same in roughly constant time with checkpoints.

Everything that changes carries a `version` (the number of observations applied when it last changed), so a view
can cache what it rendered by (key, version) and the cache stays valid across time travel: the same prefix of
observations always yields the same versions.

`apply_all(batch)` is the same fold for a batch, its lookups made once (the app's tick; time travel folding forward);
`History.extend_live(batch)` appends a batch to the history and folds it into the live state it follows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from inspector.observe import observations as O
from inspector.observe.states import TOOL_RAN, TOOL_TERMINAL, LoopState, ToolState
from inspector.observe.stepobs import event_name
from inspector.record.timing import (
    BUFFERED_CODE,
    HELD_SILENCE,
    attempt_buffering,
    buffering_diagnostic,
    replayed_buffering,
)
from inspector.state.columns import ByteStore, CowDict
from inspector.state.conversations import ConversationTable
from inspector.state.entries import (
    F_DIAG,
    F_ERROR,
    F_MARKER,
    F_WARN,
    MARKER,
    AttemptEntry,
    BlockEntry,
    DiagEntry,
    EventTable,
    Marker,
    ReadTable,
    Savings,
    Status,
    ToolEntry,
    ToolKey,
    TranscriptItem,
    TryEntry,
    TurnEntry,
    _utf8_len,
    call_summary,
    clone,
    error_position,
    result_summary,
)
from inspector.stream.protocol import TOOL_INPUT_BLOCKS

# the fold, and the entries it makes (defined in inspector.state.entries, re-exported: the views import them here)
__all__ = [
    "F_DIAG",
    "F_ERROR",
    "F_MARKER",
    "F_WARN",
    "MARKER",
    "AttemptEntry",
    "BlockEntry",
    "DashboardState",
    "DiagEntry",
    "EventTable",
    "Marker",
    "ReadTable",
    "Savings",
    "Status",
    "ToolEntry",
    "ToolKey",
    "TranscriptItem",
    "TryEntry",
    "TurnEntry",
    "call_summary",
    "clone",
    "error_position",
    "fold",
    "result_summary",
]

# ------------------------------------------------------------------------------------------------ the state


class DashboardState:
    """Everything the dashboard shows, folded from observations. Mutated in place by `apply` (O(1) each)."""

    def __init__(self) -> None:
        self.n = 0  # observations applied
        # bulk bytes (raw reads, event summaries) out of the heap, shared with every copy of this state
        self.store = ByteStore()
        self.events = EventTable(self.store)
        self.reads = ReadTable(self.store)
        # entries are shared with copies until the fold gets them (copy on write): checkpoints stay small
        # the fold changes an entry only through `mutable(key)`; readers use get / [] / values() (never a clone)
        self.attempts: CowDict[tuple[int, int], AttemptEntry] = CowDict()
        self.turns: CowDict[int, TurnEntry] = CowDict()
        self.blocks: CowDict[tuple[int, int, int], BlockEntry] = CowDict()
        self.block_order: list[tuple[int, int, int]] = []
        # tool calls by (conversation, tool id): two conversations may use the same ids (a scripted `serve` does)
        self.tools: CowDict[ToolKey, ToolEntry] = CowDict()
        self.tool_order: list[ToolKey] = []
        self.transcript: list[TranscriptItem] = []
        self._tx_turn: int | None = None  # the turn of the transcript's last turn rule (see _tx)
        self.diagnostics: list[DiagEntry] = []
        self.status = Status()
        self.attempt_first_row: dict[tuple[int, int], int] = {}
        self.attempt_offset: dict[tuple[int, int], int] = {}  # bytes received so far per attempt
        # the facts of the event table's marker rows (attempts, HTTP tries, holds), by row: the tui words them
        self.markers: CowDict[int, Marker] = CowDict()
        # what the harness sent per attempt (AttemptStarted.body, shared, read only): the request view and its diff
        self.requests: dict[tuple[int, int], dict[str, Any]] = {}
        # tool_result blocks a request carried, by (conversation, tool_use_id): why a tool a proxied harness ran failed
        self.sent_results: dict[ToolKey, dict[str, Any]] = {}
        self.attempt_first_evno: dict[tuple[int, int], int] = {}  # event number of each attempt's first event
        self.attempt_first_read: dict[tuple[int, int], int] = {}  # row of each attempt's first read (reads table)
        # the user's holds of the stream (pause, step), loop time: (start, end or None while held, by)
        self.holds: list[tuple[float, float | None, str]] = []
        # a proxied session's conversations (ConversationAssigned): model, turns, state, tokens per conversation
        self.conversations = ConversationTable()
        # the entries the fold is working on (an attempt, a block): owned by this state, dropped on copy
        self._ca: AttemptEntry | None = None
        self._cb: BlockEntry | None = None
        # Revisions per area (the observation count when the area last changed): views skip unchanged areas.
        self.rev_events = 0
        self.rev_blocks = 0
        self.rev_tools = 0
        self.rev_transcript = 0
        self.rev_diag = 0
        self.rev_status = 0
        # the observation count when a tool call or an attempt of an ended turn last changed (`_touch_settled`): a
        # view that keeps the rows of settled tools from frame to frame (the Tools pane) draws them again then
        self.rev_settled = 0

    # -------------------------------------------------------------------------------------------- folding

    def apply(self, obs: O.Observation) -> DashboardState:
        self.n += 1
        tp = type(obs)
        handler = _HANDLERS.get(tp)
        if handler is not None:
            handler(self, obs)
        conversations = self.conversations
        if conversations.by_turn or tp in conversations.ROUTING:
            conversations.apply(obs)
        else:  # (no conversation yet: the table would only count it)
            conversations.n += 1
        st = self.status
        if obs.t > st.t_last:
            st.t_last = obs.t
        return self

    def apply_all(self, observations: Iterable[O.Observation]) -> DashboardState:
        """`apply` each observation in turn (the same fold, its lookups made once for the batch: what the app folds
        per tick)."""
        handlers, st = _HANDLERS, self.status
        conversations = self.conversations
        routing, by_turn = conversations.ROUTING, conversations.by_turn
        for obs in observations:
            self.n += 1
            tp = type(obs)
            handler = handlers.get(tp)
            if handler is not None:
                handler(self, obs)
            if by_turn or tp in routing:
                conversations.apply(obs)
            else:  # (no conversation yet: the table would only count it)
                conversations.n += 1
            if obs.t > st.t_last:
                st.t_last = obs.t
        return self

    # -- loop & turns
    def _loop_started(self, obs: O.LoopStarted) -> None:
        st = self.status
        st.source, st.model, st.prompt = dict(obs.source or {}), obs.model, obs.prompt
        if st.finished is not None:  # (another conversation's loop of a replay: the session goes on)
            st.finished = None
        cid = st.source.get("conversation")
        if isinstance(cid, str) and obs.prompt:
            # a replay of many conversations starts one loop per conversation: its prompt is that conversation's
            # (the status keeps the last one); the transcript says whose it is, before that conversation's turns
            self.transcript.append(("prompt", cid, obs.prompt))
            self._tx_turn = None
            self.rev_transcript = self.n
        self._touch_status()

    def _loop_state(self, obs: O.LoopStateChanged) -> None:
        self.status.loop_state, self.status.detail = obs.state, obs.detail
        self._touch_status()

    def _marker(self, t: float, m: Marker, flags: int = F_MARKER) -> None:
        """A row of the event table that is not an event (an attempt, an HTTP try, a hold of the stream): its kind
        is its etype, its facts are kept in `markers` (no summary: the words are the tui's)."""
        row = self.events.append(-1, t, m.kind, -1, "", -1, m.turn, m.attempt, flags | F_MARKER, 0, 0, 0)
        self.markers[row] = m
        self.rev_events = self.n

    def _control(self, obs: O.ControlApplied) -> None:
        self.status.control = obs.control
        self._touch_status()

    def _held(self, obs: O.StreamHeld) -> None:
        st = self.status
        if st.held_since is not None:  # already held (a step that ends inside a pause): one interval
            return
        st.held_by, st.held_since = obs.by, obs.t
        self.holds.append((obs.t, None, obs.by))
        turn = st.turn if obs.turn is None else obs.turn
        attempt = st.attempt if obs.attempt is None else obs.attempt
        if obs.by != "step":  # a step holds after every event: its row comes at the release only
            self._marker(obs.t, Marker("held", turn, attempt, by=obs.by, version=self.n))
        self.rev_tools = self.n  # the timeline draws holds
        self._touch_status()

    def _released(self, obs: O.StreamReleased) -> None:
        st = self.status
        start = st.held_since if st.held_since is not None else obs.t - max(0.0, obs.held)
        held = max(0.0, obs.held) if obs.held is not None else max(0.0, obs.t - start)
        by = st.held_by or "pause"
        st.held_total += held
        st.held_by = st.held_since = None
        if self.holds and self.holds[-1][1] is None:
            self.holds[-1] = (self.holds[-1][0], self.holds[-1][0] + held, by)
        else:
            self.holds.append((obs.t - held, obs.t, by))
        turn = st.turn if obs.turn is None else obs.turn
        attempt = st.attempt if obs.attempt is None else obs.attempt
        self._marker(obs.t, Marker("released", turn, attempt, by=by, held=held, version=self.n))
        self.rev_tools = self.n
        self._touch_status()

    def _http_try(self, obs: O.HttpTryFailed) -> None:
        a = self._attempt(obs.turn, obs.attempt, obs.t_sent)
        entry = TryEntry(
            obs.try_index,
            obs.t_sent,
            obs.t,
            obs.status,
            obs.error_type,
            obs.error_message,
            obs.connection_error,
            obs.retry_in,
            dict(obs.headers or {}),
        )
        a.tries.append(entry)
        a.version = self.n
        self.status.last_try = entry
        m = Marker("try", obs.turn, obs.attempt, try_no=len(a.tries), failure=entry, version=self.n)
        self._marker(obs.t, m, F_MARKER | F_ERROR)
        self._tx(obs.turn, ("note", ("try", obs.turn, entry), "warning"))
        self.rev_transcript = self.n
        self.rev_tools = self.n  # the timeline draws the tries and the waits
        self._touch_status()

    def _turn_started(self, obs: O.TurnStarted) -> None:
        self.turns[obs.turn] = TurnEntry(obs.turn, obs.t, version=self.n)
        st = self.status
        st.turn, st.attempt = obs.turn, 0  # (its first attempt, until that starts: not the last turn's attempt number)
        self.transcript.append(("turn", obs.turn))
        self._tx_turn = obs.turn
        self.rev_transcript = self.n
        self._touch_status()

    def _tx(self, turn: int, item: TranscriptItem) -> None:
        """Append a transcript item of ``turn`` under that turn's rule. Concurrent conversations (a proxied session)
        interleave their turns: when the last rule is another turn's, this turn's rule is repeated first, so that an
        item is never shown under another turn (the transcript stays append-only)."""
        if self._tx_turn != turn:
            self.transcript.append(("turn", turn))
            self._tx_turn = turn
        self.transcript.append(item)

    def _turn(self, turn: int, t: float) -> TurnEntry:
        entry = self.turns.mutable(turn)
        if entry is None:  # tolerate a stream without TurnStarted
            entry = self.turns[turn] = TurnEntry(turn, t)
            self.transcript.append(("turn", turn))
            self._tx_turn = turn
            self.rev_transcript = self.n
        return entry

    def _attempt_started(self, obs: O.AttemptStarted) -> None:
        key = (obs.turn, obs.attempt)
        a = AttemptEntry(obs.turn, obs.attempt, obs.t, obs.method, obs.url, version=self.n)
        self.attempts[key] = self._ca = a
        if isinstance(obs.body, dict):
            self.requests[key] = obs.body
            self._sent_results(obs.body, self.conversation_of(obs.turn) or "")
        turn = self._turn(obs.turn, obs.t)
        turn.attempts.append(obs.attempt)
        turn.version = self.n
        st = self.status
        st.turn, st.attempt = obs.turn, obs.attempt
        a.held_base = self._held_at(obs.t)
        self.attempt_first_row[key] = len(self.events) + 1
        self.attempt_first_evno[key] = st.events + 1
        self.attempt_offset[key] = 0
        m = Marker(MARKER, obs.turn, obs.attempt, method=obs.method, path=_path(obs.url), version=self.n)
        self._marker(obs.t, m)
        if obs.attempt > 0:
            self._tx(obs.turn, ("note", ("retry", obs.turn, obs.attempt), "warning"))
            self.rev_transcript = self.n
        self._touch_status()

    def _sent_results(self, body: dict[str, Any], conversation: str) -> None:
        """Remember the tool_result blocks of the request's last user message; a failed tool without an error text
        (a proxied harness ran it: the proxy infers the state) gets the result's content as its why."""
        messages = body.get("messages")
        # a list, or the loop's history view (agent.transcript: read back from its spill file, the last one only)
        is_seq = isinstance(messages, Sequence) and not isinstance(messages, (str, bytes))
        last = messages[-1] if is_seq and messages else None
        content = last.get("content") if isinstance(last, dict) and last.get("role") == "user" else None
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            key = (conversation, str(block.get("tool_use_id")))
            self.sent_results[key] = block
            tool = self.tools.get(key)
            if tool is not None and block.get("is_error") and not tool.error:
                tool = self.tools.mutable(key)
                assert tool is not None
                tool.error = result_summary(block.get("content"), 200)
                tool.is_error = True
                tool.version = self.n
                self._touch_settled(tool.turn)
                self.rev_tools = self.rev_transcript = self.n

    def _attempt(self, turn: int, attempt: int, t: float) -> AttemptEntry:
        a = self._ca
        if a is not None and a.attempt == attempt and a.turn == turn:
            return a  # the current attempt (owned by this state: the cache is dropped when the state is copied)
        a = self.attempts.mutable((turn, attempt))
        if a is not None:
            self._ca = a
        else:
            a = self.attempts[(turn, attempt)] = AttemptEntry(turn, attempt, t)
            self._turn(turn, t).attempts.append(attempt)
            self.attempt_first_row.setdefault((turn, attempt), len(self.events))
            self.attempt_first_evno.setdefault((turn, attempt), self.status.events + 1)
            self.attempt_offset.setdefault((turn, attempt), 0)
            a.held_base = self._held_at(t)
            self._ca = a
        return a

    def _held_at(self, t: float) -> float:
        """Seconds the stream was held by the user over the session, as of loop time t."""
        st = self.status
        if st.held_since is None:
            return st.held_total
        return st.held_total + max(0.0, t - st.held_since)

    def _response_started(self, obs: O.ResponseStarted) -> None:
        a = self._attempt(obs.turn, obs.attempt, obs.t)
        a.status_code, a.t_response, a.version = obs.status, obs.t, self.n
        if a.tries:  # one row per HTTP request: the answered try follows the failed ones
            flags = F_MARKER | (F_ERROR if obs.status >= 400 else 0)
            m = Marker("try", obs.turn, obs.attempt, try_no=len(a.tries) + 1, status=obs.status, version=self.n)
            self._marker(obs.t, m, flags)
            self._touch_status()
            return
        # the attempt's marker row shows the status
        row = self.attempt_first_row.get((obs.turn, obs.attempt), 0) - 1
        mark = self.markers.get(row)
        if mark is not None and mark.kind == MARKER and (mark.turn, mark.attempt) == (obs.turn, obs.attempt):
            self.markers[row] = dataclasses.replace(mark, answers=(*mark.answers, obs.status), version=self.n)
            if obs.status >= 400:
                self.events.flags[row] |= F_ERROR
            self.rev_events = self.n
        self._touch_status()

    def _read(self, obs: O.ReadReceived) -> None:
        # (a third of the observations: the attribute reads, the current attempt and the status touch are inline)
        turn, attempt, t, t_request, data = obs.turn, obs.attempt, obs.t, obs.t_request, obs.data
        a = self._ca
        if a is None or a.attempt != attempt or a.turn != turn:
            a = self._attempt(turn, attempt, t)
        key = (turn, attempt)
        offsets = self.attempt_offset
        offset = offsets.get(key, 0)
        if key not in self.attempt_first_read:
            self.attempt_first_read[key] = len(self.reads)
        self.reads.append(turn, attempt, obs.read_index, t, t_request, data, offset)
        size = len(data)
        offsets[key] = offset + size
        st = self.status
        if st.attempt != attempt or st.turn != turn:
            # the attempt the status line describes is the one whose stream was last heard from, not the last one
            # started: concurrent conversations (a proxy's "all" view) start requests while others stream, and the
            # newest request, still waiting for its first byte, said "reads 0" while reads passed
            st.turn, st.attempt = turn, attempt
        # the stream's own clock: the user's holds since the request are left out (`_held_at`, inline)
        since = st.held_since
        held = (st.held_total if since is None else st.held_total + max(0.0, t - since)) - a.held_base
        if held > 0.0:
            a.held = held
            t_stream = max(0.0, round(t_request - held, 9))
        else:
            a.held = 0.0
            t_stream = t_request
        silence = t_request - a.last_read_raw
        if silence > a.max_silence:
            a.max_silence = silence
        a.last_read_raw = t_request
        if a.ttfb is None:
            a.ttfb = t_stream
            a.t_first_byte = t
        last = a.last_read_t
        if last is not None:
            gap = t_stream - last
            a.last_gap = gap if gap > 0.0 else 0.0
        a.last_read_t = t_stream
        a.reads += 1
        a.nbytes += size
        n = self.n
        a.version = n
        self.rev_events = n  # the raw view
        st.version = self.rev_status = n  # (_touch_status)

    def _sse(self, obs: O.SSEEventSeen) -> None:
        st = self.status
        st.events += 1
        turn, attempt = obs.turn, obs.attempt
        a = self._ca
        if a is None or a.attempt != attempt or a.turn != turn:
            a = self._attempt(turn, attempt, obs.t)
        a.events += 1
        sse = obs.sse
        et = obs.event_type
        flags = F_ERROR if et == "error" or et == "invalid" else F_WARN if et == "unknown" else 0
        name = event_name(sse.event, et)  # (the neutral type stays in `et` for the flags above)
        index = obs.index
        self.events.append(
            sse.seq,
            obs.t,
            name,
            -1 if index is None else index,
            obs.summary,
            sse.read_index,
            turn,
            attempt,
            flags,
            st.events,
            sse.start,
            sse.end,
        )
        n = self.n
        self.rev_events = n
        st.version = self.rev_status = n  # (_touch_status)

    def _message_started(self, obs: O.MessageStarted) -> None:
        a = self._attempt(obs.turn, obs.attempt, obs.t)
        msg = obs.message or {}
        a.model = msg.get("model")
        a.message_id = msg.get("id")
        usage = msg.get("usage")
        if isinstance(usage, dict):
            a.usage = {k: v for k, v in usage.items() if v is not None}
        a.version = self.n
        self._touch_status()

    def _block_opened(self, obs: O.BlockOpened) -> None:
        key = (obs.turn, obs.attempt, obs.index)
        a = self._attempt(obs.turn, obs.attempt, obs.t)
        b = BlockEntry(
            obs.turn,
            obs.attempt,
            obs.index,
            obs.block_type,
            obs.block_id,
            obs.name,
            obs.start or {},
            obs.t,
            self.status.events,
            version=self.n,
        )
        if key not in self.blocks:
            self.block_order.append(key)
            a.blocks.append(obs.index)
        self.blocks[key] = b
        self._cb = b
        self.rev_blocks = self.n
        bt = obs.block_type
        if bt in TOOL_INPUT_BLOCKS:
            tool_id = obs.block_id or f"{obs.turn}.{obs.attempt}.{obs.index}"
            if self._tool_key(obs.turn, tool_id) not in self.tools:
                tool = self._new_tool(
                    tool_id, obs.name or "?", obs.turn, obs.attempt, obs.index, ToolState.STREAMING_INPUT, obs.t
                )
                self._tx(obs.turn, ("tool", tool.key))
        elif bt == "text":
            self._tx(obs.turn, ("text", key))
        elif bt in ("thinking", "redacted_thinking"):
            self._tx(obs.turn, ("thinking", key))
        else:
            self._tx(obs.turn, ("block", key))
        self.rev_transcript = self.n

    def _new_tool(
        self, tool_id: str, name: str, turn: int, attempt: int, index: int, state: str, t: float
    ) -> ToolEntry:
        tool = ToolEntry(
            tool_id,
            name,
            turn,
            attempt,
            index,
            state,
            t,
            history=[(state, t)],
            version=self.n,
            conversation=self.conversation_of(turn) or "",
        )
        key = tool.key
        self.tools[key] = tool
        self.tool_order.append(key)
        tr = self._turn(turn, t)
        tr.tools.append(key)
        self.rev_tools = self.n
        return tool

    def _block_delta(self, obs: O.BlockDelta) -> None:
        b = self._cb
        if b is None or b.index != obs.index or b.attempt != obs.attempt or b.turn != obs.turn:
            b = self.blocks.mutable((obs.turn, obs.attempt, obs.index))
            if b is None:
                return
            self._cb = b  # (dropped when the state is copied, like _ca)
        frag = obs.fragment
        b.fragments.append(frag)
        if frag:
            b.nbytes += len(frag) if frag.isascii() else _utf8_len(frag)
            a = self._ca
            if a is None or a.attempt != obs.attempt or a.turn != obs.turn:
                a = self.attempts.get((obs.turn, obs.attempt))
            if a is not None and a.t_first_token is None:
                a = self.attempts.mutable((obs.turn, obs.attempt))
                assert a is not None
                a.t_first_token = obs.t
                a.first_token = max(0.0, round(obs.t - a.t_start - (self._held_at(obs.t) - a.held_base), 9))
                self._touch_status()
        n = self.n
        b.delta_type = obs.delta_type
        b.last_event = self.status.events
        b.version = n
        self.rev_blocks = n
        bt = b.type
        if bt == "text" or bt == "thinking":
            self.rev_transcript = n
        elif b.is_tool:
            tool = self.tools.get(self._block_tool_key(b))
            if tool is not None and tool.state == ToolState.STREAMING_INPUT:
                self.rev_tools = self.n

    def _block_closed(self, obs: O.BlockClosed) -> None:
        b = self.blocks.mutable((obs.turn, obs.attempt, obs.index))
        if b is None:
            return
        b.closed, b.t_close, b.content, b.input_error = True, obs.t, obs.content, obs.input_error
        b.last_event = self.status.events
        if obs.input_error is not None:
            b.error_pos = error_position(b.joined(), obs.input_error)
        b.version = self.n
        self.rev_blocks = self.n
        self.rev_transcript = self.n
        tool = self.tools.get(self._block_tool_key(b)) if b.is_tool else None
        if tool is not None:
            if tool.input is None and isinstance(obs.content, dict) and obs.content.get("input") is not None:
                tool = self.tools.mutable(tool.key)
                assert tool is not None
                tool.input = obs.content["input"]
                tool.input_summary = call_summary(tool.name, tool.input)
                tool.version = self.n
                self.rev_tools = self.n
                self._touch_settled(tool.turn)

    def _message_updated(self, obs: O.MessageUpdated) -> None:
        a = self._attempt(obs.turn, obs.attempt, obs.t)
        a.stop_reason = obs.stop_reason
        for k, v in (obs.usage or {}).items():
            if v is not None:
                a.usage[k] = v  # cumulative totals: overwrite
        a.version = self.n
        self._touch_status()

    def _diagnostic(self, obs: O.DiagnosticRaised) -> None:
        d = obs.diagnostic
        evno = None
        if d.event_index is not None:
            first = self.attempt_first_evno.get((obs.turn, obs.attempt))
            ev = self.events
            k = None if first is None else first + d.event_index  # marker rows may sit between events
            if k is not None and 1 <= k <= len(ev.event_rows):
                row = ev.event_rows[k - 1]
                if ev.seq[row] == d.event_index and ev.attempt[row] == obs.attempt and ev.turn[row] == obs.turn:
                    ev.flags[row] |= F_DIAG | (
                        F_ERROR if d.severity == "error" else F_WARN if d.severity == "warning" else 0
                    )
                    evno = ev.evno[row]
                    self.rev_events = self.n
        self.diagnostics.append(
            DiagEntry(obs.t, obs.turn, obs.attempt, d.code, d.severity, d.message, d.event_index, d.block_index, evno)
        )
        if d.block_index is not None:
            b = self.blocks.mutable((obs.turn, obs.attempt, d.block_index))
            if b is not None:
                b.diagnostics.append(len(self.diagnostics) - 1)
                b.version = self.n
                self.rev_blocks = self.n
        self.rev_diag = self.n

    # -- tools
    def conversation_of(self, turn: int) -> str | None:
        """The conversation a (global) turn belongs to, or None (not a proxied session's: our own loop's)."""
        return self.conversations.by_turn.get(turn)

    def previous_turn(self, turn: int, *, with_request: bool = False) -> int | None:
        """The turn before `turn` in its own conversation (with no conversations, the session's previous turn): what
        a turn's request and cache verdict are compared with. `with_request`: the previous one whose request was seen.
        O(turns): for a view, never per observation."""
        cid, by_turn = self.conversation_of(turn), self.conversations.by_turn
        has = self.requests
        best = None
        for t in self.turns:
            if t < turn and (best is None or t > best) and by_turn.get(t) == cid:
                if with_request and not any((t, a) in has for a in self.turns[t].attempts):
                    continue
                best = t
        return best

    def _tool_key(self, turn: int, tool_id: str) -> ToolKey:
        return (self.conversation_of(turn) or "", tool_id)

    def _block_tool_key(self, b: BlockEntry) -> ToolKey:
        """The key of the tool call a tool block streams (a block without an id: its position, as `_block_opened`)."""
        return self._tool_key(b.turn, b.id or f"{b.turn}.{b.attempt}.{b.index}")

    def tool(self, tool_id: str, conversation: str | None = None) -> ToolEntry | None:
        """A tool call by its id, in a conversation (None: the session's own loop, of no conversation)."""
        return self.tools.get((conversation or "", tool_id))

    def _tool(self, obs: Any, state: str) -> ToolEntry:
        tool = self.tools.mutable(self._tool_key(obs.turn, obs.id))
        if tool is None:
            tool = self._new_tool(obs.id, obs.name, obs.turn, obs.attempt, obs.index, state, obs.t)
            self._tx(obs.turn, ("tool", tool.key))
            self.rev_transcript = self.n
        self._touch_settled(tool.turn)
        return tool

    def _tool_use(self, obs: O.ToolUse) -> None:
        tool = self._tool(obs, ToolState.QUEUED)
        tool.input = obs.input
        tool.input_summary = call_summary(obs.name, obs.input)
        tool.version = self.n
        self.rev_tools = self.n
        self.rev_transcript = self.n

    def _tool_state(self, obs: O.ToolStateChanged) -> None:
        tool = self._tool(obs, obs.state)
        state = obs.state
        if obs.inferred:
            tool.inferred = True
        if state != tool.state or not tool.history:
            tool.history.append((state, obs.t))
        tool.state = state
        if obs.input is not None and tool.input is None:
            tool.input = obs.input
            tool.input_summary = call_summary(tool.name, obs.input)
        if obs.error is not None:
            tool.error = obs.error
        if obs.result_preview is not None:
            tool.result_preview = obs.result_preview
            if not tool.result_summary:
                tool.result_summary = result_summary(obs.result_preview)
        times = obs.times or {}
        if state == ToolState.QUEUED and tool.t_queued is None:
            tool.t_queued = obs.t
        elif state == ToolState.RUNNING and tool.t_started is None:
            tool.t_started = obs.t
        # the executor's own timestamps win when it gives them (same clock)
        v = _time_in(times, "queued_at", ToolState.QUEUED)
        if v is not None:
            tool.t_queued = v
        v = _time_in(times, "started_at", ToolState.RUNNING)
        if v is not None:
            tool.t_started = v
        elif obs.inferred and state in (ToolState.NOT_RUN, ToolState.UNKNOWN):
            # (a proxy's call assumed running once its input closed: no result came, so no run time; unknown: the
            # session ended before a request could tell, and its time stops growing)
            tool.t_started = None
        if state in TOOL_TERMINAL:
            # The end of the run, when the call ran: a call discarded or cancelled after it finished keeps its own
            # run time (the executor keeps that end in `times`), never the time of the discard.
            ran_end = _time_in(times, *_RAN_KEYS)
            if ran_end is not None:
                tool.t_finished = ran_end
            elif tool.t_finished is None:
                end = _time_in(times, state)
                tool.t_finished = obs.t if end is None else end
        if state in TOOL_RAN and tool.t_started is None:
            tool.t_started = tool.t_finished
        tool.version = self.n
        self.rev_tools = self.n
        self.rev_transcript = self.n

    def _tool_result(self, obs: O.ToolResult) -> None:
        tool = self.tools.mutable(self._tool_key(obs.turn, obs.tool_use_id))
        if tool is None:
            return
        self._touch_settled(tool.turn)
        tool.is_error = obs.is_error
        tool.result_summary = result_summary(obs.content)
        if obs.state and obs.state != tool.state:
            tool.history.append((obs.state, obs.t))
            tool.state = obs.state
            if obs.state in TOOL_TERMINAL and tool.t_finished is None:
                tool.t_finished = obs.t
        tool.version = self.n
        self.rev_tools = self.n
        self.rev_transcript = self.n

    # -- ends
    def _attempt_ended(self, obs: O.AttemptEnded) -> None:
        a = self._attempt(obs.turn, obs.attempt, obs.t)
        a.t_end, a.status, a.reason, a.outcome, a.version = obs.t, obs.status, obs.reason, obs.outcome, self.n
        self._touch_settled(obs.turn)
        self._buffering(a, obs.t)
        if obs.status != "complete":
            self._tx(
                obs.turn,
                (
                    "note",
                    ("attempt_ended", obs.turn, obs.attempt, obs.status, obs.reason),
                    "error" if obs.status in ("failed", "http_error") else "warning",
                ),
            )
            self.rev_transcript = self.n
            self.rev_events = self.n  # rows of a failed attempt are shaded
            self.rev_blocks = self.n
        self._touch_status()

    def _buffering(self, a: AttemptEntry, t: float) -> None:
        """At an attempt's end: the buffering verdict of its reads (as the timing view judges it); "buffered" is
        the named diagnostic ``timing.buffered``. Costs the attempt's reads and events, once. A replay's attempt
        is judged on the recording's own times (its source's ``recorded_buffering``), not on the replayed reads'."""
        recorded = replayed_buffering(self.status.source)
        if recorded is not None:
            message = recorded.get(f"{a.turn}:{a.attempt}")
            if isinstance(message, str):
                self.diagnostics.append(
                    DiagEntry(t, a.turn, a.attempt, BUFFERED_CODE, "error", message, None, None, None)
                )
                self.rev_diag = self.n
            return
        first = self.attempt_first_read.get(a.key)
        if first is None or a.status_code not in (None, 200) or a.max_silence < HELD_SILENCE:
            return  # (no silence long enough for a held burst: not buffered, whatever the rest)
        reads, ev, key = self.reads, self.events, a.key
        rows = [
            (i, ri, tr, n)
            for i, (tu, at, ri, tr, n) in enumerate(
                zip(*(reads.column_from(c, first) for c in (0, 1, 2, 4, 8)), strict=True), first
            )
            if (tu, at) == key
        ]
        index = {ri: k for k, (_i, ri, _t, _n) in enumerate(rows)}
        counts = [0] * len(rows)
        start = max(0, self.attempt_first_row.get(key, 1) - 1)
        for tu, at, ri, evno in zip(*(ev.column_from(c, start) for c in (5, 6, 4, 8)), strict=True):
            if evno and (tu, at) == key:
                k = index.get(ri)
                if k is not None:
                    counts[k] += 1
        t0 = a.t_start
        holds = [
            (max(0.0, s - t0), (math.inf if e is None else e) - t0) for s, e, _by in self.holds if e is None or e > t0
        ]
        verdict = attempt_buffering([(tr, n, c) for (_i, _ri, tr, n), c in zip(rows, counts, strict=True)], holds)
        d = buffering_diagnostic(verdict)
        if d is not None:
            self.diagnostics.append(DiagEntry(t, a.turn, a.attempt, d.code, d.severity, d.message, None, None, None))
            self.rev_diag = self.n

    def _message_appended(self, obs: O.MessageAppended) -> None:
        self.status.messages += 1
        self._touch_status()

    def _text_finish(self, obs: O.TextFinish) -> None:
        self._touch_status()

    def _turn_ended(self, obs: O.TurnEnded) -> None:
        tr = self._turn(obs.turn, obs.t)
        tr.t_end, tr.outcome, tr.stop_reason, tr.usage, tr.version = (
            obs.t,
            obs.outcome,
            obs.stop_reason,
            dict(obs.usage or {}),
            self.n,
        )
        self.rev_tools = self.n  # the timeline
        self._touch_status()

    def _loop_finished(self, obs: O.LoopFinished) -> None:
        st = self.status
        st.finished, st.error = obs.status, obs.error
        if obs.status != "finished" and st.failed_loop is None:
            st.failed_loop = (obs.status, obs.error)
        elif st.failed_loop is not None:  # the session's end is its first loop that did not finish (as its result)
            st.finished, st.error = st.failed_loop
        if obs.status in (LoopState.FINISHED, LoopState.CANCELLED, LoopState.ERROR):
            st.loop_state = obs.status
        if obs.status != "finished":
            self.transcript.append(
                ("note", ("loop_finished", obs.status, obs.error), "error" if obs.status == "error" else "warning")
            )
            self.rev_transcript = self.n
        self._touch_status()

    def _touch_settled(self, turn: int) -> None:
        """A tool call or an attempt of `turn` changed: if the turn has ended, that is a settled row changing (a late
        result, an inferred run, a request's tool_result error)."""
        tr = self.turns.get(turn)
        if tr is not None and tr.t_end is not None:
            self.rev_settled = self.n

    def _touch_status(self) -> None:
        self.status.version = self.n
        self.rev_status = self.n

    # -------------------------------------------------------------------------------------------- queries

    def tokens(self) -> tuple[int, int]:
        """Input and output tokens over the session: each turn's last attempt counts (usage is cumulative)."""
        tin, tout, _missing = self.token_totals()
        return tin, tout

    def token_totals(self) -> tuple[int, int, int]:
        """`tokens`, and how many turns were answered without usage (their counts are unknown, not in the sums: an
        OpenAI chat stream without include_usage), as dump's total says it (``turns_without_usage``)."""
        tin = tout = missing = 0
        for turn in self.turns.values():
            if not turn.attempts:
                continue
            a = self.attempts.get((turn.turn, turn.attempts[-1]))
            if a is None:
                continue
            u = a.usage
            if not u:
                missing += a.status is not None and a.message_id is not None
                continue
            tin += (
                int(u.get("input_tokens") or 0)
                + int(u.get("cache_read_input_tokens") or 0)
                + int(u.get("cache_creation_input_tokens") or 0)
            )
            tout += int(u.get("output_tokens") or 0)
        return tin, tout, missing

    @property
    def current_attempt(self) -> AttemptEntry | None:
        st = self.status
        return self.attempts.get((st.turn, st.attempt))

    @property
    def event_count(self) -> int:
        return self.status.events

    def attempt_failed(self, turn: int, attempt: int) -> bool:
        a = self.attempts.get((turn, attempt))
        return a is not None and a.failed

    def turn_tools(self, turn: int) -> list[ToolEntry]:
        tr = self.turns.get(turn)
        return [] if tr is None else [self.tools[i] for i in tr.tools if i in self.tools]

    def copy(self) -> DashboardState:
        """An independent copy that cannot forget an attribute: every attribute is carried over; tables, entries and
        containers are copied (columns sliced at C speed), the values in them (strings, bytes, frozen entries,
        transcript tuples) shared."""
        new = DashboardState.__new__(DashboardState)
        self._ca = self._cb = None  # from now on these entries are shared: reach them again through their dicts
        d = new.__dict__
        for name, v in self.__dict__.items():
            tv = type(v)
            if hasattr(v, "cow_copy"):
                v = v.cow_copy()
            elif tv in _CLONED:
                v = clone(v)
            elif tv is dict:
                v = {k: clone(x) if type(x) in _CLONED else x for k, x in v.items()}
            elif tv is list:
                v = [clone(x) if type(x) in _CLONED else x for x in v]
            d[name] = v
        return new

    # -------------------------------------------------------------------------------------------- figures

    def turn_savings(self, turn: int) -> Savings | None:
        """What streamed tool execution saved in a turn, against running the same work one step after another.

        Only the tools whose results were used count: the calls of the turn's answered attempt that ran (succeeded,
        failed, timed out). Tools of a failed attempt, discarded, cancelled or never run are left out, and so are
        tools whose times were inferred, not measured (the proxy's: another harness ran them, maybe only after the
        stream ended). None until the attempt's stream and all its tools are done, or when no counted tool ran."""
        tr = self.turns.get(turn)
        if tr is None:
            return None
        used = None
        for a_no in tr.attempts:
            a = self.attempts.get((turn, a_no))
            if a is not None and not a.failed:
                used = a
        if used is None or used.t_end is None:
            return None
        stream = used.t_end - used.t_start
        run_total = 0.0
        last_end = used.t_end
        counted = left_out = 0
        for key in tr.tools:
            t = self.tools.get(key)
            if t is None:
                continue
            if t.inferred:  # an inference is not a run time: it never counts
                left_out += 1
                continue
            if t.attempt != used.attempt or t.state not in TOOL_RAN:
                if t.state not in TOOL_TERMINAL and t.attempt == used.attempt:
                    return None  # still running
                left_out += 1
                continue
            if t.t_started is None or t.t_finished is None:
                left_out += 1
                continue
            counted += 1
            run_total += max(0.0, t.t_finished - t.t_started)
            last_end = max(last_end, t.t_finished)
        if not counted or run_total <= 0:
            return None
        return Savings(stream, run_total, last_end - used.t_start, counted, left_out)

    # what folds each kind of observation (the methods above, looked up once per observation by `apply`)
    HANDLERS: ClassVar[dict[type, Callable[[DashboardState, Any], None]]] = {
        O.LoopStarted: _loop_started,
        O.LoopStateChanged: _loop_state,
        O.ControlApplied: _control,
        O.StreamHeld: _held,
        O.StreamReleased: _released,
        O.HttpTryFailed: _http_try,
        O.TurnStarted: _turn_started,
        O.AttemptStarted: _attempt_started,
        O.ResponseStarted: _response_started,
        O.ReadReceived: _read,
        O.SSEEventSeen: _sse,
        O.MessageStarted: _message_started,
        O.BlockOpened: _block_opened,
        O.BlockDelta: _block_delta,
        O.BlockClosed: _block_closed,
        O.MessageUpdated: _message_updated,
        O.DiagnosticRaised: _diagnostic,
        O.ToolUse: _tool_use,
        O.ToolStateChanged: _tool_state,
        O.ToolResult: _tool_result,
        O.AttemptEnded: _attempt_ended,
        O.MessageAppended: _message_appended,
        O.TextFinish: _text_finish,
        O.TurnEnded: _turn_ended,
        O.LoopFinished: _loop_finished,
    }


_HANDLERS = DashboardState.HANDLERS  # (a module global: `apply` looks it up once per observation)

_RAN_KEYS = (*(s.value for s in ToolState if s in TOOL_RAN), "finished_at")


def _time_in(times: dict[str, Any], *names: str) -> float | None:
    """The first of `names` in an executor's `times` (state -> clock time) that holds a number."""
    for name in names:
        v = times.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


_CLONED = frozenset({EventTable, ReadTable, BlockEntry, ToolEntry, AttemptEntry, TurnEntry, Status})


def _path(url: str) -> str:
    """The path of a URL ("/v1/messages"), or the URL itself."""
    i = url.find("://")
    if i < 0:
        return url or "/"
    j = url.find("/", i + 3)
    return url[j:] if j >= 0 else "/"


def fold(state: DashboardState, obs: O.Observation) -> DashboardState:
    """Fold one observation into the state (in place) and return it."""
    return state.apply(obs)

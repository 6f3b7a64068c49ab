"""What the two OpenAI decoders share: the neutral-step machinery and the diagnostic codes.

A second wire format is a second decoder into the same vocabulary, not a second pipeline. An OpenAI stream goes
through the same `SSEDecoder`; each decoded event is mapped onto the neutral events of `inspector.stream.protocol`
(`MessageStart`, `ContentBlockStart` / `ContentBlockDelta` / `ContentBlockStop`, `MessageDelta`, `MessageStop`,
`ErrorEvent`) and fed to the same `MessageAssembler`: a block at an index that fills with fragments and closes, a
tool call is a `tool_use` block whatever the wire, its arguments parsed once when it closes. Observers, the state
fold and the panes downstream see the same steps as for Anthropic.

One SSE event can become several neutral events (a whole tool call in one chunk: open, fragment, and nothing else;
a `finish_reason`: the choice's blocks close, then the message delta), so one SSE event can give several `Step`s,
which share their `sse`. An event that changes nothing neutral (a role-only chunk, `response.in_progress`) gives one
step whose event is an `OpenAIEvent` (type, payload) with no change.

Pure: no I/O (import contract).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.stream import diagnostics as D
from inspector.stream import fastpath
from inspector.stream.assembler import Change, Step, TurnStream
from inspector.stream.diagnostics import Diagnostic, Severity
from inspector.stream.protocol import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Delta,
    ErrorEvent,
    InputJsonDelta,
    InvalidEvent,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from inspector.stream.sse import SSEEvent

# --- diagnostic codes (docs/openai.md) ---------------------------------------------------------------------------
# shared
DONE_MARKER = "openai.done_marker"  # `data: [DONE]` where the family does not send it (Responses), or twice
EVENT_AFTER_END = "openai.event_after_end"  # an event after [DONE] / the terminal response event (ignored)
ERROR_IN_STREAM = "openai.error_in_stream"  # a top-level `error` object (or vLLM `object: error`) with HTTP 200
NOT_AN_OBJECT = "openai.not_an_object"  # event data that is JSON but not an object
DECODER_FAULT = (
    "openai.decoder_fault"  # a bug of ours met by an event: named, the raw event kept (fuzzed never to occur)
)
# Chat Completions
CHAT_NO_DONE = "openai.chat.no_done"  # the stream ended without `data: [DONE]`
CHAT_NOT_A_CHUNK = "openai.chat.not_a_chunk"  # `object` is not chat.completion.chunk (Azure filter events: "")
CHAT_EMPTY_CHOICES = "openai.chat.empty_choices"  # `choices: []` without usage (Azure content filter)
CHAT_USAGE_NOT_FINAL = "openai.chat.usage_not_final"  # usage on a chunk that still has choices
CHAT_TOOL_NO_INDEX = "openai.chat.tool_call_without_index"  # a tool-call delta without `index` (SDK: TypeError)
CHAT_TOOL_WHOLE = "openai.chat.whole_tool_call"  # id, name and all its arguments in one chunk
CHAT_TOOL_ID_REPEATED = "openai.chat.tool_id_repeated"  # `id` sent again on a later delta (SDK doubles it)
CHAT_TOOL_NAME_REPEATED = "openai.chat.tool_name_repeated"  # `name` sent again (SDK doubles it)
CHAT_TOOL_ID_CHANGED = "openai.chat.tool_id_changed"  # a different id on a later delta of the same index
CHAT_TOOL_TYPE_NULL = "openai.chat.tool_type_null"  # `"type": null` in a later tool delta (SDK erases the type)
CHAT_TOOL_INDEX_GAP = "openai.chat.tool_index_gap"  # tool-call indices not 0, 1, 2... (SDK: IndexError)
CHAT_REASONING = "openai.chat.reasoning_delta"  # `reasoning_content` / `reasoning` deltas (not OpenAI's shape)
CHAT_UNFOLDED_FIELD = "openai.chat.unfolded_delta_field"  # a delta field the engine does not fold (kept raw)
CHAT_DELTA_AFTER_FINISH = "openai.chat.delta_after_finish"  # content for a choice after its finish_reason
CHAT_NOT_FINISHED = "openai.chat.not_finished"  # the stream ended (no [DONE]) before a choice's finish_reason
CHAT_NO_FINISH_REASON = "openai.chat.no_finish_reason"  # [DONE] came, a choice never had a finish_reason
CHAT_TOOL_NO_ID = "openai.chat.tool_call_without_id"  # a tool call that never got an id
# Responses
RESP_FIRST_EVENT = "openai.responses.first_event"  # the first event is not response.created
RESP_SEQUENCE = "openai.responses.sequence_gap"  # sequence_number not the previous one + 1
RESP_DONE_MISMATCH = "openai.responses.done_mismatch"  # a .done text differs from the joined deltas
RESP_DONE_WITHOUT_DELTAS = "openai.responses.done_without_deltas"  # .done with the whole value, no delta before
RESP_UNKNOWN_ITEM = "openai.responses.unknown_reference"  # an event for an output/content index never added
RESP_NO_TERMINAL = "openai.responses.no_terminal_event"  # ended without completed / incomplete / failed
RESP_INCOMPLETE = "openai.responses.incomplete"  # response.incomplete (with its reason)
RESP_FAILED = "openai.responses.failed"  # response.failed (with its error)
RESP_ID_CHANGED = "openai.responses.id_changed"  # the response id or an item's call_id changed on the way
RESP_UNKNOWN_EVENT = "openai.responses.unknown_event"  # an event type the engine does not know (kept, info)


# where a fragment's string is in an event's data (`NeutralStream._shape`): the keys and indices that lead to it,
# the last the key of the string itself
FragmentPath = tuple[*tuple[str | int, ...], str]


@dataclass(slots=True)
class OpenAIEvent:
    """An OpenAI SSE event that changed nothing neutral (kept with its payload for display)."""

    event_type: str  # the chunk's `object` or the Responses event `type` ("[DONE]" for the marker)
    payload: Any
    seq: int = -1
    type: str = "openai"


def loads_object(e: SSEEvent) -> tuple[dict[str, Any] | None, Diagnostic | None]:
    """The event's data as a JSON object, or None with its diagnostic (raw bytes kept)."""
    try:
        v = exactjson.loads(e.data)  # (integers beyond 64 bits kept exact, as the Anthropic engine keeps them)
    except orjson.JSONDecodeError as exc:
        return None, Diagnostic(
            D.INVALID_EVENT_JSON,
            "error",
            f"event data is not JSON: {exc.msg} at char {exc.pos}",
            e.seq,
            raw=e.data.encode("utf-8", "replace")[:4096],
        )
    if not isinstance(v, dict):
        return None, Diagnostic(
            NOT_AN_OBJECT,
            "error",
            f"event data is a JSON {type(v).__name__}, not an object",
            e.seq,
            raw=e.data.encode("utf-8", "replace")[:4096],
        )
    return v, None


class NeutralStream(TurnStream):
    """Bytes in, neutral steps out, for a family other than Anthropic. Subclasses implement `_event` (map one SSE
    event, calling `_emit` / `_note`) and `_end` (what only the end of the stream reveals)."""

    family = "?"

    def _init_stream(self) -> None:
        """This family's per-stream state (TurnStream.__init__ calls it last)."""
        super()._init_stream()
        self._sse: SSEEvent | None = None
        self._out: list[Step] = []
        self._notes: list[Diagnostic] = []
        self._next_block = 0
        self.ignored_after_end = 0
        # the fast path's state between feeds: the block the last taken fragment went to (fastpath.neutral_steps)
        self._neutral_cont: fastpath.Continuation | None = None
        self._neutral_template: fastpath.Template | None = None
        self._neutral_misses = 0
        self._took: list[str] = []  # where the last event `_take` took was kept (its family's fragment list)

    # --- mapping helpers -------------------------------------------------------------------------------------
    def _note(
        self,
        code: str,
        severity: Severity,
        message: str,
        block: int | None = None,
        raw: bytes | None = None,
        seq: int | None = -1,
    ) -> None:
        if self.cap.drop_if_full(code):
            return
        at = (self._sse.seq if self._sse is not None else None) if seq == -1 else seq
        d = self.cap.filter(Diagnostic(code, severity, message, at, block_index=block, raw=raw))
        if d is not None:
            self._notes.append(d)

    def _after_end(self, what: str) -> None:
        """An event after the end: said once per stream (recordings that hold several responses in one body give
        hundreds); the rest are counted in `ignored_after_end`."""
        self.ignored_after_end += 1
        if self.ignored_after_end == 1:
            self._note(EVENT_AFTER_END, "warning", f"{what} after the end of the stream: it and any later are ignored")

    def _emit(self, ev: StreamEvent | OpenAIEvent) -> list[Change]:
        """Feed one neutral event to the assembler (an OpenAIEvent is not fed) and make its step."""
        asm = self.assembler
        n = len(asm.diagnostics)
        changes = asm.feed(ev) if not isinstance(ev, OpenAIEvent) else []
        diags = self._notes + asm.diagnostics[n:]
        self._notes = []
        assert self._sse is not None
        self._out.append(Step(self._sse, ev, changes, diags))
        return changes

    def _open(self, block: dict[str, Any], seq: int) -> int:
        i = self._next_block
        self._next_block += 1
        self._emit(ContentBlockStart(i, block, seq))
        return i

    def _fragment(self, i: int, kind: str, text: str, seq: int) -> None:
        d: Delta
        if kind == "tool_use":
            d = InputJsonDelta(text)
        elif kind == "thinking":
            d = ThinkingDelta(text)
        else:
            d = TextDelta(text)
        self._emit(ContentBlockDelta(i, d, seq))

    def _close(self, i: int, seq: int) -> None:
        self._emit(ContentBlockStop(i, seq))

    # --- the TurnStream interface ----------------------------------------------------------------------------
    def _steps(self, events: list[SSEEvent], raws: list[bytes]) -> list[Step]:
        """The steps of `events` (one event may give several): by `inspector.stream.fastpath.neutral_steps` (which
        takes the common deltas by `_take`), or, with `fast=False`, each event by the general `_event`."""
        if self.fast:
            return fastpath.neutral_steps(self, events)
        out: list[Step] = []
        for e in events:
            out.extend(self._event_steps(e))
        return out

    def _event_steps(self, e: SSEEvent) -> list[Step]:
        """The general path: one event mapped by `_event`."""
        self._sse = e
        self._out = []
        self._notes = []
        try:
            self._event(e)
        except Exception as exc:  # noqa: BLE001 (a decoder bug becomes a named diagnostic, the stream goes on)
            self._note(
                DECODER_FAULT,
                "error",
                f"the {self.family} decoder could not map this event ({type(exc).__name__}: {exc})",
                raw=e.data.encode("utf-8", "replace")[:4096],
            )
        return self._event_done(e)

    def _fragment_steps(self, e: SSEEvent, i: int, kind: str, text: str) -> list[Step]:
        """The steps of an event `_take` took (its family's bookkeeping done): its fragment for block `i` given to
        the assembler, as `_event` gives it (by `_fragment`)."""
        self._sse = e
        self._out = []
        self._notes = []
        self._fragment(i, kind, text, e.seq)
        return self._event_done(e)

    def _event_done(self, e: SSEEvent) -> list[Step]:
        if not self._out:
            self._emit(OpenAIEvent(e.event, None, e.seq))
        elif self._notes:
            self._out[-1].diagnostics.extend(self._notes)
            self._notes = []
        steps = self._out
        self._out = []
        for st in steps:
            if st.diagnostics:
                self.diagnostics.extend(st.diagnostics)
        return steps

    def feed(self, data: bytes) -> list[Step]:
        """Decode one read. SSE-layer diagnostics go with the first step of the event they concern, before its own
        (as TurnStream.feed): steps and `diagnostics` do not depend on how the bytes were split into reads."""
        events = self.decoder.feed(data)
        pending = self._held + self.decoder.take_diagnostics()
        self._held = []
        if not pending:
            return self._steps(events, [])
        steps: list[Step] = []
        k, n = 0, len(pending)
        for e in events:
            j = k
            while j < n and ((ei := pending[j].event_index) is None or ei <= e.seq):
                j += 1
            before = pending[k:j]
            k = j
            self.diagnostics.extend(before)
            got = self._steps([e], [])
            if before:
                got[0].diagnostics[:0] = before
            steps.extend(got)
        self._held = pending[k:]
        return steps

    def close(self) -> list[Diagnostic]:
        if self.closed:
            return []
        self.closed = True
        self.decoder.close()
        new = self._held + self.decoder.take_diagnostics()
        self._held = []
        self._sse = None
        self._notes = []
        try:
            self._end()
        except Exception as exc:  # noqa: BLE001 (a decoder bug becomes a named diagnostic)
            self._note(DECODER_FAULT, "error", f"the {self.family} decoder failed at the end ({exc})", seq=None)
        new += self._notes
        self._notes = []
        new += [self._reword(d) for d in self.assembler.finish()]
        summary = self.cap.summary()
        if summary is not None:
            new.append(summary)
        self.diagnostics.extend(new)
        return new

    @property
    def events(self) -> int:
        """SSE events decoded (the assembler counts neutral events, which may be more or fewer)."""
        return self.decoder.events_dispatched

    # the words of this family for the end of a block and of the message (the assembler's messages name Anthropic's)
    block_end = "its end"
    message_end = "its end"

    def _reword(self, d: Diagnostic) -> Diagnostic:
        """The assembler's end-of-stream diagnostics in this family's words (same code, severity and indices)."""
        if d.code == D.MISSING_MESSAGE_STOP:
            return replace(d, message=f"stream ended before {self.message_end}")
        if d.code == D.BLOCK_NOT_CLOSED and d.block_index is not None:
            b = self.assembler.blocks.get(d.block_index)
            if b is not None:
                what = f"{b.type}{' ' + b.name if b.name else ''}"
                tail = "; its tool will not run" if b.is_tool else ""
                return replace(d, message=f"block {b.index} ({what}) never got {self.block_end}{tail}")
        return d

    # --- to implement ----------------------------------------------------------------------------------------
    def _event(self, e: SSEEvent) -> None:
        raise NotImplementedError

    def _take(self, e: SSEEvent) -> tuple[int, str, str] | None:
        """The family's common delta, by a shorter way (for the fast path): when `_event` would map `e` to exactly
        one non-empty fragment for an open block and nothing else, do its bookkeeping in the family's own state
        (all but giving the fragment to the assembler) and return (block, kind, fragment) as `_fragment` takes
        them; else None, with nothing done. By default no event is taken."""
        return None

    def _shape(self, e: SSEEvent) -> tuple[dict[str, Any], FragmentPath, str | None, str | None] | None:
        """For an event `_take` just took: its data parsed, the path of the fragment's string in it, the key of its
        sequence counter and that of a top-level string field `_take` and `_event` ignore (each None if it has
        none), which the fast path learns its template from; None: no template (the fast path then asks `_take`
        for every event)."""
        return None

    def _take_same(self, texts: list[str], counter: int | None) -> None:
        """The bookkeeping `_take` does, for events that are the one it took last but for their fragments `texts`
        (and the sequence counter of the last: None without one), in order."""
        raise NotImplementedError

    def _end(self) -> None:
        raise NotImplementedError

    def final_object(self) -> dict[str, Any]:
        """The final object in the provider's own shape (what its SDK returns)."""
        raise NotImplementedError

    def _invalid(self, e: SSEEvent, d: Diagnostic) -> None:
        """Data that is not a JSON object: an InvalidEvent step carrying its diagnostic. An ``event: error`` is an
        error all the same (``data: overloaded``, or none): the openai SDK raises on it (it cannot read its JSON), so
        the stream ends in an error, its message the data (as the Anthropic engine reads it: stream/protocol.py)."""
        kept = self.cap.filter(d)
        if kept is not None:
            self._notes.append(kept)
        if e.event == "error":
            self.errored = True
            message = e.data[:200]
            self._note(ERROR_IN_STREAM, "error", f"error event: unknown_error: {message}".rstrip(": "))
            self._emit(ErrorEvent("unknown_error", message, {"message": e.data} if e.data else {}, e.seq))
            return
        self._emit(InvalidEvent(e.event, e.data, d.message, e.seq))

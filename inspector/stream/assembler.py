"""Per-index block buffers and message assembly.

Every content block keeps its raw fragments (with the event each came from) in a `BlockBuffer`, keyed by the
block's `index`. Tool input is parsed ONCE, at the block's `content_block_stop`, with orjson. Nothing re-parses per
delta: assembly is linear in the stream size. `preview()` gives a live partial parse of an open block, for the UI
to call at display rate.

`MessageAssembler.feed` never raises: every protocol fault becomes a `Diagnostic`. `TurnStream` (bytes in, steps
out) takes most deltas of a stream by a shorter way with the same result (see `TurnStream._steps`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import jiter
import orjson
from orjson import JSONDecodeError

from inspector.core import exactjson
from inspector.stream import diagnostics as D
from inspector.stream import sse as _sse
from inspector.stream.diagnostics import Diagnostic, DiagnosticCap
from inspector.stream.protocol import DELTA_FOR_BLOCK as _DELTA_FOR_BLOCK
from inspector.stream.protocol import (
    KNOWN_BLOCKS,
    TOOL_INPUT_BLOCKS,
    CitationsDelta,
    CompactionDelta,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ErrorEvent,
    InputJsonDelta,
    InvalidEvent,
    MessageDelta,
    MessageStart,
    MessageStop,
    Ping,
    SignatureDelta,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    UnknownDelta,
    UnknownEvent,
    delta_head,
    parse_event,
)
from inspector.stream.sse import SSEDecoder, SSEEvent

_loads = orjson.loads
_TEXT_DELTAS = (InputJsonDelta, TextDelta, ThinkingDelta)  # the deltas that add a fragment to a block

Outcome = Literal["tool_use", "text_finish", "truncated", "incomplete", "error"]
# message_delta: delta fields not copied onto the message as they are (stop_* are set always; the others belong to
# the message_start or to the top level of the event)
_NOT_FROM_DELTA = frozenset({"stop_reason", "stop_sequence", "usage", "content", "id", "type", "role"})
_FROM_MESSAGE_DELTA = ("context_management", "input_transformations")


@dataclass(frozen=True, slots=True)
class InputError:
    message: str
    position: int  # character offset in the joined buffer
    line: int
    column: int

    def describe(self) -> str:
        return f"{self.message} at line {self.line} column {self.column} (char {self.position})"


@dataclass(slots=True)
class Fragment:
    text: str
    event_index: int


@dataclass(slots=True)
class BlockBuffer:
    index: int
    type: str
    start: dict  # the content_block of content_block_start, as sent
    start_event: int
    # the raw fragments as sent, and the event each came from (two flat lists: no object per fragment, nothing
    # for the garbage collector to walk; `fragments` gives them as Fragment objects)
    texts: list[str] = field(default_factory=list)
    fragment_events: list[int] = field(default_factory=list)
    nbytes: int = 0
    closed: bool = False
    stop_event: int | None = None
    signature: str | None = None
    citations: list | None = None
    input: Any = None  # parsed tool input (at stop)
    input_error: InputError | None = None
    parsed: bool = False  # tool input has been parsed (at stop)
    _joined: str | None = None
    compaction: CompactionDelta | None = None  # the last compaction_delta (its values replace the block's)
    prefilled: bool = False  # the block came whole inside message_start's content

    @property
    def id(self) -> str | None:
        v = self.start.get("id")
        return v if isinstance(v, str) else None  # (a wrong type is a protocol.wrong_type diagnostic)

    @property
    def name(self) -> str | None:
        v = self.start.get("name")
        return v if isinstance(v, str) else None

    @property
    def fragments(self) -> list[Fragment]:
        """The raw fragments with the event each came from (built on demand)."""
        return [Fragment(t, e) for t, e in zip(self.texts, self.fragment_events)]

    @property
    def is_tool(self) -> bool:
        return self.type in TOOL_INPUT_BLOCKS

    @property
    def open(self) -> bool:
        return not self.closed

    def add(self, text: str, event_index: int) -> None:
        self.texts.append(text)
        self.fragment_events.append(event_index)
        self.nbytes += len(text.encode("utf-8")) if not text.isascii() else len(text)
        self._joined = None

    def joined(self) -> str:
        """All fragments joined (cached until the next fragment)."""
        if self._joined is None:
            self._joined = "".join(self.texts)
        return self._joined

    def preview(self) -> tuple[Any, str | None]:
        """Live partial parse of a tool block's input (for display; call at display rate, never per delta).

        Returns (value, error). The unfinished trailing string is kept ("trailing-strings")."""
        if not self.is_tool:
            return self.joined(), None
        if self.parsed:
            return self.input, self.input_error.describe() if self.input_error else None
        buf = self.joined()
        if not buf.strip():
            return None, None
        try:
            return jiter.from_json(buf.encode("utf-8"), partial_mode="trailing-strings"), None
        except ValueError as e:
            return None, str(e)

    def parse_input(self) -> list[Diagnostic]:
        """Parse tool input once (at content_block_stop). Never raises."""
        self.parsed = True
        if not self.texts:
            start_input = self.start.get("input", {})
            if not isinstance(start_input, dict):
                self.input = None
                self.input_error = InputError(
                    f"tool input is a JSON {type(start_input).__name__}, not an object", 0, 1, 1
                )
                return [
                    Diagnostic(
                        D.TOOL_INPUT_NOT_OBJECT,
                        "error",
                        f"tool block {self.index} ({self.name}): the start block's {self.input_error.message}",
                        self.stop_event,
                        block_index=self.index,
                        raw=exactjson.dumps(start_input)[:4096],
                    )
                ]
            self.input = start_input
            return []
        buf = self.joined()
        if buf == "":
            start_input = self.start.get("input", {})
            self.input = start_input if isinstance(start_input, dict) else {}
            return [
                Diagnostic(
                    D.TOOL_INPUT_EMPTY,
                    "warning",
                    f"tool block {self.index} ({self.name}): input_json_delta fragments were all empty; "
                    "the start block's input is used",
                    self.stop_event,
                    block_index=self.index,
                )
            ]
        if not buf.strip():
            self.input = None
            self.input_error = InputError("tool input buffer is whitespace only", 0, 1, 1)
            return [
                Diagnostic(
                    D.TOOL_INPUT_EMPTY,
                    "error",
                    f"tool block {self.index} ({self.name}): input buffer is whitespace only",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode(),
                )
            ]
        try:
            value = exactjson.loads(buf)
        except orjson.JSONDecodeError as e:
            self.input = None
            self.input_error = InputError(e.msg, e.pos, e.lineno, e.colno)
            return [
                Diagnostic(
                    D.TOOL_INPUT_INVALID,
                    "error",
                    f"tool block {self.index} ({self.name}): input is not valid JSON: {self.input_error.describe()}",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode("utf-8", "replace"),
                )
            ]
        if not isinstance(value, dict):
            self.input = None
            self.input_error = InputError(f"tool input is a JSON {type(value).__name__}, not an object", 0, 1, 1)
            return [
                Diagnostic(
                    D.TOOL_INPUT_NOT_OBJECT,
                    "error",
                    f"tool block {self.index} ({self.name}): {self.input_error.message}",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode("utf-8", "replace"),
                )
            ]
        self.input = value
        return []

    def to_content(self) -> dict:
        """The block as the API's final Message has it (tool input parsed; failed input: null + input_raw)."""
        out = dict(self.start)
        t = self.type
        if t == "text":
            if self.texts or not isinstance(out.get("text", ""), str):
                out["text"] = _str_or_empty(out.get("text")) + self.joined()
            if self.citations is not None:
                base = out.get("citations")
                out["citations"] = (base if isinstance(base, list) else []) + self.citations
        elif t == "thinking":
            if self.texts or not isinstance(out.get("thinking", ""), str):
                out["thinking"] = _str_or_empty(out.get("thinking")) + self.joined()
            if self.signature is not None:
                out["signature"] = self.signature
        elif t == "compaction":
            if self.compaction is not None:  # as the SDK's beta accumulator: the last delta's values replace
                out["content"] = self.compaction.content
                out["encrypted_content"] = self.compaction.encrypted_content
        elif self.is_tool:
            if not self.parsed:
                # open block (no stop seen): show what arrived, never pretend it is complete (not even as the
                # start block's `{}` when no fragment came yet)
                out["input"] = None
                out["input_raw"] = self.joined()
            elif self.input_error is not None:
                out["input"] = None
                out["input_raw"] = self.joined()
            else:
                out["input"] = self.input
        return out


def _str_or_empty(v: Any) -> str:
    return v if isinstance(v, str) else ""


# What `feed` reports changed, for observers (the loop turns these into observations).
Change = tuple  # ("message_start",) | ("block_opened", i) | ("block_delta", i) | ("block_closed", i) | ...


class MessageAssembler:
    """Folds typed stream events into blocks and a final message, with diagnostics. Never raises."""

    def __init__(self, cap: DiagnosticCap | None = None) -> None:
        self.cap = cap if cap is not None else DiagnosticCap()  # (TurnStream shares one per stream)
        self.message: dict | None = None
        self.blocks: dict[int, BlockBuffer] = {}
        self.order: list[int] = []  # indices in arrival order
        self.diagnostics: list[Diagnostic] = []
        self.started = False
        self.stopped = False
        self.error: ErrorEvent | None = None
        self.events = 0
        self.finished = False
        self.stop_reason: str | None = None
        self._next_index = 0

    # -- helpers
    def _diag(self, code: str, severity: str, message: str, seq: int, block: int | None = None, raw=None) -> None:
        self._add(Diagnostic(code, severity, message, seq, block_index=block, raw=raw))  # type: ignore[arg-type]

    def _add(self, d: Diagnostic) -> None:
        kept = self.cap.filter(d)
        if kept is not None:
            self.diagnostics.append(kept)

    def feed(self, ev: StreamEvent) -> list[Change]:
        self.events += 1
        if ev.__class__ is ContentBlockDelta and not self.stopped:
            # hot path: a text/json/thinking fragment for an open block of the matching type (same result as
            # _delta, which handles everything else)
            block = self.blocks.get(ev.index)
            if block is not None and not block.closed:
                d: Any = ev.delta
                dc = d.__class__
                bt = block.type
                if dc is InputJsonDelta:
                    text = d.partial_json if bt in TOOL_INPUT_BLOCKS else None
                elif dc is TextDelta:
                    text = d.text if bt == "text" else None
                elif dc is ThinkingDelta:
                    text = d.thinking if bt == "thinking" else None
                else:
                    text = None
                if text is not None:
                    block.texts.append(text)
                    block.fragment_events.append(ev.seq)
                    block.nbytes += len(text) if text.isascii() else len(text.encode("utf-8"))
                    block._joined = None
                    return [("block_delta", ev.index)]
            return self._delta(ev)
        seq = ev.seq
        if isinstance(ev, Ping):
            return []
        if self.stopped and not isinstance(ev, (InvalidEvent, UnknownEvent)):
            self._diag(D.EVENT_AFTER_STOP, "warning", f"{ev.type} after message_stop (ignored)", seq)
            return []
        if isinstance(ev, ContentBlockDelta):
            return self._delta(ev)
        if isinstance(ev, ContentBlockStart):
            return self._start(ev)
        if isinstance(ev, ContentBlockStop):
            return self._stop(ev)
        if isinstance(ev, MessageStart):
            if self.started:
                self._diag(D.DUPLICATE_MESSAGE_START, "error", "second message_start (ignored)", seq)
                return []
            return self._message_start(ev)
        self._require_start(ev)
        if isinstance(ev, MessageDelta):
            msg = self._msg()
            md = ev.delta
            # (a value of the wrong type is a protocol.wrong_type diagnostic from parse_event: not folded)
            sr, ss = md.get("stop_reason"), md.get("stop_sequence")
            msg["stop_reason"] = sr if isinstance(sr, str) else None
            msg["stop_sequence"] = ss if isinstance(ss, str) else None
            for k, v in md.items():
                if k not in _NOT_FROM_DELTA and v is not None and (k != "container" or isinstance(v, dict)):
                    msg[k] = v
            for k in _FROM_MESSAGE_DELTA:  # top-level fields of the event the SDK's beta accumulator folds
                v = ev.extra.get(k)
                if v is not None:
                    msg[k] = v
            self.stop_reason = msg["stop_reason"]
            usage = msg.get("usage")
            if not isinstance(usage, dict):
                usage = msg["usage"] = {}
            for k, v in ev.usage.items():
                # cumulative totals: overwrite, never add; a missing/null optional value keeps the earlier one
                if v is not None or k == "output_tokens":
                    usage[k] = v
            return [("message_delta",)]
        if isinstance(ev, MessageStop):
            self.stopped = True
            return [("message_stop",)]
        if isinstance(ev, ErrorEvent):
            self.error = ev  # diagnostic already raised by parse_event
            return [("error",)]
        return []  # Unknown / Invalid: their diagnostics come from parse_event

    def _message_start(self, ev: MessageStart) -> list[Change]:
        """The message, and the blocks it already holds (programmatic tool calling sends complete tool_use blocks
        and a stop_reason in message_start, then message_stop with no message_delta): each becomes a closed block,
        reported as block_opened + block_closed, as a streamed one would be."""
        self.started = True
        msg = self.message = dict(ev.message)
        usage = msg.get("usage")
        msg["usage"] = dict(usage) if isinstance(usage, dict) else {}
        content = msg.get("content")
        msg["content"] = []
        sr = msg.get("stop_reason")
        if not isinstance(sr, str):
            sr = None
        if "stop_reason" in msg:
            msg["stop_reason"] = sr
        self.stop_reason = sr
        ss = msg.get("stop_sequence")
        if ss is not None and not isinstance(ss, str):
            msg["stop_sequence"] = None
        changes: list[Change] = [("message_start",)]
        if not isinstance(content, list):
            return changes
        seq = ev.seq
        for i, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                continue  # protocol.wrong_type from parse_event, with the raw value
            btype = block["type"]
            if btype not in KNOWN_BLOCKS:
                self._diag(D.UNKNOWN_BLOCK, "info", f"unknown content block type {btype!r} (kept)", seq, i)
            b = BlockBuffer(i, btype, block, seq, closed=True, stop_event=seq, prefilled=True)
            self.blocks[i] = b
            self.order.append(i)
            if btype == "fallback":
                self._fallback(block)
            if b.is_tool:
                for d in b.parse_input():
                    self._add(d)
            changes.append(("block_opened", i))
            changes.append(("block_closed", i))
        self._next_index = len(content)
        return changes

    def _fallback(self, block: dict) -> None:
        """A fallback block names the model serving the rest of the response (the SDK relabels the message)."""
        to = block.get("to")
        if isinstance(to, dict) and isinstance(to.get("model"), str):
            self._msg()["model"] = to["model"]

    def _msg(self) -> dict:
        if self.message is None:
            self.message = {"content": [], "usage": {}}
        return self.message

    def _require_start(self, ev: StreamEvent) -> None:
        if not self.started and not isinstance(ev, (ErrorEvent, InvalidEvent, UnknownEvent)):
            self._diag(D.EVENT_BEFORE_START, "error", f"{ev.type} before message_start", ev.seq)

    def _start(self, ev: ContentBlockStart) -> list[Change]:
        self._require_start(ev)
        i, seq = ev.index, ev.seq
        if i in self.blocks:
            self._diag(
                D.DUPLICATE_BLOCK_START,
                "error",
                f"content_block_start for index {i} which is already open"
                if self.blocks[i].open
                else f"content_block_start for index {i} which already ended",
                seq,
                i,
            )
            return []
        if i != self._next_index:
            self._diag(D.INDEX_GAP, "warning", f"block index {i} started, expected {self._next_index}", seq, i)
        self._next_index = max(self._next_index, i + 1)
        btype = ev.content_block["type"]
        if btype not in KNOWN_BLOCKS:
            self._diag(D.UNKNOWN_BLOCK, "info", f"unknown content block type {btype!r} (kept)", seq, i)
        elif btype == "fallback":
            self._fallback(ev.content_block)
        self.blocks[i] = BlockBuffer(i, btype, ev.content_block, seq)
        self.order.append(i)
        return [("block_opened", i)]

    def _delta(self, ev: ContentBlockDelta) -> list[Change]:
        i, seq, delta = ev.index, ev.seq, ev.delta
        block = self.blocks.get(i)
        if block is None:
            self._diag(D.DELTA_UNKNOWN_INDEX, "error", f"{delta.type} for index {i}, which was never started", seq, i)
            return []
        if block.closed:
            self._diag(D.DELTA_AFTER_STOP, "error", f"{delta.type} for index {i} after its content_block_stop", seq, i)
            return []
        if isinstance(delta, UnknownDelta):
            return []  # kept in the event list; info diagnostic from parse_event
        allowed = _DELTA_FOR_BLOCK.get(block.type)
        if allowed is None and block.type not in KNOWN_BLOCKS:
            # a block type we do not know (info diagnostic at its start): we cannot tell which deltas it takes,
            # so keep what arrives (for display) instead of calling it a mismatch and dropping it
            if isinstance(delta, (TextDelta, InputJsonDelta, ThinkingDelta)):
                block.add(
                    delta.text
                    if isinstance(delta, TextDelta)
                    else delta.partial_json
                    if isinstance(delta, InputJsonDelta)
                    else delta.thinking,
                    seq,
                )
            return [("block_delta", i)]
        if allowed is None or delta.type not in allowed:
            self._diag(
                D.DELTA_TYPE_MISMATCH,
                "error",
                f"{delta.type} for block {i} of type {block.type} (ignored)",
                seq,
                i,
            )
            return []
        if isinstance(delta, TextDelta):
            block.add(delta.text, seq)
        elif isinstance(delta, InputJsonDelta):
            block.add(delta.partial_json, seq)
        elif isinstance(delta, ThinkingDelta):
            block.add(delta.thinking, seq)
        elif isinstance(delta, SignatureDelta):
            block.signature = delta.signature
        elif isinstance(delta, CitationsDelta):
            if not isinstance(delta.citation, dict):
                return []  # protocol.wrong_type from parse_event (kept in the event)
            if block.citations is None:
                block.citations = []
            block.citations.append(delta.citation)
        elif isinstance(delta, CompactionDelta):
            block.compaction = delta
            if isinstance(delta.content, str):
                block.add(delta.content, seq)  # (also a fragment: for previews and the byte count)
        return [("block_delta", i)]

    def _stop(self, ev: ContentBlockStop) -> list[Change]:
        i, seq = ev.index, ev.seq
        block = self.blocks.get(i)
        if block is None:
            self._diag(
                D.STOP_UNKNOWN_INDEX, "error", f"content_block_stop for index {i}, which was never started", seq, i
            )
            return []
        if block.closed:
            self._diag(D.DUPLICATE_BLOCK_STOP, "warning", f"second content_block_stop for index {i} (ignored)", seq, i)
            return []
        block.closed = True
        block.stop_event = seq
        if block.is_tool:
            for d in block.parse_input():
                self._add(d)
        return [("block_closed", i)]

    # -- end of stream
    def finish(self) -> list[Diagnostic]:
        """End of stream: report what never completed. Idempotent."""
        if self.finished:
            return []
        self.finished = True
        new: list[Diagnostic] = []
        if self.events == 0:
            new.append(Diagnostic(D.NO_EVENTS, "error", "the stream carried no event", None))
        elif not self.stopped and self.error is None:
            new.append(Diagnostic(D.MISSING_MESSAGE_STOP, "error", "stream ended before message_stop", None))
        for i in self.order:
            b = self.blocks[i]
            if b.open:
                sev = "warning" if (self.stop_reason == "max_tokens" or self.error is not None) else "error"
                new.append(
                    Diagnostic(
                        D.BLOCK_NOT_CLOSED,
                        sev,  # type: ignore[arg-type]
                        f"block {i} ({b.type}{' ' + b.name if b.name else ''}) never got its content_block_stop"
                        + ("; its tool will not run" if b.is_tool else ""),
                        None,
                        block_index=i,
                    )
                )
        new = [k for k in map(self.cap.filter, new) if k is not None]
        self.diagnostics.extend(new)
        return new

    # -- results
    def final_message(self) -> dict:
        msg = dict(self.message or {"id": None, "type": "message", "role": "assistant", "model": None, "usage": {}})
        msg["content"] = [self.blocks[i].to_content() for i in sorted(self.blocks)]
        for k in ("id", "type", "role", "model", "stop_reason", "stop_sequence"):
            msg.setdefault(k, None)
        usage = msg.get("usage")
        msg["usage"] = dict(usage) if isinstance(usage, dict) else {}
        return msg

    def tool_blocks(self) -> list[BlockBuffer]:
        """Client tool_use blocks in index order."""
        return [self.blocks[i] for i in sorted(self.blocks) if self.blocks[i].type == "tool_use"]

    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        if not self.stopped:
            return "incomplete"
        tools = self.tool_blocks()
        complete = sum(b.closed and b.input_error is None for b in tools)
        broken = sum(b.open or b.input_error is not None for b in tools)
        return stopped_outcome(self.stop_reason, len(tools), complete, broken)


def stopped_outcome(stop_reason: Any, tools: int, complete: int, broken: int) -> Outcome:
    """The outcome of a message that stopped (streamed or a JSON body), from its client tool_use blocks: how many,
    how many complete with a parsed input, how many still open or with an input that did not parse."""
    if stop_reason == "max_tokens" and broken:
        return "truncated"
    if complete or (tools and stop_reason == "tool_use"):
        return "tool_use"
    return "text_finish"


@dataclass(slots=True)
class Step:
    """One decoded SSE event with what it became and what it changed. (TurnStream._steps sets the fields one by one,
    without __init__: a new field needs a line there.)"""

    sse: SSEEvent
    event: StreamEvent
    changes: list[Change]
    diagnostics: list[Diagnostic]


# TurnStream._steps builds Step, ContentBlockDelta and the text/json/thinking deltas without __init__, field by field:
# it must set every field (their __slots__ are pinned by tests/stream/test_hotpath.py).
# The continuation path of TurnStream._steps: on where the `is` test it relies on holds (see inspector.stream.sse);
# tests set it False to compare with the general path.
CONTINUATION = _sse.IDENTITY_HOLDS


class TurnStream:
    """Bytes in, steps out: SSE decoder + protocol parser + assembler for one response."""

    def __init__(self, max_event_bytes: int | None = None, max_diagnostics_per_code: int = D.DEFAULT_PER_CODE) -> None:
        # one cap for the whole stream: the first `max_diagnostics_per_code` of each code are kept, the rest
        # counted (one diagnostics.capped notice per code, and the counts at close())
        self.cap = DiagnosticCap(max_diagnostics_per_code)
        if max_event_bytes is None:
            self.decoder = SSEDecoder(cap=self.cap)
        else:
            self.decoder = SSEDecoder(max_event_bytes, cap=self.cap)
        self.assembler = MessageAssembler(self.cap)
        self.diagnostics: list[Diagnostic] = []  # everything, in order seen
        self.closed = False
        self._held: list[Diagnostic] = []  # SSE diagnostics of an event not yet dispatched
        # The block the last delta went to, for the continuation path of _steps: (head, index, delta class, block),
        # where head is the text before the fragment's JSON string in that delta's data, as bytes (see
        # protocol.delta_head); None before any.
        self._cont: tuple[bytes, int, type, BlockBuffer] | None = None

    def _steps(self, events: list[SSEEvent], raws: list[bytes]) -> list[Step]:
        """The steps of `events`; raws[i] is events[i]'s data as bytes (b"" if not kept: see SSEDecoder.raw_data).

        Two paths. The general one: parse_event, then MessageAssembler.feed. The continuation path, for most events
        of a stream: a delta for the block the previous delta went to. The API writes every delta of a block the
        same way up to the fragment's JSON string, so an event whose data is that head, one JSON string and "}}" is
        such a delta. Only the string is parsed (from the bytes that came in: orjson need not encode the text
        again), and the event, the step and the assembler's state are made here, exactly as the general path would
        make them (through the assembler's hot path), without its calls; the per-fragment bookkeeping (event index,
        byte count, event count) is done once for each run of such events (_account)."""
        steps: list[Step] = []
        append = steps.append
        asm = self.assembler
        adiags = asm.diagnostics  # never rebound
        feed = asm.feed
        parse = parse_event
        cap_filter = self.cap.filter
        loads = _loads
        new = object.__new__  # `new(C)` + attribute stores: building without the __init__ call, which costs more
        continuation = CONTINUATION
        cont = self._cont  # dropped as soon as its block is closed or the message stopped
        if cont is not None and (cont[3].closed or asm.stopped or not continuation):
            cont = None
        if cont is not None:
            head, idx, cls, block = cont
            texts_append = block.texts.append
            change = ("block_delta", idx)  # (shared by the steps' change lists: a tuple is immutable)
        run = 0  # fragments the continuation path appended since the last _account()
        n = len(adiags)  # the assembler's diagnostics so far: one len() per event tells whether feed added any
        for e, raw in zip(events, raws):
            if cont is not None:
                if not raw:  # an event the decoder's fast path did not make (often the one across two reads)
                    raw = e.data.encode()
                # (removeprefix/removesuffix cost less than startswith/endswith and a slice: they take their
                # argument the fast way and make the slice themselves; `is` tells whether they removed anything,
                # see inspector.stream.sse)
                middle = raw.removeprefix(head)
                if middle is not raw and (e.event == "content_block_delta" or e.event == "message"):
                    string = middle.removesuffix(b"}}")
                    try:
                        text = loads(string) if string is not middle else None
                    except JSONDecodeError:
                        text = None
                    if text.__class__ is str:  # the middle is one JSON string: the data is exactly such a delta
                        texts_append(text)
                        run += 1
                        d: Any = new(cls)  # cls(text)
                        if cls is InputJsonDelta:
                            d.partial_json = text
                            d.type = "input_json_delta"
                        elif cls is TextDelta:
                            d.text = text
                            d.type = "text_delta"
                        else:
                            d.thinking = text
                            d.type = "thinking_delta"
                        ev: Any = new(ContentBlockDelta)  # ContentBlockDelta(idx, d, e.seq)
                        ev.index = idx
                        ev.delta = d
                        ev.seq = e.seq
                        ev.type = "content_block_delta"
                        st = new(Step)  # Step(e, ev, [change], [])
                        st.sse = e
                        st.event = ev
                        st.changes = [change]
                        st.diagnostics = []
                        append(st)
                        continue
                if run:
                    self._account(block, run, e.seq)
                    run = 0
            ev, diags = parse(e.event, e.data, e.seq)
            if diags:
                diags = [k for k in map(cap_filter, diags) if k is not None]
            changes = feed(ev)
            if len(adiags) != n:
                diags = diags + adiags[n:]
                n = len(adiags)
            if diags:
                self.diagnostics.extend(diags)
            elif continuation and ev.__class__ is ContentBlockDelta and ev.delta.__class__ in _TEXT_DELTAS and changes:
                # a text/json/thinking fragment the block took: the next delta may continue it
                h = delta_head(ev)
                if h is not None and e.data.startswith(h):
                    cont = (h.encode(), ev.index, ev.delta.__class__, asm.blocks[ev.index])
                    head, idx, cls, block = cont
                    texts_append = block.texts.append
                    change = ("block_delta", idx)
            if cont is not None and (block.closed or asm.stopped):
                cont = None
            st = new(Step)  # Step(e, ev, changes, diags)
            st.sse = e
            st.event = ev
            st.changes = changes
            st.diagnostics = diags
            append(st)
        if run:
            self._account(block, run, events[-1].seq + 1)
        self._cont = cont
        return steps

    def _account(self, block: BlockBuffer, run: int, end_seq: int) -> None:
        """What MessageAssembler.feed does for each fragment besides appending it, for the last `run` fragments of
        `block`: those of the events just before `end_seq` (the continuation path takes runs without gaps)."""
        block.fragment_events.extend(range(end_seq - run, end_seq))
        joined = "".join(block.texts[-run:])  # the UTF-8 size of the fragments is that of their concatenation
        block.nbytes += len(joined) if joined.isascii() else len(joined.encode())
        block._joined = None
        self.assembler.events += run

    def feed(self, data: bytes) -> list[Step]:
        """Decode one read. SSE-layer diagnostics go with the step of the event they concern (the event being
        built when they arose), before that step's own; those of an event not yet complete wait for it (or for
        close()). So steps and `diagnostics` are the same however the bytes were split into reads."""
        events = self.decoder.feed(data)
        raws = self.decoder.raw_data
        if len(raws) != len(events):  # (never: but then no event may be lost to zip())
            raws = [b""] * len(events)
        pending = self.decoder.take_diagnostics()
        if self._held:
            pending = self._held + pending
            self._held = []
        if not pending:
            return self._steps(events, raws)
        steps: list[Step] = []
        k, n = 0, len(pending)
        for e, raw in zip(events, raws):
            j = k
            while j < n and ((ei := pending[j].event_index) is None or ei <= e.seq):
                j += 1
            if j > k:
                before = pending[k:j]
                k = j
                self.diagnostics.extend(before)
                step = self._steps([e], [raw])[0]
                step.diagnostics[:0] = before
            else:
                step = self._steps([e], [raw])[0]
            steps.append(step)
        self._held = pending[k:]
        return steps

    def close(self) -> list[Diagnostic]:
        """End of stream. Returns the diagnostics that only the end could reveal (and SSE-layer ones still held
        for an event that never completed)."""
        if self.closed:
            return []
        self.closed = True
        self.decoder.close()
        new = self._held + self.decoder.take_diagnostics()
        self._held = []
        new += self.assembler.finish()
        summary = self.cap.summary()
        if summary is not None:
            new.append(summary)
        self.diagnostics.extend(new)
        return new

    @property
    def outcome(self) -> Outcome:
        return self.assembler.outcome()

    def final_message(self) -> dict:
        return self.assembler.final_message()


def assemble(data: bytes | list[bytes]) -> TurnStream:
    """Run whole bytes (or a list of reads) through a TurnStream and close it."""
    ts = TurnStream()
    for chunk in [data] if isinstance(data, (bytes, bytearray)) else data:
        ts.feed(bytes(chunk))
    ts.close()
    return ts

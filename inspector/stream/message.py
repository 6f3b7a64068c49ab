"""The message assembler: folds typed stream events into per-index blocks and the final message, with diagnostics.

`MessageAssembler.feed` never raises: every protocol fault becomes a `Diagnostic`. It is the one definition of how
an event changes the message; `inspector.stream.fastpath` takes runs of deltas by a shorter way and hands their
fragments to `add_run`, with the same result.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from inspector.stream import diagnostics as D
from inspector.stream.blocks import BlockBuffer
from inspector.stream.diagnostics import Diagnostic, DiagnosticCap, Severity
from inspector.stream.protocol import DELTA_FOR_BLOCK as _DELTA_FOR_BLOCK
from inspector.stream.protocol import (
    KNOWN_BLOCKS,
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
)

__all__ = ["Change", "MessageAssembler", "Outcome", "stopped_outcome"]

Outcome = Literal["tool_use", "text_finish", "truncated", "incomplete", "error"]
# message_delta: delta fields not copied onto the message as they are (stop_* are set always; the others belong to
# the message_start or to the top level of the event)
_NOT_FROM_DELTA = frozenset({"stop_reason", "stop_sequence", "usage", "content", "id", "type", "role"})
_FROM_MESSAGE_DELTA = ("context_management", "input_transformations")

# What `feed` reports changed, for observers (the loop turns these into observations): ("message_start", message),
# ("message_delta", stop_reason, usage) (each the message as of its event), ("block_opened", i), ("block_delta", i),
# ("block_closed", i), ...
Change = tuple[Any, ...]


class MessageAssembler:
    """Folds typed stream events into blocks and a final message, with diagnostics. Never raises."""

    def __init__(self, cap: DiagnosticCap | None = None) -> None:
        self.cap = cap if cap is not None else DiagnosticCap()  # (TurnStream shares one per stream)
        self.message: dict[str, Any] | None = None
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
    def _diag(
        self, code: str, severity: Severity, message: str, seq: int, block: int | None = None, raw: bytes | None = None
    ) -> None:
        self._add(Diagnostic(code, severity, message, seq, block_index=block, raw=raw))

    def add_run(self, block: BlockBuffer, texts: list[str], first_seq: int) -> None:
        """What `feed` does for a run of text/json/thinking deltas of consecutive events (the first `first_seq`),
        each one that `_delta` would append to `block` (open, of the delta's type), with no diagnostic: for
        `inspector.stream.fastpath`, which builds those events itself."""
        block.add_run(texts, first_seq)
        self.events += len(texts)

    def _add(self, d: Diagnostic) -> None:
        kept = self.cap.filter(d)
        if kept is not None:
            self.diagnostics.append(kept)

    def feed(self, ev: StreamEvent) -> list[Change]:
        self.events += 1
        if ev.__class__ is ContentBlockDelta and not self.stopped:  # (the most frequent event: tested first)
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
            return [("message_delta", msg["stop_reason"], dict(usage))]  # (as of this event: see _message_start)
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
        # the message as of this event, for whoever reports it later: the assembler goes on updating it in place (its
        # usage at message_delta), and the steps of one read are all made before the first is reported
        changes: list[Change] = [("message_start", copy.deepcopy(msg))]
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

    def _fallback(self, block: dict[str, Any]) -> None:
        """A fallback block names the model serving the rest of the response (the SDK relabels the message)."""
        to = block.get("to")
        if isinstance(to, dict) and isinstance(to.get("model"), str):
            self._msg()["model"] = to["model"]

    def _msg(self) -> dict[str, Any]:
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
                sev: Severity = "warning" if (self.stop_reason == "max_tokens" or self.error is not None) else "error"
                new.append(
                    Diagnostic(
                        D.BLOCK_NOT_CLOSED,
                        sev,
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
    def final_message(self) -> dict[str, Any]:
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

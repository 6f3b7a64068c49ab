"""Engine steps as observations: what every publisher (the agent loop, the proxy) says about one decoded SSE event.

One mapping, so the loop and the proxy publish exactly the same observations for the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inspector.observe import observations as O
from inspector.observe.states import ToolState
from inspector.stream.assembler import MessageAssembler, Step
from inspector.stream.protocol import (
    ContentBlockDelta,
    ContentBlockStart,
    ErrorEvent,
    InvalidEvent,
    MessageDelta,
    MessageStart,
    UnknownEvent,
)


def summarize_event(ev: Any) -> tuple[int | None, str]:
    """(block index, short summary) for an event row."""
    if isinstance(ev, ContentBlockDelta):
        d = ev.delta
        frag = getattr(d, "text", None)
        if frag is None:
            frag = getattr(d, "partial_json", None)
        if frag is None:
            frag = getattr(d, "thinking", None)
        if frag is None:
            if d.type == "signature_delta":
                frag = f"signature ({len(d.signature)} chars)"  # type: ignore[union-attr]
                return ev.index, frag
            return ev.index, d.type
        return ev.index, fragment_summary(d.type, frag)
    if isinstance(ev, ContentBlockStart):
        b = ev.content_block
        name = f" {b.get('name')}" if b.get("name") else ""
        bid = f" {b.get('id')}" if b.get("id") else ""
        return ev.index, f"{b.get('type')}{name}{bid}"
    if isinstance(ev, MessageStart):
        m = ev.message
        return None, f"{m.get('id')} {m.get('model')}"
    if isinstance(ev, MessageDelta):
        return None, f"stop_reason={ev.delta.get('stop_reason')} usage={json.dumps(ev.usage, default=str)}"
    if isinstance(ev, ErrorEvent):
        return None, f"{ev.error_type}: {ev.message}"
    if isinstance(ev, InvalidEvent):
        return None, f"invalid: {ev.data[:100]!r}"
    if isinstance(ev, UnknownEvent):
        return None, f"unknown {ev.event_type}"
    return getattr(ev, "index", None), ""


def event_name(wire: str, event_type: str) -> str:
    """An event row's name: the event's name on the wire for Anthropic's and Responses' events (``event:``); a Chat
    Completions chunk has none (its SSE event is "message"): it is a "chunk". (The dashboard's rows and the HTML
    export's.)"""
    if wire.startswith("response."):
        return wire
    return "chunk" if wire == "message" and event_type != "invalid" else event_type


def fragment_summary(delta_type: str, frag: str) -> str:
    """The row summary of a delta's fragment. A JSON fragment is shown as the raw text it is (already JSON-escaped:
    never escaped twice); a text or thinking fragment is a decoded string, shown JSON-quoted with visible escapes."""
    s = _quote(frag) if delta_type == "input_json_delta" else json.dumps(frag, ensure_ascii=False)
    return s if len(s) <= 120 else s[:117] + "..."


def _quote(s: str) -> str:
    """A partial_json fragment as the JSON text it is, between backticks; only raw control characters (which JSON
    text may carry as whitespace) are made visible."""
    return "`" + s.replace("\n", "↵").replace("\r", "␍").replace("\t", "⇥") + "`"


def step_observations(
    step: Step, asm: MessageAssembler, now: float, turn: int, attempt: int, *, prev_sse: object = None
) -> list[O.Observation]:
    """The observations for one step: the event row, its diagnostics, and what it changed (blocks, message,
    and a `ToolUse` at each tool_use block's stop whose input parsed).

    One OpenAI SSE event can give several steps, which share their ``sse`` (the same object): the event row is said
    once, with the first of them. ``prev_sse``: the ``sse`` of the step before (the caller's); a step whose ``sse``
    is that one gives no second row."""
    ev = step.event
    out: list[O.Observation] = []
    if step.sse is None or step.sse is not prev_sse:
        index, summary = summarize_event(ev)
        out.append(O.SSEEventSeen(now, turn, attempt, step.sse, ev.type, index, summary))
    for d in step.diagnostics:
        out.append(O.DiagnosticRaised(now, turn, attempt, d))
    for change in step.changes:
        kind = change[0]
        if kind == "block_delta":
            delta = ev.delta  # type: ignore[union-attr]
            frag = (
                getattr(delta, "text", None)
                or getattr(delta, "partial_json", None)
                or getattr(delta, "thinking", None)
                or ""
            )
            out.append(O.BlockDelta(now, turn, attempt, change[1], delta.type, frag, ev.seq))  # type: ignore[union-attr]
        elif kind == "block_opened":
            b = asm.blocks[change[1]]
            out.append(O.BlockOpened(now, turn, attempt, b.index, b.type, b.id, b.name, dict(b.start)))
        elif kind == "block_closed":
            b = asm.blocks[change[1]]
            err = b.input_error.describe() if b.input_error else None
            out.append(O.BlockClosed(now, turn, attempt, b.index, b.to_content(), err))
            if b.type == "tool_use" and b.id and err is None:
                out.append(O.ToolUse(now, turn, attempt, b.id, b.name or "?", b.index, b.input))
        elif kind == "message_start":
            # the message as of the event (the step's own copy: the assembler's is updated in place by later events,
            # maybe of the same read, and time travel reads what an observation says)
            out.append(O.MessageStarted(now, turn, attempt, change[1]))
        elif kind == "message_delta":
            out.append(O.MessageUpdated(now, turn, attempt, change[1], change[2]))
    return out


@dataclass(frozen=True, slots=True)
class ToolTransition:
    """What a step means for a client tool call: its input began streaming (``STREAMING_INPUT``), or its block
    closed with the input parsed (``QUEUED``: the call can run) or unparseable (``NOT_RUN``, with ``error``)."""

    state: ToolState
    id: str
    name: str
    index: int
    input: dict[str, Any] | None
    error: str | None


def tool_transitions(step: Step, asm: MessageAssembler) -> list[ToolTransition]:
    """The one mapping from an assembler step onto tool-call states, shared by the loop (which hands the calls to
    its executor) and the proxy (which shows another harness's calls)."""
    out: list[ToolTransition] = []
    for change in step.changes:
        kind = change[0]
        if kind not in ("block_opened", "block_closed"):
            continue
        b = asm.blocks[change[1]]
        if b.type != "tool_use" or not b.id:
            continue
        name = b.name or "?"
        if kind == "block_opened":
            out.append(ToolTransition(ToolState.STREAMING_INPUT, b.id, name, b.index, None, None))
        else:
            err = b.input_error.describe() if b.input_error else None
            state = ToolState.QUEUED if err is None else ToolState.NOT_RUN
            out.append(ToolTransition(state, b.id, name, b.index, b.input if err is None else None, err))
    return out

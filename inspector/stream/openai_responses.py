"""OpenAI Responses streams (`response.*` events) into the neutral steps (see openai_common).

Blocks, numbered in arrival order: each content part of a `message` item is a text block (`output_text`; a
`refusal` part is a text block marked `"openai": "refusal"`), each reasoning summary part and reasoning text a
thinking block, each `function_call` item a `tool_use` block (id = its `call_id`) and each `custom_tool_call` a
text block marked `"openai": "custom_tool_call"` (its input is free text, not JSON). A block closes at its `.done`
event (`output_text.done`, `function_call_arguments.done`, ...) or at its item's `output_item.done`; a tool call
is complete then, its arguments parsed once. `response.completed` / `response.incomplete` end the message;
`response.failed` and `error` are errors.

The `.done` events repeat the whole value: where it differs from the joined deltas it is named
(`openai.responses.done_mismatch`; the block keeps what streamed), and a `.done` with no delta before it (LM Studio)
fills the block (`openai.responses.done_without_deltas`).

`final_object()` is what the openai SDK's `ResponseStreamState` gives: the terminal event's `response` (its
`output` recovered from the `output_item.done` items when empty); without a terminal event, the response as folded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orjson import JSONDecodeError
from orjson import loads as _loads

from inspector.core.wire import RESPONSES_DELTAS
from inspector.stream import diagnostics as D
from inspector.stream import openai_common as C
from inspector.stream.diagnostics import Severity
from inspector.stream.openai_common import FragmentPath, NeutralStream, loads_object
from inspector.stream.protocol import ErrorEvent, MessageDelta, MessageStart, MessageStop, check_usage
from inspector.stream.sse import SSEEvent

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_LIFECYCLE = ("response.created", "response.queued", "response.in_progress")
# incomplete_details.reason -> the neutral stop_reason
_INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
# delta event -> (block kind, key part, index field): declared with the redactor's rules (core/wire.py)
_DELTAS = RESPONSES_DELTAS
# done event -> (block kind, key part, index field, the field holding the whole value, closes the block)
_DONES = {
    "response.output_text.done": ("text", "content", "content_index", "text"),
    "response.refusal.done": ("refusal", "content", "content_index", "refusal"),
    "response.reasoning_summary_text.done": ("thinking", "summary", "summary_index", "text"),
    "response.reasoning_text.done": ("thinking", "reasoning", "content_index", "text"),
    "response.function_call_arguments.done": ("tool_use", "args", None, "arguments"),
    "response.custom_tool_call_input.done": ("custom", "args", None, "input"),
}

# a block of an item: (its part, "content" / "summary" / "reasoning" / "args", and the part's index: None where the
# event's index is not an integer, 0 for "args")
_Key = tuple[str, int | None]


@dataclass(slots=True)
class _Item:
    output_index: int
    item: dict[str, Any]
    done: bool = False
    blocks: dict[_Key, int] = field(default_factory=dict)  # (part, index) -> block
    texts: dict[_Key, list[str]] = field(default_factory=dict)  # (part, index) -> fragments


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ResponsesStream(NeutralStream):
    family = "openai_responses"
    block_end = "its .done event or its item's output_item.done"
    message_end = "response.completed / incomplete"

    def _init_stream(self) -> None:
        """This family's per-stream state (TurnStream.__init__ calls it last)."""
        super()._init_stream()
        self.response: dict[str, Any] | None = None  # the last lifecycle / terminal response object
        self.items: dict[int, _Item] = {}
        self.terminal: str | None = None  # completed / incomplete / failed
        self.errored = False
        self._last_seq: int | None = None
        self._first = True

    # --- one SSE event ---------------------------------------------------------------------------------------
    def _event(self, e: SSEEvent) -> None:
        if e.data.startswith("[DONE]"):
            self._note(C.DONE_MARKER, "info", "data: [DONE] in a Responses stream (OpenAI sends none; ignored)")
            return
        d, bad = loads_object(e)
        if d is None:
            assert bad is not None
            self._invalid(e, bad)
            return
        t = d.get("type")
        if not isinstance(t, str):
            t = e.event if e.event != "message" else ""
        if e.event not in ("message", t):
            self._note(D.TYPE_MISMATCH, "warning", f"SSE event {e.event!r} but data type {t!r} (the data is used)")
        first, self._first = self._first, False
        if first and t != "response.created":
            sev: Severity = "info" if t in ("response.queued", "response.in_progress") else "warning"
            self._note(C.RESP_FIRST_EVENT, sev, f"the first event is {t or 'untyped'}, not response.created")
        sn = _int(d.get("sequence_number"))
        if sn is not None:
            if self._last_seq is not None and sn != self._last_seq + 1:
                self._note(C.RESP_SEQUENCE, "warning", f"sequence_number {sn} after {self._last_seq}")
            self._last_seq = sn
        if self.terminal is not None or self.errored:
            self._after_end(t or "an untyped event")
            return
        if t == "error" or (d.get("error") and not t.startswith("response.")):
            self._error(d)
            return
        if t in _LIFECYCLE:
            self._lifecycle(d, e.seq)
        elif t == "response.output_item.added":
            self._item_added(d, e.seq)
        elif t == "response.content_part.added" or t == "response.reasoning_summary_part.added":
            self._part_added(t, d, e.seq)
        elif t in _DELTAS:
            kind, part, field_ = _DELTAS[t]
            delta = d.get("delta")
            if not isinstance(delta, str):
                self._note(D.WRONG_TYPE, "error", f"{t}: delta is not a string (ignored)")
                return
            key = (part, _int(d.get(field_)) if field_ else 0)
            it = self._item_for(d, t)
            if it is not None:
                self._add(it, key, kind, delta, e.seq)
        elif t in _DONES:
            kind, part, field_, whole_field = _DONES[t]
            key = (part, _int(d.get(field_)) if field_ else 0)
            it = self._item_for(d, t)
            if it is not None:
                self._done_text(it, key, kind, d.get(whole_field), t, e.seq)
        elif t == "response.content_part.done" or t == "response.reasoning_summary_part.done":
            part = "content" if t == "response.content_part.done" else "summary"
            field_ = "content_index" if part == "content" else "summary_index"
            key = (part, _int(d.get(field_)))
            it = self._item_for(d, t)
            if it is not None:
                p = d.get("part")
                if isinstance(p, dict):
                    whole = p.get("refusal") if p.get("type") == "refusal" else p.get("text")
                    kind = "refusal" if p.get("type") == "refusal" else "text" if part == "content" else "thinking"
                    if p.get("type") == "reasoning_text":
                        kind, key = "thinking", ("reasoning", key[1])
                    self._done_text(it, key, kind, whole, t, e.seq)
        elif t == "response.output_item.done":
            self._item_done(d, e.seq)
        elif t in TERMINAL:
            self._terminal(t, d, e.seq)
        elif not t.startswith("response."):
            self._note(C.RESP_UNKNOWN_EVENT, "info", f"unknown event type {t!r} (kept)")

    def _take(self, e: SSEEvent) -> tuple[int, str, str] | None:
        """The common event, by a shorter way (NeutralStream._take): a non-empty text / arguments delta, named as
        its data's type (or unnamed), with the next sequence_number (or none), for an open block of an added item,
        no `error` key."""
        try:
            d = _loads(e.data)
        except JSONDecodeError:
            return None
        if d.__class__ is not dict:
            return None
        t = d.get("type")
        spec = _DELTAS.get(t) if t.__class__ is str else None
        if spec is None or self._first or self.terminal is not None or self.errored or "error" in d:
            return None
        if e.event != "message" and e.event != t:
            return None
        sn = d.get("sequence_number")
        if sn is not None and (sn.__class__ is not int or self._last_seq is None or sn != self._last_seq + 1):
            return None
        delta = d.get("delta")
        if delta.__class__ is not str or not delta:
            return None
        kind, part, field_ = spec
        oi = d.get("output_index")
        it = self.items.get(oi) if oi.__class__ is int else None
        if it is None:
            return None
        if field_:
            idx = d.get(field_)
            if idx.__class__ is not int:
                return None
            key: _Key = (part, idx)
        else:
            key = (part, 0)
        i = it.blocks.get(key)
        if i is None or self.assembler.blocks[i].closed:
            return None
        if sn is not None:
            self._last_seq = sn
        took = self._took = it.texts[key]
        took.append(delta)
        return i, "tool_use" if kind == "tool_use" else "thinking" if kind == "thinking" else "text", delta

    def _shape(self, e: SSEEvent) -> tuple[dict[str, Any], FragmentPath, str | None, str | None] | None:
        d = _loads(e.data)
        counter = "sequence_number" if d.get("sequence_number").__class__ is int else None
        free = "obfuscation" if d.get("obfuscation").__class__ is str else None  # (OpenAI's, on every delta)
        return d, ("delta",), counter, free

    def _take_same(self, texts: list[str], counter: int | None) -> None:
        self._took.extend(texts)
        if counter is not None:
            self._last_seq = counter

    def _lifecycle(self, d: dict[str, Any], seq: int) -> None:
        r = d.get("response")
        if not isinstance(r, dict):
            self._note(D.MALFORMED_EVENT, "error", f"{d.get('type')} without a response object")
            return
        self._check_id(r)
        self.response = r
        if not self.assembler.started:
            msg: dict[str, Any] = {
                "id": r.get("id"),
                "type": "message",
                "role": "assistant",
                "model": r.get("model"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {},
            }
            self._emit(MessageStart(msg, seq))

    def _check_id(self, r: dict[str, Any]) -> None:
        if self.response is not None and r.get("id") != self.response.get("id"):
            self._note(
                C.RESP_ID_CHANGED,
                "warning",
                f"response id {r.get('id')!r} after {self.response.get('id')!r} (the SDK rejects it)",
            )

    def _check_output(self, r: dict[str, Any]) -> None:
        """The terminal response's output against the items that streamed: an item whose type, id or call_id
        differs is named (OpenRouter renames reasoning items; the final object is what the terminal event says)."""
        out = r.get("output")
        if not isinstance(out, list):
            return
        for oi, item in enumerate(out):
            it = self.items.get(oi)
            if it is None or not isinstance(item, dict):
                continue
            for k in ("type", "id", "call_id"):
                if item.get(k) != it.item.get(k) and it.item.get(k) is not None:
                    self._note(
                        C.RESP_ID_CHANGED,
                        "warning",
                        f"output {oi}: {k} {item.get(k)!r} in the terminal response, {it.item.get(k)!r} as streamed",
                    )
                    return

    def _error(self, d: dict[str, Any]) -> None:
        self.errored = True
        err = d.get("error")
        src = err if isinstance(err, dict) else d
        etype = src.get("type") if src is err else None
        etype = etype or src.get("code") or "error"
        message = src.get("message") or "An error occurred during streaming"
        self._note(C.ERROR_IN_STREAM, "error", f"error event: {etype}: {message}")
        self._emit(ErrorEvent(str(etype), str(message), src, self._sse.seq if self._sse else -1))

    def _item_for(self, d: dict[str, Any], t: str) -> _Item | None:
        oi = _int(d.get("output_index"))
        it = self.items.get(oi) if oi is not None else None
        if it is None:
            self._note(C.RESP_UNKNOWN_ITEM, "error", f"{t} for output_index {d.get('output_index')!r}, never added")
        return it

    def _item_added(self, d: dict[str, Any], seq: int) -> None:
        oi, item = _int(d.get("output_index")), d.get("item")
        if oi is None or not isinstance(item, dict):
            self._note(D.MALFORMED_EVENT, "error", "output_item.added without output_index or item (ignored)")
            return
        if oi in self.items:
            self._note(D.DUPLICATE_BLOCK_START, "error", f"output_index {oi} added twice (the first kept)")
            return
        it = self.items[oi] = _Item(oi, item)
        kind = item.get("type")
        if kind == "function_call":
            start: dict[str, Any] = {
                "type": "tool_use",
                "id": item.get("call_id"),
                "name": item.get("name"),
                "input": {},
            }
            self._block(it, ("args", 0), start, seq)
            if isinstance(item.get("arguments"), str) and item["arguments"]:
                self._add(it, ("args", 0), "tool_use", item["arguments"], seq)
        elif kind == "custom_tool_call":
            start = {"type": "text", "text": "", "openai": "custom_tool_call", "name": item.get("name")}
            start["call_id"] = item.get("call_id")
            self._block(it, ("args", 0), start, seq)
            if isinstance(item.get("input"), str) and item["input"]:
                self._add(it, ("args", 0), "custom", item["input"], seq)

    def _part_added(self, t: str, d: dict[str, Any], seq: int) -> None:
        it = self._item_for(d, t)
        p = d.get("part")
        if it is None or not isinstance(p, dict):
            return
        if t == "response.content_part.added":
            ptype = p.get("type")
            if ptype == "reasoning_text":
                key, kind = ("reasoning", _int(d.get("content_index"))), "thinking"
            else:
                key, kind = ("content", _int(d.get("content_index"))), "refusal" if ptype == "refusal" else "text"
            text = p.get("refusal") if ptype == "refusal" else p.get("text")
        else:
            key, kind, text = ("summary", _int(d.get("summary_index"))), "thinking", p.get("text")
        if key not in it.blocks:
            self._block(it, key, _start(kind), seq)
        if isinstance(text, str) and text:
            self._add(it, key, kind, text, seq)

    def _block(self, it: _Item, key: _Key, start: dict[str, Any], seq: int) -> int:
        start["output_index"] = it.output_index
        i = it.blocks[key] = self._open(start, seq)
        it.texts[key] = []
        return i

    def _add(self, it: _Item, key: _Key, kind: str, text: str, seq: int) -> None:
        i = it.blocks.get(key)
        if i is None:  # a delta with no part added before it: the part is opened here, and that is said
            self._note(
                C.RESP_UNKNOWN_ITEM,
                "warning",
                f"a {kind} delta for part {key} of output {it.output_index}, never added",
            )
            i = self._block(it, key, _start(kind), seq)
        b = self.assembler.blocks[i]
        if b.closed:
            self._note(
                D.DELTA_AFTER_STOP, "error", f"a delta for part {key} of output {it.output_index} after its .done"
            )
            return
        it.texts[key].append(text)
        if text:
            self._fragment(
                i, "tool_use" if kind == "tool_use" else "thinking" if kind == "thinking" else "text", text, seq
            )

    def _done_text(self, it: _Item, key: _Key, kind: str, whole: Any, t: str, seq: int) -> None:
        i = it.blocks.get(key)
        got = "".join(it.texts.get(key, []))
        if isinstance(whole, str):
            if i is None or (not got and whole):
                if whole:
                    self._note(
                        C.RESP_DONE_WITHOUT_DELTAS, "info", f"{t} carries the whole value with no delta before it"
                    )
                self._add(it, key, kind, whole, seq)
                i = it.blocks.get(key)
            elif whole != got:
                self._note(
                    C.RESP_DONE_MISMATCH,
                    "error" if kind == "tool_use" else "warning",
                    f"{t}: its value ({len(whole)} chars) differs from the joined deltas ({len(got)} chars); "
                    "the block keeps what streamed",
                    i,
                    raw=whole.encode()[:4096],
                )
        if i is not None and not self.assembler.blocks[i].closed:
            self._close(i, seq)

    def _item_done(self, d: dict[str, Any], seq: int) -> None:
        oi, item = _int(d.get("output_index")), d.get("item")
        it = self.items.get(oi) if oi is not None else None
        if it is None or not isinstance(item, dict):
            self._note(
                C.RESP_UNKNOWN_ITEM,
                "error",
                f"output_item.done for output_index {d.get('output_index')!r}, never added",
            )
            return
        for k in ("type", "id", "call_id"):
            if item.get(k) != it.item.get(k) and (k != "id" or it.item.get(k) is not None):
                self._note(
                    C.RESP_ID_CHANGED,
                    "warning",
                    f"output {oi}: {k} {item.get(k)!r} at output_item.done, {it.item.get(k)!r} when added "
                    "(the block keeps the first; the SDK rejects the stream)",
                )
        if item.get("type") == "function_call":
            self._done_text(it, ("args", 0), "tool_use", item.get("arguments"), "output_item.done", seq)
        elif item.get("type") == "custom_tool_call":
            self._done_text(it, ("args", 0), "custom", item.get("input"), "output_item.done", seq)
        it.item = item
        it.done = True
        for i in sorted(it.blocks.values()):
            if not self.assembler.blocks[i].closed:
                self._close(i, seq)

    def _terminal(self, t: str, d: dict[str, Any], seq: int) -> None:
        r = d.get("response")
        if not isinstance(r, dict):
            self._note(D.MALFORMED_EVENT, "error", f"{t} without a response object")
            r = {}
        self._check_id(r)
        self._check_output(r)
        self.response = r
        self.terminal = t.removeprefix("response.")
        nu = neutral_usage(r["usage"] if isinstance(r.get("usage"), dict) else {})
        for diag in check_usage(r.get("usage"), "response.usage", self._sse.seq if self._sse else -1):
            self._note(diag.code, diag.severity, diag.message, raw=diag.raw)  # (not a count: the usage is unknown)
        if t == "response.failed":
            err: dict[str, Any] = r["error"] if isinstance(r.get("error"), dict) else {}
            code, message = err.get("code") or "failed", err.get("message") or "response.failed"
            self._note(C.RESP_FAILED, "error", f"response.failed: {code}: {message}")
            self._emit(ErrorEvent(str(code), str(message), err, seq))
            return
        has_tool = any(it.item.get("type") == "function_call" for it in self.items.values())
        if t == "response.incomplete":
            det: dict[str, Any] = r["incomplete_details"] if isinstance(r.get("incomplete_details"), dict) else {}
            reason = det.get("reason")
            reason = reason if isinstance(reason, str) else None
            self._note(C.RESP_INCOMPLETE, "warning", f"response.incomplete: {reason or 'no reason given'}")
            stop = _INCOMPLETE.get(reason, reason) if reason else "incomplete"
        else:
            stop = "tool_use" if has_tool else "end_turn"
        self._emit(MessageDelta({"stop_reason": stop}, nu, seq))
        self._emit(MessageStop(seq))

    # --- the end ---------------------------------------------------------------------------------------------
    def _end(self) -> None:
        if self.terminal is None and not self.errored and self.decoder.events_dispatched:
            self._note(
                C.RESP_NO_TERMINAL,
                "error",
                "the stream ended without response.completed / incomplete / failed",
                seq=None,
            )

    # --- results ---------------------------------------------------------------------------------------------
    def final_object(self) -> dict[str, Any]:
        r: dict[str, Any] = dict(self.response) if self.response is not None else {"object": "response", "id": None}
        # (as the SDK: a terminal response's output is taken as sent; only a missing one is recovered)
        if r.get("output") is None or self.terminal is None:
            r["output"] = [self._folded(it) for _, it in sorted(self.items.items())]
        if self.terminal is None and self.assembler.error is not None:
            r["error"] = self.assembler.error.error
        return r

    def _folded(self, it: _Item) -> dict[str, Any]:
        """An item as the stream gave it: its done item, else its added item with what streamed."""
        if it.done:
            return it.item
        item = dict(it.item)
        if item.get("type") == "function_call":
            item["arguments"] = "".join(it.texts.get(("args", 0), []))
        elif item.get("type") == "custom_tool_call":
            item["input"] = "".join(it.texts.get(("args", 0), []))
        elif item.get("type") == "message":
            parts = []
            for key, texts in sorted(it.texts.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
                if key[0] == "content":
                    parts.append({"type": "output_text", "text": "".join(texts), "annotations": []})
            item["content"] = parts
        return item


def _start(kind: str) -> dict[str, Any]:
    if kind == "thinking":
        return {"type": "thinking", "thinking": ""}
    start = {"type": "text", "text": ""}
    if kind == "refusal":
        start["openai"] = "refusal"
    elif kind == "custom":
        start["openai"] = "custom_tool_call"
    return start


def neutral_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A response's usage as the neutral message keeps it (the streamed terminal event's, and dump's of a
    non-streamed response): the token counts and their details (cached and reasoning counts, for accounting)."""
    nu: dict[str, Any] = {}
    # (kept as sent, also when they are not counts: the accounting then says the usage is unknown, never 0)
    if usage.get("input_tokens") is not None:
        nu["input_tokens"] = usage["input_tokens"]
    if usage.get("output_tokens") is not None:
        nu["output_tokens"] = usage["output_tokens"]
    for k in ("input_tokens_details", "output_tokens_details"):
        if isinstance(usage.get(k), dict):
            nu[k] = dict(usage[k])
    return nu

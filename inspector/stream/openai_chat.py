"""OpenAI Chat Completions streams (`chat.completion.chunk`) into the neutral steps (see openai_common).

Per choice, each kind of content is a block, numbered in arrival order across the stream: `content` a text block,
`refusal` a text block marked `"openai": "refusal"`, `reasoning_content` / `reasoning` a thinking block, each tool
call (by its `index`) a `tool_use` block. Every block of a choice closes when the choice's `finish_reason` arrives:
that is when a tool call is complete and its arguments are parsed, once. `data: [DONE]` ends the message.

Compatible servers' quirks are named (docs/openai.md), never repaired silently: a tool delta without `index` (joined
to the call it continues, or a new one when it carries a new id), `id` / `name` repeated on every chunk (the first
is kept: the SDK joins them into "00" and a doubled name), `"type": null` later (ignored: the SDK erases the type),
an index that starts at 1, usage on non-final chunks, `choices: []` without usage, no `[DONE]`, `reasoning_content`,
and a top-level `error` object mid-stream with HTTP 200.

`final_object()` is the `chat.completion` the openai SDK's `ChatCompletionStreamState` accumulates (`choices` with
`message.content` / `refusal` / `tool_calls`), except where the SDK is wrong (the doubled ids and names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from orjson import JSONDecodeError
from orjson import loads as _loads

from inspector.core import exactjson
from inspector.core.wire import chat_call_slot
from inspector.stream import diagnostics as D
from inspector.stream import openai_common as C
from inspector.stream.diagnostics import Severity
from inspector.stream.openai_common import FragmentPath, NeutralStream, OpenAIEvent, loads_object
from inspector.stream.protocol import ErrorEvent, MessageDelta, MessageStart, MessageStop, check_usage
from inspector.stream.sse import SSEEvent

CHUNK = "chat.completion.chunk"
# finish_reason -> the neutral stop_reason (the outcome rules are Anthropic's: docs/outcomes.md)
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_FOLDED = frozenset(
    {"role", "content", "refusal", "tool_calls", "function_call", "reasoning_content", "reasoning", "obfuscation"}
)


@dataclass(slots=True)
class _Tool:
    block: int
    id: str | None = None
    name: str | None = None
    type: str | None = None
    args: list[str] = field(default_factory=list)
    repeated_id: bool = False
    repeated_name: bool = False


@dataclass(slots=True)
class _Choice:
    index: int
    role: str | None = None
    content: list[str] | None = None  # None: no `content` string seen (the SDK's null)
    refusal: list[str] | None = None
    reasoning: list[str] | None = None
    reasoning_key: str = "reasoning_content"
    blocks: dict[str, int] = field(default_factory=dict)  # "text" / "refusal" / "thinking" -> block index
    tools: dict[int, _Tool] = field(default_factory=dict)
    last_tool: int | None = None
    function_call: _Tool | None = None  # the deprecated `function_call` delta (no id: the legacy API has none)
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other delta fields, accumulated as the SDK does


class ChatStream(NeutralStream):
    family = "openai_chat"
    block_end = "a finish_reason that completes it"
    message_end = "data: [DONE] after every choice's finish_reason"

    def _init_stream(self) -> None:
        """This family's per-stream state (TurnStream.__init__ calls it last)."""
        super()._init_stream()
        self.head: dict[str, Any] = {}  # id, created, model, system_fingerprint, service_tier (first non-null)
        self.choices: dict[int, _Choice] = {}
        self.usage: dict[str, Any] | None = None
        self.done = False  # data: [DONE] seen
        self.errored = False
        self._said: set[str] = set()  # codes said once per stream

    def _once(self, code: str, severity: Severity, message: str, block: int | None = None) -> None:
        if code not in self._said:
            self._said.add(code)
            self._note(code, severity, message, block)

    # --- one SSE event ---------------------------------------------------------------------------------------
    def _event(self, e: SSEEvent) -> None:
        data = e.data
        if data.startswith("[DONE]"):
            self._done_marker(e)
            return
        if self.done or self.errored:
            self._after_end("an event")
            return
        c, bad = loads_object(e)
        if c is None:
            assert bad is not None
            self._invalid(e, bad)
            return
        err = c.get("error")
        if err or c.get("object") == "error":
            self._error(c, err)
            return
        obj = c.get("object")
        if obj is not None and obj != CHUNK:
            self._note(
                C.CHAT_NOT_A_CHUNK,
                "info",
                f"object {obj!r}, not {CHUNK}: not folded (the SDK's stream() skips it too)",
            )
            self._emit(OpenAIEvent(str(obj), c, e.seq))
            return
        seq = e.seq
        if not self.assembler.started:
            for k in ("id", "model"):
                if not isinstance(c.get(k), str) and c.get(k) is not None:
                    self._note(D.WRONG_TYPE, "warning", f"chunk {k} is not a string (kept as sent)")
            self._emit(
                MessageStart(
                    {
                        "id": c.get("id"),
                        "type": "message",
                        "role": "assistant",
                        "model": c.get("model"),
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {},
                    },
                    seq,
                )
            )
        self._head(c)
        choices = c.get("choices")
        usage = c.get("usage")
        if not isinstance(choices, list):
            self._note(D.WRONG_TYPE, "error", "chunk `choices` is not a list (not folded)", raw=data.encode()[:4096])
            choices = []
        if not choices and not isinstance(usage, dict):
            self._note(C.CHAT_EMPTY_CHOICES, "info", "a chunk with `choices: []` and no usage (Azure content filter?)")
        if isinstance(usage, dict) and choices:
            self._once(C.CHAT_USAGE_NOT_FINAL, "info", "usage on a chunk that still carries choices (kept: the last)")
        for ch in choices:
            if not isinstance(ch, dict):
                self._note(D.WRONG_TYPE, "error", "a choice is not an object (not folded)")
                continue
            self._choice(ch, seq)
        if isinstance(usage, dict):
            self.usage = usage
            for d in check_usage(usage, "usage", seq):  # (a count that is not one: the usage is unknown, said)
                self._note(d.code, d.severity, d.message, raw=d.raw)
            self._emit(MessageDelta({"stop_reason": self._stop_reason()}, neutral_usage(usage), seq))

    def _take(self, e: SSEEvent) -> tuple[int, str, str] | None:
        """The common chunk, by a shorter way (NeutralStream._take): a chunk object (no `error`, no usage) after the
        first, of one choice with no finish_reason and no logprobs, whose delta is only a non-empty `content`
        fragment for its open text block or only a non-empty `arguments` fragment for a known tool call."""
        if self.done or self.errored or not self.assembler.started:
            return None
        try:
            c = _loads(e.data)
        except JSONDecodeError:
            return None
        if c.__class__ is not dict or c.get("error") or c.get("usage") is not None:
            return None
        obj = c.get("object")
        if obj is not None and obj != CHUNK:
            return None
        choices = c.get("choices")
        if choices.__class__ is not list or len(choices) != 1:
            return None
        ch = choices[0]
        if ch.__class__ is not dict or ch.get("finish_reason") is not None or ch.get("logprobs") is not None:
            return None
        idx = ch.get("index")
        st = self.choices.get(idx) if idx.__class__ is int else None
        delta = ch.get("delta")
        if st is None or st.finish_reason is not None or delta.__class__ is not dict or len(delta) != 1:
            return None
        content = delta.get("content")
        if content is not None:
            i = st.blocks.get("text")
            if content.__class__ is not str or not content or i is None or st.content is None:
                return None
            st.content.append(content)
            self._took = st.content
            self._head(c)
            return i, "text", content
        tcs = delta.get("tool_calls")
        if tcs.__class__ is not list or len(tcs) != 1:
            return None
        tc = tcs[0]
        if tc.__class__ is not dict or len(tc) != 2:
            return None
        fn = tc.get("function")
        ti = tc.get("index")
        tool = st.tools.get(ti) if ti.__class__ is int else None
        if tool is None or fn.__class__ is not dict or len(fn) != 1:
            return None
        content = fn.get("arguments")
        if content.__class__ is not str or not content:
            return None
        st.last_tool = ti
        tool.args.append(content)
        self._took = tool.args
        self._head(c)
        return tool.block, "tool_use", content

    def _shape(self, e: SSEEvent) -> tuple[dict[str, Any], FragmentPath, str | None, str | None] | None:
        c = _loads(e.data)
        free = "obfuscation" if c.get("obfuscation").__class__ is str else None  # (OpenAI's, on every chunk)
        if "content" in c["choices"][0]["delta"]:
            return c, ("choices", 0, "delta", "content"), None, free
        return c, ("choices", 0, "delta", "tool_calls", 0, "function", "arguments"), None, free

    def _take_same(self, texts: list[str], counter: int | None) -> None:
        # (the head, the choice and its last tool call are those of the chunk taken last: nothing else changes)
        self._took.extend(texts)

    def _head(self, c: dict[str, Any]) -> None:
        head = self.head
        if len(head) < 5:
            for k in ("id", "created", "model", "system_fingerprint", "service_tier"):
                if head.get(k) is None and c.get(k) is not None:
                    head[k] = c[k]

    def _done_marker(self, e: SSEEvent) -> None:
        if self.done:
            self._note(C.DONE_MARKER, "warning", "a second data: [DONE] (ignored)")
            return
        self.done = True
        if e.data.strip() != "[DONE]":
            self._note(C.DONE_MARKER, "info", f"data {e.data[:40]!r} taken as [DONE] (as the SDK does)")
        if self.errored:
            return
        if not self.choices:
            self._note(C.CHAT_NOT_FINISHED, "error", "data: [DONE] but no choice came: the message is incomplete")
            self._emit(OpenAIEvent("[DONE]", None, e.seq))
            return
        open_ = [ch for _, ch in sorted(self.choices.items()) if ch.finish_reason is None]
        if open_:
            # the server ended the stream on purpose but never said why (Snowflake Cortex): the choices end here
            self._note(
                C.CHAT_NO_FINISH_REASON,
                "warning",
                f"data: [DONE] but choice(s) {[ch.index for ch in open_]} had no finish_reason: they end at [DONE]",
            )
            for ch in open_:
                self._end_choice(ch, e.seq)
            self._emit(MessageDelta({"stop_reason": self._stop_reason()}, {}, e.seq))
        self._emit(MessageStop(e.seq))

    def _error(self, c: dict[str, Any], err: Any) -> None:
        self.errored = True
        if isinstance(err, dict):
            etype = err.get("type") or err.get("code")
            message = err.get("message")
        else:
            etype, message = c.get("type") or c.get("code"), c.get("message") if err is None else err
        etype = str(etype) if etype is not None else "error"
        message = str(message) if message is not None else "An error occurred during streaming"
        self._note(C.ERROR_IN_STREAM, "error", f"error object in the stream (HTTP 200): {etype}: {message}")
        self._emit(ErrorEvent(etype, message, err if isinstance(err, dict) else c, self._sse.seq if self._sse else -1))

    # --- one choice of a chunk -------------------------------------------------------------------------------
    def _choice(self, ch: dict[str, Any], seq: int) -> None:
        idx = ch.get("index")
        if not isinstance(idx, int) or isinstance(idx, bool):
            self._note(D.WRONG_TYPE, "warning", f"choice index {idx!r} is not an integer: taken as 0")
            idx = 0
        st = self.choices.get(idx)
        if st is None:
            st = self.choices[idx] = _Choice(idx)
        delta = ch.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            self._note(D.WRONG_TYPE, "error", f"choice {idx}: delta is not an object (not folded)")
            delta = {}
        if st.finish_reason is not None and any(delta.get(k) for k in ("content", "refusal", "tool_calls")):
            self._note(C.CHAT_DELTA_AFTER_FINISH, "error", f"choice {idx}: content after its finish_reason (ignored)")
            return
        role = delta.get("role")
        if isinstance(role, str) and st.role is None:
            st.role = role
        for key in ("reasoning_content", "reasoning"):
            v = delta.get(key)
            if isinstance(v, str):
                self._once(C.CHAT_REASONING, "info", f"`{key}` deltas (not an OpenAI field): shown as thinking")
                st.reasoning_key = key
                self._text(st, "thinking", v, seq)
        v = delta.get("content")
        if isinstance(v, str):
            self._text(st, "text", v, seq)
        elif v is not None:
            self._unfolded(st, "content", v)
        v = delta.get("refusal")
        if isinstance(v, str):
            self._text(st, "refusal", v, seq)
        tcs = delta.get("tool_calls")
        if isinstance(tcs, list):
            for tc in tcs:
                if isinstance(tc, dict):
                    self._tool(st, tc, seq)
                else:
                    self._note(D.WRONG_TYPE, "error", f"choice {idx}: a tool call delta is not an object (ignored)")
        elif tcs is not None:
            self._note(D.WRONG_TYPE, "error", f"choice {idx}: tool_calls is not a list (ignored)")
        fc = delta.get("function_call")
        if isinstance(fc, dict):
            self._function_call(st, fc, seq)
        elif fc is not None:
            self._note(D.WRONG_TYPE, "error", f"choice {idx}: function_call is not an object (ignored)")
        for k, v in delta.items():
            if k not in _FOLDED and v is not None:
                self._unfolded(st, k, v)
        lp = ch.get("logprobs")
        if isinstance(lp, dict):
            self._logprobs(st, lp)
        fr = ch.get("finish_reason")
        if fr is not None:
            if not isinstance(fr, str):
                self._note(D.WRONG_TYPE, "warning", f"choice {idx}: finish_reason {fr!r} is not a string")
                fr = str(fr)
            if st.finish_reason is None:
                self._finish(st, fr, seq)

    def _text(self, st: _Choice, kind: str, text: str, seq: int) -> None:
        parts = {"text": "content", "refusal": "refusal", "thinking": "reasoning"}[kind]
        acc = getattr(st, parts)
        if acc is None:
            acc = []
            setattr(st, parts, acc)
        if not text:
            return
        acc.append(text)
        i = st.blocks.get(kind)
        if i is None:
            start: dict[str, Any] = (
                {"type": "thinking", "thinking": ""} if kind == "thinking" else {"type": "text", "text": ""}
            )
            if kind == "refusal":
                start["openai"] = "refusal"
            start["choice"] = st.index
            i = st.blocks[kind] = self._open(start, seq)
        self._fragment(i, kind, text, seq)

    def _tool(self, st: _Choice, tc: dict[str, Any], seq: int) -> None:
        ti = tc.get("index")
        tid = tc.get("id")
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name, args = fn.get("name"), fn.get("arguments")
        ti, placed = chat_call_slot(ti, tid, st.last_tool, {k: t.id for k, t in st.tools.items()})
        if placed:
            new = ti not in st.tools
            self._note(
                C.CHAT_TOOL_NO_INDEX,
                "warning",
                f"choice {st.index}: a tool-call delta without `index` (the SDK fails): taken as tool call {ti}"
                + (" (a new call)" if new else " (continues the last one)"),
            )
        tool = st.tools.get(ti)
        if tool is None:
            expected = len(st.tools)
            if ti != expected:
                self._note(
                    C.CHAT_TOOL_INDEX_GAP,
                    "warning",
                    f"choice {st.index}: tool call index {ti}, expected {expected} (the SDK misplaces it)",
                )
            first_id = tid if isinstance(tid, str) and tid else None
            first_name = name if isinstance(name, str) and name else None
            start: dict[str, Any] = {
                "type": "tool_use",
                "id": first_id,
                "name": first_name,
                "input": {},
                "choice": st.index,
            }
            tool = st.tools[ti] = _Tool(self._open(start, seq), first_id, first_name)
            tool.type = tc.get("type") if isinstance(tc.get("type"), str) else None
            st.last_tool = ti
            if tool.id and tool.name and isinstance(args, str) and args and _is_object(args):
                self._note(C.CHAT_TOOL_WHOLE, "info", f"tool call {ti} ({tool.name}) came whole in one chunk")
        else:
            st.last_tool = ti
            block = self.assembler.blocks[tool.block]
            if isinstance(tid, str) and tid:
                if tool.id is None:
                    tool.id = block.start["id"] = tid
                elif tid == tool.id:
                    if not tool.repeated_id:
                        tool.repeated_id = True
                        self._note(
                            C.CHAT_TOOL_ID_REPEATED,
                            "info",
                            f"tool call {ti}: id sent again on a later delta (the first kept; the SDK joins them)",
                            tool.block,
                        )
                else:
                    self._note(
                        C.CHAT_TOOL_ID_CHANGED,
                        "warning",
                        f"tool call {ti}: id {tid!r} after {tool.id!r} (the first kept)",
                        tool.block,
                    )
            if isinstance(name, str) and name:
                if tool.name is None:
                    tool.name = block.start["name"] = name
                elif not tool.repeated_name:
                    tool.repeated_name = True
                    self._note(
                        C.CHAT_TOOL_NAME_REPEATED,
                        "info",
                        f"tool call {ti}: name {name!r} sent again (the first kept; the SDK joins them)",
                        tool.block,
                    )
            if "type" in tc:
                t = tc["type"]
                if t is None and tool.type is not None:
                    self._note(
                        C.CHAT_TOOL_TYPE_NULL, "info", f"tool call {ti}: `type: null` on a later delta (ignored)"
                    )
                elif isinstance(t, str) and tool.type is None:
                    tool.type = t
        if args is None:
            return
        if not isinstance(args, str):
            self._note(
                D.WRONG_TYPE,
                "warning",
                f"tool call {ti}: arguments is a JSON {type(args).__name__}, not a string: its JSON text is used",
                tool.block,
            )
            args = orjson.dumps(args).decode()
        if args:
            tool.args.append(args)
            self._fragment(tool.block, "tool_use", args, seq)

    def _function_call(self, st: _Choice, fc: dict[str, Any], seq: int) -> None:
        """The deprecated `function_call` delta: one call per choice, a tool_use block marked
        `"openai": "function_call"` (no id)."""
        name, args = fc.get("name"), fc.get("arguments")
        call = st.function_call
        if call is None:
            first = name if isinstance(name, str) and name else None
            start: dict[str, Any] = {"type": "tool_use", "id": None, "name": first, "input": {}, "choice": st.index}
            start["openai"] = "function_call"
            call = st.function_call = _Tool(self._open(start, seq), None, first, "function")
        elif isinstance(name, str) and name:
            if call.name is None:
                call.name = self.assembler.blocks[call.block].start["name"] = name
            elif not call.repeated_name:
                call.repeated_name = True
                self._note(
                    C.CHAT_TOOL_NAME_REPEATED, "info", f"function_call name {name!r} sent again (the first kept)"
                )
        if isinstance(args, str) and args:
            call.args.append(args)
            self._fragment(call.block, "tool_use", args, seq)
        elif args is not None and not isinstance(args, str):
            self._note(D.WRONG_TYPE, "warning", "function_call arguments is not a string (ignored)", call.block)

    def _unfolded(self, st: _Choice, key: str, v: Any) -> None:
        if key not in self._said:
            self._said.add(key)
            self._note(C.CHAT_UNFOLDED_FIELD, "info", f"delta field `{key}` is not folded into blocks (kept as sent)")
        cur = st.extra.get(key)
        if isinstance(cur, str) and isinstance(v, str):
            st.extra[key] = cur + v
        elif isinstance(cur, list) and isinstance(v, list):
            cur.extend(v)
        else:
            st.extra[key] = v

    def _logprobs(self, st: _Choice, lp: dict[str, Any]) -> None:
        if st.logprobs is None:
            st.logprobs = {"content": None, "refusal": None}
        for k in ("content", "refusal"):
            v = lp.get(k)
            if isinstance(v, list) and v:
                cur = st.logprobs.get(k)
                st.logprobs[k] = (cur or []) + v

    def _finish(self, st: _Choice, fr: str, seq: int) -> None:
        st.finish_reason = fr
        self._end_choice(st, seq, cut=fr == "length")
        self._emit(MessageDelta({"stop_reason": self._stop_reason()}, {}, seq))

    def _end_choice(self, st: _Choice, seq: int, cut: bool = False) -> None:
        """Close the choice's blocks (its tool calls are parsed now, once). ``cut``: the token limit ended the choice
        (``finish_reason: length``): its tool calls stay open, as an Anthropic tool_use block cut by max_tokens and a
        Responses call without its .done do (`protocol.block_not_closed`, a warning: "its tool will not run"), not
        parsed as if they were complete."""
        blocks = list(st.blocks.values())
        if not cut:
            blocks += [t.block for t in st.tools.values()]
            if st.function_call is not None:
                blocks.append(st.function_call.block)
        blocks.sort()
        for i in blocks:
            b = self.assembler.blocks.get(i)
            if b is not None and not b.closed:
                self._close(i, seq)
        for ti, tool in sorted(st.tools.items()):
            if tool.id is None:
                self._note(
                    C.CHAT_TOOL_NO_ID, "warning", f"choice {st.index}: tool call {ti} never got an id", tool.block
                )

    def _stop_reason(self) -> str | None:
        reasons = [ch.finish_reason for _, ch in sorted(self.choices.items()) if ch.finish_reason is not None]
        if not reasons:
            return None
        for fr in ("tool_calls", "function_call", "length"):
            if fr in reasons:
                return STOP_REASONS[fr]
        return STOP_REASONS.get(reasons[0], reasons[0])

    # --- the end ---------------------------------------------------------------------------------------------
    def _end(self) -> None:
        if self.done or self.errored:
            return
        if self.choices and all(ch.finish_reason is not None for ch in self.choices.values()):
            self._note(C.CHAT_NO_DONE, "warning", "the stream ended without data: [DONE] (every choice had finished)")
            self.assembler.feed(MessageStop(self.decoder.events_dispatched))
            return
        open_ = [i for i, ch in sorted(self.choices.items()) if ch.finish_reason is None]
        if open_:
            self._note(
                C.CHAT_NOT_FINISHED,
                "error",
                f"the stream ended before the finish_reason of choice(s) {open_}",
                seq=None,
            )

    # --- results ---------------------------------------------------------------------------------------------
    def final_object(self) -> dict[str, Any]:
        choices = []
        for idx, st in sorted(self.choices.items()):
            msg: dict[str, Any] = {
                "role": st.role or "assistant",
                "content": "".join(st.content) if st.content is not None else None,
                "refusal": "".join(st.refusal) if st.refusal is not None else None,
            }
            if st.reasoning is not None:
                msg[st.reasoning_key] = "".join(st.reasoning)
            if st.tools:
                calls = []
                for ti, tool in sorted(st.tools.items()):
                    calls.append(
                        {
                            "index": ti,
                            "id": tool.id,
                            "type": tool.type or "function",
                            "function": {"name": tool.name, "arguments": "".join(tool.args)},
                        }
                    )
                msg["tool_calls"] = calls
            if st.function_call is not None:
                fcall = st.function_call
                msg["function_call"] = {"name": fcall.name, "arguments": "".join(fcall.args)}
            for k, v in st.extra.items():
                msg.setdefault(k, v)
            choices.append({"index": idx, "message": msg, "finish_reason": st.finish_reason, "logprobs": st.logprobs})
        h = self.head
        out = {
            "id": h.get("id"),
            "object": "chat.completion",
            "created": h.get("created"),
            "model": h.get("model"),
            "choices": choices,
            "usage": self.usage,
            "system_fingerprint": h.get("system_fingerprint"),
        }
        if h.get("service_tier") is not None:
            out["service_tier"] = h["service_tier"]
        if self.assembler.error is not None:
            out["error"] = self.assembler.error.error
        return out


def _is_object(text: str) -> bool:
    try:
        return isinstance(exactjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def neutral_usage(u: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion's usage in the neutral names (the streamed usage chunk's, and dump's of a non-streamed one)."""
    out: dict[str, Any] = {}
    # (kept as sent, also when they are not counts: the accounting then says the usage is unknown, never 0)
    if u.get("prompt_tokens") is not None:
        out["input_tokens"] = u["prompt_tokens"]
    if u.get("completion_tokens") is not None:
        out["output_tokens"] = u["completion_tokens"]
    # the cached and reasoning counts, in the Responses API's names (inside input / output, as OpenAI counts them):
    # the cost and cache accounting reads them (observe/usage.from_openai)
    if isinstance(u.get("prompt_tokens_details"), dict):
        out["input_tokens_details"] = dict(u["prompt_tokens_details"])
    if isinstance(u.get("completion_tokens_details"), dict):
        out["output_tokens_details"] = dict(u["completion_tokens_details"])
    return out

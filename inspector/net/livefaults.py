"""Faults in live streams: `inspector proxy --fault ...` (and the ``x-inspector-fault`` header) applies the stream
faults of the `serve` catalogue (:data:`inspector.net.faults.FAULTS`, same names, arguments and docs) to what a real
upstream sends, as transformations of the byte stream on its way to the client.

The SSE events are cut out of upstream's reads as they pass (an event is forwarded once its blank line arrived) and
rewritten, cut or followed by an injected event at the right place. Attempts as on `serve`:

- ``http_429`` / ``http_529``: the first attempt(s) of a turn are answered by the proxy itself (upstream never sees
  them), with ``retry-after`` / ``retry-after-ms`` and an ``api_error``-shaped body; the retry goes upstream.
- transport faults (``error_event``, ``drop_event``, ``drop_byte``, ``stall``): the first attempt that streams.
- content and format faults (``invalid_tool_json``, ``max_tokens_tool``, ``split_events``, ``cr``, ``crlf``,
  ``bom``): every attempt.

Protocol events are counted without pings, from 0 (``at_event`` of the recording's ``fault_injected`` line: the
index of the first event that was changed, cut or inserted). Faults that shape `serve`'s pacing (``slow_drip``,
``relay_buffer``, ``padded``) are not live faults.

OpenAI streams (the request's path: ``/chat/completions``, ``/responses``) get every fault in that family's own
form, as `serve` renders it (``inspector.scenarios.render_openai``): the OpenAI error JSON with ``retry-after``,
``retry-after-ms`` and ``x-should-retry`` (http_429 / http_529); ``data: {"error": ...}`` / ``event: error``
(error_event); SSE comments ``: keep-alive`` for the pings of a stall, which starts after the first event; a tool
call is ``delta.tool_calls[i]`` / a ``function_call`` item (drop_in_tool, invalid_tool_json: its arguments cut in
their last string, in the ``.done`` events and the final response too); max_tokens_tool ends with
``finish_reason: "length"`` and ``data: [DONE]`` / ``response.incomplete`` (``max_output_tokens``). SSE comments
are not protocol events (they are counted as pings).
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from inspector.core.errors import FaultError
from inspector.net.faults import BOM, DROP_IN_TOOL_CUT, DROP_IN_TOOL_FRAGMENTS, FAULTS, FaultSpec, parse_faults
from inspector.scenarios.render import truncate_json
from inspector.scenarios.render_openai import KEEP_ALIVE, chat_error_data, openai_error, responses_error_data

__all__ = [
    "LIVE_FAULTS",
    "InjectedError",
    "LiveFaultSource",
    "LiveFaults",
    "LiveFaultsSpec",
    "LiveStream",
    "RawUpstream",
    "parse_live_faults",
    "run_live",
]

LIVE_FAULTS = (
    "http_429",
    "http_529",
    "error_event",
    "drop_event",
    "drop_in_tool",
    "drop_byte",
    "stall",
    "invalid_tool_json",
    "max_tokens_tool",
    "split_events",
    "cr",
    "crlf",
    "bom",
)
_TRANSPORT = ("error_event", "drop_event", "drop_in_tool", "drop_byte", "stall")
PING_EVENT = b'event: ping\ndata: {"type": "ping"}\n\n'
# as serve's error_event sends it (a real one also has "details": null)
ERROR_EVENT = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
KEEP_ALIVE_EVENT = KEEP_ALIVE + b"\n\n"  # an OpenAI stream's ping (serve's stall pings)
DONE_EVENT = b"data: [DONE]\n\n"
OPENAI = ("openai_chat", "openai_responses")
_RESPONSES_END = ("response.completed", "response.incomplete", "response.failed", "error")
HOLD_WINDOW = 1024 * 1024  # bytes a live fault may hold back (a tool block whose fate is not known yet; one event)
PING_INTERVAL = 0.5  # seconds between the pings of a stall, as on serve (not scaled: a live stream is real time)
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\n\r\n|\r\n\n")


@dataclass(frozen=True, slots=True)
class InjectedError:
    """An HTTP error answered by the proxy instead of forwarding (http_429 / http_529)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    fault: str


class LiveFaultSource(Protocol):
    """What the proxy asks of its live faults (``ProxyApp.faults``, an ``x-inspector-fault`` header's), attempt by
    attempt: falsy when there are none; the HTTP error that answers an attempt instead of upstream; the
    transformation of an attempt's stream. ``family``: the request's wire family; ``turn``: which turn the attempt is
    of (its retries share it; compared with ``==``), for @once faults. :class:`LiveFaults` is the one the proxy uses."""

    def __bool__(self) -> bool: ...

    def http_error(self, attempt: int, family: str = "anthropic", turn: object = None) -> InjectedError | None: ...

    def stream(self, attempt: int, family: str = "anthropic", turn: object = None) -> LiveStream | None: ...


class RawUpstream(Protocol):
    """What :func:`run_live` reads: upstream's answer body, raw (not decoded), as it arrives (an ``httpx2.Response``,
    the proxy's ``UpstreamResponse``)."""

    def aiter_raw(self) -> AsyncIterator[bytes]: ...


class LiveFaults(LiveFaultSource):
    """The chosen live faults; falsy when none."""

    def __init__(self, specs: tuple[FaultSpec, ...]) -> None:
        self.specs = specs
        self.by_name = {f.name: f for f in specs}
        self.http = [f for f in specs if FAULTS[f.name].kind == "http"]
        self.transport = next((f for f in specs if f.name in _TRANSPORT), None)
        # an @once fault (net/faults.py: the default of transport faults) -> the turn that took it: that turn's
        # attempts keep it, no other turn gets it. On a live stream the proxy cannot know in advance whether the
        # stream will reach the fault's point, so the first stream it is applied to takes it (serve, which knows its
        # script, gives it to the first answer it changes)
        self._taken: dict[FaultSpec, object] = {}

    def _applies(self, f: FaultSpec, turn: object) -> bool:
        """Whether ``f`` applies to an attempt of ``turn`` (None: not told, every turn is its own), taking an unspent
        @once fault for that turn."""
        if not f.once:
            return True
        if turn is None:
            turn = object()
        return self._taken.setdefault(f, turn) == turn

    def __bool__(self) -> bool:
        return bool(self.specs)

    def __str__(self) -> str:
        return ",".join(str(f) for f in self.specs) or "none"

    def _http(self, turn: object) -> list[FaultSpec]:
        """The HTTP faults of a turn: each @turn one, and the @once ones this turn took or may still take."""
        return [f for f in self.http if not f.once or self._taken.get(f, turn) == turn]

    def http_error(self, attempt: int, family: str = "anthropic", turn: object = None) -> InjectedError | None:
        """The HTTP error that answers this attempt of a turn, if any (attempts 0.. get them in the order given), in
        the form of the request's wire family (``openai_chat`` / ``openai_responses``: the OpenAI error JSON).
        ``turn``: which turn the attempt is of (its retries share it), for @once faults."""
        http = self._http(turn)
        if attempt >= len(http):
            return None
        f = http[attempt]
        self._applies(f, turn)
        secs = float(f.value or 0.0)
        if family in OPENAI:
            etype = "rate_limit_error" if f.name == "http_429" else "overloaded_error"
            err = openai_error(etype)
            err["message"] += f" (injected by inspector proxy: {f})"
            return InjectedError(
                429 if f.name == "http_429" else 529,
                [
                    ("content-type", "application/json"),
                    ("x-request-id", f"req_inspector_fault_{attempt}"),
                    ("retry-after", f"{secs:g}"),
                    ("retry-after-ms", str(int(round(secs * 1000)))),
                    ("x-should-retry", "true"),
                    ("x-inspector-fault", str(f)),
                ],
                orjson.dumps({"error": err}),
                str(f),
            )
        status, etype, message = (
            (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit.")
            if f.name == "http_429"
            else (529, "overloaded_error", "Overloaded")
        )
        body = orjson.dumps(
            {
                "type": "error",
                "error": {"type": etype, "message": f"{message} (injected by inspector proxy: {f})"},
                "request_id": f"req_inspector_fault_{attempt}",
            }
        )
        headers = [
            ("content-type", "application/json"),
            ("retry-after", f"{secs:g}"),
            ("retry-after-ms", str(int(round(secs * 1000)))),
            ("x-inspector-fault", str(f)),
        ]
        return InjectedError(status, headers, body, str(f))

    def stream(self, attempt: int, family: str = "anthropic", turn: object = None) -> LiveStream | None:
        """The transformation of this attempt's stream (None: forwarded untouched); ``family``: the request's wire
        family (the faults take its form); ``turn``: which turn the attempt is of, for @once faults."""
        t = self.transport
        transport = t if t is not None and attempt == len(self._http(turn)) and self._applies(t, turn) else None
        content = [
            f for f in self.specs if f.name in ("invalid_tool_json", "max_tokens_tool") and self._applies(f, turn)
        ]
        fmt = [f for f in self.specs if f.name in ("split_events", "cr", "crlf", "bom") and self._applies(f, turn)]
        if transport is None and not content and not fmt:
            return None
        return LiveStream(transport, content, fmt, attempt, family)


# what ``inspector proxy --fault`` / ``ProxyApp(faults=...)`` / an ``x-inspector-fault`` header give: the text of
# parse_faults (or its FaultSpecs), or faults already parsed
LiveFaultsSpec = str | FaultSpec | Iterable[str | FaultSpec] | LiveFaults | None


def parse_live_faults(spec: LiveFaultsSpec) -> LiveFaults | None:
    """``"drop_event:5,bom"`` (as ``parse_faults``) -> LiveFaults, None for no fault; FaultError for a fault that
    does not apply to a live stream."""
    if isinstance(spec, LiveFaults):
        return spec or None
    specs = parse_faults(spec)
    for f in specs:
        if f.name not in LIVE_FAULTS:
            raise FaultError(f"fault {f.name} does not apply to a live stream; live faults: {', '.join(LIVE_FAULTS)}")
    return LiveFaults(specs) if specs else None


# =====================================================================================================================
# One stream
# =====================================================================================================================


def _fields(raw: bytes) -> tuple[str, bytes]:
    """(event name, data) of one raw event."""
    name, data = "message", []
    for line in re.split(rb"\r\n|\r|\n", raw):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(b" ") else v)
    return name, b"\n".join(data)


def is_ping(name: str, data: bytes) -> bool:
    """An Anthropic ping or an event without data (an SSE comment such as OpenAI's ``: keep-alive``): not a
    protocol event."""
    return name == "ping" or not data


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(_fields(raw)[1])
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _chat_choice(obj: dict[str, Any]) -> dict[str, Any]:
    choices = obj.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _chat_calls(obj: object) -> list[tuple[int | str, bool, str]]:
    """The tool call entries of a chat chunk's first choice: (index, whether it starts the call (it has an id or a
    name), its arguments fragment)."""
    if not isinstance(obj, dict):
        return []
    delta = _chat_choice(obj).get("delta")
    calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    out: list[tuple[int | str, bool, str]] = []
    for j, c in enumerate(calls if isinstance(calls, list) else ()):
        if not isinstance(c, dict):
            continue
        fn = c.get("function")
        fn = fn if isinstance(fn, dict) else {}
        idx = c.get("index", j)
        idx = idx if isinstance(idx, (int, str)) else repr(idx)
        args = fn.get("arguments")
        out.append((idx, bool(c.get("id") or fn.get("name")), args if isinstance(args, str) else ""))
    return out


def _chat_finish(obj: dict[str, Any]) -> bool:
    return _chat_choice(obj).get("finish_reason") not in (None, "")


def _chat_trim(obj: dict[str, Any], idx: object, args: str) -> dict[str, Any]:
    """The chunk with the arguments of tool call ``idx`` replaced by ``args`` (its first choice)."""
    choice = _chat_choice(obj)
    delta = dict(choice.get("delta") or {})
    calls = []
    for j, c in enumerate(delta.get("tool_calls") or []):
        if isinstance(c, dict) and c.get("index", j) == idx and isinstance(c.get("function"), dict):
            c = {**c, "function": {**c["function"], "arguments": args}}
        calls.append(c)
    delta["tool_calls"] = calls
    return {**obj, "choices": [{**choice, "delta": delta}, *obj["choices"][1:]]}


def _same_call(a: dict[str, Any], b: object) -> bool:
    if not isinstance(b, dict):
        return False
    if a.get("id") is not None and a.get("id") == b.get("id"):
        return True
    return a.get("call_id") is not None and a.get("call_id") == b.get("call_id")


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class LiveStream:
    """Rewrites one live SSE stream on its way to the client (see the module docstring)."""

    def __init__(
        self,
        transport: FaultSpec | None,
        content: list[FaultSpec],
        fmt: list[FaultSpec],
        attempt: int,
        family: str = "anthropic",
    ) -> None:
        self.family = family if family in OPENAI else "anthropic"
        self.transport = transport
        self.content = {f.name: f for f in content}
        self.fmt = {f.name: f for f in fmt}
        self.attempt = attempt
        self.events = 0  # protocol events passed so far (pings not counted)
        self.bytes = 0
        # events held back (a tool block whose fate is not known yet): (name, raw, data: None for a ping)
        self.held: list[tuple[str, bytes, dict[str, Any] | None]] = []
        self.held_bytes = 0  # their size: at most HOLD_WINDOW, else they go out unchanged (see _hold)
        self.notes: list[str] = []  # what the faults could not do (the window passed), for the recording
        self.hold_tool: object = None  # index of the tool block being held, as the wire gave it (None: none)
        self.first_tool_seen = False
        self.marks: list[tuple[str, int | None]] = []  # (fault, at_event) injected
        self.end: str | None = None  # None: go on | complete | drop | hang
        self.formatted = False
        self.tools_started = 0  # drop_in_tool: tool_use blocks started so far
        self.cut_block: object = None  # drop_in_tool: the index (as the wire gave it) of the tool block to break inside
        self.cut_fragments = 0  # drop_in_tool: its input_json_delta fragments passed so far
        self._tool_seen: set[int | str] = set()  # drop_in_tool (chat): the tool call indexes started so far
        # OpenAI: the last Responses sequence_number passed, the Response object of response.created, the items done
        self.seq = -1
        self.response: dict[str, Any] | None = None
        self.done_items: list[dict[str, Any]] = []
        self.template: dict[str, Any] = {}  # chat: the first chunk (id, model... of the chunks the proxy writes)

    # --- output ---------------------------------------------------------------------------------------------------
    def frames(self, raw: bytes) -> list[bytes]:
        if not self.formatted:  # format faults change every event from the first on
            self.formatted = True
            for name in ("split_events", "cr", "crlf"):
                if name in self.fmt:
                    self.mark(name, self.events)
        if "cr" in self.fmt or "crlf" in self.fmt:
            le = b"\r" if "cr" in self.fmt else b"\r\n"
            lines = [ln for ln in re.split(rb"\r\n|\r|\n", raw)]
            while lines and lines[-1] == b"":
                lines.pop()
            raw = le.join(lines) + le + le
        if "split_events" in self.fmt and len(raw) > 1:
            cut = 1 + zlib.crc32(raw) % (len(raw) - 1)
            return [raw[:cut], raw[cut:]]
        return [raw]

    # --- the event rules ------------------------------------------------------------------------------------------
    def mark(self, fault: str, at: int | None) -> None:
        self.marks.append((fault, at))

    def on_event(self, raw: bytes) -> list[bytes]:
        """Events to send for one upstream event (maybe none: held back), in order; sets ``end`` to stop."""
        name, data = _fields(raw)
        if is_ping(name, data):
            return [raw] if not self.held else self._hold(name, raw, None)
        if not self.content:
            return [raw]  # no content fault: the event is not parsed
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        obj = obj if isinstance(obj, dict) else {}
        if self.family == "openai_chat":
            return self._content_chat(raw, obj, data)
        if self.family == "openai_responses":
            return self._content_responses(raw, obj)
        return self._content(name, raw, obj)

    def tool_cut(self, name: str, raw: bytes, k: int) -> bytes | None:
        """drop_in_tool:K: None to pass this event on; else the bytes of it to send before the connection breaks
        (the K-th tool block got its first DROP_IN_TOOL_FRAGMENTS fragments; its JSON is never complete)."""
        if self.family != "anthropic":
            return self._openai_tool_cut(raw, k)
        if name not in ("content_block_start", "content_block_delta", "content_block_stop"):
            return None
        try:
            obj = orjson.loads(_fields(raw)[1])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        if name == "content_block_start":
            cb = obj.get("content_block")
            if isinstance(cb, dict) and cb.get("type") == "tool_use":
                self.tools_started += 1
                if self.tools_started == k:
                    self.cut_block, self.cut_fragments = obj.get("index"), 0
            return None
        if self.cut_block is None or obj.get("index") != self.cut_block:
            return None
        if name == "content_block_delta" and self.cut_fragments < DROP_IN_TOOL_FRAGMENTS:
            self.cut_fragments += 1
            return None
        return raw[: max(1, min(DROP_IN_TOOL_CUT, len(raw) - 1))]

    def _hold(self, name: str, raw: bytes, obj: dict[str, Any] | None) -> list[bytes]:
        """Hold an event back; past ``HOLD_WINDOW`` bytes held, everything held goes out unchanged instead (the
        fault is not applied to this block: an endless or huge tool block must reach the client, and the proxy
        must not grow with it)."""
        self.held.append((name, raw, obj))
        self.held_bytes += len(raw)
        if self.held_bytes <= HOLD_WINDOW:
            return []
        return self._release_held()

    def _release_held(self) -> list[bytes]:
        fault = "max_tokens_tool" if "max_tokens_tool" in self.content else "invalid_tool_json"
        self.notes.append(
            f"{fault}: the tool block passed {HOLD_WINDOW} bytes held back (the live fault's window): forwarded "
            "unchanged"
        )
        out = [r for _, r, _ in self.held]
        self.held, self.held_bytes, self.hold_tool = [], 0, None
        return out

    def _content(self, name: str, raw: bytes, obj: dict[str, Any]) -> list[bytes]:
        cb = obj.get("content_block") if name == "content_block_start" else None
        is_tool_start = isinstance(cb, dict) and cb.get("type") == "tool_use"
        if "max_tokens_tool" in self.content:  # it ends the stream at the first tool block: nothing else applies
            if self.hold_tool is not None:
                if name == "content_block_stop" and obj.get("index") == self.hold_tool:
                    return self._max_tokens_cut()
                return self._hold(name, raw, obj)
            if is_tool_start and not self.first_tool_seen:
                self.first_tool_seen = True
                self.hold_tool = obj.get("index")
                return self._hold(name, raw, obj)
            return [raw]
        if "invalid_tool_json" in self.content:
            if is_tool_start:  # the held tool block was not the last one: it passes unchanged
                out = [r for _, r, _ in self.held]
                self.held, self.held_bytes = [], 0
                self.hold_tool = obj.get("index")
                return out + self._hold(name, raw, obj)
            if self.held and name in ("message_delta", "message_stop", "error"):
                out = self._invalid_json_block()
                return out + [raw]
            if self.held:
                return self._hold(name, raw, obj)
        return [raw]

    def _max_tokens_cut(self) -> list[bytes]:
        """The first tool block: its start and about half of its input deltas, then max_tokens and message_stop."""
        start = self.held[0][1]
        deltas = [(n, r, o) for n, r, o in self.held[1:] if n == "content_block_delta" and o is not None]
        keep = deltas[: (len(deltas) + 1) // 2]  # as serve: about half, rounded up
        at = self.events + 1 + len(keep)  # the first event that is not upstream's
        self.held, self.held_bytes = [], 0
        self.mark("max_tokens_tool", at)
        self.end = "complete"
        usage = {"output_tokens": max(1, len(keep))}
        return [
            start,
            *(r for _, r, _ in keep),
            _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                    "usage": usage,
                },
            ),
            _event("message_stop", {"type": "message_stop"}),
        ]

    def _invalid_json_block(self) -> list[bytes]:
        """The held (last) tool block with its input JSON cut in the middle of its last string."""
        held, self.held, self.held_bytes = self.held, [], 0
        idx = self.hold_tool
        self.hold_tool = None
        parts = []
        for n, _, o in held:
            d = o.get("delta") if o is not None else None
            if n == "content_block_delta" and o is not None and o.get("index") == idx and isinstance(d, dict):
                parts.append(str(d.get("partial_json", "")))
        full = "".join(parts)
        cut = truncate_json(full) if full else ""
        out: list[bytes] = []
        left = len(cut)
        first_changed: int | None = None
        for k, (n, raw, o) in enumerate(held):
            d = o.get("delta") if o is not None else None
            if n == "content_block_delta" and o is not None and o.get("index") == idx and isinstance(d, dict):
                pj = str(d.get("partial_json", ""))
                if left >= len(pj):
                    out.append(raw)
                    left -= len(pj)
                    continue
                if first_changed is None:
                    first_changed = k
                if left > 0:
                    out.append(_event(n, {**o, "delta": {**d, "partial_json": pj[:left]}}))
                    left = 0
                continue
            out.append(raw)
        if full and first_changed is not None:
            self.mark("invalid_tool_json", self.events - len(held) + first_changed)
        return out

    # --- OpenAI -----------------------------------------------------------------------------------------------------
    def _openai_tool_cut(self, raw: bytes, k: int) -> bytes | None:
        """drop_in_tool:K on an OpenAI stream: the K-th tool call (chat ``delta.tool_calls`` index, Responses
        ``function_call`` item) streams DROP_IN_TOOL_FRAGMENTS argument fragments, its start included (it carries
        the empty first one), then part of the next event, as serve renders it."""
        if self.cut_block is not None:  # the fragments of the call being broken
            if self.cut_fragments >= DROP_IN_TOOL_FRAGMENTS:
                return raw[: max(1, min(DROP_IN_TOOL_CUT, len(raw) - 1))]
            self.cut_fragments += 1
            return None
        obj = _json(raw)
        if obj is None:
            return None
        if self.family == "openai_chat":
            for idx, starts, _ in _chat_calls(obj):
                if starts and idx not in self._tool_seen:
                    self._tool_seen.add(idx)
                    self.tools_started += 1
                    if self.tools_started == k:
                        self.cut_block, self.cut_fragments = idx, 1
                        return None
            return None
        item = obj.get("item")
        if obj.get("type") == "response.output_item.added" and isinstance(item, dict):
            if item.get("type") == "function_call":
                self.tools_started += 1
                if self.tools_started == k:
                    self.cut_block, self.cut_fragments = obj.get("output_index", k), 1
        return None

    def _content_chat(self, raw: bytes, obj: dict[str, Any], data: bytes) -> list[bytes]:
        """Content faults on a Chat Completions stream: a chunk of a tool call is held while its fate is unknown."""
        if not self.template and obj.get("object") == "chat.completion.chunk":
            self.template = {k: v for k, v in obj.items() if k not in ("choices", "usage", "obfuscation")}
            if "usage" in obj:
                self.template["usage"] = None
        calls = _chat_calls(obj)
        start = next((idx for idx, starts, _ in calls if starts), None)
        mine = self.hold_tool is not None and any(c[0] == self.hold_tool for c in calls)
        only_mine = mine and all(c[0] == self.hold_tool for c in calls) and not _chat_finish(obj)
        ends = _chat_finish(obj) or data.strip() == b"[DONE]" or "error" in obj
        if "max_tokens_tool" in self.content:
            if self.hold_tool is not None:
                if only_mine and start is None:
                    return self._hold("chunk", raw, obj)
                return self._chat_length_cut()
            if start is not None and not self.first_tool_seen:
                self.first_tool_seen = True
                self.hold_tool = start
                return self._hold("chunk", raw, obj)
            return [raw]
        if "invalid_tool_json" in self.content:
            if start is not None and start != self.hold_tool:  # the held call was not the last one: it passes
                out = [r for _, r, _ in self.held]
                self.held, self.held_bytes = [], 0
                self.hold_tool = start
                return out + self._hold("chunk", raw, obj)
            if self.held and ends:
                return self._chat_invalid_json() + [raw]
            if self.held:
                return self._hold("chunk", raw, obj)
        return [raw]

    def _chat_length_cut(self) -> list[bytes]:
        """max_tokens_tool (chat): the first tool call's start and about half of its argument chunks, then a chunk
        with ``finish_reason: "length"`` and ``data: [DONE]``."""
        start = self.held[0][1]
        frags = [h for h in self.held[1:] if h[0] == "chunk" and h[2] is not None]  # (no pings)
        keep = frags[: (len(frags) + 1) // 2]  # as serve: about half, rounded up
        at = self.events + 1 + len(keep)
        self.held, self.held_bytes, self.hold_tool = [], 0, None
        self.mark("max_tokens_tool", at)
        self.end = "complete"
        chunk = {**self.template, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]}
        if "usage" in self.template:
            chunk["usage"] = None
        return [start, *(r for _, r, _ in keep), b"data: " + orjson.dumps(chunk) + b"\n\n", DONE_EVENT]

    def _chat_invalid_json(self) -> list[bytes]:
        """invalid_tool_json (chat): the held (last) tool call with its arguments cut in their last string."""
        held, self.held, self.held_bytes = self.held, [], 0
        idx, self.hold_tool = self.hold_tool, None
        full = "".join(args for _, _, o in held for i, _, args in _chat_calls(o) if i == idx)
        cut = truncate_json(full) if full else ""
        if not full:
            return [r for _, r, _ in held]
        left = len(cut)
        out: list[bytes] = []
        first_changed: int | None = None
        for k, (_, raw, o) in enumerate(held):
            calls = [c for c in _chat_calls(o) if c[0] == idx]
            args = "".join(a for _, _, a in calls)
            if o is None or left >= len(args):  # (a ping: no call of its own)
                out.append(raw)
                left -= len(args)
                continue
            if first_changed is None:
                first_changed = k
            starts = any(st for _, st, _ in calls)
            if left > 0 or starts:
                out.append(b"data: " + orjson.dumps(_chat_trim(o, idx, args[:left])) + b"\n\n")
                left = 0
        if first_changed is not None:
            self.mark("invalid_tool_json", self.events - len(held) + first_changed)
        return out

    def _content_responses(self, raw: bytes, obj: dict[str, Any]) -> list[bytes]:
        """Content faults on a Responses stream: a function_call item is held while its fate is unknown."""
        kind = obj.get("type")
        item = obj.get("item")
        if kind in ("response.created", "response.in_progress") and isinstance(obj.get("response"), dict):
            self.response = obj["response"]
        if kind == "response.output_item.done" and isinstance(item, dict):
            self.done_items.append(item)
        is_call = (
            kind == "response.output_item.added" and isinstance(item, dict) and item.get("type") == "function_call"
        )
        oi = obj.get("output_index")
        if "max_tokens_tool" in self.content:
            if self.hold_tool is not None:
                if oi == self.hold_tool and kind == "response.function_call_arguments.delta":
                    return self._hold(str(kind), raw, obj)
                return self._responses_incomplete()
            if is_call and not self.first_tool_seen:
                self.first_tool_seen = True
                self.hold_tool = oi
                return self._hold(str(kind), raw, obj)
            return self.pass_seq(raw, obj)
        if "invalid_tool_json" in self.content:
            if is_call:  # the held call was not the last one: it passes unchanged
                out = [r for _, r, _ in self.held]
                self.held, self.held_bytes = [], 0
                self.hold_tool = oi
                return out + self._hold(str(kind), raw, obj)
            if self.held and kind in _RESPONSES_END:
                return self._responses_invalid_json(raw, obj)
            if self.held:
                return self._hold(str(kind), raw, obj)
        return self.pass_seq(raw, obj)

    def pass_seq(self, raw: bytes, obj: dict[str, Any]) -> list[bytes]:
        n = obj.get("sequence_number")
        if isinstance(n, int) and not isinstance(n, bool):
            self.seq = n
        return [raw]

    def _responses_incomplete(self) -> list[bytes]:
        """max_tokens_tool (Responses): the first function_call item's start and about half of its argument
        deltas, then ``response.incomplete`` (``max_output_tokens``) with the items done so far and the cut one."""
        start_raw, start = self.held[0][1], self.held[0][2] or {}  # (the function_call item's start: never a ping)
        kind = "response.function_call_arguments.delta"
        deltas = [(n, r, o) for n, r, o in self.held[1:] if n == kind and o is not None]  # (no pings)
        keep = deltas[: (len(deltas) + 1) // 2]
        at = self.events + 1 + len(keep)
        self.held, self.held_bytes, self.hold_tool = [], 0, None
        self.mark("max_tokens_tool", at)
        self.end = "complete"
        last = keep[-1][2] if keep else start
        seq = last.get("sequence_number")
        seq = seq + 1 if isinstance(seq, int) else at
        args = "".join(str(o.get("delta", "")) for _, _, o in keep)
        item = start.get("item")
        cut_item = {**(item if isinstance(item, dict) else {}), "status": "incomplete", "arguments": args}
        response = dict(self.response or {"object": "response"})
        response.update(
            status="incomplete", incomplete_details={"reason": "max_output_tokens"}, output=[*self.done_items, cut_item]
        )
        ev = {"type": "response.incomplete", "sequence_number": seq, "response": response}
        return [start_raw, *(r for _, r, _ in keep), _event("response.incomplete", ev)]

    def _responses_invalid_json(self, end_raw: bytes, end: dict[str, Any]) -> list[bytes]:
        """invalid_tool_json (Responses): the held (last) function_call item with its arguments cut in their last
        string: its deltas, its ``.done`` events and the final response's output (sequence numbers renumbered).
        When nothing is cut (no arguments), every event goes out as upstream sent it, the end event included."""
        held, self.held, self.held_bytes = self.held, [], 0
        oi, self.hold_tool = self.hold_tool, None
        deltas = [
            o
            for n, _, o in held
            if n == "response.function_call_arguments.delta" and o is not None and o.get("output_index") == oi
        ]
        full = "".join(str(o.get("delta", "")) for o in deltas)
        if not full:  # no deltas (LM Studio): the .done event's arguments
            done = [
                o
                for n, _, o in held
                if n == "response.function_call_arguments.done" and o is not None and o.get("output_index") == oi
            ]
            full = str(done[0].get("arguments", "")) if done else ""
        if not full:
            return [r for _, r, _ in held] + [end_raw]
        cut = truncate_json(full)
        start = held[0][2] or {}  # (the function_call item's start: never a ping)
        call = start.get("item") if isinstance(start.get("item"), dict) else {}
        left = len(cut)
        events: list[tuple[str, dict[str, Any] | None, bytes]] = []
        first_changed: int | None = None
        for k, (n, raw, o) in enumerate(held):
            if not isinstance(o, dict):
                events.append((n, None, raw))
                continue
            if n == "response.function_call_arguments.delta" and o.get("output_index") == oi and deltas:
                piece = str(o.get("delta", ""))
                if left >= len(piece):
                    left -= len(piece)
                    events.append((n, o, raw))
                    continue
                first_changed = k if first_changed is None else first_changed
                if left > 0:
                    events.append((n, {**o, "delta": piece[:left]}, b""))
                    left = 0
                continue
            if (
                n == "response.function_call_arguments.done"
                and o.get("output_index") == oi
                and o.get("arguments") != cut
            ):
                first_changed = k if first_changed is None else first_changed
                events.append((n, {**o, "arguments": cut}, b""))
            elif n == "response.output_item.done" and o.get("output_index") == oi and isinstance(o.get("item"), dict):
                events.append((n, {**o, "item": {**o["item"], "arguments": cut}}, b""))
            else:
                events.append((n, o, raw))
        final = dict(end)
        if isinstance(end.get("response"), dict) and isinstance(end["response"].get("output"), list):
            output = [
                {**it, "arguments": cut}
                if isinstance(it, dict) and it.get("type") == "function_call" and _same_call(it, call)
                else it
                for it in end["response"]["output"]
            ]
            final["response"] = {**end["response"], "output": output}
        events.append((str(end.get("type")), final, b""))
        # sequence numbers stay contiguous (a delta cut away takes its number with it)
        first = held[0][2].get("sequence_number") if isinstance(held[0][2], dict) else None
        out: list[bytes] = []
        for j, (n, o, raw) in enumerate(events):
            if (
                o is not None
                and isinstance(first, int)
                and "sequence_number" in o
                and o["sequence_number"] != first + j
            ):
                o, raw = {**o, "sequence_number": first + j}, b""
            out.append(raw or _event(n, o or {}))
        if first_changed is None:  # (nothing was cut: the fault did not fire, nothing is re-sent)
            return [r for _, r, _ in held] + [end_raw]
        self.mark("invalid_tool_json", self.events - len(held) + first_changed)
        return out


async def run_live(
    stream: LiveStream,
    upstream: RawUpstream,
    emit: Callable[[bytes], Awaitable[object]],
    state: MutableMapping[str, str | None],
    on_mark: Callable[[str, int | None], None],
    on_note: Callable[[str], None] | None = None,
) -> None:
    """Read upstream's stream, transform it and ``await emit(bytes)`` what the client gets; ``state["end"]`` /
    ``state["reason"]`` say how it ended (complete | dropped); a stall never returns (the caller's race ends it).
    ``on_note``: told, once each, what a fault could not do (its window passed). What is held is bounded: an event
    longer than ``HOLD_WINDOW`` bytes goes out as it came (faults do not apply to it), and so does a tool block
    held back past it."""
    import httpx2

    buf = b""
    scanned = 0  # buf[:scanned] holds no event end (a search starts a few bytes before it)
    passing = False  # forwarding an overlong event as it came, up to its end
    t = stream.transport
    marked = 0
    bom = "bom" in stream.fmt
    responses = stream.family == "openai_responses"

    def error_event() -> bytes:
        """error_event's event in the stream's family (as serve renders it)."""
        if stream.family == "openai_chat":
            return b"data: " + orjson.dumps(chat_error_data("overloaded_error")) + b"\n\n"
        if responses:
            return _event(
                "error", responses_error_data("overloaded_error", stream.seq + 1 if stream.seq >= 0 else stream.events)
            )
        return ERROR_EVENT

    async def out(data: bytes) -> bool:
        """Send, honouring drop_byte; False once the stream must stop."""
        nonlocal bom
        if bom:
            bom = False
            stream.mark("bom", 0)
            data = BOM + data
        if t is not None and t.name == "drop_byte":
            limit = int(t.value or 0)
            room = limit - stream.bytes
            if len(data) >= room:
                if room > 0:
                    await emit(data[:room])
                stream.bytes = limit
                stream.mark(str(t), stream.events)
                stream.end = "drop"
                return False
        stream.bytes += len(data)
        await emit(data)
        return True

    async def flush_marks() -> None:
        nonlocal marked
        while marked < len(stream.marks):
            on_mark(*stream.marks[marked])
            marked += 1
        if stream.notes:
            notes, stream.notes = stream.notes, []
            for text in notes:
                if on_note is not None:
                    on_note(text)

    async def handle(raw: bytes) -> bool:
        name, data = _fields(raw)
        protocol = not is_ping(name, data)
        if t is not None and protocol:
            n = int(t.value or 0)
            if t.name == "error_event" and stream.events >= n:
                stream.mark(str(t), stream.events)
                await flush_marks()
                for piece in stream.frames(error_event()):
                    if not await out(piece):
                        return False
                stream.end = "complete"
                return False
            if t.name == "drop_event" and stream.events >= n:
                stream.mark(str(t), stream.events)
                stream.end = "drop"
                return False
            if t.name == "drop_in_tool":
                cut = stream.tool_cut(name, raw, n or 1)
                if cut is not None:
                    stream.mark(str(t), stream.events)
                    await flush_marks()
                    await out(cut)
                    stream.end = "drop"
                    return False
        for ev in stream.on_event(raw):
            for piece in stream.frames(ev):
                if not await out(piece):
                    return False
        if protocol:
            stream.events += 1
            if responses and t is not None and t.name == "error_event":  # the error event takes the next number
                stream.pass_seq(raw, _json(raw) or {})
        await flush_marks()
        if stream.end is not None:
            return False
        started = (name == "message_start") if stream.family == "anthropic" else (protocol and stream.events == 1)
        if t is not None and t.name == "stall" and started:
            stream.mark(str(t), stream.events)
            await flush_marks()
            ping = PING_EVENT if stream.family == "anthropic" else KEEP_ALIVE_EVENT
            for _ in range(int(t.value or 0)):
                await asyncio.sleep(PING_INTERVAL)
                for piece in stream.frames(ping):
                    if not await out(piece):
                        return False
            stream.end = "hang"
            return False
        return True

    try:
        async for chunk in upstream.aiter_raw():
            buf += chunk
            pos = 0  # events are cut out of buf from here (buf is sliced once per read, not once per event)
            go = True
            while go:
                m = _EVENT_END.search(buf, max(pos, scanned - 4))
                if m is None or (m.end() == len(buf) and buf.endswith(b"\r") and not buf.endswith(b"\r\n\r\n")):
                    buf = buf[pos:]
                    scanned = len(buf)
                    if len(buf) > HOLD_WINDOW:  # an event longer than the window: forwarded as it came
                        if not passing:
                            stream.notes.append(
                                f"an event passed {HOLD_WINDOW} bytes: forwarded as it came (live faults not applied "
                                "to it)"
                            )
                            passing = True
                        go = await out(buf[:-4])
                        buf, scanned = buf[-4:], 4
                    break
                raw, pos, scanned = buf[pos : m.end()], m.end(), 0
                if passing:  # the end of the overlong event
                    passing = False
                    go = await out(raw)
                else:
                    go = await handle(raw)
            else:
                buf = buf[pos:]
            await flush_marks()
            if stream.end is not None or not go:
                break
        else:
            for _, raw, _ in stream.held:  # upstream ended with a block still held: it goes out as it came
                await out(raw)
            stream.held = []
            if buf:
                await out(buf)
    except httpx2.HTTPError as e:
        state["end"], state["reason"] = "dropped", f"connection dropped: {type(e).__name__}: {e}"
        return
    await flush_marks()
    if stream.end == "drop":
        state["end"], state["reason"] = "dropped", f"injected {t} (inspector proxy)"
    elif stream.end == "hang":
        await asyncio.Event().wait()  # until the client gives up or the proxy closes

"""Typed Anthropic Messages stream events, parsed from decoded SSE events.

`parse_event` never raises: data that is not JSON becomes an `InvalidEvent` plus a diagnostic; unknown event and
delta types are kept as `UnknownEvent` / `UnknownDelta` with their payload (info diagnostics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import orjson

from inspector.core import exactjson
from inspector.core.fmt import short_text
from inspector.core.wire import USAGE_COUNTS, is_count
from inspector.stream import diagnostics as D
from inspector.stream.diagnostics import Diagnostic

# ---------------------------------------------------------------------------------------------------------- deltas


@dataclass(slots=True)
class TextDelta:
    text: str
    type: str = "text_delta"


@dataclass(slots=True)
class InputJsonDelta:
    partial_json: str
    type: str = "input_json_delta"


@dataclass(slots=True)
class ThinkingDelta:
    thinking: str
    type: str = "thinking_delta"


@dataclass(slots=True)
class SignatureDelta:
    signature: str
    type: str = "signature_delta"


@dataclass(slots=True)
class CitationsDelta:
    citation: Any
    type: str = "citations_delta"


@dataclass(slots=True)
class CompactionDelta:
    """Beta: fills a `compaction` block (the SDK's beta accumulator sets the block's content and encrypted_content
    to the delta's, replacing what was there)."""

    content: Any = None
    encrypted_content: Any = None
    type: str = "compaction_delta"
    extra: dict[str, Any] = field(default_factory=dict)  # other fields the delta carried (kept)


@dataclass(slots=True)
class UnknownDelta:
    type: str
    payload: dict[str, Any]


Delta = Union[TextDelta, InputJsonDelta, ThinkingDelta, SignatureDelta, CitationsDelta, CompactionDelta, UnknownDelta]

# ---------------------------------------------------------------------------------------------------------- events


@dataclass(slots=True)
class MessageStart:
    message: dict[str, Any]
    seq: int = -1
    type: str = "message_start"


@dataclass(slots=True)
class ContentBlockStart:
    index: int
    content_block: dict[str, Any]
    seq: int = -1
    type: str = "content_block_start"


@dataclass(slots=True)
class ContentBlockDelta:
    index: int
    delta: Delta
    seq: int = -1
    type: str = "content_block_delta"


@dataclass(slots=True)
class ContentBlockStop:
    index: int
    seq: int = -1
    type: str = "content_block_stop"


@dataclass(slots=True)
class MessageDelta:
    delta: dict[str, Any]
    usage: dict[str, Any]
    seq: int = -1
    type: str = "message_delta"
    # the event's other top-level fields, as sent (e.g. beta `context_management`, `input_transformations`)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class MessageStop:
    seq: int = -1
    type: str = "message_stop"


@dataclass(slots=True)
class Ping:
    seq: int = -1
    type: str = "ping"


@dataclass(slots=True)
class ErrorEvent:
    error_type: str
    message: str
    error: dict[str, Any] = field(default_factory=dict)
    seq: int = -1
    type: str = "error"


@dataclass(slots=True)
class UnknownEvent:
    """An event type we do not know (kept, with its payload) or a known one missing a field it needs."""

    event_type: str
    payload: Any
    seq: int = -1
    type: str = "unknown"


@dataclass(slots=True)
class InvalidEvent:
    """Event data that is not a JSON object: kept as text."""

    event_name: str
    data: str
    error: str
    seq: int = -1
    type: str = "invalid"


StreamEvent = Union[
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
    Ping,
    ErrorEvent,
    UnknownEvent,
    InvalidEvent,
]

# --- block types: the one home of these sets (the assembler, the fold and the dump summary use them) --------------
# blocks whose input streams as input_json_delta
TOOL_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
KNOWN_BLOCKS = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "mcp_tool_use",
        "mcp_tool_result",
        "compaction",
        "fallback",
        "mcp_tool_listing",
        "advisor_tool_result",
    }
)
# Which delta types feed which block type (others are a delta-type mismatch).
DELTA_FOR_BLOCK = {
    "text": ("text_delta", "citations_delta"),
    "thinking": ("thinking_delta", "signature_delta"),
    "tool_use": ("input_json_delta",),
    "server_tool_use": ("input_json_delta",),
    "mcp_tool_use": ("input_json_delta",),
    "compaction": ("compaction_delta",),
}


KNOWN_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)


def _parse_delta(d: Any) -> Delta | None:
    if not isinstance(d, dict):
        return None
    t = d.get("type")
    try:
        if t == "text_delta":
            v = d["text"]
            return TextDelta(v) if isinstance(v, str) else None
        if t == "input_json_delta":
            v = d["partial_json"]
            return InputJsonDelta(v) if isinstance(v, str) else None
        if t == "thinking_delta":
            v = d["thinking"]
            return ThinkingDelta(v) if isinstance(v, str) else None
        if t == "signature_delta":
            v = d["signature"]
            return SignatureDelta(v) if isinstance(v, str) else None
        if t == "citations_delta":
            return CitationsDelta(d["citation"])
        if t == "compaction_delta":
            return CompactionDelta(
                d.get("content"),
                d.get("encrypted_content"),
                extra={k: v for k, v in d.items() if k not in ("type", "content", "encrypted_content")},
            )
    except KeyError:
        return None
    return UnknownDelta(str(t), d)


# --------------------------------------------------------------------------------------------------- shape checks
# Where bytes become typed events, the fields the engine folds are checked for their JSON type. A wrong type is a
# `protocol.wrong_type` diagnostic (the event keeps the value as sent; the assembler folds only well-typed values),
# never an exception. (type, ...) tuples; None allows null.
_STR, _OPT_STR, _DICT, _OPT_DICT, _LIST, _OPT_LIST = (str,), (str, None), (dict,), (dict, None), (list,), (list, None)
_MESSAGE_FIELDS = {
    "id": _OPT_STR,
    "type": _OPT_STR,
    "role": _OPT_STR,
    "model": _OPT_STR,
    "content": _OPT_LIST,
    "stop_reason": _OPT_STR,
    "stop_sequence": _OPT_STR,
    "usage": _OPT_DICT,
    "container": _OPT_DICT,
}
_TOOL_FIELDS = {"id": _STR, "name": _STR, "input": _DICT}
BLOCK_FIELDS: dict[str, dict[str, tuple[Any, ...]]] = {
    "text": {"text": _STR, "citations": _OPT_LIST},
    "thinking": {"thinking": _STR, "signature": _OPT_STR},
    "redacted_thinking": {"data": _STR},
    "tool_use": _TOOL_FIELDS,
    "server_tool_use": _TOOL_FIELDS,
    "mcp_tool_use": {**_TOOL_FIELDS, "server_name": _STR},
    "compaction": {"content": _OPT_STR, "encrypted_content": _OPT_STR},
}
_DELTA_FIELDS = {"stop_reason": _OPT_STR, "stop_sequence": _OPT_STR, "container": _OPT_DICT}
_JSON_NAMES = {str: "a string", dict: "an object", list: "an array", None: "null"}


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return _JSON_NAMES.get(type(v), type(v).__name__)


def _raw(v: Any) -> bytes:
    try:
        return exactjson.dumps(v)[:4096]
    except TypeError:  # pragma: no cover - parsed JSON always serializes
        return repr(v).encode()[:4096]


def check_fields(
    obj: dict[str, Any], spec: dict[str, tuple[Any, ...]], where: str, seq: int, block: int | None = None
) -> list[Diagnostic]:
    """A `protocol.wrong_type` diagnostic for each field of `obj` present with a JSON type `spec` does not allow."""
    out: list[Diagnostic] = []
    for key, allowed in spec.items():
        if key not in obj:
            continue
        v = obj[key]
        if v is None:
            if None in allowed:
                continue
        elif any(t is not None and isinstance(v, t) and not isinstance(v, bool) for t in allowed):
            continue
        want = " or ".join(_JSON_NAMES[t] for t in allowed)
        out.append(
            Diagnostic(
                D.WRONG_TYPE,
                "error",
                f"{where}.{key} is {_json_type(v)}, expected {want} (kept as sent, not folded)",
                seq,
                block_index=block,
                raw=_raw(v),
            )
        )
    return out


def check_usage(usage: Any, where: str, seq: int) -> list[Diagnostic]:
    """Each token count of a usage object that is not a non-negative integer (a string, a boolean, a float, a
    negative number): ``protocol.wrong_type``, an error; the usage is then unknown (observe/usage.py), never 0."""
    if not isinstance(usage, dict):
        return []
    out: list[Diagnostic] = []
    for key in USAGE_COUNTS:
        v = usage.get(key)
        if v is None or is_count(v):
            continue
        what = "a negative number" if isinstance(v, int) and not isinstance(v, bool) else _json_type(v)
        out.append(
            Diagnostic(
                D.WRONG_TYPE,
                "error",
                f"{where}.{key} is {what}, expected a count (a non-negative integer): the usage is unknown",
                seq,
                raw=_raw(v),
            )
        )
    return out


def check_block(block: dict[str, Any], where: str, seq: int, index: int | None) -> list[Diagnostic]:
    """Field types of one content block (content_block_start's, or one pre-filled in message_start)."""
    out = check_fields(block, BLOCK_FIELDS.get(block.get("type", ""), {}), where, seq, index)
    cits = block.get("citations")
    if block.get("type") == "text" and isinstance(cits, list):
        for k, c in enumerate(cits):
            if not isinstance(c, dict):
                out += check_fields({"x": c}, {"x": _DICT}, f"{where}.citations[{k}]", seq, index)
    return out


def _index(payload: dict[str, Any]) -> int | None:
    i = payload.get("index")
    if isinstance(i, int) and not isinstance(i, bool) and i >= 0:
        return i
    return None


# The hot path: a well-formed text/input_json/thinking/signature delta (almost every event of a stream).
_FAST_DELTAS: dict[str, tuple[Any, str]] = {
    "text_delta": (TextDelta, "text"),
    "input_json_delta": (InputJsonDelta, "partial_json"),
    "thinking_delta": (ThinkingDelta, "thinking"),
    "signature_delta": (SignatureDelta, "signature"),
}
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_UNPARSED: Any = object()  # `payload` not given to _parse_event


def parse_event(event_name: str, data: str, seq: int = -1) -> tuple[StreamEvent, list[Diagnostic]]:
    """Parse one SSE event (its `event:` name and data text) into a typed stream event."""
    try:
        payload = _loads(data)
    except _JSONDecodeError:
        return _parse_event(event_name, data, seq)
    return _parse_event(event_name, data, seq, exactjson.exact(data, payload))  # big integers kept exact


def delta_head(ev: ContentBlockDelta) -> str | None:
    """The text the API writes before the fragment's JSON string in the data of this delta event, e.g.
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":': the same for every delta of a
    block (inspector.stream.fastpath builds on that). None for a delta type not in _FAST_DELTAS."""
    spec = _FAST_DELTAS.get(ev.delta.type)
    if spec is None:
        return None
    return f'{{"type":"content_block_delta","index":{ev.index},"delta":{{"type":"{ev.delta.type}","{spec[1]}":'


def _parse_event(
    event_name: str, data: str, seq: int, payload: Any = _UNPARSED
) -> tuple[StreamEvent, list[Diagnostic]]:
    """The general path. `payload` is `data` already parsed, when the caller did (and it was valid JSON)."""
    diags: list[Diagnostic] = []
    try:
        if payload is _UNPARSED:
            payload = exactjson.loads(data)
    except orjson.JSONDecodeError as e:
        diags.append(
            Diagnostic(
                D.INVALID_EVENT_JSON,
                "error",
                f"event data is not valid JSON ({e.msg} at char {e.pos})",
                seq,
                raw=data.encode("utf-8", "replace"),
            )
        )
        if event_name == "error":
            return _unreadable_error(data, seq, diags)
        return InvalidEvent(event_name, data, str(e), seq), diags
    if not isinstance(payload, dict):
        diags.append(
            Diagnostic(D.INVALID_EVENT_JSON, "error", "event data is JSON but not an object", seq, raw=data.encode())
        )
        if event_name == "error":
            return _unreadable_error(data, seq, diags)
        return InvalidEvent(event_name, data, "not an object", seq), diags

    etype = payload.get("type")
    if not isinstance(etype, str):
        if "type" in payload:
            diags += check_fields(payload, {"type": _STR}, event_name, seq)
        etype = event_name
    elif event_name not in ("message", etype):
        diags.append(
            Diagnostic(
                D.TYPE_MISMATCH,
                "warning",
                f"SSE event name {event_name!r} differs from the data's type {etype!r} (the data's type is used)",
                seq,
            )
        )

    def malformed(what: str) -> tuple[StreamEvent, list[Diagnostic]]:
        diags.append(
            Diagnostic(D.MALFORMED_EVENT, "error", f"{etype} event {what}", seq, raw=data.encode("utf-8", "replace"))
        )
        return UnknownEvent(etype, payload, seq), diags

    if etype == "content_block_delta":
        idx = _index(payload)
        if idx is None:
            return malformed("has no valid index")
        delta = _parse_delta(payload.get("delta"))
        if delta is None:
            return malformed("has a missing or malformed delta")
        if isinstance(delta, UnknownDelta):
            diags.append(
                Diagnostic(D.UNKNOWN_DELTA, "info", f"unknown delta type {delta.type!r} (kept)", seq, block_index=idx)
            )
        elif isinstance(delta, CitationsDelta):
            diags += check_fields({"citation": delta.citation}, {"citation": _DICT}, "citations_delta", seq, idx)
        elif isinstance(delta, CompactionDelta):
            diags += check_fields(
                {"content": delta.content, "encrypted_content": delta.encrypted_content},
                {"content": _OPT_STR, "encrypted_content": _OPT_STR},
                "compaction_delta",
                seq,
                idx,
            )
        return ContentBlockDelta(idx, delta, seq), diags
    if etype == "ping":
        return Ping(seq), diags
    if etype == "content_block_start":
        idx = _index(payload)
        block = payload.get("content_block")
        if idx is None:
            return malformed("has no valid index")
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return malformed("has no content_block with a type")
        diags += check_block(block, "content_block", seq, idx)
        return ContentBlockStart(idx, block, seq), diags
    if etype == "content_block_stop":
        idx = _index(payload)
        if idx is None:
            return malformed("has no valid index")
        return ContentBlockStop(idx, seq), diags
    if etype == "message_start":
        msg = payload.get("message")
        if not isinstance(msg, dict):
            return malformed("has no message object")
        diags += check_fields(msg, _MESSAGE_FIELDS, "message", seq)
        diags += check_usage(msg.get("usage"), "message.usage", seq)
        content = msg.get("content")
        if isinstance(content, list):
            for k, b in enumerate(content):
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    diags.append(
                        Diagnostic(
                            D.WRONG_TYPE,
                            "error",
                            f"message.content[{k}] is not a content block with a type (kept as sent, not folded)",
                            seq,
                            block_index=k,
                            raw=_raw(b),
                        )
                    )
                else:
                    diags += check_block(b, f"message.content[{k}]", seq, k)
        return MessageStart(msg, seq), diags
    if etype == "message_delta":
        delta = payload.get("delta")
        usage = payload.get("usage")
        if not isinstance(delta, dict):
            return malformed("has no delta object")
        diags += check_fields(delta, _DELTA_FIELDS, "delta", seq)
        diags += check_fields(payload, {"usage": _OPT_DICT}, "message_delta", seq)
        diags += check_usage(usage, "message_delta.usage", seq)
        if "usage" in delta:
            diags += check_fields(delta, {"usage": _OPT_DICT}, "delta", seq)
        extra = {k: v for k, v in payload.items() if k not in ("type", "delta", "usage")}
        return MessageDelta(delta, usage if isinstance(usage, dict) else {}, seq, extra=extra), diags
    if etype == "message_stop":
        return MessageStop(seq), diags
    if etype == "error":
        err = payload.get("error")
        if not isinstance(err, dict):
            err = {}
        et = str(err.get("type") or "unknown_error")
        msg = str(err.get("message") or "")
        diags.append(Diagnostic(D.ERROR_EVENT, "error", f"error event: {et}: {msg}".rstrip(": "), seq))
        return ErrorEvent(et, msg, err, seq), diags
    diags.append(Diagnostic(D.UNKNOWN_EVENT, "info", f"unknown event type {etype!r} (kept)", seq))
    return UnknownEvent(etype, payload, seq), diags


def _unreadable_error(data: str, seq: int, diags: list[Diagnostic]) -> tuple[StreamEvent, list[Diagnostic]]:
    """An ``event: error`` whose data is not a JSON object (``data: overloaded``, or none): the SDK raises on it
    (APIStatusError, its message the data), so the stream ended in an error all the same, its message the data."""
    message = data[:200]
    diags.append(Diagnostic(D.ERROR_EVENT, "error", f"error event: unknown_error: {message}".rstrip(": "), seq))
    return ErrorEvent("unknown_error", message, {"message": data} if data else {}, seq), diags


# ---------------------------------------------------------------------------------------------------- error bodies


def parse_error_body(body: bytes) -> tuple[Any, str | None, str | None]:
    """(body as JSON or text, error type, error message) from an API error body (both families' shape:
    ``{"error": {"type": ..., "message": ...}}``)."""
    if not body:
        return None, None, None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace"), None, None
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict):
        etype, msg = err.get("type"), err.get("message")
        return parsed, etype if isinstance(etype, str) else None, msg if isinstance(msg, str) else None
    return parsed, None, None


def error_fields(body: bytes) -> tuple[str | None, str | None]:
    """(type, message) of an API error body; a body that is not JSON: its start as the message."""
    parsed, etype, message = parse_error_body(body)
    if message is None and isinstance(parsed, str) and parsed.strip():
        message = short_text(parsed[:400], 200, ellipsis="...")
    return etype, message


def http_error_text(status: int | None, etype: str | None, message: str | None) -> str:
    """``HTTP 400 invalid_request_error: messages.2: ...``: an answer with an error status, as the loop's recording
    of such a try, ``dump`` and the proxy say it."""
    what = f"HTTP {status} {etype}" if etype else f"HTTP {status}"
    return f"{what}: {message}" if message else what

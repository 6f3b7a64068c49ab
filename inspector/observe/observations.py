"""The one ordered stream of typed observations the agent loop publishes.

The UI, the recorder and the headless printer are subscribers. Every observation carries `t`: seconds since the
loop started, from the loop's injectable clock. UI state is a pure fold over this stream (see `inspector.state.fold`).

Three of them are the turn's outputs a harness must tell apart: `ToolUse` (a complete tool call, emitted at its
block's stop while the stream goes on), `ToolResult` (made by the executor, never by the model) and `TextFinish`
(the turn ended without tool calls: the loop's end).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from inspector.core.redaction import json_clean, mask_bytes, mask_text, redact
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.sse import SSEEvent


@dataclass(frozen=True, slots=True)
class Observation:
    t: float
    kind: ClassVar[str] = "observation"

    def redacted(self, secrets: list[str]) -> Observation:
        """This observation with every secret (an API key) replaced, as it is or JSON-escaped, in every field; itself
        when none occurs. Each observation on its own: for a secret split across reads or deltas, see
        ``inspector.observe.redacting.RedactingPublisher``."""
        if not secrets or json_clean(self, secrets, dataclasses=True):  # (one orjson.dumps: no secret can occur)
            return self
        return self._redacted_fields(secrets)

    def _redacted_fields(self, secrets: list[str]) -> Observation:
        """``redacted`` field by field (what it does when the precheck cannot tell the observation clean)."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None or isinstance(v, (int, float, bool)):
                continue
            if isinstance(v, SSEEvent):
                data = mask_text(v.data, secrets)
                if data != v.data:
                    changes[f.name] = dataclasses.replace(v, data=data)
            elif isinstance(v, Diagnostic):
                message = mask_text(v.message, secrets)
                raw = v.raw if v.raw is None else mask_bytes(v.raw, secrets)
                if message != v.message or raw != v.raw:
                    changes[f.name] = dataclasses.replace(v, message=message, raw=raw)
            else:
                r = redact(v, secrets)
                if r is v:  # unchanged (a history view masks as it is read: comparing would read it twice)
                    continue
                if r != (list(v) if isinstance(v, tuple) else v):
                    changes[f.name] = r
        return dataclasses.replace(self, **changes) if changes else self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind}
        for f in dataclasses.fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out

    def to_json_bytes(self) -> bytes | None:
        """``to_json()`` as the recording writes it (``orjson.dumps(..., default=str, option=OPT_NON_STR_KEYS)``), in
        one orjson call with a ``default`` hook for what ``_jsonable`` converts, instead of a Python walk that builds
        a dict first. None when that cannot be sure to give the same bytes (a dict with keys that are not strings, an
        integer beyond 64 bits, a lone surrogate...): the caller takes the walk then."""
        names = _names(type(self))
        if names is None:
            return None
        out: dict[str, Any] = {"type": self.kind}
        for name in names:
            v = getattr(self, name)
            if type(v) is dict and not all(type(k) is str for k in v):  # (ToolStateChanged.times: ToolState keys)
                v = {str(k): x for k, x in v.items()}  # (as _jsonable writes them; deeper ones: orjson refuses)
            out[name] = v
        try:
            return orjson.dumps(out, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATACLASS)
        except (TypeError, orjson.JSONEncodeError, RecursionError):
            return None


_NAMES: dict[type, tuple[str, ...] | None] = {}


def _names(cls: type) -> tuple[str, ...] | None:
    """The field names of an observation class (None when one is ``type`` or ``kind``: a key of the line would be
    repeated)."""
    try:
        return _NAMES[cls]
    except KeyError:
        found = tuple(f.name for f in dataclasses.fields(cls))
        names = None if "type" in found or "kind" in found else found
        _NAMES[cls] = names
        return names


def _json_default(v: Any) -> Any:
    """What orjson cannot write itself, as ``_jsonable`` and then the writer's ``default=str`` make it (one level: orjson
    calls this again for what it returns)."""
    if isinstance(v, (bytes, bytearray)):
        return _jsonable(v)
    if isinstance(v, Diagnostic):
        return v.to_json()
    if isinstance(v, SSEEvent):
        return _jsonable(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    if isinstance(v, Sequence) and not isinstance(v, (str, memoryview)):  # a history view
        return list(v)
    return str(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, Diagnostic):
        return v.to_json()
    if isinstance(v, SSEEvent):
        return {
            "event": v.event,
            "data": v.data,
            "id": v.id,
            "retry": v.retry,
            "seq": v.seq,
            "start": v.start,
            "end": v.end,
            "read_index": v.read_index,
        }
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Sequence) and not isinstance(v, (str, memoryview)):  # a history view (agent.transcript)
        return [_jsonable(x) for x in v]
    return v


@dataclass(frozen=True, slots=True)
class LoopStarted(Observation):
    source: dict[str, Any]
    model: str
    prompt: str | None
    kind: ClassVar[str] = "loop_started"


@dataclass(frozen=True, slots=True)
class LoopStateChanged(Observation):
    state: str
    detail: str = ""
    kind: ClassVar[str] = "loop_state"


@dataclass(frozen=True, slots=True)
class TurnStarted(Observation):
    turn: int
    kind: ClassVar[str] = "turn_started"


@dataclass(frozen=True, slots=True)
class AttemptStarted(Observation):
    turn: int
    attempt: int
    method: str
    url: str
    headers: dict[str, Any]  # credentials already removed
    body: dict[str, Any]
    kind: ClassVar[str] = "attempt_started"


@dataclass(frozen=True, slots=True)
class ResponseStarted(Observation):
    """HTTP status and headers arrived (time to headers)."""

    turn: int
    attempt: int
    status: int
    headers: dict[str, Any]
    try_index: int = 0  # the HTTP try of this attempt that gave the stream (> 0: the SDK retried before it)
    t_sent: float | None = None  # loop time when that try's request was sent (None: unknown)
    request_headers: dict[str, Any] | None = (
        None  # that try's request headers as sent, credentials removed (None: unknown)
    )
    kind: ClassVar[str] = "response_started"


@dataclass(frozen=True, slots=True)
class ReadReceived(Observation):
    turn: int
    attempt: int
    read_index: int
    t_request: float  # seconds since this attempt's request was sent (the successful try's), when the read arrived
    data: bytes
    # the first read consumed after the stream was held (StreamHeld ... StreamReleased): it may have waited in the
    # socket during the hold, so t_request (when it was consumed) is an upper bound of when it arrived
    held: bool = False
    kind: ClassVar[str] = "read"


@dataclass(frozen=True, slots=True)
class SSEEventSeen(Observation):
    turn: int
    attempt: int
    sse: SSEEvent
    event_type: str  # the typed event's type (message_start, content_block_delta, ..., unknown, invalid)
    index: int | None  # content block index, when the event has one
    summary: str  # short text for a row: the text / partial_json fragment, stop reason...
    kind: ClassVar[str] = "sse_event"


@dataclass(frozen=True, slots=True)
class MessageStarted(Observation):
    turn: int
    attempt: int
    message: dict[str, Any]
    kind: ClassVar[str] = "message_started"


@dataclass(frozen=True, slots=True)
class BlockOpened(Observation):
    turn: int
    attempt: int
    index: int
    block_type: str
    block_id: str | None
    name: str | None
    start: dict[str, Any]
    kind: ClassVar[str] = "block_opened"


@dataclass(frozen=True, slots=True)
class BlockDelta(Observation):
    turn: int
    attempt: int
    index: int
    delta_type: str
    fragment: str  # the text / thinking / partial_json fragment ("" for signature/citations)
    event_index: int
    kind: ClassVar[str] = "block_delta"


@dataclass(frozen=True, slots=True)
class BlockClosed(Observation):
    turn: int
    attempt: int
    index: int
    content: dict[str, Any]  # the block as in the final message (tool input parsed, or input null + input_raw)
    input_error: str | None
    kind: ClassVar[str] = "block_closed"


@dataclass(frozen=True, slots=True)
class MessageUpdated(Observation):
    """message_delta: stop reason and cumulative usage."""

    turn: int
    attempt: int
    stop_reason: str | None
    usage: dict[str, Any]
    kind: ClassVar[str] = "message_updated"


@dataclass(frozen=True, slots=True)
class DiagnosticRaised(Observation):
    turn: int
    attempt: int
    diagnostic: Diagnostic
    kind: ClassVar[str] = "diagnostic"


@dataclass(frozen=True, slots=True)
class ToolUse(Observation):
    """A complete tool call, emitted at its block's content_block_stop while the stream goes on."""

    turn: int
    attempt: int
    id: str
    name: str
    index: int
    input: dict[str, Any]
    kind: ClassVar[str] = "tool_use"


@dataclass(frozen=True, slots=True)
class ToolStateChanged(Observation):
    turn: int
    attempt: int
    id: str
    name: str
    index: int
    state: str
    input: dict[str, Any] | None
    error: str | None
    result_preview: str | None
    times: dict[str, Any]
    safe: bool = False  # concurrency-safe (may run beside other safe calls); unsafe calls run alone
    # the times are not measured but inferred (the proxy: another harness ran the tool; its running and end times
    # are bounds drawn from the stream and the next request, not when the tool really ran)
    inferred: bool = False
    kind: ClassVar[str] = "tool_state"


@dataclass(frozen=True, slots=True)
class ToolResult(Observation):
    """A tool_result made by the executor (never by the model), as it goes into the next user message."""

    turn: int
    attempt: int
    tool_use_id: str
    name: str
    content: Any
    is_error: bool
    state: str
    kind: ClassVar[str] = "tool_result"


@dataclass(frozen=True, slots=True)
class HttpTryFailed(Observation):
    """One HTTP try of an attempt that did not give a stream: an HTTP error status (429, 529, 5xx, 4xx) or a
    connection failure before the first byte. The SDK retries such tries by itself inside one ``create()`` call
    (``retry_in`` is its wait before the next try; None when it does not retry), so they are seen at the HTTP
    layer under the SDK. Tries are counted within their attempt: ``try_index`` 0 is the first request.

    ``headers`` are filtered to what explains a retry (retry-after, retry-after-ms, request-id, x-should-retry);
    ``error_type`` / ``error_message`` come from the API's error JSON ``body`` (kept as sent, or as text)."""

    turn: int
    attempt: int
    try_index: int
    method: str
    url: str
    t_sent: float  # loop time when this try's request was sent
    status: int | None  # None: no response (connection failure)
    headers: dict[str, Any]
    error_type: str | None
    error_message: str | None
    body: Any
    connection_error: str | None
    retry_in: float | None
    request_headers: dict[str, Any] | None = (
        None  # this try's request headers as sent, credentials removed (None: unknown)
    )
    kind: ClassVar[str] = "http_try_failed"


@dataclass(frozen=True, slots=True)
class ControlApplied(Observation):
    """The user (or a test) drove the loop: pause, resume, step (event / block / turn), cancel or speed."""

    control: str  # pause | resume | step_event | step_block | step_turn | cancel | speed
    detail: str = ""
    kind: ClassVar[str] = "control"


@dataclass(frozen=True, slots=True)
class StreamHeld(Observation):
    """The loop stopped consuming the stream (paused, or a step ended): reads wait in the socket until
    ``StreamReleased``. Timing figures leave the held interval out: a held stream is never called buffered."""

    turn: int | None
    attempt: int | None
    by: str  # pause | step
    kind: ClassVar[str] = "stream_held"


@dataclass(frozen=True, slots=True)
class StreamReleased(Observation):
    """The loop consumes the stream again; ``held`` seconds passed since the matching ``StreamHeld``."""

    turn: int | None
    attempt: int | None
    held: float
    kind: ClassVar[str] = "stream_released"


@dataclass(frozen=True, slots=True)
class AttemptEnded(Observation):
    turn: int
    attempt: int
    status: str  # complete | failed | cancelled
    reason: str | None
    outcome: str | None  # tool_use | text_finish | truncated | incomplete | error
    kind: ClassVar[str] = "attempt_ended"


@dataclass(frozen=True, slots=True)
class MessageAppended(Observation):
    """A message appended to the conversation history (assistant message, or the user tool_result message)."""

    turn: int
    message: dict[str, Any]
    kind: ClassVar[str] = "message_appended"


@dataclass(frozen=True, slots=True)
class TextFinish(Observation):
    """The turn ended without tool calls: the loop's end."""

    turn: int
    text: str
    stop_reason: str | None
    kind: ClassVar[str] = "text_finish"


@dataclass(frozen=True, slots=True)
class TurnEnded(Observation):
    turn: int
    outcome: str
    stop_reason: str | None
    usage: dict[str, Any]
    kind: ClassVar[str] = "turn_ended"


@dataclass(frozen=True, slots=True)
class LoopFinished(Observation):
    status: str  # finished | error | cancelled
    turns: int
    messages: Sequence[Any]  # the final conversation as plain data (a list, secrets masked)
    tools: list[dict[str, Any]]  # [{"id", "name", "state", "queued_at", "started_at", "finished_at"}]
    error: str | None = None
    kind: ClassVar[str] = "loop_finished"


@dataclass(frozen=True, slots=True)
class ToolExecutionInferred(Observation):
    """What a request of another harness (seen by the proxy) tells about one of its tool calls: the tool_result
    blocks of its last user message, matched to the tool_use blocks seen streaming. ``t`` is that request's time;
    ``since_block_stop`` (request - block stop) bounds the execution from above, it is not a measured run time.

    status: ``result``, ``missing`` (a tool_use of the answered turn without a result) or ``unknown`` (a result
    whose tool_use was never seen)."""

    turn: int  # the request that revealed it
    attempt: int
    tool_use_id: str
    name: str | None
    status: str  # result | missing | unknown
    from_turn: int | None
    since_block_stop: float | None
    since_stream_end: float | None
    is_error: bool | None
    request_t: float | None = None
    block_stop_t: float | None = None
    stream_end_t: float | None = None
    result_chars: int | None = None
    reason: str | None = None  # why a result could not be matched (status unknown), or why a call is missing
    kind: ClassVar[str] = "tool_inferred"


@dataclass(frozen=True, slots=True)
class FaultInjected(Observation):
    """A live fault the proxy injected into an attempt (``at_event``: protocol events before it, pings not
    counted)."""

    turn: int
    attempt: int
    fault: str
    at_event: int | None
    kind: ClassVar[str] = "fault_injected"


@dataclass(frozen=True, slots=True)
class ProxyNote(Observation):
    """Something the proxy did to (or could not do with) an attempt, for people: e.g. an encoded stream recorded as
    received."""

    turn: int
    attempt: int
    note: str
    kind: ClassVar[str] = "proxy_note"


@dataclass(frozen=True, slots=True)
class ExchangeForwarded(Observation):
    """A request the proxy forwarded that is not a turn (count_tokens, models, ...), once it ended."""

    method: str
    path: str
    status: int | None
    bytes: int
    end: str | None
    conversation: str | None = None  # the conversation it belongs to, when one can be told (else "other requests")
    side: str | None = None  # why it is not a turn: count_tokens, not streamed, GET /v1/models, other path ...
    kind: ClassVar[str] = "proxy_exchange"


@dataclass(frozen=True, slots=True)
class ConversationAssigned(Observation):
    """The conversation a request of another harness (seen by the proxy) belongs to, published before its
    ``TurnStarted`` / ``AttemptStarted``. ``turn`` stays the proxy's global turn number (the key of every other
    observation); ``conversation_turn`` and ``attempt`` count within the conversation (0-based).

    how: ``header`` (a session header named it), ``new`` (a history no conversation had), ``continues`` (it extends
    its conversation's previous request), ``continues_changed`` (its messages extend it, under another system prompt
    or tools) or ``retry`` (it repeats it: the next attempt of the same turn).
    ``parent``: the conversation whose running tool call started this one (a subagent), when that is clear.
    ``side``: None for a turn (side requests are ``ExchangeForwarded`` lines with their ``conversation``)."""

    turn: int
    conversation: str
    conversation_turn: int
    attempt: int
    how: str
    parent: str | None = None
    side: str | None = None
    kind: ClassVar[str] = "conversation"


def try_failure_text(status: int | None, error_type: str | None, connection_error: str | None) -> str:
    """`HTTP 429 rate_limit_error` / `connection failed (ConnectError: ...)`: a failed try, for people."""
    if status is None:
        return f"connection failed ({connection_error})" if connection_error else "connection failed"
    return f"HTTP {status} {error_type}" if error_type else f"HTTP {status}"


Subscriber = Callable[[Observation], None]


@dataclass
class ObservationBus:
    """Synchronous fan-out, in order. Subscribers must be cheap (append to a buffer, write a line): the loop calls
    them inline, so none can stall it on I/O waits, and none can miss an observation. A subscriber that raises is
    removed and the failure kept in `errors` (never a traceback in the loop)."""

    subscribers: list[Subscriber] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    count: int = 0

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self.subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self.subscribers:
                self.subscribers.remove(fn)

        return unsubscribe

    def publish(self, obs: Observation) -> None:
        self.count += 1
        for fn in tuple(self.subscribers):
            try:
                fn(obs)
            except Exception as e:  # noqa: BLE001 (a broken subscriber must not break the loop)
                self._failed(fn, e)

    def publish_all(self, observations: list[Observation]) -> None:
        """`publish` a batch (a threaded session's relay): each subscriber gets every observation of it, in order,
        one subscriber after the other; a subscriber that is a list's ``append`` (a buffer, as the dashboard's) gets
        it in one ``extend``. (One subscriber that unsubscribes another mid-batch does not stop its batch.)"""
        self.count += len(observations)
        for fn in tuple(self.subscribers):
            owner = getattr(fn, "__self__", None)
            if type(owner) is list and getattr(fn, "__name__", None) == "append":
                owner.extend(observations)
                continue
            for obs in observations:
                try:
                    fn(obs)
                except Exception as e:  # noqa: BLE001 (as in publish: removed, the failure kept)
                    self._failed(fn, e)
                    break

    def _failed(self, fn: Subscriber, e: Exception) -> None:
        self.errors.append(f"subscriber {getattr(fn, '__qualname__', fn)!s} failed: {type(e).__name__}: {e}")
        if fn in self.subscribers:
            self.subscribers.remove(fn)

"""OpenTelemetry traces of a session, following the GenAI semantic conventions: a sink on the observation bus.

- one ``invoke_agent`` parent span per conversation (the loop, the replay, one proxy conversation);
- one ``chat {model}`` span (kind CLIENT) per attempt, with ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.*`` (cache tokens *included* in
  ``input_tokens``, as the convention says), ``gen_ai.response.time_to_first_chunk`` and ``error.type`` on failures;
- one ``execute_tool {name}`` span (kind INTERNAL) per tool call.

Message content goes out only with ``content=True`` (``--otel-content``, the convention's opt-in).

Exporting never slows the stream: the sink only looks at a few observation kinds, builds spans with explicit
times, and hands them to the SDK's ``BatchSpanProcessor`` (its own thread, a bounded queue that drops when the
collector is down, an export timeout). The SDK is imported only when ``--otel`` is given (``pip install
'stream-inspector[otel]'``). Attribute names are our own constants: the semconv package marks its ``gen_ai_*``
constants deprecated.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.core.redaction import mask_text
from inspector.observe import observations as O
from inspector.observe.states import TOOL_TERMINAL, ToolState
from inspector.observe.usage import from_wire

# GenAI semantic conventions (semantic-conventions-genai docs/gen-ai/gen-ai-spans.md)
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TTFC = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
# ours
ATTEMPT = "inspector.attempt"
TURN = "inspector.turn"
OUTCOME = "inspector.outcome"

# a content attribute (a history, a tool's arguments or result, a status message) is cut past this many characters:
# each attempt's gen_ai.input.messages holds the whole history, and a span of MBs is refused by collectors (a batch
# of them is lost whole). MAX_ATTRIBUTE_CHARS bounds every other string attribute too (the provider's SpanLimits).
MAX_TEXT_CHARS = 64 * 1024
MAX_ATTRIBUTE_CHARS = MAX_TEXT_CHARS + 64

MAX_NAME_CHARS = 256  # a span's or event's name holds a model's or a tool's name, as a client or the model sent it

# OTLP carries an integer attribute as an int64: the exporter drops one past it (logging a traceback) and the span
# goes out without it. Such a value (a hostile upstream's usage of 2**70) is sent as the nearest int64, and beside it
# OVERFLOW + its name holds the exact value as a decimal string: visible, never dropped, never an exception.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
OVERFLOW = "inspector.overflow."


def _ints(values: dict[str, Any]) -> dict[str, Any]:
    """Integer attributes as OTLP can carry them (see OVERFLOW); a value that is not an integer (a boolean included)
    is left out."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if INT64_MIN <= value <= INT64_MAX:
            out[key] = value
            continue
        out[key] = INT64_MAX if value > 0 else INT64_MIN
        try:
            out[OVERFLOW + key] = str(value)
        except ValueError:  # (past Python's 4,300 digits for a decimal string)
            out[OVERFLOW + key] = f"{'-' if value < 0 else ''}an integer of {abs(value).bit_length()} bits"
    return out


def _name(*parts: Any) -> str:
    """A span or event name: its parts, each cut past MAX_NAME_CHARS (no span limit bounds a name)."""
    return " ".join(str(p)[:MAX_NAME_CHARS] for p in parts)


_TOOL_END = frozenset(s.value for s in TOOL_TERMINAL)
_CONTENT_EVENTS = {"content_block_start", "content_block_delta", "message_start"}


# a Chat Completions chunk that finishes a choice (most chunks say "finish_reason":null)
_FINISHES = re.compile(r'"finish_reason"\s*:\s*"')


def _provider(url: str) -> str:
    u = (url or "").lower()
    if "/chat/completions" in u or "/responses" in u or "openai" in u:
        return "openai"
    return "anthropic"


class OtelSink:
    """Subscribe an instance to an :class:`~inspector.observe.observations.ObservationBus`. ``tracer`` is an
    OpenTelemetry tracer; ``clock_origin_ns`` maps the observations' clock (seconds) onto wall time."""

    KEEP_ENDED = 10_000

    def __init__(
        self,
        tracer: Any,
        *,
        content: bool = False,
        conversation: str = "session",
        secrets: Callable[[], list[str]] | None = None,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer
        self.content = content
        self.conversation = conversation
        self._secrets = secrets or (lambda: [])
        self._origin: int | None = None  # ns at observation time 0
        self._root: Any = None
        self._attempts: dict[tuple[int, int], Any] = {}
        self._first: dict[tuple[int, int], float] = {}
        self._http_error: dict[tuple[int, int], int] = {}  # an attempt answered with an HTTP error status
        self._sent: dict[tuple[int, int], float] = {}
        self._tools: dict[str, Any] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()  # the calls whose span ended (the newest KEEP_ENDED)
        self._usage: dict[tuple[int, int], dict[str, Any]] = {}
        self._family: dict[tuple[int, int], str] = {}
        self._provider_set: Any = None  # the agent span whose gen_ai.provider.name is set
        # a Chat Completions attempt's finish_reason per choice, as the wire said it ("stop", "tool_calls"): the
        # convention's finish_reasons are the provider's words, not the neutral stop_reason ("end_turn")
        self._chat: dict[tuple[int, int], dict[int, str]] = {}
        self._model = "unknown"

    # --- clocks ------------------------------------------------------------------------------------------------
    def _ns(self, t: float) -> int:
        if self._origin is None:
            self._origin = time.time_ns() - int(t * 1e9)
        return self._origin + int(t * 1e9)

    def _text(self, value: Any) -> str:
        if not isinstance(value, str | dict | list) and isinstance(value, Sequence):
            value = list(value)  # a history kept out of RAM (a read-only sequence of messages)
        text = value if isinstance(value, str) else exactjson.dumps(value, default=str).decode()
        secrets = self._secrets()
        text = mask_text(text, secrets) if secrets else text  # (masked whole first: a key cut in two is still a key)
        if len(text) > MAX_TEXT_CHARS:
            text = f"{text[:MAX_TEXT_CHARS]}... [cut: {len(text):,} chars]"
        return text

    # --- the sink ----------------------------------------------------------------------------------------------
    def __call__(self, obs: O.Observation) -> None:
        kind = obs.kind
        if kind == "sse_event" or kind == "read":
            if kind == "sse_event":
                key = (obs.turn, obs.attempt)  # type: ignore[attr-defined]
                if key not in self._first and obs.event_type in _CONTENT_EVENTS:  # type: ignore[attr-defined]
                    self._first[key] = obs.t
                chat = self._chat.get(key)
                if chat is not None:
                    self._chat_finish(chat, obs.sse.data)  # type: ignore[attr-defined]
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, obs)

    def _root_span(self, t: float) -> Any:
        if self._root is None:
            self._root = self.tracer.start_span(
                _name("invoke_agent", self.conversation),
                kind=self._trace.SpanKind.INTERNAL,
                start_time=self._ns(t),
                # (the agent span's name is "invoke_agent {gen_ai.agent.name}": what names the conversation; its
                # required gen_ai.provider.name is set by the first attempt, the first the provider is known)
                attributes={
                    OPERATION: "invoke_agent",
                    CONVERSATION_ID: self.conversation,
                    AGENT_NAME: self.conversation,
                },
            )
        return self._root

    def _loop_started(self, obs: O.LoopStarted) -> None:
        self._model = obs.model or self._model
        # a replay of one conversation of a recording of many (c1, c2, ...): that one is its conversation, not the
        # file all of them share (one gen_ai.conversation.id for all would merge them in Langfuse or Phoenix)
        conv = obs.source.get("conversation") if isinstance(obs.source, dict) else None
        if self._root is None and isinstance(conv, str) and conv:
            self.conversation = conv
        self._root_span(obs.t)

    def _attempt_started(self, obs: O.AttemptStarted) -> None:
        root = self._root_span(obs.t)
        body = obs.body if isinstance(obs.body, dict) else {}
        model = body.get("model") if isinstance(body.get("model"), str) else self._model
        provider = _provider(obs.url)
        key = (obs.turn, obs.attempt)
        if root is not self._provider_set:  # (the agent span's first attempt: its provider is the agent's)
            root.set_attribute(PROVIDER, provider)
            self._provider_set = root
        self._family[key] = provider
        if "/chat/completions" in (obs.url or ""):
            self._chat[key] = {}
        attrs: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: provider,
            REQUEST_MODEL: model,
            REQUEST_STREAM: bool(body.get("stream", True)),
            CONVERSATION_ID: self.conversation,
            **_ints({TURN: obs.turn, ATTEMPT: obs.attempt, REQUEST_MAX_TOKENS: body.get("max_tokens")}),
        }
        if self.content:  # Messages and Chat Completions: messages (and system); Responses: input and instructions
            messages = body.get("messages") if body.get("messages") is not None else body.get("input")
            if messages is not None:
                attrs[INPUT_MESSAGES] = self._text(messages)
            system = body.get("system") if body.get("system") is not None else body.get("instructions")
            if system is not None:
                attrs[SYSTEM_INSTRUCTIONS] = self._text(system)
        ctx = self._trace.set_span_in_context(root)
        self._attempts[key] = self.tracer.start_span(
            _name("chat", model),
            context=ctx,
            kind=self._trace.SpanKind.CLIENT,
            start_time=self._ns(obs.t),
            attributes=attrs,
        )
        self._sent[key] = obs.t

    def _message_started(self, obs: O.MessageStarted) -> None:
        span = self._attempts.get((obs.turn, obs.attempt))
        msg = obs.message if isinstance(obs.message, dict) else {}
        if span is not None:
            if isinstance(msg.get("id"), str):
                span.set_attribute(RESPONSE_ID, msg["id"])
            if isinstance(msg.get("model"), str):
                span.set_attribute(RESPONSE_MODEL, msg["model"])
        if isinstance(msg.get("usage"), dict):
            self._usage.setdefault((obs.turn, obs.attempt), {}).update(msg["usage"])

    def _message_updated(self, obs: O.MessageUpdated) -> None:
        key = (obs.turn, obs.attempt)
        if isinstance(obs.usage, dict):
            self._usage.setdefault(key, {}).update(obs.usage)
        span = self._attempts.get(key)
        if span is not None and obs.stop_reason and key not in self._chat:  # (a chat's: the wire's, at its end)
            span.set_attribute(FINISH_REASONS, [obs.stop_reason])

    @staticmethod
    def _chat_finish(chat: dict[int, str], data: str) -> None:
        """The finish_reason of each choice a chunk finishes (the first one said per choice counts, as for the
        stream's own reading of it)."""
        if _FINISHES.search(data) is None:
            return
        try:
            choices = orjson.loads(data).get("choices")
        except (orjson.JSONDecodeError, AttributeError):
            return
        for ch in choices if isinstance(choices, list) else ():
            if isinstance(ch, dict) and isinstance(ch.get("finish_reason"), str):
                index = ch.get("index", 0)
                chat.setdefault(index if isinstance(index, int) else 0, ch["finish_reason"])

    def _http_try_failed(self, obs: O.HttpTryFailed) -> None:
        span = self._attempts.get((obs.turn, obs.attempt))
        if span is not None:
            attrs: dict[str, Any] = {"error.type": obs.error_type or obs.connection_error or "http_error"}
            if obs.status is not None:  # (a connection failure had no response: no status code, not 0)
                attrs.update(_ints({HTTP_STATUS: obs.status}))
            span.add_event("http_try_failed", attrs, timestamp=self._ns(obs.t))

    def _response_started(self, obs: O.ResponseStarted) -> None:
        key = (obs.turn, obs.attempt)
        span = self._attempts.get(key)
        if span is not None and isinstance(obs.status, int):
            span.set_attributes(_ints({HTTP_STATUS: obs.status}))
            if not 200 <= obs.status < 300:
                self._http_error[key] = obs.status

    def _attempt_ended(self, obs: O.AttemptEnded) -> None:
        key = (obs.turn, obs.attempt)
        span = self._attempts.pop(key, None)
        status_code = self._http_error.pop(key, None)
        if span is None:
            return
        usage = from_wire(self._usage.pop(key, None), "openai" if self._family.get(key) == "openai" else "anthropic")
        if usage.reported:
            counts = {
                INPUT_TOKENS: usage.prompt,  # cache reads and writes included, per the convention
                OUTPUT_TOKENS: usage.output,
                CACHE_WRITE: usage.cache_write,
                CACHE_READ: usage.cache_read,
            }
            if usage.reasoning:
                counts[REASONING] = usage.reasoning
            span.set_attributes(_ints(counts))
        first = self._first.pop(key, None)
        sent = self._sent.pop(key, None)
        if first is not None and sent is not None:
            span.set_attribute(TTFC, max(0.0, first - sent))
        if obs.outcome:
            span.set_attribute(OUTCOME, obs.outcome)
        if status_code is not None:  # (the HTTP semantic conventions' error.type for a failed status: the code)
            span.set_attribute(ERROR_TYPE, str(status_code))
            span.set_status(
                self._trace.Status(self._trace.StatusCode.ERROR, self._text(obs.reason or f"HTTP {status_code}"))
            )
        elif obs.status != "complete" or obs.outcome in ("error", "http_error", "incomplete"):
            span.set_attribute(ERROR_TYPE, obs.outcome or obs.status)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, self._text(obs.reason or obs.status)))
        self._family.pop(key, None)
        chat = self._chat.pop(key, None)
        if chat:
            span.set_attribute(FINISH_REASONS, [chat[i] for i in sorted(chat)])
        span.end(end_time=self._ns(obs.t))

    def _message_appended(self, obs: O.MessageAppended) -> None:
        if not self.content or not isinstance(obs.message, dict) or obs.message.get("role") != "assistant":
            return
        if self._root is not None:
            self._root.set_attribute(OUTPUT_MESSAGES, self._text([obs.message]))

    def _tool_state(self, obs: O.ToolStateChanged) -> None:
        span = self._tools.get(obs.id)
        if span is None and obs.id in self._ended:
            # a call whose span already ended changes outcome (a call that ran, then discarded with its failed
            # attempt): an event on the conversation's span, not a second execute_tool span for the same call
            if self._root is not None:
                event: dict[str, Any] = {TOOL_NAME: obs.name, TOOL_CALL_ID: obs.id, OUTCOME: obs.state}
                if obs.error:
                    event["inspector.reason"] = self._text(obs.error)
                self._root.add_event(_name("execute_tool", obs.name, obs.state), event, timestamp=self._ns(obs.t))
            return
        if span is None and obs.state not in ("streaming_input", "queued"):
            parent = self._root_span(obs.t)
            attrs: dict[str, Any] = {
                OPERATION: "execute_tool",
                TOOL_NAME: obs.name,
                TOOL_CALL_ID: obs.id,
                TOOL_TYPE: "function",
                **_ints({TURN: obs.turn}),
            }
            if self.content and obs.input is not None:
                attrs[TOOL_ARGS] = self._text(obs.input)
            span = self._tools[obs.id] = self.tracer.start_span(
                _name("execute_tool", obs.name),
                context=self._trace.set_span_in_context(parent),
                kind=self._trace.SpanKind.INTERNAL,
                start_time=self._ns(obs.t),
                attributes=attrs,
            )
        if span is not None and obs.state in _TOOL_END:
            self._tools.pop(obs.id, None)
            self._ended[obs.id] = None
            while len(self._ended) > self.KEEP_ENDED:
                self._ended.popitem(last=False)
            span.set_attribute(OUTCOME, obs.state)
            if self.content and obs.result_preview is not None:
                span.set_attribute(TOOL_RESULT, self._text(obs.result_preview))
            # (an unknown outcome, the proxy's call whose result never came, is no error: only the outcome says it)
            if obs.state not in (ToolState.SUCCEEDED, ToolState.UNKNOWN):
                span.set_attribute(ERROR_TYPE, obs.state)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, self._text(obs.error or obs.state)))
            span.end(end_time=self._ns(obs.t))

    def _loop_finished(self, obs: O.LoopFinished) -> None:
        if self._root is not None and obs.status != "finished":  # the agent's run failed or was cancelled
            self._root.set_attribute(ERROR_TYPE, obs.status)
            self._root.set_status(self._trace.Status(self._trace.StatusCode.ERROR, self._text(obs.error or obs.status)))
        self.close(obs.t)

    def close(self, t: float | None = None) -> None:
        """End what is still open (a cancelled session): attempts and tools first, then the conversation."""
        end = self._ns(t) if t is not None else time.time_ns()
        for span in list(self._attempts.values()) + list(self._tools.values()):
            span.set_attribute(ERROR_TYPE, "cancelled")
            span.end(end_time=end)
        self._attempts.clear()
        self._tools.clear()
        if self._root is not None:
            self._root.end(end_time=end)
            self._root = None

    _handlers: dict[str, Callable[[OtelSink, Any], None]] = {
        "loop_started": _loop_started,
        "attempt_started": _attempt_started,
        "message_started": _message_started,
        "message_updated": _message_updated,
        "http_try_failed": _http_try_failed,
        "response_started": _response_started,
        "attempt_ended": _attempt_ended,
        "message_appended": _message_appended,
        "tool_state": _tool_state,
        "loop_finished": _loop_finished,
    }


def make_provider(service: str = "stream-inspector", exporter: Any = None, *, max_queue: int = 2048) -> Any:
    """A TracerProvider exporting over OTLP/HTTP (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``
    as the SDK reads them) through a bounded batch processor. Raises ImportError when the extra is missing."""
    import os

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(timeout=5)
    # every string attribute bounded (a model name, a response id as a client or server sent it), unless the standard
    # variables say how far
    named = any(
        os.environ.get(v) for v in ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    )
    limits = SpanLimits() if named else SpanLimits(max_attribute_length=MAX_ATTRIBUTE_CHARS)
    # (no atexit shutdown: close() flushes within its bound; the SDK's own at exit would wait on a hung export again)
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}), span_limits=limits, shutdown_on_exit=False
    )
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_queue_size=max_queue, schedule_delay_millis=500, export_timeout_millis=5000)
    )
    return provider


CLOSE_TIMEOUT_S = 10.0  # the most the flush at the end waits for the collector


def flush(provider: Any, timeout_s: float | None = None) -> bool:
    """Flush and shut the provider down, waiting at most ``timeout_s``; False when the collector did not let it
    finish. The SDK's force_flush exports on the caller's thread whatever its timeout says (its own TODO), and an
    endpoint that answers a byte at a time never times a request out: it held ``run --otel`` after its session
    ended, Ctrl-C included. So on a daemon thread of its own, abandoned past the bound."""
    import threading

    timeout_s = CLOSE_TIMEOUT_S if timeout_s is None else timeout_s

    def work() -> None:
        with contextlib.suppress(Exception):  # (an exporter that fails: its spans are lost, the session is not)
            provider.force_flush(timeout_millis=int(timeout_s * 1000))
            provider.shutdown()

    worker = threading.Thread(target=work, name="inspector-otel-flush", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return not worker.is_alive()


def attach(bus: O.ObservationBus, *, content: bool = False, conversation: str = "session", provider: Any = None) -> Any:
    """Subscribe an OtelSink to ``bus``; returns a close function that ends open spans and flushes (bounded)."""
    provider = provider or make_provider()
    sink = OtelSink(provider.get_tracer("inspector"), content=content, conversation=conversation)
    bus.subscribe(sink)

    def close() -> None:
        sink.close()
        flush(provider)

    return close


class ConversationSinks:
    """A proxy's bus carries many conversations (``ConversationAssigned`` names each turn's): one OtelSink each, so
    each conversation has its own ``invoke_agent`` parent span with its attempts and tools under it. Observations of
    a turn go to its conversation's sink; those of no turn (the loop's end) to every sink. Bounded: past ``KEEP``
    open conversations the least recently active one is ended (its span closed); a later turn of it opens a new
    one with the same ``gen_ai.conversation.id``."""

    KEEP = 256
    KEEP_TURNS = 10_000

    def __init__(
        self,
        tracer: Any,
        *,
        content: bool = False,
        default: str = "session",
        secrets: Callable[[], list[str]] | None = None,
    ) -> None:
        self.tracer = tracer
        self.secrets = secrets
        self.content = content
        self.default = default  # the conversation of a turn no ConversationAssigned named
        self.sinks: OrderedDict[str, OtelSink] = OrderedDict()
        self.turns: OrderedDict[int, str] = OrderedDict()

    def _sink(self, conversation: str, t: float) -> OtelSink:
        sink = self.sinks.get(conversation)
        if sink is None:
            sink = self.sinks[conversation] = OtelSink(
                self.tracer, content=self.content, conversation=conversation, secrets=self.secrets
            )
            while len(self.sinks) > self.KEEP:
                _, old = self.sinks.popitem(last=False)
                old.close(t)
        self.sinks.move_to_end(conversation)
        return sink

    def __call__(self, obs: O.Observation) -> None:
        if isinstance(obs, O.ConversationAssigned):
            self.turns[obs.turn] = obs.conversation
            while len(self.turns) > self.KEEP_TURNS:
                self.turns.popitem(last=False)
            return
        turn = getattr(obs, "turn", None)
        if isinstance(turn, int):
            self._sink(self.turns.get(turn, self.default), obs.t)(obs)
        elif isinstance(obs, O.LoopFinished):
            self.close(obs.t)

    def close(self, t: float | None = None) -> None:
        for sink in self.sinks.values():
            sink.close(t)
        self.sinks.clear()


def attach_conversations(
    bus: O.ObservationBus,
    *,
    content: bool = False,
    provider: Any = None,
    default: str = "session",
    secrets: Callable[[], list[str]] | None = None,
) -> Callable[[], None]:
    """``attach`` for a proxy's bus (``proxy --otel``, ``watch --otel``): one parent span per conversation.
    Returns a close function that ends open spans and flushes (bounded)."""
    provider = provider or make_provider()
    sinks = ConversationSinks(provider.get_tracer("inspector"), content=content, default=default, secrets=secrets)
    bus.subscribe(sinks)

    def close() -> None:
        sinks.close()
        flush(provider)

    return close

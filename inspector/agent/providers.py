"""The OpenAI side of the agent loop's provider seam: how one turn is sent through the official ``openai`` SDK
(Chat Completions or Responses), which stream decodes it, and how the history is written in that API's shape.

The loop keeps one vocabulary (neutral blocks: ``text``, ``tool_use``; ``tool_result`` blocks from the executor);
this module turns them into what the API takes back:

* Chat Completions: the assistant turn is one ``assistant`` message (``content`` text, ``tool_calls`` with each
  call's ``id``, ``function.name`` and ``function.arguments`` as streamed), each result a ``tool`` message
  (``tool_call_id``), in the calls' order, right after it.
* Responses: the assistant turn is an assistant input message (its text) and one ``function_call`` item per
  call (``call_id``, ``name``, ``arguments``), each result a ``function_call_output`` item.

Built-in tool definitions (``ToolSpec.definition()``: name, description, input_schema) become function tools. The
SDK is imported here only when a request is made (``inspector --help`` never imports it).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol

from inspector.core import exactjson
from inspector.stream.assembler import TurnStream
from inspector.stream.family import Family, new_stream

Api = Literal["chat", "responses"]
APIS: tuple[Api, ...] = ("chat", "responses")
# error types of a mid-stream error object the loop may retry (OpenAI, OpenRouter, vLLM say these)
RETRYABLE_ERRORS = frozenset({"server_error", "rate_limit_exceeded", "rate_limit_error", "overloaded_error"})

__all__ = [
    "APIS",
    "RETRYABLE_ERRORS",
    "Api",
    "OpenAIProvider",
    "OpenStream",
    "SdkResponse",
    "function_tool",
    "tool_result_text",
]


class HasBaseUrl(Protocol):
    """An SDK client, for the URL a request goes to."""

    @property
    def base_url(self) -> object: ...


class _SdkHttpResponse(Protocol):
    def aiter_bytes(self) -> AsyncGenerator[bytes, None]: ...


class SdkResponse(Protocol):
    """What the loop reads of the answer of either SDK's ``with_streaming_response`` call (the anthropic and the
    openai ``AsyncAPIResponse``): its status and headers, and the HTTP response whose bytes it streams."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def http_response(self) -> _SdkHttpResponse: ...


# one attempt's SDK call: given the history to send (the SDK's own message types: the stored messages, or the
# placeholder the tapped transport splices them into), the context manager of its streamed answer
OpenStream = Callable[[Any], AbstractAsyncContextManager[SdkResponse]]

if TYPE_CHECKING:  # (never run) mypy proves that both SDKs' streamed answers are SdkResponses
    import anthropic
    import openai

    def _sdk_responses(a: anthropic.AsyncAPIResponse[Any], o: openai.AsyncAPIResponse[Any]) -> list[SdkResponse]:
        return [a, o]


def function_tool(definition: dict[str, Any], api: Api) -> dict[str, Any]:
    """A tool definition as the API takes it. Already an OpenAI tool (it has ``type``): kept as given; a Messages
    API definition (``name``, ``description``, ``input_schema``): a function tool."""
    if "type" in definition and "input_schema" not in definition:
        return definition
    params = definition.get("input_schema") or {"type": "object", "properties": {}}
    fn: dict[str, Any] = {"name": definition.get("name")}
    if definition.get("description"):
        fn["description"] = definition["description"]
    fn["parameters"] = params
    if api == "chat":
        return {"type": "function", "function": fn}
    return {"type": "function", **fn}


def tool_result_text(content: Any) -> str:
    """A tool_result's content as the string an OpenAI tool message carries: a string as is, text blocks joined,
    anything else as its JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    return exactjson.dumps(content).decode()


def _arguments(block: dict[str, Any], raw: dict[str, str]) -> str:
    """The call's arguments as streamed (exactly), else its parsed input as JSON (``{}`` when it did not parse:
    the call never ran and its result says why)."""
    bid = block.get("id")
    if isinstance(bid, str) and bid in raw and block.get("input") is not None:
        return raw[bid]
    value = block.get("input")
    return exactjson.dumps(value if isinstance(value, dict) else {}).decode()


class OpenAIProvider:
    """One OpenAI API (``chat`` or ``responses``) for the agent loop."""

    def __init__(self, api: Api = "chat", *, max_tokens: int | None = None) -> None:
        if api not in APIS:
            raise ValueError(f"unknown OpenAI API {api!r} (chat or responses)")
        self.api: Api = api
        self.max_tokens = max_tokens  # None: not sent (the server's default)
        self.family: Family = "openai_chat" if api == "chat" else "openai_responses"

    # --- the request -------------------------------------------------------------------------------------------
    @property
    def history_key(self) -> str:
        return "messages" if self.api == "chat" else "input"

    def url(self, client: HasBaseUrl) -> str:
        path = "/chat/completions" if self.api == "chat" else "/responses"
        return str(client.base_url).rstrip("/") + path

    def request_body(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        system: str | None,
        tools: list[dict[str, Any]] | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """The body as the loop shows it (the SDK makes the same one from ``create_kwargs``)."""
        body: dict[str, Any] = {"model": model}
        if self.api == "chat":  # (the system prompt is the history's first message: initial_messages)
            body["messages"] = messages
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            if self.max_tokens is not None:
                body["max_completion_tokens"] = self.max_tokens
        else:
            body["input"] = messages
            if system:
                body["instructions"] = system
            body["stream"] = True
            if self.max_tokens is not None:
                body["max_output_tokens"] = self.max_tokens
        if tools:
            body["tools"] = [function_tool(t, self.api) for t in tools]
        body.update(extra)
        return body

    def open(self, client: Any, body: dict[str, Any], history: Any) -> AbstractAsyncContextManager[SdkResponse]:
        """The SDK's streaming-response context manager for ``body``, with ``history`` (the placeholder the tapped
        transport splices the stored history into, or the messages themselves) where the history goes."""
        kwargs = {k: v for k, v in body.items() if k not in ("model", "messages", "input", "stream", "extra_body")}
        known = ("stream_options", "max_completion_tokens", "tools", "instructions", "max_output_tokens")
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in known}
        # (``client`` is an openai.AsyncOpenAI, whose calls answer an AsyncAPIResponse: an SdkResponse, as
        # _sdk_responses proves; the SDK is not imported here, so the client is not typed)
        answer: AbstractAsyncContextManager[SdkResponse]
        if self.api == "chat":
            answer = client.chat.completions.with_streaming_response.create(
                model=body["model"],
                messages=history,
                stream=True,
                extra_body=extra or None,
                **kwargs,
            )
        else:
            answer = client.responses.with_streaming_response.create(
                model=body["model"], input=history, stream=True, extra_body=extra or None, **kwargs
            )
        return answer

    def new_stream(self) -> TurnStream:
        return new_stream(self.family)

    # --- the history ---------------------------------------------------------------------------------------------
    def initial_messages(self, prompt: str, system: str | None) -> list[dict[str, Any]]:
        """The history a run starts with: Chat Completions carries the system prompt as its first message (so a
        turn's request is the stored history, sent as is); Responses sends it as ``instructions``."""
        first = [{"role": "system", "content": system}] if system and self.api == "chat" else []
        return [*first, {"role": "user", "content": prompt}]

    def assistant_messages(
        self, content: Sequence[dict[str, Any]], raw_arguments: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The assistant turn (neutral blocks) as this API's history entries. Thinking blocks are not sent back
        (Chat Completions has no field for them; Responses needs its encrypted reasoning item, not streamed)."""
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text" and b.get("text")]
        calls = [b for b in content if b.get("type") == "tool_use"]
        if self.api == "chat":
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": b.get("id"),
                        "type": "function",
                        "function": {"name": b.get("name"), "arguments": _arguments(b, raw_arguments)},
                    }
                    for b in calls
                ]
            if msg["content"] is None and not calls:
                return []
            return [msg]
        out: list[dict[str, Any]] = []
        if texts:  # an input message of the assistant (the SDK's EasyInputMessageParam: its text as one string)
            out.append({"role": "assistant", "content": "".join(texts)})
        for b in calls:
            out.append(
                {
                    "type": "function_call",
                    "call_id": b.get("id"),
                    "name": b.get("name"),
                    "arguments": _arguments(b, raw_arguments),
                }
            )
        return out

    def result_messages(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tool_result blocks (one per call, in the calls' order) as this API's history entries."""
        if self.api == "chat":
            return [
                {"role": "tool", "tool_call_id": r["tool_use_id"], "content": tool_result_text(r.get("content"))}
                for r in results
            ]
        return [
            {"type": "function_call_output", "call_id": r["tool_use_id"], "output": tool_result_text(r.get("content"))}
            for r in results
        ]


def error_message(e: object) -> str:
    """An openai ``APIStatusError``'s message: the body's ``error.type: error.message`` when it has one."""
    body = getattr(e, "body", None)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(body, dict) and err is None and "message" in body:
        err = body  # (the SDK hands over the body's `error` object itself)
    if isinstance(err, dict) and err.get("message"):
        kind = err.get("type") or err.get("code")
        return f"{kind}: {err.get('message')}" if kind else str(err.get("message"))
    return str(getattr(e, "message", e))

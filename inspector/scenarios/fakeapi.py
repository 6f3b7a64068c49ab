"""The fake Messages API's decisions, in one place, for both of its transports: ``inspector serve`` (uvicorn,
``inspector.net.serve``) and the in-process ``httpx2`` transport the dashboard uses
(``inspector.scenarios.transport``).

What a request gets is decided here, without I/O: the API's 401 / 400 / 404 answers (credentials, version, body
fields, nesting depth, unknown model, history rules), the turn a request asks for (its number of assistant
messages), the attempt key (a retry of the same request is the next attempt), the request ids (unique per
response), the ``anthropic-ratelimit-*`` headers and the token count of ``count_tokens``. The transports only move
bytes: they read the request, call these, and send the plan ``render`` made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from inspector.stream.history import history_violation

from .render_openai import seed_digest

if TYPE_CHECKING:
    from genai_prices.types import Provider

__all__ = [
    "MAX_DEPTH",
    "Decision",
    "FakeApi",
    "OnceOwner",
    "RateLimits",
    "RequestIds",
    "body_problem",
    "chat_history_problem",
    "count_input_tokens",
    "openai_credentials_problem",
    "openai_decision",
    "openai_error_body",
    "openai_turn_of",
    "responses_history_problem",
    "credentials_problem",
    "error_body",
    "known_model",
    "load_catalogue",
    "message_seed",
    "messages_decision",
    "nesting_depth",
    "nesting_problem",
    "request_digest",
    "turn_of",
]

log = logging.getLogger("inspector.fakeapi")

# What a request's attempts are counted by (FakeApi.select): the scenario name, the faults and the session, then the
# turn and the digest of its messages ("request"), or the name and the turn ("turn"); an OpenAI family first.
AttemptKey = tuple[str | int, ...]
_Item = TypeVar("_Item", bound=Hashable)  # a hit-once item (FakeApi.hold_once): opaque to the core

# The deepest JSON a request may nest (objects and arrays). orjson writes at most 255 levels and reads at most 1024;
# past this depth the fake API answers 400 instead of failing in a serializer (a plain-text 500).
MAX_DEPTH = 200


def credentials_problem(headers: Mapping[str, str]) -> tuple[int, str, str] | None:
    """The API's answer to a request without credentials or without ``anthropic-version`` (None: fine)."""
    if not (headers.get("x-api-key") or "").strip() and not (headers.get("authorization") or "").strip():
        return 401, "authentication_error", "x-api-key header is required"
    if not (headers.get("anthropic-version") or "").strip():
        return 400, "invalid_request_error", "anthropic-version: header is required"
    return None


def body_problem(body: dict[str, Any], *, messages: bool = True, max_tokens: bool = True) -> str | None:
    """The API's 400 message for a Messages request body with a missing or wrongly typed required field.
    ``messages=False``: leave ``messages`` to the history rules (:func:`history_violation`). ``max_tokens=False``:
    a body without it is fine (``count_tokens`` takes none)."""
    names = ["model"] + (["max_tokens"] if max_tokens else []) + (["messages"] if messages else [])
    for name in names:
        if name not in body:
            return f"{name}: Field required"
    model = body["model"]
    if not isinstance(model, str):
        return "model: Input should be a valid string"
    if not model:
        return "model: String should have at least 1 character"
    if max_tokens or "max_tokens" in body:
        n = body["max_tokens"]
        if isinstance(n, bool) or not isinstance(n, int):
            return "max_tokens: Input should be a valid integer"
        if n < 1:
            return "max_tokens: Input should be greater than or equal to 1"
    if messages and not isinstance(body["messages"], list):
        return "messages: Input should be a valid list"
    if "stream" in body and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    if "system" in body and not isinstance(body["system"], (str, list)):
        return "system: Input should be a valid string or a valid list"
    if "tools" in body and not isinstance(body["tools"], list):
        return "tools: Input should be a valid list"
    return None


def nesting_depth(value: object, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (a scalar: 0, ``[]``: 1), counted without recursion; stops counting past ``limit``
    (the result is then ``limit + 1``)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Iterable[object] = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        d += 1
        if d > deepest:
            deepest = d
            if deepest > limit:
                return limit + 1
        stack.extend((c, d) for c in children if isinstance(c, (dict, list)))
    return deepest


def nesting_problem(value: object, limit: int = MAX_DEPTH) -> str | None:
    """The 400 message for a body that nests deeper than ``limit`` levels (None: fine)."""
    if nesting_depth(value, limit) > limit:
        return f"request body nests deeper than {limit} levels"
    return None


def count_input_tokens(body: Mapping[str, Any]) -> int:
    """An estimate of the input tokens of a Messages request: everything the model reads (system, tools,
    tool_choice, messages), about 4 bytes of JSON a token, at least 1. The same estimate feeds the
    ``anthropic-ratelimit-tokens-*`` headers."""
    held = {k: body[k] for k in ("system", "tools", "tool_choice", "messages") if k in body}
    try:
        size = len(orjson.dumps(held))
    except TypeError:  # deeper than orjson writes: callers check nesting first; count the repr instead
        size = len(repr(held))
    return max(1, math.ceil(size / 4))


_CATALOGUE_LOCK = threading.Lock()
_catalogue: Provider | None = None
_openai_catalogue_: Provider | None = None
_catalogue_warned = False


def load_catalogue() -> None:
    """Load the model catalogue now (a third of a second), not in the first request's handler: a server calls it
    when it is built, so its event loop never waits for it."""
    try:
        _anthropic_catalogue()
        _openai_catalogue()
    except Exception:  # known_model says "known" when the catalogue cannot load
        log.warning("genai-prices' model catalogue did not load: every model is taken as known", exc_info=True)


def _anthropic_catalogue() -> Provider:
    """genai-prices' Anthropic provider (its model list and match rules), loaded once, lazily."""
    global _catalogue
    with _CATALOGUE_LOCK:
        if _catalogue is None:
            from genai_prices.data_snapshot import get_snapshot

            _catalogue = get_snapshot().find_provider(None, "anthropic", None)
        return _catalogue


def _openai_catalogue() -> Provider:
    """genai-prices' OpenAI provider, loaded once, lazily."""
    global _openai_catalogue_
    with _CATALOGUE_LOCK:
        if _openai_catalogue_ is None:
            from genai_prices.data_snapshot import get_snapshot

            _openai_catalogue_ = get_snapshot().find_provider(None, "openai", None)
        return _openai_catalogue_


def _loaded(load: Callable[[], Provider]) -> Provider | None:
    """A genai-prices catalogue, or None when it cannot load (said once in the log: every model is then known)."""
    global _catalogue_warned
    try:
        return load()
    except Exception:  # whatever the data snapshot raises: a catalogue that cannot load must not 404 every request
        if not _catalogue_warned:
            _catalogue_warned = True
            log.warning("genai-prices' model catalogue did not load: every model is taken as known", exc_info=True)
        return None


def known_openai_model(model: str, extra: Iterable[str] = ()) -> bool:
    """Whether OpenAI (or this server: the scenarios' models, ``extra``) would know ``model``."""
    if model in extra:
        return True
    catalogue = _loaded(_openai_catalogue)
    return catalogue is None or catalogue.find_model(model) is not None


def known_model(model: str, extra: Iterable[str] = ()) -> bool:
    """Whether the API would know ``model``: one of ``extra`` (the scenarios' and the recording's models) or an
    Anthropic model of genai-prices' catalogue (ids, dated ids and aliases, by its match rules)."""
    if model in extra:
        return True
    catalogue = _loaded(_anthropic_catalogue)
    return catalogue is None or catalogue.find_model(model) is not None


def turn_of(messages: list[Any]) -> int:
    """The turn a request asks for: the number of assistant messages in its conversation."""
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def request_digest(messages: object) -> str:
    """What makes two requests "the same request" (a retry): a digest of the messages, keys sorted."""
    return hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()


def error_body(
    etype: str, message: str, request_id: str | None = None, details: Mapping[str, Any] | None = None
) -> bytes:
    """The API's error body: ``{"type": "error", "error": {"type", "message"}, "request_id"}`` (``details``: the
    error's ``details`` object, e.g. a thread rejection's ``{"error_code": "thread_not_found"}``)."""
    error: dict[str, Any] = {"type": etype, "message": message}
    if details:
        error["details"] = dict(details)
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return orjson.dumps(body)


_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


class RequestIds:
    """Request ids unique per response, shaped like the API's (``req_011C`` + 20 characters): 12 characters that
    name the server (random, or from ``seed`` for reproducible tests) and a counter. Thread-safe."""

    def __init__(self, seed: str | None = None) -> None:
        raw = hashlib.sha256(seed.encode() if seed is not None else os.urandom(32)).digest()
        self._prefix = "".join(_B36[b % 36] for b in raw[:12])
        self._n = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            n = self._n
            self._n += 1
        digits = []
        for _ in range(8):
            n, r = divmod(n, 36)
            digits.append(_B36[r])
        return f"req_011C{self._prefix}{''.join(reversed(digits))}"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float) -> str:
    """OpenAI's reset duration: ``6m0s``, ``1s``, ``20ms``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class RateLimits:
    """The ``anthropic-ratelimit-requests-*`` and ``-tokens-*`` headers harnesses pace themselves by: a limit per
    minute, what remains of it in the current minute (this server's requests and their input tokens, by
    :func:`count_input_tokens`) and when it resets (RFC 3339). A scripted 429 is consistent with them: its
    remaining count is 0 and the reset is its retry-after away. ``clock``: wall-clock seconds. Thread-safe."""

    def __init__(
        self,
        requests_limit: int = 4000,
        tokens_limit: int = 2_000_000,
        window: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.requests_limit, self.tokens_limit, self.window = requests_limit, tokens_limit, window
        self.clock = clock
        self._start: float | None = None
        self._requests = 0
        self._tokens = 0
        self._lock = threading.Lock()

    def headers(
        self, tokens: int, *, limited: bool = False, retry_after: float | None = None, family: str = "anthropic"
    ) -> dict[str, str]:
        """Count one request of ``tokens`` input tokens and return its headers. ``limited``: the answer is a
        scripted 429 (nothing remains until ``retry_after`` seconds from now)."""
        now = self.clock()
        with self._lock:
            if self._start is None or now >= self._start + self.window:
                self._start, self._requests, self._tokens = now, 0, 0
            reset = self._start + self.window
            if limited:
                reset = now + (retry_after if retry_after is not None and retry_after > 0 else reset - now)
                requests_left = tokens_left = 0
            else:
                self._requests += 1
                self._tokens += max(0, tokens)
                requests_left = max(0, self.requests_limit - self._requests)
                tokens_left = max(0, self.tokens_limit - self._tokens)
        if family != "anthropic":  # OpenAI's names; the resets are durations ("6m0s", "1s")
            wait = _duration(max(0.0, reset - now))
            return {
                "x-ratelimit-limit-requests": str(self.requests_limit),
                "x-ratelimit-remaining-requests": str(requests_left),
                "x-ratelimit-reset-requests": wait,
                "x-ratelimit-limit-tokens": str(self.tokens_limit),
                "x-ratelimit-remaining-tokens": str(tokens_left),
                "x-ratelimit-reset-tokens": wait,
            }
        stamp = _rfc3339(math.ceil(reset))
        return {
            "anthropic-ratelimit-requests-limit": str(self.requests_limit),
            "anthropic-ratelimit-requests-remaining": str(requests_left),
            "anthropic-ratelimit-requests-reset": stamp,
            "anthropic-ratelimit-tokens-limit": str(self.tokens_limit),
            "anthropic-ratelimit-tokens-remaining": str(tokens_left),
            "anthropic-ratelimit-tokens-reset": stamp,
        }


@dataclass(frozen=True, slots=True)
class OnceOwner:
    """The request that took a hit-once fault: its attempt key and how the diagnostics name it."""

    key: AttemptKey
    where: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What a Messages request gets before rendering: a rejection (``status`` >= 400, ``etype``, ``message``,
    history ``kind``) or the turn to answer (``status`` 0)."""

    status: int = 0
    etype: str = ""
    message: str = ""
    kind: str | None = None
    history: str = "not checked"  # ok | off | <violation kind> | not checked
    turn: int | None = None
    messages: list[Any] | None = None
    attempt: int | None = None  # set by FakeApi.select
    ended: bool = False  # past the script's last turn (a placeholder reply, or a 400 when strict)
    param: str | None = None  # OpenAI errors: the parameter at fault
    code: str | None = None  # OpenAI errors: the error code
    key: AttemptKey | None = None  # set by FakeApi.select: what its attempts are counted by (a retry has the same key)
    group: AttemptKey | None = (
        None  # set by FakeApi.select: the key without the turn and the messages (a fault's @once)
    )
    details: Mapping[str, Any] | None = None  # the error's ``details`` (a thread rejection's error_code)
    seed: str = ""  # what seeds the answer's message and tool ids: its conversation's (message_seed)
    thread: str | None = None  # the request's thread: create | continue | None (its reply is kept for a continue)
    thread_bytes: int = 0  # a threaded request: the JSON size of its own messages (what holding its reply adds)

    @property
    def rejected(self) -> bool:
        return self.status != 0


def _reject(status: int, etype: str, message: str, kind: str | None = None, history: str = "not checked") -> Decision:
    return Decision(status, etype, message, kind, history)


# A Messages thread (the ``thread`` field, the anthropic SDK's beta message threads: its tool runner's default):
# ``{"type": "create"}`` asks the server to keep the conversation under the reply's id, and
# ``{"type": "continue", "previous_message_id": ...}`` sends only what is new after that reply. The fake API keeps
# each threaded reply's whole history (the request's, then the reply) under its message id, so that a continue is
# checked, counted and answered as the whole history it stands for; an id it does not hold is the API's
# ``thread_not_found`` (the SDK then replays the whole history under a new thread).
THREAD_NOT_FOUND = "thread_not_found"
# the bytes of request messages the held threads may keep in all (their JSON size: each request's own messages, a
# continue's held ones being shared with the reply it continues); the oldest are forgotten past it, whatever their
# number (a thread forgotten is the API's thread_not_found: the SDK sends the whole history again)
THREAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HeldThread:
    """What a threaded reply's id continues: the whole history up to and with the reply, its id seed, and the bytes
    it added to what is held (``THREAD_BYTES``)."""

    messages: list[Any]
    seed: str
    size: int = 0


def _thread_problem(thread: object) -> str | None:
    """The 400 message for a ``thread`` field that is neither a ``create`` nor a ``continue`` (None: fine)."""
    if not isinstance(thread, dict):
        return "thread: Input should be a valid dictionary or object"
    kind = thread.get("type")
    if kind == "create":
        return None
    if kind != "continue":
        return "thread.type: Input should be 'create' or 'continue'"
    previous = thread.get("previous_message_id")
    if previous is None:
        return "thread.previous_message_id: Field required"
    if not isinstance(previous, str) or not previous:
        return "thread.previous_message_id: Input should be a valid non-empty string"
    return None


def message_seed(body: Mapping[str, Any]) -> str:
    """What seeds the message and tool ids of a Messages answer that starts or resends its conversation: a digest
    of its ``system`` and first message (the same on each turn of a conversation that sends its whole history, and
    different for two conversations that start differently), so that two conversations served together never share
    a message id (a thread's ``previous_message_id`` would name the other's reply). A ``continue`` takes the seed of
    the thread it continues. "" when the body has no messages."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ""
    return seed_digest([body.get("system"), messages[0]])


def messages_decision(
    body: Any,
    *,
    lenient: bool = False,
    validate_history: bool = True,
    models: Iterable[str] | None = None,
    max_tokens_required: bool = True,
    held_thread: Callable[[str], HeldThread | None] | None = None,
) -> Decision:
    """The checks of ``POST /v1/messages`` (and ``count_tokens``, ``max_tokens_required=False``) on a parsed body,
    in the API's order: a JSON object, nesting depth, required fields (not when ``lenient``), the model (``models``:
    the extra known ids; None: any model), the thread (``held_thread``: the history a reply id continues; None:
    unknown, a 404 ``thread_not_found``), the history rules (``validate_history``) on the whole history. The turn
    when it passes; ``Decision.messages`` is the whole history (a continue's held one, then its messages)."""
    if not isinstance(body, dict):
        return _reject(400, "invalid_request_error", "request body must be a JSON object")
    deep = nesting_problem(body)
    if deep is not None:
        return _reject(400, "invalid_request_error", deep)
    if not lenient:
        problem = body_problem(body, messages=not validate_history, max_tokens=max_tokens_required)
        if problem is not None:
            return _reject(400, "invalid_request_error", problem)
        model = body.get("model")
        if models is not None and isinstance(model, str) and not known_model(model, models):
            return _reject(404, "not_found_error", f"model: {model}")
    messages = body.get("messages")
    thread_kind: str | None = None
    previous = ""
    seed = ""
    thread = body.get("thread")
    if thread is not None:
        bad = _thread_problem(thread)
        if bad is not None:
            if not lenient:
                return _reject(400, "invalid_request_error", bad)
        elif isinstance(thread, dict):
            thread_kind = thread["type"]
            previous = thread.get("previous_message_id") or ""
    thread_bytes = 0
    if thread_kind is not None:  # (what keeping its reply for a continue holds: THREAD_BYTES bounds the sum)
        try:
            thread_bytes = len(orjson.dumps(messages))
        except (TypeError, orjson.JSONEncodeError):  # (an integer past 64 bits, too deep: counted by its repr)
            thread_bytes = len(repr(messages))
    if thread_kind == "continue":
        held = held_thread(previous) if held_thread is not None else None
        if held is None:
            return Decision(
                404,
                "not_found_error",
                f"thread.previous_message_id: no thread holds message {previous!r} (not created with "
                '{"type": "create"}, or forgotten)',
                details={"error_code": THREAD_NOT_FOUND},
            )
        seed = held.seed
        if isinstance(messages, list):
            messages = [*held.messages, *messages]
    if validate_history:
        v = history_violation(messages)
        if v is not None:
            return _reject(400, "invalid_request_error", v.message, v.kind, v.kind)
        history = "ok"
    else:
        history = "off"
        if not isinstance(messages, list):
            return _reject(400, "invalid_request_error", "messages: Field required", history=history)
    assert isinstance(messages, list)
    if thread_kind != "continue":
        seed = message_seed(body)
    return Decision(
        history=history,
        turn=turn_of(messages),
        messages=messages,
        seed=seed,
        thread=thread_kind,
        thread_bytes=thread_bytes,
    )


# --- the OpenAI family (/v1/chat/completions, /v1/responses) ----------------------------------------------------

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ASSISTANT_ITEMS = ("function_call", "reasoning")


def openai_credentials_problem(headers: Mapping[str, str]) -> tuple[int, str, str] | None:
    """OpenAI's 401 for a request without a bearer key (an ``x-api-key`` header does not count)."""
    auth = (headers.get("authorization") or "").strip()
    scheme, _, key = auth.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return (
            401,
            "invalid_request_error",
            "You didn't provide an API key. You need to provide your API key in an Authorization header using "
            "Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
    return None


def openai_error_body(etype: str, message: str, param: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return orjson.dumps({"error": {"message": message, "type": etype, "param": param, "code": code}})


def _is_assistant_item(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    return item.get("role") == "assistant" or item.get("type") in _ASSISTANT_ITEMS


def openai_turn_of(api: str, history: object) -> int:
    """The turn an OpenAI request asks for: its assistant messages (chat ``messages``), or its runs of assistant
    output items (Responses ``input``: an assistant message, ``function_call`` and ``reasoning`` items in a row
    are the output of one response, one turn; a string input is turn 0)."""
    if not isinstance(history, list):
        return 0
    if api == "chat":
        return turn_of(history)
    runs, inside = 0, False
    for item in history:
        here = _is_assistant_item(item)
        if here and not inside:
            runs += 1
        inside = here
    return runs


def chat_history_problem(messages: list[Any]) -> tuple[str, str | None, str | None] | None:
    """OpenAI's 400 (message, param, code) for a chat history that breaks its rules: an unknown role, an assistant
    ``tool_calls`` message not followed by a ``tool`` message for each of its calls, a ``tool`` message that
    answers no pending call."""
    if not messages:
        return (
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            "messages",
            "empty_array",
        )
    pending: dict[str, int] = {}  # tool_call_id -> index of the assistant message that made it
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"Invalid type for 'messages[{i}]': expected an object.", f"messages.[{i}]", "invalid_type"
        role = m.get("role")
        if role not in CHAT_ROLES:
            return (
                f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', "
                "and 'developer'.",
                f"messages.[{i}].role",
                "invalid_value",
            )
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                    "'tool_calls'.",
                    f"messages.[{i}].role",
                    None,
                )
            del pending[call_id]
            continue
        if pending:
            first = min(pending.values())
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
                f"messages.[{first}].role",
                None,
            )
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                # OpenAI's own 400 for it (a fuzz case: `"tool_calls": true` raised TypeError in the handler)
                return (
                    f"Invalid type for 'messages[{i}].tool_calls': expected an array of objects, but got "
                    f"{_json_type_name(calls)} instead.",
                    f"messages[{i}].tool_calls",
                    "invalid_type",
                )
            for call in calls or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    pending[call["id"]] = i
    if pending:
        first = min(pending.values())
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
            f"messages.[{first}].role",
            None,
        )
    return None


def _json_type_name(v: object) -> str:
    """How OpenAI's errors name a JSON value's type ("a boolean", "a string", ...)."""
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number" if isinstance(v, float) else "an integer"
    if isinstance(v, str):
        return "a string"
    return "an object" if isinstance(v, dict) else "null" if v is None else "an array"


def responses_history_problem(items: object, *, continued: bool = False) -> tuple[str, str | None, str | None] | None:
    """OpenAI's 400 for a Responses ``input`` whose function calls and outputs do not pair: a ``function_call``
    without a later ``function_call_output`` of its ``call_id``, an output without its call (not checked when the
    request continues a stored response, ``continued``: the call is in that response)."""
    if not isinstance(items, list):
        return None
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        kind, call_id = item.get("type"), item.get("call_id")
        if kind == "function_call" and isinstance(call_id, str):
            calls[call_id] = 1
        elif kind == "function_call_output":
            if not isinstance(call_id, str) or (call_id not in calls and not continued):
                return f"No tool call found for function call output with call_id {call_id}.", "input", None
            answered.add(call_id)
    missing = [c for c in calls if c not in answered]
    if missing:
        return f"No tool output found for function call {missing[0]}.", "input", None
    return None


def _choices_problem(n: object) -> tuple[str, str | None] | None:
    """OpenAI's 400 (message, code) for a chat request's ``n`` that is not an integer from 1 to 128."""
    from .render_openai import MAX_CHOICES

    if isinstance(n, bool) or not isinstance(n, int):
        return f"Invalid type for 'n': expected an integer, but got {type(n).__name__} instead.", "invalid_type"
    if n < 1:
        return f"{n} is less than the minimum of 1 - 'n'", None
    if n > MAX_CHOICES:
        return f"{n} is greater than the maximum of {MAX_CHOICES} - 'n'", None
    return None


def _openai_reject(message: str, param: str | None = None, code: str | None = None, status: int = 400) -> Decision:
    return Decision(status, "invalid_request_error", message, param=param, code=code)


def openai_decision(
    body: Any,
    api: str,
    *,
    lenient: bool = False,
    validate_history: bool = True,
    models: Iterable[str] | None = None,
    previous_turn: Callable[[str], int | None] | None = None,
) -> Decision:
    """The checks of ``POST /v1/chat/completions`` (``api="chat"``) and ``POST /v1/responses``
    (``api="responses"``) on a parsed body, as OpenAI answers them: a JSON object, nesting depth, ``model`` and
    ``messages`` / ``input`` (not when ``lenient``), the model (``models``: the extra known ids; None: any), the
    history rules (``validate_history``). ``previous_turn``: the turn a stored response id answered (Responses'
    ``previous_response_id``; None: unknown, a 400). The turn when it passes; ``Decision.messages`` is what makes
    two requests the same (the history, and the previous response id)."""
    if not isinstance(body, dict):
        return _openai_reject("We could not parse the JSON body of your request.", None, None)
    deep = nesting_problem(body)
    if deep is not None:
        return _openai_reject(deep)
    field = "messages" if api == "chat" else "input"
    history = body.get(field)
    if not lenient:
        model = body.get("model")
        if "model" not in body:
            return _openai_reject(
                "you must provide a model parameter" if api == "chat" else "Missing required parameter: 'model'.",
                None if api == "chat" else "model",
                None if api == "chat" else "missing_required_parameter",
            )
        if not isinstance(model, str) or not model:
            return _openai_reject("Invalid type for 'model': expected a string.", "model", "invalid_type")
        if field not in body and not (api == "responses" and body.get("previous_response_id")):
            return _openai_reject(f"Missing required parameter: '{field}'.", field, "missing_required_parameter")
        if api == "chat" and not isinstance(history, list):
            return _openai_reject("Invalid type for 'messages': expected an array.", "messages", "invalid_type")
        if api == "responses" and field in body and not isinstance(history, (str, list)):
            return _openai_reject("Invalid type for 'input': expected a string or an array.", "input", "invalid_type")
        if "stream" in body and not isinstance(body["stream"], bool):
            return _openai_reject("Invalid type for 'stream': expected a boolean.", "stream", "invalid_type")
        if "tools" in body and not isinstance(body["tools"], list):
            return _openai_reject("Invalid type for 'tools': expected an array.", "tools", "invalid_type")
        if api == "chat" and body.get("n") is not None:
            bad_n = _choices_problem(body["n"])
            if bad_n is not None:
                return _openai_reject(bad_n[0], "n", bad_n[1])
        if models is not None and not known_openai_model(model, models):
            return Decision(
                404,
                "invalid_request_error",
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
    base = 0
    previous = body.get("previous_response_id") if api == "responses" else None
    if previous is not None:
        turn_before = previous_turn(previous) if previous_turn is not None and isinstance(previous, str) else None
        if turn_before is None:
            return _openai_reject(
                f"Previous response with id '{previous}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        base = turn_before + 1
    items = history if isinstance(history, list) else []
    if validate_history:
        problem = (
            chat_history_problem(items)
            if api == "chat"
            else responses_history_problem(items, continued=previous is not None)
        )
        if problem is not None:
            message, param, code = problem
            return Decision(
                400,
                "invalid_request_error",
                message,
                kind="openai_history",
                history="openai_history",
                param=param,
                code=code,
            )
        history_state = "ok"
    else:
        history_state = "off"
        if api == "chat" and not isinstance(history, list):
            return _openai_reject("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    key = [previous, history] if previous is not None else history
    return Decision(history=history_state, turn=base + openai_turn_of(api, history), messages=[key])


class FakeApi:
    """The fake Messages API's core, shared by its two transports (``inspector serve``'s uvicorn app and the
    in-process ``httpx2`` transport): it validates a request (:func:`messages_decision`), chooses its turn and
    attempt (:meth:`select`; a retry of the same request is the next attempt) and makes the answer's headers
    (:meth:`response_headers`). The transports read bytes, render the chosen (turn, attempt) and move the bytes:
    stream them with their pacing, or break the connection for a planned drop, each its own way.

    ``lenient``: no body-field or model checks. ``strict``: past the script's last turn, a 400 (else the transport
    serves a placeholder reply). ``stream_only``: ``stream`` must be true (the in-process server streams only).
    ``attempts_by``: ``"request"`` counts attempts per identical request (scenario, faults, session, turn,
    messages), ``"turn"`` per turn. ``history``: the most attempt counters kept (the oldest are dropped).
    ``models``: the extra model ids known (None: any model). ``request_ids`` / ``ratelimits``: give every answer a
    request id of its own / the rate-limit headers (None: the rendered headers as they are)."""

    def __init__(
        self,
        *,
        validate_history: bool = True,
        lenient: bool = False,
        strict: bool = False,
        stream_only: bool = False,
        attempts_by: str = "request",
        history: int = 10_000,
        models: Callable[[], Iterable[str]] | None = None,
        request_ids: RequestIds | None = None,
        ratelimits: RateLimits | None = None,
    ) -> None:
        if attempts_by not in ("request", "turn"):
            raise ValueError(f"attempts_by must be 'request' or 'turn', not {attempts_by!r}")
        self.validate_history, self.lenient, self.strict = validate_history, lenient, strict
        self.stream_only, self.attempts_by, self.history = stream_only, attempts_by, history
        self.models = models
        self.request_ids, self.ratelimits = request_ids, ratelimits
        self.attempts: OrderedDict[AttemptKey, int] = OrderedDict()
        self.attempts_dropped = 0
        self.responses: OrderedDict[str, int] = OrderedDict()  # Responses ids answered -> their turn (bounded)
        self.threads: OrderedDict[str, HeldThread] = OrderedDict()  # threaded replies' ids -> their history (bounded)
        self.thread_bytes = 0  # what the held threads hold (their sizes' sum: at most THREAD_BYTES)
        self.once: OrderedDict[tuple[AttemptKey, Hashable], OnceOwner] = (
            OrderedDict()
        )  # (group, @once item) -> the request that took it
        self._lock = threading.Lock()

    def check(self, body: Any, *, max_tokens_required: bool = True) -> Decision:
        """The API's checks of a parsed body (:func:`messages_decision` with this core's settings)."""
        return messages_decision(
            body,
            lenient=self.lenient,
            validate_history=self.validate_history,
            models=None if self.models is None else self.models(),
            max_tokens_required=max_tokens_required,
            held_thread=self.held_thread,
        )

    def check_openai(self, body: Any, api: str) -> Decision:
        """OpenAI's checks of a parsed ``/v1/chat/completions`` (``api="chat"``) or ``/v1/responses`` body
        (:func:`openai_decision` with this core's settings and its stored response ids)."""
        return openai_decision(
            body,
            api,
            lenient=self.lenient,
            validate_history=self.validate_history,
            models=None if self.models is None else self.models(),
            previous_turn=self.previous_turn,
        )

    def remember_response(self, response_id: str, turn: int) -> None:
        """A Responses answer's id and its turn, for a later ``previous_response_id`` (the oldest are dropped)."""
        self._keep(self.responses, response_id, turn)

    def previous_turn(self, response_id: str) -> int | None:
        with self._lock:
            return self.responses.get(response_id)

    def remember_reply(self, decision: Decision, reply: Mapping[str, Any]) -> None:
        """Keep a threaded Messages reply (``decision.thread`` create or continue; ``reply``: the Message it
        assembles to) for a later ``thread.continue`` naming its id: the request's whole history, then the reply's
        ``role`` and ``content`` (the oldest are dropped). Not threaded, or without an id: nothing kept."""
        reply_id = reply.get("id")
        if decision.thread is None or decision.messages is None or not isinstance(reply_id, str):
            return
        content = reply.get("content") or []
        message = {"role": "assistant", "content": content}
        # what it holds beyond what is held already: the request's own messages, the reply, a reference per message
        size = decision.thread_bytes + len(repr(content)) + 8 * (len(decision.messages) + 1)
        held = HeldThread([*decision.messages, message], decision.seed, size)
        threads = self.threads
        with self._lock:
            old = threads.pop(reply_id, None)
            self.thread_bytes += held.size - (old.size if old is not None else 0)
            threads[reply_id] = held
            # the oldest forgotten past `history` threads or THREAD_BYTES (the newest stays, whatever its size)
            while len(threads) > 1 and (len(threads) > self.history or self.thread_bytes > THREAD_BYTES):
                self.thread_bytes -= threads.popitem(last=False)[1].size

    def _keep(self, kept: OrderedDict[str, Any], key: str, value: Any) -> None:
        """``kept[key] = value`` as the newest, the oldest dropped past ``history`` (a thread's ids or responses')."""
        with self._lock:
            kept.pop(key, None)
            kept[key] = value
            while len(kept) > self.history:
                kept.popitem(last=False)

    def held_thread(self, message_id: str) -> HeldThread | None:
        with self._lock:
            return self.threads.get(message_id)

    def select(
        self,
        decision: Decision,
        body: dict[str, Any],
        *,
        name: str,
        turns: int,
        faults: str = "none",
        session: str = "",
        family: str = "anthropic",
    ) -> Decision:
        """The turn and attempt of a checked request (or its rejection: ``stream_only``, ``strict`` past the end).
        ``family``: ``anthropic``, ``chat`` or ``responses``: each counts its attempts apart."""
        if decision.rejected:
            return decision
        if self.stream_only and body.get("stream") is not True:
            return dataclasses.replace(
                decision,
                status=400,
                etype="invalid_request_error",
                message="the scenario server only serves stream: true",
            )
        turn = decision.turn
        assert turn is not None and decision.messages is not None
        ended = turn >= turns
        if ended and self.strict:
            return dataclasses.replace(
                decision,
                status=400,
                etype="invalid_request_error",
                message=f"scenario {name!r} has {turns} turns; no turn {turn} (this request has {turn} assistant messages)",
            )
        if self.attempts_by == "turn":
            group: AttemptKey = (name,)
            key: AttemptKey = (name, turn)
        else:
            group = (name, faults, session)
            key = (*group, turn, request_digest(decision.messages))
        if family != "anthropic":
            group, key = (family, *group), (family, *key)
        return dataclasses.replace(decision, attempt=self._next_attempt(key), ended=ended, key=key, group=group)

    def decide(self, body: Any, *, name: str, turns: int, faults: str = "none", session: str = "") -> Decision:
        """:meth:`check`, then :meth:`select`."""
        decision = self.check(body)
        if decision.rejected:
            return decision
        return self.select(decision, body, name=name, turns=turns, faults=faults, session=session)

    def _next_attempt(self, key: AttemptKey) -> int:
        with self._lock:
            attempt = self.attempts.pop(key, 0)
            self.attempts[key] = attempt + 1  # most recently used last
            while len(self.attempts) > self.history:
                self.attempts.popitem(last=False)
                self.attempts_dropped += 1
        return attempt

    def reset(self) -> None:
        """Forget the attempt counters (the next request of every turn is attempt 0 again) and re-arm the faults
        that hit once."""
        with self._lock:
            self.attempts.clear()
            self.once.clear()

    def hold_once(
        self,
        decision: Decision,
        items: Sequence[_Item],
        changes: Callable[[list[_Item], _Item], bool],
        where: str,
    ) -> tuple[list[_Item], dict[_Item, str]]:
        """Which of a request's hit-once items (a fault with ``@once``: opaque here) are in effect for it, and a note
        on each: ``fired here`` (the first answer the item changes: this request's key takes it), ``held`` (a
        retry of that request: still in effect, so the retries are numbered as before), ``spent at WHERE`` (another
        request took it: not in effect), ``armed`` (it would not change this answer: not taken yet).
        ``changes(held, item)``: whether ``item`` changes this request's answer, given the ``held`` items.
        ``where``: how the diagnostics name this request. One item is taken by one request key for the life of
        this core (:meth:`reset` re-arms them; ``history`` bounds how many are kept)."""
        assert decision.key is not None and decision.group is not None, "hold_once needs a selected decision"
        owners: dict[_Item, OnceOwner | None] = {}
        with self._lock:
            for item in items:
                owners[item] = self.once.get((decision.group, item))
        held = [item for item in items if (o := owners[item]) is not None and o.key == decision.key]
        notes: dict[_Item, str] = {}
        for item in items:
            owner = owners[item]
            if owner is None:
                if not changes(list(held), item):
                    notes[item] = "armed"
                    continue
                with self._lock:  # the first request to take it wins (another may have, meanwhile)
                    owner = self.once.setdefault((decision.group, item), OnceOwner(decision.key, where))
                    while len(self.once) > self.history:
                        self.once.popitem(last=False)
                if owner.key == decision.key:
                    held.append(item)
            if owner.key != decision.key:
                notes[item] = f"spent at {owner.where}"
            else:
                notes[item] = "fired here" if owner.where == where else f"held (fired at {owner.where})"
        return [item for item in items if item in held], notes

    def openai_request_id(self) -> str:
        """A request id of OpenAI's shape (``req_`` + 32 hex digits), unique per response."""
        rid = self.request_ids.next() if self.request_ids is not None else os.urandom(16).hex()
        return "req_" + hashlib.sha256(rid.encode()).hexdigest()[:32]

    def response_headers(
        self,
        plan_status: int,
        headers: Mapping[str, str],
        error: bytes,
        body: Any,
        *,
        speed: float = 1.0,
        family: str = "anthropic",
    ) -> tuple[dict[str, str], bytes]:
        """An answer's headers and error body: the rendered ones with a request id of its own (the same in the
        header and the error body), retry-after divided by ``speed`` and the rate-limit headers (a scripted 429
        has nothing remaining until its retry-after), as this core is set up."""
        out = dict(headers)
        if family != "anthropic":  # OpenAI: x-request-id and x-ratelimit-* (the error body holds no id)
            if self.request_ids is not None:
                out["x-request-id"] = self.openai_request_id()
            if plan_status != 200:
                scale_retry_headers(out, speed)
            if self.ratelimits is not None:
                tokens = count_input_tokens(body) if isinstance(body, dict) else 1
                limited = plan_status == 429
                out.update(
                    self.ratelimits.headers(tokens, limited=limited, retry_after=retry_after_of(out), family="openai")
                )
            return out, error
        if self.request_ids is not None:
            rid = self.request_ids.next()
            rendered = out.get("request-id")
            if rendered and error:
                error = error.replace(rendered.encode(), rid.encode())
            out["request-id"] = rid
        if plan_status != 200:
            scale_retry_headers(out, speed)
        if self.ratelimits is not None:
            tokens = count_input_tokens(body) if isinstance(body, dict) else 1
            limited = plan_status == 429
            out.update(self.ratelimits.headers(tokens, limited=limited, retry_after=retry_after_of(out)))
        return out, error


def retry_after_of(headers: Mapping[str, str]) -> float | None:
    """Seconds a response asks the client to wait (retry-after-ms, else retry-after in seconds), None if neither."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers[name]) / scale
        except (KeyError, ValueError):
            continue
    return None


def scale_retry_headers(headers: dict[str, str], speed: float) -> None:
    """retry-after(-ms) divided by the speed, so scripted waits follow the playback speed (in place)."""
    if speed == 1.0:
        return
    if "retry-after-ms" in headers:
        ms = float(headers["retry-after-ms"])
        headers["retry-after-ms"] = "1" if math.isinf(speed) else f"{max(1.0, ms / speed):g}"
    if "retry-after" in headers:
        try:
            secs = float(headers["retry-after"])
        except ValueError:
            return
        headers["retry-after"] = "0.001" if math.isinf(speed) else f"{max(0.001, secs / speed):g}"

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from inspector.stream.history import history_violation

__all__ = [
    "MAX_DEPTH",
    "Decision",
    "FakeApi",
    "RateLimits",
    "RequestIds",
    "body_problem",
    "count_input_tokens",
    "credentials_problem",
    "error_body",
    "known_model",
    "load_catalogue",
    "messages_decision",
    "nesting_depth",
    "nesting_problem",
    "request_digest",
    "turn_of",
]

log = logging.getLogger("inspector.fakeapi")

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


def body_problem(body: dict, *, messages: bool = True, max_tokens: bool = True) -> str | None:
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


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (a scalar: 0, ``[]``: 1), counted without recursion; stops counting past ``limit``
    (the result is then ``limit + 1``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Iterable[Any] = v.values()
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


def nesting_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
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
_catalogue: Any = None


def load_catalogue() -> None:
    """Load the model catalogue now (a third of a second), not in the first request's handler: a server calls it
    when it is built, so its event loop never waits for it."""
    try:
        _anthropic_catalogue()
    except Exception:  # known_model says "known" when the catalogue cannot load
        log.warning("genai-prices' model catalogue did not load: every model is taken as known", exc_info=True)


def _anthropic_catalogue() -> Any:
    """genai-prices' Anthropic provider (its model list and match rules), loaded once, lazily."""
    global _catalogue
    with _CATALOGUE_LOCK:
        if _catalogue is None:
            from genai_prices.data_snapshot import get_snapshot

            _catalogue = get_snapshot().find_provider(None, "anthropic", None)
        return _catalogue


def known_model(model: str, extra: Iterable[str] = ()) -> bool:
    """Whether the API would know ``model``: one of ``extra`` (the scenarios' and the recording's models) or an
    Anthropic model of genai-prices' catalogue (ids, dated ids and aliases, by its match rules)."""
    if model in extra:
        return True
    try:
        return _anthropic_catalogue().find_model(model) is not None
    except Exception:  # a catalogue that cannot load must not turn every request into a 404
        return True


def turn_of(messages: list) -> int:
    """The turn a request asks for: the number of assistant messages in its conversation."""
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def request_digest(messages: Any) -> str:
    """What makes two requests "the same request" (a retry): a digest of the messages, keys sorted."""
    return hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()


def error_body(etype: str, message: str, request_id: str | None = None) -> bytes:
    """The API's error body: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    body: dict[str, Any] = {"type": "error", "error": {"type": etype, "message": message}}
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
        clock: Any = time.time,
    ) -> None:
        self.requests_limit, self.tokens_limit, self.window = requests_limit, tokens_limit, window
        self.clock = clock
        self._start: float | None = None
        self._requests = 0
        self._tokens = 0
        self._lock = threading.Lock()

    def headers(self, tokens: int, *, limited: bool = False, retry_after: float | None = None) -> dict[str, str]:
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
class Decision:
    """What a Messages request gets before rendering: a rejection (``status`` >= 400, ``etype``, ``message``,
    history ``kind``) or the turn to answer (``status`` 0)."""

    status: int = 0
    etype: str = ""
    message: str = ""
    kind: str | None = None
    history: str = "not checked"  # ok | off | <violation kind> | not checked
    turn: int | None = None
    messages: list | None = None
    attempt: int | None = None  # set by FakeApi.select
    ended: bool = False  # past the script's last turn (a placeholder reply, or a 400 when strict)

    @property
    def rejected(self) -> bool:
        return self.status != 0


def _reject(status: int, etype: str, message: str, kind: str | None = None, history: str = "not checked") -> Decision:
    return Decision(status, etype, message, kind, history)


def messages_decision(
    body: Any,
    *,
    lenient: bool = False,
    validate_history: bool = True,
    models: Iterable[str] | None = None,
    max_tokens_required: bool = True,
) -> Decision:
    """The checks of ``POST /v1/messages`` (and ``count_tokens``, ``max_tokens_required=False``) on a parsed body,
    in the API's order: a JSON object, nesting depth, required fields (not when ``lenient``), the model (``models``:
    the extra known ids; None: any model), the history rules (``validate_history``). The turn when it passes."""
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
    return Decision(history=history, turn=turn_of(messages), messages=messages)


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
        self.attempts: OrderedDict[tuple, int] = OrderedDict()
        self.attempts_dropped = 0
        self._lock = threading.Lock()

    def check(self, body: Any, *, max_tokens_required: bool = True) -> Decision:
        """The API's checks of a parsed body (:func:`messages_decision` with this core's settings)."""
        return messages_decision(
            body,
            lenient=self.lenient,
            validate_history=self.validate_history,
            models=None if self.models is None else self.models(),
            max_tokens_required=max_tokens_required,
        )

    def select(
        self, decision: Decision, body: dict, *, name: str, turns: int, faults: str = "none", session: str = ""
    ) -> Decision:
        """The turn and attempt of a checked request (or its rejection: ``stream_only``, ``strict`` past the end)."""
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
            key: tuple = (name, turn)
        else:
            key = (name, faults, session, turn, request_digest(decision.messages))
        return dataclasses.replace(decision, attempt=self._next_attempt(key), ended=ended)

    def decide(self, body: Any, *, name: str, turns: int, faults: str = "none", session: str = "") -> Decision:
        """:meth:`check`, then :meth:`select`."""
        decision = self.check(body)
        if decision.rejected:
            return decision
        return self.select(decision, body, name=name, turns=turns, faults=faults, session=session)

    def _next_attempt(self, key: tuple) -> int:
        with self._lock:
            attempt = self.attempts.pop(key, 0)
            self.attempts[key] = attempt + 1  # most recently used last
            while len(self.attempts) > self.history:
                self.attempts.popitem(last=False)
                self.attempts_dropped += 1
        return attempt

    def reset(self) -> None:
        """Forget the attempt counters (the next request of every turn is attempt 0 again)."""
        with self._lock:
            self.attempts.clear()

    def response_headers(
        self, plan_status: int, headers: Mapping[str, str], error: bytes, body: Any, *, speed: float = 1.0
    ) -> tuple[dict[str, str], bytes]:
        """An answer's headers and error body: the rendered ones with a request id of its own (the same in the
        header and the error body), retry-after divided by ``speed`` and the rate-limit headers (a scripted 429
        has nothing remaining until its retry-after), as this core is set up."""
        out = dict(headers)
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

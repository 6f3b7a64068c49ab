"""The in-process fake Messages API: serves a scenario's rendered turns through ``httpx2.MockTransport``.

    server = ScenarioServer(scenario, Pacer(1.0))
    client = make_client(server)           # a real anthropic.AsyncAnthropic, retries and all
    async with client.messages.stream(...) as stream: ...

Turn selection: the turn index is the number of assistant messages in the request's ``messages``; the attempt is
how many requests for that turn the server has already answered. Bodies are timed by the pacer, read by read.
A planned "drop" raises :class:`httpx2.RemoteProtocolError` with h11's message for a chunked body cut short, which is
what httpx2 raises when a real server closes the connection mid-stream.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import httpx2
import orjson

from inspector.pacing import Pacer

from .model import Scenario
from .render import ResponsePlan, render_turn

DROP_MESSAGE = "peer closed connection without sending complete message body (incomplete chunked read)"

State = Literal["pending", "streaming", "hanging", "complete", "dropped", "closed_early"]


def drop_error() -> httpx2.RemoteProtocolError:
    """The exception a dropped connection surfaces as, mid-body, in httpx2 (h11 -> httpcore2 -> httpx2)."""
    return httpx2.RemoteProtocolError(DROP_MESSAGE)


@dataclass(slots=True)
class ServedResponse:
    turn: int
    attempt: int
    status: int
    plan: ResponsePlan | None
    state: State = "pending"
    reads_sent: int = 0
    bytes_sent: int = 0

    @property
    def finished(self) -> bool:
        return self.state in ("complete", "dropped", "closed_early")


@dataclass(slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body (None if it did not parse)
    turn: int | None  # None: rejected before turn selection
    attempt: int | None
    response: ServedResponse | None = None
    rejected: str | None = None  # why the server answered 4xx without consulting the script


class ScenarioStream(httpx2.AsyncByteStream):
    """A response body that follows a ResponsePlan: sleeps (via the pacer) before each read, then yields it."""

    def __init__(self, server: "ScenarioServer", served: ServedResponse, plan: ResponsePlan) -> None:
        self._server = server
        self._served = served
        self._plan = plan
        self._closed = False

    async def __aiter__(self):
        served, plan, pacer = self._served, self._plan, self._server.pacer
        served.state = "streaming"
        for read in plan.reads:
            await pacer.sleep(read.delay)
            if self._closed:
                return
            served.reads_sent += 1
            served.bytes_sent += len(read.data)
            yield read.data
        if plan.end == "drop":
            served.state = "dropped"
            raise drop_error()
        if plan.end == "hang":
            served.state = "hanging"
            await asyncio.Event().wait()  # until the consumer cancels or closes
        served.state = "complete"

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        served = self._served
        all_sent = served.reads_sent == len(self._plan.reads) and self._plan.end == "eof"
        if served.state in ("pending", "streaming", "hanging") and not all_sent:
            served.state = "closed_early"
            self._server._note_closed_early(served)
        elif served.state in ("pending", "streaming") and all_sent:
            served.state = "complete"


class ScenarioServer:
    def __init__(
        self,
        scenario: Scenario,
        pacer: Pacer | None = None,
        *,
        scale_retry_after: bool = True,
        validate_history: bool = True,
    ) -> None:
        self.scenario = scenario
        self.pacer = pacer or Pacer(1.0)
        self.scale_retry_after = scale_retry_after  # retry-after(-ms) headers divided by the pacer speed
        self.validate_history = validate_history  # 400 for a tool_use without its tool_result, like the API
        self.requests: list[RecordedRequest] = []
        self.responses: list[ServedResponse] = []
        self.attempts: dict[int, int] = {}
        self.closed_early: int = 0
        self._closed_early_event: asyncio.Event | None = None

    # --- bookkeeping -------------------------------------------------------------------------------------------
    @property
    def closed_early_event(self) -> asyncio.Event:
        """Set when a consumer closes a response before its body ended (cancel, close, leaving ``async with``)."""
        if self._closed_early_event is None:
            self._closed_early_event = asyncio.Event()
        return self._closed_early_event

    def _note_closed_early(self, served: ServedResponse) -> None:
        self.closed_early += 1
        self.closed_early_event.set()

    def reset(self) -> None:
        self.requests.clear()
        self.responses.clear()
        self.attempts.clear()
        self.closed_early = 0
        self._closed_early_event = None

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)

    # --- the handler -------------------------------------------------------------------------------------------
    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        raw = request.content
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        rec = RecordedRequest(request.method, request.url.path, dict(request.headers), body, None, None)
        self.requests.append(rec)

        if request.method != "POST" or not request.url.path.rstrip("/").endswith("/v1/messages"):
            return self._reject(rec, 404, "not_found_error", f"Not found: {request.method} {request.url.path}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._reject(rec, 400, "invalid_request_error", "request body must be JSON with `messages`")
        if body.get("stream") is not True:
            return self._reject(rec, 400, "invalid_request_error", "the scenario server only serves stream: true")
        messages = body["messages"]
        if self.validate_history:
            problem = history_problem(messages)
            if problem:
                return self._reject(rec, 400, "invalid_request_error", problem)
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        if turn >= len(self.scenario.turns):
            return self._reject(
                rec, 400, "invalid_request_error",
                f"scenario {self.scenario.name!r} has {len(self.scenario.turns)} turns; no turn {turn}")

        attempt = self.attempts.get(turn, 0)
        self.attempts[turn] = attempt + 1
        rec.turn, rec.attempt = turn, attempt
        plan = render_turn(self.scenario, turn, attempt)
        served = ServedResponse(turn, attempt, plan.status, plan)
        rec.response = served
        self.responses.append(served)

        await self.pacer.sleep(plan.header_delay)
        headers = dict(plan.headers)
        if plan.status != 200:
            self._scale_retry_headers(headers)
            served.state = "complete"
            served.reads_sent, served.bytes_sent = len(plan.reads), len(plan.body)
            return httpx2.Response(plan.status, headers=headers, content=plan.body)
        return httpx2.Response(200, headers=headers, stream=ScenarioStream(self, served, plan))

    def _reject(self, rec: RecordedRequest, status: int, etype: str, message: str) -> httpx2.Response:
        rec.rejected = message
        body = orjson.dumps({"type": "error", "error": {"type": etype, "message": message}})
        return httpx2.Response(status, headers={"content-type": "application/json"}, content=body)

    def _scale_retry_headers(self, headers: dict[str, str]) -> None:
        if self.scale_retry_after:
            scale_retry_headers(headers, self.pacer.speed)

    # --- convenience -------------------------------------------------------------------------------------------
    def requests_for(self, turn: int) -> list[RecordedRequest]:
        return [r for r in self.requests if r.turn == turn]


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def history_problem(messages: list) -> str | None:
    """The API's history rule: every tool_use is answered by a tool_result in the very next (user) message, and
    every tool_result answers a tool_use of the previous message. Returns the API-style 400 message, or None."""
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}: role must be 'user' or 'assistant'"
        if i == 0 and msg["role"] != "user":
            return "messages.0: the first message must use the `user` role"
        if msg["role"] == "assistant":
            ids = [b.get("id") for b in _blocks(msg.get("content")) if b.get("type") == "tool_use"]
            if not ids or i + 1 >= len(messages):
                continue
            nxt = messages[i + 1]
            results = [b.get("tool_use_id") for b in _blocks(nxt.get("content")) if b.get("type") == "tool_result"]
            missing = [x for x in ids if x not in results]
            if nxt.get("role") != "user" or missing:
                return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        f"{', '.join(map(str, missing or ids))}. Each `tool_use` block must have a corresponding "
                        f"`tool_result` block in the next message.")
        if msg["role"] == "user":
            results = [b.get("tool_use_id") for b in _blocks(msg.get("content")) if b.get("type") == "tool_result"]
            if results:
                prev = messages[i - 1] if i > 0 else {}
                prev_ids = [b.get("id") for b in _blocks(prev.get("content")) if b.get("type") == "tool_use"]
                extra = [x for x in results if x not in prev_ids]
                if extra:
                    return (f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{', '.join(map(str, extra))}. Each `tool_result` block must have a corresponding "
                            f"`tool_use` block in the previous message.")
    return None


def make_client(server: ScenarioServer, **kw: Any) -> anthropic.AsyncAnthropic:
    """A real AsyncAnthropic whose HTTP goes to ``server`` (keywords override the defaults)."""
    params: dict[str, Any] = {
        "api_key": "scenario-no-key",
        "base_url": "http://scenario.local",
        "http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(server.handler)),
        "max_retries": 2,
    }
    params.update(kw)
    return anthropic.AsyncAnthropic(**params)


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

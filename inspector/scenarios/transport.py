"""The in-process fake Messages API: serves a scenario's rendered turns through ``httpx2.MockTransport``.

    server = ScenarioServer(scenario, Pacer(1.0))
    client = make_client(server)           # a real anthropic.AsyncAnthropic, retries and all
    async with client.messages.stream(...) as stream: ...

Turn selection: the turn index is the number of assistant messages in the request's ``messages``; the attempt is
how many requests for that turn the server has already answered. Bodies are timed by the pacer, read by read.
A planned "drop" raises :class:`httpx2.RemoteProtocolError` with h11's message for a chunked body cut short, which is
what httpx2 raises when a real server closes the connection mid-stream.

Requests are decided by the fake API's core, :class:`inspector.scenarios.fakeapi.FakeApi` (the one ``inspector
serve`` uses): the checks, the history rules, the turn and the attempt. This module is its in-process transport:
the checks' settings are the in-process ones (no credentials or field checks, stream only, a 400 past the script's
end, attempts counted per turn). ``/v1/chat/completions`` and ``/v1/responses`` are answered too (OpenAI's checks
and wire formats, ``render_openai=``; the openai SDK takes ``http_client=httpx2.AsyncClient(transport=...)``).
``render=`` chooses how a turn becomes bytes (``render_turn`` by default;
``FaultedScenarioServer`` passes serve's faulted renderer).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import httpx2
import orjson

from inspector.core.pacing import Pacer
from inspector.stream.assembler import assemble
from inspector.stream.history import history_problem

from .fakeapi import Decision, FakeApi, error_body, openai_error_body, scale_retry_headers
from .model import Scenario
from .render import ResponsePlan, render_turn
from .render_openai import MAX_CHOICES, chat_echo, render_openai_turn, response_echo

__all__ = [
    "DROP_MESSAGE",
    "RecordedRequest",
    "Renderer",
    "ScenarioServer",
    "ScenarioStream",
    "ServedResponse",
    "drop_error",
    "history_problem",
    "make_client",
    "scale_retry_headers",
]

# (scenario, turn index, attempt, the conversation's id seed: "" unless seed_ids) -> the plan to serve; render_turn by
# default
Renderer = Callable[[Scenario, int, int, str], ResponsePlan]
# (scenario, turn index, attempt, api "chat" | "responses", include_usage, the fields a Response echoes, chat's n) -> the
# OpenAI plan; render_openai_turn by default
OpenAIRenderer = Callable[[Scenario, int, int, str, bool, dict[str, Any], int], ResponsePlan]
OPENAI_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


def _render_openai(
    scenario: Scenario, turn: int, attempt: int, api: str, include_usage: bool, echo: dict[str, Any], choices: int = 1
) -> ResponsePlan:
    return render_openai_turn(
        scenario,
        turn,
        attempt,
        api=api,  # type: ignore[arg-type]  # a str of OPENAI_PATHS' values (chat, responses); checked there
        include_usage=include_usage,
        echo=echo,
        choices=choices,
    )


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

    def __init__(self, server: ScenarioServer, served: ServedResponse, plan: ResponsePlan) -> None:
        self._server = server
        self._served = served
        self._plan = plan
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
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
            self._server.note_closed_early(served)
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
        render: Renderer = render_turn,
        render_openai: OpenAIRenderer = _render_openai,
        seed_ids: bool = False,
    ) -> None:
        self.scenario = scenario
        # seed each Messages conversation's message and tool ids as serve does (Decision.seed), so that this
        # server's bytes are serve's; off by default: one agent's conversation gets the scenario's own ids
        self.seed_ids = seed_ids
        self.pacer = pacer or Pacer(1.0)
        self.render = render  # how a (turn, attempt) becomes the plan served (serve's faults pass their own)
        self.render_openai = render_openai  # the same for /v1/chat/completions and /v1/responses
        self.scale_retry_after = scale_retry_after  # retry-after(-ms) headers divided by the pacer speed
        # the fake API's core, as serve uses it, with the in-process settings
        self.api = FakeApi(
            validate_history=validate_history, lenient=True, strict=True, stream_only=True, attempts_by="turn"
        )
        self.requests: list[RecordedRequest] = []
        self.responses: list[ServedResponse] = []
        self.closed_early: int = 0
        self._closed_early_event: asyncio.Event | None = None

    # --- bookkeeping -------------------------------------------------------------------------------------------
    @property
    def closed_early_event(self) -> asyncio.Event:
        """Set when a consumer closes a response before its body ended (cancel, close, leaving ``async with``)."""
        if self._closed_early_event is None:
            self._closed_early_event = asyncio.Event()
        return self._closed_early_event

    def note_closed_early(self, served: ServedResponse) -> None:
        """Count a response its consumer closed before its body ended (called by its ScenarioStream)."""
        self.closed_early += 1
        self.closed_early_event.set()

    @property
    def validate_history(self) -> bool:
        return self.api.validate_history

    @property
    def attempts(self) -> dict[int, int]:
        """Requests answered so far, per turn (the core's counters, every family's requests of a turn together)."""
        out: dict[int, int] = {}
        for key, n in self.api.attempts.items():
            turn = key[-1]  # attempts_by="turn": (name, turn), an OpenAI family's (family, name, turn)
            if isinstance(turn, int):
                out[turn] = out.get(turn, 0) + n
        return out

    def reset(self) -> None:
        self.requests.clear()
        self.responses.clear()
        self.api.reset()
        self.closed_early = 0
        self._closed_early_event = None

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)

    # --- the handler -------------------------------------------------------------------------------------------
    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        raw = request.content
        valid_json = True
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body, valid_json = None, False
        rec = RecordedRequest(request.method, request.url.path, dict(request.headers), body, None, None)
        self.requests.append(rec)

        path = request.url.path.rstrip("/")
        api = next((a for p, a in OPENAI_PATHS.items() if path.endswith(p)), None)
        if request.method != "POST" or (api is None and not path.endswith("/v1/messages")):
            return self._reject(rec, 404, "not_found_error", f"Not found: {request.method} {request.url.path}")
        if not valid_json:
            return self._reject(rec, 400, "invalid_request_error", "request body is not valid JSON", api)
        if api is None:
            decision = self.api.decide(body, name=self.scenario.name, turns=len(self.scenario.turns))
        else:  # the OpenAI families: the same core, OpenAI's checks, attempts counted apart
            decision = self.api.check_openai(body, api)
            if not decision.rejected:
                assert isinstance(body, dict)
                turns = len(self.scenario.turns)
                decision = self.api.select(decision, body, name=self.scenario.name, turns=turns, family=api)
        if decision.rejected:
            return self._reject(
                rec, decision.status, decision.etype, decision.message, api, decision.param, decision.details
            )
        turn, attempt = decision.turn, decision.attempt
        assert turn is not None and attempt is not None
        rec.turn, rec.attempt = turn, attempt
        scenario, plan = self.plan_for(decision, api, body)
        if api == "responses" and plan.status == 200 and plan.events:
            self.api.remember_response(plan.events[0][1]["response"]["id"], turn)
        if api is None and decision.thread is not None and plan.status == 200 and plan.end == "eof":
            # a threaded reply (thread create / continue): kept under its id, for the request that continues it
            self.api.remember_reply(decision, assemble([r.data for r in plan.reads]).final_message())
        served = ServedResponse(turn, attempt, plan.status, plan)
        rec.response = served
        self.responses.append(served)

        await self.pacer.sleep(plan.header_delay)
        http_error = scenario.turns[turn].http_error_for(attempt)
        if http_error is not None and http_error.connect_error is not None:
            served.state = "dropped"  # no response at all: the connection failed
            raise httpx2.ConnectError(http_error.connect_error, request=request)
        speed = self.pacer.speed if self.scale_retry_after else 1.0
        family = "anthropic" if api is None else "openai"
        headers, error = self.api.response_headers(
            plan.status, plan.headers, plan.body, body, speed=speed, family=family
        )
        if plan.status != 200:
            served.state = "complete"
            served.reads_sent, served.bytes_sent = len(plan.reads), len(error)
            return httpx2.Response(plan.status, headers=headers, content=error)
        return httpx2.Response(200, headers=headers, stream=ScenarioStream(self, served, plan))

    def plan_for(self, decision: Decision, api: str | None, body: Any) -> tuple[Scenario, ResponsePlan]:
        """The scenario that answers a selected request and the plan of its turn and attempt (``api``: None for
        the Messages API, ``chat`` / ``responses``). Subclasses choose another scenario per request (the faults in
        effect: ``FaultedScenarioServer``)."""
        return self.scenario, self.render_with(self.scenario, decision, api, body)

    def render_with(self, scenario: Scenario, decision: Decision, api: str | None, body: Any) -> ResponsePlan:
        """The plan of a selected request's turn and attempt, rendered from ``scenario`` by this server's renderers."""
        turn, attempt = decision.turn, decision.attempt
        assert turn is not None and attempt is not None
        if api is None:
            return self.render(scenario, turn, attempt, decision.seed if self.seed_ids else "")
        assert isinstance(body, dict)
        options = body.get("stream_options")
        usage = api == "chat" and isinstance(options, dict) and options.get("include_usage") is True
        echo = response_echo(body) if api == "responses" else chat_echo(body) if self.seed_ids else {}
        n = body.get("n") if api == "chat" else 1
        choices = n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_CHOICES else 1
        return self.render_openai(scenario, turn, attempt, api, usage, echo, choices)

    def _reject(
        self,
        rec: RecordedRequest,
        status: int,
        etype: str,
        message: str,
        api: str | None = None,
        param: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> httpx2.Response:
        rec.rejected = message
        body = error_body(etype, message, details=details) if api is None else openai_error_body(etype, message, param)
        return httpx2.Response(status, headers={"content-type": "application/json"}, content=body)

    # --- convenience -------------------------------------------------------------------------------------------
    def requests_for(self, turn: int) -> list[RecordedRequest]:
        return [r for r in self.requests if r.turn == turn]


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

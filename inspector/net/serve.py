"""`inspector serve`: the scripted scenarios over real HTTP, for any client (official SDKs, curl, coding assistants).

    inspector serve --scenario weather --fault relay_buffer --port 0
    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT your-harness ...

An Anthropic-compatible server (uvicorn + starlette): ``POST /v1/messages`` (``stream: true`` answers the scenario's
SSE bytes with its pacing and read grouping; ``stream: false`` the assembled Message JSON),
``POST /v1/messages/count_tokens``, ``GET /v1/models``. Bodies come from
``inspector.scenarios.render.render_turn``: the same bytes, in the same reads, as the in-process ``ScenarioServer``.

Which scenario: ``--scenario NAME`` (default parse_date) or the request header ``x-inspector-scenario: NAME``.
Faults: ``--fault NAME[:ARG][,NAME...]`` or the header ``x-inspector-fault`` (``none`` turns the server's faults off
for that request); ``inspector serve --list-faults`` documents each. Faults are transformations of the scenario
(``apply_faults``: Pacing fields, Fault / HttpError objects) plus two of the response plan (``bom``, ``drop_byte``),
all in :func:`render_faulted`, which :class:`FaultedScenarioServer` uses in process too.

Turn = number of assistant messages in the request (the conversation advances when the client sends the previous
turn's tool_results). Attempt = how many identical requests (same scenario, faults, ``x-inspector-session`` header
and messages) the server has answered before: a retry of the same request is the next attempt. ``POST
/inspector/reset`` forgets the attempt counters. A request that breaks the history rules gets the API's 400
(:func:`inspector.agent.history.history_violation`, shared with the in-process ``ScenarioServer``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from inspector.agent.history import history_violation
from inspector.agent.pacing import Pacer
from inspector.core.errors import FaultError, UnknownScenario
from inspector.net.faults import FAULT_HEADER, FAULTS, FaultSpec, apply_faults, faults_key, parse_faults, render_faulted
from inspector.net.server import Closable, ConnectionDrop, _race, install_log_filter
from inspector.scenarios.bundled import DEFAULT_SCENARIO, SCENARIOS
from inspector.scenarios.model import (
    Scenario,
)
from inspector.scenarios.render import ResponsePlan
from inspector.scenarios.transport import scale_retry_headers

SCENARIO_HEADER = "x-inspector-scenario"
SESSION_HEADER = "x-inspector-session"

log = logging.getLogger("inspector.serve")


def assembled_message(plan: ResponsePlan) -> dict:
    """The Message a non-streaming request gets: the plan's body assembled (tool input that does not parse is
    ``null`` with ``input_raw``, as ``inspector.stream.assembler`` shows it)."""
    from inspector.stream.assembler import assemble

    msg = assemble([r.data for r in plan.reads]).final_message()
    msg.setdefault("type", "message")
    return msg


@dataclass
class Exchange:
    """What the server did with one request (kept in ``ServeApp.exchanges``, printed by the CLI)."""

    method: str
    path: str
    scenario: str | None = None
    faults: str = "none"
    turn: int | None = None
    attempt: int | None = None
    status: int = 0
    stream: bool | None = None
    reads: int = 0
    bytes: int = 0
    end: str | None = None  # eof | drop | hang | disconnected | error
    rejected: str | None = None
    kind: str | None = None  # history violation kind


class ServeApp(Closable):
    """State and handlers of one ``inspector serve`` server. ``app`` is the ASGI app."""

    def __init__(
        self,
        scenario: str | Scenario = DEFAULT_SCENARIO,
        faults: str | Sequence[FaultSpec | str] | None = None,
        *,
        speed: float = 1.0,
        validate_history: bool = True,
        extra_scenarios: Iterable[Scenario] = (),
        on_exchange: Callable[[Exchange], None] | None = None,
    ) -> None:
        self.scenarios: dict[str, Scenario] = dict(SCENARIOS)
        for sc in extra_scenarios:
            self.scenarios[sc.name] = sc
        if isinstance(scenario, Scenario):
            self.scenarios[scenario.name] = scenario
            scenario = scenario.name
        if scenario not in self.scenarios:
            raise UnknownScenario(f"unknown scenario {scenario!r}; available: {', '.join(self.scenarios)}")
        self.default_scenario = scenario
        self.default_faults = parse_faults(faults)
        self.pacer = Pacer(speed)
        self.validate_history = validate_history
        self.on_exchange = on_exchange
        self.exchanges: list[Exchange] = []
        self.attempts: dict[tuple, int] = {}
        self._faulted: OrderedDict[tuple[str, str], Scenario] = OrderedDict()
        self._plans: OrderedDict[tuple, ResponsePlan] = OrderedDict()
        self.app = self._build()

    # --- plumbing -------------------------------------------------------------------------------------------------
    def _build(self):
        from starlette.applications import Starlette
        from starlette.routing import Route

        install_log_filter()
        routes = [
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/inspector/reset", self.reset, methods=["POST"]),
            Route("/inspector/faults", self.fault_list, methods=["GET"]),
            Route("/{path:path}", self.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
        ]
        return Starlette(routes=routes)

    def _note(self, ex: Exchange) -> None:
        self.exchanges.append(ex)
        if self.on_exchange is not None:
            try:
                self.on_exchange(ex)
            except Exception:  # a printer must not break the server
                log.warning("the exchange printer failed", exc_info=True)

    def faulted(self, name: str, faults: tuple[FaultSpec, ...]) -> Scenario:
        key = (name, faults_key(faults))
        sc = self._faulted.get(key)
        if sc is None:
            sc = apply_faults(self.scenarios[name], faults)
            self._faulted[key] = sc
            while len(self._faulted) > 64:
                self._faulted.popitem(last=False)
        return sc

    def plan(self, name: str, faults: tuple[FaultSpec, ...], turn: int, attempt: int) -> ResponsePlan:
        key = (name, faults_key(faults), turn, attempt)
        plan = self._plans.get(key)
        if plan is None:
            sc = self.scenarios[name]
            plan = render_faulted(sc, faults, turn, attempt, faulted=self.faulted(name, faults))
            self._plans[key] = plan
            while len(self._plans) > 64:
                self._plans.popitem(last=False)
        return plan

    # --- handlers -------------------------------------------------------------------------------------------------
    def _json(self, status: int, body: bytes, headers: dict[str, str] | None = None):
        from starlette.responses import Response

        return Response(body, status_code=status, headers=headers or {}, media_type="application/json")

    def _reject(self, ex: Exchange, status: int, etype: str, message: str, kind: str | None = None):
        ex.status, ex.rejected, ex.kind = status, message, kind
        # like the API: a request id in the header and the body (deterministic: derived from the error)
        rid = "req_011C" + hashlib.sha256(f"{ex.path}|{status}|{message}".encode()).hexdigest()[:20]
        body = orjson.dumps({"type": "error", "error": {"type": etype, "message": message}, "request_id": rid})
        ex.bytes = len(body)
        self._note(ex)
        return self._json(status, body, {"request-id": rid})

    async def not_found(self, request):
        ex = Exchange(request.method, request.url.path)
        return self._reject(ex, 404, "not_found_error", f"Not found: {request.method} {request.url.path}")

    async def reset(self, request):
        self.attempts.clear()
        return self._json(200, b'{"reset": true}')

    async def fault_list(self, request):
        items = [
            {"name": d.name, "kind": d.kind, "summary": d.summary, "doc": d.doc, "arg": d.arg, "default": d.default}
            for d in FAULTS.values()
        ]
        return self._json(200, orjson.dumps({"data": items}))

    def _model_ids(self) -> list[str]:
        seen: list[str] = []
        for sc in self.scenarios.values():
            if sc.model not in seen:
                seen.append(sc.model)
        return seen

    @staticmethod
    def _model_obj(mid: str) -> dict:
        return {
            "type": "model",
            "id": mid,
            "display_name": f"{mid} (inspector scenario)",
            "created_at": "2025-01-01T00:00:00Z",
        }

    async def models(self, request):
        data = [self._model_obj(m) for m in self._model_ids()]
        body = {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
        return self._json(200, orjson.dumps(body))

    async def model(self, request):
        mid = request.path_params["model_id"]
        if mid not in self._model_ids():
            return self._reject(Exchange("GET", request.url.path), 404, "not_found_error", f"model: {mid}")
        return self._json(200, orjson.dumps(self._model_obj(mid)))

    async def count_tokens(self, request):
        raw = await request.body()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self._reject(
                Exchange("POST", request.url.path), 400, "invalid_request_error", "request body is not valid JSON"
            )
        n = max(1, len(orjson.dumps(body.get("messages") if isinstance(body, dict) else body)) // 4)
        return self._json(200, orjson.dumps({"input_tokens": n}))

    async def messages(self, request):
        ex = Exchange("POST", request.url.path)
        raw = await request.body()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self._reject(ex, 400, "invalid_request_error", "request body is not valid JSON")
        if not isinstance(body, dict):
            return self._reject(ex, 400, "invalid_request_error", "request body must be a JSON object")
        name = (request.headers.get(SCENARIO_HEADER) or self.default_scenario).strip()
        ex.scenario = name
        if name not in self.scenarios:
            return self._reject(
                ex,
                400,
                "invalid_request_error",
                f"{SCENARIO_HEADER}: unknown scenario {name!r}; available: {', '.join(self.scenarios)}",
            )
        header_faults = request.headers.get(FAULT_HEADER)
        try:
            faults = parse_faults(header_faults) if header_faults is not None else self.default_faults
        except FaultError as e:
            return self._reject(ex, 400, "invalid_request_error", f"{FAULT_HEADER}: {e}")
        ex.faults = faults_key(faults)
        messages = body.get("messages")
        if self.validate_history:
            v = history_violation(messages)
            if v is not None:
                return self._reject(ex, 400, "invalid_request_error", v.message, v.kind)
        elif not isinstance(messages, list):
            return self._reject(ex, 400, "invalid_request_error", "messages: Field required")
        scenario = self.scenarios[name]
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        if turn >= len(scenario.turns):
            return self._reject(
                ex,
                400,
                "invalid_request_error",
                f"scenario {name!r} has {len(scenario.turns)} turns; no turn {turn} "
                f"(this request has {turn} assistant messages)",
            )
        session = request.headers.get(SESSION_HEADER, "")
        digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()
        key = (name, ex.faults, session, turn, digest)
        attempt = self.attempts.get(key, 0)
        self.attempts[key] = attempt + 1
        ex.turn, ex.attempt = turn, attempt
        try:
            plan = self.plan(name, faults, turn, attempt)
        except (ValueError, IndexError, TypeError) as e:
            return self._reject(
                ex,
                500,
                "api_error",
                f"inspector: cannot render scenario {name!r} turn {turn} with faults {ex.faults}: {e}",
            )
        stream = body.get("stream") is True
        ex.stream = stream
        await self.pacer.sleep(plan.header_delay)
        headers = dict(plan.headers)
        if plan.status != 200:
            scale_retry_headers(headers, self.pacer.speed)
            ex.status, ex.reads, ex.bytes, ex.end = plan.status, 1, len(plan.body), "eof"
            self._note(ex)
            return _Body(self, plan.status, headers, [plan.body], ex)
        if stream:
            return _PlanStream(self, plan, headers, ex)
        return await self._non_stream(plan, headers, ex)

    async def _non_stream(self, plan: ResponsePlan, headers: dict[str, str], ex: Exchange):
        await self.pacer.sleep(sum(r.delay for r in plan.reads))
        error = next((d for name, d in plan.events if name == "error"), None)
        out = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "cache-control")}
        out["content-type"] = "application/json"
        if error is not None:
            etype = str((error.get("error") or {}).get("type") or "api_error")
            status = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}.get(etype, 500)
            body = orjson.dumps(error)
            ex.status, ex.bytes, ex.end = status, len(body), "eof"
            self._note(ex)
            return _Body(self, status, out, [body], ex)
        body = orjson.dumps(assembled_message(plan))
        ex.status, ex.bytes = 200, len(body)
        if plan.end == "drop":  # headers promise the whole message; half of it comes, then the connection breaks
            out["content-length"] = str(len(body))
            return _Body(self, 200, out, [body[: len(body) // 2]], ex, end="drop")
        if plan.end == "hang":
            return _Body(self, 200, out, [], ex, end="hang")
        return _Body(self, 200, out, [body], ex)


def _raw_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]


class _Body:
    """A fixed body (JSON), maybe cut short ("drop") or never sent ("hang")."""

    def __init__(
        self, app: ServeApp, status: int, headers: dict[str, str], chunks: list[bytes], ex: Exchange, end: str = "eof"
    ) -> None:
        self.app, self.status, self.headers, self.chunks, self.ex, self.end = app, status, headers, chunks, ex, end

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": _raw_headers(self.headers)})
        for c in self.chunks:
            await send({"type": "http.response.body", "body": c, "more_body": True})
        if self.end == "eof":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            if self.ex.status == 200:
                self.ex.end = "eof"
                self.app._note(self.ex)
            return
        if self.end == "hang":
            outcome = await _race(lambda: asyncio.Event().wait(), receive, self.app.closing())
            self.ex.end = "disconnected" if outcome == "disconnected" else "hang"
            self.app._note(self.ex)
            if outcome == "closing":
                raise ConnectionDrop("server shutting down")
            return
        self.ex.end = "drop"
        self.app._note(self.ex)
        raise ConnectionDrop("planned drop")


class _PlanStream:
    """The SSE body of a plan: each planned read is one ``send`` after its (paced) delay."""

    def __init__(self, app: ServeApp, plan: ResponsePlan, headers: dict[str, str], ex: Exchange) -> None:
        self.app, self.plan, self.headers, self.ex = app, plan, headers, ex

    async def __call__(self, scope, receive, send) -> None:
        app, plan, ex = self.app, self.plan, self.ex
        ex.status = 200
        await send({"type": "http.response.start", "status": 200, "headers": _raw_headers(self.headers)})

        async def body() -> None:
            for r in plan.reads:
                await app.pacer.sleep(r.delay)
                await send({"type": "http.response.body", "body": r.data, "more_body": True})
                ex.reads += 1
                ex.bytes += len(r.data)
            if plan.end == "hang":
                await asyncio.Event().wait()

        outcome = await _race(body, receive, app.closing())
        if outcome == "disconnected":
            ex.end = "disconnected"
            app._note(ex)
            return
        if outcome == "closing":
            ex.end = "hang" if plan.end == "hang" else "closing"
            app._note(ex)
            raise ConnectionDrop("server shutting down")
        if plan.end == "drop":
            ex.end = "drop"
            app._note(ex)
            raise ConnectionDrop("planned drop")
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        ex.end = "eof"
        app._note(ex)


def make_app(
    scenario: str | Scenario = DEFAULT_SCENARIO, faults: Any = None, *, speed: float = 1.0, **kw: Any
) -> ServeApp:
    """A :class:`ServeApp` (``.app`` is the ASGI app)."""
    return ServeApp(scenario, faults, speed=speed, **kw)


def format_exchange(ex: Exchange) -> str:
    where = (
        f"{ex.scenario} turn {ex.turn + 1} attempt {(ex.attempt or 0) + 1}"
        if ex.turn is not None
        else (ex.scenario or "-")
    )
    faults = f" [{ex.faults}]" if ex.faults != "none" else ""
    if ex.rejected:
        return f"{ex.method} {ex.path} {where}{faults} -> {ex.status}: {ex.rejected}"
    kind = "stream" if ex.stream else "json"
    return f"{ex.method} {ex.path} {where}{faults} -> {ex.status} {kind}, {ex.reads} reads, {ex.bytes} bytes, {ex.end}"

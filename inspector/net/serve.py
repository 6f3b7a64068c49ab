"""`inspector serve`: the scripted scenarios over real HTTP, for any client (official SDKs, curl, coding assistants).

    inspector serve --scenario weather --fault relay_buffer --port 0
    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT your-harness ...

An Anthropic-compatible server (uvicorn + starlette): ``POST /v1/messages`` (``stream: true`` answers the scenario's
SSE bytes with its pacing and read grouping; ``stream: false`` the assembled Message JSON),
``POST /v1/messages/count_tokens``, ``GET /v1/models``; for OpenAI clients ``POST /v1/chat/completions`` and
``POST /v1/responses`` answer the same scenarios in OpenAI's wire formats (``render_openai``; the OpenAI checks are
``fakeapi.openai_decision``) and ``GET /v1/models`` answers OpenAI's list to a request of that family. Bodies come from
``inspector.scenarios.render.render_turn``: the same bytes, in the same reads, as the in-process ``ScenarioServer``.

Which scenario: ``--scenario NAME`` (default parse_date) or the request header ``x-inspector-scenario: NAME``.
Faults: ``--fault NAME[:ARG][,NAME...]`` or the header ``x-inspector-fault`` (``none`` turns the server's faults off
for that request); ``inspector serve --list-faults`` documents each. Faults are transformations of the scenario
(``apply_faults``: Pacing fields, Fault / HttpError objects) plus two of the response plan (``bom``, ``drop_byte``),
all in :func:`render_faulted`, which :class:`FaultedScenarioServer` uses in process too.

Turn = number of assistant messages in the request (the conversation advances when the client sends the previous
turn's tool_results). Attempt = how many identical requests (same scenario, faults, ``x-inspector-session`` header
and messages) the server has answered before: a retry of the same request is the next attempt. ``POST
/inspector/reset`` forgets the attempt counters. A request that breaks the history rules gets the API's 400. These
decisions are the fake API's core, :class:`inspector.scenarios.fakeapi.FakeApi`, which the in-process
``ScenarioServer`` uses too: this module is its uvicorn transport.

Like the API: 401 without credentials, 400 without ``anthropic-version`` or with a missing / wrongly typed
``model``, ``max_tokens`` or ``stream``, 404 for a model the API would not know (``lenient`` turns these off);
unique request ids and ``anthropic-ratelimit-*`` headers; the request's model is echoed back. Past the
script's last turn a short end_turn reply (``strict``: a 400). Limits: bodies past ``max_body`` get 413 (counted as
they arrive), slow bodies 408, slow headers and idle connections are closed (``uvicorn_options``), fault arguments
are bounded, the exchange list and attempt counters are bounded by ``history`` (``GET /inspector/requests``).
``recording=RecordingSource(...)`` serves a recording instead of the scenarios (``inspector/net/recorded.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from inspector.core import exactjson
from inspector.core.errors import FaultError
from inspector.core.fmt import count
from inspector.core.pacing import Pacer
from inspector.net.faults import (
    FAULT_HEADER,
    FAULTS,
    FaultSpec,
    apply_faults,
    changes,
    faults_key,
    in_effect,
    iter_reads,
    parse_faults,
    render_faulted,
)
from inspector.net.recorded import (
    RecordingSource,
    check_recording_faults,
    end_of_script_plan,
    recording_faults,
    request_diff,
    wrong_endpoint,
)
from inspector.net.server import Closable, ConnectionDrop, StopOnClose, _race, guarded_h11, install_log_filter
from inspector.scenarios.bundled import DEFAULT_SCENARIO, SCENARIOS, get_scenario
from inspector.scenarios.fakeapi import (
    MAX_DEPTH,
    Decision,
    FakeApi,
    RateLimits,
    RequestIds,
    body_problem,
    count_input_tokens,
    credentials_problem,
    error_body,
    known_model,
    known_openai_model,
    load_catalogue,
    openai_credentials_problem,
    openai_error_body,
)
from inspector.scenarios.model import (
    Scenario,
)
from inspector.scenarios.render import Event, ResponsePlan
from inspector.scenarios.render_openai import (
    MAX_CHOICES,
    Api,
    MalformedAnswer,
    assembled_chat,
    assembled_response,
    chat_echo,
    echo_key,
    openai_error,
    response_echo,
)

if TYPE_CHECKING:  # starlette is imported when a server is built (`inspector --help` stays fast)
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "SCENARIO_HEADER",
    "SESSION_HEADER",
    "Exchange",
    "ServeApp",
    "assembled_message",
    "body_problem",
    "credentials_problem",
    "format_exchange",
    "make_app",
]

SCENARIO_HEADER = "x-inspector-scenario"
SESSION_HEADER = "x-inspector-session"

DEFAULT_MAX_BODY = 32 * 1024 * 1024  # the API answers 413 request_too_large past about 32 MB
DEFAULT_HISTORY = (
    10_000  # exchanges and attempt counters kept (older ones are dropped, and /inspector/requests says so)
)
KEEP_ALIVE = 75.0  # seconds an idle keep-alive connection stays open (the usual API front ends; uvicorn's default is 5)
HEADER_TIMEOUT = 30.0  # seconds from a request's first byte to the end of its headers
BODY_TIMEOUT = 60.0  # seconds to receive a whole request body
DIFF_BUDGET = 2.0  # seconds a --recording request diff may take (in a worker thread) before it is given up
MAX_HEADER_BYTES = 64 * 1024  # h11_max_incomplete_event_size: the most bytes of unfinished request headers
SESSION_KEPT = 256  # characters of an x-inspector-session header kept as it is in the attempt keys (else a digest)
CACHED_MODEL = 256  # characters of the longest model name whose plans are cached (real ids are < 100)
CACHED_ECHO = 64 * 1024  # bytes of JSON of the request fields a Response echoes, at most, for its plan to be cached
EXCHANGE_TEXT = 1000  # characters of a client-chosen text an exchange keeps and prints (path, model, a rejection)

log = logging.getLogger("inspector.serve")

# a plan cache's key: (scenario, faults, turn, attempt, model[, the OpenAI form's fields]), or a recording's
PlanKey = tuple[Hashable, ...]


def assembled_message(plan: ResponsePlan) -> dict[str, Any]:
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
    seq: int = 0  # 0-based number of the request since the server started
    t: float = 0.0  # wall-clock time the request arrived (epoch seconds)
    model: str | None = None  # the model the request named (echoed back)
    history: str = "not checked"  # the history check: ok | off | <violation kind> | not checked (rejected before)
    script_ended: bool = False  # past the script's last turn: a placeholder end_turn reply
    once: str | None = None  # the @once faults and what became of them here ("drop_event@once fired here", ...)
    differs: str | None = None  # --recording: how the request differs from the recorded one (one line)
    diff: list[str] = field(default_factory=list)  # --recording: the full difference (unified diff lines)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _session_of(request: Request) -> str:
    """The ``x-inspector-session`` header as the attempt counters and the @once faults key it: one longer than
    ``SESSION_KEPT`` characters by its digest (they keep ``--history`` keys: 64 KiB headers were kept whole, about
    600 MB for 10,000 sessions)."""
    session = request.headers.get(SESSION_HEADER, "")
    if len(session) <= SESSION_KEPT:
        return session
    return "sha256:" + hashlib.sha256(session.encode("latin-1", "replace")).hexdigest()


def _cacheable(model: str | None, echo: dict[str, Any] | None = None) -> bool:
    """Whether a plan (and its faulted scenario) for a request naming ``model`` (and, for a Response, echoing
    ``echo``) is kept in the caches: not for a model name longer than ``CACHED_MODEL`` characters nor an echo of
    more than ``CACHED_ECHO`` bytes of JSON (a client's choice: 64 plans echoing a 32 MiB name or ``instructions``
    each were kept, gigabytes, by a count-only bound); such a request's plan is rendered for it alone."""
    if model is not None and len(model) > CACHED_MODEL:
        return False
    return not echo or len(orjson.dumps(echo)) <= CACHED_ECHO


def _kept_text(text: str | None) -> str | None:
    """``text`` as an exchange keeps it: at most ``EXCHANGE_TEXT`` characters, a cut one saying its length."""
    if text is None or len(text) <= EXCHANGE_TEXT:
        return text
    tail = f"... ({len(text)} characters)"
    return text[: EXCHANGE_TEXT - len(tail)] + tail


class _Rejected(Exception):
    def __init__(self, status: int, etype: str, message: str) -> None:
        super().__init__(message)
        self.status, self.etype, self.message = status, etype, message


class ServeApp(Closable):
    """State and handlers of one ``inspector serve`` server. ``app`` is the ASGI app.

    ``lenient``: no credential / version / body-field checks. ``strict``: past the script's last turn, the 400 of
    old instead of a placeholder end_turn reply. ``max_body``: the largest request body (413 past it). ``history``:
    how many exchanges and attempt counters are kept. ``recording``: serve a recording (a
    :class:`RecordingSource`) instead of the scenarios. ``echo_model=False``: answer with the scenario's model
    instead of the request's (the exact bytes of ``render_faulted``, for byte-comparing tests)."""

    def __init__(
        self,
        scenario: str | Scenario = DEFAULT_SCENARIO,
        faults: str | Sequence[FaultSpec | str] | None = None,
        *,
        speed: float = 1.0,
        validate_history: bool = True,
        extra_scenarios: Iterable[Scenario] = (),
        on_exchange: Callable[[Exchange], None] | None = None,
        on_select: Callable[[Exchange], None] | None = None,
        lenient: bool = False,
        strict: bool = False,
        max_body: int = DEFAULT_MAX_BODY,
        history: int = DEFAULT_HISTORY,
        keep_alive: float = KEEP_ALIVE,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        recording: RecordingSource | None = None,
        echo_model: bool = True,
        request_id_seed: str | None = None,
        ratelimits: RateLimits | None = None,
        diff_budget: float = DIFF_BUDGET,
    ) -> None:
        self.scenarios: dict[str, Scenario] = dict(SCENARIOS)
        for sc in extra_scenarios:
            self.scenarios[sc.name] = sc
        if isinstance(scenario, Scenario):
            self.scenarios[scenario.name] = scenario
            scenario = scenario.name
        if scenario not in self.scenarios:  # a scenario file (the per-request header takes names only)
            loaded = get_scenario(scenario)
            self.scenarios[loaded.name] = loaded
            scenario = loaded.name
        if max_body < 1 or history < 1:
            raise ValueError("max_body and history must be >= 1")
        self.default_scenario = scenario
        self.default_faults = parse_faults(faults)
        self.recording = recording
        if recording is not None:
            check_recording_faults(self.default_faults)
        self.pacer = Pacer(speed)
        self.on_exchange = on_exchange
        self.on_select = (
            on_select  # told of an exchange once its turn, attempt and faults are chosen (before its answer)
        )
        self.echo_model = echo_model
        # the fake API's decisions (checks, turn and attempt, answer headers), shared with the in-process transport
        if not lenient:
            load_catalogue()  # the known models, loaded before the first request (never on the event loop)
        self.api = FakeApi(
            validate_history=validate_history,
            lenient=lenient,
            strict=strict,
            history=history,
            models=self._model_ids,
            request_ids=RequestIds(request_id_seed),  # unique per response (seeded: reproducible, for tests)
            ratelimits=ratelimits or RateLimits(),
        )
        # --recording: request diffs run in one worker thread, each within diff_budget seconds; the exchange is
        # printed once its diff is known (the response never waits for it)
        self.diff_budget = diff_budget
        self._diff_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._diffs: dict[int, asyncio.Future[None]] = {}  # Exchange.seq -> its diff under way
        self.max_body, self.body_timeout = max_body, body_timeout
        self.history = history
        self.exchanges: deque[Exchange] = deque(maxlen=history)
        self.total_exchanges = 0
        self._seq = 0
        self._lock = threading.Lock()  # the plan caches are filled from worker threads (rendering is off the loop)
        self._faulted: OrderedDict[tuple[str, str, str | None], Scenario] = OrderedDict()
        self._plans: OrderedDict[PlanKey, ResponsePlan] = OrderedDict()
        # uvicorn settings (inspector.net.server passes them to uvicorn.Config)
        self.uvicorn_options: dict[str, Any] = {
            "timeout_keep_alive": keep_alive,
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "http": guarded_h11(header_timeout),
        }
        self.app = self._build()

    # --- plumbing -------------------------------------------------------------------------------------------------

    def start_over(self) -> None:
        """Start over as a new server would: requests are numbered from 1 again (the diagnostics' "request N" and an
        ``@once`` fault's "fired at request N" name the requests as a caller that forgot them counts them), the
        attempt counters are forgotten and the ``@once`` faults re-armed (``FakeApi.reset``)."""
        self._seq = 0
        self.exchanges.clear()
        self.total_exchanges = 0
        self.api.reset()

    def _build(self) -> Starlette:
        from starlette.applications import Starlette
        from starlette.routing import Route

        install_log_filter()
        routes = [
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/inspector/reset", self.reset, methods=["POST"]),
            Route("/inspector/faults", self.fault_list, methods=["GET"]),
            Route("/inspector/requests", self.request_list, methods=["GET"]),
            Route("/{path:path}", self.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
        ]
        return Starlette(routes=routes)

    def note(self, ex: Exchange) -> None:
        """Keep an exchange that has ended (its response's body classes call it) and print it (once its request diff
        is known). The texts a client chooses (its path, the model it names, a rejection quoting them) are kept and printed cut
        to ``EXCHANGE_TEXT`` characters: ``--history`` exchanges of up to ``--max-body`` each were kept whole."""
        ex.model = _kept_text(ex.model)
        ex.rejected = _kept_text(ex.rejected)
        ex.path = _kept_text(ex.path) or ""
        self.exchanges.append(ex)
        self.total_exchanges += 1
        pending = self._diffs.get(ex.seq)
        if pending is not None and not pending.done():
            pending.add_done_callback(lambda _: self._print(ex))
            return
        self._print(ex)

    async def printed(self, ex: Exchange) -> None:
        """Return once ``ex``'s ``on_exchange`` call, held for its request diff (``--recording``), has been made: the
        pytest plugin sends a response's end only then. The diff is bounded by ``diff_budget``."""
        pending = self._diffs.get(ex.seq)
        if pending is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

    def _selected(self, ex: Exchange) -> None:
        if self.on_select is not None:
            try:
                self.on_select(ex)
            except Exception:  # a watcher must not break the server
                log.warning("the on_select watcher failed", exc_info=True)

    def _print(self, ex: Exchange) -> None:
        if self.on_exchange is not None:
            try:
                self.on_exchange(ex)
            except Exception:  # a printer must not break the server
                log.warning("the exchange printer failed", exc_info=True)

    def _new_exchange(self, request: Request) -> Exchange:
        ex = Exchange(request.method, request.url.path, seq=self._seq, t=time.time())
        self._seq += 1
        return ex

    # the core's settings and counters, under their old names
    @property
    def lenient(self) -> bool:
        return self.api.lenient

    @property
    def strict(self) -> bool:
        return self.api.strict

    @property
    def validate_history(self) -> bool:
        return self.api.validate_history

    @property
    def attempts(self) -> OrderedDict[tuple[str | int, ...], int]:
        return self.api.attempts

    @property
    def attempts_dropped(self) -> int:
        return self.api.attempts_dropped

    @property
    def request_ids(self) -> RequestIds:
        assert self.api.request_ids is not None
        return self.api.request_ids

    def faulted(self, name: str, faults: tuple[FaultSpec, ...], model: str | None = None) -> Scenario:
        """The scenario with the faults built in (and the request's model, when given), cached."""
        key = (name, faults_key(faults), model)
        with self._lock:
            sc = self._faulted.get(key)
        if sc is None:
            base = self.scenarios[name]
            if model is not None and model != base.model:
                base = dataclasses.replace(base, model=model)
            sc = apply_faults(base, faults)
            if _cacheable(model):
                with self._lock:
                    self._faulted[key] = sc
                    while len(self._faulted) > 64:
                        self._faulted.popitem(last=False)
        return sc

    def plan(
        self,
        name: str,
        faults: tuple[FaultSpec, ...],
        turn: int,
        attempt: int,
        model: str | None = None,
        api: Api | None = None,
        include_usage: bool = False,
        echo: dict[str, Any] | None = None,
        choices: int = 1,
        seed: str = "",
    ) -> ResponsePlan:
        """The plan of (scenario, faults, turn, attempt, model), cached; ``api``: the OpenAI form (``chat`` /
        ``responses``; ``include_usage``: chat's ``stream_options.include_usage``; ``echo``: the request fields a
        Response echoes), None: Anthropic (``seed``: its conversation's message id seed, ``Decision.seed``)."""
        key = _plan_key(name, faults, turn, attempt, model, api, include_usage, echo, choices, seed)
        with self._lock:
            plan = self._plans.get(key)
        if plan is None:
            sc = self.scenarios[name]
            faulted = self.faulted(name, faults, model)
            plan = render_faulted(
                sc,
                faults,
                turn,
                attempt,
                faulted=faulted,
                api=api,
                include_usage=include_usage,
                echo=echo,
                choices=choices,
                seed=seed,
            )
            if _cacheable(model, echo):
                with self._lock:
                    self._plans[key] = plan
                    while len(self._plans) > 64:
                        self._plans.popitem(last=False)
        return plan

    def _cached(self, key: PlanKey) -> ResponsePlan | None:
        with self._lock:
            return self._plans.get(key)

    # --- handlers -------------------------------------------------------------------------------------------------
    def _json(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> Response:
        from starlette.responses import Response

        return Response(body, status_code=status, headers=headers or {}, media_type="application/json")

    def _reject(
        self,
        ex: Exchange,
        status: int,
        etype: str,
        message: str,
        kind: str | None = None,
        close: bool = False,
        details: Mapping[str, Any] | None = None,
    ) -> Response:
        ex.status, ex.rejected, ex.kind = status, message, kind
        # like the API: a request id in the header and the body, unique per response
        rid = self.request_ids.next()
        body = error_body(etype, message, rid, details)
        ex.bytes = len(body)
        self.note(ex)
        headers = {"request-id": rid}
        if close:  # the rest of the request is not read: the connection cannot carry another one
            headers["connection"] = "close"
        return self._json(status, body, headers)

    def _checked(self, request: Request, ex: Exchange) -> Response | None:
        """The credential / version answer for this request, or None (always None when lenient)."""
        if self.lenient:
            return None
        problem = credentials_problem(request.headers)
        if problem is not None:
            return self._reject(ex, *problem)
        return None

    async def _read_body(self, request: Request) -> bytes:
        """The request body, counted as it arrives: past ``max_body`` bytes (or a content-length saying so) reading
        stops with 413; a body that takes more than ``body_timeout`` seconds gives 408. A body still coming when the
        server begins to close is a 503 at once (as the proxy answers it): uvicorn would otherwise wait for it, then
        cancel it at the end of its grace period and print a traceback ('Exception in ASGI application')."""
        too_large = _Rejected(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        length = request.headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body:
            raise too_large
        from starlette.requests import ClientDisconnect

        stop = StopOnClose()  # the server begins to close: the read is cancelled
        closing = asyncio.ensure_future(self.closing().wait())
        closing.add_done_callback(stop)
        buf = bytearray()
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.stream():
                    buf += chunk
                    if len(buf) > self.max_body:
                        raise too_large
        except TimeoutError:
            raise _Rejected(408, "timeout_error", f"request body not received within {self.body_timeout:g}s") from None
        except ClientDisconnect:  # (nobody to answer: a planned drop, not uvicorn's "Exception in ASGI application")
            raise ConnectionDrop("the client went away before sending its whole body") from None
        except asyncio.CancelledError:
            if not stop.ours():
                raise  # (cancelled by someone else too: uvicorn, the loop's end)
            raise _Rejected(503, "overloaded_error", "shutting down") from None
        finally:
            closing.remove_done_callback(stop)  # (before the cancel: a cancelled wait does not stop the read)
            closing.cancel()
        return bytes(buf)

    async def not_found(self, request: Request) -> Response:
        ex = self._new_exchange(request)
        return self._reject(ex, 404, "not_found_error", f"Not found: {request.method} {request.url.path}")

    async def reset(self, request: Request) -> Response:
        self.start_over()
        return self._json(200, b'{"reset": true}')

    async def fault_list(self, request: Request) -> Response:
        items = [
            {
                "name": d.name,
                "kind": d.kind,
                "summary": d.summary,
                "doc": d.doc,
                "arg": d.arg,
                "default": d.default,
                "max": d.maximum,
            }
            for d in FAULTS.values()
        ]
        return self._json(200, orjson.dumps({"data": items}))

    async def request_list(self, request: Request) -> Response:
        """The recent exchanges (oldest first) with their history-check result; says how many were dropped.
        Request diffs under way are waited for first (each within its budget)."""
        pending = list(self._diffs.values())
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        data = [ex.to_json() for ex in list(self.exchanges)]
        dropped = self.total_exchanges - len(data)
        body = {
            "total": self.total_exchanges,
            "kept": len(data),
            "dropped": dropped,
            "limit": self.history,
            "attempt_counters": len(self.attempts),
            "attempt_counters_dropped": self.attempts_dropped,
            "note": (f"the {dropped} oldest exchanges were dropped (--history {self.history})" if dropped else None),
            "data": data,
        }
        return self._json(200, orjson.dumps(body))

    def _model_ids(self) -> list[str]:
        seen: list[str] = []
        if self.recording is not None:
            seen.append(self.recording.model)
        for sc in self.scenarios.values():
            if sc.model not in seen:
                seen.append(sc.model)
        return seen

    @staticmethod
    def _model_obj(mid: str) -> dict[str, Any]:
        return {
            "type": "model",
            "id": mid,
            "display_name": f"{mid} (inspector scenario)",
            "created_at": "2025-01-01T00:00:00Z",
        }

    @staticmethod
    def _openai_family(request: Request) -> bool:
        """A request of the OpenAI family: a bearer key and no ``anthropic-version`` (the Anthropic SDK always sends
        that header, the openai SDK never does)."""
        auth = (request.headers.get("authorization") or "").strip().lower()
        return auth.startswith("bearer") and not (request.headers.get("anthropic-version") or "").strip()

    @staticmethod
    def _openai_model_obj(mid: str) -> dict[str, Any]:
        return {"id": mid, "object": "model", "created": 1735689600, "owned_by": "inspector"}

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the Anthropic list, or OpenAI's (``{"object": "list", "data": [...]}``) for a request
        of the OpenAI family."""
        ex = self._new_exchange(request)
        if self._openai_family(request):
            data = [self._openai_model_obj(m) for m in self._model_ids()]
            return self._json(200, orjson.dumps({"object": "list", "data": data}))
        denied = self._checked(request, ex)
        if denied is not None:
            return denied
        data = [self._model_obj(m) for m in self._model_ids()]
        body = {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
        return self._json(200, orjson.dumps(body))

    async def model(self, request: Request) -> Response:
        ex = self._new_exchange(request)
        if self._openai_family(request):
            mid = request.path_params["model_id"]
            if not self.lenient and not known_openai_model(mid, self._model_ids()):
                message = f"The model '{mid}' does not exist"
                return self._openai_reject(ex, 404, "invalid_request_error", message, "model", "model_not_found")
            return self._json(200, orjson.dumps(self._openai_model_obj(mid)))
        denied = self._checked(request, ex)
        if denied is not None:
            return denied
        mid = request.path_params["model_id"]
        if not known_model(mid, self._model_ids()):
            return self._reject(ex, 404, "not_found_error", f"model: {mid}")
        return self._json(200, orjson.dumps(self._model_obj(mid)))

    async def _checked_json(self, request: Request, ex: Exchange) -> tuple[Any, Response | None]:
        """The request's checks (credentials, version), then its body read within the limits and parsed as JSON:
        ``(body, None)``, or ``(None, the error response)``."""
        denied = self._checked(request, ex)
        if denied is not None:
            return None, denied
        try:
            raw = await self._read_body(request)
        except _Rejected as e:
            return None, self._reject(ex, e.status, e.etype, e.message, close=True)
        try:
            return orjson.loads(raw), None
        except orjson.JSONDecodeError as e:
            if "depth limit" in str(e):
                message = f"request body nests deeper than {MAX_DEPTH} levels"
            else:
                message = "request body is not valid JSON"
            return None, self._reject(ex, 400, "invalid_request_error", message)

    async def count_tokens(self, request: Request) -> Response:
        """``POST /v1/messages/count_tokens``: the body is checked as ``/v1/messages`` checks it (but takes no
        ``max_tokens``); the count covers everything the model would read: system, tools and messages."""
        ex = self._new_exchange(request)
        body, refused = await self._checked_json(request, ex)
        if refused is not None:
            return refused
        decision = self.api.check(body, max_tokens_required=False)
        ex.history = decision.history
        if decision.rejected:
            return self._reject(ex, decision.status, decision.etype, decision.message, decision.kind)
        ex.model = body.get("model") if isinstance(body.get("model"), str) else None
        n = count_input_tokens(body)
        ex.status = 200
        out = orjson.dumps({"input_tokens": n})
        ex.bytes = len(out)
        self.note(ex)
        return self._json(200, out, {"request-id": self.request_ids.next()})

    async def messages(self, request: Request) -> ASGIApp:
        ex = self._new_exchange(request)
        body, refused = await self._checked_json(request, ex)
        if refused is not None:
            return refused
        decision = self.api.check(body)
        ex.history = decision.history
        if decision.rejected:
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                ex.model = body["model"]
            return self._reject(
                ex, decision.status, decision.etype, decision.message, decision.kind, details=decision.details
            )
        messages = decision.messages
        assert isinstance(messages, list) and decision.turn is not None
        model = body.get("model") if isinstance(body.get("model"), str) and body.get("model") else None
        ex.model = model
        if not self.echo_model:
            model = None  # the scenario's own model, bytes exactly as rendered
        if self.recording is not None:
            wrong = wrong_endpoint(self.recording, None)
            if wrong is not None:
                return self._reject(ex, 400, "invalid_request_error", wrong)
        # a recording of many conversations answers each request from its own conversation's turns
        rec = self.recording.conversation_for(body) if self.recording is not None else None
        if rec is not None:
            name = rec.name
        else:
            name = (request.headers.get(SCENARIO_HEADER) or self.default_scenario).strip()
        ex.scenario = name
        if self.recording is None and name not in self.scenarios:
            return self._reject(
                ex,
                400,
                "invalid_request_error",
                f"{SCENARIO_HEADER}: unknown scenario {name!r}; available: {', '.join(self.scenarios)}",
            )
        header_faults = request.headers.get(FAULT_HEADER)
        try:
            faults = parse_faults(header_faults) if header_faults is not None else self.default_faults
            if self.recording is not None:
                check_recording_faults(faults)
        except FaultError as e:
            return self._reject(ex, 400, "invalid_request_error", f"{FAULT_HEADER}: {e}")
        ex.faults = faults_key(faults)
        turns = len(rec.turns) if rec is not None else len(self.scenarios[name].turns)
        session = _session_of(request)
        decision = self.api.select(decision, body, name=name, turns=turns, faults=ex.faults, session=session)
        if decision.rejected:
            return self._reject(ex, decision.status, decision.etype, decision.message, decision.kind)
        turn, attempt, ended = decision.turn, decision.attempt, decision.ended
        assert turn is not None and attempt is not None
        ex.turn, ex.attempt, ex.script_ended = turn, attempt, ended
        if rec is not None and not ended:
            self._start_diff(ex, rec, turn, body)
        seed = decision.seed
        try:
            faults = await self._faults_now(
                decision,
                faults,
                ex,
                lambda fs: self._render(name, fs, turn, attempt, model, ended, turns, rec, seed),
            )
            plan = await self._plan_for(name, faults, turn, attempt, model, ended, turns, rec, seed)
        except (ValueError, IndexError, TypeError) as e:
            return self._reject(
                ex,
                500,
                "api_error",
                f"inspector: cannot render {name!r} turn {turn} with faults {ex.faults}: {e}",
            )
        if decision.thread is not None and plan.status == 200 and plan.end == "eof":
            # a threaded reply: kept under its id, for the request that continues it
            try:
                self.api.remember_reply(decision, assembled_message(plan))
            except ValueError:  # (a recorded answer that does not assemble: nothing to continue)
                log.warning("serve: a threaded reply did not assemble: it cannot be continued", exc_info=True)
        stream = body.get("stream") is True
        ex.stream = stream
        self._selected(ex)
        await self.pacer.sleep(plan.header_delay)
        headers, error = self.api.response_headers(
            plan.status, plan.headers, plan.body if plan.status != 200 else b"", body, speed=self.pacer.speed
        )
        self._fault_header(headers, ex)
        if plan.status != 200:
            ex.status, ex.reads, ex.bytes, ex.end = plan.status, 1, len(error), "eof"
            self.note(ex)
            return _Body(self, plan.status, headers, [error], ex)
        if stream:
            return _PlanStream(self, plan, headers, ex)
        return await self._non_stream(plan, headers, ex)

    # --- the OpenAI family ----------------------------------------------------------------------------------------
    async def chat_completions(self, request: Request) -> ASGIApp:
        """``POST /v1/chat/completions``: the scenario's turn as chat completion chunks (or a ``chat.completion``)."""
        return await self._openai(request, "chat")

    async def responses(self, request: Request) -> ASGIApp:
        """``POST /v1/responses``: the scenario's turn as Responses events (or a ``response``)."""
        return await self._openai(request, "responses")

    def _openai_reject(
        self,
        ex: Exchange,
        status: int,
        etype: str,
        message: str,
        param: str | None = None,
        code: str | None = None,
        kind: str | None = None,
        close: bool = False,
    ) -> Response:
        ex.status, ex.rejected, ex.kind = status, message, kind
        body = openai_error_body(etype, message, param, code)
        ex.bytes = len(body)
        self.note(ex)
        headers = {"x-request-id": self.api.openai_request_id()}
        if close:
            headers["connection"] = "close"
        return self._json(status, body, headers)

    async def _openai(self, request: Request, api: Api) -> ASGIApp:
        ex = self._new_exchange(request)
        if not self.lenient:
            problem = openai_credentials_problem(request.headers)
            if problem is not None:
                return self._openai_reject(ex, *problem)
        try:
            raw = await self._read_body(request)
        except _Rejected as e:
            return self._openai_reject(ex, e.status, "invalid_request_error", e.message, close=True)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            too_deep = "depth limit" in str(e)
            message = (
                f"request body nests deeper than {MAX_DEPTH} levels"
                if too_deep
                else "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
                "your HTTP library correctly. The OpenAI API expects a JSON payload.)"
            )
            return self._openai_reject(ex, 400, "invalid_request_error", message)
        decision: Decision = self.api.check_openai(body, api)
        ex.history = decision.history
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            ex.model = body["model"]
        if decision.rejected:
            return self._openai_reject(
                ex, decision.status, decision.etype, decision.message, decision.param, decision.code, decision.kind
            )
        model = ex.model or None
        if not self.echo_model:
            model = None
        rec: RecordingSource | None = None
        if self.recording is not None:  # replayed on the endpoint of its family only
            wrong = wrong_endpoint(self.recording, api)
            if wrong is not None:
                return self._openai_reject(ex, 400, "invalid_request_error", wrong)
            rec = self.recording.conversation_for(body)
            name = rec.name
        else:
            name = (request.headers.get(SCENARIO_HEADER) or self.default_scenario).strip()
            if name not in self.scenarios:
                ex.scenario = name
                return self._openai_reject(
                    ex,
                    400,
                    "invalid_request_error",
                    f"{SCENARIO_HEADER}: unknown scenario {name!r}; available: {', '.join(self.scenarios)}",
                )
        ex.scenario = name
        header_faults = request.headers.get(FAULT_HEADER)
        try:
            faults = parse_faults(header_faults) if header_faults is not None else self.default_faults
            if rec is not None:
                check_recording_faults(faults)
        except FaultError as e:
            return self._openai_reject(ex, 400, "invalid_request_error", f"{FAULT_HEADER}: {e}")
        ex.faults = faults_key(faults)
        turns = len(rec.turns) if rec is not None else len(self.scenarios[name].turns)
        session = _session_of(request)
        decision = self.api.select(
            decision, body, name=name, turns=turns, faults=ex.faults, session=session, family=api
        )
        if decision.rejected:
            return self._openai_reject(ex, decision.status, decision.etype, decision.message, decision.param)
        turn, attempt, ended = decision.turn, decision.attempt, decision.ended
        assert turn is not None and attempt is not None
        ex.turn, ex.attempt, ex.script_ended = turn, attempt, ended
        options = body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        include_usage = api == "chat" and (asked or body.get("stream") is not True)  # a chat.completion has usage
        choices = _choices(body) if api == "chat" else 1
        # what a Response echoes and what seeds its ids; a chat answer's id seed (its conversation's start): two
        # conversations served together never share a completion id or a tool call id
        echo = None if ended else response_echo(body) if api == "responses" else chat_echo(body)

        def render(fs: tuple[FaultSpec, ...]) -> ResponsePlan:
            if ended:
                fallback = rec.model if rec is not None else self.scenarios[name].model
                return end_of_script_plan(
                    name, turns, turn, attempt, model or fallback, fs, api, include_usage, choices
                )
            if rec is not None:
                return self._recorded_plan(rec, fs, turn, attempt, api)
            return self.plan(name, fs, turn, attempt, model, api, include_usage, echo, choices)

        if rec is not None and not ended:
            self._start_diff(ex, rec, turn, body)
        try:
            faults = await self._faults_now(decision, faults, ex, render)
            plan = (
                None
                if ended or rec is not None
                else self._cached(_plan_key(name, faults, turn, attempt, model, api, include_usage, echo, choices))
            )
            if plan is None:
                plan = await asyncio.to_thread(render, faults)
        except (ValueError, IndexError, TypeError) as e:
            return self._openai_reject(
                ex, 500, "server_error", f"inspector: cannot render {name!r} turn {turn} with faults {ex.faults}: {e}"
            )
        if api == "responses" and plan.status == 200 and plan.events and plan.events[0][0] == "response.created":
            first = plan.events[0][1]
            created = first.get("response") if isinstance(first, dict) else None  # (a recorded event may lack it)
            if isinstance(created, dict) and isinstance(created.get("id"), str):
                self.api.remember_response(created["id"], turn)
        stream = body.get("stream") is True
        ex.stream = stream
        self._selected(ex)
        await self.pacer.sleep(plan.header_delay)
        headers, error = self.api.response_headers(
            plan.status,
            plan.headers,
            plan.body if plan.status != 200 else b"",
            body,
            speed=self.pacer.speed,
            family="openai",
        )
        self._fault_header(headers, ex)
        if plan.status != 200:
            ex.status, ex.reads, ex.bytes, ex.end = plan.status, 1, len(error), "eof"
            self.note(ex)
            return _Body(self, plan.status, headers, [error], ex)
        if stream:
            return _PlanStream(self, plan, headers, ex)
        return await self._non_stream(plan, headers, ex, api)

    def _start_diff(self, ex: Exchange, rec: RecordingSource, turn: int, body: dict[str, Any]) -> None:
        """Compare the request with the recorded one of its turn, in the background (:meth:`_request_diff`)."""
        recorded = rec.recorded_request(turn)
        if recorded is not None:
            seq = ex.seq
            task = self._diffs[seq] = asyncio.ensure_future(self._request_diff(ex, recorded, body))
            task.add_done_callback(lambda _: self._diffs.pop(seq, None))

    async def _request_diff(self, ex: Exchange, recorded: dict[str, Any], body: dict[str, Any]) -> None:
        """How the request differs from the recorded one, into ``ex``: computed in a worker thread (never on the
        event loop), within ``diff_budget`` seconds (past it, the exchange says so)."""
        if self._diff_pool is None:
            self._diff_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="serve-diff")
        work = asyncio.get_running_loop().run_in_executor(self._diff_pool, request_diff, recorded, body)
        try:
            ex.differs, ex.diff = await asyncio.wait_for(work, self.diff_budget)
        except TimeoutError:
            ex.differs, ex.diff = f"not compared: the request diff took more than its {self.diff_budget:g} s", []
        except Exception as e:  # a diff must never fail the request
            log.warning("the request diff failed", exc_info=True)
            ex.differs, ex.diff = f"not compared: the request diff failed ({type(e).__name__}: {e})", []

    async def _plan_for(
        self,
        name: str,
        faults: tuple[FaultSpec, ...],
        turn: int,
        attempt: int,
        model: str | None,
        ended: bool,
        turns: int,
        recording: RecordingSource | None = None,
        seed: str = "",
    ) -> ResponsePlan:
        """The plan for this request, rendered in a worker thread when not cached (a big scenario takes a
        quarter of a second: other connections keep being served meanwhile). ``seed``: the conversation's
        message id seed (``Decision.seed``)."""
        if not ended and recording is None and self.recording is None:
            cached = self._cached(_plan_key(name, faults, turn, attempt, model, seed=seed))
            if cached is not None:
                return cached
        return await asyncio.to_thread(self._render, name, faults, turn, attempt, model, ended, turns, recording, seed)

    def _render(
        self,
        name: str,
        faults: tuple[FaultSpec, ...],
        turn: int,
        attempt: int,
        model: str | None,
        ended: bool,
        turns: int,
        recording: RecordingSource | None = None,
        seed: str = "",
    ) -> ResponsePlan:
        """:meth:`_plan_for`'s plan, rendered here (blocking: call it in a worker thread)."""
        recording = recording if recording is not None else self.recording
        if ended:
            fallback = recording.model if recording is not None else self.scenarios[name].model
            return end_of_script_plan(name, turns, turn, attempt, model or fallback, faults)
        if recording is not None:
            return self._recorded_plan(recording, faults, turn, attempt)
        return self.plan(name, faults, turn, attempt, model, seed=seed)

    def _recorded_plan(
        self, recording: RecordingSource, faults: tuple[FaultSpec, ...], turn: int, attempt: int, api: Api | None = None
    ) -> ResponsePlan:
        """A recording's answer to attempt ``attempt`` of turn ``turn``, with the faults on top, cached (blocking).
        Attempts past the recorded ones all get the last recorded attempt: one cached plan for them (the first
        streamed attempt, after the HTTP faults, may be a drop: the one after it is distinct); keyed by the
        conversation (its name), so that conversations never share an answer. ``api``: an OpenAI recording's
        family (its HTTP faults' error form, and its events named as the OpenAI renderer names them)."""
        http = sum(1 for f in faults if FAULTS[f.name].kind == "http")
        same = min(attempt, max(len(recording.turns[turn]) - 1 + http, http + 1))
        key = ("\x00recording", recording.name, faults_key(faults), turn, same, api)
        plan = self._cached(key)
        if plan is None:
            plan = recording_faults(recording, faults, turn, same, api)
            if api is not None and plan.status == 200:
                plan = dataclasses.replace(plan, events=_openai_events(plan.events, api))
            with self._lock:
                self._plans[key] = plan
                while len(self._plans) > 64:
                    self._plans.popitem(last=False)
        return plan if plan.attempt == attempt else dataclasses.replace(plan, attempt=attempt)

    async def _faults_now(
        self,
        decision: Decision,
        faults: tuple[FaultSpec, ...],
        ex: Exchange,
        render: Callable[[tuple[FaultSpec, ...]], ResponsePlan],
    ) -> tuple[FaultSpec, ...]:
        """The faults this request is answered with: the ``@turn`` ones, and the ``@once`` ones its conversation
        turn holds (the first request one changes takes it: decided in a worker thread, which renders the answer
        with and without it). ``ex.once`` says what became of each ``@once`` fault."""
        once = [f for f in faults if f.once]
        if not once:
            return faults
        where = f"request {ex.seq + 1}: turn {(ex.turn or 0) + 1} attempt {(ex.attempt or 0) + 1}"

        def changed(held: Sequence[Hashable], fault: Hashable) -> bool:
            return changes(faults, held, fault, render)

        held, notes = await asyncio.to_thread(self.api.hold_once, decision, once, changed, where)
        ex.once = "; ".join(f"{f.label} {notes[f]}" for f in once)
        return in_effect(faults, held)

    @staticmethod
    def _fault_header(headers: dict[str, str], ex: Exchange) -> None:
        """``x-inspector-fault`` on an answer: the faults chosen, each with its scope, and what became of the
        ``@once`` ones (so that a recording made in front of serve keeps them)."""
        if ex.faults != "none":
            headers[FAULT_HEADER] = ex.faults + (f"; {ex.once}" if ex.once else "")

    async def _non_stream(
        self, plan: ResponsePlan, headers: dict[str, str], ex: Exchange, api: Api | None = None
    ) -> _Body:
        if plan.end == "hang":  # a stall never answers (its pings are not even counted)
            await self.pacer.sleep(sum(r.delay for r in plan.reads))
            out = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "cache-control")}
            out["content-type"] = "application/json"
            ex.status = 200
            return _Body(self, 200, out, [], ex, end="hang")
        await self.pacer.sleep(sum(r.delay for r in plan.reads))
        error_event = next((e for e in plan.events if e[0] == "error"), None)  # (a recorded one's data may be null)
        out = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "cache-control")}
        out["content-type"] = "application/json"
        if error_event is not None:
            error = error_event[1]
            # (a recorded error event, or its "error", may be something else than an object: answered all the same)
            recorded = error.get("error") if isinstance(error, dict) else error
            etype = str((recorded.get("type") if isinstance(recorded, dict) else None) or "api_error")
            if api is None:
                status = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}.get(etype, 500)
                body = exactjson.dumps(error)
            else:  # OpenAI: {"error": {...}}; an overloaded engine is a 503, a rate limit a 429
                if isinstance(recorded, dict) and recorded:
                    err = recorded
                elif recorded:  # not an object: its text is the message
                    text = recorded if isinstance(recorded, str) else exactjson.dumps(recorded).decode()
                    err = openai_error("api_error", text)
                else:
                    err = openai_error("api_error")
                code = err.get("code")
                status = (
                    429 if code == "rate_limit_exceeded" else 503 if "overloaded" in str(err.get("message")) else 500
                )
                body = exactjson.dumps({"error": {k: err.get(k) for k in ("message", "type", "param", "code")}})
            ex.status, ex.bytes, ex.end = status, len(body), "eof"
            self.note(ex)
            return _Body(self, status, out, [body], ex)
        try:
            assembled = assembled_chat(plan) if api == "chat" else assembled_response(plan) if api else None
        except MalformedAnswer as e:  # a recording's event is not the shape it names: the error an API gives
            message = f"inspector: the recorded answer is malformed: {e}: nothing to assemble for a stream: false "
            message += "request (ask with stream: true to get the recorded bytes)"
            body = openai_error_body("server_error", message)
            ex.status, ex.bytes, ex.end, ex.rejected = 500, len(body), "eof", message
            self.note(ex)
            return _Body(self, 500, out, [body], ex)
        except ValueError:
            assembled = None
        if api == "chat":
            body = exactjson.dumps(assembled)
        elif api == "responses":
            if assembled is not None:
                body = exactjson.dumps(assembled)
            else:  # no final event: a stream cut before its end, or a recording that ends without one
                started = next(
                    (
                        d["response"]
                        for n, d in plan.events
                        if n == "response.created" and isinstance(d, dict) and isinstance(d.get("response"), dict)
                    ),
                    None,
                )
                if plan.end != "drop" or started is None:
                    message = "inspector: the answer has no response.completed / .incomplete / .failed event: nothing "
                    message += "to give a stream: false request (ask with stream: true to see what it has)"
                    body = openai_error_body("server_error", message)
                    ex.status, ex.bytes, ex.end, ex.rejected = 500, len(body), "eof", message
                    self.note(ex)
                    return _Body(self, 500, out, [body], ex)
                body = exactjson.dumps(started)  # the response as it started, cut by the drop below
        else:
            body = exactjson.dumps(assembled_message(plan))
        ex.status, ex.bytes = 200, len(body)
        if plan.end == "drop":  # headers promise the whole message; half of it comes, then the connection breaks
            out["content-length"] = str(len(body))
            return _Body(self, 200, out, [body[: len(body) // 2]], ex, end="drop")
        return _Body(self, 200, out, [body], ex)


def _plan_key(
    name: str,
    faults: tuple[FaultSpec, ...],
    turn: int,
    attempt: int,
    model: str | None,
    api: Api | None = None,
    include_usage: bool = False,
    echo: dict[str, Any] | None = None,
    choices: int = 1,
    seed: str = "",
) -> PlanKey:
    key: PlanKey = (name, faults_key(faults), turn, attempt, model)
    if api is None:
        return (*key, seed) if seed else key
    return (*key, api, include_usage, echo_key(echo), choices)


def _choices(body: dict[str, Any]) -> int:
    """A chat request's ``n`` (checked by the fake API unless lenient: then anything but 1..128 counts as 1)."""
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_CHOICES else 1


def _openai_events(events: list[Event], api: Api) -> list[Event]:
    """A recorded OpenAI stream's events named as the OpenAI renderer names them (what ``assembled_chat`` /
    ``assembled_response`` and the error check of a ``stream: false`` answer read): a chat chunk ``chunk``, an
    error object ``error``, a Responses event its ``type``; anything else (``[DONE]``) keeps its SSE name."""
    out: list[Event] = []
    for name, data in events:
        if isinstance(data, dict) and "error" in data and data.get("type") in (None, "error"):
            out.append(("error", data))
        elif api == "chat" and _chat_chunk(name, data):
            out.append(("chunk", data))
        elif api == "responses" and isinstance(data, dict) and isinstance(data.get("type"), str):
            out.append((data["type"], data))
        else:
            out.append((name, data))
    return out


def _chat_chunk(name: str, data: object) -> bool:
    """Whether a recorded chat event stands where a chunk does: an object with ``choices`` (of any shape) or named
    ``chat.completion.chunk``, or JSON that is not an object (not under ``event: error``); not ``[DONE]``, not a
    line that is not JSON. ``assembled_chat`` then names a chunk that is not a chunk's shape, never skips it."""
    if isinstance(data, dict):
        return "choices" in data or data.get("object") == "chat.completion.chunk"
    return name != "error"


def _raw_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]


class _Body:
    """A fixed body (JSON), maybe cut short ("drop") or never sent ("hang")."""

    def __init__(
        self, app: ServeApp, status: int, headers: dict[str, str], chunks: list[bytes], ex: Exchange, end: str = "eof"
    ) -> None:
        self.app, self.status, self.headers, self.chunks, self.ex, self.end = app, status, headers, chunks, ex, end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": _raw_headers(self.headers)})
        for c in self.chunks:
            await send({"type": "http.response.body", "body": c, "more_body": True})
        if self.end == "eof":
            if self.ex.status == 200:  # noted before the body's end goes out (see _PlanStream)
                self.ex.end = "eof"
                self.app.note(self.ex)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if self.end == "hang":
            outcome = await _race(lambda: asyncio.Event().wait(), receive, self.app.closing())
            self.ex.end = "disconnected" if outcome == "disconnected" else "hang"
            self.app.note(self.ex)
            if outcome == "closing":
                raise ConnectionDrop("server shutting down")
            return
        self.ex.end = "drop"
        self.app.note(self.ex)
        raise ConnectionDrop("planned drop")


class _PlanStream:
    """The SSE body of a plan: each planned read is one ``send`` after its (paced) delay."""

    def __init__(self, app: ServeApp, plan: ResponsePlan, headers: dict[str, str], ex: Exchange) -> None:
        self.app, self.plan, self.headers, self.ex = app, plan, headers, ex

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app, plan, ex = self.app, self.plan, self.ex
        ex.status = 200
        await send({"type": "http.response.start", "status": 200, "headers": _raw_headers(self.headers)})

        ended = False  # the body's end went out with its last read, the exchange noted just before

        async def body() -> None:
            nonlocal ended
            reads = iter_reads(plan)  # a long stall's pings are made one by one as time passes
            r = next(reads, None)
            while r is not None:
                following = next(reads, None)
                # the last read of a stream that ends at EOF carries the body's end: a client that stops reading at
                # its end marker (the openai SDK at `data: [DONE]`) then has it only once the exchange is noted (the
                # pytest plugin holds the last body message until then). The exchange is noted before it goes out:
                # a client that has the whole answer finds it in /inspector/requests (noted after the send, a GET
                # on the same connection could come first: CI saw one of two turns listed)
                last = following is None and plan.end == "eof"
                await app.pacer.sleep(r.delay)
                ex.reads += 1
                ex.bytes += len(r.data)
                if last:
                    ex.end, ended = "eof", True
                    app.note(ex)
                await send({"type": "http.response.body", "body": r.data, "more_body": not last})
                r = following
            if plan.end == "hang":
                await asyncio.Event().wait()

        outcome = await _race(body, receive, app.closing())
        if ended:  # noted (what became of its last send is the client's: it was handed over whole)
            return
        if outcome == "disconnected":
            ex.end = "disconnected"
            app.note(ex)
            return
        if outcome == "closing":
            ex.end = "hang" if plan.end == "hang" else "closing"
            app.note(ex)
            raise ConnectionDrop("server shutting down")
        if plan.end == "drop":
            ex.end = "drop"
            app.note(ex)
            raise ConnectionDrop("planned drop")
        ex.end = "eof"
        app.note(ex)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def make_app(
    scenario: str | Scenario = DEFAULT_SCENARIO,
    faults: str | Sequence[FaultSpec | str] | None = None,
    *,
    speed: float = 1.0,
    **kw: Any,
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
    if ex.script_ended:
        where += " (past the end of the script: placeholder end_turn reply)"
    if ex.once:
        where += f" ({ex.once})"
    if ex.differs:
        where += f" (differs from the recording: {ex.differs})"
    if ex.rejected:
        return f"{ex.method} {ex.path} {where}{faults} -> {ex.status}: {ex.rejected}"
    kind = "stream" if ex.stream else "json"
    sizes = f"{count(ex.reads, 'read')}, {count(ex.bytes, 'byte')}"
    return f"{ex.method} {ex.path} {where}{faults} -> {ex.status} {kind}, {sizes}, {ex.end}"

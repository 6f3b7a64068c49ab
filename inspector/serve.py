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
(:func:`inspector.history.history_violation`, shared with the in-process ``ScenarioServer``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import math
import socket
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import orjson

from inspector.history import Violation, history_violation
from inspector.pacing import Pacer, parse_speed, speed_label
from inspector.scenarios.bundled import DEFAULT_SCENARIO, SCENARIOS
from inspector.scenarios.model import (
    DropAfter,
    ErrorEventAfter,
    HttpError,
    InvalidToolJson,
    MaxTokensCut,
    Scenario,
    StallWithPings,
    TurnScript,
)
from inspector.scenarios.render import PlannedRead, ResponsePlan, render_turn
from inspector.scenarios.transport import ScenarioServer, scale_retry_headers

__all__ = [
    "FAULTS",
    "BOM",
    "BackgroundServer",
    "Closable",
    "ConnectionDrop",
    "FaultDef",
    "FaultError",
    "FaultSpec",
    "FaultedScenarioServer",
    "ServeApp",
    "Violation",
    "add_parser",
    "apply_faults",
    "assembled_message",
    "cmd",
    "faults_doc",
    "first_stream_attempt",
    "history_violation",
    "main",
    "make_app",
    "parse_faults",
    "plan_faults",
    "render_faulted",
]

BOM = b"\xef\xbb\xbf"
SCENARIO_HEADER = "x-inspector-scenario"
FAULT_HEADER = "x-inspector-fault"
SESSION_HEADER = "x-inspector-session"
EVERYTHING = 1 << 40  # a proxy buffer no stream fills: everything is released at EOF

log = logging.getLogger("inspector.serve")


# =====================================================================================================================
# Faults
# =====================================================================================================================


class FaultError(ValueError):
    """An unknown fault, a bad argument or an impossible combination (one line for the user)."""


@dataclass(frozen=True, slots=True)
class FaultDef:
    name: str
    kind: str  # "http" | "transport" | "content" | "format"
    summary: str
    doc: str
    arg: str | None = None  # what the optional argument means
    default: float | int | None = None
    integer: bool = False


# Catalogue order is the order faults are applied (so the result does not depend on how the user orders them,
# except for http_429/http_529, whose order decides which attempt gets which status).
FAULTS: dict[str, FaultDef] = {
    f.name: f
    for f in (
        FaultDef("http_429", "http", "429 rate_limit_error with retry-after before the stream",
                 "The first request of every turn is answered HTTP 429 rate_limit_error with `retry-after: S` and "
                 "`retry-after-ms` (scaled by --speed, like every scenario wait); the retry gets the scenario. "
                 "The SDK retries it by itself (2 retries by default).", "S seconds", 1.0),
        FaultDef("http_529", "http", "529 overloaded_error with retry-after before the stream",
                 "Like http_429 with HTTP 529 overloaded_error. Given together with http_429, the statuses come in "
                 "the order written (attempt 0, then 1), then the scenario.", "S seconds", 1.0),
        FaultDef("error_event", "transport", "HTTP 200, N events, then an overloaded_error event",
                 "HTTP 200, the first N protocol events (pings not counted), then `event: error` "
                 "{\"type\":\"overloaded_error\"} and EOF. The SDK raises APIStatusError and never retries it; the "
                 "harness must. First streamed attempt of each turn only (the retry is clean).", "N events", 3,
                 True),
        FaultDef("drop_event", "transport", "the connection breaks after N events",
                 "The connection is closed after N protocol events: the chunked body never gets its last chunk, "
                 "so clients see an incomplete body (httpx: RemoteProtocolError 'incomplete chunked read'). First "
                 "streamed attempt of each turn only.", "N events", 4, True),
        FaultDef("drop_byte", "transport", "the connection breaks after N body bytes",
                 "The connection is closed after exactly N bytes of body (maybe inside an event, inside a UTF-8 "
                 "character). First streamed attempt of each turn only.", "N bytes", 200, True),
        FaultDef("stall", "transport", "after message_start: only N pings, then silence (connection open)",
                 "After message_start, only pings (one every 0.5 s, N of them), then nothing: the connection "
                 "stays open until the client gives up. Pings count as reads, so a read timeout never fires: "
                 "the harness needs an idle timeout on content events. First streamed attempt only.",
                 "N pings", 10, True),
        FaultDef("invalid_tool_json", "content", "the last tool block's JSON is invalid at content_block_stop",
                 "Fine-grained tool streaming does not validate: the last tool_use block of each turn streams its "
                 "input JSON cut in the middle of its last string, then content_block_stop. The harness must not "
                 "run that tool (and not with {}). Every attempt; turns without a tool block are unchanged."),
        FaultDef("max_tokens_tool", "content", "max_tokens inside the first tool block",
                 "The turn hits max_tokens inside its first tool_use block: about half of its input deltas, no "
                 "content_block_stop, then message_delta stop_reason max_tokens and message_stop. Later blocks "
                 "never come; the tool must not run. Every attempt; turns without a tool block are unchanged."),
        FaultDef("slow_drip", "format", "one event per read, S seconds apart",
                 "Content keeps coming, slowly: one event per read, S seconds between events, no jitter. An idle "
                 "timeout shorter than S fires; a longer one must not. (A buffering relay that is part of the "
                 "scenario, as in proxy_buffered, still merges the reads.)", "S seconds", 0.25),
        FaultDef("relay_buffer", "format", "a buffering relay: nothing, then everything in one burst at the end",
                 "Headers arrive on time, then the body is held back and released in one read when the stream "
                 "ends (nginx proxy_buffering on SSE; the fix is `X-Accel-Buffering: no`). Same bytes, no "
                 "typing effect; `inspector dump --timing` flags it as buffered."),
        FaultDef("split_events", "format", "every event cut across two reads at a seeded byte",
                 "Every event is cut at a seeded byte offset (maybe inside a line, a JSON string or a UTF-8 "
                 "character), so its bytes arrive in at least two reads and no read holds a whole event: a "
                 "decoder that assumes one event per read breaks. Same bytes, same total time."),
        FaultDef("cr", "format", "CR-only line endings",
                 "Lines end with a lone CR (\\r): valid SSE that line-splitting on \\n alone does not decode."),
        FaultDef("crlf", "format", "CRLF line endings", "Lines end with CRLF (\\r\\n): valid SSE."),
        FaultDef("bom", "format", "a UTF-8 BOM before the first event",
                 "The body starts with EF BB BF. The SSE spec strips one BOM; the official Python SDK does not "
                 "(its first event loses its `event:` field and is dropped: message_start goes missing)."),
        FaultDef("padded", "format", "data JSON padded with trailing spaces",
                 "Every data line gets 1-8 trailing spaces after the JSON, as the real API sometimes sends."),
    )
}
_EXCLUSIVE = [("error_event", "drop_event", "drop_byte", "stall"), ("cr", "crlf")]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One chosen fault: a catalogue name and its argument (the default when not given)."""

    name: str
    arg: float | int | None = None

    def __str__(self) -> str:
        d = FAULTS[self.name]
        if self.arg is None or self.arg == d.default:
            return self.name
        return f"{self.name}:{self.arg:g}"

    @property
    def value(self) -> float | int | None:
        return self.arg if self.arg is not None else FAULTS[self.name].default


def parse_faults(spec: str | FaultSpec | Iterable[str | FaultSpec] | None) -> tuple[FaultSpec, ...]:
    """``"drop_event:5,bom"`` (or a list of such strings / FaultSpecs) -> FaultSpecs. Hyphens and underscores are
    interchangeable; ``NAME=ARG`` works too; ``none`` / empty means no fault. Raises FaultError."""
    if spec is None:
        return ()
    items: list[str | FaultSpec] = [spec] if isinstance(spec, (str, FaultSpec)) else list(spec)
    out: list[FaultSpec] = []
    for item in items:
        if isinstance(item, FaultSpec):
            out.append(item)
            continue
        for raw in str(item).split(","):
            raw = raw.strip()
            if not raw or raw.lower() == "none":
                continue
            name, sep, arg = raw.replace("=", ":", 1).partition(":")
            name = name.strip().lower().replace("-", "_")
            if name not in FAULTS:
                raise FaultError(f"unknown fault {name!r}; available: {', '.join(FAULTS)}")
            d = FAULTS[name]
            value: float | int | None = None
            if sep:
                if d.arg is None:
                    raise FaultError(f"fault {name} takes no argument")
                try:
                    value = int(arg) if d.integer else float(arg)
                except ValueError:
                    raise FaultError(f"fault {name}: {d.arg} must be a{'n integer' if d.integer else ' number'}, "
                                     f"not {arg!r}") from None
                if value < 0 or (not d.integer and not math.isfinite(value)):
                    raise FaultError(f"fault {name}: {d.arg} must be >= 0")
            out.append(FaultSpec(name, value))
    names = [f.name for f in out]
    for group in _EXCLUSIVE:
        chosen = [n for n in group if n in names]
        if len(set(chosen)) > 1:
            raise FaultError(f"faults {' and '.join(sorted(set(chosen)))} cannot be combined (choose one)")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise FaultError(f"fault {sorted(dup)[0]} given twice")
    return tuple(out)


def faults_key(faults: Sequence[FaultSpec]) -> str:
    return ",".join(str(f) for f in faults) or "none"


def faults_doc() -> str:
    """The text of ``inspector serve --list-faults``."""
    lines = ["Faults (--fault NAME[:ARG][,NAME...] or the request header x-inspector-fault):", ""]
    for d in FAULTS.values():
        head = d.name + (f"[:{d.arg.split()[0]}]" if d.arg else "")
        unit = d.arg.split(" ", 1)[1] if d.arg else ""
        default = f" (default {d.default:g}{' s' if unit == 'seconds' else ' ' + unit})" if d.arg else ""
        lines.append(f"  {head:<22}{d.summary}{default}")
        for chunk in _wrap(d.doc, 88):
            lines.append(" " * 24 + chunk)
    lines += [
        "",
        "Transport faults (error_event, drop_event, drop_byte, stall) replace the scenario's own, hit the first",
        "attempt of each turn that streams (after any http_429/http_529 answers) and leave retries clean.",
        "Content and format faults apply to every attempt. A fault that needs a tool block leaves turns",
        "without one unchanged. Same scenario + faults + requests = same bytes.",
    ]
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    if line:
        lines.append(line)
    return lines


def first_stream_attempt(turn: TurnScript) -> int:
    """The first attempt of a turn that is not answered with an HTTP error."""
    taken = {e.attempt for e in turn.http_errors}
    a = 0
    while a in taken:
        a += 1
    return a


def _shift(fault: Any, n: int) -> Any:
    if n == 0 or fault.attempts is None:
        return fault
    return dataclasses.replace(fault, attempts=tuple(a + n for a in fault.attempts))


_TRANSPORT = (ErrorEventAfter, DropAfter, StallWithPings)


def apply_faults(scenario: Scenario, faults: str | Sequence[FaultSpec | str] | None) -> Scenario:
    """The scenario with the chosen faults built in (a new Scenario; the original is untouched). Plan-level faults
    (bom, drop_byte) are not visible here: use :func:`render_faulted` to render."""
    chosen = parse_faults(faults)
    if not chosen:
        return scenario
    by_name = {f.name: f for f in chosen}
    http = [f for f in chosen if FAULTS[f.name].kind == "http"]
    transport = next((f for f in chosen if FAULTS[f.name].kind == "transport"), None)
    turns: list[TurnScript] = []
    for turn in scenario.turns:
        faults_list = list(turn.faults)
        http_errors = list(turn.http_errors)
        pacing = turn.pacing
        n = len(http)
        if n:  # our HTTP errors come first; the scenario's own attempts move back
            faults_list = [_shift(f, n) for f in faults_list]
            http_errors = [dataclasses.replace(e, attempt=e.attempt + n) for e in http_errors]
            ours = []
            for i, f in enumerate(http):
                secs = float(f.value or 0.0)
                ours.append(HttpError(429 if f.name == "http_429" else 529, attempt=i, retry_after=secs,
                                      retry_after_ms=int(round(secs * 1000))))
            http_errors = ours + http_errors
        if transport is not None:
            faults_list = [f for f in faults_list if not isinstance(f, _TRANSPORT)]
            first = first_stream_attempt(dataclasses.replace(turn, http_errors=http_errors))
            v = transport.value
            if transport.name == "error_event":
                faults_list.append(ErrorEventAfter(n_events=int(v), attempts=(first,)))
            elif transport.name == "drop_event":
                faults_list.append(DropAfter(n_events=int(v), attempts=(first,)))
            elif transport.name == "stall":
                faults_list.append(StallWithPings(after_events=1, ping_interval=0.5, pings=int(v), then="hang",
                                                  attempts=(first,)))
            # drop_byte is applied to the plan (plan_faults)
        tools = [i for i, _ in turn.tool_blocks()]
        if "invalid_tool_json" in by_name and tools:
            b = tools[-1]
            faults_list = [f for f in faults_list if not (isinstance(f, InvalidToolJson) and f.block == b)]
            faults_list.append(InvalidToolJson(block=b, attempts=None))
        if "max_tokens_tool" in by_name and tools:
            b = tools[0]
            faults_list = [f for f in faults_list if not isinstance(f, MaxTokensCut)
                           and not (isinstance(f, DropAfter) and f.inside_block is not None and f.inside_block >= b)]
            faults_list.append(MaxTokensCut(block=b, attempts=None))
        if "slow_drip" in by_name:
            pacing = dataclasses.replace(pacing, event_gap=float(by_name["slow_drip"].value or 0.0), jitter=0.0,
                                         events_per_read=1, block_pause=0.0)
        if "relay_buffer" in by_name:
            pacing = dataclasses.replace(pacing, proxy_buffer=EVERYTHING)
        if "split_events" in by_name:
            pacing = dataclasses.replace(pacing, split_events=True)
        if "cr" in by_name:
            pacing = dataclasses.replace(pacing, line_ending="\r")
        if "crlf" in by_name:
            pacing = dataclasses.replace(pacing, line_ending="\r\n")
        if "padded" in by_name:
            pacing = dataclasses.replace(pacing, pad=True)
        turns.append(dataclasses.replace(turn, pacing=pacing, faults=faults_list, http_errors=http_errors))
    return dataclasses.replace(scenario, turns=turns)


def plan_faults(faulted: Scenario, faults: Sequence[FaultSpec], plan: ResponsePlan) -> ResponsePlan:
    """The plan-level faults (bom, drop_byte) on a plan rendered from ``apply_faults(...)`` (``faulted``)."""
    names = {f.name: f for f in faults}
    if plan.status != 200 or not ({"bom", "drop_byte"} & names.keys()):
        return plan
    reads = list(plan.reads)
    events = plan.events
    end = plan.end
    if "bom" in names:
        if reads:
            reads[0] = PlannedRead(reads[0].delay, BOM + reads[0].data)
        else:
            reads = [PlannedRead(0.0, BOM)]
    if "drop_byte" in names and plan.attempt == first_stream_attempt(faulted.turns[plan.turn]):
        limit = int(names["drop_byte"].value or 0)
        cut: list[PlannedRead] = []
        total = 0
        for r in reads:
            if total + len(r.data) <= limit:
                cut.append(r)
                total += len(r.data)
                continue
            if limit > total:
                cut.append(PlannedRead(r.delay, r.data[: limit - total]))
            break
        reads, end = cut, "drop"
        events = _events_of(b"".join(r.data for r in reads))
    return dataclasses.replace(plan, reads=reads, end=end, events=events)


def _events_of(body: bytes) -> list[tuple[str, dict]]:
    from inspector.sse import SSEDecoder

    dec = SSEDecoder()
    out = []
    for e in dec.feed(body):  # close() is not called: an unterminated event is not complete
        try:
            data = orjson.loads(e.data)
        except orjson.JSONDecodeError:
            data = {"raw": e.data}
        out.append((e.event, data))
    return out


def render_faulted(scenario: Scenario, faults: str | Sequence[FaultSpec | str] | None, turn: int,
                   attempt: int = 0, *, faulted: Scenario | None = None) -> ResponsePlan:
    """``render_turn`` of the scenario with the faults built in, then the plan-level faults: exactly what
    ``inspector serve`` sends (and :class:`FaultedScenarioServer` in process). ``faulted``: a precomputed
    ``apply_faults(scenario, faults)``."""
    chosen = parse_faults(faults)
    faulted = faulted if faulted is not None else apply_faults(scenario, chosen)
    return plan_faults(faulted, chosen, render_turn(faulted, turn, attempt))


class FaultedScenarioServer(ScenarioServer):
    """The in-process fake API (``httpx2.MockTransport`` handler) with serve's faults: the same bytes as
    ``inspector serve --scenario S --fault F`` for the same requests. It serves ``apply_faults(scenario, faults)``
    and renders with :meth:`render_plan` (render_turn + the plan-level faults), through ScenarioServer's
    ``render`` hook."""

    def __init__(self, scenario: Scenario, faults: str | Sequence[FaultSpec | str] | None = None,
                 pacer: Pacer | None = None, **kw: Any) -> None:
        self.faults = parse_faults(faults)
        self.original = scenario
        super().__init__(apply_faults(scenario, self.faults), pacer, render=self.render_plan, **kw)

    def render_plan(self, faulted: Scenario, turn: int, attempt: int) -> ResponsePlan:
        """What serve sends for this turn and attempt (``faulted`` is this server's ``apply_faults`` scenario)."""
        return plan_faults(faulted, self.faults, render_turn(faulted, turn, attempt))


# =====================================================================================================================
# The ASGI app
# =====================================================================================================================


class ConnectionDrop(Exception):
    """Raised inside a response to break the connection (uvicorn closes the transport: the client sees an
    incomplete chunked body). Filtered out of uvicorn's error log."""


class _DropLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not _is_drop(exc)


def _is_drop(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    if isinstance(exc, ConnectionDrop):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_drop(e) for e in exc.exceptions)
    return False


_FILTER = _DropLogFilter()


def install_log_filter() -> None:
    """Keep planned connection drops out of uvicorn's error log (idempotent)."""
    lg = logging.getLogger("uvicorn.error")
    if _FILTER not in lg.filters:
        lg.addFilter(_FILTER)


def assembled_message(plan: ResponsePlan) -> dict:
    """The Message a non-streaming request gets: the plan's body assembled (tool input that does not parse is
    ``null`` with ``input_raw``, as ``inspector.assembler`` shows it)."""
    from inspector.assembler import assemble

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


class Closable:
    """Shutdown signalling shared by ServeApp and ProxyApp: responses race ``closing()`` (an asyncio.Event bound to
    the server's loop at first use) and ``begin_close()`` sets it from any thread, so hanging and in-progress
    streams end (connection dropped) before uvicorn stops."""

    _closing: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def closing(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
            self._loop = asyncio.get_running_loop()
        return self._closing

    def begin_close(self) -> None:
        """End hanging and in-progress streams: call before stopping the server. Thread-safe; a no-op before the
        server ran or after its loop closed."""
        loop, ev = self._loop, self._closing
        if loop is None or ev is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(ev.set)


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
            raise KeyError(f"unknown scenario {scenario!r}; available: {', '.join(self.scenarios)}")
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
                pass

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
        items = [{"name": d.name, "kind": d.kind, "summary": d.summary, "doc": d.doc, "arg": d.arg,
                  "default": d.default} for d in FAULTS.values()]
        return self._json(200, orjson.dumps({"data": items}))

    def _model_ids(self) -> list[str]:
        seen: list[str] = []
        for sc in self.scenarios.values():
            if sc.model not in seen:
                seen.append(sc.model)
        return seen

    @staticmethod
    def _model_obj(mid: str) -> dict:
        return {"type": "model", "id": mid, "display_name": f"{mid} (inspector scenario)",
                "created_at": "2025-01-01T00:00:00Z"}

    async def models(self, request):
        data = [self._model_obj(m) for m in self._model_ids()]
        body = {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}
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
            return self._reject(Exchange("POST", request.url.path), 400, "invalid_request_error",
                                "request body is not valid JSON")
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
            return self._reject(ex, 400, "invalid_request_error",
                                f"{SCENARIO_HEADER}: unknown scenario {name!r}; available: {', '.join(self.scenarios)}")
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
            return self._reject(ex, 400, "invalid_request_error",
                                f"scenario {name!r} has {len(scenario.turns)} turns; no turn {turn} "
                                f"(this request has {turn} assistant messages)")
        session = request.headers.get(SESSION_HEADER, "")
        digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()
        key = (name, ex.faults, session, turn, digest)
        attempt = self.attempts.get(key, 0)
        self.attempts[key] = attempt + 1
        ex.turn, ex.attempt = turn, attempt
        try:
            plan = self.plan(name, faults, turn, attempt)
        except (ValueError, IndexError, TypeError) as e:
            return self._reject(ex, 500, "api_error", f"inspector: cannot render scenario {name!r} turn {turn} "
                                f"with faults {ex.faults}: {e}")
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


async def _watch_disconnect(receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _race(main: Callable[[], Any], receive, closing: asyncio.Event) -> str:
    """Run ``main()`` until it finishes ("done"), the client disconnects ("disconnected") or the server closes
    ("closing"). Exceptions of ``main`` propagate."""
    task = asyncio.ensure_future(main())
    watch = asyncio.ensure_future(_watch_disconnect(receive))
    stop = asyncio.ensure_future(closing.wait())
    try:
        done, _ = await asyncio.wait({task, watch, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, watch, stop):
            if not t.done():
                t.cancel()
        for t in (watch, stop):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    if task in done:
        task.result()  # re-raises
        return "done"
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return "disconnected" if watch in done else "closing"


def _raw_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]


class _Body:
    """A fixed body (JSON), maybe cut short ("drop") or never sent ("hang")."""

    def __init__(self, app: ServeApp, status: int, headers: dict[str, str], chunks: list[bytes], ex: Exchange,
                 end: str = "eof") -> None:
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


def make_app(scenario: str | Scenario = DEFAULT_SCENARIO, faults: Any = None, *, speed: float = 1.0,
             **kw: Any) -> ServeApp:
    """A :class:`ServeApp` (``.app`` is the ASGI app)."""
    return ServeApp(scenario, faults, speed=speed, **kw)


# =====================================================================================================================
# Running uvicorn: in this thread (the CLI) or in a background thread (tests, embedding)
# =====================================================================================================================


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to host:port (port 0: ephemeral)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP,
                               flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only when sock.proto == IPPROTO_TCP, and
    # without it Nagle + delayed ACK hold a read back ~40 ms after the response headers
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def base_url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _uvicorn_server(asgi_app, *, log_level: str = "warning", access_log: bool = False,
                    ready: threading.Event | None = None):
    import uvicorn

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if ready is not None and self.started:
                ready.set()

    config = uvicorn.Config(asgi_app, log_level=log_level, access_log=access_log, server_header=False,
                            lifespan="on", timeout_graceful_shutdown=2, http="h11", ws="none")
    return _Server(config)


class BackgroundServer:
    """Run an ASGI app with uvicorn in a background thread (its own event loop), on host:port (0 = ephemeral).

        with BackgroundServer(make_app(speed=math.inf)) as srv:
            client = AsyncAnthropic(base_url=srv.base_url, ...)

    ``app`` may be a :class:`ServeApp`, a proxy app (anything with ``.app`` and maybe ``begin_close()``) or an
    ASGI callable."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning",
                 access_log: bool = False, start_timeout: float = 15.0) -> None:
        self.owner = app
        self.asgi = getattr(app, "app", app)
        self.host, self.port = host, port
        self.log_level, self.access_log = log_level, access_log
        self.start_timeout = start_timeout
        self.sock: socket.socket | None = None
        self.server = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        assert self.sock is not None, "not started"
        return base_url_of(self.sock)

    @property
    def address(self) -> tuple[str, int]:
        assert self.sock is not None, "not started"
        host, port = self.sock.getsockname()[:2]
        return host, port

    def start(self) -> BackgroundServer:
        self.sock = bind_socket(self.host, self.port)
        self.server = _uvicorn_server(self.asgi, log_level=self.log_level, access_log=self.access_log,
                                      ready=self._ready)

        def run() -> None:
            try:
                asyncio.run(self.server.serve(sockets=[self.sock]))
            except BaseException as e:  # noqa: BLE001 - reported to the starting thread
                self.error = e
            finally:
                self._ready.set()

        self.thread = threading.Thread(target=run, name=f"uvicorn-{self.base_url}", daemon=True)
        self.thread.start()
        if not self._ready.wait(self.start_timeout) or self.error is not None or not self.server.started:
            self.stop()
            raise RuntimeError(f"server did not start: {self.error!r}")
        return self

    def stop(self) -> None:
        begin_close = getattr(self.owner, "begin_close", None)
        if callable(begin_close):
            begin_close()
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=15)
            self.thread = None
        if self.sock is not None:
            self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_foreground(owner: Any, sock: socket.socket, *, log_level: str = "warning", access_log: bool = False) -> None:
    """Serve until Ctrl-C / SIGTERM (uvicorn's signal handling) on an already bound socket."""
    server = _uvicorn_server(getattr(owner, "app", owner), log_level=log_level, access_log=access_log)
    original = server.handle_exit
    begin_close = getattr(owner, "begin_close", None)

    def handle_exit(sig, frame) -> None:  # end hanging streams at once, then let uvicorn stop
        if callable(begin_close):
            begin_close()
        original(sig, frame)

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    asyncio.run(server.serve(sockets=[sock]))


# =====================================================================================================================
# CLI
# =====================================================================================================================


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default=DEFAULT_SCENARIO,
                   help=f"the scenario to serve (default {DEFAULT_SCENARIO}; per request: header {SCENARIO_HEADER})")
    p.add_argument("--fault", action="append", default=[], metavar="NAME[:ARG][,NAME...]",
                   help=f"inject faults (repeatable; per request: header {FAULT_HEADER}); see --list-faults")
    p.add_argument("--list-faults", action="store_true", help="describe every fault and exit")
    p.add_argument("--speed", type=parse_speed, default=1.0, help="pacing: 1 real time (default), 0.5, 4, max")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: an ephemeral port, printed at start)")
    p.add_argument("--no-history-check", action="store_true",
                   help="do not answer history-rule violations with 400")
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    p.add_argument("--tui", action="store_true",
                   help="show what the server sends its clients, and when, in the dashboard")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``inspector serve`` to an argparse subparsers object; run it with :func:`cmd`."""
    p = subparsers.add_parser("serve", help="serve the scripted scenarios over HTTP (an Anthropic-compatible fake "
                              "API with faults) for any client", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.set_defaults(func=cmd)
    return p


def port_problem(port: Any) -> str | None:
    """Why ``port`` cannot be a TCP port to listen on (None when it can: 0..65535, 0 meaning ephemeral)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        return f"--port must be 0..65535 (0: an ephemeral port), not {port!r}"
    return None


def format_exchange(ex: Exchange) -> str:
    where = (f"{ex.scenario} turn {ex.turn + 1} attempt {(ex.attempt or 0) + 1}" if ex.turn is not None
             else (ex.scenario or "-"))
    faults = f" [{ex.faults}]" if ex.faults != "none" else ""
    if ex.rejected:
        return f"{ex.method} {ex.path} {where}{faults} -> {ex.status}: {ex.rejected}"
    kind = "stream" if ex.stream else "json"
    return (f"{ex.method} {ex.path} {where}{faults} -> {ex.status} {kind}, {ex.reads} reads, {ex.bytes} bytes, "
            f"{ex.end}")


def cmd(args: argparse.Namespace) -> int:
    """Run ``inspector serve`` (blocks until Ctrl-C). Exit codes: 0 ok, 2 usage error."""
    if args.list_faults:
        print(faults_doc())
        return 0
    problem = port_problem(args.port)
    if problem:
        sys.stderr.write(f"inspector serve: {problem}\n")
        return 2
    if getattr(args, "tui", False):
        return _cmd_tui(args)

    def printer(ex: Exchange) -> None:
        sys.stderr.write(format_exchange(ex) + "\n")
        sys.stderr.flush()

    try:
        faults = parse_faults(args.fault)
        app = ServeApp(args.scenario, faults, speed=args.speed, validate_history=not args.no_history_check,
                       on_exchange=None if args.quiet else printer)
    except (FaultError, KeyError) as e:
        sys.stderr.write(f"inspector serve: {e.args[0] if isinstance(e, KeyError) else e}\n")
        return 2
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as e:
        sys.stderr.write(f"inspector serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}\n")
        return 2
    url = base_url_of(sock)
    print(f"inspector serve: scenario {args.scenario}, faults {faults_key(faults)}, speed {speed_label(args.speed)}")
    print(f"ANTHROPIC_BASE_URL={url}")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}, not loopback only", file=sys.stderr)
    sys.stdout.flush()
    try:
        run_foreground(app, sock, log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def _cmd_tui(args: argparse.Namespace) -> int:
    """``serve --tui``: the dashboard watches what the server sends (through a recording proxy in front of it).
    The arguments are validated by building a ServeApp (scenario, faults), which binds and starts nothing: the
    dashboard's session starts the servers."""
    try:
        faults = parse_faults(args.fault)
        ServeApp(args.scenario, faults, speed=args.speed)
        bind_socket(args.host, args.port).close()  # the port is free now (the session binds it again)
    except (FaultError, KeyError) as e:
        sys.stderr.write(f"inspector serve: {e.args[0] if isinstance(e, KeyError) else e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"inspector serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}\n")
        return 2
    from inspector.tui.app import run_dashboard
    from inspector.watch import serve_session

    def factory(**_: Any):
        return serve_session(args.scenario, faults, speed=args.speed, host=args.host, port=args.port,
                             validate_history=not args.no_history_check)

    run_dashboard(factory, source={"type": "serve", "name": args.scenario})
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.serve ...`` (the same options as ``inspector serve``)."""
    p = argparse.ArgumentParser(prog="inspector serve", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    return cmd(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

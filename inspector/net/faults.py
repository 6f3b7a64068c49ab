"""The fault catalogue shared by `inspector serve` (and its in-process twin) and, for stream faults, `inspector proxy`.

Faults are transformations of a scenario (``apply_faults``: Pacing fields, Fault / HttpError objects) plus two of
the response plan (``bom``, ``drop_byte``), all rendered by :func:`render_faulted`. ``inspector serve --list-faults``
prints :func:`faults_doc`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from inspector.core.errors import FaultError
from inspector.scenarios.model import (
    DropAfter,
    ErrorEventAfter,
    Fault,
    HttpError,
    InterleaveBlocks,
    InvalidToolJson,
    MaxTokensCut,
    Scenario,
    StallWithPings,
    TurnScript,
)
from inspector.scenarios.render import Event, PlannedRead, ResponsePlan, render_turn
from inspector.scenarios.render_openai import KEEP_ALIVE, Api, render_openai_turn

BOM = b"\xef\xbb\xbf"
FAULT_HEADER = "x-inspector-fault"
# drop_in_tool: the tool block's fragments that pass, and the bytes of the next event sent before the break
DROP_IN_TOOL_FRAGMENTS = 2
DROP_IN_TOOL_CUT = 40
EVERYTHING = 1 << 40  # a proxy buffer no stream fills: everything is released at EOF
STALL_INLINE = 64  # stall pings rendered into the plan; the rest are generated lazily as time passes (StalledPlan)
STALL_INTERVAL = 0.5  # scenario seconds between stall pings
STALL_MAX = 1_000_000  # the most stall pings one request may ask for (about 5.8 days at 0.5 s)


# =====================================================================================================================
# Faults
# =====================================================================================================================


@dataclass(frozen=True, slots=True)
class FaultDef:
    name: str
    kind: str  # "http" | "transport" | "content" | "format"
    summary: str
    doc: str
    arg: str | None = None  # what the optional argument means
    default: float | int | None = None
    integer: bool = False
    maximum: float | int | None = None  # the largest argument accepted (a clear 400 / usage error past it)


# Catalogue order is the order faults are applied (so the result does not depend on how the user orders them,
# except for http_429/http_529, whose order decides which attempt gets which status).
FAULTS: dict[str, FaultDef] = {
    f.name: f
    for f in (
        FaultDef(
            "http_429",
            "http",
            "429 rate_limit_error with retry-after before the stream",
            "The first request of every turn (@turn, the default; @once: of one turn only) is answered HTTP 429 "
            "rate_limit_error with `retry-after: S` and "
            "`retry-after-ms` (scaled by --speed, like every scenario wait); the retry gets the scenario. "
            "The SDK retries it by itself (2 retries by default).",
            "S seconds",
            1.0,
            False,
            3600.0,
        ),
        FaultDef(
            "http_529",
            "http",
            "529 overloaded_error with retry-after before the stream",
            "Like http_429 with HTTP 529 overloaded_error. Given together with http_429, the statuses come in "
            "the order written (attempt 0, then 1), then the scenario.",
            "S seconds",
            1.0,
            False,
            3600.0,
        ),
        FaultDef(
            "error_event",
            "transport",
            "HTTP 200, N events, then an overloaded_error event",
            "HTTP 200, the first N protocol events (pings not counted), then `event: error` "
            '{"type":"overloaded_error"} and EOF. The SDK raises APIStatusError and never retries it; the '
            "harness must. The first streamed attempt of a turn (the retry is clean): once (@once, the default) "
            "or on each turn (@turn).",
            "N events",
            3,
            True,
            100_000,
        ),
        FaultDef(
            "drop_event",
            "transport",
            "the connection breaks after N events",
            "The connection is closed after N protocol events: the chunked body never gets its last chunk, "
            "so clients see an incomplete body (httpx: RemoteProtocolError 'incomplete chunked read'). The first "
            "streamed attempt of a turn: once (@once, the default) or on each turn (@turn).",
            "N events",
            4,
            True,
            100_000,
        ),
        FaultDef(
            "drop_in_tool",
            "transport",
            "the connection breaks inside the tool JSON of tool block K",
            "The K-th tool_use block of the turn (1 = the first) streams its first input_json_delta fragments "
            "(the empty first one included), then part of the next event's bytes, then the connection "
            "breaks: the tool's JSON is never complete and its block never stops. The first streamed attempt of "
            "a turn with at least K tool blocks (others are unchanged): once (@once, the default) or on each "
            "such turn (@turn).",
            "K tool block",
            1,
            True,
            64,
        ),
        FaultDef(
            "drop_byte",
            "transport",
            "the connection breaks after N body bytes",
            "The connection is closed after exactly N bytes of body (maybe inside an event, inside a UTF-8 "
            "character). The first streamed attempt of a turn: once (@once, the default) or on each turn (@turn).",
            "N bytes",
            200,
            True,
            100_000_000,
        ),
        FaultDef(
            "stall",
            "transport",
            "after message_start: only N pings, then silence (connection open)",
            "After message_start, only pings (one every 0.5 s, N of them), then nothing: the connection "
            "stays open until the client gives up. Pings count as reads, so a read timeout never fires: "
            "the harness needs an idle timeout on content events. The first streamed attempt of a turn: once "
            "(@once, the default) or on each turn (@turn).",
            "N pings",
            10,
            True,
            STALL_MAX,
        ),
        FaultDef(
            "invalid_tool_json",
            "content",
            "the last tool block's JSON is invalid at content_block_stop",
            "Fine-grained tool streaming does not validate: the last tool_use block of each turn streams its "
            "input JSON cut in the middle of its last string, then content_block_stop. The harness must not "
            "run that tool (and not with {}). Every attempt; turns without a tool block are unchanged.",
        ),
        FaultDef(
            "max_tokens_tool",
            "content",
            "max_tokens inside the first tool block",
            "The turn hits max_tokens inside its first tool_use block: about half of its input deltas, no "
            "content_block_stop, then message_delta stop_reason max_tokens and message_stop. Later blocks "
            "never come; the tool must not run. Every attempt; turns without a tool block are unchanged.",
        ),
        FaultDef(
            "interleave_blocks",
            "content",
            "consecutive tool blocks stream side by side, their deltas alternating",
            "Every run of two or more consecutive tool_use blocks opens at once, then their input_json_delta "
            "events alternate by index, each block stopping after its last delta. The protocol allows it and "
            "the SDK's accumulator keys by index; a harness that keeps one current buffer mixes the inputs. "
            "Every attempt; turns with fewer than two consecutive tool blocks are unchanged.",
        ),
        FaultDef(
            "slow_drip",
            "format",
            "one event per read, S seconds apart",
            "Content keeps coming, slowly: one event per read, S seconds between events, no jitter. An idle "
            "timeout shorter than S fires; a longer one must not. (A buffering relay that is part of the "
            "scenario, as in proxy_buffered, still merges the reads.)",
            "S seconds",
            0.25,
            False,
            60.0,
        ),
        FaultDef(
            "relay_buffer",
            "format",
            "a buffering relay: nothing, then everything in one burst at the end",
            "Headers arrive on time, then the body is held back and released in one read when the stream "
            "ends (nginx proxy_buffering on SSE; the fix is `X-Accel-Buffering: no`). Same bytes, no "
            "typing effect; `inspector dump --timing` flags it as buffered.",
        ),
        FaultDef(
            "split_events",
            "format",
            "every event cut across two reads at a seeded byte",
            "Every event is cut at a seeded byte offset (maybe inside a line, a JSON string or a UTF-8 "
            "character), so its bytes arrive in at least two reads and no read holds a whole event: a "
            "decoder that assumes one event per read breaks. Same bytes, same total time.",
        ),
        FaultDef(
            "cr",
            "format",
            "CR-only line endings",
            "Lines end with a lone CR (\\r): valid SSE that line-splitting on \\n alone does not decode.",
        ),
        FaultDef("crlf", "format", "CRLF line endings", "Lines end with CRLF (\\r\\n): valid SSE."),
        FaultDef(
            "bom",
            "format",
            "a UTF-8 BOM before the first event",
            "The body starts with EF BB BF. The SSE spec strips one BOM; the official Python SDK does not "
            "(its first event loses its `event:` field and is dropped: message_start goes missing).",
        ),
        FaultDef(
            "padded",
            "format",
            "data JSON padded with trailing spaces",
            "Every data line gets 1-8 trailing spaces after the JSON, as the real API sometimes sends.",
        ),
    )
}
_EXCLUSIVE = [("error_event", "drop_event", "drop_in_tool", "drop_byte", "stall"), ("cr", "crlf")]

# Scopes: how often a fault hits in a server's life (``NAME[:ARG]@SCOPE``)
SCOPES: dict[str, str] = {
    "once": "the first answer the fault changes, then never again for the life of the server (per scenario, faults "
    "and x-inspector-session; POST /inspector/reset re-arms it); that request's own retries are numbered as "
    "under @turn",
    "turn": "on every turn, as each fault says (transport faults: the first streamed attempt of each turn; HTTP "
    "faults: the first attempts of each turn; content and format faults: every attempt)",
}
# A transport fault is a transient failure: a real dropped connection or overloaded stream does not recur on the
# retry, nor on the next turn, nor when the harness starts its conversation again (new tool ids are a new turn: a
# fault per turn would hit a harness that recovers by restarting forever). HTTP errors are the server's state (rate
# limits, overload: the SDK's own retry clears them, and they come back under load), content faults are what the
# model writes and format faults how the server or a relay encodes: each turn.
DEFAULT_SCOPE: dict[str, str] = {"http": "turn", "transport": "once", "content": "turn", "format": "turn"}


def default_scope(name: str) -> str:
    """The scope a fault has when none is written: ``once`` for transport faults, ``turn`` for the others."""
    return DEFAULT_SCOPE[FAULTS[name].kind]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One chosen fault: a catalogue name, its argument (the default when not given) and its scope (``"once"`` /
    ``"turn"``; None: the fault's default, :func:`default_scope`; :func:`parse_faults` stores a written default
    scope as None, so that equal choices are equal)."""

    name: str
    arg: float | int | None = None
    scope: str | None = None

    def __post_init__(self) -> None:
        # an argument equal to the fault's default is stored as None, as a written default scope is: equal choices
        # are equal (`error_event:3` is `error_event`), and str() / label, which leave the default out, parse back
        d = FAULTS.get(self.name)
        if d is not None and self.arg is not None and self.arg == d.default:
            object.__setattr__(self, "arg", None)

    def __str__(self) -> str:
        d = FAULTS[self.name]
        text = self.name if self.arg is None or self.arg == d.default else f"{self.name}:{self.arg:g}"
        return text if self.scope is None or self.scope == default_scope(self.name) else f"{text}@{self.scope}"

    @property
    def value(self) -> float | int | None:
        return self.arg if self.arg is not None else FAULTS[self.name].default

    @property
    def effective_scope(self) -> str:
        return self.scope if self.scope is not None else default_scope(self.name)

    @property
    def once(self) -> bool:
        return self.effective_scope == "once"

    @property
    def label(self) -> str:
        """``NAME[:ARG]@SCOPE``, the scope always written (what the diagnostics show)."""
        text = str(self)
        return text if "@" in text else f"{text}@{self.effective_scope}"


def _did_you_mean(word: str, choices: Iterable[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.4)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def _parse_scope(name: str, text: str) -> str | None:
    scope = text.strip().lower()
    if scope not in SCOPES:
        shown = f"@{text.strip()}" if text.strip() else "@"
        hint = _did_you_mean(scope, SCOPES, "@") if scope else ""
        raise FaultError(
            f"fault {name}: unknown scope {shown!r}{hint}; scopes: @once, @turn (default for {name}: "
            f"@{default_scope(name)})"
        )
    return None if scope == default_scope(name) else scope


def parse_faults(spec: str | FaultSpec | Iterable[str | FaultSpec] | None) -> tuple[FaultSpec, ...]:
    """``"drop_event:5,bom"`` (or a list of such strings / FaultSpecs) -> FaultSpecs. Hyphens and underscores are
    interchangeable; ``NAME=ARG`` works too; ``NAME[:ARG]@once`` / ``@turn`` chooses the scope (:data:`SCOPES`;
    default :func:`default_scope`); ``none`` / empty means no fault. Raises FaultError (one line)."""
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
            raw, at, scope_text = raw.partition("@")
            name, sep, arg = raw.replace("=", ":", 1).partition(":")
            name = name.strip().lower().replace("-", "_")
            if name not in FAULTS:
                raise FaultError(f"unknown fault {name!r}{_did_you_mean(name, FAULTS)}; available: {', '.join(FAULTS)}")
            d = FAULTS[name]
            scope = _parse_scope(name, scope_text) if at else None
            value: float | int | None = None
            if sep:
                if d.arg is None:
                    raise FaultError(f"fault {name} takes no argument")
                try:
                    value = int(arg) if d.integer else float(arg)
                except ValueError:
                    raise FaultError(
                        f"fault {name}: {d.arg} must be a{'n integer' if d.integer else ' number'}, not {arg!r}"
                    ) from None
                if value < 0 or (not d.integer and not math.isfinite(value)):
                    raise FaultError(f"fault {name}: {d.arg} must be >= 0")
                if d.maximum is not None and value > d.maximum:
                    bound = f"{int(d.maximum)}" if d.integer else f"{d.maximum:g}"
                    raise FaultError(f"fault {name}: {d.arg} must be at most {bound}, not {arg.strip()}")
            out.append(FaultSpec(name, value, scope))
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
    """The faults as one string, each with its scope (``drop_event:5@once,bom@turn``; ``none``): what the
    diagnostics show, and what tells two choices apart."""
    return ",".join(f.label for f in faults) or "none"


def split_scopes(faults: Sequence[FaultSpec]) -> tuple[tuple[FaultSpec, ...], tuple[FaultSpec, ...]]:
    """(the ``@turn`` faults, the ``@once`` faults), each in the given order."""
    return tuple(f for f in faults if not f.once), tuple(f for f in faults if f.once)


def in_effect(faults: Sequence[FaultSpec], once: Iterable[Hashable]) -> tuple[FaultSpec, ...]:
    """The faults a request is answered with: every ``@turn`` fault and the ``@once`` ones in ``once`` (those this
    request's conversation turn holds), in the given order (which decides the HTTP faults' attempts)."""
    held = set(once)
    return tuple(f for f in faults if not f.once or f in held)


def changes(
    faults: Sequence[FaultSpec],
    held: Iterable[Hashable],
    fault: Hashable,
    render: Callable[[tuple[FaultSpec, ...]], object],
) -> bool:
    """Whether the ``@once`` ``fault`` changes this request's answer: its plan with the fault (and the ``@once``
    faults already ``held``) differs from the plan without it. ``render``: faults -> the plan."""
    held = list(held)
    with_it = in_effect(faults, [*held, fault])
    without = in_effect(faults, held)
    return bool(render(with_it) != render(without))


def faults_doc() -> str:
    """The text of ``inspector serve --list-faults``."""
    lines = ["Faults (--fault NAME[:ARG][,NAME...] or the request header x-inspector-fault):", ""]
    for d in FAULTS.values():
        head = d.name + (f"[:{d.arg.split()[0]}]" if d.arg else "")
        unit = d.arg.split(" ", 1)[1] if d.arg else ""
        unit_text = " s" if unit == "seconds" else " " + unit
        default = f" (default {d.default:g}{unit_text}, at most {d.maximum:g})" if d.arg and d.maximum else ""
        lines.append(f"  {head:<22}{d.summary}{default}")
        for chunk in _wrap(d.doc, 88):
            lines.append(" " * 24 + chunk)
    lines += [
        "",
        "Transport faults (error_event, drop_event, drop_in_tool, drop_byte, stall) replace the scenario's own,",
        "hit the first attempt of a turn that streams (after any http_429/http_529 answers) and leave retries",
        "clean.",
        "Content and format faults apply to every attempt. A fault that needs a tool block leaves turns",
        "without one unchanged. Same scenario + faults + requests = same bytes.",
        "",
        "Scopes: NAME[:ARG]@once or @turn (e.g. drop_in_tool:1@once, http_529@turn).",
        "  @once  the first answer the fault changes, then never again while the server runs (per scenario,",
        "         faults and x-inspector-session header; POST /inspector/reset re-arms it). The retries of that",
        "         request are numbered as under @turn, so http_429,http_529 still come in order.",
        "  @turn  on every turn, as described above.",
        "Default: @once for transport faults (a real dropped connection does not recur; a harness that recovers",
        "by restarting its conversation gets new tool ids, a new turn, which @turn would fault again, forever),",
        "@turn for HTTP, content and format faults (a rate limit or overload the SDK's retry clears, what a",
        "model writes and how a server encodes come back every turn).",
        "",
        "OpenAI clients (/v1/chat/completions, /v1/responses) get every fault in that family's own form: the",
        'OpenAI error JSON, data: {"error": ...} / event: error, finish_reason length / response.incomplete,',
        "SSE comments (: keep-alive) for stall pings (docs/serve-and-proxy.md).",
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


def _shift(fault: Fault, n: int) -> Fault:
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
                ours.append(
                    HttpError(
                        429 if f.name == "http_429" else 529,
                        attempt=i,
                        retry_after=secs,
                        retry_after_ms=int(round(secs * 1000)),
                    )
                )
            http_errors = ours + http_errors
        if transport is not None:
            faults_list = [f for f in faults_list if not isinstance(f, _TRANSPORT)]
            first = first_stream_attempt(dataclasses.replace(turn, http_errors=http_errors))
            v = int(transport.value or 0)
            if transport.name == "error_event":
                faults_list.append(ErrorEventAfter(n_events=int(v), attempts=(first,)))
            elif transport.name == "drop_event":
                faults_list.append(DropAfter(n_events=int(v), attempts=(first,)))
            elif transport.name == "drop_in_tool":
                tool_blocks = [i for i, _ in turn.tool_blocks()]
                if 1 <= v <= len(tool_blocks):
                    faults_list.append(
                        DropAfter(
                            inside_block=tool_blocks[v - 1],
                            after_fragments=DROP_IN_TOOL_FRAGMENTS,
                            cut_bytes=DROP_IN_TOOL_CUT,
                            attempts=(first,),
                        )
                    )
            elif transport.name == "stall":
                # at most STALL_INLINE pings are rendered; plan_faults adds the rest lazily (StalledPlan)
                faults_list.append(
                    StallWithPings(
                        after_events=1,
                        ping_interval=STALL_INTERVAL,
                        pings=min(int(v), STALL_INLINE),
                        then="hang",
                        attempts=(first,),
                    )
                )
            # drop_byte is applied to the plan (plan_faults)
        tools = [i for i, _ in turn.tool_blocks()]
        if "invalid_tool_json" in by_name and tools:
            b = tools[-1]
            faults_list = [f for f in faults_list if not (isinstance(f, InvalidToolJson) and f.block == b)]
            faults_list.append(InvalidToolJson(block=b, attempts=None))
        if "max_tokens_tool" in by_name and tools:
            b = tools[0]
            faults_list = [
                f
                for f in faults_list
                if not isinstance(f, MaxTokensCut)
                and not (isinstance(f, DropAfter) and f.inside_block is not None and f.inside_block >= b)
            ]
            faults_list.append(MaxTokensCut(block=b, attempts=None))
        if "interleave_blocks" in by_name and not any(isinstance(f, InterleaveBlocks) for f in faults_list):
            faults_list.append(InterleaveBlocks(attempts=None))
        if "slow_drip" in by_name:
            pacing = dataclasses.replace(
                pacing,
                event_gap=float(by_name["slow_drip"].value or 0.0),
                jitter=0.0,
                events_per_read=1,
                block_pause=0.0,
            )
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


@dataclass(slots=True)
class StalledPlan(ResponsePlan):
    """A plan whose stall goes on past its rendered reads: ``more_pings`` more reads of ``ping`` (the last rendered
    ping read), ``ping_gap`` scenario seconds apart, generated as time passes by :func:`iter_reads` (a precomputed
    list of a million pings would take gigabytes), then the plan's end ("hang")."""

    more_pings: int = 0
    ping: bytes = b""
    ping_gap: float = STALL_INTERVAL


def iter_reads(plan: ResponsePlan) -> Iterator[PlannedRead]:
    """Every read of a plan, the lazy stall pings of a :class:`StalledPlan` included (one object at a time)."""
    yield from plan.reads
    if isinstance(plan, StalledPlan):
        for _ in range(plan.more_pings):
            yield PlannedRead(plan.ping_gap, plan.ping)


def _stall_tail(plan: ResponsePlan, pings: int) -> ResponsePlan:
    """The pings of a ``stall:N`` past STALL_INLINE, as a lazy tail (when the plan really ends in its ping stall)."""
    more = pings - STALL_INLINE
    if more <= 0 or plan.end != "hang" or not plan.reads or not plan.events or plan.events[-1][0] != "ping":
        return plan
    last = plan.reads[-1].data
    one_ping = b"event: ping" in last and last.count(b"event:") == 1
    one_keep_alive = last.rstrip(b"\r\n") == KEEP_ALIVE  # the OpenAI form (an SSE comment)
    if not (one_ping or one_keep_alive):  # a relay or a split merged / cut the pings
        return plan
    fields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(ResponsePlan)}
    return StalledPlan(**fields, more_pings=more, ping=last, ping_gap=STALL_INTERVAL)


def plan_faults(faulted: Scenario, faults: Sequence[FaultSpec], plan: ResponsePlan) -> ResponsePlan:
    """The plan-level faults (bom, drop_byte, the lazy pings of a long stall) on a plan rendered from
    ``apply_faults(...)`` (``faulted``)."""
    names = {f.name: f for f in faults}
    if plan.status == 200 and "stall" in names:
        plan = _stall_tail(plan, int(names["stall"].value or 0))
    return apply_plan_faults(plan, faults, first_stream_attempt=first_stream_attempt(faulted.turns[plan.turn]))


def apply_plan_faults(plan: ResponsePlan, faults: Sequence[FaultSpec], *, first_stream_attempt: int) -> ResponsePlan:
    """bom and drop_byte on any plan (a scenario's or a recording's); drop_byte hits ``first_stream_attempt``."""
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
    if "drop_byte" in names and plan.attempt == first_stream_attempt:
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


def _events_of(body: bytes) -> list[Event]:
    from inspector.stream.sse import SSEDecoder

    dec = SSEDecoder()
    out: list[Event] = []
    for e in dec.feed(body):  # close() is not called: an unterminated event is not complete
        try:
            data = orjson.loads(e.data)
        except orjson.JSONDecodeError:
            data = {"raw": e.data}
        out.append((e.event, data))
    return out


def render_faulted(
    scenario: Scenario,
    faults: str | Sequence[FaultSpec | str] | None,
    turn: int,
    attempt: int = 0,
    *,
    faulted: Scenario | None = None,
    api: Api | None = None,
    include_usage: bool = False,
    echo: dict[str, Any] | None = None,
    choices: int = 1,
    seed: str = "",
) -> ResponsePlan:
    """``render_turn`` of the scenario with the faults built in, then the plan-level faults: exactly what
    ``inspector serve`` sends (and :class:`FaultedScenarioServer` in process). ``faulted``: a precomputed
    ``apply_faults(scenario, faults)``. ``api``: ``"chat"`` / ``"responses"`` renders the OpenAI form
    (``render_openai_turn``; ``include_usage``: chat's ``stream_options.include_usage``; ``choices``: chat's ``n``;
    ``echo``: the request
    fields a Response echoes); None: Anthropic (``seed``: the conversation's message id seed, ``message_seed``)."""
    chosen = parse_faults(faults)
    faulted = faulted if faulted is not None else apply_faults(scenario, chosen)
    if api is None:
        plan = render_turn(faulted, turn, attempt, seed)
    else:
        plan = render_openai_turn(
            faulted, turn, attempt, api=api, include_usage=include_usage, echo=echo, choices=choices
        )
    return plan_faults(faulted, chosen, plan)

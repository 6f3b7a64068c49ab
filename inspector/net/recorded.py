"""`inspector serve --recording FILE`: a recording (``run --record`` / ``proxy --record``), a HAR or a plain SSE file
served back over HTTP, with its recorded timing.

Turn k of the recording answers the request whose conversation has k assistant messages; the recorded attempts of
a turn answer its retries in order (attempt 0 gets the first recorded attempt, attempts past the last get the last
one). Each attempt becomes a :class:`ResponsePlan` (recorded status, headers, reads with their gaps, end), so the
plan-level faults apply on top (:func:`recording_faults`); faults that rewrite a scenario's events or pacing are
refused with a clear message. :func:`request_diff` says how a request differs from the recorded one.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Sequence
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.core.errors import FaultError, RecordingError
from inspector.net.conversations import chains
from inspector.net.faults import FAULTS, FaultSpec, _events_of, apply_plan_faults
from inspector.record.recording import RecordedAttempt, Recording
from inspector.record.replay import gap_warnings, pacing_gap, recording_family
from inspector.scenarios.fakeapi import MAX_DEPTH, nesting_depth
from inspector.scenarios.model import HttpError, Scenario, TextBlock, TurnScript
from inspector.scenarios.render import PlannedRead, ResponsePlan, render_turn
from inspector.scenarios.render_openai import Api, render_openai_turn
from inspector.stream.family import Family

# the endpoint that answers each family's recording, and how the errors name the family
FAMILY_PATHS: dict[str, str] = {
    "anthropic": "/v1/messages",
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
}
FAMILY_NAMES: dict[str, str] = {
    "anthropic": "Anthropic Messages API",
    "openai_chat": "OpenAI Chat Completions",
    "openai_responses": "OpenAI Responses",
}
API_FAMILY: dict[str, Family] = {"chat": "openai_chat", "responses": "openai_responses"}
# faults that work on a recorded plan (the others rewrite a scenario's events or pacing)
RECORDING_FAULTS = ("http_429", "http_529", "drop_byte", "bom", "relay_buffer")
# response headers that describe the recorded transfer, not the content (uvicorn frames the body itself)
_TRANSFER_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive", "date", "server"}
)
DIFF_LINES = 200  # the most lines of a request diff kept per exchange
DIFF_MESSAGES = 40  # the most messages a request diff compares line by line (from just before the first difference)
DIFF_TEXT = 200_000  # the most characters of each side a request diff compares line by line


def _stub(name: str, model: str, http: Sequence[HttpError] = ()) -> Scenario:
    return Scenario(
        name=name,
        description="stand-in for HTTP errors on top of a recording",
        prompt="",
        turns=[TurnScript([TextBlock("-")], http_errors=list(http))],
        model=model,
    )


class RecordingSource:
    """The turns of one recording, as response plans.

    A proxy recording of many conversations (its ``conversation`` obs lines): ``turns`` are the first
    conversation's, and :meth:`conversation_for` gives the source of the conversation a request belongs to (its
    system, tools and first message equal that conversation's first recorded request), so that each conversation's
    turn k answers that conversation's k-th request."""

    def __init__(self, recording: Recording, name: str = "recording", only: set[int] | None = None) -> None:
        self.recording = recording
        self.name = name
        turns = sorted(recording.turns, key=lambda t: t.turn)
        self.conversations: dict[bytes, RecordingSource] = {}  # head + first message digest -> its source
        self.by_first_message: dict[bytes, RecordingSource] = {}  # first message digest alone -> its source
        if only is None:
            groups = _conversation_turns(recording)
            if len(groups) > 1:
                for cid, members in groups.items():
                    try:
                        sub = RecordingSource(recording, f"{name} {cid}", only=members)
                    except RecordingError:
                        continue
                    keys = sub._first_key()
                    if keys is not None:
                        self.conversations.setdefault(keys[0], sub)
                        if keys[1] is not None:
                            self.by_first_message.setdefault(keys[1], sub)
                first = min(groups.values(), key=min)
                turns = [t for t in turns if t.turn in first]
        else:
            turns = [t for t in turns if t.turn in only]
        self.turns: list[list[RecordedAttempt]] = []
        for t in turns:
            attempts = [a for a in sorted(t.attempts, key=lambda a: a.attempt) if a.reads or a.response is not None]
            if attempts:
                self.turns.append(attempts)
        if not self.turns:
            raise RecordingError(f"{name}: the recording has no turns with a response to serve")
        if recording.is_plain and not _events_of(b"".join(r.data for a in self.turns[0] for r in a.reads)):
            raise RecordingError(f"{name}: neither a recording, a HAR nor SSE text (no complete SSE event in it)")
        self.warnings = list(recording.warnings) + gap_warnings(recording)  # (recorded gaps are bounded when paced)
        if all(self.recorded_request(k) is None for k in range(len(self.turns))):
            self.warnings.append("the file has no recorded request bodies: requests are not compared with it")
        self.model = next((m for m in (self.recorded_model(k) for k in range(len(self.turns))) if m), "recorded")
        self.family: Family = recording_family(recording, self.turns)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RecordingSource:
        """Read a recording, HAR or plain SSE file. Raises RecordingError (one line) for anything unreadable."""
        from inspector.record.har import load_any

        name = os.path.basename(os.fspath(path))
        try:
            rec = load_any(path)
        except RecordingError as e:
            raise RecordingError(f"{name}: {e}") from None
        except OSError as e:
            raise RecordingError(f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:  # a reader that gave up: still one line
            raise RecordingError(
                f"{name}: not a readable recording, HAR or SSE file ({type(e).__name__}: {e})"
            ) from None
        return cls(rec, name)

    def _first_key(self) -> tuple[bytes, bytes | None] | None:
        """The digests of the first recorded request's system, tools and first message, and of its first message
        alone (None when it has no message)."""
        body = self.recorded_request(0) if self.turns else None
        if body is None:
            return None
        prefix = chains(body)
        digests, alone = prefix.digests, prefix.alone
        return (digests[1] if len(digests) > 1 else digests[0]), (alone[1] if len(alone) > 1 else None)

    def conversation_for(self, body: object) -> RecordingSource:
        """The source that answers this request: its conversation's, in a recording of many conversations (matched
        by system, tools and first message; else by the first message alone: a harness that puts the time in its
        system prompt changes it every turn); else this one."""
        if self.conversations and isinstance(body, dict):
            prefix = chains(body)
            digests, alone = prefix.digests, prefix.alone
            found = self.conversations.get(digests[1] if len(digests) > 1 else digests[0])
            if found is None and len(alone) > 1:
                found = self.by_first_message.get(alone[1])
            if found is not None:
                return found
        return self

    def recorded_request(self, turn: int) -> dict[str, Any] | None:
        """The recorded request body of a turn (its first attempt with one), when it is a JSON object."""
        for a in self.turns[turn]:
            body = (a.request or {}).get("body")
            if isinstance(body, dict):
                return body
        return None

    def recorded_model(self, turn: int) -> str | None:
        body = self.recorded_request(turn)
        model = body.get("model") if body else None
        return model if isinstance(model, str) and model else None

    def plan(self, turn: int, attempt: int) -> ResponsePlan:
        """The recorded attempt that answers attempt ``attempt`` of turn ``turn`` (the last one past the end)."""
        attempts = self.turns[turn]
        rec = attempts[min(attempt, len(attempts) - 1)]
        response = rec.response or {}
        status = response.get("status")
        status = status if isinstance(status, int) and not isinstance(status, bool) and 100 <= status < 600 else 200
        headers = {
            str(k).lower(): str(v)
            for k, v in (response.get("headers") or {}).items()
            if str(k).lower() not in _TRANSFER_HEADERS
        }
        if status == 200:
            headers.setdefault("content-type", "text/event-stream; charset=utf-8")
        headers["x-recording"] = f"{self.name}; turn={turn}; attempt={rec.attempt}"
        t0 = response.get("t")
        header_delay = pacing_gap(t0)  # (bounded: a recorded t of 1e12 is not waited for)
        reads: list[PlannedRead] = []
        prev = header_delay
        for r in rec.reads:
            if r.t is None:
                delay = 0.0
            else:
                delay = pacing_gap(r.t - prev)
                prev = max(prev, r.t)
            reads.append(PlannedRead(delay, r.data))
        end_status = (rec.end or {}).get("status")
        end = {"failed": "drop", "cancelled": "hang"}.get(str(end_status), "eof")
        body = b"".join(r.data for r in reads)
        events = _events_of(body) if status == 200 else []
        return ResponsePlan(status, headers, reads, end, header_delay, events, turn, attempt)  # type: ignore[arg-type]


def wrong_endpoint(source: RecordingSource, api: str | None) -> str | None:
    """The 400 message for a request to an endpoint of another family than the recording's (None: the right one).
    ``api``: None for ``/v1/messages``, ``chat`` or ``responses``."""
    asked: Family = API_FAMILY[api] if api is not None else "anthropic"
    if asked == source.family:
        return None
    return (
        f"this server replays a recording of the {FAMILY_NAMES[source.family]} ({source.name}): POST "
        f"{FAMILY_PATHS[source.family]}, not {FAMILY_PATHS[asked]} ({FAMILY_NAMES[asked]})"
    )


def _conversation_turns(recording: Recording) -> dict[str, set[int]]:
    """conversation -> its global turns, from a proxy recording's ``conversation`` obs lines (empty: none)."""
    out: dict[str, set[int]] = {}
    for o in recording.observations:
        if (
            o.get("type") == "conversation"
            and isinstance(o.get("conversation"), str)
            and isinstance(o.get("turn"), int)
        ):
            out.setdefault(o["conversation"], set()).add(o["turn"])
    return out


def check_recording_faults(faults: Sequence[FaultSpec]) -> None:
    """Raise FaultError for a fault that cannot apply to a recording."""
    for f in faults:
        if f.name not in RECORDING_FAULTS:
            raise FaultError(
                f"fault {f.name} rewrites a scenario's {'events' if FAULTS[f.name].kind != 'format' else 'pacing'} "
                f"and cannot apply to a recording; with --recording: {', '.join(RECORDING_FAULTS)}"
            )


def recording_faults(
    source: RecordingSource, faults: Sequence[FaultSpec], turn: int, attempt: int, api: Api | None = None
) -> ResponsePlan:
    """What serve sends for attempt ``attempt`` of turn ``turn`` of a recording with ``faults`` on top: the HTTP
    faults answer the first attempts (the recorded attempts move back; ``api``: in that OpenAI family's error
    form), then the plan-level faults."""
    check_recording_faults(faults)
    http = [f for f in faults if FAULTS[f.name].kind == "http"]
    if attempt < len(http):
        f = http[attempt]
        secs = float(f.value or 0.0)
        err = HttpError(
            429 if f.name == "http_429" else 529,
            attempt=attempt,
            retry_after=secs,
            retry_after_ms=int(round(secs * 1000)),
        )
        stub = _stub(source.name, source.model, [err])
        plan = render_turn(stub, 0, attempt) if api is None else render_openai_turn(stub, 0, attempt, api=api)
        return dataclasses.replace(plan, turn=turn)
    plan = source.plan(turn, attempt - len(http))
    plan = dataclasses.replace(plan, attempt=attempt)
    if plan.status != 200:
        return plan
    if any(f.name == "relay_buffer" for f in faults) and plan.reads:
        total = sum(r.delay for r in plan.reads)
        plan = dataclasses.replace(plan, reads=[PlannedRead(total, plan.body)])
    return apply_plan_faults(plan, faults, first_stream_attempt=len(http))


def end_of_script_plan(
    name: str,
    turns: int,
    turn: int,
    attempt: int,
    model: str,
    faults: Sequence[FaultSpec] = (),
    api: Api | None = None,
    include_usage: bool = False,
    choices: int = 1,
) -> ResponsePlan:
    """The answer past the last turn of a script (scenario or recording): a short end_turn text turn (``api``:
    in the OpenAI form ``chat`` / ``responses``, as ``render_faulted`` takes it)."""
    from inspector.net.faults import render_faulted

    text = (
        f"[inspector serve] The script {name!r} has ended: it has {turns} turn(s) and this request asks for turn "
        f"{turn + 1}. This is a placeholder reply (inspector serve --strict answers 400 instead)."
    )
    sc = Scenario(
        name=f"{name}/end",
        description="the reply past the end of a script",
        prompt="",
        turns=[TurnScript([TextBlock(text)])],
        model=model,
    )
    chosen = [f for f in faults if f.name not in ("invalid_tool_json", "max_tokens_tool")]
    plan = render_faulted(sc, chosen, 0, attempt, api=api, include_usage=include_usage, choices=choices)
    return dataclasses.replace(plan, turn=turn)


def _canonical(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        return {}
    keys = ("model", "system", "instructions", "tools", "messages", "input", "previous_response_id")
    return {k: body.get(k) for k in keys if k in body}


def _window(messages: list[Any], first: int) -> tuple[list[Any], int]:
    """The messages the unified diff shows: from a little before the first difference, at most DIFF_MESSAGES."""
    start = max(0, first - 2)
    return messages[start : start + DIFF_MESSAGES], start


def request_diff(recorded: dict[str, Any] | None, got: dict[str, Any]) -> tuple[str | None, list[str]]:
    """How ``got`` differs from the recorded request: (one-line summary or None when equal, unified diff lines).

    Bounded: a request nesting deeper than :data:`MAX_DEPTH` is not compared (the summary says so); the unified diff
    covers at most :data:`DIFF_MESSAGES` messages from just before the first differing one (the lines say which) and
    at most :data:`DIFF_LINES` lines. Callers run it off the event loop, with a time budget (``ServeApp``)."""
    if recorded is None:
        return None, []
    for who, body in (("recorded", recorded), ("received", got)):
        if nesting_depth(body, MAX_DEPTH) > MAX_DEPTH:
            return f"the {who} request nests deeper than {MAX_DEPTH} levels: not compared", []
    a, b = _canonical(recorded), _canonical(got)
    if a == b:
        return None, []
    parts: list[str] = []
    if a.get("model") != b.get("model"):
        parts.append(f"model {a.get('model')!r} -> {b.get('model')!r}")
    for key in ("system", "instructions", "input", "previous_response_id"):  # (the Responses API's names too)
        if a.get(key) != b.get(key):
            parts.append(f"{key} differs")
    tools_a = [t.get("name") for t in a.get("tools") or [] if isinstance(t, dict)]
    tools_b = [t.get("name") for t in b.get("tools") or [] if isinstance(t, dict)]
    if a.get("tools") != b.get("tools"):
        parts.append(f"tools {tools_a} -> {tools_b}" if tools_a != tools_b else "tool definitions differ")
    ma, mb = a.get("messages") or [], b.get("messages") or []
    note: str | None = None
    if ma != mb:
        if not isinstance(ma, list) or not isinstance(mb, list):
            parts.append("messages differ")
        else:
            first = next((i for i, (x, y) in enumerate(zip(ma, mb, strict=False)) if x != y), min(len(ma), len(mb)))
            parts.append(f"messages differ from messages.{first} ({len(ma)} recorded, {len(mb)} received)")
            wa, start = _window(ma, first)
            wb, _ = _window(mb, first)
            if start or len(wa) < len(ma) or len(wb) < len(mb):
                a["messages"], b["messages"] = wa, wb
                note = (
                    f"(the diff shows messages.{start} to messages.{start + max(len(wa), len(wb)) - 1} only, "
                    f"as messages[0..]: {len(ma)} recorded, {len(mb)} received)"
                )
    opt = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    lines = list(
        difflib.unified_diff(
            _text(a, opt).splitlines(),
            _text(b, opt).splitlines(),
            "recorded",
            "received",
            lineterm="",
            n=2,
        )
    )
    if note is not None and lines:
        lines.insert(0, note)
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"... ({len(lines) - DIFF_LINES} more lines)"]
    return "; ".join(parts) or "request differs", lines


def _text(value: dict[str, Any], opt: int) -> str:
    """The indented JSON a diff compares (at most DIFF_TEXT characters: a huge message is cut, and says so)."""
    try:
        text = exactjson.dumps(value, option=opt).decode()
    except (TypeError, orjson.JSONEncodeError) as e:  # an integer orjson cannot write, say: still a diff, of the repr
        text = f"(not JSON-writable: {e}) {value!r}"
    if len(text) > DIFF_TEXT:
        text = text[:DIFF_TEXT] + f"\n... ({len(text) - DIFF_TEXT} more characters not compared)"
    return text

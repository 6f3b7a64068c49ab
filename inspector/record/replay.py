"""Replay a recording through the same pipeline: a fake transport serves the recorded reads with their timing
(scaled by the pacer), and tools are not executed: their results (and durations) come from the recording.

HTTP tries the SDK retried by itself (recorded as attempts of their own: a non-2xx response, or ``end`` status
``connection_error``) are served again, status, headers and body, so the SDK retries them as it did: the server says
``x-should-retry: true`` when the recording has a later try for the same turn, ``false`` otherwise, and scales
``retry-after(-ms)`` by the pacer. An attempt that ended ``cancelled`` is served up to where it was cancelled, then
the server calls ``on_cancel`` (the session cancels its loop there) and the connection stays silent."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx2
import orjson

from inspector.agent.providers import OpenAIProvider
from inspector.agent.toolbox.spec import ToolRefused, ToolSpec, ToolTimedOut
from inspector.agent.tries import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY, ClientGaveUp
from inspector.core import exactjson
from inspector.core.fmt import short
from inspector.core.pacing import Pacer
from inspector.observe.states import TOOL_RAN
from inspector.record.recording import RecordedAttempt, Recording
from inspector.stream.family import Family, family_from_event, family_from_path
from inspector.stream.sse import SSEDecoder

# A recorded gap (between reads, before a response, before a connection failure, a tool's duration) above this is
# paced as this, and said so (REPLAY_GAP_CLAMPED): a recording with `t: 1e12` would make a replay wait forever.
MAX_RECORDED_GAP = 600.0
REPLAY_GAP_CLAMPED = "replay.gap_clamped"


def pacing_gap(gap: Any) -> float:
    """A recorded gap as the replay paces it: a number of seconds in [0, MAX_RECORDED_GAP] (NaN, negative, not a
    number: 0)."""
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not gap > 0:
        return 0.0
    return min(float(gap), MAX_RECORDED_GAP)


def gap_warnings(
    recording: Recording, *, tool_durations: dict[str, float] | None = None, reads: bool = True
) -> list[str]:
    """One named warning per recorded gap the replay clamps (see MAX_RECORDED_GAP), at most 20 and a count.
    ``reads=False``: the tools' durations only (the reads' gaps are not read: a pass over every read, from the
    spill file for a long recording)."""
    out: list[str] = []

    def note(where: str, gap: float) -> None:
        out.append(
            f"{REPLAY_GAP_CLAMPED}: {where} was recorded {gap:g} s after the one before: paced as "
            f"{MAX_RECORDED_GAP:g} s (recorded gaps are bounded to {MAX_RECORDED_GAP:g} s)"
        )

    for att in recording.attempts() if reads else ():
        where = f"turn {att.turn + 1} attempt {att.attempt + 1}"
        last = 0.0
        for i, r in enumerate(att.reads):
            t = r.t
            if isinstance(t, (int, float)) and not isinstance(t, bool):
                if t - last > MAX_RECORDED_GAP:
                    note(f"{where}, read {i + 1}", t - last)
                last = t if t == t else last  # (NaN: ignored)
        resp_t = (att.response or {}).get("t")
        if isinstance(resp_t, (int, float)) and not isinstance(resp_t, bool) and resp_t > MAX_RECORDED_GAP:
            note(f"{where}, its response", float(resp_t))
        end_t = (att.end or {}).get("t")
        if (
            att.response is None
            and isinstance(end_t, (int, float))
            and not isinstance(end_t, bool)
            and end_t > MAX_RECORDED_GAP
        ):
            note(f"{where}, its connection failure", float(end_t))
    for tid, d in (tool_durations or {}).items():
        if d > MAX_RECORDED_GAP:
            note(f"tool call {tid}'s result", d)
    if len(out) > 20:
        out[20:] = [f"{REPLAY_GAP_CLAMPED}: and {len(out) - 20} more gaps"]
    return out


def neutral_history(messages: Any) -> list[Any]:
    """A recorded history in the Messages API's shape, whatever API it was sent to: OpenAI Chat Completions
    (assistant ``tool_calls``, ``tool`` messages) and Responses items (``function_call``, ``function_call_output``)
    become ``tool_use`` / ``tool_result`` blocks (arguments parsed; arguments that do not parse: ``None``), so a
    replay finds each call's recorded result by name and input. Messages API history is returned as it is."""
    if not isinstance(messages, list):
        return []
    out: list[Any] = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and isinstance(calls, list):
            blocks = []
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if isinstance(fn, dict):
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": c.get("id"),
                            "name": fn.get("name"),
                            "input": _args(fn.get("arguments")),
                        }
                    )
            out.append({"role": "assistant", "content": blocks})
        elif m.get("role") == "tool":
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": m.get("content")}
                    ],
                }
            )
        elif m.get("type") == "function_call":
            block = {
                "type": "tool_use",
                "id": m.get("call_id"),
                "name": m.get("name"),
                "input": _args(m.get("arguments")),
            }
            out.append({"role": "assistant", "content": [block]})
        elif m.get("type") == "function_call_output":
            out.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": m.get("call_id"), "content": m.get("output")}],
                }
            )
        else:
            out.append(m)
    return out


def _args(raw: Any) -> Any:
    if not isinstance(raw, str):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def history_of(body: dict[str, Any]) -> Any:
    """The history a recorded request body sent: ``messages`` (Messages, Chat Completions) or ``input``
    (Responses)."""
    return body.get("messages") if "messages" in body else body.get("input")


def tool_name(definition: Any) -> str | None:
    """A tool definition's name, in the Messages API's or OpenAI's shape (``function.name`` for Chat)."""
    if not isinstance(definition, dict):
        return None
    fn = definition.get("function")
    if isinstance(fn, dict) and "name" in fn:
        return str(fn.get("name"))
    return str(definition.get("name"))


def recorded_provider(recording: Recording) -> OpenAIProvider | None:
    """The OpenAI provider a recording was made with (``recording_family``, as serve tells it), or None for the
    Messages API."""
    family = recording_family(recording)
    if family == "openai_chat":
        return OpenAIProvider("chat")
    if family == "openai_responses":
        return OpenAIProvider("responses")
    return None


SNIFF_BYTES = 1 << 20  # the most response bytes read to tell a recording's family from its events


def recording_family(recording: Recording, turns: Sequence[Sequence[RecordedAttempt]] | None = None) -> Family:
    """The API a recording was made with: its first request's path (``/v1/messages``, ``/v1/chat/completions``,
    ``/v1/responses``), else the header's source (``inspector run --provider openai``), else the first recorded
    event that tells (a plain SSE file), else the Messages API. ``turns``: the attempts to sniff, per turn (None:
    the recording's own)."""
    for attempt in recording.attempts():
        url = (attempt.request or {}).get("url")
        family = family_from_path(url if isinstance(url, str) else None)
        if family is not None:
            return family
    src = recording.header.get("source") if isinstance(recording.header, dict) else None
    if isinstance(src, dict) and src.get("provider") == "openai":
        return "openai_responses" if src.get("api") == "responses" else "openai_chat"
    budget = SNIFF_BYTES  # a telling event comes first: no need to decode whole streams (a garbage file is big)
    for attempts in turns if turns is not None else [t.attempts for t in recording.turns]:
        for attempt in attempts:
            dec = SSEDecoder()
            for read in attempt.reads:
                data = read.data[:budget]
                budget -= len(data)
                for e in dec.feed(data):
                    family = family_from_event(e.event, e.data)
                    if family is not None:
                        return family
                if budget <= 0:
                    return "anthropic"
    return "anthropic"


class ReplayRefused(ToolRefused):
    """Raised by a replayed tool to reproduce a recorded is_error result exactly."""


class ReplayTimedOut(ToolTimedOut):
    """Raised by a replayed tool whose recorded run timed out: its recorded result, and the state ``timed_out``."""


class _Body(httpx2.AsyncByteStream):
    def __init__(self, attempt: RecordedAttempt, pacer: Pacer, ending: str, on_cancel: OnCancel | None = None) -> None:
        self.attempt = attempt
        self.pacer = pacer
        self.ending = ending
        self.on_cancel = on_cancel

    async def __aiter__(self) -> AsyncIterator[bytes]:
        last = 0.0
        for r in self.attempt.reads:
            if r.t is not None:
                await self.pacer.sleep(pacing_gap(r.t - last))  # (bounded: see MAX_RECORDED_GAP)
                last = r.t
            yield r.data
        if self.ending == "drop":
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body (replayed)")
        if self.ending == "resent":  # the client closed it here (then sent it again): at the recorded time
            end_t = (self.attempt.end or {}).get("t")
            silence = max(0.0, end_t - last) if isinstance(end_t, (int, float)) else 0.0
            await self.pacer.sleep(pacing_gap(silence))
            raise ClientGaveUp(silence)
        if self.ending == "cancel" and self.on_cancel is not None:
            self.on_cancel(cancel_reason(self.attempt))  # the recorded run was cancelled here: so is the replay
        if self.ending in ("hang", "cancel"):
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        return None


# the session's cancel, given the recorded attempt's reason for its cancel (None: none recorded, the user's)
OnCancel = Callable[[str | None], None]


def cancel_reason(attempt: RecordedAttempt) -> str | None:
    """Why a recorded attempt was cancelled, as its end line says (e.g. "the client closed the connection before
    upstream's headers": an agent's own cancel, seen by a proxy), or None."""
    reason = (attempt.end or {}).get("reason")
    return reason if isinstance(reason, str) and reason else None


def _ending(attempt: RecordedAttempt) -> str:
    end = attempt.end or {}
    reason = str(end.get("reason") or "")
    if end.get("status") == "failed" and reason.startswith(("connection dropped", "stream ended")):
        return "drop"
    if end.get("status") == "failed" and reason.startswith("idle timeout"):
        return "hang"
    if end.get("status") == "cancelled":
        return "cancel"
    return "eof"


def was_cancelled(recording: Recording) -> bool:
    """The recorded run ended cancelled (by the user)."""
    return any(o.get("type") == "loop_finished" and o.get("status") == "cancelled" for o in recording.observations)


def failed_try(attempt: RecordedAttempt) -> bool:
    """A try that failed before a stream: an error status, or a connection failure (the SDK may have retried it)."""
    status = (attempt.response or {}).get("status")
    if isinstance(status, int) and not 200 <= status < 300:
        return True
    return attempt.response is None and (attempt.end or {}).get("status") == "connection_error"


def sdk_max_retries(recording: Recording) -> int:
    """How many times the replay's SDK may retry a try: at least as often as the recording shows it did; exactly
    as often when a connection failure was the last try (the SDK retries those while it may)."""
    longest, last_connection_failure = 0, None
    for turn in recording.turns:
        run = 0
        for i, att in enumerate(turn.attempts):
            if failed_try(att):
                run += 1
                later = i + 1 < len(turn.attempts)
                if not later and att.response is None:
                    last_connection_failure = run - 1
            else:
                run = 0
            longest = max(longest, run)
    if last_connection_failure is not None:
        return last_connection_failure
    return max(2, longest)


def _scaled_retry_headers(headers: dict[str, Any], speed: float) -> None:
    if speed == 1.0:
        return
    for name, unit in (("retry-after-ms", 1.0), ("retry-after", 0.001)):
        if name in headers:
            try:
                value = float(headers[name])
            except (TypeError, ValueError):
                headers.pop(name)
                continue
            headers[name] = f"{unit:g}" if math.isinf(speed) else f"{max(unit, value / speed):g}"


def _paced_sdk_backoff(headers: dict[str, Any], request: httpx2.Request, speed: float) -> None:
    """A retried try recorded without ``retry-after(-ms)``: the SDK would wait its own backoff in real time (0.5 s
    doubling to 8 s: 20 recorded 529s took 109 s at max speed). Away from 1x, the replay says that backoff scaled by
    the pacer as ``retry-after-ms`` (1 ms at max: the SDK ignores 0), so the SDK's waits follow the speed as the
    reads do, and its HttpTryFailed says the wait it really makes."""
    if speed == 1.0 or {k.lower() for k in headers} & {"retry-after-ms", "retry-after"}:
        return
    try:
        k = max(0, min(int(request.headers.get("x-stainless-retry-count", "0")), 1000))
    except ValueError:
        k = 0
    backoff_ms = min(INITIAL_RETRY_DELAY * 2.0**k, MAX_RETRY_DELAY) * 1000
    headers["retry-after-ms"] = "1" if math.isinf(speed) else f"{max(1.0, backoff_ms / speed):g}"


class ReplayServer:
    """Serves the recorded attempts in recorded order, one per request (the loop makes the same requests)."""

    KEEP_REQUESTS = 1  # request bodies kept (each holds the whole history: keeping more grows with turns squared)
    KEEP_BODY_BYTES = 1 << 20  # a larger body is received (read through) but not kept: a long history's is MBs

    def __init__(self, recording: Recording, pacer: Pacer | None = None, *, on_cancel: OnCancel | None = None) -> None:
        self.recording = recording
        self.pacer = pacer or Pacer(1.0)
        self.attempts = list(recording.attempts())
        self.served = 0
        self.received = 0  # requests received (self.requests gives only the last KEEP_REQUESTS bodies)
        # as sent, parsed only when asked for; a body over KEEP_BODY_BYTES is kept as its size
        self._bodies: deque[bytes | int] = deque(maxlen=self.KEEP_REQUESTS)
        self.on_cancel = on_cancel
        self.cancelled_run = was_cancelled(recording)
        for w in gap_warnings(recording):  # the recorded gaps paced shorter than recorded, named
            if w not in recording.warnings:
                recording.warnings.append(w)
        # a failed try is retried by the SDK when the recording has a later try of the same turn
        self._retried: set[int] = set()
        # an attempt the client closed and then resent (a proxy recording: the next attempt of the same turn): not
        # the user's cancel, the client gave up; served up to there, then ended at the recorded time (ClientGaveUp),
        # so the loop retries as the client did
        self._resent: set[int] = set()
        for i, att in enumerate(self.attempts):
            nxt = self.attempts[i + 1] if i + 1 < len(self.attempts) else None
            if failed_try(att) and nxt is not None and nxt.turn == att.turn:
                self._retried.add(i)
            if (att.end or {}).get("status") == "cancelled" and nxt is not None and nxt.turn == att.turn:
                self._resent.add(i)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The last KEEP_REQUESTS request bodies, parsed: a body that is not a JSON object is ``{"not_json": N}``
        and one larger than KEEP_BODY_BYTES ``{"not_kept": N}`` (N: its size in bytes), never a silent ``{}``."""
        out: list[dict[str, Any]] = []
        for raw in self._bodies:
            if isinstance(raw, int):
                out.append({"not_kept": raw})
                continue
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = None
            out.append(body if isinstance(body, dict) else {"not_json": len(raw)})
        return out

    async def _receive(self, request: httpx2.Request) -> None:
        """Read the request's body through, as a server does; keep it when it is small (see KEEP_BODY_BYTES). A
        body sent as a stream (the loop's spliced history) is never joined whole in memory."""
        kept: list[bytes] | None = []
        size = 0
        async for chunk in request.stream:  # type: ignore[union-attr]
            size += len(chunk)
            if kept is not None and size <= self.KEEP_BODY_BYTES:
                kept.append(chunk)
            else:
                kept = None
        self._bodies.append(b"".join(kept) if kept is not None else size)

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.received += 1
        await self._receive(request)
        if self.served >= len(self.attempts) and self.cancelled_run and self.on_cancel is not None:
            self.on_cancel(None)  # the recorded run was cancelled before this request (e.g. while its tools ran)
            await asyncio.Event().wait()
        if self.served >= len(self.attempts):
            body = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "the recording has no more turns"},
            }
            return httpx2.Response(400, json=body, headers={"x-should-retry": "false"})
        index = self.served
        attempt = self.attempts[index]
        self.served += 1
        end = attempt.end or {}
        if attempt.response is None and end.get("status") == "connection_error":
            await self.pacer.sleep(pacing_gap(end.get("t")))
            raise httpx2.ConnectError(str(end.get("reason") or "connection failed (replayed)"), request=request)
        if attempt.response is None and end.get("status") == "cancelled":
            if self.on_cancel is not None and index not in self._resent:
                self.on_cancel(cancel_reason(attempt))  # cancelled before the response came: so is the replay
            await asyncio.Event().wait()
        resp = attempt.response or {}
        status = int(resp.get("status") or 200)
        headers = dict(resp.get("headers") or {"content-type": "text/event-stream"})
        headers.pop("content-length", None)
        headers.pop("content-encoding", None)
        headers.pop("transfer-encoding", None)
        if not 200 <= status < 300:
            headers["x-should-retry"] = "true" if index in self._retried else "false"
            _scaled_retry_headers(headers, self.pacer.speed)
            if index in self._retried:
                _paced_sdk_backoff(headers, request, self.pacer.speed)
            return httpx2.Response(status, headers=headers, content=attempt.data)
        headers.setdefault("content-type", "text/event-stream")
        ending = "resent" if index in self._resent else _ending(attempt)
        return httpx2.Response(status, headers=headers, stream=_Body(attempt, self.pacer, ending, self.on_cancel))


class ReplayTransport(httpx2.AsyncBaseTransport):
    """The SDK's transport for a replay: hands each request to ``ReplayServer.handler`` as it comes (unlike
    ``MockTransport``, which reads a streamed body whole first)."""

    def __init__(self, server: ReplayServer) -> None:
        self.server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.server.handler(request)


def recorded_tools(
    recording: Recording, pacer: Pacer, *, on_cancel: Callable[[], OnCancel | None] | None = None
) -> tuple[dict[str, ToolSpec], list[dict[str, Any]] | None]:
    """ToolSpecs that give back the recorded results (matched by name and input, in order; the last one is reused
    by repeated calls), taking the recorded duration (scaled by the pacer). Also returns the tool definitions as
    the recording sent them. When the recorded run was cancelled while its tools ran, a call without a recorded result
    is where it was cancelled: it calls the callback `on_cancel()` gives back (the session's cancel) and waits."""
    # cancelled while its tools ran: the run was cancelled and its last attempt had streamed to the end
    last = next(reversed(list(recording.attempts())), None)
    cancelled_run = was_cancelled(recording) and last is not None and (last.end or {}).get("status") == "complete"
    # (name, input) -> its recorded results in order: (content, is_error, duration, timed out)
    results: dict[tuple[str, bytes], deque[tuple[Any, bool, float, bool]]] = defaultdict(deque)
    durations: dict[str, float] = {}
    uses: dict[str, tuple[str, Any]] = {}
    definitions: list[dict[str, Any]] | None = None
    # the last request holds the conversation's whole history, but one continued by previous_response_id holds
    # only what is new (its function_call_output items): those are kept as they come
    last_body: dict[str, Any] = {}
    continued: list[Any] = []
    for att in recording.attempts():
        body = (att.request or {}).get("body")
        if not isinstance(body, dict):  # (not kept, or not JSON: the last request with a body holds the history)
            continue
        last_body = body
        if definitions is None and isinstance(body.get("tools"), list):
            definitions = body["tools"]
        history = neutral_history(history_of(body))
        if body.get("previous_response_id") is not None:
            continued.extend(history)
        for msg in history:
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
                continue
            for b in msg["content"]:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    uses[b["id"]] = (str(b.get("name")), b.get("input"))
    seen: set[str] = set()
    # whether each recorded result was an error, as the executor said (an OpenAI tool message has no is_error)
    recorded_errors = {
        o["tool_use_id"]: bool(o.get("is_error"))
        for o in recording.observations
        if o.get("type") == "tool_result" and isinstance(o.get("tool_use_id"), str)
    }
    # the calls whose recorded run timed out (their tool_result, else their last tool_state, says so): replayed as
    # timed out, not failed
    ended: dict[str, Any] = {}
    for o in recording.observations:
        if o.get("type") == "tool_state" and isinstance(o.get("id"), str) and o.get("state") in TOOL_RAN:
            ended[o["id"]] = o.get("state")
    for o in recording.observations:
        if o.get("type") == "tool_result" and isinstance(o.get("tool_use_id"), str) and o.get("state") is not None:
            ended[o["tool_use_id"]] = o.get("state")
    timed_out = {tid for tid, state in ended.items() if state == "timed_out"}
    unsafe: set[str] = set()  # tools recorded as not concurrency-safe keep their barrier in the replay
    unknown: dict[str, str] = {}  # tool id -> why its outcome is unknown (recorded: the session ended first)
    final_msgs: list[Any] = []
    for obs in recording.observations:
        if obs.get("type") == "loop_finished" and isinstance(obs.get("messages"), list):
            final_msgs = neutral_history(obs["messages"])
        # a Responses conversation continued by previous_response_id sends no function_call items back: its calls
        # are known from what the stream gave (the tool_state lines, with their input once parsed)
        if obs.get("type") == "tool_state" and isinstance(obs.get("id"), str) and obs.get("input") is not None:
            uses.setdefault(obs["id"], (str(obs.get("name")), obs.get("input")))
        if obs.get("type") == "tool_state" and obs.get("state") == "unknown" and isinstance(obs.get("error"), str):
            unknown[str(obs.get("id"))] = obs["error"]  # (the proxy's: no request carried its result; why)
        if obs.get("type") == "tool_state" and obs.get("safe") is False and obs.get("state") == "queued":
            unsafe.add(str(obs.get("name")))
        # a run time is replayed only when it was measured (the proxy's inferred times are bounds, not runs)
        if (
            obs.get("type") == "tool_state"
            and obs.get("state") in TOOL_RAN
            and isinstance(obs.get("id"), str)
            and not obs.get("inferred")
        ):
            times = obs.get("times") or {}
            if isinstance(times, dict) and "running" in times and obs.get("state") in times:
                try:
                    durations[obs["id"]] = max(0.0, float(times[obs["state"]]) - float(times["running"]))
                except (TypeError, ValueError):
                    pass  # (not numbers: the call replays without its duration)
    for w in gap_warnings(recording, tool_durations=durations, reads=False):
        if w not in recording.warnings and "tool call" in w:
            recording.warnings.append(w)
    # results, in the order the conversation has them
    msgs = final_msgs or [*continued, *neutral_history(history_of(last_body))]
    bad_ids: list[str] = []  # tool_results whose tool_use_id is not a string (a named warning each)
    for msg in msgs:
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
            continue
        for b in msg["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                uses[b["id"]] = (str(b.get("name")), b.get("input"))
            if isinstance(b, dict) and b.get("type") == "tool_result" and not isinstance(b.get("tool_use_id"), str):
                bad = b.get("tool_use_id")
                warning = (
                    f"a recorded tool_result's tool_use_id is {type(bad).__name__} {short(bad, 60)}, not a string: "
                    "its result is not replayed"
                )
                if warning not in bad_ids:
                    bad_ids.append(warning)
                    recording.warnings.append(warning)
                continue
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in uses:
                tid = b["tool_use_id"]
                if tid in seen:
                    continue
                seen.add(tid)
                name, inp = uses[tid]
                key = (name, exactjson.dumps(inp, option=orjson.OPT_SORT_KEYS))
                is_error = bool(b.get("is_error")) or recorded_errors.get(tid, False)
                results[key].append((b.get("content"), is_error, durations.get(tid, 0.0), tid in timed_out))

    names = {n for n, _ in uses.values()} | {n for d in definitions or [] if (n := tool_name(d)) is not None}
    # a call whose outcome the recording does not know says why, in its "no recorded result"
    unknown_why = {
        (name, exactjson.dumps(inp, option=orjson.OPT_SORT_KEYS)): unknown[tid]
        for tid, (name, inp) in uses.items()
        if tid in unknown
    }

    def make(name: str) -> ToolSpec:
        async def fn(tool_input: dict[str, Any]) -> Any:
            key = (name, exactjson.dumps(tool_input, option=orjson.OPT_SORT_KEYS))
            q = results.get(key)
            cancel = on_cancel() if on_cancel is not None and cancelled_run and not q else None
            if cancel is not None:
                cancel(None)
                await asyncio.Event().wait()
            if not q:
                why = f" ({bad_ids[0]})" if bad_ids else f": {unknown_why[key]}" if key in unknown_why else ""
                raise ReplayRefused(f"no recorded result for {name}({exactjson.dumps(tool_input).decode()[:80]}){why}")
            # a retried attempt runs the same calls again: the last recorded result for a call is reused
            content, is_error, duration, timed = q.popleft() if len(q) > 1 else q[0]
            if duration:
                await pacer.sleep(pacing_gap(duration))
            if is_error or timed:
                text = content if isinstance(content, str) else exactjson.dumps(content).decode()
                raise ReplayTimedOut(text) if timed else ReplayRefused(text)
            return content

        return ToolSpec(name, "replayed from a recording", {"type": "object"}, fn, concurrency_safe=name not in unsafe)

    return {n: make(n) for n in sorted(names)}, definitions


def split_conversations(recording: Recording) -> list[tuple[str, Recording]]:
    """A proxy recording of many conversations (its ``conversation`` obs lines), one recording per conversation, in
    order of appearance: its turns (with their attempts) and the observations of those turns (and those of no
    turn). Empty when the recording has at most one conversation (it replays as it is)."""
    where: dict[int, str] = {}
    order: list[str] = []
    for o in recording.observations:
        cid, turn = o.get("conversation"), o.get("turn")
        if o.get("type") == "conversation" and isinstance(cid, str) and isinstance(turn, int) and turn not in where:
            where[turn] = cid
            if cid not in order:
                order.append(cid)
    if len(order) < 2:
        return []
    out = []
    for cid in order:
        turns = [t for t in recording.turns if where.get(t.turn) == cid]
        if not turns:
            continue
        mine = {t.turn for t in turns}
        observations = [
            o for o in recording.observations if not isinstance(o.get("turn"), int) or o.get("turn") in mine
        ]
        out.append((cid, Recording(recording.header, turns, observations, list(recording.warnings))))
    return out

"""Turn tracking of the proxy: which request is which turn and attempt (the retry rule), and every observation of
an attempt, published to one sink (the proxy's redacting publisher; the recorder, the dashboard and the headless
printer subscribe to the bus behind it). Nothing here forwards bytes or writes files.

- Turns: every ``POST .../messages`` is a turn of the other harness; a request whose body repeats that of an
  attempt that failed or was cut (and was not retried yet) is that attempt's retry, i.e. the next attempt of the same
  turn (:meth:`TurnTracker.turn_of`). Other requests are published once ended, as ``ExchangeForwarded``.
- Reads: forwarded at once by the proxy, queued here (:meth:`TurnTracker.read`) and decoded / parsed / published in
  batches (every ``batch_interval``), off the forwarding path. A read is published with the time it arrived.
- Clocks, as the loop's (so that the recorder writes both the same way): ``AttemptStarted.t`` is when the request
  arrived (seconds since the proxy started), ``ResponseStarted.t`` when upstream's headers came, ``ReadReceived.t``
  when the read arrived (``t_request``: the same, since the request), ``AttemptEnded.t`` when the exchange ended.
- Tool calls: their execution in the other harness is inferred from the next request
  (:mod:`inspector.net.toolinfer`); the tool rows it gives are published with ``inferred=True``.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from inspector.core.redaction import clean_headers
from inspector.net.toolinfer import InferredExecution, SeenToolUse, infer_tool_executions
from inspector.observe import observations as O
from inspector.observe.states import ToolState
from inspector.observe.stepobs import step_observations, tool_transitions
from inspector.stream.assembler import TurnStream

__all__ = ["RETRY_MEMORY", "ProxyExchange", "Track", "TurnTracker"]

RETRY_MEMORY = 4096  # failed attempts remembered for the retry rule (oldest forgotten first)

# an SSE event line naming message_stop, at the start of a line (a JSON string cannot hold a raw line break)
_STOP_LINE = re.compile(rb"(?:^|[\r\n])event: ?message_stop\r?[\r\n]")


class _Decoder:
    """Content-Encoding decoder for the observed copy (the client gets the raw bytes)."""

    def __init__(self, encoding: str) -> None:
        enc = encoding.strip().lower()
        self.encoding = enc
        self.obj = None
        self.failed = False
        if enc in ("gzip", "x-gzip"):
            self.obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self.obj = zlib.decompressobj()
        self.supported = enc in ("", "identity") or self.obj is not None

    def feed(self, data: bytes) -> bytes:
        if self.obj is None or self.failed:
            return data
        try:
            return self.obj.decompress(data)
        except zlib.error:
            if self.encoding == "deflate":  # raw deflate, as some servers send it
                try:
                    self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    return self.obj.decompress(data)
                except zlib.error:
                    pass
            self.failed = True
            return data


@dataclass
class ProxyExchange:
    """One forwarded request (the last ``history`` are kept in ``ProxyApp.exchanges``; printed by the headless
    CLI)."""

    method: str
    path: str
    turn: int | None = None
    attempt: int | None = None
    status: int | None = None
    reads: int = 0
    bytes: int = 0
    t_request: float = 0.0
    headers_s: float | None = None  # since the request arrived
    first_byte_s: float | None = None
    end_s: float | None = None
    end: str | None = None  # complete | dropped | cancelled | error
    reason: str | None = None
    outcome: str | None = None
    inferred: list[InferredExecution] = field(default_factory=list)
    fault: str | None = None  # the live fault injected into this exchange (proxy --fault / x-inspector-fault)


class Track:
    """Bookkeeping of one /messages attempt: reads waiting to be decoded / published (processed in batches, off the
    forwarding path) and what is known of how its stream ended."""

    __slots__ = (
        "ex",
        "turn",
        "attempt",
        "digest",
        "t_req",
        "pending",
        "read_index",
        "ts",
        "decoder",
        "tail",
        "saw_stop",
        "requested",
        "ended",
        "sse",
    )

    def __init__(self, ex: ProxyExchange, digest: str, t_req: float) -> None:
        self.ex = ex
        self.turn = ex.turn or 0
        self.attempt = ex.attempt or 0
        self.digest = digest
        self.t_req = t_req  # proxy time of the request
        self.pending: list[tuple[float, bytes]] = []  # (seconds since the request, data)
        self.read_index = 0
        self.ts: TurnStream | None = None
        self.decoder: _Decoder | None = None
        self.tail = b""
        self.saw_stop = False
        self.requested = False  # its AttemptStarted was published
        self.ended = False  # its AttemptEnded was published
        self.sse = False  # the response is text/event-stream with status 200

    def set_response(self, content_type: str, content_encoding: str, status: int, parse: bool) -> None:
        self.sse = "text/event-stream" in content_type and status == 200
        self.decoder = _Decoder(content_encoding)
        if "text/event-stream" in content_type and parse:
            self.ts = TurnStream()


class TurnTracker:
    """The proxy's turns and attempts, and the observations they make, published to ``publish`` (None: nobody
    listens; only the turn numbering and what the exchange lines need are kept).

    ``clock`` and ``t0``: the proxy's clock and its start; ``source``: the LoopStarted source; ``detail``: whether
    anybody needs the streams parsed (the bus, or the exchange lines that show the inferred tool calls)."""

    def __init__(
        self,
        publish: Callable[[O.Observation], None] | None,
        *,
        clock: Callable[[], float],
        t0: float,
        source: Callable[[], dict],
        detail: Callable[[], bool],
        batch_interval: float = 0.01,
    ) -> None:
        self.publish = publish
        # whether the stream's own observations (events, blocks, message) are wanted: a recording alone keeps the
        # reads and the attempts' and tools' observations, not what the stream engine makes of the reads
        self.steps = publish is not None
        self.clock = clock
        self.t0 = t0
        self.source = source
        self.detail = detail
        self.batch_interval = batch_interval
        self.seen_tools: dict[str, SeenToolUse] = {}
        self.turns = 0
        self._failed: OrderedDict[str, tuple[int, int]] = OrderedDict()  # body digest -> failed (turn, attempt)
        self._dirty: dict[int, Track] = {}  # tracks with pending reads, by id
        self._drain_handle: asyncio.TimerHandle | None = None
        self._started = False

    def now(self) -> float:
        return self.clock() - self.t0

    def _pub(self, obs: O.Observation) -> None:
        if self.publish is not None:
            self.publish(obs)

    # --- the retry rule -------------------------------------------------------------------------------------------
    def turn_of(self, digest: str) -> tuple[int, int]:
        """(turn, attempt) of a /messages request: a retry (the next attempt of a turn) only when its body repeats
        that of an attempt that failed or was cut and has not been retried yet; anything else is a new turn."""
        prev = self._failed.pop(digest, None)
        if prev is not None:
            return prev[0], prev[1] + 1
        turn = self.turns
        self.turns += 1
        return turn, 0

    def remember_failed(self, track: Track) -> None:
        self._failed[track.digest] = (track.turn, track.attempt)
        self._failed.move_to_end(track.digest)
        while len(self._failed) > RETRY_MEMORY:
            self._failed.popitem(last=False)

    def new_track(self, ex: ProxyExchange, body: bytes, t_req: float) -> Track:
        """A /messages request's turn and attempt (the retry rule), before anything else is done with it."""
        digest = hashlib.sha256(body).hexdigest()
        turn, attempt = self.turn_of(digest)
        ex.turn, ex.attempt = turn, attempt
        return Track(ex, digest, t_req)

    # --- reads, in batches ----------------------------------------------------------------------------------------
    def read(self, track: Track, t: float, data: bytes) -> None:
        """A forwarded read (``t``: seconds since the request, when it arrived), published with the next batch."""
        track.pending.append((t, data))
        if len(track.pending) == 1:
            self._dirty[id(track)] = track
            if self._drain_handle is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    return
                self._drain_handle = loop.call_later(self.batch_interval, self.drain)

    def drain(self) -> None:
        """Process every pending read of every stream at once."""
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        dirty, self._dirty = self._dirty, {}
        for track in dirty.values():
            self._process(track)

    def _process(self, track: Track) -> None:
        pending, track.pending = track.pending, []
        if not pending:
            return
        turn, attempt = track.turn, track.attempt
        dec = track.decoder
        ts = track.ts
        if dec is not None:
            pending = [(t, dec.feed(data)) for t, data in pending]
        if self.publish is not None and (self.steps or ts is None):
            for t, d in pending:
                now = track.t_req + t  # when it arrived
                self._pub(O.ReadReceived(now, turn, attempt, track.read_index, t, d))
                track.read_index += 1
                if ts is not None:
                    self._steps(ts.feed(d), ts, turn, attempt, now)
        elif ts is not None:
            if self.publish is not None:  # the reads only (a recording): the events are parsed in one go below
                for t, d in pending:
                    self._pub(O.ReadReceived(track.t_req + t, turn, attempt, track.read_index, t, d))
                    track.read_index += 1
            t_last = pending[-1][0]
            self._steps(ts.feed(b"".join(d for _, d in pending)), ts, turn, attempt, track.t_req + t_last)
        else:
            track.read_index += len(pending)
            if not track.saw_stop:
                window = track.tail + b"".join(d for _, d in pending)
                track.saw_stop = _STOP_LINE.search(window) is not None
                track.tail = window[-32:]

    # --- notes ----------------------------------------------------------------------------------------------------
    def note(self, track: Track, text: str) -> None:
        self._pub(O.ProxyNote(self.now(), track.turn, track.attempt, text))

    def fault(self, track: Track, fault: str, at_event: int | None) -> None:
        track.ex.fault = fault
        self._pub(O.FaultInjected(self.now(), track.turn, track.attempt, fault, at_event))

    # --- an attempt's life ----------------------------------------------------------------------------------------
    def begin(self, track: Track, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> None:
        """The request of an attempt (once)."""
        if track.requested:
            return
        track.requested = True
        if not self.detail():
            return
        ex, turn, attempt, t_req = track.ex, track.turn, track.attempt, track.t_req
        try:
            parsed = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        if not self._started:
            self._started = True
            model = str(parsed.get("model", "")) if isinstance(parsed, dict) else ""
            self._pub(O.LoopStarted(t_req, self.source(), model, None))
        if attempt == 0:
            self._pub(O.TurnStarted(t_req, turn))
        # the body as sent: its JSON value (a body that is not JSON: its text, as the recording keeps it)
        sent: Any = parsed if parsed is not None else body.decode("utf-8", errors="replace")
        self._pub(O.AttemptStarted(t_req, turn, attempt, method, url, clean_headers(headers), sent))
        if isinstance(parsed, dict) and attempt == 0:  # a retry repeats the same results: inferred once
            self._infer(ex, turn, attempt, parsed, t_req)

    def _infer(self, ex: ProxyExchange, turn: int, attempt: int, parsed: dict, t_req: float) -> None:
        found = infer_tool_executions(self.seen_tools, parsed.get("messages"), t_req)
        ex.inferred = found
        for inf in found:
            self._pub(
                O.ToolExecutionInferred(
                    t_req,
                    turn,
                    attempt,
                    inf.tool_use_id,
                    inf.name,
                    inf.status,
                    inf.from_turn,
                    inf.since_block_stop,
                    inf.since_stream_end,
                    inf.is_error,
                    inf.request_t,
                    inf.block_stop_t,
                    inf.stream_end_t,
                    inf.result_chars,
                )
            )
            seen = self.seen_tools.get(inf.tool_use_id)
            if seen is not None and inf.status in ("result", "missing"):
                state = "not_run" if inf.status == "missing" else ("failed" if inf.is_error else "succeeded")
                why = "no tool_result for it in the next request" if inf.status == "missing" else None
                self._tool_state(
                    seen.id,
                    seen.name,
                    seen.turn,
                    seen.attempt,
                    seen.index,
                    state,
                    seen.input,
                    {"running": seen.stop_t, state: t_req},
                    error=why,
                    t=t_req,
                )
            if inf.status == "result":
                self.seen_tools.pop(inf.tool_use_id, None)

    def _tool_state(
        self,
        id: str,
        name: str,
        turn: int,
        attempt: int,
        index: int,
        state: str,
        tool_input: Any,
        times: dict,
        error: str | None = None,
        t: float | None = None,
        inferred: bool = True,
    ) -> None:
        """The other harness's tool call as the dashboard's tool rows show it: its execution is inferred (its input
        streaming is seen on the wire)."""
        if self.publish is not None:
            when = self.now() if t is None else t
            self._pub(
                O.ToolStateChanged(
                    when, turn, attempt, id, name, index, state, tool_input, error, None, times, inferred=inferred
                )
            )

    def response(self, track: Track, status: int, headers: list[tuple[str, str]], t: float) -> None:
        """Upstream's status and headers, ``t`` seconds after the request arrived."""
        self._pub(O.ResponseStarted(track.t_req + t, track.turn, track.attempt, status, clean_headers(headers)))

    def _steps(self, steps: list, ts: Any, turn: int, attempt: int, now: float) -> None:
        asm = ts.assembler
        for step in steps:
            if self.steps and self.publish is not None:  # nobody watching the stream: no observations built
                for obs in step_observations(step, asm, now, turn, attempt):
                    self._pub(obs)
            for tr in tool_transitions(step, asm):
                if tr.state is ToolState.STREAMING_INPUT:
                    self._tool_state(
                        tr.id, tr.name, turn, attempt, tr.index, tr.state, None, {tr.state: now}, t=now, inferred=False
                    )
                    continue
                self.seen_tools[tr.id] = SeenToolUse(tr.id, tr.name, turn, attempt, tr.index, now, None, tr.input)
                # from here on the tool is the other harness's business: shown as running (inferred) until a
                # later request carries its tool_result
                running = ToolState.RUNNING
                self._tool_state(tr.id, tr.name, turn, attempt, tr.index, running, tr.input, {running: now}, t=now)
            if step.event.type == "message_stop":
                for s in self.seen_tools.values():
                    if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                        s.stream_end_t = now

    def end(self, track: Track) -> None:
        """The attempt's end (once), after its pending reads; remembers a failed attempt for the retry rule."""
        if track.ended:
            return
        track.ended = True
        self._dirty.pop(id(track), None)
        self._process(track)
        ex = track.ex
        turn, attempt = track.turn, track.attempt
        status = {"complete": "complete", "cancelled": "cancelled"}.get(ex.end or "", "failed")
        reason = None if status == "complete" else ex.reason
        now = track.t_req + (ex.end_s or 0.0)  # when the exchange ended
        outcome = None
        ts = track.ts
        dec = track.decoder
        if dec is not None and dec.encoding not in ("", "identity") and (not dec.supported or dec.failed):
            self._pub(
                O.ProxyNote(
                    now, turn, attempt, f"content-encoding {dec.encoding}: reads recorded as received (encoded)"
                )
            )
        if ts is not None:
            for d in ts.close():
                self._pub(O.DiagnosticRaised(now, turn, attempt, d))
            outcome = ts.outcome
            stopped = ts.assembler.stopped
            for s in self.seen_tools.values():
                if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                    s.stream_end_t = now
        else:
            stopped = track.saw_stop
        if ex.status is not None and ex.status != 200:
            outcome = outcome or "error"
        ex.outcome = outcome
        self._pub(O.AttemptEnded(now, turn, attempt, status, reason, outcome))
        if ts is not None and status == "complete" and ts.assembler.stopped:
            msg = ts.final_message()
            self._pub(O.TurnEnded(now, turn, outcome or "", msg.get("stop_reason"), dict(msg.get("usage") or {})))
        sse_cut = track.sse and not stopped  # a stream that ended before message_stop
        if status != "complete" or (ex.status or 0) >= 400 or ex.status is None or sse_cut:
            self.remember_failed(track)

    def exchange(self, ex: ProxyExchange) -> None:
        """A request that is not a turn, once it ended."""
        self._pub(O.ExchangeForwarded(ex.t_request, ex.method, ex.path, ex.status, ex.bytes, ex.end))

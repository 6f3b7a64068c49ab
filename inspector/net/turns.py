"""Turn tracking of the proxy: which request is which turn and attempt (the retry rule), and every observation of
an attempt, published to one sink (the proxy's redacting publisher; the recorder, the dashboard and the headless
printer subscribe to the bus behind it). Nothing here forwards bytes or writes files.

- Conversations and turns: every request is grouped first (:mod:`inspector.net.conversations`,
  :meth:`TurnTracker.assign`): a streamed ``POST .../messages`` (or chat/completions, responses) is a turn of its
  conversation, or the next attempt of that conversation's current turn when it repeats its request and that turn
  did not end well (a retry, also when the client resent before the proxy saw its close). Turn numbers stay global
  and unique (the key of every observation); ``ConversationAssigned`` says which conversation, turn within it and
  attempt each one is. Side requests (count_tokens, models, non-streamed calls, other paths) are never turns: they
  are published once ended, as ``ExchangeForwarded`` with their conversation when one can be told.
- Reads: forwarded at once by the proxy, queued here (:meth:`TurnTracker.read`) and decoded / parsed / published in
  batches (every ``batch_interval``), off the forwarding path, a slice of about ``DRAIN_SLICE`` (1 ms) at a time:
  the loop forwards what arrived between two slices. A read is published with the time it arrived. A batch
  publishes every stream's observations merged in time order, and an attempt's start or end first publishes the
  batch under way and what every stream has pending: concurrent conversations' lines (the headless printer, the
  recording) come in the order they happened, not one stream's batch after another's.
- Clocks, as the loop's (so that the recorder writes both the same way): ``AttemptStarted.t`` is when the request
  arrived (seconds since the proxy started), ``ResponseStarted.t`` when upstream's headers came, ``ReadReceived.t``
  when the read arrived (``t_request``: the same, since the request), ``AttemptEnded.t`` when the exchange ended.
- Tool calls: their execution in the other harness is inferred from the next request of the same conversation
  (:mod:`inspector.net.toolinfer`), matched only against that conversation's previous turn; the tool rows it gives
  are published with ``inferred=True``; a result matched to nothing says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import re
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.core.redaction import SecretMatcher, clean_headers, json_clean
from inspector.net.conversations import Assignment, Conversations, Prefix, chains
from inspector.net.toolinfer import (
    InferredExecution,
    SeenToolUse,
    continued_tool_uses,
    infer_tool_executions,
    request_history,
    results_of,
)
from inspector.observe import observations as O
from inspector.observe.states import ToolState
from inspector.observe.stepobs import step_observations, tool_transitions
from inspector.stream.assembler import Step, TurnStream
from inspector.stream.family import family_from_path, new_stream
from inspector.stream.protocol import error_fields, http_error_text

__all__ = ["MAX_CONVERSATIONS", "ProxyExchange", "Track", "TurnTracker"]

MAX_CONVERSATIONS = 10_000  # conversations remembered (the oldest idle one is forgotten first)
# bytes of one attempt's stream parsed into events, blocks and its message (the assembler keeps what it parsed, about
# 1.4x the bytes); past it the stream is still forwarded and its reads recorded, but no longer parsed (a note says so)
PARSE_BUDGET = 16 * 1024 * 1024
ERROR_BODY_KEEP = 64 * 1024  # bytes of an error status's body kept to say why the attempt failed
# a request body from this size on is parsed and digested (parse_body) in a worker thread, not on the event loop: its
# CPU grows with the body (16 MiB: ~0.35 s, during which every other stream through the proxy stalled)
OFFLOAD_BODY = 256 * 1024
# a batch of reads is decoded and published (the recorder, the printer, the dashboard behind the bus) a slice of about
# this long at a time: the forwarding of whatever arrived meanwhile waits at most that long for the bookkeeping (a
# batch of 50 streams' reads at once took up to 14 ms, a first byte arriving then waited for all of it; issue 21)
DRAIN_SLICE = 0.001

# an SSE event line naming message_stop, at the start of a line (a JSON string cannot hold a raw line break)
# the end of a stream of either family: Messages' message_stop, Responses' terminal events, Chat's data: [DONE]
# (the line break before it is part of the pattern, and the stream's start counts as one: `_watch_stop` searches a
# window that begins inside the stream, where a `^` would take the window's first byte for a line's start)
_STOP_LINE = re.compile(
    rb"[\r\n](?:event: ?(?:message_stop|response\.completed|response\.incomplete|response\.failed)"
    rb"|data: ?\[DONE\])\r?[\r\n]"
)


# the decoded copy of one read is at most DECODE_RATIO times its encoded size (DECODE_FLOOR for a small read) and at
# most DECODE_MAX_READ: past it, a decompression bomb (a 1 MiB gzip of zeros is 1 GiB), decoding stops
DECODE_RATIO = 200
DECODE_FLOOR = 256 * 1024
DECODE_MAX_READ = 8 * 1024 * 1024


class _Decoder:
    """Content-Encoding decoder for the observed copy (the client gets the raw bytes), bounded: a read that decodes
    to more than its share (``DECODE_RATIO``...) stops the decoding; the rest is kept as received (``bomb``)."""

    def __init__(self, encoding: str) -> None:
        enc = encoding.strip().lower()
        self.encoding = enc
        self.obj = None
        self.failed = False
        self.bomb: str | None = None  # what stopped the decoding: a read that decoded past its bound
        if enc in ("gzip", "x-gzip"):
            self.obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self.obj = zlib.decompressobj()
        self.supported = enc in ("", "identity") or self.obj is not None

    def feed(self, data: bytes) -> bytes:
        if self.obj is None or self.failed:
            return data
        cap = min(DECODE_MAX_READ, max(DECODE_FLOOR, DECODE_RATIO * len(data)))
        try:
            out = self.obj.decompress(data, cap)
        except zlib.error:
            if self.encoding == "deflate":  # raw deflate, as some servers send it
                try:
                    self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    out = self.obj.decompress(data, cap)
                except zlib.error:
                    self.failed = True
                    return data
            else:
                self.failed = True
                return data
        if len(out) >= cap:  # more to come from this read: a bomb; what it did not decode is kept as received
            self.failed, self.bomb = True, f"a read of {len(data)} bytes decoded to {cap} bytes or more"
            return out + self.obj.unconsumed_tail
        return out


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
    conversation: str | None = None  # its conversation (None: a side request of no conversation)
    conversation_turn: int | None = None  # its turn within that conversation (0-based; None for a side request)
    side: str | None = None  # why it is not a turn (count_tokens, not streamed, ...), None for a turn


def parse_body(body: bytes) -> tuple[Any, Prefix]:
    """A request body's JSON value (None when it is not JSON) and its prefix digests (``conversations.chains``):
    the work of grouping a request that grows with its body. Pure: a worker thread may run it."""
    parsed: Any = None
    if body:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
    return parsed, chains(parsed)


def _parse_and_check(body: bytes, keys: SecretMatcher | None) -> tuple[Any, Prefix, bool]:
    """``parse_body``, and whether the value holds none of ``keys``' secrets (``json_clean``: its AttemptStarted
    is then not searched again on the event loop, unless a key was learned meanwhile)."""
    parsed, prefix = parse_body(body)
    return parsed, prefix, keys is not None and parsed is not None and json_clean(parsed, keys)


def _at(obs: O.Observation) -> float:
    return obs.t


class Track:
    """Bookkeeping of one /messages attempt: reads waiting to be decoded / published (processed in batches, off the
    forwarding path) and what is known of how its stream ended."""

    __slots__ = (
        "ex",
        "turn",
        "attempt",
        "assignment",
        "parsed",
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
        "family",
        "last_sse",
        "parsed_bytes",
        "error_body",
    )

    def __init__(self, ex: ProxyExchange, assignment: Assignment, t_req: float, parsed: Any = None) -> None:
        self.ex = ex
        self.turn = ex.turn or 0
        self.attempt = ex.attempt or 0
        self.assignment = assignment
        self.parsed = parsed  # the request body's JSON value (None: not JSON), parsed once
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
        self.family = family_from_path(ex.path) or "anthropic"  # its wire family, by the request path
        self.last_sse: Any = None  # the SSE event of the last step published (one event may give several steps)
        self.parsed_bytes = 0  # bytes fed to ``ts`` (at most PARSE_BUDGET: then ``ts`` is dropped)
        # an error status's body (its first ERROR_BODY_KEEP bytes, decoded): why the attempt failed, said at its end
        self.error_body: bytearray | None = None

    def set_response(self, content_type: str, content_encoding: str, status: int, parse: bool) -> None:
        self.sse = "text/event-stream" in content_type and status == 200
        self.decoder = _Decoder(content_encoding)
        self.error_body = None if 200 <= status < 300 else bytearray()
        if "text/event-stream" in content_type and parse:
            self.ts = new_stream(self.family)  # the same engine; an OpenAI family's decoder in front


@dataclass
class _ConvTurns:
    """A conversation's current turn and its previous one (global turn numbers), with the tool calls each streamed."""

    turn: int
    tools: dict[str, SeenToolUse] = field(default_factory=dict)
    prev_turn: int | None = None
    prev_tools: dict[str, SeenToolUse] = field(default_factory=dict)


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
        source: Callable[[], dict[str, Any]],
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
        # tool calls waiting for their result, by conversation and id (all conversations: two may stream the same
        # call id, a mock's seeded ids or a server's `call_0`)
        self.seen_tools: dict[tuple[str, str], SeenToolUse] = {}
        self.turns = 0
        self.conversations = Conversations(MAX_CONVERSATIONS)
        # conversation id -> its current and previous turn (global numbers) and their tool calls: a tool_result is
        # matched only against the same conversation's previous turn
        self._conv: OrderedDict[str, _ConvTurns] = OrderedDict()
        self._dirty: dict[int, Track] = {}  # tracks with pending reads, by id
        self._drain_handle: asyncio.Handle | None = None  # the next slice of a batch (`_drain_slice`)
        self._round: list[Track] | None = None  # the batch under way: its streams, in order (None: none)
        self._round_at = 0  # its next stream to process
        self._round_single = False
        self._outs: list[list[O.Observation]] = []  # what its streams processed so far made (to publish merged)
        self._merged: Iterator[O.Observation] | None = None  # ... being published
        self._started = False
        self._assigning: asyncio.Future[None] | None = None  # the last request being assigned (assign_soon)
        # bodies found clean of the matcher's secrets off the loop, by id (assign_soon), until their AttemptStarted
        self._clean: dict[int, tuple[Any, SecretMatcher | None]] = {}
        # the publisher's vouch(obs, matcher): an AttemptStarted whose body is known clean (RedactingPublisher.vouch)
        self.vouch: Callable[[O.AttemptStarted, SecretMatcher], None] | None = None

    def now(self) -> float:
        return self.clock() - self.t0

    def _pub(self, obs: O.Observation) -> None:
        if self.publish is not None:
            self.publish(obs)

    # --- conversations, turns and the retry rule ------------------------------------------------------------------
    def assign(
        self,
        ex: ProxyExchange,
        method: str,
        path: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        parsed_body: tuple[Any, Prefix] | None = None,
    ) -> tuple[Assignment, Any]:
        """Group a request (net/conversations.py): its assignment and its body's JSON value (parsed once; None
        when it is not JSON). Sets the exchange's conversation (and, for a side request, why it is one).
        ``parsed_body``: ``parse_body(body)``, when the caller made it already."""
        parsed, prefix = parse_body(body) if parsed_body is None else parsed_body
        lower = {k.lower(): v for k, v in headers}
        a = self.conversations.assign(method, path, lower, parsed, prefix)
        ex.conversation, ex.side = a.conversation, a.side
        if a.side is None:
            ex.conversation_turn = a.turn
        return a, parsed

    async def assign_soon(
        self,
        ex: ProxyExchange,
        method: str,
        path: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        keys: SecretMatcher | None = None,
    ) -> tuple[Assignment, Any]:
        """``assign``, a large body (``OFFLOAD_BODY``) parsed and digested in a worker thread meanwhile, so that
        the event loop goes on serving every other stream; there too, the body is searched for ``keys``' secrets
        (the redacting publisher's, now), so that its AttemptStarted is not (``vouch``). Requests are still assigned
        in the order their bodies arrived (the grouping depends on it: a retry, the next turn): each waits for the
        one before it."""
        before, mine = self._assigning, asyncio.get_running_loop().create_future()
        self._assigning = mine
        try:
            parsed_body: tuple[Any, Prefix] | None = None
            if len(body) >= OFFLOAD_BODY:
                parsed, prefix, clean = await asyncio.to_thread(_parse_and_check, body, keys)
                parsed_body = parsed, prefix
                if clean:
                    self._clean[id(parsed)] = (parsed, keys)
                    while len(self._clean) > 64:  # (bodies of requests that never began: forgotten)
                        del self._clean[next(iter(self._clean))]
            if before is not None and not before.done():
                await asyncio.shield(before)  # (a request cancelled here does not cancel the one before it)
            return self.assign(ex, method, path, headers, body, parsed_body)
        finally:
            mine.set_result(None)
            if self._assigning is mine:
                self._assigning = None

    def new_track(self, ex: ProxyExchange, assignment: Assignment, t_req: float, parsed: Any = None) -> Track:
        """A turn's request (``assignment.side`` is None): its global turn and attempt, before anything else is done
        with it. A conversation's next turn takes the next global turn number; a retry keeps its turn's."""
        cid = assignment.conversation or ""
        conv = self._conv.get(cid)
        if assignment.how == "retry" and conv is not None:
            turn = conv.turn
            self._conv.move_to_end(cid)
        else:
            turn = self.turns
            self.turns += 1
            if conv is None:
                conv = self._conv[cid] = _ConvTurns(turn)
                while len(self._conv) > MAX_CONVERSATIONS:  # forgotten: so are its tool calls
                    old, gone = self._conv.popitem(last=False)
                    for tid in (*gone.tools, *gone.prev_tools):
                        self.seen_tools.pop((old, tid), None)
            else:
                for tid in conv.prev_tools:  # two turns back: no longer matched
                    self.seen_tools.pop((cid, tid), None)
                conv.prev_turn, conv.prev_tools = conv.turn, conv.tools
                conv.turn, conv.tools = turn, {}
            self._conv.move_to_end(cid)
        ex.turn, ex.attempt = turn, assignment.attempt
        return Track(ex, assignment, t_req, parsed)

    def ended_well(self, track: Track, ok: bool) -> None:
        a = track.assignment
        self.conversations.ended(a.conversation, a.turn, a.attempt, ok)

    # --- reads, in batches ----------------------------------------------------------------------------------------
    def read(self, track: Track, t: float, data: bytes) -> None:
        """A forwarded read (``t``: seconds since the request, when it arrived), published with the next batch."""
        track.pending.append((t, data))
        if len(track.pending) == 1:
            self._dirty[id(track)] = track
            self._schedule()

    def _schedule(self) -> None:
        """The next batch's drain, unless one is due already or a batch is under way (its end schedules the next), or
        no event loop runs (the caller drains)."""
        if self._drain_handle is None and self._round is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._drain_handle = loop.call_later(self.batch_interval, self._drain_slice)

    def _drain_slice(self) -> None:
        """(The event loop's) the batch's next slice: at most ~``DRAIN_SLICE`` of work, then the loop forwards what
        arrived meanwhile, and the next slice comes at once (``call_soon``)."""
        self._drain_handle = None
        if self._round is None:
            self._start_round()
        try:
            if not self._work(time.perf_counter() + DRAIN_SLICE):
                self._drain_handle = asyncio.get_running_loop().call_soon(self._drain_slice)
        finally:
            if self._round is None and self._dirty:  # (what came meanwhile: the next batch)
                self._schedule()

    def drain(self) -> None:
        """Process every pending read of every stream now, and publish their observations merged in time order (each
        stream's stay in their order): the batch under way first, whole, then what is pending."""
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        if self._round is not None:
            self._work(None)
        if self._dirty:
            self._start_round()
            self._work(None)

    def _start_round(self) -> None:
        dirty, self._dirty = self._dirty, {}
        self._round = list(dirty.values())
        self._round_at = 0
        # one stream (or nobody listening): published as processed; more: merged (decided once for the batch)
        self._round_single = len(self._round) < 2 or self.publish is None
        self._outs = []
        self._merged = None

    def _work(self, deadline: float | None) -> bool:
        """Process, then publish, the batch under way until ``deadline`` (None: to its end); True once it is over. A
        batch of one stream (or nobody listening) publishes as it processes; of more, their observations merged."""
        rnd = self._round
        assert rnd is not None
        publish = self.publish
        single = self._round_single
        clock = time.perf_counter
        try:
            while self._round_at < len(rnd):
                track = rnd[self._round_at]
                self._round_at += 1
                if single:
                    self._process(track)
                else:
                    out: list[O.Observation] = []
                    self.publish = out.append
                    try:
                        self._process(track)
                    finally:
                        self.publish = publish
                    if out:
                        self._outs.append(out)
                if deadline is not None and clock() >= deadline:
                    return False
        except BaseException:
            self._end_round(publish_rest=True)  # (what was processed is published, whatever stopped the rest)
            raise
        try:
            if not single and publish is not None:
                if self._merged is None:
                    self._merged = heapq.merge(*self._outs, key=_at)
                    self._outs = []
                for obs in self._merged:
                    publish(obs)
                    if deadline is not None and clock() >= deadline:
                        return False
        except BaseException:
            self._end_round(publish_rest=False)
            raise
        self._end_round(publish_rest=False)
        return True

    def _end_round(self, *, publish_rest: bool) -> None:
        """The batch is over; when it failed, the streams not reached go back to the pending ones, and
        (``publish_rest``) what the others made is published."""
        rnd, self._round = self._round or [], None
        outs, merged, self._outs, self._merged = self._outs, self._merged, [], None
        for track in rnd[self._round_at :]:
            if track.pending:
                self._dirty[id(track)] = track
        publish = self.publish
        if publish_rest and publish is not None:
            for obs in merged if merged is not None else heapq.merge(*outs, key=_at):
                publish(obs)

    def _process(self, track: Track) -> None:
        pending, track.pending = track.pending, []
        if not pending:
            return
        turn, attempt = track.turn, track.attempt
        dec = track.decoder
        ts = track.ts
        if dec is not None:
            pending = [(t, dec.feed(data)) for t, data in pending]
        kept = track.error_body
        if kept is not None and len(kept) < ERROR_BODY_KEEP:
            for _t, data in pending:
                kept += data[: ERROR_BODY_KEEP - len(kept)]
        if ts is not None:
            track.parsed_bytes += sum(len(d) for _, d in pending)
            if track.parsed_bytes > PARSE_BUDGET:  # bounded: the rest is forwarded and recorded, not parsed
                track.ts = ts = None
                self._pub(
                    O.ProxyNote(
                        track.t_req + pending[0][0],
                        turn,
                        attempt,
                        f"the stream passed {PARSE_BUDGET} bytes: no longer parsed (still forwarded and its reads "
                        "recorded)",
                    )
                )
        if ts is None:  # how the stream ends is still watched (the retry rule)
            self._watch_stop(track, pending)
        if self.publish is not None and (self.steps or ts is None):
            for t, d in pending:
                now = track.t_req + t  # when it arrived
                self._pub(O.ReadReceived(now, turn, attempt, track.read_index, t, d))
                track.read_index += 1
                if ts is not None:
                    self._steps(ts.feed(d), ts, track, now)
        elif ts is not None:
            if self.publish is not None:  # the reads only (a recording): the events are parsed in one go below
                for t, d in pending:
                    self._pub(O.ReadReceived(track.t_req + t, turn, attempt, track.read_index, t, d))
                    track.read_index += 1
            t_last = pending[-1][0]
            self._steps(ts.feed(b"".join(d for _, d in pending)), ts, track, track.t_req + t_last)
        else:
            track.read_index += len(pending)

    @staticmethod
    def _watch_stop(track: Track, pending: list[tuple[float, bytes]]) -> None:
        """Whether an unparsed stream sent its message_stop (a window of 32 bytes carried across reads)."""
        if not track.saw_stop:  # (the last 32 bytes of what came before, or a line break at the stream's start)
            window = (track.tail or b"\n") + b"".join(d for _, d in pending)
            # (a search for the names first, at memchr speed: the pattern, tried at every byte, cost ~8% of the
            # proxy's CPU with 1,000 streams at once)
            if b"message_stop" in window or b"[DONE]" in window or b"response." in window:
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
        if self._dirty or self._round is not None:
            # what other streams received before this request came, first (its own reads after it)
            mine = self._dirty.pop(id(track), None)
            rnd = self._round
            if rnd is not None and track in rnd[self._round_at :]:
                rnd.remove(track)
                mine = track
            if self._dirty or self._round is not None:
                self.drain()
            if mine is not None and mine.pending:
                self._dirty[id(track)] = mine
                self._schedule()
        turn, attempt, t_req = track.turn, track.attempt, track.t_req
        parsed = track.parsed
        if not self._started:
            self._started = True
            model = str(parsed.get("model", "")) if isinstance(parsed, dict) else ""
            self._pub(O.LoopStarted(t_req, self.source(), model, None))
        a = track.assignment
        if a.conversation is not None:
            self._pub(O.ConversationAssigned(t_req, turn, a.conversation, a.turn, a.attempt, a.how, a.parent))
        if attempt == 0:
            self._pub(O.TurnStarted(t_req, turn))
        # the body as sent: its JSON value (a body that is not JSON: its text, as the recording keeps it)
        sent: Any = parsed if parsed is not None else body.decode("utf-8", errors="replace")
        started = O.AttemptStarted(t_req, turn, attempt, method, url, clean_headers(headers), sent)
        clean = self._clean.pop(id(parsed), None) if self._clean else None
        if clean is not None and clean[0] is parsed and clean[1] is not None and self.vouch is not None:
            self.vouch(started, clean[1])
        self._pub(started)
        if isinstance(parsed, dict) and attempt == 0:  # a retry repeats the same results: inferred once
            self._infer(track, parsed, t_req)

    def _infer(self, track: Track, parsed: dict[str, Any], t_req: float) -> None:
        ex, turn, attempt = track.ex, track.turn, track.attempt
        cid = track.assignment.conversation
        conv = self._conv.get(cid or "")
        seen: dict[str, SeenToolUse] = {}
        if conv is not None and conv.prev_turn is not None:
            seen = conv.prev_tools
            why = (
                f"not a tool_use of the previous turn of conversation {cid} (its turn {track.assignment.turn},"
                f" #{conv.prev_turn + 1} of the session): the proxy never saw it there"
            )
        elif track.assignment.how == "header":
            why = f"conversation {cid} has no earlier turn seen by this proxy (it started before the proxy, or was forgotten)"
        else:
            why = (
                f"this request starts conversation {cid}: no earlier turn of it was seen (its history matched no"
                " conversation's previous request, or that one was forgotten)"
            )
        history = request_history(parsed, track.family)
        continued = continued_tool_uses(history) if seen else ()
        found = infer_tool_executions(seen, results_of(history, track.family), t_req, why, continued)
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
                    inf.reason,
                )
            )
            s = seen.get(inf.tool_use_id)
            if s is not None and inf.status in ("result", "missing"):
                state = "not_run" if inf.status == "missing" else ("failed" if inf.is_error else "succeeded")
                why_not = "no tool_result for it in the next request" if inf.status == "missing" else None
                self._tool_state(
                    s.id,
                    s.name,
                    s.turn,
                    s.attempt,
                    s.index,
                    state,
                    s.input,
                    # (a call with no result was not seen to run: no running time, nor an inferred bar)
                    {state: t_req} if inf.status == "missing" else {"running": s.stop_t, state: t_req},
                    error=why_not,
                    t=t_req,
                )
        if conv is not None:  # matched once: the previous turn's calls are done with
            for tid in conv.prev_tools:
                if self.seen_tools.get((cid or "", tid)) is conv.prev_tools[tid]:
                    del self.seen_tools[(cid or "", tid)]
            conv.prev_tools = {}

    def _tool_state(
        self,
        id: str,
        name: str,
        turn: int,
        attempt: int,
        index: int,
        state: str,
        tool_input: Any,
        times: dict[str, Any],
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
        if self.publish is not None:  # (their cleaning costs as much as forwarding them: only for a listener)
            self._pub(O.ResponseStarted(track.t_req + t, track.turn, track.attempt, status, clean_headers(headers)))

    def _steps(self, steps: list[Step], ts: TurnStream, track: Track, now: float) -> None:
        turn, attempt = track.turn, track.attempt
        cid = track.assignment.conversation
        asm = ts.assembler
        for step in steps:
            if self.steps and self.publish is not None:  # nobody watching the stream: no observations built
                for obs in step_observations(step, asm, now, turn, attempt, prev_sse=track.last_sse):
                    self._pub(obs)
                track.last_sse = step.sse
            for tr in tool_transitions(step, asm):
                if tr.state is ToolState.STREAMING_INPUT:
                    self._tool_state(
                        tr.id, tr.name, turn, attempt, tr.index, tr.state, None, {tr.state: now}, t=now, inferred=False
                    )
                    continue
                seen = SeenToolUse(tr.id, tr.name, turn, attempt, tr.index, now, None, tr.input, cid)
                self.seen_tools[(cid or "", tr.id)] = seen
                conv = self._conv.get(cid or "")
                if conv is not None and conv.turn == turn:
                    conv.tools[tr.id] = seen
                self.conversations.streamed_tool(cid, tr.id)
                if isinstance(tr.input, dict):  # a subagent started by this call names it in its first message
                    with contextlib.suppress(orjson.JSONEncodeError):  # (a hint: none for an input too deep to write)
                        self.conversations.tool_call(cid, exactjson.dumps(tr.input).decode())
                # from here on the tool is the other harness's business: shown as running (inferred) until a
                # later request carries its tool_result
                running = ToolState.RUNNING
                self._tool_state(tr.id, tr.name, turn, attempt, tr.index, running, tr.input, {running: now}, t=now)
            if step.event.type == "message_start" and track.family != "openai_chat" and asm.message:
                # (previous_response_id, or a Messages thread's previous_message_id, continues it)
                self.conversations.response_id(cid, asm.message.get("id"))
            if step.event.type == "message_stop":
                self._stream_ended(track, now)

    def _stream_ended(self, track: Track, now: float) -> None:
        """The tool calls this attempt streamed: its response ended at ``now`` (the first end seen counts)."""
        conv = self._conv.get(track.assignment.conversation or "")
        if conv is None or conv.turn != track.turn:
            return
        for s in conv.tools.values():
            if s.attempt == track.attempt and s.stream_end_t is None:
                s.stream_end_t = now

    def _unclosed_tools(self, ts: TurnStream, turn: int, attempt: int, now: float) -> None:
        """The tool blocks the attempt left open (the stream cut, max_tokens inside one): their input never completed,
        so no harness ran them. They end as not_run, as the agent loop ends them (before: still 'receiving input'
        once the session had ended)."""
        for b in ts.assembler.tool_blocks():
            if b.open and b.id:
                state = ToolState.NOT_RUN
                why = "its block never closed: its input is incomplete, the tool was not run"
                self._tool_state(
                    b.id, b.name or "?", turn, attempt, b.index, state, None, {state: now}, why, t=now, inferred=False
                )

    def session_ended(self, why: str) -> None:
        """The session is over (the watched command exited, the proxy stopped): the tool calls still shown as
        running (inferred), whose result no later request carried, end as ``unknown`` (``why``): their time stops
        growing, and nothing says they ran, failed or are still running. Once: none is left waiting after it."""
        waiting, self.seen_tools = self.seen_tools, {}
        now = self.now()
        for s in waiting.values():
            state = ToolState.UNKNOWN
            self._tool_state(s.id, s.name, s.turn, s.attempt, s.index, state, s.input, {state: now}, error=why, t=now)

    def end(self, track: Track) -> None:
        """The attempt's end (once), after its pending reads; remembers a failed attempt for the retry rule."""
        if track.ended:
            return
        track.ended = True
        self._dirty[id(track)] = track  # (its last reads, with what every other stream has pending before them)
        self.drain()
        ex = track.ex
        turn, attempt = track.turn, track.attempt
        status = {"complete": "complete", "cancelled": "cancelled"}.get(ex.end or "", "failed")
        reason = None if status == "complete" else ex.reason
        if status == "complete" and track.error_body is not None and ex.status is not None:
            # an error status, answered whole: why, as the loop's recording of such a try says it (http_error,
            # "HTTP 400 invalid_request_error: ...")
            status, reason = "http_error", http_error_text(ex.status, *error_fields(bytes(track.error_body)))
        now = track.t_req + (ex.end_s or 0.0)  # when the exchange ended
        outcome: str | None = None
        ts = track.ts
        dec = track.decoder
        if dec is not None and dec.bomb:
            self._pub(
                O.ProxyNote(
                    now,
                    turn,
                    attempt,
                    f"content-encoding {dec.encoding}: {dec.bomb} (a decompression bomb?): decoding stopped there,"
                    " the rest recorded as received (encoded)",
                )
            )
        elif dec is not None and dec.encoding not in ("", "identity") and (not dec.supported or dec.failed):
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
            if status == "complete" and track.sse and not stopped and (ex.status or 0) < 400:
                # the transport ended well, the stream did not: failed, in the loop's words for the same bytes (it
                # said "complete" for a stream that ended with an error event or before its end)
                err = ts.assembler.error
                if err is not None:
                    status, reason = "failed", f"error event: {err.error_type}: {err.message}"
                else:
                    status, reason = "failed", f"stream ended before {getattr(ts, 'message_end', 'message_stop')}"
            self._stream_ended(track, now)
            self._unclosed_tools(ts, turn, attempt, now)
        else:
            stopped = track.saw_stop
        if ex.status is not None and not 200 <= ex.status < 300:
            outcome = "http_error"  # (as dump and the loop say it: docs/outcomes.md)
        elif ex.status is not None and ex.status != 200:
            outcome = outcome or "error"
        ex.outcome = outcome
        self._pub(O.AttemptEnded(now, turn, attempt, status, reason, outcome))
        if ts is not None and status == "complete" and ts.assembler.stopped:
            msg = ts.final_message()
            self._pub(O.TurnEnded(now, turn, outcome or "", msg.get("stop_reason"), dict(msg.get("usage") or {})))
        sse_cut = track.sse and not stopped  # a stream that ended before message_stop
        # an answer the token limit cut (stop_reason max_tokens; chat's finish_reason length): a harness that sends
        # the same request again is retrying it (the openai SDK's .stream() raises LengthFinishReasonError on it)
        token_cut = ts is not None and ts.assembler.stop_reason == "max_tokens"
        failed = status != "complete" or (ex.status or 0) >= 400 or ex.status is None or sse_cut or token_cut
        # the retry rule: an identical request after this attempt is its retry unless it ended well
        self.ended_well(track, not failed)

    def exchange(self, ex: ProxyExchange) -> None:
        """A request that is not a turn (a side request), once it ended, with its conversation when one was told."""
        self._pub(
            O.ExchangeForwarded(ex.t_request, ex.method, ex.path, ex.status, ex.bytes, ex.end, ex.conversation, ex.side)
        )

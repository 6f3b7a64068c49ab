"""Headless output of `inspector run --headless`: progress lines or JSON, written by a thread."""

from __future__ import annotations

import heapq
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import IO, Any

import orjson

from inspector.core import exactjson
from inspector.core.fmt import duration, short, short_text, terminal
from inspector.observe import observations as O
from inspector.observe.states import LoopState


# ------------------------------------------------------------------------------------------------------ run
class TimeOrder:
    """Lines put back in the order of their times. A proxy publishes each stream's observations in order, but its
    concurrent conversations' a few milliseconds apart at times (a request's lines after another stream's reads that
    came later; a whole stream's batch after the next one's): `watch --headless` printed `1.514s [c1] ...` then
    `1.506s [c3] ...`, 2 to 21 lines of 64 in a 3-conversation run.

    A line with a time waits until the times' clock has passed it by ``window`` seconds, then goes out with every
    line due before it, in time order (equal times: in the order they came, so an observation's lines stay
    together). The times' clock is read off the monotonic one: ``now - offset``, the offset being the least
    ``arrived - t`` seen (the quickest line came at once). So a line waits at most ``window`` after it came, and only
    a line that came more than ``window`` later than the quickest would still be out of order. A line without a
    time (the totals) sends everything held first."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._heap: list[tuple[float, int, bytes]] = []
        self._seq = 0
        self._offset: float | None = None

    @property
    def held(self) -> int:
        return len(self._heap)

    def add(self, data: bytes, t: float | None, arrived: float) -> list[bytes]:
        """A line that came at ``arrived`` (monotonic seconds); what may go out with it now, in order."""
        if t is None:
            out = self.take_all()
            out.append(data)
            return out
        late = arrived - t
        if self._offset is None or late < self._offset:
            self._offset = late
        heapq.heappush(self._heap, (t, self._seq, data))
        self._seq += 1
        return []

    def due_in(self, now: float) -> float | None:
        """Seconds until the first line held is due (0: now); None when none is held."""
        if not self._heap or self._offset is None:
            return None
        return max(0.0, self._heap[0][0] + self._offset + self.window - now)

    def ready(self, now: float) -> list[bytes]:
        """The lines due at ``now``, in time order."""
        out: list[bytes] = []
        heap = self._heap
        if heap and self._offset is not None:
            cut = now - self._offset - self.window
            while heap and heap[0][0] <= cut:
                out.append(heapq.heappop(heap)[2])
        return out

    def take_all(self) -> list[bytes]:
        """Every line held, in time order."""
        out = [data for _, _, data in sorted(self._heap)]
        self._heap.clear()
        return out


class LineSink:
    """Output written by a thread, so a slow or stalled reader of stdout never blocks the agent loop.

    ``write`` appends to a buffer (no lock, no thread switch: the loop may write a line per observation); the thread
    wakes at the first line, lets lines pile up for ``linger`` seconds (a person does not see 20 ms; the loop does
    not pay a wake-up per line), then writes them in one call and flushes; ``close()`` cuts the wait short. The buffer is bounded: when
    ``maxsize`` lines wait, the loop waits at most `max_wait` seconds for room, then the line is dropped and counted
    (`dropped`). A reader that went away (broken pipe, e.g. `| head`) calls `on_broken` once, from the writer
    thread. ``window`` (seconds; 0: none): lines written with a time go out in time order (`TimeOrder`), each at
    most ``window`` later."""

    def __init__(
        self,
        out: IO[bytes],
        *,
        maxsize: int = 50_000,
        max_wait: float = 1.0,
        on_broken: Callable[[], None] | None = None,
        linger: float = 0.02,
        window: float = 0.0,
    ) -> None:
        self.out = out
        self.order = TimeOrder(window) if window > 0 else None
        self.linger = linger
        self.max_wait = max_wait
        self.on_broken = on_broken
        self.broken = False
        self.dropped = 0
        self.maxsize = maxsize
        self._buf: deque[Any] = deque()  # lines (with a window: (line, its time, when it came))
        self._wake = threading.Event()  # set: lines wait (or the sink closes)
        self._room = threading.Condition()  # notified after each batch written
        self._closing = False
        self._closed = threading.Event()  # set by close(): no more lingering
        self._thread = threading.Thread(target=self._run, name="inspector-output", daemon=True)
        self._thread.start()

    def write(self, data: bytes, t: float | None = None) -> None:
        """One or more lines out; ``t``: their time (only a sink with a window uses it)."""
        if self.broken or self._closing:
            return
        if len(self._buf) >= self.maxsize:
            with self._room:
                self._room.wait_for(lambda: len(self._buf) < self.maxsize or self.broken, self.max_wait)
            if len(self._buf) >= self.maxsize:
                self.dropped += 1
                return
        # (deque.append is atomic: the writer thread pops from the other end)
        self._buf.append(data if self.order is None else (data, t, time.monotonic()))
        if not self._wake.is_set():
            self._wake.set()

    def _take(self) -> list[Any]:
        out = []
        buf = self._buf
        try:
            while True:
                out.append(buf.popleft())
        except IndexError:
            return out

    def _ordered(self, batch: list[tuple[bytes, float | None, float]]) -> list[bytes]:
        """(window) What may go out now of what was held and what came, in time order; all of it once closing."""
        order = self.order
        assert order is not None
        out: list[bytes] = []
        for data, t, arrived in batch:
            out += order.add(data, t, arrived)
        out += order.take_all() if self._closing else order.ready(time.monotonic())
        return out

    def _run(self) -> None:
        order = self.order
        while True:
            due = order.due_in(time.monotonic()) if order is not None else None
            self._wake.wait(due)  # (with lines held: until the first is due, or more come)
            if self.linger > 0 and not self._closing and self._wake.is_set():
                self._closed.wait(self.linger)  # (the wake stays set meanwhile: writers do not set it again)
            self._wake.clear()
            batch = self._take()
            if order is not None:
                batch = self._ordered(batch)
            if batch and not self.broken:
                try:
                    self.out.write(b"".join(batch))
                    self.out.flush()
                except (BrokenPipeError, ValueError, OSError):
                    self.broken = True
                    if self.on_broken is not None:
                        self.on_broken()
            with self._room:
                self._room.notify_all()
            if self._closing and not self._buf and (order is None or not order.held):
                return

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (at most `timeout` seconds), then stop the thread."""
        self._closing = True
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout)
        if self.dropped and not self.broken:
            sys.stderr.write(f"inspector: {self.dropped} output lines dropped (stdout did not keep up)\n")


def stdout_sink(**kw: Any) -> LineSink:
    return LineSink(sys.stdout.buffer, **kw)


_SILENT = frozenset({O.ReadReceived, O.SSEEventSeen, O.BlockDelta})  # observations ProgressPrinter prints nothing for
_TEXT_KEEP = 301  # fragments of an open text block kept (each at least a character: the 300 a line shows)


class ProgressPrinter:
    """Readable progress lines for `inspector run --headless` (a bus subscriber)."""

    KEEP_TURNS = 10_000  # global turns whose conversation is remembered (the oldest forgotten first)

    def __init__(self, sink: LineSink) -> None:
        from inspector.record.timing import BufferingWatch

        # a proxy's conversations (ConversationAssigned): global turn -> (conversation, its turn there); once more
        # than one was seen, the lines of a turn name it: "[c2] turn 1"
        self.where: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self.conversations: set[str] = set()
        self.sink = sink
        self.buffering = BufferingWatch()  # timing.buffered, said at the end of a buffered attempt
        self.side_requests = 0  # a proxy's requests that are not turns (count_tokens, non-streamed calls, ...)
        self._last_stop: tuple[object, ...] | None = None  # the last stop_reason line's facts (said once)
        self._modelless: dict[str, Any] | None = None  # the source of a start said without a model (a proxy's)
        self._loop_conversation: str | None = None  # a replay of many conversations: the one its loop replays
        # the text blocks still open: their first fragments (enough for a line), said at the attempt's end if the
        # block never closed (a stream cut mid-text: the text that came is shown, as dump shows it)
        self._open_text: dict[tuple[int, int, int], list[str]] = {}
        self._t: float | None = None  # the time of the observation being printed (its lines')
        self._ordered = getattr(sink, "order", None) is not None  # (a sink that puts lines in time order: `p`)

    def p(self, s: str, t: float | None = None) -> None:
        """One line out; what the stream put in it (names, ids, text) cannot reach the terminal raw, nor start a
        line of its own (a newline in a tool name would forge a progress line): each call is one line. ``t``: its
        time (by default the observation's being printed), for a sink that puts lines in time order."""
        data = (terminal(s, newlines=False) + "\n").encode("utf-8", "replace")
        if self._ordered:
            self.sink.write(data, self._t if t is None else t)
        else:
            self.sink.write(data)

    def __call__(self, obs: O.Observation) -> None:
        self._t = obs.t
        try:
            self._print(obs)
        finally:
            self._t = None

    def _print(self, obs: O.Observation) -> None:
        if self._open_text and type(obs) is O.BlockDelta:
            parts = self._open_text.get((obs.turn, obs.attempt, obs.index))
            if parts is not None and len(parts) < _TEXT_KEEP:
                parts.append(obs.fragment)
        buffered = self.buffering(obs)
        if buffered is None and type(obs) in _SILENT:  # (most observations: a stream's reads, events and deltas)
            return
        t = f"{obs.t:7.3f}s"
        if buffered is not None:
            self.p(f"{t}   {buffered.severity.upper()} {buffered.code}: {buffered.message}")
        if type(obs) in _SILENT:
            return
        if self._conversation(obs, t):
            return
        tag = self._tag(obs)
        if tag:
            t = f"{t} {tag}".rstrip()
        if isinstance(obs, O.TurnStarted) and tag:
            ct = self.where[obs.turn][1]
            self.p(f"{t} turn {ct + 1} (#{obs.turn + 1})")
        elif isinstance(obs, O.LoopStarted):
            src = obs.source
            if src == self._modelless and obs.model:  # (a proxy: its first request named the model of the start)
                self._modelless = None
                self.p(f"{t} model  {obs.model}")
                return
            self._modelless = src if not obs.model else None
            what = f"{src.get('type')} {src.get('name') or src.get('file') or ''}".rstrip()
            conv = src.get("conversation")
            self._loop_conversation = conv if isinstance(conv, str) else None
            self.p(f"{t} {self._loop_tag()}start  {what}" + (f" model {obs.model}" if obs.model else ""))
            for w in src.get("warnings") or []:  # what the source could not do as recorded (e.g. a clamped gap)
                self.p(f"{t}   warning: {w}")
        elif isinstance(obs, O.TurnStarted):
            self.p(f"{t} turn {obs.turn + 1}")
        elif isinstance(obs, O.AttemptStarted):
            self.p(f"{t}   attempt {obs.attempt + 1}: POST {obs.url}")
        elif isinstance(obs, O.ResponseStarted):
            self.p(f"{t}   HTTP {obs.status}")
        elif isinstance(obs, O.HttpTryFailed):
            what = O.try_failure_text(obs.status, obs.error_type, obs.connection_error)
            if obs.retry_in is not None:
                self.p(f"{t}   {what} · SDK retries in {duration(obs.retry_in)}")
            else:
                msg = f": {short_text(obs.error_message, 200, ellipsis='...')}" if obs.error_message else ""
                self.p(f"{t}   {what}{msg} · not retried")
        elif isinstance(obs, O.BlockOpened):
            what = f" {obs.name} {obs.block_id}" if obs.name else ""
            self.p(f"{t}   block {obs.index} open: {obs.block_type}{what}")
            if obs.block_type == "text":
                start = obs.start.get("text") if isinstance(obs.start, dict) else None
                self._open_text[(obs.turn, obs.attempt, obs.index)] = [start] if isinstance(start, str) else []
        elif isinstance(obs, O.BlockClosed):
            self._open_text.pop((obs.turn, obs.attempt, obs.index), None)
            c = obs.content
            if c.get("type") == "text":
                self.p(f"{t}   block {obs.index} text: {short_text(c.get('text', ''), 300, ellipsis='...')!r}")
            elif obs.input_error:
                self.p(f"{t}   block {obs.index} closed: INPUT ERROR {obs.input_error}")
            else:
                self.p(f"{t}   block {obs.index} closed")
        elif isinstance(obs, O.ToolUse):
            self.p(f"{t}   tool_use {obs.name}({short(obs.input, 120, ellipsis='...')}) {obs.id}")
        elif isinstance(obs, O.ToolStateChanged):
            extra = f": {obs.error}" if obs.error else ""
            # the proxy's: another harness ran it; the state is read off the wire, never measured (unknown: no next
            # request came, the error says why)
            if obs.inferred and obs.state != "unknown":
                extra += (
                    " (inferred from the next request)" if obs.state != "running" else " (inferred: its block closed)"
                )
            self.p(f"{t}   tool {obs.name} {obs.id[-8:]} -> {obs.state}{extra}")
        elif isinstance(obs, O.DiagnosticRaised):
            d = obs.diagnostic
            if d.severity != "info":
                self.p(f"{t}   {d.severity.upper()} {d.code}: {d.message}")
        elif isinstance(obs, O.MessageUpdated):
            # (an OpenAI stream may update the message twice: a finish, then its usage chunk: the stop reason is said
            # once, the usage that came after it on a line of its own)
            said = (obs.turn, obs.attempt, obs.stop_reason, obs.usage)
            if said != self._last_stop:
                # (no usage yet, or none sent: a chat stream without stream_options.include_usage: said in words,
                # not as `usage {}`)
                usage = short(obs.usage, 200, ellipsis="...") if obs.usage else "not sent (yet)"
                if self._last_stop is not None and said[:3] == self._last_stop[:3]:
                    self.p(f"{t}   usage {usage}")
                else:
                    self.p(f"{t}   stop_reason {obs.stop_reason} usage {usage}")
                self._last_stop = said
        elif isinstance(obs, O.AttemptEnded):
            for key in [k for k in self._open_text if k[:2] == (obs.turn, obs.attempt)]:
                text = "".join(self._open_text.pop(key))
                self.p(f"{t}   block {key[2]} text (never closed): {short_text(text, 300, ellipsis='...')!r}")
            if obs.status != "complete":
                self.p(f"{t}   attempt {obs.attempt + 1} {obs.status}: {obs.reason}")
        elif isinstance(obs, O.LoopStateChanged):
            if obs.state == LoopState.WAITING_RETRY and not obs.detail.startswith(("HTTP ", "connection failed")):
                # (the SDK's waits are already on their HttpTryFailed line; a loop's state names no turn: a replay of
                # many conversations names the one its loop replays)
                self.p(f"{t} {self._loop_tag()}".rstrip() + f"   {obs.detail}")
        elif isinstance(obs, O.TextFinish):
            self.p(f"{t} answer:")
            for line in obs.text.splitlines():
                self.p(f"    {line}")
        elif isinstance(obs, O.ExchangeForwarded):  # a side request: one line, never a turn
            self.side_requests += 1
            conv = f"[{obs.conversation}] " if obs.conversation and len(self.conversations) > 1 else ""
            status = "-" if obs.status is None else obs.status
            end = "" if obs.end in (None, "complete") else f" {obs.end}"
            self.p(f"{t} {conv}{obs.method} {obs.path} -> {status}{end} · {obs.bytes} B · not a turn: {obs.side}")
        elif isinstance(obs, O.LoopFinished):
            msg = f" ({obs.error})" if obs.error else ""
            n = self.side_requests
            side = f", {n} side request{'s' if n != 1 else ''}" if n else ""
            tag = self._loop_tag()  # (a replay of many conversations: each loop's end is its conversation's)
            self.p(f"{t} {tag}{obs.status} after {obs.turns} turn{'s' if obs.turns != 1 else ''}{side}{msg}")

    # --- conversations (a proxy's, or a replay of many) ----------------------------------------------------------
    def _conversation(self, obs: O.Observation, t: str) -> bool:
        """Keep what says which conversation a turn is; True when ``obs`` needs no line of its own."""
        if isinstance(obs, O.ConversationAssigned):
            self.where[obs.turn] = (obs.conversation, obs.conversation_turn)
            while len(self.where) > self.KEEP_TURNS:
                self.where.popitem(last=False)
            if len(self.conversations) < self.KEEP_TURNS:
                self.conversations.add(obs.conversation)
            return True
        if isinstance(obs, O.LoopStarted) and isinstance(obs.source.get("conversation"), str):
            many = obs.source.get("conversations")  # a replay of many conversations: one loop each, all named
            if isinstance(many, list):
                self.conversations.update(c for c in many[: self.KEEP_TURNS] if isinstance(c, str))
            self.p(f"{t} conversation {obs.source['conversation']}")
        return False

    def _loop_tag(self) -> str:
        """``[c2] `` for a line of the loop that replays conversation c2 of many (its start, its end); else ""."""
        conv = self._loop_conversation
        return f"[{conv}] " if conv is not None and len(self.conversations) > 1 else ""

    def _tag(self, obs: O.Observation) -> str:
        """``[c2] `` for an observation of a turn of conversation c2, when there is more than one; else ""."""
        if len(self.conversations) < 2:
            return ""
        turn = getattr(obs, "turn", None)
        found = self.where.get(turn) if isinstance(turn, int) else None
        return f"[{found[0]}] " if found is not None else ""


class JsonPrinter:
    """One JSON object per observation per line (`--headless --json`)."""

    KEEP_TURNS = 10_000  # global turns whose conversation is remembered (the oldest forgotten first)

    def __init__(self, sink: LineSink) -> None:
        # a proxy's conversations (ConversationAssigned): global turn -> (conversation, its turn there); once more
        # than one was seen, the lines of a turn name it: "[c2] turn 1"
        self.where: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self.conversations: set[str] = set()
        self.sink = sink

    def __call__(self, obs: O.Observation) -> None:
        self.sink.write(exactjson.dumps(obs.to_json(), option=orjson.OPT_NON_STR_KEYS) + b"\n")

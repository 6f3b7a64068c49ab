"""The recorder: an observation subscriber that writes a recording (every read with its timing).

Every HTTP try is its own recorded attempt. When the SDK retried a try by itself (a 429, a 529, a connection
refused: ``HttpTryFailed``), that try is written as an attempt of its own (request, response, one read with the error
body, ``end`` with status ``http_error`` or ``connection_error``), and the loop's later tries and attempts of the turn
are numbered after it. A recording without failed tries numbers attempts exactly as the loop does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, cast

from inspector.core import exactjson
from inspector.core.redaction import usable_secrets
from inspector.observe import observations as O
from inspector.record.recording import Recording, RecordingWriter

log = logging.getLogger("inspector.record")

# Observations kept in the recording beside the raw reads (enough to replay tool timing and results, and the SDK's
# retries of failed tries).
KEPT = (
    O.LoopStarted,
    O.ToolStateChanged,
    O.ToolResult,
    O.TurnEnded,
    O.HttpTryFailed,
    O.LoopFinished,
    O.StreamHeld,  # the timing analysis leaves the user's holds out
    O.StreamReleased,
    # the proxy's: what it inferred of another harness's tools, the faults it injected, its notes, other requests
    O.ToolExecutionInferred,
    O.FaultInjected,
    O.ProxyNote,
    O.ExchangeForwarded,
    O.ConversationAssigned,  # the conversation of every attempt (dump and replay group turns by it)
)
# the observation types that write no line (a stream's events and deltas, blocks, messages...): most of what a
# watched stream publishes; returned from at once (exact types: a subclass takes the isinstance tests)
_UNRECORDED = frozenset(
    c
    for c in vars(O).values()
    if isinstance(c, type)
    and issubclass(c, O.Observation)
    and not issubclass(c, (*KEPT, O.ReadReceived, O.AttemptStarted, O.ResponseStarted, O.AttemptEnded))
)


class RecordingTarget(Protocol):
    """Where a Recorder writes its lines: a RecordingWriter (the file), or anything with its methods
    (``inspector.record.timing.RecordingBuilder`` keeps the recording in memory)."""

    @property
    def closed(self) -> bool: ...

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None: ...

    def response(self, turn: int, attempt: int, t: float, status: int, headers: Any) -> None: ...

    def read(self, turn: int, attempt: int, t: float, data: bytes) -> None: ...

    def end(self, turn: int, attempt: int, t: float, status: str, reason: str | None = None) -> None: ...

    def observation(self, obj: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class _BatchedFile:
    """The recording's file when writes are batched: lines are buffered and reach the disk at :meth:`sync` (the
    recorder calls it once per turn of the event loop that wrote), not at every line as RecordingWriter's own
    ``flush()`` would; ``flush()`` is therefore a no-op."""

    def __init__(self, target: IO[bytes], owns: bool) -> None:
        self.target = target
        self.owns = owns
        self.closed = False

    def write(self, data: bytes) -> int:
        return self.target.write(data)

    def flush(self) -> None:
        pass

    def sync(self) -> None:
        self.target.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.target.flush()
        finally:
            if self.owns:
                self.target.close()


class Recorder:
    """Subscribe with `bus.subscribe(recorder)`. Writes one flushed line per observation it keeps.

    A write that fails (a full disk, a file too large) stops the recording: `error` says why, in one line, and
    `on_error` is called once with it; the session goes on.

    ``batched``: lines reach the disk once per turn of the event loop (a producer that publishes a batch of reads at
    once, the proxy, costs one flush per batch), not after every line; without a running event loop, at once. The
    file is flushed at ``close()`` whatever happens.

    Redaction is not the recorder's: it writes what the bus carries, and every producer publishes through one
    ``RedactingPublisher``. ``secrets`` are a second line of defence for a bus fed directly."""

    def __init__(
        self,
        path_or_file: str | Path | IO[bytes] | None = None,
        *,
        source: dict[str, Any] | None = None,
        secrets: Sequence[str] = (),
        target: RecordingTarget | None = None,
        batched: bool = False,
        on_error: Callable[[str], None] | None = None,
        recorded: Recording | None = None,
        closes_at_loop_end: bool = True,
    ) -> None:
        """Writes to a file (a RecordingWriter), or to `target`: anything with RecordingWriter's methods
        (`inspector.record.timing.RecordingBuilder` keeps the recording in memory). ``recorded``: the recording a
        replay replays, when the observations are that replay's: the lines take its recorded times, not the replay's
        clock (``inspector.record.retime``: an export of a replay). ``closes_at_loop_end``: the recording is closed
        at the first ``LoopFinished`` (a session's run: its file complete when its loop ends); False: at
        :meth:`close` only, for observations of several loops (an export of a replay of many conversations: a
        ``LoopStarted`` ... ``LoopFinished`` per conversation, every one of them written)."""
        self._file: _BatchedFile | None = None
        if target is None:
            if path_or_file is None:
                raise ValueError("Recorder needs a path, a file or a target")
            out: Any = path_or_file
            if batched:
                if isinstance(path_or_file, (str, Path)):
                    out = self._file = _BatchedFile(open(path_or_file, "wb", buffering=1 << 16), owns=True)
                else:
                    out = self._file = _BatchedFile(path_or_file, owns=False)
            try:
                # a key too short to redact safely (a relay's "dummy") is still never written: credential headers
                # are dropped
                target = RecordingWriter(cast(IO[bytes], out), source=source or {}, secrets=usable_secrets(secrets))
                if self._file is not None:
                    self._file.sync()
            except BaseException:
                if self._file is not None:
                    try:
                        self._file.close()
                    except OSError:
                        log.debug("closing a recording that failed to open failed too", exc_info=True)
                raise
        if recorded is not None:
            from inspector.record.retime import RecordedTimes

            target = RecordedTimes(target, recorded)
        self.writer: RecordingTarget = target
        self.label = str(path_or_file) if isinstance(path_or_file, (str, Path)) else "the recording"
        self.error: str | None = None
        self.on_error = on_error
        self._sync_handle: asyncio.Handle | None = None
        self._sent: dict[tuple[int, int], float] = {}  # (turn, recorded attempt) -> its request's loop time
        self._offset: dict[int, int] = {}  # turn -> recorded attempts inserted for failed tries
        self._tries: dict[tuple[int, int], int] = {}  # (turn, loop attempt) -> the try whose request is written
        self._started: dict[tuple[int, int], O.AttemptStarted] = {}  # while the attempt is under way
        self._ended: set[tuple[int, int]] = set()  # (turn, recorded attempt) whose end line is written
        self._first: dict[tuple[int, int], int] = {}  # (turn, loop attempt) -> its first recorded attempt
        self.closes_at_loop_end = closes_at_loop_end

    def _rec(self, turn: int, attempt: int) -> int:
        return attempt + self._offset.get(turn, 0)

    def _to_try(
        self, turn: int, attempt: int, try_index: int, t_sent: float | None, headers: dict[str, Any] | None = None
    ) -> int:
        """The recorded attempt of a loop attempt's try `try_index`; writes its request line when it is new (with
        that try's own request headers when known: the SDK's retry count differs from try to try)."""
        cur = self._tries.get((turn, attempt))
        started = self._started.get((turn, attempt))
        if cur is None or started is None or try_index <= cur:
            return self._rec(turn, attempt)
        self._offset[turn] = self._offset.get(turn, 0) + (try_index - cur)
        self._tries[(turn, attempt)] = try_index
        rec = self._rec(turn, attempt)
        t = started.t if t_sent is None else t_sent
        self._sent[(turn, rec)] = t
        sent = started.headers if headers is None else headers
        self.writer.request(turn, rec, t, started.method, started.url, sent, started.body)
        return rec

    def __call__(self, obs: O.Observation) -> None:
        if type(obs) in _UNRECORDED or self.error is not None or self.writer.closed:
            return
        try:
            self._write(obs)
        except (OSError, ValueError) as e:  # ValueError: the file was closed under the writer
            self._failed(e)
            return
        if self._file is not None and self._sync_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.sync()
                return
            self._sync_handle = loop.call_soon(self.sync)

    def sync(self) -> None:
        """Batched: what was written reaches the disk now."""
        self._sync_handle = None
        if self._file is None or self.error is not None or self.writer.closed:
            return
        try:
            self._file.sync()
        except (OSError, ValueError) as e:
            self._failed(e)

    def _failed(self, e: OSError | ValueError) -> None:
        if self.error is not None:
            return
        if isinstance(e, OSError):
            why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        else:
            why = str(e) or type(e).__name__
        self.error = f"recording stopped: cannot write {self.label}: {why}"
        try:
            self.writer.close()
        except (OSError, ValueError):
            log.debug("closing a failed recording failed too", exc_info=True)
        if self._file is not None:
            try:
                self._file.close()
            except (OSError, ValueError):
                log.debug("closing a failed recording failed too", exc_info=True)
        if self.on_error is not None:
            try:
                self.on_error(self.error)
            except Exception:  # a warning callback must not break the producer
                log.debug("the recording's on_error callback failed", exc_info=True)

    def _write(self, obs: O.Observation) -> None:
        w = self.writer
        if isinstance(obs, O.ReadReceived):
            w.read(obs.turn, self._rec(obs.turn, obs.attempt), obs.t_request, obs.data)
        elif isinstance(obs, O.AttemptStarted):
            rec = self._rec(obs.turn, obs.attempt)
            self._sent[(obs.turn, rec)] = obs.t
            self._first[(obs.turn, obs.attempt)] = rec
            self._tries[(obs.turn, obs.attempt)] = 0
            self._started[(obs.turn, obs.attempt)] = obs
            w.request(obs.turn, rec, obs.t, obs.method, obs.url, obs.headers, obs.body)
        elif isinstance(obs, O.ResponseStarted):
            rec = self._to_try(obs.turn, obs.attempt, obs.try_index, obs.t_sent, obs.request_headers)
            t0 = self._sent.get((obs.turn, rec), obs.t)
            w.response(obs.turn, rec, obs.t - t0, obs.status, obs.headers)
        elif isinstance(obs, O.HttpTryFailed):
            rec = self._to_try(obs.turn, obs.attempt, obs.try_index, obs.t_sent, obs.request_headers)
            t0 = self._sent.get((obs.turn, rec), obs.t_sent)
            w.observation(obs.to_json())
            if obs.status is not None:
                w.response(obs.turn, rec, obs.t - t0, obs.status, obs.headers)
                if obs.body is not None:
                    w.read(obs.turn, rec, obs.t - t0, _body_bytes(obs.body))
            what = O.try_failure_text(obs.status, obs.error_type, obs.connection_error)
            reason = f"{what}: {obs.error_message}" if obs.error_message else what
            status = "http_error" if obs.status is not None else "connection_error"
            w.end(obs.turn, rec, obs.t - t0, status, reason)
            self._ended.add((obs.turn, rec))
        elif isinstance(obs, O.AttemptEnded):
            rec = self._rec(obs.turn, obs.attempt)
            if (obs.turn, rec) in self._ended:
                if obs.status != "cancelled":
                    self._forget(obs.turn, obs.attempt, rec)
                    return  # the SDK gave up on this try: its end line is written
                # cancelled while the SDK waited to retry: the try it would have sent, cancelled before a response
                cur = self._tries.get((obs.turn, obs.attempt), 0)
                rec = self._to_try(obs.turn, obs.attempt, cur + 1, obs.t)
            t0 = self._sent.get((obs.turn, rec), obs.t)
            w.end(obs.turn, rec, obs.t - t0, obs.status, obs.reason)
            self._forget(obs.turn, obs.attempt, rec)
        elif isinstance(obs, KEPT):
            if type(w) is RecordingWriter:
                w.observation_of(obs)  # (the same line, without the Python walk of to_json)
            else:
                w.observation(obs.to_json())
            if isinstance(obs, O.LoopFinished):
                self._started.clear()
                self._first.clear()
                if self.closes_at_loop_end:
                    w.close()

    def _forget(self, turn: int, attempt: int, rec: int) -> None:
        """An attempt ended: what was kept to number and time its tries goes (a proxy records attempts without end,
        its memory must not grow with them). Later attempts of the turn are numbered after ``rec``."""
        self._started.pop((turn, attempt), None)
        self._tries.pop((turn, attempt), None)
        first = self._first.pop((turn, attempt), rec)
        for r in range(min(first, rec), rec + 1):
            self._sent.pop((turn, r), None)
            self._ended.discard((turn, r))

    def close(self) -> None:
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self.error is not None:
            return
        try:
            self.writer.close()
            if self._file is not None:
                self._file.close()
        except (OSError, ValueError) as e:
            self._failed(e)


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8", "replace")
    return exactjson.dumps(body)


# what the end of a recording says when its session was stopped before it started (nothing ran, nothing recorded)
NOTHING_RAN = "stopped before it started: nothing ran"


def nothing_ran_end(t: float = 0.0) -> O.LoopFinished:
    """The end of a session stopped before it ran: cancelled, 0 turns, ``NOTHING_RAN`` (what :func:`nothing_ran`
    recognises)."""
    return O.LoopFinished(t, "cancelled", 0, [], [], NOTHING_RAN)


def write_nothing_ran(path: str | Path, source: dict[str, Any]) -> None:
    """The recording of a session stopped before it was made (a dashboard quit while it started): its header, then
    its end, cancelled, ``NOTHING_RAN`` (OSError: it cannot be written). Not an empty file, which `dump` and replay
    cannot tell from a stream that carried nothing."""
    with RecordingWriter(path, source=source) as w:
        w.observation_of(nothing_ran_end())


def nothing_ran(recording: Recording) -> bool:
    """True for a recording that :func:`write_nothing_ran` wrote: no attempt, its end saying nothing ran."""
    return not recording.turns and any(
        o.get("type") == "loop_finished" and o.get("error") == NOTHING_RAN for o in recording.observations
    )

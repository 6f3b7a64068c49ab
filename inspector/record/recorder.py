"""The recorder: an observation subscriber that writes a recording (every read with its timing).

Every HTTP try is its own recorded attempt. When the SDK retried a try by itself (a 429, a 529, a connection
refused: ``HttpTryFailed``), that try is written as an attempt of its own (request, response, one read with the error
body, ``end`` with status ``http_error`` or ``connection_error``), and the loop's later tries and attempts of the turn
are numbered after it. A recording without failed tries numbers attempts exactly as the loop does.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from inspector.core import exactjson
from inspector.core.redaction import usable_secrets
from inspector.observe import observations as O
from inspector.record.recording import RecordingWriter

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
)


class Recorder:
    """Subscribe with `bus.subscribe(recorder)`. Writes one flushed line per observation it keeps.

    A write that fails (a full disk) stops the recording: `error` says why, in one line; the session goes on."""

    def __init__(
        self,
        path_or_file: str | Path | IO[bytes] | None = None,
        *,
        source: dict | None = None,
        secrets: Sequence[str] = (),
        target: Any = None,
    ) -> None:
        """Writes to a file (a RecordingWriter), or to `target`: anything with RecordingWriter's methods
        (`inspector.record.timing.RecordingBuilder` keeps the recording in memory)."""
        if target is None:
            if path_or_file is None:
                raise ValueError("Recorder needs a path, a file or a target")
            # a key too short to redact safely (a relay's "dummy") is still never written: credential headers
            # are dropped
            target = RecordingWriter(path_or_file, source=source or {}, secrets=usable_secrets(secrets))
        self.writer = target
        self.label = str(path_or_file) if isinstance(path_or_file, (str, Path)) else "the recording"
        self.error: str | None = None
        self._sent: dict[tuple[int, int], float] = {}  # (turn, recorded attempt) -> its request's loop time
        self._offset: dict[int, int] = {}  # turn -> recorded attempts inserted for failed tries
        self._tries: dict[tuple[int, int], int] = {}  # (turn, loop attempt) -> the try whose request is written
        self._started: dict[tuple[int, int], O.AttemptStarted] = {}  # while the attempt is under way
        self._ended: set[tuple[int, int]] = set()  # (turn, recorded attempt) whose end line is written

    def _rec(self, turn: int, attempt: int) -> int:
        return attempt + self._offset.get(turn, 0)

    def _to_try(
        self, turn: int, attempt: int, try_index: int, t_sent: float | None, headers: dict | None = None
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
        if self.error is not None or self.writer.closed:
            return
        try:
            self._write(obs)
        except OSError as e:
            self._failed(e)

    def _failed(self, e: OSError) -> None:
        why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        self.error = f"recording stopped: cannot write {self.label}: {why}"
        try:
            self.writer.close()
        except OSError:
            log.debug("closing a failed recording failed too", exc_info=True)

    def _write(self, obs: O.Observation) -> None:
        w = self.writer
        if isinstance(obs, O.ReadReceived):
            w.read(obs.turn, self._rec(obs.turn, obs.attempt), obs.t_request, obs.data)
        elif isinstance(obs, O.AttemptStarted):
            rec = self._rec(obs.turn, obs.attempt)
            self._sent[(obs.turn, rec)] = obs.t
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
                    self._started.pop((obs.turn, obs.attempt), None)
                    return  # the SDK gave up on this try: its end line is written
                # cancelled while the SDK waited to retry: the try it would have sent, cancelled before a response
                cur = self._tries.get((obs.turn, obs.attempt), 0)
                rec = self._to_try(obs.turn, obs.attempt, cur + 1, obs.t)
            self._started.pop((obs.turn, obs.attempt), None)
            t0 = self._sent.get((obs.turn, rec), obs.t)
            w.end(obs.turn, rec, obs.t - t0, obs.status, obs.reason)
            self._ended.add((obs.turn, rec))
        elif isinstance(obs, KEPT):
            w.observation(obs.to_json())
            if isinstance(obs, O.LoopFinished):
                self._started.clear()
                w.close()

    def close(self) -> None:
        try:
            self.writer.close()
        except OSError as e:
            if self.error is None:
                self._failed(e)


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8", "replace")
    return exactjson.dumps(body)

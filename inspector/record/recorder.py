"""The recorder: an observation subscriber that writes a recording (every read with its timing)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from inspector.agent import observations as O
from inspector.core.redaction import usable_secrets
from inspector.record.recording import RecordingWriter

# Observations kept in the recording beside the raw reads (enough to replay tool timing and results).
KEPT = (
    O.LoopStarted,
    O.ToolStateChanged,
    O.ToolResult,
    O.TurnEnded,
    O.LoopFinished,
    O.StreamHeld,  # the timing analysis leaves the user's holds out
    O.StreamReleased,
)


class Recorder:
    """Subscribe with `bus.subscribe(recorder)`. Writes one flushed line per observation it keeps."""

    def __init__(
        self,
        path_or_file: str | Path | IO[bytes] | None = None,
        *,
        source: dict | None = None,
        secrets: list[str] = (),
        target: Any = None,
    ) -> None:
        """Writes to a file (a RecordingWriter), or to `target`: anything with RecordingWriter's methods
        (`inspector.record.timing.RecordingBuilder` keeps the recording in memory)."""
        if target is None:
            # a key too short to redact safely (a relay's "dummy") is still never written: credential headers
            # are dropped
            secrets = usable_secrets(secrets)
            target = RecordingWriter(path_or_file, source=source or {}, secrets=secrets)
        self.writer = target
        self._sent: dict[tuple[int, int], float] = {}

    def __call__(self, obs: O.Observation) -> None:
        w = self.writer
        if w.closed:
            return
        if isinstance(obs, O.ReadReceived):
            w.read(obs.turn, obs.attempt, obs.t_request, obs.data)
        elif isinstance(obs, O.AttemptStarted):
            self._sent[(obs.turn, obs.attempt)] = obs.t
            w.request(obs.turn, obs.attempt, obs.t, obs.method, obs.url, obs.headers, obs.body)
        elif isinstance(obs, O.ResponseStarted):
            t0 = self._sent.get((obs.turn, obs.attempt), obs.t)
            w.response(obs.turn, obs.attempt, obs.t - t0, obs.status, obs.headers)
        elif isinstance(obs, O.AttemptEnded):
            t0 = self._sent.get((obs.turn, obs.attempt), obs.t)
            w.end(obs.turn, obs.attempt, obs.t - t0, obs.status, obs.reason)
        elif isinstance(obs, KEPT):
            w.observation(obs.to_json())
            if isinstance(obs, O.LoopFinished):
                w.close()

    def close(self) -> None:
        self.writer.close()

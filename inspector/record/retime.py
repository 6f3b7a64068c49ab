"""A replay's lines with the recorded times: what an export of a replay writes (the dashboard's `e`).

A replay serves the recorded reads and tool results at its own pace (its speed, its clock, the user's pauses: at
max speed no silence is left), so the observations it publishes carry the replay's times. A recording made of them
as they are (``Recorder``) holds those times: its timing verdict, its tools' run times and a replay of it are then
the replay's, not the recording's. :class:`RecordedTimes` stands between the ``Recorder`` and the file and gives
every line the time the replayed recording has for it, so the export says what ``inspector dump`` says of the
recording, whatever the replay's speed:

- an attempt's request, response and end: the recorded ones (by turn and attempt, as the ``Recorder`` numbers them,
  the SDK's failed tries included); its reads: the recorded read of the same rank. A time the recording does not have
  takes the time of the attempt's last line written: an end where the replay was cancelled mid-stream, the reads of
  a recording without per-read timing (plain SSE text; a HAR export: at its response's time). An attempt the
  recording does not have keeps the replay's times (there are no others). A recorded client cancel (``cancelled``:
  closed and resent), which the replay ends as the client giving up (``failed``), keeps its recorded status;
- an observation line (a tool's states, its result, the end of a turn, the loop's start and end, a failed try): the
  recorded observation it stands for (the same type, turn, attempt, tool id and state, ...: in order), its ``t`` and
  its other times (a tool's ``times``, a failed try's ``t_sent`` and ``retry_in``); the times of the tools in
  ``loop_finished`` are the recorded ones of their states. One the recording does not have (the user cancelled the
  replay) takes the recorded time the replay had reached;
- the stream's holds: the replay's own (the user paused the replay) are left out, they are not in the recorded
  times; the recording's holds are written as far as the replay got, so the timing leaves the recorded pauses out
  as ``dump --timing`` does.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from inspector.record.reader import RecordedAttempt, Recording, SpilledReads

if TYPE_CHECKING:
    from inspector.record.recorder import RecordingTarget

_HOLDS = ("stream_held", "stream_released")
# what identifies an observation line among those of its type (with its rank among the same)
_KEYS: dict[str, tuple[str, ...]] = {
    "loop_started": (),
    "loop_finished": ("status",),
    "turn_ended": ("turn", "outcome"),
    "tool_state": ("turn", "attempt", "id", "state"),
    "tool_result": ("turn", "attempt", "tool_use_id", "state"),
    "http_try_failed": ("turn", "attempt", "try_index", "status"),
    "conversation": ("turn", "conversation", "attempt"),
    "tool_inferred": ("turn", "attempt", "tool_use_id", "status"),
    "fault_injected": ("turn", "attempt", "fault"),
    "proxy_note": ("turn", "attempt", "note"),
    "proxy_exchange": ("method", "path", "status"),
}
# an observation's times besides ``t``, taken from the recorded one it stands for
_TIMES: dict[str, tuple[str, ...]] = {
    "tool_state": ("times",),
    "http_try_failed": ("t_sent", "retry_in"),
    "tool_inferred": ("request_t", "block_stop_t", "stream_end_t", "since_block_stop", "since_stream_end"),
}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def ended_as_recorded(recorded_end: Any, status: Any, replayed_reads: int, recorded_reads: int) -> bool:
    """Whether a replayed attempt that ended with ``status`` after ``replayed_reads`` reads ended as the recording
    has it (its recorded end and every recorded read stand for it): the same status, or every recorded read replayed
    (an attempt the client closed and resent: recorded 'cancelled', replayed as the client giving up then). Else the
    replay ended elsewhere (the user cancelled it mid-stream): it has the recorded reads it got, and its own end at
    the recorded time of the last of them. The export (:class:`RecordedTimes`) and the timing view
    (``inspector.record.timing.as_far_as``) both judge by this."""
    end = recorded_end if isinstance(recorded_end, dict) else {}
    return end.get("status") == status or replayed_reads >= recorded_reads


def _key(obj: dict[str, Any]) -> Hashable:
    kind = obj.get("type")
    fields = _KEYS.get(str(kind))
    if fields is None:
        return None
    return (kind, *(v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for v in map(obj.get, fields)))


class RecordedTimes:
    """A ``RecordingTarget`` in front of ``target``: the lines of a replay of ``recording``, written with the
    recording's own times (see the module's docstring)."""

    def __init__(self, target: RecordingTarget, recording: Recording) -> None:
        self.target = target
        self._attempts: dict[tuple[int, int], RecordedAttempt] = {(a.turn, a.attempt): a for a in recording.attempts()}
        self._read_times: dict[tuple[int, int], list[float | None]] = {}
        self._reads: dict[tuple[int, int], int] = {}  # (turn, attempt) -> reads written
        self._sent: dict[tuple[int, int], float] = {}  # (turn, attempt) -> its recorded request time
        self._last: dict[tuple[int, int], float] = {}  # (turn, attempt) -> its last recorded line's time (relative)
        self._observations: dict[Hashable, deque[dict[str, Any]]] = {}
        holds: list[dict[str, Any]] = []
        for o in recording.observations:
            if not isinstance(o, dict):
                continue
            if o.get("type") in _HOLDS:
                if _num(o.get("t")) is not None:
                    holds.append(o)
                continue
            k = _key(o)
            if k is not None:
                self._observations.setdefault(k, deque()).append(o)
        self._holds = deque(holds)
        # (turn, attempt, tool id) -> its states' recorded times (the tool_state lines written so far)
        self._tools: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
        self.reached = 0.0  # the recorded time the replay has reached (since the start of the recording)

    # -- the RecordingTarget protocol

    @property
    def closed(self) -> bool:
        return self.target.closed

    def close(self) -> None:
        self.target.close()

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None:
        key = (turn, attempt)
        orig = self._attempts.get(key)
        recorded = _num((orig.request or {}).get("t")) if orig is not None else None
        sent = recorded if recorded is not None else self.reached
        self._sent[key], self._reads[key], self._last[key] = sent, 0, 0.0
        self._reach(sent)
        self.target.request(turn, attempt, sent, method, url, headers, body)

    def response(self, turn: int, attempt: int, t: float, status: int, headers: Any) -> None:
        orig = self._attempts.get((turn, attempt))
        if orig is not None:
            t = self._relative(turn, attempt, (orig.response or {}).get("t"))
        self.target.response(turn, attempt, t, status, headers)

    def read(self, turn: int, attempt: int, t: float, data: bytes) -> None:
        key = (turn, attempt)
        orig = self._attempts.get(key)
        if orig is not None:
            times = self._read_times.get(key)
            if times is None:
                reads: Any = orig.reads
                times = self._read_times[key] = (
                    reads.times() if isinstance(reads, SpilledReads) else [r.t for r in reads]
                )
            i = self._reads.get(key, 0)
            self._reads[key] = i + 1
            t = self._relative(turn, attempt, times[i] if i < len(times) else None)
        self.target.read(turn, attempt, t, data)

    def end(self, turn: int, attempt: int, t: float, status: str, reason: str | None = None) -> None:
        orig = self._attempts.get((turn, attempt))
        if orig is not None:
            end = orig.end or {}
            # the recorded end, when the replay ended as recorded; else where it got
            same = ended_as_recorded(end, status, self._reads.get((turn, attempt), 0), len(orig.reads))
            t = self._relative(turn, attempt, end.get("t") if same else None)
            if same and end.get("status") == "cancelled" and status != "cancelled":
                # a recorded client cancel (closed, then resent), which the replay ends as the client giving up
                # (failed): the export keeps the recorded status and reason, as dump --timing of the recording says
                status, reason = "cancelled", end.get("reason") if isinstance(end.get("reason"), str) else reason
        self.target.end(turn, attempt, t, status, reason)

    def observation(self, obj: dict[str, Any]) -> None:
        kind = str(obj.get("type"))
        if kind in _HOLDS:
            return  # the user paused the replay: not in the recorded times (the recording's holds are written)
        line = dict(obj)
        k = _key(obj)
        found = self._observations.get(k) if k is not None else None
        orig = found.popleft() if found else None
        t = _num(orig.get("t")) if orig is not None else None
        if orig is not None and t is not None:
            self._reach(t)
            line.update({name: orig[name] for name in _TIMES.get(kind, ()) if name in orig})
        else:  # not in the recording: where the replay got, in recorded time
            self._emit_holds()
            t = self.reached
            if kind == "http_try_failed":
                line["t_sent"] = t
        line["t"] = t
        tool = (obj.get("turn"), obj.get("attempt"), obj.get("id"))
        if kind == "tool_state" and isinstance(obj.get("times"), dict):
            known = self._tools.setdefault(tool, {})
            if orig is None or not isinstance(line.get("times"), dict):  # (each state as recorded, else now)
                line["times"] = {s: known[s] if _num(known.get(s)) is not None else t for s in obj["times"]}
            known.update(line["times"])
        if kind == "loop_finished" and isinstance(obj.get("tools"), list):
            listed = orig.get("tools") if orig is not None else None
            recorded = {
                (x.get("turn"), x.get("attempt"), x.get("id")): x
                for x in (listed if isinstance(listed, list) else ())
                if isinstance(x, dict)
            }
            line["tools"] = [self._tool_summary(x, recorded, t) for x in obj["tools"]]
        self.target.observation(line)

    # -- internals

    def _reach(self, t: float) -> None:
        """The replay got to recorded time ``t``: the recording's holds up to there are written first."""
        self.reached = max(self.reached, t)
        self._emit_holds()

    def _emit_holds(self) -> None:
        while self._holds and (_num(self._holds[0].get("t")) or 0.0) <= self.reached:
            self.target.observation(self._holds.popleft())

    def _relative(self, turn: int, attempt: int, recorded: Any) -> float:
        """A recorded time since the attempt's request (absent: the attempt's last line's, where the replay got)."""
        key = (turn, attempt)
        t = _num(recorded)
        if t is None:
            t = self._last.get(key, 0.0)
        self._last[key] = max(self._last.get(key, 0.0), t)
        self._reach(self._sent.get(key, self.reached) + t)
        return t

    def _tool_summary(self, tool: Any, recorded: dict[tuple[Any, Any, Any], dict[str, Any]], t: float) -> Any:
        """A tool of loop_finished with its recorded times: those of the recorded loop_finished (``recorded``), else
        those of its recorded states (rounded as the loop rounds them), else where the replay got (``t``)."""
        if not isinstance(tool, dict):
            return tool
        key = (tool.get("turn"), tool.get("attempt"), tool.get("id"))
        times = self._tools.get(key, {})
        states = {
            "queued_at": times.get("queued"),
            "started_at": times.get("running"),
            "finished_at": times.get("finished_at", times.get(str(tool.get("state")))),
        }
        same = recorded.get(key, {})
        out = dict(tool)
        for name, state_t in states.items():
            if out.get(name) is None:
                continue
            got, of_state = _num(same.get(name)), _num(state_t)
            out[name] = got if got is not None else round(of_state if of_state is not None else t, 6)
        return out

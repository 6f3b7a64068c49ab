"""Timing analysis of recorded streams (``inspector dump --timing`` and the dashboard's timing panel).

Per attempt (one HTTP response): time to response headers, to the first body byte, to the first content token
(the first non-empty text / thinking / partial_json delta), to message_stop and to the last byte; the gaps between
reads and between events (with a small text histogram); events per read; the ping cadence; and a buffering verdict.
All times are seconds since the attempt's request was sent (the recording's clock).

Held intervals
==============

When the user pauses the loop or steps through the stream, the loop stops reading: bytes wait in the socket until
it reads again (``StreamHeld`` / ``StreamReleased`` observations, kept in recordings as ``obs`` lines). Those
intervals are the user's, not the stream's: every figure here is computed on the stream's own clock, where a read's
time is its time since the request minus the held seconds before it (:func:`held_intervals`, :func:`unhold`).
A burst that follows a hold (the socket's backlog, read at once) is never a held burst: a stream whose reads were
held back by the user is never called buffered for that.

The buffering rule
==================

A relay that buffers SSE (nginx ``proxy_buffering``, some serverless platforms and corporate proxies) does not change
a byte; it changes *when* bytes arrive: nothing for a long time, then many events at once, at network speed. A model
never does that by itself: it emits a few events per read, tens of milliseconds apart. So:

- a **burst** is a run of consecutive reads that each arrive less than ``BURST_GAP`` (10 ms) after the previous one
  (network speed, not token speed);
- a burst is **held** when it follows a **silence** of at least ``HELD_SILENCE`` (0.5 s) with no read at all
  (for the first burst: since the request, so a relay that also holds the headers is caught) **and** it carries at
  least ``BURST_MIN_EVENTS`` (10) SSE events. A lone delta after a pause (the model thinking, a block pause) is not
  a held burst; neither is a ping after a stall;
- the stream is **buffered** when held bursts carry at least ``BUFFERED_SHARE`` (80 %) of the body bytes, and
  **suspect** from ``SUSPECT_SHARE`` (50 %); otherwise **not buffered**. Fewer than ``MIN_EVENTS`` (10) events, a
  non-200 response, or reads without timing (HAR, plain SSE) give **inconclusive**.

Why these numbers: a real unbuffered stream has 1-3 events per read and reads 10-100 ms apart, so none of its bytes
are in held bursts (its first read, message_start, is not a big burst even after a slow TTFB). A fully buffered stream
(everything at EOF) has 100 % in one held burst; a relay that flushes every few KB (nginx's 4/8 KB buffers) produces
bursts of dozens of events after silences of about a second each, which still puts most bytes in held bursts. The
50-80 % band catches partial buffering (a relay that flushes on its own timer). The thresholds are parameters of
:func:`buffering_verdict`; the evidence lists every held burst (time, silence before it, reads, events, bytes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

import orjson

from inspector.core.fmt import count, latency, seconds
from inspector.core.redaction import clean_headers
from inspector.observe import observations as O
from inspector.record.recording import (
    FORMAT,
    VERSION,
    RecordedAttempt,
    RecordedRead,
    RecordedTurn,
    Recording,
    SpilledReads,
)
from inspector.record.retime import ended_as_recorded
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.sse import SSEDecoder

__all__ = [
    "replayed_buffering",
    "recorded_buffering",
    "as_far_as",
    "BUFFERED_SHARE",
    "BURST_GAP",
    "BURST_MIN_EVENTS",
    "HELD_SILENCE",
    "MIN_EVENTS",
    "RULE",
    "SUSPECT_SHARE",
    "RecordingBuilder",
    "analyze_attempt",
    "held_intervals",
    "unhold",
    "buffering_verdict",
    "attempt_buffering",
    "buffering_diagnostic",
    "BufferingWatch",
    "BUFFERED_CODE",
    "format_timing",
    "format_timing_json",
    "histogram",
    "recording_from_observations",
    "recording_from_plans",
    "timing_json",
]

BURST_GAP = 0.010
HELD_SILENCE = 0.5
BURST_MIN_EVENTS = 10
BUFFERED_SHARE = 0.80
SUSPECT_SHARE = 0.50
MIN_EVENTS = 10

RULE = (
    f"buffered when >= {BUFFERED_SHARE:.0%} of the body bytes arrive in held bursts (reads < "
    f"{BURST_GAP * 1000:g} ms apart, >= {BURST_MIN_EVENTS} events, after >= {HELD_SILENCE:g} s without any "
    f"read); suspect from {SUSPECT_SHARE:.0%}"
)

# gap histogram bucket edges (seconds) and labels
EDGES = (0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, math.inf)
LABELS = ("<1ms", "1-10ms", "10-50ms", "50-100ms", "100-250ms", "250-500ms", "0.5-1s", "1-2s", ">=2s")
CONTENT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


# --- small statistics --------------------------------------------------------------------------------------------


def _pct(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    k = (len(sorted_values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def _stats(values: Sequence[float]) -> dict[str, Any]:
    v = sorted(values)
    if not v:
        return {"count": 0}
    return {
        "count": len(v),
        "min": v[0],
        "median": _pct(v, 0.5),
        "p90": _pct(v, 0.9),
        "max": v[-1],
        "mean": sum(v) / len(v),
        "histogram": histogram(v),
    }


def histogram(values: Iterable[float]) -> list[dict[str, Any]]:
    """Counts per gap bucket: ``[{"label", "lo", "hi", "count"}]`` (hi None for the open last bucket)."""
    counts = [0] * len(LABELS)
    for x in values:
        for i in range(len(LABELS)):
            if x < EDGES[i + 1]:
                counts[i] += 1
                break
    return [
        {
            "label": LABELS[i],
            "lo": EDGES[i],
            "hi": None if math.isinf(EDGES[i + 1]) else EDGES[i + 1],
            "count": counts[i],
        }
        for i in range(len(LABELS))
    ]


def histogram_rows(hist: list[dict[str, Any]], width: int = 30) -> list[tuple[str, int, int]]:
    """(label, count, bar width) of a gap histogram, from its first to its last non-empty bucket (the text report
    and the dashboard's timing view draw these)."""
    nonzero = [i for i, h in enumerate(hist) if h["count"]]
    if not nonzero:
        return []
    top = max(h["count"] for h in hist)
    rows = []
    for h in hist[nonzero[0] : nonzero[-1] + 1]:
        n = h["count"]
        rows.append((str(h["label"]), n, max(1 if n else 0, round(width * n / top))))
    return rows


def _bars(hist: list[dict[str, Any]], width: int = 30, indent: str = "      ") -> list[str]:
    return [f"{indent}{label:>10} |{'#' * w:<{width}} {n}" for label, n, w in histogram_rows(hist, width)]


# --- buffering -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Read:
    t: float
    size: int
    events: int


def buffering_verdict(
    reads: Sequence[tuple[float, int, int]],
    *,
    released: Sequence[float] = (),
    burst_gap: float = BURST_GAP,
    held_silence: float = HELD_SILENCE,
    burst_min_events: int = BURST_MIN_EVENTS,
    buffered_share: float = BUFFERED_SHARE,
    suspect_share: float = SUSPECT_SHARE,
    min_events: int = MIN_EVENTS,
) -> dict[str, Any]:
    """The buffering verdict from ``(t, bytes, events completed)`` per read (t: seconds since the request).
    ``released``: times (same clock) when the user released a held stream; a burst right after one is the socket's
    backlog, never a held burst. Returns ``{"verdict", "held_share", "bursts", "held_bursts": [...], "reason", "rule"}``."""
    rs = [_Read(float(t), int(n), int(e)) for t, n, e in reads]
    total_bytes = sum(r.size for r in rs)
    total_events = sum(r.events for r in rs)
    out: dict[str, Any] = {"verdict": "inconclusive", "held_share": None, "bursts": 0, "held_bursts": [], "rule": RULE}
    if total_events < min_events or total_bytes == 0:
        out["reason"] = f"too short to judge ({total_events} events; the rule needs >= {min_events})"
        return out
    bursts: list[dict[str, Any]] = []
    prev_t = 0.0
    rel = sorted(released)
    for r in rs:
        after_hold = any(prev_t <= x <= r.t for x in rel)
        if bursts and r.t - prev_t < burst_gap and not after_hold:
            b = bursts[-1]
            b["reads"] += 1
            b["bytes"] += r.size
            b["events"] += r.events
            b["end"] = r.t
        else:
            bursts.append(
                {
                    "start": r.t,
                    "end": r.t,
                    "silence": r.t - prev_t,
                    "reads": 1,
                    "bytes": r.size,
                    "events": r.events,
                    "after_hold": after_hold,
                }
            )
        prev_t = r.t
    held = [
        b
        for b in bursts
        if b["silence"] >= held_silence and b["events"] >= burst_min_events and not b.pop("after_hold")
    ]
    held_bytes = sum(b["bytes"] for b in held)
    share = held_bytes / total_bytes
    for b in held:
        b["share"] = b["bytes"] / total_bytes
    out.update(
        bursts=len(bursts),
        held_bursts=[{k: (round(v, 6) if isinstance(v, float) else v) for k, v in b.items()} for b in held],
        held_share=share,
    )
    if share >= buffered_share:
        out["verdict"] = "buffered"
    elif share >= suspect_share:
        out["verdict"] = "suspect"
    else:
        out["verdict"] = "not buffered"
    biggest = max(held, key=lambda b: b["bytes"]) if held else None
    if biggest is not None:
        out["reason"] = (
            f"{share:.0%} of {total_bytes} bytes arrived in {len(held)} held burst(s); the largest: "
            f"{biggest['bytes']} bytes / {biggest['events']} events at {biggest['start']:.3f} s after "
            f"{biggest['silence']:.3f} s of silence"
        )
    else:
        out["reason"] = (
            f"no held burst: {len(bursts)} bursts, largest "
            f"{max(b['events'] for b in bursts)} events; content arrived as it was produced"
        )
    return out


BUFFERED_CODE = "timing.buffered"  # the verdict "buffered" as a named diagnostic (docs/diagnostics.md)


def attempt_buffering(
    reads: Sequence[tuple[float, int, int]], holds: Sequence[tuple[float, float]] = ()
) -> dict[str, Any]:
    """The verdict of one attempt from ``(t since its request, bytes, events)`` per read, as received, and the
    user's holds on the same clock (:func:`_attempt_holds`): held time is left out, as in :func:`analyze_attempt`."""
    if holds:
        reads = [(unhold(t, holds), n, e) for t, n, e in reads]
    return buffering_verdict(reads, released=[unhold(e, holds) for _s, e in holds if not math.isinf(e)])


def buffering_diagnostic(buffering: dict[str, Any]) -> Diagnostic | None:
    """``timing.buffered`` (an error: a relay between the API and the harness held the stream back, so the harness
    saw no streaming at all) when the verdict is "buffered"; None otherwise."""
    if buffering.get("verdict") != "buffered":
        return None
    why = buffering.get("reason") or ""
    return Diagnostic(
        BUFFERED_CODE,
        "error",
        f"BUFFERED: the stream arrived in held bursts, not as produced (a buffering relay?): {why}",
    )


class BufferingWatch:
    """The ``timing.buffered`` check, live, from observations (headless output): call it with every observation;
    at an attempt's end it returns the diagnostic (or None). Keeps three numbers per read of the attempts in flight."""

    def __init__(self) -> None:
        self._t0: dict[tuple[int, int], float] = {}
        self._reads: dict[tuple[int, int], list[list[float]]] = {}
        self._index: dict[tuple[int, int], dict[int, int]] = {}
        self._status: dict[tuple[int, int], int] = {}
        self._holds: list[tuple[float, float]] = []
        self._held_since: float | None = None
        self.recorded: dict[str, str] | None = None  # a replay's verdicts, judged on the recording (LoopStarted)

    def __call__(self, obs: O.Observation) -> Diagnostic | None:
        # (exact classes, one type() call: the branch taken casts, as mypy does not narrow by a stored type)
        cls = type(obs)
        if cls is O.ReadReceived:
            read = cast(O.ReadReceived, obs)
            key = (read.turn, read.attempt)
            reads = self._reads.setdefault(key, [])
            self._index.setdefault(key, {})[read.read_index] = len(reads)
            reads.append([read.t_request, len(read.data), 0])
        elif cls is O.SSEEventSeen:
            seen = cast(O.SSEEventSeen, obs)
            key = (seen.turn, seen.attempt)
            i = self._index.get(key, {}).get(seen.sse.read_index)
            if i is not None:
                self._reads[key][i][2] += 1
        elif cls is O.AttemptStarted:
            started = cast(O.AttemptStarted, obs)
            self._t0[(started.turn, started.attempt)] = obs.t
        elif cls is O.ResponseStarted:
            response = cast(O.ResponseStarted, obs)
            self._status[(response.turn, response.attempt)] = response.status
        elif cls is O.StreamHeld:
            if self._held_since is None:
                self._held_since = obs.t
        elif cls is O.StreamReleased:
            held = cast(O.StreamReleased, obs).held
            start = self._held_since if self._held_since is not None else obs.t - max(0.0, held or 0.0)
            self._holds.append((start, obs.t))
            self._held_since = None
        elif cls is O.LoopStarted:
            self.recorded = replayed_buffering(cast(O.LoopStarted, obs).source)
        elif cls is O.AttemptEnded:
            ended = cast(O.AttemptEnded, obs)
            key = (ended.turn, ended.attempt)
            reads = self._reads.pop(key, [])
            self._index.pop(key, None)
            t0 = self._t0.pop(key, None)
            status = self._status.pop(key, None)
            if self.recorded is not None:  # a replay: the recording's own times were judged (recorded_buffering)
                message = self.recorded.get(f"{key[0]}:{key[1]}")
                return None if message is None else Diagnostic(BUFFERED_CODE, "error", message)
            if not reads or status not in (None, 200):
                return None
            holds = [(max(0.0, s - t0), e - t0) for s, e in self._holds if t0 is not None and e > t0]
            return buffering_diagnostic(attempt_buffering([(t, int(n), int(e)) for t, n, e in reads], holds))
        return None


# --- per attempt -------------------------------------------------------------------------------------------------


# OpenAI Responses events whose `delta` is a content token (text, tool arguments, reasoning, refusal)
RESPONSES_CONTENT = frozenset(
    {
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.refusal.delta",
    }
)
_CHAT_CONTENT = ("content", "reasoning_content", "reasoning", "refusal")


def _chat_content(data: str) -> tuple[str, bool]:
    """A Chat Completions chunk (an SSE event without an `event:` line): a content token when a choice's delta
    carries text, reasoning, a refusal or tool-call argument characters."""
    if data.strip() == "[DONE]":
        return "[DONE]", False
    try:
        d = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "message", False
    if not isinstance(d, dict) or not isinstance(d.get("choices"), list):
        return "message", False
    name = str(d.get("object") or "message")
    for choice in d["choices"]:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        if any(isinstance(delta.get(k), str) and delta.get(k) for k in _CHAT_CONTENT):
            return name, True
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and fn["arguments"]:
                return name, True
    return name, False


def _event_content(name: str, data: str) -> tuple[str, bool]:
    """(event type, is it a content token), for both wire families."""
    if name == "ping":
        return "ping", False
    if name == "message":  # no `event:` line: an OpenAI chat chunk (Anthropic always names its events)
        return _chat_content(data)
    if name.startswith("response."):
        if name not in RESPONSES_CONTENT:
            return name, False
        try:
            d = orjson.loads(data)
        except orjson.JSONDecodeError:
            return name, False
        return name, bool(isinstance(d, dict) and isinstance(d.get("delta"), str) and d["delta"])
    if name != "content_block_delta":
        return name, False
    try:
        d = orjson.loads(data)
    except orjson.JSONDecodeError:
        return name, False
    delta = d.get("delta") if isinstance(d, dict) else None
    if not isinstance(delta, dict):
        return name, False
    key = CONTENT_DELTAS.get(str(delta.get("type")))
    return name, bool(key and delta.get(key))


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)


def held_intervals(recording: Recording) -> list[tuple[float, float]]:
    """The user's holds of the stream, in loop time (``(start, end)``; ``end`` inf while still held), from the
    recording's ``stream_held`` / ``stream_released`` observations."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    for o in recording.observations:
        kind = o.get("type")
        t = o.get("t")
        if not isinstance(t, (int, float)):
            continue
        if kind == "stream_held":
            if start is None:
                start = float(t)
        elif kind == "stream_released":
            held = o.get("held")
            s = start if start is not None else float(t) - (float(held) if isinstance(held, (int, float)) else 0.0)
            out.append((s, float(t)))
            start = None
    if start is not None:
        out.append((start, math.inf))
    return out


def unhold(t: float, holds: Sequence[tuple[float, float]]) -> float:
    """A time on the stream's own clock: ``t`` minus the held seconds before it (same clock as ``holds``)."""
    held = 0.0
    for s, e in holds:
        if s >= t:
            break
        held += min(e, t) - s
    # rounded to the nanosecond, like recorded times: a shifted time equals the unshifted one it stands for
    return round(t - held, 9) if held else t


def _attempt_holds(att: RecordedAttempt, holds: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The holds that overlap an attempt, on its clock (seconds since its request): from its request to its end (its
    last read while it has no end). A hold after the attempt ended (a pause in a later turn) is not its own."""
    t0 = (att.request or {}).get("t")
    if not holds or not isinstance(t0, (int, float)):
        return []
    end = (att.end or {}).get("t")
    if not isinstance(end, (int, float)):
        timed = [r.t for r in att.reads if r.t is not None]
        end = max(timed) if timed and att.end is not None else math.inf  # running: every later hold may be its own
    return sorted((max(0.0, s - t0), e - t0) for s, e in holds if e > t0 and s - t0 < end)


def analyze_attempt(att: RecordedAttempt, holds: Sequence[tuple[float, float]] = ()) -> dict[str, Any]:
    """The timing of one attempt (JSON-able dict; times in seconds since its request, on the stream's own clock:
    ``holds``, the user's holds in loop time from :func:`held_intervals`, are left out)."""
    resp = att.response or {}
    status = resp.get("status")
    mine = _attempt_holds(att, holds)
    if mine:
        att = RecordedAttempt(
            att.turn,
            att.attempt,
            att.request,
            _unheld_line(att.response, mine),
            [RecordedRead(None if r.t is None else unhold(r.t, mine), r.data) for r in att.reads],
            _unheld_line(att.end, mine),
        )
    reads = att.reads
    timed = bool(reads) and all(r.t is not None for r in reads)
    out: dict[str, Any] = {
        "turn": att.turn,
        "attempt": att.attempt,
        "status": status,
        "timing": "per-read" if timed else ("per-response" if reads else "none"),
        "reads": len(reads),
        "bytes": sum(len(r.data) for r in reads),
        "headers_s": _r(resp.get("t")) if isinstance(resp.get("t"), (int, float)) else None,
        "end": (att.end or {}).get("status"),
        "end_s": _r((att.end or {}).get("t")) if isinstance((att.end or {}).get("t"), (int, float)) else None,
        "held": {"count": len(mine), "seconds": _r(sum(min(e, 1e12) - s for s, e in mine))},
    }
    dec = SSEDecoder()
    per_read_events = [0] * len(reads)
    ev_times: list[float | None] = []
    first_content: float | None = None
    stop_t: float | None = None
    pings: list[float | None] = []
    n_events = 0
    for i, r in enumerate(reads):
        for e in dec.feed(r.data):
            n_events += 1
            per_read_events[i] += 1
            kind, content = _event_content(e.event, e.data)
            ev_times.append(r.t)
            if kind == "ping":
                pings.append(r.t)
            if content and first_content is None:
                first_content = r.t
            if kind == "message_stop" and stop_t is None:
                stop_t = r.t
    dec.close()
    out["events"] = n_events
    out["events_per_read"] = {
        "mean": _r(n_events / len(reads)) if reads else None,
        "max": max(per_read_events) if reads else None,
        "counts": per_read_events if len(per_read_events) <= 2000 else None,
    }
    if not timed:
        out.update(
            first_byte_s=None,
            first_content_s=None,
            message_stop_s=None,
            last_byte_s=None,
            read_gaps={"count": 0},
            event_gaps={"count": 0},
            pings={"count": len(pings), "interval": None},
        )
        out["buffering"] = {
            "verdict": "inconclusive",
            "held_share": None,
            "bursts": 0,
            "held_bursts": [],
            "rule": RULE,
            "reason": "no per-read timing (HAR or plain SSE: timing is per response)" if reads else "no body",
        }
        return out
    ts = [float(r.t) for r in reads]  # type: ignore[arg-type]
    nonempty = [float(r.t) for r in reads if r.data]  # type: ignore[arg-type]
    out["first_byte_s"] = _r(nonempty[0]) if nonempty else None
    out["first_content_s"] = _r(first_content)
    out["message_stop_s"] = _r(stop_t)
    out["last_byte_s"] = _r(nonempty[-1]) if nonempty else None
    out["read_gaps"] = _round_stats(_stats([b - a for a, b in pairwise(ts)]))
    et = [float(t) for t in ev_times if t is not None]
    out["event_gaps"] = _round_stats(_stats([b - a for a, b in pairwise(et)]))
    pt = [float(t) for t in pings if t is not None]
    intervals = [b - a for a, b in pairwise(pt)]
    out["pings"] = {
        "count": len(pings),
        "interval": _round_stats({k: v for k, v in _stats(intervals).items() if k != "histogram"})
        if intervals
        else None,
    }
    if status not in (None, 200):
        out["buffering"] = {
            "verdict": "inconclusive",
            "held_share": None,
            "bursts": 0,
            "held_bursts": [],
            "rule": RULE,
            "reason": f"HTTP {status}: not a stream",
        }
    else:
        out["buffering"] = buffering_verdict(
            [(t, len(r.data), n) for t, r, n in zip(ts, reads, per_read_events, strict=True)],
            released=[unhold(e, mine) for _s, e in mine if not math.isinf(e)],
        )
    return out


def _unheld_line(line: dict[str, Any] | None, holds: Sequence[tuple[float, float]]) -> dict[str, Any] | None:
    t = (line or {}).get("t")
    if line is None or not isinstance(t, (int, float)):
        return line
    return {**line, "t": unhold(float(t), holds)}


def _round_stats(s: dict[str, Any]) -> dict[str, Any]:
    return {k: (_r(v) if isinstance(v, float) else v) for k, v in s.items()}


def timing_json(recording: Recording, *, analyze: Callable[..., dict[str, Any]] = analyze_attempt) -> dict[str, Any]:
    """``{"timing": "per-read" | "per-response" | "mixed", "attempts": [analyze_attempt...], "warnings": [...]}``.
    ``analyze``: the per-attempt analysis, called as ``analyze(attempt, holds)`` (the dashboard passes a caching
    one); holds are the recording's :func:`held_intervals`."""
    holds = held_intervals(recording)
    attempts = [analyze(a, holds) for a in in_time_order(recording)]
    kinds = {a["timing"] for a in attempts if a["timing"] != "none"}
    per = "per-response" if kinds == {"per-response"} else ("per-read" if kinds <= {"per-read"} else "mixed")
    if recording.header.get("timing") == "per-response":
        per = "per-response"
    diagnostics = []
    for a in attempts:
        d = buffering_diagnostic(a["buffering"])
        if d is not None:
            diagnostics.append({"turn": a["turn"], "attempt": a["attempt"], **d.to_json()})
    return {
        "timing": per,
        "source": recording.header.get("source"),
        "attempts": attempts,
        "warnings": list(recording.warnings),
        "diagnostics": diagnostics,  # timing.buffered per buffered attempt (dump --timing exits 1 on one)
    }


def in_time_order(recording: Recording) -> list[RecordedAttempt]:
    """The recording's attempts by their request's recorded time (those of one time, or without one, in file order).
    The file order is the time order of a recording made as it ran, not of an export of a replay of many
    conversations: the replay runs them one after the other, and writes them so, each with its recorded times."""
    last = 0.0
    keyed: list[tuple[float, int, RecordedAttempt]] = []
    for i, att in enumerate(recording.attempts()):
        t = (att.request or {}).get("t")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            last = float(t)
        keyed.append((last, i, att))  # (no time: where the one before it was)
    return [att for _, _, att in sorted(keyed, key=lambda k: (k[0], k[1]))]


def replayed_buffering(source: Any) -> dict[str, str] | None:
    """The verdicts a replay's source carries (:func:`recorded_buffering`, as ``recorded_buffering``): a replay's
    attempts are judged by them, not by the replayed reads' times; None for any other source."""
    if not isinstance(source, dict) or source.get("type") != "replay":
        return None
    recorded = source.get("recorded_buffering")
    return recorded if isinstance(recorded, dict) else None


def recorded_buffering(recording: Recording) -> dict[str, str]:
    """The ``timing.buffered`` message of each attempt that the recording's own times judge buffered, by
    ``"turn:attempt"``: a replay's reads come at its speed (at max speed no silence is left), so its dashboard and
    headless lines judge the recording's reads, not the replay's. Cheap: only an attempt with a silence of
    ``HELD_SILENCE`` between reads (or before the first) is analysed, and no read's bytes are read for the others."""
    if recording.header.get("timing") == "per-response":
        return {}
    holds: list[tuple[float, float]] | None = None
    out: dict[str, str] = {}
    for att in recording.attempts():
        reads: Any = att.reads
        times = reads.times() if isinstance(reads, SpilledReads) else [r.t for r in reads]
        prev, silent = 0.0, False
        for t in times:
            if t is None:
                break
            if t - prev >= HELD_SILENCE:
                silent = True
                break
            prev = t
        if not silent:
            continue
        if holds is None:
            holds = held_intervals(recording)
        d = buffering_diagnostic(analyze_attempt(att, holds)["buffering"])
        if d is not None:
            out[f"{att.turn}:{att.attempt}"] = d.message
    return out


class _Prefix(Sequence[RecordedRead]):
    """The first ``n`` reads of an attempt, read only when indexed (a spilled attempt's bytes are read back only if
    the analysis runs: the timing view's cache skips an attempt whose read count did not change)."""

    def __init__(self, reads: Sequence[RecordedRead], n: int) -> None:
        self.reads, self.n = reads, min(n, len(reads))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.reads[k] for k in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.reads[i]


def as_far_as(original: Recording, replayed: Recording) -> Recording:
    """The original recording as far as a replay of it has got: its attempts that ``replayed`` (what the replay's
    observations made, a :class:`RecordingBuilder`'s) has begun, each with as many of its reads as were replayed,
    and its end once the replay's attempt ended. Its times are the recording's own, whatever the replay's speed: the
    replayed reads' times are the replay's (at 4x a silence of 8 s is 2 s; at max speed none is left, and a
    buffered stream reads "not buffered"), not the session's. An attempt that the original does not have (a replay
    that went another way) is the replayed one, and a warning says that its times are the replay's. A replayed
    attempt that ended otherwise than recorded before its last recorded read (the user cancelled the replay
    mid-stream) has the recorded reads it got and its own end (status, reason) at the recorded time it had reached:
    what an export of the replay writes (``inspector.record.retime``)."""
    attempts = {(a.turn, a.attempt): a for a in original.attempts()}
    out = Recording(dict(original.header), observations=original.observations, warnings=list(original.warnings))
    for turn in replayed.turns:
        rt = RecordedTurn(turn.turn)
        for att in turn.attempts:
            orig = attempts.get((att.turn, att.attempt))
            if orig is None:
                rt.attempts.append(att)
                out.warnings.append(
                    f"turn {att.turn + 1} attempt {att.attempt + 1} is not in the recording: its times are the replay's"
                )
                continue
            done = att.end is not None
            status = (att.end or {}).get("status")
            # ended as recorded: the recorded attempt whole; else (not ended yet, or cancelled by the user mid-stream)
            # the recorded reads it got, and its own end at the time the replay had reached, as an export writes it
            whole = done and ended_as_recorded(orig.end, status, len(att.reads), len(orig.reads))
            # (read like a list: len, index, iterate; as a spilled attempt's SpilledReads are)
            reads = orig.reads if whole else cast(list[RecordedRead], _Prefix(orig.reads, len(att.reads)))
            response = orig.response if att.response is not None or whole else None
            end = orig.end if whole else None
            if done and not whole:
                assert att.end is not None
                # (the last read's time: reads are in time order; before any, the response's)
                reached = [reads[len(reads) - 1].t] if len(reads) else []
                reached.append((response or {}).get("t"))
                end = {**att.end, "t": max((float(t) for t in reached if isinstance(t, (int, float))), default=0.0)}
            rt.attempts.append(
                RecordedAttempt(orig.turn, orig.attempt, orig.request, response, reads, end, orig.conversation)
            )
        out.turns.append(rt)
    return out


def format_timing(recording: Recording) -> str:
    """Human-readable timing report (``inspector dump --timing``)."""
    return format_timing_json(timing_json(recording))


def format_timing_json(data: dict[str, Any], names: dict[int, str] | None = None) -> str:
    """The report of :func:`format_timing` from an already computed :func:`timing_json`. ``names``: how to name
    each (global) turn, e.g. ``[c2] turn 2 (#6)`` for a recording of many conversations (as ``dump`` names it);
    else ``turn N``."""
    names = names or {}
    lines: list[str] = []
    if data["timing"] == "per-response":
        lines.append(
            "note: timing is per response, not per read (HAR / plain SSE): gaps, bursts and buffering cannot be judged"
        )
    for w in data["warnings"]:
        lines.append(f"warning: {w}")
    if not data["attempts"]:
        lines.append("no attempts in this recording")
    for a in data["attempts"]:
        lines.append("")
        lines.append(
            f"{names.get(a['turn']) or 'turn ' + str(a['turn'] + 1)} attempt {a['attempt'] + 1}: "
            f"HTTP {a['status'] if a['status'] is not None else '?'}"
            f", {count(a['reads'], 'read')}, {count(a['events'], 'event')}, {count(a['bytes'], 'byte')}"
            f", end {a['end'] or '-'}"
        )
        lines.append(
            f"  headers {seconds(a['headers_s'])} | first byte {seconds(a.get('first_byte_s'))} | first content "
            f"{seconds(a.get('first_content_s'))} | message_stop {seconds(a.get('message_stop_s'))} | last byte "
            f"{seconds(a.get('last_byte_s'))}" + (f" | end {seconds(a['end_s'])}" if a.get("end_s") is not None else "")
        )
        for key, title in (("read_gaps", "gaps between reads"), ("event_gaps", "gaps between events")):
            g = a.get(key) or {}
            if g.get("count"):
                lines.append(
                    f"  {title} ({g['count']}): min {latency(g['min'])}, median {latency(g['median'])}, "
                    f"p90 {latency(g['p90'])}, max {latency(g['max'])}"
                )
                lines += _bars(g["histogram"])
        held = a.get("held") or {}
        if held.get("count"):
            lines.append(
                f"  held by the user (pause / step): {held['seconds']:.3f} s in {held['count']} interval(s), "
                "left out of every figure"
            )
        epr = a["events_per_read"]
        if epr["mean"] is not None:
            lines.append(f"  events per read: mean {epr['mean']:.2f}, max {epr['max']}")
        p = a["pings"]
        if p["count"]:
            iv = p.get("interval")
            cadence = (
                f", every {latency(iv['mean'])} on average (min {latency(iv['min'])}, max {latency(iv['max'])})"
                if iv
                else ""
            )
            lines.append(f"  pings: {p['count']}{cadence}")
        else:
            lines.append("  pings: none")
        b = a["buffering"]
        lines.append(f"  buffering: {b['verdict'].upper()}: {b.get('reason', '')}")
        for hb in b["held_bursts"][:10]:
            lines.append(
                f"    held burst at {hb['start']:.3f} s after {hb['silence']:.3f} s of silence: "
                f"{hb['reads']} read(s), {hb['events']} events, {hb['bytes']} bytes ({hb['share']:.0%})"
            )
        if len(b["held_bursts"]) > 10:
            lines.append(f"    ... {len(b['held_bursts']) - 10} more held bursts")
        if b["verdict"] == "buffered":
            lines.append(f"  error   {BUFFERED_CODE}: the harness saw no streaming for this attempt")
        if b["verdict"] in ("buffered", "suspect"):
            lines.append(f"    rule: {b['rule']}")
            lines.append(
                "    an intermediary (relay, reverse proxy) probably buffers the event stream; for nginx: "
                "`X-Accel-Buffering: no` / proxy_buffering off"
            )
    return "\n".join(lines).lstrip("\n")


# --- recordings made of scenario plans (scenario time, no wall clock) ---------------------------------------------


def recording_from_plans(plans: Iterable[Any], *, source: dict[str, Any] | None = None) -> Recording:
    """A Recording of rendered ``ResponsePlan``s timed in scenario seconds (request at 0, headers at
    ``header_delay``, each read after its planned delay): the timing a client would see at 1x, without waiting."""
    rec = Recording(
        header={
            "kind": "header",
            "format": "stream-inspector-recording",
            "version": 1,
            "source": source or {"type": "plan"},
        }
    )
    turns: dict[int, RecordedTurn] = {}
    t_start = 0.0
    for plan in plans:
        t = plan.header_delay
        reads = []
        for r in plan.reads:
            t += r.delay
            reads.append(RecordedRead(t=round(t, 9), data=r.data))
        att = RecordedAttempt(
            turn=plan.turn,
            attempt=plan.attempt,
            request={"kind": "request", "turn": plan.turn, "attempt": plan.attempt, "t": t_start},
            response={
                "kind": "response",
                "turn": plan.turn,
                "attempt": plan.attempt,
                "t": plan.header_delay,
                "status": plan.status,
                "headers": dict(plan.headers),
            },
            reads=reads,
            end={
                "kind": "end",
                "turn": plan.turn,
                "attempt": plan.attempt,
                "t": round(t, 9),
                "status": {"eof": "complete", "drop": "dropped", "hang": "stalled"}[plan.end],
                "reason": None,
            },
        )
        t_start += t
        if plan.turn not in turns:
            turns[plan.turn] = RecordedTurn(turn=plan.turn)
            rec.turns.append(turns[plan.turn])
        turns[plan.turn].attempts.append(att)
    return rec


# --- recordings made of loop observations (what the dashboard saw) ------------------------------------------------


_HOLD_KINDS = (O.StreamHeld.kind, O.StreamReleased.kind)


class RecordingBuilder:
    """Builds, one observation at a time, the Recording that ``Recorder`` would write for the same observations
    (request / response / read / end lines, same clocks, same header filtering), without the JSON round trip.
    Loop observations (``"obs"`` lines) are not kept, except the user's holds of the stream (the timing leaves them
    out). ``count`` is the number
    of observations added (the dashboard feeds its history incrementally). ``timed_reads=False`` drops the reads'
    times (header ``"timing": "per-response"``), for a replay of a source without per-read timing (HAR)."""

    def __init__(self, *, source: dict[str, Any] | None = None, timed_reads: bool = True) -> None:
        self.recording = Recording(
            header={"kind": "header", "format": FORMAT, "version": VERSION, "source": dict(source or {})}
        )
        self.timed_reads = timed_reads
        if not timed_reads:
            self.recording.header["timing"] = "per-response"
        self._source_given = source is not None
        self._turns: dict[int, RecordedTurn] = {}
        self._attempts: dict[tuple[int, int], RecordedAttempt] = {}
        self.count = 0
        self.holds = 0  # hold / release observations kept (the timing view's cache key)
        from inspector.record.recorder import Recorder

        self._recorder = Recorder(target=self)

    def _attempt(self, turn: int, attempt: int) -> RecordedAttempt:
        att = self._attempts.get((turn, attempt))
        if att is None:
            if turn not in self._turns:
                self._turns[turn] = RecordedTurn(turn=turn)
                self.recording.turns.append(self._turns[turn])
            att = self._attempts[(turn, attempt)] = RecordedAttempt(turn=turn, attempt=attempt)
            self._turns[turn].attempts.append(att)
        return att

    # The observation -> recording mapping is the Recorder's (one mapping for the file and for this builder);
    # these are the RecordingWriter methods it calls, kept in memory.
    closed = False

    def add(self, obs: O.Observation) -> None:
        self.count += 1
        self._recorder(obs)

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None:
        att = self._attempt(turn, attempt)
        if att.request is None:
            att.request = {
                "kind": "request",
                "turn": turn,
                "attempt": attempt,
                "t": float(t),
                "method": str(method),
                "url": str(url),
                "headers": clean_headers(headers),
                "body": body,
            }

    def response(self, turn: int, attempt: int, t: float, status: int, headers: Any) -> None:
        att = self._attempt(turn, attempt)
        if att.response is None:
            att.response = {
                "kind": "response",
                "turn": turn,
                "attempt": attempt,
                "t": float(t),
                "status": status,
                "headers": clean_headers(headers),
            }

    def read(self, turn: int, attempt: int, t: float, data: bytes) -> None:
        self._attempt(turn, attempt).reads.append(
            RecordedRead(t=float(t) if self.timed_reads else None, data=bytes(data))
        )

    def end(self, turn: int, attempt: int, t: float, status: str, reason: str | None = None) -> None:
        att = self._attempt(turn, attempt)
        if att.end is None:
            att.end = {
                "kind": "end",
                "turn": turn,
                "attempt": attempt,
                "t": float(t),
                "status": str(status),
                "reason": None if reason is None else str(reason),
            }

    def observation(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "loop_started" and not self._source_given:
            self.recording.header["source"] = dict(obj.get("source") or {})
        elif kind in _HOLD_KINDS:  # the timing leaves the user's holds out
            self.recording.observations.append(obj)
            self.holds += 1

    def close(self) -> None:
        pass

    def extend(self, observations: Iterable[O.Observation]) -> RecordingBuilder:
        for obs in observations:
            self.add(obs)
        return self


def recording_from_observations(
    observations: Iterable[O.Observation], *, source: dict[str, Any] | None = None
) -> Recording:
    """The Recording of a session's observations: the attempts ``--record`` writes for the same run (the header's
    source is ``source``, else the ``LoopStarted`` one). Timing is the loop's clock: request ``t`` since the loop
    start, response / read / end ``t`` since that attempt's request."""
    return RecordingBuilder(source=source).extend(observations).recording

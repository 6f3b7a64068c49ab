"""Headless output: `inspector dump` summaries and the progress printer of `inspector run --headless`."""

from __future__ import annotations

import queue
import sys
import threading
from typing import IO, Any, Callable

import orjson

from inspector import observations as O
from inspector.assembler import TurnStream
from inspector.recording import Recording


# ------------------------------------------------------------------------------------------------------ dump
def dump_turns(recording: Recording, on_event: Callable[[Any], None] | None = None) -> list[dict]:
    """One entry per turn (its last attempt), with failed earlier attempts listed under `failed_attempts`.
    `on_event` sees every decoded SSE event on the way (one decoding pass serves `--events` and the summary)."""
    out: list[dict] = []
    for turn in recording.turns:
        entries = []
        for att in turn.attempts:
            ts = TurnStream()
            for r in att.reads:
                for step in ts.feed(r.data):
                    if on_event is not None:
                        on_event(step.sse)
            ts.close()
            entries.append(_turn_entry(ts, turn.turn, att.attempt, att))
        if not entries:
            continue
        last = entries[-1]
        if len(entries) > 1:
            last["failed_attempts"] = entries[:-1]
        out.append(last)
    return out


def _turn_entry(ts: TurnStream, turn: int, attempt: int, att: Any) -> dict:
    entry = {
        "turn": turn,
        "attempt": attempt,
        "message": ts.final_message(),
        "outcome": ts.outcome,
        "diagnostics": [d.to_json() for d in ts.diagnostics],
        "events": ts.assembler.events,
        "reads": len(att.reads),
        "bytes": sum(len(r.data) for r in att.reads),
    }
    if att.response and att.response.get("status") not in (None, 200):
        entry["http_status"] = att.response.get("status")
    return entry


def dump_ok(turns: list[dict]) -> bool:
    """True when every turn is complete and has no error diagnostics."""
    for t in turns:
        if t["outcome"] == "incomplete":
            return False
        if any(d["severity"] == "error" for d in t["diagnostics"]):
            return False
    return bool(turns)


def dump_events(recording: Recording, out: IO[bytes]) -> list[dict]:
    """`--events --json`: one line per decoded SSE event; returns the turns (as dump_turns) from the same pass."""

    def line(e: Any) -> None:
        out.write(orjson.dumps({"event": e.event, "data": e.data, "id": e.id, "retry": e.retry}) + b"\n")

    return dump_turns(recording, on_event=line)


def format_turns(turns: list[dict]) -> str:
    lines: list[str] = []
    for t in turns:
        for failed in t.get("failed_attempts", []):
            lines.extend(_format_turn(failed, failed=True))
        lines.extend(_format_turn(t))
    return "\n".join(lines)


def _short(v: Any, n: int = 200) -> str:
    s = v if isinstance(v, str) else orjson.dumps(v).decode()
    return s if len(s) <= n else s[: n - 3] + "..."


def _format_turn(t: dict, failed: bool = False) -> list[str]:
    m = t["message"]
    # people count turns and attempts from 1 (as the dashboard shows them); JSON keeps 0-based indices
    head = f"turn {t['turn'] + 1} attempt {t['attempt'] + 1}: {t['outcome']}"
    if failed:
        head += " (failed attempt, retried)"
    if t.get("http_status"):
        head += f" (HTTP {t['http_status']})"
    lines = [head, f"  message {m.get('id')}  model {m.get('model')}  {t['reads']} reads, {t['bytes']} bytes"]
    for i, b in enumerate(m.get("content") or []):
        bt = b.get("type")
        if bt == "text":
            lines.append(f"  [{i}] text:")
            for line in (b.get("text") or "").splitlines() or [""]:
                lines.append(f"      {line}")
        elif bt == "thinking":
            lines.append(f"  [{i}] thinking: {_short(b.get('thinking', ''))!r} (signature {len(b.get('signature') or '')} chars)")
        elif bt in ("tool_use", "server_tool_use", "mcp_tool_use"):
            if b.get("input") is None and "input_raw" in b:
                lines.append(f"  [{i}] {bt} {b.get('name')} {b.get('id')}: INPUT NOT PARSED, raw {_short(b['input_raw'])!r}")
            else:
                lines.append(f"  [{i}] {bt} {b.get('name')} {b.get('id')}: {_short(b.get('input'))}")
        else:
            lines.append(f"  [{i}] {bt}")
    lines.append(f"  stop_reason: {m.get('stop_reason')}  stop_sequence: {m.get('stop_sequence')}")
    u = m.get("usage") or {}
    lines.append("  usage: " + ", ".join(f"{k} {v}" for k, v in u.items() if not isinstance(v, dict)))
    if t["diagnostics"]:
        lines.append("  diagnostics:")
        for d in t["diagnostics"]:
            where = f" @event {d['event_index']}" if d.get("event_index") is not None else ""
            lines.append(f"    {d['severity']:<7} {d['code']}{where}: {d['message']}")
    return lines


# ------------------------------------------------------------------------------------------------------ run
class LineSink:
    """Output written by a thread, so a slow or stalled reader of stdout never blocks the agent loop.

    The queue is bounded: when it is full the loop waits at most `max_wait` seconds, then the line is dropped and
    counted (`dropped`). A reader that went away (broken pipe, e.g. `| head`) calls `on_broken` once, from the writer
    thread."""

    def __init__(self, out: IO[bytes], *, maxsize: int = 50_000, max_wait: float = 1.0,
                 on_broken: Callable[[], None] | None = None) -> None:
        self.out = out
        self.max_wait = max_wait
        self.on_broken = on_broken
        self.broken = False
        self.dropped = 0
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize)
        self._thread = threading.Thread(target=self._run, name="inspector-output", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            self._q.put(data, timeout=self.max_wait)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            if self.broken:
                continue
            try:
                self.out.write(item)
                if self._q.empty():
                    self.out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.broken = True
                if self.on_broken is not None:
                    self.on_broken()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (at most `timeout` seconds), then stop the thread."""
        try:
            self._q.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)
        if self.dropped and not self.broken:
            sys.stderr.write(f"inspector: {self.dropped} output lines dropped (stdout did not keep up)\n")


def stdout_sink(**kw: Any) -> LineSink:
    return LineSink(sys.stdout.buffer, **kw)


class ProgressPrinter:
    """Readable progress lines for `inspector run --headless` (a bus subscriber)."""

    def __init__(self, sink: LineSink) -> None:
        self.sink = sink

    def p(self, s: str) -> None:
        self.sink.write((s + "\n").encode("utf-8", "replace"))

    def __call__(self, obs: O.Observation) -> None:
        t = f"{obs.t:7.3f}s"
        if isinstance(obs, O.LoopStarted):
            src = obs.source
            self.p(f"{t} start  {src.get('type')} {src.get('name') or src.get('file') or ''} model {obs.model}".rstrip())
        elif isinstance(obs, O.TurnStarted):
            self.p(f"{t} turn {obs.turn + 1}")
        elif isinstance(obs, O.AttemptStarted):
            self.p(f"{t}   attempt {obs.attempt + 1}: POST {obs.url}")
        elif isinstance(obs, O.ResponseStarted):
            self.p(f"{t}   HTTP {obs.status}")
        elif isinstance(obs, O.BlockOpened):
            what = f" {obs.name} {obs.block_id}" if obs.name else ""
            self.p(f"{t}   block {obs.index} open: {obs.block_type}{what}")
        elif isinstance(obs, O.BlockClosed):
            c = obs.content
            if c.get("type") == "text":
                self.p(f"{t}   block {obs.index} text: {_short(c.get('text', ''), 300)!r}")
            elif obs.input_error:
                self.p(f"{t}   block {obs.index} closed: INPUT ERROR {obs.input_error}")
            else:
                self.p(f"{t}   block {obs.index} closed")
        elif isinstance(obs, O.ToolUse):
            self.p(f"{t}   tool_use {obs.name}({_short(obs.input, 120)}) {obs.id}")
        elif isinstance(obs, O.ToolStateChanged):
            extra = f": {obs.error}" if obs.error else ""
            self.p(f"{t}   tool {obs.name} {obs.id[-8:]} -> {obs.state}{extra}")
        elif isinstance(obs, O.DiagnosticRaised):
            d = obs.diagnostic
            if d.severity != "info":
                self.p(f"{t}   {d.severity.upper()} {d.code}: {d.message}")
        elif isinstance(obs, O.MessageUpdated):
            self.p(f"{t}   stop_reason {obs.stop_reason} usage {_short(obs.usage)}")
        elif isinstance(obs, O.AttemptEnded):
            if obs.status != "complete":
                self.p(f"{t}   attempt {obs.attempt + 1} {obs.status}: {obs.reason}")
        elif isinstance(obs, O.LoopStateChanged):
            if obs.state in (O.WAITING_RETRY,):
                self.p(f"{t}   {obs.detail}")
        elif isinstance(obs, O.TextFinish):
            self.p(f"{t} answer:")
            for line in obs.text.splitlines():
                self.p(f"    {line}")
        elif isinstance(obs, O.LoopFinished):
            msg = f" ({obs.error})" if obs.error else ""
            self.p(f"{t} {obs.status} after {obs.turns} turn{'s' if obs.turns != 1 else ''}{msg}")


class JsonPrinter:
    """One JSON object per observation per line (`--headless --json`)."""

    def __init__(self, sink: LineSink) -> None:
        self.sink = sink

    def __call__(self, obs: O.Observation) -> None:
        self.sink.write(orjson.dumps(obs.to_json(), option=orjson.OPT_NON_STR_KEYS) + b"\n")

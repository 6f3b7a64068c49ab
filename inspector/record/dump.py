"""`inspector dump`: decode and assemble every attempt of a recording, a plain SSE file or a HAR, headless."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import orjson

from inspector.core.fmt import short, short_text
from inspector.record.recording import Recording
from inspector.stream.assembler import TurnStream


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
            lines.append(
                f"  [{i}] thinking: {short_text(b.get('thinking', ''), 200, ellipsis='...')!r} (signature {len(b.get('signature') or '')} chars)"
            )
        elif bt in ("tool_use", "server_tool_use", "mcp_tool_use"):
            if b.get("input") is None and "input_raw" in b:
                lines.append(
                    f"  [{i}] {bt} {b.get('name')} {b.get('id')}: INPUT NOT PARSED, raw {short_text(b['input_raw'], 200, ellipsis='...')!r}"
                )
            else:
                lines.append(
                    f"  [{i}] {bt} {b.get('name')} {b.get('id')}: {short(b.get('input'), 200, ellipsis='...')}"
                )
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

"""What a detail view shows: any row read in full (an SSE event, a block, a tool call, a diagnostic, a request).

Pure functions from the folded state (and the history, for an event's own observation) to a `Detail`: a title, a
rich Text to show and the plain text that `c`/`y` copies. No Textual here: the screen is `widgets/detail.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson
from rich.highlighter import JSONHighlighter
from rich.text import Text

from inspector.core import exactjson
from inspector.core.fmt import duration, size
from inspector.observe import observations as O
from inspector.state.conversations import EventSource
from inspector.state.entries import ToolKey
from inspector.state.fold import DashboardState

_json = JSONHighlighter()
HEAD = "bold"
MUTED = "dim"
ERR = "bold red"
BOUNDARY = "bold cyan"


@dataclass
class Detail:
    title: str
    body: Text

    @property
    def plain(self) -> str:
        return self.body.plain


def pretty(value: Any) -> str:
    """A value as indented JSON (never Python syntax); a value JSON cannot carry as its repr."""
    try:
        return exactjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value, indent=2, default=repr, ensure_ascii=False)


def _section(out: Text, title: str) -> None:
    if out:
        out.append("\n")
    out.append(f"── {title} ──\n", HEAD)


def _kv(out: Text, key: str, value: Any) -> None:
    out.append(f"{key}: ", MUTED)
    out.append(f"{value}\n")


def _json_block(out: Text, value: Any) -> None:
    out.append_text(_json(Text(pretty(value))))
    out.append("\n")


def visible_bytes(data: bytes) -> str:
    """Bytes as readable text: UTF-8 as is, CR/LF shown (␍ ↵) before the real line break, invalid bytes as \\xNN."""
    s = data.decode("utf-8", "backslashreplace")
    out = []
    for ch in s:
        if ch == "\n":
            out.append("↵\n")
        elif ch == "\r":
            out.append("␍")
        elif ch == "\t" or ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
    return "".join(out)


def event_bytes(state: DashboardState, turn: int, attempt: int, start: int, end: int, out: Text) -> None:
    """The bytes [start, end) of an attempt's stream, with the boundaries of the reads that carried them."""
    reads = state.reads
    shown = 0
    for i in range(len(reads.data)):
        if reads.turn[i] != turn or reads.attempt[i] != attempt:
            continue
        lo, data = reads.offset[i], reads.data[i]
        hi = lo + len(data)
        if hi <= start or lo >= end:
            continue
        a, b = max(start, lo) - lo, min(end, hi) - lo
        out.append(
            f"┄ read {reads.read_index[i] + 1} · +{reads.t_request[i]:.3f} s · {size(len(data))} @{lo}"
            f"{' (this event starts inside it)' if lo < start else ''}{' (continues after)' if hi > end else ''}\n",
            BOUNDARY,
        )
        out.append(visible_bytes(data[a:b]))
        if not data[a:b].endswith(b"\n"):
            out.append("\n")
        shown += b - a
    if not shown:
        out.append("(the bytes of this event were not kept)\n", MUTED)


def event_detail(state: DashboardState, history: EventSource, evno: int) -> Detail:
    """Event k: its data as pretty JSON, its raw bytes with read boundaries, the diagnostics pointing at it."""
    if not 1 <= evno <= history.event_count:
        return Detail(f"event {evno}", Text("this event is not in the history", ERR))
    obs = history.observations[history.event_pos[evno - 1]]
    assert isinstance(obs, O.SSEEventSeen)
    sse = obs.sse
    out = Text()
    _kv(out, "type", obs.event_type + (f" (event: {sse.event})" if sse.event != obs.event_type else ""))
    _kv(out, "turn · attempt", f"{obs.turn + 1} · {obs.attempt + 1}")
    _kv(out, "seq in attempt", sse.seq)
    if obs.index is not None:
        _kv(out, "block index", obs.index)
    _kv(out, "time", f"{obs.t:.3f} s")
    _kv(out, "bytes", f"{sse.start}..{sse.end} ({size(sse.end - sse.start)}), completed by read {sse.read_index + 1}")
    if sse.id:
        _kv(out, "id", sse.id)
    _section(out, "data")
    try:
        value = json.loads(sse.data)
    except ValueError as e:
        out.append(f"not JSON ({e}): shown as received\n", ERR)
        out.append(visible_bytes(sse.data.encode("utf-8", "surrogatepass")) + "\n")
    else:
        _json_block(out, value)
    _section(out, "raw bytes, with read boundaries")
    event_bytes(state, obs.turn, obs.attempt, sse.start, sse.end, out)
    diags = [d for d in state.diagnostics if d.evno == evno]
    if diags:
        _section(out, "diagnostics")
        for d in diags:
            out.append(f"{d.severity} {d.code}: ", ERR if d.severity == "error" else "yellow")
            out.append(d.message + "\n")
    return Detail(f"Event {evno} · {obs.event_type}", out)


def block_detail(state: DashboardState, key: tuple[int, int, int]) -> Detail:
    b = state.blocks.get(key)
    if b is None:
        return Detail("block", Text("this block is not in the shown state", ERR))
    out = Text()
    _kv(out, "type", b.type + (f" {b.name}" if b.name else ""))
    if b.id:
        _kv(out, "id", b.id)
    _kv(out, "turn · attempt · index", f"{b.turn + 1} · {b.attempt + 1} · {b.index}")
    _kv(out, "state", "closed" if b.closed else "open (still streaming)")
    _kv(out, "fragments", f"{len(b.fragments)} · {size(b.nbytes)}")
    _kv(out, "events", f"{b.first_event}..{b.last_event or '…'}")
    buf = b.joined()
    _section(out, "buffer (the fragments joined, as received)")
    out.append(buf + "\n" if buf else "(empty)\n", "" if buf else MUTED)
    if b.input_error:
        _section(out, "input error")
        out.append(b.input_error + "\n", ERR)
        if b.error_pos is not None:
            pos = min(b.error_pos, len(buf))
            line_start = buf.rfind("\n", 0, pos) + 1
            line_end = buf.find("\n", pos)
            line = buf[line_start : len(buf) if line_end < 0 else line_end]
            out.append(line + "\n")
            out.append(" " * (pos - line_start) + "^ here\n", ERR)
    elif b.closed and b.parsed_input is not None:
        _section(out, "input (parsed)")
        _json_block(out, b.parsed_input)
    elif b.is_tool and not b.closed:
        _section(out, "repaired preview (not the input: the buffer is not complete JSON yet)")
        value, err = b.preview()
        out.append(pretty(value) + "\n" if err is None else f"cannot repair yet: {err}\n")
    for i in b.diagnostics:
        d = state.diagnostics[i]
        out.append(f"{d.severity} {d.code}: {d.message}\n", ERR if d.severity == "error" else "yellow")
    return Detail(f"Block [{b.index}] {b.type}" + (f" {b.name}" if b.name else ""), out)


def tool_detail(state: DashboardState, key: ToolKey, now: float) -> Detail:
    """A tool call, by its key (conversation, tool id)."""
    t = state.tools.get(key)
    if t is None:
        return Detail("tool", Text("this tool call is not in the shown state", ERR))
    out = Text()
    _kv(out, "tool", f"{t.name} ({t.id})")
    if t.conversation:
        _kv(out, "conversation", t.conversation)
    _kv(out, "turn · attempt", f"{t.turn + 1} · {t.attempt + 1}")
    _kv(out, "state", t.state)
    el = t.elapsed(now)
    if el is not None:
        _kv(out, "elapsed", duration(el))
    _section(out, "state history")
    for st, at in t.history:
        out.append(f"{at:9.3f} s  {st}\n")
    if not t.history:
        out.append("(none yet)\n", MUTED)
    _section(out, "input")
    if t.input is not None:
        _json_block(out, t.input)
    else:
        out.append("(still streaming: see its block)\n", MUTED)
    if t.error:
        _section(out, "error")
        out.append(t.error + "\n", ERR)
    sent = state.sent_results.get(t.key)
    if sent is not None:
        _section(out, "tool_result as sent in the next request" + (" (is_error)" if sent.get("is_error") else ""))
        content = sent.get("content")
        out.append(content + "\n" if isinstance(content, str) else pretty(content) + "\n")
    elif t.result_preview is not None:
        _section(out, "result")
        out.append(t.result_preview + "\n", ERR if t.is_error else "")
    elif t.result_summary:
        _section(out, "result")
        out.append(t.result_summary + "\n")
    return Detail(f"Tool {t.name} · {t.state}", out)


def diagnostic_detail(state: DashboardState, history: EventSource, i: int) -> Detail:
    if not 0 <= i < len(state.diagnostics):
        return Detail("diagnostic", Text("no such diagnostic", ERR))
    d = state.diagnostics[i]
    out = Text()
    _kv(out, "severity", d.severity)
    _kv(out, "code", d.code)
    _kv(out, "time", f"{d.t:.3f} s")
    _kv(out, "turn · attempt", f"{d.turn + 1} · {d.attempt + 1}")
    if d.evno is not None:
        _kv(out, "event", d.evno)
    if d.block_index is not None:
        _kv(out, "block index", d.block_index)
    _section(out, "message")
    out.append(d.message + "\n", ERR if d.severity == "error" else "")
    if d.evno is not None and 1 <= d.evno <= history.event_count:
        obs = history.observations[history.event_pos[d.evno - 1]]
        if isinstance(obs, O.SSEEventSeen):
            _section(out, f"the bytes it points at (event {d.evno})")
            event_bytes(state, obs.turn, obs.attempt, obs.sse.start, obs.sse.end, out)
    return Detail(f"Diagnostic · {d.code}", out)


__all__ = [
    "Detail",
    "block_detail",
    "diagnostic_detail",
    "event_bytes",
    "event_detail",
    "pretty",
    "tool_detail",
    "visible_bytes",
]

"""The SSE events pane: one row per event from the state's compact columns, or the raw bytes with read boundaries.

Only visible rows are rendered (Line API); a million rows cost nothing until they scroll into view.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.message import Message
from textual.strip import Strip

from inspector.state.entries import human_size
from inspector.state.fold import F_DIAG, F_ERROR, F_MARKER, F_WARN, DashboardState
from inspector.tui.widgets.base import Line, LineView
from inspector.tui.widgets.wording import marker_label, turn_attempt_label, whose_turn

SHORT_TYPES = {
    "message_start": "msg_start",
    "content_block_start": "block_start",
    "content_block_delta": "delta",
    "content_block_stop": "block_stop",
    "message_delta": "msg_delta",
    "message_stop": "msg_stop",
}
TYPE_CLASS = {
    "message_start": "ev--message",
    "message_delta": "ev--message",
    "message_stop": "ev--message",
    "content_block_start": "ev--block",
    "content_block_stop": "ev--block",
    "content_block_delta": "ev--delta",
    "ping": "ev--ping",
    "error": "ev--error",
    "invalid": "ev--error",
    "unknown": "ev--unknown",
}


class EventsView(LineView):
    """SSE events (or raw bytes) of the state it was last given."""

    @dataclass
    class TimeTravelRequested(Message):
        """A click on an event row asks to show the state as of event `evno`."""

        evno: int

    COMPONENT_CLASSES = {
        "ev--num",
        "ev--time",
        "ev--message",
        "ev--block",
        "ev--delta",
        "ev--ping",
        "ev--error",
        "ev--unknown",
        "ev--index",
        "ev--conv",
        "ev--summary",
        "ev--marker",
        "ev--discarded",
        "ev--cursor",
        "ev--diag",
        "raw--read",
        "raw--text",
        "raw--eol",
        "raw--cont",
        "raw--bad",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    EventsView > .ev--num { color: $foreground-muted; }
    EventsView > .ev--time { color: $foreground-darken-3; }
    EventsView > .ev--message { color: $secondary; text-style: bold; }
    EventsView > .ev--block { color: $success; }
    EventsView > .ev--delta { color: $primary-lighten-2; }
    EventsView > .ev--ping { color: $foreground-darken-3; }
    EventsView > .ev--error { color: $error; text-style: bold; }
    EventsView > .ev--unknown { color: $warning; }
    EventsView > .ev--index { color: $accent; }
    EventsView > .ev--conv { color: $secondary; }
    EventsView > .ev--summary { color: $foreground; }
    EventsView > .ev--marker { color: $primary; text-style: bold; }
    EventsView > .ev--discarded { text-style: dim; }
    EventsView > .ev--cursor { background: $accent-darken-2; }
    EventsView > .ev--diag { color: $warning; }
    EventsView > .raw--read { color: $primary; }
    EventsView > .raw--text { color: $foreground; }
    EventsView > .raw--eol { color: $foreground-darken-3; }
    EventsView > .raw--cont { color: $warning; }
    EventsView > .raw--bad { color: $error; text-style: bold; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.raw = False
        self.cursor_evno: int | None = None  # highlighted event (time travel)
        self._split_cache: LRUCache[int, list[bytes]] = LRUCache(256)
        self._seen: tuple[object, ...] = ()

    # -------------------------------------------------------------------------------------------- updates
    def show(self, state: DashboardState, cursor_evno: int | None = None) -> None:
        """Point the view at a state (cheap when nothing changed)."""
        new_state = state is not self.state
        key = (id(state), state.rev_events, self.raw, cursor_evno)
        if key == self._seen:
            return
        self._seen = key
        if new_state or cursor_evno != self.cursor_evno:
            # rows of an unchanged state are keyed by their flags, so a diagnostic pointing back re-renders its row
            self.forget_rows()
            self._split_cache.clear()
        self.state = state
        self.cursor_evno = cursor_evno
        count = state.reads.lines if self.raw else len(state.events)
        self.set_row_count(count)
        if cursor_evno is not None and not self.raw and cursor_evno > 0:
            ev = state.events
            if cursor_evno <= len(ev.event_rows):
                self.scroll_to_row(ev.event_rows[cursor_evno - 1])

    def set_raw(self, raw: bool) -> None:
        if raw == self.raw:
            return
        self.raw = raw
        self.forget_rows()
        self.follow = True
        self._seen = ()
        if self.state is not None:
            self.show(self.state, self.cursor_evno)
        self.follow_tail()

    def detail_at(self, row: int) -> tuple[str, Any] | None:
        """An event row opens the event; an attempt's marker row opens the request it sent."""
        if self.raw or self.state is None or not 0 <= row < len(self.state.events):
            return None
        ev = self.state.events
        if ev.flags[row] & F_MARKER:
            return ("attempt", (ev.turn[row], ev.attempt[row]))
        return ("event", ev.evno[row]) if ev.evno[row] else None

    def default_detail_row(self) -> int | None:
        """Enter with nothing selected opens the newest SSE event (not a marker row's request view)."""
        if not self.raw and self.state is not None and len(self.state.events.event_rows):
            return int(self.state.events.event_rows[-1])
        return super().default_detail_row()

    def on_click(self, event: events.Click) -> None:
        """Click an event row: time travel to it (LineView.on_click, called too, opens its detail)."""
        row = int(self.scroll_offset.y + event.y)
        if not self.raw and self.state is not None and 0 <= row < len(self.state.events):
            evno = self.state.events.evno[row]
            if evno:
                self.post_message(self.TimeTravelRequested(evno))

    # -------------------------------------------------------------------------------------------- rendering
    def row_key(self, row: int) -> Hashable:
        if self.raw or self.state is None:
            return ("raw", row)
        ev = self.state.events
        m = self.state.markers.get(row)  # a marker row changes with its facts (an attempt's answer)
        return (
            row,
            ev.flags[row],
            ("marker", m.version) if m is not None else len(ev.summary[row]),
            self.state.attempt_failed(ev.turn[row], ev.attempt[row]),
            len(self.state.conversations) > 1,  # (then each event row names its conversation)
        )

    def render_row(self, row: int, width: int) -> Line | Strip:
        state = self.state
        if state is None:
            return Strip.blank(width)
        if self.raw:
            return self._render_raw(state, row, width)
        return self._render_event(state, row, width)

    def _render_event(self, state: DashboardState, row: int, width: int) -> Line | Strip:
        ev = state.events
        flags = ev.flags[row]
        console = self.app.console
        if flags & F_MARKER:
            m = state.markers.get(row)
            label = f"── {marker_label(m, state) if m is not None else ev.etype[row]} "
            text = Text(label + "─" * max(0, width - len(label)), style=self.cstyle("ev--marker"))
            if flags & F_ERROR:
                text.stylize(self.cstyle("ev--error"))
            return list(text.render(console, end=""))
        etype = ev.etype[row]
        evno = ev.evno[row]
        attempt = state.attempts.get((ev.turn[row], ev.attempt[row]))
        t = ev.t[row] - (attempt.t_start if attempt else 0.0)
        wide = width >= 64
        tname = etype if wide else SHORT_TYPES.get(etype, etype)
        tw = 19 if wide else 11
        idx = ev.index[row]
        text = Text(no_wrap=True, overflow="crop")
        glyph = "✗" if flags & F_ERROR else "⚠" if flags & F_WARN else "•" if flags & F_DIAG else " "
        text.append(glyph, self.cstyle("ev--error") if flags & F_ERROR else self.cstyle("ev--diag"))
        text.append(f"{evno:>5} ", self.cstyle("ev--num"))
        if len(state.conversations) > 1:
            # several conversations in the view stream at once and their events interleave as they came: each row
            # says whose it is (the conversation list's id, cut to a column's width)
            whose = whose_turn(state, ev.turn[row])
            cid = whose[0] if whose is not None else "?"
            text.append(f"{cid if len(cid) <= CONV_W else cid[: CONV_W - 1] + '…':<{CONV_W}} ", self.cstyle("ev--conv"))
        text.append(f"{t:7.3f}s " if wide else f"{t:6.2f} ", self.cstyle("ev--time"))
        tstyle = self.cstyle(TYPE_CLASS.get(etype, "ev--unknown"))
        text.append(f"{tname:<{tw}} ", tstyle)
        text.append(f"{idx:>2} " if idx >= 0 else "   ", self.cstyle("ev--index"))
        summary = ev.summary[row]
        if len(summary) > width:
            summary = summary[: max(1, width - 1)] + "…"
        text.append(summary, self.cstyle("ev--error") if flags & F_ERROR else self.cstyle("ev--summary"))
        if attempt is not None and attempt.failed:
            text.stylize(self.cstyle("ev--discarded"))
        if self.cursor_evno is not None and evno == self.cursor_evno:
            text.pad_right(width)
            text.stylize(self.cstyle("ev--cursor"))
        return list(text.render(console, end=""))

    def _lines_of(self, i: int, data: bytes) -> list[bytes]:
        lines = self._split_cache.get(i)
        if lines is None:
            lines = data.split(b"\n")
            if data.endswith(b"\n"):
                lines.pop()
                lines = [x + b"\n" for x in lines]
            else:
                lines = [x + b"\n" for x in lines[:-1]] + [lines[-1]]
            self._split_cache[i] = lines
        return lines

    def _render_raw(self, state: DashboardState, row: int, width: int) -> Line | Strip:
        reads = state.reads
        console = self.app.console
        i, line = reads.locate(row)
        data = reads.data[i]
        if line < 0:
            gap = ""
            if i > 0 and reads.turn[i - 1] == reads.turn[i] and reads.attempt[i - 1] == reads.attempt[i]:
                gap = f" · gap {1000 * (reads.t_request[i] - reads.t_request[i - 1]):.0f} ms"
            label = (
                f"── read {reads.read_index[i] + 1} · {turn_attempt_label(state, reads.turn[i], reads.attempt[i])} · "
                f"+{reads.t_request[i]:.3f}s · {human_size(len(data))} @{reads.offset[i]}{gap} "
            )
            text = Text(label + "─" * max(0, width - len(label)), style=self.cstyle("raw--read"))
            return list(text.render(console, end=""))
        lines = self._lines_of(i, data)
        chunk = lines[line] if line < len(lines) else b""
        text = Text(no_wrap=True, overflow="crop")
        continued = (
            line == 0
            and i > 0
            and not reads.data[i - 1].endswith(b"\n")
            and reads.turn[i - 1] == reads.turn[i]
            and reads.attempt[i - 1] == reads.attempt[i]
        )
        text.append("…" if continued else " ", self.cstyle("raw--cont"))
        body, eol = (chunk[:-1], True) if chunk.endswith(b"\n") else (chunk, False)
        _append_bytes(text, body, self.cstyle("raw--text"), self.cstyle("raw--bad"), self.cstyle("raw--eol"))
        if eol:
            text.append("↵", self.cstyle("raw--eol"))
        else:
            text.append(" ┆ read ends mid-line", self.cstyle("raw--cont"))
        return list(text.render(console, end=""))


CONV_W = 4  # the conversation column of an event row (c1 ... c999; a longer id, e.g. a header's, is cut)


def _append_bytes(text: Text, data: bytes, style: Style, bad_style: Style, ctrl_style: Style) -> None:
    """Bytes as text: valid UTF-8 as is, control characters as visible escapes, invalid bytes as \\xNN."""
    s = data.decode("utf-8", "backslashreplace")
    if s.isprintable():
        text.append(s, style)
        return
    buf: list[str] = []
    for ch in s:
        if ch == "\r":
            if buf:
                text.append("".join(buf), style)
                buf = []
            text.append("␍", ctrl_style)
        elif ch == "\t":
            buf.append("    ")
        elif not ch.isprintable():
            if buf:
                text.append("".join(buf), style)
                buf = []
            text.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}", bad_style)
        else:
            buf.append(ch)
    if buf:
        text.append("".join(buf), style)

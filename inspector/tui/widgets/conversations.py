"""The conversation list of a proxied session (issue 21 §2): one row per conversation, and its collapsed line.

`ConversationsView` is a virtualized `LineView`: a frame re-renders the visible rows only (cached by the entry's
version and its age in whole seconds), so its cost does not grow with conversations that are not shown. Enter (or a
click) on a row asks to show that conversation in the panes (`ConversationChosen`); the first row, "all", shows the
whole session. `ConversationsLine` is the one-line form (a small terminal, or the list closed):
``3 conversations · showing c2 · l list · f follow newest``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Static

from inspector.state.conversations import (
    ENDED,
    FAILED,
    STREAMING,
    WAITING_TOOLS,
    ConversationEntry,
    ConversationTable,
)
from inspector.tui.widgets.base import Line, LineView, text_strip

ALL = "all conversations"
STATE_STYLES = {STREAMING: "bold green", WAITING_TOOLS: "yellow", FAILED: "bold red", ENDED: "dim yellow"}


def tokens_label(n: int) -> str:
    """1234 -> ``1.2k``; 3_400_000 -> ``3.4M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def age_label(seconds: float) -> str:
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    return f"{s // 3600}h ago"


MODEL_WIDTH = 22  # the model column (narrower when the row would not fit: 80x24 keeps the tokens in view)
ROW_WITHOUT_MODEL = 66  # the row's other columns before the tokens (marker, id, turns, state, age) and ~15 of tokens


def conversation_text(c: ConversationEntry, now: float, shown: bool, width: int = 160) -> Text:
    """One row: marker, id, model, turns, state, last activity, tokens, side requests, parent. ``width``: the
    row's cells: the model column gives way (cut with an ellipsis) so that the tokens stay in view."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("● " if shown else "  ", "bold")
    t.append(f"{c.id:<6} ", "bold")
    mw = max(8, min(MODEL_WIDTH, width - ROW_WITHOUT_MODEL))
    model = c.model or "?"
    if len(model) > mw:
        model = model[: mw - 1] + "…"
    t.append(f"{model:<{mw}} ", "dim")
    n = c.started  # (the turns that came: a replay knows a conversation's turns before they come)
    t.append(f"{n} turn{'s' if n != 1 else ''}".ljust(9))
    state = c.state
    t.append(f"{state:<18}", STATE_STYLES.get(state, ""))
    t.append(f"{age_label(now - c.t_last):<9}", "dim")
    if c.turn_usage:
        t.append(f"in {tokens_label(c.tokens_in)} out {tokens_label(c.tokens_out)}")
    else:  # no turn's usage reported yet (or ever: a chat stream without include_usage): not zeros
        t.append("no usage", "dim")
    if c.side_requests:
        t.append(f" · {c.side_requests} side", "dim")
    if c.parent:
        t.append(f" · ↳ subagent of {c.parent}", "italic cyan")
    return t


def summary_line(table: ConversationTable, shown: str | None, follow: bool) -> str:
    """The collapsed form: the count, what the panes show, the keys."""
    n = len(table)
    streaming = table.streaming
    parts = [f"{n} conversations"]
    if streaming:
        parts.append(f"{streaming} streaming")
    if table.other_requests:
        parts.append(f"{table.other_requests} other requests")
    parts.append(f"showing {shown or 'all'}{' (following newest)' if follow else ''}")
    parts.append("l list · f follow newest")
    return " · ".join(parts)


class ConversationsView(LineView):
    """Row 0: "all conversations"; then one row per conversation in order of appearance; then "other requests"."""

    @dataclass
    class ConversationChosen(Message):
        """The user chose a row: show this conversation in the panes (None: the whole session)."""

        conversation: str | None

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.table: ConversationTable | None = None
        self.now = 0.0
        self.shown: str | None = None
        self._seen: tuple[object, ...] = ()

    def show(self, table: ConversationTable, now: float, shown: str | None) -> None:
        """Point the list at a table (cheap when nothing changed: a frame renders only the visible rows)."""
        key = (id(table), table.rev, int(now), shown)
        if key == self._seen:
            return
        self._seen = key
        self.table, self.now, self.shown = table, now, shown
        self.set_row_count(len(table) + 1 + (1 if table.other_requests else 0))
        if self.selected is None:  # the keys start from the conversation shown
            self.selected = 0 if shown is None or shown not in table.by_id else table.by_id[shown].number

    def _entry(self, row: int) -> ConversationEntry | None:
        table = self.table
        if table is None or not 1 <= row <= len(table.order):
            return None
        return table.by_id[table.order[row - 1]]

    def row_key(self, row: int) -> Hashable:
        c = self._entry(row)
        if c is None:
            table = self.table
            return (row, self.shown is None, table.other_requests if table else 0, len(table or ()))
        return (c.id, c.version, int(self.now - c.t_last), self.shown == c.id)

    def render_row(self, row: int, width: int) -> Line:
        console = self.app.console
        c = self._entry(row)
        if c is not None:
            return text_strip(conversation_text(c, self.now, self.shown == c.id, width), console, width)
        table = self.table
        if row == 0:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append("● " if self.shown is None else "  ", "bold")
            t.append(f"all {len(table or ())} conversations", "bold")
            t.append("  (every turn in the panes)", "dim")
            return text_strip(t, console, width)
        n = table.other_requests if table else 0
        t = Text(f"  other requests · {n} (side requests of no conversation; never turns)", "dim", no_wrap=True)
        return text_strip(t, console, width)

    def conversation_at(self, row: int) -> tuple[bool, str | None]:
        """(choosable, conversation) of a row."""
        if row == 0:
            return True, None
        c = self._entry(row)
        return (c is not None, c.id if c is not None else None)

    def action_open_detail(self) -> None:
        row = self.selected
        if row is None:
            row = self.selected = 0
        ok, cid = self.conversation_at(row)
        if ok:
            self.post_message(self.ConversationChosen(cid))
        else:
            self.notify("side requests of no conversation are not turns: nothing to show", timeout=3)

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < self.row_count:
            self.selected = row
            self.action_open_detail()


class ConversationsLine(Static):
    """The list collapsed to one line (a small terminal, or the list closed with l)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__("", **kw)
        self._text = ""

    def show(self, table: ConversationTable, shown: str | None, follow: bool) -> None:
        text = summary_line(table, shown, follow)
        if text != self._text:
            self._text = text
            self.update(text, layout=False)  # (one line, its height set by the CSS: a new text needs no relayout)


__all__ = ["ConversationsView", "ConversationsLine", "conversation_text", "summary_line", "ALL"]

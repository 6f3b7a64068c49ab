"""The dashboard's main screen (Posting's layout: the App runs the session, a `Screen` holds the panes).

The screen owns every pane and everything they cached: a restart replaces it with a fresh `DashboardScreen`, so no
view keeps rows, item caches or scroll positions from the previous run. The App points it at a state with `show`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.widgets import Static

from inspector.state.conversations import ConversationTable
from inspector.state.fold import DashboardState
from inspector.tui.summary import fault_summary
from inspector.tui.widgets.assistant import AssistantView
from inspector.tui.widgets.base import LineView
from inspector.tui.widgets.blocks import BlocksView
from inspector.tui.widgets.conversations import ConversationsLine, ConversationsView
from inspector.tui.widgets.diagnostics import DiagnosticsView
from inspector.tui.widgets.events import EventsView
from inspector.tui.widgets.footer import KeyFooter
from inspector.tui.widgets.status import StatusBar, StatusInfo
from inspector.tui.widgets.timeline import Timeline
from inspector.tui.widgets.tools import ToolsView

CONVERSATION_ROWS = 6  # the list pane's most rows (it scrolls beyond)
MIN_SIZE = (60, 16)  # below this the dashboard says it is too small (maximize still works)
PANE_IDS = ("events", "blocks", "tools", "assistant")


class Pane(Vertical):
    """A bordered, maximizable pane; `set_note` writes the border subtitle ("+N new")."""

    ALLOW_MAXIMIZE = True

    def __init__(self, title: str, *children: Any, id: str) -> None:
        super().__init__(*children, id=id)
        self.title = title
        self.border_title = title
        self._shown = {"title": title, "subtitle": ""}  # what the borders say (markup), to skip unchanged updates

    def set_title(self, title: str) -> bool:
        """Write the top border's title (False: it says that already); repaints that border line only (the counts
        in the titles change every frame: the pane's other lines stay as they are)."""
        return self._set_border("title", title)

    def set_note(self, note: str) -> bool:
        """Write the bottom border's subtitle ("+N new"); repaints that border line only."""
        return self._set_border("subtitle", note)

    def _set_border(self, which: str, text: str) -> bool:
        if self._shown[which] == text:
            return False
        self._shown[which] = text
        if not self.is_mounted or self.size.height < 2:
            setattr(self, f"border_{which}", text)  # (Textual's setter: a full repaint)
            return True
        # what Textual's border_title setter stores (widget.py, _BorderTitle), without the full repaint it asks for
        setattr(self, f"_border_{which}", self.render_str(text).expand_tabs(4).split()[0])
        ox, oy = self.content_offset
        y = 0 if which == "title" else self.outer_size.height - 1
        self.refresh(Region(-ox, y - oy, self.outer_size.width, 1))
        return True

    def on_line_view_new_rows_noted(self, message: LineView.NewRowsNoted) -> None:
        message.stop()
        self.set_note(message.note)


def pane_titles(state: DashboardState, raw: bool) -> tuple[str, str, str, str]:
    """The four pane titles for a state (the counts a user reads first)."""
    events = f"① SSE events · {'raw bytes' if raw else state.status.events}"
    return (events, f"② Blocks · {len(state.blocks)}", f"③ Tools · {len(state.tools)}", "④ Assistant")


class DashboardScreen(Screen[None]):
    """Four live panes, the diagnostics strip, the status line and the footer. One per run of the session."""

    ALLOW_IN_MAXIMIZED_VIEW = "Footer, StatusBar"  # a maximized pane keeps the loop state in view

    def __init__(self, *, raw: bool = False) -> None:
        super().__init__()
        self.raw = raw
        self._titles_key: tuple[object, ...] | None = None  # what the pane titles were last counted for
        self._connect_text: str | None = None
        self.ready = False
        self.list_open: bool | None = None  # the conversation list: None opens it when the terminal is tall enough
        self._conv_key: tuple[object, ...] | None = None
        self.paint_seconds = 0.0  # Textual's layout and paint time since the App last took it (the frame budget)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        # a proxied session of several conversations: the list (a pane), or its one line (shown from 2 on)
        yield ConversationsLine(id="conversations-line")
        yield Pane("Conversations", ConversationsView(id="conversations"), id="conversations-pane")
        with Grid(id="panes"):
            yield Pane("① SSE events", EventsView(id="events"), id="events-pane")
            yield Pane("② Blocks", BlocksView(id="blocks"), id="blocks-pane")
            yield Pane("③ Tools", ToolsView(id="tools"), Timeline(id="timeline"), id="tools-pane")
            yield Pane("④ Assistant", AssistantView(id="assistant"), id="assistant-pane")
        yield Pane("Diagnostics", DiagnosticsView(id="diagnostics"), id="diagnostics-pane")
        yield Static(id="connect")
        yield Static(id="too-small")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.events_view = self.query_one(EventsView)
        self.blocks_view = self.query_one(BlocksView)
        self.tools_view = self.query_one(ToolsView)
        self.timeline = self.query_one(Timeline)
        self.assistant_view = self.query_one(AssistantView)
        self.diagnostics_view = self.query_one(DiagnosticsView)
        self.status_bar = self.query_one(StatusBar)
        self.panes = [self.query_one(f"#{p}-pane", Pane) for p in PANE_IDS]
        self.diagnostics_pane = self.query_one("#diagnostics-pane", Pane)
        self.conversations_view = self.query_one(ConversationsView)
        self.conversations_line = self.query_one(ConversationsLine)
        self.conversations_pane = self.query_one("#conversations-pane", Pane)
        if self.raw:
            self.events_view.set_raw(True)
        self._size_classes()
        self.events_view.focus()
        self.ready = True

    def on_resize(self) -> None:
        self._size_classes()

    def _size_classes(self) -> None:
        w, h = self.app.size
        tiny = w < MIN_SIZE[0] or h < MIN_SIZE[1]
        self.set_class(h < 32, "-short")
        self.set_class(tiny, "-tiny")
        if tiny:
            self.query_one("#too-small", Static).update(
                f"The terminal is {w}×{h}: the dashboard needs at least {MIN_SIZE[0]}×{MIN_SIZE[1]}.\n"
                "Make the window larger, or maximize one pane: 1 events · 2 blocks · 3 tools · 4 assistant."
            )

    # ------------------------------------------------------------------------------------------------ drawing
    def show(
        self,
        state: DashboardState,
        *,
        now: float,
        cursor: int | None,
        live: bool,
        info: StatusInfo,
        source: dict[str, Any],
        on_error: Callable[[Exception], None],
        conversations: tuple[ConversationTable, str | None, bool] | None = None,
        ages_now: float | None = None,
    ) -> None:
        """Point every pane at a state (each skips the work when its part did not change). `conversations`: the
        session's table, the conversation the panes show (None: all) and whether they follow the newest;
        `ages_now`: the session's time the list's ages count to (None: `now`)."""
        if not self.ready:
            return
        update: Callable[[], object]
        for update in (
            lambda: self.show_conversations(conversations, now if ages_now is None else ages_now),
            lambda: self.events_view.show(state, cursor),
            lambda: self.blocks_view.show(state),
            lambda: self.tools_view.show(state, now),
            lambda: self.timeline.show(state, now, live),
            lambda: self.assistant_view.show(state, now),
            lambda: self.diagnostics_view.show(state),
            lambda: self.status_bar.show(state, info),
            lambda: self._titles(state, source),
        ):
            try:
                update()
            except Exception as e:  # noqa: BLE001 (a display bug must not take the session down with a traceback)
                on_error(e)

    def _on_timer_update(self) -> None:
        """(Textual's screen update: the layout and paint of what changed) timed for the frame budget (the App's
        `FrameBudget` counts it as part of the frame that asked for it). Textual is pinned (8.2.8): a test checks
        that this hook is still called."""
        clock = getattr(self.app, "frame_clock", time.monotonic)
        t0 = clock()
        try:
            super()._on_timer_update()
        finally:
            self.paint_seconds += clock() - t0

    def take_paint_seconds(self) -> float:
        """The time Textual spent laying out and painting this screen since the last call."""
        spent, self.paint_seconds = self.paint_seconds, 0.0
        return spent

    def list_is_open(self) -> bool:
        return self.list_open if self.list_open is not None else not self.has_class("-short")

    def show_conversations(self, conversations: tuple[ConversationTable, str | None, bool] | None, now: float) -> None:
        """The list (or its line) from two conversations on; nothing at all for a single conversation. A frame
        costs the visible rows only (the view is virtualized; the line's counts are kept by the table)."""
        table, shown, follow = conversations or (None, None, False)
        n = len(table) if table is not None else 0
        many = n >= 2
        is_open = self.list_is_open()
        key = (many, is_open, min(n, CONVERSATION_ROWS + 1), table.other_requests > 0 if table else False)
        if key != self._conv_key:
            self._conv_key = key
            self.set_class(many, "-conversations")
            self.set_class(is_open, "-conv-open")
            rows = min(n + 1 + (1 if key[3] else 0), CONVERSATION_ROWS)
            self.conversations_pane.styles.height = rows + 2
        if not many or table is None:
            return
        if is_open:
            self.conversations_view.show(table, now, shown)
            title = f"Conversations · {n}" + (" · following newest (f)" if follow else "")
            if self.conversations_pane.border_title != title:
                self.conversations_pane.border_title = title
                self.conversations_pane.border_subtitle = "enter: show in the panes · l: close"
        else:
            self.conversations_line.show(table, shown, follow)

    def toggle_list(self) -> bool:
        """The conversation list (l): open it, or go to it when it is open and another pane has the keys (it opens
        by itself at the second conversation, without taking them); close it from there. Returns whether it is open
        now."""
        if self.ready and self.list_is_open() and not self.conversations_view.has_focus:
            self.conversations_view.focus()
            return True
        self.list_open = not self.list_is_open()
        self._conv_key = None
        if self.list_open and self.ready:
            self.conversations_view.focus()
        elif self.ready and self.conversations_view.has_focus:
            self.events_view.focus()
        return self.list_open

    def reset_panes(self) -> None:
        """The panes now show another state (another conversation): forget their rendered items, whose versions
        belong to the previous state."""
        if not self.ready:
            return
        for view in (self.blocks_view, self.tools_view, self.assistant_view):
            view.reset()
        self.events_view.follow_tail()
        self._titles_key = None

    def set_raw(self, raw: bool) -> None:
        self.raw = raw
        if self.ready:
            self.events_view.set_raw(raw)

    def follow_tail(self) -> None:
        if self.ready:
            self.events_view.follow_tail()

    def _titles(self, state: DashboardState, source: dict[str, Any]) -> None:
        key = (id(state), state.n, self.raw)  # a frame where nothing was folded has nothing new to count
        if key == self._titles_key:
            return
        self._titles_key = key
        for pane, title in zip(self.panes, pane_titles(state, self.raw), strict=True):
            pane.set_title(title)
        diag = self.diagnostics_pane
        n = len(state.diagnostics)
        errors = sum(1 for d in state.diagnostics[-200:] if d.severity == "error")
        # the fault summary stays in the border, whatever the panes scrolled to
        summary = fault_summary(state)
        title = f"Diagnostics · {summary}" if summary else "Diagnostics · 0"
        if diag.set_title(title):
            diag.set_class(errors > 0, "-errors")
            diag.set_class(n == 0 and not summary, "-empty")
        self._connect_line(state, source)

    def _connect_line(self, state: DashboardState, source: dict[str, Any]) -> None:
        """proxy / serve --tui: the address to point a harness at, in full."""
        src = state.status.source or source or {}
        listen = src.get("listen") if isinstance(src, dict) else None
        if state.status.finished:  # the session ended: nothing listens there any more (the status line says why)
            listen = None
        text = f"point a harness here:  ANTHROPIC_BASE_URL={listen}" if listen else ""
        # both SDKs' variables where both APIs are answered: serve, or a proxy with an OpenAI upstream (watch)
        if listen and (src.get("type") == "serve" or src.get("openai_upstream")):
            text += f"  ·  OPENAI_BASE_URL={listen}/v1"
            if len(text) + 2 > self.size.width:  # (one line: the short form keeps both in view)
                text = f"ANTHROPIC_BASE_URL={listen}  (OPENAI_BASE_URL: the same + /v1)"
        if self._connect_text != text:
            self._connect_text = text
            banner = self.query_one("#connect", Static)
            banner.update(text)
            banner.display = bool(text)

    def toggle_maximize(self, n: int) -> None:
        """Maximize pane n (1-4), or restore it if it is maximized."""
        pane = self.panes[int(n) - 1]
        if self.maximized is pane:
            self.minimize()
        else:
            self.maximize(pane, container=False)
            target = pane.query_one(".pane-main") if pane.query(".pane-main") else None
            (target or pane.children[0]).focus()


__all__ = ["DashboardScreen", "Pane", "pane_titles", "MIN_SIZE"]

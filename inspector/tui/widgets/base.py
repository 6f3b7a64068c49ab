"""Virtualized line views (Line API): only visible rows are rendered, rendered rows are cached.

`LineView` renders rows on demand from compact records (the SSE events pane); `SectionView` concatenates cached
per-item line lists (blocks, tools, assistant, diagnostics), so only items whose version changed are re-rendered.
Both follow the tail while the user is at the bottom and show "+N new" when the user has scrolled up.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from inspector.tui.messages import DetailRequested

_NULL = Style()

# Time-travel keys work whatever pane has focus: the views hand them to the app instead of scrolling sideways.
CURSOR_BINDINGS = [
    Binding("left", "app.cursor('prev')", "Back", show=False),
    Binding("right", "app.cursor('next')", "Forward", show=False),
    Binding("home", "app.cursor('home')", "First event", show=False),
    Binding("end", "app.cursor('end')", "Live", show=False),
]
# Every row can be read in full: up/down select a row, Enter (or a click) opens its detail view.
ROW_BINDINGS = [
    Binding("up", "select(-1)", "Previous row", id="row-prev", show=False, tooltip="Select the row above"),
    Binding("down", "select(1)", "Next row", id="row-next", show=False, tooltip="Select the row below"),
    Binding("enter", "open_detail", "Detail", id="detail", tooltip="Read the selected row in full (or click a row)"),
]


Line = list[Segment]  # one row as rich Segments, before it is padded to the width and given the base style


def text_strip(text: Text, console: Console, width: int, style: Style | None = None) -> Line:
    """One line of text as segments, cut to `width` cells (with an ellipsis if the text asks for it)."""
    if text.cell_len > width:
        text = text.copy()
        text.truncate(width, overflow="ellipsis" if text.overflow == "ellipsis" else "crop")
    return list(text.render(console, end=""))


def wrap_strips(text: Text, console: Console, width: int, style: Style | None = None, *, indent: int = 0) -> list[Line]:
    """Word-wrapped text (folding long words) as lines of segments; `indent` cells before each line."""
    inner = max(4, width - indent)
    out: list[Line] = []
    pad = [Segment(" " * indent, style)] if indent else []
    for line in text.wrap(console, inner, overflow="fold", no_wrap=False):
        line.rstrip_end(inner)
        out.append(pad + list(line.render(console, end="")))
    return out


def finish_line(segments: Any, width: int, base: Style) -> Strip:
    """Segments (or a Strip) as a final row: exactly `width` cells, the widget's base style underneath.

    One Strip per row (a Strip carries seven caches: creating three per row, as crop_extend + apply_style would,
    costs more than the text itself)."""
    segs = Segment.adjust_line_length(list(segments), width, style=base)
    return Strip(list(Segment.apply_style(segs, base)), width)


def chunk_text(text: str, width: int, *, words: bool = False) -> list[tuple[int, int]]:
    """Character ranges of `text` split on newlines and then every `width` characters (hard wrap, for buffers);
    `words`: break at the last space that fits instead (the space itself is left out), hard only inside a word."""
    width = max(1, width)
    out: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    while start <= n:
        nl = text.find("\n", start)
        end = n if nl < 0 else nl
        if end == start:
            out.append((start, start))
        pos = start
        while pos < end:
            stop = min(end, pos + width)
            if words and stop < end:
                sp = text.rfind(" ", pos + 1, stop + 1)
                if sp > pos:
                    out.append((pos, sp))
                    pos = sp + 1
                    continue
            out.append((pos, stop))
            pos = stop
        if nl < 0:
            break
        start = nl + 1
        if start == n:
            break
    return out


class LineView(ScrollView, can_focus=True):
    """Rows rendered on demand (`render_row`), cached by `row_key`, following the tail."""

    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [*CURSOR_BINDINGS, *ROW_BINDINGS]
    COMPONENT_CLASSES = {"lv--selected"}

    @dataclass
    class NewRowsNoted(Message):
        """The "+N new" count changed (0: back at the tail): the pane shows `note` in its border."""

        note: str

    DEFAULT_CSS = """
    LineView {
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    LineView > .lv--selected { background: $accent 35%; }
    """

    follow: reactive[bool] = reactive(True, repaint=False, init=False)
    """Follow mode: the view sticks to the tail while the user is at the bottom (scrolling up turns it off)."""
    selected: reactive[int | None] = reactive(None)
    """The selected row (Enter opens its detail); None: nothing selected."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._count = 0
        self._new = 0  # rows added while the user is scrolled up
        self._cache: LRUCache[Hashable, Strip] = LRUCache(2048)
        self._programmatic = False
        self._base: Style | None = None
        self._cstyles: dict[tuple[str, ...], Style] = {}  # component styles, until the styles change

    # -- to implement
    def render_row(self, row: int, width: int) -> Line | Strip:  # pragma: no cover - abstract
        raise NotImplementedError

    def row_key(self, row: int) -> Hashable:
        return row

    # -- styles
    def cstyle(self, *names: str) -> Style:
        """A component class's rich style (partial: only what the class sets), cached until the styles change: a
        frame reads some ten per rendered row, and each read walks the widget's styles (the status line does the
        same, `StatusBar.c`)."""
        # before the widget's CSS is applied there are no component styles yet: render plain (caches are dropped
        # by notify_style_update when the styles arrive)
        style = self._cstyles.get(names)
        if style is None:
            style = self._cstyles[names] = self.get_component_rich_style(*names, partial=True, default=_NULL)
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        if hasattr(self, "_cstyles"):  # (not before __init__ has made it)
            self._cstyles.clear()
        self._cache.clear()
        self.on_styles_changed()

    @property
    def base_style(self) -> Style:
        """The widget's own rich style (background, color), cached: `rich_style` walks the DOM on every call."""
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def on_styles_changed(self) -> None:
        """Called when CSS or the theme changes (drop caches built from styles)."""

    # -- size and tail following
    @property
    def row_count(self) -> int:
        return self._count

    @property
    def new_rows(self) -> int:
        return self._new

    def set_row_count(self, count: int, *, changed: bool = True) -> None:
        """Declare the number of rows. Follows the tail if the user was at the bottom, else counts new rows."""
        old = self._count
        self._count = count
        width = self.scrollable_content_region.width or self.size.width
        size = Size(max(1, width), count)
        if size != self.virtual_size:
            # Set without the reactive's layout refresh: a line view has no children, so a new virtual size needs
            # no screen layout (which would cost a full-screen relayout per frame while streaming). The scrollbar
            # keeps its own copy of the virtual height: update it now (or the thumb lags behind the content).
            self.set_reactive(ScrollView.virtual_size, size)
            self._scroll_update(size)
        if count < old:
            self._new = 0
        if self.follow:
            self._scroll_to_end()
        elif count > old:
            self._new += count - old
            self.on_new_rows(self._new)
        if changed:
            self.refresh()

    def _scroll_to_end(self) -> None:
        target = max(0, self._count - self.scrollable_content_region.height)
        if self.scroll_y != target:
            self._programmatic = True
            try:
                self.scroll_to(y=target, animate=False, force=True)
            finally:
                self._programmatic = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._programmatic:
            return
        at_end = new_value >= self.max_scroll_y
        if at_end != self.follow or (at_end and self._new):
            self.follow = at_end
            if at_end:
                self._new = 0
            self.on_new_rows(self._new)

    def on_new_rows(self, n: int) -> None:
        """The "+N new" count changed (0: back at the tail): the pane shows it (a message, not a reach up)."""
        self.post_message(self.NewRowsNoted(f"+{n} new ↓ (end)" if n and not self.follow else ""))

    # -- selection and detail
    def detail_at(self, row: int) -> tuple[str, Any] | None:
        """What the detail view shows for a row: (kind, key), or None (a row with nothing more to read)."""
        return None

    def watch_selected(self, old: int | None, new: int | None) -> None:
        self.refresh()

    def action_select(self, delta: int) -> None:
        if self._count == 0:
            return
        if self.selected is None:
            top = int(self.scroll_offset.y)
            row = top + self.scrollable_content_region.height - 1 if delta < 0 else top
        else:
            row = self.selected + delta
        row = max(0, min(self._count - 1, row))
        self.selected = row
        h = self.scrollable_content_region.height
        y = int(self.scroll_offset.y)
        if row < y or row >= y + h:
            self.follow = False
            self._programmatic = True
            try:
                self.scroll_to(y=row if row < y else row - h + 1, animate=False, force=True)
            finally:
                self._programmatic = False

    def action_open_detail(self) -> None:
        row = self.selected
        if row is None:  # nothing selected: the newest row worth reading (selected first, so Enter shows which)
            row = self.default_detail_row()
            if row is None:
                self.notify("nothing to read in full here yet", severity="warning", timeout=3)
                return
            self.selected = row
        target = self.detail_at(row)
        if target is None:
            self.notify("this row has nothing more to show", severity="warning", timeout=3)
            return
        self.post_message(DetailRequested(*target))

    def default_detail_row(self) -> int | None:
        """The row Enter opens when none is selected: the last row that has a detail (a view may prefer another)."""
        return next((r for r in range(self._count - 1, max(-1, self._count - 200), -1) if self.detail_at(r)), None)

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y + event.y)
        if 0 <= row < self._count:
            self.selected = row
            target = self.detail_at(row)
            if target is not None:
                self.post_message(DetailRequested(*target))

    def follow_tail(self) -> None:
        self.follow = True
        self._new = 0
        self._scroll_to_end()
        self.on_new_rows(0)

    def scroll_to_row(self, row: int, *, center: bool = True) -> None:
        """Make a row visible (centered) without changing follow mode semantics for the user."""
        h = self.scrollable_content_region.height
        y = max(0, row - h // 2) if center else row
        self.follow = y >= max(0, self._count - h)
        self._programmatic = True
        try:
            self.scroll_to(y=y, animate=False, force=True)
        finally:
            self._programmatic = False

    def on_resize(self) -> None:
        self._cache.clear()
        self.set_row_count(self._count)

    # -- rendering
    def render_line(self, y: int) -> Strip:
        _, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.base_style
        if row >= self._count or width <= 0:
            return Strip.blank(max(0, width), base)
        key = (self.row_key(row), width)
        strip = self._cache.get(key)
        if strip is None:
            strip = finish_line(self.render_row(row, width), width, base)
            self._cache[key] = strip
        return self._mark(row, strip)

    def _mark(self, row: int, strip: Strip) -> Strip:
        """The selected row, highlighted (on the way out: cached strips stay unmarked)."""
        if row == self.selected:
            return strip.apply_style(self.cstyle("lv--selected"))
        return strip


class SectionView(LineView):
    """Items, each rendered to a list of strips cached by (key, version, width); rows are their concatenation."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._lines: list[Strip] = []
        self._item_cache: LRUCache[Hashable, list[Strip]] = LRUCache(4096)
        self._prev_items: list[tuple[Hashable, Hashable]] = []
        self._item_starts: list[int] = []
        self._item_keys: list[Hashable] = []
        self._prev_width = -1
        self._seen: tuple[object, ...] = ()

    def on_styles_changed(self) -> None:
        self._item_cache.clear()
        self._prev_items = []

    def revisions(self, state: Any) -> tuple[object, ...]:
        """The state revisions this view depends on (a subclass names them)."""
        return ()

    def show(self, state: Any, now: float) -> None:
        """Rebuild when the state's relevant revisions, the width, or (while a tool runs, for its elapsed time)
        the clock at 0.1 s changed; otherwise do nothing."""
        running = any(state.tools[i].state == "running" for i in state.tool_order[-64:])
        key = (id(state), *self.revisions(state), self.content_width, round(now, 1) if running else None)
        if key == self._seen:
            return
        self._seen = key
        self.state, self.now = state, now
        self.rebuild()

    def reset(self) -> None:
        """Forget every rendered item (a new session: keys and versions start over)."""
        self._item_cache.clear()
        self._cache.clear()
        self._prev_items, self._item_starts, self._prev_width = [], [], -1
        self._item_keys = []
        self._seen = ()
        self.set_lines([])

    def on_resize(self) -> None:
        self._item_cache.clear()
        self._prev_items = []
        super().on_resize()
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the rows (subclasses call `set_items`)."""

    def item_lines(self, key: Hashable, version: Hashable, render: Any, width: int) -> list[Strip]:
        """An item's rows, rendered once per (key, version, width): final strips (width cells, base style)."""
        ck = (key, version, width)
        lines = self._item_cache.get(ck)
        if lines is None:
            base = self.base_style
            lines = [finish_line(s, width, base) for s in render(width)]
            self._item_cache[ck] = lines
        return lines

    def kept_items(self, width: int) -> int:
        """How many items of the last `set_items` a caller may leave out of the next one (`start`): all of them at the
        same width; none once the rendered items were forgotten (a resize, new styles, a reset)."""
        return len(self._prev_items) if width == self._prev_width else 0

    def set_items(self, items: list[tuple[Hashable, Hashable, Any]], width: int, *, start: int = 0) -> None:
        """Rows from (key, version, render) items. Items are usually appended or changed at the tail (streaming):
        the rows of the unchanged leading items are reused, so a frame costs the tail, not the whole history.

        `start`: `items` are the items from `start` on; the caller vouches that the first `start` are those of the last
        call, unchanged (at most `kept_items(width)`): a frame then does not even walk the history's items."""
        if start > self.kept_items(width):
            raise ValueError(f"set_items: {start} items kept, but only {self.kept_items(width)} can be")
        prev, starts, old, keys = self._prev_items, self._item_starts, self._lines, self._item_keys
        same = start
        n = min(len(prev), start + len(items))
        if width == self._prev_width:
            while same < n and prev[same] == items[same - start][:2]:
                same += 1
        if same == start + len(items) == len(prev):
            return
        # in place: the kept items' rows, starts and keys are not copied (a frame costs the changed tail)
        del old[starts[same] if same < len(starts) else len(old) :]
        del starts[same:], prev[same:], keys[same:]
        for key, version, render in items[same - start :]:
            starts.append(len(old))
            old.extend(self.item_lines(key, version, render, width))
            prev.append((key, version))
            keys.append(key)  # (unlike _prev_items, not cleared when styles change)
        self._prev_width = width
        self.set_lines(old)

    def set_lines(self, lines: list[Strip]) -> None:
        self._lines = lines
        self._cache.clear()
        self.set_row_count(len(lines))

    def render_row(self, row: int, width: int) -> Line | Strip:
        return self._lines[row]

    def row_key(self, row: int) -> Hashable:
        return (row, id(self._lines[row]))

    def render_line(self, y: int) -> Strip:
        _, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= len(self._lines) or width <= 0:
            return Strip.blank(max(0, width), self.base_style)
        strip = self._lines[row]
        if strip.cell_length != width:  # rendered for another width (a resize is on its way)
            strip = strip.crop_extend(0, width, self.base_style)
        return self._mark(row, strip)

    def item_key_at(self, row: int) -> Hashable | None:
        """The key of the item a row belongs to (set_items' keys)."""
        if not 0 <= row < len(self._lines) or not self._item_starts:
            return None
        i = bisect.bisect_right(self._item_starts, row) - 1
        return self._item_keys[i] if 0 <= i < len(self._item_keys) else None

    @property
    def content_width(self) -> int:
        return max(10, self.scrollable_content_region.width or self.size.width or 80)


def concat(parts: Iterable[list[Strip]]) -> list[Strip]:
    out: list[Strip] = []
    for p in parts:
        out.extend(p)
    return out

"""Virtualized line views (Line API): only visible rows are rendered, rendered rows are cached.

`LineView` renders rows on demand from compact records (the SSE events pane); `SectionView` concatenates cached
per-item line lists (blocks, tools, assistant, diagnostics), so only items whose version changed are re-rendered.
Both follow the tail while the user is at the bottom and show "+N new" when the user has scrolled up.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

# Time-travel keys work whatever pane has focus: the views hand them to the app instead of scrolling sideways.
CURSOR_BINDINGS = [
    Binding("left", "app.cursor('prev')", "Back", show=False),
    Binding("right", "app.cursor('next')", "Forward", show=False),
    Binding("home", "app.cursor('home')", "First event", show=False),
    Binding("end", "app.cursor('end')", "Live", show=False),
]


def text_strip(text: Text, console: Console, width: int, style: Style | None = None) -> Strip:
    """One line of text as a strip of exactly `width` cells (cut with an ellipsis if the text asks for it)."""
    if text.overflow == "ellipsis" and text.cell_len > width:
        text = text.copy()
        text.truncate(width, overflow="ellipsis")
    segments = list(text.render(console, end=""))
    strip = Strip(segments)
    return strip.crop_extend(0, width, style)


def wrap_strips(text: Text, console: Console, width: int, style: Style | None = None, *,
                indent: int = 0) -> list[Strip]:
    """Word-wrapped text (folding long words) as strips of `width` cells; `indent` cells before each line."""
    inner = max(4, width - indent)
    out: list[Strip] = []
    pad = [Segment(" " * indent, style)] if indent else []
    for line in text.wrap(console, inner, overflow="fold", no_wrap=False):
        line.rstrip_end(inner)
        segs = pad + list(line.render(console, end=""))
        out.append(Strip(segs).crop_extend(0, width, style))
    return out


def chunk_text(text: str, width: int) -> list[tuple[int, int]]:
    """Character ranges of `text` split on newlines and then every `width` characters (hard wrap, for buffers)."""
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
            out.append((pos, min(end, pos + width)))
            pos += width
        if nl < 0:
            break
        start = nl + 1
        if start == n:
            break
    return out


class LineView(ScrollView, can_focus=True):
    """Rows rendered on demand (`render_row`), cached by `row_key`, following the tail."""

    BINDINGS = CURSOR_BINDINGS

    DEFAULT_CSS = """
    LineView {
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._count = 0
        self._new = 0  # rows added while the user is scrolled up
        self.follow = True
        self._cache: LRUCache[Hashable, Strip] = LRUCache(2048)
        self._programmatic = False

    # -- to implement
    def render_row(self, row: int, width: int) -> Strip:  # pragma: no cover - abstract
        raise NotImplementedError

    def row_key(self, row: int) -> Hashable:
        return row

    # -- styles
    def cstyle(self, *names: str) -> Style:
        """A component class's rich style (partial: only what the class sets)."""
        return self.get_component_rich_style(*names, partial=True)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self.on_styles_changed()

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
        self.virtual_size = Size(max(1, width), count)
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
        """The "+N new" count changed (0: back at the tail)."""
        for node in self.ancestors:
            note = getattr(node, "set_note", None)
            if note is not None:
                note(f"+{n} new ↓ (end)" if n and not self.follow else "")
                break

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
        base = self.rich_style
        if row >= self._count or width <= 0:
            return Strip.blank(max(0, width), base)
        key = (self.row_key(row), width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self.render_row(row, width).crop_extend(0, width, base).apply_style(base)
            self._cache[key] = strip
        return strip


class SectionView(LineView):
    """Items, each rendered to a list of strips cached by (key, version, width); rows are their concatenation."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._lines: list[Strip] = []
        self._item_cache: LRUCache[Hashable, list[Strip]] = LRUCache(4096)

    def on_styles_changed(self) -> None:
        self._item_cache.clear()

    def on_resize(self) -> None:
        self._item_cache.clear()
        super().on_resize()
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the rows (subclasses call `set_items`)."""

    def item_lines(self, key: Hashable, version: Hashable, render: Any, width: int) -> list[Strip]:
        ck = (key, version, width)
        lines = self._item_cache.get(ck)
        if lines is None:
            lines = render(width)
            self._item_cache[ck] = lines
        return lines

    def set_lines(self, lines: list[Strip]) -> None:
        self._lines = lines
        self._cache.clear()
        self.set_row_count(len(lines))

    def render_row(self, row: int, width: int) -> Strip:
        return self._lines[row]

    def row_key(self, row: int) -> Hashable:
        return (row, id(self._lines[row]))

    def render_line(self, y: int) -> Strip:
        _, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if row >= len(self._lines) or width <= 0:
            return Strip.blank(max(0, width), base)
        return self._lines[row].crop_extend(0, width, base).apply_style(base)

    @property
    def content_width(self) -> int:
        return max(10, self.scrollable_content_region.width or self.size.width or 80)


def concat(parts: Iterable[list[Strip]]) -> list[Strip]:
    out: list[Strip] = []
    for p in parts:
        out.extend(p)
    return out

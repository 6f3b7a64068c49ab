"""Virtualized line views (Line API): only visible rows are rendered, rendered rows are cached.

`LineView` renders rows on demand from compact records (the SSE events pane); `SectionView` concatenates cached
per-item line lists (blocks, tools, assistant, diagnostics), so only items whose version changed are re-rendered.
Both follow the tail while the user is at the bottom and show "+N new" when the user has scrolled up.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import ceil
from typing import Any, ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

from inspector.tui.messages import DetailRequested

_NULL = Style()
_UNPAINTED = object()  # a line not painted since the rows were forgotten
STRIP_CACHE = 4096  # a SectionView's distinct finished lines kept (a few screens of every pane's items)

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


class Deferred:
    """A row whose segments are made when it is first painted (`SectionView.finish`), not when its item is rendered:
    an item's row count is known at once, but under a flood most new items scroll past unseen, and turning their
    text into segments was most of a frame (the Blocks pane: every new block's buffer lines, ~1 ms a block).
    ``text_strip`` of the Text ``make()`` builds, once; what ``make`` reads must not change meanwhile (a block's
    fragments only grow: a range of its buffer stays the same text)."""

    __slots__ = ("_make", "_console", "_width", "_line")

    def __init__(self, make: Callable[[], Text], console: Console, width: int) -> None:
        self._make: Callable[[], Text] | None = make
        self._console, self._width = console, width
        self._line: Line | None = None

    def segments(self) -> Line:
        """`text_strip` of the text ``make`` gives, made once."""
        if self._line is None:
            assert self._make is not None
            self._line = text_strip(self._make(), self._console, self._width)
            self._make = None
        return self._line


Row = Line | Strip | Deferred  # a SectionView's row: segments, a finished Strip, or segments made when painted


def wrap_strips(text: Text, console: Console, width: int, style: Style | None = None, *, indent: int = 0) -> list[Line]:
    """Word-wrapped text (folding long words) as lines of segments; `indent` cells before each line."""
    inner = max(4, width - indent)
    out: list[Line] = []
    pad = [Segment(" " * indent, style)] if indent else []
    for line in text.wrap(console, inner, overflow="fold", no_wrap=False):
        line.rstrip_end(inner)
        out.append(pad + list(line.render(console, end="")))
    return out


def _no_refresh(*regions: Region, **kw: Any) -> None:
    """(A scrollbar's `refresh` while `_scrollbar_repainted_if_moved` decides.)"""


def _drawn_bar(bar: ScrollBar) -> tuple[object, ...]:
    """What a vertical scrollbar draws (the thumb's cells, in Textual's eighths), from its current values: the same
    computation as `ScrollBar._render_bar` (Textual 8.2.8, pinned)."""
    height = bar.size.height
    virtual = ceil(bar.window_virtual_size)
    window = ceil(bar.window_size if bar.window_size < bar.window_virtual_size else 0)
    segments = ScrollBarRender.render_bar(
        size=height, virtual_size=virtual, window_size=window, position=bar.position, thickness=bar.thickness
    ).segments
    return (height, bar.thickness, bar.display, *segments)


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
        # what each visible line (y) was last painted with: (row, row key) (a SectionView: the row as rendered). A
        # frame that does not scroll repaints only the lines whose row or key changed (Toolong's `refresh_lines`)
        self._painted: dict[int, object] = {}
        self._style_signature: tuple[object, ...] | None = None  # (what rows were drawn with: `_restyle`)
        self._restyle_pending = False

    # -- to implement
    def render_row(self, row: int, width: int) -> Line | Strip:  # pragma: no cover - abstract
        raise NotImplementedError

    def row_key(self, row: int) -> Hashable:
        return row

    # -- styles
    def cstyle(self, *names: str) -> Style:
        """A component class's rich style (partial: only what the class sets), cached until the styles change: a
        frame reads some ten per rendered row, and each read walks the widget's styles (the status line does the
        same, `TextLines.cstyle`)."""
        # before the widget's CSS is applied there are no component styles yet: render plain (caches are dropped
        # by notify_style_update when the styles arrive)
        style = self._cstyles.get(names)
        if style is None:
            style = self._cstyles[names] = self.get_component_rich_style(*names, partial=True, default=_NULL)
        return style

    def notify_style_update(self) -> None:
        """Textual re-applies the styles on every focus, hover or class change, most often to the same values: the
        rows (and everything cached from styles) are dropped only if what they are drawn with changed, checked once
        the styles are in place (the component styles are applied after this call)."""
        super().notify_style_update()
        if not hasattr(self, "_painted"):  # (not before __init__ has made it)
            return
        self._base = None
        if not self._restyle_pending:
            self._restyle_pending = True
            self.call_later(self._restyle)

    def style_signature(self) -> tuple[object, ...]:
        """What rows are drawn with: the widget's style and its component classes' styles."""
        names = sorted(self._get_component_classes())
        return (self.rich_style, *(self.get_component_rich_style(n, partial=True, default=_NULL) for n in names))

    def _restyle(self) -> None:
        self._restyle_pending = False
        signature = self.style_signature()
        if signature == self._style_signature:
            return
        self._style_signature = signature
        self._base = None
        self._cstyles.clear()
        self.forget_rows()
        self.on_styles_changed()
        self.refresh()

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

    def forget_rows(self) -> None:
        """Drop every rendered row (what rows show changed beyond their keys: another state, a cursor, a mode): the
        next `set_row_count` repaints every visible line."""
        self._cache.clear()
        self._painted.clear()

    def set_row_count(self, count: int, *, changed: bool = True) -> None:
        """Declare the number of rows. Follows the tail if the user was at the bottom, else counts new rows.

        `changed`: repaint what changed. A frame that scrolls repaints the view (every line shows another row); one
        that does not repaints only the visible lines whose row key changed (an appended row below the view, a tail
        that grew under a scrolled-up user: nothing, or the new lines), never the whole pane."""
        old = self._count
        self._count = count
        scroll_before = round(self.scroll_y)
        width = self.scrollable_content_region.width or self.size.width
        size = Size(max(1, width), count)
        with self._scrollbar_repainted_if_moved():
            if size != self.virtual_size:
                # Set without the reactive's layout refresh: a line view has no children, so a new virtual size
                # needs no screen layout (which would cost a full-screen relayout per frame while streaming). The
                # scrollbar keeps its own copy of the virtual height: update it now (or the thumb lags behind).
                self.set_reactive(ScrollView.virtual_size, size)
                self._scroll_update(size)
            if self.follow:
                self._scroll_to_end()
        if count < old:
            self._new = 0
        if not self.follow and count > old:
            self._new += count - old
            self.on_new_rows(self._new)
        if changed and round(self.scroll_y) == scroll_before:  # (a scroll repaints the whole view itself)
            self.refresh_changed_rows()

    @contextmanager
    def _scrollbar_repainted_if_moved(self) -> Iterator[None]:
        """The vertical scrollbar repaints only if what it draws changed: its reactives (virtual height, window,
        position) each ask for a repaint, but on a long view a frame's new rows rarely move the thumb by an eighth of
        a cell (Textual's granularity), and a repainted scrollbar costs a pane's height of lines."""
        bar = self._vertical_scrollbar
        if bar is None:
            yield
            return
        before = _drawn_bar(bar)
        bar.refresh = _no_refresh  # type: ignore[method-assign,assignment]  # (this instance, for the block only)
        try:
            yield
        finally:
            del bar.refresh
            if _drawn_bar(bar) != before:
                bar.refresh()

    def painted_key(self, row: int) -> object:
        """What line `row` is painted with, compared with the last paint of its line (None: no row, blank)."""
        return (row, self.row_key(row)) if row < self._count else None

    def refresh_changed_rows(self) -> None:
        """Repaint the visible lines whose row or row key changed since they were painted (one region)."""
        if not self._painted:
            self.refresh()
            return
        top = round(self.scroll_y)
        height = self.scrollable_content_region.height
        painted = self._painted
        first = last = -1
        for y in range(height):
            now = self.painted_key(top + y)
            was = painted.get(y, _UNPAINTED)
            if now is not was and now != was:
                if first < 0:
                    first = y
                last = y
        if first >= 0:
            self.refresh(Region(0, first, max(1, self.scrollable_content_region.width), last - first + 1))

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
        self.forget_rows()
        self.set_row_count(self._count)

    # -- rendering
    def render_line(self, y: int) -> Strip:
        _, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.base_style
        if row >= self._count or width <= 0:
            self._painted[y] = None
            return Strip.blank(max(0, width), base)
        rk = self.row_key(row)
        self._painted[y] = (row, rk)
        key = (rk, width)
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
        # the rows as rendered by their items (segments, or strips), finished (`finish`) only when painted: an item
        # whose rows are off screen (a closed 10 KB text, a long history) costs no Strip at all
        self._rows: list[Row] = []
        self._item_cache: LRUCache[Hashable, list[Row]] = LRUCache(4096)
        self._prev_items: list[tuple[Hashable, Hashable]] = []
        self._item_starts: list[int] = []
        self._item_keys: list[Hashable] = []
        self._prev_width = -1
        self._seen: tuple[object, ...] = ()
        # final strips by what they show: (width, segments) -> Strip. A re-rendered item (a growing block, the open
        # text) gets back the very Strip of every line that did not change (finishing a line, a Strip with its
        # caches, is done once per distinct line shown)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(STRIP_CACHE)

    def on_styles_changed(self) -> None:
        self._item_cache.clear()
        self._strips.clear()
        self._prev_items = []
        self._seen = ()
        if self.is_mounted:  # the rows hold the old styles: draw them again (not when the state next changes)
            self.rebuild()

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
        self.forget_rows()
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

    def item_lines(self, key: Hashable, version: Hashable, render: Any, width: int) -> list[Row]:
        """An item's rows, rendered once per (key, version, width) (finished when painted: `finish`)."""
        ck = (key, version, width)
        lines = self._item_cache.get(ck)
        if lines is None:
            lines = list(render(width))
            self._item_cache[ck] = lines
        return lines

    def finish(self, row: Row, width: int) -> Strip:
        """`finish_line`, once per distinct line at a width: the same segments give back the same Strip."""
        segments = row.segments() if isinstance(row, Deferred) else row
        key = (width, *segments)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = finish_line(segments, width, self.base_style)
        return strip

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
        prev, starts, old, keys = self._prev_items, self._item_starts, self._rows, self._item_keys
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

    def set_lines(self, lines: list[Row]) -> None:
        """The rows; the visible lines whose row changed (what it shows) are repainted (`set_row_count`)."""
        self._rows = lines
        self.set_row_count(len(lines))

    @property
    def _lines(self) -> list[Strip]:
        """Every row as painted at the current width (tests)."""
        width = self.scrollable_content_region.width or self.content_width
        return [self.finish(r, width) for r in self._rows]

    def render_row(self, row: int, width: int) -> Row:  # type: ignore[override]
        return self._rows[row]

    def row_key(self, row: int) -> Hashable:
        return (row, id(self._rows[row]))

    def painted_key(self, row: int) -> object:
        return self._rows[row] if row < len(self._rows) else None

    def render_line(self, y: int) -> Strip:
        _, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= len(self._rows) or width <= 0:
            self._painted[y] = None
            return Strip.blank(max(0, width), self.base_style)
        raw = self._painted[y] = self._rows[row]
        return self._mark(row, self.finish(raw, width))

    def item_key_at(self, row: int) -> Hashable | None:
        """The key of the item a row belongs to (set_items' keys)."""
        if not 0 <= row < len(self._rows) or not self._item_starts:
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


class TextLines(Widget):
    """A widget drawn from the one Text its `render()` returns (one line per newline, no wrapping), with the Line
    API: each line a Strip cached by what it shows, and `update_lines` (instead of `refresh`) repaints only the lines
    that changed; no repaint at all when the text is the same (the status line's second line, a timeline whose bars
    did not move). Textual's own path would convert the whole Text to its Content and re-render every line.

    A subclass's `render()` reads `self.size` (its width): the lines are rebuilt when the size or the styles change."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._text_lines: list[Strip] = []
        self._text_for: tuple[object, ...] | None = None  # (size) the lines were built for; None: rebuild
        self._line_strips: LRUCache[tuple[object, ...], Strip] = LRUCache(256)
        self._cstyles: dict[str, Style] = {}

    def cstyle(self, name: str) -> Style:
        """A component class's rich style, cached until the styles change (a render reads a few dozen, several times
        a second while streaming; each read walks the widget's styles)."""
        style = self._cstyles.get(name)
        if style is None:
            style = self._cstyles[name] = self.get_component_rich_style(name, partial=True, default=Style())
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if hasattr(self, "_line_strips"):  # (not before __init__ has made it)
            self._text_for = None
            self._line_strips.clear()
            self._cstyles.clear()

    def _build_lines(self) -> list[Strip]:
        width = self.size.width
        self._text_for = (self.size,)
        if width <= 0:
            self._text_lines = []
            return self._text_lines
        style = self.visual_style
        cache = self._line_strips
        out: list[Strip] = []
        text = self.render()
        if not isinstance(text, Text):
            text = Text(str(text))
        for line in text.split("\n"):
            key = (width, style, line.style, line.plain, *line.spans)
            strip = cache.get(key)
            if strip is None:
                # Textual's own rendering of the line (Widget._render_content: the same strips, line by line)
                strips = Visual.to_strips(self, visualize(self, line, markup=self._render_markup), width, 1, style)
                strip = cache[key] = strips[0] if strips else Strip.blank(width, style.rich_style)
            out.append(strip)
        self._text_lines = out
        return out

    def update_lines(self) -> None:
        """Rebuild the lines from `render()` and repaint the ones that changed (one region)."""
        if not self.is_mounted or self._text_for != (self.size,) or self.text_selection is not None:
            self._text_for = None
            self.refresh()
            return
        old = self._text_lines
        new = self._build_lines()
        first = last = -1
        for y in range(max(len(old), len(new))):
            if y >= len(old) or y >= len(new) or old[y] is not new[y]:
                if first < 0:
                    first = y
                last = y
        if first >= 0:
            self.refresh(Region(0, first, self.size.width, last - first + 1))

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # text selected with the mouse: Textual's own path draws it
            return super().render_line(y)
        lines = self._text_lines if self._text_for == (self.size,) else self._build_lines()
        if 0 <= y < len(lines):
            return lines[y]
        return Strip.blank(max(0, self.size.width), self.visual_style.rich_style)

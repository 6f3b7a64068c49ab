"""What a frame repaints (issue 17: the dashboard's paint cost): the panes and Textual redraw what changed, not the
whole screen. Each test counts the lines a widget was asked to render (Textual calls `render_line` for the lines it
repaints, and only those) and checks the screen still shows the change (the SVG export of the real screen).

The figures are in tools/bench_tui.py (never timed here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.app import App, ComposeResult
from textual.cache import LRUCache
from textual.widgets import Static

from inspector.testing.conversations import interleaved_conversations
from inspector.testing.hyp import examples
from inspector.tui.app import InspectorApp
from inspector.tui.screen import Pane
from inspector.tui.widgets import assistant as assistant_module
from inspector.tui.widgets import base as base_module
from inspector.tui.widgets.assistant import markdownish_strips, open_text_cut
from inspector.tui.widgets.base import LineView, SectionView, TextLines


class Rows(LineView):
    """A line view of plain rows, keyed by their text."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.texts: list[str] = []

    def row_key(self, row: int) -> object:
        return self.texts[row]

    def render_row(self, row: int, width: int) -> list[Segment]:
        return [Segment(self.texts[row])]

    def put(self, texts: list[str]) -> None:
        self.texts = texts
        self.set_row_count(len(texts))


class Items(SectionView):
    """A section view of (key, version, lines) items."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.spec: list[tuple[str, int, list[str]]] = []
        self.renders: list[str] = []  # item keys rendered, in order

    def put(self, spec: list[tuple[str, int, list[str]]]) -> None:
        self.spec = spec
        self.rebuild()

    def rebuild(self) -> None:
        def render(key: str, lines: list[str]) -> Callable[[int], list[list[Segment]]]:
            def draw(width: int) -> list[list[Segment]]:
                self.renders.append(key)
                return [[Segment(t)] for t in lines]

            return draw

        self.set_items([(k, v, render(k, lines)) for k, v, lines in self.spec], self.content_width)


class Lines(TextLines):
    """A TextLines widget showing `text`."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.text = "first\nsecond"

    def render(self) -> Text:
        return Text(self.text, no_wrap=True)

    def put(self, text: str) -> None:
        self.text = text
        self.update_lines()


class PaintApp(App[None]):
    CSS = """
    Rows, Items { height: 10; }
    Lines { height: 3; }
    Pane { height: 6; border: round $primary; }
    """

    def compose(self) -> ComposeResult:
        yield Rows(id="rows")
        yield Items(id="items")
        yield Lines(id="lines")
        yield Pane("Title 0", Static("inside"), id="pane")


def painted(widget: Any) -> list[int]:
    """The content lines Textual asks `widget` to render from now on (the lines it repaints)."""
    ys: list[int] = []
    inner = widget.render_line

    def recorded(y: int) -> Any:
        ys.append(y)
        return inner(y)

    widget.render_line = recorded
    return ys


def screen_text(app: App[Any]) -> str:
    """What the terminal shows (the SVG export of the composed screen: what Textual painted, not what a widget
    would render now)."""
    return app.export_screenshot().replace("&#160;", " ")


async def test_a_line_view_scrolled_up_repaints_nothing_for_rows_appended_below_and_only_a_changed_row() -> None:
    """A user scrolled up in a growing view: appended rows (below the view) repaint nothing of it; a visible row
    whose key changed repaints that line only, and the screen shows it. (It used to repaint the whole pane every
    frame: `set_row_count` called `refresh()`.)"""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        rows = app.query_one(Rows)
        rows.put([f"row{i}" for i in range(50)])
        await pilot.pause()
        rows.scroll_to(y=0, animate=False, force=True)
        await pilot.pause()
        assert not rows.follow
        ys = painted(rows)
        rows.put(rows.texts + [f"row{i}" for i in range(50, 60)])  # appended below the view
        await pilot.pause()
        assert ys == []
        assert rows.new_rows == 10
        texts = list(rows.texts)
        texts[3] = "CHANGED3"
        rows.put(texts)
        await pilot.pause()
        assert ys == [3]
        assert "CHANGED3" in screen_text(app)


async def test_a_following_line_view_shows_the_appended_rows() -> None:
    """At the tail, appended rows scroll into view (the scroll repaints the view) and are shown."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        rows = app.query_one(Rows)
        rows.put([f"row{i}" for i in range(30)])
        await pilot.pause()
        assert rows.follow
        rows.put(rows.texts + ["appended30", "appended31"])
        await pilot.pause()
        shown = screen_text(app)
        assert "appended30" in shown and "appended31" in shown
        assert rows.scroll_offset.y == 32 - rows.scrollable_content_region.height


async def test_forgotten_rows_are_all_repainted() -> None:
    """A change beyond the row keys (another state, a time-travel cursor: `forget_rows`) repaints every line."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        rows = app.query_one(Rows)
        rows.put([f"row{i}" for i in range(5)])
        await pilot.pause()
        ys = painted(rows)
        rows.forget_rows()
        rows.put(rows.texts)
        await pilot.pause()
        assert sorted(set(ys)) == list(range(rows.scrollable_content_region.height))


async def test_a_section_view_reuses_the_strip_of_every_line_that_did_not_change() -> None:
    """An item that grows (a streaming block, the open text) is rendered again, but each line that shows the same as
    before is the very same Strip (a per-line cache keyed by what it shows and the width): only the new line is
    repainted, and shown."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        items = app.query_one(Items)
        items.put([("a", 0, ["alpha", "beta"]), ("b", 0, ["gamma"])])
        await pilot.pause()
        before = list(items._lines)
        ys = painted(items)
        items.put([("a", 0, ["alpha", "beta"]), ("b", 1, ["gamma", "delta"])])
        await pilot.pause()
        assert items.renders == ["a", "b", "b"]  # item a kept, item b rendered again
        assert all(x is y for x, y in zip(before, items._lines, strict=False))
        assert ys == [3]  # only the new line
        assert "delta" in screen_text(app)
        # an item that now shows other text: its line is repainted (the same key, a new strip)
        items.put([("a", 1, ["alpha", "BETA2"]), ("b", 1, ["gamma", "delta"])])
        await pilot.pause()
        assert ys == [3, 1]
        assert "BETA2" in screen_text(app)


async def test_a_cached_strip_is_dropped_when_the_width_or_the_styles_change() -> None:
    """The strips are cached per width: a resize renders every line at the new width; new styles (a theme) drop
    them all (the base style is in every strip)."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        items = app.query_one(Items)
        items.put([("a", 0, ["alpha", "beta"])])
        await pilot.pause()
        old = list(items._lines)
        assert {s.cell_length for s in old} == {items.scrollable_content_region.width}
        await pilot.resize_terminal(80, 40)
        await pilot.pause()
        assert {s.cell_length for s in items._lines} == {items.scrollable_content_region.width} != {60}
        assert not any(x is y for x, y in zip(old, items._lines, strict=False))
        resized = list(items._lines)
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert not any(x is y for x, y in zip(resized, items._lines, strict=False))
        last_style = list(items._lines[0])[-1].style
        assert last_style is not None and last_style.bgcolor == items.rich_style.bgcolor


async def test_a_pane_title_repaints_its_border_line_only() -> None:
    """The panes' titles carry counts that change every frame: a new title repaints the top border line (and a new
    "+N new" note the bottom one), never the pane's content lines; the screen shows it."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        pane = app.query_one(Pane)
        await pilot.pause()
        ys = painted(pane)
        assert pane.set_title("Title 12345")
        await pilot.pause()
        assert not pane.set_title("Title 12345")  # the same title: nothing to do
        assert "Title 12345" in screen_text(app)
        assert pane.set_note("+7 new")
        await pilot.pause()
        assert "+7 new" in screen_text(app)
        assert ys == []  # (a full refresh renders every content line of the pane)
        assert pane.border_title == "Title 12345"


async def test_the_scrollbar_repaints_only_when_its_thumb_moves() -> None:
    """Each frame's new rows change the scrollbar's values, but on a long view the thumb moves by a drawn eighth of a
    cell only now and then: the scrollbar is repainted only then."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        rows = app.query_one(Rows)
        rows.put([f"row{i}" for i in range(5000)])
        await pilot.pause()
        bar = rows.vertical_scrollbar
        ys = painted(bar)
        rows.put(rows.texts + ["one more"])  # 5001 rows: the thumb stays where it is drawn
        await pilot.pause()
        assert ys == []
        rows.scroll_to(y=2500, animate=False, force=True)  # the thumb moves: repainted
        await pilot.pause()
        assert ys


async def test_text_lines_repaint_the_changed_lines_only_and_nothing_for_the_same_text() -> None:
    """A TextLines widget (the status line, the timeline) repaints the lines whose text changed; the same text
    repaints nothing; the screen shows the new line."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        lines = app.query_one(Lines)
        await pilot.pause()
        ys = painted(lines)
        lines.put("first\nsecond")
        await pilot.pause()
        assert ys == []
        lines.put("first\nSECOND-CHANGED")
        await pilot.pause()
        assert ys == [1]
        assert "SECOND-CHANGED" in screen_text(app)
        lines.put("first\nSECOND-CHANGED\nthird")
        await pilot.pause()
        assert ys == [1, 2]
        assert "third" in screen_text(app)


STYLES = (RichStyle(color="white"), RichStyle(color="green"), RichStyle(color="cyan"))
MARKDOWNISH = st.lists(
    st.sampled_from([*"ab  `*#-1.\n\t\x0b\r", "```", "**", "- ", "# ", "\n```\n", "\n\n"]), max_size=40
).map("".join)


@given(text=MARKDOWNISH, width=st.integers(1, 30), cuts=st.lists(st.integers(0, 120), max_size=6))
def test_the_assistant_texts_cached_lines_draw_what_a_fresh_draw_draws(text: str, width: int, cuts: list[int]) -> None:
    """The Assistant pane draws a growing text one source line at a time from a cache (line, open fence, width,
    styles): every prefix of a text (a stream's successive frames), drawn with the cache, is what a fresh draw of it
    gives, cursor included (the cached line never keeps the cursor)."""
    cache: LRUCache[tuple[object, ...], Any] = LRUCache(64)
    cursor = RichStyle(bold=True)
    for end in [*sorted(cuts), len(text)]:
        shown = text[:end]
        assert markdownish_strips(shown, width, STYLES, cursor, cache) == markdownish_strips(
            shown, width, STYLES, cursor
        )
        assert markdownish_strips(shown, width, STYLES, None, cache) == markdownish_strips(shown, width, STYLES, None)


def test_a_growing_assistant_text_wraps_its_last_line_only(monkeypatch: Any) -> None:
    """A frame of a growing text (tokens appended to its last line) re-wraps that line, not the whole text; a new
    line wraps the new line (and the one it ended)."""
    calls: list[str] = []
    inner = assistant_module._markdownish_line

    def counted(line: str, *a: Any) -> Any:
        calls.append(line)
        return inner(line, *a)

    monkeypatch.setattr(assistant_module, "_markdownish_line", counted)
    cache: LRUCache[tuple[object, ...], Any] = LRUCache(64)
    text = "\n".join(f"line {i} with **some** words in it" for i in range(40))
    markdownish_strips(text, 30, STYLES, RichStyle(bold=True), cache)
    assert len(calls) == 40
    calls.clear()
    markdownish_strips(text + " and more", 30, STYLES, RichStyle(bold=True), cache)
    assert calls == ["line 39 with **some** words in it and more"]
    calls.clear()
    markdownish_strips(text + " and more\nnew", 30, STYLES, RichStyle(bold=True), cache)
    assert calls == ["new"]  # (the ended line was drawn at the last frame already)


@given(
    chunks=st.lists(st.text(alphabet=st.sampled_from([*"abc  \n"]), min_size=1, max_size=400), min_size=1, max_size=40),
    limit=st.integers(10, 500),
)
def test_an_open_texts_shown_tail_is_bounded_and_its_start_stays_put_as_it_grows(chunks: list[str], limit: int) -> None:
    """An open text longer than the limit shows its tail from `open_text_cut`: at most `limit` characters, starting
    right after a newline or a space when one follows the cut's base (never mid-word then); as the text grows the
    start only moves forward, and only when its base moves (a step of half the limit) or a break arrives after it
    (at most twice per base: a space, then a newline): not at every frame, so the shown lines do not re-flow."""
    text = ""
    cuts: list[int] = []
    bases: set[int] = set()
    for chunk in chunks:
        text += chunk
        if len(text) <= limit:
            continue
        cut = open_text_cut(text, limit)
        assert len(text) - cut <= limit
        step = limit // 2
        base = -(-(len(text) - limit) // step) * step
        bases.add(base)
        assert base <= cut <= len(text)
        if "\n" in text[base:] or " " in text[base:]:
            assert text[cut - 1] in " \n"
            assert "\n" not in text[base : cut - 1] or text[cut - 1] == "\n"
        if cuts:
            assert cut >= cuts[-1]
        cuts.append(cut)
    assert len(set(cuts)) <= 3 * len(bases)


def test_an_open_texts_lines_stay_the_same_strips_as_it_grows() -> None:
    """Drawn frame after frame, an open text longer than the limit keeps the same wrapped lines but its last: the
    pane's strips are reused (nothing to draw or repaint but the tail)."""
    text = " ".join(f"word{i}" for i in range(3000))  # one long line, no newline (a generated session's text)
    width = 70
    styles = STYLES
    cache: LRUCache[tuple[object, ...], Any] = LRUCache(64)
    frames = []
    for end in range(9000, 9600, 40):
        shown = text[open_text_cut(text[:end]) : end]
        frames.append(markdownish_strips(shown, width, styles, None, cache))
    same = sum(a == b for a, b in zip(frames[0][:-2], frames[1][:-2], strict=False))
    assert same == len(frames[0]) - 2


async def test_a_section_view_finishes_only_the_rows_it_paints(monkeypatch: Any) -> None:
    """An item of 500 rows (a closed long text) in a 10-row view: only the rows painted become Strips (finishing a
    row, a Strip with its caches, used to be done for every row of every rendered item)."""
    finished: list[int] = []
    inner = base_module.finish_line

    def counted(segments: Any, width: int, base: Any) -> Any:
        finished.append(width)
        return inner(segments, width, base)

    monkeypatch.setattr(base_module, "finish_line", counted)
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        items = app.query_one(Items)
        items.put([("long", 0, [f"row {i}" for i in range(500)])])
        await pilot.pause()
        height = items.scrollable_content_region.height
        assert items.row_count == 500
        assert 0 < len(finished) <= 2 * height
        assert "row 499" in screen_text(app)  # (following the tail)


async def test_the_conversations_line_updates_without_a_screen_relayout() -> None:
    """The one-line conversation summary (80x24) changes with the counts; its height is fixed by the CSS, so a new
    text repaints it without a screen relayout (a full-screen reflow per frame in a busy proxy session)."""
    obs = interleaved_conversations(3)
    app = InspectorApp(observations=obs[: len(obs) // 2], clock=lambda: 0.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        line = app.dashboard.conversations_line
        assert line.display
        before = str(line.render())
        layouts: list[bool] = []
        inner = line.refresh

        def recorded(*a: Any, layout: bool = False, **k: Any) -> Any:
            layouts.append(layout)
            return inner(*a, layout=layout, **k)

        line.refresh = recorded  # type: ignore[method-assign]
        app.ingest(obs[len(obs) // 2 :])
        await pilot.pause()
        assert str(line.render()) != before and layouts  # it changed, and was repainted
        assert not any(layouts)
        assert str(line.render()).replace(" ", "") in screen_text(app).replace(" ", "")


async def test_a_focus_change_keeps_the_rendered_rows_and_a_theme_change_draws_them_again() -> None:
    """Textual re-applies every style on a focus or hover change, mostly to the same values: the views keep their
    rendered items and strips then (they used to drop every cache at each one), and draw again when what they
    draw with changed (a theme)."""
    app = PaintApp()
    async with app.run_test(size=(60, 40)) as pilot:
        items = app.query_one(Items)
        rows = app.query_one(Rows)
        items.put([("a", 0, ["alpha", "beta"]), ("b", 0, ["gamma"])])
        rows.put(["one", "two"])
        await pilot.pause()
        rendered, strips = list(items.renders), list(items._lines)
        for widget in (items, rows, items, rows):
            widget.focus()
            await pilot.pause()
        await pilot.hover(Items)
        await pilot.pause()
        assert items.renders == rendered
        assert all(x is y for x, y in zip(strips, items._lines, strict=True))
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert items.renders == rendered + ["a", "b"]
        assert not any(x is y for x, y in zip(strips, items._lines, strict=True))


async def test_the_blocks_pane_makes_the_segments_of_the_rows_it_paints_only() -> None:
    """Under a flood most new blocks scroll past unseen: their rows are counted at once (the scrollbar and the scroll
    position are right) but made into segments only when painted (`Deferred`). A session of ~60 blocks in a pane of
    a dozen rows makes the segments of about a screenful, and the screen shows the last block."""
    from inspector.testing.synthetic import generated_observations

    obs = generated_observations(6000, tool_every=200)
    app = InspectorApp(observations=obs, clock=lambda: 0.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        view = app.blocks_view
        rows = view._rows
        deferred = [r for r in rows if isinstance(r, base_module.Deferred)]
        made = [r for r in deferred if r._line is not None]
        height = view.scrollable_content_region.height
        assert len(app.live.block_order) > 40 and len(deferred) > 5 * height
        assert 0 < len(made) <= 2 * height

        def shown_are_made() -> bool:
            top = view.scroll_offset.y
            window = rows[top : top + height]
            return bool(window) and all(r._line is not None for r in window if isinstance(r, base_module.Deferred))

        assert view.scroll_offset.y > 0 and shown_are_made()  # following the tail: the last rows
        tool = next(b for key in reversed(app.live.block_order) if (b := app.live.blocks[key]).id)
        assert tool.id is not None and tool.id in screen_text(app)
        view.scroll_home(animate=False)  # scrolled to the top: the first rows are made now, and shown
        await pilot.pause()
        assert view.scroll_offset.y == 0 and shown_are_made()
        assert view.item_key_at(0) == app.live.block_order[0] or view.item_key_at(1) == app.live.block_order[0]


@given(
    st.lists(st.text(max_size=12), min_size=1, max_size=30),
    st.lists(st.text(max_size=12), max_size=10),
    st.integers(0, 200),
    st.integers(0, 200),
)
def test_a_buffer_row_made_when_painted_is_the_row_made_at_once(
    fragments: list[str], later: list[str], start: int, length: int
) -> None:
    """A deferred buffer row shows what it showed when its item was rendered, though the block's fragments grew
    meanwhile (an open block: its buffer only grows, so a range of it stays the same text in the same shades)."""
    from itertools import accumulate

    from rich.console import Console

    from inspector.tui.widgets.blocks import _buffer_line

    console = Console(width=300)
    styles = (RichStyle(color="red"), RichStyle(color="blue"))
    ends = list(accumulate(map(len, fragments)))
    total = ends[-1]
    start = min(start, total)
    end = min(total, start + length)
    at_once = base_module.text_strip(_buffer_line("  ", fragments, ends, start, end, styles), console, 250)
    row = base_module.Deferred(lambda: _buffer_line("  ", fragments, ends, start, end, styles), console, 250)
    for frag in later:  # (the fold appends; BlocksView._ends extends the offsets in place)
        fragments.append(frag)
        ends.append(ends[-1] + len(frag))
    assert row.segments() == at_once
    assert row.segments() is row.segments()  # made once


_TOOL_SESSIONS: dict[str, Any] = {}


def _late_changes() -> list[Any]:
    """parse_date, then changes to tools of its first turn after that turn ended: a late second result (the same
    state: nothing else on the screen changes with it), a state inferred afterwards, and a request whose last message
    carries an error tool_result for another one."""
    from inspector.observe import observations as O
    from inspector.testing.synthetic import parse_date_observations

    obs: list[Any] = parse_date_observations()
    t = obs[-1].t
    first = [o for o in obs if isinstance(o, O.ToolUse) and o.turn == 0]
    a, b, c = first[0], first[1], first[2]
    obs.append(O.ToolResult(t + 0.1, 0, 0, a.id, a.name, "late: a second result", False, "succeeded"))
    obs.append(
        O.ToolStateChanged(
            t + 0.2, 0, 0, b.id, b.name, b.index, "failed", None, "timed out later", None, {}, False, True
        )
    )
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": c.id, "is_error": True, "content": "no"}],
            }
        ],
    }
    obs.append(O.AttemptStarted(t + 0.3, 0, 0, "POST", "u", {}, body))
    return obs


def _tool_session(name: str) -> list[Any]:
    """Sessions whose tools change after they settle, or not: generated (many turns, a tool each), parse_date (4
    tools at once, results after the stream), three proxied conversations (tools inferred from the next request),
    an overloaded retry (a failed attempt's tools)."""
    from inspector.testing.synthetic import generated_observations, parse_date_observations

    if name not in _TOOL_SESSIONS:
        _TOOL_SESSIONS[name] = {
            "generated": lambda: generated_observations(3000, tool_every=40),
            "parse_date": lambda: parse_date_observations(),
            "overloaded": lambda: parse_date_observations(variant="overloaded"),
            "proxied": lambda: interleaved_conversations(3),
            "late": _late_changes,
        }[name]()
    return list(_TOOL_SESSIONS[name])


async def _check_tools_prefix(name: str, cuts: list[int]) -> int:
    """Feed the session in frames of `cuts` observations; after each frame the Tools pane's items and rows must be
    those of a walk over every tool. Returns how many frames started from a kept prefix."""
    from inspector.tui.widgets import tools as tools_module
    from inspector.tui.widgets.tools import ToolsView, _Done

    obs = _tool_session(name)
    app = InspectorApp(observations=[], clock=lambda: 0.0)
    kept_frames = 0
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.dashboard.query_one(ToolsView)
        start = 0
        for size in [*cuts, len(obs)]:
            kept_frames += view._done.tools > 0 and view._done.state is app.live
            app.ingest(obs[start : start + size])
            start += size
            await pilot.pause()
            kept = list(view._prev_items)
            rows = [[s.text for s in row] if isinstance(row, list) else row for row in view._rows]
            view._done, view._prev_items = _Done(), []  # a walk over every tool, from nothing kept
            view.rebuild()
            assert view._prev_items == kept, (name, start)
            assert [[s.text for s in row] if isinstance(row, list) else row for row in view._rows] == rows
    assert tools_module._Done is _Done
    return kept_frames


@settings(max_examples=examples(12), deadline=None)
@given(st.sampled_from(["generated", "parse_date", "overloaded", "proxied"]), st.lists(st.integers(1, 400), max_size=8))
async def test_the_tools_panes_kept_prefix_draws_what_a_full_walk_draws(name: str, cuts: list[int]) -> None:
    """The Tools pane keeps the items of its settled tools (a final state, the attempt ended) from frame to frame
    instead of walking every tool call of the session. However the session arrives (cut into frames anywhere),
    its items are those of a walk over every tool, and so are its rows."""
    await _check_tools_prefix(name, cuts)


@pytest.mark.parametrize("name", ["parse_date", "overloaded", "proxied", "late"])
async def test_a_settled_tool_that_changes_later_is_drawn_again(name: str) -> None:
    """One observation a frame: a tool settles (succeeded after its attempt ended) and its result comes in the next
    frame; a proxied tool is inferred from a later request. The kept prefix notices each change (the tools' and
    their attempts' versions) and the pane draws what a full walk draws; most frames still start from a prefix."""
    n = len(_tool_session(name))
    kept = await _check_tools_prefix(name, [1] * n)
    assert kept > 0


@pytest.mark.parametrize("name", ["parse_date", "proxied", "late"])
async def test_the_assistant_panes_kept_items_follow_a_tool_that_changes_after_its_turn(name: str) -> None:
    """The Assistant pane keeps the items of ended turns from frame to frame too. A tool line of an ended turn that
    changes later (a late result, a state inferred from a later request, a request's error tool_result) is drawn
    again: one observation a frame, its items are those of a walk over the whole transcript."""
    from inspector.tui.widgets.assistant import AssistantView

    obs = _tool_session(name)
    app = InspectorApp(observations=[], clock=lambda: 0.0)
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.dashboard.query_one(AssistantView)
        for i, o in enumerate(obs):
            app.ingest([o])
            await pilot.pause()
            kept = list(view._prev_items)
            view._done, view._done_state, view._prev_items = (0, 0), None, []  # from nothing kept
            view.rebuild()
            assert view._prev_items == kept, (name, i)

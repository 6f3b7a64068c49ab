"""The Blocks pane: one entry per content-block index, with its buffer (fragment boundaries in alternating shades),
the live partial-parse preview while open, and at close the parsed input or the input error with a caret."""

from __future__ import annotations

import bisect
import json
from collections.abc import Hashable
from functools import partial
from typing import Any

import orjson
from rich.highlighter import JSONHighlighter
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache

from inspector.core import exactjson
from inspector.state.entries import human_size
from inspector.state.fold import BlockEntry, DashboardState
from inspector.tui.widgets.base import Deferred, Line, Row, SectionView, chunk_text, text_strip, wrap_strips
from inspector.tui.widgets.wording import turn_label

BUFFER_LINES = 6  # buffer lines shown per block (the tail while open, the head once closed)
INPUT_LINES = 12  # pretty-printed input lines shown per tool block
INDENT = 2
_json = JSONHighlighter()


def fragment_text(fragments: list[str], ends: list[int], start: int, end: int, styles: tuple[Style, Style]) -> Text:
    """Characters [start, end) of the joined fragments, each fragment in the next of two alternating styles.

    `ends[i]` is the end offset of fragment i in the joined buffer (so only the fragments in range are visited)."""
    text = Text(no_wrap=True)
    i = bisect.bisect_right(ends, start)
    pos = ends[i - 1] if i > 0 else 0
    n = len(fragments)
    while i < n and pos < end:
        frag = fragments[i]
        stop = ends[i]
        if stop > start:
            a, b = max(start, pos) - pos, min(end, stop) - pos
            text.append(frag[a:b], styles[i & 1])
        pos = stop
        i += 1
    return text


def _buffer_line(
    pad: str, fragments: list[str], ends: list[int], start: int, end: int, styles: tuple[Style, Style]
) -> Text:
    """A buffer row: the indent, then characters [start, end) in their fragments' shades (`fragment_text`)."""
    t = Text(pad, no_wrap=True)
    t.append_text(fragment_text(fragments, ends, start, end, styles))
    return t


def window(buf: str, width: int, lo: int, hi: int, *, words: bool = False) -> tuple[list[tuple[int, int]], bool, bool]:
    """Hard-wrapped line ranges of buf covering roughly [lo, hi): (ranges, more before, more after).

    Only that window is chunked (a 200 KB buffer costs the same as a small one); lines are aligned to the start
    of their source line so the wrap does not jump as the buffer grows."""
    lo, hi = max(0, lo), min(len(buf), hi)
    line_start = buf.rfind("\n", 0, lo) + 1
    start = line_start + ((lo - line_start) // width) * width
    end_nl = buf.find("\n", hi)
    stop = len(buf) if end_nl < 0 else end_nl
    stop = min(stop, hi + width)
    ranges = [(s + start, e + start) for s, e in chunk_text(buf[start:stop], width, words=words)]
    return ranges, start > 0, stop < len(buf)


class BlocksView(SectionView):
    COMPONENT_CLASSES = {
        "blk--attempt",
        "blk--header",
        "blk--type",
        "blk--name",
        "blk--id",
        "blk--open",
        "blk--closed",
        "blk--error",
        "blk--meta",
        "blk--frag-a",
        "blk--frag-b",
        "blk--more",
        "blk--preview",
        "blk--label",
        "blk--caret",
        "blk--diag",
        "blk--discarded",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    BlocksView > .blk--attempt { color: $primary; text-style: bold; }
    BlocksView > .blk--header { color: $foreground-muted; }
    BlocksView > .blk--type { color: $secondary; text-style: bold; }
    BlocksView > .blk--name { color: $accent; text-style: bold; }
    BlocksView > .blk--id { color: $foreground-darken-3; }
    BlocksView > .blk--open { color: $warning; text-style: bold; }
    BlocksView > .blk--closed { color: $success; text-style: bold; }
    BlocksView > .blk--error { color: $error; text-style: bold; }
    BlocksView > .blk--meta { color: $foreground-muted; }
    BlocksView > .blk--frag-a { color: $foreground; background: $panel; }
    BlocksView > .blk--frag-b { color: $foreground; background: $primary-darken-3; }
    BlocksView > .blk--more { color: $foreground-darken-3; text-style: italic; }
    BlocksView > .blk--preview { color: $foreground; }
    BlocksView > .blk--label { color: $accent; }
    BlocksView > .blk--caret { color: $error; text-style: bold; }
    BlocksView > .blk--diag { color: $warning; }
    BlocksView > .blk--discarded { text-style: dim; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self._seen: tuple[object, ...] = ()
        self._ends_cache: LRUCache[tuple[Hashable, int], list[int]] = LRUCache(256)
        # (blocks, items, last attempt) of the leading blocks whose attempt has ended, for `_done_state`
        self._done: tuple[int, int, tuple[int, int] | None] = (0, 0, None)
        self._done_state: DashboardState | None = None
        self._done_many = False

    def _ends(self, b: BlockEntry) -> list[int]:
        """Cumulative end offsets of a block's fragments, extended incrementally (O(new fragments))."""
        key = (b.key, id(b.fragments))
        ends = self._ends_cache.get(key)
        if ends is None or len(ends) > len(b.fragments):
            ends = []
        pos = ends[-1] if ends else 0
        for frag in b.fragments[len(ends) :]:
            pos += len(frag)
            ends.append(pos)
        self._ends_cache[key] = ends
        return ends

    def show(self, state: DashboardState, now: float = 0.0) -> None:
        key = (id(state), state.rev_blocks, self.content_width, state.status.finished)
        if key == self._seen:
            return
        self._seen = key
        self.state = state
        self.rebuild()

    def rebuild(self) -> None:
        state = self.state
        if state is None:
            return
        width = self.content_width
        # the items of the blocks of ended attempts never change (block_order only grows): a frame walks the blocks
        # from the first one of an attempt still running, not the whole session's
        done_blocks, done_items, current = self._done
        many = len(state.conversations) > 1  # (several conversations: the attempt rules name whose turn it is)
        if state is not self._done_state or many != self._done_many or done_items > self.kept_items(width):
            self._done_state, self._done_many, done_blocks, done_items, current = state, many, 0, 0, None
            self._done = (0, 0, None)
        items: list[tuple[Hashable, Hashable, Any]] = []
        order = state.block_order
        ended = True
        for j in range(done_blocks, len(order)):
            key = order[j]
            b = state.blocks[key]
            ta = (b.turn, b.attempt)
            a = state.attempts.get(ta)
            failed = a is not None and a.failed
            if ta != current:
                current = ta
                items.append((("attempt", ta), (failed, many), lambda w, ta=ta, f=failed: self._attempt_line(ta, f, w)))
            items.append((key, (b.version, failed), lambda w, b=b, f=failed: self.render_block(b, f, w)))
            if ended and a is not None and a.status is not None:
                self._done = (j + 1, done_items + len(items), current)
            else:
                ended = False
        if done_items:
            self.set_items(items, width, start=done_items)
            return
        if not items:
            items.append(
                (
                    "empty",
                    bool(state.status.finished),
                    lambda w: [
                        text_strip(
                            Text(
                                "no content blocks" + ("" if state.status.finished else " yet"),
                                self.cstyle("blk--meta"),
                            ),
                            self.app.console,
                            w,
                        )
                    ],
                )
            )
        self.set_items(items, width)

    def detail_at(self, row: int) -> tuple[str, Any] | None:
        key = self.item_key_at(row)
        if isinstance(key, tuple) and len(key) == 3 and self.state is not None and key in self.state.blocks:
            return ("block", key)
        if isinstance(key, tuple) and len(key) == 2 and key[0] == "attempt":
            return ("attempt", key[1])
        return None

    # -------------------------------------------------------------------------------------------- rendering
    def _attempt_line(self, ta: tuple[int, int], failed: bool, width: int) -> list[Line]:
        label = f"── {turn_label(self.state, ta[0])} · attempt {ta[1] + 1}" + (
            " · failed, discarded " if failed else " "
        )
        text = Text(label + "─" * max(0, width - len(label)), self.cstyle("blk--attempt"))
        if failed:
            text.stylize(self.cstyle("blk--discarded"))
        return [text_strip(text, self.app.console, width)]

    def render_block(self, b: BlockEntry, failed: bool, width: int) -> list[Row]:
        console = self.app.console
        out: list[Row] = []
        head = Text(no_wrap=True, overflow="ellipsis")
        if b.closed and (
            b.input_error
            or self.state is not None
            and any(self.state.diagnostics[i].severity == "error" for i in b.diagnostics)
        ):
            head.append("✗ ", self.cstyle("blk--error"))
        elif b.closed:
            head.append("✓ ", self.cstyle("blk--closed"))
        else:
            head.append("● ", self.cstyle("blk--open"))
        head.append(f"[{b.index}] ", self.cstyle("blk--header"))
        head.append(b.type, self.cstyle("blk--type"))
        if b.name:
            head.append(f" {b.name}", self.cstyle("blk--name"))
        if b.id:
            bid = b.id if width >= 70 else "…" + b.id[-6:]
            head.append(f" {bid}", self.cstyle("blk--id"))
        state_word = "closed" if b.closed else "open"
        head.append(
            f"  {state_word} · {len(b.fragments)} frag{'s' if len(b.fragments) != 1 else ''} · {human_size(b.nbytes)}",
            self.cstyle("blk--meta"),
        )
        if failed:
            head.stylize(self.cstyle("blk--discarded"))
        out.append(Deferred(lambda: head, console, width))

        buf = b.joined()
        inner = max(8, width - INDENT)
        styles = (self.cstyle("blk--frag-a"), self.cstyle("blk--frag-b"))
        pad = " " * INDENT
        span = inner * (BUFFER_LINES + 2)

        def buffer_line(s: int, e: int) -> Text:
            # (the fragments' offsets when the line is painted: most of a flood's new blocks scroll past unseen)
            return _buffer_line(pad, b.fragments, self._ends(b), s, e, styles)

        def buffer_lines(rows: list[tuple[int, int]]) -> None:
            for s, e in rows:
                out.append(Deferred(partial(buffer_line, s, e), console, width))

        def more(chars: int, where: str) -> None:
            if chars > 0:
                out.append(
                    text_strip(Text(f"{pad}… {human_size(chars)} {where}", self.cstyle("blk--more")), console, width)
                )

        if b.input_error is not None and b.error_pos is not None and buf:
            # the lines around the error, then a caret under its position
            pos = min(b.error_pos, len(buf))
            rows, _, _ = window(buf, inner, pos - 2 * inner, pos + 2 * inner)
            at = next((i for i, (s, e) in enumerate(rows) if s <= pos < e), len(rows) - 1)
            lo = max(0, at - 2)
            more(rows[lo][0], "above")
            buffer_lines(rows[lo : at + 1])
            col = min(pos - rows[at][0], inner - 1)
            caret = Text(pad + " " * col + "^ ", self.cstyle("blk--caret"))
            caret.append(b.input_error, self.cstyle("blk--error"))
            out.extend(wrap_strips(caret, console, width))
            tail = rows[at + 1 : at + 3]
            buffer_lines(tail)
            more(len(buf) - (tail[-1][1] if tail else rows[at][1]), "below")
        elif buf:
            words = not b.is_tool  # text wraps at word boundaries; JSON keeps its exact columns
            if not b.closed:
                rows, before, _ = window(buf, inner, len(buf) - span, len(buf), words=words)
                rows = rows[-BUFFER_LINES:]
                more(rows[0][0] if rows else 0, "above")
                buffer_lines(rows)
            else:
                rows, _, _ = window(buf, inner, 0, span, words=words)
                rows = rows[:BUFFER_LINES]
                buffer_lines(rows)
                more(len(buf) - (rows[-1][1] if rows else 0), "below")
        elif b.is_tool and not b.closed:
            waiting = (
                f"{len(b.fragments)} empty fragment{'s' if len(b.fragments) != 1 else ''} so far"
                if b.fragments
                else "waiting for input_json_delta"
            )
            out.append(text_strip(Text(f"{pad}({waiting})", self.cstyle("blk--more")), console, width))

        if b.is_tool:
            if not b.closed and buf.strip():
                reason = incomplete_reason(buf)
                value, err = b.preview()
                if reason is None:
                    label = Text("buffer is valid JSON already ▸ ", self.cstyle("blk--label"))
                else:
                    label = Text("not valid JSON yet: ", self.cstyle("blk--label"))
                    label.append(reason, self.cstyle("blk--more"))
                    label.append(" · repaired preview ▸ ", self.cstyle("blk--label"))
                if err:
                    label.append(err, self.cstyle("blk--error"))
                elif value is not None:
                    label.append_text(_json(Text(_compact(value)[: width * 3], self.cstyle("blk--preview"))))
                else:
                    label.append("…", self.cstyle("blk--more"))
                out.extend(wrap_strips(label, console, width, indent=INDENT)[:4])
            elif b.input_error is None:
                value = b.parsed_input
                if value is not None:
                    pretty = exactjson.dumps(value, option=orjson.OPT_INDENT_2).decode().split("\n", INPUT_LINES + 1)
                    out.append(text_strip(Text(pad + "input ▾", self.cstyle("blk--label")), console, width))
                    for line in pretty[:INPUT_LINES]:
                        t = Text(pad + "  ")
                        t.append_text(_json(Text(line[: width + 1])))
                        out.append(text_strip(t, console, width))
                    if len(pretty) > INPUT_LINES:
                        out.append(text_strip(Text(f"{pad}  …", self.cstyle("blk--more")), console, width))
        all_diags = self.state.diagnostics if self.state is not None else []
        for i in b.diagnostics if all_diags else ():
            d = all_diags[i]
            if d.code.startswith("tool_input.") and b.input_error is not None:
                continue  # the caret already says it
            t = Text(pad + ("✗ " if d.severity == "error" else "⚠ "), self.cstyle("blk--diag"))
            t.append(
                f"{d.code}: {d.message}",
                self.cstyle("blk--error") if d.severity == "error" else self.cstyle("blk--diag"),
            )
            out.extend(wrap_strips(t, console, width)[:2])
        return out


def incomplete_reason(buf: str) -> str | None:
    """Why a tool block's buffer is not valid JSON yet (`unterminated string at col 12`); None when it is.

    The partial preview is a repair of this buffer (strings closed, brackets added): a reader must never take it for
    the input itself. Called per rendered block version (display rate), never per delta."""
    try:
        json.loads(buf)
    except json.JSONDecodeError as e:
        msg = e.msg
        msg = msg.split(" starting at", 1)[0]  # "Unterminated string starting at" -> "Unterminated string"
        where = f"col {e.colno}" if e.lineno == 1 else f"line {e.lineno} col {e.colno}"
        return f"{msg[:1].lower()}{msg[1:]} at {where}"
    return None


def _compact(value: Any) -> str:
    try:
        return exactjson.dumps(value).decode()
    except TypeError:
        return repr(value)

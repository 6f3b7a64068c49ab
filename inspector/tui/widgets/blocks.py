"""The Blocks pane: one entry per content-block index, with its buffer (fragment boundaries in alternating shades),
the live partial-parse preview while open, and at close the parsed input or the input error with a caret."""

from __future__ import annotations

from typing import Any

import orjson
from rich.highlighter import JSONHighlighter
from rich.text import Text
from textual.strip import Strip

from inspector.state import BlockEntry, DashboardState, human_size
from inspector.tui.widgets.base import SectionView, chunk_text, text_strip, wrap_strips

BUFFER_LINES = 6  # buffer lines shown per block (the tail while open, the head once closed)
INPUT_LINES = 12  # pretty-printed input lines shown per tool block
INDENT = 2
_json = JSONHighlighter()


def fragment_text(fragments: list[str], start: int, end: int, styles: tuple) -> Text:
    """Characters [start, end) of the joined fragments, each fragment in the next of two alternating styles."""
    text = Text(no_wrap=True)
    pos = 0
    for i, frag in enumerate(fragments):
        n = len(frag)
        if pos + n > start and pos < end:
            a, b = max(start, pos) - pos, min(end, pos + n) - pos
            text.append(frag[a:b], styles[i & 1])
        pos += n
        if pos >= end:
            break
    return text


class BlocksView(SectionView):
    COMPONENT_CLASSES = {
        "blk--attempt", "blk--header", "blk--type", "blk--name", "blk--id", "blk--open", "blk--closed",
        "blk--error", "blk--meta", "blk--frag-a", "blk--frag-b", "blk--more", "blk--preview", "blk--label",
        "blk--caret", "blk--diag", "blk--discarded",
    }

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self._seen: tuple = ()

    def show(self, state: DashboardState) -> None:
        key = (id(state), state.rev_blocks, self.content_width)
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
        lines: list[Strip] = []
        current = None
        for key in state.block_order:
            b = state.blocks[key]
            ta = (b.turn, b.attempt)
            failed = state.attempt_failed(*ta)
            if ta != current:
                current = ta
                lines.extend(self.item_lines(("attempt", ta), failed, lambda w, ta=ta, f=failed: self._attempt_line(
                    ta, f, w), width))
            lines.extend(self.item_lines(key, (b.version, failed), lambda w, b=b, f=failed: self.render_block(
                b, f, w), width))
        if not lines:
            lines = [text_strip(Text("no content blocks yet", self.cstyle("blk--meta")), self.app.console, width)]
        self.set_lines(lines)

    # -------------------------------------------------------------------------------------------- rendering
    def _attempt_line(self, ta: tuple[int, int], failed: bool, width: int) -> list[Strip]:
        label = f"── turn {ta[0] + 1} · attempt {ta[1] + 1}" + (" · failed, discarded " if failed else " ")
        text = Text(label + "─" * max(0, width - len(label)), self.cstyle("blk--attempt"))
        if failed:
            text.stylize(self.cstyle("blk--discarded"))
        return [text_strip(text, self.app.console, width)]

    def render_block(self, b: BlockEntry, failed: bool, width: int) -> list[Strip]:
        console = self.app.console
        out: list[Strip] = []
        head = Text(no_wrap=True, overflow="ellipsis")
        if b.closed and (b.input_error or any(self.state.diagnostics[i].severity == "error" for i in b.diagnostics)):
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
        head.append(f"  {state_word} · {len(b.fragments)} frag{'s' if len(b.fragments) != 1 else ''} · "
                    f"{human_size(b.nbytes)}", self.cstyle("blk--meta"))
        if failed:
            head.stylize(self.cstyle("blk--discarded"))
        out.append(text_strip(head, console, width))

        buf = b.joined()
        inner = max(8, width - INDENT)
        chunks = chunk_text(buf, inner) if buf else []
        styles = (self.cstyle("blk--frag-a"), self.cstyle("blk--frag-b"))
        pad = " " * INDENT

        def buffer_lines(rows: list[tuple[int, int]]) -> None:
            for s, e in rows:
                t = Text(pad, no_wrap=True)
                t.append_text(fragment_text(b.fragments, s, e, styles))
                out.append(text_strip(t, console, width))

        def more(n: int, where: str) -> None:
            if n > 0:
                out.append(text_strip(Text(f"{pad}… {n} more line{'s' if n != 1 else ''} {where}",
                                           self.cstyle("blk--more")), console, width))

        if b.input_error is not None and b.error_pos is not None and chunks:
            # the lines around the error, then a caret under its position
            at = next((i for i, (s, e) in enumerate(chunks) if s <= b.error_pos < e or (
                e == len(buf) and b.error_pos >= e)), len(chunks) - 1)
            lo = max(0, at - 2)
            more(lo, "above")
            buffer_lines(chunks[lo: at + 1])
            col = min(b.error_pos - chunks[at][0], inner - 1)
            caret = Text(pad + " " * col + "^ ", self.cstyle("blk--caret"))
            caret.append(b.input_error, self.cstyle("blk--error"))
            out.extend(wrap_strips(caret, console, width))
            buffer_lines(chunks[at + 1: at + 3])
            more(len(chunks) - (at + 3), "below")
        elif chunks:
            if len(chunks) <= BUFFER_LINES:
                buffer_lines(chunks)
            elif not b.closed:
                more(len(chunks) - BUFFER_LINES, "above")
                buffer_lines(chunks[-BUFFER_LINES:])
            else:
                buffer_lines(chunks[:BUFFER_LINES])
                more(len(chunks) - BUFFER_LINES, "below")
        elif b.is_tool and not b.closed:
            out.append(text_strip(Text(f"{pad}(waiting for input_json_delta)", self.cstyle("blk--more")), console,
                                  width))

        if b.is_tool:
            if not b.closed:
                value, err = b.preview()
                label = Text(pad + "preview ▸ ", self.cstyle("blk--label"))
                if err:
                    label.append(err, self.cstyle("blk--error"))
                elif value is not None:
                    label.append_text(_json(Text(_compact(value), self.cstyle("blk--preview"))))
                else:
                    label.append("…", self.cstyle("blk--more"))
                out.extend(wrap_strips(label, console, width)[:3])
            elif b.input_error is None:
                value = b.parsed_input
                if value is not None:
                    pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().splitlines()
                    out.append(text_strip(Text(pad + "input ▾", self.cstyle("blk--label")), console, width))
                    for line in pretty[:INPUT_LINES]:
                        t = Text(pad + "  ")
                        t.append_text(_json(Text(line)))
                        out.append(text_strip(t, console, width))
                    more(len(pretty) - INPUT_LINES, "")
        for i in b.diagnostics:
            d = self.state.diagnostics[i]
            if d.code.startswith("tool_input.") and b.input_error is not None:
                continue  # the caret already says it
            t = Text(pad + ("✗ " if d.severity == "error" else "⚠ "), self.cstyle("blk--diag"))
            t.append(f"{d.code}: {d.message}", self.cstyle("blk--error") if d.severity == "error" else
                     self.cstyle("blk--diag"))
            out.extend(wrap_strips(t, console, width)[:2])
        return out


def _compact(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)

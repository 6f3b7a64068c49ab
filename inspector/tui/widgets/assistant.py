"""The Assistant pane: the streamed text, turn by turn, with the tool activity inline where it happens."""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache

from inspector.core.fmt import duration
from inspector.state.fold import BlockEntry, DashboardState, ToolEntry
from inspector.tui.widgets.base import Line, SectionView, chunk_text, text_strip, wrap_strips
from inspector.tui.widgets.tools import INFERRED_GLYPH, streaming_call
from inspector.tui.widgets.wording import try_label, turn_label

OPEN_TEXT_LIMIT = 4_000  # an open text block longer than this shows its tail until it closes
THINKING_LINES = 3
MD_LINES = 2048  # source lines of assistant text kept drawn (a few screens)


class AssistantView(SectionView):
    COMPONENT_CLASSES = {
        "as--turn",
        "as--text",
        "as--code",
        "as--inline-code",
        "as--cursor",
        "as--thinking",
        "as--tool",
        "as--tool-running",
        "as--tool-ok",
        "as--tool-bad",
        "as--note-warning",
        "as--note-error",
        "as--end",
        "as--more",
        "as--prompt",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    AssistantView > .as--turn { color: $primary; text-style: bold; }
    AssistantView > .as--prompt { color: $secondary; text-style: italic; }
    AssistantView > .as--text { color: $foreground; }
    AssistantView > .as--code { color: $success-lighten-1; background: $panel; }
    AssistantView > .as--inline-code { color: $accent-lighten-1; }
    AssistantView > .as--cursor { color: $accent; text-style: bold; }
    AssistantView > .as--thinking { color: $foreground-muted; text-style: italic; }
    AssistantView > .as--tool { color: $foreground-muted; }
    AssistantView > .as--tool-running { color: $accent; text-style: bold; }
    AssistantView > .as--tool-ok { color: $success; }
    AssistantView > .as--tool-bad { color: $error; text-style: bold; }
    AssistantView > .as--note-warning { color: $warning; }
    AssistantView > .as--note-error { color: $error; text-style: bold; }
    AssistantView > .as--end { color: $success; }
    AssistantView > .as--more { color: $foreground-darken-3; text-style: italic; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.now = 0.0
        self._seen: tuple[object, ...] = ()
        # (transcript items, view items) of the leading items that never change, for `_done_state` and `_done_of`
        self._done: tuple[int, int] = (0, 0)
        self._done_state: DashboardState | None = None
        self._done_of: tuple[object, ...] = ()
        # the text's source lines as drawn (`markdownish_strips`' cache): a growing text re-wraps its last line only
        self._md_lines: LRUCache[tuple[object, ...], tuple[list[Line], bool]] = LRUCache(MD_LINES)

    def on_styles_changed(self) -> None:
        super().on_styles_changed()
        if hasattr(self, "_md_lines"):  # (not before __init__ has made it)
            self._md_lines.clear()

    def revisions(self, state: DashboardState) -> tuple[object, ...]:
        return (state.rev_transcript, state.rev_tools, state.rev_status)

    def rebuild(self) -> None:
        state = self.state
        if state is None:
            return
        width = self.content_width
        st = state.status
        ended = self.ended
        # the items of ended attempts, finished tools of ended turns, turn rules and notes seldom change (the
        # transcript only grows): a frame walks the transcript from the first item that may still change, not from
        # the start. A tool of an ended turn that changes after all (a late result, a run inferred from a later
        # request) bumps the fold's rev_settled: everything is walked again then
        done_n, done_items = self._done
        of = (ended, st.prompt, state.rev_settled, len(state.conversations) > 1)  # (many: the rules name theirs)
        if state is not self._done_state or of != self._done_of or done_items > self.kept_items(width):
            self._done_state, self._done_of = state, of
            done_n, done_items = self._done = (0, 0)
        items: list[tuple[Hashable, Hashable, Any]] = []
        many = len(state.conversations) > 1
        # several conversations: each replayed one's prompt is under its name in the transcript (the status keeps
        # only the last loop's: it is not the first conversation's)
        if st.prompt and not done_items and not many:
            items.append(("prompt", st.prompt, lambda w: self._prompt(st.prompt, w)))
        transcript = state.transcript
        keep = True
        for i in range(done_n, len(transcript)):
            item = transcript[i]
            kind = item[0]
            final = True
            if kind == "turn":
                if i + 1 < len(transcript) and transcript[i + 1][0] == "turn":
                    continue  # (concurrent conversations: a turn's rule with nothing under it before the next one's)
                final = i + 1 < len(transcript)  # (the last rule may yet be followed by another: not kept as done)
                label = turn_label(state, item[1])
                items.append((("turn", item[1], i), label, lambda w, t=label: self._rule(t, "as--turn", w)))
            elif kind in ("text", "thinking", "block"):
                b = state.blocks.get(item[1])
                if b is None:
                    keep = False
                    continue
                a = state.attempts.get((b.turn, b.attempt))
                failed = a is not None and a.failed
                final = a is not None and a.status is not None
                render = {"text": self._text, "thinking": self._thinking, "block": self._other}[kind]
                version = (b.version, failed, ended)
                items.append((item[1], version, lambda w, b=b, f=failed, r=render: r(b, f, w)))
            elif kind == "tool":
                t = state.tools.get(item[1])
                if t is None:
                    keep = False
                    continue
                live = self.now if t.state == "running" else None
                # while its input streams the line shows the block's partial parse: the block's version counts too
                tb = state.blocks.get((t.turn, t.attempt, t.index)) if t.state == "streaming_input" else None
                tool_version = (t.version, live, None if tb is None else tb.version)
                items.append((("tool", item[1]), tool_version, lambda w, t=t: self._tool(t, w)))
                tr = state.turns.get(t.turn)
                final = t.done and tr is not None and tr.t_end is not None
            elif kind == "note":
                items.append((("note", i), 0, lambda w, it=item: self._note(it[1], it[2], w)))
            elif kind == "prompt":
                if many:
                    who, prompt = item[1], item[2]
                    items.append((("prompt", i), 0, lambda w, c=who, p=prompt: self._prompt(p, w, c)))
            if keep and final:
                self._done = (i + 1, done_items + len(items))
            else:
                keep = False
        if st.finished:
            end = f"{st.finished} · {len(state.turns)} turn{'s' if len(state.turns) != 1 else ''} · {st.t_last:.2f} s"
            items.append((("end", end), 0, lambda w: self._rule(end, "as--end", w)))
        self.set_items(items, width, start=done_items)

    @property
    def ended(self) -> bool:
        """The loop has ended (finished, cancelled, failed): an open block streams no more, so no cursor."""
        st = self.state.status if self.state is not None else None
        return st is not None and (st.finished is not None or st.loop_state in ("finished", "cancelled", "error"))

    def detail_at(self, row: int) -> tuple[str, Any] | None:
        key = self.item_key_at(row)
        if not isinstance(key, tuple) or self.state is None:
            return None
        if len(key) == 3 and key in self.state.blocks:
            return ("block", key)
        if key[0] == "tool":
            return ("tool", key[1])
        if key[0] == "turn":
            return ("turn", key[1])
        return None

    # -------------------------------------------------------------------------------------------- items
    def _rule(self, label: str, cls: str, width: int) -> list[Line]:
        head = f"── {label} "
        return [text_strip(Text(head + "─" * max(0, width - len(head)), self.cstyle(cls)), self.app.console, width)]

    def _prompt(self, prompt: str, width: int, conversation: str | None = None) -> list[Line]:
        t = Text(f"[{conversation}] user ▸ " if conversation else "user ▸ ", self.cstyle("as--prompt"))
        t.append(prompt[: width * 5], self.cstyle("as--prompt"))
        return wrap_strips(t, self.app.console, width)[:4]

    def _text(self, b: BlockEntry, failed: bool, width: int) -> list[Line]:
        console = self.app.console
        text = b.joined()
        prefix: list[Line] = []
        if not b.closed and len(text) > OPEN_TEXT_LIMIT:
            cut = open_text_cut(text)
            prefix = [
                text_strip(
                    Text(f"… {cut:,} characters above (shown in full when the block closes)", self.cstyle("as--more")),
                    console,
                    width,
                )
            ]
            text = text[cut:]
        styles = (self.cstyle("as--text"), self.cstyle("as--code"), self.cstyle("as--inline-code"))
        if failed:
            warn = self.cstyle("as--note-warning")
            styles = (styles[0] + warn, styles[1] + warn, styles[2] + warn)
        cursor = None if (b.closed or failed or self.ended) else self.cstyle("as--cursor")
        out = prefix + markdownish_strips(text, width, styles, cursor, self._md_lines)
        return out or [[]]

    def _thinking(self, b: BlockEntry, failed: bool, width: int) -> list[Line]:
        t = Text("thinking ▸ ", self.cstyle("as--thinking"))
        body = b.joined() if b.type == "thinking" else "(redacted)"
        t.append(body[: width * (THINKING_LINES + 1)].replace("\n", " "), self.cstyle("as--thinking"))
        lines = wrap_strips(t, self.app.console, width)
        if len(lines) > THINKING_LINES:
            lines = lines[: THINKING_LINES - 1] + [
                text_strip(
                    Text(f"  … {len(lines) - THINKING_LINES + 1} more lines (Blocks pane)", self.cstyle("as--more")),
                    self.app.console,
                    width,
                )
            ]
        return lines

    def _other(self, b: BlockEntry, failed: bool, width: int) -> list[Line]:
        t = Text(f"▪ {b.type}" + (f" {b.name}" if b.name else ""), self.cstyle("as--tool"))
        return [text_strip(t, self.app.console, width)]

    def _tool(self, t: ToolEntry, width: int) -> list[Line]:
        call = t.input_summary or f"{t.name}(…)"
        st = t.state
        # a time the proxy inferred (another harness ran the tool: its block's stop -> the next request) is an upper
        # bound, never a measured run time: marked as the Tools pane marks it
        bound = "≤" if t.inferred else ""
        mark = f" {INFERRED_GLYPH} inferred" if t.inferred else ""
        if st == "streaming_input":
            text = Text(f"  ⋯ {streaming_call(self.state, t)}  receiving input", self.cstyle("as--tool"))
        elif st == "queued":
            text = Text(f"  ◌ queued {call}", self.cstyle("as--tool"))
        elif st == "running":
            text = Text(f"  ▶ running {call}", self.cstyle("as--tool-running"))
            el = t.elapsed(self.now)
            if el is not None:
                text.append(f"  {bound}{duration(el)}{mark}", self.cstyle("as--tool"))
        elif st == "succeeded":
            took = duration(t.elapsed(self.now)) or "0 ms"
            text = Text(f"  ✓ {t.name} done in {bound}{took}{mark}", self.cstyle("as--tool-ok"))
            if t.result_summary:
                text.append(f"  → {t.result_summary}", self.cstyle("as--tool"))
        elif st == "unknown":  # the proxy's call whose result no request carried before the session ended
            text = Text(f"  ? {t.name}: outcome unknown", self.cstyle("as--tool"))
            if t.error:
                text.append(f": {t.error}", self.cstyle("as--tool"))
        else:
            verb = {
                "failed": "failed",
                "timed_out": "timed out",
                "cancelled": "cancelled",
                "discarded": "discarded (attempt failed)",
                "not_run": "not run",
            }.get(st, st)
            el = t.elapsed(self.now)
            text = Text(
                f"  ✗ {t.name} {verb}" + (f" after {bound}{duration(el)}{mark}" if el is not None else ""),
                self.cstyle("as--tool-bad"),
            )
            why = t.error or t.result_summary
            if why:
                text.append(f": {why}", self.cstyle("as--tool"))
        text.no_wrap = True
        text.overflow = "ellipsis"
        return [text_strip(text, self.app.console, width)]

    def _note(self, what: Any, severity: str, width: int) -> list[Line]:
        cls = "as--note-error" if severity == "error" else "as--note-warning"
        t = Text(("✗ " if severity == "error" else "⚠ ") + note_text(what), self.cstyle(cls))
        return wrap_strips(t, self.app.console, width)


def open_text_cut(text: str, limit: int = OPEN_TEXT_LIMIT) -> int:
    """Where an open text block's shown tail starts (it is longer than `limit`): after the first newline (else the
    first space) past a point that moves by `limit // 2` at a time, so the tail is at most `limit` characters and its
    start stays put while the text grows: the shown lines wrap the same from frame to frame (drawn once, repainted
    only when they change), instead of re-flowing at every frame as a cut at exactly `len - limit` would."""
    step = max(1, limit // 2)
    base = min(len(text), -(-(len(text) - limit) // step) * step)  # the smallest multiple of step >= len - limit
    nl = text.find("\n", base)
    if nl >= 0:
        return nl + 1
    sp = text.find(" ", base)
    return sp + 1 if sp >= 0 else base


def note_text(what: Any) -> str:
    """The words of a transcript note (the fold keeps what happened as data; turns and attempts count from 1)."""
    kind = what[0] if isinstance(what, tuple) and what else None
    if kind == "try":
        return f"turn {what[1] + 1}: {try_label(what[2])}"
    if kind == "retry":
        return f"retry: attempt {what[2] + 1} of turn {what[1] + 1}"
    if kind == "attempt_ended":
        _, turn, attempt, status, reason = what
        status = "failed" if status == "http_error" else status  # (its reason says "HTTP 400 ...")
        return f"attempt {attempt + 1} of turn {turn + 1} {status}" + (f": {reason}" if reason else "")
    if kind == "loop_finished":
        return f"loop {what[1]}" + (f": {what[2]}" if what[2] else "")
    return str(what)


def wrap_line(line: str, width: int) -> list[str]:
    """Word-wrap one line of plain text to `width` characters (long words are cut); fast, no Rich."""
    if len(line) <= width:
        return [line]
    out: list[str] = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width + 1)
        if cut <= 0:
            out.append(line[:width])
            line = line[width:]
        else:
            out.append(line[:cut])
            line = line[cut + 1 :]
    out.append(line)
    return out


_INLINE = re.compile(r"`([^`]+)`|\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")


def inline_spans(line: str) -> tuple[str, list[tuple[int, int, str]]]:
    """A Markdown line's text without its inline markers, and the styled spans: (start, end, kind) with kind
    code | bold | italic. Unpaired markers stay as they are (a stream cut mid-span shows them until it closes)."""
    if "`" not in line and "*" not in line:  # (no marker at all: most prose; the scan below costs ~0.1 ms a line)
        return line, []
    spans: list[tuple[int, int, str]] = []
    out: list[str] = []
    pos = n = 0
    for m in _INLINE.finditer(line):
        out.append(line[pos : m.start()])
        n += m.start() - pos
        kind, body = next((k, g) for k, g in zip(("code", "bold", "italic"), m.groups(), strict=True) if g is not None)
        if kind == "code":
            spans.append((n, n + len(body), kind))
        else:  # emphasis may hold `code`: split it into disjoint spans ("bold", "bold code", "bold")
            body, inner = inline_spans(body)
            at = 0
            for s0, s1, k in inner:
                if s0 > at:
                    spans.append((n + at, n + s0, kind))
                spans.append((n + s0, n + s1, f"{kind} {k}"))
                at = s1
            if at < len(body):
                spans.append((n + at, n + len(body), kind))
        out.append(body)
        n += len(body)
        pos = m.end()
    out.append(line[pos:])
    return "".join(out), spans


def markdownish_strips(
    text: str,
    width: int,
    styles: tuple[Style, Style, Style],
    cursor: Style | None = None,
    cache: LRUCache[tuple[object, ...], tuple[list[Line], bool]] | None = None,
) -> list[Line]:
    """Streamed assistant text as Markdown strips: headings and **bold** bold, *italic*, `inline code` and fenced
    code set apart, word-wrapped (a list item's continuation lines indented under its text).

    Built from segments directly (no Rich Markdown parse), one source line at a time: each line's strips depend on
    the line, whether a code fence is open before it, the width and the styles only. With a `cache` (the view's),
    a line already drawn is not drawn again: a frame of a growing text wraps its last line (the one that grew) and
    looks the others up, instead of re-wrapping the whole text."""
    width = max(8, width)
    out: list[Line] = []
    in_fence = False
    lines = text.split("\n")
    for line in lines:
        key = (line, in_fence, width, styles)
        hit = cache.get(key) if cache is not None else None
        if hit is None:
            hit = _markdownish_line(line, width, styles, in_fence)
            if cache is not None:
                cache[key] = hit
        drawn, fence = hit
        if fence:
            in_fence = not in_fence
        out.extend(drawn)
    if cursor is not None:
        out[-1] = [*out[-1], Segment("▌", cursor)]  # (a copy: the cached line stays without the cursor)
    return out


def _markdownish_line(
    line: str, width: int, styles: tuple[Style, Style, Style], in_fence: bool
) -> tuple[list[Line], bool]:
    """One source line of `markdownish_strips` (`in_fence`: a code fence is open before it): its strips, and whether
    it is a fence line (it opens or closes a code block)."""
    plain, code, inline = styles
    bold = plain + Style(bold=True)
    italic = plain + Style(italic=True)
    kinds = {"code": inline, "bold": bold, "italic": italic}
    if "\t" in line:
        line = line.replace("\t", "    ")
    if not line.isprintable():
        line = "".join(ch if ch.isprintable() else "\ufffd" for ch in line)
    fence = line.lstrip().startswith("```")
    if fence or in_fence:  # (a fence line, opening or closing, and what is inside)
        return [[Segment(p, code)] for p in wrap_line(line, width)], fence
    base = plain
    heading = _HEADING.match(line)
    if heading:
        line, base = line[heading.end() :], bold
    item = _ITEM.match(line)
    hang = len(item.group(0)) if item and len(item.group(0)) < width // 2 else 0
    clean, spans = inline_spans(line)
    segs_lines: list[Line] = []
    for i, (a, b) in enumerate(chunk_text(clean, width - (hang if hang else 0), words=True) or [(0, 0)]):
        segs: list[Segment] = [Segment(" " * hang, plain)] if i and hang else []
        at = a
        for s0, s1, kind in spans:
            if s1 <= at or s0 >= b:
                continue
            if s0 > at:
                segs.append(Segment(clean[at:s0], base))
            lo, hi = max(s0, at), min(s1, b)
            style = base
            for k in kind.split():
                style = style + kinds[k]
            segs.append(Segment(clean[lo:hi], style))
            at = hi
        if at < b:
            segs.append(Segment(clean[at:b], base))
        segs_lines.append(segs)
    return segs_lines, False


_HEADING = re.compile(r"^#{1,6} ")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]) ")

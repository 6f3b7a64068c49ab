"""The Assistant pane: the streamed text, turn by turn, with the tool activity inline where it happens."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.strip import Strip

from inspector.state import BlockEntry, DashboardState, ToolEntry
from inspector.tui.widgets.base import SectionView, text_strip, wrap_strips
from inspector.tui.widgets.tools import duration

OPEN_TEXT_LIMIT = 16_000  # an open text block longer than this shows its tail until it closes
THINKING_LINES = 3


class AssistantView(SectionView):
    COMPONENT_CLASSES = {
        "as--turn", "as--text", "as--code", "as--inline-code", "as--cursor", "as--thinking", "as--tool",
        "as--tool-running", "as--tool-ok", "as--tool-bad", "as--note-warning", "as--note-error", "as--end",
        "as--more", "as--prompt",
    }

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.now = 0.0
        self._seen: tuple = ()

    def show(self, state: DashboardState, now: float) -> None:
        running = any(state.tools[i].state == "running" for i in state.tool_order[-64:])
        key = (id(state), state.rev_transcript, state.rev_tools, state.rev_status, self.content_width,
               round(now, 1) if running else None)
        if key == self._seen:
            return
        self._seen = key
        self.state, self.now = state, now
        self.rebuild()

    def rebuild(self) -> None:
        state = self.state
        if state is None:
            return
        width = self.content_width
        lines: list[Strip] = []
        st = state.status
        if st.prompt:
            lines.extend(self.item_lines("prompt", st.prompt, lambda w: self._prompt(st.prompt, w), width))
        for i, item in enumerate(state.transcript):
            kind = item[0]
            if kind == "turn":
                lines.extend(self.item_lines(("turn", item[1]), 0, lambda w, n=item[1]: self._rule(
                    f"turn {n + 1}", "as--turn", w), width))
            elif kind in ("text", "thinking", "block"):
                b = state.blocks.get(item[1])
                if b is None:
                    continue
                failed = state.attempt_failed(b.turn, b.attempt)
                render = {"text": self._text, "thinking": self._thinking, "block": self._other}[kind]
                lines.extend(self.item_lines(item[1], (b.version, failed), lambda w, b=b, f=failed, r=render: r(
                    b, f, w), width))
            elif kind == "tool":
                t = state.tools.get(item[1])
                if t is None:
                    continue
                live = round(self.now, 1) if t.state == "running" else None
                lines.extend(self.item_lines(("tool", item[1]), (t.version, live), lambda w, t=t: self._tool(t, w),
                                             width))
            elif kind == "note":
                lines.extend(self.item_lines(("note", i), 0, lambda w, it=item: self._note(it[1], it[2], w),
                                             width))
        if st.finished:
            end = f"{st.finished} · {len(state.turns)} turn{'s' if len(state.turns) != 1 else ''} · " \
                  f"{st.t_last:.2f} s"
            lines.extend(self._rule(end, "as--end", width))
        self.set_lines(lines)

    # -------------------------------------------------------------------------------------------- items
    def _rule(self, label: str, cls: str, width: int) -> list[Strip]:
        head = f"── {label} "
        return [text_strip(Text(head + "─" * max(0, width - len(head)), self.cstyle(cls)), self.app.console, width)]

    def _prompt(self, prompt: str, width: int) -> list[Strip]:
        t = Text("user ▸ ", self.cstyle("as--prompt"))
        t.append(prompt, self.cstyle("as--prompt"))
        return wrap_strips(t, self.app.console, width)[:4]

    def _text(self, b: BlockEntry, failed: bool, width: int) -> list[Strip]:
        console = self.app.console
        text = b.joined()
        prefix: list[Strip] = []
        if not b.closed and len(text) > OPEN_TEXT_LIMIT:
            cut = text.find("\n", len(text) - OPEN_TEXT_LIMIT)
            cut = cut + 1 if cut >= 0 else len(text) - OPEN_TEXT_LIMIT
            prefix = [text_strip(Text(f"… {cut:,} characters above (shown in full when the block closes)",
                                      self.cstyle("as--more")), console, width)]
            text = text[cut:]
        body = self._markdownish(text)
        if not b.closed:
            body.append("▌", self.cstyle("as--cursor"))
        if failed:
            body.stylize(self.cstyle("as--note-warning"))
        out = prefix + wrap_strips(body, console, width)
        return out or [Strip.blank(width)]

    def _markdownish(self, text: str) -> Text:
        """Plain text with code fences and `inline code` set apart (cheap, no Markdown parse per frame)."""
        out = Text()
        base, code, inline = self.cstyle("as--text"), self.cstyle("as--code"), self.cstyle("as--inline-code")
        in_fence = False
        for line in text.splitlines(keepends=True):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                out.append(line, code)
                continue
            if in_fence:
                out.append(line, code)
                continue
            parts = line.split("`")
            for j, part in enumerate(parts):
                if part:
                    out.append(part, inline if j % 2 == 1 and j < len(parts) - 1 else base)
        return out

    def _thinking(self, b: BlockEntry, failed: bool, width: int) -> list[Strip]:
        t = Text("thinking ▸ ", self.cstyle("as--thinking"))
        body = b.joined() if b.type == "thinking" else "(redacted)"
        t.append(body.replace("\n", " "), self.cstyle("as--thinking"))
        lines = wrap_strips(t, self.app.console, width)
        if len(lines) > THINKING_LINES:
            lines = lines[: THINKING_LINES - 1] + [text_strip(Text(
                f"  … {len(lines) - THINKING_LINES + 1} more lines (Blocks pane)", self.cstyle("as--more")),
                self.app.console, width)]
        return lines

    def _other(self, b: BlockEntry, failed: bool, width: int) -> list[Strip]:
        t = Text(f"▪ {b.type}" + (f" {b.name}" if b.name else ""), self.cstyle("as--tool"))
        return [text_strip(t, self.app.console, width)]

    def _tool(self, t: ToolEntry, width: int) -> list[Strip]:
        call = t.input_summary or f"{t.name}(…)"
        st = t.state
        if st == "streaming_input":
            text = Text(f"  ⋯ {t.name}: receiving input…", self.cstyle("as--tool"))
        elif st == "queued":
            text = Text(f"  ◌ queued {call}", self.cstyle("as--tool"))
        elif st == "running":
            text = Text(f"  ▶ running {call}", self.cstyle("as--tool-running"))
            el = t.elapsed(self.now)
            if el is not None:
                text.append(f"  {duration(el)}", self.cstyle("as--tool"))
        elif st == "succeeded":
            text = Text(f"  ✓ {t.name} done in {duration(t.elapsed(self.now)) or '0 ms'}", self.cstyle("as--tool-ok"))
            if t.result_summary:
                text.append(f"  → {t.result_summary}", self.cstyle("as--tool"))
        else:
            verb = {"failed": "failed", "timed_out": "timed out", "cancelled": "cancelled",
                    "discarded": "discarded (attempt failed)", "not_run": "not run"}.get(st, st)
            el = t.elapsed(self.now)
            text = Text(f"  ✗ {t.name} {verb}" + (f" after {duration(el)}" if el is not None else ""),
                        self.cstyle("as--tool-bad"))
            why = t.error or t.result_summary
            if why:
                text.append(f": {why}", self.cstyle("as--tool"))
        text.no_wrap = True
        text.overflow = "ellipsis"
        return [text_strip(text, self.app.console, width)]

    def _note(self, message: str, severity: str, width: int) -> list[Strip]:
        cls = "as--note-error" if severity == "error" else "as--note-warning"
        t = Text(("✗ " if severity == "error" else "⚠ ") + message, self.cstyle(cls))
        return wrap_strips(t, self.app.console, width)

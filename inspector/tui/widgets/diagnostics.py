"""The diagnostics panel: every diagnostic the engine raised, where it happened (time, turn, event, block)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rich.text import Text
from textual.strip import Strip

from inspector.state.fold import DashboardState
from inspector.tui.widgets.base import Line, LineView
from inspector.tui.widgets.wording import turn_tag

SEVERITY_CLASS = {"error": "diag--error", "warning": "diag--warning", "info": "diag--info"}
GLYPH = {"error": "✗", "warning": "⚠", "info": "ℹ"}


def no_stream_words(state: DashboardState) -> str:
    """The empty Diagnostics line of a session with no stream: what came instead (a proxy's side requests, which are
    never turns: a harness that never streams shows only those)."""
    table = state.conversations
    if not table.side_requests:
        return "no stream yet"
    n = table.side_requests
    why = ", ".join(f"{v} {k}" for k, v in sorted(table.side_why.items(), key=lambda kv: -kv[1]))
    return f"no stream yet: {n} side request{'s' if n != 1 else ''} ({why}), never shown as turns"


class DiagnosticsView(LineView):
    COMPONENT_CLASSES = {
        "diag--error",
        "diag--warning",
        "diag--info",
        "diag--where",
        "diag--code",
        "diag--message",
        "diag--empty",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    DiagnosticsView > .diag--error { color: $error; text-style: bold; }
    DiagnosticsView > .diag--warning { color: $warning; text-style: bold; }
    DiagnosticsView > .diag--info { color: $primary; }
    DiagnosticsView > .diag--where { color: $foreground-muted; }
    DiagnosticsView > .diag--code { color: $accent; }
    DiagnosticsView > .diag--message { color: $foreground; }
    DiagnosticsView > .diag--empty { color: $foreground-darken-3; text-style: italic; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self._seen: tuple[object, ...] = ()

    def show(self, state: DashboardState) -> None:
        # (the empty line's words change without a diagnostic: when a first stream starts, a side request comes)
        empty = () if state.diagnostics else (bool(state.attempts), state.conversations.side_requests)
        key = (id(state), state.rev_diag, bool(state.status.finished), *empty)
        if key == self._seen:
            return
        if self.state is not state:
            self.forget_rows()
        self._seen = key
        self.state = state
        self.set_row_count(max(1, len(state.diagnostics)))

    @property
    def count(self) -> int:
        return 0 if self.state is None else len(self.state.diagnostics)

    def row_key(self, row: int) -> Hashable:
        if self.count == 0 and self.state is not None:  # (the empty line says whether a stream came, and why not)
            return (row, True, self.ended, bool(self.state.attempts), self.state.conversations.side_requests)
        return (row, self.count == 0, self.ended)

    @property
    def ended(self) -> bool:
        return self.state is not None and bool(self.state.status.finished)

    def detail_at(self, row: int) -> tuple[str, Any] | None:
        return ("diagnostic", row) if 0 <= row < self.count else None

    def render_row(self, row: int, width: int) -> Line | Strip:
        console = self.app.console
        if self.state is None or not self.state.diagnostics:
            words = "the stream was well-formed" if self.ended else "the stream is well-formed so far"
            if self.state is not None and not self.state.attempts:  # no stream at all: nothing to call well-formed
                words = no_stream_words(self.state)
            return list(Text(f"✓ no diagnostics: {words}", self.cstyle("diag--empty")).render(console, end=""))
        d = self.state.diagnostics[row]
        text = Text(no_wrap=True, overflow="crop")
        text.append(f"{GLYPH.get(d.severity, '?')} ", self.cstyle(SEVERITY_CLASS.get(d.severity, "diag--info")))
        where = f"{d.t:7.3f}s {turn_tag(self.state, d.turn)}.{d.attempt + 1}"
        if d.evno is not None:
            where += f" ev {d.evno}"
        if d.block_index is not None:
            where += f" [{d.block_index}]"
        text.append(f"{where:<24}", self.cstyle("diag--where"))
        text.append(f"{d.code}  ", self.cstyle("diag--code"))
        text.append(d.message, self.cstyle("diag--message"))
        return list(text.render(console, end=""))

"""The detail view: one row read in full, in a scrollable modal (Enter or a click on a row opens it).

`c` or `y` copies the whole text (Textual's clipboard support: OSC 52, most terminals); escape or q closes it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from inspector.tui.detail import Detail


class DetailScreen(ModalScreen[None]):
    """A modal over the dashboard with a `Detail` (title, text)."""

    BINDINGS = [
        Binding("escape,q,enter", "close", "Close", id="detail-close", tooltip="Close the detail view"),
        Binding("c,y", "copy", "Copy", id="detail-copy", tooltip="Copy the whole text to the clipboard"),
    ]
    DEFAULT_CSS = """
    DetailScreen { align: center middle; }
    DetailScreen > #detail-box {
        width: 96%; height: 92%;
        border: round $accent; border-title-color: $accent; border-title-style: bold;
        border-subtitle-color: $foreground-muted;
        background: $surface; padding: 0 1;
    }
    DetailScreen #detail-scroll { height: 1fr; scrollbar-gutter: stable; }
    DetailScreen #detail-body { width: 1fr; height: auto; }
    """

    def __init__(self, detail: Detail) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        box = Vertical(id="detail-box")
        box.border_title = Text(self.detail.title)  # (plain text: a string would be read as markup: `[c2]` gone)
        box.border_subtitle = "c/y copy · esc close · ↑↓ pgup pgdn scroll"
        with box:
            with VerticalScroll(id="detail-scroll"):
                yield Static(self.detail.body, id="detail-body", markup=False)

    def on_mount(self) -> None:
        self.query_one("#detail-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.detail.plain)
        self.notify(f"{len(self.detail.plain):,} characters", title="Copied", timeout=3)


__all__ = ["DetailScreen"]

"""The dashboard's app-wide messages (Posting's layout): what the App posts, and `DetailRequested`, which several
widgets post. A message one widget posts is a nested class of that widget (`LineView.NewRowsNoted`,
`EventsView.TimeTravelRequested`), handled as ``on_<widget>_<message>``.

Dataclass messages: fields are the payload, past tense for what happened, `...Requested` for what a widget asks for.
Widgets never reach up to the App with `getattr(self.app, ...)` or walk their ancestors: they post a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.message import Message


@dataclass
class ControlUsed(Message):
    """A control was applied to the loop (or refused, with why)."""

    name: str
    ok: bool
    detail: str = ""


@dataclass
class SessionStarted(Message):
    generation: int
    source: dict[str, Any]


@dataclass
class SessionEnded(Message):
    generation: int
    status: str
    error: str | None


@dataclass
class CursorMoved(Message):
    """The time-travel cursor moved (None: live)."""

    cursor: int | None


@dataclass
class Exported(Message):
    path: Path | None  # the recording
    error: str | None = None
    page: Path | None = None  # the HTML page beside it (None: see page_error)
    page_error: str | None = None


@dataclass
class DetailRequested(Message):
    """A view asks to read one item in full: `kind` is event | block | tool | diagnostic | attempt | turn | text,
    `key` names the item in the shown state (an event number, a block key, a tool id, a diagnostic index...)."""

    kind: str
    key: object  # opaque here: the view that posts it and the App agree on it


__all__ = [
    "ControlUsed",
    "CursorMoved",
    "DetailRequested",
    "Exported",
    "SessionEnded",
    "SessionStarted",
]


@dataclass
class ConversationShown(Message):
    """The panes now show this conversation (None: the whole session); `follow`: they follow the newest."""

    conversation: str | None
    follow: bool

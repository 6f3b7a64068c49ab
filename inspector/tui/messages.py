"""Every message of the dashboard, in one module (Posting's layout): widgets post these, the App handles them.

Dataclass messages: fields are the payload, past tense for what happened, `...Requested` for what a widget asks for.
Widgets never reach up to the App with `getattr(self.app, ...)` or walk their ancestors: they post one of these.
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
    source: dict


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
    path: Path | None
    error: str | None = None


@dataclass
class TimeTravelRequested(Message):
    """A view asks to show the state as of event `evno` (a click on an event row)."""

    evno: int


@dataclass
class DetailRequested(Message):
    """A view asks to read one item in full: `kind` is event | block | tool | diagnostic | attempt | turn | text,
    `key` names the item in the shown state (an event number, a block key, a tool id, a diagnostic index...)."""

    kind: str
    key: Any


@dataclass
class NewRowsNoted(Message):
    """A line view's "+N new" count changed (0: back at the tail); its pane shows it in the border."""

    note: str


__all__ = [
    "ControlUsed",
    "CursorMoved",
    "DetailRequested",
    "Exported",
    "NewRowsNoted",
    "SessionEnded",
    "SessionStarted",
    "TimeTravelRequested",
]

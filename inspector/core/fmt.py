"""Formatting, in one place: durations, sizes and short one-line previews of values, for every pane, printer and
report. Pure functions, standard library and orjson only."""

from __future__ import annotations

from typing import Any

import orjson

from inspector.core import exactjson

__all__ = [
    "duration",
    "latency",
    "milliseconds",
    "seconds",
    "size",
    "short",
    "short_text",
    "short_bytes",
    "terminal",
]


def duration(value: float | None, *, none: str = "") -> str:
    """A duration for people: ``412 ms``, ``2.35 s``, ``1.5 min`` (``none`` when unknown)."""
    if value is None:
        return none
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.2f} s"
    return f"{value / 60:.1f} min"


def seconds(value: float | None, *, none: str = "-") -> str:
    """A time on a stream's clock, to the millisecond: ``0.412 s`` (``none`` when unknown)."""
    return none if value is None else f"{value:.3f} s"


def latency(value: float | None, *, none: str = "-") -> str:
    """A short interval, to a tenth of a millisecond below a second: ``12.3 ms``, ``1.25 s``."""
    if value is None:
        return none
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def milliseconds(value: float | None, *, none: str = "-") -> str:
    """A time in whole milliseconds: ``412 ms``, ``1530 ms``."""
    return none if value is None else f"{value * 1000:.0f} ms"


def count(n: int, word: str) -> str:
    """``1 read``, ``2 reads``, ``0 reads``: a number and its noun (plural by an s)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def size(n: int) -> str:
    """A byte count: ``812 B``, ``4.2 KB``, ``1.5 MB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"


def short_text(text: str, limit: int = 60, *, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked by ``ellipsis``."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(ellipsis))] + ellipsis


def short(value: Any, limit: int = 40, *, ellipsis: str = "…") -> str:
    """A JSON-ish value on one line (strings JSON-quoted, newlines escaped), at most ``limit`` characters."""
    try:
        text = exactjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        try:
            with exactjson.deep_recursion():
                text = repr(value)
        except RecursionError:  # (deeper than any reader here accepts: never from the wire)
            text = f"<{type(value).__name__} nested too deep to show>"
    return short_text(text.replace("\n", "\\n"), limit, ellipsis=ellipsis)


def short_bytes(raw: bytes, limit: int = 60) -> str:
    """The start of some bytes as a Python-quoted string (invalid UTF-8 shown as U+FFFD), ``...`` when cut."""
    text = raw[:limit].decode("utf-8", "replace")
    return repr(text) + ("..." if len(raw) > limit else "")


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides/isolates (they reorder what
# follows on the line: "Trojan Source"): shown escaped, never sent to a terminal raw.
_TERMINAL_UNSAFE = [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TERMINAL_TABLE = {c: f"\\x{c:02x}" for c in _TERMINAL_UNSAFE} | {c: f"\\u{c:04x}" for c in _BIDI}
_TERMINAL_TABLE[0x0D] = "\\r"
_TERMINAL_TABLE_LINE = _TERMINAL_TABLE | {0x0A: "\\n", 0x09: "\\t"}


def terminal(text: str, *, newlines: bool = True) -> str:
    """``text`` safe to print to a terminal: every control character (C0 but newline and tab, DEL, C1) and bidi
    override is shown escaped (``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``), so what a stream holds can never
    clear the screen, set the window title, ring the bell or rewrite a line. ``newlines=False``: newline and tab are
    escaped too (one line). Every text output of the CLI goes through it; JSON output stays exact."""
    return text.translate(_TERMINAL_TABLE if newlines else _TERMINAL_TABLE_LINE)

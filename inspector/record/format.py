"""The recording format (``stream-inspector-recording``, version 1): its constants, and whether a parsed line fits
its declaration, without pydantic.

The declaration itself (one pydantic model per line ``kind``, the tagged union, the words of the reader's
warnings, the published JSON Schema) is :mod:`inspector.record.linemodels`, built only when something asks for it:
building the models costs more than reading a small recording. A valid line is recognized by :func:`line_ok`, the
checks generated from the models' own fields (``inspector/record/linechecks.py``, committed; a test regenerates it
and compares, property tests pin that checks and models agree on any JSON value); the models run when a check
fails, to name what is wrong (:func:`field_errors`). docs/recording-format.md describes the format;
docs/recording.schema.json is ``python -m inspector.record.format``.

The names of the declaration (``HeaderLine``, ``RecordingLine``, ``LINE_MODELS``, ``field_errors``, ``json_schema``
...) are read through this module too: the first such read builds the models.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from inspector.record.linechecks import LINE_OK, read_ok

FORMAT = "stream-inspector-recording"
VERSION = 1
PLAIN_FORMAT = "plain-sse"  # the `format` of the synthetic header given to a plain SSE text file
KNOWN_KINDS = ("header", "request", "response", "read", "end", "obs", "redacted")

__all__ = [
    "FORMAT",
    "KNOWN_KINDS",
    "PLAIN_FORMAT",
    "VERSION",
    "What",
    "errors_of",
    "line_ok",
    "read_line_ok",
    "what_of",
]


class What:
    """Field metadata: what the value must be, in the words of the reader's warnings (``... is not a number``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"What({self.text!r})"


def line_ok(kind: str, obj: dict[str, Any]) -> bool:
    """Whether a parsed line of ``kind`` (header, request, response, read, end, obs; ``body``: a request body that
    is an object) fits its declaration: the generated checks, no pydantic."""
    return LINE_OK[kind](obj)


read_line_ok: Callable[[dict[str, Any]], bool] = read_ok
"""Whether a parsed ``read`` line fits its declaration (the reader's shortcut, one call per network read)."""


def errors_of(kind: str, obj: dict[str, Any]) -> dict[str, str]:
    """The fields of a parsed line of ``kind`` that do not fit its declaration (``linemodels.field_errors``);
    ``{}`` at once, without building the models, when the line fits."""
    if line_ok(kind, obj):
        return {}
    from inspector.record import linemodels

    return linemodels.field_errors(linemodels.MODELS[kind], obj)


def what_of(kind: str, name: str) -> str:
    """What field ``name`` of a line of ``kind`` must be, in the words of the reader's warnings."""
    from inspector.record import linemodels

    return linemodels.what(linemodels.MODELS[kind], name)


def __getattr__(name: str) -> Any:
    """The declaration's names (``HeaderLine``, ``LINE_MODELS``, ``json_schema``...), from the models built on
    first use."""
    if name.startswith("__"):
        raise AttributeError(name)
    from inspector.record import linemodels

    try:
        return getattr(linemodels, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.record.format``: print the JSON Schema of a recording line (the published
    docs/recording.schema.json is this output)."""
    from inspector.record import linemodels

    return linemodels.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

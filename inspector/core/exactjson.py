"""JSON that keeps integers of any size exact, in one place.

orjson (the project's JSON library) reads an integer beyond 64 bits as a float and refuses to write one. The API may
send such an integer in a tool input, and the SDK (jiter, then the standard library's encoder) keeps it exact: so do
we. ``loads`` parses with orjson, and only when the text holds a run of 19 or more digits (the only way to spell an
integer orjson cannot keep) parses it again with the standard library, which keeps it exact. ``dumps`` writes with
orjson and falls back to the standard library when orjson refuses an integer. Both behave like orjson otherwise:
the same errors (``orjson.JSONDecodeError``, ``TypeError``) and the same compact output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["dumps", "exact", "loads"]

_LONG_STR = re.compile(r"\d{19}")
_LONG_BYTES = re.compile(rb"\d{19}")


def loads(data: str | bytes | bytearray) -> Any:
    """``orjson.loads(data)``, with integers beyond 64 bits kept exact (never turned into floats)."""
    return exact(data, orjson.loads(data))


def exact(data: str | bytes | bytearray, value: Any) -> Any:
    """``value``, what orjson read from ``data``; read again with big integers kept exact if ``data`` may hold one."""
    long = _LONG_STR.search(data) if isinstance(data, str) else _LONG_BYTES.search(data)
    if long is None:
        return value
    try:
        return json.loads(data)  # valid JSON (orjson read it): the standard library keeps big integers exact
    except (ValueError, RecursionError):
        return value


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None, option: int = 0) -> bytes:
    """``orjson.dumps(value, default=default, option=option)``; a value holding an integer beyond 64 bits is written
    by the standard library instead, the same way (compact, or ``OPT_INDENT_2``, ``OPT_SORT_KEYS``)."""
    try:
        return orjson.dumps(value, default=default, option=option)
    except TypeError as e:
        if "64-bit" not in str(e):
            raise
    try:
        text = json.dumps(
            value,
            ensure_ascii=False,
            allow_nan=False,
            default=default,
            sort_keys=bool(option & orjson.OPT_SORT_KEYS),
            indent=2 if option & orjson.OPT_INDENT_2 else None,
            separators=(",", ": ") if option & orjson.OPT_INDENT_2 else (",", ":"),
        )
        return text.encode("utf-8")
    except (ValueError, UnicodeEncodeError) as e:  # NaN, a lone surrogate, a cycle: orjson's error type
        raise orjson.JSONEncodeError(str(e)) from e

"""JSON that keeps integers of any size exact, in one place.

orjson (the project's JSON library) reads an integer beyond 64 bits as a float and refuses to write one. The API may
send such an integer in a tool input, and the SDK (jiter, then the standard library's encoder) keeps it exact: so do
we. ``loads`` parses with orjson, and only when the text holds a run of 19 or more ASCII digits (the only way to spell
an integer orjson cannot keep) parses it again with the standard library, which keeps it exact. The run is found
in C (``bytes.translate`` maps every digit to one byte, then ``in``), ~4x faster than a regex scan on 1 MB.

Why not jiter, which keeps big integers exact in one pass? Measured (tools/bench_engine.py --json, a loaded 2-core
machine): on a 0.8 MB tool input orjson plus this scan is as fast or faster (3.6-6.5 ms vs jiter's 5.5-8.7 ms; the
old regex scan: 12-26 ms); on a 99-byte delta jiter is ~1 us faster (0.8 vs 2.0 us), a path the engine does not
take per event (it parses deltas with orjson alone). And jiter differs from orjson where it matters: ``1e400``
reads as inf (which orjson would then write as null) where orjson raises, it refuses nesting deeper than 200 where
orjson allows 1024, and it raises ``ValueError`` with other messages: using it would take a guard for each.
tests/core/test_exactjson.py pins every such case (28 of its tests fail with jiter as ``loads``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

__all__ = ["deep_recursion", "dumps", "exact", "has_long_digit_run", "loads"]

# Python's recursion limit while the standard library writes (or reads, or repr()s) a deep value: orjson reads 1,024
# levels, and the standard library's encoder recurses once per level, from wherever its caller already is (a
# dashboard's or a server's stack: a few hundred frames). The default limit, 1,000, failed from ~990 levels.
DEEP_LIMIT = 5_000
_deep_lock = threading.Lock()
_deep_users = 0
_deep_before = 0


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Run the block with the recursion limit at least ``DEEP_LIMIT`` (a value that orjson read can then be written
    by the standard library, or shown by ``repr``); the limit goes back when the last thread using it leaves."""
    global _deep_users, _deep_before
    with _deep_lock:
        if _deep_users == 0:
            _deep_before = sys.getrecursionlimit()
            if _deep_before < DEEP_LIMIT:
                sys.setrecursionlimit(DEEP_LIMIT)
        _deep_users += 1
    try:
        yield
    finally:
        with _deep_lock:
            _deep_users -= 1
            if _deep_users == 0 and sys.getrecursionlimit() == DEEP_LIMIT != _deep_before:
                # (only a limit this raised goes back; if this thread is deeper than the old limit, it stays raised)
                with contextlib.suppress(RecursionError):
                    sys.setrecursionlimit(_deep_before)


_DIGITS = bytes(0x64 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))  # every ASCII digit -> "d", the rest " "
_RUN = b"d" * 19


def has_long_digit_run(data: str | bytes | bytearray) -> bool:
    """Whether `data` holds 19 or more ASCII digits in a row."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return _RUN in data.translate(_DIGITS)


def loads(data: str | bytes | bytearray) -> Any:
    """``orjson.loads(data)``, with integers beyond 64 bits kept exact (never turned into floats), and integers
    beyond a double's range too (more than ~309 digits: orjson refuses them as "infinity"; the SDK's jiter and the
    standard library read them). Raises ``orjson.JSONDecodeError`` for what orjson refuses otherwise."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if "infinity" not in str(e) or not has_long_digit_run(data):
            raise
        return _huge_integers(data, e)
    return exact(data, value)


def _reject(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is infinity when parsed as double")
    return value


def _huge_integers(data: str | bytes | bytearray, error: orjson.JSONDecodeError) -> Any:
    """A text orjson refused only for a number beyond a double's range: read by the standard library, as orjson
    would read it but for integers kept exact: a float out of range (``1e400``), ``NaN`` / ``Infinity`` and a lone
    surrogate are still refused (``error``, orjson's)."""
    try:
        with deep_recursion():
            value = json.loads(data, parse_float=_finite, parse_constant=_reject)
            json.dumps(value, ensure_ascii=False).encode("utf-8")  # (a lone surrogate: orjson refuses it)
    except (ValueError, RecursionError, UnicodeEncodeError):
        raise error from None
    return value


def exact(data: str | bytes | bytearray, value: Any) -> Any:
    """``value``, what orjson read from ``data``; read again with big integers kept exact if ``data`` may hold one."""
    if not has_long_digit_run(data):
        return value
    try:
        with deep_recursion():  # valid JSON (orjson read it): the standard library keeps big integers exact
            return json.loads(data)
    except (ValueError, RecursionError):
        return value


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None, option: int = 0) -> bytes:
    """``orjson.dumps(value, default=default, option=option)``; a value holding an integer beyond 64 bits, or nested
    deeper than orjson writes (255 levels), is written by the standard library instead, the same way (compact, or
    ``OPT_INDENT_2``, ``OPT_SORT_KEYS``)."""
    try:
        return orjson.dumps(value, default=default, option=option)
    except TypeError as e:  # (orjson writes 255 levels at most; a value read back exact may nest deeper)
        if "64-bit" not in str(e) and "Recursion limit" not in str(e):
            raise
    try:
        with deep_recursion():
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
    except (ValueError, UnicodeEncodeError, RecursionError) as e:  # NaN, a lone surrogate, a cycle, too deep still
        raise orjson.JSONEncodeError(str(e)) from e

"""Recordings: a versioned JSON Lines file that keeps every network read of a session, with its timing.

Format ``stream-inspector-recording``, version 1 (also described in docs/recording-format.md)
=============================================================================================

One JSON object per line, UTF-8, each line ends with ``\\n``. Every line has a ``"kind"``. The writer emits the lines
in the order things happened and flushes each one as soon as it is written, so a crash loses nothing already
received (a process crash, that is: the writer flushes to the OS but does not fsync).

Line 1, the header (always first)::

    {"kind": "header", "format": "stream-inspector-recording", "version": 1, "tool_version": "0.1.0",
     "source": {...}, "started_at": "2025-01-01T12:00:00.000000Z"}

``source`` is a free dict describing where the traffic came from, e.g. ``{"type": "scenario", "name": "parse_date"}``
or ``{"type": "api", "model": "...", "base_url": "..."}``. ``started_at`` is ISO 8601 in UTC.

Per attempt (one HTTP request of one agent-loop turn; a retry is a new attempt of the same turn)::

    {"kind": "request",  "turn": 1, "attempt": 1, "t": 0.012, "method": "POST", "url": "...", "headers": {...},
     "body": <any JSON value>}
    {"kind": "response", "turn": 1, "attempt": 1, "t": 0.350, "status": 200, "headers": {...}}
    {"kind": "read",     "turn": 1, "attempt": 1, "t": 0.351, "data": "event: message_start\\ndata: {...}\\n\\n"}
    {"kind": "read",     "turn": 1, "attempt": 1, "t": 0.402, "b64": "/v8A"}
    {"kind": "end",      "turn": 1, "attempt": 1, "t": 2.113, "status": "complete", "reason": null}

Clocks: ``request.t`` is seconds since the start of the recording (the loop start). ``response.t``, ``read.t`` and
``end.t`` are seconds since *that attempt's request* was sent, so a read's wall-clock offset from the start of the
recording is ``request.t + read.t``.

``read`` lines hold one received network read each, losslessly: bytes that are valid UTF-8 are stored as text in
``"data"``; anything else is stored as standard base64 in ``"b64"`` (exactly one of the two is present). An empty
read is ``"data": ""``.

``end.status`` is a free string: ``"complete"``, ``"dropped"``, ``"error"``, ``"cancelled"``, ...; ``reason`` is a
string or null.

Observation lines ``{"kind": "obs", ...}`` carry loop observations; their content is free. Lines of any other kind
are kept by the reader (``Recording.unknown``) and are not an error, so later versions can add kinds.

Secrets: the headers ``authorization``, ``x-api-key``, ``cookie``, ``set-cookie`` and ``proxy-authorization``
(any case) are removed from request and response lines, not masked. As defence in depth the writer also takes a list
of secret strings and replaces every occurrence of them, in any line (header, body, reads, observations), by
``[redacted]`` before writing (inside read bytes too, before they are encoded; secrets must be at least 8 characters
long). A line where a secret cannot be redacted without breaking the JSON is replaced by
``{"kind": "redacted", "original_kind": ...}``. A secret split across two separate network reads is not detected.

Plain SSE text (what ``curl -N`` prints) is also accepted by the reader: a file that does not start with the header
line is a one-turn, one-attempt recording whose single read is the whole file, bytes kept exactly, with no timing.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from inspector import __version__
from inspector.core.errors import RecordingError
from inspector.core.redaction import MIN_SECRET_LENGTH, REDACTED, clean_headers, redact

FORMAT = "stream-inspector-recording"
VERSION = 1
PLAIN_FORMAT = "plain-sse"  # the `format` of the synthetic header given to a plain SSE text file

__all__ = [
    "FORMAT",
    "PLAIN_FORMAT",
    "VERSION",
    "RecordedAttempt",
    "RecordedRead",
    "RecordedTurn",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "is_recording",
    "read_recording",
]


# ---------------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------------


def _iso_utc(moment: datetime) -> str:
    if moment.tzinfo is None:  # a naive datetime is taken to be UTC already
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError("t must be a number of seconds")
    t = float(value)
    if not math.isfinite(t):
        raise ValueError(f"t must be finite, got {t!r}")
    return t


def _encode_bytes(data: bytes) -> tuple[str, str]:
    """``("data", text)`` when the bytes are UTF-8, else ``("b64", base64)``."""
    try:
        return "data", data.decode("utf-8")
    except UnicodeDecodeError:
        return "b64", base64.b64encode(data).decode("ascii")


def _json_body(body: Any) -> Any:
    """Request bodies are JSON values; raw bytes/str are parsed as JSON when they are JSON, else kept as text."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw.decode("utf-8", errors="replace")
    return body


class RecordingWriter:
    """Writes a recording line by line; every line is flushed as soon as it is written.

    ``path_or_file`` is a path (the file is created or truncated, and closed by ``close()``) or an open *binary*
    file object (flushed, but left open: the caller owns it). The header line is written by the constructor.
    ``secrets`` are strings that must never reach the file: every occurrence is replaced by ``[redacted]``
    (ValueError for a secret shorter than ``MIN_SECRET_LENGTH``). ``started_at`` defaults to now; a naive datetime
    is taken to be UTC.
    """

    def __init__(
        self,
        path_or_file: str | os.PathLike[str] | IO[bytes],
        *,
        source: dict,
        secrets: Iterable[str] = (),
        started_at: datetime | None = None,
    ) -> None:
        if isinstance(path_or_file, (str, os.PathLike)):
            self._file: IO[bytes] = open(path_or_file, "wb")
            self._owns_file = True
        else:
            if isinstance(path_or_file, io.TextIOBase) or not hasattr(path_or_file, "write"):
                raise TypeError("RecordingWriter needs a path or a binary file object")
            self._file = path_or_file
            self._owns_file = False
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        for secret in secrets:
            if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
                raise ValueError(f"secrets must be strings of at least {MIN_SECRET_LENGTH} characters")
        self._secrets = sorted(set(secrets), key=len, reverse=True)  # longest first
        self._secret_bytes = [s.encode("utf-8") for s in self._secrets]
        # the forms a secret can take inside serialized JSON (escaped) and as raw text
        self._secret_forms = sorted(
            {form for s in self._secrets for form in (s.encode("utf-8"), orjson.dumps(s)[1:-1])}, key=len, reverse=True
        )
        self._lock = threading.Lock()
        self._closed = False
        self.lines_written = 0
        self._write(
            {
                "kind": "header",
                "format": FORMAT,
                "version": VERSION,
                "tool_version": __version__,
                "source": dict(source),
                "started_at": _iso_utc(started_at or datetime.now(UTC)),
            }
        )

    # --- public API -------------------------------------------------------------------------------------------

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None:
        """The request of one attempt; ``t`` is seconds since the start of the recording."""
        self._write(
            {
                "kind": "request",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "method": str(method),
                "url": str(url),
                "headers": clean_headers(headers),
                "body": _json_body(body),
            }
        )

    def response(self, turn: int, attempt: int, t: float, status: int, headers: Any) -> None:
        """Status and headers of the response; ``t`` is seconds since the attempt's request was sent."""
        self._write(
            {
                "kind": "response",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "status": _int("status", status),
                "headers": clean_headers(headers),
            }
        )

    def read(self, turn: int, attempt: int, t: float, data: bytes) -> None:
        """One received network read; ``t`` is seconds since the attempt's request was sent."""
        raw = bytes(data)
        for secret in self._secret_bytes:
            raw = raw.replace(secret, REDACTED.encode())
        key, value = _encode_bytes(raw)
        self._write(
            {
                "kind": "read",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                key: value,
            }
        )

    def end(self, turn: int, attempt: int, t: float, status: str, reason: str | None = None) -> None:
        """How the attempt ended; ``t`` is seconds since the attempt's request was sent."""
        self._write(
            {
                "kind": "end",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "status": str(status),
                "reason": None if reason is None else str(reason),
            }
        )

    def observation(self, obj: dict) -> None:
        """A free-form loop observation, written as ``{"kind": "obs", **obj}`` (a "kind" key in obj is replaced)."""
        line = dict(obj)
        line.pop("kind", None)
        self._write({"kind": "obs", **line})

    def close(self) -> None:
        """Flush and (if the writer opened it) close the file. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._file.flush()
            finally:
                if self._owns_file:
                    self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals --------------------------------------------------------------------------------------------

    def _redact(self, value: Any) -> Any:
        """Replace secrets in every string (keys included) of a JSON-like value."""
        return redact(value, self._secrets)

    def _serialize(self, obj: dict) -> bytes:
        if self._secrets:
            obj = self._redact(obj)
        try:
            line = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:  # e.g. a str with a lone surrogate: replace what cannot be encoded
            line = orjson.dumps(_scrub_surrogates(obj), default=str, option=orjson.OPT_NON_STR_KEYS)
            if self._secrets:
                line = orjson.dumps(self._redact(orjson.loads(line)))
        if self._secrets and any(form in line for form in self._secret_forms):
            # last line of defence (a secret inside something turned into text by `default=str`, or spanning JSON
            # syntax): redact the text itself, and if that breaks the JSON, write a placeholder instead of the line
            for form in self._secret_forms:
                line = line.replace(form, REDACTED.encode())
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                line = orjson.dumps({"kind": "redacted", "original_kind": self._redact(str(obj.get("kind")))})
        return line

    def _write(self, obj: dict) -> None:
        line = self._serialize(obj) + b"\n"
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed RecordingWriter")
            self._file.write(line)
            self._file.flush()
            self.lines_written += 1


def _scrub_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub_surrogates(k): _scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_surrogates(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordedRead:
    t: float | None  # seconds since the attempt's request was sent; None when unknown (plain SSE text)
    data: bytes


@dataclass(slots=True)
class RecordedAttempt:
    turn: int
    attempt: int
    request: dict | None = None
    response: dict | None = None
    reads: list[RecordedRead] = field(default_factory=list)
    end: dict | None = None

    @property
    def data(self) -> bytes:
        """All the bytes received in this attempt, in order."""
        return b"".join(read.data for read in self.reads)


@dataclass(slots=True)
class RecordedTurn:
    turn: int
    attempts: list[RecordedAttempt] = field(default_factory=list)


@dataclass(slots=True)
class Recording:
    header: dict
    turns: list[RecordedTurn] = field(default_factory=list)
    observations: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown: list[dict] = field(default_factory=list)  # lines of a kind this version does not know, in file order

    def attempts(self) -> Iterator[RecordedAttempt]:
        """Every attempt, turn by turn, in the order they appear in the file."""
        for turn in self.turns:
            yield from turn.attempts

    @property
    def is_plain(self) -> bool:
        """True when this came from plain SSE text (no header, no timing)."""
        return self.header.get("format") == PLAIN_FORMAT


_HEADER_PREFIX = re.compile(rb'\A\{\s*"kind"\s*:\s*"header"')


def is_recording(first_bytes: bytes) -> bool:
    """Whether data starting with ``first_bytes`` is a JSON Lines recording (rather than plain SSE text).

    True when the first line is a JSON object whose ``kind`` is ``"header"``. A prefix that stops inside the first
    line is recognised when it starts with ``{"kind": "header"`` (which the writer always produces); 64 bytes are
    plenty.
    """
    first_bytes = bytes(first_bytes)
    if _HEADER_PREFIX.match(first_bytes):
        return True
    if not first_bytes.startswith(b"{"):
        return False
    first_line = first_bytes.split(b"\n", 1)[0]
    try:
        obj = orjson.loads(first_line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("kind") == "header"


def read_recording(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]) -> Recording:
    """Read a recording (or plain SSE text) from a path, from bytes (e.g. stdin) or from a binary file object.

    A ``str`` is a path. A missing file raises OSError. A recording of an unsupported format version raises
    ``RecordingError``. Damaged lines (e.g. a last line cut short by a crash) become ``warnings``; every complete
    line is kept.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        raw = bytes(path_or_bytes)
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        raw = Path(path_or_bytes).read_bytes()
    elif hasattr(path_or_bytes, "read"):
        raw = path_or_bytes.read()
        if not isinstance(raw, bytes):
            raise TypeError("read_recording needs a binary file object")
    else:
        raise TypeError(f"read_recording: unsupported input {type(path_or_bytes).__name__}")

    if not is_recording(raw[:65536]):
        return _plain(raw)
    return _parse_jsonl(raw)


def _plain(raw: bytes) -> Recording:
    attempt = RecordedAttempt(turn=0, attempt=0, reads=[RecordedRead(t=None, data=raw)])
    header = {"kind": "header", "format": PLAIN_FORMAT, "version": None, "source": {"type": "plain"}}
    return Recording(header=header, turns=[RecordedTurn(turn=0, attempts=[attempt])])


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_header(header_line: bytes) -> dict:
    try:
        header = orjson.loads(header_line)
    except orjson.JSONDecodeError:
        raise RecordingError("recording header line is not valid JSON (file cut short?)") from None
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise RecordingError("recording does not start with a header line")
    if header.get("format") != FORMAT:
        raise RecordingError(f"not a {FORMAT} file (format {_short(header.get('format'))})")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise RecordingError(
            f"recording format version {_short(version)} is not supported"
            f" (stream-inspector {__version__} reads version {VERSION})"
        )
    return header


def _parse_jsonl(raw: bytes) -> Recording:
    lines = raw.split(b"\n")
    ends_with_newline = raw.endswith(b"\n")
    recording = Recording(header=_check_header(lines[0]))
    warn = recording.warnings.append
    turns: dict[int, RecordedTurn] = {}
    attempts: dict[tuple[int, int], RecordedAttempt] = {}

    def attempt_for(obj: dict, number: int) -> RecordedAttempt | None:
        turn, attempt = obj.get("turn"), obj.get("attempt")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (turn, attempt)):
            warn(f"line {number}: {obj['kind']} line without integer turn/attempt, skipped")
            return None
        key = (turn, attempt)
        if key not in attempts:
            if turn not in turns:
                turns[turn] = RecordedTurn(turn=turn)
                recording.turns.append(turns[turn])
            attempts[key] = RecordedAttempt(turn=turn, attempt=attempt)
            turns[turn].attempts.append(attempts[key])
        return attempts[key]

    last_index = len(lines) - 1
    for index, line in enumerate(lines[1:], start=1):
        number = index + 1  # 1-based line number
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            if index == last_index and not ends_with_newline:
                warn(
                    f"line {number}: last line is cut short ({len(line)} bytes), ignored;"
                    " the recording was probably interrupted"
                )
            else:
                warn(f"line {number}: not valid JSON, skipped")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            warn(f'line {number}: not a JSON object with a "kind", skipped')
            continue
        kind = obj["kind"]
        if kind == "header":
            warn(f"line {number}: second header line ignored")
        elif kind == "obs":
            recording.observations.append(obj)
        elif kind in ("request", "response", "end"):
            target = attempt_for(obj, number)
            if target is None:
                continue
            if getattr(target, kind) is not None:
                warn(f"line {number}: second {kind} line for turn {target.turn} attempt {target.attempt}, ignored")
                continue
            setattr(target, kind, obj)
        elif kind == "read":
            _add_read(obj, number, attempt_for, warn)
        else:
            recording.unknown.append(obj)
    return recording


def _add_read(obj: dict, number: int, attempt_for: Any, warn: Any) -> None:
    has_data, has_b64 = "data" in obj, "b64" in obj
    if has_data == has_b64:
        warn(f'line {number}: read line needs exactly one of "data" and "b64", skipped')
        return
    if has_data:
        if not isinstance(obj["data"], str):
            warn(f'line {number}: read "data" is not a string, skipped')
            return
        data = obj["data"].encode("utf-8")
    else:
        try:
            data = base64.b64decode(obj["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            warn(f'line {number}: read "b64" is not valid base64, skipped')
            return
    t = obj.get("t")
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        if t is not None:
            warn(f'line {number}: read "t" is not a number, timing dropped')
        t = None
    target = attempt_for(obj, number)
    if target is not None:
        target.reads.append(RecordedRead(t=None if t is None else float(t), data=data))

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

Secrets (docs/secrets.md): credential headers are removed from request and response lines. The writer's secrets
(given, added with ``add_secrets``, or learned from the credentials of a recorded request) are replaced by
``[redacted]`` in every line, as they are or JSON-escaped; reads go through a ``StreamRedactor`` per attempt, so a
secret split across reads or deltas, or escaped, is masked too (the writer may hold back the end of a read and
write it with a later read or before the attempt's end line). A line where a secret cannot be redacted without
breaking the JSON is replaced by ``{"kind": "redacted", "original_kind": ...}``.

Plain SSE text (what ``curl -N`` prints) is also accepted by the reader: a file that does not start with the header
line is a one-turn, one-attempt recording whose reads are the file's chunks (about 1 MiB each), bytes kept exactly,
with no timing. Readers read their input as a stream, never whole; a field of the wrong type is dropped with a
warning naming the line (its raw value kept under ``"invalid"``).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import os
import re
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, overload

import orjson

from inspector import __version__
from inspector.core import exactjson
from inspector.core.errors import RecordingError
from inspector.core.fmt import short_text
from inspector.core.redaction import (
    MIN_SECRET_LENGTH,
    REDACTED,
    StreamRedactor,
    clean_headers,
    credential_values,
    redact,
    usable_secrets,
)

FORMAT = "stream-inspector-recording"
VERSION = 1
PLAIN_FORMAT = "plain-sse"  # the `format` of the synthetic header given to a plain SSE text file

__all__ = [
    "FORMAT",
    "MAX_LINE_BYTES",
    "PLAIN_FORMAT",
    "VERSION",
    "RecordedAttempt",
    "RecordedRead",
    "RecordedTurn",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "is_recording",
    "read_chunks",
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
    if isinstance(body, dict) and any(map(_is_view, body.values())):
        # the loop's history view (agent.transcript: messages read back from its spill file) is written as a list
        return {k: list(v) if _is_view(v) else v for k, v in body.items()}
    return body


def _is_view(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (list, tuple, str, bytes, bytearray, memoryview))


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
        self._secrets: list[str] = []
        self._secret_forms: list[bytes] = []
        # one StreamRedactor per attempt: reads are masked across read and delta boundaries (docs/secrets.md)
        self._streams: dict[tuple[int, int], tuple[StreamRedactor, float]] = {}
        self._lock = threading.Lock()
        self.add_secrets(secrets)
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

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """More secrets (a key first seen late): masked in everything written from now on. Strings shorter than
        MIN_SECRET_LENGTH are ignored here (their credential headers are dropped anyway)."""
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        new = [s for s in usable_secrets(secrets) if s not in self._secrets]
        if not new:
            return
        self._secrets = usable_secrets([*self._secrets, *new])  # longest first
        # the forms a secret can take inside serialized JSON (escaped) and as raw text
        self._secret_forms = sorted(
            {form for s in self._secrets for form in (s.encode("utf-8"), orjson.dumps(s)[1:-1])}, key=len, reverse=True
        )
        for stream, _ in self._streams.values():
            stream.add_secrets(new)

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None:
        """The request of one attempt; ``t`` is seconds since the start of the recording. The credentials it
        carries (credential headers, ``?api_key=``) become secrets of this writer before anything is written."""
        try:
            self.add_secrets(credential_values(headers, str(url)))
        except (TypeError, ValueError, AttributeError):  # headers of an odd shape: clean_headers copes below
            pass
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
        """One received network read; ``t`` is seconds since the attempt's request was sent.

        With secrets, the read goes through the attempt's StreamRedactor first: what could be the beginning of a
        secret is held back and written with a later read (or before the attempt's end line)."""
        raw = bytes(data)
        if self._secrets:
            key_ = (_int("turn", turn), _int("attempt", attempt))
            stream = self._streams.get(key_, (None, 0.0))[0] or StreamRedactor(self._secrets)
            self._streams[key_] = (stream, _seconds(t))
            raw = stream.feed(raw)
            if not raw:
                return
        self._write_read(turn, attempt, t, raw)

    def _write_read(self, turn: int, attempt: int, t: float, raw: bytes) -> None:
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
        """How the attempt ended; ``t`` is seconds since the attempt's request was sent. Bytes still held back by
        the attempt's StreamRedactor are written first (masked)."""
        self._flush_stream((turn, attempt), t)
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
        if not self._closed:
            for key, (_, last_t) in list(self._streams.items()):
                self._flush_stream(key, last_t)
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

    def _flush_stream(self, key: tuple[Any, Any], t: float) -> None:
        found = self._streams.pop(key, None)
        if found is not None:
            rest = found[0].flush()
            if rest:
                self._write_read(key[0], key[1], t, rest)

    def _redact(self, value: Any) -> Any:
        """Replace secrets in every string (keys included) of a JSON-like value."""
        return redact(value, self._secrets)

    def _serialize(self, obj: dict) -> bytes:
        if self._secrets:
            obj = self._redact(obj)
        try:
            line = exactjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:  # e.g. a str with a lone surrogate: replace what cannot be encoded
            line = exactjson.dumps(_scrub_surrogates(obj), default=str, option=orjson.OPT_NON_STR_KEYS)
            if self._secrets:
                line = exactjson.dumps(self._redact(exactjson.loads(line)))
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


class SpilledReads(Sequence[RecordedRead]):
    """An attempt's reads kept in a spill file and read back on demand: a replay of a long recording keeps only
    each read's time, offset and length in memory (about 24 bytes a read), whatever the size of the bytes."""

    __slots__ = ("_file", "_t", "_offset", "_length")

    def __init__(self, spill: IO[bytes]) -> None:
        self._file = spill
        self._t = array("d")  # NaN: no timing
        self._offset = array("q")
        self._length = array("q")

    def append(self, read: RecordedRead) -> None:
        f = self._file
        f.seek(0, os.SEEK_END)
        self._offset.append(f.tell())
        self._length.append(len(read.data))
        self._t.append(math.nan if read.t is None else read.t)
        f.write(read.data)

    def __len__(self) -> int:
        return len(self._offset)

    def _get(self, i: int) -> RecordedRead:
        t = self._t[i]
        self._file.flush()
        data = os.pread(self._file.fileno(), self._length[i], self._offset[i])
        return RecordedRead(None if math.isnan(t) else t, data)

    @overload
    def __getitem__(self, i: int) -> RecordedRead: ...
    @overload
    def __getitem__(self, i: slice) -> list[RecordedRead]: ...
    def __getitem__(self, i: int | slice) -> RecordedRead | list[RecordedRead]:
        if isinstance(i, slice):
            return [self._get(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._get(i)


def spill_reads(spill: IO[bytes]) -> Callable[[RecordedAttempt, RecordedRead], None]:
    """An ``on_read`` callback for ``read_recording(..., keep_reads=False)``: every attempt's reads go to ``spill``
    (an open binary file, e.g. ``tempfile.TemporaryFile()``) as :class:`SpilledReads`."""

    def on_read(attempt: RecordedAttempt, read: RecordedRead) -> None:
        current: Any = attempt.reads
        if isinstance(current, SpilledReads):
            current.append(read)
            return
        spilled = SpilledReads(spill)
        for earlier in current:
            spilled.append(earlier)
        spilled.append(read)
        attempt.reads = spilled  # type: ignore[assignment]  # (read like a list: len, index, iterate)

    return on_read


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


_LINE_BREAK = re.compile(rb"[\r\n]")
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


# --- input as a stream of chunks ----------------------------------------------------------------------------------

MAX_LINE_BYTES = 64 * 1024 * 1024  # default maximum size of one line (JSONL) / one SSE line or event (plain SSE, dump)
CHUNK_BYTES = 1024 * 1024  # plain SSE is kept as reads of about this size (what the reader got, not one bytes object)
MAX_WARNINGS = 1000  # warnings kept per recording; the others are counted
GIVE_UP_FACTOR = 4  # an over-long line longer than GIVE_UP_FACTOR * max_line ends the reading (e.g. /dev/zero)
_HEAD_BYTES = 65536

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]
ReadCallback = Callable[[RecordedAttempt, RecordedRead], None]


def open_chunks(source: Source, size: int = CHUNK_BYTES) -> tuple[Iterator[bytes], Callable[[], None]]:
    """The input as an iterator of byte chunks (never the whole input at once, except bytes given whole) and a
    function that closes what was opened here."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
        if len(raw) <= size:
            return iter([raw] if raw else []), lambda: None
        return (raw[i : i + size] for i in range(0, len(raw), size)), lambda: None
    if isinstance(source, (str, os.PathLike)):
        f: IO[bytes] = open(Path(source), "rb")  # closed by the returned function
        return _file_chunks(f, size), f.close
    if hasattr(source, "read"):
        return _file_chunks(source, size), lambda: None
    raise TypeError(f"read_recording: unsupported input {type(source).__name__}")


def _file_chunks(f: IO[bytes], size: int) -> Iterator[bytes]:
    reader = getattr(f, "read1", None) or f.read  # read1: what is there, without waiting to fill `size` (pipes)
    while True:
        chunk = reader(size)
        if not isinstance(chunk, (bytes, bytearray)):
            raise TypeError("read_recording needs a binary file object")
        if not chunk:
            return
        yield bytes(chunk)


def read_head(chunks: Iterator[bytes]) -> bytes:
    """The first bytes of the input: enough to tell a recording / HAR / plain SSE apart (up to the first line break,
    at most _HEAD_BYTES unless a chunk was bigger)."""
    parts: list[bytes] = []
    total = 0
    for chunk in chunks:
        parts.append(chunk)
        total += len(chunk)
        if total >= _HEAD_BYTES or b"\n" in chunk:
            break
    return b"".join(parts)


def prepend(head: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from chunks


@dataclass(slots=True)
class _Line:
    number: int  # 1-based
    data: bytes | None  # None: longer than the maximum, not kept
    length: int  # bytes in the line, without its "\n" (as far as it was read)
    terminated: bool  # ended by "\n" (False: the last line of the input without one)
    gave_up: bool = False  # the line was longer than GIVE_UP_FACTOR * max: nothing after it was read


def _lines(chunks: Iterable[bytes], max_line: int) -> Iterator[_Line]:
    """Split a stream of chunks into lines, keeping at most ``max_line`` bytes of any line in memory."""
    parts: list[bytes] = []
    size = 0
    too_long = False
    number = 0
    for chunk in chunks:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                piece = chunk[start:] if start else chunk
                size += len(piece)
                if not too_long:
                    if size > max_line:
                        too_long = True
                        parts.clear()
                    else:
                        parts.append(piece)
                if too_long and size > GIVE_UP_FACTOR * max_line:
                    number += 1
                    yield _Line(number, None, size, False, gave_up=True)
                    return
                break
            piece = chunk[start:nl]
            size += len(piece)
            number += 1
            if too_long or size > max_line:
                yield _Line(number, None, size, True)
            else:
                parts.append(piece)
                yield _Line(number, parts[0] if len(parts) == 1 else b"".join(parts), size, True)
            parts = []
            size = 0
            too_long = False
            start = nl + 1
    if size or parts:
        number += 1
        yield _Line(number, None if too_long else b"".join(parts), size, False)


# --- reading ------------------------------------------------------------------------------------------------------


def read_recording(
    path_or_bytes: Source,
    *,
    max_line: int = MAX_LINE_BYTES,
    on_read: ReadCallback | None = None,
    keep_reads: bool = True,
) -> Recording:
    """Read a recording (or plain SSE text) from a path, from bytes (e.g. stdin) or from a binary file object.

    The input is read as a stream (chunk by chunk, line by line), never whole. A ``str`` is a path. A missing file
    raises OSError. A recording of an unsupported format version raises ``RecordingError``. Damaged lines (a last
    line cut short by a crash, a field of the wrong type, a line longer than ``max_line`` bytes) become
    ``warnings`` naming the line; every good line is kept.

    ``on_read(attempt, read)`` is called for every read as it is read (the attempt's request and response lines,
    when they come first, are already set). With ``keep_reads=False`` the reads are not kept in the Recording
    (``attempt.reads`` stays empty): memory does not grow with the reads, e.g. for ``dump``.
    """
    chunks, close = open_chunks(path_or_bytes)
    try:
        head = read_head(chunks)
        return read_chunks(prepend(head, chunks), head, max_line=max_line, on_read=on_read, keep_reads=keep_reads)
    finally:
        close()


def read_chunks(
    chunks: Iterator[bytes],
    head: bytes,
    *,
    max_line: int = MAX_LINE_BYTES,
    on_read: ReadCallback | None = None,
    keep_reads: bool = True,
) -> Recording:
    """``read_recording`` of an input given as chunks whose first bytes are ``head`` (``head`` is not consumed
    separately: ``chunks`` starts with it)."""
    if not is_recording(head[:_HEAD_BYTES]):
        return _plain(chunks, max_line, on_read, keep_reads)
    return _parse_jsonl(chunks, max_line, on_read, keep_reads)


def _plain(chunks: Iterable[bytes], max_line: int, on_read: ReadCallback | None, keep_reads: bool) -> Recording:
    """Plain SSE text: one attempt whose reads are the input's chunks (coalesced to about CHUNK_BYTES). The bytes
    are kept exactly, except the part of a line beyond ``max_line`` bytes, which is dropped (with a warning)."""
    attempt = RecordedAttempt(turn=0, attempt=0)
    header = {"kind": "header", "format": PLAIN_FORMAT, "version": None, "source": {"type": "plain"}}
    recording = Recording(header=header, turns=[RecordedTurn(turn=0, attempts=[attempt])])
    pending: list[bytes] = []
    pending_size = 0
    run = 0  # bytes since the last line break
    offset = 0  # bytes of input seen
    dropped = 0  # bytes of over-long lines dropped
    dropping = False

    def emit(data: bytes) -> None:
        read = RecordedRead(t=None, data=data)
        if keep_reads:
            attempt.reads.append(read)
        if on_read is not None:
            on_read(attempt, read)

    def keep(data: bytes) -> None:
        nonlocal pending, pending_size
        if data:
            pending.append(data)
            pending_size += len(data)
        if pending_size >= CHUNK_BYTES:
            emit(pending[0] if len(pending) == 1 else b"".join(pending))
            pending, pending_size = [], 0

    stop = False
    for chunk in chunks:
        offset += len(chunk)
        if not dropping and run + len(chunk) <= max_line:  # the usual case: no line of this chunk can be too long
            last_break = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            run = len(chunk) - last_break - 1 if last_break >= 0 else run + len(chunk)
            keep(chunk)
            continue
        # a line may be over the limit: go through the chunk line by line
        pos = 0
        start = offset - len(chunk)
        breaks = [m.start() for m in _LINE_BREAK.finditer(chunk)]
        for end in [*breaks, len(chunk)]:
            segment = chunk[pos:end]
            if not dropping and run + len(segment) > max_line:
                room = max(0, max_line - run)
                recording.warnings.append(
                    f"byte {start + pos + room}: an SSE line longer than {max_line} bytes: the rest of the line is"
                    " dropped"
                )
                dropping = True
                keep(segment[:room])
                dropped += len(segment) - room
            elif dropping:
                dropped += len(segment)
            else:
                keep(segment)
            run += len(segment)
            if end < len(chunk):  # a line break
                keep(chunk[end : end + 1])
                run, dropping = 0, False
                pos = end + 1
            elif dropping and run > GIVE_UP_FACTOR * max_line:
                recording.warnings.append(
                    f"byte {offset}: the input ends in an over-long line ({run} bytes so far): stopped reading"
                )
                stop = True
        if stop:
            break
    if pending or not attempt.reads:
        emit(b"".join(pending))
    if dropped:
        recording.header["dropped_bytes"] = dropped
    return recording


def _short(value: Any, limit: int = 60) -> str:
    return short_text(repr(value), limit, ellipsis="...")


def _check_header(header_line: bytes | None) -> dict:
    if header_line is None:
        raise RecordingError("recording header line is too long")
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
    if not isinstance(header.get("source"), dict):
        header["source"] = {}
    return header


# --- shapes of the lines: a field of the wrong type is dropped (kept raw under "invalid") with a warning ---------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _is_status(v: Any) -> bool:
    return _is_int(v) and 100 <= v <= 999


def _is_headers(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_dict_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _is_system(v: Any) -> bool:
    return isinstance(v, str) or _is_dict_list(v)


def _is_times(v: Any) -> bool:
    return isinstance(v, dict) and all(_is_num(x) for x in v.values())


# (field, check, what it must be); a field that is absent is not checked
_SHAPES: dict[str, list[tuple[str, Callable[[Any], bool], str]]] = {
    "request": [
        ("t", _is_num, "a number"),
        ("method", _is_str, "a string"),
        ("url", _is_str, "a string"),
        ("headers", _is_headers, "an object of strings"),
    ],
    "response": [
        ("t", _is_num, "a number"),
        ("status", _is_status, "an HTTP status"),
        ("headers", _is_headers, "an object of strings"),
    ],
    "end": [
        ("t", _is_num, "a number"),
        ("status", _is_str, "a string"),
        ("reason", _is_opt_str, "a string or null"),
    ],
}
_BODY_SHAPE: list[tuple[str, Callable[[Any], bool], str]] = [
    ("model", _is_str, "a string"),
    ("messages", _is_dict_list, "a list of objects"),
    ("max_tokens", _is_int, "an integer"),
    ("system", _is_system, "a string or a list of objects"),
    ("tools", _is_dict_list, "a list of objects"),
    ("stream", lambda v: isinstance(v, bool), "true or false"),
]
_OBS_SHAPE: list[tuple[str, Callable[[Any], bool], str]] = [
    ("type", _is_str, "a string"),
    ("id", _is_str, "a string"),
    ("name", _is_str, "a string"),
    ("state", _is_str, "a string"),
    ("safe", lambda v: isinstance(v, bool), "true or false"),
    ("times", _is_times, "an object of numbers"),
    ("messages", _is_dict_list, "a list of objects"),
    ("t", _is_num, "a number"),
]


def _check_fields(
    obj: dict, shape: list[tuple[str, Callable[[Any], bool], str]], where: str, prefix: str, warn: Any, into: dict
) -> None:
    for name, check, what in shape:
        if name in obj and obj[name] is not None and not check(obj[name]):
            value = obj.pop(name)
            into[prefix + name] = value
            warn(f"{where}: {prefix}{name} {_short(value, 40)} is not {what}, dropped")


def _validate(kind: str, obj: dict, number: int, warn: Any) -> None:
    """Drop (with a warning naming the line) the fields of a line that have the wrong type; the raw values are
    kept under ``obj["invalid"]`` so nothing is lost, and readers can trust the types of what is left."""
    invalid: dict = {}
    where = f"line {number}: {kind}"
    if kind == "obs":
        _check_fields(obj, _OBS_SHAPE, where, "", warn, invalid)
    else:
        _check_fields(obj, _SHAPES[kind], where, "", warn, invalid)
    if kind == "request" and isinstance(obj.get("body"), dict):
        body = obj["body"] = dict(obj["body"])
        _check_fields(body, _BODY_SHAPE, where, "body.", warn, invalid)
    if invalid:
        previous = obj.get("invalid")
        obj["invalid"] = {**previous, **invalid} if isinstance(previous, dict) else invalid


def _parse_jsonl(chunks: Iterable[bytes], max_line: int, on_read: ReadCallback | None, keep_reads: bool) -> Recording:
    lines = _lines(chunks, max_line)
    first = next(lines, None)
    recording = Recording(header=_check_header(first.data if first is not None else b""))
    warnings = recording.warnings
    suppressed = 0

    def warn(text: str) -> None:  # at most MAX_WARNINGS kept: a damaged file must not make memory grow with it
        nonlocal suppressed
        if len(warnings) < MAX_WARNINGS:
            warnings.append(text)
        else:
            suppressed += 1

    turns: dict[int, RecordedTurn] = {}
    attempts: dict[tuple[int, int], RecordedAttempt] = {}

    def attempt_for(obj: dict, number: int) -> RecordedAttempt | None:
        turn, attempt = obj.get("turn"), obj.get("attempt")
        if (
            not (isinstance(turn, int) and isinstance(attempt, int))
            or isinstance(turn, bool)
            or isinstance(attempt, bool)
        ):
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

    for line in lines:
        number = line.number
        if line.data is None:
            if line.gave_up:
                warn(f"line {number}: longer than {GIVE_UP_FACTOR * max_line} bytes, stopped reading")
            else:
                warn(f"line {number}: longer than {max_line} bytes ({line.length} bytes), skipped")
            continue
        if not line.data.strip():
            continue
        try:
            obj = orjson.loads(line.data)
        except orjson.JSONDecodeError:
            if not line.terminated:
                warn(
                    f"line {number}: last line is cut short ({line.length} bytes), ignored;"
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
            _validate(kind, obj, number, warn)
            if obj.get("type") == "tool_state" and "id" not in obj:
                warn(f"line {number}: {obj['type']} observation without a string id, skipped")
                continue
            recording.observations.append(obj)
        elif kind in ("request", "response", "end"):
            target = attempt_for(obj, number)
            if target is None:
                continue
            if getattr(target, kind) is not None:
                warn(f"line {number}: second {kind} line for turn {target.turn} attempt {target.attempt}, ignored")
                continue
            _validate(kind, obj, number, warn)
            setattr(target, kind, obj)
        elif kind == "read":
            found = _read_of(obj, number, warn)
            if found is None:
                continue
            target = attempt_for(obj, number)
            if target is None:
                continue
            if keep_reads:
                target.reads.append(found)
            if on_read is not None:
                on_read(target, found)
        else:
            recording.unknown.append(obj)
    if suppressed:
        warnings.append(f"{suppressed} more warnings not shown")
    return recording


def _read_of(obj: dict, number: int, warn: Any) -> RecordedRead | None:
    has_data, has_b64 = "data" in obj, "b64" in obj
    if has_data == has_b64:
        warn(f'line {number}: read line needs exactly one of "data" and "b64", skipped')
        return None
    if has_data:
        if not isinstance(obj["data"], str):
            warn(f'line {number}: read "data" is not a string, skipped')
            return None
        data = obj["data"].encode("utf-8", errors="surrogatepass")
    else:
        try:
            data = base64.b64decode(obj["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            warn(f'line {number}: read "b64" is not valid base64, skipped')
            return None
    t = obj.get("t")
    if not _is_num(t):
        if t is not None:
            warn(f'line {number}: read "t" is not a number, timing dropped')
        t = None
    return RecordedRead(t=None if t is None else float(t), data=data)

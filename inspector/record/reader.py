"""Reading a recording (format ``stream-inspector-recording``, version 1) or plain SSE text, as a stream: every line
is validated against its declaration (inspector/record/format.py); a damaged line becomes a warning naming it,
never a traceback, with the raw value kept (docs/recording-format.md, "Reading damaged files")."""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, overload

import orjson

from inspector import __version__
from inspector.core import exactjson
from inspector.core.errors import RecordingError
from inspector.core.fmt import short_text
from inspector.record.format import FORMAT, PLAIN_FORMAT, VERSION, errors_of, read_line_ok, what_of

__all__ = [
    "CHUNK_BYTES",
    "GIVE_UP_FACTOR",
    "MAX_LINE_BYTES",
    "MAX_WARNINGS",
    "ReadCallback",
    "RecordedAttempt",
    "RecordedRead",
    "RecordedTurn",
    "Recording",
    "SpilledReads",
    "Source",
    "is_recording",
    "open_chunks",
    "prepend",
    "read_chunks",
    "read_head",
    "read_recording",
    "spill_reads",
]


@dataclass(slots=True)
class RecordedRead:
    t: float | None  # seconds since the attempt's request was sent; None when unknown (plain SSE text)
    data: bytes


@dataclass(slots=True)
class RecordedAttempt:
    turn: int
    attempt: int
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    reads: list[RecordedRead] = field(default_factory=list)
    end: dict[str, Any] | None = None
    # a proxy's recording: the conversation its turn is in (the ``conversation`` line before its request), for what
    # is said as the attempt is read (``dump --events --json``)
    conversation: str | None = None

    @property
    def data(self) -> bytes:
        """All the bytes received in this attempt, in order."""
        return b"".join(read.data for read in self.reads)


# bytes read back from a spill file at once (SpilledReads._get): a replay reads an attempt's reads in order, and one
# system call per read was a GIL hand-off per read for a session on a thread of its own (the dashboard's), behind
# the UI thread each time: ~15% of the session thread's samples at 100k events, the dashboard at 2x no UI
WINDOW = 1 << 16


class SpilledReads(Sequence[RecordedRead]):
    """An attempt's reads kept in a spill file and read back on demand: a replay of a long recording keeps only
    each read's time, offset and length in memory (about 24 bytes a read), whatever the size of the bytes. Read
    back a window at a time (``WINDOW`` bytes, one window for every spill file: the last one read)."""

    __slots__ = ("_file", "_t", "_offset", "_length")

    # (the spill file, where its window starts, its bytes): what the last read back brought (append-only files:
    # bytes once written never change)
    _window: tuple[Any, int, bytes] | None = None

    def __init__(self, spill: IO[bytes]) -> None:
        self._file = spill
        self._t = array("d")  # NaN: no timing
        self._offset = array("q")
        self._length = array("q")

    def append(self, read: RecordedRead) -> None:
        f = self._file
        # (the file's position is its end: only appends write to it, reading back is pread; a seek to the end per
        # read was two system calls and a flush, one write per read: 0.26 s of a 100k-read recording's load)
        self._offset.append(f.tell())
        self._length.append(len(read.data))
        self._t.append(math.nan if read.t is None else read.t)
        f.write(read.data)

    def __len__(self) -> int:
        return len(self._offset)

    def times(self) -> list[float | None]:
        """Every read's time (None: unknown), without reading their bytes back."""
        return [None if math.isnan(t) else t for t in self._t]

    def _get(self, i: int) -> RecordedRead:
        t = self._t[i]
        f, start, size = self._file, self._offset[i], self._length[i]
        window = SpilledReads._window
        if window is None or window[0] is not f or not window[1] <= start <= start + size <= window[1] + len(window[2]):
            f.flush()  # (what append wrote may still be in the file's buffer: once per window)
            chunk = os.pread(f.fileno(), max(size, WINDOW), start)
            window = SpilledReads._window = (f, start, chunk)
        at = start - window[1]
        return RecordedRead(None if math.isnan(t) else t, window[2][at : at + size])

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
    (an open binary file, e.g. ``tempfile.TemporaryFile()``; written from its end on) as :class:`SpilledReads`."""
    spill.seek(0, os.SEEK_END)  # (from here on, the file's position stays at its end: see SpilledReads.append)

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
    header: dict[str, Any]
    turns: list[RecordedTurn] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown: list[dict[str, Any]] = field(
        default_factory=list
    )  # lines of a kind this version does not know, in file order

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
    if head.startswith(_BOM) and is_recording(head[len(_BOM) : _HEAD_BYTES]):  # a recording saved by an editor
        recording = _parse_jsonl(_skip(chunks, len(_BOM)), max_line, on_read, keep_reads)
        recording.warnings.insert(0, "line 1: starts with a byte order mark (U+FEFF), ignored")
        return recording
    if not is_recording(head[:_HEAD_BYTES]):
        return _plain(chunks, max_line, on_read, keep_reads)
    return _parse_jsonl(chunks, max_line, on_read, keep_reads)


_BOM = b"\xef\xbb\xbf"


def _skip(chunks: Iterator[bytes], n: int) -> Iterator[bytes]:
    """The chunks without their first ``n`` bytes."""
    for chunk in chunks:
        if n >= len(chunk):
            n -= len(chunk)
            continue
        yield chunk[n:]
        n = 0
        break
    yield from chunks


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
                    f"byte {offset}: no line break in {run} bytes, over {GIVE_UP_FACTOR} times the line limit"
                    f" ({max_line} bytes): stopped reading; whatever follows is not read"
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


def _check_header(header_line: bytes | None) -> tuple[dict[str, Any], list[str]]:
    """The header (validated through ``HeaderLine``) and the warnings about its fields: a ``format`` or a
    ``version`` that is not ours refuses the file (``RecordingError``); another field of the wrong type is dropped
    (kept raw under ``"invalid"``), and a ``source`` that is not an object becomes ``{}``."""
    if header_line is None:
        raise RecordingError("recording header line is too long")
    try:
        header = exactjson.loads(header_line)
    except orjson.JSONDecodeError as e:
        if not header_line.rstrip(b"\r\n").endswith(b"}"):
            raise RecordingError("recording header line is not valid JSON (file cut short?)") from None
        raise RecordingError(f"recording header line is not valid JSON: {e}") from None
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise RecordingError("recording does not start with a header line")
    errors = errors_of("header", header)
    if "format" in errors:
        raise RecordingError(f"not a {FORMAT} file (format {_short(header.get('format'))})")
    if "version" in errors:
        raise RecordingError(
            f"recording format version {_short(header.get('version'))} is not supported"
            f" (stream-inspector {__version__} reads version {VERSION})"
        )
    warnings: list[str] = []
    _drop_fields(header, header, "header", errors, "line 1: header", "", warnings.append)
    if not isinstance(header.get("source"), dict):
        header["source"] = {}
    return header, warnings


# --- a field of the wrong type is dropped (kept raw under "invalid") with a warning; what is wrong: format.py ------


def _drop_fields(
    obj: dict[str, Any], source: dict[str, Any], kind: str, errors: dict[str, str], where: str, prefix: str, warn: Any
) -> None:
    """Move the fields of ``source`` named in ``errors`` to ``obj["invalid"]`` (as ``prefix + name``), each with a
    warning naming the line and what the field of a line of ``kind`` must be (``format.what_of``)."""
    invalid: dict[str, Any] = {}
    for name in errors:
        if name in source:
            value = source.pop(name)
            invalid[prefix + name] = value
            warn(f"{where}: {prefix}{name} {_short(value, 40)} is not {what_of(kind, name)}, dropped")
    if invalid:
        previous = obj.get("invalid")
        obj["invalid"] = {**previous, **invalid} if isinstance(previous, dict) else invalid


def _validate(kind: str, obj: dict[str, Any], errors: dict[str, str], number: int, warn: Any) -> None:
    """Drop (with a warning naming the line) the fields of a line that do not fit its declaration (``errors``, from
    ``format.errors_of``); the raw values are kept under ``obj["invalid"]`` so nothing is lost, and readers can
    trust the types of what is left. A request ``body`` that is an object is checked as a ``RequestBody``."""
    where = f"line {number}: {kind}"
    _drop_fields(obj, obj, kind, errors, where, "", warn)
    if kind == "request" and isinstance(obj.get("body"), dict):
        body_errors = errors_of("body", obj["body"])
        if body_errors:
            body = obj["body"] = dict(obj["body"])
            _drop_fields(obj, body, "body", body_errors, where, "body.", warn)


_ATTEMPT_KINDS = ("request", "response", "end")


def _parse_jsonl(chunks: Iterable[bytes], max_line: int, on_read: ReadCallback | None, keep_reads: bool) -> Recording:
    lines = _lines(chunks, max_line)
    first = next(lines, None)
    header, header_warnings = _check_header(first.data if first is not None else b"")
    recording = Recording(header=header)
    warnings = recording.warnings
    suppressed = 0

    def warn(text: str) -> None:  # at most MAX_WARNINGS kept: a damaged file must not make memory grow with it
        nonlocal suppressed
        if len(warnings) < MAX_WARNINGS:
            warnings.append(text)
        else:
            suppressed += 1

    for text in header_warnings:
        warn(text)
    turns: dict[int, RecordedTurn] = {}
    attempts: dict[tuple[int, int], RecordedAttempt] = {}
    conversation_of: dict[int, str] = {}  # turn -> its conversation (a proxy's "conversation" lines)

    def attempt_for(obj: dict[str, Any], number: int, ids_ok: bool) -> RecordedAttempt | None:
        """The attempt of a line whose turn and attempt fit the declaration (``ids_ok``), else None (a warning)."""
        if not ids_ok:
            warn(f"line {number}: {obj['kind']} line without integer turn/attempt, skipped")
            return None
        turn, attempt = obj["turn"], obj["attempt"]
        key = (turn, attempt)
        if key not in attempts:
            if turn not in turns:
                turns[turn] = RecordedTurn(turn=turn)
                recording.turns.append(turns[turn])
            attempts[key] = RecordedAttempt(turn=turn, attempt=attempt, conversation=conversation_of.get(turn))
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
            try:
                obj = orjson.loads(line.data)
            except orjson.JSONDecodeError:  # (an integer beyond a double's range: exactjson reads it exact)
                obj = exactjson.loads(line.data)
            else:  # integers beyond 64 bits kept exact where they can be: every line but the reads (their bulk)
                if type(obj) is dict and obj.get("kind") != "read":
                    obj = exactjson.exact(line.data, obj)
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
        if kind == "read":
            if read_line_ok(obj):  # the usual case: the declared checks, compiled (format.read_line_ok)
                found = _read_of(obj, number, warn, {})
                ids_ok = True
            else:
                errors = errors_of("read", obj)
                found = _read_of(obj, number, warn, errors)
                ids_ok = "turn" not in errors and "attempt" not in errors
            if found is None:
                continue
            target = attempt_for(obj, number, ids_ok)
            if target is None:
                continue
            if keep_reads:
                target.reads.append(found)
            if on_read is not None:
                on_read(target, found)
        elif kind == "header":
            warn(f"line {number}: second header line ignored")
        elif kind == "obs":
            errors = errors_of("obs", obj)
            _validate(kind, obj, errors, number, warn)
            if obj.get("type") == "tool_state" and "id" not in obj:
                warn(f"line {number}: {obj['type']} observation without a string id, skipped")
                continue
            recording.observations.append(obj)
            if obj.get("type") == "conversation" and isinstance(obj.get("turn"), int):
                cid = obj.get("conversation")
                if isinstance(cid, str):
                    conversation_of[obj["turn"]] = cid
                    found_attempt = attempts.get((obj["turn"], obj.get("attempt", -1)))
                    if found_attempt is not None and found_attempt.conversation is None:
                        found_attempt.conversation = cid
        elif kind in _ATTEMPT_KINDS:
            errors = errors_of(kind, obj)
            target = attempt_for(obj, number, "turn" not in errors and "attempt" not in errors)
            if target is None:
                continue
            if getattr(target, kind) is not None:
                warn(f"line {number}: second {kind} line for turn {target.turn} attempt {target.attempt}, ignored")
                continue
            _validate(kind, obj, errors, number, warn)
            setattr(target, kind, obj)
        else:  # a kind this version does not know (and "redacted" lines): kept as they are
            recording.unknown.append(obj)
    if suppressed:
        warnings.append(f"{suppressed} more warnings not shown")
    return recording


def _read_of(obj: dict[str, Any], number: int, warn: Any, errors: dict[str, str]) -> RecordedRead | None:
    """The read of a ``read`` line, given what does not fit ``ReadLine`` (``errors``): a line without exactly one
    string ``data`` or valid base64 ``b64`` is skipped; a ``t`` that is not a number drops the timing."""
    if "" in errors:
        warn(f'line {number}: read line needs exactly one of "data" and "b64", skipped')
        return None
    if "data" in obj:
        if "data" in errors:
            warn(f'line {number}: read "data" is not a string, skipped')
            return None
        data = obj["data"].encode("utf-8", errors="surrogatepass")
    else:
        try:
            if "b64" in errors:
                raise TypeError
            data = base64.b64decode(obj["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            warn(f'line {number}: read "b64" is not valid base64, skipped')
            return None
    t = obj.get("t")
    if "t" in errors:
        warn(f'line {number}: read "t" is not a number, timing dropped')
        t = None
    return RecordedRead(t=None if t is None else float(t), data=data)

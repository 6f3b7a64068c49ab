"""An incremental Server-Sent Events decoder that follows the WHATWG "event stream interpretation" exactly.

Bytes in (any read boundaries), `SSEEvent`s out. Pure Python, no I/O, never raises on stream content: every oddity
becomes a `Diagnostic` (see `inspector.stream.diagnostics`).

Rules (HTML standard, 9.2.6), with what an inspector adds:

- UTF-8, decoded per complete line (line terminators are ASCII, so splitting bytes first is exact, and a character
  split across reads decodes correctly). Invalid bytes become U+FFFD (`SSE_INVALID_UTF8`, with the line's bytes).
- ONE leading BOM is stripped (`SSE_BOM_STRIPPED`); a second one stays and spoils the first field name.
- Lines end with CRLF, LF or CR. A CR that ends a read completes its line at once (events are never delayed); an LF
  at the start of the next read is then swallowed as the second half of a CRLF.
- `:` comment lines are ignored; field name = text before the first colon, value = the rest minus ONE leading space.
- `event` sets the type, `data` appends value + LF, `id` sets the last event id unless it contains U+0000
  (`SSE_ID_WITH_NUL`), `retry` only when all ASCII digits (`SSE_RETRY_IGNORED`); other names: `SSE_UNKNOWN_FIELD`
  (reported once per distinct name).
- A blank line dispatches: no data -> nothing fires (`SSE_NO_DATA` when the block had event/id/retry lines); else
  one trailing LF is stripped and the type defaults to "message". One exception, where the SDKs are strict: an
  `event: error` block without data fires an `error` event with empty data (`SSE_ERROR_WITHOUT_DATA`): the SDKs
  dispatch it and raise, so the harness saw an error.
- At `close()`, a block without its blank line (or a partial line) is discarded: `SSE_UNTERMINATED_EVENT`.

Offsets: `start` is the first byte after the previous blank line (or 0, or 3 after a stripped BOM), so
`[start, end)` covers the comments and ignored lines of the block. `end` is just past the first byte of the
dispatching blank line's terminator: for a CRLF blank line, just past the CR. (Whether an LF follows a CR that ends
a read is unknown at dispatch; excluding it always keeps every offset independent of how the stream was split.)
The next block starts after the whole terminator.

Performance: linear. A partial line is kept as a list of chunks and joined once; terminators are found with
`bytes.find` / `split` / `splitlines` in C, never byte by byte in Python. This module is the general path: every
line goes through `_line`, every blank line through `_dispatch`. Bytes without CR take the fast way of
`inspector.stream.fastpath.decode_lf` (API-shaped blocks become events at once; anything else comes back to those
two helpers), unless the decoder was made with `fast=False`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from inspector.core.fmt import short_bytes
from inspector.core.wire import SSE_BLANK_LINE, SSE_BOM
from inspector.stream import fastpath as _fastpath
from inspector.stream.diagnostics import (
    SSE_BOM_STRIPPED,
    SSE_ERROR_WITHOUT_DATA,
    SSE_EVENT_TOO_LARGE,
    SSE_ID_WITH_NUL,
    SSE_INVALID_UTF8,
    SSE_NO_DATA,
    SSE_RETRY_IGNORED,
    SSE_UNKNOWN_FIELD,
    SSE_UNTERMINATED_EVENT,
    Diagnostic,
    DiagnosticCap,
    Severity,
)

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEDecoder", "SSEEvent", "iter_events"]

_BOM = SSE_BOM
# An event (its block's bytes) larger than this is cut off (sse.event_too_large): 64 MiB of data, with room for its
# field names and line endings (a 64 MiB data line is still an event).
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024 + 4096
_TOO_LARGE_KEEP = 1024  # bytes of a cut-off event kept in its diagnostic
_UNKNOWN_NAMES_MAX = 1024  # distinct unknown field names remembered (each reported once)
# a blank line in any line-ending style (a CR followed by LF is one terminator: never a CR and then an LF line)
_blank_line = SSE_BLANK_LINE.search  # (the redactor finds events by the same rule)


@dataclass(slots=True)
class SSEEvent:
    """A dispatched event. (Not frozen: a frozen dataclass's __init__ costs ~4x more per event; treat as read-only.
    inspector.stream.fastpath sets the fields one by one, without __init__: a new field needs a line there.)"""

    seq: int  # 0-based index among the events dispatched by this decoder
    event: str  # event type; "message" when the stream gave none
    data: str
    id: str  # the last event id at dispatch ("" if never set)
    retry: int | None  # reconnection time (ms) last set by a valid retry field; None if never
    start: int  # stream offset of the first byte after the previous blank line (the block's first byte)
    end: int  # stream offset just past the dispatching blank line (past its CR for a CRLF blank line)
    read_index: int  # 0-based index of the feed() call whose bytes completed this event


_EVENT_NAMES_MAX = 256  # distinct `event:` lines a decoder remembers (see SSEDecoder._names)


class SSEDecoder:
    """Incremental decoder: `feed()` each read, then `close()` once at the end of the stream.

    `max_event_bytes`: an event (its block, from its first byte to its blank line) larger than this is cut off: it
    fires nothing, an `sse.event_too_large` diagnostic keeps its first bytes, and the decoder keeps none of its other
    bytes while it skips to the block's blank line (memory stays bounded on input that never sends a newline).
    `cap`: keeps the first diagnostics of each code (a TurnStream shares one per stream; by default the decoder has
    its own and reports the count of the rest at `close()`).
    `fast=False`: every block goes line by line (the general path alone; the same events and diagnostics)."""

    def __init__(
        self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, cap: DiagnosticCap | None = None, *, fast: bool = True
    ) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be >= 1")
        self.fast = fast
        self.max_event_bytes = max_event_bytes
        self._own_cap = cap is None
        self.cap = cap if cap is not None else DiagnosticCap()
        self._discarding = False  # inside a cut-off block: skipping to its blank line
        self._disc_line_start = False  # (while discarding) the last byte seen ended a line
        self.diagnostics: list[Diagnostic] = []
        self.bytes_fed = 0
        self.reads = 0
        self.last_event_id = ""
        self.retry: int | None = None
        self._taken = 0  # diagnostics already handed out by take_diagnostics()
        self._closed = False
        self._seq = 0
        # the block (event) being built
        self._data: list[str] = []
        self._type = ""
        self._id_buf = ""  # the "last event ID buffer": persists across events, copied at dispatch
        self._block_start = 0
        self._block_fields = False  # a non-comment line was seen in this block
        self._block_meta = False  # an event/id/retry line was seen in this block
        self._carry: list[bytes] = []  # earlier reads' bytes of this block, up to the pending partial line
        # the line being built
        self._pending: list[bytes] = []  # chunks of a partial line (earlier reads only)
        self._pending_off = 0
        self._skip_lf = False  # the last read ended with CR: an LF first in the next read ends nothing
        self._head: bytes | None = b""  # first bytes while a BOM is still possible; None once decided
        self._unknown_seen: set[bytes] = set()
        # `event:` lines seen so far (the whole line's bytes -> the event type, interned), so the hot paths decode
        # each distinct line once. Filled by `_line`; bounded, as a stream may send any number of distinct names.
        self._names: dict[bytes, str] = {}
        # For each event the last feed() returned: its data as the bytes that came in, when it was one `data: `
        # line of an API-shaped block (b"" for any other). TurnStream parses from these: no re-encoding of `data`.
        self.raw_data: list[bytes] = []
        # the read being processed (for raw bytes in slow-path diagnostics)
        self._cur = b""
        self._cur_base = 0

    # ------------------------------------------------------------------------------------------------ public
    @property
    def events_dispatched(self) -> int:
        """Number of events dispatched so far (= the seq the next event will get)."""
        return self._seq

    def take_diagnostics(self) -> list[Diagnostic]:
        """The diagnostics added since the previous call (all of them stay in `diagnostics`)."""
        new = self.diagnostics[self._taken :]
        self._taken = len(self.diagnostics)
        return new

    def feed(self, data: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Decode one read; returns the events its bytes completed."""
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() called after close()")
        self.raw_data = []
        if not isinstance(data, bytes):
            data = bytes(data)
        ri = self.reads
        self.reads = ri + 1
        base = self.bytes_fed
        self.bytes_fed = base + len(data)
        if self._head is not None:
            if self._head:
                data = self._head + data
                base = 0
            if len(data) < 3 and _BOM.startswith(data):
                self._head = data  # could still be a BOM: wait for more bytes (at most 2 are held)
                return []
            self._head = None
            if data.startswith(_BOM):
                self._diag(SSE_BOM_STRIPPED, "info", "leading byte order mark (U+FEFF) stripped", 0, _BOM)
                data = data[3:]
                base = 3
                self._block_start = 3
                self._pending_off = 3
        if not data:
            return []
        if self._discarding:
            pos = self._skip_discarded(data, base)
            if pos < 0:
                return []
            data = data[pos:]
            base += pos
            if not data:
                return []
        events = self._process(data, base, ri)
        if base + len(data) - self._block_start > self.max_event_bytes:
            self._cut_off()
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream. Never returns events: an unterminated event is discarded (and reported)."""
        if self._closed:
            return []
        if self._head:  # fewer than 3 bytes in the whole stream, all a prefix of a BOM: plain bytes after all
            head, self._head = self._head, None
            self._process(head, 0, max(self.reads - 1, 0))
        self._head = None
        self._closed = True
        self.raw_data = []
        pending = self._pending
        if self._discarding:
            pass  # (reported when it was cut off)
        elif pending or self._block_fields:
            raw = b"".join(self._carry + pending)
            what = "a partial line" if pending else "no blank line"
            self._diag(
                SSE_UNTERMINATED_EVENT,
                "warning",
                f"stream ended inside an event ({len(raw)} bytes, {what}"
                f"{', with data' if self._data else ''}): discarded"
                + (f" (its first {_TOO_LARGE_KEEP} bytes kept here)" if len(raw) > _TOO_LARGE_KEEP else ""),
                self._block_start,
                # (at most its first KiB, as a cut-off event's: the whole event is in the reads, and a diagnostic
                # holding up to 64 MiB per attempt made `dump --json` of four such attempts take 680 MB)
                raw[:_TOO_LARGE_KEEP],
            )
        self._pending = []
        self._carry = []
        self._data = []
        self._type = ""
        self._block_fields = self._block_meta = False
        self._cur = b""
        if self._own_cap:
            summary = self.cap.summary()
            if summary is not None:
                self.diagnostics.append(summary)
        return []

    # ------------------------------------------------------------------------------------------------ internals
    def _diag(self, code: str, severity: Severity, message: str, offset: int, raw: bytes) -> None:
        if self.cap.drop_if_full(code):
            return
        d = self.cap.filter(Diagnostic(code, severity, message, event_index=self._seq, offset=offset, raw=raw))
        if d is not None:
            self.diagnostics.append(d)

    def _too_large(self, head: bytes) -> None:
        """The block being built is over the limit (the same diagnostic however the stream was split)."""
        self._diag(
            SSE_EVENT_TOO_LARGE,
            "error",
            f"event over the limit of {self.max_event_bytes} bytes: cut off, nothing fired (its first "
            f"{len(head)} bytes kept)",
            self._block_start,
            head,
        )

    def _head_bytes(self, extra: bytes = b"") -> bytes:
        """The first bytes (at most _TOO_LARGE_KEEP) of the block: earlier reads' (carry, pending), then `extra`."""
        head = b""
        keep = min(_TOO_LARGE_KEEP, self.max_event_bytes)  # (the same however the stream was split)
        for chunk in (*self._carry, *self._pending, extra):
            head += chunk[: keep - len(head)]
            if len(head) >= keep:
                break
        return head

    def _cut_off(self) -> None:
        """At the end of a read, the block being built is over the limit: drop what it holds and skip the rest of
        it."""
        self._too_large(self._head_bytes())
        self._disc_line_start = not self._pending  # the read ended at a line's end
        self._discarding = True
        self._pending = []
        self._carry.clear()
        self._data.clear()
        self._type = ""
        self._block_fields = self._block_meta = False

    def _skip_discarded(self, data: bytes, base: int) -> int:
        """While discarding: the position in `data` just after the cut-off block's blank line, or -1 if `data` holds
        none (then nothing of it is kept). Resets the block state at the end of the block."""
        pos = 0
        if self._skip_lf and data[:1] == b"\n":
            pos = 1  # the LF of a CRLF whose CR ended the last read
        self._skip_lf = False
        if pos < len(data) and self._disc_line_start and data[pos] in (10, 13):
            m_end = pos + (2 if data[pos : pos + 2] == b"\r\n" else 1)
        else:
            m = _blank_line(data, pos)
            if m is None:
                last = data[-1]
                self._disc_line_start = last == 10 or last == 13
                self._skip_lf = last == 13
                return -1
            m_end = m.end()
        # the blank line ends the block (a CR at the end of the read may be the first half of a CRLF)
        self._discarding = False
        if data[m_end - 1] == 13 and m_end == len(data):
            self._skip_lf = True
        self._block_start = self._pending_off = base + m_end
        return m_end

    def _process(self, data: bytes, base: int, ri: int) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        self._cur = data
        self._cur_base = base
        n = len(data)
        pos = 0
        cr_end = False
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 10:  # second half of a CRLF split across reads
                pos = 1
                if self._block_start == base:
                    self._block_start = base + 1
        pending = self._pending
        if pending:  # pos == 0 here: a pending line means the last read did not end with CR
            i = data.find(b"\n")
            j = data.find(b"\r", 0, i if i >= 0 else n)
            if i < 0 and j < 0:
                pending.append(data)
                return events
            t = j if j >= 0 else i
            pending.append(data[:t])
            line = b"".join(pending)
            pending.pop()
            self._carry.extend(pending)
            pending.clear()
            if data[t] == 13:
                if t + 1 < n:
                    pos = t + 2 if data[t + 1] == 10 else t + 1
                else:
                    pos = n
                    cr_end = True
            else:
                pos = t + 1
            self._line(line, self._pending_off)

        tail = b""
        if pos < n:
            rest = data[pos:] if pos else data
            off = base + pos
            line_ = self._line
            if self.fast and b"\r" not in rest:
                # LF-only bytes (the usual case): the fast way, which calls back the helpers below
                tail = _fastpath.decode_lf(self, rest, off, ri, events)
            else:
                lines = rest.splitlines(True)
                last = lines[-1][-1]
                if last == 13:
                    cr_end = True
                elif last != 10:
                    tail = lines.pop()
                dispatch = self._dispatch
                for raw in lines:
                    if raw[-1] == 10 and len(raw) > 1 and raw[-2] == 13:
                        content = raw[:-2]
                    else:
                        content = raw[:-1]
                    if content:
                        line_(content, off)
                    else:
                        dispatch(off, off + len(raw), ri, events)
                    off += len(raw)
            if tail:
                pending.append(tail)
                self._pending_off = base + n - len(tail)

        # keep this block's bytes that precede the pending line (for raw bytes in diagnostics)
        p = n - len(tail)
        bs = self._block_start - base
        if bs < 0:
            if p > 0:
                self._carry.append(data[:p])
        elif bs < p:
            self._carry.append(data[bs:p])
        self._skip_lf = cr_end
        self._cur = b""
        return events

    def _block_bytes(self, end: int) -> bytes:
        """Raw bytes of the current block from its start to stream offset `end` (inside the current read)."""
        base = self._cur_base
        bs = max(self._block_start - base, 0)
        return b"".join(self._carry) + self._cur[bs : end - base]

    def _dispatch(self, off: int, next_start: int, ri: int, events: list[SSEEvent]) -> None:
        """A blank line at stream offset `off`; the next block starts at `next_start`."""
        data = self._data
        if off + 1 - self._block_start > self.max_event_bytes:
            bs = max(self._block_start - self._cur_base, 0)
            self._too_large(self._head_bytes(self._cur[bs : bs + _TOO_LARGE_KEEP]))
            data.clear()
        elif data:
            events.append(
                SSEEvent(
                    self._seq,
                    self._type or "message",
                    "\n".join(data),
                    self._id_buf,
                    self.retry,
                    self._block_start,
                    off + 1,
                    ri,
                )
            )
            self.raw_data.append(b"")
            self._seq += 1
            data.clear()
        elif self._type == "error":
            # WHATWG fires nothing for a block without data, but the SDKs dispatch it, and an `error` event makes them
            # raise (the anthropic SDK's APIStatusError; the openai SDK fails on its empty JSON): the harness saw an
            # error, and so does the engine: an error event with empty data
            self._diag(
                SSE_ERROR_WITHOUT_DATA,
                "warning",
                "`event: error` with no data: WHATWG fires no event, but the SDKs dispatch it and raise: an error event",
                self._block_start,
                self._block_bytes(off + 1),
            )
            events.append(SSEEvent(self._seq, "error", "", self._id_buf, self.retry, self._block_start, off + 1, ri))
            self.raw_data.append(b"")
            self._seq += 1
        elif self._block_meta:
            self._diag(
                SSE_NO_DATA,
                "info",
                "block with event/id/retry but no data fired no event (vendor SDKs would dispatch it)",
                self._block_start,
                self._block_bytes(off + 1),
            )
        self.last_event_id = self._id_buf
        self._type = ""
        self._block_meta = self._block_fields = False
        self._block_start = next_start
        if self._carry:
            self._carry.clear()

    def _bad_utf8(self, content: bytes, off: int) -> None:
        if self.cap.drop_if_full(SSE_INVALID_UTF8):  # (noise: skip building the message)
            return
        self._diag(
            SSE_INVALID_UTF8,
            "warning",
            f"line is not valid UTF-8 (invalid bytes replaced by U+FFFD): {short_bytes(content)}",
            off,
            content,
        )

    def _line(self, content: bytes, off: int) -> None:
        """One complete, non-empty line (without terminator) that starts at stream offset `off`."""
        if content[0] == 58:  # ':' comment
            if not content.isascii():
                try:
                    content.decode()
                except UnicodeDecodeError:
                    self._bad_utf8(content, off)
            return
        self._block_fields = True
        ci = content.find(b":")
        if ci < 0:
            name = content
            value = b""
        else:
            name = content[:ci]
            value = content[ci + 2 :] if content[ci + 1 : ci + 2] == b" " else content[ci + 1 :]
        if name == b"data":
            try:
                text = value.decode()
            except UnicodeDecodeError:
                self._bad_utf8(content, off)
                text = value.decode("utf-8", "replace")
            self._data.append(text)
        elif name == b"event":
            try:
                text = value.decode()
            except UnicodeDecodeError:
                self._bad_utf8(content, off)
                text = value.decode("utf-8", "replace")
            else:
                text = sys.intern(text)  # so `==` against a literal event name is an identity check
                if text and len(self._names) < _EVENT_NAMES_MAX:  # (an empty name means "message": not cached)
                    self._names[content] = text
            self._type = text
            self._block_meta = True
        elif name == b"id":
            self._block_meta = True
            try:
                text = value.decode()
            except UnicodeDecodeError:
                self._bad_utf8(content, off)
                text = value.decode("utf-8", "replace")
            if "\0" in text:
                self._diag(
                    SSE_ID_WITH_NUL,
                    "info",
                    f"id containing U+0000 ignored (last event id stays {self._id_buf!r})",
                    off,
                    content,
                )
            else:
                self._id_buf = text
        elif name == b"retry":
            self._block_meta = True
            if value.isdigit():  # bytes.isdigit: ASCII digits only, False when empty
                self.retry = int(value)
            else:
                if not content.isascii():
                    try:
                        content.decode()
                    except UnicodeDecodeError:
                        self._bad_utf8(content, off)
                self._diag(
                    SSE_RETRY_IGNORED,
                    "info",
                    f"retry value {value.decode('utf-8', 'replace')!r} is not all ASCII digits: ignored",
                    off,
                    content,
                )
        else:
            if not content.isascii():
                try:
                    content.decode()
                except UnicodeDecodeError:
                    self._bad_utf8(content, off)
            if name not in self._unknown_seen:
                if len(self._unknown_seen) < _UNKNOWN_NAMES_MAX:
                    self._unknown_seen.add(name)
                if self.cap.drop_if_full(SSE_UNKNOWN_FIELD):  # (noise: skip building the message)
                    return
                self._diag(
                    SSE_UNKNOWN_FIELD,
                    "info",
                    f"unknown field {name.decode('utf-8', 'replace')!r} ignored (reported once per field name)",
                    off,
                    content,
                )


def iter_events(data: bytes) -> list[SSEEvent]:
    """Decode a whole stream at once (one feed + close). Diagnostics are dropped: use SSEDecoder to see them."""
    decoder = SSEDecoder()
    events = decoder.feed(data)
    decoder.close()
    return events

"""What the fold is made of: the rows and entries of the dashboard's state (event and read tables, blocks, tools,
attempts, turns, diagnostics, the status line) and the copy that cannot forget a field."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any, ClassVar, Self

import jiter
import orjson

from inspector.core import fmt
from inspector.core.fmt import short
from inspector.observe.states import TOOL_RAN, TOOL_TERMINAL, LoopState
from inspector.state.columns import ByteStore, Column, ColView, RowTable, clone

__all__ = ["clone"]  # (re-exported: the copy of an entry lives with the storage it copies, in state/columns)
from inspector.stream.protocol import TOOL_INPUT_BLOCKS

# ------------------------------------------------------------------------------------------------ constants


# Row flags of the event table
F_ERROR = 1  # error / invalid event, or an error diagnostic points at it
F_WARN = 2  # warning diagnostic, or an unknown event
F_DIAG = 4  # any diagnostic points at this row
F_MARKER = 8  # not an SSE event: an attempt, an HTTP try, a hold of the stream (its facts: DashboardState.markers)

MARKER = "attempt"  # etype of a marker row

_CHAR_POS = re.compile(r"\(char (\d+)\)")


# ------------------------------------------------------------------------------------------------ helpers


def call_summary(name: str | None, tool_input: Any, limit: int = 60) -> str:
    """``read_file(path="src/x.py")`` (arguments shortened so the whole fits about `limit` characters)."""
    name = name or "?"
    if tool_input is None:
        return f"{name}(…)"
    if not isinstance(tool_input, dict):
        return f"{name}({short(tool_input, limit)})"
    parts = []
    budget = max(12, limit - len(name) - 2)
    per = max(10, budget // max(1, len(tool_input)))
    for k, v in tool_input.items():
        parts.append(f"{k}={short(v, per)}")
    return f"{name}({fmt.short_text(', '.join(parts), budget)})"


def result_summary(content: Any, limit: int = 60) -> str:
    """First line of a tool result (text or content blocks), with its size when it has more."""
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        text = "\n".join(texts) if texts else short(content, limit)
    elif isinstance(content, str):
        text = content
    elif content is None:
        return ""
    else:
        text = short(content, limit)
    lines = text.splitlines() or [""]
    first = fmt.short_text(lines[0].strip(), limit)
    if len(lines) > 1:
        first += f"  ({len(lines)} lines, {fmt.size(len(text.encode('utf-8', 'replace')))})"
    return first


human_size = fmt.size  # (re-exported for the widgets: the one home is inspector.core.fmt)


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def error_position(buffer: str, message: str | None) -> int | None:
    """Character offset of a tool-input JSON error: from "(char N)" in the message, else by parsing again."""
    if message:
        m = _CHAR_POS.search(message)
        if m:
            return int(m.group(1))
    if not buffer.strip():
        return 0
    try:
        orjson.loads(buffer)
    except orjson.JSONDecodeError as e:
        return e.pos
    return None


# ------------------------------------------------------------------------------------------------ entries


class EventTable(RowTable):
    """SSE event rows (plus marker rows: attempts, HTTP tries, holds), column by column in copy-on-write chunks:
    ~80 bytes a row; summaries are kept UTF-8 encoded in the state's spill store, out of the heap."""

    __slots__ = ("_event_rows",)
    # column order (the public names are list-like views: ``table.flags[row]``)
    NAMES = ("seq", "t", "etype", "index", "read_index", "turn", "attempt", "flags", "evno", "start", "end", "s_off")
    TYPES = ("i", "d", None, "i", "i", "i", "i", "B", "i", "q", "q", "q")
    SPILLED = ((11, 12, True),)  # the summary (its offset in the store, its size)

    def __init__(self, store: ByteStore | None = None) -> None:
        super().__init__(self.TYPES + ("i",), store)  # + the summary's size
        self._event_rows = Column("l")  # row of event k is event_rows[k - 1] (its buffered rows: see _put_rows)

    def append(
        self,
        seq: int,
        t: float,
        etype: str,
        index: int,
        summary: str,
        read_index: int,
        turn: int,
        attempt: int,
        flags: int,
        evno: int,
        start: int,
        end: int,
    ) -> int:
        rows = self._rows
        row = self._n + len(self._tail[0]) + len(rows)
        size = len(summary) if summary.isascii() else len(summary.encode("utf-8", "surrogatepass"))
        rows.append((seq, t, etype, index, read_index, turn, attempt, flags, evno, start, end, summary, size))
        if len(rows) >= self._room:
            self._put_rows()
        return row

    @property
    def summary(self) -> _Spilled:
        return _Spilled(self, 11, 12, text=True)

    @property
    def event_rows(self) -> Column:
        """The row of each SSE event (event k's is ``event_rows[k - 1]``), buffered rows included."""
        self._put_rows()
        return self._event_rows

    def _put_rows(self) -> None:
        rows = self._rows
        if rows:  # (the events' rows among the buffered ones, in one pass at C speed: marker rows have evno 0)
            first = self._n + len(self._tail[0])
            self._event_rows.extend(list(compress(range(first, first + len(rows)), map(itemgetter(8), rows))))
        super()._put_rows()

    @property
    def seq(self) -> ColView:
        return ColView(self, 0)

    @property
    def t(self) -> ColView:
        return ColView(self, 1)

    @property
    def etype(self) -> ColView:
        return ColView(self, 2)

    @property
    def index(self) -> ColView:
        return ColView(self, 3)

    @property
    def read_index(self) -> ColView:
        return ColView(self, 4)

    @property
    def turn(self) -> ColView:
        return ColView(self, 5)

    @property
    def attempt(self) -> ColView:
        return ColView(self, 6)

    @property
    def flags(self) -> ColView:
        return ColView(self, 7)

    @property
    def evno(self) -> ColView:
        return ColView(self, 8)

    @property
    def start(self) -> ColView:
        return ColView(self, 9)

    @property
    def end(self) -> ColView:
        return ColView(self, 10)

    def row(self, i: int) -> tuple[int, float, str, int, str, int, int, int, int, int]:
        """(seq, t, etype, index, summary, read_index, turn, attempt, flags, evno) of row i."""
        g = self.get
        return (g(0, i), g(1, i), g(2, i), g(3, i), self.summary[i], g(4, i), g(5, i), g(6, i), g(7, i), g(8, i))

    def cow_copy(self) -> Self:
        new: Self = super().cow_copy()
        new._event_rows = self._event_rows.cow_copy()
        return new


class _Spilled:
    """A column whose values live in the state's spill store: the table keeps each value's offset and length in two
    of its columns (``off``, ``size``); ``text`` columns decode the bytes as UTF-8. Writing stores the new value."""

    __slots__ = ("table", "off", "size", "text")

    def __init__(self, table: RowTable, off: int, size: int, *, text: bool) -> None:
        self.table, self.off, self.size, self.text = table, off, size, text

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: Any) -> Any:
        t = self.table
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(t)))]
        return t.spilled(i, self.off, self.size, self.text)

    def __setitem__(self, i: int, value: str | bytes) -> None:
        self.table.set_spilled(i, self.off, self.size, value, self.text)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self.table)):
            yield self[i]


class ReadTable(RowTable):
    """Network reads, column by column in copy-on-write chunks; the bytes live in the state's spill store."""

    __slots__ = ("lines",)
    NAMES = ("turn", "attempt", "read_index", "t", "t_request", "offset", "line_start", "d_off", "d_len")
    TYPES = ("i", "i", "i", "d", "d", "q", "q", "q", "i")
    SPILLED = ((7, 8, False),)  # the bytes read (their offset in the store, their size)

    def __init__(self, store: ByteStore | None = None) -> None:
        super().__init__(self.TYPES, store)
        self.lines = 0  # total raw-view lines

    def append(
        self, turn: int, attempt: int, read_index: int, t: float, t_request: float, data: bytes, offset: int
    ) -> None:
        rows = self._rows
        # (the row's line_start: the first raw-view line of this read, a header line, then its data lines)
        rows.append((turn, attempt, read_index, t, t_request, offset, self.lines, data, len(data)))
        n = data.count(b"\n")
        if data and not data.endswith(b"\n"):
            n += 1
        self.lines += 1 + n
        if len(rows) >= self._room:
            self._put_rows()

    @property
    def data(self) -> _Spilled:
        return _Spilled(self, 7, 8, text=False)

    @property
    def turn(self) -> ColView:
        return ColView(self, 0)

    @property
    def attempt(self) -> ColView:
        return ColView(self, 1)

    @property
    def read_index(self) -> ColView:
        return ColView(self, 2)

    @property
    def t(self) -> ColView:
        return ColView(self, 3)

    @property
    def t_request(self) -> ColView:
        return ColView(self, 4)

    @property
    def offset(self) -> ColView:
        return ColView(self, 5)

    @property
    def line_start(self) -> ColView:
        return ColView(self, 6)

    def locate(self, line: int) -> tuple[int, int]:
        """(read, line within the read; -1 for its header) of a raw-view line."""
        starts = self.line_start
        i = bisect.bisect_right(starts, line) - 1
        return i, line - starts[i] - 1


@dataclass(slots=True)
class BlockEntry:
    SHARED: ClassVar[frozenset[str]] = frozenset({"start", "content", "_preview"})
    turn: int
    attempt: int
    index: int
    type: str
    id: str | None
    name: str | None
    start: dict[str, Any]
    t_open: float
    first_event: int  # event number (1-based) of content_block_start
    # a chunked `Column` (a copy shares all but its last chunk), read like a list of str by the views
    fragments: list[str] = field(default_factory=Column)  # type: ignore[arg-type]
    nbytes: int = 0
    delta_type: str | None = None
    closed: bool = False
    t_close: float | None = None
    last_event: int = 0
    content: dict[str, Any] | None = None
    input_error: str | None = None
    error_pos: int | None = None
    diagnostics: list[int] = field(default_factory=list)  # indices into DashboardState.diagnostics
    version: int = 0
    _joined: str | None = None
    _joined_n: int = -1
    _preview: tuple[Any, str | None] | None = None  # (the partial parse, its error)
    _preview_n: int = -1

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.turn, self.attempt, self.index)

    @property
    def is_tool(self) -> bool:
        return self.type in TOOL_INPUT_BLOCKS

    def joined(self) -> str:
        n = len(self.fragments)
        if self._joined_n != n:
            self._joined = "".join(self.fragments)
            self._joined_n = n
        return self._joined  # type: ignore[return-value]

    def preview(self) -> tuple[Any, str | None]:
        """Live partial parse of a tool block's input (trailing strings kept); cached until the next fragment.

        Call at display rate, never per delta. Returns (value, error)."""
        n = len(self.fragments)
        if self._preview_n == n and self._preview is not None:
            return self._preview
        buf = self.joined()
        if not buf.strip():
            out: tuple[Any, str | None] = (None, None)
        else:
            try:
                out = (jiter.from_json(buf.encode("utf-8", "surrogatepass"), partial_mode="trailing-strings"), None)
            except ValueError as e:
                out = (None, str(e))
        self._preview, self._preview_n = out, n
        return out

    @property
    def parsed_input(self) -> Any:
        return None if self.content is None else self.content.get("input")


# A tool call's key: (its conversation, or "" for a session of no conversations; its tool id). Two conversations
# may use the same tool ids (a scripted `serve` hands the same ids to every conversation): each keeps its own row.
ToolKey = tuple[str, str]


@dataclass(slots=True)
class ToolEntry:
    SHARED: ClassVar[frozenset[str]] = frozenset({"input"})
    id: str
    name: str
    turn: int
    attempt: int
    index: int
    state: str
    t_created: float
    input: Any = None
    input_summary: str = ""
    error: str | None = None
    result_preview: str | None = None
    result_summary: str = ""
    is_error: bool = False
    t_queued: float | None = None
    t_started: float | None = None
    t_finished: float | None = None
    history: list[tuple[str, float]] = field(default_factory=list)
    version: int = 0
    # its times are inferred, not measured (the proxy: another harness ran it; "running" is its block's stop and the
    # end is the next request, an upper bound): drawn apart and never counted in "saved"
    inferred: bool = False
    conversation: str = ""  # the conversation it belongs to ("": none)

    @property
    def key(self) -> ToolKey:
        return (self.conversation, self.id)

    @property
    def done(self) -> bool:
        return self.state in TOOL_TERMINAL

    @property
    def ran(self) -> bool:
        """It ran to an end of its own (succeeded, failed, timed out): its run time is known."""
        return self.state in TOOL_RAN or (self.t_started is not None and self.t_finished is not None)

    def elapsed(self, now: float) -> float | None:
        """Run time so far (running) or in total (finished); None if it never started."""
        if self.t_started is None:
            return None
        end = self.t_finished if self.t_finished is not None else now
        return max(0.0, end - self.t_started)


@dataclass(slots=True)
class AttemptEntry:
    turn: int
    attempt: int
    t_start: float
    method: str = "POST"
    url: str = ""
    status_code: int | None = None
    t_response: float | None = None  # obs time of the response headers
    ttfb: float | None = None  # seconds from request to first byte (the first read's t_request)
    t_first_token: float | None = None  # obs time of the first non-empty content delta
    last_gap: float | None = None  # seconds between the last two reads
    last_read_t: float | None = None  # t_request of the last read
    reads: int = 0
    nbytes: int = 0
    events: int = 0
    model: str | None = None
    message_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    t_end: float | None = None
    status: str | None = None  # complete | failed | cancelled (None: running)
    reason: str | None = None
    outcome: str | None = None
    blocks: list[int] = field(default_factory=list)  # block indices in arrival order
    version: int = 0
    # The user's holds (pause, step) are not the stream's time: every figure above leaves them out.
    held_base: float = 0.0  # the session's held seconds when this attempt's request was sent
    held: float = 0.0  # seconds this attempt's stream was held by the user (up to the last read)
    first_token: float | None = None  # seconds from request to the first content token, holds excluded
    tries: list[TryEntry] = field(default_factory=list)  # HTTP tries that failed before this attempt's stream
    t_first_byte: float | None = None  # loop time of the first read
    # the longest wait for a read since the request (holds included: an upper bound of the stream's own silences);
    # under HELD_SILENCE no burst can be a held one, so the buffering verdict is not computed
    max_silence: float = 0.0
    last_read_raw: float = 0.0  # t_request of the last read, holds included

    @property
    def key(self) -> tuple[int, int]:
        return (self.turn, self.attempt)

    @property
    def requests(self) -> int:
        """HTTP requests sent for this attempt: the failed tries, plus the one that answered (if any)."""
        return len(self.tries) + (1 if self.status_code is not None or self.reads else 0)

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "cancelled")


@dataclass(slots=True)
class TurnEntry:
    turn: int
    t_start: float
    attempts: list[int] = field(default_factory=list)
    tools: list[ToolKey] = field(default_factory=list)  # its tool calls' keys in arrival order (all attempts)
    t_end: float | None = None
    outcome: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    version: int = 0


@dataclass(frozen=True, slots=True)
class TryEntry:
    """An HTTP try that failed before a stream (429, 529, 5xx, connection refused); the SDK may retry it."""

    try_index: int  # 0-based within its attempt
    t_sent: float
    t: float  # when the failure was seen
    status: int | None
    error_type: str | None
    error_message: str | None
    connection_error: str | None
    retry_in: float | None  # the SDK's wait before the next try (None: it gives up)
    headers: dict[str, Any]

    @property
    def t_retry(self) -> float | None:
        """When the SDK sends the next try (loop time), if it retries."""
        return None if self.retry_in is None else self.t + self.retry_in


@dataclass(frozen=True, slots=True)
class Marker:
    """A row of the event table that is not an SSE event, as facts (the tui words it). `kind` is the row's etype:
    ``attempt`` (a request was sent: its method and path; `answers`: the HTTP status it was answered with),
    ``try`` (an HTTP try: number `try_no` within its attempt, failed (`failure`) or answered with `status` after
    failed ones), ``held`` / ``released`` (the user held the stream: `by` whom; `held` seconds once released)."""

    kind: str
    turn: int
    attempt: int
    method: str = ""
    path: str = ""
    answers: tuple[int, ...] = ()
    try_no: int = 0
    status: int | None = None
    failure: TryEntry | None = None
    by: str = ""
    held: float = 0.0
    version: int = 0  # the observation count when the row last changed (a view caches the row by it)


@dataclass(frozen=True, slots=True)
class DiagEntry:
    t: float
    turn: int
    attempt: int
    code: str
    severity: str
    message: str
    event_index: int | None  # SSE seq within the attempt
    block_index: int | None
    evno: int | None  # session-wide event number it points at (if known)


@dataclass(slots=True)
class Status:
    source: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    prompt: str | None = None
    loop_state: str = LoopState.IDLE
    detail: str = ""
    # the current attempt (`current_attempt`): the one whose stream was last heard from (its start, a read)
    turn: int = 0
    attempt: int = 0
    events: int = 0
    finished: str | None = None  # loop_finished status (None again when another loop starts: a replay of many
    error: str | None = None  # conversations runs one loop per conversation, one after the other)
    # the first loop that did not finish, of a session of several loops: the session's end (the replay's result)
    failed_loop: tuple[str, str | None] | None = None
    tokens_in: int = 0  # whole session, closed turns + the current attempt
    tokens_out: int = 0
    messages: int = 0
    t_last: float = 0.0  # time of the last observation
    version: int = 0
    held_by: str | None = None  # the stream is held now: "pause" | "step"
    held_since: float | None = None
    held_total: float = 0.0  # seconds the stream was held over the session (closed holds)
    control: str = ""  # the last control applied (pause, resume, step_event...)
    last_try: TryEntry | None = None  # the last failed HTTP try (the status line says it while the SDK waits)


@dataclass(frozen=True, slots=True)
class Savings:
    """Streamed execution against sequential: ``sequential = stream + tools``, ``actual`` = from the answered
    attempt's request to the later of its stream end and its last used tool's end."""

    stream: float  # the answered attempt: request to end of stream
    tools: float  # run times of the used tools, added up
    actual: float
    counted: int  # tools counted (their results were used)
    left_out: int  # tools not counted (failed attempt, discarded, cancelled, not run)

    @property
    def sequential(self) -> float:
        return self.stream + self.tools

    @property
    def saved(self) -> float:
        return self.sequential - self.actual


# Transcript items (the Assistant pane), append-only tuples:
#   ("turn", turn)                       a turn starts
#   ("prompt", conversation, prompt)     a replayed conversation's prompt (its loop started; before its turns)
#   ("text", (turn, attempt, index))     a text block (grows while open)
#   ("thinking", (turn, attempt, index))
#   ("tool", tool_key)                   inline tool activity (one line, follows the tool's state)
#   ("block", (turn, attempt, index))    another block type (server tool result...)
#   ("note", what, severity)             what happened, as data (the tui words it): ("try", turn, TryEntry),
#                                        ("retry", turn, attempt), ("attempt_ended", turn, attempt, status, reason),
#                                        ("loop_finished", status, error)
TranscriptItem = tuple[str, *tuple[Any, ...]]  # (its kind, then what that kind holds: as above)

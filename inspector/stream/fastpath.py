"""The engine's one fast path: shorter ways, with the same results, for the shapes that make up most of a stream.

Everything else is the general path's, and this module calls the general path's own helpers for it
(`SSEDecoder._line` / `_dispatch`, `TurnStream._step`, `MessageAssembler.add_run`, the OpenAI families' `_take`,
`_fragment_steps`, `_event_steps`); nothing here decides anything the general path does not. `SSEDecoder(fast=False)` / `TurnStream(fast=False)` run without it: the tests compare
both on every case (tests/stream/test_hotpath.py), and tools/bench_engine.py measures what each part buys.

0. `parse_event` (in `TurnStream._step`): a well-formed text/json/thinking delta is made without the general
   parser's checks, which it passes by construction.
1. `decode_lf` (in `SSEDecoder`, for bytes without CR): the bytes are cut at blank lines; a block that is one
   `event:` line of a known name and one `data: ` line (the shape the API sends), or one `data: ` line alone
   (OpenAI Chat Completions), becomes an event at once, with the decoder's state in local variables. Any other
   block goes line by line through the general helpers.
2. `turn_steps` (in `TurnStream`): the continuation path. The API writes every delta of a block the same way up to
   the fragment's JSON string, so an event whose data is that head, one JSON string and "}}" is a delta for the
   block the previous delta went to. Only the string is parsed (from the bytes that came in), the event and the
   step are built here exactly as the general path builds them, and the fragments of a run of such events go to
   the block at once (`MessageAssembler.add_run`).
3. `neutral_steps` (in `openai_common.NeutralStream`, the OpenAI families): the continuation path for their
   argument and text deltas. The family's shortcut (`_take`: its own checks and bookkeeping, all the general
   `_event` does for such an event but feeding the assembler) says which block an event's fragment goes to; a run
   of fragments for the block the last one went to is built here and given to the block at once, as in 2. And an
   event whose data is the last taken one's with another fragment string (and the next sequence_number, and any
   plain `obfuscation`) is taken by a `Template`, checked when it is learned, parsing only the fragment's string:
   one compiled regular expression per template matches an event's data (and gives a string without escapes as
   its text, with no JSON parse at all; tests/stream/test_openai_fastpath.py checks it against orjson).
   `ChatStream(fast=False)` / `ResponsesStream(fast=False)` map every event by `_event` alone
   (tests/stream/test_openai_fastpath.py compares both).

1, 2 and 3 build their objects with `object.__new__` and attribute stores, which costs less than the dataclass
`__init__` call; every field is set (tests/stream/test_hotpath.py compares the objects with the general path's).

What each buys (tools/bench_engine.py --parts, on a loaded 2-core machine, 10,000 text events / a 256 KB tool input
in 1-16 KiB reads): the decoder's way 1.3-1.4x over the general path, the continuation path 2.3-2.5x more, 3.1-3.4x
together (550k events/s); 1.7-2.0x once every step's observations are built; 2x on parsing one delta (0); 1.6x on
building one SSEEvent.

Where an OpenAI Responses stream's time goes (1 MB of arguments in 20-byte deltas, 52k events, OpenAI's
`obfuscation` on each; loaded 2-core machine): about 2.3-2.5 us an event from bytes, of which the SSE decoder
0.7-0.8 us (`_pieces`: about 0.25 us of it is the SSEEvent), the steps 1.5-1.7 us (the template's match about
0.4 us, the three objects and two lists of a step about 0.5 us), against 45-60 us an event for the openai SDK's
ResponseStreamState alone. The compiled match and the template's inner loop took the steps 10-20% (the whole
path 15-20%) below the per-call string checks they replaced.
"""

# ruff: noqa: SLF001 (this module is the general path's friend: the hot loop of SSEDecoder and TurnStream, moved
# out so both paths can be compared; it reads and writes their state as their own methods would)
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from inspector.core import exactjson
from inspector.stream import sse as _sse
from inspector.stream import turn as _turn
from inspector.stream.blocks import BlockBuffer
from inspector.stream.protocol import (
    _FAST_DELTAS,
    ContentBlockDelta,
    InputJsonDelta,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    _parse_event,
    delta_head,
)

if TYPE_CHECKING:
    from inspector.stream.diagnostics import Diagnostic
    from inspector.stream.openai_common import NeutralStream
    from inspector.stream.sse import SSEDecoder, SSEEvent
    from inspector.stream.turn import Step, TurnStream

__all__ = ["Continuation", "decode_lf", "neutral_steps", "parse_event", "turn_steps"]

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_TEXT_DELTAS = (InputJsonDelta, TextDelta, ThinkingDelta)  # the deltas that add a fragment to a block
_split_blank = re.compile(b"\n\n").split  # = bytes.split(b"\n\n"), which the regex engine does faster


# ------------------------------------------------------------------------------------------------------ decoder
def general_lines(dec: SSEDecoder, lines: list[bytes], off: int, ri: int, events: list[SSEEvent]) -> int:
    """Complete LF-terminated lines (without their terminators; b"" for a blank line) that start at stream offset
    `off`, through the general helpers; returns the offset after them."""
    for content in lines:
        if content:
            dec._line(content, off)
        else:
            dec._dispatch(off, off + 1, ri, events)
        off += len(content) + 1
    return off


def decode_lf(dec: SSEDecoder, rest: bytes, off: int, ri: int, events: list[SSEEvent]) -> bytes:
    """The complete blocks and lines of `rest` (bytes without CR, from stream offset `off`), as the general path
    would decode them; returns the partial line at the end (b"" if none).

    Every piece of `rest.split(b"\\n\\n")` but the last ends just before a "\\n\\n" (its last line's terminator, then
    a blank line); the last one is the start of a block not yet complete."""
    pieces = _split_blank(rest)
    last = pieces.pop()
    if pieces and pieces[0][:1] == b"\n":
        # the read begins with a blank line (often: the end of an event that began in the previous read): on its
        # own, so that the rest of the first piece can take the fast way
        dec._dispatch(off, off + 1, ri, events)
        off += 1
        pieces[0] = pieces[0][1:]
    if pieces:
        off = _pieces(dec, pieces, off, ri, events)
    tail_lines = last.split(b"\n")
    tail = tail_lines.pop()
    if tail_lines:
        general_lines(dec, tail_lines, off, ri, events)
    return tail


def _pieces(dec: SSEDecoder, pieces: list[bytes], off: int, ri: int, events: list[SSEEvent]) -> int:
    events_append = events.append
    raw_append = dec.raw_data.append
    new = object.__new__
    event_cls = _sse.SSEEvent
    names = dec._names
    limit = dec.max_event_bytes  # (an event over the limit takes the general path)
    carry = dec._carry  # mutated in place, never rebound
    fields, seq, block_start = dec._block_fields, dec._seq, dec._block_start
    last_id, id_buf, retry = dec.last_event_id, dec._id_buf, dec.retry
    # The start of the last API-shaped piece (its event line, "\n", "data: ") and its event type: most pieces start
    # the same way, which one removeprefix() tells (it removed something iff the length changed). Removing b""
    # removes nothing: then the piece goes to partition().
    start = b""
    etype: str | None = ""
    for piece in pieces:
        if not fields:  # the block has no field line yet (so no type, data, id or retry either)
            value = piece.removeprefix(start)
            shaped = len(value) != len(piece)
            if not shaped:  # not the last start: is the piece API-shaped at all?
                if piece[:6] == b"data: ":  # one `data: ` line without an `event:` line (OpenAI Chat Completions)
                    start, etype, value, shaped = b"data: ", "message", piece[6:], True
                else:
                    head, sep, value = piece.partition(b"\ndata: ")
                    etype = names.get(head)  # a known `event:` line, decoded once per distinct line
                    shaped = etype is not None and bool(sep)
                    start = head + sep if shaped else b""
            if shaped:
                try:
                    text = value.decode()
                except UnicodeDecodeError:
                    pass  # the general helpers report it
                else:
                    # one data line and nothing after it? (`in` on bytes would cost several times more: it first
                    # tries the needle as an int)
                    if "\n" not in text and off + len(piece) + 2 - block_start <= limit:
                        off += len(piece) + 2
                        ev: Any = new(event_cls)  # SSEEvent(seq, etype, text, id_buf, retry, block_start, off, ri)
                        ev.seq = seq
                        ev.event = etype
                        ev.data = text
                        ev.id = id_buf
                        ev.retry = retry
                        ev.start = block_start
                        ev.end = off
                        ev.read_index = ri
                        events_append(ev)
                        raw_append(value)
                        seq += 1
                        last_id = id_buf
                        block_start = off
                        if carry:
                            carry.clear()
                        continue
        # anything else, on the decoder's own state: the piece's lines, then the blank line (for an empty piece,
        # that makes two blank lines, as "\n\n" after a blank line is)
        dec._block_fields, dec._seq, dec._block_start, dec.last_event_id = fields, seq, block_start, last_id
        piece_lines = piece.split(b"\n")
        piece_lines.append(b"")
        off = general_lines(dec, piece_lines, off, ri, events)
        fields, seq, block_start = dec._block_fields, dec._seq, dec._block_start
        last_id, id_buf, retry = dec.last_event_id, dec._id_buf, dec.retry
    dec._block_fields, dec._seq, dec._block_start, dec.last_event_id = fields, seq, block_start, last_id
    return off


# ------------------------------------------------------------------------------------------------------ events
def parse_event(event_name: str, data: str, seq: int = -1) -> tuple[StreamEvent, list[Diagnostic]]:
    """protocol.parse_event, with a shorter way for a well-formed content_block_delta of a delta type in
    protocol._FAST_DELTAS (everything else: the general protocol._parse_event, on the payload parsed here).
    `x.__class__ is T` is the cheapest exact type test (and it rules out bool for the index, as the general path
    does); a missing key or an unknown delta type (KeyError) or an unhashable one (TypeError) leaves for the
    general path."""
    try:
        payload = _loads(data)
    except _JSONDecodeError:
        return _parse_event(event_name, data, seq)
    if payload.__class__ is dict and (event_name == "content_block_delta" or event_name == "message"):
        try:
            if payload["type"] == "content_block_delta":
                d = payload["delta"]
                idx = payload["index"]
                if idx.__class__ is int and idx >= 0 and d.__class__ is dict:
                    cls, key = _FAST_DELTAS[d["type"]]
                    v = d[key]
                    if v.__class__ is str:
                        return ContentBlockDelta(idx, cls(v), seq), []
        except (KeyError, TypeError):
            pass
    return _parse_event(event_name, data, seq, exactjson.exact(data, payload))  # big integers kept exact


# ------------------------------------------------------------------------------------------------------ steps
@dataclass(slots=True)
class Continuation:
    """The block the last delta went to: `head` is the text before the fragment's JSON string in that delta's data,
    as bytes (see protocol.delta_head), `cls` the delta's class."""

    head: bytes
    index: int
    cls: type
    block: BlockBuffer


def turn_steps(ts: TurnStream, events: list[SSEEvent], raws: list[bytes]) -> list[Step]:
    """The steps of `events` (raws[i]: events[i]'s data as the bytes that came in, or b""), as `ts._step` makes
    them one by one."""
    steps: list[Step] = []
    append = steps.append
    asm = ts.assembler
    general = ts._step
    loads = _loads
    new = object.__new__
    step_cls = _turn.Step
    cont = ts._cont  # dropped as soon as its block is closed or the message stopped
    if cont is not None and (cont.block.closed or asm.stopped):
        cont = None
    head, idx, cls, block = (cont.head, cont.index, cont.cls, cont.block) if cont is not None else (b"", 0, str, None)
    change = ("block_delta", idx)  # (shared by the steps' change lists: a tuple is immutable)
    run: list[str] = []  # fragments of the current run, not yet given to the block
    run_seq = 0  # the seq of the run's first event
    for e, raw in zip(events, raws, strict=True):
        if cont is not None:
            if not raw:  # an event the decoder's fast way did not make (often the one across two reads)
                raw = e.data.encode()
            # (removeprefix/removesuffix cost less than startswith/endswith and a slice; whether they removed
            # anything, the lengths tell)
            middle = raw.removeprefix(head)
            if len(middle) != len(raw) and (e.event == "content_block_delta" or e.event == "message"):
                string = middle.removesuffix(b"}}")
                text: Any = None
                if len(string) != len(middle):
                    try:
                        text = loads(string)
                    except _JSONDecodeError:
                        pass
                if text.__class__ is str:  # the middle is one JSON string: the data is exactly such a delta
                    if not run:
                        run_seq = e.seq
                    run.append(text)
                    d: Any = new(cls)  # cls(text)
                    if cls is InputJsonDelta:
                        d.partial_json = text
                        d.type = "input_json_delta"
                    elif cls is TextDelta:
                        d.text = text
                        d.type = "text_delta"
                    else:
                        d.thinking = text
                        d.type = "thinking_delta"
                    ev: Any = new(ContentBlockDelta)  # ContentBlockDelta(idx, d, e.seq)
                    ev.index = idx
                    ev.delta = d
                    ev.seq = e.seq
                    ev.type = "content_block_delta"
                    st: Any = new(step_cls)  # Step(e, ev, [change], [])
                    st.sse = e
                    st.event = ev
                    st.changes = [change]
                    st.diagnostics = []
                    append(st)
                    continue
            if run:
                asm.add_run(block, run, run_seq)  # type: ignore[arg-type]  # (a run has its block)
                run = []
        step = general(e)
        append(step)
        ev = step.event
        if (
            not step.diagnostics
            and step.changes
            and ev.__class__ is ContentBlockDelta
            and ev.delta.__class__ in _TEXT_DELTAS
        ):
            # a text/json/thinking fragment the block took: the next delta may continue it
            h = delta_head(ev)
            if h is not None and e.data.startswith(h):
                block = asm.blocks[ev.index]
                cont = Continuation(h.encode(), ev.index, ev.delta.__class__, block)
                head, idx, cls = cont.head, cont.index, cont.cls
                change = ("block_delta", idx)
        if cont is not None and (cont.block.closed or asm.stopped):
            cont = None
    if run:
        asm.add_run(block, run, run_seq)  # type: ignore[arg-type]  # (a run has its block)
    ts._cont = cont
    return steps


# ------------------------------------------------------------------------------------------------------ OpenAI steps
_KIND_CLASSES = {"tool_use": InputJsonDelta, "thinking": ThinkingDelta, "text": TextDelta}  # as NeutralStream._fragment
_HOLE = "\x00inspector.hole\x00"  # the values a template is checked with (a data text holding any gets none)
_HOLE_TOKEN = '"\\u0000inspector.hole\\u0000"'
_FREE = "\x00inspector.free\x00"
_FREE_TOKEN = '"\\u0000inspector.free\\u0000"'
_HOLE_INT = 918273645546372819
_MAX_MISSES = 3  # a run whose events keep differing from their template stops learning one


@dataclass(slots=True)
class Template:
    """The data text of the event a family's `_take` took last, with holes: `head`, the fragment's JSON string,
    `mid`, `tail`; with a sequence counter, the counter's digits in its place before or after the fragment
    (`counter_first`); with a free field (one the family ignores, such as OpenAI's per-event `obfuscation`), its
    string last, after `free_mid` (then `tail` is what follows that string), taken when it is plain ASCII letters
    and digits. Checked when learned: that text with any JSON string in the fragment's hole (and the next counter,
    and any string in the free field's hole) is the same JSON as the learned event's but for those values."""

    event: str  # the SSE event name
    head: str
    mid: str
    tail: str
    counter: int | None  # the counter the next event must have (None: no counter hole)
    counter_first: bool
    free_mid: str | None = None  # (None: no free hole)
    # the template as one compiled `fullmatch` (see _template_match): its groups are the counter's digits (or "";
    # last when the counter comes after the fragment), the fragment's text when its JSON string has no escape (else
    # None), and the string's JSON token
    match: Any = None

    def __post_init__(self) -> None:
        if self.match is None:
            self.match = _template_match(self)


# A JSON string that needs no parsing (its text is its content: no escape, no control character, no lone
# surrogate, not empty), or else any JSON string token (given to orjson, which checks it).
_PLAIN_OR_TOKEN = r'(?:"([^"\\\x00-\x1f\ud800-\udfff]+)"|("(?:[^"\\]|\\.)*"))'


def _template_match(t: Template) -> Any:
    """`t` as one regular expression's fullmatch: the data texts the template takes but for the counter's value
    (compared by the caller) and the JSON validity of an escaped string (checked by orjson)."""
    esc = re.escape
    counter = "([0-9]+)" if t.counter is not None else "()"
    free = "" if t.free_mid is None else esc(t.free_mid) + '"[A-Za-z0-9]+"'
    if t.counter is not None and t.counter_first:
        pattern = esc(t.head) + counter + esc(t.mid) + _PLAIN_OR_TOKEN + free + esc(t.tail)
    elif t.counter is not None:
        pattern = esc(t.head) + _PLAIN_OR_TOKEN + free + esc(t.mid) + counter + esc(t.tail)
    else:
        pattern = esc(t.head) + counter + _PLAIN_OR_TOKEN + free + esc(t.tail)
    return re.compile(pattern, re.S).fullmatch


def _string_end(data: str, start: int) -> int:
    """The end of the JSON string token that starts at `start` (a quote): just past its closing quote, or -1."""
    j = start
    while True:
        j = data.find('"', j + 1)
        if j < 0:
            return -1
        k = j
        while data[k - 1] == "\\":
            k -= 1
        if (j - k) % 2 == 0:  # an even number of backslashes before it: not escaped
            return j + 1


def _at(v: Any, path: tuple[str | int, ...]) -> Any:
    for k in path:
        v = v[k]
    return v


def _string_spans(data: str, key: str) -> list[tuple[int, int]]:
    """Where a string value of `key` may be in `data`: (its opening quote, just past its closing quote)."""
    out = []
    for m in re.finditer(rf'"{re.escape(key)}"\s*:\s*"', data):
        end = _string_end(data, m.end() - 1)
        if end > 0:
            out.append((m.end() - 1, end))
        if len(out) == 4:
            break
    return out


def learn_template(ns: NeutralStream, e: SSEEvent) -> Template | None:
    """A template from the event `ns._take` just took (see Template), or None: the fragment's string (or the
    counter, or the free field) not found as the value of its key, or the check fails."""
    shape = ns._shape(e)
    data = e.data
    if shape is None or _HOLE_TOKEN in data or _FREE_TOKEN in data or str(_HOLE_INT) in data:
        return None
    doc, path, ckey, fkey = shape
    expected = _loads(orjson.dumps(doc))  # (a copy) with the holes' values
    if _at(doc, path) == _HOLE:
        return None
    _at(expected, path[:-1])[path[-1]] = _HOLE
    counters: list[tuple[int, int] | None] = [None]
    if ckey is not None:
        expected[ckey] = _HOLE_INT
        spans = [m.span(1) for m in re.finditer(rf'"{re.escape(ckey)}"\s*:\s*([0-9]+)', data)][:4]
        counters = [c for c in spans if int(data[c[0] : c[1]]) == doc[ckey]]
    frees: list[tuple[int, int] | None] = [None]
    if fkey is not None:
        if doc[fkey] == _FREE:
            return None
        expected[fkey] = _FREE
        frees = list(_string_spans(data, fkey))
    want = orjson.dumps(expected)
    for s, end in _string_spans(data, path[-1]):
        for c in counters:
            for f in frees:
                if f is not None and (f[0] < end or (c is not None and c[0] >= end)):
                    continue  # (a free field is taken last, after the fragment and the counter)
                free_mid, after = (None, data[end:]) if f is None else (data[end : f[0]], data[f[1] :])
                free = "" if free_mid is None else free_mid + _FREE_TOKEN  # (free_mid is None when f is)
                if c is None:
                    head, mid, tail, first = data[:s], "", after, False
                    text = head + _HOLE_TOKEN + free + tail
                elif c[0] >= end:
                    head, mid, tail, first = data[:s], data[end : c[0]], data[c[1] :], False
                    text = head + _HOLE_TOKEN + mid + str(_HOLE_INT) + tail
                elif c[1] <= s:
                    head, mid, tail, first = data[: c[0]], data[c[1] : s], after, True
                    text = head + str(_HOLE_INT) + mid + _HOLE_TOKEN + free + tail
                else:
                    continue
                try:
                    same = orjson.dumps(_loads(text)) == want  # (dumps: exact types, 1 is not 1.0 nor true)
                except _JSONDecodeError:
                    same = False
                if same:
                    counter = (
                        None if c is None or ckey is None else doc[ckey] + 1
                    )  # (a counter c is found only by ckey)
                    return Template(e.event, head, mid, tail, counter, first, free_mid)
    return None


def neutral_steps(ns: NeutralStream, events: list[SSEEvent]) -> list[Step]:
    """The steps of `events` for an OpenAI family (openai_common.NeutralStream), as `ns._event_steps` makes them
    one by one: the continuation path of `turn_steps` for the families' argument and text deltas.

    The family's own shortcut (`ns._take`: the common delta, its bookkeeping done) tells which block an event's one
    fragment goes to. When that is the block (and the delta class) the previous event's fragment went to, with no
    diagnostic and no other change, nothing the assembler would check has changed since (only the general path
    opens, closes or stops anything, and any event it takes ends the run): the step is built here exactly as the
    general path builds it, and the fragments of a run of such events go to the block at once
    (`MessageAssembler.add_run`). Any other taken fragment goes to the assembler by `ns._fragment_steps` (the
    general `_fragment`), and every other event by `ns._event_steps`.

    Shorter still: an event whose data is the last taken one's but for the fragment's JSON string (and the next
    sequence counter) is, by its Template, taken without being parsed (only the string is), its bookkeeping
    done by `ns._take_same` for the run; the first event that differs ends the template (a per-event field, such
    as OpenAI's `obfuscation`, makes every event differ: then after a few misses in a run no template is learned
    and `_take` takes each one)."""
    steps: list[Step] = []
    append = steps.append
    asm = ns.assembler
    take = ns._take
    loads = _loads
    new = object.__new__
    step_cls = _turn.Step
    classes = _KIND_CLASSES
    cont = ns._neutral_cont
    tmpl = ns._neutral_template
    if cont is not None and (cont.block.closed or asm.stopped):
        cont = tmpl = None
    idx, cls, block = (cont.index, cont.cls, cont.block) if cont is not None else (-1, str, None)
    change = ("block_delta", idx)
    run: list[str] = []  # fragments of the current run, not yet given to the block
    run_seq = 0
    misses = ns._neutral_misses
    # the template's parts, in locals (its counter is written back when it ends)
    t_event, t_match, t_after, counter = _parts(tmpl)
    i, n = 0, len(events)
    while i < n:
        if tmpl is not None:
            # the events the template takes, one after another: each is the last taken one but for its fragment
            # (and the next counter); their fragments go to the run, and to the family at once (`ns._take_same`)
            # when the streak ends
            k = len(run)
            if not k:
                run_seq = events[i].seq
            while i < n:
                e = events[i]
                if e.event != t_event:
                    break
                m = t_match(e.data)
                if m is None:
                    break
                if t_after:
                    text, token, digits = m.groups()
                else:
                    digits, text, token = m.groups()
                if counter is not None and digits != str(counter):
                    break
                if text is None:  # a string with escapes: orjson reads it (and says if it is not JSON)
                    try:
                        text = loads(token)
                    except _JSONDecodeError:
                        break
                    if not text:
                        break
                if counter is not None:
                    counter += 1
                i += 1
                # the step, as the general path makes it (as below)
                run.append(text)
                d: Any = new(cls)  # cls(text)
                if cls is InputJsonDelta:
                    d.partial_json = text
                    d.type = "input_json_delta"
                elif cls is TextDelta:
                    d.text = text
                    d.type = "text_delta"
                else:
                    d.thinking = text
                    d.type = "thinking_delta"
                ev: Any = new(ContentBlockDelta)  # ContentBlockDelta(idx, d, e.seq)
                ev.index = idx
                ev.delta = d
                ev.seq = e.seq
                ev.type = "content_block_delta"
                st: Any = new(step_cls)  # Step(e, ev, [change], [])
                st.sse = e
                st.event = ev
                st.changes = [change]
                st.diagnostics = []
                append(st)
            if len(run) > k:
                ns._take_same(run[k:], None if counter is None else counter - 1)
            if i == n:
                break
            misses += 1  # the event at i is not the template's: `_take` takes it, or the general path
            tmpl = None
        e = events[i]
        i += 1
        try:
            got = take(e)
        except Exception:  # noqa: BLE001 (a bug of the shortcut: the general path names it as a decoder fault)
            got = None
        if got is None or got[0] != idx or classes[got[1]] is not cls:
            if run:
                asm.add_run(block, run, run_seq)  # type: ignore[arg-type]  # (a run has its block)
                run = []
            cont = tmpl = None
            misses = 0
            idx, cls, block = -1, str, None
            if got is None:
                steps.extend(ns._event_steps(e))
                continue
            b, kind, text = got
            made = ns._fragment_steps(e, b, kind, text)
            steps.extend(made)
            if len(made) == 1 and not made[0].diagnostics and made[0].changes == [("block_delta", b)]:
                # the block took it: the next fragments for it may continue the run
                cont = Continuation(b"", b, classes[kind], asm.blocks[b])
                idx, cls, block = b, cont.cls, cont.block
                change = ("block_delta", idx)
                tmpl = _learn(ns, e)
                t_event, t_match, t_after, counter = _parts(tmpl)
            continue
        text = got[2]
        if misses < _MAX_MISSES:
            tmpl = _learn(ns, e)
            if tmpl is None:
                misses += 1
            t_event, t_match, t_after, counter = _parts(tmpl)
        # a fragment for the block the last one went to: the step, as the general path makes it
        if not run:
            run_seq = e.seq
        run.append(text)
        d = new(cls)
        if cls is InputJsonDelta:
            d.partial_json = text
            d.type = "input_json_delta"
        elif cls is TextDelta:
            d.text = text
            d.type = "text_delta"
        else:
            d.thinking = text
            d.type = "thinking_delta"
        ev = new(ContentBlockDelta)
        ev.index = idx
        ev.delta = d
        ev.seq = e.seq
        ev.type = "content_block_delta"
        st = new(step_cls)
        st.sse = e
        st.event = ev
        st.changes = [change]
        st.diagnostics = []
        append(st)
    if run:
        asm.add_run(block, run, run_seq)  # type: ignore[arg-type]  # (a run has its block)
    if tmpl is not None:
        tmpl.counter = counter
    ns._neutral_cont = cont
    ns._neutral_template = tmpl
    ns._neutral_misses = misses
    return steps


def _parts(t: Template | None) -> tuple[str, Any, bool, int | None]:
    """The template's event name, match, whether its counter comes after the fragment (its match's groups are then
    (text, token, digits), else (digits, text, token)), and its counter."""
    if t is None:
        return "", None, False, None
    return t.event, t.match, t.counter is not None and not t.counter_first, t.counter


def _learn(ns: NeutralStream, e: SSEEvent) -> Template | None:
    try:
        return learn_template(ns, e)
    except Exception:  # noqa: BLE001 (no template: every event goes to `_take`, the same results more slowly)
        return None

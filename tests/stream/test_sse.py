"""WHATWG-exact incremental SSE decoder: every parsing rule, read splits, offsets, diagnostics, speed."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import astuple
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.stream.diagnostics import (
    SSE_BOM_STRIPPED,
    SSE_ERROR_WITHOUT_DATA,
    SSE_ID_WITH_NUL,
    SSE_INVALID_UTF8,
    SSE_NO_DATA,
    SSE_RETRY_IGNORED,
    SSE_UNKNOWN_FIELD,
    SSE_UNTERMINATED_EVENT,
    Diagnostic,
)
from inspector.stream.sse import SSEDecoder, SSEEvent, iter_events
from inspector.testing.hyp import examples

BOM = b"\xef\xbb\xbf"


# ------------------------------------------------------------------------------------------------ helpers
def run(chunks: list[bytes]) -> tuple[list[SSEEvent], list[Diagnostic]]:
    d = SSEDecoder()
    events: list[SSEEvent] = []
    for c in chunks:
        events += d.feed(c)
    assert d.close() == []
    return events, d.diagnostics


def datas(events: list[SSEEvent]) -> list[str]:
    return [e.data for e in events]


def codes(diags: list[Diagnostic]) -> list[str]:
    return [d.code for d in diags]


def split_at(data: bytes, points: Iterable[int]) -> list[bytes]:
    cuts = [0, *sorted(points), len(data)]
    return [data[a:b] for a, b in pairwise(cuts)]


def without_read_index(events: list[SSEEvent]) -> list[tuple[object, ...]]:
    return [astuple(e)[:-1] for e in events]


def reference(stream: bytes) -> list[tuple[str, str, str, int | None]]:
    """A deliberately naive WHATWG implementation: decode everything, strip a BOM, split lines, interpret.

    Returns (event, data, id, retry) per dispatched event.
    """
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    out = []
    retry: int | None = None
    data, etype, id_buf = "", "", ""
    pos = 0
    for m in re.finditer(r"\r\n|\r|\n", text):  # a final line without terminator is never processed
        line = text[pos : m.start()]
        pos = m.end()
        if line == "":
            if data == "":
                etype = ""
                continue
            if data.endswith("\n"):
                data = data[:-1]
            out.append((etype or "message", data, id_buf, retry))
            data, etype = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "event":
            etype = value
        elif name == "data":
            data += value + "\n"
        elif name == "id":
            if "\0" not in value:
                id_buf = value
        elif name == "retry":
            if re.fullmatch(r"[0-9]+", value):
                retry = int(value)
    return out


# ------------------------------------------------------------------------------------------------ basics
def test_single_event_fields_and_offsets() -> None:
    d = SSEDecoder()
    evs = d.feed(b"event: ping\ndata: {}\n\n")
    assert evs == [SSEEvent(0, "ping", "{}", "", None, 0, 22, 0)]
    assert d.reads == 1 and d.bytes_fed == 22
    assert d.close() == []
    assert d.diagnostics == []


def test_sseevent_fields() -> None:
    (ev,) = iter_events(b"data: x\n\n")
    assert type(ev) is SSEEvent
    assert ev == SSEEvent(0, "message", "x", "", None, 0, 9, 0)


def test_field_name_split_across_reads() -> None:
    events, diags = run([b"da", b"ta: hel", b"lo\n\n"])
    assert events == [SSEEvent(0, "message", "hello", "", None, 0, 13, 2)]
    assert diags == []


def test_cr_lf_crlf_line_endings() -> None:
    stream = b"data: cr\r\rdata: lf\n\ndata: crlf\r\n\r\n"
    events, diags = run([stream])
    assert datas(events) == ["cr", "lf", "crlf"]
    assert [(e.start, e.end) for e in events] == [(0, 10), (10, 20), (20, 33)]  # CRLF blank line: end past its CR
    assert diags == []
    assert stream[33:] == b"\n"


def test_multibyte_character_split_across_reads_at_every_byte() -> None:
    stream = "data: é€𝄞x\n\n".encode()
    for i in range(1, len(stream)):
        events, diags = run([stream[:i], stream[i:]])
        assert datas(events) == ["é€𝄞x"], i
        assert diags == []
    events, diags = run([bytes([b]) for b in stream])  # one byte per read
    assert datas(events) == ["é€𝄞x"] and diags == []


def test_cr_at_read_end_then_lf_is_one_line_end() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r") == []
    assert d.feed(b"\ndata: b\r\n\r") == [SSEEvent(0, "message", "a\nb", "", None, 0, 19, 1)]  # not delayed
    assert d.feed(b"\n") == []  # the LF of the blank line's CRLF: no second dispatch, no empty line
    assert d.feed(b"data: c\n\n") == [SSEEvent(1, "message", "c", "", None, 20, 29, 3)]
    d.close()
    assert d.diagnostics == []


def test_cr_then_cr_in_next_read_is_a_blank_line() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: x\r") == []
    assert d.feed(b"\r") == [SSEEvent(0, "message", "x", "", None, 0, 9, 1)]
    assert d.feed(b"\r") == []  # another blank line: nothing to fire, nothing to report
    d.close()
    assert d.diagnostics == []


def test_crlf_split_between_data_line_and_next_field() -> None:
    events, diags = run([b"event: e\r", b"\ndata: 1\r", b"\n", b"\r", b"\n"])
    assert events == [SSEEvent(0, "e", "1", "", None, 0, 20, 3)]
    assert diags == []


def test_long_comment_is_ignored_and_covered_by_the_event_block() -> None:
    comment = b":" + b"k" * 2048 + b"\n"
    stream = comment + b"data: ok\n\n"
    for chunks in ([stream], split_at(stream, range(100, len(stream), 100))):
        events, diags = run(chunks)
        assert events == [SSEEvent(0, "message", "ok", "", None, 0, len(stream), len(chunks) - 1)]
        assert diags == []


def test_comment_that_looks_like_a_field() -> None:
    events, diags = run([b":data:fail\n\n: also\ndata: real\n\n"])
    assert datas(events) == ["real"]
    assert diags == []


def test_field_value_split_at_first_colon_and_one_space_stripped() -> None:
    stream = b"data: a: b\n\ndata:x\n\ndata:  two\n\ndata:\tt\n\n"
    assert datas(iter_events(stream)) == ["a: b", "x", " two", "\tt"]


def test_data_colon_fires_empty_string() -> None:
    events, diags = run([b"data:\n\n"])
    assert datas(events) == [""]
    assert diags == []


def test_data_lines_without_colon_fire_one_lf() -> None:
    events, _ = run([b"data\ndata\n\n"])
    assert datas(events) == ["\n"]


def test_multiple_data_lines_are_joined_with_lf() -> None:
    assert datas(iter_events(b"data: a\ndata: b\ndata:\n\n")) == ["a\nb\n"]


def test_data_may_contain_nul() -> None:
    events, diags = run([b"data: a\x00b\n\n"])
    assert datas(events) == ["a\x00b"]
    assert diags == []


def test_event_type_defaults_to_message_and_resets_after_dispatch() -> None:
    events = iter_events(b"event: one\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\nevent: a\nevent: b\ndata: 4\n\n")
    assert [(e.event, e.data) for e in events] == [("one", "1"), ("message", "2"), ("message", "3"), ("b", "4")]
    assert [e.seq for e in events] == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------------------ id / retry
def test_id_persists_resets_and_nul_is_ignored() -> None:
    stream = b"id: a\ndata: 1\n\ndata: 2\n\nid: x\x00\ndata: 3\n\nid\ndata: 4\n\nid: b\ndata: 5\n\nid:\ndata: 6\n\n"
    d = SSEDecoder()
    events = d.feed(stream)
    assert [(e.data, e.id) for e in events] == [("1", "a"), ("2", "a"), ("3", "a"), ("4", ""), ("5", "b"), ("6", "")]
    assert d.last_event_id == ""
    d.close()
    assert codes(d.diagnostics) == [SSE_ID_WITH_NUL]
    diag = d.diagnostics[0]
    assert diag.severity == "info" and diag.raw == b"id: x\x00" and diag.event_index == 2
    assert diag.offset == stream.index(b"id: x")


def test_last_event_id_is_set_at_dispatch_even_without_data() -> None:
    d = SSEDecoder()
    d.feed(b"id: 7\n")
    assert d.last_event_id == ""  # not dispatched yet
    assert d.feed(b"\n") == []
    assert d.last_event_id == "7"
    assert d.feed(b"data: x\n\n")[0].id == "7"


def test_unterminated_id_does_not_change_last_event_id() -> None:
    d = SSEDecoder()
    d.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b\n")
    d.close()
    assert d.last_event_id == "1"


@pytest.mark.parametrize("value", [b"1000x", b" 5", b"+5", b"-1", b"", b"1.5", b"\xd9\xa3", b"\xef\xbc\x95"])
def test_invalid_retry_is_ignored(value: Any) -> None:
    d = SSEDecoder()
    events = d.feed(b"retry: 1500\ndata: a\n\nretry: " + value + b"\ndata: b\n\n")  # value after the one space
    d.close()
    assert [e.retry for e in events] == [1500, 1500]
    assert d.retry == 1500
    assert codes(d.diagnostics) == [SSE_RETRY_IGNORED]
    assert d.diagnostics[0].raw == b"retry: " + value and d.diagnostics[0].event_index == 1


def test_valid_retry_is_accepted() -> None:
    d = SSEDecoder()
    assert d.retry is None
    (e0,) = d.feed(b"data: a\n\n")
    (e1,) = d.feed(b"retry: 1500\ndata: b\n\n")
    (e2,) = d.feed(b"retry:0042\ndata: c\n\n")
    assert (e0.retry, e1.retry, e2.retry) == (None, 1500, 42)
    d.close()
    assert d.diagnostics == []


def test_retry_takes_effect_immediately_even_in_an_unterminated_block() -> None:
    d = SSEDecoder()
    d.feed(b"retry: 300\n")
    d.close()
    assert d.retry == 300
    assert codes(d.diagnostics) == [SSE_UNTERMINATED_EVENT]


# ------------------------------------------------------------------------------------------------ no data
@pytest.mark.parametrize("block", [b"event: ping\n\n", b"id: 1\n\n", b"retry: 10\n\n", b"event: a\nid: 2\r\n\r\n"])
def test_block_without_data_fires_nothing_and_is_reported(block: Any) -> None:
    d = SSEDecoder()
    assert d.feed(b"data: x\n\n" + block + b"data: y\n\n") == [
        SSEEvent(0, "message", "x", "", None, 0, 9, 0),
        SSEEvent(1, "message", "y", d.last_event_id, d.retry, 9 + len(block), 18 + len(block), 0),
    ]
    d.close()
    assert codes(d.diagnostics) == [SSE_NO_DATA]
    diag = d.diagnostics[0]
    assert diag.severity == "info" and diag.offset == 9 and diag.event_index == 1
    assert diag.raw == block[: len(block) - (2 if block.endswith(b"\r\n\r\n") else 1) + 1]


def test_event_only_block_resets_type() -> None:
    assert [(e.event, e.data) for e in iter_events(b"event: ping\n\ndata: x\n\n")] == [("message", "x")]


def test_no_data_raw_bytes_span_reads() -> None:
    d = SSEDecoder()
    for c in [b"data: a\n\n: c\n", b"event: e", b"v\n", b"\n"]:
        d.feed(c)
    d.close()
    (diag,) = d.diagnostics
    assert diag.code == SSE_NO_DATA and diag.raw == b": c\nevent: ev\n\n" and diag.offset == 9


def test_blank_lines_and_comment_only_blocks_are_silent() -> None:
    events, diags = run([b"\n\n\r\n\r: hb\n\n: hb\r\n"])
    assert events == [] and diags == []


# ------------------------------------------------------------------------------------------------ BOM
def test_leading_bom_stripped_once() -> None:
    events, diags = run([BOM + b"data: a\n\n"])
    assert events == [SSEEvent(0, "message", "a", "", None, 3, 12, 0)]
    assert codes(diags) == [SSE_BOM_STRIPPED]
    assert diags[0].raw == BOM and diags[0].offset == 0 and diags[0].severity == "info"


def test_bom_split_across_reads() -> None:
    events, diags = run([b"\xef", b"\xbb", b"\xbfdata: a\n\n"])
    assert events == [SSEEvent(0, "message", "a", "", None, 3, 12, 2)]
    assert codes(diags) == [SSE_BOM_STRIPPED]


def test_second_bom_is_kept_and_spoils_the_line() -> None:
    events, diags = run([BOM + BOM + b"data: a\n\ndata: b\n\n"])
    assert datas(events) == ["b"]
    assert codes(diags) == [SSE_BOM_STRIPPED, SSE_UNKNOWN_FIELD]
    assert diags[1].raw == BOM + b"data: a" and diags[1].offset == 3 and "ufeffdata" in diags[1].message


def test_bom_after_the_start_is_not_stripped() -> None:
    events, diags = run([b"data: a\n\n" + BOM + b"data: b\n\n"])
    assert datas(events) == ["a"]
    assert codes(diags) == [SSE_UNKNOWN_FIELD]


def test_stream_that_is_only_a_bom_prefix() -> None:
    events, diags = run([b"\xef", b"\xbb"])
    assert events == []
    assert codes(diags) == [SSE_UNTERMINATED_EVENT]
    assert diags[0].raw == b"\xef\xbb" and diags[0].offset == 0


def test_bom_only_stream_is_silent_apart_from_the_strip() -> None:
    events, diags = run([BOM])
    assert events == [] and codes(diags) == [SSE_BOM_STRIPPED]


# ------------------------------------------------------------------------------------------------ names
def test_field_names_are_case_and_space_sensitive() -> None:
    d = SSEDecoder()
    events = d.feed(b"Data: a\ndata : b\nDATA: c\ndata: d\n\nData: e\ndata: f\n\n")
    d.close()
    assert datas(events) == ["d", "f"]
    assert codes(d.diagnostics) == [SSE_UNKNOWN_FIELD] * 3  # once per distinct name
    assert [x.raw for x in d.diagnostics] == [b"Data: a", b"data : b", b"DATA: c"]
    assert [x.offset for x in d.diagnostics] == [0, 8, 17]


def test_unknown_fields_are_ignored() -> None:
    events, diags = run([b"foo: bar\nx\ndata: a\n\n"])
    assert datas(events) == ["a"]
    assert codes(diags) == [SSE_UNKNOWN_FIELD, SSE_UNKNOWN_FIELD]
    assert all(x.severity == "info" for x in diags)


def test_an_error_block_without_data_fires_an_error_event_where_other_blocks_fire_nothing() -> None:
    """WHATWG fires nothing for a block without data, but the SDKs dispatch it, and an `error` event makes them raise:
    the one exception (sse.error_without_data, a warning); `event: x` alone still fires nothing (sse.no_data, info)."""
    d = SSEDecoder()
    events = d.feed(b"event: x\n\nevent: error\nid: 7\n\ndata: a\n\n")
    assert [(e.event, e.data, e.id, e.seq) for e in events] == [("error", "", "7", 0), ("message", "a", "7", 1)]
    assert [(x.code, x.severity) for x in d.diagnostics] == [(SSE_NO_DATA, "info"), (SSE_ERROR_WITHOUT_DATA, "warning")]
    assert d.diagnostics[1].raw == b"event: error\nid: 7\n\n"


# ------------------------------------------------------------------------------------------------ end of stream
def test_unterminated_final_event_is_discarded_and_reported() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n\nevent: e\ndata: b\n") == [SSEEvent(0, "message", "a", "", None, 0, 9, 0)]
    assert d.close() == []
    (diag,) = d.diagnostics
    assert diag.code == SSE_UNTERMINATED_EVENT and diag.severity == "warning"
    assert diag.raw == b"event: e\ndata: b\n" and diag.offset == 9 and diag.event_index == 1


def test_unterminated_partial_line_raw_bytes_span_reads() -> None:
    d = SSEDecoder()
    for c in [b"data: a\n\n:c\r\n", b"data: b", b"cd", b"ef"]:
        assert d.feed(c) == [] or c.startswith(b"data: a")
    d.close()
    (diag,) = d.diagnostics
    assert diag.code == SSE_UNTERMINATED_EVENT and diag.raw == b":c\r\ndata: bcdef" and diag.offset == 9


def test_a_long_unterminated_event_keeps_its_first_kib_in_its_diagnostic() -> None:
    """The whole event is in the reads; its diagnostic keeps the first KiB, as a cut-off event's does (it kept every
    byte: up to 64 MiB per attempt, 680 MB for `dump --json` of four such attempts), and says how long it was."""
    d = SSEDecoder()
    body = b"data: " + b"x" * 200_000
    for i in range(0, len(body), 7_000):
        d.feed(body[i : i + 7_000])
    d.close()
    (diag,) = d.diagnostics
    assert diag.code == SSE_UNTERMINATED_EVENT and diag.raw == body[:1024] and diag.offset == 0
    assert "200006 bytes" in diag.message and "first 1024 bytes kept here" in diag.message


def test_partial_comment_at_end_is_reported_but_complete_comment_is_not() -> None:
    _, diags = run([b"data: a\n\n: hb"])
    assert codes(diags) == [SSE_UNTERMINATED_EVENT]
    _, diags = run([b"data: a\n\n: hb\n"])
    assert diags == []


def test_close_is_idempotent_and_feed_after_close_raises() -> None:
    d = SSEDecoder()
    d.feed(b"data: x")
    assert d.close() == []
    assert d.close() == []
    assert len(d.diagnostics) == 1
    with pytest.raises(RuntimeError):
        d.feed(b"\n\n")


# ------------------------------------------------------------------------------------------------ UTF-8
def test_invalid_utf8_becomes_replacement_with_diagnostic() -> None:
    stream = b"data: a\xffb\n\nevent: \xc3(\ndata: \xe2\x82\n\n"
    d = SSEDecoder()
    events = d.feed(stream)
    d.close()
    assert [(e.event, e.data) for e in events] == [("message", "a\ufffdb"), ("\ufffd(", "\ufffd")]
    assert [(e.event, e.data) for e in events] == [(t, x) for t, x, _, _ in reference(stream)]
    assert codes(d.diagnostics) == [SSE_INVALID_UTF8] * 3
    assert [x.raw for x in d.diagnostics] == [b"data: a\xffb", b"event: \xc3(", b"data: \xe2\x82"]
    assert [x.offset for x in d.diagnostics] == [0, 11, 21]
    assert [x.event_index for x in d.diagnostics] == [0, 1, 1]
    assert all(x.severity == "warning" for x in d.diagnostics)


def test_invalid_utf8_in_comment_and_unknown_field_is_reported() -> None:
    _, diags = run([b": \xff\nna\xffme: v\ndata: ok\n\n"])
    assert codes(diags) == [SSE_INVALID_UTF8, SSE_INVALID_UTF8, SSE_UNKNOWN_FIELD]


def test_invalid_utf8_split_across_reads() -> None:
    events, diags = run([b"data: a\xe2", b"\x82", b"\n\n"])
    assert datas(events) == ["a\ufffd"]
    assert codes(diags) == [SSE_INVALID_UTF8]
    assert diags[0].raw == b"data: a\xe2\x82"


# ------------------------------------------------------------------------------------------------ reads, offsets, API
def test_read_index_and_offsets_over_several_reads() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: 1\n\ndata: 2\n") == [SSEEvent(0, "message", "1", "", None, 0, 9, 0)]
    assert d.feed(b"") == []
    assert d.feed(b": c\n\ndata: 3\n\n") == [
        SSEEvent(1, "message", "2", "", None, 9, 22, 2),
        SSEEvent(2, "message", "3", "", None, 22, 31, 2),
    ]
    assert d.reads == 3 and d.bytes_fed == 31
    assert d.events_dispatched == 3


def test_take_diagnostics_returns_only_new_ones() -> None:
    d = SSEDecoder()
    d.feed(b"foo: 1\n")
    first = d.take_diagnostics()
    assert codes(first) == [SSE_UNKNOWN_FIELD]
    assert d.take_diagnostics() == []
    d.feed(b"retry: x\n\n")
    assert codes(d.take_diagnostics()) == [SSE_RETRY_IGNORED, SSE_NO_DATA]
    d.close()
    assert d.take_diagnostics() == []
    assert codes(d.diagnostics) == [SSE_UNKNOWN_FIELD, SSE_RETRY_IGNORED, SSE_NO_DATA]


def test_accepts_bytearray_and_memoryview() -> None:
    d = SSEDecoder()
    assert datas(d.feed(bytearray(b"data: a\n\n")) + d.feed(memoryview(b"data: b\n\n"))) == ["a", "b"]


def test_iter_events() -> None:
    assert datas(iter_events(b"data: 1\n\ndata: 2\n\ndata: 3")) == ["1", "2"]


def test_cr_only_stream_matches_lf_stream() -> None:
    lf = b"".join(b'event: e%d\ndata: {"i": %d}\n: c\n\n' % (i, i) for i in range(200))
    cr = lf.replace(b"\n", b"\r")
    crlf = lf.replace(b"\n", b"\r\n")
    base = [astuple(e)[:5] for e in iter_events(lf)]
    assert len(base) == 200
    for s in (cr, crlf):
        for size in (len(s), 7, 1):
            events, diags = run([s[i : i + size] for i in range(0, len(s), size)])
            assert [astuple(e)[:5] for e in events] == base and diags == []


# ------------------------------------------------------------------------------------------------ splits
SMALL = (
    BOM
    + ("id: 1\r\nevent: a\rdata: é\r\n\r: c\ndata:x\rretry: 5\n\ndata: 𝄞\r\n\r\nretry: x\nevent: b\n\ndata: y").encode()
)


def test_every_one_and_two_way_split_gives_identical_results() -> None:
    want_events, want_diags = run([SMALL])
    assert [(e.event, e.data, e.id, e.retry) for e in want_events] == reference(SMALL)
    assert len(want_events) == 3
    assert set(codes(want_diags)) == {SSE_BOM_STRIPPED, SSE_RETRY_IGNORED, SSE_NO_DATA, SSE_UNTERMINATED_EVENT}
    n = len(SMALL)
    for i in range(n + 1):
        for j in range(i, n + 1):
            events, diags = run([SMALL[:i], SMALL[i:j], SMALL[j:]])
            assert without_read_index(events) == without_read_index(want_events), (i, j)
            assert diags == want_diags, (i, j)


_VALUE_CHARS = st.sampled_from(list("ab x:09 \x00é€𝄞\ufeff"))
_TEXT = st.text(_VALUE_CHARS, max_size=6).map(str.encode)
_BAD = st.sampled_from([b"\xff", b"\xe2\x82", b"\xc3", b"\x80", b"\xf0\x9d"])
_VALUE = st.lists(st.one_of(_TEXT, _BAD), max_size=3).map(b"".join)
_NAME = st.sampled_from([b"data", b"data", b"data", b"event", b"id", b"retry", b"Data", b"data ", b"foo", b""])
_SEP = st.sampled_from([b":", b": ", b": ", b":  "])
_BLANK = st.just(b"")  # blank line: dispatch
_LINE = st.one_of(
    st.tuples(_NAME, _SEP, _VALUE).map(b"".join),  # field: value
    st.tuples(st.just(b"data"), _SEP, _VALUE).map(b"".join),
    st.tuples(st.just(b"data"), _SEP, _VALUE).map(b"".join),
    st.tuples(st.just(b"id"), _SEP, _VALUE).map(b"".join),
    _NAME.filter(bool),  # field without colon
    st.tuples(st.just(b"retry:"), st.sampled_from([b"", b" "]), st.from_regex(rb"\A[0-9+\- x]{0,4}\Z")).map(b"".join),
    _VALUE.map(lambda v: b":" + v),  # comment
    _BLANK,
)
_TERM = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    prefix = draw(st.sampled_from([b"", b"", BOM, BOM + BOM, b"\xef\xbb"]))
    blocks = draw(st.lists(st.tuples(st.lists(st.tuples(_LINE, _TERM), max_size=4), _TERM), max_size=8))
    body = b"".join(b"".join(line + term for line, term in lines) + blank for lines, blank in blocks)
    tail = draw(st.sampled_from([b"", b"", b"data: partial", b"data: x\n", b"\n"]))
    return prefix + body + tail


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_any_split_gives_same_events_and_diagnostics(data: Any) -> None:
    stream = data.draw(sse_streams(), label="stream")
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=12), label="splits")
    chunks = split_at(stream, points)
    want_events, want_diags = run([stream])
    events, diags = run(chunks)

    assert without_read_index(events) == without_read_index(want_events)
    assert codes(diags) == codes(want_diags)
    assert diags == want_diags  # offsets, raw bytes and event indexes too
    # WHATWG semantics: same as the naive whole-stream implementation
    assert [(e.event, e.data, e.id, e.retry) for e in events] == reference(stream)
    # offsets: ordered, each event's bytes end with a line terminator, the read that completed it holds end-1
    ends = []
    total = 0
    for c in chunks:
        total += len(c)
        ends.append(total)
    prev_end = 0
    for k, e in enumerate(events):
        assert e.seq == k
        assert prev_end <= e.start < e.end <= len(stream)
        assert stream[e.end - 1 : e.end] in (b"\n", b"\r")
        assert e.read_index == next(i for i, t in enumerate(ends) if t >= e.end)
        prev_end = e.end
    assert all(x.event_index is not None and x.raw is not None and x.offset is not None for x in diags)


# ------------------------------------------------------------------------------------------------ performance
def test_64_mib_data_line_in_64_kib_reads_is_linear() -> None:
    size = 64 * 1024 * 1024
    stream = b"data: " + b"x" * size + b"\r\n\r\n"
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for i in range(0, len(stream), 65536):
        out += d.feed(stream[i : i + 65536])
    d.close()
    # (speed is measured by tools/bench_engine.py; a quadratic decoder would take minutes here)
    assert len(out) == 1 and len(out[0].data) == size and out[0].end == len(stream) - 1
    assert d.diagnostics == []


def test_long_line_in_tiny_reads_is_linear() -> None:
    stream = b"data: " + "é".encode() * 500_000 + b"\n\n"  # 1 MB, split mid-character in 333-byte reads
    events, diags = run([stream[i : i + 333] for i in range(0, len(stream), 333)])
    assert events[0].data == "é" * 500_000 and diags == []


def test_many_small_events_in_large_reads() -> None:
    one = (
        b"event: content_block_delta\n"
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}   \n\n'
    )
    stream = one * 50_000
    reads = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    events, diags = run(reads)
    assert len(events) == 50_000 and diags == []
    assert events[-1].seq == 49_999 and events[-1].end == len(stream)
    assert all(e.data.startswith('{"type":"content_block_delta"') for e in events)

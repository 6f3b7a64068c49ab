"""BlockBuffer / MessageAssembler / TurnStream: per-index assembly, every assembler diagnostic, outcomes, usage
merging, preview, parse-once and linear storage, and the read-split property test."""

from __future__ import annotations

from dataclasses import astuple
from itertools import pairwise
from typing import Any

import jiter
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inspector.stream.blocks as B
from inspector.core import exactjson
from inspector.stream import diagnostics as D
from inspector.stream.assembler import BlockBuffer, Change, MessageAssembler, Outcome, Step, TurnStream, assemble
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.openai_common import OpenAIEvent
from inspector.stream.protocol import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    InputJsonDelta,
    StreamEvent,
    parse_event,
)
from inspector.testing.hyp import examples
from inspector.testing.streamgen import (
    SHAPES,
    big_tool_stream,
    block_start,
    block_stop,
    citations_delta,
    delta,
    error_event,
    generate,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    ping,
    signature_delta,
    sse,
    text_delta,
    text_start,
    text_turn,
    thinking_delta,
    tool_start,
    tool_turn,
    with_line_endings,
)


def run(*items: Any, reads: list[int] | None = None) -> TurnStream:
    data = sse(*items)
    if reads is None:
        return assemble(data)
    cuts = [0, *reads, len(data)]
    return assemble([data[a:b] for a, b in pairwise(cuts)])


def codes(ts_or_diags: Any) -> list[str]:
    diags = ts_or_diags.diagnostics if hasattr(ts_or_diags, "diagnostics") else ts_or_diags
    return [d.code for d in diags]


def diag(ts: TurnStream, code: str) -> Diagnostic:
    found = [d for d in ts.diagnostics if d.code == code]
    assert len(found) == 1, (code, codes(ts))
    return found[0]


# ------------------------------------------------------------------------------------------------ assembly
def test_valid_turn_assembles_the_api_message_without_diagnostics() -> None:
    ts = run(*text_turn("Hi there"))
    assert ts.diagnostics == []
    assert ts.outcome == "text_finish"
    assert ts.final_message() == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Hi there"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }


def test_content_is_in_index_order_and_parallel_fragments_stay_per_index() -> None:
    ts = run(
        message_start(),
        tool_start(0, "toolu_a", "read"),
        tool_start(1, "toolu_b", "grep"),
        json_delta(1, '{"pat'),
        json_delta(0, '{"pa'),
        json_delta(1, 'tern":"x"}'),
        json_delta(0, 'th":"a"}'),
        block_stop(1),
        block_stop(0),
        message_delta("tool_use"),
        message_stop(),
    )
    assert ts.diagnostics == []
    content = ts.final_message()["content"]
    assert [c["id"] for c in content] == ["toolu_a", "toolu_b"]
    assert content[0]["input"] == {"path": "a"}
    assert content[1]["input"] == {"pattern": "x"}
    assert ts.outcome == "tool_use"


def test_thinking_signature_and_citations_fold_like_the_sdk() -> None:
    cit = {"type": "char_location", "cited_text": "c", "document_index": 0, "start_char_index": 0, "end_char_index": 1}
    ts = run(
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        thinking_delta(0, "let me "),
        thinking_delta(0, "think"),
        signature_delta(0, "SIG1"),
        signature_delta(0, "SIG2"),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "opaque"}),
        block_stop(1),
        text_start(2),
        citations_delta(2, cit),
        text_delta(2, "a"),
        citations_delta(2, cit),
        text_delta(2, "b"),
        block_stop(2),
        message_delta(),
        message_stop(),
    )
    assert ts.diagnostics == []
    assert ts.final_message()["content"] == [
        {"type": "thinking", "thinking": "let me think", "signature": "SIG2"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "ab", "citations": [cit, cit]},
    ]


def test_text_in_the_start_block_is_kept_before_the_deltas() -> None:
    ts = run(
        message_start(), text_start(0, "pre-"), text_delta(0, "post"), block_stop(0), message_delta(), message_stop()
    )
    assert ts.final_message()["content"] == [{"type": "text", "text": "pre-post"}]


def test_tool_without_any_delta_uses_the_start_input() -> None:
    ts = run(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": "now", "input": {}}),
        block_stop(0),
        message_delta("tool_use"),
        message_stop(),
    )
    assert ts.diagnostics == []
    assert ts.final_message()["content"][0]["input"] == {}
    assert ts.outcome == "tool_use"


def test_empty_first_partial_json_is_harmless() -> None:
    ts = run(*tool_turn(["", '{"path"', ': "README.md"}']))
    assert ts.diagnostics == []
    assert ts.final_message()["content"][0]["input"] == {"path": "README.md"}


def test_server_tool_use_input_and_whole_result_block() -> None:
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://e.x", "title": "E", "encrypted_content": "z"}],
    }
    ts = run(
        message_start(),
        tool_start(0, "srvtoolu_1", "web_search", "server_tool_use"),
        json_delta(0, '{"query": '),
        json_delta(0, '"weather"}'),
        block_stop(0),
        block_start(1, result),
        block_stop(1),
        message_delta(),
        message_stop(),
    )
    assert ts.diagnostics == []
    content = ts.final_message()["content"]
    assert content[0]["input"] == {"query": "weather"}
    assert content[1] == result
    assert ts.assembler.tool_blocks() == []  # server tools are not client tool calls
    assert ts.outcome == "text_finish"


def test_message_delta_extra_fields_are_kept_and_null_ones_do_not_overwrite() -> None:
    ts = run(
        message_start(container={"id": "c1"}),
        text_start(0),
        block_stop(0),
        message_delta("end_turn", container=None, stop_details={"type": "x"}),
        message_stop(),
    )
    m = ts.final_message()
    assert m["container"] == {"id": "c1"}
    assert m["stop_details"] == {"type": "x"}


def test_stop_sequence_and_stop_reason() -> None:
    ts = run(
        message_start(),
        text_start(0),
        text_delta(0, "x"),
        block_stop(0),
        message_delta("stop_sequence", "END"),
        message_stop(),
    )
    m = ts.final_message()
    assert (m["stop_reason"], m["stop_sequence"]) == ("stop_sequence", "END")
    assert ts.outcome == "text_finish"


# ------------------------------------------------------------------------------------------------ usage
def test_usage_message_delta_overwrites_never_adds() -> None:
    start_usage = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 7,
        "cache_read_input_tokens": 3,
        "output_tokens": 1,
        "inference_geo": "us",
        "cache_creation": {"ephemeral_5m_input_tokens": 7},
    }
    ts = run(
        message_start(usage=dict(start_usage)),
        text_start(0),
        block_stop(0),
        message_delta("end_turn", usage={"output_tokens": 40, "input_tokens": 120, "cache_read_input_tokens": 9}),
        message_stop(),
    )
    assert ts.final_message()["usage"] == {
        "input_tokens": 120,
        "cache_creation_input_tokens": 7,
        "cache_read_input_tokens": 9,
        "output_tokens": 40,
        "inference_geo": "us",
        "cache_creation": {"ephemeral_5m_input_tokens": 7},
    }


def test_usage_null_in_message_delta_keeps_the_earlier_value() -> None:
    ts = run(
        message_start(usage={"input_tokens": 100, "cache_read_input_tokens": 5, "output_tokens": 1}),
        message_delta(
            "end_turn",
            usage={"output_tokens": 2, "input_tokens": None, "cache_read_input_tokens": None, "server_tool_use": None},
        ),
        message_stop(),
    )
    assert ts.final_message()["usage"] == {"input_tokens": 100, "cache_read_input_tokens": 5, "output_tokens": 2}


def test_usage_two_message_deltas_the_last_total_wins() -> None:
    ts = run(
        message_start(usage={"input_tokens": 1, "output_tokens": 1}),
        message_delta(None, usage={"output_tokens": 30, "server_tool_use": {"web_search_requests": 1}}),
        message_delta("end_turn", usage={"output_tokens": 50, "server_tool_use": {"web_search_requests": 2}}),
        message_stop(),
    )
    u = ts.final_message()["usage"]
    assert u["output_tokens"] == 50
    assert u["server_tool_use"] == {"web_search_requests": 2}
    assert ts.final_message()["stop_reason"] == "end_turn"


def test_final_message_does_not_alias_the_message_start_payload() -> None:
    ts = run(*text_turn())
    m1 = ts.final_message()
    m1["usage"]["output_tokens"] = 999
    m1["content"].clear()
    assert ts.final_message()["usage"]["output_tokens"] == 20
    assert ts.final_message()["content"] == [{"type": "text", "text": "Hello"}]


# ------------------------------------------------------------------------------------------------ diagnostics
def test_delta_for_an_unknown_index() -> None:
    ts = run(message_start(), text_start(0), text_delta(3, "lost"), block_stop(0), message_delta(), message_stop())
    d = diag(ts, D.DELTA_UNKNOWN_INDEX)
    assert (d.severity, d.event_index, d.block_index) == ("error", 2, 3)
    assert ts.final_message()["content"] == [{"type": "text", "text": ""}]


def test_stop_for_an_unknown_index() -> None:
    ts = run(message_start(), text_start(0), block_stop(0), block_stop(4), message_delta(), message_stop())
    d = diag(ts, D.STOP_UNKNOWN_INDEX)
    assert (d.severity, d.event_index, d.block_index) == ("error", 3, 4)


def test_duplicate_block_start_while_open_and_after_stop() -> None:
    ts = run(
        message_start(),
        text_start(0),
        text_start(0),
        text_delta(0, "a"),
        block_stop(0),
        tool_start(0, "toolu_x"),
        message_delta(),
        message_stop(),
    )
    dups = [d for d in ts.diagnostics if d.code == D.DUPLICATE_BLOCK_START]
    assert [(d.event_index, d.severity) for d in dups] == [(2, "error"), (5, "error")]
    assert "already open" in dups[0].message and "already ended" in dups[1].message
    assert ts.final_message()["content"] == [{"type": "text", "text": "a"}]  # the first start wins


def test_index_gap() -> None:
    ts = run(
        message_start(), text_start(0), block_stop(0), text_start(2), block_stop(2), message_delta(), message_stop()
    )
    d = diag(ts, D.INDEX_GAP)
    assert (d.severity, d.event_index, d.block_index) == ("warning", 3, 2)
    assert "expected 1" in d.message
    assert len(ts.final_message()["content"]) == 2


@pytest.mark.parametrize(
    "block, bad",
    [
        ({"type": "text", "text": ""}, json_delta(0, "{}")),
        ({"type": "text", "text": ""}, thinking_delta(0, "x")),
        ({"type": "text", "text": ""}, signature_delta(0, "s")),
        ({"type": "tool_use", "id": "t", "name": "n", "input": {}}, text_delta(0, "x")),
        ({"type": "thinking", "thinking": "", "signature": ""}, text_delta(0, "x")),
        ({"type": "thinking", "thinking": "", "signature": ""}, citations_delta(0, {"type": "char_location"})),
        ({"type": "redacted_thinking", "data": "d"}, text_delta(0, "x")),
        ({"type": "web_search_tool_result", "tool_use_id": "s", "content": []}, json_delta(0, "{}")),
    ],
)
def test_delta_type_mismatch_is_an_error_and_ignored(block: Any, bad: Any) -> None:
    ts = run(message_start(), block_start(0, block), bad, block_stop(0), message_delta(), message_stop())
    d = diag(ts, D.DELTA_TYPE_MISMATCH)
    assert (d.severity, d.event_index, d.block_index) == ("error", 2, 0)
    assert ts.final_message()["content"] == [dict(block)]


def test_delta_after_block_stop() -> None:
    ts = run(
        message_start(),
        text_start(0),
        text_delta(0, "a"),
        block_stop(0),
        text_delta(0, "late"),
        message_delta(),
        message_stop(),
    )
    d = diag(ts, D.DELTA_AFTER_STOP)
    assert (d.severity, d.event_index) == ("error", 4)
    assert ts.final_message()["content"][0]["text"] == "a"


def test_duplicate_block_stop() -> None:
    ts = run(message_start(), text_start(0), block_stop(0), block_stop(0), message_delta(), message_stop())
    d = diag(ts, D.DUPLICATE_BLOCK_STOP)
    assert (d.severity, d.event_index) == ("warning", 3)


def test_events_before_message_start() -> None:
    ts = run(text_start(0), text_delta(0, "x"), message_start(), block_stop(0), message_delta(), message_stop())
    d = diag(ts, D.EVENT_BEFORE_START)
    assert (d.severity, d.event_index) == ("error", 0)
    assert ts.final_message()["content"] == [{"type": "text", "text": "x"}]
    assert ts.final_message()["id"] == "msg_1"


def test_message_delta_before_message_start_still_assembles() -> None:
    ts = run(message_delta("end_turn"), message_stop())
    assert codes(ts) == [D.EVENT_BEFORE_START, D.EVENT_BEFORE_START]
    m = ts.final_message()
    assert m["stop_reason"] == "end_turn"
    assert m["id"] is None and m["content"] == []


def test_duplicate_message_start() -> None:
    ts = run(message_start(id="a"), message_start(id="b"), message_delta(), message_stop())
    d = diag(ts, D.DUPLICATE_MESSAGE_START)
    assert (d.severity, d.event_index) == ("error", 1)
    assert ts.final_message()["id"] == "a"


def test_events_after_message_stop() -> None:
    ts = run(*text_turn(), text_start(1), ping(), message_delta("max_tokens"))
    after = [d for d in ts.diagnostics if d.code == D.EVENT_AFTER_STOP]
    assert [(d.event_index, d.severity) for d in after] == [(6, "warning"), (8, "warning")]  # ping is fine
    m = ts.final_message()
    assert m["stop_reason"] == "end_turn"
    assert len(m["content"]) == 1


def test_missing_message_stop() -> None:
    ts = run(*text_turn()[:-1])
    d = diag(ts, D.MISSING_MESSAGE_STOP)
    assert (d.severity, d.event_index) == ("error", None)
    assert ts.outcome == "incomplete"
    assert ts.final_message()["content"][0]["text"] == "Hello"


def test_no_events_at_all() -> None:
    for data in (b"", b": only a comment\n\n"):
        ts = assemble(data)
        assert codes(ts) == [D.NO_EVENTS]
        assert ts.outcome == "incomplete"


def test_unterminated_final_sse_event_is_reported_and_its_event_discarded() -> None:
    data = sse(*text_turn())
    ts = assemble(data[:-1])  # the last blank line is missing: message_stop never dispatched
    assert codes(ts) == [D.SSE_UNTERMINATED_EVENT, D.MISSING_MESSAGE_STOP]
    assert diag(ts, D.SSE_UNTERMINATED_EVENT).severity == "warning"
    assert b"message_stop" in (diag(ts, D.SSE_UNTERMINATED_EVENT).raw or b"")
    assert ts.outcome == "incomplete"


def test_invalid_event_json_is_kept_and_assembly_goes_on() -> None:
    ts = run(
        message_start(),
        text_start(0),
        b'event: content_block_delta\ndata: {"type": oops}\n\n',
        text_delta(0, "ok"),
        block_stop(0),
        message_delta(),
        message_stop(),
    )
    d = diag(ts, D.INVALID_EVENT_JSON)
    assert (d.severity, d.event_index) == ("error", 2)
    assert ts.final_message()["content"][0]["text"] == "ok"
    assert ts.outcome == "text_finish"


def test_invalid_tool_input_json_has_its_position() -> None:
    ts = run(*tool_turn(['{"path": "a",', ' "n": 1 x}']))
    d = diag(ts, D.TOOL_INPUT_INVALID)
    assert (d.severity, d.event_index, d.block_index) == ("error", 4, 0)  # the content_block_stop event
    b = ts.assembler.blocks[0]
    assert b.input is None and b.input_error is not None
    assert b.input_error.position == 21
    assert (b.input_error.line, b.input_error.column) == (1, 22)
    assert '{"path": "a", "n": 1 x}'[b.input_error.position] == "x"
    assert "char 21" in d.message and "column 22" in d.message
    assert d.raw == b'{"path": "a", "n": 1 x}'
    content = ts.final_message()["content"][0]
    assert content["input"] is None and content["input_raw"] == '{"path": "a", "n": 1 x}'


def test_invalid_tool_input_position_counts_characters_not_bytes() -> None:
    ts = run(*tool_turn(['{"p": "日本語🎉"', " ]"]))
    b = ts.assembler.blocks[0]
    buf = '{"p": "日本語🎉" ]'
    assert b.input_error is not None
    assert buf[b.input_error.position] == "]"
    assert b.input_error.column == b.input_error.position + 1


def test_invalid_tool_input_on_a_second_line() -> None:
    ts = run(*tool_turn(['{\n"a": 1,\n', '"b": }']))
    e = ts.assembler.blocks[0].input_error
    assert e is not None and (e.line, e.column) == (3, 6)


@pytest.mark.parametrize("frags", [[" "], ["", " \n\t "], ["\r\n"]])
def test_whitespace_only_tool_input_is_an_error(frags: Any) -> None:
    ts = run(*tool_turn(frags))
    d = diag(ts, D.TOOL_INPUT_EMPTY)
    assert d.severity == "error"
    b = ts.assembler.blocks[0]
    assert b.input is None and b.input_error is not None
    c = ts.final_message()["content"][0]
    assert c["input"] is None and c["input_raw"] == "".join(frags)
    assert ts.outcome == "tool_use"  # stop_reason tool_use, but the tool has no valid input: see executor


def test_empty_tool_input_buffer_warns_and_keeps_the_start_input() -> None:
    ts = run(*tool_turn(["", ""]))
    d = diag(ts, D.TOOL_INPUT_EMPTY)
    assert d.severity == "warning"
    assert ts.final_message()["content"][0]["input"] == {}
    assert ts.assembler.blocks[0].input_error is None


@pytest.mark.parametrize("js", ["[1, 2]", '"path"', "42", "null", "true"])
def test_tool_input_that_is_not_an_object(js: Any) -> None:
    ts = run(*tool_turn([js]))
    d = diag(ts, D.TOOL_INPUT_NOT_OBJECT)
    assert d.severity == "error"
    assert ts.final_message()["content"][0]["input"] is None
    assert ts.final_message()["content"][0]["input_raw"] == js


def test_error_event_mid_stream() -> None:
    ts = run(message_start(), text_start(0), text_delta(0, "par"), error_event("overloaded_error", "Overloaded"))
    assert codes(ts) == [D.ERROR_EVENT, D.BLOCK_NOT_CLOSED]  # no missing-stop on top of the error
    assert ts.outcome == "error"
    assert ts.assembler.error is not None and ts.assembler.error.error_type == "overloaded_error"
    assert diag(ts, D.BLOCK_NOT_CLOSED).severity == "warning"


def test_invalid_utf8_becomes_replacement_with_a_diagnostic() -> None:
    data = (
        sse(message_start(), text_start(0))
        + (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"a\xffb"}}\n\n'
        )
        + sse(block_stop(0), message_delta(), message_stop())
    )
    ts = assemble(data)
    assert codes(ts) == [D.SSE_INVALID_UTF8]
    assert ts.diagnostics[0].event_index == 2
    assert ts.final_message()["content"][0]["text"] == "a\ufffdb"
    assert ts.outcome == "text_finish"


@pytest.mark.parametrize("cut", range(1, 40))
def test_sse_diagnostics_go_with_their_event_however_the_reads_split(cut: Any) -> None:
    """An SSE-layer diagnostic is attached to the step of the event it concerns and ordered before that step's
    own diagnostics, even when the read that revealed it completed no event."""
    bad = (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":"\xfe"}}\n\n'
    )
    head = sse(message_start())
    data = head + bad + sse(text_delta(7, "x"), block_stop(0), message_delta(), message_stop())
    at = len(head) + cut * 4
    ts = TurnStream()
    steps = ts.feed(data[:at]) + ts.feed(data[at:])
    ts.close()
    assert [(d.code, d.event_index) for d in ts.diagnostics] == [(D.SSE_INVALID_UTF8, 1), (D.DELTA_UNKNOWN_INDEX, 2)]
    assert [[d.code for d in s.diagnostics] for s in steps] == [
        [],
        [D.SSE_INVALID_UTF8],
        [D.DELTA_UNKNOWN_INDEX],
        [],
        [],
        [],
    ]


def test_sse_diagnostic_of_an_event_that_never_completes_comes_out_at_close() -> None:
    ts = TurnStream()
    steps = ts.feed(sse(message_start()) + b'event: content_block_start\ndata: {"x": "\xff"}\n')
    assert [d for s in steps for d in s.diagnostics] == []
    assert ts.diagnostics == []
    new = ts.close()
    assert codes(new) == [D.SSE_INVALID_UTF8, D.SSE_UNTERMINATED_EVENT, D.MISSING_MESSAGE_STOP]
    assert codes(ts) == codes(new)
    assert ts.close() == []  # idempotent


def test_unknown_event_block_and_delta_are_info_and_kept() -> None:
    odd = {"type": "fallback", "reason": "x"}
    ts = run(
        message_start(),
        ("compaction_started", {"type": "compaction_started"}),
        block_start(0, odd),
        delta(0, {"type": "fallback_delta", "value": 1}),
        text_delta(0, "shown"),
        block_stop(0),
        block_start(1, {"type": "hologram", "frames": 3}),
        text_delta(1, "kept "),
        json_delta(1, "too"),
        block_stop(1),
        message_delta(),
        message_stop(),
    )
    assert codes(ts) == [D.UNKNOWN_EVENT, D.UNKNOWN_DELTA, D.DELTA_TYPE_MISMATCH, D.UNKNOWN_BLOCK]
    assert all(d.severity == "info" for d in ts.diagnostics if d.code != D.DELTA_TYPE_MISMATCH)
    # "fallback" is a known (beta) block without deltas; "hologram" is unknown: its deltas are kept, not errors
    assert ts.final_message()["content"] == [odd, {"type": "hologram", "frames": 3}]
    assert ts.assembler.blocks[1].joined() == "kept too"
    assert ts.outcome == "text_finish"


def test_block_not_closed_is_an_error_unless_max_tokens() -> None:
    ts = run(message_start(), text_start(0), text_delta(0, "x"), message_delta("end_turn"), message_stop())
    d = diag(ts, D.BLOCK_NOT_CLOSED)
    assert (d.severity, d.block_index, d.event_index) == ("error", 0, None)
    assert ts.outcome == "text_finish"


# ------------------------------------------------------------------------------------------------ outcomes
def test_outcome_truncated_by_max_tokens_with_an_open_tool_block() -> None:
    ts = run(
        message_start(),
        text_start(0),
        text_delta(0, "I'll write"),
        block_stop(0),
        tool_start(1, "toolu_w", "write_file"),
        json_delta(1, '{"path": "a.txt", "content": "hal'),
        message_delta("max_tokens"),
        message_stop(),
    )
    d = diag(ts, D.BLOCK_NOT_CLOSED)
    assert d.severity == "warning" and "will not run" in d.message
    assert ts.outcome == "truncated"
    tool = ts.final_message()["content"][1]
    assert tool["input"] is None and tool["input_raw"] == '{"path": "a.txt", "content": "hal'


def test_outcome_truncated_by_max_tokens_before_any_tool_fragment_does_not_claim_empty_input() -> None:
    ts = run(message_start(), tool_start(0), message_delta("max_tokens"), message_stop())
    assert ts.outcome == "truncated"
    tool = ts.final_message()["content"][0]
    assert tool["input"] is None and tool["input_raw"] == ""


def test_outcome_truncated_with_invalid_json_at_stop() -> None:
    ts = run(
        message_start(),
        tool_start(0),
        json_delta(0, '{"a": "cut'),
        block_stop(0),
        message_delta("max_tokens"),
        message_stop(),
    )
    assert codes(ts) == [D.TOOL_INPUT_INVALID]
    assert ts.outcome == "truncated"


def test_outcome_max_tokens_text_only_is_a_text_finish() -> None:
    ts = run(*text_turn("cut mid sent", "max_tokens"))
    assert ts.outcome == "text_finish"


@pytest.mark.parametrize(
    "reason", ["end_turn", "stop_sequence", "refusal", "pause_turn", "model_context_window_exceeded"]
)
def test_outcome_text_finish(reason: Any) -> None:
    assert run(*text_turn("x", reason)).outcome == "text_finish"


def test_outcome_tool_use_and_error_and_incomplete() -> None:
    assert run(*tool_turn(['{"a": 1}'])).outcome == "tool_use"
    assert run(*tool_turn(['{"a": 1}'])[:-1]).outcome == "incomplete"
    assert run(message_start(), error_event("api_error", "boom")).outcome == "error"
    assert run(error_event()).outcome == "error"
    assert run(message_start(), tool_start(0), json_delta(0, '{"a"')).outcome == "incomplete"


# ------------------------------------------------------------------------------------------------ preview
def test_preview_keeps_trailing_strings_of_an_open_block() -> None:
    b = BlockBuffer(0, "tool_use", {"type": "tool_use", "id": "t", "name": "w", "input": {}}, 1)
    assert b.preview() == (None, None)
    b.add('{"path": "src/ma', 2)
    assert b.preview() == ({"path": "src/ma"}, None)
    b.add('in.py", "lines": [1, 2', 3)
    assert b.preview() == ({"path": "src/main.py", "lines": [1, 2]}, None)
    b.add("   ", 4)
    assert b.preview()[0] == {"path": "src/main.py", "lines": [1, 2]}


def test_preview_of_whitespace_and_garbage() -> None:
    b = BlockBuffer(0, "tool_use", {"type": "tool_use", "input": {}}, 1)
    b.add("  \n", 2)
    assert b.preview() == (None, None)
    b2 = BlockBuffer(0, "tool_use", {"type": "tool_use", "input": {}}, 1)
    b2.add("path: x", 2)
    value, err = b2.preview()
    assert value is None and err


def test_preview_after_stop_gives_the_parse_result_and_text_blocks_give_their_text() -> None:
    ts = run(*tool_turn(['{"a": [1', ", 2]}"]))
    assert ts.assembler.blocks[0].preview() == ({"a": [1, 2]}, None)
    bad = run(*tool_turn(['{"a": [1', ", 2}"]))
    value, err = bad.assembler.blocks[0].preview()
    assert value is None and err is not None and "char" in err
    txt = run(*text_turn("hello"))
    assert txt.assembler.blocks[0].preview() == ("hello", None)


# ------------------------------------------------------------------------------------------------ parse once
class _Counting:
    def __init__(self, real: Any) -> None:
        self._real = real
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_tool_input_is_parsed_once_at_stop_never_per_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    orj = _Counting(exactjson)  # orjson, keeping big integers exact
    jit = _Counting(jiter)
    raw = _Counting(orjson)  # orjson itself: never called directly on a tool input

    def loads(*a: Any, **k: Any) -> Any:
        orj.calls += 1
        return exactjson.loads(*a, **k)

    def raw_loads(*a: Any, **k: Any) -> Any:
        raw.calls += 1
        return orjson.loads(*a, **k)

    def from_json(*a: Any, **k: Any) -> Any:
        jit.calls += 1
        return jiter.from_json(*a, **k)

    # (each wrapper gets the function it counts: an attribute a _Counting does not declare)
    orj.loads = loads  # type: ignore[attr-defined]
    jit.from_json = from_json  # type: ignore[attr-defined]
    raw.loads = raw_loads  # type: ignore[attr-defined]
    monkeypatch.setattr(B, "exactjson", orj)  # (the block buffers parse tool input: inspector.stream.blocks)
    monkeypatch.setattr(B, "orjson", raw)
    monkeypatch.setattr(B, "jiter", jit)

    g = big_tool_stream(20_000, fragment=20)
    ts = TurnStream()
    reads = [g.data[i : i + 97] for i in range(0, len(g.data), 97)]
    saw_stop = False
    for r in reads:
        for step in ts.feed(r):
            if isinstance(step.event, ContentBlockStop):
                saw_stop = True
        assert orj.calls == (1 if saw_stop else 0), "tool input parsed before its content_block_stop"
    ts.close()
    assert saw_stop
    assert orj.calls == 1 and raw.calls == 0
    assert jit.calls == 0  # the live preview is the UI's business, at display rate
    assert ts.final_message() == g.message
    # a preview is one partial parse, on demand
    ts2 = TurnStream()
    ts2.feed(g.data[: len(g.data) // 2])
    ts2.assembler.blocks[0].preview()
    assert jit.calls == 1


def test_fragments_are_stored_as_sent_and_joined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    joins = 0
    real = BlockBuffer.joined

    def joined(self: BlockBuffer) -> str:
        nonlocal joins
        if self._joined is None:
            joins += 1
        return real(self)

    monkeypatch.setattr(BlockBuffer, "joined", joined)
    asm = MessageAssembler()
    asm.feed(parse_event("message_start", '{"type":"message_start","message":{"id":"m","usage":{}}}', 0)[0])
    asm.feed(ContentBlockStart(0, {"type": "tool_use", "id": "t", "name": "w", "input": {}}, 1))
    frags = ['{"c": "', *("é日🎉x" * 5 for _ in range(2000)), '"}']
    for k, f in enumerate(frags):
        asm.feed(ContentBlockDelta(0, InputJsonDelta(f), k + 2))
    b = asm.blocks[0]
    assert joins == 0
    assert len(b.fragments) == len(frags)
    assert all(fr.text is f for fr, f in zip(b.fragments, frags, strict=True))  # kept, not copied
    assert [fr.event_index for fr in b.fragments] == list(range(2, len(frags) + 2))
    assert b.nbytes == sum(len(f.encode()) for f in frags)
    asm.feed(ContentBlockStop(0, len(frags) + 2))
    assert joins == 1
    assert b.input == {"c": "é日🎉x" * 5 * 2000}
    asm.final_message()
    asm.final_message()
    assert joins == 1  # cached


# ------------------------------------------------------------------------------------------------ generated streams
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_generated_shape_assembles_exactly(shape: str, eol: str) -> None:
    for seed in range(4):
        g = generate(seed, shape, line_ending=eol)
        ts = assemble(g.data)
        assert ts.diagnostics == [], (seed, [d.message for d in ts.diagnostics])
        assert ts.final_message() == g.message
        assert ts.assembler.events == g.n_events
        assert ts.outcome == ("tool_use" if g.message["stop_reason"] == "tool_use" else "text_finish")


# ------------------------------------------------------------------------------------------------ property
def _inject_faults(data: bytes, k: int) -> bytes:
    """Make a valid stream show diagnostics at several layers (deterministic in k)."""
    out = data
    if k & 1:  # invalid UTF-8 inside a data line (the first text_delta, if any)
        i = out.find(b'"text_delta"')
        if i >= 0:
            j = out.find(b'"text":', i)
            if j >= 0:
                out = out[: j + 8] + b"\xff\xc3" + out[j + 8 :]
    if k & 2:  # an unknown event and a delta for an unknown index in the middle
        mid = out.find(b"event: content_block_stop")
        if mid >= 0:
            out = out[:mid] + sse(("mystery", {"type": "mystery"}), text_delta(99, "x")) + out[mid:]
    if k & 4:  # cut the stream short, inside the last events
        out = out[: len(out) - 37]
    return out


# what a run gives: per step its SSE event (all but read_index), event, changes and diagnostics; then the stream's
# diagnostics, final message and outcome
_Snapshot = tuple[
    list[tuple[object, ...]],
    list[StreamEvent | OpenAIEvent],
    list[list[Change]],
    list[list[Diagnostic]],
    list[Diagnostic],
    dict[str, Any],
    Outcome,
]


def _snapshot(ts: TurnStream, steps: list[Step]) -> _Snapshot:
    return (
        [astuple(s.sse)[:-1] for s in steps],  # all but read_index (which depends on the split, by design)
        [s.event for s in steps],
        [s.changes for s in steps],
        [s.diagnostics for s in steps],
        ts.diagnostics,
        ts.final_message(),
        ts.outcome,
    )


def _run_reads(reads: list[bytes]) -> _Snapshot:
    ts = TurnStream()
    steps: list[Step] = []
    for r in reads:
        steps += ts.feed(r)
    ts.close()
    return _snapshot(ts, steps)


@st.composite
def split_streams(draw: st.DrawFn) -> tuple[Any, ...]:
    seed = draw(st.integers(0, 10_000))
    shape = draw(st.sampled_from([s for s in SHAPES if s != "large_tool"] + ["large_tool"] * 1))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    faults = draw(st.integers(0, 7))
    g = generate(seed, shape, line_ending=eol)
    data = _inject_faults(g.data, faults)
    n = len(data)
    # interesting cut points: inside multi-byte characters and between CR and LF
    tricky = [i for i in range(1, n) if (data[i] & 0xC0) == 0x80 or (data[i - 1] == 13 and data[i] == 10)]
    cuts = draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=40))
    if tricky:
        cuts += draw(st.lists(st.sampled_from(tricky), max_size=20))
    if draw(st.booleans()):  # sometimes many tiny reads in one region
        a = draw(st.integers(0, max(n - 1, 0)))
        cuts += list(range(a, min(a + 64, n)))
    cuts = sorted({c for c in cuts if 0 < c < n})
    bounds = [0, *cuts, n]
    return g, data, [data[a:b] for a, b in pairwise(bounds)], faults


@settings(
    max_examples=examples(350), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(split_streams())
def test_any_split_into_reads_gives_the_same_events_message_and_diagnostics(case: Any) -> None:
    g, data, reads, faults = case
    assert b"".join(reads) == data
    whole = _run_reads([data])
    assert _run_reads(reads) == whole
    if faults == 0:
        assert whole[4] == []  # no diagnostics on a valid stream
        assert whole[5] == g.message
    # and byte by byte for small streams
    if len(data) < 1500:
        assert _run_reads([data[i : i + 1] for i in range(len(data))]) == whole


def test_line_ending_variants_give_the_same_assembly() -> None:
    for seed in range(30):
        g = generate(seed)
        base = assemble(g.data)
        for eol in ("\r\n", "\r"):
            other = assemble(with_line_endings(g.data, eol))
            assert other.final_message() == base.final_message() == g.message
            assert other.diagnostics == base.diagnostics == []


def test_a_start_block_input_that_is_a_list_of_big_integers_is_a_diagnostic_not_a_crash() -> None:
    data = sse(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": [123456789012345678901234]}),
        block_stop(0),
        message_delta("tool_use"),
        message_stop(),
    )
    ts = assemble([data])
    (diag,) = [d for d in ts.diagnostics if d.code == D.TOOL_INPUT_NOT_OBJECT]
    assert diag.raw is not None and b"123456789012345678901234" in diag.raw

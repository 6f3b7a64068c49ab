"""parse_event: SSE event (name, data) -> typed Anthropic stream event, never raising; every protocol-layer
diagnostic it emits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.stream import diagnostics as D
from inspector.stream import fastpath
from inspector.stream.protocol import (
    CitationsDelta,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ErrorEvent,
    InputJsonDelta,
    InvalidEvent,
    MessageDelta,
    MessageStart,
    MessageStop,
    Ping,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    UnknownDelta,
    UnknownEvent,
    parse_event,
)
from inspector.testing.hyp import examples


def codes(diags: Any) -> list[str]:
    return [d.code for d in diags]


# ------------------------------------------------------------------------------------------------ known events
def test_message_start_keeps_the_whole_message_including_unknown_fields() -> None:
    data = (
        '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m",'
        '"content":[],"usage":{"input_tokens":5,"output_tokens":1,"inference_geo":"eu",'
        '"cache_creation":{"ephemeral_5m_input_tokens":3}},"container":null,"brand_new":{"x":1}}}'
    )
    ev, diags = parse_event("message_start", data, 0)
    assert isinstance(ev, MessageStart)
    assert ev.seq == 0
    assert ev.message["usage"]["inference_geo"] == "eu"
    assert ev.message["usage"]["cache_creation"] == {"ephemeral_5m_input_tokens": 3}
    assert ev.message["brand_new"] == {"x": 1}
    assert diags == []


def test_padded_data_with_trailing_spaces_parses() -> None:
    ev, diags = parse_event("content_block_stop", '{"type":"content_block_stop","index":3}      ', 7)
    assert ev == ContentBlockStop(3, 7)
    assert diags == []


@pytest.mark.parametrize(
    "delta, expected",
    [
        ({"type": "text_delta", "text": "hé"}, TextDelta("hé")),
        ({"type": "input_json_delta", "partial_json": ""}, InputJsonDelta("")),
        ({"type": "input_json_delta", "partial_json": '{"pa'}, InputJsonDelta('{"pa')),
        ({"type": "thinking_delta", "thinking": "hmm"}, ThinkingDelta("hmm")),
        ({"type": "signature_delta", "signature": "EqQB"}, SignatureDelta("EqQB")),
        (
            {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}},
            CitationsDelta({"type": "char_location", "cited_text": "x"}),
        ),
    ],
)
def test_each_known_delta_type(delta: Any, expected: Any) -> None:
    import orjson

    data = orjson.dumps({"type": "content_block_delta", "index": 2, "delta": delta}).decode()
    ev, diags = parse_event("content_block_delta", data, 4)
    assert isinstance(ev, ContentBlockDelta)
    assert (ev.index, ev.seq) == (2, 4)
    assert ev.delta == expected
    assert diags == []


def test_content_block_start_keeps_the_block_as_sent() -> None:
    block = '{"type":"tool_use","id":"toolu_1","name":"read","input":{},"caller":{"type":"direct"}}'
    ev, diags = parse_event(
        "content_block_start", f'{{"type":"content_block_start","index":1,"content_block":{block}}}'
    )
    assert isinstance(ev, ContentBlockStart)
    assert ev.index == 1
    assert ev.content_block == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read",
        "input": {},
        "caller": {"type": "direct"},
    }
    assert diags == []


def test_message_delta_message_stop_ping() -> None:
    ev, diags = parse_event(
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}',
    )
    assert ev == MessageDelta({"stop_reason": "tool_use", "stop_sequence": None}, {"output_tokens": 9})
    assert diags == []
    assert parse_event("message_stop", '{"type":"message_stop"}', 5) == (MessageStop(5), [])
    assert parse_event("ping", '{"type": "ping"}', 6) == (Ping(6), [])


def test_message_delta_without_usage_gets_an_empty_usage() -> None:
    ev, diags = parse_event("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn"}}')
    assert isinstance(ev, MessageDelta)
    assert ev.usage == {}
    assert diags == []


def test_the_data_type_wins_when_the_sse_name_is_missing() -> None:
    # "message" is the SSE default type: no mismatch reported
    ev, diags = parse_event("message", '{"type":"content_block_stop","index":0}', 1)
    assert ev == ContentBlockStop(0, 1)
    assert diags == []


def test_the_sse_name_is_used_when_the_data_has_no_type() -> None:
    ev, diags = parse_event("content_block_stop", '{"index":4}', 1)
    assert ev == ContentBlockStop(4, 1)
    assert diags == []


# ------------------------------------------------------------------------------------------------ diagnostics
def test_error_event_is_typed_and_diagnosed() -> None:
    ev, diags = parse_event(
        "error", '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"}', 9
    )
    assert isinstance(ev, ErrorEvent)
    assert (ev.error_type, ev.message, ev.seq) == ("overloaded_error", "Overloaded", 9)
    assert ev.error == {"type": "overloaded_error", "message": "Overloaded"}
    assert codes(diags) == [D.ERROR_EVENT]
    assert diags[0].severity == "error"
    assert diags[0].event_index == 9
    assert "overloaded_error" in diags[0].message and "Overloaded" in diags[0].message


def test_error_event_without_error_object() -> None:
    ev, diags = parse_event("error", '{"type":"error"}', 0)
    assert isinstance(ev, ErrorEvent)
    assert ev.error_type == "unknown_error"
    assert codes(diags) == [D.ERROR_EVENT]


@pytest.mark.parametrize("data", ["not json", '{"type":"message_stop"', "", "{'a': 1}", '{"a":1}}', "NaN"])
def test_invalid_event_json(data: Any) -> None:
    ev, diags = parse_event("message_stop", data, 3)
    assert isinstance(ev, InvalidEvent)
    assert (ev.event_name, ev.data, ev.seq) == ("message_stop", data, 3)
    assert codes(diags) == [D.INVALID_EVENT_JSON]
    assert diags[0].severity == "error"
    assert diags[0].event_index == 3
    assert diags[0].raw == data.encode()
    assert "at char" in diags[0].message


@pytest.mark.parametrize("data", ["[1, 2]", '"message_stop"', "42", "null", "true"])
def test_event_json_that_is_not_an_object(data: Any) -> None:
    ev, diags = parse_event("message_stop", data, 0)
    assert isinstance(ev, InvalidEvent)
    assert ev.error == "not an object"
    assert codes(diags) == [D.INVALID_EVENT_JSON]
    assert "not an object" in diags[0].message


def test_sse_name_differing_from_data_type_warns_and_uses_the_data_type() -> None:
    ev, diags = parse_event("content_block_delta", '{"type":"content_block_stop","index":0}', 2)
    assert ev == ContentBlockStop(0, 2)
    assert codes(diags) == [D.TYPE_MISMATCH]
    assert diags[0].severity == "warning"


def test_unknown_event_is_kept_with_its_payload() -> None:
    ev, diags = parse_event("compaction_started", '{"type":"compaction_started","at":5}', 4)
    assert ev == UnknownEvent("compaction_started", {"type": "compaction_started", "at": 5}, 4)
    assert codes(diags) == [D.UNKNOWN_EVENT]
    assert diags[0].severity == "info"


def test_unknown_delta_is_kept_with_its_payload() -> None:
    # (compaction_delta used to be the example here: it is a known beta delta now, see tests/stream/test_beta_blocks.py)
    data = '{"type":"content_block_delta","index":1,"delta":{"type":"summary_delta","content":"sum"}}'
    ev, diags = parse_event("content_block_delta", data, 6)
    assert isinstance(ev, ContentBlockDelta)
    assert ev.delta == UnknownDelta("summary_delta", {"type": "summary_delta", "content": "sum"})
    assert codes(diags) == [D.UNKNOWN_DELTA]
    assert diags[0].severity == "info"
    assert diags[0].block_index == 1


@pytest.mark.parametrize(
    "name, data",
    [
        ("content_block_delta", '{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"x"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":true,"delta":{"type":"text_delta","text":"x"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":"x"}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}'),
        ("content_block_start", '{"type":"content_block_start","content_block":{"type":"text","text":""}}'),
        ("content_block_start", '{"type":"content_block_start","index":0}'),
        ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"text":""}}'),
        ("content_block_stop", '{"type":"content_block_stop"}'),
        ("content_block_stop", '{"type":"content_block_stop","index":1.5}'),
        ("message_start", '{"type":"message_start"}'),
        ("message_start", '{"type":"message_start","message":[]}'),
        ("message_delta", '{"type":"message_delta","usage":{"output_tokens":1}}'),
    ],
)
def test_known_event_missing_a_field_it_needs_is_malformed_and_kept(name: Any, data: Any) -> None:
    import orjson

    ev, diags = parse_event(name, data, 8)
    assert isinstance(ev, UnknownEvent)
    assert ev.event_type == name
    assert ev.payload == orjson.loads(data)
    assert codes(diags) == [D.MALFORMED_EVENT]
    assert diags[0].severity == "error"
    assert diags[0].event_index == 8


@settings(max_examples=examples(300), deadline=None)
@given(
    name=st.text(max_size=20),
    data=st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "type",
                            "index",
                            "delta",
                            "content_block",
                            "message",
                            "usage",
                            "error",
                            "text",
                            "partial_json",
                            "x",
                        ]
                    ),
                    inner,
                    max_size=5,
                )
            ),
            max_leaves=20,
        ).map(lambda v: __import__("json").dumps(v)),
    ),
)
def test_parse_event_never_raises(name: Any, data: Any) -> None:
    ev, diags = parse_event(name, data, 1)
    assert fastpath.parse_event(name, data, 1) == (ev, diags)
    assert ev.seq == 1
    assert all(d.code and d.severity in ("error", "warning", "info") for d in diags)


# ------------------------------------------------------------------------------------------------ fast path
def _general(name: str, data: str, seq: int) -> Any:
    from inspector.stream.protocol import _parse_event

    return _parse_event(name, data, seq)


def test_the_delta_fast_path_gives_what_the_general_path_gives() -> None:
    from inspector.stream.sse import iter_events
    from inspector.testing.streamgen import SHAPES, encode_events, generate

    n = 0
    for seed in range(60):
        g = generate(seed, SHAPES[seed % len(SHAPES)])
        for e in iter_events(g.data):
            assert fastpath.parse_event(e.event, e.data, e.seq) == parse_event(e.event, e.data, e.seq)
            assert parse_event(e.event, e.data, e.seq) == _general(e.event, e.data, e.seq)
            n += 1
    odd = [
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":1}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":-2,"delta":{"type":"text_delta","text":""}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":false,"delta":{"type":"text_delta","text":""}}'),
        ("ping", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}'),
        ("message", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"novel_delta","x":1}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}'),
        ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":["text_delta"]}'),
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s","extra":[1]}}',
        ),
        ("content_block_delta", "[]"),
        ("content_block_delta", "{"),
    ]
    for name, data in odd:
        assert fastpath.parse_event(name, data, 3) == parse_event(name, data, 3) == _general(name, data, 3), (
            name,
            data,
        )
    assert n > 1000
    assert callable(encode_events)  # the generator's encoder is what the streams above used

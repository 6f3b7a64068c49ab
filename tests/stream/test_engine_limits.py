"""Input that cannot crash or flood the engine: wrong JSON types at every path become named diagnostics (the raw
value kept), an event over the size limit is cut off with bounded memory, and repeated diagnostics are capped."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.core import exactjson
from inspector.stream import diagnostics as D
from inspector.stream.assembler import TurnStream, assemble
from inspector.stream.protocol import parse_event
from inspector.stream.sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder
from inspector.testing.hyp import examples
from inspector.testing.streamgen import (
    BETA_SHAPES,
    SHAPES,
    block_start,
    block_stop,
    citations_delta,
    delta,
    encode_events,
    generate,
    generate_beta,
    message_delta,
    message_start,
    message_stop,
    signature_delta,
    sse,
    text_delta,
    text_start,
    text_turn,
    thinking_delta,
)


def codes(ts: TurnStream) -> list[str]:
    return [d.code for d in ts.diagnostics]


def wrong_types(ts: TurnStream) -> list[str]:
    return [d.message for d in ts.diagnostics if d.code == D.WRONG_TYPE]


# ------------------------------------------------------------------------------------------ the known crash sites
@pytest.mark.parametrize("usage", [[1], "ab", 5, True])
def test_message_start_usage_of_the_wrong_type(usage: Any) -> None:
    ts = assemble(sse(message_start(usage=usage), *text_turn()[1:]))
    assert wrong_types(ts) == [
        f"message.usage is {D_type(usage)}, expected an object or null (kept as sent, not folded)"
    ]
    d = next(d for d in ts.diagnostics if d.code == D.WRONG_TYPE)
    assert d.raw == orjson.dumps(usage)  # the raw value is kept
    assert ts.final_message()["usage"] == {"output_tokens": 20}
    assert ts.outcome == "text_finish"


def D_type(v: Any) -> str:
    return {list: "an array", str: "a string", int: "a number", bool: "a boolean", dict: "an object"}[type(v)]


@pytest.mark.parametrize("where", ["usage", "delta.usage"])
def test_message_delta_usage_that_is_a_number(where: Any) -> None:
    md = message_delta("end_turn")
    if where == "usage":
        md[1]["usage"] = 7
    else:
        md[1]["delta"]["usage"] = 7
    ts = assemble(sse(*text_turn()[:4], md, message_stop()))
    assert wrong_types(ts) == [
        f"{'message_delta' if where == 'usage' else 'delta'}.usage is a number, expected an "
        "object or null (kept as sent, not folded)"
    ]
    msg = ts.final_message()
    assert msg["usage"] == {"input_tokens": 10, "output_tokens": 1 if where == "usage" else 20}
    assert msg["stop_reason"] == "end_turn"


def test_text_block_with_text_or_citations_of_the_wrong_type() -> None:
    ts = assemble(
        sse(
            message_start(),
            block_start(0, {"type": "text", "text": 5, "citations": 5}),
            text_delta(0, "hi"),
            citations_delta(0, 5),  # type: ignore[arg-type]  # (a wrong type on purpose)
            block_stop(0),
            block_start(1, {"type": "text", "text": 5}),
            block_stop(1),
            message_delta(),
            message_stop(),
        )
    )
    assert wrong_types(ts) == [
        "content_block.text is a number, expected a string (kept as sent, not folded)",
        "content_block.citations is a number, expected an array or null (kept as sent, not folded)",
        "citations_delta.citation is a number, expected an object (kept as sent, not folded)",
        "content_block.text is a number, expected a string (kept as sent, not folded)",
    ]
    content = ts.final_message()["content"]
    assert content[0]["text"] == "hi" and content[1]["text"] == ""


def test_thinking_signature_of_the_wrong_type() -> None:
    ts = assemble(
        sse(
            message_start(),
            block_start(0, {"type": "thinking", "thinking": 5, "signature": 5}),
            thinking_delta(0, "hmm"),
            signature_delta(0, "sig"),
            block_stop(0),
            message_delta(),
            message_stop(),
        )
    )
    assert len(wrong_types(ts)) == 2
    assert ts.final_message()["content"] == [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]


def test_tool_use_start_with_fields_of_the_wrong_type_never_runs() -> None:
    ts = assemble(
        sse(
            message_start(),
            block_start(0, {"type": "tool_use", "id": 5, "name": ["x"], "input": "ab"}),
            block_stop(0),
            message_delta("tool_use"),
            message_stop(),
        )
    )
    assert len(wrong_types(ts)) == 3 and D.TOOL_INPUT_NOT_OBJECT in codes(ts)
    b = ts.assembler.blocks[0]
    assert (b.id, b.name, b.input) == (None, None, None)  # (the loop runs only a tool_use with a string id)


def test_event_type_of_the_wrong_type() -> None:
    ev, diags = parse_event("ping", '{"type": 5}')
    assert [d.code for d in diags] == [D.WRONG_TYPE] and ev.type == "ping"


# --------------------------------------------------------------------------------- fuzz: wrong types at every path
_VALUES = [5, -1, 1.5, "ab", "", [1], [], {"x": 1}, {}, True, None]


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, (*prefix, i))


def _set(v: Any, path: Any, new: Any) -> None:
    for p in path[:-1]:
        v = v[p]
    v[path[-1]] = new


# paths whose type the engine checks, with the JSON kinds allowed there (a wrong type must give a diagnostic);
# values inside usage, tool inputs, citations, containers and unknown fields may be anything JSON
_S, _OS = {"str"}, {"str", "null"}
_CHECKED = {
    ("type",): _S,
    ("index",): {"number"},
    ("delta",): {"dict"},
    ("content_block",): {"dict"},
    ("message",): {"dict"},
    ("delta", "type"): _S,
    ("delta", "text"): _S,
    ("delta", "partial_json"): _S,
    ("delta", "thinking"): _S,
    ("delta", "signature"): _S,
    ("delta", "citation"): {"dict"},
    ("delta", "stop_reason"): _OS,
    ("delta", "stop_sequence"): _OS,
    ("content_block", "type"): _S,
    ("content_block", "text"): _S,
    ("content_block", "thinking"): _S,
    ("content_block", "signature"): _OS,
    ("content_block", "data"): _S,
    ("content_block", "id"): _S,
    ("content_block", "name"): _S,
    ("content_block", "input"): {"dict"},
    ("content_block", "citations"): {"list", "null"},
    ("message", "id"): _OS,
    ("message", "type"): _OS,
    ("message", "role"): _OS,
    ("message", "model"): _OS,
    ("message", "content"): {"list", "null"},
    ("message", "stop_reason"): _OS,
    ("message", "stop_sequence"): _OS,
    ("message", "usage"): {"dict", "null"},
}


def test_a_final_message_with_an_integer_past_64_bits_is_still_written() -> None:
    """The case a varying seed found (seed 40, beta:mixed, event 16's index made a string): the tool input that is
    left holds an integer orjson cannot write; the message is still JSON, written exactly."""
    events = json.loads(json.dumps(generate_beta(40, "mixed").events))
    _set(events[16][1], ("index",), "ab")
    msg = assemble([encode_events(events)]).final_message()
    with pytest.raises(TypeError, match="64-bit"):
        orjson.dumps(msg)
    assert json.loads(exactjson.dumps(msg)) == msg


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_wrong_types_anywhere_never_raise_and_are_named(data: Any) -> None:
    seed = data.draw(st.integers(0, 10_000), label="seed")
    shape = data.draw(st.sampled_from([*SHAPES, *(f"beta:{s}" for s in BETA_SHAPES)]), label="shape")
    if shape.startswith("beta:"):
        g = generate_beta(seed, shape[5:])
    else:
        g = generate(seed, shape, noise=False)
    events = json.loads(json.dumps(g.events))
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    name, payload = events[k]
    paths = [p for p in _paths(payload) if p]
    path = data.draw(st.sampled_from(paths), label="path")
    old = payload
    for p in path:
        old = old[p]
    new = data.draw(st.sampled_from([v for v in _VALUES if _json_kind(v) != _json_kind(old)]), label="value")
    delete = data.draw(st.booleans(), label="delete instead") and isinstance(path[-1], str)
    if delete:  # a missing field instead of a wrong one: never raises either
        parent = payload
        for p in path[:-1]:
            parent = parent[p]
        del parent[path[-1]]
    else:
        _set(payload, path, new)
    wire = encode_events(events)
    for reads in ([wire], [wire[i : i + 7] for i in range(0, len(wire), 7)]):
        ts = assemble(reads)  # never raises
        msg = ts.final_message()
        exactjson.dumps(msg)  # the final message is plain JSON (an integer past 64 bits too: the API sends them)
        assert isinstance(msg["usage"], dict) and isinstance(msg["content"], list)
        for b in msg["content"]:
            assert isinstance(b, dict)
        ts.outcome  # noqa: B018 - never raises either
    if not delete and path in _CHECKED and _json_kind(new) not in _CHECKED[path]:
        assert ts.diagnostics, (name, path, new)


# ------------------------------------------------------------------------------------------------ event size limit
def test_event_over_the_limit_is_cut_off_and_the_stream_goes_on() -> None:
    big = b"data: " + b"x" * 5000 + b"\n\n"
    stream = b"data: a\n\n" + big + b"data: b\n\n"
    for reads in ([stream], [stream[i : i + 100] for i in range(0, len(stream), 100)], [bytes([c]) for c in stream]):
        d = SSEDecoder(max_event_bytes=1000)
        events = [e for r in reads for e in d.feed(r)]
        d.close()
        assert [e.data for e in events] == ["a", "b"]
        assert [e.seq for e in events] == [0, 1] and events[1].start == 9 + len(big)
        (diag,) = d.diagnostics
        assert diag.code == D.SSE_EVENT_TOO_LARGE and diag.offset == 9 and diag.event_index == 1
        assert diag.raw == big[:1000]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_cut_off_event_ends_at_its_blank_line_in_every_line_ending(eol: bytes) -> None:
    stream = b"data: a" + eol + eol + b"data: " + b"y" * 3000 + eol + b"data: z" + eol + eol + b"data: b" + eol + eol
    whole = SSEDecoder(max_event_bytes=500)
    ev_whole = whole.feed(stream) + whole.close()
    for n in (1, 2, 3, 64, 499, 501):
        d = SSEDecoder(max_event_bytes=500)
        events = [e for i in range(0, len(stream), n) for e in d.feed(stream[i : i + n])]
        d.close()
        assert [(e.data, e.start, e.end) for e in events] == [(e.data, e.start, e.end) for e in ev_whole]
        assert d.diagnostics == whole.diagnostics
    assert [e.data for e in ev_whole] == ["a", "b"]


def test_endless_line_keeps_memory_bounded() -> None:
    """/dev/zero-like input: 64 MiB without a newline, with a 1 MiB limit. The decoder keeps no more than the limit
    plus a read."""
    d = SSEDecoder(max_event_bytes=1 << 20)
    chunk = b"\0" * 65536
    tracemalloc.start()
    try:
        for _ in range(1024):
            d.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    d.close()
    assert peak < 4 << 20, peak
    assert [x.code for x in d.diagnostics] == [D.SSE_EVENT_TOO_LARGE]
    assert d.diagnostics[0].raw == b"\0" * 1024


def test_default_limit_is_64_mib_of_data() -> None:
    assert DEFAULT_MAX_EVENT_BYTES >= 64 * 1024 * 1024
    assert SSEDecoder().max_event_bytes == DEFAULT_MAX_EVENT_BYTES


def test_turnstream_passes_the_limit_and_keeps_steps_split_independent() -> None:
    events = text_turn("x" * 3000)
    wire = sse(*events)
    whole = TurnStream(max_event_bytes=2000)
    whole.feed(wire)
    whole.close()
    assert D.SSE_EVENT_TOO_LARGE in codes(whole)
    split = assemble([wire[i : i + 333] for i in range(0, len(wire), 333)])
    assert D.SSE_EVENT_TOO_LARGE not in codes(split)  # (the default limit)
    ts = TurnStream(max_event_bytes=2000)
    for i in range(0, len(wire), 333):
        ts.feed(wire[i : i + 333])
    ts.close()
    assert ts.diagnostics == whole.diagnostics and ts.final_message() == whole.final_message()


# -------------------------------------------------------------------------------------------- diagnostics capped
def test_repeated_diagnostics_are_capped_per_code() -> None:
    noise = b"".join(b"retry: x%d\n" % i for i in range(1000)) + b"\n"
    bad = sse(delta(7, {"type": "text_delta", "text": "x"})) * 500
    ts = assemble(sse(message_start(), text_start(0)) + noise + bad + sse(*text_turn()[2:]))
    got = codes(ts)
    assert got.count(D.SSE_RETRY_IGNORED) == 100
    assert got.count(D.DELTA_UNKNOWN_INDEX) == 100
    capped = [d for d in ts.diagnostics if d.code == D.DIAGNOSTICS_CAPPED]
    assert len(capped) == 3  # a notice per code, then the summary at close
    assert capped[-1].message == (
        "1300 more diagnostics not kept (only the first 100 of each code are): "
        "protocol.delta_unknown_index x400, sse.retry_ignored x900"
    )
    assert ts.final_message()["content"] == [{"type": "text", "text": "Hello"}]


def test_cap_is_per_stream_and_the_same_however_the_bytes_are_split() -> None:
    wire = sse(message_start()) + b": c\nfoo: 1\n\n" * 10 + sse(delta(3, {"type": "text_delta", "text": "x"})) * 300
    whole = assemble(wire)
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1, len(wire)), 40))
    split = assemble([wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)])
    assert split.diagnostics == whole.diagnostics
    assert codes(whole).count(D.DELTA_UNKNOWN_INDEX) == 100


def test_20_mb_of_noise_gives_bounded_diagnostics() -> None:
    line = b"data: {not json}\n\n"
    wire = sse(message_start()) + line * (2_000_000 // len(line))
    ts = assemble([wire[i : i + 65536] for i in range(0, len(wire), 65536)])
    assert len(ts.diagnostics) <= 110
    total = sum(len(d.message) + len(d.raw or b"") for d in ts.diagnostics)
    assert total < 100_000


def test_a_decoder_on_its_own_caps_and_sums_up_at_close() -> None:
    d = SSEDecoder()
    d.feed(b"".join(b"retry: x%d\n" % i for i in range(250)) + b"\n")
    assert [x.code for x in d.diagnostics].count(D.SSE_RETRY_IGNORED) == 100
    d.close()
    assert d.diagnostics[-1].code == D.DIAGNOSTICS_CAPPED
    assert d.diagnostics[-1].message.endswith("sse.retry_ignored x150")


def test_stream_ending_inside_a_cut_off_event_reports_it_once() -> None:
    d = SSEDecoder(max_event_bytes=100)
    d.feed(b"data: " + b"x" * 300)
    d.feed(b"y" * 300)
    assert d.close() == []
    assert [x.code for x in d.diagnostics] == [D.SSE_EVENT_TOO_LARGE]

"""The fast path (inspector.stream.fastpath: the decoder's per-block way, TurnStream's continuation path) gives
exactly what the general path gives: same events, steps, diagnostics, block buffers and message, however the bytes
are split, including the fallbacks (an event across reads, whose raw bytes the decoder did not keep; a continuation
candidate that is not exactly one JSON string). Each test runs both, `TurnStream()` and `TurnStream(fast=False)`
(`SSEDecoder(fast=...)` alike): nothing global is switched."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.stream.assembler import Step, TurnStream
from inspector.stream.protocol import ContentBlockDelta, InputJsonDelta, TextDelta, ThinkingDelta
from inspector.stream.sse import SSEDecoder, SSEEvent
from inspector.testing.hyp import examples
from inspector.testing.streamgen import SHAPES, generate, text_stream


# ---------------------------------------------------------------------------------------------------- slots pinned
def test_slots_the_fast_path_sets_one_by_one() -> None:
    # fastpath builds these with object.__new__ and sets every field: a new field needs a line there (and then a
    # change here); the comparisons below would also see a field left unset (AttributeError)
    assert SSEEvent.__slots__ == ("seq", "event", "data", "id", "retry", "start", "end", "read_index")
    assert Step.__slots__ == ("sse", "event", "changes", "diagnostics")
    assert ContentBlockDelta.__slots__ == ("index", "delta", "seq", "type")
    assert InputJsonDelta.__slots__ == ("partial_json", "type")
    assert TextDelta.__slots__ == ("text", "type")
    assert ThinkingDelta.__slots__ == ("thinking", "type")


def test_no_module_global_switches_the_path_is_chosen_per_instance() -> None:
    assert TurnStream().fast and TurnStream().decoder.fast
    slow = TurnStream(fast=False)
    assert not slow.fast and not slow.decoder.fast
    assert SSEDecoder().fast and not SSEDecoder(fast=False).fast


# ------------------------------------------------------------------------------------------------ the comparison
def run(reads: list[bytes], fast: bool) -> tuple[Any, ...]:
    """Steps, diagnostics, message and block buffers, by the fast path or the general path alone."""
    ts = TurnStream(fast=fast)
    steps = [st for r in reads for st in ts.feed(r)]
    closing = ts.close()
    blocks = {
        i: (b.type, b.texts, b.fragment_events, b.nbytes, b.closed, b.stop_event, b.input, b.input_error)
        for i, b in ts.assembler.blocks.items()
    }
    return steps, closing, ts.diagnostics, ts.final_message(), blocks, ts.assembler.events, ts.outcome


def assert_same(reads: list[bytes]) -> None:
    fast, general = run(reads, True), run(reads, False)
    assert fast[0] == general[0]  # steps: SSE events (offsets, read index), typed events, changes, diagnostics
    assert fast[1:] == general[1:]


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in pairwise(bounds)]


# Events the continuation path must tell apart from "the head, one JSON string, }}": each variant is the data text
# of a delta for block `i` of kind `kind`, built from a fragment `s`.
_HEADS = {
    "text": '{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":',
    "tool": '{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":',
    "thinking": '{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":',
}
VARIANTS = {
    "plain": lambda h, s: h + json.dumps(s) + "}}",
    "ascii_escaped": lambda h, s: h + json.dumps(s, ensure_ascii=True) + "}}",
    "padded": lambda h, s: h + json.dumps(s) + "}}   ",
    "extra_field": lambda h, s: h + json.dumps(s) + ',"x":1}}',
    "number": lambda h, s: h + "5}}",
    "null": lambda h, s: h + "null}}",
    "two_strings": lambda h, s: h + '"a" "b"}}',
    "trailing_brace": lambda h, s: h + json.dumps(s) + "}}}",
    "spaced": lambda h, s: h.replace(",", ", ").replace(":", ": ") + json.dumps(s) + "}}",
    "other_index": lambda h, s: h.replace('"index":', '"index":9') + json.dumps(s) + "}}",
    "escaped_quote_end": lambda h, s: h + json.dumps(s + '"}}') + "}}",
    "unclosed": lambda h, s: h + json.dumps(s),
    "one_brace": lambda h, s: h + json.dumps(s) + "}",
}


def delta_event(kind: str, i: int, variant: str, s: str, name: str) -> bytes:
    data = VARIANTS[variant](_HEADS[kind] % i, s)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data}\n\n".encode()


def _frame(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


event_spec = st.tuples(
    st.sampled_from(sorted(VARIANTS)),
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.sampled_from(["content_block_delta", "content_block_delta", "message", "", "ping"]),
)


@st.composite
def odd_streams(draw: st.DrawFn) -> bytes:
    out = [
        _frame(
            "message_start",
            {"type": "message_start", "message": {"id": "m", "content": [], "usage": {"output_tokens": 1}}},
        )
    ]
    for i, (kind, start) in enumerate(
        [
            ("text", {"type": "text", "text": ""}),
            ("tool", {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
            ("thinking", {"type": "thinking", "thinking": "", "signature": ""}),
        ]
    ):
        out.append(_frame("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        for variant, s, name in draw(st.lists(event_spec, max_size=12)):
            if name == "ping":
                out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
            else:
                out.append(delta_event(kind, i, variant, s, name))
        out.append(_frame("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(_frame("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}))
    out.append(_frame("message_stop", {"type": "message_stop"}))
    eol = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    return b"".join(out).replace(b"\n", eol.encode())


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(odd_streams(), st.lists(st.integers(0, 10**6), max_size=30))
def test_odd_deltas_take_the_same_path_results(data: bytes, cuts: list[int]) -> None:
    assert_same(cut(data, cuts))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.sampled_from(SHAPES), st.lists(st.integers(0, 10**7), max_size=40))
def test_generated_streams_hot_and_general_paths_agree(seed: int, shape: str, cuts: list[int]) -> None:
    g = generate(seed, shape)
    assert_same([g.data])
    assert_same(cut(g.data, cuts))


def test_events_across_reads_take_the_fallback_and_agree() -> None:
    """Every event split across two reads: the decoder keeps no raw bytes for it (raw_data b""), so the continuation
    path encodes its data instead."""
    g = text_stream(300, seed=5)
    k = g.data.index(b"text_delta", 2000)  # inside an event: it completes in the second read
    ts = TurnStream()
    ts.feed(g.data[:k])
    steps = ts.feed(g.data[k:])
    assert ts.decoder.raw_data[0] == b"" and any(ts.decoder.raw_data[1:])
    assert steps[0].event.type == "content_block_delta"
    reads = cut(g.data, list(range(37, len(g.data), 97)))
    assert_same(reads)
    assert run(reads, True)[3] == g.message
    # the fallback branch itself: a read boundary inside nearly every event
    tiny = cut(g.data, list(range(5, len(g.data), 11)))
    assert_same(tiny)
    assert run(tiny, True)[3] == g.message


def test_continuation_path_is_taken_and_its_accounting_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """By the fast path, most deltas skip the general step (parse, then the assembler's feed): the block's fragment
    events, byte count and the assembler's event count must still be those of the general path."""
    g = text_stream(2000, seed=1)
    calls = 0
    real = TurnStream._step

    def counting(self: TurnStream, e: SSEEvent) -> Step:
        nonlocal calls
        calls += 1
        return real(self, e)

    monkeypatch.setattr(TurnStream, "_step", counting)
    fast = run([g.data], True)
    n_fast, calls = calls, 0
    general = run([g.data], False)
    n_general = calls
    assert fast == general
    assert n_general >= 2000 and n_fast < n_general // 10


def test_the_decoders_general_path_gives_the_same_events_and_diagnostics() -> None:
    for seed in range(20):
        g = generate(seed)
        for reads in ([g.data], cut(g.data, list(range(0, len(g.data), 53)))):
            outs = []
            for fast in (True, False):
                d = SSEDecoder(fast=fast)
                evs = [e for r in reads for e in d.feed(r)]
                d.close()
                outs.append((evs, d.diagnostics))
            assert outs[0] == outs[1]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(
            [
                b"event: content_block_delta\n",
                b"event: ping\n",
                b"data: x\n",
                b"data: {}\n",
                b"data:\n",
                b"\n",
                b": c\n",
                b"id: 7\n",
                b"retry: 5\n",
                b"retry: x\n",
                b"foo: 1\n",
                b"data: \xff\n",
                b"event\n",
                b"id: a\x00\n",
                b"\xef\xbb\xbf",
                b"data: caf\xc3\xa9\n",
                b"event: \n",
            ]
        ),
        max_size=40,
    ),
    st.lists(st.integers(0, 10**6), max_size=12),
    st.integers(8, 200),
)
def test_any_line_soup_decodes_the_same_both_ways(parts: list[bytes], cuts: list[int], limit: int) -> None:
    """Any mix of fields, comments, bad UTF-8, BOMs and blank lines, split anywhere, with a small event limit: the
    fast way and the general one give the same events, raw data and diagnostics."""
    data = b"".join(parts)
    outs = []
    for fast in (True, False):
        d = SSEDecoder(max_event_bytes=limit, fast=fast)
        evs = [e for r in cut(data, cuts) for e in d.feed(r)]
        d.close()
        outs.append((evs, d.diagnostics, d.last_event_id, d.retry, d.events_dispatched))
    assert outs[0] == outs[1]

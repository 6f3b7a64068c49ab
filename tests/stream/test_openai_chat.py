"""Chat Completions streams through the neutral engine: per-index blocks, a tool call complete (and parsed once) at its
choice's finish_reason, n > 1, the usage chunk, [DONE], and each compatible server's quirk as a named diagnostic
(never a crash, never a silent repair)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.observe.stepobs import step_observations
from inspector.stream.assembler import Step
from inspector.stream.openai_chat import ChatStream
from inspector.testing.hyp import examples
from inspector.testing.openai_ref import sdk_chat, sse

U = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def ch(
    delta: Any = None, fr: Any = None, idx: Any = 0, usage: Any = None, choices: Any = True, **extra: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x"}
    c["choices"] = [{"index": idx, "delta": delta or {}, "finish_reason": fr}] if choices else []
    if usage is not None:
        c["usage"] = usage
    c.update(extra)
    return c


def tc(i: Any, id: Any = None, name: Any = None, args: Any = None, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"function": {}}
    if i is not None:
        d["index"] = i
    if id is not None:
        d["id"] = id
        d["type"] = "function"
    if name is not None:
        d["function"]["name"] = name
    if args is not None:
        d["function"]["arguments"] = args
    d.update(kw)
    return d


def run(data: bytes, reads: list[int] | None = None) -> tuple[ChatStream, list[Step]]:
    ts = ChatStream()
    steps: list[Step] = []
    if reads is None:
        steps += ts.feed(data)
    else:
        pos = 0
        for n in reads:
            steps += ts.feed(data[pos : pos + n])
            pos += n
        steps += ts.feed(data[pos:])
    ts.close()
    return ts, steps


def codes(ts: Any) -> set[str]:
    return {d.code for d in ts.diagnostics}


TOOL_STREAM = sse(
    ch({"role": "assistant", "content": ""}),
    ch({"content": "Let me check."}),
    ch({"tool_calls": [tc(0, "call_a", "get_weather", "")]}),
    ch({"tool_calls": [tc(1, "call_b", "get_time", "")]}),
    ch({"tool_calls": [tc(0, args='{"city": ')]}),
    ch({"tool_calls": [tc(1, args='{"tz": "CET"}')]}),
    ch({"tool_calls": [tc(0, args='"Paris"}')]}),
    ch({}, "tool_calls"),
    ch(choices=False, usage=U),
)


def test_per_index_buffers_and_tool_calls_complete_at_finish_reason() -> None:
    ts, steps = run(TOOL_STREAM)
    assert ts.outcome == "tool_use"
    assert not ts.diagnostics
    blocks = ts.assembler.blocks
    assert [b.type for _, b in sorted(blocks.items())] == ["text", "tool_use", "tool_use"]
    assert blocks[1].texts == ['{"city": ', '"Paris"}'] and blocks[2].texts == ['{"tz": "CET"}']
    assert blocks[1].input == {"city": "Paris"} and blocks[2].input == {"tz": "CET"}
    # the tool blocks close (and are parsed) in the step of the finish_reason chunk, not before
    closed = [(s.sse.seq, c[1]) for s in steps for c in s.changes if c[0] == "block_closed"]
    finish_seq = 7
    assert closed == [(finish_seq, 0), (finish_seq, 1), (finish_seq, 2)]
    final = ts.final_object()
    assert final["object"] == "chat.completion"
    msg = final["choices"][0]["message"]
    assert msg["content"] == "Let me check."
    assert [(t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg["tool_calls"]] == [
        ("call_a", "get_weather", '{"city": "Paris"}'),
        ("call_b", "get_time", '{"tz": "CET"}'),
    ]
    assert final["usage"] == U
    assert ts.final_message()["usage"] == {"input_tokens": 10, "output_tokens": 5}


def test_a_tool_block_is_open_and_unparsed_before_the_finish_reason() -> None:
    ts = ChatStream()
    data = TOOL_STREAM
    cut = data.index(b"data: " + orjson.dumps(ch({}, "tool_calls")))
    ts.feed(data[:cut])
    b = ts.assembler.blocks[1]
    assert b.open and not b.parsed and b.input is None
    ts.feed(data[cut:])
    assert b.closed and b.parsed and b.input == {"city": "Paris"}


def test_the_observations_downstream_are_the_anthropic_ones() -> None:
    ts = ChatStream()
    obs = []
    for step in ts.feed(TOOL_STREAM):
        obs += step_observations(step, ts.assembler, 0.0, 0, 0)
    uses = [o for o in obs if isinstance(o, O.ToolUse)]
    assert [(u.id, u.name, u.input) for u in uses] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {"tz": "CET"}),
    ]
    assert any(isinstance(o, O.BlockDelta) and o.fragment == "Let me check." for o in obs)


def test_n2_choices_get_their_own_blocks_and_finish_reasons() -> None:
    data = sse(
        ch({"role": "assistant", "content": ""}, idx=0),
        ch({"role": "assistant", "content": ""}, idx=1),
        ch({"content": "Red"}, idx=0),
        ch({"content": "Blue"}, idx=1),
        ch({}, "stop", idx=0),
        ch({}, "length", idx=1),
        ch(choices=False, usage=U),
    )
    ts, _ = run(data)
    final = ts.final_object()
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in final["choices"]] == [
        (0, "Red", "stop"),
        (1, "Blue", "length"),
    ]
    assert [b.start["choice"] for _, b in sorted(ts.assembler.blocks.items())] == [0, 1]
    assert ts.outcome == "text_finish"
    assert ts.final_message()["stop_reason"] == "max_tokens"  # one choice was cut
    assert sdk_chat(data)["choices"][1]["message"]["content"] == "Blue"


def test_tool_call_without_index_is_named_and_kept_apart_by_id() -> None:
    data = sse(
        ch({"role": "assistant"}),
        ch({"tool_calls": [tc(None, "call_a", "a", '{"x": 1}')]}),
        ch({"tool_calls": [tc(None, "call_b", "b", '{"y": ')]}),
        ch({"tool_calls": [tc(None, args="2}")]}),  # no id: continues the last call
        ch({}, "tool_calls"),
    )
    ts, _ = run(data)
    assert "openai.chat.tool_call_without_index" in codes(ts)
    calls = ts.final_object()["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [("call_a", '{"x": 1}'), ("call_b", '{"y": 2}')]
    assert [b.input for b in ts.assembler.tool_blocks()] == [{"x": 1}, {"y": 2}]


def test_whole_tool_call_in_one_chunk_is_named_info() -> None:
    ts, _ = run(sse(ch({"tool_calls": [tc(0, "c1", "f", '{"a": 1}')]}), ch({}, "tool_calls")))
    d = [d for d in ts.diagnostics if d.code == "openai.chat.whole_tool_call"]
    assert d and d[0].severity == "info"
    assert ts.outcome == "tool_use" and ts.assembler.tool_blocks()[0].input == {"a": 1}


def test_repeated_id_and_name_keep_the_first_where_the_sdk_doubles_them() -> None:
    data = sse(
        ch({"tool_calls": [tc(0, "call_0", "search", "")]}),
        ch({"tool_calls": [tc(0, "call_0", "search", '{"q": ')]}),
        ch({"tool_calls": [tc(0, "call_0", "search", '"x"}')]}),
        ch({}, "tool_calls"),
    )
    ts, _ = run(data)
    assert {"openai.chat.tool_id_repeated", "openai.chat.tool_name_repeated"} <= codes(ts)
    call = ts.final_object()["choices"][0]["message"]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_0", "search")
    sdk_call = sdk_chat(data)["choices"][0]["message"]["tool_calls"][0]
    assert (sdk_call["id"], sdk_call["function"]["name"]) == ("call_0" * 3, "search" * 3)  # the SDK is wrong here


def test_a_changed_id_is_a_warning_and_the_first_is_kept() -> None:
    ts, _ = run(
        sse(ch({"tool_calls": [tc(0, "a", "f", "{}")]}), ch({"tool_calls": [tc(0, "b")]}), ch({}, "tool_calls"))
    )
    assert "openai.chat.tool_id_changed" in codes(ts)
    assert ts.assembler.tool_blocks()[0].id == "a"


def test_type_null_later_is_named_and_the_type_kept() -> None:
    data = sse(
        ch({"tool_calls": [tc(0, "c", "f", "")]}),
        ch({"tool_calls": [{"index": 0, "id": None, "type": None, "function": {"arguments": "{}"}}]}),
        ch({}, "tool_calls"),
    )
    ts, _ = run(data)
    assert "openai.chat.tool_type_null" in codes(ts)
    assert ts.final_object()["choices"][0]["message"]["tool_calls"][0]["type"] == "function"


def test_an_index_starting_at_1_is_named_and_folded() -> None:
    data = sse(
        ch({"content": "Reading."}),
        ch({"tool_calls": [tc(1, "t1", "read", "")]}),
        ch({"tool_calls": [tc(1, args='{"p": "a"}')]}),
        ch({}, "tool_calls"),
    )
    ts, _ = run(data)
    assert "openai.chat.tool_index_gap" in codes(ts)
    assert ts.assembler.tool_blocks()[0].input == {"p": "a"}
    try:
        sdk_chat(data)
        raise AssertionError("the SDK accepted an index starting at 1")
    except IndexError:
        pass


def test_usage_on_a_non_final_chunk_and_empty_choices_without_usage() -> None:
    data = sse(
        {"id": "", "object": "", "created": 0, "model": "", "choices": []},
        ch({"content": "Hi"}, usage=U),
        ch({}, "stop"),
    )
    ts, _ = run(data)
    assert {"openai.chat.usage_not_final", "openai.chat.not_a_chunk"} <= codes(ts)
    ts2, _ = run(sse(ch({"content": "Hi"}), ch(choices=False), ch({}, "stop")))
    assert "openai.chat.empty_choices" in codes(ts2)
    assert ts2.outcome == "text_finish"


def test_no_done_after_every_choice_finished_is_a_warning_not_a_failure() -> None:
    ts, _ = run(sse(ch({"content": "Hi"}), ch({}, "stop"), done=False))
    d = [d for d in ts.diagnostics if d.code == "openai.chat.no_done"]
    assert d and d[0].severity == "warning"
    assert ts.outcome == "text_finish"
    assert not any(d.severity == "error" for d in ts.diagnostics)


def test_a_cut_stream_is_incomplete() -> None:
    ts, _ = run(sse(ch({"tool_calls": [tc(0, "c", "f", '{"a": ')]}), done=False))
    assert ts.outcome == "incomplete"
    assert "openai.chat.not_finished" in codes(ts)
    # the engine's end-of-stream diagnostics speak this family's words, not Anthropic's event names
    ends = {d.code: d.message for d in ts.diagnostics}
    assert ends["protocol.block_not_closed"] == (
        "block 0 (tool_use f) never got a finish_reason that completes it; its tool will not run"
    )
    assert "message_stop" not in ends["protocol.missing_message_stop"]
    assert ts.final_object()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"a": '


def test_a_tool_call_cut_by_the_token_limit_stays_open_and_will_not_run() -> None:
    """finish_reason "length" in the middle of a call's arguments: as an Anthropic tool_use cut by max_tokens, the
    call's block is not closed (its arguments are not parsed as if complete: no tool_input.invalid_json error), the
    turn is truncated, and the tool will not run; the text before it closes as usual."""
    ts, _ = run(sse(ch({"content": "Hi"}), ch({"tool_calls": [tc(0, "c", "f", '{"a": "Par')]}), ch({}, "length")))
    assert ts.outcome == "truncated"
    assert "tool_input.invalid_json" not in codes(ts)
    assert not any(d.severity == "error" for d in ts.diagnostics)
    cut = [d for d in ts.diagnostics if d.code == "protocol.block_not_closed"]
    assert [(d.severity, d.block_index) for d in cut] == [("warning", 1)]
    assert "its tool will not run" in cut[0].message
    blocks = ts.assembler.blocks
    assert blocks[0].closed and not blocks[1].closed
    assert ts.final_object()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"a": "Par'
    # a call that finished ("tool_calls") closes and is parsed, as before
    ts2, _ = run(sse(ch({"tool_calls": [tc(0, "c", "f", '{"a": 1}')]}), ch({}, "tool_calls")))
    assert ts2.assembler.blocks[0].closed and ts2.outcome == "tool_use"


def test_done_without_a_finish_reason_ends_the_choice_and_says_so() -> None:
    """Snowflake Cortex never sends finish_reason: [DONE] (sent on purpose) ends the choices, named."""
    ts, steps = run(
        sse(ch({"content": "Hi"}), ch({"tool_calls": [tc(0, "c", "f", '{"a": 1}')]}), ch(choices=False, usage=U))
    )
    d = [d for d in ts.diagnostics if d.code == "openai.chat.no_finish_reason"]
    assert d and d[0].severity == "warning"
    assert codes(ts) == {"openai.chat.no_finish_reason", "openai.chat.whole_tool_call"}
    assert ts.outcome == "tool_use" and ts.assembler.tool_blocks()[0].input == {"a": 1}
    closing = [s for s in steps if ("block_closed", 1) in s.changes]
    assert closing[0].sse.data == "[DONE]"
    assert ts.final_object()["choices"][0]["finish_reason"] is None  # as sent
    ts, _ = run(sse(ch(choices=False, usage=U)))
    assert ts.outcome == "incomplete" and "openai.chat.not_finished" in codes(ts)


def test_reasoning_content_becomes_a_thinking_block() -> None:
    ts, _ = run(sse(ch({"reasoning_content": "Hmm. "}), ch({"reasoning": "Ok."}), ch({"content": "A"}), ch({}, "stop")))
    assert "openai.chat.reasoning_delta" in codes(ts)
    blocks = [b for _, b in sorted(ts.assembler.blocks.items())]
    assert [(b.type, b.joined()) for b in blocks] == [("thinking", "Hmm. Ok."), ("text", "A")]


def test_a_top_level_error_mid_stream_is_an_error_outcome() -> None:
    data = sse(ch({"content": "Part"}), {"error": {"code": 502, "message": "Provider disconnected"}, "choices": []})
    ts, _ = run(data)
    assert ts.outcome == "error"
    d = [d for d in ts.diagnostics if d.code == "openai.error_in_stream"]
    assert d and "Provider disconnected" in d[0].message
    assert ts.final_object()["error"]["message"] == "Provider disconnected"


def test_invalid_json_and_non_object_data_are_named_and_kept() -> None:
    ts, steps = run(b"data: {not json\n\ndata: [1,2]\n\n" + sse(ch({"content": "x"}), ch({}, "stop")))
    assert {"protocol.invalid_json", "openai.not_an_object"} <= codes(ts)
    bad = [d for d in ts.diagnostics if d.code == "protocol.invalid_json"][0]
    assert bad.raw == b"{not json"
    assert ts.outcome == "text_finish"


def test_refusal_is_a_marked_text_block_and_in_the_message() -> None:
    ts, _ = run(sse(ch({"refusal": "No."}), ch({}, "stop")))
    (b,) = ts.assembler.blocks.values()
    assert b.type == "text" and b.start["openai"] == "refusal" and b.joined() == "No."
    assert ts.final_object()["choices"][0]["message"]["refusal"] == "No."


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 97), max_size=40))
def test_any_read_split_gives_the_same_steps_and_result(reads: Any) -> None:
    whole, steps_whole = run(TOOL_STREAM)
    split, steps_split = run(TOOL_STREAM, reads)
    assert [(s.sse.seq, s.event.type, s.changes) for s in steps_split] == [
        (s.sse.seq, s.event.type, s.changes) for s in steps_whole
    ]
    assert [d.code for d in split.diagnostics] == [d.code for d in whole.diagnostics]
    assert split.final_object() == whole.final_object()


CHUNKS = st.one_of(
    st.builds(lambda t, i: ch({"content": t}, idx=i), st.sampled_from(["a", "", "é", '"']), st.integers(0, 1)),
    st.builds(lambda t, i: ch({"refusal": t}, idx=i), st.sampled_from(["no", ""]), st.integers(0, 1)),
    st.builds(
        lambda k, t, i: ch({"tool_calls": [tc(k, args=t)]}, idx=i),
        st.integers(0, 2),
        st.sampled_from(['{"a"', ": 1}", "", "x"]),
        st.integers(0, 1),
    ),
    st.builds(lambda k, i: ch({"tool_calls": [tc(k, f"id{k}", "f", "")]}, idx=i), st.integers(0, 2), st.integers(0, 1)),
    st.builds(lambda fr, i: ch({}, fr, idx=i), st.sampled_from(["stop", "tool_calls", "length"]), st.integers(0, 1)),
    st.builds(lambda i: ch({"content": "u"}, idx=i, usage=U), st.integers(0, 1)),
    st.just(ch(choices=False, usage=U)),
    st.just(ch({"tool_calls": [tc(None, args="z")]})),  # no index: continues the last tool call
    st.builds(lambda t: ch({"content": t}, logprobs=None, system_fingerprint="fp"), st.sampled_from(["s", ""])),
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(CHUNKS, max_size=25), st.booleans())
@example(  # the shorter way must track the last tool call too (a delta without index continues it)
    [
        ch({"tool_calls": [tc(0, "id0", "f", "")]}),
        ch({"tool_calls": [tc(1, "id1", "g", "")]}),
        ch({"tool_calls": [tc(0, args='{"a"')]}),
        ch({"tool_calls": [tc(None, args=": 1}")]}),
        ch({}, "tool_calls"),
    ],
    True,
)
def test_the_shorter_way_for_common_chunks_gives_exactly_the_general_paths_result(chunks: Any, done: Any) -> None:
    data = sse(*chunks, done=done)
    fast, fast_steps = run(data)
    slow = ChatStream(fast=False)
    slow_steps = slow.feed(data)
    slow.close()
    assert [(s.sse.seq, s.event, s.changes, [d.code for d in s.diagnostics]) for s in fast_steps] == [
        (s.sse.seq, s.event, s.changes, [d.code for d in s.diagnostics]) for s in slow_steps
    ]
    assert fast.final_object() == slow.final_object()
    assert fast.final_message() == slow.final_message()
    assert [d.to_json() for d in fast.diagnostics] == [d.to_json() for d in slow.diagnostics]
    assert fast.outcome == slow.outcome


def test_the_deprecated_function_call_delta_is_a_tool_block() -> None:
    data = sse(
        ch({"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": ""}}),
        ch({"function_call": {"arguments": '{"q": '}}),
        ch({"function_call": {"arguments": '"x"}'}}),
        ch({}, "function_call"),
    )
    ts, _ = run(data)
    assert not ts.diagnostics and ts.outcome == "tool_use"
    (b,) = ts.assembler.blocks.values()
    assert (b.type, b.name, b.start["openai"], b.input) == ("tool_use", "lookup", "function_call", {"q": "x"})
    msg = ts.final_object()["choices"][0]["message"]
    assert msg["function_call"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    assert sdk_chat(data)["choices"][0]["message"]["function_call"] == msg["function_call"]

"""Responses streams through the neutral engine: output items, content parts, function-call arguments complete (and
parsed once) at their .done, reasoning summaries, refusals, custom tool input, the terminal events, and each quirk
(.done with no deltas, a .done that disagrees, [DONE], a changed id) as a named diagnostic."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.stream.assembler import Change, Step
from inspector.stream.openai_responses import ResponsesStream
from inspector.testing.hyp import examples
from inspector.testing.openai_ref import sdk_response, sse

RU = {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
FCD = dict(FC, arguments='{"city":"Oslo"}', status="completed")
MSG = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
MSGD = dict(MSG, status="completed", content=[{"type": "output_text", "text": "Hi there", "annotations": []}])


class Seq:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, t: str, **kw: Any) -> dict[str, Any]:
        d = {"type": t, **kw, "sequence_number": self.n}
        self.n += 1
        return d


def resp(status: Any = "in_progress", output: Any = None, **kw: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "model": "gpt-x", "output": output or [], **kw}


def run(data: bytes, reads: list[int] | None = None) -> tuple[ResponsesStream, list[Step]]:
    ts = ResponsesStream()
    steps: list[Step] = []
    pos = 0
    for n in reads or []:
        steps += ts.feed(data[pos : pos + n])
        pos += n
    steps += ts.feed(data[pos:])
    ts.close()
    return ts, steps


def codes(ts: Any) -> set[str]:
    return {d.code for d in ts.diagnostics}


def text_and_tool(args_done: Any = '{"city":"Oslo"}', text_done: Any = "Hi there", deltas: Any = True) -> bytes:
    r = Seq()
    ev = [r("response.created", response=resp()), r("response.in_progress", response=resp())]
    ev += [r("response.output_item.added", output_index=0, item=MSG)]
    ev += [r("response.content_part.added", output_index=0, content_index=0, part={"type": "output_text", "text": ""})]
    ev += [r("response.output_text.delta", output_index=0, content_index=0, delta="Hi ")]
    ev += [r("response.output_text.delta", output_index=0, content_index=0, delta="there")]
    ev += [r("response.output_text.done", output_index=0, content_index=0, text=text_done)]
    ev += [r("response.output_item.done", output_index=0, item=MSGD)]
    ev += [r("response.output_item.added", output_index=1, item=FC)]
    if deltas:
        ev += [r("response.function_call_arguments.delta", output_index=1, item_id="fc_1", delta='{"city":')]
        ev += [r("response.function_call_arguments.delta", output_index=1, item_id="fc_1", delta='"Oslo"}')]
    ev += [r("response.function_call_arguments.done", output_index=1, item_id="fc_1", arguments=args_done)]
    ev += [r("response.output_item.done", output_index=1, item=FCD)]
    ev += [r("response.completed", response=resp("completed", [MSGD, FCD], usage=RU))]
    return sse(*ev, done=False, events=True)


def test_items_parts_and_a_function_call_complete_at_its_done() -> None:
    data = text_and_tool()
    ts, steps = run(data)
    assert ts.outcome == "tool_use" and not ts.diagnostics
    blocks = [b for _, b in sorted(ts.assembler.blocks.items())]
    assert [(b.type, b.joined()) for b in blocks] == [("text", "Hi there"), ("tool_use", '{"city":"Oslo"}')]
    tool = blocks[1]
    assert (tool.id, tool.name, tool.input) == ("call_1", "get_weather", {"city": "Oslo"})
    closed_at = [s.event.type for s in steps if ("block_closed", 1) in s.changes]
    assert closed_at == ["content_block_stop"]
    closing = [s for s in steps if ("block_closed", 1) in s.changes][0]
    assert closing.sse.event == "response.function_call_arguments.done"
    final = ts.final_object()
    assert final["object"] == "response" and final["status"] == "completed"
    assert [o["type"] for o in final["output"]] == ["message", "function_call"]
    assert ts.final_message()["usage"] == {"input_tokens": 5, "output_tokens": 7}
    sdk_final, _ = sdk_response(data)
    assert sdk_final["output"][1]["arguments"] == final["output"][1]["arguments"]


def test_arguments_done_without_deltas_fills_the_block_and_is_named() -> None:
    ts, _ = run(text_and_tool(deltas=False))
    assert "openai.responses.done_without_deltas" in codes(ts)
    assert ts.assembler.tool_blocks()[0].input == {"city": "Oslo"}
    assert ts.outcome == "tool_use"


def test_a_done_text_that_disagrees_with_its_deltas_is_named_and_the_deltas_kept() -> None:
    ts, _ = run(text_and_tool(text_done="Hi thar"))
    d = [d for d in ts.diagnostics if d.code == "openai.responses.done_mismatch"]
    assert d and d[0].raw == b"Hi thar"
    assert ts.assembler.blocks[0].joined() == "Hi there"
    ts2, _ = run(text_and_tool(args_done='{"city":"Bergen"}'))
    d2 = [d for d in ts2.diagnostics if d.code == "openai.responses.done_mismatch"]
    assert d2 and d2[0].severity == "error"  # a tool call whose arguments are in doubt


def test_reasoning_summary_refusal_and_custom_tool_input() -> None:
    r = Seq()
    ev = [r("response.created", response=resp())]
    ev += [r("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs", "summary": []})]
    ev += [r("response.reasoning_summary_part.added", output_index=0, summary_index=0, part={"type": "summary_text"})]
    ev += [r("response.reasoning_summary_text.delta", output_index=0, summary_index=0, delta="Plan.")]
    ev += [r("response.reasoning_summary_text.done", output_index=0, summary_index=0, text="Plan.")]
    ev += [r("response.output_item.done", output_index=0, item={"type": "reasoning", "id": "rs", "summary": []})]
    ev += [r("response.output_item.added", output_index=1, item=MSG)]
    ev += [r("response.content_part.added", output_index=1, content_index=0, part={"type": "refusal", "refusal": ""})]
    ev += [r("response.refusal.delta", output_index=1, content_index=0, delta="No.")]
    ev += [r("response.refusal.done", output_index=1, content_index=0, refusal="No.")]
    ev += [r("response.output_item.done", output_index=1, item=MSG)]
    ct = {"type": "custom_tool_call", "id": "ct", "call_id": "c2", "name": "sql", "input": ""}
    ev += [r("response.output_item.added", output_index=2, item=ct)]
    ev += [r("response.custom_tool_call_input.delta", output_index=2, delta="SELECT 1")]
    ev += [r("response.custom_tool_call_input.done", output_index=2, input="SELECT 1")]
    ev += [r("response.output_item.done", output_index=2, item=dict(ct, input="SELECT 1"))]
    no_output = {k: v for k, v in resp("completed").items() if k != "output"}
    ev += [r("response.completed", response=no_output)]
    ts, _ = run(sse(*ev, done=False))
    blocks = [b for _, b in sorted(ts.assembler.blocks.items())]
    assert [(b.type, b.start.get("openai"), b.joined(), b.closed) for b in blocks] == [
        ("thinking", None, "Plan.", True),
        ("text", "refusal", "No.", True),
        ("text", "custom_tool_call", "SELECT 1", True),
    ]
    assert not ts.diagnostics and ts.outcome == "text_finish"
    # response.completed with no output: recovered from the output_item.done items (as the SDK does)
    assert [o["type"] for o in ts.final_object()["output"]] == ["reasoning", "message", "custom_tool_call"]


def test_incomplete_failed_and_error_events() -> None:
    r = Seq()
    inc = sse(
        r("response.created", response=resp()),
        r("response.output_item.added", output_index=0, item=FC),
        r("response.function_call_arguments.delta", output_index=0, delta='{"city":'),
        r("response.incomplete", response=resp("incomplete", incomplete_details={"reason": "max_output_tokens"})),
        done=False,
    )
    ts, _ = run(inc)
    assert ts.outcome == "truncated" and "openai.responses.incomplete" in codes(ts)
    r = Seq()
    err = {"code": "server_error", "message": "boom"}
    ts, _ = run(sse(r("response.created", response=resp()), r("response.failed", response=resp("failed", error=err))))
    assert ts.outcome == "error" and "openai.responses.failed" in codes(ts)
    r = Seq()
    quota = {"type": "insufficient_quota", "message": "You exceeded your current quota"}
    ts, _ = run(sse(r("response.created", response=resp()), r("error", error=quota), done=False))
    assert ts.outcome == "error"
    assert any("insufficient_quota" in d.message for d in ts.diagnostics if d.code == "openai.error_in_stream")


def test_no_terminal_event_is_incomplete() -> None:
    r = Seq()
    ts, _ = run(sse(r("response.created", response=resp()), r("response.output_item.added", output_index=0, item=FC)))
    assert ts.outcome == "incomplete"
    assert {"openai.responses.no_terminal_event", "openai.done_marker"} <= codes(ts)
    assert ts.final_object()["output"][0]["arguments"] == ""


def test_first_event_sequence_gap_and_id_change_are_named() -> None:
    r = Seq()
    ev = [r("response.in_progress", response=resp())]
    r.n += 3
    ev += [r("response.completed", response=dict(resp("completed"), id="resp_2"))]
    ts, _ = run(sse(*ev, done=False))
    assert {"openai.responses.first_event", "openai.responses.sequence_gap", "openai.responses.id_changed"} <= codes(ts)


def test_an_event_for_an_item_never_added_is_named() -> None:
    r = Seq()
    ev = [r("response.created", response=resp()), r("response.output_text.delta", output_index=4, delta="x")]
    ts, _ = run(sse(*ev, done=False))
    assert "openai.responses.unknown_reference" in codes(ts)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 211), max_size=30))
def test_any_read_split_gives_the_same_steps_and_result(reads: Any) -> None:
    data = text_and_tool()
    whole, s1 = run(data)
    split, s2 = run(data, reads)
    assert [(s.sse.seq, s.event.type, s.changes) for s in s2] == [(s.sse.seq, s.event.type, s.changes) for s in s1]
    assert split.final_object() == whole.final_object()
    assert [d.code for d in split.diagnostics] == [d.code for d in whole.diagnostics]


def _event_strategy() -> Any:
    """Events of a small Responses stream, in any order (with gaps, repeats and wrong sequence numbers)."""
    part = {"type": "output_text", "text": ""}
    return st.one_of(
        st.builds(lambda: ("response.created", {"response": resp()})),
        st.builds(
            lambda o: ("response.output_item.added", {"output_index": o, "item": FC if o else MSG}), st.integers(0, 1)
        ),
        st.builds(lambda: ("response.content_part.added", {"output_index": 0, "content_index": 0, "part": part})),
        st.builds(
            lambda o, c, t: ("response.output_text.delta", {"output_index": o, "content_index": c, "delta": t}),
            st.integers(0, 1),
            st.sampled_from([0, 1, None]),
            st.sampled_from(["a", "", "é"]),
        ),
        st.builds(
            lambda o, t: ("response.function_call_arguments.delta", {"output_index": o, "delta": t}),
            st.integers(0, 1),
            st.sampled_from(['{"a":', "1}", ""]),
        ),
        st.builds(lambda: ("response.output_text.done", {"output_index": 0, "content_index": 0, "text": "a"})),
        st.builds(lambda: ("response.function_call_arguments.done", {"output_index": 1, "arguments": '{"a":1}'})),
        st.builds(
            lambda o: ("response.output_item.done", {"output_index": o, "item": FCD if o else MSGD}), st.integers(0, 1)
        ),
        st.builds(lambda: ("response.completed", {"response": resp("completed", [MSGD, FCD])})),
        st.builds(lambda: ("error", {"error": {"type": "x", "message": "m"}})),
    )


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(_event_strategy(), st.sampled_from(["next", "same", "none"]), st.booleans()), max_size=25))
def test_the_shorter_way_for_deltas_gives_exactly_the_general_paths_result(evs: Any) -> None:
    out, n = [], 0
    for (t, payload), seqmode, named in evs:
        d = {"type": t, **payload}
        if seqmode != "none":
            d["sequence_number"] = n
            n += 1 if seqmode == "next" else 0
        out.append((f"event: {t}\n".encode() if named else b"") + b"data: " + orjson.dumps(d) + b"\n\n")
    data = b"".join(out)
    fast, fast_steps = run(data)
    slow = ResponsesStream(fast=False)
    slow_steps = slow.feed(data)
    slow.close()

    def view(steps: list[Step]) -> list[tuple[int, object, list[Change], list[str]]]:
        return [(s.sse.seq, s.event, s.changes, [d.code for d in s.diagnostics]) for s in steps]

    assert view(fast_steps) == view(slow_steps)
    assert fast.final_object() == slow.final_object()
    assert [d.to_json() for d in fast.diagnostics] == [d.to_json() for d in slow.diagnostics]
    assert fast.outcome == slow.outcome


def test_an_item_renamed_in_the_terminal_response_is_named() -> None:
    r = Seq()
    item = {"type": "reasoning", "id": "rs_a", "summary": []}
    ev = [r("response.created", response=resp()), r("response.output_item.added", output_index=0, item=item)]
    ev += [r("response.output_item.done", output_index=0, item=item)]
    ev += [r("response.completed", response=resp("completed", [dict(item, id="rs_b")]))]
    ts, _ = run(sse(*ev, done=False))
    d = [d for d in ts.diagnostics if d.code == "openai.responses.id_changed"]
    assert d and "rs_b" in d[0].message and "rs_a" in d[0].message
    assert ts.final_object()["output"][0]["id"] == "rs_b"  # the final object is the terminal event's, as the SDK's

"""Faults at the rendering level: ``split_events`` cuts inside every event (no read carries a whole event, the SDK
still gets the same messages), and the in-process servers render through ScenarioServer's ``render`` hook."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from anthropic.types import Message, MessageParam, ToolResultBlockParam

from inspector.core.pacing import Pacer
from inspector.net.faults import apply_faults, first_stream_attempt, render_faulted
from inspector.net.inprocess import FaultedScenarioServer
from inspector.scenarios.bundled import SCENARIOS, get_scenario
from inspector.scenarios.model import Pacing, Scenario, TextBlock, ToolUseBlock, TurnScript
from inspector.scenarios.render import SPLIT_STEP, ResponsePlan, render_turn
from inspector.scenarios.transport import ScenarioServer, make_client

ALL_SCENARIOS = sorted(SCENARIOS)


def event_spans(body: bytes, line_ending: str) -> list[tuple[int, int]]:
    """(start, end) of every complete event in the body: end is just past its terminating blank line."""
    term = line_ending.encode() * 2
    spans, pos = [], 0
    while (at := body.find(term, pos)) >= 0:
        spans.append((pos, at + len(term)))
        pos = at + len(term)
    return spans


def read_spans(plan: ResponsePlan) -> list[tuple[int, int]]:
    out, pos = [], 0
    for r in plan.reads:
        out.append((pos, pos + len(r.data)))
        pos += len(r.data)
    return out


def streamed_attempts(sc: Scenario, turn: int) -> list[int]:
    """The attempts of a turn worth checking: the first one that streams (after any HTTP errors) and its retry."""
    first = first_stream_attempt(sc.turns[turn])
    return [first, first + 1]


CASES = [(name, t) for name in ALL_SCENARIOS for t in range(len(SCENARIOS[name].turns))]


@pytest.mark.parametrize("name,turn", CASES)
def test_split_events_leaves_no_whole_event_in_any_read(name: str, turn: int) -> None:
    sc = get_scenario(name)
    faulted = apply_faults(sc, "split_events")
    assert faulted.turns[turn].pacing.split_events
    le = faulted.turns[turn].pacing.line_ending
    for attempt in streamed_attempts(faulted, turn):
        plan = render_faulted(sc, "split_events", turn, attempt)
        ref = render_turn(sc, turn, attempt)
        assert plan.status == ref.status == 200
        # the same bytes, the same events, the same total time; only the read boundaries moved
        assert plan.body == ref.body and plan.events == ref.events and plan.end == ref.end
        assert plan.total_delay == pytest.approx(ref.total_delay)
        assert all(r.delay >= 0 for r in plan.reads)
        events = event_spans(plan.body, le)
        assert len(events) == len(ref.events)  # every complete event found (pings and error included)
        reads = read_spans(plan)
        read_starts = [a for a, _ in reads]
        for start, end in events:
            a, b = reads[bisect.bisect_right(read_starts, start) - 1]  # the read holding the event's start
            assert a <= start < b
            # the read holding the event's start ends before its terminating blank line begins
            assert b <= end - len(le), (name, turn, attempt, start, end, "a read holds a whole event")


def test_split_events_cuts_every_event_even_with_many_events_per_read() -> None:
    """The old fault cut each read once: with 40 events per read, 39 of them still arrived whole."""
    sc = get_scenario("big_input")
    assert sc.turns[0].pacing.events_per_read == 40
    plan = render_faulted(sc, "split_events", 0, 0)
    n_events = len(plan.events)
    assert len(plan.reads) >= n_events  # at least one read boundary inside every event


def test_split_events_after_a_buffering_relay_keeps_the_burst() -> None:
    """proxy_buffered holds everything until EOF: the split pieces still come together at the end (< BURST_GAP)."""
    from inspector.record.timing import BURST_GAP

    sc = get_scenario("proxy_buffered")
    plan = render_faulted(sc, "split_events", 0, 0)
    ref = render_turn(sc, 0, 0)
    assert len(ref.reads) == 1 and len(plan.reads) > len(plan.events)
    assert plan.reads[0].delay == pytest.approx(ref.reads[0].delay - sum(r.delay for r in plan.reads[1:]))
    assert all(r.delay <= SPLIT_STEP < BURST_GAP for r in plan.reads[1:])


def test_split_events_is_deterministic_and_seeded() -> None:
    sc = get_scenario("parse_date")
    a = render_faulted(sc, "split_events", 1, 0)
    b = render_faulted(sc, "split_events", 1, 0)
    assert [(r.delay, r.data) for r in a.reads] == [(r.delay, r.data) for r in b.reads]
    other = dataclasses.replace(sc, seed=sc.seed + 1)
    c = render_faulted(other, "split_events", 1, 0)
    assert [len(r.data) for r in c.reads] != [len(r.data) for r in a.reads]


def test_split_events_can_cut_inside_a_utf8_character() -> None:
    text = "é" * 400  # every other byte is inside a character
    sc = Scenario(
        name="utf8",
        description="utf-8",
        prompt="hi",
        seed=3,
        turns=[TurnScript(blocks=[TextBlock(text, chunk=50)], pacing=Pacing(events_per_read=3, split_events=True))],
    )
    plan = render_turn(sc, 0, 0)
    mid_char = 0
    for r in plan.reads[:-1]:
        try:
            r.data.decode("utf-8")
        except UnicodeDecodeError:
            mid_char += 1
    assert mid_char > 0


def test_split_events_cuts_a_drop_mid_event_too() -> None:
    sc = get_scenario("drop_mid_json")
    plan = render_faulted(sc, "split_events", 0, 0)
    assert plan.end == "drop" and plan.body == render_turn(sc, 0, 0).body


# --- the SDK still gets the same messages ------------------------------------------------------------------------


def _results_for(message: Message) -> list[ToolResultBlockParam]:
    return [
        {"type": "tool_result", "tool_use_id": b.id, "content": f"result of {b.name}"}
        for b in message.content
        if b.type in ("tool_use",)
    ]


async def converse(
    server: ScenarioServer, sc: Scenario, render: Callable[[Scenario, int, int], ResponsePlan]
) -> list[Any]:
    """A harness's conversation through the SDK: per turn up to 4 tries (the SDK retries HTTP errors itself),
    tool results sent back. Returns what each try ended with: the final message (as JSON) or the error type."""
    client = make_client(server, max_retries=2)
    messages: list[MessageParam] = [{"role": "user", "content": sc.prompt}]
    outcomes: list[Any] = []
    try:
        for turn in range(len(sc.turns)):
            final = None
            for _ in range(4):
                attempt = server.attempts.get(turn, 0)
                while sc.turns[turn].http_error_for(attempt) is not None:  # answered by an HTTP error, retried
                    attempt += 1
                hangs = render(sc, turn, attempt).end == "hang"
                try:
                    async with client.messages.stream(messages=messages, **sc.request_params()) as stream:
                        if hangs:  # a stall: the harness's idle timeout gives up
                            await asyncio.wait_for(stream.get_final_message(), 0.3)
                        final = await stream.get_final_message()
                    outcomes.append(("message", final.model_dump(mode="json")))
                    break
                except (TimeoutError, anthropic.APIError, httpx2.HTTPError) as e:
                    outcomes.append(("error", type(e).__name__))
            assert final is not None, (sc.name, turn)
            messages.append({"role": "assistant", "content": final.model_dump(mode="json")["content"]})
            if turn + 1 < len(sc.turns):
                results = _results_for(final)
                messages.append({"role": "user", "content": results or "go on"})
    finally:
        await client.close()
    return outcomes


@pytest.mark.parametrize("name", ALL_SCENARIOS)
async def test_sdk_parses_split_streams_to_the_same_messages(name: str) -> None:
    sc = get_scenario(name)
    plain = ScenarioServer(sc, Pacer(math.inf))
    split = FaultedScenarioServer(sc, "split_events", Pacer(math.inf))
    want = await converse(plain, sc, render_turn)
    got = await converse(split, split.scenario, split.render_plan)
    assert got == want
    assert any(kind == "message" for kind, _ in got)
    for served in split.responses:  # what the SDK read really was split inside every event
        if served.status == 200:
            assert served.plan is not None
            assert len(served.plan.reads) >= len(served.plan.events)


# --- the render hook ----------------------------------------------------------------------------------------------


async def test_scenario_server_renders_through_its_render_hook() -> None:
    sc = get_scenario("weather")
    calls = []

    def render(scenario: Scenario, turn: int, attempt: int, seed: str = "") -> ResponsePlan:
        calls.append((scenario.name, turn, attempt))
        plan = render_turn(scenario, turn, attempt, seed)
        return dataclasses.replace(plan, reads=plan.reads[:1], end="eof")

    server = ScenarioServer(sc, Pacer(math.inf), render=render)
    client = make_client(server, max_retries=0)
    try:
        async with client.messages.with_streaming_response.create(
            messages=[{"role": "user", "content": sc.prompt}], stream=True, **sc.request_params()
        ) as r:
            body = await r.read()
    finally:
        await client.close()
    assert calls == [("weather", 0, 0)]
    assert body == render_turn(sc, 0, 0).reads[0].data
    plan = server.responses[-1].plan
    assert plan is not None and plan.reads == render_turn(sc, 0, 0).reads[:1]


def test_faulted_server_passes_its_renderer_instead_of_swapping_responses() -> None:
    assert FaultedScenarioServer.handler is ScenarioServer.handler
    server = FaultedScenarioServer(get_scenario("parse_date"), "bom,split_events", Pacer(math.inf))
    assert server.render == server.render_plan
    plan = server.render(server.scenario, 0, 0)
    want = render_faulted(get_scenario("parse_date"), "bom,split_events", 0, 0)
    assert [(r.delay, r.data) for r in plan.reads] == [(r.delay, r.data) for r in want.reads]


def test_response_plan_has_no_unused_is_stream() -> None:
    assert not hasattr(ResponsePlan, "is_stream")


def test_tool_blocks_split_too() -> None:
    sc = Scenario(
        name="tools",
        description="tools",
        prompt="hi",
        seed=9,
        turns=[
            TurnScript(
                blocks=[ToolUseBlock("read_file", {"path": "ü/ß/" * 20})],
                pacing=Pacing(events_per_read=5, split_events=True),
            )
        ],
        tools=["read_file"],
    )
    plan = render_turn(sc, 0, 0)
    for start, end in event_spans(plan.body, "\n"):
        assert not any(a <= start and end <= b for a, b in read_spans(plan))


# ----------------------------------------------------------------------------------------------- interleave_blocks


def _tool_delta_order(events: list[tuple[str, dict[str, Any]]]) -> list[int]:
    return [
        d["index"] for name, d in events if name == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]


def test_parallel_buffers_streams_two_tool_blocks_side_by_side() -> None:
    """Issue 18 §4: two tool blocks open at once, their input_json_delta's alternating by index."""
    events = render_turn(get_scenario("parallel_buffers"), 0).events
    names = [(n, d.get("index")) for n, d in events if n.startswith("content_block")]
    first_delta = next(i for i, (n, idx) in enumerate(names) if n == "content_block_delta" and idx in (1, 2))
    assert ("content_block_start", 1) in names[:first_delta] and ("content_block_start", 2) in names[:first_delta]
    order = _tool_delta_order(events)
    shared = 2 * min(order.count(1), order.count(2))
    assert order[:shared] == [1, 2] * (shared // 2) and shared >= 8
    # each block stops after its own last delta, and only then
    for idx in (1, 2):
        stop = names.index(("content_block_stop", idx))
        last = max(i for i, (n, j) in enumerate(names) if n == "content_block_delta" and j == idx)
        assert stop == last + 1 or names[last + 1][1] != idx


def test_interleaved_inputs_need_one_buffer_per_index() -> None:
    """The SDK's accumulator (keyed by index) gets both inputs; a harness with one current buffer does not."""
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    sc = get_scenario("parallel_buffers")
    events = render_turn(sc, 0).events
    adapter = TypeAdapter(RawMessageStreamEvent)
    snapshot = None
    json_bufs: dict[int, bytes] = {}  # (the SDK keeps one JSON buffer per index)
    for name, data in events:
        if name != "ping":
            event = adapter.validate_python(data)
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    inputs = [b.input for b in snapshot.content if b.type == "tool_use"]
    assert inputs == [{"location": "Paris, France", "unit": "celsius"}, {"location": "Tokyo, Japan", "unit": "celsius"}]
    # one buffer, appended to by whatever block opened last: the inputs are mixed and do not parse
    current, buffers = None, {}
    for name, data in events:
        if name == "content_block_start" and data["content_block"]["type"] == "tool_use":
            current = data["index"]
            buffers[current] = ""
        elif name == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
            buffers[current] += data["delta"]["partial_json"]
    with pytest.raises(ValueError):
        orjson.loads(buffers[2])


def test_interleave_blocks_fault_leaves_other_turns_and_scenarios_alone() -> None:
    from inspector.net.faults import apply_faults

    weather = get_scenario("weather")  # one tool block: nothing to interleave
    assert render_turn(apply_faults(weather, "interleave_blocks"), 0).body == render_turn(weather, 0).body
    parse_date = get_scenario("parse_date")  # several consecutive tool blocks: same events, other order
    plain, faulted = (
        render_turn(parse_date, 0).events,
        render_turn(apply_faults(parse_date, "interleave_blocks"), 0).events,
    )
    key = lambda e: orjson.dumps(e, option=orjson.OPT_SORT_KEYS)
    assert sorted(map(key, plain)) == sorted(map(key, faulted)) and plain != faulted
    assert len(set(_tool_delta_order(faulted)[:6])) > 1

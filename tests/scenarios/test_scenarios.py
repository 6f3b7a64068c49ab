"""Scenarios: deterministic rendering, valid SSE through the real SDK, faults, transport bookkeeping, pacing."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
import math
import shutil
from collections.abc import Awaitable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import anthropic
import httpx2
import pytest
from anthropic import types as sdk
from anthropic._streaming import SSEDecoder
from anthropic.types import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.agent.toolbox.spec import ToolSpec
from inspector.core.errors import UnknownScenario
from inspector.core.pacing import SPEED_LADDER, Pacer, speed_label
from inspector.scenarios.bundled import BIG_CSV, SCENARIOS, get_scenario
from inspector.scenarios.model import (
    Block,
    DropAfter,
    ErrorEventAfter,
    Fault,
    InvalidToolJson,
    Pacing,
    RedactedThinkingBlock,
    Scenario,
    ServerToolUseBlock,
    Sizes,
    StallWithPings,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    TurnScript,
    WholeBlock,
)
from inspector.scenarios.render import (
    expected_blocks,
    expected_stop_reason,
    render_turn,
    render_turn_events,
    truncate_json,
)
from inspector.scenarios.transport import DROP_MESSAGE, ScenarioServer, history_problem, make_client
from inspector.testing.clock import VirtualTime
from inspector.testing.hyp import examples

ALL = sorted(SCENARIOS)
TIMEOUT = 20.0  # a bound on waits that should end at once (a hang guard, never a timing assertion)


def fast_server(scenario: Scenario, **kw: Any) -> ScenarioServer:
    return ScenarioServer(scenario, Pacer(math.inf), **kw)


def all_attempts(scenario: Scenario) -> list[tuple[int, int]]:
    """(turn, attempt) pairs worth rendering: attempt 0 and 1 of every turn."""
    return [(t, a) for t in range(len(scenario.turns)) for a in (0, 1)]


def successful_attempt(scenario: Scenario, turn: int) -> int:
    """The first attempt of a turn that streams to the end (no HTTP error, no transport fault)."""
    ts = scenario.turns[turn]
    for a in range(5):
        if ts.http_error_for(a) is None and not any(
            isinstance(f, (ErrorEventAfter, DropAfter, StallWithPings)) for f in ts.faults_for(a)
        ):
            return a
    raise AssertionError("no successful attempt")


def sse_events(data_chunks: Iterable[bytes]) -> list[tuple[str | None, str]]:
    return [(e.event, e.data) for e in SSEDecoder().iter_bytes(iter(data_chunks))]


def tool_results_for(message: Message) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": "(scripted)"}
            for b in message.content
            if b.type == "tool_use"
        ],
    }


async def stream_once(client: anthropic.AsyncAnthropic, scenario: Scenario, messages: list[Any]) -> Message:
    async with client.messages.stream(messages=messages, **scenario.request_params()) as stream:
        return await stream.get_final_message()


def compare_with_script(message: Message, scenario: Scenario, turn: int, attempt: int) -> None:
    want = expected_blocks(scenario, turn, attempt)
    assert len(message.content) == len(want)
    for got, exp in zip(message.content, want, strict=True):
        assert got.type == exp["type"]
        if exp["type"] == "text":
            assert isinstance(got, sdk.TextBlock) and got.text == exp["text"]
        elif exp["type"] == "thinking":
            assert isinstance(got, sdk.ThinkingBlock)
            assert got.thinking == exp["thinking"] and got.signature == exp["signature"]
        elif exp["type"] == "redacted_thinking":
            assert isinstance(got, sdk.RedactedThinkingBlock) and got.data == exp["data"]
        elif exp["type"] in ("tool_use", "server_tool_use"):
            assert isinstance(got, (sdk.ToolUseBlock, sdk.ServerToolUseBlock))
            assert got.id == exp["id"] and got.name == exp["name"]
            if exp["complete"] and exp["input"] is not None:
                assert got.input == exp["input"]
    assert message.stop_reason == expected_stop_reason(scenario, turn, attempt)


# --- the catalogue ---------------------------------------------------------------------------------------------


def test_catalogue_and_get_scenario() -> None:
    assert "parse_date" in SCENARIOS
    for name in (
        "weather",
        "thinking",
        "big_input",
        "exclusive_mix",
        "overloaded_midstream",
        "drop_mid_json",
        "stall_with_pings",
        "invalid_json",
        "max_tokens_cut",
        "rate_limited",
        "tool_raises",
        "tool_hangs",
    ):
        assert get_scenario(name).name == name
    with pytest.raises(UnknownScenario) as e:
        get_scenario("nope")
    assert "nope" in str(e.value) and "parse_date" in str(e.value) and "tool_hangs" in str(e.value)


@pytest.mark.parametrize("name", ALL)
def test_scenario_is_coherent(name: str) -> None:
    s = SCENARIOS[name]
    assert s.description and "\n" not in s.description
    assert s.expected["status"] in ("finished", "error", "cancelled")
    n_tool_calls = 0
    for ti, turn in enumerate(s.turns):
        a = successful_attempt(s, ti)
        blocks = expected_blocks(s, ti, a)
        n_tool_calls += sum(1 for b in blocks if b["type"] == "tool_use")
        for b in blocks:  # files the scripted calls read exist in the bundled workspace
            if b["type"] == "tool_use" and b["name"] == "read_file" and b["input"]:
                assert (s.workspace_path / b["input"]["path"]).is_file(), b["input"]
    assert len(s.expected["tool_calls"]) == n_tool_calls
    if any(b.name == "write_file" for t in s.turns for _, b in t.tool_blocks()):
        assert s.allow_write and s.workspace_copy


def test_scenario_validation() -> None:
    with pytest.raises(ValueError, match="not offered"):
        Scenario("x", "d", "p", [TurnScript([ToolUseBlock("read_file", {"path": "a"})])])
    with pytest.raises(ValueError, match="one line"):
        Scenario("x", "two\nlines", "p", [TurnScript([TextBlock("hi")])])
    with pytest.raises(ValueError, match="workspace_copy"):
        Scenario(
            "x",
            "d",
            "p",
            [TurnScript([TextBlock("hi")])],
            tools=["write_file"],
            workspace="parse_date",
            allow_write=True,
        )
    with pytest.raises(ValueError, match="exactly one"):
        DropAfter()


def test_parse_date_demo_shape() -> None:
    s = get_scenario("parse_date")
    t0 = expected_blocks(s, 0)
    assert t0[0]["text"] == "I'll run the tests, then look at the parser, its tests and the changelog."
    assert t0[1]["name"] == "run_tests" and t0[1]["input"] == {"select": "tests/test_dates.py"}
    assert [b["input"]["path"] for b in t0[2:]] == ["src/dates.py", "tests/test_dates.py", "CHANGELOG.md"]
    assert expected_stop_reason(s, 0) == "tool_use" and expected_stop_reason(s, 1) == "end_turn"
    assert "```python" in expected_blocks(s, 1)[0]["text"]
    total = sum(render_turn(s, t).total_delay for t in range(2))
    assert 5.0 <= total <= 8.0
    # realistic: pings, padding, empty first partial_json, fragments of 8-20 characters
    events = render_turn_events(s, 0)
    assert ("ping", {"type": "ping"}) in render_turn_events(s, 1)
    frags = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]
    assert frags.count("") == 4
    assert all(1 <= len(f) <= 20 for f in frags if f)
    assert b"}  " in render_turn(s, 0).body or b"} \n" in render_turn(s, 0).body


def test_parse_date_workspace_has_the_bug() -> None:
    root = get_scenario("parse_date").workspace_path
    assert root is not None
    src = (root / "src" / "dates.py").read_text()
    assert "_MONTHS[month_name.lower()]" in src
    assert (root / "tests" / "test_dates.py").is_file() and (root / "CHANGELOG.md").is_file()


def test_workspace_copy(tmp_path: Path) -> None:
    s = get_scenario("big_input")
    root = s.workspace_root(tmp_path)
    assert root is not None and s.workspace_path is not None
    try:
        assert root != s.workspace_path and (root / "src" / "dates.py").is_file()
        (root / "NEW.md").write_text("x")
        assert not (s.workspace_path / "NEW.md").exists()
    finally:
        shutil.rmtree(root.parent)
    assert get_scenario("parse_date").workspace_root() == get_scenario("parse_date").workspace_path


def test_big_input_is_about_200_kb() -> None:
    s = get_scenario("big_input")
    block = expected_blocks(s, 0)[1]
    assert block["input"]["content"] == BIG_CSV
    assert 200_000 <= len(BIG_CSV.encode()) <= 220_000
    n_frags = sum(1 for n, d in render_turn_events(s, 0) if n == "content_block_delta" and d["index"] == 1)
    assert n_frags > 10_000


def test_resolve_tools_extra_and_timeouts() -> None:
    hangs = get_scenario("tool_hangs")
    pytest.importorskip("inspector.agent.toolbox.builtin")
    specs = hangs.resolve_tools(hangs.workspace_path)
    assert list(specs) == ["read_file", "wait_for_ci"]
    assert specs["wait_for_ci"].timeout == 1.5
    assert get_scenario("tool_hangs").simulated_tools[0].hang is True
    weather = get_scenario("weather").resolve_tools(None)
    assert list(weather) == ["get_weather"]
    assert _run(weather["get_weather"].fn({"location": "Paris, France"}))["temperature"] == 18
    assert _run(weather["get_weather"].fn({"location": "Oslo, Norway"}))["temperature"] == 20
    params = get_scenario("invalid_json").request_params()
    assert params["tools"][0]["eager_input_streaming"] is True
    assert get_scenario("thinking").request_params()["thinking"]["budget_tokens"] == 2048


def _run(call: object) -> Any:
    """Runs what a simulated tool's fn returned: a coroutine (ToolSpec.fn may be sync; these tools are async)."""
    assert inspect.iscoroutine(call), call
    return asyncio.run(call)


def test_simulated_tools_behave() -> None:
    raises = get_scenario("tool_raises")
    with pytest.raises(RuntimeError, match="pytest could not start"):
        _run(raises.resolve_tools(raises.workspace_path)["run_tests"].fn({}))

    async def go() -> None:
        hangs = get_scenario("tool_hangs")
        fn = hangs.resolve_tools(hangs.workspace_path)["wait_for_ci"].fn
        task = asyncio.ensure_future(fn({"branch": "main"}))
        for _ in range(200):  # many event-loop turns, no timer: the tool never answers
            await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())


# --- rendering -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_render_is_deterministic(name: str) -> None:
    s = SCENARIOS[name]
    for t, a in all_attempts(s):
        p1, p2 = render_turn(s, t, a), render_turn(s, t, a)
        assert p1.body == p2.body and p1.reads == p2.reads and p1.headers == p2.headers and p1.end == p2.end
    other = dataclasses.replace(s, seed=s.seed + 1)
    for t in range(len(s.turns)):
        a = successful_attempt(s, t)
        mine, theirs = expected_blocks(s, t, a), expected_blocks(other, t, a)
        ids = [b["id"] for b in mine if "id" in b]
        assert ids != [b["id"] for b in theirs if "id" in b] or not ids
        assert render_turn(s, t, a).body != render_turn(other, t, a).body
        assert (
            render_turn(s, t, a).events[0][1]["message"]["id"] != render_turn(other, t, a).events[0][1]["message"]["id"]
        )


@pytest.mark.parametrize("name", ALL)
def test_rendered_bodies_are_valid_sse(name: str) -> None:
    s = SCENARIOS[name]
    for t, a in all_attempts(s):
        plan = render_turn(s, t, a)
        if plan.status != 200:
            body = json.loads(plan.body)
            assert body["type"] == "error" and body["error"]["type"]
            continue
        decoded = sse_events(r.data for r in plan.reads)
        if plan.end == "drop":  # the cut event is not dispatched
            assert len(decoded) == len(plan.events)
        assert [(n, json.loads(d)) for n, d in decoded] == plan.events
        for n, d in plan.events:
            assert d["type"] == n
        assert plan.events[0][0] in ("message_start", "error")
        if plan.end == "eof" and plan.events[-1][0] != "error":
            assert plan.events[-1][0] == "message_stop"
            # every block index starts once, in order; stops match starts
            starts = [d["index"] for n, d in plan.events if n == "content_block_start"]
            assert starts == list(range(len(starts)))


def test_ids_look_real() -> None:
    s = get_scenario("parse_date")
    ev = render_turn_events(s, 0)
    msg_id = ev[0][1]["message"]["id"]
    assert msg_id.startswith("msg_01") and len(msg_id) == 28
    tool_ids = [d["content_block"]["id"] for n, d in ev if n == "content_block_start" and d["index"] > 0]
    assert len(set(tool_ids)) == 4 and all(i.startswith("toolu_01") and len(i) == 30 for i in tool_ids)
    # a retry is a new message with new ids
    assert render_turn_events(s, 0, 1)[0][1]["message"]["id"] != msg_id


def test_http_error_plan() -> None:
    plan = render_turn(get_scenario("rate_limited"), 0, 0)
    assert plan.status == 429 and plan.headers["retry-after-ms"] == "200" and plan.headers["retry-after"] == "1"
    body = json.loads(plan.body)
    assert body["error"]["type"] == "rate_limit_error" and body["request_id"].startswith("req_")
    plan = render_turn(get_scenario("rate_limited"), 1, 0)
    assert plan.status == 529 and json.loads(plan.body)["error"]["type"] == "overloaded_error"
    assert render_turn(get_scenario("rate_limited"), 0, 1).status == 200


def test_render_out_of_range() -> None:
    with pytest.raises(IndexError):
        render_turn(get_scenario("weather"), 5)


def test_fault_shapes() -> None:
    # error event after N events, then EOF
    plan = render_turn(get_scenario("overloaded_midstream"), 0, 0)
    assert plan.end == "eof" and plan.events[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    assert len([e for e in plan.events if e[0] != "ping"]) == 6
    # drop inside block 2 after 2 of its fragments, with 60 bytes of the next event
    plan = render_turn(get_scenario("drop_mid_json"), 0, 0)
    assert plan.end == "drop"
    last = plan.events[-1]
    assert last[0] == "content_block_delta" and last[1]["index"] == 2
    assert sum(1 for n, d in plan.events if n == "content_block_delta" and d["index"] == 2) == 2
    assert len(plan.reads[-1].data) == 60 and plan.reads[-1].data.startswith(b"event: content_block_delta")
    # stall: message_start, pings, then the connection hangs
    plan = render_turn(get_scenario("stall_with_pings"), 0, 0)
    assert plan.end == "hang" and plan.events[0][0] == "message_start"
    assert [n for n, _ in plan.events[1:]] == ["ping"] * 20
    assert all(r.delay == 0.5 for r in plan.reads[1:])
    # max_tokens: the tool block has no stop, stop_reason max_tokens, message_stop
    s = get_scenario("max_tokens_cut")
    names = [(n, d.get("index")) for n, d in render_turn_events(s, 0)]
    assert ("content_block_start", 1) in names and ("content_block_stop", 1) not in names
    assert names[-2:] == [("message_delta", None), ("message_stop", None)]
    assert expected_stop_reason(s, 0) == "max_tokens"
    block = expected_blocks(s, 0)[1]
    assert block["complete"] is False and block["input"] is None and block["raw_json"]
    # invalid JSON at stop for the second of two parallel calls
    blocks = expected_blocks(get_scenario("invalid_json"), 0)
    assert blocks[1]["input"] == {"path": "src/dates.py"}
    assert blocks[2]["complete"] and blocks[2]["input"] is None and blocks[2]["raw_json"].endswith('"max_by')


def test_truncate_json() -> None:
    text = json.dumps({"path": "src/dates.py"})
    cut = truncate_json(text)
    assert text.startswith(cut) and cut != text
    with pytest.raises(ValueError):
        json.loads(cut)


def _mini(
    blocks: list[Block],
    *,
    turns_extra: Sequence[TurnScript] = (),
    faults: Sequence[Fault] = (),
    pacing: Pacing | None = None,
    tools: Sequence[str] = ("read_file",),
    **kw: Any,
) -> Scenario:
    return Scenario(
        name="mini",
        description="mini",
        prompt="hi",
        tools=list(tools),
        seed=7,
        turns=[
            TurnScript(
                blocks,
                stop_reason="tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn",
                faults=list(faults),
                pacing=pacing or Pacing(),
            ),
            *turns_extra,
        ],
        **kw,
    )


def test_chunk_specs_and_block_kinds() -> None:
    s = _mini(
        [
            ThinkingBlock("abcdefghij", signature="sig", chunk=[3, 1]),
            RedactedThinkingBlock("opaque"),
            TextBlock("hello world", chunk=4),
            ServerToolUseBlock("web_search", {"query": "x"}, fragment=5, empty_first=False),
            WholeBlock({"type": "web_search_tool_result", "content": []}, result_of=3),
            ToolUseBlock(
                "read_file", raw_json='{"path": "a"}', fragment=[2, 100], extra={"caller": {"type": "direct"}}
            ),
        ]
    )
    ev = render_turn_events(s, 0)

    def deltas(i: int) -> list[dict[str, Any]]:
        return [d["delta"] for n, d in ev if n == "content_block_delta" and d["index"] == i]

    assert [d.get("thinking") for d in deltas(0)] == ["abc", "d", "efg", "h", "ij", None]
    assert deltas(0)[-1] == {"type": "signature_delta", "signature": "sig"}
    assert deltas(1) == []
    assert [d["text"] for d in deltas(2)] == ["hell", "o wo", "rld"]
    assert "".join(d["partial_json"] for d in deltas(3)) == '{"query": "x"}' and deltas(3)[0]["partial_json"]
    starts = {d["index"]: d["content_block"] for n, d in ev if n == "content_block_start"}
    assert starts[3]["id"].startswith("srvtoolu_01")
    assert starts[4]["tool_use_id"] == starts[3]["id"]
    assert starts[5]["caller"] == {"type": "direct"}
    assert [d["partial_json"] for d in deltas(5)] == ["", '{"', 'path": "a"}']


def test_invalid_tool_json_default_truncates() -> None:
    s = _mini([ToolUseBlock("read_file", {"path": "src/dates.py"})], faults=[InvalidToolJson(block=0)])
    b = expected_blocks(s, 0)[0]
    assert b["input"] is None and '{"path": "src/dates.py"}'.startswith(b["raw_json"])


def test_one_transport_fault_per_attempt() -> None:
    s = _mini([TextBlock("x")], faults=[ErrorEventAfter(2), DropAfter(n_events=1)])
    with pytest.raises(ValueError, match="at most one"):
        render_turn(s, 0)
    assert render_turn(s, 0, 1).end == "eof"  # both only apply to attempt 0


def test_proxy_buffer_and_split_preserve_bytes_and_time() -> None:
    base = get_scenario("parse_date")
    ref = render_turn(base, 1)
    for pacing in (
        realistic_variant(split_events=True),
        realistic_variant(proxy_buffer=4096),
        realistic_variant(proxy_buffer=1 << 22),
    ):
        s = with_pacing(base, 1, pacing)
        plan = render_turn(s, 1)
        assert plan.body == ref.body
        assert plan.total_delay == pytest.approx(ref.total_delay)
    burst = render_turn(with_pacing(base, 1, realistic_variant(proxy_buffer=1 << 22)), 1)
    assert len(burst.reads) == 1 and burst.reads[0].delay == pytest.approx(ref.total_delay - ref.header_delay)


def realistic_variant(**kw: Any) -> Pacing:
    return dataclasses.replace(get_scenario("parse_date").turns[1].pacing, **kw)


def with_pacing(s: Scenario, turn: int, pacing: Pacing) -> Scenario:
    turns = list(s.turns)
    turns[turn] = dataclasses.replace(turns[turn], pacing=pacing)
    return dataclasses.replace(s, turns=turns)


# --- through the real SDK --------------------------------------------------------------------------------------


SDK_WALK = [n for n in ALL if n != "big_input"]  # the SDK's O(n^2) tool-input parsing takes seconds there


async def give_up_on_a_stall(server: ScenarioServer, coro: Awaitable[Message], stalls: bool) -> Message:
    """Await ``coro``; a harness that sees the server hang (a stall: pings, then nothing) gives up on it with a
    TimeoutError, as its idle timeout would. The hang is observed on the server, not timed."""
    n = len(server.responses)
    task = asyncio.ensure_future(coro)
    async with asyncio.timeout(TIMEOUT):
        while stalls and not task.done():
            if len(server.responses) > n and server.responses[n].state == "hanging":
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                raise TimeoutError
            await asyncio.sleep(0)
        return await task


@pytest.mark.parametrize("name", SDK_WALK)
async def test_every_turn_through_the_sdk(name: str) -> None:
    """Walk the scenario like a harness: retry failed streams, feed tool results, compare with the script."""
    s = SCENARIOS[name]
    server = fast_server(s)
    client = make_client(server)
    messages: list[Any] = [{"role": "user", "content": s.prompt}]
    for turn in range(len(s.turns)):
        want_attempt = successful_attempt(s, turn)
        for _ in range(4):
            try:
                stalls = any(
                    isinstance(f, StallWithPings) for f in s.turns[turn].faults_for(server.attempts.get(turn, 0))
                )
                msg = await give_up_on_a_stall(server, stream_once(client, s, messages), stalls)
                break
            except anthropic.APIStatusError as e:  # error event after HTTP 200
                assert e.status_code == 200 and isinstance(e.body, dict)
                assert e.body["error"]["type"] == "overloaded_error"
            except (httpx2.RemoteProtocolError, anthropic.APIConnectionError) as e:  # dropped connection
                assert str(dropped(e)) == DROP_MESSAGE
            except TimeoutError:  # the stall: pings, then nothing
                assert s.turns[turn].faults and isinstance(s.turns[turn].faults[0], StallWithPings)
        else:
            raise AssertionError("never succeeded")
        served = server.requests_for(turn)[-1]
        assert served.attempt == want_attempt and served.response is not None and served.response.state == "complete"
        compare_with_script(msg, s, turn, want_attempt)
        if msg.stop_reason != "tool_use":
            break
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
            tool_results_for(msg),
        ]
    assert len(server.requests) == s.expected["requests"]
    assert msg.stop_reason == s.expected["final_stop_reason"]
    assert all(r.rejected is None for r in server.requests)


async def test_big_input_through_the_sdk_events() -> None:
    """200 KB of tool input: the SDK's raw event stream (no accumulation) carries it intact, then turn 1 follows."""
    s = get_scenario("big_input")
    server = fast_server(s)
    client = make_client(server)
    fragments: list[str] = []
    names = []
    stream = await client.messages.create(
        messages=[{"role": "user", "content": s.prompt}], stream=True, **s.request_params()
    )
    async for ev in stream:
        names.append(ev.type)
        if ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
            assert ev.index == 1
            fragments.append(ev.delta.partial_json)
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    tool = json.loads("".join(fragments))
    assert tool == {"path": "tests/fixtures/dates_200k.csv", "content": BIG_CSV}
    assert server.responses[0].state == "complete"
    history = [
        {"role": "user", "content": s.prompt},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": expected_blocks(s, 0)[1]["id"], "name": "write_file", "input": tool}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": expected_blocks(s, 0)[1]["id"], "content": "ok"}],
        },
    ]
    msg = await stream_once(client, s, history)
    compare_with_script(msg, s, 1, 0)


async def test_invalid_json_is_silently_patched_by_the_sdk() -> None:
    s = get_scenario("invalid_json")
    msg = await stream_once(make_client(fast_server(s)), s, [{"role": "user", "content": s.prompt}])
    assert [b.input if isinstance(b, sdk.ToolUseBlock) else b for b in msg.content[1:]] == [
        {"path": "src/dates.py"},
        {"path": "CHANGELOG.md"},
    ]


async def test_max_tokens_cut_through_the_sdk() -> None:
    s = get_scenario("max_tokens_cut")
    msg = await stream_once(make_client(fast_server(s)), s, [{"role": "user", "content": s.prompt}])
    assert msg.stop_reason == "max_tokens" and msg.content[1].type == "tool_use"
    assert msg.content[1].name == "write_file"


async def test_error_event_is_api_status_error_then_retry_succeeds() -> None:
    s = get_scenario("overloaded_midstream")
    server = fast_server(s)
    client = make_client(server)
    msgs = [{"role": "user", "content": s.prompt}]
    with pytest.raises(anthropic.APIStatusError) as e:
        await stream_once(client, s, msgs)
    assert e.value.status_code == 200
    assert len(server.requests) == 1  # the SDK does not retry after the first byte
    msg = await stream_once(client, s, msgs)
    assert [(r.turn, r.attempt) for r in server.requests] == [(0, 0), (0, 1)]
    block = msg.content[1]
    assert isinstance(block, sdk.ToolUseBlock) and block.input == {"path": "src/dates.py"}


def dropped(e: BaseException) -> BaseException:
    """The transport's error of a dropped stream: as the SDK raises it (up to 2.16), or the one it wraps in an
    APIConnectionError (2.17 on)."""
    if isinstance(e, anthropic.APIConnectionError):
        assert isinstance(e.__cause__, httpx2.RemoteProtocolError), e
        return e.__cause__
    return e


async def test_drop_raises_remote_protocol_error() -> None:
    s = get_scenario("drop_mid_json")
    server = fast_server(s)
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as raised:
        await stream_once(make_client(server), s, [{"role": "user", "content": s.prompt}])
    assert "incomplete chunked read" in str(dropped(raised.value))
    served = server.responses[0]
    assert served.plan is not None
    assert served.state == "dropped" and served.reads_sent == len(served.plan.reads)
    assert server.closed_early == 0
    # raw bytes through the SDK see the partial event, then the error
    server2 = fast_server(s)
    got = b""
    with pytest.raises(httpx2.RemoteProtocolError):
        async with make_client(server2).messages.with_streaming_response.create(
            messages=[{"role": "user", "content": s.prompt}], stream=True, **s.request_params()
        ) as r:
            async for chunk in r.iter_bytes():
                got += chunk
    assert got == render_turn(s, 0, 0).body


async def test_429_and_529_are_retried_by_the_sdk() -> None:
    s = get_scenario("rate_limited")
    server = fast_server(s)
    client = make_client(server)
    msg = await stream_once(client, s, [{"role": "user", "content": s.prompt}])
    assert [(r.turn, r.attempt, r.response and r.response.status) for r in server.requests] == [
        (0, 0, 429),
        (0, 1, 200),
    ]
    msgs = [
        {"role": "user", "content": s.prompt},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
        tool_results_for(msg),
    ]
    await stream_once(client, s, msgs)
    assert [(r.turn, r.attempt, r.response and r.response.status) for r in server.requests][2:] == [
        (1, 0, 529),
        (1, 1, 200),
    ]
    # with no retries the SDK surfaces the 429
    server = fast_server(s)
    with pytest.raises(anthropic.RateLimitError):
        await stream_once(make_client(server, max_retries=0), s, [{"role": "user", "content": s.prompt}])


async def test_retry_after_is_scaled_by_speed() -> None:
    s = get_scenario("rate_limited")
    server = ScenarioServer(s, Pacer(math.inf))
    resp = await server.handler(
        httpx2.Request(
            "POST",
            "http://scenario.local/v1/messages",
            json={"messages": [{"role": "user", "content": "x"}], "stream": True},
        )
    )
    assert resp.status_code == 429 and resp.headers["retry-after-ms"] == "1"
    server = ScenarioServer(s, Pacer(4.0))
    server.pacer.set_speed(math.inf)
    server.pacer.set_speed(4.0)
    pacer_before = server.pacer.requested
    resp = await server.handler(
        httpx2.Request(
            "POST",
            "http://scenario.local/v1/messages",
            json={"messages": [{"role": "user", "content": "x"}], "stream": True},
        )
    )
    assert resp.headers["retry-after-ms"] == "50" and resp.headers["retry-after"] == "0.25"
    assert server.pacer.requested - pacer_before == pytest.approx(0.05)  # the error's header delay
    server = ScenarioServer(s, Pacer(math.inf), scale_retry_after=False)
    resp = await server.handler(
        httpx2.Request(
            "POST",
            "http://scenario.local/v1/messages",
            json={"messages": [{"role": "user", "content": "x"}], "stream": True},
        )
    )
    assert resp.headers["retry-after-ms"] == "200"


async def test_stall_hangs_until_cancelled_and_close_is_observed() -> None:
    s = get_scenario("stall_with_pings")
    server = fast_server(s)
    client = make_client(server)
    seen = []

    async def consume() -> None:
        async with client.messages.stream(
            messages=[{"role": "user", "content": s.prompt}], **s.request_params()
        ) as stream:
            async for ev in stream:
                seen.append(ev.type)

    task = asyncio.create_task(consume())
    for _ in range(200):
        await asyncio.sleep(0)
        if server.responses and server.responses[0].state == "hanging":
            break
    assert server.responses[0].state == "hanging"
    assert seen == ["message_start"]  # the SDK swallowed the 20 pings
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(TIMEOUT):
        await server.closed_early_event.wait()
    # (mypy keeps the narrowing to "hanging" from above across the awaits)
    assert server.closed_early == 1 and server.responses[0].state == "closed_early"  # type: ignore[comparison-overlap]


async def test_closing_early_is_observed() -> None:
    s = get_scenario("parse_date")
    server = fast_server(s)
    client = make_client(server)
    async with client.messages.stream(messages=[{"role": "user", "content": s.prompt}], **s.request_params()) as stream:
        async for ev in stream:
            if ev.type == "text":
                break
    assert server.closed_early == 1 and server.closed_early_event.is_set()
    served = server.responses[0]
    assert served.plan is not None
    assert served.state == "closed_early" and 0 < served.reads_sent < len(served.plan.reads)
    # a stream read to the end is not "closed early"
    server = fast_server(s)
    await stream_once(make_client(server), s, [{"role": "user", "content": s.prompt}])
    assert server.closed_early == 0 and server.responses[0].state == "complete"


# --- turn selection, attempts, history -------------------------------------------------------------------------


def _body(messages: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "stream": True, "messages": messages, **kw}


def _request(body: dict[str, Any]) -> httpx2.Request:
    return httpx2.Request("POST", "http://scenario.local/v1/messages", json=body)


def _history(n_assistant: int) -> list[Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for i in range(n_assistant):
        msgs += [
            {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]},
            {"role": "user", "content": f"u{i}"},
        ]
    return msgs


async def test_turn_selection_and_attempt_counter() -> None:
    s = get_scenario("weather")
    server = fast_server(s)
    for n in (0, 0, 1, 0, 1, 1):
        resp = await server.handler(_request(_body(_history(n))))
        assert resp.status_code == 200
        await resp.aread()
    assert [(r.turn, r.attempt) for r in server.requests] == [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)]
    assert server.attempts == {0: 3, 1: 3}
    plan = server.responses[-1].plan
    assert plan is not None and render_turn(s, 1, 2).body == b"".join([r.data for r in plan.reads])
    resp = await server.handler(_request(_body(_history(2))))  # the script has 2 turns
    assert resp.status_code == 400 and "no turn 2" in resp.json()["error"]["message"]
    server.reset()
    assert server.requests == [] and server.attempts == {}


async def test_past_the_script_is_a_400_through_the_sdk() -> None:
    s = get_scenario("weather")
    server = fast_server(s)
    with pytest.raises(anthropic.BadRequestError):
        await stream_once(make_client(server), s, _history(2))
    assert len(server.requests) == 1  # 400 is not retried


async def test_request_recording() -> None:
    s = get_scenario("parse_date")
    server = fast_server(s)
    await stream_once(make_client(server), s, [{"role": "user", "content": s.prompt}])
    rec = server.requests[0]
    assert rec.method == "POST" and rec.path == "/v1/messages" and rec.body["stream"] is True
    assert rec.body["messages"][0]["content"] == s.prompt
    assert [t["name"] for t in rec.body["tools"]] == ["read_file", "list_dir", "search_text", "run_tests"]
    assert "scenario-no-key" in (rec.headers.get("x-api-key", "") + rec.headers.get("authorization", ""))
    assert rec.headers["x-stainless-retry-count"] == "0"


async def test_non_stream_and_wrong_path_rejected() -> None:
    server = fast_server(get_scenario("weather"))
    resp = await server.handler(_request({"messages": _history(0), "model": "m", "max_tokens": 1}))
    assert resp.status_code == 400
    resp = await server.handler(httpx2.Request("GET", "http://scenario.local/v1/models"))
    assert resp.status_code == 404
    assert all(r.turn is None for r in server.requests)


def test_history_rule() -> None:
    tool_use = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "x", "input": {}},
            {"type": "tool_use", "id": "toolu_B", "name": "x", "input": {}},
        ],
    }
    ok = [
        {"role": "user", "content": "hi"},
        tool_use,
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "2"},
            ],
        },
    ]
    assert history_problem(ok) is None
    missing = [*ok[:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A"}]}]
    problem = history_problem(missing)
    assert problem is not None and "toolu_B" in problem and "without `tool_result`" in problem
    stray = [
        *ok,
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_Z"}]},
    ]
    assert "unexpected `tool_use_id`" in (history_problem(stray) or "")
    assert history_problem([{"role": "assistant", "content": "x"}])


async def test_dangling_tool_use_is_a_400_through_the_sdk() -> None:
    s = get_scenario("weather")
    server = fast_server(s)
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_X", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": "never mind"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="toolu_X"):
        await stream_once(make_client(server), s, msgs)
    assert server.requests[0].rejected and server.attempts == {}


# --- pacing through the transport ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["parse_date", "drop_mid_json", "overloaded_midstream", "rate_limited"])
async def test_scheduled_delay_matches_the_plan(name: str) -> None:
    s = SCENARIOS[name]
    pacer = Pacer(math.inf)
    server = ScenarioServer(s, pacer)
    resp = await server.handler(_request(_body([{"role": "user", "content": "x"}])))
    try:
        await resp.aread()
    except httpx2.RemoteProtocolError:
        pass
    plan = render_turn(s, 0, 0)
    assert pacer.requested == pytest.approx(plan.total_delay)
    assert pacer.calls == 1 + (len(plan.reads) if plan.status == 200 else 0)


async def test_real_time_pacing_follows_speed() -> None:
    """At 10x each read comes after a tenth of its planned delay (virtual time: what the pacer asks to sleep)."""
    s = _mini([TextBlock("abcdef", chunk=1)], pacing=Pacing(ttfb=0.2, event_gap=0.02), tools=())
    plan = render_turn(s, 0)
    assert plan.total_delay == pytest.approx(0.2 + 0.02 * (len(plan.events) - 1))
    vt = VirtualTime()
    server = ScenarioServer(s, Pacer(10.0, clock=vt.clock, sleeper=vt.sleep))
    resp = await server.handler(_request(_body([{"role": "user", "content": "x"}])))
    assert vt.now == pytest.approx(plan.header_delay / 10)
    arrivals = [(vt.now, chunk) async for chunk in resp.aiter_raw()]
    assert [c for _, c in arrivals] == [r.data for r in plan.reads]
    due = list(itertools.accumulate([plan.header_delay, *(r.delay for r in plan.reads)]))[1:]
    assert [t for t, _ in arrivals] == pytest.approx([d / 10 for d in due])  # each read at its own time
    assert vt.slept == pytest.approx([d / 10 for d in (plan.header_delay, *(r.delay for r in plan.reads)) if d > 0])
    assert vt.now == pytest.approx(plan.total_delay / 10)


@pytest.mark.parametrize(
    "variant",
    [
        {"line_ending": "\r\n"},
        {"line_ending": "\r"},
        {"split_events": True},
        {"split_events": True, "line_ending": "\r\n", "events_per_read": 3},
        {"events_per_read": 7, "pad": False},
        {"ping_every": 1},
        {"proxy_buffer": 2048},
    ],
)
async def test_variants_parse_identically_through_the_sdk(variant: dict[str, Any]) -> None:
    base = get_scenario("thinking")
    msgs = [{"role": "user", "content": base.prompt}]
    ref = await stream_once(make_client(fast_server(base)), base, msgs)
    s = with_pacing(base, 0, dataclasses.replace(base.turns[0].pacing, **variant))
    got = await stream_once(make_client(fast_server(s)), s, msgs)
    assert got.model_dump() == ref.model_dump()
    if "line_ending" in variant:
        assert variant["line_ending"].encode() + b"data: " in render_turn(s, 0).body


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    line_ending=st.sampled_from(["\n", "\r\n", "\r"]),
    events_per_read=st.integers(1, 6),
    split=st.booleans(),
    pad=st.booleans(),
    seed=st.integers(0, 10_000),
    text=st.text(min_size=1, max_size=60),
)
def test_property_any_framing_decodes_to_the_same_events(
    line_ending: Literal["\n", "\r\n", "\r"], events_per_read: int, split: bool, pad: bool, seed: int, text: str
) -> None:
    s = dataclasses.replace(
        _mini(
            [TextBlock(text, chunk=Sizes(1, 5)), ToolUseBlock("read_file", {"path": text})],
            pacing=Pacing(
                line_ending=line_ending, events_per_read=events_per_read, split_events=split, pad=pad, ping_every=3
            ),
        ),
        seed=seed,
    )
    plan = render_turn(s, 0)
    assert [(n, json.loads(d)) for n, d in sse_events(r.data for r in plan.reads)] == plan.events
    blocks = expected_blocks(s, 0)
    assert blocks[0]["text"] == text and blocks[1]["input"] == {"path": text}


# --- the Pacer -------------------------------------------------------------------------------------------------


def test_pacer_ladder_and_labels() -> None:
    p = Pacer()
    assert p.speed == 1.0 and p.label == "1x"
    assert [p.faster() for _ in range(5)] == [2.0, 4.0, 10.0, math.inf, math.inf]
    assert p.label == "max"
    assert [p.slower() for _ in range(7)] == [10.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.25]
    assert p.label == "0.25x"
    p.set_speed(3)
    assert p.faster() == 4.0 and p.set_speed(3) and p.slower() == 2.0
    assert speed_label(1.5) == "1.5x" and SPEED_LADDER[-1] == math.inf
    with pytest.raises(ValueError):
        Pacer(0)
    with pytest.raises(ValueError):
        p.set_speed(float("nan"))
    p.speed = 2
    assert p.speed == 2.0 and p.wall_seconds(1.0) == 0.5


async def test_pacer_max_speed_never_sleeps() -> None:
    vt = VirtualTime()
    p = Pacer(math.inf, clock=vt.clock, sleeper=vt.sleep)
    for _ in range(1000):
        await p.sleep(10.0)
    assert vt.asked == [] and vt.now == 0.0  # one event-loop turn per sleep, never a timed wait
    assert p.requested == pytest.approx(10_000.0) and p.calls == 1000


async def test_pacer_speed_change_takes_effect_during_a_sleep() -> None:
    vt = VirtualTime(hold=True)  # sleeps end only when the pacer wakes them
    p = Pacer(0.25, clock=vt.clock, sleeper=vt.sleep)
    task = asyncio.create_task(p.sleep(10.0))
    await vt.started(1)
    assert vt.asked == [40.0] and not task.done()  # 40 s at 0.25x
    vt.advance(2.0)  # 2 wall seconds go by: 0.5 scenario seconds
    p.set_speed(math.inf)
    async with asyncio.timeout(TIMEOUT):
        await task  # woken, and nothing left to sleep at max speed
    assert vt.asked == [40.0] and vt.slept == []
    # slowing down extends the rest of a sleep; speeding up shortens it
    p.set_speed(1.0)
    task = asyncio.create_task(p.sleep(1.0))
    await vt.started(2)
    assert vt.asked[-1] == 1.0
    vt.advance(0.25)
    p.set_speed(0.5)
    await vt.started(3)
    assert vt.asked[-1] == pytest.approx(1.5)  # 0.75 s left, at 0.5x
    vt.advance(0.5)  # 0.25 more scenario seconds: 0.5 left
    p.set_speed(100.0)
    await vt.started(4)
    assert vt.asked[-1] == pytest.approx(0.005)  # 0.5 s left, at 100x
    assert not task.done()
    vt.release()
    async with asyncio.timeout(TIMEOUT):
        await task
    assert vt.slept == [pytest.approx(0.005)] and vt.now == pytest.approx(2.755)
    assert not p._waiters


async def test_pacer_pause_and_resume() -> None:
    vt = VirtualTime()
    p = Pacer(math.inf, clock=vt.clock, sleeper=vt.sleep)
    p.pause()
    assert p.paused and p.label == "max paused"
    task = asyncio.create_task(p.sleep(0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    p.resume()
    async with asyncio.timeout(TIMEOUT):
        await task
    assert vt.asked == []  # waiting for resume is not a timed sleep
    assert p.toggle_pause() is True and p.toggle_pause() is False
    # a sleep in progress stops counting while paused and goes on, from where it was, on resume
    p = Pacer(1.0, clock=vt.clock, sleeper=vt.sleep)
    vt.hold = True
    task = asyncio.create_task(p.sleep(1.0))
    await vt.started(1)
    vt.advance(0.4)
    p.pause()
    for _ in range(20):
        await asyncio.sleep(0)
    vt.advance(100.0)  # paused: none of this counts
    assert len(vt.asked) == 1 and not task.done()
    p.resume()
    await vt.started(2)
    assert vt.asked == [1.0, pytest.approx(0.6)]
    vt.release()
    async with asyncio.timeout(TIMEOUT):
        await task
    assert vt.slept == [pytest.approx(0.6)]


async def test_pacer_sleep_is_cancellable() -> None:
    p = Pacer(1.0)
    task = asyncio.create_task(p.sleep(100))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not p._waiters
    # an injected sleeper is cancelled with the sleep
    vt = VirtualTime(hold=True)
    p = Pacer(1.0, clock=vt.clock, sleeper=vt.sleep)
    task = asyncio.create_task(p.sleep(100))
    await vt.started(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(5):
        await asyncio.sleep(0)
    assert not p._waiters and vt.slept == [] and all(fut.cancelled() for *_, fut in vt._timers)


def test_toolspec_import_is_the_shared_one() -> None:
    assert isinstance(get_scenario("weather").resolve_tools(None)["get_weather"], ToolSpec)

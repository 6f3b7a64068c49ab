"""Tool execution inferred from the next OpenAI request (issue 20 §3): the proxy sees the other harness's tool calls
stream (chat ``delta.tool_calls``, Responses ``function_call`` items) and their results in its next request (chat
``role: "tool"`` messages with ``tool_call_id``, Responses ``function_call_output`` items with ``call_id``), matched
within the conversation, with the same diagnostics as for Messages (``missing``, ``unknown``). The client is the
official openai SDK, `serve` (its OpenAI endpoints) the upstream."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.net.toolinfer import SeenToolUse, infer_tool_executions, request_results
from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.state.fold import DashboardState
from inspector.testing.hyp import examples
from inspector.tui.widgets.tools import turn_bars

KEY = "sk-test-openai-tools-0123456789"
PARAMS: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
CHAT_TOOLS: list[Any] = [  # (the SDKs' tool params are TypedDicts: a plain list is passed as JSON)
    {"type": "function", "function": {"name": n, "description": n, "parameters": PARAMS}}
    for n in ("run_tests", "read_file", "get_weather")
]
RESP_TOOLS: list[Any] = [
    {"type": "function", "name": n, "parameters": PARAMS} for n in ("run_tests", "read_file", "get_weather")
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, echo_model=False)) as srv:
        yield srv


def _proxy(upstream: BackgroundServer, tmp_path: Path) -> tuple[ProxyApp, list[O.Observation], Path]:
    bus = O.ObservationBus()
    seen: list[O.Observation] = []
    bus.subscribe(seen.append)
    record = tmp_path / "tools.jsonl"
    return ProxyApp(upstream.base_url, record=record, bus=bus), seen, record


async def _chat(client: openai.AsyncOpenAI, messages: list[Any], scenario: str) -> list[dict[str, Any]]:
    stream = await client.chat.completions.create(
        model="claude-sonnet-4-6",
        messages=messages,
        tools=CHAT_TOOLS,
        stream=True,
        extra_headers={"x-inspector-scenario": scenario, "x-inspector-session": "tools"},
    )
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                c = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                c["id"] = tc.id or c["id"]
                c["name"] += (tc.function.name or "") if tc.function else ""
                c["arguments"] += (tc.function.arguments or "") if tc.function else ""
    return [calls[k] for k in sorted(calls)]


def _inferred(seen: list[O.Observation], turn: int) -> list[O.ToolExecutionInferred]:
    return [o for o in seen if isinstance(o, O.ToolExecutionInferred) and o.turn == turn]


def _check_tools_pane(seen: list[O.Observation], ids: list[str], answered: list[str]) -> None:
    """The Tools pane's rows (the dashboard's fold): each answered call ends succeeded, inferred (not measured);
    one without a result ends not_run, never seen to run (no running time: the timeline drew an inferred run for it,
    from its block's end to the next request)."""
    state = DashboardState().apply_all(seen)
    rows = {t.id: t for t in state.tools.values()}
    for tid in ids:
        assert rows[tid].inferred
        assert str(rows[tid].state) == ("succeeded" if tid in answered else "not_run")
        assert (rows[tid].t_started is not None) == (tid in answered)
    # the timeline: a call that never ran has its input's bar only, ending where its input ended (it ran on to the
    # next request, then as an inferred run), and an answered one its inferred run
    for turn in {rows[tid].turn for tid in ids}:
        tool_bars = [b for b in turn_bars(state, turn, now=99.0)[0] if not b.label.startswith("model ")]
        for key, bar in zip(state.turns[turn].tools, tool_bars, strict=True):
            t, tid = state.tools[key], key[1]
            kinds = [seg[2] for seg in bar.segments]
            if tid in answered:
                assert kinds[-1] == "tl--inferred"
            else:
                assert kinds == ["tl--input"] and bar.segments[0][1] == t.history[1][1] < (t.t_finished or 0)


async def _completed(client: openai.AsyncOpenAI, request: Any, previous: str | None = None) -> Any:
    """One streamed Responses request through the proxy (the weather scenario, no session header): its completed
    Response. ``request``: the input; ``previous``: the previous_response_id it continues."""
    more: dict[str, Any] = {"previous_response_id": previous} if previous else {}
    stream = await client.responses.create(
        model="claude-sonnet-4-6",
        input=request,
        tools=RESP_TOOLS,
        stream=True,
        extra_headers={"x-inspector-scenario": "weather"},
        **more,
    )
    return [e.response async for e in stream if e.type == "response.completed"][0]


@pytest.mark.parametrize("drop_one", [False, True])
async def test_chat_tool_results_in_the_next_request_are_inferred(
    upstream: BackgroundServer, tmp_path: Path, drop_one: bool
) -> None:
    app, seen, record = _proxy(upstream, tmp_path)
    with BackgroundServer(app) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY)
        try:
            messages: list[Any] = [{"role": "user", "content": "Why does parse_date fail?"}]
            calls = await _chat(client, messages, "parse_date")
            assert len(calls) == 4
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls
                    ],
                }
            )
            answered = [c["id"] for c in calls[: 3 if drop_one else 4]]
            messages += [{"role": "tool", "tool_call_id": tid, "content": f"result of {tid}"} for tid in answered]
            if drop_one:  # the API (serve, as OpenAI's) refuses it; the proxy saw the request all the same
                with pytest.raises(openai.BadRequestError, match="did not have response messages"):
                    await _chat(client, messages, "parse_date")
            else:
                await _chat(client, messages, "parse_date")
        finally:
            await client.close()
    ids = [c["id"] for c in calls]
    assert [o.id for o in seen if isinstance(o, O.ToolUse)] == ids
    got = {o.tool_use_id: o for o in _inferred(seen, 1)}
    assert set(got) == set(ids)
    for tid in answered:
        o = got[tid]
        assert (o.status, o.from_turn, o.is_error, o.reason) == ("result", 0, None, None)  # no error flag: unknown
        assert o.since_block_stop is not None and o.since_block_stop >= 0 and o.since_stream_end is not None
        assert o.result_chars == len(f"result of {tid}")
    if drop_one:
        assert (got[ids[3]].status, got[ids[3]].reason) == ("missing", "no tool_result for it in the next request")
    _check_tools_pane(seen, ids, answered)
    lines = [o for o in read_recording(record).observations if o.get("type") == "tool_inferred"]
    assert sorted(o["status"] for o in lines) == sorted(o.status for o in got.values())
    assert KEY.encode() not in record.read_bytes()


async def _responses(client: openai.AsyncOpenAI, input_items: list[Any], **kw: Any) -> list[dict[str, Any]]:
    stream = await client.responses.create(
        model="claude-sonnet-4-6",
        input=input_items,
        tools=RESP_TOOLS,
        stream=True,
        extra_headers={"x-inspector-scenario": "weather", "x-inspector-session": "tools-r"},
        **kw,
    )
    items = []
    async for e in stream:
        if e.type == "response.output_item.done":
            items.append(e.item.model_dump(exclude_none=True))
    return items


async def test_responses_function_call_outputs_in_the_next_request_are_inferred(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    app, seen, record = _proxy(upstream, tmp_path)
    with BackgroundServer(app) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY)
        try:
            history: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
            items = await _responses(client, history)
            calls = [i for i in items if i["type"] == "function_call"]
            assert len(calls) == 1
            history += items
            history.append({"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "18 C, sunny"})
            await _responses(client, history)
            # the same body again after a complete answer: a new turn, whose results were answered already
            await _responses(client, history)
        finally:
            await client.close()
    cid = calls[0]["call_id"]
    got = {o.tool_use_id: o for o in _inferred(seen, 1)}
    assert (got[cid].status, got[cid].from_turn, got[cid].result_chars) == ("result", 0, len("18 C, sunny"))
    (again,) = _inferred(seen, 2)
    assert (again.tool_use_id, again.status) == (cid, "unknown") and "never saw it there" in (again.reason or "")
    assert "(its turn 2, #2 of the session)" in (again.reason or "")  # (its own numbering, and the session's)
    _check_tools_pane(seen, [cid], [cid])
    starts = [(o.turn, o.attempt) for o in seen if isinstance(o, O.AttemptStarted)]
    assert starts == [(0, 0), (1, 0), (2, 0)]


async def test_responses_continued_by_previous_response_id_are_the_same_conversation(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """No session header, no history: the second request names the first response (previous_response_id) and
    sends only the function_call_output. It is the conversation's next turn, and the result is matched."""
    app, seen, _record = _proxy(upstream, tmp_path)
    with BackgroundServer(app) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY)
        try:
            hdr = {"x-inspector-scenario": "weather"}
            stream = await client.responses.create(
                model="claude-sonnet-4-6", input="Weather in Paris?", tools=RESP_TOOLS, stream=True, extra_headers=hdr
            )
            rid, calls = None, []
            async for e in stream:
                if e.type == "response.completed":
                    rid = e.response.id
                    calls = [i for i in e.response.output if i.type == "function_call"]
            assert rid and len(calls) == 1
            output: list[Any] = [{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C"}]
            stream = await client.responses.create(
                model="claude-sonnet-4-6",
                input=output,
                previous_response_id=rid,
                tools=RESP_TOOLS,
                stream=True,
                extra_headers=hdr,
            )
            [e async for e in stream]
        finally:
            await client.close()
    assigned = [(o.conversation, o.conversation_turn, o.how) for o in seen if isinstance(o, O.ConversationAssigned)]
    assert [a[1:] for a in assigned] == [(0, "new"), (1, "continues")] and assigned[0][0] == assigned[1][0]
    (o,) = _inferred(seen, 1)
    assert (o.tool_use_id, o.status, o.from_turn) == (calls[0].call_id, "result", 0)
    _check_tools_pane(seen, [calls[0].call_id], [calls[0].call_id])


async def test_two_responses_conversations_of_one_scenario_continued_together_stay_apart(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """Two conversations of one scenario, started together, each continued by ``previous_response_id``. serve gave
    both the same response and call ids (seeded by scenario, turn and attempt only): the second follow-up named the
    first conversation's response, serve counted it as a retry, and the proxy put both in one conversation. The ids
    are now seeded by the conversation too (its first input, then the response it continues)."""
    app, seen, _record = _proxy(upstream, tmp_path)
    with BackgroundServer(app) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY)
        try:
            firsts = [await _completed(client, f"Weather in {city}?") for city in ("Paris", "Rome")]
            calls = [[i for i in r.output if i.type == "function_call"][0] for r in firsts]
            assert firsts[0].id != firsts[1].id and calls[0].call_id != calls[1].call_id
            seconds = []
            for first, call in zip(firsts, calls, strict=True):
                output: list[Any] = [{"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}]
                seconds.append(await _completed(client, output, first.id))
        finally:
            await client.close()
    assert seconds[0].id != seconds[1].id
    assert [s.previous_response_id for s in seconds] == [f.id for f in firsts]
    assigned = [(o.conversation, o.conversation_turn, o.how) for o in seen if isinstance(o, O.ConversationAssigned)]
    assert [a[1:] for a in assigned] == [(0, "new"), (0, "new"), (1, "continues"), (1, "continues")]
    a, b = assigned[0][0], assigned[1][0]
    assert a != b and [x[0] for x in assigned[2:]] == [a, b]
    starts = [(o.turn, o.attempt) for o in seen if isinstance(o, O.AttemptStarted)]
    assert [attempt for _turn, attempt in starts] == [0, 0, 0, 0]  # (no follow-up was taken for a retry)
    inferred = [(o.tool_use_id, o.status) for o in seen if isinstance(o, O.ToolExecutionInferred)]
    assert sorted(inferred) == sorted((c.call_id, "result") for c in calls)


async def test_a_recorded_responses_conversation_continued_by_previous_response_id_replays_its_tool_results(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """Its follow-up sends only the function_call_output (the call itself is in the response, never in a request):
    the replay found no call for the result and failed the tool ("no recorded result for get_weather(...)"). The
    calls are now known from the recorded stream too, and each continued request's results are kept."""
    from inspector.sessions.sources import load_recording, replay_session

    app, _seen, record = _proxy(upstream, tmp_path)
    with BackgroundServer(app) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY)
        try:
            first = await _completed(client, "Weather in Paris?")
            call = [i for i in first.output if i.type == "function_call"][0]
            output: list[Any] = [{"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}]
            await _completed(client, output, first.id)
        finally:
            await client.close()
    app.close()
    session = replay_session(load_recording(record), speed=math.inf)
    replayed: list[O.Observation] = []
    session.bus.subscribe(replayed.append)
    result = await session.run()
    assert result.status == "finished", result.error
    ends = [(o.id, str(o.state), o.error) for o in replayed if isinstance(o, O.ToolStateChanged)]
    assert (call.call_id, "succeeded", None) in ends and not [e for e in ends if e[1] == "failed"]
    results = [o for o in replayed if isinstance(o, O.ToolResult)]
    assert [r.content for r in results] == ["18 C"]


# --- the pure part ----------------------------------------------------------------------------------------------


def _seen(*ids: str) -> dict[str, SeenToolUse]:
    return {t: SeenToolUse(t, "f", 0, 0, i, 1.0, 1.5) for i, t in enumerate(ids)}


def test_only_the_results_after_the_last_assistant_turn_count() -> None:
    """Chat: results of an older turn (before the last assistant message) are not this request's; a user message
    after the tool messages does not hide them."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "call_old", "type": "function", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "call_old", "content": "old"},
        {"role": "assistant", "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": [{"type": "text", "text": "abc"}]},
        {"role": "user", "content": "and then?"},
    ]
    out = infer_tool_executions(_seen("call_a"), request_results({"messages": messages}, "openai_chat"), 3.0)
    assert [(o.tool_use_id, o.status, o.result_chars, o.is_error) for o in out] == [("call_a", "result", 3, None)]
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert request_results({"messages": plain}, "openai_chat") == []


def test_responses_continued_by_previous_response_id_sends_only_outputs() -> None:
    body = {
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}],
    }
    out = infer_tool_executions(_seen("c1"), request_results(body, "openai_responses"), 2.0)
    assert [(o.tool_use_id, o.status, o.since_block_stop) for o in out] == [("c1", "result", 1.0)]
    assert request_results({"input": "just text"}, "openai_responses") == []


def test_anthropic_requests_are_read_as_before() -> None:
    msgs = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]
    assert request_results({"messages": msgs}, "anthropic") is msgs
    (o,) = infer_tool_executions(_seen("t"), request_results({"messages": msgs}, "anthropic"), 2.0)
    assert o.is_error is False  # Messages results have the flag: absent means no error


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda c: (
        st.lists(c, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["role", "type", "content", "call_id", "tool_call_id", "tool_calls", "function", "output", "id", "x"]
            ),
            c,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=examples(200), deadline=None)
@given(body=JSONISH, family=st.sampled_from(["anthropic", "openai_chat", "openai_responses"]))
def test_any_request_body_gives_a_list_and_never_raises(body: object, family: str) -> None:
    for b in (body, {"messages": body}, {"input": body}):
        hist = request_results(b, family)
        assert isinstance(hist, list)
        out = infer_tool_executions(_seen("a"), hist, 1.0)
        assert all(o.status in ("result", "missing", "unknown") for o in out)
        orjson.dumps([o.to_json() for o in out])

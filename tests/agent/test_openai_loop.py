"""The agent loop over the official openai SDK (Chat Completions and Responses) against a fake endpoint: parallel
tool calls whose arguments arrive interleaved, each tool started as its call closes, the history sent back valid
OpenAI, the SDK's own retry of a 429 seen as a try, cancel mid-stream. No sleeps: the fake stream waits on events
the test sets when the loop has done something."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from inspector.agent.providers import OpenAIProvider, function_tool, tool_result_text
from inspector.agent.toolbox.spec import ToolSpec
from inspector.observe import observations as O
from inspector.sessions.sources import Session, openai_session
from inspector.testing.loop import RUN_TIMEOUT, Observed, assert_no_leftovers, dumps_all
from inspector.testing.openai_fake import (
    KEY,
    FakeOpenAI,
    ResponsesScript,
    Status,
    Stream,
    chat_text,
    chunk,
    responses_text,
    sse,
    tool_delta,
)
from inspector.testing.secrets import assert_no_key


def assert_valid_chat_history(messages: list[dict[str, Any]]) -> None:
    """Chat Completions' rule: every assistant message with tool_calls is followed by exactly one tool message per
    call, in order, before anything else; every tool message answers such a call; arguments are JSON text."""
    import orjson

    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] in ("system", "user", "assistant", "tool"), m
        if m["role"] == "tool":
            raise AssertionError(f"messages[{i}]: a tool message not right after its assistant tool_calls")
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            for c in m["tool_calls"]:
                assert c["type"] == "function" and isinstance(c["function"]["name"], str)
                assert isinstance(orjson.loads(c["function"]["arguments"]), dict)
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert [a["role"] for a in answers] == ["tool"] * len(ids), answers
            assert [a["tool_call_id"] for a in answers] == ids
            assert all(isinstance(a["content"], str) for a in answers)
            i += 1 + len(ids)
            continue
        i += 1


def assert_valid_responses_input(items: list[dict[str, Any]]) -> None:
    """Responses' rule: every function_call item has exactly one function_call_output with its call_id, after it."""
    calls = [it["call_id"] for it in items if it.get("type") == "function_call"]
    outs = [it["call_id"] for it in items if it.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outs) and len(set(calls)) == len(calls), (calls, outs)
    for it in items:
        if it.get("type") == "function_call_output":
            at = items.index(it)
            assert any(x.get("call_id") == it["call_id"] for x in items[:at] if x.get("type") == "function_call")


def _tools(log: list[str], gate: dict[str, asyncio.Event] | None = None) -> dict[str, ToolSpec]:
    def make(name: str) -> ToolSpec:
        async def fn(tool_input: dict[str, Any]) -> str:
            log.append(name)
            if gate is not None and name in gate:
                await gate[name].wait()
            return f"{name}:{tool_input}"

        schema = {"type": "object", "properties": {"v": {"type": "integer"}}}
        return ToolSpec(name, f"the {name} tool", schema, fn, concurrency_safe=True)

    return {n: make(n) for n in ("alpha", "beta")}


def _session(fake: FakeOpenAI, api: str, tools: dict[str, ToolSpec], **kw: Any) -> Session:
    return openai_session(
        "gpt-test",
        "use both tools",
        api=api,
        api_key=KEY,
        base_url="http://fake-openai.local/v1",
        builtin=False,
        user_tools=tools,
        http_client=fake.client(),
        **kw,
    )


def _running(obs: Observed, tool_id: str) -> bool:
    return "running" in obs.tool_states(tool_id)


async def test_chat_parallel_tools_interleaved_start_as_calls_close_and_history_is_valid() -> None:
    both_running = asyncio.Event()
    calls_part = sse(
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, id="call_a", name="alpha")),
        chunk(tool_delta(1, id="call_b", name="beta")),
        chunk(tool_delta(0, args='{"v":')),
        chunk(tool_delta(1, args='{"v":')),
        chunk(tool_delta(0, args=" 1}")),
        chunk(tool_delta(1, args=" 2}")),
        chunk({}, "tool_calls"),
    )
    usage = sse(chunk(None, usage={"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}), done=True)
    fake = FakeOpenAI([Stream([calls_part, both_running, usage]), Stream([chat_text("both done")])])
    log: list[str] = []
    s = _session(fake, "chat", _tools(log))
    obs = Observed(s.bus)
    # the stream goes on (usage, [DONE]) only once both tools run: they started as their calls closed, mid-stream
    obs.on(lambda o: both_running.set() if _running(obs, "call_a") and _running(obs, "call_b") else None)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert result.turns == 2 and sorted(log) == ["alpha", "beta"]
    # one event row per SSE event (8 chunks, the usage chunk, [DONE]), though the finish chunk gives three steps
    assert [r.sse.seq for r in obs.sse(turn=0)] == list(range(10))
    # tool_use observations with the parsed arguments, once each
    assert [(u.id, u.name, u.input) for u in obs.of(O.ToolUse)] == [
        ("call_a", "alpha", {"v": 1}),
        ("call_b", "beta", {"v": 2}),
    ]
    # both tools were running before the usage chunk was read
    reads = obs.of(O.ReadReceived)
    last_read = obs.items.index(reads[-2] if len(reads) > 2 else reads[-1])
    first_turn_last_read = max(i for i, o in enumerate(obs.items) if isinstance(o, O.ReadReceived) and o.turn == 0)
    running = [
        i for i, o in enumerate(obs.items) if isinstance(o, O.ToolStateChanged) and o.state == "running" and o.turn == 0
    ]
    assert len(running) == 2 and max(running) < first_turn_last_read, (running, first_turn_last_read, last_read)
    # the requests: Chat Completions, streamed with usage, function tools; the second carries the valid history
    assert [r["path"] for r in fake.requests] == ["/v1/chat/completions"] * 2
    first, second = (r["body"] for r in fake.requests)
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["tools"][0] == {
        "type": "function",
        "function": {
            "name": "alpha",
            "description": "the alpha tool",
            "parameters": {"type": "object", "properties": {"v": {"type": "integer"}}},
        },
    }
    msgs = second["messages"]
    assert msgs[0] == {"role": "user", "content": "use both tools"}
    assert msgs[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "alpha", "arguments": '{"v": 1}'}},
            {"id": "call_b", "type": "function", "function": {"name": "beta", "arguments": '{"v": 2}'}},
        ],
    }
    assert [(m["role"], m["tool_call_id"]) for m in msgs[2:]] == [("tool", "call_a"), ("tool", "call_b")]
    assert msgs[2]["content"] == "alpha:{'v': 1}"
    assert_valid_chat_history(msgs)
    assert_valid_chat_history(list(result.messages))
    assert result.messages[-1] == {"role": "assistant", "content": "both done"}
    # the request as sent is what AttemptStarted shows (the spliced history), the key in no observation
    started = obs.of(O.AttemptStarted)
    assert started[1].url == "http://fake-openai.local/v1/chat/completions"
    assert started[1].body["messages"] == msgs
    assert "authorization" not in {k.lower() for k in started[1].headers} or KEY not in str(started[1].headers)
    assert_no_key(KEY, {"observations": dumps_all(obs.items)})
    assert_no_leftovers()


async def test_responses_parallel_tools_each_starts_as_its_call_closes() -> None:
    b_running = asyncio.Event()
    s_ = ResponsesScript()
    fa = {"id": "fc_a", "type": "function_call", "call_id": "call_a", "name": "alpha", "arguments": ""}
    fb = {"id": "fc_b", "type": "function_call", "call_id": "call_b", "name": "beta", "arguments": ""}
    head = b"".join(
        [
            s_.ev("response.created", response=s_.response("in_progress")),
            s_.ev("response.output_item.added", output_index=0, item=fa),
            s_.ev("response.output_item.added", output_index=1, item=fb),
            s_.ev("response.function_call_arguments.delta", item_id="fc_a", output_index=0, delta='{"v":'),
            s_.ev("response.function_call_arguments.delta", item_id="fc_b", output_index=1, delta='{"v":'),
            s_.ev("response.function_call_arguments.delta", item_id="fc_b", output_index=1, delta="2}"),
            s_.ev("response.function_call_arguments.done", item_id="fc_b", output_index=1, arguments='{"v":2}'),
        ]
    )
    done_a, done_b = {**fa, "arguments": '{"v":1}', "status": "completed"}, {**fb, "arguments": '{"v":2}'}
    tail = b"".join(
        [
            s_.ev("response.function_call_arguments.delta", item_id="fc_a", output_index=0, delta="1}"),
            s_.ev("response.function_call_arguments.done", item_id="fc_a", output_index=0, arguments='{"v":1}'),
            s_.ev("response.output_item.done", output_index=0, item=done_a),
            s_.ev("response.output_item.done", output_index=1, item=done_b),
            s_.ev(
                "response.completed",
                response=s_.response("completed", [done_a, done_b], {"input_tokens": 5, "output_tokens": 4}),
            ),
        ]
    )
    fake = FakeOpenAI([Stream([head, b_running, tail]), Stream([responses_text("ok")])])
    log: list[str] = []
    s = _session(fake, "responses", _tools(log), system="be brief")
    obs = Observed(s.bus)
    # beta's call closed first: it runs while alpha's arguments are still streaming
    obs.on(lambda o: b_running.set() if _running(obs, "call_b") else None)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert log[0] == "beta" and sorted(log) == ["alpha", "beta"]
    b_run = next(
        i
        for i, o in enumerate(obs.items)
        if isinstance(o, O.ToolStateChanged) and o.id == "call_b" and o.state == "running"
    )
    a_use = next(i for i, o in enumerate(obs.items) if isinstance(o, O.ToolUse) and o.id == "call_a")
    assert b_run < a_use
    assert [r["path"] for r in fake.requests] == ["/v1/responses"] * 2
    first, second = (r["body"] for r in fake.requests)
    assert first["instructions"] == "be brief" and first["stream"] is True
    assert first["tools"][1] == {
        "type": "function",
        "name": "beta",
        "description": "the beta tool",
        "parameters": {"type": "object", "properties": {"v": {"type": "integer"}}},
    }
    items = second["input"]
    assert items[0] == {"role": "user", "content": "use both tools"}
    assert items[1:3] == [
        {"type": "function_call", "call_id": "call_a", "name": "alpha", "arguments": '{"v":1}'},
        {"type": "function_call", "call_id": "call_b", "name": "beta", "arguments": '{"v":2}'},
    ]
    assert [(i["type"], i["call_id"]) for i in items[3:]] == [
        ("function_call_output", "call_a"),
        ("function_call_output", "call_b"),
    ]
    assert_valid_responses_input(items)
    assert result.messages[-1] == {"role": "assistant", "content": "ok"}
    assert_no_leftovers()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_429_with_retry_after_ms_is_retried_by_the_sdk_and_shown_as_a_try(api: str) -> None:
    err = {"error": {"type": "rate_limit_exceeded", "message": "slow down", "code": None}}
    ok = chat_text("fine") if api == "chat" else responses_text("fine")
    fake = FakeOpenAI([Status(429, err, {"retry-after-ms": "1"}), Stream([ok])])
    s = _session(fake, api, {})
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert len(fake.requests) == 2
    assert [r["headers"].get("x-stainless-retry-count") for r in fake.requests] == ["0", "1"]
    (f,) = obs.of(O.HttpTryFailed)
    assert (f.status, f.try_index, f.error_type, f.error_message) == (429, 0, "rate_limit_exceeded", "slow down")
    assert f.retry_in == pytest.approx(0.001) and f.headers == {"retry-after-ms": "1"}
    assert f.url.endswith("/chat/completions" if api == "chat" else "/responses")
    assert [r.try_index for r in obs.of(O.ResponseStarted)] == [1]
    assert len(obs.of(O.AttemptStarted)) == 1  # one attempt of the loop, two tries of the SDK
    assert "waiting_retry" in obs.states()


async def test_an_error_status_the_sdk_gives_up_on_ends_the_loop_with_one_line() -> None:
    err = {"error": {"type": "invalid_request_error", "message": "bad model", "code": "model_not_found"}}
    fake = FakeOpenAI([Status(404, err)])
    s = _session(fake, "chat", {})
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "error"
    assert result.error == "HTTP 404: invalid_request_error: bad model"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_cancel_mid_stream_keeps_every_tool_call_answered(api: str) -> None:
    never = asyncio.Event()  # the stream stays open: the cancel comes mid-stream
    hold = {"alpha": asyncio.Event()}  # alpha runs until cancelled
    if api == "chat":
        head = sse(
            chunk({"role": "assistant", "content": "let me see"}),
            chunk(tool_delta(0, id="call_a", name="alpha", args='{"v": 1}')),
            chunk({}, "tool_calls"),
        )
    else:
        s_ = ResponsesScript()
        fa = {"id": "fc_a", "type": "function_call", "call_id": "call_a", "name": "alpha", "arguments": ""}
        fb = {"id": "fc_b", "type": "function_call", "call_id": "call_b", "name": "beta", "arguments": ""}
        head = b"".join(
            [
                s_.ev("response.created", response=s_.response("in_progress")),
                s_.ev("response.output_item.added", output_index=0, item=fa),
                s_.ev("response.function_call_arguments.delta", item_id="fc_a", output_index=0, delta='{"v": 1}'),
                s_.ev("response.function_call_arguments.done", item_id="fc_a", output_index=0, arguments='{"v": 1}'),
                s_.ev("response.output_item.added", output_index=1, item=fb),
                s_.ev("response.function_call_arguments.delta", item_id="fc_b", output_index=1, delta='{"v"'),
            ]
        )
    fake = FakeOpenAI([Stream([head, never])])
    log: list[str] = []
    s = _session(fake, api, _tools(log, hold))
    obs = Observed(s.bus)
    obs.on(lambda o: s.controller.cancel() if isinstance(o, O.ToolStateChanged) and o.state == "running" else None)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "cancelled"
    assert log == ["alpha"]
    hist = list(result.messages)
    if api == "chat":
        assert_valid_chat_history(hist)
        assert hist[1]["tool_calls"][0]["id"] == "call_a" and hist[1]["content"] == "let me see"
        assert hist[2]["role"] == "tool" and hist[2]["tool_call_id"] == "call_a"
        assert "cancel" in hist[2]["content"]
    else:
        assert_valid_responses_input(hist)
        assert [i.get("call_id") for i in hist[1:]] == ["call_a", "call_a"]  # beta's call never closed: not kept
        assert "cancel" in hist[2]["output"]
    (ended,) = obs.of(O.AttemptEnded)
    assert ended.status == "cancelled"
    assert_no_leftovers()


def test_function_tool_and_result_text_shapes() -> None:
    d = {"name": "f", "description": "d", "input_schema": {"type": "object"}}
    assert function_tool(d, "chat") == {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
    }
    assert function_tool(d, "responses") == {
        "type": "function",
        "name": "f",
        "description": "d",
        "parameters": {"type": "object"},
    }
    already = {"type": "function", "function": {"name": "g", "parameters": {}}}
    assert function_tool(already, "chat") is already
    assert tool_result_text("x") == "x"
    assert tool_result_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "ab"
    assert tool_result_text([{"type": "image", "source": {}}]) == '[{"type":"image","source":{}}]'
    with pytest.raises(ValueError):
        OpenAIProvider("completions")  # type: ignore[arg-type]


@pytest.mark.parametrize("fault", ["cut", "error_object"])
async def test_a_failure_after_the_first_byte_is_our_retry_and_its_tools_are_discarded(fault: str) -> None:
    """A stream cut before its end (no finish_reason, no [DONE]), or an error object mid-stream with HTTP 200: the
    loop's own retry (a new attempt), the first attempt's calls not kept, the history valid."""
    if fault == "cut":
        bad = sse(chunk({"role": "assistant", "content": "par"}), chunk(tool_delta(0, id="call_x", name="alpha")))
    else:
        bad = sse(
            chunk({"role": "assistant", "content": "par"}),
            {"error": {"type": "server_error", "message": "upstream hiccup"}},
        )
    fake = FakeOpenAI([Stream([bad]), Stream([chat_text("whole answer")])])
    log: list[str] = []
    s = _session(fake, "chat", _tools(log))
    s.loop.config.backoff_base = 0.0
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    ends = [(e.attempt, e.status) for e in obs.of(O.AttemptEnded)]
    assert ends == [(0, "failed"), (1, "complete")]
    reason = obs.of(O.AttemptEnded)[0].reason
    assert reason is not None
    assert reason.startswith("stream ended before") if fault == "cut" else "server_error" in reason, reason
    assert log == []  # the cut call never closed: never ran
    if fault == "cut":  # (said in the chat stream's words: it has no content_block_stop)
        (why,) = [o.error for o in obs.of(O.ToolStateChanged) if o.state == "not_run"]
        assert why == "the block never got a finish_reason that completes it (stream cut); the tool was not run"
    assert list(result.messages) == [
        {"role": "user", "content": "use both tools"},
        {"role": "assistant", "content": "whole answer"},
    ]
    assert len(fake.requests) == 2 and fake.requests[1]["body"]["messages"] == [
        {"role": "user", "content": "use both tools"}
    ]


@pytest.mark.parametrize(("header", "value"), [("retry-after", "300"), ("retry-after-ms", "200000")])
async def test_a_wait_beyond_the_openai_sdks_limit_is_no_retry_and_said_so(header: str, value: str) -> None:
    """The openai SDK (unlike anthropic's) does not retry when the server asks for more than 120 s: the try is shown
    as not retried (retry_in None), never as 'SDK retries in 5 min'."""
    err = {"error": {"type": "rate_limit_exceeded", "message": "come back later"}}
    fake = FakeOpenAI([Status(429, err, {header: value}), Stream([chat_text("never")])])
    s = _session(fake, "chat", {})
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert len(fake.requests) == 1
    assert result.status == "error" and result.error == "HTTP 429: rate_limit_exceeded: come back later"
    (f,) = obs.of(O.HttpTryFailed)
    assert f.retry_in is None
    assert "waiting_retry" not in obs.states()


async def test_a_wait_within_the_limit_is_the_servers_and_past_it_the_backoff() -> None:
    from inspector.agent.tries import OPENAI_MAX_RETRY_AFTER, retry_wait, sdk_would_retry

    assert retry_wait(0, {"retry-after": "120"}, OPENAI_MAX_RETRY_AFTER) == 120.0
    assert retry_wait(1, {"retry-after": "0"}, OPENAI_MAX_RETRY_AFTER) == 1.0  # backoff
    assert not sdk_would_retry(503, {"retry-after": "121", "x-should-retry": "true"}, OPENAI_MAX_RETRY_AFTER)
    assert sdk_would_retry(503, {"retry-after": "121"})  # the anthropic SDK's rule is unchanged
    assert retry_wait(0, {"retry-after": "300"}) == 300.0


async def test_a_server_that_echoes_the_key_never_gets_it_into_an_output(tmp_path: Path) -> None:
    """A compatible server that says the key back (in a 401's body, and in a stream's text): the error line, every
    observation and the recording mask it."""
    err = {"error": {"type": "invalid_request_error", "message": f"Incorrect API key provided: {KEY}"}}
    fake = FakeOpenAI([Status(401, err)])
    rec = tmp_path / "r.jsonl"
    s = _session(fake, "chat", {}, record=rec)
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.error is not None
    assert result.status == "error" and result.error.startswith("HTTP 401: invalid_request_error: Incorrect API key")
    assert_no_key(KEY, {"error": result.error, "observations": dumps_all(obs.items), "recording": rec.read_bytes()})

    # the whole key in one delta, the event itself split across two reads (a key split across two deltas of an
    # OpenAI stream is not covered yet: the redactor joins Anthropic's text_delta fragments only)
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": f"your key is {KEY}"}),
        chunk({}, "stop"),
        done=True,
    )
    cut = body.index(KEY.encode()) + 10
    fake = FakeOpenAI([Stream([body[:cut], body[cut:]])])
    s = _session(fake, "chat", {})
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert_no_key(KEY, {"observations": dumps_all(obs.items)})


async def test_step_event_goes_one_sse_event_at_a_time() -> None:
    """A paused run stepped one event at a time holds once per SSE event, not once per neutral step: the finish
    chunk (two blocks close, then the message delta) is one step of the user's."""
    body = sse(
        chunk({"role": "assistant", "content": "hi"}),
        chunk(tool_delta(0, id="call_a", name="alpha", args='{"v": 1}')),
        chunk({}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
        done=True,
    )
    fake = FakeOpenAI([Stream([body]), Stream([chat_text("ok")])])
    s = _session(fake, "chat", _tools([]), max_turns=2)
    obs = Observed(s.bus)
    s.controller.pause()
    obs.on(lambda o: s.controller.step("event") if isinstance(o, O.StreamHeld) else None)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    holds = [h for h in obs.of(O.StreamHeld) if h.turn == 0 and h.attempt == 0]
    rows = obs.sse(turn=0)
    assert len(rows) == 5  # 4 chunks and [DONE]
    assert len(holds) == len(rows) - 1  # one hold before each SSE event (the first came with the turn's hold)
    # between two holds, exactly one event row: the whole event was processed at once
    seq = [
        type(o).__name__
        for o in obs.items
        if getattr(o, "turn", None) == 0 and isinstance(o, (O.StreamHeld, O.SSEEventSeen))
    ]
    assert seq == ["StreamHeld", "SSEEventSeen"] * 5  # (the first hold is the turn's, before its request)


async def test_arguments_that_do_not_parse_are_not_run_and_go_back_as_an_empty_object() -> None:
    """A call whose arguments are not JSON: never run, its tool message says why, and the history sends `{}` as its
    arguments (never the broken text, which a server parsing the history would refuse)."""
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, id="call_bad", name="alpha", args='{"v": 1')),
        chunk(tool_delta(1, id="call_ok", name="beta", args='{"v": 2}')),
        chunk({}, "tool_calls"),
        done=True,
    )
    fake = FakeOpenAI([Stream([body]), Stream([chat_text("ok")])])
    log: list[str] = []
    s = _session(fake, "chat", _tools(log))
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert log == ["beta"]
    msgs = fake.requests[1]["body"]["messages"]
    assert [c["function"]["arguments"] for c in msgs[1]["tool_calls"]] == ["{}", '{"v": 2}']
    assert msgs[2]["tool_call_id"] == "call_bad" and "not" in msgs[2]["content"].lower()
    assert_valid_chat_history(msgs)

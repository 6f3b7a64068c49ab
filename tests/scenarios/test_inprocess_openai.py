"""The in-process fake API (``ScenarioServer``, ``FaultedScenarioServer``) answers the OpenAI families too, through
the same core: the openai SDK over its ``httpx2.MockTransport`` gets the scripted turns, with serve's bytes."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2
import openai
from openai.types.responses import ResponseInputParam

from inspector.core.pacing import Pacer
from inspector.net.faults import render_faulted
from inspector.net.inprocess import FaultedScenarioServer
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.model import TextBlock, ToolUseBlock
from inspector.scenarios.transport import ScenarioServer

SC = get_scenario("weather")
# as a harness sends it (the SDK's FunctionToolParam wants "strict" too, which the fake never needed)
TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]


def client(server: ScenarioServer, **kw: Any) -> openai.AsyncOpenAI:
    http = httpx2.AsyncClient(transport=server.transport())
    return openai.AsyncOpenAI(base_url="http://scenario.local/v1", api_key="k", http_client=http, **kw)


async def test_chat_and_responses_in_process() -> None:
    server = ScenarioServer(SC, Pacer(math.inf))
    c = client(server)
    async with c.chat.completions.stream(model=SC.model, messages=[{"role": "user", "content": "hi"}]) as s:
        final = await s.get_final_completion()
    calls, block = final.choices[0].message.tool_calls, SC.turns[0].blocks[1]
    assert calls is not None and isinstance(block, ToolUseBlock)
    assert json.loads(calls[0].function.arguments) == block.input
    async with c.responses.stream(model=SC.model, input="hi", tools=TOOLS) as s:
        resp = await s.get_final_response()
    fc = next(o for o in resp.output if o.type == "function_call")
    outputs: ResponseInputParam = [{"type": "function_call_output", "call_id": fc.call_id, "output": "18"}]
    async with c.responses.stream(model=SC.model, input=outputs, previous_response_id=resp.id) as s:
        second = await s.get_final_response()
    text = SC.turns[1].blocks[0]
    assert isinstance(text, TextBlock) and second.output_text == text.text
    assert [(r.path, r.turn, r.attempt) for r in server.requests] == [
        ("/v1/chat/completions", 0, 0),
        ("/v1/responses", 0, 0),
        ("/v1/responses", 1, 0),
    ]


async def test_the_in_process_checks_answer_in_openai_form() -> None:
    server = ScenarioServer(SC, Pacer(math.inf))
    r = await httpx2.AsyncClient(transport=server.transport()).post(
        "http://scenario.local/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "call_1"}]}], "stream": True},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages.[0].role"


async def test_faulted_in_process_is_serves_bytes_and_the_sdk_retries() -> None:
    server = FaultedScenarioServer(SC, "http_429,padded", Pacer(math.inf))
    c = client(server)
    async with c.chat.completions.stream(model=SC.model, messages=[{"role": "user", "content": "hi"}]) as s:
        await s.get_final_completion()
    assert [(r.turn, r.attempt, r.response and r.response.status) for r in server.requests] == [
        (0, 0, 429),
        (0, 1, 200),
    ]
    last = server.requests[-1].response
    assert last is not None and last.plan is not None
    served = last.plan
    assert served.body == render_faulted(SC, "http_429,padded", 0, 1, api="chat").body


async def test_attempts_are_counted_per_turn_for_the_openai_families_too() -> None:
    # an OpenAI family's attempt key is (family, name, turn): the counters were keyed by the scenario's name
    server = ScenarioServer(SC, Pacer(math.inf))
    c = client(server)
    async with c.chat.completions.stream(model=SC.model, messages=[{"role": "user", "content": "hi"}]) as s:
        await s.get_final_completion()
    assert server.attempts == {0: 1}
    async with c.responses.stream(model=SC.model, input="hi", tools=TOOLS) as s:
        resp = await s.get_final_response()
    fc = next(o for o in resp.output if o.type == "function_call")
    outputs: ResponseInputParam = [{"type": "function_call_output", "call_id": fc.call_id, "output": "18"}]
    async with c.responses.stream(model=SC.model, input=outputs, previous_response_id=resp.id) as s:
        await s.get_final_response()
    assert server.attempts == {0: 2, 1: 1}  # both families' requests of turn 0
    server.reset()
    assert server.attempts == {}

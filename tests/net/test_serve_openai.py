"""`inspector serve` speaks OpenAI too: `/v1/chat/completions` and `/v1/responses` answer the same scenarios,
driven here by the openai SDK (its streaming helpers and accumulators are the reference)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.model import Scenario, TextBlock, ToolUseBlock
from inspector.testing.pytest_plugin import InspectorServer, InspectorServerFactory

Turn = tuple[str, list[dict[str, str]], str | None]  # a turn's text, its tool calls (id, name, arguments), finish
Seen = list[tuple[str, list[tuple[str, Any]]]]  # per turn: the text and the (tool name, input) calls
TurnFn = Callable[[openai.OpenAI, Scenario, list[Any]], Turn]

pytest_plugins = ["inspector.testing.pytest_plugin"]

KEY = "sk-proj-CANARY-openai-serve-0000000000"


def client_for(server: InspectorServer, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, **kw)


def scripted(sc: Scenario, turn: int) -> tuple[str, list[tuple[str, dict[str, Any] | None]]]:
    """The text and (tool name, input) calls a turn scripts."""
    blocks = sc.turns[turn].blocks
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    calls = [(b.name, b.input) for b in blocks if isinstance(b, ToolUseBlock)]
    return text, calls


def tool_defs(sc: Scenario) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = sc.request_params().get("tools", [])
    return tools


def chat_tools(sc: Scenario) -> list[Any]:  # (the SDK's tool params are TypedDicts: passed as JSON)
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]},
        }
        for t in tool_defs(sc)
    ]


def responses_tools(sc: Scenario) -> list[Any]:
    return [
        {
            "type": "function",
            "name": t["name"],
            "description": t.get("description", ""),
            "parameters": t["input_schema"],
        }
        for t in tool_defs(sc)
    ]


def tool_result(sc: Scenario, name: str, args: dict[str, Any]) -> str:
    """The scripted tool's result (a simulated tool's outcome), or a placeholder for a built-in."""
    sim = next((t for t in sc.simulated_tools if t.name == name), None)
    if sim is None:
        return f"(result of {name})"
    result = sim.outcome(args)[0]
    return result if isinstance(result, str) else json.dumps(result)


def chat_create_turn(client: openai.OpenAI, sc: Scenario, messages: list[Any]) -> Turn:
    """One turn with chat.completions.create(stream=True): the chunks merged by hand."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    stream = client.chat.completions.create(
        model=sc.model,
        messages=messages,
        tools=chat_tools(sc),
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            for tc in choice.delta.tool_calls or []:
                c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                c["id"] += tc.id or ""
                c["name"] += (tc.function.name or "") if tc.function else ""
                c["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = choice.finish_reason or finish
    assert usage is not None and usage.prompt_tokens > 0
    return "".join(text), [calls[k] for k in sorted(calls)], finish


def chat_stream_turn(client: openai.OpenAI, sc: Scenario, messages: list[Any]) -> Turn:
    """One turn with chat.completions.stream(): the SDK's own accumulator."""
    with client.chat.completions.stream(model=sc.model, messages=messages, tools=chat_tools(sc)) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    calls = [
        {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        for tc in choice.message.tool_calls or []
    ]
    return choice.message.content or "", calls, choice.finish_reason


def run_chat(server: InspectorServer, sc: Scenario, turn_fn: TurnFn) -> Seen:
    client = client_for(server)
    messages: list[Any] = [{"role": "user", "content": sc.prompt}]
    seen: Seen = []
    for _ in range(len(sc.turns) + 1):
        text, calls, finish = turn_fn(client, sc, messages)
        seen.append((text, [(c["name"], json.loads(c["arguments"])) for c in calls]))
        assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        messages.append(assistant)
        if finish != "tool_calls":
            assert finish == "stop"
            break
        for c in calls:
            result = tool_result(sc, c["name"], json.loads(c["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    return seen


def run_responses(server: InspectorServer, sc: Scenario, *, chained: bool = False) -> Seen:
    client = client_for(server)
    items: list[Any] = [{"role": "user", "content": sc.prompt}]
    previous: str | None = None
    seen: Seen = []
    for _ in range(len(sc.turns) + 1):
        kw: dict[str, Any] = {"previous_response_id": previous} if chained and previous else {}
        with client.responses.stream(model=sc.model, input=items, tools=responses_tools(sc), **kw) as stream:
            resp = stream.get_final_response()
        assert resp.status == "completed" and resp.usage is not None and resp.usage.input_tokens > 0
        calls = [o for o in resp.output if o.type == "function_call"]
        seen.append((resp.output_text, [(c.name, json.loads(c.arguments)) for c in calls]))
        if not calls:
            break
        outputs = [
            {
                "type": "function_call_output",
                "call_id": c.call_id,
                "output": tool_result(sc, c.name, json.loads(c.arguments)),
            }
            for c in calls
        ]
        if chained:
            previous, items = resp.id, outputs
        else:
            items += [o.model_dump(exclude_none=True) for o in resp.output] + outputs
    return seen


def expected(sc: Scenario) -> Seen:
    return [scripted(sc, t) for t in range(len(sc.turns))]


@pytest.mark.parametrize("name", ["weather", "parse_date"])
@pytest.mark.parametrize("turn_fn", [chat_create_turn, chat_stream_turn], ids=["create", "stream"])
def test_chat_completions_run_the_scenario_end_to_end(
    inspector_server: InspectorServerFactory, name: str, turn_fn: TurnFn
) -> None:
    sc = get_scenario(name)
    server = inspector_server(name)
    assert run_chat(server, sc, turn_fn) == expected(sc)
    server.assert_valid_histories()
    server.assert_no_rejections()
    assert [(r.path, r.turn, r.attempt) for r in server.message_requests] == [
        ("/v1/chat/completions", t, 0) for t in range(len(sc.turns))
    ]


@pytest.mark.parametrize("name", ["weather", "parse_date"])
@pytest.mark.parametrize("chained", [False, True], ids=["items", "previous_response_id"])
def test_responses_run_the_scenario_end_to_end(
    inspector_server: InspectorServerFactory, name: str, chained: bool
) -> None:
    sc = get_scenario(name)
    server = inspector_server(name)
    assert run_responses(server, sc, chained=chained) == expected(sc)
    server.assert_valid_histories()
    server.assert_no_rejections()
    assert [(r.path, r.turn, r.attempt) for r in server.message_requests] == [
        ("/v1/responses", t, 0) for t in range(len(sc.turns))
    ]

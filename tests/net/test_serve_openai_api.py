"""`inspector serve`'s OpenAI endpoints answer like OpenAI: 401 without a bearer key, 400 for missing fields and
broken tool-call histories (``lenient`` turns them off), 404 for unknown models, ``/v1/models`` for both
families, ``stream: false`` answers, the placeholder past the script's end, and attempts counted per family."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from openai.types.responses import FunctionTool, ResponseFunctionToolCall

from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.model import TextBlock, ToolUseBlock
from inspector.testing.pytest_plugin import InspectorServer, InspectorServerFactory

pytest_plugins = ["inspector.testing.pytest_plugin"]

KEY = "sk-proj-CANARY-openai-api-00000000000"
SC = get_scenario("weather")
_TEXT0, _CALL0, _TEXT1 = SC.turns[0].blocks[0], SC.turns[0].blocks[1], SC.turns[1].blocks[0]
assert isinstance(_TEXT0, TextBlock) and isinstance(_CALL0, ToolUseBlock) and isinstance(_TEXT1, TextBlock)
# the script's: turn 0's text and call, turn 1's text
TEXT0, CALL0_INPUT, TEXT1 = _TEXT0.text, _CALL0.input, _TEXT1.text
USER: Any = {"role": "user", "content": SC.prompt}  # (Any: the SDKs take their messages as TypedDicts)


SHARED: list[dict[str, Any]] = [
    {},
    {"lenient": True},
    {"validate_history": False},
    {"faults": "http_429"},
    {"faults": "error_event"},
]


Key = tuple[tuple[str, Any], ...]
GetServer = Callable[..., InspectorServer]  # the module's inspector_server: (scenario, **InspectorServer's options)


def _key(kw: dict[str, Any]) -> Key:
    return tuple(sorted(kw.items()))


@pytest.fixture(scope="module")
def _servers() -> Iterator[dict[Key, InspectorServer]]:
    """The weather servers this module's tests ask for, started once for the module (a start and a stop cost
    ~0.25 s each, 33 tests): started here, not in a test, so no server outlives the test that started it."""
    pool = {_key(kw): InspectorServer("weather", **kw) for kw in SHARED}
    yield pool
    with ThreadPoolExecutor(len(pool)) as stopping:  # each stop waits for its loop's next tick: all at once
        list(stopping.map(InspectorServer.close, pool.values()))


@pytest.fixture
def inspector_server(_servers: dict[Key, InspectorServer], inspector_server: InspectorServerFactory) -> GetServer:
    """The plugin's factory, a shared server where one is kept for these arguments, reset() before it is handed
    out: no request of another test, attempt counters at 0, the @once faults re-armed. Other arguments get the
    plugin's own server (stopped at the end of the test)."""

    def get(scenario: str | None = None, **kw: Any) -> InspectorServer:
        server = _servers.get(_key(kw)) if scenario == "weather" else None
        if server is None:
            return inspector_server(scenario, **kw)
        server.reset()
        return server

    return get


def post(server: InspectorServer, path: str, body: object, headers: dict[str, str] | None = None) -> httpx2.Response:
    hdrs = {"authorization": f"Bearer {KEY}"} if headers is None else headers
    return httpx2.post(server.openai_base_url + path, json=body, headers=hdrs, timeout=10)


def err(r: httpx2.Response) -> dict[str, Any]:
    e: dict[str, Any] = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}
    assert KEY not in r.text
    return e


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@pytest.mark.parametrize(
    "headers", [{}, {"x-api-key": KEY}, {"authorization": "Bearer"}, {"authorization": f"Basic {KEY}"}]
)
def test_401_without_a_bearer_key(inspector_server: GetServer, path: str, headers: dict[str, str]) -> None:
    server = inspector_server("weather")
    r = post(server, path, {"model": SC.model, "messages": [USER], "input": "hi"}, headers)
    assert r.status_code == 401 and r.headers["x-request-id"].startswith("req_")
    assert "Bearer" in err(r)["message"]
    lenient = inspector_server("weather", lenient=True)
    body = {"model": SC.model, "messages": [USER], "input": "hi"}
    assert post(lenient, path, body, headers).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "param", "code"),
    [
        ("/chat/completions", {"messages": [USER]}, None, None),
        ("/chat/completions", {"model": SC.model}, "messages", "missing_required_parameter"),
        ("/chat/completions", {"model": SC.model, "messages": "hi"}, "messages", "invalid_type"),
        ("/chat/completions", {"model": SC.model, "messages": []}, "messages", "empty_array"),
        ("/chat/completions", {"model": SC.model, "messages": [USER], "stream": "yes"}, "stream", "invalid_type"),
        ("/responses", {"input": "hi"}, "model", "missing_required_parameter"),
        ("/responses", {"model": SC.model}, "input", "missing_required_parameter"),
        ("/responses", {"model": SC.model, "input": 3}, "input", "invalid_type"),
    ],
)
def test_400_for_missing_or_wrong_fields_and_lenient_turns_it_off(
    inspector_server: GetServer, path: str, body: dict[str, Any], param: str | None, code: str | None
) -> None:
    r = post(inspector_server("weather"), path, body)
    assert r.status_code == 400
    e = err(r)
    assert (e["type"], e["param"], e["code"]) == ("invalid_request_error", param, code)
    if param == "messages":
        return  # a chat history that is no list of messages: the history check's (--no-history-check), not lenient's
    lenient = inspector_server("weather", lenient=True)
    assert post(lenient, path, {**body, "stream": False}).status_code == 200


CALL: Any = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "needle", "param"),
    [
        ([USER, {"role": "assistant", "tool_calls": [CALL]}], "call_abc", "messages.[1].role"),
        (
            [USER, {"role": "assistant", "tool_calls": [CALL]}, {"role": "user", "content": "and?"}],
            "did not have response messages: call_abc",
            "messages.[1].role",
        ),
        (
            [USER, {"role": "tool", "tool_call_id": "call_x", "content": "18"}],
            "must be a response",
            "messages.[1].role",
        ),
        ([USER, {"role": "wizard", "content": "x"}], "Supported values", "messages.[1].role"),
    ],
)
def test_chat_history_rules(inspector_server: GetServer, messages: list[Any], needle: str, param: str) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=SC.model, messages=messages)
    assert needle in info.value.message and info.value.param == param
    assert server.requests[-1].history is not None  # the fixture names the broken rule too
    with pytest.raises(AssertionError, match="broke their API's history rules"):
        server.assert_valid_histories()
    off = inspector_server("weather", validate_history=False)
    reply = openai.OpenAI(base_url=off.openai_base_url, api_key=KEY).chat.completions.create(
        model=SC.model, messages=messages
    )
    assert reply.choices[0].message.content


FC: Any = {"type": "function_call", "call_id": "call_abc", "name": "get_weather", "arguments": "{}"}
OUT: Any = {"type": "function_call_output", "call_id": "call_abc", "output": "18"}


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        ([USER, FC], "No tool output found for function call call_abc."),
        ([USER, OUT], "No tool call found for function call output with call_id call_abc."),
    ],
)
def test_responses_history_rules(inspector_server: GetServer, items: list[Any], needle: str) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=SC.model, input=items)
    assert needle in info.value.message and info.value.param == "input"
    lenient = inspector_server("weather", validate_history=False)
    assert openai.OpenAI(base_url=lenient.openai_base_url, api_key=KEY).responses.create(model=SC.model, input=items)


def test_responses_turn_counts_runs_of_output_items_and_stored_ids(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    msg: Any = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}
    reply = client.responses.create(model=SC.model, input=[USER, msg, FC, OUT])  # one run: turn 1
    assert reply.output_text == TEXT1
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=SC.model, input=[OUT], previous_response_id="resp_unknown")
    assert info.value.code == "previous_response_not_found"
    first = client.responses.create(model=SC.model, input="hi")
    call = next(o for o in first.output if isinstance(o, ResponseFunctionToolCall))
    second = client.responses.create(
        model=SC.model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18"}],
    )
    assert second.output_text == TEXT1
    assert [r.turn for r in server.message_requests if r.status == 200] == [1, 0, 1]


def test_unknown_model_is_404_and_known_ones_are_served(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model-xyz", messages=[USER])
    assert info.value.code == "model_not_found"
    for model in ("gpt-4o", SC.model):
        reply = client.chat.completions.create(model=model, messages=[USER])
        assert reply.model == model  # echoed back


def test_models_answers_both_families(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    ids = [m.id for m in client.models.list()]
    assert SC.model in ids
    raw = httpx2.get(server.openai_base_url + "/models", headers={"authorization": f"Bearer {KEY}"}).json()
    assert raw["object"] == "list" and raw["data"][0]["object"] == "model"
    assert client.models.retrieve("gpt-4o").id == "gpt-4o"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model-xyz")
    ant = anthropic.Anthropic(base_url=server.base_url, api_key=KEY)
    page = ant.models.list()
    assert [m.id for m in page.data] == ids and page.data[0].type == "model"


def test_stream_false_answers_the_assembled_objects(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    chat = client.chat.completions.create(model=SC.model, messages=[USER])
    m = chat.choices[0]
    assert (m.finish_reason, m.message.content) == ("tool_calls", TEXT0)
    assert m.message.tool_calls is not None
    tool_call = m.message.tool_calls[0]
    assert isinstance(tool_call, ChatCompletionMessageFunctionToolCall)
    assert json.loads(tool_call.function.arguments) == CALL0_INPUT
    assert chat.object == "chat.completion" and chat.id.startswith("chatcmpl-")
    resp = client.responses.create(model=SC.model, input="hi")
    assert resp.status == "completed" and resp.id.startswith("resp_")
    fc = [o for o in resp.output if isinstance(o, ResponseFunctionToolCall)]
    assert fc[0].call_id.startswith("call_") and fc[0].id is not None and fc[0].id.startswith("fc_")


def test_past_the_script_a_placeholder_in_the_family_form(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    a1: Any = {"role": "assistant", "content": "a"}
    reply = client.chat.completions.create(model=SC.model, messages=[USER, a1, USER, a1, USER])
    content, exchange = reply.choices[0].message.content, server.message_requests[-1].exchange
    assert content is not None and "has ended" in content and reply.choices[0].finish_reason == "stop"
    assert exchange is not None and exchange.script_ended


def test_attempts_are_counted_per_family(inspector_server: GetServer) -> None:
    server = inspector_server("weather", faults="http_429")
    oai = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=0)
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model=SC.model, messages=[USER])
    ant = anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0)
    with pytest.raises(anthropic.RateLimitError):  # the same messages in the other family: its own attempt 0
        ant.messages.create(model=SC.model, max_tokens=64, messages=[USER])
    assert [(r.path, r.attempt, r.status) for r in server.message_requests] == [
        ("/v1/chat/completions", 0, 429),
        ("/v1/messages", 0, 429),
    ]


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_stream_false_with_an_error_event_is_an_http_error(inspector_server: GetServer, path: str) -> None:
    server = inspector_server("weather", faults="error_event")
    r = post(server, path, {"model": SC.model, "messages": [USER], "input": "hi"})
    assert r.status_code == 503 and err(r)["type"] == "server_error"


def test_no_key_in_what_the_fixture_keeps(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    client.chat.completions.create(model=SC.model, messages=[USER])
    with pytest.raises(openai.BadRequestError) as info:
        wizard: Any = {"role": "wizard", "content": KEY[:5]}
        client.chat.completions.create(model=SC.model, messages=[USER, wizard])
    assert KEY not in str(info.value.body)
    for r in server.requests:
        assert KEY not in repr(r.headers) and KEY not in json.dumps(r.exchange.to_json() if r.exchange else {})


def test_serve_announces_the_openai_base_url_too(capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.cli.serve import _announce

    _announce(argparse.Namespace(scenario="weather", speed=1.0), "http://127.0.0.1:1", (), {})
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[-2:] == ["OPENAI_BASE_URL=http://127.0.0.1:1/v1", "ANTHROPIC_BASE_URL=http://127.0.0.1:1"]
    out = captured.out.splitlines()  # piped: the Anthropic address stays the second line
    assert out[1:] == ["ANTHROPIC_BASE_URL=http://127.0.0.1:1", "OPENAI_BASE_URL=http://127.0.0.1:1/v1"]


def test_a_chat_completion_always_has_usage(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    reply = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY).chat.completions.create(
        model=SC.model, messages=[USER]
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == 410
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_a_response_echoes_the_request_fields(inspector_server: GetServer) -> None:
    server = inspector_server("weather")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY)
    tools: list[Any] = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}]
    with client.responses.stream(
        model="gpt-4o", input="hi", tools=tools, instructions="Be brief.", metadata={"run": "7"}, temperature=0.2
    ) as s:
        events = list(s)
        final = s.get_final_response()
    created = events[0]
    assert created.type == "response.created" and created.response.instructions == "Be brief."
    assert final.instructions == "Be brief." and final.metadata == {"run": "7"} and final.temperature == 0.2
    assert all(isinstance(t, FunctionTool) for t in final.tools)
    assert [t.name for t in final.tools if isinstance(t, FunctionTool)] == ["get_weather"] and final.model == "gpt-4o"
    call = final.output[1]
    assert isinstance(call, ResponseFunctionToolCall)
    output: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "18"}
    chained = client.responses.create(
        model="gpt-4o",
        previous_response_id=final.id,
        input=[output],
    )
    assert chained.previous_response_id == final.id
    server.reset()  # attempt 0 again: the same turn, attempt and model as the first request, only the echo differs
    plain = client.responses.create(model="gpt-4o", input="hi")
    assert plain.instructions is None and plain.tools == []  # a cached plan never leaks another request's echo


def test_a_shared_server_comes_without_the_last_tests_requests_and_attempts(inspector_server: GetServer) -> None:
    """This module's servers are shared (see _servers): each hand-out is a fresh start."""
    server = inspector_server("weather", faults="http_429")
    oai = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=0)
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model=SC.model, messages=[USER])
    oai.chat.completions.create(model=SC.model, messages=[USER])  # its retry: attempt 1, answered
    assert [(r.attempt, r.status) for r in server.message_requests] == [(0, 429), (1, 200)]
    again = inspector_server("weather", faults="http_429")
    assert again is server and again.requests == []
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model=SC.model, messages=[USER])  # attempt 0 again, not 2
    assert [(r.attempt, r.status) for r in again.message_requests] == [(0, 429)]

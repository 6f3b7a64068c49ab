"""`n > 1` on serve's chat endpoint (issue 20 §3): n choices, index 0..n-1, in the chunk stream as OpenAI interleaves
them. A scenario scripts one answer, so each choice is that answer (its own tool call ids). Differential: the openai
SDK's own accumulator (ChatCompletionStreamState) makes n choices of them, each the n = 1 answer, and the same
chat.completion a `stream: false` request gets; through serve with the openai SDK; OpenAI's 400s for a bad `n`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.pacing import Pacer
from inspector.net.faults import render_faulted
from inspector.net.inprocess import FaultedScenarioServer
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.scenarios.bundled import SCENARIOS, get_scenario
from inspector.scenarios.render_openai import MAX_CHOICES, assembled_chat, chat_echo, render_openai_turn
from inspector.testing.openai_ref import sdk_chat

KEY = "sk-proj-CANARY-openai-choices-00000000"
SC = get_scenario("weather")
MESSAGES: list[Any] = [{"role": "user", "content": SC.prompt}]


def _calls(choice: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (t["id"], t["function"]["name"], t["function"]["arguments"]) for t in choice["message"].get("tool_calls") or []
    ]


def _without_call_ids(choice: dict[str, Any]) -> dict[str, Any]:
    message = dict(choice["message"])
    if message.get("tool_calls"):
        message["tool_calls"] = [{**t, "id": None} for t in message["tool_calls"]]
    return {**choice, "message": message, "index": None}


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(set(SCENARIOS) - {"big_input"})),  # (the SDK's accumulator is quadratic on it: 30 s)
    n=st.integers(1, 6),
    usage=st.booleans(),
    faults=st.sampled_from([None, "padded", "split_events", "invalid_tool_json", "max_tokens_tool"]),
)
def test_the_sdk_accumulates_n_choices_each_the_scripted_answer(
    name: str, n: int, usage: bool, faults: str | None
) -> None:
    sc = get_scenario(name)
    for turn in range(len(sc.turns)):
        one = render_faulted(sc, faults, turn, api="chat", include_usage=usage)
        many = render_faulted(sc, faults, turn, api="chat", include_usage=usage, choices=n)
        if one.status != 200 or one.end != "eof" or any(e == "error" for e, _ in one.events):
            continue  # (an error event: the SDK raises, for one choice as for n)
        ref_one, ref_many = sdk_chat(one.body), sdk_chat(many.body)
        assert [c["index"] for c in ref_many["choices"]] == list(range(n))
        for c in ref_many["choices"]:
            assert _without_call_ids(c) == _without_call_ids(ref_one["choices"][0])
        ids = [t["id"] for c in ref_many["choices"] for t in c["message"].get("tool_calls") or []]
        assert len(ids) == len(set(ids))  # every choice has its own tool call ids
        # what a stream: false request gets is what the SDK made of the stream
        mine = assembled_chat(many)
        assert [_calls(c) for c in mine["choices"]] == [_calls(c) for c in ref_many["choices"]]
        assert [c["message"]["content"] for c in mine["choices"]] == [
            c["message"].get("content") for c in ref_many["choices"]
        ]
        assert [c["finish_reason"] for c in mine["choices"]] == [c["finish_reason"] for c in ref_many["choices"]]
        if usage:
            u1, un = ref_one["usage"], ref_many["usage"]
            assert un["prompt_tokens"] == u1["prompt_tokens"]
            assert un["completion_tokens"] == n * u1["completion_tokens"]


def test_one_choice_is_the_rendering_of_old() -> None:
    for turn in range(len(SC.turns)):
        assert render_openai_turn(SC, turn, api="chat", choices=1) == render_openai_turn(SC, turn, api="chat")
    with pytest.raises(ValueError, match="choices must be 1 to 128"):
        render_openai_turn(SC, 0, api="chat", choices=0)


@pytest.fixture(scope="module")
def served() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp("weather", speed=math.inf)) as srv:
        yield srv


async def test_serve_streams_n_choices_to_the_sdk(served: BackgroundServer) -> None:
    async with openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key=KEY, max_retries=0) as client:
        async with client.chat.completions.stream(
            model=SC.model, messages=MESSAGES, n=3, stream_options={"include_usage": True}
        ) as s:
            final = await s.get_final_completion()
        assert [c.index for c in final.choices] == [0, 1, 2]
        calls = [c.message.tool_calls[0] for c in final.choices if c.message.tool_calls]
        assert len(calls) == 3 and len({t.id for t in calls}) == 3
        assert {(t.function.name, t.function.arguments) for t in calls} == {
            ("get_weather", '{"location": "Paris, France", "unit": "celsius"}')
        }
        assert {c.message.content for c in final.choices} == {SC.turns[0].blocks[0].text}  # type: ignore[union-attr]
        assert {c.finish_reason for c in final.choices} == {"tool_calls"}
        assert final.usage is not None and final.usage.completion_tokens % 3 == 0
        plain = await client.chat.completions.create(model=SC.model, messages=MESSAGES, n=2, stream=False)
    assert [c.index for c in plain.choices] == [0, 1]
    assert plain.choices[0].message.content == final.choices[0].message.content


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (0, "0 is less than the minimum of 1 - 'n'"),
        (129, "129 is greater than the maximum of 128 - 'n'"),
        ("2", "Invalid type for 'n': expected an integer, but got str instead."),
        (True, "Invalid type for 'n': expected an integer, but got bool instead."),
        (1.5, "Invalid type for 'n': expected an integer, but got float instead."),
    ],
)
async def test_a_bad_n_is_openais_400(served: BackgroundServer, n: object, message: str) -> None:
    body = {"model": SC.model, "messages": MESSAGES, "n": n, "stream": True}
    async with httpx2.AsyncClient(base_url=served.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
        r = await h.post("/v1/chat/completions", json=body)
    assert r.status_code == 400
    assert r.json() == {
        "error": {"message": message, "type": "invalid_request_error", "param": "n", "code": r.json()["error"]["code"]}
    }


async def test_n_null_is_one_choice_and_lenient_takes_a_bad_n_as_one(served: BackgroundServer) -> None:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {KEY}"}) as h:
        r = await h.post(
            served.base_url + "/v1/chat/completions", json={"model": SC.model, "messages": MESSAGES, "n": None}
        )
        assert r.status_code == 200 and len(r.json()["choices"]) == 1
        with BackgroundServer(ServeApp("weather", speed=math.inf, lenient=True)) as lenient:
            for n in (0, 10**9, "x"):
                body = {"model": SC.model, "messages": MESSAGES, "n": n}
                r = await h.post(lenient.base_url + "/v1/chat/completions", json=body)
                assert r.status_code == 200 and len(r.json()["choices"]) == 1, n
    assert MAX_CHOICES == 128


async def test_in_process_n_choices_are_the_served_bytes(served: BackgroundServer) -> None:
    server = FaultedScenarioServer(SC, "padded", Pacer(math.inf), seed_ids=True)  # (ids seeded per conversation)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(server.handler))
    body = {"model": SC.model, "messages": MESSAGES, "n": 2, "stream": True}
    headers = {"authorization": f"Bearer {KEY}", "x-inspector-fault": "padded", "x-inspector-session": "n2"}
    async with http, httpx2.AsyncClient(base_url=served.base_url, headers=headers) as net:
        a = await http.post("http://x/v1/chat/completions", json=body, headers=headers)
        b = await net.post("/v1/chat/completions", json=body)
    assert a.content == b.content == render_faulted(SC, "padded", 0, api="chat", choices=2, echo=chat_echo(body)).body


async def test_two_chat_conversations_served_together_never_share_a_completion_or_call_id() -> None:
    """Two chat conversations of one scenario, with one system prompt and two questions: serve answered both with
    one completion id and one tool call id (its Messages and Responses answers were seeded per conversation, its chat
    answers were not), so a harness keying results by call id mixed them. Each conversation's ids are its own (and
    a resend of Paris's request, its retry, has fresh ones, as a real retry does)."""
    import re

    def ids(content: bytes) -> set[bytes]:
        return set(re.findall(rb'"((?:chatcmpl-|call_)[A-Za-z0-9]+)"', content))

    got: dict[str, set[bytes]] = {}
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            for city in ("Paris", "Rome", "Paris"):
                body = {
                    "model": "gpt-4o",
                    "stream": True,
                    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": city}],
                }
                r = await h.post("/v1/chat/completions", json=body, headers={"x-inspector-scenario": "weather"})
                assert r.status_code == 200
                key = city if city not in got else city + " again"
                got[key] = ids(r.content)
    assert len(got["Paris"]) == len(got["Rome"]) == 2  # a completion id and a call id
    assert not got["Paris"] & got["Rome"]
    assert not got["Paris again"] & (got["Paris"] | got["Rome"])

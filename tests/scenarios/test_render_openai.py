"""The OpenAI renderers (``scenarios/render_openai.py``): every bundled scenario's turns in both families, checked
against the openai SDK's own accumulators (through an in-memory transport) and against the Anthropic renderer's
content (one scenario model: the same text and tool JSON), for every fault combination hypothesis draws."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from inspector.net.faults import FAULTS, apply_faults, parse_faults, render_faulted
from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.model import Scenario, ToolUseBlock, TurnScript
from inspector.scenarios.render import ResponsePlan, expected_blocks, render_turn
from inspector.scenarios.render_openai import ID_SEED, Api, render_openai_turn, response_echo
from inspector.stream.sse import SSEDecoder

NAMES = sorted(SCENARIOS)
APIS: list[Api] = ["chat", "responses"]


def sdk_client(plan: ResponsePlan) -> openai.OpenAI:
    """The openai SDK over an in-memory transport that answers every request with the plan's body."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(plan.status, headers=plan.headers, content=plan.body)

    return openai.OpenAI(
        base_url="http://inspector.test/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def sdk_final(plan: ResponsePlan, api: str) -> tuple[str, list[tuple[str, str]]]:
    """(text, [(tool name, arguments)]) from the SDK's accumulator: get_final_completion / get_final_response."""
    client = sdk_client(plan)
    if api == "chat":
        with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "hi"}]) as s:
            msg = s.get_final_completion().choices[0].message
        return msg.content or "", [(t.function.name, t.function.arguments) for t in msg.tool_calls or []]
    with client.responses.stream(model="m", input="hi") as s:
        resp = s.get_final_response()
    return resp.output_text, [(o.name, o.arguments) for o in resp.output if o.type == "function_call"]


def anthropic_content(sc: Scenario, turn: int, attempt: int) -> tuple[str, list[tuple[str, str]]]:
    """The same turn's text and client tool calls as the Anthropic renderer streams them (the reference)."""
    blocks = expected_blocks(sc, turn, attempt)
    text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
    return text, [(b["name"], b["raw_json"]) for b in blocks if b["type"] == "tool_use"]


def decoded(plan: ResponsePlan) -> list[Any]:
    """Every complete SSE event of the body: (event name, parsed data or "[DONE]")."""
    out = []
    for e in SSEDecoder().feed(plan.body.removeprefix(b"\xef\xbb\xbf")):
        out.append((e.event, "[DONE]" if e.data == "[DONE]" else orjson.loads(e.data)))
    return out


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", NAMES)
def test_every_bundled_turn_is_accepted_by_the_sdk_accumulators(name: str, api: Api) -> None:
    sc = SCENARIOS[name]
    for turn, script in enumerate(sc.turns):
        if script.stop_reason in ("max_tokens", "refusal") or any(
            type(f).__name__ in ("MaxTokensCut",) for f in script.faults
        ):
            continue  # no final completion / response by design (tests below)
        attempt = next(a for a in range(8) if script.http_error_for(a) is None and not _transport(script, a))
        plan = render_openai_turn(sc, turn, attempt, api=api, include_usage=True)
        assert sdk_final(plan, api) == anthropic_content(sc, turn, attempt), (name, turn)


FAULT_NAMES = sorted(FAULTS)
CONTENT_OR_FORMAT = [n for n in FAULT_NAMES if FAULTS[n].kind in ("content", "format")]


@st.composite
def faults(draw: st.DrawFn) -> str:
    chosen = draw(st.lists(st.sampled_from(FAULT_NAMES), unique=True, max_size=4))
    if "cr" in chosen and "crlf" in chosen:
        chosen.remove("crlf")
    transport = [n for n in chosen if FAULTS[n].kind == "transport"]
    for extra in transport[1:]:
        chosen.remove(extra)
    return ",".join(n if n != "stall" else "stall:3" for n in chosen)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(NAMES),
    api=st.sampled_from(APIS),
    fault=faults(),
    turn_seed=st.integers(0, 10),
    attempt=st.integers(0, 3),
    usage=st.booleans(),
)
def test_any_fault_renders_a_well_formed_deterministic_stream(
    name: str, api: Api, fault: str, turn_seed: int, attempt: int, usage: bool
) -> None:
    sc = SCENARIOS[name]
    turn = turn_seed % len(sc.turns)
    plan = render_faulted(sc, fault, turn, attempt, api=api, include_usage=usage)
    again = render_faulted(sc, fault, turn, attempt, api=api, include_usage=usage)
    assert (plan.status, plan.body, plan.end, [r.delay for r in again.reads]) == (
        again.status,
        again.body,
        again.end,
        [r.delay for r in plan.reads],
    )
    if plan.status != 200:
        err = orjson.loads(plan.body)["error"]
        assert set(err) == {"message", "type", "param", "code"} and "x-request-id" in plan.headers
        return
    evs = decoded(plan)
    datas = [d for _, d in evs]
    if api == "chat":
        assert all(e == "message" for e, _ in evs)
        chunks = [d for d in datas if d != "[DONE]" and "error" not in d]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert len({c["id"] for c in chunks}) <= 1
        if plan.end == "eof" and not any("error" in d for d in datas if d != "[DONE]"):
            assert datas[-1] == "[DONE]"
    else:
        assert "[DONE]" not in datas
        seqs = [d["sequence_number"] for d in datas]
        assert seqs == list(range(len(seqs)))
        assert all(e == d["type"] for e, d in evs)
        if datas:
            assert datas[0]["type"] == "response.created"
    names = {f.name for f in parse_faults(fault)}
    first = plan.attempt == _first_stream_attempt(sc, fault, turn)
    if first and names & {"drop_event", "drop_in_tool", "drop_byte"} and plan.end != "drop":
        assert "drop_in_tool" in names  # (a turn without that tool block is unchanged)
    if first and "stall" in names:
        assert plan.end == "hang" and plan.body.count(b": keep-alive") == 3


def _first_stream_attempt(sc: Scenario, fault: str, turn: int) -> int:
    from inspector.net.faults import first_stream_attempt

    return first_stream_attempt(apply_faults(sc, fault).turns[turn])


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    api=st.sampled_from(APIS),
    fault=st.lists(st.sampled_from(CONTENT_OR_FORMAT), unique=True, max_size=3),
    turn_seed=st.integers(0, 10),
)
def test_the_sdk_gets_the_anthropic_content_under_content_and_format_faults(
    name: str, api: Api, fault: list[str], turn_seed: int
) -> None:
    if "cr" in fault and "crlf" in fault:
        fault.remove("crlf")
    if "max_tokens_tool" in fault:
        fault.remove("max_tokens_tool")  # no final object by design (test below)
    sc = SCENARIOS[name]
    turn = turn_seed % len(sc.turns)
    faulted = apply_faults(sc, fault)
    script = faulted.turns[turn]
    attempt = next(a for a in range(8) if script.http_error_for(a) is None and not _transport(script, a))
    if script.stop_reason in ("max_tokens", "refusal") or any(
        type(f).__name__ == "MaxTokensCut" for f in script.faults_for(attempt)
    ):
        return
    plan = render_faulted(sc, fault, turn, attempt, api=api)
    assert sdk_final(plan, api) == anthropic_content(faulted, turn, attempt)


def _transport(script: TurnScript, attempt: int) -> bool:
    return any(
        type(f).__name__ in ("ErrorEventAfter", "DropAfter", "StallWithPings") for f in script.faults_for(attempt)
    )


def test_max_tokens_tool_is_length_and_incomplete() -> None:
    sc = SCENARIOS["weather"]
    chat = render_faulted(sc, "max_tokens_tool", 0, 0, api="chat")
    with pytest.raises(openai.LengthFinishReasonError) as info:
        sdk_final(chat, "chat")
    calls, block = info.value.completion.choices[0].message.tool_calls, sc.turns[0].blocks[1]
    assert calls is not None and isinstance(calls[0], ChatCompletionMessageFunctionToolCall)
    assert isinstance(block, ToolUseBlock)
    args = calls[0].function.arguments
    assert args and json.dumps(block.input).startswith(args)
    resp = render_faulted(sc, "max_tokens_tool", 0, 0, api="responses")
    last = decoded(resp)[-1][1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["response"]["output"][-1]["arguments"] == args  # the same cut in both families


def test_ids_are_seeded_and_shaped_like_openai() -> None:
    sc = SCENARIOS["weather"]
    chat = decoded(render_openai_turn(sc, 0, 0, api="chat"))
    assert chat[0][1]["id"].startswith("chatcmpl-") and len(chat[0][1]["id"]) == 38
    call = next(d for _, d in chat if d != "[DONE]" and d["choices"] and d["choices"][0]["delta"].get("tool_calls"))
    tc = call["choices"][0]["delta"]["tool_calls"][0]
    assert tc["id"].startswith("call_") and tc["function"]["name"] == "get_weather" and tc["index"] == 0
    later = [
        d["choices"][0]["delta"]["tool_calls"][0]
        for _, d in chat
        if d != "[DONE]" and d["choices"] and d["choices"][0]["delta"].get("tool_calls")
    ][1:]
    assert later and all(set(t) == {"index", "function"} and set(t["function"]) == {"arguments"} for t in later)
    resp = decoded(render_openai_turn(sc, 0, 0, api="responses"))
    r = resp[-1][1]["response"]
    assert r["id"].startswith("resp_") and [o["id"][:3] for o in r["output"]] == ["msg", "fc_"]
    assert render_openai_turn(sc, 0, 1, api="chat").body != render_openai_turn(sc, 0, 0, api="chat").body


def test_responses_ids_are_the_conversations_own_and_the_same_on_every_run() -> None:
    """A Responses answer's ids are seeded by its conversation too (``response_echo``'s id seed: the first input,
    then the response a request continues): two conversations of one scenario never share an id, one
    conversation gets the same ids every time, and the seed is not echoed in the Response object."""
    sc = SCENARIOS["weather"]

    def final(body: dict[str, Any]) -> dict[str, Any]:
        events = decoded(render_openai_turn(sc, 0, 0, api="responses", echo=response_echo(body)))
        response: dict[str, Any] = events[-1][1]["response"]
        return response

    paris, rome = final({"input": "Paris?"}), final({"input": "Rome?"})
    ids = [paris["id"], *(o["id"] for o in paris["output"]), paris["output"][1]["call_id"]]
    other = [rome["id"], *(o["id"] for o in rome["output"]), rome["output"][1]["call_id"]]
    assert not set(ids) & set(other)
    assert final({"input": "Paris?"}) == paris  # deterministic
    assert ID_SEED not in paris and paris["previous_response_id"] is None
    after_paris = final({"input": [], "previous_response_id": paris["id"]})
    after_rome = final({"input": [], "previous_response_id": rome["id"]})
    assert after_paris["id"] != after_rome["id"] and after_paris["previous_response_id"] == paris["id"]
    huge = final({"input": [{"type": "message", "role": "user", "content": "x", "n": 2**80}]})  # (exactjson's ints)
    assert huge["id"] not in (paris["id"], rome["id"])
    # chat ids and the Anthropic bytes stay seeded by scenario, turn and attempt (the frozen digests pin them)
    assert render_openai_turn(sc, 0, 0, api="chat").body == render_openai_turn(sc, 0, 0, api="chat").body


def test_usage_only_when_asked_and_in_the_last_chunk() -> None:
    sc = SCENARIOS["weather"]
    without = [d for _, d in decoded(render_openai_turn(sc, 0, 0, api="chat")) if d != "[DONE]"]
    assert all("usage" not in d for d in without)
    withu = [d for _, d in decoded(render_openai_turn(sc, 0, 0, api="chat", include_usage=True)) if d != "[DONE]"]
    assert withu[-1]["choices"] == [] and withu[-1]["usage"]["prompt_tokens"] == 410
    assert all(d["usage"] is None for d in withu[:-1])


def test_anthropic_bytes_are_unchanged_by_the_openai_renderers() -> None:
    sc = SCENARIOS["weather"]
    before = render_turn(sc, 0, 0).body
    render_openai_turn(sc, 0, 0, api="chat")
    assert render_turn(sc, 0, 0).body == before and b"event: message_start" in before


@pytest.mark.parametrize("api", APIS)
def test_a_long_stall_is_generated_lazily_in_the_openai_form(api: Api) -> None:
    from inspector.net.faults import STALL_INLINE, StalledPlan, iter_reads

    plan = render_faulted(SCENARIOS["weather"], "stall:1000000", 0, 0, api=api)
    assert isinstance(plan, StalledPlan) and plan.more_pings == 1_000_000 - STALL_INLINE
    assert plan.ping == b": keep-alive\n\n" and len(plan.reads) < 2 * STALL_INLINE
    reads = iter_reads(plan)
    assert all(next(reads) for _ in range(STALL_INLINE + 10))


@pytest.mark.parametrize("api", APIS)
def test_drop_in_tool_k_breaks_inside_the_kth_call(api: Api) -> None:
    sc = SCENARIOS["parse_date"]
    full = [b["raw_json"] for b in expected_blocks(sc, 0, 0) if b["type"] == "tool_use"]
    plan = render_faulted(sc, "drop_in_tool:3", 0, 0, api=api)
    assert plan.end == "drop"
    got: dict[int, str] = {}
    for _, d in decoded(plan):
        if api == "chat":
            for tc in (d["choices"][0]["delta"].get("tool_calls") or []) if d["choices"] else []:
                got[tc["index"]] = got.get(tc["index"], "") + tc["function"].get("arguments", "")
        elif d["type"] == "response.function_call_arguments.delta":
            got[d["output_index"] - 1] = got.get(d["output_index"] - 1, "") + d["delta"]
    assert [got[0], got[1]] == full[:2]  # the calls before it are whole
    assert got[2] and full[2].startswith(got[2]) and got[2] != full[2] and 3 not in got

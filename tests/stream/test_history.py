"""The Messages API's history rules (inspector.stream.history): every violation kind, valid histories, and the same
verdict (status and message) from ``inspector serve`` and from the in-process ScenarioServer."""

from __future__ import annotations

import math
from typing import Any

import httpx2
import orjson
import pytest

from inspector.core.pacing import Pacer
from inspector.net.inprocess import FaultedScenarioServer
from inspector.net.serve import ServeApp
from inspector.scenarios import transport
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.transport import ScenarioServer
from inspector.stream import history
from inspector.stream.history import VIOLATION_KINDS, Violation, history_problem, history_violation


def assistant(*ids: str, text_first: bool = True) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "calling"}] if text_first else []
    content += [{"type": "tool_use", "id": i, "name": "read_file", "input": {"path": i}} for i in ids]
    return {"role": "assistant", "content": content}


def results(*ids: str, text_before: bool = False) -> dict:
    content = [{"type": "text", "text": "here you go"}] if text_before else []
    content += [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
    return {"role": "user", "content": content}


U = {"role": "user", "content": "hi"}

# kind -> (messages, the exact 400 message)
CASES = {
    "empty_messages": ([], "messages: at least one message is required"),
    "empty_messages_not_a_list": ("hello", "messages: at least one message is required"),
    "bad_role": (
        [U, {"role": "system", "content": "x"}],
        "messages.1.role: Input should be 'user' or 'assistant' (got 'system')",
    ),
    "bad_role_not_an_object": ([U, "oops"], "messages.1.role: Input should be 'user' or 'assistant' (got None)"),
    "first_not_user": (
        [{"role": "assistant", "content": "hi"}, U],
        "messages.0.role: the first message must use the `user` role",
    ),
    "missing_tool_result": (
        [U, assistant("toolu_a", "toolu_b"), results("toolu_a")],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
    "missing_tool_result_at_end": (
        [U, assistant("toolu_a")],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message. (inspector: the "
        "request ends with this assistant message)",
    ),
    "missing_tool_result_next_is_assistant": (
        [U, assistant("toolu_a"), {"role": "assistant", "content": "more"}, U],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
    "results_not_in_next_message": (
        [
            U,
            assistant("toolu_a"),
            {"role": "user", "content": "wait"},
            {"role": "assistant", "content": "ok"},
            results("toolu_a"),
        ],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message. (inspector: their "
        "tool_result blocks are in messages.4; they must be in messages.2, the message right after the tool_use)",
    ),
    "tool_result_not_first": (
        [U, assistant("toolu_a"), results("toolu_a", text_before=True)],
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. Messages following "
        "`tool_use` blocks must begin with a matching number of `tool_result` blocks.",
    ),
    "tool_result_not_first_between": (  # something between the results: only the first is "at the beginning"
        [
            U,
            assistant("toolu_a", "toolu_b"),
            {
                "role": "user",
                "content": [
                    results("toolu_a")["content"][0],
                    {"type": "text", "text": "and"},
                    results("toolu_b")["content"][0],
                ],
            },
        ],
        "messages.2: Did not find 2 `tool_result` block(s) at the beginning of this message. Messages following "
        "`tool_use` blocks must begin with a matching number of `tool_result` blocks.",
    ),
    "unexpected_tool_result": (
        [U, {"role": "assistant", "content": "hm"}, results("toolu_zz")],
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_zz. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ),
    "unexpected_tool_result_in_first_message": (
        [results("toolu_zz")],
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_zz. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ),
    "unexpected_tool_result_extra_id": (
        [U, assistant("toolu_a"), results("toolu_a", "toolu_x")],
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
    ),
}


def kind_of(case: str) -> str:
    return next(k for k in VIOLATION_KINDS if case == k or case.startswith(k + "_"))


def test_every_kind_has_a_case() -> None:
    assert {kind_of(c) for c in CASES} == set(VIOLATION_KINDS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_violation_kind(case: Any) -> None:
    messages, text = CASES[case]
    v = history_violation(messages)
    assert isinstance(v, Violation)
    assert v.kind == kind_of(case)
    assert v.message == text == str(v)
    assert history_problem(messages) == text


VALID = {
    "plain": [U],
    "results_any_order": [U, assistant("toolu_a", "toolu_b"), results("toolu_b", "toolu_a")],
    "text_after_results": [
        U,
        assistant("toolu_a"),
        {"role": "user", "content": [*results("toolu_a")["content"], {"type": "text", "text": "also this"}]},
    ],
    "tool_use_only_block": [
        U,
        assistant("toolu_a", text_first=False),
        results("toolu_a"),
        {"role": "assistant", "content": "done"},
        U,
    ],
    "string_contents": [U, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}],
    "two_tool_turns": [U, assistant("toolu_a"), results("toolu_a"), assistant("toolu_b"), results("toolu_b")],
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_histories_pass(case: Any) -> None:
    assert history_violation(VALID[case]) is None
    assert history_problem(VALID[case]) is None


def test_one_implementation() -> None:
    """serve and the in-process server use the same function (no second copy of the rules)."""
    import inspector.net.serve as serve

    assert serve.history_violation is history.history_violation
    assert transport.history_problem is history.history_problem
    assert not hasattr(transport, "_blocks")


# --- serve and ScenarioServer give the same answer ---------------------------------------------------------------


def _request(messages: Any) -> httpx2.Request:
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": messages}
    return httpx2.Request(
        "POST",
        "http://scenario.local/v1/messages",
        content=orjson.dumps(body),
        headers={"content-type": "application/json"},
    )


async def _via_scenario_server(server: ScenarioServer, messages: Any) -> tuple[int, dict | None]:
    resp = await server.handler(_request(messages))
    await resp.aread()
    return resp.status_code, (resp.json() if resp.status_code != 200 else None)


async def _via_serve(app: ServeApp, messages: Any) -> tuple[int, dict | None]:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app.app), base_url="http://serve.local") as h:
        req = _request(messages)
        resp = await h.post(
            "/v1/messages",
            content=req.content,
            headers={
                "content-type": "application/json",
                "x-inspector-scenario": "weather",
                "x-api-key": "test-key",
                "anthropic-version": "2023-06-01",
            },
        )
        await resp.aread()
        return resp.status_code, (resp.json() if resp.status_code != 200 else None)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("server_kind", ["ScenarioServer", "FaultedScenarioServer"])
async def test_in_process_server_rejects_exactly_what_serve_rejects(case: Any, server_kind: Any) -> None:
    messages, text = CASES[case]
    sc = get_scenario("weather")
    if server_kind == "ScenarioServer":
        inproc = ScenarioServer(sc, Pacer(math.inf))
    else:
        inproc = FaultedScenarioServer(sc, "bom", Pacer(math.inf))
    got_in = await _via_scenario_server(inproc, messages)
    got_net = await _via_serve(ServeApp("weather", speed=math.inf), messages)
    assert got_in[0] == got_net[0] == 400
    assert got_in[1] is not None and got_net[1] is not None
    assert got_in[1]["error"] == got_net[1]["error"] == {"type": "invalid_request_error", "message": text}
    assert inproc.requests[-1].rejected == text and inproc.responses == []


@pytest.mark.parametrize("case", sorted(VALID))
async def test_valid_histories_are_served_by_both(case: Any) -> None:
    messages = VALID[case]
    sc = get_scenario("weather")
    turn = sum(1 for m in messages if m["role"] == "assistant")
    inproc = ScenarioServer(sc, Pacer(math.inf))
    status_in, err_in = await _via_scenario_server(inproc, messages)
    status_net, err_net = await _via_serve(ServeApp("weather", speed=math.inf, strict=True), messages)
    if turn < len(sc.turns):
        assert status_in == status_net == 200
    else:  # past the script: the same 400 from both (serve --strict; by default serve answers an end_turn turn)
        assert status_in == status_net == 400 and err_in is not None and err_net is not None
        assert err_in["error"] == err_net["error"]
        assert (await _via_serve(ServeApp("weather", speed=math.inf), messages))[0] == 200


async def test_history_check_can_be_turned_off_in_both() -> None:
    messages = CASES["tool_result_not_first"][0]
    inproc = ScenarioServer(get_scenario("weather"), Pacer(math.inf), validate_history=False)
    assert (await _via_scenario_server(inproc, messages))[0] == 200
    assert (await _via_serve(ServeApp("weather", speed=math.inf, validate_history=False), messages))[0] == 200

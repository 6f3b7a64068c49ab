"""The fake API core's OpenAI checks (``fakeapi.openai_decision``): never an exception for any JSON body, the turn
of a well-formed agent-loop history, and the tool-call pairing rules for every generated history."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.scenarios.fakeapi import (
    FakeApi,
    chat_history_problem,
    openai_decision,
    openai_turn_of,
    responses_history_problem,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
keys = st.sampled_from(["model", "messages", "input", "stream", "tools", "previous_response_id", "role", "type"])
bodies = st.dictionaries(keys, json_values, max_size=6) | json_values


@settings(max_examples=300, deadline=None)
@given(body=bodies, api=st.sampled_from(["chat", "responses"]), lenient=st.booleans(), history=st.booleans())
def test_any_body_gets_a_decision_never_an_exception(body: Any, api: str, lenient: bool, history: bool) -> None:
    d = openai_decision(body, api, lenient=lenient, validate_history=history, models=["m"], previous_turn=lambda _: 0)
    if d.rejected:
        assert d.status in (400, 404) and d.message and d.etype == "invalid_request_error"
    else:
        assert d.turn is not None and d.turn >= 0 and d.messages is not None


@st.composite
def loops(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, str | None]:
    """A chat agent loop: (messages, the ids of the calls each turn made), maybe with one tool answer removed."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    turns = draw(st.integers(0, 4))
    removed = None
    for t in range(turns):
        n = draw(st.integers(0, 3))
        ids = [f"call_{t}_{i}" for i in range(n)]
        assistant: dict[str, Any] = {"role": "assistant", "content": draw(st.sampled_from([None, "text"]))}
        if ids:
            assistant["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
            ]
        messages.append(assistant)
        answers = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in draw(st.permutations(ids))]
        if answers and removed is None and draw(st.booleans()):
            removed = answers.pop(draw(st.integers(0, len(answers) - 1)))["tool_call_id"]
        messages += answers
        if not ids:
            messages.append({"role": "user", "content": "more"})
    return messages, turns, removed


@settings(max_examples=200, deadline=None)
@given(loop=loops())
def test_chat_pairing_rule_and_turn_for_every_generated_loop(
    loop: tuple[list[dict[str, Any]], int, str | None],
) -> None:
    messages, turns, removed = loop
    problem = chat_history_problem(messages)
    if removed is None:
        assert problem is None
        d = openai_decision({"model": "m", "messages": messages}, "chat")
        assert d.turn == turns == openai_turn_of("chat", messages)
    else:
        assert problem is not None and removed in problem[0] and (problem[1] or "").startswith("messages.[")
        assert openai_decision({"model": "m", "messages": messages}, "chat").status == 400
        assert not openai_decision({"model": "m", "messages": messages}, "chat", validate_history=False).rejected


@st.composite
def item_loops(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, str | None]:
    """A Responses loop as input items (each response's output items in a row, then the outputs)."""
    items: list[Any] = [{"role": "user", "content": "go"}]
    turns = draw(st.integers(0, 4))
    removed = None
    for t in range(turns):
        run: list[dict[str, Any]] = []
        if draw(st.booleans()):
            run.append({"type": "reasoning", "id": f"rs_{t}", "summary": []})
        if draw(st.booleans()):
            run.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]})
        ids = [f"call_{t}_{i}" for i in range(draw(st.integers(0 if run else 1, 3)))]
        run += [{"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"} for i in ids]
        items += run
        outs = [{"type": "function_call_output", "call_id": i, "output": "ok"} for i in ids]
        if outs and removed is None and draw(st.booleans()):
            removed = outs.pop()["call_id"]
        items += outs
        if not outs:
            items.append({"role": "user", "content": "more"})
    return items, turns, removed


@settings(max_examples=200, deadline=None)
@given(loop=item_loops())
def test_responses_pairing_rule_and_turn_for_every_generated_loop(
    loop: tuple[list[dict[str, Any]], int, str | None],
) -> None:
    items, turns, removed = loop
    problem = responses_history_problem(items)
    if removed is None:
        assert problem is None
        assert openai_decision({"model": "m", "input": items}, "responses").turn == turns
    else:
        assert problem is not None and removed in problem[0]


def test_previous_response_id_continues_the_stored_turn_and_is_bounded() -> None:
    api = FakeApi(history=2)
    api.remember_response("resp_a", 0)
    out = [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]
    d = api.check_openai({"model": "m", "input": out, "previous_response_id": "resp_a"}, "responses")
    assert not d.rejected and d.turn == 1
    api.remember_response("resp_b", 1)
    api.remember_response("resp_c", 2)  # resp_a is dropped
    gone = api.check_openai({"model": "m", "input": out, "previous_response_id": "resp_a"}, "responses")
    assert gone.status == 400 and gone.code == "previous_response_not_found"


def test_attempt_keys_are_per_family() -> None:
    api = FakeApi()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    chat = api.select(api.check_openai(body, "chat"), body, name="s", turns=2, family="chat")
    ant = api.select(api.check(dict(body, max_tokens=1)), body, name="s", turns=2)
    again = api.select(api.check_openai(body, "chat"), body, name="s", turns=2, family="chat")
    assert (chat.attempt, ant.attempt, again.attempt) == (0, 0, 1)

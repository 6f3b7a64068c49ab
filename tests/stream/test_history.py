"""The Messages API's history rules (inspector.stream.history): every violation kind, valid histories. Both fake API
transports decide through one core (inspector.scenarios.fakeapi, tests/scenarios/test_fakeapi.py)."""

from __future__ import annotations

from typing import Any

import pytest

from inspector.scenarios import transport
from inspector.stream import history
from inspector.stream.history import VIOLATION_KINDS, Violation, history_problem, history_violation


def assistant(*ids: str, text_first: bool = True) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "calling"}] if text_first else []
    content += [{"type": "tool_use", "id": i, "name": "read_file", "input": {"path": i}} for i in ids]
    return {"role": "assistant", "content": content}


def results(*ids: str, text_before: bool = False) -> dict[str, Any]:
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
    import inspector.scenarios.fakeapi as fakeapi

    # (fakeapi imports the name for its own use, it does not export it: read from its namespace)
    assert vars(fakeapi)["history_violation"] is history.history_violation  # serve decides through fakeapi
    assert transport.history_problem is history.history_problem
    assert not hasattr(transport, "_blocks")

"""Shared helpers of the agent-loop tests: the Messages API's history rules as assertions, an observing subscriber
that lets a test wait on a condition, a run guard, and checks that nothing (task, tool thread) is left behind."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from inspector.agent.executor import ToolCall
from inspector.agent.loop import LoopResult
from inspector.agent.toolbox.spec import ToolFn
from inspector.observe import observations as O
from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.model import Scenario
from inspector.sessions.sources import Session

if TYPE_CHECKING:
    import pytest

__all__ = [
    "RUN_TIMEOUT",
    "Lines",
    "Observed",
    "assert_no_leftovers",
    "assert_valid_history",
    "custom_scenario",
    "dumps_all",
    "final_attempt_calls",
    "history_tool_ids",
    "run_observed",
    "with_tool",
]

RUN_TIMEOUT = 20.0  # a guard against hangs; never a synchronisation

T = TypeVar("T")


def assert_valid_history(messages: list[dict[str, Any]]) -> None:
    """The API's history rule, strictly: the first message is the user's; every assistant message with tool_use
    blocks is followed by ONE user message whose content is exactly one tool_result per tool_use id, in the same
    order, with nothing between; every tool_result answers a tool_use of the message right before it; tool_use ids
    are unique; no empty text block is sent."""
    assert messages, "empty history"
    assert messages[0]["role"] == "user", messages[0]
    seen_ids: set[str] = set()
    for i, msg in enumerate(messages):
        assert msg["role"] in ("user", "assistant"), msg
        content = msg["content"]
        blocks = content if isinstance(content, list) else []
        for b in blocks:
            if b.get("type") == "text":
                assert b.get("text"), f"messages[{i}]: empty text block"
        if msg["role"] == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for b in blocks:
                if b.get("type") == "tool_use":
                    assert isinstance(b.get("input"), dict), f"messages[{i}]: tool_use input {b.get('input')!r}"
                    assert "input_raw" not in b, "internal fields must not be sent"
            assert len(set(ids)) == len(ids) and not (seen_ids & set(ids)), f"messages[{i}]: duplicate tool_use ids"
            seen_ids.update(ids)
            if ids:
                assert i + 1 < len(messages), f"messages[{i}]: tool_use {ids} without a following tool_result message"
                nxt = messages[i + 1]
                assert nxt["role"] == "user", f"messages[{i + 1}] must be the user's tool_result message"
                assert isinstance(nxt["content"], list)
                assert [b.get("type") for b in nxt["content"]] == ["tool_result"] * len(ids), (
                    f"messages[{i + 1}]: exactly one tool_result per tool_use, nothing else: {nxt['content']}"
                )
                assert [b["tool_use_id"] for b in nxt["content"]] == ids, "tool_results out of order or missing"
                for r in nxt["content"]:
                    assert isinstance(r.get("content"), (str, list))
                    assert isinstance(r.get("is_error", False), bool)
        else:
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                prev = messages[i - 1]
                assert prev["role"] == "assistant", f"messages[{i}]: tool_result after a {prev['role']} message"
                prev_ids = [b["id"] for b in prev["content"] if b.get("type") == "tool_use"]
                assert [r["tool_use_id"] for r in results] == prev_ids


def history_tool_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [
        b["id"] for m in messages if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"
    ]


class Observed:
    """A bus subscriber that keeps every observation and lets a test wait on a condition (an asyncio.Event is set
    after every observation; no sleeps)."""

    def __init__(self, bus: O.ObservationBus) -> None:
        self.items: list[O.Observation] = []
        self._changed = asyncio.Event()
        self._hooks: list[Callable[[O.Observation], None]] = []
        bus.subscribe(self)

    def __call__(self, obs: O.Observation) -> None:
        self.items.append(obs)
        for hook in list(self._hooks):
            hook(obs)
        self._changed.set()

    def on(self, hook: Callable[[O.Observation], None]) -> None:
        """Run `hook` inline for every later observation (inside the loop, before its next step)."""
        self._hooks.append(hook)

    # (ASYNC109: a test helper's give-up deadline, applied with asyncio.timeout inside; callers only tune it)
    async def wait_for(self, cond: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()

    def of(self, *types: type[T]) -> list[T]:
        """The observations of these types, in order."""
        return [o for o in self.items if isinstance(o, types)]

    def sse(self, turn: int | None = None, attempt: int | None = None) -> list[O.SSEEventSeen]:
        return [
            o
            for o in self.of(O.SSEEventSeen)
            if (turn is None or o.turn == turn) and (attempt is None or o.attempt == attempt)
        ]

    def states(self) -> list[str]:
        return [o.state for o in self.of(O.LoopStateChanged)]

    def tool_states(self, tool_id: str) -> list[str]:
        return [o.state for o in self.of(O.ToolStateChanged) if o.id == tool_id]


async def run_observed(session: Session, timeout: float = RUN_TIMEOUT) -> tuple[LoopResult, Observed]:  # noqa: ASYNC109 (as wait_for)
    obs = Observed(session.bus)
    async with asyncio.timeout(timeout):
        result = await session.run()
    return result, obs


def assert_no_leftovers() -> None:
    """No task but the test's own, no tool thread still alive."""
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not left, f"leftover tasks: {left}"
    threads = [t for t in threading.enumerate() if t.name.startswith("inspector-tool-")]
    for t in threads:  # a worker that has delivered its result may still be returning: join, bounded
        t.join(timeout=2.0)
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"leftover tool threads: {alive}"


def custom_scenario(monkeypatch: pytest.MonkeyPatch, scenario: Scenario) -> str:
    """Make a test scenario reachable by name through the real session factory."""
    monkeypatch.setitem(SCENARIOS, scenario.name, scenario)
    return scenario.name


def final_attempt_calls(result: LoopResult) -> list[ToolCall]:
    """Tool calls of each turn's last (completed) attempt, in order."""
    last: dict[int, int] = {}
    for c in result.tools:
        last[c.turn] = max(last.get(c.turn, 0), c.attempt)
    return [c for c in result.tools if c.attempt == last[c.turn]]


def with_tool(session: Session, name: str, fn: ToolFn, **changes: Any) -> None:
    """Replace a tool's function (and other ToolSpec fields) on a built session."""
    session.loop.tools[name] = dataclasses.replace(session.loop.tools[name], fn=fn, **changes)


def dumps_all(observations: Iterable[O.Observation]) -> bytes:
    return b"\n".join(orjson.dumps(o.to_json(), option=orjson.OPT_NON_STR_KEYS) for o in observations)


# ------------------------------------------------------------------------------------------------- history helper


class Lines:
    """A LineSink stand-in: keeps what a printer writes."""

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.data.append(data)

    def text(self) -> list[str]:
        return b"".join(self.data).decode().splitlines()

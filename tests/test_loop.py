"""The agent loop itself: history validity, retries and what is (not) retried, errors, the API key never leaking,
start/stop edge cases. Shared helpers for the other loop test files live here too (`assert_valid_history`,
`Observed`, `run_observed`, `custom_scenario`)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx2
import orjson
import pytest

from inspector.agent import observations as O
from inspector.agent.executor import TERMINAL
from inspector.agent.loop import AgentLoop, LoopConfig, LoopResult
from inspector.agent.pacing import Pacer
from inspector.agent.states import LoopState
from inspector.scenarios.bundled import SCENARIOS, fast, get_scenario
from inspector.scenarios.model import HttpError, Scenario, TextBlock, TurnScript
from inspector.scenarios.transport import ScenarioServer, make_client
from inspector.sessions.sources import Session, api_session, scenario_session

CANARY = "sk-ant-api03-CANARY-0123456789abcdefghijklmnopqrstuvwxyz-CANARYxx"
RUN_TIMEOUT = 20.0  # a guard against hangs; never a synchronisation


# ----------------------------------------------------------------------------------------------------------- helpers
def assert_valid_history(messages: list[dict]) -> None:
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


def history_tool_ids(messages: list[dict]) -> list[str]:
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

    async def wait_for(self, cond: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()

    def of(self, *types: type) -> list:
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


async def run_observed(session: Session, timeout: float = RUN_TIMEOUT) -> tuple[LoopResult, Observed]:
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


def final_attempt_calls(result: LoopResult) -> list:
    """Tool calls of each turn's last (completed) attempt, in order."""
    last: dict[int, int] = {}
    for c in result.tools:
        last[c.turn] = max(last.get(c.turn, 0), c.attempt)
    return [c for c in result.tools if c.attempt == last[c.turn]]


def with_tool(session: Session, name: str, fn: Callable, **changes) -> None:
    """Replace a tool's function (and other ToolSpec fields) on a built session."""
    session.loop.tools[name] = dataclasses.replace(session.loop.tools[name], fn=fn, **changes)


def dumps_all(observations: Iterable[O.Observation]) -> bytes:
    return b"\n".join(orjson.dumps(o.to_json(), option=orjson.OPT_NON_STR_KEYS) for o in observations)


# ------------------------------------------------------------------------------------------------- history helper
def test_assert_valid_history_rejects_what_the_api_rejects():
    tu = lambda i: {"type": "tool_use", "id": i, "name": "t", "input": {}}
    tr = lambda i: {"type": "tool_result", "tool_use_id": i, "content": "x"}
    ok = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [tu("a"), tu("b")]},
        {"role": "user", "content": [tr("a"), tr("b")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert_valid_history(ok)
    bad = [
        ok[:2],  # dangling tool_use
        [ok[0], ok[1], {"role": "user", "content": [tr("b"), tr("a")]}],  # out of order
        [ok[0], ok[1], {"role": "user", "content": [tr("a")]}],  # missing one
        [ok[0], ok[1], {"role": "user", "content": [{"type": "text", "text": "hi"}, tr("a"), tr("b")]}],  # between
        [ok[0], ok[1], {"role": "assistant", "content": [{"type": "text", "text": "x"}]}, ok[2]],  # not next
        [ok[0], ok[1], ok[2], ok[1], ok[2]],  # duplicate ids
        [ok[0], {"role": "assistant", "content": [{"type": "text", "text": ""}]}],  # empty text
    ]
    for messages in bad:
        with pytest.raises(AssertionError):
            assert_valid_history(messages)


# ------------------------------------------------------------------------------------------------------- retries
async def test_error_event_with_retries_zero_ends_in_error_with_a_clear_message():
    s = scenario_session("overloaded_midstream", speed=math.inf, retries=0)
    result, obs = await run_observed(s)
    assert result.status == "error" and s.controller.state == LoopState.ERROR
    assert result.error == "turn 1 failed after 1 attempt: error event: overloaded_error: Overloaded"
    assert len(s.server.requests) == 1
    assert result.messages == [{"role": "user", "content": get_scenario("overloaded_midstream").prompt}]
    fin = obs.of(O.LoopFinished)[-1]
    assert (fin.status, fin.error) == ("error", result.error)
    assert obs.items[-1] is fin
    ended = obs.of(O.AttemptEnded)
    assert [(e.attempt, e.status) for e in ended] == [(0, "failed")]
    assert_no_leftovers()


async def test_drop_with_retries_exhausted():
    s = scenario_session("drop_mid_json", speed=math.inf, retries=0)
    result, obs = await run_observed(s)
    assert result.status == "error"
    assert result.error.startswith("turn 1 failed after 1 attempt: connection dropped")
    assert_valid_history(result.messages)
    assert history_tool_ids(result.messages) == []
    # the complete first tool call may have run, but nothing of the failed attempt reaches the history
    assert all(c.state in TERMINAL for c in result.tools)


def _http_error_scenario(name: str, errors: list[HttpError]) -> Scenario:
    return Scenario(
        name=name,
        description="test: HTTP errors before the first byte",
        prompt="hi",
        system=None,
        turns=[TurnScript(blocks=[TextBlock("hello")], pacing=fast(), http_errors=errors)],
    )


async def test_http_errors_are_retried_by_the_sdk_only(monkeypatch):
    # three 429s: the SDK makes 3 requests (max_retries=2) and gives up; the loop must not retry on top of that
    name = custom_scenario(
        monkeypatch,
        _http_error_scenario("test_429_forever", [HttpError(429, attempt=a, retry_after_ms=1) for a in range(5)]),
    )
    s = scenario_session(name, speed=math.inf, retries=2)
    result, obs = await run_observed(s)
    assert result.status == "error"
    assert result.error.startswith("HTTP 429: rate_limit_error")
    assert len(s.server.requests) == 3
    assert len(obs.of(O.AttemptStarted)) == 1


async def test_rate_limited_counts_requests_sdk_retries_only():
    s = scenario_session("rate_limited", speed=math.inf, retries=0)  # the loop's own retries are not needed
    result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    assert [(r.turn, r.attempt, r.response.status) for r in s.server.requests] == [
        (0, 0, 429),
        (0, 1, 200),
        (1, 0, 529),
        (1, 1, 200),
    ]
    assert [(a.turn, a.attempt) for a in obs.of(O.AttemptStarted)] == [(0, 0), (1, 0)]
    assert [e.status for e in obs.of(O.AttemptEnded)] == ["complete", "complete"]
    assert_valid_history(result.messages)


async def test_non_retryable_error_event_is_not_retried(monkeypatch):
    from inspector.scenarios.model import ErrorEventAfter

    sc = Scenario(
        name="test_invalid_request_event",
        description="test",
        prompt="hi",
        system=None,
        turns=[
            TurnScript(
                blocks=[TextBlock("hello there")],
                pacing=fast(),
                faults=[ErrorEventAfter(3, "invalid_request_error", "bad", attempts=None)],
            )
        ],
    )
    s = scenario_session(custom_scenario(monkeypatch, sc), speed=math.inf, retries=3)
    result, _ = await run_observed(s)
    assert result.status == "error"
    assert "invalid_request_error: bad" in result.error
    assert len(s.server.requests) == 1


async def test_max_turns_stops_the_loop():
    s = scenario_session("parse_date", speed=math.inf, max_turns=1)
    result, obs = await run_observed(s)
    assert result.status == "finished" and result.turns == 1
    assert result.error == "stopped after max turns (1)"
    assert len(s.server.requests) == 1
    assert_valid_history(result.messages)
    assert result.messages[-1]["role"] == "user"  # the tool results are there, ready for a next turn


async def test_cancel_before_run_is_honoured():
    s = scenario_session("weather", speed=math.inf)
    s.controller.cancel()
    result, obs = await run_observed(s)
    assert result.status == "cancelled"
    assert s.server.requests == []
    assert_valid_history(result.messages)
    assert_no_leftovers()


async def test_observation_times_come_from_the_injected_clock():
    ticks = iter(range(10**9))
    clock = lambda: float(next(ticks))
    s = scenario_session("weather", speed=math.inf, clock=clock)
    result, obs = await run_observed(s)
    times = [o.t for o in obs.items]
    assert all(float(t).is_integer() for t in times)
    assert times == sorted(times)  # one ordered stream
    for tool in s.loop.tool_summaries():
        assert tool["queued_at"] < tool["started_at"] < tool["finished_at"] <= times[-1]


# --------------------------------------------------------------------------------------------------- the API key
def _api(scenario: Scenario, tmp_path: Path, **kw) -> tuple[Session, ScenarioServer, Path]:
    server = ScenarioServer(scenario, Pacer(math.inf))
    record = tmp_path / "rec.jsonl"
    session = api_session(
        scenario.model,
        scenario.prompt,
        api_key=CANARY,
        workspace=scenario.workspace_path or tmp_path,
        record=record,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server.handler)),
        **kw,
    )
    return session, server, record


def _assert_no_canary(session: Session, result: LoopResult, obs: Observed, record: Path) -> None:
    assert CANARY.encode() not in record.read_bytes()
    assert CANARY.encode() not in dumps_all(obs.items)
    assert CANARY not in (result.error or "")
    assert CANARY not in repr(result.messages)
    assert not session.bus.errors
    for part in (CANARY[:24], CANARY[-20:]):  # no partial leak either
        assert part.encode() not in record.read_bytes() + dumps_all(obs.items)


async def test_api_key_never_recorded_nor_observed(tmp_path):
    session, server, record = _api(get_scenario("parse_date"), tmp_path)
    result, obs = await run_observed(session)
    assert result.status == "finished", result.error
    assert_valid_history(result.messages)
    # the key was really used...
    assert len(server.requests) == 2
    assert all(CANARY in (r.headers.get("x-api-key", "") + r.headers.get("authorization", "")) for r in server.requests)
    # ...and is nowhere we write or publish
    _assert_no_canary(session, result, obs, record)
    started = obs.of(O.AttemptStarted)[0]
    assert not {"x-api-key", "authorization"} & {k.lower() for k in started.headers}


async def test_api_key_not_in_error_text_on_401(tmp_path):
    sc = _http_error_scenario("test_401", [HttpError(401, attempt=0, message="invalid x-api-key")])
    session, server, record = _api(sc, tmp_path)
    result, obs = await run_observed(session)
    assert result.status == "error"
    assert result.error == "HTTP 401: authentication_error: invalid x-api-key"
    assert len(server.requests) == 1  # 401 is not retried, by anyone
    _assert_no_canary(session, result, obs, record)


async def test_api_key_echoed_by_a_relay_is_not_shown(tmp_path):
    # some relays echo the key they rejected; the error text we show must not repeat it
    sc = _http_error_scenario("test_401_echo", [HttpError(401, attempt=0, message=f"invalid key {CANARY}")])
    session, server, record = _api(sc, tmp_path)
    result, obs = await run_observed(session)
    assert result.status == "error" and result.error.startswith("HTTP 401")
    _assert_no_canary(session, result, obs, record)


async def test_api_key_echoed_inside_the_stream_is_not_observed(tmp_path):
    from inspector.scenarios.model import ErrorEventAfter

    # a relay that echoes the key in a mid-stream error event: the reads, the SSE rows, the diagnostics, the failed
    # attempt's reason and the final error all carry it in the raw bytes; none of what we publish does
    base = get_scenario("weather")
    turn = dataclasses.replace(
        base.turns[0], faults=[ErrorEventAfter(3, "overloaded_error", f"overloaded (key {CANARY})", attempts=None)]
    )
    sc = dataclasses.replace(base, name="echo_in_stream", turns=[turn, *base.turns[1:]])
    session, server, record = _api(sc, tmp_path, retries=1, user_tools={t.name: t for t in sc.extra_tools})
    result, obs = await run_observed(session)
    assert result.status == "error" and "overloaded (key [redacted])" in result.error
    from inspector.scenarios.render import render_turn

    assert CANARY.encode() in b"".join(r.data for r in render_turn(sc, 0, 0).reads)  # the bytes had it
    assert [e.status for e in obs.of(O.AttemptEnded)] == ["failed", "failed"]
    assert any("[redacted]" in o.reason for o in obs.of(O.AttemptEnded))
    _assert_no_canary(session, result, obs, record)


async def test_short_relay_key_with_a_recording(tmp_path):
    # a relay may accept any key, e.g. a 7-character one: too short to redact safely, it is still never written
    key = "k3y-Zq7"
    sc = get_scenario("weather")
    server = ScenarioServer(sc, Pacer(math.inf))
    record = tmp_path / "rec.jsonl"
    s = api_session(
        sc.model,
        sc.prompt,
        api_key=key,
        base_url="http://relay.local",
        workspace=tmp_path,
        user_tools=sc.resolve_tools(None),  # the scenario file's simulated get_weather
        record=record,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server.handler)),
    )
    result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    assert [r.turn for r in server.requests] == [0, 1] and str(server.requests[0].body["tools"]).count("get_weather")
    assert key.encode() not in record.read_bytes() and key.encode() not in dumps_all(obs.items)
    assert obs.of(O.LoopStarted)[0].source == {"type": "api", "model": sc.model, "base_url": "http://relay.local"}


async def test_api_session_without_key_fails_before_anything(monkeypatch, tmp_path):
    from inspector.sessions.sources import SourceError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SourceError, match="no API key"):
        api_session("claude-sonnet-4-5", "hi", workspace=tmp_path)


# ------------------------------------------------------------------------------------------------ a bare AgentLoop
async def test_agent_loop_with_a_plain_client_and_initial_messages():
    sc = get_scenario("weather")
    server = ScenarioServer(sc, Pacer(math.inf))
    tools = sc.resolve_tools(None)
    history = [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": [{"type": "text", "text": "Earlier answer"}]},
        {"role": "user", "content": sc.prompt},
    ]
    loop = AgentLoop(
        make_client(server),
        LoopConfig(model=sc.model, messages=history, tool_definitions=sc.request_params(tools)["tools"]),
        tools,
    )
    # the scenario picks its turn by the number of assistant messages: start the script at turn 1 with history
    # of one assistant message -> the server answers with the final text
    result = await loop.run()
    assert result.status == "finished"
    assert result.messages[:3] == history
    assert server.requests[0].body["messages"] == history
    assert_valid_history(result.messages)

"""The agent loop itself: history validity, retries and what is (not) retried, errors, the API key never leaking,
start/stop edge cases. The helpers shared with the other loop test files are in inspector/testing/loop.py."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from inspector.agent.executor import TERMINAL
from inspector.agent.loop import AgentLoop, LoopConfig, LoopResult
from inspector.core.pacing import Pacer
from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.scenarios.bundled import fast, get_scenario
from inspector.scenarios.model import HttpError, Scenario, TextBlock, TurnScript
from inspector.scenarios.transport import ScenarioServer, make_client
from inspector.sessions.sources import Session, api_session, scenario_session
from inspector.testing.loop import (
    Observed,
    assert_no_leftovers,
    assert_valid_history,
    custom_scenario,
    dumps_all,
    history_tool_ids,
    run_observed,
)

CANARY = "sk-ant-api03-CANARY-0123456789abcdefghijklmnopqrstuvwxyz-CANARYxx"


def _server(s: Session) -> ScenarioServer:
    """The scripted server scenario_session serves the session from (``Session.server``)."""
    server = s.server
    assert isinstance(server, ScenarioServer)
    return server


def test_assert_valid_history_rejects_what_the_api_rejects() -> None:
    tu: Callable[[str], dict[str, Any]] = lambda i: {"type": "tool_use", "id": i, "name": "t", "input": {}}
    tr: Callable[[str], dict[str, Any]] = lambda i: {"type": "tool_result", "tool_use_id": i, "content": "x"}
    ok: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [tu("a"), tu("b")]},
        {"role": "user", "content": [tr("a"), tr("b")]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert_valid_history(ok)
    bad: list[list[dict[str, Any]]] = [
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
async def test_error_event_with_retries_zero_ends_in_error_with_a_clear_message() -> None:
    s = scenario_session("overloaded_midstream", speed=math.inf, retries=0)
    result, obs = await run_observed(s)
    assert result.status == "error" and s.controller.state == LoopState.ERROR
    assert result.error == "turn 1 failed after 1 attempt: error event: overloaded_error: Overloaded"
    assert len(_server(s).requests) == 1
    assert result.messages == [{"role": "user", "content": get_scenario("overloaded_midstream").prompt}]
    fin = obs.of(O.LoopFinished)[-1]
    assert (fin.status, fin.error) == ("error", result.error)
    assert obs.items[-1] is fin
    ended = obs.of(O.AttemptEnded)
    assert [(e.attempt, e.status) for e in ended] == [(0, "failed")]
    assert_no_leftovers()


async def test_drop_with_retries_exhausted() -> None:
    s = scenario_session("drop_mid_json", speed=math.inf, retries=0)
    result, obs = await run_observed(s)
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("turn 1 failed after 1 attempt: connection dropped")
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


async def test_http_errors_are_retried_by_the_sdk_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # three 429s: the SDK makes 3 requests (max_retries=2) and gives up; the loop must not retry on top of that
    name = custom_scenario(
        monkeypatch,
        _http_error_scenario("test_429_forever", [HttpError(429, attempt=a, retry_after_ms=1) for a in range(5)]),
    )
    s = scenario_session(name, speed=math.inf, retries=2)
    result, obs = await run_observed(s)
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("HTTP 429: rate_limit_error")
    assert len(_server(s).requests) == 3
    assert len(obs.of(O.AttemptStarted)) == 1


async def test_rate_limited_counts_requests_sdk_retries_only() -> None:
    s = scenario_session("rate_limited", speed=math.inf, retries=0)  # the loop's own retries are not needed
    result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    assert [(r.turn, r.attempt, None if r.response is None else r.response.status) for r in _server(s).requests] == [
        (0, 0, 429),
        (0, 1, 200),
        (1, 0, 529),
        (1, 1, 200),
    ]
    assert [(a.turn, a.attempt) for a in obs.of(O.AttemptStarted)] == [(0, 0), (1, 0)]
    assert [e.status for e in obs.of(O.AttemptEnded)] == ["complete", "complete"]
    assert_valid_history(result.messages)


async def test_non_retryable_error_event_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
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
    assert result.error is not None and "invalid_request_error: bad" in result.error
    assert len(_server(s).requests) == 1


async def test_max_turns_stops_the_loop() -> None:
    s = scenario_session("parse_date", speed=math.inf, max_turns=1)
    result, obs = await run_observed(s)
    assert result.status == "finished" and result.turns == 1
    assert result.error == "stopped after max turns (1)"
    assert len(_server(s).requests) == 1
    assert_valid_history(result.messages)
    assert result.messages[-1]["role"] == "user"  # the tool results are there, ready for a next turn


async def test_cancel_before_run_is_honoured() -> None:
    s = scenario_session("weather", speed=math.inf)
    s.controller.cancel()
    result, obs = await run_observed(s)
    assert result.status == "cancelled"
    assert _server(s).requests == []
    assert_valid_history(result.messages)
    assert_no_leftovers()


async def test_observation_times_come_from_the_injected_clock() -> None:
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
def _api(scenario: Scenario, tmp_path: Path, **kw: Any) -> tuple[Session, ScenarioServer, Path]:
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


async def test_api_key_never_recorded_nor_observed(tmp_path: Path) -> None:
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


async def test_api_key_not_in_error_text_on_401(tmp_path: Path) -> None:
    sc = _http_error_scenario("test_401", [HttpError(401, attempt=0, message="invalid x-api-key")])
    session, server, record = _api(sc, tmp_path)
    result, obs = await run_observed(session)
    assert result.status == "error"
    assert result.error == "HTTP 401: authentication_error: invalid x-api-key"
    assert len(server.requests) == 1  # 401 is not retried, by anyone
    _assert_no_canary(session, result, obs, record)


async def test_api_key_echoed_by_a_relay_is_not_shown(tmp_path: Path) -> None:
    # some relays echo the key they rejected; the error text we show must not repeat it
    sc = _http_error_scenario("test_401_echo", [HttpError(401, attempt=0, message=f"invalid key {CANARY}")])
    session, server, record = _api(sc, tmp_path)
    result, obs = await run_observed(session)
    assert result.status == "error" and result.error is not None and result.error.startswith("HTTP 401")
    _assert_no_canary(session, result, obs, record)


async def test_api_key_echoed_inside_the_stream_is_not_observed(tmp_path: Path) -> None:
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
    assert result.status == "error" and result.error is not None and "overloaded (key [redacted])" in result.error
    from inspector.scenarios.render import render_turn

    assert CANARY.encode() in b"".join(r.data for r in render_turn(sc, 0, 0).reads)  # the bytes had it
    assert [e.status for e in obs.of(O.AttemptEnded)] == ["failed", "failed"]
    assert any(o.reason is not None and "[redacted]" in o.reason for o in obs.of(O.AttemptEnded))
    _assert_no_canary(session, result, obs, record)


async def test_short_relay_key_with_a_recording(tmp_path: Path) -> None:
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


async def test_api_session_without_key_fails_before_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from inspector.core.errors import SourceError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SourceError, match="no API key"):
        api_session("claude-sonnet-4-5", "hi", workspace=tmp_path)


# ------------------------------------------------------------------------------------------------ a bare AgentLoop
async def test_agent_loop_with_a_plain_client_and_initial_messages() -> None:
    sc = get_scenario("weather")
    server = ScenarioServer(sc, Pacer(math.inf))
    tools = sc.resolve_tools(None)
    history: list[dict[str, Any]] = [
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

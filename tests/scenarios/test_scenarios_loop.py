"""Every bundled scenario through the whole loop (real SDK, in-process transport, max speed): the expected end
state, a valid history, the right requests on the wire; streaming execution is real; failed attempts are retried
and their tools discarded."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inspector.agent.executor import TERMINAL, ToolState
from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.scenarios.bundled import SCENARIOS, get_scenario
from inspector.scenarios.transport import ScenarioServer
from inspector.sessions.sources import Session, scenario_session
from inspector.testing.loop import (
    Observed,
    assert_no_leftovers,
    assert_valid_history,
    final_attempt_calls,
    history_tool_ids,
    run_observed,
    with_tool,
)

ALL = list(SCENARIOS)


def _server(session: Session) -> ScenarioServer:
    """The scenario's server (``Session.server``: a ScenarioServer for a scenario_session)."""
    server = session.server
    assert isinstance(server, ScenarioServer)
    return server


def _workspace(session: Session) -> Path:
    """The scenario's workspace (``Session.workspace``)."""
    root = session.workspace
    assert isinstance(root, Path)
    return root


def _idle(name: str) -> float | None:
    # stall_with_pings: a 2 s idle timeout is the scenario's point; 0.2 s proves the same at max speed
    return 0.2 if name == "stall_with_pings" else None


@pytest.mark.parametrize("name", ALL)
async def test_bundled_scenario_ends_as_expected(name: str) -> None:
    expected = SCENARIOS[name].expected
    s = scenario_session(name, speed=math.inf, idle_timeout=_idle(name))
    result, obs = await run_observed(s)
    server = _server(s)

    assert result.status == expected["status"], result.error
    assert s.controller.state == expected["status"]
    assert result.turns == expected["turns"]
    assert len(server.requests) == expected["requests"]
    assert not any(r.rejected for r in server.requests), [r.rejected for r in server.requests]
    assert obs.of(O.TurnEnded)[-1].stop_reason == expected["final_stop_reason"]
    calls = final_attempt_calls(result)
    assert [{"name": c.name, "outcome": c.state.value} for c in calls] == expected["tool_calls"]

    # the history
    assert_valid_history(result.messages)
    assert result.messages[0] == {"role": "user", "content": SCENARIOS[name].prompt}
    fin = obs.of(O.LoopFinished)
    assert len(fin) == 1 and obs.items[-1] is fin[0]
    assert fin[0].messages == result.messages and fin[0].status == result.status
    appended = [o.message for o in obs.of(O.MessageAppended)]
    assert [result.messages[0], *appended] == result.messages

    # every tool of the history ran in the final attempt of its turn (or got an is_error result saying why not)
    ids = history_tool_ids(result.messages)
    assert ids == [c.id for c in calls if c.id in ids]
    for c in result.tools:
        assert c.state in TERMINAL, (c.name, c.state)
        states = obs.tool_states(c.id)
        if c.state is ToolState.NOT_RUN:  # unterminated block or unparseable input: never executed
            assert "running" not in states and c.started_at is None
            assert c.is_error and c.error
    final_ids = {c.id for c in calls}
    for c in result.tools:
        if c.id not in final_ids:  # a failed attempt's call: nothing of it reaches the history
            assert c.id not in ids
        elif c.id not in ids:  # a final-attempt call left out of the history: only a block that never closed
            assert c.state is ToolState.NOT_RUN and "content_block_stop" in (c.error or "")

    # the requests on the wire: each later turn's request carries the history so far, tool results included
    ok = [r for r in server.requests if r.response and r.response.status == 200]
    for r in ok:
        n_assistant = r.turn
        sent = r.body["messages"]
        assert sum(m["role"] == "assistant" for m in sent) == n_assistant
        assert sent == result.messages[: len(sent)]
        assert_valid_history(sent)
    if expected["turns"] > 1 and expected["tool_calls"]:
        turn1 = server.requests_for(1)[0].body["messages"]
        results = turn1[-1]["content"]
        turn0_calls = [c for c in calls if c.turn == 0]
        assert [b["tool_use_id"] for b in results] == [c.id for c in turn0_calls]
        for b, c in zip(results, turn0_calls, strict=True):
            assert b == c.tool_result_block()
    assert_no_leftovers()


async def test_parse_date_tools_read_the_real_workspace() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    result, _ = await run_observed(s)
    results = result.messages[2]["content"]
    assert not any(r.get("is_error") for r in results)
    root = get_scenario("parse_date").workspace_path
    assert root is not None
    assert "11 passed" in results[0]["content"]  # the simulated test run (issue 13), then the real reads
    for r, path in zip(results[1:], ["src/dates.py", "tests/test_dates.py", "CHANGELOG.md"], strict=True):
        first_line = (root / path).read_text().splitlines()[0]
        assert first_line in r["content"]


async def test_a_tool_starts_before_its_turns_message_stop() -> None:
    """Streaming execution is real: the test run and the first read_file run while later blocks still stream."""
    s = scenario_session("parse_date", speed=math.inf)
    result, obs = await run_observed(s)
    items = obs.items
    turn0 = [c for c in result.tools if c.turn == 0]
    assert [c.name for c in turn0] == ["run_tests", "read_file", "read_file", "read_file"]

    def pos(pred: Callable[..., bool]) -> int:
        return next(i for i, o in enumerate(items) if pred(o))

    msg_stop = pos(lambda o: isinstance(o, O.SSEEventSeen) and o.turn == 0 and o.event_type == "message_stop")
    for c in turn0:
        block_stop = pos(
            lambda o, c=c: (
                isinstance(o, O.SSEEventSeen)
                and o.turn == 0
                and o.event_type == "content_block_stop"
                and o.index == c.index
            )
        )
        running = pos(lambda o, c=c: isinstance(o, O.ToolStateChanged) and o.id == c.id and o.state == "running")
        assert block_stop < running < msg_stop
        # started right at its own block's stop: no other SSE event in between
        assert not any(isinstance(o, O.SSEEventSeen) for o in items[block_stop + 1 : running])
    first = turn0[0]
    later_block_start = pos(
        lambda o: (
            isinstance(o, O.SSEEventSeen)
            and o.turn == 0
            and o.event_type == "content_block_start"
            and o.index == first.index + 1
        )
    )
    assert (
        pos(lambda o: isinstance(o, O.ToolStateChanged) and o.id == first.id and o.state == "running")
        < later_block_start
    )
    # the ToolUse output is emitted at the block's stop, before the tool runs
    tool_use = pos(lambda o: isinstance(o, O.ToolUse) and o.id == first.id)
    assert tool_use < pos(lambda o: isinstance(o, O.ToolStateChanged) and o.id == first.id and o.state == "running")


async def test_tool_runs_while_the_stream_goes_on_at_real_pacing() -> None:
    """At real pacing, the first tool (blocked until the stream has moved on) finishes before message_stop."""
    s = scenario_session("parse_date", speed=8.0)
    original = s.loop.tools["read_file"].fn
    later_block_seen = asyncio.Event()

    async def read_file(args: dict[str, Any]) -> Any:
        if args["path"] == "src/dates.py":
            await later_block_seen.wait()  # proves the stream is still being consumed while this tool runs
        if inspect.iscoroutinefunction(original):  # the scenario file gives read_file a simulated duration
            return await original(args)
        return await asyncio.to_thread(original, args)

    with_tool(s, "read_file", read_file)
    obs = Observed(s.bus)
    obs.on(lambda o: later_block_seen.set() if isinstance(o, O.BlockOpened) and o.turn == 0 and o.index == 3 else None)
    async with asyncio.timeout(20):
        result = await s.run()
    assert result.status == "finished"
    first = next(c for c in result.tools if (c.input or {}).get("path") == "src/dates.py")
    stop_t = next(o.t for o in obs.sse(0) if o.event_type == "message_stop")
    assert first.state is ToolState.SUCCEEDED and first.finished_at is not None
    assert first.finished_at - s.loop._t0 < stop_t


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("overloaded_midstream", "error event: overloaded_error: Overloaded"),
        ("drop_mid_json", "connection dropped"),
        ("stall_with_pings", "idle timeout"),
    ],
)
async def test_failed_attempt_is_retried_and_its_tools_discarded(name: str, reason: str) -> None:
    s = scenario_session(
        name,
        speed=10.0 if name == "stall_with_pings" else math.inf,
        idle_timeout=0.3 if name == "stall_with_pings" else None,
    )
    original = s.loop.tools["read_file"].fn
    attempt1 = asyncio.Event()

    async def read_file(args: dict[str, Any]) -> Any:
        # the failed attempt's tool is still running when the stream fails: it must be discarded, not sent
        await attempt1.wait()
        return await asyncio.to_thread(original, args)

    with_tool(s, "read_file", read_file)
    obs = Observed(s.bus)
    obs.on(lambda o: attempt1.set() if isinstance(o, O.AttemptStarted) and o.attempt == 1 else None)
    async with asyncio.timeout(20):
        result = await s.run()
    assert result.status == "finished", result.error

    ended = [(e.turn, e.attempt, e.status) for e in obs.of(O.AttemptEnded)]
    assert ended == [(0, 0, "failed"), (0, 1, "complete"), (1, 0, "complete")]
    failed = obs.of(O.AttemptEnded)[0]
    assert failed.reason is not None and failed.reason.startswith(reason), failed.reason
    assert [r.attempt for r in _server(s).requests_for(0)] == [0, 1]
    assert [r.turn for r in _server(s).requests] == [0, 0, 1]
    # the retried request is the same request (same history), not one with anything of the failed attempt
    assert _server(s).requests[1].body["messages"] == _server(s).requests[0].body["messages"]

    attempt0 = [c for c in result.tools if (c.turn, c.attempt) == (0, 0)]
    for c in attempt0:
        assert c.state in (ToolState.DISCARDED, ToolState.NOT_RUN), (c.name, c.state)
        assert c.id not in history_tool_ids(result.messages)
    if name == "drop_mid_json":
        assert [c.state for c in attempt0] == [ToolState.DISCARDED, ToolState.NOT_RUN]
        assert "running" in obs.tool_states(attempt0[0].id)  # it had started, then was discarded
        assert "running" not in obs.tool_states(attempt0[1].id)  # its block never closed
    attempt1_calls = [c for c in result.tools if (c.turn, c.attempt) == (0, 1)]
    assert attempt1_calls and all(c.state is ToolState.SUCCEEDED for c in attempt1_calls)
    assert history_tool_ids(result.messages) == [c.id for c in attempt1_calls]
    assert_valid_history(result.messages)
    assert LoopState.WAITING_RETRY in obs.states()
    assert_no_leftovers()


async def test_stall_pings_do_not_keep_the_stream_alive() -> None:
    s = scenario_session("stall_with_pings", speed=10.0, idle_timeout=0.3)
    result, obs = await run_observed(s)
    pings = [o for o in obs.sse(0, 0) if o.event_type == "ping"]
    assert len(pings) >= 2  # pings kept coming...
    first = _server(s).responses[0]
    assert first.state == "closed_early"  # ...and we still gave up on the stream (and closed it) before they ended
    assert first.plan is not None and first.reads_sent < len(first.plan.reads)
    diag = [o.diagnostic.code for o in obs.of(O.DiagnosticRaised) if o.attempt == 0]
    assert "idle_timeout" in " ".join(diag).lower().replace("-", "_")
    assert result.status == "finished"


async def test_invalid_json_tool_is_shown_not_run() -> None:
    s = scenario_session("invalid_json", speed=math.inf)
    result, obs = await run_observed(s)
    good, bad = result.tools
    assert bad.state is ToolState.NOT_RUN and "invalid tool input JSON" in (bad.error or "")
    closed = [o for o in obs.of(O.BlockClosed) if o.turn == 0 and o.index == bad.index][0]
    assert closed.input_error and closed.content["input"] is None
    assert not [o for o in obs.of(O.ToolUse) if o.id == bad.id]  # never a complete tool call
    tr = result.messages[2]["content"][1]
    assert tr["tool_use_id"] == bad.id and tr["is_error"] is True
    tu = result.messages[1]["content"][2]
    assert tu["id"] == bad.id and tu["input"] == {}


async def test_max_tokens_cut_says_so_and_runs_nothing() -> None:
    s = scenario_session("max_tokens_cut", speed=math.inf)
    target = _workspace(s) / "src/dates.py"  # a temporary copy, removed when the session closes
    original = target.read_text()
    at_end = []
    ran = []
    with_tool(s, "write_file", lambda args: ran.append(args))
    obs = Observed(s.bus)
    obs.on(lambda o: at_end.append(target.read_text()) if isinstance(o, O.LoopFinished) else None)
    async with asyncio.timeout(20):
        result = await s.run()
    assert ran == [] and at_end == [original]
    (call,) = result.tools
    assert call.state is ToolState.NOT_RUN and "content_block_stop" in (call.error or "")
    assert "running" not in obs.tool_states(call.id)
    assert result.status == "finished"
    assert result.error is not None
    assert "max_tokens" in result.error and "write_file" in result.error and "not run" in result.error
    assert obs.of(O.TurnEnded)[-1].outcome == "truncated"
    assert result.messages[-1]["role"] == "assistant"
    assert history_tool_ids(result.messages) == []
    assert_valid_history(result.messages)


async def test_exclusive_mix_write_is_a_barrier() -> None:
    s = scenario_session("exclusive_mix", speed=math.inf)
    result, _ = await run_observed(s)
    read1, write, read2 = result.tools
    assert read1.finished_at is not None and write.started_at is not None
    assert write.finished_at is not None and read2.started_at is not None
    assert write.started_at >= read1.finished_at
    assert read2.started_at >= write.finished_at

"""Recording a loop run and replaying it through the same pipeline: same SSE events, same conversation, no tool
executed (results come from the recording)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from inspector.agent.loop import LoopResult
from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.record.replay import ReplayServer
from inspector.scenarios.model import Duration, SimulatedTool
from inspector.sessions.sources import Session, replay_session, scenario_session
from inspector.testing.clock import VirtualTime
from inspector.testing.loop import (
    Observed,
    assert_no_leftovers,
    assert_valid_history,
    final_attempt_calls,
    run_observed,
)


def _server(session: Session) -> ReplayServer:
    """The replay's server (``Session.server``: a ReplayServer for a replay_session)."""
    server = session.server
    assert isinstance(server, ReplayServer)
    return server


def sse_sequence(obs: Observed) -> list[tuple[int, int, str | None, str]]:
    return [(o.turn, o.attempt, o.sse.event, o.sse.data) for o in obs.of(O.SSEEventSeen)]


async def record_and_replay(
    name: str, path: Path, **kw: Any
) -> tuple[Session, LoopResult, Observed, Session, LoopResult, Observed]:
    s = scenario_session(name, speed=math.inf, record=path, **kw)
    original, obs1 = await run_observed(s)
    r = replay_session(path)
    replayed, obs2 = await run_observed(r)
    return s, original, obs1, r, replayed, obs2


@pytest.mark.parametrize(
    "name",
    [
        "parse_date",
        "thinking",
        "invalid_json",
        "tool_raises",
        "drop_mid_json",
        "overloaded_midstream",
        "max_tokens_cut",
        "rate_limited",
    ],
)
async def test_replay_reproduces_events_and_conversation(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.jsonl"
    s, original, obs1, r, replayed, obs2 = await record_and_replay(name, path)
    assert original.status == "finished"
    rec = read_recording(path)
    assert rec.warnings == []
    assert rec.header["source"]["name"] == name

    assert sse_sequence(obs2) == sse_sequence(obs1)
    assert replayed.status == original.status and replayed.turns == original.turns
    assert replayed.messages == original.messages
    assert_valid_history(replayed.messages)
    assert [o.data for o in obs2.of(O.ReadReceived)] == [o.data for o in obs1.of(O.ReadReceived)]
    # tool outcomes as recorded, for the attempts that count (a failed attempt's tool may or may not have finished
    # before the failure: a race in the original run, irrelevant to the conversation)
    assert [(c.id, c.name, c.is_error) for c in final_attempt_calls(replayed)] == [
        (c.id, c.name, c.is_error) for c in final_attempt_calls(original)
    ]
    # the replay sends the same conversation, request by request (one per recorded attempt)
    assert _server(r).received == len(list(rec.attempts()))
    # the server keeps only the last few request bodies (each holds the whole history)
    kept = len(_server(r).requests)
    assert 0 < kept <= ReplayServer.KEEP_REQUESTS
    assert [b["messages"] for b in _server(r).requests] == [
        (a.request or {})["body"]["messages"] for a in list(rec.attempts())[-kept:]
    ]
    assert r.loop.config.source["type"] == "replay"
    assert_no_leftovers()


async def test_replay_of_an_idle_timeout(tmp_path: Path) -> None:
    # the recorded stall is replayed as a silent connection: the replay's own idle timeout fails the attempt again
    path = tmp_path / "stall.jsonl"
    s, original, obs1, r, replayed, obs2 = await record_and_replay("stall_with_pings", path, idle_timeout=0.2)
    assert [(e.attempt, e.status) for e in obs2.of(O.AttemptEnded)] == [(0, "failed"), (1, "complete"), (0, "complete")]
    assert (obs2.of(O.AttemptEnded)[0].reason or "").startswith("idle timeout")
    assert sse_sequence(obs2) == sse_sequence(obs1)
    assert replayed.messages == original.messages


async def test_replay_does_not_execute_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    outcome = SimulatedTool.outcome  # the weather tool is a simulated tool of the scenario file

    def counting(self: SimulatedTool, args: dict[str, Any]) -> tuple[Any, str | None, bool, Duration]:
        calls.append(args)
        return outcome(self, args)

    monkeypatch.setattr(SimulatedTool, "outcome", counting)
    path = tmp_path / "weather.jsonl"
    s, original, obs1, r, replayed, obs2 = await record_and_replay("weather", path)
    assert len(calls) == 1  # the original run executed the tool once; the replay did not
    assert all(spec.description == "replayed from a recording" for spec in r.loop.tools.values())
    assert replayed.messages == original.messages
    results1 = [(o.tool_use_id, o.content, o.is_error) for o in obs1.of(O.ToolResult)]
    results2 = [(o.tool_use_id, o.content, o.is_error) for o in obs2.of(O.ToolResult)]
    assert results1 == results2


def on_virtual_time(session: Session, vt: VirtualTime) -> Session:
    """The session's pacer sleeps in virtual time (the session's clock must be ``vt.clock`` too)."""
    session.pacer.clock, session.pacer.sleeper = vt.clock, vt.sleep
    return session


async def test_replay_keeps_the_recorded_timing_scaled_by_speed(tmp_path: Path) -> None:
    # the recording holds the read times as they were (weather at 4x); a replay at 2x takes half of them. Both runs
    # are in virtual time: every time below is what the pacers slept, exactly, whatever the machine's load.
    path = tmp_path / "weather.jsonl"
    vt1, vt2 = VirtualTime(), VirtualTime()
    s = on_virtual_time(scenario_session("weather", speed=4.0, record=path, clock=vt1.clock), vt1)
    original, obs1 = await run_observed(s)
    r = on_virtual_time(replay_session(path, speed=2.0, clock=vt2.clock), vt2)
    replayed, obs2 = await run_observed(r)
    assert replayed.messages == original.messages
    reads1 = [(o.turn, o.attempt, o.t_request) for o in obs1.of(O.ReadReceived)]
    reads2 = [(o.turn, o.attempt, o.t_request) for o in obs2.of(O.ReadReceived)]
    # the original was paced by the script at 4x; the recording keeps those times
    rec = read_recording(path)
    recorded: list[tuple[int, int, object]] = [(t, a, pytest.approx(x, abs=1e-6)) for t, a, x in reads1]
    assert [(a.turn, a.attempt, rd.t) for a in rec.attempts() for rd in a.reads] == recorded
    assert reads1[-1][2] > 0.1 and vt1.slept and sum(vt2.slept) > 0
    # the replay reproduces every read at half its recorded time
    halved: list[tuple[int, int, object]] = [(t, a, pytest.approx(x / 2, abs=1e-6)) for t, a, x in reads1]
    assert reads2 == halved
    t1 = obs1.of(O.LoopFinished)[0].t
    t2 = obs2.of(O.LoopFinished)[0].t
    assert t2 == pytest.approx(t1 / 2, abs=1e-5), (t1, t2)


async def test_recording_keeps_every_read_and_the_loop_outcome(tmp_path: Path) -> None:
    path = tmp_path / "parse_date.jsonl"
    s = scenario_session("parse_date", speed=math.inf, record=path)
    result, obs = await run_observed(s)
    rec = read_recording(path)
    reads = [rd.data for att in rec.attempts() for rd in att.reads]
    assert reads == [o.data for o in obs.of(O.ReadReceived)]
    assert [(a.turn, a.attempt, (a.end or {})["status"]) for a in rec.attempts()] == [
        (0, 0, "complete"),
        (1, 0, "complete"),
    ]
    fin = [o for o in rec.observations if o["type"] == "loop_finished"]
    assert len(fin) == 1 and fin[0]["messages"] == orjson.loads(orjson.dumps(result.messages))
    # the file is closed at loop end: every line is complete JSON
    for line in path.read_bytes().splitlines():
        orjson.loads(line)


async def test_replay_server_keeps_a_bounded_number_of_request_bodies(tmp_path: Path) -> None:
    # each request body holds the whole history: keeping them all grows with the square of the turns
    from inspector.testing.recordings import write_recording

    path = tmp_path / "long.jsonl"
    write_recording(path, 12)
    r = replay_session(path)
    replayed, obs = await run_observed(r)
    assert replayed.turns == 12
    assert _server(r).received == 12
    assert len(_server(r).requests) == ReplayServer.KEEP_REQUESTS < 12
    assert _server(r).requests[-1]["messages"] == replayed.messages[:-1]


def test_a_replay_keeps_reads_on_disk_and_serves_them_exactly(tmp_path: Path) -> None:
    """load_recording spills every read to a file (SpilledReads): the bytes come back exactly, for a recording,
    a plain SSE file and a HAR (whose body is one read), and nothing of them stays in the Recording's memory."""
    import base64

    import orjson

    from inspector.record.recording import SpilledReads
    from inspector.sessions.sources import load_recording

    body = b'event: ping\ndata: {"type": "ping"}\n\n' * 3 + "é\n\n".encode()
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2025-01-01T00:00:00Z",
                    "time": 5,
                    "request": {"method": "POST", "url": "https://x/v1/messages", "headers": []},
                    "response": {
                        "status": 200,
                        "headers": [{"name": "content-type", "value": "text/event-stream"}],
                        "content": {
                            "mimeType": "text/event-stream",
                            "encoding": "base64",
                            "text": base64.b64encode(body).decode(),
                        },
                    },
                }
            ],
        }
    }
    (tmp_path / "a.har").write_bytes(orjson.dumps(har))
    (tmp_path / "a.sse").write_bytes(body)
    for name in ("a.har", "a.sse"):
        rec = load_recording(tmp_path / name)
        [att] = list(rec.attempts())
        assert isinstance(att.reads, SpilledReads), name
        assert att.data == body and b"".join(r.data for r in att.reads) == body, name
        assert att.reads[-1].data == att.reads[len(att.reads) - 1].data

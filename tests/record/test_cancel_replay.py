"""A cancelled run's recording: the cancelled attempt writes its `end` line, and the recording replays to the same
cancelled end at the same point (not "no more turns", not "stream ended before message_stop"). Also: a recording
that cannot be written (a full disk) stops with a one-line reason, the run goes on."""

from __future__ import annotations

import errno
import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inspector.observe import observations as O
from inspector.record.recorder import Recorder
from inspector.record.recording import read_recording
from inspector.record.replay import ReplayServer
from inspector.sessions.sources import Session, replay_session, scenario_session
from inspector.testing.loop import Observed, assert_no_leftovers, assert_valid_history, run_observed


def cancel_when(obs: Observed, session: Session, pred: Callable[[O.Observation], bool]) -> None:
    done: list[O.Observation] = []

    def hook(o: O.Observation) -> None:
        if not done and pred(o):
            done.append(o)
            session.controller.cancel()

    obs.on(hook)


def nth_sse(obs: Observed, turn: int, n: int) -> Callable[[O.Observation], bool]:
    return lambda o: isinstance(o, O.SSEEventSeen) and o.turn == turn and len(obs.sse(turn)) == n


POINTS: dict[str, tuple[str, Callable[[Observed], Callable[[O.Observation], bool]]]] = {
    # mid-stream, at several events of turn 1 and turn 2
    "turn1_event1": ("parse_date", lambda obs: nth_sse(obs, 0, 1)),
    "turn1_event6": ("parse_date", lambda obs: nth_sse(obs, 0, 6)),
    "turn2_event3": ("parse_date", lambda obs: nth_sse(obs, 1, 3)),
    "weather_turn2_event10": ("weather", lambda obs: nth_sse(obs, 1, 10)),
    # at the response headers, before any event
    "headers": ("parse_date", lambda obs: lambda o: isinstance(o, O.ResponseStarted) and o.turn == 1),
    # while the tools run (the stream is complete)
    "tools": ("parse_date", lambda obs: lambda o: isinstance(o, O.ToolStateChanged) and o.state == "running"),
    # while the SDK waits to retry a 429
    "sdk_wait": ("rate_limited", lambda obs: lambda o: isinstance(o, O.HttpTryFailed)),
    # the loop's own retry: cancelled in the second attempt
    "retry": ("drop_mid_json", lambda obs: lambda o: isinstance(o, O.SSEEventSeen) and o.attempt == 1),
}


def _sse(obs: Observed) -> list[tuple[Any, ...]]:
    return [(o.turn, o.attempt, o.sse.event, o.sse.data) for o in obs.of(O.SSEEventSeen)]


@pytest.mark.parametrize("point", list(POINTS))
async def test_a_cancelled_recording_replays_to_the_same_cancelled_end(point: str, tmp_path: Path) -> None:
    name, make_pred = POINTS[point]
    path = tmp_path / "cancelled.jsonl"
    s = scenario_session(name, speed=math.inf, record=path)
    obs = Observed(s.bus)
    cancel_when(obs, s, make_pred(obs))
    original, _ = await run_observed(s)
    assert original.status == "cancelled"

    rec = read_recording(path)
    assert rec.warnings == []
    attempts = list(rec.attempts())
    assert all(a.end is not None for a in attempts), "every attempt has its end line"
    if point != "tools":
        last = attempts[-1].end
        assert last is not None and last["status"] == "cancelled" and last["reason"] == "cancelled by user"

    r = replay_session(path)
    replayed, obs2 = await run_observed(r)
    assert replayed.status == "cancelled", replayed.error
    assert replayed.error == original.error == "cancelled by user"
    assert _sse(obs2) == _sse(obs)  # cancelled at the same point of the stream
    assert replayed.turns == original.turns
    assert replayed.messages == original.messages
    assert_valid_history(replayed.messages)
    assert _server(r).received == len(attempts)
    assert_no_leftovers()


def _server(session: Session) -> ReplayServer:
    """The replay's server (``Session.server``: a ReplayServer for a replay_session)."""
    server = session.server
    assert isinstance(server, ReplayServer)
    return server


class FullDisk(io.BytesIO):
    """A file whose writes fail once `room` bytes are written (ENOSPC), as on a full disk."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: bytes) -> int:  # type: ignore[override]  # (bytes: what the writer gives it)
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


async def test_a_full_disk_stops_the_recording_with_one_line_and_the_run_goes_on() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    recorder = Recorder(FullDisk(4000), source=s.source)
    s.recorder = recorder
    s.bus.subscribe(recorder)
    result, obs = await run_observed(s)
    assert result.status == "finished"
    assert recorder.error == "recording stopped: cannot write the recording: no space left on device"
    assert "\n" not in recorder.error
    assert s.bus.errors == []  # the recorder did not raise into the bus
    recorder.close()  # closing again is quiet
    assert_no_leftovers()


def test_run_headless_with_a_full_disk_warns_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from inspector.cli import run as cli_run
    from inspector.cli.headless import LineSink

    monkeypatch.setattr("inspector.cli.headless.stdout_sink", lambda **kw: LineSink(io.BytesIO(), **kw))

    def factory() -> Session:
        s = scenario_session("parse_date", speed=math.inf)
        s.recorder = Recorder(FullDisk(3000), source=s.source)
        s.bus.subscribe(s.recorder)
        return s

    code = cli_run.run_headless(factory, as_json=False)
    assert code == 0
    err = capsys.readouterr().err
    assert err == "inspector: warning: recording stopped: cannot write the recording: no space left on device\n"


def test_record_to_dev_full_is_a_one_line_error() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-m", "inspector", "run", "--scenario", "parse_date", "--headless", "--record", "/dev/full"],
        capture_output=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().count("\n") == 1 and b"Traceback" not in r.stderr
    assert b"No space left on device" in r.stderr


async def test_a_replayed_cancel_says_the_recorded_reason_not_the_users(tmp_path: Path) -> None:
    """A proxy's recording of a request its client cancelled before any response (an agent's own asyncio.gather
    cancelling its other conversations): replay cancels there, as recorded, and says why as the recording does.
    It said "cancelled by user" (headless lines, the loop's end, OTel's status), a cancel nobody made."""
    from inspector.record.recording import RecordingWriter

    why = "the client closed the connection before upstream's headers"
    rec = tmp_path / "r.jsonl"
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        w.request(0, 0, 0.0, "POST", "https://api.example/v1/messages", {}, body)
        w.end(0, 0, 0.5, "cancelled", why)
    session = replay_session(rec, speed=math.inf)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    result = await session.run()
    assert result.status == "cancelled"
    ends = [(o.status, o.reason) for o in seen if isinstance(o, O.AttemptEnded)]
    assert ends == [("cancelled", why)]
    (finished,) = [o for o in seen if isinstance(o, O.LoopFinished)]
    assert finished.error == why

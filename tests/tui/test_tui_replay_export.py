"""An export (`e`) of a dashboard replay: the recording's own times, whatever the replay's speed or clock. The export
recorded the replay's observations with the replay's clock: a replay at max speed exported every attempt as taking a
few milliseconds (`dump --timing` of the export: 'headers 0.001 s ... end 0.146 s' where the recording said 'headers
0.309 s ... end 2.391 s'), its tools as running for no time (and a replay of the export then ran them instantly), and
on a clock slower than the recording's, times the recording never had. The recording's holds (the user's pauses, left
out of the timing) were lost, so a recorded pause read as a buffering intermediary; the replay's own pauses, which
are not in the recorded times, were written."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inspector import cli
from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.record.timing import format_timing
from inspector.sessions import sources
from inspector.testing.dashboard import wait_for
from inspector.testing.recordings import CITY, proxy_recording
from inspector.tui.app import InspectorApp
from inspector.tui.export import write_recording

SIZE = (140, 42)
PAUSE = 5.0  # the recorded pause (seconds) in turn 2's stream


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """parse_date run at 10x (real gaps between reads, tools that take their time), with the user's pause of PAUSE
    seconds between two reads of turn 2, as a paused run records it: a stream_held / stream_released pair and every
    later time PAUSE seconds later. `dump --timing` leaves the pause out: not buffered."""
    path = tmp_path_factory.mktemp("replay-export") / "paused.jsonl"
    assert cli.main(["run", "--scenario", "parse_date", "--speed", "10", "--headless", "--record", str(path)]) == 0
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    reads = [i for i, e in enumerate(lines) if e.get("kind") == "read" and e.get("turn") == 1]
    at = reads[len(reads) // 2]  # the pause comes before this read
    sent = next(e["t"] for e in lines if e.get("kind") == "request" and e.get("turn") == 1)
    start = sent + lines[at - 1]["t"] + 0.001
    for e in lines[at:]:
        if e.get("kind") in ("read", "end") and e.get("turn") == 1:
            e["t"] += PAUSE
        elif e.get("kind") == "obs":
            e["t"] += PAUSE
    held = {"kind": "obs", "type": "stream_held", "t": start, "turn": 1, "attempt": 0, "by": "pause"}
    released = {"kind": "obs", "type": "stream_released", "t": start + PAUSE, "turn": 1, "attempt": 0, "held": PAUSE}
    lines[at:at] = [held, released]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    timing = format_timing(read_recording(path))
    assert "buffered" not in timing.replace("not buffered", "")
    return path


def _times(path: Path) -> dict[tuple[Any, ...], Any]:
    """Every time a recording holds, by line: a request, response or end by its turn and attempt, a read by its rank
    in its attempt, an observation by its type, turn, attempt, tool and state (and rank): its ``t``, a tool's
    ``times``, loop_finished's tools' times."""
    out: dict[tuple[Any, ...], Any] = {}
    seen: Counter[tuple[Any, ...]] = Counter()
    for raw in path.read_text().splitlines():
        e = json.loads(raw)
        if e["kind"] == "header":
            continue
        if e["kind"] == "obs":
            tool = e.get("id", e.get("tool_use_id"))
            key: tuple[Any, ...] = ("obs", e["type"], e.get("turn"), e.get("attempt"), tool, e.get("state"))
        else:
            key = (e["kind"], e["turn"], e["attempt"])
        seen[key] += 1
        value: dict[str, Any] = {"t": e["t"]}
        if "times" in e:
            value["times"] = e["times"]
        if e.get("type") == "loop_finished":
            value["tools"] = [(x["id"], x["queued_at"], x["started_at"], x["finished_at"]) for x in e["tools"]]
        out[(*key, seen[key])] = value
    return out


def _replayed(path: Path, speed: float, clock: Callable[[], float] = time.monotonic) -> tuple[list[Any], Any]:
    """The observations of a replay of ``path`` at ``speed`` on ``clock``, and the recording it replayed."""
    session = sources.replay_session(path, speed=speed, clock=clock)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    try:
        asyncio.run(session.run())
    finally:
        session.close()
    return seen, session.recording


def _slow_clock() -> Callable[[], float]:
    """A clock 10,000 times slower than real time: each reading 1,000 s after the one before."""
    ticks = itertools.count()
    return lambda: 1000.0 * next(ticks)


@pytest.mark.parametrize("speed", [math.inf, 1000.0, "slow clock"])
def test_the_export_of_a_replay_has_the_recorded_times_at_any_speed(
    recording: Path, tmp_path: Path, speed: float | str
) -> None:
    if speed == "slow clock":
        seen, replayed = _replayed(recording, math.inf, _slow_clock())
    else:
        seen, replayed = _replayed(recording, float(speed))
    out = write_recording(tmp_path / "export.jsonl", seen, {"type": "replay"}, recorded=replayed)
    assert _times(out) == _times(recording)
    assert format_timing(read_recording(out)) == format_timing(read_recording(recording))


def test_the_replays_own_pauses_are_left_out_and_the_recorded_ones_kept(recording: Path, tmp_path: Path) -> None:
    """The user paused the replay (in turn 1): that hold is on the replay's clock, not in the recorded times, and is
    not written; the recording's own pause (turn 2) is, where the recording has it."""
    seen, replayed = _replayed(recording, math.inf)
    at = next(i for i, o in enumerate(seen) if isinstance(o, O.ReadReceived))
    t = seen[at].t
    seen[at:at] = [O.StreamHeld(t, 0, 0, "pause"), O.StreamReleased(t + 30.0, 0, 0, 30.0)]
    out = write_recording(tmp_path / "export.jsonl", seen, {"type": "replay"}, recorded=replayed)
    holds = [e for e in map(json.loads, out.read_text().splitlines()) if e.get("type", "").startswith("stream_")]
    original = [
        e for e in map(json.loads, recording.read_text().splitlines()) if e.get("type", "").startswith("stream_")
    ]
    assert holds == original and len(holds) == 2
    assert _times(out) == _times(recording)


async def _export(path: Path, speed: float, export_dir: Path) -> Path:
    """A dashboard replay of ``path`` at ``speed``, to its end, then `e`: the exported recording."""
    app = InspectorApp(lambda: sources.replay_session(path, speed=speed), replay=True, export_dir=export_dir)
    messages: list[Any] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await wait_for(lambda: app.final_status is not None, 60, "the replay to finish")
        await pilot.press("e")
        await wait_for(lambda: any(isinstance(m, InspectorApp.Exported) for m in messages), what="the export")
        await pilot.pause()
    done = next(m for m in messages if isinstance(m, InspectorApp.Exported))
    assert done.error is None and done.path is not None and done.page is not None
    return Path(done.path)


def test_e_in_a_replay_at_max_speed_exports_the_recorded_times(recording: Path, tmp_path: Path) -> None:
    """The dashboard's `e` on a replay at max speed: the recording and its page carry the recorded times (`dump
    --timing` of the export is the recording's: 'headers 0.001 s' was the replay's)."""
    out = asyncio.run(_export(recording, math.inf, tmp_path))
    assert _times(out) == _times(recording)
    assert format_timing(read_recording(out)) == format_timing(read_recording(recording))
    page = out.with_suffix(".html").read_text("utf-8")
    first_read = next(e for e in map(json.loads, recording.read_text().splitlines()) if e.get("kind") == "read")
    sent = next(e for e in map(json.loads, recording.read_text().splitlines()) if e.get("kind") == "request")
    assert json.dumps(sent["t"] + first_read["t"]) in page  # the page's first read: at its recorded time


def _dumped(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    cli.main(["dump", str(path)])
    return capsys.readouterr().out


def test_e_in_a_replay_of_many_conversations_exports_every_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A proxy's recording of three conversations (7 attempts) replays a loop per conversation, each ending with its
    loop_finished: the export closed its file at the first one and held c1's 2 attempts only (`dump` of it: c1's
    turns, no conversation named). Now every attempt is written and `dump` of the export is the recording's."""
    path = Path(proxy_recording(tmp_path / "three.jsonl"))
    out = asyncio.run(_export(path, math.inf, tmp_path / "out"))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    recorded = [json.loads(x) for x in path.read_text().splitlines()]

    def attempts(lines: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
        return sorted((e["turn"], e["attempt"], len(e["body"]["messages"])) for e in lines if e["kind"] == "request")

    assert len(attempts(recorded)) == 7
    assert attempts(lines) == attempts(recorded)
    assert sum(e.get("type") == "loop_finished" for e in lines) == 3  # (one per conversation's loop)
    assert sorted(e["data"] for e in lines if e["kind"] == "read") == sorted(
        e["data"] for e in recorded if e["kind"] == "read"
    )
    original = _dumped(path, capsys)
    assert all(f"conversation {cid} " in original for cid in CITY)
    assert _dumped(out, capsys) == original
    page = out.with_suffix(".html").read_text("utf-8")
    assert all(city in page for city in CITY.values())


@pytest.fixture(scope="module")
def hung(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tool_hangs recorded: its wait_for_ci call times out after 1.5 s (state timed_out)."""
    path = tmp_path_factory.mktemp("replay-timed-out") / "hung.jsonl"
    assert cli.main(["run", "--scenario", "tool_hangs", "--speed", "max", "--headless", "--record", str(path)]) == 0
    states = [
        e for e in map(json.loads, path.read_text().splitlines()) if e.get("type") in ("tool_state", "tool_result")
    ]
    assert {e["state"] for e in states if e.get("name") == "wait_for_ci"} >= {"running", "timed_out"}
    return path


def test_a_replay_ends_a_recorded_timed_out_tool_timed_out(
    hung: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded timed-out tool was replayed as failed (its recorded is_error result, raised as a refusal): `replay
    --headless` said 'wait_for_ci ... -> failed: timed out after 1.5 s', the dashboard's fold 'failed', and the
    export of the replay had 'failed' lines (its tool_state and tool_result), so their times were not the recorded
    ones. Now timed_out everywhere, and the export's times are the recording's, line for line."""
    seen, replayed = _replayed(hung, math.inf)
    ends = {(o.name, o.state) for o in seen if isinstance(o, O.ToolStateChanged) and o.state in ("failed", "timed_out")}
    assert ends == {("wait_for_ci", "timed_out")}
    (result,) = [o for o in seen if isinstance(o, O.ToolResult) and o.name == "wait_for_ci"]
    assert result.state == "timed_out" and result.is_error and result.content == "timed out after 1.5 s"
    out = write_recording(tmp_path / "export.jsonl", seen, {"type": "replay"}, recorded=replayed)
    assert _times(out) == _times(hung)
    capsys.readouterr()
    assert cli.main(["replay", "--headless", str(hung)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "tool wait_for_ci " in x]
    assert lines[-1].endswith("-> timed_out: timed out after 1.5 s"), lines


async def test_the_dashboard_shows_a_replayed_timed_out_tool_timed_out(hung: Path) -> None:
    app = InspectorApp(lambda: sources.replay_session(hung, speed=math.inf), replay=True)
    async with app.run_test(size=SIZE):
        await wait_for(lambda: app.final_status is not None, 60, "the replay to finish")
        app.flush()
        assert {t.name: t.state for t in app.live.tools.values()}["wait_for_ci"] == "timed_out"


def test_dump_timing_of_the_export_of_many_conversations_is_the_recordings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export of a replay of three interleaved conversations: the replay runs them one after the other, so the
    export's lines come conversation by conversation, and `dump --timing` listed its attempts in that order (c1's
    two turns first) where the recording's are in recorded time order; and c2's first attempt, which its client
    closed (recorded `cancelled`), read `end failed`, the replay's end of it. Now both as the recording has them."""
    from inspector.record.timing import timing_json

    path = Path(proxy_recording(tmp_path / "three.jsonl"))
    out = asyncio.run(_export(path, math.inf, tmp_path / "out"))

    def listed(p: Path) -> list[tuple[int, int, str]]:
        return [(a["turn"], a["attempt"], a["end"]) for a in timing_json(read_recording(p))["attempts"]]

    recorded = listed(path)
    assert (1, 0, "cancelled") in recorded  # (the fixture's client cancel)
    assert listed(out) == recorded
    timing = []
    for p in (path, out):
        capsys.readouterr()
        cli.main(["dump", "--timing", str(p)])
        timing.append([line for line in capsys.readouterr().out.splitlines() if line.startswith("[c")])
    assert timing[0] and timing[1] == timing[0]


def test_timing_lists_attempts_in_recorded_time_order(tmp_path: Path) -> None:
    """Attempts written out of time order (an export of a replay writes them conversation by conversation): the
    timing lists them by their request's recorded time, the attempts of one request time in file order."""
    from inspector.record.recording import RecordingWriter
    from inspector.record.timing import timing_json

    path = tmp_path / "out-of-order.jsonl"
    with RecordingWriter(path, source={"type": "replay"}) as w:
        for turn, attempt, t in ((0, 0, 0.0), (2, 0, 2.0), (1, 0, 1.0), (1, 1, 1.0), (3, 0, 3.0)):
            w.request(turn, attempt, t, "POST", "http://x/v1/messages", {}, {"model": "m"})
            w.end(turn, attempt, 0.5, "complete", None)
    attempts = timing_json(read_recording(path))["attempts"]
    assert [(a["turn"], a["attempt"]) for a in attempts] == [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0)]

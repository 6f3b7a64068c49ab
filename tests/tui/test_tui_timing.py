"""The timing view (key `i`): per-turn timing and the buffering verdict of the session so far, on the real loop at
max speed with a clock that is the scenario's own time (the pacer's requested seconds: deterministic, no waiting),
on synthetic sessions (time travel), and on a HAR replay (its per-response timing caveat)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from textual.command import CommandList
from textual.pilot import Pilot

from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render import render_turn
from inspector.sessions import sources
from inspector.testing.dashboard import flushed, paced_session, wait_for
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.app import InspectorApp
from inspector.tui.widgets.timing import HAR_NOTE, TimingScreen

SIZE = (140, 42)


def scenario_app(name: str) -> InspectorApp:
    return InspectorApp(lambda: paced_session(name), clock=lambda: 0.0)


async def open_timing(pilot: Pilot[int]) -> TimingScreen:
    app = pilot.app
    await pilot.press("i")
    await wait_for(lambda: isinstance(app.screen, TimingScreen) and app.screen.data is not None, what="timing view")
    screen = app.screen
    assert isinstance(screen, TimingScreen)
    return screen


async def finished(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, InspectorApp)
    await wait_for(lambda: app.final_status is not None, 30, "the loop to finish")
    await flushed(app)


async def test_proxy_buffered_is_flagged_buffered_with_its_evidence() -> None:
    app = scenario_app("proxy_buffered")
    async with app.run_test(size=SIZE) as pilot:
        await finished(pilot)
        screen = await open_timing(pilot)
        assert screen.verdict == "buffered"
        assert "verdict: BUFFERED (turn 1 attempt 1)" in screen.text
        assert "buffering: BUFFERED: 100% of" in screen.text
        assert "held burst at 7.868 s after 7.868 s of silence" in screen.text
        assert "X-Accel-Buffering: no" in screen.text
        await pilot.press("i")
        await wait_for(lambda: not isinstance(app.screen, TimingScreen), what="the view to close")


async def test_parse_date_is_not_buffered() -> None:
    app = scenario_app("parse_date")
    async with app.run_test(size=SIZE) as pilot:
        await finished(pilot)
        screen = await open_timing(pilot)
        assert screen.verdict == "not buffered"
        assert "verdict: NOT BUFFERED" in screen.text and HAR_NOTE not in screen.text and app.timing_note() == ""
        assert screen.text.count("buffering: NOT BUFFERED") == 2  # both turns
        for part in (
            "turn 1 attempt 1: HTTP 200",
            "turn 2 attempt 1: HTTP 200",
            "gaps between reads",
            "gaps between events",
            "events per read",
            "pings:",
            "first content",
        ):
            assert part in screen.text
        await pilot.press("escape")
        await wait_for(lambda: not isinstance(app.screen, TimingScreen), what="the view to close")


async def test_follows_the_time_travel_cursor_and_recomputes_only_on_change() -> None:
    app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0, replay=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_timing(pilot)
        assert "turn 2 attempt 1" in screen.text and "(time travel)" not in screen.text
        n = screen.computations
        for _ in range(3):  # nothing changed: the timer does not recompute
            ticks = app.ticks
            await wait_for(lambda: app.ticks >= ticks + 8, what="a few refresh ticks")
        assert screen.computations == n
        await pilot.press("home")  # the cursor keys work inside the view
        await wait_for(lambda: "as of event 1 of" in screen.text, what="the view to follow the cursor")
        assert app.cursor == 1 and "turn 2" not in screen.text
        await pilot.press("end")
        await wait_for(lambda: "turn 2 attempt 1" in screen.text, what="the live view again")
        assert app.cursor is None


async def test_command_palette_opens_the_timing_view() -> None:
    app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"view: timing")
        await wait_for(
            lambda: (
                "view: timing" in str(app.screen.query("CommandList").first(CommandList).get_option_at_index(0).prompt)
            ),
            what="the command to be listed",
        )
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, TimingScreen), what="the timing view")


def har_bytes() -> bytes:
    body = render_turn(get_scenario("proxy_buffered"), 0, 0).body
    request = {
        "model": "recorded-model",
        "max_tokens": 1024,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    entry = {
        "startedDateTime": "2025-05-01T10:00:00.000Z",
        "time": 8200.0,
        "request": {
            "method": "POST",
            "url": "https://api.anthropic.com/v1/messages",
            "headers": [],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "text/event-stream"}],
            "content": {"size": len(body), "mimeType": "text/event-stream", "text": body.decode()},
        },
        "timings": {"send": 0.5, "wait": 299.5, "receive": 7900.0},
    }
    return json.dumps(
        {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "1"}, "entries": [entry]}}
    ).encode()


async def test_a_har_replay_says_its_timing_is_per_response(tmp_path: Path) -> None:
    path = tmp_path / "session.har"
    path.write_bytes(har_bytes())
    app = InspectorApp(
        lambda: sources.replay_session(path, speed=math.inf, clock=lambda: 0.0), clock=lambda: 0.0, replay=True
    )
    async with app.run_test(size=SIZE) as pilot:
        await finished(pilot)
        assert app.timing_note() == HAR_NOTE
        assert app.status_bar.info.timing_note == HAR_NOTE
        assert HAR_NOTE in app.status_bar.render().plain
        screen = await open_timing(pilot)
        assert HAR_NOTE in screen.text
        # the replayed reads' times are the replay's: the report is the HAR's own (time to headers, total time)
        assert screen.verdict == "inconclusive" and "no per-read timing" in screen.text
        assert "headers 0.300 s" in screen.text and "end 8.200 s" in screen.text


@pytest.mark.parametrize("variant", ["ok", "overloaded", "invalid_json", "cancelled", "held"])
def test_the_report_is_rendered_from_the_data_and_says_what_the_text_report_says(variant: str) -> None:
    """Differential: the view builds its Text from timing_json's data (styled by field, no regex over its own text),
    and says exactly what `inspector dump --timing` says."""
    from rich.style import Style

    from inspector.observe import observations as O
    from inspector.record.timing import RecordingBuilder, format_timing_json, timing_json
    from inspector.tui.widgets.timing import TimingReport

    observations = parse_date_observations(variant="ok" if variant == "held" else variant)
    if variant == "held":  # the user paused the stream after its fourth read
        i = [k for k, o in enumerate(observations) if isinstance(o, O.ReadReceived)][3]
        o = observations[i]
        assert isinstance(o, O.ReadReceived)
        observations[i:i] = [
            O.StreamHeld(o.t, o.turn, o.attempt, "pause"),
            O.StreamReleased(o.t, o.turn, o.attempt, 0.4),
        ]
    builder = RecordingBuilder(source={})
    for obs in observations:
        builder.add(obs)
    data = timing_json(builder.recording)
    assert ("held by the user" in format_timing_json(data)) == (variant == "held")
    report = TimingReport.__new__(TimingReport)
    report.c = lambda name: Style()  # type: ignore[method-assign]
    assert report.render_data(data).plain == format_timing_json(data)
    names = {0: "[c1] turn 1 (#1)", 1: "[c2] turn 1 (#2)"}  # (a session of several conversations: as dump names them)
    assert report.render_data(data, lambda turn: names.get(turn) or f"turn {turn + 1}").plain == format_timing_json(
        data, names
    )


async def test_the_view_names_each_turn_with_its_conversation() -> None:
    """A proxy session of two conversations: the view headed c2's first turn `turn 2 attempt 1` (the session's
    number), where every pane and `dump --timing` call it `[c2] turn 1 (#2)`."""
    from inspector.observe import observations as O
    from inspector.testing.streamgen import sse, text_turn

    url = "http://127.0.0.1:8787/v1/messages"
    obs: list[O.Observation] = [O.LoopStarted(0.0, {"type": "proxy", "upstream": "http://up"}, "m", None)]
    for turn, (cid, ct) in enumerate([("c1", 0), ("c2", 0), ("c1", 1)]):
        t = float(turn)
        obs += [
            O.ConversationAssigned(t, turn, cid, ct, 0, "new" if ct == 0 else "continues"),
            O.TurnStarted(t, turn),
            O.AttemptStarted(t, turn, 0, "POST", url, {}, {"model": "m"}),
            O.ResponseStarted(t + 0.1, turn, 0, 200, {"content-type": "text/event-stream"}),
            O.ReadReceived(t + 0.2, turn, 0, 0, 0.2, sse(*text_turn("hi"))),
            O.AttemptEnded(t + 0.3, turn, 0, "complete", None, "text_finish"),
        ]
    app = InspectorApp(observations=obs, clock=lambda: 0.0)
    async with app.run_test(size=(140, 42)) as pilot:
        await wait_for(lambda: len(app.live.attempts) == 3, what="the attempts")
        screen = await open_timing(pilot)
        heads = [line.split(":")[0] for line in screen.text.split("\n") if ": HTTP " in line]
    assert heads == ["[c1] turn 1 (#1) attempt 1", "[c2] turn 1 (#2) attempt 1", "[c1] turn 2 (#3) attempt 1"]


async def _buffered_recording(path: Path) -> Path:
    """proxy_buffered recorded on the scenario's own clock: 7.868 s of silence, then the whole stream at once."""
    session = paced_session("proxy_buffered", record=path)
    result = await session.run()
    assert result.status == "finished"
    return path


@pytest.mark.parametrize("speed", [math.inf, 4.0])
async def test_a_replays_timing_is_the_recordings_own_whatever_its_speed(tmp_path: Path, speed: float) -> None:
    """A replay's reads come at its speed: at max speed a buffered stream's 7.868 s of silence was gone, and the view
    said NOT BUFFERED with a first byte at 0.001 s; at 4x, 1.97 s. The view now gives the recording's own times, as
    far as the replay got, and says so."""
    path = await _buffered_recording(tmp_path / "buffered.jsonl")
    app = InspectorApp(lambda: sources.replay_session(path, speed=speed), replay=True)
    async with app.run_test(size=SIZE) as pilot:
        await finished(pilot)
        screen = await open_timing(pilot)
        assert screen.verdict == "buffered", screen.text
        assert "held burst at 7.868 s after 7.868 s of silence" in screen.text
        assert screen.text.startswith("Timing · the recording's own times, as far as replayed")
        # time travel (to the first event: its one read, the whole buffered body, is in): the recording's times too
        app.set_cursor(1)
        await wait_for(lambda: screen.text.startswith("Timing · the recording's own times, as of event 1 "))
        assert "held burst at 7.868 s after 7.868 s of silence" in screen.text


def test_as_far_as_takes_the_recordings_reads_up_to_the_replays() -> None:
    """The pure part: an attempt begun with one of three reads has the original's first read and no end; ended as
    recorded, the whole recorded attempt; cancelled mid-stream (it was taken as whole: any ended attempt was), the
    reads it got and its own end; an attempt of the replay that the recording does not have keeps the replay's times,
    with a warning."""
    from inspector.record.recording import RecordedAttempt, RecordedRead, RecordedTurn, Recording
    from inspector.record.timing import as_far_as

    def read(t: float) -> RecordedRead:
        return RecordedRead(t, b"x")

    original = Recording({"kind": "header"}, [RecordedTurn(0, [RecordedAttempt(0, 0, {}, {"t": 0.3})])])
    original.turns[0].attempts[0].reads = [read(1.0), read(2.0), read(3.0)]
    original.turns[0].attempts[0].end = {"t": 3.1, "status": "complete"}
    replayed = Recording({"kind": "header"}, [RecordedTurn(0, [RecordedAttempt(0, 0, {}, {"t": 0.0})])])
    replayed.turns[0].attempts[0].reads = [read(0.01)]
    got = as_far_as(original, replayed)
    (att,) = got.attempts()
    assert [r.t for r in att.reads] == [1.0] and att.end is None and att.response == {"t": 0.3}
    # ended as recorded (the replay's reads may come coalesced): the recorded attempt whole
    replayed.turns[0].attempts[0].end = {"t": 0.02, "status": "complete"}
    (att,) = as_far_as(original, replayed).attempts()
    assert [r.t for r in att.reads] == [1.0, 2.0, 3.0] and att.end == {"t": 3.1, "status": "complete"}
    # cancelled by the user after one read: that read, and its own end at the time of that read
    replayed.turns[0].attempts[0].end = {"t": 0.02, "status": "cancelled", "reason": "cancelled by user"}
    (att,) = as_far_as(original, replayed).attempts()
    assert [r.t for r in att.reads] == [1.0]
    assert att.end == {"t": 1.0, "status": "cancelled", "reason": "cancelled by user"}
    # cancelled before a read: at the response's time
    replayed.turns[0].attempts[0].reads = []
    (att,) = as_far_as(original, replayed).attempts()
    assert list(att.reads) == [] and att.end is not None and att.end["t"] == 0.3
    replayed.turns[0].attempts[0].reads = [read(0.01)]
    replayed.turns[0].attempts[0].end = {"t": 0.02, "status": "complete"}
    replayed.turns.append(RecordedTurn(1, [RecordedAttempt(1, 0, {}, None, [read(0.5)])]))
    got = as_far_as(original, replayed)
    assert [a.reads[0].t for a in got.attempts()] == [1.0, 0.5]
    assert got.warnings == ["turn 2 attempt 1 is not in the recording: its times are the replay's"]


def _three_conversations_the_last_turn_slow(path: Path) -> Path:
    import orjson

    from inspector.testing.recordings import proxy_recording

    path = Path(proxy_recording(path))
    lines = [orjson.loads(x) for x in path.read_text().splitlines()]
    slow = max(x["turn"] for x in lines if x.get("kind") == "read")  # the session's last turn
    for x in lines:
        if x.get("turn") == slow and x.get("kind") in ("read", "end"):
            x["t"] += 2.48
    path.write_text("".join(orjson.dumps(x).decode() + "\n" for x in lines))
    return path


async def test_a_replay_of_many_conversations_gives_the_recordings_own_times_too(tmp_path: Path) -> None:
    """A proxy recording of three conversations replays one conversation after the other: its timing view reads the
    recording's times by the session's turn numbers (c3's second turn answered after 2.5 s: at max speed the replay
    had it at once)."""
    path = _three_conversations_the_last_turn_slow(tmp_path / "three.jsonl")
    app = InspectorApp(lambda: sources.replay_session(path, speed=math.inf), replay=True)
    async with app.run_test(size=SIZE) as pilot:
        await finished(pilot)
        screen = await open_timing(pilot)
        assert screen.text.startswith("Timing · the recording's own times, as far as replayed")
        assert "first byte 2.500 s" in screen.text and "first byte 0.020 s" in screen.text


async def test_a_replay_cancelled_mid_stream_shows_what_it_got_as_its_export_does(tmp_path: Path) -> None:
    """parse_date replayed at 4x, cancelled by the user after 10 reads of turn 2: the view showed turn 2 whole as
    recorded (39 reads, 'end complete': any ended attempt was taken as finished). It shows what the replay got, the
    recorded times of its reads and its end (cancelled, at the last one's time), and says what the export (`e`)
    says."""
    from inspector.observe import observations as O
    from inspector.record.recording import read_recording
    from inspector.record.timing import timing_json

    path = tmp_path / "parse_date.jsonl"
    assert (await paced_session("parse_date", record=path).run()).status == "finished"
    recorded = {(a.turn, a.attempt): len(a.reads) for a in read_recording(path).attempts()}
    assert recorded[(1, 0)] > 20

    def session() -> sources.Session:
        s = sources.replay_session(path, speed=4.0)
        reads = 0

        def cancel_at_the_tenth_read(o: O.Observation) -> None:
            nonlocal reads
            if isinstance(o, O.ReadReceived) and o.turn == 1:
                reads += 1
                if reads == 10:
                    s.controller.cancel()

        s.bus.subscribe(cancel_at_the_tenth_read)
        return s

    messages: list[object] = []
    app = InspectorApp(session, replay=True, export_dir=tmp_path / "out")
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await finished(pilot)
        assert app.final_status == "cancelled"
        replayed = sum(isinstance(o, O.ReadReceived) and o.turn == 1 for o in app.history.observations)
        assert 10 <= replayed < recorded[(1, 0)]
        screen = await open_timing(pilot)
        assert screen.data is not None
        shown = {(a["turn"], a["attempt"]): a for a in screen.data["attempts"]}
        assert shown[(1, 0)]["reads"] == replayed and shown[(1, 0)]["end"] == "cancelled", screen.text
        assert f"turn 2 attempt 1: HTTP 200, {replayed} reads, " in screen.text
        assert shown[(1, 0)]["end_s"] == shown[(1, 0)]["last_byte_s"]
        await pilot.press("i")
        await wait_for(lambda: not isinstance(app.screen, TimingScreen), what="the view to close")
        await pilot.press("e")
        await wait_for(lambda: any(isinstance(m, InspectorApp.Exported) for m in messages), what="the export")
    done = next(m for m in messages if isinstance(m, InspectorApp.Exported))
    assert done.path is not None
    exported = timing_json(read_recording(done.path))
    assert exported["attempts"] == screen.data["attempts"]

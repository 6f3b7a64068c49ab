"""Timing analysis: per-turn times, gap histograms, events per read, ping cadence and the buffering verdict, on
scenario plans (scenario time, no waiting) and end to end through serve + proxy at real speed."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import httpx2
import pytest

from inspector.agent.loop import LoopResult
from inspector.net.faults import render_faulted
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.record.recording import (
    RecordedAttempt,
    RecordedRead,
    RecordedTurn,
    Recording,
    SpilledReads,
    read_recording,
)
from inspector.record.timing import (
    BUFFERED_SHARE,
    HELD_SILENCE,
    RULE,
    RecordingBuilder,
    analyze_attempt,
    buffering_verdict,
    format_timing,
    format_timing_json,
    histogram,
    recording_from_observations,
    recording_from_plans,
    timing_json,
)
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.fakeapi import message_seed
from inspector.scenarios.model import Pacing, Scenario, TextBlock, TurnScript
from inspector.scenarios.render import ResponsePlan, render_turn


def verdict_of(plan: ResponsePlan) -> dict[str, Any]:
    verdict: dict[str, Any] = timing_json(recording_from_plans([plan]))["attempts"][0]["buffering"]
    return verdict


def with_pacing(sc: Scenario, turn: int, **changes: Any) -> Scenario:
    turns = list(sc.turns)
    turns[turn] = dataclasses.replace(turns[turn], pacing=dataclasses.replace(turns[turn].pacing, **changes))
    return dataclasses.replace(sc, turns=turns)


# ----------------------------------------------------------------------------------------------- the verdict


def test_bundled_proxy_buffered_scenario_is_flagged_with_evidence() -> None:
    v = verdict_of(render_turn(get_scenario("proxy_buffered"), 0, 0))
    assert v["verdict"] == "buffered" and v["held_share"] == 1.0
    (burst,) = v["held_bursts"]
    assert burst["silence"] > 7 and burst["events"] > 100 and burst["share"] == 1.0
    text = format_timing(recording_from_plans([render_turn(get_scenario("proxy_buffered"), 0, 0)]))
    assert "buffering: BUFFERED" in text and "held burst at 7.868 s after 7.868 s of silence" in text
    assert RULE in text and "X-Accel-Buffering: no" in text


@pytest.mark.parametrize(
    "name,turn",
    [("parse_date", 0), ("parse_date", 1), ("weather", 0), ("thinking", 1), ("tool_raises", 1), ("big_input", 0)],
)
def test_relay_buffer_fault_is_flagged_and_the_normal_stream_is_not(name: str, turn: int) -> None:
    sc = get_scenario(name)
    normal = verdict_of(render_faulted(sc, None, turn, 0))
    relayed = verdict_of(render_faulted(sc, "relay_buffer", turn, 0))
    assert normal["verdict"] == "not buffered" and normal["held_share"] == 0 and not normal["held_bursts"]
    assert relayed["verdict"] == "buffered" and relayed["held_share"] == 1.0 and len(relayed["held_bursts"]) == 1


@pytest.mark.parametrize("size", [2048, 4096, 8192])
def test_a_relay_that_flushes_every_few_kb_is_flagged(size: int) -> None:
    """nginx-style buffers: several bursts of dozens of events after ~1 s silences."""
    sc = with_pacing(get_scenario("parse_date"), 1, proxy_buffer=size)
    v = verdict_of(render_turn(sc, 1, 0))
    assert v["verdict"] == "buffered" and v["held_share"] >= BUFFERED_SHARE and len(v["held_bursts"]) >= 2


def test_slow_first_token_and_thinking_pauses_are_not_buffering() -> None:
    sc = with_pacing(get_scenario("parse_date"), 1, ttfb=3.0, block_pause=2.0)
    assert verdict_of(render_turn(sc, 1, 0))["verdict"] == "not buffered"
    stall = verdict_of(render_turn(get_scenario("stall_with_pings"), 0, 0))  # only pings after a stall
    assert stall["verdict"] == "not buffered"
    # the fast big_input stream (40 events per read, 20 ms apart): big reads, but no silences
    assert verdict_of(render_turn(get_scenario("big_input"), 0, 0))["verdict"] == "not buffered"


def test_verdict_rule_edges() -> None:
    assert buffering_verdict([(1.0, 100, 3)])["verdict"] == "inconclusive"  # too few events
    assert buffering_verdict([])["verdict"] == "inconclusive"
    # half the bytes held back, half streamed: suspect
    reads = [(0.1 * i, 100, 1) for i in range(1, 11)] + [(3.0, 1000, 20)]
    v = buffering_verdict(reads)
    assert v["verdict"] == "suspect" and v["held_share"] == pytest.approx(0.5)
    # a burst after a silence just under the threshold is not held
    v = buffering_verdict([(HELD_SILENCE - 0.01, 5000, 50)])
    assert v["verdict"] == "not buffered"
    assert buffering_verdict([(HELD_SILENCE, 5000, 50)])["verdict"] == "buffered"
    # reads < 10 ms apart form one burst
    v = buffering_verdict([(2.0, 1000, 5), (2.005, 1000, 5), (2.009, 1000, 5)])
    assert v["verdict"] == "buffered" and v["held_bursts"][0]["reads"] == 3
    # thresholds are parameters
    assert buffering_verdict([(0.3, 5000, 50)], held_silence=0.2)["verdict"] == "buffered"


# ----------------------------------------------------------------------------------------------- the measurements


def test_per_turn_times_gaps_events_per_read_and_pings() -> None:
    sc = get_scenario("parse_date")
    plan = render_turn(sc, 1, 0)
    a = analyze_attempt(next(recording_from_plans([plan]).attempts()))
    p = sc.turns[1].pacing
    assert a["headers_s"] == pytest.approx(p.ttfb * p.header_share)
    assert a["first_byte_s"] == pytest.approx(plan.header_delay + plan.reads[0].delay)
    assert a["first_byte_s"] <= a["first_content_s"] <= a["message_stop_s"] == a["last_byte_s"]
    assert a["reads"] == len(plan.reads) and a["bytes"] == len(plan.body)
    assert a["events"] == len(plan.events)
    assert a["events_per_read"]["max"] == p.events_per_read
    assert sum(a["events_per_read"]["counts"]) == a["events"]
    rg = a["read_gaps"]
    assert rg["count"] == len(plan.reads) - 1 == sum(h["count"] for h in rg["histogram"])
    assert rg["min"] <= rg["median"] <= rg["p90"] <= rg["max"]
    assert a["event_gaps"]["count"] == a["events"] - 1
    n_pings = sum(1 for e in plan.events if e[0] == "ping")
    assert a["pings"]["count"] == n_pings > 1 and a["pings"]["interval"]["mean"] > 0.5

    stall = analyze_attempt(
        next(recording_from_plans([render_turn(get_scenario("stall_with_pings"), 0, 0)]).attempts())
    )
    assert stall["pings"]["count"] == 20
    assert stall["pings"]["interval"]["min"] == pytest.approx(0.5) == stall["pings"]["interval"]["max"]
    assert stall["first_content_s"] is None and stall["message_stop_s"] is None and stall["end"] == "stalled"


def test_histogram_buckets_and_text() -> None:
    h = histogram([0.0005, 0.002, 0.03, 0.03, 0.07, 0.2, 0.3, 0.7, 1.5, 9.0])
    assert [b["count"] for b in h] == [1, 1, 2, 1, 1, 1, 1, 1, 1]
    assert h[-1]["hi"] is None
    text = format_timing(
        recording_from_plans(
            [render_turn(get_scenario("parse_date"), 0, 0), render_turn(get_scenario("rate_limited"), 0, 0)]
        )
    )
    assert "turn 1 attempt 1: HTTP 200" in text and "gaps between reads" in text and "|#" in text
    assert "events per read: mean" in text and "buffering: NOT BUFFERED" in text
    assert "HTTP 429" in text and "INCONCLUSIVE: HTTP 429: not a stream" in text


def test_no_per_read_timing_is_said_plainly() -> None:
    att = RecordedAttempt(
        turn=0,
        attempt=0,
        response={"t": 0.4, "status": 200},
        reads=[RecordedRead(t=None, data=render_turn(get_scenario("weather"), 0, 0).body)],
        end={"t": 1.3, "status": "complete"},
    )
    rec = Recording(
        header={"kind": "header", "format": "har", "timing": "per-response"},
        turns=[RecordedTurn(turn=0, attempts=[att])],
    )
    data = timing_json(rec)
    assert data["timing"] == "per-response"
    a = data["attempts"][0]
    assert a["headers_s"] == 0.4 and a["end_s"] == 1.3 and a["first_byte_s"] is None
    assert a["buffering"]["verdict"] == "inconclusive" and a["events"] > 10
    assert "timing is per response, not per read" in format_timing(rec)


# ----------------------------------------------------------------------------------------------- from observations


async def _observed_run(name: str, record: Path) -> tuple[list[O.Observation], LoopResult]:
    """A scenario at max speed, recorded with --record's Recorder; the clock is scenario time (the pacer's requested
    seconds), so the timing is the script's, not zero."""
    from inspector.sessions.sources import scenario_session

    box: list[Any] = []
    session = scenario_session(name, speed=math.inf, clock=lambda: box[0].requested if box else 0.0, record=record)
    box.append(session.pacer)
    seen: list[Any] = []
    session.bus.subscribe(seen.append)
    result = await session.run()
    return seen, result


@pytest.mark.parametrize("name", ["parse_date", "proxy_buffered", "overloaded_midstream"])
async def test_recording_from_observations_equals_the_record_file(tmp_path: Path, name: str) -> None:
    """The dashboard's Recording (built from what it observed) is the one `--record` writes for the same run."""
    path = tmp_path / "rec.jsonl"
    observed, result = await _observed_run(name, path)
    assert result.status == "finished"
    recorded = read_recording(path)
    built = recording_from_observations(observed)
    assert built.turns == recorded.turns  # every request / response / read / end line, times included
    assert built.header["source"] == recorded.header["source"] and built.warnings == recorded.warnings == []
    assert timing_json(built) == timing_json(recorded)
    assert format_timing(built) == format_timing(recorded) == format_timing_json(timing_json(recorded))
    # incremental building (the dashboard feeds its history as it grows) gives the same Recording
    b = RecordingBuilder()
    half = len(observed) // 2
    b.extend(observed[:half])
    assert b.count == half
    b.extend(observed[half:])
    assert b.recording.turns == recorded.turns
    verdicts = [a["buffering"]["verdict"] for a in timing_json(built)["attempts"]]
    if name == "proxy_buffered":
        assert verdicts == ["buffered"]
    else:
        assert "buffered" not in verdicts and "not buffered" in verdicts


def test_recording_from_observations_without_read_timing_is_inconclusive() -> None:
    from inspector.testing.synthetic import parse_date_observations

    obs = parse_date_observations()
    timed = timing_json(recording_from_observations(obs))
    assert timed["timing"] == "per-read" and timed["attempts"][0]["buffering"]["verdict"] == "not buffered"
    untimed = timing_json(RecordingBuilder(timed_reads=False).extend(obs).recording)
    assert untimed["timing"] == "per-response"
    assert {a["buffering"]["verdict"] for a in untimed["attempts"]} == {"inconclusive"}
    assert recording_from_observations(obs).header["source"] == {"type": "scenario", "name": "parse_date"}


# ----------------------------------------------------------------------------------------------- end to end


async def test_relay_buffering_detected_through_the_proxy_at_real_speed(tmp_path: Path) -> None:
    """serve at 1x, the proxy records; the relay_buffer fault is flagged, the same turn unfaulted is not."""
    from inspector.net.proxy import ProxyApp

    sc = Scenario(
        name="short",
        description="short paced answer",
        prompt="hi",
        seed=9,
        turns=[
            TurnScript(
                blocks=[
                    TextBlock("a short answer that streams in about twenty events, paced like the real API", chunk=4)
                ],
                pacing=Pacing(ttfb=0.3, event_gap=0.06, events_per_read=1, ping_every=8),
            )
        ],
    )  # gaps wide enough that a
    record = tmp_path / "e2e.jsonl"  # loaded machine does not merge reads in TCP
    with (
        BackgroundServer(ServeApp(sc, speed=1.0, lenient=True, echo_model=False)) as up,
        BackgroundServer(ProxyApp(up.base_url, record=record)) as px,
    ):
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:

            async def call(fault: str) -> bytes:
                r = await h.post(
                    "/v1/messages",
                    headers={"x-inspector-fault": fault, "x-inspector-session": fault},
                    json={
                        "model": "m",
                        "max_tokens": 5,
                        "stream": True,
                        "messages": [{"role": "user", "content": fault}],
                    },
                )
                return r.content

            bodies = await asyncio.gather(call("none"), call("relay_buffer"))
    # the scenario's bytes, each with its conversation's message id (seeded by its first message)
    for fault, body in zip(("none", "relay_buffer"), bodies, strict=True):
        assert body == render_turn(sc, 0, 0, message_seed({"messages": [{"role": "user", "content": fault}]})).body
    rec = read_recording(record)
    by_fault = {(a.request or {})["body"]["messages"][0]["content"]: analyze_attempt(a) for a in rec.attempts()}
    assert by_fault["none"]["buffering"]["verdict"] == "not buffered"
    assert by_fault["relay_buffer"]["buffering"]["verdict"] == "buffered"
    assert by_fault["relay_buffer"]["reads"] == 1 and by_fault["none"]["reads"] > 5
    total = render_turn(sc, 0, 0).total_delay
    assert by_fault["relay_buffer"]["first_byte_s"] >= 0.9 * total  # nothing before the end
    assert by_fault["none"]["first_byte_s"] < 0.5 * total
    assert not math.isnan(by_fault["none"]["read_gaps"]["median"])


def two_turns_paused_in(paused_turn: int, held: float = 1.733) -> list[Any]:
    """Two text turns; the user holds the stream for `held` s in the middle of turn `paused_turn` (0 or 1) only."""
    from inspector.testing.synthetic import StreamScript

    s = StreamScript()
    s.loop_started()
    for turn in range(2):
        s.start_turn()
        s.start_attempt()
        s.message_start()
        s.block_start(0, {"type": "text", "text": ""})
        s.delta(0, "one ")
        if turn == paused_turn:
            s.hold(held)
        s.delta(0, "two")
        s.block_stop(0)
        s.message_delta("end_turn", 5)
        s.message_stop()
        s.end_attempt("complete", None, "text_finish")
        s.end_turn("text_finish")
        s.wait(0.3)  # the harness thinks between turns
    s.finish()
    return s.obs


@pytest.mark.parametrize("paused_turn", [0, 1])
def test_a_hold_is_charged_to_the_turn_it_happened_in_only(paused_turn: int) -> None:
    """Issue 18 §4: a pause in turn 2 only was reported as "held by the user: 1.733 s" under turn 1 AND turn 2
    (an attempt took every hold after its request, even those after its end)."""
    data = timing_json(recording_from_observations(two_turns_paused_in(paused_turn)))
    held = {a["turn"]: a["held"] for a in data["attempts"]}
    assert held[paused_turn] == {"count": 1, "seconds": 1.733}
    assert held[1 - paused_turn] == {"count": 0, "seconds": 0}
    text = format_timing_json(data)
    assert text.count("held by the user") == 1
    # and the other turn's times are its own (nothing subtracted)
    other = next(a for a in data["attempts"] if a["turn"] == 1 - paused_turn)
    assert other["end_s"] < 1.0


def test_openai_content_tokens_are_told_in_both_families() -> None:
    """Time to first token and the buffering verdict read OpenAI streams too: a chat chunk with text, reasoning or
    tool-argument characters is a content token; a role-only chunk, a usage chunk and [DONE] are not; a Responses
    delta event is one, its lifecycle events are not."""
    from inspector.record.timing import _event_content

    chunk = '{"object":"chat.completion.chunk","choices":[{"index":0,"delta":%s}]}'
    assert _event_content("message", chunk % '{"role":"assistant","content":""}') == ("chat.completion.chunk", False)
    assert _event_content("message", chunk % '{"content":"Hi"}')[1] is True
    assert _event_content("message", chunk % '{"reasoning_content":"hmm"}')[1] is True
    args = '{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a"}}]}'
    assert _event_content("message", chunk % args)[1] is True
    assert _event_content("message", '{"object":"chat.completion.chunk","choices":[],"usage":{}}')[1] is False
    assert _event_content("message", "[DONE]") == ("[DONE]", False)
    assert _event_content("message", "not json")[1] is False
    assert _event_content("response.output_text.delta", '{"delta":"Hi"}') == ("response.output_text.delta", True)
    assert _event_content("response.function_call_arguments.delta", '{"delta":""}')[1] is False
    assert _event_content("response.created", '{"response":{}}')[1] is False


async def test_a_replay_judges_buffering_on_the_recordings_own_times(tmp_path: Path) -> None:
    """A replay's reads come at its speed: at max speed a buffered stream's 3 s of silence is gone, and neither the
    dashboard nor the headless lines said timing.buffered (at 1x they did). Both now say what the recording's own
    times say, at any speed; a stream that was not buffered stays unflagged."""
    from inspector.cli.headless import ProgressPrinter
    from inspector.record.recorder import Recorder
    from inspector.record.timing import BUFFERED_CODE, recorded_buffering
    from inspector.sessions.sources import load_recording, replay_session
    from inspector.state.fold import DashboardState
    from inspector.testing.loop import Lines
    from inspector.testing.synthetic import buffered_observations

    for buffered in (True, False):
        path = tmp_path / f"{buffered}.jsonl"
        rec = Recorder(str(path))
        for o in buffered_observations(buffered=buffered):
            rec(o)
        rec.close()
        recording = load_recording(path)
        assert list(recorded_buffering(recording)) == (["0:0"] if buffered else [])
        for speed in (math.inf, 8.0):
            session = replay_session(recording, speed=speed)
            seen: list[O.Observation] = []
            lines = Lines()
            session.bus.subscribe(seen.append)
            session.bus.subscribe(ProgressPrinter(lines))  # type: ignore[arg-type]
            assert (await session.run()).status == "finished"
            st = DashboardState().apply_all(seen)
            assert [d.code for d in st.diagnostics if d.code == BUFFERED_CODE] == ([BUFFERED_CODE] if buffered else [])
            hits = [ln for ln in lines.text() if "ERROR timing.buffered: BUFFERED" in ln]
            assert len(hits) == (1 if buffered else 0), (speed, lines.text())
            if buffered:
                assert "after 3.000 s of silence" in hits[0]


class _Unreadable(SpilledReads):
    """Spilled reads whose bytes must not be read back (their times may be)."""

    def _get(self, i: int) -> RecordedRead:
        raise AssertionError("a read's bytes were read back")


def test_recorded_buffering_reads_no_bytes_of_an_attempt_without_a_silence(tmp_path: Path) -> None:
    """Only an attempt with a silence of HELD_SILENCE is analysed (a long replay starts at once): the others' reads
    are never read back from the spill."""
    from inspector.record.timing import recorded_buffering

    with (tmp_path / "spill").open("w+b") as spill:
        reads = _Unreadable(spill)
        for k in range(100):
            reads.append(RecordedRead(0.01 * k, b"event: ping\ndata: {}\n\n"))
        att = RecordedAttempt(0, 0, {}, {"status": 200, "t": 0.0}, reads, {"status": "complete", "t": 1.0})  # type: ignore[arg-type]
        assert recorded_buffering(Recording({"kind": "header"}, [RecordedTurn(0, [att])])) == {}
        late = _Unreadable(spill)
        late.append(RecordedRead(HELD_SILENCE + 0.1, b"event: ping\ndata: {}\n\n"))
        att2 = RecordedAttempt(0, 0, {}, {"status": 200, "t": 0.0}, late, {"status": "complete", "t": 1.0})  # type: ignore[arg-type]
        with pytest.raises(AssertionError, match="read back"):  # (the control: one with a silence is analysed)
            recorded_buffering(Recording({"kind": "header"}, [RecordedTurn(0, [att2])]))


def test_as_far_as_reads_no_bytes_back_until_the_analysis_runs(tmp_path: Path) -> None:
    """A spilled attempt in progress is a lazy prefix: the timing view's cache skips an attempt whose read count did
    not change, and its bytes are then never read back (they were, on every recomputation)."""
    from inspector.record.timing import as_far_as

    with (tmp_path / "spill").open("w+b") as spill:
        reads = _Unreadable(spill)
        for k in range(50):
            reads.append(RecordedRead(0.1 * k, b"data: {}\n\n"))
        att = RecordedAttempt(0, 0, {}, {"status": 200}, reads, {"status": "complete"})  # type: ignore[arg-type]
        original = Recording({"kind": "header"}, [RecordedTurn(0, [att])])
        replayed = Recording({"kind": "header"}, [RecordedTurn(0, [RecordedAttempt(0, 0, {}, {"status": 200})])])
        replayed.turns[0].attempts[0].reads = [RecordedRead(0.0, b"data: {}\n\n")] * 7
        (got,) = as_far_as(original, replayed).attempts()
        assert len(got.reads) == 7 and got.end is None
        with pytest.raises(AssertionError, match="read back"):
            got.reads[6]
        with pytest.raises(IndexError):
            got.reads[7]

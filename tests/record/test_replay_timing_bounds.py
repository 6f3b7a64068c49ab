"""Recordings cannot hang a replay (issue 19): a recorded gap above MAX_RECORDED_GAP (`t: 1e12`) is a named
warning (replay.gap_clamped) and is paced as the bound, in `replay` and in `serve --recording`."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.cli import main
from inspector.record import replay
from inspector.record.har import load_any
from inspector.record.replay import MAX_RECORDED_GAP, REPLAY_GAP_CLAMPED, gap_warnings, pacing_gap
from inspector.sessions.sources import replay_session


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("rec") / "weather.jsonl"
    assert main(["run", "--headless", "--json", "--scenario", "weather", "--speed", "max", "--record", str(p)]) == 0
    return p


def with_huge_gap(src: Path, dest: Path, t: float = 1e12) -> Path:
    out, done = [], False
    for line in src.read_bytes().splitlines():
        o = orjson.loads(line)
        if o.get("kind") == "read" and o.get("turn") == 1 and not done:
            o["t"], done = t, True
        out.append(orjson.dumps(o))
    dest.write_bytes(b"\n".join(out) + b"\n")
    return dest


@given(st.one_of(st.floats(), st.integers(), st.none(), st.text(max_size=3), st.booleans()))
def test_pacing_gap_is_always_a_bounded_non_negative_number(gap: float | str | None) -> None:
    g = pacing_gap(gap)
    assert isinstance(g, float) and 0.0 <= g <= MAX_RECORDED_GAP


def test_a_huge_gap_is_named(weather: Path, tmp_path: Path) -> None:
    rec = load_any(with_huge_gap(weather, tmp_path / "gap.jsonl"))
    [w] = gap_warnings(rec)
    assert w.startswith(f"{REPLAY_GAP_CLAMPED}: turn 2 attempt 1, read 1 was recorded 1e+12 s after")
    assert f"paced as {MAX_RECORDED_GAP:g} s" in w


def test_the_tools_durations_alone_are_named_without_reading_the_reads(weather: Path, tmp_path: Path) -> None:
    rec = load_any(with_huge_gap(weather, tmp_path / "gap.jsonl"))
    [w] = gap_warnings(rec, tool_durations={"toolu_1": 1e9}, reads=False)
    assert w.startswith(f"{REPLAY_GAP_CLAMPED}: tool call toolu_1's result was recorded 1e+09 s after")
    assert len(gap_warnings(rec, tool_durations={"toolu_1": 1e9})) == 2  # (with the read's)


def test_a_tools_clamped_duration_is_named_however_many_reads_were_clamped(tmp_path: Path) -> None:
    """More than 20 clamped gaps between reads are summed up in one line ("and N more gaps"); a tool's clamped
    duration is still named (the summary of the reads' gaps left the tool's out when it came after the 20th)."""
    from inspector.testing.synthetic import generated_observations
    from inspector.tui.export import write_recording

    src = tmp_path / "generated.jsonl"
    write_recording(src, generated_observations(200), {"type": "generated"})
    out, reads = [], 0
    for line in src.read_bytes().splitlines():
        o = orjson.loads(line)
        if o.get("kind") == "read":
            reads += 1
            o["t"] = reads * 1e12  # (every read a clamped gap after the one before)
        elif o.get("type") == "tool_state" and o.get("state") == "succeeded":
            o["times"]["succeeded"] = o["times"]["running"] + 1e9
        out.append(orjson.dumps(o))
    path = tmp_path / "gaps.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    warnings = replay_session(path, speed=math.inf).loop.config.source["warnings"]
    assert reads > 21 and f"{REPLAY_GAP_CLAMPED}: and {reads - 20} more gaps" in warnings
    assert sum("tool call" in w and "s result was recorded 1e+09 s after" in w for w in warnings) == 1


async def test_replay_at_speed_1_paces_a_huge_gap_as_the_bound(
    weather: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "MAX_RECORDED_GAP", 0.05)  # (the real bound is 10 min: the same code path)
    s = replay_session(with_huge_gap(weather, tmp_path / "gap.jsonl"), speed=1.0)
    result = await asyncio.wait_for(s.run(), 20)  # it waited 1e12 s before
    assert result.status == "finished"
    assert any(w.startswith(REPLAY_GAP_CLAMPED) for w in s.loop.config.source["warnings"])


def test_replay_headless_says_the_gap_was_clamped(
    weather: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["replay", str(with_huge_gap(weather, tmp_path / "g.jsonl")), "--headless", "--speed", "max"]) == 0
    out, _ = capsys.readouterr()
    assert f"warning: {REPLAY_GAP_CLAMPED}: turn 2 attempt 1, read 1 was recorded 1e+12 s" in out


def test_serve_recording_plans_bounded_delays_and_warns(weather: Path, tmp_path: Path) -> None:
    from inspector.net.recorded import RecordingSource

    src = RecordingSource(load_any(with_huge_gap(weather, tmp_path / "gap.jsonl")))
    plan = src.plan(1, 0)
    assert plan.reads and max(r.delay for r in plan.reads) <= MAX_RECORDED_GAP
    assert any(w.startswith(REPLAY_GAP_CLAMPED) for w in src.warnings)
    assert all(math.isfinite(r.delay) for r in plan.reads)

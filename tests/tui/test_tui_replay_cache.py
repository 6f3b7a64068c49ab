"""A dashboard replay's cache verdict (the request view, `s`): the time between two turns' requests is the
recording's, whatever the replay's speed or clock. The TTL verdict took the replay's clock: a recording whose turn 2
came 400 s after turn 1 ('TTL expired: 6.7 min' in `dump`) read 'prefix unchanged (evicted early, ...)' replayed at
any speed faster than real time, and a replay whose clock ran slower than the recording's could read a TTL expiry
the recording never had."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from inspector import cli
from inspector.sessions import sources
from inspector.testing.dashboard import wait_for
from inspector.tui.app import InspectorApp

SIZE = (140, 42)


def _recording(path: Path, gap: float, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """cache_break with turn 2's system prompt as turn 1's (only the time can explain its cache miss) and turn 2
    ``gap`` seconds later; with the verdict `dump --json` gives turn 2."""
    assert cli.main(["run", "--scenario", "cache_break", "--headless", "--record", str(path)]) == 0
    entries = [json.loads(x) for x in path.read_text().splitlines()]
    first = next(e for e in entries if e.get("kind") == "request")
    later = False
    for e in entries:
        if e.get("kind") == "request" and e.get("turn") == 1:
            e["body"]["system"] = first["body"]["system"]
            later = True
        if later and e.get("kind") in ("request", "obs") and isinstance(e.get("t"), float):
            e["t"] += gap
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    capsys.readouterr()
    assert cli.main(["dump", "--json", str(path)]) == 0
    return path, json.loads(capsys.readouterr().out)["turns"][1]["cache"]["reason"]


async def _verdict(path: Path, speed: float, clock: Callable[[], float] | None = None) -> str:
    """Turn 2's cache verdict in the request view of a dashboard replay at ``speed`` (on ``clock``)."""
    app = InspectorApp(lambda: sources.replay_session(path, speed=speed, clock=clock or time.monotonic), replay=True)
    async with app.run_test(size=SIZE):
        await wait_for(lambda: app.final_status is not None, 60, "the replay to finish")
        app.flush()
        text = app.detail_of("turn", 1).body.plain
    return next(line for line in text.splitlines() if line.startswith("cache: ")).removeprefix("cache: ")


@pytest.mark.parametrize("speed", [math.inf, 1000.0])
def test_a_ttl_that_expired_between_the_recorded_requests_is_the_verdict_at_any_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], speed: float
) -> None:
    path, recorded = _recording(tmp_path / "ttl.jsonl", 400.0, capsys)
    assert recorded.startswith("cache written again: TTL expired: 6.7 min")
    assert asyncio.run(_verdict(path, speed)) == recorded


def test_a_replay_clock_slower_than_the_recording_reads_no_ttl_expiry_it_never_had(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same recording with its requests close together ('prefix unchanged' in dump), replayed on a clock that
    runs 10,000 times slower than real time (each reading 1,000 s after the one before): still 'prefix unchanged'."""
    path, recorded = _recording(tmp_path / "near.jsonl", 0.0, capsys)
    assert recorded.startswith("cache written again: prefix unchanged")
    ticks = itertools.count()
    assert asyncio.run(_verdict(path, math.inf, clock=lambda: 1000.0 * next(ticks))) == recorded
    assert asyncio.run(_verdict(path, math.inf)) == recorded

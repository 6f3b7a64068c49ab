"""One way of counting: text for people counts turns and attempts from 1 (headless lines, discard reasons, loop
errors); JSON, observations and recordings keep 0-based indices."""

from __future__ import annotations

import math
import re

import pytest

from inspector.cli.headless import ProgressPrinter
from inspector.observe import observations as O
from inspector.sessions.sources import scenario_session
from inspector.testing.loop import Lines, run_observed

ZERO = re.compile(r"\b(turn|attempt) 0\b")


@pytest.mark.parametrize("name", ["drop_mid_json", "overloaded_midstream", "rate_limited"])
async def test_people_count_from_one(name: str) -> None:
    s = scenario_session(name, speed=math.inf)
    lines = Lines()
    s.bus.subscribe(ProgressPrinter(lines))  # type: ignore[arg-type]
    result, obs = await run_observed(s)
    text = lines.text()
    assert not [ln for ln in text if ZERO.search(ln)], text
    # a failed first attempt discards its tools saying so, counted from 1
    discarded = [o for o in obs.of(O.ToolStateChanged) if o.state == "discarded"]
    for d in discarded:
        assert d.attempt == 0 and d.error is not None and d.error.startswith("attempt 1 failed: "), d.error
    if name == "drop_mid_json":
        assert discarded
    if name != "rate_limited":
        assert any(ln.strip().split(None, 1)[1].startswith("attempt 1 failed:") for ln in text)
        assert [e.attempt for e in obs.of(O.AttemptEnded)][:2] == [0, 1]  # observations stay 0-based


async def test_loop_error_counts_turns_and_attempts_from_one() -> None:
    s = scenario_session("drop_mid_json", speed=math.inf, retries=0)
    result, obs = await run_observed(s)
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("turn 1 failed after 1 attempt: connection dropped")

"""At --speed max a replay's waits are virtual, the SDK's retry back-off too (issue 19: 20 recorded 529s without
retry-after took 109 s, the SDK backing off in real time); the harness's own retry waits are said the way the SDK's
are: the wait as it lasts, in the same format (issue 18 §4: `1 ms` next to an unscaled `retrying in 0.6 s`)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from inspector.cli import main
from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.sessions.sources import replay_session, scenario_session
from inspector.testing.loop import run_observed

N = 20


@pytest.fixture(scope="module")
def rate_limited(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    p = tmp_path_factory.mktemp("rec") / "rl.jsonl"
    assert (
        main(["run", "--headless", "--json", "--scenario", "rate_limited", "--speed", "max", "--record", str(p)]) == 0
    )
    return [orjson.loads(line) for line in p.read_bytes().splitlines()]


@pytest.fixture
def many_529s(rate_limited: list[dict[str, Any]], tmp_path: Path) -> Path:
    """The recording with turn 2's one 529 made 20, none with a retry-after header (as a HAR of a real outage)."""
    out: list[dict[str, Any]] = []
    failed = [o for o in rate_limited if o.get("kind") != "obs" and o.get("turn") == 1 and o.get("attempt") == 0]
    assert [o["kind"] for o in failed] == ["request", "response", "read", "end"] and failed[1]["status"] == 529
    for o in rate_limited:
        if o.get("kind") == "obs" or o.get("turn") != 1:
            out.append(o)
        elif o.get("attempt") == 0:
            if o["kind"] == "end":  # the 20 tries, in place of the one
                for a in range(N):
                    for f in failed:
                        g = {**f, "attempt": a}
                        if g["kind"] == "response":
                            g["headers"] = {k: v for k, v in g["headers"].items() if not k.startswith("retry-after")}
                        out.append(g)
        else:
            out.append({**o, "attempt": o["attempt"] + N - 1})
    p = tmp_path / "many_529.jsonl"
    p.write_bytes(b"\n".join(orjson.dumps(o) for o in out) + b"\n")
    return p


async def test_the_sdk_backoff_of_a_replay_at_max_speed_is_virtual(many_529s: Path) -> None:
    r = replay_session(many_529s, speed=math.inf)
    result, obs = await asyncio.wait_for(run_observed(r), 60)  # (the SDK's own backoff: > 100 s before)
    assert result.status == "finished", result.error
    fails = [f for f in obs.of(O.HttpTryFailed) if f.status == 529]
    assert len(fails) == N
    assert [f.retry_in for f in fails] == [0.001] * N  # the wait the SDK makes, said as it is


async def test_the_sdk_backoff_of_a_replay_follows_a_finite_speed(many_529s: Path) -> None:
    r = replay_session(many_529s, speed=1000.0)
    result, obs = await asyncio.wait_for(run_observed(r), 60)
    assert result.status == "finished", result.error
    # the SDK's own backoff (0.5 s doubling to 8 s) scaled by the speed, at least 1 ms
    want = [max(0.001, min(0.5 * 2**k, 8.0) / 1000) for k in range(N)]
    assert [f.retry_in for f in obs.of(O.HttpTryFailed) if f.status == 529] == pytest.approx(want)


async def test_a_recorded_retry_after_is_still_scaled_not_replaced(
    rate_limited: list[dict[str, Any]], tmp_path: Path
) -> None:
    p = tmp_path / "rl.jsonl"
    p.write_bytes(b"\n".join(orjson.dumps(o) for o in rate_limited) + b"\n")
    r = replay_session(p, speed=math.inf)
    result, obs = await asyncio.wait_for(run_observed(r), 60)
    assert result.status == "finished"
    assert [f.retry_in for f in obs.of(O.HttpTryFailed)] == [0.001, 0.001]


async def test_the_harness_retry_wait_is_said_as_it_lasts() -> None:
    """overloaded_midstream: the loop retries a stream that failed mid-way. At max speed its wait lasts 0 ms and is
    said in the format of the SDK's waits (it said `retrying in 0.6 s` and started at once)."""
    s = scenario_session("overloaded_midstream", speed=math.inf)
    result, obs = await run_observed(s)
    waits = [o.detail for o in obs.of(O.LoopStateChanged) if o.state == LoopState.WAITING_RETRY]
    own = [d for d in waits if d.startswith("retrying in ")]
    assert own, waits
    assert all(d.startswith("retrying in 0 ms: ") for d in own), own


def test_the_sdk_backoff_after_a_replayed_connection_failure_is_virtual_at_max_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded connection failure has no answer whose retry-after the replay could scale: the SDK's own back-off
    (0.5 s doubling) follows the replay's speed, 0 at --speed max (it waited in real time before)."""
    import anyio

    p = tmp_path / "refused.jsonl"
    main(["run", "--headless", "--scenario", "connection_refused", "--speed", "max", "--record", str(p)])
    tries = [orjson.loads(line) for line in p.read_bytes().splitlines() if b'"try"' in line or b"http_try" in line]
    assert tries, "the recording holds the SDK's failed tries"
    waits: list[float] = []
    real_sleep = anyio.sleep

    async def spy(delay: float, *a: object, **k: object) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", spy)
    r = replay_session(p, speed=math.inf)
    asyncio.run(asyncio.wait_for(run_observed(r), 60))
    assert waits and max(waits) == 0.0, waits  # every wait the SDK asked for is virtual

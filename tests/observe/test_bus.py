"""The observation bus: `publish_all` (a threaded session's relay delivers a batch at once) gives every subscriber
what `publish`, one observation at a time, gives it; a failing subscriber is removed as `publish` removes it."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from inspector.observe import observations as O


def _observations(n: int) -> list[O.Observation]:
    return [O.LoopStateChanged(float(i), "running", f"#{i}") for i in range(n)]


class _Counter:
    def __init__(self, fail_at: int | None = None) -> None:
        self.got: list[O.Observation] = []
        self.fail_at = fail_at

    def __call__(self, obs: O.Observation) -> None:
        if self.fail_at is not None and len(self.got) == self.fail_at:
            raise RuntimeError("boom")
        self.got.append(obs)


@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6),
    fail_at=st.one_of(st.none(), st.integers(0, 100)),
)
def test_a_batch_reaches_each_subscriber_as_one_observation_at_a_time_does(
    sizes: list[int], fail_at: int | None
) -> None:
    """Batches of any sizes, to a list's append (extended in one go), a plain callable, and one that fails at its
    `fail_at`-th observation: the same observations, in the same order, the same count, the same failure kept."""
    buses = O.ObservationBus(), O.ObservationBus()
    lists: list[list[O.Observation]] = [[], []]
    plain = [_Counter(), _Counter()]
    failing = [_Counter(fail_at), _Counter(fail_at)]
    for bus, lst, p, f in zip(buses, lists, plain, failing, strict=True):
        bus.subscribe(lst.append)
        bus.subscribe(f)
        bus.subscribe(p)
    start = 0
    for n in sizes:
        batch = _observations(start + n)[start:]
        start += n
        for obs in batch:
            buses[0].publish(obs)
        buses[1].publish_all(batch)
    one, many = buses
    assert lists[1] == lists[0] == _observations(start)
    assert plain[1].got == plain[0].got == lists[0]
    assert failing[1].got == failing[0].got
    assert many.count == one.count == start
    assert [re.sub(r" at 0x[0-9a-f]+", "", e) for e in many.errors] == [
        re.sub(r" at 0x[0-9a-f]+", "", e) for e in one.errors
    ]  # (the same failure, named by its own object)
    assert (failing[1] in many.subscribers) == (failing[0] in one.subscribers) == (fail_at is None or fail_at >= start)


def test_an_empty_batch_changes_nothing() -> None:
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    bus.publish_all([])
    assert got == [] and bus.count == 0

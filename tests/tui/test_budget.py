"""The frame budget's schedule (inspector/tui/budget.py), with the test's own clock readings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from inspector.tui.budget import MAX_INTERVAL, SHARE_K, FrameBudget

TICK = 1 / 30


def test_cheap_frames_keep_the_frame_rate() -> None:
    b = FrameBudget(TICK)
    assert b.due(0.0)  # no frame yet
    b.frame(10.0, 0.001)  # 1 ms: 12 ms of budget, less than a tick
    assert b.frames == 1
    assert not b.due(10.0 + TICK - 1e-6)
    assert b.due(10.0 + TICK)


def test_a_costly_frame_holds_the_next_one_back_k_times_its_cost() -> None:
    b = FrameBudget(TICK)
    b.frame(10.0, 0.020)
    assert not b.due(10.0 + SHARE_K * 0.020 - 1e-6)
    assert b.due(10.0 + SHARE_K * 0.020)


def test_the_paint_after_a_frame_counts_in_its_cost() -> None:
    b = FrameBudget(TICK)
    b.frame(10.0, 0.005)
    b.spent(0.015)  # Textual's layout and paint of what the frame changed
    assert not b.due(10.0 + SHARE_K * 0.020 - 1e-6)
    assert b.due(10.0 + SHARE_K * 0.020)
    b.spent(0.0)
    b.spent(-1.0)  # nothing (a clock that stepped back) changes nothing
    assert b.due(10.0 + SHARE_K * 0.020)


def test_paint_before_any_frame_is_not_charged() -> None:
    b = FrameBudget(TICK)
    b.spent(5.0)
    assert b.due(0.0)


def test_a_clock_that_reads_before_the_last_frame_does_not_freeze_the_screen() -> None:
    b = FrameBudget(TICK)
    b.frame(25_000.0, 0.030)  # (time.monotonic's reading) then the App's clock is replaced by one that reads 1000
    assert b.due(1000.0)


def test_the_screen_is_repainted_at_least_every_max_interval() -> None:
    b = FrameBudget(TICK)
    b.frame(10.0, 3.0)  # a frame that took 3 s (a loaded machine, a huge view)
    assert b.due(10.0 + MAX_INTERVAL)


@given(
    st.floats(0.001, 0.2),
    st.floats(1.0, 30.0),
    st.lists(st.tuples(st.floats(0.0, 0.3), st.floats(0.0, 0.3)), min_size=1, max_size=40),
)
def test_the_wait_is_k_times_the_cost_clamped_between_a_tick_and_the_maximum(
    tick: float, k: float, frames: list[tuple[float, float]]
) -> None:
    """For any frames (own work, then paint), the next frame is due exactly clamp(k x cost) after the last start,
    and so the UI's share of the time stays under 1/k whenever the wait is not clamped."""
    b = FrameBudget(tick, k=k)
    now = 0.0
    for own, paint in frames:
        assert b.due(now)
        b.frame(now, own)
        b.spent(paint)
        wait = min(max(MAX_INTERVAL, tick), max(tick, k * (own + paint)))
        assert b.next_at == now + wait
        assert not b.due(now + wait * 0.999) or wait == 0
        if tick < k * (own + paint) < max(MAX_INTERVAL, tick):
            assert (own + paint) / wait <= 1 / k + 1e-9
        now += wait

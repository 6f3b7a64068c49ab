"""core.deadline.ReadDeadline: the idle timeout of a stream's reads with one timer per idle period, on an event loop
whose clock is virtual (its select advances the clock by the time it would wait: nothing waits on the real clock)."""

from __future__ import annotations

import asyncio
import contextvars
import math
import selectors
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.core.deadline import ReadDeadline

IDLE = 10.0


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self.loop is not None
        if timeout is None:
            raise AssertionError("the loop would wait forever: a test hangs")
        self.loop.now += max(0.0, timeout)  # (no I/O in these tests: the wait is the time passing)
        return super().select(0)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time, counting the timers it arms (``call_at``)."""

    def __init__(self) -> None:
        sel = _VirtualSelector()
        super().__init__(sel)
        sel.loop = self
        self.now = 0.0
        self.armed = 0

    def time(self) -> float:
        return self.now

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.TimerHandle:
        self.armed += 1
        return super().call_at(when, callback, *args, context=context)


def run(main: Callable[[], Awaitable[Any]]) -> tuple[Any, VirtualLoop]:
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(main()), loop
    finally:
        loop.close()


async def _reader(gaps: list[float], idle: float) -> tuple[int, float | None]:
    """Items that come after ``gaps`` (virtual seconds each), read with the deadline moved ``idle`` on after each:
    (items read, when the read timed out: None if none did)."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[int] = asyncio.Queue()

    async def produce() -> None:
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            q.put_nowait(i)

    producer = asyncio.create_task(produce())
    watch = ReadDeadline(loop.time() + idle)
    got = 0
    try:
        while got < len(gaps):
            try:
                assert await watch.read(q.get()) == got
            except TimeoutError:
                return got, loop.time()
            got += 1
            watch.deadline = loop.time() + idle
        return got, None
    finally:
        watch.close()
        producer.cancel()
        await asyncio.gather(producer, return_exceptions=True)


gap_lists = st.lists(
    st.floats(0.0, 3 * IDLE, allow_nan=False).filter(lambda g: abs(g - IDLE) > 1e-6), min_size=1, max_size=60
)


@given(gap_lists)
def test_a_read_times_out_exactly_when_its_gap_reaches_the_idle_time(gaps: list[float]) -> None:
    (got, timed_out_at), loop = run(lambda: _reader(gaps, IDLE))
    first_long = next((i for i, g in enumerate(gaps) if g > IDLE), None)
    if first_long is None:
        assert (got, timed_out_at) == (len(gaps), None)
    else:
        assert got == first_long  # every read before it, none after
        assert timed_out_at == pytest.approx(sum(gaps[:first_long]) + IDLE)


@given(st.integers(1, 400), st.floats(0.001, 0.5))
def test_timers_are_armed_once_per_idle_period_not_once_per_read(reads: int, fraction: float) -> None:
    gaps = [IDLE * fraction] * reads
    (got, timed_out_at), loop = run(lambda: _reader(gaps, IDLE))
    assert (got, timed_out_at) == (reads, None)
    # the producer's sleeps arm one timer each; the deadline's fires at the deadline it was armed for, at least
    # IDLE - gap after the one before: a handful however many reads came (one timer per read before)
    deadline_timers = loop.armed - reads
    assert deadline_timers <= math.floor(sum(gaps) / (IDLE - gaps[0])) + 1


@pytest.mark.parametrize("at", [IDLE / 2, IDLE], ids=["before-the-deadline", "at-the-deadline"])
def test_a_cancel_from_elsewhere_stays_a_cancel(at: float) -> None:
    """Also one that lands at the deadline's own moment (both cancel the read: the task's cancelling() count says
    that one was not the deadline's)."""

    async def main() -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        never: asyncio.Future[None] = loop.create_future()

        async def read() -> None:
            watch = ReadDeadline(loop.time() + IDLE)
            try:
                await watch.read(never)
            finally:
                watch.close()

        task = asyncio.create_task(read())
        loop.call_at(loop.time() + at, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled", task.cancelling()
        except TimeoutError:
            return "timeout", task.cancelling()
        return "read", task.cancelling()

    assert run(main)[0] == ("cancelled", 1)


def test_a_timed_out_read_leaves_no_cancel_pending() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        watch = ReadDeadline(loop.time() + IDLE)
        with pytest.raises(TimeoutError):
            await watch.read(loop.create_future())
        watch.close()
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        await asyncio.sleep(IDLE)  # (a cancel left pending would land here)
        return 1

    assert run(main)[0] == 1


def test_a_deadline_passed_between_reads_times_out_the_next_read_at_once_without_awaiting_it() -> None:
    async def main() -> tuple[float, list[str]]:
        loop = asyncio.get_running_loop()
        watch = ReadDeadline(loop.time() + IDLE)
        await watch.read(asyncio.sleep(1.0))
        await asyncio.sleep(2 * IDLE)  # (not reading: nothing is cancelled meanwhile)
        t = loop.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(TimeoutError):
                await watch.read(asyncio.sleep(0.5))
        watch.close()
        return loop.time() - t, [str(w.message) for w in caught]

    waited, warned = run(main)[0]
    assert waited == 0.0
    assert not [w for w in warned if "never awaited" in w]


def test_the_time_between_reads_does_not_count_once_the_deadline_is_moved() -> None:
    """As the loop does after a pause: the deadline is moved on before the next read."""

    async def main() -> float:
        loop = asyncio.get_running_loop()
        watch = ReadDeadline(loop.time() + IDLE)
        await watch.read(asyncio.sleep(1.0))
        await asyncio.sleep(3 * IDLE)  # paused
        watch.deadline = loop.time() + IDLE
        t = loop.time()
        await watch.read(asyncio.sleep(IDLE / 2))
        watch.close()
        return loop.time() - t

    assert run(main)[0] == IDLE / 2


def test_a_deadline_moved_back_fires_at_the_earlier_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        watch = ReadDeadline(loop.time() + IDLE)
        await watch.read(asyncio.sleep(1.0))  # (a timer armed for IDLE)
        watch.deadline = loop.time() + 2.0
        t = loop.time()
        with pytest.raises(TimeoutError):
            await watch.read(loop.create_future())
        watch.close()
        return loop.time() - t

    assert run(main)[0] == 2.0


def test_no_deadline_arms_no_timer_and_never_times_out() -> None:
    async def main() -> int:
        watch = ReadDeadline()
        for _ in range(5):
            await watch.read(asyncio.sleep(100 * IDLE))
        watch.close()
        return 5

    n, loop = run(main)
    assert n == 5
    assert loop.armed == 5  # (the sleeps' own)


def test_made_outside_a_task_is_refused() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="inside a task"):
            loop.run_until_complete(_outside())
    finally:
        loop.close()


async def _outside() -> None:
    # (a coroutine run by run_until_complete is a task: call the constructor from a plain callback instead)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def make() -> None:
        try:
            ReadDeadline()
        except RuntimeError as e:
            done.set_exception(e)
        else:
            done.set_result(None)

    loop.call_soon(make)
    await done

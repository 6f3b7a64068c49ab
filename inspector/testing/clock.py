"""Virtual time for the pacer and the loop in tests: nothing waits on the real clock."""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["VirtualTime"]

TIMEOUT = 20.0  # a bound on waits that should end at once (a hang guard, never a timing assertion)


class VirtualTime:
    """Virtual wall time for a :class:`Pacer` (``clock=vt.clock, sleeper=vt.sleep``; also the clock of a session):
    nothing waits on the real clock. A sleep ends when virtual time reaches its deadline; virtual time jumps to the
    earliest pending deadline once the other tasks have had many turns (enough for in-process work to start its own
    sleeps), so concurrent sleeps overlap as they would in real time.

    ``asked``: wall seconds of every sleep begun; ``slept``: of every sleep that ran to its end (a speed change or
    a pause cuts a sleep short: it is in ``asked``, not in ``slept``). ``hold=True``: time only moves by
    :meth:`advance`, sleeps end only when the pacer wakes them, until :meth:`release`."""

    SETTLE = 50  # event-loop turns given to the other tasks before time jumps (a count, not a duration)

    def __init__(self, *, hold: bool = False) -> None:
        self.now = 0.0
        self.hold = hold
        self.asked: list[float] = []
        self.slept: list[float] = []
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._driver: asyncio.Task[None] | None = None

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def release(self) -> None:
        self.hold = False
        self._kick()

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + seconds, next(self._seq), fut))
        self.asked.append(seconds)
        self._changed.set()
        self._kick()
        await fut  # cancelled (woken early): the timer is skipped by the driver
        self.slept.append(seconds)

    async def started(self, n: int) -> None:
        """Until ``n`` sleeps have begun (bounded by TIMEOUT)."""
        async with asyncio.timeout(TIMEOUT):
            while len(self.asked) < n:
                self._changed.clear()
                await self._changed.wait()

    def _kick(self) -> None:
        if not self.hold and (self._driver is None or self._driver.done()):
            self._driver = asyncio.get_running_loop().create_task(self._drive())

    async def _drive(self) -> None:
        while not self.hold:
            for _ in range(self.SETTLE):
                await asyncio.sleep(0)
            while self._timers and self._timers[0][2].done():
                heapq.heappop(self._timers)
            if not self._timers or self.hold:
                return
            deadline, _, fut = heapq.heappop(self._timers)
            self.now = max(self.now, deadline)
            fut.set_result(None)

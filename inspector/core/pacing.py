"""Speed-controlled sleeping, shared by scenarios and replays.

A :class:`Pacer` turns "scenario seconds" into wall-clock seconds: ``await pacer.sleep(0.4)`` sleeps 0.4 s at 1x,
0.2 s at 2x and not at all (one ``asyncio.sleep(0)``) at max speed. The speed may change, or the pacer may be paused,
while sleeps are in progress: every sleeper is woken at once and recomputes what is left of its sleep at the new speed.

Time is injectable, for tests and simulations: ``clock`` (a callable giving seconds, default: the running event loop's
clock) measures how much of a sleep has gone by when a speed change wakes it, and ``sleeper`` (an async callable taking
wall seconds, default: an event-loop timer) does the actual waiting. A pacer built with a virtual clock and a sleeper
that advances it never waits on the wall clock. Both are plain attributes, so the pacer of a session or server built
elsewhere can be given them too.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

SPEED_LADDER: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 10.0, math.inf)


def parse_speed(value: str) -> float:
    """A speed from the command line: "1", "0.5", "4x", "max" (an argparse `type=`)."""
    import argparse

    v = value.strip().lower()
    if v in ("max", "inf", "fastest"):
        return math.inf
    try:
        f = float(v.removesuffix("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed must be a number like 1, 0.5, 4 or 'max', not {value!r}") from None
    if not f > 0:
        raise argparse.ArgumentTypeError("speed must be > 0")
    return f


def speed_label(speed: float) -> str:
    """``1.0 -> "1x"``, ``0.25 -> "0.25x"``, ``inf -> "max"``."""
    if math.isinf(speed):
        return "max"
    if float(speed).is_integer():
        return f"{int(speed)}x"
    return f"{speed:g}x"


class Pacer:
    """Sleeps scenario time scaled by a speed that can change at any moment."""

    def __init__(
        self,
        speed: float = 1.0,
        *,
        paused: bool = False,
        clock: Callable[[], float] | None = None,
        sleeper: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        self._speed = self._check(speed)
        self._paused = paused
        # None: the running loop's clock / a loop timer. A sleeper's wait is cut short (cancelled) by a wake-up.
        self.clock: Callable[[], float] | None = clock
        self.sleeper: Callable[[float], Awaitable[object]] | None = sleeper
        self._waiters: set[asyncio.Future[bool]] = set()
        # Bookkeeping, handy for tests and for the UI: scenario seconds requested and number of sleep() calls.
        self.requested: float = 0.0
        self.calls: int = 0

    @staticmethod
    def _check(speed: float) -> float:
        speed = float(speed)
        if not speed > 0:  # also rejects NaN
            raise ValueError(f"speed must be > 0 (math.inf for max speed), got {speed!r}")
        return speed

    # --- speed control -----------------------------------------------------------------------------------------
    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self.set_speed(value)

    def set_speed(self, speed: float) -> float:
        self._speed = self._check(speed)
        self._wake()
        return self._speed

    def faster(self) -> float:
        """Next step up the ladder (stays at max)."""
        return self.set_speed(next((s for s in SPEED_LADDER if s > self._speed), SPEED_LADDER[-1]))

    def slower(self) -> float:
        """Next step down the ladder (stays at the lowest step)."""
        return self.set_speed(next((s for s in reversed(SPEED_LADDER) if s < self._speed), SPEED_LADDER[0]))

    @property
    def label(self) -> str:
        return speed_label(self._speed) + (" paused" if self._paused else "")

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        self._paused = True
        self._wake()

    def resume(self) -> None:
        self._paused = False
        self._wake()

    def toggle_pause(self) -> bool:
        self.resume() if self._paused else self.pause()
        return self._paused

    def _wake(self) -> None:
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(True)

    # --- sleeping ----------------------------------------------------------------------------------------------
    def wall_seconds(self, seconds: float) -> float:
        """How long ``seconds`` of scenario time lasts at the current speed (ignores pause)."""
        return 0.0 if math.isinf(self._speed) or seconds <= 0 else seconds / self._speed

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of scenario time; always yields to the event loop at least once."""
        seconds = max(0.0, float(seconds))
        self.requested += seconds
        self.calls += 1
        remaining = seconds
        loop = asyncio.get_running_loop()
        now = self.clock or loop.time
        while True:
            if self._paused:  # paused: even a zero sleep waits for resume (or a speed change)
                await self._wait(loop, None)
                continue
            speed = self._speed
            if remaining <= 0 or math.isinf(speed):
                await asyncio.sleep(0)
                return
            start = now()
            if not await self._wait(loop, remaining / speed):
                return  # the timer fired: done
            remaining -= (now() - start) * speed

    async def _wait(self, loop: asyncio.AbstractEventLoop, wall_seconds: float | None) -> bool:
        """Wait ``wall_seconds`` (None: forever); True if woken early by a speed/pause change."""
        fut: asyncio.Future[bool] = loop.create_future()
        self._waiters.add(fut)
        handle: asyncio.TimerHandle | asyncio.Task[None] | None = None
        if wall_seconds is not None:
            if self.sleeper is None:
                handle = loop.call_later(wall_seconds, _resolve, fut)
            else:
                handle = loop.create_task(_sleep_then_resolve(self.sleeper, wall_seconds, fut))
        try:
            woken = await fut
        finally:
            self._waiters.discard(fut)
            if handle is not None:
                handle.cancel()
        if isinstance(handle, asyncio.Task) and not handle.done():
            await asyncio.wait([handle])  # woken early: let the injected sleeper unwind before sleeping on
        return woken

    def __repr__(self) -> str:
        return f"Pacer({self.label})"


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


async def _sleep_then_resolve(
    sleeper: Callable[[float], Awaitable[object]], seconds: float, fut: asyncio.Future[bool]
) -> None:
    try:
        await sleeper(seconds)
    except asyncio.CancelledError:
        raise  # woken early (or the sleep was cancelled): the wake-up has already settled `fut`
    except BaseException as e:  # noqa: BLE001 (a failing sleeper fails the sleep instead of hanging it)
        if not fut.done():
            fut.set_exception(e)
        return
    _resolve(fut)

"""Test doubles and waiting helpers for the dashboard tests (no sleeps as synchronization)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from inspector.core.pacing import Pacer, speed_label
from inspector.observe import observations as O
from inspector.observe.states import LoopState

if TYPE_CHECKING:
    from inspector.sessions.sources import Session

S = TypeVar("S")


class _Ticking(Protocol):
    """The app's refresh-timer count (``InspectorApp.ticks``)."""

    @property
    def ticks(self) -> int: ...


class FakeController:
    """Records every call; `state` follows pause/resume/cancel like the real one."""

    def __init__(self) -> None:
        self.calls: list[str | tuple[str, str | float]] = []  # "pause", ("step", unit), ("set_speed", speed)...
        self.state = LoopState.STREAMING
        self.speed = 1.0
        self.ladder = (0.25, 0.5, 1.0, 2.0, 4.0, 10.0, math.inf)

    @property
    def speed_label(self) -> str:
        return speed_label(self.speed)

    def pause(self) -> None:
        self.calls.append("pause")
        self.state = LoopState.PAUSED

    def resume(self) -> None:
        self.calls.append("resume")
        self.state = LoopState.STREAMING

    def toggle_pause(self) -> None:
        self.calls.append("toggle_pause")
        self.state = LoopState.STREAMING if self.state == LoopState.PAUSED else LoopState.PAUSED

    def step(self, unit: str = "event") -> None:
        self.calls.append(("step", unit))
        self.state = LoopState.STEPPING

    def cancel(self) -> None:
        self.calls.append("cancel")
        self.state = LoopState.CANCELLED

    def faster(self) -> None:
        self.calls.append("faster")
        self.speed = next((s for s in self.ladder if s > self.speed), self.ladder[-1])

    def slower(self) -> None:
        self.calls.append("slower")
        self.speed = next((s for s in reversed(self.ladder) if s < self.speed), self.ladder[0])

    def set_speed(self, speed: float) -> None:
        self.calls.append(("set_speed", speed))
        self.speed = speed


class FakeSession:
    """A Session-like object: publishes the given observations, then runs until `finish()` (or forever)."""

    def __init__(
        self,
        observations: Iterable[O.Observation] = (),
        *,
        source: dict[str, Any] | None = None,
        finish_at_end: bool = False,
        raise_error: Exception | None = None,
    ) -> None:
        self.bus = O.ObservationBus()
        self.controller = FakeController()
        self.source = source or {"type": "scenario", "name": "fake"}
        self.observations = list(observations)
        self.finish_at_end = finish_at_end
        self.raise_error = raise_error
        self.done = asyncio.Event()
        self.started = False

    async def run(self) -> SimpleNamespace:  # (status, error: as much of a LoopResult as the app reads)
        self.started = True
        for obs in self.observations:
            self.bus.publish(obs)
            await asyncio.sleep(0)
        if self.raise_error is not None:
            raise self.raise_error
        if not self.finish_at_end:
            await self.done.wait()
        return SimpleNamespace(status="finished", error=None)

    def finish(self) -> None:
        self.done.set()


class Factory(Generic[S]):
    """A session factory that remembers every session it made (restart makes a new one); the app's keyword
    arguments are ignored."""

    def __init__(self, make: Callable[[], S]) -> None:
        self.make = make
        self.sessions: list[S] = []

    def __call__(self, **kw: Any) -> S:
        s = self.make()
        self.sessions.append(s)
        return s

    @property
    def last(self) -> S:
        return self.sessions[-1]


# (ASYNC109: `timeout` is the helper's give-up deadline, the one thing every caller tunes; an asyncio.timeout at
# each of the many call sites would only repeat it)
async def wait_for(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:  # noqa: ASYNC109
    """Poll a condition (yielding to the event loop) until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


async def flushed(app: _Ticking, n: int = 1, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (as wait_for)
    """Wait until the app's refresh timer has run `n` more times (a frame boundary)."""
    target = app.ticks + n
    await wait_for(lambda: app.ticks >= target, timeout, f"{n} refresh ticks")


def paced_session(name: str, **kw: Any) -> Session:
    """A scenario session at max speed whose clock is scenario time (the seconds its pacer was asked to sleep):
    deterministic, no waiting, and the timing analysis sees the scripted timing (TTFB, gaps, a proxy's silence)."""
    from inspector.sessions import sources

    box: list[Pacer] = []
    session = sources.scenario_session(name, speed=math.inf, clock=lambda: box[0].requested if box else 0.0, **kw)
    box.append(session.pacer)
    return session

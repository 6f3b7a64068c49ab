"""The session thread's selector (sessions/sources.py _PacedSelector): a busy loop polls its sockets at most every
POLL_EVERY seconds (each poll is a system call that hands the GIL over to the dashboard's thread), an idle loop still
blocks in the real poll, and a socket that becomes readable while the loop is busy is still seen."""

from __future__ import annotations

import asyncio
import selectors
import socket
import types

import pytest

from inspector.sessions import sources


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def test_polls_that_must_not_wait_are_skipped_within_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(sources, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    sel = sources._PacedSelector()
    real: list[float | None] = []

    def counted(self: object, timeout: float | None = None) -> list[object]:
        real.append(timeout)
        return []

    monkeypatch.setattr(selectors.DefaultSelector, "select", counted)
    try:
        for _ in range(100):  # a busy loop: 100 zero-timeout polls within one interval
            sel.select(0)
        assert real == [0]
        clock.now += sources.POLL_EVERY
        sel.select(0)
        assert real == [0, 0]
        sel.select(0.5)  # a poll that may wait (the loop is idle): always real
        sel.select(None)
        assert real == [0, 0, 0.5, None]
    finally:
        sel.close()


async def _busy_until_readable(loop: asyncio.AbstractEventLoop) -> int:
    a, b = socket.socketpair()
    seen = asyncio.Event()
    loop.add_reader(a.fileno(), seen.set)
    try:
        b.send(b"x")
        spins = 0
        async with asyncio.timeout(10):  # (a guard only: the loop sees it within a few ms of spinning)
            while not seen.is_set():
                await asyncio.sleep(0)  # busy: always a ready callback, so every poll is a zero-timeout one
                spins += 1
        return spins
    finally:
        loop.remove_reader(a.fileno())
        a.close()
        b.close()


def test_a_busy_session_loop_still_sees_its_sockets() -> None:
    with asyncio.Runner(loop_factory=sources.session_loop) as runner:
        assert runner.run(_busy_until_readable(runner.get_loop())) >= 0


def test_an_idle_session_loop_blocks_in_the_real_poll() -> None:
    async def idle() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(0.05)  # (what is measured: the loop waits in its poll, not spinning)
        return loop.time() - t0

    import time

    with asyncio.Runner(loop_factory=sources.session_loop) as runner:
        c0 = time.process_time()
        assert runner.run(idle()) >= 0.05
        assert time.process_time() - c0 < 0.04  # (spinning for 50 ms would use about that much CPU)

"""An idle deadline over a task's reads, with one timer per idle period instead of one per read.

``asyncio.timeout`` around each read of a stream makes a ``Timeout``, schedules a timer and cancels it, per read; the
cancelled timers stay in the event loop's heap until it is cleaned. A replay at max speed spent about a fifth of its
CPU there (tools/bench_tui.py, the no-UI replay: 3.5 s against 2.8 s without it, 100k events). ``ReadDeadline`` keeps
the deadline as a number the reader moves (``deadline``), and one timer: armed when a read starts and none is armed,
it fires at the time it was armed for; if the deadline moved on meanwhile (a read came), it is armed again for the
new one. If the task is still reading once the deadline has passed, the read is cancelled and raises
``TimeoutError``, as ``asyncio.timeout`` would; a cancel from elsewhere stays a ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class ReadDeadline:
    """The idle deadline of the current task's reads (``loop.time()`` seconds; ``math.inf``: none).

    Move ``deadline`` as reads come (a plain attribute: no timer work), await each read through :meth:`read`, and
    :meth:`close` once the reads are over. Made inside the task that reads."""

    __slots__ = ("deadline", "_loop", "_task", "_handle", "_reading", "_expired")

    def __init__(self, deadline: float = math.inf) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("ReadDeadline is used inside a task")
        self._task = task
        self.deadline = deadline
        self._handle: asyncio.TimerHandle | None = None
        self._reading = False
        self._expired = False

    async def read(self, aw: Awaitable[T]) -> T:
        """``await aw``, cancelled with ``TimeoutError`` if it is still waiting once ``deadline`` has passed (a
        deadline already passed: ``TimeoutError`` at once, ``aw`` not awaited)."""
        deadline = self.deadline
        if deadline != math.inf:
            if self._loop.time() >= deadline:
                if asyncio.iscoroutine(aw):
                    aw.close()  # (never awaited: no warning)
                raise TimeoutError
            handle = self._handle
            # none armed, or armed for later than a deadline moved back: armed for this one
            if handle is None or handle.when() > deadline:
                if handle is not None:
                    handle.cancel()
                self._handle = self._loop.call_at(deadline, self._fire)
        task = self._task
        cancelling = task.cancelling()
        self._reading = True
        try:
            value = await aw
        except asyncio.CancelledError:
            if self._expired:
                self._expired = False
                if task.uncancel() <= cancelling:  # ours alone: the read timed out
                    raise TimeoutError from None
            raise
        finally:
            self._reading = False
        if self._expired:  # (the read swallowed our cancel and returned: as asyncio.timeout, the value stands)
            self._expired = False
            task.uncancel()
        return value

    def _fire(self) -> None:
        self._handle = None
        if not self._reading:  # (between reads: the next read arms it again, for the deadline then)
            return
        if self._loop.time() < self.deadline:  # a read came since it was armed: on to the new deadline
            self._handle = self._loop.call_at(self.deadline, self._fire)
            return
        self._expired = True
        self._task.cancel()

    def close(self) -> None:
        """No timer left behind (the reads are over)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


__all__ = ["ReadDeadline"]

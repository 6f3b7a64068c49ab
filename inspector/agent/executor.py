"""Streaming tool executor: each tool starts the moment its tool_use block closes.

Reference semantics (the streaming executor that Claude Code describes publicly):

* `submit()` is called at content_block_stop, while the model may still stream later blocks; admission runs at once
  and the tool's task is created inside `submit()` (dispatch delay ~ one loop iteration).
* Admission scans the queue in FIFO order. A call may start if nothing is running, or if it is safe and everything
  running is safe; the scan stops at the first call that cannot start (nothing overtakes a waiting call, so a safe
  call queued behind a waiting unsafe one waits too). At most `max_concurrency` run at once.
* Safety is per call: `spec.is_safe(input)`, fail closed.
* Every call ends in exactly one terminal state with exactly one tool_result (is_error for anything but success),
  so the next request always pairs every tool_use with a tool_result. Results are returned in submission order.

Threads: sync tool functions run each in a dedicated *daemon* thread owned by this executor (named
``inspector-tool-<name>``), so a hung sync tool can neither starve later tools nor block interpreter exit.
A running thread cannot be killed: on cancel/timeout the call is marked terminal at once, its cancel event
(`inspector.agent.toolbox.spec.cancel_event()`) is set, and whatever the function returns later is ignored. A sync
function that does not check the event runs to completion in its thread; `aclose()` waits for such threads for a
bounded time and lists the ones still alive in `lingering_threads`.

The engine never imports textual: observers get plain `ToolCall` objects through `on_change`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import inspect
import logging
import re
import sys
import threading
import time
import traceback as _traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from inspector.agent.toolbox.spec import _CURRENT_CANCEL, ToolRefused, ToolSpec, ToolTimedOut
from inspector.core import exactjson
from inspector.observe.states import TOOL_RAN, TOOL_TERMINAL, ToolState

log = logging.getLogger(__name__)

__all__ = ["ToolState", "TERMINAL", "ToolCall", "ToolExecutor", "render_result", "THREAD_NAME_PREFIX"]

THREAD_NAME_PREFIX = "inspector-tool-"

# While a sync tool runs in a thread, the event loop gets the GIL back only when the interpreter's switch interval
# runs out (5 ms by default, and a CPU-bound tool takes it back at once): a 1 s pure-Python tool then left the loop
# ~100 wakeups a second and gaps near 30-45 ms on a loaded machine. A shorter interval while any sync tool runs
# (restored when the last one ends) halves that (tests/agent/test_tool_stall.py measures it). Process-wide, as the GIL is.
SYNC_TOOL_SWITCH_INTERVAL = 0.0005  # seconds


class _SwitchInterval:
    """Counts the running sync-tool threads (of every executor); the first lowers sys.setswitchinterval, the last
    restores the value it found (unless someone else changed it meanwhile)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved: float | None = None
        self._set: float | None = None

    def enter(self) -> None:
        with self._lock:
            self._running += 1
            if self._running == 1:
                current = sys.getswitchinterval()
                if current > SYNC_TOOL_SWITCH_INTERVAL:
                    self._saved = current
                    sys.setswitchinterval(SYNC_TOOL_SWITCH_INTERVAL)
                    self._set = sys.getswitchinterval()

    def exit(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._saved is not None:
                if sys.getswitchinterval() == self._set:  # nobody else changed it meanwhile
                    sys.setswitchinterval(self._saved)
                self._saved = self._set = None


_switch_interval = _SwitchInterval()


# the states this executor ends a call in (UNKNOWN is the proxy's: another harness's call whose result never came)
TERMINAL = TOOL_TERMINAL - {ToolState.UNKNOWN}
# a tool_result's content: text, or content blocks (dicts with a "type") passed through
ToolContent = str | list[dict[str, Any]]
FINISHED_AT = "finished_at"  # the key of ToolCall.times for the moment a call first became terminal


@dataclass(eq=False)
class ToolCall:
    id: str
    name: str
    index: int  # content block index of the tool_use block
    turn: int = 0
    attempt: int = 0
    input: dict[str, Any] | None = None  # the parsed input, as the model sent it
    input_error: str | None = None
    state: ToolState = ToolState.STREAMING_INPUT
    safe: bool = False
    # state value -> clock time when entered; plus "finished_at": when the call first became terminal (the end of its
    # run for one that ran). A call that finished and is then discarded keeps it: "discarded" is recorded apart.
    times: dict[str, float] = field(default_factory=dict)
    result: ToolContent | None = None  # content of the tool_result
    is_error: bool = False
    error: str | None = None  # human message for failed / timed_out / cancelled / not_run / discarded
    traceback: str | None = None  # formatted traceback of a tool exception (for the UI, never sent)
    truncated_chars: int = 0  # characters cut from the result by the size cap

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def streaming_input_at(self) -> float | None:
        return self.times.get(ToolState.STREAMING_INPUT.value)

    @property
    def queued_at(self) -> float | None:
        return self.times.get(ToolState.QUEUED.value)

    @property
    def started_at(self) -> float | None:
        return self.times.get(ToolState.RUNNING.value)

    @property
    def finished_at(self) -> float | None:
        """When the call first became terminal: for a call that ran, the end of its run (even if it was discarded
        later, with its failed attempt: see `discarded_at`)."""
        if self.state not in TERMINAL:
            return None
        t = self.times.get(FINISHED_AT)
        return t if t is not None else self.times.get(self.state.value)

    @property
    def discarded_at(self) -> float | None:
        return self.times.get(ToolState.DISCARDED.value)

    @property
    def ran_state(self) -> ToolState | None:
        """The state its run ended in (succeeded / failed / timed_out), also after a discard; None if it never
        finished a run."""
        for s in TOOL_RAN:
            if s.value in self.times:
                return s
        return None

    @property
    def duration(self) -> float | None:
        """Run time: started -> finished (None if it never ran or has not finished)."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def dispatch_delay(self) -> float | None:
        """Queued -> started."""
        if self.queued_at is None or self.started_at is None:
            return None
        return self.started_at - self.queued_at

    def tool_result_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.id,
            "content": self.result if self.result is not None else "",
        }
        if self.is_error:
            block["is_error"] = True
        return block


_SURROGATE = re.compile("[\ud800-\udfff]")


def _sendable(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD: no JSON encoder that writes UTF-8 (the SDK's,
    the transcript's) can send one, and a file name that is not UTF-8 comes from ``os`` with them (``\\udcff``).
    One of them in a tool result ended the whole run ('internal error: UnicodeEncodeError ... surrogates not
    allowed')."""
    return _SURROGATE.sub("\ufffd", text)


def _truncate(text: str, max_chars: int) -> tuple[str, int]:
    text = _sendable(text)
    if len(text) <= max_chars:
        return text, 0
    cut = len(text) - max_chars
    return f"{text[:max_chars]}\n[truncated {cut} chars]", cut


def render_result(value: Any, max_chars: int = 100_000) -> tuple[ToolContent, int]:
    """A tool's return value -> tool_result content, plus the number of characters cut by the cap.

    str as is; None -> ""; a non-empty list of dicts that all have "type" -> content blocks, passed through (text
    blocks share the cap); bytes -> UTF-8 text; anything else -> JSON text (orjson; unknown objects via str())."""
    if value is None:
        return "", 0
    if isinstance(value, str):
        return _truncate(value, max_chars)
    if isinstance(value, (bytes, bytearray)):
        return _truncate(bytes(value).decode("utf-8", errors="replace"), max_chars)
    if isinstance(value, list) and value and all(isinstance(b, dict) and "type" in b for b in value):
        budget = max_chars
        cut_total = 0
        blocks: list[dict[str, Any]] = []
        for b in value:
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                text, cut = _truncate(b["text"], max(budget, 0))
                budget -= len(b["text"]) - cut
                cut_total += cut
                b = {**b, "text": text}
            blocks.append(b)
        return blocks, cut_total
    try:
        text = exactjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = str(value)
    return _truncate(text, max_chars)


def _is_async_callable(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    return call is not None and inspect.iscoroutinefunction(call)


def _fmt_seconds(s: float) -> str:
    return f"{s:g}"


class ToolExecutor:
    """Runs the tool calls of one request attempt. A retried attempt gets a fresh executor."""

    def __init__(
        self,
        tools: dict[str, ToolSpec],
        *,
        max_concurrency: int = 10,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[ToolCall], None] | None = None,
        turn: int = 0,
        attempt: int = 0,
        max_result_chars: int = 100_000,
        cancel_grace: float = 5.0,
        thread_join_timeout: float = 5.0,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.tools = dict(tools)
        self.max_concurrency = max_concurrency
        self.max_result_chars = max_result_chars
        self.cancel_grace = cancel_grace  # how long cancel()/discard()/wait() wait for cancelled tasks to finish
        self.thread_join_timeout = thread_join_timeout  # how long aclose() waits for still-running sync tools
        self.turn = turn
        self.attempt = attempt
        self._clock = clock
        self._on_change = on_change
        self._calls: dict[str, ToolCall] = {}
        self._queue: list[ToolCall] = []
        self._running: dict[str, ToolCall] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancel_events: dict[str, threading.Event] = {}
        self._threads: dict[threading.Thread, asyncio.Future[None]] = {}  # each thread's "it has delivered"
        self._waiters: list[asyncio.Future[None]] = []
        self._paused = False
        # Once set, every later call (begin_input / submit) is finished at once with this state and reason.
        self._abort: tuple[ToolState, str] | None = None
        self.discarded = False
        self.closed = False
        self.lingering_threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------------------------ public API
    @property
    def paused(self) -> bool:
        return self._paused

    def calls(self) -> list[ToolCall]:
        return list(self._calls.values())

    def get(self, id: str) -> ToolCall | None:
        return self._calls.get(id)

    def results(self) -> list[dict[str, Any]]:
        """tool_result blocks of the terminal calls, in submission order. Empty after `discard()`: nothing of a
        failed attempt is sent."""
        if self.discarded:
            return []
        return [c.tool_result_block() for c in self._calls.values() if c.state in TERMINAL]

    def running(self) -> list[ToolCall]:
        return list(self._running.values())

    def queued(self) -> list[ToolCall]:
        return list(self._queue)

    def begin_input(self, id: str, name: str, index: int) -> ToolCall:
        """The tool_use block opened: its input is streaming."""
        call = self._calls.get(id)
        if call is not None:
            return call
        call = self._new_call(id, name, index)
        self._set_state(call, ToolState.STREAMING_INPUT)
        if self._abort is not None:
            self._finish(call, self._abort[0], self._abort[1])
        return call

    def submit(
        self, id: str, name: str, index: int, input: dict[str, Any] | None, input_error: str | None = None
    ) -> ToolCall:
        """The tool_use block closed (content_block_stop). Queues the call and runs admission at once (must be called
        from inside the running event loop when the tool can start). A call that cannot run gets its is_error result
        now: unknown tool, unparseable input, or the executor was cancelled/discarded/aborted by a sibling."""
        call = self._calls.get(id)
        if call is None:
            call = self._new_call(id, name, index)
        elif call.state is not ToolState.STREAMING_INPUT:
            if call.state not in TERMINAL:
                log.warning("tool call %s submitted twice; ignored", id)
            return call
        call.name = name
        call.index = index
        call.input = input
        call.input_error = input_error

        if self._abort is not None:
            self._finish(call, self._abort[0], self._abort[1])
            return call
        spec = self.tools.get(name)
        if spec is None:
            available = ", ".join(sorted(self.tools)) or "(none)"
            self._finish(call, ToolState.NOT_RUN, f"unknown tool '{name}'; available: {available}")
            return call
        if input_error is not None:
            self._finish(call, ToolState.NOT_RUN, f"invalid tool input JSON: {input_error}; the tool was not run")
            return call
        if input is None:
            input = call.input = {}  # an empty input buffer is the empty object
        if not isinstance(input, dict):
            self._finish(
                call,
                ToolState.NOT_RUN,
                f"invalid tool input: expected a JSON object, got {type(input).__name__}; the tool was not run",
            )
            return call
        call.safe = spec.is_safe(input)
        self._queue.append(call)
        self._set_state(call, ToolState.QUEUED)
        self._admit()
        return call

    def not_run(self, id: str, name: str, index: int, reason: str) -> ToolCall:
        """A call that must never run (e.g. its block was cut by max_tokens): is_error result with the reason."""
        call = self._calls.get(id)
        was_queued = False
        if call is None:
            call = self._new_call(id, name, index)
        elif call.state is ToolState.QUEUED:
            self._queue.remove(call)
            was_queued = True
        elif call.state is not ToolState.STREAMING_INPUT:
            return call  # running or already terminal: nothing to do
        self._finish(call, ToolState.NOT_RUN, reason)
        if was_queued:
            self._admit()  # it may have been the head of the queue
        return call

    def pause(self) -> None:
        """No queued call starts while paused; running ones continue."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._admit()

    async def wait(self) -> list[ToolCall]:
        """Until every submitted call is terminal (calls still streaming their input are not waited for).
        Returns the terminal calls in submission order."""
        loop = asyncio.get_running_loop()
        while any(c.state not in TERMINAL and c.state is not ToolState.STREAMING_INPUT for c in self._calls.values()):
            fut = loop.create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        await self._drain_tasks()
        return [c for c in self._calls.values() if c.state in TERMINAL]

    async def cancel(self, reason: str = "cancelled by user") -> None:
        """Interrupt: every non-terminal call (running, queued, streaming input) becomes CANCELLED with an is_error
        result; running tasks are cancelled and awaited (bounded by `cancel_grace`). Later calls are cancelled too."""
        self._abort_all(ToolState.CANCELLED, reason)
        await self._drain_tasks()

    async def discard(self, reason: str = "attempt failed; tool calls discarded") -> None:
        """The attempt failed: like cancel, with state DISCARDED; `results()` is empty afterwards."""
        self.discarded = True
        self._abort_all(ToolState.DISCARDED, reason)
        # calls that already finished ran for nothing: their results are never sent either
        for call in self._calls.values():
            if call.state in (ToolState.SUCCEEDED, ToolState.FAILED, ToolState.TIMED_OUT):
                ran = call.state.value
                call.is_error = True
                call.error = f"{reason} (the call had {ran}; its result is discarded)"
                self._set_state(call, ToolState.DISCARDED)
        await self._drain_tasks()

    async def aclose(self) -> None:
        """Cancel what is still pending, await the tasks, and wait (at most `thread_join_timeout`) for the worker
        threads of sync tools; those still alive afterwards are listed in `lingering_threads`."""
        if any(c.state not in TERMINAL for c in self._calls.values()):
            await self.cancel("executor closed")
        else:
            self._abort = self._abort or (ToolState.CANCELLED, "executor closed")
            await self._drain_tasks()
        self.closed = True
        pending = [f for t, f in self._threads.items() if t.is_alive() and not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.thread_join_timeout)
        for t in list(self._threads):
            t.join(timeout=0.5 if self._threads[t].done() else 0)  # done: it is returning, join is immediate
            if not t.is_alive():
                del self._threads[t]
        self.lingering_threads = list(self._threads)
        if self.lingering_threads:
            log.warning("sync tools still running after aclose: %s", [t.name for t in self.lingering_threads])

    async def __aenter__(self) -> ToolExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------------------------------ internals
    def _new_call(self, id: str, name: str, index: int) -> ToolCall:
        call = ToolCall(id=id, name=name, index=index, turn=self.turn, attempt=self.attempt)
        self._calls[id] = call
        return call

    def _emit(self, call: ToolCall) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change(call)
        except Exception:  # an observer must never break the executor
            log.exception("on_change observer failed")

    def _set_state(self, call: ToolCall, state: ToolState) -> None:
        call.state = state
        t = call.times[state.value] = self._clock()
        if state in TERMINAL and FINISHED_AT not in call.times:
            call.times[FINISHED_AT] = t  # (kept when a finished call is discarded later)
        self._emit(call)
        if state in TERMINAL:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for f in waiters:
            if not f.done():
                f.set_result(None)

    def _finish(
        self,
        call: ToolCall,
        state: ToolState,
        message: str | None = None,
        *,
        result: ToolContent | None = None,
        is_error: bool = True,
        traceback: str | None = None,
    ) -> bool:
        """Move a call to a terminal state once. `message` is both the error and (unless `result`) the content."""
        if call.state in TERMINAL:
            return False
        if message is not None:
            message = _sendable(message)  # (a refusal or an exception may quote a name that is not UTF-8)
        call.result = result if result is not None else (message or "")
        call.is_error = is_error
        call.error = message if is_error else None
        call.traceback = traceback
        self._set_state(call, state)
        return True

    def _admit(self) -> None:
        if self._paused or not self._queue:
            return
        while self._queue and len(self._running) < self.max_concurrency:
            call = self._queue[0]
            if self._running and not (call.safe and all(r.safe for r in self._running.values())):
                break  # nothing overtakes a call that cannot start
            self._queue.pop(0)
            self._start(call)

    def _start(self, call: ToolCall) -> None:
        loop = asyncio.get_running_loop()  # RuntimeError outside a running loop, before any state change
        spec = self.tools[call.name]
        ev = threading.Event()
        self._cancel_events[call.id] = ev
        self._running[call.id] = call
        self._set_state(call, ToolState.RUNNING)
        task = loop.create_task(self._run(call, spec, ev), name=f"tool:{call.name}:{call.id}")
        self._tasks[call.id] = task
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        for k, t in list(self._tasks.items()):
            if t is task:
                del self._tasks[k]
        if not task.cancelled() and task.exception() is not None:  # retrieve; _run only raises on BaseException
            log.error("tool task %s crashed", task.get_name(), exc_info=task.exception())

    async def _run(self, call: ToolCall, spec: ToolSpec, ev: threading.Event) -> None:
        _CURRENT_CANCEL.set(ev)  # the task has its own context copy
        cm = asyncio.timeout(spec.timeout) if spec.timeout is not None else contextlib.nullcontext()
        try:
            try:
                async with cm:
                    value = await self._invoke(call, spec, ev)
            except asyncio.CancelledError:
                ev.set()
                if call.state in TERMINAL:
                    return  # cancelled by the executor (cancel / discard / sibling abort): result already set
                # Cancelled from outside (typically the event loop shutting down): treat it as an interrupt of the
                # whole executor, so that no new task is started and every call still gets its result.
                self._finish(call, ToolState.CANCELLED, "cancelled: the tool task was cancelled")
                self._abort_all(ToolState.CANCELLED, "cancelled: a parallel tool task was cancelled")
                raise
            except TimeoutError as e:
                ev.set()
                if isinstance(cm, asyncio.Timeout) and cm.expired():
                    if self._finish(call, ToolState.TIMED_OUT, f"timed out after {_fmt_seconds(spec.timeout or 0)} s"):
                        self._after_error(call, spec)
                else:
                    self._fail(call, spec, e)
            except ToolTimedOut as e:  # (a replayed tool whose recorded run timed out)
                self._finish(call, ToolState.TIMED_OUT, str(e) or "timed out")
            except ToolRefused as e:
                self._finish(call, ToolState.FAILED, str(e) or type(e).__name__)
            except Exception as e:  # noqa: BLE001 (a tool may raise anything: it becomes the call's is_error result)
                self._fail(call, spec, e)
            except BaseException as e:  # KeyboardInterrupt / SystemExit from a tool: record, then propagate
                self._fail(call, spec, e)
                raise
            else:
                if call.state in TERMINAL:
                    return  # finished late: the result is ignored
                try:
                    content, cut = render_result(value, self.max_result_chars)
                except Exception as e:  # noqa: BLE001 (str() of a tool's value runs the tool's own code)
                    self._fail(call, spec, e)
                    return
                call.truncated_chars = cut
                self._finish(call, ToolState.SUCCEEDED, result=content, is_error=False)
        finally:
            self._running.pop(call.id, None)
            self._cancel_events.pop(call.id, None)
            if self._abort is None:
                self._admit()

    def _fail(self, call: ToolCall, spec: ToolSpec, e: BaseException) -> None:
        msg = str(e)
        text = f"ToolError: {type(e).__name__}: {msg}" if msg else f"ToolError: {type(e).__name__}"
        tb = "".join(_traceback.format_exception(e))
        if self._finish(call, ToolState.FAILED, text, traceback=tb):
            self._after_error(call, spec)

    def _after_error(self, call: ToolCall, spec: ToolSpec) -> None:
        if spec.cancel_siblings_on_error:
            self._abort_all(
                ToolState.CANCELLED, f"cancelled: a parallel tool call ({call.name}) errored", except_id=call.id
            )

    def _abort_all(self, state: ToolState, reason: str, *, except_id: str | None = None) -> None:
        self._abort = (state, reason)
        self._queue = [c for c in self._queue if c.id == except_id]
        for call in list(self._calls.values()):
            if call.id == except_id or call.state in TERMINAL:
                continue
            ev = self._cancel_events.get(call.id)
            if ev is not None:
                ev.set()
            self._finish(call, state, reason)
            task = self._tasks.get(call.id)
            if task is not None and not task.done():
                task.cancel()

    async def _drain_tasks(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in self._tasks.values() if not t.done() and t is not current]
        if tasks:
            done, still = await asyncio.wait(tasks, timeout=self.cancel_grace)
            for t in still:
                log.warning("tool task %s ignored cancellation for %.1f s", t.get_name(), self.cancel_grace)

    async def _invoke(self, call: ToolCall, spec: ToolSpec, ev: threading.Event) -> Any:
        fn = spec.fn
        tool_input = copy.deepcopy(call.input) or {}  # the call keeps the input as the model sent it
        if _is_async_callable(fn):
            value = await fn(tool_input)
        else:
            value = await self._run_in_thread(call, fn, tool_input)
        while inspect.isawaitable(value):
            value = await value
        return value

    def _run_in_thread(
        self, call: ToolCall, fn: Callable[[dict[str, Any]], Any], tool_input: dict[str, Any]
    ) -> asyncio.Future[Any]:
        """Run a sync function in a dedicated daemon thread; the future resolves on the loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()  # the tool's return value, or the exception it raised
        thread_done: asyncio.Future[None] = loop.create_future()
        ctx = contextvars.copy_context()  # carries the cancel event

        def deliver(ok: bool, value: Any) -> None:
            if not fut.done():
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
            if not thread_done.done():
                thread_done.set_result(None)

        def target() -> None:
            _switch_interval.enter()
            try:
                value, ok = ctx.run(fn, tool_input), True
            except Exception as e:  # noqa: BLE001 (a tool may raise anything: delivered to the loop as its result)
                value, ok = e, False
            except BaseException as e:  # noqa: BLE001 (SystemExit etc. must not be set on a future as is)
                err = RuntimeError(f"tool raised {type(e).__name__}: {e}")
                err.__cause__ = e
                value, ok = err, False
            finally:
                _switch_interval.exit()
            try:
                loop.call_soon_threadsafe(deliver, ok, value)
            except RuntimeError:  # loop closed: nobody is waiting any more
                pass

        thread = threading.Thread(target=target, name=f"{THREAD_NAME_PREFIX}{call.name}", daemon=True)
        self._threads[thread] = thread_done
        thread_done.add_done_callback(lambda _f: self._forget_thread(thread))
        thread.start()
        return fut

    def _forget_thread(self, thread: threading.Thread) -> None:
        # The thread has delivered and is returning; drop the finished ones, aclose() joins the rest.
        for t in [t for t in self._threads if not t.is_alive()]:
            del self._threads[t]

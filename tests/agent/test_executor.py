"""ToolExecutor: admission, lifecycle, results, cancellation. Synchronisation only through events and futures."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.agent.executor import TERMINAL, THREAD_NAME_PREFIX, ToolCall, ToolExecutor, ToolState, render_result
from inspector.agent.toolbox.spec import ToolFn, ToolRefused, ToolSpec, cancel_event
from inspector.testing.hyp import examples

GUARD = 5.0  # upper bound so that a broken executor fails the test instead of hanging it


def spec(name: str, fn: ToolFn, safe: bool | Callable[[dict[str, Any]], bool] = False, **kw: Any) -> ToolSpec:
    return ToolSpec(
        name=name, description=f"{name} tool", input_schema={"type": "object"}, fn=fn, concurrency_safe=safe, **kw
    )


class Gates:
    """Async tool functions controlled from the test: each call (input key "k") signals `started[k]` and waits for
    `release(k)`; `log` records ("start"|"end", k)."""

    def __init__(self) -> None:
        self.started: dict[str, asyncio.Event] = {}
        self._release: dict[str, asyncio.Event] = {}
        self.results: dict[str, object] = {}
        self.log: list[tuple[str, str]] = []
        self.active: set[str] = set()
        self.max_active = 0

    def _ev(self, d: dict[str, asyncio.Event], k: str) -> asyncio.Event:
        return d.setdefault(k, asyncio.Event())

    async def fn(self, inp: dict[str, Any]) -> object:
        k = inp["k"]
        self.log.append(("start", k))
        self.active.add(k)
        self.max_active = max(self.max_active, len(self.active))
        self._ev(self.started, k).set()
        try:
            await self._ev(self._release, k).wait()
        finally:
            self.active.discard(k)
        self.log.append(("end", k))
        r = self.results.get(k, f"done {k}")
        if isinstance(r, BaseException):
            raise r
        return r

    def release(self, k: str, result: object = None) -> None:
        if result is not None:
            self.results[k] = result
        self._ev(self._release, k).set()

    async def wait_started(self, k: str) -> None:
        await asyncio.wait_for(self._ev(self.started, k).wait(), GUARD)

    def starts(self) -> list[str]:
        return [k for what, k in self.log if what == "start"]


def gated_tools(g: Gates, **extra: Any) -> dict[str, ToolSpec]:
    tools = {
        "safe": spec("safe", g.fn, safe=True),
        "unsafe": spec("unsafe", g.fn, safe=False),
        "maybe": spec("maybe", g.fn, safe=lambda inp: inp.get("ro", False)),
    }
    tools.update(extra)
    return tools


_ids = iter(range(10**9))


def key_of(c: ToolCall) -> str:
    """The key a gated tool was submitted with (its input's "k")."""
    assert c.input is not None, c
    key: str = c.input["k"]
    return key


def submit(ex: ToolExecutor, name: str, k: str, **inp: Any) -> ToolCall:
    n = next(_ids)
    return ex.submit(f"toolu_{k}_{n}", name, n, {"k": k, **inp})


async def finish(ex: ToolExecutor) -> list[ToolCall]:
    return await asyncio.wait_for(ex.wait(), GUARD)


async def ended(ex: ToolExecutor, *calls: ToolCall) -> None:
    """Until the executor's tasks for these calls have ended, their done callbacks included (no polling; bounded by
    GUARD without cancelling them). A call that has no task left has ended already."""
    tasks = [ex._tasks[c.id] for c in calls if c.id in ex._tasks]
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=GUARD)
        assert not pending, f"still running after {GUARD} s: {pending}"


def our_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME_PREFIX)]


# ----------------------------------------------------------------------------------------------------- admission
async def test_safe_tools_overlap() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def a(inp: dict[str, Any]) -> str:
        a_started.set()
        await b_started.wait()  # only completes if B runs while A is running
        return "a"

    async def b(inp: dict[str, Any]) -> str:
        b_started.set()
        await a_started.wait()
        return "b"

    ex = ToolExecutor({"a": spec("a", a, safe=True), "b": spec("b", b, safe=True)})
    ex.submit("t1", "a", 0, {})
    ex.submit("t2", "b", 1, {})
    calls = await finish(ex)
    assert [c.state for c in calls] == [ToolState.SUCCEEDED, ToolState.SUCCEEDED]
    assert [c.result for c in calls] == ["a", "b"]


async def test_task_is_created_inside_submit() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    before = len(asyncio.all_tasks())
    c = submit(ex, "safe", "x")
    assert c.state is ToolState.RUNNING  # no loop iteration needed
    assert len(asyncio.all_tasks()) == before + 1
    g.release("x")
    await finish(ex)


async def test_unsafe_waits_for_running_safe_and_blocks_later_safe() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    s1 = submit(ex, "safe", "s1")
    u = submit(ex, "unsafe", "u")
    s2 = submit(ex, "safe", "s2")
    await g.wait_started("s1")
    assert (s1.state, u.state, s2.state) == (ToolState.RUNNING, ToolState.QUEUED, ToolState.QUEUED)

    g.release("s1")
    await g.wait_started("u")
    assert u.state is ToolState.RUNNING
    assert s2.state is ToolState.QUEUED  # a safe call queued behind the unsafe one does not overtake it
    assert not g.started.get("s2", asyncio.Event()).is_set()

    s3 = submit(ex, "safe", "s3")  # arriving while the unsafe one runs: waits too
    assert s3.state is ToolState.QUEUED

    g.release("u")
    await g.wait_started("s2")
    await g.wait_started("s3")
    assert [s2.state, s3.state] == [ToolState.RUNNING] * 2  # (a list: mypy keeps the states narrowed above)
    g.release("s2")
    g.release("s3")
    await finish(ex)
    assert g.starts() == ["s1", "u", "s2", "s3"]
    assert g.log.index(("end", "s1")) < g.log.index(("start", "u")) < g.log.index(("end", "u"))
    assert g.log.index(("end", "u")) < g.log.index(("start", "s2"))


async def test_safe_waits_for_running_unsafe() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    u = submit(ex, "unsafe", "u")
    s = submit(ex, "safe", "s")
    assert (u.state, s.state) == (ToolState.RUNNING, ToolState.QUEUED)
    g.release("u")
    await g.wait_started("s")
    g.release("s")
    await finish(ex)


async def test_unsafe_tools_run_one_at_a_time_in_fifo_order() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    for k in "abcd":
        submit(ex, "unsafe", k)
    for k in "abcd":
        await g.wait_started(k)
        assert len(ex.running()) == 1 and key_of(ex.running()[0]) == k
        g.release(k)
    await finish(ex)
    assert g.starts() == list("abcd")
    assert g.max_active == 1


async def test_safety_is_per_call() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    r1 = submit(ex, "maybe", "r1", ro=True)
    r2 = submit(ex, "maybe", "r2", ro=True)
    w = submit(ex, "maybe", "w", ro=False)
    assert (r1.safe, r2.safe, w.safe) == (True, True, False)
    assert [c.state for c in (r1, r2, w)] == [ToolState.RUNNING, ToolState.RUNNING, ToolState.QUEUED]
    g.release("r1")
    g.release("r2")
    await g.wait_started("w")
    g.release("w")
    await finish(ex)


async def test_is_safe_raising_fails_closed() -> None:
    def boom(inp: dict[str, Any]) -> bool:
        raise KeyError("x")

    g = Gates()
    ex = ToolExecutor({"t": spec("t", g.fn, safe=boom)})
    assert submit(ex, "t", "a").safe is False
    g.release("a")
    await finish(ex)


async def test_max_concurrency() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g), max_concurrency=2)
    calls = [submit(ex, "safe", k) for k in "abcde"]
    assert [c.state for c in calls] == [ToolState.RUNNING] * 2 + [ToolState.QUEUED] * 3
    for done, nxt in zip("abc", "cde", strict=True):
        g.release(done)
        await g.wait_started(nxt)
        assert len(ex.running()) == 2
    g.release("d")
    g.release("e")
    await finish(ex)
    assert g.max_active == 2
    assert g.starts() == list("abcde")


def test_max_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ToolExecutor({}, max_concurrency=0)


# ---------------------------------------------------------------------------------------------- pause / resume
async def test_pause_stops_admission_and_resume_restarts_it() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    running = submit(ex, "safe", "a")
    ex.pause()
    assert ex.paused
    queued = submit(ex, "safe", "b")
    assert queued.state is ToolState.QUEUED and len(ex._tasks) == 1  # nothing scheduled for b
    g.release("a")
    # Let a finish: its completion runs admission, which must not start b while paused.
    await ended(ex, running)
    assert running.state is ToolState.SUCCEEDED
    assert queued.state is ToolState.QUEUED and "b" not in g.started
    ex.resume()
    assert not ex.paused
    assert queued.state is ToolState.RUNNING  # synchronously
    g.release("b")
    await finish(ex)


async def test_pause_does_not_stop_running_tools() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    a = submit(ex, "safe", "a")
    await g.wait_started("a")
    ex.pause()
    g.release("a")
    await finish(ex)
    assert a.state is ToolState.SUCCEEDED


# --------------------------------------------------------------------------------------------------- results
async def test_results_in_submission_order_regardless_of_completion_order() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    by_key = {k: submit(ex, "safe", k) for k in "abc"}
    for k in "cba":
        g.release(k, result=f"result {k}")
        await ended(ex, by_key[k])
        assert g.log[-1] == ("end", k)
    calls = await finish(ex)
    assert [key_of(c) for c in calls] == list("abc")
    assert [b["content"] for b in ex.results()] == ["result a", "result b", "result c"]
    assert [b["tool_use_id"] for b in ex.results()] == [c.id for c in calls]
    assert all("is_error" not in b for b in ex.results())
    finished = [c.finished_at for c in calls]
    assert None not in finished
    assert finished == sorted([t for t in finished if t is not None], reverse=True)


async def test_results_only_for_terminal_calls() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    ex.begin_input("t0", "safe", 0)
    a = submit(ex, "safe", "a")
    assert ex.results() == []
    g.release("a")
    await finish(ex)  # the streaming_input call is not waited for
    assert [b["tool_use_id"] for b in ex.results()] == [a.id]
    assert [c.id for c in ex.calls()] == ["t0", a.id]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        (None, ""),
        ({"a": 1, "b": [1, 2]}, '{"a":1,"b":[1,2]}'),
        ([1, "x"], '[1,"x"]'),
        ([], "[]"),
        (42, "42"),
        ([{"type": "text", "text": "hi"}], [{"type": "text", "text": "hi"}]),
    ],
)
async def test_result_rendering(value: object, expected: str | list[dict[str, Any]]) -> None:
    async def fn(inp: dict[str, Any]) -> object:
        return value

    ex = ToolExecutor({"t": spec("t", fn)})
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert c.state is ToolState.SUCCEEDED and c.result == expected and not c.is_error
    assert c.tool_result_block() == {"type": "tool_result", "tool_use_id": "t1", "content": expected}


async def test_result_size_cap() -> None:
    async def fn(inp: dict[str, Any]) -> str:
        return "x" * 150

    ex = ToolExecutor({"t": spec("t", fn)}, max_result_chars=100)
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert c.result == "x" * 100 + "\n[truncated 50 chars]"
    assert c.truncated_chars == 50


def test_render_result_caps_text_blocks_jointly() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "a" * 60},
        {"type": "image", "source": {}},
        {"type": "text", "text": "b" * 60},
    ]
    out, cut = render_result(blocks, 100)
    assert isinstance(out, list)
    assert out[0]["text"] == "a" * 60 and out[1] == blocks[1]
    assert out[2]["text"] == "b" * 40 + "\n[truncated 20 chars]" and cut == 20
    assert blocks[2]["text"] == "b" * 60  # input not mutated
    rendered, _ = render_result({1: object}, 1000)
    assert isinstance(rendered, str) and orjson.loads(rendered) == {"1": str(object)}


# ------------------------------------------------------------------------------------------------ not run / errors
async def test_unknown_tool_is_not_run() -> None:
    ex = ToolExecutor({"read_file": spec("read_file", lambda i: 1), "b": spec("b", lambda i: 1)})
    c = ex.submit("t1", "nope", 0, {})
    assert c.state is ToolState.NOT_RUN and c.is_error
    assert c.result == "unknown tool 'nope'; available: b, read_file"
    assert c.tool_result_block()["is_error"] is True
    assert await finish(ex) == [c]


async def test_invalid_input_is_not_run() -> None:
    ran = []
    ex = ToolExecutor({"t": spec("t", lambda i: ran.append(i))})
    c = ex.submit("t1", "t", 0, None, input_error="Expecting ',' delimiter: line 1 column 9")
    assert c.state is ToolState.NOT_RUN and c.is_error
    assert c.result == "invalid tool input JSON: Expecting ',' delimiter: line 1 column 9; the tool was not run"
    c2 = ex.submit("t2", "t", 1, [1, 2])  # type: ignore[arg-type]
    assert c2.state is ToolState.NOT_RUN and c2.result is not None and "expected a JSON object" in c2.result
    await finish(ex)
    assert ran == []


async def test_empty_input_is_empty_object() -> None:
    seen = []

    async def fn(inp: dict[str, Any]) -> None:
        seen.append(inp)

    ex = ToolExecutor({"t": spec("t", fn)})
    c = ex.submit("t1", "t", 0, None)
    await finish(ex)
    assert seen == [{}] and c.state is ToolState.SUCCEEDED and c.result == ""


async def test_not_run_for_truncated_block() -> None:
    ex = ToolExecutor({"t": spec("t", lambda i: 1)})
    ex.begin_input("t1", "t", 2)
    c = ex.not_run("t1", "t", 2, "the tool_use block was cut by max_tokens; the tool was not run")
    assert c.state is ToolState.NOT_RUN and c.is_error and c.result is not None and "max_tokens" in c.result
    assert c.streaming_input_at is not None and c.started_at is None
    assert ex.submit("t1", "t", 2, {}) is c and c.state is ToolState.NOT_RUN  # late submit changes nothing


async def test_tool_exception_fails_with_message() -> None:
    async def fn(inp: dict[str, Any]) -> None:
        raise ValueError("bad value")

    ex = ToolExecutor({"t": spec("t", fn)})
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert c.state is ToolState.FAILED and c.is_error
    assert c.result == "ToolError: ValueError: bad value" == c.error
    assert c.traceback is not None and "Traceback" in c.traceback and "bad value" in c.traceback
    assert "Traceback" not in c.result


async def test_sync_tool_exception_and_refusal() -> None:
    def boom(inp: dict[str, Any]) -> None:
        raise RuntimeError("sync boom")

    def refuse(inp: dict[str, Any]) -> None:
        raise ToolRefused("nope, not that")

    ex = ToolExecutor({"boom": spec("boom", boom, safe=True), "refuse": spec("refuse", refuse, safe=True)})
    a = ex.submit("t1", "boom", 0, {})
    b = ex.submit("t2", "refuse", 1, {})
    await finish(ex)
    assert (a.state, a.result) == (ToolState.FAILED, "ToolError: RuntimeError: sync boom")
    assert a.traceback is not None and "sync boom" in a.traceback
    assert (b.state, b.result, b.is_error, b.traceback) == (ToolState.FAILED, "nope, not that", True, None)
    await ex.aclose()


async def test_sync_tool_runs_in_executor_thread_and_returns() -> None:
    names: list[str] = []

    def fn(inp: dict[str, Any]) -> dict[str, Any]:
        names.append(threading.current_thread().name)
        return {"ok": inp["n"]}

    ex = ToolExecutor({"t": spec("t", fn)})
    c = ex.submit("t1", "t", 0, {"n": 3})
    await finish(ex)
    assert c.result == '{"ok":3}'
    assert names == [f"{THREAD_NAME_PREFIX}t"]
    await ex.aclose()
    assert our_threads() == []


async def test_tool_cannot_mutate_recorded_input() -> None:
    async def fn(inp: dict[str, Any]) -> None:
        inp["k"].append(99)

    ex = ToolExecutor({"t": spec("t", fn)})
    c = ex.submit("t1", "t", 0, {"k": [1]})
    await finish(ex)
    assert c.input == {"k": [1]}


# -------------------------------------------------------------------------------------------------------- timeouts
async def test_async_timeout() -> None:
    forever = asyncio.Event()
    cancelled = []

    async def fn(inp: dict[str, Any]) -> None:
        try:
            await forever.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    ex = ToolExecutor({"t": spec("t", fn, timeout=0.05)})
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert c.state is ToolState.TIMED_OUT and c.is_error
    assert c.result == "timed out after 0.05 s"
    assert cancelled == [True]


async def test_tool_raising_timeout_error_is_a_failure_not_a_timeout() -> None:
    async def fn(inp: dict[str, Any]) -> None:
        raise TimeoutError("upstream")

    ex = ToolExecutor({"t": spec("t", fn, timeout=30)})
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert (c.state, c.result) == (ToolState.FAILED, "ToolError: TimeoutError: upstream")


async def test_sync_timeout_sets_cancel_event_and_thread_ends() -> None:
    def fn(inp: dict[str, Any]) -> str:
        if cancel_event().wait(GUARD):  # a cooperative sync tool
            return "stopped early"
        return "not cancelled"

    ex = ToolExecutor({"t": spec("t", fn, timeout=0.05)})
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert (c.state, c.result) == (ToolState.TIMED_OUT, "timed out after 0.05 s")
    await ex.aclose()
    assert ex.lingering_threads == [] and our_threads() == []
    assert c.result == "timed out after 0.05 s"  # the late return value was ignored


# -------------------------------------------------------------------------------------------------- sibling cancel
async def test_sibling_cancel_on_error() -> None:
    g = Gates()
    g.results["bash"] = RuntimeError("exit status 2")
    ex = ToolExecutor(gated_tools(g, bash=spec("bash", g.fn, safe=True, cancel_siblings_on_error=True)))
    sib = submit(ex, "safe", "sib")
    bash = submit(ex, "bash", "bash")
    queued = submit(ex, "unsafe", "queued")
    ex.begin_input("t_streaming", "safe", 9)
    await g.wait_started("sib")
    await g.wait_started("bash")
    g.release("bash")
    await finish(ex)
    msg = "cancelled: a parallel tool call (bash) errored"
    assert bash.state is ToolState.FAILED and bash.result == "ToolError: RuntimeError: exit status 2"
    streaming = ex.get("t_streaming")
    assert streaming is not None
    for c in (sib, queued, streaming):
        assert (c.state, c.result, c.is_error) == (ToolState.CANCELLED, msg, True)
    assert "queued" not in g.started
    assert ("end", "sib") not in g.log  # really cancelled, not left running
    late = ex.submit("t_streaming", "safe", 9, {"k": "late"})
    assert late.state is ToolState.CANCELLED and "late" not in g.started
    assert len(ex.results()) == 4 and all(b["is_error"] for b in ex.results())
    assert not ex._tasks


async def test_no_sibling_cancel_by_default() -> None:
    g = Gates()
    g.results["bad"] = RuntimeError("x")
    ex = ToolExecutor(gated_tools(g))
    bad = submit(ex, "safe", "bad")
    ok = submit(ex, "safe", "ok")
    g.release("bad")
    await ended(ex, bad)
    assert bad.terminal
    assert ok.state is ToolState.RUNNING
    g.release("ok")
    await finish(ex)
    assert [ok.state, bad.state] == [ToolState.SUCCEEDED, ToolState.FAILED]  # (a list: mypy keeps them narrowed)


# ---------------------------------------------------------------------------------------------- cancel / discard
async def test_cancel_leaves_no_task_and_gives_every_call_a_result() -> None:
    g = Gates()
    before = asyncio.all_tasks()
    ex = ToolExecutor(gated_tools(g))
    r1 = submit(ex, "safe", "r1")
    r2 = submit(ex, "safe", "r2")
    q = submit(ex, "unsafe", "q")
    s = ex.begin_input("t_s", "safe", 7)
    nr = ex.submit("t_nr", "nope", 8, {})
    await g.wait_started("r1")
    await g.wait_started("r2")
    assert len(asyncio.all_tasks()) == len(before) + 2
    await ex.cancel()
    assert asyncio.all_tasks() == before
    for c in (r1, r2, q, s):
        assert (c.state, c.result, c.is_error) == (ToolState.CANCELLED, "cancelled by user", True)
    assert nr.state is ToolState.NOT_RUN  # terminal calls keep their result
    assert [b["tool_use_id"] for b in ex.results()] == [c.id for c in (r1, r2, q, s, nr)]
    assert g.active == set() and ("end", "r1") not in g.log
    after = ex.submit("t_after", "safe", 9, {"k": "after"})
    assert after.state is ToolState.CANCELLED and "after" not in g.started
    await ex.aclose()
    assert asyncio.all_tasks() == before


async def test_cancel_sync_tools_leaves_no_thread() -> None:
    loop = asyncio.get_running_loop()
    started = [loop.create_future() for _ in range(3)]

    def cooperative(inp: dict[str, Any]) -> str:
        loop.call_soon_threadsafe(started[inp["i"]].set_result, None)
        ev = cancel_event()
        while not ev.wait(0.01):  # a loop that checks the cancel event
            pass
        return "finished anyway"

    before_threads = set(threading.enumerate())
    ex = ToolExecutor({"c": spec("c", cooperative, safe=True)})
    calls = [ex.submit(f"t{i}", "c", i, {"i": i}) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*started), GUARD)
    assert len(our_threads()) == 3
    await ex.cancel()
    assert all(c.state is ToolState.CANCELLED for c in calls)
    await ex.aclose()
    assert ex.lingering_threads == []
    assert set(threading.enumerate()) <= before_threads
    assert all(c.result == "cancelled by user" for c in calls)  # late returns ignored


async def test_uncooperative_sync_tool_is_reported_as_lingering() -> None:
    loop = asyncio.get_running_loop()
    started = loop.create_future()
    stuck = threading.Event()

    def uncooperative(inp: dict[str, Any]) -> str:
        loop.call_soon_threadsafe(started.set_result, None)
        stuck.wait(GUARD)  # ignores the cancel event
        return "late"

    ex = ToolExecutor({"u": spec("u", uncooperative)}, thread_join_timeout=0.01)
    c = ex.submit("t1", "u", 0, {})
    await asyncio.wait_for(started, GUARD)
    await ex.cancel()
    assert c.state is ToolState.CANCELLED  # marked at once although the thread still runs
    await ex.aclose()
    assert [t.name for t in ex.lingering_threads] == [f"{THREAD_NAME_PREFIX}u"]
    assert ex.lingering_threads[0].daemon  # cannot block interpreter exit
    stuck.set()
    ex.lingering_threads[0].join(GUARD)
    assert our_threads() == [] and c.result == "cancelled by user"


async def test_cancel_with_a_tool_that_ignores_cancellation_is_bounded() -> None:
    release, started = asyncio.Event(), asyncio.Event()

    async def stubborn(inp: dict[str, Any]) -> str:
        started.set()
        while True:
            try:
                await release.wait()
                return "x"
            except asyncio.CancelledError:
                continue  # swallows cancellation

    ex = ToolExecutor({"s": spec("s", stubborn)}, cancel_grace=0.01)
    c = ex.submit("t1", "s", 0, {})
    await asyncio.wait_for(started.wait(), GUARD)
    await asyncio.wait_for(ex.cancel(), GUARD)
    assert c.state is ToolState.CANCELLED
    release.set()
    await ended(ex, c)
    assert not ex._tasks
    assert c.result == "cancelled by user"


async def test_discard() -> None:
    g = Gates()
    before = asyncio.all_tasks()
    ex = ToolExecutor(gated_tools(g), attempt=1)
    done = submit(ex, "safe", "done")
    g.release("done")
    await ended(ex, done)
    assert done.terminal
    r = submit(ex, "unsafe", "r")
    q = submit(ex, "safe", "q")
    await g.wait_started("r")
    await ex.discard("stream failed: overloaded_error; retrying")
    # it ran, but its attempt failed: its result is never sent, and the state says so
    assert done.error is not None
    assert done.state is ToolState.DISCARDED and "had succeeded" in done.error and "running" in done.times
    assert (r.state, q.state) == (ToolState.DISCARDED, ToolState.DISCARDED)
    assert r.result == "stream failed: overloaded_error; retrying" and r.is_error
    assert ex.results() == []  # nothing of a failed attempt is sent
    assert r.attempt == 1
    assert asyncio.all_tasks() == before


async def test_aclose_as_context_manager_cancels_pending() -> None:
    g = Gates()
    async with ToolExecutor(gated_tools(g)) as ex:
        c = submit(ex, "safe", "a")
        await g.wait_started("a")
    assert (c.state, c.result) == (ToolState.CANCELLED, "executor closed")
    assert ex.closed


# ------------------------------------------------------------------------------------------- on_change and times
async def test_on_change_sequence_and_times_from_the_clock() -> None:
    now = [0.0]
    seen: list[tuple[str, ToolState, float]] = []
    g = Gates()
    ex = ToolExecutor(
        gated_tools(g), clock=lambda: now[0], on_change=lambda c: seen.append((c.id, c.state, now[0])), turn=3
    )
    now[0] = 1.0
    ex.begin_input("a", "unsafe", 0)
    now[0] = 2.0
    a = ex.submit("a", "unsafe", 0, {"k": "a"})
    now[0] = 2.5
    b = ex.submit("b", "safe", 1, {"k": "b"})
    now[0] = 4.0
    g.release("a")
    await g.wait_started("b")
    now[0] = 7.0
    g.release("b")
    await finish(ex)
    S = ToolState
    assert seen == [
        ("a", S.STREAMING_INPUT, 1.0),
        ("a", S.QUEUED, 2.0),
        ("a", S.RUNNING, 2.0),
        ("b", S.QUEUED, 2.5),
        ("a", S.SUCCEEDED, 4.0),
        ("b", S.RUNNING, 4.0),
        ("b", S.SUCCEEDED, 7.0),
    ]
    assert (a.streaming_input_at, a.queued_at, a.started_at, a.finished_at) == (1.0, 2.0, 2.0, 4.0)
    assert (a.duration, a.dispatch_delay) == (2.0, 0.0)
    assert (b.streaming_input_at, b.queued_at, b.started_at, b.finished_at) == (None, 2.5, 4.0, 7.0)
    assert b.dispatch_delay == 1.5 and a.turn == b.turn == 3
    assert a.times == {"streaming_input": 1.0, "queued": 2.0, "running": 2.0, "succeeded": 4.0, "finished_at": 4.0}


async def test_observer_errors_do_not_break_the_executor() -> None:
    def bad(call: ToolCall) -> None:
        raise RuntimeError("observer")

    async def fn(inp: dict[str, Any]) -> str:
        return "ok"

    ex = ToolExecutor({"t": spec("t", fn)}, on_change=bad)
    c = ex.submit("t1", "t", 0, {})
    await finish(ex)
    assert c.state is ToolState.SUCCEEDED


async def test_terminal_set() -> None:
    assert TERMINAL == {
        ToolState.SUCCEEDED,
        ToolState.FAILED,
        ToolState.TIMED_OUT,
        ToolState.CANCELLED,
        ToolState.DISCARDED,
        ToolState.NOT_RUN,
    }


# ------------------------------------------------------------------------------------ admission, as a property
@settings(max_examples=examples(150), deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=8),
    picks=st.lists(st.integers(0, 7), min_size=8, max_size=8),
    max_conc=st.integers(1, 4),
)
def test_admission_invariants(kinds: list[bool], picks: list[int], max_conc: int) -> None:
    """Random safe/unsafe calls, released in random order: never an unsafe call alongside another, never more than
    max_concurrency, starts in submission order, and a call starts as soon as the rule allows it."""

    async def scenario() -> None:
        g = Gates()
        ex = ToolExecutor(gated_tools(g), max_concurrency=max_conc)
        keys = [f"c{i}" for i in range(len(kinds))]
        calls = [submit(ex, "safe" if safe else "unsafe", k) for k, safe in zip(keys, kinds, strict=True)]

        def check() -> None:
            running = ex.running()
            assert len(running) <= max_conc
            if len(running) > 1:
                assert all(c.safe for c in running)
            # work-conserving: the head of the queue could not have started
            q = ex.queued()
            if q:
                head = q[0]
                assert running and (len(running) == max_conc or not (head.safe and all(c.safe for c in running)))

        check()
        while not all(c.terminal for c in calls):
            for c in ex.running():
                await g.wait_started(key_of(c))
            running = ex.running()
            victim = running[picks[len(g.log) % len(picks)] % len(running)]
            g.release(key_of(victim))
            await ended(ex, victim)
            assert victim.terminal
            check()
        await ex.wait()
        assert g.starts() == keys

    asyncio.run(scenario())


async def test_external_cancellation_of_a_tool_task_interrupts_the_executor() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    a = submit(ex, "unsafe", "a")
    b = submit(ex, "unsafe", "b")
    await g.wait_started("a")
    ex._tasks[a.id].cancel()  # e.g. the event loop shutting down
    calls = await finish(ex)
    assert (a.state, a.result) == (ToolState.CANCELLED, "cancelled: the tool task was cancelled")
    assert (b.state, b.result) == (ToolState.CANCELLED, "cancelled: a parallel tool task was cancelled")
    assert [c.id for c in calls] == [a.id, b.id] and "b" not in g.started and not ex._tasks


def test_loop_shutdown_with_queued_calls_leaves_no_pending_task(recwarn: pytest.WarningsRecorder) -> None:
    """asyncio.run cancels the running tool tasks at exit; that must not start the queued ones."""
    seen: list[tuple[str, ToolState]] = []

    async def main() -> ToolExecutor:
        g = Gates()
        ex = ToolExecutor(gated_tools(g), on_change=lambda c: seen.append((c.id, c.state)))
        submit(ex, "safe", "a")
        submit(ex, "unsafe", "b")
        await g.wait_started("a")
        return ex  # leaves "a" running and "b" queued

    ex = asyncio.run(main())
    assert [c.state for c in ex.calls()] == [ToolState.CANCELLED, ToolState.CANCELLED]
    assert not any(state is ToolState.RUNNING for cid, state in seen if "_b_" in cid)


async def test_not_run_on_a_queued_call_unblocks_the_queue() -> None:
    g = Gates()
    ex = ToolExecutor(gated_tools(g))
    a = submit(ex, "safe", "a")
    u = submit(ex, "unsafe", "u")
    s = submit(ex, "safe", "s")
    assert (a.state, u.state, s.state) == (ToolState.RUNNING, ToolState.QUEUED, ToolState.QUEUED)
    ex.not_run(u.id, "unsafe", u.index, "withdrawn")
    assert (u.state, u.result) == (ToolState.NOT_RUN, "withdrawn")
    assert s.state is ToolState.RUNNING  # the safe call behind it joins the running safe one
    g.release("a")
    g.release("s")
    await finish(ex)


async def test_discarded_call_keeps_its_own_run_time() -> None:
    """A call of a failed attempt that finished and is then discarded: its duration is its run, not the time until
    the discard (the display reads `finished_at` from times)."""
    now = [0.0]
    g = Gates()
    ex = ToolExecutor(gated_tools(g), clock=lambda: now[0], attempt=1)
    c = submit(ex, "safe", "done")
    await g.wait_started("done")
    now[0] = 2.0
    g.release("done")
    await ended(ex, c)
    assert c.terminal
    running = submit(ex, "safe", "still")
    await g.wait_started("still")
    now[0] = 30.0
    await ex.discard("stream failed; retrying")
    assert c.state is ToolState.DISCARDED and c.ran_state is ToolState.SUCCEEDED
    assert (c.started_at, c.finished_at, c.duration, c.discarded_at) == (0.0, 2.0, 2.0, 30.0)
    assert c.times == {"queued": 0.0, "running": 0.0, "succeeded": 2.0, "finished_at": 2.0, "discarded": 30.0}
    # discarded while running: its run ended at the discard
    assert running.ran_state is None
    assert (running.started_at, running.finished_at, running.duration) == (2.0, 30.0, 28.0)
    g.release("still")
    await ex.aclose()


async def test_a_result_whose_str_raises_fails_the_call_with_the_tools_error() -> None:
    """Fault path: a tool returns an object that neither orjson nor str() can render (its __str__ raises): the call
    fails with that error as its is_error result; the executor goes on."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    ex = ToolExecutor({"odd": spec("odd", lambda _i: Unprintable())})
    ex.submit("t1", "odd", 0, {})
    await ex.wait()
    (call,) = ex.calls()
    assert call.state is ToolState.FAILED and call.is_error
    assert call.error == "ToolError: RuntimeError: no text for you"
    await ex.aclose()

"""No tool can freeze the event loop, checked by behaviour (the wall-clock measure of the longest stall, and its 50 ms
target, is tools/bench_tool_stall.py's: a timing threshold on a shared machine is no test).

The two worst cases: a regex that backtracks exponentially in Python's `re` (search_text uses RE2, linear time) and a
CPU-bound sync user tool (runs in a worker thread, so the loop goes on running its other tasks meanwhile).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

from inspector.agent.executor import SYNC_TOOL_SWITCH_INTERVAL, ToolCall, ToolExecutor, ToolState
from inspector.agent.toolbox import ToolSpec, builtin_tools

GUARD = 60.0  # seconds: a hang guard (a tool that never ends fails the test instead of hanging it), never a timing
TICKS = 20  # turns of the loop a CPU-bound tool waits to see while it runs


async def run_call(tools: dict[str, ToolSpec], name: str, inp: dict[str, Any]) -> ToolCall:
    ex = ToolExecutor(tools)
    call = ex.submit("toolu_1", name, 0, inp)
    await asyncio.wait_for(ex.wait(), GUARD)
    await ex.aclose()
    return call


async def test_regex_dos_pattern_is_searched_in_linear_time(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    # (a+)+$ on "aaa...ab" backtracks 2^n steps in Python's re (36-59 s for 30 characters, holding the GIL): 50 such
    # lines would take far past GUARD; RE2 answers in linear time
    (root / "evil.txt").write_text(("a" * 30 + "b\n") * 50 + "aaaa\n")
    call = await run_call(builtin_tools(root), "search_text", {"pattern": "(a+)+$"})
    assert call.state is ToolState.SUCCEEDED, call.result
    assert call.result == "evil.txt:51: aaaa"


async def test_cpu_bound_sync_tool_leaves_the_loop_running() -> None:
    """A sync tool that never yields on its own (pure-Python work, holding the GIL but for the interpreter's switch
    interval) spins until it has seen the loop turn TICKS times while it runs. In a worker thread it sees them; run on
    the loop's own thread it could never see one, and gives up at GUARD saying so."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    def crunch(inp: dict[str, Any]) -> str:
        start, n = ticks, 0
        give_up = time.monotonic() + GUARD
        while ticks - start < TICKS:
            for i in range(1000):
                n += i * i % 7
            if time.monotonic() > give_up:
                return f"starved: the loop turned {ticks - start} times in {GUARD:g} s"
        return f"saw {TICKS} turns of the loop"

    tools = {"crunch": ToolSpec("crunch", "burn CPU", {"type": "object"}, fn=crunch, concurrency_safe=True)}
    t = asyncio.create_task(ticker())
    try:
        call = await run_call(tools, "crunch", {})
    finally:
        stop.set()
        await t
    assert (call.state, call.result) == (ToolState.SUCCEEDED, f"saw {TICKS} turns of the loop")


async def test_switch_interval_is_short_while_a_sync_tool_runs_and_restored_after() -> None:
    before = sys.getswitchinterval()
    inside: list[float] = []
    go = threading.Event()

    def probe(inp: dict[str, Any]) -> str:
        inside.append(sys.getswitchinterval())
        go.wait(10)
        return "ok"

    tools = {"probe": ToolSpec("probe", "probe", {"type": "object"}, fn=probe, concurrency_safe=True)}
    ex = ToolExecutor(tools)
    a = ex.submit("toolu_a", "probe", 0, {})
    b = ex.submit("toolu_b", "probe", 1, {})
    go.set()
    await asyncio.wait_for(ex.wait(), 10)
    await ex.aclose()
    assert (a.state, b.state) == (ToolState.SUCCEEDED, ToolState.SUCCEEDED)
    assert inside == [SYNC_TOOL_SWITCH_INTERVAL, SYNC_TOOL_SWITCH_INTERVAL]
    assert sys.getswitchinterval() == before

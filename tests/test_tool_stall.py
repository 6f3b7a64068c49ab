"""No tool can freeze the event loop: a ticker task records the longest gap between its wakeups while a tool runs.

The two worst cases: a regex that backtracks exponentially in Python's `re` (search_text uses RE2, linear time) and a
CPU-bound sync user tool (runs in a worker thread; the interpreter's switch interval hands the GIL back to the loop).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from inspector.agent.executor import ToolExecutor, ToolState
from inspector.agent.toolbox import ToolSpec, builtin_tools

MAX_STALL = 0.050  # seconds


async def longest_stall(run_tool) -> tuple[float, object]:
    """Run `run_tool()` (a coroutine function) while a ticker measures the loop's longest gap between wakeups."""
    worst = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the tool starts
    try:
        result = await run_tool()
    finally:
        done.set()
        await t
    return worst, result


async def run_call(tools: dict[str, ToolSpec], name: str, inp: dict):
    ex = ToolExecutor(tools)
    call = ex.submit("toolu_1", name, 0, inp)
    await asyncio.wait_for(ex.wait(), 60)
    await ex.aclose()
    return call


async def test_regex_dos_does_not_stall_the_loop(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    # (a+)+$ on "aaa...ab" backtracks 2^n steps in Python's re (36-59 s for 30 characters, holding the GIL)
    (root / "evil.txt").write_text(("a" * 30 + "b\n") * 50 + "aaaa\n")
    stall, call = await longest_stall(lambda: run_call(builtin_tools(root), "search_text", {"pattern": "(a+)+$"}))
    print(f"search_text (a+)+$: longest loop stall {stall * 1000:.1f} ms")
    assert call.state is ToolState.SUCCEEDED, call.result
    assert call.result == "evil.txt:51: aaaa"
    assert stall < MAX_STALL, f"loop stalled {stall * 1000:.1f} ms"


def _cpu_bound(inp: dict) -> str:
    """Pure-Python work for about `seconds` of CPU (a sync tool that never yields on its own)."""
    end = time.perf_counter() + inp.get("seconds", 1.0)
    n = 0
    while time.perf_counter() < end:
        for i in range(1000):
            n += i * i % 7
    return f"done {n > 0}"


async def test_cpu_bound_sync_tool_does_not_stall_the_loop():
    tools = {
        "crunch": ToolSpec("crunch", "burn CPU", {"type": "object"}, fn=_cpu_bound, concurrency_safe=True),
    }
    stall, call = await longest_stall(lambda: run_call(tools, "crunch", {"seconds": 1.0}))
    print(f"cpu-bound sync tool (1 s): longest loop stall {stall * 1000:.1f} ms")
    assert (call.state, call.result) == (ToolState.SUCCEEDED, "done True")
    assert stall < MAX_STALL, f"loop stalled {stall * 1000:.1f} ms"

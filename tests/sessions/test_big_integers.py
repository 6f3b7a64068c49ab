"""An integer beyond 64 bits in a tool input passes through every stage exact: the tool gets it, the next request
sends it back as the model wrote it, the recording keeps it, and dump, replay, the headless printer and the
dashboard's state show it. orjson alone would have turned it into a float (or refused to write it)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from inspector.agent.toolbox.spec import ToolSpec
from inspector.cli import main
from inspector.core import fmt
from inspector.observe import observations as O
from inspector.sessions.sources import api_session, replay_session
from inspector.state.travel import History
from inspector.testing.loop import run_observed
from inspector.testing.streamgen import sse, text_turn, tool_turn

BIG = 123456789012345678901234567890
NEG = -(2**70) + 3
INPUT_JSON = f'{{"a": {BIG}, "b": [{NEG}, 18446744073709551616]}}'
EXPECTED = {"a": BIG, "b": [NEG, 18446744073709551616]}


def _server(bodies: list[bytes]) -> Callable[[httpx2.Request], httpx2.Response]:
    turns = [sse(*tool_turn([INPUT_JSON[:9], INPUT_JSON[9:30], INPUT_JSON[30:]], name="calc")), sse(*text_turn("ok"))]

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(request.read())
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=turns[len(bodies) - 1])

    return handler


async def test_a_big_integer_in_a_tool_input_stays_exact_everywhere(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    got: list[dict[str, Any]] = []

    def calc(inp: dict[str, Any]) -> str:
        got.append(inp)
        return f"sum {inp['a'] + sum(inp['b'])}"

    bodies: list[bytes] = []
    record = tmp_path / "big.jsonl"
    session = api_session(
        "claude-test",
        "add",
        api_key="sk-test-0000000000000000000000",
        workspace=tmp_path,
        builtin=False,
        user_tools={"calc": ToolSpec("calc", "add", {"type": "object"}, fn=calc, concurrency_safe=True)},
        record=record,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_server(bodies))),
    )
    result, observed = await run_observed(session)
    assert result.status == "finished", result.error
    # the tool got the integers, not floats
    assert got == [EXPECTED] and all(type(x) is int for x in [got[0]["a"], *got[0]["b"]])
    # the second request sends them back as the model wrote them (and the history reads them back exact)
    assert str(BIG).encode() in bodies[1] and str(NEG).encode() in bodies[1]
    assert result.history[1]["content"][0]["input"] == EXPECTED
    # the observations and the dashboard's state (also spilled and read back)
    (call,) = [o for o in observed.items if isinstance(o, O.ToolUse)]
    assert call.input == EXPECTED
    h = History(block=4)
    for o in observed.items:
        h.append(o)
    assert h.state_at(h.event_count).n == len(observed.items)
    assert str(BIG) in fmt.short(EXPECTED, 200)
    # the recording, dump and the headless replay
    assert str(BIG).encode() in record.read_bytes()
    capsysbinary.readouterr()
    assert main(["dump", str(record), "--json"]) == 0
    out = capsysbinary.readouterr().out
    assert str(BIG).encode() in out and b"1.2345678901234568e+29" not in out
    replayed, robs = await run_observed(replay_session(record, speed=math.inf))
    assert replayed.status == "finished", replayed.error
    assert replayed.history[1]["content"][0]["input"] == EXPECTED
    assert await asyncio.to_thread(main, ["replay", str(record), "--headless", "--json"]) == 0  # its own loop
    out = capsysbinary.readouterr().out
    assert str(BIG).encode() in out
    for line in out.splitlines():
        orjson.loads(line)  # every line is JSON

"""The proxy watches OpenAI-format streams live (issue 20 §3): a streamed Chat Completions or Responses call is a turn
of its conversation, decoded by the same engine into the same observations (blocks, tool calls), recorded, and
dumped in the provider's shape. `serve` (its OpenAI endpoints) is the upstream; the official openai SDK the client."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.record.dump import dump_turns
from inspector.record.recording import read_recording

TOOLS: list[Any] = [  # (the SDKs' tool params are TypedDicts: a plain list is passed as JSON)
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, echo_model=False)) as srv:
        yield srv


async def test_a_chat_stream_through_the_proxy_is_a_turn_with_its_tool_call(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    bus = O.ObservationBus()
    seen: list[O.Observation] = []
    bus.subscribe(seen.append)
    record = tmp_path / "chat.jsonl"
    with BackgroundServer(ProxyApp(upstream.base_url, record=record, bus=bus)) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key="sk-test-openai-proxy-0123456789")
        stream = await client.chat.completions.create(
            model="claude-sonnet-4-6",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=TOOLS,
            stream=True,
            extra_headers={"x-inspector-scenario": "weather"},
        )
        chunks = [c async for c in stream]
        await client.close()
    assert chunks
    assert [type(o).__name__ for o in seen if isinstance(o, O.AttemptStarted)] == ["AttemptStarted"]
    uses = [o for o in seen if isinstance(o, O.ToolUse)]
    assert [(u.name, u.input) for u in uses] == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]
    # one event row per SSE event (a chunk can give several steps)
    rows = [o for o in seen if isinstance(o, O.SSEEventSeen)]
    assert len(rows) == len({(o.sse.start, o.sse.end) for o in rows})
    turns = dump_turns(read_recording(record))
    assert len(turns) == 1 and turns[0]["family"] == "openai_chat" and turns[0]["outcome"] == "tool_use"
    assert turns[0]["message"]["object"] == "chat.completion"
    assert b"sk-test-openai-proxy" not in record.read_bytes()


async def test_a_responses_stream_through_the_proxy_is_a_turn(upstream: BackgroundServer, tmp_path: Path) -> None:
    bus = O.ObservationBus()
    seen: list[O.Observation] = []
    bus.subscribe(seen.append)
    record = tmp_path / "responses.jsonl"
    with BackgroundServer(ProxyApp(upstream.base_url, record=record, bus=bus)) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key="sk-test-openai-proxy-0123456789")
        rtools: list[Any] = [
            {"type": "function", "name": "get_weather", "parameters": TOOLS[0]["function"]["parameters"]}
        ]
        stream = await client.responses.create(
            model="claude-sonnet-4-6",
            input="Weather in Paris?",
            tools=rtools,
            stream=True,
            extra_headers={"x-inspector-scenario": "weather"},
        )
        events = [e async for e in stream]
        await client.close()
    assert events[-1].type == "response.completed"
    assert [u.name for u in seen if isinstance(u, O.ToolUse)] == ["get_weather"]
    ended = [o for o in seen if isinstance(o, O.AttemptEnded)]
    assert [(e.status, e.outcome) for e in ended] == [("complete", "tool_use")]
    turns = dump_turns(read_recording(record))
    assert turns[0]["family"] == "openai_responses" and turns[0]["message"]["object"] == "response"

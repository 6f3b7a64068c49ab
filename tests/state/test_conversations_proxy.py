"""The conversation list of a real proxied session: three concurrent weather agents through `inspector proxy` (real
sockets on loopback, `inspector serve` upstream), their observations folded as the dashboard folds them."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any, cast

import anthropic
import httpx2
import pytest
from anthropic.types import MessageParam

from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.state.conversations import FINISHED
from inspector.state.convfilter import ConversationFilter
from inspector.state.fold import DashboardState

KEY = "sk-ant-api03-CANARY-convui-0123456789abcdefghijkl"
CITIES = ("Paris", "Rome", "Oslo")


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, echo_model=False)) as srv:
        yield srv


def _params(messages: list[dict[str, Any]]) -> list[MessageParam]:
    """The SDK's view of the dicts built here (a tool_use block is sent as the model dumped it)."""
    return cast("list[MessageParam]", messages)


async def _agent(client: anthropic.AsyncAnthropic, city: str, barrier: asyncio.Barrier) -> list[dict[str, Any]]:
    hdr = {"x-inspector-scenario": "weather"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"What is the weather in {city}?"}]
    await barrier.wait()
    async with client.messages.stream(model="m", max_tokens=100, messages=_params(messages), extra_headers=hdr) as s:
        first = await s.get_final_message()
    uses = [b for b in first.content if b.type == "tool_use"]
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": b.id, "content": f"{city}: 18 C"} for b in uses],
        },
    ]
    await barrier.wait()
    async with client.messages.stream(model="m", max_tokens=100, messages=_params(messages), extra_headers=hdr) as s:
        await s.get_final_message()
    return messages


async def test_three_concurrent_agents_are_three_entries_and_three_views(upstream: BackgroundServer) -> None:
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    with BackgroundServer(ProxyApp(upstream.base_url, bus=bus)) as px:
        client = anthropic.AsyncAnthropic(
            base_url=px.base_url, api_key=KEY, max_retries=0, http_client=httpx2.AsyncClient(timeout=60.0)
        )
        try:
            barrier = asyncio.Barrier(len(CITIES))
            done = await asyncio.gather(*(_agent(client, c, barrier) for c in CITIES))
            rome = [*done[1], {"role": "assistant", "content": "18 C"}, {"role": "user", "content": "And Milan?"}]
            await client.post(
                "/v1/messages/count_tokens", body={"model": "m", "messages": rome}, cast_to=httpx2.Response
            )
            await client.get("/v1/models", cast_to=httpx2.Response)  # no conversation: "other requests"
        finally:
            await client.close()
    state = DashboardState().apply_all(got)
    table = state.conversations
    assert len(table) == 3 and table.other_requests == 1
    assigned = {o.turn: o.conversation for o in got if isinstance(o, O.ConversationAssigned)}
    first_city = {
        assigned[o.turn]: o.body["messages"][0]["content"]
        for o in got
        if isinstance(o, O.AttemptStarted) and o.attempt == 0 and len(o.body["messages"]) == 1
    }
    for c in table:
        assert len(c.turns) == 2 and c.state == FINISHED and c.attempts == 2
        assert c.tokens_out > 0 and c.tokens_in > 0
        assert c.side_requests == (1 if "Rome" in first_city[c.id] else 0)
        view = ConversationFilter(c.id).apply_all(got).state
        assert set(view.turns.keys()) == set(c.turns)
        ev = view.events
        assert {ev.turn[i] for i in range(len(ev))} == set(c.turns)
        assert view.tool_order and {view.tools[t].turn for t in view.tool_order} <= set(c.turns)
    # the three conversations' tokens add up to the session's
    assert sum(c.tokens_in for c in table) == state.tokens()[0]
    assert sum(c.tokens_out for c in table) == state.tokens()[1]

"""Through the real agent loop: a relay that echoes the API key split across reads and deltas (and escaped) never
shows it on the dashboard: not in the state the panes are drawn from, not in any detail view."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import orjson

from inspector.core.redaction import REDACTED, secret_spans
from inspector.observe import observations as O
from inspector.sessions.sources import api_session
from inspector.state.fold import DashboardState
from inspector.state.travel import History
from inspector.testing.secrets import dashboard_texts
from inspector.testing.streamgen import (
    block_stop,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
    text_turn,
    tool_start,
)
from inspector.tui.detail import block_detail, diagnostic_detail, event_detail, tool_detail

# an ASGI app's arguments, as these tests' upstream uses them
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

KEY = "sk-ant-api03-LIVE-CANARY-0123456789"


def echoing_turn() -> bytes:
    """The key echoed one character per text delta, then inside a tool input, \\u-escaped, three characters per
    input_json_delta."""
    escaped = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(KEY))
    raw = '{"path": "' + escaped + '.txt"}'
    return sse(
        message_start(),
        text_start(0),
        *(text_delta(0, c) for c in f"your key is {KEY}, keep it safe"),
        block_stop(0),
        tool_start(1, "toolu_1", "lookup"),
        *(json_delta(1, raw[i : i + 3]) for i in range(0, len(raw), 3)),
        block_stop(1),
        message_delta("tool_use"),
        message_stop(),
    )


async def run_loop(bodies: list[bytes], read_size: int) -> list[O.Observation]:
    class Chunks(httpx2.AsyncByteStream):
        def __init__(self, body: bytes) -> None:
            self.body = body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for i in range(0, len(self.body), read_size):
                yield self.body[i : i + read_size]

    answers = iter(bodies)

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Chunks(next(answers)))

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    session = api_session("claude-test", "hi", api_key=KEY, http_client=client, builtin=False)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    async with asyncio.timeout(60):
        await session.run()
    session.close()
    return seen


def shown(state: DashboardState, history: History) -> list[str]:
    """Every text the dashboard shows: its panes' sources and every detail view."""
    out = dashboard_texts(state)
    for k in range(1, history.event_count + 1):
        out.append(event_detail(state, history, k).body.plain)
    for key in state.blocks:
        out.append(block_detail(state, key).body.plain)
    for tool_key in state.tools:
        out.append(tool_detail(state, tool_key, 10.0).body.plain)
    for i in range(len(state.diagnostics)):
        out.append(diagnostic_detail(state, history, i).body.plain)
    return out


async def test_a_relay_echoing_the_key_split_across_deltas_never_reaches_the_dashboard() -> None:
    for read_size in (7, 64):  # (the key also split across reads)
        seen = await run_loop([echoing_turn(), sse(*text_turn("done"))], read_size)
        assert seen and isinstance(seen[-1], O.LoopFinished) and seen[-1].status == "finished"
        history = History(seen)
        state = DashboardState().apply_all(seen)
        for text in shown(state, history):
            assert not secret_spans(text, [KEY]), text
        for obs in seen:
            assert not secret_spans(orjson.dumps(obs.to_json(), default=str).decode(), [KEY]), obs
        text_block, tool_block = state.blocks[(0, 0, 0)], state.blocks[(0, 0, 1)]
        assert text_block.joined() == f"your key is {REDACTED}, keep it safe"
        assert orjson.loads(tool_block.joined()) == {"path": f"{REDACTED}.txt"}  # the input still parses
        tool = state.tool("toolu_1")
        assert tool is not None and tool.input == {"path": f"{REDACTED}.txt"}


async def test_the_proxy_dashboard_never_shows_a_key_the_upstream_echoes_split_across_reads_and_deltas(
    tmp_path: Path,
) -> None:
    """The proxy's dashboard (``inspector proxy`` on a terminal): the key the harness sends in ``x-api-key`` is
    learned from the request; upstream echoes it split across 7-byte reads and one character per delta, and
    ``\\u``-escaped in a tool input. The proxy's observations are published through the same redacting publisher;
    so is the tool call's `unknown` end when the session ends before a next request (it carries the call's input),
    and the recording keeps no key either."""
    from inspector.net.proxy import ProxyApp
    from inspector.net.server import BackgroundServer

    body = echoing_turn()

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(0, len(body), 7):
            await send({"type": "http.response.body", "body": body[i : i + 7], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    bus = O.ObservationBus()
    seen: list[O.Observation] = []
    bus.subscribe(seen.append)
    record = tmp_path / "proxy.jsonl"
    proxy = ProxyApp("http://127.0.0.1:9", bus=bus, record=str(record))
    with BackgroundServer(upstream) as up, BackgroundServer(proxy) as px:
        proxy.upstream = up.base_url
        request = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        async with httpx2.AsyncClient(timeout=30) as client:
            r = await client.post(
                f"{px.base_url}/v1/messages", content=orjson.dumps(request), headers={"x-api-key": KEY}
            )
    assert r.content == body  # the client gets upstream's bytes, key included: it is theirs
    proxy.close()  # the session ends with the tool call still waiting for its result: it ends unknown
    assert any(isinstance(o, O.AttemptEnded) for o in seen)
    assert [o.state for o in seen if isinstance(o, O.ToolStateChanged)][-1] == "unknown"
    kept = record.read_text()
    assert not secret_spans(kept, [KEY]) and '"state":"unknown"' in kept.replace(" ", "")
    history = History(seen)
    state = DashboardState().apply_all(seen)
    for text in shown(state, history):
        assert not secret_spans(text, [KEY]), text
    for obs in seen:
        assert not secret_spans(orjson.dumps(obs.to_json(), default=str).decode(), [KEY]), obs
    assert state.blocks[(0, 0, 0)].joined() == f"your key is {REDACTED}, keep it safe"
    assert orjson.loads(state.blocks[(0, 0, 1)].joined()) == {"path": f"{REDACTED}.txt"}
    (tool,) = [t for t in state.tools.values() if t.id == "toolu_1"]  # (keyed by its conversation too)
    assert tool.state == "unknown" and tool.input == {"path": f"{REDACTED}.txt"}

"""The proxy's dashboard behind a relay: whatever header carries the key (helicone-auth, cf-aig-authorization,
x-portkey-api-key, Authorization with a tab or Basic, a percent-encoded ?api_key=), the proxy learns it from the
request and upstream's echo of it (split across reads and one character per delta) shows nowhere: not in the state
the panes are drawn from, not in a detail view, not in an observation."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import orjson
import pytest

from inspector.core.redaction import REDACTED
from inspector.observe import observations as O
from inspector.state.fold import DashboardState
from inspector.state.travel import History
from inspector.testing.secrets import assert_no_key, dashboard_texts
from inspector.testing.streamgen import (
    block_stop,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
)
from inspector.tui.detail import block_detail, event_detail

# an ASGI app's arguments, as these tests' upstream uses them
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

KEY = "sk-ant-api03-Dash-Relay-Mz4Xc7Vb1Nq8Wp2Lk6"
FORMS = {
    "helicone": ({"helicone-auth": f"Bearer {KEY}"}, ""),
    "cloudflare": ({"cf-aig-authorization": f"Bearer {KEY}"}, ""),
    "portkey": ({"x-portkey-api-key": KEY}, ""),
    "bearer-tab": ({"authorization": f"Bearer\t{KEY}"}, ""),
    "basic": ({"authorization": "Basic " + base64.b64encode(f"user:{KEY}".encode()).decode()}, ""),
    "query": ({}, "?api_key=" + KEY.replace("-", "%2D")),
}


def echo(text: str) -> bytes:
    return sse(
        message_start(),
        text_start(0),
        *(text_delta(0, c) for c in f"you sent {text}!"),
        block_stop(0),
        message_delta("end_turn"),
        message_stop(),
    )


@pytest.mark.parametrize("form", sorted(FORMS))
async def test_the_proxy_dashboard_masks_a_relay_credential_echoed_by_upstream(form: str) -> None:
    from inspector.net.proxy import ProxyApp
    from inspector.net.server import BackgroundServer

    headers, query = FORMS[form]
    body = echo(KEY)

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
    proxy = ProxyApp("http://127.0.0.1:9", bus=bus)
    with BackgroundServer(upstream) as up, BackgroundServer(proxy) as px:
        proxy.upstream = up.base_url
        request = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        async with httpx2.AsyncClient(timeout=30) as client:
            r = await client.post(f"{px.base_url}/v1/messages{query}", content=orjson.dumps(request), headers=headers)
    assert r.content == body
    state = DashboardState().apply_all(seen)
    history = History(seen)
    texts = dashboard_texts(state)
    texts += [event_detail(state, history, k).body.plain for k in range(1, history.event_count + 1)]
    texts += [block_detail(state, key).body.plain for key in state.blocks]
    texts += [orjson.dumps(o.to_json(), default=str).decode() for o in seen]
    assert_no_key(KEY, {f"text {i}": t for i, t in enumerate(texts)})
    assert state.blocks[(0, 0, 0)].joined() == f"you sent {REDACTED}!"

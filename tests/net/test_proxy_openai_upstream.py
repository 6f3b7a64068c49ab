"""Two upstreams behind one proxy (`watch`, `proxy --openai-upstream`): the command's ANTHROPIC_BASE_URL and
OPENAI_BASE_URL both point at the proxy, and each request goes on to the API it was meant for. A request under
``/v1/`` goes to the OpenAI upstream (its ``/v1`` is in that base) unless it is the Messages API's: ``/v1/messages``,
``/v1/complete``, or any request with an ``anthropic-version`` header (the Anthropic SDKs always send one)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx2
import openai
import orjson
import pytest

from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer

ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test-key-0123456789", "anthropic-version": "2023-06-01"}


class Echo:
    """An upstream that answers every request with what it was asked: its name, the method and the target."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        target = scope["raw_path"].decode() + ("?" + scope["query_string"].decode() if scope["query_string"] else "")
        self.asked.append(target)
        body = orjson.dumps({"upstream": self.name, "target": target})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize(
    ("path", "headers", "where", "target"),
    [
        ("/v1/messages", {}, "anthropic", "/v1/messages"),
        ("/v1/messages/count_tokens", {}, "anthropic", "/v1/messages/count_tokens"),
        ("/v1/complete", {}, "anthropic", "/v1/complete"),
        ("/v1/models", {"anthropic-version": "2023-06-01"}, "anthropic", "/v1/models"),
        ("/v1/chat/completions", {}, "openai", "/api/v1/chat/completions"),
        ("/v1/responses?x=1", {"authorization": "Bearer sk-proj-x"}, "openai", "/api/v1/responses?x=1"),
        ("/v1/models", {}, "openai", "/api/v1/models"),
        ("/health", {}, "anthropic", "/health"),
    ],
)
async def test_each_request_goes_to_the_api_it_was_meant_for(
    path: str, headers: dict[str, str], where: str, target: str
) -> None:
    anthropic_up, openai_up = Echo("anthropic"), Echo("openai")
    with BackgroundServer(anthropic_up) as a, BackgroundServer(openai_up) as o:
        proxy = ProxyApp(a.base_url, openai_upstream=o.base_url + "/api/v1/")
        with BackgroundServer(proxy) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=10) as h:
                r = await h.post(path, content=b"{}", headers=headers)
        proxy.close()
    assert r.json() == {"upstream": where, "target": target}
    assert (anthropic_up.asked if where == "anthropic" else openai_up.asked) == [target]


async def test_without_an_openai_upstream_every_request_goes_to_upstream() -> None:
    up = Echo("only")
    with BackgroundServer(up) as a:
        proxy = ProxyApp(a.base_url)
        with BackgroundServer(proxy) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=10) as h:
                got = [(await h.post(p, content=b"{}")).json()["target"] for p in ("/v1/chat/completions", "/v1/x")]
        proxy.close()
    assert got == ["/v1/chat/completions", "/v1/x"]


async def test_the_openai_sdk_streams_through_the_proxy_from_its_own_upstream_and_is_recorded(tmp_path: Path) -> None:
    """The openai SDK, pointed at the proxy's /v1, streams a tool call from the OpenAI upstream while the Anthropic
    upstream is unreachable; the recording names the OpenAI upstream's URL and the turn is decoded as chat."""
    rec = tmp_path / "run.jsonl"
    with BackgroundServer(ServeApp("weather", speed=math.inf)) as serve:
        serve_url = serve.base_url
        proxy = ProxyApp("http://127.0.0.1:9", openai_upstream=serve_url + "/v1", record=rec)
        with BackgroundServer(proxy) as px:
            client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key="sk-proj-test-0123456789", max_retries=0)
            stream = await client.chat.completions.create(
                model="gpt-4.1",
                messages=[{"role": "user", "content": "weather in Paris?"}],
                tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                stream=True,
            )
            names = [
                c.function.name
                async for ch in stream
                if ch.choices
                for c in (ch.choices[0].delta.tool_calls or [])
                if c.function is not None
            ]
            await client.close()
        proxy.close()
    assert "get_weather" in names
    lines = [orjson.loads(x) for x in rec.read_bytes().splitlines()]
    (request,) = [x for x in lines if x["kind"] == "request"]
    assert request["url"] == serve_url + "/v1/chat/completions"
    (end,) = [x for x in lines if x["kind"] == "end"]
    assert end["status"] == "complete"
    assert "sk-proj-test-0123456789" not in rec.read_text()


async def test_a_target_crafted_on_the_openai_route_stays_on_the_openai_upstreams_host() -> None:
    """The OpenAI route drops the target's /v1 and appends the rest: a target that would name another host glued to
    a base URL (``@evil``, ``//evil``) still goes to the OpenAI upstream's host, as a path; one that is not an
    absolute path is refused before any routing."""
    anthropic_up, openai_up = Echo("anthropic"), Echo("openai")
    with BackgroundServer(anthropic_up) as a, BackgroundServer(openai_up) as o:
        proxy = ProxyApp(a.base_url, openai_upstream=o.base_url + "/api/v1")
        with BackgroundServer(proxy) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=10) as h:
                got = [(await h.post(p, content=b"{}")).json() for p in ("/v1/@evil.invalid/x", "/v1//evil.invalid/x")]
        proxy.close()
    assert got == [
        {"upstream": "openai", "target": "/api/v1/@evil.invalid/x"},
        {"upstream": "openai", "target": "/api/v1//evil.invalid/x"},
    ]
    assert anthropic_up.asked == []


async def test_keys_in_the_openai_upstreams_url_and_the_bearer_key_never_reach_the_recording(tmp_path: Path) -> None:
    """Every credential form on the OpenAI route: a password and a ``?api_key=`` in the OpenAI upstream's URL, and
    the client's bearer key; none is in the recording, the proxy's source, or the error a client gets when that
    upstream is unreachable."""
    rec = tmp_path / "keys.jsonl"
    password, query_key, bearer = "sk-pass-0123456789abcdef", "sk-query-0123456789abcdef", "sk-proj-bearer-0123456789"
    openai_url = f"http://user:{password}@127.0.0.1:9/v1?api_key={query_key}"
    up = Echo("anthropic")
    with BackgroundServer(up) as a:
        proxy = ProxyApp(a.base_url, openai_upstream=openai_url, record=rec)
        with BackgroundServer(proxy) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=10) as h:
                body = orjson.dumps(
                    {"model": "gpt-4.1", "stream": True, "messages": [{"role": "user", "content": "x"}]}
                )
                r = await h.post("/v1/chat/completions", content=body, headers={"authorization": f"Bearer {bearer}"})
        source = orjson.dumps(proxy.source()).decode()
        proxy.close()
    assert r.status_code == 502 and "upstream unreachable" in r.text
    text = rec.read_text()
    assert '"kind":"request"' in text
    for key in (password, query_key, bearer):
        assert key not in text and key not in r.text and key not in source


async def test_the_proxys_own_errors_are_in_the_shape_of_the_clients_api() -> None:
    """An upstream that cannot be reached, a body over --max-body: the proxy's own answer to an OpenAI client was
    Anthropic's error JSON, so the openai SDK's ``e.code`` was None. Now a Chat Completions or Responses call (or
    any request on the OpenAI route) gets OpenAI's shape, a Messages call Anthropic's, each naming what happened."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    proxy = ProxyApp(dead, max_body=2048)
    with BackgroundServer(proxy) as px:
        client = openai.AsyncOpenAI(api_key="sk-proj-test", base_url=px.base_url + "/v1", max_retries=0)
        with pytest.raises(openai.APIStatusError) as unreachable:
            await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.APIStatusError) as too_big:
            await client.responses.create(model="gpt-4o", input="x" * 4096)
        await client.close()
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=10) as h:
            anthropic_shaped = await h.post("/v1/messages", content=b"{}", headers=ANTHROPIC_HEADERS)
    proxy.close()
    assert unreachable.value.status_code == 502 and unreachable.value.code == "api_error"
    assert unreachable.value.type == "server_error" and "inspector proxy" in unreachable.value.message
    assert too_big.value.status_code == 413 and too_big.value.code == "request_too_large"
    assert too_big.value.type == "invalid_request_error"
    assert anthropic_shaped.status_code == 502
    assert anthropic_shaped.json()["type"] == "error" and anthropic_shaped.json()["error"]["type"] == "api_error"

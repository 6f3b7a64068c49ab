"""The fake OpenAI endpoint (inspector/testing/openai_fake.py): what it keeps of each request, and a Stream part
given to the wrong transport (an asyncio.Event to the loopback server, a threading.Event to the in-process client)
is a TypeError that names the mistake, not a bytes error from deep inside httpx or http.server."""

from __future__ import annotations

import asyncio
import threading

import httpx2
import pytest

from inspector.testing.openai_fake import KEY, FakeOpenAI, Status, Stream, chat_text


async def test_in_process_requests_are_kept_parsed_with_their_headers() -> None:
    fake = FakeOpenAI([Stream([chat_text("hi")])])
    async with fake.client() as http:
        r = await http.post(
            "http://fake/v1/chat/completions", json={"model": "m", "stream": True}, headers={"X-Trace": "t1"}
        )
        assert r.status_code == 200 and b'"content":"hi"' in r.content
        r = await http.post("http://fake/v1/chat/completions", content=b"not json")
        assert r.status_code == 400 and r.json()["error"]["message"] == "no more scripted replies"
    first, second = fake.requests
    assert (first["method"], first["path"]) == ("POST", "/v1/chat/completions")
    assert first["body"] == {"model": "m", "stream": True}
    assert first["headers"]["x-trace"] == "t1"
    assert second["body"] is None


async def test_an_asyncio_event_part_waits_in_process() -> None:
    go = asyncio.Event()
    fake = FakeOpenAI([Stream([b"data: 1\n\n", go, b"data: 2\n\n"])])
    async with fake.client() as http, http.stream("POST", "http://fake/v1/chat/completions") as r:
        parts = r.aiter_raw()
        assert await anext(parts) == b"data: 1\n\n"
        go.set()
        assert await anext(parts) == b"data: 2\n\n"


async def test_a_threading_event_part_in_process_is_named() -> None:
    fake = FakeOpenAI([Stream([b"data: 1\n\n", threading.Event()])])
    async with fake.client() as http, http.stream("POST", "http://fake/v1/chat/completions") as r:
        with pytest.raises(
            TypeError, match=r"a threading\.Event waits only in serve\(\); give client\(\) an asyncio\.Event"
        ):
            async for _ in r.aiter_raw():
                pass


def test_an_asyncio_event_part_over_loopback_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeOpenAI([Stream([b"data: 1\n\n", asyncio.Event(), b"data: 2\n\n"]), Status(200, {"ok": True})])
    base, server = fake.serve()
    try:
        with httpx2.Client(timeout=10) as http:
            r = http.post(base + "/chat/completions", json={}, headers={"authorization": f"Bearer {KEY}"})
            assert r.content == b"data: 1\n\n"  # the stream ends where the wrong part is
            assert http.post(base + "/chat/completions", json={}).json() == {"ok": True}  # the server goes on
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert "TypeError: a Stream part: an asyncio.Event waits only in client(); give serve() a threading.Event" in err

"""A recording holds the request as it was sent: the body and headers the SDK made (``"stream": true``, the
``x-stainless-*`` headers, ``content-type``, the retry count of each try), credentials removed, taken at the
transport; ``serve --recording`` answers that request, POSTed as recorded, with the recorded bytes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from inspector.agent.transcript import sdk_json
from inspector.agent.tries import ObservedTransport
from inspector.net.recorded import RecordingSource
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.record.recording import RecordedAttempt, read_recording
from inspector.scenarios.model import HttpError, Scenario, TextBlock, TurnScript
from inspector.sessions.sources import Session, scenario_session
from inspector.testing.loop import custom_scenario, run_observed
from inspector.testing.serve import KEY, RawClient


class Capture(httpx2.AsyncBaseTransport):
    """Wraps the in-process server's transport: keeps every request's bytes and headers as they reach it."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.sent: list[tuple[dict[str, str], bytes]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = b"".join([chunk async for chunk in request.stream])  # type: ignore[union-attr]
        self.sent.append((dict(request.headers), body))
        forwarded = httpx2.Request(request.method, request.url, headers=request.headers, content=body)
        return await self.inner.handle_async_request(forwarded)


def request_of(a: RecordedAttempt) -> dict[str, Any]:
    """The attempt's recorded request line (every attempt of these recordings has one)."""
    assert a.request is not None, a
    return a.request


def captured(session: Session) -> Capture:
    observed = session.loop.client._client._transport  # the loop's ObservedTransport
    assert isinstance(observed, ObservedTransport)
    cap = Capture(observed.inner)
    observed.inner = cap
    return cap


async def test_the_recorded_request_is_the_request_as_sent(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    session = scenario_session("weather", speed=math.inf, record=path)
    cap = captured(session)
    result, obs = await run_observed(session)
    assert result.status == "finished"
    rec = read_recording(path.read_bytes())
    requests = [request_of(a) for t in rec.turns for a in t.attempts]
    assert len(requests) == len(cap.sent) >= 2
    for req, (headers, raw) in zip(requests, cap.sent, strict=True):
        body = req["body"]
        assert body["stream"] is True
        assert sdk_json(body) == raw  # parsed back to exactly the bytes sent
        sent = {k.lower(): v for k, v in headers.items() if k.lower() not in ("x-api-key", "authorization")}
        assert req["headers"] == sent  # every header the SDK sent, credentials removed
        assert req["headers"]["content-type"] == "application/json"
        assert req["headers"]["x-stainless-retry-count"] == "0"
        assert "x-api-key" not in req["headers"] and "x-stainless-lang" in req["headers"]
    started = obs.of(O.AttemptStarted)
    assert all(s.body["stream"] is True and "x-stainless-retry-count" in s.headers for s in started)


async def test_each_try_the_sdk_retried_is_recorded_with_its_own_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = Scenario(
        name="retried",
        description="a 429, then the stream",
        prompt="hi",
        turns=[TurnScript([TextBlock("hello there")], http_errors=[HttpError(429, attempt=0, retry_after_ms=1)])],
    )
    path = tmp_path / "run.jsonl"
    session = scenario_session(custom_scenario(monkeypatch, sc), speed=math.inf, record=path)
    cap = captured(session)
    result, _ = await run_observed(session)
    assert result.status == "finished"
    attempts = read_recording(path.read_bytes()).turns[0].attempts
    assert [(a.response or {}).get("status") for a in attempts] == [429, 200]
    assert [request_of(a)["headers"]["x-stainless-retry-count"] for a in attempts] == ["0", "1"]
    assert [request_of(a)["headers"]["x-stainless-retry-count"] for a in attempts] == [
        h["x-stainless-retry-count"] for h, _ in cap.sent
    ]
    assert all(sdk_json(request_of(a)["body"]) == raw for a, (_, raw) in zip(attempts, cap.sent, strict=True))


async def test_a_recorded_request_posted_to_serve_recording_gives_back_the_recorded_bytes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    result, _ = await run_observed(scenario_session("weather", speed=math.inf, record=path))
    assert result.status == "finished"
    rec = read_recording(path.read_bytes())
    with BackgroundServer(ServeApp(recording=RecordingSource.load(path), speed=math.inf)) as srv:
        c = RawClient(srv.address)
        try:
            for turn in rec.turns:
                attempt = turn.attempts[0]
                req = request_of(attempt)
                headers = {k: v for k, v in req["headers"].items() if k not in ("host", "content-length")}
                status, got_headers, body = c.request(
                    "/v1/messages", sdk_json(req["body"]), {**headers, "x-api-key": KEY}
                )
                assert status == 200 and got_headers["content-type"].startswith("text/event-stream")
                assert body == b"".join(r.data for r in attempt.reads)
            _, _, raw = c.request("/inspector/requests", method="GET")
        finally:
            c.close()
    listed = [x for x in orjson.loads(raw)["data"] if x["path"] == "/v1/messages"]
    assert [x["differs"] for x in listed] == [None] * len(rec.turns)  # the very request that was recorded
    assert orjson.loads(sdk_json(request_of(rec.turns[0].attempts[0])["body"]))["stream"] is True

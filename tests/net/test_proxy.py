"""`inspector proxy` in front of `inspector serve` (both on loopback sockets): byte-identical streams, the added
first-byte latency, the recording equals what passed, credentials pass through but are never recorded or logged,
tool execution inferred from the next request."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import itertools
import math
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import anthropic
import httpx2
import orjson
import pytest

from inspector.cli.proxy import parse_listen
from inspector.core.redaction import credential_values
from inspector.net.faults import render_faulted
from inspector.net.proxy import (
    InferredExecution,
    ProxyApp,
    SeenToolUse,
    ToolExecutionInferred,
    format_exchange,
    infer_tool_executions,
)
from inspector.net.serve import Exchange, ServeApp
from inspector.net.server import BackgroundServer
from inspector.net.toolinfer import continued_tool_uses, request_history, request_results
from inspector.observe import observations as O
from inspector.record.reader import RecordedAttempt
from inspector.record.recording import read_recording
from inspector.scenarios.bundled import SCENARIOS, get_scenario
from inspector.scenarios.fakeapi import message_seed
from inspector.stream.assembler import assemble

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

KEY = "sk-ant-api03-CANARY-proxy-0123456789abcdefghij"
KEY2 = "sk-ant-api03-CANARY-second-key-9876543210zyx"
TRANSPORT_ERRORS = (httpx2.HTTPError, anthropic.APIConnectionError)
_TLS = ssl.create_default_context()
USER: list[Any] = [{"role": "user", "content": "hello"}]
SEED = message_seed({"messages": USER})  # what serve seeds this conversation's message ids with


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, echo_model=False)) as srv:
        yield srv


def sdk(base_url: str, key: str = KEY, **kw: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=base_url,
        api_key=key,
        max_retries=kw.pop("max_retries", 0),
        http_client=httpx2.AsyncClient(verify=_TLS, timeout=httpx2.Timeout(60.0)),
        **kw,
    )


class Call(TypedDict):
    """What :func:`raw_call` got: the body's bytes, the status (None: no response), the exception it ended with."""

    body: bytes
    status: int | None
    error: BaseException | None


async def raw_call(
    client: anthropic.AsyncAnthropic,
    messages: list[Any],
    headers: dict[str, str],
    hang_len: int | None = None,
) -> Call:
    out: Call = {"body": b"", "status": None, "error": None}
    try:
        async with client.messages.with_streaming_response.create(
            model="claude-test", max_tokens=100, messages=messages, stream=True, extra_headers=headers
        ) as r:
            out["status"] = r.http_response.status_code
            it = r.iter_bytes().__aiter__()
            while hang_len is None or len(out["body"]) < hang_len:
                try:
                    out["body"] += await it.__anext__()
                except StopAsyncIteration:
                    break
    except anthropic.APIStatusError as e:
        out["status"], out["body"], out["error"] = e.status_code, e.response.content, e
    except TRANSPORT_ERRORS as e:
        out["error"] = e
    return out


def history_for(name: str, upto: int) -> list[dict[str, Any]]:
    """The messages a harness sends for turn ``upto`` (assistant turns assembled from the first clean attempt)."""
    sc = get_scenario(name)
    messages: list[dict[str, Any]] = [{"role": "user", "content": sc.prompt}]
    seed = message_seed({"messages": messages})
    for t in range(upto):
        plan = next(
            p
            for p in (render_faulted(sc, None, t, a, seed=seed) for a in range(4))
            if p.status == 200 and p.end == "eof" and not any(e[0] == "error" for e in p.events)
        )
        msg = assemble(plan.body).final_message()
        messages.append({"role": "assistant", "content": msg["content"]})
        results = [
            {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
            for b in msg["content"]
            if b["type"] == "tool_use"
        ]
        messages.append({"role": "user", "content": results or "go on"})
    return messages


def _requested_at(a: RecordedAttempt) -> float:
    assert a.request is not None  # every recorded attempt starts with its request
    t: float = a.request["t"]
    return t


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ----------------------------------------------------------------------------------------------- identical bytes


CASES: list[tuple[str, int, str | None]] = [
    (name, t, None) for name in sorted(SCENARIOS) for t in range(len(SCENARIOS[name].turns))
] + [
    ("parse_date", 0, f)
    for f in (
        "drop_byte:333",
        "drop_event",
        "stall:3",
        "bom",
        "relay_buffer",
        "http_529",
        "error_event",
        "split_events,cr",
        "invalid_tool_json",
    )
]


async def test_proxy_streams_are_byte_identical(upstream: BackgroundServer, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    proxy = ProxyApp(upstream.base_url, record=record)
    passed: list[tuple[int, bytes]] = []  # (status, bytes) the client got through the proxy, in order
    ends_expected: list[str] = []
    with BackgroundServer(proxy) as px:
        direct, via = sdk(upstream.base_url), sdk(px.base_url)
        try:
            for i, (name, turn, fault) in enumerate(CASES):
                messages = history_for(name, turn)
                plan = render_faulted(get_scenario(name), fault, turn, 0, seed=message_seed({"messages": messages}))
                hang = len(plan.body) if plan.end == "hang" else None
                base = {"x-inspector-scenario": name, "x-inspector-fault": fault or "none"}
                a = await raw_call(direct, messages, {**base, "x-inspector-session": f"direct-{i}"}, hang)
                b = await raw_call(via, messages, {**base, "x-inspector-session": f"proxy-{i}"}, hang)
                if plan.status != 200:  # an error body carries the request id unique to its response: the rest is equal

                    def no_id(body: bytes) -> dict[str, Any]:
                        return {k: v for k, v in orjson.loads(body).items() if k != "request_id"}

                    assert no_id(a["body"]) == no_id(b["body"]) == no_id(plan.body), (name, turn, fault)
                else:
                    assert sha(a["body"]) == sha(b["body"]) == sha(plan.body), (name, turn, fault)
                assert a["status"] == b["status"] == plan.status
                if plan.end == "drop":  # the client behind the proxy sees the same broken connection
                    assert isinstance(a["error"], TRANSPORT_ERRORS) and isinstance(b["error"], TRANSPORT_ERRORS)
                passed.append((b["status"], b["body"]))
                end = {"drop": "failed", "hang": "cancelled"}.get(plan.end, "complete")
                if end == "complete" and plan.status == 200 and b"event: message_stop" not in plan.body:
                    end = "failed"  # an error event, or an end before message_stop: failed, as the loop says
                ends_expected.append("http_error" if end == "complete" and plan.status >= 400 else end)
        finally:
            await direct.close()
            await via.close()
    rec = read_recording(record)
    # in the order the requests came (a request that repeats a failed one's body is its retry: same turn)
    attempts = sorted(rec.attempts(), key=_requested_at)
    assert len(attempts) == len(CASES)
    for att, (status, body) in zip(attempts, passed, strict=True):  # the recording equals what passed
        assert att.data == body
        assert att.response is not None and att.response["status"] == status
    # drops and streams without their end are "failed", a stall the client gave up on is "cancelled"
    assert [(a.end or {}).get("status") for a in attempts] == ends_expected
    assert {"failed", "cancelled", "complete", "http_error"} <= set(ends_expected)
    assert KEY.encode() not in record.read_bytes()


async def test_recording_matches_requests_and_never_holds_credentials(
    upstream: BackgroundServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "rec.jsonl"
    lines: list[str] = []
    proxy = ProxyApp(upstream.base_url, record=record, on_exchange=lambda ex: lines.append(format_exchange(ex)))
    with BackgroundServer(proxy, log_level="debug", access_log=True) as px:
        # the key also travels in a body (a harness that pastes it into a prompt) and with a second credential
        leaky = [{"role": "user", "content": f"my key is {KEY}, keep it secret"}]
        c1 = sdk(px.base_url)
        c2 = anthropic.AsyncAnthropic(
            base_url=px.base_url, auth_token=KEY2, max_retries=0, http_client=httpx2.AsyncClient(verify=_TLS)
        )
        try:
            r1 = await raw_call(c1, leaky, {"x-inspector-scenario": "weather", "x-inspector-session": "leak1"})
            r2 = await raw_call(
                c2,
                [{"role": "user", "content": f"and {KEY2} too"}],
                {"x-inspector-scenario": "weather", "x-inspector-session": "leak2"},
            )
        finally:
            await c1.close()
            await c2.close()
    assert r1["status"] == r2["status"] == 200
    raw = record.read_bytes()
    for secret in (KEY, KEY2):
        assert secret.encode() not in raw
        assert secret not in "\n".join(lines) + capsys.readouterr().err + caplog.text
    rec = read_recording(record)
    a1, a2 = list(rec.attempts())
    for att in (a1, a2):
        assert att.request is not None
        assert not {"x-api-key", "authorization"} & {h.lower() for h in att.request["headers"]}
        assert att.request["method"] == "POST" and att.request["url"].endswith("/v1/messages")
        assert att.request["body"]["model"] == "claude-test"
    assert a1.request is not None and a2.request is not None
    assert a1.request["body"]["messages"][0]["content"] == "my key is [redacted], keep it secret"
    assert a2.request["body"]["messages"][0]["content"] == "and [redacted] too"  # learned after the file opened
    assert (a1.turn, a1.attempt, a2.turn, a2.attempt) == (0, 0, 1, 0)
    assert a1.data == r1["body"] and a2.data == r2["body"]
    assert a1.response is not None and a1.end is not None
    assert 0 <= a1.response["t"] <= a1.reads[0].t <= a1.end["t"]


def _echo_app() -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        payload = orjson.dumps(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "body": body.decode(),
                "headers": [[k.decode(), v.decode()] for k, v in scope["headers"]],
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"x-upstream", b"yes"),
                    (b"set-cookie", b"session=abcdefgh12345"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


async def test_requests_are_forwarded_untouched_with_credentials() -> None:
    with BackgroundServer(_echo_app()) as echo, BackgroundServer(ProxyApp(echo.base_url)) as px:
        kw: dict[str, Any] = dict(
            params={"beta": "true", "x": "1 2"},
            content=b'{"a": 1}',
            headers={
                "x-api-key": KEY,
                "authorization": f"Bearer {KEY2}",
                "anthropic-version": "2023-06-01",
                "x-custom": "v",
                "content-type": "application/json",
            },
        )
        async with httpx2.AsyncClient() as h:
            direct = await h.request("PUT", f"{echo.base_url}/v1/some/path", **kw)
        async with httpx2.AsyncClient() as h:
            via = await h.request("PUT", f"{px.base_url}/v1/some/path", **kw)
        async with httpx2.AsyncClient() as h:  # a second client: the proxy must not replay the upstream's cookie
            via2 = await h.request("PUT", f"{px.base_url}/v1/some/path", **kw)
    assert via.status_code == direct.status_code == 201
    assert via.headers["x-upstream"] == "yes" and via.headers["set-cookie"] == "session=abcdefgh12345"
    d, v = direct.json(), via.json()
    assert (v["method"], v["path"], v["query"], v["body"]) == (d["method"], d["path"], d["query"], d["body"])
    # every end-to-end header arrives, same values, same order; host / connection / content-length belong to the
    # hop (the HTTP layer sets them again), and they have the same values here too
    hop = {"host", "connection", "content-length"}
    assert [h for h in v["headers"] if h[0] not in hop] == [h for h in d["headers"] if h[0] not in hop]
    assert sorted(h for h in v["headers"] if h[0] in hop - {"host"}) == sorted(
        h for h in d["headers"] if h[0] in hop - {"host"}
    )
    assert ["x-api-key", KEY] in v["headers"] and ["authorization", f"Bearer {KEY2}"] in v["headers"]
    assert via2.json()["headers"] == v["headers"]


# ----------------------------------------------------------------------------------------------- latency, streaming


# The first-byte latency the proxy adds is measured by tools/bench_proxy.py (a benchmark, not a timed test).


class FakeClock:
    """A clock for ``ProxyApp(clock=)``: time moves only when the test (or a paced upstream) says so, plus ``tick``
    per reading so that successive readings differ. Thread-safe: the proxy reads it from its server thread."""

    def __init__(self, tick: float = 0.0) -> None:
        self._now = 1000.0
        self.tick = tick
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self._now += self.tick
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


async def test_reads_are_forwarded_as_they_arrive(tmp_path: Path) -> None:
    """No buffering: every upstream read reaches the client (and the recording) before upstream sends the next one.

    Proven by a handshake, not by timing: upstream's pacer (a real-time 1x pacer whose sleeps are replaced by a
    gate) holds each read until the client behind the proxy has received every byte before it; it then moves the
    proxy's clock on by the planned delay, so the recorded read times are upstream's pacing, exactly."""
    from inspector.scenarios.model import Pacing, Scenario, TextBlock, TurnScript

    sc = Scenario(
        name="paced",
        description="paced",
        prompt="hi",
        seed=3,
        turns=[
            TurnScript(
                blocks=[TextBlock("a b c d e f g h i j k l m n o p q r s t", chunk=4)],
                pacing=Pacing(ttfb=0.02, event_gap=0.04, events_per_read=1),
            )
        ],
    )
    plan = render_faulted(sc, None, 0, 0, seed=SEED)
    # the sleeps upstream's pacer asks for, in order, and the bytes the client must hold before each one ends
    delays = [plan.header_delay, *(r.delay for r in plan.reads)]
    sent_before = [0, 0, *itertools.accumulate(len(r.data) for r in plan.reads[:-1])]  # header, read 0, read 1...
    gates = [(d, need) for d, need in zip(delays, sent_before, strict=True) if d > 0]
    assert len(gates) > 10
    opened: list[concurrent.futures.Future[None]] = [concurrent.futures.Future() for _ in gates]
    clock = FakeClock()
    asked: list[float] = []

    async def gate(seconds: float) -> None:  # runs on upstream's server thread
        i = len(asked)
        asked.append(seconds)
        await asyncio.wrap_future(opened[i])
        clock.advance(seconds)

    def client_holds(n: int) -> None:
        for fut, (_, need) in zip(opened, gates, strict=True):
            if need <= n and not fut.done():
                fut.set_result(None)

    record = tmp_path / "paced.jsonl"
    up_app = ServeApp(sc, speed=1.0, lenient=True, echo_model=False)
    up_app.pacer.sleeper = gate
    with BackgroundServer(up_app) as up, BackgroundServer(ProxyApp(up.base_url, record=record, clock=clock)) as px:
        chunks: list[bytes] = []
        client_holds(0)
        async with httpx2.AsyncClient(base_url=px.base_url) as h, asyncio.timeout(60):
            async with h.stream(
                "POST", "/v1/messages", json={"model": "m", "max_tokens": 5, "stream": True, "messages": USER}
            ) as r:
                async for chunk in r.aiter_raw():
                    chunks.append(chunk)
                    client_holds(sum(map(len, chunks)))
    # every planned sleep was gated (so each read went out only once the client had all before it)
    assert asked == pytest.approx([d for d, _ in gates]) and all(f.done() for f in opened)
    body = b"".join(chunks)
    assert body == plan.body  # identical bytes, in order
    rec = read_recording(record)
    reads = list(rec.attempts())[0].reads
    assert b"".join(rd.data for rd in reads) == body  # the recording holds what passed
    # no read coalesced two upstream reads, at the client or in the recording: every planned read boundary is one
    bounds = set(itertools.accumulate(len(rd.data) for rd in plan.reads))
    assert bounds <= set(itertools.accumulate(map(len, chunks)))
    assert bounds <= set(itertools.accumulate(len(rd.data) for rd in reads))
    # the recorded times are upstream's pacing (its planned delays, on the proxy's clock)
    due = dict(
        zip(
            itertools.accumulate(len(rd.data) for rd in plan.reads), list(itertools.accumulate(delays))[1:], strict=True
        )
    )
    at = dict(zip(itertools.accumulate(len(rd.data) for rd in reads), (rd.t for rd in reads), strict=True))
    assert [at[b] for b in sorted(bounds)] == pytest.approx([due[b] for b in sorted(bounds)], abs=1e-5)
    from inspector.record.timing import timing_json

    assert timing_json(rec)["attempts"][0]["buffering"]["verdict"] == "not buffered"


# ----------------------------------------------------------------------------------------------- tool inference


def test_infer_tool_executions_pure() -> None:
    seen = [
        SeenToolUse("toolu_a", "read_file", 0, 0, 1, stop_t=1.0, stream_end_t=1.5),
        SeenToolUse("toolu_b", "read_file", 0, 0, 2, stop_t=1.2, stream_end_t=1.5),
        SeenToolUse("toolu_c", "grep", 0, 0, 3, stop_t=1.4, stream_end_t=1.5),
        SeenToolUse("toolu_old", "x", 5, 0, 1, stop_t=0.1),
    ]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": []},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "12345"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "is_error": True,
                    "content": [{"type": "text", "text": "boom"}],
                },
                {"type": "tool_result", "tool_use_id": "toolu_zz", "content": "?"},
            ],
        },
    ]
    out = {i.tool_use_id: i for i in infer_tool_executions(seen, messages, request_t=3.0)}
    assert out["toolu_a"] == InferredExecution("toolu_a", "read_file", "result", 0, 3.0, 1.0, 1.5, 2.0, 1.5, True, 4)
    assert out["toolu_b"].since_block_stop == pytest.approx(1.8) and out["toolu_b"].is_error is False
    assert out["toolu_b"].result_chars == 5
    assert out["toolu_c"].status == "missing" and out["toolu_c"].since_block_stop == pytest.approx(1.6)
    assert out["toolu_zz"].status == "unknown" and out["toolu_zz"].name is None
    assert "toolu_old" not in out  # another turn, not answered by this request
    assert infer_tool_executions(seen, [{"role": "user", "content": "plain"}], 3.0) == []
    assert infer_tool_executions(seen, "garbage", 3.0) == []


@pytest.mark.parametrize("family", ["anthropic", "openai_chat", "openai_responses"])
def test_a_history_that_goes_on_past_its_tool_calls_with_no_result_says_they_got_none(family: str) -> None:
    """A chat agent that ignores tool calls: its next request goes on with a plain user message ("and Rome?"), no
    tool_result at all. The call stayed "running" (and its inferred bar grew) for the rest of the session; the
    history continues past it with no result, so it got none (the API answers such a request 400)."""
    seen = [SeenToolUse("call_1", "get_weather", 0, 0, 1, stop_t=1.0, stream_end_t=1.5)]
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    bodies: dict[str, dict[str, Any]] = {
        "anthropic": {
            "messages": [
                {"role": "user", "content": "Paris?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather"}]},
                {"role": "user", "content": "and Rome?"},
            ]
        },
        "openai_chat": {
            "messages": [
                {"role": "user", "content": "Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "user", "content": "and Rome?"},
            ]
        },
        "openai_responses": {
            "input": [
                {"role": "user", "content": "Paris?"},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
                {"role": "user", "content": "and Rome?"},
            ]
        },
    }
    body = bodies[family]
    continued = continued_tool_uses(request_history(body, family))
    assert continued == {"call_1"}
    out = infer_tool_executions(seen, request_results(body, family), 3.0, continued=continued)
    assert [(i.tool_use_id, i.status, i.reason) for i in out] == [
        ("call_1", "missing", "no tool_result for it in the next request")
    ]
    # a first request, or one whose history holds no call of it: nothing to say
    assert continued_tool_uses(request_history({"messages": [{"role": "user", "content": "hi"}]})) == set()
    assert infer_tool_executions(seen, [{"role": "user", "content": "hi"}], 3.0, continued=set()) == []


async def test_tool_execution_is_inferred_from_the_next_request(upstream: BackgroundServer, tmp_path: Path) -> None:
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    record = tmp_path / "tools.jsonl"
    clock = FakeClock(tick=1e-6)  # time goes by only when the test says (and a microsecond per reading)
    with BackgroundServer(ProxyApp(upstream.base_url, record=record, bus=bus, clock=clock)) as px:
        client = sdk(px.base_url)
        hdr = {"x-inspector-scenario": "parse_date", "x-inspector-session": "infer"}
        try:
            messages: list[Any] = [{"role": "user", "content": "why?"}]
            first = await raw_call(client, messages, hdr)
            msg = assemble(first["body"]).final_message()
            uses = [b for b in msg["content"] if b["type"] == "tool_use"]
            clock.advance(0.2)  # the other harness "runs its tools" for 0.2 s (of the proxy's clock)
            messages += [
                {"role": "assistant", "content": msg["content"]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "file text"} for b in uses],
                },
            ]
            second = await raw_call(client, messages, hdr)
            # the same body again after a complete answer: not a retry (nothing failed), a new turn; the results it
            # repeats were answered already, so their tool uses are unknown to it
            again = await raw_call(client, messages, hdr)
        finally:
            await client.close()
    assert first["status"] == second["status"] == again["status"] == 200
    tool_obs = [o for o in got if isinstance(o, O.ToolUse)]
    assert [o.id for o in tool_obs] == [b["id"] for b in uses] and len(uses) == 4  # parse_date: run_tests + 3 reads
    inferred = [o for o in got if isinstance(o, ToolExecutionInferred) and o.turn == 1]
    assert [o.tool_use_id for o in inferred] == [b["id"] for b in uses]
    again_inferred = [o for o in got if isinstance(o, ToolExecutionInferred) and o.turn == 2]
    assert [(o.tool_use_id, o.status) for o in again_inferred] == [(b["id"], "unknown") for b in uses]
    assert all(o.status == "result" and o.from_turn == 0 and o.turn == 1 for o in inferred)
    assert all(
        o.since_block_stop is not None
        and o.since_block_stop >= 0.2
        and o.since_stream_end is not None
        and o.since_stream_end >= 0.2
        for o in inferred
    )
    # the stream ended when the client had it all: exactly the harness's 0.2 s (and a few clock ticks) went by since
    assert all(o.since_stream_end == pytest.approx(0.2, abs=1e-3) for o in inferred)
    # block stops come in order, so the earlier blocks waited longer
    first_wait, last_wait = inferred[0].since_block_stop, inferred[-1].since_block_stop
    assert first_wait is not None and last_wait is not None and first_wait >= last_wait
    starts = [o for o in got if isinstance(o, O.AttemptStarted)]
    assert [(o.turn, o.attempt) for o in starts] == [(0, 0), (1, 0), (2, 0)]
    assert all("x-api-key" not in o.headers for o in starts)
    reads = [o for o in got if isinstance(o, O.ReadReceived) and (o.turn, o.attempt) == (0, 0)]
    assert b"".join(o.data for o in reads) == first["body"]
    ended = [o for o in got if isinstance(o, O.AttemptEnded)]
    assert [(o.status, o.outcome) for o in ended] == [("complete", "tool_use"), ("complete", "text_finish")] * 1 + [
        ("complete", "text_finish")
    ]
    rec = read_recording(record)
    lines = [o for o in rec.observations if o.get("type") == "tool_inferred" and o["status"] == "result"]
    assert len(lines) == 4 and all(o["since_block_stop"] >= 0.2 for o in lines)


# ----------------------------------------------------------------------------------------------- failures


async def test_upstream_unreachable_gives_502(tmp_path: Path) -> None:
    with BackgroundServer(ServeApp()) as dead:
        url = dead.base_url
    record = tmp_path / "dead.jsonl"
    with BackgroundServer(ProxyApp(url, record=record)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url) as h:
            r = await h.post("/v1/messages", json={"model": "m", "max_tokens": 5, "stream": True, "messages": USER})
    assert r.status_code == 502 and "upstream unreachable" in r.json()["error"]["message"]
    att = list(read_recording(record).attempts())[0]
    assert att.end is not None and att.end["status"] == "failed" and att.response is None


async def test_client_disconnect_is_passed_upstream(upstream: BackgroundServer) -> None:
    """A client that gives up on a stalled stream: the proxy closes its upstream response too."""
    loop = asyncio.get_running_loop()
    up_ended, px_ended = asyncio.Event(), asyncio.Event()  # set from the servers' threads when an exchange ends

    def on_upstream(ex: Exchange) -> None:
        if ex.faults == "stall:2@once" and ex.end is not None:
            loop.call_soon_threadsafe(up_ended.set)

    proxy = ProxyApp(
        upstream.base_url,
        on_exchange=lambda ex: loop.call_soon_threadsafe(px_ended.set) if ex.end is not None else None,
    )
    app: ServeApp = upstream.owner
    before = app.on_exchange
    app.on_exchange = on_upstream
    try:
        with BackgroundServer(proxy) as px:
            client = sdk(px.base_url)
            plan = render_faulted(get_scenario("weather"), "stall:2", 0, 0, seed=SEED)
            try:
                got = await raw_call(
                    client,
                    USER,
                    {"x-inspector-scenario": "weather", "x-inspector-fault": "stall:2", "x-inspector-session": "disc"},
                    hang_len=len(plan.body),
                )
            finally:
                await client.close()
            assert got["body"] == plan.body
            async with asyncio.timeout(60):  # until both servers have seen the disconnect
                await up_ended.wait()
                await px_ended.wait()
    finally:
        app.on_exchange = before
    mine = [e for e in app.exchanges if e.faults == "stall:2@once" and e.end is not None]
    assert proxy.exchanges[-1].end == "cancelled"
    assert mine[-1].end == "disconnected"


# ----------------------------------------------------------------------------------------------- CLI bits


def test_helpers() -> None:
    assert parse_listen("127.0.0.1:8787") == ("127.0.0.1", 8787)
    assert parse_listen(":0") == ("127.0.0.1", 0) and parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen("[::1]:81") == ("::1", 81)
    assert credential_values(
        [("X-Api-Key", KEY), ("Authorization", f"Bearer {KEY2}"), ("accept", "x" * 20), ("cookie", "short")]
    ) == [KEY, f"Bearer {KEY2}", KEY2]


def test_headless_cli_records_and_never_logs_the_key(upstream: BackgroundServer, tmp_path: Path) -> None:
    record = tmp_path / "cli.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.cli.proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream.base_url,
            "--headless",
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out = [proc.stdout.readline(), proc.stdout.readline()]
        m = re.match(r"ANTHROPIC_BASE_URL=(http://127\.0\.0\.1:\d+)$", out[1].strip())
        assert m, out
        with httpx2.Client(base_url=m.group(1), timeout=10) as h:
            for _ in range(100):  # bounded: until uvicorn accepts on the already bound socket
                try:
                    r = h.post(
                        "/v1/messages",
                        headers={"x-api-key": KEY, "x-inspector-session": "cli"},
                        json={"model": "m", "max_tokens": 5, "stream": True, "messages": USER},
                    )
                    break
                except httpx2.ConnectError:
                    continue
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert "turn 1 attempt 1 POST /v1/messages -> 200 complete" in err
    assert KEY not in err and KEY not in "".join(out)
    raw = record.read_bytes()
    assert KEY.encode() not in raw
    rec = read_recording(record)
    assert list(rec.attempts())[0].data == r.content
    assert rec.header["source"]["type"] == "proxy"

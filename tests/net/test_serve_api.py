"""`inspector serve` answers like the API: credentials and version checks, body validation, the request's model
echoed, usage in message_delta, a reply past the script's end, the bounded request history
(`/inspector/requests`) and bounded fault arguments. Real loopback sockets, the official SDK where it matters."""

from __future__ import annotations

import asyncio
import math
import time
import tracemalloc
from collections.abc import Iterator, Mapping
from typing import Any

import anthropic
import httpx2
import orjson
import pytest

from inspector.core.errors import FaultError
from inspector.net.faults import FAULTS, STALL_INLINE, STALL_MAX, StalledPlan, iter_reads, parse_faults, render_faulted
from inspector.net.serve import ServeApp, format_exchange
from inspector.net.server import BackgroundServer
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render import ResponsePlan
from inspector.stream.sse import iter_events
from inspector.testing.serve import API_HEADERS, KEY, RawClient, kept_exchange, messages_body


@pytest.fixture(scope="module")
def served() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf)) as srv:
        yield srv


def sdk(base_url: str, **kw: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0, **kw)


def error_shape(status: int | None, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """The API's error body, checked: exactly type/error/request_id, the same id in the header."""
    obj = orjson.loads(body)
    assert set(obj) == {"type", "error", "request_id"} and obj["type"] == "error"
    assert set(obj["error"]) == {"type", "message"} and obj["error"]["message"]
    assert headers["request-id"] == obj["request_id"]
    error: dict[str, Any] = obj["error"]
    return error


# --------------------------------------------------------------------------------------------- validation


BASE = messages_body()
BAD_BODIES = {
    "no_model": ({k: v for k, v in BASE.items() if k != "model"}, "model: Field required"),
    "no_max_tokens": ({k: v for k, v in BASE.items() if k != "max_tokens"}, "max_tokens: Field required"),
    "no_messages": ({k: v for k, v in BASE.items() if k != "messages"}, None),  # the history rules answer
    "model_not_string": ({**BASE, "model": 3}, "model: Input should be a valid string"),
    "model_empty": ({**BASE, "model": ""}, "model: String should have at least 1 character"),
    "max_tokens_string": ({**BASE, "max_tokens": "16"}, "max_tokens: Input should be a valid integer"),
    "max_tokens_bool": ({**BASE, "max_tokens": True}, "max_tokens: Input should be a valid integer"),
    "max_tokens_zero": ({**BASE, "max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    "messages_not_list": ({**BASE, "messages": "hi"}, None),
    "stream_not_bool": ({**BASE, "stream": "yes"}, "stream: Input should be a valid boolean"),
}


def test_no_credentials_is_401_authentication_error(served: BackgroundServer) -> None:
    c = RawClient(served.address)
    try:
        status, headers, body = c.request("/v1/messages", BASE, headers={"anthropic-version": "2023-06-01"})
        assert status == 401
        assert error_shape(status, headers, body) == {
            "type": "authentication_error",
            "message": "x-api-key header is required",
        }
        for path, method in (("/v1/models", "GET"), ("/v1/messages/count_tokens", "POST")):
            status, headers, body = c.request(path, BASE, headers={"anthropic-version": "2023-06-01"}, method=method)
            assert status == 401 and error_shape(status, headers, body)["type"] == "authentication_error"
        # a bearer token is a credential too (any value: the fake API checks presence, like a harness needs)
        status, _, _ = c.request("/v1/messages", BASE, headers={"authorization": "Bearer x", "anthropic-version": "1"})
        assert status == 200
    finally:
        c.close()


def test_missing_anthropic_version_is_400(served: BackgroundServer) -> None:
    c = RawClient(served.address)
    try:
        status, headers, body = c.request("/v1/messages", BASE, headers={"x-api-key": KEY})
        assert status == 400
        assert error_shape(status, headers, body) == {
            "type": "invalid_request_error",
            "message": "anthropic-version: header is required",
        }
    finally:
        c.close()


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_bodies_are_400_invalid_request_error(served: BackgroundServer, case: str) -> None:
    body, message = BAD_BODIES[case]
    c = RawClient(served.address)
    before = served.owner.total_exchanges
    try:
        status, headers, raw = c.request("/v1/messages", body)
        err = error_shape(status, headers, raw)
        assert status == 400 and err["type"] == "invalid_request_error"
        if message is not None:
            assert err["message"] == message
        assert kept_exchange(served.owner, before).rejected == err["message"]
    finally:
        c.close()


async def test_the_sdk_sees_its_own_validation_errors(served: BackgroundServer) -> None:
    async with anthropic.AsyncAnthropic(base_url=served.base_url, api_key=KEY, max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=0, messages=[{"role": "user", "content": "x"}]
            )
        body = info.value.body
        assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    # the SDK refuses to send without a key; a harness with a custom http client sees the 401
    async with httpx2.AsyncClient(base_url=served.base_url) as h:
        r = await h.post("/v1/messages", json=BASE, headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 401


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_lenient_turns_the_checks_off(case: str) -> None:
    body, message = BAD_BODIES[case]
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as srv:
        c = RawClient(srv.address)
        try:
            status, _, _ = c.request("/v1/messages", BASE, headers={})  # no key, no version
            assert status == 200
            status, _, _ = c.request("/v1/messages", body, headers={})
            # the history rules still apply to messages; everything else is served
            assert status == (400 if case in ("no_messages", "messages_not_list") else 200)
        finally:
            c.close()


# --------------------------------------------------------------------------------------------- model and usage


@pytest.mark.parametrize("stream", [True, False])
async def test_the_request_model_is_echoed(served: BackgroundServer, stream: bool) -> None:
    async with sdk(served.base_url) as client:
        if stream:
            async with client.messages.stream(
                model="claude-opus-4-8-20260101", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            ) as s:
                msg: anthropic.types.Message = await s.get_final_message()
        else:
            msg = await client.messages.create(
                model="claude-opus-4-8-20260101", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert msg.model == "claude-opus-4-8-20260101"


async def test_message_delta_carries_input_and_cache_usage(served: BackgroundServer) -> None:
    sc = get_scenario("parse_date")
    usage = sc.turns[0].usage
    async with sdk(served.base_url) as client:
        async with client.messages.with_streaming_response.create(
            model=sc.model, max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True
        ) as r:
            raw = await r.read()
        async with client.messages.stream(
            model=sc.model, max_tokens=10, messages=[{"role": "user", "content": "y"}]
        ) as s:
            final = await s.get_final_message()
    deltas = [orjson.loads(e.data) for e in iter_events(raw) if e.event == "message_delta"]
    assert len(deltas) == 1
    assert deltas[0]["usage"] == {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": deltas[0]["usage"]["output_tokens"],
    }
    # a client that reads usage from message_delta only (langchain-anthropic) gets the input tokens
    assert deltas[0]["usage"]["input_tokens"] == usage.input_tokens > 0
    assert final.usage.input_tokens == usage.input_tokens  # the SDK agrees


# --------------------------------------------------------------------------------------------- end of the script


def _conversation(sc_name: str) -> list[Any]:  # (the SDK's message params are TypedDicts)
    """A valid history past the last turn of a scenario (every tool_use answered)."""
    from inspector.scenarios.render import expected_blocks

    sc = get_scenario(sc_name)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(len(sc.turns)):
        blocks = expected_blocks(sc, k, 0)
        messages.append({"role": "assistant", "content": blocks})
        ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
        messages.append({"role": "user", "content": results or "continue"})
    return messages


async def test_after_the_last_turn_an_end_turn_reply_is_flagged(served: BackgroundServer) -> None:
    from inspector.testing.dashboard import wait_for

    messages = _conversation("weather")
    before = served.owner.total_exchanges
    async with sdk(served.base_url) as client:
        async with client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=10,
            messages=messages,
            extra_headers={"x-inspector-scenario": "weather"},
        ) as s:
            msg = await s.get_final_message()
    assert msg.stop_reason == "end_turn" and msg.model == "claude-haiku-4-5"
    block = msg.content[0]
    assert [b.type for b in msg.content] == ["text"] and isinstance(block, anthropic.types.TextBlock)
    assert "has ended" in block.text
    # (serve keeps an exchange once its body has gone out: the client may have it first; a CI run read the last one)
    await wait_for(lambda: served.owner.total_exchanges > before, what="the exchange kept")
    ex = served.owner.exchanges[-1]
    assert ex.script_ended and ex.status == 200 and ex.turn == len(get_scenario("weather").turns)
    assert "past the end of the script" in format_exchange(ex)
    async with httpx2.AsyncClient(base_url=served.base_url) as h:
        listed = (await h.get("/inspector/requests")).json()
    assert listed["data"][-1]["script_ended"] is True


async def test_strict_answers_400_after_the_last_turn() -> None:
    messages = _conversation("weather")
    with BackgroundServer(ServeApp("weather", speed=math.inf, strict=True)) as srv:
        async with sdk(srv.base_url) as client:
            with pytest.raises(anthropic.BadRequestError) as info:
                await client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=messages)
    body = info.value.body
    assert isinstance(body, dict) and "no turn 2" in body["error"]["message"]


# --------------------------------------------------------------------------------------------- bounded history


def test_history_is_a_ring_and_requests_says_what_it_dropped() -> None:
    with BackgroundServer(ServeApp(speed=math.inf, history=3)) as srv:
        c = RawClient(srv.address)
        try:
            for i in range(5):
                body = messages_body(messages=[{"role": "user", "content": f"m{i}"}])
                assert c.request("/v1/messages", body)[0] == 200
            bad = messages_body(messages=[{"role": "assistant", "content": "x"}])
            assert c.request("/v1/messages", bad)[0] == 400
            status, _, raw = c.request("/inspector/requests", None, method="GET")
        finally:
            c.close()
    listed = orjson.loads(raw)
    assert status == 200
    assert listed["total"] == 6 and listed["kept"] == 3 and listed["dropped"] == 3 and "dropped" in listed["note"]
    assert [e["seq"] for e in listed["data"]] == [3, 4, 5]
    assert [e["history"] for e in listed["data"]] == ["ok", "ok", "first_not_user"]
    with BackgroundServer(ServeApp(speed=math.inf)) as srv2:
        c = RawClient(srv2.address)
        try:
            assert c.request("/v1/messages", BASE, headers={})[0] == 401
        finally:
            c.close()
    assert srv2.owner.exchanges[-1].history == "not checked"  # rejected before the history rules
    app = srv.owner
    assert len(app.exchanges) == 3 and len(app.attempts) <= 3 and app.attempts_dropped == 2


def test_attempt_counters_are_lru() -> None:
    app = ServeApp(speed=math.inf, history=2)
    a, b, c = ("a",), ("b",), ("c",)
    assert [app.api._next_attempt(k) for k in (a, b, a, c, a, b)] == [0, 0, 1, 0, 2, 0]  # b was the oldest: dropped
    assert list(app.attempts) == [a, b]


# --------------------------------------------------------------------------------------------- fault bounds


def test_every_numeric_fault_argument_is_bounded() -> None:
    for d in FAULTS.values():
        if d.arg is None:
            continue
        assert d.maximum is not None and d.default is not None and d.default <= d.maximum, d.name
        parse_faults(f"{d.name}:{d.maximum:g}" if not d.integer else f"{d.name}:{int(d.maximum)}")
        too_big = int(d.maximum) + 1 if d.integer else d.maximum * 2
        with pytest.raises(FaultError, match="must be at most"):
            parse_faults(f"{d.name}:{too_big}")
    with pytest.raises(FaultError, match=f"stall: N pings must be at most {STALL_MAX}, not 3000000"):
        parse_faults("stall:3000000")


def test_an_unbounded_fault_header_is_a_400(served: BackgroundServer) -> None:
    c = RawClient(served.address)
    try:
        status, headers, raw = c.request(
            "/v1/messages", BASE, headers={**API_HEADERS, "x-inspector-fault": "stall:3000000"}
        )
        assert status == 400 and "must be at most" in error_shape(status, headers, raw)["message"]
    finally:
        c.close()


def test_a_long_stall_is_generated_lazily() -> None:
    tracemalloc.start()
    try:
        plan = render_faulted(get_scenario("parse_date"), f"stall:{STALL_MAX}", 0, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(plan, StalledPlan) and plan.more_pings == STALL_MAX - STALL_INLINE
    assert peak < 20_000_000  # a precomputed million pings took gigabytes
    assert len(plan.reads) == 1 + STALL_INLINE
    pings = 0
    for r in iter_reads(plan):
        if b"event: ping" in r.data:
            pings += 1
            assert r.data == plan.ping or pings <= STALL_INLINE
    assert pings == STALL_MAX
    # short stalls are unchanged (and identical in process)
    small = render_faulted(get_scenario("parse_date"), "stall:10", 0, 0)
    assert not isinstance(small, StalledPlan) and sum(b"event: ping" in r.data for r in small.reads) == 10


async def test_a_long_stall_keeps_pinging_and_does_not_block_other_requests(served: BackgroundServer) -> None:
    want = STALL_INLINE + 40
    hdr = {"x-inspector-fault": f"stall:{STALL_MAX}", "x-inspector-session": "long-stall"}
    async with sdk(served.base_url) as client:
        async with client.messages.with_streaming_response.create(
            model="claude-sonnet-4-6",
            max_tokens=10,
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            extra_headers=hdr,
        ) as r:
            seen = b""
            async for chunk in r.iter_bytes():
                seen += chunk
                if seen.count(b"event: ping") >= want:
                    break
            # meanwhile (the stall is still pinging at max speed) another request is answered
            t0 = time.monotonic()
            other = await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "other"}]
            )
            assert other.stop_reason is not None and time.monotonic() - t0 < 30
    assert seen.count(b"event: ping") >= want


async def test_plans_render_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A render that takes long does not stop the server answering another connection meanwhile."""
    import threading

    import inspector.net.serve as serve_mod

    release = threading.Event()
    from inspector.net.faults import render_faulted as real  # (the function serve looks up, patched below)

    def slow(*a: Any, **k: Any) -> ResponsePlan:
        assert release.wait(20)  # the event loop must stay free while this worker thread waits
        return real(*a, **k)

    app = ServeApp(speed=math.inf)
    with BackgroundServer(app) as srv:
        monkeypatch.setattr(serve_mod, "render_faulted", slow)
        async with sdk(srv.base_url) as client:
            slow_call = asyncio.ensure_future(
                client.messages.create(
                    model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "a"}]
                )
            )
            async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
                r = await h.get("/v1/models")  # answered while the render waits
            assert r.status_code == 200 and not slow_call.done()
            release.set()
            msg = await slow_call
    assert msg.stop_reason is not None


async def test_echo_model_off_answers_with_the_scenario_model() -> None:
    with BackgroundServer(ServeApp(speed=math.inf, echo_model=False)) as srv:
        async with sdk(srv.base_url) as client:
            msg = await client.messages.create(
                model="claude-opus-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
    assert msg.model == get_scenario("parse_date").model
    assert srv.owner.exchanges[-1].model == "claude-opus-5"  # still noted


# --------------------------------------------------------------------------------------------- what real clients hit


def test_count_tokens_counts_the_system_prompt_and_the_tools(served: BackgroundServer) -> None:
    c = RawClient(served.address)
    try:
        bare = {"model": BASE["model"], "messages": BASE["messages"]}
        status, headers, raw = c.request("/v1/messages/count_tokens", bare)
        assert status == 200 and headers["request-id"].startswith("req_011C")
        small = orjson.loads(raw)["input_tokens"]
        tools = [
            {"name": f"tool_{i}", "description": "d" * 780, "input_schema": {"type": "object", "properties": {}}}
            for i in range(100)
        ]  # about 80 KB of tool definitions
        status, _, raw = c.request("/v1/messages/count_tokens", {**bare, "system": "s" * 4000, "tools": tools})
        big = orjson.loads(raw)["input_tokens"]
        assert status == 200 and big >= small + 80_000 // 4 + 1000
    finally:
        c.close()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "model: Field required"),
        ({"model": "claude-sonnet-4-6", "messages": "hi"}, 400, None),
        ({"model": "claude-sonnet-4-6", "messages": [{"role": "assistant", "content": "x"}]}, 400, None),
        ({"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x"}], "tools": {}}, 400, None),
        ({"model": "claude-nope-1", "messages": [{"role": "user", "content": "x"}]}, 404, "model: claude-nope-1"),
        ([1, 2], 400, "request body must be a JSON object"),
    ],
)
def test_count_tokens_validates_like_messages(
    served: BackgroundServer, body: dict[str, Any] | list[int], status: int, message: str | None
) -> None:
    c = RawClient(served.address)
    try:
        # (RawClient.request takes a dict or bytes: a JSON list goes as its bytes, as RawClient would encode it)
        got, headers, raw = c.request(
            "/v1/messages/count_tokens", body if isinstance(body, dict) else orjson.dumps(body)
        )
        err = error_shape(got, headers, raw)
        assert got == status and err["type"] == ("not_found_error" if status == 404 else "invalid_request_error")
        if message is not None:
            assert err["message"] == message
    finally:
        c.close()


async def test_an_unknown_model_is_404_not_found_error_unless_lenient(served: BackgroundServer) -> None:
    async with sdk(served.base_url) as client:
        with pytest.raises(anthropic.NotFoundError) as info:
            await client.messages.create(
                model="claude-nope-1", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        body = info.value.body
        assert isinstance(body, dict)
        assert body["error"] == {"type": "not_found_error", "message": "model: claude-nope-1"}
        # models the API knows (genai-prices' catalogue, dated ids too) and the scenarios' own are answered
        for model in ("claude-haiku-4-5-20251001", "claude-opus-4-8", get_scenario("parse_date").model):
            msg = await client.messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": "x"}])
            assert msg.model == model
    async with httpx2.AsyncClient(base_url=served.base_url, headers=API_HEADERS) as h:
        assert (await h.get("/v1/models/claude-nope-1")).status_code == 404
        assert (await h.get("/v1/models/claude-opus-4-8")).status_code == 200
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as srv:
        async with sdk(srv.base_url) as client:
            msg = await client.messages.create(
                model="claude-nope-1", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert msg.model == "claude-nope-1"


def test_request_ids_are_unique_per_response(served: BackgroundServer) -> None:
    c = RawClient(served.address)
    seen: list[str] = []
    try:
        for _ in range(3):  # the same request, answered three times
            status, headers, _ = c.request("/v1/messages", BASE, headers={**API_HEADERS, "x-inspector-session": "rid"})
            assert status == 200
            seen.append(headers["request-id"])
        status, headers, raw = c.request("/v1/messages", {**BASE, "max_tokens": 0})
        error_shape(status, headers, raw)
        seen.append(headers["request-id"])
        status, headers, raw = c.request("/v1/messages", {**BASE, "max_tokens": 0})
        seen.append(headers["request-id"])
        status, headers, raw = c.request("/v1/messages", BASE, headers={**API_HEADERS, "x-inspector-fault": "http_429"})
        assert status == 429 and orjson.loads(raw)["request_id"] == headers["request-id"]
        seen.append(headers["request-id"])
    finally:
        c.close()
    assert len(set(seen)) == len(seen) and all(len(r) == len("req_011C") + 20 for r in seen)


def test_rate_limit_headers_follow_the_requests_and_the_scripted_429() -> None:
    now = [1_800_000_000.0]
    from inspector.scenarios.fakeapi import RateLimits

    limits = RateLimits(requests_limit=50, tokens_limit=100_000, clock=lambda: now[0])
    with BackgroundServer(ServeApp(speed=math.inf, ratelimits=limits)) as srv:
        c = RawClient(srv.address)
        try:
            _, h1, _ = c.request("/v1/messages", BASE)
            now[0] += 1
            _, h2, _ = c.request("/v1/messages", {**BASE, "system": "s" * 40_000})
            assert h1["anthropic-ratelimit-requests-limit"] == "50"
            assert h1["anthropic-ratelimit-requests-remaining"] == "49"
            assert h2["anthropic-ratelimit-requests-remaining"] == "48"
            t1 = 100_000 - int(h1["anthropic-ratelimit-tokens-remaining"])
            t2 = int(h1["anthropic-ratelimit-tokens-remaining"]) - int(h2["anthropic-ratelimit-tokens-remaining"])
            assert t1 >= 1 and t2 >= 10_000  # the 40 KB system prompt counts
            assert h1["anthropic-ratelimit-requests-reset"] == "2027-01-15T08:01:00Z"  # the minute's end
            # a scripted 429 says nothing remains until its retry-after (serve at max speed: 1 ms)
            status, h3, _ = c.request("/v1/messages", BASE, headers={**API_HEADERS, "x-inspector-fault": "http_429:30"})
            assert status == 429
            assert h3["anthropic-ratelimit-requests-remaining"] == h3["anthropic-ratelimit-tokens-remaining"] == "0"
            assert h3["anthropic-ratelimit-tokens-reset"] == "2027-01-15T08:00:02Z"
            now[0] += 60  # a new minute: everything remains again
            _, h4, _ = c.request("/v1/messages", BASE, headers={**API_HEADERS, "x-inspector-session": "later"})
            assert h4["anthropic-ratelimit-requests-remaining"] == "49"
        finally:
            c.close()


@pytest.mark.parametrize("depth", [300, 2000])
def test_a_deeply_nested_request_is_a_400_not_a_500(served: BackgroundServer, depth: int) -> None:
    raw_body = (
        b'{"model":"claude-sonnet-4-6","max_tokens":5,"messages":[{"role":"user","content":"' + b"x" + b'"}],"x":'
    )
    raw_body += b"[" * depth + b"]" * depth + b"}"
    c = RawClient(served.address)
    try:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            status, headers, raw = c.request(path, raw_body)
            err = error_shape(status, headers, raw)
            assert status == 400 and err["type"] == "invalid_request_error" and "nests deeper than" in err["message"]
    finally:
        c.close()

"""`inspector serve` over real loopback sockets, driven by the official SDK: exact bytes for every scenario and every
fault, documented fault behaviour, multi-turn conversations, history 400s, determinism, loopback binding."""

from __future__ import annotations

import asyncio
import functools
import io
import math
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import anthropic
import httpx2
import orjson
import pytest

from inspector.cli.serve import main as serve_main
from inspector.core.errors import FaultError
from inspector.core.pacing import Pacer
from inspector.net.faults import BOM, FAULTS, apply_faults, faults_doc, parse_faults, render_faulted
from inspector.net.inprocess import FaultedScenarioServer
from inspector.net.serve import ServeApp, assembled_message
from inspector.net.server import BackgroundServer
from inspector.scenarios.bundled import SCENARIOS, get_scenario
from inspector.scenarios.fakeapi import message_seed
from inspector.scenarios.model import MaxTokensCut, Pacing, Scenario, TextBlock, TurnScript
from inspector.scenarios.render import ResponsePlan, render_turn
from inspector.scenarios.transport import make_client
from inspector.stream.assembler import assemble
from inspector.stream.history import history_violation
from inspector.stream.sse import iter_events

if TYPE_CHECKING:
    from starlette.types import Message

KEY = "sk-ant-api03-CANARY-serve-0000000000000000"
API_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}  # what every SDK sends
ALL_SCENARIOS = sorted(SCENARIOS)
ALL_FAULTS = [None, *FAULTS]
TRANSPORT_ERRORS = (httpx2.HTTPError, anthropic.APIConnectionError)


@pytest.fixture(scope="module")
def served() -> Iterator[BackgroundServer]:
    app = ServeApp(speed=math.inf)
    with BackgroundServer(app) as srv:
        yield srv


_TLS = ssl.create_default_context()  # built once: a fresh default context per client costs ~50 ms


def client_for(base_url: str, **kw: Any) -> anthropic.AsyncAnthropic:
    params: dict[str, Any] = {
        "base_url": base_url,
        "api_key": KEY,
        "max_retries": 0,
        "http_client": httpx2.AsyncClient(verify=_TLS, timeout=httpx2.Timeout(60.0)),
    }
    params.update(kw)
    return anthropic.AsyncAnthropic(**params)


USER: Any = [{"role": "user", "content": "hello"}]  # (Any: the SDK takes its messages as TypedDicts)


class Fetched(TypedDict):
    """What :func:`fetch` got."""

    body: bytes
    error: BaseException | None
    status: int | None
    headers: dict[str, str]
    hung: bool


async def fetch(
    client: anthropic.AsyncAnthropic,
    *,
    scenario: str,
    fault: str | None,
    session: str,
    messages: list[Any] = USER,
    hang_len: int | None = None,
    stream: bool = True,
) -> Fetched:
    """One raw request through the SDK. Returns {"body", "error", "status", "headers", "hung"}."""
    headers = {"x-inspector-scenario": scenario, "x-inspector-fault": fault or "none", "x-inspector-session": session}
    out: Fetched = {"body": b"", "error": None, "status": None, "headers": {}, "hung": False}
    try:
        async with client.messages.with_streaming_response.create(
            # the scenario's own model: the server echoes the request's model (test_the_request_model_is_echoed)
            model=get_scenario(scenario).model,
            max_tokens=1024,
            messages=messages,
            stream=stream,
            extra_headers=headers,
        ) as r:
            out["status"] = r.http_response.status_code
            out["headers"] = dict(r.http_response.headers)
            it = r.iter_bytes().__aiter__()
            while True:
                if hang_len is not None and len(out["body"]) >= hang_len:
                    try:  # the plan says the connection now stays open and silent: check that, boundedly
                        extra = await asyncio.wait_for(it.__anext__(), 0.2)
                    except TimeoutError:
                        out["hung"] = True
                        break
                    except StopAsyncIteration:
                        break
                    out["body"] += extra
                    continue
                try:
                    out["body"] += await it.__anext__()
                except StopAsyncIteration:
                    break
    except anthropic.APIStatusError as e:
        out["status"] = e.status_code
        out["headers"] = dict(e.response.headers)
        out["error"] = e
        out["body"] = e.response.content
    except TRANSPORT_ERRORS as e:
        out["error"] = e
    return out


def seed_of(messages: list[Any] = USER) -> str:
    """The message id seed serve gives a conversation that starts with ``messages`` (no system prompt)."""
    return message_seed({"messages": messages})


SEED = seed_of()  # fetch's default conversation's


@functools.lru_cache(maxsize=64)
def expected(name: str, fault: str | None, turn: int = 0, attempt: int = 0, seed: str = SEED) -> ResponsePlan:
    """render_faulted, cached (big_input takes a quarter of a second to render); ``seed``: the conversation's
    message id seed (fetch's default conversation's)."""
    return render_faulted(get_scenario(name), fault, turn, attempt, seed=seed)


def server_plan(
    srv: BackgroundServer, name: str, fault: str | None, turn: int = 0, attempt: int = 0, seed: str = SEED
) -> ResponsePlan:
    """render_faulted through the server's own plan cache: rendered once for the test and the server (the same
    function either way; test_in_process_and_served_bytes_are_identical checks it against a fresh render)."""
    app: ServeApp = srv.owner
    return app.plan(name, parse_faults(fault), turn, attempt, seed=seed)


def data_lines(body: bytes) -> list[bytes]:
    """Complete data lines (a line cut by a drop has no terminator and is left out)."""
    return [ln for ln in re.split(rb"\r\n|\r|\n", body)[:-1] if ln.startswith(b"data: ")]


# ----------------------------------------------------------------------------------------------- the matrix


# Over the socket: one case per fault (on a scenario with tool calls, so the tool faults bite) and one per scenario
# (no fault): the socket adds nothing a fault or a scenario could change. What every fault does to every scenario is
# checked on the rendered plans below (test_every_fault_does_what_it_says_on_every_scenario), without a socket.
SOCKET_CASES = [("weather", f) for f in FAULTS] + [(name, None) for name in ALL_SCENARIOS]


def _same_but_request_id(
    got: bytes, plan_body: bytes, got_headers: dict[str, str], plan_headers: dict[str, str]
) -> bool:
    """An error body as served: the plan's, with the request id unique to the response in place of the rendered one."""
    rendered, served = plan_headers.get("request-id"), got_headers.get("request-id")
    if not rendered or not served:
        return got == plan_body
    return got == plan_body.replace(rendered.encode(), served.encode())


@pytest.mark.parametrize(("name", "fault"), SOCKET_CASES, ids=lambda v: v or "none")
async def test_sdk_gets_exact_bytes_for_each_scenario_and_each_fault(
    served: BackgroundServer, name: str, fault: str | None
) -> None:
    plan = server_plan(served, name, fault)
    client = client_for(served.base_url)
    try:
        got = await fetch(
            client,
            scenario=name,
            fault=fault,
            session=f"matrix-{name}-{fault}",
            hang_len=len(plan.body) if plan.end == "hang" else None,
        )
    finally:
        await client.close()

    assert got["status"] == plan.status
    if plan.status != 200:  # HTTP error attempts: the API's error JSON, retry-after scaled by the speed (max)
        assert isinstance(got["error"], anthropic.APIStatusError)
        err = orjson.loads(got["body"])
        assert err["type"] == "error" and err["error"]["type"] in ("rate_limit_error", "overloaded_error", "api_error")
        if "retry-after" in plan.headers:
            assert got["headers"]["retry-after"] == "0.001"
        if "retry-after-ms" in plan.headers:
            assert got["headers"]["retry-after-ms"] == "1"
        assert _same_but_request_id(got["body"], plan.body, got["headers"], plan.headers)
        assert err["request_id"] == got["headers"]["request-id"]
        return

    # exactly the scenario's bytes, whatever the fault
    assert got["body"] == plan.body
    if plan.end == "drop":
        assert isinstance(got["error"], TRANSPORT_ERRORS), "a drop must break the connection"
    elif plan.end == "hang":
        assert got["hung"] and got["error"] is None
    else:
        assert got["error"] is None


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f or "none")
@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_every_fault_does_what_it_says_on_every_scenario(name: str, fault: str | None) -> None:
    """The whole scenario x fault cross product, on the rendered plans (what serve sends, byte for byte, as the
    socket cases above show): each fault does what --list-faults says."""
    sc = get_scenario(name)
    plan = expected(name, fault)
    if plan.status != 200:
        err = orjson.loads(plan.body)
        assert err["type"] == "error" and err["error"]["type"] in ("rate_limit_error", "overloaded_error", "api_error")
        return
    body = plan.body
    turn = apply_faults(sc, fault).turns[0]
    tools = [i for i, _ in sc.turns[0].tool_blocks()]
    unfaulted = expected(name, None)
    clean = plan.end == "eof" and not any(e[0] == "error" for e in plan.events)  # no scenario fault in the way
    cut_by_scenario = any(isinstance(f, MaxTokensCut) for f in sc.turns[0].faults)
    if fault == "error_event":
        assert plan.end == "eof" and plan.events[-1][0] == "error"
        assert plan.events[-1][1]["error"]["type"] == "overloaded_error"
        assert len([e for e in plan.events if e[0] not in ("ping", "error")]) == min(3, len(unfaulted.events))
    elif fault == "drop_event":
        assert plan.end == "drop"
        assert len([e for e in plan.events if e[0] != "ping"]) <= 4
    elif fault == "drop_byte":
        assert plan.end == "drop" and len(body) == min(200, len(unfaulted.body))
    elif fault == "stall":
        assert plan.end == "hang"
        names = [e[0] for e in plan.events]
        assert names[0] == "message_start" and names[1:] == ["ping"] * 10
    elif fault == "invalid_tool_json" and tools and clean and not cut_by_scenario:
        ts = assemble(body)
        block = ts.assembler.blocks[tools[-1]]
        assert block.closed and block.input_error is not None  # stopped, but its JSON does not parse
    elif fault == "max_tokens_tool" and tools and clean:
        ts = assemble(body)
        assert ts.assembler.stop_reason == "max_tokens"
        assert ts.assembler.blocks[tools[0]].open  # no content_block_stop
        assert max(ts.assembler.blocks) == tools[0]  # later blocks never come
    elif fault == "slow_drip" and not sc.turns[0].pacing.proxy_buffer:
        assert turn.pacing.event_gap == 0.25 and turn.pacing.events_per_read == 1
        assert all(len(list(iter_events(r.data))) <= 1 for r in plan.reads)
    elif fault == "relay_buffer":
        assert len(plan.reads) == 1 and plan.reads[0].delay > 0
    elif fault == "split_events" and not sc.turns[0].pacing.proxy_buffer:
        assert len(plan.reads) > len(unfaulted.reads) or sc.turns[0].pacing.split_events
    elif fault == "cr":
        assert b"\n" not in body and body.count(b"\r\r") >= 1
    elif fault == "crlf":
        assert body.count(b"\n") == body.count(b"\r\n") > 0
    elif fault == "bom":
        assert body.startswith(BOM) and not body[3:].startswith(BOM)
    elif fault == "padded":
        assert all(ln.endswith(b" ") for ln in data_lines(body))


def test_every_fault_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_main(["--list-faults"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == faults_doc().strip()
    for name, d in FAULTS.items():
        assert re.search(rf"^  {name}\b", out, re.M), name
        assert len(d.doc) > 30


def test_fault_parsing() -> None:
    assert parse_faults("drop-event:5, bom") == parse_faults(["drop_event=5", "bom"])
    assert parse_faults("none") == () == parse_faults(None) == parse_faults("")
    assert parse_faults("stall")[0].value == 10
    for bad, msg in [
        ("nope", "unknown fault"),
        ("bom:3", "no argument"),
        ("drop_event:x", "integer"),
        ("cr,crlf", "cannot be combined"),
        ("drop_event,stall", "cannot be combined"),
        ("bom,bom", "twice"),
    ]:
        with pytest.raises(FaultError, match=msg):
            parse_faults(bad)


# ----------------------------------------------------------------------------------------------- SDK-level behaviour


async def test_error_event_raises_in_sdk_and_retry_is_clean(served: BackgroundServer) -> None:
    client = client_for(served.base_url)
    hdr = {"x-inspector-scenario": "weather", "x-inspector-fault": "error_event", "x-inspector-session": "ee"}
    try:
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client.messages.stream(
                model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr
            ) as s:
                async for _ in s:
                    pass
        assert "overloaded_error" in str(info.value.body)
        # the harness retries the same request: attempt 1 is the scenario, clean
        async with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr
        ) as s:
            msg = await s.get_final_message()
        assert msg.stop_reason == "tool_use"
    finally:
        await client.close()


async def test_http_429_then_529_are_retried_by_the_sdk(served: BackgroundServer) -> None:
    client = client_for(served.base_url, max_retries=2)
    hdr = {"x-inspector-scenario": "weather", "x-inspector-fault": "http_429,http_529", "x-inspector-session": "h"}
    try:
        async with client.messages.with_streaming_response.create(
            model=get_scenario("weather").model, max_tokens=10, messages=USER, stream=True, extra_headers=hdr
        ) as r:
            body = await r.read()
            assert r.http_response.headers["x-scenario"].endswith("attempt=2")
    finally:
        await client.close()
    sc = apply_faults(get_scenario("weather"), "http_429,http_529")
    assert [render_turn(sc, 0, a).status for a in range(3)] == [429, 529, 200]
    assert body == render_faulted(get_scenario("weather"), "http_429,http_529", 0, 2, seed=SEED).body


async def test_drop_is_an_incomplete_chunked_body_on_the_wire(served: BackgroundServer) -> None:
    """Not just an exception in our client: the server really closes the connection before the last chunk."""
    host, port = served.address
    payload = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True, "messages": USER})
    request = (
        f"POST /v1/messages HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"x-api-key: {KEY}\r\nanthropic-version: 2023-06-01\r\n"
        f"x-inspector-fault: drop_byte:150\r\nx-inspector-session: raw\r\ncontent-length: {len(payload)}\r\n"
        f"\r\n"
    ).encode() + payload

    def roundtrip() -> bytes:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(request)
            data = b""
            while chunk := s.recv(65536):  # until the server closes the connection
                data += chunk
            return data

    raw = await asyncio.to_thread(roundtrip)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert not body.endswith(b"0\r\n\r\n")  # never the terminating chunk
    expected = render_faulted(get_scenario("parse_date"), "drop_byte:150", 0, 0, seed=SEED).body
    assert len(expected) == 150
    decoded, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        decoded, rest = decoded + rest[:size], rest[size + 2 :]
    assert decoded == expected


async def test_stream_false_gets_the_assembled_message(served: BackgroundServer) -> None:
    client = client_for(served.base_url)
    try:
        for name in ALL_SCENARIOS:
            plan = render_turn(get_scenario(name), 0, 0, SEED)
            hdr = {"x-inspector-scenario": name, "x-inspector-session": "nonstream"}
            if plan.status != 200:
                with pytest.raises(anthropic.APIStatusError):
                    await client.messages.create(
                        model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr
                    )
                continue
            if plan.end != "eof":
                with pytest.raises((anthropic.APIConnectionError, anthropic.APITimeoutError)):
                    await client.messages.create(
                        model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr, timeout=0.5
                    )
                continue
            if any(e[0] == "error" for e in plan.events):  # error event after 200 -> the error status
                with pytest.raises(anthropic.APIStatusError) as info:
                    await client.messages.create(
                        model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr
                    )
                assert info.value.status_code == 529
                continue
            msg = await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=10, messages=USER, extra_headers=hdr
            )
            expected = assembled_message(plan)
            assert msg.id == expected["id"] and msg.stop_reason == expected["stop_reason"]
            assert [b.type for b in msg.content] == [b["type"] for b in expected["content"]]
            want = [{k: v for k, v in b.items() if v is not None} for b in expected["content"]]
            assert msg.model_dump(mode="json", exclude_none=True)["content"] == want, name
    finally:
        await client.close()


async def test_models_and_unknown_paths(served: BackgroundServer) -> None:
    client = client_for(served.base_url)
    try:
        page = await client.models.list()
        model = get_scenario("parse_date").model
        assert model in [m.id for m in page.data]
        one = await client.models.retrieve(model)
        assert one.id == model
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("nope")
        n = await client.messages.count_tokens(model="claude-sonnet-4-6", messages=USER)
        assert n.input_tokens >= 1
    finally:
        await client.close()
    async with httpx2.AsyncClient(base_url=served.base_url, headers=API_HEADERS) as h:
        r = await h.get("/v2/whatever")
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
        r = await h.post(
            "/v1/messages",
            headers={"x-inspector-scenario": "nope"},
            json={"model": "claude-sonnet-4-6", "max_tokens": 1, "messages": USER},
        )
        assert r.status_code == 400 and "unknown scenario" in r.json()["error"]["message"]
        r = await h.post(
            "/v1/messages",
            headers={"x-inspector-fault": "nope"},
            json={"model": "claude-sonnet-4-6", "max_tokens": 1, "messages": USER},
        )
        assert r.status_code == 400 and "unknown fault" in r.json()["error"]["message"]
        r = await h.get("/inspector/faults")
        assert [f["name"] for f in r.json()["data"]] == list(FAULTS)


# ----------------------------------------------------------------------------------------------- multi-turn


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "tool_result", "tool_use_id": b["id"], "content": f"result of {b['name']}"}
        for b in message["content"]
        if b["type"] == "tool_use"
    ]


class _Got(TypedDict):
    body: bytes
    error: BaseException | None
    x: str | None  # the x-scenario header


async def converse(base_url: str, name: str, fault: str | None, session: str) -> list[tuple[int, int, bytes]]:
    """A whole conversation like a harness: SDK retries for 429/529, our own retry for failed streams, tool
    results sent back. Returns (turn, attempt, bytes) of every streamed response."""
    sc = get_scenario(name)
    client = client_for(base_url, max_retries=2)
    messages: list[Any] = [{"role": "user", "content": sc.prompt}]
    seen: list[tuple[int, int, bytes]] = []
    try:
        for turn in range(len(sc.turns)):
            for _ in range(4):
                plan_guess = None
                hdr = {
                    "x-inspector-scenario": name,
                    "x-inspector-fault": fault or "none",
                    "x-inspector-session": session,
                }
                got: _Got = {"body": b"", "error": None, "x": None}
                try:
                    async with client.messages.with_streaming_response.create(
                        model=sc.model, max_tokens=sc.max_tokens, messages=messages, stream=True, extra_headers=hdr
                    ) as r:
                        got["x"] = x = r.http_response.headers["x-scenario"]
                        attempt = int(x.rsplit("attempt=", 1)[1])
                        plan_guess = render_faulted(sc, fault, turn, attempt, seed=seed_of(messages))
                        it = r.iter_bytes().__aiter__()
                        while True:
                            if plan_guess.end == "hang" and len(got["body"]) >= len(plan_guess.body):
                                break  # a stalled stream: the harness gives up (idle timeout) and retries
                            try:
                                got["body"] += await it.__anext__()
                            except StopAsyncIteration:
                                break
                except TRANSPORT_ERRORS as e:
                    got["error"] = e
                assert plan_guess is not None
                assert got["body"] == plan_guess.body, (name, fault, turn, attempt)
                seen.append((turn, attempt, got["body"]))
                ts = assemble(got["body"])
                if plan_guess.end == "eof" and ts.outcome != "error":
                    break
            msg = ts.final_message()
            messages.append({"role": "assistant", "content": msg["content"]})
            results = tool_results(msg)
            if results and turn + 1 < len(sc.turns):
                messages.append({"role": "user", "content": results})
            elif turn + 1 < len(sc.turns):
                messages.append({"role": "user", "content": "go on"})
    finally:
        await client.close()
    return seen


@pytest.mark.parametrize("name", ALL_SCENARIOS)
async def test_multi_turn_conversation_advances_with_tool_results(served: BackgroundServer, name: str) -> None:
    seen = await converse(served.base_url, name, None, f"conv-{name}")
    sc = get_scenario(name)
    assert sorted({t for t, _, _ in seen}) == list(range(len(sc.turns)))
    seed = seed_of([{"role": "user", "content": sc.prompt}])
    for turn, attempt, body in seen:
        assert body == render_turn(sc, turn, attempt, seed).body


@pytest.mark.parametrize(
    "fault", ["http_429,drop_event@turn", "stall:2@turn", "error_event:5@turn,crlf", "drop_byte:999@turn,bom"]
)
async def test_multi_turn_with_faults_retries_succeed(served: BackgroundServer, fault: str | None) -> None:
    seen = await converse(served.base_url, "parse_date", fault, f"conv-faults-{fault}")
    # every turn failed once (@turn: a stream fault on its first streamed attempt of each turn), then succeeded
    assert [(t, a) for t, a, _ in seen] == [(0, a0 := seen[0][1]), (0, a0 + 1), (1, a0), (1, a0 + 1)]


# ----------------------------------------------------------------------------------------------- history rules


def _assistant(*ids: str, text_first: bool = True) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "calling"}] if text_first else []
    content += [{"type": "tool_use", "id": i, "name": "read_file", "input": {"path": i}} for i in ids]
    return {"role": "assistant", "content": content}


def _results(*ids: str, text_before: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "here you go"}] if text_before else []
    content += [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
    return {"role": "user", "content": content}


U = {"role": "user", "content": "hi"}
VIOLATIONS: dict[str, tuple[list[Any], str]] = {
    "missing_tool_result": (
        [U, _assistant("toolu_a", "toolu_b"), _results("toolu_a")],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b",
    ),
    "missing_tool_result_at_end": ([U, _assistant("toolu_a")], "without `tool_result` blocks immediately after"),
    "results_not_in_next_message": (
        [
            U,
            _assistant("toolu_a"),
            {"role": "user", "content": "wait"},
            {"role": "assistant", "content": "ok"},
            _results("toolu_a"),
        ],
        "they must be in messages.2",
    ),
    "tool_result_not_first": (
        [U, _assistant("toolu_a"), _results("toolu_a", text_before=True)],
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message",
    ),
    "unexpected_tool_result": (
        [U, {"role": "assistant", "content": "hm"}, _results("toolu_zz")],
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_zz",
    ),
    "first_not_user": ([{"role": "assistant", "content": "hi"}, U], "first message must use the `user` role"),
    "bad_role": ([U, {"role": "system", "content": "x"}], "messages.1.role"),
    "empty_messages": ([], "at least one message"),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
async def test_history_violation_gives_its_400(served: BackgroundServer, case: str) -> None:
    messages, text = VIOLATIONS[case]
    kind = case.removesuffix("_at_end")
    violation = history_violation(messages)
    assert violation is not None and violation.kind == kind
    client = client_for(served.base_url)
    try:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                messages=messages,
                stream=True,
                extra_headers={"x-inspector-session": "hist"},
            )
    finally:
        await client.close()
    err = info.value.body
    assert isinstance(err, dict) and info.value.status_code == 400
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert text in err["error"]["message"]


def test_valid_histories_pass() -> None:
    ok = [U, _assistant("toolu_a", "toolu_b"), _results("toolu_b", "toolu_a")]  # results by id, any order
    assert history_violation(ok) is None
    assert (
        history_violation(
            [
                U,
                _assistant("toolu_a", text_first=False),
                _results("toolu_a"),
                {"role": "assistant", "content": "done"},
                U,
            ]
        )
        is None
    )


# ----------------------------------------------------------------------------------------------- determinism, parity


async def test_same_requests_give_same_bytes_across_servers() -> None:
    async def run_once() -> list[bytes]:
        with BackgroundServer(ServeApp(speed=math.inf)) as srv:
            seen = await converse(srv.base_url, "parse_date", "http_429,drop_event@turn", "det")
            seen += await converse(srv.base_url, "thinking", None, "det")
        return [b for _, _, b in seen]

    assert await run_once() == await run_once()


async def test_reset_restarts_attempt_counting(served: BackgroundServer) -> None:
    client = client_for(served.base_url)
    try:
        a = await fetch(client, scenario="weather", fault="drop_event", session="reset")
        b = await fetch(client, scenario="weather", fault="drop_event", session="reset")
        async with httpx2.AsyncClient(base_url=served.base_url) as h:
            assert (await h.post("/inspector/reset")).status_code == 200
        c = await fetch(client, scenario="weather", fault="drop_event", session="reset")
    finally:
        await client.close()
    assert a["error"] is not None and b["error"] is None  # attempt 0 drops, the retry (attempt 1) completes
    assert c["body"] == a["body"] and c["error"] is not None


@pytest.mark.parametrize(
    "fault",
    [None, "bom", "drop_byte:300", "relay_buffer,crlf", "split_events,padded", "http_529,error_event", "cr,slow_drip"],
)
async def test_in_process_and_served_bytes_are_identical(served: BackgroundServer, fault: str | None) -> None:
    sc = get_scenario("parse_date")
    inproc = FaultedScenarioServer(sc, fault, Pacer(math.inf), seed_ids=True)  # (ids seeded per conversation: serve's)
    c_in = make_client(inproc, max_retries=0)
    c_net = client_for(served.base_url)
    try:
        for attempt in range(2):
            a = await fetch(c_in, scenario="parse_date", fault=fault, session=f"parity-{fault}")
            b = await fetch(c_net, scenario="parse_date", fault=fault, session=f"parity-{fault}")
            assert a["status"] == b["status"]
            want = render_faulted(sc, fault, 0, attempt, seed=SEED)
            assert a["body"] == want.body  # in process: the rendered bytes
            # served: the same bytes; an error body carries the request id unique to its response
            assert _same_but_request_id(b["body"], want.body, b["headers"], want.headers)
            if a["status"] == 200:  # same reads, in process
                served_plan = inproc.responses[-1].plan
                assert served_plan is not None
                assert [r.data for r in served_plan.reads] == [
                    r.data for r in render_faulted(sc, fault, 0, attempt, seed=SEED).reads
                ]
    finally:
        await c_in.close()
        await c_net.close()


async def test_read_grouping_survives_the_socket() -> None:
    """With real pacing each planned read arrives as its own network read."""
    sc = Scenario(
        name="paced",
        description="paced reads",
        prompt="hi",
        seed=5,
        turns=[
            TurnScript(
                blocks=[TextBlock("one two three four five six seven eight nine ten", chunk=5)],
                pacing=Pacing(ttfb=0.02, event_gap=0.03, events_per_read=2),
            )
        ],
    )
    plan = render_turn(sc, 0, 0, SEED)
    with BackgroundServer(ServeApp(sc, speed=1.0)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
            async with h.stream(
                "POST", "/v1/messages", json={"model": sc.model, "max_tokens": 5, "stream": True, "messages": USER}
            ) as r:
                chunks = [c async for c in r.aiter_raw()]
    assert chunks == [r.data for r in plan.reads]


# ----------------------------------------------------------------------------------------------- binding, CLI


def test_loopback_only_by_default(served: BackgroundServer) -> None:
    assert served.address[0] == "127.0.0.1"
    import argparse

    from inspector.cli import proxy, serve

    sub = argparse.ArgumentParser().add_subparsers()
    assert serve.add_parser(sub).parse_args([]).host == "127.0.0.1"
    assert proxy.add_parser(sub).parse_args([]).listen == ("127.0.0.1", 8787)


def test_cli_prints_base_url_and_serves_on_loopback() -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.cli.serve",
            "--port",
            "0",
            "--speed",
            "max",
            "--scenario",
            "weather",
            "--fault",
            "bom",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        m = re.match(r"ANTHROPIC_BASE_URL=(http://127\.0\.0\.1:(\d+))$", lines[1].strip())
        assert m, lines
        assert "scenario weather, faults bom" in lines[0]
        # the line is printed once the socket listens: connect at once, no retry
        socket.create_connection(("127.0.0.1", int(m.group(2))), timeout=5).close()
        with httpx2.Client(base_url=m.group(1), timeout=10, headers=API_HEADERS) as h:
            body = {"model": get_scenario("weather").model, "max_tokens": 5, "stream": True, "messages": USER}
            r = h.post("/v1/messages", json=body)
        assert r.status_code == 200
        assert r.content == render_faulted(get_scenario("weather"), "bom", 0, 0, seed=SEED).body
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert "-> 200 stream" in err and KEY not in err
    assert f"ANTHROPIC_BASE_URL={m.group(1)}" in err.splitlines()  # the address, in full, on stderr too


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert serve_main(["--scenario", "nope"]) == 2
        assert serve_main(["--fault", "nope"]) == 2
    capsys.readouterr()
    # --record is the dashboard's proxy's (serve alone records nothing): headless it is a one-line usage error
    assert serve_main(["--record", str(tmp_path / "r.jsonl")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("--record goes with --tui (headless: inspector watch --serve ... --record, or proxy --record)")
    )
    assert serve_main(["--tui", "--record", str(tmp_path / "missing" / "r.jsonl")]) == 2
    assert "cannot write the recording" in capsys.readouterr().err


def _no_server(*_a: object, **_k: object) -> None:
    raise AssertionError("nothing may be bound or served")


@pytest.mark.parametrize("port", ["70000", "65536", "-1"])
@pytest.mark.parametrize("tui", [False, True])
def test_cli_port_out_of_range_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], port: str, tui: bool
) -> None:
    import inspector.cli.serve as serve

    monkeypatch.setattr(serve, "bind_socket", _no_server)
    monkeypatch.setattr(serve, "run_foreground", _no_server)
    monkeypatch.setattr(serve, "_cmd_tui", _no_server)
    assert serve_main(["--port", port, *(["--tui"] if tui else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inspector serve: --port must be 0..65535")
    assert port in err


def test_cli_tui_validates_without_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import types

    import inspector.cli.serve as serve
    import inspector.net.server as server
    import inspector.sessions.watch as watch

    sessions: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    dashboards: list[tuple[Callable[[], object], dict[str, Any]]] = []
    fake_tui = types.ModuleType("inspector.tui.app")

    def run_dashboard(factory: Callable[[], object], **kw: Any) -> None:
        dashboards.append((factory, kw))

    fake_tui.run_dashboard = run_dashboard  # type: ignore[attr-defined]  # (a stand-in module, built here)
    monkeypatch.setitem(sys.modules, "inspector.tui.app", fake_tui)

    def serve_session(*a: Any, **kw: Any) -> str:
        sessions.append((a, kw))
        return "session"

    monkeypatch.setattr(watch, "serve_session", serve_session)
    probes: list[tuple[str, int]] = []

    class _Probe:  # the port is only checked (bound and closed at once): nothing listens, nothing is served
        def __init__(self, host: str, port: int) -> None:
            probes.append((host, port))
            self.closed = False

        def close(self) -> None:
            self.closed = True

        def getsockname(self) -> tuple[str, int]:  # the ephemeral port the probe got: the session binds that one
            return ("127.0.0.1", 45678)

    monkeypatch.setattr(serve, "bind_socket", _Probe)
    monkeypatch.setattr(server.BackgroundServer, "start", _no_server)

    assert serve_main(["--tui", "--scenario", "nope"]) == 2
    assert serve_main(["--tui", "--fault", "cr,crlf"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "unknown scenario" in err[0] and "cannot be combined" in err[1]
    assert sessions == [] and dashboards == []

    assert serve_main(["--tui", "--scenario", "weather", "--fault", "bom", "--port", "0", "--speed", "max"]) == 0
    assert sessions == [] and len(dashboards) == 1  # validated, nothing started: the dashboard starts the session
    # the address is printed in full on stderr before the dashboard opens
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:45678" in capsys.readouterr().err.splitlines()
    factory, kw = dashboards[0]
    assert kw["source"] == {"type": "serve", "name": "weather"}
    assert factory() == "session"
    ((args, kwargs),) = sessions
    assert args == ("weather", parse_faults("bom")) and kwargs["port"] == 45678 and kwargs["speed"] == math.inf
    assert kwargs["record"] is None
    assert probes == [("127.0.0.1", 0)]

    def busy(host: str, port: int) -> None:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(serve, "bind_socket", busy)
    assert serve_main(["--tui", "--port", "8123"]) == 2  # a busy port: one line, before any dashboard
    assert "cannot listen on 127.0.0.1:8123" in capsys.readouterr().err and len(dashboards) == 1


# ----------------------------------------------------------------------------------------------- the proxy (CLI, shared code)


def test_proxy_record_to_an_unwritable_path_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "no-such-dir" / "rec.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inspector.cli.proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
            "--headless",
            "--record",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("inspector proxy: cannot write the recording")
    assert str(bad) in proc.stderr and "Traceback" not in proc.stderr
    assert "ANTHROPIC_BASE_URL" not in proc.stdout  # never started serving
    assert not bad.exists()


def test_proxy_record_problem(tmp_path: Path) -> None:
    from inspector.cli.common import record_problem

    assert record_problem(tmp_path / "ok.jsonl") is None
    assert "cannot write the recording" in (record_problem(tmp_path / "missing" / "x.jsonl") or "")
    assert "cannot write the recording" in (record_problem(tmp_path) or "")  # a directory  # a directory


class _Upstream:
    """A MockTransport upstream: answers at once, or never (until cancelled); notes what happened."""

    def __init__(self, answer: bool) -> None:
        self.answer, self.started, self.cancelled, self.closed = answer, False, False, False

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.started = True
        if not self.answer:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        upstream = self

        class Body(httpx2.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                yield b"event: ping\ndata: {}\n\n"

            async def aclose(self) -> None:
                upstream.closed = True

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())


@pytest.mark.parametrize("answer", [False, True], ids=["pending", "answered"])
async def test_proxy_does_not_leave_the_upstream_request_behind_when_begin_turn_raises(
    monkeypatch: pytest.MonkeyPatch, answer: bool
) -> None:
    from inspector.net.proxy import ProxyApp

    up = _Upstream(answer)
    proxy = ProxyApp("http://upstream.test", transport=httpx2.MockTransport(up.handler))

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("bookkeeping failed")

    monkeypatch.setattr(proxy.tracker, "begin", broken)
    body = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True, "messages": USER})
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    tasks_before = asyncio.all_tasks()
    with pytest.raises(RuntimeError, match="bookkeeping failed"):
        await proxy._handle(scope, receive, send, [])
    for _ in range(5):
        await asyncio.sleep(0)
    assert up.started
    assert up.cancelled if not answer else up.closed  # cancelled while waiting / its response closed
    # (the proxy's one shutdown watcher, shared by every exchange, lives until it closes: not the request's)
    shared = {proxy._stop.task} if proxy._stop is not None else set()
    assert [t for t in asyncio.all_tasks() - tasks_before - shared if not t.done()] == []
    await proxy.aclose()


def test_serve_and_proxy_share_their_shutdown_signal() -> None:
    from inspector.net.proxy import ProxyApp
    from inspector.net.server import Closable

    assert issubclass(ServeApp, Closable) and issubclass(ProxyApp, Closable)
    for name in ("closing", "begin_close"):
        assert getattr(ServeApp, name) is getattr(ProxyApp, name) is getattr(Closable, name)
    ProxyApp("http://x.test").begin_close()  # before it ever ran: a no-op


def test_proxy_has_no_recording_code_of_its_own() -> None:
    """The proxy only publishes: its recording is a Recorder subscribed to its bus (one recording path; the import
    contract "The proxy records only through the Recorder" keeps RecordingWriter out of net/), and its observations
    are masked in one place, its RedactingPublisher."""
    import inspector.net.proxy as proxy
    from inspector.observe.redacting import RedactingPublisher
    from inspector.record.recorder import Recorder

    for gone in ("_record", "_writer", "_sync", "_late_secrets", "_obs_line", "writer"):
        assert not hasattr(proxy.ProxyApp, gone), gone
    app = proxy.ProxyApp("http://x.test", record=io.BytesIO())
    assert isinstance(app.open_recording(), Recorder) and app.recorder in app._bus.subscribers
    assert isinstance(app._redacting, RedactingPublisher) and app._redacting.bus is app._bus


async def test_a_key_learned_after_the_recording_opened_and_echoed_across_two_reads_is_not_in_any_dump(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The CLI opens the recording before any request, so every key is learned late. Upstream echoes it split
    across two network reads: no reader of the recording may join it back (the proxy used to mask each read on its
    own, and `dump` printed the key whole)."""
    from inspector.cli import main
    from inspector.net.proxy import ProxyApp
    from inspector.testing.secrets import KeyEchoedInTwoReads

    upstream = KeyEchoedInTwoReads(KEY)  # (its second read once the first reached the client)
    body = upstream.body

    record = tmp_path / "late.jsonl"
    proxy = ProxyApp("http://127.0.0.1:9", record=record)
    proxy.open_recording()
    with BackgroundServer(upstream) as up, BackgroundServer(proxy) as px:
        proxy.upstream = up.base_url
        request = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        async with httpx2.AsyncClient(timeout=30) as client:
            async with client.stream(
                "POST", f"{px.base_url}/v1/messages", content=orjson.dumps(request), headers={"x-api-key": KEY}
            ) as r:
                chunks = r.aiter_raw()
                got = await anext(chunks)  # the first read has reached the client (and the proxy's queue)
                upstream.release()
                got += b"".join([c async for c in chunks])
    proxy.close()
    assert got == body  # the client gets upstream's bytes
    assert KEY.encode() not in record.read_bytes()
    for argv in (["dump", str(record)], ["dump", str(record), "--events", "--json"], ["dump", str(record), "--json"]):
        capsysbinary.readouterr()
        assert await asyncio.to_thread(main, argv) == 0
        out = capsysbinary.readouterr().out.decode()
        assert KEY not in out and KEY not in out.replace("\n", ""), argv


async def test_proxy_records_lower_cased_headers_without_credentials_and_redacts_late_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspector.net.proxy as proxy_mod
    import inspector.net.turns as turns_mod
    from inspector.core.redaction import clean_headers
    from inspector.record.recording import read_recording

    calls = {"filter_headers": 0}
    real_filter = clean_headers  # (what turns calls, patched there)

    def filter_spy(*a: Any, **k: Any) -> dict[str, str]:
        calls["filter_headers"] += 1
        return real_filter(*a, **k)

    monkeypatch.setattr(turns_mod, "clean_headers", filter_spy)
    other = "sk-ant-api03-OTHER-CANARY-1111111111"
    record = tmp_path / "rec.jsonl"
    with BackgroundServer(ServeApp(speed=math.inf)) as upstream:
        proxy = proxy_mod.ProxyApp(upstream.base_url, record=record)
        proxy.open_recording()  # opened before any key is seen: every key is learned late
        with BackgroundServer(proxy) as px:
            client = client_for(px.base_url, default_headers={"Anthropic-Api-Key": other, "X-Custom-Header": "Kept"})
            try:
                async with client.messages.stream(
                    model="claude-sonnet-4-6",
                    max_tokens=10,
                    extra_headers={"x-inspector-scenario": "weather"},
                    messages=[{"role": "user", "content": f"my keys are {KEY} and {other}"}],
                ) as s:
                    await s.get_final_message()
            finally:
                await client.close()
        # learned by the one redaction point, before the recorder saw anything of the request
        assert {KEY, other} <= set(proxy._redacting.secrets)
    raw = record.read_bytes()
    assert KEY.encode() not in raw and other.encode() not in raw and b"CANARY" not in raw
    assert b"my keys are [redacted] and [redacted]" in raw
    rec = read_recording(record)
    att = next(rec.attempts())
    assert att.request is not None and att.response is not None
    headers = att.request["headers"]
    assert all(k == k.lower() for k in headers) and headers["x-custom-header"] == "Kept"
    for name in ("x-api-key", "authorization", "anthropic-api-key"):
        assert name not in headers
    assert all(k == k.lower() for k in att.response["headers"])
    assert calls["filter_headers"] >= 2


@pytest.mark.parametrize("stream", [True, False])
async def test_an_exchange_is_listed_before_its_body_ends(stream: bool) -> None:
    """A client that has a whole answer finds it in /inspector/requests: the exchange is noted before the body's end
    is sent, not after (CI saw one of two turns listed: a GET on the same keep-alive connection was answered
    between the last send and the note). The ASGI app is driven directly, each message checked as it is sent."""
    app = ServeApp("weather", speed=math.inf)
    body = {"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    raw = orjson.dumps({**body, "stream": stream})
    listed_at_end: list[int] = []
    requests = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive() -> Message:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # a client still connected: no disconnect
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            listed_at_end.append(len(app.exchanges))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in API_HEADERS.items()]
        + [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    await app.app(scope, receive, send)
    assert listed_at_end == [1]
    [ex] = app.exchanges
    assert (ex.status, ex.end) == (200, "eof") and ex.bytes > 0

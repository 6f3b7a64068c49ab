"""serve and the anthropic SDK's beta message threads (its tool runner's default): a ``thread.continue`` request
sends only the tool results and names the reply it continues; serve answers it as the whole history that reply
stands for. And every conversation gets message ids of its own."""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from anthropic import beta_async_tool

from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.fakeapi import FakeApi, HeldThread, message_seed, messages_decision
from inspector.scenarios.render import render_turn

KEY = "sk-ant-test-threads"
API_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
_TLS = ssl.create_default_context()


@pytest.fixture
def served() -> Iterator[tuple[BackgroundServer, ServeApp]]:
    app = ServeApp("weather", speed=math.inf)
    with BackgroundServer(app) as srv:
        yield srv, app


def _client(base_url: str, bodies: list[dict[str, Any]]) -> anthropic.AsyncAnthropic:
    """An SDK client whose request bodies are kept in ``bodies``."""

    async def keep(request: httpx2.Request) -> None:
        if request.url.path.endswith("/v1/messages"):
            bodies.append(orjson.loads(request.content))

    http = httpx2.AsyncClient(verify=_TLS, timeout=httpx2.Timeout(30.0), event_hooks={"request": [keep]})
    return anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0, http_client=http)


def _weather_tool(calls: list[dict[str, Any]]) -> Any:
    @beta_async_tool
    async def get_weather(location: str, unit: str = "celsius") -> str:
        """Get the current weather in a given location.

        Args:
            location: City and country, e.g. Paris, France
            unit: celsius or fahrenheit
        """
        calls.append({"location": location, "unit": unit})
        return f"RESULT-{location}-18-{unit}"

    return get_weather


async def _run_tool_runner(base_url: str, prompt: str, bodies: list[dict[str, Any]]) -> list[Any]:
    """The SDK's beta tool runner (thread mode, its default) against serve, to its end (at most 6 replies)."""
    calls: list[dict[str, Any]] = []
    client = _client(base_url, bodies)
    replies: list[Any] = []
    try:
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            tools=[_weather_tool(calls)],
            messages=[{"role": "user", "content": prompt}],
        )
        async for message in runner:
            replies.append(message)
            assert len(replies) <= 6, "serve answered the same turn over and over"
    finally:
        await client.close()
    return replies


@pytest.mark.parametrize("history_check", [True, False], ids=["history-check", "no-history-check"])
async def test_tool_runner_thread_mode_gets_the_scenario_to_its_end(history_check: bool) -> None:
    """Turn 1's tool call runs, its result goes back on a thread continue (only the tool result sent), serve
    answers turn 2 from the whole history, and the run ends. Before: a 400 "unexpected tool_use_id" (the
    continue's history held no tool_use), and without the history check turn 1 again, forever."""
    app = ServeApp("weather", speed=math.inf, validate_history=history_check)
    bodies: list[dict[str, Any]] = []
    with BackgroundServer(app) as srv:
        replies = await _run_tool_runner(srv.base_url, "What's the weather like in Paris right now?", bodies)
    assert [r.stop_reason for r in replies] == ["tool_use", "end_turn"]
    assert len(bodies) == 2
    assert bodies[0]["thread"] == {"type": "create"}
    assert bodies[1]["thread"] == {"type": "continue", "previous_message_id": replies[0].id}
    # the continue carries the tool result only; serve answered it as turn 2 of the whole history
    sent = bodies[1]["messages"]
    assert len(sent) == 1 and sent[0]["content"][0]["type"] == "tool_result"
    assert "RESULT-Paris" in orjson.dumps(sent).decode()
    assert [(ex.turn, ex.status) for ex in app.exchanges] == [(0, 200), (1, 200)]
    held = app.api.held_thread(replies[1].id)
    assert held is not None
    assert [m["role"] for m in held.messages] == ["user", "assistant", "user", "assistant"]
    assert "RESULT-Paris" in orjson.dumps(held.messages[2]).decode()
    # the replies are the scenario's turns, with the conversation's ids
    sc = get_scenario("weather")
    seed = message_seed({"messages": bodies[0]["messages"]})
    for turn, reply in enumerate(replies):
        start = render_turn(sc, turn, 0, seed).events[0][1]
        assert reply.id == start["message"]["id"]


async def test_two_concurrent_conversations_get_distinct_message_ids(
    served: tuple[BackgroundServer, ServeApp],
) -> None:
    """Two tool runners at once, each on its own thread: every reply has an id of its own (before, both turn 1s were
    the same msg_01...), so each continue resumes its own conversation; the same conversation again gets the same
    ids (seeded, not random)."""
    srv, app = served
    a_bodies: list[dict[str, Any]] = []
    b_bodies: list[dict[str, Any]] = []
    a, b = await asyncio.gather(
        _run_tool_runner(srv.base_url, "What's the weather in Paris?", a_bodies),
        _run_tool_runner(srv.base_url, "What's the weather in Lyon?", b_bodies),
    )
    assert [r.stop_reason for r in a] == [r.stop_reason for r in b] == ["tool_use", "end_turn"]
    ids = [r.id for r in (*a, *b)]
    assert len(set(ids)) == 4, ids
    tool_ids = [blk.id for r in (a[0], b[0]) for blk in r.content if blk.type == "tool_use"]
    assert len(set(tool_ids)) == 2
    with BackgroundServer(ServeApp("weather", speed=math.inf)) as fresh:  # (on this one it would be a retry)
        again = await _run_tool_runner(fresh.base_url, "What's the weather in Paris?", [])
    assert [r.id for r in again] == [r.id for r in a]


async def test_plain_requests_of_two_conversations_get_distinct_ids(served: tuple[BackgroundServer, ServeApp]) -> None:
    """Without threads too: each conversation (its first message) seeds its ids; its later turns keep the seed."""
    srv, _ = served
    async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:

        async def first(prompt: str) -> dict[str, Any]:
            body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": prompt}]}
            r = await h.post("/v1/messages", json=body)
            assert r.status_code == 200
            out: dict[str, Any] = r.json()
            return out

        one, two = await asyncio.gather(first("Paris?"), first("Lyon?"))
    assert one["id"] != two["id"]
    assert one["content"][1]["id"] != two["content"][1]["id"]  # (the tool_use ids too)


async def test_unknown_previous_message_id_is_thread_not_found(served: tuple[BackgroundServer, ServeApp]) -> None:
    """A continue naming a reply serve does not hold: the API's 404 with ``error.details.error_code`` =
    ``thread_not_found`` (what the SDK replays the whole history on), one line, never a turn."""
    srv, app = served
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "thread": {"type": "continue", "previous_message_id": "msg_01nope"},
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}]}],
    }
    async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
        r = await h.post("/v1/messages", json=body)
        bad = await h.post("/v1/messages", json={**body, "thread": {"type": "continue"}})
        worse = await h.post("/v1/messages", json={**body, "thread": {"type": "fork"}})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["type"] == "not_found_error"
    assert err["details"] == {"error_code": "thread_not_found"}
    assert "msg_01nope" in err["message"] and "\n" not in err["message"]
    assert r.json()["request_id"] == r.headers["request-id"]
    assert bad.status_code == 400 and bad.json()["error"]["message"] == "thread.previous_message_id: Field required"
    assert worse.status_code == 400 and "thread.type" in worse.json()["error"]["message"]
    assert [ex.turn for ex in app.exchanges] == [None, None, None]


async def test_a_forgotten_thread_is_replayed_by_the_sdk(served: tuple[BackgroundServer, ServeApp]) -> None:
    """serve forgets the thread between the turns (a restart): the continue gets thread_not_found, the SDK sends the
    whole history again under a new thread, and turn 2 is served from it."""
    srv, app = served
    bodies: list[dict[str, Any]] = []
    forget = app.api.remember_reply

    def remember_then_forget(decision: Any, reply: Any) -> None:
        forget(decision, reply)
        if decision.turn == 0:
            app.api.threads.clear()

    app.api.remember_reply = remember_then_forget  # type: ignore[method-assign]
    replies = await _run_tool_runner(srv.base_url, "What's the weather like in Paris right now?", bodies)
    assert [r.stop_reason for r in replies] == ["tool_use", "end_turn"]
    assert [b["thread"]["type"] for b in bodies] == ["create", "continue", "create"]
    assert [(ex.turn, ex.status) for ex in app.exchanges] == [(0, 200), (None, 404), (1, 200)]


def test_a_continue_is_checked_as_the_whole_history() -> None:
    """The core: a continue's messages follow the held history; a tool result that answers no tool_use of it is
    the history 400; the turn and the attempt digest are the whole history's."""
    assistant = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}]}
    held = HeldThread([{"role": "user", "content": "hi"}, assistant], "seed1")
    api = FakeApi()
    api.threads["msg_1"] = held
    ok = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"}
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 5,
        "thread": {"type": "continue", "previous_message_id": "msg_1"},
        "messages": [{"role": "user", "content": [ok]}],
    }
    d = api.check(body)
    assert not d.rejected and d.turn == 1 and d.seed == "seed1" and d.thread == "continue"
    assert d.messages == [*held.messages, *body["messages"]]
    wrong = {**body, "messages": [{"role": "user", "content": [{**ok, "tool_use_id": "toolu_b"}]}]}
    assert api.check(wrong).status == 400
    unknown = {**body, "thread": {"type": "continue", "previous_message_id": "msg_2"}}
    assert api.check(unknown).status == 404
    # lenient (the in-process server) still resolves the thread; a malformed thread is then no thread
    assert messages_decision(body, lenient=True, held_thread=api.held_thread).turn == 1
    assert messages_decision({**body, "thread": 3}, lenient=True, validate_history=False).turn == 0


def test_held_threads_stay_within_a_byte_budget_however_big_or_many() -> None:
    """Hostile input: every threaded reply kept its whole history (up to --max-body, 32 MiB, parsed) for up to
    10,000 replies, gigabytes for a client that sends big threaded requests. What the held threads keep is bounded by
    THREAD_BYTES: the oldest are forgotten (a continue of one is the API's thread_not_found, which the SDK survives
    by sending the whole history again), the newest is kept whatever its size."""
    from inspector.scenarios import fakeapi
    from inspector.scenarios.fakeapi import THREAD_BYTES

    api = FakeApi()
    big = "x" * (THREAD_BYTES // 5)  # five of them are over the budget
    ids = []
    for n in range(12):
        body: dict[str, Any] = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 5,
            "thread": {"type": "create"},
            "messages": [{"role": "user", "content": f"{n} {big}"}],
        }
        d = api.check(body)
        assert not d.rejected and d.thread_bytes > THREAD_BYTES // 5
        api.remember_reply(d, {"id": f"msg_{n}", "content": [{"type": "text", "text": "ok"}]})
        ids.append(f"msg_{n}")
        assert api.thread_bytes == sum(h.size for h in api.threads.values()) <= THREAD_BYTES
    assert list(api.threads) == ids[-4:]  # (the four newest fit)
    forgotten = {**body, "thread": {"type": "continue", "previous_message_id": "msg_0"}, "messages": []}
    d = api.check(forgotten)
    assert d.status == 404 and (d.details or {}).get("error_code") == fakeapi.THREAD_NOT_FOUND
    # one reply bigger than the whole budget is still kept (the newest), alone
    huge = {**body, "thread": {"type": "create"}, "messages": [{"role": "user", "content": "y" * (THREAD_BYTES + 1)}]}
    api.remember_reply(api.check(huge), {"id": "msg_huge", "content": []})
    assert list(api.threads) == ["msg_huge"] and api.thread_bytes == api.threads["msg_huge"].size

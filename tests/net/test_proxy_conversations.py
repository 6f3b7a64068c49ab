"""`inspector proxy` with many conversations at once (issue 21 §2): requests grouped by conversation, turns counted
per conversation, tool calls inferred within their conversation, side requests never turns, and a client's
immediate resend of a failed stream is the next attempt of the same turn. Real sockets on loopback, `inspector
serve` upstream."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net.proxy import ProxyApp, format_exchange
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.net.turns import ProxyExchange, Track, TurnTracker
from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.testing.hyp import examples
from inspector.testing.serve import API_HEADERS

KEY = "sk-ant-api03-CANARY-conv-0123456789abcdefghijkl"
CITIES = ("Paris", "Rome", "Oslo")


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, echo_model=False)) as srv:
        yield srv


def sdk(base_url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=base_url, api_key=KEY, max_retries=0, http_client=httpx2.AsyncClient(timeout=httpx2.Timeout(60.0))
    )


async def _agent(
    client: anthropic.AsyncAnthropic, city: str, barrier: asyncio.Barrier
) -> tuple[list[str], list[dict[str, Any]]]:
    """Two turns of a weather agent for one city: the tool calls of turn 1 are answered in turn 2. The barrier
    makes the three agents' requests interleave (all first turns, then all second turns)."""
    hdr = {"x-inspector-scenario": "weather"}
    messages: list[Any] = [{"role": "user", "content": f"What is the weather in {city}?"}]
    await barrier.wait()
    async with client.messages.stream(model="m", max_tokens=100, messages=messages, extra_headers=hdr) as s:
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
    async with client.messages.stream(model="m", max_tokens=100, messages=messages, extra_headers=hdr) as s:
        await s.get_final_message()
    return [b.id for b in uses], messages


async def test_three_concurrent_conversations_are_grouped_with_their_tools(
    upstream: BackgroundServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from inspector.cli.headless import ProgressPrinter
    from inspector.testing.loop import Lines

    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    progress = Lines()
    bus.subscribe(ProgressPrinter(progress))  # type: ignore[arg-type]  # (what `inspector watch --headless` prints)
    record = tmp_path / "three.jsonl"
    lines: list[str] = []
    proxy = ProxyApp(upstream.base_url, record=record, bus=bus)
    proxy.on_exchange = lambda ex: lines.append(format_exchange(ex, True))
    with BackgroundServer(proxy) as px:
        client = sdk(px.base_url)
        try:
            barrier = asyncio.Barrier(len(CITIES))
            done = await asyncio.gather(*(_agent(client, c, barrier) for c in CITIES))
            ids = [d[0] for d in done]
            # a count_tokens call of the Rome conversation (its history and a new question): a side request
            rome = [*done[1][1], {"role": "assistant", "content": "18 C"}, {"role": "user", "content": "And Milan?"}]
            await client.post(
                "/v1/messages/count_tokens",
                body={"model": "m", "messages": rome},
                cast_to=httpx2.Response,
            )
        finally:
            await client.close()
    assert all(ids) and all(len(i) >= 1 for i in ids)
    assigned = [o for o in got if isinstance(o, O.ConversationAssigned)]
    assert len(assigned) == 6 and sorted(o.turn for o in assigned) == list(range(6))  # global turns stay unique
    by_conv: dict[str, list[O.ConversationAssigned]] = {}
    for o in assigned:
        by_conv.setdefault(o.conversation, []).append(o)
    assert len(by_conv) == 3
    for convs in by_conv.values():
        assert [(o.conversation_turn, o.attempt, o.how) for o in convs] == [(0, 0, "new"), (1, 0, "continues")]
    # each conversation's first request names its city: its second turn is the same conversation
    starts = {o.turn: o for o in got if isinstance(o, O.AttemptStarted)}
    for convs in by_conv.values():
        first_city = starts[convs[0].turn].body["messages"][0]["content"]
        assert starts[convs[1].turn].body["messages"][0]["content"] == first_city
    # tool results matched within their conversation only: each to the first turn of the same conversation
    inferred = [o for o in got if isinstance(o, O.ToolExecutionInferred)]
    assert inferred and all(o.status == "result" and o.reason is None for o in inferred)
    turn_conv = {o.turn: (o.conversation, o.conversation_turn) for o in assigned}
    for inf in inferred:
        conv, ct = turn_conv[inf.turn]
        assert inf.from_turn is not None
        assert ct == 1 and turn_conv[inf.from_turn] == (conv, 0)
    assert len(inferred) == sum(len(i) for i in ids)
    assert not any("unknown" in line for line in lines)
    tagged = [line for line in progress.text() if "] turn 2 (#" in line]
    assert len(tagged) == 3 and {line.split("[", 1)[1].split("]")[0] for line in tagged} == set(by_conv)
    assert sum(line.startswith("[c") and " turn 2 " in line for line in lines) == 3
    # the side request: listed with its conversation, never a turn
    side = [o for o in got if isinstance(o, O.ExchangeForwarded)]
    assert [(o.path, o.side) for o in side] == [("/v1/messages/count_tokens", "count_tokens")]
    rome_conv = next(
        c for c, convs in by_conv.items() if "Rome" in starts[convs[0].turn].body["messages"][0]["content"]
    )
    assert side[0].conversation == rome_conv
    assert any(line.startswith(f"[{rome_conv}] count_tokens: POST /v1/messages/count_tokens") for line in lines)
    # the recording carries the conversation of every attempt, and the side request with its conversation
    rec = read_recording(record)
    conv_lines = [o for o in rec.observations if o.get("type") == "conversation"]
    assert sorted((o["turn"], o["conversation"], o["conversation_turn"]) for o in conv_lines) == sorted(
        (o.turn, o.conversation, o.conversation_turn) for o in assigned
    )
    assert sorted(a.turn for a in rec.attempts()) == list(range(6))
    ex_lines = [o for o in rec.observations if o.get("type") == "proxy_exchange"]
    assert [(o["conversation"], o["side"]) for o in ex_lines] == [(rome_conv, "count_tokens")]
    # `serve --recording`'s source answers each conversation's turn k with that conversation's k-th turn
    from inspector.net.recorded import RecordingSource

    source = RecordingSource.load(record)
    assert len(source.turns) == 2 and len(source.conversations) == 3
    for att in rec.attempts():
        conv, ct = turn_conv[att.turn]
        assert att.request is not None
        served = source.conversation_for(att.request["body"])
        assert served.plan(ct, 0).body == att.data and conv in served.name
    # and `dump --json` shows each conversation apart, its two turns complete
    from inspector.cli import main

    code = main(["dump", "--json", str(record)])
    doc = orjson.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted((c["id"], c["turns"], c["ok"]) for c in doc["conversations"]) == [
        (c, 2, True) for c in sorted(by_conv)
    ]
    assert {c["id"]: [r["side"] for r in c["side_requests"]] for c in doc["conversations"]}[rome_conv] == [
        "count_tokens"
    ]


async def test_an_unmatched_tool_result_says_why(upstream: BackgroundServer) -> None:
    """A conversation the proxy joins midway (its first request already carries a tool_result): the result is
    unknown, and the line says why (never a bare ``tool ? toolu_...: unknown``)."""
    lines: list[str] = []
    proxy = ProxyApp(upstream.base_url, on_exchange=lambda ex: lines.append(format_exchange(ex)))
    messages = [
        {"role": "user", "content": "What is the weather in Lima?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_lima", "name": "get_weather", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_lima", "content": "20 C"}]},
    ]
    with BackgroundServer(proxy) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            body = {"model": "m", "max_tokens": 50, "stream": True, "messages": messages}
            r = await h.post("/v1/messages", content=orjson.dumps(body), headers={"x-inspector-scenario": "weather"})
    assert r.status_code == 200
    unknown = [line for line in lines if "toolu_lima" in line]
    assert len(unknown) == 1 and "unknown (this request starts conversation c1" in unknown[0]


# ----------------------------------------------------------------------------------------------- immediate resend


async def _close_then_resend(
    h: httpx2.AsyncClient, body: dict[str, Any], hdr: dict[str, str], prefix: int
) -> httpx2.Response:
    """What langchain-anthropic and pydantic-ai do after a read timeout: read what came, close the stream, and
    send the same body again at once (no pause for the proxy to see the close first)."""
    async with h.stream("POST", "/v1/messages", content=orjson.dumps(body), headers=hdr) as r:
        got = b""
        async for chunk in r.aiter_raw():
            got += chunk
            if len(got) >= prefix:
                break
    return await h.post("/v1/messages", content=orjson.dumps(body), headers=hdr)


def _tool_results(sse: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    from inspector.stream.assembler import assemble

    msg = assemble(sse).final_message()
    uses = [b for b in msg["content"] if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses]
    return {"role": "assistant", "content": msg["content"]}, {"role": "user", "content": results or "go on"}


async def test_an_immediate_resend_is_the_next_attempt_and_the_recording_dumps_and_serves(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from inspector.net.faults import render_faulted
    from inspector.net.recorded import RecordingSource
    from inspector.scenarios.bundled import get_scenario

    prefix = len(render_faulted(get_scenario("weather"), "stall:0", 0, 0).body)
    hdr = {"x-inspector-scenario": "weather", "x-inspector-fault": "stall:0@turn"}  # each conversation stalls
    record = tmp_path / "resend.jsonl"
    n = 5
    with BackgroundServer(ProxyApp(upstream.base_url, record=record)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            for i in range(n):  # n conversations, each: turn 1 stalls, is closed and resent at once; then turn 2
                messages: list[dict[str, Any]] = [{"role": "user", "content": f"Weather in city {i}?"}]
                body = {"model": "m", "max_tokens": 50, "stream": True, "messages": messages}
                second = await _close_then_resend(h, body, hdr, prefix)
                assert second.status_code == 200
                body = {**body, "messages": [*messages, *_tool_results(second.content)]}
                calm = {"x-inspector-scenario": "weather"}
                assert (await h.post("/v1/messages", content=orjson.dumps(body), headers=calm)).status_code == 200
    rec = read_recording(record)
    conv = {
        o["turn"]: (o["conversation"], o["conversation_turn"])
        for o in rec.observations
        if o.get("type") == "conversation"
    }
    shape = sorted((conv[a.turn], a.attempt) for a in rec.attempts())
    assert shape == sorted(
        [((f"c{i + 1}", 0), 0) for i in range(n)]
        + [((f"c{i + 1}", 0), 1) for i in range(n)]
        + [((f"c{i + 1}", 1), 0) for i in range(n)]
    )
    assert sorted({a.turn for a in rec.attempts()}) == list(range(2 * n))
    # dump judges it complete: every turn's last attempt ended well
    out = await asyncio.to_thread(  # (a blocking subprocess.run would stall the test's event loop: ASYNC221)
        subprocess.run,
        [sys.executable, "-m", "inspector", "dump", str(record)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # and `serve --recording` answers each conversation's turns: the first one served back, attempt by attempt
    source = RecordingSource.load(record)
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, timeout=30, headers=API_HEADERS) as h:
            messages = [{"role": "user", "content": "Weather in city 0?"}]
            body = {"model": "m", "max_tokens": 50, "stream": True, "messages": messages}
            second = await _close_then_resend(h, body, {}, prefix)
            assert second.status_code == 200 and b"message_stop" in second.content
            body = {**body, "messages": [*messages, *_tool_results(second.content)]}
            last = await h.post("/v1/messages", content=orjson.dumps(body))
            assert last.status_code == 200 and b"message_stop" in last.content
            assert "turn=1;" in last.headers["x-recording"]


# ----------------------------------------------------------------------------------------------- the tracker alone


def _tracker() -> tuple[TurnTracker, list[O.Observation]]:

    got: list[O.Observation] = []
    tracker = TurnTracker(got.append, clock=lambda: 0.0, t0=0.0, source=lambda: {"type": "proxy"}, detail=lambda: True)
    return tracker, got


def _begun(tracker: TurnTracker, body: dict[str, Any], headers: Iterable[tuple[str, str]] = ()) -> Track:
    """A streamed attempt through the tracker as the proxy starts it: assigned, begun, its SSE response started."""
    raw = orjson.dumps(body)
    ex = ProxyExchange("POST", "/v1/messages")
    a, parsed = tracker.assign(ex, "POST", "/v1/messages", list(headers), raw)
    track = tracker.new_track(ex, a, 0.0, parsed)
    tracker.begin(track, "POST", "http://up/v1/messages", list(headers), raw)
    track.set_response("text/event-stream", "", 200, True)
    return track


def _exchange(
    tracker: TurnTracker, body: dict[str, Any], data: bytes, headers: Iterable[tuple[str, str]] = ()
) -> Track:
    """One streamed attempt through the tracker, as the proxy drives it (request, response, reads, end)."""
    track = _begun(tracker, body, headers)
    ex = track.ex
    tracker.read(track, 0.01, data)
    ex.status, ex.end, ex.end_s = 200, "complete", 0.02
    tracker.end(track)
    return track


def test_a_subagent_started_by_a_tool_call_names_its_parent() -> None:
    """A tool call's input (e.g. a Task prompt) that becomes another conversation's first message: that
    conversation's parent is the caller's (the tool input is handed to Conversations when its block closes)."""
    from inspector.testing.streamgen import sse, text_turn, tool_turn

    tracker, got = _tracker()
    prompt = "Research the weather history of Paris in detail"
    task = sse(*tool_turn([orjson.dumps({"prompt": prompt}).decode()], name="Task", id="toolu_task"))
    main_body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "plan"}]}
    _exchange(tracker, main_body, task)
    sub_body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    _exchange(tracker, {**sub_body, "system": "You are a research subagent."}, sse(*text_turn("done")))
    assigned = [o for o in got if isinstance(o, O.ConversationAssigned)]
    assert [(o.conversation, o.how, o.parent) for o in assigned] == [("c1", "new", None), ("c2", "new", "c1")]


def test_tool_ids_repeated_across_conversations_are_matched_within_each() -> None:
    """A mock upstream seeds tool ids by turn: two conversations get the same toolu_ id. Each result is matched to
    its own conversation's call (before: the later call overwrote the earlier, the other result was 'unknown')."""
    from inspector.testing.streamgen import sse, text_turn, tool_turn

    tracker, got = _tracker()
    hist: dict[str, list[dict[str, Any]]] = {}
    for city in ("Paris", "Rome"):
        hist[city] = [{"role": "user", "content": f"Weather in {city}?"}]
        body = {"model": "m", "max_tokens": 50, "stream": True, "messages": hist[city]}
        _exchange(tracker, body, sse(*tool_turn([f'{{"city": "{city}"}}'], name="get_weather", id="toolu_01")))
    for city in ("Paris", "Rome"):
        hist[city] += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": city}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18 C"}]},
        ]
        body = {"model": "m", "max_tokens": 50, "stream": True, "messages": hist[city]}
        _exchange(tracker, body, sse(*text_turn("ok")))
    inferred = [(o.turn, o.status, o.from_turn) for o in got if isinstance(o, O.ToolExecutionInferred)]
    assert inferred == [(2, "result", 0), (3, "result", 1)]
    states = [(o.turn, o.state) for o in got if isinstance(o, O.ToolStateChanged) and o.state == "succeeded"]
    assert states == [(0, "succeeded"), (1, "succeeded")]
    assert tracker.seen_tools == {}  # answered: nothing kept


def test_the_session_end_ends_every_conversations_call_of_a_repeated_id() -> None:
    """Three conversations whose calls share an id (serve's chat ids, a server's `call_0`), none answered: the
    session's end ends each as unknown (before: the calls waited by id alone, the last one hid the others, which
    stayed 'running (inferred)' for ever on the dashboard, the headless lines and in the recording)."""
    from inspector.testing.streamgen import sse, tool_turn

    tracker, got = _tracker()
    for city in CITIES:
        body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": city}]}
        _exchange(tracker, body, sse(*tool_turn([f'{{"city": "{city}"}}'], name="get_weather", id="toolu_01")))
    tracker.session_ended("the command ended")
    ended = [(o.turn, o.input) for o in got if isinstance(o, O.ToolStateChanged) and o.state == "unknown"]
    assert ended == [(0, {"city": "Paris"}), (1, {"city": "Rome"}), (2, {"city": "Oslo"})]
    assert tracker.seen_tools == {}


def test_a_tool_block_the_stream_never_closed_ends_not_run() -> None:
    """The connection drops inside a tool call's input (serve --fault drop_in_tool): the call was shown receiving
    input for ever, on the finished dashboard too, while the agent loop (replay) ends it not run. Now the proxy ends
    it not run when the attempt ends, saying why."""
    from inspector.testing.streamgen import sse, tool_turn

    tracker, got = _tracker()
    full = sse(*tool_turn(['{"city": "Paris"}'], name="get_weather", id="toolu_01"))
    track = _begun(
        tracker, {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    )
    ex = track.ex
    tracker.read(track, 0.01, full[: full.index(b"event: content_block_stop")])
    ex.status, ex.end, ex.end_s, ex.reason = 200, "error", 0.02, "connection dropped"
    tracker.end(track)
    states = [(o.state, o.error) for o in got if isinstance(o, O.ToolStateChanged)]
    assert states == [
        ("streaming_input", None),
        ("not_run", "its block never closed: its input is incomplete, the tool was not run"),
    ]
    tracker.session_ended("the command ended")  # (nothing left waiting: it never ran)
    assert [o.state for o in got if isinstance(o, O.ToolStateChanged)][2:] == []


async def test_serve_recording_answers_each_conversation_from_its_own_turns(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """Two conversations recorded through the proxy, each answered by another scenario (other bytes): `serve
    --recording` of that file answers a request of the second conversation with the second conversation's recorded
    bytes (before, every request was answered from the file's first conversation)."""
    from inspector.net.recorded import RecordingSource

    record = tmp_path / "two.jsonl"
    sent = {"weather": "Weather in Paris?", "thinking": "Think about the tree."}
    with BackgroundServer(ProxyApp(upstream.base_url, record=record)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            for scenario, prompt in sent.items():
                body = {
                    "model": "m",
                    "max_tokens": 50,
                    "stream": True,
                    "messages": [{"role": "user", "content": prompt}],
                }
                r = await h.post("/v1/messages", content=orjson.dumps(body), headers={"x-inspector-scenario": scenario})
                assert r.status_code == 200
    rec = read_recording(record)
    recorded = {}
    for a in rec.attempts():
        assert a.request is not None
        recorded[a.request["body"]["messages"][0]["content"]] = a.data
    assert recorded[sent["weather"]] != recorded[sent["thinking"]]
    source = RecordingSource.load(record)
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, timeout=30, headers=API_HEADERS) as h:
            for prompt in reversed(list(sent.values())):  # the second conversation first
                body = {
                    "model": "m",
                    "max_tokens": 50,
                    "stream": True,
                    "messages": [{"role": "user", "content": prompt}],
                }
                r = await h.post("/v1/messages", content=orjson.dumps(body))
                assert r.status_code == 200
                assert r.content == recorded[prompt], prompt


async def test_the_same_body_at_once_after_a_complete_answer_is_a_new_turn_while_the_proxy_still_cleans_up(
    upstream: BackgroundServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client has the whole answer and sends the same body again at once (langchain / pydantic-ai resend with zero
    gap): the proxy may not have finished closing the first exchange's tasks yet (here: held until the second request
    was assigned). The attempt's end is known before that: the resend of a COMPLETE answer is a new turn, not a
    retry. Before: the end was published after the cleanup's awaits, and the resend was counted as attempt 2 of the
    same turn (seen under uvloop, where the next connection is often served before the cleanup resumes)."""
    import threading

    from inspector.net import proxy as proxy_mod

    gate = threading.Event()
    original = proxy_mod._Watchers.close

    async def held_close(
        self: proxy_mod._Watchers,
    ) -> None:  # the cleanup waits (without blocking the loop) until the test opens it
        await asyncio.get_running_loop().run_in_executor(None, gate.wait, 30)
        await original(self)

    monkeypatch.setattr(proxy_mod._Watchers, "close", held_close)
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    body = orjson.dumps(
        {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "resend me"}]}
    )
    headers = {**API_HEADERS, "x-api-key": KEY, "x-inspector-scenario": "parse_date"}
    try:
        with BackgroundServer(ProxyApp(upstream.base_url, bus=bus)) as px:
            async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
                first = await h.post("/v1/messages", content=body, headers=headers)
                second = asyncio.ensure_future(h.post("/v1/messages", content=body, headers=headers))
                for _ in range(3000):  # bounded: until the proxy assigned the second request
                    if sum(isinstance(o, O.AttemptStarted) for o in got) == 2:
                        break
                    await asyncio.sleep(0.01)
                gate.set()
                second_answer = await second
    finally:
        gate.set()
    assert first.status_code == second_answer.status_code == 200
    assert b"message_stop" in first.content and b"message_stop" in second_answer.content
    starts = [(o.turn, o.attempt) for o in got if isinstance(o, O.AttemptStarted)]
    assert starts == [(0, 0), (1, 0)]
    assigned = [o.how for o in got if isinstance(o, O.ConversationAssigned)]
    assert "retry" not in assigned


async def test_the_same_request_after_an_answer_the_token_limit_cut_is_its_retry(upstream: BackgroundServer) -> None:
    """A harness that sends the same request again after a max_tokens answer (the openai SDK's .stream() raises
    LengthFinishReasonError on it, and a harness retries) is retrying that turn: attempt 2 of turn 1, one
    conversation. Before, the cut answer "ended well" (200, message_stop), and each resend was a new conversation
    of one turn (4 conversations for one request sent 4 times, found with the openai SDK through watch). A complete
    answer's resend is still a new conversation (the test above)."""
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    body = orjson.dumps(
        {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "weather in Paris?"}]}
    )
    headers = {**API_HEADERS, "x-api-key": KEY, "x-inspector-scenario": "weather"}
    with BackgroundServer(ProxyApp(upstream.base_url, bus=bus)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            cut = await h.post(
                "/v1/messages", content=body, headers={**headers, "x-inspector-fault": "max_tokens_tool"}
            )
            again = await h.post("/v1/messages", content=body, headers={**headers, "x-inspector-fault": "none"})
    assert cut.status_code == again.status_code == 200
    assert b'"max_tokens"' in cut.content and b'"tool_use"' in again.content
    starts = [(o.turn, o.attempt) for o in got if isinstance(o, O.AttemptStarted)]
    assert starts == [(0, 0), (0, 1)]
    assigned = [(o.conversation, o.how) for o in got if isinstance(o, O.ConversationAssigned)]
    assert assigned == [("c1", "new"), ("c1", "retry")]


def test_an_injected_fault_is_named_once_on_its_line() -> None:
    """'injected drop_in_tool:2 (injected drop_in_tool:2 (inspector proxy))': the fault's own reason said it again."""
    from inspector.net.turns import ProxyExchange

    ex = ProxyExchange("POST", "/v1/messages", turn=0, attempt=0, status=200, end="dropped", outcome="incomplete")
    ex.fault, ex.reason = "drop_in_tool:2", "injected drop_in_tool:2 (inspector proxy)"
    line = format_exchange(ex)
    assert line.count("drop_in_tool:2") == 1 and line.endswith("incomplete, injected drop_in_tool:2")
    ex.reason = "the client closed the connection"  # (another reason is still said)
    assert format_exchange(ex).endswith("injected drop_in_tool:2 (the client closed the connection)")


async def test_a_messages_thread_continued_by_previous_message_id_stays_one_conversation(tmp_path: Path) -> None:
    """The anthropic SDK's beta tool runner continues a server-held thread: its second request holds the tool result
    only, with ``thread.previous_message_id`` naming the first answer. It was a second conversation (its turn 1)
    whose tool result matched nothing; it is the first conversation's turn 2, its result matched. (serve holds no
    threads: its history check is off here, the proxy's grouping is what is checked.)"""
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    hdr = {"x-inspector-scenario": "weather"}
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True, validate_history=False, echo_model=False)) as up:
        with BackgroundServer(ProxyApp(up.base_url, bus=bus)) as px:
            client = sdk(px.base_url)
            try:
                question: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
                create = {"thread": {"type": "create"}}
                async with client.messages.stream(
                    model="m", max_tokens=100, messages=question, extra_headers=hdr, extra_body=create
                ) as s:
                    first = await s.get_final_message()
                (use,) = [b for b in first.content if b.type == "tool_use"]
                results: list[Any] = [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 C"}]}
                ]
                cont = {"thread": {"type": "continue", "previous_message_id": first.id}}
                async with client.messages.stream(
                    model="m", max_tokens=100, messages=results, extra_headers=hdr, extra_body=cont
                ) as s:
                    await s.get_final_message()
            finally:
                await client.close()
    assigned = [(o.conversation, o.conversation_turn, o.how) for o in got if isinstance(o, O.ConversationAssigned)]
    assert [a[1:] for a in assigned] == [(0, "new"), (1, "continues")] and assigned[0][0] == assigned[1][0]
    inferred = [(o.tool_use_id, o.status, o.from_turn) for o in got if isinstance(o, O.ToolExecutionInferred)]
    assert inferred == [(use.id, "result", 0)]


def test_an_inferred_tool_line_names_the_turn_of_its_own_conversation_that_streamed_it() -> None:
    """Under `[c3] turn 2 (#9)`, the result of the call c3's turn 1 (#3 of the session) streamed read `(turn 3)`: a
    turn c3 never had. It names that turn as the exchange lines do: `(turn 1 (#3))`; without conversations (one
    conversation: `turn N` is the session's), the session's number as before."""
    from inspector.net.toolinfer import InferredExecution
    from inspector.net.turns import ProxyExchange

    ex = ProxyExchange("POST", "/v1/chat/completions", turn=8, attempt=0, status=200, end="complete")
    ex.conversation, ex.conversation_turn, ex.outcome = "c3", 1, "text_finish"
    ex.inferred = [InferredExecution("call_1", "get_weather", "result", 2, 1.7, since_block_stop=0.504)]
    lines = format_exchange(ex, True).split("\n")
    assert lines[0].startswith("[c3] turn 2 (#9) attempt 1 POST")
    assert lines[1] == "  tool get_weather call_1 (turn 1 (#3)): result 504 ms after its block stop"
    assert (
        format_exchange(ex).split("\n")[1] == "  tool get_weather call_1 (turn 3): result 504 ms after its block stop"
    )


async def test_a_system_prompt_with_the_time_in_it_stays_one_conversation_and_says_why_the_cache_missed(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """A harness that puts the time in its system prompt (the cache_break scenario, as a real agent would send it):
    every request had a new system prompt, so every turn started a new conversation, its tool result matched
    nothing, and the cache verdict the watch exists to give ("system changed at char 69") was never said. A request
    whose messages extend a conversation's previous request continues it, how "continues_changed"."""
    from inspector.record.accounting import account, requests_of
    from inspector.record.dump import dump_turns

    record = tmp_path / "cache.jsonl"
    seen: list[O.Observation] = []
    bus = O.ObservationBus()
    bus.subscribe(seen.append)
    proxy = ProxyApp(upstream.base_url, record=record, bus=bus)
    hdr = {"x-inspector-scenario": "cache_break"}

    def system(minute: int) -> Any:  # (a list of text blocks with a cache breakpoint)
        text = f"You are a weather assistant. Answer in one sentence. The time is 09:{minute}."
        return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]

    with BackgroundServer(proxy) as px:
        client = sdk(px.base_url)
        messages: list[Any] = [{"role": "user", "content": "What's the weather like in Paris right now?"}]
        async with client.messages.stream(
            model="m", max_tokens=100, system=system(14), messages=messages, extra_headers=hdr
        ) as s:
            first = await s.get_final_message()
        [use] = [b for b in first.content if b.type == "tool_use"]
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 C"}]},
        ]
        async with client.messages.stream(
            model="m", max_tokens=100, system=system(15), messages=messages, extra_headers=hdr
        ) as s:
            await s.get_final_message()
        await client.close()
    assigned = [(o.conversation, o.conversation_turn, o.how) for o in seen if isinstance(o, O.ConversationAssigned)]
    assert assigned == [("c1", 0, "new"), ("c1", 1, "continues_changed")]
    assert proxy.tracker.conversations.tool_ids == {use.id: "c1"}  # (what tells apart runs with the same history)
    tools = [o for o in seen if isinstance(o, O.ToolStateChanged) and o.id == use.id]
    assert tools and tools[-1].state == "succeeded", tools  # its result matched, in its own conversation
    recording = read_recording(record)
    turns = dump_turns(recording)
    account(turns, requests_of(recording.turns))
    assert len(turns) == 2  # (one conversation: dump names none)
    assert turns[1]["cache"]["reason"] == "cache written again: system changed at char 69"


async def test_serve_recording_finds_each_conversation_when_the_system_prompt_changed(
    upstream: BackgroundServer, tmp_path: Path
) -> None:
    """Two agents with the time in their system prompts, recorded together: `serve --recording` matched a request
    to its conversation by system, tools and first message, so every turn-2 request (a new time) missed and was
    answered from the first conversation's source. The first message alone now finds it."""
    from inspector.net.recorded import RecordingSource

    record = tmp_path / "timed.jsonl"
    hdr = {"x-inspector-scenario": "cache_break"}

    async def agent(client: anthropic.AsyncAnthropic, city: str) -> None:
        messages: list[Any] = [{"role": "user", "content": f"What's the weather like in {city} right now?"}]
        for minute in (14, 15):
            system: Any = f"You are a weather assistant. The time is 09:{minute}."
            async with client.messages.stream(
                model="m", max_tokens=100, system=system, messages=messages, extra_headers=hdr
            ) as s:
                m = await s.get_final_message()
            uses = [b for b in m.content if b.type == "tool_use"]
            if not uses:
                return
            messages += [
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "18"} for u in uses],
                },
            ]

    with BackgroundServer(ProxyApp(upstream.base_url, record=record)) as px:
        client = sdk(px.base_url)
        await asyncio.gather(agent(client, "Paris"), agent(client, "Rome"))
        await client.close()
    rec = read_recording(record)
    conv_of = {o["turn"]: o["conversation"] for o in rec.observations if o.get("type") == "conversation"}
    assert sorted(conv_of.values()) == ["c1", "c1", "c2", "c2"]
    source = RecordingSource.load(record)
    for att in rec.attempts():
        assert att.request is not None
        served = source.conversation_for(att.request["body"])
        assert served.name.endswith(conv_of[att.turn]), (att.turn, served.name)


def test_concurrent_streams_are_published_in_the_order_they_happened() -> None:
    """Three conversations stream at once. A batch publishes their observations merged in time order (it published
    one stream's batch, then the next: the headless lines of concurrent conversations came out of time order), and
    an attempt's end publishes what the others received before it, first."""
    from inspector.testing.streamgen import sse, text_turn

    tracker, got = _tracker()
    tracks = []
    for city in CITIES:
        body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": city}]}
        tracks.append(_begun(tracker, body))
    streams = [sse(*text_turn(f"The weather in {city} is fine today.")) for city in CITIES]
    lines = [s.splitlines(keepends=True) for s in streams]
    t = 0.0
    for i in range(max(map(len, lines))):  # a line of each stream in turn, each read later than the one before
        for k, track in enumerate(tracks):
            if i < len(lines[k]):
                t += 0.001
                tracker.read(track, t, lines[k][i])
        if i == len(lines[0]) // 2:
            tracker.drain()  # (a batch timer's drain, halfway)
    ex = tracks[1].ex
    ex.status, ex.end, ex.end_s = 200, "complete", t + 0.001
    tracker.end(tracks[1])  # the others' reads, received before this end, come first
    for track in (tracks[0], tracks[2]):
        track.ex.status, track.ex.end, track.ex.end_s = 200, "complete", t + 0.002
        tracker.end(track)
    stream = [o for o in got if o.t > 0]  # (the requests' own start at 0.0 came first)
    assert [o.t for o in stream] == sorted(o.t for o in stream)
    assert sum(isinstance(o, O.AttemptEnded) for o in stream) == 3
    reads = [o for o in got if isinstance(o, O.ReadReceived)]
    assert len(reads) == sum(map(len, lines))  # every read, once
    for k, track in enumerate(tracks):  # each stream's own in its order
        assert b"".join(o.data for o in reads if o.turn == track.turn) == streams[k]


def test_a_late_start_publishes_the_others_reads_first_and_its_own_after_it() -> None:
    """An attempt whose start is published late (the proxy publishes it once the request went out; on a failure, at
    its end) with reads of its own already queued: the other streams' earlier reads come before its start, its own
    after it (an attempt's reads never precede its AttemptStarted)."""
    from inspector.testing.streamgen import sse, text_turn

    tracker, got = _tracker()
    tracks, raws = [], []
    for city in CITIES[:2]:
        raw = orjson.dumps(
            {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": city}]}
        )
        ex = ProxyExchange("POST", "/v1/messages")
        a, parsed = tracker.assign(ex, "POST", "/v1/messages", [], raw)
        tracks.append(tracker.new_track(ex, a, 0.0, parsed))
        raws.append(raw)
    first, late = tracks
    tracker.begin(first, "POST", "http://up/v1/messages", [], raws[0])
    first.set_response("text/event-stream", "", 200, True)
    late.set_response("text/event-stream", "", 200, True)
    data = sse(*text_turn("hi"))
    tracker.read(first, 0.001, data)
    tracker.read(late, 0.002, data)
    tracker.begin(late, "POST", "http://up/v1/messages", [], raws[1])
    order = [(type(o).__name__, o.turn) for o in got if isinstance(o, (O.AttemptStarted, O.ReadReceived))]
    assert order == [
        ("AttemptStarted", first.turn),
        ("ReadReceived", first.turn),
        ("AttemptStarted", late.turn),
    ]
    late.ex.status, late.ex.end, late.ex.end_s = 200, "complete", 0.003
    tracker.end(late)
    assert [o for o in got if isinstance(o, O.ReadReceived) and o.turn == late.turn][0].data == data


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_any_interleaving_publishes_each_attempt_as_alone_and_the_reads_in_time_order(data: st.DataObject) -> None:
    """Any interleaving of three streams' reads, with batch drains and the attempts' ends at any points: each
    attempt's observations are exactly those it gets through the tracker alone, in their order, and the reads of
    all of them come out in the order they arrived."""
    from inspector.testing.streamgen import sse, text_turn, tool_turn

    bodies = [sse(*text_turn("Paris is sunny today.")), sse(*tool_turn(['{"city": ', '"Rome"}'])), b"x" * 5]
    cuts = [
        sorted(set(data.draw(st.lists(st.integers(1, len(b) - 1), max_size=6), label=f"cuts{k}")))
        for k, b in enumerate(bodies)
    ]
    parts = [[b[i:j] for i, j in zip([0, *c], [*c, len(b)], strict=True)] for b, c in zip(bodies, cuts, strict=True)]
    order = data.draw(st.permutations([k for k, p in enumerate(parts) for _ in p]), label="order")
    drains = data.draw(st.sets(st.integers(0, len(order))), label="drains")

    def run(which: list[int], schedule: list[int], drain_at: set[int]) -> list[O.Observation]:
        tracker, got = _tracker()
        tracks: dict[int, Track] = {}
        for k in which:
            raw = orjson.dumps(
                {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": str(k)}]}
            )
            ex = ProxyExchange("POST", "/v1/messages")
            a, parsed = tracker.assign(ex, "POST", "/v1/messages", [], raw)
            tracks[k] = tracker.new_track(ex, a, 0.0, parsed)
            tracker.begin(tracks[k], "POST", "http://up/v1/messages", [], raw)
            tracks[k].set_response("text/event-stream", "", 200, True)
        left = {k: len(parts[k]) for k in which}
        nth = {k: 0 for k in which}
        for step, k in enumerate(schedule):
            if step in drain_at:
                tracker.drain()
            if k not in tracks:
                continue
            tracker.read(tracks[k], 0.001 * (step + 1), parts[k][nth[k]])
            nth[k] += 1
            left[k] -= 1
            if left[k] == 0:  # its last read: the exchange ends
                ex = tracks[k].ex
                ex.status, ex.end, ex.end_s = 200, "complete", 0.001 * (step + 1) + 0.0005
                tracker.end(tracks[k])
        return got

    together = run([0, 1, 2], order, drains)
    turn_of = {o.turn: int(str(o.body["messages"][0]["content"])) for o in together if isinstance(o, O.AttemptStarted)}
    reads = [o.t for o in together if isinstance(o, O.ReadReceived)]
    assert reads == sorted(reads)
    assert len(reads) == sum(map(len, parts))
    for k in range(3):
        alone = run([k], order, set())  # (the same read times, nobody else)
        mine = [o for o in together if turn_of.get(getattr(o, "turn", -1)) == k]
        assert [_shape(o) for o in mine] == [_shape(o) for o in alone if hasattr(o, "turn")]


def _shape(o: O.Observation) -> tuple[str, dict[str, Any]]:
    """An observation without its session-wide numbering (turns and conversation ids are the session's: alone, a
    stream is turn 0 of c1)."""
    import dataclasses

    return type(o).__name__, {
        f.name: getattr(o, f.name) for f in dataclasses.fields(o) if f.name not in ("turn", "conversation")
    }


def test_a_drain_of_hundreds_of_streams_one_past_its_parse_budget_loses_nothing_and_keeps_time_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hostile batch for the merged drain: 300 streams pending at once, one of them past the parse budget in the
    middle of the batch (its note, then its reads unparsed), one sending bytes that are not SSE nor UTF-8. Every read
    is published once, each stream's in its order, all of them in arrival order, and the budget's note at the time
    of the batch's first read of that stream, before it."""
    from inspector.net import turns
    from inspector.testing.streamgen import sse, text_turn

    monkeypatch.setattr(turns, "PARSE_BUDGET", 4096)
    tracker, got = _tracker()
    tracks = []
    for k in range(300):
        tracks.append(
            _begun(
                tracker, {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": k}]}
            )
        )
    small = sse(*text_turn("hi"))
    big = sse(*text_turn("x" * 6000))
    garbage = b"\xff\xfe\x00not sse\r\r\n" * 50
    data = {k: small for k in range(300)} | {7: big, 8: garbage}
    t = 0.0
    for step in range(3):  # each stream's data in three reads, the streams taking turns
        for k, track in enumerate(tracks):
            d = data[k]
            part = d[step * len(d) // 3 : (step + 1) * len(d) // 3]
            t += 0.0001
            tracker.read(track, t, part)
    tracker.drain()
    reads = [o for o in got if isinstance(o, O.ReadReceived)]
    assert len(reads) == 900
    assert [o.t for o in reads] == sorted(o.t for o in reads)
    for k, track in enumerate(tracks):
        assert b"".join(o.data for o in reads if o.turn == track.turn) == data[k]
    (note,) = [o for o in got if isinstance(o, O.ProxyNote)]
    assert note.turn == tracks[7].turn and "no longer parsed" in note.note
    # (the budget is counted per batch: this one's first read of that stream is when it was crossed)
    crossed = next(o for o in reads if o.turn == tracks[7].turn)
    assert got.index(note) < got.index(crossed) and note.t == crossed.t


async def test_an_attempt_upstream_answered_with_an_http_error_ends_http_error(upstream: BackgroundServer) -> None:
    """A 429 from upstream: the proxy's attempt ends with outcome http_error, as dump and the loop say it (it said
    'error', so its OTel span's error.type was 'error')."""
    bus = O.ObservationBus()
    got: list[O.Observation] = []
    bus.subscribe(got.append)
    body = orjson.dumps(
        {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    )
    headers = {**API_HEADERS, "x-api-key": KEY, "x-inspector-scenario": "weather", "x-inspector-fault": "http_429"}
    with BackgroundServer(ProxyApp(upstream.base_url, bus=bus)) as px:
        async with httpx2.AsyncClient(base_url=px.base_url, timeout=30) as h:
            answer = await h.post("/v1/messages", content=body, headers=headers)
    assert answer.status_code == 429
    assert [(o.status, o.outcome) for o in got if isinstance(o, O.AttemptEnded)] == [("http_error", "http_error")]

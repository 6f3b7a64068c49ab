"""The loop's history out of RAM (issue 10 §5): kept as the SDK serializes it, in a spill file, and sent from there.

Structure (the loop keeps offsets, not messages; observations carry plain lists read once per attempt) and
equivalence (every request body is byte for byte the SDK's own serialization of the same history, with its
Content-Length)."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import pickle
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anthropic
import httpx2
import orjson
import pytest
from anthropic.types import MessageParam
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.agent.loop import LoopResult
from inspector.agent.transcript import HistoryView, SpilledHistory, SplicedMessages, SpliceError, sdk_json
from inspector.agent.tries import ObservedTransport, observe_client
from inspector.observe import observations as O
from inspector.record.recording import Recording, read_recording
from inspector.record.replay import ReplayServer, ReplayTransport
from inspector.scenarios.bundled import SCENARIOS
from inspector.sessions.sources import Session, openai_session, replay_session, scenario_session
from inspector.state.travel import History
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.sse import SSEEvent
from inspector.testing.hyp import examples
from inspector.testing.loop import assert_valid_history, run_observed
from inspector.testing.openai_fake import KEY, FakeOpenAI, Stream, chat_text, responses_text


class Capture(httpx2.AsyncBaseTransport):
    """Put under the tap: reads each request as a server gets it (the whole body) and keeps its bytes and headers."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.sent: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = b"".join([chunk async for chunk in request.stream])  # type: ignore[union-attr]
        self.sent.append((request.method, str(request.url), dict(request.headers), body))
        again = httpx2.Request(request.method, request.url, headers=request.headers, content=body)
        again.extensions = request.extensions
        return await self.inner.handle_async_request(again)


def captured(session: Session) -> Capture:
    transport = session.loop.client._client._transport
    assert isinstance(transport, ObservedTransport)
    cap = Capture(transport.inner)
    transport.inner = cap
    return cap


def _idle(name: str) -> float | None:
    return 0.2 if name == "stall_with_pings" else None


# ------------------------------------------------------------------------------------------------ structure
def test_the_store_keeps_offsets_not_messages() -> None:
    big = "x" * 10_000
    store = SpilledHistory()
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {big}"} for i in range(200)]
    for m in messages:
        store.append(m)
    # what it holds in memory: an array of offsets and a file; no message, no text
    held = [getattr(store, name) for name in SpilledHistory.__slots__ if name != "__weakref__"]
    for value in held:
        assert not isinstance(value, (dict, list, str, bytes, bytearray)), type(value)
    assert store._ends.itemsize == 8 and len(store._ends) == 200
    referents = gc.get_referents(store)
    assert not [r for r in referents if isinstance(r, (dict, list, str, bytes))]
    # and reads back what was appended
    assert store == messages and store[-1] == messages[-1] and store[3:5] == messages[3:5]
    view = store.view()
    store.append({"role": "user", "content": "later"})
    assert len(view) == 200 and len(store) == 201  # a view is frozen
    assert b"".join(view.list_chunks(size=777)) == sdk_json(messages)
    assert view.list_size() == len(sdk_json(messages))


def test_a_history_equals_a_sequence_of_the_same_messages_and_nothing_else() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ho"}]
    store = SpilledHistory(messages)
    for h in (store, store.view()):
        assert h == messages and h == tuple(messages) and messages == h and h == store.view()
        assert h != messages[:1] and h != [*messages[:1], {"role": "assistant", "content": "no"}]
        # a string, bytes or a non-sequence is not a history: the comparison is not implemented (so False)
        for other in ("hi", b"hi", None, 3, {"role": "user"}):
            assert h.__eq__(other) is NotImplemented and h != other
        with pytest.raises(TypeError):
            hash(h)


def test_a_view_with_secrets_masks_them_as_it_reads() -> None:
    store = SpilledHistory([{"role": "user", "content": "key sk-ant-secret-123456 here"}])
    assert store[0]["content"] == "key sk-ant-secret-123456 here"  # what is sent
    masked = store.view(["sk-ant-secret-123456"])
    assert masked[0]["content"] == "key [redacted] here"
    assert "sk-ant" not in repr(masked)
    assert b"sk-ant-secret-123456" in b"".join(masked.list_chunks())  # the request still carries it


async def test_the_loop_keeps_its_history_spilled_and_publishes_plain_lists() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    result, obs = await run_observed(s)
    assert result.status == "finished" and result.turns > 1
    assert isinstance(s.loop.messages, SpilledHistory)
    assert isinstance(result.history, HistoryView)
    started = obs.of(O.AttemptStarted)
    assert len(started) > 1
    for o in started:  # every request's snapshot is plain data, built once per attempt (issue 17)
        assert type(o.body["messages"]) is list
    fin = obs.of(O.LoopFinished)[0]
    assert type(fin.messages) is list
    assert fin.messages == result.messages and isinstance(result.messages, list)
    assert_valid_history(result.messages)
    # JSON output (--json, the recorder) writes the views as lists
    assert fin.to_json()["messages"] == orjson.loads(orjson.dumps(result.messages))


def _json_round_trip(o: O.Observation) -> O.Observation | None:
    """``o`` rebuilt from the JSON of its fields (None when a field is bytes, an SSE event or a diagnostic: those
    have their own encodings in ``to_json``)."""
    values = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    if any(isinstance(v, (bytes, bytearray, memoryview, SSEEvent, Diagnostic)) for v in values.values()):
        return None
    return type(o)(**orjson.loads(orjson.dumps(values)))


async def _loop_session(kind: str) -> Session:
    if kind.startswith("openai-"):
        api = kind.removeprefix("openai-")
        fake = FakeOpenAI(
            [
                Stream([chat_text("one") if api == "chat" else responses_text("one")]),
            ]
        )
        s = openai_session("gpt-test", f"hi {KEY}", api=api, api_key=KEY, builtin=False, http_client=fake.client())
        return s
    s = scenario_session("parse_date", speed=math.inf)
    if kind == "anthropic-untapped":
        s.loop._tap = None  # the loop hands the messages to the SDK (its reconstruction is published)
    return s


@pytest.mark.parametrize("kind", ["anthropic", "anthropic-untapped", "openai-chat", "openai-responses"])
async def test_every_loop_observation_is_plain_data(kind: str) -> None:
    """Issue 17 §1: what the loop publishes round-trips through pickle and through JSON and equals itself (the
    request's history and the final history are plain lists, not live views of the loop's spill file)."""
    s = await _loop_session(kind)
    result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    json_checked = set()
    for o in obs.items:
        assert pickle.loads(pickle.dumps(o)) == o, type(o).__name__
        back = _json_round_trip(o)
        if back is not None:
            assert back == o, type(o).__name__
            json_checked.add(type(o))
    assert {O.AttemptStarted, O.LoopFinished, O.MessageAppended} <= json_checked
    (fin,) = obs.of(O.LoopFinished)
    history = list(result.history)
    if kind.startswith("openai-"):  # the key the user typed is masked in what is published, as before
        assert KEY not in orjson.dumps([o.to_json() for o in obs.items]).decode()
        assert history[0]["content"] == f"hi {KEY}" and fin.messages[0]["content"] == "hi [redacted]"
        history[0] = fin.messages[0]
    assert fin.messages == history


async def test_published_histories_share_what_subscribers_keep_and_the_loop_keeps_none() -> None:
    """Plain lists without the memory of a copy per request: while a subscriber keeps the bodies (the dashboard
    does), each request's list shares the previous one's messages; when none does, the loop holds no list at all
    (its memory stays the spill file's offsets)."""
    s = scenario_session("parse_date", speed=math.inf)
    result, obs = await run_observed(s)  # keeps every observation
    lists = [o.body["messages"] for o in obs.of(O.AttemptStarted)] + [obs.of(O.LoopFinished)[0].messages]
    assert len(lists) >= 3
    for prev, cur in itertools.pairwise(lists):
        assert len(cur) >= len(prev) and all(a is b for a, b in zip(prev, cur, strict=False))
    full = list(result.history)
    for cur in lists:  # and each is what the spill file holds
        assert cur == full[: len(cur)]

    s = scenario_session("parse_date", speed=math.inf)
    held: list[tuple[type, bool]] = []  # keeps no observation, looks at the loop's memory
    s.bus.subscribe(lambda o: held.append((type(o), s.loop._shown is not None)))
    result = await s.run()
    assert result.status == "finished" and len(held) > 100
    # a list exists while its observation is published, and only then
    assert {t for t, kept in held if kept} == {O.AttemptStarted, O.LoopFinished}
    assert all(not kept for t, kept in held if t not in (O.AttemptStarted, O.LoopFinished))
    assert s.loop._shown is None


async def test_time_travel_past_spilled_blocks_shows_each_request_as_sent() -> None:
    """A loop session of 23,000 observations (big_input) in a History that spills every 2,048: appending never
    fails, and the state rebuilt from the spilled blocks as of any event shows each request's body as it went on
    the wire (the state of #2,048 once failed: the loop's live views could not be pickled)."""
    s = scenario_session("big_input", speed=math.inf)
    cap = captured(s)
    result, obs = await run_observed(s)
    assert result.status == "finished" and result.turns == 2
    wire = [orjson.loads(body) for *_, body in cap.sent]
    h = History()  # no live state followed: time travel folds the spilled observations themselves
    for o in obs.items:
        h.append(o)
    assert len(h) > 10 * 2048 and h.observations.spilled_bytes > 0
    assert h.observations.blocks_in_ram == 0  # every block went to disk: nothing live held them back
    starts = [(i, o) for i, o in enumerate(obs.items) if isinstance(o, O.AttemptStarted)]
    assert [(o.turn, o.attempt) for _, o in starts] == [(0, 0), (1, 0)] and len(wire) == 2
    assert starts[0][0] < 2048 < starts[1][0]
    for (i, o), sent in zip(starts, wire, strict=True):
        k = sum(1 for x in obs.items[:i] if isinstance(x, O.SSEEventSeen)) + 1  # just after its request
        for at in (k, k + 3000, h.event_count):
            state = h.state_at(min(at, h.event_count))
            assert state.requests[(o.turn, o.attempt)] == sent
    assert len(wire[1]["messages"]) == 3
    (fin,) = [x for x in h.observations if isinstance(x, O.LoopFinished)]
    assert fin.messages == list(result.history)


async def test_the_sdk_is_given_a_placeholder_and_the_transport_sends_the_history() -> None:
    s = scenario_session("parse_date", speed=math.inf)
    built: list[int] = []  # the size of each body as the SDK built it (before the tap's rewrite)
    tap = s.loop._tap
    assert tap is not None
    transport = s.loop.client._client._transport
    real = transport.handle_async_request

    async def spy(request: httpx2.Request) -> httpx2.Response:
        built.append(len(request.content))
        return await real(request)

    transport.handle_async_request = spy  # type: ignore[method-assign]  # a spy on the SDK's own transport
    cap = captured(s)
    result, _ = await run_observed(s)
    assert result.status == "finished" and tap.rewrite is None
    sizes = [len(body) for *_, body in cap.sent]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]  # the history grows on the wire...
    assert len(set(built)) == 1  # ...not in what the SDK serializes: the same placeholder every time


# ------------------------------------------------------------------------------------------------ equivalence
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_request_bodies_are_the_sdks_own(name: str) -> None:
    """The same scenario run twice, with the history spliced in by the transport and with the messages handed to
    the SDK (the fallback, as before): the same requests, byte for byte, Content-Length included."""

    async def run(splice: bool) -> tuple[LoopResult, list[tuple[str, str, dict[str, str], bytes]]]:
        s = scenario_session(name, speed=math.inf, idle_timeout=_idle(name), seed=1)
        cap = captured(s)
        if not splice:
            s.loop._tap = None  # the loop hands the messages to the SDK
        result, _ = await run_observed(s)
        return result, cap.sent

    spliced, sent_spliced = await run(True)
    plain, sent_plain = await run(False)
    assert spliced.status == plain.status and spliced.messages == plain.messages
    assert len(sent_spliced) == len(sent_plain) >= 1
    for (m1, u1, h1, b1), (m2, u2, h2, b2) in zip(sent_spliced, sent_plain, strict=True):
        assert (m1, u1) == (m2, u2)
        assert b1 == b2
        assert h1 == h2
        assert int(h1["content-length"]) == len(b1)


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False), st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text()),
    st.builds(
        lambda i, n, inp: {"type": "tool_use", "id": i, "name": n, "input": inp},
        st.text(min_size=1, max_size=12),
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    ),
    st.builds(
        lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e},
        st.text(max_size=12),
        st.one_of(st.text(), st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text()), max_size=3)),
        st.booleans(),
    ),
)
messages_st = st.lists(
    st.builds(
        lambda role, content: {"role": role, "content": content},
        st.sampled_from(["user", "assistant"]),
        st.one_of(st.text(), st.lists(blocks, max_size=4)),
    ),
    min_size=0,
    max_size=8,
)


async def _sent_by_sdk(
    messages: list[dict[str, Any]], splice: bool, system: str | None
) -> tuple[dict[str, str], bytes]:
    """What one `messages.create` sends: headers and body bytes (the server answers 400, no retry)."""
    got: list[tuple[dict[str, str], bytes]] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        got.append((dict(request.headers), request.content))
        return httpx2.Response(400, json={"type": "error", "error": {"type": "invalid_request_error", "message": "x"}})

    client = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://t.local",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    tap = observe_client(client)
    assert tap is not None
    kw: dict[str, Any] = {"system": system} if system is not None else {}
    if splice:
        spliced = SplicedMessages(SpilledHistory(messages).view())
        tap.rewrite = spliced.rewrite
        sent_messages = spliced.placeholder_messages
    else:
        sent_messages = messages
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(
            model="m", max_tokens=5, messages=cast("list[MessageParam]", sent_messages), stream=True, **kw
        )
    await client.close()
    ((headers, body),) = got
    return headers, body


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=messages_st, system=st.one_of(st.none(), st.text(max_size=20)))
async def test_spliced_body_equals_the_sdks_serialization(messages: list[dict[str, Any]], system: str | None) -> None:
    h1, b1 = await _sent_by_sdk(messages, True, system)
    h2, b2 = await _sent_by_sdk(messages, False, system)
    assert b1 == b2
    drop = {"x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout"}
    assert {k: v for k, v in h1.items() if k not in drop} == {k: v for k, v in h2.items() if k not in drop}
    # read back, each message is what was appended (as JSON)
    store = SpilledHistory(messages)
    assert list(store) == orjson.loads(orjson.dumps(messages))


def test_a_body_without_the_placeholder_is_never_sent() -> None:
    spliced = SplicedMessages(SpilledHistory([{"role": "user", "content": "hi"}]).view())
    request = httpx2.Request("POST", "http://t.local/v1/messages", content=b'{"messages":[]}')
    with pytest.raises(SpliceError):
        spliced.rewrite(request)


# ------------------------------------------------------------------------------------------------ replay server
async def test_the_replay_server_reads_a_large_body_through_without_keeping_it() -> None:
    server = ReplayServer(Recording(header={}))
    transport = ReplayTransport(server)
    chunks = [b'{"messages":[', *([b'"' + b"y" * 60_000 + b'",'] * 40), b'"z"]}']

    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

    request = httpx2.Request("POST", "http://replay.local/v1/messages", stream=Body())
    response = await transport.handle_async_request(request)
    assert response.status_code == 400  # no recorded turn
    size = sum(len(c) for c in chunks)
    assert server.received == 1 and list(server._bodies) == [size] and server.requests == [{"not_kept": size}]
    small = httpx2.Request("POST", "http://replay.local/v1/messages", content=b'{"messages":[]}')
    await transport.handle_async_request(small)
    assert server.requests == [{"messages": []}]
    await transport.handle_async_request(httpx2.Request("POST", "http://replay.local/v1/messages", content=b"[1]"))
    assert server.requests == [{"not_json": 3}]


async def test_a_replay_sends_what_the_original_sent(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    s = scenario_session("parse_date", speed=math.inf, record=path)
    original, _ = await run_observed(s)
    r = replay_session(path)
    cap = captured(r)
    replayed, _ = await run_observed(r)
    assert replayed.messages == original.messages
    recorded = [(a.request or {})["body"] for a in read_recording(path).attempts()]
    assert [orjson.loads(body)["messages"] for *_, body in cap.sent] == [b["messages"] for b in recorded]


async def test_a_tool_input_as_deep_as_orjson_reads_goes_into_the_history_and_back(tmp_path: Path) -> None:
    """A tool input nested 1,023 levels (orjson reads 1,024): the loop's history failed twice on it. The SDK's
    encoder (our spill) raised RecursionError ("internal error" after turn 1 of a replay), and once written, the
    message (3 levels deeper) was past orjson's read limit. A replay of it now finishes with the input exact in its
    history."""
    from inspector.core import exactjson
    from inspector.sessions.sources import replay_session
    from inspector.testing.streamgen import sse, tool_turn

    deep = '{"a": ' + "[" * 1022 + "1" + "]" * 1022 + "}"
    rec = tmp_path / "deep.sse"
    rec.write_bytes(sse(*tool_turn([deep[:200], deep[200:]])))
    result = await replay_session(rec, speed=math.inf).run()
    assert result.status == "finished", result.error
    [use] = [b for b in result.messages[1]["content"] if b.get("type") == "tool_use"]
    assert exactjson.dumps(use["input"]) == exactjson.dumps(orjson.loads(deep))  # (== recurses per level)

    history = SpilledHistory([{"role": "user", "content": "x"}])
    message = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": use["input"]}]}
    history.append(message)
    assert exactjson.dumps(history[1]) == exactjson.dumps(message)

"""A large request body does not stall the other streams through the proxy: its parse and its conversation digests
(net/turns.parse_body, net/conversations.chains; ~0.35 s for 16 MiB, and the precheck decoded a body of code whole:
1.3-2.4 s) run in a worker thread, and the other streams' reads keep being forwarded meanwhile. The results stay
exact: requests are assigned to conversations in the order their bodies arrived, and a body searched for secrets off
the loop is searched again if a key was learned since.

The evidence is the order of events, not a clock: the big body's digests wait (in ``chains``) until another
stream's next read has reached its client; with the digests on the event loop that read could never be forwarded
(the wait gives up after 10 s and the test fails)."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import httpx2
import orjson

from inspector.net import conversations, turns
from inspector.net.proxy import ProxyApp
from inspector.observe import observations as O
from inspector.testing.streamgen import (
    block_stop,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
)

KEY = "sk-ant-api03-CANARY-large-body-0123456789abcdef"
LATE_KEY = "sk-ant-api03-CANARY-learned-late-0123456789abc"
WAIT = 10.0  # seconds a step waits for the other before the test gives up (never, with the fix)


def _big(marker: str, extra: str = "") -> bytes:
    """A streamed Messages request past turns.OFFLOAD_BODY (~1 MiB of history), its first message ``marker``."""
    history: list[dict[str, Any]] = [{"role": "user", "content": marker}]
    for i in range(300):
        history += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x\\y " * 900}]},
        ]
    history.append({"role": "user", "content": extra or "go on"})
    body = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": history})
    assert len(body) > turns.OFFLOAD_BODY
    return body


def _small(text: str) -> bytes:
    return orjson.dumps(
        {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": text}]}
    )


ANSWER = sse(
    message_start(), text_start(0), text_delta(0, "ok"), block_stop(0), message_delta("end_turn"), message_stop()
)


class _Upstream:
    """A MockTransport upstream: a request whose body says "drip" streams what the test puts in ``drip`` (until
    None); any other is answered at once."""

    def __init__(self) -> None:
        self.drip: asyncio.Queue[bytes | None] = asyncio.Queue()

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        queue = self.drip if b"drip" in request.content else None

        class Body(httpx2.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                if queue is None:
                    yield ANSWER
                    return
                while (chunk := await queue.get()) is not None:
                    yield chunk

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())


async def _post(
    proxy: ProxyApp,
    body: bytes,
    key: str = KEY,
    on_chunk: Callable[[bytes], None] | None = None,
    read: asyncio.Event | None = None,
) -> None:
    """One POST /v1/messages into the proxy's ASGI handler; ``on_chunk`` sees each chunk the client gets; ``read``
    is set once the proxy reads the body (its headers' keys are learned by then)."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"x-api-key", key.encode())],
    }
    sent = asyncio.Event()
    finished = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if sent.is_set():
            await finished.wait()  # (the client stays until its answer is over)
            return {"type": "http.disconnect"}
        sent.set()
        if read is not None:
            read.set()
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if message.get("body") and on_chunk is not None:
                on_chunk(message["body"])
            if not message.get("more_body", False):
                finished.set()

    await proxy._handle(scope, receive, send, [])


def _waiting_chains(marker: str, until: threading.Event, seen: list[bool]) -> Callable[[Any], Any]:
    """``conversations.chains`` that, for the body whose first message is ``marker``, first waits for ``until``
    (appending whether it came) and says it began (``began``)."""
    real = conversations.chains

    def chains(body: Any) -> Any:
        msgs = body.get("messages") if isinstance(body, dict) else None
        if isinstance(msgs, list) and msgs and msgs[0].get("content") == marker:
            began.set()
            seen.append(until.wait(WAIT))
        return real(body)

    began = threading.Event()
    chains.began = began  # type: ignore[attr-defined]
    return chains


async def test_another_stream_flows_while_a_large_body_is_digested(monkeypatch: Any) -> None:
    up = _Upstream()
    bus = O.ObservationBus()
    published: list[O.Observation] = []
    bus.subscribe(published.append)
    proxy = ProxyApp("http://up.test", transport=httpx2.MockTransport(up.handler), record=io.BytesIO(), bus=bus)
    flowed = threading.Event()
    seen: list[bool] = []
    chains = _waiting_chains("big one", flowed, seen)
    monkeypatch.setattr(conversations, "chains", chains)
    monkeypatch.setattr(turns, "chains", chains)

    b_chunks: list[bytes] = []
    b_started = asyncio.Event()

    def on_b(chunk: bytes) -> None:
        b_chunks.append(chunk)
        b_started.set()
        if b"during the digests" in chunk:
            flowed.set()

    up.drip.put_nowait(sse(message_start(), text_start(0)))
    b = asyncio.ensure_future(_post(proxy, _small("drip"), on_chunk=on_b))
    await asyncio.wait_for(b_started.wait(), WAIT)
    a = asyncio.ensure_future(_post(proxy, _big("big one")))
    began = await asyncio.to_thread(chains.began.wait, WAIT)  # type: ignore[attr-defined]
    assert began
    up.drip.put_nowait(sse(text_delta(0, "during the digests")))  # B's next read, while A's digests wait for it
    await asyncio.wait_for(a, WAIT * 2)
    up.drip.put_nowait(sse(block_stop(0), message_delta("end_turn"), message_stop()))
    up.drip.put_nowait(None)
    await asyncio.wait_for(b, WAIT)
    proxy.close()
    await proxy.aclose()

    assert seen == [True], "the large body's digests stalled the event loop: B's read was not forwarded meanwhile"
    assert b"message_stop" in b"".join(b_chunks)
    # A was grouped and recorded as ever: its own conversation, its body as sent
    started = [o for o in published if isinstance(o, O.AttemptStarted)]
    big = next(o for o in started if o.body["messages"][0]["content"] == "big one")
    assert big.body == orjson.loads(_big("big one"))
    assigned = {o.turn: o.conversation for o in published if isinstance(o, O.ConversationAssigned)}
    assert len(set(assigned.values())) == 2


async def test_requests_are_assigned_in_the_order_their_bodies_came(monkeypatch: Any) -> None:
    """A small request whose body came while a large one was digested in the thread waits for it: the large one is
    conversation c1, as it was when everything ran on the event loop."""
    up = _Upstream()
    proxy = ProxyApp("http://up.test", transport=httpx2.MockTransport(up.handler))
    small_in = threading.Event()
    seen: list[bool] = []
    chains = _waiting_chains("first", small_in, seen)
    monkeypatch.setattr(conversations, "chains", chains)
    monkeypatch.setattr(turns, "chains", chains)
    exchanges: list[Any] = []
    proxy.on_exchange = exchanges.append

    a = asyncio.ensure_future(_post(proxy, _big("first")))
    assert await asyncio.to_thread(chains.began.wait, WAIT)  # type: ignore[attr-defined]
    real_assign = proxy.tracker.assign_soon

    async def assign_soon(*args: Any, **kwargs: Any) -> Any:
        small_in.set()  # (the second request's body is in: it is being assigned)
        return await real_assign(*args, **kwargs)

    proxy.tracker.assign_soon = assign_soon  # type: ignore[method-assign]
    second = asyncio.ensure_future(_post(proxy, _small("second")))
    await asyncio.wait_for(asyncio.gather(a, second), WAIT * 2)
    proxy.close()
    await proxy.aclose()
    assert seen == [True]
    assert sorted((ex.turn, ex.conversation) for ex in exchanges) == [(0, "c1"), (1, "c2")]
    convs = proxy.tracker.conversations.by_id
    assert convs["c1"].length == 602 and convs["c2"].length == 1  # (the large one first, as its body came first)


async def test_a_key_learned_while_the_body_was_checked_off_the_loop_is_masked_in_it(monkeypatch: Any) -> None:
    """The thread searched the body with the keys known then; a client sent another key before the body's
    AttemptStarted was published: the body is searched again (the key it quotes is masked in the recording)."""
    up = _Upstream()
    record = io.BytesIO()
    proxy = ProxyApp(
        "http://up.test", transport=httpx2.MockTransport(up.handler), record=record, bus=O.ObservationBus()
    )
    proxy.open_recording()
    learned = threading.Event()
    seen: list[bool] = []
    chains = _waiting_chains("quotes a key", learned, seen)
    monkeypatch.setattr(conversations, "chains", chains)
    monkeypatch.setattr(turns, "chains", chains)
    await _post(proxy, _small("hello"))  # (KEY known: the thread's search is a real one)

    a = asyncio.ensure_future(_post(proxy, _big("quotes a key", extra=f"the other key is {LATE_KEY}")))
    assert await asyncio.to_thread(chains.began.wait, WAIT)  # type: ignore[attr-defined]
    read = asyncio.Event()
    other = asyncio.ensure_future(_post(proxy, _small("another client"), key=LATE_KEY, read=read))
    await asyncio.wait_for(read.wait(), WAIT)  # its key is learned now, while A is digested
    assert LATE_KEY in proxy.secrets
    learned.set()
    await asyncio.wait_for(asyncio.gather(a, other), WAIT * 2)
    proxy.close()
    await proxy.aclose()
    assert seen == [True]
    text = record.getvalue()
    assert LATE_KEY.encode() not in text and b"the other key is [redacted]" in text

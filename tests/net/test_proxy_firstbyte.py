"""The proxy's first-byte path under many streams (tools/bench_proxy.py phase 3 measures it): a new upstream
connection writes its request as soon as it is made, a request-target's upstream URL is built once, and every
exchange shares one shutdown watcher."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx2
import pytest

from inspector.net import proxy as P
from inspector.net import upstream as U
from inspector.net.upstream import UpstreamPool


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


async def test_a_new_connection_writes_its_request_when_it_is_made() -> None:
    """The request goes out in connection_made, not a turn of the loop later when the task that opened the
    connection resumes (under a burst each turn waits behind every other stream's work)."""
    pool = UpstreamPool("http://upstream.test")
    conn = U._Connection(pool, (b"POST /v1/messages HTTP/1.1\r\n\r\n", b"{}", b"POST"))
    t = FakeTransport()
    conn.connection_made(t)
    assert b"".join(t.written) == b"POST /v1/messages HTTP/1.1\r\n\r\n{}"
    assert conn.head_future is not None and conn.active
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    resp = await conn.head_future
    assert resp.status_code == 200 and [d for _, d in resp.take()] == [b"ok"]


async def test_a_request_through_a_new_connection_is_answered_once() -> None:
    """End to end on loopback: the request written by connection_made is the one answered (written once)."""
    got: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.readuntil(b"\r\n\r\n")
        got.append(data + await reader.readexactly(2))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
        await writer.drain()
        with contextlib_suppress():
            await reader.read()  # until the pool closes it
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}")
    try:
        resp = await pool.send("POST", "/v1/messages", [("content-type", "application/json")], b"{}")
        body = b""
        while not resp.complete:
            batch = resp.take()
            body += b"".join(d for _, d in batch)
            if not batch:
                await resp.wait()
        await resp.aclose()
        assert resp.status_code == 200 and body == b"hello"
        assert len(got) == 1 and got[0].startswith(b"POST /v1/messages HTTP/1.1\r\n") and got[0].endswith(b"{}")
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()


def contextlib_suppress() -> contextlib.suppress:
    return contextlib.suppress(ConnectionError, asyncio.IncompleteReadError)


def test_the_upstream_url_of_a_target_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = httpx2.URL

    def counting(*a: Any, **k: Any) -> httpx2.URL:
        built.append(str(a[0]) if a else "")
        return real(*a, **k)

    monkeypatch.setattr(httpx2, "URL", counting)  # (the module the proxy uses)
    app = P.ProxyApp("http://upstream.test/prefix")
    first = app._upstream_url(b"/v1/messages", b"beta=true")
    n = len(built)
    assert n > 0 and first == "http://upstream.test/prefix/v1/messages?beta=true"
    assert app._upstream_url(b"/v1/messages", b"beta=true") == first
    assert len(built) == n  # the second request with this target parsed nothing
    app.upstream = "http://other.test"  # upstream changed while running: its own URL, never the old one
    assert app._upstream_url(b"/v1/messages", b"beta=true") == "http://other.test/v1/messages?beta=true"


def test_a_refused_target_is_refused_every_time_and_the_memo_is_bounded() -> None:
    app = P.ProxyApp("http://upstream.test")
    for _ in range(2):
        with pytest.raises(P._Refused):
            app._upstream_url(b"/v1/\x00messages", b"")
    for i in range(P.URL_MEMO * 3):
        app._upstream_url(f"/v1/{i}".encode(), b"")
    assert 0 < len(app._urls) <= P.URL_MEMO


async def test_every_exchange_shares_one_shutdown_watcher() -> None:
    app = P.ProxyApp("http://upstream.test")
    stop = app._stopping()
    assert app._stopping() is stop  # not one more task per request
    assert not stop.task.done()
    app.begin_close()
    await asyncio.wait_for(stop.task, 5)
    app2 = P.ProxyApp("http://upstream.test")
    stop2 = app2._stopping()
    await app2.aclose()  # the proxy closed without shutting down: its watcher does not outlive it
    with pytest.raises(asyncio.CancelledError):
        await stop2.task


# --------------------------------------------------------------------- the bookkeeping of a batch, a slice at a time


def _streams(n: int) -> tuple[Any, list[Any], list[Any]]:
    """A tracker (its batches due at once) and ``n`` begun attempts of ``n`` conversations, each with its whole
    stream pending (one read per event), and what the tracker published."""
    import orjson

    from inspector.net.turns import ProxyExchange, TurnTracker
    from inspector.testing.streamgen import sse, tool_turn

    got: list[Any] = []
    tracker = TurnTracker(
        got.append, clock=lambda: 0.0, t0=0.0, source=lambda: {"type": "proxy"}, detail=lambda: True, batch_interval=0
    )
    tracks = []
    for i in range(n):
        body = {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": f"city {i}"}]}
        raw = orjson.dumps(body)
        ex = ProxyExchange("POST", "/v1/messages")
        a, parsed = tracker.assign(ex, "POST", "/v1/messages", [], raw)
        track = tracker.new_track(ex, a, 0.0, parsed)
        tracker.begin(track, "POST", "http://up/v1/messages", [], raw)
        track.set_response("text/event-stream", "", 200, True)
        tracks.append(track)
    events = [sse(*tool_turn([orjson.dumps({"city": c}).decode()], id=f"toolu_{c}")) for c in range(n)]
    for j in range(max(len(e.split(b"\n\n")) for e in events)):  # interleaved, as many streams arrive
        for i, track in enumerate(tracks):
            parts = events[i].split(b"\n\n")
            if j < len(parts) - 1:
                tracker.read(track, 0.001 * j + 0.0001 * i, parts[j] + b"\n\n")
    return tracker, tracks, got


async def _until_drained(tracker: Any, ticks: list[int]) -> None:
    """Turn the loop (counting its turns in ``ticks``) until the tracker has nothing pending and no batch under
    way."""
    while getattr(tracker, "_round", None) is not None or tracker._dirty or tracker._drain_handle is not None:
        ticks[0] += 1
        await asyncio.sleep(0)


async def test_a_batch_of_many_streams_lets_the_loop_forward_between_its_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of 20 streams' reads is decoded and published a slice at a time (a slice here: one stream, or one
    observation), and the loop turns between slices: a first byte that arrives meanwhile is forwarded then, not after
    the whole batch (50 streams' batch took up to 14 ms at once). What is published is what one drain at once
    publishes, in the same order."""
    from inspector.net import turns

    ref, _, at_once = _streams(20)
    ref.drain()
    monkeypatch.setattr(turns, "DRAIN_SLICE", 0.0, raising=False)
    tracker, _, got = _streams(20)
    ticks = [0]
    seen_at: list[int] = []
    publish = tracker.publish

    def counted(obs: Any) -> None:
        seen_at.append(ticks[0])
        publish(obs)

    tracker.publish = counted
    await _until_drained(tracker, ticks)
    assert got == at_once and len(got) > 20 * 10
    assert len(set(seen_at)) > 20  # published across more than 20 turns of the loop (before: all in one)


async def test_an_attempt_end_during_a_batch_publishes_the_batch_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attempt that ends while a batch is under way (its slices not all run): the end drains the batch whole,
    then publishes the end; nothing is lost or published twice, and every stream's reads keep their order."""
    from inspector.net import turns
    from inspector.observe import observations as O

    monkeypatch.setattr(turns, "DRAIN_SLICE", 0.0, raising=False)
    tracker, tracks, got = _streams(5)
    tracker._drain_slice()  # (the timer's first slice: one stream of five)
    assert tracker._round is not None
    ex = tracks[3].ex
    ex.status, ex.end, ex.end_s = 200, "complete", 0.5
    tracker.end(tracks[3])
    ended = [i for i, o in enumerate(got) if isinstance(o, O.AttemptEnded)]
    reads = [o for o in got if isinstance(o, O.ReadReceived)]
    last_read = max(i for i, o in enumerate(got) if isinstance(o, O.ReadReceived))
    assert len(ended) == 1 and last_read < ended[0] and tracker._round is None and not tracker._dirty
    for track in tracks:
        mine = [o.read_index for o in reads if o.turn == track.turn]
        assert mine == list(range(len(mine))) and len(mine) > 5


async def test_a_stream_taken_out_of_a_batch_under_way_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request begins while reads of its own are in a batch under way (a stream the batch has not reached): its
    reads are taken out and come after its start, and what the batch already processed of the others is still
    published (the batch, left with one stream, is still published merged)."""
    import orjson

    from inspector.net import turns
    from inspector.observe import observations as O

    monkeypatch.setattr(turns, "DRAIN_SLICE", 0.0, raising=False)
    tracker, tracks, got = _streams(1)
    raw = orjson.dumps({"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    ex = turns.ProxyExchange("POST", "/v1/messages")
    a, parsed = tracker.assign(ex, "POST", "/v1/messages", [], raw)
    late = tracker.new_track(ex, a, 0.0, parsed)
    late.set_response("text/event-stream", "", 200, True)
    tracker.read(late, 0.5, b"event: ping\ndata: {}\n\n")
    tracker._drain_slice()  # (the first slice: the first stream only)
    assert tracker._round is not None and tracker._round[tracker._round_at :] == [late]
    tracker.begin(late, "POST", "http://up/v1/messages", [], raw)
    tracker.drain()
    first = [o for o in got if isinstance(o, O.ReadReceived) and o.turn == tracks[0].turn]
    assert len(first) > 5 and [o.read_index for o in first] == list(range(len(first)))
    started = next(i for i, o in enumerate(got) if isinstance(o, O.AttemptStarted) and o.turn == late.turn)
    (read,) = [i for i, o in enumerate(got) if isinstance(o, O.ReadReceived) and o.turn == late.turn]
    assert started < read

"""The upstream reader decodes a chunked body itself while its chunk lines are plain hex sizes (``_dechunk``: h11
costs an event, a regex and a state-machine step per chunk, and an SSE stream is a chunk per event), and hands the
rest to h11 from a chunk boundary (a chunk extension, spaces, anything odd, the last chunk and its trailers). The
differential: whatever the chunks, their spelling, the split into reads, the trailers, the bytes after the body or a
fault in them, the reader gives what h11 gives (accept or refuse, the payload, read by read, and whether the
connection may be reused)."""

from __future__ import annotations

import asyncio
import contextlib
from itertools import pairwise

import h11
import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net import upstream as U
from inspector.net.upstream import UpstreamPool
from inspector.testing.hyp import examples


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def ours(reads: list[bytes], method: bytes = b"GET") -> tuple[str, list[bytes], bool, bool]:
    """("accept" | "refuse", the payload queued read by read, reusable, decoded here at some point) then EOF."""

    async def go() -> tuple[str, list[bytes], bool, bool]:
        pool = UpstreamPool("http://upstream.test")
        conn = U._Connection(pool)
        conn.connection_made(FakeTransport())
        fut = conn.start(b"", b"", method)
        fast = False
        for r in reads:
            if conn.closed or conn.body_done:  # (as h11s: the verdict at the body's end; a later read is a fault)
                break
            conn.data_received(r)
            fast = fast or conn.chunk is not None
        if not conn.closed and not conn.body_done:
            conn.connection_lost(None)
        pieces = [d for _, d in conn.queue]
        ok = conn.body_done and conn.error is None and fut.done() and not fut.cancelled()
        if not fut.done():
            fut.cancel()
        with contextlib.suppress(BaseException):
            fut.exception()
        return ("accept" if ok else "refuse"), pieces, conn.keep_alive and ok, fast

    return asyncio.run(go())


def h11s(reads: list[bytes], method: bytes = b"GET") -> tuple[str, list[bytes], bool]:
    """The same from h11 alone, fed read by read (the reader's rules on top of h11 do not apply to these heads)."""
    c = h11.Connection(h11.CLIENT, max_incomplete_event_size=U.MAX_HEAD)
    c.send(h11.Request(method=method, target="/", headers=[("Host", "upstream.test")]))
    c.send(h11.EndOfMessage())
    pieces: list[bytes] = []
    try:
        for r in [*reads, b""]:
            c.receive_data(r)
            got = b""
            while True:
                e = c.next_event()
                if isinstance(e, h11.Data):
                    got += e.data
                elif isinstance(e, h11.EndOfMessage):
                    if got:
                        pieces.append(got)
                    reusable = r != b"" and c.their_state is h11.DONE and not c.trailing_data[0]
                    return "accept", pieces, reusable
                elif e is h11.NEED_DATA or e is h11.PAUSED or isinstance(e, h11.ConnectionClosed):
                    break
            if got:
                pieces.append(got)
        return "refuse", pieces, False
    except h11.RemoteProtocolError:
        if got:
            pieces.append(got)
        return "refuse", pieces, False


def splits(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    return [wire[a:b] for a, b in pairwise(points)]


SIZE_SPELLINGS = [
    "{:x}",
    "{:X}",
    "0{:x}",
    "{:x};ext=1",
    "{:x} ",
    "{:x}\t",
    "{:x};",
]
FAULTS = ["none", "footer", "size", "cut", "after", "trailer", "bare-lf", "long-size"]


@st.composite
def chunked(draw: st.DrawFn) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=8))
    plain = draw(st.booleans())
    body = b""
    for c in chunks:
        spelling = "{:x}" if plain else draw(st.sampled_from(SIZE_SPELLINGS))
        body += spelling.format(len(c)).encode() + b"\r\n" + c + b"\r\n"
    last = b"0\r\n" + (b"X-T: 1\r\n" if draw(st.booleans()) else b"") + b"\r\n"
    fault = draw(st.sampled_from(FAULTS))
    if fault == "footer" and chunks:
        i = body.rfind(b"\r\n")
        body = body[:i] + draw(st.sampled_from([b"XY", b"\rX", b"\n\r", b"\n"])) + body[i + 2 :]
    elif fault == "size":
        body = draw(st.sampled_from([b"g\r\n", b"-1\r\n", b"0x5\r\n", b"\r\n", b"+5\r\n"])) + body
    elif fault == "long-size":
        body = b"0" * 20 + b"5\r\nhello\r\n" + body
    elif fault == "bare-lf":
        body = b"5\nhello\r\n" + body
    elif fault == "trailer":
        last = b"0\r\nBad Trailer\r\n\r\n"
    wire = head + body + last
    if fault == "cut":
        wire = wire[: draw(st.integers(len(head), len(wire) - 1))]
    elif fault == "after":
        wire += draw(st.sampled_from([b"X", b"HTTP/1.1 200 OK\r\n\r\n"]))
    return wire


@settings(max_examples=examples(500), deadline=None)
@given(chunked(), st.lists(st.integers(min_value=0, max_value=2_000), max_size=10))
def test_the_chunked_body_decoded_here_is_what_h11_reads(wire: bytes, cuts: list[int]) -> None:
    reads = splits(wire, cuts)
    verdict, pieces, reusable, _fast = ours(reads)
    assert (verdict, pieces, reusable) == h11s(reads)


def test_a_plain_chunked_stream_is_decoded_here_and_the_end_is_h11s() -> None:
    events = [b"event: e\ndata: {}\n\n" * (i + 1) for i in range(30)]
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    reads = splits(wire, [40, 200, 201, 333, 900, 1500])
    verdict, pieces, reusable, fast = ours(reads)
    assert fast  # (h11 read every chunk before: one event each)
    assert (verdict, pieces, reusable) == h11s(reads) == ("accept", pieces, True)
    assert b"".join(pieces) == b"".join(events)


def test_a_malformed_footer_is_h11s_error_without_upstreams_bytes() -> None:
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXYsk-ant-secret"

    async def go() -> str:
        conn = U._Connection(UpstreamPool("http://upstream.test"))
        conn.connection_made(FakeTransport())
        fut = conn.start(b"", b"", b"GET")
        conn.data_received(wire[:55])  # the head and the chunk: the head is handed out
        conn.data_received(wire[55:])
        assert fut.done() and fut.result().status_code == 200
        assert [d for _, d in conn.queue] == [b"hello"]
        assert isinstance(conn.error, httpx2.RemoteProtocolError)
        return str(conn.error)

    text = asyncio.run(go())
    assert text == "upstream sent an invalid chunked body: malformed chunk footer"

"""Per-request costs of the proxy taken off its busy path, checked against what they replace.

- How an unparsed stream ended (``TurnTracker._watch_stop``, the retry rule's input when nobody needs the stream
  parsed): a search for the terminal names at memchr speed comes before the pattern, which was tried at every byte.
  Whatever the stream, its split into reads and the batches a drain sees, the answer is the pattern's over the whole
  stream. (This found that the window carried from one drain to the next, its last 32 bytes, let ``^`` take the
  window's first byte for a line's start: ``\x00event: message_stop`` cut after its ``\x00`` read as a terminal
  line. The line break before a terminal line is now part of the pattern, the stream's start counting as one.)
- The keys a URL carries (``proxy._url_keys``): remembered per URL instead of parsed for every request; the keys
  learned are the same, a new URL's are learned at its first request, and the memo stays bounded.
- What an exchange waits for (``_Watchers.wait``): one future woken by whichever ends first, instead of
  ``asyncio.wait``; the same answers, and nothing left on the shutdown watcher every exchange shares (its wake-ups
  are a set: a shared future's callbacks are a list that each removal scans)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net.turns import _STOP_LINE, TurnTracker
from inspector.testing.hyp import examples

LINES = [
    b"event: message_stop\n",
    b"event:message_stop\r\n",
    b"event: message_stops\n",  # (not a terminal line)
    b"data: [DONE]\n",
    b"data: [DONE]x\n",
    b"event: response.completed\r\n",
    b"event: response.incomplete\n",
    b"event: response.failed\n",
    b"event: response.created\n",
    b"event: content_block_delta\n",
    b'data: {"type":"message_stop"}\n',
    b"\n",
    b"\r",
    b"x",
]


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(LINES), st.binary(max_size=12)), max_size=30),
    st.lists(st.integers(1, 40), min_size=1, max_size=20),
    st.lists(st.integers(1, 4), min_size=1, max_size=10),
)
def test_the_stop_watch_answers_as_the_pattern_over_the_whole_stream(
    parts: list[bytes], cuts: list[int], batches: list[int]
) -> None:
    stream = b"".join(parts)
    reads, i, k = [], 0, 0
    while i < len(stream):
        n = cuts[k % len(cuts)]
        reads.append((0.0, stream[i : i + n]))
        i, k = i + n, k + 1
    track = SimpleNamespace(saw_stop=False, tail=b"")
    j, k = 0, 0
    while j < len(reads):  # (the reads a drain finds pending, a few at a time)
        n = batches[k % len(batches)]
        TurnTracker._watch_stop(track, reads[j : j + n])  # type: ignore[arg-type]
        j, k = j + n, k + 1
    assert track.saw_stop == (_STOP_LINE.search(b"\n" + stream) is not None)  # (the start is a line's start)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9",
        "http://user:sk-ant-api03-secretsecretsecret@127.0.0.1:9",
        "http://h/v1?key=sk-secret0123456789",
    ],
)
def test_a_urls_keys_are_learned_at_its_first_request_and_remembered(url: str) -> None:
    from inspector.core.redaction import credential_values
    from inspector.net import proxy as P

    assert list(P._url_keys(url)) == credential_values((), url)
    assert P._url_keys(url) is P._url_keys(url)  # (parsed once)
    other = url + "&x=1" if "?" in url else url + "/?api_key=sk-another0123456789"
    assert list(P._url_keys(other)) == credential_values((), other)
    # a client sending ever new targets: the memo stays bounded, and a key in the newest one is still found
    for i in range(P.URL_MEMO * 2):
        P._url_keys(f"http://h/v1/{i}?q={i}")
    assert P._url_keys.cache_info().currsize <= P.URL_MEMO
    late = "http://h/v1/late?key=sk-late0123456789abcdef"
    assert P._url_keys(late) == ("sk-late0123456789abcdef",)


async def test_the_watchers_tell_which_ended_first_and_leave_nothing_on_the_shared_stop() -> None:
    """An exchange waits for upstream (headers, then the body) while watching the client's disconnect and the
    proxy's shutdown (one watcher shared by every exchange): the answer names what ended first; the main future
    wins when it is done too; a wait leaves no wake-up on the shared shutdown (1,000 exchanges share it), and many
    exchanges waiting at once are each woken by the shutdown, once."""
    from inspector.net import proxy as P

    async def never() -> dict[str, str]:
        await asyncio.Event().wait()
        return {}

    async def gone_now() -> dict[str, str]:
        return {"type": "http.disconnect"}

    loop = asyncio.get_running_loop()
    stop = P._Shutdown(loop.create_future())
    w = P._Watchers(never, stop)
    main: asyncio.Future[Any] = loop.create_future()
    loop.call_later(0.01, main.set_result, 1)
    assert await w.wait(main, "headers") == "headers"
    assert await w.wait(main, "headers") == "headers"  # (already done: at once)
    await w.close()

    w = P._Watchers(gone_now, stop)
    assert await w.wait(loop.create_future(), "headers") == "disconnected"
    await w.close()

    w = P._Watchers(never, stop)
    pending = loop.create_future()
    waiting = asyncio.ensure_future(w.wait(pending, "done"))
    await asyncio.sleep(0)
    stop.task.set_result(True)
    assert await waiting == "closing"
    done_too: asyncio.Future[Any] = loop.create_future()
    done_too.set_result(None)
    assert await w.wait(done_too, "done") == "done"  # (main done as well: main wins)
    await w.close()

    shared = P._Shutdown(loop.create_future())
    for _ in range(50):
        w = P._Watchers(never, shared)
        main = loop.create_future()
        loop.call_soon(main.set_result, 1)
        assert await w.wait(main, "done") == "done"
        await w.close()
    assert not shared.wakes and not shared.task._callbacks[1:]  # (every wait took its wake-up off again)

    watchers = [P._Watchers(never, shared) for _ in range(50)]  # 50 exchanges waiting at once
    mains = [loop.create_future() for _ in watchers]
    waits = [asyncio.ensure_future(w.wait(m, "done")) for w, m in zip(watchers, mains, strict=True)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(shared.wakes) == 50
    mains[0].set_result(None)
    assert await waits[0] == "done"
    assert len(shared.wakes) == 49  # (the one that ended took its wake-up back)
    shared.task.set_result(True)
    assert await asyncio.wait_for(asyncio.gather(*waits[1:]), 5) == ["closing"] * 49
    assert not shared.wakes
    late = P._Watchers(never, shared)  # (waiting after the shutdown began: woken at once)
    assert await asyncio.wait_for(late.wait(loop.create_future(), "done"), 5) == "closing"
    for w in (*watchers, late):
        await w.close()

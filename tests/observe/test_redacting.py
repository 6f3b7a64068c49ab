"""RedactingPublisher: no known key reaches a subscriber of the live observations (the dashboard), whatever its
split into reads or deltas and whatever its JSON escaping; nothing is lost, reordered or left held."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, AnyStr

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.redaction import REDACTED, StreamRedactor, mask_text, secret_spans
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.state.fold import DashboardState
from inspector.stream.sse import SSEDecoder
from inspector.testing.hyp import examples
from inspector.testing.secrets import dashboard_texts, stream_observations
from inspector.testing.streamgen import (
    block_start,
    block_stop,
    generate,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
    thinking_delta,
    tool_start,
)

KEY = "sk-ant-canary-0123456789abcdef"


def u_escape(text: str, which: set[int] | None = None) -> str:
    """``text`` as the inside of a JSON string, the characters at ``which`` (all if None) as \\uXXXX."""
    out = []
    for i, c in enumerate(text):
        out.append(f"\\u{ord(c):04x}" if which is None or i in which else orjson.dumps(c).decode()[1:-1])
    return "".join(out)


def delta_event(index: int, dtype: str, field: str, inside: str) -> bytes:
    """A delta event whose text field is the JSON string ``"inside"`` (already escaped)."""
    data = f'{{"type":"content_block_delta","index":{index},"delta":{{"type":"{dtype}","{field}":"{inside}"}}}}'
    return f"event: content_block_delta\ndata: {data}\n\n".encode()


def text_stream(fragments: list[str], escape: set[int] | None = None, *, end: bool = True) -> bytes:
    """A text block whose deltas carry ``fragments``; characters at ``escape`` (positions in the joined text) are
    \\u-escaped on the wire. ``end=False``: the stream is cut after the last delta (no stop)."""
    out = [sse(message_start(), text_start(0))]
    pos = 0
    for frag in fragments:
        which = {i - pos for i in escape or () if pos <= i < pos + len(frag)}
        out.append(delta_event(0, "text_delta", "text", u_escape(frag, which)))
        pos += len(frag)
    if end:
        out.append(sse(block_stop(0), message_delta("end_turn"), message_stop()))
    return b"".join(out)


def split(data: AnyStr, points: Iterable[int]) -> list[AnyStr]:
    cuts: list[int] = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]


def publish(
    observations: Iterable[O.Observation],
    secrets: Sequence[str] = (KEY,),
    late_at: int | None = None,
    late: str = KEY,
) -> list[O.Observation]:
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, secrets)
    for i, obs in enumerate(observations):
        if late_at == i:
            pub.learn([late])
        pub.publish(obs)
    pub.close()
    return out


def reads_of(published: list[O.Observation], attempt: int = 0) -> bytes:
    return b"".join(o.data for o in published if isinstance(o, O.ReadReceived) and o.attempt == attempt)


def fragments_of(published: list[O.Observation], index: int = 0) -> str:
    return "".join(o.fragment for o in published if isinstance(o, O.BlockDelta) and o.index == index)


def event_fragments_of(published: list[O.Observation], index: int = 0) -> str:
    """The block's text as the SSE pane's event details show it, event after event."""
    out = []
    for o in published:
        if isinstance(o, O.SSEEventSeen) and o.event_type == "content_block_delta" and o.index == index:
            d = orjson.loads(o.sse.data)["delta"]
            out.append(d.get("text") or d.get("partial_json") or d.get("thinking") or "")
    return "".join(out)


def assert_clean(published: list[O.Observation], key: str = KEY) -> DashboardState:
    """No observation, no joined stream and no text of the dashboard holds the key, as it is or escaped."""
    for o in published:
        blob = orjson.dumps(o.to_json(), default=str).decode()
        assert not secret_spans(blob, [key]), o
    joined = [reads_of(published).decode("utf-8", "replace"), fragments_of(published), event_fragments_of(published)]
    for i in range(1, 3):
        joined += [fragments_of(published, i), event_fragments_of(published, i)]
    state = DashboardState().apply_all(published)
    for text in [*joined, *dashboard_texts(state)]:
        assert not secret_spans(text, [key]), text
    return state


def assert_complete(observations: list[O.Observation], published: list[O.Observation]) -> None:
    """Nothing lost or reordered: the same observations in the same order (one more read at most: what was held
    at the end), every event's offsets pointing at its bytes in the published reads."""
    kinds = [type(o).__name__ for o in observations]
    got = [type(o).__name__ for o in published]
    if len(got) == len(kinds) + 1:  # the held bytes, published at the attempt's end
        i = len(got) - 1 - got[::-1].index("ReadReceived")
        assert got[i + 1 :] == ["AttemptEnded"] or got[i + 1 :] == kinds[len(kinds) - len(got[i + 1 :]) :]
        got = got[:i] + got[i + 1 :]
    assert got == kinds
    data = reads_of(published)
    for o in published:
        if isinstance(o, O.SSEEventSeen):
            (event,) = SSEDecoder().feed(data[o.sse.start : o.sse.end])
            if event.data != o.sse.data:  # (the same JSON, escaped another way: the recording's bytes are kept)
                assert orjson.loads(event.data) == orjson.loads(o.sse.data), (o.sse, event)


# --- the paths ------------------------------------------------------------------------------------------------------


def test_without_secrets_observations_pass_as_they_are() -> None:
    observations = stream_observations([text_stream(["a", KEY, "b"])])
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append)
    for obs in observations:
        pub.publish(obs)
    assert len(out) == len(observations) and all(a is b for a, b in zip(out, observations, strict=True))


def test_key_echoed_in_one_read() -> None:
    observations = stream_observations([text_stream([f"your key: {KEY}."])])
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == f"your key: {REDACTED}."


def test_key_echoed_across_two_reads() -> None:
    data = text_stream([f"your key: {KEY}."])
    cut = data.index(b"canary")
    observations = stream_observations([data[:cut], data[cut:]])
    state = DashboardState().apply_all(observations)
    assert KEY in dashboard_texts(state)[0]  # (the canary is there to mask: the joined raw reads show it)
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == f"your key: {REDACTED}."


@pytest.mark.parametrize("per_read", [None, 1, 7])
def test_key_echoed_one_character_per_delta(per_read: int | None) -> None:
    text = f"the key is {KEY}, keep it"
    data = text_stream(list(text))
    reads = [data] if per_read is None else [data[i : i + per_read] for i in range(0, len(data), per_read)]
    observations = stream_observations(reads)
    published = publish(observations)
    state = assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == event_fragments_of(published) == f"the key is {REDACTED}, keep it"
    (block,) = state.blocks.values()
    assert block.content is not None
    assert block.joined() == block.content["text"] == f"the key is {REDACTED}, keep it"


def test_u_escaped_key_in_text_deltas() -> None:
    text = f"key {KEY} end"
    escaped = set(range(4, 4 + len(KEY), 2))  # every other character of the key as \\uXXXX on the wire
    observations = stream_observations([text_stream(split(text, [6, 12, 20]), escaped)])
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == f"key {REDACTED} end"


def test_key_written_escaped_in_the_text_itself() -> None:
    """The model writes ``\\u0073k-...``: the text holds the escape (the wire holds it escaped twice)."""
    text = "a " + u_escape(KEY[:3]) + KEY[3:] + " b"
    observations = stream_observations([text_stream(split(text, [5, 9, 14, 30]))])
    published = publish(observations)
    assert_clean(published)
    assert fragments_of(published) == f"a {REDACTED} b"


def tool_stream(fragments: list[str]) -> bytes:
    return b"".join(
        [
            sse(message_start(), tool_start(0, "toolu_1", "lookup")),
            *(sse(json_delta(0, f)) for f in fragments),
            sse(block_stop(0), message_delta("tool_use"), message_stop()),
        ]
    )


@pytest.mark.parametrize("escaped", [False, True])
def test_key_inside_a_tool_input_across_deltas(escaped: bool) -> None:
    value = u_escape(KEY) if escaped else KEY  # \\u-escaped in the JSON text of the input
    raw = '{"query": "find ' + value + ' now", "n": 1}'
    observations = stream_observations([tool_stream(split(raw, range(0, len(raw), 3)))])
    published = publish(observations)
    state = assert_clean(published)
    assert_complete(observations, published)
    joined = fragments_of(published)
    assert orjson.loads(joined) == {"query": f"find {REDACTED} now", "n": 1}  # the assembled input still parses
    assert event_fragments_of(published) == joined
    (use,) = [o for o in published if isinstance(o, O.ToolUse)]
    assert use.input == {"query": f"find {REDACTED} now", "n": 1}
    (tool,) = state.tools.values()
    assert tool.input == use.input


def test_key_across_thinking_deltas_and_in_two_blocks() -> None:
    data = b"".join(
        [
            sse(message_start(), block_start(0, {"type": "thinking", "thinking": ""})),
            *(sse(thinking_delta(0, f)) for f in split(f"hm {KEY}", [2, 9, 15])),
            sse(block_stop(0), text_start(1)),
            *(sse(text_delta(1, f)) for f in split(f"{KEY}!", [3, 20])),
            sse(block_stop(1), message_delta("end_turn"), message_stop()),
        ]
    )
    observations = stream_observations(split(data, range(0, len(data), 50)))
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published, 0) == f"hm {REDACTED}"
    assert fragments_of(published, 1) == f"{REDACTED}!"


def test_a_key_learned_late() -> None:
    """A key first seen after the attempt began (the proxy learns keys from requests): masked from then on, in
    the attempt under way too, and the events' offsets still point at their bytes."""
    first = sse(message_start(), text_start(0), text_delta(0, "hello "))
    rest = text_stream(list(f"{KEY} bye"))[len(sse(message_start(), text_start(0))) :]
    observations = stream_observations([first, rest[:40], rest[40:]])
    at = next(i for i, o in enumerate(observations) if isinstance(o, O.ReadReceived) and o.read_index == 1)
    published = publish(observations, secrets=(), late_at=at)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == f"hello {REDACTED} bye"


def test_a_key_at_the_very_end_of_a_cut_attempt_is_flushed_masked() -> None:
    """The stream stops right after the key (no block stop, no message end): what was held comes out at the
    attempt's end, masked; a prefix of the key held to the end comes out as it is (nothing is lost)."""
    observations = stream_observations([text_stream(["so: ", *KEY], end=False)])
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published) == f"so: {REDACTED}"
    end = next(i for i, o in enumerate(published) if isinstance(o, O.AttemptEnded))
    assert all(not isinstance(o, O.BlockDelta) for o in published[end:])

    prefix = KEY[:12]
    observations = stream_observations([text_stream(["so: ", *prefix], end=False)])
    published = publish(observations)
    assert fragments_of(published) == f"so: {prefix}"
    assert reads_of(published) == text_stream(["so: ", *prefix], end=False)


def test_a_held_prefix_is_not_shown_before_the_text_goes_on() -> None:
    """While the text ends with what could begin the key, its deltas (and what follows them in the attempt) wait."""
    observations = stream_observations([text_stream(["ok ", KEY[:10]], end=False)])
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, [KEY])
    for obs in observations[:-1]:  # everything but AttemptEnded
        pub.publish(obs)
    assert fragments_of(out) == "ok "
    assert KEY[:10].encode() not in reads_of(out)
    pub.publish(O.ToolStateChanged(1.0, 0, 0, "t", "x", 1, "queued", None, None, None, {}))  # waits in order
    pub.publish(O.LoopStateChanged(1.0, "paused"))  # (of no attempt: not held)
    assert isinstance(out[-1], O.LoopStateChanged)
    pub.publish(observations[-1])
    assert fragments_of(out) == "ok " + KEY[:10]
    assert [type(o) for o in out[-3:]] == [O.ToolStateChanged, O.ReadReceived, O.AttemptEnded]


def test_whole_values_are_masked_also_escaped() -> None:
    escaped = u_escape(KEY, set(range(0, len(KEY), 3)))
    observations = [
        O.BlockClosed(1.0, 0, 0, 0, {"type": "tool_use", "input": None, "input_raw": '{"q": "' + escaped}, "bad"),
        O.AttemptEnded(1.0, 0, 0, "failed", f"error event: api_error: {KEY}", None),
        O.HttpTryFailed(0.5, 0, 0, 0, "POST", "u", 0.0, 500, {}, "api_error", KEY, {"k": [KEY]}, None, None),
    ]
    published = publish(observations)
    assert_clean(published)
    closed = published[0]
    assert isinstance(closed, O.BlockClosed)
    assert closed.content["input_raw"] == '{"q": "' + REDACTED


def test_two_attempts_are_independent() -> None:
    """A held fragment in one attempt does not hold another attempt's observations (the proxy's are concurrent)."""
    a = stream_observations([text_stream(["x ", KEY[:8]], end=False)], turn=0, attempt=0)
    b = stream_observations([text_stream(["plain text"])], turn=1, attempt=0)
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, [KEY])
    for obs in a[:-1] + b:
        pub.publish(obs)
    assert "plain text" in "".join(o.fragment for o in out if isinstance(o, O.BlockDelta) and o.turn == 1)
    assert any(isinstance(o, O.AttemptEnded) and o.turn == 1 for o in out)
    pub.publish(a[-1])
    assert "".join(o.fragment for o in out if isinstance(o, O.BlockDelta) and o.turn == 0) == "x " + KEY[:8]


# --- any split ------------------------------------------------------------------------------------------------------

TEXT = st.text(alphabet='sk-ant ab\n\\"é', max_size=12)


@settings(max_examples=examples(150), deadline=None)
@given(
    before=TEXT,
    after=TEXT,
    copies=st.integers(1, 2),
    delta_cuts=st.lists(st.integers(0, 200), max_size=40),
    read_cuts=st.lists(st.integers(0, 4000), max_size=30),
    escape=st.sets(st.integers(0, 120), max_size=40),
    cut_stream=st.booleans(),
)
def test_no_split_lets_the_key_through(
    before: str,
    after: str,
    copies: int,
    delta_cuts: list[int],
    read_cuts: list[int],
    escape: set[int],
    cut_stream: bool,
) -> None:
    """For any split of a stream holding the key into deltas and reads, any escaping: the joined published reads
    are the recording's (the StreamRedactor's) bytes, the joined fragments are the masked text, no text of the
    dashboard holds the key, and nothing is lost or reordered."""
    text = before + (KEY + after) * copies
    data = text_stream(split(text, delta_cuts), escape, end=not cut_stream)
    observations = stream_observations(split(data, read_cuts))
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    recorder = StreamRedactor([KEY])
    assert reads_of(published) == recorder.feed(data) + recorder.flush()
    assert fragments_of(published) == event_fragments_of(published) == mask_text(text, [KEY])


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 5000), max_size=20))
def test_without_the_key_a_stream_is_published_unchanged(seed: int, cuts: list[int]) -> None:
    """With a key that never occurs, the published observations say the same as the originals (read boundaries
    may move, the bytes and fragments do not change)."""
    data = generate(seed).data
    observations = stream_observations(split(data, cuts))
    published = publish(observations)
    assert_complete(observations, published)
    assert reads_of(published) == data
    for index in range(4):
        assert fragments_of(published, index) == fragments_of(observations, index)
    strip = [o for o in published if not isinstance(o, O.ReadReceived)]
    assert strip == [o for o in observations if not isinstance(o, O.ReadReceived)]


def _split_key_stream() -> list[O.Observation]:
    words = ["one ", "two ", "three ", "the key "]
    text = "".join(words) + f"{KEY} is here, and four five"
    k = len("".join(words))
    cuts = [0, 4, 8, 14, k + 1, k + 7, k + 14, k + len(KEY) + 9, len(text) - 5, len(text)]  # the key over 3 deltas
    return stream_observations([text_stream([text[a:b] for a, b in itertools.pairwise(cuts)], escape={k + 2, k + 12})])


def test_a_delta_event_shares_its_blockdeltas_fragment_instead_of_parsing_its_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stream engine parsed every delta already (BlockDelta.fragment): the publisher uses that, and parses an
    event's JSON again only to rewrite one that held (part of) a key. Still masked across deltas, \\u-escaped."""
    import inspector.observe.redacting as redacting

    parsed: list[str] = []
    real = redacting._fragment_of

    def counting(data: str, *args: Any) -> tuple[dict[str, Any], dict[str, Any], str, int] | None:
        parsed.append(data)
        return real(data, *args)

    monkeypatch.setattr(redacting, "_fragment_of", counting)
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, [KEY])
    obs = _split_key_stream()
    for o in obs:
        pub.publish(o)
    pub.close()
    deltas = [o for o in obs if isinstance(o, O.BlockDelta)]
    rewritten = [
        a
        for a, b in zip(obs, out, strict=True)
        if isinstance(a, O.SSEEventSeen) and isinstance(b, O.SSEEventSeen) and a.sse.data != b.sse.data
    ]
    assert len(deltas) == 9 and 1 <= len(parsed) == len(rewritten) <= 4  # only events that held part of the key
    state = DashboardState().apply_all(out)
    texts = dashboard_texts(state)
    assert not any(secret_spans(t, [KEY]) for t in texts)
    assert any(f"the key {REDACTED} is here, and four five" in t for t in texts)
    assert [type(o) for o in out] == [type(o) for o in obs]  # nothing lost or reordered


def test_a_delta_event_without_its_blockdelta_is_still_masked() -> None:
    """A producer that publishes the events only (or something else between an event and its BlockDelta): the
    event's fragment is then taken from its JSON, and a key split across those events is still masked."""
    obs = [o for o in _split_key_stream() if not isinstance(o, O.BlockDelta)]
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, [KEY])
    for o in obs:
        pub.publish(o)
    pub.close()
    assert len(out) == len(obs)
    events = [o for o in out if isinstance(o, O.SSEEventSeen) and o.event_type == "content_block_delta"]
    joined = "".join(orjson.loads(e.sse.data)["delta"]["text"] for e in events)
    assert joined == f"one two three the key {REDACTED} is here, and four five"


def test_a_failure_of_the_masking_loses_nothing_and_leaks_no_whole_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should masking fail (a bug: here, the reads' redactor raises from its second read on), the producer is not
    broken: every observation is still published, the attempt masked as whole values from then on, the failure said
    in ``errors`` (and the bus's). Before, the exception went up into the producer: a proxy's drain that raised lost
    every later observation of the session, and watch still said finished."""
    calls = [0]
    real = StreamRedactor.feed

    def failing(self: StreamRedactor, data: bytes) -> bytes:
        calls[0] += 1
        if calls[0] >= 2:
            raise RuntimeError("boom")
        return real(self, data)

    monkeypatch.setattr(StreamRedactor, "feed", failing)
    data = text_stream([f"your key: {KEY}.", " and more"])
    reads = [data[:40], data[40:200], data[200:]]
    observations = stream_observations(reads)
    bus = O.ObservationBus()
    published: list[O.Observation] = []
    bus.subscribe(published.append)
    pub = RedactingPublisher(bus, [KEY])
    for obs in observations:
        pub.publish(obs)  # never raises
    pub.close()
    assert [type(o).__name__ for o in published].count("ReadReceived") >= len(reads)
    assert [type(o) for o in published if not isinstance(o, O.ReadReceived)] == [
        type(o) for o in observations if not isinstance(o, O.ReadReceived)
    ]
    for o in published:
        assert not secret_spans(orjson.dumps(o.to_json(), default=str).decode(), [KEY]), o
    assert pub.errors and "redaction failed (RuntimeError: boom)" in pub.errors[0]
    assert bus.errors == pub.errors

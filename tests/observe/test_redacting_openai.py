"""Canaries for OpenAI streams: a key the model echoes in Chat Completions deltas (``delta.content``,
``delta.tool_calls[i].function.arguments``) or Responses events (``response.output_text.delta``,
``response.function_call_arguments.delta``), split across deltas and reads or ``\\u``-escaped, reaches neither the
recording (the StreamRedactor's bytes), nor a subscriber of the live observations, nor any text of the dashboard."""

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
from inspector.testing.hyp import examples
from inspector.testing.secrets import assert_no_key, dashboard_texts, stream_observations

KEY = "sk-proj-canary-0123456789abcdef"


def u_escape(text: str, which: set[int] | None = None) -> str:
    """``text`` as the inside of a JSON string, the characters at ``which`` (all if None) as \\uXXXX."""
    out = []
    for i, c in enumerate(text):
        out.append(f"\\u{ord(c):04x}" if which is None or i in which else orjson.dumps(c).decode()[1:-1])
    return "".join(out)


def _escaped(frags: list[str], escape: set[int] | None) -> list[str]:
    """Each fragment as the inside of a JSON string; characters at ``escape`` (positions in the joined text)
    \\u-escaped."""
    out, pos = [], 0
    for frag in frags:
        out.append(u_escape(frag, {i - pos for i in escape or () if pos <= i < pos + len(frag)}))
        pos += len(frag)
    return out


def _chunk(delta_json: str, finish: str | None = None) -> bytes:
    fin = "null" if finish is None else f'"{finish}"'
    return (
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":'
        + f'[{{"index":0,"delta":{delta_json},"logprobs":null,"finish_reason":{fin}}}]}}\n\n'.encode()
    )


def chat_stream(
    text: list[str], args: Sequence[str] = (), escape: set[int] | None = None, *, end: bool = True
) -> bytes:
    """A chat answer: ``text`` as ``delta.content`` chunks (the first one opens the block), then one tool call
    whose ``function.arguments`` come in ``args`` (characters at ``escape``, positions in text + args, escaped)."""
    esc = _escaped([*text, *args], escape)
    out = [_chunk('{"role":"assistant","content":""}')]
    out += [_chunk(f'{{"content":"{t}"}}') for t in esc[: len(text)]]
    if args:
        first = '{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}'
        out.append(_chunk(f'{{"tool_calls":[{first}]}}'))
        for a in esc[len(text) :]:
            out.append(_chunk(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":"{a}"}}}}]}}'))
    if end:
        out += [_chunk("{}", "tool_calls" if args else "stop"), b"data: [DONE]\n\n"]
    return b"".join(out)


def _rev(etype: str, seq: int, body: str) -> bytes:
    return f'event: {etype}\ndata: {{"type":"{etype}","sequence_number":{seq},{body}}}\n\n'.encode()


def responses_stream(
    text: list[str], args: Sequence[str] = (), escape: set[int] | None = None, *, end: bool = True
) -> bytes:
    """A Responses answer: a message item whose ``response.output_text.delta`` events carry ``text``, then a
    function_call item whose ``response.function_call_arguments.delta`` events carry ``args``."""
    esc = _escaped([*text, *args], escape)
    resp = '"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"model":"gpt-test"}'
    out = [_rev("response.created", 0, resp), _rev("response.in_progress", 1, resp)]
    seq = 2
    item = (
        '"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}'
    )
    out.append(_rev("response.output_item.added", seq, item))
    seq += 1
    part = '"item_id":"msg_1","output_index":0,"content_index":0'
    out.append(_rev("response.content_part.added", seq, part + ',"part":{"type":"output_text","text":""}'))
    seq += 1
    for t in esc[: len(text)]:
        out.append(_rev("response.output_text.delta", seq, part + f',"delta":"{t}"'))
        seq += 1
    if not end and not args:
        return b"".join(out)
    whole = "".join(esc[: len(text)])
    out.append(_rev("response.output_text.done", seq, part + f',"text":"{whole}"'))
    out.append(_rev("response.output_item.done", seq + 1, '"output_index":0,"item":{"id":"msg_1","type":"message"}'))
    seq += 2
    if args:
        fc = '"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"",'
        out.append(_rev("response.output_item.added", seq, fc + '"call_id":"call_1","name":"lookup"}'))
        seq += 1
        for a in esc[len(text) :]:
            out.append(
                _rev("response.function_call_arguments.delta", seq, f'"item_id":"fc_1","output_index":1,"delta":"{a}"')
            )
            seq += 1
        if end:
            whole = "".join(esc[len(text) :])
            out.append(
                _rev(
                    "response.function_call_arguments.done",
                    seq,
                    f'"item_id":"fc_1","output_index":1,"arguments":"{whole}"',
                )
            )
            seq += 1
    if end:
        out.append(_rev("response.completed", seq, resp.replace("in_progress", "completed")))
    return b"".join(out)


STREAMS = {"openai_chat": chat_stream, "openai_responses": responses_stream}


def split(data: AnyStr, points: Iterable[int]) -> list[AnyStr]:
    cuts: list[int] = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]


def publish(observations: Iterable[O.Observation], secrets: Sequence[str] = (KEY,)) -> list[O.Observation]:
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, secrets)
    for obs in observations:
        pub.publish(obs)
    pub.close()
    return out


def reads_of(published: list[O.Observation]) -> bytes:
    return b"".join(o.data for o in published if isinstance(o, O.ReadReceived))


def fragments_of(published: list[O.Observation], index: int) -> str:
    return "".join(o.fragment for o in published if isinstance(o, O.BlockDelta) and o.index == index)


def event_fragments_of(published: list[O.Observation], index: int) -> str:
    """The block's text as the SSE pane's event details show it, event after event (the OpenAI JSON)."""
    out = []
    for o in published:
        if not (isinstance(o, O.SSEEventSeen) and o.event_type == "content_block_delta" and o.index == index):
            continue
        d = orjson.loads(o.sse.data)
        if "choices" in d:
            delta = d["choices"][0]["delta"]
            calls = delta.get("tool_calls") or []
            out.append(delta.get("content") or "".join(c["function"].get("arguments") or "" for c in calls))
        else:
            out.append(d["delta"])
    return "".join(out)


def assert_clean(published: list[O.Observation]) -> DashboardState:
    """No observation, no joined stream and no text of the dashboard holds the key, as it is or escaped."""
    for o in published:
        blob = orjson.dumps(o.to_json(), default=str).decode()
        assert not secret_spans(blob, [KEY]), o
    joined = [reads_of(published).decode("utf-8", "replace")]
    for i in range(3):
        joined += [fragments_of(published, i), event_fragments_of(published, i)]
    state = DashboardState().apply_all(published)
    for text in [*joined, *dashboard_texts(state)]:
        assert not secret_spans(text, [KEY]), text
    # also escaped twice (the arguments of a .done event are a JSON text inside a JSON string)
    assert_no_key(KEY, {"observations": orjson.dumps([o.to_json() for o in published], default=str)})
    return state


def assert_complete(observations: list[O.Observation], published: list[O.Observation]) -> None:
    kinds = [type(o).__name__ for o in observations]
    got = [type(o).__name__ for o in published]
    if len(got) == len(kinds) + 1:  # the held bytes, published at the attempt's end
        i = len(got) - 1 - got[::-1].index("ReadReceived")
        got = got[:i] + got[i + 1 :]
    assert got == kinds


def recorded(data: bytes, reads: list[bytes]) -> bytes:
    """What the recording keeps of these reads (its bytes go through a StreamRedactor)."""
    r = StreamRedactor([KEY])
    return b"".join(r.feed(x) for x in reads) + r.flush()


# --- the canaries -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", list(STREAMS))
def test_key_split_across_two_text_deltas(family: str) -> None:
    text = f"your key: {KEY}."
    cut = text.index("canary")
    data = STREAMS[family]([text[:cut], text[cut:]])
    reads = split(data, [data.index(b"canary") + 2])  # and across two reads
    observations = stream_observations(reads, family=family)
    assert any(secret_spans(t, [KEY]) for t in dashboard_texts(DashboardState().apply_all(observations)))
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published, 0) == event_fragments_of(published, 0) == f"your key: {REDACTED}."
    rec = recorded(data, reads)
    assert not secret_spans(rec.decode(), [KEY]) and reads_of(published) == rec


@pytest.mark.parametrize("family", list(STREAMS))
@pytest.mark.parametrize("escaped", [False, True])
def test_key_split_across_tool_argument_deltas(family: str, escaped: bool) -> None:
    raw = '{"query": "find ' + (u_escape(KEY) if escaped else KEY) + ' now", "n": 1}'
    data = STREAMS[family](["ok"], split(raw, range(0, len(raw), 4)))
    observations = stream_observations(split(data, range(0, len(data), 97)), family=family)
    published = publish(observations)
    state = assert_clean(published)
    assert_complete(observations, published)
    joined = fragments_of(published, 1)
    assert orjson.loads(joined) == {"query": f"find {REDACTED} now", "n": 1}  # the arguments still parse
    assert event_fragments_of(published, 1) == joined
    (use,) = [o for o in published if isinstance(o, O.ToolUse)]
    assert use.input == {"query": f"find {REDACTED} now", "n": 1}
    assert [t.input for t in state.tools.values()] == [use.input]
    assert not secret_spans(recorded(data, [data]).decode(), [KEY])


@pytest.mark.parametrize("family", list(STREAMS))
def test_u_escaped_key_one_character_per_delta(family: str) -> None:
    text = f"k {KEY} e"
    escape = set(range(2, 2 + len(KEY), 2))  # every other character of the key as \\uXXXX on the wire
    data = STREAMS[family](list(text), [], escape)
    assert KEY.encode() not in data
    observations = stream_observations([data], family=family)
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert fragments_of(published, 0) == f"k {REDACTED} e"
    assert not secret_spans(recorded(data, [data]).decode(), [KEY])


def test_chat_chunk_that_opens_the_block_with_part_of_the_key() -> None:
    """The first content chunk opens the block (content_block_start) and streams its first fragment: both events
    show the chunk with the key masked."""
    data = chat_stream([KEY[:12], KEY[12:] + " end"])
    published = publish(stream_observations([data], family="openai_chat"))
    assert_clean(published)
    start = [o for o in published if isinstance(o, O.SSEEventSeen) and o.event_type == "content_block_start"]
    assert start and all(KEY[:12] not in o.sse.data for o in start)
    assert REDACTED in start[0].sse.data


@pytest.mark.parametrize("family", list(STREAMS))
def test_a_key_at_the_end_of_a_cut_stream_is_flushed_masked(family: str) -> None:
    data = STREAMS[family](["so: ", *KEY], [], None, end=False)
    observations = stream_observations([data], family=family)
    published = publish(observations)
    assert_clean(published)
    assert fragments_of(published, 0) == f"so: {REDACTED}"


@pytest.mark.parametrize("family", list(STREAMS))
def test_without_the_key_nothing_changes(family: str) -> None:
    data = STREAMS[family](["hello ", "world"], ['{"a":', ' "sk-"}'])
    observations = stream_observations(split(data, [50, 51, 300]), family=family)
    published = publish(observations)
    assert reads_of(published) == data
    strip = [o for o in published if not isinstance(o, O.ReadReceived)]
    assert strip == [o for o in observations if not isinstance(o, O.ReadReceived)]


TEXT = st.text(alphabet='sk-proj ab\n\\"é', max_size=10)


@settings(max_examples=examples(120), deadline=None)
@given(
    family=st.sampled_from(list(STREAMS)),
    in_args=st.booleans(),
    before=TEXT,
    after=TEXT,
    delta_cuts=st.lists(st.integers(0, 200), max_size=30),
    read_cuts=st.lists(st.integers(0, 6000), max_size=20),
    escape=st.sets(st.integers(0, 120), max_size=30),
    cut_stream=st.booleans(),
)
def test_no_split_lets_the_key_through(
    family: str,
    in_args: bool,
    before: str,
    after: str,
    delta_cuts: list[int],
    read_cuts: list[int],
    escape: set[int],
    cut_stream: bool,
) -> None:
    """Any split of the key into deltas (content or tool arguments, either endpoint) and reads, any escaping:
    the recording's bytes, the published observations and the dashboard hold no key; the joined fragments are
    the masked text; nothing is lost or reordered."""
    text = before + KEY + after
    frags = split(text, delta_cuts)
    data = STREAMS[family](["x"] if in_args else frags, frags if in_args else [], escape, end=not cut_stream)
    reads = split(data, read_cuts)
    observations = stream_observations(reads, family=family)
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert reads_of(published) == recorded(data, reads)
    index = 1 if in_args else 0
    assert fragments_of(published, index) == event_fragments_of(published, index) == mask_text(text, [KEY])


@pytest.mark.parametrize("family", list(STREAMS))
def test_a_key_partly_escaped_in_the_arguments_text_is_masked_in_the_done_events(family: str) -> None:
    """The arguments text itself holds ``\\u0073k-...`` (the model escaped the first characters): on the wire it is
    escaped twice in the events that carry the whole text (Responses ``.done``, the final output), and masked there
    too."""
    raw = '{"q": "' + u_escape(KEY[:5]) + KEY[5:] + '"}'
    data = STREAMS[family](["ok"], split(raw, [4, 15, 30]))
    observations = stream_observations([data], family=family)
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    (use,) = [o for o in published if isinstance(o, O.ToolUse)]
    assert use.input == {"q": REDACTED}
    assert_no_key(KEY, {"recording": recorded(data, [data])})


def test_one_chat_chunk_carrying_two_tool_calls_each_with_part_of_the_key() -> None:
    """Parallel tool calls whose argument fragments share chunks (each chunk holds a piece of both): each call's
    text is joined on its own, a chunk goes out once both of its fragments are safe."""
    a = '{"q": "' + KEY + '"}'
    b = '{"r": "x' + KEY + 'y"}'
    ca, cb = 10, 14

    def calls(*entries: str) -> bytes:
        return _chunk('{"tool_calls":[' + ",".join(entries) + "]}")

    def args(i: int, text: str) -> str:
        return f'{{"index":{i},"function":{{"arguments":{orjson.dumps(text).decode()}}}}}'

    start = '{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}'
    data = b"".join(
        [
            _chunk('{"role":"assistant","content":null}'),
            calls(start % (0, 0), start % (1, 1)),
            calls(args(0, a[:ca]), args(1, b[:cb])),
            calls(args(0, a[ca:]), args(1, b[cb:])),
            _chunk("{}", "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    rec = recorded(data, [data])
    assert_no_key(KEY, {"recording": rec})
    ins = [orjson.loads(c["function"]["arguments"]) for c in _joined_calls(rec)]
    assert ins == [{"q": REDACTED}, {"r": f"x{REDACTED}y"}]
    observations = stream_observations(split(data, [100, 400, 700]), family="openai_chat")
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert [o.input for o in published if isinstance(o, O.ToolUse)] == ins


def _joined_calls(body: bytes) -> list[dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for line in body.split(b"\n\n"):
        if not line.startswith(b"data: {"):
            continue
        for ch in orjson.loads(line[6:])["choices"]:
            for tc in ch["delta"].get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"function": {"arguments": ""}})
                c["function"]["arguments"] += tc["function"].get("arguments") or ""
    return [calls[k] for k in sorted(calls)]


@settings(max_examples=examples(100), deadline=None)
@given(
    a_cuts=st.lists(st.integers(0, 80), max_size=6),
    b_cuts=st.lists(st.integers(0, 80), max_size=6),
    with_text=st.booleans(),
    read_cuts=st.lists(st.integers(0, 3000), max_size=12),
)
def test_parallel_calls_sharing_chunks_never_show_the_key(
    a_cuts: list[int], b_cuts: list[int], with_text: bool, read_cuts: list[int]
) -> None:
    """Two tool calls (and maybe text) whose fragments share chunks, any split: no key anywhere, nothing lost."""
    a = '{"q": "' + KEY + '"}'
    b = '{"r": "x' + KEY + 'y"}'
    pa, pb = split(a, a_cuts), split(b, b_cuts)
    text = split(f"t {KEY} u", a_cuts) if with_text else []
    start = '{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}'
    chunks = [
        _chunk('{"role":"assistant","content":""}'),
        _chunk('{"tool_calls":[' + start % (0, 0) + "," + start % (1, 1) + "]}"),
    ]
    for n in range(max(len(pa), len(pb), len(text))):
        entries = [
            f'{{"index":{i},"function":{{"arguments":{orjson.dumps(p[n]).decode()}}}}}'
            for i, p in ((0, pa), (1, pb))
            if n < len(p)
        ]
        content = f'"content":{orjson.dumps(text[n]).decode()},' if n < len(text) else ""
        chunks.append(_chunk("{" + content + '"tool_calls":[' + ",".join(entries) + "]}"))
    chunks += [_chunk("{}", "tool_calls"), b"data: [DONE]\n\n"]
    data = b"".join(chunks)
    reads = split(data, read_cuts)
    rec = recorded(data, reads)
    assert_no_key(KEY, {"recording": rec})
    observations = stream_observations(reads, family="openai_chat")
    published = publish(observations)
    assert_clean(published)
    assert_complete(observations, published)
    assert reads_of(published) == rec
    uses = [o.input for o in published if isinstance(o, O.ToolUse)]
    assert uses == [{"q": REDACTED}, {"r": f"x{REDACTED}y"}]


@pytest.mark.parametrize(
    "chunk",
    [
        '{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\\"v\\": 1}"}}]}',
        '{"content":"hi","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]}',
    ],
)
def test_what_follows_a_chunk_is_not_held_behind_it(chunk: str) -> None:
    """A paused loop publishes StreamHeld after a chunk's observations and waits for the user to see it: nothing
    the chunk left waiting (a block start, a group of deltas) may hold it back (it would never be released)."""
    data = _chunk('{"role":"assistant","content":""}') + _chunk(chunk)
    observations = [o for o in stream_observations([data], family="openai_chat") if not isinstance(o, O.AttemptEnded)]
    out: list[O.Observation] = []
    pub = RedactingPublisher(out.append, [KEY])
    for o in observations:
        pub.publish(o)
    pub.publish(O.StreamHeld(1.0, 0, 0, "step"))
    assert isinstance(out[-1], O.StreamHeld)
    assert [type(o) for o in out[:-1]] == [type(o) for o in observations]

"""The OpenAI families' fast path (inspector.stream.fastpath.neutral_steps with the families' `_take`, and the
decoder's way for one `data: ` line blocks) gives exactly what the general path gives: the same steps (SSE events
with their offsets and read index, neutral events, changes, diagnostics), block buffers (fragments and the event of
each), assembler counts, final objects and outcome, however the bytes are split. Each test runs both,
`ChatStream()` / `ResponsesStream()` and the same with `fast=False`: nothing global is switched."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.stream import fastpath
from inspector.stream.family import new_stream
from inspector.stream.openai_chat import ChatStream
from inspector.stream.openai_common import NeutralStream
from inspector.stream.openai_responses import ResponsesStream
from inspector.testing.hyp import examples
from inspector.testing.openai_ref import corpus

CORPUS = corpus()
FAMILY = {"chat": ChatStream, "responses": ResponsesStream}


def run(cls: type[NeutralStream], reads: list[bytes], fast: bool) -> tuple[Any, ...]:
    ts = cls(fast=fast)
    steps = [s for r in reads for s in ts.feed(r)]
    closing = ts.close()
    blocks = {
        i: (b.type, b.start, b.texts, b.fragment_events, b.nbytes, b.closed, b.stop_event, b.input, b.input_error)
        for i, b in ts.assembler.blocks.items()
    }
    asm = ts.assembler
    return (
        steps,
        closing,
        ts.diagnostics,
        ts.final_object(),
        ts.final_message(),
        blocks,
        (asm.events, asm.order, asm.stopped, asm.error),
        ts.outcome,
        ts.events,
        ts.ignored_after_end,
    )


def assert_same(cls: type[NeutralStream], reads: list[bytes]) -> None:
    fast, general = run(cls, reads, True), run(cls, reads, False)
    assert fast[0] == general[0]  # steps first: the most telling difference
    assert fast[1:] == general[1:]


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in pairwise(bounds)]


def test_the_path_is_chosen_per_instance() -> None:
    for cls in (ChatStream, ResponsesStream):
        assert cls().fast and cls().decoder.fast
        slow = cls(fast=False)
        assert not slow.fast and not slow.decoder.fast
    assert new_stream("openai_chat").fast and new_stream("openai_responses").fast


# ------------------------------------------------------------------------------------------------ chat chunks
HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x"}


def chunk(delta: Any, fr: Any = None, idx: Any = 0, **extra: Any) -> bytes:
    c: dict[str, Any] = dict(HEAD, choices=[{"index": idx, "delta": delta, "finish_reason": fr}])
    c.update(extra)
    return b"data: " + orjson.dumps(c) + b"\n\n"


def args(ti: Any, text: Any, **fn: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"function": {"arguments": text, **fn}}
    if ti is not None:
        d["index"] = ti
    return {"tool_calls": [d]}


FRAG = st.sampled_from(["{", '"a"', ": 1}", "é", '\\"', "", "x" * 40])
CHAT_ODD = st.one_of(
    st.builds(lambda t, i: chunk(args(0, t), idx=i), FRAG, st.integers(0, 1)),  # the run's own shape
    st.builds(lambda t: chunk(args(1, t)), FRAG),  # another tool call
    st.builds(lambda t: chunk(args(0, t)).replace(b"data: ", b"data:"), FRAG),  # no space: the general lines
    st.builds(lambda t: chunk(args(0, t), usage={"prompt_tokens": 1}), FRAG),  # usage on it
    st.builds(lambda t: chunk(args(0, t), obfuscation="Zq3"), FRAG),  # a top-level field the chunk may carry
    st.builds(lambda t: chunk(args(0, t), error={"message": "boom"}), FRAG),
    st.builds(lambda t: chunk({"content": t}), FRAG),
    st.builds(lambda t: chunk({"content": t, "role": "assistant"}), FRAG),
    st.builds(lambda t: chunk(args(None, t)), FRAG),  # no index: continues the last call
    st.builds(lambda t: chunk(args(0, t, name="f")), FRAG),  # name repeated
    st.builds(lambda t: chunk(args(True, t)), FRAG),  # a bool index is not 1
    st.builds(lambda t: chunk(args(0, t), logprobs={"content": []}), FRAG),
    st.builds(lambda t: chunk(args(0, t), object="x"), FRAG),
    st.just(chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "g"}}]})),
    st.just(chunk({}, "tool_calls")),
    st.just(chunk({"role": "assistant"})),
    st.just(b"data: [DONE]\n\n"),
    st.just(b"data: {not json\n\n"),
    st.just(b": keep-alive\n\n"),
    st.just(b"event: message\ndata: " + orjson.dumps(dict(HEAD, choices=[])) + b"\n\n"),
)


def chat_stream(body: list[bytes]) -> bytes:
    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": ""}}
    opening = [chunk({"role": "assistant", "content": ""}), chunk({"content": "hi"}), chunk({"tool_calls": [first]})]
    return b"".join([*opening, *body, chunk({}, "tool_calls"), b"data: [DONE]\n\n"])


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(CHAT_ODD, st.builds(lambda t: chunk(args(0, t)), FRAG)), max_size=30),
    st.lists(st.integers(0, 10**6), max_size=20),
    st.sampled_from(["\n", "\n", "\r\n"]),
)
def test_chat_runs_and_odd_chunks_agree_however_split(body: list[bytes], cuts: list[int], eol: str) -> None:
    data = chat_stream(body).replace(b"\n", eol.encode())
    assert_same(ChatStream, [data])
    assert_same(ChatStream, cut(data, cuts))


# ------------------------------------------------------------------------------------------------ responses events
def rev(t: str, name: Any = True, **kw: Any) -> bytes:
    d = {"type": t, **kw}
    head = f"event: {t if name is True else name}\n".encode() if name else b""
    return head + b"data: " + orjson.dumps(d) + b"\n\n"


FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}
MSG = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}


@st.composite
def responses_streams(draw: st.DrawFn) -> bytes:
    seq = 0
    out = []

    def emit(t: str, name: Any = True, jump: int = 1, with_seq: bool = True, **kw: Any) -> None:
        nonlocal seq
        if with_seq:
            kw["sequence_number"] = seq
            seq += jump
        out.append(rev(t, name, **kw))

    emit("response.created", response={"id": "r", "object": "response", "output": []})
    emit("response.output_item.added", output_index=0, item=MSG)
    emit("response.content_part.added", output_index=0, content_index=0, part={"type": "output_text", "text": ""})
    emit("response.output_item.added", output_index=1, item=FC)
    for kind, text, oi, name, jump, with_seq, extra in draw(
        st.lists(
            st.tuples(
                st.sampled_from(["args", "args", "args", "text", "reasoning", "args_done", "item_done", "bare"]),
                FRAG,
                st.sampled_from([1, 1, 1, 0, 2, True]),
                st.sampled_from([True, True, False, "message", "response.other"]),
                st.sampled_from([1, 1, 1, 0, 2]),
                st.sampled_from([True, True, False]),
                st.sampled_from([{}, {}, {"item_id": "fc_1"}, {"obfuscation": "q"}, {"error": None}]),
            ),
            max_size=30,
        )
    ):
        if kind == "args":
            emit("response.function_call_arguments.delta", name, jump, with_seq, output_index=oi, delta=text, **extra)
        elif kind == "text":
            emit("response.output_text.delta", name, jump, with_seq, output_index=0, content_index=0, delta=text)
        elif kind == "reasoning":
            emit(
                "response.reasoning_summary_text.delta",
                name,
                jump,
                with_seq,
                output_index=0,
                summary_index=0,
                delta=text,
            )
        elif kind == "args_done":
            emit("response.function_call_arguments.done", output_index=1, arguments='{"a": 1}')
        elif kind == "item_done":
            emit("response.output_item.done", output_index=1, item=dict(FC, arguments='{"a": 1}'))
        else:
            out.append(
                b"data: " + orjson.dumps({"type": "response.function_call_arguments.delta", "delta": text}) + b"\n\n"
            )
    emit("response.completed", response={"id": "r", "object": "response", "status": "completed"})
    return b"".join(out)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_streams(), st.lists(st.integers(0, 10**6), max_size=20), st.sampled_from(["\n", "\n", "\r\n"]))
def test_responses_runs_and_odd_events_agree_however_split(data: bytes, cuts: list[int], eol: str) -> None:
    data = data.replace(b"\n", eol.encode())
    assert_same(ResponsesStream, [data])
    assert_same(ResponsesStream, cut(data, cuts))


# ------------------------------------------------------------------------------------------------ real streams
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CORPUS), st.lists(st.integers(0, 10**7), max_size=30))
def test_every_corpus_stream_agrees_both_ways_however_split(s: Any, cuts: list[int]) -> None:
    assert_same(FAMILY[s.family], cut(s.data, cuts))


@pytest.mark.parametrize("s", CORPUS, ids=[s.name for s in CORPUS])
def test_every_corpus_stream_agrees_both_ways_whole(s: Any) -> None:
    assert_same(FAMILY[s.family], [s.data])


# ------------------------------------------------------------------------------------------------ the path is taken
@pytest.mark.parametrize("cls", [ChatStream, ResponsesStream])
def test_the_fast_path_is_taken_for_argument_deltas(cls: type[NeutralStream], monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 argument deltas of one tool call: by the fast path, nearly none goes through the general mapping (nor
    the assembler's feed); block, counts and steps are still the general path's."""
    frags = [f'"k{i}": {i}, ' for i in range(2000)]
    if cls is ChatStream:
        data = chat_stream([chunk(args(0, f)) for f in frags])
    else:
        body = [rev("response.function_call_arguments.delta", output_index=0, delta=f) for f in frags]
        data = b"".join(
            [
                rev("response.created", response={"id": "r", "object": "response", "output": []}),
                rev("response.output_item.added", output_index=0, item=FC),
                *body,
                rev("response.completed", response={"id": "r", "object": "response", "status": "completed"}),
            ]
        )
    calls = 0
    real = cls._event_steps

    def counting(self: NeutralStream, e: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(self, e)

    monkeypatch.setattr(cls, "_event_steps", counting)
    reads = cut(data, list(range(0, len(data), 4096)))
    fast = run(cls, reads, True)
    n_fast, calls = calls, 0
    general = run(cls, reads, False)
    assert calls >= 2000 and n_fast < 20
    assert fast == general
    assert "".join(fast[5][max(fast[5])][2]).startswith('"k0": 0, "k1": 1, ')


# ------------------------------------------------------------------------------------------------ templates
# An event whose data text is the last taken one's but for the fragment's JSON string (and the next sequence
# counter) is taken by a template, without parsing the rest: every change anywhere else must leave it to `_take`.
CHAT_ARGS = (
    '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,'
    '"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}]},"finish_reason":null}]}'
)
RESP_ARGS = {  # the bench's order (counter after the fragment), OpenAI's (counter first), and none
    "after": '{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":%s,'
    '"sequence_number":%d}',
    "first": '{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"fc_1",'
    '"output_index":0,"delta":%s}',
    "none": '{"type":"response.function_call_arguments.delta","item_id":"delta","output_index":0,"delta":%s}',
    # the fragment's key elsewhere before it: in a nested object, and a first "delta" the second one overrides
    "nested": '{"type":"response.function_call_arguments.delta","x":{"delta":%s},"output_index":0,"delta":%s,'
    '"sequence_number":%d}',
    "duplicate": '{"type":"response.function_call_arguments.delta","output_index":0,"delta":%s,"delta":%s,'
    '"sequence_number":%d}',
    # OpenAI's: the counter first and a per-event `obfuscation` last (the template's free field)
    "obfuscated": '{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"fc_1",'
    '"output_index":0,"delta":%s,"obfuscation":%s}',
}
FREE = st.sampled_from(
    ['"Ab1"', '"x"', '"Ab1"', '""', '"a\\"b"', '"\u00e9"', '"a b"', "null", "7", '"obfuscation"', '"a\\x"', '"a\tb"']
)  # (the last two are not JSON: an unknown escape, a raw tab)
JSONISH = st.sampled_from(list('"\\,:{}[] 0123456789-.aeflnrstu') + ["\\u0022", "\\\\", "\\n", "\t", "null"])
TOKENS = st.sampled_from(
    ['"a"', '"a"', '"b"', '"\\""', '"\\\\"', '"\\u00e9"', ' "x" ', '"a\\\\\\""', '"}"', '""', '"a" "b"']
)


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    """`text`, maybe with a few characters replaced, inserted or deleted."""
    for _ in range(draw(st.integers(0, 2))):
        if not text:
            break
        at = draw(st.integers(0, len(text) - 1))
        how = draw(st.sampled_from(["replace", "insert", "delete"]))
        c = draw(JSONISH)
        text = text[:at] + (c if how != "delete" else "") + text[at + (how != "insert") :]
    return text


def _delta_texts(draw: st.DrawFn, make: Any, n: int) -> list[str]:
    out = []
    for k in range(n):
        tok = draw(st.one_of(TOKENS, st.builds(lambda s: orjson.dumps(s).decode(), st.text(max_size=4))))
        text = make(tok, k)
        out.append(draw(mutated(text)) if draw(st.integers(0, 3)) == 0 else text)
    return out


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 12), st.lists(st.integers(0, 10**5), max_size=6))
def test_chat_template_takes_only_what_the_general_path_takes(data: Any, n: int, cuts: list[int]) -> None:
    obfuscated = data.draw(st.booleans())  # OpenAI's per-chunk `obfuscation`, last (the template's free field)

    def make(tok: str, k: int) -> str:
        return CHAT_ARGS % tok if not obfuscated else (CHAT_ARGS % tok)[:-1] + f',"obfuscation":{data.draw(FREE)}}}'

    body = [f"data: {t}\n\n".encode() for t in _delta_texts(data.draw, make, n)]
    stream = chat_stream([chunk(args(0, '{"a": ')), *body])
    assert_same(ChatStream, [stream])
    assert_same(ChatStream, cut(stream, cuts))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(sorted(RESP_ARGS)), st.integers(1, 12), st.lists(st.integers(0, 10**5), max_size=6))
def test_responses_template_takes_only_what_the_general_path_takes(
    data: Any, order: str, n: int, cuts: list[int]
) -> None:
    fmt = RESP_ARGS[order]
    jumps = data.draw(st.lists(st.sampled_from([1, 1, 1, 0, 2, -1]), min_size=n, max_size=n))
    seqs = [2 + sum(jumps[: k + 1]) for k in range(n)]

    def make(tok: str, k: int) -> str:
        if order == "after":
            return fmt % (tok, seqs[k])
        if order in ("nested", "duplicate"):
            return fmt % (data.draw(st.sampled_from(['"a"', '"b"'])), tok, seqs[k])
        if order == "obfuscated":
            return fmt % (seqs[k], tok, data.draw(FREE))
        return fmt % (seqs[k], tok) if order == "first" else fmt % tok

    texts = _delta_texts(data.draw, make, n)
    name = data.draw(st.sampled_from(["response.function_call_arguments.delta", "message", "response.x"]))
    seq0 = {} if order == "none" else {"sequence_number": 0}
    seq1 = {} if order == "none" else {"sequence_number": 1}
    seq2 = {} if order == "none" else {"sequence_number": 2}
    stream = b"".join(
        [
            rev("response.created", response={"id": "r", "object": "response", "output": []}, **seq0),
            rev("response.output_item.added", output_index=0, item=FC, **seq1),
            rev("response.function_call_arguments.delta", output_index=0, delta="{", **seq2),
            *[f"event: {name}\ndata: {t}\n\n".encode() for t in texts],
            rev("response.completed", response={"id": "r", "object": "response", "status": "completed"}),
        ]
    )
    assert_same(ResponsesStream, [stream])
    assert_same(ResponsesStream, cut(stream, cuts))


@pytest.mark.parametrize("order", ["after", "first", "none"])
def test_the_template_is_learned_and_taken(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas that differ only in their fragment (and counter) go by the template: `_take` parses almost none."""
    calls = 0
    real = ResponsesStream._take

    def counting(self: ResponsesStream, e: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(self, e)

    monkeypatch.setattr(ResponsesStream, "_take", counting)
    fmt = RESP_ARGS[order]
    frags = [orjson.dumps(f'"k{i}": "\\{i}", ').decode() for i in range(500)]
    if order == "after":
        texts = [fmt % (f, 2 + i) for i, f in enumerate(frags)]
    else:
        texts = [fmt % (2 + i, f) for i, f in enumerate(frags)] if order == "first" else [fmt % f for f in frags]
    seq = {} if order == "none" else {"sequence_number": 0}
    stream = b"".join(
        [
            rev("response.created", response={"id": "r", "object": "response", "output": []}, **seq),
            rev(
                "response.output_item.added",
                output_index=0,
                item=FC,
                **({} if order == "none" else {"sequence_number": 1}),
            ),
            *[f"event: response.function_call_arguments.delta\ndata: {t}\n\n".encode() for t in texts],
        ]
    )
    reads = cut(stream, list(range(0, len(stream), 1000)))
    fast = run(ResponsesStream, reads, True)
    assert calls < 10
    assert fast == run(ResponsesStream, reads, False)
    assert fast[5][0][2] == [orjson.loads(f) for f in frags]
    # a field that changes on every event (OpenAI's obfuscation), last: the template's free field
    calls = 0
    parts = stream.split(b"\n\n")
    last = b"\n\n".join(p[:-1] + b',"obfuscation":"%dz"}' % k if k > 1 else p for k, p in enumerate(parts))
    assert run(ResponsesStream, [last], True) == run(ResponsesStream, [last], False)
    assert calls < 10 if order != "after" else calls > 500  # (a free field after the counter only)
    # ... and anywhere else: no template, `_take` takes each one
    calls = 0
    noisy = stream.replace(b'"output_index":0,', b'"output_index":0,"obfuscation":"X",')
    noisy = b"\n\n".join(part.replace(b'"X"', f'"{k}"'.encode()) for k, part in enumerate(noisy.split(b"\n\n")))
    assert run(ResponsesStream, [noisy], True) == run(ResponsesStream, [noisy], False)
    assert calls > 500


@pytest.mark.parametrize("order", ["nested", "duplicate"])
def test_the_fragments_key_elsewhere_in_the_data_is_not_taken_for_it(order: str) -> None:
    """The first `"delta":` of the data is not the fragment (a nested object's, or one a later key overrides): the
    template must hole the one the parsed data has, else an event whose other "delta" changed would be taken
    with that one's string."""
    fmt = RESP_ARGS[order]
    texts = [fmt % ('"a"', '"x"', 3), fmt % ('"b"', '"x"', 4), fmt % ('"a"', '"y"', 5), fmt % ('"c"', '"y"', 6)]
    stream = b"".join(
        [
            rev("response.created", response={"id": "r", "object": "response", "output": []}, sequence_number=0),
            rev("response.output_item.added", output_index=0, item=FC, sequence_number=1),
            rev("response.function_call_arguments.delta", output_index=0, delta="{", sequence_number=2),
            *[f"event: response.function_call_arguments.delta\ndata: {t}\n\n".encode() for t in texts],
        ]
    )
    fast = run(ResponsesStream, [stream], True)
    assert fast == run(ResponsesStream, [stream], False)
    assert fast[5][0][2] == ["{", "x", "x", "y", "y"]


# Any character at all, lone surrogates and control characters included (what a `str` can hold), and JSON's own.
ANY_CHARS = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from('"\\u00"\\')), max_size=10)


@settings(max_examples=examples(500), deadline=None)
@given(ANY_CHARS, st.sampled_from(["after", "first", "none", "obfuscated"]), st.sampled_from(["Ab9", "", "a-b", "é"]))
def test_a_templates_match_takes_a_string_exactly_as_orjson_reads_it(raw: str, order: str, free: str) -> None:
    """The template's compiled match (fastpath._template_match) takes a fragment's JSON string without orjson when
    it has no escape: it must take exactly what the template's definition takes (the data is the template with
    one JSON string, by orjson, in the hole, the counter's digits, and letters and digits in the free field),
    with the same text."""
    head, mid, tail = '{"type":"t","delta":', ',"sequence_number":', "}"
    counter = 41
    token = '"' + raw + '"'
    if order == "after":
        t = fastpath.Template("e", head, mid, tail, counter, False)
        data = head + token + mid + "41" + tail
    elif order == "first":
        t = fastpath.Template("e", head, ',"delta":', tail, counter, True)
        data = head + "41" + ',"delta":' + token + tail
    elif order == "none":
        t = fastpath.Template("e", head, "", tail, None, False)
        data = head + token + tail
    else:
        t = fastpath.Template("e", head, ',"delta":', tail, counter, True, ',"obfuscation":')
        data = head + "41" + ',"delta":' + token + ',"obfuscation":"' + free + '"' + tail
    try:
        expected = orjson.loads(token)
    except orjson.JSONDecodeError:
        expected = None
    if order == "obfuscated" and not (free.isascii() and free.isalnum()):
        expected = None
    if not isinstance(expected, str) or not expected:
        expected = None
    m = t.match(data)
    got = None
    if m is not None:
        digits, text, tok = m.groups() if order != "after" else (m.group(3), m.group(1), m.group(2))
        assert digits == ("" if order == "none" else "41")
        if text is None:
            try:
                text = orjson.loads(tok)
            except orjson.JSONDecodeError:
                text = None
        got = text or None
    assert got == expected

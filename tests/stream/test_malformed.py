"""A corpus of malformed and tricky streams (the real failures people hit with the Messages stream, and more):
each gives its diagnostics and outcome, and nothing raises, however the bytes are split."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest

from inspector.stream import diagnostics as D
from inspector.stream.assembler import TurnStream, assemble
from inspector.stream.diagnostics import Severity
from inspector.testing.streamgen import (
    block_start,
    block_stop,
    error_event,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    ping,
    signature_delta,
    sse,
    text_delta,
    text_start,
    text_turn,
    tool_start,
    tool_turn,
)


@dataclass
class Case:
    name: str
    data: bytes
    codes: list[str]  # exactly these diagnostics, in this order
    outcome: str
    content: list[dict[str, Any]] | None = None  # expected final content, when it matters
    check: Callable[[TurnStream], object] | None = None  # extra assertion: f(TurnStream)
    notes: str = ""
    severities: dict[str, Severity] = field(default_factory=dict)  # code -> severity, when it matters


def _input_of(ts: TurnStream, i: int) -> Any:
    return ts.final_message()["content"][i]


def _buffers_for_parallel(ts: TurnStream) -> None:
    c = ts.final_message()["content"]
    assert c[1]["input"] == {"path": "a.py"}
    assert c[2]["input"] == {"pattern": "TODO", "glob": "*.md"}


def _unescaped_quote(ts: TurnStream) -> None:
    b = ts.assembler.blocks[0]
    raw = '{"command": "echo "hi" > out.txt"}'
    assert b.joined() == raw
    assert b.input_error is not None and raw[b.input_error.position] == "h"
    c = _input_of(ts, 0)
    assert c["input"] is None and c["input_raw"] == raw


def _second_of_pair_invalid(ts: TurnStream) -> None:
    c = ts.final_message()["content"]
    assert c[0]["input"] == {"path": "a.txt"}
    assert c[1]["input"] is None and c[1]["input_raw"] == '{"path": "b.txt", "offset": 10'
    [d] = [d for d in ts.diagnostics if d.code == D.TOOL_INPUT_INVALID]
    assert d.block_index == 1


def _index_zero_reused(ts: TurnStream) -> None:
    c = ts.final_message()["content"]
    assert c == [{"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a"}}]


def _cut_tool(ts: TurnStream) -> None:
    c = _input_of(ts, 1)
    assert c["input"] is None and c["input_raw"] == '{"path": "notes.md", "content": "# Title\\nThe fir'
    assert ts.assembler.blocks[1].open
    d = [d for d in ts.diagnostics if d.code == D.BLOCK_NOT_CLOSED][0]
    assert "will not run" in d.message


def _error_after_200(ts: TurnStream) -> None:
    assert ts.assembler.error is not None and ts.assembler.error.error_type == "overloaded_error"
    assert ts.final_message()["content"][0]["text"] == "Let me"


def _utf8(ts: TurnStream) -> None:
    assert ts.final_message()["content"][0]["text"] == "caf\ufffd\ufffd ok"


CORPUS: list[Case] = [
    Case(
        "per-fragment parsing trap: no fragment is JSON on its own",
        sse(*tool_turn(["", "{", '"pa', "th", '":', ' "a\\', '"b', "\\u00", "e9", "\\ud83c", '\\udf89"', "}"])),
        [],
        "tool_use",
        check=lambda ts: _input_of(ts, 0)["input"] == {"path": 'a"bé🎉'},
    ),
    Case(
        "one global buffer trap: parallel calls with interleaved fragments",
        sse(
            message_start(),
            text_start(0),
            text_delta(0, "Two calls."),
            block_stop(0),
            tool_start(1, "toolu_a", "read_file"),
            tool_start(2, "toolu_b", "grep"),
            json_delta(1, '{"pa'),
            json_delta(2, '{"pattern": "TO'),
            json_delta(1, 'th": "a.py"}'),
            json_delta(2, 'DO", "glob": "*.md"}'),
            block_stop(1),
            block_stop(2),
            message_delta("tool_use"),
            message_stop(),
        ),
        [],
        "tool_use",
        check=_buffers_for_parallel,
    ),
    Case(
        "fine-grained streaming: the second call of a parallel pair has invalid JSON at its stop",
        sse(
            message_start(),
            tool_start(0, "toolu_a", "read_file"),
            json_delta(0, '{"path": "a.txt"}'),
            block_stop(0),
            tool_start(1, "toolu_b", "read_file"),
            json_delta(1, '{"path": "b.txt", '),
            json_delta(1, '"offset": 10'),
            block_stop(1),
            message_delta("tool_use"),
            message_stop(),
        ),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
        check=_second_of_pair_invalid,
    ),
    Case(
        "truncated JSON at stop: an unfinished string",
        sse(*tool_turn(['{"path": "a.txt", "content": "abc'])),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
        check=lambda ts: (
            (e := ts.assembler.blocks[0].input_error) is not None
            and (
                "EOF" in e.message
                or "unexpected end" in e.message.lower()
                or e.position == len('{"path": "a.txt", "content": "abc')
            )
        ),
    ),
    Case(
        "unescaped quote inside a string argument",
        sse(*tool_turn(['{"command": "echo "', 'hi" > out.txt"}'], name="bash")),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
        check=_unescaped_quote,
    ),
    Case(
        'partial_json without its opening {" (a compatible server)',
        sse(*tool_turn(['path": "README.md"}'])),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
        check=lambda ts: (e := ts.assembler.blocks[0].input_error) is not None and e.position == 0,
    ),
    Case(
        "trailing garbage after the object (the SDK's partial parser silently accepts it)",
        sse(*tool_turn(['{"a": 1}', "}"])),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
    ),
    Case(
        "whitespace-only first fragment (the SDK's partial parser raises on it) then valid JSON",
        sse(*tool_turn([" ", '{"a": 1}'])),
        [],
        "tool_use",
        check=lambda ts: _input_of(ts, 0)["input"] == {"a": 1},
    ),
    Case(
        "whitespace-only input buffer",
        sse(*tool_turn(["  ", "\n"])),
        [D.TOOL_INPUT_EMPTY],
        "tool_use",
        severities={D.TOOL_INPUT_EMPTY: "error"},
    ),
    Case(
        "only empty fragments",
        sse(*tool_turn(["", "", ""])),
        [D.TOOL_INPUT_EMPTY],
        "tool_use",
        severities={D.TOOL_INPUT_EMPTY: "warning"},
        check=lambda ts: _input_of(ts, 0)["input"] == {},
    ),
    Case(
        "tool input that is an array",
        sse(*tool_turn(['["a.txt", "b.txt"]'])),
        [D.TOOL_INPUT_NOT_OBJECT],
        "tool_use",
    ),
    Case(
        "tool input nested deeper than the parser allows",
        sse(*tool_turn(['{"a": ' + "[" * 1100, "]" * 1100 + "}"])),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
    ),
    Case(
        "tool input with a lone surrogate escape",
        sse(*tool_turn(['{"a": "\\ud800"}'])),
        [D.TOOL_INPUT_INVALID],
        "tool_use",
    ),
    Case(
        "overloaded_error as an SSE event after HTTP 200",
        sse(
            message_start(),
            text_start(0),
            text_delta(0, "Let me"),
            ping(),
            error_event("overloaded_error", "Overloaded"),
        ),
        [D.ERROR_EVENT, D.BLOCK_NOT_CLOSED],
        "error",
        check=_error_after_200,
        severities={D.ERROR_EVENT: "error", D.BLOCK_NOT_CLOSED: "warning"},
    ),
    Case(
        "error event before anything else",
        sse(error_event("rate_limit_error", "slow down")),
        [D.ERROR_EVENT],
        "error",
    ),
    Case(
        "stall after message_start: pings until the connection ends",
        sse(message_start(), *[ping()] * 50),
        [D.MISSING_MESSAGE_STOP],
        "incomplete",
    ),
    Case(
        "empty deltas forever, then the end",
        sse(message_start(), text_start(0), *[text_delta(0, "")] * 200),
        [D.MISSING_MESSAGE_STOP, D.BLOCK_NOT_CLOSED],
        "incomplete",
        severities={D.BLOCK_NOT_CLOSED: "error"},
    ),
    Case(
        "tool call cut by max_tokens: no content_block_stop, stop_reason max_tokens",
        sse(
            message_start(),
            text_start(0),
            text_delta(0, "Writing."),
            block_stop(0),
            tool_start(1, "toolu_w", "write_file"),
            json_delta(1, '{"path": "notes.md", '),
            json_delta(1, '"content": "# Title\\nThe fir'),
            message_delta("max_tokens"),
            message_stop(),
        ),
        [D.BLOCK_NOT_CLOSED],
        "truncated",
        check=_cut_tool,
        severities={D.BLOCK_NOT_CLOSED: "warning"},
    ),
    Case(
        "index 0 reused for every parallel call",
        sse(
            message_start(),
            tool_start(0, "toolu_a", "read_file"),
            json_delta(0, '{"path": "a"}'),
            block_stop(0),
            tool_start(0, "toolu_b", "read_file"),
            json_delta(0, '{"path": "b"}'),
            block_stop(0),
            message_delta("tool_use"),
            message_stop(),
        ),
        [D.DUPLICATE_BLOCK_START, D.DELTA_AFTER_STOP, D.DUPLICATE_BLOCK_STOP],
        "tool_use",
        check=_index_zero_reused,
    ),
    Case(
        "index 0 reused while the first call is still open",
        sse(
            message_start(),
            tool_start(0, "toolu_a", "read_file"),
            tool_start(0, "toolu_b", "read_file"),
            json_delta(0, '{"path": "a"}'),
            json_delta(0, '{"path": "b"}'),
            block_stop(0),
            block_stop(0),
            message_delta("tool_use"),
            message_stop(),
        ),
        [D.DUPLICATE_BLOCK_START, D.TOOL_INPUT_INVALID, D.DUPLICATE_BLOCK_STOP],
        "tool_use",
    ),
    Case(
        "blocks start at index 1 (an off-by-one relay)",
        sse(message_start(), text_start(1), text_delta(1, "hi"), block_stop(1), message_delta(), message_stop()),
        [D.INDEX_GAP],
        "text_finish",
        content=[{"type": "text", "text": "hi"}],
    ),
    Case(
        "delta and stop for an index never started",
        sse(message_start(), text_delta(0, "orphan"), block_stop(0), message_delta(), message_stop()),
        [D.DELTA_UNKNOWN_INDEX, D.STOP_UNKNOWN_INDEX],
        "text_finish",
        content=[],
    ),
    Case(
        "a relay concatenating two responses",
        sse(*text_turn("one"), *text_turn("two")),
        [D.EVENT_AFTER_STOP] * 6,
        "text_finish",
        content=[{"type": "text", "text": "one"}],
    ),
    Case(
        "a second message_start mid-stream (a relay retrying upstream without telling)",
        sse(
            message_start(id="msg_a"),
            text_start(0),
            text_delta(0, "Hel"),
            message_start(id="msg_b"),
            text_start(0),
            text_delta(0, "lo"),
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [D.DUPLICATE_MESSAGE_START, D.DUPLICATE_BLOCK_START],
        "text_finish",
        content=[{"type": "text", "text": "Hello"}],
        check=lambda ts: ts.final_message()["id"] == "msg_a",
    ),
    Case(
        "content before message_start",
        sse(text_start(0), text_delta(0, "early"), block_stop(0), message_start(), message_delta(), message_stop()),
        [D.EVENT_BEFORE_START],
        "text_finish",
        content=[{"type": "text", "text": "early"}],
    ),
    Case(
        "no message_stop",
        sse(*text_turn()[:-1]),
        [D.MISSING_MESSAGE_STOP],
        "incomplete",
    ),
    Case(
        "connection cut in the middle of an event",
        sse(*text_turn())[:-30],
        [D.SSE_UNTERMINATED_EVENT, D.MISSING_MESSAGE_STOP],
        "incomplete",
    ),
    Case(
        "connection cut in the middle of a tool input event",
        (lambda d: d[: d.find(b"input_json_delta") + 10])(sse(*tool_turn(['{"path": "a.txt"}']))),
        [D.SSE_UNTERMINATED_EVENT, D.MISSING_MESSAGE_STOP, D.BLOCK_NOT_CLOSED],
        "incomplete",
    ),
    Case(
        "an HTML error page from a proxy as event data",
        sse(message_start(), b"event: content_block_delta\ndata: <html><body>502 Bad Gateway</body></html>\n\n"),
        [D.INVALID_EVENT_JSON, D.MISSING_MESSAGE_STOP],
        "incomplete",
    ),
    Case(
        "an OpenAI-style [DONE] sentinel after message_stop",
        sse(*text_turn(), b"data: [DONE]\n\n"),
        [D.INVALID_EVENT_JSON],
        "text_finish",
    ),
    Case(
        "a plain JSON error body instead of an event stream",
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        [D.SSE_UNTERMINATED_EVENT, D.NO_EVENTS],
        "incomplete",
    ),
    Case(
        "a plain JSON error body with a final newline",
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n',
        [D.SSE_UNKNOWN_FIELD, D.SSE_UNTERMINATED_EVENT, D.NO_EVENTS],
        "incomplete",
    ),
    Case(
        "events without `event:` lines (the SDK drops them; the data's type is enough)",
        b"".join(
            b"data: " + line.split(b"data: ", 1)[1]
            for line in sse(*text_turn("hey")).split(b"\n\n")[:-1]
            for line in [line + b"\n\n"]
        ),
        [],
        "text_finish",
        content=[{"type": "text", "text": "hey"}],
    ),
    Case(
        "SSE event name that disagrees with the data's type",
        sse(
            message_start(),
            b'event: ping\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"text","text":"x"}}\n\n',
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [D.TYPE_MISMATCH],
        "text_finish",
        content=[{"type": "text", "text": "x"}],
    ),
    Case(
        "invalid UTF-8 bytes in a text delta",
        sse(message_start(), text_start(0)) + b'event: content_block_delta\ndata: {"type":"content_block_delta",'
        b'"index":0,"delta":{"type":"text_delta","text":"caf\xc3\xff ok"}}\n\n'
        + sse(block_stop(0), message_delta(), message_stop()),
        [D.SSE_INVALID_UTF8],
        "text_finish",
        check=_utf8,
    ),
    Case(
        "a byte order mark before the first event",
        b"\xef\xbb\xbf" + sse(*text_turn()),
        [D.SSE_BOM_STRIPPED],
        "text_finish",
        severities={D.SSE_BOM_STRIPPED: "info"},
    ),
    Case(
        "delta missing its index and a delta missing its text",
        sse(
            message_start(),
            text_start(0),
            ("content_block_delta", {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}),
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [D.MALFORMED_EVENT, D.MALFORMED_EVENT],
        "text_finish",
    ),
    Case(
        "signature_delta on a text block",
        sse(message_start(), text_start(0), signature_delta(0, "SIG"), block_stop(0), message_delta(), message_stop()),
        [D.DELTA_TYPE_MISMATCH],
        "text_finish",
    ),
    Case(
        "unknown event, block and delta types (a newer API)",
        sse(
            message_start(),
            ("thinking_summary", {"type": "thinking_summary", "text": "s"}),
            block_start(0, {"type": "hologram"}),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "hologram_delta", "frame": 1}},
            ),
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [D.UNKNOWN_EVENT, D.UNKNOWN_BLOCK, D.UNKNOWN_DELTA],
        "text_finish",
        content=[{"type": "hologram"}],
        severities={D.UNKNOWN_EVENT: "info", D.UNKNOWN_BLOCK: "info", D.UNKNOWN_DELTA: "info"},
    ),
    Case(
        "U+0000 inside event data and a 1 MB text delta",
        sse(
            message_start(),
            text_start(0),
            text_delta(0, "a\x00b"),
            text_delta(0, "z" * 1_000_000),
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [],
        "text_finish",
        check=lambda ts: ts.final_message()["content"][0]["text"] == "a\x00b" + "z" * 1_000_000,
    ),
    Case(
        "an empty body",
        b"",
        [D.NO_EVENTS],
        "incomplete",
    ),
    Case(
        "usage that is an array, a text whose text is a number (wrong JSON types: named, never a crash)",
        sse(
            message_start(usage=[1]),  # type: ignore[arg-type]  # (a wrong type on purpose)
            block_start(0, {"type": "text", "text": 5}),
            text_delta(0, "ok"),
            block_stop(0),
            message_delta(),
            message_stop(),
        ),
        [D.WRONG_TYPE, D.WRONG_TYPE],
        "text_finish",
        content=[{"type": "text", "text": "ok"}],
    ),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_malformed_stream_gives_its_diagnostics(case: Case) -> None:
    ts = assemble(case.data)
    assert [d.code for d in ts.diagnostics] == case.codes, [d.message for d in ts.diagnostics]
    assert ts.outcome == case.outcome
    for code, sev in case.severities.items():
        assert {d.severity for d in ts.diagnostics if d.code == code} == {sev}
    if case.content is not None:
        assert ts.final_message()["content"] == case.content
    if case.check is not None:
        assert case.check(ts) is not False
    for d in ts.diagnostics:
        assert d.message and d.severity in ("error", "warning", "info")


SMALL = [c for c in CORPUS if len(c.data) <= 200_000]  # the big ones are covered whole above


@pytest.mark.parametrize("case", SMALL, ids=[c.name for c in SMALL])
def test_malformed_stream_split_anywhere_never_raises_and_agrees(case: Case) -> None:
    whole = assemble(case.data)
    rng = random.Random(case.name)
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(case.data)), min(12, max(len(case.data) - 1, 0))))
        bounds = [0, *cuts, len(case.data)]
        ts = assemble([case.data[a:b] for a, b in pairwise(bounds)])
        assert ts.diagnostics == whole.diagnostics
        assert ts.final_message() == whole.final_message()
        assert ts.outcome == whole.outcome


def test_the_corpus_covers_every_protocol_and_tool_input_diagnostic() -> None:
    seen = {d.code for c in CORPUS for d in assemble(c.data).diagnostics}
    wanted = {
        v
        for k, v in vars(D).items()
        if k.isupper() and isinstance(v, str) and v.startswith(("protocol.", "tool_input."))
    }
    assert wanted - seen == set()


def test_random_garbage_never_raises() -> None:
    rng = random.Random(4)
    base = sse(*text_turn("hello"), *tool_turn(['{"a": 1}']))
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 20)):
            op = rng.randrange(3)
            i = rng.randrange(len(data))
            if op == 0:
                data[i] = rng.randrange(256)
            elif op == 1:
                del data[i : i + rng.randint(1, 30)]
            else:
                data[i:i] = bytes(rng.choice([b"\r", b"\n", b":", b"{", b'"', b"\xff", b"data: ", b"\n\n"]))
        ts = TurnStream()
        for k in range(0, len(data), 50):
            for step in ts.feed(bytes(data[k : k + 50])):
                assert step.event.seq == step.sse.seq
        ts.close()
        ts.final_message()
        assert ts.outcome in ("tool_use", "text_finish", "truncated", "incomplete", "error")

"""No known key can be recovered from a recording by any reader, whatever its split into reads or deltas and
whatever its escaping: canaries in every path, checked with `read_recording` and `dump` in all modes."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.core.redaction import (
    REDACTED,
    StreamRedactor,
    credential_values,
    mask_text,
    redact,
    secret_spans,
)
from inspector.record.dump import dump_turns
from inspector.record.recording import RecordingWriter, read_recording
from inspector.testing.hyp import examples
from inspector.testing.streamgen import (
    block_stop,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_start,
    text_turn,
    tool_start,
)

CANARY = "sk-ant-canary-0123456789abcdef"
URL = "https://api.example/v1/messages"


def u_escape(text: str, which: set[int] | None = None) -> str:
    """``text`` as the inside of a JSON string, with the characters at ``which`` (all if None) as \\uXXXX."""
    out = []
    for i, c in enumerate(text):
        if which is None or i in which:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(orjson.dumps(c).decode()[1:-1])
    return "".join(out)


def delta_event(index: int, dtype: str, key: str, escaped_fragment: str) -> bytes:
    data = f'{{"type":"content_block_delta","index":{index},"delta":{{"type":"{dtype}","{key}":"{escaped_fragment}"}}}}'
    return f"event: content_block_delta\ndata: {data}\n\n".encode()


def text_stream(fragments: list[str], escape: set[int] | None = None) -> bytes:
    """A text turn whose deltas carry these fragments; characters at positions `escape` (of the joined text) are
    \\u-escaped in the JSON."""
    body = [sse(message_start(), text_start(0))]
    pos = 0
    for frag in fragments:
        which = None if escape is None else {i - pos for i in escape if pos <= i < pos + len(frag)}
        body.append(delta_event(0, "text_delta", "text", u_escape(frag, which if escape is not None else set())))
        pos += len(frag)
    body.append(sse(block_stop(0), message_delta("end_turn"), message_stop()))
    return b"".join(body)


def record(
    reads: list[bytes],
    *,
    secrets: Sequence[str] = (CANARY,),
    headers: dict[str, Any] | None = None,
    url: str = URL,
    body: dict[str, Any] | None = None,
    late: str | None = None,
) -> bytes:
    out = io.BytesIO()
    with RecordingWriter(out, source={"type": "test"}, secrets=list(secrets)) as w:
        if late:
            w.add_secrets([late])
        w.request(0, 0, 0.0, "POST", url, headers or {"anthropic-version": "2023-06-01"}, body or {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        for i, data in enumerate(reads):
            w.read(0, 0, 0.2 + i / 1000, data)
        w.end(0, 0, 1.0, "complete")
    return out.getvalue()


def cli(path: Path, *args: str) -> bytes:
    buf = io.BytesIO()
    old = sys.stdout
    sys.stdout = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
    try:
        main(["dump", str(path), *args])
        sys.stdout.flush()
        return buf.getvalue()
    finally:
        sys.stdout = old


def assert_no_canary(raw: bytes, tmp: Path, canary: str = CANARY) -> list[dict[str, Any]]:
    """Every reader: the file, read_recording (lines, joined reads), dump text, --json, --events --json, --timing."""
    forms = [canary.encode(), u_escape(canary).encode()]

    def clean(blob: bytes) -> None:
        for form in forms:
            assert form not in blob
        text = blob.decode("utf-8", "replace")
        assert not secret_spans(text, [canary])  # not there, as it is or JSON-escaped

    clean(raw)
    rec = read_recording(raw)
    for att in rec.attempts():
        clean(att.data)
        clean(orjson.dumps([att.request, att.response, att.end]))
    turns = dump_turns(rec)
    clean(orjson.dumps(turns))
    path = tmp / "rec.jsonl"
    path.write_bytes(raw)
    for args in ((), ("--json",), ("--events", "--json"), ("--json", "--timing")):
        clean(cli(path, *args))
    return turns


def joined_text(turns: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in turns[-1]["message"]["content"])


# --- the paths ----------------------------------------------------------------------------------------------------


def test_request_headers_query_and_body(tmp_path: Path) -> None:
    raw = record(
        [sse(*text_turn("hi"))],
        headers={"x-api-key": CANARY, "x-custom": f"key={CANARY}", "anthropic-version": "1"},
        url=f"{URL}?beta=true&api_key={CANARY}",
        body={"model": "m", "messages": [{"role": "user", "content": f"my key is {CANARY}"}]},
    )
    assert_no_canary(raw, tmp_path)
    req = read_recording(raw).turns[0].attempts[0].request
    assert req is not None
    assert "x-api-key" not in req["headers"] and req["headers"]["x-custom"] == f"key={REDACTED}"
    assert req["url"] == f"{URL}?beta=true&api_key={REDACTED}"


@pytest.mark.parametrize("header", ["x-api-key", "api-key", "authorization", "anthropic-api-key"])
def test_a_credential_first_seen_in_a_request_is_learned(tmp_path: Path, header: str) -> None:
    value = f"Bearer {CANARY}" if header == "authorization" else CANARY
    raw = record([sse(*text_turn(f"echo {CANARY}"))], secrets=(), headers={header: value})
    turns = assert_no_canary(raw, tmp_path)
    assert joined_text(turns) == f"echo {REDACTED}"


def test_a_query_key_is_learned(tmp_path: Path) -> None:
    raw = record([sse(*text_turn(f"echo {CANARY}"))], secrets=(), url=f"{URL}?api_key={CANARY}")
    assert_no_canary(raw, tmp_path)


def test_a_key_first_seen_late(tmp_path: Path) -> None:
    """The writer is opened without the key; it learns it (add_secrets) before the stream echoes it."""
    raw = record([sse(*text_turn(f"late {CANARY}"))], secrets=(), late=CANARY)
    assert joined_text(assert_no_canary(raw, tmp_path)) == f"late {REDACTED}"


def test_echo_in_one_read(tmp_path: Path) -> None:
    turns = assert_no_canary(record([sse(*text_turn(f"a {CANARY} b"))]), tmp_path)
    assert joined_text(turns) == f"a {REDACTED} b"


def test_echo_across_two_reads(tmp_path: Path) -> None:
    data = sse(*text_turn(f"a {CANARY} b"))
    cut = data.index(CANARY.encode()) + 5
    turns = assert_no_canary(record([data[:cut], data[cut:]]), tmp_path)
    assert joined_text(turns) == f"a {REDACTED} b"


def test_echo_one_character_per_delta(tmp_path: Path) -> None:
    text = f"key: {CANARY}!"
    turns = assert_no_canary(record([text_stream(list(text))]), tmp_path)
    assert joined_text(turns) == f"key: {REDACTED}!"


def test_echo_one_character_per_delta_and_per_read(tmp_path: Path) -> None:
    text = f"{CANARY}{CANARY[:5]}"
    data = text_stream(list(text))
    reads = [data[i : i + 1] for i in range(len(data))]
    turns = assert_no_canary(record(reads), tmp_path)
    assert joined_text(turns) == f"{REDACTED}{CANARY[:5]}"


def test_u_escaped_echo(tmp_path: Path) -> None:
    text = f"x {CANARY} y"
    turns = assert_no_canary(record([text_stream([text], escape=set(range(len(text))))]), tmp_path)
    assert joined_text(turns) == f"x {REDACTED} y"


def test_doubly_escaped_echo_in_text(tmp_path: Path) -> None:
    """The text itself holds the escaped key (\\u0073k-...): a reader that unescapes it would find the key."""
    escaped_in_text = u_escape(CANARY)  # the characters \ u 0 0 7 3 ...
    turns = assert_no_canary(record([sse(*text_turn(f"<{escaped_in_text}>"))]), tmp_path)
    assert joined_text(turns) == f"<{REDACTED}>"


def test_echo_in_tool_input_across_deltas(tmp_path: Path) -> None:
    partial = orjson.dumps({"cmd": f"export KEY={CANARY}"}).decode()
    fragments = [partial[i : i + 3] for i in range(0, len(partial), 3)]
    raw = record(
        [
            sse(
                message_start(),
                tool_start(0),
                *[json_delta(0, f) for f in fragments],
                block_stop(0),
                message_delta("tool_use"),
                message_stop(),
            )
        ]
    )
    turns = assert_no_canary(raw, tmp_path)
    block = turns[-1]["message"]["content"][0]
    assert block["input"] == {"cmd": f"export KEY={REDACTED}"}  # still valid JSON


def test_echo_in_a_json_response_body(tmp_path: Path) -> None:
    body = orjson.dumps(
        {
            "type": "message",
            "id": "m",
            "content": [{"type": "text", "text": u_escape(CANARY)}],
            "stop_reason": "end_turn",
            "usage": {},
        }
    )
    body = body.replace(u_escape(CANARY).replace("\\", "\\\\").encode(), u_escape(CANARY).encode())
    assert_no_canary(record([body[:40], body[40:]]), tmp_path)


def test_echo_in_an_error_event_and_in_non_utf8_bytes(tmp_path: Path) -> None:
    data = sse(message_start(), ("error", {"type": "error", "error": {"type": "x", "message": f"bad key {CANARY}"}}))
    assert_no_canary(record([data, b"\xff\xfe" + CANARY.encode() + b"\n\n"]), tmp_path)


# --- the property ---------------------------------------------------------------------------------------------------

TEXT = st.text(alphabet='sk-ant ab\n\\"é', max_size=12)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=TEXT,
    after=TEXT,
    copies=st.integers(1, 2),
    delta_cuts=st.lists(st.integers(0, 200), max_size=40),
    read_cuts=st.lists(st.integers(0, 4000), max_size=30),
    escape=st.one_of(st.none(), st.sets(st.integers(0, 120), max_size=40)),
)
def test_no_split_or_escaping_lets_the_key_through(
    tmp_path: Path,
    before: str,
    after: str,
    copies: int,
    delta_cuts: list[int],
    read_cuts: list[int],
    escape: set[int] | None,
) -> None:
    text = before + (CANARY + after) * copies
    points = sorted({c % (len(text) + 1) for c in delta_cuts})
    fragments = [text[a:b] for a, b in itertools.pairwise([0, *points, len(text)])]
    data = text_stream(fragments, escape=escape if escape is not None else set())
    rpoints = sorted({c % (len(data) + 1) for c in read_cuts})
    reads = [data[a:b] for a, b in itertools.pairwise([0, *rpoints, len(data)])]
    raw = record(reads)
    turns = assert_no_canary(raw, tmp_path)
    assert joined_text(turns) == mask_text(text, [CANARY])  # the rest of the text is intact
    assert turns[-1]["outcome"] == "text_finish" and turns[-1]["diagnostics"] == []


@settings(max_examples=examples(60), deadline=None)
@given(chunks=st.lists(st.binary(max_size=40), max_size=12), cut=st.integers(0, 200))
def test_stream_redactor_on_any_bytes_keeps_them_unless_they_hold_the_key(chunks: list[bytes], cut: int) -> None:
    data = b"".join(chunks)
    data = data[:cut] + CANARY.encode() + data[cut:]
    r = StreamRedactor([CANARY])
    out = b"".join(r.feed(data[i : i + 7]) for i in range(0, len(data), 7)) + r.flush()
    assert CANARY.encode() not in out
    empty = StreamRedactor([])
    assert empty.feed(data) == data and empty.flush() == b""


def test_redaction_helpers() -> None:
    assert credential_values({"api-key": CANARY, "x-other": "x" * 20}) == [CANARY]
    assert credential_values([], f"{URL}?api_key={CANARY}") == [CANARY]
    assert redact({"a": [f"\\u0073k{CANARY[2:]}"]}, [CANARY]) == {"a": [REDACTED]}
    assert mask_text("no secret \\n here", [CANARY]) == "no secret \\n here"


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 5000), max_size=20))
def test_without_the_key_the_recorded_bytes_are_the_stream_exactly(seed: int, cuts: list[int]) -> None:
    """The hold-back moves read boundaries but never changes a byte of a stream that holds no secret."""
    from inspector.testing.streamgen import generate

    data = generate(seed).data
    points = sorted({c % (len(data) + 1) for c in cuts})
    reads = [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]
    rec = read_recording(record(reads))
    assert rec.turns[0].attempts[0].data == data


# --- through the real pipeline: loop + Recorder + RecordingWriter, then replay ------------------------------------


async def test_a_key_echoed_one_byte_at_a_time_never_reaches_the_recording_or_the_replay(tmp_path: Path) -> None:
    import asyncio

    import httpx2

    from inspector.sessions.sources import api_session, replay_session

    text = f"your key is {CANARY}, keep it safe"
    body = text_stream(list(text))

    class OneByte(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for i in range(len(body)):
                yield body[i : i + 1]

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=OneByte())

    path = tmp_path / "api.jsonl"
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    session = api_session("claude-test", "hi", api_key=CANARY, http_client=client, record=path, builtin=False)
    async with asyncio.timeout(30):
        await session.run()
    session.close()
    turns = assert_no_canary(path.read_bytes(), tmp_path)
    assert joined_text(turns) == f"your key is {REDACTED}, keep it safe"

    seen: list[bytes] = []
    replay = replay_session(path)
    replay.bus.subscribe(lambda obs: seen.append(orjson.dumps(obs.to_json(), default=str)))
    async with asyncio.timeout(30):
        await replay.run()
    replay.close()
    assert seen and not any(CANARY.encode() in s for s in seen)


def test_an_export_masks_the_sessions_key_even_split_across_reads(tmp_path: Path) -> None:
    """The dashboard's export is given the session's key (Session.secrets) and masks it as --record does: also
    when a relay echoes it split across two reads, which no per-observation redaction can see."""
    from inspector.observe import observations as O
    from inspector.tui.export import write_recording

    key = "sk-ant-api03-EXPORT-CANARY-0123456789"
    text = orjson.dumps(f"echo {key}").decode()
    event = (
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        f'"delta":{{"type":"text_delta","text":{text}}}}}\n\n'
    ).encode()
    cut = event.index(b"CANARY")
    observations = [
        O.AttemptStarted(0.0, 0, 0, "POST", "https://api.example/v1/messages", {}, {"model": "m"}),
        O.ReadReceived(0.1, 0, 0, 0, 0.1, event[:cut]),
        O.ReadReceived(0.2, 0, 0, 1, 0.2, event[cut:]),
        O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"),
    ]
    path = write_recording(tmp_path / "e.jsonl", observations, {"type": "api"}, [key])
    raw = path.read_bytes()
    assert key.encode() not in raw and b"CANARY" not in raw
    with_no_key = write_recording(tmp_path / "plain.jsonl", observations, {"type": "api"})
    assert b"CANARY" in with_no_key.read_bytes()  # (the canary is really there to mask)


def test_sessions_say_their_secrets_for_an_export(tmp_path: Path) -> None:
    from inspector.sessions.sources import api_session, scenario_session

    key = "sk-ant-api03-SESSION-CANARY-0123456789"
    s = api_session("claude-test", "hi", api_key=key, workspace=tmp_path)
    assert s.secrets == [key]
    assert scenario_session("weather").secrets == []


def test_a_masked_event_keeps_its_integers_beyond_64_bits() -> None:
    """An event rewritten to mask a key is written again without turning its big integers into floats."""
    from inspector.core import exactjson

    escaped = "".join(f"\\u{ord(c):04x}" for c in CANARY)  # the key \\u-escaped: the event is parsed and rewritten
    data = sse(message_delta("end_turn", usage={"output_tokens": 123456789012345678901234, "note": f"k {escaped}"}))
    r = StreamRedactor([CANARY])
    out = r.feed(data) + r.flush()
    assert CANARY.encode() not in out and b"123456789012345678901234" in out
    (line,) = [x for x in out.split(b"\n") if x.startswith(b"data: ")]
    assert exactjson.loads(line[6:])["usage"] == {"output_tokens": 123456789012345678901234, "note": f"k {REDACTED}"}


async def test_a_sessions_recording_is_masked_in_one_place(tmp_path: Path) -> None:
    """The loop's recorder writes what its redacting publisher published: the key is masked once, on the bus, not
    again by the writer (whose stream redaction cost ~25 us per observation), and still never reaches the file,
    echoed one byte per read and \\u-escaped."""
    import asyncio

    import httpx2

    from inspector.sessions.sources import api_session

    text = f"your key is {CANARY}, keep it safe"
    body = text_stream(list(text), escape={3, len("your key is ") + 2})

    class OneByte(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for i in range(len(body)):
                yield body[i : i + 1]

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=OneByte())

    path = tmp_path / "one.jsonl"
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    session = api_session("claude-test", "hi", api_key=CANARY, http_client=client, record=path, builtin=False)
    assert session.recorder is not None
    assert isinstance(session.recorder.writer, RecordingWriter)
    assert session.recorder.writer._secrets == []  # the writer redacts nothing itself: one redaction point
    async with asyncio.timeout(30):
        await session.run()
    session.close()
    turns = assert_no_canary(path.read_bytes(), tmp_path)
    assert joined_text(turns) == f"your key is {REDACTED}, keep it safe"

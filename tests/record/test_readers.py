"""Readers read their input as a stream (bounded memory, maximum line size) and validate the shapes of the lines:
a field of the wrong type is a warning naming the line, never a traceback in `dump` or `replay`."""

from __future__ import annotations

import asyncio
import io
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.record import recording as R
from inspector.record.dump import Dumper, dump_ok, dump_turns, format_turns
from inspector.record.har import load_any, read_har
from inspector.record.recording import RecordingError, RecordingWriter, read_recording
from inspector.sessions.sources import replay_session
from inspector.testing.hyp import examples
from inspector.testing.streamgen import generate, sse, text_turn, tool_turn

SOURCE = {"type": "test"}


class Chunked(io.RawIOBase):
    """A binary file that refuses to be read whole: every read must ask for a bounded size."""

    def __init__(self, chunks: Iterable[bytes], limit: int = R.CHUNK_BYTES) -> None:
        self.chunks = iter(chunks)
        self.limit = limit
        self.pending = b""
        self.asked: list[int] = []
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # (what io passes)
        size = len(b)
        self.asked.append(size)
        assert 0 < size <= max(self.limit, io.DEFAULT_BUFFER_SIZE), f"read of {size} bytes"
        while not self.pending:
            nxt = next(self.chunks, None)
            if nxt is None:
                return 0
            self.pending = nxt
        n = min(size, len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        self.given += n
        return n

    def read(self, size: int = -1) -> bytes:
        assert size is not None and size > 0, "read the whole input"
        return super().read(size)


def recording_bytes(*attempts: tuple[int, int, list[bytes]], status: int = 200) -> bytes:
    out = io.BytesIO()
    with RecordingWriter(out, source=SOURCE) as w:
        for turn, attempt, reads in attempts:
            w.request(turn, attempt, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m", "messages": []})
            w.response(turn, attempt, 0.1, status, {"content-type": "text/event-stream"})
            for i, data in enumerate(reads):
                w.read(turn, attempt, 0.2 + i / 1000, data)
            w.end(turn, attempt, 0.5, "complete")
    return out.getvalue()


# --- streaming ----------------------------------------------------------------------------------------------------


def test_plain_sse_is_kept_as_chunks_read_incrementally() -> None:
    body = sse(*text_turn("x" * 100)) * 30000  # ~ 10 MB, many CHUNK_BYTES
    source = Chunked(body[i : i + 65536] for i in range(0, len(body), 65536))
    rec = read_recording(cast(IO[bytes], source))  # (Chunked is a RawIOBase: a binary file, not typed as IO)
    [att] = rec.attempts()
    assert len(att.reads) > 1 and all(len(r.data) <= 2 * R.CHUNK_BYTES for r in att.reads)
    assert att.data == body and rec.warnings == []
    assert max(source.asked) <= R.CHUNK_BYTES


def test_jsonl_is_read_line_by_line_and_reads_can_be_left_out() -> None:
    reads = [sse(*tool_turn(['{"a": 1}']))[i : i + 7] for i in range(0, 400, 7)]
    raw = recording_bytes((0, 0, reads), (1, 0, [sse(*text_turn("done"))]))
    seen: list[tuple[int, int, bytes]] = []
    rec = read_recording(
        cast(IO[bytes], Chunked([raw[i : i + 100] for i in range(0, len(raw), 100)])),
        keep_reads=False,
        on_read=lambda a, r: seen.append((a.turn, a.attempt, r.data)),
    )
    assert all(a.reads == [] for a in rec.attempts())
    assert [d for t, _, d in seen if t == 0] == reads
    assert (rec.turns[0].attempts[0].request or {})["body"] == {"model": "m", "messages": []}


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 4000), max_size=12))
def test_dumper_fed_as_read_equals_dump_of_the_whole_recording(seed: int, cuts: list[int]) -> None:
    data = generate(seed).data
    points = sorted({c % (len(data) + 1) for c in cuts})
    reads = [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]
    raw = recording_bytes((0, 0, reads))
    whole = dump_turns(read_recording(raw))
    dumper = Dumper()
    rec = load_any(raw, on_read=dumper.feed, keep_reads=False)
    assert dumper.turns(rec) == whole
    # and as plain SSE
    assert dump_turns(read_recording(data))[0]["message"] == whole[0]["message"]


@pytest.mark.parametrize("split", [1, 2, 3, 100])
def test_a_recording_behind_a_byte_order_mark_is_read_with_a_warning(split: int) -> None:
    """An editor that saves with a BOM: still a recording (not plain SSE without an event), and said so."""
    raw = recording_bytes((0, 0, [sse(*text_turn("ok"))]))
    bommed = b"\xef\xbb\xbf" + raw
    for source in (bommed, cast(IO[bytes], Chunked([bommed[:split], bommed[split:]]))):
        rec = load_any(source)
        assert not rec.is_plain and rec.warnings == ["line 1: starts with a byte order mark (U+FEFF), ignored"]
        assert dump_turns(rec) == dump_turns(read_recording(raw))


def test_overlong_jsonl_line_is_skipped_with_a_warning_naming_it() -> None:
    raw = recording_bytes((0, 0, [b"x" * 5000, sse(*text_turn("ok"))]))
    rec = read_recording(raw, max_line=2000)
    assert any(w.startswith("line 4: longer than 2000 bytes") for w in rec.warnings), rec.warnings
    assert rec.turns[0].attempts[0].data == sse(*text_turn("ok"))


def test_overlong_plain_sse_line_is_cut_and_the_stream_goes_on() -> None:
    body = b"data: " + b"y" * 10_000 + b"\n\n" + sse(*text_turn("after"))
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    rec = read_recording(cast(IO[bytes], Chunked(chunks)), max_line=3000)
    assert any("longer than 3000 bytes" in w for w in rec.warnings)
    data = rec.turns[0].attempts[0].data
    assert len(data) < len(body) and data.endswith(sse(*text_turn("after")))
    [turn] = dump_turns(rec)
    assert turn["message"]["content"] == [{"type": "text", "text": "after"}]


# (ids named: a recording header carries its start time, and xdist needs the same test ids in every worker)
@pytest.mark.parametrize("prefix", [b"", recording_bytes()], ids=["plain", "after-a-header"])
def test_an_endless_line_ends_the_reading(prefix: bytes) -> None:
    """/dev/zero: a line without end. Reading stops after GIVE_UP_FACTOR * max_line bytes, with a warning."""
    zeros = itertools.chain([prefix], itertools.repeat(b"\0" * 4096))
    source = Chunked(zeros)
    rec = read_recording(cast(IO[bytes], source), max_line=100_000)
    assert any("stopped reading" in w for w in rec.warnings), rec.warnings
    assert not any("the input ends" in w for w in rec.warnings)  # (it may not end there: it is not read further)
    assert source.given < 2 * R.GIVE_UP_FACTOR * 100_000 + 10 * R.CHUNK_BYTES


def test_dump_event_size_limit() -> None:
    body = b"data: " + b"z" * 5000 + b"\n" + b"data: more\n" * 2000
    dumper = Dumper(max_event=4000)
    rec = load_any(body, on_read=dumper.feed, keep_reads=False)
    [turn] = dumper.turns(rec)
    assert "dump.event_too_large" in [d["code"] for d in turn["diagnostics"]]
    assert not dump_ok([turn])


def test_garbage_keeps_a_bounded_number_of_diagnostics() -> None:
    body = b"\xff\xfe nonsense\n" * 20_000
    dumper = Dumper()
    rec = load_any(body, on_read=dumper.feed, keep_reads=False)
    [turn] = dumper.turns(rec)
    codes = [d["code"] for d in turn["diagnostics"]]
    assert len(codes) <= 1010 and "diagnostics.capped" in codes  # the engine's cap per code
    assert "protocol.no_events" in codes  # what only the end reveals is kept


# --- shapes of recorded lines ------------------------------------------------------------------------------------

HEADER = b'{"kind":"header","format":"stream-inspector-recording","version":1,"source":{}}\n'


def lines(*objs: dict[str, Any]) -> bytes:
    return HEADER + b"".join(orjson.dumps(o) + b"\n" for o in objs)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"kind": "response", "turn": 0, "attempt": 0, "t": 0.1, "status": "abc", "headers": {}}, "status"),
    ({"kind": "response", "turn": 0, "attempt": 0, "t": 0.1, "status": 200, "headers": ["a"]}, "headers"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": "soon", "method": "POST", "url": "u", "body": {}}, "t"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "headers": {"a": 1}, "body": {}}, "headers"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"messages": "hi"}}, "body.messages"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"messages": ["hi"]}}, "body.messages"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"max_tokens": "many"}}, "body.max_tokens"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"system": 3}}, "body.system"),
    ({"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"tools": {"a": 1}}}, "body.tools"),
    ({"kind": "end", "turn": 0, "attempt": 0, "t": 1, "status": 5, "reason": None}, "status"),
    ({"kind": "end", "turn": 0, "attempt": 0, "t": 1, "status": "failed", "reason": ["x"]}, "reason"),
    ({"kind": "obs", "type": "tool_state", "id": "t", "name": 1, "state": "succeeded"}, "name"),
    ({"kind": "obs", "type": "tool_state", "id": "t", "state": "succeeded", "times": {"running": "a"}}, "times"),
    ({"kind": "obs", "type": "tool_state", "id": "t", "state": "succeeded", "times": []}, "times"),
    ({"kind": "obs", "type": "loop_finished", "messages": "all"}, "messages"),
]


@pytest.mark.parametrize(("line", "field"), BAD, ids=[f"{b[0]['kind']}.{b[1]}" for b in BAD])
def test_a_field_of_the_wrong_type_is_dropped_with_a_warning(line: dict[str, Any], field: str) -> None:
    read = {"kind": "read", "turn": 0, "attempt": 0, "t": 0.2, "data": sse(*text_turn("hi")).decode()}
    rec = read_recording(lines(line, read))
    assert any(w.startswith(f"line 2: {line['kind']}: {field} ") for w in rec.warnings), rec.warnings
    target = rec.observations[0] if line["kind"] == "obs" else getattr(rec.turns[0].attempts[0], line["kind"])
    name = field.split(".")[-1]
    holder = target["body"] if field.startswith("body.") else target
    assert name not in holder
    assert target["invalid"][field] == (line["body"] if field.startswith("body.") else line)[name]  # raw kept
    # every reader copes
    turns = dump_turns(rec)
    assert "None" not in format_turns(turns)


def test_a_tool_observation_without_a_string_id_is_skipped() -> None:
    rec = read_recording(lines({"kind": "obs", "type": "tool_state", "id": 1, "state": "succeeded"}))
    assert rec.observations == []
    assert rec.warnings == [
        "line 2: obs: id 1 is not a string, dropped",
        "line 2: tool_state observation without a string id, skipped",
    ]


def test_a_bad_recorded_status_says_so_and_replay_does_not_fail_on_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        lines(
            {
                "kind": "request",
                "turn": 0,
                "attempt": 0,
                "t": 0,
                "method": "POST",
                "url": "u",
                "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "x"},
            },
            {"kind": "response", "turn": 0, "attempt": 0, "t": 0.1, "status": "abc", "headers": "nope"},
            {"kind": "read", "turn": 0, "attempt": 0, "t": 0.2, "data": sse(*text_turn("hello")).decode()},
            {"kind": "end", "turn": 0, "attempt": 0, "t": 0.3, "status": "complete", "reason": None},
        )
    )
    code = main(["dump", str(path)])
    assert code == 0
    rec = read_recording(path)
    assert any(w.startswith("line 3: response: status 'abc' is not an HTTP status") for w in rec.warnings)

    async def replay() -> str:
        session = replay_session(path)
        async with asyncio.timeout(20):
            result = await session.run()
        return str(result)

    outcome = asyncio.run(replay())
    assert "connection failed" not in outcome.lower()


# --- HAR ---------------------------------------------------------------------------------------------------------


def har(*entries: object) -> bytes:
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": list(entries)}})


def sse_entry(**over: object) -> dict[str, Any]:
    entry = {
        "startedDateTime": "2025-01-01T00:00:00.000Z",
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": "https://x/v1/messages",
            "headers": [],
            "postData": {"text": '{"model": "m"}'},
        },
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "text/event-stream"}],
            "content": {"mimeType": "text/event-stream", "text": sse(*text_turn("hi")).decode()},
        },
        "timings": {"send": 1, "wait": 5},
    }
    entry.update(over)
    return entry


@pytest.mark.parametrize(
    "over",
    [
        {"response": "oops"},
        {"response": {"status": 200, "headers": "x", "content": {"mimeType": "text/event-stream", "text": "data: x"}}},
        {"response": {"status": "abc", "content": {"mimeType": "text/event-stream", "text": 5}}},
        {
            "response": {
                "status": 200,
                "content": "x",
                "headers": [{"name": "content-type", "value": "text/event-stream"}],
            }
        },
        {"request": ["x"]},
        {"request": {"postData": 5, "headers": {"a": "b"}, "method": 1, "url": None}},
        {"request": {"postData": {"text": "!!", "encoding": "base64"}}},
        {"timings": "slow"},
        {"timings": {"wait": "x", "send": float("inf")}},
        {"startedDateTime": "2025-01-01T00:00:01"},  # naive, the other entry is aware
        {"startedDateTime": 7, "time": "x"},
    ],
)
def test_har_fields_of_the_wrong_type_do_not_crash(
    over: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    raw = har(sse_entry(), sse_entry(**over))
    rec = read_har(raw)
    dump_turns(rec)
    path = tmp_path / "x.har"
    path.write_bytes(raw)
    assert main(["dump", str(path)]) in (0, 1)
    out = capsys.readouterr().out
    assert "None" not in out and "Traceback" not in out


def test_har_size_limit_is_a_one_line_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = har(sse_entry(), sse_entry())
    with pytest.raises(RecordingError, match="HAR file larger than"):
        load_any(raw, max_har=100)
    from inspector.record import har as H

    old = H.MAX_HAR_BYTES
    defaults = H.load_any.__kwdefaults__
    assert defaults is not None
    try:
        H.MAX_HAR_BYTES = 100
        defaults["max_har"] = 100
        path = tmp_path / "x.har"
        path.write_bytes(raw)
        code = main(["dump", str(path)])
    finally:
        H.MAX_HAR_BYTES = old
        defaults["max_har"] = old
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "HAR file larger than" in err


def test_har_messages_http_error_is_an_attempt_retried_by_the_next_entry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rate_limited = sse_entry(
        response={
            "status": 429,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "content": {
                "mimeType": "application/json",
                "text": '{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
            },
        }
    )
    other = sse_entry(request={"method": "GET", "url": "https://x/favicon.ico"}, response={"status": 404})
    rec = read_har(har(rate_limited, other, sse_entry(), sse_entry()))
    assert [[a.attempt for a in t.attempts] for t in rec.turns] == [[0, 1], [0]]
    assert rec.header["skipped_entries"] == 1
    turns = dump_turns(rec)
    assert turns[0]["failed_attempts"][0]["outcome"] == "http_error"
    assert turns[0]["failed_attempts"][0]["error"] == {"type": "rate_limit_error", "message": "slow down"}
    assert dump_ok(turns)
    path = tmp_path / "x.har"
    path.write_bytes(har(rate_limited))
    assert main(["dump", str(path)]) == 1
    assert "http_error (HTTP 429)" in capsys.readouterr().out


def test_warnings_are_bounded() -> None:
    rec = read_recording(HEADER + b"garbage\n" * 5000)
    assert len(rec.warnings) == R.MAX_WARNINGS + 1
    assert rec.warnings[-1] == f"{5000 - R.MAX_WARNINGS} more warnings not shown"

"""Recording format: writer, readers, secrets, crash safety."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inspector
from inspector.core.redaction import REDACTED, clean_headers
from inspector.record.recording import (
    FORMAT,
    PLAIN_FORMAT,
    RecordedRead,
    RecordingError,
    RecordingWriter,
    is_recording,
    read_recording,
)
from inspector.testing.hyp import examples

CANARY = "sk-ant-canary-1234567890"
SOURCE = {"type": "scenario", "name": "parse_date"}


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


# --- header ------------------------------------------------------------------------------------------------------


def test_header_line(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    started = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
    with RecordingWriter(path, source=SOURCE, started_at=started):
        pass
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    header = lines_of(path)[0]
    assert header == {
        "kind": "header",
        "format": FORMAT,
        "version": 1,
        "tool_version": inspector.__version__,
        "source": SOURCE,
        "started_at": "2025-03-04T05:06:07.890000Z",
    }
    assert list(header)[0] == "kind"  # detection relies on kind coming first
    recording = read_recording(path)
    assert recording.header == header
    assert recording.turns == [] and recording.warnings == [] and not recording.is_plain


def test_started_at_defaults_to_now_utc(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    before = datetime.now(UTC)
    RecordingWriter(path, source={}).close()
    stamp = datetime.fromisoformat(read_recording(path).header["started_at"].replace("Z", "+00:00"))
    assert stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(UTC)


# --- reads round-trip --------------------------------------------------------------------------------------------

AWKWARD_READS = [
    b'event: message_start\ndata: {"type":"message_start"}\n\n',
    b"\xff\xfe not utf-8 \xc3\x28",  # invalid UTF-8
    b"data: a\x00b\n\n",  # NUL byte (valid UTF-8)
    b"\x00",
    b"event: ping\rdata: {}\r\r",  # "\r"-only line endings
    b"",  # empty read
    b"\r\n\r\n",
    "data: héllo ✓ 🎉\n\n".encode(),
    b"\xe2\x9c",  # a multi-byte char cut at the end of a read
    b"\x93 rest",  # ...and its continuation in the next read
    b"\xef\xbb\xbfdata: bom inside\n\n",
]


def test_reads_round_trip_losslessly(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with RecordingWriter(path, source=SOURCE) as writer:
        writer.request(1, 1, 0.5, "POST", "https://api.example/v1/messages", {"content-type": "application/json"}, {})
        writer.response(1, 1, 0.25, 200, {"content-type": "text/event-stream"})
        for i, chunk in enumerate(AWKWARD_READS):
            writer.read(1, 1, 0.25 + i / 100, chunk)
        writer.end(1, 1, 1.5, "complete")

    # the file itself is clean JSON Lines: no raw CR or NUL, one object per line
    raw = path.read_bytes()
    assert b"\r" not in raw and b"\x00" not in raw
    read_lines = [line for line in lines_of(path) if line["kind"] == "read"]
    assert len(read_lines) == len(AWKWARD_READS)
    for line, chunk in zip(read_lines, AWKWARD_READS, strict=True):
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            assert "data" not in line and base64.b64decode(line["b64"]) == chunk
        else:
            assert "b64" not in line and line["data"] == chunk.decode("utf-8")

    recording = read_recording(path)
    assert recording.warnings == []
    [attempt] = list(recording.attempts())
    assert [read.data for read in attempt.reads] == AWKWARD_READS
    assert [read.t for read in attempt.reads] == [0.25 + i / 100 for i in range(len(AWKWARD_READS))]
    assert attempt.data == b"".join(AWKWARD_READS)
    assert attempt.request is not None and attempt.response is not None
    assert attempt.request["method"] == "POST" and attempt.request["t"] == 0.5
    assert attempt.response["status"] == 200
    assert attempt.end == {"kind": "end", "turn": 1, "attempt": 1, "t": 1.5, "status": "complete", "reason": None}


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.binary(max_size=64) | st.text(max_size=32).map(str.encode), max_size=12))
def test_any_reads_round_trip(chunks: list[bytes]) -> None:
    out = io.BytesIO()
    writer = RecordingWriter(out, source=SOURCE)
    for i, chunk in enumerate(chunks):
        writer.read(3, 2, float(i), chunk)
    writer.close()
    recording = read_recording(out.getvalue())
    assert recording.warnings == []
    reads = [read for attempt in recording.attempts() for read in attempt.reads]
    assert reads == [RecordedRead(t=float(i), data=chunk) for i, chunk in enumerate(chunks)]


def test_writer_accepts_open_binary_file_and_leaves_it_open() -> None:
    out = io.BytesIO()
    with RecordingWriter(out, source=SOURCE) as writer:
        writer.read(1, 1, 0.0, b"data: x\n\n")
    assert not out.closed
    assert read_recording(out.getvalue()).turns[0].attempts[0].data == b"data: x\n\n"
    with pytest.raises(TypeError):
        RecordingWriter(io.StringIO(), source=SOURCE)  # type: ignore[arg-type]  # a text file, on purpose


def test_write_after_close_fails_and_close_is_idempotent(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "rec.jsonl", source=SOURCE)
    writer.close()
    writer.close()
    assert writer.closed
    with pytest.raises(ValueError):
        writer.read(1, 1, 0.0, b"x")


# --- grouping ----------------------------------------------------------------------------------------------------


def test_multi_turn_multi_attempt_grouping(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with RecordingWriter(path, source=SOURCE) as writer:
        # turn 1: first attempt dropped mid-stream, retried successfully
        writer.request(1, 1, 0.0, "POST", "u", {}, {"n": 1})
        writer.response(1, 1, 0.1, 200, {})
        writer.read(1, 1, 0.2, b"a1")
        writer.end(1, 1, 0.3, "dropped", "connection reset")
        writer.observation({"event": "retry", "turn": 1, "delay": 0.5})
        writer.request(1, 2, 1.0, "POST", "u", {}, {"n": 2})
        writer.response(1, 2, 0.1, 200, {})
        writer.read(1, 2, 0.2, b"b1")
        writer.read(1, 2, 0.3, b"b2")
        writer.end(1, 2, 0.4, "complete")
        # turn 2: one attempt, an HTTP error
        writer.request(2, 1, 2.0, "POST", "u", {}, {"n": 3})
        writer.response(2, 1, 0.1, 529, {})
        writer.read(2, 1, 0.2, b'{"type":"error"}')
        writer.end(2, 1, 0.3, "error", "overloaded")

    recording = read_recording(path)
    assert recording.warnings == []
    assert [turn.turn for turn in recording.turns] == [1, 2]
    assert [[a.attempt for a in turn.attempts] for turn in recording.turns] == [[1, 2], [1]]
    assert [(a.turn, a.attempt, a.data) for a in recording.attempts()] == [
        (1, 1, b"a1"),
        (1, 2, b"b1b2"),
        (2, 1, b'{"type":"error"}'),
    ]
    t1a1, t1a2, t2a1 = recording.attempts()
    assert t1a1.end is not None and t1a2.request is not None and t2a1.response is not None and t2a1.end is not None
    assert t1a1.end["status"] == "dropped" and t1a1.end["reason"] == "connection reset"
    assert t1a2.request["body"] == {"n": 2} and t1a2.request["t"] == 1.0
    assert t2a1.response["status"] == 529 and t2a1.end["status"] == "error"
    assert recording.observations == [{"kind": "obs", "event": "retry", "turn": 1, "delay": 0.5}]


# --- secrets -----------------------------------------------------------------------------------------------------


def test_sensitive_headers_are_removed_not_masked() -> None:
    headers = {
        "Authorization": "Bearer x",
        "X-API-Key": "k",
        "Cookie": "c",
        "set-cookie": "s",
        "Proxy-Authorization": "p",
        "anthropic-version": "2023-06-01",
        "Content-Type": "application/json",
    }
    assert clean_headers(headers) == {"anthropic-version": "2023-06-01", "content-type": "application/json"}
    pairs = [(b"set-cookie", b"a"), (b"vary", b"a"), (b"vary", b"b")]
    assert clean_headers(pairs) == {"vary": "a, b"}


def test_canary_secret_never_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    headers = {"x-api-key": CANARY, "Authorization": f"Bearer {CANARY}", "X-Echo": f"key={CANARY}"}
    with RecordingWriter(path, source={"type": "api", "note": CANARY}, secrets=[CANARY]) as writer:
        writer.request(
            1,
            1,
            0.0,
            "POST",
            f"https://api.example/v1/messages?key={CANARY}",
            headers,
            {"messages": [{"role": "user", "content": f"my key is {CANARY}"}], CANARY: 1},
        )
        writer.response(1, 1, 0.1, 200, {"set-cookie": CANARY, "x-request-id": f"req_{CANARY}"})
        writer.read(1, 1, 0.2, f'data: {{"text":"{CANARY}"}}\n\n'.encode())
        writer.read(1, 1, 0.3, b"\xff\xfe" + CANARY.encode() + b"\x00")  # not UTF-8: stored as base64
        writer.end(1, 1, 0.4, "error", f"bad key {CANARY}")
        writer.observation({"note": CANARY, "nested": [{"deep": CANARY}]})
        writer.observation({"object": _Reprs(CANARY)})  # only visible once serialized (default=str)

    raw = path.read_bytes()
    assert CANARY.encode() not in raw
    for line in raw.splitlines():  # ... not even inside base64
        obj = orjson.loads(line)
        if "b64" in obj:
            assert CANARY.encode() not in base64.b64decode(obj["b64"])
    recording = read_recording(path)
    assert recording.warnings == []
    [attempt] = list(recording.attempts())
    assert attempt.request is not None and attempt.response is not None and attempt.end is not None
    assert attempt.request["headers"] == {"x-echo": f"key={REDACTED}"}  # auth headers removed, not masked
    assert attempt.request["body"]["messages"][0]["content"] == f"my key is {REDACTED}"
    assert attempt.response["headers"] == {"x-request-id": f"req_{REDACTED}"}
    assert attempt.reads[0].data == b'data: {"text":"' + REDACTED.encode() + b'"}\n\n'
    assert attempt.reads[1].data == b"\xff\xfe" + REDACTED.encode() + b"\x00"
    assert attempt.end["reason"] == f"bad key {REDACTED}"
    assert recording.header["source"]["note"] == REDACTED
    assert recording.observations[1] == {"kind": "obs", "object": f"<{REDACTED}>"}


def test_headers_removed_even_without_secrets_list(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    with RecordingWriter(path, source=SOURCE) as writer:
        writer.request(1, 1, 0.0, "POST", "u", {"X-Api-Key": CANARY, "authorization": f"Bearer {CANARY}"}, {})
    assert CANARY.encode() not in path.read_bytes()


def test_secret_that_would_break_json_replaces_the_line(tmp_path: Path) -> None:
    # a (silly) secret that matches JSON syntax cannot be redacted inside the text: the line becomes a placeholder
    path = tmp_path / "rec.jsonl"
    secret = '"attempt":'
    with RecordingWriter(path, source=SOURCE, secrets=[secret]) as writer:
        writer.read(1, 1, 0.0, b"x")
    assert secret.encode() not in path.read_bytes()
    recording = read_recording(path)
    assert recording.turns == [] and recording.unknown == [{"kind": "redacted", "original_kind": "read"}]


def test_short_secrets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        RecordingWriter(tmp_path / "rec.jsonl", source=SOURCE, secrets=["kind"])


class _Reprs:
    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return f"<{self.text}>"


# --- crash safety ------------------------------------------------------------------------------------------------


def test_every_line_is_flushed_before_close(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    writer = RecordingWriter(path, source=SOURCE)
    try:
        writer.request(1, 1, 0.0, "POST", "u", {}, {})
        writer.read(1, 1, 0.1, b"event: ping\n")
        writer.read(1, 1, 0.2, b"data: {}\n\n")
        with open(path, "rb") as other:  # another handle, writer still open
            recording = read_recording(other)
        assert recording.warnings == []
        [attempt] = list(recording.attempts())
        assert attempt.request is not None and attempt.data == b"event: ping\ndata: {}\n\n"
    finally:
        writer.close()


def test_process_killed_without_close_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    script = textwrap.dedent(
        f"""
        import os
        from inspector.record.recording import RecordingWriter
        writer = RecordingWriter({str(path)!r}, source={{"type": "crash"}})
        writer.request(1, 1, 0.0, "POST", "u", {{}}, {{}})
        for i in range(50):
            writer.read(1, 1, i / 10, b"data: %d\\n\\n" % i)
        os._exit(3)  # no close, no atexit, no buffer flush by the interpreter
        """
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=Path(inspector.__file__).parent.parent)
    assert result.returncode == 3
    recording = read_recording(path)
    assert recording.warnings == []
    [attempt] = list(recording.attempts())
    assert attempt.data == b"".join(b"data: %d\n\n" % i for i in range(50))
    assert attempt.end is None


def test_truncated_last_line_is_a_warning(tmp_path: Path) -> None:
    out = io.BytesIO()
    with RecordingWriter(out, source=SOURCE) as writer:
        writer.request(1, 1, 0.0, "POST", "u", {}, {})
        writer.read(1, 1, 0.1, b"first")
        writer.read(1, 1, 0.2, b"second")
    complete = out.getvalue()
    cut = complete + b'{"kind":"read","turn":1,"attempt":1,"t":0.3,"data":"thi'
    recording = read_recording(cut)
    assert len(recording.warnings) == 1 and "cut short" in recording.warnings[0]
    assert "\n" not in recording.warnings[0]
    [attempt] = list(recording.attempts())
    assert [read.data for read in attempt.reads] == [b"first", b"second"]

    # a complete last line that only misses its newline is fine
    recording = read_recording(complete.rstrip(b"\n"))
    assert recording.warnings == [] and recording.turns[0].attempts[0].data == b"firstsecond"


def test_damaged_middle_line_is_skipped_with_warning() -> None:
    out = io.BytesIO()
    with RecordingWriter(out, source=SOURCE) as writer:
        writer.read(1, 1, 0.1, b"a")
    damaged = (
        out.getvalue()
        + b"garbage\n"
        + b'{"kind":"read","turn":1,"attempt":1,"t":0.2,"b64":"!!"}\n'
        + b'{"kind":"read","turn":1,"attempt":1,"t":0.3,"data":"b"}\n'
    )
    recording = read_recording(damaged)
    assert len(recording.warnings) == 2
    assert recording.turns[0].attempts[0].data == b"ab"


# --- plain SSE ---------------------------------------------------------------------------------------------------


def test_plain_sse_file_is_one_attempt(tmp_path: Path) -> None:
    body = b"\xef\xbb\xbfevent: message_start\r\ndata: {}\r\n\r\nevent: ping\rdata: {}\r\r"
    path = tmp_path / "curl.txt"
    path.write_bytes(body)
    for recording in (read_recording(path), read_recording(str(path)), read_recording(body)):
        assert recording.is_plain and recording.header["format"] == PLAIN_FORMAT
        assert recording.warnings == [] and recording.observations == []
        [turn] = recording.turns
        [attempt] = turn.attempts
        assert (turn.turn, attempt.turn, attempt.attempt) == (0, 0, 0)  # turns and attempts count from 0
        assert attempt.reads == [RecordedRead(t=None, data=body)]  # exact bytes, BOM and CRs kept
        assert attempt.request is None and attempt.response is None and attempt.end is None


def test_plain_sse_edge_cases() -> None:
    assert read_recording(b"").turns[0].attempts[0].data == b""
    # JSON that is not a header is just text
    odd = b'{"type": "message_start"}\n'
    assert read_recording(odd).is_plain and read_recording(odd).turns[0].attempts[0].data == odd


def test_is_recording() -> None:
    out = io.BytesIO()
    RecordingWriter(out, source=SOURCE).close()
    raw = out.getvalue()
    assert is_recording(raw)
    assert is_recording(raw[:20])  # a short prefix is enough
    assert is_recording(b'{ "kind" : "header"')
    assert is_recording(b'{"format": "x", "kind": "header"}\n')  # complete first line, other key order
    assert not is_recording(b"event: message_start\ndata: {}\n\n")
    assert not is_recording(b"\xef\xbb\xbf" + raw)  # a BOM means text, not a recording
    assert not is_recording(b"")
    assert not is_recording(b'{"kind": "read"}\n')


def test_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_recording(tmp_path / "nope.jsonl")


# --- forward compatibility and errors ---------------------------------------------------------------------------


def test_unknown_kind_is_kept() -> None:
    out = io.BytesIO()
    with RecordingWriter(out, source=SOURCE) as writer:
        writer.read(1, 1, 0.0, b"x")
    raw = out.getvalue() + b'{"kind":"tool_exec","turn":1,"name":"bash","extra":[1,2]}\n'
    recording = read_recording(raw)
    assert recording.warnings == []
    assert recording.unknown == [{"kind": "tool_exec", "turn": 1, "name": "bash", "extra": [1, 2]}]
    assert recording.turns[0].attempts[0].data == b"x"


def test_unknown_fields_on_known_kinds_are_kept() -> None:
    header = orjson.dumps({"kind": "header", "format": FORMAT, "version": 1, "source": {}, "future": True})
    line = b'{"kind":"end","turn":1,"attempt":1,"t":1.0,"status":"complete","reason":null,"bytes":12}'
    recording = read_recording(header + b"\n" + line + b"\n")
    assert recording.header["future"] is True
    end = recording.turns[0].attempts[0].end
    assert end is not None and end["bytes"] == 12


@pytest.mark.parametrize("version", [2, 0, "1", None, True])
def test_unsupported_version_raises(version: object) -> None:
    header = {"kind": "header", "format": FORMAT, "version": version, "tool_version": "9.9", "source": {}}
    raw = orjson.dumps(header) + b"\n" + b'{"kind":"read","turn":1,"attempt":1,"t":0,"data":"x"}\n'
    with pytest.raises(RecordingError) as excinfo:
        read_recording(raw)
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert "version" in message and "\n" not in message


def test_wrong_format_or_broken_header_raises() -> None:
    with pytest.raises(RecordingError):
        read_recording(b'{"kind":"header","format":"something-else","version":1}\n')
    with pytest.raises(RecordingError):
        read_recording(b'{"kind":"header","format":"stream-insp')


def test_a_recording_keeps_big_integers_exact_and_reads_back_what_it_wrote(tmp_path: Path) -> None:
    """A request body with integers beyond 64 bits (kept exact: the reader read them as floats) and beyond a
    double's range (400 digits: the reader skipped the line as "not valid JSON", so this tool could not read its
    own recording). A header line that is complete but not JSON says why, not "file cut short?"."""
    n64, n400 = 2**70 + 1, int("9" * 400)
    path = tmp_path / "big.jsonl"
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
        "a": n64,
        "b": -n400,
    }
    with RecordingWriter(path, source=SOURCE) as w:
        w.request(0, 0, 0.0, "POST", "https://api.example/v1/messages", {}, body)
        w.end(0, 0, 0.1, "complete")
    rec = read_recording(path.read_bytes())
    (attempt,) = rec.attempts()
    assert attempt.request is not None and attempt.request["body"] == body
    assert rec.warnings == []
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"kind":"header","format":"%s","x":"\\udc00"}\n' % FORMAT.encode())
    with pytest.raises(RecordingError, match="not valid JSON: invalid high surrogate") as e:
        read_recording(bad.read_bytes())
    assert "cut short" not in str(e.value)

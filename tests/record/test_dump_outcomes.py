"""`dump` understands a response that is not a stream: an HTTP error is `http_error` with its status and API error,
a JSON 200 response is assembled as a message, and no SSE diagnostic appears on a body that was never SSE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.record.dump import dump_ok, dump_turns, format_turns
from inspector.record.recording import RecordingWriter, read_recording
from inspector.testing.hyp import examples
from inspector.testing.streamgen import sse, text_turn, tool_turn

MESSAGE: dict[str, Any] = {
    "id": "msg_json",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {"path": "a.txt"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


def error_body(etype: str, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": etype, "message": message}})


def write(path: Path, attempts: list[tuple[int, int, int, str, list[bytes]]]) -> str:
    with RecordingWriter(str(path), source={"type": "test"}) as w:
        for turn, attempt, status, ctype, reads in attempts:
            w.request(turn, attempt, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
            w.response(turn, attempt, 0.1, status, {"content-type": ctype})
            for data in reads:
                w.read(turn, attempt, 0.2, data)
            w.end(turn, attempt, 0.3, "complete" if status == 200 else "failed")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


def no_sse_diagnostics(entry: dict[str, Any]) -> bool:
    return not any(d["code"].startswith(("sse.", "protocol.no_events")) for d in entry["diagnostics"])


@pytest.mark.parametrize(
    ("status", "etype"), [(429, "rate_limit_error"), (529, "overloaded_error"), (400, "invalid_request_error")]
)
def test_a_retried_http_error_is_http_error_and_does_not_fail_the_dump(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, status: int, etype: str
) -> None:
    body = error_body(etype, "slow down please")
    path = write(
        tmp_path / "r.jsonl",
        [
            (0, 0, status, "application/json", [body[:20], body[20:]]),
            (0, 1, 200, "text/event-stream", [sse(*text_turn("fine"))]),
        ],
    )
    code, out = run(capsys, "dump", path, "--json")
    [turn] = orjson.loads(out)["turns"]
    [failed] = turn["failed_attempts"]
    assert failed["outcome"] == "http_error" and failed["status"] == status
    assert failed["error"] == {"type": etype, "message": "slow down please"}
    assert no_sse_diagnostics(failed) and failed["events"] == 0
    assert turn["outcome"] == "text_finish"
    assert code == 0

    code, out = run(capsys, "dump", path)
    assert f"turn 1 attempt 1: http_error (failed attempt, retried) (HTTP {status})" in out
    assert f"error {etype}: slow down please" in out
    assert "None" not in out and "sse." not in out


def test_a_final_http_error_fails_the_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [(0, 0, 529, "application/json", [error_body("overloaded_error", "busy")])])
    code, out = run(capsys, "dump", path)
    assert code == 1
    assert "http_error (HTTP 529)" in out and "overloaded_error: busy" in out and "None" not in out
    code, out = run(capsys, "dump", path, "--events", "--json")
    assert code == 1 and out == ""  # no SSE event was decoded from an error body


def test_an_http_error_body_that_is_not_json_is_kept_as_the_message(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [(0, 0, 502, "text/html", [b"<html>Bad gateway</html>"])])
    [turn] = dump_turns(read_recording(path))
    assert turn["outcome"] == "http_error" and turn["status"] == 502
    assert turn["error"]["type"] is None and "Bad gateway" in turn["error"]["message"]
    assert no_sse_diagnostics(turn) and not dump_ok([turn])


@pytest.mark.parametrize("ctype", ["application/json", "application/json; charset=utf-8", ""])
def test_a_json_200_response_is_assembled_as_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ctype: str
) -> None:
    body = orjson.dumps(MESSAGE)
    path = write(tmp_path / "r.jsonl", [(0, 0, 200, ctype, [body[:33], body[33:]])])
    code, out = run(capsys, "dump", path, "--json")
    [turn] = orjson.loads(out)["turns"]
    assert turn["message"] == MESSAGE and turn["outcome"] == "tool_use" and turn["diagnostics"] == []
    assert turn["body"] == "json" and code == 0
    code, out = run(capsys, "dump", path)
    assert "(JSON, not streamed)" in out and "tool_use read_file toolu_9" in out and "None" not in out


def test_a_plain_file_holding_one_json_message_is_a_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(b"\n  " + orjson.dumps(dict(MESSAGE, stop_reason="end_turn", content=[MESSAGE["content"][0]])))
    code, out = run(capsys, "dump", str(path), "--json")
    [turn] = orjson.loads(out)["turns"]
    assert turn["outcome"] == "text_finish" and turn["message"]["id"] == "msg_json" and code == 0


def test_a_json_error_object_with_status_200_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_bytes(error_body("api_error", "internal"))
    [turn] = dump_turns(read_recording(path))
    assert turn["outcome"] == "error" and turn["error"] == {"type": "api_error", "message": "internal"}
    assert no_sse_diagnostics(turn) and not dump_ok([turn])
    assert "None" not in format_turns([turn])


def test_a_body_starting_with_a_brace_that_is_not_json_is_decoded_as_sse(tmp_path: Path) -> None:
    body = b"{oops\n\n" + sse(*text_turn("still here"))
    path = tmp_path / "s.sse"
    path.write_bytes(body)
    [turn] = dump_turns(read_recording(path))
    assert turn["body"] == "sse" and turn["message"]["content"] == [{"type": "text", "text": "still here"}]


def test_max_tokens_inside_a_tool_call_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(dict(MESSAGE, stop_reason="max_tokens")))
    [turn] = dump_turns(read_recording(path))
    assert turn["outcome"] == "truncated"


def test_a_single_read_is_one_read_and_an_anthropic_stop_reason_is_said_alone(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [(0, 0, 200, "text/event-stream", [sse(*text_turn("Hi."))])])
    text = format_turns(dump_turns(read_recording(path)))
    assert "  1 read, " in text and "1 reads" not in text and "Hi." in text
    assert "stop_reason: end_turn  stop_sequence" in text  # the wire's own reason: no "(finish_reason ...)"


def test_sse_turns_keep_their_outcomes(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", [(0, 0, 200, "text/event-stream", [sse(*tool_turn(['{"a": 1}']))])])
    [turn] = dump_turns(read_recording(path))
    assert turn["outcome"] == "tool_use" and turn["body"] == "sse"


@settings(max_examples=examples(30), deadline=None)
@given(
    statuses=st.lists(st.sampled_from([200, 400, 429, 500, 529]), min_size=1, max_size=4),
)
def test_dump_ok_follows_the_last_attempt_of_each_turn(
    tmp_path_factory: pytest.TempPathFactory, statuses: list[int]
) -> None:
    path = tmp_path_factory.mktemp("ok") / "r.jsonl"
    attempts = [
        (
            0,
            i,
            s,
            "text/event-stream" if s == 200 else "application/json",
            [sse(*text_turn("x")) if s == 200 else error_body("api_error", "no")],
        )
        for i, s in enumerate(statuses)
    ]
    write(path, attempts)
    turns = dump_turns(read_recording(path))
    assert dump_ok(turns) == (statuses[-1] == 200)
    assert [f["outcome"] for f in turns[0].get("failed_attempts", [])] == [
        "text_finish" if s == 200 else "http_error" for s in statuses[:-1]
    ]


def test_text_of_an_empty_attempt_prints_no_none(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "empty.sse"
    path.write_bytes(b"")
    code, out = run(capsys, "dump", str(path))
    assert code == 1
    assert "message -  model -" in out and "stop_reason: -  stop_sequence: -" in out and "usage: -" in out
    assert "None" not in out


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("connection_error", "connection failed (ConnectError: [Errno 111] Connection refused)"),
        ("failed", "upstream sent an invalid response: malformed status line (60 bytes)"),
        ("cancelled", "cancelled by user"),
    ],
)
def test_an_attempt_without_a_response_says_why_not_that_the_stream_had_no_event(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, status: str, reason: str
) -> None:
    """A connection refused (run), a malformed answer (proxy): the end line's reason, not `protocol.no_events` of a
    stream that never came (the proxy's line said the reason, dump only 'the stream carried no event')."""
    path = tmp_path / "r.jsonl"
    with RecordingWriter(str(path), source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
        w.end(0, 0, 0.01, status, reason)
        w.request(0, 1, 0.5, "POST", "http://t/v1/messages", {}, {"model": "m"})
        w.response(0, 1, 0.1, 200, {"content-type": "text/event-stream"})
        w.read(0, 1, 0.2, sse(*text_turn("fine")))
        w.end(0, 1, 0.3, "complete")
    code, out = run(capsys, "dump", str(path), "--json")
    [failed] = orjson.loads(out)["turns"][0]["failed_attempts"]
    assert [(d["code"], d["message"]) for d in failed["diagnostics"]] == [
        ("transport.no_response", f"no response ({status}): {reason}")
    ]
    assert failed["outcome"] == "incomplete" and code == 0
    code, out = run(capsys, "dump", str(path))
    assert f"transport.no_response: no response ({status}): {reason}" in out and "no_events" not in out


@pytest.mark.parametrize(
    "reason",
    [
        "connection dropped: RemoteProtocolError: upstream closed the connection before the end of the body",
        "connection dropped: RemoteProtocolError: upstream sent an invalid chunk size line",
        "upstream sent nothing for 5 s (--read-timeout)",
    ],
)
def test_an_attempt_whose_connection_broke_after_its_response_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, reason: str
) -> None:
    """The proxy forwarded a response whose body upstream cut (fewer bytes than its Content-Length, a malformed
    chunk line, silence past the read timeout): the end line says why, and dump said nothing of it (a cut that
    came after message_stop read 'text_finish', no diagnostic at all; one before it only 'stream ended before
    message_stop')."""
    path = tmp_path / "r.jsonl"
    with RecordingWriter(str(path), source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream", "content-length": "9999"})
        w.read(0, 0, 0.2, sse(*text_turn("cut")))
        w.end(0, 0, 0.3, "failed", reason)
        w.request(0, 1, 0.5, "POST", "http://t/v1/messages", {}, {"model": "m"})
        w.response(0, 1, 0.1, 200, {"content-type": "text/event-stream"})
        w.read(0, 1, 0.2, sse(*text_turn("fine")))
        w.end(0, 1, 0.3, "complete")
    code, out = run(capsys, "dump", str(path), "--json")
    turn = orjson.loads(out)["turns"][0]
    [failed] = turn["failed_attempts"]
    assert [(d["code"], d["message"]) for d in failed["diagnostics"]] == [("transport.connection_dropped", reason)]
    assert turn["diagnostics"] == [] and code == 0
    code, out = run(capsys, "dump", str(path))
    assert f"transport.connection_dropped: {reason}" in out


def test_the_proxys_notes_on_an_attempt_are_its_diagnostics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """What `inspector proxy` noted on an attempt (bytes after the end of upstream's body, a stream past the parse
    budget, a decompression bomb) is in its recording's proxy_note lines; dump showed none of them."""
    path = tmp_path / "r.jsonl"
    note = "upstream sent 10 bytes after the end of its body (its Content-Length (716)): not forwarded, not recorded"
    with RecordingWriter(str(path), source={"type": "proxy"}) as w:
        w.request(0, 0, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        w.read(0, 0, 0.2, sse(*text_turn("fine")))
        w.observation({"type": "proxy_note", "t": 0.3, "turn": 0, "attempt": 0, "note": note})
        w.end(0, 0, 0.3, "complete")
    code, out = run(capsys, "dump", str(path), "--json")
    [turn] = orjson.loads(out)["turns"]
    assert [(d["code"], d["severity"], d["message"]) for d in turn["diagnostics"]] == [
        ("transport.proxy_note", "warning", note)
    ]
    assert code == 0  # (a warning)
    code, out = run(capsys, "dump", str(path))
    assert f"transport.proxy_note: {note}" in out


def test_max_size_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "big.sse"
    path.write_bytes(b"data: " + b"x" * 3000 + b"\n\n" + sse(*text_turn("after")))
    code, out = run(capsys, "dump", str(path), "--max-size", "0.001")  # 1048 bytes
    assert "an SSE line longer than 1048 bytes" in out
    assert "after" in out
    code, _ = run(capsys, "dump", str(path), "--max-size", "0")
    assert code == 2


def test_a_json_message_with_only_a_server_tool_call_is_a_text_finish_as_when_streamed(tmp_path: Path) -> None:
    """Server tools (web search...) run on the API's side: the harness has no call to run, streamed or not."""
    content = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "text", "text": "Found it."},
    ]
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps(dict(MESSAGE, content=content, stop_reason="end_turn")))
    [turn] = dump_turns(read_recording(path))
    assert turn["outcome"] == "text_finish"

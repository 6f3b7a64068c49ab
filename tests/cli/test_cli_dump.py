"""`inspector dump`: the readable summary, `--json`, `--events --json`, stdin, exit codes and error messages."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any, Protocol

import orjson
import pytest

from inspector.cli import main
from inspector.record.recording import RecordingWriter
from inspector.stream import diagnostics as D
from inspector.testing.streamgen import (
    block_stop,
    error_event,
    generate,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
    text_turn,
    tool_start,
    tool_turn,
)

MESSAGE_KEYS = {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}


class Write(Protocol):
    def __call__(self, data: bytes, name: str = "s.sse") -> str: ...


@pytest.fixture
def write(tmp_path: Path) -> Write:
    def _write(data: bytes, name: str = "s.sse") -> str:
        p = tmp_path / name
        p.write_bytes(data)
        return str(p)

    return _write


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_json(out: str) -> dict[str, Any]:
    # exactly one line ("\n"-terminated; str.splitlines would also split at a raw U+2028, which is valid JSON)
    assert out.endswith("\n") and out.count("\n") == 1, out[:500]
    value: dict[str, Any] = orjson.loads(out)
    return value


def json_lines(out: str) -> list[Any]:
    assert out.endswith("\n")
    return [orjson.loads(x) for x in out[:-1].split("\n")]


TOOL_TURN = sse(
    message_start(usage={"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 7}),
    text_start(0),
    text_delta(0, "I'll read it.\nThen fix."),
    block_stop(0),
    tool_start(1, "toolu_01", "read_file"),
    json_delta(1, ""),
    json_delta(1, '{"path": '),
    json_delta(1, '"README.md"}'),
    block_stop(1),
    message_delta("tool_use", usage={"output_tokens": 42}),
    message_stop(),
)


# ------------------------------------------------------------------------------------------------ summary
def test_summary_of_a_tool_turn(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, err = run(capsys, "dump", write(TOOL_TURN))
    assert code == 0
    assert err == ""
    assert "turn 1 attempt 1: tool_use" in out
    assert "message msg_1  model claude-test" in out
    assert "[0] text:" in out and "      I'll read it." in out and "      Then fix." in out
    assert '[1] tool_use read_file toolu_01: {"path":"README.md"}' in out
    assert "stop_reason: tool_use  stop_sequence: -" in out and "None" not in out
    assert "usage: input_tokens 50, output_tokens 42, cache_read_input_tokens 7" in out
    assert "diagnostics:" not in out


def test_summary_shows_diagnostics_and_unparsed_input(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    data = sse(*tool_turn(['{"path": "a" "b"}'], name="write_file"))
    code, out, err = run(capsys, "dump", write(data))
    assert code == 1
    assert 'INPUT NOT PARSED, raw \'{"path": "a" "b"}\'' in out
    assert "diagnostics:" in out
    assert f"error   {D.TOOL_INPUT_INVALID} @event 3:" in out


def test_summary_of_thinking_and_other_blocks(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    g = generate(3, "redacted_thinking", noise=False)
    code, out, _ = run(capsys, "dump", write(g.data))
    assert code == 0
    assert "[0] thinking: " in out and "(signature" in out
    assert "[1] redacted_thinking" in out


# ------------------------------------------------------------------------------------------------ --json
def test_json_shape(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, err = run(capsys, "dump", write(TOOL_TURN), "--json")
    assert code == 0 and err == ""
    doc = one_json(out)
    assert set(doc) == {"turns", "total"}  # the session's usage, cost and price source (record/accounting.py)
    assert set(doc["total"]) == {"usage", "cost", "price_source"}
    [turn] = doc["turns"]
    assert {"message", "outcome", "diagnostics", "usage", "cost", "cache"} <= set(turn)
    assert turn["usage"]["cache_read_tokens"] == 7 and turn["cost"] == {
        "usd": None,
        "unpriced": turn["cost"]["unpriced"],
    }
    assert turn["outcome"] == "tool_use"
    assert turn["diagnostics"] == []
    m = turn["message"]
    assert set(m) == MESSAGE_KEYS
    assert m == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "I'll read it.\nThen fix."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "README.md"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 42, "cache_read_input_tokens": 7},
    }


def test_json_of_every_generated_shape_is_the_expected_message(
    capsys: pytest.CaptureFixture[str], write: Write
) -> None:
    for seed in range(12):
        g = generate(seed)
        code, out, _ = run(capsys, "dump", write(g.data), "--json")
        assert code == 0
        assert one_json(out)["turns"][0]["message"] == g.message


def test_json_failed_tool_input_is_null_with_the_raw_buffer(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    data = sse(
        message_start(),
        tool_start(0, "toolu_a", "read_file"),
        json_delta(0, '{"path": "a"}'),
        block_stop(0),
        tool_start(1, "toolu_b", "read_file"),
        json_delta(1, '{"path": "b'),
        block_stop(1),
        message_delta("tool_use"),
        message_stop(),
    )
    code, out, _ = run(capsys, "dump", write(data), "--json")
    assert code == 1
    turn = one_json(out)["turns"][0]
    a, b = turn["message"]["content"]
    assert a["input"] == {"path": "a"} and "input_raw" not in a
    assert b["input"] is None and b["input_raw"] == '{"path": "b'
    [d] = turn["diagnostics"]
    assert {"code", "severity", "message", "event_index"} <= set(d)
    assert (d["code"], d["severity"], d["event_index"]) == (D.TOOL_INPUT_INVALID, "error", 6)
    assert isinstance(d["message"], str) and "char 11" in d["message"]


def test_json_of_an_error_event_and_of_a_cut_stream(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, _ = run(capsys, "dump", write(sse(message_start(), text_start(0), error_event())), "--json")
    assert code == 1
    turn = one_json(out)["turns"][0]
    assert turn["outcome"] == "error"
    assert [d["code"] for d in turn["diagnostics"]] == [D.ERROR_EVENT, D.BLOCK_NOT_CLOSED]
    assert [d["event_index"] for d in turn["diagnostics"]] == [2, None]

    code, out, _ = run(capsys, "dump", write(sse(*text_turn())[:-5]), "--json")
    assert code == 1
    turn = one_json(out)["turns"][0]
    assert turn["outcome"] == "incomplete"
    assert [d["code"] for d in turn["diagnostics"]] == [D.SSE_UNTERMINATED_EVENT, D.MISSING_MESSAGE_STOP]


def test_warnings_and_info_alone_exit_zero(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    data = sse(
        message_start(),
        text_start(0),
        block_stop(0),
        block_stop(0),
        ("novel", {"type": "novel"}),
        message_delta(),
        message_stop(),
    )
    code, out, _ = run(capsys, "dump", write(data), "--json")
    turn = one_json(out)["turns"][0]
    assert [(d["code"], d["severity"]) for d in turn["diagnostics"]] == [
        (D.DUPLICATE_BLOCK_STOP, "warning"),
        (D.UNKNOWN_EVENT, "info"),
    ]
    assert code == 0


# ------------------------------------------------------------------------------------------------ --events --json
def test_events_json_lines(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    data = (
        b'event: message_start\nid: 7\nretry: 1500\ndata: {"type":"message_start","message":{"id":"m"}}'
        b'\n\n: comment\ndata: {"type":"ping"}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}  \n\n'
    )
    code, out, err = run(capsys, "dump", write(data), "--events", "--json")
    assert err == ""
    lines = json_lines(out)
    assert all(set(x) == {"event", "data", "id", "retry", "turn", "attempt"} for x in lines)
    at = {"turn": 0, "attempt": 0}  # (a plain SSE file: one stream)
    assert lines == [
        {"event": "message_start", "data": '{"type":"message_start","message":{"id":"m"}}', "id": "7", "retry": 1500}
        | at,
        {"event": "message", "data": '{"type":"ping"}', "id": "7", "retry": 1500} | at,
        {"event": "message_stop", "data": '{"type":"message_stop"}  ', "id": "7", "retry": 1500} | at,
    ]
    assert code == 0


def test_events_json_of_a_generated_stream_matches_its_events(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    g = generate(11, "parallel_tools", noise=False)
    code, out, _ = run(capsys, "dump", write(g.data), "--events", "--json")
    assert code == 0
    lines = json_lines(out)
    assert [(x["event"], orjson.loads(x["data"])) for x in lines] == g.events
    assert all(x["id"] == "" and x["retry"] is None for x in lines)


def test_events_json_exit_code_follows_the_turns(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, _ = run(capsys, "dump", write(sse(*text_turn()[:-1])), "--events", "--json")
    assert code == 1
    assert len(out.splitlines()) == 5


# ------------------------------------------------------------------------------------------------ stdin, recordings
def test_stdin_dash(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TOOL_TURN)))
    code, out, _ = run(capsys, "dump", "-", "--json")
    assert code == 0
    assert one_json(out)["turns"][0]["message"]["content"][1]["input"] == {"path": "README.md"}


def test_stdin_dash_summary(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(sse(*text_turn("from stdin")))))
    code, out, _ = run(capsys, "dump", "-")
    assert code == 0
    assert "from stdin" in out


def test_a_recording_with_turns_and_a_retried_attempt(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "rec.jsonl"
    w = RecordingWriter(str(p), source={"type": "test"})
    w.request(0, 0, 0.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
    w.response(0, 0, 0.1, 200, {})
    data = sse(message_start(), text_start(0), text_delta(0, "par"), error_event())
    w.read(0, 0, 0.2, data)
    w.end(0, 0, 0.3, "error", "overloaded")
    w.request(0, 1, 1.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
    whole = sse(*tool_turn(['{"path": "x"}']))
    w.read(0, 1, 0.1, whole[:100])
    w.read(0, 1, 0.2, whole[100:])
    w.end(0, 1, 0.3, "complete")
    w.request(1, 0, 2.0, "POST", "http://t/v1/messages", {}, {"model": "m"})
    w.read(1, 0, 0.1, sse(*text_turn("done")))
    w.end(1, 0, 0.2, "complete")
    w.close()

    code, out, _ = run(capsys, "dump", str(p), "--json")
    turns = one_json(out)["turns"]
    assert [t["outcome"] for t in turns] == ["tool_use", "text_finish"]
    assert turns[0]["failed_attempts"][0]["outcome"] == "error"
    assert turns[1]["message"]["content"] == [{"type": "text", "text": "done"}]
    assert code == 0  # the last attempt of every turn is complete and clean

    code, out, _ = run(capsys, "dump", str(p))
    assert "(failed attempt, retried)" in out
    # text counts from 1 (like the dashboard); the recording and the JSON keep 0-based indices
    assert "turn 1 attempt 1: error" in out and "turn 1 attempt 2: tool_use" in out
    assert "turn 2 attempt 1: text_finish" in out


# ------------------------------------------------------------------------------------------------ errors
def test_missing_file_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "dump", str(tmp_path / "nope.sse"))
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("inspector: cannot read ") and "nope.sse" in err


def test_directory_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "dump", str(tmp_path))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("inspector: ")


def test_unsupported_recording_version_exits_2(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    path = write(b'{"kind": "header", "format": "stream-inspector-recording", "version": 99}\n', "r.jsonl")
    code, out, err = run(capsys, "dump", path)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("inspector: ")


def test_events_without_json_exits_2(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, err = run(capsys, "dump", write(TOOL_TURN), "--events")
    assert code == 2
    assert out == ""
    assert err == "inspector: --events needs --json\n"


@pytest.mark.parametrize("argv", [["dump"], ["dump", "x", "--bogus"], ["dump", "--json"]])
def test_bad_arguments_exit_2_with_an_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inspector")  # one line, no usage block


def test_empty_input_is_an_incomplete_turn(capsys: pytest.CaptureFixture[str], write: Write) -> None:
    code, out, _ = run(capsys, "dump", write(b""), "--json")
    assert code == 1
    turn = one_json(out)["turns"][0]
    assert turn["outcome"] == "incomplete"
    assert [d["code"] for d in turn["diagnostics"]] == [D.NO_EVENTS]


def test_dump_timing_fails_on_a_buffered_stream_with_the_named_diagnostic(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 18 §4: a buffering relay was named only in the timing view; dump --timing exited 0 on it."""
    from inspector.record.recorder import Recorder
    from inspector.testing.synthetic import buffered_observations

    paths = {}
    for name, kw in (("buffered", {}), ("streamed", {"buffered": False})):
        paths[name] = p = tmp_path / f"{name}.jsonl"
        rec = Recorder(str(p))
        for o in buffered_observations(**kw):
            rec(o)
        rec.close()
    code, out, _ = run(capsys, "dump", str(paths["buffered"]), "--timing")
    assert code == 1 and "error   timing.buffered" in out and "buffering: BUFFERED" in out
    code, out, _ = run(capsys, "dump", str(paths["buffered"]), "--timing", "--json")
    (d,) = one_json(out)["timing"]["diagnostics"]
    assert code == 1 and d["code"] == "timing.buffered" and (d["turn"], d["attempt"]) == (0, 0)
    code, out, _ = run(capsys, "dump", str(paths["streamed"]), "--timing")
    assert code == 0 and "timing.buffered" not in out
    code, _out, _ = run(capsys, "dump", str(paths["buffered"]))  # without --timing the reads are not judged
    assert code == 0


def test_headless_lines_name_a_buffered_stream() -> None:
    from inspector.cli.headless import ProgressPrinter
    from inspector.testing.loop import Lines
    from inspector.testing.synthetic import buffered_observations

    for kw, want in (({}, 1), ({"buffered": False}, 0)):
        lines = Lines()
        printer = ProgressPrinter(lines)  # type: ignore[arg-type]
        for o in buffered_observations(**kw):
            printer(o)
        hits = [ln for ln in lines.text() if "ERROR timing.buffered: BUFFERED" in ln]
        assert len(hits) == want, lines.text()

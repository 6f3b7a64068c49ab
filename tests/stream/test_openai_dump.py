"""`inspector dump` on OpenAI streams: the family is told from the request path and the first event, `--json` gives
each turn's final object in the provider's own shape (a chat.completion with choices, a response with output) with
the neutral blocks under `assembled`, no corpus stream crashes it, and its JSON says what the openai SDK says."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from inspector.cli import main
from inspector.record.dump import dump_ok, dump_turns, format_turns
from inspector.record.recording import RecordingWriter, read_recording
from inspector.testing.openai_ref import chat_view, corpus, response_view, sdk_chat, sdk_response

CORPUS = corpus()
CHAT = next(s for s in CORPUS if s.name.endswith("deepseek--deepseek-tool-call.chunks.txt"))
RESPONSES = next(s for s in CORPUS if s.name.endswith("azure--azure-tool-call.1.chunks.txt"))


def record(path: Any, url: str, data: bytes, read: int = 77) -> str:
    with RecordingWriter(str(path), source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", url, {}, {"model": "m", "stream": True})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        for i in range(0, len(data), read):
            w.read(0, 0, 0.2, data[i : i + read])
        w.end(0, 0, 0.3, "complete")
    return str(path)


def dump_json(capsys: Any, path: str) -> tuple[int, dict[str, Any]]:
    code = main(["dump", "--json", path])
    out, _ = capsys.readouterr()
    return code, orjson.loads(out)


def test_a_recorded_chat_stream_dumps_as_a_chat_completion(tmp_path: Any) -> None:
    path = record(tmp_path / "r.jsonl", "https://api.deepseek.com/v1/chat/completions", CHAT.data)
    (turn,) = dump_turns(read_recording(path))
    assert turn["family"] == "openai_chat" and turn["body"] == "sse"
    assert turn["message"]["object"] == "chat.completion"
    assert turn["outcome"] == "tool_use"
    assert chat_view(turn["message"]) == chat_view(sdk_chat(CHAT.data))
    assert [b["type"] for b in turn["assembled"]["content"]] == ["thinking", "tool_use"]  # (content was "")
    tool = turn["assembled"]["content"][1]
    assert tool["input"] == {"location": "San Francisco"}
    assert dump_ok([turn])


def test_a_plain_responses_file_is_told_by_its_first_event(capsys: Any, tmp_path: Any) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(RESPONSES.data)
    code, out = dump_json(capsys, str(path))
    (turn,) = out["turns"]
    assert code == 0
    assert turn["family"] == "openai_responses" and turn["message"]["object"] == "response"
    assert response_view(turn["message"]) == response_view(sdk_response(RESPONSES.data)[0])
    assert turn["outcome"] == "tool_use"


def test_the_text_dump_shows_an_openai_turn_in_the_same_layout(capsys: Any, tmp_path: Any) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(CHAT.data)
    assert main(["dump", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "tool_use weather" in out and "San Francisco" in out
    assert "stop_reason: tool_use (finish_reason tool_calls)" in out  # the neutral reason, and the wire's words
    assert format_turns([]) == ""


def test_the_text_dump_says_a_responses_turns_status_beside_its_stop_reason(capsys: Any, tmp_path: Any) -> None:
    path = tmp_path / "stream.sse"
    path.write_bytes(RESPONSES.data)
    assert main(["dump", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "stop_reason: tool_use (status completed)" in out


@pytest.mark.parametrize("s", CORPUS, ids=lambda s: s.name)
def test_no_corpus_stream_crashes_dump_and_json_agrees_with_the_sdk(capsys: Any, tmp_path: Any, s: Any) -> None:
    path = tmp_path / "s.sse"
    path.write_bytes(s.data)
    code, out = dump_json(capsys, str(path))
    assert code in (0, 1)
    (turn,) = out["turns"]
    assert turn["family"] == {"chat": "openai_chat", "responses": "openai_responses"}[s.family]
    try:
        ref = sdk_chat(s.data) if s.family == "chat" else sdk_response(s.data)[0]
    except Exception:  # noqa: BLE001 (whatever the SDK raises, it rejects the stream)
        assert turn["diagnostics"], "the SDK rejects this stream: dump must say why"
        return
    codes = {d["code"] for d in turn["diagnostics"]}
    if s.family == "responses":
        assert response_view(turn["message"]) == response_view(ref)
    elif not codes & {"openai.chat.tool_id_repeated", "openai.chat.tool_name_repeated"}:
        assert chat_view(turn["message"]) == chat_view(ref)


CHAT_JSON = {
    "id": "chatcmpl-j",
    "object": "chat.completion",
    "model": "gpt-x",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}
RESPONSE_JSON = {
    "id": "resp_j",
    "object": "response",
    "status": "completed",
    "model": "gpt-x",
    "output": [{"type": "message", "id": "m", "content": [{"type": "output_text", "text": "Hi"}]}],
}


def json_recording(path: Any, doc: dict[str, Any]) -> str:
    with RecordingWriter(str(path), source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", "https://api.openai.com/v1/x", {}, {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "application/json"})
        w.read(0, 0, 0.2, orjson.dumps(doc))
        w.end(0, 0, 0.3, "complete")
    return str(path)


def test_non_streamed_openai_bodies_are_assembled_as_sent(tmp_path: Any) -> None:
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "a.jsonl", CHAT_JSON)))
    assert (t["body"], t["family"], t["outcome"], t["message"]) == ("json", "openai_chat", "tool_use", CHAT_JSON)
    assert not t["diagnostics"]
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "b.jsonl", RESPONSE_JSON)))
    assert (t["family"], t["outcome"]) == ("openai_responses", "text_finish")
    failed = dict(RESPONSE_JSON, status="failed", error={"code": "server_error", "message": "boom"})
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "c.jsonl", failed)))
    assert t["outcome"] == "error" and "boom" in t["diagnostics"][0]["message"]
    bad = orjson.loads(orjson.dumps(CHAT_JSON))
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"a": '
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "d.jsonl", bad)))
    assert t["outcome"] == "tool_use" and t["diagnostics"][0]["code"] == "tool_input.invalid_json"
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "f.jsonl", dict(CHAT_JSON, object=[]))))
    assert t["outcome"] == "incomplete"  # not an object it knows: as before, never a crash
    weird = dict(CHAT_JSON, choices=[{"message": {"tool_calls": [{"function": "x"}, 5]}, "finish_reason": 7}])
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "e.jsonl", weird)))
    assert t["family"] == "openai_chat"


def test_events_lists_each_sse_event_once(capsys: Any, tmp_path: Any) -> None:
    """`--events --json` prints the SSE events as decoded: one line each, though a chunk that finishes a choice
    (its blocks close, the message delta) gives several steps."""
    path = tmp_path / "s.sse"
    path.write_bytes(CHAT.data)
    main(["dump", "--events", "--json", str(path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == CHAT.data.count(b"\n\n")
    assert [orjson.loads(x)["data"] for x in lines][-1] == "[DONE]"


def test_a_har_with_an_openai_entry_is_decoded_by_its_url(capsys: Any, tmp_path: Any) -> None:
    """A browser HAR: the entry's request URL (`/v1/responses`) and first event tell the family."""
    entry = {
        "startedDateTime": "2026-12-01T10:00:00.000Z",
        "time": 120,
        "request": {"method": "POST", "url": "https://api.openai.com/v1/responses", "headers": []},
        "response": {
            "status": 200,
            "headers": [{"name": "content-type", "value": "text/event-stream"}],
            "content": {"mimeType": "text/event-stream", "text": RESPONSES.data.decode()},
        },
        "timings": {"send": 1, "wait": 50, "receive": 69},
    }
    path = tmp_path / "x.har"
    path.write_bytes(orjson.dumps({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": [entry]}}))
    code, out = dump_json(capsys, str(path))
    (turn,) = out["turns"]
    assert (code, turn["family"], turn["outcome"]) == (0, "openai_responses", "tool_use")
    assert response_view(turn["message"]) == response_view(sdk_response(RESPONSES.data)[0])


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("name", ["weather", "thinking", "parallel_buffers", "parse_date"])
def test_a_non_streamed_answer_dumps_the_blocks_its_streamed_twin_does(tmp_path: Any, api: Any, name: str) -> None:
    """The fake API's non-streamed answer to a turn and its stream of the same turn: `dump` showed no block and no
    stop_reason for the JSON one (its text read a bare chat.completion / response). Both now give the same neutral
    message: its blocks, stop_reason and usage."""
    from inspector.scenarios.bundled import get_scenario
    from inspector.scenarios.render_openai import assembled_chat, assembled_response, render_openai_turn

    scenario = get_scenario(name)
    plan = render_openai_turn(scenario, 0, 0, api=api, include_usage=True)
    whole = assembled_chat(plan) if api == "chat" else assembled_response(plan)
    url = "https://api.openai.com/v1/" + ("chat/completions" if api == "chat" else "responses")
    (streamed,) = dump_turns(read_recording(record(tmp_path / "s.jsonl", url, plan.body)))
    (t,) = dump_turns(read_recording(json_recording(tmp_path / "j.jsonl", whole)))
    assert t["body"] == "json" and t["message"] == whole
    for key in ("content", "stop_reason", "usage"):
        assert t["assembled"][key] == streamed["assembled"][key], key
    text = format_turns([t])
    assert f"stop_reason: {streamed['assembled']['stop_reason']}" in text

    def shown(turn_text: str) -> list[str]:  # (below the message line, up to the stream's own diagnostics)
        return turn_text.split("\n  diagnostics:")[0].split("\n")[2:]

    assert shown(text) == shown(format_turns([streamed]))


def test_dump_text_says_each_blocks_choice_of_an_n_2_answer(capsys: Any, tmp_path: Any) -> None:
    """A chat answer of n=2 choices: its blocks were listed [0]..[3] with nothing saying whose (the JSON has
    "choice"); each now says its choice, counted from 1. One choice: no tag."""
    from inspector.scenarios.bundled import SCENARIOS
    from inspector.scenarios.render_openai import render_openai_turn

    for n in (2, 1):
        path = tmp_path / f"n{n}.sse"
        path.write_bytes(render_openai_turn(SCENARIOS["weather"], 0, 0, api="chat", choices=n).body)
        main(["dump", str(path)])
        out = capsys.readouterr().out
        blocks = [line.strip() for line in out.splitlines() if line.strip().startswith("[")]
        if n == 2:
            assert [b.split(")")[0] + ")" for b in blocks] == [
                "[0] (choice 1)",
                "[1] (choice 2)",
                "[2] (choice 1)",
                "[3] (choice 2)",
            ], out
        else:
            assert blocks and "choice" not in out, out

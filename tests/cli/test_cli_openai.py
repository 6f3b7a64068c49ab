"""`inspector run --provider openai` in process against a fake OpenAI server on 127.0.0.1: the key from
OPENAI_API_KEY (a one-line error when missing), `--api chat|responses`, `--record` then `dump` / `dump --timing`
then `replay --headless --json` of that recording, and the key in no output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import inspector.cli as cli
from inspector.testing.openai_fake import (
    KEY,
    FakeOpenAI,
    ResponsesScript,
    Stream,
    chat_text,
    chunk,
    responses_text,
    sse,
    tool_delta,
)
from inspector.testing.secrets import assert_no_key


def test_missing_openai_key_exit_2_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-this-one")  # the other provider's key does not count
    code = cli.main(["run", "--provider", "openai", "--model", "gpt-test", "hello", "--headless"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "OPENAI_API_KEY" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--model", "m", "hi", "--api", "chat", "--headless"],  # --api without --provider openai
        ["run", "--provider", "openai", "--api", "completions", "--model", "m", "hi", "--headless"],
        ["run", "--scenario", "weather", "--provider", "openai", "--headless"],  # API options with a scenario
    ],
)
def test_api_choice_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and err.strip() and "Traceback" not in err
    assert_no_key(KEY, {"stdout": out, "stderr": err})


def _script(api: str) -> list[Stream]:
    if api == "chat":
        first = sse(
            chunk({"role": "assistant", "content": None}),
            chunk(tool_delta(0, id="call_r", name="read_file")),
            chunk(tool_delta(0, args='{"path": "notes.txt"}')),
            chunk({}, "tool_calls"),
            chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
            done=True,
        )
        return [Stream([first]), Stream([chat_text("The note says hello.")])]
    s = ResponsesScript()
    fc = {"id": "fc_r", "type": "function_call", "call_id": "call_r", "name": "read_file", "arguments": ""}
    done = {**fc, "arguments": '{"path": "notes.txt"}', "status": "completed"}
    first = b"".join(
        [
            s.ev("response.created", response=s.response("in_progress")),
            s.ev("response.output_item.added", output_index=0, item=fc),
            s.ev("response.function_call_arguments.delta", item_id="fc_r", output_index=0, delta='{"path": '),
            s.ev("response.function_call_arguments.delta", item_id="fc_r", output_index=0, delta='"notes.txt"}'),
            s.ev("response.output_item.done", output_index=0, item=done),
            s.ev(
                "response.completed", response=s.response("completed", [done], {"input_tokens": 5, "output_tokens": 2})
            ),
        ]
    )
    return [Stream([first]), Stream([responses_text("The note says hello.")])]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_run_record_dump_replay(
    api: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello from the notes\n")
    rec = tmp_path / "run.jsonl"
    fake = FakeOpenAI(_script(api))
    base, server = fake.serve()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    try:
        code = cli.main(
            [
                "run",
                "--provider",
                "openai",
                "--api",
                api,
                "--model",
                "gpt-test",
                "what does notes.txt say?",
                "--base-url",
                base,
                "--workspace",
                str(tmp_path),
                "--record",
                str(rec),
                "--headless",
                "--json",
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    run_out, run_err = capsys.readouterr()
    assert code == 0, run_err
    lines = [orjson.loads(x) for x in run_out.splitlines()]
    fin = lines[-1]
    assert fin["type"] == "loop_finished" and (fin["status"], fin["turns"]) == ("finished", 2)
    assert lines[0]["source"] == {
        "type": "api",
        "provider": "openai",
        "api": api,
        "model": "gpt-test",
        "base_url": base,
    }
    # the server got the key (as a bearer token), the right endpoint, and the tool's output in the history
    path = "/v1/chat/completions" if api == "chat" else "/v1/responses"
    assert [r["path"] for r in fake.requests] == [path, path]
    assert {r["headers"].get("authorization") for r in fake.requests} == {f"Bearer {KEY}"}
    second = fake.requests[1]["body"]
    if api == "chat":
        tool_msg = second["messages"][2]
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_r"
        assert "hello from the notes" in tool_msg["content"]
        assert {t["function"]["name"] for t in second["tools"]} >= {"read_file", "list_dir"}
    else:
        out_item = second["input"][2]
        assert out_item["type"] == "function_call_output" and "hello from the notes" in out_item["output"]
        assert {t["name"] for t in second["tools"]} >= {"read_file", "list_dir"}

    # dump, dump --json, dump --timing read the recording
    assert cli.main(["dump", str(rec)]) == 0
    dump_text, _ = capsys.readouterr()
    assert cli.main(["dump", str(rec), "--json"]) == 0
    dump_json, _ = capsys.readouterr()
    doc = orjson.loads(dump_json)
    turns = doc["turns"] if isinstance(doc, dict) else doc
    assert [t["family"] for t in turns] == ["openai_chat" if api == "chat" else "openai_responses"] * 2
    assert cli.main(["dump", "--timing", str(rec)]) == 0
    timing, _ = capsys.readouterr()
    assert timing.strip()

    # replay --headless --json: the same history and the same events
    code = cli.main(["replay", str(rec), "--headless", "--json"])
    replay_out, replay_err = capsys.readouterr()
    assert code == 0, replay_err
    replayed = [orjson.loads(x) for x in replay_out.splitlines()]
    assert replayed[-1]["messages"] == fin["messages"]
    events: Callable[[list[dict[str, Any]]], list[Any]] = lambda ls: [
        (o["sse"]["event"], o["sse"]["data"]) for o in ls if o["type"] == "sse_event"
    ]
    assert events(replayed) == events(lines)

    # export: the self-contained page of the run
    page = tmp_path / "run.html"
    assert cli.main(["export", str(rec), "-o", str(page)]) == 0
    capsys.readouterr()
    html = page.read_text()
    assert "read_file" in html and "The note says hello." in html

    assert_no_key(
        KEY,
        {
            "export": html,
            "run": run_out + run_err,
            "recording": rec.read_bytes(),
            "dump": dump_text + dump_json + timing,
            "replay": replay_out + replay_err,
        },
    )

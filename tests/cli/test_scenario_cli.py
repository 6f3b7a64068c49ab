"""`inspector scenario check / new / from-recording`: every problem of a broken file with file:line:column and what
was expected; a template that loads; a recording that becomes a scenario replaying the same events, splits and
messages, in process and over HTTP."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.record.har import load_any
from inspector.record.recording import RecordedAttempt
from inspector.scenarios.fileformat import check_text, dump_scenario, load_file, load_text
from inspector.scenarios.fromrec import scenario_from_recording
from inspector.scenarios.render import render_turn
from inspector.scenarios.template import template
from inspector.scenarios.transport import ScenarioServer
from inspector.sessions.sources import scenario_session
from inspector.stream.assembler import assemble
from inspector.stream.sse import iter_events
from inspector.testing.hyp import examples

OK = """\
version: 1
name: t
description: d
prompt: p
tools: [read_file]
turns:
  - blocks:
      - text: hi
      - tool_use: read_file
        input: {path: a}
    stop_reason: tool_use
    pacing: {ttfb: 0.2}
  - blocks: [{text: done}]
workspace: parse_date
"""

NO_PACING = "    pacing: {ttfb: 0.2}"
BROKEN = {
    "number": (OK.replace("ttfb: 0.2", "ttfb: fast"), "12:20: turns[0].pacing.ttfb: expected a number, got 'fast'"),
    "unknown key": (
        OK.replace("ttfb: 0.2", "ttfbb: 0.2"),
        "12:14: turns[0].pacing: unknown key 'ttfbb' (did you mean 'ttfb'?); expected one of: ttfb, event_gap,",
    ),
    "tool not offered": (
        OK.replace("tool_use: read_file", "tool_use: search"),
        "9:19: turns[0].blocks[1].tool_use: tool 'search' is not offered (tools: read_file)",
    ),
    "tool misspelt": (
        OK.replace("tool_use: read_file", "tool_use: read_fil"),
        "9:19: turns[0].blocks[1].tool_use: tool 'read_fil' is not offered (did you mean 'read_file'?) (tools: read_file)",
    ),
    "no version": (OK.replace("version: 1\n", ""), "1:1: scenario: missing required key 'version'"),
    "version 2": (OK.replace("version: 1", "version: 2"), "1:10: version: this inspector reads version 1, got 2"),
    "yaml syntax": (
        OK.replace("input: {path: a}", "input: {path: a"),
        "11:16: YAML: did not find expected ',' or '}' (while parsing a flow mapping)",
    ),
    "tab": (
        OK.replace("  - blocks: [{text: done}]", "\t- blocks: [{text: done}]"),
        "13:1: YAML: found character that cannot start any token (a tab: YAML indents with spaces)",
    ),
    "two block kinds": (
        OK.replace("      - text: hi", "      - text: hi\n        thinking: hmm"),
        "8:9: turns[0].blocks[0]: a block has exactly one of the keys text, thinking, redacted_thinking, tool_use, "
        "server_tool_use, block; got both 'text' and 'thinking'",
    ),
    "no block kind": (
        OK.replace("      - text: hi", "      - txt: hi"),
        "8:9: turns[0].blocks[0]: a block has exactly one of the keys",
    ),
    "chunk 0": (
        OK.replace("      - text: hi", "      - text: hi\n        chunk: 0"),
        "9:16: turns[0].blocks[0].chunk: expected an integer >= 1, got 0",
    ),
    "chunk min > max": (
        OK.replace("      - text: hi", "      - text: hi\n        chunk: {min: 9, max: 3}"),
        "9:16: turns[0].blocks[0].chunk: min (9) must be <= max (3)",
    ),
    "unknown fault": (
        OK.replace(NO_PACING, "    faults: [{type: drop_afterr, n_events: 3}]"),
        "12:21: turns[0].faults[0].type: unknown fault 'drop_afterr' (did you mean 'drop_after'?); expected one of: "
        "error_event_after, drop_after, stall_with_pings, max_tokens_cut, invalid_tool_json",
    ),
    "drop with both": (
        OK.replace(NO_PACING, "    faults: [{type: drop_after, n_events: 3, inside_block: 1}]"),
        "12:14: turns[0].faults[0]: DropAfter needs exactly one of n_events / inside_block",
    ),
    "fault block out of range": (
        OK.replace(NO_PACING, "    faults: [{type: max_tokens_cut, block: 7}]"),
        "12:14: turns[0].faults[0].block: 7 is out of range (this turn has 2 blocks)",
    ),
    "line ending": (
        OK.replace("ttfb: 0.2", "line_ending: LFCR"),
        "12:27: turns[0].pacing.line_ending: unknown value 'LFCR' (did you mean 'LF'?); expected one of: LF, CRLF, CR",
    ),
    "unknown built-in": (
        OK.replace("tools: [read_file]", "tools: [read_file, rm_rf]"),
        "5:20: tools[1]: 'rm_rf' is not a built-in tool (list_dir, read_file, search_text, sleep, write_file)",
    ),
    "two-line description": (
        OK.replace("description: d", "description: |\n  two\n  lines"),
        "3:14: description: expected one non-empty line",
    ),
    "no turns": (OK.split("turns:")[0] + "turns: []\n", "6:8: turns: expected at least one turn"),
    "duplicate key": (OK.replace("prompt: p", "prompt: p\nprompt: q"), "5:1: scenario: duplicate key 'prompt'"),
    "duration range": (
        OK.replace("tools: [read_file]", "tools: [{builtin: read_file, duration: [0.6, 0.2]}]"),
        "5:40: tools[0].duration: min (0.6) must be <= max (0.2)",
    ),
    "missing workspace": (
        OK.replace("workspace: parse_date", "").replace("prompt: p", "prompt: p\nworkspace: nowhere"),
        "5:12: workspace: no folder 'nowhere' (a bundled workspace (parse_date) or a folder under the scenario "
        "file's folder)",
    ),
    "write without copy": (
        OK.replace("workspace: parse_date", "").replace(
            "prompt: p", "prompt: p\nworkspace: parse_date\nallow_write: true"
        ),
        "6:14: allow_write: a scenario that writes must set workspace_copy: true",
    ),
    "simulated tool without name": (
        OK.replace("tools: [read_file]", "tools: [read_file, {description: x}]"),
        "5:20: tools[1]: missing required key 'name'",
    ),
    "two transport faults": (
        OK.replace(NO_PACING, "    faults: [{type: drop_after, n_events: 3}, {type: error_event_after, n_events: 2}]"),
        "12:47: turns[0].faults[1]: at most one of error_event_after / drop_after / stall_with_pings per attempt; "
        "faults[0] applies to the same attempts",
    ),
    "http status": (
        OK.replace(NO_PACING, "    http_errors: [{status: many}]"),
        "12:28: turns[0].http_errors[0].status: expected an integer, got 'many'",
    ),
    "optional integer": (
        OK.replace("ttfb: 0.2", "ping_every: often"),
        "12:26: turns[0].pacing.ping_every: expected an integer, got 'often'",
    ),
    "a list": ("- a\n- b\n", "1:1: scenario: expected a mapping, got a list"),
    "empty": ("", "1:1: the file is empty: expected a scenario mapping"),
    "input list": (OK.replace("input: {path: a}", "input: [a]"), "10:16: turns[0].blocks[1].input: expected a mapping"),
    "result_of": (
        OK.replace("  - blocks: [{text: done}]", "  - blocks: [{text: x}, {block: {type: r}, result_of: 0}]"),
        "13:25: turns[1].blocks[1].result_of: 0 is not a tool block of this turn",
    ),
}


def test_the_base_file_is_valid() -> None:
    assert check_text(OK, "f.yaml") == []


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_reports_the_precise_problem(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = BROKEN[case]
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["scenario", "check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out, case
    assert out[0].startswith(f"{path}:{expected}"), out
    assert all(line.startswith(f"{path}:") for line in out)  # every line is one problem with its position


def test_check_lists_every_problem_not_just_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = OK.replace("ttfb: 0.2", "ttfb: fast").replace("tool_use: read_file", "tool_use: nope")
    text = text.replace("prompt: p", "prompt: p\nseed: many")
    path = tmp_path / "many.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["scenario", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "seed: expected an integer, got 'many'" in out
    assert "pacing.ttfb: expected a number" in out and "tool 'nope' is not offered" in out


def test_check_ok_and_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(OK, encoding="utf-8")
    assert main(["scenario", "check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok\n"
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(OK.replace("prompt: p", "prompt: caf\xe9").encode("latin-1"))
    assert main(["scenario", "check", str(bad), str(tmp_path / "missing.yaml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{bad}:4:12: not UTF-8 text (byte 0xe9)"
    assert out[1].startswith(f"{tmp_path / 'missing.yaml'}:1:1: cannot read the file")


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(max_size=300)
    | st.sampled_from([v[0] for v in BROKEN.values()]).flatmap(
        lambda base: st.tuples(st.just(base), st.integers(0, len(base)), st.text(max_size=8)).map(
            lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
        )
    )
)
def test_check_never_raises_on_any_text(text: str) -> None:
    """Fuzz: any text is either a valid scenario or a list of problems with positions inside the file."""
    problems = check_text(text, "f.yaml")
    # lines as YAML (and an editor) count them: a lone CR, NEL, LS and PS end a line too ('0:\r0' is two lines,
    # its problem at line 3: the end of the text)
    lines = re.split("\r\n|[\r\n\x85\u2028\u2029]", text)
    for p in problems:
        assert 1 <= p.line <= len(lines) + 1 and p.column >= 1 and p.message and "\n" not in p.message
    if not problems:
        load_text(text, "f.yaml")


def test_new_writes_a_template_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenario", "new", "demo"]) == 0
    printed = capsys.readouterr().out
    assert printed == template("demo") and printed.count("#") > 20  # commented
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "new", "demo", "--write"]) == 0
    sc = load_file(tmp_path / "demo.yaml")
    assert sc.name == "demo" and len(sc.turns) == 2 and [t.name for t in sc.simulated_tools] == ["get_weather"]
    assert main(["scenario", "new", "demo", "--write"]) == 2  # never overwrites
    assert "already exists" in capsys.readouterr().err
    assert main(["scenario", "new", "../evil"]) == 2


@pytest.mark.parametrize("name", ["abc\n", "a" * 101], ids=["trailing-newline", "101-chars"])
def test_new_refuses_a_name_its_own_file_would_refuse(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # (once: 'abc\n' passed `^...$` and wrote 'abc\n.yaml', a template that `scenario check` refuses; 101
    # characters wrote a template whose name is too long)
    monkeypatch.chdir(tmp_path)
    assert main(["scenario", "new", name, "--write"]) == 2
    assert "scenario name" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    assert main(["scenario", "new", "a" * 100, "--write"]) == 0
    load_file(tmp_path / f"{'a' * 100}.yaml")


async def test_the_template_runs_through_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(template("demo"), encoding="utf-8")
    s = scenario_session(str(path), speed=math.inf)
    result = await s.run()
    sc = load_file(path)
    assert result.status == sc.expected["status"] and result.turns == sc.expected["turns"]
    assert isinstance(s.server, ScenarioServer) and len(s.server.requests) == sc.expected["requests"]
    results = [b for m in result.messages for b in (m["content"] if isinstance(m["content"], list) else [])]
    weather = next(b for b in results if b.get("type") == "tool_result" and "partly cloudy" in str(b["content"]))
    assert not weather.get("is_error")


# --- from a recording -------------------------------------------------------------------------------------------


def _events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    return [(e.event, json.loads(e.data)) for e in iter_events(data) if e.event != "ping"]


def _reads_events(attempt: RecordedAttempt) -> list[int]:
    """Complete non-ping events per read (reads that complete none are folded into the next)."""
    from inspector.stream.sse import SSEDecoder

    dec, out, pending = SSEDecoder(), [], 0
    for r in attempt.reads:
        pending += sum(1 for e in dec.feed(r.data) if e.event != "ping")
        if pending:
            out.append(pending)
            pending = 0
    return out


async def _record(name_or_path: str, path: Path) -> object:
    s = scenario_session(name_or_path, speed=math.inf, record=path)
    result = await s.run()
    s.close()
    return result


@pytest.mark.parametrize("name", ["weather", "thinking", "rate_limited", "overloaded_midstream", "drop_mid_json"])
async def test_recording_to_scenario_file_and_back(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec_path, file_path, again_path = tmp_path / "a.jsonl", tmp_path / "a.yaml", tmp_path / "b.jsonl"
    await _record(name, rec_path)
    assert main(["scenario", "from-recording", str(rec_path), "-o", str(file_path), "--name", "again"]) == 0
    capsys.readouterr()
    assert main(["scenario", "check", str(file_path)]) == 0
    await _record(str(file_path), again_path)  # run/serve/web take the file's path: the in-process server
    original, replayed = load_any(rec_path), load_any(again_path)
    assert [len(t.attempts) for t in replayed.turns] == [len(t.attempts) for t in original.turns]
    for t0, t1 in zip(original.turns, replayed.turns, strict=True):
        for a0, a1 in zip(t0.attempts, t1.attempts, strict=True):
            assert a1.response is not None and a0.response is not None
            assert a1.response["status"] == a0.response["status"]
        a0, a1 = t0.attempts[-1], t1.attempts[-1]
        assert _events(a1.data) == _events(a0.data)  # the same events (message id, tool ids, usage included)
        assert assemble(a1.data).final_message() == assemble(a0.data).final_message()
        assert _reads_events(a1) == _reads_events(a0)  # the same events per read


async def test_recording_to_scenario_then_serve_gives_the_same_events(tmp_path: Path) -> None:
    rec_path = tmp_path / "w.jsonl"
    await _record("parse_date", rec_path)
    rec = load_any(rec_path)
    sc = load_text(dump_scenario(scenario_from_recording(rec, name="pd")), "pd.yaml")
    # the splits: delta sizes and read delays as recorded
    first = rec.turns[0].attempts[-1]
    assert list(sc.turns[0].pacing.read_events or ()) == _reads_events(first)
    plan = render_turn(sc, 0, 0)
    assert first.response is not None
    assert plan.header_delay == pytest.approx(first.response["t"])
    with BackgroundServer(ServeApp(sc, speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, timeout=30) as http:
            for t, turn in enumerate(rec.turns):
                a = turn.attempts[-1]
                assert a.request is not None
                body = {**a.request["body"], "stream": True}
                r = await http.post(
                    "/v1/messages", json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}
                )
                assert r.status_code == 200, r.text
                assert (
                    _events(r.content)
                    == _events(a.data)
                    == [(n, d) for n, d in render_turn(sc, t, 0).events if n != "ping"]
                )
                assert assemble(r.content).final_message() == assemble(a.data).final_message()


def test_from_recording_of_a_non_recording_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("hello\n", encoding="utf-8")
    assert main(["scenario", "from-recording", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no streamed turn" in err
    assert main(["scenario", "from-recording", str(tmp_path / "missing.jsonl")]) == 2
    capsys.readouterr()
    assert main(["scenario", "from-recording", str(tmp_path)]) == 2  # a folder: as dump says it, no Python repr
    assert capsys.readouterr().err == f"inspector: cannot read {tmp_path}: Is a directory\n"


@pytest.mark.parametrize(
    "argv",
    [["scenarios"], ["scenario", "check", "WEATHER"], ["scenario", "new", "x"], ["scenario", "from-recording", "REC"]],
)
def test_scenario_commands_import_no_sdk_and_no_textual(argv: list[str], tmp_path: Path) -> None:
    import subprocess
    import sys

    from inspector.scenarios.bundled import BUNDLED_DIR

    rec = tmp_path / "r.sse"
    rec.write_bytes(render_turn(load_file(BUNDLED_DIR / "weather.yaml"), 0, 0).body)
    argv = [str(BUNDLED_DIR / "weather.yaml") if a == "WEATHER" else str(rec) if a == "REC" else a for a in argv]
    code = (
        "import sys\nfrom inspector.cli import main\n"
        f"rc = main({argv!r})\n"
        "heavy = sorted(m for m in ('anthropic', 'textual', 'httpx2', 'uvicorn', 'starlette') if m in sys.modules)\n"
        "print('HEAVY', rc, heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "HEAVY 0 []", out.stderr


def test_listing_the_scenarios_loads_no_file_and_no_pydantic() -> None:
    """`inspector scenarios` reads names and descriptions only: the validating loader (pydantic) is not imported."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from inspector.scenarios.bundled import SCENARIOS, describe

    code = (
        "import io, sys, contextlib\n"
        "from inspector.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out): rc = main(['scenarios'])\n"
        "print(rc, len(out.getvalue().splitlines()), 'pydantic' in sys.modules, "
        "'inspector.scenarios.fileformat' in sys.modules)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.split() == ["0", str(len(SCENARIOS)), "False", "False"], proc.stderr
    assert describe() == [(name, sc.description) for name, sc in SCENARIOS.items()]


async def test_a_scenario_file_made_from_a_recording_masks_the_keys_the_process_knows(tmp_path: Path) -> None:
    """A recording made before its key was known (the key in its text, clear): the file `from-recording` writes masks
    the keys the process knows, as stdout does (the file held it in clear, its stdout form masked)."""
    from inspector.core.redaction import learn

    rec_path, before, after = tmp_path / "a.jsonl", tmp_path / "a.yaml", tmp_path / "b.yaml"
    await _record("weather", rec_path)
    known = "check the current weather in Paris"
    assert main(["scenario", "from-recording", str(rec_path), "-o", str(before)]) == 0
    assert known in before.read_text()  # (not known yet: the file has it as the stream had it)
    learn([known])
    assert main(["scenario", "from-recording", str(rec_path), "-o", str(after)]) == 0
    text = after.read_text()
    assert known not in text and "[redacted]" in text


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_from_recording_of_an_openai_stream_says_why(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "no HTTP 200 response with a message_start", as if the file were damaged: a scenario scripts the
    Messages API, and serve --recording serves an OpenAI recording as it is."""
    from inspector.testing.openai_fake import chat_text, responses_text

    path = tmp_path / "saved.sse"
    path.write_bytes(chat_text("18C.") if api == "chat" else responses_text("18C."))
    assert main(["scenario", "from-recording", str(path)]) == 2
    err = capsys.readouterr().err
    name = "Chat Completions" if api == "chat" else "Responses"
    assert err.count("\n") == 1 and f"of OpenAI's {name} API" in err and "serve --recording" in err


async def test_from_recording_of_many_conversations_takes_the_first_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording made by watch or proxy holds every conversation of the harness: their turns were put one after
    the other as turns of one conversation (two 2-turn weather conversations gave a 4-turn scenario, its turn 2 the
    second conversation's first answer), silently."""
    import anthropic

    from inspector.net.proxy import ProxyApp

    rec_path, file_path = tmp_path / "two.jsonl", tmp_path / "two.yaml"
    tools: Any = [{"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}]
    with (
        BackgroundServer(ServeApp("weather", speed=math.inf)) as up,
        BackgroundServer(ProxyApp(up.base_url, record=rec_path)) as px,
    ):
        async with anthropic.AsyncAnthropic(base_url=px.base_url, api_key="sk-ant-api03-FAKE", max_retries=0) as c:
            for prompt in ("Paris?", "Lyon?"):
                messages: list[Any] = [{"role": "user", "content": prompt}]
                while True:
                    async with c.messages.stream(
                        model="claude-sonnet-4-6", max_tokens=99, messages=messages, tools=tools
                    ) as stream:
                        m = await stream.get_final_message()
                    messages.append({"role": "assistant", "content": [b.model_dump() for b in m.content]})
                    if m.stop_reason != "tool_use":
                        break
                    ids = [b.id for b in m.content if b.type == "tool_use"]
                    messages.append(
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i} for i in ids]}
                    )
    assert len(load_any(rec_path).turns) == 4
    assert main(["scenario", "from-recording", str(rec_path), "-o", str(file_path)]) == 0
    err = capsys.readouterr().err
    assert "holds 2 conversations: the scenario is the first one's (c1); the other is left out" in err
    sc = load_file(file_path)
    assert sc.prompt == "Paris?" and [t.stop_reason for t in sc.turns] == ["tool_use", "end_turn"]
    assert sc.expected["from_recording"] == {"conversation": "c1", "other_conversations": 1}


def _sse_of_a_tool_input(raw: str) -> str:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "t"},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": raw}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


@pytest.mark.parametrize("levels", [150, 900, 5000])
def test_from_recording_of_a_tool_input_nested_deep_writes_a_file_that_loads(
    levels: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording is untrusted: a tool input nested 150 levels was written as a mapping the file's own check refuses
    (more than 100 deep), 900 levels raised RecursionError in the YAML dumper, 5,000 in json.loads (tracebacks).
    An input too deep for the file is kept as `raw_json`, the exact text."""
    raw = '{"a": ' + "[" * levels + "]" * levels + "}"
    rec, out = tmp_path / "deep.sse", tmp_path / "deep.yaml"
    rec.write_text(_sse_of_a_tool_input(raw), encoding="utf-8")
    assert main(["scenario", "from-recording", str(rec), "-o", str(out)]) == 0
    (block,) = load_file(out).turns[0].blocks
    assert getattr(block, "raw_json", None) == raw


def test_from_recording_of_event_data_nested_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "deep.sse"
    rec.write_text("event: message_start\ndata: " + "[" * 5000 + "\n\n", encoding="utf-8")
    assert main(["scenario", "from-recording", str(rec)]) == 2  # (json.loads raised RecursionError: a traceback)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no streamed turn" in err


@pytest.mark.parametrize("levels", [150, 900])
def test_from_recording_of_a_whole_block_nested_deep_is_one_line(
    levels: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A block that arrives whole (a server tool's result) nested deeper than a scenario file may: 150 levels
    were written into a file `scenario check` refuses, 900 raised RecursionError in the YAML dumper. Refused in one
    line (a whole block has no text form)."""
    start = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    data = json.dumps(start).replace("[]", "[" * levels + "]" * levels)
    rec = tmp_path / "deep.sse"
    rec.write_text(
        'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "content": []}}\n\n'
        f'event: content_block_start\ndata: {{"type": "content_block_start", "index": 0, "content_block": {data}}}\n\n'
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
        'event: message_stop\ndata: {"type": "message_stop"}\n\n',
        encoding="utf-8",
    )
    assert main(["scenario", "from-recording", str(rec), "-o", str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"content block 0 nests {levels + 1} levels" in err, err
    assert not (tmp_path / "out.yaml").exists()

"""`inspector run / replay / scenarios` in process: JSON lines, progress lines, exit codes, missing key."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import inspector.cli as cli
from inspector.cli import headless
from inspector.observe import observations as O
from inspector.scenarios.bundled import SCENARIOS
from inspector.testing.loop import assert_valid_history


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code = cli.main(["run", *args, "--headless", "--json"])
    out, err = capsys.readouterr()
    lines = [orjson.loads(line) for line in out.splitlines()]
    return code, lines, err


def test_run_weather_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run_json(capsys, "--scenario", "weather", "--speed", "max")
    assert code == 0, err
    assert all(isinstance(o, dict) and "type" in o and "t" in o for o in lines)
    assert lines[0]["type"] == "loop_started" and lines[0]["source"]["name"] == "weather"
    types = [o["type"] for o in lines]
    for t in (
        "sse_event",
        "block_opened",
        "block_closed",
        "tool_use",
        "tool_state",
        "tool_result",
        "turn_ended",
        "text_finish",
        "message_appended",
    ):
        assert t in types, t
    fin = lines[-1]
    assert fin["type"] == "loop_finished"
    assert (fin["status"], fin["turns"]) == ("finished", 2)
    assert_valid_history(fin["messages"])
    assert fin["messages"][0] == {"role": "user", "content": SCENARIOS["weather"].prompt}
    assert fin["messages"][-1]["content"][0]["text"].startswith("It's 18")
    (tool,) = fin["tools"]
    assert {"id", "name", "state", "queued_at", "started_at", "finished_at"} <= set(tool)
    assert (tool["name"], tool["state"]) == ("get_weather", "succeeded")
    assert 0 <= tool["queued_at"] <= tool["started_at"] <= tool["finished_at"] <= fin["t"]
    assert tool["id"] == fin["messages"][1]["content"][1]["id"]
    assert [o["t"] for o in lines] == sorted(o["t"] for o in lines)


def test_run_error_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run_json(capsys, "--scenario", "overloaded_midstream", "--speed", "max", "--retries", "0")
    assert code == 1
    fin = lines[-1]
    assert fin["type"] == "loop_finished" and fin["status"] == "error"
    assert "overloaded_error" in fin["error"]


def test_run_retried_fault_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run_json(capsys, "--scenario", "overloaded_midstream", "--speed", "max")
    assert code == 0
    assert [o["status"] for o in lines if o["type"] == "attempt_ended"] == ["failed", "complete", "complete"]


def test_run_cancelled_by_sigint_exit_130(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a tool hangs: the loop cancels cleanly, prints its last line, exits 130."""

    class InterruptingPrinter(headless.JsonPrinter):
        sent = False

        def __call__(self, obs: O.Observation) -> None:
            super().__call__(obs)
            if (
                not self.sent
                and isinstance(obs, O.ToolStateChanged)
                and obs.name == "wait_for_ci"
                and obs.state == "running"
            ):
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)  # handled by the loop's signal handler, as from a terminal

    monkeypatch.setattr(headless, "JsonPrinter", InterruptingPrinter)
    code, lines, _ = run_json(capsys, "--scenario", "tool_hangs", "--speed", "max")
    assert code == 130
    fin = lines[-1]
    assert fin["type"] == "loop_finished" and fin["status"] == "cancelled"
    assert_valid_history(fin["messages"])
    states = {t["name"]: t["state"] for t in fin["tools"]}
    assert states["wait_for_ci"] == "cancelled"


def test_run_terminated_by_sigterm_ends_as_cancelled_and_removes_the_workspace_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (`timeout`, a CI runner, `kill`) while a tool hangs: as Ctrl-C, the loop cancels cleanly and the
    scenario's workspace copy is removed (it killed the process where it was: the copy stayed in the temp dir); exit
    143 (128 + 15, as a shell reports it), not Ctrl-C's 130."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scenario = tmp_path / "hangs.yaml"
    scenario.write_text(
        "version: 1\nname: sigterm_copy\ndescription: d\nprompt: p\nworkspace: parse_date\nworkspace_copy: true\n"
        "tools:\n  - name: stuck\n    input_schema: {type: object}\n    hang: true\n    timeout: 3600\n"
        "turns:\n  - blocks: [{tool_use: stuck, input: {}}]\n    stop_reason: tool_use\n  - blocks: [{text: done}]\n"
    )
    copies: list[Path] = []

    class TerminatingPrinter(headless.JsonPrinter):
        sent = False

        def __call__(self, obs: O.Observation) -> None:
            super().__call__(obs)
            if not self.sent and isinstance(obs, O.ToolStateChanged) and obs.state == "running":
                self.sent = True
                copies.extend(tmp_path.glob("inspector-sigterm_copy-*"))
                os.kill(os.getpid(), signal.SIGTERM)

    def unhandled(signum: int, frame: object) -> None:
        raise RuntimeError("SIGTERM was not handled by the run")  # (not the default action: it ends pytest too)

    monkeypatch.setattr(headless, "JsonPrinter", TerminatingPrinter)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        code, lines, _ = run_json(capsys, "--scenario", str(scenario), "--speed", "max")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(copies) == 1  # (the copy existed while the tool ran)
    assert code == 128 + signal.SIGTERM
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["status"] == "cancelled"
    assert not copies[0].exists()


def test_run_headless_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "--scenario", "parse_date", "--headless", "--speed", "max"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "turn 1" in out and "turn 2" in out and "turn 0" not in out
    assert out.count("-> running") == 4 and out.count("-> succeeded") == 4  # parse_date: a test run + 3 reads
    assert "answer:" in out
    assert out.rstrip().splitlines()[-1].endswith("finished after 2 turns")


def test_missing_api_key_exit_2_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code = cli.main(["run", "--model", "claude-sonnet-4-5", "hello", "--headless"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "ANTHROPIC_API_KEY" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--scenario", "no_such_scenario", "--headless"],
        ["run", "--scenario", "weather", "--json"],  # --json needs --headless
        ["run", "--scenario", "weather", "a prompt", "--headless"],
        ["run", "--model", "m", "--headless"],  # no prompt
        ["run", "--speed", "fast", "--headless"],
        ["run", "--scenario", "weather", "--headless", "--record", "/nonexistent-dir/x.jsonl"],
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip()
    assert "Traceback" not in err
    if argv[1] != "--speed":  # argparse's own usage errors are two lines; ours are one
        assert len(err.strip().splitlines()) == 1, err


def test_scenarios_lists_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["scenarios"]) == 0
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    for line, sc in zip(lines, SCENARIOS.values(), strict=True):
        assert line.endswith(sc.description)


def test_record_then_replay_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "weather.jsonl"
    code, lines, _ = run_json(capsys, "--scenario", "weather", "--speed", "max", "--record", str(path))
    assert code == 0 and path.exists()
    code = cli.main(["replay", str(path), "--headless", "--json"])
    out, _ = capsys.readouterr()
    replayed = [orjson.loads(line) for line in out.splitlines()]
    assert code == 0
    assert replayed[-1]["messages"] == lines[-1]["messages"]
    sse: Callable[[list[dict[str, Any]]], list[Any]] = lambda ls: [
        (o["sse"]["event"], o["sse"]["data"]) for o in ls if o["type"] == "sse_event"
    ]
    assert sse(replayed) == sse(lines)


@pytest.mark.parametrize(
    "extra",
    [["--tools", "pkg.mod:TOOLS"], ["--workspace", "."], ["--allow-write"], ["--system", "x"], ["--max-tokens", "9"]],
)
def test_api_only_options_are_refused_with_a_scenario(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    """--tools (and the other --model options) with --scenario: refused with one line, never silently ignored."""
    code = cli.main(["run", "--scenario", "weather", *extra, "--headless", "--speed", "max"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "goes with --model" in err and extra[0] in err


def test_every_option_of_every_command_says_its_default() -> None:
    """Every option's help names its default (or what it does when not given)."""
    import argparse

    from inspector.cli import COMMANDS, build_parser

    for name in COMMANDS:
        parser = build_parser([name])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        for action in sub._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS) or action.dest == "help":
                continue
            if isinstance(action, argparse._StoreTrueAction) and "and exit" in (action.help or ""):
                continue  # an action, not a setting (--list-faults)
            assert "default" in action.help, (name, action.option_strings, action.help)


def test_a_bundled_scenario_is_not_loaded_before_the_first_frame() -> None:
    """`inspector` (the dashboard on a bundled scenario) checks the name only: the file (YAML + pydantic, ~0.12 s of
    CPU) is loaded with the session, after the first frame. A scenario file is still checked before any UI starts."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import argparse, sys\n"
        "from inspector.cli.run import _make_factory\n"
        "a = argparse.Namespace(command='run', scenario=None, model=None, prompt=None, speed=None, record=None,\n"
        "    retries=2, max_turns=20, idle_timeout=None, headless=False, json=False, tools=[])\n"
        "_make_factory(a, tui=True)\n"
        "print(sorted(m for m in ('yaml', 'pydantic') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        timeout=120,
    )
    assert proc.stdout.strip() == "[]", proc.stderr[-2000:]


def test_an_unknown_scenario_or_a_broken_file_is_still_a_usage_error_before_the_ui(tmp_path: Path) -> None:
    import argparse

    from inspector.cli.run import _make_factory
    from inspector.core.errors import UsageError

    def args(name: str) -> argparse.Namespace:
        return argparse.Namespace(
            command="run", scenario=name, model=None, prompt=None, speed=None, record=None, retries=2,
            max_turns=20, idle_timeout=None, headless=False, json=False, tools=[],
        )  # fmt: skip

    with pytest.raises(UsageError, match="unknown scenario 'wether'"):
        _make_factory(args("wether"), tui=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nturns: 3\n")
    with pytest.raises(UsageError, match="bad.yaml"):
        _make_factory(args(str(bad)), tui=True)

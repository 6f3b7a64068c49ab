"""The terminal is not a sink for escape codes (issue 19): whatever control characters a stream or a scenario puts in
the fields the CLI prints (model, message id, tool name and id, stop reason, text, errors) never reach stdout or
stderr raw in text output; --json stays exact."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.cli.headless import ProgressPrinter
from inspector.core.fmt import terminal
from inspector.testing.hyp import examples
from inspector.testing.streamgen import (
    block_stop,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
    tool_start,
)

C0 = [chr(c) for c in range(0x20) if c not in (0x09, 0x0A)]
# the bidirectional marks, embeddings, overrides and isolates ("Trojan Source"): every one, as fmt.terminal escapes
# them (the set held two: a run whose seed drew U+202A, escaped as it should be, failed "nothing else changes")
BIDI = {chr(c) for c in [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
UNSAFE = set(C0) | {"\x7f"} | {chr(c) for c in range(0x80, 0xA0)} | BIDI
CONTROLS = st.sampled_from(sorted(UNSAFE))
# a string with at least one control character, among ordinary text (and the classic attacks)
EVIL = st.one_of(
    st.sampled_from(["\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "ok\rFAKE", "\x00", "\x9b31m", "\x1b[31mred"]),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=5), CONTROLS, st.text(max_size=5)),
)


def raw_controls(s: str) -> set[str]:
    return {ch for ch in s if ch in UNSAFE}


def evil_stream(evil: str) -> bytes:
    return sse(
        message_start(id="msg_" + evil, model="claude-" + evil),
        text_start(0),
        text_delta(0, "hi " + evil),
        block_stop(0),
        tool_start(1, "toolu_" + evil, "read_" + evil),
        json_delta(1, orjson.dumps({"path": evil}).decode()),
        block_stop(1),
        message_delta("tool_use" + evil),
        message_stop(),
    )


@pytest.mark.parametrize(
    "argv",
    [["dump", "{}"], ["dump", "--timing", "{}"], ["replay", "{}", "--headless", "--speed", "max"]],
    ids=["dump", "dump-timing", "replay-headless"],
)
def test_control_characters_in_every_printed_field_never_reach_the_terminal(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    @given(evil=EVIL)
    @settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    def prop(evil: str) -> None:
        p = tmp_path_factory.mktemp("evil") / "s.sse"
        p.write_bytes(evil_stream(evil))
        main([a.replace("{}", str(p)) for a in argv])
        out, err = capsys.readouterr()
        assert not raw_controls(out) and not raw_controls(err), (out, err)
        assert terminal("read_" + evil, newlines=False) in out or argv[0] == "dump" and "read_" in out

    prop()


def test_the_classic_attacks_are_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.sse"
    p.write_bytes(evil_stream("\x1b]0;pwned\x07"))
    assert main(["dump", str(p)]) == 0
    out, err = capsys.readouterr()
    assert "message msg_\\x1b]0;pwned\\x07  model claude-\\x1b]0;pwned\\x07" in out and err == ""
    assert "[1] tool_use read_\\x1b]0;pwned\\x07 toolu_\\x1b]0;pwned\\x07" in out
    assert "stop_reason: tool_use\\x1b]0;pwned\\x07" in out


def test_json_output_stays_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "\x1b[31m\x00\x9b"
    p = tmp_path / "s.sse"
    p.write_bytes(evil_stream(evil))
    main(["dump", "--json", str(p)])
    out, _ = capsys.readouterr()
    msg = orjson.loads(out)["turns"][0]["message"]
    assert msg["model"] == "claude-" + evil and msg["content"][1]["name"] == "read_" + evil


def test_errors_on_stderr_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", "/nonexistent/\x1b]0;pwned\x07.jsonl"]) == 2
    _, err = capsys.readouterr()
    assert not raw_controls(err) and "\\x1b]0;pwned\\x07" in err


@given(evil=EVIL)
@settings(max_examples=examples(200), deadline=None)
def test_progress_lines_escape_every_field(evil: str) -> None:
    """run --headless (a scenario's tool names, a stream's ids, diagnostics, errors): every progress line."""
    from inspector.observe import observations as O

    lines: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> None:
            lines.append(data)

    pr = ProgressPrinter(Sink())  # type: ignore[arg-type]
    for obs in [
        O.LoopStarted(0.0, {"type": "scenario", "name": evil}, evil, None),
        O.ToolUse(0.1, 0, 0, evil, evil, 1, {"k": evil}),
        O.TextFinish(0.2, 0, "a\n" + evil, evil),
        O.LoopFinished(0.3, "error", 1, [], [], evil),
    ]:
        pr(obs)
    text = b"".join(lines).decode()
    assert len(lines) >= 4 and not raw_controls(text)


@given(st.text())
@settings(max_examples=examples(500))
def test_terminal_escapes_every_control_and_keeps_everything_else(s: str) -> None:
    out = terminal(s)
    assert not raw_controls(out)
    assert not raw_controls(terminal(s, newlines=False)) and "\n" not in terminal(s, newlines=False)
    if not raw_controls(s):
        assert out == s  # nothing else changes (printable text, newlines, tabs, any script)


def test_a_scenario_tool_name_with_nul_and_escapes_never_reaches_the_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """run --headless on a scenario whose tool name holds NUL and ESC[31m (issue 19)."""
    from inspector.scenarios.bundled import fast
    from inspector.scenarios.model import Scenario, SimulatedTool, TextBlock, ToolUseBlock, TurnScript
    from inspector.testing.loop import custom_scenario

    evil = "rm\x00\x1b[31m\x1b]0;pwned\x07"
    sc = Scenario(
        name="test_evil_tool",
        description="test",
        prompt="hi",
        system=None,
        turns=[
            TurnScript(blocks=[ToolUseBlock(evil, {"path": "\x1b[2J"})], pacing=fast()),
            TurnScript(blocks=[TextBlock("done \x1b[2J")], pacing=fast()),
        ],
        simulated_tools=[SimulatedTool(evil, result="\x1b[2Jgone", error=None)],
    )
    name = custom_scenario(monkeypatch, sc)
    capsys.readouterr()
    main(["run", "--headless", "--scenario", name, "--speed", "max"])
    out, err = capsys.readouterr()
    assert not raw_controls(out) and not raw_controls(err), (out, err)
    assert "rm\\x00\\x1b[31m\\x1b]0;pwned\\x07" in out

"""`run --headless` says each turn's usage, cost and cache verdict; `--json` carries one turn_cost line per turn.

The CLI runs in-process (`cli.main`, its output captured), as in test_cli_run: a subprocess per run re-imported the
SDK each time; the process boundary is the smoke tests' (tests/cli/test_cli_watch.py, test_otel_proxy_watch.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from inspector import cli


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


class InspectorCli(Protocol):
    def __call__(self, *args: str) -> Ran: ...


@pytest.fixture
def inspector_cli(capsys: pytest.CaptureFixture[str]) -> InspectorCli:
    """`inspector ARGS...` in this process: its exit status and what it wrote."""

    def run(*args: str) -> Ran:
        capsys.readouterr()
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def test_the_progress_lines_say_cost_and_why_the_cache_was_written_again(inspector_cli: InspectorCli) -> None:
    out = inspector_cli("run", "--scenario", "cache_break", "--headless")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.lstrip().split("s   ")[-1].startswith("cost ")]
    assert len(lines) == 2, out.stdout
    assert "cache 0%" in lines[0] and "cache write 2,048" in lines[0] and "$0.0" in lines[0]
    assert lines[1].endswith("cache written again: system changed at char 69")


def test_json_carries_usage_cache_and_cost_per_turn(inspector_cli: InspectorCli) -> None:
    out = inspector_cli("run", "--scenario", "weather", "--headless", "--json")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(ln) for ln in out.stdout.splitlines()]
    costs = [d for d in docs if d.get("type") == "turn_cost"]
    ended = [d for d in docs if d.get("type") == "turn_ended"]
    assert [c["turn"] for c in costs] == [e["turn"] + 1 for e in ended] == [1, 2]
    for c in costs:
        assert c["usage"]["input_tokens"] > 0 and c["cost"]["usd"] > 0 and c["cache"]["kind"] == "no_cache"


def test_the_session_total_comes_before_the_loop_end_and_equals_dump(
    tmp_path: Path, inspector_cli: InspectorCli
) -> None:
    rec = tmp_path / "cb.jsonl"
    out = inspector_cli("run", "--scenario", "cache_break", "--headless", "--json", "--record", str(rec))
    assert out.returncode == 0, out.stderr
    docs = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert [d.get("type") for d in docs[-2:]] == ["session_cost", "loop_finished"]
    dumped = inspector_cli("dump", "--json", str(rec))
    assert dumped.returncode == 0, dumped.stderr
    total = json.loads(dumped.stdout)["total"]
    mine = docs[-2]
    assert {k: mine[k] for k in total} == total and mine["turns"] == 2
    text = inspector_cli("run", "--scenario", "cache_break", "--headless").stdout.splitlines()
    assert "total 2 turns: cost $0.016 · cache 0% · in 134 · out 45 · cache write 4,096 · prices: genai" in text[-2]


def test_the_text_of_a_block_that_never_closed_is_shown_as_dump_shows_it(inspector_cli: InspectorCli) -> None:
    """A stream cut mid-text (an error event before the block's stop): the progress lines said only `block 0 open`
    and the error, hiding the text that came, which dump shows. Now the attempt's end says it, once; a closed
    block's text is still said at its close, and not again."""
    out = inspector_cli("run", "--scenario", "overloaded_midstream", "--headless", "--speed", "max")
    cut = [ln for ln in out.stdout.splitlines() if "text (never closed)" in ln]
    assert len(cut) == 1 and cut[0].endswith('block 0 text (never closed): "I\'ll read the parser fir"'), out.stdout
    assert out.stdout.index("text (never closed)") < out.stdout.index("attempt 1 failed")
    closed = [ln for ln in out.stdout.splitlines() if "block 0 text:" in ln]
    assert closed and not any("never closed" in ln for ln in closed)

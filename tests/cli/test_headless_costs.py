"""`run --headless` says each turn's usage, cost and cache verdict; `--json` carries one turn_cost line per turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "inspector", "run", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_progress_lines_say_cost_and_why_the_cache_was_written_again():
    out = _run("--scenario", "cache_break", "--headless")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.lstrip().split("s   ")[-1].startswith("cost ")]
    assert len(lines) == 2, out.stdout
    assert "cache 0%" in lines[0] and "cache write 2,048" in lines[0] and "$0.0" in lines[0]
    assert lines[1].endswith("cache written again: system changed at char 69")


def test_json_carries_usage_cache_and_cost_per_turn():
    out = _run("--scenario", "weather", "--headless", "--json")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(ln) for ln in out.stdout.splitlines()]
    costs = [d for d in docs if d.get("type") == "turn_cost"]
    ended = [d for d in docs if d.get("type") == "turn_ended"]
    assert [c["turn"] for c in costs] == [e["turn"] + 1 for e in ended] == [1, 2]
    for c in costs:
        assert c["usage"]["input_tokens"] > 0 and c["cost"]["usd"] > 0 and c["cache"]["kind"] == "no_cache"


def test_the_session_total_comes_before_the_loop_end_and_equals_dump(tmp_path):
    rec = tmp_path / "cb.jsonl"
    out = _run("--scenario", "cache_break", "--headless", "--json", "--record", str(rec))
    assert out.returncode == 0, out.stderr
    docs = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert [d.get("type") for d in docs[-2:]] == ["session_cost", "loop_finished"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dumped = subprocess.run(
        [sys.executable, "-m", "inspector", "dump", "--json", str(rec)], capture_output=True, timeout=60, env=env
    )
    total = json.loads(dumped.stdout)["total"]
    mine = docs[-2]
    assert {k: mine[k] for k in total} == total and mine["turns"] == 2
    text = _run("--scenario", "cache_break", "--headless").stdout.splitlines()
    assert "total 2 turns: cost $0.016 · cache 0% · in 134 · out 45 · cache write 4,096 · prices: genai" in text[-2]

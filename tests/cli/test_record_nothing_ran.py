"""A dashboard stopped before its session was made (q or Ctrl-C while it starts) left the `--record` file that the
command had created to check it could write it (cli.common.record_problem) empty: 0 bytes, which `dump` read as a
plain SSE stream that carried nothing ("turn 1 attempt 1: incomplete ... protocol.no_events"). Now the file is a recording with its
header and an end saying nothing ran, and `dump` says so."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _dump(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector", "dump", *extra, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def _run_with_a_dashboard_quit_at_once(monkeypatch: pytest.MonkeyPatch, main: Callable[[], int]) -> int:
    """The command with a dashboard that quits before it makes its session (q while it starts)."""
    import inspector.tui.app as tui_app

    made: list[object] = []

    def dashboard(factory: Callable[..., object], **_: Any) -> int:
        made.append(factory)  # (never called: the session is never made)
        return 130

    monkeypatch.setattr(tui_app, "run_dashboard", dashboard)
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setattr(sys, "stdin", _Terminal())
    status = main()
    assert made, "the dashboard path was not taken"
    return status


def _proxy(rec: Path) -> int:
    from inspector.cli import proxy as cli

    p = argparse.ArgumentParser()
    cli._add_arguments(p)
    return cli.cmd(p.parse_args(["--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--record", str(rec)]))


def _serve(rec: Path) -> int:
    from inspector.cli import serve as cli

    return cli.main(["--scenario", "weather", "--tui", "--port", "0", "--record", str(rec)])


@pytest.mark.parametrize("command", [_proxy, _serve], ids=["proxy", "serve --tui"])
def test_a_dashboard_quit_before_its_session_leaves_a_recording_that_says_nothing_ran(
    command: Callable[[Path], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = tmp_path / "rec.jsonl"
    _run_with_a_dashboard_quit_at_once(monkeypatch, lambda: command(rec))
    lines = [orjson.loads(line) for line in rec.read_bytes().splitlines()]
    assert lines and lines[0]["kind"] == "header", lines  # (it was 0 bytes)
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["status"] == "cancelled" and lines[-1]["turns"] == 0
    out = _dump(rec)
    assert "Traceback" not in out.stderr and out.stderr == "", out.stderr
    assert out.stdout.strip() == "nothing ran: the session was stopped before it started", out.stdout
    as_json = orjson.loads(_dump(rec, "--json").stdout)
    assert as_json["turns"] == [] and as_json["nothing_ran"] is True


def test_a_session_closed_before_it_ran_ends_its_recording_saying_nothing_ran(tmp_path: Path) -> None:
    """A session made but stopped before its loop ran (`run` with the dashboard, stopped as its session started;
    headless, stopped as it started): its recording held its header alone, no end, and dump said only 'no turns in
    this file'. Now its end says nothing ran, and dump says so; a session that ran is unchanged."""
    from inspector.record.recorder import NOTHING_RAN
    from inspector.sessions import sources

    never = tmp_path / "never.jsonl"
    sources.scenario_session(record=str(never)).close()
    lines = [orjson.loads(line) for line in never.read_bytes().splitlines()]
    assert [line.get("kind") for line in lines] == ["header", "obs"], lines
    assert lines[-1]["type"] == "loop_finished" and lines[-1]["error"] == NOTHING_RAN
    out = _dump(never)
    assert out.stdout.strip() == "nothing ran: the session was stopped before it started" and out.stderr == ""

    ran = tmp_path / "ran.jsonl"
    session = sources.scenario_session(record=str(ran), speed=float("inf"))
    import asyncio

    asyncio.run(session.run())  # (closed by its run)
    session.close()
    ends = [e for e in map(orjson.loads, ran.read_bytes().splitlines()) if e.get("type") == "loop_finished"]
    assert [(e["status"], e.get("error")) for e in ends] == [("finished", None)]


def test_run_with_a_dashboard_that_quit_as_its_session_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --record F` with the dashboard, quit as its session was made (which never ran): F held its header alone.
    Now it says nothing ran."""
    import inspector.tui.app as tui_app
    from inspector.cli.run import run_tui
    from inspector.sessions import sources

    rec = tmp_path / "run.jsonl"

    def dashboard(factory: Callable[..., object], **_: Any) -> int:
        factory()  # (made, never run: the dashboard quit)
        return 130

    monkeypatch.setattr(tui_app, "run_dashboard", dashboard)
    run_tui(lambda **kw: sources.scenario_session(record=str(rec), **kw), {"type": "scenario"})
    out = _dump(rec)
    assert out.stdout.strip() == "nothing ran: the session was stopped before it started", out


def test_watch_quit_before_its_command_started_records_that_nothing_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`watch --record F` with the dashboard quit before the command started (it says 'it did not run'): F held its
    header alone. Now its end says nothing ran."""
    from inspector.cli import build_parser
    from inspector.cli import watch as watch_cli

    rec = tmp_path / "watch.jsonl"
    argv = ["watch", "--serve", "weather", "--record", str(rec), "--", sys.executable, "-c", "pass"]
    status = _run_with_a_dashboard_quit_at_once(monkeypatch, lambda: watch_cli.cmd(build_parser(argv).parse_args(argv)))
    assert status == 130
    out = _dump(rec)
    assert out.stdout.strip() == "nothing ran: the session was stopped before it started", out

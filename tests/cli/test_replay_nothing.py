"""A recording without turns, replayed: one written by a session stopped before it started (`write_nothing_ran`:
`dump` says "nothing ran") or a header alone. The replay sent a request all the same: headless, the nothing-ran file
gave one attempt "cancelled by user" (exit 130), the header alone "HTTP 400 ... the recording has no more turns"
(exit 1); the dashboard showed the same. Now replay refuses it as it refuses any recording it cannot use: one line
saying there is nothing to replay and why, exit 2, before any request or dashboard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = {"type": "scenario", "name": "weather"}
WHY = {
    "nothing_ran": "nothing ran (the session was stopped before it started)",
    "header_only": "the recording has no turns",
}


def _recording(tmp_path: Path, kind: str) -> Path:
    from inspector.record.recorder import write_nothing_ran
    from inspector.record.recording import RecordingWriter

    path = tmp_path / f"{kind}.jsonl"
    if kind == "nothing_ran":
        write_nothing_ran(path, SOURCE)
    else:
        with RecordingWriter(path, source=SOURCE):
            pass
    return path


@pytest.mark.parametrize("kind", list(WHY))
def test_headless_replay_of_a_recording_without_turns_says_nothing_to_replay(tmp_path: Path, kind: str) -> None:
    path = _recording(tmp_path, kind)
    out = subprocess.run(
        [sys.executable, "-m", "inspector", "replay", "--headless", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 2, out
    assert out.stderr == f"inspector: {path}: nothing to replay: {WHY[kind]}\n", out.stderr
    assert out.stdout == ""  # (no start, no turn, no attempt: nothing was sent)


@pytest.mark.parametrize("kind", list(WHY))
def test_dashboard_replay_of_a_recording_without_turns_is_refused_before_it_starts(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the dashboard: refused before it starts, as a recording replay cannot read is (exit 2, one line), not a
    dashboard whose replay fails on a request it should not have sent."""
    import inspector.cli.run as run
    import inspector.sessions.sources as sources
    import inspector.tui.app as tui_app
    from inspector.cli import main

    def must_not_run(*_: object, **__: object) -> int:
        raise AssertionError("the dashboard or the replay was started")

    monkeypatch.setattr(run, "_interactive", lambda: True)
    monkeypatch.setattr(tui_app, "run_dashboard", must_not_run)
    monkeypatch.setattr(sources, "replay_session", must_not_run)
    path = _recording(tmp_path, kind)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"inspector: {path}: nothing to replay: {WHY[kind]}\n", err

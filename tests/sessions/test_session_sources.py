"""What the session factories attach to a Session (its declared ``server``, ``workspace``, ``recording``), and a
recording given to ``replay_session`` / ``load_recording`` as bytes: named by a short label, never by its content."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from inspector.core.errors import SourceError
from inspector.record.recording import Recording
from inspector.record.replay import ReplayServer
from inspector.scenarios.transport import ScenarioServer
from inspector.sessions.sources import BYTES_LABEL, Session, load_recording, replay_session, scenario_session
from inspector.testing.loop import run_observed


async def test_a_recording_given_as_bytes_replays_under_a_short_label(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    original, _ = await run_observed(scenario_session("parse_date", speed=math.inf, record=path))
    data = path.read_bytes()
    session = replay_session(data)
    assert session.source["file"] == BYTES_LABEL == "<recording bytes>"  # not the file's text
    assert isinstance(session.recording, Recording) and isinstance(session.server, ReplayServer)
    replayed, _ = await run_observed(session)
    assert replayed.status == original.status == "finished"
    assert replay_session(data, label="mine").source["file"] == "mine"
    assert replay_session(path).source["file"] == str(path)


@pytest.mark.parametrize(
    "data",
    [
        b'{"kind": "header", "format": "stream-inspector-recording", "version": 999, "note": "SECRET-TEXT"}\n',
        b'{"log": {"entries": 7}, "note": "SECRET-TEXT"}',
    ],
)
def test_unreadable_bytes_are_a_one_line_error_named_by_the_label(data: bytes) -> None:
    with pytest.raises(SourceError) as caught:
        load_recording(data)
    message = str(caught.value)
    assert message.startswith(BYTES_LABEL) and "\n" not in message and "SECRET-TEXT" not in message
    with pytest.raises(SourceError, match="^mine"):
        load_recording(data, "mine")


def test_the_factories_attach_their_server_workspace_and_recording() -> None:
    session = scenario_session("parse_date", speed=math.inf)
    try:
        assert isinstance(session.server, ScenarioServer) and session.recording is None
        assert session.workspace is None or session.workspace.is_dir()
    finally:
        session.close()
    bare = Session(session.loop, {})
    assert (bare.server, bare.workspace, bare.recording) == (None, None, None)
    assert "server=" not in repr(bare) and "recording=" not in repr(bare)


@pytest.mark.parametrize("stop", [RuntimeError("broken tool table"), KeyboardInterrupt()], ids=["error", "stop"])
def test_a_scenario_session_that_fails_after_its_workspace_copy_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: BaseException
) -> None:
    """The workspace copy is made first; whatever failed or stopped (SIGTERM raises where the process is) after it,
    before the session owned it (tools, config, loop), left it in the temp dir: only the session's close removed it."""
    import tempfile

    from inspector.scenarios.model import Scenario

    def fails(*_: object, **__: object) -> None:
        raise stop

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(Scenario, "resolve_tools", fails)
    with pytest.raises(type(stop)):
        scenario_session("exclusive_mix")
    assert list(tmp_path.iterdir()) == []

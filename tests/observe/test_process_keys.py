"""A key of the environment (the CLI's output guard learns the credential environment variables) is masked in what a
session records and in an export, as it is on stdout: a scenario whose text showed `ANTHROPIC_API_KEY`'s value printed
`[redacted]` but its recording and its HTML page held the key in clear (a new user's try)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from inspector.core.redaction import ENVIRONMENT_KEYS, OutputGuard, learn
from inspector.record.har import load_any
from inspector.record.htmlexport import export
from inspector.sessions import sources

# (a string the weather scenario's text and tool input show: streamed in fragments, split across deltas)
KNOWN = "check the current weather in Paris"


def test_a_key_the_process_knows_is_masked_in_the_recording_and_the_export(tmp_path: Path) -> None:
    with OutputGuard({"INSPECTOR_TEST_API_KEY": "sk-ant-api03-" + "envCanaryKEY0123456789" * 2}):  # as the CLI does
        pass
    assert ENVIRONMENT_KEYS  # (the guard learned the environment's key)
    ENVIRONMENT_KEYS.append(KNOWN)  # (and this one, a string the scenario shows, as if it were one too)
    learn([KNOWN])
    rec, page = tmp_path / "s.jsonl", tmp_path / "s.html"
    session = sources.scenario_session("weather", speed=math.inf, record=rec)
    try:
        result = asyncio.run(session.run())
    finally:
        session.close()
    assert result.status == "finished"
    recorded = rec.read_text()
    assert "[redacted]" in recorded
    export(load_any(rec), page)
    shown = page.read_text()
    assert "[redacted]" in shown
    for text in (recorded, shown):
        assert KNOWN not in text
        assert "Let me [redacted]" in text

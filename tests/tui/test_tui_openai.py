"""The dashboard on OpenAI streams (issue 20 §2): a recording of the `weather` scenario's first turn rendered as a
Chat Completions stream and as a Responses stream (serve's renderer, fixed read times), replayed at max speed on a
frozen clock. The four panes show the same things as for Anthropic: the SSE events (chunks, or `event:` names), one
block buffer per tool call, the tool call, the assistant text."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from inspector.record.recording import RecordingWriter
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render_openai import render_openai_turn
from inspector.tui.app import InspectorApp

WIDE = (140, 42)
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}

SnapCompare = Callable[..., bool]  # pytest-textual-snapshot's snap_compare fixture


def openai_recording(path: Path, api: str) -> Path:
    scenario = get_scenario("weather")
    plan = render_openai_turn(scenario, 0, api=api)  # type: ignore[arg-type]
    body = {"model": scenario.model, "stream": True, "messages": [{"role": "user", "content": scenario.prompt}]}
    if api == "responses":
        body = {"model": scenario.model, "stream": True, "input": scenario.prompt}
    with open(path, "wb") as f:
        w = RecordingWriter(f, source={"type": "test", "name": f"weather-{api}"})
        w.request(0, 0, 0.0, "POST", "https://api.openai.com" + PATHS[api], {"content-type": "application/json"}, body)
        w.response(0, 0, 0.25, 200, {"content-type": "text/event-stream"})
        t = 0.3
        for r in plan.reads:
            w.read(0, 0, round(t, 3), r.data)
            t += 0.05
        w.end(0, 0, round(t, 3), "complete", None)
        w.close()
    return path


def app_for(path: Path) -> InspectorApp:
    from inspector.sessions import sources

    return InspectorApp(
        lambda: sources.replay_session(path, speed=math.inf, clock=lambda: 0.0, label=path.name),
        clock=lambda: 0.0,
        replay=True,
    )


async def until_done(pilot: Pilot[object]) -> None:
    from inspector.testing.dashboard import wait_for

    app = pilot.app
    assert isinstance(app, InspectorApp)
    await wait_for(lambda: app.final_status is not None, 30, "the replay to finish")
    ticks = app.ticks
    await wait_for(lambda: app.ticks >= ticks + 2, 10, "two refresh ticks")
    await pilot.pause()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_openai_stream_in_all_four_panes(snap_compare: SnapCompare, tmp_path: Path, api: str) -> None:
    path = openai_recording(tmp_path / f"{api}.jsonl", api)
    assert snap_compare(app_for(path), terminal_size=WIDE, run_before=until_done)

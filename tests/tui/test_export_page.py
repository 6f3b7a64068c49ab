"""`e` writes the recording and, beside it, the session's HTML page, off the UI thread, and says where both landed;
a page that cannot be written leaves the recording and says why in one line."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message

from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.testing.dashboard import wait_for
from inspector.testing.synthetic import parse_date_observations
from inspector.tui import export as export_mod
from inspector.tui.app import InspectorApp
from inspector.tui.export import write_recording_and_page

SIZE = (140, 42)
KEY = "sk-ant-api03-" + "canaryCANARY0123456789" * 3


async def _press_e(app: InspectorApp) -> list[Message]:
    messages: list[Message] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.press("e")
        await wait_for(lambda: any(isinstance(m, InspectorApp.Exported) for m in messages), what="export")
        await pilot.pause()
    return messages


async def test_e_writes_the_recording_and_the_page_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ui = threading.get_ident()
    where: list[int] = []
    real = export_mod.write_recording_and_page

    def spy(*a: Any, **kw: Any) -> Any:
        where.append(threading.get_ident())
        return real(*a, **kw)

    monkeypatch.setattr("inspector.tui.app.write_recording_and_page", spy)
    app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0, export_dir=tmp_path)
    notes: list[tuple[str, str]] = []
    monkeypatch.setattr(app, "notify", lambda msg, **kw: notes.append((kw.get("title", ""), msg)))
    messages = await _press_e(app)
    done = next(m for m in messages if isinstance(m, InspectorApp.Exported))
    assert where and ui not in where  # written in a worker thread
    assert done.error is None and done.page_error is None and done.path is not None and done.page is not None
    assert done.path.parent == tmp_path and done.page == done.path.with_suffix(".html") and done.page.exists()
    page = done.page.read_text("utf-8")
    assert page.startswith("<!") and "parse_date" in page
    assert read_recording(done.path).turns  # the recording is whole
    assert ("Recording and HTML page exported", f"{done.path}\n{done.page}") in notes


async def test_a_page_that_cannot_be_written_keeps_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*a: object, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("inspector.record.htmlexport.export", broken)
    app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0, export_dir=tmp_path)
    notes: list[tuple[str, str, str]] = []
    monkeypatch.setattr(
        app, "notify", lambda msg, **kw: notes.append((kw.get("title", ""), msg, kw.get("severity", "")))
    )
    messages = await _press_e(app)
    done = next(m for m in messages if isinstance(m, InspectorApp.Exported))
    assert done.path is not None and done.path.exists() and done.page is None
    assert done.page_error == "OSError: [Errno 28] No space left on device"
    assert notes[-1][0] == "Recording exported" and notes[-1][2] == "warning"
    assert "page not written: OSError" in notes[-1][1] and "\n" in notes[-1][1]


def test_the_key_reaches_neither_the_recording_nor_the_page(tmp_path: Path) -> None:
    obs = list(parse_date_observations())
    leaky = [
        o
        if not isinstance(o, O.AttemptStarted)
        else O.AttemptStarted(
            o.t, o.turn, o.attempt, o.method, o.url, {**o.headers, "x-note": KEY}, {**o.body, "metadata": KEY}
        )
        for o in obs
    ]
    done = write_recording_and_page(tmp_path / "s.jsonl", leaky, {"type": "scenario", "name": "x"}, [KEY])
    assert done.page is not None
    for path in (done.recording, done.page):
        assert KEY not in path.read_text("utf-8")
        assert KEY[:24] not in path.read_text("utf-8")


@pytest.mark.parametrize("name", ["s.jsonl", "inspector-x-1.jsonl"])
def test_the_page_is_named_after_the_recording(name: str) -> None:
    assert export_mod.page_path(Path("/d") / name) == Path("/d") / name.replace(".jsonl", ".html")

"""Export what the dashboard received (`e`): the recording (the same writer the loop's `--record` uses) and, beside
it, the self-contained HTML page of the session (``inspector export``'s), built from that recording. No Textual."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.observe import observations as O
from inspector.record.recorder import Recorder
from inspector.record.recording import Recording


def default_export_path(directory: Path, source: dict[str, Any]) -> Path:
    name = str(source.get("name") or source.get("model") or Path(str(source.get("file") or "session")).stem)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "session"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = directory / f"inspector-{slug}-{stamp}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"inspector-{slug}-{stamp}-{n}.jsonl"
    return path


def write_recording(
    path: Path,
    observations: Iterable[O.Observation],
    source: dict[str, Any],
    secrets: Sequence[str] = (),
    recorded: Recording | None = None,
) -> Path:
    """Write every read (with its timing) and the observations a replay needs. Runs in a worker thread.
    ``secrets`` (the session's API key) are masked as `--record` masks them: also when split across reads.
    ``recorded``: the recording the session replays (a replay's observations carry the replay's clock, at its
    speed): every line is written with its recorded time instead, as `inspector dump` gives them. Every observation
    is written, not only those up to the first loop's end: a replay of a proxy's recording runs a loop per
    conversation, each ending with its ``LoopFinished``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(path, source=source, secrets=secrets, recorded=recorded, closes_at_loop_end=False)
    try:
        for obs in observations:
            recorder(obs)
    finally:
        recorder.close()
    return path


@dataclass(frozen=True)
class Exported:
    """Where an export landed: the recording, and the page beside it (None with ``page_error`` when only the page
    could not be written: the recording is kept either way)."""

    recording: Path
    page: Path | None
    page_error: str | None = None


def page_path(recording: Path) -> Path:
    return recording.with_suffix(".html")


def write_recording_and_page(
    path: Path,
    observations: Iterable[O.Observation],
    source: dict[str, Any],
    secrets: Sequence[str] = (),
    recorded: Recording | None = None,
) -> Exported:
    """Write the recording, then the HTML page of it beside it (same name, ``.html``). Runs in a worker thread. The
    page is built from the written recording (already masked) and masked again with ``secrets``. ``recorded``: a
    replay's recording (see ``write_recording``): both carry its recorded times."""
    written = write_recording(path, observations, source, secrets, recorded)
    try:
        from inspector.record.htmlexport import export
        from inspector.record.recording import read_recording

        page = page_path(written)
        title = str(source.get("name") or source.get("model") or source.get("file") or "session")
        export(read_recording(written), page, secrets=list(secrets), title=title)
    except Exception as e:  # noqa: BLE001 (a full disk, a damaged line: the recording is there, the page is not; said in one line)
        return Exported(written, None, f"{type(e).__name__}: {e}")
    return Exported(written, page)

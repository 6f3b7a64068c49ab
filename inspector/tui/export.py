"""Export what the dashboard received as a recording (the same writer the loop's `--record` uses). No Textual."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from inspector.observe import observations as O
from inspector.record.recorder import Recorder


def default_export_path(directory: Path, source: dict) -> Path:
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
    path: Path, observations: Iterable[O.Observation], source: dict, secrets: Sequence[str] = ()
) -> Path:
    """Write every read (with its timing) and the observations a replay needs. Runs in a worker thread.
    ``secrets`` (the session's API key) are masked as `--record` masks them: also when split across reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(path, source=source, secrets=secrets)
    try:
        for obs in observations:
            recorder(obs)
    finally:
        recorder.close()
    return path

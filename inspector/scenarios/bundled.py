"""The bundled scenarios: one realistic demo plus one per fault people actually hit. Each is a scenario file in
``inspector/scenarios/bundled_files/`` (the format: docs/scenario-format.md), loaded at import.

``expected`` says what a headless run of the agent loop should end in:
    status            "finished" | "error" | "cancelled"
    turns             assistant turns whose stream completed (retried attempts not counted)
    requests          HTTP requests the server sees, SDK retries (429/529) and one harness retry per failed stream
    final_stop_reason stop_reason of the last completed turn
    tool_calls        [{"name", "outcome"}] for the tool_use blocks of completed turns, in order; outcome is a
                      ToolState value: "succeeded" | "failed" | "timed_out" | "not_run" (never started: invalid
                      or unterminated input)

``get_scenario(name_or_path)`` (alias ``load``) takes a bundled name or the path of a scenario file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from inspector.core.errors import UnknownScenario

from .fileformat import SUFFIXES, load_file
from .model import Pacing, Scenario

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled_files"

# listing order (`inspector scenarios`): the default demo first; files not named here come after, sorted
ORDER = (
    "parse_date",
    "weather",
    "thinking",
    "big_input",
    "exclusive_mix",
    "parallel_buffers",
    "overloaded_midstream",
    "drop_mid_json",
    "stall_with_pings",
    "invalid_json",
    "max_tokens_cut",
    "rate_limited",
    "tool_raises",
    "tool_hangs",
    "proxy_buffered",
    "server_error_retry",
    "connection_refused",
)


def realistic(**over: Any) -> Pacing:
    """Pacing close to the real API: ~0.4 s TTFB, 25-65 ms between events, a few events per read, pings, padding
    (the ``pacing`` of the realistic bundled files; for scenarios written in Python)."""
    base: dict[str, Any] = dict(
        ttfb=0.4, event_gap=0.045, jitter=0.45, events_per_read=2, ping_every=25, pad=True, block_pause=0.08
    )
    base.update(over)
    return Pacing(**base)


def fast(**over: Any) -> Pacing:
    """Short pacing for fault scenarios: the fault is the point, not the typing effect."""
    base: dict[str, Any] = dict(ttfb=0.3, event_gap=0.03, jitter=0.3, events_per_read=1, ping_every=30, pad=True)
    base.update(over)
    return Pacing(**base)


def _load_bundled() -> dict[str, Scenario]:
    files = {p.stem: p for p in BUNDLED_DIR.iterdir() if p.suffix in SUFFIXES}
    names = [n for n in ORDER if n in files] + sorted(n for n in files if n not in ORDER)
    out: dict[str, Scenario] = {}
    for name in names:
        sc = load_file(files[name])
        if sc.name != name:
            raise RuntimeError(f"bundled scenario file {files[name].name} names itself {sc.name!r}")
        out[name] = sc
    return out


SCENARIOS: dict[str, Scenario] = _load_bundled()

DEFAULT_SCENARIO = "parse_date"


def is_scenario_path(name_or_path: str | os.PathLike[str]) -> bool:
    """Whether ``--scenario`` names a file rather than a bundled scenario: a path-like object, a name ending in
    .yaml/.yml, or one with a path separator."""
    if not isinstance(name_or_path, str):
        return True
    return name_or_path.endswith(SUFFIXES) or "/" in name_or_path or os.sep in name_or_path


def get_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """A bundled scenario by name, or the scenario file at a path. Raises :class:`UnknownScenario` (an unknown
    name or a missing file) or :class:`~inspector.scenarios.fileformat.ScenarioFileError` (an invalid file, with
    file:line:column), both InspectorErrors with a one-line message."""
    if isinstance(name_or_path, str) and name_or_path in SCENARIOS:
        return SCENARIOS[name_or_path]
    if is_scenario_path(name_or_path):
        path = Path(name_or_path)
        if not path.is_file():
            raise UnknownScenario(f"no scenario file {str(path)!r}")
        return load_file(path)
    raise UnknownScenario(
        f"unknown scenario {name_or_path!r}; available: {', '.join(SCENARIOS)} (or the path of a scenario file)"
    )


load = get_scenario


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) for every bundled scenario, default first."""
    return [(s.name, s.description) for s in SCENARIOS.values()]


def __getattr__(name: str) -> Any:
    if name == "BIG_CSV":  # the big_input fixture's content (tests use it)
        return SCENARIOS["big_input"].turns[0].blocks[1].input["content"]  # type: ignore[union-attr,index]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCENARIOS", "DEFAULT_SCENARIO", "get_scenario", "load", "describe", "is_scenario_path"]

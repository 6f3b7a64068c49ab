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
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

from inspector.core.errors import UnknownScenario

from .model import Pacing, Scenario

SUFFIXES = (".yaml", ".yml")  # fileformat.SUFFIXES (fileformat, and pydantic, are imported when a file is loaded)

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


def load_file(path: str | Path) -> Scenario:
    from .fileformat import load_file as load

    return load(path)


class _Bundled(MutableMapping[str, Scenario]):
    """The bundled scenarios by name, in listing order. Each file is loaded (and checked) the first time it is asked
    for: listing them (`inspector scenarios`) or running one loads no other. Tests may set and delete entries."""

    def __init__(self) -> None:
        files = {p.stem: p for p in BUNDLED_DIR.iterdir() if p.suffix in SUFFIXES}
        names = [n for n in ORDER if n in files] + sorted(n for n in files if n not in ORDER)
        self.files: dict[str, Path] = {n: files[n] for n in names}
        self._names: list[str] = names
        self._loaded: dict[str, Scenario] = {}

    def __getitem__(self, name: str) -> Scenario:
        sc = self._loaded.get(name)
        if sc is None:
            path = self.files[name]  # KeyError: not a bundled scenario
            sc = load_file(path)
            if sc.name != name:
                raise RuntimeError(f"bundled scenario file {path.name} names itself {sc.name!r}")
            self._loaded[name] = sc
        return sc

    def __setitem__(self, name: str, sc: Scenario) -> None:
        if name not in self._names:
            self._names.append(name)
        self._loaded[name] = sc

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._loaded.pop(name, None)
        self.files.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def description(self, name: str) -> str:
        """The one-line description, read without loading (checking) the whole file when it is not loaded yet."""
        if name in self._loaded or name not in self.files:
            return self[name].description
        import yaml

        with self.files[name].open(encoding="utf-8") as fh:
            for line in fh:  # the files put `description:` near the top, on one line
                if line.startswith("description:"):
                    value = yaml.load(line, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                    description = value.get("description") if isinstance(value, dict) else None
                    if isinstance(description, str):
                        return description
        return self[name].description


SCENARIOS: MutableMapping[str, Scenario] = _Bundled()

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
        if not path.exists():  # (a folder, a FIFO, a device: load_file refuses it and says what it is)
            raise UnknownScenario(f"no scenario file {str(path)!r}")
        return load_file(path)
    import difflib  # (the error's path only: listing and loading scenarios stay light)

    close = difflib.get_close_matches(str(name_or_path), list(SCENARIOS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownScenario(
        f"unknown scenario {name_or_path!r}{hint}; available: {', '.join(SCENARIOS)} (or the path of a scenario file)"
    )


load = get_scenario


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) for every bundled scenario, default first (without loading the files)."""
    bundled = SCENARIOS
    if isinstance(bundled, _Bundled):
        return [(name, bundled.description(name)) for name in bundled]
    return [(name, sc.description) for name, sc in bundled.items()]


def __getattr__(name: str) -> Any:
    if name == "BIG_CSV":  # the big_input fixture's content (tests use it)
        return SCENARIOS["big_input"].turns[0].blocks[1].input["content"]  # type: ignore[union-attr,index]  # the fixture's block 1: a tool_use with an input
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCENARIOS", "DEFAULT_SCENARIO", "get_scenario", "load", "describe", "is_scenario_path"]

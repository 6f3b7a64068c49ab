"""Scripted conversations served by an in-process fake Messages API, through the real anthropic SDK.

    from inspector.scenarios.bundled import get_scenario
    from inspector.scenarios.transport import ScenarioServer, make_client
    server = ScenarioServer(get_scenario("parse_date"), Pacer(2.0))
    client = make_client(server)

Scenarios are files (docs/scenario-format.md): ``load(name_or_path)`` gives a bundled scenario by name or the
scenario file at a path (the same as ``get_scenario``).

Names are imported on first use (PEP 562), so `inspector scenarios` lists the scenarios without importing the SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "bundled": ("DEFAULT_SCENARIO", "SCENARIOS", "describe", "get_scenario", "is_scenario_path", "load"),
    "fileformat": ("Problem", "ScenarioFileError", "check_file", "dump_scenario", "load_file"),
    "model": (
        "Block",
        "DropAfter",
        "ErrorEventAfter",
        "Fault",
        "HttpError",
        "InvalidToolJson",
        "MaxTokensCut",
        "Pacing",
        "RedactedThinkingBlock",
        "Scenario",
        "ServerToolUseBlock",
        "SimulatedTool",
        "Sizes",
        "StallWithPings",
        "ToolCase",
        "TextBlock",
        "ThinkingBlock",
        "ToolUseBlock",
        "TurnScript",
        "Usage",
        "WholeBlock",
    ),
    "render": (
        "PlannedRead",
        "ResponsePlan",
        "expected_blocks",
        "expected_stop_reason",
        "render_turn",
        "render_turn_events",
    ),
    "transport": ("DROP_MESSAGE", "RecordedRequest", "ScenarioServer", "ServedResponse", "drop_error", "make_client"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __dir__() -> list[str]:
    return sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

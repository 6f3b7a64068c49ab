"""Scenario files: the bundled scenarios are files that render byte for byte what their Python definitions did, the
format round-trips, and `get_scenario` / `load` take a path."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import pytest

from inspector.core.errors import InspectorError, UnknownScenario
from inspector.scenarios import load
from inspector.scenarios.bundled import BUNDLED_DIR, SCENARIOS, get_scenario
from inspector.scenarios.fileformat import dump_scenario, load_file, load_text
from inspector.scenarios.model import Scenario
from inspector.scenarios.render import render_turn
from inspector.testing import scenarios_legacy as legacy
from inspector.testing.digests import ATTEMPTS, plan_digest

FROZEN = json.loads((Path(__file__).parent / "fixtures" / "bundled_render_sha256.json").read_text())
# The digests are the Python definitions' bytes (inspector/testing/scenarios_legacy.py, and the Python definitions of
# server_error_retry and connection_refused that the files replaced), rendered by the current renderer: every
# message_delta carries the input and cache usage since issue 11. parse_date turn 0 changed on purpose (issue 13:
# a test run beside the reads); its digests are the file's.
CHANGED_ON_PURPOSE: set[tuple[str, int]] = {("parse_date", 0)}

TOOL_FIELDS = ("extra_tools", "simulated_tools", "tool_timeouts", "tool_durations", "source_path")


def test_every_bundled_file_is_a_scenario():
    files = sorted(p.stem for p in BUNDLED_DIR.glob("*.yaml"))
    assert files == sorted(SCENARIOS) == sorted(FROZEN)
    for name, sc in SCENARIOS.items():
        assert sc.source_path == str(BUNDLED_DIR / f"{name}.yaml")


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_bundled_file_renders_the_frozen_bytes(name):
    sc = get_scenario(name)
    assert len(sc.turns) == len(FROZEN[name])
    for t in range(len(sc.turns)):
        for a in range(ATTEMPTS):
            assert plan_digest(render_turn(sc, t, a)) == FROZEN[name][t][a], (name, t, a)


@pytest.mark.parametrize("name", sorted(legacy.SCENARIOS))
def test_bundled_file_equals_its_python_definition(name):
    old, new = legacy.SCENARIOS[name], SCENARIOS[name]
    for f in dataclasses.fields(Scenario):
        if f.name in TOOL_FIELDS or (name, 0) in CHANGED_ON_PURPOSE and f.name in ("turns", "description", "expected"):
            continue
        assert getattr(new, f.name) == getattr(old, f.name), f.name
    # the Python tools became simulated tools: same names, definitions, timeouts
    old_defs = {t.name: t.definition() for t in old.extra_tools}
    new_tools = new.resolve_tools(new.workspace_path)
    for tname, d in old_defs.items():
        assert new_tools[tname].definition() == d
        assert new_tools[tname].timeout == old.tool_timeouts.get(tname)
    for t in range(len(old.turns)):
        if (name, t) in CHANGED_ON_PURPOSE:
            continue
        for a in range(ATTEMPTS):
            assert render_turn(new, t, a).body == render_turn(old, t, a).body


def test_simulated_tools_answer_like_the_python_ones():
    weather = SCENARIOS["weather"].resolve_tools(None)["get_weather"]
    for args in ({"location": "Paris, France"}, {"location": "London, UK"}, {"location": "Tokyo, Japan"}):
        assert asyncio.run(weather.fn(args)) == legacy._get_weather(args)
    raises = SCENARIOS["tool_raises"].resolve_tools(SCENARIOS["tool_raises"].workspace_path)["run_tests"]
    with pytest.raises(RuntimeError) as new_err:
        asyncio.run(raises.fn({"select": "tests"}))
    with pytest.raises(RuntimeError) as old_err:
        legacy._run_tests({"select": "tests"})
    assert str(new_err.value) == str(old_err.value)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_dump_then_load_is_the_same_scenario(name, tmp_path):
    sc = SCENARIOS[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_scenario(sc), encoding="utf-8")
    again = load_file(path)
    assert dataclasses.replace(again, source_path=None) == dataclasses.replace(sc, source_path=None)


def test_get_scenario_and_load_take_a_path(tmp_path, monkeypatch):
    path = tmp_path / "mine.yaml"
    path.write_text(dump_scenario(dataclasses.replace(SCENARIOS["weather"], name="mine")), encoding="utf-8")
    assert get_scenario(str(path)).name == "mine"
    assert load(path).name == "mine"
    monkeypatch.chdir(tmp_path)
    assert get_scenario("mine.yaml").name == "mine"  # relative to the working directory
    with pytest.raises(UnknownScenario, match="no scenario file"):
        get_scenario("missing.yaml")
    with pytest.raises(UnknownScenario, match="available: parse_date"):
        get_scenario("no_such_scenario")
    (tmp_path / "bad.yaml").write_text("version: 1\nname: x\n", encoding="utf-8")
    with pytest.raises(InspectorError) as err:
        get_scenario("bad.yaml")
    assert str(err.value).startswith("bad.yaml:") and "\n" not in str(err.value)


def test_name_defaults_to_the_file_stem_and_workspace_may_be_relative(tmp_path):
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / "a.txt").write_text("hello", encoding="utf-8")
    path = tmp_path / "hello.yaml"
    path.write_text(
        "version: 1\ndescription: d\nprompt: p\nworkspace: proj\ntools: [read_file]\n"
        "turns:\n- blocks:\n  - {tool_use: read_file, input: {path: a.txt}}\n  stop_reason: tool_use\n"
        "- blocks: [{text: done}]\n",
        encoding="utf-8",
    )
    sc = load_file(path)
    assert sc.name == "hello" and sc.workspace_path == ws.resolve()
    result = sc.resolve_tools(sc.workspace_path)["read_file"].fn({"path": "a.txt"})  # the real built-in
    assert "hello" in str(result)


def test_load_text_without_a_path_needs_a_name():
    with pytest.raises(InspectorError, match="missing required key 'name'"):
        load_text("version: 1\ndescription: d\nprompt: p\nturns: [{blocks: [{text: hi}]}]\n")


# --- the published JSON Schema ----------------------------------------------------------------------------------

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "scenario.schema.json"


def _valid(value, schema: dict, root: dict, where: str = "$") -> list[str]:
    """A small validator for the JSON Schema subset docs/scenario.schema.json uses (no dependency)."""
    if "$ref" in schema:
        return _valid(value, root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, where)
    errors: list[str] = []
    if "anyOf" in schema:
        if all(_valid(value, s, root, where) for s in schema["anyOf"]):
            errors.append(f"{where}: matches none of anyOf")
        return errors
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in enum")
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "null": lambda v: v is None,
        }
        if not any(checks[n](value) for n in names):
            return [f"{where}: {value!r} is not {types}"]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < schema.get("minimum", -math.inf):
        errors.append(f"{where}: below minimum")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing {key}")
        for key, v in value.items():
            if key in props:
                errors += _valid(v, props[key], root, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected {key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            errors.append(f"{where}: wrong number of items")
        for i, v in enumerate(value):
            errors += _valid(v, schema.get("items", {}), root, f"{where}[{i}]")
    return errors


def test_the_published_schema_is_the_loaders():
    from inspector.scenarios.fileformat import json_schema

    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == json_schema()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_bundled_files_and_the_template_match_the_schema(name):
    import yaml

    from inspector.scenarios.template import template

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    data = yaml.safe_load((BUNDLED_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    assert _valid(data, schema, schema) == []
    assert _valid(yaml.safe_load(template("x")), schema, schema) == []


def test_the_schema_rejects_what_the_loader_rejects():
    import yaml

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    data = yaml.safe_load((BUNDLED_DIR / "weather.yaml").read_text(encoding="utf-8"))
    for path, value in (
        (("turns", 0, "pacing", "ttfb"), "fast"),
        (("turns", 0, "pacing", "ttfbb"), 1),
        (("turns", 0, "faults"), [{"type": "drop_afterr", "n_events": 1}]),
        (("turns", 0, "blocks", 0, "chunk"), 0),
        (("tools", 0, "duration"), "slow"),
        (("version",), 2),
    ):
        broken = json.loads(json.dumps(data))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert _valid(broken, schema, schema), path

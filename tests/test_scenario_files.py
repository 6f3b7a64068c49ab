"""Scenario files: the bundled scenarios are files that render byte for byte what their Python definitions did, the
format round-trips, and `get_scenario` / `load` take a path."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from inspector.core.errors import InspectorError, UnknownScenario
from inspector.scenarios import load
from inspector.scenarios.bundled import BUNDLED_DIR, SCENARIOS, get_scenario
from inspector.scenarios.fileformat import dump_scenario, load_file, load_text
from inspector.scenarios.model import Scenario
from inspector.scenarios.render import render_turn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from freeze_scenarios import ATTEMPTS, plan_digest  # noqa: E402

import scenarios_legacy as legacy  # noqa: E402

FROZEN = json.loads((Path(__file__).parent / "fixtures" / "bundled_render_sha256.json").read_text())
# parse_date turn 0 changed on purpose (issue 13: a test run beside the reads); its frozen digests are the new ones
# (tools/freeze_scenarios.py), every other turn's digest was frozen from the Python definitions.
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

"""Scenario files: the bundled scenarios are files that render byte for byte what their Python definitions did, the
format round-trips, and `get_scenario` / `load` take a path."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from inspector.core.errors import InspectorError, UnknownScenario
from inspector.scenarios import load
from inspector.scenarios.bundled import BUNDLED_DIR, SCENARIOS, get_scenario
from inspector.scenarios.fileformat import dump_scenario, load_file, load_text
from inspector.scenarios.render import render_turn
from inspector.testing.digests import ATTEMPTS, plan_digest

FROZEN = json.loads((Path(__file__).parent / "fixtures" / "bundled_render_sha256.json").read_text())
# The digests are the bytes of the Python definitions the files replaced (the migration scaffold that held them is
# gone: these digests pin them), rendered by the current renderer: every message_delta carries the input and cache
# usage since issue 11. parse_date turn 0 changed on purpose (issue 13: a test run beside the reads); its digests are
# the file's.


def test_every_bundled_file_is_a_scenario() -> None:
    files = sorted(p.stem for p in BUNDLED_DIR.glob("*.yaml"))
    assert files == sorted(SCENARIOS) == sorted(FROZEN)
    for name, sc in SCENARIOS.items():
        assert sc.source_path == str(BUNDLED_DIR / f"{name}.yaml")


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_bundled_file_renders_the_frozen_bytes(name: str) -> None:
    sc = get_scenario(name)
    assert len(sc.turns) == len(FROZEN[name])
    for t in range(len(sc.turns)):
        for a in range(ATTEMPTS):
            assert plan_digest(render_turn(sc, t, a)) == FROZEN[name][t][a], (name, t, a)


def _run(call: object) -> Any:
    """Runs what a simulated tool's fn returned: a coroutine (ToolSpec.fn may be sync; these tools are async)."""
    assert inspect.iscoroutine(call), call
    return asyncio.run(call)


def test_simulated_tools_answer_what_the_python_tools_did() -> None:
    """The Python tools the files replaced (get_weather, run_tests) answered exactly this."""
    weather = SCENARIOS["weather"].resolve_tools(None)["get_weather"]
    assert weather.definition()["input_schema"]["required"] == ["location"]
    for args, temperature, conditions in (
        ({"location": "Paris, France"}, 18, "partly cloudy"),
        ({"location": "London, UK"}, 14, "light rain"),
        ({"location": "Tokyo, Japan"}, 24, "clear"),
    ):
        assert _run(weather.fn(args)) == {
            "location": args["location"],
            "temperature": temperature,
            "unit": "celsius",
            "conditions": conditions,
        }
    raises = SCENARIOS["tool_raises"].resolve_tools(SCENARIOS["tool_raises"].workspace_path)["run_tests"]
    with pytest.raises(RuntimeError) as err:
        _run(raises.fn({"select": "tests"}))
    assert str(err.value) == (
        "pytest could not start: ImportError while loading conftest (ModuleNotFoundError: No module named 'src')"
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_dump_then_load_is_the_same_scenario(name: str, tmp_path: Path) -> None:
    sc = SCENARIOS[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_scenario(sc), encoding="utf-8")
    again = load_file(path)
    assert dataclasses.replace(again, source_path=None) == dataclasses.replace(sc, source_path=None)


def test_get_scenario_and_load_take_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_name_defaults_to_the_file_stem_and_workspace_may_be_relative(tmp_path: Path) -> None:
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


def test_load_text_without_a_path_needs_a_name() -> None:
    with pytest.raises(InspectorError, match="missing required key 'name'"):
        load_text("version: 1\ndescription: d\nprompt: p\nturns: [{blocks: [{text: hi}]}]\n")


# --- the published JSON Schema ----------------------------------------------------------------------------------

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "scenario.schema.json"


def _validator() -> Any:  # (a jsonschema Draft202012Validator: jsonschema is imported only if installed)
    jsonschema = pytest.importorskip("jsonschema")  # the `test` extra installs it
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_published_schema_is_generated_and_cannot_drift(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/scenario.schema.json is `inspector scenario schema`, byte for byte (regenerate it with that command)."""
    from inspector.cli import main
    from inspector.scenarios.fileformat import json_schema

    assert main(["scenario", "schema"]) == 0
    assert capsys.readouterr().out == SCHEMA_PATH.read_text(encoding="utf-8")
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == json_schema()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_bundled_files_and_the_template_match_the_schema(name: str) -> None:
    import yaml

    from inspector.scenarios.template import template

    validator = _validator()
    data = yaml.safe_load((BUNDLED_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    assert [e.message for e in validator.iter_errors(data)] == []
    assert [e.message for e in validator.iter_errors(yaml.safe_load(template("x")))] == []


SCHEMA_REJECTS = [
    (("turns", 0, "pacing", "ttfb"), "fast"),
    (("turns", 0, "pacing", "ttfb"), 1e12),
    (("turns", 0, "pacing", "ttfbb"), 1),
    (("turns", 0, "faults"), [{"type": "drop_afterr", "n_events": 1}]),
    (("turns", 0, "faults"), [{"type": "stall_with_pings", "pings": 10**9}]),
    (("turns", 0, "blocks", 0, "chunk"), 0),
    (("turns", 0, "blocks", 0, "chunk"), 10**12),
    (("turns", 0, "stop_reason"), "tool_usee"),
    (("turns", 0, "usage"), {"input_tokens": 10**32}),
    (("turns", 0, "http_errors"), [{"status": 99999}]),
    (("turns", 0, "http_errors"), [{"status": -1}]),
    (("tools", 0, "duration"), "slow"),
    (("tools", 0, "duration"), 1e12),
    (("name",), "../../x"),
    (("name",), "a/b"),
    (("seed",), 2**64),
    (("version",), 2),
]


@pytest.mark.parametrize(("path", "value"), SCHEMA_REJECTS, ids=[f"{p[-1]}={str(v)[:12]}" for p, v in SCHEMA_REJECTS])
def test_the_schema_and_the_loader_reject_the_same(path: tuple[str | int, ...], value: Any, tmp_path: Path) -> None:
    import yaml

    validator = _validator()
    data = yaml.safe_load((BUNDLED_DIR / "weather.yaml").read_text(encoding="utf-8"))
    assert [e.message for e in validator.iter_errors(data)] == []
    broken = json.loads(json.dumps(data))
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(validator.iter_errors(broken)), path
    file = tmp_path / "broken.yaml"
    file.write_text(yaml.safe_dump(broken), encoding="utf-8")
    with pytest.raises(InspectorError):
        load_file(file)


def test_the_file_declaration_has_the_models_fields() -> None:
    """The flat parts of the file (pacing, usage, HTTP errors, faults) are the model's dataclasses, key for key: a
    field added to one and not the other fails here, not in a user's file."""
    from inspector.scenarios import filemodel as F
    from inspector.scenarios import model as M

    pairs: list[tuple[type[BaseModel], type]] = [
        (F.PacingFile, M.Pacing),
        (F.UsageFile, M.Usage),
        (F.HttpErrorFile, M.HttpError),
    ]
    pairs += [(F.FAULT_FILES[name], cls) for name, cls in F.fault_types().items()]
    assert sorted(F.FAULT_FILES) == sorted(F.fault_types())
    for file_model, cls in pairs:
        fields = [f.name for f in dataclasses.fields(cls) if f.init]
        assert [k for k in file_model.model_fields if k != "type"] == fields, cls.__name__

"""A recording's tool_result with a tool_use_id that is not a string (a list, an object...) is a named warning and a
visible failed call in the replay, never `TypeError: unhashable type: 'list'` (issue 18 §4)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.core.pacing import Pacer
from inspector.record.har import load_any
from inspector.record.replay import recorded_tools
from inspector.testing.hyp import examples

ID = re.compile(rb'"tool_use_id":"(toolu_[A-Za-z0-9_]+)"')


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    p = tmp_path_factory.mktemp("rec") / "weather.jsonl"
    assert main(["run", "--headless", "--json", "--scenario", "weather", "--speed", "max", "--record", str(p)]) == 0
    data = p.read_bytes()
    assert ID.search(data)
    return data


def with_id(data: bytes, value: object) -> bytes:
    return ID.sub(lambda m: b'"tool_use_id":' + orjson.dumps(value), data)


def test_replay_headless_json_with_a_list_tool_use_id(
    weather: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(with_id(weather, ["toolu_x"]))
    capsys.readouterr()
    code = main(["replay", str(p), "--headless", "--json", "--speed", "max"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "TypeError" not in out + err
    lines = [orjson.loads(x) for x in out.splitlines()]
    failed = [o for o in lines if o.get("type") == "tool_state" and o.get("state") == "failed"]
    assert failed and "tool_use_id is list" in failed[0]["error"] and "not a string" in failed[0]["error"]
    assert code in (0, 1)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=6,
)


@given(value=JSON)
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_recorded_tools_accepts_any_tool_use_id_shape(
    weather: bytes, tmp_path_factory: pytest.TempPathFactory, value: Any
) -> None:
    p = tmp_path_factory.mktemp("shape") / "r.jsonl"
    p.write_bytes(with_id(weather, value))
    rec = load_any(p)
    tools, _ = recorded_tools(rec, Pacer(math.inf))
    assert "get_weather" in tools
    if not isinstance(value, str):
        assert any("tool_use_id is" in w and "not a string" in w for w in rec.warnings)

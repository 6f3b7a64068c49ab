"""without_cache_marks (stream/history.py): the one rule by which the proxy's conversation grouping and the cache
verdict leave ``cache_control`` marks out of what they compare."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.stream.history import without_cache_marks
from inspector.testing.hyp import examples

KEYS = st.sampled_from(["cache_control", "type", "text", "content", "x"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=30,
)


def _reference(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reference(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_reference(v) for v in value]
    return value


@given(JSON)
@settings(max_examples=examples(300), deadline=None)
def test_every_mark_is_left_out_and_nothing_else(value: Any) -> None:
    got = without_cache_marks(value)
    assert got == _reference(value)
    assert list(_reference(value)) == list(got) if isinstance(value, dict) else True  # (key order kept)


def test_any_depth_a_json_parser_gives() -> None:
    deep: Any = {"type": "text", "text": "end", "cache_control": {"type": "ephemeral"}}
    for _ in range(5000):
        deep = {"role": "user", "content": [deep], "cache_control": {"type": "ephemeral"}}
    out = without_cache_marks(deep)
    for _ in range(5000):
        assert "cache_control" not in out
        out = out["content"][0]
    assert out == {"type": "text", "text": "end"}

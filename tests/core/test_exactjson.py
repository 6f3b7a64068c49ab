"""core.exactjson: orjson's speed and errors, with integers of any size kept exact."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.core import exactjson

BIG = st.one_of(st.integers(min_value=2**64), st.integers(max_value=-(2**63) - 1))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), BIG, st.floats(allow_nan=False, allow_infinity=False), st.text()
)
values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4))
)


@given(values)
def test_any_value_round_trips_exactly(value) -> None:
    assert exactjson.loads(exactjson.dumps(value)) == value
    assert exactjson.loads(json.dumps(value)) == value
    assert exactjson.loads(json.dumps(value).encode()) == value


@given(values)
def test_where_orjson_can_it_is_orjson(value) -> None:
    try:
        expected = orjson.dumps(value)
    except TypeError:
        return  # an integer beyond 64 bits: covered above
    assert exactjson.dumps(value) == expected
    assert exactjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) == orjson.dumps(
        value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    )


def test_integers_orjson_would_turn_into_floats_stay_integers() -> None:
    text = '{"a": 123456789012345678901234567890, "b": [-98765432109876543210], "c": 18446744073709551615}'
    assert type(orjson.loads(text)["a"]) is float  # what this module is for
    got = exactjson.loads(text)
    assert got == {"a": 123456789012345678901234567890, "b": [-98765432109876543210], "c": 18446744073709551615}
    assert (
        exactjson.dumps(got)
        == b'{"a":123456789012345678901234567890,"b":[-98765432109876543210],"c":18446744073709551615}'
    )


def test_long_digit_runs_in_strings_and_floats_read_the_same() -> None:
    text = '{"id": "12345678901234567890123", "x": 1.2345678901234567890123}'
    assert exactjson.loads(text) == orjson.loads(text)


@pytest.mark.parametrize("bad", ['{"a": 1', '{"a": NaN, "n": 12345678901234567890123}', b"\xff", ""])
def test_invalid_json_raises_orjsons_error(bad) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        exactjson.loads(bad)


def test_what_orjson_refuses_is_refused_with_its_error() -> None:
    with pytest.raises(orjson.JSONEncodeError):
        exactjson.dumps({"a": 2**70, "s": "\ud800"})  # a lone surrogate
    with pytest.raises(orjson.JSONEncodeError):
        exactjson.dumps({"a": 2**70, "o": object()})
    assert (
        exactjson.dumps({"a": 2**70, "o": object()}, default=lambda o: "obj")
        == b'{"a":1180591620717411303424,"o":"obj"}'
    )


@pytest.mark.parametrize("depth", [500, 1000])
def test_deep_nesting_with_a_long_number_never_raises(depth) -> None:
    """Deeper than the standard library's recursion allows, orjson's value (the number as a float) is kept."""
    got = exactjson.loads("[" * depth + "12345678901234567890123" + "]" * depth)
    for _ in range(depth):
        (got,) = got
    assert float(got) == 12345678901234567890123.0

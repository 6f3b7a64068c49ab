"""core.exactjson: orjson's speed and errors, with integers of any size kept exact."""

from __future__ import annotations

import json
import re
from typing import Any

import jiter
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
def test_any_value_round_trips_exactly(value: Any) -> None:
    assert exactjson.loads(exactjson.dumps(value)) == value
    assert exactjson.loads(json.dumps(value)) == value
    assert exactjson.loads(json.dumps(value).encode()) == value


@given(values)
def test_where_orjson_can_it_is_orjson(value: Any) -> None:
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
def test_invalid_json_raises_orjsons_error(bad: str | bytes) -> None:
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


@pytest.mark.parametrize("depth", [500, 1000, 1024])
def test_deep_nesting_with_a_long_number_is_exact_as_deep_as_orjson_reads(depth: int) -> None:
    """As deep as orjson reads (1,024 levels), a big integer is kept exact: the standard library's second reading
    runs with a raised recursion limit (from ~990 levels it raised RecursionError and the float was kept), and the
    limit is the caller's again afterwards."""
    import sys

    before = sys.getrecursionlimit()
    got = exactjson.loads("[" * depth + "12345678901234567890123" + "]" * depth)
    for _ in range(depth):
        (got,) = got
    assert got == 12345678901234567890123 and type(got) is int
    assert sys.getrecursionlimit() == before


@pytest.mark.parametrize("indent", [0, orjson.OPT_INDENT_2])
def test_a_value_as_deep_as_orjson_reads_is_written(indent: int) -> None:
    """1,023 levels (orjson reads 1,024, writes 255): the standard library writes it, from a caller already some
    frames deep (a server's or a dashboard's stack); it raised RecursionError past ~990 levels."""
    import sys

    text = '{"a": ' + "[" * 1022 + "1" + "]" * 1022 + "}"
    value = orjson.loads(text)
    before = sys.getrecursionlimit()

    def nested(k: int) -> bytes:
        return exactjson.dumps(value, option=indent) if k == 0 else nested(k - 1)

    out = nested(300)
    assert sys.getrecursionlimit() == before
    assert out.replace(b" ", b"").replace(b"\n", b"") == text.replace(" ", "").encode()


# ------------------------------------------------------------------------------------ the contract, case by case
# Where a one-pass parser that keeps big integers (jiter, the SDK's) differs from orjson, exactjson is orjson: each
# case below fails for `jiter.from_json(data, allow_inf_nan=False)` used as `loads` (tests/core: see the module doc).
@pytest.mark.parametrize(
    "bad",
    [
        "1e400",  # jiter: inf (which orjson would then write as null: a silent distortion)
        "-1e400",
        '{"x": 1E400}',
        "1" + "0" * 400 + ".5",
        '"\\ud800"',  # a lone surrogate escape
        '"\\udc00x"',
        "NaN",
        "[Infinity]",
        "-Infinity",
        "[" * 1100 + "]" * 1100,  # deeper than orjson's limit
        b"\xff",
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
        b"\xef\xbb\xbf{}",  # a BOM
        "",
        " ",
        "1 2",
        '{"a":1}}',
        "[1,]",
        "01",
        # an integer beyond a double's range is read (below), but not with any of the above beside it
        "[1" + "0" * 400 + ", NaN]",
        "[1" + "0" * 400 + ", 1e400]",
        "[1" + "0" * 400 + ', "\\ud800"]',
        "[1" + "0" * 400 + ",",
        "[-1" + "0" * 400 + "]]",
    ],
)
def test_what_orjson_refuses_loads_refuses_with_orjsons_error(bad: str | bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError) as got:
        exactjson.loads(bad)
    with pytest.raises(orjson.JSONDecodeError) as want:
        orjson.loads(bad)
    assert (got.value.msg, got.value.pos) == (want.value.msg, want.value.pos)  # the same message and position


@pytest.mark.parametrize("depth", [201, 300, 1000])
def test_nesting_orjson_allows_is_read_where_jiter_stops_at_200(depth: int) -> None:
    def inner(v: Any) -> Any:
        for _ in range(depth):
            (v,) = v
        return v

    assert inner(exactjson.loads("[" * depth + "1" + "]" * depth)) == 1
    big = inner(exactjson.loads("[" * depth + "12345678901234567890123" + "]" * depth))
    assert big == 12345678901234567890123 and type(big) is int


def test_duplicate_keys_surrogate_pairs_and_nul_read_as_orjson_does() -> None:
    for text in (
        '{"a":1,"a":2}',
        '"\\ud83d\\ude00"',
        '"\\u0000"',
        "-0",
        "1.5e-400",
        "[1e308]",
        '{"a":"1234567890123456789"}',
    ):
        assert exactjson.loads(text) == orjson.loads(text)
        assert exactjson.loads(text.encode()) == orjson.loads(text)


def test_digits_of_other_scripts_never_count_as_a_long_run() -> None:
    text = '{"n": "' + "\u0661" * 30 + '", "x": 1.5}'  # Arabic-Indic digits: never a JSON number
    assert not exactjson.has_long_digit_run(text)
    assert exactjson.loads(text) == orjson.loads(text)


@given(st.one_of(st.binary(max_size=80), st.text(st.sampled_from("0123456789 a.-e\u0661\ud800"), max_size=80)))
def test_the_digit_run_scan_is_a_regex_search(data: str | bytes) -> None:
    want = re.search(rb"[0-9]{19}", data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    assert exactjson.has_long_digit_run(data) is (want is not None)
    if isinstance(data, bytes):
        assert exactjson.has_long_digit_run(bytearray(data)) is (want is not None)


@given(values)
def test_differential_with_jiter_where_both_read_it(value: Any) -> None:
    """The SDK parses with jiter: on every value both can read, exactjson gives what jiter gives (big integers
    exact, floats to the same double, the same strings)."""
    data = json.dumps(value).encode()
    assert exactjson.loads(data) == jiter.from_json(data, allow_inf_nan=False)


@pytest.mark.parametrize("digits", [309, 310, 400, 4300])
def test_integers_beyond_a_doubles_range_are_read_exact_as_the_sdk_reads_them(digits: int) -> None:
    """orjson refuses an integer of more than ~309 digits ("number is infinity when parsed as double"), where the
    SDK's jiter and the standard library read it: a recording holding one in a request body could not be read back
    by this tool ("not valid JSON, skipped"), nor a tool input parsed. Read exact, written back the same."""
    big = int("9" * digits)
    text = f'{{"input": {{"n": {big}, "m": [-{big}, 1.5, "x"]}}}}'
    value = exactjson.loads(text)
    assert value == json.loads(text) == {"input": {"n": big, "m": [-big, 1.5, "x"]}}
    assert exactjson.dumps(value) == text.replace(" ", "").encode()
    # past Python's own limit on integer text (4,300 digits: its guard against quadratic conversion), refused
    with pytest.raises(orjson.JSONDecodeError):
        exactjson.loads("[" + "9" * 4301 + "]")

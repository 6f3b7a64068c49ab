"""The C-speed precheck of ``redact`` (``json_clean``): a value in which no secret can occur is returned as it is,
without the walk; everything else is walked. The precheck path must give what the walk gives, for any JSON value and
any secrets (quotes, backslashes, control characters, unicode), with secrets as they are, JSON-escaped, ``\\u``-escaped,
in keys, nested."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.core import redaction as R
from inspector.core.redaction import REDACTED, json_clean, json_text_clean, redact

KEY = "sk-ant-api03-precheck-canary-0123456789"


def _walk(value: Any, secrets: list[str]) -> Any:
    return R._redact(value, secrets)


def _u_escaped(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in s)


def _norm(value: Any) -> Any:
    """Tuples as lists (the walk gives lists for tuples; the precheck keeps a clean value as it is)."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    return value


# --- the contract: canaries -------------------------------------------------------------------------------------


def test_a_clean_value_comes_back_as_the_same_object() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello\nworld \u00e9 \U0001f600"}], "n": [1, 2.5]}
    assert redact(body, [KEY]) is body  # (the walk made a copy: this failed before the precheck)
    assert redact([body], [KEY])[0] is body


@pytest.mark.parametrize(
    "value",
    [
        {"content": f"the key is {KEY}!"},
        {KEY: 1},
        {"a": [{"b": [f"x{KEY}"]}]},
        {"a": _u_escaped(KEY)},
        {"a": "prefix " + _u_escaped(KEY[:5]) + KEY[5:]},
        {"a": {"b": "\\\\" + _u_escaped(KEY)}},
        {"tool": {"arguments": json.dumps({"k": KEY})}},
        ["ok", ("tuple", KEY)],
    ],
)
def test_canaries_are_masked(value: Any) -> None:
    out = redact(value, [KEY])
    text = orjson.dumps(out).decode()
    assert KEY not in text and KEY not in R._unescape(R._unescape(text))
    assert REDACTED in text
    assert out == _walk(value, [KEY])


@pytest.mark.parametrize(
    "secret",
    [
        'quote"inside-secret',
        "back\\slash-secret",
        "tab\there-secret",
        "unicode-\u00e9\u4e2d-secret",
        "\U0001f600emoji-key",
    ],
)
def test_secrets_of_any_characters(secret: str) -> None:
    value = {"a": [f"x{secret}y", json.dumps(secret, ensure_ascii=False), {secret: "v"}, _u_escaped(secret)], "c": "x"}
    out = redact(value, [secret])
    assert out == _walk(value, [secret])
    assert all(secret not in s for s in (out["a"][0], *out["a"][2]))
    assert json.loads(out["a"][1]) != secret


def test_values_orjson_cannot_write_are_walked() -> None:
    value = {"b": KEY.encode(), "big": 2**70, 1: KEY, "s": f"{KEY}"}
    assert not json_clean(value, [KEY])
    out = redact(value, [KEY])
    assert out == {"b": REDACTED.encode(), "big": 2**70, 1: REDACTED, "s": REDACTED}

    class Sub(str):
        pass

    sub = {"x": Sub("plain text")}
    assert not json_clean(sub, [KEY])  # (a subclass: not looked into by the precheck)
    assert redact(sub, [KEY]) == sub


@pytest.mark.parametrize("depth", [253, 254, 300])
def test_a_value_nested_past_orjsons_limit_is_walked_not_called_clean(depth: int) -> None:
    """orjson refuses to write more than 254 levels: the precheck must then say "may hold a secret" (the walk
    decides), never "clean", whether the secret sits at the bottom, in a key, or JSON-escaped there."""
    for leaf in (KEY, {KEY: 1}, _u_escaped(KEY)):
        value: Any = [leaf]
        for _ in range(depth):
            value = [value]
        out = redact(value, [KEY])
        for _ in range(depth):
            out = out[0]
        assert out == [REDACTED] or out == [{REDACTED: 1}], (depth, out)


def test_a_backslash_with_no_secret_stays_clean() -> None:
    value = {"code": "print('a\\nb')", "path": "C:\\Users\\x", "esc": "\\u0041\\u0042"}
    assert json_clean(value, [KEY])
    assert redact(value, [KEY]) is value


def test_a_string_ending_in_a_backslash_does_not_hide_the_next_one() -> None:
    value = ["end\\", _u_escaped(KEY)]
    assert not json_clean(value, [KEY])
    assert redact(value, [KEY]) == ["end\\", REDACTED]


def test_json_text_clean_agrees_with_json_clean() -> None:
    for value in ({"a": "b"}, {"a": KEY}, {"a": _u_escaped(KEY)}, ["x\\y"]):
        assert json_text_clean(orjson.dumps(value), [KEY]) == json_clean(value, [KEY])
    assert json_text_clean(b'{"a":1}', [])


# --- the property: precheck path == walk path ------------------------------------------------------------------

_chars = st.characters(codec="utf-8")  # (no lone surrogates: orjson and UTF-8 refuse them)
_secret = st.one_of(
    st.text(_chars, min_size=8, max_size=16),
    st.text(st.sampled_from('ab"\\\n\t\u00e9\u4e2d-'), min_size=8, max_size=12),
    st.sampled_from([KEY, "sk-test-0000000000000000", 'we"ird\\key', "uni\u00e9code-key"]),
)


@st.composite
def _case(draw: st.DrawFn) -> tuple[Any, list[str]]:
    secrets = draw(st.lists(_secret, min_size=1, max_size=3))
    s = draw(st.sampled_from(secrets))
    forms = [s, json.dumps(s)[1:-1], _u_escaped(s), json.dumps(json.dumps(s))[1:-1], s[: len(s) // 2]]

    def embed(text: str) -> str:
        form = draw(st.sampled_from(forms))
        at = draw(st.integers(0, len(text)))
        return text[:at] + form + text[at:]

    strings = st.one_of(st.text(st.sampled_from('ab \\"u0\n'), max_size=8), st.text(_chars, max_size=8)).map(
        lambda t: embed(t) if draw(st.integers(0, 3)) == 0 else t
    )
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), strings)
    value = draw(
        st.recursive(
            leaves,
            lambda inner: st.one_of(
                st.lists(inner, max_size=4),
                st.tuples(inner, inner),
                st.dictionaries(strings, inner, max_size=4),
            ),
            max_leaves=12,
        )
    )
    return value, secrets


@given(_case())
def test_precheck_path_equals_the_walk(case: tuple[Any, list[str]]) -> None:
    value, secrets = case
    secrets = R.usable_secrets(secrets)
    walked = _walk(value, secrets)
    assert _norm(redact(value, secrets)) == walked
    if json_clean(value, secrets):
        assert walked == _norm(value)  # clean means the walk changes nothing


@given(st.text(_chars, min_size=8, max_size=12), st.text(_chars, max_size=20), st.text(_chars, max_size=20))
def test_a_secret_inside_any_text_is_never_called_clean(secret: str, before: str, after: str) -> None:
    for form in (secret, _u_escaped(secret), json.dumps(secret)[1:-1]):
        value = {"k": [before + form + after]}
        changed = _walk(value, [secret]) != value
        if changed:
            assert not json_clean(value, [secret])


def test_a_secret_in_a_value_as_deep_as_orjson_reads_is_masked() -> None:
    """1,023 levels (orjson reads 1,024; the precheck's orjson writes 255, so the value is walked): the walk takes
    two frames a level and raised RecursionError (`inspector export` of such a tool input, with a key known)."""
    from inspector.core import exactjson

    depth = 1022
    value: Any = [KEY, "ok"]
    for _ in range(depth):
        value = [value]
    got = redact({"a": value}, [KEY])
    text = exactjson.dumps(got)
    assert KEY.encode() not in text and text.count(REDACTED.encode()) == 1 and b'"ok"' in text

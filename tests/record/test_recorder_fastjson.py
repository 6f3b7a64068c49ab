"""The recorder writes an observation's line in one orjson call (``Observation.to_json_bytes``, then
``RecordingWriter.observation_of``) instead of walking it into a dict first: the lines must stay byte for byte what
``RecordingWriter.observation(obs.to_json())`` writes, for observations of every type, with and without secrets."""

from __future__ import annotations

import dataclasses
import io
import types
import typing
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.observe.states import ToolState
from inspector.record.recorder import Recorder
from inspector.record.writer import RecordingWriter
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.sse import SSEEvent

KEY = "sk-ant-api03-fastjson-canary-0123456789"
START = datetime(2026, 1, 1, tzinfo=UTC)

OBSERVATIONS = sorted(
    (c for c in vars(O).values() if isinstance(c, type) and issubclass(c, O.Observation) and c is not O.Observation),
    key=lambda c: c.__name__,
)


class Color(Enum):
    RED = 1
    BLUE = "blue"


class View(Sequence[Any]):
    """A history view (not a list): the writer writes it as a list."""

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]


_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", KEY, f"x{KEY}y", "\\u0073k-ant", "a\\b", "\ud800lone", "é中😀", "\n\t\x00"]),
)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**64, 2**70),  # beyond 64 bits: orjson refuses it, the walk path writes it
    st.floats(),
    _text,
    st.binary(max_size=8),
    st.sampled_from([b"\xff\xfe", KEY.encode(), "caf\u00e9".encode()]),
    st.sampled_from([*ToolState, *Color]),
)
_key = st.one_of(
    _text,
    st.sampled_from(list(ToolState)),  # (ToolStateChanged.times is keyed by them)
    st.sampled_from(list(Color)),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.just(datetime(2026, 1, 2, tzinfo=UTC)),
)
_sse = st.builds(
    SSEEvent,
    seq=st.integers(0, 9),
    event=_text,
    data=_text,
    id=_text,
    retry=st.none() | st.integers(0, 99),
    start=st.integers(0, 99),
    end=st.integers(0, 99),
    read_index=st.integers(0, 9),
)
_diag = st.builds(
    Diagnostic,
    code=_text,
    severity=st.sampled_from(["error", "warning", "info"]),
    message=_text,
    event_index=st.none() | st.integers(0, 9),
    block_index=st.none() | st.integers(0, 9),
    offset=st.none() | st.integers(0, 9),
    raw=st.none() | st.binary(max_size=6),
)
_json = st.recursive(
    _scalar | _sse | _diag | st.just(frozenset({1})),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.lists(inner, max_size=3).map(View),
        st.dictionaries(_text, inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2),  # keys that are not strings
    ),
    max_leaves=8,
)


def _for(hint: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for(a) for a in typing.get_args(hint)))
    if hint is type(None):
        return st.none()
    if hint is float:
        return st.floats(allow_nan=False) | st.integers(0, 9).map(float)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(-(2**63), 2**63 - 1)
    if hint is str:
        return _text
    if hint is bytes:
        return st.binary(max_size=12) | st.sampled_from([KEY.encode(), b"data: {}\n\n", b"\xc3"])
    if hint is SSEEvent:
        return _sse
    if hint is Diagnostic:
        return _diag
    if origin is dict or hint is dict:
        return st.dictionaries(_key, _json, max_size=4)
    if origin is list:
        return st.lists(_json, max_size=3)
    return _json  # Any, Sequence[Any]


def _observation(cls: type[O.Observation]) -> st.SearchStrategy[O.Observation]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _for(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


_any_observation = st.sampled_from(OBSERVATIONS).flatmap(_observation)


def _lines(obs: O.Observation, fast: bool, secrets: list[str]) -> bytes:
    out = io.BytesIO()
    w = RecordingWriter(out, source={"type": "test"}, secrets=secrets, started_at=START)
    if fast:
        w.observation_of(obs)
    else:
        w.observation(obs.to_json())
    return out.getvalue()


def _outcome(obs: O.Observation, fast: bool, secrets: list[str]) -> bytes | str:
    """The bytes written, or the error raised (an infinite float beside an integer beyond 64 bits: the writer
    refuses the line either way)."""
    try:
        return _lines(obs, fast, secrets)
    except (TypeError, ValueError) as e:
        return type(e).__name__


@given(_any_observation, st.sampled_from([[], [KEY]]))
def test_the_fast_line_is_the_walked_line(obs: O.Observation, secrets: list[str]) -> None:
    assert _outcome(obs, True, secrets) == _outcome(obs, False, secrets)


@pytest.mark.parametrize("cls", OBSERVATIONS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_type_takes_the_fast_path(cls: type[O.Observation], data: st.DataObject) -> None:
    hints = typing.get_type_hints(cls)
    plain = {float: 1.5, int: 3, str: "s", bool: True, bytes: b"ok", SSEEvent: SSEEvent(0, "e", "d", "", None, 0, 1, 0)}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) else []
        base = args[0] if len(args) == 1 else hint
        kwargs[f.name] = plain.get(
            base, data.draw(st.dictionaries(st.text(max_size=4), st.integers(0, 99), max_size=2))
        )
    obs = cls(**kwargs)
    body = obs.to_json_bytes()
    assert body is not None
    assert _lines(obs, True, [KEY]) == _lines(obs, False, [KEY])


def test_values_the_fast_path_cannot_write_take_the_walk() -> None:
    obs = O.ToolResult(1.0, 1, 0, "toolu_1", "t", {1: "int key", "big": 2**70}, False, "done")
    assert obs.to_json_bytes() is None
    assert _lines(obs, True, []) == _lines(obs, False, [])
    lone = O.ProxyNote(1.0, 1, 0, "\ud800")
    assert lone.to_json_bytes() is None
    assert _lines(lone, True, []) == _lines(lone, False, [])


def test_tool_state_times_keyed_by_states_take_the_fast_path() -> None:
    obs = O.ToolStateChanged(
        1.0, 1, 0, "toolu_1", "t", 0, ToolState.RUNNING, {"n": 1}, None, None, {ToolState.RUNNING: 1.0}
    )
    assert obs.to_json_bytes() is not None
    assert _lines(obs, True, []) == _lines(obs, False, [])
    assert b'"times":{"running":1.0}' in _lines(obs, True, [])


def test_a_secret_in_the_line_is_masked_by_the_writer() -> None:
    obs = O.ProxyNote(1.0, 1, 0, f"the key {KEY}")
    assert obs.to_json_bytes() is not None
    line = _lines(obs, True, [KEY])
    assert KEY.encode() not in line and b"[redacted]" in line
    assert line == _lines(obs, False, [KEY])


def test_the_recorder_writes_kept_observations_through_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.BytesIO()
    rec = Recorder(out, source={"type": "test"})
    calls: list[O.Observation] = []
    real = RecordingWriter.observation_of

    def spy(self: RecordingWriter, obs: O.Observation) -> None:
        calls.append(obs)
        real(self, obs)

    monkeypatch.setattr(RecordingWriter, "observation_of", spy)
    obs = O.ExchangeForwarded(2.0, "POST", "/v1/messages/count_tokens", 200, 12, "complete")
    rec(obs)
    rec.close()
    assert calls == [obs]
    assert out.getvalue().splitlines()[-1] == _lines(obs, False, []).splitlines()[-1]


def _plain_instance(cls: type[O.Observation]) -> O.Observation:
    hints = typing.get_type_hints(cls)
    plain = {float: 1.5, int: 3, str: "s", bool: True, bytes: b"ok", SSEEvent: SSEEvent(0, "e", "d", "", None, 0, 1, 0)}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) else []
        base = args[0] if len(args) == 1 else hint
        kwargs[f.name] = plain.get(base, Diagnostic("c", "error", "m") if base is Diagnostic else {})
    return cls(**kwargs)


@pytest.mark.parametrize("cls", OBSERVATIONS, ids=lambda c: c.__name__)
def test_the_types_the_recorder_returns_from_at_once_write_nothing_anyway(cls: type[O.Observation]) -> None:
    """The recorder returns at once for the types of ``_UNRECORDED`` (most of a watched stream): its dispatch, run
    on them, writes nothing; and every other type does write."""
    from inspector.record import recorder as R

    out = io.BytesIO()
    rec = Recorder(out, source={"type": "test"})
    obs = _plain_instance(cls)
    rec._write(O.AttemptStarted(0.0, 3, 3, "POST", "u", {}, {}))  # (an attempt under way, for the reads and ends)
    started = out.getvalue()
    rec._write(obs)
    wrote = out.getvalue() != started
    assert wrote == (cls not in R._UNRECORDED), cls
    if cls in R._UNRECORDED:
        rec(obs)  # (and through __call__: nothing either)
        assert out.getvalue() == started

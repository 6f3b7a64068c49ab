"""The recording line declaration (inspector/record/format.py): the published schema is generated from it and
cannot drift, every line the writer writes fits it, what it rejects the reader drops (with the declared words),
and the reader's compiled shortcut for ``read`` lines agrees with the model on any JSON value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from inspector.record import format as F
from inspector.record.linechecks import LINE_OK
from inspector.record.linemodels import _Line
from inspector.record.recording import RecordingWriter, read_recording

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "recording.schema.json"
CHECKS_PATH = Path(__file__).resolve().parents[2] / "inspector" / "record" / "linechecks.py"
SECRET = "sk-ant-test-0123456789abcdef"


@pytest.fixture(scope="module")
def validator() -> Any:  # (a jsonschema Draft202012Validator: jsonschema is imported only if installed)
    jsonschema = pytest.importorskip("jsonschema")  # the `test` extra installs it
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_published_schema_is_generated_and_cannot_drift(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/recording.schema.json is `python -m inspector.record.format`, byte for byte (regenerate it so)."""
    assert F.main([]) == 0
    printed = capsys.readouterr().out
    assert printed == F.json_schema_text() == SCHEMA_PATH.read_text(encoding="utf-8")
    assert F.main(["--write"]) == 2  # no options: the usage line, not a traceback


def test_the_schema_is_a_tagged_union_over_kind() -> None:
    schema = F.json_schema()
    refs = [choice["$ref"].rsplit("/", 1)[1] for choice in schema["oneOf"]]
    assert refs == [model.__name__ for model in F.LINE_MODELS.values()]
    assert set(F.LINE_MODELS) == {*F.KNOWN_KINDS, "unknown"}
    body = schema["$defs"]["RequestLine"]["properties"]["body"]
    assert {"$ref": "#/$defs/RequestBody"} in body["anyOf"]


def written_lines(tmp_path: Path) -> list[bytes]:
    path = tmp_path / "all.jsonl"
    with RecordingWriter(path, source={"type": "test"}, secrets=[SECRET]) as w:
        w.observation({"type": "conversation", "t": 0.0, "turn": 0, "conversation": "c1", "how": "new"})
        body = {"model": "m", "max_tokens": 5, "stream": True, "system": "s", "messages": [{"role": "user"}]}
        w.request(0, 0, 0.5, "POST", "http://127.0.0.1/v1/messages", {"x-api-key": SECRET, "a": "b"}, body)
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        w.read(0, 0, 0.2, b"event: ping\ndata: {}\n\n")
        w.read(0, 0, 0.3, b"\xff\xfe")
        w.read(0, 0, 0.4, b"")
        w.end(0, 0, 0.5, "complete")
        w.observation({"type": "tool_state", "id": "t1", "name": "x", "state": "done", "safe": True, "times": {}})
    return path.read_bytes().splitlines()


def test_every_line_the_writer_writes_fits_the_declaration_and_the_schema(tmp_path: Path, validator: Any) -> None:
    lines = written_lines(tmp_path)
    kinds = [orjson.loads(line)["kind"] for line in lines]
    assert set(kinds) == {"header", "obs", "request", "response", "read", "end"} and kinds.count("read") >= 2
    adapter = TypeAdapter(F.RecordingLine)
    for line in lines:
        obj = orjson.loads(line)
        assert list(validator.iter_errors(obj)) == [], line
        assert type(adapter.validate_python(obj)) is F.LINE_MODELS[obj["kind"]]
        if obj["kind"] == "read":
            assert F.read_line_ok(obj)


BAD_LINES = [
    # (line, the warning the reader gives)
    (
        {"kind": "response", "turn": 0, "attempt": 0, "status": "abc"},
        "line 2: response: status 'abc' is not an HTTP status, dropped",
    ),
    (
        {"kind": "request", "turn": 0, "attempt": 0, "headers": {"a": 1}},
        "line 2: request: headers {'a': 1} is not an object of strings, dropped",
    ),
    (
        {"kind": "request", "turn": 0, "attempt": 0, "body": {"messages": "hi"}},
        "line 2: request: body.messages 'hi' is not a list of objects, dropped",
    ),
    ({"kind": "end", "turn": 0, "attempt": 0, "reason": 5}, "line 2: end: reason 5 is not a string or null, dropped"),
    ({"kind": "obs", "times": {"a": "x"}}, "line 2: obs: times {'a': 'x'} is not an object of numbers, dropped"),
    ({"kind": "end", "turn": "0", "attempt": 0}, "line 2: end line without integer turn/attempt, skipped"),
    (
        {"kind": "read", "turn": 0, "attempt": 0, "data": "a", "b64": "YQ=="},
        'line 2: read line needs exactly one of "data" and "b64", skipped',
    ),
    ({"kind": "read", "turn": 0, "attempt": 0, "data": None}, 'line 2: read "data" is not a string, skipped'),
    (
        {"kind": "read", "turn": 0, "attempt": 0, "t": "soon", "data": "a"},
        'line 2: read "t" is not a number, timing dropped',
    ),
]
HEADER = b'{"kind":"header","format":"stream-inspector-recording","version":1,"source":{}}\n'


@pytest.mark.parametrize(("line", "warning"), BAD_LINES)
def test_what_the_schema_rejects_the_reader_drops_in_the_declared_words(
    line: dict[str, Any], warning: str, validator: Any
) -> None:
    assert list(validator.iter_errors(line)), line
    rec = read_recording(HEADER + orjson.dumps(line) + b"\n")
    assert rec.warnings == [warning]


def test_lines_of_unknown_kinds_fit_the_schema_and_are_kept(validator: Any) -> None:
    line = {"kind": "from-the-future", "anything": [1, 2]}
    assert list(validator.iter_errors(line)) == []
    assert read_recording(HEADER + orjson.dumps(line) + b"\n").unknown == [line]


def test_a_header_field_of_the_wrong_type_is_dropped_with_a_warning_and_kept() -> None:
    """Before the declaration, a header's source that was not an object became {} silently, and a started_at or
    tool_version of any type passed: now each is dropped like any field of the wrong type, its raw value kept."""
    header = b'{"kind":"header","format":"stream-inspector-recording","version":1,"source":"cli","started_at":7}\n'
    rec = read_recording(header)
    assert rec.warnings == [
        "line 1: header: source 'cli' is not an object, dropped",
        "line 1: header: started_at 7 is not a string, dropped",
    ]
    assert rec.header["source"] == {} and "started_at" not in rec.header
    assert rec.header["invalid"] == {"source": "cli", "started_at": 7}


def test_a_huge_bad_field_costs_one_error_not_one_per_item() -> None:
    """Lists and objects stop at their first bad item (FailFast): a field of 200k bad items is one warning."""
    line = {"kind": "request", "turn": 0, "attempt": 0, "headers": {str(i): i for i in range(200_000)}}
    assert F.field_errors(F.RequestLine, line) == {"headers": "string_type"}
    body = {"kind": "request", "turn": 0, "attempt": 0, "body": {"tools": [1] * 200_000, "system": [2] * 200_000}}
    rec = read_recording(HEADER + orjson.dumps(body) + b"\n")
    assert len(rec.warnings) == 2


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=5,
)
READ_FIELD_VALUES = st.one_of(
    JSON_VALUES, st.sampled_from([0, 1, -1, 0.5, 1e308, "", "read", "YQ==", True, False, None, 2**63])
)


DELETE = object()
READ_KEYS = ["kind", "turn", "attempt", "t", "data", "b64", "other"]


@settings(max_examples=500, deadline=None)
@given(
    base=st.sampled_from(
        [
            {"kind": "read", "turn": 1, "attempt": 0, "t": 0.5, "data": "x"},
            {"kind": "read", "turn": 0, "attempt": 2, "b64": "YQ=="},
        ]
    ),
    changes=st.lists(
        st.tuples(st.sampled_from(READ_KEYS), st.one_of(st.just(DELETE), READ_FIELD_VALUES)), min_size=1, max_size=2
    ),
)
def test_the_read_shortcut_is_the_model(base: dict[str, Any], changes: list[tuple[str, Any]]) -> None:
    """read_line_ok (generated from ReadLine's fields) says a line fits exactly when pydantic says so: a valid line
    with one or two fields changed (to any JSON value) or removed."""
    line = dict(base)
    for key, value in changes:
        if value is DELETE:
            line.pop(key, None)
        else:
            line[key] = value
    assert F.read_line_ok(line) == (F.field_errors(F.ReadLine, line) == {}), line


@settings(max_examples=200, deadline=None)
@given(line=st.dictionaries(st.sampled_from(READ_KEYS), READ_FIELD_VALUES, max_size=7))
def test_the_read_shortcut_is_the_model_on_any_object(line: dict[str, Any]) -> None:
    assert F.read_line_ok(line) == (F.field_errors(F.ReadLine, line) == {}), line


def test_the_shortcut_is_generated_from_the_declaration() -> None:
    """The checks are inspector/record/linechecks.py, generated from the models (`python -m
    inspector.record.linemodels`), byte for byte; a type the generator cannot compile is refused, never guessed.
    (Before the checks covered every kind, a bounded field such as ResponseLine's status was the refused type.)"""
    assert CHECKS_PATH.read_text(encoding="utf-8") == F.checks_source()
    for name in F.ReadLine.model_fields:
        assert repr(name) in (F._compile(F.ReadLine, F._ONE_OF_DATA_B64).__doc__ or "")
    assert F._compile(F.ResponseLine)({"kind": "response", "turn": 0, "attempt": 0, "status": 200})

    class Odd(_Line):
        kind: Literal["odd"]
        tags: set[int] | None = None

    with pytest.raises(NotImplementedError):
        F._compile(Odd)
    assert F.checks_main(["--write"]) == 2  # no options: the usage line, not a traceback


LINE_BASES: dict[str, dict[str, Any]] = {
    "header": {
        "kind": "header",
        "format": "stream-inspector-recording",
        "version": 1,
        "tool_version": "1.0",
        "source": {"type": "x"},
        "started_at": "2026-01-01T00:00:00Z",
    },
    "request": {
        "kind": "request",
        "turn": 0,
        "attempt": 1,
        "t": 0.5,
        "method": "POST",
        "url": "u",
        "headers": {"a": "b"},
        "body": {"model": "m"},
    },
    "response": {"kind": "response", "turn": 2, "attempt": 0, "t": 1, "status": 200, "headers": {}},
    "read": {"kind": "read", "turn": 1, "attempt": 0, "t": 0.5, "data": "x"},
    "end": {"kind": "end", "turn": 0, "attempt": 0, "t": 0.1, "status": "complete", "reason": None},
    "obs": {
        "kind": "obs",
        "type": "tool_state",
        "id": "t1",
        "name": "n",
        "state": "done",
        "safe": True,
        "times": {"queued": 0.5, "done": 1},
        "messages": [{"role": "user"}],
        "t": 0.0,
    },
    "body": {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5,
        "system": [{"type": "text"}],
        "tools": [{"name": "x"}],
        "stream": True,
    },
}
LINE_FIELD_VALUES = st.one_of(
    JSON_VALUES,
    st.sampled_from(
        [
            *(0, 1, 2, -1, 0.5, 99, 100, 999, 1000, 2**63, 1e308, True, False, None, "", "x"),
            *("stream-inspector-recording", "header", "request", "response", "read", "end", "obs"),
            *({}, {"a": "b"}, {"a": 1}, {"a": 1.5}, {"a": None}, {"a": True}, [], [{}], [{"a": 1}], [1], [{}, 2]),
        ]
    ),
)


@st.composite
def changed_lines(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(list(LINE_BASES)))
    line = dict(LINE_BASES[kind])
    keys = [*line, "kind", "turn", "attempt", "data", "b64", "other"]
    for key, value in draw(
        st.lists(st.tuples(st.sampled_from(keys), st.one_of(st.just(DELETE), LINE_FIELD_VALUES)), max_size=3)
    ):
        if value is DELETE:
            line.pop(key, None)
        else:
            line[key] = value
    return kind, line


def test_the_base_lines_fit_and_the_checks_cover_every_model() -> None:
    assert set(LINE_BASES) == set(F.MODELS) == set(LINE_OK)
    for kind, line in LINE_BASES.items():
        assert F.line_ok(kind, line) and F.field_errors(F.MODELS[kind], line) == {}, kind


@settings(max_examples=1000, deadline=None)
@given(changed_lines())
def test_every_lines_checks_are_the_model(kind_line: tuple[str, dict[str, Any]]) -> None:
    """line_ok (generated from the models' fields) says a line of any kind fits exactly when pydantic says so: a
    valid line with up to three fields changed (to any JSON value) or removed."""
    kind, line = kind_line
    assert F.line_ok(kind, line) == (F.field_errors(F.MODELS[kind], line) == {}), line
    assert F.errors_of(kind, line) == F.field_errors(F.MODELS[kind], line)


def test_a_valid_recording_is_read_without_pydantic(tmp_path: Path) -> None:
    """The models are built on first use (issue 17 §4): reading a valid recording (the dump path) imports no
    pydantic; a damaged line builds them to name what is wrong."""
    import subprocess
    import sys

    path = tmp_path / "all.jsonl"
    path.write_bytes(b"\n".join(written_lines(tmp_path)) + b"\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(HEADER + orjson.dumps(BAD_LINES[0][0]) + b"\n")
    code = (
        "import sys\n"
        "from inspector.record.recording import read_recording\n"
        "rec = read_recording(sys.argv[1])\n"
        "print(len(rec.turns), len(rec.warnings), 'pydantic' in sys.modules)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": root, "PATH": "/usr/bin:/bin"}
    got = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, check=True)
    assert got.stdout.split() == ["1", "0", "False"], got.stderr
    got = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, env=env, check=True)
    assert got.stdout.split() == ["1", "1", "True"], got.stderr

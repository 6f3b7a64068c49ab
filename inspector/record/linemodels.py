"""The declaration of a recording's lines (format ``stream-inspector-recording``, version 1), in pydantic: one model
per line ``kind``, a tagged union over ``kind`` (:data:`RecordingLine`), and for each field its type, its bounds and
the words a reader's warning uses for it (``What``). docs/recording-format.md describes the format;
docs/recording.schema.json is generated from this module (``python -m inspector.record.format``; a test compares).

Imported only when needed (``inspector.record.format`` is its pydantic-free face): building the models costs more
than reading a small recording. A valid line is recognized by the checks compiled from these models' own fields
(:func:`checks_source`, committed as ``inspector/record/linechecks.py``; a test regenerates and compares, a property
test pins that checks and models agree); the models run only when a check fails, to name what is wrong. What a
reader does with an error (drop the field with a warning and keep the raw value, skip the line, refuse the file) is
the reader's; what is an error is declared here only.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    FailFast,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

from inspector.record.format import FORMAT, KNOWN_KINDS, VERSION, What

__all__ = [
    "LINE_MODELS",
    "MODELS",
    "EndLine",
    "HeaderLine",
    "ObsLine",
    "ReadLine",
    "RecordingLine",
    "RedactedLine",
    "RequestBody",
    "RequestLine",
    "ResponseLine",
    "UnknownLine",
    "checks_source",
    "field_errors",
    "json_schema",
    "json_schema_text",
    "what",
]


class _FailFast(FailFast):
    """FailFast that can sit inside a union (a list or object stops at its first bad item)."""

    def __hash__(self) -> int:
        return hash(FailFast)


# --- the types of the fields (None, like an absent field, is not checked unless a type says otherwise) ---------

Integer = Annotated[int, What("an integer")]
Number = Annotated[float | None, What("a number")]  # finite (allow_inf_nan=False); an int is a number
Text = Annotated[str | None, What("a string")]
OptText = Annotated[str | None, What("a string or null")]
Flag = Annotated[bool | None, What("true or false")]
Headers = Annotated[dict[str, str] | None, FailFast(), What("an object of strings")]
Objects = Annotated[list[dict[str, Any]] | None, FailFast(), What("a list of objects")]
Status = Annotated[Annotated[int, Field(ge=100, le=999)] | None, What("an HTTP status")]
Times = Annotated[dict[str, float] | None, FailFast(), What("an object of numbers")]
System = Annotated[str | Annotated[list[dict[str, Any]], _FailFast()] | None, What("a string or a list of objects")]
FreeObject = Annotated[dict[str, Any] | None, What("an object")]


class _Line(BaseModel):
    """Every line: a JSON object with a string ``kind``; fields not declared are kept (forward compatibility)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class HeaderLine(_Line):
    """Line 1, always. A ``format`` or ``version`` other than these makes the reader refuse the file."""

    kind: Literal["header"]
    format: Annotated[Literal["stream-inspector-recording"], What(f"{FORMAT!r}")]
    version: Annotated[int, Field(ge=VERSION, le=VERSION), What(f"version {VERSION}")]
    tool_version: Annotated[Text, Field(description="inspector.__version__ of the writer")] = None
    source: Annotated[
        FreeObject, Field(description='where the traffic came from: {"type": "scenario", "name": ...}, ...')
    ] = None
    started_at: Annotated[Text, Field(description="ISO 8601, UTC (Z): when the recording started")] = None


class _AttemptLine(_Line):
    """A line of one attempt (one HTTP request of one turn): without integer turn and attempt it is skipped."""

    turn: Integer
    attempt: Integer


class RequestLine(_AttemptLine):
    kind: Literal["request"]
    t: Annotated[Number, Field(description="seconds since the start of the recording")] = None
    method: Text = None
    url: Text = None
    headers: Annotated[Headers, Field(description="credential headers removed")] = None
    body: Annotated[
        Any, Field(description="the request body as sent, any JSON value; an object is checked as a RequestBody")
    ] = None  # in the schema: RequestBody or any value that is not an object (json_schema)


class RequestBody(_Line):
    """A request ``body`` that is an object: the Messages API fields the tool reads are typed."""

    model: Text = None
    messages: Objects = None
    max_tokens: Annotated[int | None, What("an integer")] = None
    system: System = None
    tools: Objects = None
    stream: Flag = None


class ResponseLine(_AttemptLine):
    kind: Literal["response"]
    t: Annotated[Number, Field(description="seconds since the attempt's request was sent")] = None
    status: Status = None
    headers: Annotated[Headers, Field(description="credential headers removed")] = None


def _one_of_data_b64(obj: Any) -> bool:
    return isinstance(obj, dict) and (("data" in obj) != ("b64" in obj))


# the same rule as a Python expression of a parsed line ``o`` (a dict), for the generated checks (a property test
# compares them with the model on any JSON value)
_ONE_OF_DATA_B64 = '(("data" in o) != ("b64" in o))'


class ReadLine(_AttemptLine):
    """One network read, bytes kept losslessly: valid UTF-8 as text in ``data``, anything else as standard base64
    in ``b64``; exactly one of the two."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["data"]}, {"required": ["b64"]}]},
    )

    kind: Literal["read"]
    t: Annotated[Number, Field(description="seconds since the attempt's request was sent; null: no timing")] = None
    data: Annotated[str, What("a string"), Field(description="the read, when its bytes are UTF-8")] = None  # type: ignore[assignment]
    b64: Annotated[str, What("valid base64"), WithJsonSchema({"type": "string", "contentEncoding": "base64"})] = None  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _data_or_b64(cls, obj: Any) -> Any:
        if not _one_of_data_b64(obj):
            raise PydanticCustomError("data_xor_b64", 'a read line needs exactly one of "data" and "b64"')
        return obj


class EndLine(_AttemptLine):
    kind: Literal["end"]
    t: Annotated[Number, Field(description="seconds since the attempt's request was sent")] = None
    status: Annotated[Text, Field(description='"complete", "dropped", "error", "cancelled", "http_error", ...')] = None
    reason: OptText = None


class ObsLine(_Line):
    """A loop observation; its content is free, the fields below are typed. ``type`` says which observation
    (``conversation``, ``tool_state``, ``http_try_failed``, ``proxy_exchange``...; docs/recording-format.md); a
    ``tool_state`` observation without a string ``id`` is skipped."""

    kind: Literal["obs"]
    type: Text = None
    id: Text = None
    name: Text = None
    state: Text = None
    safe: Flag = None
    times: Times = None
    messages: Objects = None
    t: Number = None


class RedactedLine(_Line):
    """Written instead of a line whose secret could not be redacted without breaking its JSON (docs/secrets.md);
    readers keep it with the lines of unknown kinds."""

    kind: Literal["redacted"]
    original_kind: Text = None


class UnknownLine(_Line):
    """A line of a kind this version does not know: kept as it is (``Recording.unknown``), not an error."""

    kind: Annotated[str, WithJsonSchema({"type": "string", "not": {"enum": list(KNOWN_KINDS)}})]


def _kind_tag(obj: Any) -> str:
    kind = obj.get("kind") if isinstance(obj, dict) else getattr(obj, "kind", None)
    return kind if kind in KNOWN_KINDS else "unknown"


RecordingLine = Annotated[
    Union[
        Annotated[HeaderLine, Tag("header")],
        Annotated[RequestLine, Tag("request")],
        Annotated[ResponseLine, Tag("response")],
        Annotated[ReadLine, Tag("read")],
        Annotated[EndLine, Tag("end")],
        Annotated[ObsLine, Tag("obs")],
        Annotated[RedactedLine, Tag("redacted")],
        Annotated[UnknownLine, Tag("unknown")],
    ],
    Discriminator(_kind_tag),
]
"""One line of a recording: a tagged union over ``kind``."""

_CHECKED = ("header", "request", "response", "read", "end", "obs")  # the kinds the reader checks

LINE_MODELS: dict[str, type[_Line]] = {
    typing.get_args(member)[1].tag: typing.get_args(member)[0]
    for member in typing.get_args(typing.get_args(RecordingLine)[0])
}


# --- using the declaration ---------------------------------------------------------------------------------------


def what(model: type[BaseModel], name: str) -> str:
    """What field ``name`` of ``model`` must be, in the words of the reader's warnings."""
    for item in model.model_fields[name].metadata:
        if isinstance(item, What):
            return item.text
    return "valid"


def field_errors(model: type[BaseModel], obj: dict[str, Any]) -> dict[str, str]:
    """The fields of ``obj`` that do not fit ``model``, in declaration order: ``{field: error type}`` (one entry a
    field; a line-wide error, such as a read line with both ``data`` and ``b64``, is under ``""``). Empty: it fits.
    Lists and objects stop at their first bad item (FailFast), so a huge bad field costs no more than its size."""
    try:
        model.__pydantic_validator__.validate_python(obj)
    except ValidationError as error:
        found: dict[str, str] = {}
        for item in error.errors(include_url=False, include_context=False, include_input=False):
            loc = item["loc"]
            found.setdefault(str(loc[0]) if loc else "", item["type"])
        return found
    return {}


def _bounds(item: Any, v: str) -> list[str]:
    """The compiled bounds of one metadata item of an ``Annotated`` type ([] for what does not change validity:
    the reader's words, FailFast, a description, a schema override); NotImplementedError for anything else."""
    if isinstance(item, (What, FailFast, WithJsonSchema)):
        return []
    if isinstance(item, FieldInfo):  # Field(...) nested in a union: its bounds are in its metadata
        return [b for m in item.metadata for b in _bounds(m, v)]
    for cls, op in _BOUNDS:
        if type(item) is cls:
            return [f"{v} {op} {getattr(item, cls.__name__.lower())!r}"]
    raise NotImplementedError(f"no compiled check for {item!r}")


_BOUNDS = ((annotated_types.Ge, ">="), (annotated_types.Le, "<="), (annotated_types.Gt, ">"), (annotated_types.Lt, "<"))


def _check(annotation: Any, v: str, depth: int = 0) -> str:
    """A Python expression, true when the value ``v`` (an expression) validates against ``annotation`` the way the
    models do (strict, no inf/nan), for the types recording lines use; property tests compare it with pydantic on
    any JSON value. A type it does not know raises NotImplementedError: never guessed."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *meta = typing.get_args(annotation)
        bounds = [b for item in meta for b in _bounds(item, v)]
        check = _check(inner, v, depth)
        return f"({check} and {' and '.join(bounds)})" if bounds else check
    if origin in (Union, types.UnionType):
        return "(" + " or ".join(_check(arg, v, depth) for arg in typing.get_args(annotation)) + ")"
    if annotation is Any:
        return "True"
    if annotation is type(None) or annotation is None:
        return f"{v} is None"
    if annotation is int:  # JSON gives exact ints (a bool is not one)
        return f"type({v}) is int"
    if annotation is bool:
        return f"type({v}) is bool"
    if annotation is float:  # an int is a number; a float must be finite (x - x is nan for inf and nan)
        return f"(type({v}) is float and {v} - {v} == 0.0 or type({v}) is int)"
    if annotation is str:
        return f"type({v}) is str"
    if origin is Literal:
        return (
            "("
            + " or ".join(f"({v} == {x!r} and type({v}) is {type(x).__name__})" for x in typing.get_args(annotation))
            + ")"
        )
    x = f"x{depth}"
    if origin is list:
        (item,) = typing.get_args(annotation)
        each = _check(item, x, depth + 1)
        return f"type({v}) is list" if each == "True" else f"(type({v}) is list and all({each} for {x} in {v}))"
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise NotImplementedError(f"no compiled check for {annotation!r}")
        k = f"k{depth}"
        each = _check(value, x, depth + 1)
        if each == "True":
            return f"(type({v}) is dict and all(type({k}) is str for {k} in {v}))"
        return f"(type({v}) is dict and all(type({k}) is str and {each} for {k}, {x} in {v}.items()))"
    raise NotImplementedError(f"no compiled check for {annotation!r}")


def _fits_source(model: type[_Line], name: str, whole: str | None) -> str:
    """The source of ``def name(o)``: true when a parsed line ``o`` fits ``model`` (``whole``: the model's
    line-wide rule, an expression of ``o``), generated from the model's own fields and types: a required field must be present, a present
    one must fit its declared type. (Generated Python: about a third of the cost of pydantic on a small line.)"""
    validators = model.__pydantic_decorators__
    if (validators.model_validators or validators.field_validators) and whole is None:
        raise NotImplementedError(f"no compiled check for the validators of {model.__name__}")
    terms = [whole] if whole is not None else []
    for field_name, info in model.model_fields.items():
        annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        check = _check(annotation, f"o[{field_name!r}]")
        if info.is_required():
            terms.append(f"({field_name!r} in o and {check})")
        else:
            terms.append(f"({field_name!r} not in o or {check})")
    return f"def {name}(o: dict[str, object]) -> bool:\n    return " + " and ".join(terms) + "\n"


def _compile(model: type[_Line], whole: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """:func:`_fits_source` of ``model``, compiled (``whole``: the model's line-wide rule, an expression of ``o``)."""
    source = _fits_source(model, "fits", whole)
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{model.__name__} checks>", "exec"), namespace)
    fits: Callable[[dict[str, Any]], bool] = namespace["fits"]
    fits.__doc__ = source
    return fits


MODELS: dict[str, type[_Line]] = {**{k: m for k, m in LINE_MODELS.items() if k in _CHECKED}, "body": RequestBody}
"""The models the reader checks a line against, by kind (``body``: a request body that is an object)."""


def checks_source() -> str:
    """inspector/record/linechecks.py: the checks of :data:`MODELS` as Python without pydantic, byte for byte."""
    parts = [
        '"""GENERATED from the recording line models (inspector/record/linemodels.py) by `python -m',
        "inspector.record.linemodels > inspector/record/linechecks.py`: whether a parsed line fits its declaration,",
        "without pydantic (a valid recording is read without building the models). Do not edit: a test regenerates",
        'and compares."""',
        "",
        "# fmt: off",
        "# ruff: noqa",
        "from __future__ import annotations",
        "",
        "from collections.abc import Callable",
        "",
    ]
    names = {}
    for kind, model in MODELS.items():
        names[kind] = f"{kind}_ok"
        whole = _ONE_OF_DATA_B64 if model is ReadLine else None
        parts += ["", _fits_source(model, names[kind], whole).rstrip("\n"), ""]
    parts += ["", "LINE_OK: dict[str, Callable[[dict[str, object]], bool]] = {"]
    parts += [f"    {kind!r}: {name}," for kind, name in names.items()]
    parts += ["}", ""]
    return "\n".join(parts)


# --- the published schema ----------------------------------------------------------------------------------------


def _strip_defaults(node: object) -> object:
    """Our defaults mean "absent": the schema leaves them out."""
    if isinstance(node, dict):
        return _strip_object(node)
    if isinstance(node, list):
        return [_strip_defaults(v) for v in node]
    return node


def _strip_object(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _strip_defaults(v) for k, v in node.items() if k != "default"}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one recording line, generated from :data:`RecordingLine` (docs/recording.schema.json)."""
    generated = TypeAdapter(RecordingLine).json_schema(ref_template="#/$defs/{model}")
    body = RequestBody.model_json_schema(ref_template="#/$defs/{model}")
    defs = {**generated.pop("$defs", {}), "RequestBody": body}
    request_body = defs["RequestLine"]["properties"]["body"]
    request_body["anyOf"] = [{"$ref": "#/$defs/RequestBody"}, {"not": {"type": "object"}}]
    return _strip_object(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://stream-inspector.invalid/recording.schema.json",
            "title": f"One line of a Stream Inspector recording ({FORMAT}, version {VERSION})",
            "description": "A recording is JSON Lines: one such object a line, the header first. See "
            "docs/recording-format.md. Generated by `python -m inspector.record.format` from "
            "inspector/record/format.py.",
            **generated,
            "$defs": dict(sorted(defs.items())),
        }
    )


def json_schema_text() -> str:
    """docs/recording.schema.json, byte for byte."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.record.format``: print the JSON Schema of a recording line (the published
    docs/recording.schema.json is this output)."""
    if argv:
        sys.stderr.write("usage: python -m inspector.record.format > docs/recording.schema.json\n")
        return 2
    sys.stdout.write(json_schema_text())
    return 0


def checks_main(argv: list[str] | None = None) -> int:
    """``python -m inspector.record.linemodels``: print inspector/record/linechecks.py."""
    if argv:
        sys.stderr.write("usage: python -m inspector.record.linemodels > inspector/record/linechecks.py\n")
        return 2
    sys.stdout.write(checks_source())
    return 0


if __name__ == "__main__":
    sys.exit(checks_main(sys.argv[1:]))

"""The declaration of a recording's lines (format ``stream-inspector-recording``, version 1), in pydantic: one model
per line ``kind``, a tagged union over ``kind`` (:data:`RecordingLine`), and for each field its type, its bounds and
the words a reader's warning uses for it (``What``). docs/recording-format.md describes the format;
docs/recording.schema.json is generated from this module (``python -m inspector.record.format``; a test compares).

The reader (``inspector.record.reader``) validates every line of a rare kind (header, request, response, end, obs)
through its model; ``read`` lines, one per network read, go through :func:`read_line_ok`, the checks compiled from
:class:`ReadLine`'s own fields (one definition; a property test pins that both agree), and through the model only
when those fail, to name what is wrong. What a reader does with an error (drop the field with a warning and keep the
raw value, skip the line, refuse the file) is the reader's; what is an error is declared here only.
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
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError

FORMAT = "stream-inspector-recording"
VERSION = 1
PLAIN_FORMAT = "plain-sse"  # the `format` of the synthetic header given to a plain SSE text file

__all__ = [
    "FORMAT",
    "KNOWN_KINDS",
    "LINE_MODELS",
    "PLAIN_FORMAT",
    "VERSION",
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
    "What",
    "field_errors",
    "json_schema",
    "json_schema_text",
    "read_line_ok",
    "what",
]


class What:
    """Field metadata: what the value must be, in the words of the reader's warnings (``... is not a number``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"What({self.text!r})"


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


KNOWN_KINDS = ("header", "request", "response", "read", "end", "obs", "redacted")


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


def field_errors(model: type[BaseModel], obj: dict) -> dict[str, str]:
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


def _check(annotation: Any, v: str) -> str:
    """A Python expression, true when the value ``v`` (an expression) validates against ``annotation`` the way the
    models do (strict, no inf/nan), for the few types a ``read`` line uses; a property test compares it with pydantic
    on any JSON value."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *meta = typing.get_args(annotation)
        for item in meta:
            if isinstance(item, annotated_types.BaseMetadata):  # bounds and the like: not compiled here
                raise NotImplementedError(f"no compiled check for {item!r}")
        return _check(inner, v)
    if origin in (Union, types.UnionType):
        return "(" + " or ".join(_check(arg, v) for arg in typing.get_args(annotation)) + ")"
    if annotation is type(None) or annotation is None:
        return f"{v} is None"
    if annotation is int:  # JSON gives exact ints (a bool is not one)
        return f"type({v}) is int"
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
    raise NotImplementedError(f"no compiled check for {annotation!r}")


def _compile(model: type[_Line], whole: Callable[[Any], bool]) -> Callable[[dict], bool]:
    """A function true when a parsed line ``o`` fits ``model`` (``whole(o)`` being the model's line-wide rule),
    generated from the model's own fields and types: a required field must be present, a present one must fit
    its declared type. (Generated Python: about a third of the cost of pydantic on a small line.)"""
    terms = ["whole(o)"]
    for name, info in model.model_fields.items():
        annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        check = _check(annotation, f"o[{name!r}]")
        terms.append(f"({name!r} in o and {check})" if info.is_required() else f"({name!r} not in o or {check})")
    source = "def fits(o):\n    return " + " and ".join(terms) + "\n"
    namespace: dict[str, Any] = {"whole": whole}
    exec(compile(source, f"<{model.__name__} checks>", "exec"), namespace)
    fits: Callable[[dict], bool] = namespace["fits"]
    fits.__doc__ = source
    return fits


read_line_ok: Callable[[dict], bool] = _compile(ReadLine, _one_of_data_b64)
"""Whether a parsed ``read`` line fits :class:`ReadLine` (the reader's shortcut; :func:`field_errors` says why
not)."""


# --- the published schema ----------------------------------------------------------------------------------------


def _strip_defaults(node: Any) -> Any:
    """Our defaults mean "absent": the schema leaves them out."""
    if isinstance(node, dict):
        return {k: _strip_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_strip_defaults(v) for v in node]
    return node


def json_schema() -> dict:
    """The JSON Schema of one recording line, generated from :data:`RecordingLine` (docs/recording.schema.json)."""
    generated = TypeAdapter(RecordingLine).json_schema(ref_template="#/$defs/{model}")
    body = RequestBody.model_json_schema(ref_template="#/$defs/{model}")
    defs = {**generated.pop("$defs", {}), "RequestBody": body}
    request_body = defs["RequestLine"]["properties"]["body"]
    request_body["anyOf"] = [{"$ref": "#/$defs/RequestBody"}, {"not": {"type": "object"}}]
    return _strip_defaults(
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

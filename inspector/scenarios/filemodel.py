"""The declaration of the scenario file (format ``stream-inspector-scenario``, version 1), in pydantic: every key,
its type, its default, its bounds (taken from the model's ``between(lo, hi)`` field metadata) and the rules on one
value. ``fileformat`` validates a file's data with it (strict: YAML's ``"1"`` is not a number), maps each error's
location back to the YAML node for ``file:line:column`` messages, and builds the in-memory
:class:`~inspector.scenarios.model.Scenario`; ``json_schema()`` is made from it (docs/scenario.schema.json).

Rules across values (a tool block names an offered tool, a fault's block exists, the events a turn renders...) stay
in ``fileformat``, which knows the nodes to point at.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Annotated, Any, Final, Literal, NoReturn, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from . import model as M

FORMAT: Final = "stream-inspector-scenario"
VERSION = 1
MAX_NAME = 100  # characters of a scenario name
MAX_CHUNK_SIZES = 10_000  # sizes in a chunk / fragment list
NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_NAME = re.compile(NAME_PATTERN)
LINE_ENDINGS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}
BLOCK_KINDS = ("text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "block")


def snake_name(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def fault_types() -> dict[str, type[M.Fault]]:
    """File name of every fault type (``error_event_after``...), from the model's ``Fault`` union."""
    import typing

    return {snake_name(cls.__name__): cls for cls in typing.get_args(M.Fault)}


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def _field(cls: type, name: str) -> dataclasses.Field[Any]:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def _default(cls: type, name: str) -> Any:
    """The model's default for ``cls.name``."""
    return _field(cls, name).default


def _bounds(cls: type, name: str) -> dict[str, Any]:
    """The bounds the model declares for ``cls.name``, as Field keywords (floats for a float field: the messages say
    "a number" for them, "an integer" otherwise)."""
    f = _field(cls, name)
    b = M.bounds_of(f)
    if b is None:
        return {}
    lo, hi = b
    if "float" in str(f.type):
        lo, hi = float(lo), float(hi)
    return {"ge": lo, "le": hi}


def _range(cls: type, name: str) -> Any:
    return Field(**_bounds(cls, name))


def _bounded(cls: type, name: str) -> Any:
    """``_range`` with the model's default."""
    return Field(default=_field(cls, name).default, **_bounds(cls, name))


def _custom(kind: str, message: str, at: str | None = None) -> PydanticCustomError:
    """An error with our own message; ``at``: a key under the erring value to point at."""
    return PydanticCustomError(kind, message, {"at": at} if at else None)


def _one_line(value: str) -> str:
    if not value or "\n" in value:
        raise _custom("one_line", "expected one non-empty line")
    return value


OneLine = Annotated[str, AfterValidator(_one_line)]


def did_you_mean(value: object, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(str(value), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- sizes and durations -------------------------------------------------------------------------------------------

Size = Annotated[int, Field(ge=1, le=M.MAX_COUNT)]
Seconds = Annotated[float, Field(ge=0.0, le=float(M.MAX_SECONDS))]


class SizesFile(_File):
    """Seeded random sizes in [min, max]."""

    min: Size
    max: Size

    @model_validator(mode="after")
    def _ordered(self) -> SizesFile:
        if self.min > self.max:
            raise _custom("range", f"min ({self.min}) must be <= max ({self.max})")
        return self


def _kind_of_size(v: object) -> str:
    if isinstance(v, dict):
        return "@range"
    if isinstance(v, list):
        return "@sizes"
    if isinstance(v, int) and not isinstance(v, bool):
        return "@size"
    return "@bad"


def _bad_size(v: object) -> NoReturn:
    raise _custom("chunk", "expected a size (integer >= 1), a list of sizes or {min: N, max: M}")


Chunk = Annotated[
    Union[
        Annotated[Size, Tag("@size")],
        Annotated[list[Size], Field(min_length=1, max_length=MAX_CHUNK_SIZES), Tag("@sizes")],
        Annotated[SizesFile, Tag("@range")],
        SkipJsonSchema[Annotated[Any, AfterValidator(_bad_size), Tag("@bad")]],
    ],
    Discriminator(_kind_of_size),
    Field(description="characters per delta: a size, sizes used in turn, or seeded random sizes"),
]


def _kind_of_duration(v: object) -> str:
    return "@range" if isinstance(v, list) else "@seconds"


def _duration_range(v: list[float]) -> list[float]:
    if len(v) != 2:
        raise _custom("duration", f"expected seconds or [min, max] seconds, got a list of {len(v)}")
    if v[0] > v[1]:
        raise _custom("duration", f"min ({v[0]:g}) must be <= max ({v[1]:g})")
    return v


Duration = Annotated[
    Union[
        Annotated[Seconds, Tag("@seconds")],
        Annotated[list[Seconds], Field(min_length=2, max_length=2), AfterValidator(_duration_range), Tag("@range")],
    ],
    Discriminator(_kind_of_duration),
    Field(description="scenario seconds, or [min, max] drawn per call (seeded)"),
]


# --- blocks ----------------------------------------------------------------------------------------------------------


def _chunk_default(cls: type, name: str) -> Any:
    d = _default(cls, name)
    return SizesFile(min=d.lo, max=d.hi) if isinstance(d, M.Sizes) else d


class TextFile(_File):
    text: str
    chunk: Chunk = _chunk_default(M.TextBlock, "chunk")


class ThinkingFile(_File):
    thinking: str
    signature: str = _default(M.ThinkingBlock, "signature")
    chunk: Chunk = _chunk_default(M.ThinkingBlock, "chunk")


class RedactedThinkingFile(_File):
    redacted_thinking: str | None


class _ToolUseCommon(_File):
    input: dict[str, Any] | None = None
    raw_json: str | None = None
    fragment: Chunk = _chunk_default(M.ToolUseBlock, "fragment")
    empty_first: bool = True
    id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ToolUseFile(_ToolUseCommon):
    tool_use: OneLine


class ServerToolUseFile(_ToolUseCommon):
    server_tool_use: OneLine


def _whole(v: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(v.get("type"), str):
        raise _custom("block", "a whole block needs a string 'type' (e.g. web_search_tool_result)")
    return v


class WholeFile(_File):
    block: Annotated[dict[str, Any], AfterValidator(_whole)]
    result_of: Annotated[int, Field(ge=0, le=M.MAX_COUNT)] | None = None


def _kind_of_block(v: object) -> str:
    if not isinstance(v, dict):
        return "@notablock"
    kinds = [k for k in v if k in BLOCK_KINDS]
    return f"@{kinds[0]}" if len(kinds) == 1 else "@bad"


def _not_a_block(v: object) -> NoReturn:
    raise _custom("block", f"expected a block (a mapping with one of: {', '.join(BLOCK_KINDS)})")


def _bad_block(v: dict[Any, Any]) -> NoReturn:
    kinds = [k for k in v if k in BLOCK_KINDS]
    got = f"both {kinds[0]!r} and {kinds[1]!r}" if len(kinds) > 1 else f"keys {', '.join(map(repr, v))}"
    raise _custom("block", f"a block has exactly one of the keys {', '.join(BLOCK_KINDS)}; got {got}")


BlockFile = Annotated[
    Union[
        Annotated[TextFile, Tag("@text")],
        Annotated[ThinkingFile, Tag("@thinking")],
        Annotated[RedactedThinkingFile, Tag("@redacted_thinking")],
        Annotated[ToolUseFile, Tag("@tool_use")],
        Annotated[ServerToolUseFile, Tag("@server_tool_use")],
        Annotated[WholeFile, Tag("@block")],
        SkipJsonSchema[Annotated[dict[Any, Any], AfterValidator(_bad_block), Tag("@bad")]],
        SkipJsonSchema[Annotated[Any, AfterValidator(_not_a_block), Tag("@notablock")]],
    ],
    Discriminator(_kind_of_block),
]


# --- pacing, usage, faults, HTTP errors ------------------------------------------------------------------------------


class PacingFile(_File):
    ttfb: float = _bounded(M.Pacing, "ttfb")
    event_gap: float = _bounded(M.Pacing, "event_gap")
    jitter: float = _bounded(M.Pacing, "jitter")
    events_per_read: int = _bounded(M.Pacing, "events_per_read")
    split_events: bool = False
    ping_every: Annotated[int, _range(M.Pacing, "ping_every")] | None = None
    pad: bool = False
    line_ending: Literal["LF", "CRLF", "CR"] = "LF"
    header_share: float = _bounded(M.Pacing, "header_share")
    block_pause: float = _bounded(M.Pacing, "block_pause")
    proxy_buffer: Annotated[int, _range(M.Pacing, "proxy_buffer")] | None = None
    read_events: list[Annotated[int, _range(M.Pacing, "read_events")]] | None = None
    read_delays: list[Annotated[float, _range(M.Pacing, "read_delays")]] | None = None


class UsageFile(_File):
    input_tokens: int = _bounded(M.Usage, "input_tokens")
    output_tokens: Annotated[int, _range(M.Usage, "output_tokens")] | None = None
    cache_creation_input_tokens: int = _bounded(M.Usage, "cache_creation_input_tokens")
    cache_read_input_tokens: int = _bounded(M.Usage, "cache_read_input_tokens")


Attempts = list[Annotated[int, Field(ge=0, le=M.MAX_ATTEMPT)]] | None
Count = Annotated[int, Field(ge=0, le=M.MAX_COUNT)]


class ErrorEventAfterFile(_File):
    type: Literal["error_event_after"]
    n_events: Count
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    attempts: Attempts = [0]


class DropAfterFile(_File):
    type: Literal["drop_after"]
    n_events: Count | None = None
    inside_block: Count | None = None
    after_fragments: Count = 1
    cut_bytes: Count = 0
    attempts: Attempts = [0]

    @model_validator(mode="after")
    def _one_of(self) -> DropAfterFile:
        if (self.n_events is None) == (self.inside_block is None):
            raise _custom("drop_after", "DropAfter needs exactly one of n_events / inside_block")
        return self


class StallWithPingsFile(_File):
    type: Literal["stall_with_pings"]
    after_events: Count = 1
    ping_interval: Seconds = 0.5
    pings: Annotated[int, Field(ge=0, le=M.MAX_PINGS)] = 20
    then: Literal["hang", "eof"] = "hang"
    attempts: Attempts = [0]


class MaxTokensCutFile(_File):
    type: Literal["max_tokens_cut"]
    block: Count
    keep_fragments: Count | None = None
    attempts: Attempts = None


class InvalidToolJsonFile(_File):
    type: Literal["invalid_tool_json"]
    block: Count
    raw_json: str | None = None
    attempts: Attempts = None


class InterleaveBlocksFile(_File):
    type: Literal["interleave_blocks"]
    attempts: Attempts = None


FAULT_FILES: dict[str, type[_File]] = {
    "error_event_after": ErrorEventAfterFile,
    "drop_after": DropAfterFile,
    "stall_with_pings": StallWithPingsFile,
    "max_tokens_cut": MaxTokensCutFile,
    "invalid_tool_json": InvalidToolJsonFile,
    "interleave_blocks": InterleaveBlocksFile,
}


def _kind_of_fault(v: object) -> str:
    if not isinstance(v, dict):
        return "@notafault"
    if "type" not in v:
        return "@notype"
    return f"@{v['type']}" if isinstance(v["type"], str) and v["type"] in FAULT_FILES else "@unknown"


def _not_a_fault(v: object) -> NoReturn:
    raise _custom("fault", f"expected a fault mapping with a 'type' ({', '.join(FAULT_FILES)})")


def _no_type(v: object) -> NoReturn:
    raise _custom("fault", f"missing required key 'type'; expected one of: {', '.join(FAULT_FILES)}")


def _unknown_fault(v: dict[Any, Any]) -> NoReturn:
    t = v["type"]
    shown = repr(t) if isinstance(t, str) else "a " + type(t).__name__
    raise _custom(
        "fault",
        f"unknown fault {shown}{did_you_mean(t, tuple(FAULT_FILES))}; expected one of: {', '.join(FAULT_FILES)}",
        at="type",
    )


FaultFile = Annotated[
    Union[
        Annotated[ErrorEventAfterFile, Tag("@error_event_after")],
        Annotated[DropAfterFile, Tag("@drop_after")],
        Annotated[StallWithPingsFile, Tag("@stall_with_pings")],
        Annotated[MaxTokensCutFile, Tag("@max_tokens_cut")],
        Annotated[InvalidToolJsonFile, Tag("@invalid_tool_json")],
        Annotated[InterleaveBlocksFile, Tag("@interleave_blocks")],
        SkipJsonSchema[Annotated[dict[Any, Any], AfterValidator(_unknown_fault), Tag("@unknown")]],
        SkipJsonSchema[Annotated[dict[Any, Any], AfterValidator(_no_type), Tag("@notype")]],
        SkipJsonSchema[Annotated[Any, AfterValidator(_not_a_fault), Tag("@notafault")]],
    ],
    Discriminator(_kind_of_fault),
]


class HttpErrorFile(_File):
    status: int = _bounded(M.HttpError, "status")
    attempt: int = _bounded(M.HttpError, "attempt")
    error_type: str | None = None
    message: str | None = None
    retry_after_ms: Annotated[int, _range(M.HttpError, "retry_after_ms")] | None = None
    retry_after: Annotated[float, _range(M.HttpError, "retry_after")] | None = None
    should_retry: bool | None = None
    delay: float = _bounded(M.HttpError, "delay")
    connect_error: str | None = None


class TurnFile(_File):
    blocks: list[BlockFile]
    stop_reason: M.StopReason = "end_turn"
    stop_sequence: str | None = None
    usage: UsageFile = Field(default_factory=UsageFile)
    pacing: PacingFile = Field(default_factory=PacingFile)
    faults: list[FaultFile] = Field(default_factory=list)
    http_errors: list[HttpErrorFile] = Field(default_factory=list)
    message_id: str | None = None
    system: str | None = Field(
        default=None, description="the system prompt the harness sends with this turn (default: the scenario's)"
    )


# --- tools -----------------------------------------------------------------------------------------------------------

BUILTINS = tuple(sorted(M.BUILTIN_TOOL_NAMES))


def _builtin_name(v: str) -> str:
    if v not in M.BUILTIN_TOOL_NAMES:
        raise _custom(
            "tool",
            f"{v!r} is not a built-in tool ({', '.join(BUILTINS)}); "
            "a simulated tool is a mapping with name, description, input_schema, result...",
        )
    return v


class BuiltinToolFile(_File):
    """A built-in tool with a simulated extra duration and/or a timeout."""

    builtin: M.BuiltinToolName
    duration: Duration | None = None
    timeout: Seconds | None = None


class CaseFile(_File):
    input: dict[str, Any]
    result: Any = None
    error: str | None = None
    hang: bool = False
    duration: Duration | None = None


class SimulatedToolFile(_File):
    """A simulated tool: answers `result` (or fails with `error`, or hangs) after `duration`."""

    name: OneLine
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    result: Any = "ok"
    error: str | None = None
    hang: bool = False
    duration: Duration = 0.0
    concurrency_safe: bool = True
    timeout: Seconds | None = None
    cases: list[CaseFile] = Field(default_factory=list)


def _kind_of_tool(v: object) -> str:
    if isinstance(v, str):
        return "@name"
    if isinstance(v, dict):
        return "@builtin" if "builtin" in v else "@simulated"
    return "@bad"


def _bad_tool(v: object) -> NoReturn:
    raise _custom("tool", "expected a built-in tool name or a tool mapping")


ToolFile = Annotated[
    Union[
        Annotated[
            str,
            AfterValidator(_builtin_name),
            WithJsonSchema({"enum": list(BUILTINS), "description": "a built-in tool over the workspace"}),
            Tag("@name"),
        ],
        Annotated[BuiltinToolFile, Tag("@builtin")],
        Annotated[SimulatedToolFile, Tag("@simulated")],
        SkipJsonSchema[Annotated[Any, AfterValidator(_bad_tool), Tag("@bad")]],
    ],
    Discriminator(_kind_of_tool),
]


# --- the file --------------------------------------------------------------------------------------------------------


def _version(v: int) -> int:
    if v != VERSION:
        raise _custom("version", f"this inspector reads version {VERSION}, got {v}")
    return v


def _name(v: str) -> str:
    if len(v) > MAX_NAME or not _NAME.match(v) or "\n" in v:
        raise _custom(
            "name",
            f"expected letters, digits, '_', '-' or '.' (starting with a letter or digit, at most {MAX_NAME}), "
            f"got {v[:40]!r}",
        )
    return v


def _turns(v: list[TurnFile]) -> list[TurnFile]:
    if not v:
        raise _custom("turns", "expected at least one turn")
    return v


class ScenarioFile(_File):
    """A scenario file."""

    format: Literal["stream-inspector-scenario"] = FORMAT  # (FORMAT: mypy checks that the two agree)
    version: Annotated[int, AfterValidator(_version), Field(json_schema_extra={"const": VERSION})]
    name: (
        Annotated[str, AfterValidator(_name), Field(json_schema_extra={"pattern": NAME_PATTERN, "maxLength": MAX_NAME})]
        | None
    ) = Field(default=None, description="default: the file name without .yaml")
    description: OneLine = Field(description="one line")
    prompt: str
    system: str | None = _default(M.Scenario, "system")
    model: OneLine = _default(M.Scenario, "model")
    max_tokens: int = _bounded(M.Scenario, "max_tokens")
    seed: int = _bounded(M.Scenario, "seed")
    workspace: str | None = None
    workspace_copy: bool = False
    allow_write: bool = False
    eager_input_streaming: bool = False
    thinking_budget: Annotated[int, _range(M.Scenario, "thinking_budget")] | None = None
    idle_timeout: Annotated[float, _range(M.Scenario, "idle_timeout")] | None = None
    cache_system: bool = Field(default=False, description="the request marks its system prompt with cache_control")
    tools: list[ToolFile] = Field(default_factory=list)
    expected: dict[str, Any] = Field(default_factory=dict)
    turns: Annotated[list[TurnFile], AfterValidator(_turns), Field(min_length=1)]

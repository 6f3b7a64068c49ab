"""Scenario files: the YAML form of a :class:`~inspector.scenarios.model.Scenario` (format
``stream-inspector-scenario``, version 1; docs/scenario-format.md describes it, docs/scenario.schema.json is its
JSON Schema).

    load_file("my.yaml") -> Scenario            # ScenarioFileError (an InspectorError) listing every problem
    check_file("my.yaml") -> list[Problem]      # each with file:line:column and what was expected
    dump_scenario(scenario) -> str              # the YAML text of a scenario (defaults left out)

The file is read with ``yaml.compose`` (``yaml.safe_load``'s parser: no tags, no objects) so every problem points at
the line and column of the offending key or value. The Python model stays the in-memory form; a file only loads into
it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import stat
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from inspector.core.errors import InspectorError

from . import model as M

FORMAT = "stream-inspector-scenario"
VERSION = 1
SUFFIXES = (".yaml", ".yml")

# --- limits (docs/limits.md): a file cannot ask for more than this; each is refused with its file:line:column ------
MAX_FILE_BYTES = 16 * 2**20  # the file itself
MAX_VALUES = 1_000_000  # values (scalars, lists, mappings) once every alias (*name) is expanded
MAX_CHARS = MAX_FILE_BYTES  # characters of all scalars once every alias is expanded: aliases cannot make a file bigger
MAX_DEPTH = 100  # lists and mappings nested in one another
MAX_INT_DIGITS = 100  # digits of any integer (Python refuses to read more than 4300)
MAX_EVENTS_PER_TURN = 100_000  # SSE events one turn renders (deltas, pings, stall pings...)
MAX_NAME = 100  # characters of a scenario name
MAX_CHUNK_SIZES = 10_000  # sizes in a chunk / fragment list

LINE_ENDINGS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}
_LE_NAMES = {v: k for k, v in LINE_ENDINGS.items()}

BLOCK_KINDS = ("text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "block")
_BLOCK_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text", "chunk"),
    "thinking": ("thinking", "signature", "chunk"),
    "redacted_thinking": ("redacted_thinking",),
    "tool_use": ("tool_use", "input", "raw_json", "fragment", "empty_first", "id", "extra"),
    "server_tool_use": ("server_tool_use", "input", "raw_json", "fragment", "empty_first", "id", "extra"),
    "block": ("block", "result_of"),
}
TOP_KEYS = (
    "format",
    "version",
    "name",
    "description",
    "prompt",
    "system",
    "model",
    "max_tokens",
    "seed",
    "workspace",
    "workspace_copy",
    "allow_write",
    "eager_input_streaming",
    "thinking_budget",
    "idle_timeout",
    "tools",
    "expected",
    "turns",
)
TURN_KEYS = ("blocks", "stop_reason", "stop_sequence", "usage", "pacing", "faults", "http_errors", "message_id")
BUILTIN_TOOL_KEYS = ("builtin", "duration", "timeout")
SIM_TOOL_KEYS = (
    "name",
    "description",
    "input_schema",
    "result",
    "error",
    "hang",
    "duration",
    "concurrency_safe",
    "timeout",
    "cases",
)
CASE_KEYS = ("input", "result", "error", "hang", "duration")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def fault_types() -> dict[str, type]:
    """File name of every fault type (``error_event_after``...), from the model's ``Fault`` union: a fault class
    added there is a file fault type at once."""
    return {_snake(cls.__name__): cls for cls in typing.get_args(M.Fault)}


# =====================================================================================================================
# problems
# =====================================================================================================================


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int  # 1-based
    column: int  # 1-based
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


class ScenarioFileError(InspectorError, ValueError):
    """A scenario file that cannot be loaded; ``problems`` lists every problem, the message is the first one."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        more = (
            f" (and {len(problems) - 1} more problems; `inspector scenario check` lists them)"
            if len(problems) > 1
            else ""
        )
        super().__init__(f"{problems[0]}{more}" if problems else "invalid scenario file")


class _Bad(Exception):
    """Internal: the value at this node is unusable (a problem has been recorded)."""


class _Reader:
    """Walks the composed YAML nodes, recording problems with their positions."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []
        self._constructor = yaml.constructor.SafeConstructor()

    # --- reporting ---------------------------------------------------------------------------------------------
    def problem(self, node: yaml.Node | None, message: str) -> None:
        message = " ".join(message.split("\n"))
        if node is None:
            self.problems.append(Problem(self.file, 1, 1, message))
        else:
            mark = node.start_mark
            self.problems.append(Problem(self.file, mark.line + 1, mark.column + 1, message))

    def bad(self, node: yaml.Node | None, message: str) -> _Bad:
        self.problem(node, message)
        return _Bad()

    # --- values ------------------------------------------------------------------------------------------------
    def plain(self, node: yaml.Node) -> Any:
        """Any YAML value as plain Python (JSON-like)."""
        try:
            if isinstance(node, yaml.MappingNode):
                self._constructor.flatten_mapping(node)
            value = self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as e:
            raise self.bad(node, f"cannot read this value: {getattr(e, 'problem', None) or e}") from None
        except (ValueError, RecursionError) as e:  # guarded by _check_graph; a last line of defence
            raise self.bad(node, f"cannot read this value: {str(e)[:80]}") from None
        finally:
            self._constructor.constructed_objects.clear()
            self._constructor.recursive_objects.clear()
        return value

    def describe(self, node: yaml.Node) -> str:
        if isinstance(node, yaml.MappingNode):
            return "a mapping"
        if isinstance(node, yaml.SequenceNode):
            return "a list"
        if _too_long_int(node):
            return f"a {len(node.value)}-character number"
        try:
            value = self.plain(node)
        except _Bad:
            return "an unreadable value"
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."

    def mapping(
        self, node: yaml.Node, where: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.bad(node, f"{where}: expected a mapping, got {self.describe(node)}")
        try:
            self._constructor.flatten_mapping(node)  # YAML merge keys (<<: *anchor)
        except yaml.YAMLError as e:
            raise self.bad(node, f"{where}: {getattr(e, 'problem', None) or e}") from None
        out: dict[str, yaml.Node] = {}
        keys: dict[str, yaml.Node] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else None
            if not isinstance(key, str) or not key:
                self.problem(knode, f"{where}: keys must be names, got {self.describe(knode)}")
                continue
            if key in out:
                self.problem(knode, f"{where}: duplicate key {key!r}")
                continue
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                self.problem(knode, f"{where}: unknown key {key!r}{hint}; expected one of: {', '.join(allowed)}")
                continue
            out[key] = vnode
            keys[key] = knode
        for key in required:
            if key not in out:
                self.problem(node, f"{where}: missing required key {key!r}")
        return out

    def sequence(self, node: yaml.Node, where: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.bad(node, f"{where}: expected a list, got {self.describe(node)}")
        return list(node.value)

    def str_(self, node: yaml.Node, where: str, *, null: bool = False, one_line: bool = False) -> Any:
        if null and _is_null(node):
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            expected = "a string or null" if null else "a string"
            raise self.bad(node, f"{where}: expected {expected}, got {self.describe(node)}")
        value = node.value
        if one_line and (not value or "\n" in value):
            raise self.bad(node, f"{where}: expected one non-empty line")
        return value

    def int_(
        self,
        node: yaml.Node,
        where: str,
        *,
        null: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Any:
        if null and _is_null(node):
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:int":
            expected = "an integer or null" if null else "an integer"
            raise self.bad(node, f"{where}: expected {expected}, got {self.describe(node)}")
        if _too_long_int(node):
            bound = f"an integer <= {_n(maximum)}" if maximum is not None else "an integer"
            raise self.bad(node, f"{where}: expected {bound}, got a {len(node.value)}-character number")
        value = self.plain(node)
        if minimum is not None and value < minimum:
            raise self.bad(node, f"{where}: expected an integer >= {_n(minimum)}, got {value}")
        if maximum is not None and value > maximum:
            raise self.bad(node, f"{where}: expected an integer <= {_n(maximum)}, got {value}")
        return value

    def num(
        self,
        node: yaml.Node,
        where: str,
        *,
        null: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Any:
        if null and _is_null(node):
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag not in (
            "tag:yaml.org,2002:int",
            "tag:yaml.org,2002:float",
        ):
            expected = "a number or null" if null else "a number"
            raise self.bad(node, f"{where}: expected {expected}, got {self.describe(node)}")
        if _too_long_int(node):
            bound = f"a number <= {_n(maximum)}" if maximum is not None else "a number"
            raise self.bad(node, f"{where}: expected {bound}, got a {len(node.value)}-character number")
        value = float(self.plain(node))
        if value != value or value in (float("inf"), float("-inf")):
            raise self.bad(node, f"{where}: expected a finite number, got {node.value}")
        if minimum is not None and value < minimum:
            raise self.bad(node, f"{where}: expected a number >= {_n(minimum)}, got {value:g}")
        if maximum is not None and value > maximum:
            raise self.bad(node, f"{where}: expected a number <= {_n(maximum)}, got {value:g}")
        return value

    def bool_(self, node: yaml.Node, where: str) -> bool:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            raise self.bad(node, f"{where}: expected true or false, got {self.describe(node)}")
        return bool(self.plain(node))

    def dict_(self, node: yaml.Node, where: str) -> dict:
        if not isinstance(node, yaml.MappingNode):
            raise self.bad(node, f"{where}: expected a mapping, got {self.describe(node)}")
        value = self.plain(node)
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise self.bad(node, f"{where}: keys must be strings, got {bad[0]!r}")
        return value


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _n(x: float) -> str:
    """A number as people write it: 3600, 0.5, 1000000 (not 1e+06)."""
    if isinstance(x, int):
        return str(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e18 else f"{x:g}"


def _too_long_int(node: yaml.Node) -> bool:
    return (
        isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int" and len(node.value) > MAX_INT_DIGITS
    )


# =====================================================================================================================
# loading
# =====================================================================================================================


_UNIONS = (typing.Union, types.UnionType)


def _field_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(M))


def _typed(r: _Reader, hint: Any, node: yaml.Node, where: str, bounds: tuple[float, float] | None = None) -> Any:
    """A value of the model's annotated type ``hint`` (the simple types dataclass fields use), inside ``bounds``
    (a number; each item of a tuple)."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    lo, hi = bounds if bounds is not None else (None, None)
    if origin in _UNIONS and type(None) in args:
        if _is_null(node):
            return None
        rest = [a for a in args if a is not type(None)]
        return _typed(r, rest[0], node, where, bounds)
    if origin is typing.Literal:
        if node.tag == "tag:yaml.org,2002:str" and isinstance(node, yaml.ScalarNode) and node.value in LINE_ENDINGS:
            if "\n" in args:
                return LINE_ENDINGS[node.value]
        value = r.plain(node) if isinstance(node, yaml.ScalarNode) else None
        if value not in args:
            shown = [_LE_NAMES.get(a, a) for a in args]
            raise r.bad(node, f"{where}: expected one of {', '.join(map(str, shown))}, got {r.describe(node)}")
        return value
    if origin is tuple:
        items = r.sequence(node, where)
        out = []
        for i, item in enumerate(items):
            out.append(_typed(r, args[0], item, f"{where}[{i}]", bounds))
        return tuple(out)
    if hint is bool:
        return r.bool_(node, where)
    if hint is int:
        return r.int_(node, where, minimum=lo, maximum=hi)
    if hint is float:
        return r.num(node, where, minimum=lo, maximum=hi)
    if hint is str:
        return r.str_(node, where)
    if hint is dict or origin is dict:
        return r.dict_(node, where)
    return r.plain(node)  # pragma: no cover - every model field type is handled above


def _dataclass(r: _Reader, cls: type, fields: dict[str, yaml.Node], where: str, node: yaml.Node, **fixed: Any) -> Any:
    """An instance of dataclass ``cls`` from the (already key-checked) ``fields``; a ValueError of its own checks
    becomes a problem at ``node``."""
    hints = _field_hints(cls)
    bounds = {f.name: M.bounds_of(f) for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = dict(fixed)
    failed = False
    for key, vnode in fields.items():
        try:
            kwargs[key] = _typed(r, hints[key], vnode, f"{where}.{key}", bounds[key])
        except _Bad:
            failed = True
    if failed:
        raise _Bad()
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise r.bad(node, f"{where}: {e}") from None


def _init_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _required_fields(cls: type) -> tuple[str, ...]:
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


def _chunk(r: _Reader, node: yaml.Node, where: str) -> M.ChunkSpec:
    """``5`` (fixed), ``[3, 5, 8]`` (sizes in turn) or ``{min: 3, max: 14}`` (seeded random sizes)."""
    if isinstance(node, yaml.MappingNode):
        m = r.mapping(node, where, ("min", "max"), ("min", "max"))
        if "min" not in m or "max" not in m:
            raise _Bad()
        lo = r.int_(m["min"], f"{where}.min", minimum=1, maximum=M.MAX_COUNT)
        hi = r.int_(m["max"], f"{where}.max", minimum=1, maximum=M.MAX_COUNT)
        if lo > hi:
            raise r.bad(node, f"{where}: min ({lo}) must be <= max ({hi})")
        return M.Sizes(lo, hi)
    if isinstance(node, yaml.SequenceNode):
        items = r.sequence(node, where)
        if not items:
            raise r.bad(node, f"{where}: expected at least one size")
        if len(items) > MAX_CHUNK_SIZES:
            raise r.bad(node, f"{where}: expected at most {MAX_CHUNK_SIZES} sizes, got {len(items)}")
        return [r.int_(item, f"{where}[{i}]", minimum=1, maximum=M.MAX_COUNT) for i, item in enumerate(items)]
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int":
        return int(r.int_(node, where, minimum=1, maximum=M.MAX_COUNT))
    raise r.bad(
        node, f"{where}: expected a size (integer >= 1), a list of sizes or {{min: N, max: M}}, got {r.describe(node)}"
    )


def _block(r: _Reader, node: yaml.Node, where: str, offered: set[str] | None = None) -> M.Block:
    if not isinstance(node, yaml.MappingNode):
        raise r.bad(node, f"{where}: expected a block (a mapping with one of: {', '.join(BLOCK_KINDS)})")
    names = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
    kinds = [k for k in names if k in BLOCK_KINDS]
    if len(kinds) != 1:
        got = f"both {kinds[0]!r} and {kinds[1]!r}" if len(kinds) > 1 else f"keys {', '.join(map(repr, names))}"
        raise r.bad(node, f"{where}: a block has exactly one of the keys {', '.join(BLOCK_KINDS)}; got {got}")
    kind = kinds[0]
    m = r.mapping(node, f"{where} ({kind})", _BLOCK_KEYS[kind])
    w = f"{where}.{kind}"
    if kind == "text":
        kw: dict[str, Any] = {"text": r.str_(m["text"], w)}
        if "chunk" in m:
            kw["chunk"] = _chunk(r, m["chunk"], f"{where}.chunk")
        return M.TextBlock(**kw)
    if kind == "thinking":
        kw = {"thinking": r.str_(m["thinking"], w)}
        if "signature" in m:
            kw["signature"] = r.str_(m["signature"], f"{where}.signature")
        if "chunk" in m:
            kw["chunk"] = _chunk(r, m["chunk"], f"{where}.chunk")
        return M.ThinkingBlock(**kw)
    if kind == "redacted_thinking":
        data = r.str_(m["redacted_thinking"], w, null=True)
        return M.RedactedThinkingBlock() if data is None else M.RedactedThinkingBlock(data)
    if kind in ("tool_use", "server_tool_use"):
        kw = {"name": r.str_(m[kind], w, one_line=True)}
        if kind == "tool_use" and offered is not None and kw["name"] not in offered:
            listed = ", ".join(sorted(offered)) or "none"
            r.problem(m[kind], f"{w}: tool {kw['name']!r} is not offered (tools: {listed})")
        if "input" in m:
            kw["input"] = r.dict_(m["input"], f"{where}.input")
        if "raw_json" in m:
            kw["raw_json"] = r.str_(m["raw_json"], f"{where}.raw_json")
        if "fragment" in m:
            kw["fragment"] = _chunk(r, m["fragment"], f"{where}.fragment")
        if "empty_first" in m:
            kw["empty_first"] = r.bool_(m["empty_first"], f"{where}.empty_first")
        if "id" in m:
            kw["id"] = r.str_(m["id"], f"{where}.id", null=True)
        if "extra" in m:
            kw["extra"] = r.dict_(m["extra"], f"{where}.extra")
        return M.ToolUseBlock(**kw) if kind == "tool_use" else M.ServerToolUseBlock(**kw)
    content = r.dict_(m["block"], w)
    if not isinstance(content.get("type"), str):
        raise r.bad(m["block"], f"{w}: a whole block needs a string 'type' (e.g. web_search_tool_result)")
    result_of = (
        r.int_(m["result_of"], f"{where}.result_of", null=True, minimum=0, maximum=M.MAX_COUNT)
        if "result_of" in m
        else None
    )
    return M.WholeBlock(content, result_of)


def _duration(r: _Reader, node: yaml.Node, where: str) -> M.Duration:
    """Seconds (``0.3``) or a seeded range (``[0.2, 0.6]``)."""
    if isinstance(node, yaml.SequenceNode):
        items = r.sequence(node, where)
        if len(items) != 2:
            raise r.bad(node, f"{where}: expected seconds or [min, max] seconds, got a list of {len(items)}")
        lo = r.num(items[0], f"{where}[0]", minimum=0, maximum=M.MAX_SECONDS)
        hi = r.num(items[1], f"{where}[1]", minimum=0, maximum=M.MAX_SECONDS)
        if lo > hi:
            raise r.bad(node, f"{where}: min ({lo:g}) must be <= max ({hi:g})")
        return (lo, hi)
    return float(r.num(node, where, minimum=0, maximum=M.MAX_SECONDS))


def _fault(r: _Reader, node: yaml.Node, where: str) -> M.Fault:
    types = fault_types()
    if not isinstance(node, yaml.MappingNode):
        raise r.bad(node, f"{where}: expected a fault mapping with a 'type' ({', '.join(types)})")
    tnode = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "type"), None)
    if tnode is None:
        raise r.bad(node, f"{where}: missing required key 'type'; expected one of: {', '.join(types)}")
    tname = r.plain(tnode) if isinstance(tnode, yaml.ScalarNode) else None
    cls = types.get(tname) if isinstance(tname, str) else None
    if cls is None:
        close = difflib.get_close_matches(str(tname), types, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise r.bad(
            tnode, f"{where}.type: unknown fault {r.describe(tnode)}{hint}; expected one of: {', '.join(types)}"
        )
    m = r.mapping(node, f"{where} ({tname})", ("type", *_init_fields(cls)), _required_fields(cls))
    m.pop("type", None)
    if any(k not in m for k in _required_fields(cls)):
        raise _Bad()
    return _dataclass(r, cls, m, where, node)


def _tool(r: _Reader, node: yaml.Node, where: str, sc: dict[str, Any]) -> None:
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str":
        name = node.value
        if name not in M.BUILTIN_TOOL_NAMES:
            raise r.bad(
                node,
                f"{where}: {name!r} is not a built-in tool ({', '.join(sorted(M.BUILTIN_TOOL_NAMES))}); "
                "a simulated tool is a mapping with name, description, input_schema, result...",
            )
        sc["tools"].append(name)
        sc["_tool_nodes"][name] = node
        return
    if not isinstance(node, yaml.MappingNode):
        raise r.bad(node, f"{where}: expected a built-in tool name or a tool mapping, got {r.describe(node)}")
    keys = {k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
    if "builtin" in keys:
        m = r.mapping(node, where, BUILTIN_TOOL_KEYS)
        name = r.str_(m["builtin"], f"{where}.builtin")
        if name not in M.BUILTIN_TOOL_NAMES:
            raise r.bad(m["builtin"], f"{where}.builtin: expected one of {', '.join(sorted(M.BUILTIN_TOOL_NAMES))}")
        sc["tools"].append(name)
        sc["_tool_nodes"][name] = m["builtin"]
        if "duration" in m:
            sc["tool_durations"][name] = _duration(r, m["duration"], f"{where}.duration")
        if "timeout" in m:
            sc["tool_timeouts"][name] = r.num(m["timeout"], f"{where}.timeout", minimum=0, maximum=M.MAX_SECONDS)
        return
    m = r.mapping(node, where, SIM_TOOL_KEYS, ("name",))
    if "name" not in m:
        raise _Bad()
    name = r.str_(m["name"], f"{where}.name", one_line=True)
    kw: dict[str, Any] = {"name": name}
    failed = False
    for key, vnode in m.items():
        w = f"{where}.{key}"
        try:
            if key == "description":
                kw[key] = r.str_(vnode, w)
            elif key == "input_schema":
                kw[key] = r.dict_(vnode, w)
            elif key == "result":
                kw[key] = r.plain(vnode)
            elif key == "error":
                kw[key] = r.str_(vnode, w, null=True)
            elif key in ("hang", "concurrency_safe"):
                kw[key] = r.bool_(vnode, w)
            elif key == "duration":
                kw[key] = _duration(r, vnode, w)
            elif key == "timeout":
                kw[key] = r.num(vnode, w, null=True, minimum=0, maximum=M.MAX_SECONDS)
            elif key == "cases":
                kw[key] = [_case(r, c, f"{w}[{i}]") for i, c in enumerate(r.sequence(vnode, w))]
        except _Bad:
            failed = True
    if failed:
        raise _Bad()
    sc["simulated_tools"].append(M.SimulatedTool(**kw))
    sc["_tool_nodes"][name] = m["name"]


def _case(r: _Reader, node: yaml.Node, where: str) -> M.ToolCase:
    m = r.mapping(node, where, CASE_KEYS, ("input",))
    if "input" not in m:
        raise _Bad()
    kw: dict[str, Any] = {"input": r.dict_(m["input"], f"{where}.input")}
    if "result" in m:
        kw["result"] = r.plain(m["result"])
    if "error" in m:
        kw["error"] = r.str_(m["error"], f"{where}.error", null=True)
    if "hang" in m:
        kw["hang"] = r.bool_(m["hang"], f"{where}.hang")
    if "duration" in m:
        kw["duration"] = _duration(r, m["duration"], f"{where}.duration")
    return M.ToolCase(**kw)


def _turn(r: _Reader, node: yaml.Node, where: str, offered: set[str]) -> tuple[M.TurnScript, dict]:
    m = r.mapping(node, where, TURN_KEYS, ("blocks",))
    if "blocks" not in m:
        raise _Bad()
    kw: dict[str, Any] = {}
    block_nodes: list[yaml.Node] = []
    failed = False

    def attempt(fn: Any) -> Any:
        nonlocal failed
        try:
            return fn()
        except _Bad:
            failed = True
            return None

    blocks = []
    for i, bnode in enumerate(attempt(lambda: r.sequence(m["blocks"], f"{where}.blocks")) or []):
        b = attempt(lambda bnode=bnode, i=i: _block(r, bnode, f"{where}.blocks[{i}]", offered))
        blocks.append(b)
        block_nodes.append(bnode)
    kw["blocks"] = blocks
    if "stop_reason" in m:
        kw["stop_reason"] = attempt(lambda: _choice(r, m["stop_reason"], f"{where}.stop_reason", M.STOP_REASONS))
    if "stop_sequence" in m:
        kw["stop_sequence"] = attempt(lambda: r.str_(m["stop_sequence"], f"{where}.stop_sequence", null=True))
    if "message_id" in m:
        kw["message_id"] = attempt(lambda: r.str_(m["message_id"], f"{where}.message_id", null=True))
    if "usage" in m:

        def usage() -> Any:
            u = r.mapping(m["usage"], f"{where}.usage", _init_fields(M.Usage))
            return _dataclass(r, M.Usage, u, f"{where}.usage", m["usage"])

        kw["usage"] = attempt(usage)
    if "pacing" in m:

        def pacing() -> Any:
            p = r.mapping(m["pacing"], f"{where}.pacing", _init_fields(M.Pacing))
            return _dataclass(r, M.Pacing, p, f"{where}.pacing", m["pacing"])

        kw["pacing"] = attempt(pacing)
    fault_nodes: list[yaml.Node] = []
    if "faults" in m:
        faults = []
        for i, fnode in enumerate(attempt(lambda: r.sequence(m["faults"], f"{where}.faults")) or []):
            faults.append(attempt(lambda fnode=fnode, i=i: _fault(r, fnode, f"{where}.faults[{i}]")))
            fault_nodes.append(fnode)
        kw["faults"] = faults
    if "http_errors" in m:
        errors = []
        for i, enode in enumerate(attempt(lambda: r.sequence(m["http_errors"], f"{where}.http_errors")) or []):

            def http_error(enode: yaml.Node = enode, i: int = i) -> Any:
                w = f"{where}.http_errors[{i}]"
                e = r.mapping(enode, w, _init_fields(M.HttpError))
                return _dataclass(r, M.HttpError, e, w, enode)

            errors.append(attempt(http_error))
        kw["http_errors"] = errors
    if failed:
        raise _Bad()
    turn = M.TurnScript(**kw)
    _check_turn(r, turn, where, node, block_nodes, fault_nodes)
    return turn, {"blocks": block_nodes}


def _choice(r: _Reader, node: yaml.Node, where: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``; an unknown one gets the "did you mean" an unknown key gets."""
    value = r.str_(node, where)
    if value not in choices:
        close = difflib.get_close_matches(value, choices, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise r.bad(node, f"{where}: unknown value {r.describe(node)}{hint}; expected one of: {', '.join(choices)}")
    return value


def _name(r: _Reader, node: yaml.Node) -> str:
    """A scenario name: it names temporary folders and files, so no path (``a/b``, ``..``) and one short word."""
    name = r.str_(node, "name", one_line=True)
    if len(name) > MAX_NAME or not _NAME.match(name):
        raise r.bad(
            node,
            f"name: expected letters, digits, '_', '-' or '.' (starting with a letter or digit, at most {MAX_NAME}), "
            f"got {r.describe(node)}",
        )
    return name


NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_NAME = re.compile(NAME_PATTERN)  # names are one line: $ is the end


def _min_chunk(spec: Any) -> tuple[int, int]:
    """(characters, deltas) of one cycle of a chunk spec, at its smallest: a bound on the deltas a text makes."""
    if isinstance(spec, M.Sizes):
        return spec.lo, 1
    if isinstance(spec, int):
        return spec, 1
    sizes = [int(s) for s in spec]
    return sum(sizes), len(sizes)


def _deltas(length: int, spec: Any) -> int:
    chars, deltas = _min_chunk(spec)
    return -(-length // max(chars, 1)) * deltas


def _block_events(b: M.Block) -> int:
    """At most how many events a block renders (start, deltas, stop)."""
    if isinstance(b, M.TextBlock):
        return 2 + _deltas(len(b.text), b.chunk)
    if isinstance(b, M.ThinkingBlock):
        return 3 + _deltas(len(b.thinking), b.chunk)
    if isinstance(b, (M.ToolUseBlock, M.ServerToolUseBlock)):
        text = b.raw_json if b.raw_json is not None else json.dumps(b.input)
        return 3 + _deltas(len(text), b.fragment)
    return 2


def _check_turn(
    r: _Reader, turn: M.TurnScript, where: str, node: yaml.Node, block_nodes: list, fault_nodes: list
) -> None:
    n = len(turn.blocks)
    sizes = [_block_events(b) for b in turn.blocks]
    events = 3 + sum(sizes)
    if turn.pacing.ping_every:
        events += events // turn.pacing.ping_every
    events += sum(f.pings for f in turn.faults if isinstance(f, M.StallWithPings))
    if events > MAX_EVENTS_PER_TURN:
        biggest = max(range(n), key=sizes.__getitem__) if n else None
        r.problem(
            node if biggest is None else block_nodes[biggest],
            f"{where}: this turn renders up to {events} events, more than {MAX_EVENTS_PER_TURN}"
            + (f" (blocks[{biggest}]: {sizes[biggest]})" if biggest is not None else "")
            + "; use bigger chunks or less text",
        )
    for i, b in enumerate(turn.blocks):
        if isinstance(b, M.WholeBlock) and b.result_of is not None:
            if not 0 <= b.result_of < n or not isinstance(
                turn.blocks[b.result_of], (M.ToolUseBlock, M.ServerToolUseBlock)
            ):
                r.problem(
                    block_nodes[i], f"{where}.blocks[{i}].result_of: {b.result_of} is not a tool block of this turn"
                )
    transport: list[tuple[int, Any]] = []
    for i, f in enumerate(turn.faults):
        block = getattr(f, "block", None)
        if isinstance(f, (M.MaxTokensCut, M.InvalidToolJson)) and not 0 <= f.block < n:
            r.problem(fault_nodes[i], f"{where}.faults[{i}].block: {block} is out of range (this turn has {n} blocks)")
        elif isinstance(f, M.InvalidToolJson) and not isinstance(
            turn.blocks[f.block], (M.ToolUseBlock, M.ServerToolUseBlock)
        ):
            r.problem(fault_nodes[i], f"{where}.faults[{i}].block: block {f.block} is not a tool block")
        if isinstance(f, M.DropAfter) and f.inside_block is not None and not 0 <= f.inside_block < n:
            r.problem(
                fault_nodes[i],
                f"{where}.faults[{i}].inside_block: {f.inside_block} is out of range (this turn has {n} blocks)",
            )
        if isinstance(f, (M.ErrorEventAfter, M.DropAfter, M.StallWithPings)):
            for j, g in transport:
                if f.attempts is None or g.attempts is None or set(f.attempts) & set(g.attempts):
                    r.problem(
                        fault_nodes[i],
                        f"{where}.faults[{i}]: at most one of error_event_after / drop_after / stall_with_pings per "
                        f"attempt; faults[{j}] applies to the same attempts",
                    )
                    break
            transport.append((i, f))
    seen: dict[int, int] = {}
    for i, e in enumerate(turn.http_errors):
        if e.attempt in seen:
            r.problem(
                node,
                f"{where}.http_errors[{i}]: attempt {e.attempt} already has an HTTP error (http_errors[{seen[e.attempt]}])",
            )
        seen[e.attempt] = i


def _scenario(r: _Reader, root: yaml.Node, path: Path | None) -> M.Scenario:
    m = r.mapping(root, "scenario", TOP_KEYS, ("version", "description", "prompt", "turns"))
    failed = False

    def attempt(fn: Any) -> Any:
        nonlocal failed
        try:
            return fn()
        except _Bad:
            failed = True
            return None

    if "format" in m:
        fmt = attempt(lambda: r.str_(m["format"], "format"))
        if fmt is not None and fmt != FORMAT:
            r.problem(m["format"], f"format: expected {FORMAT!r}, got {fmt!r}")
            failed = True
    if "version" in m:
        version = attempt(lambda: r.int_(m["version"], "version"))
        if version is not None and version != VERSION:
            r.problem(m["version"], f"version: this inspector reads version {VERSION}, got {version}")
            failed = True
    kw: dict[str, Any] = {}
    sc: dict[str, Any] = {
        "tools": [],
        "tool_durations": {},
        "tool_timeouts": {},
        "simulated_tools": [],
        "_tool_nodes": {},
    }
    if "name" in m:
        kw["name"] = attempt(lambda: _name(r, m["name"]))
    elif path is not None:
        kw["name"] = path.stem
    else:
        r.problem(root, "scenario: missing required key 'name'")
        failed = True
    for key in ("description",):
        if key in m:
            kw[key] = attempt(lambda key=key: r.str_(m[key], key, one_line=True))
    for key in ("prompt", "model"):
        if key in m:
            kw[key] = attempt(lambda key=key: r.str_(m[key], key, one_line=key == "model"))
    if "system" in m:
        kw["system"] = attempt(lambda: r.str_(m["system"], "system", null=True))
    bounds = {f.name: M.bounds_of(f) for f in dataclasses.fields(M.Scenario)}
    hints = _field_hints(M.Scenario)
    for key in ("max_tokens", "seed", "thinking_budget", "idle_timeout"):
        if key in m:
            kw[key] = attempt(lambda key=key: _typed(r, hints[key], m[key], key, bounds[key]))
    for key in ("workspace_copy", "allow_write", "eager_input_streaming"):
        if key in m:
            kw[key] = attempt(lambda key=key: r.bool_(m[key], key))
    if "expected" in m:
        kw["expected"] = attempt(lambda: r.dict_(m["expected"], "expected"))
    if "workspace" in m:
        ws = attempt(lambda: r.str_(m["workspace"], "workspace", null=True))
        if ws is not None:
            resolved = _workspace(ws, path)
            if resolved is None:
                r.problem(
                    m["workspace"],
                    f"workspace: no folder {ws!r} (a bundled workspace: {', '.join(_bundled_workspaces())}; "
                    "or a folder relative to the scenario file)",
                )
                failed = True
            kw["workspace"] = resolved
    if "tools" in m:
        for i, tnode in enumerate(attempt(lambda: r.sequence(m["tools"], "tools")) or []):
            attempt(lambda tnode=tnode, i=i: _tool(r, tnode, f"tools[{i}]", sc))
        names = [*sc["tools"], *(t.name for t in sc["simulated_tools"])]
        for name in {n for n in names if names.count(n) > 1}:
            r.problem(sc["_tool_nodes"].get(name), f"tools: {name!r} is offered twice")
            failed = True
    turns: list[M.TurnScript] = []
    if "turns" in m:
        tnodes = attempt(lambda: r.sequence(m["turns"], "turns")) or []
        if not tnodes and isinstance(m["turns"], yaml.SequenceNode):
            r.problem(m["turns"], "turns: expected at least one turn")
            failed = True
        offered = set(sc["tools"]) | {t.name for t in sc["simulated_tools"]}
        for i, tnode in enumerate(tnodes):
            got = attempt(lambda tnode=tnode, i=i: _turn(r, tnode, f"turns[{i}]", offered))
            if got is not None:
                turns.append(got[0])
    if failed or r.problems or any(k not in m for k in ("version", "description", "prompt", "turns")):
        raise _Bad()
    kw["turns"] = turns
    kw.update({k: v for k, v in sc.items() if not k.startswith("_")})
    if path is not None:
        kw["source_path"] = str(path)
    if sc["tools"] and kw.get("workspace") is None:
        first = sc["tools"][0]
        raise r.bad(
            sc["_tool_nodes"].get(first),
            f"tools: built-in tools ({', '.join(sc['tools'])}) run over a workspace: set `workspace:` "
            f"(a bundled one: {', '.join(_bundled_workspaces())}; or a folder relative to the scenario file)",
        )
    if kw.get("allow_write") and kw.get("workspace") and not kw.get("workspace_copy"):
        node = m.get("allow_write")
        raise r.bad(node, "allow_write: a scenario that writes must set workspace_copy: true (it runs on a copy)")
    try:
        return M.Scenario(**kw)
    except (ValueError, TypeError) as e:
        raise r.bad(root, str(e)) from None


def _bundled_workspaces() -> list[str]:
    return sorted(p.name for p in M.WORKSPACES_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _workspace(ws: str, path: Path | None) -> str | None:
    """A bundled workspace name as is; else a folder relative to the scenario file (absolute path)."""
    if "/" not in ws and "\\" not in ws and (M.WORKSPACES_DIR / ws).is_dir():
        return ws
    base = path.parent if path is not None else Path.cwd()
    folder = (base / ws).resolve()
    return str(folder) if folder.is_dir() else None


def _char_at(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if 0 <= line < len(lines) and 0 <= column < len(lines[line]):
        return lines[line][column]
    return ""


def _compose(r: _Reader, text: str) -> yaml.Node | None:
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader_cls)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or str(e)
        if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
            what += " (a tab: YAML indents with spaces)"
        if e.context:
            what = (
                f"{e.context}: {what}" if e.context_mark is None or e.problem_mark is None else f"{what} ({e.context})"
            )
        what = " ".join(what.split("\n"))
        r.problems.append(
            Problem(r.file, mark.line + 1 if mark else 1, mark.column + 1 if mark else 1, f"YAML: {what}")
        )
        return None
    except yaml.reader.ReaderError as e:
        before = text[: e.position]
        line, col = before.count("\n") + 1, e.position - (before.rfind("\n") + 1) + 1
        r.problems.append(Problem(r.file, line, col, f"YAML: {e.reason} (character {e.character!r})"))
        return None
    except yaml.YAMLError as e:
        r.problem(None, "YAML: " + " ".join(str(e).split()))
        return None
    if node is None:
        r.problem(None, "the file is empty: expected a scenario mapping (see `inspector scenario new`)")
        return None
    return node if _check_graph(r, node) else None


def _check_graph(r: _Reader, root: yaml.Node) -> bool:
    """Refuse a document that is too big once its aliases are expanded (a "billion laughs": a few anchors that
    expand to gigabytes), recursive (``&a [*a]``), nested too deep, or that holds an integer too long to read.
    Walks each node once (the composer shares an anchor's node among its aliases), without expanding anything."""
    values: dict[int, int] = {}  # node id -> values it holds, aliases expanded
    chars: dict[int, int] = {}  # node id -> scalar characters it holds, aliases expanded
    uses: dict[int, int] = {}  # node id -> parents that hold it (> 1: an anchor used by aliases)
    nodes: dict[int, yaml.Node] = {}
    open_: set[int] = set()
    ok = True
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            kids = _children(node)
            values[key] = 1 + sum(values[id(k)] for k in kids)
            chars[key] = (len(node.value) if isinstance(node, yaml.ScalarNode) else 0) + sum(chars[id(k)] for k in kids)
            continue
        uses[key] = uses.get(key, 0) + 1
        if key in values:
            continue
        if key in open_:
            r.problem(node, "YAML: a recursive alias (an anchor used inside itself)")
            return False
        if depth > MAX_DEPTH:
            r.problem(node, f"YAML: lists and mappings nested more than {MAX_DEPTH} deep")
            return False
        if _too_long_int(node):
            r.problem(node, f"an integer of {len(node.value)} characters (at most {MAX_INT_DIGITS})")
            ok = False
        nodes[key] = node
        open_.add(key)
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in _children(node))
    total, size = values[id(root)], chars[id(root)]
    if total > MAX_VALUES or size > MAX_CHARS:
        # blame the anchor whose copies weigh most
        shared = [k for k, n in uses.items() if n > 1]
        worst = max(shared, key=lambda k: (uses[k] - 1) * values[k], default=id(root))
        what = f"{total} values" if total > MAX_VALUES else f"{size} characters"
        limit = f"{MAX_VALUES} values" if total > MAX_VALUES else f"{MAX_CHARS} characters"
        where = (
            f"; the anchor here is used {uses[worst]} times, {values[worst]} values each" if worst != id(root) else ""
        )
        r.problem(nodes[worst], f"YAML: with its aliases expanded the file holds {what}, more than {limit}{where}")
        return False
    return ok


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _parse(text: str, file: str, path: Path | None) -> tuple[M.Scenario | None, list[Problem]]:
    r = _Reader(file)
    root = _compose(r, text)
    if root is None:
        return None, r.problems
    try:
        sc = _scenario(r, root, path)
    except _Bad:
        return None, r.problems or [Problem(file, 1, 1, "invalid scenario")]
    return sc, r.problems


def _read(path: str | Path) -> tuple[str, Path]:
    """The file's text: a regular file (not a FIFO or a device like /dev/zero) of at most MAX_FILE_BYTES."""
    p = Path(path)

    def refuse(message: str) -> ScenarioFileError:
        return ScenarioFileError([Problem(str(p), 1, 1, message)])

    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    except OSError as e:
        raise refuse(f"cannot read the file: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise refuse(f"cannot read the file: {kind}")
        if st.st_size > MAX_FILE_BYTES:
            raise refuse(f"the file has {st.st_size} bytes, more than {MAX_FILE_BYTES} (docs/limits.md)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise refuse(f"the file has more than {MAX_FILE_BYTES} bytes (docs/limits.md)")
    except OSError as e:
        raise refuse(f"cannot read the file: {e.strerror or e}") from None
    finally:
        os.close(fd)
    try:
        return raw.decode("utf-8-sig"), p
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ScenarioFileError([Problem(str(p), line, col, f"not UTF-8 text (byte {raw[e.start]:#04x})")]) from None


def check_text(text: str, file: str = "<scenario>", path: Path | None = None) -> list[Problem]:
    """Every problem of a scenario file's text (empty: it loads)."""
    return _parse(text, file, path)[1]


def check_file(path: str | Path) -> list[Problem]:
    try:
        text, p = _read(path)
    except ScenarioFileError as e:
        return e.problems
    return check_text(text, str(path), p)


def load_text(text: str, file: str = "<scenario>", path: Path | None = None) -> M.Scenario:
    sc, problems = _parse(text, file, path)
    if sc is None or problems:
        raise ScenarioFileError(problems)
    return sc


def load_file(path: str | Path) -> M.Scenario:
    """The scenario a file describes; :class:`ScenarioFileError` (one line: the first problem) otherwise."""
    text, p = _read(path)
    return load_text(text, str(path), p)


# =====================================================================================================================
# dumping
# =====================================================================================================================


def _default_of(cls: type, name: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return dataclasses.MISSING


def _plain_fields(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init or f.name in skip:
            continue
        value = getattr(obj, f.name)
        if value == _default_of(type(obj), f.name) and f.name not in _required_fields(type(obj)):
            continue
        if isinstance(value, tuple):
            value = list(value)
        if f.name == "line_ending":
            value = _LE_NAMES[value]
        out[f.name] = value
    return out


def _chunk_out(spec: Any) -> Any:
    if isinstance(spec, M.Sizes):
        return {"min": spec.lo, "max": spec.hi}
    if isinstance(spec, int):
        return spec
    return [int(s) for s in spec]


def _block_out(b: M.Block) -> dict:
    if isinstance(b, M.TextBlock):
        d: dict[str, Any] = {"text": b.text}
        if b.chunk != _default_of(M.TextBlock, "chunk"):
            d["chunk"] = _chunk_out(b.chunk)
        return d
    if isinstance(b, M.ThinkingBlock):
        d = {"thinking": b.thinking}
        if b.signature != _default_of(M.ThinkingBlock, "signature"):
            d["signature"] = b.signature
        if b.chunk != _default_of(M.ThinkingBlock, "chunk"):
            d["chunk"] = _chunk_out(b.chunk)
        return d
    if isinstance(b, M.RedactedThinkingBlock):
        return {"redacted_thinking": None if b.data == _default_of(M.RedactedThinkingBlock, "data") else b.data}
    if isinstance(b, (M.ToolUseBlock, M.ServerToolUseBlock)):
        cls = type(b)
        d = {b.type: b.name}
        if b.raw_json is None or b.input != {}:
            d["input"] = b.input
        if b.raw_json is not None:
            d["raw_json"] = b.raw_json
        if b.fragment != _default_of(cls, "fragment"):
            d["fragment"] = _chunk_out(b.fragment)
        if not b.empty_first:
            d["empty_first"] = False
        if b.id is not None:
            d["id"] = b.id
        if b.extra:
            d["extra"] = b.extra
        return d
    d = {"block": b.content}
    if b.result_of is not None:
        d["result_of"] = b.result_of
    return d


def _duration_out(d: M.Duration) -> Any:
    return list(d) if isinstance(d, tuple) else d


def scenario_to_data(sc: M.Scenario) -> dict[str, Any]:
    """The scenario as the plain data of its file (defaults left out). Tools given as Python ToolSpecs
    (``extra_tools``) cannot be written: they raise ValueError."""
    if sc.extra_tools:
        raise ValueError(
            f"scenario {sc.name!r}: Python tools ({', '.join(t.name for t in sc.extra_tools)}) have no file form; "
            "make them simulated tools"
        )
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": sc.name, "description": sc.description}
    out["prompt"] = sc.prompt
    for key in ("system", "model", "max_tokens", "seed"):
        if getattr(sc, key) != _default_of(M.Scenario, key):
            out[key] = getattr(sc, key)
    for key in (
        "workspace",
        "workspace_copy",
        "allow_write",
        "eager_input_streaming",
        "thinking_budget",
        "idle_timeout",
    ):
        if getattr(sc, key) != _default_of(M.Scenario, key):
            out[key] = getattr(sc, key)
    tools: list[Any] = []
    for name in sc.tools:
        if name in sc.tool_durations or name in sc.tool_timeouts:
            t: dict[str, Any] = {"builtin": name}
            if name in sc.tool_durations:
                t["duration"] = _duration_out(sc.tool_durations[name])
            if name in sc.tool_timeouts:
                t["timeout"] = sc.tool_timeouts[name]
            tools.append(t)
        else:
            tools.append(name)
    for sim in sc.simulated_tools:
        d = _plain_fields(sim, skip=("cases", "duration", "timeout"))
        d = {"name": sim.name, **{k: v for k, v in d.items() if k != "name"}}
        if sim.duration:
            d["duration"] = _duration_out(sim.duration)
        timeout = sc.tool_timeouts.get(sim.name, sim.timeout)
        if timeout is not None:
            d["timeout"] = timeout
        if sim.cases:
            d["cases"] = []
            for c in sim.cases:
                cd = _plain_fields(c, skip=("duration",))
                if c.duration is not None:
                    cd["duration"] = _duration_out(c.duration)
                d["cases"].append(cd)
        tools.append(d)
    if tools:
        out["tools"] = tools
    turns = []
    for turn in sc.turns:
        t = {"blocks": [_block_out(b) for b in turn.blocks]}
        t.update(_plain_fields(turn, skip=("blocks", "usage", "pacing", "faults", "http_errors")))
        usage = _plain_fields(turn.usage)
        if usage:
            t["usage"] = usage
        pacing = _plain_fields(turn.pacing)
        if pacing:
            t["pacing"] = pacing
        if turn.faults:
            t["faults"] = [{"type": _snake(type(f).__name__), **_plain_fields(f)} for f in turn.faults]
        if turn.http_errors:
            t["http_errors"] = [_plain_fields(e) for e in turn.http_errors]
        turns.append(t)
    out["turns"] = turns
    if sc.expected:
        out["expected"] = sc.expected
    return out


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a file people edit: no &id001 / *id001


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value.rstrip("\n") or (value.endswith("\n") and len(value) > 1):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_representer)


def dump_data(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=116, default_flow_style=None)


def dump_scenario(sc: M.Scenario, header: str | None = None) -> str:
    """The YAML text of a scenario file (``header``: comment lines put first)."""
    text = dump_data(scenario_to_data(sc))
    if header:
        text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + text
    return text


# =====================================================================================================================
# JSON Schema (docs/scenario.schema.json is this, written out: tests keep the two equal)
# =====================================================================================================================


def _schema_of_hint(hint: Any, bounds: tuple[float, float] | None = None) -> dict:
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in _UNIONS and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return {"anyOf": [_schema_of_hint(rest[0], bounds), {"type": "null"}]}
    if origin is typing.Literal:
        if "\n" in args:
            return {"enum": list(LINE_ENDINGS)}
        return {"enum": list(args)}
    if origin is tuple:
        return {"type": "array", "items": _schema_of_hint(args[0], bounds)}
    if hint is bool:
        return {"type": "boolean"}
    if hint in (int, float):
        return {"type": "integer" if hint is int else "number", **_range(bounds)}
    if hint is str:
        return {"type": "string"}
    return {"type": "object"}


def _range(bounds: tuple[float, float] | None) -> dict:
    return {} if bounds is None else {"minimum": bounds[0], "maximum": bounds[1]}


def _field_schema(cls: type, name: str) -> dict:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return _schema_of_hint(_field_hints(cls)[name], M.bounds_of(f))


def _schema_of_dataclass(cls: type, extra: dict | None = None) -> dict:
    props = {name: _field_schema(cls, name) for name in _init_fields(cls)}
    props.update(extra or {})
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    required = list(_required_fields(cls)) + [k for k in (extra or {}) if k == "type"]
    if required:
        out["required"] = required
    return out


def json_schema() -> dict:
    """The JSON Schema of scenario files (structure and types; the loader checks the rest, with positions)."""
    size = {"type": "integer", "minimum": 1, "maximum": M.MAX_COUNT}
    seconds = {"type": "number", "minimum": 0, "maximum": M.MAX_SECONDS}
    chunk = {
        "description": "characters per delta: a size, sizes used in turn, or seeded random sizes",
        "anyOf": [
            size,
            {"type": "array", "items": size, "minItems": 1, "maxItems": MAX_CHUNK_SIZES},
            {
                "type": "object",
                "properties": {"min": size, "max": size},
                "required": ["min", "max"],
                "additionalProperties": False,
            },
        ],
    }
    duration = {
        "description": "scenario seconds, or [min, max] drawn per call (seeded)",
        "anyOf": [
            seconds,
            {"type": "array", "items": seconds, "minItems": 2, "maxItems": 2},
        ],
    }
    tool_common = {
        "input": {"type": "object"},
        "raw_json": {"type": "string"},
        "fragment": {"$ref": "#/$defs/chunk"},
        "empty_first": {"type": "boolean"},
        "id": {"type": ["string", "null"]},
        "extra": {"type": "object"},
    }

    def block(kind: str, props: dict) -> dict:
        return {"type": "object", "properties": props, "required": [kind], "additionalProperties": False}

    blocks = [
        block("text", {"text": {"type": "string"}, "chunk": {"$ref": "#/$defs/chunk"}}),
        block(
            "thinking",
            {"thinking": {"type": "string"}, "signature": {"type": "string"}, "chunk": {"$ref": "#/$defs/chunk"}},
        ),
        block("redacted_thinking", {"redacted_thinking": {"type": ["string", "null"]}}),
        block("tool_use", {"tool_use": {"type": "string"}, **tool_common}),
        block("server_tool_use", {"server_tool_use": {"type": "string"}, **tool_common}),
        block(
            "block",
            {
                "block": {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]},
                "result_of": {"type": ["integer", "null"], "minimum": 0, "maximum": M.MAX_COUNT},
            },
        ),
    ]
    faults = [_schema_of_dataclass(cls, {"type": {"const": name}}) for name, cls in fault_types().items()]
    case = {
        "type": "object",
        "properties": {
            "input": {"type": "object"},
            "result": {},
            "error": {"type": ["string", "null"]},
            "hang": {"type": "boolean"},
            "duration": {"$ref": "#/$defs/duration"},
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    tool = {
        "anyOf": [
            {"enum": sorted(M.BUILTIN_TOOL_NAMES), "description": "a built-in tool over the workspace"},
            {
                "type": "object",
                "description": "a built-in tool with a simulated extra duration and/or a timeout",
                "properties": {
                    "builtin": {"enum": sorted(M.BUILTIN_TOOL_NAMES)},
                    "duration": {"$ref": "#/$defs/duration"},
                    "timeout": seconds,
                },
                "required": ["builtin"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "description": "a simulated tool: answers `result` (or fails with `error`, or hangs) after `duration`",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "input_schema": {"type": "object"},
                    "result": {},
                    "error": {"type": ["string", "null"]},
                    "hang": {"type": "boolean"},
                    "duration": {"$ref": "#/$defs/duration"},
                    "concurrency_safe": {"type": "boolean"},
                    "timeout": {"anyOf": [seconds, {"type": "null"}]},
                    "cases": {"type": "array", "items": case},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        ]
    }
    turn = {
        "type": "object",
        "properties": {
            "blocks": {"type": "array", "items": {"anyOf": blocks}},
            "stop_reason": {"enum": list(M.STOP_REASONS)},
            "stop_sequence": {"type": ["string", "null"]},
            "usage": _schema_of_dataclass(M.Usage),
            "pacing": _schema_of_dataclass(M.Pacing),
            "faults": {"type": "array", "items": {"anyOf": faults}},
            "http_errors": {"type": "array", "items": _schema_of_dataclass(M.HttpError)},
            "message_id": {"type": ["string", "null"]},
        },
        "required": ["blocks"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://stream-inspector.invalid/scenario.schema.json",
        "title": f"Stream Inspector scenario file ({FORMAT}, version {VERSION})",
        "description": "See docs/scenario-format.md. `inspector scenario check FILE` checks a file with positions.",
        "type": "object",
        "properties": {
            "format": {"const": FORMAT},
            "version": {"const": VERSION},
            "name": {
                "type": "string",
                "pattern": NAME_PATTERN,
                "maxLength": MAX_NAME,
                "description": "default: the file name without .yaml",
            },
            "description": {"type": "string", "description": "one line"},
            "prompt": {"type": "string"},
            "system": {"type": ["string", "null"]},
            "model": {"type": "string"},
            "max_tokens": _field_schema(M.Scenario, "max_tokens"),
            "seed": _field_schema(M.Scenario, "seed"),
            "workspace": {"type": ["string", "null"]},
            "workspace_copy": {"type": "boolean"},
            "allow_write": {"type": "boolean"},
            "eager_input_streaming": {"type": "boolean"},
            "thinking_budget": _field_schema(M.Scenario, "thinking_budget"),
            "idle_timeout": _field_schema(M.Scenario, "idle_timeout"),
            "tools": {"type": "array", "items": tool},
            "expected": {"type": "object"},
            "turns": {"type": "array", "items": turn, "minItems": 1},
        },
        "required": ["version", "description", "prompt", "turns"],
        "additionalProperties": False,
        "$defs": {"chunk": chunk, "duration": duration},
    }


def json_schema_text() -> str:
    """docs/scenario.schema.json, byte for byte (``inspector scenario schema`` prints it; a test compares)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"

"""Scenario files: the YAML form of a :class:`~inspector.scenarios.model.Scenario` (format
``stream-inspector-scenario``, version 1; docs/scenario-format.md describes it, docs/scenario.schema.json is its
JSON Schema).

    load_file("my.yaml") -> Scenario            # ScenarioFileError (an InspectorError) listing every problem
    check_file("my.yaml") -> list[Problem]      # each with file:line:column and what was expected
    dump_scenario(scenario) -> str              # the YAML text of a scenario (defaults left out)

The file is read into YAML nodes as ``yaml.compose`` reads it (``yaml.safe_load``'s parser: no tags, no objects; in
compact nodes, see ``_compose_compact``: at most MAX_VALUES of them), checked for size (aliases
expanded), depth and duplicate keys, then validated by its one declaration, the pydantic models of ``filemodel``
(the JSON Schema is generated from them); each error's location is mapped back to its YAML node, so every problem
points at the line and column of the offending key or value. The Python model stays the in-memory form; a file only
loads into it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import stat
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from inspector.core.errors import InspectorError

from . import filemodel as F
from . import model as M

FORMAT = F.FORMAT
VERSION = F.VERSION
SUFFIXES = (".yaml", ".yml")

# --- limits (docs/limits.md): a file cannot ask for more than this; each is refused with its file:line:column ------
MAX_FILE_BYTES = 16 * 2**20  # the file itself
MAX_VALUES = 1_000_000  # values (scalars, lists, mappings) once every alias (*name) is expanded
MAX_CHARS = MAX_FILE_BYTES  # characters of all scalars once every alias is expanded: aliases cannot make a file bigger
MAX_DEPTH = 100  # lists and mappings nested in one another
MAX_INT_DIGITS = 100  # digits of any integer (Python refuses to read more than 4300)
MAX_EVENTS_PER_TURN = 100_000  # SSE events one turn renders (deltas, pings, stall pings...)
MAX_NAME = F.MAX_NAME
MAX_CHUNK_SIZES = F.MAX_CHUNK_SIZES
NAME_PATTERN = F.NAME_PATTERN

LINE_ENDINGS = F.LINE_ENDINGS
_LE_NAMES = {v: k for k, v in LINE_ENDINGS.items()}
BLOCK_KINDS = F.BLOCK_KINDS
_snake = F.snake_name
fault_types = F.fault_types


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
        self._constructor = _Constructor()

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
            message = f"cannot read this value: {getattr(e, 'problem', None) or e}"
            mark = getattr(e, "problem_mark", None)  # where the value is (an unknown tag's node), not the root's 1:1
            if mark is None:
                raise self.bad(node, message) from None
            self.problems.append(Problem(self.file, mark.line + 1, mark.column + 1, " ".join(message.split("\n"))))
            raise _Bad() from None
        except ValueError as e:  # a scalar YAML resolves but cannot construct ('2024-13-45', '!!int abc')
            raise self.bad(self._unreadable(node) or node, f"cannot read this value: {str(e)[:80]}") from None
        except RecursionError as e:  # guarded by _check_graph; a last line of defence
            raise self.bad(node, f"cannot read this value: {str(e)[:80]}") from None
        finally:
            self._constructor.constructed_objects.clear()
            self._constructor.recursive_objects.clear()
        return value

    def _unreadable(self, node: yaml.Node) -> yaml.Node | None:
        """The first scalar under ``node`` that cannot be constructed (where the problem is, not the 1:1 of the
        whole document's mapping); None if none is found."""
        seen: set[int] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if not isinstance(n, yaml.ScalarNode):
                stack.extend(reversed(_children(n)))
                continue
            try:
                self._constructor.construct_object(n)
            except (ValueError, yaml.YAMLError):
                return n
            finally:
                self._constructor.constructed_objects.clear()
        return None

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
        if isinstance(value, (str, int, float, bool)) or value is None:
            text = repr(value)
        else:  # (a YAML date or timestamp...: what the file says, not a Python repr)
            text = f"{type(value).__name__} {getattr(node, 'value', '')}"
        return text if len(text) <= 40 else text[:37] + "..."


def _n(x: float) -> str:
    """A number as people write it: 3600, 0.5, 1000000 (not 1e+06)."""
    if isinstance(x, int):
        return str(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e18 else f"{x:g}"


def _too_long_int(node: yaml.Node) -> bool:
    return (
        isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int" and len(node.value) > MAX_INT_DIGITS
    )


def _required_fields(cls: type) -> tuple[str, ...]:
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


# =====================================================================================================================
# loading: the data is validated by the declaration (filemodel.ScenarioFile); each error's location is mapped back
# to its YAML node
# =====================================================================================================================


def _keys(r: _Reader, root: yaml.Node) -> bool:
    """Every mapping's keys are strings, each once (YAML merge keys aside): the constructor would keep the last of
    two silently. Only lists and mappings are walked, each once, and where one is (for a message) is kept as a chain
    of steps, spelt out for a problem only: a list of a million numbers costs no string per number."""
    seen: set[int] = set()
    ok = True
    stack: list[tuple[yaml.Node, _Steps]] = [(root, None)]
    while stack:
        node, at = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((item, (at, i)) for i, item in enumerate(node.value) if not isinstance(item, yaml.ScalarNode))
        elif isinstance(node, yaml.MappingNode):
            names: set[str] = set()
            for knode, vnode in node.value:
                if knode.tag == "tag:yaml.org,2002:merge":
                    stack.append((vnode, at))
                    continue
                if not isinstance(knode, yaml.ScalarNode) or knode.tag != "tag:yaml.org,2002:str" or not knode.value:
                    r.problem(knode, f"{_spelt(at)}: keys must be strings, got {r.describe(knode)}")
                    ok = False
                    continue
                if knode.value in names:
                    r.problem(knode, f"{_spelt(at)}: duplicate key {knode.value!r}")
                    ok = False
                names.add(knode.value)
                if not isinstance(vnode, yaml.ScalarNode):
                    stack.append((vnode, (at, knode.value)))
    return ok


_Steps = Union[tuple["_Steps", Union[str, int]], None]  # where a node is: (where its parent is, the key or index)


def _spelt(at: _Steps) -> str:
    """A chain of steps as a message says where: ``turns[0].pacing`` (``scenario`` for the top)."""
    steps: list[str | int] = []
    while at is not None:
        at, step = at
        steps.append(step)
    return _where(steps[::-1])


def _node_at(root: yaml.Node, path: list[str | int]) -> tuple[yaml.Node, yaml.Node | None, int]:
    """The node at ``path`` (keys and indexes), its key node (for a mapping value), and how many steps were found
    (the deepest node found when the path goes further than the nodes)."""
    node, key = root, None
    for depth, step in enumerate(path):
        nxt = None
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = _keys_of(node).get(step)
            if found is not None:
                key, nxt = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            nxt, key = node.value[step], None
        if nxt is None:
            return node, None, depth
        node = nxt
    return node, key, len(path)


def _keys_of(node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """A mapping node's scalar keys -> (key node, value node), the last pair of a key winning (merged pairs come
    first: the file's own win); made once per node and kept on it, so that finding N keys' nodes (N problems: a file
    of 16,000 unknown keys) is linear, not N scans of the mapping (9 s for that file)."""
    index = _KEY_INDEX.get(node)
    if index is None:
        index = _KEY_INDEX[node] = {}  # (a composed node is never changed after)
        for knode, vnode in node.value:
            if isinstance(knode, yaml.ScalarNode):
                index[knode.value] = (knode, vnode)
    return index


_KEY_INDEX: weakref.WeakKeyDictionary[yaml.MappingNode, dict[str, tuple[yaml.Node, yaml.Node]]] = (
    weakref.WeakKeyDictionary()
)


def _where(path: list[str | int]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "scenario"


_BY_TAG: dict[str, type[BaseModel]] = {
    "@text": F.TextFile,
    "@thinking": F.ThinkingFile,
    "@redacted_thinking": F.RedactedThinkingFile,
    "@tool_use": F.ToolUseFile,
    "@server_tool_use": F.ServerToolUseFile,
    "@block": F.WholeFile,
    "@builtin": F.BuiltinToolFile,
    "@simulated": F.SimulatedToolFile,
    "@range": F.SizesFile,
    **{f"@{name}": cls for name, cls in F.FAULT_FILES.items()},
}
_BY_KEY: dict[str | None, type[BaseModel]] = {
    None: F.ScenarioFile,
    "turns": F.TurnFile,
    "pacing": F.PacingFile,
    "usage": F.UsageFile,
    "http_errors": F.HttpErrorFile,
    "cases": F.CaseFile,
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "line_ending": tuple(F.LINE_ENDINGS),
    "stop_reason": M.STOP_REASONS,
    "then": ("hang", "eof"),
    "builtin": F.BUILTINS,
    "format": (FORMAT,),
}
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}
_BOUNDS = {"greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le")}


def _model_of(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The file model whose instance is at ``loc``."""
    if loc and isinstance(loc[-1], str) and loc[-1].startswith("@"):
        return _BY_TAG.get(loc[-1])
    names = [p for p in loc if isinstance(p, str) and not p.startswith("@")]
    return _BY_KEY.get(names[-1] if names else None)


def _report(r: _Reader, root: yaml.Node, err: ErrorDetails) -> None:
    """One pydantic error as a problem at its node, in the words `scenario check` has always used."""
    loc, kind, ctx = tuple(err["loc"]), err["type"], err.get("ctx") or {}
    path = [p for p in loc if not (isinstance(p, str) and p.startswith("@"))]
    tag = next((p[1:] for p in reversed(loc) if isinstance(p, str) and p.startswith("@")), None)
    if kind in ("extra_forbidden", "missing"):
        parent = loc[:-1]
        key = str(loc[-1])
        where = _where(path[:-1])
        if parent and isinstance(parent[-1], str) and parent[-1][1:] in (*F.BLOCK_KINDS, *F.FAULT_FILES):
            where += f" ({parent[-1][1:]})"  # which kind of block or fault
        if kind == "missing":
            node, _, _ = _node_at(root, path[:-1])
            r.problem(node, f"{where}: missing required key {key!r}")
            return
        _, knode, _ = _node_at(root, path)
        model = _model_of(parent)
        allowed = list(model.model_fields) if model is not None else []
        hint = F.did_you_mean(key, allowed)
        r.problem(knode, f"{where}: unknown key {key!r}{hint}; expected one of: {', '.join(allowed)}")
        return
    at = ctx.get("at") if isinstance(ctx, dict) else None
    if at:
        path = [*path, at]
    node, _, found = _node_at(root, path)
    where = _where(path[:found] if found < len(path) else path)
    got = r.describe(node)
    if kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {got}"
    elif kind == "finite_number":
        message = f"expected a finite number, got {getattr(node, 'value', got)}"
    elif kind in _BOUNDS:
        op, name = _BOUNDS[kind]
        bound = ctx[name]
        value = err["input"]
        if isinstance(bound, float):
            message = f"expected a number {op} {_n(bound)}, got {float(value):g}"
        else:
            message = f"expected an integer {op} {_n(bound)}, got {value}"
    elif kind == "literal_error":
        last = next((p for p in reversed(path) if isinstance(p, str)), "")
        choices = _CHOICES.get(str(last))
        if choices is None:
            message = f"expected {ctx.get('expected')}, got {got}"
        else:
            value = err["input"]
            hint = F.did_you_mean(value, choices) if isinstance(value, str) else ""
            message = f"unknown value {got}{hint}; expected one of: {', '.join(choices)}"
    elif kind == "too_short" and path and path[-1] == "turns":
        message = "expected at least one turn"
    elif kind == "too_short":
        message = f"expected at least {ctx.get('min_length')} items, got {ctx.get('actual_length')}"
    elif kind == "too_long":
        message = f"expected at most {ctx.get('max_length')} items, got {ctx.get('actual_length')}"
    elif kind == "value_error" and "error" in ctx:
        message = str(ctx["error"])
    else:
        message = err["msg"]
    del tag
    r.problem(node, f"{where}: {message}")


def _offered(r: _Reader, root: yaml.Node, data: dict[Any, Any]) -> None:
    """A tool_use block names an offered tool: checked on the data as it is, so that it is reported beside the
    problems of other values."""
    tools = data.get("tools")
    names = set()
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, str):
            names.add(t)
        elif isinstance(t, dict):
            name = t.get("builtin", t.get("name"))
            if isinstance(name, str):
                names.add(name)
    turns = data.get("turns")
    for ti, turn in enumerate(turns if isinstance(turns, list) else []):
        blocks = turn.get("blocks") if isinstance(turn, dict) else None
        for bi, block in enumerate(blocks if isinstance(blocks, list) else []):
            if not isinstance(block, dict) or not isinstance(block.get("tool_use"), str):
                continue
            if len([k for k in block if k in F.BLOCK_KINDS]) != 1:
                continue
            name = block["tool_use"]
            if name not in names:
                node, _, _ = _node_at(root, ["turns", ti, "blocks", bi, "tool_use"])
                listed = ", ".join(sorted(names)) or "none"
                hint = F.did_you_mean(name, sorted(names))
                r.problem(
                    node, f"turns[{ti}].blocks[{bi}].tool_use: tool {name!r} is not offered{hint} (tools: {listed})"
                )


def _chunk_of(c: int | list[int] | F.SizesFile) -> M.ChunkSpec:
    if isinstance(c, F.SizesFile):
        return M.Sizes(c.min, c.max)
    return list(c) if isinstance(c, list) else int(c)


def _duration_of(d: float | list[float]) -> M.Duration:
    return (float(d[0]), float(d[1])) if isinstance(d, list) else float(d)


def _given(f: BaseModel, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keys the file gave (the model's defaults apply to the rest)."""
    return {k: getattr(f, k) for k in f.model_fields_set if k not in skip}


def _block_of(b: Any) -> M.Block:  # a validated BlockFile: one of the block models (the others raise in validation)
    if isinstance(b, F.TextFile):
        kw = _given(b, ("chunk",))
        if "chunk" in b.model_fields_set:
            kw["chunk"] = _chunk_of(b.chunk)
        return M.TextBlock(**kw)
    if isinstance(b, F.ThinkingFile):
        kw = _given(b, ("chunk",))
        if "chunk" in b.model_fields_set:
            kw["chunk"] = _chunk_of(b.chunk)
        return M.ThinkingBlock(**kw)
    if isinstance(b, F.RedactedThinkingFile):
        return (
            M.RedactedThinkingBlock() if b.redacted_thinking is None else M.RedactedThinkingBlock(b.redacted_thinking)
        )
    if isinstance(b, (F.ToolUseFile, F.ServerToolUseFile)):
        kind = "tool_use" if isinstance(b, F.ToolUseFile) else "server_tool_use"
        kw = _given(b, (kind, "fragment"))
        kw["name"] = getattr(b, kind)
        if "fragment" in b.model_fields_set:
            kw["fragment"] = _chunk_of(b.fragment)
        return M.ToolUseBlock(**kw) if kind == "tool_use" else M.ServerToolUseBlock(**kw)
    return M.WholeBlock(b.block, b.result_of)


def _fault_of(f: Any) -> M.Fault:  # a validated FaultFile: one of the fault models (the others raise in validation)
    cls = fault_types()[f.type]
    kw = _given(f, ("type",))
    if kw.get("attempts") is not None:
        kw["attempts"] = tuple(kw["attempts"])
    return cls(**kw)


def _pacing_of(p: F.PacingFile) -> M.Pacing:
    kw = _given(p)
    if "line_ending" in kw:
        kw["line_ending"] = F.LINE_ENDINGS[kw["line_ending"]]
    for key in ("read_events", "read_delays"):
        if kw.get(key) is not None:
            kw[key] = tuple(kw[key])
    return M.Pacing(**kw)


def _turn_of(r: _Reader, t: F.TurnFile, where: str, node: yaml.Node) -> M.TurnScript:
    kw: dict[str, Any] = _given(t, ("blocks", "usage", "pacing", "faults", "http_errors"))
    kw["blocks"] = [_block_of(b) for b in t.blocks]
    if "usage" in t.model_fields_set:
        kw["usage"] = M.Usage(**_given(t.usage))
    if "pacing" in t.model_fields_set:
        kw["pacing"] = _pacing_of(t.pacing)
    kw["faults"] = [_fault_of(f) for f in t.faults]
    kw["http_errors"] = [M.HttpError(**_given(e)) for e in t.http_errors]
    turn = M.TurnScript(**kw)
    blocks, _, _ = _node_at(node, ["blocks"])
    faults, _, found = _node_at(node, ["faults"])
    block_nodes = list(blocks.value) if isinstance(blocks, yaml.SequenceNode) else []
    fault_nodes = list(faults.value) if found and isinstance(faults, yaml.SequenceNode) else []
    _check_turn(r, turn, where, node, block_nodes, fault_nodes)
    return turn


def _build(r: _Reader, f: F.ScenarioFile, root: yaml.Node, path: Path | None) -> M.Scenario | None:
    """The Scenario of a valid file, with the rules across values checked at their nodes."""
    kw: dict[str, Any] = _given(f, ("format", "version", "name", "workspace", "tools", "turns"))
    if f.name is not None:
        kw["name"] = f.name
    elif path is not None:
        kw["name"] = path.stem
    else:
        r.problem(root, "scenario: missing required key 'name'")
    if f.workspace is not None:
        resolved, refused = _workspace(f.workspace, path)
        if refused is not None:
            r.problem(_node_at(root, ["workspace"])[0], f"workspace: {refused}")
        kw["workspace"] = resolved
    tools: list[str] = []
    durations: dict[str, M.Duration] = {}
    timeouts: dict[str, float] = {}
    sims: list[M.SimulatedTool] = []
    tool_nodes: dict[str, yaml.Node] = {}
    for i, t in enumerate(f.tools):
        tnode = _node_at(root, ["tools", i])[0]
        if isinstance(t, str):
            tools.append(t)
            tool_nodes.setdefault(t, tnode)
        elif isinstance(t, F.BuiltinToolFile):
            tools.append(t.builtin)
            tool_nodes.setdefault(t.builtin, _node_at(tnode, ["builtin"])[0])
            if t.duration is not None:
                durations[t.builtin] = _duration_of(t.duration)
            if t.timeout is not None:
                timeouts[t.builtin] = t.timeout
        else:
            kw_t = _given(t, ("duration", "cases"))
            if "duration" in t.model_fields_set:
                kw_t["duration"] = _duration_of(t.duration)
            cases = []
            for c in t.cases:
                kw_c = _given(c, ("duration",))
                if c.duration is not None:
                    kw_c["duration"] = _duration_of(c.duration)
                cases.append(M.ToolCase(**kw_c))
            if cases:
                kw_t["cases"] = cases
            sims.append(M.SimulatedTool(**kw_t))
            tool_nodes.setdefault(t.name, _node_at(tnode, ["name"])[0])
            _hangs_forever(r, t, i, tnode)
    for name in M.repeated([*tools, *(s.name for s in sims)]):
        r.problem(tool_nodes.get(name), f"tools: {name!r} is offered twice")
    if tools and f.workspace is None:
        r.problem(
            tool_nodes[tools[0]],
            f"tools: built-in tools ({', '.join(tools)}) run over a workspace: set `workspace:` "
            f"(a bundled one: {', '.join(_bundled_workspaces())}; or a folder under the scenario file's folder)",
        )
    if f.allow_write and f.workspace and not f.workspace_copy:
        r.problem(
            _node_at(root, ["allow_write"])[0],
            "allow_write: a scenario that writes must set workspace_copy: true (it runs on a copy)",
        )
    turns = [_turn_of(r, t, f"turns[{i}]", _node_at(root, ["turns", i])[0]) for i, t in enumerate(f.turns)]
    if r.problems:
        return None
    kw.update(turns=turns, tools=tools, tool_durations=durations, tool_timeouts=timeouts, simulated_tools=sims)
    if path is not None:
        kw["source_path"] = str(path)
    try:
        return M.Scenario(**kw)
    except (ValueError, TypeError) as e:
        r.problem(root, str(e))
        return None


def _hangs_forever(r: _Reader, t: F.SimulatedToolFile, i: int, tnode: yaml.Node) -> None:
    """A simulated tool that hangs (itself or in a case) needs a timeout: nothing else ends such a call, and a
    headless run (or a test) waiting on it never ends."""
    if t.timeout is not None:
        return
    where: list[list[str | int]] = [["hang"]] if t.hang else []
    where += [["cases", j, "hang"] for j, c in enumerate(t.cases) if c.hang]
    for at in where:
        node, _, _ = _node_at(tnode, at)
        r.problem(
            node,
            f"{_where(['tools', i, *at])}: {t.name!r} never answers and has no timeout: a run waiting on it never "
            "ends; set `timeout:` (seconds) on the tool",
        )


def _validate(r: _Reader, root: yaml.Node, path: Path | None) -> M.Scenario | None:
    if not isinstance(root, yaml.MappingNode):
        r.problem(root, f"scenario: expected a mapping, got {r.describe(root)}")
        return None
    if not _keys(r, root):
        return None
    try:
        data = r.plain(root)
    except _Bad:
        return None
    try:
        f = F.ScenarioFile.model_validate(data)
    except ValidationError as e:
        for err in e.errors(include_url=False):
            _report(r, root, err)
        _offered(r, root, data)
        return None
    _offered(r, root, data)
    del data  # (the validated models hold what is used from here on)
    return _build(r, f, root, path) if not r.problems else None


def _min_chunk(spec: M.ChunkSpec) -> tuple[int, int]:
    """(characters, deltas) of one cycle of a chunk spec, at its smallest: a bound on the deltas a text makes."""
    if isinstance(spec, M.Sizes):
        return spec.lo, 1
    if isinstance(spec, int):
        return spec, 1
    sizes = [int(s) for s in spec]
    return sum(sizes), len(sizes)


def _deltas(length: int, spec: M.ChunkSpec) -> int:
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
    r: _Reader,
    turn: M.TurnScript,
    where: str,
    node: yaml.Node,
    block_nodes: list[yaml.Node],
    fault_nodes: list[yaml.Node],
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
    # the transport faults so far (at most one per attempt), by the first on each attempt: a fault is checked against
    # the earlier ones in one look-up per attempt it names, not against each of them (a turn of 10,000 faults took
    # 100,000,000 comparisons)
    first: int | None = None  # the first transport fault
    every: int | None = None  # the first on every attempt (attempts: null)
    on: dict[int, int] = {}  # attempt -> the first on it
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
            if f.attempts is None:
                clash = first
            else:
                clashes = [on[a] for a in f.attempts if a in on] + ([] if every is None else [every])
                clash = min(clashes, default=None)
            if clash is not None:
                r.problem(
                    fault_nodes[i],
                    f"{where}.faults[{i}]: at most one of error_event_after / drop_after / stall_with_pings per "
                    f"attempt; faults[{clash}] applies to the same attempts",
                )
            first = i if first is None else first
            if f.attempts is None:
                every = i if every is None else every
            else:
                for a in f.attempts:
                    on.setdefault(a, i)
    seen: dict[int, int] = {}
    for i, e in enumerate(turn.http_errors):
        if e.attempt in seen:
            r.problem(
                node,
                f"{where}.http_errors[{i}]: attempt {e.attempt} already has an HTTP error (http_errors[{seen[e.attempt]}])",
            )
        seen[e.attempt] = i


def _bundled_workspaces() -> list[str]:
    return sorted(p.name for p in M.WORKSPACES_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _workspace(ws: str, path: Path | None) -> tuple[str | None, str | None]:
    """(the workspace, None), or (None, why it is refused). A bundled workspace's name as is; else a folder inside
    the scenario file's folder (the current folder for a text without a file), as an absolute path with its
    symlinks resolved. Refused: no such folder (also a name the system cannot look up: a NUL in it, a name or path
    too long), an absolute path, or a path that leads out of that folder (``..``, or a symlink resolving outside):
    the built-in tools would read (and a copy would copy) what the author of the file never chose, ``/`` or ``~``."""
    bundled = _bundled_workspaces()
    choices = f"a bundled workspace ({', '.join(bundled)}) or a folder under the scenario file's folder"
    if ws in bundled:
        return ws, None
    try:
        base = (path.parent if path is not None else Path.cwd()).resolve()
        if Path(ws).is_absolute() or ws.startswith(("/", "\\")) or Path(ws).drive:
            return (
                None,
                f"{ws!r} is an absolute path: a workspace is {choices} (a relative path); move or copy it there",
            )
        folder = (base / ws).resolve()
        if not folder.is_dir():
            return None, f"no folder {ws!r} ({choices})"
    except (OSError, ValueError):
        return None, f"no folder {ws!r} ({choices})"
    if folder != base and base not in folder.parents:
        return None, (
            f"{ws!r} leads out of the scenario file's folder (to {folder}): a workspace is {choices}; "
            "move or copy it there"
        )
    return str(folder), None


def _char_at(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if 0 <= line < len(lines) and 0 <= column < len(lines[line]):
        return lines[line][column]
    return ""


# --- composing: the document as compact nodes -----------------------------------------------------------------------
#
# ``yaml.compose`` (the C composer) keeps two marks per node (where it starts and ends: 80 bytes each, and an int
# object for each index past 256), each scalar's own copy of its text, and a node of 5 attributes: about 280 bytes a
# scalar, 150 times the size of a file of short numbers (a 4 MiB one held 1.1 GB; one of 16 MiB, the most a file
# may have, 4.2 GB, only to be refused for its number of values after). Here the same events (the same C parser: the
# same errors) make nodes of the same classes (``isinstance`` and every reader of them unchanged) that keep what is
# read of them: tag, value, and where they start as one int (line and column), its mark made when a problem asks for
# it; a short value met again is the same string (and its tag resolved once); the count of values stops the reading
# past MAX_VALUES (a file of more values than that is refused whatever its aliases: refused where it passed it).

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SHARED_VALUE = 32  # values up to this many characters are shared (each text once) ...
_SHARED_VALUES = 1 << 16  # ... the first this many of them: the shared table stays small


def _get_mark(node: Any) -> yaml.Mark:
    """A composed node's start mark, made from its position (line and column, 0-based, in one int) when it is read:
    the only mark read of a node (its end and its style are not kept)."""
    return yaml.Mark("<unicode string>", None, node.at >> 32, node.at & 0xFFFFFFFF, None, None)  # type: ignore[arg-type]


def _set_mark(node: Any, mark: yaml.Mark) -> None:
    node.at = mark.line << 32 | mark.column


class _ScalarNode(yaml.ScalarNode):
    start_mark = property(_get_mark, _set_mark)
    end_mark = None
    style = None

    def __init__(self, tag: str, value: str, at: int) -> None:
        self.tag, self.value, self.at = tag, value, at


class _SequenceNode(yaml.SequenceNode):
    start_mark = property(_get_mark, _set_mark)
    end_mark = None
    flow_style = None

    def __init__(self, tag: str, value: list[yaml.Node], at: int) -> None:
        self.tag, self.value, self.at = tag, value, at


class _MappingNode(yaml.MappingNode):
    start_mark = property(_get_mark, _set_mark)
    end_mark = None
    flow_style = None

    def __init__(self, tag: str, value: list[tuple[yaml.Node, yaml.Node]], at: int) -> None:
        self.tag, self.value, self.at = tag, value, at


class _TooManyValues(Exception):
    """The document has more than MAX_VALUES values (lists, mappings, scalars; aliases not counted)."""

    def __init__(self, mark: Any) -> None:
        self.mark = mark


class _Constructor(yaml.constructor.SafeConstructor):
    """SafeConstructor, but a scalar of the common tags is constructed without being remembered: the memo (an entry
    per node) only serves lists and mappings an alias may share (a scalar constructed twice is an equal value)."""

    _PLAIN = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if type(node) is _ScalarNode and node.tag in self._PLAIN:
            return self.yaml_constructors[node.tag](self, node)
        return super().construct_object(node, deep)


def _compose_compact(text: str) -> yaml.Node | None:
    """``yaml.compose(text, Loader=CSafeLoader)`` (the same nodes, the same errors, the same messages), in compact
    nodes (see above); raises _TooManyValues past MAX_VALUES values."""
    E = yaml.events
    ComposerError = yaml.composer.ComposerError
    loader = _LOADER(text)
    get, check = loader.get_event, loader.check_event
    resolve = loader.resolve
    anchors: dict[str, yaml.Node] = {}
    known: dict[str, tuple[str, str]] = {}  # a plain value -> (its one string, its tag)
    tags: dict[str, str] = {}  # an explicit tag -> its one string
    count = 0
    try:
        get()  # (the stream's start)
        if check(E.StreamEndEvent):
            return None
        get()  # (the document's start)
        stack: list[list[Any]] = []  # [node, its items, a mapping's key waiting for its value (or None)]
        is_map = False
        root: yaml.Node | None = None
        while root is None:
            event = get()
            kind = type(event)
            node: yaml.Node
            if kind is E.ScalarEvent or kind is E.SequenceStartEvent or kind is E.MappingStartEvent:
                anchor = event.anchor
                if anchor is not None and anchor in anchors:
                    raise ComposerError(
                        "found duplicate anchor; first occurrence",
                        anchors[anchor].start_mark,
                        "second occurrence",
                        event.start_mark,
                    )
                count += 1
                if count > MAX_VALUES:
                    raise _TooManyValues(event.start_mark)
                mark = event.start_mark
                at = mark.line << 32 | mark.column
                tag = event.tag
                if tag is not None and tag != "!":
                    tag = tags.setdefault(tag, tag)
                if kind is E.ScalarEvent:
                    value = event.value
                    if tag is None or tag == "!":
                        if event.implicit[0]:  # plain: its tag is its value's
                            found = known.get(value)
                            if found is None:
                                found = (value, resolve(yaml.ScalarNode, value, event.implicit))
                                if len(value) <= _SHARED_VALUE and len(known) < _SHARED_VALUES:
                                    known[value] = found
                            value, tag = found
                        else:
                            tag = resolve(yaml.ScalarNode, value, event.implicit)
                    node = _ScalarNode(tag, value, at)
                    if anchor is not None:
                        anchors[anchor] = node
                else:
                    seq = kind is E.SequenceStartEvent
                    if tag is None or tag == "!":
                        tag = resolve(yaml.SequenceNode if seq else yaml.MappingNode, None, event.implicit)
                    node = _SequenceNode(tag, [], at) if seq else _MappingNode(tag, [], at)
                    if anchor is not None:
                        anchors[anchor] = node  # (before its items: an alias inside is to itself, refused after)
                    stack.append([node, node.value, None])
                    is_map = kind is E.MappingStartEvent
                    continue
            elif kind is E.AliasEvent:
                found_node = anchors.get(event.anchor)
                if found_node is None:
                    raise ComposerError(None, None, "found undefined alias", event.start_mark)
                node = found_node
            else:  # the end of a list or a mapping
                node = stack.pop()[0]
                is_map = bool(stack) and type(stack[-1][0]) is _MappingNode
            if not stack:
                root = node
            elif not is_map:
                stack[-1][1].append(node)
            elif stack[-1][2] is None:
                stack[-1][2] = node
            else:
                stack[-1][1].append((stack[-1][2], node))
                stack[-1][2] = None
        get()  # (the document's end)
        if not check(E.StreamEndEvent):
            raise ComposerError(
                "expected a single document in the stream",
                root.start_mark,
                "but found another document",
                get().start_mark,
            )
        return root
    finally:
        loader.dispose()


def _compose(r: _Reader, text: str) -> yaml.Node | None:
    try:
        node = _compose_compact(text)
    except _TooManyValues as e:
        r.problems.append(
            Problem(
                r.file,
                e.mark.line + 1,
                e.mark.column + 1,
                f"YAML: the file holds more than {MAX_VALUES} values (lists, mappings and scalars): this is value "
                f"{MAX_VALUES + 1}; not read further",
            )
        )
        return None
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
    Walks each list and mapping once (the composer shares an anchor's node among its aliases), without expanding
    anything, depth first, each one's items read as it goes (a scalar is counted where it is and kept nowhere: a list
    of a million numbers costs no entry per number; before, four dicts held every node and doubled the memory of a
    big file)."""
    if isinstance(root, yaml.ScalarNode):  # (a document that is one value: refused as not a mapping after)
        if _too_long_int(root):
            r.problem(root, f"an integer of {len(root.value)} characters (at most {MAX_INT_DIGITS})")
            return False
        return True
    done: dict[int, tuple[int, int]] = {}  # a list or mapping's id -> (values, characters) it holds, aliases expanded
    open_: set[int] = set()  # the lists and mappings being walked (one met again inside itself: a recursive alias)
    long_ints: set[int] = set()  # (an integer too long, reported once however many aliases use it)
    ok = True
    # the way down: [node, depth, its items not yet read (last first, as the walk has always gone), values, chars]
    stack: list[list[Any]] = [[root, 0, reversed(_children(root)), 1, 0]]
    open_.add(id(root))
    while stack:
        frame = stack[-1]
        depth = frame[1] + 1  # (its items')
        for kid in frame[2]:
            if isinstance(kid, yaml.ScalarNode):
                if depth > MAX_DEPTH:
                    r.problem(kid, f"YAML: lists and mappings nested more than {MAX_DEPTH} deep")
                    return False
                if _too_long_int(kid) and id(kid) not in long_ints:
                    long_ints.add(id(kid))
                    r.problem(kid, f"an integer of {len(kid.value)} characters (at most {MAX_INT_DIGITS})")
                    ok = False
                frame[3] += 1
                frame[4] += len(kid.value)
                continue
            known = done.get(id(kid))
            if known is not None:
                frame[3] += known[0]
                frame[4] += known[1]
                continue
            if id(kid) in open_:
                r.problem(kid, "YAML: a recursive alias (an anchor used inside itself)")
                return False
            if depth > MAX_DEPTH:
                r.problem(kid, f"YAML: lists and mappings nested more than {MAX_DEPTH} deep")
                return False
            open_.add(id(kid))
            stack.append([kid, depth, reversed(_children(kid)), 1, 0])
            break
        else:  # every item read
            stack.pop()
            open_.discard(id(frame[0]))
            done[id(frame[0])] = (frame[3], frame[4])
            if stack:
                stack[-1][3] += frame[3]
                stack[-1][4] += frame[4]
    total, size = done[id(root)]
    if total > MAX_VALUES or size > MAX_CHARS:
        _too_big(r, root, total, size)
        return False
    return ok


def _too_big(r: _Reader, root: yaml.Node, total: int, size: int) -> None:
    """The problem of a document too big once its aliases are expanded, at the anchor whose copies weigh most (the
    root when no anchor is used). Every node is walked once here, scalars too (only a file refused comes here)."""
    values: dict[int, int] = {}  # node id -> values it holds, aliases expanded
    uses: dict[int, int] = {}  # node id -> parents that hold it (> 1: an anchor used by aliases)
    nodes: dict[int, yaml.Node] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # (neither recursive nor too deep: _check_graph walked it)
        node, finished = stack.pop()
        key = id(node)
        if finished:
            values[key] = 1 + sum(values[id(k)] for k in _children(node))
            continue
        uses[key] = uses.get(key, 0) + 1
        if key in nodes:
            continue
        nodes[key] = node
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node))
    shared = [k for k, n in uses.items() if n > 1]
    worst = max(shared, key=lambda k: (uses[k] - 1) * values[k], default=id(root))
    what = f"{total} values" if total > MAX_VALUES else f"{size} characters"
    limit = f"{MAX_VALUES} values" if total > MAX_VALUES else f"{MAX_CHARS} characters"
    where = f"; the anchor here is used {uses[worst]} times, {values[worst]} values each" if worst != id(root) else ""
    r.problem(nodes[worst], f"YAML: with its aliases expanded the file holds {what}, more than {limit}{where}")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off while a file is read: the composed document is a few objects per value (a
    node, its marks, the plain data, the validated models), none of them garbage until the end, and the collector
    walked them all again and again as they were made: more than half the time of checking a 2.4 MB file (7.1 s,
    3.0 s without). Reference counting frees as before; the collector runs again after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse(text: str, file: str, path: Path | None) -> tuple[M.Scenario | None, list[Problem]]:
    r = _Reader(file)
    with _no_cyclic_gc():
        root = _compose(r, text)
        if root is None:
            return None, r.problems
        sc = _validate(r, root, path)
    problems = sorted(r.problems, key=lambda p: (p.line, p.column))
    if sc is None and not problems:
        problems = [Problem(file, 1, 1, "invalid scenario")]
    return sc, problems


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


def _chunk_out(spec: M.ChunkSpec) -> int | list[int] | dict[str, int]:
    if isinstance(spec, M.Sizes):
        return {"min": spec.lo, "max": spec.hi}
    if isinstance(spec, int):
        return spec
    return [int(s) for s in spec]


def _block_out(b: M.Block) -> dict[str, Any]:
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


def _duration_out(d: M.Duration) -> float | list[float]:
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
        "cache_system",
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


def dump_data(data: object) -> str:
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


def json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, generated from their declaration (``filemodel.ScenarioFile``); the loader
    checks more (tools offered, block indexes, events per turn...), with positions."""
    generated = F.ScenarioFile.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://stream-inspector.invalid/scenario.schema.json",
        "title": f"Stream Inspector scenario file ({FORMAT}, version {VERSION})",
        "description": "See docs/scenario-format.md. `inspector scenario check FILE` checks a file with positions. "
        "Generated by `inspector scenario schema`.",
        **{k: v for k, v in generated.items() if k not in ("title", "description")},
    }


def json_schema_text() -> str:
    """docs/scenario.schema.json, byte for byte (``inspector scenario schema`` prints it; a test compares)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"

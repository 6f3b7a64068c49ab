"""User tools: `--tools package.module:attr` or `--tools path/to/file.py:attr`.

`attr` (dotted attribute paths allowed) may be a ToolSpec, a list/tuple of ToolSpecs, a dict name -> ToolSpec, a
plain tool dict {name, description, input_schema, function, concurrency_safe?, timeout?, cancel_siblings_on_error?}
(or a list/dict of those), or a callable with no arguments returning any of these.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from inspector.agent.toolbox.spec import ToolSpec

__all__ = ["ToolLoadError", "load_tools", "tool_from_dict"]

TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # what the Messages API accepts (fullmatch: `$` allows a "\n")
_DICT_REQUIRED = ("name", "input_schema")
_DICT_KEYS = {
    "name",
    "description",
    "input_schema",
    "function",
    "fn",
    "concurrency_safe",
    "timeout",
    "cancel_siblings_on_error",
    "meta",
}


class ToolLoadError(Exception):
    """A --tools spec could not be loaded; str() is a one-line message for the user."""


def _import_file(path_str: str) -> ModuleType:
    path = Path(path_str).expanduser()
    if not path.is_file():
        raise ToolLoadError(f"tool file not found: {path_str}")
    path = path.resolve()
    mod_name = f"_inspector_user_tools_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ToolLoadError(f"cannot import {path_str}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    added = str(path.parent) not in sys.path
    if added:  # let the file import its siblings
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(mod_name, None)
        raise ToolLoadError(f"error importing {path_str}: {type(e).__name__}: {e}") from e
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(str(path.parent))
    return module


def _import_module(name: str) -> ModuleType:
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:  # `inspector --tools mytools:TOOLS` run from the project directory
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise ToolLoadError(f"module '{name}' not found (is it installed or on PYTHONPATH?)") from e
        raise ToolLoadError(f"error importing '{name}': ModuleNotFoundError: {e}") from e
    except Exception as e:
        raise ToolLoadError(f"error importing '{name}': {type(e).__name__}: {e}") from e
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def tool_from_dict(d: dict[str, Any], where: str = "tool") -> ToolSpec:
    unknown = set(d) - _DICT_KEYS
    if unknown:
        raise ToolLoadError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_DICT_KEYS)})")
    for k in _DICT_REQUIRED:
        if k not in d:
            raise ToolLoadError(f"{where}: missing key '{k}'")
    fn = d.get("function", d.get("fn"))
    if not callable(fn):
        raise ToolLoadError(f"{where}: 'function' must be a callable taking the input dict")
    if not isinstance(d["input_schema"], dict):
        raise ToolLoadError(f"{where}: 'input_schema' must be a dict (a JSON schema)")
    desc = d.get("description")
    if desc is None:
        desc = (getattr(fn, "__doc__", None) or "").strip()
    if not isinstance(desc, str):
        raise ToolLoadError(f"{where}: 'description' must be a string")
    safe = d.get("concurrency_safe", False)
    if not (isinstance(safe, bool) or callable(safe)):
        raise ToolLoadError(f"{where}: 'concurrency_safe' must be a bool or a function of the input")
    timeout = d.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ToolLoadError(f"{where}: 'timeout' must be a positive number of seconds")
    return ToolSpec(
        name=d["name"],
        description=desc,
        input_schema=d["input_schema"],
        fn=fn,
        concurrency_safe=safe,
        timeout=timeout,
        cancel_siblings_on_error=bool(d.get("cancel_siblings_on_error", False)),
        meta=dict(d.get("meta") or {}),
    )


def _is_tool_dict(d: dict[str, Any]) -> bool:
    return "name" in d and ("function" in d or "fn" in d or "input_schema" in d)


def _normalize(value: Any, spec: str) -> list[ToolSpec]:
    if isinstance(value, ToolSpec):
        return [value]
    if isinstance(value, dict):
        if _is_tool_dict(value):
            return [tool_from_dict(value, f"{spec}: tool {value.get('name')!r}")]
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ToolLoadError(
            f"{spec}: expected a ToolSpec, a tool dict, a list/dict of them or a callable returning them; "
            f"got {type(value).__name__}"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, ToolSpec):
            out.append(item)
        elif isinstance(item, dict):
            out.append(tool_from_dict(item, f"{spec}: item {i} ({item.get('name', '?')!r})"))
        else:
            raise ToolLoadError(f"{spec}: item {i} is a {type(item).__name__}, expected a ToolSpec or a tool dict")
    return out


def load_tools(spec: str) -> dict[str, ToolSpec]:
    """Load user tools from `package.module:attr` or `path/to/file.py:attr`. Raises ToolLoadError."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ToolLoadError(f"--tools expects 'package.module:attr' or 'path/to/file.py:attr', got {spec!r}")
    mod_part, _, attr = spec.rpartition(":")
    if not mod_part or not attr:
        raise ToolLoadError(f"--tools expects 'package.module:attr' or 'path/to/file.py:attr', got {spec!r}")
    is_file = mod_part.endswith(".py") or "/" in mod_part or os.sep in mod_part
    module = _import_file(mod_part) if is_file else _import_module(mod_part)

    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ToolLoadError(f"'{mod_part}' has no attribute '{attr}'")
        value = getattr(value, part)

    if callable(value) and not isinstance(value, (ToolSpec, dict, list, tuple, type)):
        try:
            value = value()
        except Exception as e:
            raise ToolLoadError(f"{spec}: calling {attr}() failed: {type(e).__name__}: {e}") from e

    tools = _normalize(value, spec)
    if not tools:
        raise ToolLoadError(f"{spec} defines no tools")
    result: dict[str, ToolSpec] = {}
    for t in tools:
        if not isinstance(t.name, str) or not TOOL_NAME_RE.fullmatch(t.name):
            raise ToolLoadError(f"{spec}: invalid tool name {t.name!r} (letters, digits, '_' or '-', at most 64)")
        if t.name in result:
            raise ToolLoadError(f"{spec}: duplicate tool name '{t.name}'")
        if not callable(t.fn):
            raise ToolLoadError(f"{spec}: tool '{t.name}' has no callable function")
        result[t.name] = t
    return result

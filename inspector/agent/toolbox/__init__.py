"""Tools: what the model may call, and how to run each call safely."""

from inspector.agent.toolbox.builtin import builtin_tools, resolve_in_root
from inspector.agent.toolbox.loader import ToolLoadError, load_tools, tool_from_dict
from inspector.agent.toolbox.spec import (
    ToolCancelled,
    ToolFn,
    ToolRefused,
    ToolSpec,
    cancel_event,
    raise_if_cancelled,
)

__all__ = [
    "ToolCancelled",
    "ToolFn",
    "ToolLoadError",
    "ToolRefused",
    "ToolSpec",
    "builtin_tools",
    "cancel_event",
    "load_tools",
    "raise_if_cancelled",
    "resolve_in_root",
    "tool_from_dict",
]

"""What a tool is, for the executor: the definition the model sees plus how to run it safely."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Union

# a tool's input is the JSON object the model streamed (parsed); its return value is rendered by the executor
ToolFn = Callable[[dict[str, Any]], Union[Any, Awaitable[Any]]]


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    fn: ToolFn  # sync functions run in a worker thread, async ones as tasks; the return value becomes the result
    # Concurrency safety, per call: a bool, or a function of the parsed input. Default: not safe (fail closed).
    concurrency_safe: bool | Callable[[dict[str, Any]], bool] = False
    timeout: float | None = None  # seconds; None: no per-tool timeout
    cancel_siblings_on_error: bool = False  # a failure cancels the other tools of the same turn
    meta: dict[str, Any] = field(default_factory=dict)

    def is_safe(self, tool_input: dict[str, Any]) -> bool:
        safe = self.concurrency_safe
        if callable(safe):
            try:
                return bool(safe(tool_input))
            except Exception:  # noqa: BLE001 (the tool's own predicate may raise anything: fail closed, not safe)
                return False
        return bool(safe)

    def definition(self) -> dict[str, Any]:
        """The tool as sent to the Messages API."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


class ToolRefused(Exception):
    """A tool declines a call (bad path, disabled, bad argument). The executor turns it into an is_error
    tool_result whose content is just the message (no "ToolError:" prefix, no traceback)."""


class ToolTimedOut(ToolRefused):
    """A tool says that its run timed out (a replayed tool whose recorded run timed out): the call ends
    ``timed_out``, not ``failed``, with the message as its is_error result, as the executor's own timeout would
    end it (the siblings are not cancelled: a replayed sibling has its own recorded result)."""


class ToolCancelled(Exception):
    """Raised by a cooperative sync tool that noticed its cancel event (see `cancel_event`)."""


# The cancel event of the tool call running in this context. The executor sets it in the task (async tools) and in
# the worker thread's copied context (sync tools); it is set on cancel, discard, sibling abort and timeout.
_CURRENT_CANCEL: ContextVar[threading.Event | None] = ContextVar("inspector_tool_cancel", default=None)


def cancel_event() -> threading.Event:
    """The cancel event of the current tool call (a fresh, never-set Event outside the executor).

    Sync tools run in a thread that cannot be killed: where they loop or wait, they should check
    `cancel_event().is_set()` or wait on it (`cancel_event().wait(seconds)`) and return early."""
    ev = _CURRENT_CANCEL.get()
    return ev if ev is not None else threading.Event()


def raise_if_cancelled() -> None:
    ev = _CURRENT_CANCEL.get()
    if ev is not None and ev.is_set():
        raise ToolCancelled("tool call cancelled")

"""The loop's and the tool calls' states: one StrEnum each, used by the loop, the executor, the proxy, the fold and
the widgets. Values are the strings observations, recordings and JSON output carry."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["LoopState", "ToolState", "TERMINAL_LOOP_STATES", "TOOL_ACTIVE", "TOOL_TERMINAL", "TOOL_RAN"]


class LoopState(StrEnum):
    IDLE = "idle"
    STREAMING = "streaming"
    PAUSED = "paused"
    STEPPING = "stepping"
    RUNNING_TOOLS = "running_tools"
    WAITING_RETRY = "waiting_retry"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    ERROR = "error"


class ToolState(StrEnum):
    STREAMING_INPUT = "streaming_input"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    DISCARDED = "discarded"
    NOT_RUN = "not_run"
    # its outcome was never seen: a call of another harness (the proxy's) whose result no later request carried
    # before the session ended (the watched command exited, the proxy stopped); neither ran nor failed for all we know
    UNKNOWN = "unknown"


TERMINAL_LOOP_STATES = frozenset({LoopState.FINISHED, LoopState.CANCELLED, LoopState.ERROR})
TOOL_ACTIVE = frozenset({ToolState.STREAMING_INPUT, ToolState.QUEUED, ToolState.RUNNING})
TOOL_TERMINAL = frozenset(ToolState) - TOOL_ACTIVE
# the terminal states of a call that ran (its run time is known)
TOOL_RAN = frozenset({ToolState.SUCCEEDED, ToolState.FAILED, ToolState.TIMED_OUT})

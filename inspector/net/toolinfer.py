"""Tool execution of another harness, inferred from its requests (the proxy sees only the wire).

A harness runs its tools between two requests: nothing about it crosses the wire. What does: the tool_use blocks of
a response (each complete at its ``content_block_stop``) and, in the next request, the last user message's
``tool_result`` blocks. Matching them by id bounds each execution from above: request time - block stop (it includes
the rest of the stream and the harness's own overhead; a harness that runs its tools only after the stream ended
spends part of it waiting). These are inferences, never measurements: the observations carry ``inferred=True`` and
the dashboard draws and counts them apart (docs: "inferred from the next request").

OpenAI requests carry the results in their own form (:func:`request_results`): Chat Completions ``role: "tool"``
messages (``tool_call_id``), Responses ``function_call_output`` input items (``call_id``); the ones after the
history's last assistant message (or function call) are the next request's results, as the last user message's
``tool_result`` blocks are for Messages. They carry no error flag: ``is_error`` is None (not known), never False.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inspector.observe.observations import ToolExecutionInferred

__all__ = ["InferredExecution", "SeenToolUse", "ToolExecutionInferred", "infer_tool_executions", "request_results"]


@dataclass(slots=True)
class SeenToolUse:
    """A tool_use block the proxy saw complete in a response stream (times: seconds on the proxy clock)."""

    id: str
    name: str
    turn: int
    attempt: int
    index: int
    stop_t: float  # when its content_block_stop arrived
    stream_end_t: float | None = None  # when the response ended (message_stop or the end of the body)
    input: Any = None
    conversation: str | None = None  # the conversation of the turn that streamed it (net/conversations.py)


@dataclass(slots=True)
class InferredExecution:
    """What the next request tells about one tool call of the other harness.

    status: ``"result"`` (a tool_result for it is in the request), ``"missing"`` (a tool_use of the answered turn
    without a result: the API will answer 400) or ``"unknown"`` (a tool_result whose tool_use the proxy never saw).
    ``since_block_stop``: request time - block stop time, an upper bound of the execution (it includes the rest of the
    stream and the harness's own overhead); ``since_stream_end``: request time - end of that response."""

    tool_use_id: str
    name: str | None
    status: str
    from_turn: int | None
    request_t: float
    block_stop_t: float | None = None
    stream_end_t: float | None = None
    since_block_stop: float | None = None
    since_stream_end: float | None = None
    is_error: bool | None = None
    result_chars: int | None = None
    reason: str | None = None  # why a result is "unknown" (or a call "missing"), for people

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


def _result_text_len(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) if isinstance(b, dict) else 0 for b in content)
    return 0


def request_history(body: object, family: str = "anthropic") -> list[Any]:
    """A request body's history, as Messages API messages: its ``messages`` (Messages API), or an OpenAI family's
    (``openai_chat`` messages, ``openai_responses`` input items) read by ``record.replay.neutral_history``; [] when
    it has none. Read once per request: `request_results` and `continued_tool_uses` take it."""
    if not isinstance(body, Mapping):
        return []
    history = body.get("messages") if family != "openai_responses" else body.get("input")
    if not isinstance(history, list):
        return []
    if family == "anthropic":
        return history
    from inspector.record.replay import neutral_history  # (only for OpenAI requests: it imports the SDK's client)

    return neutral_history(history)


def request_results(body: object, family: str = "anthropic") -> list[Any]:
    """`results_of` the request's history (`request_history`)."""
    return results_of(request_history(body, family), family)


def results_of(history: list[Any], family: str = "anthropic") -> list[Any]:
    """A request's history (`request_history`) shaped for :func:`infer_tool_executions`: the messages themselves
    (Messages API), or, for an OpenAI family, one user message holding a ``tool_result`` block (``is_error`` left
    out: OpenAI has none) for each result after the history's last assistant turn (chat ``tool`` messages,
    Responses ``function_call_output`` items)."""
    if family == "anthropic":
        return history
    tail: list[Any] = []
    for m in reversed(history):
        if isinstance(m, dict) and (m.get("role") == "assistant" or m.get("type") == "reasoning"):
            break
        tail.append(m)
    blocks = []
    for m in reversed(tail):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            blocks += [{**b, "openai": True} for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return [{"role": "user", "content": blocks}] if blocks else []


def continued_tool_uses(history: list[Any]) -> set[str]:
    """The ids of the tool calls in the last assistant turn of a request's history (`request_history`): the turn
    the harness continues (a tool call there with no result in the request got none)."""
    for m in reversed(history):
        if isinstance(m, dict) and m.get("role") == "assistant":
            content = m.get("content")
            if not isinstance(content, list):
                return set()
            return {
                str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")
            }
    return set()


def infer_tool_executions(
    seen: Mapping[str, SeenToolUse] | Iterable[SeenToolUse],
    messages: object,
    request_t: float,
    unknown_reason: str | None = None,
    continued: Iterable[str] = (),
) -> list[InferredExecution]:
    """Tool executions revealed by a request: the tool_result blocks of its LAST user message, matched by id to the
    tool_use blocks seen streaming (``seen``: the proxy passes those of the same conversation's previous turn only),
    timed against ``request_t``. Tool uses of the answered turns that got no result are reported ``missing``, and so
    are those of ``continued`` (the ids of the tool calls the request's history continues from: its last assistant
    turn, `continued_tool_uses`) that got none, results or not; a result matched to nothing is ``unknown``, with
    ``unknown_reason`` (default: the proxy never saw that tool_use). Pure: no I/O, no clock."""
    by_id = dict(seen) if isinstance(seen, Mapping) else {s.id: s for s in seen}
    continued = set(continued)
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") == "user" and isinstance(last.get("content"), list):
        results = last["content"]
    elif continued:  # (the conversation went on past its tool calls with no result at all: "and Rome?")
        results = []
    else:
        return []
    out: list[InferredExecution] = []
    answered: set[tuple[int, int]] = set()
    got: set[str] = set()
    for b in results:
        if not isinstance(b, dict) or b.get("type") != "tool_result":
            continue
        tid = str(b.get("tool_use_id"))
        got.add(tid)
        s = by_id.get(tid)
        # (an OpenAI result has no error flag: unknown, not False)
        is_error = None if b.get("openai") else (bool(b.get("is_error")) if "is_error" in b else False)
        if s is None:
            out.append(
                InferredExecution(
                    tid,
                    None,
                    "unknown",
                    None,
                    request_t,
                    is_error=is_error,
                    result_chars=_result_text_len(b.get("content")),
                    reason=unknown_reason or "the proxy never saw a tool_use with this id",
                )
            )
            continue
        answered.add((s.turn, s.attempt))
        out.append(
            InferredExecution(
                tid,
                s.name,
                "result",
                s.turn,
                request_t,
                s.stop_t,
                s.stream_end_t,
                round(request_t - s.stop_t, 6),
                None if s.stream_end_t is None else round(request_t - s.stream_end_t, 6),
                is_error,
                _result_text_len(b.get("content")),
            )
        )
    for s in by_id.values():
        if ((s.turn, s.attempt) in answered or s.id in continued) and s.id not in got:
            out.append(
                InferredExecution(
                    s.id,
                    s.name,
                    "missing",
                    s.turn,
                    request_t,
                    s.stop_t,
                    s.stream_end_t,
                    round(request_t - s.stop_t, 6),
                    reason="no tool_result for it in the next request",
                )
            )
    return out

"""The Messages API's conversation-history rules, in one place.

``history_violation(messages)`` is what the real API checks before it answers: it returns a :class:`Violation`
(``kind`` + the 400 ``invalid_request_error`` message, worded like the API's) or None. ``inspector serve`` and the
in-process ``ScenarioServer`` both answer a violation with that 400, so they reject exactly the same requests.
No I/O, no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["VIOLATION_KINDS", "Violation", "history_problem", "history_violation", "without_cache_marks"]

VIOLATION_KINDS = (
    "empty_messages",
    "bad_role",
    "first_not_user",
    "missing_tool_result",
    "results_not_in_next_message",
    "tool_result_not_first",
    "unexpected_tool_result",
)


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # one of VIOLATION_KINDS
    message: str  # the API's 400 message

    def __str__(self) -> str:
        return self.message


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _tool_use_ids(msg: Any) -> list[str]:
    if not isinstance(msg, dict):
        return []
    return [str(b.get("id")) for b in _blocks(msg.get("content")) if b.get("type") == "tool_use"]


def _result_ids(msg: Any) -> list[str]:
    if not isinstance(msg, dict):
        return []
    return [str(b.get("tool_use_id")) for b in _blocks(msg.get("content")) if b.get("type") == "tool_result"]


def history_violation(messages: Any) -> Violation | None:
    """The Messages API's history rules, with its 400 messages:

    - ``empty_messages`` / ``bad_role`` / ``first_not_user``: the basic shape (a non-empty list of user / assistant
      messages that starts with a user message).
    - ``missing_tool_result``: an assistant message's tool_use ids must all get a tool_result in the very next
      message (a user message). Also when the request ends with that assistant message.
    - ``results_not_in_next_message``: the same error, when the results do exist but in a later message (the hint
      says where).
    - ``tool_result_not_first``: the next user message must *begin* with those tool_result blocks (text before them
      is the API's "Did not find N tool_result block(s) at the beginning of this message").
    - ``unexpected_tool_result``: a tool_result whose id is not a tool_use of the previous message.

    The order of tool_result blocks among themselves is free (the API matches them by id).
    """
    if not isinstance(messages, list) or not messages:
        return Violation("empty_messages", "messages: at least one message is required")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            role = msg.get("role") if isinstance(msg, dict) else None
            return Violation("bad_role", f"messages.{i}.role: Input should be 'user' or 'assistant' (got {role!r})")
    if messages[0]["role"] != "user":
        return Violation("first_not_user", "messages.0.role: the first message must use the `user` role")
    for i, msg in enumerate(messages):
        if msg["role"] == "assistant":
            ids = _tool_use_ids(msg)
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            results = _result_ids(nxt) if nxt is not None and nxt.get("role") == "user" else []
            missing = [x for x in ids if x not in results]
            if missing:
                text = (
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    f"in the next message."
                )
                later = next(
                    (j for j in range(i + 2, len(messages)) if set(missing) & set(_result_ids(messages[j]))), None
                )
                if later is not None:
                    return Violation(
                        "results_not_in_next_message",
                        text + f" (inspector: their tool_result blocks are in messages.{later}; they "
                        f"must be in messages.{i + 1}, the message right after the tool_use)",
                    )
                if nxt is None:
                    text += " (inspector: the request ends with this assistant message)"
                return Violation("missing_tool_result", text)
            leading = 0
            for b in _blocks(nxt.get("content") if isinstance(nxt, dict) else None):
                if b.get("type") != "tool_result":
                    break
                leading += 1
            if leading < len(ids):
                return Violation(
                    "tool_result_not_first",
                    f"messages.{i + 1}: Did not find {len(ids)} `tool_result` block(s) at the beginning "
                    f"of this message. Messages following `tool_use` blocks must begin with a matching "
                    f"number of `tool_result` blocks.",
                )
        else:
            prev_ids = _tool_use_ids(messages[i - 1]) if i > 0 and messages[i - 1].get("role") == "assistant" else []
            for j, b in enumerate(_blocks(msg.get("content"))):
                if b.get("type") == "tool_result" and str(b.get("tool_use_id")) not in prev_ids:
                    return Violation(
                        "unexpected_tool_result",
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        f"block in the previous message.",
                    )
    return None


def history_problem(messages: Any) -> str | None:
    """:func:`history_violation`'s message, or None."""
    v = history_violation(messages)
    return None if v is None else v.message


def without_cache_marks(value: Any) -> Any:
    """``value`` (a request's JSON: a message, a tool, a block) with every ``cache_control`` mark left out, at any
    depth: a mark says where a cached prefix ends, it is not part of the prefix (harnesses move their breakpoint to
    the newest message each turn). The proxy's conversation grouping and the cache verdict compare by it. Walked
    without recursion: any nesting a JSON parser gives (1,023 levels) is fine."""
    if not isinstance(value, (dict, list)):
        return value
    out: Any = {} if isinstance(value, dict) else []
    todo: list[tuple[Any, Any]] = [(value, out)]
    while todo:
        src, dst = todo.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for k, v in items:
            if k == "cache_control" and isinstance(src, dict):
                continue
            if isinstance(v, (dict, list)):
                child: Any = {} if isinstance(v, dict) else []
                todo.append((v, child))
                v = child
            if isinstance(dst, dict):
                dst[k] = v
            else:
                dst.append(v)
    return out

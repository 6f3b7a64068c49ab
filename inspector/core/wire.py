"""Rules of the wire formats that the stream engine (``inspector.stream``) and the stream redactor
(``inspector.core.redaction.StreamRedactor``) must read alike, declared once here, below both.

Where the redactor reads a stream differently from the engine, a key split across two fragments that the engine
joins is never joined, hence never masked, by the redactor: every rule that decides what the engine joins lives here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "CHAT_TEXT_KINDS",
    "RESPONSES_DELTAS",
    "SSE_BLANK_LINE",
    "SSE_BOM",
    "USAGE_COUNTS",
    "chat_call_slot",
    "is_count",
    "start_text_field",
]

# A blank line in any line-ending style (WHATWG: lines end with CRLF, LF or CR; a CR followed by LF is one
# terminator, never a CR and then an LF line): the end of an SSE event.
SSE_BLANK_LINE = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r|\n)")

# A Responses delta event -> (block kind, key part, the field of its part's index): the deltas of one output item
# with the same key part and index fill one block (whatever the event type: an output_text and a refusal delta of the
# same content part join).
RESPONSES_DELTAS: dict[str, tuple[str, str, str | None]] = {
    "response.output_text.delta": ("text", "content", "content_index"),
    "response.refusal.delta": ("refusal", "content", "content_index"),
    "response.reasoning_summary_text.delta": ("thinking", "summary", "summary_index"),
    "response.reasoning_text.delta": ("thinking", "reasoning", "content_index"),
    "response.function_call_arguments.delta": ("tool_use", "args", None),
    "response.custom_tool_call_input.delta": ("custom", "args", None),
}

# The byte-order mark one of which a stream may start with (the engine strips one; a second spoils a field name).
SSE_BOM = b"\xef\xbb\xbf"

# A chat delta's text field -> the kind of block the engine streams it into (reasoning_content and reasoning: one
# thinking block; content and refusal: two text blocks).
CHAT_TEXT_KINDS = {"content": "text", "reasoning_content": "thinking", "reasoning": "thinking", "refusal": "refusal"}

# The token counts of a usage object (both families' names): each a count, or absent / null.
USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)


def is_count(value: object) -> bool:
    """A token count: an integer >= 0 (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def start_text_field(block: object) -> str | None:
    """ "text" or "thinking" when an Anthropic content_block_start's block already holds text of its kind (the
    engine joins the block's deltas to it: stream/blocks.py), else None."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    return kind if kind in ("text", "thinking") and isinstance(block.get(kind), str) and block[kind] else None


def chat_call_slot(index: object, call_id: object, last: int | None, ids: Mapping[int, str | None]) -> tuple[int, bool]:
    """The tool call a Chat Completions ``tool_calls`` delta goes to, and whether the delta lacked its ``index`` (the
    openai SDK fails there) and so was placed: a new call (after the highest so far) when it brings an id other than
    the last call's, else the last call (the first: 0). ``last``: the index of the call the previous delta went to;
    ``ids``: each call so far -> its id (None before one came)."""
    if isinstance(index, int) and not isinstance(index, bool):
        return index, False
    cid = call_id if isinstance(call_id, str) and call_id else None
    new = cid is not None and (last is None or ids.get(last) != cid)
    return ((max(ids) + 1 if ids else 0) if new or last is None else last), True

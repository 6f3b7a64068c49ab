"""Rules of the wire formats that the stream engine (``inspector.stream``) and the stream redactor
(``inspector.core.redaction.StreamRedactor``) must read alike, declared once here, below both.

Where the redactor reads a stream differently from the engine, a key split across two fragments that the engine
joins is never joined, hence never masked, by the redactor: every rule that decides what the engine joins lives here.
"""

from __future__ import annotations

import re

__all__ = ["RESPONSES_DELTAS", "SSE_BLANK_LINE"]

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

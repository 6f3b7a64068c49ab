"""Named diagnostics: every protocol fault the engine sees becomes one of these, never an exception.

Codes are stable strings (documented in docs/diagnostics.md) so tests, the CLI and the UI can match on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]

# --- SSE layer ---------------------------------------------------------------------------------------------------
SSE_INVALID_UTF8 = "sse.invalid_utf8"  # bytes that are not UTF-8 were replaced by U+FFFD
SSE_UNTERMINATED_EVENT = "sse.unterminated_event"  # stream ended inside an event (no blank line): discarded
SSE_BOM_STRIPPED = "sse.bom_stripped"  # a leading BOM was removed (info)
SSE_NO_DATA = "sse.no_data"  # a block with event/id/retry but no data fired nothing (info; vendor SDKs dispatch it)
# an `event: error` block without data: WHATWG fires nothing, but the SDKs dispatch it and raise: dispatched here too
SSE_ERROR_WITHOUT_DATA = "sse.error_without_data"
SSE_RETRY_IGNORED = "sse.retry_ignored"  # retry value not all ASCII digits (info)
SSE_ID_WITH_NUL = "sse.id_with_nul"  # id containing U+0000 ignored (info)
SSE_UNKNOWN_FIELD = "sse.unknown_field"  # field name not event/data/id/retry (info)
SSE_EVENT_TOO_LARGE = "sse.event_too_large"  # an event (or line) over the decoder's size limit: cut off, discarded

# --- Anthropic protocol layer ------------------------------------------------------------------------------------
INVALID_EVENT_JSON = "protocol.invalid_json"  # event data is not JSON (or not an object)
TYPE_MISMATCH = "protocol.type_mismatch"  # SSE `event:` name differs from the data's "type"
UNKNOWN_EVENT = "protocol.unknown_event"  # unknown event type (info, kept)
UNKNOWN_BLOCK = "protocol.unknown_block"  # unknown content block type (info, kept)
UNKNOWN_DELTA = "protocol.unknown_delta"  # unknown delta type (info, kept)
MALFORMED_EVENT = "protocol.malformed_event"  # a known event without a field it needs (index, delta...)
WRONG_TYPE = "protocol.wrong_type"  # a field the engine folds has the wrong JSON type (kept as sent, not folded)
EVENT_BEFORE_START = "protocol.event_before_message_start"
EVENT_AFTER_STOP = "protocol.event_after_message_stop"
DUPLICATE_MESSAGE_START = "protocol.duplicate_message_start"
DELTA_UNKNOWN_INDEX = "protocol.delta_unknown_index"
STOP_UNKNOWN_INDEX = "protocol.stop_unknown_index"
DELTA_AFTER_STOP = "protocol.delta_after_block_stop"
DUPLICATE_BLOCK_START = "protocol.duplicate_block_start"
DUPLICATE_BLOCK_STOP = "protocol.duplicate_block_stop"
INDEX_GAP = "protocol.index_gap"
DELTA_TYPE_MISMATCH = "protocol.delta_type_mismatch"
MISSING_MESSAGE_STOP = "protocol.missing_message_stop"
BLOCK_NOT_CLOSED = "protocol.block_not_closed"  # a block had no content_block_stop when the message ended
TOOL_INPUT_INVALID = "tool_input.invalid_json"
TOOL_INPUT_EMPTY = "tool_input.empty"  # whitespace-only or empty (but present) input_json_delta buffer
TOOL_INPUT_NOT_OBJECT = "tool_input.not_object"
ERROR_EVENT = "protocol.error_event"
NO_EVENTS = "protocol.no_events"  # the stream carried no event at all

# --- the diagnostics themselves -----------------------------------------------------------------------------------
DIAGNOSTICS_CAPPED = "diagnostics.capped"  # more than the kept number of one code in a stream: the rest counted

# --- transport / loop layer --------------------------------------------------------------------------------------
CONNECTION_DROPPED = "transport.connection_dropped"
IDLE_TIMEOUT = "transport.idle_timeout"
HTTP_ERROR = "transport.http_error"
NO_RESPONSE = "transport.no_response"  # a recorded attempt that ended before any response (its end line says why)
PROXY_NOTE = "transport.proxy_note"  # (dump) what the proxy noted on an attempt (its recording's proxy_note lines)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    event_index: int | None = None  # index of the SSE event it concerns (None: not tied to one event)
    block_index: int | None = None  # content-block index, when it concerns a block
    offset: int | None = None  # byte offset in the stream, when known
    raw: bytes | None = None  # the bytes concerned, kept so they can be shown

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "event_index": self.event_index,
        }
        if self.block_index is not None:
            out["block_index"] = self.block_index
        if self.offset is not None:
            out["offset"] = self.offset
        if self.raw is not None:
            out["raw"] = self.raw.decode("utf-8", "replace")
        return out


DEFAULT_PER_CODE = 100  # diagnostics of one code kept per stream (see DiagnosticCap)


class DiagnosticCap:
    """Keeps the first `per_code` diagnostics of each code in a stream; the rest are counted, not kept (20 MB of
    noise must not become 76 MB of diagnostics). The first one dropped for a code becomes a `diagnostics.capped`
    notice; `summary()` (at the end of the stream) gives one `diagnostics.capped` diagnostic with the counts."""

    __slots__ = ("per_code", "kept", "dropped")

    def __init__(self, per_code: int = DEFAULT_PER_CODE) -> None:
        self.per_code = per_code
        self.kept: dict[str, int] = {}
        self.dropped: dict[str, int] = {}

    def filter(self, d: Diagnostic) -> Diagnostic | None:
        """`d` if it is kept; the notice for the first one dropped of its code; None for the rest."""
        code = d.code
        if code == DIAGNOSTICS_CAPPED:
            return d
        n = self.kept.get(code, 0)
        if n < self.per_code:
            self.kept[code] = n + 1
            return d
        k = self.dropped.get(code, 0)
        self.dropped[code] = k + 1
        if k == 0:
            return Diagnostic(
                DIAGNOSTICS_CAPPED,
                "info",
                f"more than {self.per_code} {code} diagnostics in this stream: the rest are counted, not kept "
                "(the count comes at the end of the stream)",
                d.event_index,
                offset=d.offset,
            )
        return None

    def drop_if_full(self, code: str) -> bool:
        """True (and counted) when a diagnostic of `code` would be dropped now, its notice already given: callers
        on noisy paths skip building it."""
        if self.kept.get(code, 0) >= self.per_code and code in self.dropped:
            self.dropped[code] += 1
            return True
        return False

    def summary(self) -> Diagnostic | None:
        if not self.dropped:
            return None
        total = sum(self.dropped.values())
        parts = ", ".join(f"{code} x{n}" for code, n in sorted(self.dropped.items()))
        return Diagnostic(
            DIAGNOSTICS_CAPPED,
            "info",
            f"{total} more diagnostics not kept (only the first {self.per_code} of each code are): {parts}",
            None,
        )

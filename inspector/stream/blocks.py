"""Per-index block buffers: the raw fragments of one content block, and its tool input parsed once at its stop.

Every content block keeps its raw fragments (with the event each came from) in a `BlockBuffer`, keyed by the
block's `index` in `inspector.stream.message.MessageAssembler`. Fragments are added in one place (`add`, or
`add_run` for a run of consecutive events); tool input is parsed ONCE, at the block's `content_block_stop`, keeping
integers of any size exact (`inspector.core.exactjson`). Nothing re-parses per delta: assembly is linear in the
stream size. `preview()` gives a live partial parse of an open block, for the UI to call at display rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jiter
import orjson

from inspector.core import exactjson
from inspector.stream import diagnostics as D
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.protocol import TOOL_INPUT_BLOCKS, CompactionDelta

__all__ = ["BlockBuffer", "Fragment", "InputError"]


@dataclass(frozen=True, slots=True)
class InputError:
    message: str
    position: int  # character offset in the joined buffer
    line: int
    column: int

    def describe(self) -> str:
        return f"{self.message} at line {self.line} column {self.column} (char {self.position})"


@dataclass(slots=True)
class Fragment:
    text: str
    event_index: int


@dataclass(slots=True)
class BlockBuffer:
    index: int
    type: str
    start: dict[str, Any]  # the content_block of content_block_start, as sent
    start_event: int
    # the raw fragments as sent, and the event each came from (two flat lists: no object per fragment, nothing
    # for the garbage collector to walk; `fragments` gives them as Fragment objects)
    texts: list[str] = field(default_factory=list)
    fragment_events: list[int] = field(default_factory=list)
    nbytes: int = 0
    closed: bool = False
    stop_event: int | None = None
    signature: str | None = None
    citations: list[Any] | None = None
    input: Any = None  # parsed tool input (at stop)
    input_error: InputError | None = None
    parsed: bool = False  # tool input has been parsed (at stop)
    _joined: str | None = None
    compaction: CompactionDelta | None = None  # the last compaction_delta (its values replace the block's)
    prefilled: bool = False  # the block came whole inside message_start's content

    @property
    def id(self) -> str | None:
        v = self.start.get("id")
        return v if isinstance(v, str) else None  # (a wrong type is a protocol.wrong_type diagnostic)

    @property
    def name(self) -> str | None:
        v = self.start.get("name")
        return v if isinstance(v, str) else None

    @property
    def fragments(self) -> list[Fragment]:
        """The raw fragments with the event each came from (built on demand)."""
        return [Fragment(t, e) for t, e in zip(self.texts, self.fragment_events, strict=True)]

    @property
    def is_tool(self) -> bool:
        return self.type in TOOL_INPUT_BLOCKS

    @property
    def open(self) -> bool:
        return not self.closed

    def add(self, text: str, event_index: int) -> None:
        """One fragment, from the event `event_index`."""
        self.texts.append(text)
        self.fragment_events.append(event_index)
        self.nbytes += len(text) if text.isascii() else len(text.encode("utf-8"))
        self._joined = None

    def add_run(self, texts: list[str], first_event: int) -> None:
        """Fragments from consecutive events, the first from `first_event`: the same as `add` for each, in one go
        (the UTF-8 size of fragments is that of their concatenation)."""
        self.texts.extend(texts)
        self.fragment_events.extend(range(first_event, first_event + len(texts)))
        joined = "".join(texts)
        self.nbytes += len(joined) if joined.isascii() else len(joined.encode("utf-8"))
        self._joined = None

    def joined(self) -> str:
        """All fragments joined (cached until the next fragment)."""
        if self._joined is None:
            self._joined = "".join(self.texts)
        return self._joined

    def preview(self) -> tuple[Any, str | None]:
        """Live partial parse of a tool block's input (for display; call at display rate, never per delta).

        Returns (value, error). The unfinished trailing string is kept ("trailing-strings")."""
        if not self.is_tool:
            return self.joined(), None
        if self.parsed:
            return self.input, self.input_error.describe() if self.input_error else None
        buf = self.joined()
        if not buf.strip():
            return None, None
        try:
            return jiter.from_json(buf.encode("utf-8"), partial_mode="trailing-strings"), None
        except ValueError as e:
            return None, str(e)

    def parse_input(self) -> list[Diagnostic]:
        """Parse tool input once (at content_block_stop). Never raises."""
        self.parsed = True
        if not self.texts:
            start_input = self.start.get("input", {})
            if not isinstance(start_input, dict):
                self.input = None
                self.input_error = InputError(
                    f"tool input is a JSON {type(start_input).__name__}, not an object", 0, 1, 1
                )
                return [
                    Diagnostic(
                        D.TOOL_INPUT_NOT_OBJECT,
                        "error",
                        f"tool block {self.index} ({self.name}): the start block's {self.input_error.message}",
                        self.stop_event,
                        block_index=self.index,
                        raw=exactjson.dumps(start_input)[:4096],
                    )
                ]
            self.input = start_input
            return []
        buf = self.joined()
        if buf == "":
            start_input = self.start.get("input", {})
            self.input = start_input if isinstance(start_input, dict) else {}
            return [
                Diagnostic(
                    D.TOOL_INPUT_EMPTY,
                    "warning",
                    f"tool block {self.index} ({self.name}): input_json_delta fragments were all empty; "
                    "the start block's input is used",
                    self.stop_event,
                    block_index=self.index,
                )
            ]
        if not buf.strip():
            self.input = None
            self.input_error = InputError("tool input buffer is whitespace only", 0, 1, 1)
            return [
                Diagnostic(
                    D.TOOL_INPUT_EMPTY,
                    "error",
                    f"tool block {self.index} ({self.name}): input buffer is whitespace only",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode(),
                )
            ]
        try:
            value = exactjson.loads(buf)
        except orjson.JSONDecodeError as e:
            self.input = None
            self.input_error = InputError(e.msg, e.pos, e.lineno, e.colno)
            return [
                Diagnostic(
                    D.TOOL_INPUT_INVALID,
                    "error",
                    f"tool block {self.index} ({self.name}): input is not valid JSON: {self.input_error.describe()}",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode("utf-8", "replace"),
                )
            ]
        if not isinstance(value, dict):
            self.input = None
            self.input_error = InputError(f"tool input is a JSON {type(value).__name__}, not an object", 0, 1, 1)
            return [
                Diagnostic(
                    D.TOOL_INPUT_NOT_OBJECT,
                    "error",
                    f"tool block {self.index} ({self.name}): {self.input_error.message}",
                    self.stop_event,
                    block_index=self.index,
                    raw=buf.encode("utf-8", "replace"),
                )
            ]
        self.input = value
        return []

    def to_content(self) -> dict[str, Any]:
        """The block as the API's final Message has it (tool input parsed; failed input: null + input_raw)."""
        out = dict(self.start)
        t = self.type
        if t == "text":
            if self.texts or not isinstance(out.get("text", ""), str):
                out["text"] = _str_or_empty(out.get("text")) + self.joined()
            if self.citations is not None:
                base = out.get("citations")
                out["citations"] = (base if isinstance(base, list) else []) + self.citations
        elif t == "thinking":
            if self.texts or not isinstance(out.get("thinking", ""), str):
                out["thinking"] = _str_or_empty(out.get("thinking")) + self.joined()
            if self.signature is not None:
                out["signature"] = self.signature
        elif t == "compaction":
            if self.compaction is not None:  # as the SDK's beta accumulator: the last delta's values replace
                out["content"] = self.compaction.content
                out["encrypted_content"] = self.compaction.encrypted_content
        elif self.is_tool:
            if not self.parsed:
                # open block (no stop seen): show what arrived, never pretend it is complete (not even as the
                # start block's `{}` when no fragment came yet)
                out["input"] = None
                out["input_raw"] = self.joined()
            elif self.input_error is not None:
                out["input"] = None
                out["input_raw"] = self.joined()
            else:
                out["input"] = self.input
        return out


def _str_or_empty(v: Any) -> str:
    return v if isinstance(v, str) else ""

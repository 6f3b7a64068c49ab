"""Which wire format a response body is: Anthropic Messages, OpenAI Chat Completions or OpenAI Responses.

Decided from the request path, the content-type and the first decoded SSE event; never from a file name. The first
event wins over the path when they disagree (the bytes are what they are), and the disagreement is named
(`stream.family_mismatch`). `FamilyStream` buffers the bytes until the first event is decoded, then hands them to
the family's stream (`TurnStream`, `ChatStream` or `ResponsesStream`), so any read boundaries give the same steps.

Pure: no I/O (import contract).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

import orjson

from inspector.stream.assembler import Step, TurnStream
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.protocol import KNOWN_EVENTS
from inspector.stream.sse import SSEDecoder, SSEEvent

Family = Literal["anthropic", "openai_chat", "openai_responses"]
FAMILIES: tuple[Family, ...] = ("anthropic", "openai_chat", "openai_responses")
_PROBE_SLICE = 16 * 1024
# held without a telling event: decided then (by the path, else Anthropic), so garbage is not held for long
_PROBE_EVENTS = 16
_PROBE_BYTES = 4 * 1024 * 1024
FAMILY_MISMATCH = "stream.family_mismatch"  # the first event is of another family than the request path says


def family_from_path(url_or_path: str | None) -> Family | None:
    """The family a request path names (`.../chat/completions`, `.../responses`, `.../messages`), else None."""
    if not isinstance(url_or_path, str) or not url_or_path:
        return None
    try:
        path = urlsplit(url_or_path).path
    except ValueError:
        return None
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai_chat"
    if path.endswith("/responses"):
        return "openai_responses"
    if path.endswith("/messages"):
        return "anthropic"
    return None


def family_from_event(event: str, data: str) -> Family | None:
    """The family a decoded SSE event belongs to, or None when it does not tell ([DONE], an error object...)."""
    if event in KNOWN_EVENTS and event not in ("message", "error"):
        return "anthropic"
    if event.startswith("response."):
        return "openai_responses"
    head = data.lstrip()
    if not head.startswith("{"):
        return None
    try:
        obj = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    t = obj.get("type")
    if isinstance(t, str):
        if t.startswith("response."):
            return "openai_responses"
        if t in KNOWN_EVENTS and t != "error":
            return "anthropic"
        if t == "error" and "sequence_number" in obj:
            return "openai_responses"
    if obj.get("object") == "chat.completion.chunk" or isinstance(obj.get("choices"), list):
        return "openai_chat"
    return None


def new_stream(family: Family, max_event_bytes: int | None = None) -> TurnStream:
    """A stream for `family` (imports the OpenAI decoders only when needed)."""
    if family == "openai_chat":
        from inspector.stream.openai_chat import ChatStream

        return ChatStream(max_event_bytes)
    if family == "openai_responses":
        from inspector.stream.openai_responses import ResponsesStream

        return ResponsesStream(max_event_bytes)
    return TurnStream(max_event_bytes)


class FamilyStream:
    """Bytes in, steps out, for a body of a family not known in advance. Until an event tells the family (or the
    body ends, or 16 events that do not tell came, or 4 MiB are held), bytes are held and no step comes out; then
    the chosen stream gets them all. Without a telling event: the path's family, else Anthropic."""

    def __init__(self, path: str | None = None, max_event_bytes: int | None = None) -> None:
        self.path_family = family_from_path(path)
        self.max_event_bytes = max_event_bytes
        self.family: Family | None = None
        self.stream: TurnStream | None = None
        self._held: list[bytes] = []
        self._held_size = 0
        self._probe: SSEDecoder | None = SSEDecoder(max_event_bytes) if max_event_bytes else SSEDecoder()
        self._notes: list[Diagnostic] = []

    def feed(self, data: bytes) -> list[Step]:
        if self.stream is not None:
            return self.stream.feed(data)
        self._held.append(data)
        self._held_size += len(data)
        assert self._probe is not None
        for i in range(0, len(data), _PROBE_SLICE):  # (a big read is not decoded twice: only up to its first event)
            for e in self._probe.feed(data[i : i + _PROBE_SLICE]):
                fam = family_from_event(e.event, e.data)
                if fam is not None:
                    return self._choose(fam, e)
                if e.seq + 1 >= _PROBE_EVENTS:
                    return self._choose(None, None)
        limit = _PROBE_BYTES if self.max_event_bytes is None else min(_PROBE_BYTES, self.max_event_bytes)
        if self._held_size > limit:
            return self._choose(None, None)
        return []

    def _choose(self, fam: Family | None, e: SSEEvent | None) -> list[Step]:
        if fam is None:
            fam = self.path_family or "anthropic"
        elif self.path_family is not None and fam != self.path_family:
            self._notes.append(
                Diagnostic(
                    FAMILY_MISMATCH,
                    "warning",
                    f"the request path names {self.path_family} but the stream's events are {fam}: decoded as {fam}",
                    e.seq if e is not None else None,
                )
            )
        self.family = fam
        self.stream = new_stream(fam, self.max_event_bytes)
        self._probe = None
        held, self._held, self._held_size = self._held, [], 0
        steps: list[Step] = []
        for data in held:
            steps.extend(self.stream.feed(data))
        if self._notes and steps:
            steps[0].diagnostics[:0] = self._notes
        self.stream.diagnostics[:0] = self._notes
        self._notes = []
        return steps

    def decide(self) -> list[Step]:
        """Choose the family now, if no event told it yet (the path's, else Anthropic): the steps of the bytes held
        until now; [] when it was chosen already."""
        if self.stream is not None:
            return []
        return self._choose(None, None)

    def close(self) -> TurnStream:
        """End of body: the chosen stream, closed (the steps of bytes still held are not returned: `decide` first
        for them)."""
        self.decide()
        assert self.stream is not None
        self.stream.close()
        return self.stream


__all__ = [
    "FAMILIES",
    "FAMILY_MISMATCH",
    "Family",
    "FamilyStream",
    "family_from_event",
    "family_from_path",
    "new_stream",
]

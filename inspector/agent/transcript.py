"""The conversation history the agent loop keeps and re-sends every turn, out of RAM.

A long session's history grows with every turn (the assistant's content, the tool results) and the whole of it is
sent again with each request: held as dicts, then serialized by the SDK into one body per request, it makes the
memory of a long run grow with its length. Here:

* :class:`SpilledHistory` keeps each message as the SDK serializes it (``prepare_request_data``, then its JSON
  encoder: compact, UTF-8), followed by ``,``, in a spill file (an unlinked temporary file). Memory holds one offset
  per message. Reading a message back parses its bytes (a new dict each time).
* :class:`HistoryView` is the first ``n`` messages of a store, frozen (what one request sent), optionally with the
  session's secrets masked as it is read (the views published in observations).
* :class:`SplicedMessages` sends a view without building it in memory: the SDK is given one placeholder message,
  and the wrapped transport (``tries.TryTap.rewrite``) puts the stored bytes in place of the placeholder's as the
  body is sent (a stream, with the exact ``Content-Length``). The SDK's encoder writes a list ``[a, b]`` as
  ``[`` + a + ``,`` + b + ``]``, so the body is byte for byte the one the SDK builds from the same history.
"""

from __future__ import annotations

import json
import os
import secrets as _secrets
import tempfile
import weakref
from array import array
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import IO, Any, TypeGuard, overload

import httpx2
import orjson

from inspector.core import exactjson
from inspector.core.redaction import redact

__all__ = ["HistoryView", "Message", "SpilledHistory", "SplicedMessages", "SpliceError", "sdk_json"]

# one message of the history: a JSON object, as the API takes it and as it is read back from the spill file
Message = dict[str, Any]

CHUNK = 1 << 16  # bytes per read of the spill file while a body is sent


def sdk_json(value: Any) -> bytes:
    """``value`` as the SDK puts it in a request body: prepared (``prepare_request_data``), then encoded by its
    JSON encoder."""
    from anthropic._utils._json import openapi_dumps
    from anthropic._utils._prepare import prepare_request_data

    with exactjson.deep_recursion():  # (a tool input may nest as deep as orjson reads: 1,024 levels)
        return openapi_dumps(prepare_request_data(value, location="body"))


def _in_range(i: int, n: int) -> int:
    """Index ``i`` (negative: from the end) of a sequence of ``n``; IndexError out of range."""
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(i)
    return i


def _is_seq(b: object) -> TypeGuard[Sequence[object]]:
    """``b`` compares with a history: a sequence, not a string or bytes."""
    return isinstance(b, Sequence) and not isinstance(b, (str, bytes, bytearray, memoryview))


def _seq_eq(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))


def _message(data: bytes) -> Message:
    """A stored message parsed back: the store holds only what ``SpilledHistory.append`` wrote (a message). A tool
    input as deep as orjson reads (1,024 levels) is deeper in its message: read by the standard library then."""
    try:
        message: Message = exactjson.loads(data)
    except orjson.JSONDecodeError:
        with exactjson.deep_recursion():
            message = json.loads(data)
    return message


class SpilledHistory(Sequence[Message]):
    """The loop's history: append a message (a dict), read messages back (parsed from the stored bytes)."""

    __slots__ = ("__weakref__", "_closer", "_ends", "_file")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._file: IO[bytes] | None = None  # created at the first append
        self._closer: weakref.finalize[[], SpilledHistory] | None = None
        self._ends = array("q")  # per message: the offset just past its bytes and the "," after them
        for message in messages:
            self.append(message)

    def _fd(self) -> int:
        if self._file is None:
            f = tempfile.TemporaryFile(buffering=0)
            self._file = f
            self._closer = weakref.finalize(self, f.close)  # closed with the store, never left to a warning
        return self._file.fileno()

    def append(self, message: Message) -> None:
        data = sdk_json(message) + b","
        fd = self._fd()
        at = self._ends[-1] if self._ends else 0
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
        self._ends.append(at)

    def close(self) -> None:
        if self._closer is not None:
            self._closer()

    def _read(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        assert self._file is not None
        fd = self._file.fileno()
        parts = []
        while start < end:
            part = os.pread(fd, end - start, start)
            if not part:
                raise OSError(f"the history's spill file ends at {start} (expected {end})")
            parts.append(part)
            start += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def encoded(self, i: int) -> bytes:
        """Message ``i`` as the SDK serializes it."""
        i = _in_range(i, len(self))
        start = self._ends[i - 1] if i else 0
        return self._read(start, self._ends[i] - 1)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return _message(self.encoded(i))

    def __eq__(self, other: object) -> bool:
        if not _is_seq(other):
            return NotImplemented
        return _seq_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # equal by value, so unhashable (as a list is)

    def __repr__(self) -> str:
        return f"<SpilledHistory of {len(self)} messages>"

    def view(self, secrets: Sequence[str] = ()) -> HistoryView:
        """The messages so far, frozen (later appends are not in the view); ``secrets`` masked as they are read."""
        return HistoryView(self, len(self), tuple(secrets))

    # ------------------------------------------------------------------------------------------ the list as sent
    def list_size(self, n: int) -> int:
        """Bytes of the first ``n`` messages serialized as a JSON list (``[`` ... ``]``)."""
        return 2 + (self._ends[n - 1] - 1 if n else 0)

    def list_chunks(self, n: int, size: int = CHUNK) -> Iterator[bytes]:
        """The first ``n`` messages serialized as a JSON list, in chunks read from the spill file."""
        yield b"["
        end = self._ends[n - 1] - 1 if n else 0  # without the "," after the last message
        at = 0
        while at < end:
            stop = min(end, at + size)
            yield self._read(at, stop)
            at = stop
        yield b"]"


class HistoryView(Sequence[Message]):
    """The first ``n`` messages of a :class:`SpilledHistory` (read only, frozen). With ``secrets``, every message is
    read back with them masked (``core.redaction.redact``): the view is what an observation may show."""

    __slots__ = ("_n", "_secrets", "_store")

    def __init__(self, store: SpilledHistory, n: int, secrets: tuple[str, ...] = ()) -> None:
        self._store = store
        self._n = n
        self._secrets = secrets

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        message = _message(self._store.encoded(_in_range(i, self._n)))
        if not self._secrets:
            return message
        masked: Message = redact(message, self._secrets)  # (a dict comes back a dict: its keys and values masked)
        return masked

    def __eq__(self, other: object) -> bool:
        if not _is_seq(other):
            return NotImplemented
        return _seq_eq(self, other)

    __hash__ = None  # type: ignore[assignment]  # equal by value, so unhashable (as a list is)

    def __repr__(self) -> str:
        return f"<HistoryView of {self._n} messages>"

    def list_size(self) -> int:
        return self._store.list_size(self._n)

    def list_chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The messages as the SDK serializes the list (unmasked: what is sent)."""
        return self._store.list_chunks(self._n, size)


class SpliceError(RuntimeError):
    """The SDK's request body does not hold the history's placeholder exactly once: nothing is sent."""


class SplicedMessages:
    """One request's messages, sent from the spill file. Give ``placeholder_messages`` to the SDK as ``messages``
    and ``rewrite`` to the tap (``TryTap.rewrite``): every HTTP try of the request, the SDK's own retries too, then
    carries the view's messages where the placeholder's serialization was."""

    def __init__(self, view: HistoryView) -> None:
        self.view = view
        placeholder = {"role": "user", "content": f"inspector-history-{_secrets.token_hex(16)}"}
        self.placeholder_messages = [placeholder]
        self.marker = sdk_json(self.placeholder_messages)

    def rewrite(self, request: httpx2.Request) -> httpx2.Request:
        content = request.content
        at = content.find(self.marker)
        if at < 0 or content.find(self.marker, at + 1) >= 0:
            raise SpliceError("the request body does not hold the history's placeholder exactly once")
        head, tail = content[:at], content[at + len(self.marker) :]
        headers = request.headers.copy()
        headers["Content-Length"] = str(len(head) + self.view.list_size() + len(tail))
        return httpx2.Request(
            request.method,
            request.url,
            headers=headers,
            stream=_SplicedBody(head, self.view, tail),
            extensions=request.extensions,
        )


class _SplicedBody(httpx2.AsyncByteStream):
    def __init__(self, head: bytes, view: HistoryView, tail: bytes) -> None:
        self.head, self.view, self.tail = head, view, tail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        for chunk in self.view.list_chunks():
            yield chunk
        yield self.tail

"""Writing a recording (format ``stream-inspector-recording``, version 1; inspector/record/format.py declares its
lines, docs/recording-format.md describes them): :class:`RecordingWriter`, one line a call, each flushed as soon as
it is written, secrets masked (docs/secrets.md)."""

from __future__ import annotations

import base64
import io
import math
import os
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from inspector import __version__
from inspector.core import exactjson
from inspector.core.redaction import (
    MIN_SECRET_LENGTH,
    REDACTED,
    StreamRedactor,
    clean_headers,
    credential_values,
    json_text_clean,
    redact,
    usable_secrets,
)
from inspector.observe.observations import Observation
from inspector.record.format import FORMAT, VERSION

__all__ = ["RecordingWriter"]


def _iso_utc(moment: datetime) -> str:
    if moment.tzinfo is None:  # a naive datetime is taken to be UTC already
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError("t must be a number of seconds")
    t = float(value)
    if not math.isfinite(t):
        raise ValueError(f"t must be finite, got {t!r}")
    return t


def _encode_bytes(data: bytes) -> tuple[str, str]:
    """``("data", text)`` when the bytes are UTF-8, else ``("b64", base64)``."""
    try:
        return "data", data.decode("utf-8")
    except UnicodeDecodeError:
        return "b64", base64.b64encode(data).decode("ascii")


def _json_body(body: Any) -> Any:
    """Request bodies are JSON values; raw bytes/str are parsed as JSON when they are JSON, else kept as text."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw.decode("utf-8", errors="replace")
    if isinstance(body, dict) and any(map(_is_view, body.values())):
        # the loop's history view (agent.transcript: messages read back from its spill file) is written as a list
        return {k: list(v) if _is_view(v) else v for k, v in body.items()}
    return body


def _is_view(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (list, tuple, str, bytes, bytearray, memoryview))


class RecordingWriter:
    """Writes a recording line by line; every line is flushed as soon as it is written.

    ``path_or_file`` is a path (the file is created or truncated, and closed by ``close()``) or an open *binary*
    file object (flushed, but left open: the caller owns it). The header line is written by the constructor.
    ``secrets`` are strings that must never reach the file: every occurrence is replaced by ``[redacted]``
    (ValueError for a secret shorter than ``MIN_SECRET_LENGTH``). ``started_at`` defaults to now; a naive datetime
    is taken to be UTC.
    """

    def __init__(
        self,
        path_or_file: str | os.PathLike[str] | IO[bytes],
        *,
        source: dict[str, Any],
        secrets: Iterable[str] = (),
        started_at: datetime | None = None,
    ) -> None:
        if isinstance(path_or_file, (str, os.PathLike)):
            self._file: IO[bytes] = open(path_or_file, "wb")
            self._owns_file = True
        else:
            if isinstance(path_or_file, io.TextIOBase) or not hasattr(path_or_file, "write"):
                raise TypeError("RecordingWriter needs a path or a binary file object")
            self._file = path_or_file
            self._owns_file = False
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        for secret in secrets:
            if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
                raise ValueError(f"secrets must be strings of at least {MIN_SECRET_LENGTH} characters")
        self._secrets: list[str] = []
        self._secret_forms: list[bytes] = []
        # one StreamRedactor per attempt: reads are masked across read and delta boundaries (docs/secrets.md)
        self._streams: dict[tuple[int, int], tuple[StreamRedactor, float]] = {}
        self._lock = threading.Lock()
        self.add_secrets(secrets)
        self._closed = False
        self.lines_written = 0
        self._write(
            {
                "kind": "header",
                "format": FORMAT,
                "version": VERSION,
                "tool_version": __version__,
                "source": dict(source),
                "started_at": _iso_utc(started_at or datetime.now(UTC)),
            }
        )

    # --- public API -------------------------------------------------------------------------------------------

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """More secrets (a key first seen late): masked in everything written from now on. Strings shorter than
        MIN_SECRET_LENGTH are ignored here (their credential headers are dropped anyway)."""
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        new = [s for s in usable_secrets(secrets) if s not in self._secrets]
        if not new:
            return
        self._secrets = usable_secrets([*self._secrets, *new])  # longest first
        # the forms a secret can take inside serialized JSON (escaped) and as raw text
        self._secret_forms = sorted(
            {form for s in self._secrets for form in (s.encode("utf-8"), orjson.dumps(s)[1:-1])}, key=len, reverse=True
        )
        for stream, _ in self._streams.values():
            stream.add_secrets(new)

    def request(self, turn: int, attempt: int, t: float, method: str, url: str, headers: Any, body: Any) -> None:
        """The request of one attempt; ``t`` is seconds since the start of the recording. The credentials it
        carries (credential headers, ``?api_key=``) become secrets of this writer before anything is written."""
        try:
            self.add_secrets(credential_values(headers, str(url)))
        except (TypeError, ValueError, AttributeError):  # headers of an odd shape: clean_headers copes below
            pass
        self._write(
            {
                "kind": "request",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "method": str(method),
                "url": str(url),
                "headers": clean_headers(headers),
                "body": _json_body(body),
            }
        )

    def response(self, turn: int, attempt: int, t: float, status: int, headers: Any) -> None:
        """Status and headers of the response; ``t`` is seconds since the attempt's request was sent."""
        self._write(
            {
                "kind": "response",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "status": _int("status", status),
                "headers": clean_headers(headers),
            }
        )

    def read(self, turn: int, attempt: int, t: float, data: bytes) -> None:
        """One received network read; ``t`` is seconds since the attempt's request was sent.

        With secrets, the read goes through the attempt's StreamRedactor first: what could be the beginning of a
        secret is held back and written with a later read (or before the attempt's end line)."""
        raw = bytes(data)
        if self._secrets:
            key_ = (_int("turn", turn), _int("attempt", attempt))
            stream = self._streams.get(key_, (None, 0.0))[0] or StreamRedactor(self._secrets)
            self._streams[key_] = (stream, _seconds(t))
            raw = stream.feed(raw)
            if not raw:
                return
        self._write_read(turn, attempt, t, raw)

    def _write_read(self, turn: int, attempt: int, t: float, raw: bytes) -> None:
        key, value = _encode_bytes(raw)
        self._write(
            {
                "kind": "read",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                key: value,
            }
        )

    def end(self, turn: int, attempt: int, t: float, status: str, reason: str | None = None) -> None:
        """How the attempt ended; ``t`` is seconds since the attempt's request was sent. Bytes still held back by
        the attempt's StreamRedactor are written first (masked)."""
        self._flush_stream((turn, attempt), t)
        self._write(
            {
                "kind": "end",
                "turn": _int("turn", turn),
                "attempt": _int("attempt", attempt),
                "t": _seconds(t),
                "status": str(status),
                "reason": None if reason is None else str(reason),
            }
        )

    def observation(self, obj: dict[str, Any]) -> None:
        """A free-form loop observation, written as ``{"kind": "obs", **obj}`` (a "kind" key in obj is replaced)."""
        line = dict(obj)
        line.pop("kind", None)
        self._write({"kind": "obs", **line})

    def observation_of(self, obs: Observation) -> None:
        """``observation(obs.to_json())``, the same bytes, written from ``obs.to_json_bytes()`` (one orjson call) when
        it can be: the line is checked for secrets as it is (``json_text_clean``), and walked only if one may be in
        it, or if the observation cannot be written that way."""
        body = obs.to_json_bytes()
        if body is None or (self._secrets and not json_text_clean(body, self._secrets)):
            self.observation(obs.to_json())
            return
        self._write_line(b'{"kind":"obs",' + body[1:] + b"\n")

    def close(self) -> None:
        """Flush and (if the writer opened it) close the file. Safe to call twice."""
        if not self._closed:
            for key, (_, last_t) in list(self._streams.items()):
                self._flush_stream(key, last_t)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._file.flush()
            finally:
                if self._owns_file:
                    self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals --------------------------------------------------------------------------------------------

    def _flush_stream(self, key: tuple[Any, Any], t: float) -> None:
        found = self._streams.pop(key, None)
        if found is not None:
            rest = found[0].flush()
            if rest:
                self._write_read(key[0], key[1], t, rest)

    def _redact(self, value: Any) -> Any:
        """Replace secrets in every string (keys included) of a JSON-like value."""
        return redact(value, self._secrets)

    def _serialize(self, obj: dict[str, Any]) -> bytes:
        if self._secrets:
            obj = self._redact(obj)
        try:
            line = exactjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:  # e.g. a str with a lone surrogate: replace what cannot be encoded
            with exactjson.deep_recursion():  # (two frames a level: a value may nest 1,024 deep)
                scrubbed = _scrub_surrogates(obj)
                if self._secrets:  # (what the replacement characters joined)
                    scrubbed = self._redact(scrubbed)
                line = exactjson.dumps(scrubbed, default=str, option=orjson.OPT_NON_STR_KEYS)
        if self._secrets and any(form in line for form in self._secret_forms):
            # last line of defence (a secret inside something turned into text by `default=str`, or spanning JSON
            # syntax): redact the text itself, and if that breaks the JSON, write a placeholder instead of the line
            for form in self._secret_forms:
                line = line.replace(form, REDACTED.encode())
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                line = orjson.dumps({"kind": "redacted", "original_kind": self._redact(str(obj.get("kind")))})
        return line

    def _write(self, obj: dict[str, Any]) -> None:
        self._write_line(self._serialize(obj) + b"\n")

    def _write_line(self, line: bytes) -> None:
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed RecordingWriter")
            self._file.write(line)
            self._file.flush()
            self.lines_written += 1


def _scrub_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub_surrogates(k): _scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_surrogates(v) for v in value]
    return value

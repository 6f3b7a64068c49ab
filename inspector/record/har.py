"""Import HAR files (browser devtools "Save all as HAR", mitmproxy / Charles / Proxyman exports) as recordings.

Every entry whose response is ``text/event-stream`` (by ``content.mimeType`` or the content-type header) becomes one
turn with one attempt, in file order; a Messages API call answered with an HTTP error (``POST .../messages``,
status 400-599, e.g. a 429 in JSON) is kept too, and the entry after it is taken as its retry (the next attempt of
the same turn). Each attempt has its request (method, url, headers, ``postData`` body) and response (status,
headers), the body as ONE read, and an end line. ``content.text`` may be plain text or base64
(``content.encoding == "base64"``); the bytes are kept exactly.

Timing: a HAR keeps timing per response, not per read, so reads have ``t = None``. What HAR does give is kept:
``request.t`` (``startedDateTime`` relative to the first matching entry), ``response.t`` (blocked + dns + connect +
send + wait, HAR's ssl time being part of connect: when the headers arrived) and ``end.t`` (the entry's total
``time``). The returned Recording's header says ``"timing": "per-response"`` and ``warnings`` carries a sentence the
UI can show. Credential headers (authorization, x-api-key, cookie, ...) are dropped like the recorder drops them, and
the keys the requests carried (those headers' values, credential query parameters) are masked wherever they show up
in the file's entries, as the recorder masks what it learns.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from inspector.core.redaction import StreamRedactor, clean_headers, credential_values, redact
from inspector.record.recording import (
    MAX_LINE_BYTES,
    ReadCallback,
    RecordedAttempt,
    RecordedRead,
    RecordedTurn,
    Recording,
    RecordingError,
    Source,
    open_chunks,
    prepend,
    read_chunks,
    read_head,
)

__all__ = ["HAR_FORMAT", "HAR_TIMING_NOTE", "MAX_HAR_BYTES", "is_har", "load_any", "read_har"]

MAX_HAR_BYTES = 256 * 1024 * 1024  # a HAR is one JSON document, parsed whole: bigger ones are refused

HAR_FORMAT = "har"
HAR_TIMING_NOTE = (
    "HAR timing is per response, not per read: the stream's bytes are shown as one read, without "
    "per-event timing (only time to headers and total time are known)"
)


def is_har(first_bytes: bytes) -> bool:
    """Whether data starting with these bytes looks like a HAR file (a JSON object with a "log" key first)."""
    head = bytes(first_bytes).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{"):
        return False
    return head[1:].lstrip(b" \t\r\n").startswith(b'"log"')


def _name(source: Any) -> str | None:
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    return getattr(source, "name", None) if hasattr(source, "read") else None


def _whole(chunks: Any, max_bytes: int) -> bytes:
    """All the chunks joined, or RecordingError past ``max_bytes`` (a HAR must be parsed whole)."""
    parts: list[bytes] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise RecordingError(
                f"HAR file larger than {max_bytes // (1024 * 1024)} MiB: too big to parse whole (export fewer entries)"
            )
        parts.append(chunk)
    return b"".join(parts)


def _pairs(headers: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(headers, list):
        return out
    for h in headers:
        if isinstance(h, dict) and isinstance(h.get("name"), str):
            value = h.get("value", "")
            out.append((h["name"], value if isinstance(value, str) else str(value)))
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _header(pairs: list[tuple[str, str]], name: str) -> str:
    return next((v for k, v in pairs if k.lower() == name), "")


def _is_sse(entry: dict[str, Any]) -> bool:
    resp = _obj(entry.get("response"))
    mime = str(_obj(resp.get("content")).get("mimeType") or "")
    ctype = _header(_pairs(resp.get("headers")), "content-type")
    return "text/event-stream" in mime.lower() or "text/event-stream" in ctype.lower()


# the model calls of both wire families: Messages, Chat Completions, Responses
MODEL_CALL_PATHS = ("/messages", "/chat/completions", "/responses")


def _is_messages_error(entry: dict[str, Any]) -> bool:
    """A model call (``POST .../messages``, ``.../chat/completions``, ``.../responses``) answered with an HTTP error
    (status 400 and up): kept as an attempt so that ``dump`` shows it (``http_error``), and the next call is taken as
    its retry."""
    request = _obj(entry.get("request"))
    url = request.get("url")
    status = _obj(entry.get("response")).get("status")
    if not isinstance(url, str) or not isinstance(status, int) or isinstance(status, bool):
        return False
    return url.split("?", 1)[0].rstrip("/").endswith(MODEL_CALL_PATHS) and 400 <= status <= 599


def _when(value: Any) -> datetime | None:
    """An aware datetime (a naive one is taken to be UTC, so naive and aware times can be subtracted)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _body(content: dict[str, Any], number: int, warn: Callable[[str], None]) -> bytes | None:
    text = content.get("text")
    if text is None:
        warn(f"entry {number}: no response body in the HAR (the tool did not keep it)")
        return None
    if not isinstance(text, str):
        warn(f"entry {number}: content.text is not a string, skipped")
        return None
    if str(content.get("encoding") or "").lower() == "base64":
        try:
            return base64.b64decode(text, validate=False)
        except (binascii.Error, ValueError):
            warn(f"entry {number}: content.text is not valid base64, skipped")
            return None
    return text.encode("utf-8", errors="surrogatepass")


def _request_body(request: dict[str, Any]) -> Any:
    post = _obj(request.get("postData"))
    text = post.get("text")
    if not isinstance(text, str):
        return None
    if str(post.get("encoding") or "").lower() == "base64":
        try:
            text = base64.b64decode(text, validate=False).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def read_har(path_or_bytes: Source, *, max_bytes: int = MAX_HAR_BYTES) -> Recording:
    """A Recording (the type ``read_recording`` returns) of the HAR's text/event-stream entries.

    Raises ``RecordingError`` when the data is not a HAR (not JSON, no ``log.entries``) or is bigger than
    ``max_bytes`` (a HAR is parsed whole)."""
    chunks, close = open_chunks(path_or_bytes)
    try:
        raw = _whole(chunks, max_bytes)
    finally:
        close()
    return _har_recording(raw, _name(path_or_bytes))


def _har_recording(raw: bytes, name: str | None) -> Recording:
    try:
        doc = orjson.loads(raw.lstrip(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError as e:
        raise RecordingError(f"not a HAR file: invalid JSON ({e})") from None
    log = doc.get("log") if isinstance(doc, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(log, dict) or not isinstance(entries, list):
        raise RecordingError("not a HAR file: no log.entries")
    del raw, doc
    creator = _obj(log.get("creator"))
    tool = f"{creator.get('name', '?')} {creator.get('version', '')}".strip()
    source: dict[str, Any] = {"type": "har", "creator": tool}
    if name:
        source["file"] = name
    header = {
        "kind": "header",
        "format": HAR_FORMAT,
        "version": log.get("version") if isinstance(log.get("version"), str) else None,
        "source": source,
        "timing": "per-response",
    }
    rec = Recording(header=header)
    warn = rec.warnings.append
    matching = [
        (i, e) for i, e in enumerate(entries, 1) if isinstance(e, dict) and (_is_sse(e) or _is_messages_error(e))
    ]
    skipped = sum(1 for e in entries if isinstance(e, dict)) - len(matching)
    t0 = next((w for w in (_when(e.get("startedDateTime")) for _, e in matching) if w is not None), None)
    # the keys the requests carry (credential headers, query parameters, a URL's password), learned first: masked
    # wherever they show up in any entry (a URL, another header, a body, the stream echoing one, whole or split
    # across deltas), as the recorder masks what it learns; and learned process-wide, so every output masks them
    secrets: list[str] = []
    for _, entry in matching:
        request = _obj(entry.get("request"))
        url = request.get("url")
        for value in credential_values(_pairs(request.get("headers")), url if isinstance(url, str) else None):
            if value not in secrets:
                secrets.append(value)
    turn, attempt = -1, 0
    retry_next = False  # the previous entry was an HTTP error: this one is its retry (the same turn)
    for number, entry in matching:
        turn, attempt = (turn, attempt + 1) if retry_next else (turn + 1, 0)
        retry_next = _is_messages_error(entry)
        request = _obj(entry.get("request"))
        response = _obj(entry.get("response"))
        timings = _obj(entry.get("timings"))
        started = _when(entry.get("startedDateTime"))
        t_req = (started - t0).total_seconds() if started is not None and t0 is not None else 0.0
        parts = [_ms(timings.get(k)) for k in ("blocked", "dns", "connect", "send", "wait")]
        t_headers = sum(p for p in parts if p is not None) / 1000 if any(p is not None for p in parts) else None
        total = _ms(entry.get("time"))
        att = RecordedAttempt(turn=turn, attempt=attempt)
        att.request = {
            "kind": "request",
            "turn": turn,
            "attempt": attempt,
            "t": t_req,
            "method": request["method"] if isinstance(request.get("method"), str) else "GET",
            "url": redact(request["url"], secrets) if isinstance(request.get("url"), str) else "",
            "headers": redact(clean_headers(_pairs(request.get("headers"))), secrets),
            "body": redact(_request_body(request), secrets),
            "har_entry": number,
        }
        status = response.get("status")
        att.response = {
            "kind": "response",
            "turn": turn,
            "attempt": attempt,
            "t": t_headers,
            "status": status
            if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 999
            else None,
            "headers": redact(clean_headers(_pairs(response.get("headers"))), secrets),
        }
        body = _body(_obj(response.get("content")), number, warn)
        if body is not None and secrets:
            masking = StreamRedactor(secrets)
            body = masking.feed(body) + masking.flush()
        if body is not None:
            att.reads.append(RecordedRead(t=None, data=body))
        error = response.get("_error") or entry.get("_error")
        if att.response["status"] is None and status is not None and not (status == 0 and _is_int(status)):
            warn(f"entry {number}: response status {str(status)[:40]!r} is not an HTTP status, dropped")
            status = None
        failed = bool(error) or status in (0, None) or (_is_int(status) and status >= 400)
        att.end = {
            "kind": "end",
            "turn": turn,
            "attempt": attempt,
            "t": None if total is None else total / 1000,
            "status": "failed" if failed else "complete",
            "reason": str(error)
            if error
            else ("no response" if status in (0, None) else (f"HTTP {status}" if failed else None)),
        }
        if attempt:
            rec.turns[-1].attempts.append(att)
        else:
            rec.turns.append(RecordedTurn(turn=turn, attempts=[att]))
    if matching:
        warn(HAR_TIMING_NOTE)
    else:
        warn("no text/event-stream response in this HAR")
    if skipped:
        rec.header["skipped_entries"] = skipped
    return rec


def load_any(
    path_or_bytes: Source,
    *,
    max_line: int = MAX_LINE_BYTES,
    max_har: int = MAX_HAR_BYTES,
    on_read: ReadCallback | None = None,
    keep_reads: bool = True,
) -> Recording:
    """A recording, a plain SSE file or a HAR file, whichever it is (for ``inspector dump`` / ``replay``).

    Read as a stream (see ``read_recording``: ``max_line``, ``on_read``, ``keep_reads``); a HAR is parsed whole,
    up to ``max_har`` bytes (RecordingError past that)."""
    chunks, close = open_chunks(path_or_bytes)
    try:
        head = read_head(chunks)
        if is_har(head[:4096]):
            rec = _har_recording(_whole(prepend(head, chunks), max_har), _name(path_or_bytes))
            for att in rec.attempts():
                reads = att.reads
                if not keep_reads:
                    att.reads = []  # (before on_read: a callback may keep them its own way, e.g. spill_reads)
                if on_read is not None:
                    for read in reads:
                        on_read(att, read)
            return rec
        return read_chunks(prepend(head, chunks), head, max_line=max_line, on_read=on_read, keep_reads=keep_reads)
    finally:
        close()

"""Import HAR files (browser devtools "Save all as HAR", mitmproxy / Charles / Proxyman exports) as recordings.

Every entry whose response is ``text/event-stream`` (by ``content.mimeType`` or the content-type header) becomes one
turn with one attempt, in file order: its request (method, url, headers, ``postData`` body) and response (status,
headers), the body as ONE read, and an end line. ``content.text`` may be plain text or base64
(``content.encoding == "base64"``); the bytes are kept exactly.

Timing: a HAR keeps timing per response, not per read, so reads have ``t = None``. What HAR does give is kept:
``request.t`` (``startedDateTime`` relative to the first matching entry), ``response.t`` (blocked + dns + connect +
send + wait, HAR's ssl time being part of connect: when the headers arrived) and ``end.t`` (the entry's total
``time``). The returned Recording's header says ``"timing": "per-response"`` and ``warnings`` carries a sentence the UI can show. Credential headers
(authorization, x-api-key, cookie, ...) are dropped like the recorder drops them.
"""

from __future__ import annotations

import base64
import binascii
import os
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson

from inspector.core.redaction import clean_headers
from inspector.record.recording import (
    RecordedAttempt,
    RecordedRead,
    RecordedTurn,
    Recording,
    RecordingError,
    read_recording,
)

__all__ = ["HAR_FORMAT", "HAR_TIMING_NOTE", "is_har", "load_any", "read_har"]

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


def _raw(path_or_bytes: Any) -> tuple[bytes, str | None]:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes), None
    if isinstance(path_or_bytes, (str, os.PathLike)):
        return Path(path_or_bytes).read_bytes(), str(path_or_bytes)
    if hasattr(path_or_bytes, "read"):
        data = path_or_bytes.read()
        if not isinstance(data, bytes):
            raise TypeError("read_har needs a binary file object")
        return data, getattr(path_or_bytes, "name", None)
    raise TypeError(f"read_har: unsupported input {type(path_or_bytes).__name__}")


def _pairs(headers: Any) -> list[tuple[str, str]]:
    out = []
    for h in headers or []:
        if isinstance(h, dict) and "name" in h:
            out.append((str(h["name"]), str(h.get("value", ""))))
    return out


def _header(pairs: list[tuple[str, str]], name: str) -> str:
    return next((v for k, v in pairs if k.lower() == name), "")


def _is_sse(entry: dict) -> bool:
    resp = entry.get("response") or {}
    mime = str((resp.get("content") or {}).get("mimeType") or "")
    ctype = _header(_pairs(resp.get("headers")), "content-type")
    return "text/event-stream" in mime.lower() or "text/event-stream" in ctype.lower()


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


def _body(content: dict, number: int, warn) -> bytes | None:
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


def _request_body(request: dict) -> Any:
    post = request.get("postData") or {}
    text = post.get("text")
    if not isinstance(text, str):
        return None
    if str(post.get("encoding") or "").lower() == "base64":
        try:
            text = base64.b64decode(text).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def read_har(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]) -> Recording:
    """A Recording (the type ``read_recording`` returns) of the HAR's text/event-stream entries.

    Raises ``RecordingError`` when the data is not a HAR (not JSON, no ``log.entries``)."""
    raw, name = _raw(path_or_bytes)
    return _har_recording(raw, name)


def _har_recording(raw: bytes, name: str | None) -> Recording:
    try:
        doc = orjson.loads(raw.lstrip(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError as e:
        raise RecordingError(f"not a HAR file: invalid JSON ({e})") from None
    log = doc.get("log") if isinstance(doc, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise RecordingError("not a HAR file: no log.entries")
    creator = log.get("creator") if isinstance(log.get("creator"), dict) else {}
    tool = f"{creator.get('name', '?')} {creator.get('version', '')}".strip()
    source: dict[str, Any] = {"type": "har", "creator": tool}
    if name:
        source["file"] = name
    header = {
        "kind": "header",
        "format": HAR_FORMAT,
        "version": log.get("version"),
        "source": source,
        "timing": "per-response",
    }
    rec = Recording(header=header)
    warn = rec.warnings.append
    matching = [(i, e) for i, e in enumerate(entries, 1) if isinstance(e, dict) and _is_sse(e)]
    skipped = sum(1 for e in entries if isinstance(e, dict)) - len(matching)
    t0 = next((w for w in (_when(e.get("startedDateTime")) for _, e in matching) if w is not None), None)
    for turn, (number, entry) in enumerate(matching):
        request = entry.get("request") or {}
        response = entry.get("response") or {}
        timings = entry.get("timings") or {}
        started = _when(entry.get("startedDateTime"))
        t_req = (started - t0).total_seconds() if started is not None and t0 is not None else 0.0
        parts = [_ms(timings.get(k)) for k in ("blocked", "dns", "connect", "send", "wait")]
        t_headers = sum(p for p in parts if p is not None) / 1000 if any(p is not None for p in parts) else None
        total = _ms(entry.get("time"))
        att = RecordedAttempt(turn=turn, attempt=0)
        att.request = {
            "kind": "request",
            "turn": turn,
            "attempt": 0,
            "t": t_req,
            "method": str(request.get("method") or "GET"),
            "url": str(request.get("url") or ""),
            "headers": clean_headers(_pairs(request.get("headers"))),
            "body": _request_body(request),
            "har_entry": number,
        }
        status = response.get("status")
        att.response = {
            "kind": "response",
            "turn": turn,
            "attempt": 0,
            "t": t_headers,
            "status": int(status) if isinstance(status, int) and not isinstance(status, bool) else None,
            "headers": clean_headers(_pairs(response.get("headers"))),
        }
        body = _body(response.get("content") or {}, number, warn)
        if body is not None:
            att.reads.append(RecordedRead(t=None, data=body))
        error = response.get("_error") or entry.get("_error")
        failed = bool(error) or status in (0, None)
        att.end = {
            "kind": "end",
            "turn": turn,
            "attempt": 0,
            "t": None if total is None else total / 1000,
            "status": "failed" if failed else "complete",
            "reason": str(error) if error else ("no response" if status in (0, None) else None),
        }
        rec.turns.append(RecordedTurn(turn=turn, attempts=[att]))
    if matching:
        warn(HAR_TIMING_NOTE)
    else:
        warn("no text/event-stream response in this HAR")
    if skipped:
        rec.header["skipped_entries"] = skipped
    return rec


def load_any(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview) -> Recording:
    """A recording, a plain SSE file or a HAR file, whichever it is (for ``inspector dump`` / ``replay``)."""
    raw, name = _raw(path_or_bytes)  # read once
    if is_har(raw[:4096]):
        return _har_recording(raw, name)
    return read_recording(raw)

"""Recordings: a versioned JSON Lines file that keeps every network read of a session, with its timing.

This module is the public face of three: ``inspector.record.format`` (the declaration of every line, in pydantic;
docs/recording.schema.json is generated from it), ``inspector.record.writer`` (``RecordingWriter``) and
``inspector.record.reader`` (``read_recording`` & co). Its names are theirs, re-exported.

Format ``stream-inspector-recording``, version 1 (also described in docs/recording-format.md)
=============================================================================================

One JSON object per line, UTF-8, each line ends with ``\\n``. Every line has a ``"kind"``. The writer emits the lines
in the order things happened and flushes each one as soon as it is written, so a crash loses nothing already
received (a process crash, that is: the writer flushes to the OS but does not fsync).

Line 1, the header (always first)::

    {"kind": "header", "format": "stream-inspector-recording", "version": 1, "tool_version": "0.1.0",
     "source": {...}, "started_at": "2025-01-01T12:00:00.000000Z"}

``source`` is a free dict describing where the traffic came from, e.g. ``{"type": "scenario", "name": "parse_date"}``
or ``{"type": "api", "model": "...", "base_url": "..."}``. ``started_at`` is ISO 8601 in UTC.

Per attempt (one HTTP request of one agent-loop turn; a retry is a new attempt of the same turn)::

    {"kind": "request",  "turn": 1, "attempt": 1, "t": 0.012, "method": "POST", "url": "...", "headers": {...},
     "body": <any JSON value>}
    {"kind": "response", "turn": 1, "attempt": 1, "t": 0.350, "status": 200, "headers": {...}}
    {"kind": "read",     "turn": 1, "attempt": 1, "t": 0.351, "data": "event: message_start\\ndata: {...}\\n\\n"}
    {"kind": "read",     "turn": 1, "attempt": 1, "t": 0.402, "b64": "/v8A"}
    {"kind": "end",      "turn": 1, "attempt": 1, "t": 2.113, "status": "complete", "reason": null}

Clocks: ``request.t`` is seconds since the start of the recording (the loop start). ``response.t``, ``read.t`` and
``end.t`` are seconds since *that attempt's request* was sent, so a read's wall-clock offset from the start of the
recording is ``request.t + read.t``.

``read`` lines hold one received network read each, losslessly: bytes that are valid UTF-8 are stored as text in
``"data"``; anything else is stored as standard base64 in ``"b64"`` (exactly one of the two is present). An empty
read is ``"data": ""``.

``end.status`` is a free string: ``"complete"``, ``"dropped"``, ``"error"``, ``"cancelled"``, ...; ``reason`` is a
string or null.

Observation lines ``{"kind": "obs", ...}`` carry loop observations; their content is free. Lines of any other kind
are kept by the reader (``Recording.unknown``) and are not an error, so later versions can add kinds.

Secrets (docs/secrets.md): credential headers are removed from request and response lines. The writer's secrets
(given, added with ``add_secrets``, or learned from the credentials of a recorded request) are replaced by
``[redacted]`` in every line, as they are or JSON-escaped; reads go through a ``StreamRedactor`` per attempt, so a
secret split across reads or deltas, or escaped, is masked too (the writer may hold back the end of a read and
write it with a later read or before the attempt's end line). A line where a secret cannot be redacted without
breaking the JSON is replaced by ``{"kind": "redacted", "original_kind": ...}``.

Plain SSE text (what ``curl -N`` prints) is also accepted by the reader: a file that does not start with the header
line is a one-turn, one-attempt recording whose reads are the file's chunks (about 1 MiB each), bytes kept exactly,
with no timing. Readers read their input as a stream, never whole; a field of the wrong type is dropped with a
warning naming the line (its raw value kept under ``"invalid"``).
"""

from __future__ import annotations

from inspector.core.errors import RecordingError
from inspector.record.format import FORMAT, PLAIN_FORMAT, VERSION
from inspector.record.reader import (
    CHUNK_BYTES,
    GIVE_UP_FACTOR,
    MAX_LINE_BYTES,
    MAX_WARNINGS,
    ReadCallback,
    RecordedAttempt,
    RecordedRead,
    RecordedTurn,
    Recording,
    Source,
    SpilledReads,
    is_recording,
    open_chunks,
    prepend,
    read_chunks,
    read_head,
    read_recording,
    spill_reads,
)
from inspector.record.writer import RecordingWriter

__all__ = [
    "CHUNK_BYTES",
    "FORMAT",
    "GIVE_UP_FACTOR",
    "MAX_LINE_BYTES",
    "MAX_WARNINGS",
    "PLAIN_FORMAT",
    "VERSION",
    "ReadCallback",
    "RecordedAttempt",
    "RecordedRead",
    "RecordedTurn",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "SpilledReads",
    "Source",
    "is_recording",
    "open_chunks",
    "prepend",
    "read_chunks",
    "read_head",
    "read_recording",
    "spill_reads",
]

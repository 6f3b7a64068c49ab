"""`inspector dump`: decode and assemble every attempt of a recording, a plain SSE file or a HAR, headless.

Each attempt is decoded as its reads arrive (``Dumper.feed`` is the ``on_read`` of ``load_any``), so the reads need
not be kept: memory does not grow with the input. How a body is decoded depends on what it is (docs/outcomes.md):

- a response whose status is not 2xx is an HTTP error: ``outcome: "http_error"`` with ``status`` and the API
  error's ``type`` and ``message`` (never SSE diagnostics: the body was never SSE);
- a ``content-type: application/json`` body, or (without a content-type) a body whose first non-blank byte is ``{``,
  is a non-streamed JSON response: a Message object is assembled as a message, an error object is ``"error"``;
- anything else is SSE: decoder + protocol + assembler. The wire format (Anthropic Messages, OpenAI Chat
  Completions, OpenAI Responses) is told by the request path and the first event (``stream.family``); an OpenAI
  turn's ``message`` is the final object in the provider's own shape (a ``chat.completion`` or a ``response``), with
  the neutral blocks under ``assembled`` (docs/openai.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import orjson

from inspector.core import exactjson
from inspector.core.fmt import count, short, short_text
from inspector.record.recording import MAX_LINE_BYTES, RecordedAttempt, RecordedRead, Recording
from inspector.stream import diagnostics as D
from inspector.stream.assembler import TurnStream, stopped_outcome
from inspector.stream.family import FamilyStream
from inspector.stream.openai_common import NeutralStream
from inspector.stream.protocol import TOOL_INPUT_BLOCKS, error_fields, http_error_text

__all__ = [
    "BODY_TOO_LARGE",
    "EVENT_TOO_LARGE",
    "HTTP_BODY_KEPT",
    "Dumper",
    "conversations_of",
    "dump_events",
    "dump_ok",
    "dump_turns",
    "format_conversations",
    "format_turns",
    "grouped_text",
]

EVENT_TOO_LARGE = "dump.event_too_large"  # an SSE event (or line) above the maximum size: the rest is not decoded
BODY_TOO_LARGE = "dump.body_too_large"  # a JSON body above the maximum size: not parsed
HTTP_BODY_KEPT = 1024 * 1024  # bytes of an HTTP error body kept for its error type and message
FAILING_OUTCOMES = ("incomplete", "error", "http_error")

_BLANK = b" \t\r\n\xef\xbb\xbf"


MAX_NOTES = 100  # the proxy's notes shown per attempt (it writes a few at most; a recording is untrusted input)

# the reasons of a failed attempt's end line that name a broken transport, as the proxy and the loop word them (the
# others, "stream ended before message_stop", "error event: ...", a replayed client's close, are the stream's own
# diagnostics or no failure of the connection)
_DROP_REASONS = ("connection dropped", "upstream sent nothing for", "proxy shutting down", "injected ")


def _diag(code: str, message: str, severity: D.Severity = "error") -> dict[str, Any]:
    return D.Diagnostic(code, severity, message).to_json()


def _status(att: RecordedAttempt) -> int | None:
    status = (att.response or {}).get("status")
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _content_type(att: RecordedAttempt) -> str:
    headers = (att.response or {}).get("headers")
    value = headers.get("content-type") if isinstance(headers, dict) else None
    return value.lower() if isinstance(value, str) else ""


class _Attempt:
    """The decoding of one attempt, fed read by read."""

    def __init__(self, att: RecordedAttempt, on_event: Callable[[Any], None] | None, max_event: int) -> None:
        self.att = att
        self.on_event = on_event
        self.max_event = max_event
        self.reads = 0
        self.bytes = 0
        self.mode: str | None = None  # "sse", "json", "http" (None: not decided yet)
        self.sniffed = False  # json decided from the body, not from a content-type
        self.buf: list[bytes] = []
        self.buf_size = 0
        self.ts: FamilyStream | None = None
        self.extra: list[dict[str, Any]] = []  # diagnostics of this module
        self.stopped = False  # over a limit: the rest is not decoded
        self.since_boundary = 0  # SSE bytes since the last blank line (an event's size so far)
        self.tail = b""  # last bytes fed, to find a blank line across two reads
        self.doc: Any = False  # the parsed JSON body (False: not parsed yet)
        status = _status(att)
        if status is not None and not 200 <= status < 300:
            self.mode = "http"
        elif "application/json" in _content_type(att):
            self.mode = "json"
        elif "text/event-stream" in _content_type(att):
            self.mode = "sse"

    # --- feeding ---------------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self.reads += 1
        self.bytes += len(data)
        if self.stopped or not data:
            return
        if self.mode is None:
            self._buffer(data)
            head = data.lstrip(_BLANK)  # (what was buffered before was blank)
            if head:
                self.mode, self.sniffed = ("json", True) if head[:1] == b"{" else ("sse", False)
                if self.mode == "sse":
                    self._to_sse()
            elif self.buf_size > self.max_event:
                self.mode = "sse"
                self._to_sse()
            return
        if self.mode == "sse":
            self._sse(data)
        elif self.mode == "http":
            if self.buf_size < HTTP_BODY_KEPT:
                self._buffer(data[: HTTP_BODY_KEPT - self.buf_size])
        else:
            self._buffer(data)
            if self.buf_size > self.max_event:
                if self.sniffed:  # not one JSON object after all: SSE (or garbage) it is
                    self.mode = "sse"
                    self._to_sse()
                else:
                    self.extra.append(
                        _diag(BODY_TOO_LARGE, f"JSON body larger than {self.max_event} bytes: not parsed")
                    )
                    self.buf, self.buf_size, self.stopped = [], 0, True

    def _buffer(self, data: bytes) -> None:
        self.buf.append(data)
        self.buf_size += len(data)

    def _to_sse(self) -> None:
        buf, self.buf, self.buf_size = self.buf, [], 0
        for data in buf:
            self._sse(data)

    def _sse(self, data: bytes) -> None:
        if self.stopped:
            return
        # the size of the event being received: bytes since the last blank line ("\n\n", "\r\r", "\r\n\r\n")
        joint = self.tail + data[:3]
        last = max(data.rfind(b"\n\n"), data.rfind(b"\r\r"), data.rfind(b"\n\r\n"))
        if last >= 0:
            since = len(data) - last - 2
        elif max(joint.rfind(b"\n\n"), joint.rfind(b"\r\r"), joint.rfind(b"\n\r\n")) >= 0:
            since = len(data)
        else:
            since = self.since_boundary + len(data)
        if since > self.max_event:
            self.stopped = True
            self.extra.append(
                _diag(EVENT_TOO_LARGE, f"an SSE event larger than {self.max_event} bytes: the rest is not decoded")
            )
            return
        self.since_boundary = since
        self.tail = data[-3:]
        if self.ts is None:
            request = self.att.request
            url = request.get("url") if isinstance(request, dict) else None
            self.ts = FamilyStream(url if isinstance(url, str) else None, max_event_bytes=self.max_event)
        steps = self.ts.feed(data)
        if self.on_event is not None:
            seen: Any = None
            for step in steps:
                if step.sse is not seen:  # (an OpenAI event can give several steps: they share their sse)
                    seen = step.sse
                    self.on_event(seen)

    # --- the entry -------------------------------------------------------------------------------------------

    def entry(self) -> dict[str, Any]:
        att = self.att
        if self.mode is None or (self.mode == "json" and self.sniffed and not self._json_body()):
            self.mode = "sse"
            self._to_sse()
        entry: dict[str, Any] = {"turn": att.turn, "attempt": att.attempt}
        if self.mode == "http":
            entry.update(self._http())
        elif self.mode == "json":
            entry.update(self._json())
        else:
            ts = self.ts.close() if self.ts is not None else TurnStream()
            ts.close()
            if isinstance(ts, NeutralStream):  # an OpenAI family: the provider's own shape, and the neutral blocks
                entry.update(
                    message=ts.final_object(),
                    outcome=ts.outcome,
                    diagnostics=[d.to_json() for d in ts.diagnostics],
                    events=ts.events,
                    family=ts.family,
                    assembled=ts.final_message(),
                )
            else:
                entry.update(
                    message=ts.final_message(),
                    outcome=ts.outcome,
                    diagnostics=[d.to_json() for d in ts.diagnostics],
                    events=ts.assembler.events,
                )
        entry["diagnostics"] = entry["diagnostics"] + self.extra
        end = att.end if isinstance(att.end, dict) else {}
        if att.response is None and self.reads == 0 and end.get("status") not in (None, "complete"):
            # no response at all (refused, reset, a malformed answer, cancelled): not a stream without events
            why = end.get("reason") if isinstance(end.get("reason"), str) else None
            text = f"no response ({end.get('status')}){f': {why}' if why else ''}"
            entry["diagnostics"] = [d for d in entry["diagnostics"] if d["code"] != D.NO_EVENTS]
            entry["diagnostics"].insert(0, _diag(D.NO_RESPONSE, text))
        elif self.mode != "http" and end.get("status") == "failed" and isinstance(end.get("reason"), str):
            # a response came, then its connection broke (a body cut short of its Content-Length, a malformed
            # chunk, upstream silent past the read timeout...): the end line says why; the stream's own
            # diagnostics (what the bytes say) cannot, and a cut after message_stop left none at all
            why = end["reason"]
            if why.startswith(_DROP_REASONS):
                entry["diagnostics"].append(_diag(D.CONNECTION_DROPPED, why))
            elif why.startswith("idle timeout"):
                entry["diagnostics"].append(_diag(D.IDLE_TIMEOUT, why))
        entry["body"] = self.mode
        entry["reads"] = self.reads
        entry["bytes"] = self.bytes
        status = _status(att)
        if status not in (None, 200):
            entry["http_status"] = status
        return entry

    def _json_body(self) -> Any:
        """The JSON body when it is a Message or an error object, else None (parsed once)."""
        if self.doc is False:
            self.doc = None
            if not self.stopped and self.buf:
                try:
                    doc = orjson.loads(b"".join(self.buf).strip(_BLANK))
                except orjson.JSONDecodeError:
                    doc = None
                if isinstance(doc, dict) and (doc.get("type") in ("message", "error") or _openai_object(doc)):
                    self.doc = doc
        return self.doc

    def _http(self) -> dict[str, Any]:
        status = _status(self.att)
        etype, message = error_fields(b"".join(self.buf))
        text = http_error_text(status, etype, message)
        return {
            "message": {},
            "outcome": "http_error",
            "status": status,
            "error": {"type": etype, "message": message},
            "diagnostics": [_diag(D.HTTP_ERROR, text)],
            "events": 0,
        }

    def _json(self) -> dict[str, Any]:
        doc = self._json_body()
        if doc is None:
            invalid = _diag(D.INVALID_EVENT_JSON, "the JSON response body is not a Message or an error object")
            diags = [] if self.stopped else [invalid]  # (when stopped, BODY_TOO_LARGE says why)
            return {"message": {}, "outcome": "incomplete", "diagnostics": diags, "events": 0}
        if _openai_object(doc):
            return _openai_json(doc)
        if doc.get("type") == "error":
            error = doc.get("error") if isinstance(doc.get("error"), dict) else {}
            etype = error.get("type") if isinstance(error.get("type"), str) else None
            message = error.get("message") if isinstance(error.get("message"), str) else None
            return {
                "message": {},
                "outcome": "error",
                "error": {"type": etype, "message": message},
                "diagnostics": [_diag(D.ERROR_EVENT, f"error response {etype or '-'}: {message or '-'}")],
                "events": 0,
            }
        content = doc.get("content") if isinstance(doc.get("content"), list) else []
        message = {
            "id": doc.get("id"),
            "type": "message",
            "role": doc.get("role", "assistant"),
            "model": doc.get("model"),
            "content": content,
            "stop_reason": doc.get("stop_reason"),
            "stop_sequence": doc.get("stop_sequence"),
            "usage": doc.get("usage") if isinstance(doc.get("usage"), dict) else {},
        }
        tools = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]  # client calls only
        stop = doc.get("stop_reason")
        # a JSON body does not show which call max_tokens cut: with that stop, a call counts as cut
        complete = 0 if stop == "max_tokens" else sum(isinstance(b.get("input"), dict) for b in tools)
        outcome = stopped_outcome(stop, len(tools), complete, len(tools) - complete)
        return {"message": message, "outcome": outcome, "diagnostics": [], "events": 0}


_OPENAI_OBJECTS = {"chat.completion": "openai_chat", "response": "openai_responses"}


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _openai_object(doc: dict[str, Any]) -> bool:
    obj = doc.get("object")
    return isinstance(obj, str) and obj in _OPENAI_OBJECTS


def _openai_json(doc: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed OpenAI body (a chat.completion or a response): the object as sent, its outcome by the same
    rules (a tool call counts as complete when its arguments are a JSON object)."""
    family = _OPENAI_OBJECTS[doc["object"]]
    args: list[Any] = []
    diags: list[dict[str, Any]] = []
    if family == "openai_chat":
        from inspector.stream.openai_chat import STOP_REASONS

        choices = _list(doc.get("choices"))
        first = _dict(choices[0] if choices else None)
        msg = _dict(first.get("message"))
        calls = _list(msg.get("tool_calls"))
        args = [_dict(c.get("function")).get("arguments") if isinstance(c, dict) else None for c in calls]
        fr = first.get("finish_reason")
        stop = STOP_REASONS.get(fr, fr) if isinstance(fr, str) else None
    else:
        status = doc.get("status")
        if status == "failed":
            err = _dict(doc.get("error"))
            text = f"response.failed {err.get('code') or '-'}: {err.get('message') or '-'}"
            return {
                "message": doc,
                "outcome": "error",
                "diagnostics": [_diag(D.ERROR_EVENT, text)],
                "events": 0,
                "family": family,
            }
        output = _list(doc.get("output"))
        calls = [o for o in output if isinstance(o, dict) and o.get("type") == "function_call"]
        args = [c.get("arguments") for c in calls]
        det = _dict(doc.get("incomplete_details"))
        stop = (
            ("max_tokens" if det.get("reason") == "max_output_tokens" else "incomplete")
            if status == "incomplete"
            else ("tool_use" if calls else "end_turn")
        )
    inputs = [_arguments_object(a) for a in args]  # (each parsed once: the outcome's count, then the blocks)
    complete = sum(i is not None for i in inputs)
    if len(args) - complete:
        diags.append(
            _diag(D.TOOL_INPUT_INVALID, f"{len(args) - complete} tool call(s) whose arguments are not a JSON object")
        )
    if stop == "max_tokens":
        complete = 0  # (as for a Message: with that stop a call counts as cut)
    outcome = stopped_outcome(stop, len(args), complete, len(args) - complete)
    return {
        "message": doc,
        "outcome": outcome,
        "diagnostics": diags,
        "events": 0,
        "family": family,
        "assembled": _openai_assembled(doc, family, stop, inputs),
    }


def _arguments_object(arguments: Any) -> dict[str, Any] | None:
    """A tool call's arguments as the JSON object they are (big integers exact), or None when they are not one."""
    if not isinstance(arguments, str):
        return None
    try:
        parsed = exactjson.loads(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _openai_assembled(
    doc: dict[str, Any], family: str, stop: str | None, inputs: list[dict[str, Any] | None]
) -> dict[str, Any]:
    """A non-streamed OpenAI body's neutral message, in the layout a streamed one is assembled into (text, thinking
    and tool_use blocks, the neutral stop_reason and usage): dump shows both alike. ``inputs``: each tool call's
    arguments parsed, in order (None: not an object, then an empty input)."""
    content: list[dict[str, Any]] = []
    usage = _dict(doc.get("usage"))
    parsed = iter(inputs)

    def tool_use(call_id: Any, name: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": next(parsed, None) or {}}

    if family == "openai_chat":
        from inspector.stream.openai_chat import neutral_usage

        first = _dict((_list(doc.get("choices")) or [None])[0])
        msg = _dict(first.get("message"))
        choice = first.get("index") if isinstance(first.get("index"), int) else 0
        for key in ("reasoning_content", "reasoning"):  # (DeepSeek's, OpenRouter's and vLLM's reasoning text)
            if isinstance(msg.get(key), str) and msg[key]:
                content.append({"type": "thinking", "thinking": msg[key]})
                break
        for key in ("content", "refusal"):
            if isinstance(msg.get(key), str) and msg[key]:
                content.append({"type": "text", "text": msg[key]})
        for c in _list(msg.get("tool_calls")):
            fn = _dict(_dict(c).get("function"))
            content.append(tool_use(_dict(c).get("id"), fn.get("name")))
        for block in content:
            block["choice"] = choice  # (which choice it is, as a streamed one's blocks say)
        usage = neutral_usage(usage)
    else:
        for at, item in enumerate(_list(doc.get("output"))):
            item = _dict(item)
            kind = item.get("type")
            first_block = len(content)
            if kind == "message":
                for part in _list(item.get("content")):
                    part = _dict(part)
                    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                    if isinstance(text, str) and text:
                        content.append({"type": "text", "text": text})
            elif kind == "function_call":
                content.append(tool_use(item.get("call_id"), item.get("name")))
            elif kind == "reasoning":
                said = [_dict(x).get("text") for x in _list(item.get("summary"))]
                thinking = "\n".join(t for t in said if isinstance(t, str))
                if thinking:
                    content.append({"type": "thinking", "thinking": thinking})
            for block in content[first_block:]:
                block["output_index"] = at  # (which output item it is, as a streamed one's blocks say)
        from inspector.stream.openai_responses import neutral_usage as responses_usage

        usage = responses_usage(usage)
    return {
        "id": doc.get("id"),
        "type": "message",
        "role": "assistant",
        "model": doc.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


class Dumper:
    """Decodes attempts read by read: pass ``feed`` as ``on_read`` to ``load_any`` / ``read_recording`` (with
    ``keep_reads=False`` the reads need not be kept), then ``turns(recording)``. ``on_event`` sees every decoded
    SSE event on the way (one decoding pass serves ``--events`` and the summary)."""

    def __init__(self, on_event: Callable[[Any], None] | None = None, *, max_event: int = MAX_LINE_BYTES) -> None:
        self.on_event = on_event
        self.max_event = max_event
        self._attempts: dict[tuple[int, int], _Attempt] = {}
        self.current: RecordedAttempt | None = None  # the attempt being fed (whose events ``on_event`` sees)

    def _for(self, att: RecordedAttempt) -> _Attempt:
        key = (att.turn, att.attempt)
        found = self._attempts.get(key)
        if found is None:
            found = self._attempts[key] = _Attempt(att, self.on_event, self.max_event)
        return found

    def feed(self, att: RecordedAttempt, read: RecordedRead) -> None:
        self.current = att
        self._for(att).feed(read.data)

    def turns(self, recording: Recording) -> list[dict[str, Any]]:
        """One entry per turn (its last attempt), with the earlier attempts listed under ``failed_attempts``."""
        out: list[dict[str, Any]] = []
        notes: dict[tuple[Any, Any], list[str]] = {}  # the proxy's notes on each attempt (its proxy_note lines)
        for o in recording.observations:
            if o.get("type") == "proxy_note" and isinstance(o.get("note"), str):
                notes.setdefault((o.get("turn"), o.get("attempt")), []).append(o["note"])
        for turn in recording.turns:
            entries = [self._for(att).entry() for att in turn.attempts]
            for att, entry in zip(turn.attempts, entries, strict=True):
                for note in notes.get((att.turn, att.attempt), ())[:MAX_NOTES]:
                    entry["diagnostics"].append(_diag(D.PROXY_NOTE, note, "warning"))
            if not entries:
                continue
            last = entries[-1]
            if len(entries) > 1:
                last["failed_attempts"] = entries[:-1]
            out.append(last)
        return out


# ------------------------------------------------------------------------------------------------------ dump
def dump_turns(recording: Recording, on_event: Callable[[Any], None] | None = None) -> list[dict[str, Any]]:
    """One entry per turn (its last attempt), with failed earlier attempts listed under `failed_attempts`, from a
    recording whose reads were kept. `on_event` sees every decoded SSE event on the way."""
    return _fed(Dumper(on_event), recording)


def _fed(dumper: Dumper, recording: Recording) -> list[dict[str, Any]]:
    """The turns of ``recording`` (its reads kept), every read fed to ``dumper``."""
    for att in recording.attempts():
        for read in att.reads:
            dumper.feed(att, read)
    return dumper.turns(recording)


def dump_ok(turns: list[dict[str, Any]]) -> bool:
    """True when the last attempt of every turn is complete (not incomplete, not an error or an HTTP error) and
    has no error diagnostics. Earlier attempts (retried) do not count. Turns that name their conversation
    (:func:`conversations_of`) are judged conversation by conversation: true when every one is."""
    if any("conversation" in t for t in turns):
        groups: dict[Any, list[dict[str, Any]]] = {}
        for t in turns:
            groups.setdefault(t.get("conversation"), []).append(t)
        return all(_turns_ok(g) for g in groups.values())
    return _turns_ok(turns)


def _turns_ok(turns: list[dict[str, Any]]) -> bool:
    for t in turns:
        if t["outcome"] in FAILING_OUTCOMES:
            return False
        if any(d["severity"] == "error" for d in t["diagnostics"]):
            return False
    return bool(turns)


def event_line(e: Any, att: RecordedAttempt | None = None) -> bytes:
    """The `--events --json` line of one decoded SSE event, with the turn and attempt of the stream it came in
    (0-based, as in the recording; the streams of concurrent conversations interleave in a proxy's recording) and,
    in a proxy's recording, its conversation."""
    line: dict[str, Any] = {"event": e.event, "data": e.data, "id": e.id, "retry": e.retry}
    if att is not None:
        line["turn"], line["attempt"] = att.turn, att.attempt
        if att.conversation is not None:  # (a proxy's recording: whose stream it is)
            line["conversation"] = att.conversation
    return orjson.dumps(line) + b"\n"


def dump_events(recording: Recording, out: IO[bytes]) -> list[dict[str, Any]]:
    """`--events --json`: one line per decoded SSE event; returns the turns (as dump_turns) from the same pass."""

    def write(e: Any) -> None:
        out.write(event_line(e, dumper.current))

    dumper = Dumper(on_event=write)
    return _fed(dumper, recording)


def format_turns(turns: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for t in turns:
        for failed in t.get("failed_attempts", []):
            lines.extend(_format_turn(failed, failed=True))
        lines.extend(_format_turn(t))
    return "\n".join(lines)


def _v(value: Any) -> str:
    """A value for people: ``-`` for None (never Python's ``None``)."""
    return "-" if value is None else str(value)


def _reads(t: dict[str, Any]) -> str:
    return f"{count(t['reads'], 'read')}, {count(t['bytes'], 'byte')}"


def _wire_stop(t: dict[str, Any]) -> str:
    """An OpenAI turn's own words for how it stopped, beside the neutral stop_reason it maps to: `` (finish_reason
    tool_calls)`` for Chat Completions (every choice's, in order), `` (status incomplete: max_output_tokens)`` for
    Responses; "" for an Anthropic turn (its stop_reason is the wire's) or when the wire said nothing."""
    msg = t.get("message")
    if t.get("assembled") is None or not isinstance(msg, dict):
        return ""
    if t.get("family") == "openai_chat":
        said = [c.get("finish_reason") for c in _list(msg.get("choices")) if isinstance(c, dict)]
        words = [w for w in said if isinstance(w, str)]
        return f" (finish_reason {', '.join(words)})" if words else ""
    if t.get("family") == "openai_responses" and isinstance(msg.get("status"), str):
        why = _dict(msg.get("incomplete_details")).get("reason")
        return f" (status {msg['status']}{f': {why}' if isinstance(why, str) else ''})"
    return ""


def _format_turn(t: dict[str, Any], failed: bool = False) -> list[str]:
    m = t.get("assembled") or t["message"]  # (an OpenAI turn: its neutral blocks, in the same layout)
    # people count turns and attempts from 1 (as the dashboard shows them); JSON keeps 0-based indices
    if isinstance(t.get("conversation_turn"), int):  # under its conversation's heading: its turn there (#: global)
        head = f"turn {t['conversation_turn'] + 1} (#{t['turn'] + 1}) attempt {t['attempt'] + 1}: {t['outcome']}"
    else:
        head = f"turn {t['turn'] + 1} attempt {t['attempt'] + 1}: {t['outcome']}"
    if failed:
        head += " (failed attempt, retried)"
    if t.get("http_status"):
        head += f" (HTTP {t['http_status']})"
    if t["outcome"] == "http_error" or (t["outcome"] == "error" and not m):
        error = t.get("error") or {}
        lines = [
            head,
            f"  error {_v(error.get('type'))}: {_v(error.get('message'))}  {_reads(t)}",
        ]
        return lines + _format_diagnostics(t)
    kind = " (JSON, not streamed)" if t.get("body") == "json" else ""
    lines = [
        head,
        f"  message {_v(m.get('id'))}  model {_v(m.get('model'))}  {_reads(t)}{kind}",
    ]
    content = m.get("content") or []
    # a chat answer of n > 1 choices: each block says its choice (the JSON's "choice", counted from 1 here)
    many = len({b.get("choice") for b in content if isinstance(b, dict) and isinstance(b.get("choice"), int)}) > 1
    for i, b in enumerate(content):
        choice = b.get("choice") if isinstance(b, dict) else None
        idx = f"[{i}] (choice {choice + 1})" if many and isinstance(choice, int) else f"[{i}]"
        if not isinstance(b, dict):
            lines.append(f"  {idx} {short(b, 60, ellipsis='...')}")
            continue
        bt = _v(b.get("type"))
        if bt == "text":
            lines.append(f"  {idx} text:")
            text = b["text"] if isinstance(b.get("text"), str) else ""
            for line in text.splitlines() or [""]:
                lines.append(f"      {line}")
        elif bt == "thinking":
            thinking = b["thinking"] if isinstance(b.get("thinking"), str) else ""
            signature = b["signature"] if isinstance(b.get("signature"), str) else ""
            lines.append(
                f"  {idx} thinking: {short_text(thinking, 200, ellipsis='...')!r} (signature {len(signature)} chars)"
            )
        elif bt in TOOL_INPUT_BLOCKS:
            name, bid = _v(b.get("name")), _v(b.get("id"))
            if b.get("input") is None and isinstance(b.get("input_raw"), str):
                raw = short_text(b["input_raw"], 200, ellipsis="...")
                lines.append(f"  {idx} {bt} {name} {bid}: INPUT NOT PARSED, raw {raw!r}")
            elif b.get("input") is None:
                lines.append(f"  {idx} {bt} {name} {bid}: -")
            else:
                lines.append(f"  {idx} {bt} {name} {bid}: {short(b.get('input'), 200, ellipsis='...')}")
        else:
            lines.append(f"  {idx} {bt}")
    stop = f"{_v(m.get('stop_reason'))}{_wire_stop(t)}"
    lines.append(f"  stop_reason: {stop}  stop_sequence: {_v(m.get('stop_sequence'))}")
    u = m.get("usage") if isinstance(m.get("usage"), dict) else {}
    usage = ", ".join(f"{k} {_v(v)}" for k, v in u.items() if not isinstance(v, dict))
    lines.append(f"  usage: {usage or '-'}")
    return lines + _format_diagnostics(t)


def _format_diagnostics(t: dict[str, Any]) -> list[str]:
    if not t["diagnostics"]:
        return []
    lines = ["  diagnostics:"]
    for d in t["diagnostics"]:
        where = f" @event {d['event_index']}" if d.get("event_index") is not None else ""
        lines.append(f"    {d['severity']:<7} {d['code']}{where}: {d['message']}")
    return lines


# ------------------------------------------------------------------------------------------------ conversations
def conversations_of(recording: Recording, turns: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The conversations of a proxy recording (its ``conversation`` obs lines, docs/recording-format.md), in order
    of appearance: ``{"id", "model", "turns", "attempts", "parent", "side_requests", "ok"}``; each turn entry of
    ``turns`` (and its failed attempts) gains ``conversation`` and ``conversation_turn``. Side requests
    (``proxy_exchange`` lines) are listed with their conversation; those of none under the id None ("other
    requests"), which has no turns. None for a recording with neither conversation nor ``proxy_exchange`` lines
    (older files, the loop's own recordings): one conversation, nothing added."""
    where: dict[int, dict[str, Any]] = {}
    for line in recording.observations:
        if line.get("type") != "conversation":
            continue
        turn, cid, ct = line.get("turn"), line.get("conversation"), line.get("conversation_turn")
        if isinstance(turn, int) and isinstance(cid, str) and isinstance(ct, int) and turn not in where:
            where[turn] = line
    if not where and not any(line.get("type") == "proxy_exchange" for line in recording.observations):
        return None
    convs: dict[str | None, dict[str, Any]] = {}

    def conv(cid: str | None) -> dict[str, Any]:
        if cid not in convs:
            convs[cid] = {"id": cid, "model": None, "turns": 0, "attempts": 0, "parent": None, "side_requests": []}
        return convs[cid]

    models: dict[int, str] = {}
    for rt in recording.turns:
        for att in rt.attempts:
            body = (att.request or {}).get("body")
            if isinstance(body, dict) and isinstance(body.get("model"), str) and rt.turn not in models:
                models[rt.turn] = body["model"]
    for t in turns:
        o = where.get(t["turn"])
        cid = o["conversation"] if o is not None else None
        ct = o["conversation_turn"] if o is not None else None
        for e in (*t.get("failed_attempts", []), t):
            e["conversation"], e["conversation_turn"] = cid, ct
        c = conv(cid)
        c["turns"] += 1
        c["attempts"] += 1 + len(t.get("failed_attempts", []))
        if c["model"] is None:
            c["model"] = models.get(t["turn"]) or (t.get("message") or {}).get("model")
        if c["parent"] is None and o is not None and isinstance(o.get("parent"), str):
            c["parent"] = o["parent"]
    for line in recording.observations:
        if line.get("type") == "proxy_exchange":
            side_of = line.get("conversation") if isinstance(line.get("conversation"), str) else None
            conv(side_of)["side_requests"].append(
                {k: line.get(k) for k in ("t", "method", "path", "side", "status", "bytes", "end")}
            )
    out = list(convs.values())
    for c in out:
        c["ok"] = _turns_ok([t for t in turns if t.get("conversation") == c["id"]]) if c["turns"] else True
    return out


def turn_name(t: dict[str, Any]) -> str:
    """A turn entry's name for people: ``[c2] turn 2 (#6)`` when it names its conversation, else ``turn 6``."""
    if t.get("conversation") is not None and isinstance(t.get("conversation_turn"), int):
        return f"[{t['conversation']}] turn {t['conversation_turn'] + 1} (#{t['turn'] + 1})"
    return f"turn {t['turn'] + 1}"


def grouped_text(conversations: list[dict[str, Any]]) -> Callable[[list[dict[str, Any]]], str]:
    """``format_turns`` for a recording of many conversations: each conversation's turns under its heading."""

    def format_grouped(turns: list[dict[str, Any]]) -> str:
        return format_conversations(turns, conversations)

    return format_grouped


def format_conversations(turns: list[dict[str, Any]], conversations: list[dict[str, Any]]) -> str:
    """The text of ``dump`` for a recording of many conversations: each conversation's turns under its heading."""
    lines: list[str] = []
    for c in conversations:
        side = c["side_requests"]
        if c["id"] is None:
            lines.append(f"other requests ({len(side)} side request{'s' if len(side) != 1 else ''}, no conversation)")
        else:
            n = c["turns"]
            extra = f", {len(side)} side request{'s' if len(side) != 1 else ''}" if side else ""
            parent = f", started by a tool call of {c['parent']}" if c["parent"] else ""
            verdict = "ok" if c["ok"] else "FAILED"
            lines.append(
                f"conversation {c['id']} (model {_v(c['model'])}, {n} turn{'s' if n != 1 else ''}{extra}{parent}):"
                f" {verdict}"
            )
            lines.extend(
                "  " + line for line in format_turns([t for t in turns if t.get("conversation") == c["id"]]).split("\n")
            )
        for r in side:
            lines.append(
                f"  side request {_v(r.get('side'))}: {_v(r.get('method'))} {_v(r.get('path'))} -> {_v(r.get('status'))}"
            )
    return "\n".join(lines)

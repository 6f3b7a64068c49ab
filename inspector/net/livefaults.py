"""Faults in live streams: `inspector proxy --fault ...` (and the ``x-inspector-fault`` header) applies the stream
faults of the `serve` catalogue (:data:`inspector.net.faults.FAULTS`, same names, arguments and docs) to what a real
upstream sends, as transformations of the byte stream on its way to the client.

The SSE events are cut out of upstream's reads as they pass (an event is forwarded once its blank line arrived) and
rewritten, cut or followed by an injected event at the right place. Attempts as on `serve`:

- ``http_429`` / ``http_529``: the first attempt(s) of a turn are answered by the proxy itself (upstream never sees
  them), with ``retry-after`` / ``retry-after-ms`` and an ``api_error``-shaped body; the retry goes upstream.
- transport faults (``error_event``, ``drop_event``, ``drop_byte``, ``stall``): the first attempt that streams.
- content and format faults (``invalid_tool_json``, ``max_tokens_tool``, ``split_events``, ``cr``, ``crlf``,
  ``bom``): every attempt.

Protocol events are counted without pings, from 0 (``at_event`` of the recording's ``fault_injected`` line: the
index of the first event that was changed, cut or inserted). Faults that shape `serve`'s pacing (``slow_drip``,
``relay_buffer``, ``padded``) are not live faults.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from inspector.core.errors import FaultError
from inspector.net.faults import BOM, DROP_IN_TOOL_CUT, DROP_IN_TOOL_FRAGMENTS, FAULTS, FaultSpec, parse_faults
from inspector.scenarios.render import truncate_json

__all__ = ["LIVE_FAULTS", "InjectedError", "LiveFaults", "LiveStream", "parse_live_faults"]

LIVE_FAULTS = (
    "http_429",
    "http_529",
    "error_event",
    "drop_event",
    "drop_in_tool",
    "drop_byte",
    "stall",
    "invalid_tool_json",
    "max_tokens_tool",
    "split_events",
    "cr",
    "crlf",
    "bom",
)
_TRANSPORT = ("error_event", "drop_event", "drop_in_tool", "drop_byte", "stall")
PING_EVENT = b'event: ping\ndata: {"type": "ping"}\n\n'
# as serve's error_event sends it (a real one also has "details": null)
ERROR_EVENT = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
HOLD_WINDOW = 1024 * 1024  # bytes a live fault may hold back (a tool block whose fate is not known yet; one event)
PING_INTERVAL = 0.5  # seconds between the pings of a stall, as on serve (not scaled: a live stream is real time)
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\n\r\n|\r\n\n")


@dataclass(frozen=True, slots=True)
class InjectedError:
    """An HTTP error answered by the proxy instead of forwarding (http_429 / http_529)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    fault: str


class LiveFaults:
    """The chosen live faults; falsy when none."""

    def __init__(self, specs: tuple[FaultSpec, ...]) -> None:
        self.specs = specs
        self.by_name = {f.name: f for f in specs}
        self.http = [f for f in specs if FAULTS[f.name].kind == "http"]
        self.transport = next((f for f in specs if f.name in _TRANSPORT), None)

    def __bool__(self) -> bool:
        return bool(self.specs)

    def __str__(self) -> str:
        return ",".join(str(f) for f in self.specs) or "none"

    def http_error(self, attempt: int) -> InjectedError | None:
        """The HTTP error that answers this attempt of a turn, if any (attempts 0.. get them in the order given)."""
        if attempt >= len(self.http):
            return None
        f = self.http[attempt]
        secs = float(f.value or 0.0)
        status, etype, message = (
            (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit.")
            if f.name == "http_429"
            else (529, "overloaded_error", "Overloaded")
        )
        body = orjson.dumps(
            {
                "type": "error",
                "error": {"type": etype, "message": f"{message} (injected by inspector proxy: {f})"},
                "request_id": f"req_inspector_fault_{attempt}",
            }
        )
        headers = [
            ("content-type", "application/json"),
            ("retry-after", f"{secs:g}"),
            ("retry-after-ms", str(int(round(secs * 1000)))),
            ("x-inspector-fault", str(f)),
        ]
        return InjectedError(status, headers, body, str(f))

    def stream(self, attempt: int) -> LiveStream | None:
        """The transformation of this attempt's stream (None: forwarded untouched)."""
        transport = self.transport if attempt == len(self.http) else None
        content = [f for f in self.specs if f.name in ("invalid_tool_json", "max_tokens_tool")]
        fmt = [f for f in self.specs if f.name in ("split_events", "cr", "crlf", "bom")]
        if transport is None and not content and not fmt:
            return None
        return LiveStream(transport, content, fmt, attempt)


def parse_live_faults(spec: Any) -> LiveFaults | None:
    """``"drop_event:5,bom"`` (as ``parse_faults``) -> LiveFaults, None for no fault; FaultError for a fault that
    does not apply to a live stream."""
    if isinstance(spec, LiveFaults):
        return spec or None
    specs = parse_faults(spec)
    for f in specs:
        if f.name not in LIVE_FAULTS:
            raise FaultError(f"fault {f.name} does not apply to a live stream; live faults: {', '.join(LIVE_FAULTS)}")
    return LiveFaults(specs) if specs else None


# =====================================================================================================================
# One stream
# =====================================================================================================================


def _fields(raw: bytes) -> tuple[str, bytes]:
    """(event name, data) of one raw event."""
    name, data = "message", []
    for line in re.split(rb"\r\n|\r|\n", raw):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(b" ") else v)
    return name, b"\n".join(data)


def _event(name: str, data: dict) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class LiveStream:
    """Rewrites one live SSE stream on its way to the client (see the module docstring)."""

    def __init__(self, transport: FaultSpec | None, content: list[FaultSpec], fmt: list[FaultSpec], attempt: int):
        self.transport = transport
        self.content = {f.name: f for f in content}
        self.fmt = {f.name: f for f in fmt}
        self.attempt = attempt
        self.events = 0  # protocol events passed so far (pings not counted)
        self.bytes = 0
        self.held: list[tuple[str, bytes, Any]] = []  # events held back (a tool block whose fate is not known yet)
        self.held_bytes = 0  # their size: at most HOLD_WINDOW, else they go out unchanged (see _hold)
        self.notes: list[str] = []  # what the faults could not do (the window passed), for the recording
        self.hold_tool: int | None = None  # index of the tool block being held
        self.first_tool_seen = False
        self.marks: list[tuple[str, int | None]] = []  # (fault, at_event) injected
        self.end: str | None = None  # None: go on | complete | drop | hang
        self.formatted = False
        self.tools_started = 0  # drop_in_tool: tool_use blocks started so far
        self.cut_block: int | None = None  # drop_in_tool: the index of the tool block to break inside
        self.cut_fragments = 0  # drop_in_tool: its input_json_delta fragments passed so far

    # --- output ---------------------------------------------------------------------------------------------------
    def frames(self, raw: bytes) -> list[bytes]:
        if not self.formatted:  # format faults change every event from the first on
            self.formatted = True
            for name in ("split_events", "cr", "crlf"):
                if name in self.fmt:
                    self.mark(name, self.events)
        if "cr" in self.fmt or "crlf" in self.fmt:
            le = b"\r" if "cr" in self.fmt else b"\r\n"
            lines = [ln for ln in re.split(rb"\r\n|\r|\n", raw)]
            while lines and lines[-1] == b"":
                lines.pop()
            raw = le.join(lines) + le + le
        if "split_events" in self.fmt and len(raw) > 1:
            cut = 1 + zlib.crc32(raw) % (len(raw) - 1)
            return [raw[:cut], raw[cut:]]
        return [raw]

    # --- the event rules ------------------------------------------------------------------------------------------
    def mark(self, fault: str, at: int | None) -> None:
        self.marks.append((fault, at))

    def on_event(self, raw: bytes) -> list[bytes]:
        """Events to send for one upstream event (maybe none: held back), in order; sets ``end`` to stop."""
        name, data = _fields(raw)
        if name == "ping":
            return [raw] if not self.held else self._hold(name, raw, None)
        if not self.content:
            return [raw]  # no content fault: the event is not parsed
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        return self._content(name, raw, obj if isinstance(obj, dict) else {})

    def tool_cut(self, name: str, raw: bytes, k: int) -> bytes | None:
        """drop_in_tool:K: None to pass this event on; else the bytes of it to send before the connection breaks
        (the K-th tool block got its first DROP_IN_TOOL_FRAGMENTS fragments; its JSON is never complete)."""
        if name not in ("content_block_start", "content_block_delta", "content_block_stop"):
            return None
        try:
            obj = orjson.loads(_fields(raw)[1])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        if name == "content_block_start":
            cb = obj.get("content_block")
            if isinstance(cb, dict) and cb.get("type") == "tool_use":
                self.tools_started += 1
                if self.tools_started == k:
                    self.cut_block, self.cut_fragments = obj.get("index"), 0
            return None
        if self.cut_block is None or obj.get("index") != self.cut_block:
            return None
        if name == "content_block_delta" and self.cut_fragments < DROP_IN_TOOL_FRAGMENTS:
            self.cut_fragments += 1
            return None
        return raw[: max(1, min(DROP_IN_TOOL_CUT, len(raw) - 1))]

    def _hold(self, name: str, raw: bytes, obj: Any) -> list[bytes]:
        """Hold an event back; past ``HOLD_WINDOW`` bytes held, everything held goes out unchanged instead (the
        fault is not applied to this block: an endless or huge tool block must reach the client, and the proxy
        must not grow with it)."""
        self.held.append((name, raw, obj))
        self.held_bytes += len(raw)
        if self.held_bytes <= HOLD_WINDOW:
            return []
        return self._release_held()

    def _release_held(self) -> list[bytes]:
        fault = "max_tokens_tool" if "max_tokens_tool" in self.content else "invalid_tool_json"
        self.notes.append(
            f"{fault}: the tool block passed {HOLD_WINDOW} bytes held back (the live fault's window): forwarded "
            "unchanged"
        )
        out = [r for _, r, _ in self.held]
        self.held, self.held_bytes, self.hold_tool = [], 0, None
        return out

    def _content(self, name: str, raw: bytes, obj: dict) -> list[bytes]:
        cb = obj.get("content_block") if name == "content_block_start" else None
        is_tool_start = isinstance(cb, dict) and cb.get("type") == "tool_use"
        if "max_tokens_tool" in self.content:  # it ends the stream at the first tool block: nothing else applies
            if self.hold_tool is not None:
                if name == "content_block_stop" and obj.get("index") == self.hold_tool:
                    return self._max_tokens_cut()
                return self._hold(name, raw, obj)
            if is_tool_start and not self.first_tool_seen:
                self.first_tool_seen = True
                self.hold_tool = obj.get("index")
                return self._hold(name, raw, obj)
            return [raw]
        if "invalid_tool_json" in self.content:
            if is_tool_start:  # the held tool block was not the last one: it passes unchanged
                out = [r for _, r, _ in self.held]
                self.held, self.held_bytes = [], 0
                self.hold_tool = obj.get("index")
                return out + self._hold(name, raw, obj)
            if self.held and name in ("message_delta", "message_stop", "error"):
                out = self._invalid_json_block()
                return out + [raw]
            if self.held:
                return self._hold(name, raw, obj)
        return [raw]

    def _max_tokens_cut(self) -> list[bytes]:
        """The first tool block: its start and about half of its input deltas, then max_tokens and message_stop."""
        start = self.held[0][1]
        deltas = [(n, r, o) for n, r, o in self.held[1:] if n == "content_block_delta"]
        keep = deltas[: (len(deltas) + 1) // 2]  # as serve: about half, rounded up
        at = self.events + 1 + len(keep)  # the first event that is not upstream's
        self.held, self.held_bytes = [], 0
        self.mark("max_tokens_tool", at)
        self.end = "complete"
        usage = {"output_tokens": max(1, len(keep))}
        return [
            start,
            *(r for _, r, _ in keep),
            _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                    "usage": usage,
                },
            ),
            _event("message_stop", {"type": "message_stop"}),
        ]

    def _invalid_json_block(self) -> list[bytes]:
        """The held (last) tool block with its input JSON cut in the middle of its last string."""
        held, self.held, self.held_bytes = self.held, [], 0
        idx = self.hold_tool
        self.hold_tool = None
        parts = []
        for n, _, o in held:
            d = o.get("delta") if isinstance(o, dict) else None
            if n == "content_block_delta" and o.get("index") == idx and isinstance(d, dict):
                parts.append(str(d.get("partial_json", "")))
        full = "".join(parts)
        cut = truncate_json(full) if full else ""
        out: list[bytes] = []
        left = len(cut)
        first_changed: int | None = None
        for k, (n, raw, o) in enumerate(held):
            d = o.get("delta") if isinstance(o, dict) else None
            if n == "content_block_delta" and o.get("index") == idx and isinstance(d, dict):
                pj = str(d.get("partial_json", ""))
                if left >= len(pj):
                    out.append(raw)
                    left -= len(pj)
                    continue
                if first_changed is None:
                    first_changed = k
                if left > 0:
                    out.append(_event(n, {**o, "delta": {**d, "partial_json": pj[:left]}}))
                    left = 0
                continue
            out.append(raw)
        if full and first_changed is not None:
            self.mark("invalid_tool_json", self.events - len(held) + first_changed)
        return out


async def run_live(
    stream: LiveStream,
    upstream: Any,
    emit: Callable[[bytes], Any],
    state: dict,
    on_mark: Callable[[str, int | None], None],
    on_note: Callable[[str], None] | None = None,
) -> None:
    """Read upstream's stream, transform it and ``await emit(bytes)`` what the client gets; ``state["end"]`` /
    ``state["reason"]`` say how it ended (complete | dropped); a stall never returns (the caller's race ends it).
    ``on_note``: told, once each, what a fault could not do (its window passed). What is held is bounded: an event
    longer than ``HOLD_WINDOW`` bytes goes out as it came (faults do not apply to it), and so does a tool block
    held back past it."""
    import httpx2

    buf = b""
    scanned = 0  # buf[:scanned] holds no event end (a search starts a few bytes before it)
    passing = False  # forwarding an overlong event as it came, up to its end
    t = stream.transport
    marked = 0
    bom = "bom" in stream.fmt

    async def out(data: bytes) -> bool:
        """Send, honouring drop_byte; False once the stream must stop."""
        nonlocal bom
        if bom:
            bom = False
            stream.mark("bom", 0)
            data = BOM + data
        if t is not None and t.name == "drop_byte":
            limit = int(t.value or 0)
            room = limit - stream.bytes
            if len(data) >= room:
                if room > 0:
                    await emit(data[:room])
                stream.bytes = limit
                stream.mark(str(t), stream.events)
                stream.end = "drop"
                return False
        stream.bytes += len(data)
        await emit(data)
        return True

    async def flush_marks() -> None:
        nonlocal marked
        while marked < len(stream.marks):
            on_mark(*stream.marks[marked])
            marked += 1
        if stream.notes:
            notes, stream.notes = stream.notes, []
            for text in notes:
                if on_note is not None:
                    on_note(text)

    async def handle(raw: bytes) -> bool:
        name, _ = _fields(raw)
        protocol = name != "ping"
        if t is not None and protocol:
            n = int(t.value or 0)
            if t.name == "error_event" and stream.events >= n:
                stream.mark(str(t), stream.events)
                await flush_marks()
                for piece in stream.frames(ERROR_EVENT):
                    if not await out(piece):
                        return False
                stream.end = "complete"
                return False
            if t.name == "drop_event" and stream.events >= n:
                stream.mark(str(t), stream.events)
                stream.end = "drop"
                return False
            if t.name == "drop_in_tool":
                cut = stream.tool_cut(name, raw, n or 1)
                if cut is not None:
                    stream.mark(str(t), stream.events)
                    await flush_marks()
                    await out(cut)
                    stream.end = "drop"
                    return False
        for ev in stream.on_event(raw):
            for piece in stream.frames(ev):
                if not await out(piece):
                    return False
        if protocol:
            stream.events += 1
        await flush_marks()
        if stream.end is not None:
            return False
        if t is not None and t.name == "stall" and name == "message_start":
            stream.mark(str(t), stream.events)
            await flush_marks()
            for _ in range(int(t.value or 0)):
                await asyncio.sleep(PING_INTERVAL)
                for piece in stream.frames(PING_EVENT):
                    if not await out(piece):
                        return False
            stream.end = "hang"
            return False
        return True

    try:
        async for chunk in upstream.aiter_raw():
            buf += chunk
            pos = 0  # events are cut out of buf from here (buf is sliced once per read, not once per event)
            go = True
            while go:
                m = _EVENT_END.search(buf, max(pos, scanned - 4))
                if m is None or (m.end() == len(buf) and buf.endswith(b"\r") and not buf.endswith(b"\r\n\r\n")):
                    buf = buf[pos:]
                    scanned = len(buf)
                    if len(buf) > HOLD_WINDOW:  # an event longer than the window: forwarded as it came
                        if not passing:
                            stream.notes.append(
                                f"an event passed {HOLD_WINDOW} bytes: forwarded as it came (live faults not applied "
                                "to it)"
                            )
                            passing = True
                        go = await out(buf[:-4])
                        buf, scanned = buf[-4:], 4
                    break
                raw, pos, scanned = buf[pos : m.end()], m.end(), 0
                if passing:  # the end of the overlong event
                    passing = False
                    go = await out(raw)
                else:
                    go = await handle(raw)
            else:
                buf = buf[pos:]
            await flush_marks()
            if stream.end is not None or not go:
                break
        else:
            for _, raw, _ in stream.held:  # upstream ended with a block still held: it goes out as it came
                await out(raw)
            stream.held = []
            if buf:
                await out(buf)
    except httpx2.HTTPError as e:
        state["end"], state["reason"] = "dropped", f"connection dropped: {type(e).__name__}: {e}"
        return
    await flush_marks()
    if stream.end == "drop":
        state["end"], state["reason"] = "dropped", f"injected {t} (inspector proxy)"
    elif stream.end == "hang":
        await asyncio.Event().wait()  # until the client gives up or the proxy closes

"""`inspector proxy`: watch another harness talk to the API. A pass-through HTTP proxy that records every exchange.

    inspector proxy --listen 127.0.0.1:8787 --upstream https://api.anthropic.com --headless --record run.jsonl
    ANTHROPIC_BASE_URL=http://127.0.0.1:8787 their-harness ...

- Forwarding: method, path, query, headers (credentials included, untouched) and body go upstream with httpx2; the
  response is streamed back read by read as it arrives (``aiter_raw``: no decoding, no buffering), so the client gets
  exactly upstream's bytes. Hop-by-hop headers (connection, keep-alive, transfer-encoding, te, trailer, upgrade,
  proxy-connection) and host / content-length are not copied (the HTTP layers set them again).
- Turns: every ``POST .../messages`` is a turn of the other harness; a request whose body is byte-identical to the
  previous one is a retry, i.e. the next attempt of the same turn. Other requests (count_tokens, models) are
  forwarded and noted as ``obs`` lines only.
- Recording (``--record FILE``): ``RecordingWriter`` lines request / response / read / end per attempt, clocks as in
  docs/recording-format.md (request.t since the proxy started; the others since the request arrived). Credential
  headers are removed by the writer; the credential values seen are also passed as ``secrets`` (and redacted by the
  proxy itself for keys first seen after the file was opened), so a key echoed anywhere is replaced.
- Tool execution in the other harness is invisible on the wire; it is inferred from the next request: its last user
  message holds tool_result blocks for the tool_use blocks the proxy saw streaming; the time from each block's
  content_block_stop to that request bounds the execution (:func:`infer_tool_executions`).
- Observer hook: pass an ``ObservationBus``; the proxy publishes the loop's observation types (TurnStarted,
  AttemptStarted, ResponseStarted, ReadReceived, SSEEventSeen, Block*, ToolUse, MessageUpdated, AttemptEnded...)
  and :class:`ToolExecutionInferred`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Any, ClassVar

import httpx2
import orjson

from inspector.agent import observations as O
from inspector.agent.stepobs import step_observations
from inspector.core.redaction import clean_headers, credential_values, redact, usable_secrets
from inspector.net.server import Closable, ConnectionDrop, _race, install_log_filter
from inspector.record.recording import RecordingWriter
from inspector.stream.assembler import TurnStream

__all__ = [
    "DEFAULT_UPSTREAM",
    "InferredExecution",
    "ProxyApp",
    "SeenToolUse",
    "ToolExecutionInferred",
    "infer_tool_executions",
]

DEFAULT_UPSTREAM = "https://api.anthropic.com"
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
    }
)
RESPONSE_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
)


# =====================================================================================================================
# Tool execution inference
# =====================================================================================================================


@dataclass(slots=True)
class SeenToolUse:
    """A tool_use block the proxy saw complete in a response stream (times: seconds on the proxy clock)."""

    id: str
    name: str
    turn: int
    attempt: int
    index: int
    stop_t: float  # when its content_block_stop arrived
    stream_end_t: float | None = None  # when the response ended (message_stop or the end of the body)
    input: Any = None


@dataclass(slots=True)
class InferredExecution:
    """What the next request tells about one tool call of the other harness.

    status: ``"result"`` (a tool_result for it is in the request), ``"missing"`` (a tool_use of the answered turn
    without a result: the API will answer 400) or ``"unknown"`` (a tool_result whose tool_use the proxy never saw).
    ``since_block_stop``: request time - block stop time, an upper bound of the execution (it includes the rest of the
    stream and the harness's own overhead); ``since_stream_end``: request time - end of that response."""

    tool_use_id: str
    name: str | None
    status: str
    from_turn: int | None
    request_t: float
    block_stop_t: float | None = None
    stream_end_t: float | None = None
    since_block_stop: float | None = None
    since_stream_end: float | None = None
    is_error: bool | None = None
    result_chars: int | None = None

    def to_json(self) -> dict:
        return {f: getattr(self, f) for f in self.__slots__}  # type: ignore[attr-defined]


def _result_text_len(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) if isinstance(b, dict) else 0 for b in content)
    return 0


def infer_tool_executions(
    seen: Mapping[str, SeenToolUse] | Iterable[SeenToolUse], messages: Any, request_t: float
) -> list[InferredExecution]:
    """Tool executions revealed by a request: the tool_result blocks of its LAST user message, matched by id to the
    tool_use blocks seen streaming (``seen``), timed against ``request_t``. Tool uses of the answered turns that got
    no result are reported ``missing``. Pure: no I/O, no clock."""
    by_id = dict(seen) if isinstance(seen, Mapping) else {s.id: s for s in seen}
    if not isinstance(messages, list) or not messages:
        return []
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user" or not isinstance(last.get("content"), list):
        return []
    out: list[InferredExecution] = []
    answered: set[tuple[int, int]] = set()
    got: set[str] = set()
    for b in last["content"]:
        if not isinstance(b, dict) or b.get("type") != "tool_result":
            continue
        tid = str(b.get("tool_use_id"))
        got.add(tid)
        s = by_id.get(tid)
        is_error = bool(b.get("is_error")) if "is_error" in b else False
        if s is None:
            out.append(
                InferredExecution(
                    tid,
                    None,
                    "unknown",
                    None,
                    request_t,
                    is_error=is_error,
                    result_chars=_result_text_len(b.get("content")),
                )
            )
            continue
        answered.add((s.turn, s.attempt))
        out.append(
            InferredExecution(
                tid,
                s.name,
                "result",
                s.turn,
                request_t,
                s.stop_t,
                s.stream_end_t,
                round(request_t - s.stop_t, 6),
                None if s.stream_end_t is None else round(request_t - s.stream_end_t, 6),
                is_error,
                _result_text_len(b.get("content")),
            )
        )
    for s in by_id.values():
        if (s.turn, s.attempt) in answered and s.id not in got:
            out.append(
                InferredExecution(
                    s.id, s.name, "missing", s.turn, request_t, s.stop_t, s.stream_end_t, round(request_t - s.stop_t, 6)
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class ToolExecutionInferred(O.Observation):
    """Published by the proxy when a request shows what the other harness did with a tool call."""

    turn: int  # the request that revealed it
    attempt: int
    tool_use_id: str
    name: str | None
    status: str  # result | missing | unknown
    from_turn: int | None
    since_block_stop: float | None
    since_stream_end: float | None
    is_error: bool | None
    kind: ClassVar[str] = "tool_inferred"


# =====================================================================================================================
# Helpers
# =====================================================================================================================


class _Decoder:
    """Content-Encoding decoder for the recorded copy (the client gets the raw bytes)."""

    def __init__(self, encoding: str) -> None:
        enc = encoding.strip().lower()
        self.encoding = enc
        self.obj = None
        self.failed = False
        if enc in ("gzip", "x-gzip"):
            self.obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self.obj = zlib.decompressobj()
        self.supported = enc in ("", "identity") or self.obj is not None

    def feed(self, data: bytes) -> bytes:
        if self.obj is None or self.failed:
            return data
        try:
            return self.obj.decompress(data)
        except zlib.error:
            if self.encoding == "deflate":  # raw deflate, as some servers send it
                try:
                    self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    return self.obj.decompress(data)
                except zlib.error:
                    pass
            self.failed = True
            return data


async def _abandon(sending: asyncio.Future) -> None:
    """Cancel an upstream request task and wait for it; a response it already got is closed."""
    sending.cancel()
    try:
        response = await sending
    except BaseException:
        return
    with contextlib.suppress(Exception):
        await response.aclose()


@dataclass
class ProxyExchange:
    """One forwarded request (kept in ``ProxyApp.exchanges``; printed by the headless CLI)."""

    method: str
    path: str
    turn: int | None = None
    attempt: int | None = None
    status: int | None = None
    reads: int = 0
    bytes: int = 0
    t_request: float = 0.0
    headers_s: float | None = None  # since the request arrived
    first_byte_s: float | None = None
    end_s: float | None = None
    end: str | None = None  # complete | dropped | cancelled | error
    reason: str | None = None
    outcome: str | None = None
    inferred: list[InferredExecution] = field(default_factory=list)


# =====================================================================================================================
# The proxy
# =====================================================================================================================


class ProxyApp(Closable):
    """The proxy as an ASGI app (``.app``). Run it with uvicorn (``serve.BackgroundServer`` / the CLI)."""

    def __init__(
        self,
        upstream: str = DEFAULT_UPSTREAM,
        *,
        record: str | Path | None = None,
        bus: O.ObservationBus | None = None,
        secrets: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        on_exchange: Callable[[ProxyExchange], None] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        listen: str | None = None,
        source_info: dict | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.source_info = source_info  # how the dashboard names this source (default: proxy -> upstream)
        self.record_path = record
        self.bus = bus
        self.clock = clock
        self.t0 = clock()
        self.on_exchange = on_exchange
        self.transport = transport
        self.listen = listen
        self.secrets: list[str] = usable_secrets(secrets)
        self.writer: RecordingWriter | None = None
        self._late: list[str] = []  # secrets the writer was not given (learned after it opened), longest first
        self.client: httpx2.AsyncClient | None = None
        self.exchanges: list[ProxyExchange] = []
        self.seen_tools: dict[str, SeenToolUse] = {}
        self.turns = 0
        self._last_digest: str | None = None
        self._last_turn: tuple[int, int] | None = None  # (turn, attempt) of the last /messages request
        self._started = False
        install_log_filter()

    # --- plumbing -------------------------------------------------------------------------------------------------
    @property
    def app(self):
        return self

    def now(self) -> float:
        return self.clock() - self.t0

    def source(self) -> dict:
        if self.source_info is not None:
            return dict(self.source_info)
        src = {"type": "proxy", "upstream": self.upstream}
        if self.listen:
            src["listen"] = self.listen
        return src

    def _pub(self, obs: O.Observation) -> None:
        if self.bus is not None:
            self.bus.publish(obs)

    def _client(self) -> httpx2.AsyncClient:
        if self.client is None:
            kw: dict[str, Any] = {
                "timeout": httpx2.Timeout(connect=30.0, read=None, write=60.0, pool=30.0),
                "follow_redirects": False,
                "trust_env": True,  # like the SDK: HTTPS_PROXY / NO_PROXY / SSL_CERT_FILE apply upstream
                # never keep upstream cookies: they would be added to other clients' requests
                "cookies": CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            }
            if self.transport is not None:
                kw["transport"] = self.transport
            self.client = httpx2.AsyncClient(**kw)
            self.client.headers = httpx2.Headers()  # no default user-agent / accept / accept-encoding of ours
        return self.client

    def _learn(self, found: list[str]) -> None:
        new = [s for s in found if s not in self.secrets]
        if not new:
            return
        self.secrets.extend(new)
        if self.writer is not None:  # the writer only knows the secrets it was opened with: redact these ourselves
            self._late = sorted({*self._late, *new}, key=len, reverse=True)  # longest first, sorted once here

    def open_recording(self) -> RecordingWriter | None:
        """Open the recording now (the CLI does, before serving, so an unwritable path is a usage error); raises
        OSError. Credentials learned later are redacted by the proxy before they reach the writer."""
        return self._writer()

    def _writer(self) -> RecordingWriter | None:
        """The recording writer; created at the first exchange unless :meth:`open_recording` opened it earlier (the
        credentials seen by then are its secrets)."""
        if self.record_path is None:
            return None
        if self.writer is None:
            self.writer = RecordingWriter(self.record_path, source=self.source(), secrets=list(self.secrets))
            self._late = []
        return self.writer

    def _late_secrets(self) -> list[str]:
        return self._late

    def close(self) -> None:
        """Close the recording (creating it, header only, if nothing passed)."""
        w = self._writer()
        if w is not None and not w.closed:
            w.close()

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
        self.close()

    def _note(self, ex: ProxyExchange) -> None:
        if self.on_exchange is not None:
            with contextlib.suppress(Exception):
                self.on_exchange(ex)

    # --- ASGI -----------------------------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.closing()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        await self._handle(scope, receive, send)

    async def _read_body(self, receive) -> bytes:
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionDrop("client went away before sending its body")
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _handle(self, scope, receive, send) -> None:
        t_req_clock = self.clock()
        t_req = t_req_clock - self.t0
        method = scope["method"]
        path = scope.get("path", "/")
        raw_path = scope.get("raw_path") or path.encode()
        query = scope.get("query_string") or b""
        target = raw_path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")
        url = self.upstream + target
        in_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        self._learn(credential_values(in_headers))
        body = await self._read_body(receive)
        fwd = [(k, v) for k, v in in_headers if k.lower() not in HOP_BY_HOP]

        ex = ProxyExchange(method, path, t_request=t_req)
        is_turn = method == "POST" and path.rstrip("/").endswith("/messages")
        client = self._client()
        sending: asyncio.Future | None = None
        error: Exception | None = None
        try:
            request = client.build_request(method, url, headers=fwd, content=body)
            sending = asyncio.ensure_future(client.send(request, stream=True))
            for _ in range(3):  # let the request go out first: the bookkeeping below overlaps the upstream's wait
                await asyncio.sleep(0)
        except (httpx2.HTTPError, httpx2.InvalidURL) as e:
            error = e
        if is_turn:
            try:
                parsed = orjson.loads(body) if body else None
            except orjson.JSONDecodeError:
                parsed = None
            digest = hashlib.sha256(body).hexdigest()
            if self._last_turn is not None and digest == self._last_digest:
                turn, attempt = self._last_turn[0], self._last_turn[1] + 1
            else:
                turn, attempt = self.turns, 0
                self.turns += 1
            self._last_digest, self._last_turn = digest, (turn, attempt)
            ex.turn, ex.attempt = turn, attempt
            try:
                self._begin_turn(ex, url, in_headers, body, parsed, t_req)
            except BaseException:
                if sending is not None:  # never leave the upstream request running (or its response open)
                    await _abandon(sending)
                raise

        if sending is not None:
            try:
                upstream = await sending
            except httpx2.HTTPError as e:
                error = e
            except BaseException:
                sending.cancel()
                raise
        if error is not None:
            reason = f"upstream unreachable: {type(error).__name__}: {error}"
            payload = orjson.dumps(
                {"type": "error", "error": {"type": "api_error", "message": f"inspector proxy: {reason}"}}
            )
            await send(
                {"type": "http.response.start", "status": 502, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": payload, "more_body": False})
            ex.status, ex.end, ex.reason = 502, "error", reason
            ex.end_s = self.clock() - t_req_clock
            self._end_turn(ex, None, "failed", reason)
            self._finish(ex)
            return

        try:
            await self._relay(ex, upstream, receive, send, t_req_clock, is_turn)
        finally:
            with contextlib.suppress(Exception):
                await upstream.aclose()

    async def _relay(
        self, ex: ProxyExchange, upstream: httpx2.Response, receive, send, t_req_clock: float, is_turn: bool
    ) -> None:
        ex.status = upstream.status_code
        ex.headers_s = self.clock() - t_req_clock
        raw_headers = [
            (k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in RESPONSE_HOP_BY_HOP
        ]
        str_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers]
        ctype = upstream.headers.get("content-type", "")
        decoder = _Decoder(upstream.headers.get("content-encoding", ""))
        track = is_turn and "text/event-stream" in ctype.lower()
        ts = TurnStream() if track else None
        if is_turn:
            self._response(ex, str_headers, ex.headers_s)
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": raw_headers})
        read_index = 0
        state = {"end": "complete", "reason": None}

        async def pump() -> None:
            nonlocal read_index
            try:
                async for chunk in upstream.aiter_raw():
                    if not chunk:
                        continue
                    t = self.clock() - t_req_clock  # when it arrived
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await asyncio.sleep(0)  # let a client disconnect be seen before the next write
                    if ex.first_byte_s is None:
                        ex.first_byte_s = t
                    ex.reads += 1
                    ex.bytes += len(chunk)
                    if is_turn:
                        self._read(ex, read_index, t, decoder.feed(chunk), ts)
                    read_index += 1
            except httpx2.HTTPError as e:
                state["end"], state["reason"] = "dropped", f"connection dropped: {type(e).__name__}: {e}"

        outcome = await _race(pump, receive, self.closing())
        ex.end_s = self.clock() - t_req_clock
        if outcome == "disconnected":
            ex.end, ex.reason = "cancelled", "the client closed the connection"
        elif outcome == "closing":
            ex.end, ex.reason = "dropped", "proxy shutting down"
        else:
            ex.end, ex.reason = state["end"], state["reason"]
        if decoder.encoding not in ("", "identity") and (not decoder.supported or decoder.failed):
            self._obs_line(
                {
                    "type": "proxy_note",
                    "turn": ex.turn,
                    "attempt": ex.attempt,
                    "note": f"content-encoding {decoder.encoding}: reads recorded as received (encoded)",
                }
            )
        if is_turn:
            status = {"complete": "complete", "cancelled": "cancelled"}.get(ex.end or "", "failed")
            self._end_turn(ex, ts, status, ex.reason)
        self._finish(ex)
        if ex.end == "complete":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif ex.end == "dropped":
            raise ConnectionDrop(ex.reason or "upstream dropped")

    # --- bookkeeping: recording + observations ------------------------------------------------------------------
    def _obs_line(self, obj: dict) -> None:
        w = self._writer()
        if w is not None and not w.closed:
            late = self._late_secrets()
            w.observation(redact(obj, late) if late else obj)

    def _begin_turn(
        self, ex: ProxyExchange, url: str, headers: list[tuple[str, str]], body: bytes, parsed: Any, t_req: float
    ) -> None:
        turn, attempt = ex.turn or 0, ex.attempt or 0
        if not self._started:
            self._started = True
            self._pub(
                O.LoopStarted(
                    t_req, self.source(), str((parsed or {}).get("model", "")) if isinstance(parsed, dict) else "", None
                )
            )
        if attempt == 0:
            self._pub(O.TurnStarted(t_req, turn))
        clean = clean_headers(headers)
        body_value: Any = parsed if parsed is not None else body.decode("utf-8", errors="replace")
        w = self._writer()
        if w is not None:
            late = self._late_secrets()
            w.request(
                turn,
                attempt,
                t_req,
                ex.method,
                redact(url, late) if late else url,
                clean,
                redact(body_value, late) if late else body_value,
            )
        self._pub(
            O.AttemptStarted(t_req, turn, attempt, ex.method, url, clean, parsed if isinstance(parsed, dict) else {})
        )
        if isinstance(parsed, dict) and attempt == 0:  # a retry repeats the same results: inferred once
            found = infer_tool_executions(self.seen_tools, parsed.get("messages"), t_req)
            ex.inferred = found
            for inf in found:
                self._pub(
                    ToolExecutionInferred(
                        t_req,
                        turn,
                        attempt,
                        inf.tool_use_id,
                        inf.name,
                        inf.status,
                        inf.from_turn,
                        inf.since_block_stop,
                        inf.since_stream_end,
                        inf.is_error,
                    )
                )
                self._obs_line({"type": "tool_inferred", "turn": turn, "attempt": attempt, **inf.to_json()})
                seen = self.seen_tools.get(inf.tool_use_id)
                if seen is not None and inf.status in ("result", "missing"):
                    state = "not_run" if inf.status == "missing" else ("failed" if inf.is_error else "succeeded")
                    why = "no tool_result for it in the next request" if inf.status == "missing" else None
                    self._tool_state(
                        seen.id,
                        seen.name,
                        seen.turn,
                        seen.attempt,
                        seen.index,
                        state,
                        seen.input,
                        {"running": seen.stop_t, state: t_req},
                        error=why,
                    )
                if inf.status == "result":
                    self.seen_tools.pop(inf.tool_use_id, None)

    def _tool_state(
        self,
        id: str,
        name: str,
        turn: int,
        attempt: int,
        index: int,
        state: str,
        tool_input: Any,
        times: dict,
        error: str | None = None,
    ) -> None:
        """The other harness's tool call as the dashboard's tool rows show them (its execution is inferred)."""
        if self.bus is not None:
            self._pub(
                O.ToolStateChanged(self.now(), turn, attempt, id, name, index, state, tool_input, error, None, times)
            )

    def _response(self, ex: ProxyExchange, headers: list[tuple[str, str]], t: float) -> None:
        clean = clean_headers(headers)
        late = self._late_secrets()
        if late:
            clean = redact(clean, late)
        w = self._writer()
        if w is not None:
            w.response(ex.turn or 0, ex.attempt or 0, t, ex.status or 0, clean)
        self._pub(O.ResponseStarted(self.now(), ex.turn or 0, ex.attempt or 0, ex.status or 0, clean))

    def _read(self, ex: ProxyExchange, read_index: int, t: float, data: bytes, ts: Any) -> None:
        turn, attempt = ex.turn or 0, ex.attempt or 0
        w = self._writer()
        if w is not None:
            late = self._late_secrets()
            w.read(turn, attempt, t, redact(data, late) if late else data)
        now = self.now()
        self._pub(O.ReadReceived(now, turn, attempt, read_index, t, data))
        if ts is not None:
            self._steps(ts.feed(data), ts, turn, attempt, now)

    def _steps(self, steps: list, ts: Any, turn: int, attempt: int, now: float) -> None:
        asm = ts.assembler
        for step in steps:
            if self.bus is not None:  # nobody watching: skip building observations
                for obs in step_observations(step, asm, now, turn, attempt):
                    self._pub(obs)
            for change in step.changes:
                if change[0] == "block_opened":
                    b = asm.blocks[change[1]]
                    if b.type == "tool_use" and b.id:
                        self._tool_state(
                            b.id,
                            b.name or "?",
                            turn,
                            attempt,
                            b.index,
                            "streaming_input",
                            None,
                            {"streaming_input": now},
                        )
                elif change[0] == "block_closed":
                    b = asm.blocks[change[1]]
                    if b.type == "tool_use" and b.id:
                        ok = b.input_error is None
                        self.seen_tools[b.id] = SeenToolUse(
                            b.id, b.name or "?", turn, attempt, b.index, now, None, b.input if ok else None
                        )
                        # from here on the tool is the other harness's business: shown as running (inferred)
                        # until a later request carries its tool_result
                        self._tool_state(
                            b.id,
                            b.name or "?",
                            turn,
                            attempt,
                            b.index,
                            "running",
                            b.input if ok else None,
                            {"running": now},
                        )
            if step.event.type == "message_stop":
                for s in self.seen_tools.values():
                    if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                        s.stream_end_t = now

    def _end_turn(self, ex: ProxyExchange, ts: Any, status: str, reason: str | None) -> None:
        if ex.turn is None:
            return
        turn, attempt = ex.turn, ex.attempt or 0
        now = self.now()
        outcome = None
        if ts is not None:
            for d in ts.close():
                self._pub(O.DiagnosticRaised(now, turn, attempt, d))
            outcome = ts.outcome
            for s in self.seen_tools.values():
                if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                    s.stream_end_t = now
        elif ex.status is not None and ex.status != 200:
            outcome = "error"
        ex.outcome = outcome
        w = self._writer()
        if w is not None:
            w.end(turn, attempt, ex.end_s or 0.0, status, reason)
        self._pub(O.AttemptEnded(now, turn, attempt, status, reason, outcome))
        if ts is not None and status == "complete" and ts.assembler.stopped:
            msg = ts.final_message()
            self._pub(O.TurnEnded(now, turn, outcome or "", msg.get("stop_reason"), dict(msg.get("usage") or {})))

    def _finish(self, ex: ProxyExchange) -> None:
        self.exchanges.append(ex)
        if ex.turn is None:
            self._obs_line(
                {
                    "type": "proxy_exchange",
                    "method": ex.method,
                    "path": ex.path,
                    "status": ex.status,
                    "bytes": ex.bytes,
                    "t": round(ex.t_request, 6),
                    "end": ex.end,
                }
            )
        self._note(ex)


def format_exchange(ex: ProxyExchange) -> str:
    where = f"turn {ex.turn + 1} attempt {(ex.attempt or 0) + 1} " if ex.turn is not None else ""
    ms = lambda s: "-" if s is None else f"{s * 1000:.0f} ms"
    line = (
        f"{where}{ex.method} {ex.path} -> {ex.status} {ex.end}: {ex.reads} reads, {ex.bytes} bytes, "
        f"headers {ms(ex.headers_s)}, first byte {ms(ex.first_byte_s)}, total {ms(ex.end_s)}"
    )
    if ex.outcome:
        line += f", {ex.outcome}"
    if ex.reason and ex.end != "complete":
        line += f" ({ex.reason})"
    for inf in ex.inferred:
        if inf.status == "result":
            line += (
                f"\n  tool {inf.name} {inf.tool_use_id} (turn {(inf.from_turn or 0) + 1}): result"
                f"{' is_error' if inf.is_error else ''} {ms(inf.since_block_stop)} after its block stop"
            )
        else:
            line += f"\n  tool {inf.name or '?'} {inf.tool_use_id}: {inf.status}"
    return line

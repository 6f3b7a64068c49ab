"""`inspector proxy`: watch another harness talk to the API. A pass-through HTTP proxy that records every exchange.

    inspector proxy --listen 127.0.0.1:8787 --upstream https://api.anthropic.com --headless --record run.jsonl
    ANTHROPIC_BASE_URL=http://127.0.0.1:8787 their-harness ...

- Forwarding: method, path, query, headers (credentials included, untouched) and body go upstream with the proxy's
  own HTTP/1.1 client (:mod:`inspector.net.upstream`; httpx2 when an environment proxy applies or a transport is
  given); the response is streamed back as it arrives (no decoding, no buffering: what arrived together goes out in
  one write), so the client gets exactly upstream's bytes. Hop-by-hop headers (connection, keep-alive, transfer-encoding, te, trailer, upgrade,
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
import logging
import re
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import IO, Any, ClassVar, cast

import httpx2
import orjson

from inspector.core.errors import InspectorError
from inspector.core.fmt import milliseconds
from inspector.core.redaction import clean_headers, credential_values, redact, usable_secrets
from inspector.net.faults import FAULT_HEADER
from inspector.net.livefaults import parse_live_faults, run_live
from inspector.net.server import Closable, ConnectionDrop, install_log_filter
from inspector.net.upstream import UpstreamPool, UpstreamResponse, env_proxy, error_text, usable_for
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.observe.states import ToolState
from inspector.observe.stepobs import step_observations, tool_transitions
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

log = logging.getLogger("inspector.net")

DEFAULT_HISTORY = 1000  # exchanges kept in ProxyApp.exchanges (older ones are dropped)
DEFAULT_UPSTREAM = "https://api.anthropic.com"
DEFAULT_MAX_CONNECTIONS = 1000  # upstream connections at once (streams in flight); past it: 503 at once
DEFAULT_CONNECT_TIMEOUT = 10.0  # seconds for upstream to accept a connection
DEFAULT_READ_TIMEOUT = 600.0  # seconds upstream may stay silent (headers, then between reads), like the SDK
SHARD_SIZE = 32  # upstream connections per client (see ProxyApp._client)
KEEPALIVE_EXPIRY = 30.0  # seconds an idle upstream connection is kept
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
        return {f: getattr(self, f) for f in self.__slots__}


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


async def _client_gone(receive) -> None:
    """Returns when the client disconnects (the request body has been read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class _Watchers:
    """The client's disconnect and the proxy's shutdown, watched once for the whole exchange (headers, then body)."""

    def __init__(self, receive, closing: asyncio.Event) -> None:
        self.gone = asyncio.ensure_future(_client_gone(receive))
        self.stop = asyncio.ensure_future(closing.wait())

    async def wait(self, main: asyncio.Future, done_name: str) -> str:
        """``done_name`` when ``main`` finished first, else "disconnected" or "closing" (``main`` is left running)."""
        done, _ = await asyncio.wait({main, self.gone, self.stop}, return_when=asyncio.FIRST_COMPLETED)
        if main in done:
            return done_name
        return "disconnected" if self.gone in done else "closing"

    async def close(self) -> None:
        for t in (self.gone, self.stop):
            if not t.done():
                t.cancel()
        for t in (self.gone, self.stop):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t


def _error_body(kind: str, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": f"inspector proxy: {message}"}})


# an SSE event line naming message_stop, at the start of a line (a JSON string cannot hold a raw line break)
_STOP_LINE = re.compile(rb"(?:^|[\r\n])event: ?message_stop\r?[\r\n]")


class _BatchFile:
    """The recording's file: writes are buffered and reach the disk when the proxy says (:meth:`sync`, once per batch
    of reads), not at every line as RecordingWriter's own ``flush()`` would. ``flush()`` is therefore a no-op."""

    def __init__(self, target: Any, owns: bool) -> None:
        self.target = target
        self.owns = owns

    def write(self, data: bytes) -> int:
        return self.target.write(data)

    def flush(self) -> None:
        pass

    def sync(self) -> None:
        self.target.flush()

    def close(self) -> None:
        try:
            self.target.flush()
        finally:
            if self.owns:
                self.target.close()


@dataclass
class ProxyExchange:
    """One forwarded request (the last ``history`` are kept in ``ProxyApp.exchanges``; printed by the headless
    CLI)."""

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
    fault: str | None = None  # the live fault injected into this exchange (proxy --fault / x-inspector-fault)


class _Track:
    """Bookkeeping of one /messages attempt: reads waiting to be decoded / recorded / published (processed in
    batches, off the forwarding path) and what is known of how its stream ended."""

    __slots__ = (
        "ex",
        "turn",
        "attempt",
        "digest",
        "t_req",
        "pending",
        "read_index",
        "ts",
        "decoder",
        "tail",
        "saw_stop",
        "requested",
        "ended",
        "sse",
    )

    def __init__(self, ex: ProxyExchange, digest: str, t_req: float) -> None:
        self.ex = ex
        self.turn = ex.turn or 0
        self.attempt = ex.attempt or 0
        self.digest = digest
        self.t_req = t_req  # proxy time of the request
        self.pending: list[tuple[float, bytes]] = []  # (seconds since the request, data)
        self.read_index = 0
        self.ts: TurnStream | None = None
        self.decoder: _Decoder | None = None
        self.tail = b""
        self.saw_stop = False
        self.requested = False  # its request line / observations were written
        self.ended = False  # its end line / observations were written
        self.sse = False  # the response is text/event-stream with status 200


# =====================================================================================================================
# The proxy
# =====================================================================================================================

RETRY_MEMORY = 4096  # failed attempts remembered for the retry rule (oldest forgotten first)


class ProxyApp(Closable):
    """The proxy as an ASGI app (``.app``). Run it with uvicorn (``serve.BackgroundServer`` / the CLI).

    ``max_connections``: upstream connections at once (one per open stream); past it a request gets 503 at once.
    ``connect_timeout`` / ``read_timeout``: seconds for upstream to accept the connection / between two of its reads
    (pings count; the first read is the response headers). ``faults``: live faults for every /messages stream
    (:mod:`inspector.net.livefaults`); ``fault_header``: honour ``x-inspector-fault`` per request (the header is then
    the proxy's and is not forwarded). ``batch_interval``: how long reads wait to be decoded and recorded (they are
    forwarded at once). ``on_warning``: called with a one-line message (e.g. the recording stopped)."""

    # the client gets upstream's date, not a second one of uvicorn's (server_header=False is net.server's default:
    # no server header of ours either); idle client connections are kept like the API does
    uvicorn_options: ClassVar[dict[str, Any]] = {"date_header": False, "timeout_keep_alive": 75}

    def __init__(
        self,
        upstream: str = DEFAULT_UPSTREAM,
        *,
        record: str | Path | IO[bytes] | None = None,
        bus: O.ObservationBus | None = None,
        secrets: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        on_exchange: Callable[[ProxyExchange], None] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        listen: str | None = None,
        source_info: dict | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        faults: Any = None,
        fault_header: bool = False,
        batch_interval: float = 0.01,
        on_warning: Callable[[str], None] | None = None,
        history: int = DEFAULT_HISTORY,
        ssl_context: Any = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.upstream = upstream.rstrip("/")
        self.source_info = source_info  # how the dashboard names this source (default: proxy -> upstream)
        self.record_path = record
        self.bus = bus
        self.clock = clock
        self.t0 = clock()
        self.on_exchange = on_exchange
        self.on_warning = on_warning
        self.transport = transport
        self.listen = listen
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.faults = parse_live_faults(faults)
        self.fault_header = fault_header
        self.batch_interval = batch_interval
        self.secrets: list[str] = usable_secrets(secrets)
        # observations reach the bus masked, also a key echoed split across reads or deltas (observe/redacting.py)
        self._redacting = RedactingPublisher(bus, self.secrets) if bus is not None else None
        self.writer: RecordingWriter | None = None
        self._file: _BatchFile | None = None
        self.recording_error: str | None = None  # set when a write failed: the recording stopped there
        self._late: list[str] = []  # secrets the writer was not given (learned after it opened), longest first
        self.clients: list[httpx2.AsyncClient] = []
        self._ssl: Any = ssl_context  # upstream's TLS context (None: the SDK's, made when first needed)
        self._shard_active: list[int] = []
        # the upstream client of the forwarding path (inspector/net/upstream.py); httpx2 only with a transport of the
        # caller's or an HTTP proxy from the environment on the way upstream
        self.pool: UpstreamPool | None = None
        self._pools: list[UpstreamPool] = []  # every pool opened (``upstream`` may be changed while running)
        # the most recent exchanges (a ring: a long-running proxy must not grow with every request it forwards)
        self.exchanges: deque[ProxyExchange] = deque(maxlen=max(1, history))
        self.seen_tools: dict[str, SeenToolUse] = {}
        self.turns = 0
        self.active = 0  # upstream requests in flight (each holds one upstream connection)
        self._failed: OrderedDict[str, tuple[int, int]] = OrderedDict()  # body digest -> failed (turn, attempt)
        self._dirty: dict[int, _Track] = {}  # tracks with pending reads, by id
        self._drain_handle: asyncio.TimerHandle | None = None
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
        if self._redacting is not None:
            self._redacting.publish(obs)

    def _client(self) -> tuple[int, httpx2.AsyncClient]:
        """The upstream client for the next request: (shard, client). The pool is split into shards of
        ``SHARD_SIZE`` connections, each its own client: httpcore scans every connection of its pool (probing each
        idle one's socket) for every request, so one pool of 1,000 costs milliseconds per request after a burst.
        The least busy shard is chosen (the first among equals, so sequential requests reuse one keep-alive
        connection); a new shard is opened only when every open one is full."""
        busy = self._shard_active
        if busy:
            low = min(busy)
            if low < SHARD_SIZE or len(busy) * SHARD_SIZE >= self.max_connections:
                k = busy.index(low)
                return k, self.clients[k]
        return len(self.clients), self._new_shard()

    @property
    def ssl_context(self) -> Any:
        """Upstream's TLS context (``inspector proxy --ca-file / --insecure``); set before the first request."""
        return self._ssl

    @ssl_context.setter
    def ssl_context(self, ctx: Any) -> None:
        self._ssl = ctx

    def _pool(self) -> UpstreamPool | None:
        """The upstream client of the forwarding path (inspector/net/upstream.py), or None when httpx2 must go:
        a transport of the caller's, or an HTTP proxy from the environment on the way upstream."""
        pool = self.pool
        if pool is None or pool.base != self.upstream:
            if self.transport is not None or not usable_for(self.upstream):
                return None
            if self._ssl is None and self.upstream.startswith("https:"):
                self._ssl = httpx2.create_ssl_context(trust_env=True)
            ssl_context = self._ssl
            pool = self.pool = UpstreamPool(
                self.upstream,
                keepalive_expiry=KEEPALIVE_EXPIRY,
                ssl_context=(lambda: ssl_context) if ssl_context is not None else None,
                clock=self.clock,
            )
            self._pools.append(pool)
        pool.connect_timeout, pool.read_timeout = self.connect_timeout, self.read_timeout  # options set later win
        return pool

    def _new_shard(self) -> httpx2.AsyncClient:
        k = len(self.clients)
        size = max(1, min(SHARD_SIZE, self.max_connections - k * SHARD_SIZE))
        if self._ssl is None:  # one TLS context for every shard (loading the CA bundle takes ~0.1 s)
            self._ssl = httpx2.create_ssl_context(trust_env=True)
        kw: dict[str, Any] = {
            # read: idle time between two reads (the API pings every few seconds); pool: the proxy answers 503
            # itself before the pool is full, this is only a backstop
            "timeout": httpx2.Timeout(connect=self.connect_timeout, read=self.read_timeout, write=60.0, pool=5.0),
            "limits": httpx2.Limits(
                max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_EXPIRY
            ),
            "verify": self._ssl,
            "follow_redirects": False,
            "trust_env": True,  # like the SDK: HTTPS_PROXY / NO_PROXY / SSL_CERT_FILE apply upstream
            # never keep upstream cookies: they would be added to other clients' requests
            "cookies": CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        }
        if self.transport is not None:
            kw["transport"] = self.transport
        client = httpx2.AsyncClient(**kw)
        client.headers = httpx2.Headers()  # no default user-agent / accept / accept-encoding of ours
        self.clients.append(client)
        self._shard_active.append(0)
        return client

    def _learn(self, found: list[str]) -> None:
        new = [s for s in found if s not in self.secrets]
        if not new:
            return
        self.secrets.extend(new)
        if self._redacting is not None:
            self._redacting.learn(new)
        if self.writer is not None:
            # the writer masks them in the reads from now on, also across read boundaries (its stream redactor)
            self.writer.add_secrets(new)
            # and the proxy in the request, response and observation lines it hands over
            self._late = sorted({*self._late, *new}, key=len, reverse=True)  # longest first, sorted once here

    def open_recording(self) -> RecordingWriter | None:
        """Open the recording now (the CLI does, before serving, so an unwritable path is a usage error); raises
        OSError. Credentials learned later are redacted by the proxy before they reach the writer."""
        return self._writer()

    def _writer(self) -> RecordingWriter | None:
        """The recording writer; created at the first exchange unless :meth:`open_recording` opened it earlier (the
        credentials seen by then are its secrets). None without --record or once a write failed."""
        if self.record_path is None or self.recording_error is not None:
            return None
        if self.writer is None:
            if isinstance(self.record_path, (str, Path)):
                self._file = _BatchFile(open(self.record_path, "wb", buffering=1 << 16), owns=True)
            else:
                self._file = _BatchFile(self.record_path, owns=False)
            try:
                self.writer = RecordingWriter(
                    cast(IO[bytes], self._file), source=self.source(), secrets=list(self.secrets)
                )
                self._file.sync()
            except BaseException:
                with contextlib.suppress(Exception):
                    self._file.close()
                self._file = None
                raise
            self._late = []
        return self.writer if not self.writer.closed else None

    def _record(self, method: str, *args: Any) -> None:
        """One recording line (``RecordingWriter.<method>(*args)``). A failed write (disk full, file too large, I/O
        error) stops the recording with a warning; forwarding goes on."""
        try:
            w = self._writer()
            if w is not None:
                getattr(w, method)(*args)
        except (OSError, ValueError) as e:
            self._recording_failed(e)

    def _sync(self) -> None:
        if self._file is not None and self.recording_error is None:
            try:
                self._file.sync()
            except (OSError, ValueError) as e:
                self._recording_failed(e)

    def _recording_failed(self, e: BaseException) -> None:
        if self.recording_error is not None:
            return
        what = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        self.recording_error = f"recording stopped: cannot write {self._record_name()}: {what}; still forwarding"
        log.warning("inspector proxy: %s", self.recording_error)
        if self._file is not None:
            with contextlib.suppress(Exception):
                self._file.close()
        if self.on_warning is not None:
            with contextlib.suppress(Exception):
                self.on_warning(self.recording_error)

    def _record_name(self) -> str:
        return str(self.record_path) if isinstance(self.record_path, (str, Path)) else "the recording"

    def _late_secrets(self) -> list[str]:
        return self._late

    def close(self) -> None:
        """Close the recording (creating it, header only, if nothing passed)."""
        self._drain()
        if self._redacting is not None:
            self._redacting.close()  # what attempts that never ended still hold
        try:
            w = self._writer()
        except OSError as e:
            self._recording_failed(e)
            return
        if w is not None and not w.closed:
            try:
                w.close()
                if self._file is not None:
                    self._file.close()
            except (OSError, ValueError) as e:
                self._recording_failed(e)

    async def aclose(self) -> None:
        clients, self.clients, self.client, self._shard_active = self.clients, [], None, []
        pools, self._pools, self.pool = self._pools, [], None
        for pool in pools:
            await pool.aclose()
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()
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
                    # ready before the first request (its TLS context takes a while)
                    with contextlib.suppress(Exception):
                        if self._pool() is None and not self.clients:
                            self._new_shard()
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

    async def _reply_error(self, send, status: int, kind: str, message: str, headers: list | None = None) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *(headers or [])],
            }
        )
        await send({"type": "http.response.body", "body": _error_body(kind, message), "more_body": False})

    def _busy_message(self) -> str:
        return f"all {self.max_connections} upstream connections are busy (--max-connections)"

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
        faults = self.faults
        fwd = []
        for k, v in in_headers:
            lk = k.lower()
            if lk in HOP_BY_HOP:
                continue
            if self.fault_header and lk == FAULT_HEADER:
                faults = self._header_faults(v)
                continue
            fwd.append((k, v))

        ex = ProxyExchange(method, path, t_request=t_req)
        is_turn = method == "POST" and path.rstrip("/").endswith("/messages")
        track: _Track | None = None
        sending: asyncio.Future | None = None
        holds_connection = False
        shard = 0
        watchers: _Watchers | None = None
        try:
            if isinstance(faults, str):  # a bad x-inspector-fault header: the request's error, not upstream's
                ex.status, ex.end, ex.reason = 400, "error", faults
                await self._reply_error(send, 400, "invalid_request_error", faults)
                return
            error: BaseException | None = None
            injected = None
            if is_turn:
                track = self._new_track(ex, body, t_req)
                injected = faults.http_error(track.attempt) if faults else None
            if injected is not None:  # a live http_429 / http_529: answered here, upstream never sees it
                assert track is not None
                ex.fault = injected.fault
                self._begin_turn(track, url, in_headers, body)
                await self._answer_injected(ex, track, injected, send, t_req_clock)
                return
            if self.active >= self.max_connections:
                if track is not None:
                    self._begin_turn(track, url, in_headers, body)
                reason = self._busy_message()
                ex.status, ex.end, ex.reason = 503, "error", reason
                await self._reply_error(send, 503, "overloaded_error", reason)
                ex.end_s = self.clock() - t_req_clock
                return
            self.active += 1
            holds_connection = True
            try:
                pool = self._pool()
                if pool is not None:
                    shard = -1
                    sending = asyncio.ensure_future(pool.send(method, target, fwd, body))
                    yields = 1
                else:
                    shard, client = self._client()
                    self._shard_active[shard] += 1
                    request = client.build_request(method, url, headers=fwd, content=body)
                    sending = asyncio.ensure_future(client.send(request, stream=True))
                    yields = 3
                if track is not None:  # let the request go out first: the bookkeeping overlaps upstream's wait
                    for _ in range(yields):
                        await asyncio.sleep(0)
            except (httpx2.HTTPError, httpx2.InvalidURL) as e:
                error = e
            if track is not None:
                self._begin_turn(track, url, in_headers, body)
            upstream: httpx2.Response | UpstreamResponse | None = None
            if sending is not None:
                watchers = _Watchers(receive, self.closing())
                outcome = await self._await_headers(sending, watchers)
                if outcome == "headers":
                    try:
                        upstream = sending.result()
                    except httpx2.HTTPError as e:
                        error = e
                    sending = None
                else:  # the client left, or the proxy is closing: upstream must not keep a connection for nobody
                    await _abandon(sending)
                    sending = None
                    ex.end_s = self.clock() - t_req_clock
                    if outcome == "disconnected":
                        ex.end, ex.reason = "cancelled", "the client closed the connection before upstream's headers"
                        return
                    ex.status, ex.end, ex.reason = 503, "dropped", "proxy shutting down"
                    await self._reply_error(send, 503, "overloaded_error", "shutting down", [(b"connection", b"close")])
                    return
            if error is not None or upstream is None or watchers is None:
                status, kind, reason = self._upstream_error(error)
                ex.status, ex.end, ex.reason = status, "error", reason
                await self._reply_error(send, status, kind, reason)
                ex.end_s = self.clock() - t_req_clock
                return
            try:
                await self._relay(ex, track, upstream, watchers, send, t_req_clock, faults)
            finally:
                with contextlib.suppress(Exception):
                    await upstream.aclose()
        except asyncio.CancelledError:
            ex.end, ex.reason = "dropped", "proxy shutting down"
            raise
        finally:
            if watchers is not None:
                await watchers.close()
            if sending is not None:
                await _abandon(sending)
            if holds_connection:
                self.active -= 1
                if 0 <= shard < len(self._shard_active):
                    self._shard_active[shard] -= 1
            if ex.end is None:
                ex.end, ex.reason = "error", ex.reason or "the proxy failed"
            if ex.end_s is None:
                ex.end_s = self.clock() - t_req_clock
            if track is not None:
                if not track.requested:
                    with contextlib.suppress(Exception):  # it failed once already: the end line still goes out
                        self._begin_turn(track, url, in_headers, body)
                self._end_turn(track)
            self._finish(ex)

    async def _await_headers(self, sending: asyncio.Future, watchers: _Watchers) -> str:
        """Wait for upstream's response headers while watching the client and the proxy's shutdown: "headers" (or
        an error: the task is done), "disconnected" or "closing"."""
        return await watchers.wait(sending, "headers")

    def _upstream_error(self, error: BaseException | None) -> tuple[int, str, str]:
        """(status, error type, message) of the proxy's answer when upstream gave no response."""
        if isinstance(error, httpx2.PoolTimeout):
            return 503, "overloaded_error", self._busy_message()
        if isinstance(error, httpx2.ConnectTimeout):
            return (
                504,
                "api_error",
                f"upstream did not accept the connection within {self.connect_timeout:g} s " + ("(--connect-timeout)"),
            )
        if isinstance(error, httpx2.ReadTimeout):
            return (
                504,
                "api_error",
                f"upstream sent no response headers within {self.read_timeout:g} s (--read-timeout)",
            )
        if isinstance(error, httpx2.RemoteProtocolError):  # upstream answered, with nothing HTTP/1.1 can read
            return 502, "api_error", error_text(error)
        via = env_proxy(self.upstream) if self.transport is None and error is not None else None
        if via is not None and isinstance(error, httpx2.ConnectError | httpx2.ProxyError):
            return 502, "api_error", f"the HTTP proxy {via} failed: {type(error).__name__}: {error_text(error)}"
        return 502, "api_error", f"upstream unreachable: {type(error).__name__}: {error_text(error) if error else ''}"

    def _header_faults(self, value: str) -> Any:
        """The live faults of an ``x-inspector-fault`` header, or the error message (a str) when it is invalid."""
        try:
            return parse_live_faults(value)
        except InspectorError as e:
            return f"x-inspector-fault: {e}"

    async def _answer_injected(self, ex: ProxyExchange, track: _Track, injected: Any, send, t_req_clock: float) -> None:
        ex.status = injected.status
        ex.headers_s = self.clock() - t_req_clock
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in injected.headers]
        self._response(track, injected.headers, ex.headers_s)
        self._fault_line(track, injected.fault, 0)
        await send({"type": "http.response.start", "status": injected.status, "headers": headers})
        await send({"type": "http.response.body", "body": injected.body, "more_body": False})
        t = self.clock() - t_req_clock
        ex.first_byte_s, ex.reads, ex.bytes = t, 1, len(injected.body)
        self._read(track, t, injected.body)
        ex.end, ex.reason, ex.end_s = "complete", None, t

    async def _relay(
        self,
        ex: ProxyExchange,
        track: _Track | None,
        upstream: httpx2.Response | UpstreamResponse,
        watchers: _Watchers,
        send,
        t_req_clock: float,
        faults: Any,
    ) -> None:
        ex.status = upstream.status_code
        t_head = upstream.t_head if isinstance(upstream, UpstreamResponse) else self.clock()
        ex.headers_s = t_head - t_req_clock
        raw_headers = [
            (k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in RESPONSE_HOP_BY_HOP
        ]
        ctype = upstream.headers.get("content-type", "").lower()
        sse = "text/event-stream" in ctype
        live = faults.stream(track.attempt) if (faults and track is not None and sse and ex.status == 200) else None
        if track is not None:
            track.sse = sse and ex.status == 200
            str_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers]
            track.decoder = _Decoder(upstream.headers.get("content-encoding", ""))
            if live is not None and track.decoder.encoding not in ("", "identity"):
                live = None  # an encoded stream cannot be rewritten event by event: forwarded as is
                self._obs_line(
                    {
                        "type": "proxy_note",
                        "turn": track.turn,
                        "attempt": track.attempt,
                        "note": "content-encoded stream: live faults not applied",
                    }
                )
            if sse and not self._light():
                track.ts = TurnStream()
            self._response(track, str_headers, ex.headers_s)
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": raw_headers})
        state: dict[str, Any] = {"end": "complete", "reason": None}
        clock = self.clock
        queue = self._read

        async def pump() -> None:
            try:
                async for chunk in upstream.aiter_raw():
                    if not chunk:
                        continue
                    t = clock() - t_req_clock  # when it arrived
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if ex.first_byte_s is None:
                        ex.first_byte_s = t
                    ex.reads += 1
                    ex.bytes += len(chunk)
                    if track is not None:
                        queue(track, t, chunk)
            except httpx2.ReadTimeout:
                state["end"] = "dropped"
                state["reason"] = f"upstream sent nothing for {self.read_timeout:g} s (--read-timeout)"
            except httpx2.HTTPError as e:
                state["end"], state["reason"] = "dropped", f"connection dropped: {type(e).__name__}: {e}"

        async def pump_direct() -> None:
            """Everything that arrived since the last write goes out in one write (as soon as the previous write is
            done: nothing waits for more); each read is still recorded on its own, with its arrival time."""
            assert isinstance(upstream, UpstreamResponse)
            take, wait = upstream.take, upstream.wait
            try:
                while True:
                    batch = take()
                    if not batch:
                        if upstream.complete:
                            return
                        await wait()
                        continue
                    data = batch[0][1] if len(batch) == 1 else b"".join([d for _, d in batch])
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                    if ex.first_byte_s is None:
                        ex.first_byte_s = batch[0][0] - t_req_clock
                    ex.reads += len(batch)
                    ex.bytes += len(data)
                    if track is not None:
                        for t, d in batch:
                            queue(track, t - t_req_clock, d)
            except httpx2.ReadTimeout:
                state["end"] = "dropped"
                state["reason"] = f"upstream sent nothing for {self.read_timeout:g} s (--read-timeout)"
            except httpx2.HTTPError as e:
                state["end"], state["reason"] = "dropped", f"connection dropped: {type(e).__name__}: {e}"

        async def emit(data: bytes) -> None:  # what a live fault lets through, or inserts
            t = clock() - t_req_clock
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if ex.first_byte_s is None:
                ex.first_byte_s = t
            ex.reads += 1
            ex.bytes += len(data)
            assert track is not None
            queue(track, t, data)

        async def pump_faulted() -> None:
            assert track is not None and live is not None
            await run_live(live, upstream, emit, state, lambda fault, at: self._fault_line(track, fault, at))

        if live is not None:
            task = asyncio.ensure_future(pump_faulted())
        elif isinstance(upstream, UpstreamResponse):
            task = asyncio.ensure_future(pump_direct())
        else:
            task = asyncio.ensure_future(pump())
        try:
            outcome = await watchers.wait(task, "done")
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if outcome == "done":
            task.result()  # re-raises
        ex.end_s = self.clock() - t_req_clock
        if outcome == "disconnected":
            ex.end, ex.reason = "cancelled", "the client closed the connection"
        elif outcome == "closing":
            ex.end, ex.reason = "dropped", "proxy shutting down"
        else:
            ex.end, ex.reason = state["end"], state["reason"]
        if ex.end == "complete":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif ex.end == "dropped":
            raise ConnectionDrop(ex.reason or "upstream dropped")

    # --- the retry rule -------------------------------------------------------------------------------------------
    def _turn_of(self, digest: str) -> tuple[int, int]:
        """(turn, attempt) of a /messages request: a retry (the next attempt of a turn) only when its body repeats
        that of an attempt that failed or was cut and has not been retried yet; anything else is a new turn."""
        prev = self._failed.pop(digest, None)
        if prev is not None:
            return prev[0], prev[1] + 1
        turn = self.turns
        self.turns += 1
        return turn, 0

    def _remember_failed(self, track: _Track) -> None:
        self._failed[track.digest] = (track.turn, track.attempt)
        self._failed.move_to_end(track.digest)
        while len(self._failed) > RETRY_MEMORY:
            self._failed.popitem(last=False)

    # --- bookkeeping: recording + observations (off the forwarding path) -------------------------------------------
    def _read(self, track: _Track, t: float, data: bytes) -> None:
        """A forwarded read, to be decoded / recorded / published with the next batch."""
        track.pending.append((t, data))
        if len(track.pending) == 1:
            self._dirty[id(track)] = track
            if self._drain_handle is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    return
                self._drain_handle = loop.call_later(self.batch_interval, self._drain)

    def _drain(self) -> None:
        """Process every pending read of every stream at once, then sync the recording to disk once."""
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        dirty, self._dirty = self._dirty, {}
        for track in dirty.values():
            self._process(track)
        if dirty:
            self._sync()

    def _process(self, track: _Track) -> None:
        pending, track.pending = track.pending, []
        if not pending:
            return
        turn, attempt = track.turn, track.attempt
        w = self.writer if self.recording_error is None else None
        dec = track.decoder
        ts = track.ts
        bus = self.bus
        decoded = []
        for t, data in pending:
            d = dec.feed(data) if dec is not None else data
            decoded.append((t, d))
            if w is not None:
                self._record("read", turn, attempt, t, d)  # the writer masks known keys, across reads too
        if bus is not None:
            for t, d in decoded:
                now = track.t_req + t
                self._pub(O.ReadReceived(self.now(), turn, attempt, track.read_index, t, d))
                track.read_index += 1
                if ts is not None:
                    self._steps(ts.feed(d), ts, turn, attempt, now)
        elif ts is not None:
            t_last = decoded[-1][0]
            self._steps(ts.feed(b"".join(d for _, d in decoded)), ts, turn, attempt, track.t_req + t_last)
        else:
            track.read_index += len(decoded)
            if not track.saw_stop:
                window = track.tail + b"".join(d for _, d in decoded)
                track.saw_stop = _STOP_LINE.search(window) is not None
                track.tail = window[-32:]

    def _obs_line(self, obj: dict) -> None:
        late = self._late_secrets()
        self._record("observation", redact(obj, late) if late else obj)

    def _fault_line(self, track: _Track, fault: str, at_event: int | None) -> None:
        track.ex.fault = fault
        self._obs_line(
            {
                "type": "fault_injected",
                "turn": track.turn,
                "attempt": track.attempt,
                "fault": fault,
                "at_event": at_event,
            }
        )

    def _light(self) -> bool:
        """Nobody needs more than the turn numbering: no bus, no recording, no exchange lines (which show the
        inferred tool calls), so nothing is parsed or decoded."""
        return (
            self.bus is None
            and self.on_exchange is None
            and (self.record_path is None or self.recording_error is not None)
        )

    def _new_track(self, ex: ProxyExchange, body: bytes, t_req: float) -> _Track:
        """A /messages request's turn and attempt (the retry rule), before anything else is done with it."""
        digest = hashlib.sha256(body).hexdigest()
        turn, attempt = self._turn_of(digest)
        ex.turn, ex.attempt = turn, attempt
        return _Track(ex, digest, t_req)

    def _begin_turn(self, track: _Track, url: str, headers: list[tuple[str, str]], body: bytes) -> None:
        """The request line and observations of an attempt (once)."""
        if track.requested:
            return
        track.requested = True
        if self._light():
            return
        ex, turn, attempt, t_req = track.ex, track.turn, track.attempt, track.t_req
        try:
            parsed = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
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
        late = self._late_secrets()
        self._record(
            "request",
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
            self._infer(ex, turn, attempt, parsed, t_req)

    def _infer(self, ex: ProxyExchange, turn: int, attempt: int, parsed: dict, t_req: float) -> None:
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

    def _response(self, track: _Track, headers: list[tuple[str, str]], t: float) -> None:
        ex = track.ex
        clean = clean_headers(headers)
        late = self._late_secrets()
        if late:
            clean = redact(clean, late)
        self._record("response", track.turn, track.attempt, t, ex.status or 0, clean)
        self._pub(O.ResponseStarted(self.now(), track.turn, track.attempt, ex.status or 0, clean))

    def _steps(self, steps: list, ts: Any, turn: int, attempt: int, now: float) -> None:
        asm = ts.assembler
        for step in steps:
            if self.bus is not None:  # nobody watching: skip building observations
                for obs in step_observations(step, asm, now, turn, attempt):
                    self._pub(obs)
            for tr in tool_transitions(step, asm):
                if tr.state is ToolState.STREAMING_INPUT:
                    self._tool_state(tr.id, tr.name, turn, attempt, tr.index, tr.state, None, {tr.state: now})
                    continue
                self.seen_tools[tr.id] = SeenToolUse(tr.id, tr.name, turn, attempt, tr.index, now, None, tr.input)
                # from here on the tool is the other harness's business: shown as running (inferred) until a
                # later request carries its tool_result
                running = ToolState.RUNNING
                self._tool_state(tr.id, tr.name, turn, attempt, tr.index, running, tr.input, {running: now})
            if step.event.type == "message_stop":
                for s in self.seen_tools.values():
                    if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                        s.stream_end_t = now

    def _end_turn(self, track: _Track) -> None:
        """The attempt's end line and observations (once), after its pending reads; remembers a failed attempt for
        the retry rule."""
        if track.ended:
            return
        track.ended = True
        self._dirty.pop(id(track), None)
        self._process(track)
        ex = track.ex
        turn, attempt = track.turn, track.attempt
        status = {"complete": "complete", "cancelled": "cancelled"}.get(ex.end or "", "failed")
        reason = None if status == "complete" else ex.reason
        now = self.now()
        outcome = None
        ts = track.ts
        dec = track.decoder
        if dec is not None and dec.encoding not in ("", "identity") and (not dec.supported or dec.failed):
            self._obs_line(
                {
                    "type": "proxy_note",
                    "turn": turn,
                    "attempt": attempt,
                    "note": f"content-encoding {dec.encoding}: reads recorded as received (encoded)",
                }
            )
        if ts is not None:
            for d in ts.close():
                self._pub(O.DiagnosticRaised(now, turn, attempt, d))
            outcome = ts.outcome
            stopped = ts.assembler.stopped
            for s in self.seen_tools.values():
                if s.turn == turn and s.attempt == attempt and s.stream_end_t is None:
                    s.stream_end_t = now
        else:
            stopped = track.saw_stop
        if ex.status is not None and ex.status != 200:
            outcome = outcome or "error"
        ex.outcome = outcome
        self._record("end", turn, attempt, ex.end_s or 0.0, status, reason)
        self._sync()
        self._pub(O.AttemptEnded(now, turn, attempt, status, reason, outcome))
        if ts is not None and status == "complete" and ts.assembler.stopped:
            msg = ts.final_message()
            self._pub(O.TurnEnded(now, turn, outcome or "", msg.get("stop_reason"), dict(msg.get("usage") or {})))
        sse_cut = track.sse and not stopped  # a stream that ended before message_stop
        if status != "complete" or (ex.status or 0) >= 400 or ex.status is None or sse_cut:
            self._remember_failed(track)

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
            self._sync()
        self._note(ex)


def format_exchange(ex: ProxyExchange) -> str:
    where = f"turn {ex.turn + 1} attempt {(ex.attempt or 0) + 1} " if ex.turn is not None else ""
    ms = milliseconds
    line = (
        f"{where}{ex.method} {ex.path} -> {ex.status} {ex.end}: {ex.reads} reads, {ex.bytes} bytes, "
        f"headers {ms(ex.headers_s)}, first byte {ms(ex.first_byte_s)}, total {ms(ex.end_s)}"
    )
    if ex.outcome:
        line += f", {ex.outcome}"
    if ex.fault:
        line += f", injected {ex.fault}"
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

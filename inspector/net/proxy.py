"""`inspector proxy`: watch another harness talk to the API. A pass-through HTTP proxy; a producer of observations.

    inspector proxy --listen 127.0.0.1:8787 --upstream https://api.anthropic.com --headless --record run.jsonl
    ANTHROPIC_BASE_URL=http://127.0.0.1:8787 their-harness ...

The proxy is split along its seams:

- Forwarding (this module: the ASGI app and streaming to the client): method, path, query, headers (credentials
  included, untouched) and body go upstream with the proxy's own HTTP/1.1 client (:mod:`inspector.net.upstream`;
  httpx2 when an environment proxy applies or a transport is given); the response is streamed back as it arrives
  (no decoding, no buffering: what arrived together goes out in one write), so the client gets exactly upstream's
  bytes. Hop-by-hop headers (connection, keep-alive, transfer-encoding, te, trailer, upgrade, proxy-connection, and
  those a Connection header lists: RFC 9110 section 7.6.1) and host / content-length are not copied (the HTTP
  layers set them again).
- Turn tracking (:mod:`inspector.net.turns`): turns, attempts, the retry rule, and every observation of an attempt.
- Tool inference (:mod:`inspector.net.toolinfer`): the other harness's tool calls, inferred from its next request.

The proxy only publishes. Every observation goes through ONE ``RedactingPublisher`` (the keys the clients send are
learned as they are seen, also after the recording opened) to the bus; the recording (``--record FILE``) is a
:class:`~inspector.record.recorder.Recorder` subscribed to that bus, exactly as the agent loop records, so a key
echoed anywhere (split across reads or deltas, ``\\u``-escaped) is masked once, for the dashboard and the file alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, TypeAlias

import httpx2

from inspector.core.errors import InspectorError
from inspector.core.fmt import count, milliseconds
from inspector.core.redaction import credential_values, learn, mask_text, redact, unlearn_use
from inspector.net.faults import FAULT_HEADER
from inspector.net.livefaults import InjectedError, LiveFaultSource, LiveFaultsSpec, parse_live_faults, run_live
from inspector.net.serve import BODY_TIMEOUT, DEFAULT_MAX_BODY, HEADER_TIMEOUT, KEEP_ALIVE, MAX_HEADER_BYTES
from inspector.net.server import Closable, ConnectionDrop, StopOnClose, guarded_h11, install_log_filter
from inspector.net.toolinfer import InferredExecution, SeenToolUse, ToolExecutionInferred, infer_tool_executions
from inspector.net.turns import ProxyExchange, Track, TurnTracker
from inspector.net.upstream import UpstreamPool, UpstreamResponse, env_proxy, error_text, usable_for
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.record.recorder import Recorder
from inspector.scenarios.fakeapi import error_body, openai_error_body
from inspector.stream.family import family_from_path

if TYPE_CHECKING:  # starlette is imported when a server is built (`inspector --help` stays fast)
    from starlette.types import Receive, Scope, Send

    # the task sending a request upstream: by the proxy's own client (UpstreamPool), or httpx2's
    _Sending: TypeAlias = asyncio.Future[UpstreamResponse] | asyncio.Future[httpx2.Response]

__all__ = [
    "DEFAULT_UPSTREAM",
    "InferredExecution",
    "ProxyApp",
    "ProxyExchange",
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
DEFAULT_MAX_CLIENTS = 1000  # client connections open at once (capped by the descriptor limit); past it: 503
FD_RESERVE = 64  # descriptors kept for the listening socket, the recording, logs and the TLS bundle
SHARD_SIZE = 32  # upstream connections per client (see ProxyApp._client)
KEEPALIVE_EXPIRY = 30.0  # seconds an idle upstream connection is kept
URL_MEMO = 256  # upstream URLs of recent request-targets kept (ProxyApp._upstream_url)
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
RESPONSE_HOP_BY_HOP_B = frozenset(h.encode() for h in RESPONSE_HOP_BY_HOP)


# =====================================================================================================================
# Helpers
# =====================================================================================================================


async def _abandon(sending: _Sending) -> None:
    """Cancel an upstream request task and wait for it; a response it already got is closed."""
    sending.cancel()
    try:
        response = await sending
    except BaseException:  # noqa: BLE001 (cleanup: how the abandoned request ended is reported by its owner)
        return
    with contextlib.suppress(Exception):
        await response.aclose()


async def _client_gone(receive: Receive) -> None:
    """Returns when the client disconnects (the request body has been read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


@functools.lru_cache(maxsize=URL_MEMO)
def _url_keys(url: str) -> tuple[str, ...]:
    """The keys a URL carries (`credential_values`: a password, a ``?key=``), for the last ``URL_MEMO`` URLs: the
    upstream's and the request's were parsed again for every request (~5% of the proxy's CPU under a burst). Kept
    process-wide as the keys themselves are (`learn` never forgets one)."""
    return tuple(credential_values((), url))


class _Shutdown:
    """The proxy's shutdown as every exchange watches it: one task awaiting ``closing()`` for all exchanges, and the
    wake-ups of the exchanges waiting now, in a set. (A future's own done-callbacks are a list that each removal
    scans: with 1,000 exchanges open, 18 us per wait on every exchange's path, in the queue a burst forms.)"""

    __slots__ = ("task", "wakes")

    def __init__(self, task: asyncio.Future[Literal[True]]) -> None:
        self.task = task
        self.wakes: set[Callable[[object], None]] = set()
        task.add_done_callback(self._wake_all)

    def _wake_all(self, _: object) -> None:
        wakes, self.wakes = self.wakes, set()
        for wake in wakes:
            wake(None)

    def watch(self, wake: Callable[[object], None]) -> None:
        """Call ``wake`` once the proxy begins to close (at once if it has)."""
        if self.task.done():
            wake(None)
        else:
            self.wakes.add(wake)

    def unwatch(self, wake: Callable[[object], None]) -> None:
        self.wakes.discard(wake)


class _Watchers:
    """The client's disconnect and the proxy's shutdown, watched once for the whole exchange (headers, then body).
    ``stop`` is the proxy's one shutdown watcher, shared by every exchange (not one more task per request)."""

    def __init__(self, receive: Receive, stop: _Shutdown) -> None:
        self.gone = asyncio.ensure_future(_client_gone(receive))
        self.stop = stop

    async def wait(self, main: asyncio.Future[Any], done_name: str) -> str:  # (main's result is not read here)
        """``done_name`` when ``main`` finished first, else "disconnected" or "closing" (``main`` is left running).
        (One future woken by whichever ends first: ``asyncio.wait``, a set, a counter and a coroutine of its own
        per call, was ~6% of the proxy's CPU with 1,000 streams at once.)"""
        if not main.done():
            waiter = asyncio.get_running_loop().create_future()

            def wake(_: object) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            main.add_done_callback(wake)  # (one already done calls it at once)
            self.gone.add_done_callback(wake)
            stop = self.stop
            stop.watch(wake)
            try:
                await waiter
            finally:
                main.remove_done_callback(wake)
                self.gone.remove_done_callback(wake)
                stop.unwatch(wake)
        if main.done():
            return done_name
        return "disconnected" if self.gone.done() else "closing"

    async def close(self) -> None:
        t = self.gone
        if not t.done():
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


def max_clients_for(wanted: int = DEFAULT_MAX_CLIENTS) -> int:
    """The client connections the proxy can hold at once: ``wanted``, but never more than half of the descriptors
    left after ``FD_RESERVE`` (each client's stream holds one upstream connection too), at least 1."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return max(1, wanted)
    if soft == resource.RLIM_INFINITY:
        return max(1, wanted)
    return max(1, min(wanted, (soft - FD_RESERVE) // 2))


class _Refused(Exception):
    """A request the proxy answers itself, without forwarding it (status, the API's error type, message)."""

    def __init__(self, status: int, etype: str, message: str) -> None:
        super().__init__(message)
        self.status, self.etype, self.message = status, etype, message


def target_problem(raw_path: bytes) -> str | None:
    """Why a request-target cannot be forwarded (None: fine). Only origin-form (an absolute path, maybe a query) is:
    ``@evil.invalid/v1/messages`` glued to the upstream URL would name another host (with the client's key), and
    absolute-form or ``*`` is for a forward proxy, which this is not. (``//x/v1/messages`` is an absolute path, empty
    first segment: it is forwarded, to upstream's host, as :meth:`ProxyApp._upstream_url` builds it.)"""
    if raw_path.startswith(b"/"):
        return None
    shown = raw_path[:80].decode("latin-1")
    return f"the request-target must be an absolute path (origin-form, /v1/...), not {shown!r}"


def _connection_options(headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The header names a request's ``Connection`` header lists (lower-cased): hop-by-hop, removed before the
    request is forwarded (RFC 9110 section 7.6.1), like ``Connection`` itself."""
    listed = [v for k, v in headers if k.lower() == "connection"]
    if not listed:
        return frozenset()
    return frozenset(t.strip().lower() for v in listed for t in v.split(",")) - {""}


def _hop_by_hop_b(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The response header names not forwarded: ``RESPONSE_HOP_BY_HOP_B`` and those its ``Connection`` header
    lists (RFC 9110 section 7.6.1)."""
    listed = [v for k, v in headers if k.lower() == b"connection"]
    if not listed:
        return RESPONSE_HOP_BY_HOP_B
    return RESPONSE_HOP_BY_HOP_B | {t.strip().lower() for v in listed for t in v.split(b",")} - {b""}


def _overrun_note(upstream: UpstreamResponse, extra: int) -> str:
    """The note of a response upstream sent more bytes after than its framing allows (the extra bytes were not
    forwarded: the client got the response as its head frames it)."""
    if upstream.header(b"transfer-encoding"):
        framing = "its last chunk"
    elif upstream.status_code in (204, 304) or upstream.status_code < 200:
        framing = f"a {upstream.status_code} (no body)"
    else:
        framing = f"its Content-Length ({upstream.header(b'content-length').strip() or '?'})"
    return f"upstream sent {count(extra, 'byte')} after the end of its body ({framing}): not forwarded, not recorded"


def _error_body(kind: str, message: str, status: int = 500, openai: bool = False) -> bytes:
    """The proxy's own error in the API's shape: Anthropic's, or OpenAI's for a request of an OpenAI client (its
    ``type`` the class, ``code`` naming what happened: the openai SDK's ``e.code``)."""
    text = f"inspector proxy: {message}"
    if openai:
        return openai_error_body("invalid_request_error" if status < 500 else "server_error", text, code=kind)
    return error_body(kind, text)


class ProxyApp(Closable):
    """The proxy as an ASGI app (``.app``). Run it with uvicorn (``serve.BackgroundServer`` / the CLI).

    ``max_connections``: upstream connections at once (one per open stream); past it a request gets 503 at once.
    ``connect_timeout`` / ``read_timeout``: seconds for upstream to accept the connection / between two of its reads
    (pings count; the first read is the response headers). ``faults``: live faults for every /messages stream
    (:mod:`inspector.net.livefaults`); ``fault_header``: honour ``x-inspector-fault`` per request (the header is then
    the proxy's and is not forwarded). ``batch_interval``: how long reads wait to be decoded and recorded (they are
    forwarded at once). ``on_warning``: called with a one-line message (e.g. the recording stopped)."""

    uvicorn_options: dict[str, Any]

    def __init__(
        self,
        upstream: str = DEFAULT_UPSTREAM,
        *,
        openai_upstream: str | None = None,
        record: str | Path | IO[bytes] | None = None,
        bus: O.ObservationBus | None = None,
        secrets: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        on_exchange: Callable[[ProxyExchange], object] | None = None,  # (its result is not used)
        transport: httpx2.AsyncBaseTransport | None = None,
        listen: str | None = None,
        source_info: dict[str, Any] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        faults: LiveFaultsSpec = None,
        fault_header: bool = False,
        batch_interval: float = 0.01,
        on_warning: Callable[[str], None] | None = None,
        history: int = DEFAULT_HISTORY,
        ssl_context: Any = None,
        max_body: int = DEFAULT_MAX_BODY,
        body_timeout: float = BODY_TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
        keep_alive: float = KEEP_ALIVE,
        max_clients: int | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if max_body < 1 or (max_clients is not None and max_clients < 1):
            raise ValueError("max_body and max_clients must be at least 1")
        self.max_body, self.body_timeout = max_body, body_timeout
        self.max_clients = max_clients_for() if max_clients is None else max_clients
        # the client gets upstream's date, not a second one of uvicorn's (server_header=False is net.server's
        # default: no server header of ours either); idle client connections are kept like the API does; slow
        # headers and connections past max_clients are cut (net/server.py)
        self.uvicorn_options = {
            "date_header": False,
            "timeout_keep_alive": keep_alive,
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "http": guarded_h11(header_timeout, self.max_clients),
            # no X-Forwarded-* rewriting of the client's address (the proxy never uses it): one ASGI layer less
            "proxy_headers": False,
        }
        self.upstream = upstream.rstrip("/")
        # where OpenAI-format requests go (``watch``: what OPENAI_BASE_URL held, with its /v1), None: to upstream too
        self.openai_upstream = openai_upstream.rstrip("/") if openai_upstream else None
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
        self.faults: LiveFaultSource | None = parse_live_faults(faults)
        self._header_live: dict[
            str, LiveFaultSource | None
        ] = {}  # x-inspector-fault value -> its live faults (_header_faults)
        self.fault_header = fault_header
        self.batch_interval = batch_interval
        # the ONE redaction point: every observation reaches the bus (the dashboard's and the recorder's) masked, also
        # a key echoed split across reads or deltas or \u-escaped (observe/redacting.py); keys learned late included.
        # A key in the upstream URL (``http://relay:KEY@host``) is a secret from the start (never forgotten)
        self._bus = bus if bus is not None else O.ObservationBus()
        self._redacting = RedactingPublisher(
            self._bus,
            [
                *(secrets or []),
                *credential_values([], self.upstream),
                *credential_values([], self.openai_upstream or ""),
            ],
        )
        self._forgetting = False  # the secrets passed MAX_SECRETS (said once)
        self.recorder: Recorder | None = None  # subscribed to the bus at the first exchange, or by open_recording()
        self.recording_error: str | None = None  # set when a write failed: the recording stopped there
        self.clients: list[httpx2.AsyncClient] = []
        self._ssl: Any = ssl_context  # upstream's TLS context (None: the SDK's, made when first needed)
        self._shard_active: list[int] = []
        # the upstream client of the forwarding path (inspector/net/upstream.py); httpx2 only with a transport of the
        # caller's or an HTTP proxy from the environment on the way upstream
        self._pool_of: dict[str, UpstreamPool] = {}  # upstream base -> its pool (``upstream`` may change while running)
        self._pools: list[UpstreamPool] = []  # every pool opened
        # the most recent exchanges (a ring: a long-running proxy must not grow with every request it forwards)
        self.exchanges: deque[ProxyExchange] = deque(maxlen=max(1, history))
        self._stop: _Shutdown | None = None  # see _stopping()
        self._urls: dict[tuple[str, bytes, bytes], str] = {}  # (upstream, raw path, query) -> upstream's URL
        self.active = 0  # upstream requests in flight (each holds one upstream connection)
        # turns, attempts and their observations (net/turns.py); it publishes only when somebody listens
        self.tracker = TurnTracker(
            None,
            clock=clock,
            t0=self.t0,
            source=self.source,
            detail=self._detail,
            batch_interval=batch_interval,
        )
        self.tracker.vouch = self._redacting.vouch
        # why the session ended, as a tool call still waiting for its result says it then (the watch session sets it)
        self.ended_why = "the session ended before a next request showed its result"
        self.on_close: Callable[[], None] | None = None  # publishes a watched session's end (WatchSession.run)
        self._listening()
        install_log_filter()

    # --- plumbing -------------------------------------------------------------------------------------------------
    @property
    def app(self) -> ProxyApp:
        return self

    def now(self) -> float:
        return self.clock() - self.t0

    def source(self) -> dict[str, Any]:
        """How the dashboard and the recording's header name this source (a key in the upstream URL masked)."""
        if self.source_info is not None:
            src = dict(self.source_info)
        else:
            src = {"type": "proxy", "upstream": self.upstream}
            if self.openai_upstream:
                src["openai_upstream"] = self.openai_upstream
            if self.listen:
                src["listen"] = self.listen
        masked: dict[str, Any] = redact(src, self.secrets)  # (redact gives a dict for a dict)
        return masked

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

    def _pool(self, base: str | None = None) -> UpstreamPool | None:
        """The upstream client of the forwarding path to ``base`` (default: upstream; inspector/net/upstream.py), or
        None when httpx2 must go: a transport of the caller's, or an HTTP proxy from the environment on the way."""
        base = self.upstream if base is None else base
        pool = self._pool_of.get(base)
        if pool is None:
            if self.transport is not None or not usable_for(base):
                return None
            if self._ssl is None and base.startswith("https:"):
                self._ssl = httpx2.create_ssl_context(trust_env=True)
            ssl_context = self._ssl
            pool = self._pool_of[base] = UpstreamPool(
                base,
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

    @property
    def turns(self) -> int:
        """Turns seen so far."""
        return self.tracker.turns

    @property
    def seen_tools(self) -> dict[tuple[str, str], SeenToolUse]:
        return self.tracker.seen_tools

    def _detail(self) -> bool:
        """Somebody needs more than the turn numbering: the bus, the recording or the exchange lines (which show the
        inferred tool calls). Else nothing is parsed or decoded."""
        return self.tracker.publish is not None or self.on_exchange is not None

    def _listening(self) -> None:
        """Publish only when somebody subscribes: the caller's bus, or a recording that still writes."""
        alive = self.recorder is not None and self.recording_error is None
        self.tracker.publish = self._redacting.publish if (self.bus is not None or alive) else None
        self.tracker.steps = self.bus is not None  # the stream's events and blocks: for a watcher, not a recording

    @property
    def secrets(self) -> list[str]:
        """The secrets the proxy masks (its redacting publisher's, kept current in place; longest first)."""
        return self._redacting.keys.secrets

    def _learn(self, found: list[str], in_use: list[str]) -> None:
        """Keys seen in a request: masked in everything published from now on (the recording included). Seen again,
        a key is the last one forgotten, here and process-wide (``core.redaction.SecretSet``: at most MAX_SECRETS),
        and never while its exchange lasts (``in_use``, released when it ends: a stream that echoes the key may hold
        its beginning back until its end arrives)."""
        if not found:
            return
        in_use += found  # (first: a release of what was never added in use is a no-op)
        learn(found, use=True)
        keys = self._redacting.keys
        keys.add(found, use=True)
        if keys.forgotten and not self._forgetting:
            self._forgetting = True
            warning = (
                f"the clients sent more than {keys.limit} distinct credentials: the proxy masks the {keys.limit} seen"
                " most recently (older ones are forgotten)"
            )
            log.warning("inspector proxy: %s", warning)
            if self.on_warning is not None:
                with contextlib.suppress(Exception):
                    self.on_warning(warning)

    def open_recording(self) -> Recorder | None:
        """Open the recording now (the CLI does, before serving, so an unwritable path is a usage error); raises
        OSError. Keys learned later are masked by the proxy's redacting publisher, before the recorder sees them."""
        if self.record_path is None or self.recording_error is not None:
            return None
        if self.recorder is None:
            self.recorder = Recorder(
                self.record_path, source=self.source(), batched=True, on_error=self._recording_failed
            )
            self._bus.subscribe(self.recorder)
            self._listening()
        return self.recorder

    def _open_recording_once(self) -> None:
        """At an exchange: the recording opens if it is not open yet (a failure is a warning; forwarding goes on)."""
        if self.recorder is None and self.record_path is not None and self.recording_error is None:
            try:
                self.open_recording()
            except (OSError, ValueError) as e:
                what = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
                self._recording_failed(f"recording stopped: cannot write {self._record_name()}: {what}")

    def _recording_failed(self, error: str) -> None:
        """The recorder stopped (disk full, file too large, I/O error): one warning; forwarding goes on."""
        if self.recording_error is not None:
            return
        self.recording_error = f"{error}; still forwarding"
        log.warning("inspector proxy: %s", self.recording_error)
        self._listening()
        if self.on_warning is not None:
            with contextlib.suppress(Exception):
                self.on_warning(self.recording_error)

    def _record_name(self) -> str:
        return str(self.record_path) if isinstance(self.record_path, (str, Path)) else "the recording"

    def close(self) -> None:
        """Publish what is still pending and close the recording (creating it, header only, if nothing passed).
        ``on_close`` (once) publishes the last observations, a watched session's end, before the recording closes."""
        self.tracker.drain()
        self.tracker.session_ended(self.ended_why)
        self._redacting.close()  # what attempts that never ended still hold
        self._open_recording_once()
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close()
        if self.recorder is not None:
            self.recorder.close()

    async def aclose(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None and not stop.task.done():
            stop.task.cancel()
        clients, self.clients, self.client, self._shard_active = self.clients, [], None, []
        pools, self._pools = self._pools, []
        self._pool_of.clear()
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
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.closing()
                    # ready before the first request (its TLS context takes a while)
                    with contextlib.suppress(Exception):
                        if self._pool() is None and not self.clients:
                            self._new_shard()
                        if self.openai_upstream is not None:
                            self._pool(self.openai_upstream)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        in_use: list[str] = []  # the exchange's credentials: never forgotten while it lasts (_learn)
        try:
            await self._handle(scope, receive, send, in_use)
        finally:
            if in_use:
                self._redacting.keys.release(in_use)
                unlearn_use(in_use)

    async def _read_body(self, receive: Receive, headers: list[tuple[str, str]]) -> bytes:
        """The request body, counted as it arrives (like ``serve``): a content-length past ``max_body``, or the
        bytes read passing it, is a 413 at once (nothing more is read or kept); a body that takes more than
        ``body_timeout`` seconds is a 408. A body still coming when the proxy begins to close (or a request that
        comes then) is a 503 at once: uvicorn would otherwise wait for it, then cancel it at the end of its grace
        period and print a traceback ('Exception in ASGI application')."""
        too_large = _Refused(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        for k, v in headers:
            if k.lower() == "content-length" and v.strip().isdigit() and int(v) > self.max_body:
                raise too_large
        chunks: list[bytes] = []
        size = 0
        stop = StopOnClose()  # the proxy begins to close: the read is cancelled (one set entry per request)
        shutdown = self._stopping()
        shutdown.watch(stop)
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ConnectionDrop("client went away before sending its body")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        raise too_large
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _Refused(408, "timeout_error", f"request body not received within {self.body_timeout:g}s") from None
        except asyncio.CancelledError:
            if not stop.ours():
                raise  # (cancelled by someone else too: uvicorn, the loop's end)
            raise _Refused(503, "overloaded_error", "shutting down") from None
        finally:
            shutdown.unwatch(stop)

    async def _refuse(self, send: Send, ex: ProxyExchange, refused: _Refused, *, openai: bool = False) -> None:
        """Answer a request the proxy does not forward (the API's error JSON; the connection closes: the rest of
        the request may be unread) and keep its exchange."""
        # (a refused target is quoted: a key the client sent never comes back in it, nor reaches the exchange line)
        message = mask_text(refused.message, self.secrets) if self.secrets else refused.message
        ex.status, ex.end, ex.reason = refused.status, "error", message
        body = _error_body(refused.etype, message, refused.status, openai)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": refused.status, "headers": headers})
        ex.bytes = len(body)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _reply_error(
        self,
        send: Send,
        status: int,
        kind: str,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
        *,
        openai: bool = False,
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *(headers or [])],
            }
        )
        # a key the client sent never comes back in an error's text (upstream's may quote it)
        masked = mask_text(message, self.secrets) if self.secrets else message
        body = _error_body(kind, masked, status, openai)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def _route(self, raw_path: bytes, headers: list[tuple[str, str]]) -> tuple[str, bytes]:
        """Where a request goes: (upstream base, the path to append to it). With an OpenAI upstream (``watch``: the
        command's OPENAI_BASE_URL, with its ``/v1``), a request under ``/v1/`` that is not the Messages API's
        (``/v1/messages``, ``/v1/complete``, or any request with an ``anthropic-version`` header, which the
        Anthropic SDKs always send) goes there, its ``/v1`` left out (it is in that base); the rest to upstream."""
        openai = self.openai_upstream
        if (
            openai is None
            or not (raw_path == b"/v1" or raw_path.startswith(b"/v1/"))
            or raw_path.startswith((b"/v1/messages", b"/v1/complete"))
            or any(k.lower() == "anthropic-version" for k, _ in headers)
        ):
            return self.upstream, raw_path
        return openai, raw_path[3:] or b"/"

    def _upstream_url(self, raw_path: bytes, query: bytes, base: str | None = None) -> str:
        """Upstream's URL for a request-target (see :meth:`_build_url`; ``base``: default ``upstream``); the last
        ``URL_MEMO`` built are kept (an agent sends the same few targets again and again: two URL parses per request
        were ~5% of the proxy's CPU under a burst)."""
        base = self.upstream if base is None else base
        key = (base, raw_path, query)
        url = self._urls.get(key)
        if url is None:
            url = self._build_url(raw_path, query, base)  # a target that cannot be forwarded raises: not kept
            if len(self._urls) >= URL_MEMO:
                self._urls.clear()
            self._urls[key] = url
        return url

    def _build_url(self, raw_path: bytes, query: bytes, upstream: str | None = None) -> str:
        """Upstream's URL for a request-target, built from parsed components: upstream's scheme, host and port
        stay upstream's whatever the target holds (its path prefix, then the target's path and query)."""
        try:
            base = httpx2.URL(self.upstream if upstream is None else upstream)
            prefix = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
            full = raw_path + (b"?" + query if query else b"")
            url = base.copy_with(raw_path=prefix + full)
        except (httpx2.InvalidURL, ValueError, TypeError) as e:
            raise _Refused(400, "invalid_request_error", f"cannot forward this request-target: {e}") from None
        if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):  # never, by construction
            raise _Refused(400, "invalid_request_error", "the request-target would change upstream's host")
        return str(url)

    def _stopping(self) -> _Shutdown:
        """Wakes the exchanges when the proxy begins to close (``closing()`` is set): one task for all of them."""
        stop = self._stop
        if stop is None or stop.task.get_loop() is not asyncio.get_running_loop():
            stop = self._stop = _Shutdown(asyncio.ensure_future(self.closing().wait()))
        return stop

    def _busy_message(self) -> str:
        return f"all {self.max_connections} upstream connections are busy (--max-connections)"

    async def _handle(self, scope: Scope, receive: Receive, send: Send, in_use: list[str]) -> None:
        t_req_clock = self.clock()
        t_req = t_req_clock - self.t0
        method = scope["method"]
        path = scope.get("path", "/")
        raw_path = scope.get("raw_path") or path.encode()
        query = scope.get("query_string") or b""
        in_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        base, up_path = self._route(raw_path, in_headers)  # (upstream, or the OpenAI upstream: _route)
        # the proxy's own errors in the client's API's shape: a request routed to the OpenAI upstream, or a Chat
        # Completions / Responses call
        openai = family_from_path(path) in ("openai_chat", "openai_responses") or (
            base == self.openai_upstream and base != self.upstream
        )
        target = up_path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")
        found = credential_values(in_headers)
        self._learn(found + [v for v in _url_keys(base) if v not in found], in_use)
        self._open_recording_once()
        try:
            problem = target_problem(raw_path)
            if problem is not None:
                raise _Refused(400, "invalid_request_error", problem)
            url = self._upstream_url(up_path, query, base)
            body = await self._read_body(receive, in_headers)
        except _Refused as refused:
            ex = ProxyExchange(method, path, t_request=t_req)
            try:
                await self._refuse(send, ex, refused, openai=openai)
            finally:
                ex.end_s = self.clock() - t_req_clock
                self._finish(ex)
            return
        self._learn(list(_url_keys(url)), in_use)  # the headers' keys were learned above: the URL's (a ?key=...)
        faults: LiveFaultSource | str | None = self.faults
        fwd = []
        listed = _connection_options(in_headers)
        hop = HOP_BY_HOP | listed if listed else HOP_BY_HOP
        for k, v in in_headers:
            lk = k.lower()
            if lk in hop:
                continue
            if self.fault_header and lk == FAULT_HEADER:
                faults = self._header_faults(v)
                continue
            fwd.append((k, v))

        ex = ProxyExchange(method, path, t_request=t_req)
        # its conversation (net/conversations.py): a turn (or a turn's next attempt), or a side request
        keys = self._redacting.keys.matcher if self.tracker.publish is not None else None
        assignment, parsed = await self.tracker.assign_soon(ex, method, path, in_headers, body, keys)
        is_turn = assignment.side is None  # a streamed Messages, Chat Completions or Responses call
        track: Track | None = None
        sending: _Sending | None = None
        holds_connection = False
        shard = 0
        watchers: _Watchers | None = None
        concluded = False

        def conclude() -> None:
            """The exchange's end, once: its attempt's end (the retry rule's input) and its line. Called as soon as
            the client has the response's last byte (or the exchange failed), before the proxy awaits anything
            else: a client that sends its next request at once (the same body: a new turn, or a retry) is assigned
            after this attempt's end, not while the proxy is still closing the exchange's tasks."""
            nonlocal concluded
            if concluded:
                return
            concluded = True
            if ex.end is None:
                ex.end, ex.reason = "error", ex.reason or "the proxy failed"
            if ex.end_s is None:
                ex.end_s = self.clock() - t_req_clock
            if track is not None:
                if not track.requested:
                    with contextlib.suppress(Exception):  # it failed once already: the end line still goes out
                        self.tracker.begin(track, method, url, in_headers, body)
                self.tracker.end(track)
            self._finish(ex)

        try:
            if isinstance(faults, str):  # a bad x-inspector-fault header: the request's error, not upstream's
                ex.status, ex.end, ex.reason = 400, "error", faults
                await self._reply_error(send, 400, "invalid_request_error", faults, openai=openai)
                return
            error: BaseException | None = None
            injected = None
            if is_turn:
                track = self.tracker.new_track(ex, assignment, t_req, parsed)
                injected = faults.http_error(track.attempt, track.family, track.turn) if faults else None
            if injected is not None:  # a live http_429 / http_529: answered here, upstream never sees it
                assert track is not None
                ex.fault = injected.fault
                self.tracker.begin(track, method, url, in_headers, body)
                await self._answer_injected(ex, track, injected, send, t_req_clock)
                return
            if self.active >= self.max_connections:
                if track is not None:
                    self.tracker.begin(track, method, url, in_headers, body)
                reason = self._busy_message()
                ex.status, ex.end, ex.reason = 503, "error", reason
                await self._reply_error(send, 503, "overloaded_error", reason, openai=openai)
                ex.end_s = self.clock() - t_req_clock
                return
            self.active += 1
            holds_connection = True
            try:
                pool = self._pool(base)
                if pool is not None:
                    shard = -1
                    sending = pool.submit(method, target, fwd, body)  # (written now on a kept-alive connection)
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
                self.tracker.begin(track, method, url, in_headers, body)
            upstream: httpx2.Response | UpstreamResponse | None = None
            if sending is not None:
                watchers = _Watchers(receive, self._stopping())
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
                    await self._reply_error(
                        send, 503, "overloaded_error", "shutting down", [(b"connection", b"close")], openai=openai
                    )
                    return
            if error is not None or upstream is None or watchers is None:
                status, kind, reason = self._upstream_error(error, base)
                ex.status, ex.end, ex.reason = status, "error", reason
                await self._reply_error(send, status, kind, reason, openai=openai)
                ex.end_s = self.clock() - t_req_clock
                return
            try:
                await self._relay(ex, track, upstream, watchers, send, t_req_clock, faults, conclude)
            finally:
                with contextlib.suppress(Exception):
                    await upstream.aclose()
        except asyncio.CancelledError:
            ex.end, ex.reason = "dropped", "proxy shutting down"
            raise
        finally:
            conclude()  # before any await: see conclude()
            if watchers is not None:
                await watchers.close()
            if sending is not None:
                await _abandon(sending)
            if holds_connection:
                self.active -= 1
                if 0 <= shard < len(self._shard_active):
                    self._shard_active[shard] -= 1

    async def _await_headers(self, sending: _Sending, watchers: _Watchers) -> str:
        """Wait for upstream's response headers while watching the client and the proxy's shutdown: "headers" (or
        an error: the task is done), "disconnected" or "closing"."""
        return await watchers.wait(sending, "headers")

    def _upstream_error(self, error: BaseException | None, base: str | None = None) -> tuple[int, str, str]:
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
        via = env_proxy(base or self.upstream) if self.transport is None and error is not None else None
        if via is not None and isinstance(error, httpx2.ConnectError | httpx2.ProxyError):
            return 502, "api_error", f"the HTTP proxy {via} failed: {type(error).__name__}: {error_text(error)}"
        return 502, "api_error", f"upstream unreachable: {type(error).__name__}: {error_text(error) if error else ''}"

    def _header_faults(self, value: str) -> LiveFaultSource | str | None:
        """The live faults of an ``x-inspector-fault`` header, or the error message (a str) when it is invalid."""
        known = self._header_live.get(value)  # the same header keeps its faults' state (an @once one stays spent)
        if known is not None:
            return known
        try:
            faults = parse_live_faults(value)
        except InspectorError as e:
            return f"x-inspector-fault: {e}"
        if len(self._header_live) >= 256:  # bounded: a client varying the header cannot grow it
            self._header_live.pop(next(iter(self._header_live)))
        self._header_live[value] = faults
        return faults

    async def _answer_injected(
        self, ex: ProxyExchange, track: Track, injected: InjectedError, send: Send, t_req_clock: float
    ) -> None:
        ex.status = injected.status
        ex.headers_s = self.clock() - t_req_clock
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in injected.headers]
        self.tracker.response(track, ex.status, injected.headers, ex.headers_s)
        ctype = next((v for k, v in injected.headers if k.lower() == "content-type"), "application/json")
        track.set_response(ctype.lower(), "", injected.status, False)  # (its body says why the attempt failed)
        self.tracker.fault(track, injected.fault, 0)
        await send({"type": "http.response.start", "status": injected.status, "headers": headers})
        await send({"type": "http.response.body", "body": injected.body, "more_body": False})
        t = self.clock() - t_req_clock
        ex.first_byte_s, ex.reads, ex.bytes = t, 1, len(injected.body)
        self.tracker.read(track, t, injected.body)
        ex.end, ex.reason, ex.end_s = "complete", None, t

    async def _relay(
        self,
        ex: ProxyExchange,
        track: Track | None,
        upstream: httpx2.Response | UpstreamResponse,
        watchers: _Watchers,
        send: Send,
        t_req_clock: float,
        faults: LiveFaultSource | None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        """Stream upstream's response to the client; ``on_end`` is called once the client has its last byte (or the
        stream ended otherwise), before anything else is awaited."""
        ex.status = upstream.status_code
        t_head = upstream.t_head if isinstance(upstream, UpstreamResponse) else self.clock()
        ex.headers_s = t_head - t_req_clock
        if isinstance(upstream, UpstreamResponse):
            drop = _hop_by_hop_b(upstream.raw_headers)
            raw_headers = [(k, v) for k, v in upstream.raw_headers if k.lower() not in drop]
            ctype, cenc = upstream.header(b"content-type").lower(), upstream.header(b"content-encoding")
        else:
            drop = _hop_by_hop_b(upstream.headers.raw)
            raw_headers = [(k, v) for k, v in upstream.headers.raw if k.lower() not in drop]
            ctype, cenc = upstream.headers.get("content-type", "").lower(), upstream.headers.get("content-encoding", "")
        sse = "text/event-stream" in ctype
        live = (
            faults.stream(track.attempt, track.family, track.turn)
            if (faults and track is not None and sse and ex.status == 200)
            else None
        )
        if track is not None:
            track.set_response(ctype, cenc, ex.status, self._detail())
            if live is not None and track.decoder is not None and track.decoder.encoding not in ("", "identity"):
                live = None  # an encoded stream cannot be rewritten event by event: forwarded as is
                self.tracker.note(track, "content-encoded stream: live faults not applied")
            if self.tracker.publish is not None:
                str_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers]
                self.tracker.response(track, ex.status, str_headers, ex.headers_s)
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": raw_headers})
        state: dict[str, Any] = {"end": "complete", "reason": None}
        clock = self.clock
        queue = self.tracker.read

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

        async def forward(batch: list[tuple[float, bytes]]) -> None:
            data = batch[0][1] if len(batch) == 1 else b"".join([d for _, d in batch])
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if ex.first_byte_s is None:
                ex.first_byte_s = batch[0][0] - t_req_clock
            ex.reads += len(batch)
            ex.bytes += len(data)
            if track is not None:
                for t, d in batch:
                    queue(track, t - t_req_clock, d)

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
                    await forward(batch)
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
            await run_live(
                live,
                upstream,
                emit,
                state,
                lambda fault, at: self.tracker.fault(track, fault, at),
                lambda text: self.tracker.note(track, text),
            )

        if live is not None:
            task = asyncio.ensure_future(pump_faulted())
        elif isinstance(upstream, UpstreamResponse):
            if upstream.has_data:  # what came with the headers goes out now, not a hop later from the pump's task
                await forward(upstream.take())
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
            # bytes past the framing: not forwarded, never dropped without a word (the proxy's own client counts them)
            if isinstance(upstream, UpstreamResponse) and upstream.extra and track is not None:
                self.tracker.note(track, _overrun_note(upstream, upstream.extra))
        if on_end is not None:
            on_end()
        if ex.end == "dropped":
            raise ConnectionDrop(ex.reason or "upstream dropped")

    def _finish(self, ex: ProxyExchange) -> None:
        self.exchanges.append(ex)
        if ex.turn is None:
            self.tracker.exchange(ex)
        self._note(ex)


def format_exchange(ex: ProxyExchange, conversations: bool = False) -> str:
    """One line (and its inferred tool calls) for an exchange; ``conversations``: name the conversation (when the
    proxy has seen more than one), as ``[c2] turn 1 (#5) attempt 1`` (#: the proxy's global turn number)."""
    if ex.turn is not None and conversations and ex.conversation is not None:
        ct = ex.conversation_turn if ex.conversation_turn is not None else ex.turn
        where = f"[{ex.conversation}] turn {ct + 1} (#{ex.turn + 1}) attempt {(ex.attempt or 0) + 1} "
    elif ex.turn is not None:
        where = f"turn {ex.turn + 1} attempt {(ex.attempt or 0) + 1} "
    elif conversations and ex.side:
        where = f"[{ex.conversation or 'other requests'}] {ex.side}: "
    else:
        where = ""
    ms = milliseconds
    line = (
        f"{where}{ex.method} {ex.path} -> {ex.status} {ex.end}: {count(ex.reads, 'read')}, {count(ex.bytes, 'byte')}, "
        f"headers {ms(ex.headers_s)}, first byte {ms(ex.first_byte_s)}, total {ms(ex.end_s)}"
    )
    if ex.outcome:
        line += f", {ex.outcome}"
    if ex.fault:
        line += f", injected {ex.fault}"
    if ex.reason and ex.end != "complete" and not (ex.fault and ex.reason.startswith(f"injected {ex.fault}")):
        line += f" ({ex.reason})"  # (an injected fault's own reason says it again: said once)
    for inf in ex.inferred:
        if inf.status == "result":
            # the turn that streamed the call: its conversation's previous turn (the only one results are matched
            # to), named as the exchange lines name turns; the bare global number under `[c3] turn 2 (#9)` read
            # `(turn 3)`, a turn c3 never had
            from_turn = f"turn {(inf.from_turn or 0) + 1}"
            if ex.turn is not None and conversations and ex.conversation is not None and ex.conversation_turn:
                from_turn = f"turn {ex.conversation_turn} (#{(inf.from_turn or 0) + 1})"
            line += (
                f"\n  tool {inf.name} {inf.tool_use_id} ({from_turn}): result"
                f"{' is_error' if inf.is_error else ''} {ms(inf.since_block_stop)} after its block stop"
            )
        else:
            line += f"\n  tool {inf.name or '?'} {inf.tool_use_id}: {inf.status}"
            if inf.reason:
                line += f" ({inf.reason})"
    return line

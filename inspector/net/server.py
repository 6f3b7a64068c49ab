"""Server plumbing shared by `serve`, `proxy` and the watched sessions: binding loopback sockets, running uvicorn
in the foreground or a background thread, racing a response against the client's disconnect and the server's
shutdown, and keeping planned connection drops out of the error log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from inspector.core import signals

if TYPE_CHECKING:  # uvicorn and starlette are imported when a server is built (`inspector --help` stays fast)
    import uvicorn
    from starlette.types import Receive

log = logging.getLogger("inspector.net")


class ConnectionDrop(Exception):
    """Raised inside a response to break the connection (uvicorn closes the transport: the client sees an
    incomplete chunked body). Filtered out of uvicorn's error log."""


# lines a client can make the server log in a loop: uvicorn's for each unreadable request, asyncio's for writes to a
# connection whose client left (a stream goes on until its end is noticed)
_NOISY = frozenset({"Invalid HTTP request received.", "socket.send() raised exception."})


class _DropLogFilter(logging.Filter):
    """Planned drops are not logged; the lines a client can cause in a loop (``_NOISY``) at most once per
    ``ACCEPT_LOG_EVERY`` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.last_invalid: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if _is_drop(exc):
            return False
        if record.msg in _NOISY:
            import time

            now = time.monotonic()
            if self.last_invalid is not None and now - self.last_invalid < ACCEPT_LOG_EVERY:
                return False
            self.last_invalid = now
        return True


def _is_drop(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    if isinstance(exc, ConnectionDrop):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_drop(e) for e in exc.exceptions)
    return False


_FILTER = _DropLogFilter()


def install_log_filter() -> None:
    """Keep planned connection drops out of uvicorn's error log (idempotent)."""
    for name in ("uvicorn.error", "asyncio"):
        lg = logging.getLogger(name)
        if _FILTER not in lg.filters:
            lg.addFilter(_FILTER)


class StopOnClose:
    """Cancels the task that made it when called: a server's body read calls it once the server begins to close
    (the proxy's and serve's), so that uvicorn does not wait its grace period for a body that is still coming, then
    cancel the read and print a traceback. ``ours()``, in the read's ``except CancelledError``: the cancel was this
    one alone (not uvicorn's too, nor the loop's end), so the read answers 503 "shutting down" instead."""

    __slots__ = ("task", "stopped")

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.stopped = False

    def __call__(self, _: object = None) -> None:
        if self.task is not None and not self.stopped:
            self.stopped = True
            self.task.cancel()

    def ours(self) -> bool:
        return self.stopped and self.task is not None and self.task.uncancel() == 0


class Closable:
    """Shutdown signalling shared by ServeApp and ProxyApp: responses race ``closing()`` (an asyncio.Event bound to
    the server's loop at first use) and ``begin_close()`` sets it from any thread, so hanging and in-progress
    streams end (connection dropped) before uvicorn stops."""

    _closing: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def closing(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
            self._loop = asyncio.get_running_loop()
        return self._closing

    def begin_close(self) -> None:
        """End hanging and in-progress streams: call before stopping the server. Thread-safe; a no-op before the
        server ran or after its loop closed."""
        loop, ev = self._loop, self._closing
        if loop is None or ev is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(ev.set)


async def _watch_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _race(main: Callable[[], Any], receive: Receive, closing: asyncio.Event) -> str:
    """Run ``main()`` until it finishes ("done"), the client disconnects ("disconnected") or the server closes
    ("closing"). Exceptions of ``main`` propagate."""
    task = asyncio.ensure_future(main())
    watch = asyncio.ensure_future(_watch_disconnect(receive))
    stop = asyncio.ensure_future(closing.wait())
    try:
        done, _ = await asyncio.wait({task, watch, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, watch, stop):
            if not t.done():
                t.cancel()
        for t in (watch, stop):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    if task in done:
        task.result()  # re-raises
        return "done"
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return "disconnected" if watch in done else "closing"


# =====================================================================================================================
# Running uvicorn: in this thread (the CLI) or in a background thread (tests, embedding)
# =====================================================================================================================


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to host:port (port 0: ephemeral)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only when sock.proto == IPPROTO_TCP, and
    # without it Nagle + delayed ACK hold a read back ~40 ms after the response headers
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def base_url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def uvicorn_options(owner: Any) -> dict[str, Any]:
    """The uvicorn settings an app asks for itself: its ``uvicorn_options`` attribute (a dict), if it has one."""
    options = getattr(owner, "uvicorn_options", None)
    return dict(options) if isinstance(options, dict) else {}


def _uvicorn_server(
    asgi_app: Any,
    *,
    log_level: str = "warning",
    access_log: bool = False,
    ready: threading.Event | None = None,
    options: dict[str, Any] | None = None,
    on_ready: Callable[[], None] | None = None,
    signals: bool = True,
) -> uvicorn.Server:
    """A uvicorn server for ``asgi_app``. ``options`` are extra ``uvicorn.Config`` keywords a server chooses for
    itself (e.g. the proxy's ``date_header=False``; ``timeout_keep_alive``; ``limit_concurrency``). ``signals=False``:
    serve() leaves SIGINT and SIGTERM to the handlers in place (uvicorn's own, installed while it serves on the main
    thread, would stop the server at once, its open streams cut, before the process's owner heard of it)."""
    import uvicorn

    class _Server(uvicorn.Server):
        if not signals:

            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            quiet_accept_errors(asyncio.get_running_loop())
            await super().startup(sockets=sockets)
            if self.started:
                if on_ready is not None:  # the socket is listening: only now may its address be announced
                    on_ready()
                if ready is not None:
                    ready.set()

    settings: dict[str, Any] = {
        "log_level": log_level,
        "access_log": access_log,
        "server_header": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 2,
        "http": "h11",
        "ws": "none",
    }
    settings.update(options or {})  # the app's own choices win (e.g. http=guarded_h11(...))
    config = uvicorn.Config(asgi_app, **settings)
    return _Server(config)


ACCEPT_LOG_EVERY = 10.0  # seconds between two log lines about refused accepts or shed connections
SHED_GRACE = 1.0  # seconds a shed connection may take to read its 503 before it is closed
SHED_BODY = (
    b'{"type":"error","error":{"type":"overloaded_error","message":"inspector: too many open connections'
    b' (--max-clients); try again later"}}'
)
SHED_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: " + str(len(SHED_BODY)).encode() + b"\r\n\r\n" + SHED_BODY
)


class RateLimitedLog:
    """At most one log line per ``every`` seconds (on ``clock``); the lines skipped meanwhile are counted into the
    next one."""

    def __init__(self, every: float = ACCEPT_LOG_EVERY, clock: Callable[[], float] | None = None) -> None:
        import time

        self.every = every
        self.clock = clock or time.monotonic
        self.last: float | None = None
        self.skipped = 0

    def __call__(self, message: str) -> bool:
        """Log ``message`` (a warning) unless one was logged less than ``every`` seconds ago; True when logged."""
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            self.skipped += 1
            return False
        more = f" ({self.skipped} more since the last such line)" if self.skipped else ""
        self.last, self.skipped = now, 0
        log.warning("%s%s", message, more)
        return True


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio logs a full traceback each time ``accept()`` fails for want of descriptors (EMFILE: about 150 MB of
    stderr in 15 s under a flood); here that is one line at most every ``ACCEPT_LOG_EVERY`` seconds. asyncio still
    retries accepting a second later by itself. Every other error goes to the handler that was set before."""
    previous = loop.get_exception_handler()
    say = RateLimitedLog(clock=loop.time)

    def handler(lp: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            exc = context.get("exception")
            why = getattr(exc, "strerror", None) or type(exc).__name__
            say(f"inspector: cannot accept connections ({why}): too many open files; retrying every second")
            return
        if previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    loop.set_exception_handler(handler)
    _no_retries_after_close(loop)


def _no_retries_after_close(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio (the selector loop of Python 3.11) answers an ``accept()`` failed for want of descriptors by accepting
    again a second later, and schedules that retry once per failed ``accept()`` of the same wake-up, up to the
    server's backlog (uvicorn's: 2,048) rather than once: stopped in that second (SIGTERM while a flood held every
    descriptor), the server has closed its socket, and each retry then failed on it ('ValueError: Invalid file
    descriptor: -1'), about 2,000 tracebacks on stderr (42,000 lines). A retry for a socket closed since does
    nothing here."""
    start = getattr(loop, "_start_serving", None)
    if not callable(start) or getattr(start, "guarded", False):
        return

    def start_serving(protocol_factory: Any, sock: socket.socket, *args: Any, **kwargs: Any) -> Any:
        if sock.fileno() == -1:
            return None  # (the server closed it: nothing to accept on)
        return start(protocol_factory, sock, *args, **kwargs)

    start_serving.guarded = True  # type: ignore[attr-defined]
    setattr(loop, "_start_serving", start_serving)  # noqa: B010 (a private method of the loop, for this loop only)


def guarded_h11(header_timeout: float, max_clients: int | None = None) -> type:
    """uvicorn's h11 protocol with two more timeouts (both on the loop's clock, so a virtual clock drives them):

    - a new connection that sends nothing is closed after ``timeout_keep_alive``, like an idle keep-alive one
      (uvicorn arms that timer only after a first response);
    - once the first byte of a request arrives, its headers must be complete within ``header_timeout`` seconds, or
      the connection is closed (slowloris: uvicorn cancels the keep-alive timer on every byte and has no header
      timeout of its own). The size of incomplete headers is bounded by ``h11_max_incomplete_event_size``.

    ``max_clients``: the most client connections open at once. A connection past it is answered a 503 (JSON, the
    API's ``overloaded_error``, ``connection: close``) at once, without reading its request, and closed: a flood of
    idle connections cannot take every descriptor of the process. One log line per ``ACCEPT_LOG_EVERY`` seconds
    says so."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    shed_log = RateLimitedLog()

    class GuardedH11Protocol(H11Protocol):
        _header_deadline: asyncio.TimerHandle | None = None
        _shed: asyncio.TimerHandle | None = None

        # uvicorn's H11Protocol narrows the argument to a Transport likewise (a TCP server's transport is one)
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if max_clients is not None and len(self.connections) >= max_clients:
                self._shed_connection(transport)
                return
            super().connection_made(transport)
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        def _shed_connection(self, transport: asyncio.Transport) -> None:
            """Answer 503 and close: at once when the client reads it and closes, else after ``SHED_GRACE``
            seconds (closing with its unread request still queued could reset the connection before the client
            read the answer)."""
            self.transport = transport
            shed_log(f"inspector: {max_clients} client connections open (--max-clients): answering 503 to new ones")
            transport.write(SHED_RESPONSE)
            if transport.can_write_eof():
                transport.write_eof()
            self._shed = self.loop.call_later(SHED_GRACE, transport.close)

        def data_received(self, data: bytes) -> None:
            if self._shed is not None:  # a shed connection: its request is read and dropped
                return
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self._header_deadline is None:
                self._header_deadline = self.loop.call_later(header_timeout, self._headers_too_slow)
            super().data_received(data)
            if self._header_deadline is not None and self.cycle is not None and not self.cycle.response_complete:
                self._header_deadline.cancel()  # a request's headers are in
                self._header_deadline = None

        def _headers_too_slow(self) -> None:
            self._header_deadline = None
            if not self.transport.is_closing():
                log.info("closing a connection whose request headers took more than %gs", header_timeout)
                self.transport.close()

        def eof_received(self) -> None:
            if self._shed is not None:
                self.transport.close()
                return
            super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._shed is not None:
                self._shed.cancel()
                return
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None
            super().connection_lost(exc)

    return GuardedH11Protocol


class BackgroundServer:
    """Run an ASGI app with uvicorn in a background thread (its own event loop), on host:port (0 = ephemeral).

        with BackgroundServer(make_app(speed=math.inf)) as srv:
            client = AsyncAnthropic(base_url=srv.base_url, ...)

    ``app`` may be a :class:`ServeApp`, a proxy app (anything with ``.app`` and maybe ``begin_close()``) or an
    ASGI callable. ``loop_factory`` makes the server's event loop (e.g. one with a virtual clock, for tests)."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        access_log: bool = False,
        start_timeout: float = 15.0,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self.owner = app
        self.loop_factory = loop_factory
        self.asgi = getattr(app, "app", app)
        self.host, self.port = host, port
        self.log_level, self.access_log = log_level, access_log
        self.start_timeout = start_timeout
        self.sock: socket.socket | None = None
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        assert self.sock is not None, "not started"
        return base_url_of(self.sock)

    @property
    def address(self) -> tuple[str, int]:
        assert self.sock is not None, "not started"
        host, port = self.sock.getsockname()[:2]
        return host, port

    def start(self) -> BackgroundServer:
        self.sock = bind_socket(self.host, self.port)
        server = self.server = _uvicorn_server(
            self.asgi,
            log_level=self.log_level,
            access_log=self.access_log,
            ready=self._ready,
            options=uvicorn_options(self.owner),
        )
        sock = self.sock

        def run() -> None:
            try:
                with asyncio.Runner(loop_factory=self.loop_factory) as runner:
                    runner.run(server.serve(sockets=[sock]))
            except BaseException as e:  # noqa: BLE001 (any end of the server thread is handed to its starter)
                self.error = e
            finally:
                self._ready.set()

        self.thread = threading.Thread(target=run, name=f"uvicorn-{self.base_url}", daemon=True)
        self.thread.start()
        if not self._ready.wait(self.start_timeout) or self.error is not None or not server.started:
            self.stop()
            raise RuntimeError(f"server did not start: {self.error!r}")
        return self

    def stop(self) -> None:
        begin_close = getattr(self.owner, "begin_close", None)
        if callable(begin_close):
            begin_close()
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=15)
            self.thread = None
        if self.sock is not None:
            self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_foreground(
    owner: Any,
    sock: socket.socket,
    *,
    log_level: str = "warning",
    access_log: bool = False,
    on_ready: Callable[[], None] | None = None,
) -> int | None:
    """Serve until Ctrl-C / SIGTERM (uvicorn's signal handling) or SIGHUP on an already bound socket. ``on_ready`` is
    called once the socket listens (e.g. to print the address a client may connect to at once).

    SIGHUP (the terminal closed) stops it as SIGTERM does: uvicorn handles only SIGINT and SIGTERM, and SIGHUP's
    default action killed the process where it was, the recording's open attempts left without their ``end`` line.

    Returns the signal (SIGTERM or SIGHUP) that stopped the server, None when nothing did. uvicorn raises the signals
    it handled again as serve() ends, which ended the process there, before the caller's own cleanup (``proxy
    --otel``'s exporter never flushed): the caller does its cleanup, then :func:`end_by_signal` ends the process as a
    shell reports a process that signal killed (128 + N). Ctrl-C still raises KeyboardInterrupt once stopped."""
    server = _uvicorn_server(
        getattr(owner, "app", owner),
        log_level=log_level,
        access_log=access_log,
        options=uvicorn_options(owner),
        on_ready=on_ready,
    )
    original = server.handle_exit
    begin_close = getattr(owner, "begin_close", None)
    stopped_by: list[int] = []

    def handle_exit(sig: int, frame: FrameType | None) -> None:  # end hanging streams at once, then let uvicorn stop
        if signals.ignored_at_start(sig):  # (uvicorn installs its handler whatever was there: nohup's, a job's)
            return
        if callable(begin_close):
            begin_close()
        original(sig, frame)
        if sig in (signal.SIGTERM, signal.SIGHUP):  # raised again by the caller, once it has cleaned up
            captured = getattr(server, "_captured_signals", None)  # (uvicorn >= 0.29 raises what it holds there)
            while isinstance(captured, list) and sig in captured:
                captured.remove(sig)
            if sig not in stopped_by:
                stopped_by.append(sig)

    # uvicorn installs server.handle_exit as its signal handler when serve() starts: patched on this instance
    server.handle_exit = handle_exit  # type: ignore[method-assign]
    hung_up: list[int] = []

    def hang_up(sig: int, frame: FrameType | None) -> None:
        if not hung_up:  # (once)
            hung_up.append(sig)
            handle_exit(sig, frame)

    previous = signals.handle(signal.SIGHUP, hang_up) if threading.current_thread() is threading.main_thread() else None
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        if previous is not None:
            signal.signal(signal.SIGHUP, previous)
    return stopped_by[0] if stopped_by else None


def end_by_signal(sig: int | None) -> None:
    """Raise ``sig`` (what :func:`run_foreground` returned) again, with the handler now installed: by default the
    process ends as a shell reports a process that signal killed. Nothing for None."""
    if sig is not None:
        signal.raise_signal(sig)


def port_problem(port: Any) -> str | None:
    """Why ``port`` cannot be a TCP port to listen on (None when it can: 0..65535, 0 meaning ephemeral)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        return f"--port must be 0..65535 (0: an ephemeral port), not {port!r}"
    return None

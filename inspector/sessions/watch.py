"""Watch another harness in the dashboard: `inspector proxy` (the other harness's real traffic) and
`inspector serve --tui` (what our fake API sends its clients, and when).

Both are sessions the dashboard can open like the agent loop's. They publish the same observations (through
`ProxyApp`), but the stream is another program's: pause and step do not apply (the controller says so), and
cancel stops the server. `serve --tui` puts a recording proxy in front of the served scenarios, so the dashboard
sees exactly the bytes clients get, with their timing as they leave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import subprocess
import threading
from typing import TYPE_CHECKING, Any

from inspector.observe import observations as O
from inspector.observe.states import TERMINAL_LOOP_STATES, LoopState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from inspector.core.pacing import Pacer
    from inspector.net.faults import FaultSpec
    from inspector.net.proxy import ProxyApp
    from inspector.net.server import BackgroundServer

log = logging.getLogger("inspector.sessions")


class WatchController:
    """Controls of a watched stream: nothing of another program's stream can be paused or stepped from here."""

    paused = False
    can_pause = False  # (the dashboard dims pause and step, and says why when they are pressed)

    def __init__(self, session: WatchSession) -> None:
        self._session = session
        self.note = ""

    @property
    def state(self) -> str:
        return self._session.state

    @property
    def events_processed(self) -> int:
        return self._session.events

    def _not_here(self, what: str) -> None:
        self.note = f"{what} does not apply to a watched stream (it belongs to another program)"

    def pause(self) -> None:
        self._not_here("pause")

    def resume(self) -> None:
        self._not_here("resume")

    def toggle_pause(self) -> None:
        self._not_here("pause")

    def step(self, unit: str = "event") -> None:
        self._not_here("step")

    def faster(self) -> None:
        self._session.change_speed(+1)

    def slower(self) -> None:
        self._session.change_speed(-1)

    @property
    def speed_label(self) -> str:
        pacer = self._session.pacer
        return pacer.label if pacer is not None else "live"

    def cancel(self) -> None:
        self._session.stop()


class WatchSession:
    """A proxy (and, for `serve --tui`, the fake API behind it) as a dashboard session."""

    def __init__(
        self,
        proxy: ProxyApp,
        sock: socket.socket,
        *,
        source: dict[str, Any],
        upstream_server: BackgroundServer | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.proxy = proxy
        self.sock = sock
        self.source = source
        if proxy.bus is None:  # (a caller's mistake: a watched proxy publishes what passes)
            raise ValueError("a watched proxy needs an observation bus")
        self.bus: O.ObservationBus = proxy.bus
        self.upstream_server = upstream_server  # a BackgroundServer running `serve`, or None
        self.pacer = pacer
        self.state = LoopState.IDLE
        self.events = 0
        self.controller = WatchController(self)
        self._stop = asyncio.Event()  # set by cancel(), even before run() starts
        self.stop_reason: str | None = None  # why the session ended normally (stop(reason)); None: cancelled
        # `watch` with the dashboard: the command whose exit ends the session (as finished, saying so)
        self.command: subprocess.Popen[bytes] | None = None
        self._open: set[tuple[int, int]] = set()  # (turn, attempt) of the attempts under way
        self._ended: tuple[str, str | None] | None = None  # (status, error) once the session's end was published
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop run() runs on (stop_from_any_thread)
        self._early: list[str | None] = []  # a stop_from_any_thread before run() started: its reason
        self._loop_lock = threading.Lock()
        self.bus.subscribe(self._count)

    @property
    def secrets(self) -> list[str]:
        """The credentials the proxy has seen in requests: an export of this session masks them."""
        return list(getattr(self.proxy, "secrets", ()) or ())

    def _count(self, obs: O.Observation) -> None:
        """The session's state: streaming while any attempt is open (concurrent conversations each have theirs),
        idle once the last open one has ended."""
        if isinstance(obs, O.SSEEventSeen):
            self.events += 1
        elif isinstance(obs, O.AttemptStarted):
            self._open.add((obs.turn, obs.attempt))
            self._set_state(LoopState.STREAMING)
        elif isinstance(obs, O.AttemptEnded):
            self._open.discard((obs.turn, obs.attempt))
            if not self._open:  # (an error status, a drop, a JSON answer: no TurnEnded follows)
                self._set_state(LoopState.IDLE, "waiting for the next request")
        elif isinstance(obs, O.TurnEnded):
            self._open = {k for k in self._open if k[0] != obs.turn}  # (its attempts, whatever was said of them)
            if not self._open:
                self._set_state(LoopState.IDLE, "waiting for the next request")

    def _set_state(self, state: LoopState, detail: str = "") -> None:
        if state != self.state and self.state not in TERMINAL_LOOP_STATES:
            self.state = state
            self.bus.publish(O.LoopStateChanged(self.proxy.now(), state, detail))

    def change_speed(self, direction: int) -> None:
        if self.pacer is not None:
            self.pacer.faster() if direction > 0 else self.pacer.slower()

    def stop(self, reason: str | None = None) -> None:
        """End the session. With a ``reason`` (the watched command exited) it ends as finished, saying why; without
        one (a stop from outside), as cancelled."""
        if reason is not None and not self._stop.is_set():
            self.stop_reason = reason
        self._stop.set()

    def stop_from_any_thread(self, reason: str | None = None) -> None:
        """:meth:`stop` from another thread (`watch --split`'s link: watch said the command ended): on the session's
        loop once run() runs, else when it starts."""
        with self._loop_lock:
            loop = self._loop
            if loop is None:
                self._early.append(reason)
                return
        with contextlib.suppress(RuntimeError):  # the loop closed: the session ended first
            loop.call_soon_threadsafe(self.stop, reason)

    def _end_with(self, command: subprocess.Popen[bytes]) -> None:
        """When the command exits, the session ends as finished, saying how it exited (the proxy closes, the
        recording is complete; the dashboard stays open on it). A daemon thread waits: never the loop, and never
        the loop's executor, which a closing loop would wait for while the command still runs."""
        from inspector.sessions.launch import exit_status

        def wait() -> None:
            status = exit_status(command.wait())
            self.stop_from_any_thread(f"the command exited with status {status}")

        threading.Thread(target=wait, name="inspector-watch-command", daemon=True).start()

    async def run(self) -> Any:
        from inspector.net.server import _uvicorn_server, uvicorn_options

        self.bus.publish(O.LoopStarted(self.proxy.now(), dict(self.source), "", None))
        self._set_state(LoopState.IDLE, f"listening on {self.source.get('listen')}")
        with self._loop_lock:
            self._loop = asyncio.get_running_loop()
            early, self._early = self._early, []
        for reason in early[:1]:  # (the first stop's reason is the one kept, as stop() keeps it)
            self.stop(reason)
        if self.command is not None:
            self._end_with(self.command)
        # SIGINT and SIGTERM stay the command's (the dashboard's, watch's: they end the session in order, see
        # cli.common.DashboardStops): uvicorn's handler, installed while it serves on the main thread (the dashboard's
        # loop), stopped the server at once, an open stream cut without its end line
        server = _uvicorn_server(
            self.proxy.app, log_level="critical", options=uvicorn_options(self.proxy), signals=False
        )
        serving = asyncio.ensure_future(server.serve(sockets=[self.sock]))
        # the session's end is published when the proxy closes (the server's shutdown closes it, else close() below;
        # the dashboard's closing loop may cancel the server first): after what the proxy still held, before its
        # recording closes, so that the recording ends with it
        self.proxy.on_close = lambda: self._finish(serving)
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self.stop_reason is not None:  # the command exited (a tool call still waiting says why)
                self.proxy.ended_why = "the command ended before a next request showed its result"
            begin_close = getattr(self.proxy, "begin_close", None)
            if callable(begin_close):
                begin_close()
            server.should_exit = True
            stopping.cancel()
            try:
                await serving
            except Exception:  # its error is read from the task (_finish)
                log.debug("the watched server stopped with an error", exc_info=True)
            finally:  # (also when cancelled again while the server stops: the dashboard's loop closing)
                self.close()
        status, error = self._ended or ("cancelled", None)
        return type("WatchResult", (), {"status": status, "error": error})()

    def _finish(self, serving: asyncio.Future[Any]) -> None:
        """The session's end (once): its final state and LoopFinished, finished when the command exited (a stop with
        a reason), cancelled when stopped from outside, an error when the server failed."""
        if self._ended is not None:
            return
        error = None
        if serving.done() and not serving.cancelled() and serving.exception() is not None:
            error = f"server stopped: {serving.exception()}"
            if self.secrets:  # (the recording keeps it)
                from inspector.core.redaction import mask_text

                error = mask_text(error, self.secrets)
        reason = self.stop_reason
        status = "error" if error else "finished" if reason else "cancelled"
        self._ended = (status, error)
        self.state = LoopState.ERROR if error else LoopState.FINISHED if reason else LoopState.CANCELLED
        self.bus.publish(O.LoopStateChanged(self.proxy.now(), self.state, error or reason or "stopped"))
        self.bus.publish(O.LoopFinished(self.proxy.now(), status, self.proxy.turns, [], [], error))

    def _nothing_ran(self) -> None:
        """The end of a session closed before it ran (the dashboard quit while it started, the command never ran):
        its recording says nothing ran, not its header alone (see record.recorder.NOTHING_RAN)."""
        from inspector.record.recorder import nothing_ran_end

        self._ended = ("cancelled", None)
        self.bus.publish(nothing_ran_end(self.proxy.now()))

    def close(self) -> None:
        if self._loop is None and self.proxy.on_close is None and self._ended is None:  # (closed before it ran)
            self.proxy.on_close = self._nothing_ran
        try:
            self.proxy.close()
        except Exception:  # closing must go on: the socket and the backend are still to close
            log.warning("closing the proxy failed", exc_info=True)
        self.sock.close()
        if self.upstream_server is not None:
            self.upstream_server.stop()
            self.upstream_server = None


def proxy_session(
    upstream: str, host: str, port: int, *, record: str | None = None, openai_upstream: str | None = None
) -> WatchSession:
    """A recording proxy on host:port in front of ``upstream`` (and of ``openai_upstream`` for the OpenAI-format
    requests, when given: ProxyApp._route)."""
    from inspector.net.proxy import ProxyApp
    from inspector.net.server import base_url_of, bind_socket

    sock = bind_socket(host, port)
    url = base_url_of(sock)
    source = {"type": "proxy", "upstream": upstream.rstrip("/"), "listen": url}
    if openai_upstream:
        source["openai_upstream"] = openai_upstream.rstrip("/")
    proxy = ProxyApp(
        upstream,
        openai_upstream=openai_upstream,
        record=record,
        bus=O.ObservationBus(),
        listen=url,
        source_info=source,
    )
    return WatchSession(proxy, sock, source=source)


def serve_session(
    scenario: str,
    faults: str | Sequence[FaultSpec | str] | None,
    *,
    speed: float,
    host: str,
    port: int,
    validate_history: bool = True,
    record: str | None = None,
    **app_options: Any,
) -> WatchSession:
    """`serve --tui`: the fake API on an internal loopback port, behind a recording proxy on host:port.
    ``app_options``: more ServeApp keywords (lenient, strict, max_body, history, recording)."""
    from inspector.core.pacing import speed_label
    from inspector.net.proxy import ProxyApp
    from inspector.net.serve import ServeApp
    from inspector.net.server import BackgroundServer, base_url_of, bind_socket

    app = ServeApp(scenario, faults, speed=speed, validate_history=validate_history, **app_options)
    backend = BackgroundServer(app).start()
    try:
        sock = bind_socket(host, port)
    except OSError:
        backend.stop()
        raise
    url = base_url_of(sock)
    served = app_options.get("recording")  # (a recording answers: the scenario's name is not what is served)
    name = f"recording {served.name}" if served is not None else scenario
    source = {"type": "serve", "name": name, "listen": url, "speed": speed_label(speed)}
    proxy = ProxyApp(backend.base_url, record=record, bus=O.ObservationBus(), listen=url, source_info=source)
    return WatchSession(proxy, sock, upstream_server=backend, pacer=app.pacer, source=source)

"""`inspector watch -- <command>`: run another program with its API base URLs pointing at an embedded proxy (or at
the fake server behind one), and watch what it sends and receives.

- The proxy listens on an ephemeral loopback port before the command starts (connections queue until it accepts).
- The command gets ``ANTHROPIC_BASE_URL`` (no ``/v1``, as the SDK expects) and ``OPENAI_BASE_URL`` (with ``/v1``);
  with ``--serve``, a placeholder ANTHROPIC_API_KEY / OPENAI_API_KEY where none is set (the SDKs refuse to start
  without one); everything else in the environment, stdin, the terminal and signals pass through.
- Ctrl-C goes to the command first (it is in the terminal's foreground process group with us); a second Ctrl-C
  stops watching: the command and every process it started are terminated (killed after a grace period) and the
  proxy closes its recording, an ``end`` line for every open attempt. SIGTERM or SIGHUP to watch is passed on the
  same way (to the command and its processes), and watch closes its recording once the command has exited.
- watch killed (SIGKILL, or any end that skips its cleanup): a watchdog started with the command sees it go and
  stops the command and every process it started the same way (``sessions/reaper.py``): none is left running.
- The command's exit status is watch's (a signal N gives 128 + N, as a shell reports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Generic, Protocol, TypeVar

from inspector.core import signals
from inspector.sessions.reaper import Watchdog, descendants, running, started_at, watch_over

ANTHROPIC_DEFAULT = "https://api.anthropic.com"
OPENAI_DEFAULT = "https://api.openai.com/v1"
GRACE = 5.0  # seconds between terminate and kill after the second Ctrl-C


def upstream_from_env(env: dict[str, str], override: str | None) -> str:
    """The Anthropic upstream: --upstream, else what ANTHROPIC_BASE_URL held before, else the public API."""
    return (override or env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT).rstrip("/")


def openai_upstream_from_env(env: dict[str, str], override: str | None) -> str:
    """The OpenAI upstream (with its ``/v1``, as OPENAI_BASE_URL has it): --openai-upstream, else what
    OPENAI_BASE_URL held before, else the public API."""
    return (override or env.get("OPENAI_BASE_URL") or OPENAI_DEFAULT).rstrip("/")


def upstream_problem(url: str) -> str | None:
    """Why the proxy cannot forward to ``url`` (None: it can): not an http(s) URL with a host and a valid port. Said
    with a key the URL carries masked (``https://user:KEY@relay``)."""
    from urllib.parse import urlsplit

    from inspector.core.redaction import credential_values, mask_text

    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        ok = False
    if ok:
        return None
    return f"not an http(s) URL: {mask_text(url, credential_values((), url))!r}"


OFFLINE_KEY = "sk-inspector-offline-not-a-key"  # (with --serve: the SDKs refuse to start without some key)


def command_env(env: dict[str, str], base_url: str, *, offline: bool = False) -> dict[str, str]:
    """The command's environment: its base URLs point at the proxy. ``offline`` (``--serve``: the fake server
    answers, no API is reached): an SDK that finds no key refuses to start, so ANTHROPIC_API_KEY and OPENAI_API_KEY
    get a placeholder when unset (a key already set is left as it is; toward a real API nothing is ever added)."""
    out = dict(env)
    out["ANTHROPIC_BASE_URL"] = base_url
    out["OPENAI_BASE_URL"] = base_url + "/v1"
    out["INSPECTOR_WATCH"] = base_url  # a harness may read it to tell it is watched
    if offline:
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            if not out.get(name):
                out[name] = OFFLINE_KEY
    return out


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class WatchedSession(Protocol):
    """What ``Launched`` needs of the session serving the command (a WatchSession): the listening socket the
    command's base URLs point at, ``run()`` on the session's own loop until ``stop()``: with a reason, the
    session's normal end (the command exited), else a stop from outside (cancelled)."""

    sock: socket.socket

    async def run(self) -> object: ...

    def stop(self, reason: str | None = None) -> None: ...


# a standard stream of the command, as subprocess.Popen takes it: inherited (None), a file, or PIPE/DEVNULL/STDOUT
CommandStream = int | IO[Any] | None

S = TypeVar("S", bound=WatchedSession)


@dataclass
class Launched(Generic[S]):
    """A watched command and the session serving it (a WatchSession: the proxy, or serve behind a proxy)."""

    session: S
    argv: Sequence[str]
    env: dict[str, str]
    stdin: CommandStream = None
    stdout: CommandStream = None
    stderr: CommandStream = None
    process: subprocess.Popen[bytes] | None = None
    interrupts: int = 0
    stopped: bool = False  # the command was told to stop (a second Ctrl-C, SIGTERM or SIGHUP to watch...)
    on_note: Callable[[str], None] = print
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _started: threading.Event = field(default_factory=threading.Event)
    result: object = None  # what the session's run() returned
    _tree: dict[int, int | None] = field(default_factory=dict)  # told to stop: pid -> its start time (/proc)
    _kill_at: float | None = None  # (monotonic) when the processes told to stop are killed if still running
    _watchdog: Watchdog | None = None  # stops the command if watch dies without a word (sessions/reaper.py)
    _previous: dict[signal.Signals, Any] = field(default_factory=dict)  # the handlers catch_stops replaced
    _stop_pending: int | None = None  # a stop (its signal) that came while the command was starting

    @property
    def base_url(self) -> str:
        from inspector.net.server import base_url_of

        return base_url_of(self.session.sock)

    # --- the session on its own thread and loop: the command's traffic is served whatever this thread does ------
    def start_session(self) -> None:
        self.session.sock.listen(2048)  # before the command starts: its first connection queues, never refused

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._started.set()
            try:
                self.result = loop.run_until_complete(self.session.run())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="inspector-watch", daemon=True)
        self._thread.start()
        self._started.wait(10)

    def stop_session(self, timeout: float = 30.0, reason: str | None = None) -> None:
        """Stop the session and wait for its thread. ``reason``: why it ends normally (the command exited); without
        one, the session ends as cancelled."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already closed
                self._loop.call_soon_threadsafe(self.session.stop, reason)
            self._thread.join(timeout)

    # --- the command ----------------------------------------------------------------------------------------------
    def start_command(self) -> subprocess.Popen[bytes]:
        """Start the command, and its watchdog: whatever way watch ends, even killed (SIGKILL), the command and every
        process it started are not left running (sessions/reaper.py)."""
        self.process = subprocess.Popen(
            list(self.argv), env=self.env, stdin=self.stdin, stdout=self.stdout, stderr=self.stderr
        )
        self._watchdog = watch_over(self.process.pid, GRACE)
        if self._stop_pending is not None:  # (told to stop while it started: catch_stops)
            self.stop_command(self._stop_pending)
        return self.process

    def close_watchdog(self) -> None:
        """Once the command has ended (and been waited for): its watchdog exits."""
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None

    def interrupt(self) -> None:
        """Ctrl-C: the first goes to the command (the terminal sent it to both of us); the second stops watching."""
        self.interrupts += 1
        if self.interrupts == 1:
            self.on_note("inspector watch: Ctrl-C went to the command; press it again to stop watching")
            return
        self.on_note("inspector watch: stopping the command")
        self.stop_command(signal.SIGTERM)

    def stop_command(self, signum: int) -> None:
        """Send ``signum`` to the command and every process it started (a wrapper's children too: ``sh -c``,
        ``make``, ``npm run`` pass no signal on), then kill those still running after a grace period."""
        p = self.process
        if p is None:  # (starting, under catch_stops: it is stopped once started)
            self._stop_pending = signum
            return
        if p.poll() is not None:
            return
        self.stopped = True
        tree = [p.pid, *descendants(p.pid)]
        self._tree = {pid: started_at(pid) for pid in tree}
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        self._kill_at = time.monotonic() + GRACE
        timer = threading.Timer(GRACE, self._kill)
        timer.daemon = True
        timer.start()

    def finish_stop(self) -> None:
        """After a stop (:meth:`stop_command`), once the command itself has exited: wait for the other processes
        told to stop, until the grace period is over, then kill those still running. watch exits as soon as the
        command has: the timer's kill would never come, and a process that ignores SIGTERM would run on."""
        if self._kill_at is None:
            return
        p = self.process
        others = {pid: at for pid, at in self._tree.items() if p is None or pid != p.pid}
        while time.monotonic() < self._kill_at and any(running(pid, at) for pid, at in others.items()):
            time.sleep(0.1)  # (other processes' exits, not our children's: nothing to wait on)
        self._kill()

    def send_interrupt(self) -> bool:
        """Ctrl-C for a command that does not hold the terminal (the dashboard does): SIGINT to it; False when it
        is not running (any more)."""
        p = self.process
        if p is None or p.poll() is not None:
            return False
        try:
            p.send_signal(signal.SIGINT)
        except ProcessLookupError:
            return False
        return True

    def _kill(self) -> None:
        """The processes told to stop that are still running, killed (the same process: its start time is checked,
        so a pid used again meanwhile is left alone)."""
        p = self.process
        for pid, started in self._tree.items():
            if pid == getattr(p, "pid", None) and p is not None and p.poll() is not None:
                continue
            if started is not None and started_at(pid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.kill()

    def catch_stops(self) -> None:
        """From now until :meth:`wait` returns (or :meth:`release_stops`): Ctrl-C, SIGTERM and SIGHUP are the
        command's, as the module's doc says. Called before the command starts, a stop that lands while it starts is
        not lost (nor does it end watch with the command left to run): it stops the command once started. Nothing
        outside the main thread (no handler can be set there)."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        self._previous[signal.SIGINT] = signals.handle(signal.SIGINT, lambda *_: self.interrupt())
        # a stop from outside (kill, a CI runner's timeout, a closed terminal): passed on to the command, which
        # watch then outlives, so the recording is closed (an end line for every open attempt) as after Ctrl-C
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signals.handle(sig, lambda signum, _frame: self.stop_command(signum))

    def release_stops(self) -> None:
        """The handlers :meth:`catch_stops` replaced, back."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def wait(self) -> int:
        """Wait for the command, Ctrl-C handled as above; returns its exit status."""
        assert self.process is not None
        self.catch_stops()
        try:
            while True:
                try:
                    status = exit_status(self.process.wait())
                    break
                except KeyboardInterrupt:  # (only if the handler could not be installed)
                    self.interrupt()
            self.finish_stop()  # (the processes it started that were told to stop too: none left running)
            self.close_watchdog()
            return status
        finally:
            self.release_stops()


# the exit status of a command that cannot be run, as POSIX shells, env, nohup and timeout give it
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126


def resolve_command(argv: Sequence[str]) -> tuple[str, int] | None:
    """A one-line problem with the command and the exit status it gives, before anything starts (None: it can be
    run). A command that is not found exits 127 and one that cannot be executed 126, as it would from a shell
    (`watch`'s status is the command's): a CI script that tells them apart keeps working; no command at all is a
    usage error (2)."""
    if not argv:
        return "no command: inspector watch [options] -- COMMAND [ARGS...]", 2
    import shutil

    exe = argv[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            return f"{exe}: no such file", EXIT_NOT_FOUND
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            return f"{exe}: not executable", EXIT_NOT_EXECUTABLE
        return None
    if shutil.which(exe) is None:
        return f"{exe}: command not found", EXIT_NOT_FOUND
    return None

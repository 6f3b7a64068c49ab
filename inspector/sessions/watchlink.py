"""`watch --split`: the link between watch and its dashboard pane, a process tmux started (not watch's child:
nothing else tells either one that the other has ended). Outside tmux, the dashboard a web server starts for the
browser's tab is linked the same way (the "pane" below: a tab closed or reloaded is a pane killed).

watch listens on a Unix socket in a directory only its user can open (mkdtemp: 0700) and names it to the pane's
dashboard (`inspector proxy` / `inspector serve --tui`, hidden option ``--watch-link PATH``), which connects as it
starts; once it has, the socket's file and directory are removed (another dashboard cannot connect). Then:

- When the command ends, watch says so in one JSON line, ``{"status": N, "quit": false}``: the pane's session ends
  as finished ("the command exited with status N": the proxy closes, the recording is complete) and the dashboard
  stays open on it (q quits, the pane closes). When watch was stopped (a second Ctrl-C, SIGTERM or SIGHUP), it says
  ``"quit": true``: the session ends the same way and the dashboard closes too.
- watch gone without a word (killed): the pane sees its end of the link close; its session ends as cancelled and the
  dashboard closes. A dashboard never outlives watch waiting for a word that cannot come.
- The pane gone (q, or the pane killed) while the command runs: watch sees the link close and stops the command, as
  a second Ctrl-C does (its proxy is gone: every request it made next would be refused).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

LINE_MAX = 4096  # bytes of watch's one line read at most (it sends a few dozen)


@dataclass(frozen=True)
class WatchEnd:
    """How the watching ended, as the pane learns it: the command's exit status (None: watch went without a word)
    and whether the dashboard closes too."""

    status: int | None
    closes: bool  # the dashboard closes too (else it stays open on the finished session)

    @property
    def reason(self) -> str | None:
        """Why the pane's session ends (None: cancelled, watch is gone)."""
        if self.status is None:
            return None
        said = f"the command exited with status {self.status}"
        return f"watching was stopped: {said}" if self.closes else said


def parse_end(line: bytes) -> WatchEnd:
    """watch's line; anything else (nothing: the link closed) is watch gone: cancelled, the dashboard closes."""
    try:
        said = json.loads(line)
    except ValueError:  # (UnicodeDecodeError too)
        return WatchEnd(None, True)
    status = said.get("status") if isinstance(said, dict) else None
    if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 255:
        return WatchEnd(None, True)
    return WatchEnd(status, said.get("quit") is not False)


class PaneLink:
    """watch's side: the socket the pane connects to. :meth:`close` removes it (and its directory)."""

    def __init__(self) -> None:
        self.conn: socket.socket | None = None
        self._closing = False
        # in the temporary directory; in /tmp when its path is too long for a socket's (about 100 bytes)
        for where in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
            self.dir = tempfile.mkdtemp(prefix="inspector-watch-", dir=where)  # (0700: only this user connects)
            self.path = os.path.join(self.dir, "link")
            self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.server.bind(self.path)
                self.server.listen(1)
                return
            except OSError:
                self.close()
                if where == "/tmp":
                    raise
                self._closing = False

    def accept(self, timeout: float) -> bool:
        """Whether the pane connected within ``timeout`` seconds. Once it has, the socket's file and its directory
        are removed (the connection needs neither): nothing is left in the temporary directory even if watch is
        killed from then on (it was, in /tmp: a path too long for a socket goes there)."""
        self.server.settimeout(timeout)
        try:
            self.conn, _ = self.server.accept()
        except OSError:  # (TimeoutError; the link closed meanwhile)
            return False
        self.conn.settimeout(None)
        self.server.close()  # (one pane: no other is accepted)
        shutil.rmtree(self.dir, ignore_errors=True)
        return True

    def on_gone(self, callback: Callable[[], None]) -> None:
        """``callback()`` (on a thread of its own) once the pane has closed its end (it quit, or was killed), unless
        this side closed the link first."""
        conn = self.conn
        if conn is None:
            return

        def wait() -> None:
            with contextlib.suppress(OSError):
                while conn.recv(1024):  # (the pane says nothing: anything it sends is ignored)
                    pass
            if not self._closing:
                callback()

        threading.Thread(target=wait, name="inspector-watch-pane", daemon=True).start()

    def say_end(self, status: int, *, closes: bool) -> None:
        """Tell the pane how the watching ended (see the module's doc); said once, before :meth:`close`."""
        if self.conn is None:
            return
        line = json.dumps({"status": status, "quit": closes}).encode() + b"\n"
        with contextlib.suppress(OSError):  # (the pane is gone: nobody to tell)
            self.conn.sendall(line)

    def close(self) -> None:
        self._closing = True
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_RDWR)  # (wakes the thread reading it: close alone may not)
            self.conn.close()
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Stoppable(Protocol):
    """What the follower ends: a WatchSession."""

    def stop_from_any_thread(self, reason: str | None = None) -> None: ...


class WatchFollower:
    """The pane's side: connects to watch's link at once (OSError when it cannot), then waits for its word on a
    thread of its own. Each session the dashboard starts is :meth:`attach`-ed (a restart starts another): the end,
    once known, ends it, and closes the dashboard when watch asks (or is gone)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self._lock = threading.Lock()
        self._session: Stoppable | None = None
        self._quit: Callable[[], None] | None = None
        self.end: WatchEnd | None = None  # once watch said it, or went
        self.ended = threading.Event()
        threading.Thread(target=self._read, name="inspector-watch-link", daemon=True).start()

    def attach(self, session: Stoppable, quit_app: Callable[[], None] | None) -> None:
        """The dashboard's session (and how to close the dashboard, from any thread): ended as watch says, also
        when it said so already."""
        with self._lock:
            self._session, self._quit = session, quit_app
            end = self.end
        if end is not None:
            self._apply(end, session, quit_app)

    def _read(self) -> None:
        line = b""
        with contextlib.suppress(OSError):
            while b"\n" not in line and len(line) < LINE_MAX:
                chunk = self.sock.recv(LINE_MAX)
                if not chunk:
                    break
                line += chunk
        end = parse_end(line.split(b"\n", 1)[0] if b"\n" in line else b"")
        with self._lock:
            self.end = end
            session, quit_app = self._session, self._quit
        self.ended.set()
        if session is not None:
            self._apply(end, session, quit_app)

    @staticmethod
    def _apply(end: WatchEnd, session: Stoppable, quit_app: Callable[[], None] | None) -> None:
        session.stop_from_any_thread(end.reason)  # (first: the session's end comes before the dashboard's)
        if end.closes and quit_app is not None:
            with contextlib.suppress(RuntimeError):  # (its loop closed: it is quitting already)
                quit_app()

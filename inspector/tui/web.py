"""`inspector web`: the dashboard in a browser, served by textual-serve (loopback unless told otherwise).

textual-serve runs `python -m inspector run ...` as a subprocess per websocket, talking to it over stdin/stdout
(Textual's WebDriver). When the browser goes away abruptly (a killed tab, a dead server) the stock driver's input
thread just ends on stdin EOF and the app keeps running with nobody to show it to. `InspectorWebDriver` ends the app
when its input ends, and on SIGTERM even if the event loop is busy; a watchdog makes sure the process is gone a few
seconds later whatever the app is doing.

The page is textual-serve's own, less its one outside URL (a Google Fonts stylesheet): a page served on loopback
fetches nothing from elsewhere (the terminal falls back to the browser's monospace font).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from textual import messages
from textual.drivers.web_driver import WebDriver

EXIT_GRACE = 3.0  # seconds the app gets to exit cleanly once its client is gone


class InspectorWebDriver(WebDriver):
    """The web driver, ending the app when the client is gone (stdin EOF) or on SIGTERM."""

    _inspector_loop: asyncio.AbstractEventLoop | None = None
    _leaving = False

    def start_application_mode(self) -> None:
        self._inspector_loop = asyncio.get_running_loop()
        super().start_application_mode()
        if threading.current_thread() is threading.main_thread():
            # a Python-level handler runs between bytecodes, even while the event loop is busy
            signal.signal(signal.SIGTERM, lambda *_: self.client_gone("SIGTERM"))

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        finally:
            if not self.exit_event.is_set():  # the input ended without the app asking: the client is gone
                self.client_gone("stdin closed")

    def client_gone(self, why: str) -> None:
        """Ask the app to exit, and make sure the process ends even if it cannot."""
        if self._leaving:
            return
        self._leaving = True
        loop = self._inspector_loop
        if loop is not None and not loop.is_closed():
            try:
                # (SLF001: Textual's awaitable post, the one to run on the app's loop from this thread)
                asyncio.run_coroutine_threadsafe(self._app._post_message(messages.ExitApp()), loop)  # noqa: SLF001
            except RuntimeError:  # the loop is already gone
                pass
        watchdog = threading.Timer(EXIT_GRACE, os._exit, (0,))
        watchdog.daemon = True
        watchdog.start()


def driver_for(driver_class: Any) -> Any:
    """The driver the dashboard runs with: ours in place of the stock web driver, anything else unchanged."""
    if isinstance(driver_class, type) and issubclass(driver_class, WebDriver):
        return InspectorWebDriver
    return driver_class


def serve_web(run_args: list[str], *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve `python -m inspector run ARGS` to browsers until Ctrl-C."""
    serve_command([sys.executable, "-m", "inspector", "run", *run_args], host=host, port=port)


_OUTSIDE_LINK = re.compile(r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>\s*", re.IGNORECASE)


def local_pages() -> dict[str, str]:
    """textual-serve's page templates (name -> text), less each ``<link>`` to another site (its Google Fonts
    stylesheet): the page then loads from the server alone. Held in memory (a jinja2 DictLoader): no temporary
    directory, which a server killed, or stopped before its own cleanup could run (SIGHUP), left behind in /tmp."""
    import textual_serve

    source = Path(textual_serve.__file__).parent / "templates"
    return {page.name: _OUTSIDE_LINK.sub("", page.read_text("utf-8")) for page in source.glob("*.html")}


def serve_command(argv: list[str], *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the dashboard of a command (``argv``: an inspector command that opens the dashboard, e.g.
    `python -m inspector proxy --listen ...`) to browsers until Ctrl-C or SIGTERM."""
    from textual_serve.server import Server

    class Serving(Server):
        """textual-serve's server, whose stop (Ctrl-C, SIGTERM) ends the dashboards of the open tabs at once: aiohttp
        waited for each websocket to end by itself, up to 60 s (a tab left open held the server that long)."""

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.sessions: set[asyncio.Task[Any]] = set()  # the websocket handlers running (one per open tab)

        async def handle_websocket(self, request: Any) -> Any:
            task = asyncio.current_task()
            if task is not None:
                self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                if task is not None:
                    self.sessions.discard(task)

        async def _make_app(self) -> Any:
            import aiohttp_jinja2
            import jinja2

            app = await super()._make_app()
            aiohttp_jinja2.get_env(app).loader = jinja2.DictLoader(pages)  # (in place of its templates folder's)
            return app

        async def on_shutdown(self, app: Any) -> None:
            # a cancelled handler closes its websocket and stops its dashboard (textual-serve's own cleanup)
            for task in list(self.sessions):
                task.cancel()
            await super().on_shutdown(app)

    pages = local_pages()
    Serving(" ".join(shlex.quote(a) for a in argv), host=host, port=port).serve()


def _stop_when_stdin_ends() -> None:
    """Wait for the end of stdin (nothing is ever written to it), then stop the server as SIGTERM does: watch, which
    holds the pipe's other end, is gone, whether it stopped the server or not (killed: it could not)."""
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    """`python -m inspector.tui.web [--host H] --port N -- COMMAND...`: what `inspector watch --split` runs outside
    tmux (the dashboard of its proxy, to a browser)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m inspector.tui.web", description=main.__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, required=True, help="port")
    p.add_argument(
        "--until-stdin-ends",
        action="store_true",
        help="stop as on SIGTERM when stdin ends (watch holds its other end: the server never outlives watch)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("a command is needed after --")
    # SIGTERM (`inspector watch` stopping it) ends the server like Ctrl-C does: its cleanup runs
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.until_stdin_ends:
        threading.Thread(target=_stop_when_stdin_ends, name="inspector-web-stdin", daemon=True).start()
    try:
        serve_command(command, host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`inspector web`: the dashboard in a browser, served by textual-serve (loopback unless told otherwise).

textual-serve runs `python -m inspector run ...` as a subprocess per websocket, talking to it over stdin/stdout
(Textual's WebDriver). When the browser goes away abruptly (a killed tab, a dead server) the stock driver's input
thread just ends on stdin EOF and the app keeps running with nobody to show it to. `InspectorWebDriver` ends the app
when its input ends, and on SIGTERM even if the event loop is busy; a watchdog makes sure the process is gone a few
seconds later whatever the app is doing.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import threading
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
    from textual_serve.server import Server

    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "inspector", "run", *run_args])
    Server(command, host=host, port=port).serve()

"""`inspector web`: the dashboard in a browser, served by textual-serve (loopback unless told otherwise)."""

from __future__ import annotations

import shlex
import sys


def serve_web(run_args: list[str], *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve `python -m inspector run ARGS` to browsers until Ctrl-C."""
    from textual_serve.server import Server

    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "inspector", "run", *run_args])
    Server(command, host=host, port=port).serve()

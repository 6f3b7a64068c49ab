"""`inspector web`: the dashboard in a browser (textual-serve) on 127.0.0.1.

Arguments are checked before serving: an unknown scenario or a busy port is a one-line error (exit 2), not a browser
stuck on the splash screen or a traceback."""

from __future__ import annotations

import argparse

from inspector.cli.common import EXIT_OK
from inspector.core.errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    w = sub.add_parser("web", help="serve the dashboard to a browser (textual-serve) on 127.0.0.1")
    w.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    w.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    w.add_argument("--scenario", default=None, help="a bundled scenario name or a scenario file (default: parse_date)")

    w.set_defaults(func=cmd)


def check_args(args: argparse.Namespace) -> None:
    """Everything that would otherwise fail inside the served app (where the browser cannot say why)."""
    from inspector.net.server import bind_socket, port_problem

    if args.scenario is not None:
        from inspector.scenarios.bundled import get_scenario

        get_scenario(args.scenario)  # a bundled name or a scenario file (UnknownScenario / a file's one-line error)
    problem = port_problem(args.port)
    if problem:
        raise UsageError(problem)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    sock.close()  # free again for the server (it binds it in a moment)


def cmd(args: argparse.Namespace) -> int:
    check_args(args)
    from inspector.tui.web import serve_web

    print(f"serving the dashboard on http://{args.host}:{args.port}")
    serve_web(["--scenario", args.scenario] if args.scenario else [], host=args.host, port=args.port)
    return EXIT_OK

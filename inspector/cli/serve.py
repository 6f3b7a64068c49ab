"""`inspector serve`: the command line of the fake API (see inspector/net/serve.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inspector.agent.pacing import parse_speed, speed_label
from inspector.core.errors import InspectorError
from inspector.net.faults import FAULT_HEADER, faults_doc, faults_key, parse_faults
from inspector.net.serve import SCENARIO_HEADER, Exchange, ServeApp, format_exchange
from inspector.net.server import base_url_of, bind_socket, port_problem, run_foreground
from inspector.scenarios.bundled import DEFAULT_SCENARIO

# =====================================================================================================================
# CLI
# =====================================================================================================================


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        help=f"the scenario to serve (default {DEFAULT_SCENARIO}; per request: header {SCENARIO_HEADER})",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME[:ARG][,NAME...]",
        help=f"inject faults (repeatable; per request: header {FAULT_HEADER}); see --list-faults",
    )
    p.add_argument("--list-faults", action="store_true", help="describe every fault and exit")
    p.add_argument("--speed", type=parse_speed, default=1.0, help="pacing: 1 real time (default), 0.5, 4, max")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: an ephemeral port, printed at start)")
    p.add_argument("--no-history-check", action="store_true", help="do not answer history-rule violations with 400")
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    p.add_argument(
        "--tui", action="store_true", help="show what the server sends its clients, and when, in the dashboard"
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``inspector serve`` to an argparse subparsers object; run it with :func:`cmd`."""
    p = subparsers.add_parser(
        "serve",
        help="serve the scripted scenarios over HTTP (an Anthropic-compatible fake API with faults) for any client",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(func=cmd)
    return p


def cmd(args: argparse.Namespace) -> int:
    """Run ``inspector serve`` (blocks until Ctrl-C). Exit codes: 0 ok, 2 usage error."""
    if args.list_faults:
        print(faults_doc())
        return 0
    problem = port_problem(args.port)
    if problem:
        sys.stderr.write(f"inspector serve: {problem}\n")
        return 2
    if getattr(args, "tui", False):
        return _cmd_tui(args)

    def printer(ex: Exchange) -> None:
        sys.stderr.write(format_exchange(ex) + "\n")
        sys.stderr.flush()

    try:
        faults = parse_faults(args.fault)
        app = ServeApp(
            args.scenario,
            faults,
            speed=args.speed,
            validate_history=not args.no_history_check,
            on_exchange=None if args.quiet else printer,
        )
    except InspectorError as e:
        sys.stderr.write(f"inspector serve: {e}\n")
        return 2
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as e:
        sys.stderr.write(f"inspector serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}\n")
        return 2
    url = base_url_of(sock)
    print(f"inspector serve: scenario {args.scenario}, faults {faults_key(faults)}, speed {speed_label(args.speed)}")
    print(f"ANTHROPIC_BASE_URL={url}")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}, not loopback only", file=sys.stderr)
    sys.stdout.flush()
    try:
        run_foreground(app, sock, log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def _cmd_tui(args: argparse.Namespace) -> int:
    """``serve --tui``: the dashboard watches what the server sends (through a recording proxy in front of it).
    The arguments are validated by building a ServeApp (scenario, faults), which binds and starts nothing: the
    dashboard's session starts the servers."""
    try:
        faults = parse_faults(args.fault)
        ServeApp(args.scenario, faults, speed=args.speed)
        bind_socket(args.host, args.port).close()  # the port is free now (the session binds it again)
    except InspectorError as e:
        sys.stderr.write(f"inspector serve: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"inspector serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}\n")
        return 2
    from inspector.sessions.watch import serve_session
    from inspector.tui.app import run_dashboard

    def factory(**_: Any):
        return serve_session(
            args.scenario,
            faults,
            speed=args.speed,
            host=args.host,
            port=args.port,
            validate_history=not args.no_history_check,
        )

    run_dashboard(factory, source={"type": "serve", "name": args.scenario})
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.cli.serve ...`` (the same options as ``inspector serve``)."""
    p = argparse.ArgumentParser(prog="inspector serve", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    return cmd(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

"""`inspector serve`: the command line of the fake API (see inspector/net/serve.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inspector.core.errors import InspectorError
from inspector.core.pacing import parse_speed, speed_label
from inspector.net.faults import FAULT_HEADER, faults_doc, faults_key, parse_faults
from inspector.net.serve import (
    BODY_TIMEOUT,
    DEFAULT_HISTORY,
    DEFAULT_MAX_BODY,
    HEADER_TIMEOUT,
    KEEP_ALIVE,
    SCENARIO_HEADER,
    Exchange,
    ServeApp,
    format_exchange,
)
from inspector.net.server import base_url_of, bind_socket, end_by_signal, port_problem, run_foreground
from inspector.scenarios.bundled import DEFAULT_SCENARIO

# =====================================================================================================================
# CLI
# =====================================================================================================================

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2}
_UNITS.update({"g": 1000**3, "gb": 1000**3, "gib": 1024**3})


def parse_size(value: str) -> int:
    """A byte count from the command line: "33554432", "32MiB", "500kb" (an argparse ``type=``)."""
    v = value.strip().lower().replace(" ", "")
    digits = v.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = v[len(digits) :]
    try:
        n = float(digits) * _UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"a size like 33554432, 32MiB or 500kB, not {value!r}") from None
    if not 1 <= n <= 1 << 40:
        raise argparse.ArgumentTypeError(f"size must be between 1 byte and 1 TiB, not {value!r}")
    return int(n)


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, not {value!r}")
    return n


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        default=DEFAULT_SCENARIO,
        help=f"the scenario to serve (default {DEFAULT_SCENARIO}; per request: header {SCENARIO_HEADER})",
    )
    p.add_argument(
        "--recording",
        metavar="FILE",
        default=None,
        help="serve a recording (run --record / proxy --record), a HAR or a plain SSE file instead of a scenario, "
        "with its recorded timing (default: none, serve --scenario)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME[:ARG][@once|@turn][,NAME...]",
        help=f"inject faults (repeatable; default none; per request: header {FAULT_HEADER}); @once: the first answer "
        "it changes only, @turn: every turn; transport faults (drops, stalls, error events) default to @once, "
        "since a real transient fault does not recur, the others to @turn; see --list-faults",
    )
    p.add_argument("--list-faults", action="store_true", help="describe every fault and exit")
    p.add_argument(
        "--speed", type=parse_speed, default=1.0, help="pacing: 1 real time (default 1), 0.5, 4, max (no waits)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: an ephemeral port, printed at start)")
    p.add_argument(
        "--no-history-check",
        action="store_true",
        help="do not answer history-rule violations with 400 (default: check, like the API)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="no API checks: serve requests without x-api-key/authorization or anthropic-version (OpenAI "
        "endpoints: without a bearer key), or with a missing or wrongly typed model/max_tokens/stream "
        "(default: 401/400 like the API)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="past the script's last turn answer 400 invalid_request_error (default: a short end_turn text reply, "
        "flagged in the log and /inspector/requests)",
    )
    p.add_argument(
        "--max-body",
        type=parse_size,
        default=DEFAULT_MAX_BODY,
        metavar="SIZE",
        help=f"largest request body, e.g. 32MiB; larger ones get 413 request_too_large (default {DEFAULT_MAX_BODY}"
        " bytes = 32 MiB)",
    )
    p.add_argument(
        "--history",
        type=_positive_int,
        default=DEFAULT_HISTORY,
        metavar="N",
        help=f"exchanges and attempt counters kept in memory, oldest dropped (default {DEFAULT_HISTORY}); "
        "GET /inspector/requests lists them",
    )
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr (default: one per request)")
    p.add_argument(
        "--tui",
        action="store_true",
        help="show what the server sends its clients, and when, in the dashboard (default: headless)",
    )
    p.add_argument(
        "--record",
        metavar="FILE",
        help="with --tui: record every exchange, as the dashboard's proxy sees it (default: none)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    from inspector.cli.watch import WATCH_LINK_HELP

    p.add_argument("--watch-link", metavar="PATH", help=WATCH_LINK_HELP)
    p.epilog = (
        f"Connections: keep-alive {KEEP_ALIVE:g} s, request headers within {HEADER_TIMEOUT:g} s of their first "
        f"byte, request bodies within {BODY_TIMEOUT:g} s."
    )


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``inspector serve`` to an argparse subparsers object; run it with :func:`cmd`."""
    p = subparsers.add_parser(
        "serve",
        help="serve the scripted scenarios over HTTP (an Anthropic-compatible fake API with faults) for any client",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(func=cmd)
    return p


def _fail(message: str) -> int:
    from inspector.cli.common import say

    say(f"inspector serve: {message}")
    return 2


def _app_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ServeApp keywords the options choose (recording loaded here: a bad file is a one-line error)."""
    options: dict[str, Any] = {
        "lenient": args.lenient,
        "strict": args.strict,
        "max_body": args.max_body,
        "history": args.history,
    }
    if getattr(args, "recording", None):
        from inspector.net.recorded import RecordingSource

        options["recording"] = RecordingSource.load(args.recording)
    return options


def _announce(args: argparse.Namespace, url: str, faults: Any, options: dict[str, Any]) -> None:
    """What is served and the address to point a harness at, in full, on stderr (and stdout when it is piped)."""
    source = options.get("recording")
    what = f"recording {source.name} ({len(source.turns)} turns)" if source is not None else f"scenario {args.scenario}"
    openai_recording = source is not None and source.family != "anthropic"
    if source is not None and openai_recording:
        from inspector.net.recorded import FAMILY_NAMES, FAMILY_PATHS

        what = f"recording {source.name} ({len(source.turns)} turns, {FAMILY_NAMES[source.family]}: POST "
        what += f"{FAMILY_PATHS[source.family]})"
    lines = [f"inspector serve: {what}, faults {faults_key(faults)}, speed {speed_label(args.speed)}"]
    if source is not None:
        lines += [f"warning: {w}" for w in source.warnings]
    # the same scenarios in OpenAI's formats, or a recording of an OpenAI session
    openai_line = f"OPENAI_BASE_URL={url}/v1" if source is None or openai_recording else None
    # (a recording of an OpenAI session answers no Messages request: no Anthropic address then)
    anthropic_line = None if openai_recording else f"ANTHROPIC_BASE_URL={url}"
    lines += [line for line in (openai_line, anthropic_line) if line is not None]
    from inspector.core.fmt import terminal

    lines = [terminal(line) for line in lines]  # a recording's name and warnings can hold control characters
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
    if not sys.stdout.isatty():  # scripts read the address from stdout (the Anthropic one second, as ever)
        print(lines[0])
        for line in (anthropic_line, openai_line):
            if line is not None:
                print(line)
        sys.stdout.flush()


def cmd(args: argparse.Namespace) -> int:
    """Run ``inspector serve`` (blocks until Ctrl-C). Exit codes: 0 ok, 2 usage error."""
    if args.list_faults:
        print(faults_doc())
        return 0
    problem = port_problem(args.port)
    if problem:
        return _fail(problem)
    if getattr(args, "tui", False):
        from inspector.cli.common import stops_raise

        with stops_raise():  # (before the dashboard runs: its recording, made empty, says nothing ran)
            return _cmd_tui(args)
    if getattr(args, "record", None):
        return _fail("--record goes with --tui (headless: inspector watch --serve ... --record, or proxy --record)")

    from inspector.cli.common import say

    def printer(ex: Exchange) -> None:
        say(format_exchange(ex))

    try:
        faults = parse_faults(args.fault)
        options = _app_options(args)
        app = ServeApp(
            args.scenario,
            faults,
            speed=args.speed,
            validate_history=not args.no_history_check,
            on_exchange=None if args.quiet else printer,
            **options,
        )
    except InspectorError as e:
        return _fail(str(e))
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as e:
        return _fail(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
    url = base_url_of(sock)

    def listening() -> None:  # announced once uvicorn listens: a client may connect as soon as it reads the line
        _announce(args, url, faults, options)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: listening on {args.host}, not loopback only", file=sys.stderr)

    stopped_by: int | None = None
    try:
        stopped_by = run_foreground(app, sock, log_level=args.log_level, on_ready=listening)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    end_by_signal(stopped_by)  # SIGTERM / SIGHUP: the process ends by it, as it did when uvicorn raised it
    return 0


def _cmd_tui(args: argparse.Namespace) -> int:
    """``serve --tui``: the dashboard watches what the server sends (through a recording proxy in front of it).
    The arguments are validated by building a ServeApp (scenario, faults), which binds and starts nothing: the
    dashboard's session starts the servers. The address is chosen (an ephemeral port is picked) and printed
    before the dashboard opens."""
    try:
        faults = parse_faults(args.fault)
        options = _app_options(args)
        ServeApp(args.scenario, faults, speed=args.speed, **options)
        record = getattr(args, "record", None)
        if record:
            from inspector.cli.common import record_problem

            problem = record_problem(record)
            if problem:
                return _fail(problem)
        probe = bind_socket(args.host, args.port)  # the port is free now (the session binds it again)
        port = probe.getsockname()[1]
        url = base_url_of(probe)
        probe.close()
    except InspectorError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
    from inspector.cli.watch import attach_to_watch, follow_watch
    from inspector.sessions.watch import WatchSession, serve_session
    from inspector.tui.app import run_dashboard

    follower, problem = follow_watch(getattr(args, "watch_link", None))  # (`watch --split --serve`'s dashboard pane)
    if problem:
        return _fail(problem)
    _announce(args, url, faults, options)

    def factory(**_: Any) -> WatchSession:
        session = serve_session(
            args.scenario,
            faults,
            speed=args.speed,
            host=args.host,
            port=port,
            validate_history=not args.no_history_check,
            record=record,
            **options,
        )
        attach_to_watch(follower, session)
        return session

    from inspector.cli.common import DashboardStops, record_if_nothing_ran

    stops = DashboardStops()  # SIGTERM, SIGHUP, kill -INT: the dashboard quits as on `q`, then exit 128 + N
    # (ignored below) tui.app.ControllerLike declares `state` a settable attribute, WatchController's is a read-only
    # property (the dashboard only reads it); the Protocol is to say `@property def state` (tui is not ours here)
    try:
        with stops:
            run_dashboard(factory, source={"type": "serve", "name": args.scenario}, made=stops.made)
    finally:
        record_if_nothing_ran(record, {"type": "serve", "name": args.scenario, "listen": url})
    stops.raise_if_stopped()  # (once the session is closed: its recording ended)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.cli.serve ...`` (the same options as ``inspector serve``)."""
    p = argparse.ArgumentParser(prog="inspector serve", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    from inspector.cli.common import Stopped

    try:
        return cmd(p.parse_args(argv))
    except Stopped as e:  # (SIGTERM / SIGHUP to the dashboard: as cli.main says it)
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())

"""`inspector proxy`: the command line of the recording proxy (see inspector/net/proxy.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from inspector.cli.common import (
    DashboardStops,
    Stopped,
    interactive,
    record_error,
    record_if_nothing_ran,
    record_problem,
    say,
    stops_raise,
)
from inspector.core.redaction import credential_values
from inspector.net.proxy import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_UPSTREAM,
    ProxyApp,
    ProxyExchange,
    format_exchange,
)
from inspector.net.server import base_url_of, bind_socket
from inspector.observe import observations as O

if TYPE_CHECKING:
    import ssl

# =====================================================================================================================
# CLI
# =====================================================================================================================


def parse_listen(value: str) -> tuple[str, int]:
    """``127.0.0.1:8787``, ``[::1]:8787``, ``:8787`` or ``8787`` -> (host, port); the host defaults to 127.0.0.1."""
    v = value.strip()
    host, port = "127.0.0.1", v
    if v.startswith("["):
        host, _, rest = v[1:].partition("]")
        port = rest.lstrip(":")
    elif ":" in v:
        host, _, port = v.rpartition(":")
        host = host or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--listen needs HOST:PORT, not {value!r}") from None
    if not 0 <= p <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range in {value!r}")
    return host, p


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.cli.run import add_otel_arguments

    add_otel_arguments(p)  # --otel, --otel-content: one parent span per conversation
    p.add_argument(
        "--listen",
        type=parse_listen,
        default=("127.0.0.1", 8787),
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:8787; port 0: ephemeral)",
    )
    p.add_argument("--upstream", default=DEFAULT_UPSTREAM, help=f"where to forward (default {DEFAULT_UPSTREAM})")
    p.add_argument(
        "--openai-upstream",
        metavar="URL",
        help="where OpenAI-format requests go, with its /v1 (a client's OPENAI_BASE_URL is this proxy's address + "
        "/v1); /v1/messages and requests with an anthropic-version header still go to --upstream (default: every "
        "request to --upstream)",
    )
    p.add_argument("--record", metavar="FILE", help="write a recording (JSON Lines) of every exchange (default: none)")
    p.add_argument(
        "--headless",
        action="store_true",
        help="no dashboard: one line per exchange on stderr (default: the dashboard on a terminal)",
    )
    p.add_argument("--quiet", action="store_true", help="with --headless: no per-exchange lines (default: off)")
    p.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"upstream connections at once, i.e. streams in flight; past it a request gets 503 at once "
        f"(default {DEFAULT_MAX_CONNECTIONS})",
    )
    p.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="S",
        help=f"seconds for upstream to accept a connection; then 504 (default {DEFAULT_CONNECT_TIMEOUT:g})",
    )
    p.add_argument(
        "--read-timeout",
        type=_seconds,
        default=DEFAULT_READ_TIMEOUT,
        metavar="S",
        help=f"seconds upstream may stay silent: before its headers (then 504) or between two reads, pings "
        f"included (then the stream is dropped) (default {DEFAULT_READ_TIMEOUT:g}, like the SDK)",
    )
    from inspector.cli.serve import parse_size
    from inspector.net.proxy import DEFAULT_MAX_CLIENTS, FD_RESERVE
    from inspector.net.serve import BODY_TIMEOUT, DEFAULT_MAX_BODY, HEADER_TIMEOUT, KEEP_ALIVE

    p.add_argument(
        "--max-body",
        type=parse_size,
        default=DEFAULT_MAX_BODY,
        metavar="SIZE",
        help=f"largest request body, e.g. 32MiB; larger ones get 413 request_too_large and are not forwarded "
        f"(default {DEFAULT_MAX_BODY} bytes = 32 MiB, the API's)",
    )
    p.add_argument(
        "--max-clients",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"client connections open at once; past it a new connection gets 503 at once and is closed (default "
        f"{DEFAULT_MAX_CLIENTS}, at most half of the open-file limit less {FD_RESERVE})",
    )
    p.add_argument(
        "--keep-alive",
        type=_seconds,
        default=KEEP_ALIVE,
        metavar="S",
        help=f"seconds an idle client connection (a new one too) stays open (default {KEEP_ALIVE:g})",
    )
    p.add_argument(
        "--header-timeout",
        type=_seconds,
        default=HEADER_TIMEOUT,
        metavar="S",
        help=f"seconds from a request's first byte to the end of its headers; then the connection is closed "
        f"(default {HEADER_TIMEOUT:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=_seconds,
        default=BODY_TIMEOUT,
        metavar="S",
        help=f"seconds to receive a whole request body; then 408 (default {BODY_TIMEOUT:g})",
    )
    p.add_argument(
        "--fault",
        action="append",
        metavar="NAME[:ARG][@once|@turn]",
        help="inject a fault into the live streams (repeatable; the header x-inspector-fault chooses per request); "
        "the stream faults of `inspector serve --list-faults`; @once: one turn only (the default of drop, stall and "
        "error faults), @turn: every turn (default: none)",
    )
    tls = p.add_mutually_exclusive_group()
    tls.add_argument(
        "--ca-file",
        metavar="PATH",
        help="verify upstream's TLS certificate against the CA certificate(s) in this PEM file only, e.g. a private "
        "CA (default: the SDK's trust store; SSL_CERT_FILE applies)",
    )
    tls.add_argument(
        "--insecure",
        action="store_true",
        help="do NOT verify upstream's TLS certificate: for a local relay only, anyone on the way can read the API "
        "key (default: verified; a warning is printed at start)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    from inspector.cli.watch import WATCH_LINK_HELP

    p.add_argument("--watch-link", metavar="PATH", help=WATCH_LINK_HELP)


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a whole number, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1, not {n}")
    return n


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs seconds, not {value!r}") from None
    if not s > 0 or s == float("inf"):
        raise argparse.ArgumentTypeError(f"needs a positive number of seconds, not {value!r}")
    return s


def proxy_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ProxyApp keywords the command line chose (FaultError for a bad --fault)."""
    from inspector.net.livefaults import parse_live_faults

    options: dict[str, Any] = {
        "max_connections": getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS),
        "connect_timeout": getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        "read_timeout": getattr(args, "read_timeout", DEFAULT_READ_TIMEOUT),
        "faults": parse_live_faults(getattr(args, "fault", None)),
        "fault_header": True,
    }
    for name in ("max_body", "max_clients", "keep_alive", "header_timeout", "body_timeout"):
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value
    ca_file, insecure = getattr(args, "ca_file", None), getattr(args, "insecure", False)
    if ca_file or insecure:
        options["ssl_context"] = tls_context(ca_file, insecure)
    return options


def tls_context(ca_file: str | None, insecure: bool) -> ssl.SSLContext:
    """Upstream's TLS context for ``--ca-file`` / ``--insecure`` (UsageError: a CA file that cannot be used)."""
    import ssl

    from inspector.core.errors import UsageError
    from inspector.net.upstream import upstream_ssl_context

    try:
        return upstream_ssl_context(ca_file, insecure)
    except (OSError, ssl.SSLError) as e:
        why = getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__
        raise UsageError(f"--ca-file {ca_file}: not a usable PEM CA certificate file ({why})") from None


def tls_note(args: argparse.Namespace) -> str:
    """What the start-up line says about upstream's TLS ("" for the default)."""
    if getattr(args, "insecure", False):
        return ", TLS NOT VERIFIED (--insecure)"
    if getattr(args, "ca_file", None):
        return f", TLS verified against {args.ca_file}"
    return ""


INSECURE_WARNING = (
    "--insecure: upstream's TLS certificate is NOT verified; anyone between the proxy and {upstream} can read "
    "the API key and change the answers"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``inspector proxy`` to an argparse subparsers object; run it with :func:`cmd`."""
    p = subparsers.add_parser(
        "proxy",
        help="a recording pass-through proxy in front of the API, to watch another harness",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(func=cmd)
    return p


def cmd(args: argparse.Namespace, *, bus: O.ObservationBus | None = None) -> int:
    """Run ``inspector proxy`` until Ctrl-C. ``bus``: an ObservationBus to publish to (the dashboard's)."""
    from inspector.core.errors import InspectorError

    try:
        options = proxy_options(args)
    except InspectorError as e:
        say(f"inspector proxy: {e}")
        return 2
    if getattr(args, "otel_content", False) and not getattr(args, "otel", False):
        say("inspector proxy: --otel-content goes with --otel")
        return 2
    host, port = args.listen
    openai_upstream = getattr(args, "openai_upstream", None)
    credential_values((), args.upstream)  # learned process-wide: the lines that name upstream mask its key
    if openai_upstream:
        credential_values((), openai_upstream)
    from inspector.sessions.launch import upstream_problem

    for where, named in ((args.upstream, "--upstream"), (openai_upstream, "--openai-upstream")):
        bad = upstream_problem(where) if where else None
        if bad:  # (every request would be a 502: as watch says it, before anything listens)
            say(f"inspector proxy: {named}: {bad}")
            return 2
    try:
        sock = bind_socket(host, port)
    except OSError as e:
        say(f"inspector proxy: cannot listen on {host}:{port}: {e.strerror or e}")
        return 2
    url = base_url_of(sock)
    quiet = getattr(args, "quiet", False)
    if args.headless or bus is not None or not interactive():
        sock.listen(2048)  # connections to the printed address queue until uvicorn accepts: none is refused

    def printer(ex: ProxyExchange) -> None:
        # the conversation is named once the proxy has seen more than one ([c2] turn 1)
        many = proxy.tracker.conversations.count > 1
        say(format_exchange(ex, many))  # (its reason can quote upstream's bytes: masked)

    def warn(message: str) -> None:
        say(f"inspector proxy: warning: {message}")

    if not args.headless and bus is None:
        if interactive():  # a terminal, or a browser through textual-serve (watch --split outside tmux)
            problem = record_problem(args.record) if args.record else None
            if problem:
                sock.close()
                say(f"inspector proxy: {problem}")
                return 2
            with stops_raise():  # (before the dashboard runs: its recording, made empty above, says nothing ran)
                return _cmd_tui(args, host, sock, options)
        say("inspector proxy: stdout is not a terminal: running headless")
    close_otel: Callable[[], None] | None = None
    if getattr(args, "otel", False):
        from inspector.cli.run import otel_for_conversations
        from inspector.core.errors import UsageError

        bus = bus if bus is not None else O.ObservationBus()
        try:
            close_otel = otel_for_conversations(bus, args, lambda: list(getattr(proxy, "secrets", ()) or ()))
        except UsageError as e:
            sock.close()
            say(f"inspector proxy: {e}")
            return 2
    proxy = ProxyApp(
        args.upstream,
        # a key in --upstream (https://user:KEY@relay/..., ?api_key=): a secret of the recording and of every output
        secrets=credential_values((), args.upstream),
        openai_upstream=openai_upstream,
        record=args.record,
        bus=bus,
        on_exchange=None if quiet else printer,
        listen=url,
        on_warning=warn,
        **options,
    )
    try:
        proxy.open_recording()  # before serving: an unwritable path is a usage error, not a failure per request
    except OSError as e:
        sock.close()
        say(f"inspector proxy: {record_error(args.record, e)}")
        return 2
    faults = f", faults {proxy.faults}" if proxy.faults else ""
    if getattr(args, "insecure", False):
        warn(INSECURE_WARNING.format(upstream=proxy.upstream))
    print(
        f"inspector proxy: {url} -> {proxy.upstream}{_openai_note(proxy.openai_upstream)}{faults}{tls_note(args)}"
        + (f", recording to {args.record}" if args.record else "")
    )
    print(f"ANTHROPIC_BASE_URL={url}")
    if proxy.openai_upstream:
        print(f"OPENAI_BASE_URL={url}/v1")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}, not loopback only", file=sys.stderr)
    sys.stdout.flush()
    from inspector.net.server import end_by_signal, run_foreground

    stopped_by: int | None = None
    try:
        stopped_by = run_foreground(proxy, sock, log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
        sock.close()
        if close_otel is not None:
            close_otel()  # the open conversations' spans end, the exporter is flushed (bounded)
        for failure in proxy.bus.errors if proxy.bus is not None else ():  # (what failed inside, not stopping it)
            print(f"inspector proxy: warning: {failure}", file=sys.stderr)
    end_by_signal(stopped_by)  # SIGTERM / SIGHUP: the process ends by it, once the above is done
    return 0


def _openai_note(openai_upstream: str | None) -> str:
    """What the start-up line says about the OpenAI upstream ("" without one)."""
    return f" (OpenAI-format requests -> {openai_upstream.rstrip('/')})" if openai_upstream else ""


def _cmd_tui(args: argparse.Namespace, host: str, sock: Any, options: dict[str, Any]) -> int:
    """The dashboard watches the other harness through the proxy (each of its requests is a turn)."""
    from inspector.cli.watch import attach_to_watch, follow_watch
    from inspector.sessions.watch import WatchSession, proxy_session
    from inspector.tui.app import run_dashboard

    url = base_url_of(sock)
    port = sock.getsockname()[1]  # the real port, also when --listen asked for an ephemeral one
    sock.close()  # the session binds its own (and binds again on restart)
    follower, problem = follow_watch(getattr(args, "watch_link", None))  # (`watch --split`'s dashboard pane)
    if problem:
        say(f"inspector proxy: {problem}")
        return 2
    if getattr(args, "insecure", False):
        sys.stderr.write("inspector proxy: warning: " + INSECURE_WARNING.format(upstream=args.upstream) + "\n")
    openai_upstream = getattr(args, "openai_upstream", None)
    sys.stderr.write(
        f"inspector proxy: {url} -> {args.upstream}{_openai_note(openai_upstream)}{tls_note(args)}\n"
        f"ANTHROPIC_BASE_URL={url}\n" + (f"OPENAI_BASE_URL={url}/v1\n" if openai_upstream else "")
    )
    sys.stderr.flush()

    closes: list[Callable[[], None]] = []

    def factory(**_: Any) -> WatchSession:
        session = proxy_session(
            args.upstream, host, port, record=args.record, openai_upstream=getattr(args, "openai_upstream", None)
        )
        for k, v in options.items():  # the proxy's limits, timeouts and faults
            setattr(session.proxy, k, v)
        if getattr(args, "otel", False):  # each session (a restart makes a new one) exports its traces
            from inspector.cli.run import otel_for_conversations

            closes.append(otel_for_conversations(session.bus, args, lambda: session.secrets))
        attach_to_watch(follower, session)
        return session

    stops = DashboardStops()  # SIGTERM, SIGHUP, kill -INT: the dashboard quits as on `q`, then exit 128 + N
    try:
        with stops:
            # (ignored below) tui.app.ControllerLike declares `state` a settable attribute, WatchController's is a
            # read-only property (the dashboard only reads it); the Protocol is to say `@property def state`
            run_dashboard(factory, source={"type": "proxy", "upstream": args.upstream}, made=stops.made)
    finally:
        for close in closes:
            close()
        record_if_nothing_ran(args.record, {"type": "proxy", "upstream": args.upstream, "listen": url})
    stops.raise_if_stopped()  # (once the session is closed and the spans flushed)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.cli.proxy ...`` (the same options as ``inspector proxy``)."""
    import os

    from inspector.core.redaction import OutputGuard

    p = argparse.ArgumentParser(prog="inspector proxy", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    with OutputGuard(os.environ):  # as `inspector proxy` (inspector.cli.main) has it
        try:
            return cmd(p.parse_args(argv))
        except Stopped as e:  # (SIGTERM / SIGHUP to the dashboard: as cli.main says it)
            return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())

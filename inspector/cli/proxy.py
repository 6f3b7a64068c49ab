"""`inspector proxy`: the command line of the recording proxy (see inspector/net/proxy.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from inspector.agent import observations as O
from inspector.net.proxy import DEFAULT_UPSTREAM, ProxyApp, ProxyExchange, format_exchange
from inspector.net.server import base_url_of, bind_socket

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
    p.add_argument(
        "--listen",
        type=parse_listen,
        default=("127.0.0.1", 8787),
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:8787; port 0: ephemeral)",
    )
    p.add_argument("--upstream", default=DEFAULT_UPSTREAM, help=f"where to forward (default {DEFAULT_UPSTREAM})")
    p.add_argument("--record", metavar="FILE", help="write a recording (JSON Lines) of every exchange")
    p.add_argument("--headless", action="store_true", help="no dashboard: one line per exchange on stderr")
    p.add_argument("--quiet", action="store_true", help="with --headless: no per-exchange lines")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``inspector proxy`` to an argparse subparsers object; run it with :func:`cmd`."""
    p = subparsers.add_parser(
        "proxy",
        help="a recording pass-through proxy in front of the API, to watch another harness",
        description=__doc__.split("\n\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(func=cmd)
    return p


def _record_error(path: Any, e: OSError) -> str:
    return f"cannot write the recording {path}: {e.strerror or e}"


def record_problem(path: str | Path) -> str | None:
    """Why a recording cannot be written at ``path`` (None when it can). Opens it for appending, which creates an
    empty file when missing and leaves an existing one as it is (the writer truncates it when it opens)."""
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        return _record_error(path, e)
    return None


def cmd(args: argparse.Namespace, *, bus: O.ObservationBus | None = None) -> int:
    """Run ``inspector proxy`` until Ctrl-C. ``bus``: an ObservationBus to publish to (the dashboard's)."""
    host, port = args.listen
    try:
        sock = bind_socket(host, port)
    except OSError as e:
        sys.stderr.write(f"inspector proxy: cannot listen on {host}:{port}: {e.strerror or e}\n")
        return 2
    url = base_url_of(sock)
    quiet = getattr(args, "quiet", False)

    def printer(ex: ProxyExchange) -> None:
        sys.stderr.write(format_exchange(ex) + "\n")
        sys.stderr.flush()

    if not args.headless and bus is None:
        if sys.stdout.isatty():
            problem = record_problem(args.record) if args.record else None
            if problem:
                sock.close()
                sys.stderr.write(f"inspector proxy: {problem}\n")
                return 2
            return _cmd_tui(args, host, port, sock)
        sys.stderr.write("inspector proxy: stdout is not a terminal: running headless\n")
    proxy = ProxyApp(args.upstream, record=args.record, bus=bus, on_exchange=None if quiet else printer, listen=url)
    try:
        proxy.open_recording()  # before serving: an unwritable path is a usage error, not a failure per request
    except OSError as e:
        sock.close()
        sys.stderr.write(f"inspector proxy: {_record_error(args.record, e)}\n")
        return 2
    print(f"inspector proxy: {url} -> {proxy.upstream}" + (f", recording to {args.record}" if args.record else ""))
    print(f"ANTHROPIC_BASE_URL={url}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}, not loopback only", file=sys.stderr)
    sys.stdout.flush()
    from inspector.net.server import run_foreground

    try:
        run_foreground(proxy, sock, log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
        sock.close()
    return 0


def _cmd_tui(args: argparse.Namespace, host: str, port: int, sock: Any) -> int:
    """The dashboard watches the other harness through the proxy (each of its requests is a turn)."""
    from inspector.sessions.watch import proxy_session
    from inspector.tui.app import run_dashboard

    sock.close()  # the session binds its own (and binds again on restart)

    def factory(**_: Any):
        return proxy_session(args.upstream, host, port, record=args.record)

    run_dashboard(factory, source={"type": "proxy", "upstream": args.upstream})
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m inspector.cli.proxy ...`` (the same options as ``inspector proxy``)."""
    p = argparse.ArgumentParser(prog="inspector proxy", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    return cmd(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

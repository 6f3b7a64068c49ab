"""`inspector web`: the dashboard in a browser (textual-serve) on 127.0.0.1."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.cli.common import EXIT_OK


def add_parser(sub: Any) -> None:
    w = sub.add_parser("web", help="serve the dashboard to a browser (textual-serve) on 127.0.0.1")
    w.add_argument("--host", default="127.0.0.1")
    w.add_argument("--port", type=int, default=8000)
    w.add_argument("--scenario", default=None)

    w.set_defaults(func=cmd)


def cmd(args: argparse.Namespace) -> int:
    from inspector.tui.web import serve_web

    print(f"serving the dashboard on http://{args.host}:{args.port}")
    serve_web(["--scenario", args.scenario] if args.scenario else [], host=args.host, port=args.port)
    return EXIT_OK

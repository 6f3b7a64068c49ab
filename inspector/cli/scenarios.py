"""`inspector scenarios`: list the built-in scenarios (without importing the SDK)."""

from __future__ import annotations

import argparse

from inspector.cli.common import EXIT_OK
from inspector.core.fmt import terminal


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios")
    p.set_defaults(func=cmd)


def cmd(args: argparse.Namespace) -> int:
    from inspector.scenarios.bundled import describe

    listing = describe()  # name and description: no file is loaded (checked) for a listing
    width = max(len(n) for n, _ in listing)
    for name, description in listing:
        print(terminal(f"{name:<{width}}  {description}"))
    return EXIT_OK

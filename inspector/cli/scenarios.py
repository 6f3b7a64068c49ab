"""`inspector scenarios`: list the built-in scenarios (without importing the SDK)."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.cli.common import EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios")
    p.set_defaults(func=cmd)


def cmd(args: argparse.Namespace) -> int:
    from inspector.scenarios.bundled import SCENARIOS

    width = max(len(n) for n in SCENARIOS)
    for name, sc in SCENARIOS.items():
        print(f"{name:<{width}}  {sc.description}")
    return EXIT_OK

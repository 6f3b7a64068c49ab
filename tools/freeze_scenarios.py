"""Print the sha256 of every bundled scenario's rendered turns (status, headers, read delays and bytes, end), per
turn and attempt, as JSON: the fixture tests/fixtures/bundled_render_sha256.json was made by this script from the
Python definitions the scenario files replaced.

    PYTHONPATH=. python tools/freeze_scenarios.py > tests/fixtures/bundled_render_sha256.json
"""

from __future__ import annotations

import hashlib
import json

from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.render import render_turn

ATTEMPTS = 4


def plan_digest(plan) -> str:
    h = hashlib.sha256()
    h.update(f"{plan.status}|{sorted(plan.headers.items())}|{plan.end}|{plan.header_delay!r}".encode())
    for r in plan.reads:
        h.update(f"|{r.delay!r}|{len(r.data)}|".encode())
        h.update(r.data)
    return h.hexdigest()


def digests() -> dict[str, list[list[str]]]:
    return {
        name: [[plan_digest(render_turn(sc, t, a)) for a in range(ATTEMPTS)] for t in range(len(sc.turns))]
        for name, sc in SCENARIOS.items()
    }


if __name__ == "__main__":
    print(json.dumps(digests(), indent=1))

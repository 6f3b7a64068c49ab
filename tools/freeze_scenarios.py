"""Print the sha256 of every bundled scenario's rendered turns (status, headers, read delays and bytes, end), per
turn and attempt, as JSON. The fixture tests/scenarios/fixtures/bundled_render_sha256.json was made by this script
from the Python definitions the scenario files replaced (that migration scaffold is gone: the fixture now pins those
bytes). Rewrite the fixture only for a change of the rendered bytes made on purpose, and say which in the commit.

    PYTHONPATH=. python tools/freeze_scenarios.py > tests/scenarios/fixtures/bundled_render_sha256.json
"""

from __future__ import annotations

import json

from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.render import render_turn
from inspector.testing.digests import ATTEMPTS, plan_digest


def digests() -> dict[str, list[list[str]]]:
    return {
        name: [[plan_digest(render_turn(sc, t, a)) for a in range(ATTEMPTS)] for t in range(len(sc.turns))]
        for name, sc in SCENARIOS.items()
    }


if __name__ == "__main__":
    print(json.dumps(digests(), indent=1))

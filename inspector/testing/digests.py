"""Digests of rendered scenario turns (status, headers, read delays and bytes, end): what the byte-equality tests of
the scenario files compare, and what tools/freeze_scenarios.py prints."""

from __future__ import annotations

import hashlib

from inspector.scenarios.render import ResponsePlan

ATTEMPTS = 4


def plan_digest(plan: ResponsePlan) -> str:
    h = hashlib.sha256()
    h.update(f"{plan.status}|{sorted(plan.headers.items())}|{plan.end}|{plan.header_delay!r}".encode())
    for r in plan.reads:
        h.update(f"|{r.delay!r}|{len(r.data)}|".encode())
        h.update(r.data)
    return h.hexdigest()

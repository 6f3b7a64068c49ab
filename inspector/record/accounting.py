"""Usage, cost and cache verdicts per attempt, turn and session, for a recording's dump (``dump --json``,
``--timing``) and any other sink that has the turns' messages and the requests as sent.

Every attempt counts, failed ones too (labelled ``failed``: a cut stream was billed for what it produced). Each
attempt is priced on its own, then summed. A turn's cache verdict compares its request with the previous turn's,
in the same conversation (one recording = one conversation until requests carry a conversation id).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from inspector.observe.usage import ZERO, Family, Usage, family_of_usage, from_wire
from inspector.record.cachebreak import CacheVerdict, explain
from inspector.record.cost import FREE, Cost, price, price_source


@dataclass(frozen=True)
class AttemptCost:
    usage: Usage
    cost: Cost
    failed: bool

    def to_json(self) -> dict:
        out: dict[str, Any] = {"usage": self.usage.to_json(), "cost": self.cost.to_json()}
        if self.failed:
            out["failed"] = True
        return out


def _usage_of(entry: dict) -> tuple[Usage, str | None, Family]:
    found = entry.get("message")
    msg: dict = found if isinstance(found, dict) else {}
    raw = msg.get("usage")
    named = entry.get("family")
    family: Family = "openai" if isinstance(named, str) and named.startswith("openai") else family_of_usage(raw)
    if entry.get("family") == "anthropic":
        family = "anthropic"
    model = msg.get("model") if isinstance(msg.get("model"), str) else None
    return from_wire(raw, family), model, family


def attempt_cost(entry: dict, failed: bool = False) -> AttemptCost:
    usage, model, family = _usage_of(entry)
    return AttemptCost(usage, price(usage, model, family) if usage.reported else FREE, failed)


@dataclass(frozen=True)
class Request:
    """A turn's request as sent: its parsed body and when it was sent (seconds on the recording's clock)."""

    body: Any
    t: float | None


def account(turns: Sequence[dict], requests: Sequence[Request | None]) -> dict:
    """Adds ``usage``, ``cost`` and ``cache`` to each turn entry (in place) and returns the session's totals.
    ``requests[i]`` is turn i's last attempt's request (None when not kept)."""
    total_usage, total_cost = ZERO, FREE
    prev: tuple[Request | None, Usage] | None = None
    for i, t in enumerate(turns):
        attempts = [attempt_cost(a, failed=True) for a in t.get("failed_attempts") or [] if isinstance(a, dict)]
        attempts.append(attempt_cost(t))
        usage = sum((a.usage for a in attempts), ZERO)
        cost = FREE
        for a in attempts:
            cost = cost + a.cost
        last = attempts[-1]
        req = requests[i] if i < len(requests) else None
        verdict: CacheVerdict
        if prev is None:
            verdict = explain(None, None, last.usage, None, None)
        else:
            prev_req, prev_usage = prev
            gap = req.t - prev_req.t if req and prev_req and req.t is not None and prev_req.t is not None else None
            verdict = explain(
                prev_req.body if prev_req else None, req.body if req else None, last.usage, prev_usage, gap
            )
        t["usage"] = usage.to_json()
        t["cost"] = cost.to_json()
        t["cache"] = verdict.to_json()
        if len(attempts) > 1:
            t["attempt_costs"] = [a.to_json() for a in attempts]
        total_usage, total_cost = total_usage + usage, total_cost + cost
        prev = (req, last.usage)
    return {"usage": total_usage.to_json(), "cost": total_cost.to_json(), "price_source": price_source()}


def requests_of(recording_turns: Iterable[Any]) -> list[Request | None]:
    """Each recorded turn's last attempt's request (a ``Recording.turns`` item has ``attempts``)."""
    out: list[Request | None] = []
    for turn in recording_turns:
        attempts = getattr(turn, "attempts", None) or []
        if not attempts:
            continue
        req = attempts[-1].request
        if isinstance(req, dict):
            t = req.get("t")
            out.append(Request(req.get("body"), float(t) if isinstance(t, int | float) else None))
        else:
            out.append(None)
    return out


def _tokens(u: dict) -> str:
    parts = [f"in {u['input_tokens']:,}", f"out {u['output_tokens']:,}"]
    if u.get("cache_write_tokens"):
        split = ""
        if "cache_write_5m_tokens" in u:
            split = f" (5m {u['cache_write_5m_tokens']:,} / 1h {u['cache_write_1h_tokens']:,})"
        parts.append(f"cache write {u['cache_write_tokens']:,}{split}")
    if u.get("cache_read_tokens"):
        parts.append(f"cache read {u['cache_read_tokens']:,}")
    if u.get("reasoning_tokens"):
        parts.append(f"reasoning {u['reasoning_tokens']:,}")
    for k, v in (u.get("server_tool_uses") or {}).items():
        parts.append(f"{k} {v}")
    return " · ".join(parts)


def _usd(c: dict) -> str:
    if c.get("usd") is None:
        return str(c.get("unpriced") or "unpriced")
    v = c["usd"]
    return "$0" if v == 0 else (f"${v:.4f}" if v < 0.01 else f"${v:.3f}")


def format_accounting(turns: Sequence[dict], totals: dict) -> str:
    """The text report's usage, cost and cache section (``dump --timing``)."""
    lines = ["usage and cost"]
    for t in turns:
        u, c, cache = t.get("usage") or {}, t.get("cost") or {}, t.get("cache") or {}
        rate = u.get("cache_hit_rate")
        hit = "-" if rate is None else f"{rate:.0%}"
        lines.append(f"  turn {int(t.get('turn', 0)) + 1}: {_tokens(u)}  cost {_usd(c)}  cache hit {hit}")
        if cache.get("kind") == "written_again":
            lines.append(f"    {cache.get('reason')}")
        for i, a in enumerate(t.get("attempt_costs") or []):
            if a.get("failed"):
                lines.append(f"    attempt {i + 1} (failed): {_tokens(a['usage'])}  cost {_usd(a['cost'])}")
    tu, tc = totals["usage"], totals["cost"]
    rate = tu.get("cache_hit_rate")
    lines.append(f"  total: {_tokens(tu)}  cost {_usd(tc)}  cache hit {'-' if rate is None else f'{rate:.0%}'}")
    lines.append(f"  {totals['price_source']}")
    return "\n".join(lines)

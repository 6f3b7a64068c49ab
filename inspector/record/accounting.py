"""Usage, cost and cache verdicts per attempt, turn and session, for a recording's dump (``dump --json``,
``--timing``) and any other sink that has the turns' messages and the requests as sent.

Every attempt counts, failed ones too (labelled ``failed``: a cut stream was billed for what it produced). Each
attempt is priced on its own, then summed. A turn's cache verdict compares its request with the previous turn's
of the same conversation (a proxy recording's turns name theirs; the loop's own recordings are one conversation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from inspector.core.fmt import count
from inspector.observe import observations as O
from inspector.observe.usage import ZERO, Family, Usage, family_of_usage, from_wire
from inspector.record.cachebreak import CacheVerdict, explain
from inspector.record.cost import FREE, NOT_REPORTED, USAGE_NOT_REPORTED, Cost, price, price_source, priced_as_note


@dataclass(frozen=True)
class AttemptCost:
    usage: Usage
    cost: Cost
    failed: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"usage": self.usage.to_json(), "cost": self.cost.to_json()}
        if self.failed:
            out["failed"] = True
        return out


def _usage_of(entry: dict[str, Any]) -> tuple[Usage, str | None, Family]:
    found = entry.get("message")
    msg: dict[str, Any] = found if isinstance(found, dict) else {}
    raw = msg.get("usage")
    named = entry.get("family")
    family: Family = "openai" if isinstance(named, str) and named.startswith("openai") else family_of_usage(raw)
    if entry.get("family") == "anthropic":
        family = "anthropic"
    model = msg.get("model") if isinstance(msg.get("model"), str) else None
    return from_wire(raw, family), model, family


def _answered(entry: dict[str, Any]) -> bool:
    """Whether an attempt got the model's answer (a message with an id), not an error body or nothing."""
    msg = entry.get("message")
    return isinstance(msg, dict) and isinstance(msg.get("id"), str) and msg.get("type") != "error"


def attempt_cost(entry: dict[str, Any], failed: bool = False) -> AttemptCost:
    """An attempt's usage and cost. Without usage from the API: $0 when nothing was answered (an HTTP error, a
    refused connection), unknown (``NOT_REPORTED``) when an answer came without it."""
    usage, model, family = _usage_of(entry)
    if not usage.reported:
        return AttemptCost(usage, NOT_REPORTED if _answered(entry) else FREE, failed)
    return AttemptCost(usage, price(usage, model, family), failed)


@dataclass(frozen=True)
class Request:
    """A turn's request as sent: its parsed body and when it was sent (seconds on the recording's clock)."""

    body: Any
    t: float | None


def turn_figures(
    attempts: Sequence[AttemptCost], req: Request | None, prev: tuple[Request | None, Usage] | None
) -> tuple[Usage, Cost, CacheVerdict]:
    """A turn's usage and cost (every attempt, failed ones too) and its cache verdict against ``prev`` (the previous
    turn of its conversation: its request and its last attempt's usage), as ``account`` and ``LiveAccounting``
    compute them."""
    usage = sum((a.usage for a in attempts), ZERO)
    cost = FREE
    for a in attempts:
        cost = cost + a.cost
    last = attempts[-1].usage if attempts else ZERO
    if not usage.reported and attempts and attempts[-1].cost.unpriced == USAGE_NOT_REPORTED:
        usage = dataclasses.replace(usage, unreported=1)  # answered without usage: a sum over turns says so
    if prev is None:
        return usage, cost, explain(None, None, last, None, None)
    prev_req, prev_usage = prev
    gap = req.t - prev_req.t if req and prev_req and req.t is not None and prev_req.t is not None else None
    verdict = explain(prev_req.body if prev_req else None, req.body if req else None, last, prev_usage, gap)
    return usage, cost, verdict


def turn_json(attempts: Sequence[AttemptCost], usage: Usage, cost: Cost, verdict: CacheVerdict) -> dict[str, Any]:
    out: dict[str, Any] = {"usage": usage.to_json(), "cost": cost.to_json(), "cache": verdict.to_json()}
    if len(attempts) > 1:
        out["attempt_costs"] = [a.to_json() for a in attempts]
    return out


def account(turns: Sequence[dict[str, Any]], requests: Sequence[Request | None]) -> dict[str, Any]:
    """Adds ``usage``, ``cost`` and ``cache`` to each turn entry (in place) and returns the session's totals.
    ``requests[i]`` is turn i's last attempt's request (None when not kept). A turn's cache verdict compares it with
    the previous turn of its own conversation (the entry's ``conversation``, as ``dump.conversations_of`` names it;
    none: one conversation), as the live accounting does."""
    total_usage, total_cost = ZERO, FREE
    prev: dict[Any, tuple[Request | None, Usage]] = {}
    for i, t in enumerate(turns):
        attempts = [attempt_cost(a, failed=True) for a in t.get("failed_attempts") or [] if isinstance(a, dict)]
        attempts.append(attempt_cost(t))
        req = requests[i] if i < len(requests) else None
        conversation = t.get("conversation")
        usage, cost, verdict = turn_figures(attempts, req, prev.get(conversation))
        t.update(turn_json(attempts, usage, cost, verdict))
        total_usage, total_cost = total_usage + usage, total_cost + cost
        prev[conversation] = (req, attempts[-1].usage)
    return {"usage": total_usage.to_json(), "cost": total_cost.to_json(), "price_source": price_source()}


def family_of_url(url: Any) -> Family | None:
    """The wire family a request's path names (an OpenAI endpoint), or None (Anthropic's, or unknown)."""
    if isinstance(url, str) and ("/chat/completions" in url or url.rstrip("/").endswith("/responses")):
        return "openai"
    return None


_warming: threading.Event | None = None  # set once the warm-up thread has loaded the prices


def warm_prices() -> None:
    """Import genai-prices and load its data on a thread of its own (~0.25-0.5 s), so the first attempt's end
    does not wait for it on the loop's thread."""
    global _warming
    if _warming is not None or "genai_prices" in sys.modules:
        return
    done = _warming = threading.Event()

    def load() -> None:
        try:
            with contextlib.suppress(Exception):  # not installed, or broken: price() says "unpriced" then
                price(Usage(input=1, reported=True), "claude-sonnet-4-6")  # the import, then the data's first use
        finally:
            done.set()

    threading.Thread(target=load, name="inspector-prices", daemon=True).start()


def prices_ready() -> bool:
    """False while the warm-up thread is still loading the prices (pricing now would wait for it)."""
    return _warming is None or _warming.is_set()


class LiveAccounting:
    """The same figures as :func:`account`, live: a bus subscriber that prices each attempt once, when it ends
    (genai-prices is imported on the first priced attempt, never per event), and computes each turn's usage, cost
    and cache verdict when the turn ends. ``on_turn`` gets one dict per turn::

        {"type": "turn_cost", "turn": 1, "usage": {...}, "cost": {...}, "cache": {...}}

    (``turn`` 1-based; ``conversation`` when a proxy named it; ``attempt_costs`` when the turn took more than one
    attempt). A proxy's conversations (``ConversationAssigned``) each compare with their own previous turn.
    Memory: the attempts of the turns still open (at most OPEN; a conversation's turn is closed when its next turn
    starts: a proxied turn whose attempts all failed never gets a TurnEnded), one previous request per conversation
    (at most KEEP_REQUESTS: each holds a whole history) and each conversation's totals (at most KEEP)."""

    KEEP = 10_000  # conversations whose totals are kept (the oldest forgotten first)
    KEEP_REQUESTS = 1_000  # conversations whose previous request is kept for the cache verdict
    OPEN = 1_024  # turns still open (past it, the oldest is closed as it stands)

    def __init__(
        self,
        on_turn: Callable[[dict[str, Any]], None] | None = None,
        on_total: Callable[[dict[str, Any]], None] | None = None,
        request_times: dict[int, float] | None = None,
    ) -> None:
        self.on_turn = on_turn
        # a replay's: each turn's request time as recorded (the replay's own clock runs at its speed: a TTL that had
        # expired between the recorded requests read 'prefix unchanged' at --speed max); None: the observations'
        self.request_times = request_times
        self.on_total = on_total  # at the loop's end: {"type": "session_cost", "t", "usage", "cost", ...}
        self.by_conversation: OrderedDict[str, tuple[Usage, Cost, int]] = OrderedDict()
        self.usage: Usage = ZERO
        self.cost: Cost = FREE
        self.turns = 0
        self._open: dict[
            int, dict[int, dict[str, Any]]
        ] = {}  # turn -> attempt -> {"req", "model", "usage", "family", "cost"}
        self._conv: dict[int, str] = {}  # turn -> conversation (a proxy's)
        self._conv_turn: OrderedDict[str, int] = OrderedDict()  # conversation -> its newest turn (at most KEEP)
        self._prev: OrderedDict[str | None, tuple[Request | None, Usage]] = OrderedDict()
        warm_prices()

    def __call__(self, obs: O.Observation) -> None:
        if isinstance(obs, O.AttemptStarted):
            if obs.turn not in self._open and len(self._open) >= self.OPEN:
                self._close(min(self._open), obs.t)
            self._open.setdefault(obs.turn, {})[obs.attempt] = {
                "req": Request(obs.body, obs.t if self.request_times is None else self.request_times.get(obs.turn)),
                "family": family_of_url(obs.url),
                "model": None,  # the response's (as dump prices it): the model asked for may not be the one that answered
                "usage": {},
            }
        elif isinstance(obs, O.MessageStarted):
            a = self._attempt(obs.turn, obs.attempt)
            msg = obs.message if isinstance(obs.message, dict) else {}
            if isinstance(msg.get("id"), str):
                a["id"] = msg["id"]  # an answer: without usage, its cost is unknown (see _answered)
            if isinstance(msg.get("model"), str):
                a["model"] = msg["model"]
            if isinstance(msg.get("usage"), dict):
                a["usage"] = {k: v for k, v in msg["usage"].items() if v is not None}
        elif isinstance(obs, O.MessageUpdated):
            a = self._attempt(obs.turn, obs.attempt)
            a["usage"].update({k: v for k, v in (obs.usage or {}).items() if v is not None})  # cumulative
        elif isinstance(obs, O.HttpTryFailed):  # a try without a stream: recorded as an attempt of its own (free)
            self._attempt(obs.turn, obs.attempt)["tries"] = self._attempt(obs.turn, obs.attempt).get("tries", 0) + 1
        elif isinstance(obs, O.ResponseStarted):
            self._attempt(obs.turn, obs.attempt)["responded"] = True
        elif isinstance(obs, O.AttemptEnded):
            a = self._attempt(obs.turn, obs.attempt)
            if prices_ready():  # else at the turn's end (never wait for the warm-up on the loop's thread)
                a["cost"] = self._price(a)
        elif isinstance(obs, O.ConversationAssigned):
            before = self._conv_turn.get(obs.conversation)
            if before is not None and before != obs.turn and before in self._open:
                self._close(before, obs.t)  # its next turn started: that one ended, whatever its attempts did
            self._conv_turn[obs.conversation] = obs.turn
            self._conv_turn.move_to_end(obs.conversation)
            while len(self._conv_turn) > self.KEEP:
                self._conv_turn.popitem(last=False)
            self._conv[obs.turn] = obs.conversation
        elif isinstance(obs, O.TurnEnded):
            self._close(obs.turn, obs.t)
        elif isinstance(obs, O.LoopFinished):  # a turn the loop left without ending it (error, cancel)
            for turn in sorted(self._open):
                self._close(turn, obs.t)
            if self.on_total is not None and self.turns:
                self.on_total(self.total_json(obs.t))

    def _attempt(self, turn: int, attempt: int) -> dict[str, Any]:
        return self._open.setdefault(turn, {}).setdefault(
            attempt, {"req": None, "family": None, "model": None, "usage": {}}
        )

    @staticmethod
    def _price(a: dict[str, Any]) -> AttemptCost:
        msg: dict[str, Any] = {"model": a["model"], "usage": a["usage"]} if a["usage"] else {}
        if "id" in a:
            msg["id"] = a["id"]
        entry: dict[str, Any] = {"message": msg}
        if a["family"]:
            entry["family"] = a["family"]
        return attempt_cost(entry)

    def _close(self, turn: int, t: float) -> None:
        attempts = self._open.pop(turn, None)
        if not attempts:
            return
        costs: list[AttemptCost] = []
        for n in sorted(attempts):
            a = attempts[n]
            costs.extend(AttemptCost(ZERO, FREE, True) for _ in range(a.get("tries", 0)))
            if a.get("responded") or not a.get("tries"):  # else its last try was the attempt as recorded
                c = a.get("cost") or self._price(a)
                costs.append(AttemptCost(c.usage, c.cost, True))
        if not costs:
            return
        costs[-1] = AttemptCost(costs[-1].usage, costs[-1].cost, False)
        req = attempts[max(attempts)].get("req")
        conv = self._conv.pop(turn, None)
        usage, cost, verdict = turn_figures(costs, req, self._prev.get(conv))
        self._prev[conv] = (req, costs[-1].usage)
        self._prev.move_to_end(conv)
        while len(self._prev) > self.KEEP_REQUESTS:
            self._prev.popitem(last=False)
        self.usage, self.cost, self.turns = self.usage + usage, self.cost + cost, self.turns + 1
        if conv is not None:
            cu, cc, cn = self.by_conversation.pop(conv, (ZERO, FREE, 0))
            self.by_conversation[conv] = (cu + usage, cc + cost, cn + 1)
            while len(self.by_conversation) > self.KEEP:
                self.by_conversation.popitem(last=False)
        if self.on_turn is not None:
            out: dict[str, Any] = {"type": "turn_cost", "t": t, "turn": turn + 1}
            if conv is not None:
                out["conversation"] = conv
            out.update(turn_json(costs, usage, cost, verdict))
            self.on_turn(out)

    def totals(self) -> dict[str, Any]:
        return {"usage": self.usage.to_json(), "cost": self.cost.to_json(), "price_source": price_source()}

    def total_json(self, t: float) -> dict[str, Any]:
        """The session's totals (and each conversation's, when a proxy named them), as one JSON line."""
        out: dict[str, Any] = {"type": "session_cost", "t": t, "turns": self.turns, **self.totals()}
        if self.by_conversation:
            out["conversations"] = {
                c: {"turns": n, "usage": u.to_json(), "cost": k.to_json()}
                for c, (u, k, n) in self.by_conversation.items()
            }
        return out


def request_times(recording_turns: Iterable[Any], numbered: bool = False) -> dict[int, float]:
    """Each recorded turn's last attempt's request time, by turn: its index (``numbered``: its own turn number, as a
    replay of many conversations publishes it)."""
    out: dict[int, float] = {}
    for k, turn in enumerate(recording_turns):
        attempts = getattr(turn, "attempts", None) or []
        req = attempts[-1].request if attempts else None
        t = req.get("t") if isinstance(req, dict) else None
        if isinstance(t, int | float) and not isinstance(t, bool):
            out[int(getattr(turn, "turn", k)) if numbered else k] = float(t)
    return out


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


def _tokens(u: dict[str, Any]) -> str:
    missing = u.get("turns_without_usage")
    if u.get("reported") is False:
        return "usage not reported"
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
    if missing:  # a partial sum: said, never shown as the whole
        parts.append(f"+ {count(missing, 'turn')} without usage (unknown, not counted)")
    return " · ".join(parts)


usage_text = _tokens  # `in 14 · out 28 · cache write 2,048 (5m 2,048 / 1h 0) · ...` of a Usage.to_json()

UNKNOWN = "usage not reported: tokens and cost unknown"  # (an answer without usage: its counts are not zeros)


def _unreported(c: dict[str, Any]) -> bool:
    return c.get("unpriced") == USAGE_NOT_REPORTED


def _unknown(u: dict[str, Any], c: dict[str, Any]) -> bool:
    """No usage at all (every attempt answered without it): the tokens are unknown, not only the cost."""
    return _unreported(c) and u.get("reported") is False


def _cost(c: dict[str, Any]) -> str:
    """The cost beside known tokens: "unknown" when an attempt's usage was not reported."""
    return "unknown" if _unreported(c) else _usd(c)


def _usd(c: dict[str, Any]) -> str:
    if c.get("usd") is None:
        return str(c.get("unpriced") or "unpriced")
    v = c["usd"]
    return ("$0" if v == 0 else (f"${v:.4f}" if v < 0.01 else f"${v:.3f}")) + priced_as_note(c.get("priced_as"))


def format_turn_cost(d: dict[str, Any]) -> str:
    """A headless progress line for a turn (a ``turn_cost`` dict): its usage, cost and cache hit rate, and why the
    cache was written again when it was."""
    u, c, cache = d.get("usage") or {}, d.get("cost") or {}, d.get("cache") or {}
    rate = u.get("cache_hit_rate")
    if _unknown(u, c):
        line = UNKNOWN
    else:  # (a failed attempt answered without usage makes the cost unknown, not the answer's tokens)
        line = f"cost {_cost(c)} · cache {'-' if rate is None else f'{rate:.0%}'} · {_tokens(u)}"
    failed = [a for a in d.get("attempt_costs") or [] if a.get("failed")]
    if failed:
        line += f" · {len(failed)} failed attempt{'s' if len(failed) > 1 else ''} counted"
        blind = sum(_unreported(a.get("cost") or {}) for a in failed)
        if blind and not _unknown(u, c):
            line += f" ({blind} without usage: unknown)"
    if cache.get("kind") == "written_again":
        line += f" · {cache.get('reason')}"
    return line


def format_session_cost(d: dict[str, Any]) -> str:
    """The headless line of a ``session_cost`` dict: the session's cost, cache hit rate and tokens."""
    u = d.get("usage") or {}
    rate = u.get("cache_hit_rate")
    turns = d.get("turns", 0)
    total = d.get("cost") or {}
    line = f"total {turns} turn{'s' if turns != 1 else ''}: "
    if _unreported(total) and u.get("reported") is False:  # (no turn reported usage)
        line += f"{UNKNOWN} · {d.get('price_source', '')}"
    else:  # (one answer without usage makes the cost unknown; the tokens known are said, as a part)
        cost = "unknown" if _unreported(total) else _usd(total)
        line += f"cost {cost} · cache {'-' if rate is None else f'{rate:.0%}'} · {_tokens(u)}"
        line += f" · {d.get('price_source', '')}"
    for c, v in (d.get("conversations") or {}).items() if len(d.get("conversations") or {}) > 1 else ():
        unknown = _unreported(v["cost"]) and (v.get("usage") or {}).get("reported") is False
        cost = "unknown" if _unreported(v["cost"]) else _usd(v["cost"])
        what = UNKNOWN if unknown else f"cost {cost} · {_tokens(v['usage'])}"
        line += f"\n    [{c}] {v['turns']} turns: {what}"
    return line


def format_accounting(
    turns: Sequence[dict[str, Any]], totals: dict[str, Any], names: dict[int, str] | None = None
) -> str:
    """The text report's usage, cost and cache section (``dump --timing``); ``names`` as for ``format_timing_json``
    (each turn's name in a recording of many conversations)."""
    names = names or {}
    lines = ["usage and cost"]
    for t in turns:
        u, c, cache = t.get("usage") or {}, t.get("cost") or {}, t.get("cache") or {}
        rate = u.get("cache_hit_rate")
        hit = "-" if rate is None else f"{rate:.0%}"
        what = UNKNOWN if _unknown(u, c) else f"{_tokens(u)}  cost {_cost(c)}  cache hit {hit}"
        turn = int(t.get("turn", 0))
        lines.append(f"  {names.get(turn) or 'turn ' + str(turn + 1)}: {what}")
        if cache.get("kind") == "written_again":
            lines.append(f"    {cache.get('reason')}")
        for i, a in enumerate(t.get("attempt_costs") or []):
            if a.get("failed"):
                what = UNKNOWN if _unreported(a["cost"]) else f"{_tokens(a['usage'])}  cost {_usd(a['cost'])}"
                lines.append(f"    attempt {i + 1} (failed): {what}")
    tu, tc = totals["usage"], totals["cost"]
    rate = tu.get("cache_hit_rate")
    hit = "-" if rate is None else f"{rate:.0%}"
    lines.append(f"  total: {UNKNOWN if _unknown(tu, tc) else f'{_tokens(tu)}  cost {_cost(tc)}  cache hit {hit}'}")
    lines.append(f"  {totals['price_source']}")
    return "\n".join(lines)

"""What a turn and the session cost, read from a dashboard state: the same figures as ``dump --json`` and
``LiveAccounting`` (record/accounting.py), for the status line and the request view. Not part of the fold: the
fold stays pure and cheap, and nothing here runs per observation.

An attempt is priced once it has ended (its usage is final then); the price of a (model, family, usage) is kept in
a bounded table, so a re-render, a copied state or time travel never prices again. A running attempt is not priced:
its tokens still grow. genai-prices is imported on a thread at start (``warm_prices``), never per event.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from inspector.observe.usage import ZERO, Usage
from inspector.record.accounting import AttemptCost, Request, attempt_cost, family_of_url, turn_figures
from inspector.record.cachebreak import CacheVerdict
from inspector.record.cost import FREE, Cost
from inspector.state.fold import DashboardState

KEEP = 20_000  # priced attempts remembered (the oldest forgotten first)
_priced: OrderedDict[tuple, AttemptCost] = OrderedDict()


@dataclass(frozen=True)
class SessionCost:
    usage: Usage
    cost: Cost
    priced: int  # ended attempts counted
    running: int  # attempts still streaming (not counted yet)


@dataclass(frozen=True)
class TurnCost:
    usage: Usage
    cost: Cost
    cache: CacheVerdict
    attempts: list[tuple[int, AttemptCost]]  # (attempt number, its figures); failed ones labelled


def _attempt(state: DashboardState, turn: int, attempt: int) -> AttemptCost | None:
    a = state.attempts.get((turn, attempt))
    if a is None or a.status is None:
        return None
    family = family_of_url(a.url)
    key = (a.model, family, repr(a.usage))
    found = _priced.get(key)
    if found is None:
        entry: dict = {"message": {"model": a.model, "usage": a.usage} if a.usage else {}}
        if family:
            entry["family"] = family
        found = _priced[key] = attempt_cost(entry)
        while len(_priced) > KEEP:
            _priced.popitem(last=False)
    return found


def session_cost(state: DashboardState) -> SessionCost:
    """Every ended attempt of every turn (failed ones too), summed; O(attempts), each priced at most once."""
    usage, cost, priced, running = ZERO, FREE, 0, 0
    for tr in state.turns.values():
        for n in tr.attempts:
            ac = _attempt(state, tr.turn, n)
            if ac is None:
                running += 1
                continue
            usage, cost, priced = usage + ac.usage, cost + ac.cost, priced + 1
    return SessionCost(usage, cost, priced, running)


def _request(state: DashboardState, turn: int) -> Request | None:
    tr = state.turns.get(turn)
    if tr is None or not tr.attempts:
        return None
    n = tr.attempts[-1]
    body = state.requests.get((turn, n))
    a = state.attempts.get((turn, n))
    return None if body is None else Request(body, a.t_start if a is not None else None)


def turn_cost(state: DashboardState, turn: int) -> TurnCost | None:
    """A turn's usage, cost and cache verdict against the previous turn (None until its attempts have ended)."""
    tr = state.turns.get(turn)
    if tr is None or not tr.attempts:
        return None
    attempts: list[tuple[int, AttemptCost]] = []
    for i, n in enumerate(tr.attempts):
        ac = _attempt(state, turn, n)
        if ac is None:
            return None
        attempts.append((n, AttemptCost(ac.usage, ac.cost, i < len(tr.attempts) - 1)))
    prev: tuple[Request | None, Usage] | None = None
    earlier = [t for t in state.turns if t < turn]
    if earlier:
        pt = state.turns[max(earlier)]
        last = _attempt(state, pt.turn, pt.attempts[-1]) if pt.attempts else None
        prev = (_request(state, pt.turn), last.usage if last is not None else ZERO)
    usage, cost, verdict = turn_figures([a for _, a in attempts], _request(state, turn), prev)
    return TurnCost(usage, cost, verdict, attempts)

"""What a turn and the session cost, read from a dashboard state: the same figures as ``dump --json`` and
``LiveAccounting`` (record/accounting.py), for the status line and the request view. Not part of the fold: the
fold stays pure and cheap, and nothing here runs per observation.

An attempt is priced once it has ended (its usage is final then); the price of a (model, family, usage) is kept in
a bounded table, so a re-render, a copied state or time travel never prices again. A running attempt is not priced:
its tokens still grow. genai-prices is imported on a thread at start (``warm_prices``), never per event.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inspector.observe.usage import ZERO, Family, Usage
from inspector.record.accounting import AttemptCost, Request, attempt_cost, family_of_url, turn_figures
from inspector.record.cachebreak import CacheVerdict
from inspector.record.cost import FREE, Cost
from inspector.state.fold import DashboardState

KEEP = 20_000  # priced attempts remembered (the oldest forgotten first)
# (model, family, usage, answered)
_priced: OrderedDict[tuple[str | None, Family | None, str, bool], AttemptCost] = OrderedDict()


@dataclass(frozen=True)
class SessionCost:
    usage: Usage
    cost: Cost
    priced: int  # ended attempts counted
    running: int  # attempts still streaming (not counted yet)
    pending: int = 0  # ended attempts not priced yet (the call's budget was spent): a later call counts them


@dataclass(frozen=True)
class TurnCost:
    usage: Usage
    cost: Cost
    cache: CacheVerdict
    attempts: list[tuple[int, AttemptCost]]  # (attempt number, its figures); failed ones labelled


def _attempt(state: DashboardState, turn: int, attempt: int, budget: list[int] | None = None) -> AttemptCost | None:
    """The attempt's figures once it has ended (None while it runs, or when ``budget`` [n] of new prices is spent:
    a caller that renders prices the rest on a later frame)."""
    a = state.attempts.get((turn, attempt))
    if a is None or a.status is None:
        return None
    family = family_of_url(a.url)
    # answered (a message with an id came) without usage: its cost is unknown, as dump and the headless lines say;
    # without the id the entry read as unanswered (an HTTP error): $0, and the session's sum a partial one shown as
    # the total (an OpenAI chat stream without include_usage beside a priced turn)
    answered = a.message_id is not None
    key = (a.model, family, repr(a.usage), answered)
    found = _priced.get(key)
    if found is None:
        if budget is not None:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
        message: dict[str, Any] = {"model": a.model, "usage": a.usage} if a.usage else {}
        if answered:
            message["id"] = a.message_id
        entry: dict[str, Any] = {"message": message}
        if family:
            entry["family"] = family
        found = _priced[key] = attempt_cost(entry)
        while len(_priced) > KEEP:
            _priced.popitem(last=False)
    return found


# Running sums over the ended attempts in turn order, shared by every state (the live one, a copy, a moment of the
# past: an ended attempt never changes, so a prefix of them is the same in all): a render verifies the prefix (a
# comparison per attempt) and adds only what is new, instead of summing and pricing again.
# (turn, attempt, t_end, version, model, url, usage): equal means the same figures
_prefix_keys: list[tuple[int, int, float | None, int, str | None, str, dict[str, Any]]] = []
_prefix_sums: list[tuple[Usage, Cost]] = []


def session_cost(state: DashboardState, budget: int | None = None) -> SessionCost:
    """Every ended attempt of every turn (failed ones too), summed. ``budget``: at most this many attempts priced
    for the first time by this call (the rest count as ``pending``: see :attr:`SessionCost.pending`)."""
    left = [budget] if budget is not None else None
    i, extend = 0, True  # i: how much of the shared prefix this state matches
    usage, cost, priced, running, pending = ZERO, FREE, 0, 0, 0
    for tr in state.turns.values():
        for n in tr.attempts:
            a = state.attempts.get((tr.turn, n))
            if a is None or a.status is None:
                running += 1
                extend = False
                continue
            k = (tr.turn, n, a.t_end, a.version, a.model, a.url, a.usage)
            if extend and i < len(_prefix_keys) and _prefix_keys[i] == k:
                i += 1
                continue
            ac = _attempt(state, tr.turn, n, left)
            if ac is None:
                pending += 1
                extend = False
                continue
            if extend:  # this state goes further than the prefix (or elsewhere): the prefix follows it
                del _prefix_keys[i:], _prefix_sums[i:]
                base = _prefix_sums[i - 1] if i else (ZERO, FREE)
                _prefix_keys.append((*k[:-1], dict(a.usage)))  # a copy: compared by value
                _prefix_sums.append((base[0] + ac.usage, base[1] + ac.cost))
                i += 1
                continue
            usage, cost, priced = usage + ac.usage, cost + ac.cost, priced + 1
    if i:
        base_usage, base_cost = _prefix_sums[i - 1]
        usage, cost, priced = base_usage + usage, base_cost + cost, priced + i
    return SessionCost(usage, cost, priced, running, pending)


def _request(state: DashboardState, turn: int, times: Mapping[int, float] | None) -> Request | None:
    tr = state.turns.get(turn)
    if tr is None or not tr.attempts:
        return None
    n = tr.attempts[-1]
    body = state.requests.get((turn, n))
    if body is None:
        return None
    if times is not None:  # a replay's: when the recording sent it (None: not recorded, no TTL verdict)
        return Request(body, times.get(turn))
    a = state.attempts.get((turn, n))
    return Request(body, a.t_start if a is not None else None)


def turn_cost(state: DashboardState, turn: int, request_times: Mapping[int, float] | None = None) -> TurnCost | None:
    """A turn's usage, cost and cache verdict against the previous turn of its conversation (None until its attempts
    have ended). ``request_times``: a replay's, each turn's request time as recorded (by turn): the time between two
    requests (the TTL verdict) is the recording's, not the replay's clock, which runs at the replay's speed (as
    ``LiveAccounting`` takes them for `replay --headless`); None: the state's own times."""
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
    before = state.previous_turn(turn)  # of its own conversation: another one's cache is not this one's
    if before is not None:
        pt = state.turns[before]
        last = _attempt(state, pt.turn, pt.attempts[-1]) if pt.attempts else None
        prev = (_request(state, pt.turn, request_times), last.usage if last is not None else ZERO)
    usage, cost, verdict = turn_figures([a for _, a in attempts], _request(state, turn, request_times), prev)
    return TurnCost(usage, cost, verdict, attempts)

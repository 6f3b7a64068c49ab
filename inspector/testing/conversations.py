"""Synthetic proxied sessions of several interleaved conversations (tests, snapshots, benchmarks). No Textual here.

Each conversation is the parse_date session (or a prefix of it) with its own global turn numbers and tool ids, and a
`ConversationAssigned` before each of its turns, as the proxy publishes them; the conversations' observations are
interleaved one by one, as concurrent agents' streams arrive.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inspector.observe import observations as O
from inspector.testing.synthetic import parse_date_observations

_ID_FIELDS = ("id", "block_id", "tool_use_id")


def _conversation(j: int, k: int, stop: str | None, variant: str, parent: str | None) -> list[O.Observation]:
    cid = f"c{j + 1}"
    out: list[O.Observation] = []
    for obs in parse_date_observations(stop, variant=variant):
        turn = getattr(obs, "turn", None)
        if turn is None:
            continue  # the loop's own observations: a proxy has one loop, not one per conversation
        changes: dict = {"turn": turn * k + j, "t": obs.t + j * 0.01}
        for name in _ID_FIELDS:
            v = getattr(obs, name, None)
            if isinstance(v, str):
                changes[name] = f"{v}_{cid}"
        if type(obs) is O.TurnStarted:
            out.append(
                O.ConversationAssigned(
                    obs.t + j * 0.01, turn * k + j, cid, turn, 0, "new" if turn == 0 else "continues", parent
                )
            )
        out.append(dataclasses.replace(obs, **changes))
    return out


def interleaved_conversations(
    k: int = 3,
    *,
    stops: dict[int, str] | None = None,
    variants: dict[int, str] | None = None,
    parents: dict[int, str] | None = None,
) -> list[O.Observation]:
    """`k` conversations c1..ck interleaved; conversation j (0-based) stops at `stops[j]` (a parse_date stop name),
    plays `variants[j]` and names `parents[j]` as its parent."""
    stops, variants, parents = stops or {}, variants or {}, parents or {}
    convs = [_conversation(j, k, stops.get(j), variants.get(j, "ok"), parents.get(j)) for j in range(k)]
    out: list[O.Observation] = [O.LoopStarted(0.0, {"type": "proxy", "listen": "http://127.0.0.1:8788"}, "", "")]
    for i in range(max(len(c) for c in convs)):
        for c in convs:
            if i < len(c):
                out.append(c[i])
    return out


def replayed_conversations(k: int = 2) -> list[O.Observation]:
    """`k` conversations as `inspector replay` of a proxy recording publishes them: one after the other, each
    through its own loop (its turn numbers start over at 0), its `ConversationAssigned` lines first."""
    out: list[O.Observation] = []
    for j in range(k):
        cid = f"c{j + 1}"
        session = parse_date_observations()
        turns = sorted({o.turn for o in session if type(o) is O.TurnStarted})
        out += [O.ConversationAssigned(0.0, t, cid, t, 0, "replay") for t in turns]
        for obs in session:
            changes: dict[str, Any] = {
                n: f"{getattr(obs, n)}_{cid}" for n in _ID_FIELDS if isinstance(getattr(obs, n, None), str)
            }
            out.append(dataclasses.replace(obs, **changes) if changes else obs)
    return out


__all__ = ["interleaved_conversations", "replayed_conversations"]

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
        changes: dict[str, Any] = {"turn": turn * k + j, "t": obs.t + j * 0.01}
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
    through its own loop, whose turns follow the conversations' before it on the bus (c2's first turn is the
    session's turn 2 after c1's two), its `ConversationAssigned` lines first (its own turn numbers, from 0). One
    clock for the session: each loop's times follow the conversations' before it."""
    out: list[O.Observation] = []
    base = 0
    t0 = 0.0
    for j in range(k):
        cid = f"c{j + 1}"
        session = parse_date_observations()
        turns = sorted({o.turn for o in session if type(o) is O.TurnStarted})
        out += [O.ConversationAssigned(t0, base + t, cid, t, 0, "replay") for t in turns]
        for obs in session:
            changes: dict[str, Any] = {
                n: f"{getattr(obs, n)}_{cid}" for n in _ID_FIELDS if isinstance(getattr(obs, n, None), str)
            }
            if isinstance(getattr(obs, "turn", None), int):
                changes["turn"] = obs.turn + base  # type: ignore[attr-defined]
            changes["t"] = obs.t + t0
            out.append(dataclasses.replace(obs, **changes))
        base += len(turns)
        t0 = out[-1].t
    return out


def two_cached_conversations() -> list[O.Observation]:
    """c1 (system "A") and c2 (system "B") interleaved: global turns 0 (c1), 1 (c2), 2 (c1), 3 (c2). Each turn
    writes the cache (no read), and each conversation's second request extends its first one's messages."""
    out: list[O.Observation] = [O.LoopStarted(0.0, {"type": "proxy"}, "", "")]
    model = "claude-sonnet-4-5"
    for turn, (cid, own, system) in enumerate([("c1", 0, "A"), ("c2", 0, "B"), ("c1", 1, "A"), ("c2", 1, "B")]):
        t = 1.0 + turn
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"hello {cid}"}]
        if own:
            messages += [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
        body = {
            "model": model,
            "system": [{"type": "text", "text": system * 50, "cache_control": {"type": "ephemeral"}}],
        }
        body["messages"] = messages
        usage = {"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0}
        out += [
            O.ConversationAssigned(t, turn, cid, own, 0, "continues" if own else "new"),
            O.TurnStarted(t, turn),
            O.AttemptStarted(t, turn, 0, "POST", "http://127.0.0.1/v1/messages", {}, body),
            O.MessageStarted(t + 0.1, turn, 0, {"id": f"msg_{turn}", "model": model, "usage": usage}),
            O.MessageUpdated(t + 0.2, turn, 0, "end_turn", {"output_tokens": 5}),
            O.AttemptEnded(t + 0.3, turn, 0, "complete", None, "text_finish"),
            O.TurnEnded(t + 0.3, turn, "text_finish", "end_turn", {**usage, "output_tokens": 5}),
        ]
    return out


def with_the_same_tool_ids(observations: list[O.Observation]) -> list[O.Observation]:
    """The conversations with the same tool ids in every one of them, as `inspector serve` hands them out (scripted
    scenarios), each tool result marked with its conversation ("c2: def parse_date...")."""
    conv_of: dict[int, str] = {}
    out: list[O.Observation] = []
    for obs in observations:
        if type(obs) is O.ConversationAssigned:
            conv_of[obs.turn] = obs.conversation
        changes: dict[str, Any] = {}
        for name in ("id", "block_id", "tool_use_id"):
            v = getattr(obs, name, None)
            if isinstance(v, str) and "_c" in v:
                changes[name] = v.rsplit("_c", 1)[0]
        cid = conv_of.get(getattr(obs, "turn", -1), "?")
        if type(obs) is O.ToolResult and isinstance(obs.content, str):
            changes["content"] = f"{cid}: {obs.content}"
        if type(obs) is O.ToolStateChanged and obs.result_preview is not None:
            changes["result_preview"] = f"{cid}: {obs.result_preview}"
        out.append(dataclasses.replace(obs, **changes) if changes else obs)
    return out


__all__ = ["interleaved_conversations", "replayed_conversations", "two_cached_conversations", "with_the_same_tool_ids"]

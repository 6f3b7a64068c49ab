"""The request view: what the harness sent for a turn (system, tools, messages, parameters, from
`AttemptStarted.body`) and a structured diff with the previous turn's request. Works the same for our loop,
`proxy` and `serve --tui`: they all publish AttemptStarted with the body. Pure: no Textual."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from inspector.core.fmt import short, short_text
from inspector.state.fold import DashboardState
from inspector.tui.detail import HEAD, MUTED, Detail, _json_block, _kv, _section
from inspector.tui.widgets.wording import turn_label

SECTIONS = ("system", "tools", "messages")


@dataclass(frozen=True)
class Change:
    """One difference between two requests: `op` is + (added), - (removed) or ~ (changed)."""

    op: str
    where: str  # "system", "tools/read_file", "messages[3]", "max_tokens"
    what: str  # a one-line description


def request_for(
    state: DashboardState, turn: int, attempt: int | None = None
) -> tuple[tuple[int, int], dict[str, Any]] | None:
    """The body sent for a turn (its last attempt unless told), with its (turn, attempt)."""
    keys = [k for k in state.requests if k[0] == turn and (attempt is None or k[1] == attempt)]
    if not keys:
        return None
    key = max(keys)
    return key, state.requests[key]


def previous_request(state: DashboardState, turn: int) -> tuple[tuple[int, int], dict[str, Any]] | None:
    """The request of the previous turn of the same conversation (its last attempt's), with its (turn, attempt)."""
    before = state.previous_turn(turn, with_request=True)
    return None if before is None else request_for(state, before)


def message_summary(message: object, limit: int = 90) -> str:
    """`user: text "..." · tool_result toolu_1 (is_error)` for one message."""
    if not isinstance(message, dict):
        return short(message, limit)
    if "role" not in message and isinstance(message.get("type"), str):  # a Responses input item (function_call...)
        rest = {k: v for k, v in message.items() if k != "type"}
        return short_text(f"{message['type']}: {short(rest, limit)}", limit + 40)
    role = message.get("role", "?")
    content = message.get("content")
    if isinstance(content, str):
        return f"{role}: {short(content, limit)}"
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            parts.append(short(block, 30))
            continue
        kind = block.get("type", "?")
        if kind == "text":
            parts.append(f"text {short(block.get('text', ''), 40)}")
        elif kind == "tool_use":
            inp = block.get("input")
            parts.append(f"tool_use {block.get('name')}" + (f" {short(inp, 40)}" if inp is not None else ""))
        elif kind == "tool_result":
            err = " is_error" if block.get("is_error") else ""
            parts.append(f"tool_result {block.get('tool_use_id')}{err}: {short(block.get('content'), 40)}")
        else:
            parts.append(kind)
    return short_text(f"{role}: " + " · ".join(parts), limit + 40)


def _history_key(body: dict[str, Any]) -> str:
    """Where a request's history is: ``messages`` (Messages, Chat Completions), or a Responses request's ``input``."""
    return "input" if "messages" not in body and "input" in body else "messages"


def _messages(body: dict[str, Any]) -> Sequence[Any]:
    """A list, or the loop's history view (agent.transcript: messages read back from its spill file); a Responses
    request's ``input`` items (a string: one input)."""
    messages = body.get(_history_key(body))
    if isinstance(messages, str):
        return [messages]
    return messages if isinstance(messages, Sequence) and not isinstance(messages, (str, bytes)) else []


def _tools_by_name(body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools")
    out: dict[str, Any] = {}
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        name = tool.get("name") if isinstance(tool, dict) else None
        out[str(name or f"#{i}")] = tool
    return out


def request_diff(prev: dict[str, Any], cur: dict[str, Any]) -> list[Change]:
    """What changed from one request to the next: system, tools by name, messages (appended, changed, removed),
    and every other parameter."""
    out: list[Change] = []
    if prev.get("system") != cur.get("system"):
        op = "+" if "system" not in prev else "-" if "system" not in cur else "~"
        out.append(Change(op, "system", short(cur.get("system", prev.get("system")), 80)))
    pt, ct = _tools_by_name(prev), _tools_by_name(cur)
    for name in ct.keys() - pt.keys():
        out.append(Change("+", f"tools/{name}", "tool added"))
    for name in pt.keys() - ct.keys():
        out.append(Change("-", f"tools/{name}", "tool removed"))
    for name in sorted(pt.keys() & ct.keys()):
        if pt[name] != ct[name]:
            out.append(Change("~", f"tools/{name}", "definition changed"))
    pm, cm = _messages(prev), _messages(cur)
    if isinstance(cur.get("previous_response_id"), str):  # (a Responses continuation sends only what it adds)
        pm = []
    hk = _history_key(cur)
    same = 0
    while same < min(len(pm), len(cm)) and pm[same] == cm[same]:
        same += 1
    for i in range(same, max(len(pm), len(cm))):
        if i < len(pm) and i < len(cm):
            out.append(Change("~", f"{hk}[{i}]", message_summary(cm[i])))
        elif i < len(cm):
            out.append(Change("+", f"{hk}[{i}]", message_summary(cm[i])))
        else:
            out.append(Change("-", f"{hk}[{i}]", message_summary(pm[i])))
    for key in sorted((prev.keys() | cur.keys()) - {*SECTIONS, hk}):
        if key not in cur:
            out.append(Change("-", key, short(prev[key], 60)))
        elif key not in prev:
            out.append(Change("+", key, short(cur[key], 60)))
        elif prev[key] != cur[key]:
            out.append(Change("~", key, f"{short(prev[key], 30)} → {short(cur[key], 30)}"))
    return out


OP_STYLE = {"+": "green", "-": "red", "~": "yellow"}


def _cost_section(out: Text, state: DashboardState, turn: int, request_times: Mapping[int, float] | None) -> None:
    """The turn's usage, cost and cache verdict (the figures of `dump --json`), each attempt's when there were
    several (failed ones labelled: they were billed for what they produced), and where the prices come from."""
    from inspector.record.accounting import usage_text
    from inspector.record.cost import USAGE_NOT_REPORTED, fmt_usd, price_source
    from inspector.state.costs import turn_cost

    _section(out, "usage and cost")
    tc = turn_cost(state, turn, request_times)
    if tc is None:
        out.append("not yet: the turn's attempts have not all ended\n", MUTED)
        return
    if len(tc.attempts) > 1:
        for n, ac in tc.attempts:
            label = f"attempt {n + 1}" + (" (failed)" if ac.failed else "")
            _kv(out, label, f"{usage_text(ac.usage.to_json())}  ·  {fmt_usd(ac.cost)}")
    _kv(out, "tokens", usage_text(tc.usage.to_json()))
    rate = tc.usage.hit_rate
    if tc.cost.total is None and tc.cost.unpriced == USAGE_NOT_REPORTED and tc.usage.reported:
        cost = "unknown (an attempt's usage was not reported)"  # (the tokens above are the others')
    else:
        cost = fmt_usd(tc.cost) if tc.cost.total is not None else tc.cost.unpriced or "unpriced"
    _kv(out, "cost", cost)
    _kv(out, "cache hit", "-" if rate is None else f"{rate:.0%}")
    out.append("cache: ", MUTED)
    out.append(tc.cache.reason + "\n", "bold red" if tc.cache.kind == "written_again" else "")
    out.append(price_source() + "\n", MUTED)


def request_detail(
    state: DashboardState, turn: int, attempt: int | None = None, request_times: Mapping[int, float] | None = None
) -> Detail:
    """The request of a turn, then its diff with the previous turn's request. ``request_times``: a replay's recorded
    request times (the cache verdict's TTL: see ``state.costs.turn_cost``)."""
    found = request_for(state, turn, attempt)
    if found is None:
        return Detail(f"Request · {turn_label(state, turn)}", Text("no request was seen for this turn (yet)", MUTED))
    (t, a), body = found
    out = Text()
    hk = _history_key(body)
    params = {k: v for k, v in body.items() if k not in SECTIONS and k != hk}
    messages = _messages(body)
    tools = _tools_by_name(body)
    prev = previous_request(state, t)
    _section(out, f"changes since {turn_label(state, prev[0][0])}'s request" if prev else "changes")
    if prev is None:
        cid = state.conversation_of(t)
        first = f"conversation {cid}" if cid else "the session"
        out.append(f"the first request of {first}: nothing to compare with\n", MUTED)
    else:
        changes = request_diff(prev[1], body)
        if not changes:
            out.append("identical to the previous request\n", MUTED)
        for ch in changes:
            out.append(f" {ch.op} ", OP_STYLE[ch.op])
            out.append(f"{ch.where}  ", HEAD)
            out.append(ch.what + "\n")
    _cost_section(out, state, t, request_times)
    _section(out, "parameters")
    for k, v in params.items():
        _kv(out, k, short(v, 120))
    _section(out, "system")
    system = body.get("system")
    if isinstance(system, str):
        out.append(system + "\n")
    elif system is None:
        out.append("(none)\n", MUTED)
    else:
        _json_block(out, system)
    _section(out, f"tools · {len(tools)}")
    for name, tool in tools.items():
        desc = tool.get("description", "") if isinstance(tool, dict) else ""
        out.append(f"{name}", HEAD)
        out.append(f"  {short_text(str(desc), 100)}\n" if desc else "\n", MUTED)
    _section(out, f"{hk} · {len(messages)}")
    for i, m in enumerate(messages):
        out.append(f"[{i}] ", MUTED)
        out.append(message_summary(m, 200) + "\n")
    _section(out, "full body")
    sent = body.get(hk)  # (the loop's history view is read back from its spill file for the full body)
    _json_block(out, body if sent is None or isinstance(sent, list | str) else {**body, hk: list(messages)})
    return Detail(f"Request · {turn_label(state, t)} · attempt {a + 1} · what the harness sent", out)


__all__ = ["Change", "message_summary", "previous_request", "request_detail", "request_diff", "request_for"]

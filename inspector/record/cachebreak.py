"""Why a prompt cache missed: compare a turn's request with the previous request of its conversation, in the order
the cache keys them (tools, then system, then messages), up to the previous request's last cache breakpoint, and
name the first difference.

A turn "should have hit" when the previous request of the conversation cached something (it wrote or read the
cache) and this one read nothing from the cache while writing it again. The verdicts:

- ``tools changed: 'NAME' (tool i)`` / ``tools changed: 'NAME' added (tool i)`` / ``... removed`` / ``order changed``
- ``system changed at char N`` (``system block j changed at char N of its text``: a system prompt of several blocks)
- ``message i (ROLE) edited at char N of its text`` (or ``of block j's text``; ``of its JSON`` when another field or a
  block that is not text changed) / ``message i removed``
- ``model changed: 'A' -> 'B'``: a prompt cache is the model's own, another model's prefix is never read
- ``thinking changed: A -> B`` / ``tool_choice changed: A -> B``: settings the messages' cache entries depend on
- ``TTL expired: 6.2 min since the previous request (cache lifetime 5 min)``
- ``prefix unchanged``: the cache entry was evicted early, or the prefix is under the model's minimum cacheable length

``cache_control`` marks are left out of every comparison: a mark says where the cached prefix ends, it is not part
of it (a harness moves its breakpoint to the newest message each turn). Pure functions on parsed request bodies;
never raises on odd shapes (a non-dict body compares as empty).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inspector.core import exactjson
from inspector.observe.usage import Usage
from inspector.stream.history import without_cache_marks

TTL_5M = 300.0
TTL_1H = 3600.0


@dataclass(frozen=True)
class CacheVerdict:
    kind: str  # "hit", "partial", "first", "no_cache", "written_again"
    reason: str  # one line, for the status line, the request view, dump and headless lines
    segment: str | None = None  # "model", "tools", "system", "messages", "ttl", "prefix"
    index: int | None = None  # tool or message index
    char: int | None = None  # first differing character in that segment's text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "reason": self.reason}
        for k in ("segment", "index", "char"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out


def _canon(value: Any) -> str:
    try:
        return exactjson.dumps(value).decode()  # as sent: key order is part of the prompt
    except (TypeError, RecursionError):  # orjson.JSONEncodeError (a lone surrogate...), a nesting too deep
        return repr(value)


def _list(body: dict[str, Any], key: str) -> list[Any]:
    v = body.get(key)
    return v if isinstance(v, list) else []


def _system_text(body: dict[str, Any]) -> str:
    """The system prompt as the cache sees it: a string, or its blocks in order (text as is, others as JSON)."""
    system = body.get("system", body.get("instructions"))
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        parts = []
        for b in system:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            else:
                parts.append(_canon(without_cache_marks(b)))
        return "\n".join(parts)
    return _canon(system)


def _messages(body: dict[str, Any]) -> list[Any]:
    msgs = body.get("messages")
    if isinstance(msgs, list):
        return msgs
    inp = body.get("input")  # Responses API
    if isinstance(inp, list):
        return inp
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    return []


def _has_mark(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("cache_control"), dict)


def _block_marked(message: Any) -> bool:
    if _has_mark(message):
        return True
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(_has_mark(b) for b in content)


def _ttl_of(marks: list[Any]) -> float:
    return TTL_1H if any(isinstance(m, dict) and m.get("ttl") == "1h" for m in marks) else TTL_5M


def breakpoints(body: Any) -> tuple[int, float] | None:
    """How far the cached prefix of ``body`` reaches, as the number of messages it covers (-1: tools/system only),
    and the longest lifetime marked; None when the request marks no breakpoint. A top-level ``cache_control``
    (automatic caching) covers every message."""
    if not isinstance(body, dict):
        return None
    marks: list[Any] = []
    reach: int | None = None
    if isinstance(body.get("cache_control"), dict):
        marks.append(body["cache_control"])
        reach = len(_messages(body))
    for t in _list(body, "tools"):
        if _has_mark(t):
            marks.append(t["cache_control"])
            reach = max(reach if reach is not None else -1, -1)
    system = body.get("system")
    if isinstance(system, list):
        for b in system:
            if _has_mark(b):
                marks.append(b["cache_control"])
                reach = max(reach if reach is not None else -1, -1)
    for i, m in enumerate(_messages(body)):
        if _block_marked(m):
            content = m.get("content") if isinstance(m, dict) else None
            for b in content if isinstance(content, list) else [m]:
                if _has_mark(b):
                    marks.append(b["cache_control"])
            reach = max(reach if reach is not None else -1, i + 1)
    if reach is None:
        return None
    return reach, _ttl_of(marks)


def _first_diff(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    # compare in slices first: long prompts are compared at C speed
    step = 4096
    while i + step <= n and a[i : i + step] == b[i : i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _name(tool: Any, i: int) -> str:
    if isinstance(tool, dict):
        name = tool.get("name")
        if not isinstance(name, str) and isinstance(tool.get("function"), dict):
            name = tool["function"].get("name")
        if isinstance(name, str):
            return name
    return f"#{i}"


def _tool_change(prev: list[Any], cur: list[Any], i: int) -> str:
    """What happened at tool ``i``, the first that differs: the tool there changed (``'grep'``), or another one took
    its place: one added before it, or it removed, or the tools reordered (names compared)."""
    was, now = _name(prev[i], i), _name(cur[i], i)
    if was == now:
        return f"'{now}'"
    before = {_name(t, j) for j, t in enumerate(prev)}
    after = {_name(t, j) for j, t in enumerate(cur)}
    if now not in before:
        return f"'{now}' added"
    if was not in after:
        return f"'{was}' removed"
    return f"order changed: '{now}' where '{was}' was"


def first_difference(prev: Any, cur: Any, reach: int | None = None) -> CacheVerdict | None:
    """The first place where ``cur``'s cacheable prefix differs from ``prev``'s, in cache order, looking at
    ``reach`` messages of ``prev`` (None: all of them); None when that prefix is unchanged."""
    prev = prev if isinstance(prev, dict) else {}
    cur = cur if isinstance(cur, dict) else {}
    pt, ct = (
        [without_cache_marks(t) for t in _list(prev, "tools")],
        [without_cache_marks(t) for t in _list(cur, "tools")],
    )
    for i in range(max(len(pt), len(ct))):
        if i >= len(ct):
            return CacheVerdict("written_again", f"tools changed: '{_name(pt[i], i)}' removed (tool {i})", "tools", i)
        if i >= len(pt):
            return CacheVerdict("written_again", f"tools changed: '{_name(ct[i], i)}' added (tool {i})", "tools", i)
        if _canon(pt[i]) != _canon(ct[i]):
            return CacheVerdict("written_again", f"tools changed: {_tool_change(pt, ct, i)} (tool {i})", "tools", i)
    ps, cs = _system_text(prev), _system_text(cur)
    if ps != cs:
        block = _system_block(prev.get("system"), cur.get("system"))
        if block is not None:  # (a char of the blocks' texts joined would be found in neither block)
            j, n = block
            return CacheVerdict("written_again", f"system block {j} changed at char {n} of its text", "system", j, n)
        n = _first_diff(ps, cs)
        return CacheVerdict("written_again", f"system changed at char {n}", "system", None, n)
    pm, cm = _messages(prev), _messages(cur)  # (each compared without its cache_control marks)
    upto = len(pm) if reach is None else max(0, min(reach, len(pm)))
    for i in range(upto):
        if i >= len(cm):
            return CacheVerdict("written_again", f"message {i} removed", "messages", i)
        was, now = without_cache_marks(pm[i]), without_cache_marks(cm[i])
        a, b = _canon(was), _canon(now)
        if a != b:
            role = now.get("role") if isinstance(now, dict) else None
            where, n = _edit_where(was, now, a, b)
            return CacheVerdict("written_again", f"message {i} ({role or '?'}) edited {where}", "messages", i, n)
    return None


def _system_block(prev: Any, cur: Any) -> tuple[int, int] | None:
    """Where a system prompt of several blocks changed, as a person finds it in the request: (block j, char n of its
    text), when both requests send as many blocks and the first that differs is a text block in both; else None."""
    if not (isinstance(prev, list) and isinstance(cur, list) and len(prev) == len(cur) > 1):
        return None
    for j, (x, y) in enumerate(zip(prev, cur, strict=True)):
        a, b = _system_text({"system": [x]}), _system_text({"system": [y]})
        if a == b:
            continue
        texts = [v.get("text") if isinstance(v, dict) and v.get("type") == "text" else None for v in (x, y)]
        if isinstance(texts[0], str) and isinstance(texts[1], str):
            return j, _first_diff(texts[0], texts[1])
        return None
    return None


def _edit_where(prev: Any, cur: Any, prev_json: str, cur_json: str) -> tuple[str, int]:
    """Where a message changed, in words a person can find: ``at char N of its text`` (its string content, or
    ``block j`` of its content list: a text block whose text alone changed), else ``at char N of its JSON`` (the
    message as sent, compact: another field changed, or a block that is not text)."""
    if isinstance(prev, dict) and isinstance(cur, dict) and _rest(prev, "content") == _rest(cur, "content"):
        pc, cc = prev.get("content"), cur.get("content")
        if isinstance(pc, str) and isinstance(cc, str):
            n = _first_diff(pc, cc)
            return f"at char {n} of its text", n
        if isinstance(pc, list) and isinstance(cc, list) and len(pc) == len(cc):
            for j, (x, y) in enumerate(zip(pc, cc, strict=True)):
                if _canon(x) == _canon(y):
                    continue
                if (
                    isinstance(x, dict)
                    and isinstance(y, dict)
                    and x.get("type") == y.get("type") == "text"
                    and isinstance(x.get("text"), str)
                    and isinstance(y.get("text"), str)
                    and _rest(x, "text") == _rest(y, "text")
                ):
                    n = _first_diff(x["text"], y["text"])
                    return f"at char {n} of block {j}'s text", n
                break
    n = _first_diff(prev_json, cur_json)
    return f"at char {n} of its JSON", n


def _rest(d: dict[str, Any], left_out: str) -> str:
    """A dict's canonical form without one key (what else of it is the same)."""
    return _canon({k: v for k, v in d.items() if k != left_out})


def _model_change(prev: Any, cur: Any) -> str | None:
    """``model changed: 'A' -> 'B'`` when both requests name a model and they differ, else None."""
    a = prev.get("model") if isinstance(prev, dict) else None
    b = cur.get("model") if isinstance(cur, dict) else None
    if isinstance(a, str) and isinstance(b, str) and a != b:
        return f"model changed: {a!r} -> {b!r}"
    return None


# request settings a cached messages prefix depends on: changing the tool choice or the thinking parameters
# invalidates the messages' cache entries (Anthropic's "what invalidates the cache"), not the tools' and system's
_MESSAGE_SETTINGS = ("tool_choice", "thinking")


def _setting_change(prev: Any, cur: Any, reach: int | None) -> str | None:
    """``thinking changed: A -> B`` when a setting in _MESSAGE_SETTINGS differs and the previous request cached
    messages (``reach``: as ``breakpoints`` says; None: no mark), else None."""
    if reach is not None and reach <= 0:
        return None
    for key in _MESSAGE_SETTINGS:
        a = prev.get(key) if isinstance(prev, dict) else None
        b = cur.get(key) if isinstance(cur, dict) else None
        if _canon(a) != _canon(b):
            was, now = (_canon(v) if v is not None else "none" for v in (a, b))
            return f"{key} changed: {was[:80]} -> {now[:80]}"
    return None


def explain(prev_body: Any, body: Any, usage: Usage, prev_usage: Usage | None, gap_s: float | None) -> CacheVerdict:
    """The cache verdict of one turn, given the previous request of its conversation (None: the first turn)."""
    if not usage.reported or usage.prompt == 0:
        return CacheVerdict("no_cache", "no usage reported")
    if usage.cache_read and not usage.cache_write:
        return CacheVerdict("hit", f"cache hit {usage.hit_rate or 0:.0%}")
    if usage.cache_read:
        return CacheVerdict("partial", f"cache hit {usage.hit_rate or 0:.0%}, prefix extended")
    prev_cached = prev_usage is not None and (prev_usage.cache_read or prev_usage.cache_write)
    if prev_body is None or not prev_cached:
        if usage.cache_write:
            return CacheVerdict("first", "cache written (first use)")
        return CacheVerdict("no_cache", "no cache used")
    if not usage.cache_write:
        return CacheVerdict("no_cache", "no cache used")
    moved = _model_change(prev_body, body)
    if moved is not None:  # (a cache is per model: the same prefix sent to another model is written anew)
        return CacheVerdict("written_again", f"cache written again: {moved}", "model")
    marks = breakpoints(prev_body)
    reach = marks[0] if marks else None
    found = first_difference(prev_body, body, reach)
    if found is not None:
        return CacheVerdict(found.kind, "cache written again: " + found.reason, found.segment, found.index, found.char)
    setting = _setting_change(prev_body, body, reach)
    if setting is not None:
        return CacheVerdict("written_again", f"cache written again: {setting}", "settings")
    ttl = marks[1] if marks else TTL_5M
    if gap_s is not None and gap_s > ttl:
        life = "1 h" if ttl >= TTL_1H else "5 min"
        return CacheVerdict(
            "written_again",
            f"cache written again: TTL expired: {gap_s / 60:.1f} min since the previous request (cache lifetime {life})",
            "ttl",
        )
    return CacheVerdict(
        "written_again",
        "cache written again: prefix unchanged (evicted early, or under the model's minimum cacheable length)",
        "prefix",
    )

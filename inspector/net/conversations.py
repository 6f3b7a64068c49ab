"""Group the requests a watched agent sends into conversations, each with its own turns and attempts.

A real agent is not one conversation: Claude Code runs subagents in parallel and makes side calls (titles, quota
checks, ``count_tokens``); the OpenAI Agents SDK runs handoffs; a test suite runs many agents at once.

The rule (docs/serve-and-proxy.md, "Conversations"):

1. A header names the conversation when the harness sends one: ``x-inspector-session``, or a known session header
   of an agent (``x-claude-code-session-id``). It wins over the prefix rule.
2. Otherwise a request *continues* a conversation when its history extends that conversation's previous request:
   the same system prompt and tools, and the previous request's messages as its first messages. Then it is that
   conversation's next turn.
3. A request whose history *equals* the conversation's previous request is a retry of that turn (its next
   attempt), unless that turn already ended well: a client that closes a failed stream and sends the same body
   again at once is retrying, whichever connection event the proxy saw first.
   A Responses request continued by ``previous_response_id`` (its input holds only what is new) continues the
   conversation whose turn streamed that response (:meth:`Conversations.response_id`), as its next turn, or as a
   retry when it repeats that conversation's previous request. So does a Messages request continuing a server-held
   thread (``"thread": {"type": "continue", "previous_message_id": ...}``, the anthropic SDK's tool runner's
   default), by the id of the message that conversation streamed.
4. A request whose system prompt or tools changed (the time in the system prompt, a tool added: one of the two,
   not both) continues the conversation whose previous request's messages are a proper prefix of its own, the
   model's answer first after them (how ``continues_changed``), so that the turn keeps its conversation and its
   cache verdict can say what changed; with the same messages after the first turn, a turn that did not end well,
   it is a retry. A summary or title call (another system prompt and tools), a question about the history (a user
   message right after it) and the same first question under another system prompt are other conversations.
   (A Chat Completions history's leading system and developer messages are its system prompt here.)
   Before rules 2 and 4: a request whose newest messages hold a tool call a conversation streamed, right after
   that conversation's previous request's messages, continues it (tool ids are unique on a real API).
5. Anything else starts a new conversation.
6. Side requests (``count_tokens``, ``models``, non-streamed calls, other paths) are never turns: they are listed
   with the conversation their history extends, when there is one, or as "other requests".

Compared by content, not by bytes: ``cache_control`` marks are left out (harnesses move their breakpoint to the
newest message every turn) and so are the previous turns' thinking blocks (harnesses may drop them).

Several conversations may share a previous request (the same first question asked twice, the second time once the
first had its answer; a rerun against a deterministic mock): a prefix digest maps to every conversation waiting there,
oldest first, and a request that extends it continues the one whose turn streamed the tool calls it answers (the proxy
tells, ``streamed_tool``), else the oldest, so each keeps its own turns. A request equal to a
conversation's previous request that ended well is no retry: it continues another conversation it extends, if any,
else it starts a new one.

Limits: two identical conversations started at the same moment (same system, tools and first message, no session
header) are seen as one conversation whose second request is a retry; give each a header to tell them apart.

Each request's prefix digests are computed once, message by message (a chain of 16-byte BLAKE2b digests), and a
conversation is found by dictionary look-ups of those digests: the CPU per request grows with the size of that
request's body (which is read anyway), not with the number of conversations or the length of older histories.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from inspector.stream.history import without_cache_marks

SESSION_HEADERS = ("x-inspector-session", "x-claude-code-session-id")
TURN_PATHS = ("/v1/messages", "/v1/chat/completions", "/v1/responses")
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def _message_key(message: Any) -> bytes:
    """The comparable form of a message: its JSON with sorted keys, without ``cache_control`` marks and thinking
    blocks. Serialized once in C; only a message that may hold either (a byte search, which may say yes for text
    that merely mentions them) is walked in Python (:func:`_slow_key`): about 4x faster on a long history."""
    try:
        raw = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return _slow_key(message)
    if b'"cache_control"' in raw or b'thinking"' in raw:
        return _slow_key(message)
    return raw


def _is_thinking(kind: object) -> bool:
    """A block's ``type`` may be any JSON value a client sent (a list is unhashable): only a string can name one."""
    return isinstance(kind, str) and kind in _DROPPED_BLOCKS


def _slow_key(message: Any) -> bytes:
    m = without_cache_marks(message)
    if isinstance(m, dict) and isinstance(m.get("content"), list):
        m = dict(m)
        m["content"] = [b for b in m["content"] if not (isinstance(b, dict) and _is_thinking(b.get("type")))]
    try:
        return orjson.dumps(m, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits: its text is as good a key
        return repr(m).encode()


def _h(*parts: bytes) -> bytes:
    d = hashlib.blake2b(digest_size=16)
    for p in parts:
        d.update(p)
    return d.digest()


def messages_of(body: Mapping[str, Any]) -> list[Any]:
    msgs = body.get("messages")
    if isinstance(msgs, list):
        return msgs
    inp = body.get("input")  # Responses
    if isinstance(inp, list):
        return inp
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    return []


def split_system(body: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    """A request's system prompt and its other messages: Messages' ``system``, Responses' ``instructions``, or the
    leading ``system`` / ``developer`` messages of a Chat Completions (or Responses input) history."""
    messages = messages_of(body)
    system = body.get("system", body.get("instructions"))
    if system is not None:
        return system, messages
    k = 0
    while k < len(messages) and isinstance(messages[k], dict) and messages[k].get("role") in ("system", "developer"):
        k += 1
    return (messages[:k] or None), messages[k:]


def chain(body: Any) -> list[bytes]:
    """The prefix digests of a request: ``chain[k]`` stands for the system, tools and the first ``k`` messages."""
    return chains(body).digests


class Prefix(NamedTuple):
    """A request's prefix digests, each message serialized and hashed once for all of them."""

    digests: list[bytes]  # [k]: the system, tools and the first k messages (chain)
    alone: list[bytes]  # [k]: the first k messages, whatever the system and tools
    heads: tuple[bytes, bytes]  # the system prompt's digest, the tools' digest
    messages: list[Any]  # the messages (split_system: a leading system message is the system prompt)


_OPAQUE = _h(b"opaque")


def chains(body: Any) -> Prefix:
    """A request's :class:`Prefix` (a body that is not a JSON object, or one nested deeper than Python recurses,
    a client can send one: compared as opaque)."""
    if not isinstance(body, dict):
        return Prefix([_OPAQUE], [_OPAQUE], (_OPAQUE, _OPAQUE), [])
    system, messages = split_system(body)
    try:
        heads = _h(_message_key(system)), _h(_message_key(body.get("tools")))
        out = [_h(b"head", *heads)]
        alone = [_h(b"messages")]
        for m in messages:
            key = _h(_message_key(m))
            out.append(_h(out[-1], key))
            alone.append(_h(alone[-1], key))
    except RecursionError:
        return Prefix([_OPAQUE], [_OPAQUE], (_OPAQUE, _OPAQUE), [])
    return Prefix(out, alone, heads, messages)


def continued_from(body: Any) -> str | None:
    """The id of the earlier response a request continues on the server: Responses' ``previous_response_id``, or
    the Messages thread's ``previous_message_id`` (``"thread": {"type": "continue", ...}``); None when it sends its
    whole history."""
    if not isinstance(body, dict):
        return None
    prev = body.get("previous_response_id")
    if isinstance(prev, str):
        return prev
    thread = body.get("thread")
    if isinstance(thread, dict) and thread.get("type") == "continue":
        prev = thread.get("previous_message_id")
        if isinstance(prev, str):
            return prev
    return None


def _call_ids(messages: list[Any]) -> list[str]:
    """The tool call ids these messages hold: Messages ``tool_use`` blocks, Chat Completions ``tool_calls``,
    Responses ``function_call`` items."""
    ids: list[Any] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, list):
            ids += [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            ids += [c.get("id") for c in calls if isinstance(c, dict)]
        if m.get("type") in ("function_call", "custom_tool_call"):
            ids.append(m.get("call_id"))
    return [i for i in ids if isinstance(i, str)]


def _is_reply(message: Any) -> bool:
    """A model's answer in a history: an assistant message (Messages, Chat Completions), or a Responses output item
    (an assistant message, a function call, reasoning)."""
    if not isinstance(message, dict):
        return False
    return message.get("role") == "assistant" or message.get("type") in (
        "function_call",
        "custom_tool_call",
        "reasoning",
    )


def is_side(method: str, path: str, body: Any) -> str | None:
    """Why a request is a side request (never a turn), or None for a conversation turn."""
    p = path.split("?", 1)[0].rstrip("/")
    if method.upper() != "POST":
        return f"{method.upper()} {p or '/'}"
    if p.endswith("/count_tokens"):
        return "count_tokens"
    if not any(p.endswith(t) for t in TURN_PATHS):
        return f"other path {p or '/'}"
    if not isinstance(body, dict):
        return "not a JSON request"
    if body.get("stream") is not True:
        return "not streamed"
    return None


@dataclass
class Conversation:
    id: str
    number: int  # 1, 2, ... in order of appearance
    tip: bytes = b""  # the previous request's last prefix digest
    messages_tip: bytes = b""  # the same, of its messages alone (chains()[1])
    system_key: bytes = b""  # the previous request's system prompt and tools, each as a digest (Prefix.heads)
    tools_key: bytes = b""
    length: int = 0  # its number of messages
    turn: int = -1
    attempt: int = 0
    ended_well: bool = False  # the current turn's last attempt completed
    named_by: str | None = None  # the header that named it
    parent: str | None = None  # the conversation whose tool call started this one (a subagent), when clear
    model: str | None = None
    side_requests: int = 0
    pending_tool_inputs: list[str] = field(default_factory=list)  # its running tool calls' inputs, as text


@dataclass(frozen=True)
class Assignment:
    conversation: str | None  # None: a side request of no conversation ("other requests")
    turn: int  # -1 for side requests
    attempt: int
    side: str | None  # why it is a side request
    how: str  # "header", "new", "continues", "retry", "side"; "continues_changed": the system or tools changed
    parent: str | None = None


class Conversations:
    """The proxy's conversations. ``max_conversations`` bounds memory (the oldest idle one is forgotten)."""

    def __init__(self, max_conversations: int = 10_000) -> None:
        self.max = max_conversations
        self.by_id: OrderedDict[str, Conversation] = OrderedDict()
        # prefix digest of a previous request -> the ids of the conversations whose previous request it is, oldest
        # first (several when two conversations asked the same thing)
        self.tips: dict[bytes, list[str]] = {}
        # the same by the previous request's messages alone: a request whose system prompt or tools changed (a
        # timestamp in the system prompt, a tool added) continues the conversation whose messages it extends
        self.messages_tips: dict[bytes, list[str]] = {}
        # response id (Responses) or message id (Messages threads) -> the conversation whose turn streamed it
        # (previous_response_id, thread.previous_message_id); bounded
        self.responses: OrderedDict[str, str] = OrderedDict()
        # tool call id -> the conversation whose turn streamed it (_owner); bounded
        self.tool_ids: OrderedDict[str, str] = OrderedDict()
        self.count = 0
        self.other_requests = 0

    def _new(self, named: str | None = None, how: str | None = None) -> Conversation:
        self.count += 1
        cid = named or f"c{self.count}"
        conv = Conversation(cid, self.count, named_by=how)
        self.by_id[cid] = conv
        while len(self.by_id) > self.max:
            old_id, old = self.by_id.popitem(last=False)
            self._drop_tip(old_id, old.tip)
            self._drop_tip(old_id, old.messages_tip, self.messages_tips)
        return conv

    def _drop_tip(self, cid: str, tip: bytes, tips: dict[bytes, list[str]] | None = None) -> None:
        tips = self.tips if tips is None else tips
        waiting = tips.get(tip)
        if waiting is not None and cid in waiting:
            waiting.remove(cid)
            if not waiting:
                del tips[tip]

    def _move_tip(self, conv: Conversation, prefix: Prefix) -> None:
        if conv.tip:
            self._drop_tip(conv.id, conv.tip)
            self._drop_tip(conv.id, conv.messages_tip, self.messages_tips)
        conv.tip, conv.length = prefix.digests[-1], len(prefix.digests) - 1
        conv.messages_tip = prefix.alone[-1]
        conv.system_key, conv.tools_key = prefix.heads
        self.tips.setdefault(conv.tip, []).append(conv.id)
        self.messages_tips.setdefault(conv.messages_tip, []).append(conv.id)
        self.by_id.move_to_end(conv.id)

    def _waiting(self, digest: bytes, tips: dict[bytes, list[str]] | None = None) -> list[Conversation]:
        return [self.by_id[cid] for cid in (self.tips if tips is None else tips).get(digest, ()) if cid in self.by_id]

    def _changed_head(
        self, alone: list[bytes], messages: list[Any], heads: tuple[bytes, bytes]
    ) -> tuple[Conversation | None, str]:
        """A request whose system prompt or its tools changed (not both: a timestamp in the system prompt, a tool
        added), whose messages extend a conversation's previous request with the model's answer first: that
        conversation's next turn (``continues_changed``). Its retry (the same messages, a turn that did not end
        well, after the first turn) is one too. A request with another system prompt *and* other tools (a summary
        or title call over the same history), or that adds a user message right after the history (a question
        about it), is not; nor is the same first question under another system prompt."""

        def same_kind(conv: Conversation) -> bool:
            return conv.system_key == heads[0] or conv.tools_key == heads[1]

        n = len(alone) - 1
        if n >= 2:
            for conv in self._waiting(alone[n], self.messages_tips):
                if not conv.ended_well and same_kind(conv):
                    return conv, "retry"
        tips = self.messages_tips
        for k in range(n - 1, 0, -1):
            if alone[k] not in tips:  # (most prefixes are nobody's: one look-up, no list)
                continue
            waiting = [c for c in self._waiting(alone[k], tips) if same_kind(c)]
            if waiting:
                if not _is_reply(messages[k]):
                    return None, "new"
                return waiting[0], "continues_changed"
        return None, "new"

    def _owner(self, messages: list[Any], alone: list[bytes]) -> Conversation | None:
        """The conversation that streamed a tool call this request's newest messages hold, when its previous
        request's messages are a proper prefix of these and the call comes right after them (the answer it
        continues from): what tells apart runs whose histories were the same so far, whatever the order their
        next requests come in. Tool ids are unique on a real API."""
        n = len(messages)
        for i in range(n - 1, max(-1, n - 17), -1):
            for tool_id in _call_ids([messages[i]]):
                cid = self.tool_ids.get(tool_id[:200])
                conv = self.by_id.get(cid) if cid is not None else None
                if conv is not None and conv.tip and conv.length <= i < conv.length + 8:
                    if alone[conv.length] == conv.messages_tip:
                        return conv
        return None

    def _find(self, digests: list[bytes]) -> tuple[Conversation | None, int]:
        """The conversation whose previous request is the longest prefix of this one (and its length), the oldest
        of those waiting there."""
        tips = self.tips
        for k in range(len(digests) - 1, -1, -1):
            waiting = self._waiting(digests[k]) if digests[k] in tips else None
            if waiting:
                return waiting[0], k
        return None, -1

    def _place(self, digests: list[bytes]) -> tuple[Conversation | None, str]:
        """Where a request with these prefix digests goes: ``(conv, "retry")`` when it equals the previous request
        of a conversation whose turn has not ended well; else ``(conv, "continues")`` for the oldest conversation
        whose previous request is the longest proper prefix of it; else ``(None, "new")``."""
        n = len(digests) - 1
        for conv in self._waiting(digests[n]):
            if not conv.ended_well:
                return conv, "retry"
        tips = self.tips
        for k in range(n - 1, -1, -1):
            waiting = self._waiting(digests[k]) if digests[k] in tips else None
            if waiting:
                return waiting[0], "continues"
        return None, "new"

    def streamed_tool(self, conversation: str | None, tool_id: str) -> None:
        """A turn of this conversation streamed a tool call with this id: a later request whose history holds it
        continues that conversation, of several with the same history up to it."""
        if conversation is None or not tool_id:
            return
        self.tool_ids[tool_id[:200]] = conversation
        self.tool_ids.move_to_end(tool_id[:200])
        while len(self.tool_ids) > 4 * self.max:
            self.tool_ids.popitem(last=False)

    def assign(
        self, method: str, path: str, headers: Mapping[str, str], body: Any, prefix: Prefix | None = None
    ) -> Assignment:
        """Where a request goes (the rule above); ``prefix``: ``chains(body)`` when the caller computed it already
        (the proxy does for a large body, off its event loop)."""
        side = is_side(method, path, body)
        if prefix is None:
            prefix = chains(body)
        digests, alone = prefix.digests, prefix.alone
        named = None
        for h in SESSION_HEADERS:
            v = headers.get(h)
            if isinstance(v, str) and v.strip():
                named = (h, v.strip()[:200])
                break
        if side is not None:
            conv: Conversation | None = None
            if named is not None:
                conv = self.by_id.get(named[1])
            elif isinstance(body, dict):
                conv, _k = self._find(digests)
            if conv is None:
                self.other_requests += 1
                return Assignment(None, -1, 0, side, "side")
            conv.side_requests += 1
            return Assignment(conv.id, -1, 0, side, "side")
        if named is not None:
            conv = self.by_id.get(named[1])
            if conv is None:
                conv = self._new(named[1], named[0])
                return self._turn(conv, prefix, "header", body)
            if conv.tip == digests[-1] and not conv.ended_well:
                return self._retry(conv)
            return self._turn(conv, prefix, "header", body)
        prev = continued_from(body)
        conv = self.by_id.get(self.responses.get(prev, "")) if prev is not None else None
        if conv is not None:  # a request continued from a response of a known conversation, held by the server
            if conv.tip == digests[-1] and not conv.ended_well:
                return self._retry(conv)
            return self._turn(conv, prefix, "continues", body)
        conv, how = self._place(digests)
        if conv is not None and how == "retry":
            return self._retry(conv)
        owner = self._owner(prefix.messages, alone)
        if owner is not None:  # (the same as the prefix rule's choice, unless runs with one history got swapped)
            how = "continues" if digests[owner.length] == owner.tip else "continues_changed"
            return self._turn(owner, prefix, how, body)
        if conv is not None:
            return self._turn(conv, prefix, "continues", body)
        conv, how = self._changed_head(alone, prefix.messages, prefix.heads)
        if conv is not None and how == "retry":
            return self._retry(conv)
        if conv is not None:
            return self._turn(conv, prefix, how, body)
        conv = self._new()
        conv.parent = self._parent_of(body)
        return self._turn(conv, prefix, "new", body)

    def _turn(self, conv: Conversation, prefix: Prefix, how: str, body: Any) -> Assignment:
        conv.turn += 1
        conv.attempt = 0
        conv.ended_well = False
        conv.pending_tool_inputs.clear()
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            conv.model = body["model"][:200]  # (a client's text: bounded, as a session name)
        self._move_tip(conv, prefix)
        return Assignment(conv.id, conv.turn, 0, None, how, conv.parent)

    def _retry(self, conv: Conversation) -> Assignment:
        conv.attempt += 1
        self.by_id.move_to_end(conv.id)
        return Assignment(conv.id, conv.turn, conv.attempt, None, "retry", conv.parent)

    def ended(self, conversation: str | None, turn: int, attempt: int, ok: bool) -> None:
        """An attempt's end: a turn that ended well is not retried by an identical request."""
        conv = self.by_id.get(conversation or "")
        if conv is not None and conv.turn == turn and conv.attempt == attempt:
            conv.ended_well = ok

    def response_id(self, conversation: str | None, response_id: Any) -> None:
        """A turn of this conversation streamed the Responses response (or the Messages message) ``response_id``: a
        request whose ``previous_response_id`` (or ``thread.previous_message_id``) names it continues the
        conversation."""
        if conversation is None or not isinstance(response_id, str) or not response_id:
            return
        self.responses[response_id[:200]] = conversation
        self.responses.move_to_end(response_id[:200])
        while len(self.responses) > 4 * self.max:
            self.responses.popitem(last=False)

    def tool_call(self, conversation: str | None, input_text: str) -> None:
        """A tool call of this conversation started (its input, as text): a conversation that starts while it runs,
        with that text as its first message, is its child (a subagent)."""
        conv = self.by_id.get(conversation or "")
        if conv is not None and len(input_text) >= 20:
            conv.pending_tool_inputs.append(input_text[:4000])
            del conv.pending_tool_inputs[:-16]

    def _parent_of(self, body: Any) -> str | None:
        msgs = messages_of(body) if isinstance(body, dict) else []
        if not msgs or not isinstance(msgs[0], dict):
            return None
        first = msgs[0].get("content")
        if isinstance(first, list):
            first = " ".join(b.get("text", "") for b in first if isinstance(b, dict) and isinstance(b.get("text"), str))
        if not isinstance(first, str) or len(first) < 20:
            return None
        for conv in reversed(self.by_id.values()):
            for text in conv.pending_tool_inputs:
                if first in text or text in first:
                    return conv.id
        return None

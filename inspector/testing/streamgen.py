"""A seeded generator of VALID Anthropic Messages SSE streams, with the final message they must assemble to.

Used by the tests (property, differential, unit) and by `tools/bench_engine.py`. Pure Python, stdlib only.

    g = generate(seed)                    # a random shape
    g = generate(seed, "parallel_tools")  # a given shape (see SHAPES)
    g.data       # the bytes on the wire (LF line endings; see with_line_endings())
    g.message    # the final message the API means: content in index order, text joined, tool inputs parsed,
                 # usage merged (message_delta values overwrite message_start ones, null keeps the earlier value)
    g.events     # [(sse_event_name, payload_dict)] in wire order, pings included

Every stream is one the official SDK also accepts (content block indices in arrival order, every block
closed, `event:` lines on every event, message_delta usage with output_tokens), so the differential test can
compare both. Shapes vary: text, several text blocks, parallel tool calls, thinking + signature,
redacted_thinking, citations_delta, large tool inputs, server_tool_use + web_search_tool_result, and every
stream may have padded data JSON, pings anywhere, comments, `data:` without its space, multi-line data, an empty
first partial_json, unknown extra fields, a stop_sequence, and usage in message_delta overwriting message_start.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

# Tests import names directly (the hand-made event builders at the end are public too).

JSONObject: TypeAlias = dict[str, Any]  # a JSON object: an event's payload, a content block, a message
Event: TypeAlias = tuple[str, JSONObject]  # (SSE event name, payload), as encode_events writes it

SHAPES = (
    "text",
    "multi_text",
    "parallel_tools",
    "text_then_tool",
    "thinking",
    "redacted_thinking",
    "citations",
    "large_tool",
    "server_tool",
    "stop_sequence",
    "max_tokens_text",
    "mixed",
)

_WORDS = [
    "the",
    "file",
    "reads",
    "README.md",
    "I'll",
    "check",
    "tests",
    "and",
    "then",
    "fix",
    "the",
    "bug",
    ".",
    "héllo",
    "naïve",
    "日本語",
    "テスト",
    "🎉",
    "👩‍💻",
    "Ωmega",
    "ñ",
    "€100",
    "→",
    "\u2028",
    'quote"d',
    "back\\slash",
    "new\nline",
    "tab\there",
    '{"json": [1, 2]}',
    "</script>",
    "\x1b[0m",
    "ZWJ\u200d",
    "  ",
    "\t",
    "",
]

_TOOL_NAMES = ["read_file", "write_file", "list_dir", "run_tests", "grep", "calculator"]


@dataclass
class Generated:
    data: bytes
    message: JSONObject
    events: list[Event] = field(default_factory=list)
    shape: str = ""
    seed: int | None = None

    @property
    def n_events(self) -> int:
        return len(self.events)


# ------------------------------------------------------------------------------------------------ helpers
def _text(rng: random.Random, lo: int = 1, hi: int = 30) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))


def _split_text(rng: random.Random, s: str, max_len: int = 12) -> list[str]:
    """Split a string into pieces of 1..max_len code points (never empty unless s is empty)."""
    out: list[str] = []
    i = 0
    while i < len(s):
        n = rng.randint(1, max_len)
        out.append(s[i : i + n])
        i += n
    return out


def _tool_input(rng: random.Random, big_ints: bool = False) -> JSONObject:
    kind = rng.randrange(6)
    if kind == 0:
        return {"path": rng.choice(["README.md", "src/main.py", "docs/日本.md", 'a b/c"d.txt'])}
    if kind == 1:
        return {
            "path": "src/app.py",
            "content": _text(rng, 5, 60),
            "mode": rng.choice(["w", "a"]),
            "create_dirs": rng.random() < 0.5,
        }
    if kind == 2:
        return {
            "pattern": r"def \w+\(.*\):",
            "paths": [f"src/m{i}.py" for i in range(rng.randint(0, 6))],
            "options": {"ignore_case": True, "max_count": rng.randint(1, 1000), "context": None, "ratio": 0.25},
        }
    if kind == 3:
        # 64-bit boundaries; integers beyond 64 bits only on request (kept exact by core.exactjson as by the SDK's
        # jiter; tests/stream/test_differential.py compares them)
        big = [123456789012345678901234567890, -(2**70) + 3, 18446744073709551616] if big_ints else []
        return {
            "expression": "a * b",
            "a": rng.choice([2**63 - 1, -(2**63), 18446744073709551615, 7, *big]),
            "b": rng.choice([2, -1, 10**18, *big]),
            "precision": rng.choice([0.5, 1e-9, 3.141592653589793, -2.5e300]),
        }
    if kind == 4:
        return {}
    return {
        "nested": {"a": [1, [2, [3, {"b": None}]]], "c": "", "d": [], "e": {}},
        "unicode": 'Ω🎉\u0000\u001f\\"/',
        "bools": [True, False, None],
    }


def _big_string(rng: random.Random, n: int) -> str:
    parts: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(_WORDS)
        parts.append(w)
        size += len(w) + 1
    return " ".join(parts)[:n]


def _dumps_compact(obj: Any, rng: random.Random | None = None) -> str:
    if rng is None:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(
        obj,
        ensure_ascii=rng.random() < 0.3,
        separators=rng.choice([(",", ":"), (", ", ": ")]),
    )


# ------------------------------------------------------------------------------------------------ wire
def encode_events(
    events: list[Event], rng: random.Random | None = None, *, style: dict[str, bool] | None = None
) -> bytes:
    """Serialize (event name, payload) pairs as SSE with LF line endings.

    With an rng, each event may get: trailing spaces after the JSON, `data:` without a space, the JSON split over
    two data lines, a comment line, an `id:` line. `style` forces options: {"pad": bool, "comments": bool, ...}."""
    style = style or {}
    out: list[str] = []
    for name, payload in events:
        if rng is None:
            out.append(f"event: {name}\ndata: {_dumps_compact(payload)}\n\n")
            continue
        js = json.dumps(payload, ensure_ascii=rng.random() < 0.2, separators=rng.choice([(",", ":"), (", ", ": ")]))
        lines: list[str] = []
        if style.get("comments", True) and rng.random() < 0.05:
            lines.append(": keep-alive")
        if style.get("ids", True) and rng.random() < 0.05:
            lines.append(f"id: {rng.randint(0, 10**6)}")
        lines.append(f"event: {name}")
        if style.get("pad", True) and rng.random() < 0.3:
            js += " " * rng.randint(1, 8)
        sep = ": " if rng.random() < 0.85 else ":"
        if style.get("multiline", True) and rng.random() < 0.05 and js.startswith("{"):
            lines.append(f"data{sep}{{")
            lines.append(f"data{sep}{js[1:]}")
        else:
            lines.append(f"data{sep}{js}")
        out.append("\n".join(lines) + "\n\n")
    return "".join(out).encode("utf-8")


def with_line_endings(data: bytes, eol: str) -> bytes:
    """Rewrite an LF-only stream's line endings as "\\r\\n" (CRLF) or "\\r" (CR only). Data never holds raw CR/LF
    (JSON escapes them), so this is exact."""
    if eol == "\n":
        return data
    return data.replace(b"\n", eol.encode())


# ------------------------------------------------------------------------------------------------ message
def _message_start(rng: random.Random, extras: bool) -> JSONObject:
    usage: dict[str, Any] = {
        "input_tokens": rng.randint(1, 50_000),
        "cache_creation_input_tokens": rng.choice([0, 0, 1200]),
        "cache_read_input_tokens": rng.choice([0, 0, 3400]),
        "output_tokens": rng.randint(1, 5),
    }
    msg: dict[str, Any] = {
        "id": f"msg_{rng.getrandbits(64):016x}",
        "type": "message",
        "role": "assistant",
        "model": rng.choice(["claude-sonnet-4-5", "claude-opus-4-1-20250805", "claude-haiku-4-5"]),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    if extras:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": rng.choice([0, 7])}
        usage["service_tier"] = "standard"
        usage["inference_geo"] = rng.choice(["us", "eu", "not_available"])
        if rng.random() < 0.5:
            usage["server_tool_use"] = {"web_search_requests": 0}
    return msg


class _Builder:
    def __init__(
        self, rng: random.Random, *, pings: bool, empty_first: bool, extras: bool, big_ints: bool = False
    ) -> None:
        self.rng = rng
        self.events: list[Event] = []
        self.content: list[JSONObject] = []
        self.pings = pings
        self.empty_first = empty_first
        self.extras = extras
        self.big_ints = big_ints

    def ev(self, name: str, payload: JSONObject) -> None:
        self.events.append((name, payload))
        if self.pings and self.rng.random() < 0.08:
            self.events.append(("ping", {"type": "ping"}))

    def start(self, block: JSONObject) -> int:
        i = len(self.content)
        self.ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": block})
        return i

    def delta(self, i: int, d: JSONObject) -> None:
        self.ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

    def stop(self, i: int) -> None:
        self.ev("content_block_stop", {"type": "content_block_stop", "index": i})

    # -- blocks
    def text(self, text: str | None = None, citations: bool = False) -> None:
        rng = self.rng
        text = _text(rng) if text is None else text
        start: dict[str, Any] = {"type": "text", "text": ""}
        if citations:
            start["citations"] = None
        i = self.start(start)
        cits: list[JSONObject] = []
        for piece in _split_text(rng, text):
            if citations and rng.random() < 0.3:
                c: JSONObject = rng.choice(
                    [
                        {
                            "type": "char_location",
                            "cited_text": _text(rng, 1, 4),
                            "document_index": rng.randint(0, 2),
                            "document_title": "Notes",
                            "start_char_index": 0,
                            "end_char_index": 12,
                        },
                        {
                            "type": "web_search_result_location",
                            "cited_text": _text(rng, 1, 4),
                            "url": "https://example.com/a",
                            "title": "Example",
                            "encrypted_index": "Eo8BCioIAhgB",
                        },
                    ]
                )
                cits.append(c)
                self.delta(i, {"type": "citations_delta", "citation": c})
            self.delta(i, {"type": "text_delta", "text": piece})
        self.stop(i)
        block: dict[str, Any] = {"type": "text", "text": text}
        if citations:
            block["citations"] = cits or None
        self.content.append(block)

    def thinking(self) -> None:
        rng = self.rng
        text = _text(rng, 5, 40)
        sig = "".join(rng.choice("ABCDEFGHabcdefgh0123456789+/") for _ in range(rng.randint(20, 200))) + "=="
        i = self.start({"type": "thinking", "thinking": "", "signature": ""})
        for piece in _split_text(rng, text, 20):
            self.delta(i, {"type": "thinking_delta", "thinking": piece})
        self.delta(i, {"type": "signature_delta", "signature": sig})
        self.stop(i)
        self.content.append({"type": "thinking", "thinking": text, "signature": sig})

    def redacted_thinking(self) -> None:
        data = "EmwKAhgBEgy" + "".join(self.rng.choice("abcdef0123") for _ in range(64))
        i = self.start({"type": "redacted_thinking", "data": data})
        self.stop(i)
        self.content.append({"type": "redacted_thinking", "data": data})

    def tool(
        self, btype: str = "tool_use", value: JSONObject | None = None, fragment: int = 16, name: str | None = None
    ) -> None:
        rng = self.rng
        value = _tool_input(rng, self.big_ints) if value is None else value
        prefix = "toolu_" if btype == "tool_use" else "srvtoolu_"
        start: dict[str, Any] = {
            "type": btype,
            "id": f"{prefix}{rng.getrandbits(80):020x}",
            "name": name or (rng.choice(_TOOL_NAMES) if btype == "tool_use" else "web_search"),
            "input": {},
        }
        if self.extras and btype == "tool_use" and rng.random() < 0.3:
            start["caller"] = {"type": "direct"}
        i = self.start(start)
        js = _dumps_compact(value, rng)
        if value == {} and rng.random() < 0.5:
            pieces: list[str] = []  # no input_json_delta at all: the start block's {} stands
        else:
            pieces = _split_text(rng, js, fragment)
            if self.empty_first and rng.random() < 0.6:
                pieces.insert(0, "")
        for p in pieces:
            self.delta(i, {"type": "input_json_delta", "partial_json": p})
        self.stop(i)
        block = dict(start)
        block["input"] = copy.deepcopy(value)
        self.content.append(block)

    def web_search_result(self, tool_use_id: str) -> None:
        rng = self.rng
        results = [
            {
                "type": "web_search_result",
                "url": f"https://example.com/{k}",
                "title": _text(rng, 1, 5),
                "encrypted_content": "EqgfCioIARgBIiQ" + "x" * rng.randint(10, 80),
                "page_age": rng.choice([None, "April 30, 2025"]),
            }
            for k in range(rng.randint(1, 3))
        ]
        block = {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": results}
        i = self.start(copy.deepcopy(block))
        self.stop(i)
        self.content.append(block)


def generate(
    seed: int, shape: str | None = None, *, line_ending: str = "\n", noise: bool = True, big_ints: bool = False
) -> Generated:
    """A valid stream of the given shape (random shape if None). `noise=False`: no pings, comments, padding, ids,
    multi-line data or unknown fields (a plain stream). `big_ints`: tool inputs may hold integers beyond 64 bits."""
    rng = random.Random(seed)
    if shape is None:
        shape = rng.choice(SHAPES)
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}")
    extras = noise and rng.random() < 0.7
    b = _Builder(
        rng, pings=noise and rng.random() < 0.6, empty_first=rng.random() < 0.7, extras=extras, big_ints=big_ints
    )
    start = _message_start(rng, extras)
    if noise and rng.random() < 0.3:
        b.events.append(("ping", {"type": "ping"}))
    b.ev("message_start", {"type": "message_start", "message": copy.deepcopy(start)})

    stop_reason = "end_turn"
    stop_sequence = None
    if shape == "text":
        b.text()
    elif shape == "multi_text":
        for _ in range(rng.randint(2, 4)):
            b.text()
    elif shape == "parallel_tools":
        if rng.random() < 0.5:
            b.text()
        for _ in range(rng.randint(2, 4)):
            b.tool()
        stop_reason = "tool_use"
    elif shape == "text_then_tool":
        b.text()
        b.tool()
        stop_reason = "tool_use"
    elif shape == "thinking":
        b.thinking()
        if rng.random() < 0.5:
            b.text()
        else:
            b.tool()
            stop_reason = "tool_use"
    elif shape == "redacted_thinking":
        b.thinking()
        b.redacted_thinking()
        b.text()
    elif shape == "citations":
        b.text(citations=True)
        if rng.random() < 0.5:
            b.text(citations=True)
    elif shape == "large_tool":
        n = rng.choice([2_000, 8_000, 20_000])
        b.tool(value={"path": "big.txt", "content": _big_string(rng, n), "n": n}, fragment=rng.choice([20, 64, 200]))
        stop_reason = "tool_use"
    elif shape == "server_tool":
        b.text()
        b.tool("server_tool_use", value={"query": _text(rng, 1, 5)})
        b.web_search_result(b.content[-1]["id"])
        b.text(citations=True)
    elif shape == "stop_sequence":
        b.text()
        stop_reason = "stop_sequence"
        stop_sequence = rng.choice(["\n\nHuman:", "END", "</answer>", "日本"])
    elif shape == "max_tokens_text":
        b.text()
        stop_reason = "max_tokens"
    elif shape == "mixed":
        for _ in range(rng.randint(2, 6)):
            k = rng.randrange(4)
            if k == 0:
                b.text()
            elif k == 1:
                b.thinking()
            elif k == 2:
                b.redacted_thinking()
            else:
                b.tool()
        if any(c["type"] == "tool_use" for c in b.content):
            stop_reason = "tool_use"

    # message_delta: output_tokens always; sometimes input/cache totals overwriting message_start's, or nulls
    out_tokens = rng.randint(5, 5000)
    mdu: dict[str, Any] = {"output_tokens": out_tokens}
    usage = copy.deepcopy(start["usage"])
    usage["output_tokens"] = out_tokens
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        r = rng.random()
        if r < 0.3:
            mdu[key] = rng.randint(0, 90_000)  # a cumulative total: overwrites
            usage[key] = mdu[key]
        elif r < 0.45:
            mdu[key] = None  # null: the message_start value stays
    if shape == "server_tool":
        mdu["server_tool_use"] = {"web_search_requests": 1}
        usage["server_tool_use"] = {"web_search_requests": 1}
    delta: dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": stop_sequence}
    b.ev("message_delta", {"type": "message_delta", "delta": delta, "usage": mdu})
    b.events.append(("message_stop", {"type": "message_stop"}))
    if noise and rng.random() < 0.2:
        b.events.append(("ping", {"type": "ping"}))

    message = copy.deepcopy(start)
    message["content"] = b.content
    message["stop_reason"] = stop_reason
    message["stop_sequence"] = stop_sequence
    message["usage"] = usage
    data = encode_events(b.events, rng if noise else None)
    return Generated(with_line_endings(data, line_ending), message, b.events, shape, seed)


# ------------------------------------------------------------------------------------------------ benchmark
def big_tool_stream(n_bytes: int, fragment: int = 20, seed: int = 0) -> Generated:
    """One tool_use block whose input JSON is about `n_bytes` long, streamed in `fragment`-character
    input_json_delta events (plain LF stream, no pings)."""
    rng = random.Random(seed)
    b = _Builder(rng, pings=False, empty_first=False, extras=False)
    start = _message_start(rng, False)
    b.ev("message_start", {"type": "message_start", "message": copy.deepcopy(start)})
    overhead = len('{"path":"big.txt","content":""}')
    content = _big_string(rng, max(n_bytes - overhead, 0))
    # escapes make the JSON longer than the string: trim until the JSON is about n_bytes
    value = {"path": "big.txt", "content": content}
    js = _dumps_compact(value)
    while len(js.encode()) > n_bytes and content:
        content = content[: len(content) - (len(js.encode()) - n_bytes)]
        value["content"] = content
        js = _dumps_compact(value)
    start_block = {"type": "tool_use", "id": "toolu_big", "name": "write_file", "input": {}}
    i = b.start(start_block)
    for k in range(0, len(js), fragment):
        b.delta(i, {"type": "input_json_delta", "partial_json": js[k : k + fragment]})
    b.stop(i)
    b.content.append(dict(start_block, input=value))
    b.ev(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": len(js) // 4},
        },
    )
    b.ev("message_stop", {"type": "message_stop"})
    message = copy.deepcopy(start)
    message.update(content=b.content, stop_reason="tool_use", stop_sequence=None)
    message["usage"]["output_tokens"] = len(js) // 4
    return Generated(encode_events(b.events), message, b.events, "big_tool", seed)


def text_stream(n_events: int, seed: int = 0) -> Generated:
    """One text block streamed as `n_events` text_delta events (plain LF stream, no pings)."""
    rng = random.Random(seed)
    b = _Builder(rng, pings=False, empty_first=False, extras=False)
    start = _message_start(rng, False)
    b.ev("message_start", {"type": "message_start", "message": copy.deepcopy(start)})
    i = b.start({"type": "text", "text": ""})
    pieces = [rng.choice(_WORDS) + " " for _ in range(n_events)]
    for p in pieces:
        b.delta(i, {"type": "text_delta", "text": p})
    b.stop(i)
    b.content.append({"type": "text", "text": "".join(pieces)})
    b.ev(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": n_events},
        },
    )
    b.ev("message_stop", {"type": "message_stop"})
    message = copy.deepcopy(start)
    message.update(content=b.content, stop_reason="end_turn", stop_sequence=None)
    message["usage"]["output_tokens"] = n_events
    return Generated(encode_events(b.events), message, b.events, "text_stream", seed)


# ------------------------------------------------------------------------------------------------ hand-made events
# Small builders for tests that write a stream event by event (valid or not): each returns (event name, payload).
def message_start(
    id: str = "msg_1", model: str = "claude-test", usage: JSONObject | None = None, **extra: Any
) -> Event:
    msg: dict[str, Any] = {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1} if usage is None else usage,
    }
    msg.update(extra)
    return ("message_start", {"type": "message_start", "message": msg})


def block_start(i: int, block: JSONObject) -> Event:
    return ("content_block_start", {"type": "content_block_start", "index": i, "content_block": block})


def text_start(i: int, text: str = "") -> Event:
    return block_start(i, {"type": "text", "text": text})


def tool_start(i: int, id: str = "toolu_1", name: str = "read_file", btype: str = "tool_use") -> Event:
    return block_start(i, {"type": btype, "id": id, "name": name, "input": {}})


def delta(i: int, d: JSONObject) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})


def text_delta(i: int, text: str) -> Event:
    return delta(i, {"type": "text_delta", "text": text})


def json_delta(i: int, partial: str) -> Event:
    return delta(i, {"type": "input_json_delta", "partial_json": partial})


def thinking_delta(i: int, text: str) -> Event:
    return delta(i, {"type": "thinking_delta", "thinking": text})


def signature_delta(i: int, sig: str) -> Event:
    return delta(i, {"type": "signature_delta", "signature": sig})


def citations_delta(i: int, citation: JSONObject) -> Event:
    return delta(i, {"type": "citations_delta", "citation": citation})


def block_stop(i: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": i})


def message_delta(
    stop_reason: str | None = "end_turn",
    stop_sequence: str | None = None,
    usage: JSONObject | None = None,
    **extra: Any,
) -> Event:
    d = {"stop_reason": stop_reason, "stop_sequence": stop_sequence, **extra}
    return (
        "message_delta",
        {"type": "message_delta", "delta": d, "usage": {"output_tokens": 20} if usage is None else usage},
    )


def message_stop() -> Event:
    return ("message_stop", {"type": "message_stop"})


def ping() -> Event:
    return ("ping", {"type": "ping"})


def error_event(etype: str = "overloaded_error", message: str = "Overloaded") -> Event:
    return ("error", {"type": "error", "error": {"type": etype, "message": message}})


def sse(*items: Event | bytes | str, eol: str = "\n") -> bytes:
    """Encode events as SSE. Items: (name, payload) tuples, or raw bytes/str written as they are."""
    out: list[bytes] = []
    for it in items:
        if isinstance(it, tuple):
            out.append(encode_events([it]))
        else:
            out.append(it.encode() if isinstance(it, str) else it)
    return with_line_endings(b"".join(out), eol)


def text_turn(text: str = "Hello", stop_reason: str = "end_turn") -> list[Event]:
    """The events of a plain one-text-block turn."""
    return [
        message_start(),
        text_start(0),
        text_delta(0, text),
        block_stop(0),
        message_delta(stop_reason),
        message_stop(),
    ]


def tool_turn(fragments: list[str], name: str = "read_file", id: str = "toolu_1") -> list[Event]:
    """The events of a turn with one tool call whose input arrives in these fragments."""
    return [
        message_start(),
        tool_start(0, id, name),
        *[json_delta(0, f) for f in fragments],
        block_stop(0),
        message_delta("tool_use"),
        message_stop(),
    ]


# ------------------------------------------------------------------------------------------------ beta streams
# Every block and delta type of the SDK's beta stream types (anthropic.types.beta), for differential tests against
# `client.beta.messages.stream`. `generate_beta(seed)` returns a valid stream and the message the beta accumulator
# makes of it: blocks in index order, whole blocks as sent, tool inputs parsed, citations of every location type,
# compaction blocks with the LAST compaction_delta's content and encrypted_content (the beta accumulator replaces),
# a fallback block relabelling the message's model, `container` from message_start or message_delta,
# `context_management` from message_delta, and (shape "prefilled") a message_start that already holds complete
# tool_use blocks with a `caller` and a stop_reason, then message_stop with no message_delta.

BETA_SHAPES = ("mixed", "prefilled", "compaction", "server_tools", "mcp", "citations")

_CITATIONS: tuple[Callable[[random.Random], JSONObject], ...] = (
    lambda r: {
        "type": "char_location",
        "cited_text": _text(r, 1, 4),
        "document_index": r.randint(0, 2),
        "document_title": r.choice([None, "Notes"]),
        "start_char_index": 0,
        "end_char_index": 12,
    },
    lambda r: {
        "type": "page_location",
        "cited_text": _text(r, 1, 4),
        "document_index": 0,
        "document_title": "Report.pdf",
        "start_page_number": 1,
        "end_page_number": 3,
    },
    lambda r: {
        "type": "content_block_location",
        "cited_text": _text(r, 1, 4),
        "document_index": 1,
        "document_title": None,
        "start_block_index": 0,
        "end_block_index": 2,
    },
    lambda r: {
        "type": "web_search_result_location",
        "cited_text": _text(r, 1, 4),
        "url": "https://example.com/a",
        "title": "Example",
        "encrypted_index": "Eo8BCioIAhgB",
    },
    lambda r: {
        "type": "search_result_location",
        "cited_text": _text(r, 1, 4),
        "source": "https://kb.example/doc",
        "title": "KB",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    },
)
_SERVER_TOOLS = (
    "web_search",
    "web_fetch",
    "code_execution",
    "bash_code_execution",
    "text_editor_code_execution",
    "tool_search_tool_regex",
)


def _server_result(rng: random.Random, name: str, tool_use_id: str) -> JSONObject:
    if name == "web_search":
        content: JSONObject | list[JSONObject] = [
            {
                "type": "web_search_result",
                "url": "https://example.com/1",
                "title": _text(rng, 1, 4),
                "encrypted_content": "EqgfCioIARgB",
                "page_age": "April 30, 2025",
            }
        ]
        btype = "web_search_tool_result"
    elif name == "web_fetch":
        content = {
            "type": "web_fetch_result",
            "url": "https://example.com/page",
            "retrieved_at": "2025-08-25T10:30:00Z",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": _text(rng, 3, 12)},
                "title": "Page",
            },
        }
        btype = "web_fetch_tool_result"
    elif name == "code_execution":
        content = {"type": "code_execution_result", "stdout": "4\n", "stderr": "", "return_code": 0, "content": []}
        btype = "code_execution_tool_result"
    elif name == "bash_code_execution":
        outcomes: list[JSONObject] = [
            {"type": "bash_code_execution_result", "stdout": "ok\n", "stderr": "", "return_code": 0, "content": []},
            {"type": "bash_code_execution_tool_result_error", "error_code": "unavailable"},
        ]
        content = rng.choice(outcomes)
        btype = "bash_code_execution_tool_result"
    elif name == "text_editor_code_execution":
        content = {
            "type": "text_editor_code_execution_view_result",
            "file_type": "text",
            "content": "print(1)\n",
            "num_lines": 1,
            "start_line": 1,
            "total_lines": 1,
        }
        btype = "text_editor_code_execution_tool_result"
    else:
        content = {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": rng.choice(_TOOL_NAMES)}],
        }
        btype = "tool_search_tool_result"
    return {"type": btype, "tool_use_id": tool_use_id, "content": content}


class _BetaBuilder(_Builder):
    def whole(self, block: JSONObject) -> None:
        """A block that arrives whole in content_block_start, with no delta."""
        i = self.start(copy.deepcopy(block))
        self.stop(i)
        self.content.append(block)

    def cited_text(self) -> None:
        rng = self.rng
        i = self.start({"type": "text", "text": "", "citations": None})
        text, cits = "", []
        for maker in rng.sample(_CITATIONS, rng.randint(2, len(_CITATIONS))):
            c = maker(rng)
            cits.append(c)
            self.delta(i, {"type": "citations_delta", "citation": c})
            piece = _text(rng, 1, 6)
            text += piece
            self.delta(i, {"type": "text_delta", "text": piece})
        self.stop(i)
        self.content.append({"type": "text", "text": text, "citations": cits})

    def server_tool(self, name: str) -> None:
        rng = self.rng
        value = {"query": _text(rng, 1, 5)} if name != "code_execution" else {"code": "print(2+2)"}
        before = len(self.content)
        self.tool("server_tool_use", value, name=name)
        tool_id = self.content[before]["id"]
        self.whole(_server_result(rng, name, tool_id))

    def mcp(self) -> None:
        rng = self.rng
        self.whole(
            {
                "type": "mcp_tool_listing",
                "mcp_server_name": "files",
                "tools": [{"name": "search", "description": "Search", "input_schema": {"type": "object"}}],
            }
        )
        value = _tool_input(rng)
        start = {
            "type": "mcp_tool_use",
            "id": f"mcptoolu_{rng.getrandbits(64):016x}",
            "name": "search",
            "server_name": "files",
            "input": {},
        }
        i = self.start(dict(start))
        for p in _split_text(rng, _dumps_compact(value, rng), 12):
            self.delta(i, {"type": "input_json_delta", "partial_json": p})
        self.stop(i)
        self.content.append({**start, "input": value})
        self.whole(
            {
                "type": "mcp_tool_result",
                "tool_use_id": start["id"],
                "is_error": rng.random() < 0.3,
                "content": rng.choice([_text(rng, 1, 5), [{"type": "text", "text": _text(rng, 1, 5)}]]),
            }
        )

    def compaction(self) -> None:
        rng = self.rng
        i = self.start({"type": "compaction", "content": None})
        content: str | None = None
        encrypted: str | None = None
        for _ in range(rng.randint(1, 3)):
            content = _text(rng, 3, 20)
            encrypted = rng.choice([None, "Enc" + "z" * rng.randint(1, 30)])
            d: dict[str, Any] = {"type": "compaction_delta", "content": content}
            if encrypted is not None:
                d["encrypted_content"] = encrypted
            self.delta(i, d)
        self.stop(i)
        block: dict[str, Any] = {"type": "compaction", "content": content}
        if encrypted is not None:
            block["encrypted_content"] = encrypted
        self.content.append(block)


def generate_beta(seed: int, shape: str | None = None) -> Generated:
    """A valid beta stream (see BETA_SHAPES) and the message the SDK's beta accumulator makes of it."""
    rng = random.Random(seed)
    if shape is None:
        shape = rng.choice(BETA_SHAPES)
    if shape not in BETA_SHAPES:
        raise ValueError(f"unknown beta shape {shape!r}")
    b = _BetaBuilder(rng, pings=rng.random() < 0.5, empty_first=rng.random() < 0.5, extras=rng.random() < 0.5)
    start = _message_start(rng, b.extras)
    container = {"id": f"container_{rng.getrandbits(48):012x}", "expires_at": "2025-11-30T12:00:00Z"}
    if shape == "prefilled" or rng.random() < 0.3:
        start["container"] = copy.deepcopy(container)
    if shape == "prefilled":
        # programmatic tool calling: complete tool_use blocks (with their caller) and the stop_reason in
        # message_start, usage all zeros, then message_stop with no message_delta
        for k in range(rng.randint(1, 3)):
            start["content"].append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{rng.getrandbits(64):016x}",
                    "name": rng.choice(_TOOL_NAMES),
                    "input": _tool_input(rng),
                    "caller": {"type": "code_execution_20250825", "tool_id": f"srvtoolu_{k:04d}"},
                }
            )
        start["stop_reason"] = "tool_use"
        start["usage"] = {"input_tokens": 0, "output_tokens": 0}
        b.ev("message_start", {"type": "message_start", "message": copy.deepcopy(start)})
        b.ev("message_stop", {"type": "message_stop"})
        return Generated(encode_events(b.events, rng), copy.deepcopy(start), b.events, "beta:prefilled", seed)

    b.ev("message_start", {"type": "message_start", "message": copy.deepcopy(start)})
    message = copy.deepcopy(start)
    stop_reason = "end_turn"
    if shape == "compaction":
        b.compaction()
        b.text()
    elif shape == "server_tools":
        for name in rng.sample(_SERVER_TOOLS, rng.randint(2, len(_SERVER_TOOLS))):
            b.server_tool(name)
        b.text()
    elif shape == "mcp":
        b.mcp()
        b.text()
    elif shape == "citations":
        b.cited_text()
        b.cited_text()
    else:  # mixed: a bit of everything, in random order
        steps: list[Callable[[], None]] = [
            b.thinking,
            b.redacted_thinking,
            b.cited_text,
            b.compaction,
            b.mcp,
            lambda: b.server_tool(rng.choice(_SERVER_TOOLS)),
            lambda: b.whole({"type": "container_upload", "file_id": f"file_{rng.getrandbits(40):010x}"}),
            lambda: b.whole(
                {
                    "type": "advisor_tool_result",
                    "tool_use_id": f"srvtoolu_{rng.getrandbits(40):010x}",
                    "content": {"type": "advisor_result", "text": _text(rng, 2, 8), "stop_reason": "end_turn"},
                }
            ),
        ]
        for step in rng.sample(steps, rng.randint(3, len(steps))):
            step()
        if rng.random() < 0.4:
            to = rng.choice(["claude-sonnet-4-5", "claude-haiku-4-5"])
            b.whole(
                {
                    "type": "fallback",
                    "from": {"model": message["model"]},
                    "to": {"model": to},
                    "trigger": {"type": "refusal", "category": "cyber"},
                }
            )
            message["model"] = to
            b.text()
        if rng.random() < 0.5:
            b.tool()
            stop_reason = "tool_use"
    delta: dict[str, Any] = {"stop_reason": stop_reason, "stop_sequence": None}
    if rng.random() < 0.5:
        delta["container"] = copy.deepcopy(container)
        message["container"] = copy.deepcopy(container)
    md: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": rng.randint(5, 500)}}
    if rng.random() < 0.4:
        cm = {
            "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 900}]
        }
        md["context_management"] = cm
        message["context_management"] = copy.deepcopy(cm)
    b.ev("message_delta", md)
    b.ev("message_stop", {"type": "message_stop"})
    message.update(content=b.content, stop_reason=stop_reason, stop_sequence=None)
    message["usage"]["output_tokens"] = md["usage"]["output_tokens"]
    return Generated(encode_events(b.events, rng), message, b.events, f"beta:{shape}", seed)

"""Token usage, one shape for every wire family: what a turn consumed, split the way it is billed.

The trap this module exists for: Anthropic reports cache reads and writes *outside* ``input_tokens``; OpenAI reports
cached tokens *inside* ``prompt_tokens`` / ``input_tokens``. Here ``input`` is always the uncached input, so
``input + cache_write + cache_read`` is the whole prompt for either family, and nothing is counted twice.

Reasoning/thinking tokens are *part of* ``output`` (both families report them inside the output count); they are
kept apart only to be shown. Plain data: sums, JSON, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from inspector.core.wire import USAGE_COUNTS, is_count

Family = Literal["anthropic", "openai"]


def _int(value: Any) -> int:
    """A count as reported, or 0 for anything that is not a non-negative integer (bool is not a count)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _opt(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Usage:
    """Counts of one attempt (or a sum of attempts). ``cache_write_5m`` / ``cache_write_1h`` are None when the API
    did not split the writes by lifetime."""

    input: int = 0  # uncached input tokens
    output: int = 0  # output tokens, reasoning included
    cache_write: int = 0
    cache_read: int = 0
    reasoning: int = 0  # thinking / reasoning tokens (inside output)
    cache_write_5m: int | None = None
    cache_write_1h: int | None = None
    server_tools: dict[str, int] = field(default_factory=dict)  # e.g. web_search_requests: 2
    reported: bool = False  # the API sent a usage object at all
    # a sum over turns: how many of them were answered without usage (their counts are unknown, not in these)
    unreported: int = 0

    @property
    def prompt(self) -> int:
        """The whole prompt: uncached input + cache writes + cache reads."""
        return self.input + self.cache_write + self.cache_read

    @property
    def hit_rate(self) -> float | None:
        """cache read / (cache read + cache write + input); None when nothing was sent."""
        total = self.prompt
        return self.cache_read / total if total else None

    def __add__(self, other: Usage) -> Usage:
        def both(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        tools = dict(self.server_tools)
        for k, v in other.server_tools.items():
            tools[k] = tools.get(k, 0) + v
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
            self.reasoning + other.reasoning,
            both(self.cache_write_5m, other.cache_write_5m),
            both(self.cache_write_1h, other.cache_write_1h),
            tools,
            self.reported or other.reported,
            self.unreported + other.unreported,
        )

    def to_json(self) -> dict[str, Any]:
        """The counts as JSON; without usage from the API, ``reported: false`` and null counts (unknown, never 0:
        docs/openai.md)."""
        if not self.reported:
            return {**dict.fromkeys(_COUNT_KEYS), "cache_hit_rate": None, "reported": False}
        out: dict[str, Any] = {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_write_tokens": self.cache_write,
            "cache_read_tokens": self.cache_read,
            "reasoning_tokens": self.reasoning,
        }
        if self.cache_write_5m is not None or self.cache_write_1h is not None:
            out["cache_write_5m_tokens"] = self.cache_write_5m or 0
            out["cache_write_1h_tokens"] = self.cache_write_1h or 0
        if self.server_tools:
            out["server_tool_uses"] = dict(self.server_tools)
        rate = self.hit_rate
        out["cache_hit_rate"] = None if rate is None else round(rate, 4)
        if self.unreported:  # (a partial sum: these turns' counts are unknown, the figures above a lower bound)
            out["turns_without_usage"] = self.unreported
        return out


ZERO = Usage()
_COUNT_KEYS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "reasoning_tokens")


def _spoiled(u: dict[str, Any]) -> bool:
    """A count that is there but not a count (a string, a boolean, a float, a negative number: the stream engine's
    ``protocol.wrong_type``, by the same rule): the usage is unknown, not 0."""
    return any(u.get(k) is not None and not is_count(u.get(k)) for k in USAGE_COUNTS)


def from_anthropic(usage: Any) -> Usage:
    """A Messages API ``usage`` object (message_start's merged with message_delta's cumulative counts). A count that
    is not a non-negative integer makes it unknown (not reported), never 0."""
    u = _dict(usage)
    if not u:
        return ZERO
    if _spoiled(u):
        return ZERO
    creation = _dict(u.get("cache_creation"))
    details = _dict(u.get("output_tokens_details"))
    server = {k: v for k, v in _dict(u.get("server_tool_use")).items() if _opt(v)}
    return Usage(
        input=_int(u.get("input_tokens")),
        output=_int(u.get("output_tokens")),
        cache_write=_int(u.get("cache_creation_input_tokens")),
        cache_read=_int(u.get("cache_read_input_tokens")),
        reasoning=_int(details.get("thinking_tokens")),
        cache_write_5m=_opt(creation.get("ephemeral_5m_input_tokens")) if creation else None,
        cache_write_1h=_opt(creation.get("ephemeral_1h_input_tokens")) if creation else None,
        server_tools=server,
        reported=True,
    )


def from_openai(usage: Any) -> Usage:
    """A Chat Completions ``usage`` (prompt_tokens / completion_tokens) or a Responses ``usage`` (input_tokens /
    output_tokens). Cached tokens are inside the prompt count there: they are taken out of ``input``."""
    u = _dict(usage)
    if not u or _spoiled(u):
        return ZERO
    if "prompt_tokens" in u or "completion_tokens" in u:
        prompt, output = _int(u.get("prompt_tokens")), _int(u.get("completion_tokens"))
        pdet, odet = _dict(u.get("prompt_tokens_details")), _dict(u.get("completion_tokens_details"))
    else:
        prompt, output = _int(u.get("input_tokens")), _int(u.get("output_tokens"))
        pdet, odet = _dict(u.get("input_tokens_details")), _dict(u.get("output_tokens_details"))
    cached = min(_int(pdet.get("cached_tokens")), prompt)
    written = min(_int(pdet.get("cache_write_tokens")), prompt - cached)
    return Usage(
        input=prompt - cached - written,
        output=output,
        cache_write=written,
        cache_read=cached,
        reasoning=_int(odet.get("reasoning_tokens")),
        reported=True,
    )


def from_wire(usage: Any, family: Family = "anthropic") -> Usage:
    return from_openai(usage) if family == "openai" else from_anthropic(usage)


def family_of_usage(usage: Any) -> Family:
    """Which family a bare usage object is from, by its own keys (never by a file name)."""
    u = _dict(usage)
    if "prompt_tokens" in u or "completion_tokens" in u or "input_tokens_details" in u or "total_tokens" in u:
        return "openai"
    return "anthropic"

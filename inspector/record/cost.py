"""What a turn cost, from a maintained price package: genai-prices (MIT, data bundled, offline; its updater is
never started here). An unknown model is *unpriced*, never guessed.

Each attempt is priced on its own (long-context tiers apply per request), then summed. genai-prices counts cache
reads and writes *inside* ``input_tokens``: the neutral :class:`~inspector.observe.usage.Usage` keeps them apart, so
its whole prompt is passed, never ``input`` plus the cache again.

genai-prices is imported on first use only (it takes ~0.25 s): ``--help`` and plain ``dump`` stay fast.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from inspector.observe.usage import Family, Usage


@dataclass(frozen=True)
class Cost:
    total: Decimal | None  # None: unpriced
    input: Decimal | None = None
    output: Decimal | None = None
    model: str | None = None  # the price table's model id
    unpriced: str | None = None  # why there is no price

    def __add__(self, other: Cost) -> Cost:
        if self.total is None or other.total is None:
            return Cost(None, unpriced=self.unpriced or other.unpriced)
        if self.model is None and self.total == 0:  # FREE + x is x (a sum starts at FREE)
            return other
        if other.model is None and other.total == 0:
            return self
        return Cost(
            self.total + other.total,
            (self.input or Decimal(0)) + (other.input or Decimal(0)),
            (self.output or Decimal(0)) + (other.output or Decimal(0)),
            self.model if self.model == other.model else None,
        )

    def to_json(self) -> dict[str, Any]:
        if self.total is None:
            return {"usd": None, "unpriced": self.unpriced or "unpriced"}
        return {
            "usd": float(self.total),
            "input_usd": float(self.input or 0),
            "output_usd": float(self.output or 0),
            "model": self.model,
        }


FREE = Cost(Decimal(0), Decimal(0), Decimal(0))
USAGE_NOT_REPORTED = "usage not reported"
# an answer that came without usage (a chat stream without stream_options.include_usage): unknown, never $0
NOT_REPORTED = Cost(None, unpriced=USAGE_NOT_REPORTED)


def price_source() -> str:
    """The price data's name and date, shown beside every cost."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("genai-prices")
    except PackageNotFoundError:
        return "prices: genai-prices not installed"
    return f"prices: genai-prices {v} (bundled data, not updated)"


def price(usage: Usage, model: str | None, family: Family = "anthropic", provider: str | None = None) -> Cost:
    """The cost of one attempt. ``provider`` is genai-prices' provider id (default: the family's own API)."""
    if not usage.reported or (usage.prompt == 0 and usage.output == 0):
        return FREE
    if not isinstance(model, str) or not model:
        return Cost(None, unpriced="no model named")
    try:
        import genai_prices
    except ImportError:
        return Cost(None, unpriced="genai-prices is not installed")
    pid = provider or ("anthropic" if family == "anthropic" else "openai")
    counts: dict[str, int] = {
        "input_tokens": usage.prompt,
        "output_tokens": usage.output,
        "cache_read_tokens": usage.cache_read,
        "cache_write_tokens": usage.cache_write,
    }
    if usage.cache_write_5m is not None or usage.cache_write_1h is not None:
        counts["cache_write_5m_tokens"] = usage.cache_write_5m or 0
        counts["cache_write_1h_tokens"] = usage.cache_write_1h or 0
    if usage.server_tools.get("web_search_requests"):
        counts["web_searches"] = usage.server_tools["web_search_requests"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calc = genai_prices.calc_price(genai_prices.Usage(**counts), model_ref=model, provider_id=pid)
    except LookupError:
        return Cost(None, unpriced=f"unpriced: no price for {model!r} ({pid})")
    except Exception as e:  # noqa: BLE001 (a price table that cannot price this usage: say so, never guess)
        return Cost(None, unpriced=f"unpriced: {type(e).__name__}")
    return Cost(calc.total_price, calc.input_price, calc.output_price, calc.model.id)


def fmt_usd(cost: Cost) -> str:
    if cost.total is None:  # (no price for the model; or an answer without usage: its cost is unknown, not unpriced)
        return "unknown" if cost.unpriced == USAGE_NOT_REPORTED else "unpriced"
    v = cost.total
    if v == 0:
        return "$0"
    if v < Decimal("0.01"):
        return f"${v:.4f}"
    return f"${v:.2f}" if v >= 1 else f"${v:.3f}"

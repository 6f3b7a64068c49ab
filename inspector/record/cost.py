"""What a turn cost, from a maintained price package: genai-prices (MIT, data bundled, offline; its updater is
never started here). An unknown model is *unpriced*, never guessed.

Each attempt is priced on its own (long-context tiers apply per request), then summed. genai-prices counts cache
reads and writes *inside* ``input_tokens``: the neutral :class:`~inspector.observe.usage.Usage` keeps them apart, so
its whole prompt is passed, never ``input`` plus the cache again.

A model name is matched to a price the way genai-prices matches it: some models by their exact names, many by a
prefix (``claude-sonnet-4-5`` prices ``claude-sonnet-4-5-20250929``, and also ``claude-sonnet-4-5-my-finetune``).
When the name sent is not one the table names (its id, a listed name or prefix spelt whole, or one of those with a
date or ``-latest`` after it: a snapshot of the same model), the cost is still the table's, but it says whose:
``priced_as`` (``$0.0045 (priced as claude-sonnet-4-5)``), never silently the price of another model.

genai-prices is imported on first use only (it takes ~0.25 s): ``--help`` and plain ``dump`` stay fast.
"""

from __future__ import annotations

import re
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
    # the table's models whose prices were used for names it does not list (matched by a prefix): said with the cost
    priced_as: tuple[str, ...] = ()

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
            priced_as=tuple(sorted({*self.priced_as, *other.priced_as})),
        )

    def to_json(self) -> dict[str, Any]:
        if self.total is None:
            return {"usd": None, "unpriced": self.unpriced or "unpriced"}
        out: dict[str, Any] = {
            "usd": float(self.total),
            "input_usd": float(self.input or 0),
            "output_usd": float(self.output or 0),
            "model": self.model,
        }
        if self.priced_as:
            out["priced_as"] = list(self.priced_as)
        return out


FREE = Cost(Decimal(0), Decimal(0), Decimal(0))
USAGE_NOT_REPORTED = "usage not reported"
# an answer that came without usage (a chat stream without stream_options.include_usage): unknown, never $0
NOT_REPORTED = Cost(None, unpriced=USAGE_NOT_REPORTED)


def prices_version() -> str | None:
    """The installed genai-prices' version (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("genai-prices")
    except PackageNotFoundError:
        return None


def price_source() -> str:
    """The price data's name and date, shown beside every cost."""
    v = prices_version()
    if v is None:
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
    table = str(calc.model.id)
    approx = () if names_model(model, calc.model) else (table,)
    return Cost(calc.total_price, calc.input_price, calc.output_price, table, priced_as=approx)


# a snapshot of a model: its name and a date (-20250929, @20250929, -2024-08-06) or -latest
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2})|-latest)$")


def names_model(name: str, info: Any) -> bool:
    """Whether genai-prices' model ``info`` names ``name`` itself: its id, a name or prefix its match lists, spelt
    whole, or one of those with a snapshot's date or ``-latest`` after it; not a longer name that only starts with
    one (``claude-sonnet-4-5-my-finetune``) or contains one. Unknown match clauses count as not naming it."""
    names = {str(getattr(info, "id", "")).lower()}
    todo = [getattr(info, "match", None)]
    while todo:
        clause = todo.pop()
        for key in ("or_", "and_"):
            todo.extend(getattr(clause, key, None) or ())
        for key in ("equals", "starts_with"):
            value = getattr(clause, key, None)
            if isinstance(value, str):
                names.add(value.lower())
    ref = name.lower()
    return ref in names or _SNAPSHOT.sub("", ref) in names


def fmt_usd(cost: Cost) -> str:
    if cost.total is None:  # (no price for the model; or an answer without usage: its cost is unknown, not unpriced)
        return "unknown" if cost.unpriced == USAGE_NOT_REPORTED else "unpriced"
    v = cost.total
    if v == 0:
        text = "$0"
    elif v < Decimal("0.01"):
        text = f"${v:.4f}"
    else:
        text = f"${v:.2f}" if v >= 1 else f"${v:.3f}"
    return text + priced_as_note(cost.priced_as)


def priced_as_note(models: Any) -> str:
    """`` (priced as claude-sonnet-4-5)`` after a cost whose models were matched by a prefix (``models``: the table's
    model ids, from a Cost or its JSON); empty otherwise."""
    if not isinstance(models, (list, tuple)) or not models:
        return ""
    return f" (priced as {', '.join(str(m) for m in models)})"

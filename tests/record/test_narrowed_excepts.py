"""The exceptions narrowed for ruff's BLE001 still cover the failures they are there for (issue 17 §5)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import orjson
import pytest

from inspector.record import cachebreak, cost


def test_canon_of_a_value_json_cannot_write_is_its_repr() -> None:
    # a lone surrogate comes out of json.loads of "\ud800": orjson refuses to write it (JSONEncodeError, a TypeError)
    value = {"system": "\ud800"}
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(value)
    assert cachebreak._canon(value) == repr(value)


def test_canon_of_a_nesting_too_deep_for_orjson_is_its_repr() -> None:
    value: list[Any] = []
    for _ in range(300):  # orjson stops at 254 levels (JSONEncodeError)
        value = [value]
    assert cachebreak._canon(value) == repr(value)


def test_price_source_without_genai_prices_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert cost.price_source() == "prices: genai-prices not installed"


def test_price_source_names_the_installed_version() -> None:
    v = importlib.metadata.version("genai-prices")
    assert cost.price_source() == f"prices: genai-prices {v} (bundled data, not updated)"

"""Determinism for every dashboard test: no color/theme overrides from the environment, no animations, no blink, and
one genai-prices version in what the panes say (a snapshot that named the installed one failed on a fresh machine as
soon as a newer release was on the index: 0.2.5 against the 0.2.3 it was taken with)."""

from __future__ import annotations

import pytest
import textual.constants

from inspector.record import cost


@pytest.fixture(autouse=True)
def _deterministic_textual(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(textual.constants, "TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(textual.constants, "NO_COLOR", False, raising=False)
    monkeypatch.setattr(cost, "prices_version", lambda: "X.Y.Z")

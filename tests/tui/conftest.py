"""Determinism for every dashboard test: no color/theme overrides from the environment, no animations, no blink."""

from __future__ import annotations

import pytest
import textual.constants


@pytest.fixture(autouse=True)
def _deterministic_textual(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(textual.constants, "TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(textual.constants, "NO_COLOR", False, raising=False)

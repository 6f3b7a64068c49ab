"""The fake API's model check when genai-prices' catalogue cannot load: every model is known (no request turns into a
404), and the failure is said once in the log, not once per request."""

from __future__ import annotations

import logging

import pytest

from inspector.scenarios import fakeapi


def _broken() -> None:
    raise OSError("the data snapshot is unreadable")


def test_a_catalogue_that_cannot_load_knows_every_model_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fakeapi, "_anthropic_catalogue", _broken)
    monkeypatch.setattr(fakeapi, "_openai_catalogue", _broken)
    monkeypatch.setattr(fakeapi, "_catalogue_warned", False)
    with caplog.at_level(logging.WARNING, logger="inspector.fakeapi"):
        assert fakeapi.known_model("no-such-model") and fakeapi.known_openai_model("no-such-model")
        assert fakeapi.known_model("claude-nothing") and fakeapi.known_openai_model("gpt-nothing")
    said = [r for r in caplog.records if "did not load" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is not None


def test_a_catalogue_that_loads_tells_models_apart() -> None:
    assert fakeapi.known_model("claude-sonnet-4-6") and not fakeapi.known_model("no-such-model")
    assert fakeapi.known_openai_model("gpt-4o") and not fakeapi.known_openai_model("no-such-model")
    assert fakeapi.known_model("anything", extra=["anything"])


@pytest.mark.parametrize("model", ["", "\x00", "[", ".*", "x" * 10_000])
def test_odd_model_names_are_answered(model: str) -> None:
    assert fakeapi.known_model(model) is False and fakeapi.known_openai_model(model) is False

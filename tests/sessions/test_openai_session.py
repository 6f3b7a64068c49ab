"""The OpenAI session as the dashboard runs it: threaded (the loop and its HTTP on a thread of their own), the
observations relayed in order, the openai client closed at the end; and its source and secrets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from inspector.core.errors import SourceError
from inspector.observe import observations as O
from inspector.sessions.sources import openai_session
from inspector.testing.loop import RUN_TIMEOUT, Observed
from inspector.testing.openai_fake import KEY, FakeOpenAI, Stream, chat_text, responses_text


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_threaded_openai_session(api: str) -> None:
    fake = FakeOpenAI([Stream([chat_text("hello") if api == "chat" else responses_text("hello")])])
    s = openai_session("gpt-test", "hi", api=api, api_key=KEY, builtin=False, http_client=fake.client())
    s.threaded = True
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    assert list(result.messages) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert isinstance(obs.items[0], O.LoopStarted) and isinstance(obs.items[-1], O.LoopFinished)
    assert s.loop.client.is_closed()
    assert s.secrets == [KEY]
    assert s.source == {"type": "api", "provider": "openai", "api": api, "model": "gpt-test"}


def test_openai_session_refuses_what_it_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SourceError, match="OPENAI_API_KEY"):
        openai_session("m", "p")
    with pytest.raises(SourceError, match="chat or responses"):
        openai_session("m", "p", api="completions", api_key=KEY)
    with pytest.raises(SourceError, match="not a directory"):
        openai_session("m", "p", api_key=KEY, workspace=tmp_path / "missing")


def test_base_url_credentials_are_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:relay-secret-0123456789@127.0.0.1:9/v1")
    s = openai_session("m", "p", api_key=KEY, builtin=False)
    assert "relay-secret-0123456789" in s.secrets
    assert "relay-secret-0123456789" not in str(s.source)
    assert str(s.loop.client.base_url).startswith("http://user:relay-secret-0123456789@127.0.0.1:9/v1")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_one_api_session_for_both_families(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``api_session`` takes the family as ``provider`` (``openai_session`` is it with provider openai): the SDK
    client, the key and base URL variables, the source and the max tokens follow the family."""
    import anthropic
    import openai

    from inspector.sessions.sources import api_session

    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    s = api_session("m", "p", provider=provider, api_key=KEY, builtin=False)
    if provider == "openai":
        assert isinstance(s.loop.client, openai.AsyncOpenAI) and s.loop.provider is not None
        assert s.source == {"type": "api", "provider": "openai", "api": "chat", "model": "m"}
        assert s.loop.provider.max_tokens is None and s.loop.config.max_tokens == 0
        same = openai_session("m", "p", api_key=KEY, builtin=False)
        assert (same.source, same.loop.config.secrets) == (s.source, s.loop.config.secrets)
    else:
        assert isinstance(s.loop.client, anthropic.AsyncAnthropic) and s.loop.provider is None
        assert s.source == {"type": "api", "model": "m"} and s.loop.config.max_tokens == 4096
    assert s.secrets == [KEY]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    env = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    with pytest.raises(SourceError, match=env):
        api_session("m", "p", provider=provider)
    with pytest.raises(SourceError, match="anthropic or openai"):
        api_session("m", "p", provider="gemini", api_key=KEY)

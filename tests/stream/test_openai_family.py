"""The family of a body is told by the request path and the first event, never a file name; the first event wins
and a disagreement is named; FamilyStream gives the same steps as the family's own stream, however the bytes are
split; an Anthropic stream through it is exactly the TurnStream it was."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.stream.assembler import TurnStream
from inspector.stream.family import Family, FamilyStream, family_from_event, family_from_path, new_stream
from inspector.stream.openai_common import NeutralStream
from inspector.testing.hyp import examples
from inspector.testing.openai_ref import corpus
from inspector.testing.streamgen import sse as anthropic_sse
from inspector.testing.streamgen import tool_turn

FAM: dict[str, Family] = {"chat": "openai_chat", "responses": "openai_responses"}


@pytest.mark.parametrize(
    ("url", "family"),
    [
        ("https://api.openai.com/v1/chat/completions", "openai_chat"),
        ("https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21", "openai_chat"),
        ("http://127.0.0.1:1234/v1/responses", "openai_responses"),
        ("https://api.anthropic.com/v1/messages", "anthropic"),
        ("/v1/messages?beta=true", "anthropic"),
        ("https://openrouter.ai/api/v1/models", None),
        ("", None),
        (None, None),
    ],
)
def test_family_from_path(url: Any, family: Any) -> None:
    assert family_from_path(url) == family


def test_family_from_event() -> None:
    assert family_from_event("message_start", '{"type":"message_start"}') == "anthropic"
    assert family_from_event("message", '{"type":"content_block_delta","index":0}') == "anthropic"
    assert family_from_event("message", '{"object":"chat.completion.chunk","choices":[]}') == "openai_chat"
    assert family_from_event("message", '{"id":"x","choices":[{"index":0}]}') == "openai_chat"  # no object (Moonshot)
    assert family_from_event("response.created", "{}") == "openai_responses"
    assert family_from_event("message", '{"type":"response.created"}') == "openai_responses"
    assert family_from_event("message", '{"type":"error","sequence_number":2}') == "openai_responses"
    for undecided in ("[DONE]", "{oops", "[1]", '{"error":{"message":"x"}}'):
        assert family_from_event("message", undecided) is None


@pytest.mark.parametrize("s", corpus(), ids=lambda s: s.name)
def test_every_corpus_stream_is_told_by_its_first_event(s: Any) -> None:
    fs = FamilyStream(None)
    fs.feed(s.data)
    ts = fs.close()
    if s.name.endswith("parallel-tool-call-wrapper.1.chunks.txt"):
        # its first event is not JSON (the fixture is cut): told by the second
        assert fs.family == "openai_responses"
    assert fs.family == FAM[s.family]
    direct = new_stream(FAM[s.family])
    direct.feed(s.data)
    direct.close()
    assert isinstance(ts, NeutralStream) and isinstance(direct, NeutralStream)  # (an OpenAI family: a final object)
    assert ts.final_object() == direct.final_object()


def test_the_first_event_wins_over_the_path_and_says_so() -> None:
    data = next(s.data for s in corpus() if s.family == "chat")
    fs = FamilyStream("https://api.openai.com/v1/responses")
    fs.feed(data)
    ts = fs.close()
    assert fs.family == "openai_chat"
    assert ts.diagnostics[0].code == "stream.family_mismatch"


def test_without_a_telling_event_the_path_decides_else_anthropic() -> None:
    fs = FamilyStream("https://api.openai.com/v1/chat/completions")
    fs.feed(b"data: [DONE]\n\n")
    assert fs.close().__class__.__name__ == "ChatStream"
    fs = FamilyStream(None)
    fs.feed(b"")
    assert type(fs.close()) is TurnStream


ANTHROPIC = anthropic_sse(*tool_turn(['{"path": ', '"a.txt"}']))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(1, 300), max_size=20))
def test_anthropic_through_family_stream_is_unchanged(reads: Any) -> None:
    direct = TurnStream()
    d_steps = direct.feed(ANTHROPIC)
    direct.close()
    fs = FamilyStream("https://api.anthropic.com/v1/messages")
    steps, pos = [], 0
    for n in reads:
        steps += fs.feed(ANTHROPIC[pos : pos + n])
        pos += n
    steps += fs.feed(ANTHROPIC[pos:])
    ts = fs.close()
    assert type(ts) is TurnStream
    assert [(s.sse.seq, s.event, s.changes) for s in steps] == [(s.sse.seq, s.event, s.changes) for s in d_steps]
    assert ts.final_message() == direct.final_message()


def test_every_openai_diagnostic_code_is_documented() -> None:
    from pathlib import Path

    from inspector.stream import family, openai_common

    doc = (Path(__file__).resolve().parents[2] / "docs" / "openai.md").read_text()
    codes = [v for k, v in vars(openai_common).items() if k.isupper() and isinstance(v, str) and "." in v]
    codes.append(family.FAMILY_MISMATCH)
    assert len(codes) > 20
    missing = [c for c in codes if f"`{c}`" not in doc and f"`{c.rsplit('.', 1)[1]}`" not in doc]
    assert not missing, missing


def test_garbage_is_not_held_for_long() -> None:
    fs = FamilyStream("https://api.openai.com/v1/chat/completions")
    steps = fs.feed(b"data: nothing telling\n\n" * 16)
    assert fs.family == "openai_chat" and len(steps) == 16
    fs = FamilyStream(None)
    fs.feed(b"x" * (4 * 1024 * 1024 + 1))
    assert fs.family == "anthropic"

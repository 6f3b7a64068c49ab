"""Faithful rows: each SSE fragment shown once, decoded, with visible escapes; JSON, never Python syntax."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from inspector.observe.stepobs import summarize_event
from inspector.stream.protocol import StreamEvent, parse_event

VISIBLE = {"↵": "\n", "␍": "\r", "⇥": "\t"}


def delta(kind: str, field: str, frag: str) -> StreamEvent:
    data = json.dumps({"type": "content_block_delta", "index": 1, "delta": {"type": kind, field: frag}})
    ev, diags = parse_event("content_block_delta", data)
    assert not diags
    return ev


def unvisible(s: str) -> str:
    for glyph, ch in VISIBLE.items():
        s = s.replace(glyph, ch)
    return s


@given(st.text(alphabet=st.characters(exclude_characters="↵␍⇥", exclude_categories=["Cs"]), max_size=100))
def test_a_json_fragment_is_shown_once_as_the_text_it_is(frag: str) -> None:
    index, summary = summarize_event(delta("input_json_delta", "partial_json", frag))
    assert index == 1
    assert summary.startswith("`") and summary.endswith("`")
    assert unvisible(summary[1:-1]) == frag  # not escaped a second time
    assert "\n" not in summary and "\r" not in summary


def test_a_json_string_fragment_keeps_its_single_escapes() -> None:
    _, summary = summarize_event(delta("input_json_delta", "partial_json", '{"code": "\\"\\"\\"Parse'))
    assert summary == '`{"code": "\\"\\"\\"Parse`'


def test_the_first_empty_json_fragment_is_an_empty_fragment() -> None:
    assert summarize_event(delta("input_json_delta", "partial_json", ""))[1] == "``"


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=100))
def test_a_text_fragment_is_json_quoted_and_decodes_back(frag: str) -> None:
    _, summary = summarize_event(delta("text_delta", "text", frag))
    assert json.loads(summary) == frag
    assert "\n" not in summary


def test_message_delta_shows_json_not_python() -> None:
    data = json.dumps(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42, "cache_read_input_tokens": None},
        }
    )
    ev, _ = parse_event("message_delta", data)
    _, summary = summarize_event(ev)
    assert summary.startswith("stop_reason=tool_use usage=")
    usage = summary.split("usage=", 1)[1]
    assert json.loads(usage)["output_tokens"] == 42
    assert "None" not in summary and "'" not in summary


# ------------------------------------------------------------------------------------------------ wrapping, Markdown

from inspector.tui.widgets.assistant import inline_spans  # noqa: E402
from inspector.tui.widgets.base import chunk_text  # noqa: E402


@given(st.text(alphabet="ab \n", max_size=200), st.integers(min_value=1, max_value=30))
def test_word_wrap_keeps_every_character_but_the_break_spaces(text: str, width: int) -> None:
    ranges = chunk_text(text, width, words=True)
    for s, e in ranges:
        assert 0 <= s <= e <= len(text) and e - s <= width and "\n" not in text[s:e]
    # what is left out is only newlines and the spaces a line broke at
    covered: set[int] = set()
    for s, e in ranges:
        covered.update(range(s, e))
    assert all(text[i] in " \n" for i in range(len(text)) if i not in covered)


def test_word_wrap_breaks_between_words() -> None:
    text = "Full month names raise KeyError"
    lines = [text[s:e] for s, e in chunk_text(text, 12, words=True)]
    assert lines == ["Full month", "names raise", "KeyError"]


def test_inline_markdown_spans() -> None:
    clean, spans = inline_spans("**1. Full names raise `KeyError`.** `_MONTHS` is *keyed* by a*b")
    assert clean == "1. Full names raise KeyError. _MONTHS is keyed by a*b"
    kinds = [(clean[s:e], k) for s, e, k in spans]
    assert kinds == [
        ("1. Full names raise ", "bold"),
        ("KeyError", "bold code"),
        (".", "bold"),
        ("_MONTHS", "code"),
        ("keyed", "italic"),
    ]


def test_an_unpaired_marker_stays_as_it_is() -> None:
    assert inline_spans("a **half-streamed bold") == ("a **half-streamed bold", [])

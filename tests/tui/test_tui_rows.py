"""Faithful rows: each SSE fragment shown once, decoded, with visible escapes; JSON, never Python syntax."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from inspector.agent.stepobs import summarize_event
from inspector.stream.protocol import parse_event

VISIBLE = {"↵": "\n", "␍": "\r", "⇥": "\t"}


def delta(kind: str, field: str, frag: str):
    data = json.dumps({"type": "content_block_delta", "index": 1, "delta": {"type": kind, field: frag}})
    ev, diags = parse_event("content_block_delta", data)
    assert not diags
    return ev


def unvisible(s: str) -> str:
    for glyph, ch in VISIBLE.items():
        s = s.replace(glyph, ch)
    return s


@given(st.text(alphabet=st.characters(blacklist_characters="↵␍⇥", blacklist_categories=("Cs",)), max_size=100))
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


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=100))
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

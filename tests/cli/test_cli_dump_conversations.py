"""`inspector dump` of a proxy recording of many conversations (``conversation`` obs lines): each conversation
apart in the text and in --json, each judged on its own; a recording without conversation lines is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from inspector.cli import main
from inspector.record.recording import RecordingWriter
from inspector.testing.hyp import examples
from inspector.testing.streamgen import message_start, sse, text_turn, tool_turn

SSE_HDR = {"content-type": "text/event-stream"}


def _attempt(w: RecordingWriter, turn: int, attempt: int, model: str, data: bytes, end: str = "complete") -> None:
    body = {"model": model, "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": f"t{turn}"}]}
    w.request(turn, attempt, 0.1 * turn, "POST", "http://up/v1/messages", {}, body)
    w.response(turn, attempt, 0.01, 200, SSE_HDR)
    w.read(turn, attempt, 0.02, data)
    w.end(turn, attempt, 0.03, end, None if end == "complete" else "the client closed the connection")


def _conv(w: RecordingWriter, turn: int, cid: str, ct: int, attempt: int = 0, how: str = "new") -> None:
    w.observation(
        {
            "type": "conversation",
            "t": 0.1 * turn,
            "turn": turn,
            "conversation": cid,
            "conversation_turn": ct,
            "attempt": attempt,
            "how": how,
            "parent": None,
            "side": None,
        }
    )


def many(path: Path, cut_oslo: bool = False) -> str:
    """Three conversations interleaved (Paris c1, Rome c2, Oslo c3), two turns each; Rome's first turn was resent
    after a cut (attempt 2); a count_tokens of Rome and a models request of none."""
    tool = sse(*tool_turn(['{"city": "x"}'], name="get_weather"))
    text = sse(*text_turn("18 C"))
    cut = tool[: len(tool) // 2]
    with RecordingWriter(path, source={"type": "proxy"}) as w:
        for turn, cid in enumerate(("c1", "c2", "c3")):
            _conv(w, turn, cid, 0)
            if cid == "c2":
                _attempt(w, turn, 0, "claude-haiku-4-5", cut, "cancelled")
                _conv(w, turn, cid, 0, 1, "retry")
                _attempt(w, turn, 1, "claude-haiku-4-5", tool)
            else:
                _attempt(w, turn, 0, "claude-sonnet-4-5", tool)
        for turn, cid in zip((3, 4, 5), ("c3", "c1", "c2"), strict=True):
            _conv(w, turn, cid, 1, how="continues")
            model = "claude-haiku-4-5" if cid == "c2" else "claude-sonnet-4-5"
            _attempt(w, turn, 0, model, cut if (cut_oslo and cid == "c3") else text, "complete")
        w.observation(
            {
                "type": "proxy_exchange",
                "t": 0.7,
                "method": "POST",
                "path": "/v1/messages/count_tokens",
                "status": 200,
                "bytes": 19,
                "end": "complete",
                "conversation": "c2",
                "side": "count_tokens",
            }
        )
        w.observation(
            {
                "type": "proxy_exchange",
                "t": 0.8,
                "method": "GET",
                "path": "/v1/models",
                "status": 200,
                "bytes": 40,
                "end": "complete",
                "conversation": None,
                "side": "GET /v1/models",
            }
        )
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _err = capsys.readouterr()
    return code, out


def test_dump_json_lists_each_conversation_and_its_turns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = run(capsys, "dump", "--json", many(tmp_path / "m.jsonl"))
    doc = orjson.loads(out)
    assert code == 0
    turns = {t["turn"]: (t["conversation"], t["conversation_turn"]) for t in doc["turns"]}
    assert turns == {0: ("c1", 0), 1: ("c2", 0), 2: ("c3", 0), 3: ("c3", 1), 4: ("c1", 1), 5: ("c2", 1)}
    rome_first = next(t for t in doc["turns"] if t["turn"] == 1)
    assert rome_first["attempt"] == 1 and rome_first["failed_attempts"][0]["conversation"] == "c2"
    convs = {c["id"]: c for c in doc["conversations"]}
    assert [c["id"] for c in doc["conversations"]] == ["c1", "c2", "c3", None]
    assert (convs["c2"]["model"], convs["c2"]["turns"], convs["c2"]["attempts"]) == ("claude-haiku-4-5", 2, 3)
    assert [r["side"] for r in convs["c2"]["side_requests"]] == ["count_tokens"]
    assert convs[None]["turns"] == 0 and [r["path"] for r in convs[None]["side_requests"]] == ["/v1/models"]
    assert all(c["ok"] for c in doc["conversations"])


def test_dump_text_groups_turns_under_their_conversation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = run(capsys, "dump", many(tmp_path / "m.jsonl"))
    assert code == 0
    heads = [line for line in out.splitlines() if line.startswith(("conversation ", "other requests"))]
    assert heads == [
        "conversation c1 (model claude-sonnet-4-5, 2 turns): ok",
        "conversation c2 (model claude-haiku-4-5, 2 turns, 1 side request): ok",
        "conversation c3 (model claude-sonnet-4-5, 2 turns): ok",
        "other requests (1 side request, no conversation)",
    ]
    c2 = out[out.index("conversation c2") : out.index("conversation c3")]
    assert "  turn 1 (#2) attempt 1: incomplete (failed attempt, retried)" in c2
    assert "  turn 1 (#2) attempt 2: tool_use" in c2 and "  turn 2 (#6) attempt 1: text_finish" in c2
    assert "  side request count_tokens: POST /v1/messages/count_tokens -> 200" in c2


def test_dump_judges_each_conversation_on_its_own(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = many(tmp_path / "cut.jsonl", cut_oslo=True)
    code, out = run(capsys, "dump", path)
    assert code == 1
    assert "conversation c3 (model claude-sonnet-4-5, 2 turns): FAILED" in out
    assert "conversation c1 (model claude-sonnet-4-5, 2 turns): ok" in out
    code, out = run(capsys, "dump", "--json", path)
    assert code == 1
    assert {c["id"]: c["ok"] for c in orjson.loads(out)["conversations"]} == {
        "c1": True,
        "c2": True,
        "c3": False,
        None: True,
    }


def cached(path: Path) -> None:
    """Two conversations interleaved (Paris c1, Rome c2), two turns each, every answer writing the prompt cache
    again (a cache that does not hold): each turn's request extends its own conversation's previous one."""
    writes = {"input_tokens": 20, "output_tokens": 5, "cache_creation_input_tokens": 2048, "cache_read_input_tokens": 0}
    turn_of = [("c1", 0, "Paris"), ("c2", 0, "Rome"), ("c1", 1, "Paris"), ("c2", 1, "Rome")]
    with RecordingWriter(path, source={"type": "proxy"}) as w:
        for turn, (cid, ct, city) in enumerate(turn_of):
            _conv(w, turn, cid, ct, how="new" if ct == 0 else "continues")
            messages: list[Any] = [{"role": "user", "content": f"Weather in {city}?"}]
            if ct:
                messages += [{"role": "assistant", "content": "Looking."}, {"role": "user", "content": "and now?"}]
            system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "system": system, "messages": messages}
            w.request(turn, 0, 0.1 * turn, "POST", "http://up/v1/messages", {}, body)
            w.response(turn, 0, 0.01, 200, SSE_HDR)
            w.read(turn, 0, 0.02, sse(message_start(usage=writes), *text_turn("18 C")[1:]))
            w.end(turn, 0, 0.03, "complete", None)


def test_each_turns_cache_verdict_compares_it_with_its_own_conversation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """dump --json and the export: a turn's cache verdict (and the export's request diff) are against the previous
    turn of its own conversation. With one previous request for the whole recording, Rome's first turn was said to
    have edited Paris's message 0, and so was every turn after it (the live accounting and replay did it right)."""
    from inspector.record.htmlexport import build
    from inspector.record.recording import read_recording

    path = tmp_path / "cached.jsonl"
    cached(path)
    code, out = run(capsys, "dump", "--json", str(path))
    assert code == 0
    doc = build(read_recording(path))
    for turns in (orjson.loads(out)["turns"], doc["turns"]):
        verdicts = [(t["conversation"], t["cache"]["kind"], t["cache"].get("segment")) for t in turns]
        assert verdicts == [
            ("c1", "first", None),
            ("c2", "first", None),
            ("c1", "written_again", "prefix"),  # (the prefix held: evicted early, not edited)
            ("c2", "written_again", "prefix"),
        ]
    diffs = [t["request_diff"] for t in doc["turns"]]
    assert [len(d.get("messages_added") or []) for d in diffs] == [1, 1, 2, 2]  # (against its own conversation)
    assert not any(d.get("first_difference") for d in diffs)


def test_a_recording_without_conversation_lines_dumps_unchanged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Older files and the loop's own recordings: one conversation, no new keys, the same text as before."""
    from inspector.record.dump import dump_turns, format_turns
    from inspector.record.recording import read_recording

    path = tmp_path / "old.jsonl"
    with RecordingWriter(path, source={"type": "scenario"}) as w:
        _attempt(w, 0, 0, "m", sse(*tool_turn(['{"a": 1}'])))
        _attempt(w, 1, 0, "m", sse(*text_turn("done")))
    code, out = run(capsys, "dump", "--json", str(path))
    doc = orjson.loads(out)
    assert code == 0 and "conversations" not in doc
    assert all("conversation" not in t for t in doc["turns"])
    code, out = run(capsys, "dump", str(path))
    assert code == 0 and out == format_turns(dump_turns(read_recording(path))) + "\n"
    assert "conversation" not in out


# ------------------------------------------------------------------------------------------------ damaged lines
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 8) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["conversation", "proxy_exchange"])},
            optional={
                "turn": _ANY,
                "conversation": _ANY,
                "conversation_turn": _ANY,
                "parent": _ANY,
                "side": _ANY,
                "path": _ANY,
            },
        ),
        max_size=8,
    )
)
@example([{"type": "conversation", "turn": 1, "conversation": "c1", "conversation_turn": 0, "parent": 3}])
@example(
    [{"type": "conversation", "turn": 0, "conversation": "c1", "conversation_turn": 0}, {"type": "proxy_exchange"}]
)
def test_damaged_conversation_lines_never_break_dump(lines: list[dict[str, Any]]) -> None:
    """Whatever a conversation or proxy_exchange line holds, dump groups what it can and never raises: every turn
    is in exactly one conversation (its own, or None when no valid line names it)."""
    from inspector.record.dump import conversations_of, format_conversations
    from inspector.record.recording import RecordedAttempt, RecordedTurn, Recording

    rec = Recording(header={}, turns=[RecordedTurn(t, [RecordedAttempt(t, 0)]) for t in range(3)], observations=lines)
    turns = [
        {"turn": t, "attempt": 0, "outcome": "text_finish", "diagnostics": [], "message": {}, "reads": 0, "bytes": 0}
        for t in range(3)
    ]
    convs = conversations_of(rec, turns)
    if convs is None:
        assert all("conversation" not in t for t in turns)
        return
    assert sum(c["turns"] for c in convs) == 3
    assert all(t["conversation"] is None or isinstance(t["conversation"], str) for t in turns)
    assert isinstance(format_conversations(turns, convs), str)


def _side(w: RecordingWriter, path: str, conversation: str | None, side: str) -> None:
    w.observation(
        {
            "type": "proxy_exchange",
            "t": 0.9,
            "method": "POST",
            "path": path,
            "status": 200,
            "bytes": 468,
            "end": "complete",
            "conversation": conversation,
            "side": side,
        }
    )


def test_side_requests_are_listed_with_one_conversation_or_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A harness that makes non-streamed calls only (its test suite through `watch --serve`) has no turn, and one
    conversation with a count_tokens call has one group: their side requests are listed all the same (they were
    left out of the text, and a recording of side requests only said "no turns in this file")."""
    only = tmp_path / "only.jsonl"
    with RecordingWriter(only, source={"type": "serve"}) as w:
        _side(w, "/v1/messages", None, "not streamed")
        _side(w, "/v1/chat/completions", None, "not streamed")
    code, out = run(capsys, "dump", str(only))
    assert out.splitlines() == [
        "other requests (2 side requests, no conversation)",
        "  side request not streamed: POST /v1/messages -> 200",
        "  side request not streamed: POST /v1/chat/completions -> 200",
    ]
    assert code == 1  # no turn: as before
    code, out = run(capsys, "dump", "--json", str(only))
    assert [r["path"] for r in orjson.loads(out)["conversations"][0]["side_requests"]] == [
        "/v1/messages",
        "/v1/chat/completions",
    ]
    one = tmp_path / "one.jsonl"
    with RecordingWriter(one, source={"type": "proxy"}) as w:
        _conv(w, 0, "c1", 0)
        _attempt(w, 0, 0, "claude-sonnet-4-5", sse(*text_turn("18 C")))
        _side(w, "/v1/messages/count_tokens", "c1", "count_tokens")
    code, out = run(capsys, "dump", str(one))
    assert code == 0
    assert "conversation c1 (model claude-sonnet-4-5, 1 turn, 1 side request): ok" in out
    assert "  side request count_tokens: POST /v1/messages/count_tokens -> 200" in out


def test_events_json_says_which_stream_each_event_came_in(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Concurrent conversations' streams interleave in a proxy's recording: each `--events --json` line names its
    turn and attempt (a line had only its event, data, id and retry, and the streams could not be told apart)."""
    path = tmp_path / "two.jsonl"
    streams = {0: sse(*text_turn("Paris 18 C")), 1: sse(*text_turn("Rome 20 C"))}
    with RecordingWriter(path, source={"type": "proxy"}) as w:
        for turn, cid in ((0, "c1"), (1, "c2")):
            _conv(w, turn, cid, 0)
            body = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": cid}]}
            w.request(turn, 0, 0.1 * turn, "POST", "http://up/v1/messages", {}, body)
            w.response(turn, 0, 0.01, 200, SSE_HDR)
        events = {t: [e + b"\n\n" for e in data.split(b"\n\n") if e] for t, data in streams.items()}
        for i in range(max(map(len, events.values()))):  # one event of each stream in turn
            for turn in (0, 1):
                if i < len(events[turn]):
                    w.read(turn, 0, 0.02 + i / 100, events[turn][i])
        for turn in (0, 1):
            w.end(turn, 0, 0.5, "complete", None)
    code, out = run(capsys, "dump", "--events", "--json", str(path))
    assert code == 0
    lines = [orjson.loads(x) for x in out.splitlines()]
    texts = {
        t: "".join(
            orjson.loads(x["data"])["delta"]["text"] for x in lines if x["turn"] == t and "text_delta" in x["data"]
        )
        for t in (0, 1)
    }
    assert texts == {0: "Paris 18 C", 1: "Rome 20 C"}
    assert [x["turn"] for x in lines[:4]] == [0, 1, 0, 1] and {x["attempt"] for x in lines} == {0}
    # and its conversation (the turn numbers are the session's: a line did not say whose stream it was)
    assert {(x["turn"], x["conversation"]) for x in lines} == {(0, "c1"), (1, "c2")}


def test_dump_timing_names_each_turn_as_the_grouped_text_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`dump --timing` of many conversations: the timing report and the usage section headed each attempt with the
    session's turn number alone (`turn 6 attempt 1`, `turn 5: in ...`) under a text that calls that turn
    `turn 2 (#6)` of c2: c2 has two turns. Each heading names the turn as the grouped text does."""
    _code, out = run(capsys, "dump", "--timing", many(tmp_path / "m.jsonl"))
    timing_heads = [line.split(":")[0] for line in out.split("\n") if " attempt " in line and ": HTTP " in line]
    assert timing_heads == [
        "[c1] turn 1 (#1) attempt 1",
        "[c2] turn 1 (#2) attempt 1",
        "[c2] turn 1 (#2) attempt 2",
        "[c3] turn 1 (#3) attempt 1",
        "[c3] turn 2 (#4) attempt 1",
        "[c1] turn 2 (#5) attempt 1",
        "[c2] turn 2 (#6) attempt 1",
    ]
    usage = out.split("usage and cost\n", 1)[1].split("\n")
    assert [line.split(":")[0].strip() for line in usage[:7] if not line.startswith("    ")] == [
        "[c1] turn 1 (#1)",
        "[c2] turn 1 (#2)",
        "[c3] turn 1 (#3)",
        "[c3] turn 2 (#4)",
        "[c1] turn 2 (#5)",
        "[c2] turn 2 (#6)",
    ]
    assert "\nturn 6 attempt" not in out and "  turn 6:" not in out

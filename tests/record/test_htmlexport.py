"""The HTML export, opened in a real browser (Debian's chromium, headless): it loads with no script error, shows
every event, and a selected event shows its JSON. Keys never reach the page. No external request is possible."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.record.dump import dump_turns
from inspector.record.har import load_any
from inspector.record.htmlexport import build, export
from inspector.record.recording import RecordingWriter
from inspector.scenarios.bundled import SCENARIOS
from inspector.sessions import sources
from inspector.testing.hyp import examples

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# a skipped browser test is not a pass: CI installs chromium (.ci/run); a developer without it sees why
needs_browser = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="Debian's chromium is not installed (.ci/run installs it)"
)


def _record(name: str, path: Path) -> None:
    """The scenario run headless at max speed with a recorder, in process (what `run --record` does)."""
    session = sources.scenario_session(name, speed=math.inf, record=path)
    try:
        asyncio.run(session.run())
    finally:
        session.close()
    assert path.exists()


def _dom(page: Path, fragment: str = "") -> str:
    assert CHROMIUM is not None, "CI must have chromium: .ci/run installs Debian's package"
    out = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.resolve().as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _attr(dom: str, name: str) -> str:
    m = re.search(rf'<body[^>]* data-{name}="([^"]*)"', dom)
    assert m, f"no data-{name} on <body>"
    return m.group(1)


def test_every_bundled_scenario_exports(tmp_path: Path) -> None:
    """Each bundled scenario, recorded headless and exported: a page whose event count is the engine's."""
    for name in SCENARIOS:
        rec = tmp_path / f"{name}.jsonl"
        _record(name, rec)
        recording = load_any(rec)
        doc = build(recording, title=name)
        size = export(recording, tmp_path / f"{name}.html", title=name)
        assert 0 < size < 5_000_000
        events: list[Any] = []
        dump_turns(recording, on_event=events.append)
        assert len(doc["events"]) == len(events), name


@needs_browser
@pytest.mark.parametrize("name", ["parse_date", "overloaded_midstream", "invalid_json"])
def test_the_page_in_a_real_browser(tmp_path: Path, name: str) -> None:
    rec, page = tmp_path / "s.jsonl", tmp_path / "s.html"
    _record(name, rec)
    recording = load_any(rec)
    doc = build(recording, title=name)
    export(recording, page, title=name)
    n = len(doc["events"])
    k = n // 2
    dom = _dom(page, f"#event={k}")
    assert _attr(dom, "ready") == "1"
    assert _attr(dom, "errors") == "0", re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert int(_attr(dom, "events")) == n
    shown = re.search(r'<pre id="event-json">(.*?)</pre>', dom, re.S)
    assert shown, "the selected event shows no JSON"
    import html as h

    raw = doc["events"][k][5]
    data = "\n".join(
        line[6:] if line.startswith("data: ") else line[5:] for line in raw.splitlines() if line.startswith("data:")
    )
    assert json.loads(h.unescape(shown.group(1))) == json.loads(data)
    assert f"event {k + 1}: {doc['events'][k][2]}" in dom


def test_no_external_request_is_possible(tmp_path: Path) -> None:
    rec, page = tmp_path / "s.jsonl", tmp_path / "s.html"
    _record("weather", rec)
    export(load_any(rec), page)
    text = page.read_text()
    assert "default-src 'none'" in text  # the page's CSP forbids any fetch, even if a string tried
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert "</script" not in text.split('id="data">', 1)[1].split("</script>", 1)[0]


def test_a_key_never_reaches_the_page(tmp_path: Path) -> None:
    """A key known to the session (the dashboard passes it) is masked everywhere in the page, also where a
    hand-made recording kept it in a header, a read split across two reads, and a request body."""
    key = "sk-ant-api03-" + "canaryCANARY0123456789" * 3
    rec = tmp_path / "leaky.jsonl"
    with open(rec, "wb") as f:
        w = RecordingWriter(f, source={"type": "test"})
        w.request(
            0,
            0,
            0.0,
            "POST",
            "http://x/v1/messages",
            {"x-api-key": "kept"},
            {"messages": [{"role": "user", "content": key}]},
        )
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        text = json.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": key}})
        body = (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
            + b"event: content_block_delta\ndata: "
            + text.encode()
            + b"\n\n"
        )
        cut = body.index(key[:20].encode()) + 10
        w.read(0, 0, 0.2, body[:cut])
        w.read(0, 0, 0.3, body[cut:])
        w.end(0, 0, 0.4, "complete", None)
        w.close()
    page = tmp_path / "leaky.html"
    export(load_any(rec), page, secrets=[key])
    text = page.read_text()
    # no 12-character run of the key anywhere: the longest common substring of page and key is shorter
    assert not [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in text]
    assert "kept" not in text  # a credential header's value, whatever the recording kept


OPENAI_FIXTURES = sorted((Path(__file__).parent.parent / "stream" / "fixtures" / "openai" / "synthetic").glob("*.sse"))


@pytest.mark.parametrize("path", OPENAI_FIXTURES, ids=[p.stem for p in OPENAI_FIXTURES])
def test_an_openai_stream_exports_as_dump_decodes_it(path: Path) -> None:
    """A Chat Completions or Responses stream (the corpus of real servers' shapes): the page's events, blocks and
    diagnostics are those of its own family's decoder, as `dump` has them (it was decoded as Anthropic's:
    every row "unknown", no block, a diagnostic per chunk)."""
    recording = load_any(path)
    doc = build(recording, title=path.stem)
    events: list[Any] = []
    turns = dump_turns(recording, on_event=events.append)
    assert len(doc["events"]) == len(events)
    family = turns[-1]["family"]
    assert family in ("openai_chat", "openai_responses")
    names = {e[2] for e in doc["events"]}
    assert "unknown" not in names
    if family == "openai_chat":
        assert names <= {"chunk", "invalid", "error"}
    else:
        assert all(n.startswith("response.") or n in ("invalid", "error", "chunk") for n in names), names  # ([DONE])
    codes = sorted(d["code"] for d in doc["diagnostics"])
    assert codes == sorted(d["code"] for t in turns for d in t["diagnostics"])
    # each block of the assembled message is on the page, its fragments in order making up its content
    assembled = turns[-1].get("assembled") or {}
    content = assembled.get("content") or []
    assert len(doc["blocks"]) == len(content)
    for block, final in zip(doc["blocks"], content, strict=True):
        assert block["type"] == final["type"]
        frags = "".join(f[1] for f in block["frags"])
        if final["type"] == "text":
            assert frags == final["text"]


HOSTILE_TEXT = 'Here: <html><!-- TODO: title --></html> </script><script>document.title="x"</script> <!--'


def _anthropic_sse(text: str) -> str:
    def ev(name: str, obj: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **obj})}\n\n"

    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [], "usage": {}}
    return (
        ev("message_start", {"message": msg})
        + ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        + ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})
        + ev("content_block_stop", {"index": 0})
        + ev("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})
        + ev("message_stop", {})
    )


def test_no_string_can_open_a_comment_or_end_the_script() -> None:
    """`<!--` in a session's text made the page blank (its escape, `<\\!--`, is no JSON escape: JSON.parse failed);
    every `<` is now `\\u003c` in the inlined data, which parses back to the same document."""
    from inspector.record.htmlexport import render

    doc = {"meta": {"title": "t"}, "text": HOSTILE_TEXT, "list": ["</script>", "<!--", "<\\!--"]}
    page = render(doc)
    inlined = page.split('id="data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in inlined
    assert json.loads(inlined) == json.loads(json.dumps(doc))


@needs_browser
@pytest.mark.parametrize("kind", ["comment", "openai_chat", "openai_responses"])
def test_the_page_of_a_hostile_text_and_of_openai_streams_in_a_real_browser(tmp_path: Path, kind: str) -> None:
    if kind == "comment":
        src = tmp_path / "s.sse"
        src.write_text(_anthropic_sse(HOSTILE_TEXT))
    else:
        prefix = "responses-" if kind == "openai_responses" else "openai-"
        src = next(p for p in OPENAI_FIXTURES if p.name.startswith(prefix))
    page = tmp_path / "s.html"
    recording = load_any(src)
    doc = build(recording)
    export(recording, page)
    dom = _dom(page, "#event=1")
    assert _attr(dom, "ready") == "1"
    assert _attr(dom, "errors") == "0", re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert int(_attr(dom, "events")) == len(doc["events"]) > 0
    assert f"event 2: {doc['events'][1][2]}" in dom
    if kind == "comment":
        assert "<title>x</title>" not in dom  # (the text's own script never ran)
        assert "TODO: title" in dom


def test_export_never_overwrites_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`export w.jsonl -o w.jsonl`, or a saved stream whose name ends in .html (the default output's name): the input
    was replaced by the page, silently. Now a one-line error, exit 2, the input as it was."""
    from inspector.cli import main

    rec = tmp_path / "w.jsonl"
    _record("weather", rec)
    sse = tmp_path / "saved.html"
    sse.write_text(_anthropic_sse("hello"))
    before = rec.read_bytes(), sse.read_bytes()
    assert main(["export", str(rec), "-o", str(tmp_path / "." / "w.jsonl")]) == 2
    assert main(["export", str(sse)]) == 2
    assert "is the input: not overwritten" in capsys.readouterr().err
    assert (rec.read_bytes(), sse.read_bytes()) == before
    assert main(["export", str(rec), "-o", str(tmp_path / "w.html")]) == 0  # (another file: written)
    assert (tmp_path / "w.html").read_text().startswith("<!DOCTYPE html>")


@settings(max_examples=examples(60), deadline=None)
@given(
    st.sampled_from(OPENAI_FIXTURES),
    st.lists(st.integers(1, 400), min_size=1, max_size=12),
    st.integers(0, 40),
)
def test_the_export_of_any_split_of_a_stream_has_dumps_rows(path: Path, cuts: list[int], keep: int) -> None:
    """A stream recorded in reads of any sizes, with no request path (its family told by its first events, or, for a
    body too short to tell, decided at its end), and its first ``keep`` events only: the page has one row per event
    `dump` decodes, and the same diagnostics."""
    import io

    from inspector.record.recording import RecordingWriter, read_recording

    events = path.read_bytes().split(b"\n\n")
    body = b"\n\n".join(events[: keep + 1]) + b"\n\n" if keep < len(events) - 1 else path.read_bytes()
    buf = io.BytesIO()
    w = RecordingWriter(buf, source={"type": "test"})
    w.request(0, 0, 0.0, "POST", "", {}, {"model": "m", "stream": True})
    w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
    i, k = 0, 0
    while i < len(body):
        n = cuts[k % len(cuts)]
        w.read(0, 0, 0.2, body[i : i + n])
        i, k = i + n, k + 1
    w.end(0, 0, 0.3, "complete")
    recording = read_recording(io.BytesIO(buf.getvalue()))
    doc = build(recording)
    seen: list[Any] = []
    turns = dump_turns(recording, on_event=seen.append)
    assert len(doc["events"]) == len(seen)
    assert sorted(d["code"] for d in doc["diagnostics"]) == sorted(d["code"] for t in turns for d in t["diagnostics"])


def test_export_refuses_more_stream_bytes_than_a_page_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The page inlines every byte of the session: 20 MiB of NULs made a 120 MB page and 694 MB of memory (a link
    to /dev/zero, 400 MB and 2.1 GB), exit 0. Past --max-size (32 MiB by default) it is a one-line error, exit 2,
    nothing written; at or under it, the page."""
    from inspector.cli import main

    sse = tmp_path / "big.sse"
    sse.write_text(_anthropic_sse("x" * 300_000))
    size = sse.stat().st_size
    out = tmp_path / "big.html"
    assert main(["export", str(sse), "-o", str(out), "--max-size", str(size / 2**20 / 2)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "MiB of stream bytes, more than an export page holds" in lines[0]
    assert not out.exists()
    assert main(["export", str(sse), "-o", str(out), "--max-size", str(size / 2**20 + 0.01)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["export", str(sse), "--max-size", "0"]) == 2


def _conversation_line(w: RecordingWriter, turn: int, cid: str, ct: int) -> None:
    """The proxy's ``conversation`` line of a turn (its first attempt), as a recording has it before the request."""
    how = "new" if ct == 0 else "continues"
    w.observation(
        {"type": "conversation", "t": turn, "turn": turn, "conversation": cid, "conversation_turn": ct, "attempt": 0}
        | {"how": how, "parent": None, "side": None}
    )


@needs_browser
def test_the_turns_pane_names_each_conversation_in_a_real_browser(tmp_path: Path) -> None:
    """A proxy's recording of two conversations: the Turns pane heads each turn with its conversation and its turn
    there, and diffs each request with its own conversation's previous one (a second conversation's first request
    was diffed with the first conversation's, "message 0 (user) edited")."""
    from inspector.testing.streamgen import sse, text_turn

    rec, page = tmp_path / "two.jsonl", tmp_path / "two.html"
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        for turn, (cid, ct, city) in enumerate([("c1", 0, "Paris"), ("c2", 0, "Rome"), ("c1", 1, "Paris")]):
            _conversation_line(w, turn, cid, ct)
            messages: list[Any] = [{"role": "user", "content": f"{city}?"}]
            if ct:
                messages += [{"role": "assistant", "content": "18 C"}, {"role": "user", "content": "and now?"}]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "stream": True, "messages": messages}
            w.request(turn, 0, float(turn), "POST", "http://up/v1/messages", {}, body)
            w.response(turn, 0, 0.01, 200, {"content-type": "text/event-stream"})
            w.read(turn, 0, 0.02, sse(*text_turn("18 C")))
            w.end(turn, 0, 0.03, "complete", None)
    export(load_any(rec), page, title="two")
    dom = _dom(page, "#tab=turns")
    assert _attr(dom, "errors") == "0"
    heads = re.findall(r"<h3>(\[c\d\] turn \d \(#\d of the session\))", dom)
    assert heads == [
        "[c1] turn 1 (#1 of the session)",
        "[c2] turn 1 (#2 of the session)",
        "[c1] turn 2 (#3 of the session)",
    ]
    assert "edited" not in dom and "request diff with the previous turn of c1" in dom


def _two_conversations_with_one_tool_id(rec: Path) -> None:
    """What `watch --serve` records for two concurrent conversations on a mock that seeds its tool ids by turn: each
    first turn streams a call `toolu_1`; the proxy infers each run (running at its block's stop, succeeded at its
    conversation's next request) and records the states under the turn that streamed the call."""
    from inspector.testing.streamgen import sse, text_turn, tool_turn

    plan = [("c1", 0, "tool"), ("c2", 0, "tool"), ("c2", 1, "text"), ("c1", 1, "text")]
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        for turn, (cid, ct, kind) in enumerate(plan):
            _conversation_line(w, turn, cid, ct)
            body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "stream": True, "messages": [{"role": "user"}]}
            w.request(turn, 0, float(turn), "POST", "http://up/v1/messages", {}, body)
            w.response(turn, 0, 0.01, 200, {"content-type": "text/event-stream"})
            events = tool_turn(['{"path": "', f'{cid}.txt"}}'], id="toolu_1") if kind == "tool" else text_turn("ok")
            w.read(turn, 0, 0.02, sse(*events))
            w.end(turn, 0, 0.03, "complete", None)
            if kind == "tool":
                w.observation(_tool_state(float(turn) + 0.02, turn, "running", {"path": f"{cid}.txt"}))
            else:  # this request carried the result of the call its conversation's previous turn streamed
                first = plan.index((cid, 0, "tool"))
                w.observation(_tool_state(float(turn), first, "succeeded", {"path": f"{cid}.txt"}))


def _tool_state(t: float, turn: int, state: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_state",
        "t": t,
        "turn": turn,
        "attempt": 0,
        "id": "toolu_1",
        "name": "read_file",
        "index": 0,
        "state": state,
        "input": inp,
        "error": None,
        "result_preview": None,
        "times": {state: t},
        "safe": False,
        "inferred": True,
    }


def test_tool_calls_of_two_conversations_with_one_id_stay_apart(tmp_path: Path) -> None:
    """Two conversations' calls with the same id (a mock seeds ids by turn) are two tool rows, each under its own
    turn and conversation with its own states and input, marked inferred (keyed by id, they were one row under c1's
    turn: `tools 1` in the header, c2's states and input merged into it)."""
    rec = tmp_path / "two.jsonl"
    _two_conversations_with_one_tool_id(rec)
    tools = build(load_any(rec))["tools"]
    rows = [(t["turn"], t["conversation"], t["conversation_turn"], t["input"], t["inferred"]) for t in tools]
    assert sorted(rows) == [(0, "c1", 0, {"path": "c1.txt"}, True), (1, "c2", 0, {"path": "c2.txt"}, True)]
    by_turn = {t["turn"]: [s for _, s in t["states"]] for t in tools}
    assert by_turn == {0: ["running", "succeeded"], 1: ["running", "succeeded"]}


@needs_browser
def test_the_tools_pane_names_each_calls_conversation_and_marks_inferred_times_in_a_real_browser(
    tmp_path: Path,
) -> None:
    rec, page = tmp_path / "two.jsonl", tmp_path / "two.html"
    _two_conversations_with_one_tool_id(rec)
    export(load_any(rec), page, title="two")
    dom = _dom(page, "#tab=tools")
    assert _attr(dom, "errors") == "0"
    assert "[c1] turn 1 (#1)" in dom and "[c2] turn 1 (#2)" in dom
    assert dom.count("≈ inferred from the next request ≤") == 2
    # the timeline names each stream's and each tool's conversation too (a stream was `turn 2.1`: c2's first)
    dom = _dom(page, "#tab=timeline")
    assert _attr(dom, "errors") == "0"
    assert "[c2] turn 1.1 (#2) stream" in dom and "[c1] turn 2.1 (#4) stream" in dom
    assert "≈[c2] read_file" in dom


@needs_browser
def test_a_call_whose_outcome_is_unknown_has_no_inferred_time_in_a_real_browser(tmp_path: Path) -> None:
    """The session ended (the watched command exited) before c2's next request: its call ended `unknown`. The page
    said "≈ inferred from the next request ≤0.98 s" and drew a run up to the session's end; it says unknown, why,
    and draws no run (c1's inferred call keeps both)."""
    rec, page = tmp_path / "unknown.jsonl", tmp_path / "unknown.html"
    _two_conversations_with_one_tool_id(rec)
    lines = rec.read_text().splitlines()
    why = "the command ended before a next request showed its result"
    gone = [k for k, line in enumerate(lines) if '"succeeded"' in line and '"turn":1' in line.replace(" ", "")]
    assert len(gone) == 1
    lines[gone[0]] = json.dumps({"kind": "obs", **_tool_state(3.0, 1, "unknown", {"path": "c2.txt"}), "error": why})
    rec.write_text("\n".join(lines) + "\n")
    export(load_any(rec), page, title="unknown")
    dom = _dom(page, "#tab=tools")
    assert _attr(dom, "errors") == "0"
    assert dom.count("≈ inferred from the next request ≤") == 1 and why in dom and ">unknown<" in dom
    dom = _dom(page, "#tab=timeline")
    assert _attr(dom, "errors") == "0"
    assert "≈[c1] read_file" in dom and "≈[c2] read_file" not in dom


def test_a_responses_requests_diff_shows_its_input_items(tmp_path: Path) -> None:
    """A Responses request sends its history as `input`, not `messages`: the Turns pane said "(no change)" for a
    conversation's first request (nothing under `messages`) and, for the next one, the whole input before and
    after as a changed parameter. Its items are the history: the first request's added, then the new ones."""
    from inspector.testing.streamgen import sse, text_turn

    first: list[Any] = [{"role": "user", "content": "Weather in Kyiv?"}]
    items: list[Any] = [
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
    ]
    rec = tmp_path / "responses.jsonl"
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        for turn, inp in enumerate([first, first + items, "just a string"]):
            body = {"model": "gpt-4o-mini", "stream": True, "input": inp, "tools": []}
            w.request(turn, 0, float(turn), "POST", "http://up/v1/responses", {}, body)
            w.response(turn, 0, 0.01, 200, {"content-type": "text/event-stream"})
            w.read(turn, 0, 0.02, sse(*text_turn("ok")))
            w.end(turn, 0, 0.03, "complete", None)
    diffs = [t["request_diff"] for t in build(load_any(rec))["turns"]]
    assert diffs[0] == {"messages_added": first}
    assert diffs[1] == {"messages_added": items}
    assert diffs[2]["messages_removed"] == 2 and "params_changed" not in diffs[2]  # (a string: one input, not 3)


def test_a_responses_request_continued_by_previous_response_id_adds_its_items(tmp_path: Path) -> None:
    """A request continuing a stored response (previous_response_id) sends only its new items: the Turns pane said
    "message 0 (?) edited at char 2 of its JSON" then "(no change)". Its items are all added."""
    from inspector.testing.streamgen import sse, text_turn

    first: list[Any] = [{"role": "user", "content": "Weather in Kyiv?"}]
    items: list[Any] = [{"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]
    rec = tmp_path / "responses.jsonl"
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        continued: list[dict[str, Any]] = [{"input": first}, {"input": items, "previous_response_id": "resp_1"}]
        for turn, more in enumerate(continued):
            body = {"model": "gpt-4o-mini", "stream": True, **more}
            w.request(turn, 0, float(turn), "POST", "http://up/v1/responses", {}, body)
            w.response(turn, 0, 0.01, 200, {"content-type": "text/event-stream"})
            w.read(turn, 0, 0.02, sse(*text_turn("ok")))
            w.end(turn, 0, 0.03, "complete", None)
    diffs = [t["request_diff"] for t in build(load_any(rec))["turns"]]
    assert diffs[1] == {"params_changed": {"previous_response_id": [None, "resp_1"]}, "messages_added": items}


@needs_browser
def test_the_pages_tokens_say_a_turn_answered_without_usage_in_a_real_browser(tmp_path: Path) -> None:
    """A Messages turn with usage and a chat stream without it (no include_usage): the header showed the first
    turn's tokens as the session's; a session with no usage at all showed "0 in / 0 out". Both are said now."""
    from inspector.testing import openai_fake as oa
    from inspector.testing.streamgen import sse, text_turn

    no_usage = oa.sse(
        oa.chunk({"role": "assistant", "content": ""}), oa.chunk({"content": "18 C"}), oa.chunk({}, "stop")
    )

    for name, plan in (("partial", ["messages", "chat"]), ("none", ["chat"])):
        rec, page = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.html"
        with RecordingWriter(rec, source={"type": "proxy"}) as w:
            for turn, kind in enumerate(plan):
                path = "/v1/messages" if kind == "messages" else "/v1/chat/completions"
                body = {"model": "claude-sonnet-4-5" if kind == "messages" else "gpt-4o-mini", "stream": True}
                w.request(turn, 0, float(turn), "POST", f"http://up{path}", {}, {**body, "messages": []})
                w.response(turn, 0, 0.01, 200, {"content-type": "text/event-stream"})
                w.read(turn, 0, 0.02, sse(*text_turn("18 C")) if kind == "messages" else no_usage)
                w.end(turn, 0, 0.03, "complete", None)
        export(load_any(rec), page, title=name)
        dom = _dom(page)
        assert _attr(dom, "errors") == "0"
        chip = re.search(r'<span class="chip">tokens <b>([^<]*)</b>', dom)
        assert chip, dom[:2000]
        if name == "partial":
            assert re.fullmatch(r"\d+ in / \d+ out \+ 1 turn without usage \(unknown\)", chip.group(1)), chip.group(1)
        else:
            assert chip.group(1) == "unknown (usage not reported)"


@needs_browser
def test_a_retried_chat_turn_whose_failed_attempt_had_no_usage_keeps_its_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chat turn cut by an error object (no usage: it comes last), then retried and answered with usage: its cost
    is unknown, its answer's tokens are not. `dump --timing` said "usage not reported: tokens and cost unknown" for
    the turn and the total, the replay's turn line too, and the page "cost usage not reported" beside the tokens."""
    from inspector.cli import main
    from inspector.record.accounting import account, format_turn_cost
    from inspector.testing import openai_fake as oa

    cut = oa.sse(
        oa.chunk({"role": "assistant", "content": "Let me"}), {"error": {"type": "server_error", "message": "busy"}}
    )
    usage = {"prompt_tokens": 430, "completion_tokens": 50, "total_tokens": 480}
    rec, page = tmp_path / "r.jsonl", tmp_path / "r.html"
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        for attempt, body in enumerate((cut, oa.chat_text("18 C", usage))):
            t = float(attempt)
            w.request(0, attempt, t, "POST", "http://up/v1/chat/completions", {}, {"model": "gpt-4o-mini"})
            w.response(0, attempt, t + 0.01, 200, {"content-type": "text/event-stream"})
            w.read(0, attempt, t + 0.02, body)
            w.end(0, attempt, t + 0.03, "complete", None)
    assert main(["dump", "--timing", str(rec)]) == 0
    report = capsys.readouterr().out.split("usage and cost\n", 1)[1].splitlines()
    assert report[:3] == [
        "  turn 1: in 430 · out 50  cost unknown  cache hit 0%",
        "    attempt 1 (failed): usage not reported: tokens and cost unknown",
        "  total: in 430 · out 50  cost unknown  cache hit 0%",
    ]
    (turn,) = dump_turns(load_any(rec))
    account([turn], [None])
    assert format_turn_cost(turn) == (
        "cost unknown · cache 0% · in 430 · out 50 · 1 failed attempt counted (1 without usage: unknown)"
    )
    export(load_any(rec), page, title="r")
    dom = _dom(page, "#tab=turns")
    assert _attr(dom, "errors") == "0"
    assert "usage: in 430 · out 50 · cost unknown · cache" in dom
    assert "in 430 · out 50 · cost unknown</p>" in dom
    assert re.search(r'<span class="chip">cost <b>unknown</b>', dom)


@needs_browser
def test_the_selected_last_event_is_in_view_in_the_list_on_load(tmp_path: Path) -> None:
    """On load the page selects the last event (the session's end), but its list of events showed the top: the
    selected row was out of view (found by a helper opening exports in chromium). The list now scrolls to it."""
    rec, page = tmp_path / "s.jsonl", tmp_path / "s.html"
    _record("parse_date", rec)
    recording = load_any(rec)
    n = len(build(recording, title="t")["events"])
    export(recording, page, title="t")
    for fragment, k in (("", n - 1), (f"#event={n - 20}", n - 20)):  # (and a link's event)
        dom = _dom(page, fragment)
        assert _attr(dom, "ready") == "1" and _attr(dom, "errors") == "0"
        drawn = [int(i) for i in re.findall(r'<div class="row[^"]*" data-i="(\d+)"', dom)]
        assert n > 60 and 0 not in drawn, (fragment, n, drawn)  # (more events than the list shows: not the top)
        assert re.search(rf'<div class="row sel[^"]*" data-i="{k}"', dom), (fragment, drawn)


def _big_int_tool_page(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    from inspector.testing.streamgen import sse, tool_turn

    rec, page = tmp_path / "big.sse", tmp_path / "big.html"
    rec.write_bytes(sse(*tool_turn(['{"a": 1844674407370955161', "55161, ", '"b": 9007199254740993}'])))
    recording = load_any(rec)
    export(recording, page, title="big")
    return build(recording, title="big"), page


def test_a_tool_input_integer_beyond_64_bits_exports_exact(tmp_path: Path) -> None:
    """A tool input holding an integer beyond 64 bits (found by the readers' fuzzing): the export raised orjson's
    "Integer exceeds 64-bit range" (`inspector export` ended in a traceback). The page is written, and the input's
    text is carried as written, since a browser's JSON.parse rounds any integer beyond 2**53 (9007199254740993
    would show as ...992)."""
    doc, page = _big_int_tool_page(tmp_path)
    [block] = [b for b in doc["blocks"] if b.get("content", {}).get("type") == "tool_use"]
    assert json.loads(block["input_text"]) == {"a": 184467440737095516155161, "b": 9007199254740993}
    assert "184467440737095516155161" in page.read_text()


@needs_browser
def test_a_tool_input_integer_beyond_2_53_shows_exact_in_a_real_browser(tmp_path: Path) -> None:
    _, page = _big_int_tool_page(tmp_path)
    dom = _dom(page, "#tab=blocks")
    assert _attr(dom, "errors") == "0"
    assert '"a": 184467440737095516155161' in dom and '"b": 9007199254740993' in dom
    assert "1.8446744073709552e+23" not in dom and "9007199254740992" not in dom


@pytest.mark.parametrize("depth", [400, 1022])
def test_a_tool_input_nested_400_deep_exports(tmp_path: Path, depth: int) -> None:
    """A hostile tool input nested deeper than orjson writes (255 levels): the export raised ("Recursion limit
    reached", a traceback from `inspector export`). The page is written, the input as its fragments and parsed.
    1,023 levels (orjson reads 1,024): deeper than the standard library wrote at its default recursion limit
    (`inspector export` and `dump` ended in a RecursionError traceback)."""
    from inspector.cli import main
    from inspector.testing.streamgen import sse, tool_turn

    deep = '{"a": ' + "[" * depth + "1" + "]" * depth + "}"
    rec, page = tmp_path / "deep.sse", tmp_path / "deep.html"
    rec.write_bytes(sse(*tool_turn([deep[:200], deep[200:]])))
    export(load_any(rec), page, title="deep")
    assert "[[[[" in page.read_text()
    assert main(["dump", str(rec)]) == 0
    assert main(["dump", "--json", str(rec)]) == 0


def _big_usage_page(tmp_path: Path) -> Path:
    """A turn whose message_start reports 2**64 input tokens and its message_delta 2**64 + 1 output tokens (a
    hostile or broken server), with a 17-digit number in its delta too."""
    from inspector.testing.streamgen import message_stop, sse, text_delta, text_start

    rec, page = tmp_path / "bigusage.sse", tmp_path / "bigusage.html"
    start = (
        'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", "type": "message", '
        '"role": "assistant", "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null, '
        '"usage": {"input_tokens": 18446744073709551616, "cache_read_input_tokens": 1, "output_tokens": 1}}}\n\n'
    )
    delta = (
        'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn", '
        '"stop_sequence": null, "n": 12345678901234567}, "usage": {"output_tokens": 18446744073709551617}}\n\n'
    )
    rec.write_bytes(
        sse(
            start,
            text_start(0),
            text_delta(0, "hi"),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            delta,
            message_stop(),
        )
    )
    export(load_any(rec), page, title="big usage")
    return page


@needs_browser
def test_an_integer_beyond_2_53_in_usage_and_in_an_event_shows_exact_in_a_real_browser(tmp_path: Path) -> None:
    """The page parsed its data and each event's JSON with JSON.parse, which rounds an integer beyond 2**53: the
    turn's usage said out 18446744073709552000 and the event's JSON 12345678901234568 (the page said numbers that
    did not pass). They show as sent."""
    page = _big_usage_page(tmp_path)
    dom = _dom(page, "#tab=turns")
    assert _attr(dom, "errors") == "0" and _attr(dom, "ready") == "1"  # (a sum of BigInt and Number threw)
    assert "18446744073709551617 in / 18446744073709551617 out" in dom  # (the summary: input + cache read)
    assert "out 18446744073709551617" in dom and "18446744073709552000" not in dom
    dom = _dom(page, "#event=4")
    assert _attr(dom, "errors") == "0"
    m = re.search(r'<pre id="event-json">(.*?)</pre>', dom, re.S)
    assert m, "no JSON view of the event"
    assert '"n": 12345678901234567' in m.group(1) and '"output_tokens": 18446744073709551617' in m.group(1)
    assert "12345678901234568" not in dom and "18446744073709552000" not in dom


def test_markup_a_hostile_recording_gets_into_the_page_cannot_run_in_a_real_browser(tmp_path: Path) -> None:
    """A tool_state line whose turn numbers are markup (a recording is not checked field by field): the Tools pane
    put `attempt` into the page as HTML, and its onerror ran (the policy allowed any inline script). Now the numbers
    are integers or nothing, the pane escapes them, and the policy lets run only the page's own script, by its
    digest: an injected handler is blocked whatever an escaping slip."""
    import base64
    import hashlib

    rec, page = tmp_path / "x.jsonl", tmp_path / "x.html"
    evil = "<img src=x onerror=document.body.dataset.pwned=1>"
    header = {"kind": "header", "format": "stream-inspector-recording", "version": 1, "source": {"type": "test"}}
    line = {"kind": "obs", "type": "tool_state", "t": 0, "turn": 0, "attempt": evil, "id": "toolu_1", "name": "t"}
    line["state"] = "running"
    rec.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    export(load_any(rec), page)
    text = page.read_text()
    script = re.search(r"<script>(.*?)</script>", text, re.DOTALL)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in text and "'unsafe-inline'; img-src" not in text.split("script-src")[1]
    dom = _dom(page, "#tab=tools")
    assert _attr(dom, "ready") == "1" and _attr(dom, "errors") == "0"  # the page's own script ran
    assert "data-pwned" not in dom.split("<script")[0]
    tools = dom.split('id="pane-tools">', 1)[1].split("</section>", 1)[0]
    assert "<img" not in tools and "toolu_1" in tools
    # the policy alone: the same markup written into the page's body unescaped does not run either
    raw = tmp_path / "raw.html"
    raw.write_text(text.replace("<body", f"<body>{evil}<div", 1))
    assert "data-pwned" not in _dom(raw).split("<script")[0]


def test_the_pages_diagnostics_are_dumps_for_an_http_error_and_an_attempt_without_a_response(tmp_path: Path) -> None:
    """An attempt answered 429, and one the client cancelled before any response: dump says transport.http_error and
    transport.no_response; the page said "no diagnostics" for the 429 and "the stream carried no event" for the
    other. Now each attempt's diagnostics on the page are dump's."""
    from inspector.record.har import load_any as load

    rec = tmp_path / "r.jsonl"
    url = "https://api.example/v1/messages"
    with RecordingWriter(rec, source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", url, {}, {"model": "m"})
        w.response(0, 0, 0.1, 429, {"content-type": "application/json"})
        w.read(0, 0, 0.1, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}')
        w.end(0, 0, 0.2, "complete")
        w.request(0, 1, 1.0, "POST", url, {}, {"model": "m"})
        w.end(0, 1, 1.5, "cancelled", "the client closed the connection before upstream's headers")
    recording = load(rec)
    doc = build(recording)
    page = [(doc["attempts"][d["a"]]["attempt"], d["code"]) for d in doc["diagnostics"]]
    dumped = dump_turns(load(rec))
    want = [
        (e["attempt"], d["code"]) for t in dumped for e in (*t.get("failed_attempts", ()), t) for d in e["diagnostics"]
    ]
    assert sorted(page) == sorted(want) == [(0, "transport.http_error"), (1, "transport.no_response")]


def test_the_pages_diagnostics_name_a_connection_that_broke_after_its_response(tmp_path: Path) -> None:
    """A response whose body upstream cut (fewer bytes than its Content-Length): dump says
    transport.connection_dropped with the end line's reason; the page says it too."""
    from inspector.record.har import load_any as load
    from inspector.testing.streamgen import sse, text_turn

    rec = tmp_path / "r.jsonl"
    url = "https://api.example/v1/messages"
    reason = "connection dropped: RemoteProtocolError: upstream closed the connection before the end of the body"
    with RecordingWriter(rec, source={"type": "test"}) as w:
        w.request(0, 0, 0.0, "POST", url, {}, {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream", "content-length": "9999"})
        w.read(0, 0, 0.2, sse(*text_turn("cut")))
        w.end(0, 0, 0.3, "failed", reason)
    doc = build(load(rec))
    page = [(d["code"], d["message"]) for d in doc["diagnostics"]]
    dumped = [(d["code"], d["message"]) for t in dump_turns(load(rec)) for d in t["diagnostics"]]
    assert page == dumped == [("transport.connection_dropped", reason)]


@needs_browser
def test_a_cost_priced_by_a_prefix_says_whose_price_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model named 'claude-sonnet-4-5-my-finetune' got Claude Sonnet 4.5's price by genai-prices' prefix match:
    `dump --timing` and the page showed the cost as if the model were known. Both say whose price it is."""
    from inspector.cli import main
    from inspector.testing import streamgen as sg

    body = sg.sse(
        sg.message_start(model="claude-sonnet-4-5-my-finetune", usage={"input_tokens": 1000, "output_tokens": 1}),
        sg.text_start(0),
        sg.text_delta(0, "hi"),
        sg.block_stop(0),
        sg.message_delta("end_turn", usage={"output_tokens": 100}),
        sg.message_stop(),
    )
    rec, page = tmp_path / "r.jsonl", tmp_path / "r.html"
    with RecordingWriter(rec, source={"type": "proxy"}) as w:
        w.request(0, 0, 0.0, "POST", "http://up/v1/messages", {}, {"model": "claude-sonnet-4-5-my-finetune"})
        w.response(0, 0, 0.01, 200, {"content-type": "text/event-stream"})
        w.read(0, 0, 0.02, body)
        w.end(0, 0, 0.03, "complete", None)
    assert main(["dump", "--timing", str(rec)]) == 0
    report = capsys.readouterr().out.split("usage and cost\n", 1)[1].splitlines()
    assert report[0] == "  turn 1: in 1,000 · out 100  cost $0.0045 (priced as claude-sonnet-4-5)  cache hit 0%", report
    export(load_any(rec), page, title="r")
    dom = _dom(page, "#tab=turns")
    assert _attr(dom, "errors") == "0"
    assert "cost $0.0045 (priced as claude-sonnet-4-5) · cache" in dom

"""The live accounting (a bus subscriber) gives the same usage, cost and cache verdict per turn as ``dump --json``
gives for the recording of the same session, failed attempts included."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from inspector.observe import observations as O
from inspector.record.accounting import LiveAccounting, account, family_of_url, requests_of
from inspector.record.cost import Cost
from inspector.record.dump import dump_turns
from inspector.record.recording import read_recording
from inspector.sessions.sources import scenario_session


def _live_and_dumped(
    name: str, tmp_path: Path
) -> tuple[list[dict[str, Any]], LiveAccounting, list[dict[str, Any]], dict[str, Any]]:
    rec = tmp_path / f"{name}.jsonl"
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    session = scenario_session(name, speed=math.inf, record=rec)
    session.bus.subscribe(live)
    try:
        asyncio.run(session.run())
    finally:
        session.close()
    recording = read_recording(rec)
    turns = dump_turns(recording)
    totals = account(turns, requests_of(recording.turns))
    return seen, live, turns, totals


@pytest.mark.parametrize(
    "name",
    [
        "cache_break",
        "server_error_retry",
        "overloaded_midstream",
        "weather",
        "rate_limited",
        "connection_refused",
        "thinking",
    ],
)
def test_the_live_figures_equal_dump_json(name: str, tmp_path: Path) -> None:
    seen, live, turns, totals = _live_and_dumped(name, tmp_path)
    assert len(seen) == len(turns) > 0
    for mine, dumped in zip(seen, turns, strict=True):
        assert mine["type"] == "turn_cost" and mine["turn"] == dumped["turn"] + 1
        for key in ("usage", "cost", "cache", "attempt_costs"):
            assert mine.get(key) == dumped.get(key), (name, key)
    assert live.totals() == totals


def test_cache_break_turn_two_says_the_system_changed(tmp_path: Path) -> None:
    seen, live, _, _ = _live_and_dumped("cache_break", tmp_path)
    assert seen[1]["cache"]["reason"] == "cache written again: system changed at char 69"
    assert seen[0]["cost"]["usd"] > 0 and live.cost.total is not None and live.cost.total > 0


def test_a_retried_turn_counts_its_failed_attempt(tmp_path: Path) -> None:
    seen, _, _, _ = _live_and_dumped("overloaded_midstream", tmp_path)
    multi = [t for t in seen if "attempt_costs" in t]
    assert multi and multi[0]["attempt_costs"][0].get("failed") is True
    assert "failed" not in multi[0]["attempt_costs"][-1]


def test_an_attempt_is_priced_once_when_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pricing happens at AttemptEnded, not per usage update (cost never slows the stream)."""
    import inspector.record.accounting as acc
    from inspector.record import cost

    acc.warm_prices()
    if acc._warming is not None:
        assert acc._warming.wait(60)  # the warm-up's own price is not this test's
    calls: list[str] = []
    real = cost.price  # (acc.price is cost.price: accounting imports it)

    def counting(*a: Any, **kw: Any) -> Cost:
        calls.append("p")
        return real(*a, **kw)

    monkeypatch.setattr(acc, "price", counting)
    live = LiveAccounting()
    body = {"model": "claude-sonnet-4-5", "messages": []}
    live(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, body))
    live(O.MessageStarted(0.1, 0, 0, {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 10}}))
    for i in range(50):
        live(O.MessageUpdated(0.2, 0, 0, None, {"output_tokens": i}))
    assert calls == []
    live(O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"))
    assert calls == ["p"]
    live(O.TurnEnded(0.4, 0, "text_finish", "end_turn", {}))
    assert calls == ["p"] and live.usage.output == 49


def test_while_the_prices_load_an_attempt_is_priced_at_its_turns_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's thread never waits for the warm-up: the attempt's price moves to the turn's end."""
    import inspector.record.accounting as acc

    monkeypatch.setattr(acc, "prices_ready", lambda: False)
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    live(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {}))
    live(O.MessageStarted(0.1, 0, 0, {"model": "claude-sonnet-4-6", "usage": {"input_tokens": 10}}))
    live(O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"))
    assert "cost" not in live._open[0][0]
    live(O.TurnEnded(0.4, 0, "text_finish", "end_turn", {}))
    assert seen[0]["cost"]["usd"] > 0


def test_an_unknown_model_is_unpriced_not_guessed() -> None:
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    live(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "nobody-knows-9"}))
    live(O.MessageStarted(0.1, 0, 0, {"model": "nobody-knows-9", "usage": {"input_tokens": 10, "output_tokens": 3}}))
    live(O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"))
    live(O.LoopFinished(0.4, "error", 1, [], [], "boom"))  # a turn the loop never ended still counts
    assert len(seen) == 1 and seen[0]["cost"]["usd"] is None and "nobody-knows-9" in seen[0]["cost"]["unpriced"]


def test_conversations_compare_with_their_own_previous_turn() -> None:
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 2048, "output_tokens": 1}
    for turn, conv, system in ((0, "c1", "A" * 100), (1, "c2", "B" * 100), (2, "c1", "A" * 100)):
        live(O.ConversationAssigned(0.0, turn, conv, 0, 0, "new"))
        body = {"model": "claude-sonnet-4-5", "system": system, "messages": [{"role": "user", "content": "hi"}]}
        live(O.AttemptStarted(0.0, turn, 0, "POST", "http://x/v1/messages", {}, body))
        live(O.MessageStarted(0.1, turn, 0, {"model": "claude-sonnet-4-5", "usage": usage}))
        live(O.AttemptEnded(0.2, turn, 0, "complete", None, "text_finish"))
        live(O.TurnEnded(0.3, turn, "text_finish", "end_turn", {}))
    assert [t["conversation"] for t in seen] == ["c1", "c2", "c1"]
    assert seen[1]["cache"]["kind"] == "first"  # c2's first turn, not a change from c1's system
    assert seen[2]["cache"]["kind"] != "first"


def test_the_family_of_a_request_path() -> None:
    assert family_of_url("http://127.0.0.1:1/v1/chat/completions") == "openai"
    assert family_of_url("http://h/v1/responses") == "openai"
    assert family_of_url("http://h/v1/messages") is None
    assert family_of_url(None) is None


# --- a property: any sequence of turns and attempts, any usage the wire may send ------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_count = st.one_of(st.integers(0, 10**6), st.none(), st.just(-1), st.just("12"), st.booleans())
_usage = st.dictionaries(
    st.sampled_from(
        ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "prompt_tokens"]
    ),
    _count,
    max_size=4,
)
_attempt = st.tuples(
    st.sampled_from(["claude-sonnet-4-6", "claude-haiku-4-5", "nobody-knows-9", None]),
    st.one_of(st.none(), _usage),  # None: the attempt got no message (an HTTP error)
    st.sampled_from(["complete", "failed"]),
)
_turn = st.tuples(st.lists(_attempt, min_size=1, max_size=3), st.sampled_from(["A" * 80, "B" * 80]))


@settings(max_examples=60, deadline=None)
@given(st.lists(_turn, min_size=1, max_size=4))
def test_live_equals_account_for_any_turns(turns: list[tuple[list[tuple[str | None, Any, str]], str]]) -> None:
    """The observations of any turns give what ``account`` gives for the same turns as dump entries."""
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    entries: list[dict[str, Any]] = []
    requests = []
    t = 0.0
    for n, (attempts, system) in enumerate(turns):
        body = {"model": "claude-sonnet-4-6", "system": system, "messages": [{"role": "user", "content": "x"}]}
        dumped = []
        for a, (model, usage, status) in enumerate(attempts):
            t += 1.0
            live(O.AttemptStarted(t, n, a, "POST", "http://x/v1/messages", {}, body))
            msg: dict[str, Any] = {}
            if usage is not None:
                # (as dump has it: the answer's id too; an answer without usage is unknown, an HTTP error free)
                msg = {"id": f"msg_{n}_{a}", "model": model, "usage": {k: v for k, v in usage.items() if v is not None}}
                live(O.MessageStarted(t, n, a, {"id": f"msg_{n}_{a}", "model": model, "usage": usage}))
            live(O.AttemptEnded(t, n, a, status, None, None))
            dumped.append({"turn": n, "attempt": a, "message": msg})
        live(O.TurnEnded(t, n, "text_finish", None, {}))
        entry = dumped[-1]
        if len(dumped) > 1:
            entry["failed_attempts"] = dumped[:-1]
        entries.append(entry)
        from inspector.record.accounting import Request

        requests.append(Request(body, t))
    totals = account(entries, requests)
    assert [(s["usage"], s["cost"], s["cache"], s.get("attempt_costs")) for s in seen] == [
        (e["usage"], e["cost"], e["cache"], e.get("attempt_costs")) for e in entries
    ]
    assert live.totals() == totals


def test_an_answer_without_usage_costs_unknown_and_an_http_error_nothing() -> None:
    """A chat stream sends usage only with stream_options.include_usage: its answer's cost and tokens are unknown,
    never "$0 · in 0 · out 0"; an attempt that got no answer (an HTTP error) still costs nothing."""
    from inspector.record.accounting import attempt_cost, format_session_cost, format_turn_cost
    from inspector.record.cost import FREE

    chat = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini", "usage": None}
    answered = attempt_cost({"message": chat, "family": "openai_chat"})
    assert answered.cost.total is None and answered.cost.unpriced == "usage not reported"
    refused = attempt_cost({"message": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}})
    assert refused.cost == FREE
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    live(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/chat/completions", {}, {"model": "gpt-4o-mini"}))
    live(O.MessageStarted(0.1, 0, 0, {"id": "chatcmpl-1", "model": "gpt-4o-mini"}))
    live(O.AttemptEnded(0.2, 0, 0, "complete", None, "text_finish"))
    live(O.TurnEnded(0.2, 0, "text_finish", "end_turn", {}))
    (turn,) = seen
    assert turn["cost"] == answered.cost.to_json()
    assert format_turn_cost(turn) == "usage not reported: tokens and cost unknown"
    assert format_session_cost(live.total_json(0.3)).startswith("total 1 turn: usage not reported")
    # the JSON says the tokens are unknown too (dump --json, turn_cost lines): null, never 0
    assert turn["usage"]["reported"] is False and turn["usage"]["input_tokens"] is None
    assert {k: v for k, v in turn["usage"].items() if v is not None} == {"reported": False}
    assert answered.usage.to_json() == turn["usage"]
    reported = attempt_cost({"message": {**chat, "usage": {"prompt_tokens": 0, "completion_tokens": 0}}})
    assert reported.usage.to_json()["input_tokens"] == 0 and "reported" not in reported.usage.to_json()


def test_a_sum_over_turns_some_answered_without_usage_says_it_is_partial() -> None:
    """A Messages turn with usage and a chat turn answered without it: the session's tokens (dump --json's total,
    the headless total line, the export's header) were the first turn's alone, shown as the whole; the sum now says
    how many turns' counts are unknown. An HTTP error's turn (free, no answer) is not one of them."""
    from inspector.record.accounting import format_session_cost

    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    usage = {"input_tokens": 1300, "output_tokens": 7}
    turns: list[tuple[str, dict[str, Any] | None]] = [
        ("http://x/v1/messages", {"id": "msg_1", "model": "claude-sonnet-4-6", "usage": usage}),
        ("http://x/v1/chat/completions", {"id": "chatcmpl-1", "model": "gpt-4o-mini"}),  # no include_usage
        ("http://x/v1/messages", None),  # an HTTP error: no answer, free
    ]
    for n, (url, message) in enumerate(turns):
        live(O.AttemptStarted(float(n), n, 0, "POST", url, {}, {"model": "m"}))
        if message is not None:
            live(O.MessageStarted(n + 0.1, n, 0, message))
        live(O.AttemptEnded(n + 0.2, n, 0, "complete" if message else "http_error", None, None))
        live(O.TurnEnded(n + 0.2, n, "text_finish", None, {}))
    total = live.total_json(3.0)
    assert total["usage"]["input_tokens"] == 1300 and total["usage"]["turns_without_usage"] == 1
    assert total["cost"]["usd"] is None  # (unknown: one turn's usage is)
    line = format_session_cost(total)
    assert line.startswith(
        "total 3 turns: cost unknown · cache 0% · in 1,300 · out 7 · + 1 turn without usage (unknown"
    ), line
    entries = [
        {"turn": n, "attempt": 0, "message": {k: v for k, v in (m or {}).items()}, "family": fam}
        for n, ((url, m), fam) in enumerate(zip(turns, ["anthropic", "openai_chat", "anthropic"], strict=True))
    ]
    assert account(entries, [None, None, None])["usage"] == total["usage"]  # (dump --json: the same figures)
    assert [s["usage"].get("turns_without_usage") for s in seen] == [None, None, None]  # (a turn says reported)


def test_a_proxied_turn_that_never_ended_is_closed_when_its_conversation_goes_on_and_open_turns_are_bounded() -> None:
    """A proxied turn whose attempts all failed gets no TurnEnded: its attempts (each with its whole request body)
    stayed open for the session (watch --headless subscribes this sink; found in review). Its conversation's next
    turn closes it; and at most OPEN turns are open at once."""
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    body = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x" * 1000}]}
    url = "http://127.0.0.1/v1/messages"
    live(O.ConversationAssigned(0.0, 0, "c1", 0, 0, "new"))
    live(O.AttemptStarted(0.0, 0, 0, "POST", url, {}, body))
    live(O.AttemptEnded(0.5, 0, 0, "failed", "HTTP 529", "http_error"))
    assert 0 in live._open  # (still open: a retry may come)
    live(O.ConversationAssigned(1.0, 1, "c1", 1, 0, "continues"))
    assert 0 not in live._open and [d["turn"] for d in seen] == [1] and seen[0]["conversation"] == "c1"
    for turn in range(2, 2 + LiveAccounting.OPEN + 50):
        live(O.AttemptStarted(2.0, turn, 0, "POST", url, {}, body))
    assert len(live._open) <= LiveAccounting.OPEN

"""The status line's session cost and cache rate, and the request view's per-turn usage, cost and cache verdict:
the same figures as the live accounting (and so as `dump --json`)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from inspector.observe import observations as O
from inspector.record.accounting import LiveAccounting
from inspector.record.cost import fmt_usd
from inspector.sessions.sources import scenario_session
from inspector.state.costs import session_cost, turn_cost
from inspector.state.fold import DashboardState
from inspector.tui.request import request_detail
from inspector.tui.widgets.status import cost_label


def _run(name: str) -> tuple[DashboardState, LiveAccounting, list[dict[str, Any]]]:
    state = DashboardState()
    seen: list[dict[str, Any]] = []
    live = LiveAccounting(seen.append)
    session = scenario_session(name, speed=math.inf)

    def fold(o: O.Observation) -> None:  # (apply returns the state; a subscriber returns nothing)
        state.apply(o)

    session.bus.subscribe(fold)
    session.bus.subscribe(live)
    try:
        asyncio.run(session.run())
    finally:
        session.close()
    return state, live, seen


def test_the_status_line_says_the_session_cost_and_cache_rate() -> None:
    state, live, _ = _run("cache_break")
    sc = session_cost(state)
    assert sc.cost == live.cost and sc.usage == live.usage and sc.running == 0
    assert cost_label(state) == f"{fmt_usd(live.cost)} · cache 0%"
    assert cost_label(state).startswith("$0.0")


def test_a_retried_session_counts_the_failed_attempt_too() -> None:
    state, live, seen = _run("overloaded_midstream")
    assert session_cost(state).cost == live.cost
    multi = next(t for t in seen if "attempt_costs" in t)
    tc = turn_cost(state, multi["turn"] - 1)
    assert tc is not None and [a.failed for _, a in tc.attempts] == [True, False]
    text = request_detail(state, multi["turn"] - 1).body.plain
    assert "attempt 1 (failed): " in text


def test_the_request_view_of_cache_break_turn_two_names_the_change() -> None:
    state, _, seen = _run("cache_break")
    tc = turn_cost(state, 1)
    assert tc is not None and tc.cache.reason == seen[1]["cache"]["reason"]
    assert tc.cost.to_json() == seen[1]["cost"] and tc.usage.to_json() == seen[1]["usage"]
    text = request_detail(state, 1).body.plain
    assert "cache: cache written again: system changed at char 69" in text
    assert "cache write 2,048" in text and f"cost: {fmt_usd(tc.cost)}" in text
    assert "prices: genai-prices" in text
    assert text.index("usage and cost") < text.index("── parameters")


def test_an_unknown_model_is_unpriced_on_the_status_line() -> None:
    state = DashboardState()
    body = {"model": "nobody-knows-9", "messages": []}
    state.apply(O.TurnStarted(0.0, 0))
    state.apply(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, body))
    state.apply(O.MessageStarted(0.1, 0, 0, {"model": "nobody-knows-9", "usage": {"input_tokens": 10}}))
    assert cost_label(state) == ""  # still streaming: not priced yet
    state.apply(O.MessageUpdated(0.2, 0, 0, "end_turn", {"output_tokens": 5}))
    state.apply(O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"))
    assert cost_label(state) == "unpriced · cache 0%"
    assert "unpriced: no price for 'nobody-knows-9'" in request_detail(state, 0).body.plain


def _ended_turns(n: int, model: str = "claude-sonnet-4-6", base: int = 10) -> DashboardState:
    state = DashboardState()
    body = {"model": model, "messages": []}
    for t in range(n):
        state.apply(O.TurnStarted(0.0, t))
        state.apply(O.AttemptStarted(0.0, t, 0, "POST", "http://x/v1/messages", {}, body))
        usage = {"input_tokens": base + t, "cache_read_input_tokens": 100}
        state.apply(O.MessageStarted(0.0, t, 0, {"model": model, "usage": usage}))
        state.apply(O.AttemptEnded(0.0, t, 0, "complete", None, "text_finish"))
    return state


def _plain_sum(state: DashboardState) -> tuple[Any, ...]:
    """The figures summed the slow way: every attempt priced on its own."""
    from inspector.observe.usage import ZERO
    from inspector.record.accounting import attempt_cost
    from inspector.record.cost import FREE

    usage, cost = ZERO, FREE
    for a in state.attempts.values():
        ac = attempt_cost({"message": {"model": a.model, "usage": a.usage}})
        usage, cost = usage + ac.usage, cost + ac.cost
    return usage, cost


def test_a_budget_prices_a_long_session_over_several_frames_to_the_same_sum() -> None:
    state = _ended_turns(30, base=7)
    first = session_cost(state, budget=4)
    assert first.pending == 26 and first.priced == 4
    frames = 0
    while session_cost(state, budget=4).pending:
        frames += 1
        assert frames < 30
    sc = session_cost(state)
    assert (sc.usage, sc.cost) == _plain_sum(state) and sc.priced == 30 and sc.pending == 0


def test_the_shared_running_sums_never_mix_sessions_or_moments() -> None:
    """Frozen clocks give every attempt the same time: the sums of one state are never reused for another."""
    a, b = _ended_turns(12, base=10), _ended_turns(12, base=5000)
    for _ in range(2):
        for state in (a, b, _ended_turns(5, base=10), _ended_turns(12, model="claude-haiku-4-5", base=10)):
            sc = session_cost(state)
            assert (sc.usage, sc.cost) == _plain_sum(state)
    past = _ended_turns(12, base=10)
    live = past.copy()
    body = {"model": "claude-sonnet-4-6", "messages": []}
    live.apply(O.TurnStarted(1.0, 12))
    live.apply(O.AttemptStarted(1.0, 12, 0, "POST", "http://x/v1/messages", {}, body))
    live.apply(O.MessageStarted(1.0, 12, 0, {"model": "claude-sonnet-4-6", "usage": {"input_tokens": 99}}))
    assert session_cost(live).running == 1 and session_cost(live).usage == session_cost(past).usage
    live.apply(O.AttemptEnded(2.0, 12, 0, "complete", None, "text_finish"))
    assert (session_cost(live).usage, session_cost(live).cost) == _plain_sum(live)
    assert (session_cost(past).usage, session_cost(past).cost) == _plain_sum(past)


def test_an_answer_without_usage_makes_the_dashboards_session_cost_unknown_as_dump_says() -> None:
    """A priced Messages turn beside a chat completion streamed without usage (no include_usage): dump, replay's
    headless lines and the export say the session's cost is unknown; the status line said `$0.0045` (the answered
    attempt was priced as an unanswered one, $0: its message id was left out) and the request view `$0`."""
    state = DashboardState()
    state.apply(O.TurnStarted(0.0, 0))
    state.apply(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "claude-sonnet-4-5"}))
    usage = {"input_tokens": 1000, "output_tokens": 100}
    state.apply(O.MessageStarted(0.1, 0, 0, {"id": "msg_1", "model": "claude-sonnet-4-5", "usage": usage}))
    state.apply(O.AttemptEnded(0.2, 0, 0, "complete", None, "text_finish"))
    assert cost_label(state) == "$0.0045 · cache 0%"
    state.apply(O.TurnStarted(0.3, 1))
    state.apply(O.AttemptStarted(0.3, 1, 0, "POST", "http://x/v1/chat/completions", {}, {"model": "gpt-4o-mini"}))
    state.apply(O.MessageStarted(0.4, 1, 0, {"id": "chatcmpl-1", "model": "gpt-4o-mini"}))
    state.apply(O.AttemptEnded(0.5, 1, 0, "complete", None, "text_finish"))
    sc = session_cost(state)
    assert sc.cost.total is None and sc.cost.unpriced == "usage not reported"
    assert cost_label(state) == "cost unknown"
    tc = turn_cost(state, 1)
    assert tc is not None and tc.cost.to_json() == {"usd": None, "unpriced": "usage not reported"}
    assert "cost: usage not reported" in request_detail(state, 1).body.plain
    # the tokens: the first turn's alone were shown as the session's; the turn without usage is said
    assert state.token_totals() == (1000, 100, 1)


async def test_the_status_lines_tokens_say_a_turn_answered_without_usage() -> None:
    """The status line's tokens summed the turns that reported usage and showed that as the session's."""
    from inspector.tui.app import InspectorApp

    obs: list[O.Observation] = [O.LoopStarted(0.0, {"type": "proxy"}, "", None)]
    turns: list[tuple[str, dict[str, Any]]] = [
        ("http://x/v1/messages", {"id": "msg_1", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 1000}}),
        ("http://x/v1/chat/completions", {"id": "chatcmpl-1", "model": "gpt-4o-mini"}),
    ]
    for turn, (url, message) in enumerate(turns):
        t = float(turn)
        obs += [
            O.TurnStarted(t, turn),
            O.AttemptStarted(t, turn, 0, "POST", url, {}, {"model": message["model"]}),
            O.MessageStarted(t + 0.1, turn, 0, message),
            O.AttemptEnded(t + 0.2, turn, 0, "complete", None, "text_finish"),
        ]
    for size, said in (((160, 48), "tokens 1,000 in / 0 out + 1 turn unknown"), ((80, 24), "tok 1,000 in / 0 out +1?")):
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            text = app.status_bar.render().plain
            assert said in text, text


def test_a_failed_attempt_without_usage_makes_the_cost_unknown_not_unpriced() -> None:
    """A chat attempt cut before its usage chunk, then retried and answered with usage: the request view said the
    failed attempt was "unpriced" (as for a model without a price) and the turn's cost "usage not reported" beside
    its tokens. Its cost is unknown, the tokens shown are the answer's."""
    state = DashboardState()
    url = "http://x/v1/chat/completions"
    state.apply(O.TurnStarted(0.0, 0))
    for attempt, usage in ((0, {}), (1, {"input_tokens": 430, "output_tokens": 50})):
        state.apply(O.AttemptStarted(attempt + 0.0, 0, attempt, "POST", url, {}, {"model": "gpt-4o-mini"}))
        state.apply(O.MessageStarted(attempt + 0.1, 0, attempt, {"id": "chatcmpl-1", "model": "gpt-4o-mini"}))
        if usage:
            state.apply(O.MessageUpdated(attempt + 0.2, 0, attempt, "end_turn", usage))
        status = "complete" if usage else "failed"
        state.apply(O.AttemptEnded(attempt + 0.3, 0, attempt, status, None, "text_finish" if usage else "error"))
    text = request_detail(state, 0).body.plain
    assert "attempt 1 (failed): usage not reported  ·  unknown\n" in text
    assert "tokens: in 430 · out 50\ncost: unknown (an attempt's usage was not reported)\n" in text

"""Usage, cost and cache verdicts: the double-billing trap, unpriced models, per-attempt tiers, and why a cache missed."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.observe.usage import ZERO, Usage, from_anthropic, from_openai
from inspector.record.accounting import Request, account, format_turn_cost
from inspector.record.cachebreak import breakpoints, explain, first_difference
from inspector.record.cost import FREE, fmt_usd, price

counts = st.integers(min_value=0, max_value=10**7)


@given(counts, counts, counts, counts)
def test_the_whole_prompt_is_the_same_number_for_both_families(inp: int, write: int, read: int, out: int) -> None:
    """Anthropic reports the cache outside input_tokens, OpenAI inside prompt_tokens: the neutral usage has the
    same whole prompt either way, so nothing is billed twice."""
    a = from_anthropic(
        {
            "input_tokens": inp,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "output_tokens": out,
        }
    )
    o = from_openai(
        {
            "prompt_tokens": inp + write + read,
            "completion_tokens": out,
            "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        }
    )
    assert a.prompt == o.prompt == inp + write + read
    assert (a.input, a.cache_read, a.cache_write) == (o.input, o.cache_read, o.cache_write)


def test_responses_usage_and_reasoning() -> None:
    u = from_openai(
        {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 800},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 200},
        }
    )
    assert (u.input, u.cache_read, u.output, u.reasoning) == (200, 800, 300, 200)
    assert u.hit_rate == pytest.approx(0.8)


def test_odd_shapes_count_nothing_and_never_raise() -> None:
    bad: object
    for bad in (None, [], "x", {"input_tokens": -5}, {"input_tokens": True}, {"input_tokens": "7"}):
        u = from_anthropic(bad)
        assert u.input == 0
    assert from_openai({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 99}}).input == 0


def test_anthropic_cost_matches_genai_prices_own_extraction() -> None:
    """Our mapping into genai-prices gives the price its own Anthropic extractor gives, 5m/1h split included."""
    raw = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000,
        "output_tokens": 50,
        "cache_creation": {"ephemeral_5m_input_tokens": 120, "ephemeral_1h_input_tokens": 80},
    }
    ours = price(from_anthropic(raw), "claude-sonnet-4-5")
    theirs = genai_prices.extract_usage({"model": "claude-sonnet-4-5", "usage": raw}, provider_id="anthropic")
    assert ours.total == theirs.calc_price().total_price
    naive = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1210 + 1000, output_tokens=50, cache_read_tokens=1000),
        model_ref="claude-sonnet-4-5",
        provider_id="anthropic",
    )
    assert ours.total != naive.total_price  # summing the cache into input twice would bill more


def test_openai_cost_counts_cached_tokens_once() -> None:
    u = from_openai({"prompt_tokens": 1000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 500}})
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, output_tokens=1, cache_read_tokens=500),
        model_ref="gpt-4o",
        provider_id="openai",
    )
    assert price(u, "gpt-4o", "openai").total == expected.total_price


def test_unknown_model_is_unpriced_never_guessed() -> None:
    c = price(Usage(input=10, output=1, reported=True), "my-private-finetune-xyz")
    assert c.total is None and "unpriced" in (c.unpriced or "")
    assert c.to_json()["usd"] is None


USED = Usage(input=1000, output=100, reported=True)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("claude-sonnet-4-5", "anthropic"),
        ("CLAUDE-SONNET-4-5", "anthropic"),
        ("claude-sonnet-4.5", "anthropic"),  # (a spelling the table lists)
        ("claude-sonnet-4-5-20250929", "anthropic"),  # snapshots: what the API's message.model says
        ("claude-sonnet-4-5@20250929", "anthropic"),
        ("claude-3-5-sonnet-latest", "anthropic"),
        ("gpt-4o", "openai"),
        ("gpt-4o-2024-08-06", "openai"),
        ("gpt-4.1-2025-04-14", "openai"),
    ],
)
def test_a_name_the_price_table_names_is_priced_as_itself(name: str, family: Any) -> None:
    c = price(USED, name, family)
    assert c.total is not None and c.priced_as == () and "priced_as" not in c.to_json()
    assert "priced as" not in fmt_usd(c)


@pytest.mark.parametrize("name", ["claude-sonnet-4-5-my-finetune", "claude-sonnet-4-5-evil", "claude-sonnet-4-5x"])
def test_a_name_matched_only_by_a_prefix_says_whose_price_it_got(name: str) -> None:
    """genai-prices matches claude-sonnet-4-5 by prefix: 'claude-sonnet-4-5-my-finetune' got Sonnet 4.5's price and
    the cost said nothing of it ($0.0045, as for Sonnet 4.5 itself). The price is still the table's, said as such in
    every place a cost is shown: fmt_usd (the dashboard), the JSON (dump, --json, the HTML page), the headless line;
    a sum keeps it."""
    c = price(USED, name)
    assert c.total == price(USED, "claude-sonnet-4-5").total and c.priced_as == ("claude-sonnet-4-5",)
    assert fmt_usd(c) == "$0.0045 (priced as claude-sonnet-4-5)"
    assert c.to_json()["priced_as"] == ["claude-sonnet-4-5"]
    total = FREE + price(USED, "gpt-4o", "openai") + c
    assert total.priced_as == ("claude-sonnet-4-5",) and fmt_usd(total).endswith(" (priced as claude-sonnet-4-5)")
    line = format_turn_cost({"usage": USED.to_json(), "cost": total.to_json(), "cache": {}})
    assert line.startswith("cost $0.0080 (priced as claude-sonnet-4-5) · cache"), line
    assert price(USED, "gpt-4o-evil", "openai").total is None  # (matched by exact names: unpriced, as before)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_no_model_of_the_table_is_priced_as_another_and_no_longer_name_is_priced_silently(provider: str) -> None:
    """Every model of the provider's table, by its id: priced as itself. The same id with '-my-finetune' after it:
    unpriced, or priced with the model whose price it got said."""
    from genai_prices import data_snapshot

    family: Any = "anthropic" if provider == "anthropic" else "openai"
    (table,) = [p for p in data_snapshot.get_snapshot().providers if p.id == provider]
    for info in table.models:
        own = price(USED, info.id, family)
        assert own.total is None or own.priced_as == (), (info.id, own)
        other = price(USED, f"{info.id}-my-finetune", family)
        assert other.total is None or other.priced_as, (info.id, other)


def test_long_context_tier_is_per_attempt() -> None:
    """Two attempts of 150k input each are priced at the base rate; one of 300k is in the long-context tier."""
    one = price(Usage(input=150_000, output=0, reported=True), "claude-sonnet-4-5")
    big = price(Usage(input=300_000, output=0, reported=True), "claude-sonnet-4-5")
    assert one.total is not None and big.total is not None
    assert big.total > 2 * one.total


def _body(
    system: str = "You are terse.",
    tools: list[dict[str, Any]] | None = None,
    messages: list[dict[str, Any]] | None = None,
    mark: bool = True,
) -> dict[str, Any]:
    sys_blocks = [{"type": "text", "text": system, **({"cache_control": {"type": "ephemeral"}} if mark else {})}]
    return {"system": sys_blocks, "tools": tools or [], "messages": messages or [{"role": "user", "content": "hi"}]}


CACHED = Usage(input=10, cache_write=2000, output=5, reported=True)
WRITTEN = Usage(input=12, cache_write=2000, output=5, reported=True)
READ = Usage(input=12, cache_read=2000, output=5, reported=True)


def test_system_changed_at_char_n() -> None:
    v = explain(_body("You are terse. Today is Monday."), _body("You are terse. Today is Tuesday."), WRITTEN, CACHED, 3)
    assert v.kind == "written_again" and v.reason == "cache written again: system changed at char 24"
    assert (v.segment, v.char) == ("system", 24)


def test_a_system_prompt_of_several_blocks_names_the_block() -> None:
    """A char a person can find: of the block that changed (the request shows the blocks), not of their texts
    joined, which no block holds (it read 'system changed at char 45' for char 16 of block 1)."""

    def two(t: str) -> dict[str, Any]:
        body = _body()
        body["system"] = [{"type": "text", "text": "You are a weather assistant."}, {**body["system"][0], "text": t}]
        return body

    v = explain(two("The time is 09:14."), two("The time is 09:15."), WRITTEN, CACHED, 3)
    assert v.reason == "cache written again: system block 1 changed at char 16 of its text"
    assert (v.segment, v.index, v.char) == ("system", 1, 16)
    one = explain(_body("The time is 09:14."), _body("The time is 09:15."), WRITTEN, CACHED, 3)
    assert one.reason == "cache written again: system changed at char 16"  # (one block: its text is the prompt)


def test_tools_changed_names_the_tool() -> None:
    t1 = [{"name": "read", "input_schema": {}}, {"name": "grep", "input_schema": {}}]
    t2 = [{"name": "read", "input_schema": {}}, {"name": "grep", "input_schema": {"type": "object"}}]
    v = explain(_body(tools=t1), _body(tools=t2), WRITTEN, CACHED, 3)
    assert v.reason == "cache written again: tools changed: 'grep' (tool 1)"


def test_a_tool_added_or_removed_before_another_is_said_so() -> None:
    """A tool inserted first read "tools changed: 'get_time' (tool 0)", as if get_time, never sent before, had
    changed."""
    a: dict[str, Any]
    b: dict[str, Any]
    c: dict[str, Any]
    a, b, c = ({"name": n, "input_schema": {}} for n in ("get_weather", "get_time", "grep"))

    def why(t1: list[dict[str, Any]], t2: list[dict[str, Any]]) -> str:
        return explain(_body(tools=t1), _body(tools=t2), WRITTEN, CACHED, 3).reason.removeprefix(
            "cache written again: "
        )

    assert why([a], [b, a]) == "tools changed: 'get_time' added (tool 0)"
    assert why([a, c], [c]) == "tools changed: 'get_weather' removed (tool 0)"
    assert why([a, c], [c, a]) == "tools changed: order changed: 'grep' where 'get_weather' was (tool 0)"
    assert why([a], [a, b]) == "tools changed: 'get_time' added (tool 1)"


def test_earlier_message_edited() -> None:
    marked: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "yes", "cache_control": {"type": "ephemeral"}}],
    }
    m1: list[dict[str, Any]] = [{"role": "user", "content": "hello there"}, marked]
    m2: list[dict[str, Any]] = [{"role": "user", "content": "hello where"}, marked]
    assert explain(_body(messages=m1), _body(messages=m2), WRITTEN, CACHED, 3).segment == "messages"
    unmarked: list[dict[str, Any]] = [
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "yes"},
    ]
    assert explain(_body(messages=unmarked), _body(messages=m2), WRITTEN, CACHED, 3).segment == "prefix"
    v = explain(_body(messages=m1), _body(messages=m2 + [{"role": "user", "content": "more"}]), WRITTEN, CACHED, 3)
    assert v.segment == "messages" and v.index == 0 and "message 0 (user) edited" in v.reason
    # where, in words a person can find: the char of the text (it was the char of the message's compact JSON)
    assert v.reason.endswith("message 0 (user) edited at char 6 of its text") and v.char == 6
    blocks = [{"role": "user", "content": [{"type": "text", "text": t}]} for t in ("hello there", "hello where")]
    found = first_difference(_body(messages=[blocks[0], marked]), _body(messages=[blocks[1], marked]))
    assert found is not None and found.reason == "message 0 (user) edited at char 6 of block 0's text"
    tool = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "x"}]} for t in "ab"]
    other = first_difference(_body(messages=[tool[0], marked]), _body(messages=[tool[1], marked]))
    assert other is not None and other.reason.startswith("message 0 (user) edited at char ")
    assert other.reason.endswith("of its JSON")


def test_a_moved_breakpoint_is_no_edit() -> None:
    """A harness marks its newest message each turn (the mark leaves the message before): the mark is where the
    cached prefix ends, not part of it. A turn that wrote the cache again after 6.7 min read "message 0 (user) edited
    at char 55 of its JSON" (the mark that moved) where the text was the same: the TTL had expired."""
    mark = {"type": "ephemeral"}

    def text(t: str, marked: bool) -> dict[str, Any]:
        return {"type": "text", "text": t, **({"cache_control": mark} if marked else {})}

    first = _body(messages=[{"role": "user", "content": [text("hello", True)]}])
    later = [{"role": "assistant", "content": [text("hi", False)]}, {"role": "user", "content": [text("more", True)]}]
    second = _body(messages=[{"role": "user", "content": [text("hello", False)]}, *later])
    assert explain(first, second, WRITTEN, CACHED, 400).segment == "ttl"
    assert explain(first, second, WRITTEN, CACHED, 10).segment == "prefix"
    edited = _body(messages=[{"role": "user", "content": [text("hellO", False)]}, *later])
    v = explain(first, edited, WRITTEN, CACHED, 10)
    assert v.reason == "cache written again: message 0 (user) edited at char 4 of block 0's text"
    tools = [{"name": "read", "input_schema": {}}, {"name": "grep", "input_schema": {}}]
    marked = [tools[0], {**tools[1], "cache_control": mark}]
    assert explain(_body(tools=marked), _body(tools=tools), WRITTEN, CACHED, 400).segment == "ttl"


def test_a_thinking_or_tool_choice_change_is_the_reason_not_an_early_eviction() -> None:
    """Changing the thinking parameters or the tool choice invalidates the messages' cache entries: it read
    'prefix unchanged (evicted early, or under the model's minimum cacheable length)'. A request that cached only its
    system prompt keeps that cache whatever these settings say."""
    marked = [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]
    before = _body(messages=marked, mark=False)
    before["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    after = {**before, "thinking": {"type": "enabled", "budget_tokens": 4096}}
    v = explain(before, after, WRITTEN, CACHED, 3)
    assert v.segment == "settings" and v.reason == (
        'cache written again: thinking changed: {"type":"enabled","budget_tokens":1024} -> '
        '{"type":"enabled","budget_tokens":4096}'
    )
    chosen = explain(before, {**before, "tool_choice": {"type": "any"}}, WRITTEN, CACHED, 3)
    assert chosen.reason == 'cache written again: tool_choice changed: none -> {"type":"any"}'
    assert explain(before, before, WRITTEN, CACHED, 3).segment == "prefix"
    system_only = _body()
    assert explain(system_only, {**system_only, "tool_choice": {"type": "any"}}, WRITTEN, CACHED, 3).segment == "prefix"


def test_a_model_change_is_the_reason_not_an_early_eviction() -> None:
    """The same prefix sent to another model is written again (a cache is per model): said as such, where it read
    'prefix unchanged (evicted early, or under the model's minimum cacheable length)'."""
    before, after = _body(), _body()
    before["model"], after["model"] = "claude-sonnet-4-5", "claude-opus-4-1"
    v = explain(before, after, WRITTEN, CACHED, 3)
    assert v.kind == "written_again" and v.segment == "model"
    assert v.reason == "cache written again: model changed: 'claude-sonnet-4-5' -> 'claude-opus-4-1'"
    after["model"] = "claude-sonnet-4-5"
    assert explain(before, after, WRITTEN, CACHED, 3).segment == "prefix"
    assert explain(before, after, READ, CACHED, 3).kind == "hit"


def test_ttl_expired_and_unchanged_prefix() -> None:
    b = _body()
    assert "TTL expired: 6.0 min" in explain(b, b, WRITTEN, CACHED, 360).reason
    assert "prefix unchanged" in explain(b, b, WRITTEN, CACHED, 10).reason
    one_hour = _body()
    one_hour["system"][0]["cache_control"]["ttl"] = "1h"
    assert breakpoints(one_hour) == (-1, 3600.0)
    assert "prefix unchanged" in explain(one_hour, one_hour, WRITTEN, CACHED, 360).reason


def test_hits_and_first_writes_are_not_misses() -> None:
    assert explain(_body(), _body(), READ, CACHED, 3).kind == "hit"
    assert explain(None, _body(), CACHED, None, None).kind == "first"
    assert explain(_body(), _body(), Usage(input=5, reported=True), Usage(input=5, reported=True), 1).kind == "no_cache"


def test_messages_after_the_breakpoint_do_not_count() -> None:
    prev = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]}]}
    prev["messages"].append({"role": "assistant", "content": "draft"})
    cur = {"messages": [prev["messages"][0], {"role": "assistant", "content": "changed"}]}
    assert breakpoints(prev) == (1, 300.0)
    assert first_difference(prev, cur, 1) is None
    assert first_difference(prev, cur, None) is not None


@given(st.text(max_size=50), st.text(max_size=50))
def test_first_difference_char_is_where_the_texts_part(a: str, b: str) -> None:
    v = first_difference({"system": a}, {"system": b})
    if a == b:
        assert v is None
    else:
        assert v is not None and v.char is not None
        assert a[: v.char] == b[: v.char]
        assert v.char == min(len(a), len(b)) or a[v.char] != b[v.char]


def test_account_sums_failed_attempts_and_labels_them() -> None:
    ok = {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 100, "output_tokens": 10}}
    cut = {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 100, "output_tokens": 3}}
    turns: list[dict[str, Any]] = [{"turn": 0, "message": ok, "failed_attempts": [{"turn": 0, "message": cut}]}]
    total = account(turns, [Request(_body(), 0.0)])
    t = turns[0]
    assert t["usage"]["output_tokens"] == 13 and t["usage"]["input_tokens"] == 200
    assert [a.get("failed", False) for a in t["attempt_costs"]] == [True, False]
    assert Decimal(str(total["cost"]["usd"])) > 0
    assert "genai-prices" in total["price_source"]
    assert ZERO + Usage(input=1, reported=True) == Usage(input=1, reported=True)


def test_the_cache_break_scenario_says_why_its_second_turn_missed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled scenario, run headless with a recording: dump --json names the first difference. (In-process, as
    tests/cli/test_cli_run.py runs the CLI: two subprocesses re-imported the SDK for nothing this test checks.)"""
    import json

    from inspector import cli

    rec = tmp_path / "cb.jsonl"
    assert cli.main(["run", "--scenario", "cache_break", "--headless", "--record", str(rec)]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert cli.main(["dump", "--json", str(rec)]) == 0
    doc = json.loads(capsys.readouterr().out)
    first, second = doc["turns"]
    assert first["cache"]["kind"] == "first"
    assert second["cache"] == {
        "kind": "written_again",
        "reason": "cache written again: system changed at char 69",
        "segment": "system",
        "char": 69,
    }
    assert second["usage"]["cache_write_tokens"] == 2048 and second["usage"]["cache_hit_rate"] == 0.0
    assert doc["total"]["cost"]["usd"] > 0 and doc["total"]["usage"]["cache_write_tokens"] == 4096


def test_an_openai_streams_cached_and_reasoning_tokens_reach_the_accounting() -> None:
    """Live (the loop, the proxy) the accounting reads the neutral message's usage: an OpenAI stream's cached and
    reasoning counts are kept there (before, only input and output were: a cached prompt was priced at full rate)."""
    from inspector.stream.openai_chat import ChatStream

    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 800},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    chunks = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
        {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o", "choices": [], "usage": usage},
    ]
    import json

    ts = ChatStream()
    ts.feed(b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n")
    ts.close()
    u = from_openai(ts.final_message()["usage"])
    assert (u.input, u.cache_read, u.output, u.reasoning) == (200, 800, 50, 30)


def test_a_replay_sends_each_turn_s_recorded_system_prompt_and_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cache_break changes the time in its system prompt on turn 2: the replay sent the first request's system
    prompt (and tools) every turn, so its cache verdict read 'prefix unchanged (evicted early...)' where the run's and dump's
    read 'system changed at char 69'."""
    import json

    from inspector import cli

    rec = tmp_path / "cb.jsonl"
    assert cli.main(["run", "--scenario", "cache_break", "--headless", "--record", str(rec)]) == 0
    capsys.readouterr()
    assert cli.main(["replay", str(rec), "--headless", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    sent = [o["body"]["system"][0]["text"][-6:] for o in lines if o.get("type") == "attempt_started"]
    assert sent == ["09:14.", "09:15."]
    costs = [o for o in lines if o.get("type") == "turn_cost"]
    assert costs[1]["cache"]["reason"] == "cache written again: system changed at char 69"
    # its tools too: a tool added on turn 2 (the replay sent the first request's tools on every turn)
    entries = [json.loads(x) for x in rec.read_text().splitlines()]
    for e in entries:
        if e.get("kind") == "request" and e.get("turn") == 1:
            e["body"]["tools"].append({"name": "get_time", "input_schema": {"type": "object"}})
    rec.write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert cli.main(["replay", str(rec), "--headless", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    costs = [o for o in lines if o.get("type") == "turn_cost"]
    assert costs[1]["cache"]["reason"] == "cache written again: tools changed: 'get_time' added (tool 1)"


def test_a_replay_s_ttl_verdict_takes_the_recorded_time_between_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Turn 2 sent 400 s after turn 1 (the cache's 5 min had run out): dump said 'TTL expired: 6.7 min', the replay
    (at --speed max, its own clock) 'prefix unchanged (evicted early, ...)'."""
    import json

    from inspector import cli

    rec = tmp_path / "ttl.jsonl"
    assert cli.main(["run", "--scenario", "cache_break", "--headless", "--record", str(rec)]) == 0
    entries = [json.loads(x) for x in rec.read_text().splitlines()]
    first = next(e for e in entries if e.get("kind") == "request")
    later = False
    for e in entries:
        if e.get("kind") == "request" and e.get("turn") == 1:
            e["body"]["system"] = first["body"]["system"]  # (the same prefix: only the time can explain the miss)
            later = True
        if later and e.get("kind") in ("request", "obs") and isinstance(e.get("t"), float):
            e["t"] += 400.0
    rec.write_text("".join(json.dumps(e) + "\n" for e in entries))
    capsys.readouterr()
    assert cli.main(["dump", "--json", str(rec)]) == 0
    recorded = json.loads(capsys.readouterr().out)["turns"][1]["cache"]["reason"]
    assert recorded.startswith("cache written again: TTL expired: 6.7 min")
    assert cli.main(["replay", str(rec), "--headless", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [o["cache"]["reason"] for o in lines if o.get("type") == "turn_cost"][1] == recorded

"""Conversations in the fold: per conversation model, turns, state, tokens; one conversation's view of the panes."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.state.conversations import (
    FAILED,
    FINISHED,
    STREAMING,
    WAITING_TOOLS,
    ConversationTable,
)
from inspector.state.convfilter import ConversationFilter
from inspector.state.fold import DashboardState
from inspector.state.travel import History
from inspector.testing.conversations import (
    interleaved_conversations,
    replayed_conversations,
    two_cached_conversations,
    with_the_same_tool_ids,
)
from inspector.testing.hyp import examples
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.widgets.tools import turn_bars

# c1 finishes, c2 stops with its three tools running (waiting), c3 is cut while its tool JSON streams
OBS = interleaved_conversations(3, stops={1: "turn1", 2: "mid_tool_json"}, parents={2: "c1"})


def fold(observations: list[O.Observation]) -> DashboardState:
    return DashboardState().apply_all(observations)


def test_three_interleaved_conversations_give_three_entries() -> None:
    s = fold(OBS)
    table = s.conversations
    assert [c.id for c in table] == ["c1", "c2", "c3"] and table.newest == "c3"
    c1, c2, c3 = (table.by_id[c] for c in ("c1", "c2", "c3"))
    assert c1.turns == [0, 3] and c2.turns == [1] and c3.turns == [2]  # global turns, interleaved
    assert c1.model == c2.model == c3.model == "claude-sonnet-4-5"
    assert c1.state == FINISHED and c2.state == WAITING_TOOLS and c3.state == STREAMING
    assert c3.parent == "c1" and c1.parent is None
    assert table.streaming == 1
    # c1's tokens are the whole parse_date session's (each turn's last usage); the others a part of it
    alone = fold(parse_date_observations())
    assert (c1.tokens_in, c1.tokens_out) == alone.tokens() == (1850 + 2630, 187 + 164)
    assert (c2.tokens_in, c2.tokens_out) == (1850, 187)
    assert c3.tokens_in == 1850 and c3.tokens_out < 187
    assert c1.t_last > c1.t_start and c3.t_last >= c3.t_start


def test_selecting_one_filters_the_panes_rows_to_its_turns() -> None:
    whole = fold(OBS)
    for cid in ("c1", "c2", "c3"):
        turns = set(whole.conversations.turns_of(cid))
        view = ConversationFilter(cid).apply_all(OBS).state
        ev = view.events
        assert ev and {ev.turn[i] for i in range(len(ev))} == turns  # SSE rows and markers
        assert view.block_order and {k[0] for k in view.block_order} == turns
        assert view.tool_order and {view.tools[t].turn for t in view.tool_order} <= turns  # (turn 2 calls none)
        assert all(k[0] == cid and k[1].endswith(f"_{cid}") for k in view.tool_order)
        keys = [item[1] for item in view.transcript if item[0] in ("text", "thinking", "block")]
        assert keys and {k[0] for k in keys} == turns  # the assistant pane
        assert set(view.turns.keys()) == turns
        assert view.status.source == whole.status.source  # what belongs to no turn is kept
    c1 = ConversationFilter("c1").apply_all(OBS).state
    alone = fold(parse_date_observations())
    assert c1.status.events == alone.status.events and c1.tokens() == alone.tokens()


def test_side_requests_are_listed_with_their_conversation_or_as_other_requests() -> None:
    side: list[O.Observation] = [
        O.ExchangeForwarded(9.0, "POST", "/v1/messages/count_tokens", 200, 10, "complete", "c2", "count_tokens"),
        O.ExchangeForwarded(9.1, "GET", "/v1/models", 200, 10, "complete", None, "GET /v1/models"),
    ]
    s = fold(OBS + side)
    assert s.conversations.by_id["c2"].side_requests == 1 and s.conversations.other_requests == 1
    assert s.conversations.by_id["c2"].turns == [1]  # never a turn
    assert len(s.turns) == 4


def test_a_failed_attempt_is_the_failed_state_and_a_retry_counts_once() -> None:
    s = fold(interleaved_conversations(2, variants={1: "overloaded_fatal"}))
    c2 = s.conversations.by_id["c2"]
    assert c2.state == FAILED and c2.attempts >= 2
    assert s.conversations.by_id["c1"].state == FINISHED


def test_a_single_session_without_the_proxy_has_no_conversations() -> None:
    s = fold(parse_date_observations())
    assert len(s.conversations) == 0 and s.conversations.other_requests == 0


def test_checkpoints_copy_the_table() -> None:
    h = History()
    live = DashboardState()
    h.follow(live)
    for o in OBS:
        h.append(o)
        live.apply(o)
    early = h.state_at(3)
    assert len(early.conversations) <= 3 and early.conversations.by_id["c1"].tokens_in <= 1850
    assert live.conversations.by_id["c1"].tokens_in == 1850 + 2630
    copy = live.copy()
    copy.conversations.by_id["c1"].tokens_in = 0
    assert live.conversations.by_id["c1"].tokens_in == 1850 + 2630


def shuffled_conversations(k: int, rnd: random.Random) -> list[O.Observation]:
    """k conversations' observations (their turns), merged in a random order that keeps each one's own order."""
    per = [
        [o for o in interleaved_conversations(k) if (turn := getattr(o, "turn", None)) is not None and turn % k == j]
        for j in range(k)
    ]
    merged: list[O.Observation] = []
    cursors = [0] * k
    while any(cursors[j] < len(per[j]) for j in range(k)):
        j = rnd.choice([j for j in range(k) if cursors[j] < len(per[j])])
        merged.append(per[j][cursors[j]])
        cursors[j] += 1
    return merged


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(1, 6), st.randoms(use_true_random=False))
def test_any_interleaving_gives_each_conversation_its_own_turns(k: int, rnd: random.Random) -> None:
    """Whatever order the conversations' observations arrive in (each in its own order), each entry and each
    filtered view count only that conversation's turns and tokens."""
    merged = shuffled_conversations(k, rnd)
    table = ConversationTable()
    for o in merged:
        table.apply(o)
    assert len(table) == k
    for j in range(k):
        c = table.by_id[f"c{j + 1}"]
        assert c.turns == [j, k + j] and c.state == FINISHED
        assert (c.tokens_in, c.tokens_out) == (1850 + 2630, 187 + 164)
        view = ConversationFilter(c.id).apply_all(merged).state
        assert view.tokens() == (1850 + 2630, 187 + 164)


def test_a_filter_started_at_the_conversations_first_observation_equals_the_whole_fold() -> None:
    """(What follow-newest does: it starts the new conversation's view at its first observation, seeded.)"""
    whole = fold(OBS)
    for cid in ("c1", "c2", "c3"):
        first = whole.conversations.by_id[cid].first_obs
        assigned = OBS[first]
        assert type(assigned) is O.ConversationAssigned and assigned.conversation == cid
        seed = fold(OBS[:first])
        late = ConversationFilter(cid, seed).apply_all(OBS[first:]).state
        full = ConversationFilter(cid).apply_all(OBS).state
        assert late.status.source == full.status.source and late.status.loop_state == full.status.loop_state
        assert late.status.events == full.status.events and late.block_order == full.block_order
        assert late.tool_order == full.tool_order and late.tokens() == full.tokens()


def test_a_replay_of_many_conversations_numbers_their_turns_one_after_the_other() -> None:
    """`inspector replay` runs each conversation through its own loop; on the bus c2's turns follow c1's (2, 3),
    as the proxy numbers a session's turns, so the whole session's view keeps both conversations' blocks."""
    obs = replayed_conversations(2)
    s = fold(obs)
    c1, c2 = s.conversations.by_id["c1"], s.conversations.by_id["c2"]
    assert (c1.turns, c2.turns) == ([0, 1], [2, 3])
    assert len(s.block_order) == 2 * len(fold(parse_date_observations()).block_order)
    assert c1.state == c2.state == FINISHED
    assert (c1.tokens_in, c1.tokens_out) == (c2.tokens_in, c2.tokens_out) == (1850 + 2630, 187 + 164)
    alone = fold(parse_date_observations())
    for cid in ("c1", "c2"):
        view = ConversationFilter(cid).apply_all(obs).state
        assert view.status.events == alone.status.events  # its own events only, not the other's
        assert view.tool_order and all(k[0] == cid and k[1].endswith(f"_{cid}") for k in view.tool_order)


def test_a_views_event_numbers_map_to_the_sessions_events() -> None:
    """The detail view and time travel need the session's event of a view's row: `event_map` / `events_of`."""
    h = History()
    for o in OBS:
        h.append(o)
    for cid in ("c1", "c2", "c3"):
        cf = ConversationFilter(cid).apply_all(OBS)
        view = cf.state
        events = cf.events_of(h)
        assert events.event_count == view.status.events == len(cf.event_map)
        for local in range(1, view.status.events + 1):
            row = view.events.event_rows[local - 1]
            obs = events.observations[events.event_pos[local - 1]]
            assert type(obs) is O.SSEEventSeen and obs.turn == view.events.turn[row]
            assert obs.sse.seq == view.events.seq[row]
            g = cf.session_event(local)
            assert g is not None and h.observations[h.event_pos[g - 1]] is obs
        assert cf.session_event(0) is None and cf.session_event(view.status.events + 1) is None
    # started at the conversation's first observation, the numbers are the same
    whole = fold(OBS)
    first = whole.conversations.by_id["c3"].first_obs
    before = sum(type(o) is O.SSEEventSeen for o in OBS[:first])
    late = ConversationFilter("c3", whole, before).apply_all(OBS[first:])
    assert list(late.event_map) == list(ConversationFilter("c3").apply_all(OBS).event_map)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(0, len(OBS) - 1), max_size=40, unique=True), st.randoms(use_true_random=False))
def test_the_table_never_raises_and_stays_consistent_when_observations_are_dropped_or_repeated(
    drop: list[int], rnd: random.Random
) -> None:
    """Dropped, repeated or out-of-place observations (a cut recording, a crashed proxy) never raise; the counts the
    list shows stay the sums of what each conversation holds."""
    obs = [o for i, o in enumerate(OBS) if i not in set(drop)]
    for _ in range(5):  # a few observations again, somewhere later
        i = rnd.randrange(len(obs))
        obs.insert(rnd.randrange(i, len(obs) + 1), obs[i])
    obs.append(O.ConversationAssigned(99.0, 7, "c9", 0, 3, "retry", "nobody"))  # an attempt of an unknown turn
    obs.append(O.MessageUpdated(99.1, 7, 3, None, {"input_tokens": "many", "output_tokens": True}))  # bad usage
    table = fold(obs).conversations
    assert table.streaming == sum(1 for c in table if c.open_attempt is not None)
    for c in table:
        assert c.tokens_in == sum(v[0] for v in c.turn_usage.values()) >= 0
        assert c.tokens_out == sum(v[1] for v in c.turn_usage.values()) >= 0
        assert c.state in ("streaming", "waiting for tools", "idle", "finished", "failed")
        assert len(set(c.turns)) == len(c.turns)
    assert table.by_id["c9"].tokens_in == 0 and table.by_id["c9"].parent == "nobody"


# ------------------------------------------------------------------ the same tool ids in two conversations (serve)


def test_two_conversations_with_the_same_tool_ids_keep_a_row_each() -> None:
    """c1 ran its three tools; c2 (the same tool ids) is still running its: six rows, each with its own state,
    result and times, keyed by (conversation, tool id); the turn, the transcript and the timeline bars follow."""
    obs = with_the_same_tool_ids(interleaved_conversations(2, stops={1: "tools_running"}))
    s = fold(obs)
    assert len(s.tools) == len(s.tool_order) == 6
    ids = [k[1] for k in s.tool_order if k[0] == "c1"]
    assert len(ids) == 3 and [k[1] for k in s.tool_order if k[0] == "c2"] == ids
    for tid in ids:
        one, two = s.tools[("c1", tid)], s.tools[("c2", tid)]
        assert (one.conversation, two.conversation) == ("c1", "c2") and s.tool(tid, "c2") is two
        assert one.turn in s.conversations.turns_of("c1") and two.turn in s.conversations.turns_of("c2")
        assert one.state == "succeeded" and one.result_summary.startswith("c1: ")
        assert two.state == "running" and not two.result_summary and two.t_finished is None
        assert two.t_created > one.t_created and one.t_finished is not None  # (c2 runs 10 ms after c1)
        assert [h[0] for h in one.history][-1] == "succeeded" and [h[0] for h in two.history][-1] == "running"
    tool_items = [item[1] for item in s.transcript if item[0] == "tool"]
    assert tool_items == s.tool_order  # one transcript line per row
    for cid in ("c1", "c2"):
        turn = s.conversations.turns_of(cid)[0]
        assert [s.tools[k].conversation for k in s.turns[turn].tools] == [cid] * 3
        bars, _saved = turn_bars(s, turn, s.status.t_last)
        assert [b.label for b in bars[1:]] == [s.tools[(cid, t)].name for t in ids]
    # a conversation's own view keys its rows by it too, with the same entries as the session's
    view = ConversationFilter("c2").apply_all(obs).state
    assert view.tool_order == [("c2", t) for t in ids]
    assert all(view.tools[k].state == "running" for k in view.tool_order)


def test_a_tool_result_sent_back_is_matched_in_its_own_conversation() -> None:
    """The tool_result blocks a request carries are kept by (conversation, tool_use_id): c2's request does not
    overwrite c1's, and an is_error result fails only its own conversation's call."""

    def req(t: float, turn: int, cid: str, content: str, is_error: bool) -> list[O.Observation]:
        block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content, "is_error": is_error}
        body = {"model": "m", "messages": [{"role": "user", "content": [block]}]}
        return [
            O.ConversationAssigned(t, turn, cid, 1, 0, "continues"),
            O.TurnStarted(t, turn),
            O.AttemptStarted(t, turn, 0, "POST", "http://x/v1/messages", {}, body),
        ]

    def call(t: float, turn: int, cid: str) -> list[O.Observation]:
        return [
            O.ConversationAssigned(t, turn, cid, 0, 0, "new"),
            O.TurnStarted(t, turn),
            O.ToolStateChanged(
                t, turn, 0, "toolu_1", "read_file", 1, "running", {"p": 1}, None, None, {}, inferred=True
            ),
        ]

    obs = call(0.0, 0, "c1") + call(0.1, 1, "c2") + req(1.0, 2, "c1", "denied", True) + req(1.1, 3, "c2", "ok", False)
    s = fold(obs)
    assert s.sent_results[("c1", "toolu_1")]["content"] == "denied"
    assert s.sent_results[("c2", "toolu_1")]["content"] == "ok"
    c1, c2 = s.tool("toolu_1", "c1"), s.tool("toolu_1", "c2")
    assert c1 is not None and c1.is_error and c1.error == "denied"
    assert c2 is not None and not c2.is_error and c2.error is None


# ------------------------------------------------------------------ a turn is compared with its own conversation's


def test_a_turns_cache_verdict_compares_it_with_its_own_conversations_previous_turn() -> None:
    """Before: turn 1 (c2's first) was compared with turn 0 (c1's) and turn 2 (c1's second) with turn 1 (c2's):
    "system changed" both times. Each is compared with its own conversation's turn now."""
    from inspector.state.costs import turn_cost

    s = fold(two_cached_conversations())
    assert [s.previous_turn(t) for t in range(4)] == [None, None, 0, 1]
    verdicts = {t: turn_cost(s, t) for t in range(4)}
    assert all(v is not None for v in verdicts.values())
    for t in (0, 1):  # each conversation's first turn
        assert verdicts[t].cache.kind == "first", verdicts[t].cache  # type: ignore[union-attr]
    for t in (2, 3):  # same system, messages extended: the prefix is unchanged (not "system changed")
        cache = verdicts[t].cache  # type: ignore[union-attr]
        assert cache.kind == "written_again" and cache.segment == "prefix", cache
    # one conversation's own view gives the same verdicts
    view = ConversationFilter("c2").apply_all(two_cached_conversations()).state
    assert turn_cost(view, 3).cache == verdicts[3].cache  # type: ignore[union-attr]
    # a session without conversations compares with the session's previous turn, as before
    plain = fold([o for o in two_cached_conversations() if type(o) is not O.ConversationAssigned])
    assert [plain.previous_turn(t) for t in range(4)] == [None, 0, 1, 2]
    assert turn_cost(plain, 2).cache.segment == "system"  # type: ignore[union-attr]


STOPS = ["turn1", "tools_running", "mid_tool_json", None]


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.sampled_from(STOPS), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_any_interleaving_of_conversations_with_the_same_tool_ids_keeps_each_ones_calls(
    stops: list[str | None], rnd: random.Random
) -> None:
    """k conversations using the same tool ids, each stopped somewhere, interleaved in any order: the session's rows
    of a conversation are exactly that conversation's own view's rows (states, results, inputs, times), and no row
    mixes two conversations."""
    k = len(stops)
    obs = with_the_same_tool_ids(
        interleaved_conversations(k, stops={j: stop for j, stop in enumerate(stops) if stop is not None})
    )
    per = [[o for o in obs if (turn := getattr(o, "turn", None)) is not None and turn % k == j] for j in range(k)]
    merged: list[O.Observation] = [obs[0]]
    cursors = [0] * k
    while any(cursors[j] < len(per[j]) for j in range(k)):
        j = rnd.choice([j for j in range(k) if cursors[j] < len(per[j])])
        merged.append(per[j][cursors[j]])
        cursors[j] += 1
    s = fold(merged)
    assert len(s.tools) == len(s.tool_order) == len(set(s.tool_order))
    for j in range(k):
        cid = f"c{j + 1}"
        view = ConversationFilter(cid).apply_all(merged).state
        mine = [key for key in s.tool_order if key[0] == cid]
        assert view.tool_order == mine
        for key in mine:
            a, b = s.tools[key], view.tools[key]
            assert (a.conversation, a.turn % k) == (cid, j)
            assert (a.state, a.result_summary, a.input, a.history) == (b.state, b.result_summary, b.input, b.history)
            assert not a.result_summary or a.result_summary.startswith(f"{cid}: ")


def _item_turn(state: DashboardState, item: tuple[Any, ...]) -> int | None:
    """The turn a transcript item belongs to (None: the session's own, e.g. the loop's end)."""
    kind = item[0]
    if kind in ("text", "thinking", "block"):
        return int(item[1][0])
    if kind == "tool":
        return state.tools[item[1]].turn
    if kind == "note" and item[1][0] in ("try", "retry", "attempt_ended"):
        return int(item[1][1])
    return None


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(2, 5), st.randoms(use_true_random=False))
def test_any_interleaving_shows_every_transcript_item_under_its_own_turns_rule(k: int, rnd: random.Random) -> None:
    """Concurrent conversations interleave their turns (a proxied session): each text, tool and note of the
    transcript (the Assistant pane) comes after a rule of its own turn, never under the rule of a turn that merely
    started later (3 concurrent conversations put all three first turns' text under the third's rule)."""
    merged = shuffled_conversations(k, rnd)
    state = fold(merged)
    rule = None
    items = 0
    for item in state.transcript:
        if item[0] == "turn":
            rule = item[1]
            continue
        turn = _item_turn(state, item)
        if turn is not None:
            items += 1
            assert turn == rule, (item, rule)
    assert items >= 2 * k  # every conversation's two turns have their text or tools in it
    assert {it[1] for it in state.transcript if it[0] == "turn"} == set(range(2 * k))  # every turn has its rule


def test_a_conversation_whose_api_reports_no_usage_shows_no_token_counts() -> None:
    """A chat stream sends usage only with stream_options.include_usage: its conversation's row says so, never
    "in 0 out 0"; a reported usage shows its counts."""
    from inspector.tui.widgets.conversations import conversation_text

    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    obs: list[O.Observation] = [
        O.ConversationAssigned(0.0, 0, "c1", 0, 0, "new"),
        O.TurnStarted(0.0, 0),
        O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/chat/completions", {}, body),
        O.MessageStarted(0.1, 0, 0, {"id": "chatcmpl-1", "model": "gpt-4o-mini", "usage": {}}),
        O.MessageUpdated(0.2, 0, 0, "end_turn", {}),
        O.AttemptEnded(0.3, 0, 0, "complete", None, "text_finish"),
        O.TurnEnded(0.3, 0, "text_finish", "end_turn", {}),
    ]
    c = fold(obs).conversations.by_id["c1"]
    assert not c.turn_usage and conversation_text(c, 1.0, False).plain.rstrip().endswith("no usage")
    reported = O.TurnEnded(0.4, 0, "text_finish", "end_turn", {"input_tokens": 12, "output_tokens": 3})
    c = fold([*obs, reported]).conversations.by_id["c1"]
    assert "in 12 out 3" in conversation_text(c, 1.0, False).plain


def _replayed(path: str) -> list[O.Observation]:
    """What a replay of a recording publishes, at max speed."""
    import asyncio
    import math

    from inspector.sessions import sources

    session = sources.replay_session(path, speed=math.inf)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    asyncio.run(session.run())
    return seen


def test_a_replay_of_many_conversations_is_not_finished_until_its_last_loop(tmp_path: Any) -> None:
    """A recording of many conversations replays one loop per conversation. The first loop's end left the state
    "finished" for the rest of the replay (tried as a new user: replay of a watch recording; the Assistant pane said
    "finished · 712 turns" and the Diagnostics line "the stream was well-formed", past tense, while c41 streamed);
    and the conversation list said "20 turns" of a conversation at its turn 12 (a replay assigns a conversation's
    turns before its loop runs them): it counts the turns that came."""
    from inspector.testing.recordings import proxy_recording

    seen = _replayed(proxy_recording(tmp_path / "three.jsonl"))
    state = DashboardState()
    loops = 0
    for obs in seen:
        state.apply(obs)
        if type(obs) is O.LoopStarted:
            loops += 1
            assert state.status.finished is None, loops
            if loops == 2:  # c1 has run, c2's turns are assigned, none came yet
                c1, c2 = state.conversations.by_id["c1"], state.conversations.by_id["c2"]
                assert (len(c1.turns), c1.started) == (2, 2)
                assert (len(c2.turns), c2.started) == (2, 0)
        elif type(obs) is O.TurnStarted and loops == 2:
            c2 = state.conversations.by_id["c2"]
            own = c2.own_turn(obs.turn)
            assert own is not None and c2.started == own + 1  # (one more with each turn that comes)
    assert loops == 3
    assert state.status.finished == "finished"
    assert [c.started for c in state.conversations] == [2, 2, 2]


def test_a_session_of_several_loops_ends_as_its_first_loop_that_did_not_finish() -> None:
    """As the replay's result (`ConversationReplay.run`): the session's end is its first loop that did not finish,
    not the last loop's "finished"; between two loops the session is not finished."""
    state = DashboardState()
    obs: list[O.Observation] = [
        O.LoopStarted(0.0, {"conversation": "c1"}, "m", "p1"),
        O.LoopFinished(1.0, "finished", 1, [], [], None),
        O.LoopStarted(1.0, {"conversation": "c2"}, "m", "p2"),
        O.LoopFinished(2.0, "error", 1, [], [], "upstream said 529"),
        O.LoopStarted(2.0, {"conversation": "c3"}, "m", "p3"),
    ]
    ends = []
    for o in obs:
        state.apply(o)
        ends.append((state.status.finished, state.status.error))
    assert ends == [
        (None, None),
        ("finished", None),
        (None, None),
        ("error", "upstream said 529"),
        (None, "upstream said 529"),
    ]
    state.apply(O.LoopFinished(3.0, "finished", 1, [], [], None))
    assert (state.status.finished, state.status.error) == ("error", "upstream said 529")
    copy = state.copy()
    copy.apply(O.LoopStarted(4.0, {"conversation": "c4"}, "m", "p4"))
    copy.apply(O.LoopFinished(5.0, "finished", 1, [], [], None))
    assert copy.status.finished == "error"  # (the copy keeps the failed loop)

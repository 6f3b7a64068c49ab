"""Requests grouped into conversations: prefix rule, session headers, retries by body, side requests, subagents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from inspector.net.conversations import Assignment, Conversations, chain

SYSTEM = "You are a helpful agent."
TOOLS: list[dict[str, Any]] = [{"name": "get_weather", "input_schema": {"type": "object"}}]


Message = dict[str, Any]


def body(
    messages: list[Message], system: str = SYSTEM, tools: list[dict[str, Any]] = TOOLS, stream: bool = True
) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "system": system, "tools": tools, "messages": messages, "stream": stream}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str, tool_id: str | None = None) -> Message:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tool_id:
        content.append({"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": text}})
    return {"role": "assistant", "content": content}


def result(tool_id: str) -> Message:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "18 C"}]}


def post(
    c: Conversations, b: object, headers: Mapping[str, str] | None = None, path: str = "/v1/messages"
) -> Assignment:
    return c.assign("POST", path, headers or {}, b)


def test_three_interleaved_conversations_keep_their_turns() -> None:
    c = Conversations()
    hist = {city: [user(f"Weather in {city}?")] for city in ("Paris", "Rome", "Oslo")}
    first = {city: post(c, body(h)) for city, h in hist.items()}
    assert {a.turn for a in first.values()} == {0} and len({a.conversation for a in first.values()}) == 3
    for city in ("Oslo", "Paris", "Rome"):  # answers arrive in another order
        hist[city] += [assistant(city, f"toolu_{city}"), result(f"toolu_{city}")]
    second = {city: post(c, body(h)) for city, h in reversed(list(hist.items()))}
    for city in hist:
        assert second[city].conversation == first[city].conversation
        assert (second[city].turn, second[city].attempt, second[city].how) == (1, 0, "continues")


def test_an_identical_resend_is_the_next_attempt_unless_the_turn_ended_well() -> None:
    c = Conversations()
    b = body([user("hello")])
    a0 = post(c, b)
    a1 = post(c, b)  # the client closed a failed stream and resent at once: the close may not be seen yet
    assert (a1.conversation, a1.turn, a1.attempt, a1.how) == (a0.conversation, 0, 1, "retry")
    c.ended(a1.conversation, 0, 1, ok=True)
    a2 = post(c, b)  # the same request after a complete answer: another conversation (e.g. a second run)
    assert a2.conversation != a0.conversation and a2.how == "new"


def test_a_session_header_wins_over_the_prefix_rule() -> None:
    c = Conversations()
    b = body([user("same prompt")])
    a = post(c, b, {"x-inspector-session": "agent-1"})
    b2 = post(c, b, {"x-inspector-session": "agent-2"})
    assert a.conversation == "agent-1" and b2.conversation == "agent-2" and b2.turn == 0
    later = post(c, body([user("unrelated"), assistant("x")]), {"x-claude-code-session-id": "s9"})
    assert later.conversation == "s9"


def test_side_requests_are_never_turns() -> None:
    c = Conversations()
    a = post(c, body([user("hi")]))
    ct = post(c, body([user("hi"), assistant("ok"), user("more")], stream=False), path="/v1/messages/count_tokens")
    assert ct.side == "count_tokens" and ct.conversation == a.conversation and ct.turn == -1
    title = post(c, {"model": "claude-haiku-4-5", "messages": [user("title for: hi")], "max_tokens": 20})
    assert title.side == "not streamed" and title.conversation is None
    models = c.assign("GET", "/v1/models", {}, None)
    assert models.side == "GET /v1/models"
    nxt = post(c, body([user("hi"), assistant("ok"), user("more")]))
    assert (nxt.conversation, nxt.turn) == (a.conversation, 1)  # side requests did not move the conversation
    assert c.other_requests == 2


def test_moved_cache_breakpoints_and_dropped_thinking_do_not_split_a_conversation() -> None:
    c = Conversations()
    m0 = {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]}
    a = post(c, body([m0]))
    reply = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "ok"}],
    }
    m0_moved = {"role": "user", "content": [{"type": "text", "text": "go"}]}
    reply_without_thinking = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    b = post(c, body([m0_moved, reply_without_thinking, user("next")]))
    assert b.conversation == a.conversation and b.turn == 1
    assert reply  # (the shape a harness may send instead; the same key either way)


def test_a_subagent_started_by_a_tool_call_names_its_parent() -> None:
    c = Conversations()
    parent = post(c, body([user("Refactor the parser")]))
    task = "Find every caller of parse_date in src/ and list them"
    c.tool_call(parent.conversation, '{"prompt": "' + task + '"}')
    child = post(c, body([user(task)], system="You are a subagent."))
    assert child.conversation != parent.conversation and child.parent == parent.conversation


def test_memory_is_bounded() -> None:
    c = Conversations(max_conversations=50)
    for i in range(500):
        post(c, body([user(f"prompt {i}")]))
    assert len(c.by_id) == 50 and len(c.tips) == 50


def test_chain_is_a_prefix_chain() -> None:
    msgs = [user("a"), assistant("b"), user("c")]
    full, short = chain(body(msgs)), chain(body(msgs[:2]))
    assert full[:3] == short and len(full) == 4


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[int, int, int, bool]]:
    """K conversations with distinct prompts, each of T turns, some turns retried, interleaved in any order that
    keeps each conversation's own order."""
    k = draw(st.integers(1, 6))
    plans: list[tuple[int, int, list[int]]] = []
    for i in range(k):
        turns = draw(st.integers(1, 5))
        retries = [draw(st.integers(0, 2)) for _ in range(turns)]
        plans.append((i, turns, retries))
    steps: list[tuple[int, int, int, bool]] = []
    for i, turns, retries in plans:
        for t in range(turns):
            for a in range(retries[t] + 1):
                steps.append((i, t, a, a == retries[t]))
    order = draw(st.permutations(range(len(steps))))
    # a stable merge: keep each conversation's steps in order, interleave by the drawn permutation's ranks
    per: dict[int, list[tuple[int, int, int, bool]]] = {}
    for s in steps:
        per.setdefault(s[0], []).append(s)
    merged: list[tuple[int, int, int, bool]] = []
    cursor = {i: 0 for i in per}
    for j in order:
        i = steps[j][0]
        merged.append(per[i][cursor[i]])
        cursor[i] += 1
    return merged


@given(sessions(), st.sampled_from(["same", "system", "tools"]))
def test_any_interleaving_is_grouped_exactly(steps: list[tuple[int, int, int, bool]], head: str) -> None:
    """...also when every turn changes the system prompt (the time in it) or the tools (one added per turn)."""
    c = Conversations()
    ids: dict[int, str | None] = {}
    for i, t, a, last in steps:
        msgs = [user(f"conversation {i} starts here")]
        for j in range(t):
            msgs += [assistant(f"{i}.{j}", f"toolu_{i}_{j}"), result(f"toolu_{i}_{j}")]
        system = f"{SYSTEM} The time is 09:{t:02d}." if head == "system" else SYSTEM
        tools = [*TOOLS, *({"name": f"tool_{j}"} for j in range(t))] if head == "tools" else TOOLS
        got = post(c, body(msgs, system, tools))
        if t == 0 and a == 0:
            assert got.how == "new"
            ids[i] = got.conversation
        assert (got.conversation, got.turn, got.attempt) == (ids[i], t, a)
        if a == 0 and t > 0:
            assert got.how == ("continues" if head == "same" else "continues_changed")
        c.ended(got.conversation, t, a, ok=last)


def test_a_changed_system_prompt_continues_only_a_conversation_whose_messages_it_extends() -> None:
    """The messages alone decide when the system prompt or tools changed, and only a proper extension counts: the
    same first question under another system prompt (an eval comparing two prompts) is another conversation."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    a1 = post(c, body(q, "prompt A"))
    b1 = post(c, body(q, "prompt B"))
    assert (a1.how, b1.how) == ("new", "new") and a1.conversation != b1.conversation
    # both wait at the same messages: the tool call each one's turn streamed (the proxy tells) says whose is whose
    c.streamed_tool(a1.conversation, "toolu_a")
    c.streamed_tool(b1.conversation, "toolu_b")
    b2 = post(c, body([*q, assistant("B", "toolu_b"), result("toolu_b")], "prompt B, 09:15"))
    assert (b2.conversation, b2.turn, b2.how) == (b1.conversation, 1, "continues_changed")
    a2 = post(c, body([*q, assistant("A", "toolu_a"), result("toolu_a")], "prompt A"))
    assert (a2.conversation, a2.turn, a2.how) == (a1.conversation, 1, "continues")
    other = post(c, body([user("Weather in Rome?"), assistant("R", "toolu_r"), result("toolu_r")], "prompt B"))
    assert other.how == "new"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["thinking", "text", "cache_control", 'a"b']),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "text", "cache_control", "content", "thinking", "x"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@given(_JSON)
@example({"type": None, "content": [{"type": []}]})  # found by CI: an unhashable block type
def test_the_fast_message_key_equals_the_walked_one(message: object) -> None:
    """The key is serialized once in C and walked in Python only when it may hold a cache_control mark or a
    thinking block: the result is the same as always walking it."""
    from inspector.net.conversations import _message_key, _slow_key

    assert _message_key(message) == _slow_key(message)


def test_a_block_whose_type_is_not_a_string_is_kept_and_never_raises() -> None:
    """A client may send any JSON as a block's type (a list, an object): the key keeps the block, as it is not a
    thinking block, and the request is grouped like any other."""
    c = Conversations()
    odd = {"role": "user", "content": [{"type": ["thinking"]}, {"type": {"a": 1}}, {"type": "thinking"}]}
    first = post(c, body([user("start"), odd]))
    assert first.how == "new"
    again = post(c, body([user("start"), odd, assistant("ok", "toolu_x"), result("toolu_x")]))
    assert (again.conversation, again.turn) == (first.conversation, 1)
    assert chain(body([odd])) != chain(body([{"role": "user", "content": [{"type": "thinking"}]}]))


def test_a_history_nested_too_deep_is_grouped_as_opaque_never_raises() -> None:
    """A client can send a message nested 1,000 levels deep (orjson reads it): grouping must not raise
    RecursionError inside the proxy's handler; the request is compared as opaque."""
    import orjson

    deep = orjson.loads(b"[" * 1000 + b"]" * 1000)
    c = Conversations()
    a = post(c, body([user("start"), {"role": "user", "content": deep}]))
    assert a.side is None and a.how == "new"
    assert chain(body([{"role": "user", "content": deep}])) == chain(None)


def test_two_conversations_asking_the_same_first_question_keep_their_own_turns() -> None:
    """B asks A's first question once A has its answer (an eval running a task twice, staggered): both wait at the
    same previous request. A's next turn must not be taken as B's, nor B's next turn start a third conversation."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    a1 = post(c, body(q))
    c.ended(a1.conversation, 0, 0, ok=True)
    b1 = post(c, body(q))
    assert b1.how == "new" and b1.conversation != a1.conversation
    c.ended(b1.conversation, 0, 0, ok=True)
    a2 = post(c, body([*q, assistant("A", "toolu_a"), result("toolu_a")]))
    b2 = post(c, body([*q, assistant("B", "toolu_b"), result("toolu_b")]))
    assert (a2.conversation, a2.turn, a2.how) == (a1.conversation, 1, "continues")
    assert (b2.conversation, b2.turn, b2.how) == (b1.conversation, 1, "continues")


@given(st.permutations(range(4)), st.booleans())
def test_conversations_with_the_same_history_so_far_are_told_apart_by_the_tool_calls_they_streamed(
    order: list[int], changed: bool
) -> None:
    """Four runs of the same task, staggered (each first request after the previous run's ended well: all wait at
    the same history). Their second requests, in any order, each go to the run whose turn streamed the tool call
    they answer (it was always the oldest: runs swapped their turns), also when the system prompt changed."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    first = []
    for i in range(4):
        a = post(c, body(q))
        assert a.how == "new"
        c.streamed_tool(a.conversation, f"toolu_{i}")
        c.ended(a.conversation, 0, 0, ok=True)
        first.append(a.conversation)
    for i in order:
        msgs = [*q, assistant(f"run {i}", f"toolu_{i}"), result(f"toolu_{i}")]
        got = post(c, body(msgs, f"{SYSTEM} 09:15" if changed else SYSTEM))
        assert (got.conversation, got.turn) == (first[i], 1)


def test_a_rerun_against_a_deterministic_mock_is_one_new_conversation() -> None:
    """A test run twice against a server that answers the same bytes: the second run's second request equals the
    first run's (which ended well) and extends the second run's first request: it is that conversation's turn 2,
    not a third conversation."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    turn2 = [*q, assistant("Paris", "toolu_1"), result("toolu_1")]
    runs = []
    for _ in range(2):
        first = post(c, body(q))
        c.ended(first.conversation, first.turn, 0, ok=True)
        second = post(c, body(turn2))
        c.ended(second.conversation, second.turn, 0, ok=True)
        runs.append((first, second))
    (f1, s1), (f2, s2) = runs
    assert f1.conversation != f2.conversation
    assert (s1.conversation, s1.turn) == (f1.conversation, 1)
    assert (s2.conversation, s2.turn, s2.how) == (f2.conversation, 1, "continues")


def test_a_messages_thread_continued_by_previous_message_id_is_the_same_conversation() -> None:
    """The anthropic SDK's tool runner holds its history on the server (``"thread": {"type": "continue",
    "previous_message_id": ...}``) and sends only the tool results: the request continues the conversation that
    streamed that message, not a new one."""
    c = Conversations()
    first = post(c, {**body([user("Weather in Paris?")]), "thread": {"type": "create"}})
    other = post(c, body([user("Weather in Rome?")]))
    c.response_id(first.conversation, "msg_paris_1")
    c.response_id(other.conversation, "msg_rome_1")
    cont = {"type": "continue", "previous_message_id": "msg_paris_1"}
    nxt = post(c, {**body([result("toolu_1")]), "thread": cont})
    assert (nxt.conversation, nxt.turn, nxt.how) == (first.conversation, 1, "continues")
    again = post(c, {**body([result("toolu_1")]), "thread": cont})  # resent at once: a retry
    assert (again.conversation, again.turn, again.attempt, again.how) == (first.conversation, 1, 1, "retry")
    unknown = post(c, {**body([result("toolu_9")]), "thread": {"type": "continue", "previous_message_id": "msg_x"}})
    assert unknown.how == "new"


def test_a_summary_call_over_the_history_under_another_prompt_and_tools_does_not_take_the_conversation() -> None:
    """A compaction, title or judge call: the same history plus a user message, under another system prompt and
    tools. It took the conversation over ("continues_changed"), and the agent's real next turn became a new
    conversation whose tool results matched nothing (found in review)."""
    c = Conversations()
    h = [user("Fix the failing test in repo foo"), assistant("look", "t1"), result("t1")]
    main = post(c, body(h))
    summary = post(c, body([*h, user("Summarize the conversation so far.")], "You summarize conversations.", []))
    assert summary.how == "new" and summary.conversation != main.conversation
    nxt = post(c, body([*h, assistant("edit", "t2"), result("t2")]))
    assert (nxt.conversation, nxt.turn, nxt.how) == (main.conversation, 1, "continues")
    # a question about the history under another system prompt alone (same tools): a user message first, not a turn
    ask = post(c, body([*h, assistant("edit", "t2"), result("t2"), user("Was that right?")], "You are a judge."))
    assert ask.how == "new"


def test_a_retry_under_a_new_timestamp_is_the_next_attempt() -> None:
    """The time is in the system prompt, so a retry of a failed turn has the same messages under another system
    prompt: it started a new conversation, which then took every later turn (found in review)."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    a1 = post(c, body(q, "time 10:00"))
    c.ended(a1.conversation, 0, 0, ok=True)
    h = [*q, assistant("Paris", "toolu_1"), result("toolu_1")]
    a2 = post(c, body(h, "time 10:01"))
    assert (a2.conversation, a2.turn, a2.how) == (a1.conversation, 1, "continues_changed")
    c.ended(a2.conversation, 1, 0, ok=False)  # (a 529)
    again = post(c, body(h, "time 10:02"))
    assert (again.conversation, again.turn, again.attempt, again.how) == (a1.conversation, 1, 1, "retry")
    c.ended(again.conversation, 1, 1, ok=True)
    a3 = post(c, body([*h, assistant("18 C"), user("And Rome?")], "time 10:03"))
    assert (a3.conversation, a3.turn) == (a1.conversation, 2)


def test_the_tool_call_a_request_answers_wins_over_a_prefix_another_run_waits_at() -> None:
    """Staggered runs of one task with a minute-resolution time in the system prompt: run X's second request
    carries the system prompt of run Y's first (same minute) and X's tool call. The prefix rule gave it to Y (and
    Y's next to X); the conversation that streamed the call it answers is X (found in review)."""
    c = Conversations()
    q = [user("Weather in Paris?")]
    x1 = post(c, body(q, "sys 10:00"))
    c.streamed_tool(x1.conversation, "tx")
    c.ended(x1.conversation, 0, 0, ok=True)
    y1 = post(c, body(q, "sys 10:01"))
    c.streamed_tool(y1.conversation, "ty")
    c.ended(y1.conversation, 0, 0, ok=True)
    x2 = post(c, body([*q, assistant("X", "tx"), result("tx")], "sys 10:01"))
    y2 = post(c, body([*q, assistant("Y", "ty"), result("ty")], "sys 10:01"))
    assert (x2.conversation, x2.turn) == (x1.conversation, 1)
    assert (y2.conversation, y2.turn, y2.how) == (y1.conversation, 1, "continues")


def test_a_tool_id_longer_than_200_characters_still_tells_runs_apart() -> None:
    c = Conversations()
    q = [user("Weather in Paris?")]
    ids = ["t" * 250 + "a", "t" * 250 + "b"]
    runs = []
    for tid in ids:
        a = post(c, body(q))
        c.streamed_tool(a.conversation, tid)
        c.ended(a.conversation, 0, 0, ok=True)
        runs.append(a.conversation)
    got = post(c, body([*q, assistant("B", ids[1]), result(ids[1])]))
    assert got.conversation == runs[1]


def _deep(n: int) -> Any:
    v: Any = "x"
    for _ in range(n):
        v = [v]
    return v


def test_hostile_bodies_on_every_new_path_never_raise_and_tool_ids_stay_bounded() -> None:
    """What a client or a relay can send to the changed-prompt, tool-owner and split-system rules: a system prompt,
    tools or message nested as deep as orjson reads (the message key walks it), shapes the rules do not expect
    (tool_calls not a list, a call_id that is not a string, a leading system message that is not an object), and
    tool ids of a megabyte, many of them. Each is grouped (as opaque at worst), and what is kept stays bounded."""
    c = Conversations(max_conversations=4)
    q = [user("Weather in Paris?")]
    hostile: list[dict[str, Any]] = [
        body(q, system=_deep(1022)),
        body(q, tools=[{"name": "t", "input_schema": _deep(1022)}]),
        body([*q, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": _deep(1022)}]}]),
        body([*q, {"role": "assistant", "tool_calls": {"id": 1}}, {"type": "function_call", "call_id": 7}]),
        {"model": "m", "stream": True, "messages": [{"role": "system", "content": "s"}, "not an object", *q]},
        {"model": "m", "stream": True, "input": [{"role": "developer", "content": "d"}, {"type": "function_call"}]},
    ]
    for b in hostile:
        got = post(c, b)
        assert got.side is None and got.conversation is not None
    huge = ["x" * 1_000_000 + str(i) for i in range(100)]
    for i, tid in enumerate(huge):
        a = post(c, body([user(f"run {i}")]))
        c.streamed_tool(a.conversation, tid)
        nxt = post(c, body([user(f"run {i}"), assistant("a", tid), result(tid)], f"{SYSTEM} {i}"))
        assert (nxt.conversation, nxt.turn) == (a.conversation, 1)
    assert len(c.tool_ids) <= 4 * c.max and all(len(k) <= 200 for k in c.tool_ids)
    assert len(c.by_id) <= c.max and sum(map(len, c.messages_tips.values())) <= c.max


def test_a_conversation_keeps_a_bounded_model_name() -> None:
    """Each of the 10,000 conversations kept the model its last turn named, whole: a 4 MiB name grew the proxy by
    4.4 MB a conversation (a client's text, up to --max-body). Kept cut to 200 characters, as a session name."""
    c = Conversations()
    body = {"model": "m" + "x" * (1 << 20), "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    a = c.assign("POST", "/v1/messages", {}, body)
    assert a.conversation is not None
    model = c.by_id[a.conversation].model
    assert model is not None and model.startswith("mxxx") and len(model) == 200

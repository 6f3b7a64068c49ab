"""Headless progress lines of a proxy's many conversations: each turn's lines name its conversation ([c2] turn 1)
once more than one was seen; with one conversation the lines are as before."""

from __future__ import annotations

from inspector.cli.headless import ProgressPrinter
from inspector.observe import observations as O
from inspector.testing.loop import Lines


def _turn(p: ProgressPrinter, turn: int, conv: str | None, ct: int, attempt: int = 0) -> None:
    t = 0.1 * turn
    if conv is not None:
        p(O.ConversationAssigned(t, turn, conv, ct, attempt, "retry" if attempt else "new"))
    if attempt == 0:
        p(O.TurnStarted(t, turn))
    p(O.AttemptStarted(t, turn, attempt, "POST", "http://up/v1/messages", {}, {}))
    p(
        O.AttemptEnded(
            t + 0.05, turn, attempt, "cancelled" if conv == "c2" and not attempt else "complete", "gone", None
        )
    )


def test_lines_name_the_conversation_when_there_are_several() -> None:
    lines = Lines()
    p = ProgressPrinter(lines)  # type: ignore[arg-type]
    _turn(p, 0, "c1", 0)
    _turn(p, 1, "c2", 0)
    _turn(p, 1, "c2", 0, attempt=1)
    _turn(p, 2, "c1", 1)
    text = [line.split("s ", 1)[1] for line in lines.text()]
    # the first turn was printed before a second conversation existed: as before
    assert text[:2] == ["turn 1", "  attempt 1: POST http://up/v1/messages"]
    assert "[c2] turn 1 (#2)" in text
    assert "[c2]   attempt 1 cancelled: gone" in text
    assert "[c2]   attempt 2: POST http://up/v1/messages" in text
    assert "[c1] turn 2 (#3)" in text


def test_one_conversation_prints_as_before() -> None:
    with_conv, without = Lines(), Lines()
    a, b = ProgressPrinter(with_conv), ProgressPrinter(without)  # type: ignore[arg-type]
    for turn in range(3):
        _turn(a, turn, "c1", turn)
        _turn(b, turn, None, turn)
    assert with_conv.text() == without.text() and "turn 3" in " ".join(without.text())


def test_side_requests_get_a_line_each_and_are_counted_at_the_end_never_as_turns() -> None:
    """A harness's non-streamed calls, count_tokens and the like are no turns: `watch --headless` still says each
    one happened (its conversation once there are several), and the last line counts them."""
    lines = Lines()
    p = ProgressPrinter(lines)  # type: ignore[arg-type]
    p(O.ExchangeForwarded(0.1, "POST", "/v1/messages", 200, 468, "complete", None, "not streamed"))
    _turn(p, 0, "c1", 0)
    _turn(p, 1, "c2", 0, attempt=1)
    p(O.ExchangeForwarded(0.3, "POST", "/v1/messages/count_tokens", None, 0, "error", "c2", "count_tokens"))
    p(O.LoopFinished(0.4, "finished", 2, [], [], None))
    text = [line.split("s ", 1)[1] for line in lines.text()]
    assert text[0] == "POST /v1/messages -> 200 · 468 B · not a turn: not streamed"
    assert "[c2] POST /v1/messages/count_tokens -> - error · 0 B · not a turn: count_tokens" in text
    assert text[-1] == "finished after 2 turns, 2 side requests"


def test_a_replayed_conversations_retry_wait_names_it() -> None:
    """A replay of many conversations (one loop each): the loop's "retrying in 0 ms" line named no conversation,
    though every other line of that loop did."""
    lines = Lines()
    p = ProgressPrinter(lines)  # type: ignore[arg-type]
    source = {"type": "replay", "file": "r.jsonl", "conversation": "c2", "conversations": ["c1", "c2"]}
    p(O.LoopStarted(0.0, source, "claude-sonnet-4-6", None))
    p(O.LoopStateChanged(0.5, "waiting_retry", "retrying in 0 ms: idle timeout: no content for 0.5 s"))
    assert lines.text()[-1].endswith("s [c2]   retrying in 0 ms: idle timeout: no content for 0.5 s")


def test_a_tool_state_the_proxy_inferred_says_so() -> None:
    """`watch --headless` printed another harness's tool call `-> running` (at its block's stop) and `-> succeeded`
    (at the next request) as the loop's measured states are printed; they are read off the wire: marked inferred.
    The loop's own tool states print as before."""
    lines = Lines()
    p = ProgressPrinter(lines)  # type: ignore[arg-type]
    for inferred in (True, False):
        for t, state in ((0.2, "running"), (0.5, "succeeded")):
            p(
                O.ToolStateChanged(
                    t, 0, 0, "toolu_01ABCDEFGH", "get_weather", 1, state, {}, None, None, {}, inferred=inferred
                )
            )
    text = [line.split("s ", 1)[1] for line in lines.text()]
    assert text == [
        "  tool get_weather ABCDEFGH -> running (inferred: its block closed)",
        "  tool get_weather ABCDEFGH -> succeeded (inferred from the next request)",
        "  tool get_weather ABCDEFGH -> running",
        "  tool get_weather ABCDEFGH -> succeeded",
    ]


def test_a_stream_without_usage_says_so_in_words() -> None:
    """A chat stream without stream_options.include_usage sends no usage: the line said `usage {}`. It says the
    usage was not sent (yet); a usage chunk after the finish is its own line, as before."""
    lines = Lines()
    p = ProgressPrinter(lines)  # type: ignore[arg-type]
    p(O.TurnStarted(0.0, 0))
    p(O.MessageUpdated(0.1, 0, 0, "end_turn", {}))
    p(O.MessageUpdated(0.2, 0, 0, "end_turn", {"input_tokens": 3, "output_tokens": 5}))
    text = [line.split("s ", 1)[1] for line in lines.text()]
    assert "  stop_reason end_turn usage not sent (yet)" in text
    assert any(t.startswith("  usage ") and "output_tokens" in t for t in text)
    assert not any("usage {}" in t for t in text)

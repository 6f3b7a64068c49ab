"""`inspector replay` of a proxy recording: many conversations are replayed one after the other, each through its
own loop, their lines named ([c2] turn 1); an attempt the client closed and resent is replayed as a retry of the
same turn, not as the user's cancel."""

from __future__ import annotations

import contextlib
import itertools
import math
from pathlib import Path
from typing import Any

from inspector.cli.headless import ProgressPrinter
from inspector.observe import observations as O
from inspector.record.recording import read_recording
from inspector.record.replay import split_conversations
from inspector.sessions.sources import ConversationReplay, replay_session
from inspector.state.fold import DashboardState
from inspector.testing.loop import Lines
from inspector.testing.recordings import CITY, proxy_recording

SECOND = {"c1": 4, "c2": 5, "c3": 3}  # each conversation's second turn in proxy_recording's session


async def test_many_conversations_replay_one_after_the_other_each_named(tmp_path: Path) -> None:
    session = replay_session(proxy_recording(tmp_path / "three.jsonl"), speed=math.inf)
    assert isinstance(session, ConversationReplay) and [cid for cid, _t, _p in session.parts] == ["c1", "c2", "c3"]
    lines = Lines()
    got: list[O.Observation] = []
    session.bus.subscribe(ProgressPrinter(lines))  # type: ignore[arg-type]
    session.bus.subscribe(got.append)
    result = await session.run()
    assert result.status == "finished"
    text = lines.text()
    heads = [line.split("s ", 1)[1] for line in text if " start " in line or " conversation " in line]
    assert heads == [
        h
        for c in CITY
        for h in (f"conversation {c}", f"[{c}] start  replay {tmp_path / 'three.jsonl'} model claude-sonnet-4-5")
    ]
    for cid, city in CITY.items():
        mine = [line for line in text if f"[{cid}]" in line]
        # its own turn 2, and the session's as recorded (`inspector dump` says it so): c1's second turn was the
        # session's 5th (it said #2, c2's first turn in the recording)
        assert any(line.endswith(f"[{cid}] turn 2 (#{SECOND[cid] + 1})") for line in mine)
        assert any(line.endswith(f"[{cid}] answer:") for line in mine)
        assert any(f'tool_use get_weather({{"city":"{city}"}}) toolu_{cid}' in line for line in mine)
    assert [line.split("s ", 1)[1] for line in text if line.endswith("finished after 2 turns")] == [
        f"[{c}] finished after 2 turns" for c in CITY
    ]
    # Rome's first turn: the closed attempt is served up to where it was closed, then the loop retries
    assert any(line.endswith("[c2]   attempt 2: POST http://replay.local/v1/messages") for line in text)
    assigned = [(o.conversation, o.conversation_turn) for o in got if isinstance(o, O.ConversationAssigned)]
    assert assigned == [(c, k) for c in CITY for k in (0, 1)]
    # one number per turn of the session (the dashboard's "all conversations" view keys turns, attempts and blocks
    # by it: restarted numbers overwrote the conversations before), each turn's observations under it
    # (the recording's numbers: replayed one conversation after the other, c1's turns 0 and 4 come first)
    assert [o.turn for o in got if isinstance(o, O.ConversationAssigned)] == [0, 4, 1, 5, 2, 3]
    assert [o.turn for o in got if isinstance(o, O.TurnStarted)] == [0, 4, 1, 5, 2, 3]
    tools = [o for o in got if isinstance(o, O.ToolUse)]
    assert [(o.turn, o.id) for o in tools] == [(j, f"toolu_{c}") for j, c in enumerate(CITY)]
    state = DashboardState().apply_all(got)
    assert {k[0] for k in state.block_order} == set(range(6))  # every conversation's blocks, none overwritten
    finished = [o for o in got if isinstance(o, O.LoopFinished)]
    assert [{t["turn"] for t in o.tools} for o in finished] == [{j} for j in range(3)]  # (c2: a retried call)
    assert [o.text for o in got if isinstance(o, O.TextFinish)] == [f"{c}: 18 C" for c in CITY.values()]


async def test_a_closed_and_resent_attempt_replays_as_a_retry_not_a_cancel(tmp_path: Path) -> None:
    path = proxy_recording(tmp_path / "one.jsonl", order=(("c2", 0), ("c2", 1)))
    rec = read_recording(path)
    assert split_conversations(rec) == []  # one conversation: replayed as it is
    session = replay_session(rec, speed=math.inf)
    assert not isinstance(session, ConversationReplay)
    got: list[O.Observation] = []
    session.bus.subscribe(got.append)
    result = await session.run()
    assert result.status == "finished" and result.turns == 2
    ends = [(o.turn, o.attempt, o.status) for o in got if isinstance(o, O.AttemptEnded)]
    assert ends == [(0, 0, "failed"), (0, 1, "complete"), (1, 0, "complete")]
    # it ends where the client closed it (10 ms after its last read), not after the loop's idle timeout (0.5 s at
    # max speed, 30 s at 1x): no idle timeout is diagnosed, the reason says what the client did
    closed = next(o for o in got if isinstance(o, O.AttemptEnded) and o.status == "failed")
    assert closed.reason == "the recorded client closed the stream after 0.01 s without a read, and resent it"
    codes = [o.diagnostic.code for o in got if isinstance(o, O.DiagnosticRaised)]
    assert "transport.idle_timeout" not in codes, codes


def test_headless_replay_of_many_conversations_ends_each_and_totals_each_on_its_own_line(
    tmp_path: Path, capsys: Any
) -> None:
    """Each conversation's loop starts and finishes under its name ("[c1] finished after 2 turns": 2 is that
    conversation's count, not the session's), and the session's total names each conversation on a line of its own
    (the printer's one-line rule wrote them as literal "\\n" on one line)."""
    from inspector.cli import main

    path = proxy_recording(tmp_path / "three.jsonl")
    with contextlib.suppress(SystemExit):
        main(["replay", "--headless", path])
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).splitlines()
    assert not any("\\n" in line for line in lines)
    for cid in ("c1", "c2", "c3"):
        assert sum(line.endswith(f"[{cid}] finished after 2 turns") for line in lines) == 1
        assert sum(f"[{cid}] start  replay" in line for line in lines) == 1
    last_total = max(i for i, line in enumerate(lines) if " total 6 turns: " in line)
    assert [line.split(":")[0].strip() for line in lines[last_total + 1 : last_total + 4]] == [
        "[c1] 2 turns",
        "[c2] 2 turns",
        "[c3] 2 turns",
    ]


async def test_a_replay_of_many_conversations_keeps_one_clock_for_the_session(tmp_path: Path) -> None:
    """Each conversation's loop counts its times from the session's start, not from its own (each started at 0: the
    conversation replayed last looked older than the one before it, and the list's "3s ago" were wrong), and each
    conversation's ConversationAssigned carries the time it was assigned at (not 0)."""
    ticks = itertools.count()
    session = replay_session(
        proxy_recording(tmp_path / "three.jsonl"), speed=math.inf, clock=lambda: next(ticks) * 0.001
    )
    got: list[O.Observation] = []
    session.bus.subscribe(got.append)
    assert (await session.run()).status == "finished"
    times = [o.t for o in got]
    assert times == sorted(times)  # one clock: never back to 0 at the next conversation's loop
    starts = [o.t for o in got if isinstance(o, O.LoopStarted)]
    assert len(starts) == 3 and starts[0] < starts[1] < starts[2]
    table = DashboardState().apply_all(got).conversations
    c1, c2, c3 = (table.by_id[c] for c in CITY)
    assert c1.t_start < c1.t_last < c2.t_start < c2.t_last < c3.t_start < c3.t_last  # each after the one before

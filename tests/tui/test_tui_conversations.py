"""The dashboard of a proxied session with several conversations: the list, its key, selection, follow-newest,
the collapsed line at 80x24, and no list at all for a single conversation (issue 21 §2)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.message import Message

from inspector.observe import observations as O
from inspector.sessions import sources
from inspector.testing.conversations import interleaved_conversations, with_the_same_tool_ids
from inspector.testing.dashboard import Factory, FakeSession, flushed, wait_for
from inspector.testing.recordings import CITY, proxy_recording
from inspector.testing.synthetic import parse_date_observations
from inspector.tui import messages as M
from inspector.tui.app import InspectorApp
from inspector.tui.widgets.conversations import ConversationsView, tokens_label

WIDE = (160, 48)
SMALL = (80, 24)

SnapCompare = Callable[..., bool]  # pytest-textual-snapshot's snap_compare fixture


def three(**kw: Any) -> InspectorApp:
    obs = interleaved_conversations(3, stops={1: "turn1", 2: "mid_tool_json"}, parents={2: "c1"})
    return InspectorApp(observations=obs, clock=lambda: 0.0, **kw)


def footer_keys(app: InspectorApp) -> set[str]:
    return {b.id for _k, b, enabled, _t in app.screen.active_bindings.values() if b.show and b.id and enabled}


def turns_in_events(app: InspectorApp) -> set[int]:
    state = app.events_view.state
    assert state is not None
    ev = state.events
    return {ev.turn[i] for i in range(len(ev))}


class TestConversationList:
    async def test_the_list_shows_every_conversation_and_enter_selects_one(self) -> None:
        app = three()
        messages: list[Message] = []
        async with app.run_test(size=WIDE, message_hook=messages.append) as pilot:
            await pilot.pause()
            assert app.dashboard.has_class("-conversations") and app.dashboard.conversations_pane.display
            view = app.dashboard.conversations_view
            assert view.row_count == 4  # all, c1, c2, c3
            assert {"conversations", "follow-newest"} <= footer_keys(app)
            assert turns_in_events(app) == {0, 1, 2, 3}  # the whole session at first
            # open at this size, without the keys (they stay on the SSE pane): l goes to it (Down, Down, Enter
            # opened an SSE event's detail instead of a conversation), l again closes it, and again opens it
            assert not view.has_focus
            await pilot.press("l")
            assert app.dashboard.conversations_pane.display and view.has_focus
            await pilot.press("l")
            assert not app.dashboard.conversations_pane.display and app.dashboard.conversations_line.display
            await pilot.press("l")
            assert app.dashboard.conversations_pane.display and view.has_focus
            await pilot.press("down", "down", "enter")  # row 2: c2
            await pilot.pause()
            assert app.selected_conversation == "c2"
            assert turns_in_events(app) == {1}
            assert {k[0] for k in app.blocks_view.state.block_order} == {1}
            assert {t.turn for t in app.tools_view.state.tools.values()} == {1}
            assert {it[1][0] for it in app.assistant_view.state.transcript if it[0] == "text"} == {1}
            await pilot.press("up", "up", "enter")  # "all conversations"
            await pilot.pause()
            assert app.selected_conversation is None and turns_in_events(app) == {0, 1, 2, 3}
        shown = [m for m in messages if isinstance(m, M.ConversationShown)]
        assert [m.conversation for m in shown] == ["c2", None]

    async def test_follow_newest_toggles_and_moves_to_a_new_conversation(self) -> None:
        mixed = interleaved_conversations(3)
        late = [o for o in mixed if (turn := getattr(o, "turn", None)) is not None and turn % 3 == 2]  # c3 starts last
        obs = [o for o in mixed if o not in late] + late
        cut = len(obs) - len(late)
        app = InspectorApp(observations=obs[:cut], clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            await pilot.press("f")
            assert app.follow_newest and app.selected_conversation == "c2"
            assert turns_in_events(app) == {1, 4}
            app.ingest(obs[cut:])  # c3 starts: the panes move to it
            await pilot.pause()
            assert app.selected_conversation == "c3" and turns_in_events(app) == {2, 5}
            assert "following newest" in str(app.dashboard.conversations_pane.border_title)
            await pilot.press("f")
            assert not app.follow_newest and app.selected_conversation == "c3"

    async def test_choosing_a_conversation_turns_follow_newest_off(self) -> None:
        app = three()
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("f")
            assert app.follow_newest and app.selected_conversation == "c3"
            app.dashboard.conversations_view.post_message(ConversationsView.ConversationChosen("c1"))
            await pilot.pause()
            assert not app.follow_newest and app.selected_conversation == "c1"
            assert turns_in_events(app) == {0, 3}

    async def test_time_travel_shows_the_whole_session_and_says_so(self) -> None:
        app = three()
        async with app.run_test(size=WIDE) as pilot:
            app.select_conversation("c2")
            await pilot.pause()
            view = app.dashboard.conversations_view
            assert view.shown == "c2" and turns_in_events(app) == {1}
            await pilot.press("left")  # one event back: the session as of that event, every conversation
            await pilot.pause()
            assert app.cursor is not None and view.shown is None and turns_in_events(app) == {0, 1, 2, 3}
            await pilot.press("end")
            await pilot.pause()
            assert app.cursor is None and view.shown == "c2" and turns_in_events(app) == {1}

    async def test_a_rows_detail_and_time_travel_are_of_that_conversations_event(self) -> None:
        app = three()
        async with app.run_test(size=WIDE) as pilot:
            app.select_conversation("c2")  # global turn 1: "turn · attempt 2 · 1" in a detail
            await pilot.pause()
            detail = app.detail_of("event", 1)
            assert detail.title == "Event 1 · message_start" and "2 · 1" in detail.plain.split("turn · attempt")[1][:8]
            app.post_message(app.events_view.TimeTravelRequested(1))
            await pilot.pause()
            assert app.conversation_filter is not None
            g = app.conversation_filter.session_event(1)
            assert g is not None and g > 1 and app.cursor == g  # the session's number of c2's first event
            obs = app.history.observations[app.history.event_pos[g - 1]]
            assert obs.turn == 1 and obs.event_type == "message_start"

    async def test_a_long_sessions_view_is_folded_off_the_ui_thread_and_the_last_choice_wins(self) -> None:
        app = three()
        app.SYNC_SELECT = 0  # every choice folds in a worker thread (as one of a long session does)
        messages: list[Message] = []
        async with app.run_test(size=WIDE, message_hook=messages.append) as pilot:
            await pilot.pause()
            app.select_conversation("c2")
            assert app.conversation_filter is None and app.note == "reading the turns of c2…"
            app.select_conversation("c3")  # before c2's view is ready: c3's is the one installed
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.selected_conversation == "c3" and app.conversation_filter is not None
            assert app.conversation_filter.conversation == "c3" and turns_in_events(app) == {2}
            assert app.note == ""
            app.ingest(interleaved_conversations(3, stops={1: "turn1", 2: "mid_tool_json"})[-5:])  # (c1's, say)
            await pilot.pause()
            assert turns_in_events(app) == {2}
        assert [m.conversation for m in messages if isinstance(m, M.ConversationShown)] == ["c3"]

    async def test_at_80x24_the_list_is_one_line_and_l_opens_it(self) -> None:
        app = three()
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            line = app.dashboard.conversations_line
            assert line.display and not app.dashboard.conversations_pane.display
            assert "3 conversations" in str(line.render()) and "l list" in str(line.render())
            await pilot.press("l")
            assert app.dashboard.conversations_pane.display and not line.display

    async def test_a_single_conversation_shows_no_list_and_no_keys(self) -> None:
        for obs in (parse_date_observations(), interleaved_conversations(1)):
            app = InspectorApp(observations=obs, clock=lambda: 0.0)
            async with app.run_test(size=WIDE) as pilot:
                await pilot.pause()
                assert not app.dashboard.conversations_pane.display
                assert not app.dashboard.conversations_line.display
                assert not {"conversations", "follow-newest"} & footer_keys(app)
                await pilot.press("l", "f")
                assert app.selected_conversation is None and not app.follow_newest
                await app.run_action("conversations")  # (the palette's way): says why
                assert any("one conversation" in n.message for n in app._notifications)


def age_of(app: InspectorApp, cid: str) -> str:
    """The age column of a conversation's row in the list, as drawn ("2m ago")."""
    view = app.dashboard.conversations_view
    row = app.live.conversations.by_id[cid].number
    line = "".join(seg.text for seg in view.render_row(row, 160))
    return line.split("ago")[0].split()[-1] + " ago"


class TestAges:
    async def test_the_ages_count_to_the_sessions_time_whichever_conversation_is_shown(self) -> None:
        """c3 turns again 100 s into the session, after c1's last activity: with c1 shown, the list's ages counted to
        c1's own last observation (c1 "0s ago", c3 in the future, drawn "0s ago"), not to the session's time."""
        obs = interleaved_conversations(3, stops={0: "turn1"})
        obs += [O.ConversationAssigned(100.0, 9, "c3", 1, 0, "continues"), O.TurnStarted(100.0, 9)]
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            app.select_conversation("c1")
            await pilot.pause()
            assert app.dashboard.conversations_view.shown == "c1"
            assert app.dashboard.conversations_view.now == app.live.status.t_last == 100.0
            assert (age_of(app, "c1"), age_of(app, "c3")) == ("1m ago", "0s ago")

    async def test_a_live_sessions_ages_keep_counting_after_it_ended_a_replays_stop_at_its_end(self) -> None:
        """`watch`: the dashboard stays open on the ended session; its conversations' ages froze at the end (c1
        "0s ago" minutes later). A replay's stop at the recording's end."""
        obs = interleaved_conversations(3)
        obs.append(O.LoopFinished(obs[-1].t, "finished", 6, [], []))
        for replay in (False, True):
            wall = [0.0]
            factory = Factory(lambda: FakeSession(obs, source={"type": "proxy"}, finish_at_end=True))
            app = InspectorApp(factory, clock=lambda: wall[0], replay=replay)
            async with app.run_test(size=WIDE) as pilot:
                await wait_for(lambda: app.final_status == "finished", what="the session's end")
                await pilot.pause()
                end = app.dashboard.conversations_view.now
                assert end == app.live.status.t_last and age_of(app, "c3") == "0s ago"
                wall[0] += 150.0
                app.show()
                now = app.dashboard.conversations_view.now
                if replay:
                    assert now == end and age_of(app, "c3") == "0s ago"
                else:
                    assert now == end + 150.0 and age_of(app, "c3") == "2m ago"


class TestSideRequests:
    async def test_the_status_line_counts_side_requests_when_there_is_no_turn_to_show(self) -> None:
        """A harness whose calls are all side requests (non-streamed, count_tokens) has no turn and no conversation
        list: the status line still says they happened, at 160 and at 80 columns."""
        from inspector.observe import observations as O

        start = O.LoopStarted(0.0, {"type": "serve", "name": "weather", "listen": "http://127.0.0.1:1"}, "", None)
        sides = [
            O.ExchangeForwarded(0.1 * i, "POST", "/v1/messages", 200, 468, "complete", None, "not streamed")
            for i in (1, 2)
        ]
        for size, words in ((WIDE, "2 side requests"), (SMALL, "2 side")):
            app = InspectorApp(observations=[start, *sides], clock=lambda: 0.0)
            async with app.run_test(size=size) as pilot:
                await pilot.pause()
                first = app.status_bar.render().plain.split("\n")[0]
                assert words in first, first
                assert not app.dashboard.conversations_pane.display


class TestStatusLineOfAll:
    async def test_the_status_line_describes_the_attempt_that_streams_not_the_newest_request(self) -> None:
        """The "all" view: c2's request went out while c1 streamed and waits for its first byte; the status line
        described the newest request, 'reads 0' (and no TTFB) while c1's reads passed."""
        obs = interleaved_conversations(2, stops={1: "opening"})
        reads = [i for i, o in enumerate(obs) if type(o) is O.ReadReceived]
        obs = obs[: reads[11] + 1]  # c1's twelfth read; c2's request (turn #2) was sent before it, no read since
        assert [o.turn for o in obs if type(o) is O.AttemptStarted] == [0, 1]
        assert all(o.turn == 0 for o in obs if type(o) is O.ReadReceived)
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert app.selected_conversation is None
            first, second = app.status_bar.render().plain.split("\n")
            assert "c1 turn 1 (#1) · attempt 1" in first, first
            assert "reads 12" in second and "TTFB" in second, second


class TestStatusLineOfOneConversation:
    async def test_the_status_line_says_the_shown_conversations_state_turn_events_and_model(self) -> None:
        """With one conversation shown, the status line said the session's: its loop state (idle while that one
        streamed), the session's turn number, the session's event total, the first request's model."""
        from inspector.tui.widgets.status import CONVERSATION_STATE_LABEL

        app = three()
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            for cid in ("c2", "c3"):
                app.select_conversation(cid)

                def chosen(cid: str = cid) -> bool:
                    return app.conversation_filter is not None and app.conversation_filter.conversation == cid

                await wait_for(chosen, what=cid)
                app.flush()
                await pilot.pause()
                first = app.status_bar.render().plain.split("\n")[0]
                entry = app.live.conversations.by_id[cid]
                own = app.shown_state.status.events
                assert CONVERSATION_STATE_LABEL[entry.state] in first, first
                assert f"{cid} turn {len(entry.turns)} (#{entry.turns[-1] + 1})" in first, first
                assert f"event {own} of {own}" in first and own < app.live.status.events, first
            assert app.live.conversations.by_id["c3"].state == "streaming"


class TestConversationSnapshots:
    def test_conversation_list(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(three(), terminal_size=WIDE)

    def test_conversation_list_collapsed(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(three(), terminal_size=SMALL)

    def test_one_conversation_selected(self, snap_compare: SnapCompare) -> None:
        assert snap_compare(three(), terminal_size=WIDE, press=["l", "down", "down", "enter"])


class TestTheSameToolIds:
    async def test_two_conversations_with_the_same_tool_ids_show_a_tool_row_each(self) -> None:
        """`serve` hands every conversation the same tool ids: the session's Tools pane keeps a row per (conversation,
        tool id), each opening its own call (c1's succeeded with c1's result, c2's still running)."""
        obs = with_the_same_tool_ids(interleaved_conversations(2, stops={1: "tools_running"}))
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            view = app.tools_view

            def tool_rows() -> list[Any]:
                return [t[1] for t in map(view.detail_at, range(view.row_count)) if t and t[0] == "tool"]

            await wait_for(lambda: len(tool_rows()) == 6, what="six tool rows")
            await pilot.pause()
            keys = tool_rows()
            c1, c2 = ([k for k in keys if k[0] == c] for c in ("c1", "c2"))
            assert len(c1) == len(c2) == 3 and [k[1] for k in c1] == [k[1] for k in c2]  # the same ids
            one, two = app.detail_of("tool", c1[0]).body.plain, app.detail_of("tool", c2[0]).body.plain
            assert "conversation: c1" in one and "c1: " in one and "succeeded" in one
            assert "conversation: c2" in two and "c1: " not in two and "running" in two


async def test_at_80x24_the_open_list_keeps_each_rows_tokens_in_view() -> None:
    """The model column (22 cells) pushed the tokens off an 80-column row ('in 930 o…'): it gives way now."""
    app = three()
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        view = app.dashboard.conversations_view
        width = view.scrollable_content_region.width
        rows = ["".join(seg.text for seg in view.render_row(r, width)) for r in range(1, 4)]
        for row, entry in zip(rows, app.live.conversations, strict=True):
            assert f"out {tokens_label(entry.tokens_out)}" in row, row
            assert "…" in row.split(entry.id, 1)[1][:30]  # (the model, cut)


async def test_the_assistant_panes_rules_name_their_conversation_and_none_is_empty() -> None:
    """The "all" view of concurrent conversations: rules said "turn 1", "turn 2", "turn 3" (three conversations'
    turns) one under the other with nothing between them, then "turn 1" again."""
    app = three()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        view = app.assistant_view
        rows = [strip.text for strip in view._lines]  # (every row as painted: the Line API's finished strips)
        rules = [i for i, row in enumerate(rows) if row.startswith("── ") and " turn " in row]
        assert rules and all(b - a > 1 for a, b in zip(rules, rules[1:], strict=False)), rows
        assert rows[rules[0]].startswith("── [c1] turn 1 (#1) ") and rows[rules[1]].startswith("── [c2] turn 1 (#2) ")


def _text(line: Any) -> str:
    return "".join(seg.text for seg in line) if isinstance(line, list) else line.text


async def test_every_panes_turn_rules_name_their_conversation_in_the_all_view() -> None:
    """The "all" view of concurrent conversations: the Assistant's rules said "[c2] turn 1 (#2)", but the Blocks
    pane's said "turn 2 · attempt 1", the Tools pane's "turn 2", the SSE pane's marker rows "turn 2 · attempt 1 ·
    POST ..." and the timeline "turn 2" / "model t2": the session's turn numbers, which no conversation has."""
    app = three()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        state = app.live
        width = 200
        blocks = [_text(strip) for strip in app.blocks_view._lines]
        tools = [_text(strip) for strip in app.tools_view._lines]
        ev = state.events
        markers = [_text(app.events_view.render_row(r, width)) for r in range(len(ev)) if r in state.markers]
        timeline = app.timeline.render().plain
        for rows in (blocks, tools, markers):
            rules = [row for row in rows if row.startswith("── ") and "turn " in row]
            assert rules, rows
            assert all(re.match(r"── \[c\d\] turn \d+ \(#\d+\)", row) for row in rules), rules
        assert "── [c2] turn 1 (#2) · attempt 1 · POST" in "\n".join(markers)
        assert re.search(r"^model c\d t\d ", timeline, re.M) and not re.search(r"model t\d", timeline), timeline
        assert re.search(r"^\[c1\] turn 1 \(#1\) saved", timeline, re.M), timeline  # (a compact line)
        # one conversation shown: its own turns (they are not the session's), as in the status line
        app.select_conversation("c2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.dashboard.conversations_view.shown == "c2"
        shown = app.shown_state
        rows = [_text(app.events_view.render_row(r, width)) for r in range(len(shown.events)) if r in shown.markers]
        assert rows and all(re.match(r"── \[c2\] turn \d+ \(#\d+\) · attempt", row) for row in rows), rows
        assert [_text(strip) for strip in app.tools_view._lines][0].startswith("── [c2] turn 1 (#2) ")
        assert re.search(r"^model c2 t1 ", app.timeline.render().plain, re.M)


async def test_the_raw_view_and_the_diagnostics_name_the_conversation_of_a_read() -> None:
    """The raw view's read headers said "turn 3.1" and the Diagnostics pane "t3.1" for conversation c3's turn 1."""
    obs = interleaved_conversations(3, variants={2: "invalid_json"})
    app = InspectorApp(observations=obs, clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        state = app.live
        reads = state.reads
        headers = []
        for row in range(reads.lines):
            i, line = reads.locate(row)
            if line < 0:
                headers.append(_text(app.events_view._render_raw(state, row, 200)))
        assert headers and all(re.match(r"── read \d+ · \[c\d\] turn \d+\.\d+ \(#\d+\) · ", h) for h in headers), (
            headers
        )
        assert any(" · [c3] turn 1.1 (#3) · " in h for h in headers), headers
        assert state.diagnostics  # (c3's second tool's JSON is broken)
        where = [_text(app.diagnostics_view.render_row(r, 200)) for r in range(len(state.diagnostics))]
        assert where and all(re.search(r"s c3 t1\.1 ", w) for w in where), where


async def test_the_status_line_names_the_model_of_the_turn_it_shows() -> None:
    """An agent asking two models at once (c1 on Claude, c2 on GPT): the 'all conversations' status line shows the
    newest turn, c2's, and named the first request's model (c1's) beside it; it names the model of that turn's
    conversation."""
    import dataclasses

    from inspector.observe import observations as O

    def on_gpt(obs: O.Observation) -> O.Observation:
        if getattr(obs, "turn", 0) % 2 == 0:  # c1's turns
            return obs
        if type(obs) is O.AttemptStarted and isinstance(obs.body, dict):
            return dataclasses.replace(obs, body={**obs.body, "model": "gpt-4o-mini"})
        if type(obs) is O.MessageStarted and obs.message:
            return dataclasses.replace(obs, message={**obs.message, "model": "gpt-4o-mini"})
        return obs

    obs = [on_gpt(o) for o in interleaved_conversations(2)]
    app = InspectorApp(observations=obs, clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        last = max(o.turn for o in obs if isinstance(o, O.TurnStarted))
        await wait_for(lambda: app.live.status.turn == last and app.live.status.events > 0, what="the last turn")
        app.flush()
        await pilot.pause()
        live = app.live
        shown = live.conversations.by_turn[live.status.turn]
        assert shown == "c2" and live.conversations.by_id["c1"].model != "gpt-4o-mini"
        first = app.status_bar.render().plain.split("\n")[0]
        assert first.endswith("gpt-4o-mini"), first


async def test_the_request_view_names_the_turns_of_its_conversation() -> None:
    """The request view (s) of c1's second turn was titled "Request · turn 4" and diffed "since turn 1's request":
    the session's numbers, which the panes around it no longer use."""
    from inspector.tui.request import request_detail

    app = three()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        state = app.live
        assert state.conversations.by_turn.get(3) == "c1"
        detail = request_detail(state, 3)
        assert detail.title.startswith("Request · [c1] turn 2 (#4) · attempt 1"), detail.title
        assert "changes since [c1] turn 1 (#1)'s request" in detail.plain


def _replay_app(path: str) -> InspectorApp:
    return InspectorApp(
        lambda: sources.replay_session(path, speed=math.inf, clock=lambda: 0.0), clock=lambda: 0.0, replay=True
    )


async def _replayed_assistant_rows(app: InspectorApp) -> list[str]:
    """The Assistant pane's rows once the replay has finished and its last observations are folded."""
    await wait_for(lambda: app.final_status is not None, 30, "the replay to finish")
    await flushed(app)
    return [_text(strip) for strip in app.assistant_view._lines]


async def test_a_replay_of_many_conversations_shows_each_ones_own_prompt(tmp_path: Path) -> None:
    """A proxy recording replays one loop per conversation, each with its prompt: the Assistant pane's one "user ▸"
    line was the last loop's (Oslo's, c3) above c1's turns in the "all" view, and in c1's own view too (another
    conversation's loop start was folded into it)."""
    path = proxy_recording(tmp_path / "three.jsonl")
    app = _replay_app(path)
    async with app.run_test(size=WIDE) as pilot:
        rows = await _replayed_assistant_rows(app)
        prompts = [row.rstrip() for row in rows if "user ▸" in row]
        assert prompts == [f"[{cid}] user ▸ Weather in {city}?" for cid, city in CITY.items()], rows
        for cid in CITY:  # each above its conversation's first turn
            at = rows.index(f"[{cid}] user ▸ Weather in {CITY[cid]}?".ljust(len(rows[0])))
            assert rows[at + 1].startswith(f"── [{cid}] turn 1 "), rows
        for cid, city in CITY.items():
            app.select_conversation(cid)
            await app.workers.wait_for_complete()
            await wait_for(shown_is(app, cid), what="the conversation")
            await flushed(app)
            rows = [_text(strip).rstrip() for strip in app.assistant_view._lines]
            assert [row for row in rows if "user ▸" in row] == [f"user ▸ Weather in {city}?"], rows
            assert app.shown_state.status.prompt == f"Weather in {city}?"


async def test_a_replay_of_many_conversations_numbers_the_turns_as_the_recording_and_dump_do(
    tmp_path: Path, capsys: Any
) -> None:
    """Replayed one conversation after the other, the turns kept the session's numbers of the recording: the rules
    said "[c1] turn 2 (#2)" where `inspector dump` (and the proxy's dashboard) said c1's turn 2 was #5 and #2 was
    c2's turn 1."""
    import contextlib

    from inspector.cli import main

    path = proxy_recording(tmp_path / "three.jsonl")
    with contextlib.suppress(SystemExit):
        main(["dump", path])
    dumped = list(dict.fromkeys(re.findall(r"turn (\d+) \(#(\d+)\)", capsys.readouterr().out)))  # (2 tries of one)
    assert dumped == [("1", "1"), ("2", "5"), ("1", "2"), ("2", "6"), ("1", "3"), ("2", "4")], dumped
    app = _replay_app(path)
    async with app.run_test(size=WIDE) as pilot:
        rows = await _replayed_assistant_rows(app)
        rules = [m.groups() for row in rows if (m := re.match(r"── \[c\d\] turn (\d+) \(#(\d+)\)", row))]
        assert rules == dumped, rows
        # the status line of the "all" view says whose turn the last one is, as the rules do (it said "turn 5")
        assert "│ c3 turn 2 (#4) · attempt 1 │" in app.status_bar.render().plain, app.status_bar.render().plain
        entries = list(app.live.conversations)
        assert [[t + 1 for t in c.turns] for c in entries] == [[1, 5], [2, 6], [3, 4]]
        await pilot.press("l", "down", "enter")  # c1's own view: its turns keep those numbers
        await wait_for(shown_is(app, "c1"), what="c1's view")
        await flushed(app)
        rows = [_text(strip) for strip in app.tools_view._lines] + [app.status_bar.render().plain]
        assert any(row.startswith("── [c1] turn 1 (#1) ") for row in rows), rows
        assert "c1 turn 2 (#5)" in rows[-1], rows[-1]


def shown_is(app: InspectorApp, cid: str) -> Callable[[], bool]:
    return lambda: app.dashboard.conversations_view.shown == cid


async def test_a_restart_shows_the_chosen_conversation_again() -> None:
    """Restart (r) of a replay of many conversations went back to all of them: the one chosen is shown again once
    the new run has it (and following the newest goes on following)."""
    factory = Factory(lambda: FakeSession(interleaved_conversations(3), finish_at_end=True))
    app = InspectorApp(factory, clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(lambda: not app.session_running and len(app.live.conversations) == 3, what="the first run")
        app.select_conversation("c2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.selected_conversation == "c2"
        before = turns_in_events(app)
        assert before == {1, 4}  # (c2's two turns)
        await pilot.press("r")
        await wait_for(lambda: len(factory.sessions) == 2 and not app.session_running, what="the second run")
        app.flush()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.selected_conversation == "c2" and app.dashboard.conversations_view.shown == "c2"
        assert app.conversation_filter is not None and app.conversation_filter.conversation == "c2"
        assert turns_in_events(app) == before  # (c2's turns: the panes show them alone)


async def test_a_harness_that_never_streams_is_told_why_the_panes_stay_empty() -> None:
    """`watch` of a harness that calls messages.create without `stream`: every request is a side request, never a
    turn (issue 21 §2). The dashboard stayed empty, its Diagnostics line saying "the stream was well-formed" of a
    stream that never came; it now says what came instead, and why no turn."""
    source = {"type": "watch", "listen": "http://127.0.0.1:5"}
    side = [
        O.ExchangeForwarded(1.0 + k, "POST", path, 200, 468, "complete", None, why)
        for k, (path, why) in enumerate(
            [("/v1/messages", "not streamed"), ("/v1/messages", "not streamed"), ("/v1/models", "GET /v1/models")]
        )
    ]
    app = InspectorApp(
        observations=[O.LoopStarted(0.0, source, "", None), *side, O.LoopFinished(9.0, "finished", 0, [], [], None)],
        clock=lambda: 0.0,
    )
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(lambda: app.live.conversations.side_requests == 3, what="the side requests")
        await pilot.pause()
        line = "".join(s.text for s in app.diagnostics_view.render_line(0))
    assert "no stream yet: 3 side requests (2 not streamed, 1 GET), never shown as turns" in line
    assert "well-formed" not in line


async def test_the_no_stream_line_goes_when_the_first_stream_comes() -> None:
    """The Diagnostics line said "no stream yet" before the first attempt, and kept saying it on screen while the
    first stream's events went by (tried as a new user: `replay` of a watch recording at 80x24): the pane repainted
    only when its diagnostics or the session's end changed, not when a stream came. What the terminal shows is
    checked (the SVG export of the composed screen), not a line rendered afresh."""
    observations = parse_date_observations()
    first = next(i for i, o in enumerate(observations) if type(o) is O.AttemptStarted)
    app = InspectorApp(observations=observations[:first], clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert "no stream yet" in app.export_screenshot().replace("&#160;", " ")
        events = next(i for i, o in enumerate(observations) if type(o) is O.SSEEventSeen)
        app.ingest(observations[first : events + 1])
        await pilot.pause()
        shown = app.export_screenshot().replace("&#160;", " ")
    assert "no stream yet" not in shown
    assert "well-formed so far" in shown

"""Read anything in full: Enter (or a click) on every kind of row opens the right detail view; the request view and
its diff; speed after the loop finished; disabled keys say why; the footer and small terminals."""

from __future__ import annotations

import dataclasses
import math
import time
from functools import partial
from typing import Any

import pytest
from textual.binding import Binding
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets._footer import FooterKey

from inspector.observe import observations as O
from inspector.state.fold import DashboardState
from inspector.testing.conversations import two_cached_conversations
from inspector.testing.dashboard import Factory, FakeSession, wait_for
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.app import InspectorApp, next_speed
from inspector.tui.commands import binding_commands
from inspector.tui.detail import Detail
from inspector.tui.request import previous_request, request_detail, request_diff
from inspector.tui.summary import fault_summary
from inspector.tui.widgets.blocks import incomplete_reason
from inspector.tui.widgets.detail import DetailScreen
from inspector.tui.widgets.footer import ESSENTIAL, KeyFooter

WIDE = (140, 42)
SMALL = (80, 24)


def synthetic(stop: str | None = None, variant: str = "ok", **kw: Any) -> InspectorApp:
    return InspectorApp(observations=parse_date_observations(stop, variant=variant), clock=lambda: 0.0, **kw)


async def open_row(pilot: Pilot[int], view: Any, row: int) -> DetailScreen:
    app = pilot.app
    view.focus()
    view.selected = row
    await pilot.press("enter")
    await wait_for(lambda: isinstance(app.screen, DetailScreen), what="the detail view")
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen


def _shown(app: InspectorApp) -> Detail:
    """The detail the open DetailScreen shows."""
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen.detail


class TestEnterOpensTheRightDetail:
    async def test_an_event_row_shows_its_json_and_raw_bytes(self) -> None:
        app = synthetic()
        async with app.run_test(size=WIDE) as pilot:
            ev = app.live.events
            row = next(r for r in range(len(ev)) if ev.etype[r] == "content_block_delta" and ev.index[r] == 1)
            screen = await open_row(pilot, app.events_view, row)
            text = screen.detail.plain
            assert screen.detail.title.startswith(f"Event {ev.evno[row]} · content_block_delta")
            assert '"type": "input_json_delta"' in text  # the data, as pretty JSON
            assert "┄ read " in text and "data: {" in text  # the raw bytes, with read boundaries
            # reads count from 1 on every line meant for people, as the status line's "reads N" does
            read = ev.read_index[row]
            assert f"completed by read {read + 1}" in text and f"┄ read {read + 1} · " in text
            assert f"┄ read {read} · " not in text
            await pilot.press("escape")
            await wait_for(lambda: not isinstance(app.screen, DetailScreen), what="the view to close")

    async def test_enter_with_nothing_selected_opens_the_newest_event_not_a_request(self) -> None:
        """Issue 18 §4: with no row selected, Enter on the SSE pane opened the request view (the last row was a
        marker: here the "stream held" row of a pause)."""
        from inspector.testing.synthetic import StreamScript

        s = StreamScript()
        s.loop_started()
        s.start_turn()
        s.start_attempt()
        s.message_start()
        s.block_start(0, {"type": "text", "text": ""})
        s.delta(0, "hello")
        s.emit(O.StreamHeld(s.t, 0, 0, "pause"))
        app = InspectorApp(observations=s.obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            ev = app.live.events
            assert ev.etype[len(ev) - 1] == "held" and app.events_view.selected is None
            app.events_view.focus()
            await pilot.press("enter")
            await wait_for(lambda: isinstance(app.screen, DetailScreen), what="the detail view")
            newest = ev.evno[ev.event_rows[-1]]
            assert _shown(app).title.startswith(f"Event {newest} · content_block_delta")
            assert app.events_view.selected == ev.event_rows[-1]  # selected, so the pane shows which

    async def test_an_attempt_marker_row_opens_the_request_it_sent(self) -> None:
        # turn 2's request carries turn 1's answer and the tool results (the synthetic script sends none)
        history: list[dict[str, Any]] = [{"role": "user", "content": "fix parse_date"}]
        obs = []
        for o in parse_date_observations():
            if isinstance(o, O.AttemptStarted):
                if o.turn == 1:
                    history = [*history, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]}]
                o = dataclasses.replace(o, body={**o.body, "messages": list(history)})
            obs.append(o)
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            ev = app.live.events
            marker = [r for r in range(len(ev)) if ev.etype[r] == "attempt"][1]
            screen = await open_row(pilot, app.events_view, marker)
            assert screen.detail.title.startswith("Request · turn 2 · attempt 1")
            assert "changes since turn 1's request" in screen.detail.plain
            assert "+ messages[1]" in screen.detail.plain  # the assistant's tool calls were appended

    async def test_a_block_row_shows_the_whole_buffer_and_input(self) -> None:
        app = synthetic()
        async with app.run_test(size=WIDE) as pilot:
            view = app.blocks_view
            row = next(r for r in range(view.row_count) if (view.detail_at(r) or ("",))[0] == "block")
            detail = view.detail_at(row)
            assert detail is not None
            key = detail[1]
            screen = await open_row(pilot, view, row)
            block = app.live.blocks[key]
            assert block.joined() in screen.detail.plain

    async def test_a_tool_row_shows_input_result_and_state_history(self) -> None:
        app = synthetic()
        async with app.run_test(size=WIDE) as pilot:
            view = app.tools_view
            row = next(r for r in range(view.row_count) if (view.detail_at(r) or ("",))[0] == "tool")
            detail = view.detail_at(row)
            assert detail is not None
            tool = app.live.tools[detail[1]]
            screen = await open_row(pilot, view, row)
            text = screen.detail.plain
            assert "── state history ──" in text and "running" in text and "succeeded" in text
            assert f'"path": "{tool.input["path"]}"' in text

    async def test_a_long_tool_error_is_readable_in_full(self) -> None:
        long_error = "ToolError: RuntimeError: pytest could not start: ImportError: " + "x" * 400 + " END"
        obs = parse_date_observations("tools_running")
        tool = next(o for o in obs if isinstance(o, O.ToolStateChanged))
        obs.append(
            O.ToolStateChanged(
                tool.t + 1,
                tool.turn,
                tool.attempt,
                tool.id,
                tool.name,
                tool.index,
                "failed",
                None,
                long_error,
                None,
                {},
            )
        )
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            view = app.tools_view
            row = next(r for r in range(view.row_count) if view.detail_at(r) == ("tool", ("", tool.id)))
            screen = await open_row(pilot, view, row)
            assert long_error in screen.detail.plain

    async def test_a_diagnostic_row_shows_its_text_and_the_bytes(self) -> None:
        app = synthetic("turn1", variant="invalid_json")
        async with app.run_test(size=WIDE) as pilot:
            state = app.live
            assert state.diagnostics
            i = next(i for i, d in enumerate(state.diagnostics) if d.evno is not None)
            screen = await open_row(pilot, app.diagnostics_view, i)
            text = screen.detail.plain
            assert state.diagnostics[i].message in text
            assert f"the bytes it points at (event {state.diagnostics[i].evno})" in text

    async def test_a_click_on_a_timeline_bar_opens_that_tool(self) -> None:
        app = synthetic("tools_running")
        async with app.run_test(size=WIDE) as pilot:
            timeline = app.timeline
            await wait_for(lambda: any(r and r[0] == "tool" for r in timeline._rows), what="tool bars")
            y = next(i for i, r in enumerate(timeline._rows) if r and r[0] == "tool")
            await pilot.click(timeline, offset=(20, y))
            await wait_for(lambda: isinstance(app.screen, DetailScreen), what="the detail view")
            assert _shown(app).title.startswith("Tool read_file")

    async def test_copy_puts_the_whole_text_on_the_clipboard(self) -> None:
        app = synthetic()
        async with app.run_test(size=WIDE) as pilot:
            screen = await open_row(pilot, app.events_view, 3)
            await pilot.press("c")
            assert app.clipboard == screen.detail.plain and len(app.clipboard) > 50

    async def test_the_request_key_shows_the_shown_turn(self) -> None:
        app = synthetic()
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("s")
            await wait_for(lambda: isinstance(app.screen, DetailScreen), what="the request view")
            assert _shown(app).title.startswith("Request · turn 2")
            assert '"max_tokens": 4096' in _shown(app).plain


class TestRequestDiff:
    def test_appended_changed_removed_and_parameters(self) -> None:
        prev = {
            "model": "m",
            "max_tokens": 10,
            "system": "s",
            "tools": [{"name": "a"}, {"name": "b", "x": 1}],
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
        }
        cur = {
            "model": "m",
            "max_tokens": 20,
            "temperature": 0,
            "system": "s",
            "tools": [{"name": "b", "x": 2}, {"name": "c"}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "y"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "boom"}],
                },
            ],
        }
        got = {(c.op, c.where) for c in request_diff(prev, cur)}
        assert got == {
            ("+", "tools/c"),
            ("-", "tools/a"),
            ("~", "tools/b"),
            ("~", "messages[1]"),
            ("+", "messages[2]"),
            ("~", "max_tokens"),
            ("+", "temperature"),
        }
        added = next(c for c in request_diff(prev, cur) if c.where == "messages[2]")
        assert "tool_result t1 is_error" in added.what

    def test_a_request_is_compared_with_its_own_conversations_previous_request(self) -> None:
        """Two interleaved conversations (global turns 0 and 2 are c1's, 1 and 3 c2's): turn 3's diff is with turn 2
        (c2's first request), not with turn 3 (c1's); a conversation's first request has nothing to compare with."""
        state = DashboardState().apply_all(two_cached_conversations())
        found = previous_request(state, 3)
        assert found is not None and found[0] == (1, 0) and found[1]["system"][0]["text"].startswith("B")
        assert previous_request(state, 1) is None and previous_request(state, 2)[0] == (0, 0)  # type: ignore[index]
        text = request_detail(state, 3).body.plain
        assert "changes since [c2] turn 1 (#2)'s request" in text and "system" not in text.split("── usage")[0]
        assert "+ messages[1]" in text and "+ messages[2]" in text
        first = request_detail(state, 1).body.plain
        assert "the first request of conversation c2: nothing to compare with" in first

    def test_identical_requests_have_no_changes(self) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        assert request_diff(body, dict(body)) == []

    def test_a_proxied_failed_tool_says_why_from_the_next_request(self) -> None:
        obs = parse_date_observations("turn1")
        tool = next(o for o in obs if isinstance(o, O.ToolStateChanged))
        state = DashboardState().apply_all(obs)
        body = {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool.id,
                            "is_error": True,
                            "content": "Permission denied: x",
                        }
                    ],
                }
            ]
        }
        state.apply(O.AttemptStarted(9.0, 1, 0, "POST", "/v1/messages", {}, body))
        entry = state.tool(tool.id)
        assert entry is not None and entry.error == "Permission denied: x"
        assert state.sent_results[("", tool.id)]["content"] == "Permission denied: x"


class TestControls:
    async def test_speed_can_be_set_after_the_loop_finished_for_the_next_run(self) -> None:
        factory = Factory(lambda: FakeSession(parse_date_observations(), finish_at_end=True))
        app = InspectorApp(factory, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await wait_for(
                lambda: bool(factory.sessions) and not app.session_running and bool(app.final_status), what="end"
            )
            factory.last.controller.speed = math.inf  # it ran at max
            await pilot.press("minus")
            await wait_for(lambda: app.restart_speed == 10.0, what="the next run's speed")
            assert "next run 10x" in app.speed_label()
            await pilot.press("minus", "minus")
            await wait_for(lambda: app.restart_speed == 2.0, what="slower again")
            await pilot.press("r")
            await wait_for(lambda: len(factory.sessions) == 2, what="the restart")
            assert ("set_speed", 2.0) in factory.last.controller.calls
            assert app.restart_speed is None

    async def test_a_disabled_key_says_why(self) -> None:
        factory = Factory(lambda: FakeSession(parse_date_observations(), finish_at_end=True))
        app = InspectorApp(factory, clock=lambda: 0.0)
        messages: list[Message] = []
        async with app.run_test(size=WIDE, message_hook=messages.append) as pilot:
            await wait_for(
                lambda: bool(factory.sessions) and not app.session_running and bool(app.final_status), what="end"
            )
            await pilot.press("space")
            await wait_for(lambda: any(isinstance(m, InspectorApp.ControlUsed) and not m.ok for m in messages))
            refused = next(m for m in messages if isinstance(m, InspectorApp.ControlUsed) and not m.ok)
            assert refused.name == "pause" and "r restarts" in refused.detail
            assert any("r restarts" in n.message for n in app._notifications)
            assert factory.last.controller.calls == []

    def test_next_speed_walks_the_ladder_and_stops_at_its_ends(self) -> None:
        assert next_speed(1.0, 1) == 2.0 and next_speed(math.inf, 1) == math.inf
        assert next_speed(math.inf, -1) == 10.0 and next_speed(0.25, -1) == 0.25
        assert next_speed(3.0, -1) == 2.0  # off the ladder


class TestSmallTerminals:
    @pytest.mark.parametrize("width", [60, 80, 100, 160])
    async def test_the_footer_keeps_the_essentials_at_every_width(self, width: int) -> None:
        app = synthetic("tools_running")
        async with app.run_test(size=(width, 24)) as pilot:
            footer = app.dashboard.query_one(KeyFooter)
            needed_keys = ("toggle_pause", "step('event')", "step('block')", "step('turn')", "cancel", "quit")

            def laid_out() -> bool:  # the footer recomposes as bindings change: wait for its keys' own layout
                keys = list(footer.query(FooterKey))
                return bool(keys) and all(k.region.width for k in keys) and {k.action for k in keys} >= set(needed_keys)

            await wait_for(laid_out, what="the footer keys, laid out")
            shown = {k.action for k in footer.query(FooterKey)}
            for needed in ("toggle_pause", "step('event')", "step('block')", "step('turn')", "cancel", "quit"):
                assert needed in shown, (width, shown)
            assert not set(footer.hidden_ids) & ESSENTIAL
            right = max(k.region.right for k in footer.query(FooterKey))
            assert right <= width  # nothing pushed off the screen

    async def test_the_footer_is_recomposed_only_when_its_keys_change(self) -> None:
        """Textual recomposes the footer (mounting every key again) at each bindings signal: a focus change between
        panes, the screen stack, any `bindings=True` reactive. Signals that change nothing the keys show are
        skipped; one that shows a key (the conversation keys, from the second conversation on) recomposes."""
        app = synthetic("tools_running")
        async with app.run_test(size=(160, 48)) as pilot:
            footer = app.dashboard.query_one(KeyFooter)
            await wait_for(lambda: bool(list(footer.query(FooterKey))), what="the footer keys")
            await pilot.pause()
            before = footer.recomposed
            keys = [k for k in footer.query(FooterKey)]
            for pane in ("#events", "#blocks", "#tools", "#events"):
                app.dashboard.query_one(pane).focus()
                await pilot.pause()
            app.refresh_bindings()
            await pilot.pause()
            assert footer.recomposed == before and list(footer.query(FooterKey)) == keys  # the same widgets
            assert "conversations" not in {k.action for k in keys}
            app._many_conversations = True  # (what a second conversation sets)
            app.refresh_bindings()
            await wait_for(lambda: "conversations" in {k.action for k in footer.query(FooterKey)}, what="the key")
            assert footer.recomposed == before + 1

    async def test_group_labels_are_spaced(self) -> None:
        app = synthetic("tools_running")
        async with app.run_test(size=SMALL) as pilot:
            footer = app.dashboard.query_one(KeyFooter)

            def footer_line() -> str:  # the footer's keys and labels drawn where their layout puts them
                cells = [" "] * SMALL[0]
                for w in footer.query("FooterKey, FooterLabel"):
                    text = w.render()
                    plain = getattr(text, "plain", str(text))
                    for i, ch in enumerate(plain):
                        if 0 <= w.region.x + i < len(cells):
                            cells[w.region.x + i] = ch
                return "".join(cells)

            # (under load the footer's layout lands frames after its widgets: wait for it, then check the spacing)
            await wait_for(lambda: "q Quit" in footer_line(), what="the footer laid out")
            line = footer_line()
            assert "n/b/t Step c Cancel" in line and "+/- Speed" in line and "q Quit" in line, line

    async def test_below_the_minimum_the_dashboard_says_so_and_maximize_still_works(self) -> None:
        app = synthetic()
        async with app.run_test(size=(50, 14)) as pilot:
            await pilot.pause()
            assert app.screen.has_class("-tiny")
            assert app.dashboard.query_one("#too-small").display and not app.dashboard.query_one("#panes").display
            await pilot.press("4")
            await pilot.pause()
            assert app.screen.maximized is app.panes[3]
            assert app.panes[3].region.height > 5

    def test_the_fault_summary(self) -> None:
        state = DashboardState().apply_all(parse_date_observations(variant="overloaded"))
        summary = fault_summary(state)
        assert summary.startswith("1 failed attempt")
        assert fault_summary(DashboardState().apply_all(parse_date_observations())) == ""


@pytest.mark.parametrize(
    ("buf", "reason"),
    [
        ('{"path": "src/da', "unterminated string at col 10"),
        ('{"a": 1', "expecting ',' delimiter at col 8"),
        ('{"a": 1}', None),
    ],
)
def test_the_repaired_preview_says_why_the_buffer_is_not_json_yet(buf: str, reason: str | None) -> None:
    assert incomplete_reason(buf) == reason


def test_the_palette_is_built_from_the_bindings() -> None:
    names = {name for name, _, _ in binding_commands(InspectorApp.BINDINGS, lambda b: b.key)}
    assert {"control: step event", "control: pause", "view: timing", "export: export", "app: quit"} <= names
    ids = [b.id for b in InspectorApp.BINDINGS if isinstance(b, Binding) and b.id and b.description]
    assert len(names) == len(ids)


class TestProxyAndServe:
    @pytest.mark.parametrize("size", [SMALL, WIDE])
    @pytest.mark.parametrize("kind", ["proxy", "proxy+openai", "serve"])
    async def test_the_address_to_point_a_harness_at_is_shown_in_full(self, kind: str, size: tuple[int, int]) -> None:
        """Both SDKs' variables where both APIs are answered (serve; a proxy with an OpenAI upstream, as watch
        runs it); a short form of both when the long one does not fit."""
        url = "http://127.0.0.1:54321"
        source: dict[str, Any] = {"type": kind.split("+")[0], "upstream": "https://api.anthropic.com", "listen": url}
        source["name"] = "parse_date"
        if kind == "proxy+openai":
            source["openai_upstream"] = "https://api.openai.com/v1"
        factory = Factory(lambda: FakeSession([O.LoopStarted(0.0, source, "", None)], source=source))
        app = InspectorApp(factory, clock=lambda: 0.0)
        async with app.run_test(size=size) as pilot:
            banner = app.dashboard.query_one("#connect")
            await wait_for(lambda: banner.display and banner.region.height == 1, what="the address line")
            await pilot.pause()
            text = str(banner.render())
            assert f"ANTHROPIC_BASE_URL={url}" in text
            both = kind != "proxy"
            assert (f"OPENAI_BASE_URL={url}/v1" in text or "OPENAI_BASE_URL: the same + /v1" in text) == both
            assert (f"OPENAI_BASE_URL={url}/v1" in text) == (both and size == WIDE)
            assert banner.region.width >= len(text.strip())  # nothing cut off at 80 columns

    async def test_the_address_goes_once_the_session_ended(self) -> None:
        """After the watched command exited (or the proxy stopped) nothing listens there: the line that said "point a
        harness here" with that address stayed, on a finished session."""
        url = "http://127.0.0.1:54321"
        source: dict[str, Any] = {"type": "proxy", "upstream": "https://api.anthropic.com", "listen": url}
        ended = O.LoopFinished(1.0, "finished", 0, [], [], None)
        runs: list[tuple[list[O.Observation], bool]] = [
            ([O.LoopStarted(0.0, source, "", None)], True),
            ([O.LoopStarted(0.0, source, "", None), ended], False),
        ]
        for obs, shown in runs:
            factory = Factory(partial(FakeSession, obs, source=source))
            app = InspectorApp(factory, clock=lambda: 0.0)
            count = len(obs)
            async with app.run_test(size=WIDE) as pilot:
                await wait_for(lambda: app.live.status.source.get("listen") == url, what="the session's start")
                await wait_for(lambda: app.live.n >= count, what="every observation")
                await pilot.pause()
                banner = app.dashboard.query_one("#connect")
                assert bool(banner.display) == shown, str(banner.render())


class TestCtrlC:
    async def test_watching_the_first_ctrl_c_goes_to_the_command_and_the_second_quits(self) -> None:
        """`watch` with the dashboard (which holds the terminal, so no SIGINT reaches the command): the first
        Ctrl-C is sent to the command, the second stops watching; a command no longer running means quit at
        once. Without a command (any other session), Ctrl-C says how to quit, as Textual's does."""
        for running in (True, False):
            sent: list[str] = []

            def interrupt(running: bool = running) -> bool:
                sent.append("SIGINT")
                return running

            app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0, interrupt=interrupt)
            async with app.run_test(size=SMALL) as pilot:
                await pilot.press("ctrl+c")
                await pilot.pause()
                if running:
                    assert app.is_running and sent == ["SIGINT"]
                    assert any("press it again to stop watching" in n.message for n in app._notifications)
                    await pilot.press("ctrl+c")
                    await pilot.pause()
                assert not app.is_running and sent == ["SIGINT"]  # (the second one quits: no second signal)
        app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0)
        async with app.run_test(size=SMALL) as pilot:
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert app.is_running and any("to quit the app" in n.message for n in app._notifications)

    async def test_the_press_again_note_goes_when_the_command_ends(self) -> None:
        """The first Ctrl-C's note ("press it again to stop watching") stayed up after the command had ended on it
        (a second Ctrl-C then quits at once: there is nothing left to stop)."""
        factory = Factory(lambda: FakeSession(parse_date_observations("turn1")))
        app = InspectorApp(factory, clock=lambda: 0.0, interrupt=lambda: True)
        async with app.run_test(size=SMALL) as pilot:
            await wait_for(lambda: app.session_running, what="the session")
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert any("press it again to stop watching" in n.message for n in app._notifications)
            factory.sessions[0].finish()  # the command exited on it
            await wait_for(lambda: not app.session_running, what="the session's end")
            await pilot.pause()
            assert not any("press it again" in n.message for n in app._notifications)

    async def test_watching_r_does_not_restart_the_commands_one_run(self) -> None:
        """The watched command ran once: `r` says so instead of restarting a finished session (which failed with
        "server stopped: Bad file descriptor"); a session of any other source still restarts."""
        for watching in (True, False):
            factory = Factory(lambda: FakeSession(parse_date_observations(), finish_at_end=True))
            kw: dict[str, Any] = {"interrupt": lambda: False} if watching else {}
            app = InspectorApp(factory, clock=lambda: 0.0, **kw)
            async with app.run_test(size=SMALL) as pilot:
                await wait_for(lambda: not app.session_running and bool(app.final_status), what="the session's end")
                await pilot.press("r")
                if not watching:
                    await wait_for(lambda: len(factory.sessions) == 2, what="the restart")
                await pilot.pause()
                said = [n.message for n in app._notifications]
                assert any("watch runs its command once" in m for m in said) == watching
                assert len(factory.sessions) == (1 if watching else 2)


def painted(app: InspectorApp) -> str:
    """What the terminal shows (the SVG export of the composed screen), not what a widget would render now."""
    return app.export_screenshot().replace("&#160;", " ")


class TestWordsAfterTheEnd:
    async def test_finished_words_read_as_the_end(self) -> None:
        obs = parse_date_observations("opening")
        obs.append(O.LoopFinished(obs[-1].t, "finished", 1, [], [], None))  # a session that ended with no tools
        app = InspectorApp(observations=obs, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            diag = app.diagnostics_view.render_line(0).text
            assert "the stream was well-formed" in diag and "so far" not in diag
            assert app.tools_view.render_line(0).text.strip() == "no tool calls"

    async def test_while_running_the_words_say_so_far(self) -> None:
        app = synthetic("opening")
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert "well-formed so far" in app.diagnostics_view.render_line(0).text
            assert app.tools_view.render_line(0).text.strip() == "no tool calls yet"

    async def test_a_stream_that_came_after_the_first_frame_is_no_longer_missing(self) -> None:
        """The line said "no stream yet" through a whole live run (`inspector web`, `inspector`): its text changes
        when the first attempt starts, which is no new diagnostic; the panes skipped it until the session ended."""
        obs = parse_date_observations("opening")
        started = next(i for i, o in enumerate(obs) if isinstance(o, O.AttemptStarted))
        app = InspectorApp(observations=obs[:started], clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert "no stream yet" in painted(app)
            app.ingest(obs[started:])
            await pilot.pause()
            screen = painted(app)  # (what the terminal shows: the line rendered afresh was right, never repainted)
            assert "the stream is well-formed so far" in screen and "no stream yet" not in screen

    async def test_no_stray_cursor_after_a_cancel(self) -> None:
        obs = parse_date_observations()
        first_text = next(i for i, o in enumerate(obs) if isinstance(o, O.BlockDelta) and o.delta_type == "text_delta")
        streaming = obs[: first_text + 2]  # the text block is open, streaming

        def cursor_shown(app: InspectorApp) -> bool:
            view = app.assistant_view
            return any("▌" in view.render_line(y).text for y in range(view.size.height))

        app = InspectorApp(observations=streaming, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert cursor_shown(app)  # while it streams
        t = streaming[-1].t
        cancelled = [
            *streaming,
            O.LoopStateChanged(t, "cancelled", ""),
            O.LoopFinished(t, "cancelled", 1, [], [], None),
        ]
        app = InspectorApp(observations=cancelled, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert not cursor_shown(app)

    async def test_an_empty_first_json_fragment_is_not_waiting_anymore(self) -> None:
        obs = parse_date_observations("mid_tool_json")
        start = max(i for i, o in enumerate(obs) if isinstance(o, O.BlockOpened))
        block = obs[start]
        assert isinstance(block, O.BlockOpened)
        cut = obs[: start + 1] + [
            O.BlockDelta(block.t, block.turn, block.attempt, block.index, "input_json_delta", "", 0)
        ]
        app = InspectorApp(observations=cut, clock=lambda: 0.0)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            view = app.blocks_view
            text = "\n".join(view.render_line(y).text for y in range(view.size.height))
            assert "1 empty fragment so far" in text and "waiting for input_json_delta" not in text


async def test_clicking_a_disabled_footer_key_says_why() -> None:
    factory = Factory(lambda: FakeSession(parse_date_observations(), finish_at_end=True))
    app = InspectorApp(factory, clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(
            lambda: bool(factory.sessions) and not app.session_running and bool(app.final_status), what="the end"
        )
        footer = app.dashboard.query_one(KeyFooter)
        await wait_for(
            lambda: any(k.action == "cancel" and k.has_class("-disabled") for k in footer.query(FooterKey)),
            what="a disabled cancel key",
        )

        # the footer recomposes when the bindings change: click the current key, the disabled one, once its layout
        # has landed and it is still there after the app has handled what was pending (a recompose replaces every
        # key: the old, enabled one can still be in the DOM with its region while its replacement is mounted)
        def cancel_key() -> Any:
            return next(
                (
                    k
                    for k in footer.query(FooterKey)
                    if k.action == "cancel" and k.has_class("-disabled") and k.is_attached and k.region.width
                ),
                None,
            )

        deadline = time.monotonic() + 10.0
        while True:
            key = cancel_key()
            await pilot.pause()
            if key is not None and key is cancel_key():
                break
            assert time.monotonic() < deadline, "timed out waiting for the disabled cancel key to stay laid out"
        await pilot.click(key)
        await wait_for(lambda: any("r restarts" in n.message for n in app._notifications), what="why")
        assert factory.last.controller.calls == []


def test_the_request_view_of_a_responses_turn_shows_its_input_items() -> None:
    """A Responses request sends its history as `input`: the request view said `messages · 0`, showed the input as
    a parameter cut at 120 characters, diffed it as one changed parameter, and its full body gained a `messages`
    key the harness never sent. The input items are its history, listed and diffed one by one."""
    url = "http://127.0.0.1:8787/v1/responses"
    first: list[Any] = [{"role": "user", "content": "Weather in Kyiv?"}]
    items: list[Any] = [
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"location": "Kyiv"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
    ]
    state = DashboardState()
    for turn, inp in enumerate([first, first + items]):
        state.apply(O.TurnStarted(float(turn), turn))
        state.apply(O.AttemptStarted(float(turn), turn, 0, "POST", url, {}, {"model": "gpt-4o-mini", "input": inp}))
        state.apply(O.AttemptEnded(float(turn) + 0.5, turn, 0, "complete", None, "tool_use"))
    changes = [(c.op, c.where) for c in request_diff(state.requests[(0, 0)], state.requests[(1, 0)])]
    assert changes == [("+", "input[1]"), ("+", "input[2]")]
    # continued by previous_response_id, a request sends only its new items: added, not "input[0]" changed
    more = {"model": "gpt-4o-mini", "input": items[1:], "previous_response_id": "resp_1"}
    changes = [(c.op, c.where) for c in request_diff(state.requests[(0, 0)], more)]
    assert changes == [("+", "input[0]"), ("+", "previous_response_id")]
    text = request_detail(state, 1).body.plain
    assert "── input · 3" in text and "messages · " not in text
    assert "[1] function_call: " in text and "get_weather" in text and "[2] function_call_output: " in text
    assert '"messages"' not in text.split("── full body", 1)[1]
    params = text.split("── parameters ──", 1)[1].split("── ", 1)[0]
    assert "model" in params and "input" not in params


async def test_a_detail_title_is_shown_as_written_not_read_as_markup() -> None:
    """With a conversation chosen, `s` showed `Request ·  turn 2 (#4) · attempt 1`: the title's `[c2]` was read as
    Rich markup and dropped (so would be a tool's name in brackets). The top border says it as written."""
    app = InspectorApp(observations=two_cached_conversations(), clock=lambda: 0.0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("l", "down", "down", "enter")
        await wait_for(lambda: app.selected_conversation == "c2", what="c2 shown")
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, DetailScreen), what="the request view")
        await pilot.pause()
        title = _shown(app).title
        assert title.startswith("Request · [c2] turn ")
        assert title in app.export_screenshot().replace("&#160;", " ")  # what the screen shows

"""Every control, through the keyboard (whatever pane has focus) and the command palette, against a recording fake
controller; plus restart, export, maximize, raw view, time travel and error handling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList
from textual.message import Message
from textual.pilot import Pilot

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.record.recording import read_recording
from inspector.testing.dashboard import Factory, FakeSession, flushed, wait_for
from inspector.testing.synthetic import parse_date_observations
from inspector.tui.app import InspectorApp

SIZE = (140, 42)
PANES = ["events", "blocks", "tools", "assistant", "diagnostics"]
KEYS = [
    ("space", "toggle_pause", "pause"),
    ("n", ("step", "event"), "step event"),
    ("b", ("step", "block"), "step block"),
    ("t", ("step", "turn"), "step turn"),
    ("c", "cancel", "cancel"),
    ("plus", "faster", "faster"),
    ("minus", "slower", "slower"),
]


def live_app(observations: list[O.Observation] | None = None, **kw: Any) -> tuple[InspectorApp, Factory[FakeSession]]:
    obs = parse_date_observations("tools_running") if observations is None else observations
    factory = Factory(lambda: FakeSession(obs))
    return InspectorApp(factory, clock=lambda: 0.0, **kw), factory


async def started(pilot: Pilot[int], factory: Factory[FakeSession], n_obs: int | None = None) -> None:
    app = pilot.app
    assert isinstance(app, InspectorApp)
    await wait_for(lambda: bool(factory.sessions) and factory.last.started, what="the session to start")
    want = len(factory.last.observations) if n_obs is None else n_obs
    await wait_for(lambda: len(app.history) >= want, what="observations to be folded")


class TestKeys:
    @pytest.mark.parametrize("focus", PANES)
    async def test_control_keys_reach_the_controller_whatever_has_focus(self, focus: str) -> None:
        app, factory = live_app()
        messages: list[Message] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await started(pilot, factory)
            app.dashboard.query_one(f"#{focus}").focus()
            for key, _call, _control in KEYS:
                await pilot.press(key)
            calls = factory.last.controller.calls
            await wait_for(lambda: len(calls) == len(KEYS), what="every controller call")
            assert calls == [call for _k, call, _c in KEYS]

            def used() -> list[tuple[str, bool]]:
                return [(m.name, m.ok) for m in messages if isinstance(m, InspectorApp.ControlUsed)]

            await wait_for(lambda: len(used()) == len(KEYS), what="ControlUsed messages")
            assert used() == [(control, True) for _k, _c, control in KEYS]

    async def test_pause_and_step_on_a_watched_stream_are_hidden_and_say_why(self) -> None:
        """A watched stream (proxy, watch) cannot be paused or stepped: the keys did nothing and said nothing (the
        controller noted it where nobody read it, and the app reported the control as done)."""

        def watched() -> FakeSession:
            session = FakeSession(parse_date_observations("tools_running"))
            session.controller.can_pause = False  # type: ignore[attr-defined]  # (as WatchController says)
            return session

        factory = Factory(watched)
        app = InspectorApp(factory, clock=lambda: 0.0)
        messages: list[Message] = []
        notes: list[str] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
            await started(pilot, factory)
            # never available here: hidden (the footer keeps its room at 80 columns), and a press says why
            assert app.check_action("toggle_pause", ()) is False and app.check_action("step", ("event",)) is False
            assert app.check_action("cancel", ()) is True
            await pilot.press("space", "n")
            await flushed(app)
            assert factory.last.controller.calls == []
            used = [(m.name, m.ok) for m in messages if isinstance(m, InspectorApp.ControlUsed)]
            assert used == [("pause", False), ("step", False)]
            assert notes and all("do not apply to a watched stream" in n for n in notes)

    async def test_speed_label_follows_the_controller(self) -> None:
        app, factory = live_app()
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            await pilot.press("plus", "plus")
            await flushed(app)
            assert factory.last.controller.speed == 4.0
            assert app.status_bar.info.speed == "4x"
            await pilot.press("minus")
            await flushed(app)
            assert app.status_bar.info.speed == "2x"

    async def test_controls_are_refused_once_the_loop_finished(self) -> None:
        app, factory = live_app(parse_date_observations())
        messages: list[Message] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await started(pilot, factory)
            factory.last.finish()
            await wait_for(lambda: app.final_status == "finished", what="the session to end")
            assert app.check_action("toggle_pause", ()) is None  # shown, disabled
            app.action_toggle_pause()
            app.action_step("event")
            assert factory.last.controller.calls == []
            await wait_for(lambda: sum(isinstance(m, InspectorApp.ControlUsed) for m in messages) == 2)
            refused = [m for m in messages if isinstance(m, InspectorApp.ControlUsed)]
            assert [(m.name, m.ok) for m in refused] == [("pause", False), ("step event", False)]
            assert "r restarts" in refused[0].detail

    async def test_command_palette_offers_the_controls(self) -> None:
        app, factory = live_app()
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            await pilot.press("ctrl+p")
            await pilot.press(*"control: step event")
            await wait_for(
                lambda: (
                    "step event"
                    in str(app.screen.query("CommandList").first(CommandList).get_option_at_index(0).prompt)
                ),
                what="the command to be listed",
            )
            await pilot.press("enter")
            await wait_for(lambda: bool(factory.last.controller.calls), what="the palette command to run")
            assert factory.last.controller.calls == [("step", "event")]

    async def test_bindings_document_themselves(self) -> None:
        ids = {b.id for b in InspectorApp.BINDINGS if not isinstance(b, tuple)}
        for needed in (
            "pause",
            "step-event",
            "step-block",
            "step-turn",
            "cancel",
            "restart",
            "faster",
            "slower",
            "export",
            "raw",
            "timing",
            "max-events",
            "max-blocks",
            "max-tools",
            "max-assistant",
            "quit",
        ):
            assert needed in ids
        assert all(b.tooltip for b in InspectorApp.BINDINGS if not isinstance(b, tuple))


class TestSessionLifecycle:
    async def test_restart_of_a_source_without_a_speed_keeps_its_own(self) -> None:
        """A watched stream's controller has no `set_speed`: the restart goes on at the source's own pace."""

        def no_speed() -> FakeSession:
            session = FakeSession(parse_date_observations())

            def set_speed(speed: float) -> None:
                raise AttributeError("'WatchController' object has no attribute 'set_speed'")

            session.controller.set_speed = set_speed  # type: ignore[method-assign]
            return session

        factory = Factory(no_speed)
        app = InspectorApp(factory, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            await pilot.press("r")
            await wait_for(lambda: len(factory.sessions) == 2 and factory.last.started, what="a second session")
            assert app.session is factory.last and app.is_running

    async def test_restart_builds_a_new_session_and_resets_the_view(self) -> None:
        app, factory = live_app()
        messages: list[Message] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await started(pilot, factory)
            first = factory.last
            n = len(app.history)
            await pilot.press("r")
            await wait_for(lambda: len(factory.sessions) == 2 and factory.last.started, what="a second session")
            assert "cancel" in first.controller.calls  # the old loop is stopped
            assert factory.last.controller.calls[-1] == ("set_speed", 1.0)  # the speed carries over
            await wait_for(lambda: len(app.history) == n, what="the new session's observations")
            assert app.live.status.events == sum(isinstance(o, O.SSEEventSeen) for o in first.observations)
            # late observations of the old session are ignored
            first.bus.publish(O.LoopStateChanged(9.0, LoopState.ERROR, "late"))
            await flushed(app)
            assert app.live.status.loop_state != LoopState.ERROR
            assert any(isinstance(m, InspectorApp.SessionStarted) and m.generation == app.generation for m in messages)

    async def test_restarting_twice_leaves_only_the_new_runs_rows(self) -> None:
        """issue 18 §4: after `r` the Blocks, Tools and Assistant panes listed the old run's rows as well."""
        obs = parse_date_observations("tools_running")
        app, factory = live_app(obs)
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            await flushed(app)
            one_run = (app.blocks_view.row_count, app.tools_view.row_count, app.assistant_view.row_count)
            assert all(one_run)
            for restarts in (2, 3):
                await pilot.press("r")
                await wait_for(lambda: len(factory.sessions) == restarts and factory.last.started, what="restart")
                await wait_for(lambda: len(app.history) == len(obs), what="the new run folded")
                await flushed(app, 2)
            rows = (app.blocks_view.row_count, app.tools_view.row_count, app.assistant_view.row_count)
            assert rows == one_run
            assert app.dashboard.query_one("#tools-pane").border_title == f"③ Tools · {len(app.live.tools)}"
            await pilot.press("left")  # time travel shows the new run only too
            await flushed(app)
            assert app.tools_view.row_count <= one_run[1]

    async def test_a_crashing_session_shows_the_error_state(self) -> None:
        obs = parse_date_observations("tools_running")
        factory = Factory(lambda: FakeSession(obs, raise_error=RuntimeError("boom")))
        app = InspectorApp(factory, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.final_status == "error", what="the error state")
            await flushed(app)
            assert app.live.status.loop_state == LoopState.ERROR
            assert "RuntimeError: boom" in (app.live.status.error or "")
            await pilot.press("r")  # restart still works
            await wait_for(lambda: len(factory.sessions) == 2, what="a restart")

    async def test_an_error_message_with_brackets_is_said_as_written_not_read_as_markup(self) -> None:
        """An API's error message is text from outside: `bad value [/x] here` was read as markup by the error's
        notification, and painting it raised MarkupError: a traceback ended the dashboard (exit status 0). It is
        said as written (a notification from a widget too)."""
        said = "messages.0: bad value [/x] here [type=list_type, input_value='x'] [c2]"
        factory = Factory(lambda: FakeSession(parse_date_observations("opening"), raise_error=RuntimeError(said)))
        app = InspectorApp(factory, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.final_status == "error", what="the error state")
            await flushed(app)
            app.events_view.notify("a widget's [/y] note")
            await pilot.pause()
            shown = list(app._notifications)
            assert any(said in n.message for n in shown) and any(n.message == "a widget's [/y] note" for n in shown)
            # a toast paints its message as markup when `markup` is set (Content.from_markup: MarkupError here)
            assert [n.markup for n in shown] == [False, False]
            assert app.is_running and app.return_code is None

    async def test_a_session_that_ends_while_textual_closes_its_screens_is_no_traceback(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # CI saw it: the restarted session crashed while the test's app was closing; Textual had cleared its screen
        # stack, and setting the (bindings=True) reactive asked the absent screen for its bindings
        from unittest.mock import PropertyMock

        from textual.app import ScreenStackError

        from inspector.tui import messages as M

        app, factory = live_app(parse_date_observations())
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            monkeypatch.setattr(app, "_running", False)  # Textual's _shutdown sets this first, then closes screens
            no_screens = PropertyMock(side_effect=ScreenStackError("No screens on stack"))
            with monkeypatch.context() as m:
                m.setattr(InspectorApp, "screen", no_screens)
                app.on_session_ended(M.SessionEnded(app.generation, "error", "boom"))
            assert (app.final_status, app.session_running) == ("error", False)
            monkeypatch.setattr(app, "_running", True)

    async def test_a_factory_that_fails_keeps_the_app_alive(self) -> None:
        def broken() -> FakeSession:
            raise ValueError("no API key: set ANTHROPIC_API_KEY")

        app = InspectorApp(broken, clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await flushed(app)
            assert "no API key" in app.note
            assert app.status_bar.info.note.startswith("cannot start")
            await pilot.press("q")
        assert app.return_value == 1

    async def test_quit_returns_the_loop_status(self) -> None:
        app, factory = live_app(parse_date_observations())
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            factory.last.finish()
            await wait_for(lambda: app.final_status == "finished")
            await pilot.press("q")
        assert app.return_value == 0

    async def test_space_while_the_session_starts_starts_it_paused(self) -> None:
        """`inspector replay` spends a second or two importing the SDK before its session starts: space then said
        "no loop is running here" and the replay streamed unpaused. The pause is kept for the start (space again
        takes it back)."""
        factory = Factory(lambda: FakeSession(parse_date_observations("opening")))
        for presses, paused in ((1, True), (2, False)):
            app = InspectorApp(factory, clock=lambda: 0.0, autostart=False)
            async with app.run_test(size=(160, 48)) as pilot:
                app.note = "starting…"  # (what on_mount says while the SDK is imported off the UI thread)
                for _ in range(presses):
                    await pilot.press("space")
                assert app.session is None and app.pause_at_start is paused
                assert not any("no loop is running" in n.message for n in app._notifications)
                app.note = ""
                assert app.start_session()
                await pilot.pause()
                calls = factory.sessions[-1].controller.calls
                assert calls == (["toggle_pause"] if paused else []), calls


class TestViews:
    async def test_export_writes_a_replayable_recording(self, tmp_path: Path) -> None:
        app, factory = live_app(parse_date_observations(), export_dir=tmp_path)
        messages: list[Message] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await started(pilot, factory)
            await pilot.press("e")
            await wait_for(lambda: any(isinstance(m, InspectorApp.Exported) for m in messages), what="export")
        exported = next(m for m in messages if isinstance(m, InspectorApp.Exported))
        assert exported.error is None and exported.path is not None and exported.path.parent == tmp_path
        rec = read_recording(exported.path)
        reads = [o for o in factory.last.observations if isinstance(o, O.ReadReceived)]
        assert sum(len(a.reads) for a in rec.attempts()) == len(reads)
        assert b"".join(r.data for a in rec.attempts() for r in a.reads) == b"".join(o.data for o in reads)

    async def test_export_reads_the_spilled_history_in_its_worker_not_on_the_ui_thread(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Issue 17 §4: `e` listed every observation (reading back every spilled block) on the UI thread."""
        import threading

        from inspector.state.travel import History, SpilledObservations

        obs = parse_date_observations()
        app = InspectorApp(observations=obs, clock=lambda: 0.0, export_dir=tmp_path)
        app.history = History(block=16)  # spill the history to disk in small blocks
        app.history.follow(app.live)
        ui = threading.get_ident()
        read_back: list[int] = []
        block = SpilledObservations._block

        def noting(self: SpilledObservations, b: int) -> list[O.Observation]:  # notes the thread that reads back
            read_back.append(threading.get_ident())
            return block(self, b)

        monkeypatch.setattr(SpilledObservations, "_block", noting)
        messages: list[Message] = []
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            assert app.history.observations.spilled_bytes > 0
            read_back.clear()
            await pilot.press("e")
            await wait_for(lambda: any(isinstance(m, InspectorApp.Exported) for m in messages), what="export")
        assert ui not in read_back
        exported = next(m for m in messages if isinstance(m, InspectorApp.Exported))
        assert exported.path is not None
        rec = read_recording(exported.path)
        reads = [o for o in obs if isinstance(o, O.ReadReceived)]
        assert b"".join(r.data for a in rec.attempts() for r in a.reads) == b"".join(o.data for o in reads)

    @pytest.mark.parametrize("n,pane", [(1, "events"), (2, "blocks"), (3, "tools"), (4, "assistant")])
    async def test_maximize_and_restore(self, n: int, pane: str) -> None:
        app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(str(n))
            assert app.screen.maximized is app.dashboard.query_one(f"#{pane}-pane")
            await pilot.press(str(n))
            assert app.screen.maximized is None
            await pilot.press(str(n), "escape")
            assert app.screen.maximized is None

    async def test_raw_toggle(self) -> None:
        app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("v")
            assert app.events_view.raw and app.events_view.row_count == app.live.reads.lines
            view = app.events_view
            first = "".join(seg.text for seg in view.render_row(0, 120))
            assert first.startswith("── read 1 · turn 1.1 · ")  # (reads count from 1, as the status line's do)
            await pilot.press("v")
            assert not app.events_view.raw and app.events_view.row_count == len(app.live.events)


class TestTimeTravel:
    @pytest.mark.parametrize("focus", PANES)
    async def test_cursor_keys_whatever_has_focus(self, focus: str) -> None:
        obs = parse_date_observations()
        app = InspectorApp(observations=obs, clock=lambda: 0.0, replay=True)
        n = sum(isinstance(o, O.SSEEventSeen) for o in obs)
        async with app.run_test(size=SIZE) as pilot:
            app.dashboard.query_one(f"#{focus}").focus()
            await pilot.press("left")
            assert app.cursor == n - 1 and app.shown_state.status.events == n - 1
            await pilot.press("home")
            assert app.cursor == 1 and app.shown_state.status.events == 1
            await pilot.press("right", "right")
            assert app.cursor == 3 and app.shown_state.status.events == 3
            await pilot.press("end")
            assert app.cursor is None and app.shown_state is app.live

    async def test_every_pane_shows_the_past(self) -> None:
        obs = parse_date_observations()
        app = InspectorApp(observations=obs, clock=lambda: 0.0, replay=True)
        async with app.run_test(size=SIZE) as pilot:
            k = app.live.blocks[(0, 0, 2)].first_event + 1  # the second tool's first fragment
            app.set_cursor(k)
            past = app.shown_state
            assert app.blocks_view.state is past and app.tools_view.state is past
            assert app.assistant_view.state is past and app.events_view.state is past
            tool = past.tool("toolu_01Rd2")
            assert not past.blocks[(0, 0, 2)].closed and tool is not None and tool.state == "streaming_input"
            assert app.events_view.cursor_evno == k
            assert app.status_bar.info.cursor == k
            # nothing was re-run: the live state is untouched
            assert app.live.status.finished == "finished"

    async def test_time_travel_while_the_loop_runs(self) -> None:
        app, factory = live_app()
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot, factory)
            await pilot.press("left")
            k = app.cursor
            factory.last.bus.publish(O.LoopStateChanged(5.0, LoopState.PAUSED))  # the live view goes on underneath
            await flushed(app)
            assert app.cursor == k and app.live.status.loop_state == LoopState.PAUSED
            assert app.shown_state.status.loop_state != LoopState.PAUSED
            await pilot.press("end")
            assert app.shown_state.status.loop_state == LoopState.PAUSED


class TestTail:
    async def test_follows_the_tail_then_counts_new_rows_when_scrolled_up(self) -> None:
        obs = parse_date_observations()
        cut = len(obs) // 2
        app = InspectorApp(observations=obs[:cut], clock=lambda: 0.0)
        async with app.run_test(size=SIZE) as pilot:
            view = app.events_view
            assert view.follow and view.scroll_y == view.max_scroll_y
            view.scroll_home(animate=False, immediate=True)
            await pilot.pause()
            assert not view.follow
            before = view.row_count
            app.ingest(obs[cut:])
            added = view.row_count - before
            assert added > 0 and view.scroll_y == 0  # not yanked to the bottom
            # the view posts NewRowsNoted; its pane shows it in the border
            await wait_for(lambda: app.panes[0].border_subtitle == f"+{added} new ↓ (end)", what="+N new")
            view.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            assert view.follow
            await wait_for(lambda: app.panes[0].border_subtitle == "", what="the note cleared")

    async def test_clicking_an_event_row_time_travels_to_it(self) -> None:
        app = InspectorApp(observations=parse_date_observations(), clock=lambda: 0.0, replay=True)
        async with app.run_test(size=SIZE) as pilot:
            view = app.events_view
            row = int(view.scroll_offset.y) + 2
            await pilot.click(view, offset=(10, 2))
            await wait_for(lambda: app.cursor is not None, what="the click's TimeTravelRequested")
            assert app.cursor is not None and app.cursor == app.live.events.evno[row] and app.cursor > 0
            assert app.events_view.cursor_evno == app.cursor


async def test_a_restart_records_beside_the_first_run_never_over_it(tmp_path: Path) -> None:
    """`run --record rr.jsonl`, then `r`: the restart wrote rr.jsonl again, and the first run's recording was lost
    without a word. Each restart now records to rr-2.jsonl, rr-3.jsonl... (the first free name), and says so."""
    import math

    from inspector.cli import build_parser
    from inspector.cli.run import _make_factory, run_recordings

    rec = tmp_path / "rr.jsonl"
    argv = ["run", "--scenario", "parse_date", "--speed", "max", "--record", str(rec)]
    args = build_parser(argv).parse_args(argv)
    factory, _source = _make_factory(args, tui=True)
    app = InspectorApp(factory, clock=lambda: 0.0)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        await wait_for(lambda: app.final_status == "finished", what="the first run", timeout=60)
        first = rec.read_bytes()
        assert read_recording(rec).turns
        app.session.controller.set_speed(math.inf)  # type: ignore[union-attr]
        await pilot.press("r")
        await wait_for(lambda: app.final_status == "finished" and (tmp_path / "rr-2.jsonl").exists(), what="restart")
        await wait_for(lambda: app.session is not None and not app.session_running, what="the second run's end")
    assert rec.read_bytes() == first  # the first run's recording, as it was
    assert read_recording(tmp_path / "rr-2.jsonl").turns
    assert f"recording this run to {tmp_path / 'rr-2.jsonl'}" in notes
    (tmp_path / "rr-3.jsonl").write_text("")  # taken (as rr-2.jsonl is): a restart takes the first free name
    paths = run_recordings(str(rec))
    assert [paths(), paths()] == [str(rec), str(tmp_path / "rr-4.jsonl")]
    assert run_recordings(None)() is None

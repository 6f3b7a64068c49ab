"""The dashboard: four live panes over one agent loop (or a replay), with controls and time travel.

Data flow: the session's bus calls the pending list's `append` inline (the loop never waits for the UI);
a timer folds the pending observations into the state `refresh_hz` times a second and points the panes at it. In time
travel (left/right/home/end) the panes show `History.state_at(k)` instead: the state rebuilt from the observation
fold as of event k, without re-running anything. The timing view (`i`, widgets/timing.py) analyses a Recording
rebuilt from the observations (`inspector.record.timing.RecordingBuilder`) when opened, and at most a few times a second
while open.

Launch: `run_dashboard(session_factory)` where the factory returns a Session-like object (`.bus`, `.controller`,
`async run()`, `.source`) and is called again on restart.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import importlib
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

from rich.text import Text
from textual import on, work
from textual.actions import parse as parse_action
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.worker import Worker, WorkerState

from inspector.core.pacing import SPEED_LADDER, speed_label
from inspector.observe import observations as O
from inspector.observe.states import TERMINAL_LOOP_STATES, LoopState
from inspector.record.recording import Recording
from inspector.state.conversations import EventSource
from inspector.state.convfilter import ConversationFilter
from inspector.state.fold import DashboardState
from inspector.state.travel import History
from inspector.tui import messages as M
from inspector.tui.budget import FrameBudget
from inspector.tui.commands import InspectorCommands
from inspector.tui.detail import Detail, block_detail, diagnostic_detail, event_detail, tool_detail
from inspector.tui.export import default_export_path, write_recording_and_page
from inspector.tui.request import request_detail
from inspector.tui.screen import DashboardScreen, Pane
from inspector.tui.widgets.assistant import AssistantView
from inspector.tui.widgets.blocks import BlocksView
from inspector.tui.widgets.conversations import ConversationsView
from inspector.tui.widgets.detail import DetailScreen
from inspector.tui.widgets.diagnostics import DiagnosticsView
from inspector.tui.widgets.events import EventsView
from inspector.tui.widgets.status import StatusBar, StatusInfo
from inspector.tui.widgets.timeline import Timeline
from inspector.tui.widgets.timing import TimingAnalysis, TimingInputs, TimingScreen
from inspector.tui.widgets.tools import ToolsView
from inspector.tui.widgets.wording import turn_label


class ControllerLike(Protocol):
    @property
    def state(self) -> str: ...  # (read only: the sessions' controllers expose it as a property)

    def toggle_pause(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def step(self, unit: Literal["event", "block", "turn"] = "event") -> None: ...
    def cancel(self) -> None: ...
    def faster(self) -> None: ...
    def slower(self) -> None: ...


class SessionLike(Protocol):
    @property
    def bus(self) -> O.ObservationBus: ...
    @property
    def controller(self) -> ControllerLike: ...
    @property
    def source(self) -> dict[str, Any]: ...

    async def run(self) -> Any: ...


SessionFactory = Callable[..., SessionLike]

# what building a session imports (the SDK and the loop): loaded in a worker thread after the first frame
SESSION_MODULES = ("anthropic", "httpx2", "inspector.agent.loop", "inspector.scenarios.transport")
STEP_UNITS = ("event", "block", "turn")
_STEP_UNIT: dict[str, Literal["event", "block", "turn"]] = {"event": "event", "block": "block", "turn": "turn"}
CONTROLS = ("pause", "step", "cancel", "faster", "slower")
CONTROL_ACTIONS = {"toggle_pause": "pause", "step": "step", "cancel": "cancel", "faster": "faster", "slower": "slower"}
EXIT_CODES = {"finished": 0, "error": 1, "cancelled": 130}
# a firehose (a replay at max speed): observations arriving faster than this, per second. A real stream brings at most
# about 600 (a read, an SSE event and a delta per token, 200 tokens a second for the fastest models); a rate, not a
# count per fold, so that a frame that came late (a big fold, a loaded machine) does not hide the firehose and make
# every later frame a full repaint (which slows the replay's loop, which makes the batches smaller still: on a loaded
# 2-core machine a replay at max speed brings ~1,400 a second, and used to be repainted 30 times a second)
BUSY_RATE = 1000.0
BUSY_FOLDS = 5  # ... for this many folds in a row (~1/6 s)
BUSY_BATCH = 300  # observations in one fold: a firehose whatever the rate
SYNC_SELECT = 5000  # observations a chosen conversation's view folds on the UI thread (more: in a worker thread)


def _warm_prices() -> None:
    from inspector.record.accounting import warm_prices  # (imported with it, after the first frame)

    warm_prices()


def next_speed(current: float, direction: int) -> float:
    """The next speed on the ladder up (+1) or down (-1) from `current` (which may be off the ladder)."""
    if direction > 0:
        return next((v for v in SPEED_LADDER if v > current), SPEED_LADDER[-1])
    return next((v for v in reversed(SPEED_LADDER) if v < current), SPEED_LADDER[0])


class InspectorApp(App[int]):
    """Stream Inspector's dashboard."""

    CSS_PATH = "app.tcss"
    TITLE = "Stream Inspector"
    COMMANDS = App.COMMANDS | {InspectorCommands}
    SYNC_SELECT = SYNC_SELECT
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding(
            "space",
            "toggle_pause",
            "Pause",
            id="pause",
            tooltip="Pause or resume the stream (running tools go on; queued tools wait)",
        ),
        Binding(
            "n",
            "step('event')",
            "Event",
            id="step-event",
            group=Binding.Group("Step", compact=True),
            tooltip="Step: process exactly one more SSE event, then pause",
        ),
        Binding(
            "b",
            "step('block')",
            "Block",
            id="step-block",
            group=Binding.Group("Step", compact=True),
            tooltip="Step: run to the next content_block_stop, then pause",
        ),
        Binding(
            "t",
            "step('turn')",
            "Turn",
            id="step-turn",
            group=Binding.Group("Step", compact=True),
            tooltip="Step: run to the end of the turn (tools included), then pause",
        ),
        Binding(
            "c",
            "cancel",
            "Cancel",
            id="cancel",
            tooltip="Cancel: close the response, cancel tools, keep the history valid",
        ),
        Binding("r", "restart", "Restart", id="restart", tooltip="Restart the scenario or the replay from the top"),
        Binding(
            "plus,equals_sign",
            "faster",
            "Faster",
            id="faster",
            key_display="+",
            group=Binding.Group("Speed", compact=True),
            tooltip="Faster scripted/replayed pacing",
        ),
        Binding(
            "minus",
            "slower",
            "Slower",
            id="slower",
            key_display="-",
            group=Binding.Group("Speed", compact=True),
            tooltip="Slower scripted/replayed pacing",
        ),
        Binding("e", "export", "Export", id="export", tooltip="Export the recording (.jsonl) and its HTML page"),
        Binding(
            "s",
            "request",
            "Request",
            id="request",
            tooltip="What the harness sent for this turn (system, tools, messages) and its diff with the last turn",
        ),
        Binding("v", "toggle_raw", "Raw", id="raw", tooltip="SSE pane: events / raw bytes with read boundaries"),
        Binding(
            "i",
            "timing",
            "Timing",
            id="timing",
            tooltip="Timing: per-turn times, gap histograms, pings and the buffering verdict (i / esc: close)",
        ),
        Binding(
            "1",
            "maximize(1)",
            "Events",
            id="max-events",
            group=Binding.Group("Max", compact=True),
            tooltip="Maximize the SSE events pane (again or escape: restore)",
        ),
        Binding(
            "2",
            "maximize(2)",
            "Blocks",
            id="max-blocks",
            group=Binding.Group("Max", compact=True),
            tooltip="Maximize the Blocks pane",
        ),
        Binding(
            "3",
            "maximize(3)",
            "Tools",
            id="max-tools",
            group=Binding.Group("Max", compact=True),
            tooltip="Maximize the Tools pane",
        ),
        Binding(
            "4",
            "maximize(4)",
            "Assistant",
            id="max-assistant",
            group=Binding.Group("Max", compact=True),
            tooltip="Maximize the Assistant pane",
        ),
        Binding(
            "l",
            "conversations",
            "Conversations",
            id="conversations",
            tooltip="The conversation list (open it, or go to it; again: close it); enter on a row shows that "
            "conversation in the panes",
        ),
        Binding(
            "f",
            "follow_newest",
            "Follow newest",
            id="follow-newest",
            tooltip="The panes follow the newest conversation (on / off)",
        ),
        Binding("left", "cursor('prev')", "Back", id="cursor-prev", show=False, tooltip="Time travel: one event back"),
        Binding(
            "right", "cursor('next')", "Forward", id="cursor-next", show=False, tooltip="Time travel: one event forward"
        ),
        Binding(
            "home", "cursor('home')", "First", id="cursor-home", show=False, tooltip="Time travel: the first event"
        ),
        Binding("end", "cursor('end')", "Live", id="cursor-end", show=False, tooltip="Back to the live view"),
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit (cancels a running loop)"),
        # `watch`: the first Ctrl-C goes to the watched command, the second stops watching (else Textual's own)
        Binding(
            "ctrl+c",
            "interrupt",
            show=False,
            priority=True,
            id="interrupt",
            tooltip="watch: Ctrl-C goes to the command, a second one stops watching (else: how to quit)",
        ),
    ]

    # ------------------------------------------------------------------------------------------------ messages
    # (defined in inspector/tui/messages.py; kept here as names for callers that know them as InspectorApp.X)
    ControlUsed = M.ControlUsed
    SessionStarted = M.SessionStarted
    SessionEnded = M.SessionEnded
    CursorMoved = M.CursorMoved
    Exported = M.Exported

    # ------------------------------------------------------------------------------------------------ reactive state
    cursor: reactive[int | None] = reactive(None, bindings=True, init=False)
    """Time travel: the event shown (None: live)."""
    session_running: reactive[bool] = reactive(False, bindings=True, init=False)
    raw: reactive[bool] = reactive(False, bindings=True, init=False)
    """The SSE pane shows raw bytes with read boundaries instead of events."""
    restart_speed: reactive[float | None] = reactive(None, bindings=True, init=False)
    """The speed the next restart starts at (set by +/- once the loop has ended)."""

    # ------------------------------------------------------------------------------------------------ setup
    def __init__(
        self,
        session_factory: SessionFactory | None = None,
        *,
        source: dict[str, Any] | None = None,
        replay: bool = False,
        observations: Iterable[O.Observation] = (),
        clock: Callable[[], float] = time.monotonic,
        export_dir: str | Path | None = None,
        refresh_hz: float = 30.0,
        autostart: bool = True,
        cursor: int | None = None,
        interrupt: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self.session_factory = session_factory
        # `watch`: Ctrl-C to the command (True: it was running and got it); a second Ctrl-C quits
        self.interrupt_command = interrupt
        self.interrupts = 0
        self.pause_at_start = False  # space pressed while the session was starting: it starts paused
        self._reselect: str | None = None  # the conversation shown before a restart, shown again once it is seen
        self.source = dict(source or {})
        self.replay = replay
        self.clock = clock
        self.export_dir = Path(export_dir) if export_dir is not None else Path.cwd()
        self.refresh_hz = refresh_hz
        self.autostart = autostart
        self.history = History()
        self.live = DashboardState()
        self.history.follow(self.live)  # checkpoints for time travel are copies of the live state
        self.cursor_state: DashboardState | None = None
        self.session: SessionLike | None = None
        self.request_times: Mapping[int, float] | None = None  # a replay's, as recorded (start_session)
        self.generation = 0
        self.final_status: str | None = None
        self.note = ""
        self._pending: list[O.Observation] = []
        self._unsubscribe: Callable[[], None] | None = None
        self._deliver: Callable[[], None] | None = None  # a threaded session's `deliver` (start_session)
        self._wall_last = clock()
        self._initial = list(observations)
        self._initial_cursor = cursor
        self.flushes = 0  # flushes that folded something (tests, benchmarks)
        self._busy_until = 0.0
        self._last_fold = 0.0  # (frame clock) when the last batch was folded
        self._fast_folds = 0  # consecutive folds above BUSY_RATE
        self.frame_clock: Callable[[], float] = time.monotonic  # paces the repaints (tests step it by hand)
        self.budget = FrameBudget(1 / refresh_hz)  # the UI work keeps to a share of the time (tui/budget.py)
        self._unshown = False  # observations were folded since the panes were last pointed at the state
        self._frozen_at = 0.0
        self.ticks = 0  # refresh timer ticks
        self.timing_analysis = TimingAnalysis()  # kept between openings of the timing view (incremental)
        self.dashboard = DashboardScreen()  # the panes; a restart replaces it with a fresh one
        # a proxied session of several conversations: the one the panes show (None: all) and its own fold
        self.selected_conversation: str | None = None
        self.follow_newest = False
        self.conversation_filter: ConversationFilter | None = None
        self._many_conversations = False
        self._select_gen = 0  # a conversation's view folded in a worker is installed only if still chosen
        # quit_soon: asked for (maybe before the app ran), the loop it quits on (once the app runs), and whether the
        # app can quit yet (once its first frame is drawn)
        self._quit_asked = False
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self._quittable = False

    def on_load(self) -> None:
        self._ui_loop = asyncio.get_running_loop()
        if self._quit_asked:  # (asked before the app ran: it does not start)
            self._quittable = True
            self.action_quit()

    def _now_quittable(self) -> None:
        self._quittable = True
        if self._quit_asked:  # (asked while it started)
            self.action_quit()

    def _quit_if_quittable(self) -> None:
        if self._quittable:
            self.action_quit()

    def quit_soon(self) -> None:
        """Quit as `q` does, from a signal handler (or any thread), whenever it comes: before the app runs (it does
        not start), while it starts (once its first frame is drawn: an exit while its screen mounts ended it with
        a traceback, NoMatches), or once it has ended (nothing then). An exception raised into its event loop
        instead (a handler that raises, as KeyboardInterrupt) could land in any of Textual's tasks, which may swallow
        it: the app ran on, or ended with a traceback."""
        self._quit_asked = True
        loop = self._ui_loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # (its loop closed: it has ended)
                loop.call_soon_threadsafe(self._quit_if_quittable)

    def get_driver_class(self) -> Any:
        """Under textual-serve (`inspector web`), a web driver that ends the app when its browser is gone."""
        from inspector.tui.web import driver_for

        return driver_for(super().get_driver_class())

    # the panes of the current dashboard screen (a restart replaces the screen, and with it every pane)
    @property
    def events_view(self) -> EventsView:
        return self.dashboard.events_view

    @property
    def blocks_view(self) -> BlocksView:
        return self.dashboard.blocks_view

    @property
    def tools_view(self) -> ToolsView:
        return self.dashboard.tools_view

    @property
    def timeline(self) -> Timeline:
        return self.dashboard.timeline

    @property
    def assistant_view(self) -> AssistantView:
        return self.dashboard.assistant_view

    @property
    def diagnostics_view(self) -> DiagnosticsView:
        return self.dashboard.diagnostics_view

    @property
    def status_bar(self) -> StatusBar:
        return self.dashboard.status_bar

    @property
    def panes(self) -> list[Pane]:
        return self.dashboard.panes

    @property
    def diagnostics_pane(self) -> Pane:
        return self.dashboard.diagnostics_pane

    async def on_mount(self) -> None:
        await self.push_screen(self.dashboard)
        self.call_after_refresh(self._now_quittable)  # (quit_soon)
        if self._initial:
            self.ingest(self._initial)
            self._initial = []
        self.set_interval(1 / self.refresh_hz, self._tick, name="flush")
        if self._initial_cursor is not None:
            self.set_cursor(self._initial_cursor)
        self.show()
        if self.session_factory is not None and self.autostart and "anthropic" not in sys.modules:
            # the first frame first: the SDK (about a second of CPU) is imported off the UI thread, then genai-prices
            self.note = "starting…"
            self.call_after_refresh(self._import_in_background)
            return
        if self.session_factory is not None and self.autostart:
            self.start_session()
        # genai-prices (~0.25 s of CPU) imported on a thread, not on the UI's when the first attempt ends, and after
        # the first frame, never while it is drawn (tools/bench_startup.py: the first frame's CPU)
        self.call_after_refresh(lambda: self.set_timer(0.5, _warm_prices))

    def _import_in_background(self) -> None:
        self.run_worker(
            self._import_then_start,
            thread=True,
            group="startup",
            name="startup",
            description="import the SDK",
            exit_on_error=False,
        )

    def _import_then_start(self) -> None:
        """(Worker thread) import the modules a session needs, then start it on the app's loop."""
        for module in SESSION_MODULES:
            importlib.import_module(module)
        # then genai-prices and its data, before the session starts: not while the first frame is drawn, and not in a
        # thread that would take the GIL from the loop's reads mid-stream (the first attempt's end prices it)
        from inspector.observe.usage import Usage
        from inspector.record.cost import price

        with contextlib.suppress(Exception):  # not installed, or broken: the status line says "unpriced" then
            price(Usage(input=1, reported=True), "claude-sonnet-4-6")
        self.call_from_thread(self._started_after_import)

    def _started_after_import(self) -> None:
        if self.note == "starting…":
            self.note = ""
        self.start_session()

    # ------------------------------------------------------------------------------------------------ session
    def start_session(self) -> bool:
        """Build a session with the factory, subscribe to its bus and run it in a worker."""
        if self.session_factory is None:
            return False
        self.generation += 1
        gen = self.generation
        try:
            session = self.session_factory()
        except Exception as e:  # noqa: BLE001 (a source that cannot start, whatever the reason: said, the app kept)
            self.note = f"cannot start: {e}"
            self.notify(str(e), title="Cannot start the session", severity="error", timeout=8)
            self.show()
            return False
        self.session = session
        self.source = dict(getattr(session, "source", None) or self.source)
        # a replay's recorded request times: its cache verdicts' time between turns (the TTL) is the recording's, not
        # the replay's clock, which runs at the replay's speed (as `replay --headless` has it)
        recorded = getattr(session, "recorded_request_times", None)
        self.request_times = recorded() if callable(recorded) else None
        # the subscriber: the pending list's own append (C, ~50 ns an observation: a Python method was ~5x that).
        # A stopped session is unsubscribed (stop_session) before the next one starts: nothing late gets in
        self._unsubscribe = session.bus.subscribe(self._pending.append)
        # a threaded session's observations: delivered by the fold itself, at each tick (and before a forced frame),
        # not by waking this loop once per batch (sessions.sources._Relay: each wake-up is a GIL hand-over from a
        # busy session thread, which a replay at max speed paid ~400 times at 100k events)
        deliver = getattr(session, "deliver", None)
        if callable(deliver) and hasattr(session, "delivered_by_caller"):
            session.delivered_by_caller = True
            self._deliver = deliver
        self.session_running = True
        self.final_status = None
        self.run_worker(
            self._run_session(session, gen),
            name=f"session-{gen}",
            group="session",
            description="agent loop",
            exit_on_error=False,
        )
        if self.pause_at_start:  # (space pressed while it started: before its first read)
            self.pause_at_start = False
            ok, _why = self.control_available("pause")
            if ok:
                with contextlib.suppress(Exception):  # (said like any control that fails: never a traceback)
                    self._ctl().toggle_pause()
        self.post_message(M.SessionStarted(gen, self.source))
        return True

    async def _run_session(self, session: SessionLike, gen: int) -> None:
        status, error = "error", None
        try:
            result = await session.run()
            status = getattr(result, "status", "finished") or "finished"
            error = getattr(result, "error", None)
        except asyncio.CancelledError:
            status, error = "cancelled", "stopped"
            raise
        except Exception as e:  # noqa: BLE001 (the loop handles its own errors; the last net: never a traceback)
            status, error = "error", f"internal error: {type(e).__name__}: {e}"
        finally:
            if gen == self.generation:
                self.post_message(M.SessionEnded(gen, status, error))

    def on_session_ended(self, message: M.SessionEnded) -> None:
        if message.generation != self.generation:
            return
        if not self.is_running:
            # Textual is shutting down (its screens are being closed, maybe gone): keep the status, draw nothing
            self.set_reactive(InspectorApp.session_running, False)
            self.final_status = message.status
            return
        self.session_running = False
        self.final_status = message.status
        if self.interrupts:  # (the command ended: "press it again to stop watching" no longer holds)
            self.clear_notifications()
        self.flush()
        if self.live.status.finished is None and message.status != "cancelled":
            # the loop died without saying so: record it in the fold so every view shows the error state
            t = self.live.status.t_last
            self._pending += [
                O.LoopStateChanged(t, LoopState.ERROR, message.error or ""),
                O.LoopFinished(t, "error", len(self.live.turns), [], [], message.error),
            ]
            self.flush()
        if message.status == "error":
            self.notify(
                message.error or "the loop ended with an error", title="Loop error", severity="error", timeout=8
            )

    def stop_session(self) -> None:
        self._deliver = None  # (what the old session publishes late is delivered when its run ends, to nobody)
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.session is not None and self.session_running:
            try:
                self.session.controller.cancel()
            except Exception as e:  # noqa: BLE001 (cleanup: the session is dropped anyway; logged, not raised)
                self.log.warning(f"cancelling the session failed: {e!r}")
        self.session_running = False
        self.generation += 1  # late observations of the old session are dropped

    # ------------------------------------------------------------------------------------------------ folding
    def ingest(self, observations: Iterable[O.Observation]) -> None:
        """Fold observations now (initial history, tests)."""
        self._pending.extend(observations)
        self.flush()

    def _tick(self) -> None:
        if not self.is_running or self._closing or self._closed:
            return
        self.flush(force=False)
        self.ticks += 1

    def flush(self, *, force: bool = True) -> None:
        """Fold pending observations into the live state and refresh the panes.

        The timer calls it with force=False: the fold always runs, the panes are repainted when the frame budget
        says (`FrameBudget`: after a frame that cost c, not before ~12 c later; a cheap frame, 30 times a second), so
        painting never takes more than a small share of the loop's time. A forced flush (a control key, the end of
        the session) paints at once."""
        if self._deliver is not None:
            self._deliver()  # (into self._pending)
        batch = self._pending
        wall = self.frame_clock()
        if batch:
            fast = len(batch) >= BUSY_RATE * max(wall - self._last_fold, 1 / self.refresh_hz)
            self._fast_folds = self._fast_folds + 1 if fast else 0
            self._last_fold = wall
            # a firehose: a big batch at once (the initial history), or a sustained rate (a burst of a few dozen
            # observations, one network read's worth, is not one: the panes show it at the next frame)
            busy = len(batch) >= BUSY_BATCH or self._fast_folds >= BUSY_FOLDS
            batch = batch.copy()
            self._pending.clear()  # (the same list: its append is the bus's subscriber)
            # appended, and folded into self.live (the history follows it: see __init__ and the restart), as
            # append + apply one by one would, checkpoints included, in a few calls per batch
            self.history.extend_live(batch)
            if self.conversation_filter is not None:
                cf = self.conversation_filter
                for obs in batch:
                    cf.apply(obs)
            self._conversations_changed()
            self._wall_last = self.clock()
            self.flushes += 1
            self._unshown = True
            if busy:
                self._busy_until = wall + 0.5
                if wall - self._frozen_at > 1.0:
                    # A firehose allocates millions of long-lived objects (observations, rows): keep them out of
                    # the cyclic GC's full scans, which would otherwise stall the loop for 100+ ms each time.
                    gc.freeze()
                    self._frozen_at = wall
        elif self._frozen_at and wall - self._frozen_at > 2.0 and wall > self._busy_until:
            gc.unfreeze()  # calm again: let the collector see everything (cyclic garbage is not leaked)
            self._frozen_at = 0.0
        budget = self.budget
        budget.spent(self.dashboard.take_paint_seconds())  # Textual's layout and paint of the last frame's changes
        # not due yet: wait, unless the stream went quiet (a tick with nothing new) with folded observations not
        # shown yet: a burst (a network read, a step) is shown as soon as it is over, only a flood waits
        if not force and not budget.due(wall) and (batch or not self._unshown):
            return
        start = self.frame_clock()
        self.show()
        budget.frame(start, self.frame_clock() - start)

    @property
    def shown_state(self) -> DashboardState:
        if self.cursor is not None and self.cursor_state is not None:
            return self.cursor_state
        if self.conversation_filter is not None:
            return self.conversation_filter.state
        return self.live

    # -- conversations (a proxied session)
    def _conversations_changed(self) -> None:
        """After a fold: the keys appear with the second conversation; follow-newest moves to a new one."""
        table = self.live.conversations
        many = len(table) >= 2
        if many != self._many_conversations:
            self._many_conversations = many
            self.refresh_bindings()
        if self.follow_newest and table.newest is not None and table.newest != self.selected_conversation:
            self.select_conversation(table.newest, follow=True)
        elif self._reselect is not None and self._reselect in table.by_id:  # (after a restart: see action_restart)
            self.select_conversation(self._reselect)

    def select_conversation(self, conversation: str | None, *, follow: bool = False) -> None:
        """Show one conversation in the panes (None: the whole session). Its view is folded once from the
        session's observations from its first on (then kept up to date, O(1) per observation): on the UI thread
        for up to `SYNC_SELECT` observations, else in a worker thread (reading the spilled history costs about
        30 us an observation) while the panes keep showing what they showed, the status line saying so."""
        self.follow_newest = follow
        self._reselect = None  # (a choice made: the one shown before a restart is not chosen again)
        if conversation == self.selected_conversation:
            return
        entry = self.live.conversations.by_id.get(conversation or "")
        if conversation is not None and entry is None:
            return
        self.selected_conversation = conversation
        self._select_gen += 1
        if entry is None:
            self._install_filter(None, 0, self._select_gen)
            return
        first = entry.first_obs
        history = self.history
        # what belongs to no turn (source, loop state) from the live state; later changes are folded in order
        before = bisect.bisect_left(history.event_pos, first)  # the session's events before it
        cf = ConversationFilter(entry.id, self.live, before)
        total = len(history.observations)
        if total - first <= self.SYNC_SELECT:
            for obs in history.observations.range(first, total):
                cf.apply(obs)
            self._install_filter(cf, total, self._select_gen)
            return
        self.note = f"reading the turns of {entry.id}…"
        self.show()
        self.run_worker(
            partial(self._fold_conversation, cf, history.observations.frozen(), first, self._select_gen),
            thread=True,
            group="conversation",
            name=f"conversation-{entry.id}",
            description="fold one conversation's observations",
            exit_on_error=False,
        )

    def _fold_conversation(self, cf: ConversationFilter, frozen: Iterable[O.Observation], first: int, gen: int) -> None:
        """(Worker thread) fold the conversation's view from the frozen history; only `cf` is touched here."""
        n = 0
        for i, obs in enumerate(frozen):
            if i >= first:
                cf.apply(obs)
            n = i + 1
        self.call_from_thread(self._install_filter, cf, n, gen)

    def _install_filter(self, cf: ConversationFilter | None, folded: int, gen: int) -> None:
        """Point the panes at a conversation's view (None: the whole session), once it has every observation."""
        if gen != self._select_gen:
            return  # another choice came since
        if cf is not None:
            history = self.history
            for obs in history.observations.range(folded, len(history.observations)):  # flushed meanwhile
                cf.apply(obs)
        if self.note.startswith("reading the turns of "):
            self.note = ""
        self.conversation_filter = cf
        self.dashboard.reset_panes()
        self.post_message(M.ConversationShown(self.selected_conversation, self.follow_newest))
        self.show()

    def action_conversations(self) -> None:
        self.dashboard.toggle_list()
        self.show()

    def action_follow_newest(self) -> None:
        if self.follow_newest:
            self.follow_newest = False
            self.post_message(M.ConversationShown(self.selected_conversation, False))
            self.notify("the panes stay on this conversation", title="Follow newest: off", timeout=3)
            self.show()
            return
        newest = self.live.conversations.newest
        self.select_conversation(newest, follow=True)
        self.notify(f"the panes show the newest conversation ({newest})", title="Follow newest: on", timeout=3)
        self.show()

    def on_conversations_view_conversation_chosen(self, message: ConversationsView.ConversationChosen) -> None:
        message.stop()
        self.select_conversation(message.conversation)

    def now(self) -> float:
        """Loop time for elapsed labels: the last observation's time, advanced by the clock while the loop runs."""
        state = self.shown_state
        t = state.status.t_last
        if self.cursor is None and self.session_running and state.status.loop_state not in TERMINAL_LOOP_STATES:
            t += max(0.0, self.clock() - self._wall_last)
        return t

    def session_now(self) -> float:
        """The session's time for the conversation list's ages ("3s ago"): one clock for every conversation, the
        whole session's (not the shown conversation's, whose last observation may be older than another one's).
        It advances by the clock since the last fold while the session runs and, for a live session (watch, proxy),
        after its end too: the ages keep counting, as a process list's do (they froze when the watched command
        ended). A replay's stop at its end (the recording's time ends there); time travel gives them as of its
        event."""
        if self.cursor is not None and self.cursor_state is not None:
            return self.cursor_state.status.t_last
        st = self.live.status
        t = st.t_last
        running = self.session_running and st.loop_state not in TERMINAL_LOOP_STATES
        if running or (self.session is not None and not self.replay):
            t += max(0.0, self.clock() - self._wall_last)
        return t

    def show(self) -> None:
        """Point every pane at the shown state (each skips the work when its part did not change)."""
        self._unshown = False
        at = self.cursor_state if self.cursor is not None else None
        traveling = at is not None
        self.dashboard.show(
            self.shown_state,
            now=self.now(),
            ages_now=self.session_now(),
            cursor=self.cursor,
            live=self.cursor is None and self.session_running,
            info=self._status_info(),
            source=self.source,
            on_error=self._view_error,
            # (time travel shows the whole session as of an event: the list says so, "● all")
            conversations=(
                (at or self.live).conversations,
                None if traveling else self.selected_conversation,
                self.follow_newest and not traveling,
            ),
        )

    def _view_error(self, error: Exception) -> None:
        message = f"display error: {type(error).__name__}: {error}"
        if message != self.note:
            self.note = message
            self.log.error(message)
            self.notify(message, title="Stream Inspector", severity="error", timeout=6)

    def _status_info(self) -> StatusInfo:
        return StatusInfo(
            total_events=self.history.event_count,
            cursor=self.cursor,
            speed=self.speed_label(),
            note=self.note,
            replay=self.replay,
            timing_note=self.timing_note(),
            live_state=self.live.status.loop_state,
            # (time travel shows the whole session: the list says "all")
            conversation=self.selected_conversation if self.cursor is None else None,
        )

    def timing_note(self) -> str:
        """A caveat about the source's timing (a HAR replay: "HAR timing is per response, not per read")."""
        for source in (self.live.status.source, self.source):
            note = (source or {}).get("timing_note") if isinstance(source, dict) else None
            if note:
                return str(note)
        return ""

    def speed_label(self) -> str:
        if self.restart_speed is not None and not self.session_running:
            return f"next run {speed_label(self.restart_speed)}"
        c = self.session.controller if self.session is not None else None
        try:
            return str(getattr(c, "speed_label", "") or "")
        except Exception:  # noqa: BLE001 (a label read from the source's controller: a status line never fails)
            return ""

    # ------------------------------------------------------------------------------------------------ controls
    @property
    def controller(self) -> ControllerLike | None:
        return self.session.controller if self.session is not None else None

    def control_available(self, control: str) -> tuple[bool, str]:
        if self.session is None:
            if control == "pause" and self.starting:
                return True, ""  # (it starts paused: action_toggle_pause)
            return False, "no loop is running here"
        if control in ("faster", "slower") and not self.session_running:
            if self.session_factory is None or self.watching:
                return False, "nothing to restart: the speed has no run to apply to"
            return True, ""  # sets the speed of the next restart
        if not self.session_running or self.live.status.loop_state in TERMINAL_LOOP_STATES:
            then = "" if self.watching else ": r restarts"
            return False, f"the loop has {self.final_status or self.live.status.loop_state}{then}"
        if (control == "pause" or control.startswith("step")) and not getattr(self.controller, "can_pause", True):
            return False, "pause and step do not apply to a watched stream: it belongs to another program"
        return True, ""

    @property
    def starting(self) -> bool:
        """The session is about to start (its SDK is being imported off the UI thread)."""
        return self.session is None and self.session_factory is not None and self.note == "starting…"

    @property
    def watching(self) -> bool:
        """`inspector watch`'s dashboard (it has a command to send Ctrl-C to): its session is the command's one run,
        there is nothing to restart."""
        return self.interrupt_command is not None

    def disabled_reason(self, action: str) -> str:
        """Why an action is disabled right now (what a disabled key says when pressed)."""
        if action in CONTROL_ACTIONS:
            return self.control_available(CONTROL_ACTIONS[action])[1]
        if action == "restart":
            if self.watching:
                return "watch runs its command once: run inspector watch again to watch another run"
            return "nothing to restart: this view shows a finished list of observations"
        if action in ("conversations", "follow_newest"):
            return "this session has one conversation: the panes show it"
        return "not available here"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # None: shown in the footer but disabled (dimmed); pressing it says why (run_action)
        if action in ("toggle_pause", "step") and not getattr(self.controller, "can_pause", True):
            return False  # (a watched stream: never available, so hidden, and the footer keeps room; a press says why)
        if action in CONTROL_ACTIONS:
            return True if self.control_available(CONTROL_ACTIONS[action])[0] else None
        if action == "restart":
            if self.watching:
                return False  # (watch runs its command once: hidden; a press says so)
            return True if self.session_factory is not None else None
        if action in ("conversations", "follow_newest"):
            return self._many_conversations  # (hidden, not dimmed, for a single conversation)
        return True

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """A disabled key pressed (or a palette command): say why instead of doing nothing."""
        if isinstance(action, str):
            target, name, params = parse_action(action)
            if not target and (default_namespace is None or default_namespace is self):
                if not self.check_action(name, params):
                    why = self.disabled_reason(name)
                    self.notify(why, title=f"{name.replace('_', ' ')}: not now", severity="warning", timeout=4)
                    self.post_message(M.ControlUsed(CONTROL_ACTIONS.get(name, name), False, why))
                    return True
        return await super().run_action(action, default_namespace, namespaces)

    def _control(self, name: str, fn: Callable[[], Any]) -> bool:
        ok, why = self.control_available(name)
        if not ok:
            self.notify(why, title=name, severity="warning", timeout=3)
            self.post_message(M.ControlUsed(name, False, why))
            return False
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (a control that fails is said in a notification, never a traceback)
            self.notify(f"{type(e).__name__}: {e}", title=name, severity="error")
            self.post_message(M.ControlUsed(name, False, str(e)))
            return False
        self.post_message(M.ControlUsed(name, True))
        self.flush()
        return True

    def _ctl(self) -> ControllerLike:
        """The running session's controller (only called once `control_available` said there is one)."""
        assert self.controller is not None
        return self.controller

    def action_toggle_pause(self) -> None:
        if self.starting:  # (no session yet: the SDK is still being imported, ~1-2 s)
            # pressed while the session starts: it starts paused (again: it does not), as it would have paused
            self.pause_at_start = not self.pause_at_start
            said = "the session starts paused" if self.pause_at_start else "the session starts unpaused"
            self.notify(said, title="pause", timeout=3)
            self.post_message(M.ControlUsed("pause", True))
            return
        self._control("pause", lambda: self._ctl().toggle_pause())

    def action_step(self, unit: str) -> None:
        step = _STEP_UNIT.get(unit)  # (a binding's argument is a str: the Literal the controllers take, or nothing)
        if step is None:
            return
        self._control(f"step {step}", lambda: self._ctl().step(step))

    def action_cancel(self) -> None:
        self._control("cancel", lambda: self._ctl().cancel())

    def action_faster(self) -> None:
        self._speed(+1)

    def action_slower(self) -> None:
        self._speed(-1)

    def _speed(self, direction: int) -> None:
        """+/-: the running loop's speed, or (once it has ended) the speed the next restart starts at."""
        name = "faster" if direction > 0 else "slower"
        if self.session_running:
            self._control(name, lambda: self._ctl().faster() if direction > 0 else self._ctl().slower())
            return
        ok, why = self.control_available(name)
        if not ok:
            self.notify(why, title=name, severity="warning", timeout=3)
            self.post_message(M.ControlUsed(name, False, why))
            return
        current = self.restart_speed
        if current is None:
            current = getattr(self.controller, "speed", 1.0)
            current = current if isinstance(current, (int, float)) else 1.0
        self.restart_speed = next_speed(float(current), direction)
        self.notify(f"the next run (r) starts at {speed_label(self.restart_speed)}", title="Speed", timeout=3)
        self.post_message(M.ControlUsed(name, True, f"next run {speed_label(self.restart_speed)}"))
        self.show()

    async def action_restart(self) -> None:
        if self.session_factory is None:
            self.notify("nothing to restart: this view has no session", severity="warning", timeout=3)
            return
        speed = self.restart_speed
        c = self.controller
        if speed is None and c is not None:
            speed = getattr(c, "speed", None)
        # the conversation shown (or following the newest) is shown again once the new run has it
        reselect, follow = self.selected_conversation, self.follow_newest
        self.stop_session()
        self.history = History()
        self.live = DashboardState()
        self.history.follow(self.live)  # checkpoints for time travel are copies of the live state
        self._pending = []
        self.cursor = self.cursor_state = None
        self.note = ""
        self.selected_conversation, self.conversation_filter, self.follow_newest = None, None, follow
        self._reselect = None if follow else reselect
        self._select_gen += 1
        self._many_conversations = False
        self.refresh_bindings()
        self.timing_analysis = TimingAnalysis()
        # a fresh screen: no pane keeps the old run's rows, caches or scroll positions
        while len(self.screen_stack) > 1 and not isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        self.dashboard = DashboardScreen(raw=self.raw)
        await self.switch_screen(self.dashboard)
        if self.start_session() and speed is not None and isinstance(speed, (int, float)):
            try:
                self.session.controller.set_speed(speed)  # type: ignore[union-attr]
            except (AttributeError, NotImplementedError, TypeError, ValueError) as e:  # a source without a speed:
                # (a watched stream) keeps its own
                self.log.info(f"speed not carried over to the restart: {e!r}")
        self.restart_speed = None
        self.post_message(M.ControlUsed("restart", True))
        recorder = getattr(self.session, "recorder", None)
        if recorder is not None and isinstance(getattr(recorder, "label", None), str):  # (the last run's is kept)
            self.notify(f"recording this run to {recorder.label}", timeout=6)
        self.show()

    def action_toggle_raw(self) -> None:
        self.raw = not self.raw

    def watch_raw(self, raw: bool) -> None:
        self.dashboard.set_raw(raw)
        self.show()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification is plain text (widgets' too, which pass Textual's default `markup=True`): what it says
        comes from outside (an API's error message, an exception, a path), and read as markup `[/x]` raised
        MarkupError while painting the toast, a traceback that ended the dashboard, and `[c2]` vanished."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- read anything in full
    def action_request(self) -> None:
        """The request view of the shown turn (what the harness sent, and the diff with the previous turn)."""
        self.flush()
        state = self.shown_state
        self.open_detail(request_detail(state, state.status.turn, request_times=self.request_times))

    def on_detail_requested(self, message: M.DetailRequested) -> None:
        self.flush()
        self.open_detail(self.detail_of(message.kind, message.key))

    def detail_of(self, kind: str, key: Any) -> Detail:
        state = self.shown_state
        events = self.shown_events()
        if kind == "event":
            return event_detail(state, events, int(key))
        if kind == "block":
            return block_detail(state, tuple(key))
        if kind == "tool":
            return tool_detail(state, tuple(key), self.now())  # (conversation, tool id)
        if kind == "diagnostic":
            return diagnostic_detail(state, events, int(key))
        if kind == "attempt":
            return request_detail(state, key[0], key[1], self.request_times)
        if kind == "turn":
            return request_detail(state, int(key), request_times=self.request_times)
        return Detail(kind, Text(f"nothing to show for {kind} {key!r}"))

    def open_detail(self, detail: Detail) -> None:
        if isinstance(self.screen, DetailScreen):
            self.screen.dismiss(None)
        self.push_screen(DetailScreen(detail))

    def shown_events(self) -> EventSource:
        """The history as the shown state numbers its events (one conversation's view numbers its own)."""
        cf = self.conversation_filter
        if cf is not None and self.cursor is None:
            return cf.events_of(self.history)
        return self.history

    def on_events_view_time_travel_requested(self, message: EventsView.TimeTravelRequested) -> None:
        cf = self.conversation_filter
        if cf is not None and self.cursor is None:  # the view's event k: the session's event number
            evno = cf.session_event(message.evno)
            if evno is not None:
                self.set_cursor(evno)
            return
        self.set_cursor(message.evno)

    def action_timing(self) -> None:
        """Open (or close) the timing view."""
        if isinstance(self.screen, TimingScreen):
            self.screen.dismiss(None)
            return
        self.flush()
        self.push_screen(TimingScreen(self.timing_analysis, self.timing_inputs))

    def timing_inputs(self) -> TimingInputs:
        return TimingInputs(
            self.history,
            self.cursor,
            self.timing_note(),
            getattr(self.session, "recording", None),
            self.source,
            self.session_running,
            lambda turn: turn_label(self.live, turn),
        )

    def action_maximize(self, n: int) -> None:
        if self.screen is self.dashboard:
            self.dashboard.toggle_maximize(int(n))

    def action_interrupt(self) -> None:
        """Ctrl-C. Watching a command: the first goes to the command (as it would without the dashboard, which
        holds the terminal), the second stops watching. Else Textual's own (it says how to quit)."""
        if self.interrupt_command is None:
            self.action_help_quit()
            return
        self.interrupts += 1
        if self.interrupts == 1 and self.interrupt_command():
            self.notify("Ctrl-C went to the command: press it again to stop watching", title="watch")
            return
        self.action_quit()

    def action_quit(self) -> None:  # type: ignore[override]  # (App's is async; ours exits at once)
        self.stop_session()
        status = self.final_status or self.live.status.finished
        if status is None and self.session is None and self.note:
            status = "error"  # the session could not even start
        self.exit(EXIT_CODES.get(status or "", 130 if self.session is not None else 0))

    # -- time travel
    def action_cursor(self, where: str) -> None:
        self.flush()
        n = self.history.event_count
        if where == "end":
            self.set_cursor(None)
            return
        if n == 0:
            return
        if where == "home":
            k = 1
        elif where == "prev":
            k = n - 1 if self.cursor is None else self.cursor - 1
        elif where == "next":
            if self.cursor is None:
                return
            k = self.cursor + 1
        else:
            return
        self.set_cursor(max(0, min(n, k)))

    def set_cursor(self, k: int | None) -> None:
        """Show the state as of event k (None: live)."""
        if k is None:
            self.cursor = self.cursor_state = None
        else:
            k = max(0, min(self.history.event_count, k))
            self.cursor = k
            self.cursor_state = self.history.state_at(k)
        self.post_message(M.CursorMoved(self.cursor))
        if k is None:
            self.dashboard.follow_tail()
        self.show()

    # -- export
    def action_export(self) -> None:
        self.flush()
        if not self.history.observations:
            self.notify("nothing to export yet", severity="warning", timeout=3)
            return
        path = default_export_path(self.export_dir, self.source or self.live.status.source)
        secrets = list(getattr(self.session, "secrets", None) or ())  # the key, masked as --record masks it
        # a replay's observations carry the replay's clock (its speed, max: no silence left): the export takes the
        # recording's own times, as `dump` gives them (record/retime.py)
        recorded = getattr(self.session, "recording", None) if self.replay else None
        # the spilled blocks are read back in the worker thread, not here (a long session: many MB of pickles)
        observations = self.history.observations.frozen()
        source = dict(self.live.status.source or self.source)
        self.export(path, observations, source, secrets, recorded if isinstance(recorded, Recording) else None)

    @work(thread=True, exclusive=False, group="export", exit_on_error=False, description="export a recording")
    def export(
        self,
        path: Path,
        observations: Iterable[O.Observation],
        source: dict[str, Any],
        secrets: list[str],
        recorded: Recording | None = None,
    ) -> None:
        """Write the recording in a thread; say how it went with an `Exported` message (never touches widgets)."""
        try:
            done = write_recording_and_page(path, observations, source, secrets, recorded)
        except Exception as e:  # noqa: BLE001 (a full disk, a read-only directory: a one-line error, no traceback)
            self.post_message(M.Exported(None, f"{type(e).__name__}: {e}"))
        else:
            self.post_message(M.Exported(done.recording, page=done.page, page_error=done.page_error))

    def on_exported(self, message: M.Exported) -> None:
        if message.path is not None and message.page is not None:
            self.notify(f"{message.path}\n{message.page}", title="Recording and HTML page exported", timeout=8)
        elif message.path is not None:
            self.notify(
                f"{message.path}\npage not written: {message.page_error}",
                title="Recording exported",
                severity="warning",
                timeout=8,
            )
        else:
            self.notify(message.error or "unknown error", title="Export failed", severity="error")

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group == "session" and event.state == WorkerState.ERROR:
            # only reachable if _run_session itself failed: keep the app, show the error
            self.note = f"internal error: {worker.error}"
            self.session_running = False
            self.show()


def quit_from_any_thread() -> Callable[[], None] | None:
    """For code the running dashboard calls (a session factory): a function that quits that dashboard from any
    thread (a signal handler's); None outside a running app."""
    from textual._context import active_app  # (what `textual.active_app` is: textual does not list it in __all__)

    try:
        app, loop = active_app.get(), asyncio.get_running_loop()
    except (LookupError, RuntimeError):
        return None

    def quit_app() -> None:
        loop.call_soon_threadsafe(app.action_quit)

    return quit_app


def run_dashboard(
    session_factory: SessionFactory | None = None,
    *,
    source: dict[str, Any] | None = None,
    replay: bool = False,
    replay_observations: Sequence[O.Observation] | None = None,
    export_dir: str | Path | None = None,
    made: Callable[[InspectorApp], object] | None = None,
    **app_kwargs: Any,
) -> int:
    """Open the dashboard on a session (the factory is called again on restart); returns an exit code:
    0 finished, 1 error, 130 cancelled or quit while running.

    `replay_observations`: show a finished list of observations (time travel only; no session needed).
    `made`: called with the app before it runs (e.g. to keep it, for :meth:`InspectorApp.quit_soon`)."""
    app = InspectorApp(
        session_factory,
        source=source,
        replay=replay or replay_observations is not None,
        observations=replay_observations or (),
        export_dir=export_dir,
        **app_kwargs,
    )
    if made is not None:
        made(app)
    code = app.run()
    return int(code) if isinstance(code, int) else 0


__all__ = ["InspectorApp", "run_dashboard", "SessionLike", "ControllerLike", "Pane", "DashboardScreen"]

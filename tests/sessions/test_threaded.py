"""A threaded session (the dashboard's): the loop and its HTTP run on a thread and event loop of their own, so the
time a read arrives is taken where it arrives. A consumer whose event loop blocks (a slow UI frame) leaves the
recorded gaps as the server paced them; the observations reach the consumer in order; pause / step / cancel work."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from inspector.observe import observations as O
from inspector.scenarios.model import Pacing, Scenario, TextBlock, TurnScript
from inspector.scenarios.render import render_turn
from inspector.sessions.sources import scenario_session
from inspector.testing.loop import custom_scenario

if TYPE_CHECKING:
    from inspector.sessions.sources import Session
    from inspector.testing.dashboard import Factory
    from inspector.tui.app import InspectorApp

PACED = Scenario(
    name="paced_reads",
    description="twelve reads, 40 ms apart",
    prompt="hi",
    seed=3,
    turns=[
        TurnScript(
            [TextBlock("one two three four five six seven eight nine ten eleven twelve", chunk=6)],
            pacing=Pacing(ttfb=0.05, event_gap=0.04, events_per_read=1),
        )
    ],
)


def _gaps(reads: list[O.ReadReceived]) -> list[float]:
    return [b.t_request - a.t_request for a, b in zip(reads, reads[1:], strict=False)]


async def test_a_blocked_consumer_leaves_the_recorded_gaps_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    session = scenario_session(custom_scenario(monkeypatch, PACED), speed=1.0)
    session.threaded = True
    plan = render_turn(PACED, 0, 0)
    seen: list[O.Observation] = []
    streamed = threading.Event()  # set on the session's thread once every planned read has arrived there
    blocked: list[bool] = []

    def on_session_thread(obs: O.Observation) -> None:
        if isinstance(obs, O.ReadReceived) and obs.read_index == len(plan.reads) - 1:
            streamed.set()

    def consumer(obs: O.Observation) -> None:
        seen.append(obs)
        if isinstance(obs, O.ReadReceived) and not blocked:
            session.loop.bus.subscribe(on_session_thread)  # the session's own bus, on its thread
            # a UI frame that blocks the consumer's event loop until the whole stream has arrived over there
            blocked.append(streamed.wait(10))

    session.bus.subscribe(consumer)
    result = await asyncio.wait_for(session.run(), 30)
    assert result.status == "finished"
    assert blocked == [True], "the stream went on while the consumer was blocked"
    reads = [o for o in seen if isinstance(o, O.ReadReceived)]
    assert [r.read_index for r in reads] == list(range(len(plan.reads)))
    planned = [r.delay for r in plan.reads[1:]]
    assert len(planned) >= 10
    for got, want in zip(_gaps(reads), planned, strict=True):
        assert abs(got - want) < 0.15, (got, want)  # the block (the rest of the stream) would show in a gap
    # every observation reached the consumer, in the order it was published
    assert isinstance(seen[0], O.LoopStarted) and isinstance(seen[-1], O.LoopFinished)
    assert [o.t for o in seen] == sorted(o.t for o in seen)


async def test_pause_step_resume_and_cancel_reach_the_session_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    session = scenario_session(custom_scenario(monkeypatch, PACED), speed=math.inf)
    session.threaded = True
    session.controller.pause()  # before the run: the stream is held at its first event
    held, stepped = asyncio.Event(), asyncio.Event()
    seen: list[O.Observation] = []

    def consumer(obs: O.Observation) -> None:
        seen.append(obs)
        if isinstance(obs, O.StreamHeld):
            held.set()
        elif isinstance(obs, O.SSEEventSeen) and held.is_set():
            stepped.set()  # an event processed while paused: the step let it through

    session.bus.subscribe(consumer)
    task = asyncio.ensure_future(session.run())
    await asyncio.wait_for(held.wait(), 10)
    assert session.controller.paused and not any(isinstance(o, O.SSEEventSeen) for o in seen)
    session.controller.step("event")
    await asyncio.wait_for(stepped.wait(), 10)
    with pytest.raises(ValueError):
        session.controller.step("nonsense")  # type: ignore[arg-type]  # (the point: a bad unit is refused at run time)
    session.controller.resume()
    result = await asyncio.wait_for(task, 10)
    assert result.status == "finished"
    controls = [o.control for o in seen if isinstance(o, O.ControlApplied)]
    assert controls[:2] == ["step_event", "resume"]

    session = scenario_session(custom_scenario(monkeypatch, PACED), speed=1.0)
    session.threaded = True
    session.controller.pause()
    held = asyncio.Event()
    session.bus.subscribe(lambda o: held.set() if isinstance(o, O.StreamHeld) else None)
    task = asyncio.ensure_future(session.run())
    await asyncio.wait_for(held.wait(), 10)
    session.controller.cancel()
    result = await asyncio.wait_for(task, 10)
    assert result.status == "cancelled"


# ------------------------------------------------------------------------------------------ in the dashboard


def _threaded_app(*, speed: float, paused: bool = False) -> tuple[InspectorApp, Factory[Session]]:
    from inspector.sessions import sources
    from inspector.testing.dashboard import Factory
    from inspector.tui.app import InspectorApp

    def make() -> Session:
        session = sources.scenario_session("parse_date", speed=speed)
        session.threaded = True
        if paused:
            session.controller.pause()  # before the run: applied at once
        return session

    factory = Factory(make)
    return InspectorApp(factory), factory


async def test_the_dashboard_drives_a_threaded_session() -> None:
    from inspector.observe.states import LoopState
    from inspector.testing.dashboard import flushed, wait_for

    def sse(app: InspectorApp) -> list[O.SSEEventSeen]:
        return [o for o in app.history.observations if isinstance(o, O.SSEEventSeen)]

    app, factory = _threaded_app(speed=math.inf, paused=True)
    async with app.run_test(size=(140, 42)) as pilot:
        await wait_for(lambda: bool(factory.sessions) and len(app.history) >= 1, 10, "the loop to start")
        for expected in (1, 2):
            await pilot.press("n")
            await wait_for(lambda: len(sse(app)) >= expected, 10, f"event {expected}")
            await wait_for(lambda: factory.last.controller.state == LoopState.PAUSED, 10, "the loop to pause again")
            await flushed(app, 2)
            assert len(sse(app)) == expected  # exactly one per step
        await pilot.press("space")
        await wait_for(lambda: app.final_status == "finished", 30, "the loop to finish")
        await flushed(app)
        assert app.live.status.loop_state == LoopState.FINISHED and len(app.live.tools) == 4
        assert factory.last._thread is not None and not factory.last._thread.is_alive()
        assert factory.last.delivered_by_caller  # (its ticks delivered every step above: never a wake-up)


async def test_a_threaded_session_records_every_observation(tmp_path: Path) -> None:
    from inspector.record.recording import read_recording

    path = tmp_path / "run.jsonl"
    session = scenario_session("weather", speed=math.inf, record=path)
    session.threaded = True
    seen: list[O.Observation] = []

    def consumer(obs: O.Observation) -> None:
        if not seen:  # the consumer is slow: nothing is delivered before the session's thread has ended
            assert session._thread is not None
            session._thread.join(20)
        seen.append(obs)

    session.bus.subscribe(consumer)
    result = await asyncio.wait_for(session.run(), 30)
    assert result.status == "finished"
    rec = read_recording(path.read_bytes())
    assert rec.warnings == []
    reads = [r.data for t in rec.turns for a in t.attempts for r in a.reads]
    assert reads == [o.data for o in seen if isinstance(o, O.ReadReceived)]
    assert rec.observations[-1]["type"] == "loop_finished"  # written before the recorder was closed


async def test_a_cancelled_caller_lets_the_session_wind_down_then_closes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The dashboard quitting (`q`, a closed `inspector web` tab) cancels the task that awaits the session: the loop
    winds down on its thread, then the session is closed, its recording whole. The cancellation reached the thread's
    future: the session was closed at once, under a loop still running, and the thread's end printed a traceback
    (InvalidStateError: CANCELLED) on stderr."""
    session = scenario_session(custom_scenario(monkeypatch, PACED), speed=1.0, record=tmp_path / "rec.jsonl")
    session.threaded = True
    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    order: list[str] = []
    closed = threading.Event()

    def on_close() -> None:
        order.append("closed")
        closed.set()

    session.cleanups.append(on_close)
    reading = asyncio.Event()

    def consumer(obs: O.Observation) -> None:
        if isinstance(obs, O.ReadReceived):
            reading.set()
        elif isinstance(obs, O.LoopFinished):
            order.append("finished")

    session.bus.subscribe(consumer)
    task = asyncio.ensure_future(session.run())
    await asyncio.wait_for(reading.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(asyncio.to_thread(closed.wait, 10), 15)
    assert order == ["finished", "closed"]
    assert session._thread is not None
    await asyncio.to_thread(session._thread.join, 10)
    assert uncaught == []
    last = (tmp_path / "rec.jsonl").read_text().splitlines()[-1]
    assert '"loop_finished"' in last and '"cancelled"' in last


async def test_the_relay_delivers_every_observation_in_order_under_any_thread_interleaving() -> None:
    """The session thread's relay has no lock: producers append while drains run on the consumer's loop, with the
    interpreter switching threads every microsecond. When the producers' last callback runs on the consumer's loop
    (after every drain they scheduled), everything appended was delivered once, each producer's in its order."""
    import sys

    from inspector.sessions.sources import _Relay

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        loop = asyncio.get_running_loop()
        target = O.ObservationBus()
        got: list[tuple[int, int]] = []
        target.subscribe(got.append)  # type: ignore[arg-type]  # (plain values stand in for observations)
        relay = _Relay(target, loop)
        producers, each = 2, 60_000
        finished = [loop.create_future() for _ in range(producers)]
        seen_at_end: list[int] = []

        def done(p: int) -> None:
            seen_at_end.append(len(got))
            finished[p].set_result(None)

        def produce(p: int) -> None:
            for i in range(each):
                relay((p, i))  # type: ignore[arg-type]
            # after this producer's last append: runs after any drain it scheduled (the loop runs callbacks FIFO)
            loop.call_soon_threadsafe(done, p)

        threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
        for th in threads:
            th.start()
        await asyncio.wait_for(asyncio.gather(*finished), 60)
        for th in threads:
            th.join(10)
    finally:
        sys.setswitchinterval(old)
    assert len(got) == producers * each and max(seen_at_end) == producers * each
    for p in range(producers):
        assert [i for q, i in got if q == p] == list(range(each))


def test_a_relay_its_consumer_drains_never_wakes_the_consumers_loop() -> None:
    from inspector.sessions.sources import _Relay

    class NoWakeUps:
        def call_soon_threadsafe(self, *_: object) -> None:
            raise AssertionError("the consumer's loop was woken")

    target = O.ObservationBus()
    got: list[int] = []
    target.subscribe(got.append)  # type: ignore[arg-type]  # (plain values stand in for observations)
    relay = _Relay(target, NoWakeUps(), wake=False)  # type: ignore[arg-type]
    for i in range(3):
        relay(i)  # type: ignore[arg-type]
    assert got == []
    relay.drain()
    relay(3)  # type: ignore[arg-type]  # (after a drain too)
    relay(4)  # type: ignore[arg-type]
    assert got == [0, 1, 2]
    relay.drain()
    relay.drain()
    assert got == [0, 1, 2, 3, 4]


async def test_a_session_its_caller_delivers_gives_every_observation_in_order_without_waking_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``delivered_by_caller``: the consumer's loop is never woken by the session's thread; what `deliver` delivers
    while it runs and what is left when `run` ends make the whole sequence, in order (the same as a session run on
    the caller's loop)."""
    from inspector.sessions import sources

    here = scenario_session("weather", speed=math.inf)
    inline: list[O.Observation] = []
    here.bus.subscribe(inline.append)
    await asyncio.wait_for(here.run(), 30)

    session = scenario_session("weather", speed=math.inf)
    session.threaded = session.delivered_by_caller = True
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    loop = asyncio.get_running_loop()
    woken: list[object] = []
    real = loop.call_soon_threadsafe

    def call_soon_threadsafe(callback: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(callback, "__func__", None) is sources._Relay.drain:
            woken.append(callback)
        return real(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", call_soon_threadsafe)
    task = asyncio.ensure_future(session.run())
    while not task.done():  # the caller's pace: a delivery whenever its loop comes round (the dashboard's ticks)
        session.deliver()
        await asyncio.wait([task], timeout=0.002)
    result = await task
    assert result.status == "finished" and woken == []
    assert [type(o) for o in seen] == [type(o) for o in inline]


def test_wait_closed_closes_a_session_its_callers_stopped_loop_was_to_close(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The dashboard quits: its event loop stops while the cancelled session winds down on its thread, which leaves
    the delivery of its last observations and its close to that loop (call_soon_threadsafe), never run again: the
    recording had no end, the workspace copy stayed (unless the process lived on until the loop was closed; the
    session's thread is a daemon). wait_closed() joins the thread, delivers what it published, closes it."""
    session = scenario_session(custom_scenario(monkeypatch, PACED), speed=1.0, record=tmp_path / "rec.jsonl")
    session.threaded = True
    closed: list[bool] = []
    session.cleanups.append(lambda: closed.append(True))
    loop = asyncio.new_event_loop()

    async def quit_while_it_streams() -> None:
        reading = asyncio.Event()
        session.bus.subscribe(lambda obs: reading.set() if isinstance(obs, O.ReadReceived) else None)
        task = asyncio.ensure_future(session.run())
        await asyncio.wait_for(reading.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        loop.run_until_complete(quit_while_it_streams())  # (the loop stops here, and never runs again)
        session.wait_closed()
        assert closed == [True]
        assert session._thread is not None and not session._thread.is_alive()
        last = (tmp_path / "rec.jsonl").read_text().splitlines()[-1]
        assert '"loop_finished"' in last and '"cancelled"' in last
    finally:
        loop.close()

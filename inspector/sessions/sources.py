"""Sessions: an agent loop wired to a source (a built-in scenario, the real API or a relay, or a recording), with
its bus, controller and optional recorder. The CLI and the dashboard both build sessions through these factories;
"restart" is calling the same factory again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import os
import selectors
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from inspector.agent.toolbox.spec import ToolSpec
from inspector.core.errors import SourceError, UnknownScenario
from inspector.core.pacing import Pacer
from inspector.observe import observations as O
from inspector.record.recorder import Recorder, nothing_ran, nothing_ran_end
from inspector.record.recording import Recording
from inspector.scenarios.bundled import DEFAULT_SCENARIO

if TYPE_CHECKING:  # the SDK (about 1 s of CPU to import) is imported by the factories, when a session is built
    import httpx2

    from inspector.agent.loop import AgentLoop, LoopController, LoopResult
    from inspector.record.replay import ReplayServer
    from inspector.scenarios.transport import ScenarioServer

log = logging.getLogger("inspector.sessions")


@dataclass
class Session:
    loop: AgentLoop
    source: dict[str, Any]
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    recorder: Recorder | None = None
    # run the loop and its HTTP on a thread and event loop of their own (see run_threaded)
    threaded: bool = False
    # (threaded) the consumer delivers what the session's thread published itself, at its own pace (`deliver`: the
    # dashboard at each tick), instead of having its event loop woken once per batch (see _Relay)
    delivered_by_caller: bool = False
    # what the factory served the loop from (for tests and the dashboard; None where there is none): the in-process
    # server (scenario_session: the ScenarioServer; replay_session: the ReplayServer), the scenario's workspace
    # (scenario_session, when the scenario has one) and the recording replayed (replay_session)
    server: ScenarioServer | ReplayServer | None = field(default=None, repr=False)
    workspace: Path | None = None
    recording: Recording | None = field(default=None, repr=False)
    _outer: O.ObservationBus | None = field(default=None, repr=False)
    _thread_loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _relay: _Relay | None = field(default=None, repr=False)
    _ran: bool = field(default=False, repr=False)  # run() was called (else close() ends the recording: nothing ran)

    @property
    def bus(self) -> O.ObservationBus:
        """The bus subscribers use (with ``threaded``, its observations are delivered on the loop that runs
        ``run()``, in order)."""
        return self._outer if self._outer is not None else self.loop.bus

    @property
    def secrets(self) -> list[str]:
        """The secrets of this session (its API key): every recording of it, an export too, masks them."""
        return list(self.loop.config.secrets)

    def recorded_request_times(self) -> dict[int, float] | None:
        """A replay's: each turn's request time as the recording has it, by the turn number its observations carry
        (a replay of many conversations numbers its turns as the recording did); None for any other session. The
        cache verdict's time between two turns (the TTL) is the recording's: the replay's clock runs at its speed."""
        if self.recording is None:
            return None
        from inspector.record.accounting import request_times

        return request_times(self.recording.turns, numbered=isinstance(self, ConversationReplay))

    @property
    def controller(self) -> LoopController:
        if self.threaded:
            return ThreadedController(self)  # type: ignore[return-value]
        return self.loop.controller

    @property
    def pacer(self) -> Pacer:
        return self.loop.pacer

    async def run(self) -> LoopResult:
        self._ran = True
        if self.threaded:
            return await self.run_threaded()
        return await self._run_here()

    async def run_threaded(self) -> LoopResult:
        """Run the loop (and its HTTP) on a thread and event loop of its own, so the moment a read arrives is taken
        there: a consumer (the dashboard's frame, a slow subscriber) that blocks its own event loop delays neither
        the reads nor their timestamps. Observations are relayed to :attr:`bus`'s subscribers on the caller's event
        loop, in order (a queue drained by one callback per batch); the controller's calls run on the session's
        loop (:class:`ThreadedController`). Cancelling the caller cancels the loop."""
        consumer = asyncio.get_running_loop()
        outer = self.loop.bus
        relay = self._relay = _Relay(outer, consumer, wake=not self.delivered_by_caller)
        inner = O.ObservationBus()
        inner.subscribe(relay)
        self._outer = outer
        self.loop.publish_to(inner)
        done: concurrent.futures.Future[LoopResult] = concurrent.futures.Future()

        async def main() -> LoopResult:
            self._thread_loop = asyncio.get_running_loop()
            return await self._run_here(close=False)  # closed below, once every observation was delivered

        def thread() -> None:
            try:
                with asyncio.Runner(loop_factory=session_loop) as runner:
                    done.set_result(runner.run(main()))
            except BaseException as e:  # noqa: BLE001 (handed to the caller as is, never lost in the thread)
                done.set_exception(e)
            finally:
                self._thread_loop = None

        self._thread = threading.Thread(target=thread, name="inspector-session", daemon=True)
        self._thread.start()
        try:
            # (shielded: a cancelled caller must not cancel `done`, which the thread sets once the loop has wound
            # down, and which closes the session then, below)
            return await asyncio.shield(asyncio.wrap_future(done))
        except asyncio.CancelledError:
            self.controller.cancel()
            raise
        finally:
            relay.drain()  # what is still queued, before the caller hears the session ended
            if done.done():
                self.close()  # the recorder and the cleanups, after the subscribers (the recorder) got everything
            else:  # cancelled while the loop winds down: close once it has
                done.add_done_callback(lambda _: self._close_later(consumer, relay))

    def _close_later(self, consumer: asyncio.AbstractEventLoop, relay: _Relay) -> None:
        try:
            consumer.call_soon_threadsafe(self._close_after, relay)
        except RuntimeError:  # the caller's loop has closed: nobody else will deliver or close
            self._close_after(relay)

    def _close_after(self, relay: _Relay) -> None:
        relay.drain()
        self.close()

    async def _run_here(self, *, close: bool = True) -> LoopResult:
        try:
            return await self.loop.run()
        finally:
            if close:
                self.close()
            try:
                await self.loop.client.close()  # the SDK's connection pool
            except Exception:  # the session has ended; a pool that fails to close is only noted
                log.debug("closing the SDK client failed", exc_info=True)

    def deliver(self) -> None:
        """A threaded session's: deliver now, on the caller's thread, to :attr:`bus`'s subscribers, in order, what
        the session's thread published since the last delivery. A consumer that set ``delivered_by_caller`` calls it
        at its own pace (the dashboard: at each tick, and before a frame it forces); the rest is delivered when
        `run` ends. (Otherwise nothing is left for it: each batch is delivered as it comes.)"""
        if self._relay is not None:
            self._relay.drain()

    def call_on_loop(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the event loop that runs the loop: a threaded session's (in order, from any thread), or at
        once when called on that loop's thread, before it runs or once it has ended."""
        loop = self._thread_loop
        if loop is None or threading.current_thread() is self._thread:
            fn()
            return
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the session's loop closed meanwhile: the loop has ended
            fn()

    def wait_closed(self, timeout: float = 10.0) -> None:
        """Once the caller's event loop has stopped (the dashboard quit, maybe before this session even ran): wait at
        most ``timeout`` seconds for a threaded session's loop to wind down, deliver what it published since, and
        close the session (its recording with its end lines, its workspace copy removed). (Its thread is a daemon,
        whose close was left to the caller's loop, which will not run it: without this, nothing closed it, or the
        process exited first.)"""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._relay is not None:
            self._relay.drain()
        self.close()

    def close(self) -> None:
        if self.recorder is not None:
            if not self._ran:  # (stopped before it ran: its recording says so, not a header alone, nothing ended)
                self._ran = True
                self.recorder(nothing_ran_end())
            self.recorder.close()
        while self.cleanups:
            fn = self.cleanups.pop()
            try:
                fn()
            except Exception:  # every cleanup runs, whatever the others do
                log.warning("session cleanup %r failed", fn, exc_info=True)


# seconds between the polls of a busy session thread's event loop for I/O (_PacedSelector)
POLL_EVERY = 0.001


class _PacedSelector(selectors.DefaultSelector):
    """The session thread's selector: a poll that must not wait (the loop has callbacks ready) is skipped when the
    last one was less than ``POLL_EVERY`` ago. Each poll is a system call that hands the GIL over: with the
    dashboard's thread busy, a loop that yields once per read (a replay at max speed) waited for the GIL back once
    per read (tools/bench_tui.py: the dashboard at ~2x no UI, against ~1.3x with the session on the UI's loop). An
    idle loop still blocks in the real poll; a busy one sees its sockets at most a millisecond late; callbacks
    (a control from the UI: call_soon_threadsafe) never wait for a poll."""

    def __init__(self) -> None:
        super().__init__()
        self._polled = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            now = time.perf_counter()
            if now - self._polled < POLL_EVERY:
                return []
            self._polled = now
        return super().select(timeout)


def session_loop() -> asyncio.AbstractEventLoop:
    """A session thread's event loop (see _PacedSelector; Windows keeps its default, proactor, loop)."""
    if os.name == "nt":
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(_PacedSelector())


class _Relay:
    """An observation subscriber on the session's thread: queues each observation and has ``target`` publish them
    on ``loop`` (the consumer's), in order, one scheduled drain per batch; with ``wake=False``, none: the consumer
    drains at its own pace (`Session.deliver`). Each wake-up of the consumer's loop is a hand-over of the GIL from
    the busy session thread and back (tools/bench_tui.py, a replay at max speed in the dashboard: ~400 drains cost
    the session thread ~0.2 s at 100k events; a dashboard folds at its ticks anyway).

    No lock: a deque's append and popleft are atomic, and the session thread publishes a third of a million
    observations in a 100k-event replay (a lock per observation was ~3% of that thread's py-spy samples; the
    dashboard's ratio in tools/bench_tui.py did not move beyond its noise). ``scheduled`` is cleared *before* a drain
    counts what is queued, so an observation appended after the count finds it clear and schedules the next drain;
    one appended before it is in the count."""

    def __init__(self, target: O.ObservationBus, loop: asyncio.AbstractEventLoop, *, wake: bool = True) -> None:
        self.target, self.loop = target, loop
        self.queue: deque[O.Observation] = deque()
        self.wake = wake
        self.scheduled = not wake  # (never woken: as if a drain were always scheduled)

    def __call__(self, obs: O.Observation) -> None:
        self.queue.append(obs)
        if self.scheduled:
            return
        self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the consumer's loop has closed: nobody is left to deliver to
            pass

    def drain(self) -> None:
        self.scheduled = not self.wake
        queue = self.queue
        # (what is queued now: a drain never chases a producer that keeps up)
        batch = [queue.popleft() for _ in range(len(queue))]
        if batch:
            self.target.publish_all(batch)


class ThreadedController:
    """A threaded session's controller: the same methods and properties as ``LoopController``; each call runs on
    the session's event loop (``call_soon_threadsafe``), in order; before the loop runs or once it has ended,
    directly. Reads (state, paused, speed...) read the loop's current values."""

    _CALLS = frozenset({"pause", "resume", "toggle_pause", "step", "cancel", "set_speed", "faster", "slower"})

    def __init__(self, session: Session) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._session.loop.controller, name)
        if name not in self._CALLS:
            return attr

        def call(*args: Any, **kwargs: Any) -> None:
            if name == "step" and (args or kwargs):
                unit = args[0] if args else kwargs.get("unit")
                if unit not in ("event", "block", "turn"):
                    raise ValueError(f"unknown step unit {unit!r}")
            if name == "set_speed":  # a Pacer refuses a bad speed (ValueError): the caller hears it, not the loop
                Pacer(args[0] if args else kwargs["speed"])
            self._session.call_on_loop(functools.partial(attr, *args, **kwargs))

        return call


def _attach_recorder(session: Session, record: str | Path | None) -> None:
    """The recording of a session: a Recorder subscribed to its bus. It writes what the bus carries, masked already:
    the loop publishes every observation through its one RedactingPublisher (with the session's secrets), so a key
    is masked in one place, for the dashboard and the file alike, not a second time by the writer."""
    if record:
        try:
            session.recorder = Recorder(record, source=session.source)
            session.bus.subscribe(session.recorder)
        except OSError as e:
            session.close()
            raise SourceError(f"cannot write {record}: {e.strerror or e}") from None
        except BaseException:  # a stop as it opened (Ctrl-C, SIGTERM: a FIFO waits for its reader): nothing left
            session.close()  # half made (its recording, once opened, says nothing ran; its workspace copy removed)
            raise


def scenario_session(
    name: str = DEFAULT_SCENARIO,
    *,
    speed: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    bus: O.ObservationBus | None = None,
    record: str | Path | None = None,
    retries: int = 2,
    max_turns: int = 20,
    idle_timeout: float | None = None,
    seed: int | None = None,
) -> Session:
    """A built-in scripted scenario, served in process through the real SDK (no network, no key)."""

    from inspector.agent.loop import AgentLoop, LoopConfig
    from inspector.scenarios.bundled import get_scenario
    from inspector.scenarios.transport import ScenarioServer, make_client

    try:
        scenario = get_scenario(name)
    except UnknownScenario as e:
        raise SourceError(str(e)) from None
    if seed is not None:
        import dataclasses

        scenario = dataclasses.replace(scenario, seed=seed)
    pacer = Pacer(speed)
    server = ScenarioServer(scenario, pacer)
    client = make_client(server)
    root = scenario.workspace_root()
    cleanups: list[Callable[[], None]] = []
    if scenario.workspace_copy and root is not None:
        cleanups.append(lambda: shutil.rmtree(root.parent, ignore_errors=True))
    try:  # (until the session owns the copy: a failure here, or a stop raised here (SIGTERM), does not leave it)
        tools = scenario.resolve_tools(root, pacer=pacer)  # simulated tool durations follow the speed
        params = scenario.request_params(tools)
        extra = {k: v for k, v in params.items() if k in ("thinking",)}
        config = LoopConfig(
            model=scenario.model,
            prompt=scenario.prompt,
            system=scenario.system,
            system_by_turn={i: t.system for i, t in enumerate(scenario.turns) if t.system is not None},
            cache_system=scenario.cache_system,
            max_tokens=scenario.max_tokens,
            max_turns=max_turns,
            retries=retries,
            idle_timeout=idle_timeout if idle_timeout is not None else (scenario.idle_timeout or 30.0),
            extra_body=extra,
            tool_definitions=params.get("tools"),
            source={"type": "scenario", "name": scenario.name, "seed": scenario.seed},
            scale_backoff=True,
            seed=scenario.seed,
        )
        loop = AgentLoop(client, config, tools, bus=bus, clock=clock, pacer=pacer)
        session = Session(loop, config.source, cleanups, server=server, workspace=root)
        _attach_recorder(session, record)
    except BaseException:
        for fn in cleanups:
            fn()
        raise
    return session


def require_api_key(api_key: str | None = None) -> str:
    """The key given, else ANTHROPIC_API_KEY; a SourceError (one line, no key text) when there is none."""
    key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise SourceError("no API key: set ANTHROPIC_API_KEY (or use --scenario NAME for an offline demo)")
    return key


def require_openai_key(api_key: str | None = None) -> str:
    """The key given, else OPENAI_API_KEY; a SourceError (one line, no key text) when there is none."""
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    if not key:
        raise SourceError("no API key: set OPENAI_API_KEY (or use --scenario NAME for an offline demo)")
    return key


PROVIDERS = ("anthropic", "openai")


def api_session(
    model: str,
    prompt: str,
    *,
    provider: str = "anthropic",
    api: str = "chat",
    api_key: str | None = None,
    base_url: str | None = None,
    workspace: str | Path = ".",
    allow_write: bool = False,
    user_tools: dict[str, ToolSpec] | None = None,
    builtin: bool = True,
    system: str | None = None,
    max_tokens: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    bus: O.ObservationBus | None = None,
    record: str | Path | None = None,
    retries: int = 2,
    max_turns: int = 20,
    idle_timeout: float = 30.0,
    http_client: httpx2.AsyncClient | None = None,
) -> Session:
    """A real API with built-in tools over a workspace and user tools, through its official SDK: ``provider``
    anthropic, the Messages API (or a relay via base_url / ANTHROPIC_BASE_URL; ``max_tokens`` None: 4096); or openai,
    an OpenAI API (``api``: chat for Chat Completions, responses for Responses) or a compatible server via base_url /
    OPENAI_BASE_URL, with the same executor, controls and tools (``max_tokens`` None: not sent, the server's
    default)."""
    from inspector.agent.loop import AgentLoop, LoopConfig
    from inspector.agent.providers import APIS, Api, OpenAIProvider
    from inspector.agent.toolbox.builtin import builtin_tools
    from inspector.core.redaction import credential_values, mask_text, usable_secrets

    if provider not in PROVIDERS:
        raise SourceError(f"unknown provider {provider!r}: anthropic or openai")
    openai = provider == "openai"
    if openai and api not in APIS:
        raise SourceError(f"unknown OpenAI API {api!r}: chat or responses")
    key = require_openai_key(api_key) if openai else require_api_key(api_key)
    base = base_url or os.environ.get("OPENAI_BASE_URL" if openai else "ANTHROPIC_BASE_URL") or None
    root = Path(workspace).resolve()
    if not root.is_dir():
        raise SourceError(f"workspace {str(workspace)!r} is not a directory")
    tools: dict[str, ToolSpec] = dict(builtin_tools(root, allow_write=allow_write)) if builtin else {}
    tools.update(user_tools or {})
    kw: dict[str, Any] = {"api_key": key, "max_retries": 2}
    if base:
        kw["base_url"] = base
    if http_client is not None:
        kw["http_client"] = http_client
    if openai:
        import openai as sdk

        client: Any = sdk.AsyncOpenAI(**kw)
    else:
        import anthropic

        client = anthropic.AsyncAnthropic(**kw)
    # a relay's key in the base URL (http://user:KEY@relay, ?api_key=KEY) is a secret like the API key
    secrets = usable_secrets([key, *(credential_values([], base) if base else [])])
    source: dict[str, Any] = {"type": "api", "provider": "openai", "api": api} if openai else {"type": "api"}
    source["model"] = model
    if base:
        source["base_url"] = mask_text(base, secrets)
    config = LoopConfig(
        model=model,
        prompt=prompt,
        system=system,
        # (the OpenAI provider sends its own max tokens, when given)
        max_tokens=(max_tokens or 0) if openai else (max_tokens if max_tokens is not None else 4096),
        max_turns=max_turns,
        retries=retries,
        idle_timeout=idle_timeout,
        source=source,
        secrets=secrets,
    )
    family = OpenAIProvider(cast("Api", api), max_tokens=max_tokens) if openai else None  # (checked above)
    loop = AgentLoop(client, config, tools, bus=bus, clock=clock, pacer=Pacer(1.0), provider=family)
    session = Session(loop, source)
    _attach_recorder(session, record)
    return session


def openai_session(model: str, prompt: str, *, api: str = "chat", **kw: Any) -> Session:
    """``api_session`` with ``provider="openai"``."""
    return api_session(model, prompt, provider="openai", api=api, **kw)


BYTES_LABEL = "<recording bytes>"  # what names a recording given as bytes (in errors, a replay's source["file"])


def load_recording(path: str | Path | bytes, label: str | None = None) -> Recording:
    """A recording, a plain SSE file or a HAR export, whichever it is (a path, or its bytes), for a replay: the
    reads' bytes go to a spill file (read back as the replay serves them), so memory does not grow with the size of
    the recording. ``label``: what its errors call it (default: the path, or :data:`BYTES_LABEL`). One without turns
    is a SourceError (nothing to replay, and why: :func:`no_turns_why`), before any request or dashboard."""
    import tempfile

    from inspector.record.har import load_any
    from inspector.record.recording import spill_reads

    label = label or (BYTES_LABEL if isinstance(path, bytes) else str(path))
    try:
        recording = load_any(path, on_read=spill_reads(tempfile.TemporaryFile()), keep_reads=False)
    except OSError as e:
        raise SourceError(f"cannot read {label}: {e.strerror or e}") from None
    except ValueError as e:
        raise SourceError(f"{label}: {e}") from None
    if not recording.turns:  # (replayed, the loop sent a request all the same: a 400, or "cancelled by user")
        raise SourceError(f"{label}: nothing to replay: {no_turns_why(recording)}")
    return recording


def no_turns_why(recording: Recording) -> str:
    """Why a recording without turns has none, as `dump` says it: its session was stopped before it started
    (``record.recorder.write_nothing_ran``, a session closed unrun), or the file holds none (a header alone)."""
    if nothing_ran(recording):
        return "nothing ran (the session was stopped before it started)"
    return "the recording has no turns"


class _Controllers:
    """The controller of a replay of many conversations: the conversation being replayed gets the command; a cancel
    also stops the conversations after it."""

    def __init__(self, owner: ConversationReplay) -> None:
        self._owner = owner

    def cancel(self) -> None:
        self._owner.stopped = True
        self._owner.loop.controller.cancel()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.loop.controller, name)


class ConversationReplay(Session):
    """A recording of many conversations (a proxy's), replayed one conversation after the other on one bus, each
    through its own loop. Before each one, a ``ConversationAssigned`` per turn says which conversation the turns
    that follow belong to (the headless lines name it: ``[c2] turn 1``); ``source["conversation"]`` of each loop's
    ``LoopStarted`` too. The result is the first that did not finish (else the last)."""

    def __init__(self, parts: list[tuple[str, list[tuple[int, int]], Session]], source: dict[str, Any]) -> None:
        """``parts``: per conversation, its id, its (session turn, its own turn) pairs and its session."""
        super().__init__(parts[0][2].loop, source)
        self.parts = parts
        self.stopped = False
        self._controllers = _Controllers(self)

    @property
    def controller(self) -> Any:  # (a LoopController's methods, forwarded to the conversation being replayed)
        return self._controllers

    async def run(self) -> LoopResult:
        self._ran = True
        result: LoopResult | None = None
        worst: LoopResult | None = None
        epoch: float | None = None
        for cid, turns, part in self.parts:
            if self.stopped:
                break
            loop = self.loop = part.loop
            # one clock for the session, as in the proxy's: each loop's times follow the conversations' before it
            # (a loop's own clock starts at 0: c3's last activity would look older than c2's, its ages wrong)
            if epoch is None:
                epoch = loop.clock()
            loop.epoch = epoch
            t = loop.clock() - epoch
            for turn, own in turns:
                part.bus.publish(O.ConversationAssigned(t, turn, cid, own, 0, "replay"))
            result = await part.run()
            if worst is None and result.status != "finished":
                worst = result
        assert result is not None
        return worst or result

    def close(self) -> None:
        for _cid, _turns, part in self.parts:
            part.close()
        super().close()


def _paced_sdk_retries(client: Any, pacer: Pacer) -> None:
    """A replayed connection failure: the SDK backs off by itself (0.5 s doubling to 8 s) with no answer whose
    retry-after the replay could scale, so its wait follows the replay's speed here (virtual at --speed max, issue
    19). An answered retry's wait is not touched: the replay serves it a scaled retry-after already."""
    # the SDK's one place that says how long it waits (private: the SDK offers no public hook for its backoff)
    sdk_wait = client._calculate_retry_timeout  # noqa: SLF001

    def paced(remaining_retries: int, options: Any, response_headers: Any = None) -> float:
        wait = float(sdk_wait(remaining_retries, options, response_headers))
        return wait if response_headers is not None else pacer.wall_seconds(wait)

    client._calculate_retry_timeout = paced  # noqa: SLF001 (as above)


def replay_session(
    recording: Recording | str | Path | bytes,
    *,
    speed: float = math.inf,
    clock: Callable[[], float] = time.monotonic,
    bus: O.ObservationBus | None = None,
    label: str | None = None,
) -> Session:
    """A recording through the same pipeline: recorded reads with their timing, recorded tool results. A proxy
    recording of many conversations replays them one after the other (:class:`ConversationReplay`)."""
    import anthropic
    import httpx2

    from inspector.agent.loop import AgentLoop, LoopConfig
    from inspector.record.replay import (
        ReplayServer,
        ReplayTransport,
        failed_try,
        recorded_tools,
        sdk_max_retries,
        split_conversations,
    )

    if not isinstance(recording, Recording):
        label = label or (BYTES_LABEL if isinstance(recording, bytes) else str(recording))
        recording = load_recording(recording, label)
    split = split_conversations(recording)
    if split:
        shared = bus if bus is not None else O.ObservationBus()
        parts = []
        names = [cid for cid, _ in split]
        # past every recorded turn: the numbers of turns a loop makes beyond its recorded ones (none, as recorded)
        base = 1 + max((t.turn for _cid, sub in split for t in sub.turns), default=-1)
        for cid, sub in split:
            part = replay_session(sub, speed=speed, clock=clock, bus=shared, label=label)
            part.loop.config.source = {**part.loop.config.source, "conversation": cid, "conversations": names}
            part.source = part.loop.config.source
            # the loop numbers its own turns from 0; on the shared bus each is the recording's session turn, as the
            # proxy's session and `inspector dump` number it ([c1] turn 2 (#6): not #2, which was c2's turn 1 there;
            # a turn number is one turn of one conversation: the panes' "all" view keys blocks, attempts and turns
            # by it), and each one's ConversationAssigned gives its number there
            numbers = tuple(t.turn for t in sub.turns)
            part.loop.config.turn_numbers = numbers
            part.loop.config.turn_base = base
            turns = [(n, k) for k, n in enumerate(numbers)]
            base += len(numbers)
            parts.append((cid, turns, part))
        source = {**parts[0][2].source}
        source.pop("conversation", None)
        whole = ConversationReplay(parts, source)
        whole.recording = recording  # (the timing view: the recording's own times, its session turn numbers)
        return whole
    pacer = Pacer(speed)
    server = ReplayServer(recording, pacer)
    first = next(iter(recording.attempts()), None)
    body = ((first.request or {}).get("body") if first else None) or {}
    if not isinstance(body, dict):
        body = {}
    from inspector.record.replay import recorded_provider
    from inspector.record.timing import recorded_buffering

    provider = recorded_provider(recording)
    transport = httpx2.AsyncClient(transport=ReplayTransport(server))
    client: Any
    if provider is not None:  # an OpenAI recording: the openai SDK against the replay, as it was recorded
        import openai

        client = openai.AsyncOpenAI(
            api_key="replay-no-key",
            base_url="http://replay.local/v1",
            max_retries=sdk_max_retries(recording),
            http_client=transport,
        )
        limit = body.get("max_completion_tokens" if provider.api == "chat" else "max_output_tokens")
        provider.max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    else:
        client = anthropic.AsyncAnthropic(
            api_key="replay-no-key",
            base_url="http://replay.local",
            max_retries=sdk_max_retries(recording),  # the SDK retries the recorded failed tries as it did
            http_client=transport,
        )
    _paced_sdk_retries(client, pacer)
    tools, definitions = recorded_tools(recording, pacer, on_cancel=lambda: server.on_cancel)
    history_key = provider.history_key if provider is not None else "messages"
    messages = body.get(history_key) if isinstance(body.get(history_key), list) else None
    if provider is not None and isinstance(body.get(history_key), str):  # Responses: `input` may be a string
        messages = [{"role": "user", "content": body[history_key]}]
    # the history the run started with: its first user message (Chat Completions: with the system message before it)
    upto = 1
    if provider is not None and messages:
        upto = next((i + 1 for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), 1)
    first_user = messages[:upto] if messages else None
    prompt = None
    if first_user and isinstance(first_user[-1], dict) and isinstance(first_user[-1].get("content"), str):
        prompt = first_user[-1]["content"]
    system = body.get("system") if provider is None else body.get("instructions")
    # each turn sends the system prompt and the tools its recorded request sent (a harness that puts the time in its
    # system prompt changes it every turn; one adds a tool): the first request's for all read 'prefix unchanged' in
    # the replay's cache verdict where the recording's said 'system changed at char 69' (the bundled cache_break)
    system_by_turn: dict[int, Any] = {}
    tools_by_turn: dict[int, list[dict[str, Any]]] = {}
    for k, turn in enumerate(recording.turns):
        sent = (turn.attempts[-1].request or {}).get("body") if turn.attempts else None
        if not isinstance(sent, dict):
            continue
        said = sent.get("system" if provider is None else "instructions")
        if said is not None and said != system and (provider is None or isinstance(said, str)):
            system_by_turn[k] = said
        if isinstance(sent.get("tools"), list) and sent["tools"] != definitions:
            tools_by_turn[k] = sent["tools"]
    hdr_source = recording.header.get("source") or {}
    # the loop's own attempts per turn (the tries the SDK retried by itself are not the loop's)
    n_attempts = max((sum(1 for a in t.attempts if not failed_try(a)) for t in recording.turns), default=1)
    config = LoopConfig(
        model=str(body.get("model") or hdr_source.get("model") or "recorded"),
        messages=first_user,
        prompt=prompt,
        system=system if isinstance(system, str) or provider is None else None,
        system_by_turn=system_by_turn,
        max_tokens=int(body.get("max_tokens") or 4096),
        max_turns=max(1, len(recording.turns)),
        retries=max(0, n_attempts - 1),
        idle_timeout=0.5 if math.isinf(speed) else 30.0,
        tool_definitions=definitions,
        tools_by_turn=tools_by_turn,
        source={
            "type": "replay",
            "file": label or "recording",
            "recorded_source": hdr_source,
            **(
                {"timing_note": "HAR timing is per response, not per read"}
                if recording.header.get("timing") == "per-response"
                else {}
            ),
            **({"warnings": list(recording.warnings)} if recording.warnings else {}),  # (gaps clamped, bad shapes)
            # its attempts' buffering, judged on the recording's own times: the replayed reads come at the replay's
            # speed (record/timing.py recorded_buffering; the dashboard and the headless lines say these)
            "recorded_buffering": recorded_buffering(recording),
        },
        scale_backoff=True,
    )
    config.backoff_base = 0.0  # replays do not wait between recorded attempts beyond the recorded timing
    loop = AgentLoop(client, config, tools, bus=bus, clock=clock, pacer=pacer, provider=provider)
    server.on_cancel = loop.cancel_as_recorded  # a recorded cancel is replayed as a cancel at the same point
    session = Session(loop, config.source, server=server, recording=recording)
    return session

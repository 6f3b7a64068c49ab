"""The agent loop: one async loop that streams each turn through the official SDK, assembles it, runs tools with the
streaming executor, keeps a valid history, and publishes every step as an observation.

Controls (`LoopController`): pause / resume / step(event | block | turn) / cancel / speed. The loop never waits for a
subscriber: observations are delivered inline to cheap callbacks (see `ObservationBus`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import anthropic
import httpx2

from inspector.agent.executor import TERMINAL, ToolCall, ToolExecutor, ToolState
from inspector.agent.providers import RETRYABLE_ERRORS, OpenAIProvider, OpenStream, SdkResponse
from inspector.agent.toolbox.spec import ToolSpec
from inspector.agent.transcript import HistoryView, SpilledHistory, SplicedMessages
from inspector.agent.tries import ClientGaveUp, TryFailure, observe_client
from inspector.core import exactjson
from inspector.core.deadline import ReadDeadline
from inspector.core.fmt import duration
from inspector.core.pacing import Pacer
from inspector.core.redaction import clean_headers, redact, usable_secrets
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.observe.states import TERMINAL_LOOP_STATES, LoopState
from inspector.observe.stepobs import step_observations, tool_transitions
from inspector.stream import diagnostics as D
from inspector.stream.assembler import TurnStream
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.protocol import ErrorEvent, Ping, parse_error_body
from inspector.stream.turn import Step

if TYPE_CHECKING:
    import openai

log = logging.getLogger("inspector.agent.loop")

StepUnit = Literal["event", "block", "turn"]
Control = Literal["pause", "resume", "step", "cancel", "speed"]
MAX_QUEUED_STEPS = 1000  # step presses kept waiting behind the one under way (bounded: a key held down)
RETRYABLE_ERROR_EVENTS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
# the HTTP status error of the SDK an attempt goes through (the openai SDK is imported only when it is used)
StatusError = TypeVar("StatusError", "anthropic.APIStatusError", "openai.APIStatusError")


class AttemptFailed(Exception):
    def __init__(self, reason: str, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class LoopError(Exception):
    """Unrecoverable: the loop ends in the error state with this message."""


def _turned_types() -> frozenset[type]:
    """The observation classes with a ``turn`` field (``LoopConfig.session_turn`` renumbers it)."""
    seen: set[type] = set()
    todo = [O.Observation]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if dataclasses.is_dataclass(cls) and any(f.name == "turn" for f in dataclasses.fields(cls)):
            seen.add(cls)
    return frozenset(seen)


_TURNED = _turned_types()


@dataclass
class LoopConfig:
    model: str
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None  # an initial history, instead of prompt
    system: str | None = None
    system_by_turn: dict[int, str] = field(default_factory=dict)  # a system prompt for a turn (else ``system``)
    cache_system: bool = False  # send the system prompt as a block marked cache_control (prompt caching)
    max_tokens: int = 4096
    max_turns: int = 20
    retries: int = 2  # retries of failures AFTER the first byte (the SDK retries the rest)
    idle_timeout: float = 30.0  # seconds without a content event (pings do not count)
    max_concurrency: int = 10
    extra_body: dict[str, Any] = field(default_factory=dict)  # e.g. {"thinking": {...}}
    tool_definitions: list[dict[str, Any]] | None = None  # as sent; default: each ToolSpec.definition()
    tools_by_turn: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # a turn's (else tool_definitions)
    secrets: list[str] = field(default_factory=list, repr=False)  # (the API key) redacted from every observation
    source: dict[str, Any] = field(default_factory=dict)
    # the numbers its observations give this loop's turns: a replay of many conversations runs one loop per
    # conversation on one bus, one after the other; its turn k is the recording's session turn turn_numbers[k] (as
    # `inspector dump` and the proxy's session numbered it), a turn past those turn_base + k (0, (): a bus of its own)
    turn_base: int = 0
    turn_numbers: tuple[int, ...] = ()

    def session_turn(self, turn: int) -> int:
        """The number this loop's turn ``turn`` (from 0) has on its bus."""
        numbers = self.turn_numbers
        return numbers[turn] if 0 <= turn < len(numbers) else turn + self.turn_base

    # backoff between our retries: min(0.5 * 2**n, 8) s with jitter; scaled by the pacer for scripted sources
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    scale_backoff: bool = False
    seed: int = 0


@dataclass
class LoopResult:
    status: str  # finished | error | cancelled
    turns: int
    # the conversation, kept out of RAM (transcript.HistoryView): `messages` reads it back
    history: Sequence[dict[str, Any]]
    tools: list[ToolCall]
    error: str | None = None

    @functools.cached_property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as a list of dicts (read back from the spill file on first use)."""
        return list(self.history)


class LoopController:
    """The one object the UI and tests drive. All methods are synchronous and safe to call at any time."""

    def __init__(self, loop: AgentLoop) -> None:
        self._loop = loop

    @property
    def state(self) -> str:
        return self._loop.state

    @property
    def paused(self) -> bool:
        return self._loop.paused

    @property
    def events_processed(self) -> int:
        return self._loop.events_processed

    def pause(self) -> None:
        self._loop.control("pause")

    def resume(self) -> None:
        self._loop.control("resume")

    def toggle_pause(self) -> None:
        if self._loop.paused:
            self.resume()
        else:
            self.pause()

    def step(self, unit: StepUnit = "event") -> None:
        if unit not in ("event", "block", "turn"):
            raise ValueError(f"unknown step unit {unit!r}")
        self._loop.control("step", unit)

    def cancel(self) -> None:
        self._loop.control("cancel")

    # speed (scripted and replayed streams)
    @property
    def speed(self) -> float:
        return self._loop.pacer.speed

    @property
    def speed_label(self) -> str:
        return self._loop.pacer.label

    def set_speed(self, speed: float) -> None:
        self._loop.pacer.set_speed(speed)
        self._loop.control("speed")

    def faster(self) -> None:
        self._loop.pacer.faster()
        self._loop.control("speed")

    def slower(self) -> None:
        self._loop.pacer.slower()
        self._loop.control("speed")


class AgentLoop:
    def __init__(
        self,
        client: anthropic.AsyncAnthropic | Any,  # an openai.AsyncOpenAI with an OpenAI provider
        config: LoopConfig,
        tools: dict[str, ToolSpec] | None = None,
        *,
        bus: O.ObservationBus | None = None,
        clock: Callable[[], float] = time.monotonic,
        pacer: Pacer | None = None,
        provider: OpenAIProvider | None = None,
    ) -> None:
        self.client = client
        # None: the Messages API through the anthropic SDK; else an OpenAI API through the openai SDK (``client`` is
        # then an ``openai.AsyncOpenAI``)
        self.provider = provider
        self.config = config
        self.tools = dict(tools or {})
        self.bus = bus or O.ObservationBus()
        self.clock = clock
        self.pacer = pacer or Pacer(1.0)
        self.controller = LoopController(self)
        self.state: str = LoopState.IDLE
        # the history sent every turn: each message as the SDK serializes it, in a spill file (transcript.py)
        self.messages = SpilledHistory()
        self.all_tools: list[ToolCall] = []
        self._known_tools: set[int] = set()  # id() of the calls in all_tools (they stay alive there)
        self.turns = 0
        self.events_processed = 0
        self._t0 = 0.0
        # the clock value its observation times count from: None, its run's start; a replay of many conversations
        # (ConversationReplay) gives each conversation's loop the first one's start: one clock for the session
        self.epoch: float | None = None
        self._running = False  # run() has started (observation times are known)
        self._hold_by = "pause"  # what the next hold of the stream is due to: pause | step
        self._paused = False
        self._step: StepUnit | None = None
        self._wake = asyncio.Event()
        self._cancel_requested = False
        self._cancel_reason = "cancelled by user"  # (a replay of a recorded cancel: the recorded reason)
        self._steps_queued = 0  # step presses of the unit under way that came before its step was done
        self._work: asyncio.Task[tuple[str, str | None]] | None = None
        self._executor: ToolExecutor | None = None
        self._ts: TurnStream | None = None
        self._last_sse: object = None  # the SSE event of the last step processed (several steps may share one)
        self._in_tools = False
        self._turn_committed = True
        self._rng = random.Random(config.seed)
        self._secrets = usable_secrets(config.secrets)
        self._publisher = RedactingPublisher(self.bus, self._secrets)
        self.result: LoopResult | None = None
        # every HTTP try under the SDK (its own retries included) is reported to try_sent / try_failed
        self._try_ctx: tuple[int, int] | None = None  # (turn, attempt) while a create() call is under way
        self._open_attempt: tuple[int, int] | None = None  # started, not yet ended (a cancel ends it)
        self._try_index = 0
        self._try_t_sent = 0.0  # clock() when the current try was sent
        self._start_pending: tuple[int, int, str, dict[str, Any]] | None = None  # AttemptStarted not yet published
        # the current try's request headers as sent (credentials removed)
        self._try_headers: dict[str, str] | None = None
        self._sent_body: dict[str, Any] | None = None  # the body of the request being sent, as the SDK made it
        # the last history published, while a subscriber keeps it (_plain)
        self._shown: list[dict[str, Any]] | None = None
        self._tap = observe_client(client)
        if self._tap is not None:
            self._tap.listener = self

    # ------------------------------------------------------------------------------------------ observations
    def publish_to(self, bus: O.ObservationBus) -> None:
        """Publish to ``bus`` from now on, before ``run()`` (a threaded session relays it to its subscribers)."""
        self.bus = bus
        self._publisher = RedactingPublisher(bus, self._secrets)

    def now(self) -> float:
        return self.clock() - self._t0

    def _pub(self, obs: O.Observation) -> None:
        # a relay may echo the key (in an error event, a header, the stream), even split across reads or deltas:
        # never pass it on (the publisher holds back what could begin it; without secrets it passes everything)
        config = self.config
        if (config.turn_base or config.turn_numbers) and type(obs) in _TURNED:  # (its own turns count from 0)
            turn: int = obs.turn  # type: ignore[attr-defined]
            obs = dataclasses.replace(obs, turn=config.session_turn(turn))  # type: ignore[call-arg]
        self._publisher.publish(obs)

    def _set_state(self, state: str, detail: str = "") -> None:
        if state != self.state:
            self.state = state
            self._pub(O.LoopStateChanged(self.now(), state, detail))

    def _running_state(self) -> str:
        if self._paused and not self._step:
            return LoopState.PAUSED
        if self._step:
            return LoopState.STEPPING
        return LoopState.RUNNING_TOOLS if self._in_tools else LoopState.STREAMING

    # ------------------------------------------------------------------------------------------ HTTP tries
    def try_sent(self, request: httpx2.Request, try_index: int) -> None:
        """The SDK sends a request (called by the wrapped transport, inline)."""
        if self._try_ctx is None:
            return
        self._try_index = try_index
        self._try_t_sent = self.clock()  # this try's reads are timed from here, as its recorded request line is
        self._try_headers = clean_headers(request.headers)  # as sent (the SDK's retry count differs per try)
        if self._start_pending is not None:
            self._publish_started(request)
        if self.state == LoopState.WAITING_RETRY:
            self._set_state(self._running_state())

    def try_failed(self, f: TryFailure) -> None:
        """A try failed before a stream (an error status or a connection failure): publish it, and while the SDK
        waits to retry, the loop waits too (WAITING_RETRY, with the reason)."""
        if self._try_ctx is None:
            return
        turn, attempt = self._try_ctx
        body, etype, emsg = parse_error_body(f.body)
        self._pub(
            O.HttpTryFailed(
                self.now(),
                turn,
                attempt,
                f.try_index,
                f.method,
                f.url,
                self._try_t_sent - self._t0,
                f.status,
                dict(f.headers),
                etype,
                emsg,
                body,
                f.connection_error,
                f.retry_in,
                self._try_headers,
            )
        )
        if f.retry_in is not None:
            self._set_state(
                LoopState.WAITING_RETRY,
                f"{O.try_failure_text(f.status, etype, f.connection_error)} · SDK retries in {duration(f.retry_in)}",
            )

    # ------------------------------------------------------------------------------------------ controls
    @property
    def paused(self) -> bool:
        """Paused by the user (a step under way still lets its unit through)."""
        return self._paused

    def control(self, control: Control, unit: StepUnit = "event") -> None:
        """Apply a control the user gave (``LoopController`` calls this; synchronous, safe at any time) and publish
        it as ControlApplied: ``pause``, ``resume``, ``step`` (by ``unit``), ``cancel``, or ``speed`` (the pacer's
        speed was changed: its label is published)."""
        if control == "pause":
            self._publish_control("pause")
            self._steps_queued = 0
            self._set_paused(True)
        elif control == "resume":
            self._publish_control("resume")
            self._step = None
            self._steps_queued = 0
            self._set_paused(False)
        elif control == "step":
            if unit not in ("event", "block", "turn"):
                raise ValueError(f"unknown step unit {unit!r}")
            self._publish_control(f"step_{unit}")
            self._request_step(unit)
        elif control == "cancel":
            if not self._cancel_requested:
                self._publish_control("cancel")
            self._request_cancel()
        elif control == "speed":
            self._publish_control("speed", self.pacer.label)
        else:
            raise ValueError(f"unknown control {control!r}")

    def _publish_control(self, control: str, detail: str = "") -> None:
        """Publish a control the user applied (none before the loop starts or once it has ended: a pause before the
        start shows as the first StreamHeld)."""
        if self.state in TERMINAL_LOOP_STATES or not self._running:
            return
        self._pub(O.ControlApplied(self.now(), control, detail))

    def _sync_executor_pause(self) -> None:
        ex = self._executor
        if ex is None:
            return
        if self._paused and not self._step:
            ex.pause()
        else:
            ex.resume()

    def _set_paused(self, paused: bool) -> None:
        if self.state in TERMINAL_LOOP_STATES:
            return
        self._paused = paused
        if paused:
            self._hold_by = "pause"
        self._wake.set()
        self._sync_executor_pause()
        if self.state != LoopState.WAITING_RETRY and self.state != LoopState.IDLE:
            self._set_state(self._running_state())

    def _request_step(self, unit: StepUnit) -> None:
        if self.state in TERMINAL_LOOP_STATES:
            return
        if self._step == unit and self._paused:
            # a press while the last step of this unit is still on its way (its event paced, not yet come): one more
            # step after it, not a press lost (five quick `n` moved three events)
            self._steps_queued = min(self._steps_queued + 1, MAX_QUEUED_STEPS)
            return
        self._steps_queued = 0
        self._paused = True
        self._step = unit
        self._wake.set()
        self._sync_executor_pause()
        if self.state != LoopState.IDLE:
            self._set_state(LoopState.STEPPING, unit)

    def _step_done(self) -> None:
        if self._steps_queued and self._paused:  # the next press's step goes on from here
            self._steps_queued -= 1
            return
        self._steps_queued = 0
        self._step = None
        self._hold_by = "step"
        self._sync_executor_pause()
        self._set_state(self._running_state())

    def cancel_as_recorded(self, reason: str | None = None) -> None:
        """A replay's cancel where the recorded run was cancelled, with the recorded reason (a proxy's recording says
        who cancelled: "the client closed the connection before upstream's headers"), not "cancelled by user"."""
        if reason and not self._cancel_requested:
            self._cancel_reason = reason
        self.control("cancel")

    def _request_cancel(self) -> None:
        if self.state in TERMINAL_LOOP_STATES or self._cancel_requested:
            return
        self._cancel_requested = True
        self._wake.set()
        if self._work is not None and not self._work.done():
            self._work.cancel()

    async def _gate(self, turn: int | None = None, attempt: int | None = None) -> bool:
        """Called before each SSE event is processed (and before each turn's request): blocks while paused (unless a
        step allows it). A hold is published as StreamHeld ... StreamReleased (timing leaves it out). True when it
        held."""
        if not (self._paused and not self._step):
            return False
        t_held = self.clock()
        self._pub(O.StreamHeld(self.now(), turn, attempt, self._hold_by))
        try:
            while self._paused and not self._step:
                self._set_state(LoopState.PAUSED)
                self._wake.clear()
                await self._wake.wait()
        finally:  # a cancel while held still closes the interval
            self._pub(O.StreamReleased(self.now(), turn, attempt, self.clock() - t_held))
        return True

    # ------------------------------------------------------------------------------------------ run
    async def run(self) -> LoopResult:
        self._t0 = self.clock() if self.epoch is None else self.epoch
        self._running = True
        cfg = self.config
        if cfg.messages:
            self.messages = SpilledHistory(dict(m) for m in cfg.messages)
        elif self.provider is not None:  # (Chat Completions: the system prompt is the history's first message)
            self.messages = SpilledHistory(self.provider.initial_messages(cfg.prompt or "", cfg.system))
        else:
            self.messages = SpilledHistory([{"role": "user", "content": cfg.prompt or ""}])
        self._pub(O.LoopStarted(self.now(), dict(cfg.source), cfg.model, cfg.prompt))
        self._work = asyncio.ensure_future(self._run_turns())
        if self._cancel_requested:  # cancel() before run(): honour it (nothing is sent)
            self._work.cancel()
        status, error = "finished", None
        try:
            status, error = await self._work
        except asyncio.CancelledError:
            if not self._cancel_requested:
                raise  # the caller cancelled us: cleanup below still runs via finally
            status, error = "cancelled", self._cancel_reason
            await self._after_cancel()
        except LoopError as e:
            status, error = "error", str(e)
        except Exception as e:  # noqa: BLE001 (never a traceback: the loop ends in the error state with a message)
            status, error = "error", f"internal error: {type(e).__name__}: {e}"
        finally:
            if self._executor is not None and status != "cancelled":
                try:
                    await self._executor.aclose()
                except Exception:  # the result is decided; a failing cleanup must not change it
                    log.warning("closing the tool executor failed", exc_info=True)
        state = {"finished": LoopState.FINISHED, "error": LoopState.ERROR, "cancelled": LoopState.CANCELLED}[status]
        self._set_state(state, error or "")
        if error and self._secrets:
            error = redact(error, self._secrets)
        self.result = LoopResult(status, self.turns, self.messages.view(), self.all_tools, error)
        # the history as plain data (read back once from the spill file, the secrets masked): an observation is a
        # value any subscriber may keep, pickle or write, never a live view of the loop's file
        history = self._plain(self.messages.view(self._secrets))
        self._pub(O.LoopFinished(self.now(), status, self.turns, history, self.tool_summaries(), error))
        del history
        self._shown = None
        return self.result

    def tool_summaries(self) -> list[dict[str, Any]]:
        out = []
        for c in self.all_tools:
            out.append(
                {
                    "id": c.id,
                    "name": c.name,
                    "state": c.state.value,
                    "turn": self.config.session_turn(c.turn),
                    "attempt": c.attempt,
                    "queued_at": _rel(c.queued_at, self._t0),
                    "started_at": _rel(c.started_at, self._t0),
                    "finished_at": _rel(c.finished_at, self._t0),
                }
            )
        return out

    async def _run_turns(self) -> tuple[str, str | None]:
        cfg = self.config
        while True:
            if self.turns >= cfg.max_turns:
                return "finished", f"stopped after max turns ({cfg.max_turns})"
            turn = self.turns
            await self._gate(turn)
            self.turns += 1
            self._turn_committed = False
            self._pub(O.TurnStarted(self.now(), turn))
            ts, executor = await self._turn_attempts(turn)
            outcome = ts.outcome
            asm = ts.assembler
            msg = ts.final_message()
            stop_reason = asm.stop_reason
            # wait for the tools of this turn (the stream is done)
            if executor.calls():
                self._in_tools = True
                if self.state not in (LoopState.PAUSED, LoopState.STEPPING):
                    self._set_state(LoopState.RUNNING_TOOLS)
                await executor.wait()
                self._in_tools = False
            assistant = self._history_content(ts, executor)
            tool_uses = [b for b in assistant if b.get("type") == "tool_use"]
            self._turn_committed = True
            self._append_turn(ts, assistant, tool_uses, self._results_for(tool_uses, executor), turn)
            self._pub(O.TurnEnded(self.now(), turn, outcome, stop_reason, dict(msg.get("usage") or {})))
            if self._step == "turn":
                self._step_done()
            if outcome == "truncated":
                open_tools = [b.name for b in asm.tool_blocks() if b.open or b.input_error is not None]
                return (
                    "finished",
                    f"turn {turn + 1} was cut by max_tokens: tool {', '.join(map(str, open_tools))} not run",
                )
            if tool_uses:
                continue
            if stop_reason == "pause_turn":
                continue  # the API expects the same conversation (assistant last) to continue the turn
            text = "".join(b.get("text", "") for b in assistant if b.get("type") == "text")
            self._pub(O.TextFinish(self.now(), turn, text, stop_reason))
            return "finished", None

    def _append(self, message: dict[str, Any], turn: int) -> None:
        self.messages.append(message)
        self._pub(O.MessageAppended(self.now(), turn, message))

    def _append_turn(
        self,
        ts: TurnStream,
        assistant: list[dict[str, Any]],
        tool_uses: list[dict[str, Any]],
        results: list[dict[str, Any]],
        turn: int,
    ) -> None:
        """The assistant turn and its tool results into the history, in the API's own shape: Messages (an
        assistant message, then one user message of tool_result blocks) or the provider's (OpenAI)."""
        p = self.provider
        if p is None:
            if assistant:
                self._append({"role": "assistant", "content": assistant}, turn)
            if tool_uses:
                self._append({"role": "user", "content": results}, turn)
            return
        raw = {
            b.id: b.joined()
            for b in ts.assembler.tool_blocks()
            if isinstance(b.id, str) and not b.open and b.parsed and b.input_error is None
        }
        for m in p.assistant_messages(assistant, raw):
            self._append(m, turn)
        for m in p.result_messages(results if tool_uses else []):
            self._append(m, turn)

    def _history_content(self, ts: TurnStream, executor: ToolExecutor) -> list[dict[str, Any]]:
        """The assistant content to keep: closed blocks (plus a partial text block when cut short). A tool_use
        whose input failed to parse is kept with `input: {}` so the model sees its is_error result; it never ran."""
        out: list[dict[str, Any]] = []
        asm = ts.assembler
        for i in sorted(asm.blocks):
            b = asm.blocks[i]
            c = b.to_content()
            if b.open:
                if b.type == "text" and c.get("text"):
                    out.append(c)
                continue
            if b.type == "text" and not c.get("text"):
                continue  # the API rejects empty text blocks
            if b.is_tool and c.get("input") is None:
                c = {k: v for k, v in c.items() if k != "input_raw"}
                c["input"] = {}
            out.append(c)
        return out

    def _results_for(
        self, tool_uses: list[dict[str, Any]], executor: ToolExecutor, missing: str = "the tool was not run"
    ) -> list[dict[str, Any]]:
        """ONE tool_result per tool_use, in order: the executor's result, else an is_error `missing` note."""
        by_id = {c.id: c for c in executor.calls()}
        results = []
        for tu in tool_uses:
            call = by_id.get(tu["id"])
            if call is not None and call.state in TERMINAL:
                results.append(call.tool_result_block())
            else:
                results.append({"type": "tool_result", "tool_use_id": tu["id"], "content": missing, "is_error": True})
        return results

    # ------------------------------------------------------------------------------------------ attempts
    async def _turn_attempts(self, turn: int) -> tuple[TurnStream, ToolExecutor]:
        cfg = self.config
        attempt = 0
        while True:
            executor = self._new_executor(turn, attempt)
            try:
                ts = await self._attempt(turn, attempt, executor)
                self._open_attempt = None
                self._pub(O.AttemptEnded(self.now(), turn, attempt, "complete", None, ts.outcome))
                return ts, executor
            except LoopError as e:  # an HTTP error or connection failure the SDK gave up on: the loop ends
                self._open_attempt = None
                self._pub(O.AttemptEnded(self.now(), turn, attempt, "failed", str(e), None))
                raise
            except AttemptFailed as e:
                # people count attempts from 1 (observations keep the 0-based index)
                await executor.discard(f"attempt {attempt + 1} failed: {e.reason}")
                outcome = self._ts.outcome if self._ts is not None else None
                self._ts = None  # nothing of a failed attempt goes into the history
                self._open_attempt = None
                self._pub(O.AttemptEnded(self.now(), turn, attempt, "failed", e.reason, outcome))
                if not e.retryable or attempt >= cfg.retries:
                    tries = attempt + 1
                    raise LoopError(
                        f"turn {turn + 1} failed after {tries} attempt{'s' if tries > 1 else ''}: {e.reason}"
                    ) from None
                delay = min(cfg.backoff_base * 2**attempt, cfg.backoff_max) * (0.75 + 0.5 * self._rng.random())
                # the wait as it lasts (scaled by the pacer, as the SDK's retry-after is): said like the SDK's waits
                wait = self.pacer.wall_seconds(delay) if cfg.scale_backoff else delay
                self._set_state(LoopState.WAITING_RETRY, f"retrying in {duration(wait)}: {e.reason}")
                if cfg.scale_backoff:
                    await self.pacer.sleep(delay)
                else:
                    await asyncio.sleep(delay)
                attempt += 1

    def _new_executor(self, turn: int, attempt: int) -> ToolExecutor:
        ex = ToolExecutor(
            self.tools,
            max_concurrency=self.config.max_concurrency,
            clock=self.clock,
            on_change=self._on_tool_change,
            turn=turn,
            attempt=attempt,
        )
        self._executor = ex
        self._sync_executor_pause()
        return ex

    def _on_tool_change(self, call: ToolCall) -> None:
        if id(call) not in self._known_tools:  # (a set: a long run has thousands of calls)
            self._known_tools.add(id(call))
            self.all_tools.append(call)
        preview = None
        if call.result is not None:
            text = call.result if isinstance(call.result, str) else str(call.result)
            preview = text[:200]
        now = self.now()
        self._pub(
            O.ToolStateChanged(
                now,
                call.turn,
                call.attempt,
                call.id,
                call.name,
                call.index,
                call.state.value,
                call.input,
                call.error,
                preview,
                {k: v - self._t0 for k, v in call.times.items()},
                call.safe,
            )
        )
        if call.state in TERMINAL and call.state != ToolState.DISCARDED:
            block = call.tool_result_block()
            self._pub(
                O.ToolResult(
                    now,
                    call.turn,
                    call.attempt,
                    call.id,
                    call.name,
                    block["content"],
                    bool(block.get("is_error")),
                    call.state.value,
                )
            )

    def _request_body(self, messages: Sequence[dict[str, Any]], turn: int = 0) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.model, "max_tokens": cfg.max_tokens, "messages": messages}
        system = cfg.system_by_turn.get(turn, cfg.system)
        if system and cfg.cache_system:
            body["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        elif system:
            body["system"] = system
        definitions = cfg.tools_by_turn.get(turn, cfg.tool_definitions)
        if definitions is not None:
            body["tools"] = definitions
        elif self.tools:
            body["tools"] = [t.definition() for t in self.tools.values()]
        body.update(cfg.extra_body)
        return body

    async def _attempt(self, turn: int, attempt: int, executor: ToolExecutor) -> TurnStream:
        if self.provider is not None:
            return await self._attempt_openai(self.provider, turn, attempt, executor)
        body = self._request_body(self.messages.view(self._secrets), turn)
        url = str(self.client.base_url).rstrip("/") + "/v1/messages"
        kwargs = {k: v for k, v in body.items() if k not in ("model", "max_tokens", "messages")}
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in ("system", "tools")}

        def open_stream(messages: Any) -> AbstractAsyncContextManager[SdkResponse]:
            return self.client.messages.with_streaming_response.create(
                model=body["model"],
                max_tokens=body["max_tokens"],
                messages=messages,
                stream=True,
                extra_body=extra or None,
                **kwargs,
            )

        return await self._send(
            turn,
            attempt,
            executor,
            url,
            body,
            "messages",
            TurnStream(),
            open_stream,
            (anthropic.APIStatusError, anthropic.APIConnectionError),
            _api_error_message,
        )

    async def _send(
        self,
        turn: int,
        attempt: int,
        executor: ToolExecutor,
        url: str,
        body: dict[str, Any],
        key: str,
        ts: TurnStream,
        open_stream: OpenStream,
        errors: tuple[type[StatusError], type[Exception]],
        describe: Callable[[StatusError], str],
    ) -> TurnStream:
        """One attempt over either SDK: ``open_stream(history)`` is the SDK's ``with_streaming_response`` call for
        ``body`` (whose history is under ``key``), ``ts`` the stream that decodes its answer; ``errors`` the SDK's
        status and connection errors (``describe``: a status error's message). The history as it stands is
        published as a plain list read once from the masked view, and sent from the spill file: the SDK serializes a
        placeholder, the tapped transport splices the messages in (every HTTP try, the SDK's own retries too)."""
        history = self.messages.view()
        self._open_attempt = (turn, attempt)
        self._try_headers = None
        # the first try's reads are timed from here: the same instant as the attempt's (recorded) request
        self._try_t_sent = self.clock()
        self._try_index = 0
        # the request as sent: published when the transport sends it (try_sent), with the body and headers the SDK
        # made (the reconstruction below only when the transport cannot be observed, or nothing was sent)
        self._start_pending = (turn, attempt, url, body)
        self._sent_body = None
        if self._tap is None:
            self._publish_started(None)
        self._ts = ts
        if self._tap is not None:
            spliced = SplicedMessages(history)
            sent: list[dict[str, Any]] = spliced.placeholder_messages
            self._tap.rewrite = functools.partial(self._splice, spliced, body[key])
        else:  # a client whose transport cannot be wrapped: the SDK is given the messages themselves
            sent = list(history)
        status_error, connection_error = errors
        self._try_ctx = (turn, attempt)
        try:
            async with open_stream(sent) as resp:
                await self._read_response(resp, ts, turn, attempt, executor)
        except status_error as e:
            # HTTP errors before the first byte: the SDK already retried them; we do not retry twice.
            raise LoopError(f"HTTP {e.status_code}: {describe(e)}") from None
        except connection_error as e:
            raise LoopError(f"connection failed: {e}") from None
        finally:
            self._try_ctx = None
            if self._tap is not None:
                self._tap.rewrite = None
            if self._start_pending is not None:  # nothing reached the transport (the SDK refused to send)
                self._publish_started(None)
        return ts

    async def _read_response(
        self, resp: SdkResponse, ts: TurnStream, turn: int, attempt: int, executor: ToolExecutor
    ) -> None:
        """The streamed answer of either SDK's ``with_streaming_response``: its ResponseStarted, then its bytes."""
        self._try_ctx = None
        if self._tap is not None:
            self._tap.rewrite = None
        t_sent = self._try_t_sent
        self._pub(
            O.ResponseStarted(
                self.now(),
                turn,
                attempt,
                resp.status_code,
                clean_headers(resp.headers),
                self._try_index,
                t_sent - self._t0,
                self._try_headers,
            )
        )
        # the same bytes as resp.iter_bytes(), as one generator we close ourselves on every exit (the SDK's wrapper
        # would leave an unclosed generator behind for the GC to finalize in a stray task)
        chunks = resp.http_response.aiter_bytes()
        try:
            await self._consume(chunks, ts, turn, attempt, executor, t_sent)
        finally:
            await chunks.aclose()

    async def _attempt_openai(self, p: OpenAIProvider, turn: int, attempt: int, executor: ToolExecutor) -> TurnStream:
        """One attempt over the openai SDK (``_send``), decoded by the API's OpenAI stream."""
        import openai

        from inspector.agent.providers import error_message

        cfg = self.config
        tools = cfg.tools_by_turn.get(turn, cfg.tool_definitions)
        if tools is None and self.tools:
            tools = [t.definition() for t in self.tools.values()]
        system = cfg.system_by_turn.get(turn, cfg.system)
        body = p.request_body(cfg.model, self.messages.view(self._secrets), system, tools, dict(cfg.extra_body))
        return await self._send(
            turn,
            attempt,
            executor,
            p.url(self.client),
            body,
            p.history_key,
            p.new_stream(),
            functools.partial(p.open, self.client, body),
            (openai.APIStatusError, openai.APIConnectionError),
            error_message,
        )

    def _splice(
        self, spliced: SplicedMessages, shown: Sequence[dict[str, Any]], request: httpx2.Request
    ) -> httpx2.Request:
        """The tap's rewrite: the request as the SDK made it (``request.content``: its JSON with the placeholder
        history) parsed into the body an observation shows (the history as a plain list read from the masked view
        ``shown``), then the request with the stored history spliced in (what is sent)."""
        sent = spliced.rewrite(request)
        if self._start_pending is not None:
            try:
                parsed = exactjson.loads(request.content)
            except (ValueError, TypeError):
                parsed = None
            key = self.provider.history_key if self.provider is not None else "messages"
            held = parsed.get(key) if isinstance(parsed, dict) else None
            if isinstance(parsed, dict) and held == spliced.placeholder_messages:
                parsed[key] = self._plain(shown)
                self._sent_body = parsed
        return sent

    @overload
    def _plain(self, value: HistoryView) -> list[dict[str, Any]]: ...
    @overload
    def _plain(self, value: object) -> object: ...
    def _plain(self, value: object) -> object:
        """A history view (a request's messages, or the final history) as the plain list it stands for, built once
        per attempt. The messages a subscriber still holds from the previous list (the dashboard keeps every
        request's body) are shared, not read again: a long session costs a list of references per request, not a
        copy of the history. Only a list some subscriber keeps is remembered (``_release_shown``): otherwise the
        loop holds no message in RAM."""
        if not isinstance(value, HistoryView):
            return value
        self._release_shown()
        prev, n = self._shown, len(value)
        k = min(len(prev), n) if prev is not None else 0
        out = prev[:k] if prev is not None and k else []
        out.extend(value[k:n])
        self._shown = out
        return out

    def _release_shown(self) -> None:
        """Forget the last published list unless someone else holds it (refcount: this attribute and the argument)."""
        if self._shown is not None and sys.getrefcount(self._shown) <= 2:
            self._shown = None

    def _publish_started(self, request: httpx2.Request | None) -> None:
        """AttemptStarted for the pending attempt: the request as sent (``request``, its body parsed in
        ``_splice``), or the loop's reconstruction (``None``: the client's transport cannot be observed)."""
        pending, self._start_pending = self._start_pending, None
        if pending is None:
            return
        turn, attempt, url, body = pending
        if request is not None and self._sent_body is not None:
            method, url, headers, shown = (
                request.method,
                str(request.url),
                clean_headers(request.headers),
                self._sent_body,
            )
        else:
            method, headers = "POST", clean_headers(self.client.default_headers)
            shown = {k: self._plain(v) for k, v in body.items()}
        self._sent_body = None
        self._pub(O.AttemptStarted(self._try_t_sent - self._t0, turn, attempt, method, url, headers, shown))
        del shown
        self._release_shown()
        self._set_state(self._running_state())

    async def _consume(
        self, it: AsyncIterator[bytes], ts: TurnStream, turn: int, attempt: int, executor: ToolExecutor, t_sent: float
    ) -> None:
        # the idle timeout: one ReadDeadline over the stream's reads (not an asyncio.timeout per read: a timer made and
        # cancelled per read was ~20% of a replay's CPU; nor wait_for: on 3.11 it swallows a cancel that lands as a
        # read completes)
        watch = ReadDeadline(asyncio.get_running_loop().time() + self.config.idle_timeout)
        try:
            await self._read_all(it, ts, turn, attempt, executor, t_sent, watch)
        finally:
            watch.close()

    async def _read_all(
        self,
        it: AsyncIterator[bytes],
        ts: TurnStream,
        turn: int,
        attempt: int,
        executor: ToolExecutor,
        t_sent: float,
        watch: ReadDeadline,
    ) -> None:
        idle = self.config.idle_timeout
        loop = asyncio.get_running_loop()
        read_index = 0
        after_hold = False  # the stream was held since the last read: the next read may have waited in the socket
        while True:
            try:
                chunk = await watch.read(it.__anext__())
            except StopAsyncIteration:
                break
            except ClientGaveUp as e:  # (a replay: where the recorded client closed the stream and resent it)
                self._close_stream(ts, turn, attempt)
                raise AttemptFailed(str(e)) from None
            except TimeoutError:
                self._diagnose(
                    turn,
                    attempt,
                    Diagnostic(D.IDLE_TIMEOUT, "error", f"no content event for {idle:g} s (pings do not count)", None),
                )
                self._close_stream(ts, turn, attempt)
                raise AttemptFailed(f"idle timeout: no content for {idle:g} s") from None
            except (httpx2.TransportError, anthropic.APIConnectionError) as e:
                if isinstance(e.__cause__, httpx2.TransportError):  # (the SDK wraps a drop mid-stream from 2.17 on)
                    e = e.__cause__
                self._diagnose(
                    turn,
                    attempt,
                    Diagnostic(
                        D.CONNECTION_DROPPED, "error", f"connection dropped mid-stream: {type(e).__name__}: {e}", None
                    ),
                )
                self._close_stream(ts, turn, attempt)
                raise AttemptFailed(f"connection dropped: {e}") from None
            self._pub(O.ReadReceived(self.now(), turn, attempt, read_index, self.clock() - t_sent, chunk, after_hold))
            after_hold = False
            read_index += 1
            steps = ts.feed(chunk)
            for i, step in enumerate(steps):
                # the steps of one SSE event (an OpenAI event can give several) are one event for the controls: the
                # stream is held before its first step only, and a step of one event ends after its last
                if i == 0 or steps[i - 1].sse is not step.sse:
                    was_paused = self._paused
                    if await self._gate(turn, attempt):
                        after_hold = True
                    if was_paused or self._paused:
                        watch.deadline = loop.time() + idle  # time spent paused is not idle time
                last_of_event = i + 1 == len(steps) or steps[i + 1].sse is not step.sse
                self._process(step, ts, turn, attempt, executor, last_of_event)
                if not isinstance(step.event, Ping):
                    watch.deadline = loop.time() + idle
                if isinstance(step.event, ErrorEvent):
                    self._close_stream(ts, turn, attempt)
                    raise AttemptFailed(
                        f"error event: {step.event.error_type}: {step.event.message}",
                        retryable=step.event.error_type in RETRYABLE_ERROR_EVENTS
                        or (self.provider is not None and step.event.error_type in RETRYABLE_ERRORS),
                    )
        self._close_stream(ts, turn, attempt)
        if not ts.assembler.stopped:
            end = "message_stop" if self.provider is None else getattr(ts, "message_end", "its end")
            raise AttemptFailed(f"stream ended before {end}")

    def _close_stream(self, ts: TurnStream, turn: int, attempt: int) -> None:
        for d in ts.close():
            self._diagnose(turn, attempt, d)
        # blocks still open: their tools never run
        ex = self._executor
        if ex is not None:
            end = getattr(ts, "block_end", "its content_block_stop")  # (in the family's words: an OpenAI stream's)
            for b in ts.assembler.tool_blocks():
                if b.open and b.id and any(c.id == b.id and c.state == ToolState.STREAMING_INPUT for c in ex.calls()):
                    ex.not_run(
                        b.id, b.name or "?", b.index, f"the block never got {end} (stream cut); the tool was not run"
                    )

    def _diagnose(self, turn: int, attempt: int, d: Diagnostic) -> None:
        self._pub(O.DiagnosticRaised(self.now(), turn, attempt, d))

    def _process(
        self, step: Step, ts: TurnStream, turn: int, attempt: int, executor: ToolExecutor, last_of_event: bool = True
    ) -> None:
        now = self.now()
        self.events_processed += 1
        asm = ts.assembler
        prev, self._last_sse = self._last_sse, step.sse
        for obs in step_observations(step, asm, now, turn, attempt, prev_sse=prev):
            self._pub(obs)
        for tr in tool_transitions(step, asm):
            if tr.state is ToolState.STREAMING_INPUT:
                executor.begin_input(tr.id, tr.name, tr.index)
            else:  # QUEUED (runs) or NOT_RUN (invalid input: the executor gives it its is_error result)
                executor.submit(tr.id, tr.name, tr.index, tr.input, tr.error)
        if self._step == "block" and any(change[0] == "block_closed" for change in step.changes):
            self._step_done()
        if self._step == "event" and last_of_event:
            self._step_done()

    async def _after_cancel(self) -> None:
        """Cancel: the HTTP response is already closed (the task was cancelled inside `async with`). The attempt under
        way ends `cancelled` (a recording gets its end line). Cancel the tools, then keep the history valid: every kept
        tool_use gets a tool_result."""
        ex, ts = self._executor, self._ts
        if self._open_attempt is not None:
            turn, attempt = self._open_attempt
            self._pub(
                O.AttemptEnded(
                    self.now(), turn, attempt, "cancelled", self._cancel_reason, ts.outcome if ts is not None else None
                )
            )
        self._in_tools = False
        if ex is not None:
            try:
                await ex.cancel("cancelled by user")
                await ex.aclose()
            except Exception:  # cancel goes on: the history must still be made valid
                log.warning("cancelling the tool executor failed", exc_info=True)
        if self._turn_committed or ts is None or ex is None:
            return  # the turn's messages are already in the history, or nothing of this turn is kept
        assistant = self._history_content(ts, ex)
        if not assistant:
            return
        turn = self.turns - 1
        tool_uses = [b for b in assistant if b.get("type") == "tool_use"]
        results = self._results_for(tool_uses, ex, "cancelled by user before the tool ran") if tool_uses else []
        self._append_turn(ts, assistant, tool_uses, results, turn)


def _api_error_message(e: anthropic.APIStatusError) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return f"{err.get('type')}: {err.get('message')}"
    return str(e.message)


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 6)

"""Scenarios are data: a scripted conversation the in-process fake API serves through the real SDK.

A :class:`Scenario` holds the request side (prompt, system, tools) and one :class:`TurnScript` per assistant turn.
Turn ``i`` answers the request whose ``messages`` contain ``i`` assistant messages. Each turn lists its content
blocks, its pacing (how the bytes are timed and chunked) and its faults (what goes wrong, on which attempt).
``render.py`` turns that into bytes; ``transport.py`` serves them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import random
import typing
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

from inspector.agent.toolbox.spec import ToolFn, ToolSpec

if TYPE_CHECKING:
    from inspector.core.pacing import Pacer

WORKSPACES_DIR = Path(__file__).resolve().parent / "workspace"

BuiltinToolName = Literal["list_dir", "read_file", "search_text", "sleep", "write_file"]
BUILTIN_TOOL_NAMES: frozenset[str] = frozenset(typing.get_args(BuiltinToolName))

LineEnding = Literal["\n", "\r\n", "\r"]

# The stop reasons the API sends (docs: anthropic-stream notes); a scenario file names one of them.
StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]
STOP_REASONS: tuple[str, ...] = typing.get_args(StopReason)

# --- bounds ------------------------------------------------------------------------------------------------------
# Every number a scenario declares is bounded where it is declared: ``metadata=between(lo, hi)`` on the field (for a
# tuple, each item). The file loader refuses a value outside with its file:line:column, the JSON Schema carries the
# bound (minimum / maximum), docs/limits.md lists them. They keep a file from asking for a render that never ends.
MAX_SECONDS = 3600.0  # any duration, delay, timeout or interval, in scenario seconds
MAX_COUNT = 1_000_000  # event / fragment / byte counts and block indexes
MAX_PINGS = 10_000  # pings of a stall
MAX_BYTES = 64 * 2**20  # byte sizes (a proxy's buffer)
MAX_ATTEMPT = 100  # attempt numbers (0 = the first request of a turn)
MAX_TOKENS = 1_000_000_000  # token counts (usage, max_tokens, thinking budget)
MAX_SEED = 2**63 - 1


def between(lo: float, hi: float) -> dict[str, Any]:
    """Field metadata: the inclusive range of a number (of each item of a tuple)."""
    return {"bounds": (lo, hi)}


def bounds_of(f: dataclasses.Field[Any]) -> tuple[float, float] | None:
    b = f.metadata.get("bounds")
    return None if b is None else (b[0], b[1])


SECONDS = between(0, MAX_SECONDS)
COUNT = between(0, MAX_COUNT)
ATTEMPTS = between(0, MAX_ATTEMPT)
TOKENS = between(0, MAX_TOKENS)


# --- sizes -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sizes:
    """Seeded random chunk sizes in ``[lo, hi]`` (inclusive), e.g. ``Sizes(8, 20)`` for tool JSON fragments."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"Sizes needs 1 <= lo <= hi, got {self.lo}, {self.hi}")


# A chunk spec: a fixed size, a list of sizes used in turn (cycled), or seeded random Sizes.
ChunkSpec = Union[int, Sequence[int], Sizes]


# --- content blocks --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class TextBlock:
    text: str
    chunk: ChunkSpec = Sizes(3, 14)  # characters per text_delta
    type: str = field(default="text", init=False)


@dataclass(slots=True)
class ThinkingBlock:
    thinking: str
    signature: str = "EqQBCkgIARABGAIiQL2yH6kR0oV0V0bG8yQm1hX3Jl..."
    chunk: ChunkSpec = Sizes(8, 40)  # characters per thinking_delta; the signature comes whole in one delta
    type: str = field(default="thinking", init=False)


@dataclass(slots=True)
class RedactedThinkingBlock:
    data: str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP..."
    type: str = field(default="redacted_thinking", init=False)


@dataclass(slots=True)
class ToolUseBlock:
    """A client tool call. The input JSON text is ``raw_json`` when given (may be invalid or truncated: the fake
    API then behaves like fine-grained tool streaming, which does not validate), else ``json.dumps(input)``."""

    name: str
    input: dict[str, Any] | None = None
    raw_json: str | None = None
    fragment: ChunkSpec = Sizes(8, 20)  # characters per input_json_delta
    empty_first: bool = True  # real streams send an empty first partial_json ""
    id: str | None = None  # None: a seeded toolu_... id
    extra: dict[str, Any] = field(default_factory=dict)  # extra fields merged into content_block_start (e.g. "caller")
    type: str = field(default="tool_use", init=False)

    def __post_init__(self) -> None:
        if self.input is None and self.raw_json is None:
            self.input = {}


@dataclass(slots=True)
class ServerToolUseBlock:
    """A server tool call (web_search...): streams its input like tool_use; the client never runs it."""

    name: str = "web_search"
    input: dict[str, Any] | None = None
    raw_json: str | None = None
    fragment: ChunkSpec = Sizes(8, 20)
    empty_first: bool = True
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="server_tool_use", init=False)

    def __post_init__(self) -> None:
        if self.input is None and self.raw_json is None:
            self.input = {}


@dataclass(slots=True)
class WholeBlock:
    """A block that arrives whole in content_block_start, with no deltas (server tool results and the like).
    ``result_of``: index of a (server) tool block in the same turn whose id fills ``tool_use_id``."""

    content: dict[str, Any]
    result_of: int | None = None

    @property
    def type(self) -> str:
        return str(self.content.get("type", "unknown"))


Block = Union[TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ServerToolUseBlock, WholeBlock]


# --- pacing ----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Pacing:
    """How a turn's bytes are timed and cut into reads. All times are scenario seconds (scaled by the Pacer)."""

    # request sent -> first body byte (headers arrive after `header_share` of it)
    ttfb: float = field(default=0.4, metadata=SECONDS)
    event_gap: float = field(default=0.04, metadata=SECONDS)  # mean time between events
    # each gap is event_gap * uniform(1 - jitter, 1 + jitter), seeded
    jitter: float = field(default=0.0, metadata=between(0, 1))
    events_per_read: int = field(default=1, metadata=between(1, MAX_COUNT))  # events grouped into one read
    split_events: bool = False  # cut every event across two reads at a seeded byte (maybe mid UTF-8 character)
    ping_every: int | None = field(default=None, metadata=between(1, MAX_COUNT))  # a ping after every N events
    pad: bool = False  # pad data JSON with trailing spaces, like the real API
    line_ending: LineEnding = "\n"
    header_share: float = field(default=0.75, metadata=between(0, 1))  # share of ttfb spent before the response headers
    # extra pause before each content_block_start ("the model is thinking")
    block_pause: float = field(default=0.0, metadata=SECONDS)
    # a buffering proxy: bytes are released in chunks of >= N bytes, rest at EOF
    proxy_buffer: int | None = field(default=None, metadata=between(1, MAX_BYTES))
    # Exact reads (from a recording): events per read, in order (then events_per_read), and each read's delay in
    # scenario seconds (replacing the gaps summed over its events; then the computed gaps).
    read_events: tuple[int, ...] | None = field(default=None, metadata=between(1, MAX_COUNT))
    read_delays: tuple[float, ...] | None = field(default=None, metadata=SECONDS)

    def __post_init__(self) -> None:
        if self.line_ending not in ("\n", "\r\n", "\r"):
            raise ValueError(f"line_ending must be LF, CRLF or CR, got {self.line_ending!r}")
        if self.events_per_read < 1:
            raise ValueError("events_per_read must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be in [0, 1]")
        if self.read_events is not None and any(n < 1 for n in self.read_events):
            raise ValueError("read_events must be >= 1 each")
        if self.read_delays is not None and any(d < 0 for d in self.read_delays):
            raise ValueError("read_delays must be >= 0 each")


# --- faults ----------------------------------------------------------------------------------------------------
# ``attempts``: the attempts (0 = first request for the turn) the fault applies to; None: every attempt.
# Event counts ``n_events`` / ``after_events`` count protocol events from message_start on (pings excluded).


@dataclass(slots=True)
class ErrorEventAfter:
    """HTTP 200, ``n_events`` events, then ``event: error`` and EOF (e.g. overloaded_error mid-stream)."""

    n_events: int = field(metadata=COUNT)
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    attempts: tuple[int, ...] | None = field(default=(0,), metadata=ATTEMPTS)


@dataclass(slots=True)
class DropAfter:
    """The connection drops: after ``n_events`` events, or inside block ``inside_block`` after ``after_fragments``
    of its deltas (the empty first partial_json counts). ``cut_bytes`` bytes of the next event are sent first."""

    n_events: int | None = field(default=None, metadata=COUNT)
    inside_block: int | None = field(default=None, metadata=COUNT)
    after_fragments: int = field(default=1, metadata=COUNT)
    cut_bytes: int = field(default=0, metadata=COUNT)
    attempts: tuple[int, ...] | None = field(default=(0,), metadata=ATTEMPTS)

    def __post_init__(self) -> None:
        if (self.n_events is None) == (self.inside_block is None):
            raise ValueError("DropAfter needs exactly one of n_events / inside_block")


@dataclass(slots=True)
class StallWithPings:
    """After ``after_events`` events, only pings every ``ping_interval`` s (``pings`` of them), then ``then``:
    "hang" (the connection stays open, silent) or "eof"."""

    after_events: int = field(default=1, metadata=COUNT)
    ping_interval: float = field(default=0.5, metadata=SECONDS)
    pings: int = field(default=20, metadata=between(0, MAX_PINGS))
    then: Literal["hang", "eof"] = "hang"
    attempts: tuple[int, ...] | None = field(default=(0,), metadata=ATTEMPTS)


@dataclass(slots=True)
class MaxTokensCut:
    """The model hits max_tokens inside block ``block``: ``keep_fragments`` of its deltas (None: about half), no
    content_block_stop, then message_delta stop_reason max_tokens and message_stop. Later blocks never come."""

    block: int = field(metadata=COUNT)
    keep_fragments: int | None = field(default=None, metadata=COUNT)
    attempts: tuple[int, ...] | None = field(default=None, metadata=ATTEMPTS)


@dataclass(slots=True)
class InvalidToolJson:
    """Block ``block``'s input JSON is invalid at content_block_stop (fine-grained streaming does not validate):
    ``raw_json`` if given, else the valid JSON cut in the middle of its last string."""

    block: int = field(metadata=COUNT)
    raw_json: str | None = None
    attempts: tuple[int, ...] | None = field(default=None, metadata=ATTEMPTS)


@dataclass(slots=True)
class InterleaveBlocks:
    """Consecutive tool blocks stream side by side: all of them open (content_block_start), then their deltas
    alternate by index, each block stopping after its last delta. The protocol allows it (every delta names its
    index; the SDK's accumulator keys by index); a harness that keeps one "current" buffer mixes the inputs."""

    attempts: tuple[int, ...] | None = None


Fault = Union[ErrorEventAfter, DropAfter, StallWithPings, MaxTokensCut, InvalidToolJson, InterleaveBlocks]


@dataclass(slots=True)
class HttpError:
    """Attempt ``attempt`` of the turn is answered with an HTTP error instead of a stream."""

    status: int = field(default=429, metadata=between(200, 599))  # a final HTTP status
    attempt: int = field(default=0, metadata=ATTEMPTS)
    error_type: str | None = None  # None: from the status (rate_limit_error, overloaded_error...)
    message: str | None = None
    retry_after_ms: int | None = field(default=None, metadata=between(0, MAX_SECONDS * 1000))
    retry_after: float | None = field(default=None, metadata=SECONDS)
    should_retry: bool | None = None  # x-should-retry header
    delay: float = field(default=0.05, metadata=SECONDS)  # scenario seconds before the response
    # the in-process fake API fails the connection instead (httpx2.ConnectError with this reason, e.g. connection
    # refused) after `delay`; a server over real HTTP (inspector serve) still answers with `status`
    connect_error: str | None = None

    def resolved_type(self) -> str:
        if self.error_type:
            return self.error_type
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            500: "api_error",
            529: "overloaded_error",
        }.get(self.status, "api_error")


@dataclass(slots=True)
class Usage:
    input_tokens: int = field(default=1200, metadata=TOKENS)
    output_tokens: int | None = field(default=None, metadata=TOKENS)  # None: estimated (about 4 characters a token)
    cache_creation_input_tokens: int = field(default=0, metadata=TOKENS)
    cache_read_input_tokens: int = field(default=0, metadata=TOKENS)


@dataclass(slots=True)
class TurnScript:
    blocks: list[Block]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    pacing: Pacing = field(default_factory=Pacing)
    faults: list[Fault] = field(default_factory=list)
    http_errors: list[HttpError] = field(default_factory=list)
    message_id: str | None = None  # None: a seeded msg_01... id
    # the system prompt the harness sends with this turn's request (None: the scenario's): a harness that rewrites
    # its system prompt (the time, a counter) writes the prompt cache again; see the cache_break scenario
    system: str | None = None

    def faults_for(self, attempt: int) -> list[Fault]:
        return [f for f in self.faults if f.attempts is None or attempt in f.attempts]

    def http_error_for(self, attempt: int) -> HttpError | None:
        return next((e for e in self.http_errors if e.attempt == attempt), None)

    def tool_blocks(self) -> list[tuple[int, ToolUseBlock]]:
        return [(i, b) for i, b in enumerate(self.blocks) if isinstance(b, ToolUseBlock)]


# --- simulated tools -------------------------------------------------------------------------------------------
# A duration: fixed scenario seconds, or (lo, hi): seeded per call (scenario seed + tool name + input).
Duration = Union[float, tuple[float, float]]


@dataclass(slots=True)
class ToolCase:
    """What a simulated tool does for calls whose input contains every key/value of ``input``."""

    input: dict[str, Any]
    result: Any = None
    error: str | None = None
    hang: bool = False
    duration: Duration | None = None  # None: the tool's


@dataclass(slots=True)
class SimulatedTool:
    """A scenario tool that is not run but simulated: after ``duration`` (scaled by the pacer) the call gets
    ``result`` (a string, or any JSON value), fails with ``error`` (an is_error result) or never returns
    (``hang``: only its timeout ends it). ``cases`` override that for matching inputs (first match wins)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    result: Any = "ok"
    error: str | None = None
    hang: bool = False
    duration: Duration = 0.0
    concurrency_safe: bool = True
    timeout: float | None = None
    cases: list[ToolCase] = field(default_factory=list)

    def outcome(self, args: dict[str, Any]) -> tuple[Any, str | None, bool, Duration]:
        """(result, error, hang, duration) for a call with input ``args``."""
        for case in self.cases:
            if all(k in args and args[k] == v for k, v in case.input.items()):
                return (
                    case.result,
                    case.error,
                    case.hang,
                    self.duration if case.duration is None else case.duration,
                )
        return self.result, self.error, self.hang, self.duration


def seconds_of(duration: Duration, seed: str) -> float:
    """A duration in scenario seconds: fixed, or drawn in [lo, hi] by a RNG seeded with ``seed``."""
    if isinstance(duration, tuple):
        lo, hi = duration
        return random.Random(seed).uniform(lo, hi)
    return float(duration)


def _call_seed(scenario_name: str, seed: int, tool: str, args: dict[str, Any]) -> str:
    return f"tool/{scenario_name}/{seed}/{tool}/{json.dumps(args, sort_keys=True, default=str)}"


def simulated_spec(scenario: Scenario, tool: SimulatedTool, pacer: Pacer | None = None) -> ToolSpec:
    """The ToolSpec of a simulated tool: sleeps its duration on ``pacer`` (None: real seconds), then answers."""

    async def fn(args: dict[str, Any]) -> Any:
        result, error, hang, duration = tool.outcome(args)
        seconds = seconds_of(duration, _call_seed(scenario.name, scenario.seed, tool.name, args))
        await _sleep(pacer, seconds)
        if hang:
            await asyncio.Event().wait()
        if error is not None:
            raise RuntimeError(error)
        return result

    return ToolSpec(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        fn=fn,
        concurrency_safe=tool.concurrency_safe,
        timeout=tool.timeout,
        meta={"simulated": True},
    )


async def _to_thread(fn: ToolFn, *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


# How a delayed built-in's sync function runs: in a worker thread. (Tests on a virtual clock swap in an inline runner
# so that no real thread time can race the virtual clock.)
run_sync = _to_thread


def with_duration(scenario: Scenario, spec: ToolSpec, duration: Duration, pacer: Pacer | None = None) -> ToolSpec:
    """A built-in tool that takes ``duration`` more scenario seconds (waited before it runs) than its real work.
    A sync function then runs in a worker thread (``asyncio.to_thread`` copies the context: the cancel event stays
    visible to it)."""
    inner = spec.fn

    async def fn(args: dict[str, Any]) -> Any:
        await _sleep(pacer, seconds_of(duration, _call_seed(scenario.name, scenario.seed, spec.name, args)))
        if inspect.iscoroutinefunction(inner):
            return await inner(args)
        value = await run_sync(inner, args)  # looked up at call time: tests may swap it
        return await value if inspect.isawaitable(value) else value

    return dataclasses.replace(spec, fn=fn, meta={**spec.meta, "duration": duration})


async def _sleep(pacer: Pacer | None, seconds: float) -> None:
    if seconds <= 0:
        return
    if pacer is None:
        await asyncio.sleep(seconds)
    else:
        await pacer.sleep(seconds)


# --- scenario --------------------------------------------------------------------------------------------------


def repeated(names: Iterable[str]) -> list[str]:
    """The names given more than once, sorted (counted in one pass: a file of 20,000 tools took 20 s when each name
    was counted in the whole list)."""
    return sorted(n for n, k in Counter(names).items() if k > 1)


@dataclass(slots=True)
class Scenario:
    name: str
    description: str  # one line, for `inspector scenarios`
    prompt: str
    turns: list[TurnScript]
    system: str | None = "You are a careful coding assistant. Use the tools to look at the workspace before answering."
    model: str = "claude-sonnet-4-6"
    max_tokens: int = field(default=4096, metadata=between(1, MAX_TOKENS))
    tools: list[str] = field(default_factory=list)  # built-in tool names the request offers
    extra_tools: list[ToolSpec] = field(default_factory=list)  # scenario-specific tools
    tool_timeouts: dict[str, float] = field(default_factory=dict)  # per tool name, overrides ToolSpec.timeout
    seed: int = field(default=0, metadata=between(-MAX_SEED - 1, MAX_SEED))
    workspace: str | None = None  # folder name under inspector/scenarios/workspace/
    workspace_copy: bool = False  # run on a temporary copy of the workspace (required when it is written)
    allow_write: bool = False
    eager_input_streaming: bool = False  # the request marks its tools eager_input_streaming (fine-grained)
    # extended thinking: {"type": "enabled", "budget_tokens": N}
    thinking_budget: int | None = field(default=None, metadata=between(1, MAX_TOKENS))
    # seconds without a content event before the harness gives up on a stream
    idle_timeout: float | None = field(default=None, metadata=SECONDS)
    # the request marks its system prompt with cache_control (prompt caching: a breakpoint after the system prompt)
    cache_system: bool = False
    expected: dict[str, Any] = field(default_factory=dict)  # what a headless run should end in
    simulated_tools: list[SimulatedTool] = field(default_factory=list)  # scripted tools (scenario files)
    tool_durations: dict[str, Duration] = field(default_factory=dict)  # extra scenario seconds per built-in tool
    source_path: str | None = None  # the scenario file it was loaded from, if any

    def __post_init__(self) -> None:
        path_like = not self.name or self.name in (".", "..") or any(c in self.name for c in "/\\\0\n")
        if self.workspace_copy and path_like:  # the copy's temporary folder is named after the scenario
            raise ValueError(
                f"scenario {self.name!r}: a name names temporary folders: no path ('/', '..') and one line"
            )
        if not self.description or "\n" in self.description:
            raise ValueError(f"scenario {self.name!r}: description must be one line")
        if not self.turns:
            raise ValueError(f"scenario {self.name!r}: needs at least one turn")
        if self.allow_write and self.workspace and not self.workspace_copy:
            raise ValueError(f"scenario {self.name!r}: a scenario that writes must set workspace_copy=True")
        unknown = [t for t in self.tools if t not in BUILTIN_TOOL_NAMES]
        if unknown:
            raise ValueError(f"scenario {self.name!r}: unknown built-in tools {unknown}")
        offered = self.tool_names()
        twice = repeated(offered)
        if twice:
            raise ValueError(f"scenario {self.name!r}: tools offered twice: {twice}")
        for sim in self.simulated_tools:
            hangs = sim.hang or any(c.hang for c in sim.cases)
            if hangs and self.tool_timeouts.get(sim.name, sim.timeout) is None:
                raise ValueError(
                    f"scenario {self.name!r}: tool {sim.name!r} never answers (hang) and has no timeout: "
                    "a run waiting on it never ends"
                )
        not_builtin = [n for n in self.tool_durations if n not in self.tools]
        if not_builtin:
            raise ValueError(
                f"scenario {self.name!r}: tool_durations for tools that are not offered built-ins: {not_builtin}"
            )
        names = set(offered)
        for ti, turn in enumerate(self.turns):
            for bi, block in turn.tool_blocks():
                if block.name not in names:
                    raise ValueError(f"scenario {self.name!r} turn {ti} block {bi}: tool {block.name!r} not offered")
            for fault in turn.faults:
                if isinstance(fault, (MaxTokensCut, InvalidToolJson)) and not 0 <= fault.block < len(turn.blocks):
                    raise ValueError(f"scenario {self.name!r} turn {ti}: fault block index {fault.block} out of range")
        if self.workspace is not None and not (WORKSPACES_DIR / self.workspace).is_dir():
            raise ValueError(f"scenario {self.name!r}: no workspace folder {self.workspace!r} in {WORKSPACES_DIR}")

    def tool_names(self) -> list[str]:
        return list(self.tools) + [t.name for t in self.extra_tools] + [t.name for t in self.simulated_tools]

    @property
    def workspace_path(self) -> Path | None:
        """The bundled (read-only by convention) workspace folder, or None."""
        return None if self.workspace is None else WORKSPACES_DIR / self.workspace

    @property
    def workspace_bundled(self) -> bool:
        """The workspace ships with the package (a name, not a path): its hard links are trusted (an installer such as
        uv links a package's files into its cache), where a workspace's hard links are otherwise refused
        (agent/toolbox/confine.py)."""
        ws = self.workspace
        return ws is not None and ws not in ("", ".", "..") and not any(c in ws for c in "/\\")

    def copy_workspace(self, dest_parent: str | Path | None = None) -> Path | None:
        """Copy the workspace into a fresh temp dir (under ``dest_parent`` if given); returns the copy's path.
        The caller removes it (``shutil.rmtree(path.parent)``)."""
        from inspector.scenarios import workspace_copy  # (symlinks kept inside, special files skipped, cleaned up)

        return workspace_copy.copy_workspace(
            self.workspace_path,
            prefix=f"inspector-{self.name}-",
            dest_parent=dest_parent,
            hard_links=self.workspace_bundled,
        )

    def workspace_root(self, dest_parent: str | Path | None = None) -> Path | None:
        """Where tools should run: a temp copy when ``workspace_copy`` else the bundled folder."""
        return self.copy_workspace(dest_parent) if self.workspace_copy else self.workspace_path

    def resolve_tools(self, root: str | Path | None, pacer: Pacer | None = None) -> dict[str, ToolSpec]:
        """The ToolSpecs this scenario offers, by name, in request order, with ``tool_timeouts`` applied.
        Built-in tools come from ``inspector.agent.toolbox.builtin.builtin_tools(root, allow_write=...)``, slowed
        down by ``tool_durations``; simulated tools wait their durations. Both sleep on ``pacer`` (an
        ``inspector.core.pacing.Pacer``; None: real seconds)."""
        specs: dict[str, ToolSpec] = {}
        if self.tools:
            from inspector.agent.toolbox.builtin import builtin_tools  # lazy: written in parallel, optional here

            if root is None:
                raise ValueError(f"scenario {self.name!r}: built-in tools {self.tools} need a workspace")
            available = builtin_tools(Path(root), allow_write=self.allow_write, hard_links=self.workspace_bundled)
            for name in self.tools:
                specs[name] = available[name]
                if name in self.tool_durations:
                    specs[name] = with_duration(self, specs[name], self.tool_durations[name], pacer)
        for spec in self.extra_tools:
            specs[spec.name] = spec
        for sim in self.simulated_tools:
            specs[sim.name] = simulated_spec(self, sim, pacer)
        for name, timeout in self.tool_timeouts.items():
            if name in specs:
                specs[name] = dataclasses.replace(specs[name], timeout=timeout)
        return specs

    def request_params(self, tool_specs: dict[str, ToolSpec] | None = None) -> dict[str, Any]:
        """Keyword arguments for ``client.messages.create/stream`` of turn 0 (without ``messages``).
        Tool definitions come from ``tool_specs`` when given, else a placeholder schema per builtin tool."""
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system:
            params["system"] = self.system
        tools = []
        for name in self.tool_names():
            if tool_specs and name in tool_specs:
                d = tool_specs[name].definition()
            else:
                spec = next((t for t in self.extra_tools if t.name == name), None)
                sim = next((t for t in self.simulated_tools if t.name == name), None)
                if spec is not None:
                    d = spec.definition()
                elif sim is not None:
                    d = {"name": sim.name, "description": sim.description, "input_schema": sim.input_schema}
                else:
                    d = {"name": name, "description": f"built-in {name}", "input_schema": {"type": "object"}}
            if self.eager_input_streaming:
                d = {**d, "eager_input_streaming": True}
            tools.append(d)
        if tools:
            params["tools"] = tools
        if self.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        return params

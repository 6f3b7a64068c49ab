"""Scenario -> bytes, deterministically.

``render_turn(scenario, turn_index, attempt)`` gives a :class:`ResponsePlan`: the HTTP status, headers, the body as
a list of timed reads and how the body ends ("eof", "drop": the connection breaks, "hang": it stays open, silent).
Everything random (ids, jitter, chunk sizes, padding) comes from RNGs seeded by scenario name + seed + turn +
attempt, so the same inputs always give the same bytes.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from .model import (
    Block,
    ChunkSpec,
    DropAfter,
    ErrorEventAfter,
    HttpError,
    InterleaveBlocks,
    InvalidToolJson,
    MaxTokensCut,
    Pacing,
    RedactedThinkingBlock,
    Scenario,
    ServerToolUseBlock,
    Sizes,
    StallWithPings,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    TurnScript,
    WholeBlock,
)

TOOL_BLOCK_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})  # blocks whose input streams as JSON

End = Literal["eof", "drop", "hang"]
Event = tuple[str, dict[str, Any]]  # (event name, its data JSON)

PING_DATA = b'{"type": "ping"}'  # the real API's exact ping payload (with a space)
_B62 = string.digits + string.ascii_letters


@dataclass(slots=True)
class PlannedRead:
    delay: float  # scenario seconds before this read arrives (after the previous read / the headers)
    data: bytes


@dataclass(slots=True)
class ResponsePlan:
    status: int
    headers: dict[str, str]
    reads: list[PlannedRead]
    end: End = "eof"
    header_delay: float = 0.0  # scenario seconds before the status line + headers
    events: list[Event] = field(default_factory=list)  # every complete event in the body, pings and error included
    turn: int = 0
    attempt: int = 0

    @property
    def body(self) -> bytes:
        return b"".join(r.data for r in self.reads)

    @property
    def total_delay(self) -> float:
        """Scenario seconds from request to the last planned read (a hang comes after that)."""
        return self.header_delay + sum(r.delay for r in self.reads)


# --- ids and chunking ------------------------------------------------------------------------------------------


def _rng(kind: str, scenario: Scenario, turn: int, attempt: int) -> random.Random:
    # str seeds are hashed with sha512 by random.Random: stable across processes (no PYTHONHASHSEED effect).
    return random.Random(f"{kind}/{scenario.name}/{scenario.seed}/{turn}/{attempt}")


def _id(rng: random.Random, prefix: str, n: int = 22) -> str:
    return prefix + "".join(rng.choice(_B62) for _ in range(n))


def _chunks(text: str, spec: ChunkSpec, rng: random.Random) -> list[str]:
    if not text:
        return []
    if isinstance(spec, Sizes):
        sizes = iter(lambda: rng.randint(spec.lo, spec.hi), None)
    elif isinstance(spec, int):
        if spec < 1:
            raise ValueError("chunk size must be >= 1")
        sizes = iter(lambda: spec, None)
    else:
        seq = [int(s) for s in spec]
        if not seq or min(seq) < 1:
            raise ValueError("chunk sizes must be a non-empty list of ints >= 1")
        sizes = (seq[i % len(seq)] for i in range(len(text) + 1))
    out, pos = [], 0
    for size in sizes:
        if pos >= len(text):
            break
        out.append(text[pos : pos + size])
        pos += size
    return out


def tool_json_text(block: ToolUseBlock | ServerToolUseBlock) -> str:
    """The input JSON text a tool block streams (``raw_json`` or the input as the API formats it)."""
    if block.raw_json is not None:
        return block.raw_json
    return json.dumps(block.input, ensure_ascii=False)


def truncate_json(text: str) -> str:
    """Valid JSON -> the same JSON cut in the middle of its last string (what a cut stream leaves)."""
    last_quote = text.rfind('"', 0, max(0, len(text) - 1))
    start = text.rfind('"', 0, last_quote) if last_quote > 0 else -1
    if start >= 0 and last_quote - start > 2:
        return text[: start + 1 + (last_quote - start) // 2]
    return text[: max(1, len(text) // 2)]


# --- the event list --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Ev:
    name: str
    data: dict[str, Any] | None  # None: a ping (its payload is fixed bytes)
    gap: float = 0.0
    block: int | None = None  # content index for block events
    delta_no: int | None = None  # 1-based delta number within its block
    standalone: bool = False  # sent in a read of its own (error event, stall pings)
    starts_block: bool = False  # gets the block pause (the OpenAI forms of content_block_start)
    stops_block: bool = False  # the OpenAI forms of content_block_stop (a drop inside a block comes before it)
    raw: bytes | None = None  # the exact data bytes (OpenAI's ``[DONE]``), instead of the JSON of ``data``


def _ids_for(scenario: Scenario, turn_index: int, attempt: int, seed: str = "") -> tuple[str, list[str | None], str]:
    """A turn's message id, tool ids and request id. ``seed``: what tells the answers of two conversations apart
    (serve's :func:`~inspector.scenarios.fakeapi.message_seed`): it seeds the message and tool ids, not the request
    id; "" (the default): the ids every earlier release rendered."""
    turn = scenario.turns[turn_index]
    rng = _rng("ids", scenario, turn_index, attempt)
    seeded = _rng(f"ids:{seed}", scenario, turn_index, attempt) if seed else rng
    msg_id = _id(rng, "msg_01")
    if seed:
        msg_id = _id(seeded, "msg_01")
    if turn.message_id is not None:
        msg_id = turn.message_id
    ids: list[str | None] = []
    for block in turn.blocks:
        if isinstance(block, ToolUseBlock):
            ids.append(block.id or _seeded_id(rng, seeded, "toolu_01"))
        elif isinstance(block, ServerToolUseBlock):
            ids.append(block.id or _seeded_id(rng, seeded, "srvtoolu_01"))
        else:
            ids.append(None)
    request_id = _id(rng, "req_011C", 20)
    return msg_id, ids, request_id


def _seeded_id(rng: random.Random, seeded: random.Random, prefix: str) -> str:
    """An id from ``seeded``, ``rng`` drawn all the same (so the request id after it stays what it was)."""
    plain = _id(rng, prefix)
    return plain if seeded is rng else _id(seeded, prefix)


def _block_json_texts(turn: TurnScript, attempt: int) -> dict[int, str]:
    texts: dict[int, str] = {}
    for i, block in enumerate(turn.blocks):
        if isinstance(block, (ToolUseBlock, ServerToolUseBlock)):
            texts[i] = tool_json_text(block)
    for fault in turn.faults_for(attempt):
        if isinstance(fault, InvalidToolJson):
            if fault.block not in texts:
                raise ValueError(f"InvalidToolJson: block {fault.block} is not a tool block")
            texts[fault.block] = fault.raw_json if fault.raw_json is not None else truncate_json(texts[fault.block])
    return texts


def _estimate_tokens(turn: TurnScript, json_texts: dict[int, str]) -> int:
    n = 0
    for i, b in enumerate(turn.blocks):
        if isinstance(b, TextBlock):
            n += len(b.text)
        elif isinstance(b, ThinkingBlock):
            n += len(b.thinking)
        elif i in json_texts:
            n += len(json_texts[i]) + 20
    return max(1, n // 4 + 8)


def _protocol_events(scenario: Scenario, turn_index: int, attempt: int, seed: str = "") -> list[_Ev]:
    """The full, unfaulted-by-transport event list (content faults MaxTokensCut / InvalidToolJson applied).
    ``seed``: the conversation's id seed (:func:`_ids_for`)."""
    turn = scenario.turns[turn_index]
    faults = turn.faults_for(attempt)
    msg_id, ids, _ = _ids_for(scenario, turn_index, attempt, seed)
    crng = _rng("chunks", scenario, turn_index, attempt)
    json_texts = _block_json_texts(turn, attempt)
    cut = next((f for f in faults if isinstance(f, MaxTokensCut)), None)

    usage = turn.usage
    evs: list[_Ev] = [
        _Ev(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": scenario.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage.input_tokens,
                        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                        "cache_read_input_tokens": usage.cache_read_input_tokens,
                        "output_tokens": 1,
                    },
                },
            },
        )
    ]
    stop_reason, stop_sequence = turn.stop_reason, turn.stop_sequence
    for i, block in enumerate(turn.blocks):
        start, deltas = _block_start_and_deltas(block, i, ids, json_texts, crng)
        closed = True
        if cut is not None and i == cut.block:
            keep = cut.keep_fragments if cut.keep_fragments is not None else (len(deltas) + 1) // 2
            deltas = deltas[: max(0, keep)]
            closed = False
        evs.append(
            _Ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}, block=i)
        )
        for n, delta in enumerate(deltas, 1):
            evs.append(
                _Ev(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                    block=i,
                    delta_no=n,
                )
            )
        if not closed:
            stop_reason, stop_sequence = "max_tokens", None
            break
        evs.append(_Ev("content_block_stop", {"type": "content_block_stop", "index": i}, block=i))
    output_tokens = usage.output_tokens if usage.output_tokens is not None else _estimate_tokens(turn, json_texts)
    evs.append(
        _Ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                # as the current API sends it: cumulative totals, input and cache counts included (clients such
                # as langchain-anthropic read usage here only)
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                    "cache_read_input_tokens": usage.cache_read_input_tokens,
                    "output_tokens": output_tokens,
                },
            },
        )
    )
    evs.append(_Ev("message_stop", {"type": "message_stop"}))
    if any(isinstance(f, InterleaveBlocks) for f in faults):
        evs = interleave_tool_blocks(evs)
    return evs


def interleave_tool_blocks(evs: list[_Ev]) -> list[_Ev]:
    """The InterleaveBlocks fault: every run of two or more consecutive, complete tool blocks is sent side by side
    (their starts, then their deltas round robin by index, each stop right after its block's last delta)."""
    segs: list[list[_Ev]] = []
    for ev in evs:
        if ev.block is not None and segs and segs[-1][0].block == ev.block:
            segs[-1].append(ev)
        else:
            segs.append([ev])

    def is_tool(seg: list[_Ev]) -> bool:
        head, tail = seg[0], seg[-1]
        block = (head.data or {}).get("content_block") or {}
        return (
            head.name == "content_block_start"
            and tail.name == "content_block_stop"
            and block.get("type") in TOOL_BLOCK_TYPES
        )

    out: list[_Ev] = []
    i = 0
    while i < len(segs):
        j = i
        while j < len(segs) and is_tool(segs[j]):
            j += 1
        if j - i < 2:
            out.extend(segs[i])
            i += 1
            continue
        run = segs[i:j]
        out.extend(seg[0] for seg in run)  # every block opens
        bodies = [seg[1:] for seg in run]  # deltas, then the stop
        for k in range(max(len(b) for b in bodies)):
            out.extend(b[k] for b in bodies if k < len(b))
        i = j
    return out


def _block_start_and_deltas(
    block: Block, index: int, ids: list[str | None], json_texts: dict[int, str], crng: random.Random
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": c} for c in _chunks(block.text, block.chunk, crng)
        ]
    if isinstance(block, ThinkingBlock):
        deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block.thinking, block.chunk, crng)]
        deltas.append({"type": "signature_delta", "signature": block.signature})
        return {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}, []
    if isinstance(block, (ToolUseBlock, ServerToolUseBlock)):
        start = {"type": block.type, "id": ids[index], "name": block.name, "input": {}, **block.extra}
        pieces = _chunks(json_texts[index], block.fragment, crng)
        if block.empty_first:
            pieces.insert(0, "")
        return start, [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    if isinstance(block, WholeBlock):
        content = dict(block.content)
        if block.result_of is not None:
            content["tool_use_id"] = ids[block.result_of]
        return content, []
    raise TypeError(f"unknown block {block!r}")


def _transport_fault(turn: TurnScript, attempt: int) -> ErrorEventAfter | DropAfter | StallWithPings | None:
    found = [f for f in turn.faults_for(attempt) if isinstance(f, (ErrorEventAfter, DropAfter, StallWithPings))]
    if len(found) > 1:
        raise ValueError(f"at most one of ErrorEventAfter/DropAfter/StallWithPings per attempt, got {found}")
    return found[0] if found else None


def _drop_position(evs: list[_Ev], fault: DropAfter) -> int:
    """How many protocol events are sent before the drop."""
    if fault.n_events is not None:
        return min(fault.n_events, len(evs))
    for pos, ev in enumerate(evs):  # (only a block's deltas carry delta_no)
        if ev.block == fault.inside_block and ev.delta_no == fault.after_fragments:
            return pos + 1
    for pos, ev in enumerate(evs):  # fewer deltas than asked: drop right before the block's stop
        if ev.block == fault.inside_block and (ev.name == "content_block_stop" or ev.stops_block):
            return pos
    last = [pos for pos, ev in enumerate(evs) if ev.block == fault.inside_block]
    if last:  # a form without a block stop (OpenAI chat): right after the block's last event
        return last[-1] + 1
    raise ValueError(f"DropAfter: block {fault.inside_block} does not exist in this turn")


def _anthropic_error(fault: ErrorEventAfter) -> _Ev:
    return _Ev(
        "error", {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}, standalone=True
    )


def _timeline(
    scenario: Scenario,
    turn_index: int,
    attempt: int,
    evs: list[_Ev] | None = None,
    *,
    error_event: Callable[[ErrorEventAfter], _Ev] = _anthropic_error,
    ping: Callable[[], _Ev] | None = None,
    periodic_pings: bool = True,
) -> tuple[list[_Ev], End, _Ev | None, int]:
    """Events in order with gaps, how the body ends, and for a drop the event cut short + bytes of it sent.
    ``evs``: the protocol events (None: the Anthropic ones); ``error_event``: the event an ErrorEventAfter sends;
    ``ping``: makes one stall ping (None: an Anthropic ping); ``periodic_pings``: Pacing.ping_every applies."""
    turn = scenario.turns[turn_index]
    p = turn.pacing
    trng = _rng("timing", scenario, turn_index, attempt)
    if evs is None:
        evs = _protocol_events(scenario, turn_index, attempt)
    make_ping = ping if ping is not None else (lambda: _Ev("ping", None))
    fault = _transport_fault(turn, attempt)

    end: End = "eof"
    cut_event: _Ev | None = None
    cut_bytes = 0
    tail: list[_Ev] = []
    if isinstance(fault, ErrorEventAfter):
        evs = evs[: fault.n_events]
        tail = [error_event(fault)]
    elif isinstance(fault, DropAfter):
        pos = _drop_position(evs, fault)
        if fault.cut_bytes > 0 and pos < len(evs):
            cut_event, cut_bytes = evs[pos], fault.cut_bytes
        evs = evs[:pos]
        end = "drop"
    elif isinstance(fault, StallWithPings):
        evs = evs[: fault.after_events]
        tail = []
        for _ in range(fault.pings):
            stall_ping = make_ping()
            stall_ping.gap, stall_ping.standalone = fault.ping_interval, True
            tail.append(stall_ping)
        end = fault.then

    # Pings every N protocol events (not inside the stall tail, which is pings only).
    if p.ping_every and periodic_pings:
        with_pings: list[_Ev] = []
        for n, ev in enumerate(evs, 1):
            with_pings.append(ev)
            if n % p.ping_every == 0 and n < len(evs):
                with_pings.append(_Ev("ping", None))
        evs = with_pings

    # Gaps: the first event comes (1 - header_share) * ttfb after the headers, then event_gap with jitter.
    for n, ev in enumerate(evs):
        if n == 0:
            ev.gap = p.ttfb * (1 - p.header_share)
            continue
        gap = p.event_gap * (trng.uniform(1 - p.jitter, 1 + p.jitter) if p.jitter else 1.0)
        if ev.name == "content_block_start" or ev.starts_block:
            gap += p.block_pause
        ev.gap = gap
    for ev in tail:
        if ev.name == "error":
            ev.gap = p.event_gap
    if not evs and tail:  # the fault hits before any event: the first byte still waits for the TTFB
        tail[0].gap = p.ttfb * (1 - p.header_share)
    if cut_event is not None:
        cut_event = _Ev(cut_event.name, cut_event.data, gap=p.event_gap, raw=cut_event.raw)
    return evs + tail, end, cut_event, cut_bytes


def _serialize(ev: _Ev, p: Pacing, frng: random.Random) -> bytes:
    le = p.line_ending.encode()
    data = PING_DATA if ev.data is None else orjson.dumps(ev.data)
    if p.pad:
        data += b" " * frng.randint(1, 8)
    return b"event: " + ev.name.encode() + le + b"data: " + data + le + le


def render_turn_events(scenario: Scenario, turn_index: int, attempt: int = 0) -> list[Event]:
    """The complete events the turn's body carries, as (event name, data dict); pings included as
    ``("ping", {"type": "ping"})``. Empty for an HTTP error attempt."""
    return render_turn(scenario, turn_index, attempt).events


def render_turn(scenario: Scenario, turn_index: int, attempt: int = 0, seed: str = "") -> ResponsePlan:
    """The plan of a turn's attempt. ``seed``: what seeds the message and tool ids of a conversation (serve passes
    :func:`~inspector.scenarios.fakeapi.message_seed` of the request, so two conversations never share a message
    id); "" renders the scenario's own ids."""
    if not 0 <= turn_index < len(scenario.turns):
        raise IndexError(f"scenario {scenario.name!r} has {len(scenario.turns)} turns, no turn {turn_index}")
    turn = scenario.turns[turn_index]
    http_error = turn.http_error_for(attempt)
    if http_error is not None:
        return _render_http_error(scenario, turn_index, attempt, http_error)

    _, _, request_id = _ids_for(scenario, turn_index, attempt)
    headers = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "request-id": request_id,
        "anthropic-organization-id": "00000000-0000-4000-8000-000000000000",
        "x-scenario": f"{scenario.name}; turn={turn_index}; attempt={attempt}",
    }
    evs = _protocol_events(scenario, turn_index, attempt, seed) if seed else None
    return plan_of_timeline(
        scenario, turn_index, attempt, _timeline(scenario, turn_index, attempt, evs), _serialize, headers
    )


def plan_of_timeline(
    scenario: Scenario,
    turn_index: int,
    attempt: int,
    timeline: tuple[list[_Ev], End, _Ev | None, int],
    serialize: Callable[[_Ev, Pacing, random.Random], bytes],
    headers: dict[str, str],
) -> ResponsePlan:
    """The reads of a timeline (``_timeline``'s result), each event serialized by ``serialize(ev, pacing, rng)``,
    grouped and split as the turn's pacing says: the part every wire format shares."""
    p = scenario.turns[turn_index].pacing
    frng = _rng("format", scenario, turn_index, attempt)
    evs, end, cut_event, cut_bytes = timeline

    # One serialized chunk per event, grouped events_per_read at a time (the tail: error / stall pings alone).
    reads: list[PlannedRead] = []
    group: list[_Ev] = []
    chunk_lens: list[int] = []  # byte length of every serialized event, in body order (for split_events)

    def flush() -> None:
        if group:
            chunks = [serialize(e, p, frng) for e in group]
            chunk_lens.extend(len(c) for c in chunks)
            reads.append(PlannedRead(sum(e.gap for e in group), b"".join(chunks)))
            group.clear()

    for ev in evs:
        if ev.standalone:
            flush()
            group.append(ev)
            flush()
            continue
        group.append(ev)
        if len(group) >= _events_in_read(p, len(reads)):
            flush()
    flush()
    if p.read_delays:
        for r, delay in zip(reads, p.read_delays, strict=False):  # (recorded delays: maybe fewer or more than reads)
            r.delay = delay
    partial_len = 0
    if cut_event is not None:
        partial = serialize(cut_event, p, frng)[:cut_bytes]
        if partial:
            reads.append(PlannedRead(cut_event.gap, partial))
            partial_len = len(partial)

    if p.proxy_buffer:
        reads = _through_proxy(reads, p.proxy_buffer)

    if p.split_events:  # last: what reaches the client is split, even after a buffering relay
        cuts = _event_cuts(chunk_lens, partial_len, len(p.line_ending), _rng("split", scenario, turn_index, attempt))
        reads = _split_reads(reads, cuts)

    events = [(e.name, {"type": "ping"} if e.data is None else e.data) for e in evs]
    return ResponsePlan(200, headers, reads, end, p.ttfb * p.header_share, events, turn_index, attempt)


def _events_in_read(p: Pacing, read_no: int) -> int:
    if p.read_events and read_no < len(p.read_events):
        return p.read_events[read_no]
    return p.events_per_read


SPLIT_STEP = 0.004  # scenario seconds between the pieces of one split read (< timing.BURST_GAP: a burst stays one)


def _event_cuts(chunk_lens: list[int], partial_len: int, le_len: int, rng: random.Random) -> list[int]:
    """One seeded body offset strictly inside every event (split_events). A complete event is cut before its
    terminating blank line (so the piece holding its start never holds its end); the partial event of a drop is cut
    anywhere inside. The offset may fall inside a line, a JSON string or a UTF-8 character."""
    cuts, start = [], 0
    for n in chunk_lens:
        cuts.append(start + rng.randint(1, max(1, n - le_len)))
        start += n
    if partial_len >= 2:
        cuts.append(start + rng.randint(1, partial_len - 1))
    return cuts


def _split_reads(reads: list[PlannedRead], cuts: list[int]) -> list[PlannedRead]:
    """Cut the reads at the body offsets ``cuts`` (ascending). A read cut into k pieces keeps its arrival time: its
    first piece comes after ``delay - (k-1)*step``, the others ``step`` apart, with ``step = min(delay/k,
    SPLIT_STEP)``: the total time is unchanged and a relay's burst stays a burst."""
    out: list[PlannedRead] = []
    pos, i = 0, 0
    for r in reads:
        end = pos + len(r.data)
        while i < len(cuts) and cuts[i] <= pos:
            i += 1
        inner = []
        while i < len(cuts) and cuts[i] < end:
            inner.append(cuts[i] - pos)
            i += 1
        if not inner:
            out.append(r)
        else:
            bounds = [0, *inner, len(r.data)]
            k = len(bounds) - 1
            step = min(r.delay / k, SPLIT_STEP)
            for j in range(k):
                delay = r.delay - (k - 1) * step if j == 0 else step
                out.append(PlannedRead(delay, r.data[bounds[j] : bounds[j + 1]]))
        pos = end
    return out


def _through_proxy(reads: list[PlannedRead], size: int) -> list[PlannedRead]:
    out: list[PlannedRead] = []
    buf, waited = b"", 0.0
    for r in reads:
        buf += r.data
        waited += r.delay
        if len(buf) >= size:
            out.append(PlannedRead(waited, buf))
            buf, waited = b"", 0.0
    if buf or waited:
        out.append(PlannedRead(waited, buf))
    return out


def _render_http_error(scenario: Scenario, turn_index: int, attempt: int, err: HttpError) -> ResponsePlan:
    _, _, request_id = _ids_for(scenario, turn_index, attempt)
    etype = err.resolved_type()
    message = err.message or {
        "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit.",
        "overloaded_error": "Overloaded",
        "api_error": "Internal server error",
    }.get(etype, etype)
    body = orjson.dumps({"type": "error", "error": {"type": etype, "message": message}, "request_id": request_id})
    headers = {
        "content-type": "application/json",
        "request-id": request_id,
        "x-scenario": f"{scenario.name}; turn={turn_index}; attempt={attempt}",
    }
    if err.retry_after_ms is not None:
        headers["retry-after-ms"] = str(err.retry_after_ms)
    if err.retry_after is not None:
        headers["retry-after"] = f"{err.retry_after:g}"
    if err.should_retry is not None:
        headers["x-should-retry"] = "true" if err.should_retry else "false"
    return ResponsePlan(err.status, headers, [PlannedRead(0.0, body)], "eof", err.delay, [], turn_index, attempt)


# --- what a correct consumer ends with -------------------------------------------------------------------------


def expected_blocks(scenario: Scenario, turn_index: int, attempt: int = 0) -> list[dict[str, Any]]:
    """The content a correct accumulator holds after the turn's content events (transport faults ignored).
    Tool blocks carry ``input`` (the parsed JSON, or None when it does not parse), ``raw_json`` and ``complete``
    (False when the block had no content_block_stop)."""
    evs = _protocol_events(scenario, turn_index, attempt)
    blocks: dict[int, dict[str, Any]] = {}
    raw: dict[int, list[str]] = {}
    for ev in evs:
        d = ev.data or {}
        if ev.name == "content_block_start":
            blocks[d["index"]] = {**d["content_block"], "complete": False}
            raw[d["index"]] = []
        elif ev.name == "content_block_delta":
            b, delta = blocks[d["index"]], d["delta"]
            if delta["type"] == "text_delta":
                b["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                b["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                b["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                raw[d["index"]].append(delta["partial_json"])
        elif ev.name == "content_block_stop":
            blocks[d["index"]]["complete"] = True
    out = []
    for i in sorted(blocks):
        b = blocks[i]
        if b["type"] in ("tool_use", "server_tool_use"):
            text = "".join(raw[i])
            try:
                parsed = json.loads(text) if b["complete"] else None
            except ValueError:
                parsed = None
            b["input"] = parsed if isinstance(parsed, dict) else None
            b["raw_json"] = text
        out.append(b)
    return out


def expected_stop_reason(scenario: Scenario, turn_index: int, attempt: int = 0) -> str | None:
    evs = _protocol_events(scenario, turn_index, attempt)
    reason = next((e.data or {})["delta"]["stop_reason"] for e in evs if e.name == "message_delta")
    if reason is None or isinstance(reason, str):  # (the events are ours: a turn's stop_reason, or None)
        return reason
    raise TypeError(f"message_delta stop_reason {reason!r} is not a string")

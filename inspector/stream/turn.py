"""Bytes to steps: one response's SSE decoder, protocol parser and message assembler, in `TurnStream`.

The general path is `TurnStream._step`: `parse_event`, then `MessageAssembler.feed`, for one event. By default
(`fast=True`) a feed goes through `inspector.stream.fastpath`, which takes most deltas of a stream by a shorter
way and every other event through `_step`, with the same steps, diagnostics and message; `fast=False` runs the
general path alone (tests compare the two; tools/bench_engine.py says what the shorter way buys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inspector.stream import diagnostics as D
from inspector.stream import fastpath
from inspector.stream import sse as _sse
from inspector.stream.diagnostics import Diagnostic, DiagnosticCap
from inspector.stream.message import Change, MessageAssembler, Outcome
from inspector.stream.protocol import StreamEvent, parse_event

if TYPE_CHECKING:
    from inspector.stream.openai_common import OpenAIEvent
    from inspector.stream.sse import SSEEvent

__all__ = ["Step", "TurnStream", "assemble"]


@dataclass(slots=True)
class Step:
    """One decoded SSE event with what it became and what it changed."""

    sse: SSEEvent
    event: StreamEvent | OpenAIEvent  # (an OpenAI event that changed nothing neutral: see openai_common)
    changes: list[Change]
    diagnostics: list[Diagnostic]


class TurnStream:
    """Bytes in, steps out: SSE decoder + protocol parser + assembler for one response.

    `fast=False`: the general path alone, in the decoder too (the same results, more slowly)."""

    def __init__(
        self,
        max_event_bytes: int | None = None,
        max_diagnostics_per_code: int = D.DEFAULT_PER_CODE,
        *,
        fast: bool = True,
    ) -> None:
        # one cap for the whole stream: the first `max_diagnostics_per_code` of each code are kept, the rest
        # counted (one diagnostics.capped notice per code, and the counts at close())
        self.cap = DiagnosticCap(max_diagnostics_per_code)
        self.fast = fast
        self._parse = fastpath.parse_event if fast else parse_event
        if max_event_bytes is None:
            self.decoder = _sse.SSEDecoder(cap=self.cap, fast=fast)
        else:
            self.decoder = _sse.SSEDecoder(max_event_bytes, cap=self.cap, fast=fast)
        self.assembler = MessageAssembler(self.cap)
        self.diagnostics: list[Diagnostic] = []  # everything, in order seen
        self.closed = False
        self._held: list[Diagnostic] = []  # SSE diagnostics of an event not yet dispatched
        # the fast path's state between feeds: the block the last delta went to (see fastpath.Continuation)
        self._cont: fastpath.Continuation | None = None
        self._init_stream()

    def _init_stream(self) -> None:
        """A subclass's own per-stream state, set last in `__init__` (a subclass overrides this, calling super(),
        instead of repeating `__init__`'s parameters)."""

    def _step(self, e: SSEEvent) -> Step:
        """The general path: one event parsed, folded into the message, its diagnostics kept."""
        asm = self.assembler
        ev, diags = self._parse(e.event, e.data, e.seq)
        if diags:
            diags = [k for k in map(self.cap.filter, diags) if k is not None]
        n = len(asm.diagnostics)
        changes = asm.feed(ev)
        if len(asm.diagnostics) != n:
            diags = diags + asm.diagnostics[n:]
        if diags:
            self.diagnostics.extend(diags)
        return Step(e, ev, changes, diags)

    def _steps(self, events: list[SSEEvent], raws: list[bytes]) -> list[Step]:
        """The steps of `events`; raws[i] is events[i]'s data as bytes (b"" if not kept: see sse.SSEDecoder.raw_data)."""
        if self.fast:
            return fastpath.turn_steps(self, events, raws)
        return [self._step(e) for e in events]

    def feed(self, data: bytes) -> list[Step]:
        """Decode one read. SSE-layer diagnostics go with the step of the event they concern (the event being
        built when they arose), before that step's own; those of an event not yet complete wait for it (or for
        close()). So steps and `diagnostics` are the same however the bytes were split into reads."""
        events = self.decoder.feed(data)
        raws = self.decoder.raw_data
        if len(raws) != len(events):  # (never: but then no event may be lost to zip())
            raws = [b""] * len(events)
        pending = self.decoder.take_diagnostics()
        if self._held:
            pending = self._held + pending
            self._held = []
        if not pending:
            return self._steps(events, raws)
        steps: list[Step] = []
        k, n = 0, len(pending)
        for e, raw in zip(events, raws, strict=True):
            j = k
            while j < n and ((ei := pending[j].event_index) is None or ei <= e.seq):
                j += 1
            if j > k:
                before = pending[k:j]
                k = j
                self.diagnostics.extend(before)
                step = self._steps([e], [raw])[0]
                step.diagnostics[:0] = before
            else:
                step = self._steps([e], [raw])[0]
            steps.append(step)
        self._held = pending[k:]
        return steps

    def close(self) -> list[Diagnostic]:
        """End of stream. Returns the diagnostics that only the end could reveal (and SSE-layer ones still held
        for an event that never completed)."""
        if self.closed:
            return []
        self.closed = True
        self.decoder.close()
        new = self._held + self.decoder.take_diagnostics()
        self._held = []
        new += self.assembler.finish()
        summary = self.cap.summary()
        if summary is not None:
            new.append(summary)
        self.diagnostics.extend(new)
        return new

    @property
    def outcome(self) -> Outcome:
        return self.assembler.outcome()

    def final_message(self) -> dict[str, Any]:
        return self.assembler.final_message()


def assemble(data: bytes | bytearray | list[bytes], *, fast: bool = True) -> TurnStream:
    """Run whole bytes (or a list of reads) through a TurnStream and close it."""
    ts = TurnStream(fast=fast)
    for chunk in [data] if isinstance(data, (bytes, bytearray)) else data:
        ts.feed(bytes(chunk))
    ts.close()
    return ts

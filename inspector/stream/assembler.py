"""Per-index block buffers, message assembly, and bytes to steps: the engine's public names, in one place.

The engine is split along its seams (this module re-exports every public name, so `from inspector.stream.assembler
import ...` keeps working):

- `inspector.stream.blocks`: `BlockBuffer` (one content block's raw fragments; tool input parsed once, at its stop),
  `InputError`, `Fragment`;
- `inspector.stream.message`: `MessageAssembler` (typed events folded into blocks and the final message, with
  diagnostics; never raises), `stopped_outcome`, `Outcome`, `Change`;
- `inspector.stream.turn`: `TurnStream` (bytes in, steps out: SSE decoder + protocol parser + assembler), `Step`,
  `assemble`;
- `inspector.stream.fastpath`: the one fast path (shorter ways for the common shapes, same results).
"""

from __future__ import annotations

from inspector.stream.blocks import BlockBuffer, Fragment, InputError
from inspector.stream.message import Change, MessageAssembler, Outcome, stopped_outcome
from inspector.stream.turn import Step, TurnStream, assemble

__all__ = [
    "BlockBuffer",
    "Change",
    "Fragment",
    "InputError",
    "MessageAssembler",
    "Outcome",
    "Step",
    "TurnStream",
    "assemble",
    "stopped_outcome",
]

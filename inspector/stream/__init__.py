"""Layer 1, the stream engine: bytes in, events, blocks and diagnostics out.

`sse` (WHATWG-exact incremental decoder) -> `protocol` (typed events) -> `assembler` (per-index block buffers,
messages, outcomes); every fault is a named `diagnostics.Diagnostic`, never an exception. No I/O, no SDK, no UI.
"""

"""The cyclic garbage collector's policy for a process of the `inspector` command.

A stream allocates a few small objects per event (an SSE event, its observations, the fold's rows) and frees almost
all of them by reference counting: they hold no cycles. CPython's default first threshold (700 container
allocations) then starts a young collection every few events, and every tenth of those a middle one, each scanning
what the session keeps alive. At 100,000 events replayed at full speed that was 1.4 s of a 6.2 s headless replay
and 1.6-2.9 s of the dashboard's (tools/bench_tui.py). With a first threshold of 10,000 the collector still runs,
still frees every cycle, and costs about a fifth of that (the objects it finds are the same; it looks less often).
Larger thresholds were measured too and cost more again: each young collection then walks a bigger generation.

The dashboard also freezes long-lived objects during a firehose (inspector.tui.app); this is the process-wide part.
Applied by the command's entry point (inspector.__main__), not by `inspector.cli.main`, so that a program or a test
that calls ``main()`` in its own process keeps its own collector settings.
"""

from __future__ import annotations

import gc

FIRST_THRESHOLD = 10_000


def tune_gc() -> tuple[int, ...]:
    """Raise the collector's first threshold to ``FIRST_THRESHOLD`` (the other two stay as they are); return the
    thresholds before, so a caller can put them back."""
    before = gc.get_threshold()
    gc.set_threshold(max(FIRST_THRESHOLD, before[0]), *before[1:])
    return before

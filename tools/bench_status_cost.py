"""The status line's session cost on a long session: pricing every attempt once (a replay opened at its end is priced
over several frames, PRICES_PER_RENDER a frame), then the cost of one render once all are priced, on the live
state and on a copy (time travel).

    PYTHONPATH=. python tools/bench_status_cost.py [TURNS]
"""

from __future__ import annotations

import sys
import time

from inspector.observe import observations as O
from inspector.state.fold import DashboardState
from inspector.tui.widgets.status import PRICES_PER_RENDER, cost_label


def main(turns: int = 5000) -> None:
    from inspector.observe.usage import Usage
    from inspector.record.cost import price

    price(Usage(input=1, reported=True), "claude-sonnet-4-6")  # what warm_prices does on a thread: not measured
    st = DashboardState()
    body = {"model": "claude-sonnet-4-6", "messages": []}
    for n in range(turns):
        st.apply(O.TurnStarted(float(n), n))
        st.apply(O.AttemptStarted(float(n), n, 0, "POST", "http://x/v1/messages", {}, body))
        usage = {"input_tokens": 10 + n, "cache_read_input_tokens": 100}
        st.apply(O.MessageStarted(float(n), n, 0, {"model": "claude-sonnet-4-6", "usage": usage}))
        st.apply(O.MessageUpdated(float(n), n, 0, "end_turn", {"output_tokens": 5}))
        st.apply(O.AttemptEnded(float(n), n, 0, "complete", None, "text_finish"))
    frames, worst = 0, 0.0
    t0 = time.perf_counter()
    while True:
        t = time.perf_counter()
        label = cost_label(st)
        worst = max(worst, time.perf_counter() - t)
        frames += 1
        if label != "pricing…":
            break
    total = time.perf_counter() - t0
    print(
        f"{turns} turns priced over {frames} frames ({PRICES_PER_RENDER}/frame): {total:.3f} s, worst frame {worst * 1e3:.1f} ms"
    )
    t = time.perf_counter()
    for _ in range(50):
        cost_label(st)
    print(f"one render, all priced: {(time.perf_counter() - t) / 50 * 1e3:.2f} ms  ({label})")
    past = st.copy()
    t = time.perf_counter()
    for _ in range(50):
        cost_label(past)
    print(f"one render of a copy: {(time.perf_counter() - t) / 50 * 1e3:.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)

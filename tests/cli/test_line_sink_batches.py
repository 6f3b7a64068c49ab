"""The headless output's LineSink: lines written by the loop go out in order, from a thread, in batches (one write
call for what piled up while the thread was busy: no lock or thread switch per line), bounded (a stalled reader
costs the loop at most ``max_wait`` per line, then lines are dropped and counted), and a broken reader is told once."""

from __future__ import annotations

import io
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.cli.headless import LineSink


class GatedOut(io.BytesIO):
    """An output whose writes block until ``gate`` is set; ``entered`` is set when the first write begins."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.calls += 1
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().write(data)


def test_lines_that_pile_up_go_out_in_one_write() -> None:
    out = GatedOut()
    sink = LineSink(out, linger=0)
    sink.write(b"first\n")
    assert out.entered.wait(10)  # the thread is inside the first write (blocked)
    for i in range(100):
        sink.write(b"line %d\n" % i)
    out.gate.set()
    sink.close()
    assert out.getvalue() == b"first\n" + b"".join(b"line %d\n" % i for i in range(100))
    assert out.calls == 2  # (one write per line before: 101)


def test_a_stalled_reader_drops_lines_after_max_wait_and_counts_them() -> None:
    out = GatedOut()
    sink = LineSink(out, maxsize=3, max_wait=0.01, linger=0)
    sink.write(b"a\n")
    assert out.entered.wait(10)
    for x in (b"b\n", b"c\n", b"d\n", b"e\n", b"f\n"):
        sink.write(x)  # 3 fit in the buffer, 2 wait 10 ms each and are dropped
    assert sink.dropped == 2
    out.gate.set()
    sink.close()
    assert out.getvalue() == b"a\nb\nc\nd\n"


def test_a_broken_reader_is_told_once_and_later_lines_are_ignored() -> None:
    class Broken(io.BytesIO):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            raise BrokenPipeError

    told: list[int] = []
    done = threading.Event()

    def on_broken() -> None:
        told.append(1)
        done.set()

    sink = LineSink(Broken(), on_broken=on_broken)
    sink.write(b"x\n")
    assert done.wait(10)
    sink.write(b"y\n")
    sink.close()
    assert sink.broken and told == [1]


def test_lines_linger_and_close_cuts_the_wait_short() -> None:
    out = GatedOut()
    out.gate.set()
    sink = LineSink(out, linger=60.0)  # (far longer than the test: only close() can end the wait)
    for i in range(50):
        sink.write(b"%d\n" % i)
    assert not out.entered.is_set()  # nothing written yet: the thread lingers
    sink.close()
    assert out.getvalue() == b"".join(b"%d\n" % i for i in range(50))
    assert out.calls == 1


@settings(max_examples=20)
@given(st.lists(st.binary(min_size=0, max_size=20), max_size=200))
def test_everything_written_comes_out_in_order(lines: list[bytes]) -> None:
    out = io.BytesIO()
    sink = LineSink(out)
    for line in lines:
        sink.write(line)
    sink.close()
    assert out.getvalue() == b"".join(lines)
    assert sink.dropped == 0


# ------------------------------------------------------------------------------------------ time order (watch)
_lines = st.lists(
    st.tuples(
        st.one_of(st.none(), st.floats(0, 10, allow_nan=False)),  # a line's time (None: the totals, untimed)
        st.floats(0, 0.099, allow_nan=False),  # how late it came, after the quickest (under the window)
    ),
    max_size=60,
)


@given(lines=_lines, checks=st.lists(st.floats(0, 20, allow_nan=False), max_size=8))
def test_time_order_puts_lines_back_in_time_order_whatever_their_delays_under_the_window(
    lines: list[tuple[float | None, float]], checks: list[float]
) -> None:
    """Lines that came in any order, each at most the window later than the quickest: every line goes out once; the
    timed ones between two untimed ones in time order (equal times in the order they came), an untimed one after
    everything before it; and none before it was due (checked at any moment, as the sink's thread does)."""
    from inspector.cli.headless import TimeOrder

    window = 0.1
    order = TimeOrder(window)
    offset = 1000.0  # the monotonic clock at the times' 0
    # each line arrives at its time + offset + its delay; arrivals in order of arrival, with the sink's checks between
    events = sorted(
        [(t + offset + late if t is not None else offset + late + i * 0.5, 0, i) for i, (t, late) in enumerate(lines)]
        + [(offset + c, 1, -1) for c in checks]
    )
    came = {i: rank for rank, (_, _, i) in enumerate(e for e in events if e[1] == 0)}  # the order lines came in
    out: list[bytes] = []
    quickest = min((late for t, late in lines if t is not None), default=0.0)
    for arrived, kind, i in events:
        if kind == 0:
            out += order.add(b"%d" % i, lines[i][0], arrived)
        got = order.ready(arrived)  # (the sink's thread checks after each batch, and when the first held is due)
        for data in got:  # due: its time, on the monotonic clock, plus the window, has passed
            t = lines[int(data)][0]
            assert t is not None and t + offset + quickest + window <= arrived + 1e-9
        out += got
    out += order.take_all()
    assert sorted(out) == sorted(b"%d" % i for i in range(len(lines)))  # each once
    # between untimed lines, the timed ones are in time order (then in the order they came)
    segment: list[tuple[float, int]] = []
    for item in [*out, None]:
        t = None if item is None else lines[int(item)][0]
        if t is None:
            assert segment == sorted(segment), segment
            segment = []
        else:
            assert item is not None
            segment.append((t, came[int(item)]))


def test_a_sink_with_a_window_writes_lines_that_came_out_of_order_in_time_order() -> None:
    out = io.BytesIO()
    sink = LineSink(out, window=0.1)
    for t in (1.514, 1.506, 1.507, 1.52, 1.5):  # (as watch printed them: a stream's batch after a later one)
        sink.write(b"%.3f\n" % t, t)
    sink.write(b"total\n")  # untimed: after everything before it
    sink.write(b"1.6\n", 1.6)
    sink.close()
    assert out.getvalue() == b"1.500\n1.506\n1.507\n1.514\n1.520\ntotal\n1.6\n"

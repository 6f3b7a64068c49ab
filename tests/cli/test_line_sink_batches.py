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

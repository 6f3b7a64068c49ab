"""SpilledReads: reads kept in a spill file and read back a window at a time (one system call per window, not per
read: a GIL hand-off per read slowed a session on its own thread). What comes back is what was appended, whatever
the sizes, the order of reading and the attempts sharing one file."""

from __future__ import annotations

import tempfile

from hypothesis import given
from hypothesis import strategies as st

from inspector.record import reader
from inspector.record.reader import RecordedRead, SpilledReads

sizes = st.integers(0, 3 * reader.WINDOW // 2)


@given(
    st.lists(st.tuples(st.integers(0, 2), sizes, st.integers(0, 255)), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40)), max_size=40),
)
def test_what_is_read_back_is_what_was_appended(
    appends: list[tuple[int, int, int]], gets: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryFile() as spill:
        attempts = [SpilledReads(spill) for _ in range(3)]
        kept: list[list[RecordedRead]] = [[], [], []]
        for k, (which, size, byte) in enumerate(appends):
            read = RecordedRead(float(k), bytes([byte]) * size)
            attempts[which].append(read)
            kept[which].append(read)
            for w, i in gets[:k]:  # reads interleaved with appends (a window read before the file grew)
                if i < len(kept[w]):
                    assert attempts[w][i] == kept[w][i]
        for w in range(3):
            assert list(attempts[w]) == kept[w]
            assert list(reversed(attempts[w])) == kept[w][::-1]


def test_a_spill_file_with_bytes_in_it_is_written_after_them() -> None:
    """`spill_reads` writes from the file's end (each append takes its offset from the file's position, without a
    seek per read): a file handed over at its start keeps what it held, and the reads come back whole."""
    from inspector.record.reader import RecordedAttempt, spill_reads

    with tempfile.TemporaryFile() as spill:
        spill.write(b"already here")
        spill.seek(0)
        on_read = spill_reads(spill)
        attempt = RecordedAttempt.__new__(RecordedAttempt)
        attempt.reads = []
        reads = [RecordedRead(float(i), bytes([65 + i]) * (i + 1)) for i in range(5)]
        for read in reads:
            on_read(attempt, read)
        assert list(attempt.reads) == reads
        spill.flush()
        spill.seek(0)
        assert spill.read(12) == b"already here"

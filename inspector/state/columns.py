"""Storage for the fold's tables that stays small and copies in near-constant time (issue 10 §5).

- `Column`: an append-only column in fixed-size chunks (an `array` per chunk for numbers, a list for objects). A copy
  shares every chunk and copies none until one side writes to it (copy on write, per chunk): a checkpoint of a
  million-row table costs a list of a few hundred chunk references.
- `CowDict`: a dict of entries (attempts, turns, blocks, tools) whose copy shares the entries; an entry is cloned the
  first time the fold asks to change it (`mutable`) after a copy. Reads never clone: readers see the shared entry.
- `clone`: the copy of a slotted entry that cannot forget a field.
- `ByteStore` / `SpilledBytes` / `SpilledStrings`: bulk data (raw reads, event summaries) kept out of the heap in an
  append-only spill file (a few MB stay in RAM until flushed), read back on demand by offset. The store is shared by a
  state and all its copies: records are only appended, and each copy keeps its own offsets.
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile
from array import array
from collections.abc import Callable, Iterator
from itertools import accumulate
from operator import itemgetter
from typing import Any, Self, TypeVar

CHUNK = 1024  # rows per chunk (a copy copies at most one chunk per column)
ROW_BUFFER = 64  # rows a `RowTable` buffers before they go into its columns (few live tuples for the GC to count)
_MISSING = object()
_K = TypeVar("_K")
_V = TypeVar("_V")


@functools.cache  # (a few typecodes, at most ROW_BUFFER counts)
def _packer(typecode: str, n: int) -> struct.Struct:
    """``n`` values of an array's C type as packed bytes (native sizes: what ``array(typecode).frombytes`` takes)."""
    return struct.Struct(f"@{n}{typecode}")


class ChunkedTable:
    """Rows in fixed-size chunks of columns (an ``array`` per column for numbers, a list for objects). Appends go to
    a tail chunk (plain array appends); a full tail is sealed. A copy shares every sealed chunk and copies only the
    tail; a write into a shared sealed chunk copies that chunk first (copy on write)."""

    __slots__ = ("_types", "_tail", "_sealed", "_owned", "_n")

    def __init__(self, types: tuple[str | None, ...]) -> None:
        self._types = types
        self._tail: list[Any] = [array(tc) if tc else [] for tc in types]
        self._sealed: list[list[Any]] = []
        self._owned: list[bool] = []
        self._n = 0  # rows in sealed chunks

    def __len__(self) -> int:
        return self._n + len(self._tail[0])

    def _seal(self) -> None:
        self._sealed.append(self._tail)
        self._owned.append(True)
        self._n += len(self._tail[0])
        self._tail = [array(tc) if tc else [] for tc in self._types]

    def get(self, col: int, i: int) -> Any:
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError("row index out of range")
        if i >= self._n:
            return self._tail[col][i - self._n]
        return self._sealed[i // CHUNK][col][i % CHUNK]

    def set(self, col: int, i: int, value: Any) -> None:
        if i < 0:
            i += len(self)
        if i >= self._n:
            self._tail[col][i - self._n] = value
            return
        if i < 0:
            raise IndexError("row index out of range")
        c = i // CHUNK
        if not self._owned[c]:
            self._sealed[c] = [x[:] for x in self._sealed[c]]
            self._owned[c] = True
        self._sealed[c][col][i % CHUNK] = value

    def column(self, col: int) -> Iterator[Any]:
        for chunk in self._sealed:
            yield from chunk[col]
        yield from self._tail[col]

    def column_from(self, col: int, start: int) -> Iterator[Any]:
        """Column `col` from row `start` on, without walking the rows before it (the chunks before are skipped)."""
        start = max(0, start)
        if start >= self._n:
            yield from self._tail[col][start - self._n :]
            return
        c, off = divmod(start, CHUNK)
        yield from self._sealed[c][col][off:]
        for chunk in self._sealed[c + 1 :]:
            yield from chunk[col]
        yield from self._tail[col]

    def cow_copy(self) -> Self:
        cls = type(self)
        new: Self = cls.__new__(cls)
        for k in cls.__mro__:
            for name in k.__dict__.get("__slots__", ()):
                if name != "__weakref__":
                    object.__setattr__(new, name, getattr(self, name))
        new._tail = [x[:] for x in self._tail]
        new._sealed = self._sealed[:]
        new._owned = [False] * len(self._sealed)
        self._owned = [False] * len(self._sealed)
        return new


class RowTable(ChunkedTable):
    """A `ChunkedTable` the fold appends to a whole row at a time (the event and read tables: a row per SSE event,
    per network read). A new row is one tuple in a short row buffer (one list append, not a dozen column appends);
    the buffer goes into the columns at C speed (`zip`, `array.extend`) every `ROW_BUFFER` rows, when the chunk fills
    up and whenever the table is copied, so a copy (a checkpoint) never holds buffered rows: it costs what a columnar
    tail costs.

    ``SPILLED`` names the (offset column, size column, text) pairs whose values live in ``store``: a buffered row
    holds the value itself in the offset column (and its size in the size column); the buffer's values are added
    to the store in one piece when it goes into the columns. Read them with `spilled`."""

    __slots__ = ("_rows", "_room", "store")
    SPILLED: tuple[tuple[int, int, bool], ...] = ()

    def __init__(self, types: tuple[str | None, ...], store: ByteStore | None = None) -> None:
        super().__init__(types)
        self._rows: list[tuple[Any, ...]] = []
        self._room = min(ROW_BUFFER, CHUNK)  # rows the buffer takes before it goes into the columns
        self.store = store if store is not None else ByteStore()

    def __len__(self) -> int:
        return self._n + len(self._tail[0]) + len(self._rows)

    def _put_rows(self) -> None:
        """Move the buffered rows into the tail's columns (sealing the tail when it is full)."""
        rows = self._rows
        if rows:
            cols: list[Any] = list(zip(*rows, strict=True))
            for off, size, text in self.SPILLED:
                values = cols[off]
                raws = [v.encode("utf-8", "surrogatepass") for v in values] if text else values
                sizes = list(map(len, raws))
                base = self.store.add(b"".join(raws))
                cols[off] = list(accumulate(sizes[:-1], initial=base))
                cols[size] = sizes
            n = len(rows)
            for column, values, tc in zip(self._tail, cols, self._types, strict=True):
                if tc is None:
                    column.extend(values)
                    continue
                try:  # (packed in one C call: `extend` or `fromlist` convert each value through a format string)
                    column.frombytes(_packer(tc, n).pack(*values))
                except struct.error:  # (a value out of the column's range: the array's own error, as before)
                    column.fromlist(list(values))
            self._rows = []
        if len(self._tail[0]) >= CHUNK:
            self._seal()
        self._room = min(ROW_BUFFER, CHUNK - len(self._tail[0]))

    def _row(self, row: tuple[Any, ...]) -> int:
        """Append a row (the subclass's `append` builds it); returns its row number."""
        rows = self._rows
        rows.append(row)
        if len(rows) >= self._room:
            self._put_rows()
        return len(self) - 1

    def get(self, col: int, i: int) -> Any:
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError("row index out of range")
        j = i - self._n
        if j < 0:
            return self._sealed[i // CHUNK][col][i % CHUNK]
        tail = self._tail[col]
        if j < len(tail):
            return tail[j]
        return self._rows[j - len(tail)][col]

    def set(self, col: int, i: int, value: Any) -> None:
        if i < 0:
            i += len(self)
        j = i - self._n - len(self._tail[0])
        if j >= 0:
            row = self._rows[j]
            self._rows[j] = (*row[:col], value, *row[col + 1 :])
            return
        super().set(col, i, value)

    def spilled(self, i: int, off: int, size: int, text: bool) -> Any:
        """The value of row `i` in a spilled column: str when `text`, else bytes."""
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError("row index out of range")
        j = i - self._n - len(self._tail[0])
        if j >= 0:
            v = self._rows[j][off]
            return v if type(v) is (str if text else bytes) else _plain(v, text)
        raw = self.store.get(self.get(off, i), self.get(size, i))
        return raw.decode("utf-8", "surrogatepass") if text else raw

    def set_spilled(self, i: int, off: int, size: int, value: str | bytes, text: bool) -> None:
        """Change row `i`'s value in a spilled column (a buffered row keeps it; a stored one stores it anew)."""
        if i < 0:
            i += len(self)
        j = i - self._n - len(self._tail[0])
        if j >= 0:
            value = _plain(value, text)
            raw_len = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else len(value)
            self.set(off, i, value)
            self.set(size, i, raw_len)
            return
        raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
        self.set(off, i, self.store.add(raw))
        self.set(size, i, len(raw))

    def column(self, col: int) -> Iterator[Any]:
        yield from super().column(col)
        yield from map(itemgetter(col), self._rows[:])

    def column_from(self, col: int, start: int) -> Iterator[Any]:
        tail = self._n + len(self._tail[0])
        if start < tail:
            yield from super().column_from(col, start)
        yield from map(itemgetter(col), self._rows[max(0, start - tail) :])

    def cow_copy(self) -> Self:
        self._put_rows()  # (the copy and this table then share sealed chunks only; the tail is copied)
        new: Self = super().cow_copy()
        new._rows = []
        return new


def _plain(v: Any, text: bool) -> Any:
    """A spilled column's value as it reads back from the store: str (text) or bytes."""
    if text:
        return v if isinstance(v, str) else bytes(v).decode("utf-8", "surrogatepass")
    return v.encode("utf-8", "surrogatepass") if isinstance(v, str) else bytes(v)


class ColView:
    """Column ``col`` of a `ChunkedTable`, indexable like a list (``table.flags[row]``)."""

    __slots__ = ("table", "col")

    def __init__(self, table: ChunkedTable, col: int) -> None:
        self.table, self.col = table, col

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.table.get(self.col, j) for j in range(*i.indices(len(self.table)))]
        return self.table.get(self.col, i)

    def __setitem__(self, i: int, value: Any) -> None:
        self.table.set(self.col, i, value)

    def __iter__(self) -> Iterator[Any]:
        return self.table.column(self.col)

    def __eq__(self, other: object) -> bool:
        try:
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))  # type: ignore[arg-type, call-overload]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Column(ChunkedTable):
    """One chunked, copy-on-write column with list-like access (fragments, event rows)."""

    __slots__ = ()

    def __init__(self, typecode: str | None = None) -> None:
        super().__init__((typecode,))

    def append(self, value: Any) -> None:
        tail = self._tail[0]
        tail.append(value)
        if len(tail) >= CHUNK:
            self._seal()

    def extend(self, values: list[Any]) -> None:
        """`append` each value (a chunk's room at a time)."""
        i, total = 0, len(values)
        while i < total:
            tail = self._tail[0]
            take = min(total - i, CHUNK - len(tail))
            if type(tail) is list:
                tail.extend(values[i : i + take])
            else:
                tail.fromlist(values[i : i + take])
            i += take
            if len(tail) >= CHUNK:
                self._seal()

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1 and start >= self._n:
                return list(self._tail[0][start - self._n : stop - self._n])
            return [self.get(0, j) for j in range(start, stop, step)]
        return self.get(0, i)

    def __setitem__(self, i: int, value: Any) -> None:
        self.set(0, i, value)

    def __iter__(self) -> Iterator[Any]:
        return self.column(0)

    def __eq__(self, other: object) -> bool:
        try:
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))  # type: ignore[arg-type, call-overload]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Column({list(self)!r})" if len(self) <= 8 else f"Column({len(self)} items)"


class CowDict(dict[_K, _V]):
    """Entries shared with copies until the fold asks for one to change (``mutable``): then it is cloned once.

    Reading (``get``, ``[]``, ``values()``, ``items()``) never clones and never changes the dict: a view may read a
    copied state (a time-travel checkpoint) as often as it likes. Only the fold calls ``mutable``."""

    __slots__ = ("owned",)

    def __init__(self) -> None:
        super().__init__()
        self.owned: set[_K] = set()

    def mutable(self, key: _K) -> _V | None:
        """The entry under `key`, owned by this dict (cloned the first time after a copy), or None. For the fold."""
        v = dict.get(self, key, _MISSING)
        if v is _MISSING:
            return None
        if key not in self.owned:
            v = clone(v)
            dict.__setitem__(self, key, v)  # type: ignore[misc]
            self.owned.add(key)
        return v  # type: ignore[return-value]

    def __setitem__(self, key: _K, value: _V) -> None:
        dict.__setitem__(self, key, value)
        self.owned.add(key)

    def cow_copy(self) -> CowDict[_K, _V]:
        new: CowDict[_K, _V] = CowDict()
        dict.update(new, self)
        self.owned = set()
        return new


_T = TypeVar("_T")
_SLOTS: dict[type, tuple[str, ...]] = {}


def _slots_of(cls: type) -> tuple[str, ...]:
    names = _SLOTS.get(cls)
    if names is None:
        seen: list[str] = []
        for k in reversed(cls.__mro__):
            for name in k.__dict__.get("__slots__", ()):
                if name not in seen and name != "__weakref__":
                    seen.append(name)
        names = _SLOTS[cls] = tuple(seen)
    return names


def clone(obj: _T) -> _T:
    """A copy of a slotted entry or table that cannot forget a field: every slot is carried over, and the mutable
    containers in them (list, dict, set, array) are copied one level deep, so the copy and the original change
    independently. Values inside those containers (strings, bytes, observation dicts) are shared: the fold never
    mutates them. Fields named in the class's ``SHARED`` are shared as they are (read-only observation data)."""
    cls = type(obj)
    cow: Callable[[], _T] | None = getattr(obj, "cow_copy", None)  # (a cow_copy gives an object of its own type)
    if cow is not None:
        return cow()
    new = cls.__new__(cls)
    shared = getattr(cls, "SHARED", ())
    for name in _slots_of(cls):
        v = getattr(obj, name)
        if name not in shared:
            if hasattr(v, "cow_copy"):
                v = v.cow_copy()
            elif isinstance(v, (list, array)):
                v = v[:]
            elif isinstance(v, (dict, set)):
                v = v.copy()
        object.__setattr__(new, name, v)
    return new


class ByteStore:
    """An append-only byte store: the newest bytes in RAM, flushed to an unnamed temp file past ``FLUSH`` bytes."""

    FLUSH = 4 * 1024 * 1024

    __slots__ = ("_file", "_fd", "_flushed", "_buf", "flush", "__weakref__")

    def __init__(self) -> None:
        self.flush = self.FLUSH  # bytes kept in RAM before they go to the file
        self._file: Any = None
        self._fd = -1
        self._flushed = 0  # bytes in the file
        self._buf = bytearray()

    def add(self, data: bytes) -> int:
        """Store ``data``; returns its offset."""
        off = self._flushed + len(self._buf)
        self._buf += data
        if len(self._buf) >= self.flush:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="inspector-spill-")
                self._fd = self._file.fileno()
            os.pwrite(self._fd, self._buf, self._flushed)
            self._flushed += len(self._buf)
            self._buf = bytearray()
        return off

    def get(self, off: int, size: int) -> bytes:
        if off >= self._flushed:
            start = off - self._flushed
            return bytes(self._buf[start : start + size])
        if off + size <= self._flushed:
            return os.pread(self._fd, size, off)
        head = os.pread(self._fd, self._flushed - off, off)
        return head + bytes(self._buf[: size - len(head)])

    @property
    def size(self) -> int:
        return self._flushed + len(self._buf)

    @property
    def in_memory(self) -> int:
        return len(self._buf)

"""Time travel over the fold: the state as of any event, rebuilt from checkpoints."""

from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from inspector.observe import observations as O
from inspector.state.fold import DashboardState
from inspector.stream.sse import SSEEvent

# ------------------------------------------------------------------------------------------------ time travel


def cut_index(observations: Sequence[O.Observation], k: int) -> int:
    """How many observations make up the state "as of event k": everything before the (k+1)-th SSE event."""
    if k < 0:
        raise ValueError("k must be >= 0")
    seen = 0
    for i, obs in enumerate(observations):
        if type(obs) is O.SSEEventSeen:
            if seen == k:
                return i
            seen += 1
    return len(observations)


def state_at(observations: Sequence[O.Observation], k: int) -> DashboardState:
    """The state right after the k-th SSE event (k=0: before the first one), rebuilt from the start."""
    state = DashboardState()
    for obs in observations[: cut_index(observations, k)]:
        state.apply(obs)
    return state


# an observation as stored: its class, then its fields' values in order (an SSEEventSeen's event as a tuple)
_Encoded = tuple[type[O.Observation], *tuple[Any, ...]]
_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}  # per class: its field values as a tuple (C speed)


_SEEN = operator.attrgetter("t", "turn", "attempt", "sse", "event_type", "index", "summary")
_SSE = operator.attrgetter("seq", "event", "data", "id", "retry", "start", "end", "read_index")  # SSEEvent(*those)


def _fields_getter(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    names = tuple(f.name for f in dataclasses.fields(cls))
    if len(names) >= 2:
        return operator.attrgetter(*names)  # (a tuple, built in C: ~40% of the spill's encoding cost gone)
    return lambda o: tuple(getattr(o, n) for n in names)


def _encode(o: O.Observation) -> _Encoded:
    """An observation as a tuple of its values (pickled at C speed; ~10x faster than pickling the dataclass).
    Observations are plain data (issue 17): no field holds a live object."""
    cls = type(o)
    if cls is O.SSEEventSeen:
        t, turn, attempt, e, event_type, index, summary = _SEEN(o)
        return (cls, t, turn, attempt, _SSE(e), event_type, index, summary)
    values = _FIELDS.get(cls)
    if values is None:
        values = _FIELDS[cls] = _fields_getter(cls)
    return (cls, *values(o))


def _decode(r: _Encoded) -> O.Observation:
    cls = r[0]
    if cls is O.SSEEventSeen:
        return O.SSEEventSeen(r[1], r[2], r[3], SSEEvent(*r[4]), r[5], r[6], r[7])
    return cls(*r[1:])


def _pickled(block: list[O.Observation]) -> bytes | None:
    """A block as stored, or None when some value in it cannot be pickled (a tool's own object in its result):
    that block then stays in RAM as it is, never altered and never an error."""
    try:
        return pickle.dumps([_encode(o) for o in block], protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 (a tool's object may raise anything while pickled: the block stays in RAM)
        return None


class SpilledObservations(Sequence[O.Observation]):
    """The session's observations, spilled to an unnamed temp file in pickled blocks of ``block`` observations and
    read back on demand (a few decoded blocks cached), as Toolong keeps huge logs: RAM holds the newest block and
    two offsets per block. Append-only; indexable and sliceable like the list it replaces."""

    def __init__(self, *, block: int = 2048, cache: int = 6) -> None:
        self.block = block
        self._tail: list[O.Observation] = []
        self._off = array("q")
        self._size = array("q")
        self._file: Any = None
        self._end = 0
        self._cache: OrderedDict[int, list[O.Observation]] = OrderedDict()
        self._cache_size = cache
        self._n = 0
        self._in_ram: dict[int, list[O.Observation]] = {}  # blocks that could not be pickled (see _pickled)

    def append(self, obs: O.Observation) -> None:
        self._tail.append(obs)
        self._n += 1
        if len(self._tail) >= self.block:
            self._flush()

    def _flush(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="inspector-history-")
        raw = _pickled(self._tail)
        if raw is None:
            self._in_ram[len(self._off)] = self._tail
            raw = b""
        else:
            os.pwrite(self._file.fileno(), raw, self._end)
        self._off.append(self._end)
        self._size.append(len(raw))
        self._end += len(raw)
        self._tail = []

    def _block(self, b: int) -> list[O.Observation]:
        hit = self._cache.get(b)
        if hit is not None:
            self._cache.move_to_end(b)
            return hit
        kept = self._in_ram.get(b)
        if kept is not None:
            return kept
        got = [_decode(r) for r in pickle.loads(os.pread(self._file.fileno(), self._size[b], self._off[b]))]
        self._cache[b] = got
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return got

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            return list(self.range(start, stop))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("observation index out of range")
        b, j = divmod(i, self.block)
        if b == len(self._off):
            return self._tail[j]
        return self._block(b)[j]

    def range(self, start: int, stop: int) -> Iterator[O.Observation]:
        """Observations start..stop-1, a block at a time."""
        i = max(0, start)
        stop = min(stop, self._n)
        while i < stop:
            b, j = divmod(i, self.block)
            blk = self._tail if b == len(self._off) else self._block(b)
            k = min(len(blk), j + (stop - i))
            yield from blk[j:k]
            i += k - j

    def __iter__(self) -> Iterator[O.Observation]:
        return self.range(0, self._n)

    def __bool__(self) -> bool:
        return self._n > 0

    @property
    def spilled_bytes(self) -> int:
        return self._end

    @property
    def blocks_in_ram(self) -> int:
        """Blocks that could not be pickled and stay in RAM (0 for plain observations)."""
        return len(self._in_ram)

    def frozen(self) -> FrozenObservations:
        """The observations so far, as an iterable another thread may read while this one keeps appending: it
        shares only what never changes (the written blocks, the file, the blocks kept in RAM) and reads with no
        cache."""
        return FrozenObservations(self._file, self._off[:], self._size[:], self._tail[:], dict(self._in_ram), self._n)


class FrozenObservations:
    """A prefix of `SpilledObservations` fixed at `frozen()` time; iterating it reads the spilled blocks back one at
    a time (for a worker thread: the export; nothing here touches the live object's cache)."""

    __slots__ = ("_file", "_off", "_size", "_tail", "_in_ram", "n")

    def __init__(
        self,
        file: Any,
        off: array[int],
        size: array[int],
        tail: list[O.Observation],
        in_ram: dict[int, list[O.Observation]],
        n: int,
    ) -> None:
        self._file, self._off, self._size, self._tail, self._in_ram, self.n = file, off, size, tail, in_ram, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[O.Observation]:
        for b in range(len(self._off)):
            kept = self._in_ram.get(b)
            if kept is not None:
                yield from kept
                continue
            raw = os.pread(self._file.fileno(), self._size[b], self._off[b])
            for r in pickle.loads(raw):
                yield _decode(r)
        yield from self._tail


class History:
    """The observations received so far (spilled to disk), with time travel in near-constant time.

    `append` is O(1). Checkpoints are taken every `spacing` events: from the live state it `follow`s (a copy on
    write: near-constant cost, sharing its sealed chunks and untouched entries), or lazily while folding forward.
    `state_at(k)` starts from the nearest checkpoint at or before event k and folds at most `spacing` events.
    """

    def __init__(self, observations: Iterable[O.Observation] = (), *, spacing: int = 2000, block: int = 2048) -> None:
        self.observations = SpilledObservations(block=block)
        self.event_pos = array("q")  # observation index of each SSE event
        self.spacing = spacing
        self._checkpoints: dict[int, DashboardState] = {}  # event number k -> state as of k (read only)
        self._cursor_state: DashboardState | None = None
        self._cursor_k = -1
        self._live: DashboardState | None = None
        for obs in observations:
            self.append(obs)

    def follow(self, live: DashboardState) -> None:
        """Take checkpoints from `live`, the state the caller folds each observation into right after appending it
        here (the dashboard's live state): no second fold."""
        self._live = live

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def event_count(self) -> int:
        return len(self.event_pos)

    def append(self, obs: O.Observation) -> None:
        if type(obs) is O.SSEEventSeen:
            k = len(self.event_pos)
            live = self._live
            if k and k % self.spacing == 0 and k not in self._checkpoints and live is not None:
                if live.n == len(self.observations):  # in step: the live state is "as of event k" right now
                    self._checkpoints[k] = live.copy()
            self.event_pos.append(len(self.observations))
        self.observations.append(obs)

    def extend(self, observations: Iterable[O.Observation]) -> None:
        for obs in observations:
            self.append(obs)

    def cut(self, k: int) -> int:
        """Observation count of the state as of event k."""
        return self.event_pos[k] if k < len(self.event_pos) else len(self.observations)

    def state_at(self, k: int) -> DashboardState:
        """The state right after the k-th SSE event. The result is the caller's (never shared)."""
        k = max(0, min(k, self.event_count))
        end = self.cut(k)
        base_k = max((c for c in self._checkpoints if c <= k), default=0)
        # move forward from the last answer when it is closer than the nearest checkpoint (stepping right)
        if self._cursor_state is not None and base_k <= self._cursor_k <= k and self._cursor_state.n <= end:
            base_k, state = self._cursor_k, self._cursor_state.copy()
        else:
            state = self._checkpoints[base_k].copy() if base_k in self._checkpoints else DashboardState()
        obs = self.observations
        pos = state.n  # a state folded from the start of this history has applied exactly its first n observations
        sp = self.spacing
        next_ck = (base_k // sp + 1) * sp
        while next_ck <= k and next_ck < self.event_count:
            ck_end = self.cut(next_ck)
            for o in obs.range(pos, ck_end):
                state.apply(o)
            pos = ck_end
            if next_ck not in self._checkpoints:
                self._checkpoints[next_ck] = state.copy()
            next_ck += sp
        for o in obs.range(pos, end):
            state.apply(o)
        self._cursor_state, self._cursor_k = state.copy(), k
        return state

"""Time travel over the fold: the state as of any event, rebuilt from checkpoints."""

from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

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


class _Interned:
    """First item of an encoded observation whose history was stored as references (never instantiated):
    ``(_Interned, record with None in place of the history, field position, body key or None, runs)``: the runs,
    ``start, count`` pairs of the message store's items (a single conversation's history is one run: its turns'
    items are stored in order, so a request costs a few numbers, not one per message)."""


# an observation as stored: its class, then its fields' values in order (an SSEEventSeen's event's fields inline)
_Encoded = tuple[type[O.Observation], *tuple[Any, ...]]
_Stored = _Encoded | tuple[type[_Interned], *tuple[Any, ...]]  # or one with its history stored as references

_SSE_FIELDS = tuple(f.name for f in dataclasses.fields(SSEEvent))  # SSEEvent(*those)
_SEEN_FIELDS = tuple(f.name for f in dataclasses.fields(O.SSEEventSeen))
_SEEN_HEAD = _SEEN_FIELDS[: _SEEN_FIELDS.index("sse")]  # SSEEventSeen's fields before its event
_SEEN_TAIL = _SEEN_FIELDS[_SEEN_FIELDS.index("sse") + 1 :]  # and after it


class _Encoders(dict[type, Callable[[Any], _Encoded]]):
    """Per class: one function that gives (class, *field values) for an observation, built the first time a class is
    seen. Generated as ``lambda o: (C, o.f1, o.f2, ...)``, as `dataclasses` builds ``__init__``: a third fewer
    instructions than one ``attrgetter("__class__", "f1", ...)`` (counted under cachegrind), whose dotted names
    (an SSEEventSeen's event) cost a lookup per dot; the spill encodes every observation."""

    def __missing__(self, cls: type) -> Callable[[Any], _Encoded]:
        if cls is O.SSEEventSeen:
            values = [
                *(f"o.{n}" for n in _SEEN_HEAD),
                *(f"s.{n}" for n in _SSE_FIELDS),
                *(f"o.{n}" for n in _SEEN_TAIL),
            ]
            src = f"def encode(o):\n    s = o.sse\n    return (C, {', '.join(values)})"
        else:
            values = [f"o.{f.name}" for f in dataclasses.fields(cls)]
            src = f"def encode(o):\n    return (C, {''.join(v + ', ' for v in values)})"
        namespace: dict[str, Any] = {"C": cls}
        exec(src, namespace)  # (our own field names, as dataclasses does: no outside text)
        enc: Callable[[Any], _Encoded] = namespace["encode"]
        self[cls] = enc
        return enc


_ENCODERS = _Encoders()
_SSE_AT = len(_SEEN_HEAD) + 1  # where an encoded SSEEventSeen's event begins
_SSE_END = _SSE_AT + len(_SSE_FIELDS)


def _encode(o: O.Observation) -> _Encoded:
    """An observation as a tuple of its values (pickled at C speed; ~10x faster than pickling the dataclass).
    Observations are plain data (issue 17): no field holds a live object."""
    return _ENCODERS[type(o)](o)


def _decode(r: _Encoded) -> O.Observation:
    cls = r[0]
    if cls is O.SSEEventSeen:
        v: tuple[Any, ...] = r
        args: tuple[Any, ...] = (*v[1:_SSE_AT], SSEEvent(*v[_SSE_AT:_SSE_END]), *v[_SSE_END:])
        return O.SSEEventSeen(*args)
    return cls(*r[1:])


# A request body carries the whole history so far, and a long session's requests repeat it: turn n's messages are
# turn n-1's and two more. Stored as they come, the spill grew with the square of the turns (a 243-turn replay: 154 MB
# for 300k observations, of which ~120 MB the same messages again). Each history item is stored once instead (the
# message store: pickled items in the spill file) and a request's history as references to it.
_HISTORY_KEYS = ("messages", "input")  # a body's history: Messages' and Chat Completions' messages, Responses' input
_RECENT = 64  # histories remembered to extend (about one per concurrent conversation: an extended one is replaced)
_WALK = 8  # of those, the newest compared item by item (a history that forks or shrinks, not only extends)


def _history_at(o: O.Observation) -> tuple[int, str | None, list[Any]] | None:
    """Where an observation holds a history worth storing once: (its field's position in the encoded record, the
    body's key or None for the field itself, the list), or None."""
    if type(o) is O.AttemptStarted:
        body = o.body
        if type(body) is dict:
            for key in _HISTORY_KEYS:
                lst = body.get(key)
                if type(lst) is list and lst:
                    return _BODY_AT, key, lst
    elif type(o) is O.LoopFinished:
        if type(o.messages) is list and o.messages:
            return _MESSAGES_AT, None, o.messages
    return None


_BODY_AT = 1 + [f.name for f in dataclasses.fields(O.AttemptStarted)].index("body")
_MESSAGES_AT = 1 + [f.name for f in dataclasses.fields(O.LoopFinished)].index("messages")


def _read_items(fd: int, off: array[int], size: array[int], runs: array[int]) -> list[Any]:
    """The history items ``runs`` names (``start, count`` pairs of the message store's items), a run in one read."""
    out: list[Any] = []
    for r in range(0, len(runs), 2):
        first, count = runs[r], runs[r + 1]
        last = first + count - 1
        start = off[first]
        raw = os.pread(fd, off[last] + size[last] - start, start)
        out.extend(pickle.loads(raw[off[i] - start : off[i] - start + size[i]]) for i in range(first, last + 1))
    return out


def _run_prefix(runs: array[int], k: int) -> array[int]:
    """The runs of the first ``k`` items ``runs`` names."""
    out = array("q")
    for r in range(0, len(runs), 2):
        if k <= 0:
            break
        take = min(k, runs[r + 1])
        out.append(runs[r])
        out.append(take)
        k -= take
    return out


def _decode_stored(r: _Stored, fd: int, off: array[int], size: array[int]) -> O.Observation:
    """`_decode`, with a history stored as references read back from the message store."""
    if r[0] is not _Interned:
        return _decode(cast(_Encoded, r))
    _, inner, at, key, runs = r
    items = _read_items(fd, off, size, runs)
    rec = list(inner)
    if key is None:
        rec[at] = items
    else:
        rec[at][key] = items  # (the body dict unpickled for this decode: its key keeps its place)
    return _decode(tuple(rec))


class SpilledObservations(Sequence[O.Observation]):
    """The session's observations, spilled to an unnamed temp file in pickled blocks of ``block`` observations and
    read back on demand (a few decoded blocks cached), as Toolong keeps huge logs: RAM holds the newest block and
    two offsets per block. Append-only; indexable and sliceable like the list it replaces."""

    def __init__(self, *, block: int = 2048, cache: int = 6) -> None:
        self.block = block
        self._tail: list[O.Observation] = []
        self._tail_enc: list[Any] = []  # the tail's records, encoded as they come (while the objects are in cache)
        self._off = array("q")
        self._size = array("q")
        self._file: Any = None
        self._end = 0
        self._cache: OrderedDict[int, list[O.Observation]] = OrderedDict()
        self._cache_size = cache
        self._n = 0
        self._in_ram: dict[int, list[O.Observation]] = {}  # blocks that could not be pickled (see _pickled)
        self._item_off = array("q")  # the message store: each history item's place in the file
        self._item_size = array("q")
        self._recent: list[tuple[list[Any], array[int]]] = []  # the latest histories stored, and their runs

    def _pickled(self, block: list[O.Observation], recs: list[Any]) -> bytes | None:
        """A block as stored, from its records (``recs``: each history item not stored yet goes to the message store
        first, its record then refers to it), or None when some value in it cannot be pickled (a tool's own object in
        its result): that block then stays in RAM as it is, never altered and never an error."""
        try:
            types = list(map(type, block))  # (found by C-level scans: the block's other 2,000 cost nothing here)
            for cls in (O.AttemptStarted, O.LoopFinished):
                i = -1
                while True:
                    try:
                        i = types.index(cls, i + 1)
                    except ValueError:
                        break
                    where = _history_at(block[i])
                    if where is not None:
                        at, key, items = where
                        rec = list(recs[i])
                        if key is None:
                            rec[at] = None
                        else:
                            rec[at] = {**rec[at], key: None}
                        recs[i] = (_Interned, tuple(rec), at, key, self._refs(items))
            return pickle.dumps(recs, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 (a tool's object may raise anything while pickled: the block stays in RAM)
            return None

    def _refs(self, items: list[Any]) -> array[int]:
        """``items`` as runs of the message store's items: the longest prefix it shares with a history stored lately
        (the same objects, or equal ones) refers to that one's items, the rest is stored now."""
        best_k, best, extended = 0, None, -1
        for j, (prev, prev_runs) in enumerate(self._recent):
            n = len(prev)
            if n <= best_k:
                continue
            if len(items) >= n and (items[n - 1] is prev[-1] or items[n - 1] == prev[-1]) and items[:n] == prev:
                k = n  # (its last item first: another conversation's differs there; then all, at C speed)
            elif j < _WALK:
                k, n = 0, min(n, len(items))
                while k < n and (items[k] is prev[k] or items[k] == prev[k]):
                    k += 1
            else:
                continue
            if k > best_k:
                best_k, best = k, prev_runs
                extended = j if k == len(prev) else -1
        runs = _run_prefix(best, best_k) if best is not None else array("q")
        new = items[best_k:]
        if new:  # (into the file `_flush` made: only a flush stores histories)
            raws = [pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL) for m in new]
            first, at = len(self._item_off), self._end
            for raw in raws:
                self._item_off.append(at)
                self._item_size.append(len(raw))
                at += len(raw)
            os.pwrite(self._file.fileno(), b"".join(raws), self._end)
            self._end = at
            if runs and runs[-2] + runs[-1] == first:  # (the items stored last time: one run goes on)
                runs[-1] += len(new)
            else:
                runs.append(first)
                runs.append(len(new))
        if extended >= 0:  # (the history it extends is left behind: one entry per conversation)
            del self._recent[extended]
        self._recent.insert(0, (list(items), runs))  # (a copy: what the runs stand for, whatever becomes of items)
        del self._recent[_RECENT:]
        return runs

    def append(self, obs: O.Observation) -> None:
        self._tail.append(obs)
        self._tail_enc.append(_ENCODERS[type(obs)](obs))
        self._n += 1
        if len(self._tail) >= self.block:
            self._flush()

    def extend(self, observations: Sequence[O.Observation]) -> None:
        """`append` each observation (a block's worth at a time)."""
        i, total = 0, len(observations)
        while i < total:
            take = min(total - i, self.block - len(self._tail))
            part = observations[i : i + take]
            self._tail.extend(part)
            encoders = _ENCODERS
            self._tail_enc.extend([encoders[type(o)](o) for o in part])
            self._n += take
            i += take
            if len(self._tail) >= self.block:
                self._flush()

    def _flush(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="inspector-history-")
        raw = self._pickled(self._tail, self._tail_enc)
        if raw is None:
            self._in_ram[len(self._off)] = self._tail
            raw = b""
        else:
            os.pwrite(self._file.fileno(), raw, self._end)
        self._off.append(self._end)
        self._size.append(len(raw))
        self._end += len(raw)
        self._tail = []
        self._tail_enc = []

    def _block(self, b: int) -> list[O.Observation]:
        hit = self._cache.get(b)
        if hit is not None:
            self._cache.move_to_end(b)
            return hit
        kept = self._in_ram.get(b)
        if kept is not None:
            return kept
        fd, off, size = self._file.fileno(), self._item_off, self._item_size
        got = [_decode_stored(r, fd, off, size) for r in pickle.loads(os.pread(fd, self._size[b], self._off[b]))]
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
        return FrozenObservations(
            self._file,
            self._off[:],
            self._size[:],
            self._tail[:],
            dict(self._in_ram),
            self._n,
            (self._item_off[:], self._item_size[:]),
        )


class FrozenObservations:
    """A prefix of `SpilledObservations` fixed at `frozen()` time; iterating it reads the spilled blocks back one at
    a time (for a worker thread: the export; nothing here touches the live object's cache)."""

    __slots__ = ("_file", "_off", "_size", "_tail", "_in_ram", "n", "_items")

    def __init__(
        self,
        file: Any,
        off: array[int],
        size: array[int],
        tail: list[O.Observation],
        in_ram: dict[int, list[O.Observation]],
        n: int,
        items: tuple[array[int], array[int]],
    ) -> None:
        self._file, self._off, self._size, self._tail, self._in_ram, self.n = file, off, size, tail, in_ram, n
        self._items = items  # the message store's offsets and sizes as of frozen()

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[O.Observation]:
        for b in range(len(self._off)):
            kept = self._in_ram.get(b)
            if kept is not None:
                yield from kept
                continue
            fd = self._file.fileno()
            raw = os.pread(fd, self._size[b], self._off[b])
            for r in pickle.loads(raw):
                yield _decode_stored(r, fd, *self._items)
        yield from self._tail


class History:
    """The observations received so far (spilled to disk), with time travel in near-constant time.

    `append` is O(1); `extend_live` appends a batch and folds it into the followed live state (the app's tick).
    Checkpoints are taken every `spacing` events: from the live state it `follow`s (a copy on
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

    def extend_live(self, observations: Sequence[O.Observation]) -> None:
        """Append a batch of observations and fold it into the state this history `follow`s: the same as
        ``append(obs); live.apply(obs)`` for each one in turn (checkpoints included), in a few calls per batch
        instead of a few per observation. Without a followed state, the same as `extend`."""
        live = self._live
        if live is None:
            self.extend(observations)
            return
        seen = O.SSEEventSeen
        at = [i for i, obs in enumerate(observations) if type(obs) is seen]  # the batch's SSE events
        k0, sp, base = len(self.event_pos), self.spacing, len(self.observations)
        done = 0
        # the checkpoints due in this batch: event numbers k0 <= k < k0 + len(at), k > 0, a multiple of the spacing
        for k in range(max(sp, -(-k0 // sp) * sp), k0 + len(at), sp):
            i = at[k - k0]
            part = observations[done:i]
            self.observations.extend(part)
            live.apply_all(part)
            done = i
            if k not in self._checkpoints and live.n == len(self.observations):
                self._checkpoints[k] = live.copy()  # (in step: the live state is "as of event k" right now)
        self.event_pos.extend([base + i for i in at])
        rest = observations[done:]
        self.observations.extend(rest)
        live.apply_all(rest)

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
            state.apply_all(obs.range(pos, ck_end))
            pos = ck_end
            if next_ck not in self._checkpoints:
                self._checkpoints[next_ck] = state.copy()
            next_ck += sp
        state.apply_all(obs.range(pos, end))
        self._cursor_state, self._cursor_k = state.copy(), k
        return state

"""Bounded memory for long sessions (issue 10 §5): chunked copy-on-write columns, entries shared until touched, bulk
bytes spilled to disk, the history spilled in blocks, checkpoints taken from the live state. Each checked against a
plain-list model (hypothesis) and against the state rebuilt from scratch."""

from __future__ import annotations

import functools
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.state import columns as C
from inspector.state.columns import ByteStore, ChunkedTable, Column, CowDict
from inspector.state.fold import AttemptEntry, DashboardState, EventTable
from inspector.state.travel import History, SpilledObservations, state_at
from inspector.testing.hyp import examples
from inspector.testing.synthetic import generated_observations, parse_date_observations, rate_limited_observations

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(-1000, 1000)),
        st.tuples(st.just("extend"), st.lists(st.integers(-1000, 1000), max_size=20)),
        st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(-1000, 1000)),
        st.tuples(st.just("copy"), st.integers(0, 3)),
    ),
    max_size=300,
)


@settings(max_examples=examples(60), deadline=None)
@given(OPS, st.sampled_from(["l", None]))
def test_column_copies_are_independent(ops: list[tuple[Any, ...]], typecode: str | None) -> None:
    """Any mix of appends (one by one or many at once), writes and copies: every column (original and copies) equals
    its own list model."""
    old = C.CHUNK
    C.CHUNK = 8  # small chunks: many seals and shared chunks
    try:
        cols = [Column(typecode)]
        models: list[list[int]] = [[]]
        for op in ops:
            target = len(cols) - 1
            if op[0] == "append":
                cols[target].append(op[1])
                models[target].append(op[1])
            elif op[0] == "extend":  # (across chunk ends: a chunk's room at a time)
                cols[target].extend(list(op[1]))
                models[target].extend(op[1])
            elif op[0] == "set" and models[target]:
                i = op[1] % len(models[target])
                cols[target][i] = op[2]
                models[target][i] = op[2]
            elif op[0] == "copy":
                src = op[1] % len(cols)
                cols.append(cols[src].cow_copy())
                models.append(list(models[src]))
        for col, model in zip(cols, models, strict=True):
            assert list(col) == model and len(col) == len(model)
            assert [col[i] for i in range(len(model))] == model
            if model:
                assert col[-1] == model[-1] and col[1:] == model[1:]
    finally:
        C.CHUNK = old


def test_a_copy_costs_the_tail_only() -> None:
    t = ChunkedTable(("l", None))
    for i in range(3 * C.CHUNK + 5):
        t._tail[0].append(i)
        t._tail[1].append(str(i))
        if len(t._tail[0]) >= C.CHUNK:
            t._seal()
    c = t.cow_copy()
    assert all(a is b for a, b in zip(c._sealed, t._sealed, strict=True))  # sealed chunks shared
    assert len(c._tail[0]) == 5
    c.set(0, 1, -1)  # copy on write: only the written chunk
    assert t.get(0, 1) == 1 and c.get(0, 1) == -1
    assert c._sealed[0] is not t._sealed[0] and c._sealed[1] is t._sealed[1]


def test_cowdict_clones_an_entry_only_when_the_fold_asks_to_change_it() -> None:
    """Changed (issue 17 §4): `get` / `[]` used to clone on first read after a copy; now only `mutable` does."""
    d: CowDict[str, AttemptEntry] = CowDict()
    d["a"] = AttemptEntry(0, 0, 0.0)
    c = d.cow_copy()
    assert c["a"] is d["a"] and c.get("a") is d["a"]  # reads share
    assert dict.__getitem__(c, "a") is dict.__getitem__(d, "a") and not c.owned
    m = c.mutable("a")
    assert m is not None and m is not d["a"] and c["a"] is m  # cloned once, then owned
    m.usage["x"] = 1
    got = c.get("a")
    assert got is not None
    assert d["a"].usage == {} and got.usage == {"x": 1}
    assert c.mutable("a") is m
    assert c.get("zz", 5) == 5 and c.mutable("zz") is None
    with pytest.raises(KeyError):
        c["zz"]


ENTRY_DICTS = ("attempts", "turns", "blocks", "tools")


@settings(max_examples=examples(25), deadline=None)
@given(st.integers(0, 10_000))
def test_reading_a_copied_state_changes_nothing(cut: int) -> None:
    """Issue 17 §4: a view reading a checkpoint (every entry, every query) must not clone or swap its entries."""
    obs = parse_date_observations("tools_running")
    s = DashboardState().apply_all(obs[: cut % (len(obs) + 1)])
    c = s.copy()
    before = {name: {k: id(v) for k, v in dict.items(getattr(c, name))} for name in ENTRY_DICTS}
    for name in ENTRY_DICTS:
        d = getattr(c, name)
        for k in list(d):
            assert d.get(k) is d[k]
    c.tokens(), c.current_attempt, [c.turn_savings(t) for t in c.turns], [c.turn_tools(t) for t in c.turns]
    for key in c.blocks:
        c.blocks[key].joined(), c.blocks[key].preview()
    after = {name: {k: id(v) for k, v in dict.items(getattr(c, name))} for name in ENTRY_DICTS}
    assert after == before
    assert all(not getattr(c, name).owned for name in ENTRY_DICTS)
    # and the copy still changes on its own once the fold goes on
    n = s.n
    for o in obs[n:]:
        c.apply(o)
    assert c.n == len(obs) and s.n == n and len(c.tools) >= len(s.tools)


def test_the_state_package_has_no_import_circle() -> None:
    """Issue 17 §4: state/columns reached back into state/fold (for `clone`) inside CowDict.get: a circle."""
    import ast
    from pathlib import Path

    import inspector.state

    root = Path(inspector.state.__file__).parent
    graph: dict[str, set[str]] = {}
    for f in root.glob("*.py"):
        mod = f"inspector.state.{f.stem}"
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(f.read_text())):  # imports inside functions count too
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("inspector.state."):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("inspector.state."))

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, goal, seen):
                    return True
        return False

    assert [m for m in graph if reaches(m, m, set())] == []


def test_bytestore_spills_and_reads_back() -> None:
    store = ByteStore()
    store.flush = 64
    chunks = [bytes([i % 256]) * (i % 50) for i in range(300)]
    offs = [store.add(b) for b in chunks]
    assert store.in_memory < 64 + 50 and store.size == sum(map(len, chunks))
    assert [store.get(o, len(b)) for o, b in zip(offs, chunks, strict=True)] == chunks


def test_event_summaries_and_read_bytes_round_trip() -> None:
    obs = parse_date_observations(variant="invalid_json")
    s = DashboardState().apply_all(obs)
    s.store.flush = 256
    for _ in range(50):  # push the summaries into the spill file
        s.store.add(b"x" * 100)
    assert s.store._file is not None
    from inspector.observe import observations as O

    reads = [o.data for o in obs if isinstance(o, O.ReadReceived)]
    assert list(s.reads.data) == reads
    seen = [o.summary for o in obs if isinstance(o, O.SSEEventSeen)]
    assert [s.events.summary[r] for r in s.events.event_rows] == seen
    c = s.copy()
    c.events.summary[0] = "changed"
    assert s.events.summary[0] != "changed" and c.events.summary[0] == "changed"


def test_summary_keeps_any_text() -> None:
    t = EventTable()
    for text in ("", "é", "\ud800", "x" * 10_000, "a\nb"):
        t.append(0, 0.0, "e", 0, text, 0, 0, 0, 0, 1, 0, 0)
    assert list(t.summary) == ["", "é", "\ud800", "x" * 10_000, "a\nb"]


@pytest.mark.parametrize("block", [1, 3, 64])
def test_spilled_observations_round_trip(block: int) -> None:
    obs = parse_date_observations(variant="overloaded") + rate_limited_observations()
    so = SpilledObservations(block=block, cache=2)
    for o in obs:
        so.append(o)
    assert len(so) == len(obs) and list(so) == obs
    assert so[5:40] == obs[5:40] and so[-1] == obs[-1] and so[::7] == obs[::7]
    assert list(so.range(10, 12)) == obs[10:12]
    with pytest.raises(IndexError):
        so[len(obs)]
    if block < len(obs):
        assert so.spilled_bytes > 0


def test_following_the_live_state_gives_the_same_states() -> None:
    """Checkpoints copied from the live state (as the app folds) equal states rebuilt from the start."""
    from inspector.testing.state import canon

    obs = generated_observations(9000, tool_every=700)
    h = History(spacing=1000, block=500)
    live = DashboardState()
    h.follow(live)
    for o in obs:
        h.append(o)
        live.apply(o)
    assert len(h._checkpoints) == 9
    for k in (0, 1, 999, 1000, 1001, 4500, 8999, h.event_count):
        assert canon(h.state_at(k)) == canon(state_at(obs, k)), k
    assert canon(h.state_at(h.event_count)) == canon(live)
    # the checkpoints did not move while the live state went on
    assert h._checkpoints[1000].status.events == 1000


def test_a_checkpoint_is_not_changed_by_later_folding() -> None:
    from inspector.testing.state import canon

    obs = parse_date_observations(variant="overloaded")
    s = DashboardState().apply_all(obs[:70])
    frozen = canon(s)
    c = s.copy()
    for o in obs[70:]:
        s.apply(o)
    assert canon(c) == frozen


@pytest.mark.parametrize("block", [1, 7])
async def test_a_real_loop_session_spills_and_reads_back_its_history_views(block: int) -> None:
    """The loop's observations (AttemptStarted.body["messages"], LoopFinished.messages: plain lists, issue 17)
    spill with the rest and read back equal."""
    import math

    from inspector.observe import observations as O
    from inspector.sessions.sources import scenario_session
    from inspector.testing.loop import run_observed

    result, observed = await run_observed(scenario_session("parse_date", speed=math.inf))
    obs = observed.items
    h = History(spacing=5, block=block)
    for o in obs:
        h.append(o)
    assert h.observations.spilled_bytes > 0
    back = list(h.observations)
    starts = [o for o in back if isinstance(o, O.AttemptStarted)]
    assert len(starts) >= 2 and [list(o.body["messages"]) for o in starts] == [
        list(o.body["messages"]) for o in obs if isinstance(o, O.AttemptStarted)
    ]
    assert len(starts[-1].body["messages"]) > 1
    (done,) = [o for o in back if isinstance(o, O.LoopFinished)]
    assert list(done.messages) == list(result.history) and done.status == result.status
    assert back == obs
    # time travel folds them too
    assert h.state_at(h.event_count).n == len(obs)


def test_a_frozen_history_prefix_stays_fixed_while_the_history_grows() -> None:
    """The export's view of the history (read in a worker thread): the observations at freeze time, in order, read
    back from the spill file without the live object's block cache."""
    obs = generated_observations(3000)
    s = SpilledObservations(block=64)
    for o in obs[:1000]:
        s.append(o)
    frozen = s.frozen()
    cache = dict(s._cache)
    for o in obs[1000:]:
        s.append(o)
    assert len(frozen) == 1000 and list(frozen) == obs[:1000]
    assert dict(s._cache) == cache  # nothing read through the live cache
    assert list(s.frozen()) == obs


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 3 * C.CHUNK + 40), st.integers(0, 3 * C.CHUNK + 60))
def test_column_from_is_the_column_from_that_row(n: int, start: int) -> None:
    """`column_from` (the fold's attempt-end scan) skips the chunks before `start` and yields the same values."""
    t = Column("l")
    for i in range(n):
        t.append(i * 7)
    assert list(t.column_from(0, start)) == list(t.column(0))[start:]


def test_a_block_that_cannot_be_pickled_stays_in_ram_unaltered() -> None:
    """Fault path: an observation holding a value pickle refuses (a tool's own object in its result) neither fails
    the append nor is altered: its block stays in RAM, the other blocks spill, and everything reads back equal."""
    import threading

    from inspector.observe import observations as O

    lock = threading.Lock()  # cannot be pickled
    obs: list[O.Observation] = [O.TurnStarted(float(i), i) for i in range(10)]
    odd = O.ToolResult(4.0, 0, 0, "t1", "odd", [{"type": "text", "text": "x", "lock": lock}], False, "completed")
    obs[4] = odd
    s = SpilledObservations(block=3)
    for o in obs:
        s.append(o)
    assert s.blocks_in_ram == 1 and s.spilled_bytes > 0
    assert list(s) == obs and s[4] is odd and odd.content[0]["lock"] is lock
    assert list(s.frozen()) == obs
    assert [s[i] for i in range(10)] == obs


def test_the_spill_encodes_classes_of_any_field_count() -> None:
    """The spill's encoder reads a class's fields with one C getter when it has two or more (a single-field getter
    would give a bare value, not a tuple): a class of one field, or of none, round-trips too."""
    import dataclasses

    from inspector.observe import observations as O
    from inspector.state.travel import _decode, _encode

    @dataclasses.dataclass
    class One:
        t: float

    @dataclasses.dataclass
    class Empty:
        pass

    @dataclasses.dataclass
    class Three:
        t: float
        a: tuple[int, ...]
        b: str

    for o in (One(1.5), Empty(), Three(2.0, (1, 2), "x"), O.Observation(3.0)):
        assert _decode(_encode(o)) == o  # type: ignore[arg-type]


ROW_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 300), st.text(max_size=6)),
        st.tuples(st.just("marker"), st.integers(0, 300), st.text(max_size=6)),
        st.tuples(st.just("event_rows")),
        st.tuples(st.just("flag"), st.integers(0, 10_000), st.integers(0, 255)),
        st.tuples(st.just("summary"), st.integers(0, 10_000), st.text(max_size=6)),
        st.tuples(st.just("copy"), st.integers(0, 3)),
    ),
    max_size=200,
)


@settings(max_examples=examples(60), deadline=None)
@given(ROW_OPS, st.integers(0, 40), st.sampled_from([3, 64]))
def test_row_tables_read_like_their_rows_through_buffer_columns_and_copies(
    ops: list[tuple[Any, ...]], at: int, buffer: int
) -> None:
    """The event table keeps new rows in a row buffer, moved into columns when a chunk fills or the table is copied
    (`RowTable`): any mix of appends (events and marker rows), writes (a flag, a summary) and copies reads back,
    column by column, row by row and through `column_from`, as a list of rows; the events' rows (`event_rows`, found
    for a whole buffer at once) are the rows with an event number, also while rows wait in the buffer; copies and
    originals change independently; the store is shared."""
    old = C.CHUNK, C.ROW_BUFFER
    C.CHUNK, C.ROW_BUFFER = 8, buffer  # small chunks: many seals, buffers cut short by copies (and by the chunk's end)
    try:
        store = ByteStore()
        store.flush = 40  # and summaries spilled to the file
        tables = [EventTable(store)]
        models: list[list[list[Any]]] = [[]]
        for op in ops:
            target = len(tables) - 1
            t, m = tables[target], models[target]
            if op[0] in ("append", "marker"):  # (a marker row is not an event: its evno is 0)
                n = len(m)
                evno = 0 if op[0] == "marker" else n + 1
                row = [n % 7, n * 0.5, f"e{n}", op[1], n, 0, 1, 0, evno, 10 * n, 10 * n + op[1], op[2]]
                assert t.append(row[0], row[1], row[2], row[3], row[11], *row[4:11]) == n
                m.append(row)
            elif op[0] == "event_rows":  # (read while rows wait in the buffer: they are counted)
                assert list(t.event_rows) == [i for i, r in enumerate(m) if r[8]]
            elif op[0] == "flag" and m:
                i = op[1] % len(m)
                t.flags[i] = op[2]
                m[i][7] = op[2]
            elif op[0] == "summary" and m:
                i = op[1] % len(m)
                t.summary[i] = op[2]
                m[i][11] = op[2]
            elif op[0] == "copy":
                src = op[1] % len(tables)
                tables.append(tables[src].cow_copy())
                models.append([list(r) for r in models[src]])
        for t, m in zip(tables, models, strict=True):
            assert len(t) == len(m)
            assert [t.row(i) for i in range(len(m))] == [(*r[0:4], r[11], *r[4:9]) for r in m]
            assert list(t.summary) == [r[11] for r in m]
            for col in (0, 1, 3, 7, 9, 10):
                assert list(t.column(col)) == [r[col] for r in m]
                assert list(t.column_from(col, at)) == [r[col] for r in m][at:]
            assert list(t.column(12)) == [len(r[11].encode("utf-8", "surrogatepass")) for r in m]
            assert list(t.event_rows) == [i for i, r in enumerate(m) if r[8]]
            if m:
                assert t.summary[-1] == m[-1][11] and t.flags[-1] == m[-1][7]
            with pytest.raises(IndexError):
                t.summary[len(m)]
    finally:
        C.CHUNK, C.ROW_BUFFER = old


def test_read_rows_keep_any_bytes_and_their_sizes() -> None:
    """Raw reads in the row buffer, in the columns and in the spill file read back as the same bytes (a bytearray
    the loop might hand over reads back as bytes), with their sizes in the size column."""
    from inspector.state.fold import ReadTable

    t = ReadTable()
    t.store.flush = 64
    datas = [bytes([i % 256]) * (i % 70) for i in range(3000)]
    for i, d in enumerate(datas):
        t.append(0, 0, i, float(i), float(i), cast(bytes, bytearray(d)) if i % 3 == 0 else d, 0)
    assert len(t) == 3000 and list(t.data) == datas
    assert all(type(x) is bytes for x in t.data[-5:])
    assert list(t.column(8)) == [len(d) for d in datas]
    c = t.cow_copy()
    t.append(0, 0, 3000, 0.0, 0.0, cast(bytes, bytearray(b"xy\n")), 0)
    assert t.data[-1] == b"xy\n" and len(c) == 3000 and c.data[-1] == datas[-1]


_BATCH_OBS = generated_observations(500, tool_every=150)


@functools.cache
def _one_by_one(spacing: int, block: int) -> tuple[Any, list[int], dict[int, Any]]:
    """The live state (canon), the event positions and the checkpoints (canon) of appending and applying
    `_BATCH_OBS` one observation at a time."""
    from inspector.testing.state import canon

    one, live = History(spacing=spacing, block=block), DashboardState()
    one.follow(live)
    for o in _BATCH_OBS:
        one.append(o)
        live.apply(o)
    keys = sorted(one._checkpoints)
    sample = {keys[0], keys[len(keys) // 2], keys[-1]} if keys else set()  # (a canon costs the whole state)
    return (
        canon(live),
        list(one.event_pos),
        {k: (c.n, canon(c) if k in sample else None) for k, c in one._checkpoints.items()},
    )


@functools.cache
def _rebuilt(k: int) -> Any:
    from inspector.testing.state import canon

    return canon(state_at(_BATCH_OBS, k))


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.integers(1, 400), max_size=20), st.sampled_from([1, 9, 100, 2000]), st.sampled_from([5, 64, 2048]))
def test_a_batch_fold_is_the_one_by_one_fold(sizes: list[int], spacing: int, block: int) -> None:
    """`History.extend_live` (what the app's tick can fold: a batch) leaves the history, its checkpoints and the
    live state exactly as appending and applying one observation at a time does, however the session is cut into
    batches; and `apply_all` is `apply` one by one."""
    from inspector.testing.state import canon

    obs = _BATCH_OBS
    live, event_pos, checkpoints = _one_by_one(spacing, block)
    many, many_live = History(spacing=spacing, block=block), DashboardState()
    many.follow(many_live)
    start = 0
    for size in [*sizes, len(obs)]:
        many.extend_live(obs[start : start + size])
        start += size
    assert canon(many_live) == live
    assert list(many.event_pos) == event_pos and list(many.observations) == obs
    assert many._checkpoints.keys() == checkpoints.keys()
    for k, (n, c) in checkpoints.items():
        got = many._checkpoints[k]
        assert got.n == n and (c is None or canon(got) == c), k
    for k in (spacing, many.event_count // 2):
        assert canon(many.state_at(k)) == _rebuilt(k)
    cut = sum(sizes) % (len(obs) + 1)
    one = DashboardState()
    for o in obs[:cut]:
        one.apply(o)
    assert canon(DashboardState().apply_all(obs[:cut])) == canon(one)


def test_a_batch_without_a_followed_state_is_appended_only() -> None:
    obs = parse_date_observations()
    h = History(spacing=3, block=4)
    h.extend_live(obs)
    assert list(h.observations) == obs and h.event_count == sum(type(o).__name__ == "SSEEventSeen" for o in obs)
    assert not h._checkpoints


@pytest.mark.parametrize("proxied", [False, True])
def test_the_batch_fold_keeps_the_conversation_table_of_the_one_by_one_fold(proxied: bool) -> None:
    """`apply_all` skips the conversation table's call while there is no conversation (it would only count the
    observation): a proxied session's table (side requests first, then conversations) and a plain session's count
    are those of `apply` one by one, and so are the states (time travel folds with `apply_all` too)."""
    import dataclasses

    from inspector.observe import observations as O
    from inspector.testing.conversations import interleaved_conversations
    from inspector.testing.state import canon

    obs: list[O.Observation] = list(parse_date_observations())
    if proxied:  # a side request of no conversation before the first conversation, then three conversations
        obs = [O.ExchangeForwarded(0.0, "POST", "/v1/messages/count_tokens", 200, 10, "ok", None, "count")]
        obs += interleaved_conversations(3)
    one = DashboardState()
    for o in obs:
        one.apply(o)
    many = DashboardState().apply_all(obs)

    def table(s: DashboardState) -> tuple[Any, ...]:
        c = s.conversations
        entries = [dataclasses.astuple(e) for e in c]
        return (c.n, c.rev, c.other_requests, c.streaming, dict(c.by_turn), c.order, entries)

    assert table(many) == table(one) and many.conversations.n == len(obs)
    assert canon(many) == canon(one)
    assert len(one.conversations) == (3 if proxied else 0) and one.conversations.other_requests == int(proxied)


# ---------------------------------------------------------------------------------------- the spill's message store
def _message(i: int, size: int = 40) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * size}


_HISTORY = st.lists(
    st.tuples(
        st.sampled_from(["messages", "input", "loop_finished", "none", "empty", "not a list"]),
        st.integers(0, 6),  # how many items of the previous history of that kind it keeps (a prefix)
        st.integers(0, 3),  # how many new ones it adds
        st.booleans(),  # the kept items as equal copies (a proxy parses each body afresh) instead of the same objects
    ),
    max_size=40,
)


@settings(max_examples=examples(80), deadline=None)
@given(_HISTORY, st.sampled_from([1, 3, 16]))
def test_histories_stored_once_read_back_equal(steps: list[tuple[str, int, int, bool]], block: int) -> None:
    """Request bodies whose histories extend, shorten, fork or copy earlier ones (and LoopFinished's messages), among
    other observations: they read back equal, their bodies' keys in their order, live and from a frozen prefix."""
    import copy

    from inspector.observe import observations as O

    obs: list[O.Observation] = []
    last: dict[str, list[Any]] = {}
    n = 0
    for i, (kind, keep, add, copied) in enumerate(steps):
        prev = last.get(kind, [])
        kept = prev[:keep]
        items = [*(copy.deepcopy(kept) if copied else kept), *(_message(n + j) for j in range(add))]
        n += add
        last[kind] = items
        if kind == "loop_finished":
            obs.append(O.LoopFinished(float(i), "finished", i, items, []))
            continue
        body: dict[str, Any] = {"model": "m", "stream": True}
        if kind in ("messages", "input"):
            body[kind] = items
        elif kind == "empty":
            body["messages"] = []
        elif kind == "not a list":
            body["input"] = "a string input"
        body["max_tokens"] = 10  # after the history: its key keeps its place
        obs.append(O.AttemptStarted(float(i), i, 0, "POST", "http://x/v1", {}, body))
        obs.append(O.TurnStarted(float(i), i))
    so = SpilledObservations(block=block, cache=1)
    so.extend(obs)
    frozen = so.frozen()
    back = list(so)
    assert back == obs and list(frozen) == obs
    for a, b in zip(back, obs, strict=True):
        if isinstance(a, O.AttemptStarted) and isinstance(b, O.AttemptStarted):
            assert list(a.body) == list(b.body)


def test_a_history_changed_after_it_was_stored_does_not_change_what_later_ones_read_back() -> None:
    """The store remembers what a history held when it was stored: a list the producer changes later (against the
    rules, but possible) does not make a later body that extends it read back wrong."""
    from inspector.observe import observations as O

    first = [_message(0), _message(1)]
    so = SpilledObservations(block=1)
    so.append(O.AttemptStarted(0.0, 0, 0, "POST", "u", {}, {"messages": first}))
    second = [*first, _message(2)]
    first.append(_message(99))  # changed in place after it was spilled
    first.insert(0, _message(98))
    so.append(O.AttemptStarted(1.0, 1, 0, "POST", "u", {}, {"messages": second}))
    assert so[1].body["messages"] == second
    assert so[0].body["messages"] == [_message(0), _message(1)]  # as it was when spilled


@pytest.mark.parametrize("copied", [False, True])
def test_a_long_sessions_requests_spill_in_linear_space(copied: bool) -> None:
    """Each request carries the whole history so far (turn n: 2n messages). Stored as they came, 300 turns would
    spill ~90 MB (the square of the turns); each history item is stored once instead. Both for the loop's bodies
    (the same message objects each turn) and a proxy's (each body parsed afresh: equal copies)."""
    import copy

    from inspector.observe import observations as O

    turns, size = 300, 500
    history: list[dict[str, Any]] = []
    obs: list[O.Observation] = []
    for t in range(turns):
        history = [*history, _message(2 * t, size), _message(2 * t + 1, size)]
        sent = copy.deepcopy(history) if copied else history
        obs.append(O.AttemptStarted(float(t), t, 0, "POST", "u", {}, {"model": "m", "messages": sent}))
        obs.extend(O.TurnStarted(float(t), t) for _ in range(20))  # the stream's observations between requests
    so = SpilledObservations(block=64)
    so.extend(obs)
    unique = 2 * turns * (size + 60)
    assert so.spilled_bytes < 3 * unique  # quadratic would be ~turns / 2 times the unique bytes: 150x
    assert list(so) == obs


def test_many_concurrent_conversations_requests_spill_in_linear_space() -> None:
    """A proxied session: 40 conversations at once, their requests interleaved (each body parsed afresh, so its
    messages are equal copies, not the same objects), the same first message in all of them (parallel subagents
    given one task). Each conversation's history is still stored once."""
    import copy

    from inspector.observe import observations as O

    conversations, turns, size = 40, 15, 300
    histories: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "the same task " + "x" * size}]
    ] * conversations
    obs: list[O.Observation] = []
    for t in range(turns):
        for c in range(conversations):
            h = histories[c] = [*histories[c], _message(1000 * c + 2 * t, size), _message(1000 * c + 2 * t + 1, size)]
            body = {"model": "m", "messages": copy.deepcopy(h)}
            obs.append(O.AttemptStarted(float(t), t * conversations + c, 0, "POST", "u", {}, body))
    so = SpilledObservations(block=32)
    so.extend(obs)
    unique = conversations * (2 * turns + 1) * (size + 60)
    assert so.spilled_bytes < 3 * unique
    assert list(so) == obs


@pytest.mark.parametrize("column", ["index", "flags", "t"])
def test_a_value_out_of_its_columns_range_fails_as_the_array_does(column: str) -> None:
    """The buffered rows go into their columns packed in one call per column; a value the column's C type cannot
    hold (an index past 2**31, a flag past 255, a time that is not a number) still fails as the array itself fails
    (`OverflowError` / `TypeError`), not with the packer's own error, and leaves the rows before it readable."""
    table = EventTable()
    args: dict[str, Any] = {"index": 2**40} if column == "index" else {"flags": 256} if column == "flags" else {}
    row: dict[str, Any] = {"seq": 0, "t": 0.5, "etype": "e", "index": 0, "summary": "s", "read_index": 0, "turn": 0}
    row["attempt"] = 0
    row |= {"flags": 0, "evno": 1, "start": 0, "end": 1}
    table.append(**row)
    table.cow_copy()  # (the first row is in the columns now)
    if column == "t":
        args = {"t": "later"}
    table.append(**(row | args))
    error = TypeError if column == "t" else OverflowError
    with pytest.raises(error):
        table.cow_copy()  # (copying puts the buffered rows into the columns)
    assert table.get(0, 0) == 0 and table.summary[0] == "s"

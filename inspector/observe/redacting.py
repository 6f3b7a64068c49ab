"""The live dashboard's redaction: observations are published with every known secret masked, also when a relay
echoes the key split across network reads or across deltas, or ``\\u``-escaped in JSON (docs/secrets.md).

Redacting each observation on its own cannot see a key split across two reads or five ``text_delta`` events: every
piece alone is harmless, the dashboard joins them (the raw reads, a block's buffer, the assistant's text). A
``RedactingPublisher`` keeps, per attempt, the state of each stream the dashboard joins, with the same machinery the
recording uses (``inspector.core.redaction``), so that what the dashboard shows is what the recording holds:

- raw reads (``ReadReceived.data``) go through the attempt's ``StreamRedactor``: an unfinished event is held until
  its blank line, each event masked (and written again from its JSON when it held a secret), a delta that could
  begin a secret held until the text goes on. A read can therefore be published with fewer bytes (even none:
  its timing is kept), and the held bytes come with a later read, or at the end of the attempt as one more read
  (the same ``read_index`` and times as the last read);
- the text, thinking and partial_json fragments of each block (``SSEEventSeen.sse.data`` and ``summary``,
  ``BlockDelta.fragment``) go through one ``FragmentRedactor`` per block and field (a delta event takes its
  fragment from the ``BlockDelta`` that follows it, parsed by the stream engine already; its JSON is parsed again
  only to rewrite an event that held part of a key, or when no BlockDelta follows): an event (and its
  ``BlockDelta``) whose fragment ends with what could be the beginning of a secret is held, with every later
  observation of the attempt, until the text goes on, its block stops, the message ends or the attempt ends (or
  until what waits behind it grows past ``core.redaction.MAX_HOLD`` bytes of reads: then the text that could begin
  a secret reads ``[redacted]``, and a secret it begins is still masked in what follows: ``FragmentRedactor.force``); a
  secret completed across fragments reads ``[redacted]`` in the joined text, and a tool input stays valid JSON;
- the byte offsets of each event (``sse.start`` / ``sse.end``) are moved onto the published reads, so an event's
  raw bytes are found where the dashboard keeps them;
- every other field, whole values (a block's content, a tool input, a message, an error), is masked as a whole with
  ``Observation.redacted`` (as it is or JSON-escaped).

Order is kept within an attempt; observations of other attempts and those of no attempt (loop state, controls)
are not held. ``AttemptEnded`` publishes what its attempt still holds first (``LoopFinished`` and ``close()``:
of every attempt). Without secrets, observations pass as they are.

This is the ONE redaction point of the live observations: the agent loop and the proxy publish through it, and the
recorder, the dashboard and the headless printer subscribe behind it (a recording is not masked a second time).
Wiring::

    self._redacting = RedactingPublisher(bus, self.secrets)   # once, with the bus and the secrets known so far
    self._redacting.learn(new)                                # each key first seen later (the proxy's _learn)
    self._redacting.publish(obs)                              # instead of bus.publish(obs), for EVERY observation
    self._redacting.close()                                   # at the end (publishes what is still held)

Every observation must go through the same publisher, in the order they happen: reads before the events they
complete (as the loop and the proxy publish them), ``AttemptEnded`` last for an attempt.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from inspector.core import exactjson
from inspector.core.redaction import (
    ENVIRONMENT_KEYS,
    STREAMED_TEXT_FIELDS,
    Fragment,
    FragmentRedactor,
    SecretMatcher,
    SecretSet,
    StreamRedactor,
    force_all,
    mask_bytes,
    mask_json_text,
    mask_text,
    openai_fragments,
)
from inspector.core.wire import CHAT_TEXT_KINDS, RESPONSES_DELTAS, start_text_field
from inspector.observe import observations as O
from inspector.observe.stepobs import fragment_summary

__all__ = ["RedactingPublisher"]

# events after which no fragment of the message can go on: everything held is released (as StreamRedactor does)
_RELEASE_ALL = frozenset({"message_start", "message_delta", "message_stop", "error"})


@dataclass(slots=True, eq=False)
class _Pending:
    obs: O.Observation
    cell: Fragment | None = None  # the fragment it waits for (None: ready as soon as what precedes it is)
    tag: Any = None  # SSEEventSeen of a delta: (parsed data, delta object, field); BlockDelta: shown as its cell
    group: _Group | None = None  # the delta events of one OpenAI chunk that streams several fragments


@dataclass(slots=True, eq=False)
class _Group:
    """The delta events of one OpenAI chunk holding several fragments (parallel tool calls, content and a call):
    each shows the whole chunk, so none goes out before all of them are known and safe (``closed``: an event of
    another chunk came, or the attempt ended)."""

    seq: int
    items: list[_Pending] = field(default_factory=list)
    closed: bool = False

    def ready(self) -> bool:
        return self.closed and all(g.cell is None or g.cell.done for g in self.items)


@dataclass(slots=True, eq=False)
class _Attempt:
    """What one attempt's streams hold."""

    reads: StreamRedactor
    base: int  # bytes of the attempt published before it had secrets (passed as they were: offsets unchanged)
    blocks: dict[tuple[int, str], FragmentRedactor] = field(default_factory=dict)
    queue: deque[_Pending] = field(default_factory=deque)
    last_read: O.ReadReceived | None = None
    cell_seq: int = -1  # the last delta event's seq and fragment (its BlockDelta follows it)
    cell: Fragment | None = None
    cell_text: str = ""
    # an OpenAI chunk's content_block_start whose chunk also streams the block's first fragment: it waits for the
    # delta event of the same chunk (its tag, once seen) and shows the chunk as that one does
    sibling: _Pending | None = None
    group: _Group | None = None  # the open group of delta events of one chunk (its seq is the current one)
    # a delta event waiting for its BlockDelta, whose fragment (parsed already by the stream engine) it then shares:
    # the event's JSON is parsed again only when something else comes first, or when a secret was masked in it
    awaiting: _Pending | None = None
    ended: bool = False  # everything is released: offsets are final
    start: tuple[int, str, Fragment] | None = None  # the text a block's start event holds, for its BlockOpened

    def offset(self, x: int) -> int:
        return x if x <= self.base else self.base + self.reads.out_offset(x - self.base)

    def release(self, index: int | None = None) -> None:
        for key in list(self.blocks):
            if index is None or key[0] == index:
                self.blocks.pop(key).release()


class RedactingPublisher:
    """Publishes observations to ``bus`` (an ``ObservationBus``, or any callable taking one observation) with every
    known secret masked, whatever its split into reads or deltas or its escaping (see the module's docstring).

    The secrets: ``secrets`` and the credential environment variables' values (``core.redaction.ENVIRONMENT_KEYS``).
    ``publish(obs)`` for every observation, in order; ``learn(secrets)`` for a key first seen late (it applies to
    what is published from then on); ``close()`` (or ``flush()``) publishes what is still held.
    """

    def __init__(self, bus: O.ObservationBus | Callable[[O.Observation], None], secrets: Iterable[str] = ()) -> None:
        self.bus = bus
        self._sink: Callable[[O.Observation], None] = bus.publish if isinstance(bus, O.ObservationBus) else bus
        # with the credential environment variables' values (the CLI's output guard learns them): a key in the
        # environment that a session's content shows (a scenario's text, a tool's result) is masked in what it
        # publishes, its recording included, as it is on stdout
        self.keys = SecretSet([*secrets, *ENVIRONMENT_KEYS])
        self._attempts: dict[tuple[int, int], _Attempt] = {}
        self._passed: dict[tuple[int, int], int] = {}  # bytes published per attempt before there was a secret
        self._broken: set[tuple[int, int] | None] = set()  # attempts whose masking failed (publish)
        self.errors: list[str] = []
        self._vouched: tuple[O.Observation, SecretMatcher] | None = None  # (vouch)

    @property
    def secrets(self) -> list[str]:
        """The secrets masked (usable ones, longest first)."""
        return self.keys.secrets

    def learn(self, secrets: Iterable[str] | str) -> list[str]:
        """More secrets (a key first seen late): masked in everything published from now on, in the attempts under
        way too. Returns the ones that were new."""
        return self.keys.add(secrets)

    def vouch(self, obs: O.AttemptStarted, keys: SecretMatcher) -> None:
        """``obs``, published next, carries a body found to hold none of ``keys``' secrets (``json_clean``, in a
        worker thread: 16 MiB took ~70 ms): its body is not searched again, unless a key was learned since (the
        set's matcher is then another one). Its other fields are masked as usual."""
        self._vouched = (obs, keys)

    def close(self) -> None:
        """Publish what every attempt still holds (masked)."""
        for key in list(self._attempts):
            self._end(key)
        self._passed.clear()

    flush = close

    # ------------------------------------------------------------------------------------------------ publish

    def publish(self, obs: O.Observation) -> None:
        """Publish ``obs`` masked. Should the masking itself fail (a bug: no input is meant to reach one), nothing
        that passed is lost or leaked: the observation and the rest of its attempt are masked as whole values from
        then on (a read's bytes as bytes), and the failure is kept in ``errors`` (the bus's too), never raised into
        the producer (a proxy's drain that raised lost every later observation of the session)."""
        try:
            # (every observation of a session passes here: dispatch on the exact class, stored once; mypy does not
            # narrow by it, hence the ignores: a cast in each branch would cost a call per observation on the hottest
            # path; the try costs nothing until it catches)
            kind = type(obs)
            if self._broken and _attempt_of(obs) in self._broken:  # (its masking failed: whole values from then on)
                self._sink(_whole(obs, self.keys))
                return
            if not self.keys.secrets:  # fast path: nothing to mask (only the bytes per attempt are counted)
                if kind is O.ReadReceived:
                    key = (obs.turn, obs.attempt)  # type: ignore[attr-defined]
                    self._passed[key] = self._passed.get(key, 0) + len(obs.data)  # type: ignore[attr-defined]
                elif kind is O.AttemptEnded:
                    self._passed.pop((obs.turn, obs.attempt), None)  # type: ignore[attr-defined]
                self._sink(obs)
                return
            if kind is O.BlockDelta:
                self._delta(obs)  # type: ignore[arg-type]
                return
            st = self._attempts.get(_attempt_of(obs))  # type: ignore[arg-type]
            if st is not None and st.awaiting is not None:
                self._resolve(st)  # its BlockDelta did not come next: the event is parsed here
            if st is not None and kind not in _CHUNK_KINDS and (st.sibling is not None or st.group is not None):
                self._settle(st)  # the chunk's observations are all out: what waited for more of them is settled
            if kind is O.ReadReceived:
                self._read(obs)  # type: ignore[arg-type]
            elif kind is O.SSEEventSeen:
                self._event(obs)  # type: ignore[arg-type]
            elif kind is O.AttemptEnded:
                self._end((obs.turn, obs.attempt))  # type: ignore[attr-defined]
                self._sink(obs.redacted(self.keys.secrets))
            elif kind is O.LoopFinished:
                self.close()
                self._sink(obs.redacted(self.keys.secrets))
            else:
                vouched, self._vouched = self._vouched, None
                if vouched is not None and vouched[0] is obs and vouched[1] is self.keys.matcher:
                    obs = _but_body(obs, self.keys.secrets)  # type: ignore[arg-type]
                else:
                    obs = obs.redacted(self.keys.secrets)
                if kind is O.BlockOpened and st is not None and st.start is not None:
                    index, name, cell = st.start
                    st.start = None
                    if obs.index == index and isinstance(obs.start.get(name), str):  # type: ignore[attr-defined]
                        st.queue.append(_Pending(obs, cell, name))
                        self._drain(st)
                        return
                if st is not None and st.queue:
                    st.queue.append(_Pending(obs))
                else:
                    self._sink(obs)
        except Exception as e:  # noqa: BLE001 (see above: the producer goes on, the failure is said)
            self._failed(obs, e)

    def _failed(self, obs: O.Observation, error: Exception) -> None:
        message = f"redaction failed ({type(error).__name__}: {error}): masked as whole values from here on"
        self.errors.append(message)
        if isinstance(self.bus, O.ObservationBus):
            self.bus.errors.append(message)
        key = _attempt_of(obs)
        st = self._attempts.pop(key, None) if key is not None else None
        if key is not None:
            self._broken.add(key)
        out = [p.obs for p in st.queue] if st is not None else []  # what the attempt held, in order, then obs
        for o in [*out, obs]:
            self._sink(_whole(o, self.keys))

    # ------------------------------------------------------------------------------------------------ streams

    def _state(self, turn: int, attempt: int) -> _Attempt:
        key = (turn, attempt)
        st = self._attempts.get(key)
        if st is None:
            st = self._attempts[key] = _Attempt(StreamRedactor(self.keys), self._passed.pop(key, 0))
        return st

    def _read(self, obs: O.ReadReceived) -> None:
        st = self._state(obs.turn, obs.attempt)
        st.last_read = obs
        forced = st.reads.forced
        data = st.reads.feed(obs.data)
        st.queue.append(_Pending(obs if data == obs.data else dataclasses.replace(obs, data=data)))
        if st.reads.forced != forced:
            # what waited behind a fragment that could begin a secret grew past MAX_HOLD bytes, and the reads let it
            # go: so do the observations of the same fragments (bounded memory; the dashboard goes on)
            force_all(st.blocks)
        self._drain(st)

    def _event(self, obs: O.SSEEventSeen) -> None:
        st = self._state(obs.turn, obs.attempt)
        et = obs.event_type
        item = _Pending(obs)
        if st.group is not None and st.group.seq != obs.sse.seq:
            st.group.closed = True
            st.group = None
        sib = st.sibling
        if sib is not None and not (et == "content_block_delta" and sib.obs.sse.seq == obs.sse.seq):  # type: ignore[attr-defined]
            self._unlink(st)
            sib = None
        if (
            et == "content_block_start"
            and obs.index is not None
            and '"choices"' in obs.sse.data  # (a Chat Completions chunk: an Anthropic event is not parsed here)
            and (_fragment_of(obs.sse.data, None, obs.index) or _several(obs.sse.data))
        ):
            item.cell = _AWAITING  # (an OpenAI chunk that opens a block with text in it)
            st.sibling = item
            st.queue.append(item)
            return
        if et == "content_block_start" and obs.index is not None and '"choices"' not in obs.sse.data:
            found = _start_text(obs.sse.data)
            if found is not None:  # a text or thinking block that starts with text: its deltas go on from it
                parsed, block, name = found
                item.cell, item.tag = Fragment(block[name]), (parsed, block, name)
                st.start = (obs.index, name, item.cell)  # (its BlockOpened, next, shows the same text)
                self._push(st, (obs.index, name), item.cell)
                st.queue.append(item)
                self._drain(st)
                return
        if et == "content_block_delta":
            if sib is not None:
                sib.tag = item
            if '"choices"' in obs.sse.data and _several(obs.sse.data):  # one chat chunk, several fragments
                if st.group is None:
                    st.group = _Group(obs.sse.seq)
                item.group = st.group
                st.group.items.append(item)
            item.cell = _AWAITING  # held until its BlockDelta (next) brings its fragment, or until resolved
            st.awaiting = item
            st.queue.append(item)
            return
        elif et == "content_block_stop" and obs.index is not None:
            st.release(obs.index)
        elif et in _RELEASE_ALL:
            st.release()
        st.queue.append(item)
        self._drain(st)

    def _resolve(self, st: _Attempt) -> None:
        """The delta event waiting for its BlockDelta gets none: its fragment is parsed from its JSON."""
        item, st.awaiting = st.awaiting, None
        assert item is not None and isinstance(item.obs, O.SSEEventSeen)
        item.cell = None
        found = _fragment_of(item.obs.sse.data, None, item.obs.index)
        if found is not None:
            parsed, delta, name, index = found
            text = delta[name]
            cell = Fragment(text)
            item.cell, item.tag = cell, (parsed, delta, name)
            st.cell_seq, st.cell, st.cell_text = item.obs.sse.seq, cell, text
            self._push(st, (index, _block_field(parsed, name)), cell)  # (the key its BlockDeltas push to)
        self._link(st, item)
        self._drain(st)

    def _delta(self, obs: O.BlockDelta) -> None:
        st = self._state(obs.turn, obs.attempt)
        waiting = st.awaiting
        if waiting is not None:
            event = waiting.obs
            assert isinstance(event, O.SSEEventSeen)
            name = STREAMED_TEXT_FIELDS.get(obs.delta_type)
            if name is not None and event.sse.seq == obs.event_index and event.index == obs.index:
                # the event's own fragment, as the stream engine parsed it: no second parse of its JSON
                st.awaiting = None
                cell = Fragment(obs.fragment)
                waiting.cell, waiting.tag = cell, obs.fragment
                self._link(st, waiting)
                self._push(st, (obs.index, name), cell)
                st.queue.append(_Pending(obs, cell, True))
                self._drain(st)
                return
            self._resolve(st)
        item = _Pending(obs)
        if st.cell is not None and st.cell_seq == obs.event_index:
            item.cell = st.cell  # the fragment of the event just seen: shown as that event shows it
            item.tag = st.cell_text == obs.fragment  # (else masked on its own, once the event's is out)
        elif obs.fragment and obs.delta_type in STREAMED_TEXT_FIELDS:  # (an event this publisher did not parse)
            item.cell = Fragment(obs.fragment)
            item.tag = True
            self._push(st, (obs.index, STREAMED_TEXT_FIELDS[obs.delta_type]), item.cell)
        st.cell = None
        st.queue.append(item)
        self._drain(st)

    def _settle(self, st: _Attempt) -> None:
        """The observations of one chunk are all published (another kind came: a read, a hold, the end...): a
        block start waiting for its delta event is masked on its own, a group of delta events is complete."""
        self._unlink(st)
        if st.group is not None:
            st.group.closed = True
            st.group = None
        self._drain(st)

    @staticmethod
    def _link(st: _Attempt, delta: _Pending) -> None:
        """The delta event of a waiting content_block_start (the same chunk) knows its fragment now."""
        sib = st.sibling
        if sib is not None and sib.tag is delta:
            sib.cell = delta.cell if delta.cell is not _AWAITING else None
            st.sibling = None

    @staticmethod
    def _unlink(st: _Attempt) -> None:
        """No delta event of the same chunk came: the waiting content_block_start is masked on its own."""
        sib, st.sibling = st.sibling, None
        if sib is not None:
            linked = sib.tag.cell if isinstance(sib.tag, _Pending) else None
            sib.cell = linked if linked is not _AWAITING else None

    def _push(self, st: _Attempt, key: tuple[int, str], cell: Fragment) -> None:
        block = st.blocks.get(key)
        if block is None:
            block = st.blocks[key] = FragmentRedactor(self.keys)
        block.push(cell)
        if not block.held and not block.context:
            del st.blocks[key]

    def _end(self, key: tuple[int, int]) -> None:
        """The attempt ended: its held bytes (one more read) and fragments are published, masked."""
        self._passed.pop(key, None)
        st = self._attempts.pop(key, None)
        if st is None:
            return
        if st.awaiting is not None:
            self._resolve(st)
        self._unlink(st)
        if st.group is not None:
            st.group.closed = True
            st.group = None
        rest = st.reads.flush()
        st.release()
        st.ended = True
        if rest:
            last = st.last_read
            if last is None:
                last = O.ReadReceived(0.0, key[0], key[1], 0, 0.0, b"")
            st.queue.append(_Pending(dataclasses.replace(last, data=rest, held=False)))
        self._drain(st)

    def _drain(self, st: _Attempt) -> None:
        queue = st.queue
        reads = st.reads
        while queue:
            item = queue[0]
            if item.cell is not None and not item.cell.done:
                return
            group = item.tag.group if isinstance(item.tag, _Pending) else item.group  # (a start shows its delta's)
            if group is not None and not group.ready():
                return
            obs = item.obs
            if type(obs) is O.SSEEventSeen:
                # its offsets are moved onto the published reads: wait until its bytes are out (or nothing is held
                # as events: then the offsets are extrapolated)
                end = obs.sse.end - st.base
                if not st.ended and end > reads.in_done and reads.holding:
                    return
                obs = self._final_event(st, item)
            elif type(obs) is O.BlockOpened and item.cell is not None:  # its start's text, as its event shows it
                name = item.tag
                if obs.start.get(name) != item.cell.text:
                    obs = dataclasses.replace(obs, start={**obs.start, name: item.cell.text})
            elif type(obs) is O.BlockDelta:
                cell = item.cell
                frag = cell.text if cell is not None and item.tag else mask_text(obs.fragment, self.keys.secrets)
                if frag != obs.fragment:
                    obs = dataclasses.replace(obs, fragment=frag)
            queue.popleft()
            self._sink(obs)

    def _final_event(self, st: _Attempt, item: _Pending) -> O.SSEEventSeen:
        obs = item.obs
        assert isinstance(obs, O.SSEEventSeen)
        sse = obs.sse
        secrets = self.keys.secrets
        data, summary = sse.data, obs.summary
        src = item.tag if isinstance(item.tag, _Pending) else item  # a chunk's start event shows its delta's chunk
        cell = item.cell
        group = src.group
        if group is not None and any(g.cell is not None and g.cell.changed for g in group.items):
            data = _group_data(data, group)
            cell = None  # (its summary: its own fragment's, masked below)
            if src is item and item.cell is not None and item.cell.changed:
                dtype = "input_json_delta" if obs.summary.startswith("`") else "text_delta"
                summary = fragment_summary(dtype, item.cell.text)
        if cell is not None and cell.changed:
            tag = src.tag
            if isinstance(tag, str):  # the fragment came with its BlockDelta: the event's JSON is parsed only now
                found = _fragment_of(data, tag, getattr(src.obs, "index", None))
                tag = found[:3] if found is not None and found[1][found[2]] == tag else None
            if tag is not None:
                parsed, delta, text_field = tag
                delta[text_field] = cell.text
                data = exactjson.dumps(parsed).decode("utf-8")
                dtype = str(delta.get("type"))
                if dtype not in STREAMED_TEXT_FIELDS:  # an OpenAI fragment: tool arguments are JSON text
                    dtype = "input_json_delta" if text_field == "arguments" or "arguments" in dtype else "text_delta"
                if src is item and obs.event_type != "content_block_start":  # (a start's summary is not a fragment's)
                    summary = fragment_summary(dtype, cell.text)
        data = mask_json_text(data, secrets)
        summary = mask_text(summary, secrets)
        name, eid = mask_text(sse.event, secrets), mask_text(sse.id, secrets)
        start, end = st.offset(sse.start), st.offset(sse.end)
        same = data == sse.data and summary == obs.summary and name == sse.event and eid == sse.id
        if same and start == sse.start and end == sse.end:
            return obs
        new = dataclasses.replace(sse, event=name, data=data, id=eid, start=start, end=end)
        return dataclasses.replace(obs, sse=new, summary=summary)


def _block_field(parsed: dict[str, Any], name: str) -> str:
    """The text field of the stream engine's deltas for a fragment in field ``name`` of the event ``parsed``:
    "text", "thinking" or "partial_json" (an Anthropic delta's own; an OpenAI text as the engine streams it:
    stream/openai_common.py ``_fragment``), so that a fragment parsed here joins the same text as the block's
    BlockDeltas."""
    if name in _BLOCK_FIELDS:
        return name
    if name == "delta":  # a Responses delta event: its kind
        spec = RESPONSES_DELTAS.get(str(parsed.get("type")))
        kind = spec[0] if spec is not None else "text"
    else:  # a chat chunk's field (tool call arguments: "arguments")
        kind = "tool_use" if name == "arguments" else CHAT_TEXT_KINDS.get(name, "text")
    return "partial_json" if kind == "tool_use" else "thinking" if kind == "thinking" else "text"


_BLOCK_FIELDS = frozenset(STREAMED_TEXT_FIELDS.values())


def _start_text(data: str) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """(parsed event, its content block, "text" or "thinking") of an Anthropic content_block_start whose block
    starts with text (``core.wire.start_text_field``: the engine joins its deltas to it); else None."""
    try:
        parsed = exactjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    block = parsed.get("content_block") if isinstance(parsed, dict) else None
    name = start_text_field(block)
    return (parsed, block, name) if name is not None else None  # type: ignore[return-value]


def _several(data: str) -> bool:
    """Whether a Chat Completions chunk may stream more than one text fragment (a cheap look at its keys, then
    ``openai_fragments``)."""
    n = sum(data.count(f'"{k}":"') for k in ("arguments", "content", "reasoning_content", "reasoning", "refusal"))
    if n < 2:
        return False
    try:
        parsed = exactjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and len(openai_fragments(parsed)) > 1


def _group_data(data: str, group: _Group) -> str:
    """The chunk's JSON with the fragments of every delta event of its group as they are shown (masked)."""
    try:
        parsed = exactjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if not isinstance(parsed, dict):
        return data
    frags = openai_fragments(parsed)
    used: set[int] = set()
    for g in group.items:
        if g.cell is None or not g.cell.changed or not isinstance(g.tag, str):
            continue
        for n, (_key, holder, name) in enumerate(frags):
            if n not in used and holder[name] == g.tag:
                holder[name] = g.cell.text
                used.add(n)
                break
    return exactjson.dumps(parsed).decode("utf-8")


_AWAITING = Fragment("")
# what the stream engine publishes for one SSE event (a chunk): a chunk's start, delta and group wait only for these
_CHUNK_KINDS = frozenset(
    {O.SSEEventSeen, O.BlockDelta, O.BlockOpened}
)  # never done: the queue waits behind a delta event until its fragment is known


def _whole(obs: O.Observation, keys: SecretSet) -> O.Observation:
    """``obs`` masked as whole values: a read's bytes as bytes (raw and JSON-escaped forms), every other field
    (``Observation.redacted``)."""
    if type(obs) is O.ReadReceived:
        data = mask_bytes(obs.data, keys.secrets)
        return obs if data == obs.data else dataclasses.replace(obs, data=data)
    return obs.redacted(keys.secrets) if keys.secrets else obs


def _but_body(obs: O.AttemptStarted, secrets: list[str]) -> O.AttemptStarted:
    """``obs.redacted(secrets)`` of an AttemptStarted whose body is known to hold no secret (``vouch``)."""
    shell = dataclasses.replace(obs, body={})
    masked = shell.redacted(secrets)
    if masked is shell:
        return obs
    assert isinstance(masked, O.AttemptStarted)
    return dataclasses.replace(masked, body=obs.body)


def _attempt_of(obs: O.Observation) -> tuple[int, int] | None:
    turn = getattr(obs, "turn", None)
    attempt = getattr(obs, "attempt", None)
    return (turn, attempt) if isinstance(turn, int) and isinstance(attempt, int) else None


def _fragment_of(
    data: str, want: str | None = None, block: int | None = None
) -> tuple[dict[str, Any], dict[str, Any], str, int] | None:
    """(parsed event, the object holding its fragment, the text field, block index) of a delta event that streams
    text. An OpenAI chunk or Responses event (``core.redaction.openai_fragments``) may hold several: the one whose
    text is ``want`` (the BlockDelta's fragment), else its only one; its block is the event's (``block``)."""
    try:
        parsed = exactjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    delta = parsed.get("delta")
    index = parsed.get("index")
    if not isinstance(delta, dict) or not isinstance(index, int) or isinstance(index, bool):
        if block is None:
            return None
        frags = openai_fragments(parsed)
        if want is not None:
            frags = [f for f in frags if f[1][f[2]] == want]
        if not frags or (want is None and len(frags) > 1):
            return None
        _key, holder, field_name = frags[0]
        return parsed, holder, field_name, block
    name = STREAMED_TEXT_FIELDS.get(str(delta.get("type")))
    if name is None or not isinstance(delta.get(name), str):
        return None
    return parsed, delta, name, index

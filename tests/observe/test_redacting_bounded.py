"""The hold behind a fragment that could begin a key is bounded (core.redaction.MAX_HOLD): a block whose text ends
with a key's first characters, followed by other blocks or pings for ever, used to hold every later event in memory
(the proxy grew by 475 MB for 187 MB forwarded) and show nothing of them until the attempt ended. Past the bound the
held fragments are let go with what could begin a key masked, and a key they began is still masked in what follows:
no key, and no key's beginning, reaches the recording's bytes or the dashboard."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core import redaction
from inspector.core.redaction import REDACTED, Fragment, FragmentRedactor, SecretSet, StreamRedactor, secret_spans
from inspector.observe import observations as O
from inspector.observe.redacting import RedactingPublisher
from inspector.stream.sse import SSEDecoder
from inspector.testing.hyp import examples
from inspector.testing.secrets import stream_observations
from inspector.testing.streamgen import (
    block_stop,
    json_delta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
    tool_start,
)

KEY = "sk-ant-canary-0123456789abcdef"


def _joined(frags: list[Fragment]) -> str:
    return "".join(f.text for f in frags)


def test_force_masks_what_could_begin_a_key_and_the_rest_of_that_key_later() -> None:
    block = FragmentRedactor(SecretSet([KEY]))
    out = block.push(Fragment("the answer is " + KEY[:9]))
    assert out == [] and block.held
    forced = block.force()
    assert _joined(forced) == "the answer is " + REDACTED and all(f.done for f in forced)
    assert block.context == KEY[:9] and not block.held
    later = block.push(Fragment(KEY[9:] + " and more"))
    assert _joined(later) == " and more"  # (the key's rest is gone: its beginning was shown as [redacted])
    assert block.context == ""


def test_force_of_a_text_that_was_no_key_masks_only_its_ambiguous_end() -> None:
    block = FragmentRedactor(SecretSet([KEY]))
    block.push(Fragment("Paris"))
    assert _joined(block.force()) == "Pari" + REDACTED
    assert _joined(block.push(Fragment("ian weather"))) == "ian weather" and block.context == ""


@given(
    before=st.text("abks- ", max_size=12),
    after=st.text("abks- ", max_size=12),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    forces=st.sets(st.integers(0, 8), max_size=4),
)
@settings(max_examples=examples(120), deadline=None)
def test_forced_releases_never_let_a_key_or_its_beginning_through(
    before: str, after: str, cuts: list[int], forces: set[int]
) -> None:
    """Any split of a text holding the key, forced at any points: the fragments shown, joined, hold no key, and the
    text up to where a key could begin is shown as it came."""
    text = before + KEY + after
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    block = FragmentRedactor(SecretSet([KEY]))
    shown: list[Fragment] = []
    for i, piece in enumerate(pieces):
        shown += block.push(Fragment(piece))
        if i in forces:
            shown += block.force()
    shown += block.release()
    joined = _joined(shown)
    assert not secret_spans(joined, [KEY])
    # (a forced release masks a key's beginning, and the rest of a key it began goes: no 8 characters of it shown)
    assert not any(KEY[i : i + 8] in joined for i in range(len(KEY) - 7))
    assert joined.startswith(before[: len(before) - len(KEY)] if len(before) > len(KEY) else "")


def _interleaved(n_pings: int) -> list[bytes]:
    """Block 0's text ends with the key's first characters; block 1 then streams for long; block 0 goes on with the
    rest of the key."""
    head = sse(message_start(), text_start(0), text_delta(0, "ok " + KEY[:9]), tool_start(1))
    reads = [head]
    reads += [sse(json_delta(1, '{"n": "' if i == 0 else "x" * 40)) for i in range(n_pings)]
    reads.append(sse(json_delta(1, '"}'), block_stop(1), text_delta(0, KEY[9:] + " done"), block_stop(0)))
    reads.append(sse(message_delta("end_turn"), message_stop()))
    return reads


def test_the_recording_bytes_are_bounded_and_hold_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "MAX_HOLD", 4096)
    reads = _interleaved(400)
    red = StreamRedactor([KEY])
    out = b""
    for data in reads[:-2]:
        out += red.feed(data)
        assert red._queued <= 4096 + max(len(r) for r in reads)
    assert red.forced >= 1 and len(out) > sum(map(len, reads[:-2])) - 8192
    for data in reads[-2:]:
        out += red.feed(data)
    out += red.flush()
    text = "".join(e.data for e in SSEDecoder().feed(out))  # every event's JSON: the key is in none, nor its beginning
    assert not any(KEY[i : i + 8] in text for i in range(len(KEY) - 7)) and REDACTED in text


def test_the_dashboard_goes_on_and_shows_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "MAX_HOLD", 4096)
    observations = stream_observations(_interleaved(400))
    published: list[O.Observation] = []
    pub = RedactingPublisher(published.append, [KEY])
    ended_at = next(i for i, o in enumerate(observations) if isinstance(o, O.BlockClosed) and o.index == 1)
    for obs in observations[:ended_at]:
        pub.publish(obs)
    # before block 0 goes on: block 1's fragments are out (not all held behind block 0's "sk-ant-ca")
    shown = [o for o in published if isinstance(o, O.BlockDelta) and o.index == 1]
    assert len(shown) > 300
    for obs in observations[ended_at:]:
        pub.publish(obs)
    pub.close()
    assert [type(o) for o in published] == [type(o) for o in observations]
    for o in published:
        blob = str(o.to_json())
        assert not any(KEY[i : i + 8] in blob for i in range(len(KEY) - 7)), o
    text0 = "".join(o.fragment for o in published if isinstance(o, O.BlockDelta) and o.index == 0)
    assert text0 == "ok " + REDACTED + " done"

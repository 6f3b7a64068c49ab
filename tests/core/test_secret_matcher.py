"""One matcher for all the secrets a process knows (core/secretindex.py, ``SecretMatcher``): masking a text costs
the same with 300 keys learned as with one (a proxy that had learned 300 keys spent +1.3 ms more on every request:
every string was scanned once per key), and finds exactly what the per-key search found. The per-key search is kept
here as the reference (``_ref_*``, the code before), and compared on texts with the secrets as they are, escaped,
split, overlapping, nested in one another, with more kinds of secrets than the index finds one by one."""

from __future__ import annotations

import json
import secrets as pyrandom
from collections.abc import Iterable

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.core import redaction as R
from inspector.core.redaction import (
    MAX_SECRETS,
    REDACTED,
    SecretSet,
    json_text_clean,
    mask_bytes,
    mask_text,
    matcher_of,
    secret_spans,
)
from inspector.core.secretindex import FIND_ANCHORS, WordIndex

# --- the reference: one search per secret (the code before the matcher) ------------------------------------------


def _occurrences(text: str, secret: str) -> Iterable[int]:
    i = text.find(secret)
    while i >= 0:
        yield i
        i = text.find(secret, i + 1)


def _ref_spans(text: str, secrets: list[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        spans.extend((i, i + len(secret)) for i in _occurrences(text, secret))
    if "\\" in text and any(s in R._unescape(text) for s in secrets):
        plain, starts, ends = R._unescape_map(text)
        for secret in secrets:
            spans.extend((starts[i], ends[i + len(secret) - 1]) for i in _occurrences(plain, secret))
    return R._merge(spans)


def _ref_hold_from(text: str, secrets: list[str]) -> int:
    n = len(text)
    chars = frozenset("".join(secrets)) | R._ESCAPE_CHARS
    if not n or text[-1] not in chars:
        return n
    window = max(len(s) for s in secrets) * 6
    if "\\" not in text[-window:]:
        best = n
        for secret in secrets:
            first = secret[0]
            p = text.find(first, max(0, n - len(secret) + 1))
            while 0 <= p < best:
                if secret.startswith(text[p:]):
                    best = p
                    break
                p = text.find(first, p + 1)
        return best
    first_chars = {s[0] for s in secrets} | {"\\"}
    for p in range(max(0, n - window), n):
        if text[p] not in first_chars:
            continue
        tail = text[p:]
        if any(s.startswith(tail) for s in secrets):
            return p
        plain = R._unescape(R._PARTIAL_ESCAPE.sub("", tail))
        if any(s.startswith(plain) for s in secrets) and (plain or tail.startswith("\\")):
            return p
    return n


def _ref_text_clean(text: bytes, secrets: list[str]) -> bool:
    if any(s.encode() in text for s in secrets):
        return False
    if b"\\\\" not in text:
        return True
    once = R._unescape(text.decode())
    twice = R._unescape(once)
    return not any(s in once or s in twice for s in secrets)


def _u(s: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in s)


# --- the property: the matcher finds what the per-secret search finds ---------------------------------------------

# secrets over a small alphabet share beginnings, overlap and nest; a few kinds of first characters make more
# anchors than the index finds one by one (FIND_ANCHORS), so both ways of finding them are checked
_alphabet = st.sampled_from("ab-k/\u00e9")
_word = st.text(_alphabet, min_size=1, max_size=10)


@st.composite
def _secrets(draw: st.DrawFn) -> list[str]:
    n = draw(st.integers(1, 40))
    heads = draw(st.lists(st.text(st.sampled_from("sekXYZ"), min_size=3, max_size=3), min_size=1, max_size=30))
    out = [draw(st.sampled_from(heads)) + draw(st.text(_alphabet, min_size=5, max_size=12)) for _ in range(n)]
    if draw(st.booleans()):  # a secret that begins another one
        s = draw(st.sampled_from(out))
        out.append(s + draw(st.text(_alphabet, min_size=1, max_size=4)))
    return out


@st.composite
def _text_with(draw: st.DrawFn, secrets: list[str]) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        s = draw(st.sampled_from(secrets))
        form = draw(
            st.sampled_from(
                [s, _u(s), s[: len(s) // 2] + _u(s[len(s) // 2 :]), json.dumps(s)[1:-1], "\\" + s, "\\\\" + _u(s)]
            )
        )
        parts += [draw(_word), form, draw(st.text(st.sampled_from('\\u0"n/ab'), max_size=6))]
    return "".join(parts) + draw(st.sampled_from(["", secrets[0][:3], "\\u00", "\\", _u(secrets[0])[:9]]))


@given(st.data())
def test_spans_and_masking_are_the_per_secret_search(data: st.DataObject) -> None:
    secrets = data.draw(_secrets())
    text = data.draw(_text_with(secrets))
    ref = _ref_spans(text, secrets)
    assert secret_spans(text, secrets) == ref
    assert mask_text(text, secrets) == (R._apply(text, ref) if ref else text)
    usable = R.usable_secrets(secrets)
    if usable:
        assert SecretSet(secrets).hold_from(text) == _ref_hold_from(text, usable)


@given(st.data())
def test_a_text_clean_for_the_matcher_is_clean_for_the_per_secret_search(data: st.DataObject) -> None:
    secrets = [s for s in data.draw(_secrets()) if '"' not in s and "\\" not in s]
    value = [data.draw(_text_with(secrets)) for _ in range(3)]
    text = orjson.dumps([value, json.dumps(value)])  # (a JSON text in a string: its escapes escaped once more)
    if json_text_clean(text, secrets):
        assert _ref_text_clean(text, secrets)
    if any(s.encode() in text for s in secrets):
        assert not json_text_clean(text, secrets)


# escapes of every kind, runs of backslashes, hex digits and "u"s: a window of decoded text (SecretMatcher.escaped_spans)
# can begin or end anywhere among them, far from the text's ends
_filler = st.lists(
    st.sampled_from(["\\", "\\\\", "\\u0061", "\\u006B", "\\n", "\\/", "u", "0", "6b", "a", "k", "-", "x" * 9]),
    max_size=120,
).map("".join)


@given(st.data())
def test_decoding_around_escapes_finds_what_decoding_the_whole_text_finds(data: st.DataObject) -> None:
    secrets = data.draw(st.lists(st.text(st.sampled_from("ak-/6"), min_size=8, max_size=10), min_size=1, max_size=3))
    parts = [data.draw(_filler)]
    for _ in range(data.draw(st.integers(0, 3))):
        s = data.draw(st.sampled_from(secrets))
        cut = data.draw(st.integers(0, len(s)))
        parts += [s[:cut] + _u(s[cut:]), data.draw(_filler)]
    text = "".join(parts)
    assert secret_spans(text, secrets) == _ref_spans(text, secrets)
    doc = orjson.dumps({"a": [text, json.dumps(text)]})
    if json_text_clean(doc, secrets):
        assert _ref_text_clean(doc, secrets)


def test_a_large_text_of_code_is_not_decoded_where_no_escape_can_make_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The precheck and the masking of a request body of code (a backslash every few characters, 4 MiB) decode only
    what is around an escape that decodes to one of the secrets' characters: here nothing. The whole text was
    decoded twice (1.3 s for 16 MiB, on the proxy's event loop)."""
    code = 'def f(x):\n    return re.sub(r"\\s+", "\\n", x)  # "quoted" \\ C:\\Users\n' * 60_000
    key = "sk-ant-api03-stall-0123456789abcdefghij"
    decoded: list[int] = []
    real = R._unescape

    def counted(text: str) -> str:
        decoded.append(len(text))
        return real(text)

    monkeypatch.setattr(R, "_unescape", counted)
    value = {"messages": [{"role": "user", "content": code}]}
    assert R.json_clean(value, [key]) and R.redact(value, [key]) is value
    assert mask_text(code, [key]) is code
    assert sum(decoded) == 0
    hidden = code[: len(code) // 2] + _u(key) + code[len(code) // 2 :]  # (one escaped key: decoded around it only)
    assert mask_text(hidden, [key]) == code[: len(code) // 2] + REDACTED + code[len(code) // 2 :]
    assert 0 < sum(decoded) < 10_000


def test_many_kinds_of_secrets_are_found_by_one_pattern() -> None:
    secrets = [f"{a}{b}{c}-secret-{a}{b}{c}" for a in "xyz" for b in "pq" for c in "mnop"]
    index = WordIndex(secrets)
    assert len(index.anchors) > FIND_ANCHORS
    text = "ab " + " ".join(secrets[::3]) + " xpm-secret-xpmm"
    assert secret_spans(text, secrets) == _ref_spans(text, secrets)


def test_bytes_are_masked_by_their_forms_overlapping_ones_as_one() -> None:
    key = "sk-ant-bytes-\u00e9-0123456789"
    data = b"\xff not utf-8 " + key.encode() + b" " + orjson.dumps(key)[1:-1] + b" " + b"ab" * 3
    out = mask_bytes(data, [key, "ababab"])
    assert key.encode() not in out and out.count(REDACTED.encode()) == 3
    assert mask_bytes(b"\xff" + b"aaaaaaaaaaaa", ["aaaaaaaa"]) == b"\xff" + REDACTED.encode()


# --- the cost: one scan of a text whatever the number of secrets ---------------------------------------------------


class _Counting(str):
    """A text that counts the searches made in it (``in``, ``find``): the per-secret search made one per secret."""

    scans = 0

    def __contains__(self, other: object) -> bool:
        _Counting.scans += 1
        return super().__contains__(other)  # type: ignore[operator]

    def find(self, *args: object) -> int:
        _Counting.scans += 1
        return super().find(*args)  # type: ignore[arg-type]


def _scans(secrets: list[str], text: str) -> int:
    keys = SecretSet(secrets)
    _Counting.scans = 0
    mask_text(_Counting(text), keys.secrets)
    secret_spans(_Counting(text), keys.secrets)
    keys.hold_from(_Counting(text))
    return _Counting.scans


@pytest.mark.parametrize("text", ["an answer with no key in it, ending in sk", "a key: sk-ant-api03-K0 and \\u0073k"])
def test_masking_scans_a_text_as_often_with_300_keys_as_with_one(text: str) -> None:
    keys = ["sk-ant-api03-" + pyrandom.token_urlsafe(40) for _ in range(300)]
    one, many = _scans(keys[:1], text), _scans(keys, text)
    assert many == one  # (the per-secret search: 300 times as many)


def test_a_secret_set_finds_its_matcher_and_a_list_changed_in_place_is_read_as_it_is() -> None:
    keys = SecretSet(["sk-ant-first-0123456789"])
    assert matcher_of(keys.secrets) is keys.matcher is matcher_of(keys)
    keys.add("sk-ant-second-0123456789")
    assert matcher_of(keys.secrets) is keys.matcher
    assert mask_text("sk-ant-second-0123456789", keys.secrets) == REDACTED
    keys.secrets.append("a-third-one-0123")  # (not through the set: the list is read as it is)
    assert mask_text("a-third-one-0123", keys.secrets) == REDACTED
    keys.secrets[:] = []
    assert mask_text("sk-ant-second-0123456789", keys.secrets) == "sk-ant-second-0123456789"


# --- bounded: the least recently seen secret is forgotten past MAX_SECRETS ----------------------------------------


def test_a_secret_set_keeps_the_most_recently_seen_secrets_and_the_pinned_ones() -> None:
    keys = SecretSet(["pinned-at-start-0123"], limit=4)
    keys.add("pinned-later-01234567", pin=True)
    keys.add("old-one-0123456789")
    keys.add("kept-one-0123456789")
    keys.add("new-one-0123456789")  # 5 > 4: the least recently seen that is not pinned goes
    assert keys.forgotten == 1 and "old-one-0123456789" not in keys.secrets
    keys.add("kept-one-0123456789")  # seen again: the last to go
    keys.add("newer-one-0123456789")
    assert keys.forgotten == 2 and "new-one-0123456789" not in keys.secrets
    kept = {"pinned-at-start-0123", "pinned-later-01234567", "kept-one-0123456789", "newer-one-0123456789"}
    assert set(keys.secrets) == kept
    assert mask_text("old-one-0123456789 kept-one-0123456789", keys.secrets) == "old-one-0123456789 " + REDACTED
    assert keys.add("old-one-0123456789") == ["old-one-0123456789"]  # sent again: masked again
    assert mask_text("old-one-0123456789", keys.secrets) == REDACTED
    assert MAX_SECRETS == SecretSet().limit


def test_a_secret_in_use_is_not_forgotten_until_it_is_released() -> None:
    """An exchange's key (``use=True``) is kept past the limit while the exchange lasts, others go instead; each use
    wants its own release; released, the set comes back to its limit, the least recently seen first."""
    keys = SecretSet(limit=2)
    keys.add("in-use-key-0123456789", use=True)
    keys.add("in-use-key-0123456789", use=True)  # (a second exchange with the same key)
    for c in "abc":
        keys.add(f"other-key-{c}-0123456789")
    assert set(keys.secrets) == {"in-use-key-0123456789", "other-key-c-0123456789"} and keys.forgotten == 2
    keys.release("in-use-key-0123456789")  # one exchange is over, the other is not
    keys.add("other-key-d-0123456789")
    assert set(keys.secrets) == {"in-use-key-0123456789", "other-key-d-0123456789"}
    assert mask_text("in-use-key-0123456789", keys.secrets) == REDACTED
    keys.release("in-use-key-0123456789")
    keys.add("other-key-e-0123456789")  # now the least recently seen goes, the key that was in use
    assert set(keys.secrets) == {"other-key-d-0123456789", "other-key-e-0123456789"}
    assert matcher_of(keys.secrets) is keys.matcher and mask_text("in-use-key-0123456789", keys.secrets) != REDACTED


def test_releasing_brings_a_set_over_its_limit_back_to_it() -> None:
    keys = SecretSet(limit=1)
    for c in "abc":
        keys.add(f"in-use-key-{c}-0123456789", use=True)
    assert len(keys.secrets) == 3 and keys.forgotten == 0  # (over the limit: all three in use)
    keys.release(["in-use-key-a-0123456789", "in-use-key-b-0123456789"])
    assert keys.secrets == ["in-use-key-c-0123456789"] and keys.forgotten == 2
    assert matcher_of(keys.secrets) is keys.matcher and len(keys.matcher) == 1
    keys.release("never-added-0123456789")  # (a release of what was not in use: nothing changes)
    assert keys.secrets == ["in-use-key-c-0123456789"]


@given(
    st.lists(st.tuples(st.sampled_from(["add", "use", "release"]), st.integers(0, 5)), max_size=40),
    st.integers(1, 4),
)
def test_a_secret_set_never_forgets_a_pinned_or_in_use_secret(ops: list[tuple[str, int]], limit: int) -> None:
    """Whatever the order of adds, uses and releases: every pinned secret and every one in use is kept; the set
    keeps at most ``limit`` secrets besides those in use; a secret is masked exactly when it is kept."""
    names = [f"secret-{i}-0123456789abcdef" for i in range(6)]
    keys = SecretSet(["pinned-0123456789abcdef"], limit=limit)
    uses = dict.fromkeys(names, 0)
    for op, i in ops:
        if op == "add":
            keys.add(names[i])
        elif op == "use":
            keys.add(names[i], use=True)
            uses[names[i]] += 1
        elif uses[names[i]]:
            keys.release(names[i])
            uses[names[i]] -= 1
        in_use = {n for n, k in uses.items() if k}
        kept = set(keys.secrets)
        assert "pinned-0123456789abcdef" in kept and in_use <= kept
        assert len(kept) <= max(limit, len(in_use) + 1)  # (+ the pinned one)
        for n in names:
            assert (mask_text(n, keys.secrets) == REDACTED) == (n in kept)


def test_a_secret_set_learns_from_two_threads_at_once() -> None:
    """`watch` runs its proxy on a thread of its own, which learns every client's key into the process's set while
    the main thread's output guard may learn too: a change iterated the set while the other thread changed it
    (RuntimeError: dictionary changed size during iteration)."""
    import sys
    import threading

    keys = SecretSet(limit=300)
    errors: list[BaseException] = []

    def learn(tag: str) -> None:
        try:
            for i in range(3000):
                keys.add(f"sk-ant-api03-race-{tag}-{i:05d}-0123456789")
        except Exception as e:  # noqa: BLE001 (what the other thread's change made this one raise)
            errors.append(e)

    threads = [threading.Thread(target=learn, args=(t,)) for t in "ab"]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (the threads take turns as often as they can)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(keys.secrets) == 300 and keys.forgotten == 5700
    assert matcher_of(keys.secrets) is keys.matcher and len(keys.matcher) == 300

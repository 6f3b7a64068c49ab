"""One index for a set of words (the secrets a process masks, or their byte forms): every occurrence of any of them
in a text, at a cost that does not grow with the number of words.

A per-word loop (``for s in secrets: s in text``) costs one scan of the text per word: with 300 keys learned, every
string the proxy publishes was scanned 300 times (+1.3 ms per request, linear in the keys). Here:

- the places where a word may begin are found by its *anchor*, its first ``ANCHOR`` characters: keys of one kind
  share it (``sk-``, ``eyJ``, ``Bea``...), so there are few anchors however many keys, each found in C
  (``str.find``, memchr speed); past ``FIND_ANCHORS`` distinct anchors, one compiled pattern of all of them (a
  trie, so that the pattern engine tests each position once, not once per anchor);
- at such a place, the longest word that begins there is found in the sorted words by bisection (``longest_at``):
  O(log n) comparisons, however many words share the anchor;
- ``is_prefix`` / ``is_proper_prefix``: whether a text is the beginning of a word (the hold-back at the end of a
  stream), by bisection too.

Generic over ``str`` and ``bytes`` (the same code: slicing, ``find``, ``startswith`` and ordering behave alike).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from typing import AnyStr, Generic

__all__ = ["ANCHOR", "FIND_ANCHORS", "WordIndex", "trie_pattern"]

ANCHOR = 3  # characters of a word that find where it may begin
FIND_ANCHORS = 16  # up to this many distinct anchors: one find each; more: one compiled pattern for all of them


def trie_pattern(words: Iterable[AnyStr]) -> AnyStr:
    """A regular expression matching exactly the (non-empty, distinct) ``words``, factored as a trie (``ab(?:c|d)``)
    so that the engine tries the alternatives of one branch point, not every word, at each position. The longest
    word wins at a position (a word that is a prefix of another makes the rest optional, greedy)."""
    ws = sorted({w for w in words if w})
    if not ws:
        raise ValueError("no words")
    return _trie(ws)


def _trie(ws: list[AnyStr]) -> AnyStr:
    """The pattern of sorted, distinct words (one may be empty: it comes first, and makes the rest optional)."""
    empty = ws[0][:0]
    optional = not ws[0]
    ws = ws[1:] if optional else ws
    alts: list[AnyStr] = []
    i = 0
    while i < len(ws):
        head = ws[i][:1]
        j = i
        while j < len(ws) and ws[j][:1] == head:
            j += 1
        group = [w[1:] for w in ws[i:j]]
        alts.append(re.escape(head) + (_trie(group) if any(group) else empty))
        i = j
    if isinstance(empty, bytes):
        body: AnyStr = alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
        return b"(?:" + body + b")?" if optional else body
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return "(?:" + body + ")?" if optional else body


class WordIndex(Generic[AnyStr]):
    """The (non-empty) words, sorted, with their anchors. Immutable: a new set of words is a new index (built in
    O(n log n), in C but for one pass over the words)."""

    __slots__ = ("words", "max", "min", "anchors", "_pattern")

    def __init__(self, words: Iterable[AnyStr]) -> None:
        ws = sorted({w for w in words if w})
        self.words: list[AnyStr] = ws
        self.max = max(map(len, ws), default=0)
        self.min = min(map(len, ws), default=0)
        heads = sorted({w[:ANCHOR] for w in ws})
        # an anchor that begins with a shorter one (a word shorter than ANCHOR) is found by that one already
        short = [a for a in heads if len(a) < ANCHOR]
        self.anchors: list[AnyStr] = (
            [a for a in heads if not any(a != b and a.startswith(b) for b in short)] if short else heads
        )
        self._pattern: re.Pattern[AnyStr] | None = None

    def __bool__(self) -> bool:
        return bool(self.words)

    def __len__(self) -> int:
        return len(self.words)

    def starts(self, text: AnyStr) -> Iterator[int]:
        """Every position of ``text`` where an anchor occurs (overlapping ones too; not in one global order)."""
        anchors = self.anchors
        if len(anchors) <= FIND_ANCHORS:
            for a in anchors:
                p = text.find(a)
                while p >= 0:
                    yield p
                    p = text.find(a, p + 1)
            return
        pattern = self._pattern
        if pattern is None:
            pattern = self._pattern = re.compile(trie_pattern(anchors))
        m = pattern.search(text)
        while m is not None:
            p = m.start()
            yield p
            m = pattern.search(text, p + 1)

    def longest_at(self, text: AnyStr, p: int) -> int:
        """The length of the longest word that ``text`` holds at ``p`` (0: none).

        The words that are prefixes of ``t = text[p:p + max]`` sort before it; the largest word ``<= t`` either is
        one, or shares ``L`` characters with ``t`` and every prefix of ``t`` in between begins those ``L``: the next
        candidate is the largest word ``<= t[:L]``. Each step moves down the sorted list; the first prefix found is
        the longest."""
        t = text[p : p + self.max]
        ws = self.words
        j = bisect_right(ws, t) - 1
        while j >= 0:
            w = ws[j]
            if t.startswith(w):
                return len(w)
            n = _common(w, t)
            if n < self.min:
                return 0
            j = bisect_right(ws, t[:n], 0, j) - 1
        return 0

    def spans(self, text: AnyStr) -> list[tuple[int, int]]:
        """``(start, end)`` of every position where a word begins (the longest there), in no particular order:
        overlapping occurrences too, as a per-word search finds them."""
        out = []
        longest = self.longest_at
        for p in self.starts(text):
            n = longest(text, p)
            if n:
                out.append((p, p + n))
        return out

    def contains(self, text: AnyStr) -> bool:
        """Whether any word occurs in ``text``."""
        longest = self.longest_at
        return any(longest(text, p) for p in self.starts(text))

    def is_prefix(self, text: AnyStr) -> bool:
        """Whether some word begins with ``text`` (equal to it included; "" is a prefix of any word)."""
        ws = self.words
        i = bisect_left(ws, text)
        return i < len(ws) and ws[i].startswith(text)

    def is_proper_prefix(self, text: AnyStr) -> bool:
        """Whether some word longer than ``text`` begins with it."""
        ws = self.words
        i = bisect_right(ws, text)
        return i < len(ws) and ws[i].startswith(text)


def _common(a: AnyStr, b: AnyStr) -> int:
    """The length of the common beginning of ``a`` and ``b`` (by bisection on slices: comparisons in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo

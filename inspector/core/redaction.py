"""Redaction, in one place: which headers are credentials, how long a secret must be to be masked, how headers are
cleaned before they are recorded, shown or logged, and how known secrets are masked in any value.

Credential headers are removed, not masked. A known secret (an API key) is replaced by ``[redacted]`` wherever it
occurs: in strings and bytes, through dicts, lists and tuples. Secrets shorter than ``MIN_SECRET_LENGTH`` are never
masked (they would match ordinary JSON text and wreck a file); they are still never written, because the headers
that carry them are dropped. For secrets split across network reads or deltas, or escaped in JSON, see
``StreamRedactor`` (bytes), ``FragmentRedactor`` (the fragments of one streamed text) and docs/secrets.md.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any, TextIO
from urllib.parse import urlsplit

import orjson

from inspector.core import exactjson
from inspector.core.secretindex import WordIndex, trie_pattern
from inspector.core.wire import (
    CHAT_TEXT_KINDS,
    RESPONSES_DELTAS,
    SSE_BLANK_LINE,
    SSE_BOM,
    chat_call_slot,
    start_text_field,
)

__all__ = [
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_NAME_WORDS",
    "CREDENTIAL_QUERY_PARAMS",
    "KEY_SHAPE",
    "NOT_CREDENTIAL_NAMES",
    "ENVIRONMENT_KEYS",
    "PROCESS_SECRETS",
    "MIN_SECRET_LENGTH",
    "OutputGuard",
    "REDACTED",
    "STREAMED_TEXT_FIELDS",
    "Fragment",
    "FragmentRedactor",
    "SecretSet",
    "StreamRedactor",
    "auth_values",
    "clean_headers",
    "credential_values",
    "env_secrets",
    "is_credential",
    "json_clean",
    "json_text_clean",
    "learn",
    "mask_bytes",
    "mask_known",
    "mask_json_text",
    "mask_text",
    "openai_ends",
    "openai_fragments",
    "redact",
    "secret_spans",
    "usable_secrets",
]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "x-api-key", "anthropic-api-key", "api-key", "cookie", "set-cookie", "proxy-authorization"}
)
CREDENTIAL_QUERY_PARAMS = frozenset({"api_key", "api-key", "apikey", "key", "access_token"})


def _text(value: Any) -> str:
    if type(value) is str:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("latin-1")  # the HTTP header charset
    return str(value)


# --- which headers and parameters are credentials ------------------------------------------------------------------
#
# A header (or a query parameter) is a credential when
# - its name is a known one (CREDENTIAL_HEADERS, CREDENTIAL_QUERY_PARAMS), or
# - its name holds a credential word (CREDENTIAL_NAME_WORDS: ``helicone-auth``, ``cf-aig-authorization``,
#   ``x-portkey-api-key``, ``x-goog-api-key``, ``x-auth-token``...), unless the name is a known harmless one
#   (NOT_CREDENTIAL_NAMES: ``www-authenticate``, ``idempotency-key``...), or the only word it holds is ``token`` and
#   its value is a count (at most 12 digits), a time or a duration (``anthropic-ratelimit-tokens-remaining: 400000``,
#   ``x-ratelimit-reset-tokens: 6m0s``, ``x-max-tokens: 100``: counts, not secrets, and they stay visible), or
# - its value is shaped like a key (KEY_SHAPE: ``sk-ant-...``, ``sk-proj-...``, ``sk-...``, a JWT), after an
#   optional auth scheme, whatever its name.
# ``x-stainless-*``, ``anthropic-version``, ``anthropic-beta``, ``content-type``... hold no credential word and stay.

CREDENTIAL_NAME_WORDS = ("auth", "key", "token", "secret", "password", "passwd", "credential", "cookie", "signature")
NOT_CREDENTIAL_NAMES = frozenset(
    {
        "www-authenticate",  # a challenge (scheme, realm), not a credential
        "proxy-authenticate",
        "idempotency-key",  # a retry id
        "x-idempotency-key",
        "sec-websocket-key",  # a nonce
        "sec-websocket-accept",
        "keep-alive",
    }
)
# a key's shape: Anthropic (sk-ant-...), OpenAI (sk-proj-..., sk-...), OpenRouter (sk-or-...), a JWT (three base64url
# parts, the first two JSON objects: eyJ...)
KEY_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:sk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}|eyJ[A-Za-z0-9_\-]{6,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*)"
)
_HARMLESS_VALUE = re.compile(
    r"\s*(?:[+-]?\d{1,12}(?:\.\d{1,6})?"  # a count (up to 12 digits: a longer number may be a token)
    r"|\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"  # a time (RFC 3339)
    r"|(?:\d+(?:\.\d+)?(?:ms|us|ns|h|m|s))+"  # a duration (6m0s, 20ms)
    r"|true|false|none|null)?\s*",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)\s+(\S.*)\Z", re.DOTALL)
_AUTH_PARAM = re.compile(r'([A-Za-z][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)')


def _name_words(name: str) -> set[str]:
    return {w for w in CREDENTIAL_NAME_WORDS if w in name}


@lru_cache(maxsize=4096)  # (bounded: names are few, but a client chooses them)
def _name_kind(key: str) -> int:
    """What a lower-case name says: 0 nothing, 1 a credential, 2 a credential unless its value is a count."""
    if key in CREDENTIAL_HEADERS or key in CREDENTIAL_QUERY_PARAMS:
        return 1
    if key in NOT_CREDENTIAL_NAMES:
        return 0
    words = _name_words(key)
    if not words:
        return 0
    return 2 if words == {"token"} else 1


def _key_shaped(value: str) -> bool:
    """The value (after an optional auth scheme) is a key's shape, as a whole."""
    if "sk-" not in value and "eyJ" not in value:  # (the shapes' beginnings: most values are rejected here)
        return False
    v = value.strip()
    m = _SCHEME.match(v)
    for candidate in (v, m[2].strip()) if m else (v,):
        found = KEY_SHAPE.match(candidate)
        if found and found.end() == len(candidate):
            return True
    return False


def _credential(key: str, text: str) -> bool:
    kind = _name_kind(key)
    if kind == 1 or (kind == 2 and not _HARMLESS_VALUE.fullmatch(text)):
        return True
    return _key_shaped(text)


def is_credential(name: Any, value: Any = "") -> bool:
    """Whether a header (or query parameter) ``name: value`` carries a credential, by its name and its value's shape
    (the rule above). Names are compared in lower case; bytes are Latin-1."""
    return _credential(_text(name).strip().lower(), _text(value))


def clean_headers(headers: Mapping[str, Any] | Iterable[tuple[Any, Any]] | None) -> dict[str, str]:
    """Headers as ``{lower-case name: value}`` without credential headers (``is_credential``); repeated names joined
    with ``", "``. Accepts a mapping (httpx2.Headers, dict...) or ``(name, value)`` pairs; bytes are Latin-1."""
    if headers is None:
        return {}
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in pairs:
        key = _text(name).strip().lower()
        text = _text(value)
        if _credential(key, text):
            continue
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def usable_secrets(secrets: Iterable[Any]) -> list[str]:
    """The secrets that can be masked safely (strings of at least MIN_SECRET_LENGTH), longest first, once each."""
    found = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
    return sorted(found, key=len, reverse=True)


def auth_values(value: str) -> list[str]:
    """The secrets an ``Authorization``-like value carries: the whole value; with a scheme (any whitespace after
    it), the credentials after it; for ``Basic``, also the decoded ``user:password`` and the password; for
    auth-params (``Digest``, ``AWS4-HMAC-SHA256``...), the values of the credential-like params."""
    v = value.strip()
    out = [v]
    m = _SCHEME.match(v)
    if m is None:
        return out
    scheme, rest = m[1].lower(), m[2].strip()
    out.append(rest)
    if scheme == "basic":
        decoded = _b64(rest)
        if decoded is not None:
            out.append(decoded)
            user, sep, password = decoded.partition(":")
            if sep:
                out.append(password)
    elif "=" in rest:
        for pname, pvalue in _AUTH_PARAM.findall(rest):
            if _name_words(pname.lower()) or pname.lower() in ("response", "credential"):
                out.append(pvalue[1:-1] if pvalue.startswith('"') else pvalue)
    return out


def _b64(text: str) -> str | None:
    import base64
    import binascii

    t = text.strip()
    try:
        raw = base64.b64decode(t + "=" * (-len(t) % 4), validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
        except (binascii.Error, ValueError):
            return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _cookie_values(name: str, value: str) -> list[str]:
    pairs = value.split(";")
    if name == "set-cookie":
        pairs = pairs[:1]  # the rest are attributes (Path, Expires...)
    return [p.partition("=")[2].strip() for p in pairs if "=" in p]


def _query_pairs(query: str) -> list[tuple[str, str, str]]:
    """``(decoded name, raw value, decoded value)`` of each ``name=value`` of a query string (``&`` or ``;``)."""
    from urllib.parse import unquote, unquote_plus

    out = []
    for part in re.split(r"[&;]", query):
        if not part:
            continue
        raw_name, _, raw_value = part.partition("=")
        out.append((unquote_plus(raw_name), raw_value, unquote_plus(raw_value)))
        if "+" in raw_value:  # a literal + (not encoded) in a key: learn that reading too
            out.append((unquote_plus(raw_name), raw_value, unquote(raw_value)))
    return out


def credential_values(
    headers: Mapping[str, Any] | Iterable[tuple[Any, Any]] | None, url: str | None = None
) -> list[str]:
    """The secret strings a request carries: values of credential headers (``is_credential``: ``x-api-key``,
    ``authorization``, ``helicone-auth``, ``cf-aig-authorization``, ``x-portkey-api-key``...), parsed by auth scheme
    (``auth_values``: Bearer with any whitespace, Basic decoded...), cookie values, key-shaped tokens in any other
    header, credential query parameters (as sent, percent-encoded, and decoded) and a URL's password. Headers are a
    mapping or ``(name, value)`` pairs.

    What is found is also learned process-wide (``learn``), so that every output guard masks it from now on."""
    out: list[str] = []
    if headers is None:
        headers = ()
    elif isinstance(headers, Mapping):
        headers = headers.items()

    def add(candidate: str) -> None:
        candidate = candidate.strip()
        if len(candidate) >= MIN_SECRET_LENGTH and candidate not in out:
            out.append(candidate)

    for name, value in headers:
        key = _text(name).strip().lower()
        text = _text(value)
        if _credential(key, text):
            for v in auth_values(text):
                add(v)
            if "cookie" in key:
                for v in _cookie_values(key, text):
                    add(v)
        elif "sk-" in text or "eyJ" in text:
            for m in KEY_SHAPE.finditer(text):
                add(m[0])
    if url:
        from urllib.parse import unquote

        text = str(url)
        try:
            query = urlsplit(text).query
        except ValueError:  # (an unclosed IPv6 bracket...): the query as it is written
            query = text.partition("#")[0].partition("?")[2]
        user, colon, password = _userinfo(text).partition(":")
        # the password; the user name when it is the credential alone (https://TOKEN@relay, curl's TOKEN:) or has a
        # key's shape
        for candidate in (password, user if not password or KEY_SHAPE.search(user) else ""):
            if candidate:
                add(candidate)
                add(unquote(candidate))
        for name, raw_value, value in _query_pairs(query):
            if _credential(name.strip().lower(), value):
                add(raw_value)
                for v in auth_values(value):
                    add(v)
            elif "sk-" in value or "eyJ" in value:
                for m in KEY_SHAPE.finditer(value):
                    add(m[0])
    learn(out)
    return out


def _userinfo(url: str) -> str:
    """What comes before the host's ``@`` in a URL (``user:password``; "" without one), with or without a scheme
    (``user:KEY@relay``), also in a URL urlsplit refuses (an unclosed IPv6 bracket)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return authority.rpartition("@")[0]


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every occurrence of a secret replaced by ``[redacted]``: in strings (dict keys too) and bytes,
    through dicts, lists and tuples (tuples come back as lists). Other values are returned as they are.

    A dict or list in which no secret can occur (``json_clean``: one ``orjson.dumps`` and a search, in C) comes back
    as it is: the same object, not a copy (its nested tuples stay tuples)."""
    m = matcher_of(secrets)
    if type(value) is dict or type(value) is list:
        if not m or json_clean(value, m):
            return value
    try:
        return _redact(value, m)
    except RecursionError:  # a value as deep as orjson reads (1,024 levels): two frames a level
        with exactjson.deep_recursion():
            return _redact(value, m)


def _redact(value: Any, secrets: Iterable[str]) -> Any:
    """``redact`` by walking the value."""
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, (bytes, bytearray)):
        return mask_bytes(bytes(value), secrets)
    if isinstance(value, dict):
        return {_redact(k, secrets) if isinstance(k, str) else k: _redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, secrets) for v in value]
    return value


# --- the precheck: can a secret occur in a value at all? -----------------------------------------------------------
#
# ``mask_text`` changes a string only when a secret occurs in it as it is, or in its JSON escapes decoded
# (``\u0073k-...``). ``orjson.dumps`` writes every string of a value (keys too) in a JSON text, escaping only ``"``,
# ``\`` and the control characters (as ``\"``, ``\\``, ``\n``, ``\u001f``...; other characters as UTF-8). So,
# for a secret without those characters (``SecretMatcher.plain``), it occurs in a string exactly where it occurs in
# the text, and in a string's escapes decoded once only where it occurs in the text too (the escapes orjson writes
# decode to characters such a secret does not hold). A string holds a backslash exactly when the text holds the
# escape ``\\`` (an escape's second character is a backslash only in that one). When the text has a ``\\``: decoding
# the text's escapes twice gives every string with its own escapes decoded (the escape ``\"`` of a string ending in
# a backslash is decoded across its closing quote, but no escape reaches into the next string: a ``\u`` needs four
# hex digits, and a string's opening quote follows ``[``, ``{``, ``,`` or ``:``); a plain secret can occur there
# only with an escape of the second decoding among its characters, one of ``\\uXXXX`` (decoding to one of the
# secrets' characters) or ``\\/`` in the text: only the text around those is decoded
# (``SecretMatcher.twice_escaped``). A secret found in the text or in a decoding may be a false alarm (it spans JSON
# syntax): the walk then decides. tests/core/test_redaction_precheck.py checks it against the walk (hypothesis) and
# the canaries.

_PRECHECK_DC = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS
_PRECHECK = _PRECHECK_DC | orjson.OPT_PASSTHROUGH_DATACLASS
_NOT_PLAIN = re.compile(r'["\\\x00-\x1f]')


def json_clean(value: Any, secrets: Iterable[str], *, dataclasses: bool = False) -> bool:
    """True when no secret can occur in any string of ``value`` (a JSON-like value: dicts, lists, tuples, strings,
    numbers...), as it is or JSON-escaped, so that ``redact`` would change nothing; False when one may (or when the
    value is not one orjson writes as it is: bytes, dataclasses, subclasses, integers beyond 64 bits...).

    ``dataclasses=True``: dataclasses are looked into too (every field, as orjson writes them): True then says
    that no string field of the dataclass, nor any string in its fields, can hold a secret."""
    m = matcher_of(secrets)
    if not m:
        return True
    if not m.plain:
        return False
    try:
        text = orjson.dumps(value, option=_PRECHECK_DC if dataclasses else _PRECHECK)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return _text_clean(text, m)


def json_text_clean(text: bytes, secrets: Iterable[str]) -> bool:
    """``json_clean`` of the value whose text (as ``orjson.dumps`` writes it) is ``text``."""
    m = matcher_of(secrets)
    if not m:
        return True
    return m.plain and _text_clean(text, m)


def _text_clean(text: bytes, m: SecretMatcher) -> bool:
    if m.forms.contains(text):  # (a plain secret's forms: its UTF-8)
        return False
    return b"\\\\" not in text or not m.twice_escaped(text.decode("utf-8"))


# --- secrets in text, whatever the escaping ------------------------------------------------------------------------

_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_PARTIAL_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")
_ESCAPE_CHARS = frozenset('\\u0123456789abcdefABCDEFbfnrt"/')  # the characters of a JSON escape
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}


def _unescape(text: str) -> str:
    """JSON string escapes (``\\u0073``, ``\\n``...) decoded; anything else kept as it is."""
    return _ESCAPE.sub(lambda m: chr(int(m[0][2:], 16)) if m[0][1] == "u" else _SIMPLE[m[0][1]], text)


def _unescape_map(text: str) -> tuple[str, list[int], list[int]]:
    """``_unescape(text)`` with, for each of its characters, where it starts and ends in ``text``."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        for i in range(pos, m.start()):
            out.append(text[i])
            starts.append(i)
            ends.append(i + 1)
        esc = m[0]
        out.append(chr(int(esc[2:], 16)) if esc[1] == "u" else _SIMPLE[esc[1]])
        starts.append(m.start())
        ends.append(m.end())
        pos = m.end()
    for i in range(pos, len(text)):
        out.append(text[i])
        starts.append(i)
        ends.append(i + 1)
    return "".join(out), starts, ends


def _run_start(text: str, i: int) -> int:
    """Where the run of backslashes that ends just before ``i`` begins (``i`` if none)."""
    while i > 0 and text[i - 1] == "\\":
        i -= 1
    return i


def _escape_at(text: str, i: int) -> re.Match[str] | None:
    """The escape that begins at ``i`` as ``_unescape`` reads the text (its backslash is not one escaped by the one
    before it), else None."""
    if text[i : i + 1] != "\\" or (i - _run_start(text, i)) % 2:
        return None
    return _ESCAPE.match(text, i)


def _token_bounds(text: str, a: int, b: int) -> tuple[int, int]:
    """``a`` moved back and ``b`` on so that neither falls inside an escape (nor between two backslashes of a run):
    ``_unescape(text[a:b])`` is then exactly the decoding of those characters within ``_unescape(text)``. (The
    nearest backslash within five characters decides: an escape's other characters are never backslashes.)"""
    a = _run_start(text, a)
    for i in range(a - 1, max(-1, a - 6), -1):
        if text[i] == "\\":
            m = _escape_at(text, i)
            if m is not None and m.end() > a:
                a = i
            break
    for i in range(b - 1, max(a - 1, b - 6), -1):
        if text[i] == "\\":
            m = _escape_at(text, i)
            if m is not None and m.end() > b:
                b = m.end()
            break
    return a, b


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans sorted, overlapping ones merged (touching ones kept apart: a secret twice in a row is masked twice)."""
    if not spans:
        return []
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        if a < merged[-1][1]:  # (overlapping: the same occurrence seen raw and unescaped)
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


class SecretMatcher:
    """Every secret of a set found at once, as it is or JSON-escaped: one ``WordIndex`` of the secrets and one of
    their byte forms (core/secretindex.py), so that the cost of a search grows with the text, not with the number of
    secrets. Built once per set (``SecretSet`` keeps its own current; ``matcher_of`` finds it, or caches one for any
    other list). Iterating it gives its secrets; it is false without any.

    Escapes: a secret can occur in a text's escapes decoded (``\\u0073k-...``) only with an escape among its
    characters that decodes to one of the secrets' characters; only the text around such escapes (as far as a secret
    reaches: six characters of text a character) is decoded (``escaped_spans``), not the whole text (a 16 MiB body
    of code, a backslash every few characters, was decoded whole: 1.3 s)."""

    __slots__ = ("secrets", "text", "forms", "plain", "max", "firsts", "first", "chars", "_own", "_sites", "_twice")

    def __init__(
        self,
        secrets: Iterable[str],
        *,
        forms: Iterable[bytes] | None = None,
        plain: bool | None = None,
        own: Iterable[str] | None = None,
    ) -> None:
        """``forms``, ``plain``, ``own``: what the secrets give (``_byte_forms``, ``_is_plain``, their characters; a
        superset of those is fine), when the caller keeps them from one set of secrets to the next."""
        self.secrets: tuple[str, ...] = tuple(dict.fromkeys(s for s in secrets if isinstance(s, str) and s))
        self.text: WordIndex[str] = WordIndex(self.secrets)
        # raw UTF-8 and JSON-escaped
        self.forms: WordIndex[bytes] = WordIndex(_byte_forms(self.secrets) if forms is None else forms)
        # every secret is written as it is inside a JSON string (no quote, backslash, control character, lone
        # surrogate): the precheck can search orjson's text for it
        self.plain = all(map(_is_plain, self.secrets)) if plain is None else plain
        self.max = self.text.max  # the length of the longest secret
        self.firsts = frozenset(s[0] for s in self.secrets)
        self.first = self.firsts | {"\\"}  # the characters a secret (or its escaped form) can begin with
        # the characters the secrets hold
        self._own: frozenset[str] = frozenset().union(*self.secrets) if own is None else frozenset(own)
        self.chars = self._own | _ESCAPE_CHARS  # the characters a secret or its escaped form can hold
        self._sites: re.Pattern[str] | None = None
        self._twice: re.Pattern[str] | None = None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __iter__(self) -> Iterator[str]:
        return iter(self.secrets)

    def __len__(self) -> int:
        return len(self.secrets)

    # --- where escapes may hide a secret ---------------------------------------------------------------------------

    def _hexes(self) -> str:
        """The pattern of the four hex digits of a ``\\u`` escape that decodes to one of the secrets' characters."""
        return "(?i:" + trie_pattern(f"{ord(c):04x}" for c in self._own if ord(c) < 0x10000) + ")"

    def _windows(self, text: str, sites: re.Pattern[str], reach: int) -> list[tuple[int, int]]:
        """The stretches of ``text`` within ``reach`` characters of a site, merged, in order."""
        out: list[tuple[int, int]] = []
        n = len(text)
        for m in sites.finditer(text):
            a, b = max(0, m.start() - reach), min(n, m.end() + reach)
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out

    def escaped_spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets occur in ``_unescape(text)`` with at least one escape among their characters, as spans
        of ``text`` (where they occur as they are: ``text.spans``), exactly as a search of the whole decoded text
        finds them. Such an occurrence holds an escape decoding to one of the secrets' characters (a site) and
        reaches at most six characters of text a character of the secret around it: only those stretches are
        decoded, cut where no escape is split (``_token_bounds``)."""
        sites = self._sites
        if sites is None:
            simple = "".join(re.escape(k) for k, v in _SIMPLE.items() if v in self._own)
            sites = self._sites = re.compile(r"\\(?:u" + self._hexes() + (f"|[{simple}]" if simple else "") + ")")
        out: list[tuple[int, int]] = []
        index = self.text
        for a, b in self._windows(text, sites, 6 * self.max + 8):
            a, b = _token_bounds(text, a, b)
            piece = text[a:b]
            if not index.contains(_unescape(piece)):
                continue
            plain, starts, ends = _unescape_map(piece)
            out += [(a + starts[x], a + ends[y - 1]) for x, y in index.spans(plain)]
        return out

    def twice_escaped(self, text: str) -> bool:
        """Whether a plain secret (``plain``) may occur in a text orjson wrote with its escapes decoded twice, where
        it does not occur as it is (the precheck above): only with a ``\\\\uXXXX`` (decoding to one of the secrets'
        characters) or a ``\\\\/`` among its characters, so only the text around those is decoded (seven characters
        of text a character of the secret). True may be a false alarm."""
        sites = self._twice
        if sites is None:
            alts = "u" + self._hexes() + ("|/" if "/" in self._own else "")
            sites = self._twice = re.compile(r"\\\\(?:" + alts + ")")
        index = self.text
        for a, b in self._windows(text, sites, 7 * self.max + 16):
            a = _run_start(text, a)  # (an escape cut at the start only changes characters before the secret)
            if index.contains(_unescape(_unescape(text[a:b]))):
                return True
        return False

    # --- the hold-back at the end of a stream ----------------------------------------------------------------------

    def hold_from(self, text: str) -> int:
        """Where the part of ``text`` that could be the beginning of a secret (as it is or JSON-escaped) starts
        (``len(text)`` if none). Only the last ``6 * max`` characters are looked at."""
        n = len(text)
        if not n or not self.secrets or text[-1] not in self.chars:  # (a tail that begins one ends with its chars)
            return n
        index = self.text
        window = self.max * 6
        if "\\" not in text[-window:]:
            best = n  # a proper prefix of a secret at the end of the text, the earliest
            lo = max(0, n - self.max + 1)
            for c in self.firsts:
                p = text.find(c, lo, best)
                while p >= 0:
                    if index.is_proper_prefix(text[p:]):
                        best = p
                        break
                    p = text.find(c, p + 1, best)
            return best
        first_chars = self.first
        for p in range(max(0, n - window), n):
            if text[p] not in first_chars:  # (an escaped secret begins with a backslash)
                continue
            tail = text[p:]
            if index.is_prefix(tail):
                return p
            plain = _unescape(_PARTIAL_ESCAPE.sub("", tail))
            if (plain or tail.startswith("\\")) and index.is_prefix(plain):
                return p
        return n


def _is_plain(s: str) -> bool:
    """Whether a secret is written as it is inside a JSON string (no quote, backslash, control character, lone
    surrogate)."""
    if _NOT_PLAIN.search(s):
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


@lru_cache(maxsize=64)  # (bounded: the lists of secrets a process passes around are few)
def _matcher_for(secrets: tuple[str, ...]) -> SecretMatcher:
    return SecretMatcher(secrets)


def matcher_of(secrets: Iterable[str] | SecretSet) -> SecretMatcher:
    """The matcher of ``secrets``: itself, a ``SecretSet``'s (or its list's) own, or one built for the list and kept
    (the last 64)."""
    if type(secrets) is SecretMatcher:
        return secrets
    m = getattr(secrets, "matcher", None)  # (a SecretSet, or its list while only the set changed it)
    if m is not None:
        return m  # type: ignore[no-any-return]
    return _matcher_for(tuple(secrets))  # type: ignore[arg-type]


def secret_spans(text: str, secrets: Iterable[str]) -> list[tuple[int, int]]:
    """Where the secrets occur in ``text``, as it is or JSON-escaped (``\\u0073k-...``): merged ``(start, end)``
    spans of ``text``, in order."""
    m = matcher_of(secrets)
    if not m:
        return []
    spans = m.text.spans(text)
    if "\\" in text:
        spans += m.escaped_spans(text)
    return _merge(spans)


def _apply(text: str, spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    pos = 0
    for a, b in spans:
        out.append(text[pos:a])
        out.append(REDACTED)
        pos = b
    out.append(text[pos:])
    return "".join(out)


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of a secret, as it is or JSON-escaped, replaced by ``[redacted]``."""
    m = matcher_of(secrets)
    if not m:
        return text
    spans = secret_spans(text, m) if "\\" in text else _merge(m.text.spans(text))
    return _apply(text, spans) if spans else text


def mask_json_text(text: str, secrets: Iterable[str]) -> str:
    """``mask_text`` of a JSON document's text, also where one of its strings holds a secret escaped once more (a
    JSON text inside a JSON string, as OpenAI's tool ``arguments`` in a ``.done`` event: ``\\\\u0073k-...`` on the
    wire): then the document is parsed, its strings masked and it is written again."""
    m = matcher_of(secrets)
    out = mask_text(text, m)
    if not m or "\\\\" not in out:
        return out
    once = _unescape(out)
    if "\\" not in once or not m.text.contains(_unescape(once)):
        return out
    try:
        doc = exactjson.loads(out)
    except orjson.JSONDecodeError:
        return out
    return exactjson.dumps(redact(doc, m)).decode("utf-8")


def mask_bytes(data: bytes, secrets: Iterable[str]) -> bytes:
    """``data`` with every occurrence of a secret replaced by ``[redacted]``: as text (as it is or JSON-escaped) when
    the bytes are UTF-8, else as bytes (raw and JSON-escaped forms)."""
    m = matcher_of(secrets)
    if not m or (b"\\" not in data and not m.forms.contains(data)):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _mask_bytes(data, m.forms)
    masked = mask_text(text, m)
    return data if masked is text else masked.encode("utf-8")


_REDACTED_B = REDACTED.encode()


def _mask_bytes(data: bytes, forms: WordIndex[bytes]) -> bytes:
    """``data`` with every occurrence of a form replaced by ``[redacted]`` (overlapping ones as one)."""
    spans = _merge(forms.spans(data))
    if not spans:
        return data
    out: list[bytes] = []
    pos = 0
    for a, b in spans:
        out += [data[pos:a], _REDACTED_B]
        pos = b
    out.append(data[pos:])
    return b"".join(out)


def _byte_forms(secrets: Iterable[str]) -> list[bytes]:
    """The byte strings a secret can be on the wire: as it is, and JSON-escaped the way encoders write it."""
    return sorted({f for s in secrets for f in _forms_of(s)}, key=len, reverse=True)


def _forms_of(secret: str) -> tuple[bytes, ...]:
    raw = secret.encode("utf-8", "surrogatepass")
    try:
        escaped = orjson.dumps(secret)[1:-1]
    except orjson.JSONEncodeError:  # a lone surrogate: orjson writes none (nor does any JSON it reads hold one)
        return (raw,)
    return (raw,) if escaped == raw else (raw, escaped)


# --- across reads and deltas ---------------------------------------------------------------------------------------

_EVENT_END = SSE_BLANK_LINE  # (the stream engine's rule: an event the engine reads is one event here too)
# the delta types whose text is streamed in fragments (joined by the reader), and the field that carries it; the
# other deltas (signature, citations, compaction) carry whole values, masked event by event
STREAMED_TEXT_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
_TEXT_FIELDS = STREAMED_TEXT_FIELDS
MAX_HOLD = 1024 * 1024  # bytes of an unfinished event held back at most (then masked as bytes and written)
# distinct secrets a set keeps (a proxy learns every credential its clients send; one per request when they sign
# each one, AWS SigV4): past it the least recently seen one is forgotten (a key still sent is seen again, every
# request); the secrets a set was made with, and the environment's, are never forgotten
MAX_SECRETS = 4096


_NO_SECRETS = SecretMatcher(())


class _SecretList(list):  # type: ignore[type-arg]
    """A ``SecretSet``'s secrets: a list its holders keep (the set changes it in place), carrying the set's matcher
    for ``matcher_of``. Changed in place by anything but the set, it drops the matcher (one is then built for the list
    as it is)."""

    __slots__ = ("matcher",)
    matcher: SecretMatcher | None


def _dropping(name: str) -> Callable[..., Any]:
    base = getattr(list, name)

    def method(self: _SecretList, *args: Any, **kwargs: Any) -> Any:
        self.matcher = None
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
):
    setattr(_SecretList, _name, _dropping(_name))


class SecretSet:
    """The known secrets (usable ones, longest first) and their matcher (``SecretMatcher``), built once per change.

    Redactors of one stream can share a set: a key learned late (``add``) reaches all of them at once. Bounded: at
    most ``limit`` secrets; past it, the least recently seen that it was not made with (nor given with
    ``pin=True``), nor is in use (given with ``use=True`` and not released yet), is forgotten (``forgotten``
    counts them). A key in use is the credential of an exchange still under way: a stream that echoes it may be
    holding its beginning back, to mask it with its end (forgotten meanwhile, both halves went out in clear). The
    set is over its limit while more than ``limit`` keys are in use (at most one exchange's keys each)."""

    __slots__ = ("secrets", "matcher", "limit", "forgotten", "_seen", "_pinned", "_in_use", "_odd", "_own", "_lock")

    def __init__(self, secrets: Iterable[str] = (), *, limit: int = MAX_SECRETS) -> None:
        self.secrets: list[str] = _SecretList()
        self.matcher = _NO_SECRETS
        self.limit = limit
        self.forgotten = 0
        # every secret, the least recently seen first, with its byte forms (kept: a change builds the matcher again
        # from these, not from the secrets' text: ~3 ms with 4,096 secrets)
        self._seen: dict[str, tuple[bytes, ...]] = {}
        self._pinned: set[str] = set()
        self._in_use: dict[str, int] = {}  # the secrets in use: how many times (``add(use=True)`` less `release`)
        self._odd: set[str] = set()  # the secrets that are not plain (_is_plain)
        self._own: set[str] = set()  # the characters of every secret seen (only grows: a superset is fine)
        # (one change at a time: the proxy of `watch` learns on its thread while the main thread's guard may too)
        self._lock = threading.Lock()
        self.add(secrets, pin=True)

    def add(self, secrets: Iterable[str] | str, *, pin: bool = False, use: bool = False) -> list[str]:
        """Add secrets (strings shorter than MIN_SECRET_LENGTH are ignored); returns the ones that were new. One
        known already is seen again (the last to be forgotten). ``use``: in use until `release`, never forgotten
        meanwhile (each ``add(use=True)`` wants its own `release` of the same secrets)."""
        found = usable_secrets([secrets] if isinstance(secrets, str) else secrets)
        with self._lock:
            if use:
                in_use = self._in_use
                for s in found:
                    in_use[s] = in_use.get(s, 0) + 1
            return self._add(found, pin)

    def release(self, secrets: Iterable[str] | str) -> None:
        """Secrets given with ``add(use=True)`` are no longer in use (by that caller): forgotten from now on like any
        other, the least recently seen first (the set comes back to its limit if it was over it)."""
        found = usable_secrets([secrets] if isinstance(secrets, str) else secrets)
        with self._lock:
            in_use = self._in_use
            for s in found:
                n = in_use.get(s, 0) - 1
                if n > 0:
                    in_use[s] = n
                else:
                    in_use.pop(s, None)
            if self._fit():
                self._rebuild()

    def _add(self, found: list[str], pin: bool) -> list[str]:
        seen = self._seen
        new = []
        for s in found:
            forms = seen.pop(s, None)  # (seen again: to the end)
            if forms is None:
                new.append(s)
                forms = _forms_of(s)
                if not _is_plain(s):
                    self._odd.add(s)
                self._own.update(s)
            seen[s] = forms
        if pin:
            self._pinned.update(found)
        if new:
            self._fit()
            self._rebuild()
        return new

    def _rebuild(self) -> None:
        seen = self._seen
        self.secrets[:] = sorted(seen, key=len, reverse=True)  # (in place: holders of the list see it)
        forms_ = {f for fs in seen.values() for f in fs}
        self.matcher = SecretMatcher(self.secrets, forms=forms_, plain=not self._odd, own=self._own)
        self.secrets.matcher = self.matcher  # type: ignore[attr-defined]

    def _fit(self) -> bool:
        """Forget the least recently seen secrets past ``limit`` (never a pinned one, nor one in use); whether any
        was forgotten (the matcher is then to be rebuilt)."""
        over = len(self._seen) - self.limit
        if over <= 0:
            return False
        pinned, in_use = self._pinned, self._in_use
        kept = (s for s in self._seen if s not in pinned and s not in in_use)
        old = [s for s, _ in zip(kept, range(over), strict=False)]
        for s in old:
            del self._seen[s]
            self._odd.discard(s)
        self.forgotten += len(old)
        return bool(old)

    def clear(self) -> None:
        """Forget every secret (in place: holders of the list see it)."""
        with self._lock:
            self._seen.clear()
            self._pinned.clear()
            self._in_use.clear()
            self._odd.clear()
            self._own.clear()
            self.secrets[:] = []
            self.matcher = _NO_SECRETS

    def __bool__(self) -> bool:
        return bool(self.secrets)

    @property
    def max(self) -> int:
        """The length of the longest secret."""
        return self.matcher.max

    def hold_from(self, text: str) -> int:
        """Where the part of ``text`` that could be the beginning of a secret (as it is or JSON-escaped) starts
        (``len(text)`` if none). Only the last ``6 * max`` characters are looked at."""
        return self.matcher.hold_from(text)


@dataclass(slots=True, eq=False)
class Fragment:
    """One fragment of a streamed text (a delta's text, thinking or partial_json) in a ``FragmentRedactor``.

    ``text`` is rewritten when a secret is masked (``changed``); once ``done`` it is final and may be shown."""

    text: str
    tag: Any = None  # the caller's: what carries the fragment
    changed: bool = False
    done: bool = False


class FragmentRedactor:
    """The fragments of one streamed text, in order (a content block's text, thinking or partial_json): known
    secrets are masked whatever their split into fragments, as they are or JSON-escaped, and nothing is lost.

    ``push(fragment)`` returns the fragments that are now safe to show (the pushed one or earlier ones), masked;
    a fragment whose text (joined with the ones held before it) ends with what could be the beginning of a secret
    is held until the text goes on; ``release()`` (the block stopped, the message or the stream ended) returns the
    rest as it is. A secret completed across fragments is masked in the fragments that carry it: the one where it
    begins gets ``[redacted]``, the others lose their part. So the joined fragments read as ``mask_text`` of the
    joined text, and JSON (partial_json) stays valid JSON. The work per push is bounded by the hold (at most six
    times the longest secret, plus the fragment): O(n) over the stream.

    ``force()`` (what waits behind the held fragments grew past ``MAX_HOLD``) returns them at once, the part of their
    text that could begin a secret masked as a secret is, and keeps that part (``context``): a secret it begins is
    still masked in the fragments that follow (they lose their part of it). So a forced release shows
    ``[redacted]`` where the text might have begun a key, never a key's beginning.
    """

    __slots__ = ("keys", "held", "context")

    def __init__(self, keys: SecretSet) -> None:
        self.keys = keys
        self.held: list[Fragment] = []
        self.context = ""  # text force() released masked that could still begin a secret (at most 6x the longest)

    def push(self, frag: Fragment) -> list[Fragment]:
        held = self.held
        held.append(frag)
        ctx = self.context
        frags = [h.text for h in held]
        parts = [ctx, *frags] if ctx else frags
        text = parts[0] if len(parts) == 1 else "".join(parts)
        spans = secret_spans(text, self.keys.secrets)
        if spans:  # a secret completed: mask it in the fragments that carry it
            masked = _split_masked(text, parts, spans)
            if ctx:  # (shown masked already: what it holds now only says where a secret may still go on)
                ctx, masked = masked[0], masked[1:]
            for h, new in zip(held, masked, strict=True):
                if new != h.text:
                    h.text = new
                    h.changed = True
            text = ctx + "".join(h.text for h in held)
        hold_from = self.keys.hold_from(text)
        self.context = ctx if hold_from < len(ctx) else ""
        end = len(ctx)
        keep = 0
        for h in held:
            end += len(h.text)
            if end > hold_from:
                break
            h.done = True
            keep += 1
        out = held[:keep]
        del held[:keep]
        return out

    def force(self) -> list[Fragment]:
        held, self.held = self.held, []
        if not held:
            return held
        ctx = self.context
        frags = [h.text for h in held]
        parts = [ctx, *frags] if ctx else frags
        text = "".join(parts)
        hold_from = self.keys.hold_from(text)
        if hold_from < len(text):  # (a context's part was shown masked already: its [redacted] is not repeated)
            masked = _split_masked(text, parts, [(hold_from, len(text))])
            for h, new in zip(held, masked[1:] if ctx else masked, strict=True):
                if new != h.text:
                    h.text = new
                    h.changed = True
        self.context = text[hold_from:]
        for h in held:
            h.done = True
        return held

    def release(self) -> list[Fragment]:
        out, self.held = self.held, []
        self.context = ""
        for h in out:
            h.done = True
        return out


def force_all(blocks: dict[Any, FragmentRedactor]) -> list[Fragment]:
    """``force()`` every block of ``blocks``; a block left with nothing (no held fragment, no context) is dropped.
    Returns the fragments let go."""
    out: list[Fragment] = []
    for key in list(blocks):
        block = blocks[key]
        out += block.force()
        if not block.context:
            del blocks[key]
    return out


# The key of one streamed text a FragmentRedactor joins: an Anthropic block's (index, field), an OpenAI chat
# choice's ("chat", choice, field[, "tool", call]) or a Responses part's ("resp", output_index, type, part); its
# parts come from untrusted JSON (``_plain``). A prefix of it (``openai_ends``) names the texts an event ends.
FragmentKey = tuple[int | str | None, ...]
# One text fragment of an event: (key of its text, the JSON object that holds it, the field it is in).
TextPiece = tuple[FragmentKey, dict[str, Any], str]


@dataclass(slots=True)
class _Event:
    raw: bytes  # as received (possibly masked as bytes)
    obj: dict[str, Any] | None = None  # the parsed data, when it was changed (then the event is written again from it)
    ready: bool = True
    changed: bool = False
    n_in: int = 0  # the bytes of the input it stands for
    frags: list[Fragment] | None = None  # its streamed fragments when it has several (an OpenAI chunk); else None
    first: bool = False  # the stream's first event (a byte-order mark before it is not part of its first line)

    def bytes(self) -> bytes:
        if not self.changed or self.obj is None:
            return self.raw
        return _with_data(self.raw, exactjson.dumps(self.obj), self.first)


@dataclass(slots=True)
class _Held:
    event: _Event
    delta: dict[str, Any]  # the object that holds the fragment (its text field is rewritten when masked)
    key: str  # its field: "text", "thinking" or "partial_json"; OpenAI: "content", "arguments", "delta"...


class StreamRedactor:
    """Masks known secrets in a stream of network reads before they are written anywhere, whatever the split of the
    secret into reads or into deltas, and whatever its JSON escaping.

    ``feed(read)`` returns the bytes that are safe to write now (possibly ``b""``); ``flush()`` at the end of the
    stream returns the rest. With no secret the bytes pass through unchanged. Otherwise:

    - an unfinished SSE event is held back until its blank line (at most ``MAX_HOLD`` bytes: past that, masked as
      bytes and written but for the last bytes that could begin a secret);
    - each event is decoded: a secret in any of its strings (as it is or ``\\u``-escaped) is masked and the event
      written again from its JSON (other events keep their exact bytes);
    - the text, thinking and partial_json fragments of each block are joined (a ``FragmentRedactor`` per block and
      field): a delta whose text ends with what could be the beginning of a secret is held back (with the events
      after it, so the order is kept) until the text goes on; a secret completed across deltas is masked in the
      fragments that carry it (the first gets ``[redacted]``, the others lose their part), so the joined text reads
      ``[redacted]`` and the JSON stays valid;
    - a body that is not SSE (a JSON response) is held to the end and masked as JSON (or as bytes).

    ``add_secrets`` takes a key first seen late: it applies to what is fed from then on. ``secrets`` may be a
    ``SecretSet`` shared with other redactors (then a key added to the set applies here too).

    Offsets: ``in_done`` / ``out_done`` count the input bytes written so far and the bytes written for them;
    ``out_offset(x)`` maps an offset of the input onto the output (exact for a byte written so far at an event
    boundary, proportional inside a changed event, extrapolated past what was written).
    """

    def __init__(self, secrets: Iterable[str] | SecretSet = ()) -> None:
        self.keys = secrets if isinstance(secrets, SecretSet) else SecretSet(secrets)
        self._buf = b""
        self._queue: list[_Event] = []
        self._queued = 0  # bytes of the events in _queue
        self.forced = 0  # times the events held behind a fragment grew past MAX_HOLD and were let go (force)
        self._blocks: dict[FragmentKey, FragmentRedactor] = {}
        self.in_done = 0
        self.out_done = 0
        # events written with another length than they came with: (in start, in end, out start, out end), in order
        self._moved: list[tuple[int, int, int, int]] = []
        self._moved_starts: list[int] = []
        self._first = True  # no event read yet
        self._chat: ChatCalls = {}  # per chat choice: its tool calls' ids, and the last one (openai_fragments)

    @property
    def secrets(self) -> list[str]:
        return self.keys.secrets

    def add_secrets(self, secrets: Iterable[str]) -> None:
        self.keys.add(secrets)

    @property
    def holding(self) -> bool:
        """Complete events are held back (behind a delta that could begin a secret)."""
        return bool(self._queue)

    def out_offset(self, x: int) -> int:
        """Where the byte at input offset ``x`` is in the output."""
        if x >= self.in_done:
            return self.out_done + (x - self.in_done)
        i = bisect_right(self._moved_starts, x) - 1
        if i < 0:
            return x
        a, b, oa, ob = self._moved[i]
        if x >= b:
            return ob + (x - b)
        return oa + min(x - a, ob - oa)

    # --- bytes in, bytes out -----------------------------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        if not self.keys.secrets:
            if self._queue or self._buf:
                out = self._drain()
                rest = self._take_buf()
                self._count(len(rest), len(rest))
                out += rest
            else:
                out = b""
            self._count(len(data), len(data))
            return out + bytes(data)
        buf = self._buf + bytes(data)
        pos = 0
        for m in _EVENT_END.finditer(buf):
            self._event(buf[pos : m.end()])
            pos = m.end()
        self._buf = buf[pos:]
        if len(self._buf) > MAX_HOLD:
            forms = self.keys.matcher.forms
            masked = _mask_bytes(self._buf, forms)
            keep = forms.max - 1
            self._put(
                _Event(masked[:-keep] if keep else masked, n_in=len(self._buf) - keep if keep else len(self._buf))
            )
            self._buf = masked[-keep:] if keep else b""
        if self._queued > MAX_HOLD and self._blocks:
            self._force()
        return self._drain()

    def _put(self, event: _Event) -> None:
        self._queue.append(event)
        self._queued += len(event.raw)

    def _force(self) -> None:
        """The events held behind fragments that could begin a secret grew past ``MAX_HOLD`` bytes (a block whose
        text ended so, and then other blocks or pings for ever): every block lets its fragments go, what could
        begin a secret masked (``FragmentRedactor.force``), so memory stays bounded and the stream goes on."""
        self.forced += 1
        _settle(force_all(self._blocks))

    def flush(self) -> bytes:
        """End of the stream: everything still held, masked."""
        rest = self._buf
        self._buf = b""
        if rest:
            if rest.lstrip()[:1] in (b"{", b"["):
                self._put(self._json_body(rest))
            else:
                self._event(rest)
        for key in list(self._blocks):
            self._release(key)
        return self._drain()

    def _take_buf(self) -> bytes:
        rest, self._buf = self._buf, b""
        return rest

    def _count(self, n_in: int, n_out: int) -> None:
        if n_in != n_out:
            self._moved.append((self.in_done, self.in_done + n_in, self.out_done, self.out_done + n_out))
            self._moved_starts.append(self.in_done)
        self.in_done += n_in
        self.out_done += n_out

    def _drain(self) -> bytes:
        out: list[bytes] = []
        queue = self._queue
        i = 0
        while i < len(queue) and queue[i].ready:
            self._queued -= len(queue[i].raw)
            b = queue[i].bytes()
            self._count(queue[i].n_in, len(b))
            out.append(b)
            i += 1
        del queue[:i]
        return b"".join(out)

    # --- events ------------------------------------------------------------------------------------------------

    def _json_body(self, raw: bytes) -> _Event:
        n = len(raw)
        try:
            doc = exactjson.loads(raw)
        except orjson.JSONDecodeError:
            return _Event(_mask_bytes(raw, self.keys.matcher.forms), n_in=n)
        masked = redact(doc, self.keys.matcher)
        if masked == doc:
            return _Event(_mask_bytes(raw, self.keys.matcher.forms), n_in=n)
        return _Event(exactjson.dumps(masked), n_in=n)

    def _event(self, raw: bytes) -> None:
        n_in = len(raw)
        raw = _mask_bytes(raw, self.keys.matcher.forms)
        first, self._first = self._first, False
        name, obj = _parse_event(raw, first)
        if obj is None:
            self._put(_Event(raw, n_in=n_in))
            return
        # without a backslash, the decoded strings are the bytes as they are, which hold no secret any more; with
        # some, a secret can only be in a string if it is in the data unescaped twice (JSON, then text escapes)
        masked = obj
        if b"\\" in raw:
            once = _unescape(raw.decode("utf-8", "replace"))
            m = self.keys.matcher
            if m.text.contains(once) or ("\\" in once and m.text.contains(_unescape(once))):
                masked = redact(obj, m)
        event = _Event(raw, obj=masked, changed=masked is not obj and masked != obj, n_in=n_in, first=first)
        self._put(event)
        # the event's type and block as the stream engine reads them (stream/protocol.py): the data's type, else
        # the event's name; an index that is an integer >= 0
        kind = masked.get("type")
        if not isinstance(kind, str):
            kind = name
        index = masked.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            index = None
        delta = masked.get("delta")
        if kind == "content_block_delta" and isinstance(delta, dict) and index is not None:
            field_name = _TEXT_FIELDS.get(str(delta.get("type")))
            if field_name is not None and isinstance(delta.get(field_name), str):
                self._delta((index, field_name), _Held(event, delta, field_name))
                return
        if kind == "content_block_start" and index is not None:
            # a text or thinking block may start with text: its deltas go on from it (the engine joins them)
            block = masked.get("content_block")
            field_name = start_text_field(block)
            if field_name is not None and isinstance(block, dict):
                self._delta((index, field_name), _Held(event, block, field_name))
                return
        if kind == "content_block_stop" and index is not None:
            for block_key in [k for k in self._blocks if k[0] == index]:
                self._release(block_key)
        elif kind in ("message_delta", "message_stop", "error", "message_start"):
            for block_key in list(self._blocks):
                self._release(block_key)
        else:  # an OpenAI chunk or Responses event: its fragments first, then what it ends
            frags = openai_fragments(masked, self._chat)
            if frags:
                self._deltas(frags, event)
            ends = openai_ends(masked)
            if ends is not None:
                for block_key in [k for k in self._blocks if _ends(k, ends)]:
                    self._release(block_key)

    def _release(self, key: FragmentKey) -> None:
        block = self._blocks.pop(key, None)
        if block is not None:
            _settle(block.release())

    def _delta(self, key: FragmentKey, held: _Held) -> None:
        """One fragment of an event (held back, with what follows it, while it could begin a secret)."""
        self._push(key, Fragment(held.delta[held.key], held))

    def _deltas(self, pieces: list[TextPiece], event: _Event) -> None:
        """The fragments of an OpenAI event (a chunk may hold several: it is ready once all of them are)."""
        if len(pieces) == 1:
            key, holder, name = pieces[0]
            self._delta(key, _Held(event, holder, name))
            return
        event.frags = [Fragment(holder[name], _Held(event, holder, name)) for _, holder, name in pieces]
        for (key, _, _), frag in zip(pieces, event.frags, strict=True):
            self._push(key, frag)

    def _push(self, key: FragmentKey, frag: Fragment) -> None:
        """A fragment into its block's redactor: the fragments it lets go are settled in their events, the ones it
        holds keep their events back."""
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = FragmentRedactor(self.keys)
        _settle(block.push(frag))
        for held in block.held:
            _rewrite(held)
            held.tag.event.ready = False
        if not block.held and not block.context:
            del self._blocks[key]


def _rewrite(frag: Fragment) -> None:
    """A fragment's masked text into its event's JSON (the event is written again from it)."""
    if frag.changed:
        frag.tag.delta[frag.tag.key] = frag.text
        frag.tag.event.changed = True


def _settle(frags: list[Fragment]) -> None:
    """Fragments let go (done): their texts in their events, and each event ready once all its fragments are."""
    for frag in frags:
        _rewrite(frag)
        event = frag.tag.event
        event.ready = event.frags is None or all(f.done for f in event.frags)


# the text fields of a Chat Completions delta streamed in fragments (tool call arguments: function.arguments)
OPENAI_CHAT_TEXT_FIELDS = tuple(CHAT_TEXT_KINDS)


# per chat choice: its tool calls (index -> the id first seen, or None) and the last call a delta went to
ChatCalls = dict[int, tuple[dict[int, str | None], list[int | None]]]


def _choice_index(value: object) -> int:
    """A chat choice's index as the stream engine takes it (stream/openai_chat.py): not an integer, 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _call_index(calls: dict[int, str | None], last: list[int | None], call: dict[str, Any]) -> int:
    """The tool call a ``tool_calls`` delta goes to, as the stream engine places it (``core.wire.chat_call_slot``);
    ``calls`` (each call's first id) and ``last`` are updated."""
    ti, _ = chat_call_slot(call.get("index"), call.get("id"), last[0], calls)
    tid = call.get("id")
    if calls.get(ti) is None:
        calls[ti] = tid if isinstance(tid, str) and tid else None
    last[0] = ti
    return ti


def openai_fragments(obj: dict[str, Any], chat: ChatCalls | None = None) -> list[TextPiece]:
    """The text fragments an OpenAI stream event carries, as (key of the text they belong to, the object that holds
    the fragment, its field); ``[]`` for an Anthropic event or one that streams no text. Two fragments have the same
    key when the stream engine joins them into one block:

    - Chat Completions chunk: per choice (its ``index``, 0 when it has none), ``delta.content``, ``refusal`` and
      the thinking text (``reasoning_content`` and ``reasoning`` alike), ``delta.tool_calls[i].function.arguments``
      (keyed by the call's ``index``; a call without one as the engine places it, with ``chat``: the calls seen so
      far, updated; without ``chat``, by its position) and the deprecated ``delta.function_call.arguments``; keys
      start with ``("chat", choice index)``;
    - Responses: every ``response.*.delta`` event's ``delta`` string (output text, refusal, function call
      arguments, reasoning and summary text, custom tool input...), keyed ``("resp", output_index, part, index)``
      with the engine's parts (``core.wire.RESPONSES_DELTAS``; another delta type by its own name).
    """
    choices = obj.get("choices")
    if isinstance(choices, list):
        out: list[TextPiece] = []
        for choice in choices:
            if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
                continue
            ci = _choice_index(choice.get("index"))
            delta = choice["delta"]
            for name in OPENAI_CHAT_TEXT_FIELDS:
                if isinstance(delta.get(name), str):
                    out.append((("chat", ci, CHAT_TEXT_KINDS[name]), delta, name))
            calls = delta.get("tool_calls")
            state = None if chat is None else chat.setdefault(ci, ({}, [None]))
            for j, call in enumerate(calls if isinstance(calls, list) else ()):
                if not isinstance(call, dict):
                    continue
                if state is not None:
                    ti: int | str = _call_index(state[0], state[1], call)
                else:
                    raw = call.get("index")
                    ti = raw if isinstance(raw, int) and not isinstance(raw, bool) else f"#{j}"
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    out.append((("chat", ci, "tool", ti), fn, "arguments"))
            fc = delta.get("function_call")
            if isinstance(fc, dict) and isinstance(fc.get("arguments"), str):
                out.append((("chat", ci, "function_call"), fc, "arguments"))
        return out
    kind = obj.get("type")
    if isinstance(kind, str) and kind.startswith("response.") and kind.endswith(".delta"):
        if isinstance(obj.get("delta"), str):
            spec = RESPONSES_DELTAS.get(kind)
            if spec is None:
                at = obj.get("content_index", obj.get("summary_index"))
                return [(("resp", _plain(obj.get("output_index")), kind, _plain(at)), obj, "delta")]
            _kind, part_name, index_field = spec
            idx = _plain(obj.get(index_field)) if index_field else 0
            return [(("resp", _plain(obj.get("output_index")), part_name, idx), obj, "delta")]
    return []


def _plain(value: object) -> int | str | None:
    """A key part from untrusted JSON: hashable."""
    return value if isinstance(value, (int, str)) or value is None else repr(value)


def openai_ends(obj: dict[str, Any]) -> FragmentKey | None:
    """The texts an OpenAI stream event ends (no fragment of them can follow), as a key prefix; ``()`` for all
    of them; None when it ends none. A chat choice ends with its ``finish_reason``, a Responses item with its
    ``.done`` events, everything with the response's end or an error."""
    if obj.get("error"):
        return ()
    choices = obj.get("choices")
    if isinstance(choices, list):
        ended = [
            _choice_index(c.get("index"))
            for c in choices
            if isinstance(c, dict) and c.get("finish_reason") not in (None, "")
        ]
        if not ended:
            return None
        return ("chat", ended[0]) if len(ended) == 1 else ("chat",)
    kind = obj.get("type")
    if not isinstance(kind, str):
        return None
    if kind in ("error", "response.completed", "response.incomplete", "response.failed"):
        return ()
    if kind.startswith("response.") and kind.endswith(".done"):
        return ("resp", _plain(obj.get("output_index")))
    return None


def _ends(key: FragmentKey, prefix: FragmentKey) -> bool:
    """Whether a fragment key is among the texts an OpenAI event ends (``openai_ends``); an Anthropic block's key
    (index, field) only by an end of everything."""
    return key[: len(prefix)] == prefix if (not prefix or isinstance(key[0], str)) else False


_LINE = re.compile(rb"\r\n|\r|\n")
_LINE_KEEP = re.compile(rb"(\r\n|\r|\n)")  # (split with the line endings kept)
_BOM = SSE_BOM


def _parse_event(raw: bytes, first: bool = False) -> tuple[str | None, dict[str, Any] | None]:
    """The ``event:`` name and the JSON object of an SSE event's data (None, None when it is not such an event), as
    the stream engine reads them (``stream/sse.py``, the WHATWG rules): any line ending; comments and blank lines
    skipped; a field's name is what precedes the first colon (the whole line without one), its value what follows
    less one leading space; ``id``, ``retry`` and unknown fields ignored; invalid UTF-8 replaced (U+FFFD); one
    byte-order mark at the stream's start (``first``) skipped."""
    if first and raw.startswith(_BOM):
        raw = raw[3:]
    name: bytes | None = None
    data: list[bytes] = []
    for line in raw.split(b"\n") if b"\r" not in raw else _LINE.split(raw):
        if line.startswith(b"data:"):  # (the common lines first)
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line.startswith(b"event:"):
            name = line[7:] if line[6:7] == b" " else line[6:]
        elif line and line[:1] != b":":
            field_name, colon, value = line.partition(b":")
            value = value[1:] if colon and value[:1] == b" " else value
            if field_name == b"data":
                data.append(value)
            elif field_name == b"event":
                name = value
    if not data:
        return None, None
    text = data[0] if len(data) == 1 else b"\n".join(data)
    try:
        obj = exactjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # (bytes that are not UTF-8: the engine reads them as U+FFFD)
            obj = exactjson.loads(text.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None, None
    if not isinstance(obj, dict):
        return None, None
    return (None if name is None else name.decode("utf-8", "replace")), obj


def _with_data(raw: bytes, data: bytes, first: bool = False) -> bytes:
    """The event ``raw`` with its data lines replaced by one, ``data``; every other line (event, id, retry,
    comments) and every line ending kept as they came."""
    parts = _LINE_KEEP.split(raw)
    out: list[bytes] = []
    written = False
    for i in range(0, len(parts), 2):
        line, end = parts[i], parts[i + 1] if i + 1 < len(parts) else b""
        body = line[3:] if first and i == 0 and line.startswith(_BOM) else line
        if body.partition(b":")[0] == b"data":
            if written:
                continue
            written = True
            out += [line[: len(line) - len(body)], b"data: ", data, end]
        else:
            out += [line, end]
    return b"".join(out)


def _split_masked(text: str, frags: list[str], spans: list[tuple[int, int]]) -> list[str]:
    """The fragments of ``text`` with the spans masked: the fragment where a span begins gets ``[redacted]``, the
    characters of the span are removed from every fragment."""
    out: list[str] = []
    pos = 0
    for frag in frags:
        start, end = pos, pos + len(frag)
        pieces: list[str] = []
        cur = start
        for a, b in spans:
            if b <= start or a >= end:
                continue
            lo = max(a, start)
            if lo > cur:
                pieces.append(text[cur:lo])
            if a >= start:
                pieces.append(REDACTED)
            cur = max(cur, min(b, end))
        if cur < end:
            pieces.append(text[cur:end])
        out.append("".join(pieces))
        pos = end
    return out


# --- the process: every string that leaves it ----------------------------------------------------------------------
#
# One SecretSet for the whole process, fed by every credential a request is seen to carry (``credential_values``), by
# the keys the process was given (``learn``; the CLI learns the credential environment variables), and read by one
# output guard (``output_guard``): sys.stdout / sys.stderr (text and .buffer) mask what they are written, every log
# record is masked as it is made (message, arguments, traceback), and so are uncaught exceptions' tracebacks.

PROCESS_SECRETS = (
    SecretSet()
)  # (the distinct credentials the process sees, at most MAX_SECRETS: the environment's kept)
# the values of the credential environment variables the process was started with (``OutputGuard`` learns them):
# every session's one publisher masks them too, so that a key shown by a session's content never reaches a
# recording in clear either (PROCESS_SECRETS also holds what requests carried: each session has its own of those)
ENVIRONMENT_KEYS: list[str] = []


def learn(secrets: Iterable[str] | str, *, pin: bool = False, use: bool = False) -> list[str]:
    """Secrets every output of this process must mask from now on; returns the new ones. ``pin``: never forgotten
    (the environment's); the others are forgotten only past ``MAX_SECRETS`` distinct ones, the least recently seen
    first, but not while in use (``use``: until `unlearn_use`; see ``SecretSet``)."""
    return PROCESS_SECRETS.add(secrets, pin=pin, use=use)


def unlearn_use(secrets: Iterable[str] | str) -> None:
    """Secrets learned with ``use=True`` are no longer in use (still masked until forgotten)."""
    PROCESS_SECRETS.release(secrets)


def mask_known(text: str) -> str:
    """``text`` with every secret known to the process masked (as it is or JSON-escaped)."""
    m = PROCESS_SECRETS.matcher  # (one read: another thread may learn a key meanwhile)
    return mask_text(text, m) if m else text


_ENV_CREDENTIAL = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|AUTH_TOKEN|ACCESS_TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_ENV_PROXY = re.compile(r"(?:^|_)PROXY$", re.IGNORECASE)


def env_secrets(environ: Mapping[str, str]) -> list[str]:
    """The secrets in an environment: the values of ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``...
    (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``), and the credentials in ``*_PROXY`` URLs
    and in ``ANTHROPIC_BASE_URL``-like URLs (``https://user:KEY@relay``, ``?api_key=``)."""
    out: list[str] = []
    for name, value in environ.items():
        if not value:
            continue
        if _ENV_CREDENTIAL.search(name) and not value.startswith(("/", "~", ".")):
            out.extend(auth_values(value))
        elif ("://" in value or "@" in value) and (_ENV_PROXY.search(name) or name.upper().endswith("_URL")):
            out.extend(credential_values((), value))
    return usable_secrets(out)


class _Masking:
    """A text stream's stand-in that masks the process's secrets in what it is written. The tail of a write that
    could be the beginning of a secret is held until the next write (a key written in two pieces is still masked)
    or ``flush()``."""

    def __init__(self, inner: TextIO, lock: AbstractContextManager[bool]) -> None:
        self._inner = inner
        self._held = ""
        self._held_bytes = ""  # what its .buffer holds (bytes as surrogate-escaped text)
        self._lock = lock

    def _mask(self, text: str) -> str:
        keys = PROCESS_SECRETS.matcher
        if not keys:
            out, self._held = self._held + text, ""
            return out
        text = self._held + text
        masked = mask_text(text, keys)
        cut = keys.hold_from(masked)
        self._held = masked[cut:]
        return masked[:cut]

    def write(self, text: str) -> int:
        with self._lock:
            if self._held_bytes:  # what the binary layer holds goes first (the order is kept)
                self.buffer.release()
            out = self._mask(text)
            if out:
                self._inner.write(out)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, ""
            if held:
                self._inner.write(held)
            if self._held_bytes:
                self.buffer.release()

    def flush(self) -> None:
        self.release()
        self._inner.flush()

    def write_bytes(self, sink: IO[bytes], raw: bytes) -> None:
        """Its ``.buffer``'s write into ``sink`` (the inner binary stream): ``raw`` masked the same way (read as UTF-8,
        other bytes kept as they are), after what the text layer holds; the tail that could begin a key is held."""
        with self._lock:
            if self._held:  # what the text layer holds goes first (the order is kept)
                held, self._held = self._held, ""
                self._inner.write(held)
                self._inner.flush()
            keys = PROCESS_SECRETS.matcher
            if not keys and not self._held_bytes:
                sink.write(raw)
                return
            chars = self._held_bytes + raw.decode("utf-8", "surrogateescape")
            masked = mask_text(chars, keys) if keys else chars
            cut = keys.hold_from(masked) if keys else len(masked)
            self._held_bytes = masked[cut:]
            out = masked[:cut].encode("utf-8", "surrogateescape")
            if out:
                sink.write(out)

    def release_bytes(self, sink: IO[bytes]) -> None:
        """Write what its ``.buffer`` holds into ``sink``."""
        with self._lock:
            held, self._held_bytes = self._held_bytes, ""
            if held:
                sink.write(held.encode("utf-8", "surrogateescape"))

    @property
    def buffer(self) -> _MaskingBinary:
        inner: IO[bytes] | None = getattr(self._inner, "buffer", None)  # (a StringIO has none)
        if inner is None:
            raise AttributeError("buffer")
        return _MaskingBinary(inner, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _MaskingBinary:
    """``sys.stdout.buffer`` behind the guard: bytes masked the same way (read as UTF-8, other bytes kept as they
    are), the tail that could begin a key held until the next write or ``flush()``."""

    def __init__(self, inner: IO[bytes], text: _Masking) -> None:
        self._inner = inner
        self._text = text

    def write(self, data: bytes | bytearray | memoryview) -> int:
        raw = bytes(data)
        self._text.write_bytes(self._inner, raw)
        return len(raw)

    def release(self) -> None:
        self._text.release_bytes(self._inner)

    def flush(self) -> None:
        self.release()
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _mask_record_args(args: Any) -> Any:
    def one(a: Any) -> Any:
        if isinstance(a, (str, bytes, bytearray)):
            return redact(a, PROCESS_SECRETS.matcher)
        if isinstance(a, (int, float, type(None))):
            return a
        try:
            text = str(a)
        except Exception:  # noqa: BLE001 (an argument's own __str__ may raise anything: the log call must not fail)
            return a
        masked = mask_known(text)
        return a if masked == text else masked

    if isinstance(args, Mapping):
        return {k: one(v) for k, v in args.items()}
    if isinstance(args, tuple):
        return tuple(one(a) for a in args)
    return args


def _mask_record(record: Any) -> Any:
    """A log record with the process's secrets masked: message, arguments (types kept where nothing changed, so
    formatters that read them still work) and the traceback text."""
    if not PROCESS_SECRETS.secrets:
        return record
    import logging

    try:
        if isinstance(record.msg, str):
            record.msg = mask_known(record.msg)
        if record.args:
            record.args = _mask_record_args(record.args)
        message = record.getMessage()
        masked = mask_known(message)
        if masked != message:  # (a key split across arguments)
            record.msg, record.args = masked, ()
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = mask_known(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = mask_known(record.stack_info)
    except Exception:  # noqa: BLE001 (a record that cannot be formatted: never let it pass unmasked)
        record.msg, record.args = "[a log record that could not be masked]", ()
        record.exc_info, record.exc_text = None, None
    return record


def _install_process_hooks() -> None:
    """The log record factory and the exception hooks that mask (they mask nothing while no secret is known). Each
    is installed unless it is already in place: one that something else replaced since (a test harness) is put
    back, wrapping what is there now."""
    import logging
    import sys
    import threading
    import traceback

    if not getattr(logging.getLogRecordFactory(), "inspector_masks", False):
        old_factory = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record: logging.LogRecord = _mask_record(old_factory(*args, **kwargs))
            return record

        factory.inspector_masks = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)

    if not getattr(sys.excepthook, "inspector_masks", False):
        old_hook = sys.excepthook

        def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
            if not PROCESS_SECRETS.secrets:
                old_hook(kind, exc, tb)
                return
            sys.stderr.write(mask_known("".join(traceback.format_exception(kind, exc, tb))))
            sys.stderr.flush()

        excepthook.inspector_masks = True  # type: ignore[attr-defined]
        sys.excepthook = excepthook

    if not getattr(threading.excepthook, "inspector_masks", False):
        old_thread_hook = threading.excepthook

        def thread_hook(args: Any) -> None:
            if not PROCESS_SECRETS.secrets or args.exc_type is SystemExit:
                old_thread_hook(args)
                return
            name = args.thread.name if args.thread is not None else "?"
            text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
            sys.stderr.write(mask_known(f"Exception in thread {name}:\n{text}"))
            sys.stderr.flush()

        thread_hook.inspector_masks = True  # type: ignore[attr-defined]
        threading.excepthook = thread_hook


class OutputGuard:
    """Mask the process's known secrets in everything it prints and logs while the guard is on:

        with OutputGuard(os.environ):
            ...

    Learns the secrets of ``environ`` (``env_secrets``), puts masking stand-ins in front of sys.stdout and
    sys.stderr (restored, their held tails written, on exit) and installs, once per process, the log record factory
    and the exception hooks that mask. Nested guards do not wrap twice."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> OutputGuard:
        import sys
        import threading

        if self.environ is not None:
            keys = env_secrets(self.environ)
            learn(keys, pin=True)
            ENVIRONMENT_KEYS[:] = usable_secrets([*ENVIRONMENT_KEYS, *keys])
        _install_process_hooks()
        if not isinstance(sys.stderr, _Masking) and not isinstance(sys.stdout, _Masking):
            self._saved = (sys.stdout, sys.stderr)
            lock = threading.RLock()
            if sys.stdout is not None:
                sys.stdout = _Masking(sys.stdout, lock)
            if sys.stderr is not None:
                sys.stderr = _Masking(sys.stderr, lock)
        return self

    def __exit__(self, *exc: object) -> None:
        import sys

        if self._saved is None:
            return
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Masking):
                try:
                    stream.release()
                except (OSError, ValueError):  # a closed or broken stream: nothing more can be written to it
                    pass
        sys.stdout, sys.stderr = self._saved
        self._saved = None

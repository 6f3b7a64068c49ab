"""Redaction, in one place: which headers are credentials, how long a secret must be to be masked, how headers are
cleaned before they are recorded, shown or logged, and how known secrets are masked in any value.

Credential headers are removed, not masked. A known secret (an API key) is replaced by ``[redacted]`` wherever it
occurs: in strings and bytes, through dicts, lists and tuples. Secrets shorter than ``MIN_SECRET_LENGTH`` are never
masked (they would match ordinary JSON text and wreck a file); they are still never written, because the headers
that carry them are dropped. For secrets split across network reads or deltas, or escaped in JSON, see
``StreamRedactor`` and docs/secrets.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_PARAMS",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "clean_headers",
    "credential_values",
    "redact",
    "usable_secrets",
]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "x-api-key", "anthropic-api-key", "api-key", "cookie", "set-cookie", "proxy-authorization"}
)
CREDENTIAL_QUERY_PARAMS = frozenset({"api_key", "api-key", "apikey", "key", "access_token"})


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("latin-1")  # the HTTP header charset
    return str(value)


def clean_headers(headers: Mapping[str, Any] | Iterable[tuple[Any, Any]] | None) -> dict[str, str]:
    """Headers as ``{lower-case name: value}`` without credential headers; repeated names joined with ``", "``.
    Accepts a mapping (httpx2.Headers, dict...) or ``(name, value)`` pairs; bytes are Latin-1."""
    if headers is None:
        return {}
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in pairs:
        key = _text(name).strip().lower()
        if key in CREDENTIAL_HEADERS:
            continue
        text = _text(value)
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def usable_secrets(secrets: Iterable[Any]) -> list[str]:
    """The secrets that can be masked safely (strings of at least MIN_SECRET_LENGTH), longest first, once each."""
    found = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH}
    return sorted(found, key=len, reverse=True)


def credential_values(headers: Iterable[tuple[str, str]], url: str | None = None) -> list[str]:
    """The secret strings a request carries: values of credential headers, the token after an auth scheme
    ("Bearer sk-..."), and credential query parameters (``?api_key=...``)."""
    out: list[str] = []

    def add(candidate: str) -> None:
        candidate = candidate.strip()
        if len(candidate) >= MIN_SECRET_LENGTH and candidate not in out:
            out.append(candidate)

    for name, value in headers:
        if _text(name).strip().lower() not in CREDENTIAL_HEADERS:
            continue
        value = _text(value).strip()
        add(value)
        if " " in value:
            add(value.split(" ", 1)[1])
    if url:
        for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=False):
            if key.lower() in CREDENTIAL_QUERY_PARAMS:
                add(value)
    return out


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every occurrence of a secret replaced by ``[redacted]``: in strings (dict keys too) and bytes,
    through dicts, lists and tuples (tuples come back as lists). Other values are returned as they are."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, (bytes, bytearray)):
        for secret in secrets:
            b = secret.encode()
            if b in value:
                value = value.replace(b, REDACTED.encode())
        return bytes(value)
    if isinstance(value, dict):
        return {redact(k, secrets) if isinstance(k, str) else k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value

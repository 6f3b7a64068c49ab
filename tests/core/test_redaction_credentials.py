"""Which headers and query parameters are credentials, and which secrets a request teaches: relay headers
(Helicone, Portkey, Cloudflare AI Gateway, OpenRouter, one-api), any auth scheme with any whitespace, Basic decoded,
percent-encoded query keys; and what must stay visible (rate-limit token counts, x-stainless-*, versions)."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.redaction import (
    REDACTED,
    auth_values,
    clean_headers,
    credential_values,
    env_secrets,
    is_credential,
    mask_text,
)
from inspector.testing.hyp import examples
from inspector.testing.secrets import assert_no_key, longest_common_substring

KEY = "sk-ant-api03-Zq8VxW3kLm0pRt7uYb2NcE5hJf9-core"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkiLCJuIjoxMjM0NTY3ODl9.c2lnbmF0dXJlLWNhbmFyeS0xMjM0"

RELAY_HEADERS = [
    "helicone-auth",
    "cf-aig-authorization",
    "x-portkey-api-key",
    "x-portkey-virtual-key",
    "x-api-key",
    "api-key",
    "authorization",
    "proxy-authorization",
    "x-goog-api-key",
    "x-auth-token",
    "openrouter-token",
    "x-client-secret",
]
VISIBLE = {
    "x-stainless-lang": "python",
    "x-stainless-retry-count": "0",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "token-efficient-tools-2025-02-19",
    "content-type": "application/json",
    "accept-encoding": "gzip, deflate",
    "anthropic-ratelimit-tokens-limit": "400000",
    "anthropic-ratelimit-output-tokens-remaining": "79000",
    "anthropic-ratelimit-tokens-reset": "2026-12-01T11:30:21Z",
    "x-ratelimit-reset-tokens": "6m0s",
    "x-ratelimit-remaining-tokens": "149984",
    "x-max-tokens": "100",
    "idempotency-key": "stainless-python-retry-0b1c2d3e-4f50",
    "www-authenticate": 'Bearer realm="api"',
    "request-id": "req_011CZ1abcdefghijk",
}


def learned(headers: Any = (), url: Any = None) -> str:
    """The request's learned secrets applied to a text that echoes the key in every way."""
    secrets = credential_values(headers, url)
    return mask_text(f"echo {KEY} and {JWT} done", secrets)


@pytest.mark.parametrize("name", RELAY_HEADERS)
def test_relay_credential_headers_are_dropped_and_learned(name: Any) -> None:
    for value in (KEY, f"Bearer {KEY}", f"Bearer\t{KEY}", f"bearer   {KEY}"):
        assert clean_headers({name: value, "x-stainless-lang": "python"}) == {"x-stainless-lang": "python"}
        assert KEY in credential_values({name: value})


def test_counts_versions_and_sdk_headers_stay_visible() -> None:
    assert clean_headers(VISIBLE) == VISIBLE
    assert not any(is_credential(k, v) for k, v in VISIBLE.items())
    assert credential_values(VISIBLE) == []


def test_a_token_named_header_with_a_secret_value_is_a_credential() -> None:
    # the name alone (only "token") is not enough to hide it; a value that is not a count is
    assert is_credential("x-ratelimit-tokens", "Zq8VxW3kLm0pRt7u")
    assert is_credential("anthropic-ratelimit-tokens-remaining", KEY)
    assert not is_credential("anthropic-ratelimit-tokens-remaining", "12")


@pytest.mark.parametrize("value", [KEY, JWT, f"Bearer {KEY}", f"Token\t{JWT}", "sk-proj-abcdefghijklmnop1234"])
def test_a_key_shaped_value_is_a_credential_whatever_the_name(value: Any) -> None:
    assert is_credential("x-whatever", value)
    assert clean_headers({"x-whatever": value}) == {}


def test_a_key_inside_another_header_is_learned_and_the_header_kept() -> None:
    headers = {"x-custom": f"key={KEY}; model=m", "x-note": f"jwt {JWT}!"}
    assert clean_headers(headers) == headers  # the truth: the headers were sent (the writer masks the keys in them)
    assert learned(headers) == f"echo {REDACTED} and {REDACTED} done"


def test_basic_auth_learns_the_token_the_pair_and_the_password() -> None:
    token = base64.b64encode(f"user:{KEY}".encode()).decode()
    values = auth_values(f"Basic {token}")
    assert values == [f"Basic {token}", token, f"user:{KEY}", KEY]
    assert learned({"Authorization": f"Basic  {token}"}) == f"echo {REDACTED} and {JWT} done"
    # url-safe and unpadded
    token2 = base64.urlsafe_b64encode(f"u:{KEY}".encode()).decode().rstrip("=")
    assert KEY in auth_values(f"basic {token2}")


def test_auth_params_learn_only_credential_params() -> None:
    value = f'Digest username="bob", realm="api", uri="/v1/messages", response="{KEY}", nonce="0123456789"'
    values = auth_values(value)
    assert KEY in values and "/v1/messages" not in values and "0123456789" not in values


@pytest.mark.parametrize(
    "query",
    [
        f"api_key={KEY}",
        f"api_key={quote(KEY, safe='')}",
        "api_key=" + "".join(f"%{b:02X}" for b in KEY.encode()),  # every byte encoded
        "api_key=" + KEY.replace("-", "%2D"),
        f"key={KEY}",
        f"x-api-key={KEY}",
        f"access_token={JWT}",
        f"cf-aig-authorization=Bearer%20{KEY}",
        f"auth=Bearer+{KEY}",
        f"anything={quote(KEY)}",
    ],
)
def test_query_credentials_are_learned_as_sent_and_decoded(query: Any) -> None:
    url = f"https://relay.example/v1/messages?beta=true&{query}"
    secrets = credential_values((), url)
    assert mask_text(url, secrets).endswith(REDACTED)  # the URL as recorded
    secret = JWT if "access_token" in query else KEY
    assert mask_text(f"echo {secret} done", secrets) == f"echo {REDACTED} done"  # its echo, decoded


def test_counts_in_the_query_stay() -> None:
    assert credential_values((), "https://x/v1/messages?max_tokens=12345678&beta=true&tokens=100000000") == []


def test_a_password_in_the_url_is_learned() -> None:
    assert KEY in credential_values((), f"https://user:{quote(KEY, safe='')}@relay.example/v1")


def test_a_key_as_the_url_user_or_in_a_url_urlsplit_refuses_is_learned() -> None:
    """A token alone before the host's @ (https://TOKEN@relay, curl's TOKEN:), a key-shaped user name, and the
    password of a URL without a scheme or with a broken IPv6 host: each printed in clear in watch's lines and its
    recording (only a password that urlsplit could read was learned)."""
    for url in (
        f"https://{KEY}@relay.example/v1",
        f"https://{KEY}:@relay.example",
        f"https://{KEY}:x@relay.example",
        f"user:{KEY}@relay.example:8080",
        f"http://user:{KEY}@[::1",
    ):
        assert KEY in credential_values((), url), url
        assert KEY in env_secrets({"ANTHROPIC_BASE_URL": url}), url
    assert KEY in credential_values((), f"http://[::1?api_key={KEY}")  # (the query of a URL urlsplit refuses)
    assert credential_values((), "https://user@relay.example/a@b") == []  # (a short user name is no secret)


def test_env_secrets() -> None:
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_AUTH_TOKEN": JWT,
        "HTTPS_PROXY": "http://bob:proxy-password-123@127.0.0.1:3128",
        "ANTHROPIC_BASE_URL": f"https://relay.example/?api_key={KEY}x",
        "SSH_AUTH_SOCK": "/tmp/ssh-0123456789/agent.1",
        "PATH": "/usr/bin:/bin",
        "TERM": "xterm-256color",
    }
    found = env_secrets(env)
    assert {KEY, JWT, "proxy-password-123", f"{KEY}x"} <= set(found)
    assert "/tmp/ssh-0123456789/agent.1" not in found and "xterm-256color" not in found


def test_longest_common_substring() -> None:
    assert longest_common_substring("abcdef", "xxcdexx") == 3
    assert longest_common_substring("abc", "") == 0
    assert longest_common_substring("abc", "zabcz") == 3
    with pytest.raises(AssertionError):
        assert_no_key(KEY, {"out": f"..{KEY[3:20]}.."})
    with pytest.raises(AssertionError):
        assert_no_key(KEY, {"out": quote(KEY, safe="").replace("-", "%2D")})
    assert_no_key(KEY, {"out": f"..{KEY[:12]}.. {REDACTED}"})


# --- hypothesis: names, casings, schemes, whitespace, encodings ----------------------------------------------------

_CASE = st.sampled_from([str.lower, str.upper, str.title, lambda s: s])
_SCHEMES = st.sampled_from(["Bearer", "bearer", "BEARER", "Token", "Api-Key", "Key", "Basic", "x-custom-scheme", ""])
_WS = st.text(alphabet=" \t", min_size=1, max_size=4)
_NAMES = st.sampled_from(RELAY_HEADERS) | st.builds(
    lambda pre, word, post: f"{pre}{word}{post}",
    st.sampled_from(["", "x-", "x-my-relay-", "cf-aig-", "helicone-", "x-portkey-"]),
    st.sampled_from(["auth", "authorization", "api-key", "key", "token", "secret", "password", "credential"]),
    st.sampled_from(["", "-v2", "-header"]),
)
_KEYS = st.sampled_from([KEY, JWT, "sk-proj-AbCdEfGhIjKlMnOp_1234-x", "sk-or-v1-0123456789abcdef0123"]) | st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=16, max_size=48
)


@settings(max_examples=examples(300), deadline=None)
@given(name=_NAMES, case=_CASE, scheme=_SCHEMES, ws=_WS, key=_KEYS, user=st.sampled_from(["", "user", "api"]))
def test_any_credential_header_form_is_dropped_and_its_key_learned(
    name: Any, case: Any, scheme: Any, ws: Any, key: Any, user: Any
) -> None:
    if scheme.lower() == "basic":
        value = f"{scheme}{ws}" + base64.b64encode(f"{user}:{key}".encode()).decode()
    else:
        value = f"{scheme}{ws}{key}" if scheme else key
    headers = [(case(name), value), ("X-Stainless-Lang", "python"), ("anthropic-version", "2023-06-01")]
    assert clean_headers(headers) == {"x-stainless-lang": "python", "anthropic-version": "2023-06-01"}
    echoed = f"upstream says: {key}, {value}."
    masked = mask_text(echoed, credential_values(headers))
    assert_no_key(key, {"echo": masked}, limit=min(12, len(key) - 1))


@settings(max_examples=examples(200), deadline=None)
@given(
    pname=st.sampled_from(["api_key", "api-key", "apikey", "key", "access_token", "token", "x-portkey-api-key"]),
    key=_KEYS,
    which=st.sets(st.integers(0, 60)),
    plus=st.booleans(),
)
def test_any_percent_encoding_of_a_query_key_is_learned(pname: Any, key: Any, which: Any, plus: Any) -> None:
    enc = "".join(f"%{ord(c):02X}" if i in which else c for i, c in enumerate(key))
    url = f"https://relay.example/v1/messages?beta=true&{quote(pname)}={enc}" + ("&x=a+b" if plus else "")
    secrets = credential_values((), url)
    assert_no_key(key, {"url": mask_text(url, secrets), "echo": mask_text(f"{key}|{url}", secrets)})


@settings(max_examples=examples(200), deadline=None)
@given(
    name=st.sampled_from(
        ["anthropic-ratelimit-tokens-remaining", "x-ratelimit-limit-tokens", "x-max-tokens", "openai-tokens-used"]
    ),
    case=_CASE,
    value=st.integers(0, 10**9).map(str)
    | st.sampled_from(["6m0s", "1s", "20ms", "1h2m3.5s", "2026-12-01T11:30:21Z", "2026-12-01T11:30:21.5+01:00"]),
)
def test_token_counts_are_never_hidden(name: Any, case: Any, value: Any) -> None:
    assert clean_headers([(case(name), value)]) == {name: value}


@settings(max_examples=examples(400), deadline=None)
@given(
    headers=st.lists(st.tuples(st.text(max_size=30), st.text(max_size=80) | st.binary(max_size=80)), max_size=6),
    url=st.text(max_size=120)
    | st.builds(lambda q: f"https://[{q}@x/?{q}", st.text(max_size=40))
    | st.builds(lambda q: f"https://u:{q}@relay/v1?api_key={q}&{q}", st.text(max_size=40)),
)
def test_hostile_headers_and_urls_never_raise(headers: Any, url: Any) -> None:
    """Fuzz: any names, values (text or bytes) and URLs (broken IPv6 hosts, stray % and @): no exception, and
    every learned secret is a string long enough to mask."""
    secrets = credential_values(headers, url)
    assert all(isinstance(s, str) and len(s) >= 8 for s in secrets)
    kept = clean_headers(headers)
    assert all(not is_credential(k, v) for k, v in kept.items())

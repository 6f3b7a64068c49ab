"""The recording behind any relay: a key sent in any credential form -- any header name a relay uses, any casing,
any auth scheme, any whitespace after it, Basic, any percent-encoding in the query -- is learned by the writer from
the request, and neither the request line nor upstream's echo of it (split across reads) keeps it."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.record.dump import dump_turns
from inspector.record.recording import RecordingWriter, read_recording
from inspector.testing.hyp import examples
from inspector.testing.secrets import assert_no_key
from inspector.testing.streamgen import sse, text_turn

URL = "https://relay.example/v1/messages"
NAMES = st.sampled_from(
    [
        "helicone-auth",
        "cf-aig-authorization",
        "x-portkey-api-key",
        "x-portkey-virtual-key",
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "openrouter-auth-token",
        "x-one-api-token",
    ]
)
CASINGS = st.sampled_from([str.lower, str.upper, str.title])
SCHEMES = st.sampled_from(["", "Bearer", "bearer", "BEARER", "Basic", "basic", "Token", "Api-Key"])
WS = st.text(alphabet=" \t", min_size=1, max_size=3)
KEYS = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-ant-api03-", "sk-proj-", "sk-or-v1-", "pk-", ""]),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=20, max_size=40),
)


def record(headers: list[tuple[str, str]], url: str, echo: str, cut: int) -> bytes:
    out = io.BytesIO()
    body = sse(*text_turn(f"you sent {echo} ok"))
    cut = cut % len(body)
    with RecordingWriter(out, source={"type": "test"}, secrets=[]) as w:
        w.request(0, 0, 0.0, "POST", url, headers, {"model": "m"})
        w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
        w.read(0, 0, 0.2, body[:cut])
        w.read(0, 0, 0.3, body[cut:])
        w.end(0, 0, 1.0, "complete")
    return out.getvalue()


def outputs(raw: bytes) -> dict[str, bytes | str]:
    rec = read_recording(raw)
    att = list(rec.attempts())[0]
    return {
        "file": raw,
        "reads": att.data,
        "request": orjson.dumps(att.request),
        "dump": orjson.dumps(dump_turns(rec)),
    }


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=NAMES,
    case=CASINGS,
    scheme=SCHEMES,
    ws=WS,
    key=KEYS,
    user=st.sampled_from(["", "u", "api"]),
    cut=st.integers(0, 10**6),
)
def test_a_key_in_any_credential_header_form_is_recorded_nowhere(
    name: str, case: Callable[[str], str], scheme: str, ws: str, key: str, user: str, cut: int
) -> None:
    if scheme.lower() == "basic":
        value = scheme + ws + base64.b64encode(f"{user}:{key}".encode()).decode()
    else:
        value = f"{scheme}{ws}{key}" if scheme else key
    headers = [(case(name), value), ("anthropic-version", "2023-06-01"), ("X-Stainless-Lang", "python")]
    raw = record(headers, URL, key, cut)
    assert_no_key(key, outputs(raw))
    req = read_recording(raw).turns[0].attempts[0].request
    assert req is not None
    assert req["headers"] == {"anthropic-version": "2023-06-01", "x-stainless-lang": "python"}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pname=st.sampled_from(["api_key", "api-key", "apikey", "key", "access_token", "token", "auth"]),
    key=KEYS,
    encoded=st.sets(st.integers(0, 60)),
    lower_hex=st.booleans(),
    cut=st.integers(0, 10**6),
)
def test_a_key_in_the_query_in_any_percent_encoding_is_recorded_nowhere(
    pname: str, key: str, encoded: set[int], lower_hex: bool, cut: int
) -> None:
    hexfmt = "%{:02x}" if lower_hex else "%{:02X}"
    enc = "".join(hexfmt.format(ord(c)) if i in encoded else c for i, c in enumerate(key))
    url = f"{URL}?beta=true&{pname}={enc}&max_tokens=12345678"
    raw = record([("anthropic-version", "2023-06-01")], url, key, cut)
    assert_no_key(key, outputs(raw))
    req = read_recording(raw).turns[0].attempts[0].request
    assert req is not None
    assert req["url"].startswith(f"{URL}?beta=true&{pname}=[redacted]") and req["url"].endswith("max_tokens=12345678")

"""Every HTTP try under the SDK, the ones it retries by itself included: observations (HttpTryFailed, WAITING_RETRY),
headless lines and JSON, recordings (each failed try its own attempt) and replay (served again, the SDK retries them
as it did). One case per HTTP path: 429, 529, 500 with x-should-retry: true, connection refused, a 400 not retried."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx2
import orjson
import pytest
from anthropic._models import FinalRequestOptions
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.agent.tries import retry_wait, sdk_would_retry
from inspector.cli.headless import JsonPrinter, ProgressPrinter
from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.record.recording import read_recording
from inspector.record.replay import ReplayServer
from inspector.scenarios.bundled import fast
from inspector.scenarios.model import HttpError, Scenario, TextBlock, TurnScript
from inspector.scenarios.transport import ScenarioServer
from inspector.sessions.sources import Session, replay_session, scenario_session
from inspector.testing.hyp import examples
from inspector.testing.loop import (
    Lines,
    Observed,
    assert_no_leftovers,
    assert_valid_history,
    custom_scenario,
    run_observed,
)


@dataclass
class Case:
    name: str
    status: str  # how the run ends
    requests: int
    # (turn, try_index, HTTP status or None for a connection failure, error type, retried by the SDK)
    tries: list[tuple[int, int, int | None, str | None, bool]]
    # the recorded attempts: (turn, attempt, HTTP status or None, end status)
    recorded: list[tuple[int, int, int | None, str]]
    scenario: Scenario | None = None  # a test scenario (else bundled)


def _bad_request() -> Scenario:
    return Scenario(
        name="test_bad_request",
        description="test: a 400 the SDK does not retry",
        prompt="hi",
        system=None,
        turns=[
            TurnScript(
                blocks=[TextBlock("hello")],
                pacing=fast(),
                http_errors=[HttpError(400, attempt=0, message="messages.0.content: Input should be a valid list")],
            )
        ],
    )


CASES = [
    Case(
        "rate_limited",  # a 429 on turn 1, a 529 on turn 2
        "finished",
        4,
        [(0, 0, 429, "rate_limit_error", True), (1, 0, 529, "overloaded_error", True)],
        [(0, 0, 429, "http_error"), (0, 1, 200, "complete"), (1, 0, 529, "http_error"), (1, 1, 200, "complete")],
    ),
    Case(
        "server_error_retry",
        "finished",
        2,
        [(0, 0, 500, "api_error", True)],
        [(0, 0, 500, "http_error"), (0, 1, 200, "complete")],
    ),
    Case(
        "connection_refused",
        "finished",
        2,
        [(0, 0, None, None, True)],
        [(0, 0, None, "connection_error"), (0, 1, 200, "complete")],
    ),
    Case(
        "test_bad_request",
        "error",
        1,
        [(0, 0, 400, "invalid_request_error", False)],
        [(0, 0, 400, "http_error")],
        scenario=_bad_request(),
    ),
]


def _tries(obs: Observed) -> list[tuple[int, int, int | None, str | None, bool]]:
    return [(o.turn, o.try_index, o.status, o.error_type, o.retry_in is not None) for o in obs.of(O.HttpTryFailed)]


def _server(s: Session) -> ScenarioServer:
    """The scripted server scenario_session serves the session from (``Session.server``)."""
    server = s.server
    assert isinstance(server, ScenarioServer)
    return server


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_every_try_is_seen_recorded_and_replayed(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = custom_scenario(monkeypatch, case.scenario) if case.scenario else case.name
    path = tmp_path / "rec.jsonl"
    s = scenario_session(name, speed=math.inf, record=path)
    lines, json_lines = Lines(), Lines()
    s.bus.subscribe(ProgressPrinter(lines))  # type: ignore[arg-type]
    s.bus.subscribe(JsonPrinter(json_lines))  # type: ignore[arg-type]
    result, obs = await run_observed(s)
    assert result.status == case.status, result.error
    assert len(_server(s).requests) == case.requests

    # observations: one HttpTryFailed per failed try, with its status, error type and the SDK's decision
    assert _tries(obs) == case.tries
    for f in obs.of(O.HttpTryFailed):
        assert f.url.endswith("/v1/messages") and f.method == "POST"
        assert set(f.headers) <= {"retry-after", "retry-after-ms", "request-id", "x-should-retry"}
        if f.status is None:
            assert f.connection_error is not None and "Connection refused" in f.connection_error and f.body is None
        else:
            assert f.connection_error is None
            assert f.body["type"] == "error" and f.body["error"]["type"] == f.error_type
            assert f.error_message == f.body["error"]["message"]
    # the loop's attempts are unchanged: one per turn; the stream came from the try after the failed ones
    assert len(obs.of(O.AttemptStarted)) == result.turns
    retried = {t for t, _, _, _, again in case.tries if again}
    assert [(r.turn, r.try_index) for r in obs.of(O.ResponseStarted)] == [
        (t, 1 if t in retried else 0) for t in range(result.turns) if case.status == "finished"
    ]
    # while the SDK waits, so does the loop, saying why
    waits = [o for o in obs.of(O.LoopStateChanged) if o.state == LoopState.WAITING_RETRY]
    assert len(waits) == len(retried)
    for w, f in zip(waits, [f for f in obs.of(O.HttpTryFailed) if f.retry_in is not None], strict=True):
        assert f.retry_in is not None
        assert w.detail == O.try_failure_text(f.status, f.error_type, f.connection_error) + " · " + (
            "SDK retries in " + (f"{f.retry_in * 1000:.0f} ms" if f.retry_in < 1 else f"{f.retry_in:.2f} s")
        )
        assert obs.items.index(f) < obs.items.index(w)

    # headless lines and JSON
    text = lines.text()
    shown = [ln.strip().split(None, 1)[1] for ln in text if " · SDK retries in " in ln or " · not retried" in ln]
    assert len(shown) == len(case.tries)
    for line, (_, _, status, etype, again) in zip(shown, case.tries, strict=True):
        head = (
            f"HTTP {status} {etype}" if status else "connection failed (ConnectError: [Errno 111] Connection refused)"
        )
        assert line.startswith(head), line
        assert line.endswith("not retried") != again
    as_json = [orjson.loads(x) for x in json_lines.text()]
    assert [(j["turn"], j["try_index"], j["status"]) for j in as_json if j["type"] == "http_try_failed"] == [
        (t, k, st_) for t, k, st_, _, _ in case.tries
    ]

    # the recording: each failed try is an attempt of its own, with its error body
    rec = read_recording(path)
    assert rec.warnings == []
    got = [(a.turn, a.attempt, (a.response or {}).get("status"), (a.end or {}).get("status")) for a in rec.attempts()]
    assert got == case.recorded
    for a in rec.attempts():
        assert a.request is not None and a.request["body"]["messages"]
        assert a.end is not None
        if a.end["status"] == "http_error":
            assert orjson.loads(a.data)["type"] == "error"

    # the replay: the same tries, the SDK retrying them as it did, to the same end
    r = replay_session(path)
    replayed, obs2 = await run_observed(r)
    assert replayed.status == result.status
    assert replayed.error == result.error
    replay_server = r.server
    assert isinstance(replay_server, ReplayServer)
    assert replay_server.received == case.requests
    assert _tries(obs2) == case.tries
    assert replayed.messages == result.messages
    assert_valid_history(replayed.messages)
    assert_no_leftovers()


async def test_reads_are_timed_from_the_try_that_streamed() -> None:
    # the SDK's backoff after a refused connection is not part of the stream's time to first byte
    s = scenario_session("connection_refused", speed=math.inf)
    result, obs = await run_observed(s)
    assert result.status == "finished"
    (resp,) = obs.of(O.ResponseStarted)
    (failed,) = obs.of(O.HttpTryFailed)
    assert resp.try_index == 1 and resp.t_sent is not None and resp.t_sent > failed.t
    for read in obs.of(O.ReadReceived):
        assert read.t - read.t_request == pytest.approx(resp.t_sent, abs=0.01)  # the backoff is >= 0.375 s


async def test_a_429_without_retries_left_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    errors = [HttpError(429, attempt=a, retry_after_ms=1) for a in range(3)]
    sc = Scenario(
        name="test_429_forever",
        description="test",
        prompt="hi",
        system=None,
        turns=[TurnScript(blocks=[TextBlock("hello")], pacing=fast(), http_errors=errors)],
    )
    s = scenario_session(custom_scenario(monkeypatch, sc), speed=math.inf)
    result, obs = await run_observed(s)
    assert result.status == "error" and result.error is not None and result.error.startswith("HTTP 429")
    # max_retries 2: three tries, the last one not retried
    assert [(f.try_index, f.retry_in is not None) for f in obs.of(O.HttpTryFailed)] == [
        (0, True),
        (1, True),
        (2, False),
    ]


# ------------------------------------------------------------------------------------ the SDK's own retry rule
HEADER_VALUES = st.one_of(
    st.none(),
    st.sampled_from(["0", "1", "250", "-5", "abc", "1.5", "", "Wed, 21 Oct 2015 07:28:00 GMT"]),
    st.floats(min_value=-10, max_value=1e5, allow_nan=False).map(lambda f: f"{f:g}"),
)


SDK_CLIENT = anthropic.AsyncAnthropic(api_key="k" * 20, max_retries=6)


@settings(max_examples=examples(300), deadline=None)
@given(
    status=st.sampled_from([400, 401, 403, 404, 408, 409, 413, 429, 500, 502, 503, 529]),
    should=st.sampled_from([None, "true", "false", "maybe"]),
    ms=HEADER_VALUES,
    secs=HEADER_VALUES,
    taken=st.integers(0, 5),
)
def test_retry_rule_matches_the_sdk(
    status: int, should: str | None, ms: str | None, secs: str | None, taken: int
) -> None:
    client = SDK_CLIENT
    raw = {"x-should-retry": should, "retry-after-ms": ms, "retry-after": secs}
    headers = httpx2.Headers({k: v for k, v in raw.items() if v is not None})
    assert sdk_would_retry(status, headers) == client._should_retry(httpx2.Response(status, headers=headers))
    options = FinalRequestOptions.construct(method="post", url="/v1/messages")
    sdk = client._calculate_retry_timeout(6 - taken, options, headers)
    ours = retry_wait(taken, headers)
    if sdk == ours:
        return
    # without a usable retry-after the SDK takes up to 25 % off the backoff at random; a date is relative to now
    date = secs is not None and "GMT" in secs
    assert date or 0.75 * ours <= sdk <= ours


async def test_tries_over_real_http_against_serve_with_http_429(tmp_path: Path) -> None:
    # `inspector serve --fault http_429` answers the first request of every turn with a 429: the SDK retries it by
    # itself, and every one of those tries is seen, over a real socket, through the default HTTP client
    from inspector.net.serve import ServeApp
    from inspector.net.server import BackgroundServer
    from inspector.scenarios.bundled import get_scenario
    from inspector.sessions.sources import api_session

    sc = get_scenario("parse_date")
    assert sc.workspace_path is not None
    with BackgroundServer(ServeApp("parse_date", faults="http_429", speed=math.inf)) as srv:
        s = api_session(
            sc.model,
            sc.prompt,
            api_key="sk-test-serve-0123456789",
            base_url=srv.base_url,
            workspace=sc.workspace_path,
            record=tmp_path / "serve.jsonl",
        )
        result, obs = await run_observed(s)
    assert result.status == "finished", result.error
    assert [(f.turn, f.try_index, f.status, f.error_type) for f in obs.of(O.HttpTryFailed)] == [
        (t, 0, 429, "rate_limit_error") for t in range(result.turns)
    ]
    assert all(f.retry_in is not None and f.headers.get("retry-after-ms") for f in obs.of(O.HttpTryFailed))
    rec = read_recording(tmp_path / "serve.jsonl")
    assert [(a.turn, (a.response or {}).get("status")) for a in rec.attempts()] == [
        (t, st_) for t in range(result.turns) for st_ in (429, 200)
    ]


@pytest.mark.parametrize("name", ["parse_date", "rate_limited"])
async def test_recorded_read_times_match_the_observed_ones(name: str, tmp_path: Path) -> None:
    # a read's recorded t is since its recorded request line: the same clock as ReadReceived.t_request, for the
    # first try (request line at the attempt's start) and for a try the SDK sent after a failed one
    path = tmp_path / "rl.jsonl"
    s = scenario_session(name, speed=math.inf, record=path)
    result, obs = await run_observed(s)
    assert result.status == "finished"
    rec = read_recording(path)
    ok = [a for a in rec.attempts() if (a.response or {}).get("status") == 200]
    assert all(a.request is not None for a in ok)
    recorded = [(a.turn, (a.request or {})["t"] + r.t) for a in ok for r in a.reads]
    sent = {o.turn: o.t_sent for o in obs.of(O.ResponseStarted)}
    assert [t for t, _ in recorded] == [o.turn for o in obs.of(O.ReadReceived)]
    for (turn, at), read in zip(recorded, obs.of(O.ReadReceived), strict=True):
        t_sent = sent[turn]
        assert t_sent is not None
        assert at == pytest.approx(t_sent + read.t_request, abs=1e-9)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode)))
def test_error_body_reader_never_raises(raw: bytes) -> None:
    from inspector.stream.protocol import parse_error_body

    body, etype, msg = parse_error_body(raw)
    assert etype is None or isinstance(etype, str)
    assert msg is None or isinstance(msg, str)
    if not raw:
        assert body is None
        return
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:  # not JSON: kept as text
        assert body == raw.decode("utf-8", "replace")
    else:  # JSON: kept as sent
        assert body == parsed


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate", "bogus"])
async def test_an_encoded_error_body_is_seen_decoded_and_the_sdk_gets_it_unchanged(encoding: str | None) -> None:
    import gzip
    import zlib

    from inspector.agent.loop import AgentLoop, LoopConfig

    payload = orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    encoders: dict[str, Callable[[bytes], bytes]] = {"gzip": gzip.compress, "deflate": zlib.compress}
    raw = encoders.get(encoding or "", bytes)(payload)
    headers = {"content-type": "application/json", "request-id": "req_1", "x-other": "dropped"}
    if encoding:
        headers["content-encoding"] = encoding

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(400, headers=headers, content=raw)

    client = anthropic.AsyncAnthropic(
        api_key="k" * 20,
        base_url="http://t.local",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    loop = AgentLoop(client, LoopConfig(model="m", prompt="hi"))
    seen: list[O.Observation] = []
    loop.bus.subscribe(seen.append)
    result = await loop.run()
    await client.close()
    (f,) = [o for o in seen if isinstance(o, O.HttpTryFailed)]
    assert f.status == 400 and f.retry_in is None and f.headers == {"request-id": "req_1"}
    if encoding == "bogus":  # a body that cannot be decoded is shown as received
        assert result.status == "error"
        return
    assert (f.error_type, f.error_message) == ("invalid_request_error", "bad")
    assert result.status == "error" and result.error == "HTTP 400: invalid_request_error: bad"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_an_error_body_that_does_not_decode_is_kept_as_received(encoding: str) -> None:
    """Fault path (the decode error narrowed from any exception to httpx2.DecodingError): bytes that claim an
    encoding they do not have are shown as received, and the headers that claimed it stay as they were."""
    from inspector.agent.tries import _decoded

    raw = b'{"type": "error"} not compressed \xff'
    headers = httpx2.Headers({"content-encoding": encoding, "content-type": "application/json"})
    assert _decoded(400, headers, raw) == raw
    assert _decoded(400, httpx2.Headers({"content-type": "application/json"}), raw) == raw

"""The fake Messages API's one core (inspector.scenarios.fakeapi.FakeApi): both transports -- ``inspector serve``
(uvicorn) and the in-process ``httpx2`` transport -- decide through it, so they cannot drift apart. Its checks follow
the history rules for every history (property), its attempts are counted per identical request or per turn, its
answers carry a request id of their own, the rate-limit headers and retry-after scaled by the speed."""

from __future__ import annotations

import math
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.pacing import Pacer
from inspector.net.inprocess import FaultedScenarioServer
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.scenarios import fakeapi
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.fakeapi import MAX_DEPTH, Decision, FakeApi, RateLimits, RequestIds, nesting_depth
from inspector.scenarios.transport import ScenarioServer
from inspector.stream.history import history_violation
from inspector.testing.hyp import examples
from inspector.testing.serve import API_HEADERS


def test_both_transports_decide_through_the_one_core() -> None:
    sc = get_scenario("weather")
    for api in (
        ServeApp(speed=math.inf).api,
        ScenarioServer(sc, Pacer(math.inf)).api,
        FaultedScenarioServer(sc, "bom", Pacer(math.inf)).api,
    ):
        assert type(api) is FakeApi


# (these two replace a test that searched the transports' source text for the core's function names: what they
# check is what that meant -- the core's verdict is the answer, and no transport has a second copy of the rules)
BODY = {"model": "claude-test", "max_tokens": 64, "stream": True}
ORPHAN_RESULT = [  # a tool_result that answers no tool_use: the history rules reject it
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "x"}]},
]


async def _post_to_both(messages: list[Any]) -> list[tuple[int, bytes]]:
    """POST one Messages request to each transport: ``inspector serve`` (a real socket) and the in-process one."""
    body = {**BODY, "messages": messages}
    out = []
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS, timeout=30) as h:
            r = await h.post("/v1/messages", json=body)
            out.append((r.status_code, r.content))
    inproc = ScenarioServer(get_scenario("weather"), Pacer(math.inf))
    async with httpx2.AsyncClient(
        base_url="http://fake", headers=API_HEADERS, transport=inproc.transport(), timeout=30
    ) as h:
        r = await h.post("/v1/messages", json=body)
        out.append((r.status_code, r.content))
    return out


async def test_the_cores_verdict_is_each_transports_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = Decision(400, "invalid_request_error", "the core said no (test verdict)")
    monkeypatch.setattr(FakeApi, "check", lambda self, body, **kw: verdict)
    for status, content in await _post_to_both([{"role": "user", "content": "hi"}]):
        assert status == 400
        assert orjson.loads(content)["error"]["message"] == "the core said no (test verdict)"


async def test_no_transport_checks_the_history_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = await _post_to_both(ORPHAN_RESULT)
    assert [status for status, _ in answers] == [400, 400]  # the rules reject it...
    monkeypatch.setattr(fakeapi, "history_violation", lambda messages: None)
    answers = await _post_to_both(ORPHAN_RESULT)
    assert [status for status, _ in answers] == [200, 200]  # ...and only the core's copy of them does
    for _, content in answers:
        assert b"event: message_stop" in content


# a small grammar of conversations: user text, assistant text / tool calls, user tool results (right or wrong)
IDS = st.sampled_from(["t1", "t2", "t3"])
MESSAGE = st.one_of(
    st.just({"role": "user", "content": "hi"}),
    st.builds(lambda t: {"role": "assistant", "content": [{"type": "text", "text": t}]}, st.text(max_size=5)),
    st.builds(
        lambda ids: {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in ids],
        },
        st.lists(IDS, min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        lambda ids: {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids],
        },
        st.lists(IDS, min_size=1, max_size=2, unique=True),
    ),
    st.just({"role": "system", "content": "x"}),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(MESSAGE, max_size=6), st.booleans())
def test_the_core_answers_exactly_the_history_rules(messages: list[dict[str, Any]], lenient: bool) -> None:
    api = FakeApi(lenient=lenient, strict=False, models=lambda: ["claude-sonnet-4-6"])
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True, "messages": messages}
    d = api.decide(body, name="s", turns=3)
    v = history_violation(messages)
    if v is not None:
        assert (d.status, d.etype, d.message, d.kind) == (400, "invalid_request_error", v.message, v.kind)
        assert api.attempts == {}  # a rejected request is no attempt
    else:
        assert not d.rejected and d.history == "ok" and d.attempt == 0
        assert d.turn == sum(1 for m in messages if m["role"] == "assistant")
        assert d.ended == (d.turn >= 3)


def test_attempts_per_identical_request_or_per_turn() -> None:
    u = [{"role": "user", "content": "hi"}]
    other = [{"role": "user", "content": "other"}]
    body = {"model": "m", "max_tokens": 5, "stream": True}
    by_request = FakeApi(lenient=True)
    got = [by_request.decide({**body, "messages": m}, name="s", turns=1).attempt for m in (u, u, other, u)]
    assert got == [0, 1, 0, 2]
    assert by_request.decide({**body, "messages": u}, name="s", turns=1, session="b").attempt == 0  # another session
    by_turn = FakeApi(lenient=True, attempts_by="turn")
    assert [by_turn.decide({**body, "messages": m}, name="s", turns=1).attempt for m in (u, u, other)] == [0, 1, 2]
    by_turn.reset()
    assert by_turn.decide({**body, "messages": u}, name="s", turns=1).attempt == 0
    with pytest.raises(ValueError):
        FakeApi(attempts_by="never")


def test_past_the_end_stream_only_lenient_and_models() -> None:
    u = [{"role": "user", "content": "hi"}]
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": u}
    assert FakeApi().decide(body, name="s", turns=0).ended  # a placeholder reply, by the transport
    strict = FakeApi(strict=True).decide(body, name="s", turns=0)
    assert (
        strict.status == 400
        and strict.message == "scenario 's' has 0 turns; no turn 0 (this request has 0 assistant messages)"
    )
    only = FakeApi(stream_only=True).decide(body, name="s", turns=1)
    assert only.status == 400 and only.message == "the scenario server only serves stream: true"
    unknown = {**body, "model": "claude-nope-1"}
    assert FakeApi(models=list).decide(unknown, name="s", turns=1).status == 404
    assert not FakeApi(models=None).decide(unknown, name="s", turns=1).rejected  # any model
    assert not FakeApi(lenient=True, models=list).decide(unknown, name="s", turns=1).rejected
    assert FakeApi().decide({**body, "max_tokens": 0}, name="s", turns=1).message == (
        "max_tokens: Input should be greater than or equal to 1"
    )
    assert FakeApi().decide([body], name="s", turns=1).message == "request body must be a JSON object"


def test_answer_headers_request_ids_ratelimits_and_retry_after() -> None:
    api = FakeApi(request_ids=RequestIds("seed"), ratelimits=RateLimits(clock=lambda: 0.0))
    rendered = {"request-id": "req_011Crendered00000000000", "retry-after": "2", "retry-after-ms": "2000"}
    error = orjson.dumps(
        {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "x"},
            "request_id": "req_011Crendered00000000000",
        }
    )
    h1, e1 = api.response_headers(429, rendered, error, {"messages": []}, speed=2.0)
    h2, e2 = api.response_headers(429, rendered, error, {"messages": []}, speed=2.0)
    assert h1["request-id"] != h2["request-id"] and len(h1["request-id"]) == len("req_011C") + 20
    assert orjson.loads(e1)["request_id"] == h1["request-id"] and orjson.loads(e2)["request_id"] == h2["request-id"]
    assert (h1["retry-after"], h1["retry-after-ms"]) == ("1", "1000")
    assert h1["anthropic-ratelimit-requests-remaining"] == "0"  # a 429: nothing left until its retry-after
    assert h1["anthropic-ratelimit-requests-reset"] == "1970-01-01T00:00:01Z"
    h3, _ = api.response_headers(200, {"request-id": "r"}, b"", {"messages": []})
    assert h3["anthropic-ratelimit-requests-remaining"] == "3999"
    plain = FakeApi()  # the in-process transport's settings: the rendered headers as they are
    assert plain.response_headers(200, {"request-id": "r"}, b"", {})[0] == {"request-id": "r"}


@settings(max_examples=examples(100), deadline=None)
@given(
    st.recursive(
        st.none() | st.integers(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=2), c, max_size=3),
        max_leaves=30,
    )
)
def test_nesting_depth_is_the_depth(value: object) -> None:
    def depth(v: object) -> int:
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        return 0

    assert nesting_depth(value) == depth(value)
    assert nesting_depth(value, limit=1) == min(depth(value), 2)


def test_nesting_depth_past_the_limit_stops_counting() -> None:
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    assert nesting_depth(deep) == MAX_DEPTH + 1

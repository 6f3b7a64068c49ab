"""Fuzz: `inspector serve`'s OpenAI endpoints answer any body with 200 (a stream or an object) or OpenAI's 4xx
error shape, never a 500 or a traceback; bytes that are not JSON get OpenAI's parse error."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2
from hypothesis import example, given, settings
from hypothesis import strategies as st

from inspector.net.serve import ServeApp

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["model", "messages", "input", "stream", "tools", "stream_options", "previous_response_id"]
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"])},
    optional={"content": JSON, "tool_calls": JSON, "tool_call_id": st.text(max_size=5), "type": JSON},
)
APP = ServeApp("weather", speed=math.inf, history=50)
HEADERS = {"authorization": "Bearer k", "content-type": "application/json"}


def bodies() -> st.SearchStrategy[Any]:
    valid_ish = st.fixed_dictionaries(
        {"model": st.just("gpt-4o")},
        optional={
            "messages": st.lists(MESSAGE, max_size=4),
            "input": st.text(max_size=5) | st.lists(MESSAGE | JSON, max_size=4),
            "stream": st.booleans(),
            "stream_options": JSON,
        },
    )
    return JSON | st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=5) | valid_ish


@settings(max_examples=150, deadline=None)
@given(body=bodies(), path=st.sampled_from(["/v1/chat/completions", "/v1/responses"]))
# found by this test in a CI-profile run: a TypeError in the handler (a 500), not OpenAI's 400
@example(body={"model": "gpt-4o", "messages": [{"role": "assistant", "tool_calls": True}]}, path="/v1/chat/completions")
async def test_any_json_body_gets_200_or_the_openai_error_shape(body: Any, path: str) -> None:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP.app), base_url="http://serve") as h:
        r = await h.post(path, content=json.dumps(body), headers=HEADERS)
    assert r.status_code in (200, 400, 404), r.content
    if r.status_code != 200:
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
        assert "\n" not in err["message"] and r.headers["x-request-id"].startswith("req_")
    elif body.get("stream") is True:
        assert r.headers["content-type"].startswith("text/event-stream")
    else:
        assert r.json()["object"] in ("chat.completion", "response")


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=64))
async def test_any_bytes_get_a_json_answer(raw: bytes) -> None:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP.app), base_url="http://serve") as h:
        r = await h.post("/v1/chat/completions", content=raw, headers=HEADERS)
    assert r.status_code in (200, 400, 404), r.content
    assert r.json()


async def test_tool_calls_that_are_not_an_array_get_openais_invalid_type_400() -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": 7}]}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP.app), base_url="http://serve") as h:
        r = await h.post("/v1/chat/completions", content=json.dumps(body), headers=HEADERS)
    assert r.status_code == 400
    assert r.json()["error"] == {
        "message": "Invalid type for 'messages[1].tool_calls': expected an array of objects, but got an integer instead.",
        "type": "invalid_request_error",
        "param": "messages[1].tool_calls",
        "code": "invalid_type",
    }

"""`inspector serve --recording FILE` with an OpenAI recording whose events are not the shapes their API names (a
chunk's ``choices[0]`` a list, a ``delta`` a string, a ``response.completed`` whose ``response`` is not an object,
...): a ``stream: false`` request gets the error JSON an API gives for a broken upstream (500 ``server_error``, the
message naming the event and the field), never uvicorn's bare 500 and a traceback; ``stream: true`` replays the
recorded bytes as they are."""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from inspector.net.recorded import RecordingSource
from inspector.net.serve import ServeApp
from inspector.record.recording import RecordingWriter
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render_openai import (
    Api,
    MalformedAnswer,
    assembled_chat,
    assembled_response,
    render_openai_turn,
)
from inspector.testing.hyp import examples

KEY = "sk-proj-CANARY-openai-malformed-00000000"
SC = get_scenario("weather")
URL = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}
Events = list[tuple[str, Any]]


def _rendered(api: Api, turn: int) -> Events:
    """The weather turn's events as the OpenAI renderer makes them (the shapes a real recording has)."""
    return [(n, d) for n, d in render_openai_turn(SC, turn, api=api, include_usage=True).events]


def _sse(api: Api, events: Events) -> bytes:
    out = []
    for name, data in events:
        payload = b"[DONE]" if name == "[DONE]" else orjson.dumps(data)
        out.append((b"" if api == "chat" else b"event: " + name.encode() + b"\n") + b"data: " + payload + b"\n\n")
    return b"".join(out)


def _recording(path: Path, api: Api, sse: bytes) -> RecordingSource:
    w = RecordingWriter(path, source={"type": "api", "provider": "openai", "api": api})
    w.request(0, 0, 0.0, "POST", "http://x" + URL[api], {}, {"model": SC.model})
    w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
    w.read(0, 0, 0.2, sse)
    w.end(0, 0, 0.3, "complete")
    w.close()
    return RecordingSource.load(path)


async def _ask(source: RecordingSource, api: Api) -> tuple[httpx2.Response, httpx2.Response]:
    """A stream: false and a stream: true request, in process (an exception in the app raises here)."""
    app = ServeApp(recording=source, speed=math.inf)
    body = {"model": SC.model, ("messages" if api == "chat" else "input"): [{"role": "user", "content": SC.prompt}]}
    transport = httpx2.ASGITransport(app=app.app)
    headers = {"authorization": f"Bearer {KEY}"}
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as h:
        whole = await h.post(URL[api], json={**body, "stream": False})
        streamed = await h.post(URL[api], json={**body, "stream": True})
    return whole, streamed


def _chunk_with(api: Api, pred: Callable[[Any], bool]) -> int:
    return next(i for i, (n, d) in enumerate(_rendered(api, 0)) if n != "[DONE]" and pred(d))


def _calls(d: Any) -> Any:
    return d["choices"] and d["choices"][0]["delta"].get("tool_calls")


def _set(events: Events, i: int, path: tuple[Any, ...], value: Any) -> Events:
    out = copy.deepcopy(events)
    if not path:
        out[i] = (out[i][0], value)
        return out
    node = out[i][1]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


_TEXT = _chunk_with("chat", lambda d: bool(d["choices"]) and d["choices"][0]["delta"].get("content"))
_FIRST_CALL = _chunk_with("chat", lambda d: bool(_calls(d)) and "id" in _calls(d)[0])
_ARGS = _chunk_with("chat", lambda d: bool(_calls(d)) and "id" not in _calls(d)[0])
_COMPLETED = len(_rendered("responses", 0)) - 1

CASES: list[tuple[Api, int, tuple[Any, ...], Any, str]] = [
    ("chat", _TEXT, ("choices", 0), [1], "choices[0] is a list, not an object"),
    ("chat", _TEXT, ("choices", 0, "delta"), "hi", "choices[0].delta is a string, not an object"),
    ("chat", _TEXT, ("choices",), {"0": {}}, "choices is an object, not a list"),
    ("chat", _TEXT, ("choices", 0, "index"), "0", "choices[0].index is a string, not an int"),
    ("chat", _TEXT, ("choices", 0, "delta", "content"), ["hi"], "choices[0].delta.content is a list, not a string"),
    ("chat", _FIRST_CALL, ("choices", 0, "delta", "tool_calls"), {"a": 1}, "tool_calls is an object, not a list"),
    ("chat", _FIRST_CALL, ("choices", 0, "delta", "tool_calls", 0), "x", "tool_calls[0] is a string, not an object"),
    ("chat", _ARGS, ("choices", 0, "delta", "tool_calls", 0, "index"), True, "tool_calls[0].index is a boolean"),
    ("chat", _ARGS, ("choices", 0, "delta", "tool_calls", 0, "function", "arguments"), 7, "arguments is an int"),
    ("chat", _FIRST_CALL, ("choices", 0, "delta", "tool_calls", 0, "function"), [], "function is a list"),
    ("chat", _TEXT, (), [1, 2], "the chunk is a list, not an object"),
    ("chat", _TEXT, ("usage",), "none", "usage is a string, not an object"),
    ("responses", _COMPLETED, (), [1], "(response.completed): its data is a list, not an object"),
    ("responses", _COMPLETED, ("response",), "done", "(response.completed): its response is a string"),
    ("responses", _COMPLETED, ("response",), None, "(response.completed): its response is null"),
]


@pytest.mark.parametrize(("api", "i", "path", "value", "says"), CASES, ids=[c[4] for c in CASES])
async def test_a_malformed_recorded_event_is_a_named_500_for_stream_false_and_replayed_when_streamed(
    tmp_path: Path, api: Api, i: int, path: tuple[Any, ...], value: Any, says: str
) -> None:
    sse = _sse(api, _set(_rendered(api, 0), i, path, value))
    whole, streamed = await _ask(_recording(tmp_path / "rec.jsonl", api, sse), api)
    assert whole.status_code == 500, whole.text
    error = whole.json()["error"]
    assert error["type"] == "server_error" and set(error) == {"message", "type", "param", "code"}
    assert "recorded answer is malformed" in error["message"] and says in error["message"]
    assert f"event {i + 1} " in error["message"]  # counted from 1, as in the file
    assert streamed.status_code == 200 and streamed.content == sse


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_well_formed_recording_still_assembles(tmp_path: Path, api: Api) -> None:
    """The checks refuse nothing a real answer has (the renderer's own events, with usage)."""
    events = _rendered(api, 0)
    sse = _sse(api, events)
    whole, streamed = await _ask(_recording(tmp_path / "rec.jsonl", api, sse), api)
    assert whole.status_code == 200 and streamed.content == sse
    plan = render_openai_turn(SC, 0, api=api, include_usage=True)
    assert whole.json() == (assembled_chat(plan) if api == "chat" else assembled_response(plan))


def test_the_assemblers_raise_the_named_diagnostic() -> None:
    plan = render_openai_turn(SC, 0, api="chat")
    bad = plan.events[1][1]["choices"][0]
    plan.events[1] = ("chunk", {**plan.events[1][1], "choices": [{**bad, "delta": [1]}]})
    with pytest.raises(MalformedAnswer, match=r"event 2 \(a chat chunk\): choices\[0\]\.delta is a list"):
        assembled_chat(plan)


def _kind(v: Any) -> str:
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_OF_KIND: dict[str, st.SearchStrategy[Any]] = {  # a JSON value of each kind (_kind)
    "NoneType": st.none(),
    "bool": st.booleans(),
    "number": st.integers(-(2**53), 2**53) | st.floats(allow_nan=False),
    "str": st.text(max_size=6),
    "list": st.lists(_JSON, max_size=3),
    "dict": st.dictionaries(st.text(max_size=5), _JSON, max_size=3),
}


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            out += _paths(v, (*at, k))
    return out


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["chat", "responses"]), st.sampled_from(range(len(SC.turns))), st.data())
async def test_any_value_of_another_type_anywhere_never_gets_a_traceback(
    api: Api, turn: int, data: st.DataObject
) -> None:
    """Property: replace any JSON value of any event of a recorded answer by a value of another type: stream: false
    gets 200 with the assembled answer or an OpenAI error JSON (a 500 that names what is malformed), never an
    exception in the app; stream: true gets the recorded bytes."""
    events = _rendered(api, turn)
    some = st.sampled_from([k for k, (n, _) in enumerate(events) if n != "[DONE]"])
    last = len(events) - 1 if api == "responses" else 0  # the one event a Responses answer is assembled from
    i = data.draw(st.one_of(st.just(last), some), label="event")
    paths = _paths(events[i][1])
    shallow = [p for p in paths if len(p) <= 1]  # the data, its top-level fields: a whole final response among them
    path = data.draw(st.one_of(st.sampled_from(shallow), st.sampled_from(paths)), label="path")
    old: Any = events[i][1]
    for key in path:
        old = old[key]
    value = data.draw(st.one_of([v for k, v in _OF_KIND.items() if k != _kind(old)]), label="value")
    sse = _sse(api, _set(events, i, path, value))
    with tempfile.TemporaryDirectory() as tmp:
        whole, streamed = await _ask(_recording(Path(tmp) / "rec.jsonl", api, sse), api)
    assert streamed.status_code == 200 and streamed.content == sse
    body = whole.json()
    event(f"{api}: {whole.status_code}")
    if whole.status_code == 200:
        assert isinstance(body, dict) and (api == "responses" or body["object"] == "chat.completion")
    else:
        assert whole.status_code in (429, 500, 503) and set(body) == {"error"}
        assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"]

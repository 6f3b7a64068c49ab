"""`inspector serve --recording FILE` with a recording of an OpenAI session (issue 20 §3): a Chat Completions or
Responses conversation recorded by the proxy in front of serve (the openai SDK the client) replays on the endpoint
of its family, end to end through the openai SDK (the same completions / responses, the same bytes); the other
endpoints answer a 400 naming the recording's family; the HTTP faults answer in OpenAI's form; the family of a
recording is told by its request path, its header's source or its first event."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import httpx2
import openai
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.net.proxy import ProxyApp
from inspector.net.recorded import RecordingSource
from inspector.net.serve import Exchange, ServeApp
from inspector.net.server import BackgroundServer
from inspector.record.recording import RecordingWriter, read_recording
from inspector.record.replay import recording_family
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.render_openai import Api
from inspector.testing.hyp import examples
from inspector.testing.pytest_plugin import InspectorServerFactory
from inspector.testing.serve import API_HEADERS, messages_body

pytest_plugins = ["inspector.testing.pytest_plugin"]

KEY = "sk-proj-CANARY-openai-recording-0000000"
SC = get_scenario("weather")
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
]
RESP_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
]


def client(base_url: str, **kw: Any) -> openai.AsyncOpenAI:
    kw.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, **kw)


async def chat_conversation(base_url: str, **kw: Any) -> list[dict[str, Any]]:
    """The whole weather conversation on /v1/chat/completions: each turn's final completion (SDK accumulator)."""
    out: list[dict[str, Any]] = []
    messages: list[Any] = [{"role": "user", "content": SC.prompt}]
    async with client(base_url, **kw) as c:
        for _ in SC.turns:
            async with c.chat.completions.stream(model=SC.model, messages=messages, tools=CHAT_TOOLS) as s:
                final = await s.get_final_completion()
            out.append(final.model_dump(mode="json", exclude_none=True))
            msg = final.choices[0].message
            messages.append(msg.model_dump(mode="json", exclude_none=True))
            if not msg.tool_calls:
                break
            messages += [{"role": "tool", "tool_call_id": t.id, "content": "sunny, 21 C"} for t in msg.tool_calls]
    return out


async def responses_conversation(base_url: str, **kw: Any) -> list[dict[str, Any]]:
    """The whole weather conversation on /v1/responses: each turn's final response (SDK accumulator)."""
    out: list[dict[str, Any]] = []
    items: list[Any] = [{"role": "user", "content": SC.prompt}]
    async with client(base_url, **kw) as c:
        for _ in SC.turns:
            async with c.responses.stream(model=SC.model, input=items, tools=RESP_TOOLS) as s:
                final = await s.get_final_response()
            out.append(final.model_dump(mode="json", exclude_none=True))
            produced = [o.model_dump(mode="json", exclude_none=True) for o in final.output]
            items += produced
            calls = [o for o in produced if o["type"] == "function_call"]
            if not calls:
                break
            items += [{"type": "function_call_output", "call_id": o["call_id"], "output": "sunny"} for o in calls]
    return out


# per API: the recording's path and each turn's final answer as the SDK assembled it
Recordings = dict[str, tuple[Path, list[dict[str, Any]]]]
CONVERSE = {"chat": chat_conversation, "responses": responses_conversation}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    """Each family's weather conversation, recorded by `proxy --record` in front of serve."""
    out: Recordings = {}
    for api, converse in CONVERSE.items():
        path = tmp_path_factory.mktemp("rec") / f"{api}.jsonl"
        up = ServeApp("weather", speed=math.inf, echo_model=False)
        with BackgroundServer(up) as upstream, BackgroundServer(ProxyApp(upstream.base_url, record=path)) as px:
            finals = asyncio.run(converse(px.base_url))
        out[api] = (path, finals)
    return out


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_recording_is_of_its_family(recordings: Recordings, api: str) -> None:
    path, finals = recordings[api]
    assert len(finals) == 2  # a tool call, then the answer
    source = RecordingSource.load(path)
    assert source.family == {"chat": "openai_chat", "responses": "openai_responses"}[api]
    assert len(source.turns) == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_openai_recording_replays_on_its_endpoint_through_the_sdk(recordings: Recordings, api: str) -> None:
    path, finals = recordings[api]
    app = ServeApp(recording=RecordingSource.load(path), speed=math.inf)
    with BackgroundServer(app) as srv:
        replayed = await CONVERSE[api](srv.base_url)
    assert replayed == finals
    assert [(ex.path, ex.turn, ex.attempt, ex.status, ex.end) for ex in app.exchanges] == [
        (f"/v1/{'chat/completions' if api == 'chat' else 'responses'}", t, 0, 200, "eof") for t in (0, 1)
    ]
    assert all(ex.differs is None for ex in app.exchanges)  # the same requests as recorded


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_replayed_bytes_are_the_recorded_bytes(recordings: Recordings, api: str) -> None:
    path, _ = recordings[api]
    rec = read_recording(path)
    recorded = [b"".join(r.data for r in a.reads) for a in rec.attempts()]
    bodies = []
    for a in rec.attempts():
        assert a.request is not None
        bodies.append(a.request["body"])
    app = ServeApp(recording=RecordingSource.load(path), speed=math.inf)
    got = []
    with BackgroundServer(app) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            for body in bodies:
                r = await h.post(f"/v1/{'chat/completions' if api == 'chat' else 'responses'}", json=body)
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                got.append(r.content)
    assert got == recorded


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_stream_false_gets_the_assembled_answer(recordings: Recordings, api: str) -> None:
    path, finals = recordings[api]
    rec = read_recording(path)
    request = list(rec.attempts())[0].request
    assert request is not None
    first = {**request["body"], "stream": False}
    first.pop("stream_options", None)
    app = ServeApp(recording=RecordingSource.load(path), speed=math.inf)
    with BackgroundServer(app) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            r = await h.post(f"/v1/{'chat/completions' if api == 'chat' else 'responses'}", json=first)
    assert r.status_code == 200, r.text
    got = r.json()
    if api == "chat":
        call = finals[0]["choices"][0]["message"]["tool_calls"][0]
        assert got["object"] == "chat.completion" and got["id"] == finals[0]["id"]
        [mine] = got["choices"][0]["message"]["tool_calls"]
        assert (mine["id"], mine["function"]) == (call["id"], call["function"])
        assert got["choices"][0]["finish_reason"] == "tool_calls"
    else:
        assert got["object"] == "response" and got["id"] == finals[0]["id"] and got["status"] == "completed"
        assert [o["type"] for o in got["output"]] == [o["type"] for o in finals[0]["output"]]


@pytest.mark.parametrize(
    ("api", "path", "says"),
    [
        (
            "chat",
            "/v1/responses",
            "this server replays a recording of the OpenAI Chat Completions (chat.jsonl): POST /v1/chat/completions, "
            "not /v1/responses (OpenAI Responses)",
        ),
        (
            "responses",
            "/v1/chat/completions",
            "this server replays a recording of the OpenAI Responses (responses.jsonl): POST /v1/responses, "
            "not /v1/chat/completions (OpenAI Chat Completions)",
        ),
    ],
)
async def test_the_wrong_endpoint_is_a_400_naming_the_family(
    recordings: Recordings, api: str, path: str, says: str
) -> None:
    rec_path, _ = recordings[api]
    app = ServeApp(recording=RecordingSource.load(rec_path), speed=math.inf)
    other = "responses" if api == "chat" else "chat"
    with BackgroundServer(app) as srv:
        with pytest.raises(openai.BadRequestError) as e:
            await CONVERSE[other](srv.base_url)
        assert e.value.status_code == 400 and e.value.body["message"] == says  # type: ignore[index]
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=API_HEADERS) as h:
            r = await h.post("/v1/messages", json=messages_body())
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    family = "OpenAI Chat Completions" if api == "chat" else "OpenAI Responses"
    assert r.json()["error"]["message"].startswith(f"this server replays a recording of the {family} ")
    assert r.json()["error"]["message"].endswith("not /v1/messages (Anthropic Messages API)")
    assert path in says


async def test_an_anthropic_recording_refuses_the_openai_endpoints_naming_its_family(tmp_path: Path) -> None:
    path = tmp_path / "anthropic.jsonl"
    with (
        BackgroundServer(ServeApp("weather", speed=math.inf)) as up,
        BackgroundServer(ProxyApp(up.base_url, record=path)) as px,
    ):
        async with httpx2.AsyncClient(base_url=px.base_url, headers=API_HEADERS) as h:
            assert (await h.post("/v1/messages", json=messages_body())).status_code == 200
    app = ServeApp(recording=RecordingSource.load(path), speed=math.inf)
    with BackgroundServer(app) as srv:
        with pytest.raises(openai.BadRequestError) as e:
            await chat_conversation(srv.base_url)
    assert e.value.body["message"] == (  # type: ignore[index]
        "this server replays a recording of the Anthropic Messages API (anthropic.jsonl): POST /v1/messages, "
        "not /v1/chat/completions (OpenAI Chat Completions)"
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_http_faults_on_a_recording_answer_in_openai_form(recordings: Recordings, api: str) -> None:
    path, finals = recordings[api]
    app = ServeApp(recording=RecordingSource.load(path), faults="http_429:0.01", speed=math.inf)
    with BackgroundServer(app) as srv:
        replayed = await CONVERSE[api](srv.base_url, max_retries=2)  # the SDK retries the 429 by itself
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            request = list(read_recording(path).attempts())[0].request
            assert request is not None
            body = request["body"]
            where = f"/v1/{'chat/completions' if api == 'chat' else 'responses'}"
            r = await h.post(where, json=body, headers={"x-inspector-session": "by hand"})
    assert replayed == finals
    assert [ex.status for ex in app.exchanges][:4] == [429, 200, 429, 200]
    assert r.status_code == 429 and "retry-after" in r.headers and r.headers["x-request-id"]
    assert r.json() == {
        "error": {
            "message": r.json()["error"]["message"],
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def _write(path: Path, source: dict[str, Any], url: str | None, body: bytes) -> None:
    w = RecordingWriter(path, source=source)
    w.request(0, 0, 0.0, "POST", url or "", {}, {"model": "m", "messages": []})
    w.response(0, 0, 0.1, 200, {"content-type": "text/event-stream"})
    w.read(0, 0, 0.2, body)
    w.end(0, 0, 0.3, "complete")
    w.close()


CHAT_SSE = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
RESP_SSE = b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{}}\n\n'


def test_the_family_of_a_recording(tmp_path: Path) -> None:
    cases = [
        ({"type": "api"}, "http://x/v1/chat/completions", RESP_SSE, "openai_chat"),  # the path wins
        ({"type": "api", "provider": "openai", "api": "responses"}, None, CHAT_SSE, "openai_responses"),
        ({"type": "api", "provider": "openai"}, None, RESP_SSE, "openai_chat"),  # run --provider openai: chat
        ({"type": "api"}, None, CHAT_SSE, "openai_chat"),  # the first event that tells
        ({"type": "api"}, None, RESP_SSE, "openai_responses"),
        ({"type": "api"}, None, b"event: ping\ndata: {}\n\n", "anthropic"),
    ]
    for i, (source, url, body, family) in enumerate(cases):
        path = tmp_path / f"r{i}.jsonl"
        _write(path, source, url, body)
        rec = read_recording(path)
        assert recording_family(rec, RecordingSource(rec).turns) == family, (source, url)
    sse = tmp_path / "plain.sse"
    sse.write_bytes(CHAT_SSE + b"data: [DONE]\n\n")
    assert RecordingSource.load(sse).family == "openai_chat"


def test_serve_announces_the_openai_base_url_for_an_openai_recording(
    recordings: Recordings, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from inspector.cli.serve import _announce

    path, _ = recordings["chat"]
    args = argparse.Namespace(scenario="parse_date", speed=math.inf)
    _announce(args, "http://127.0.0.1:1", [], {"recording": RecordingSource.load(path)})
    out, err = capsys.readouterr()
    said = "inspector serve: recording chat.jsonl (2 turns, OpenAI Chat Completions: POST /v1/chat/completions), "
    said += "faults none, speed max"
    # no Anthropic address: its /v1/messages answers 400 (the line scripts read was that one)
    assert err.splitlines() == [said, "OPENAI_BASE_URL=http://127.0.0.1:1/v1"]
    assert out.splitlines() == [said, "OPENAI_BASE_URL=http://127.0.0.1:1/v1"]  # (piped stdout)


def test_the_fixture_replays_an_openai_recording_on_its_endpoint(
    recordings: Recordings, inspector_server: InspectorServerFactory
) -> None:
    path, finals = recordings["chat"]
    server = inspector_server(recording=path)
    assert server.recording is not None and repr(server) == "InspectorServer('recording chat.jsonl', 0 requests)"
    assert asyncio.run(chat_conversation(server.base_url)) == finals
    assert [(r.path, r.turn, r.status) for r in server.message_requests] == [
        ("/v1/chat/completions", 0, 200),
        ("/v1/chat/completions", 1, 200),
    ]
    server.assert_valid_histories()


async def test_stream_false_without_a_final_event_is_a_drop_or_a_one_line_500(tmp_path: Path) -> None:
    """A Responses answer cut by a drop: a stream: false request sees the connection break (as for chat); a recorded
    stream that ends without response.completed: a 500 server_error that says why, never a traceback."""
    with BackgroundServer(ServeApp("weather", "drop_event:3", speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            with pytest.raises(httpx2.RemoteProtocolError):
                await h.post("/v1/responses", json={"model": SC.model, "input": "hi"})
    path = tmp_path / "cut.jsonl"
    _write(path, {"type": "api", "provider": "openai", "api": "responses"}, "http://x/v1/responses", RESP_SSE)
    app = ServeApp(recording=RecordingSource.load(path), speed=math.inf)
    with BackgroundServer(app) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers={"authorization": f"Bearer {KEY}"}) as h:
            r = await h.post("/v1/responses", json={"model": "m", "input": "hi"})
            streamed = await h.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True})
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    assert "no response.completed" in r.json()["error"]["message"]
    assert streamed.status_code == 200 and streamed.content == RESP_SSE


_MSG_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":'
    b'"assistant","model":"rec-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":'
    b'{"input_tokens":3,"output_tokens":1}}}\n\n'
)
_CHUNK = b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
_CREATED = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"r",'
    b'"object":"response","status":"in_progress","output":[]}}\n\n'
)


@pytest.mark.parametrize(
    ("family", "sse", "recorded"),
    [
        (
            "anthropic",
            _MSG_START + b'event: error\ndata: {"type":"error","error":"x"}\n\n',
            '{"type":"error","error":"x"}',
        ),
        ("anthropic", _MSG_START + b"event: error\ndata: [529]\n\n", "[529]"),
        ("openai_chat", _CHUNK + b'data: {"error":"boom"}\n\n', "boom"),
        ("openai_chat", _CHUNK + b"event: error\ndata: [1]\n\n", "[1]"),
        ("openai_responses", _CREATED + b'event: error\ndata: {"type":"error","error":"boom"}\n\n', "boom"),
        ("openai_responses", _CREATED + b"event: error\ndata: [1]\n\n", "[1]"),
        ("openai_responses", b"event: response.created\ndata: [1]\n\n", None),
    ],
    ids=["error-str", "error-list", "chat-error-str", "chat-list", "resp-error-str", "resp-list", "resp-created-list"],
)
async def test_a_recorded_event_that_is_not_the_object_it_names_is_answered_never_a_traceback(
    tmp_path: Path, family: str, sse: bytes, recorded: str | None
) -> None:
    """A plain SSE file whose error event (or its ``error``) is not an object, or whose ``response.created`` is not
    one: a stream: false request gets the API's error answer (Anthropic: the recorded data as the body; OpenAI: the
    recorded value as the message), a streamed one the recorded bytes; never the bare 500 of an exception in the
    server (they used to raise AttributeError)."""
    path = tmp_path / "odd.sse"
    path.write_bytes(sse)
    source = RecordingSource.load(path)
    assert source.family == family
    if family == "anthropic":
        url, headers, body = "/v1/messages", API_HEADERS, messages_body(model=source.model)
    else:
        api = "chat" if family == "openai_chat" else "responses"
        url, headers = f"/v1/{'chat/completions' if api == 'chat' else 'responses'}", {"authorization": f"Bearer {KEY}"}
        body = {"model": source.model, ("messages" if api == "chat" else "input"): [{"role": "user", "content": "hi"}]}
    with BackgroundServer(ServeApp(recording=source, speed=math.inf)) as srv:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=headers) as h:
            whole = await h.post(url, json={**body, "stream": False})
            streamed = await h.post(url, json={**body, "stream": True})
    assert streamed.status_code == 200 and streamed.content == sse
    if recorded is None:  # no error in it: no final event either (the one-line 500 that says so)
        assert whole.status_code == 500 and "no response.completed" in whole.json()["error"]["message"]
    elif family == "anthropic":
        assert whole.status_code == 500 and whole.content == recorded.encode()
    else:
        assert whole.status_code == 500 and whole.json()["error"]["message"] == recorded


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_ERROR_DATA = st.one_of(
    _JSON,
    st.builds(lambda e, t: {"type": t, "error": e}, _JSON, st.sampled_from(["error", None, 3])),
    st.builds(lambda t, m, c: {"error": {"type": t, "message": m, "code": c}}, _JSON, _JSON, _JSON),
)


@settings(max_examples=examples(200), deadline=None)
@given(_ERROR_DATA, st.sampled_from([None, "chat", "responses"]))
async def test_any_recorded_error_event_gets_an_error_answer_for_stream_false(data: Any, api: Api | None) -> None:
    """Property: whatever JSON a recorded error event holds, a stream: false request gets an error status and a JSON
    body: Anthropic's is the recorded data itself, OpenAI's an ``{"error": {...}}`` object."""
    app = ServeApp(speed=math.inf, lenient=True)
    plan = dataclasses.replace(app.plan("weather", (), 0, 0), events=[("error", data)])
    answer = await app._non_stream(plan, {}, Exchange("POST", "/v1/messages"), api)
    assert answer.status in (429, 500, 503, 529) and len(answer.chunks) == 1
    body = orjson.loads(answer.chunks[0])
    if api is None:
        assert body == data
    else:
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}


def test_telling_a_recordings_family_reads_a_bounded_prefix_of_a_hostile_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording with no request path and no telling event (garbage, 40 MiB over many reads and attempts): its
    family is the Messages API's, told after at most SNIFF_BYTES were decoded (serve, replay and from-recording all
    ask for it: a big garbage file must not be decoded whole)."""
    from inspector.record import replay
    from inspector.record.recording import RecordedAttempt, RecordedRead, RecordedTurn, Recording
    from inspector.stream.sse import SSEDecoder

    fed = [0]

    class Counting(SSEDecoder):
        def feed(self, data: bytes | bytearray | memoryview) -> Any:
            fed[0] += len(data)
            return super().feed(data)

    monkeypatch.setattr(replay, "SSEDecoder", Counting)
    junk = b"data: " + b"\x00\xff" * (1 << 19) + b"\n\n"  # 1 MiB a read: no event that tells
    turns = [
        RecordedTurn(t, [RecordedAttempt(t, 0, reads=[RecordedRead(0.0, junk) for _ in range(10)])]) for t in range(4)
    ]
    rec = Recording(header={"source": {"type": "proxy"}}, turns=turns)
    assert recording_family(rec) == "anthropic"
    assert 0 < fed[0] <= replay.SNIFF_BYTES


async def test_the_fixture_shows_how_a_request_ended_when_its_client_has_the_last_event(
    recordings: Recordings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve --recording notes an exchange once its request diff is known (in a worker thread): the plugin sent a
    response's end before that, so a client that stopped at ``data: [DONE]`` and looked at ``requests`` at once saw
    ``end`` None (2 runs in 20). Here the diff never finishes: the exchange is noted at its budget's end."""
    import threading

    from inspector.net import serve
    from inspector.net.recorded import request_diff
    from inspector.testing.pytest_plugin import InspectorServer, _Capture

    release = threading.Event()
    original = request_diff

    def stuck_diff(*args: Any) -> Any:
        release.wait()
        return original(*args)

    monkeypatch.setattr(serve, "request_diff", stuck_diff)
    server = InspectorServer(recording=recordings["chat"][0])
    server.app.diff_budget = 0.05
    try:
        capture = _Capture(server._begin, server.app)
        body = {"model": SC.model, "stream": True, "messages": [{"role": "user", "content": SC.prompt}]}
        raw = orjson.dumps(body)
        headers = [(b"authorization", b"Bearer " + KEY.encode()), (b"content-type", b"application/json")]
        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions"}
        scope |= {"query_string": b"", "headers": headers, "scheme": "http", "http_version": "1.1", "root_path": ""}
        scope |= {"server": ("127.0.0.1", 1), "client": ("127.0.0.1", 2)}
        seen: list[str | None] = []
        given = False

        async def receive() -> Any:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await asyncio.Event().wait()

        async def send(message: Any) -> None:
            if b"data: [DONE]" in message.get("body", b""):
                seen.append(server.requests[-1].end)

        await capture(scope, receive, send)
        assert seen == ["eof"]
        assert server.requests[-1].exchange is not None
    finally:
        release.set()
        server.close()

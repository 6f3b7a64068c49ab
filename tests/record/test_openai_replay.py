"""A recorded OpenAI run (Chat Completions, Responses) replays through the same pipeline: the openai SDK against the
replay transport, the recorded reads decoded by the OpenAI stream, the recorded tool results, the same history."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from inspector.agent.toolbox.spec import ToolRefused, ToolSpec
from inspector.observe import observations as O
from inspector.record.dump import dump_ok, dump_turns
from inspector.record.recording import read_recording
from inspector.record.replay import ReplayServer, neutral_history, tool_name
from inspector.sessions.sources import Session, load_recording, openai_session, replay_session
from inspector.testing.loop import RUN_TIMEOUT, Observed, assert_no_leftovers, dumps_all
from inspector.testing.openai_fake import (
    KEY,
    FakeOpenAI,
    ResponsesScript,
    Status,
    Stream,
    chat_text,
    chunk,
    responses_text,
    sse,
    tool_delta,
)
from inspector.testing.secrets import assert_no_key


def _server(session: Session) -> ReplayServer:
    """The replay's server (``Session.server``: a ReplayServer for a replay_session)."""
    server = session.server
    assert isinstance(server, ReplayServer)
    return server


def _tool(fail: bool = False) -> dict[str, ToolSpec]:
    async def fn(tool_input: dict[str, Any]) -> str:
        if fail:
            raise ToolRefused(f"no station in {tool_input['city']}")
        return f"weather in {tool_input['city']}: 18C"

    return {"get_weather": ToolSpec("get_weather", "weather", {"type": "object"}, fn, concurrency_safe=True)}


def _script(api: str) -> list[Any]:
    if api == "chat":
        first = sse(
            chunk({"role": "assistant", "content": "Checking."}),
            chunk(tool_delta(0, id="call_w", name="get_weather")),
            chunk(tool_delta(0, args='{"city":')),
            chunk(tool_delta(0, args=' "Paris"}')),
            chunk({}, "tool_calls"),
            chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
            done=True,
        )
        return [
            Status(429, {"error": {"type": "rate_limit_exceeded", "message": "wait"}}, {"retry-after-ms": "1"}),
            Stream([first]),
            Stream([chat_text("It is 18C.")]),
        ]
    s = ResponsesScript()
    fc = {"id": "fc_w", "type": "function_call", "call_id": "call_w", "name": "get_weather", "arguments": ""}
    done = {**fc, "arguments": '{"city": "Paris"}', "status": "completed"}
    first = b"".join(
        [
            s.ev("response.created", response=s.response("in_progress")),
            s.ev("response.output_item.added", output_index=0, item=fc),
            s.ev("response.function_call_arguments.delta", item_id="fc_w", output_index=0, delta='{"city":'),
            s.ev("response.function_call_arguments.delta", item_id="fc_w", output_index=0, delta=' "Paris"}'),
            s.ev(
                "response.function_call_arguments.done", item_id="fc_w", output_index=0, arguments='{"city": "Paris"}'
            ),
            s.ev("response.output_item.done", output_index=0, item=done),
            s.ev(
                "response.completed", response=s.response("completed", [done], {"input_tokens": 5, "output_tokens": 2})
            ),
        ]
    )
    return [
        Status(429, {"error": {"type": "rate_limit_exceeded", "message": "wait"}}, {"retry-after-ms": "1"}),
        Stream([first]),
        Stream([responses_text("It is 18C.")]),
    ]


@pytest.mark.parametrize("fail", [False, True], ids=["ok", "tool_error"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_record_then_replay_an_openai_run(api: str, fail: bool, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    fake = FakeOpenAI(_script(api))
    s = openai_session(
        "gpt-test",
        "weather in Paris?",
        api=api,
        api_key=KEY,
        base_url="http://fake-openai.local/v1",
        builtin=False,
        user_tools=_tool(fail),
        http_client=fake.client(),
        record=path,
    )
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    recorded_history = list(result.messages)
    raw = path.read_bytes()
    assert_no_key(KEY, {"recording": raw, "observations": dumps_all(obs.items)})
    rec = read_recording(path)
    # the request as sent, with its URL and headers (credentials removed), and every read
    first = next(a for a in rec.attempts() if (a.response or {}).get("status") == 200)
    assert first.request is not None
    assert first.request["url"].endswith("/chat/completions" if api == "chat" else "/responses")
    assert "authorization" not in {k.lower() for k in first.request["headers"]}
    # the request as the server got it: the body (the spliced history), the headers but the credentials
    atts = list(rec.attempts())
    assert [(a.request or {})["body"] for a in atts] == [r["body"] for r in fake.requests]
    for a, req in zip(atts, fake.requests, strict=True):
        sent = {k: v for k, v in req["headers"].items() if k != "authorization"}
        assert a.request is not None
        assert {k.lower(): v for k, v in a.request["headers"].items()} == sent
    # dump decodes it in the provider's shape
    entries = dump_turns(rec)
    assert dump_ok(entries), entries
    fams = {e.get("family") for e in entries if e.get("family")}
    assert fams == {"openai_chat" if api == "chat" else "openai_responses"}

    # replay: the same history, the recorded tool result, the SDK's retried 429 served again
    r = replay_session(path, speed=math.inf)
    robs = Observed(r.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        replayed = await r.run()
    assert replayed.status == "finished", replayed.error
    assert list(replayed.messages) == recorded_history
    assert [(f.status, f.try_index) for f in robs.of(O.HttpTryFailed)] == [(429, 0)]
    expected = "no station in Paris" if fail else "weather in Paris: 18C"
    assert [(t.content, t.is_error) for t in robs.of(O.ToolResult)] == [(expected, fail)]
    assert [(t.content, t.is_error) for t in obs.of(O.ToolResult)] == [(expected, fail)]
    assert len(robs.of(O.SSEEventSeen)) == len(obs.of(O.SSEEventSeen))
    assert _server(r).requests[-1].get("messages" if api == "chat" else "input") == recorded_history[:-1]
    assert_no_leftovers()


def test_neutral_history_of_openai_shapes() -> None:
    chat = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
    ]
    out = neutral_history(chat)
    assert out[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "c2", "name": "g", "input": None},
    ]
    assert out[2] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "r1"}]}
    items = [
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
    ]
    assert neutral_history(items) == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "x"}]},
    ]
    anth = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert neutral_history(anth) == anth and neutral_history("nope") == []
    assert tool_name({"type": "function", "function": {"name": "f"}}) == "f"
    assert tool_name({"type": "function", "name": "g"}) == "g" and tool_name({"name": "h"}) == "h"


def _har_entry(
    body: dict[str, Any], sse_body: bytes, started: str, status: int = 200, mime: str = "text/event-stream"
) -> dict[str, Any]:
    return {
        "startedDateTime": started,
        "time": 120.0,
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Authorization", "value": f"Bearer {KEY}"}],
            "postData": {"mimeType": "application/json", "text": orjson.dumps(body).decode()},
        },
        "response": {
            "status": status,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": mime}],
            "content": {"size": len(sse_body), "mimeType": mime, "text": sse_body.decode()},
        },
        "timings": {"blocked": 1.0, "dns": -1, "connect": -1, "send": 0.5, "wait": 20.0, "receive": 98.5, "ssl": -1},
    }


async def test_replay_an_openai_har() -> None:
    """A browser / mitmproxy HAR of Chat Completions calls replays through the openai SDK: the tool result comes
    from the history the next request sent (its `tool` message); a 429 before a stream is kept as its failed try."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    user = {"role": "system", "content": "be brief"}, {"role": "user", "content": "weather in Paris?"}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    first = sse(
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, id="call_w", name="get_weather", args='{"city":"Paris"}')),
        chunk({}, "tool_calls"),
        done=True,
    )
    body1: dict[str, Any] = {"model": "gpt-4o", "messages": list(user), "tools": tools, "stream": True}
    body2: dict[str, Any] = {
        **body1,
        "messages": [*user, call, {"role": "tool", "tool_call_id": "call_w", "content": "18C"}],
    }
    doc = {
        "log": {
            "version": "1.2",
            "creator": {"name": "mitmproxy", "version": "10"},
            "entries": [
                _har_entry(
                    body1,
                    orjson.dumps({"error": {"type": "rate_limit_exceeded", "message": "slow down"}}),
                    "2026-01-01T09:59:59.000Z",
                    status=429,
                    mime="application/json",
                ),
                _har_entry(body1, first, "2026-01-01T10:00:00.000Z"),
                _har_entry(body2, chat_text("18C in Paris."), "2026-01-01T10:00:01.000Z"),
            ],
        }
    }
    r = replay_session(load_recording(orjson.dumps(doc)), speed=math.inf, label="openai.har")
    robs = Observed(r.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        replayed = await r.run()
    assert replayed.status == "finished", replayed.error
    assert list(replayed.messages) == [*body2["messages"], {"role": "assistant", "content": "18C in Paris."}]
    assert [t.content for t in robs.of(O.ToolResult)] == ["18C"]
    # the 429 before the first stream is a try the SDK retried, as it was in the HAR
    assert [(f.status, f.error_type) for f in robs.of(O.HttpTryFailed)] == [(429, "rate_limit_exceeded")]
    assert _server(r).requests[-1]["messages"] == body2["messages"]
    assert _server(r).requests[-1]["tools"] == tools
    assert_no_key(KEY, {"observations": dumps_all(robs.items)})


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_time_travel_over_an_openai_run(api: str) -> None:
    """The dashboard's fold and time travel over an OpenAI run: as of each SSE event (one row per event), the
    state rebuilt from checkpoints is the state folded from the start; the last one shows the tool and the answer,
    never the key."""
    from inspector.state.travel import History, state_at
    from inspector.testing.secrets import dashboard_texts

    fake = FakeOpenAI(_script(api))
    s = openai_session(
        "gpt-test",
        "weather in Paris?",
        api=api,
        api_key=KEY,
        builtin=False,
        user_tools=_tool(),
        http_client=fake.client(),
    )
    obs = Observed(s.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        result = await s.run()
    assert result.status == "finished", result.error
    h = History(obs.items, spacing=7)
    n = h.event_count
    assert n == len(obs.of(O.SSEEventSeen))
    for k in range(n + 1):
        assert dashboard_texts(h.state_at(k)) == dashboard_texts(state_at(obs.items, k))
    last = "\n".join(dashboard_texts(h.state_at(n)))
    assert "get_weather" in last and "It is 18C." in last
    assert_no_key(KEY, {"dashboard": last})


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_plain_sse_file_of_an_openai_stream_replays_as_its_family(api: str, tmp_path: Path) -> None:
    """A saved stream with no request (a plain .sse file: no path, no source) was replayed as Messages: "POST
    /v1/messages", missing_message_stop, exit 1. Its first events tell its family, as `dump` tells it."""
    from inspector.record.replay import recorded_provider

    body = chat_text("18C in Paris.") if api == "chat" else responses_text("18C in Paris.")
    path = tmp_path / "saved.sse"
    path.write_bytes(body)
    recording = load_recording(path)
    provider = recorded_provider(recording)
    assert provider is not None and provider.api == api
    r = replay_session(recording, speed=math.inf, label="saved.sse")
    robs = Observed(r.bus)
    async with asyncio.timeout(RUN_TIMEOUT):
        replayed = await r.run()
    assert replayed.status == "finished", replayed.error
    assert not [d for d in robs.of(O.DiagnosticRaised) if d.diagnostic.severity == "error"]
    assert "".join(d.fragment for d in robs.of(O.BlockDelta)) == "18C in Paris."
    assert (await _headless_lines(path)).count("stop_reason") == 1  # (said once, though updated twice alike)


async def _headless_lines(path: Path) -> str:
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "inspector", "replay", "--headless", str(path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    assert proc.returncode == 0, out.decode()
    return out.decode()

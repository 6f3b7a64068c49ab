"""Canary, end to end: an OpenAI upstream whose model echoes the client's API key split across two deltas (chat
``delta.content`` and ``tool_calls[i].function.arguments``, Responses ``response.output_text.delta`` and
``response.function_call_arguments.delta``), ``\\u``-escaped too. Through the proxy with the official openai SDK as
the client: the client gets upstream's bytes as they are (the proxy forwards, it does not edit), and the key is in
no observation, no text of the dashboard, not in the recording, its dumps or its HTML export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import openai
import orjson
import pytest

from inspector.net.proxy import ProxyApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.record.har import load_any
from inspector.record.htmlexport import export
from inspector.state.fold import DashboardState
from inspector.testing.secrets import assert_no_key, dashboard_texts

KEY = "sk-proj-canaryEchoed0123456789abcdefXYZ"


def _u(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _pieces(key: str) -> tuple[str, str]:
    """The tool arguments (JSON text whose string holds the key, its first characters \\u-escaped) in two
    pieces, cut inside the key, each as the inside of a JSON string."""
    args = '{"k": "' + _u(key[:9]) + key[9:] + '"}'
    cut = args.index(key[9:]) + 8
    return orjson.dumps(args[:cut]).decode()[1:-1], orjson.dumps(args[cut:]).decode()[1:-1]


def _chat(key: str) -> list[bytes]:
    def chunk(delta: str, finish: str = "null") -> bytes:
        return (
            b'data: {"id":"chatcmpl-k","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":'
            + delta.encode()
            + b',"finish_reason":'
            + finish.encode()
            + b"}]}\n\n"
        )

    a1, a2 = _pieces(key)
    return [
        chunk('{"role":"assistant","content":""}'),
        chunk(f'{{"content":"your key: {key[:11]}"}}'),
        chunk(f'{{"content":"{key[11:]}."}}'),
        chunk('{"tool_calls":[{"index":0,"id":"call_k","type":"function","function":{"name":"f","arguments":""}}]}'),
        chunk(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":"{a1}"}}}}]}}'),
        chunk(f'{{"tool_calls":[{{"index":0,"function":{{"arguments":"{a2}"}}}}]}}'),
        chunk("{}", '"tool_calls"'),
        b"data: [DONE]\n\n",
    ]


def _responses(key: str) -> list[bytes]:
    def ev(t: str, n: int, body: str) -> bytes:
        return f'event: {t}\ndata: {{"type":"{t}","sequence_number":{n},{body}}}\n\n'.encode()

    resp = '"response":{"id":"resp_k","object":"response","status":"%s","output":[],"model":"gpt-test"}'
    a1, a2 = _pieces(key)
    part = '"item_id":"msg_k","output_index":0,"content_index":0'
    fc = '"item_id":"fc_k","output_index":1'
    item = f'{{"id":"fc_k","type":"function_call","status":"completed","arguments":"{a1 + a2}","call_id":"call_k","name":"f"}}'
    return [
        ev("response.created", 0, resp % "in_progress"),
        ev(
            "response.output_item.added",
            1,
            '"output_index":0,"item":{"id":"msg_k","type":"message","role":"assistant","content":[],"status":"in_progress"}',
        ),
        ev("response.content_part.added", 2, part + ',"part":{"type":"output_text","text":"","annotations":[]}'),
        ev("response.output_text.delta", 3, part + f',"delta":"your key: {key[:11]}"'),
        ev("response.output_text.delta", 4, part + f',"delta":"{key[11:]}."'),
        ev(
            "response.output_item.added",
            5,
            '"output_index":1,"item":{"id":"fc_k","type":"function_call","status":"in_progress","arguments":"","call_id":"call_k","name":"f"}',
        ),
        ev("response.function_call_arguments.delta", 6, fc + f',"delta":"{a1}"'),
        ev("response.function_call_arguments.delta", 7, fc + f',"delta":"{a2}"'),
        ev("response.function_call_arguments.done", 8, fc + f',"arguments":"{a1 + a2}"'),
        ev("response.output_item.done", 9, '"output_index":1,"item":' + item),
        ev("response.completed", 10, (resp % "completed").replace('"output":[]', '"output":[' + item + "]")),
    ]


if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send


class EchoUpstream:
    """An OpenAI-shaped upstream whose model echoes the bearer key it was sent, one event per write."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        key = auth.removeprefix("Bearer ")
        events = _chat(key) if scope["path"].endswith("/chat/completions") else _responses(key)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for e in events:
            await send({"type": "http.response.body", "body": e, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_key_echoed_across_openai_deltas_is_nowhere_but_in_the_clients_stream(tmp_path: Path, api: str) -> None:
    bus = O.ObservationBus()
    seen: list[O.Observation] = []
    bus.subscribe(seen.append)
    record = tmp_path / f"{api}.jsonl"
    got = ""
    with BackgroundServer(EchoUpstream()) as up, BackgroundServer(ProxyApp(up.base_url, record=record, bus=bus)) as px:
        client = openai.AsyncOpenAI(base_url=px.base_url + "/v1", api_key=KEY, max_retries=0)
        try:
            if api == "chat":
                stream = await client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                async for c in stream:
                    got += "".join(ch.delta.content or "" for ch in c.choices)
            else:
                events = await client.responses.create(model="gpt-test", input="hi", stream=True)
                async for e in events:
                    got += e.delta if e.type == "response.output_text.delta" else ""
        finally:
            await client.close()
    assert got == f"your key: {KEY}."  # the client's stream is upstream's, untouched
    assert [o.input for o in seen if isinstance(o, O.ToolUse)] == [{"k": "[redacted]"}]
    page = tmp_path / "page.html"
    export(load_any(record), page)
    outputs: dict[str, str | bytes] = {
        "observations": orjson.dumps([o.to_json() for o in seen], default=str),
        "recording": record.read_bytes(),
        "html export": page.read_bytes(),
    }
    for i, text in enumerate(dashboard_texts(DashboardState().apply_all(seen))):
        outputs[f"dashboard text {i}"] = text
    assert_no_key(KEY, outputs)

"""Every fault of the catalogue in both OpenAI families, through a socket: the bytes on the wire in that family's
form, and what the openai SDK makes of them (one case per fault per family)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import openai
import pytest

from inspector.net.faults import BOM, FAULTS
from inspector.scenarios.bundled import get_scenario
from inspector.scenarios.model import TextBlock, ToolUseBlock
from inspector.testing.pytest_plugin import InspectorServer

pytest_plugins = ["inspector.testing.pytest_plugin"]

KEY = "sk-proj-CANARY-openai-faults-000000000"
SC = get_scenario("weather")
_TEXT, _CALL = SC.turns[0].blocks[0], SC.turns[0].blocks[1]
assert isinstance(_TEXT, TextBlock) and isinstance(_CALL, ToolUseBlock)
ARGS = json.dumps(_CALL.input)  # the scripted tool call's arguments, as the API formats them
TEXT = _TEXT.text
# (the SDK's tool params are TypedDicts: these are passed as JSON)
CHAT_TOOLS: list[Any] = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
RESP_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
PATHS = {"chat": "/chat/completions", "responses": "/responses"}
Check = Callable[[InspectorServer, str], None]  # a fault's checks, on (its server, the API)
# the reads the server sent in the last raw() request, per server (None: a hanging stall, not noted yet)
_RAW_READS: dict[InspectorServer, int | None] = {}


def body_of(api: str) -> dict[str, Any]:
    if api == "chat":
        return {
            "model": SC.model,
            "messages": [{"role": "user", "content": SC.prompt}],
            "tools": CHAT_TOOLS,
            "stream": True,
        }
    return {"model": SC.model, "input": SC.prompt, "tools": RESP_TOOLS, "stream": True}


def raw(server: InspectorServer, api: str, timeout: float = 2.0) -> tuple[int, dict[str, str], bytes, str | None]:
    """One streamed request by hand: status, headers, the body bytes received, and how reading ended."""
    got = bytearray()
    ended: str | None = None
    with httpx2.Client(timeout=httpx2.Timeout(timeout)) as http:
        with http.stream(
            "POST", server.openai_base_url + PATHS[api], json=body_of(api), headers={"authorization": f"Bearer {KEY}"}
        ) as r:
            try:
                for chunk in r.iter_raw():
                    got += chunk
            except httpx2.ReadTimeout:
                ended = "timeout"
            except httpx2.RemoteProtocolError:
                ended = "drop"
            status, headers = r.status_code, dict(r.headers)
    ex = server.message_requests[-1].exchange  # (a hanging stall is not noted yet)
    _RAW_READS[server] = None if ex is None else ex.reads  # the reads the server sent
    server.reset()  # the SDK's request is attempt 0 again
    return status, headers, bytes(got), ended


def sdk(server: InspectorServer, api: str, **kw: Any) -> tuple[object, object, list[Any]] | Exception:
    """The turn through the SDK's streaming helper: (finish / status, text, tool arguments) or the exception."""
    client = openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, **kw)
    try:
        if api == "chat":
            with client.chat.completions.stream(
                model=SC.model, messages=[{"role": "user", "content": SC.prompt}], tools=CHAT_TOOLS
            ) as s:
                f = s.get_final_completion()
            m = f.choices[0]
            return m.finish_reason, m.message.content, [t.function.arguments for t in m.message.tool_calls or []]
        with client.responses.stream(model=SC.model, input=SC.prompt, tools=RESP_TOOLS) as s:
            r = s.get_final_response()
        return r.status, r.output_text, [o.arguments for o in r.output if o.type == "function_call"]
    except Exception as e:  # noqa: BLE001 (the outcome under test: whatever the SDK raises is the result)
        return e


def events(api: str, body: bytes) -> list[Any]:
    """The data objects of a body (chat: ``[DONE]`` as the string)."""
    out: list[Any] = []
    for block in re.split(rb"\r\n\r\n|\n\n|\r\r", body.removeprefix(BOM)):
        for line in re.split(rb"\r\n|\n|\r", block):
            if line.startswith(b"data: "):
                data = line[6:].strip()
                out.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return out


def streamed_args(api: str, evs: list[Any]) -> str:
    if api == "chat":
        return "".join(
            tc["function"].get("arguments", "")
            for e in evs
            if isinstance(e, dict)
            for c in e.get("choices", [])
            for tc in c["delta"].get("tool_calls", [])
        )
    return "".join(e["delta"] for e in evs if e.get("type") == "response.function_call_arguments.delta")


CLEAN = {"chat": ("tool_calls", TEXT, [ARGS]), "responses": ("completed", TEXT, [ARGS])}
APIS = ["chat", "responses"]


def test_every_fault_has_a_case() -> None:
    assert set(FAULTS) == {n.split("[")[0] for n in CASES}


def _http(code: str | None, status: int, etype: str) -> Check:
    def check(server: InspectorServer, api: str) -> None:
        st, headers, body, _ = raw(server, api)
        assert st == status
        err = json.loads(body)["error"]
        assert err["type"] == etype and err["code"] == code and set(err) == {"message", "type", "param", "code"}
        assert headers["retry-after"] and headers["retry-after-ms"] and headers["x-request-id"].startswith("req_")
        assert "x-ratelimit-remaining-requests" in headers
        e = sdk(server, api, max_retries=0)
        assert isinstance(e, openai.APIStatusError) and e.status_code == status and e.code == code
        server.reset()
        assert sdk(server, api) == CLEAN[api]  # the SDK retries by itself
        assert [r.attempt for r in server.message_requests][-2:] == [0, 1]

    return check


def _error_event(server: InspectorServer, api: str) -> None:
    _, _, body, ended = raw(server, api)
    evs = events(api, body)
    assert ended is None and "[DONE]" not in evs
    assert evs[-1]["error"]["type"] == "server_error"
    if api == "responses":
        assert body.rstrip().rsplit(b"\n\n", 1)[-1].startswith(b"event: error")
        assert evs[-1]["sequence_number"] == evs[-2]["sequence_number"] + 1
    e = sdk(server, api, max_retries=0)
    assert type(e) is openai.APIError and "overloaded" in str(e)


def _drop(server: InspectorServer, api: str) -> None:
    _, _, body, ended = raw(server, api)
    assert ended == "drop"
    e = sdk(server, api, max_retries=0)
    assert isinstance(e, openai.APIConnectionError)
    assert server.message_requests[-1].end == "drop"


def _drop_in_tool(server: InspectorServer, api: str) -> None:
    _, _, body, ended = raw(server, api)
    assert ended == "drop"
    partial = streamed_args(api, events(api, body[: body.rfind(b"\n\n") + 2]))
    assert partial and ARGS.startswith(partial) and partial != ARGS
    assert isinstance(sdk(server, api, max_retries=0), openai.APIConnectionError)


def _stall(server: InspectorServer, api: str) -> None:
    _, _, body, ended = raw(server, api, timeout=1.0)  # waited out in full: as long as the SDK's below
    assert ended == "timeout"
    assert body.count(b": keep-alive\n\n") == 2 and len(events(api, body)) == 1
    e = sdk(server, api, max_retries=0, timeout=httpx2.Timeout(1.0))
    assert isinstance(e, openai.APITimeoutError)


def _invalid_tool_json(server: InspectorServer, api: str) -> None:
    _, _, body, _ = raw(server, api)
    cut = streamed_args(api, events(api, body))
    with pytest.raises(ValueError):
        json.loads(cut)
    assert ARGS.startswith(cut)
    assert sdk(server, api) == (CLEAN[api][0], TEXT, [cut])


def _max_tokens_tool(server: InspectorServer, api: str) -> None:
    _, _, body, _ = raw(server, api)
    evs = events(api, body)
    if api == "chat":
        assert [c["finish_reason"] for c in evs[-2]["choices"]] == ["length"] and evs[-1] == "[DONE]"
        assert isinstance(sdk(server, api), openai.LengthFinishReasonError)
    else:
        assert evs[-1]["type"] == "response.incomplete"
        assert evs[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
        assert evs[-1]["response"]["output"][-1]["status"] == "incomplete"
        e = sdk(server, api)
        assert isinstance(e, RuntimeError) and "response.completed" in str(e)


def _format(check_body: Callable[[InspectorServer, str, bytes], object]) -> Check:
    def check(server: InspectorServer, api: str) -> None:
        _, _, body, ended = raw(server, api)
        assert ended is None
        check_body(server, api, body)
        assert sdk(server, api) == CLEAN[api]

    return check


def _reads(server: InspectorServer) -> int:
    reads = _RAW_READS[server]
    assert reads is not None, "the server noted no reads"
    return reads


CASES: dict[str, Check] = {
    "http_429": _http("rate_limit_exceeded", 429, "requests"),
    "http_529": _http(None, 529, "server_error"),
    "error_event": _error_event,
    "drop_event": _drop,
    "drop_in_tool": _drop_in_tool,
    "drop_byte": _drop,
    "stall[2]": _stall,
    "invalid_tool_json": _invalid_tool_json,
    "max_tokens_tool": _max_tokens_tool,
    "slow_drip": _format(lambda s, api, b: len(events(api, b)) == _reads(s) or pytest.fail("one event per read")),
    "relay_buffer": _format(lambda s, api, b: _reads(s) == 1 or pytest.fail("one burst")),
    "split_events": _format(lambda s, api, b: _reads(s) > len(events(api, b)) or pytest.fail("split")),
    "cr": _format(lambda s, api, b: (b"\r" in b and b"\n" not in b) or pytest.fail("CR only")),
    "crlf": _format(lambda s, api, b: b.count(b"\r\n\r\n") == len(events(api, b)) or pytest.fail("CRLF")),
    "bom": _format(lambda s, api, b: (b.startswith(BOM) and b.count(BOM) == 1) or pytest.fail("BOM")),
    "padded": _format(lambda s, api, b: re.search(rb"\} +\n", b) is not None or pytest.fail("padded")),
    # weather's turn has one tool call: nothing to interleave, the stream is the clean one (as for Anthropic)
    "interleave_blocks": _format(lambda s, api, b: True),
}


def _fault(case: str) -> str:
    name, _, arg = case.partition("[")
    return f"{name}:{arg.rstrip(']')}" if arg else name


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, InspectorServer]]:
    """One weather server per fault, started once for the module and shared by the two APIs' tests (a start and a
    stop cost ~0.25 s, 34 times); each test gets its server reset(): no request of the other test, attempts at 0."""
    pool = {case: InspectorServer("weather", faults=_fault(case)) for case in CASES}
    yield pool
    with ThreadPoolExecutor(len(pool)) as stopping:  # each stop waits for its loop's next tick: all at once
        list(stopping.map(InspectorServer.close, pool.values()))


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("case", list(CASES))
def test_fault_in_the_openai_families(servers: dict[str, InspectorServer], case: str, api: str) -> None:
    server = servers[case]
    server.reset()
    CASES[case](server, api)

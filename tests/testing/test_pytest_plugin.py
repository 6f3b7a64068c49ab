"""The pytest plugin (inspector.testing.pytest_plugin): the README's example runs as written, failures name the
request, the rule and the offending message, and the server's bookkeeping (requests, attempts, reset) is right."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from inspector.scenarios.bundled import SCENARIOS
from inspector.scenarios.fileformat import dump_scenario
from inspector.testing.pytest_plugin import InspectorServer

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"
PLUGIN = ("-p", "inspector.testing.pytest_plugin")
HEADERS = {
    "x-api-key": "sk-test-secret-key",
    "anthropic-version": "2023-06-01",
    "helicone-auth": "Bearer relay-secret-0123456789",  # a relay's credential header: never shown either
}


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytester subprocess imports this checkout's inspector package (whatever the installed one is)."""
    import os

    import inspector

    root = str(Path(inspector.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))


def readme_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Test your harness in CI", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the README section has one complete python example"
    return blocks[0]


def test_the_readme_example_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_my_agent=readme_example())
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


BROKEN_HARNESS = """
import anthropic
import pytest


def test_forgets_the_tool_result(inspector_server):
    server = inspector_server("weather")
    client = anthropic.Anthropic(base_url=server.base_url, api_key="test-key", max_retries=0)
    messages = [{"role": "user", "content": "What's the weather like in Paris right now?"}]
    first = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages)
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append({"role": "user", "content": "and tomorrow?"})  # no tool_result for the tool_use
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages)
    server.assert_valid_histories()
"""


def test_a_broken_history_fails_like_a_pytest_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken=BROKEN_HARNESS)
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 of 2 requests broke the Messages API's history rules:*",
            "*request 2 (POST /v1/messages, status 400): rule missing_tool_result: messages.2: `tool_use` ids were "
            "found without `tool_result` blocks immediately after: toolu_*",
        ]
    )
    assert 'offending message: messages[2] = {"role": "user", "content": "and tomorrow?"}' in result.stdout.str()
    failure = [line for line in result.stdout.lines if line.startswith("E ")]
    assert failure and not any("test-key" in line for line in failure)  # the API key is never shown


def test_servers_from_a_file_and_faults_and_they_stop(pytester: pytest.Pytester, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(dump_scenario(SCENARIOS["weather"]).replace("name: weather", "name: mine"), encoding="utf-8")
    pytester.makepyfile(
        test_file=f"""
import anthropic, httpx2

def test_file(inspector_server):
    server = inspector_server({str(path)!r}, faults="http_429")
    client = anthropic.Anthropic(base_url=server.base_url, api_key="k")
    client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=[{{"role": "user", "content": "hi"}}])
    assert [r.status for r in server.message_requests] == [429, 200]
    assert server.scenario.name == "mine"
    test_file.url = server.base_url

def test_stopped():
    try:
        httpx2.get(test_file.url + "/v1/models", timeout=2)
    except httpx2.TransportError:
        return
    raise AssertionError("the server of the previous test is still up")
"""
    )
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


class _FsPath:
    """An os.PathLike that is not a pathlib.Path (os.DirEntry, a project's own path type)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


def test_a_scenario_file_given_as_any_path_like(tmp_path: Path) -> None:
    """Any os.PathLike names a scenario file, as `get_scenario` takes it (not only a str or a pathlib.Path): the
    server's `scenario` is the file's scenario, not the path object."""
    path = tmp_path / "mine.yaml"
    path.write_text(dump_scenario(SCENARIOS["weather"]).replace("name: weather", "name: mine"), encoding="utf-8")
    server = InspectorServer(_FsPath(path))
    try:
        assert server.scenario.name == "mine"
        assert repr(server) == "InspectorServer('mine', 0 requests)"
    finally:
        server.close()


def _post(server: InspectorServer, messages: list[dict[str, Any]], **headers: str) -> httpx2.Response:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": messages, "stream": True}
    return httpx2.post(server.base_url + "/v1/messages", json=body, headers={**HEADERS, **headers}, timeout=30)


def test_requests_attempts_and_reset() -> None:
    server = InspectorServer("weather")
    try:
        user = [{"role": "user", "content": "hi"}]
        assert _post(server, user).status_code == 200
        assert _post(server, user).status_code == 200  # the same request again: the next attempt
        reqs = server.requests
        assert [(r.index, r.turn, r.attempt, r.status, r.stream, r.end) for r in reqs] == [
            (0, 0, 0, 200, True, "eof"),
            (1, 0, 1, 200, True, "eof"),
        ]
        assert reqs[0].body["messages"] == user and reqs[0].history is None
        assert "x-api-key" not in reqs[0].headers and b"sk-test" not in json.dumps(reqs[0].headers).encode()
        assert "helicone-auth" not in reqs[0].headers and reqs[0].headers["anthropic-version"] == "2023-06-01"
        server.reset()
        assert server.requests == []
        assert _post(server, user).status_code == 200
        assert server.requests[0].attempt == 0  # reset forgot the attempt counters
        assert repr(server).endswith(", 1 request)")  # (it said "1 requests")
        # a failing assertion on a request shows its body once, parsed (raw_body, the same bytes, doubled it)
        shown = repr(server.requests[0])
        assert "raw_body" not in shown and shown.count('"hi"') + shown.count("'hi'") == 1, shown
        bad = [{"role": "assistant", "content": "hi"}]
        assert _post(server, bad).status_code == 400
        violation = server.requests[-1].history
        assert violation is not None and violation.kind == "first_not_user"
        assert server.requests[-1].rejected and server.requests[-1].status == 400
        with pytest.raises(AssertionError, match=r"request 2 \(POST /v1/messages, status 400\): rule first_not_user"):
            server.assert_valid_histories()
        with pytest.raises(AssertionError, match="1 request was rejected"):
            server.assert_no_rejections()
    finally:
        server.close()


async def test_a_recording_is_served_as_recorded(tmp_path: Path) -> None:
    import math

    from inspector.record.har import load_any
    from inspector.sessions.sources import scenario_session
    from inspector.stream.sse import iter_events

    rec = tmp_path / "w.jsonl"
    s = scenario_session("weather", speed=math.inf, record=rec)
    await s.run()
    s.close()
    first = load_any(rec).turns[0].attempts[-1]
    assert first.request is not None  # (the recorded request of the turn's last attempt)
    server = InspectorServer(recording=rec)
    try:
        async with httpx2.AsyncClient(timeout=30) as http:
            body = {**first.request["body"], "stream": True}
            r = await http.post(server.base_url + "/v1/messages", json=body, headers=HEADERS)
        got = [(e.event, e.data) for e in iter_events(r.content) if e.event != "ping"]
        want = [(e.event, e.data) for e in iter_events(first.data) if e.event != "ping"]
        assert [(n, json.loads(d)) for n, d in got] == [(n, json.loads(d)) for n, d in want]
    finally:
        server.close()


def test_a_request_shows_its_turn_and_attempt_while_its_answer_streams() -> None:
    """Known when the answer starts, not only when it ends: a client that stops reading at its last event (the openai
    SDK stops at [DONE]) and looks at `requests` at once sees them; here the answer never ends (a stall)."""
    server = InspectorServer("weather", faults="stall:1")
    try:
        body = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
        with httpx2.stream(
            "POST", server.base_url + "/v1/messages", json={**body, "stream": True}, headers=HEADERS, timeout=30
        ) as r:
            assert r.status_code == 200
            req = server.message_requests[-1]
            assert (req.turn, req.attempt, req.status, req.end) == (0, 0, 200, None)
            assert req.faults == "stall:1@once" and req.once == "stall:1@once fired here"
    finally:
        server.close()


def test_an_openai_history_violation_shows_its_offending_message() -> None:
    """OpenAI's rules say where in ``param`` (``messages.[1].role``), not in their message: the failure had no
    "offending message" line, and a Responses request's ``messages`` was always empty."""
    import openai

    from inspector.testing.pytest_plugin import InspectorServer

    server = InspectorServer("weather")
    try:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test-plugin-0000", max_retries=0)
        call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        messages: list[Any] = [
            {"role": "user", "content": "Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "and tomorrow?"},  # no tool message for call_1
        ]
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="gpt-4o", messages=messages)
        items: list[Any] = [{"type": "function_call_output", "call_id": "call_none", "output": "18"}]
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model="gpt-4o", input=[{"role": "user", "content": "hi"}, *items])
        with pytest.raises(AssertionError) as info:
            server.assert_valid_histories()
        text = str(info.value)
        assert "offending message: messages[1] = " in text and '"tool_calls"' in text
        assert "where: input" in text  # (a Responses rule that names no item: where it is)
        assert [len(r.messages) for r in server.requests] == [3, 2]
    finally:
        server.close()


async def test_a_client_that_stops_at_done_sees_how_its_request_ended() -> None:
    """The openai SDK stops reading a chat stream at ``data: [DONE]`` (before the body's end) and its caller looks at
    ``requests`` at once: the read with [DONE] goes out once the exchange is noted (``end`` was None 7 times in 30)."""
    import asyncio

    from inspector.testing.pytest_plugin import _Capture

    server = InspectorServer("weather")
    try:
        capture = _Capture(server._begin, server.app)
        body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        raw = json.dumps(body).encode()
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "raw_path": b"/v1/chat/completions",
            "query_string": b"",
            "headers": [(b"authorization", b"Bearer sk-test"), (b"content-type", b"application/json")],
            "scheme": "http",
            "server": ("127.0.0.1", 1),
            "client": ("127.0.0.1", 2),
            "http_version": "1.1",
            "root_path": "",
        }
        sent = False
        seen: list[str | None] = []

        async def receive() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await asyncio.Event().wait()

        async def send(message: Any) -> None:
            if b"data: [DONE]" in message.get("body", b""):
                seen.append(server.requests[-1].end)

        await capture(scope, receive, send)
        assert seen == ["eof"]
    finally:
        server.close()


def test_a_server_that_could_not_start_has_a_repr() -> None:
    """pytest's traceback of a wrong call shows ``self``: it read ``<[AttributeError(...) raised in repr()]
    InspectorServer object at 0x...>``, as if the plugin had a bug of its own."""
    server = InspectorServer.__new__(InspectorServer)
    assert repr(server) == "InspectorServer(not started)"
    with pytest.raises(ValueError, match="a scenario or a recording, not both"):
        InspectorServer("weather", recording="x.jsonl")

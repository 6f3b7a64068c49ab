"""A pytest plugin for harness developers: a fake Anthropic Messages API per test (``inspector serve`` in process).

Installed with the package (entry point ``pytest11``), it adds the ``inspector_server`` fixture, a factory::

    def test_my_harness(inspector_server):
        server = inspector_server("weather")                  # a bundled scenario, a scenario file's path,
        # inspector_server(recording="session.jsonl")         # a recording (replayed as a scenario; one of an
        #                                                     # OpenAI session: on its endpoint, as serve --recording)
        # inspector_server("parse_date", faults="relay_buffer,http_429")
        # inspector_server("weather", faults="drop_event")   # one dropped stream, then none (@once, the
        #                                                     # default of transport faults); drop_event@turn: each turn
        run_my_harness(base_url=server.base_url, api_key="test")
        # openai.OpenAI(base_url=server.openai_base_url, api_key="test"): the same scenario, in OpenAI's formats
        server.assert_valid_histories()                       # every request kept the API's history rules
        assert [r.turn for r in server.requests] == [0, 1]

Typed: annotate the argument with the fixture's type, ``def test_x(inspector_server: InspectorServerFactory)``.

Each server listens on an ephemeral 127.0.0.1 port and stops at the end of the test. ``server.requests`` lists
every request: its body, turn, attempt, status, the history check's result, and what the server answered.
Failures name the request, the rule and the offending message.

Nothing heavy is imported until a test asks for a server (uvicorn and starlette are the package's dependencies).
"""

from __future__ import annotations

import contextvars
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from inspector.core.fmt import count
from inspector.core.redaction import is_credential

if TYPE_CHECKING:  # (types only: nothing heavy is imported until a test asks for a server)
    from starlette.types import Message, Receive, Scope, Send

    from inspector.net.faults import FaultSpec
    from inspector.net.serve import Exchange, ServeApp
    from inspector.scenarios.model import Scenario
    from inspector.stream.history import Violation

__all__ = ["InspectorServer", "InspectorServerFactory", "ServedRequest", "inspector_server"]

_CURRENT: contextvars.ContextVar[ServedRequest | None] = contextvars.ContextVar("inspector_served", default=None)


@dataclass
class ServedRequest:
    """One request the server received (0-based ``index``, ``turn`` and ``attempt``, as in recordings)."""

    index: int
    method: str
    path: str
    headers: dict[str, str]  # credentials removed
    body: Any  # the parsed JSON body (None if it was not JSON)
    raw_body: bytes = field(default=b"", repr=False)  # (the body again, as bytes: a failing assertion shows `body`)
    status: int | None = None
    turn: int | None = None
    attempt: int | None = None
    stream: bool | None = None
    end: str | None = None  # eof | drop | hang | disconnected
    rejected: str | None = None  # the 4xx/5xx message the server answered instead of the scenario
    history: Violation | OpenAIViolation | None = None  # None when the messages keep their API's rules
    faults: str = "none"  # the faults chosen for it, each with its scope ("drop_event@once,bom@turn")
    once: str | None = None  # what became of its @once faults here ("drop_event@once fired here", "... spent at ...")
    exchange: Exchange | None = field(default=None, repr=False)  # what the server did with it, once it ended
    _selected: Exchange | None = field(default=None, repr=False, compare=False)  # the exchange, before it ends

    @property
    def messages(self) -> list[Any]:
        """The request's history: ``messages`` (Messages, Chat Completions), else a Responses ``input`` list."""
        if not isinstance(self.body, dict):
            return []
        msgs = self.body.get("messages", self.body.get("input"))
        return msgs if isinstance(msgs, list) else []

    def describe(self) -> str:
        where = f"turn {self.turn + 1} attempt {(self.attempt or 0) + 1}, " if self.turn is not None else ""
        return f"request {self.index + 1} ({self.method} {self.path}, {where}status {self.status})"


OPENAI_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses"}


@dataclass(frozen=True)
class OpenAIViolation:
    """An OpenAI history rule a request broke (``kind``: ``openai_history``; ``param``: where)."""

    kind: str
    message: str
    param: str | None = None


def _openai_violation(api: str, body: dict[str, Any]) -> OpenAIViolation | None:
    from inspector.scenarios.fakeapi import chat_history_problem, responses_history_problem

    if api == "chat":
        messages = body.get("messages")
        problem = chat_history_problem(messages) if isinstance(messages, list) else None
    else:
        problem = responses_history_problem(body.get("input"), continued=bool(body.get("previous_response_id")))
    if problem is None:
        return None
    return OpenAIViolation("openai_history", problem[0], problem[1])


def _offending(req: ServedRequest, violation: Violation | OpenAIViolation) -> str:
    """The line that shows the message a rule names: OpenAI's say where in ``param`` (``messages.[1].role``),
    Anthropic's in their message (``messages.1``)."""
    where = getattr(violation, "param", None) or violation.message
    m = re.search(r"messages\.\[?(\d+)", where)
    if m is None:
        return f"\n  where: {where}" if isinstance(violation, OpenAIViolation) and violation.param else ""
    i = int(m.group(1))
    if not 0 <= i < len(req.messages):
        return f"\n  offending message: messages[{i}] (missing: the request has {len(req.messages)} messages)"
    text = json.dumps(req.messages[i], ensure_ascii=False, default=str)
    if len(text) > 600:
        text = text[:597] + "..."
    return f"\n  offending message: messages[{i}] = {text}"


class InspectorServer:
    """A running fake API: ``base_url``, ``requests``, ``reset()`` and assertion helpers."""

    def __init__(
        self,
        scenario: str | os.PathLike[str] | Scenario | None = None,
        *,
        recording: str | os.PathLike[str] | None = None,
        faults: str | Sequence[FaultSpec | str] | None = None,
        speed: float = math.inf,
        validate_history: bool = True,
        lenient: bool = False,
    ) -> None:
        from inspector.net.serve import ServeApp
        from inspector.net.server import BackgroundServer
        from inspector.scenarios.bundled import DEFAULT_SCENARIO, get_scenario

        source = None  # a recording of an OpenAI session: served as `inspector serve --recording` serves it
        if recording is not None:
            if scenario is not None:
                raise ValueError("inspector_server: give a scenario or a recording, not both")
            from inspector.net.recorded import RecordingSource
            from inspector.record.har import load_any
            from inspector.scenarios.fromrec import scenario_from_recording

            loaded = load_any(recording)
            source = RecordingSource(loaded, Path(recording).name or "recording")
            if source.family == "anthropic":  # replayed as a scenario (faults and all)
                sc = scenario_from_recording(loaded, name=Path(recording).stem or "recording")
                source = None
            else:  # on its family's endpoint (/v1/chat/completions or /v1/responses), with serve's recording faults
                sc = get_scenario(DEFAULT_SCENARIO)
        elif scenario is None:
            sc = get_scenario(DEFAULT_SCENARIO)
        elif isinstance(scenario, (str, os.PathLike)):
            sc = get_scenario(scenario)
        else:
            sc = scenario  # a Scenario object
        self.scenario = sc
        self.recording = source  # RecordingSource of an OpenAI recording (None: the scenario is served)
        self._lock = threading.Lock()
        self._requests: list[ServedRequest] = []
        self.app = ServeApp(
            sc,
            faults,
            speed=speed,
            validate_history=validate_history,
            lenient=lenient,  # no credential / field / model checks (like `inspector serve --lenient`)
            on_exchange=self._on_exchange,
            on_select=self._on_select,  # turn, attempt and faults known while the answer streams
            recording=source,
        )
        self._server = BackgroundServer(_Capture(self._begin, self.app))
        self._server.start()

    # --- plumbing -------------------------------------------------------------------------------------------------
    def _begin(self, scope: Scope, body: bytes) -> ServedRequest:
        from inspector.stream.history import history_violation

        headers = {  # (no credential: what a test shows of a request never holds a key)
            k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope.get("headers", [])
            if not is_credential(k, v)
        }
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        with self._lock:
            req = ServedRequest(len(self._requests), scope.get("method", "?"), scope.get("path", "?"), headers, parsed)
            req.raw_body = body
            path = scope.get("path")
            if path == "/v1/messages" and isinstance(parsed, dict):
                req.history = history_violation(parsed.get("messages"))
            elif path in OPENAI_PATHS and isinstance(parsed, dict):
                req.history = _openai_violation(OPENAI_PATHS[path], parsed)
            self._requests.append(req)
        return req

    def _on_select(self, ex: Exchange) -> None:
        req = _CURRENT.get()
        if req is not None:
            req.turn, req.attempt, req.faults, req.once = ex.turn, ex.attempt, ex.faults, ex.once
            req._selected = ex  # noqa: SLF001  (this module's own bookkeeping)

    def _on_exchange(self, ex: Exchange) -> None:
        req = _CURRENT.get()
        if req is None:
            return
        req.exchange = ex
        req.status, req.turn, req.attempt = ex.status, ex.turn, ex.attempt
        req.stream, req.end, req.rejected = ex.stream, ex.end, ex.rejected
        req.faults, req.once = ex.faults, ex.once

    # --- the API --------------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: give it to the SDK (``base_url=``) or as ANTHROPIC_BASE_URL."""
        return self._server.base_url

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the same server for the openai SDK (``openai.OpenAI(base_url=...)`` or
        OPENAI_BASE_URL), which answers ``/v1/chat/completions`` and ``/v1/responses`` from the same scenario."""
        return self._server.base_url + "/v1"

    @property
    def requests(self) -> list[ServedRequest]:
        """Every request so far (Messages API calls and others), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[ServedRequest]:
        """The model requests: ``/v1/messages``, ``/v1/chat/completions`` and ``/v1/responses``."""
        return [r for r in self.requests if r.path == "/v1/messages" or r.path in OPENAI_PATHS]

    def reset(self) -> None:
        """Forget the requests (numbered from 1 again) and the attempt counters (the next request is attempt 0 of its
        turn again), and re-arm the ``@once`` faults."""
        with self._lock:
            self._requests.clear()
        self.app.start_over()  # (requests numbered from 1 again, as `requests` and describe() count them)

    def assert_valid_histories(self) -> None:
        """Every model request kept its API's history rules (Messages: tool_use / tool_result pairing, roles...;
        chat: each assistant ``tool_calls`` answered by ``tool`` messages; Responses: each ``function_call`` by its
        ``function_call_output``)."""
        __tracebackhide__ = True
        requests = self.message_requests  # (one snapshot: requests may still arrive from the harness's threads)
        bad = [(r, r.history) for r in requests if r.history is not None]
        if bad:
            rules = "the Messages API's" if all(r.path == "/v1/messages" for r, _ in bad) else "their API's"
            lines = [f"{len(bad)} of {len(requests)} requests broke {rules} history rules:"]
            for r, v in bad:
                lines.append(f"{r.describe()}: rule {v.kind}: {v.message}{_offending(r, v)}")
            raise AssertionError("\n".join(lines))

    def assert_no_rejections(self) -> None:
        """The server answered every request from the scenario (no 4xx from a malformed or out-of-script request)."""
        __tracebackhide__ = True
        bad = [r for r in self.requests if r.rejected]
        if bad:
            raise AssertionError(
                f"{count(len(bad), 'request')} {'was' if len(bad) == 1 else 'were'} rejected:\n"
                + "\n".join(f"{r.describe()}: {r.rejected}" for r in bad)
            )

    def close(self) -> None:
        self._server.stop()

    def __repr__(self) -> str:
        if not hasattr(self, "_requests"):  # (a traceback of __init__ shows `self` before it has its attributes)
            return "InspectorServer(not started)"
        what = self.scenario.name if self.recording is None else f"recording {self.recording.name}"
        return f"InspectorServer({what!r}, {count(len(self._requests), 'request')})"


class _Capture:
    """ASGI wrapper: keeps each request's body and ties the server's Exchange to it (same task, same context)."""

    def __init__(self, begin: Callable[[Scope, bytes], ServedRequest], serve_app: ServeApp) -> None:
        self.begin, self.inner = begin, serve_app  # begin: the owner's bookkeeping of a request (InspectorServer)
        self.uvicorn_options = getattr(serve_app, "uvicorn_options", {})

    def begin_close(self) -> None:
        self.inner.begin_close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.inner.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        req = self.begin(scope, body)
        token = _CURRENT.set(req)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        last: list[Message] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and req.status is None:
                req.status = message.get("status")
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                last.append(message)  # held back until the server has noted the exchange: a client that has
                return  # the whole response also sees it in `requests`
            await send(message)

        try:
            await self.inner.app(scope, replay, watch)
            selected = req._selected  # noqa: SLF001  (this module's own bookkeeping)
            if last and selected is not None:
                await self.inner.printed(selected)  # (serve --recording notes an exchange once its diff is known)
        finally:
            _CURRENT.reset(token)
        for message in last:
            await send(message)

    @property
    def app(self) -> _Capture:
        return self


class InspectorServerFactory:
    """The ``inspector_server`` fixture's value and type (annotate a test's argument with it): each call starts an
    :class:`InspectorServer` with these arguments; every server it started is stopped at the end of the test."""

    def __init__(self) -> None:
        self.started: list[InspectorServer] = []

    def __call__(
        self,
        scenario: str | os.PathLike[str] | Scenario | None = None,
        *,
        recording: str | os.PathLike[str] | None = None,
        faults: str | Sequence[FaultSpec | str] | None = None,
        speed: float = math.inf,
        validate_history: bool = True,
        lenient: bool = False,
    ) -> InspectorServer:
        server = InspectorServer(
            scenario,
            recording=recording,
            faults=faults,
            speed=speed,
            validate_history=validate_history,
            lenient=lenient,
        )
        self.started.append(server)
        return server

    def close(self) -> None:
        for server in reversed(self.started):
            server.close()


@pytest.fixture
def inspector_server() -> Iterator[InspectorServerFactory]:
    """A factory of fake Messages API servers (stopped at the end of the test)::

    server = inspector_server("weather")              # or a scenario file's path, or recording="rec.jsonl"
    server = inspector_server("parse_date", faults="http_429", speed=4)
    server = inspector_server("weather", faults="drop_in_tool:1")   # one drop in a tool's JSON (@once), then clean

    Faults mean what they mean for ``inspector serve --fault`` (``inspector serve --list-faults``): transport faults
    (error_event, drop_event, drop_in_tool, drop_byte, stall) hit once per server by default (``@once``: a harness
    that recovers by retrying, or by restarting its conversation, then completes), ``@turn`` hits each turn; HTTP,
    content and format faults hit each turn by default. ``request.faults`` / ``request.once`` say which.
    """
    factory = InspectorServerFactory()
    yield factory
    factory.close()

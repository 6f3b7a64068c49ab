"""OpenTelemetry export against a real OTLP/HTTP receiver: a loopback HTTP server that decodes the protobuf with
opentelemetry-proto. Spans, parents and GenAI attributes for scenarios with tools, a retry and a failure."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from inspector.record import otel
from inspector.sessions import sources
from inspector.testing.otlp import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


async def _traced(name: str, receiver: Receiver, content: bool = False) -> list[dict[str, Any]]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
    session = sources.scenario_session(name, speed=math.inf)
    close = otel.attach(session.bus, content=content, conversation=name, provider=provider)
    try:
        await session.run()
    finally:
        close()
    return receiver.spans


async def test_weather_spans_parents_and_attributes(receiver: Receiver) -> None:
    spans = await _traced("weather", receiver)
    by: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by.setdefault(s["name"].split(" ")[0], []).append(s)
    (root,) = by["invoke_agent"]
    assert root["name"] == "invoke_agent weather"
    assert root["attrs"]["gen_ai.agent.name"] == "weather" and root["attrs"]["gen_ai.provider.name"] == "anthropic"
    chats, tools = by["chat"], by["execute_tool"]
    assert len(chats) == 2 and len(tools) == 1
    assert {s["trace"] for s in spans} == {root["trace"]}
    assert all(s["parent"] == root["id"] for s in chats + tools)
    first = chats[0]["attrs"]
    assert chats[0]["name"] == "chat claude-sonnet-4-6"
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert first["gen_ai.response.id"].startswith("msg_")
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first["gen_ai.usage.input_tokens"] == 410 and first["gen_ai.usage.output_tokens"] > 0
    assert first["gen_ai.response.time_to_first_chunk"] >= 0
    assert "error.type" not in first
    tool = tools[0]
    assert tool["name"] == "execute_tool get_weather" and tool["attrs"]["gen_ai.tool.call.id"].startswith("toolu_")
    assert "gen_ai.tool.call.arguments" not in tool["attrs"]  # content only with --otel-content
    assert "gen_ai.input.messages" not in first
    for s in spans:
        assert s["end"] >= s["start"] > 0


async def test_content_is_opt_in(receiver: Receiver) -> None:
    spans = await _traced("weather", receiver, content=True)
    chat = next(s for s in spans if s["name"].startswith("chat"))
    tool = next(s for s in spans if s["name"].startswith("execute_tool"))
    assert "Paris" in chat["attrs"]["gen_ai.input.messages"]
    assert "Paris" in tool["attrs"]["gen_ai.tool.call.arguments"]


async def test_a_retry_is_two_chat_spans_and_the_failed_one_says_why(receiver: Receiver) -> None:
    spans = await _traced("overloaded_midstream", receiver)
    chats = [s for s in spans if s["name"].startswith("chat")]
    failed = [s for s in chats if "error.type" in s["attrs"]]
    assert failed, [s["attrs"] for s in chats]
    assert all(s["status"] == 2 for s in failed)  # STATUS_CODE_ERROR
    assert any(s["attrs"]["inspector.attempt"] == 1 for s in chats)  # the retry: attempt 1 of the same turn
    assert sum(1 for s in chats if "error.type" not in s["attrs"]) >= 1


async def test_a_collector_that_is_down_never_blocks_the_stream() -> None:
    """The exporter points at a closed port: the session ends as usual and close() returns within its bound."""
    import socket
    import time

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=1))
    session = sources.scenario_session("weather", speed=math.inf)
    close = otel.attach(session.bus, provider=provider)
    result = await session.run()
    assert result.status == "finished"
    t0 = time.monotonic()
    close()
    assert time.monotonic() - t0 < 30


def test_the_cli_exports_to_the_standard_endpoint_variable(receiver: Receiver, tmp_path: Path) -> None:
    """`inspector run --headless --otel` reads OTEL_EXPORTER_OTLP_ENDPOINT like any OTel SDK, and a key in
    OTEL_EXPORTER_OTLP_HEADERS reaches the collector, not the output."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint.removesuffix("/v1/traces")
    env["OTEL_EXPORTER_OTLP_HEADERS"] = "x-honeycomb-team=otel-canary-secret"
    out = subprocess.run(
        [sys.executable, "-m", "inspector", "run", "--scenario", "weather", "--headless", "--otel"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    names = sorted(s["name"] for s in receiver.spans)
    assert names == [
        "chat claude-sonnet-4-6",
        "chat claude-sonnet-4-6",
        "execute_tool get_weather",
        "invoke_agent weather",
    ]
    assert "otel-canary-secret" not in out.stdout + out.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "inspector", "run", "--scenario", "weather", "--headless", "--otel-content"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--otel-content goes with --otel" in bad.stderr


def test_conversation_sinks_are_bounded_and_each_conversation_has_its_own_parent() -> None:
    """A proxy's bus: turns go to their conversation's span; past KEEP open conversations the oldest is ended."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from inspector.observe import observations as O

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sinks = otel.ConversationSinks(provider.get_tracer("t"))
    sinks.KEEP = 2
    body = {"model": "claude-sonnet-4-6", "messages": []}
    for turn, conv in enumerate(["a", "b", "a", "c"]):
        sinks(O.ConversationAssigned(float(turn), turn, conv, 0, 0, "new"))
        sinks(O.AttemptStarted(float(turn), turn, 0, "POST", "http://x/v1/messages", {}, body))
        sinks(O.AttemptEnded(turn + 0.5, turn, 0, "complete", None, "text_finish"))
    assert list(sinks.sinks) == ["a", "c"]  # b, the least recently active, was ended
    ended = {s.name for s in exporter.get_finished_spans()}
    assert "invoke_agent b" in ended and "invoke_agent a" not in ended
    sinks(O.LoopFinished(9.0, "cancelled", 4, [], [], None))
    spans = exporter.get_finished_spans()
    roots = {
        s.context.span_id: (s.attributes or {})["gen_ai.conversation.id"] for s in spans if s.name.startswith("invoke")
    }
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert sorted(roots.values(), key=str) == ["a", "b", "c"] and not sinks.sinks
    assert [roots[c.parent.span_id] if c.parent else None for c in chats] == ["a", "b", "a", "c"]


def test_a_call_whose_outcome_is_unknown_ends_its_span_without_an_error() -> None:
    """The proxy's call still running (inferred) when the session ended: its span ends there, outcome `unknown`, not
    marked as an error (nothing says it failed); a failed call's span is."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from inspector.observe import observations as O

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = otel.OtelSink(provider.get_tracer("t"))
    sink(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "claude-sonnet-4-6"}))
    why = "the command ended before a next request showed its result"
    for tid, end, error in (("A", "unknown", why), ("B", "failed", "boom")):
        sink(O.ToolStateChanged(1.0, 0, 0, tid, "grep", 1, "running", {}, None, None, {"running": 1.0}, inferred=True))
        sink(O.ToolStateChanged(2.0, 0, 0, tid, "grep", 1, end, None, error, None, {end: 2.0}, inferred=True))
    spans = {(s.attributes or {}).get("gen_ai.tool.call.id"): s for s in exporter.get_finished_spans()}
    assert (spans["A"].attributes or {}).get(otel.OUTCOME) == "unknown"
    assert spans["A"].status.status_code != StatusCode.ERROR and "error.type" not in (spans["A"].attributes or {})
    assert spans["B"].status.status_code == StatusCode.ERROR


def _memory_sink(**kw: Any) -> tuple[otel.OtelSink, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return otel.OtelSink(provider.get_tracer("t"), **kw), exporter


def test_a_replay_of_one_conversation_of_many_has_that_conversations_id() -> None:
    """`replay` of a proxy recording of c1..c9 replays each conversation as a loop of its own: each root carries its
    own gen_ai.conversation.id (before: the file's path for all nine, merged into one session by Langfuse/Phoenix)."""
    from inspector.observe import observations as O

    ids = []
    for conv in ("c1", "c2"):
        sink, exporter = _memory_sink(conversation="/tmp/three.jsonl")
        sink(O.LoopStarted(0.0, {"type": "replay", "file": "/tmp/three.jsonl", "conversation": conv}, "m", None))
        sink(O.LoopFinished(1.0, "finished", 0, [], [], None))
        (root,) = exporter.get_finished_spans()
        ids.append((root.attributes or {})["gen_ai.conversation.id"])
    assert ids == ["c1", "c2"]


def test_a_failed_or_cancelled_run_marks_its_conversation_span_as_an_error() -> None:
    """The invoke_agent span of a run that ended in an error (exit 1) or was cancelled (130) says so, as its failed
    chat span does; a finished run's does not."""
    from opentelemetry.trace import StatusCode

    from inspector.observe import observations as O

    got = {}
    for status, error in (("finished", None), ("error", "HTTP 413: request_too_large"), ("cancelled", "by user")):
        sink, exporter = _memory_sink()
        sink(O.LoopStarted(0.0, {"type": "scenario"}, "m", None))
        sink(O.LoopFinished(1.0, status, 1, [], [], error))
        (root,) = exporter.get_finished_spans()
        got[status] = (root.status.status_code, (root.attributes or {}).get("error.type"))
    assert got["finished"] == (StatusCode.UNSET, None)
    assert got["error"] == (StatusCode.ERROR, "error") and got["cancelled"] == (StatusCode.ERROR, "cancelled")


def test_a_call_discarded_after_its_span_ended_gets_no_second_span() -> None:
    """drop_mid_json: a call that ran (span ended, succeeded) is discarded with its failed attempt: one execute_tool
    span for that call id, and the discard is an event on the conversation's span."""
    from inspector.observe import observations as O

    sink, exporter = _memory_sink()
    sink(O.LoopStarted(0.0, {"type": "scenario"}, "m", None))
    for t, state in ((1.0, "running"), (2.0, "succeeded"), (3.0, "discarded")):
        sink(O.ToolStateChanged(t, 0, 0, "A", "read_file", 1, state, {}, None, None, {state: t}))
    sink(O.LoopFinished(4.0, "finished", 1, [], [], None))
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert len(tools) == 1 and (tools[0].attributes or {})[otel.OUTCOME] == "succeeded"
    (root,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert [(e.attributes or {}).get(otel.OUTCOME) for e in root.events] == ["discarded"]


def test_a_try_that_could_not_connect_has_no_http_status_code() -> None:
    """connection_refused: the failed try's event has no http.response.status_code (before: 0, a status no server
    sends, which a collector's status-code breakdown shows as a real one); a 429's has 429."""
    from inspector.observe import observations as O

    sink, exporter = _memory_sink()
    sink(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "m"}))
    refused = "ConnectError: [Errno 111] Connection refused"
    sink(O.HttpTryFailed(0.1, 0, 0, 0, "POST", "u", 0.0, None, {}, None, None, None, refused, 0.5))
    sink(O.HttpTryFailed(0.2, 0, 0, 1, "POST", "u", 0.6, 429, {}, "rate_limit_error", "slow", None, None, 1.0))
    sink(O.AttemptEnded(1.0, 0, 0, "complete", None, "text_finish"))
    (chat,) = exporter.get_finished_spans()
    got = [dict(e.attributes or {}) for e in chat.events]
    assert got == [{"error.type": refused}, {"error.type": "rate_limit_error", "http.response.status_code": 429}]


def test_a_responses_request_s_input_and_instructions_are_its_content(receiver: Receiver) -> None:
    """A Responses request has no `messages` and no `system`: its `input` and `instructions` are what the model got
    (with --otel-content the span had neither)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from inspector.observe import observations as O

    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
    bus = O.ObservationBus()
    close = otel.attach(bus, content=True, conversation="r", provider=provider)
    body = {"model": "gpt-4o", "stream": True, "input": "weather in Oslo?", "instructions": "be brief"}
    try:
        bus.publish(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/responses", {}, body))
        bus.publish(O.AttemptEnded(0.5, 0, 0, "complete", None, "text_finish"))
    finally:
        close()
    chat = next(s for s in receiver.spans if s["name"].startswith("chat"))
    assert chat["attrs"]["gen_ai.provider.name"] == "openai"
    assert "Oslo" in chat["attrs"]["gen_ai.input.messages"]
    assert "be brief" in chat["attrs"]["gen_ai.system_instructions"]


async def test_a_chat_completions_span_has_the_wire_s_finish_reasons(receiver: Receiver) -> None:
    """The convention's finish_reasons are the provider's words: a Chat Completions turn that calls a tool says
    "tool_calls" and the answer "stop" (they said the neutral "tool_use" and "end_turn", Anthropic's words)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from inspector.agent.toolbox.spec import ToolSpec
    from inspector.sessions.sources import openai_session
    from inspector.testing.openai_fake import KEY, FakeOpenAI, Stream, chat_text, chunk, sse, tool_delta

    async def weather(tool_input: dict[str, Any]) -> str:
        return "18C"

    call = sse(
        chunk({"role": "assistant", "content": None}),
        chunk(tool_delta(0, id="call_1", name="get_weather", args='{"city": "Oslo"}')),
        chunk({}, "tool_calls"),
        done=True,
    )
    fake = FakeOpenAI([Stream([call]), Stream([chat_text("18C in Oslo")])])
    session = openai_session(
        "gpt-test",
        "weather in Oslo?",
        api="chat",
        api_key=KEY,
        base_url="http://fake-openai.local/v1",
        builtin=False,
        user_tools={"get_weather": ToolSpec("get_weather", "weather", {"type": "object"}, weather)},
        http_client=fake.client(),
    )
    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
    close = otel.attach(session.bus, conversation="chat", provider=provider)
    try:
        await session.run()
    finally:
        close()
    chats = [s for s in receiver.spans if s["name"].startswith("chat ")]
    assert [s["attrs"]["gen_ai.provider.name"] for s in chats] == ["openai", "openai"]
    assert [s["attrs"]["gen_ai.response.finish_reasons"] for s in chats] == [["tool_calls"], ["stop"]]


def test_an_attempt_answered_with_an_http_error_says_its_status_code() -> None:
    """A proxy's attempt answered 429 (the SDK's retry is the next attempt): its chat span's error.type is the
    status code, as the HTTP conventions say, with http.response.status_code, and its outcome http_error (as dump's);
    it said error.type 'error' and no status. A 200 attempt carries its status code and no error."""
    from opentelemetry.trace import StatusCode

    from inspector.observe import observations as O

    sink, exporter = _memory_sink()
    for attempt, status in ((0, 429), (1, 200)):
        sink(O.AttemptStarted(attempt * 1.0, 0, attempt, "POST", "http://x/v1/messages", {}, {"model": "m"}))
        sink(O.ResponseStarted(attempt * 1.0 + 0.1, 0, attempt, status, {}))
        end = (
            ("http_error", "HTTP 429: rate_limit_error: slow", "http_error")
            if status == 429
            else ("complete", None, "text_finish")
        )
        sink(O.AttemptEnded(attempt * 1.0 + 0.5, 0, attempt, *end))
    failed, ok = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    fa, oa = dict(failed.attributes or {}), dict(ok.attributes or {})
    assert (fa["error.type"], fa["http.response.status_code"], fa[otel.OUTCOME]) == ("429", 429, "http_error")
    assert failed.status.status_code == StatusCode.ERROR and "429" in (failed.status.description or "")
    assert (
        oa["http.response.status_code"] == 200 and "error.type" not in oa and ok.status.status_code == StatusCode.UNSET
    )


def test_content_attributes_are_bounded() -> None:
    """--otel-content: each attempt's gen_ai.input.messages is the whole history (big_input's was 226 KB, a long
    session's MBs per span, which collectors refuse and a batch of which is lost whole). Cut past MAX_TEXT_CHARS,
    saying so; the provider bounds every other string attribute (a model name as a client sent it)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from inspector.observe import observations as O

    exporter = InMemorySpanExporter()
    provider = otel.make_provider(exporter=InMemorySpanExporter())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = otel.OtelSink(provider.get_tracer("t"), content=True)
    history = [{"role": "user", "content": "x" * 300_000}]
    body = {"model": "m" * 300_000, "system": "s" * 300_000, "messages": history}
    sink(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, body))
    sink(O.AttemptEnded(0.5, 0, 0, "complete", None, "text_finish"))
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    attrs = chat.attributes or {}
    for key in ("gen_ai.input.messages", "gen_ai.system_instructions"):
        text = attrs[key]
        assert isinstance(text, str) and len(text) <= otel.MAX_ATTRIBUTE_CHARS and text.endswith(" chars]")
    assert len(str(attrs["gen_ai.request.model"])) <= otel.MAX_ATTRIBUTE_CHARS
    assert len(chat.name) == len("chat ") + otel.MAX_NAME_CHARS  # (no span limit bounds a name)
    provider.shutdown()


def test_a_collector_that_never_finishes_an_export_does_not_hold_the_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint that answers a byte at a time never times a request out, and the SDK's force_flush exports on
    the caller's thread whatever its timeout says: `run --otel` hung after its session ended (Ctrl-C too). The
    close returns within CLOSE_TIMEOUT_S."""
    import threading
    import time

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from inspector.observe import observations as O

    release = threading.Event()

    class Hung(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            release.wait(30)
            return SpanExportResult.FAILURE

    monkeypatch.setattr(otel, "CLOSE_TIMEOUT_S", 0.5, raising=False)
    bus = O.ObservationBus()
    close = otel.attach(bus, provider=otel.make_provider(exporter=Hung()))
    bus.publish(O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "m"}))
    bus.publish(O.AttemptEnded(0.5, 0, 0, "complete", None, "text_finish"))
    closer = threading.Thread(target=close, daemon=True)
    t0 = time.monotonic()
    closer.start()
    closer.join(5)
    try:
        assert not closer.is_alive() and time.monotonic() - t0 < 3
    finally:
        release.set()


def test_counts_past_int64_reach_the_collector_as_the_largest_int64_with_the_exact_value_beside(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A hostile upstream's usage of 2**70 tokens (and a request's max_tokens, a replayed status): OTLP carries an
    int64, the exporter logged 'Failed to encode key gen_ai.usage.input_tokens: Value out of range' with a traceback
    and the collector got the span without the attribute. Now the largest int64, and the exact value as a string in
    inspector.overflow.<name>; the counts that fit are as they were."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from inspector.observe import observations as O

    provider = otel.make_provider(exporter=OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
    bus = O.ObservationBus()
    close = otel.attach(bus, conversation="big", provider=provider)
    try:
        bus.publish(
            O.AttemptStarted(0.0, 0, 0, "POST", "http://x/v1/messages", {}, {"model": "m", "max_tokens": 2**70})
        )
        bus.publish(O.ResponseStarted(0.1, 0, 0, 2**64 + 200, {}))
        usage = {"input_tokens": 2**70, "output_tokens": 5, "cache_read_input_tokens": 2**63}
        bus.publish(O.MessageStarted(0.2, 0, 0, {"id": "msg_1", "model": "m", "usage": usage}))
        bus.publish(O.MessageUpdated(0.3, 0, 0, "end_turn", {"output_tokens": 2**64}))
        bus.publish(O.AttemptEnded(0.5, 0, 0, "complete", None, "text_finish"))
    finally:
        close()
    chat = next(s for s in receiver.spans if s["name"].startswith("chat"))["attrs"]
    top = 2**63 - 1
    assert chat["gen_ai.usage.input_tokens"] == top  # (the whole prompt: 2**70 + 2**63)
    assert chat["inspector.overflow.gen_ai.usage.input_tokens"] == str(2**70 + 2**63)
    assert (chat["gen_ai.usage.output_tokens"], chat["inspector.overflow.gen_ai.usage.output_tokens"]) == (
        top,
        str(2**64),
    )
    assert chat["gen_ai.usage.cache_read.input_tokens"] == top
    assert chat["inspector.overflow.gen_ai.usage.cache_read.input_tokens"] == str(2**63)
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert "inspector.overflow.gen_ai.usage.cache_creation.input_tokens" not in chat
    assert chat["gen_ai.request.max_tokens"] == top and chat["inspector.overflow.gen_ai.request.max_tokens"] == str(
        2**70
    )
    assert chat["http.response.status_code"] == top
    assert chat["inspector.overflow.http.response.status_code"] == str(2**64 + 200)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")], caplog.records


def test_an_integer_too_long_to_write_in_decimal_is_said_by_its_size() -> None:
    assert otel._ints({"n": 10**5000, "m": -(10**5000), "b": True, "s": "7", "k": 7}) == {
        "n": otel.INT64_MAX,
        "inspector.overflow.n": "an integer of 16610 bits",
        "m": otel.INT64_MIN,
        "inspector.overflow.m": "-an integer of 16610 bits",
        "k": 7,
    }

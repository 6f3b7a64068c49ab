"""`--otel` on `watch` and `proxy`: one invoke_agent parent span per conversation the proxy saw
(ConversationAssigned), its chat spans under it, exported over OTLP/HTTP to a real loopback receiver."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inspector.sessions.sources import Session

pytest.importorskip("opentelemetry.sdk")

from inspector.testing.otlp import Receiver
from inspector.testing.processes import reaped
from inspector.testing.pytest_plugin import InspectorServerFactory

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "weather_agent.py"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _env(receiver: Receiver) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint.removesuffix("/v1/traces")
    env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    return env


def _by_conversation(spans: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    roots = {s["id"]: s for s in spans if s["name"].startswith("invoke_agent ")}
    out: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for root in roots.values():
        conv = root["attrs"]["gen_ai.conversation.id"]
        assert conv not in out, "one parent span per conversation"
        chats = [s for s in spans if s["name"].startswith("chat ") and s["parent"] == root["id"]]
        out[conv] = (root, chats)
    orphans = [s for s in spans if s["name"].startswith("chat ") and s["parent"] not in roots]
    assert not orphans
    return out


def test_watch_otel_exports_one_parent_span_per_conversation(receiver: Receiver, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "inspector", "watch", "--headless", "--otel", "--serve", "weather", "--",
         sys.executable, str(AGENT)],
        capture_output=True, text=True, timeout=120, env=_env(receiver),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    convs = _by_conversation(receiver.spans)
    assert len(convs) == 3  # the example agent's three conversations
    for conv, (root, chats) in convs.items():
        assert len(chats) == 2  # two turns each
        assert all(c["attrs"]["gen_ai.conversation.id"] == conv and c["trace"] == root["trace"] for c in chats)
        assert all(c["attrs"]["gen_ai.usage.input_tokens"] > 0 for c in chats)
        # (the agent span's name and required provider, as the GenAI conventions' invoke_agent span has them)
        assert root["name"] == f"invoke_agent {conv}" and root["attrs"]["gen_ai.agent.name"] == conv
        assert root["attrs"]["gen_ai.provider.name"] == "anthropic"
    assert "sk-ant-offline-example" not in repr(receiver.spans)


def test_otel_content_without_otel_is_a_one_line_error() -> None:
    for cmd in (["watch", "--otel-content", "--", "true"], ["proxy", "--otel-content", "--headless"]):
        out = subprocess.run(
            [sys.executable, "-m", "inspector", *cmd], capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert out.returncode == 2, (cmd, out.stderr)
        assert out.stderr.strip().endswith("--otel-content goes with --otel") and "Traceback" not in out.stderr


def _started(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    for _ in range(5):
        line = proc.stdout.readline()
        if line.startswith("ANTHROPIC_BASE_URL="):
            return proc, line.strip().split("=", 1)[1]
    proc.kill()
    raise AssertionError(proc.stderr.read() if proc.stderr else "no address")


def _stop(proc: subprocess.Popen[str]) -> str:
    import signal

    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert isinstance(err, str)
    return err


def test_proxy_otel_exports_one_parent_span_per_conversation(
    receiver: Receiver, inspector_server: InspectorServerFactory
) -> None:
    env = _env(receiver)
    upstream = inspector_server("weather").base_url  # the fake API in this process (serve's own CLI: test_watch_split)
    proxy, url = _started(
        ["proxy", "--headless", "--otel", "--listen", "127.0.0.1:0", "--upstream", upstream, "--quiet"], env
    )
    try:
        agent = subprocess.run(
            [sys.executable, str(AGENT)], capture_output=True, text=True, timeout=120,
            env={**env, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-offline-example"},
        )  # fmt: skip
        assert agent.returncode == 0, agent.stderr[-3000:]
    finally:
        err = _stop(proxy)
    assert "Traceback" not in err
    convs = _by_conversation(receiver.spans)  # the spans were flushed when the proxy stopped
    assert len(convs) == 3 and all(len(chats) == 2 for _, chats in convs.values())


def test_proxy_dashboard_path_exports_each_sessions_traces(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`proxy --otel` in the dashboard: the factory's session exports, flushed when the dashboard closes."""
    import argparse

    import inspector.tui.app as tui_app
    from inspector.cli import proxy as cli
    from inspector.observe import observations as O

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.removesuffix("/v1/traces"))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)

    def fake_dashboard(factory: Callable[[], Session], source: object, **_: object) -> None:
        session = factory()
        body = {"model": "claude-sonnet-4-6", "messages": []}
        for turn, conv in enumerate(["c1", "c2"]):
            session.bus.publish(O.ConversationAssigned(0.0, turn, conv, 0, 0, "new"))
            session.bus.publish(O.AttemptStarted(0.1, turn, 0, "POST", "http://x/v1/messages", {}, body))
            session.bus.publish(O.AttemptEnded(0.2, turn, 0, "complete", None, "text_finish"))
        session.close()

    monkeypatch.setattr(tui_app, "run_dashboard", fake_dashboard)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    p = argparse.ArgumentParser()
    cli._add_arguments(p)
    assert cli.cmd(p.parse_args(["--listen", "127.0.0.1:0", "--otel"])) == 0
    convs = _by_conversation(receiver.spans)
    assert sorted(convs) == ["c1", "c2"] and all(len(chats) == 1 for _, chats in convs.values())


@pytest.mark.parametrize("sig_name", ["SIGTERM", "SIGHUP"])
def test_proxy_otel_flushes_its_spans_when_a_signal_stops_it(
    sig_name: str, receiver: Receiver, inspector_server: InspectorServerFactory
) -> None:
    """SIGTERM or SIGHUP to `inspector proxy --otel`: uvicorn (run_foreground for SIGHUP) raised the signal again
    inside serve(), which ended the process before the command's own `finally`: the exporter was never flushed and
    the conversation's parent span (ended only there) never reached the collector. Now the process still ends by the
    signal, once the command has closed its telemetry."""
    import json
    import signal
    import urllib.request

    sig = getattr(signal, sig_name)
    env = _env(receiver)
    upstream = inspector_server("weather").base_url
    proxy, url = _started(
        ["proxy", "--headless", "--otel", "--listen", "127.0.0.1:0", "--upstream", upstream, "--quiet"], env
    )
    with reaped(proxy):
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "weather?"}],
        }
        request = urllib.request.Request(
            f"{url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={
                "content-type": "application/json",
                "x-api-key": "sk-ant-offline-example",
                "anthropic-version": "2023-06-01",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as answer:  # one whole streamed exchange (a turn)
            assert answer.status == 200
            answer.read()
        proxy.send_signal(sig)
        _, err = proxy.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert proxy.returncode == -sig, err  # (as before: the process ends by the signal, as a shell reports it)
    convs = _by_conversation(receiver.spans)  # the parent span ends only when the command closes its telemetry
    assert len(convs) == 1, receiver.spans
    [(_, chats)] = convs.values()
    assert len(chats) == 1

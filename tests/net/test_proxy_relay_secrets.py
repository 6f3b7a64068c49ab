"""No key survives, behind any relay: the real `inspector proxy` (its CLI, in a subprocess) in front of a loopback
upstream that echoes every credential it is sent (in the stream's text, split across deltas and reads, and in a
malformed status line), and behind an environment proxy (HTTP_PROXY) that answers an illegal header line quoting it;
then `inspector run --record` against the same echoing upstream. Every output -- the recording, stdout, stderr,
`dump` in every mode -- is checked with the longest-common-substring test (inspector.testing.secrets)."""

from __future__ import annotations

import base64
import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx2
import pytest

from inspector.cli import main
from inspector.net.proxy import ProxyApp
from inspector.net.server import BackgroundServer
from inspector.stream.assembler import assemble
from inspector.testing.secrets import assert_no_key
from inspector.testing.streamgen import (
    block_stop,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
)

ROOT = Path(__file__).resolve().parents[2]


def canary(form: str) -> str:
    return f"sk-ant-api03-{form}-Q7w2Er9Ty4Ui0Op3As6Df8Gh1Jk5"


BASIC = canary("Basic")
# each credential form the relays use, with its own canary (a leak names its form)
FORMS: dict[str, tuple[dict[str, str], str]] = {
    "helicone": ({"helicone-auth": f"Bearer {canary('Helicone')}"}, ""),
    "cloudflare": ({"cf-aig-authorization": f"Bearer {canary('CfAig')}"}, ""),
    "portkey": ({"x-portkey-api-key": canary("Portkey")}, ""),
    "bearer-tab": ({"Authorization": f"Bearer\t{canary('BearerTab')}"}, ""),
    "basic": ({"Authorization": "Basic " + base64.b64encode(f"user:{BASIC}".encode()).decode()}, ""),
    "proxy-basic": (
        {"Proxy-Authorization": "Basic " + base64.b64encode(f"u:{canary('ProxyBasic')}".encode()).decode()},
        "",
    ),
    "query-encoded": ({}, "?beta=true&api_key=" + canary("Query").replace("-", "%2D")),
    "x-api-key": ({"x-api-key": canary("XApiKey")}, ""),
}
KEYS = {
    "helicone": canary("Helicone"),
    "cloudflare": canary("CfAig"),
    "portkey": canary("Portkey"),
    "bearer-tab": canary("BearerTab"),
    "basic": BASIC,
    "proxy-basic": canary("ProxyBasic"),
    "query-encoded": canary("Query"),
    "x-api-key": canary("XApiKey"),
}


# --- a loopback upstream that echoes --------------------------------------------------------------------------------


def echoes(target: str, headers: list[tuple[str, str]]) -> list[str]:
    """What a careless relay echoes of a request: every header value, decoded Basic, the target decoded."""
    out = [target, unquote(target)]
    for _, v in headers:
        out.append(v)
        m = re.match(r"(?i)basic\s+(\S+)", v)
        if m:
            out.append(base64.b64decode(m[1]).decode())
            out.append(out[-1].partition(":")[2])
        m = re.match(r"\S+\s+(\S+)$", v)
        if m:
            out.append(m[1])
    return out


def echo_stream(texts: list[str]) -> list[bytes]:
    """A text turn echoing ``texts``, each split in the middle across two deltas; the body cut in two reads in the
    middle of a delta."""
    items: list[tuple[str, dict[str, Any]]] = [message_start(), text_start(0)]
    for t in texts:
        half = len(t) // 2
        items += [text_delta(0, f"echo: {t[:half]}"), text_delta(0, f"{t[half:]}\n")]
    items += [block_stop(0), message_delta("end_turn"), message_stop()]
    body = sse(*items)
    cut = len(body) // 2
    return [body[:cut], body[cut:]]


class Upstream:
    """A raw HTTP/1.1 server on 127.0.0.1 (a thread per connection), answering ``respond(target, headers)``'s
    bytes and closing. Raw, so it can answer what no framework would (a status line without a status)."""

    def __init__(self, respond: Callable[[str, list[tuple[str, str]]], list[bytes]]) -> None:
        self.respond = respond
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            target = lines[0].split(" ")[1]
            headers = [(k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:])]
            length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            for part in self.respond(target, headers):
                conn.sendall(part)

    def close(self) -> None:
        self.sock.close()


def relay_respond(target: str, headers: list[tuple[str, str]]) -> list[bytes]:
    said = echoes(target, headers)
    if "/bad-status/" in target:  # the key in a malformed status line (within its first 80 bytes)
        key = next(m[0] for m in map(re.compile(r"sk-ant-[\w-]+").search, said) if m)
        return [f"HTTP/1.1 {key} OK\r\ncontent-length: 0\r\n\r\n".encode()]
    reads = echo_stream(said)
    head = f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {sum(map(len, reads))}\r\n\r\n"
    return [head.encode(), *reads]


def env_proxy_respond(target: str, headers: list[tuple[str, str]]) -> list[bytes]:
    """An environment proxy that answers with an illegal header line quoting what it was sent."""
    said = [s for s in echoes(target, headers) if "sk-ant-" in s]
    return [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nillegal " + said[0].encode() + b"\r\n\r\n"]


# --- the proxy's CLI --------------------------------------------------------------------------------------------------


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return dict(base, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", NO_PROXY="", **extra)


@contextmanager
def proxy_cli(upstream: str, record: Path | None, **extra_env: str) -> Iterator[tuple[str, dict[str, str]]]:
    """`inspector proxy --headless --record` in a subprocess; yields its base URL and, once stopped, its stdout and
    stderr (filled into the dict)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
            "--headless",
            *(["--record", str(record)] if record is not None else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra_env),
        cwd=ROOT,
    )
    outputs: dict[str, str] = {}
    assert proc.stdout is not None  # (stdout=PIPE)
    try:
        first = [proc.stdout.readline(), proc.stdout.readline()]
        m = re.match(r"ANTHROPIC_BASE_URL=(http://127\.0\.0\.1:\d+)$", first[1].strip())
        assert m, first
        yield m.group(1), outputs
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        outputs["stdout"] = "".join(first) + out
        outputs["stderr"] = err


def post(base: str, path: str, headers: dict[str, str]) -> httpx2.Response:
    with httpx2.Client(base_url=base, timeout=20, trust_env=False) as h:
        for _ in range(200):  # bounded: until uvicorn accepts on the already bound socket
            try:
                return h.post(
                    path, headers=headers, json={"model": "m", "max_tokens": 5, "stream": True, "messages": []}
                )
            except httpx2.ConnectError:
                continue
    raise AssertionError("the proxy never accepted")


def dumps(record: Path) -> dict[str, bytes]:
    """`inspector dump` of the recording in every mode."""
    out = {}
    for args in ((), ("--json",), ("--events", "--json"), ("--json", "--timing"), ("--timing",)):
        buf = io.BytesIO()
        text = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
        with redirect_stdout(text):
            main(["dump", str(record), *args])
            text.flush()
        out["dump " + " ".join(args)] = buf.getvalue()
    return out


def echoed_text(body: bytes) -> str:
    return "".join(b.get("text", "") for b in assemble(body).final_message()["content"])


def check(outputs: dict[str, str | bytes]) -> None:
    for form, key in KEYS.items():
        assert_no_key(key, outputs)


# --- the tests --------------------------------------------------------------------------------------------------------


def test_every_credential_form_through_the_proxy_cli_is_absent_from_every_output(tmp_path: Path) -> None:
    up = Upstream(relay_respond)
    record = tmp_path / "relay.jsonl"
    try:
        with proxy_cli(f"http://127.0.0.1:{up.port}", record) as (base, outputs):
            for form, (headers, query) in FORMS.items():
                r = post(base, f"/v1/messages{query}", headers)
                assert r.status_code == 200 and KEYS[form] in echoed_text(r.content)  # the client gets what passed
                r = post(base, f"/bad-status/v1/messages{query}", headers)
                assert r.status_code == 502
    finally:
        up.close()
    raw = record.read_bytes()
    assert raw.count(b'"kind":"request"') == 2 * len(FORMS) and b"[redacted]" in raw
    assert b"invalid response" in raw  # the end reason is there, masked
    for name in ("helicone-auth", "cf-aig-authorization", "x-portkey-api-key", "authorization", "proxy-authorization"):
        assert f'"{name}"'.encode() not in raw
    assert "-> 502" in outputs["stderr"] and "invalid response" in outputs["stderr"]
    check({"recording": raw, **outputs, **dumps(record)})


def test_an_illegal_header_line_from_an_environment_proxy_is_masked(tmp_path: Path) -> None:
    envproxy = Upstream(env_proxy_respond)
    record = tmp_path / "envproxy.jsonl"
    try:
        with proxy_cli("http://relay.example", record, HTTP_PROXY=f"http://127.0.0.1:{envproxy.port}") as (
            base,
            outputs,
        ):
            for form in ("helicone", "bearer-tab", "basic", "query-encoded"):
                headers, query = FORMS[form]
                r = post(base, f"/v1/messages{query}", headers)
                assert r.status_code == 502
    finally:
        envproxy.close()
    raw = record.read_bytes()
    assert b"illegal header line" in raw and "illegal header line" in outputs["stderr"]
    check({"recording": raw, **outputs, **dumps(record)})


def test_the_proxys_error_reply_does_not_quote_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 502 body is ProxyApp's (in-process: the CLI around it is proven by the tests above)."""
    for k in [k for k in os.environ if k.upper().endswith("_PROXY")]:
        monkeypatch.delenv(k)
    up = Upstream(relay_respond)
    proxy = ProxyApp(f"http://127.0.0.1:{up.port}", record=tmp_path / "r.jsonl")
    try:
        with BackgroundServer(proxy) as px:
            headers, query = FORMS["portkey"]
            r = post(px.base_url, f"/bad-status/v1/messages{query}", headers)
    finally:
        proxy.close()
        up.close()
    assert r.status_code == 502
    assert_no_key(KEYS["portkey"], {"502 body": r.content})


def test_run_record_against_an_echoing_relay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """`inspector run --record` with the key in ANTHROPIC_API_KEY, through a relay that echoes it (split across
    deltas and reads; in-process), then one that puts it in a malformed status line (the real CLI, a subprocess)."""
    key = KEYS["x-api-key"]
    for mode in ("", "bad-status/"):
        up = Upstream(relay_respond)
        record = tmp_path / f"run-{mode.strip('/') or 'echo'}.jsonl"
        try:
            run = run_cli if mode else run_in_process(monkeypatch, capfd)
            proc = run(f"http://127.0.0.1:{up.port}/{mode}", record, key)
        finally:
            up.close()
        raw = record.read_bytes()
        if not mode:
            assert b"echo: " in raw and b"[redacted]" in raw
        else:
            assert proc.returncode != 0 or b'"kind":"end"' in raw
        assert_no_key(key, {"recording": raw, "stdout": proc.stdout, "stderr": proc.stderr, **dumps(record)})


def test_a_query_key_without_a_recording_is_masked_on_stderr() -> None:
    up = Upstream(relay_respond)
    try:
        with proxy_cli(f"http://127.0.0.1:{up.port}", None) as (base, outputs):
            headers, query = FORMS["query-encoded"]
            assert post(base, f"/bad-status/v1/messages{query}", headers).status_code == 502
    finally:
        up.close()
    assert "invalid response" in outputs["stderr"]
    assert_no_key(KEYS["query-encoded"], {**outputs})  # (a dict[str, str | bytes])


def run_cli(base_url: str, record: Path | None, key: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "inspector",
            "run",
            "--model",
            "m",
            "--base-url",
            base_url,
            *(["--record", str(record)] if record is not None else []),
            "--headless",
            "--json",
            "--retries",
            "0",
            "--max-turns",
            "1",
            "say it",
        ],
        capture_output=True,
        text=True,
        env=env(ANTHROPIC_API_KEY=key),
        cwd=ROOT,
        timeout=120,
    )


def run_in_process(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> Callable[[str, Path | None, str], subprocess.CompletedProcess[str]]:
    """run_cli's command, run by cli.main in this process with the same environment, its output captured by fd:
    one `inspector run` subprocess per path is enough to prove the real CLI, the others need not pay its start-up."""

    def run(base_url: str, record: Path | None, key: str) -> subprocess.CompletedProcess[str]:
        for k in [k for k in os.environ if k.upper().endswith("_PROXY")]:
            monkeypatch.delenv(k)
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        capfd.readouterr()
        argv = ["run", "--model", "m", "--base-url", base_url, *(["--record", str(record)] if record else [])]
        code = main([*argv, "--headless", "--json", "--retries", "0", "--max-turns", "1", "say it"])
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


@pytest.fixture(scope="module")
def base_url_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    """`inspector run --base-url http://relay:KEY@host/` (a relay's key in the URL) against the echoing upstream."""
    relay_key = canary("BaseUrl")
    up = Upstream(relay_respond)
    record = tmp_path_factory.mktemp("base-url") / "base-url.jsonl"
    try:
        proc = run_cli(f"http://relay:{relay_key}@127.0.0.1:{up.port}/", record, KEYS["x-api-key"])
    finally:
        up.close()
    return proc, record, relay_key


def test_run_with_a_relay_key_in_the_base_url_masks_the_url(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Without a recording too, the URL of each attempt (in the headless output) and stderr hold no key: the CLI
    learns --base-url's credentials. (In-process: base_url_run runs the same URL through the real CLI.)"""
    relay_key = canary("BaseUrlNoRecord")
    up = Upstream(relay_respond)
    try:
        proc = run_in_process(monkeypatch, capfd)(
            f"http://relay:{relay_key}@127.0.0.1:{up.port}/", None, KEYS["x-api-key"]
        )
    finally:
        up.close()
    assert "relay:[redacted]@127.0.0.1" in proc.stdout and f"relay:{relay_key}" not in proc.stdout
    assert_no_key(relay_key, {"stderr": proc.stderr})


def test_run_with_a_relay_key_in_the_base_url_is_nowhere(
    base_url_run: tuple[subprocess.CompletedProcess[str], Path, str],
) -> None:
    proc, record, relay_key = base_url_run
    outputs: dict[str, str | bytes] = {"recording": record.read_bytes(), "stdout": proc.stdout, **dumps(record)}
    assert_no_key(relay_key, outputs)


def test_a_key_in_the_upstream_url_is_printed_and_recorded_nowhere(tmp_path: Path) -> None:
    """`inspector proxy --upstream http://relay:KEY@host`: its banner, its exchange lines and the recording's header
    (source.upstream) mask the key."""
    key = canary("Upstream")
    up = Upstream(relay_respond)
    record = tmp_path / "upstream.jsonl"
    try:
        with proxy_cli(f"http://relay:{key}@127.0.0.1:{up.port}", record) as (base, outputs):
            assert post(base, "/v1/messages", {"x-api-key": KEYS["x-api-key"]}).status_code == 200
    finally:
        up.close()
    raw = record.read_bytes()
    assert "relay:[redacted]@127.0.0.1" in outputs["stdout"] and b"relay:[redacted]@127.0.0.1" in raw
    assert_no_key(key, {"recording": raw, **outputs, **dumps(record)})

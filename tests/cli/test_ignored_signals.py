"""A stop signal the process was started with ignored stays ignored (core.signals): ``nohup inspector proxy &`` keeps
running when the terminal closes, a shell script's background ``inspector ... &`` is not stopped by a Ctrl-C meant
for the foreground command. Before, every command installed its own SIGINT / SIGTERM / SIGHUP handlers over the
inherited SIG_IGN: the proxy stopped on nohup's hang-up and exited 0.

Each child ignores the signal before the entry point runs (``python -c HOOK``), as nohup and a shell's background
job start it. The ignored signal is sent, then SIGTERM: a process that acted on the first ends by it (its handlers run
in signal-number order, SIGINT and SIGHUP before SIGTERM); one that ignored it ends by SIGTERM. Nothing waits on a
sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from inspector.record.reader import read_recording
from inspector.testing.processes import blocked_on_a_fifo, reaped, until

ROOT = Path(__file__).resolve().parents[2]
needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process state from /proc")

IGNORING = "import signal\nsignal.signal({sig}, signal.SIG_IGN)\nimport sys\nfrom inspector.__main__ import entry\n"
IGNORING += "sys.exit(entry())"


def _start(env: dict[str, str], ignored: int, *args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """`inspector ARGS` started with ``ignored`` ignored, as nohup (SIGHUP) or a shell's background job (SIGINT)."""
    code = IGNORING.format(sig=int(ignored))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE
    )


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(var, None)
    return env


def _base_url(p: subprocess.Popen[bytes], stream: str) -> str:
    pipe = p.stdout if stream == "stdout" else p.stderr
    assert pipe is not None
    for line in pipe:
        text = line.decode(errors="replace")
        if "ANTHROPIC_BASE_URL=" in text:
            return text.split("ANTHROPIC_BASE_URL=", 1)[1].split()[0]
    raise AssertionError(f"it did not start: {p.communicate()[1][:2000]!r}")


def _streamed(base: str) -> bytes:
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = {"x-api-key": "sk-ant-test-not-a-key", "anthropic-version": "2023-06-01"}
    r = httpx2.post(base + "/v1/messages", json=body, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.content


@pytest.mark.parametrize(
    ("ignored", "stop"),
    [(signal.SIGHUP, signal.SIGTERM), (signal.SIGINT, signal.SIGHUP)],
    ids=["nohup-then-SIGTERM", "background-job-then-SIGHUP"],
)
def test_serve_keeps_serving_after_the_signal_it_was_started_ignoring(ignored: int, stop: int) -> None:
    """nohup's hang-up, a background job's Ctrl-C: nothing happens, it serves the next stream; a signal that was
    not ignored at the start (SIGTERM; SIGHUP when only SIGINT was) still stops it, and it ends by that signal."""
    env = _env()
    p = _start(env, ignored, "serve", "--scenario", "weather", "--speed", "max", "--port", "0")
    with reaped(p):
        base = _base_url(p, "stderr")
        assert b"message_stop" in _streamed(base)
        p.send_signal(ignored)
        assert b"message_stop" in _streamed(base)  # (served: it did not stop; nor did it die)
        p.send_signal(stop)
        _, err = p.communicate(timeout=30)
    assert p.returncode == -stop, err  # (stopped by the ignored one: -SIGHUP, or 0 / 130, before)
    assert b"Traceback" not in err, err


def test_proxy_started_under_nohup_keeps_forwarding_and_recording_after_a_hang_up(tmp_path: Path) -> None:
    env = _env()
    up = _start(env, signal.SIGHUP, "serve", "--scenario", "weather", "--speed", "max", "--port", "0")
    rec = tmp_path / "proxy.jsonl"
    with reaped(up):
        upstream = _base_url(up, "stderr")
        p = _start(
            env,
            signal.SIGHUP,
            "proxy",
            "--headless",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
            "--record",
            str(rec),
        )
        with reaped(p):
            base = _base_url(p, "stdout")
            first = _streamed(base)
            p.send_signal(signal.SIGHUP)
            second = _streamed(base)
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM, err
    assert b"Traceback" not in err, err
    attempts = list(read_recording(rec).attempts())
    assert [a.data for a in attempts] == [first, second]  # both forwarded and recorded, byte-exact
    assert all(a.end is not None and a.end.get("status") == "complete" for a in attempts)


@needs_proc
def test_a_background_run_ignores_the_ctrl_c_its_shell_ignores_for_it(
    tmpdir_env: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """`inspector run --headless ... &` in a script: the shell starts it with SIGINT ignored. Its start-up handler
    and its stop handlers took SIGINT over (exit 130 at the first Ctrl-C); now only SIGTERM stops it here."""
    tmp, env = tmpdir_env
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    p = _start(env, signal.SIGINT, "run", "--headless", "--scenario", "exclusive_mix", "--record", str(fifo))
    with reaped(p):
        until(lambda: blocked_on_a_fifo(p.pid) or p.poll() is not None, "the run did not reach its recording")
        assert p.poll() is None, p.communicate()[1]
        p.send_signal(signal.SIGINT)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert err == b"inspector: stopped by SIGTERM before the run started: nothing ran\n", err


SIGHUP_TEST = (
    "tests/net/test_proxy_bounds.py::test_sighup_stops_the_cli_proxy_as_sigterm_does_with_every_open_attempt_ended"
)


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["serial", "xdist"])
def test_the_suite_started_under_nohup_still_tests_the_stop_signals(workers: list[str]) -> None:
    """tests/conftest.py: a test run started with SIGINT and SIGHUP ignored (nohup, a background job) gives the
    commands its tests start the default dispositions (before: the SIGHUP test's proxy ignored the hang-up, rightly,
    and the test failed: `assert 0 == -SIGHUP`)."""
    hook = "import signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    hook += "import sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))"
    env = {k: v for k, v in _env().items() if k != "INSPECTOR_TESTS_IGNORED_SIGNALS"}
    p = subprocess.run(
        [sys.executable, "-c", hook, "-q", "-p", "no:cacheprovider", *workers, SIGHUP_TEST],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-3000:]
    assert b"1 passed" in p.stdout, p.stdout[-3000:]

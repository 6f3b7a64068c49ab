"""`inspector watch -- COMMAND`: the command runs against an embedded proxy (here with the fake server behind it),
its environment points at it, its exit status is watch's, Ctrl-C goes to it first, and the recording is whole."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "weather_agent.py"


def watch(
    *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = (), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``inspector watch ARGS`` with this environment, plus ``env``, less the variables named in ``unset``."""
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-m", "inspector", "watch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
    )


def test_the_example_agent_runs_offline_against_serve_and_is_recorded(tmp_path: Path) -> None:
    rec = tmp_path / "run.jsonl"
    out = watch("--headless", "--serve", "weather", "--record", str(rec), "--", sys.executable, str(AGENT))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("partly cloudy") == 3  # three conversations answered
    # one start line, then the model once the first request named it (it said "start  serve weather model" twice)
    starts = [line.split("s ", 1)[1] for line in out.stderr.splitlines() if " start " in line or " model " in line]
    assert starts[:2] == ["start  serve weather", "model  claude-sonnet-4-6"], starts[:3]
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    requests = [x for x in lines if x["kind"] == "request"]
    ends = [x for x in lines if x["kind"] == "end"]
    assert len(requests) == 6 and len(ends) == 6  # two turns of three conversations, each attempt ended
    assert "sk-ant-offline-example" not in rec.read_text()
    # the command exited: the session's normal end, not a cancellation
    assert out.stderr.rstrip().endswith("finished after 6 turns"), out.stderr[-500:]
    # the three conversations' lines in time order (their streams' lines were printed a few ms out of order: in 3
    # runs, 2, 10 and 21 lines of 64 came after a later one)
    times = [float(m.group(1)) for m in re.finditer(r"(?m)^\s*(\d+\.\d+)s ", out.stderr)]
    assert len(times) > 50 and times == sorted(times), out.stderr[-3000:]


def test_watch_serving_a_recording_names_the_recording_not_a_scenario(tmp_path: Path) -> None:
    """`watch --serve REC` answered from the recording but said "serve parse_date" on its start line and in its
    recording's source (the scenario's name it passed, unused)."""
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    out = watch("--headless", "--serve", "weather", "--record", str(first), "--", sys.executable, str(AGENT))
    assert out.returncode == 0, out.stderr[-3000:]
    out = watch("--headless", "--serve", str(first), "--record", str(again), "--", sys.executable, str(AGENT))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "parse_date" not in out.stdout + out.stderr
    assert "serve recording first.jsonl" in out.stdout + out.stderr
    header = json.loads(again.read_text().splitlines()[0])
    assert header["source"]["name"] == "recording first.jsonl"


def test_the_environment_and_the_exit_status_pass_through(tmp_path: Path) -> None:
    probe = (
        "import os, sys; print(os.environ['ANTHROPIC_BASE_URL'], os.environ['OPENAI_BASE_URL'], "
        "os.environ.get('KEEP_ME')); sys.exit(3)"
    )
    out = watch("--headless", "--serve", "weather", "--", sys.executable, "-c", probe, env={"KEEP_ME": "kept"})
    assert out.returncode == 3
    anthropic_url, openai_url, kept = out.stdout.split()
    assert anthropic_url.startswith("http://127.0.0.1:") and not anthropic_url.endswith("/v1")
    assert openai_url == anthropic_url + "/v1" and kept == "kept"


def test_a_harness_without_a_key_runs_against_serve(tmp_path: Path) -> None:
    """`watch --serve` reaches no API: a harness's own tests, run without a key, get a placeholder one (the SDKs
    refuse to start without any); a key that is set is left as it is, and it never reaches the recording."""
    probe = (
        "import os, anthropic, openai\n"
        "anthropic.Anthropic().messages.create(model='claude-sonnet-4-6', max_tokens=50,"
        " messages=[{'role': 'user', 'content': 'hi'}])\n"
        "openai.OpenAI()\n"
        "print(os.environ['ANTHROPIC_API_KEY'], os.environ['OPENAI_API_KEY'])"
    )
    rec = tmp_path / "run.jsonl"
    args = ("--headless", "--serve", "weather", "--record", str(rec), "--", sys.executable, "-c", probe)
    out = watch(*args, unset=("ANTHROPIC_API_KEY", "OPENAI_API_KEY"))
    assert out.returncode == 0, out.stderr[-2000:]
    anthropic_key, openai_key = out.stdout.split()
    assert anthropic_key == openai_key and anthropic_key.startswith("sk-inspector-offline")
    assert anthropic_key not in rec.read_text()  # a credential all the same: masked in the recording
    show_key = "import os; print(os.environ['ANTHROPIC_API_KEY'])"
    serve = args[:3]  # --headless --serve weather
    kept = watch(*serve, "--", sys.executable, "-c", show_key, env={"ANTHROPIC_API_KEY": "sk-ant-mine"})
    assert kept.stdout.strip() == "sk-ant-mine"


def test_the_upstream_is_what_anthropic_base_url_held(tmp_path: Path) -> None:
    probe = "import os; print(os.environ['ANTHROPIC_BASE_URL'])"
    out = watch("--headless", "--", sys.executable, "-c", probe, env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"})
    assert out.returncode == 0
    assert "-> http://127.0.0.1:9" in out.stderr  # forwarded there, not to the public API
    assert out.stdout.strip() != "http://127.0.0.1:9"


def test_each_sdk_reaches_the_api_its_own_base_url_held(tmp_path: Path) -> None:
    """The OpenAI agent's requests go where OPENAI_BASE_URL pointed before (here a fake server), not to the
    Anthropic upstream (here unreachable), and the Anthropic agent's the other way round; --openai-upstream wins
    over the environment. (The OpenAI requests used to go to the Anthropic upstream.)"""
    import math

    from inspector.net.serve import ServeApp
    from inspector.net.server import BackgroundServer

    dead = "http://127.0.0.1:9"
    openai_agent = ROOT / "examples" / "openai_weather_agent.py"
    keys = {"OPENAI_API_KEY": "sk-proj-test", "ANTHROPIC_API_KEY": "sk-ant-test"}
    with BackgroundServer(ServeApp("weather", speed=math.inf)) as serve:
        url = serve.base_url
        rec = tmp_path / "openai.jsonl"
        env = {**keys, "OPENAI_BASE_URL": url + "/v1", "ANTHROPIC_BASE_URL": dead}
        out = watch("--headless", "--record", str(rec), "--", sys.executable, str(openai_agent), env=env)
        assert out.returncode == 0 and out.stdout.count("partly cloudy") == 3, out.stderr[-2000:]
        assert f"(OpenAI: {url}/v1)" in out.stderr
        urls = {json.loads(x)["url"] for x in rec.read_text().splitlines() if '"kind":"request"' in x}
        assert urls == {url + "/v1/chat/completions"}
        env = {**keys, "OPENAI_BASE_URL": dead + "/v1", "ANTHROPIC_BASE_URL": url}
        out = watch("--headless", "--", sys.executable, str(AGENT), env=env)
        assert out.returncode == 0 and out.stdout.count("partly cloudy") == 3, out.stderr[-2000:]
        env = {**keys, "OPENAI_BASE_URL": dead + "/v1", "ANTHROPIC_BASE_URL": dead}
        out = watch("--headless", "--openai-upstream", url + "/v1", "--", sys.executable, str(openai_agent), env=env)
        assert out.returncode == 0 and out.stdout.count("partly cloudy") == 3, out.stderr[-2000:]
    usage = watch("--serve", "weather", "--openai-upstream", url, "--", sys.executable, "-c", "pass")
    assert usage.returncode == 2 and "--openai-upstream goes without --serve" in usage.stderr


def test_a_command_that_cannot_run_is_a_one_line_error_with_the_shells_status(tmp_path: Path) -> None:
    """watch's status is the command's, so a command that cannot run gives what a shell (and env, nohup, timeout)
    gives: 127 when it is not found (also a script whose interpreter is missing: exec says ENOENT), 126 when it
    cannot be executed; no command at all is a usage error (2). One line each, said once ("inspector watch: ...",
    not "inspector: inspector watch: ...")."""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/no/such/interpreter\necho hi\n")
    bad.chmod(0o755)
    plain = tmp_path / "plain.txt"
    plain.write_text("not a program\n")
    cases = [
        (("no-such-command-xyz",), 127, "inspector watch: no-such-command-xyz: command not found"),
        ((str(tmp_path / "missing"),), 127, "missing: no such file"),
        ((str(plain),), 126, "plain.txt: not executable"),
        ((str(tmp_path),), 126, "not executable"),
        ((str(bad),), 127, "cannot run"),
        ((), 2, "inspector watch: no command"),
    ]
    for argv, status, said in cases:
        out = watch("--headless", *(("--", *argv) if argv else ()))
        assert out.returncode == status, (argv, out.returncode, out.stderr)
        assert said in out.stderr and "inspector: inspector" not in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
        assert subprocess.run(["sh", "-c", 'exec "$@"', "sh", *argv], capture_output=True).returncode == (
            status if argv else 0
        ), argv  # (what a shell says of the same command)


def test_ctrl_c_goes_to_the_command_first_then_stops_watching(tmp_path: Path) -> None:
    """The first SIGINT reaches the command (which survives it here); the second stops it, and the recording of a
    request left open has its end line."""
    ready = tmp_path / "ready"
    child = (
        "import signal, time, pathlib, sys\n"
        "import os\n"
        "print('pid', os.getpid(), flush=True)\n"
        "signal.signal(signal.SIGINT, lambda *a: print('child got SIGINT', flush=True))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "for _ in range(600): time.sleep(0.1)\n"
    )
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector",
            "watch",
            "--headless",
            "--serve",
            "weather",
            "--",
            sys.executable,
            "-c",
            child,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the test plays the terminal
    )
    assert p.stdout is not None and p.stderr is not None
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read() if p.poll() is not None else ""
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    deadline = time.monotonic() + 30
    # the command said it got it, and watch is still running
    out_lines: list[str] = []
    while not any("child got SIGINT" in x for x in out_lines):
        assert time.monotonic() < deadline
        out_lines.append(p.stdout.readline())
    assert p.poll() is None
    # ...and watch took it (its note): only then the second Ctrl-C, as a user who reads the note presses it. (Two
    # SIGINTs that arrive before the interpreter runs its handler are one: under CI load the second one was sent
    # while watch had not run the first, the handler ran once, and watch waited for a third.)
    err_lines = _until_the_note(p, deadline)
    os.killpg(p.pid, signal.SIGINT)
    p.wait(60)
    err = "".join(err_lines) + p.stderr.read()
    assert "Traceback" not in err
    assert p.returncode == 128 + signal.SIGTERM  # the command's status (terminated), as a shell reports it
    pid = int(next(x for x in out_lines if x.startswith("pid")).split()[1])
    try:
        os.kill(pid, 0)
        raise AssertionError("the command is still running")
    except ProcessLookupError:
        pass


SLOW_CHILD = """
import json, os, pathlib, sys, time, urllib.request
print("pid", os.getpid(), flush=True)
body = {"model": "claude-sonnet-4-6", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)).read()
"""


def _watched(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "inspector", "watch", "--headless", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the test plays the terminal
    )


def _until_the_note(p: subprocess.Popen[str], deadline: float) -> list[str]:
    """watch's stderr lines up to its note that the first Ctrl-C went to the command (it took that one)."""
    assert p.stderr is not None
    lines: list[str] = []
    while not any("press it again to stop watching" in x for x in lines):
        assert time.monotonic() < deadline and p.poll() is None, "".join(lines)
        lines.append(p.stderr.readline())
    return lines


def _watch_on_a_pty(tmp_path: Path, rec: Path, agent: str) -> tuple[subprocess.Popen[bytes], int]:
    """``inspector watch --serve weather --record REC -- python -c AGENT`` with the dashboard, on a terminal of its
    own (a pty, in a session of its own): the process, and the terminal's master end to read it from."""
    import pty

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_DRIVER"}
    p = subprocess.Popen(
        [sys.executable, "-m", "inspector", "watch", "--serve", "weather", "--record", str(rec)]
        + ["--log", str(tmp_path / "out.log"), "--", sys.executable, "-c", agent],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    return p, master


def _command_pid(pid_file: Path, p: subprocess.Popen[bytes], screen: list[bytes]) -> int:
    """The pid the watched command wrote to ``pid_file`` (once it serves), while watch ``p`` runs (else fails,
    showing the end of its ``screen``)."""
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and p.poll() is None, b"".join(screen)[-2000:]
        time.sleep(0.1)  # another process's file: nothing to wait on but polling it
    return int(pid_file.read_text())


def _leave_nothing(p: subprocess.Popen[bytes], child: int, master: int) -> None:
    """After a watch-on-a-pty test: watch's session and the command killed if still there, the pty closed."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    if child and not _gone(child):
        os.kill(child, signal.SIGKILL)
    os.close(master)


def _pty_output(master: int) -> Iterator[bytes]:
    """What the processes on a terminal write to it, until every writer has closed it (EIO, or end of file)."""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # (EIO: every writer has closed the terminal)
            return
        if not chunk:
            return
        yield chunk


def _until_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while not _gone(pid):
        assert time.monotonic() < deadline, "the agent the shell started is still running"
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # (a zombie, not reaped yet by its new parent, has stopped too)
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_sigterm_to_watch_stops_the_command_and_its_children_and_closes_the_recording(tmp_path: Path) -> None:
    """A stop from outside (kill, a CI runner's timeout): watch died at once, the command (here a shell and the
    agent it started) went on under PID 1, and the recording was never written. Now the signal is passed on to the
    command and every process it started, and watch closes the recording (an end line for the open attempt)."""
    rec = tmp_path / "t.jsonl"
    p = _watched(
        tmp_path,
        "--serve",
        "stall_with_pings",
        "--record",
        str(rec),
        "--",
        "sh",
        "-c",
        f'{sys.executable} -c "$0"; echo after',
        SLOW_CHILD,
    )
    assert p.stdout is not None and p.stderr is not None
    pid = int(p.stdout.readline().split()[1])
    deadline = time.monotonic() + 60
    err_lines: list[str] = []
    while not any("HTTP 200" in x for x in err_lines):  # the request is open, its stream stalled
        assert time.monotonic() < deadline and p.poll() is None, "".join(err_lines)
        err_lines.append(p.stderr.readline())
    os.kill(p.pid, signal.SIGTERM)  # watch alone, not its group
    p.wait(60)
    _until_gone(pid)  # (before reading the rest of its output: the agent holds the pipes open while it runs)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr.read()  # the shell's status: terminated
    assert "after" not in p.stdout.read()
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    ends = [x for x in lines if x.get("kind") == "end"]
    assert [(e["turn"], e["attempt"]) for e in ends] == [(0, 0)], lines[-3:]


def test_the_second_ctrl_c_stops_the_processes_a_wrapper_started(tmp_path: Path) -> None:
    """``sh -c``, ``make``, ``npm run``: the second Ctrl-C terminated the wrapper only, and the agent it started,
    which had caught the first Ctrl-C, ran on under PID 1."""
    stubborn = (  # (its handler before it says its pid: the test's Ctrl-C comes once it has)
        "import os, signal, time\n"
        "signal.signal(signal.SIGINT, lambda *a: print('child got SIGINT', flush=True))\n"
        "print('pid', os.getpid(), flush=True)\n"
        "for _ in range(600): time.sleep(0.1)\n"
    )
    p = _watched(tmp_path, "--serve", "weather", "--", "sh", "-c", f'{sys.executable} -c "$0"; echo after', stubborn)
    assert p.stdout is not None and p.stderr is not None
    pid = int(p.stdout.readline().split()[1])
    os.killpg(p.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
    deadline = time.monotonic() + 30
    assert p.stdout.readline().strip() == "child got SIGINT"
    _until_the_note(p, deadline)
    os.killpg(p.pid, signal.SIGINT)
    p.wait(60)
    _until_gone(pid)  # (before reading the rest of stderr: the agent holds it open while it runs)
    assert "Traceback" not in p.stderr.read()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period_not_left_running(tmp_path: Path) -> None:
    """The stop (a second Ctrl-C, SIGTERM or SIGHUP to watch) terminates the command and every process it started,
    and kills those still running after the grace period: a daemon timer did, and watch exited as soon as the
    command had, so a child that ignores SIGTERM ran on under PID 1 for ever."""
    deaf = (  # (it ignores SIGTERM and SIGINT before it says its pid)
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('pid', os.getpid(), flush=True)\n"
        "for _ in range(600): time.sleep(0.1)\n"
    )
    p = _watched(tmp_path, "--serve", "weather", "--", "sh", "-c", f'{sys.executable} -c "$0" & wait', deaf)
    assert p.stdout is not None and p.stderr is not None
    pid = int(p.stdout.readline().split()[1])
    try:
        os.kill(p.pid, signal.SIGTERM)  # watch alone: it passes it on (the shell dies of it, its child does not)
        p.wait(60)
        assert p.returncode == 128 + signal.SIGTERM, p.stderr.read()
        assert _gone(pid), "a process the command started is still running after watch exited"
    finally:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def _group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still running (zombies, which their new parent has not reaped, have ended)."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry))
    return out


def _watchdog_of(watch_pid: int, command: int) -> bool:
    """Whether watch's watchdog of ``command`` (sessions/reaper.py, a child of watch naming its pid) has started."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == watch_pid and any(a.endswith(b"reaper.py") for a in argv) and str(command).encode() in argv:
            return True
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_watch_killed_leaves_nothing_of_the_command_running(tmp_path: Path) -> None:
    """SIGKILL to watch (kill -9, the OOM killer, a CI runner's hard kill) could not be passed on: the command (here
    a shell) and the agent it started ran on under PID 1, for ever. Now a watchdog (sessions/reaper.py) learns that
    watch is gone (the end of a pipe only watch held) and stops them as a second Ctrl-C does: the command's process
    group (watch's, as on a terminal) empties."""
    agent = "import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(120)\n"
    p = _watched(tmp_path, "--serve", "weather", "--", "sh", "-c", f'{sys.executable} -c "$0" & wait', agent)
    assert p.stdout is not None and p.stderr is not None
    pid = int(p.stdout.readline().split()[1])
    try:
        with open(f"/proc/{pid}/stat") as f:
            shell = int(f.read().rsplit(")", 1)[1].split()[1])  # the command: the agent's parent
        deadline = time.monotonic() + 30
        while not _watchdog_of(p.pid, shell):  # (started right after the command: a kill before it is not this test)
            assert time.monotonic() < deadline and p.poll() is None, "no watchdog of the command"
            time.sleep(0.05)  # another process's start: nothing to wait on but polling
        os.kill(p.pid, signal.SIGKILL)  # watch alone, not its group
        p.wait(30)
        deadline = time.monotonic() + 30
        while left := _group(p.pid):
            assert time.monotonic() < deadline, f"left running in the command's process group: {left}"
            time.sleep(0.05)  # other processes' exits (not our children): nothing to wait on
        assert _gone(pid) and _gone(shell)
    finally:
        for running in _group(p.pid):
            os.kill(running, signal.SIGKILL)


def test_an_unwritable_recording_is_a_usage_error_before_the_command_runs(tmp_path: Path) -> None:
    """It ran the command, said "recording stopped: cannot write ..." and exited 0: a CI run lost its recording.
    Now a one-line error, exit 2, as run --record and proxy --record say it, and the command never starts."""
    marker = tmp_path / "ran"
    out = watch(
        "--headless",
        "--serve",
        "weather",
        "--record",
        str(tmp_path / "no" / "such" / "dir" / "x.jsonl"),
        "--",
        sys.executable,
        "-c",
        f"open({str(marker)!r}, 'w')",
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"inspector watch: cannot write the recording {tmp_path / 'no' / 'such' / 'dir' / 'x.jsonl'}: "
        "No such file or directory"
    ]
    assert not marker.exists()


POST_ONE = (
    "import os, urllib.request\n"
    "req = urllib.request.Request(os.environ['ANTHROPIC_BASE_URL'] + '/v1/messages', method='POST',\n"
    '    data=b\'{"model":"claude-sonnet-4-6","max_tokens":9,"stream":true,"messages":[]}\',\n'
    "    headers={'content-type': 'application/json', 'x-api-key': 'sk-ant-api03-header-key-0123456789'})\n"
    "try:\n    urllib.request.urlopen(req, timeout=30)\nexcept Exception:\n    pass\n"
)


def test_a_key_as_the_base_urls_user_name_is_never_said_nor_recorded(tmp_path: Path) -> None:
    """ANTHROPIC_BASE_URL=https://KEY@relay (a token as the user name): watch's start-up line, its headless lines
    and the recording named the upstream URL with the key in clear."""
    key = "sk-ant-api03-url-user-CANARY-0123456789"
    rec = tmp_path / "run.jsonl"
    out = watch(
        "--headless",
        "--record",
        str(rec),
        "--",
        sys.executable,
        "-c",
        POST_ONE,
        env={"ANTHROPIC_BASE_URL": f"http://{key}@127.0.0.1:9"},  # (nothing listens: the request fails at once)
    )
    assert out.returncode == 0, out.stderr
    assert "-> http://[redacted]@127.0.0.1:9 " in out.stderr  # the start-up line
    assert "attempt 1: POST http://[redacted]@127.0.0.1:9/v1/messages" in out.stderr
    for where, text in (("stderr", out.stderr), ("stdout", out.stdout), ("recording", rec.read_text())):
        assert key not in text and "url-user-CANARY" not in text, where


def test_an_upstream_the_proxy_cannot_forward_to_is_a_one_line_error(tmp_path: Path) -> None:
    """--upstream garbage (or ANTHROPIC_BASE_URL without a scheme) was taken as it was: the command ran and every
    request got a 502 (and a key in such a URL, which nothing learned, was printed). Now a one-line usage error,
    the key masked, before the command runs; with --serve the upstream is not used and not checked."""
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w')"
    key = "sk-ant-api03-bad-url-CANARY-0123456789"
    for args, env, said in (
        (("--upstream", "garbage"), {}, "inspector watch: --upstream: not an http(s) URL: 'garbage'"),
        ((), {"ANTHROPIC_BASE_URL": f"user:{key}@relay:8080"}, "ANTHROPIC_BASE_URL: not an http(s) URL: 'user:"),
        (("--openai-upstream", "ftp://x/v1"), {}, "--openai-upstream: not an http(s) URL: 'ftp://x/v1'"),
    ):
        out = watch("--headless", *args, "--", sys.executable, "-c", code, env=env)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and said in out.stderr, out.stderr
        assert key not in out.stderr and not marker.exists()
    out = watch("--headless", "--serve", "weather", "--upstream", "garbage", "--", sys.executable, "-c", code)
    assert out.returncode == 0 and marker.exists(), out.stderr


def test_proxy_refuses_an_upstream_it_cannot_forward_to_too() -> None:
    """`inspector proxy --upstream garbage` listened and answered every request with a 502; now the same one-line
    usage error as watch's, the key in such a URL masked, before anything listens."""
    key = "sk-ant-api03-bad-url-CANARY-0123456789"
    for args, said in (
        (("--upstream", "garbage"), "inspector proxy: --upstream: not an http(s) URL: 'garbage'"),
        (("--upstream", f"user:{key}@relay:8080"), "inspector proxy: --upstream: not an http(s) URL: 'user:"),
        (("--openai-upstream", "ftp://x/v1"), "inspector proxy: --openai-upstream: not an http(s) URL: 'ftp://x/v1'"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "inspector", "proxy", "--headless", "--listen", "127.0.0.1:0", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and said in out.stderr, out.stderr
        assert key not in out.stderr


TIMED_AGENT = r"""
import asyncio, json, os
import anthropic

async def main():
    client = anthropic.AsyncAnthropic(api_key="sk-ant-offline-example")
    messages = [{"role": "user", "content": "What's the weather like in Paris right now?"}]
    for minute in (14, 15):  # the time in the system prompt: the cached prefix changes every turn
        system = [{"type": "text", "text": f"You are a weather assistant. Answer in one sentence. The time is 09:{minute}.",
                   "cache_control": {"type": "ephemeral"}}]
        async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=256, system=system,
                                          messages=messages) as s:
            m = await s.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]})
        calls = [b for b in m.content if b.type == "tool_use"]
        if not calls:
            print("".join(b.text for b in m.content if b.type == "text"))
            return
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": json.dumps({"temperature": 18})} for c in calls]})

asyncio.run(main())
"""


def test_headless_says_each_turn_s_cost_and_why_the_cache_missed(tmp_path: Path) -> None:
    """An agent with the time in its system prompt (the cache_break scenario as a real harness sends it): watch
    printed no cost and no cache verdict (`run --headless` does), and each turn was a conversation of its own. Now
    one conversation, and turn 2 says why its cache was written again."""
    agent = tmp_path / "timed_agent.py"
    agent.write_text(TIMED_AGENT)
    out = watch("--headless", "--serve", "cache_break", "--", sys.executable, str(agent))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "partly cloudy" in out.stdout
    costs = [line for line in out.stderr.splitlines() if "   cost $" in line]
    assert len(costs) == 2, out.stderr[-3000:]
    assert costs[1].endswith("cache written again: system changed at char 69"), costs
    assert "[c2]" not in out.stderr and "total 2 turns: cost $" in out.stderr


def test_what_failed_inside_the_session_is_said_when_it_ends(capsys: pytest.CaptureFixture[str]) -> None:
    """A failure that did not stop the session (a subscriber removed from the bus, the masking falling back to whole
    values) is said on stderr once the session ended: watch exited with the command's status and said nothing."""
    from types import SimpleNamespace

    from inspector.cli.watch import _say_errors
    from inspector.observe import observations as O

    bus = O.ObservationBus()
    bus.errors.append("redaction failed (RuntimeError: boom): masked as whole values from here on")
    _say_errors(SimpleNamespace(session=SimpleNamespace(bus=bus)))  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        "inspector watch: warning: redaction failed (RuntimeError: boom): masked as whole values from here on\n"
    )


def _in_a_terminal(monkeypatch: pytest.MonkeyPatch, *argv: str, start: bool = True) -> int:
    """``inspector watch ARGV`` in this process as on a terminal (the dashboard mode), its dashboard replaced by one
    that starts the session as the real one does and quits at once (an error it raises is shown, not raised);
    ``start=False``: it quits before starting the session (q while the dashboard was still starting)."""
    import io

    from inspector.cli import build_parser
    from inspector.cli import watch as watch_cli
    from inspector.tui import app as tui_app

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def dashboard(factory: object, **_: object) -> None:
        if not start:
            return
        try:
            factory()  # type: ignore[operator]
        except Exception:  # noqa: BLE001 (the real dashboard shows it: "Cannot start the session")
            pass

    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr(tui_app, "run_dashboard", dashboard)
    args = build_parser(["watch", *argv]).parse_args(["watch", *argv])
    return watch_cli.cmd(args)


def test_dashboard_mode_with_an_unwritable_log_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--log` naming a directory (or an unwritable path) was a traceback (IsADirectoryError from open) after the
    proxy had started. Now a one-line usage error, and the command never starts."""
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w')"
    status = _in_a_terminal(monkeypatch, "--serve", "weather", "--log", str(tmp_path), "--", sys.executable, "-c", code)
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"inspector watch: cannot write the command's output to {tmp_path}: Is a directory"
    ]
    assert not marker.exists()


def test_dashboard_mode_gives_the_shells_status_for_a_command_that_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script whose interpreter is missing passes the checks made before anything starts and fails at exec: with
    the dashboard, watch exited 1 (headless: 127, as a shell). Now the same status and one line, after the
    dashboard (which shows why it could not start)."""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/no/such/interpreter\necho hi\n")
    bad.chmod(0o755)
    status = _in_a_terminal(monkeypatch, "--serve", "weather", "--log", str(tmp_path / "out.log"), "--", str(bad))
    assert status == 127
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"inspector watch: cannot run {bad}: No such file or directory"], err


def test_quitting_before_the_dashboard_started_the_command_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """q (or Ctrl-C) while the dashboard was still starting: the command never ran, and watch exited 1 without a
    word but "the command's output is in LOG" (an empty log). Now 130, as an interrupt, one line saying the command
    did not run, and no empty log left behind."""
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w')"
    before = set(Path(tempfile.gettempdir()).glob("inspector-watch-*.log"))
    status = _in_a_terminal(monkeypatch, "--serve", "weather", "--", sys.executable, "-c", code, start=False)
    assert status == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        f"inspector watch: the dashboard was quit before {sys.executable} started: it did not run"
    ]
    assert not marker.exists()
    assert set(Path(tempfile.gettempdir()).glob("inspector-watch-*.log")) == before


def test_with_a_pipe_on_stdin_the_command_gets_it_and_no_dashboard_opens(tmp_path: Path) -> None:
    """`echo hi | inspector watch -- cat` on a terminal opened the dashboard, which read the pipe as keys ("i"
    opened the timing view), never the keyboard again (q did nothing), and spun at full CPU until killed; `cat` got
    /dev/null. Now headless, as when stdout is not a terminal: the command gets the pipe, watch its status."""
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "inspector", "watch", "--serve", "weather", "--", "cat"],
            stdin=subprocess.PIPE,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        assert p.stdin is not None
        p.stdin.write(b"hello through the pipe\n")
        p.stdin.close()
        try:
            status = p.wait(30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        out = b"".join(_pty_output(master))
    finally:
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert status == 0, text[-2000:]
    assert "hello through the pipe" in text and "finished after 0 turns" in text, text[-2000:]


def test_sigterm_to_watch_with_the_dashboard_stops_the_command_and_ends_the_recording(tmp_path: Path) -> None:
    """With the dashboard, SIGTERM to watch (kill, a CI runner's timeout) was caught by the embedded server, which
    stopped and raised it again: watch died at once, the command ran on under PID 1, and the recording had no end.
    Now it is passed on to the command (as headless does), the dashboard quits, the recording ends with the
    session's end, and watch's status is the command's."""
    import threading

    rec = tmp_path / "dash.jsonl"
    pid_file = tmp_path / "pid"
    agent = (  # (one request first: the pid file says the session is serving)
        "import os, time, urllib.request\n"
        "try:\n    urllib.request.urlopen(os.environ['ANTHROPIC_BASE_URL'] + '/v1/models', timeout=30).read()\n"
        "except OSError:\n    pass\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)"
    )
    p, master = _watch_on_a_pty(tmp_path, rec, agent)
    screen: list[bytes] = []

    def drain() -> None:  # (the dashboard blocks on a full terminal)
        screen.extend(_pty_output(master))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    child = 0
    try:
        child = _command_pid(pid_file, p, screen)
        os.kill(p.pid, signal.SIGTERM)  # watch alone
        status = p.wait(30)
        _until_gone(child)
    finally:
        _leave_nothing(p, child, master)
    assert status == 128 + signal.SIGTERM
    last = json.loads(rec.read_text().splitlines()[-1])
    assert last.get("type") == "loop_finished", last


def test_with_stdin_closed_on_a_terminal_watch_runs_headless(tmp_path: Path) -> None:
    """`inspector watch -- cmd <&-` on a terminal: no stdin at all (sys.stdin is None) is not a terminal either,
    never a traceback."""
    import pty

    master, slave = pty.openpty()
    watch = [sys.executable, "-m", "inspector", "watch", "--serve", "weather", "--", "true"]
    try:
        p = subprocess.Popen(
            ["sh", "-c", 'exec <&- "$@"', "sh", *watch], stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        out = b"".join(_pty_output(master))
        status = p.wait(30)
    finally:
        os.close(master)
    text = out.decode("utf-8", "replace")
    assert status == 0 and "Traceback" not in text and "finished after 0 turns" in text, text[-2000:]


@pytest.mark.parametrize("then", ["fails", "runs"])
def test_quitting_the_dashboard_gives_the_commands_status(tmp_path: Path, then: str) -> None:
    """q in the dashboard: watch's status is the command's, never the dashboard's own (0 for a session that ended
    'finished', which a watched session does whatever the command's status). After the command failed (3): 3.
    While it runs: it is stopped as a second Ctrl-C stops it (its whole tree, killed after the grace period), the
    recording ends, and watch's status is what that stop gave (terminated: 143). (--split: test_watch_split.py.)"""
    import threading

    rec = tmp_path / "dash.jsonl"
    pid_file = tmp_path / "pid"
    agent = (  # (one request first: the pid file says the session is serving)
        "import os, sys, time, urllib.request\n"
        "try:\n    urllib.request.urlopen(os.environ['ANTHROPIC_BASE_URL'] + '/v1/models', timeout=30).read()\n"
        "except OSError:\n    pass\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        + ("sys.exit(3)\n" if then == "fails" else "time.sleep(120)\n")
    )
    p, master = _watch_on_a_pty(tmp_path, rec, agent)
    screen: list[bytes] = []
    reader = threading.Thread(target=lambda: screen.extend(_pty_output(master)), daemon=True)
    reader.start()
    child = 0
    try:
        child = _command_pid(pid_file, p, screen)
        if then == "fails":
            _until_gone(child)  # (it ended: the dashboard shows the finished session)
        os.write(master, b"q")
        status = p.wait(30)
        _until_gone(child)
    finally:
        _leave_nothing(p, child, master)
    assert status == (3 if then == "fails" else 128 + signal.SIGTERM), b"".join(screen)[-2000:]
    last = json.loads(rec.read_text().splitlines()[-1])
    assert last.get("type") == "loop_finished", last


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_a_stop_while_the_dashboard_starts_ends_watch_cleanly(tmp_path: Path, sig: int) -> None:
    """SIGTERM, SIGHUP or SIGINT to watch once its dashboard holds the terminal (the alternate screen entered), as
    it starts: watch's handler raised KeyboardInterrupt into Textual's event loop, where it landed in one of its
    tasks (parsing the stylesheet): watch ended with that traceback (8 of 8 here). Now the dashboard quits as `q`
    does (InspectorApp.quit_soon, as `run` does): no traceback, the terminal given back, and the status as before:
    130 with one line when the command had not started (it never does then), else the command's."""
    import threading

    rec = tmp_path / "dash.jsonl"
    marker = tmp_path / "ran"
    p, master = _watch_on_a_pty(tmp_path, rec, f"import time\nopen({str(marker)!r}, 'w')\ntime.sleep(120)")
    screen: list[bytes] = []
    entered = threading.Event()

    def drain() -> None:  # (the dashboard blocks on a full terminal)
        for chunk in _pty_output(master):
            screen.append(chunk)
            if b"\x1b[?1049h" in b"".join(screen[-2:]):
                entered.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert entered.wait(60), b"".join(screen)[-2000:]
        os.kill(p.pid, sig)  # watch alone
        status = p.wait(30)
        reader.join(10)
    finally:
        _leave_nothing(p, 0, master)
    text = b"".join(screen)
    assert b"Traceback" not in text, text[-3000:]
    assert text.rfind(b"\x1b[?1049l") > text.rfind(b"\x1b[?1049h"), text[-2000:]  # the terminal given back
    if marker.exists():  # (the command had started: its status, stopped by the signal watch passed on)
        assert status == 128 + sig, text[-2000:]
    else:
        assert status == 130 and b"it did not run" in text, text[-2000:]

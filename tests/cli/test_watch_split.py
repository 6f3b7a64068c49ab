"""`inspector watch --split`: outside tmux the command keeps the terminal (a pty here), the dashboard is served to a
browser by textual-serve on 127.0.0.1 (its URL on stderr); the command starts once a browser opened it, its requests
go through the dashboard's proxy, and at the end the web server and its dashboards are stopped: no process left."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Literal, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[2]

AGENT = """
import json, os, sys, urllib.error, urllib.request
body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
req = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=body.encode(),
    headers={"content-type": "application/json", "x-api-key": "sk-ant-split-test-not-a-key", "anthropic-version": "2023-06-01",
             "x-inspector-scenario": "weather"},
)
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        data = r.read()
except urllib.error.HTTPError as e:
    sys.exit(f"agent got {e.code}: {e.read()[:500]!r}")
print("agent got", r.status, len(data), "bytes", "message_stop" in data.decode(), flush=True)
print("tty", sys.stdout.isatty(), flush=True)
"""


def _env() -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    for k in ("TMUX", "TEXTUAL_DRIVER", "ANTHROPIC_BASE_URL"):
        e.pop(k, None)
    return e


class Lines:
    """A pipe read line by line in a thread; ``wait_for(pattern)`` returns the first match (bounded)."""

    def __init__(self, stream: IO[bytes] | None) -> None:
        assert stream is not None, "a pipe: the process was started with stdout/stderr=PIPE"
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append("")  # EOF
            self.cond.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str] | None:
        rx = re.compile(pattern)
        with self.cond:
            ok = self.cond.wait_for(lambda: any(rx.search(x) for x in self.lines) or "" in self.lines, timeout)
            for x in self.lines:
                m = rx.search(x)
                if m:
                    return m
        assert ok is not None
        return None

    @property
    def text(self) -> str:
        with self.cond:
            return "".join(self.lines)


def _pty_reader(fd: int, out: bytearray) -> threading.Thread:
    def run() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other side closed (EIO on Linux)
                return
            if not chunk:
                return
            out.extend(chunk)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
@pytest.mark.parametrize("behind", ["upstream", "serve"])
def test_split_outside_tmux_serves_the_dashboard_to_a_browser_and_stops_it(tmp_path: Path, behind: str) -> None:
    """``behind``: a live upstream (`inspector proxy` is the dashboard), or `--serve` (`inspector serve --tui`)."""
    aiohttp = pytest.importorskip("aiohttp")
    pytest.importorskip("textual_serve")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    rec = tmp_path / "split.jsonl"
    upstream = subprocess.Popen(
        [sys.executable, "-m", "inspector", "serve", "--port", "0", "--speed", "max", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    up_err = Lines(upstream.stderr)
    up_out = Lines(upstream.stdout)
    master, slave = pty.openpty()
    watch: subprocess.Popen[bytes] | None = None
    seen: list[int] = []
    try:
        m = up_out.wait_for(r"ANTHROPIC_BASE_URL=(\S+)", 60) or up_err.wait_for(r"ANTHROPIC_BASE_URL=(\S+)", 5)
        assert m, f"serve did not start: {up_err.text[-2000:]}"
        where = (
            ["--upstream", m.group(1)] if behind == "upstream" else ["--serve", "weather", "--fault", "split_events"]
        )
        watch = subprocess.Popen(
            [sys.executable, "-m", "inspector", "watch", "--split", *where, "--record", str(rec)]
            + ["--", sys.executable, str(agent)],
            stdin=subprocess.DEVNULL,
            stdout=slave,  # a terminal: the command keeps it
            stderr=subprocess.PIPE,
            env=_env(),
            start_new_session=True,
        )
        os.close(slave)
        slave = -1
        terminal = bytearray()
        _pty_reader(master, terminal)
        err = Lines(watch.stderr)
        found = err.wait_for(r"the dashboard is at (http://127\.0\.0\.1:(\d+))", 60)
        assert found, f"no dashboard URL on stderr: {err.text[-3000:]}"
        url = found.group(1)
        assert b"agent got" not in terminal  # the command waits for the dashboard (its proxy is not up yet)

        async def browser() -> None:
            async with aiohttp.ClientSession() as session:
                async with session.get(url) as page:  # the web server answers on loopback
                    assert page.status == 200
                    assert "<html" in (await page.text()).lower()
                ws = await session.ws_connect(f"{url}/ws?width=100&height=30")
                got = 0
                loop = asyncio.get_running_loop()
                ended = loop.run_in_executor(None, watch.wait, 120)
                while not ended.done():  # the dashboard draws while the command runs through its proxy
                    try:
                        msg = await asyncio.wait_for(ws.receive(), 0.5)
                    except TimeoutError:
                        continue
                    if msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.ERROR):
                        break
                    got += len(msg.data) if isinstance(msg.data, (bytes, str)) else 0
                    if got and not seen:
                        seen.extend(_descendants(watch.pid))
                await ended
                assert got > 0, "the dashboard drew nothing"

        asyncio.run(browser())
        assert watch.wait(60) == 0, err.text[-3000:]
        assert seen, "no web server / dashboard process was seen"
        deadline = 30.0
        while deadline > 0 and [p for p in seen if _alive(p)]:
            threading.Event().wait(0.2)  # other processes' exits: nothing to wait on
            deadline -= 0.2
        assert not [p for p in seen if _alive(p)], f"left running: {[p for p in seen if _alive(p)]}"
        threading.Event().wait(0.5)  # the pty reader takes the last bytes
        shown = terminal.decode("utf-8", "replace")
        assert "agent got 200" in shown and "True" in shown, shown[-2000:]
        assert "tty True" in shown  # the command kept the terminal
        assert "stopping the dashboard" in err.text
        assert "Traceback" not in err.text
        lines = [json.loads(x) for x in rec.read_text().splitlines() if x.strip()]
        requests = [x for x in lines if x["kind"] == "request"]
        assert requests, "the dashboard's proxy recorded no request"
        if behind == "serve":  # the fake server answered, through serve --tui's own proxy, with the fault asked for
            assert lines[0]["source"]["type"] == "serve" and lines[0]["source"]["name"] == "weather"
        assert "sk-ant-split-test-not-a-key" not in rec.read_text()
    finally:
        if slave >= 0:
            os.close(slave)
        if watch is not None and watch.poll() is None:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
        for p in seen:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        upstream.terminate()
        upstream.wait(10)
        os.close(master)


def test_split_web_server_module_needs_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.tui.web import main

    with pytest.raises(SystemExit) as e:
        main(["--port", "1"])
    assert e.value.code == 2
    assert "a command is needed" in capsys.readouterr().err


INTERACTIVE = """
import os, sys
print("ready", flush=True)
line = sys.stdin.readline()  # the user's keys: they reach the command's pane
open(os.environ["OUT"], "w").write(line)
"""


@pytest.mark.skipif(not shutil.which("tmux"), reason="needs tmux")
def test_in_tmux_the_dashboard_opens_beside_the_command_which_keeps_the_keyboard(tmp_path: Path) -> None:
    """Inside tmux the dashboard opened in a new pane that became the current one: the keys a user typed for an
    interactive command went to the dashboard. It opens beside the command's pane (-d), which stays current."""
    sock = f"inspector-test-{os.getpid()}"
    out = tmp_path / "typed"
    script = tmp_path / "agent.py"
    script.write_text(INTERACTIVE)
    watch = [sys.executable, "-m", "inspector", "watch", "--split", "--serve", "weather", "--", sys.executable, script]
    env = _env()
    env["OUT"] = str(out)
    tmux = ["tmux", "-L", sock]
    try:
        subprocess.run(
            [*tmux, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "48", shlex.join(map(str, watch))],
            env=env,
            check=True,
            cwd=ROOT,
        )

        def panes() -> list[str]:
            fmt = "#{pane_active} #{pane_index}"
            got = subprocess.run([*tmux, "list-panes", "-F", fmt], capture_output=True, text=True, env=env)
            return got.stdout.split("\n")[:-1]

        def screen(pane: int) -> str:
            got = subprocess.run([*tmux, "capture-pane", "-p", "-t", f".{pane}"], capture_output=True, text=True)
            return got.stdout

        deadline = time.monotonic() + 60
        while len(panes()) < 2 or "ready" not in screen(0):  # the dashboard's pane, then the command (its output)
            assert time.monotonic() < deadline, (panes(), screen(0))
            time.sleep(0.1)  # another process's screen: nothing to wait on but polling it
        assert panes() == ["1 0", "0 1"]  # the command's pane is still the current one
        subprocess.run([*tmux, "send-keys", "Paris", "Enter"], check=True)
        while not out.exists() or not out.read_text():
            assert time.monotonic() < deadline, screen(0)
            time.sleep(0.1)
        assert out.read_text() == "Paris\n"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


@pytest.mark.skipif(not shutil.which("tmux"), reason="needs tmux")
def test_in_tmux_the_dashboard_pane_runs_in_watchs_environment_not_the_tmux_servers(tmp_path: Path) -> None:
    """A new tmux pane gets the tmux server's environment: the dashboard's proxy ran without what the shell that
    started watch had exported since (HTTPS_PROXY, SSL_CERT_FILE, OTEL_*, PYTHONPATH: a checkout's dashboard did
    not even start). It now runs in watch's environment, passed in a file that is gone once the pane started."""
    sock = f"inspector-test-env-{os.getpid()}"
    env = _env()
    env.pop("INSPECTOR_TEST_MARK", None)
    tmux = ["tmux", "-L", sock]
    watch = [sys.executable, "-m", "inspector", "watch", "--split", "--serve", "weather", "--"]
    command = [*watch, sys.executable, "-c", "import time; time.sleep(60)"]
    shell = "INSPECTOR_TEST_MARK=exported-later; export INSPECTOR_TEST_MARK; exec " + shlex.join(command)
    before = set(Path(tempfile.gettempdir()).glob("inspector-watch-env-*"))
    try:
        subprocess.run(
            [*tmux, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "48", shell],
            env=env,
            check=True,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 60
        while (environ := _dashboard_environ(sock)) is None:
            assert time.monotonic() < deadline, "the dashboard's pane did not start"
            time.sleep(0.1)  # another process's start: nothing to wait on but polling it
        assert "INSPECTOR_TEST_MARK=exported-later" in environ
        assert set(Path(tempfile.gettempdir()).glob("inspector-watch-env-*")) <= before
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _dashboard_environ(sock: str) -> list[str] | None:
    """The environment of the dashboard (`inspector serve --tui`) running in tmux server ``sock``, once it runs."""
    head = f"{sys.executable}\x00-m\x00inspector\x00serve\x00--tui\x00"
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or not (proc / "cmdline").read_text().startswith(head):
                continue
            environ = (proc / "environ").read_text().split("\x00")
        except OSError:
            continue
        if any(v.startswith("TMUX=") and sock in v for v in environ):
            return environ
    return None


# --- watch and its tmux pane: each learns when the other has ended (inspector/sessions/watchlink.py) ------------

PANE_AGENT = """
import json, os, sys, time, urllib.request
body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
headers = {"content-type": "application/json", "x-api-key": "sk-ant-pane-test-not-a-key", "anthropic-version": "2023-06-01"}
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers), timeout=60).read()
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))  # (after its request: the dashboard's session serves)
if os.environ["THEN"] == "exit":
    sys.exit(3)
time.sleep(120)
"""


T = TypeVar("T")


class Tmux:
    """A tmux server of the test's own (``-L``) running ``inspector watch --split --serve weather`` on PANE_AGENT in
    its first pane; watch's exit status is written to ``status`` by the pane's shell."""

    def __init__(self, tmp_path: Path, then: str) -> None:
        self.sock = f"inspector-test-link-{os.getpid()}-{then}"
        self.tmux = ["tmux", "-L", self.sock]
        self.pane = self.watch_pane = ""  # tmux's pane ids (%N): the dashboard's, the command's
        self.rec = tmp_path / "pane.jsonl"
        self.status = tmp_path / "status"
        self.pid_file = tmp_path / "agent.pid"
        # watch's temporary directory: its link's socket goes there, and must go. Short: under tmp_path a socket's
        # path is too long, and watch falls back to /tmp (where this test would not see what it leaves)
        self.tmp = Path(tempfile.mkdtemp(prefix="it-", dir="/tmp"))
        agent = tmp_path / "agent.py"
        agent.write_text(PANE_AGENT)
        watch = [sys.executable, "-m", "inspector", "watch", "--split", "--serve", "weather", "--record", str(self.rec)]
        self.err = tmp_path / "watch.err"  # (watch's stderr: its pane closes with it)
        shell = shlex.join([*watch, "--", sys.executable, str(agent)]) + f" 2> {shlex.quote(str(self.err))}"
        shell += f"; echo $? > {shlex.quote(str(self.status))}"
        self.env = dict(_env(), PID_FILE=str(self.pid_file), THEN=then, TMPDIR=str(self.tmp))
        subprocess.run(
            [*self.tmux, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", shell],
            env=self.env,
            check=True,
            cwd=ROOT,
        )
        self.deadline = time.monotonic() + 90
        panes = self.until(lambda: len(p := self.panes()) == 2 and p, "the dashboard's pane")
        (self.watch_pane, _), (self.pane, self.pane_pid) = panes
        self.agent = int(self.until(lambda: self.pid_file.exists() and self.pid_file.read_text(), "the agent's pid"))

    def until(self, ready: Callable[[], T | None | Literal[False]], what: str) -> T:
        while not (got := ready()):
            assert time.monotonic() < self.deadline, (
                f"{what}: not in time; the dashboard: {self.screen(self.pane)[:400]!r}"
            )
            time.sleep(0.1)  # another process's state: nothing to wait on but polling it
        return got

    def panes(self) -> list[tuple[str, int]]:
        got = subprocess.run([*self.tmux, "list-panes", "-F", "#{pane_id} #{pane_pid}"], capture_output=True, text=True)
        return [(x.split()[0], int(x.split()[1])) for x in got.stdout.splitlines()]

    def screen(self, pane: str) -> str:
        got = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True)
        return got.stdout

    def watch_pid(self) -> int:
        shell = next(pid for pane, pid in self.panes() if pane == self.watch_pane)
        return next(p for p in _descendants(shell) if "inspector" in Path(f"/proc/{p}/cmdline").read_text())

    def watch_status(self) -> int:
        return int(self.until(lambda: self.status.exists() and self.status.read_text().strip(), "watch's status"))

    def last_recorded(self) -> dict[str, object]:
        def ended() -> dict[str, object] | None:
            lines = self.rec.read_text().splitlines() if self.rec.exists() else []
            last = json.loads(lines[-1]) if lines else {}
            return last if last.get("type") == "loop_finished" else None

        return self.until(ended, "the recording's end")

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
        for pid in (getattr(self, "agent", 0), getattr(self, "pane_pid", 0)):
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def tmux_watch(tmp_path: Path) -> Iterator[Callable[[str], Tmux]]:
    made: list[Tmux] = []

    def make(then: str) -> Tmux:
        made.append(Tmux(tmp_path, then))
        return made[-1]

    yield make
    for t in made:
        t.close()


needs_tmux = pytest.mark.skipif(not shutil.which("tmux") or not Path("/proc").is_dir(), reason="needs tmux, /proc")


@needs_tmux
def test_in_tmux_when_the_command_ends_the_dashboard_stays_on_the_finished_session_and_q_closes_it(
    tmux_watch: Callable[[str], Tmux],
) -> None:
    """The command exited: watch did too, and its dashboard pane ran on, its session still 'idle', listening, the
    recording without its end, for ever. Now the pane's session ends with the command (finished; the recording is
    complete), the dashboard stays open on it, and q closes it: nothing is left running, the link is gone."""
    t = tmux_watch("exit")
    assert t.watch_status() == 3  # the command's
    last = t.last_recorded()
    assert last["status"] == "finished", last
    t.until(lambda: "finished" in t.screen(t.pane), "the dashboard to show the finished session")
    assert _alive(t.pane_pid)  # it stays open on it
    subprocess.run([*t.tmux, "send-keys", "-t", t.pane, "q"], check=True)
    t.until(lambda: not _alive(t.pane_pid), "the dashboard to quit")
    assert not list(t.tmp.iterdir()), "the link's socket (or the pane's environment file) was left behind"
    assert "Traceback" not in t.err.read_text()


@needs_tmux
def test_in_tmux_closing_the_dashboard_while_the_command_runs_stops_it_with_watchs_status_its(
    tmux_watch: Callable[[str], Tmux],
) -> None:
    """q in the dashboard's pane while the command ran: the command ran on without its proxy (each of its requests
    refused) and watch waited for it. Now the command is stopped as a second Ctrl-C stops it, and watch's status is
    the command's (terminated: 143, as a shell reports it)."""
    t = tmux_watch("sleep")
    subprocess.run([*t.tmux, "send-keys", "-t", t.pane, "q"], check=True)
    assert t.watch_status() == 128 + signal.SIGTERM
    assert not list(t.tmp.iterdir()), "left in watch's temporary directory"
    t.until(lambda: not _alive(t.agent), "the command to stop")
    assert not _alive(t.pane_pid)
    assert t.last_recorded()["type"] == "loop_finished"
    assert "the dashboard was closed; stopping the command" in t.err.read_text()


@needs_tmux
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_in_tmux_when_watch_is_stopped_or_killed_the_dashboard_closes_too(
    tmux_watch: Callable[[str], Tmux], sig: int
) -> None:
    """watch stopped from outside (SIGTERM: it stops the command and exits with its status) or killed (nothing of
    it left to say so): its dashboard pane never ran on for ever; its session ends (the recording too) and it
    closes."""
    t = tmux_watch("sleep")
    os.kill(t.watch_pid(), sig)
    t.until(lambda: not _alive(t.pane_pid), "the dashboard to close")
    # (killed too: the link's socket is removed once the pane connected, the pane's environment file once read)
    assert not list(t.tmp.iterdir()), "left in watch's temporary directory"
    last = t.last_recorded()
    if sig == signal.SIGTERM:
        assert t.watch_status() == 128 + signal.SIGTERM
        assert last["status"] == "finished", last  # (the command exited, stopped: it said so before it closed)
        t.until(lambda: not _alive(t.agent), "the command to stop")
    else:
        assert last["status"] == "cancelled", last  # (watch went without a word)


# --- watch and its dashboard in a browser: linked as the tmux pane is ------------------------------------------


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
@pytest.mark.parametrize("how", ["q", "tab closed", "watch killed"])
def test_in_a_browser_closing_the_dashboard_while_the_command_runs_stops_it(tmp_path: Path, how: str) -> None:
    """Outside tmux, q in the browser's dashboard (or its tab closed) while the command ran: the dashboard and its
    proxy were gone, the command ran on (each of its requests refused) and watch waited for it, unlike in tmux. Now
    the dashboard is linked to watch as the pane is: the command is stopped as a second Ctrl-C stops it, and watch's
    status is the command's (terminated: 143). watch killed: its web server, the dashboard and the command ran on
    for ever; now nothing of them is left."""
    aiohttp = pytest.importorskip("aiohttp")
    pytest.importorskip("textual_serve")
    agent = tmp_path / "agent.py"
    agent.write_text(PANE_AGENT)
    pid_file = tmp_path / "agent.pid"
    tmp = Path(tempfile.mkdtemp(prefix="it-", dir="/tmp"))  # watch's TMPDIR (short: the link's socket goes there)
    master, slave = pty.openpty()
    watch = subprocess.Popen(
        [sys.executable, "-m", "inspector", "watch", "--split", "--serve", "weather", "--", sys.executable, str(agent)],
        stdin=subprocess.DEVNULL,
        stdout=slave,  # a terminal: the command keeps it
        stderr=subprocess.PIPE,
        env=dict(_env(), PID_FILE=str(pid_file), THEN="sleep", TMPDIR=str(tmp)),
        start_new_session=True,
    )
    os.close(slave)
    _pty_reader(master, bytearray())
    seen: list[int] = []
    try:
        err = Lines(watch.stderr)
        found = err.wait_for(r"the dashboard is at (http://127\.0\.0\.1:\d+)", 60)
        assert found, f"no dashboard URL on stderr: {err.text[-3000:]}"

        async def browser() -> int:
            async with aiohttp.ClientSession() as session:
                ws = await session.ws_connect(f"{found.group(1)}/ws?width=100&height=30")

                async def draw() -> None:  # (the dashboard blocks on a tab that reads nothing)
                    async for _ in ws:
                        pass

                drawing = asyncio.create_task(draw())
                deadline = time.monotonic() + 60
                while not pid_file.exists() or not pid_file.read_text():  # its request went through the dashboard
                    assert time.monotonic() < deadline and watch.poll() is None, err.text[-3000:]
                    await asyncio.sleep(0.1)  # another process's file: nothing to wait on but polling it
                seen.extend(_descendants(watch.pid))  # its web server, the dashboard, the command...
                if how == "q":
                    await ws.send_json(["stdin", "q"])
                elif how == "tab closed":
                    ws._response.connection.transport.abort()  # (SLF001) no close frame: a killed tab
                else:
                    os.kill(watch.pid, signal.SIGKILL)
                status = await asyncio.to_thread(watch.wait, 60)
                drawing.cancel()
                return status

        status = asyncio.run(browser())
        command = int(pid_file.read_text())
        deadline = time.monotonic() + 30
        while [p for p in seen if _alive(p)]:
            assert time.monotonic() < deadline, f"left running: {[p for p in seen if _alive(p)]}"
            time.sleep(0.1)  # other processes' exits: nothing to wait on
        assert command in seen and not _alive(command)
        # (killed too: the link's socket went once the dashboard connected, the web server's log has no name)
        assert not list(tmp.iterdir()), f"left in watch's temporary directory: {list(tmp.iterdir())}"
        if how == "watch killed":
            assert status == -signal.SIGKILL
        else:
            assert status == 128 + signal.SIGTERM, err.text[-3000:]  # the command's: terminated
            assert "the dashboard was closed; stopping the command" in err.text
            assert "Traceback" not in err.text
    finally:
        if watch.poll() is None:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
        for p in seen:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        os.close(master)
        shutil.rmtree(tmp, ignore_errors=True)

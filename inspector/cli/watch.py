"""`inspector watch [options] -- COMMAND [ARGS...]`: run an agent with its API pointing at an embedded proxy, and
watch every request it makes (see inspector/sessions/launch.py).

Modes:
- default, on a terminal: the dashboard runs in this terminal while the command runs with its stdin from
  /dev/null and its output in a log file (`--log`, default a temporary file named at the end). When the command
  ends, the session ends (finished, with the command's exit status; the recording is complete) and the dashboard
  stays open on it (q quits). Ctrl-C, which the dashboard receives, is sent to the command; a second one stops
  watching. An agent that needs the terminal itself goes with `--split`.
- `--split`: the command keeps this terminal; the dashboard opens in a new tmux pane when inside tmux, else it is
  served to a browser (`inspector web` style) on 127.0.0.1. The tmux pane is linked to watch
  (inspector/sessions/watchlink.py): when the command ends, the pane's session ends (finished, the recording is
  complete) and its dashboard stays open on it (q quits, the pane closes); when watch is stopped (a second Ctrl-C,
  SIGTERM, SIGHUP) or killed, the dashboard closes too; when the dashboard is closed (q, its pane killed) while the
  command runs, the command is stopped as a second Ctrl-C stops it, and watch exits with its status. In a browser,
  the dashboard is linked the same way (closing it, or its tab, while the command runs stops the command), but it
  does not outlive watch: when the command ends, its session ends and the dashboard is stopped with its server.
- `--headless` (and whenever stdout is not a terminal, or stdin is not one without `--split`): progress lines on
  stderr; the command keeps the terminal and its stdin.
- `--serve SCENARIO|RECORDING`: no upstream at all, the fake server answers (with `--fault`): a harness's own test
  suite runs offline and deterministically.
`--record FILE` records in every mode. The command's exit status is watch's.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from inspector.cli.common import EXIT_USAGE, err, record_problem
from inspector.core.pacing import parse_speed

if TYPE_CHECKING:
    from collections.abc import Callable

    from inspector.sessions.launch import Launched
    from inspector.sessions.watch import WatchSession
    from inspector.sessions.watchlink import PaneLink, WatchFollower


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "watch",
        help="run an agent with its API base URL pointing at an embedded proxy, and watch it",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: inspector watch --headless --record run.jsonl -- python my_agent.py",
    )
    p.add_argument(
        "--upstream",
        metavar="URL",
        help="the Anthropic API to forward to (default: ANTHROPIC_BASE_URL, else the public API)",
    )
    p.add_argument(
        "--openai-upstream",
        metavar="URL",
        help="the OpenAI API to forward OpenAI-format requests to, with its /v1 (default: OPENAI_BASE_URL, else "
        "https://api.openai.com/v1)",
    )
    p.add_argument("--record", metavar="FILE", help="write a recording of every request (default: none)")
    p.add_argument("--headless", action="store_true", help="progress lines on stderr, no dashboard (default: off)")
    p.add_argument(
        "--split",
        action="store_true",
        help="the command keeps the terminal: the dashboard goes to a new tmux pane, or to a browser (default: off)",
    )
    p.add_argument(
        "--serve",
        metavar="SCENARIO|RECORDING",
        help="no upstream: the fake server answers with this scenario or recording (default: none)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME[:ARG][@once|@turn]",
        help="with --serve: inject faults (repeatable; see `inspector serve --list-faults`; @once: one turn only, "
        "the default of drop, stall and error faults; @turn: every turn; default none)",
    )
    p.add_argument(
        "--speed", type=parse_speed, default=None, help="with --serve: pacing, 1 real time .. max (default: max)"
    )
    p.add_argument(
        "--log", metavar="FILE", help="dashboard mode: the command's output goes here (default: a temp file)"
    )
    from inspector.cli.run import add_otel_arguments

    add_otel_arguments(p)  # --otel, --otel-content: one parent span per conversation of the command
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=cmd)


def _session(args: argparse.Namespace, upstream: str, openai_upstream: str | None) -> WatchSession:
    from inspector.sessions import watch as W

    if args.serve:
        from inspector.net.faults import parse_faults

        faults = parse_faults(args.fault)
        speed = args.speed if args.speed is not None else float("inf")
        options: dict[str, Any] = {}
        name = args.serve
        if Path(args.serve).is_file() and not args.serve.endswith((".yaml", ".yml")):
            from inspector.net.recorded import RecordingSource

            options["recording"] = RecordingSource.load(args.serve)
            name = "parse_date"  # (the fake API's scenario is unused: the recording answers, and is named)
        return W.serve_session(name, faults, speed=speed, host="127.0.0.1", port=0, record=args.record, **options)
    from inspector.core.errors import UsageError

    if args.fault:
        raise UsageError("--fault goes with --serve (for a live upstream: inspector proxy --fault)")
    return W.proxy_session(upstream, "127.0.0.1", 0, record=args.record, openai_upstream=openai_upstream)


WATCH_LINK_HELP = argparse.SUPPRESS  # --watch-link PATH: `watch --split`'s own (sessions/watchlink.py), not a user's


def follow_watch(path: str | None) -> tuple[WatchFollower | None, str | None]:
    """The dashboard pane's side of `watch --split`'s link (``--watch-link``): connected, or why not (no path: none,
    the dashboard is not watch's)."""
    if not path:
        return None, None
    from inspector.sessions.watchlink import WatchFollower

    try:
        return WatchFollower(path), None
    except OSError as e:
        return None, f"--watch-link {path}: {e.strerror or e}"


def attach_to_watch(follower: WatchFollower | None, session: WatchSession) -> None:
    """A session the pane's dashboard starts (in its factory, on the dashboard's loop) ends as watch says: when the
    command ended, or watch was stopped or is gone (then the dashboard closes too)."""
    if follower is None:
        return
    from inspector.tui.app import quit_from_any_thread

    follower.attach(session, quit_from_any_thread())


def _err(msg: str) -> None:
    err(msg, prefix="inspector watch")  # (one prefix: err's own "inspector: " before it said it twice)


def _start(launched: Launched[WatchSession]) -> int | None:
    """Start the command: None, or the exit status a shell gives when it cannot be run (a script whose interpreter
    is missing passes `resolve_command` but not exec: 127, as from sh; any other refusal 126), said in one line."""
    from inspector.sessions.launch import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND

    launched.catch_stops()  # (before it starts: a SIGTERM as it starts stops it; wait() releases them)
    try:
        launched.start_command()
    except OSError as e:
        launched.release_stops()
        _err(f"cannot run {launched.argv[0]}: {e.strerror or e}")
        return EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    return None


def cmd(args: argparse.Namespace) -> int:
    from inspector.cli.common import stops_raise

    # SIGTERM / SIGHUP before the command runs (or after): an exception, so that what watch made is removed on the way
    # out (the link's socket, the pane's environment file, the web server and its log); while the command runs (or
    # the dashboard), watch's own handlers pass them on to it instead (Launched.wait, _dashboard)
    with stops_raise():
        return _cmd(args)


def _cmd(args: argparse.Namespace) -> int:
    from inspector.core.errors import InspectorError
    from inspector.sessions.launch import (
        Launched,
        command_env,
        openai_upstream_from_env,
        resolve_command,
        upstream_from_env,
        upstream_problem,
    )

    argv = list(args.command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    problem = resolve_command(argv)
    if not problem and getattr(args, "otel_content", False) and not getattr(args, "otel", False):
        problem = "--otel-content goes with --otel", EXIT_USAGE
    if not problem and getattr(args, "record", None):  # (before the command runs: not a lost recording after it)
        unwritable = record_problem(args.record)
        if unwritable:
            problem = unwritable, EXIT_USAGE
    if problem:
        _err(problem[0])
        return problem[1]
    env = dict(os.environ)
    upstream = upstream_from_env(env, args.upstream)
    if args.serve and args.openai_upstream:
        _err("--openai-upstream goes without --serve (with --serve the fake server answers both APIs)")
        return EXIT_USAGE
    # where OpenAI-format requests go; None: with --serve, or one server for both (a relay), to upstream as they are
    openai_upstream: str | None = openai_upstream_from_env(env, args.openai_upstream)
    if args.serve or openai_upstream == upstream:
        openai_upstream = None
    if not args.serve:  # (a URL the proxy cannot forward to: every request would be a 502, the command none the wiser)
        for url, named in (
            (upstream, "--upstream" if args.upstream else "ANTHROPIC_BASE_URL"),
            (openai_upstream, "--openai-upstream" if args.openai_upstream else "OPENAI_BASE_URL"),
        ):
            bad = upstream_problem(url) if url else None
            if bad:
                _err(f"{named}: {bad}")
                return EXIT_USAGE
    try:
        session = _session(args, upstream, openai_upstream)
    except (InspectorError, OSError) as e:
        _err(str(getattr(e, "strerror", None) or e))
        return EXIT_USAGE
    close_otel = None
    if getattr(args, "otel", False):
        from inspector.cli.run import otel_for_conversations

        try:
            close_otel = otel_for_conversations(session.bus, args, lambda: session.secrets)
        except InspectorError as e:
            session.close()
            _err(str(e))
            return EXIT_USAGE
    launched = Launched(session, argv, {}, on_note=lambda m: print(m, file=sys.stderr, flush=True))
    launched.env = command_env(env, launched.base_url, offline=bool(args.serve))
    what = f"serve {args.serve}" if args.serve else upstream
    # headless also when stdin is not a terminal (`producer | inspector watch -- cmd`): the dashboard would read the
    # pipe as keys and never the keyboard, and the command would lose its input; with --split the command keeps it
    stdin_terminal = sys.stdin is not None and sys.stdin.isatty()  # (None: stdin closed)
    headless = args.headless or not sys.stdout.isatty() or (not args.split and not stdin_terminal)
    try:
        if args.split and not headless:
            return _split(args, launched, what, openai_upstream)
        if headless:
            return _headless(launched, what + (f" (OpenAI: {openai_upstream})" if openai_upstream else ""), args.record)
        return _dashboard(args, launched, what)
    finally:
        if close_otel is not None:
            close_otel()  # the open conversations' spans end, the exporter is flushed (bounded)


def _headless(launched: Launched[WatchSession], what: str, record: str | None) -> int:
    from inspector.cli.headless import LineSink, ProgressPrinter
    from inspector.cli.run import turn_costs

    # (concurrent conversations' lines can be published a few ms out of order: put back in time order, 0.25 s later)
    sink = LineSink(sys.stderr.buffer, window=HEADLESS_ORDER_WINDOW)
    printer = ProgressPrinter(sink)
    # each turn's usage, cost and cache verdict ("cache written again: system changed at char 69"), as `run` prints
    # them; subscribed first, so that a turn's cost comes before the session's end
    launched.session.bus.subscribe(turn_costs(printer, sink))
    launched.session.bus.subscribe(printer)
    launched.start_session()
    print(
        f"inspector watch: {launched.base_url} -> {what}" + (f", recording to {record}" if record else ""),
        file=sys.stderr,
        flush=True,
    )
    failed = _start(launched)
    if failed is not None:
        launched.stop_session()
        return failed
    status = launched.wait()
    launched.stop_session(reason=f"the command exited with status {status}")
    sink.close()
    _say_errors(launched)
    return status


def _say_errors(launched: Launched[WatchSession]) -> None:
    """What failed inside the session without stopping it (a subscriber, the masking): said once it ended."""
    for failure in launched.session.bus.errors:
        print(f"inspector watch: warning: {failure}", file=sys.stderr)


def _dashboard(args: argparse.Namespace, launched: Launched[WatchSession], what: str) -> int:
    """The dashboard in this terminal; the command without it (stdin /dev/null, output to a log file: a temporary
    one unless ``--log``, named at the end, and removed when the command did not run)."""
    try:
        if args.log:
            log_path = Path(args.log)
            log = open(log_path, "wb")
        else:
            fd, name = tempfile.mkstemp(prefix="inspector-watch-", suffix=".log")
            log_path, log = Path(name), os.fdopen(fd, "wb")
    except OSError as e:  # (before the command runs: a one-line usage error, not a traceback)
        launched.session.close()
        _err(f"cannot write the command's output to {args.log or 'a temporary file'}: {e.strerror or e}")
        return EXIT_USAGE
    try:
        return _dashboard_logging_to(log, log_path, args, launched, what)
    finally:
        log.close()
        if launched.process is None and not args.log:  # the command never ran: nothing was written to the log
            log_path.unlink(missing_ok=True)


def _dashboard_logging_to(
    log: IO[bytes], log_path: Path, args: argparse.Namespace, launched: Launched[WatchSession], what: str
) -> int:
    """:func:`_dashboard`, the command's output going to ``log`` (closed, and removed when the command did not run,
    by the caller however this ends)."""
    import subprocess

    from inspector.tui.app import InspectorApp, run_dashboard

    launched.stdin, launched.stdout, launched.stderr = subprocess.DEVNULL, log, subprocess.STDOUT
    launched.session.sock.listen(2048)
    started = False
    cannot_run: list[OSError] = []  # why the command could not be started (the dashboard shows it too)

    apps: list[InspectorApp] = []  # the dashboard, once made (run_dashboard's `made`)
    stops: list[int] = []  # the signals from outside that stopped watch

    def factory(**_: Any) -> Any:
        nonlocal started
        if not started and not stops:  # the dashboard runs the session; the command starts once, with it
            started = True
            try:
                launched.session.command = launched.start_command()  # its exit ends the session, as finished
            except OSError as e:
                cannot_run.append(e)
                raise
        return launched.session

    def stop_from_outside(signum: int, frame: Any) -> None:
        """SIGTERM, SIGHUP or SIGINT to watch (kill, a CI runner's timeout, a closed terminal; Ctrl-C on the
        dashboard's terminal is a key): passed on to the command and every process it started, as headless does,
        and the dashboard quits as `q` does: the session ends, the recording is closed, and watch exits with the
        command's status (it died at once, the command ran on). The dashboard quits whenever the signal comes
        (InspectorApp.quit_soon, as `run` does): a KeyboardInterrupt raised while it started landed in one of
        Textual's tasks, and watch ended with its traceback. A command not started yet never starts."""
        stops.append(signum)
        launched.stop_command(signum)
        if not apps:  # (the dashboard is not made yet: nothing runs)
            signal.default_int_handler(signum, frame)
        apps[0].quit_soon()

    import signal

    from inspector.core import signals

    previous = {sig: signals.handle(sig, stop_from_outside) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        with contextlib.suppress(KeyboardInterrupt):  # (a stop from outside before the dashboard was made)
            run_dashboard(
                factory,
                source={"type": "watch", "command": shlex.join(launched.argv), "upstream": what},
                interrupt=launched.send_interrupt,  # Ctrl-C: to the command first, then it stops watching
                made=apps.append,
            )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        p = launched.process
        if p is not None and p.poll() is None:
            launched.stop_command(signal.SIGTERM)  # (and every process it started; killed after a grace period)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
            launched.finish_stop()  # (the processes it started that ignore SIGTERM: killed, none left running)
        log.close()
    if cannot_run:  # as headless says it: one line, the status a shell gives (127 not found, 126 not executable)
        from inspector.sessions.launch import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND

        launched.session.close()
        why = cannot_run[0]
        _err(f"cannot run {launched.argv[0]}: {why.strerror or why}")
        return EXIT_NOT_FOUND if isinstance(why, FileNotFoundError) else EXIT_NOT_EXECUTABLE
    if launched.process is None:  # quit (q, Ctrl-C) while the dashboard was starting: the command never ran
        launched.session.close()
        _err(f"the dashboard was quit before {launched.argv[0]} started: it did not run")
        return 130
    status = launched.process.wait()
    launched.close_watchdog()
    print(f"inspector watch: the command's output is in {log_path}", file=sys.stderr)
    _say_errors(launched)
    from inspector.sessions.launch import exit_status

    return exit_status(status)


# --headless: a progress line waits at most this long, to go out in time order with the other conversations' lines
HEADLESS_ORDER_WINDOW = 0.25
SPLIT_START = 15.0  # seconds for the dashboard's web server (or tmux pane) to start listening
SPLIT_BROWSER = 300.0  # seconds to wait for a browser to open the dashboard before the command starts
SPLIT_STOP = 10.0  # seconds the web server and its dashboards get to exit before they are killed


def _split(args: argparse.Namespace, launched: Launched[WatchSession], what: str, openai_what: str | None) -> int:
    """The command keeps the terminal; the dashboard runs as `inspector proxy` (same port) in a new tmux pane when
    inside tmux, else served to a browser by textual-serve on 127.0.0.1 (:func:`_split_web`)."""
    import shutil

    if args.serve and getattr(args, "otel", False):
        launched.session.close()
        _err("--otel with --split --serve is not supported: use --headless or the dashboard in this terminal")
        return EXIT_USAGE
    port = launched.session.sock.getsockname()[1]
    launched.session.close()  # the dashboard's proxy binds this port
    from inspector.sessions.watchlink import PaneLink

    # how watch and its dashboard (a tmux pane: not our child; a web server's: not our child either) learn that the
    # other has ended
    try:
        link = PaneLink()
    except OSError as e:
        _err(f"cannot make the dashboard's link: {e.strerror or e}")
        return EXIT_USAGE
    try:
        dashboard = split_dashboard(args, port, what, openai_what, link.path)
        if not os.environ.get("TMUX") or not shutil.which("tmux"):
            return _split_web(launched, dashboard, port, link)
        return _split_tmux(launched, dashboard, port, link)
    finally:
        link.close()  # (the dashboard told nothing: watch is gone, its session ends as cancelled and it closes)


def _split_tmux(launched: Launched[WatchSession], dashboard: list[str], port: int, link: PaneLink) -> int:
    """The dashboard in a new tmux pane, linked to watch (sessions/watchlink.py): when the command ends, the pane's
    session ends as finished and the dashboard stays open on it (q quits, the pane closes); when watch is stopped
    (a second Ctrl-C, SIGTERM, SIGHUP) the dashboard closes too; when the dashboard is closed while the command runs,
    the command is stopped, as a second Ctrl-C stops it. watch's status is the command's."""
    import subprocess

    # beside the command's own pane (TMUX_PANE: not whichever pane is current), which keeps the keyboard (-d)
    pane = os.environ.get("TMUX_PANE")
    where = ["-t", pane] if pane else []
    # a new pane gets the tmux server's environment, not watch's: the dashboard's proxy would go without the
    # HTTPS_PROXY, SSL_CERT_FILE, OTEL_* or PYTHONPATH this shell has. Passed in a file only we can read (never in
    # an argument, which any user sees), read and removed by the pane as it starts
    env_file = _environment_file()
    try:
        subprocess.run(
            [
                "tmux",
                "split-window",
                "-d",
                "-h",
                *where,
                shlex.join([sys.executable, "-c", PANE_ENV, env_file, *dashboard]),
            ],
            check=False,
        )
        listening = link.accept(SPLIT_START) and _wait_listening(port, SPLIT_START)
    finally:
        with contextlib.suppress(OSError):  # (the pane removed it, unless it did not start)
            os.unlink(env_file)
    if not listening:
        _err("the dashboard pane did not start listening")
        return EXIT_USAGE
    return _run_linked(launched, link)


def _run_linked(launched: Launched[WatchSession], link: PaneLink) -> int:
    """The command, once its dashboard (linked: sessions/watchlink.py) is listening: when the dashboard is closed
    while the command runs (q, its pane killed, its browser tab closed), the command is stopped as a second Ctrl-C
    stops it; when the command ends, the dashboard is told (its session ends as finished; it closes too when watch
    was stopped). watch's status is the command's."""
    import signal
    import threading

    gone = threading.Event()  # the dashboard was closed (q, or its pane killed)
    stopping = threading.Lock()

    def dashboard_closed() -> None:
        gone.set()
        p = launched.process
        if p is None or p.poll() is not None or not stopping.acquire(blocking=False):
            return  # (not started yet: it is not; ended: nothing to stop; stopped already)
        launched.on_note("inspector watch: the dashboard was closed; stopping the command")
        launched.stop_command(signal.SIGTERM)  # as a second Ctrl-C: its tree, killed after the grace period

    link.on_gone(dashboard_closed)
    if gone.is_set():
        _err("the dashboard was closed before the command started: the command was not started")
        return EXIT_USAGE
    failed = _start(launched)
    if failed is not None:
        link.say_end(failed, closes=True)  # (nothing to show: the command never ran; the line above says why)
        return failed
    if gone.is_set():  # (closed while the command started)
        dashboard_closed()
    status = launched.wait()
    link.say_end(status, closes=launched.stopped)
    return status


# the dashboard pane's start: the environment watch runs in, from the file it names (removed at once), then the
# dashboard's command in it
PANE_ENV = (
    "import json, os, sys; f = sys.argv[1]; env = json.load(open(f)); os.unlink(f); "
    "os.execve(sys.argv[2], sys.argv[2:], env)"
)


def _environment_file() -> str:
    """This process's environment in a new file only its user can read (JSON; values as Python holds them)."""
    import json

    fd, name = tempfile.mkstemp(prefix="inspector-watch-env-", suffix=".json")  # (mode 0600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(os.environ), f)
    return name


def split_dashboard(
    args: argparse.Namespace, port: int, what: str, openai_what: str | None, link: str | None = None
) -> list[str]:
    """The dashboard process of ``--split``, on the command's port: `inspector proxy` in front of the upstream(s),
    or with ``--serve`` `inspector serve --tui` (the fake server behind its own recording proxy). ``link``: the
    socket of watch's link to its tmux pane (``--watch-link``: sessions/watchlink.py)."""
    inspector = [sys.executable, "-m", "inspector"]
    if args.serve:
        source = ["--scenario", args.serve]
        if Path(args.serve).is_file() and not args.serve.endswith((".yaml", ".yml")):
            source = ["--recording", args.serve]
        speed = "max" if args.speed is None or math.isinf(args.speed) else repr(float(args.speed))
        out = [*inspector, "serve", "--tui", "--port", str(port), *source, "--speed", speed]
        for fault in args.fault:
            out += ["--fault", fault]
    else:
        out = [*inspector, "proxy", "--listen", f"127.0.0.1:{port}", "--upstream", what]
        if openai_what:
            out += ["--openai-upstream", openai_what]
        if getattr(args, "otel", False):  # the dashboard's proxy exports the traces
            out += ["--otel", "--otel-content"] if args.otel_content else ["--otel"]
    if args.record:
        out += ["--record", args.record]
    if link:
        out += ["--watch-link", link]
    return out


def _wait_listening(port: int, timeout: float, alive: Any = None) -> bool:
    """Whether 127.0.0.1:port accepts a connection within ``timeout`` seconds (polled; False at once when
    ``alive()`` says the process that should listen is gone)."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        if alive is not None and not alive():
            return False
        time.sleep(0.1)  # nothing to wait on but another process's socket
    return False


def _split_web(launched: Launched[WatchSession], dashboard: list[str], port: int, link: PaneLink) -> int:
    """Outside tmux: the dashboard (`inspector proxy` on the command's port) is served to a browser by textual-serve
    on 127.0.0.1 (as `inspector web` serves `inspector run`); its URL goes to stderr. The command starts once a
    browser opened the dashboard (it connected to watch's link, and its proxy is listening: before, the command's
    requests would be refused). The dashboard is linked to watch as the tmux pane is (:func:`_run_linked`): closed
    while the command runs (q, its tab closed or reloaded), the command is stopped as a second Ctrl-C stops it.
    When the command ends, its session ends (finished), and the web server and its dashboards are stopped (asked,
    then killed), none left running. watch gone (killed), the server ends too: its stdin, a pipe only watch holds,
    ends."""
    import importlib.util
    import signal
    import subprocess

    from inspector.net.server import bind_socket

    if importlib.util.find_spec("textual_serve") is None:  # (inspector.tui.web imports it, in the server process)
        _err("--split outside tmux needs textual-serve (pip install textual-serve), or run in tmux")
        return EXIT_USAGE
    try:
        probe = bind_socket("127.0.0.1", 0)
    except OSError as e:
        _err(f"cannot listen on 127.0.0.1: {e.strerror or e}")
        return EXIT_USAGE
    web_port = probe.getsockname()[1]
    probe.close()  # free again for the web server (it binds it in a moment)
    # the server's output: in a file without a name (nothing left behind, however watch ends), said if it fails
    log = tempfile.TemporaryFile(prefix="inspector-watch-web-", suffix=".log")
    server = subprocess.Popen(
        [sys.executable, "-m", "inspector.tui.web", "--port", str(web_port), "--until-stdin-ends", "--", *dashboard],
        stdin=subprocess.PIPE,  # (never written: its end, when watch is gone however it went, ends the server)
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the dashboards it starts are stopped with it
    )
    url = f"http://127.0.0.1:{web_port}"

    def serving() -> bool:
        return server.poll() is None

    try:
        if not _wait_listening(web_port, SPLIT_START, serving):
            _err(f"the dashboard's web server did not start{_last_line(log)}")
            return EXIT_USAGE
        _err(f"the dashboard is at {url} (open it in a browser: the command starts then)")
        if not _accept(link, SPLIT_BROWSER, serving):
            _err(f"no browser opened {url} within {SPLIT_BROWSER:g} s: the command was not started")
            return EXIT_USAGE
        if not _wait_listening(port, SPLIT_START, serving):
            _err(f"the dashboard at {url} did not start listening: the command was not started")
            return EXIT_USAGE
        status = _run_linked(launched, link)
        if launched.process is not None:
            _err(f"the command ended; stopping the dashboard at {url}")
        return status
    except KeyboardInterrupt:
        return 130
    finally:
        _stop_group(server, signal.SIGTERM)
        if server.stdin is not None:
            server.stdin.close()
        log.close()


def _last_line(log: IO[bytes]) -> str:
    """``": LINE"``, the last line a process wrote to ``log`` (its error, most often), or "" when it wrote none."""
    size = os.fstat(log.fileno()).st_size
    tail = os.pread(log.fileno(), 4096, max(0, size - 4096))  # (pread: the offset the process writes at is shared)
    lines = [x.strip() for x in tail.decode("utf-8", "replace").splitlines() if x.strip()]
    return f": {lines[-1]}" if lines else ""


def _accept(link: PaneLink, timeout: float, alive: Callable[[], bool]) -> bool:
    """Whether the dashboard connected to watch's link within ``timeout`` seconds (False at once when ``alive()``
    says the process that starts it is gone)."""
    import time

    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if link.accept(min(left, 0.5)):
            return True
        if not alive():
            return False
    return False


def _stop_group(proc: Any, sig: int) -> None:
    """Stop a process started in a session of its own and everything left in its group: ``sig``, then SIGKILL
    after ``SPLIT_STOP`` seconds (its dashboards end by themselves once their input is gone)."""
    import signal
    import time

    for s in (sig, signal.SIGKILL):
        try:
            os.killpg(proc.pid, s)
        except (ProcessLookupError, PermissionError):  # nobody left in the group
            proc.poll()
            return
        deadline = time.monotonic() + SPLIT_STOP
        while time.monotonic() < deadline:
            proc.poll()  # reap the server itself
            if not _group_alive(proc.pid):
                return
            time.sleep(0.1)  # other processes' exits: nothing of ours to wait on


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is left (signal 0: asks, sends nothing)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True

"""`inspector run` and `inspector replay` (and bare `inspector`): the agent loop on a scenario, the real API or a
recording, in the dashboard on a terminal, headless otherwise."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspector.cli.common import EXIT_CANCELLED, EXIT_FAIL, EXIT_OK, StopSignals
from inspector.cli.common import err as _err
from inspector.cli.common import interactive as _interactive
from inspector.core.errors import InspectorError, SourceError, UsageError
from inspector.core.pacing import parse_speed

if TYPE_CHECKING:
    from inspector.agent.loop import LoopResult
    from inspector.cli.headless import LineSink, ProgressPrinter
    from inspector.observe.observations import Observation, ObservationBus
    from inspector.sessions.sources import Session

    SessionFactory = Callable[..., Session]

# options that only make sense with the real API (--model): refused with --scenario instead of ignored
API_ONLY = ("provider", "api", "base_url", "workspace", "allow_write", "tools", "system", "max_tokens")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("run", help="run the agent loop on a scenario or the real API")
    src = r.add_mutually_exclusive_group()
    src.add_argument(
        "--scenario",
        help="a bundled scenario name (see `inspector scenarios`) or the path of a scenario file "
        "(default: parse_date, when --model is not given)",
    )
    src.add_argument(
        "--model",
        help="a model name: use the real API with ANTHROPIC_API_KEY (OPENAI_API_KEY with --provider openai) "
        "(default: none)",
    )
    r.add_argument("prompt", nargs="?", help="the user prompt (with --model; required then)")
    r.add_argument(
        "--provider",
        choices=("anthropic", "openai"),
        default=None,
        help="whose API and SDK (with --model): anthropic (Messages) or openai (default: anthropic)",
    )
    r.add_argument(
        "--api",
        choices=("chat", "responses"),
        default=None,
        help="with --provider openai: Chat Completions (chat) or Responses (default: chat)",
    )
    r.add_argument(
        "--base-url",
        help="API base URL, e.g. a relay or a compatible server (with --model; default: ANTHROPIC_BASE_URL, or "
        "OPENAI_BASE_URL with --provider openai, else the public API)",
    )
    r.add_argument(
        "--workspace", default=None, help="root folder of the built-in file tools (with --model; default: .)"
    )
    r.add_argument("--allow-write", action="store_true", help="enable the write_file tool (with --model; default: off)")
    r.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="load your own tool definitions, repeatable (with --model; default: none)",
    )
    r.add_argument("--system", help="system prompt (with --model; default: none)")
    r.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="max_tokens per request (with --model; default: 4096; with --provider openai: not sent)",
    )
    r.add_argument("--record", metavar="FILE", help="write a recording (JSON Lines) of every read (default: none)")
    r.add_argument(
        "--speed",
        type=parse_speed,
        default=None,
        help="pacing of a scenario: 1 real time, 0.5, 4, max (default: 1 in the dashboard, max headless)",
    )
    r.add_argument("--retries", type=int, default=2, help="retries of failures after the first byte (default: 2)")
    r.add_argument("--max-turns", type=int, default=20, help="stop after this many turns (default: 20)")
    r.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="seconds without a content event before an attempt fails (default: the scenario's, else 30)",
    )
    r.add_argument("--headless", action="store_true", help="no dashboard: progress lines, or --json (default: off)")
    r.add_argument(
        "--json", action="store_true", help="with --headless: one JSON object per observation (default: text lines)"
    )

    add_otel_arguments(r)
    r.set_defaults(func=cmd_run)


def add_otel_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS; "
        "needs the otel extra; default: off)",
    )
    p.add_argument(
        "--otel-content",
        action="store_true",
        help="with --otel: include messages, tool arguments and results in the spans (default: off)",
    )


def add_replay_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rp = sub.add_parser("replay", help="replay a recording through the same pipeline (tools not executed)")
    rp.add_argument("path", help="a recording (.jsonl), a plain SSE file or a HAR export")
    rp.add_argument(
        "--speed",
        type=parse_speed,
        default=None,
        help="1 real time, 0.5, 4, max (default: 1 in the dashboard, max headless)",
    )
    rp.add_argument("--headless", action="store_true", help="no dashboard: progress lines, or --json (default: off)")
    rp.add_argument(
        "--json", action="store_true", help="with --headless: one JSON object per observation (default: text lines)"
    )

    add_otel_arguments(rp)
    rp.set_defaults(func=cmd_run, prompt=None, model=None)


def run_recordings(record: str | None) -> Callable[[], str | None]:
    """The recording of each run of a session factory: the first run writes ``record``; each restart (the
    dashboard's ``r``) writes ``NAME-2.jsonl``, ``NAME-3.jsonl``... beside it, the first that does not exist yet,
    so that a restart never overwrites the run before it. None: no recording."""
    runs = 0

    def next_path() -> str | None:
        nonlocal runs
        runs += 1
        if record is None or runs == 1:
            return record
        path = Path(record)
        n = runs
        while True:
            candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
            if not candidate.exists():
                return str(candidate)
            n += 1

    return next_path


def _make_factory(args: argparse.Namespace, *, tui: bool) -> tuple[Callable[..., Session], dict[str, Any]]:
    """A session factory (called again on restart) and the source description."""
    from inspector.sessions import sources

    record_path = run_recordings(getattr(args, "record", None))

    if getattr(args, "command", None) == "replay":
        recording = sources.load_recording(args.path)
        speed = args.speed if args.speed is not None else (1.0 if tui else math.inf)

        def replay(**kw: Any) -> Session:
            return sources.replay_session(recording, speed=speed, label=args.path, **kw)

        return replay, {"type": "replay", "file": args.path}

    if getattr(args, "model", None):
        if not args.prompt:
            raise UsageError('--model needs a prompt: inspector run --model M "prompt"')
        user_tools: dict[str, Any] = {}
        if args.tools:
            from inspector.agent.toolbox.loader import ToolLoadError, load_tools

            for spec in args.tools:
                try:
                    user_tools.update(load_tools(spec))
                except ToolLoadError as e:
                    raise UsageError(str(e)) from None
        provider = args.provider or "anthropic"
        if args.api is not None and provider != "openai":
            raise UsageError("--api goes with --provider openai")
        if provider == "openai":
            sources.require_openai_key()  # fail before any UI starts
        else:
            sources.require_api_key()
        if args.base_url:  # a relay's key in --base-url (https://user:KEY@relay, ?api_key=): masked in every output
            from inspector.core.redaction import credential_values

            credential_values((), args.base_url)
        args.workspace = args.workspace if args.workspace is not None else "."
        if not Path(args.workspace).is_dir():
            raise SourceError(f"workspace {args.workspace!r} is not a directory")
        if provider == "openai":
            api_name = args.api or "chat"
            source: dict[str, Any] = {"type": "api", "provider": "openai", "api": api_name, "model": args.model}
        else:
            api_name = "chat"  # (not read for Anthropic's Messages API)
            args.max_tokens = args.max_tokens if args.max_tokens is not None else 4096
            source = {"type": "api", "model": args.model}

        def api(**kw: Any) -> Session:
            return sources.api_session(
                args.model,
                args.prompt,
                provider=provider,
                api=api_name,
                base_url=args.base_url,
                workspace=args.workspace,
                allow_write=args.allow_write,
                user_tools=user_tools,
                system=args.system,
                max_tokens=args.max_tokens,
                record=record_path(),
                retries=args.retries,
                max_turns=args.max_turns,
                idle_timeout=args.idle_timeout if args.idle_timeout is not None else 30.0,
                **kw,
            )

        return api, source

    from inspector.scenarios.bundled import DEFAULT_SCENARIO, SCENARIOS, get_scenario

    name = getattr(args, "scenario", None) or DEFAULT_SCENARIO
    if getattr(args, "prompt", None):
        raise UsageError("a prompt goes with --model; scenarios have their own")
    given = [f"--{o.replace('_', '-')}" for o in API_ONLY if getattr(args, o, None) not in (None, False, [])]
    if given:
        raise UsageError(
            f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'} with --model (the real API); a scenario brings "
            "its own tools, prompt and limits"
        )
    if name not in SCENARIOS:  # a scenario file (or an unknown name), checked before any UI starts
        try:
            get_scenario(name)
        except InspectorError as e:
            raise UsageError(str(e)) from None
    # (a bundled name is known to exist; its file, checked by the tests, is loaded with its session, after the first
    # frame: YAML and pydantic cost ~0.12 s of CPU)
    speed = args.speed if getattr(args, "speed", None) is not None else (1.0 if tui else math.inf)

    def scenario(**kw: Any) -> Session:
        return sources.scenario_session(
            name,
            speed=speed,
            record=record_path(),
            retries=getattr(args, "retries", 2),
            max_turns=getattr(args, "max_turns", 20),
            idle_timeout=getattr(args, "idle_timeout", None),
            **kw,
        )

    return scenario, {"type": "scenario", "name": name}


class _HeadlessStops(StopSignals):
    """SIGINT (Ctrl-C), SIGTERM (`timeout`, a CI runner, `kill`) and SIGHUP (the terminal closed) over the whole of a
    headless run (``with``), whenever they come:

    - while its session is made (its workspace copy made, its recording opened: the open of a FIFO waits for a
      reader): :class:`Stopped` is raised where the process was, the factory closes what it made (the first signal
      only: a second one does not cut that cleanup short);
    - once it is made (``session`` set), before its loop runs: noted, and the loop is not run (``main`` sees it): the
      session is closed, its recording ends saying nothing ran;
    - while its loop runs (``loop`` set): the loop is cancelled, on its event loop (``call_soon_threadsafe``: the
      handler runs between two bytecodes of whatever the main thread was doing); it ends `cancelled`, its recording
      complete;
    - once its run has returned (``ended``): too late to stop anything, ignored: the exit status is the run's.

    The first signal that stopped it is the exit status: 128 + N (``cli.main``). Killed where it was, or ended by the
    start-up handler of ``inspector.__main__`` (exit 130 at once), the run left its workspace copy in the temp dir and
    its recording with its header alone. A handler of the signal module, not the event loop's: the loop's are taken
    away when it closes (SIGINT back to KeyboardInterrupt, the others to their default action, before the run's
    cleanup). Nothing outside the main thread (no handler can be set there)."""

    def __init__(self) -> None:
        super().__init__()
        self.session: Session | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ended = False

    def _stop(self, signum: int, _frame: object) -> None:
        from inspector.cli.common import Stopped

        if self.ended:
            return
        self.signals.append(signum)
        session, loop = self.session, self.loop
        if session is None:
            if len(self.signals) == 1:
                raise Stopped(signum)
            return
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # (its loop closed meanwhile: the run has ended)
                loop.call_soon_threadsafe(session.controller.cancel)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        startup_sigint_done()  # (Ctrl-C is the command's: never the start-up handler's exit again)


def _not_run_line(signum: int) -> str:
    return f"stopped by {signal.Signals(signum).name} before the run started: nothing ran"


def run_headless(factory: SessionFactory, *, as_json: bool) -> int:
    from inspector.cli.common import Stopped
    from inspector.cli.headless import JsonPrinter, ProgressPrinter, stdout_sink

    stops = _HeadlessStops()
    with stops:
        try:
            # (no bytecode between the factory's return and this assignment checks for a signal: a stop raised in
            # the factory finds its own cleanup, one after it finds the session here)
            stops.session = session = factory()
        except Stopped as e:
            _err(_not_run_line(e.signum))
            raise
        sinks: list[LineSink] = []

        async def main() -> LoopResult | None:
            loop = asyncio.get_running_loop()
            # the reader of our output went away (e.g. `| head`): stop the loop rather than run on unwatched
            sink = stdout_sink(on_broken=lambda: loop.call_soon_threadsafe(session.controller.cancel))
            sinks.append(sink)
            printer = JsonPrinter(sink) if as_json else ProgressPrinter(sink)
            progress = printer if isinstance(printer, ProgressPrinter) else None
            session.bus.subscribe(turn_costs(progress, sink, session))  # first: a turn's cost before the loop's end
            session.bus.subscribe(printer)
            try:
                stops.loop = loop  # from here a stop cancels the loop
                if stops.signals:  # stopped once made: it does not run (closed below: its recording says nothing ran)
                    return None
                ran = await session.run()
                stops.ended = True
                return ran
            finally:
                stops.loop = None
                sink.close()

        try:
            result = asyncio.run(main())
        finally:
            session.close()  # (closed by its run; here when it never ran: stopped as it started)
        for err in session.bus.errors:
            _err(err)
        recorder = getattr(session, "recorder", None)
        if recorder is not None:
            recorder.close()  # (already closed by the session; a failure to close is noted, never raised)
            if recorder.error:
                _err(f"warning: {recorder.error}")
    if result is None:
        _err(_not_run_line(stops.signals[0]))
        raise Stopped(stops.signals[0])  # (cli.main: exit 128 + N, as a shell reports a process the signal killed)
    if result.status == "cancelled":  # (a stop as the loop ended stopped nothing: its own status)
        stops.raise_if_stopped()
    if sinks and sinks[0].broken:  # stdout was closed (`| head`): a quiet end, exit 0, as every command (cli.main)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return {"finished": EXIT_OK, "error": EXIT_FAIL, "cancelled": EXIT_CANCELLED}[result.status]


def turn_costs(printer: ProgressPrinter | None, sink: LineSink, session: Any = None) -> Callable[[Observation], None]:
    """Each turn's usage, cost and cache verdict, live (priced once per attempt end): a progress line on ``printer``,
    or (None: ``--json``) a ``turn_cost`` JSON line on ``sink``. A replay's ``session``: the time between turns is
    the recorded one (its TTL verdict), not the replay's."""
    from inspector.record.accounting import LiveAccounting, format_session_cost, format_turn_cost

    recorded = getattr(session, "recorded_request_times", None)
    times = recorded() if recorded is not None else None

    def said(d: dict[str, Any]) -> None:
        if printer is None:
            from inspector.core import exactjson

            sink.write(exactjson.dumps(d) + b"\n")
        elif d["type"] == "session_cost":
            first, *more = format_session_cost(d).split("\n")  # (each conversation's on a line of its own)
            printer.p(f"{d['t']:7.3f}s {first}", d["t"])
            for line in more:
                printer.p(line, d["t"])
        else:
            tag = printer.where.get(d["turn"] - 1) if len(printer.conversations) > 1 else None
            where = f" [{tag[0]}]" if tag else ""
            printer.p(f"{d['t']:7.3f}s{where}   {format_turn_cost(d)}", d["t"])

    return LiveAccounting(said, said, request_times=times)


def startup_sigint_done() -> None:
    """Ctrl-C is the command's from here: the start-up handler of `inspector.__main__` (exit 130 at once) gives way to
    the usual KeyboardInterrupt."""
    if getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "interrupted_while_starting":
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_tui(factory: SessionFactory, source: dict[str, Any], *, replay: bool = False) -> int:
    from inspector.cli.common import DashboardStops
    from inspector.tui.app import run_dashboard

    startup_sigint_done()
    sessions: list[Session] = []  # each run's (a restart makes one)

    def threaded(**kw: Any) -> Session:
        # the loop and its HTTP on a thread of their own: a slow frame cannot delay a read or its timestamp
        session = factory(**kw)
        sessions.append(session)
        if hasattr(session, "threaded"):
            session.threaded = True
        return session

    # SIGTERM (kill, a CI runner's timeout), SIGHUP (the terminal closed), SIGINT (kill -INT: the dashboard's Ctrl-C is
    # a key): the dashboard quits as on `q`, its session cancelled, and closed below, then exit 128 + N. (They killed
    # it where it was: its scenario's workspace copy stayed in the temp dir, its recording without its end.)
    stops = DashboardStops()
    with stops:
        try:
            # (ignored below) tui.app.SessionLike / ControllerLike declare bus, controller and state settable
            # attributes; Session's are read-only properties (the dashboard only reads them): the Protocols are to
            # say @property (tui)
            code = run_dashboard(threaded, source=source, replay=replay, made=stops.made)
        finally:
            # a session's loop runs on a daemon thread, and is closed once it has wound down, on the dashboard's
            # event loop, which is gone by then: each is closed here before the process exits (its recording's end
            # lines written, its workspace copy removed), also one made as the dashboard quit, which never ran
            for session in sessions:
                session.wait_closed()
    stops.raise_if_stopped()  # (cli.main: exit 128 + N, as a shell reports a process the signal killed)
    return code


def _with_otel(factory: SessionFactory, args: argparse.Namespace, source: dict[str, Any]) -> SessionFactory:
    """Each session the factory makes (a restart makes a new one) exports its traces; the exporter is flushed
    (bounded) and shut down with the session."""
    try:
        from inspector.record import otel
    except ImportError:
        raise UsageError("--otel needs the otel extra: pip install 'stream-inspector[otel]'") from None

    def make(**kw: Any) -> Session:
        session = factory(**kw)
        try:
            provider = otel.make_provider()
            name = str(source.get("name") or source.get("model") or source.get("file") or "session")
            session.cleanups.append(
                otel.attach(session.bus, content=args.otel_content, conversation=name, provider=provider)
            )
        except ImportError:
            session.close()
            raise UsageError("--otel needs the otel extra: pip install 'stream-inspector[otel]'") from None
        except BaseException:  # (a stop as it is made: the session is closed, not left half made)
            session.close()
            raise
        return session

    return make


def otel_for_conversations(
    bus: ObservationBus, args: argparse.Namespace, secrets: Callable[[], list[str]] | None = None
) -> Callable[[], None]:
    """``--otel`` on a proxy's bus (``proxy``, ``watch``): one parent span per conversation (ConversationAssigned).
    Returns the close function (ends open spans, flushes, bounded); UsageError without the otel extra."""
    try:
        from inspector.record import otel

        provider = otel.make_provider()
    except ImportError:
        raise UsageError("--otel needs the otel extra: pip install 'stream-inspector[otel]'") from None
    return otel.attach_conversations(bus, content=args.otel_content, provider=provider, secrets=secrets)


def cmd_run(args: argparse.Namespace) -> int:
    from inspector.cli.common import stops_raise

    # SIGTERM / SIGHUP as the run starts or ends (its workspace copy made, its recording opened): an exception, so
    # that they are closed on the way out; while the loop or the dashboard runs, theirs end it in order instead
    with stops_raise():
        return _cmd_run(args)


def _cmd_run(args: argparse.Namespace) -> int:
    tui = not args.headless and _interactive()
    if args.json and not args.headless:
        raise UsageError("--json goes with --headless")
    factory, source = _make_factory(args, tui=tui)
    if getattr(args, "otel_content", False) and not getattr(args, "otel", False):
        raise UsageError("--otel-content goes with --otel")
    if getattr(args, "otel", False):
        factory = _with_otel(factory, args, source)
    if tui:
        return run_tui(factory, source, replay=args.command == "replay")
    return run_headless(factory, as_json=args.json)

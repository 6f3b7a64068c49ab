"""The `inspector` command.

    inspector                       the dashboard on the built-in parse_date scenario (offline, no key)
    inspector run --scenario NAME   a built-in scenario (dashboard on a terminal, --headless for lines/JSON)
    inspector run --model M PROMPT  the real API (ANTHROPIC_API_KEY; --base-url for relays)
    inspector replay FILE           a recording (or a plain SSE file), with time travel in the dashboard
    inspector dump PATH|-           decode and assemble a recording or SSE text, headless
    inspector scenarios             list the built-in scenarios
    inspector web                   serve the dashboard to a browser on 127.0.0.1
    inspector serve                 an Anthropic-compatible fake API (scenarios + faults) for any client
    inspector proxy                 a recording pass-through proxy, to watch another harness
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import signal
import sys
from pathlib import Path
from typing import Any, Callable

import orjson

from inspector import __version__
from inspector.pacing import parse_speed

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class UsageError(Exception):
    pass


# Commands whose modules are heavy (uvicorn, starlette): imported only when that command is asked for.
LAZY_COMMANDS = {
    "serve": ("inspector.serve", "serve the scenarios over HTTP: an Anthropic-compatible fake API with faults"),
    "proxy": ("inspector.proxy", "a recording pass-through proxy in front of the API, to watch another harness"),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as ONE line on stderr (exit 2), not argparse's usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog.split()[0]} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    p = _Parser(
        prog="inspector",
        description="Stream Inspector: see what an LLM agent harness really receives and does.",
    )
    p.add_argument("--version", action="version", version=f"inspector {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    d = sub.add_parser("dump", help="decode and assemble a recording or SSE text file, headless")
    d.add_argument("path", help="a recording (.jsonl) or plain SSE text (what curl -N prints); - for stdin")
    d.add_argument("--json", action="store_true", help="one JSON object on stdout")
    d.add_argument("--events", action="store_true", help="with --json: one JSON object per decoded SSE event")
    d.add_argument("--timing", action="store_true",
                   help="timing analysis per turn: headers, first byte, first token, gaps, buffering verdict")

    r = sub.add_parser("run", help="run the agent loop on a scenario or the real API")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--scenario", help="a built-in scenario (see `inspector scenarios`)")
    src.add_argument("--model", help="a model name: use the real API (ANTHROPIC_API_KEY)")
    r.add_argument("prompt", nargs="?", help="the user prompt (with --model)")
    r.add_argument("--base-url", help="API base URL (a relay); default ANTHROPIC_BASE_URL or the public API")
    r.add_argument("--workspace", default=".", help="root folder for the built-in file tools (with --model)")
    r.add_argument("--allow-write", action="store_true", help="enable the write_file tool")
    r.add_argument("--tools", action="append", default=[], metavar="MODULE:ATTR",
                   help="load your own tool definitions (repeatable)")
    r.add_argument("--system", help="system prompt (with --model)")
    r.add_argument("--max-tokens", type=int, default=4096)
    r.add_argument("--record", metavar="FILE", help="write a recording (JSON Lines) of every read")
    r.add_argument("--speed", type=parse_speed, default=None, help="scripted pacing: 1 real time, 0.5, 4, max")
    r.add_argument("--retries", type=int, default=2, help="retries of failures after the first byte (default 2)")
    r.add_argument("--max-turns", type=int, default=20)
    r.add_argument("--idle-timeout", type=float, default=None, help="seconds without content (default 30)")
    r.add_argument("--headless", action="store_true", help="no dashboard: progress lines (or --json)")
    r.add_argument("--json", action="store_true", help="with --headless: one JSON object per observation")

    rp = sub.add_parser("replay", help="replay a recording through the same pipeline (tools not executed)")
    rp.add_argument("path")
    rp.add_argument("--speed", type=parse_speed, default=None, help="1 real time ... max (default: max headless, 1 in UI)")
    rp.add_argument("--headless", action="store_true")
    rp.add_argument("--json", action="store_true")

    sub.add_parser("scenarios", help="list the built-in scenarios")

    w = sub.add_parser("web", help="serve the dashboard to a browser (textual-serve) on 127.0.0.1")
    w.add_argument("--host", default="127.0.0.1")
    w.add_argument("--port", type=int, default=8000)
    w.add_argument("--scenario", default=None)

    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    wanted = words[0] if words else None
    for name, (module, help_text) in LAZY_COMMANDS.items():
        if wanted == name:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return p


def _err(msg: str) -> None:
    sys.stderr.write(f"inspector: {msg}\n")
    sys.stderr.flush()


# -------------------------------------------------------------------------------------------------------- dump
def cmd_dump(args: argparse.Namespace) -> int:
    from inspector.har import load_any
    from inspector.headless import dump_events, dump_ok, dump_turns, format_turns

    try:
        if args.path == "-":
            recording = load_any(sys.stdin.buffer.read())
        else:
            recording = load_any(Path(args.path))
    except OSError as e:
        _err(f"cannot read {args.path}: {e.strerror or e}")
        return EXIT_USAGE
    except ValueError as e:
        _err(f"{args.path}: {e}")
        return EXIT_USAGE
    if args.events:
        if not args.json:
            _err("--events needs --json")
            return EXIT_USAGE
        turns = dump_events(recording, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return EXIT_OK if dump_ok(turns) else EXIT_FAIL
    turns = dump_turns(recording)
    if args.json:
        out: dict = {"turns": turns}
        if args.timing:
            from inspector.timing import timing_json

            out["timing"] = timing_json(recording)
        sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_NON_STR_KEYS) + b"\n")
        sys.stdout.buffer.flush()
    else:
        for w in recording.warnings:
            print(f"warning: {w}")
        print(format_turns(turns) if turns else "no turns in this file")
        if args.timing:
            from inspector.timing import format_timing

            print()
            print(format_timing(recording))
    return EXIT_OK if dump_ok(turns) else EXIT_FAIL


# -------------------------------------------------------------------------------------------------------- run
def _make_factory(args: argparse.Namespace, *, tui: bool) -> tuple[Callable[..., Any], dict]:
    """A session factory (called again on restart) and the source description."""
    from inspector import sources

    if getattr(args, "command", None) == "replay":
        recording = sources.load_recording(args.path)
        speed = args.speed if args.speed is not None else (1.0 if tui else math.inf)

        def replay(**kw: Any):
            return sources.replay_session(recording, speed=speed, label=args.path, **kw)

        return replay, {"type": "replay", "file": args.path}

    if getattr(args, "model", None):
        if not args.prompt:
            raise UsageError("--model needs a prompt: inspector run --model M \"prompt\"")
        user_tools: dict = {}
        if args.tools:
            from inspector.toolbox.loader import ToolLoadError, load_tools

            for spec in args.tools:
                try:
                    user_tools.update(load_tools(spec))
                except ToolLoadError as e:
                    raise UsageError(str(e)) from None
        sources.require_api_key()  # fail before any UI starts
        if not Path(args.workspace).is_dir():
            raise sources.SourceError(f"workspace {args.workspace!r} is not a directory")

        def api(**kw: Any):
            return sources.api_session(
                args.model, args.prompt, base_url=args.base_url, workspace=args.workspace,
                allow_write=args.allow_write, user_tools=user_tools, system=args.system,
                max_tokens=args.max_tokens, record=args.record, retries=args.retries, max_turns=args.max_turns,
                idle_timeout=args.idle_timeout if args.idle_timeout is not None else 30.0, **kw,
            )

        return api, {"type": "api", "model": args.model}

    name = getattr(args, "scenario", None) or sources.DEFAULT_SCENARIO
    if getattr(args, "prompt", None):
        raise UsageError("a prompt goes with --model; scenarios have their own")
    from inspector.scenarios.bundled import SCENARIOS

    if name not in SCENARIOS:  # before any UI starts
        raise UsageError(f"unknown scenario {name!r}; `inspector scenarios` lists them: {', '.join(SCENARIOS)}")
    speed = args.speed if getattr(args, "speed", None) is not None else (1.0 if tui else math.inf)

    def scenario(**kw: Any):
        return sources.scenario_session(
            name, speed=speed, record=getattr(args, "record", None), retries=getattr(args, "retries", 2),
            max_turns=getattr(args, "max_turns", 20), idle_timeout=getattr(args, "idle_timeout", None), **kw,
        )

    return scenario, {"type": "scenario", "name": name}


def run_headless(factory: Callable[..., Any], *, as_json: bool) -> int:
    from inspector.headless import JsonPrinter, ProgressPrinter, stdout_sink

    session = factory()

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        # the reader of our output went away (e.g. `| head`): stop the loop rather than run on unwatched
        sink = stdout_sink(on_broken=lambda: loop.call_soon_threadsafe(session.controller.cancel))
        session.bus.subscribe(JsonPrinter(sink) if as_json else ProgressPrinter(sink))
        try:
            loop.add_signal_handler(signal.SIGINT, session.controller.cancel)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            return await session.run()
        finally:
            sink.close()

    result = asyncio.run(main())
    for err in session.bus.errors:
        _err(err)
    return {"finished": EXIT_OK, "error": EXIT_FAIL, "cancelled": EXIT_CANCELLED}[result.status]


def run_tui(factory: Callable[..., Any], source: dict, *, replay: bool = False) -> int:
    from inspector.tui.app import run_dashboard

    return run_dashboard(factory, source=source, replay=replay)


def _interactive() -> bool:
    """A terminal, or a browser through textual-serve (`inspector web` sets TEXTUAL_DRIVER for the app)."""
    import os

    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))


def cmd_run(args: argparse.Namespace) -> int:
    tui = not args.headless and _interactive()
    if args.json and not args.headless:
        raise UsageError("--json goes with --headless")
    factory, source = _make_factory(args, tui=tui)
    if tui:
        return run_tui(factory, source, replay=args.command == "replay")
    return run_headless(factory, as_json=args.json)


def cmd_scenarios(args: argparse.Namespace) -> int:
    from inspector.scenarios.bundled import SCENARIOS

    width = max(len(n) for n in SCENARIOS)
    for name, sc in SCENARIOS.items():
        print(f"{name:<{width}}  {sc.description}")
    return EXIT_OK


def cmd_web(args: argparse.Namespace) -> int:
    from inspector.tui.web import serve_web

    print(f"serving the dashboard on http://{args.host}:{args.port}")
    serve_web(["--scenario", args.scenario] if args.scenario else [], host=args.host, port=args.port)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    from inspector.sources import SourceError

    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else EXIT_OK
    try:
        if args.command is None:
            args = parser.parse_args(["run", *([] if _interactive() else ["--headless"])])
            return cmd_run(args)
        if args.command == "dump":
            return cmd_dump(args)
        if args.command in ("run", "replay"):
            if args.command == "replay":
                args.prompt = None
                args.model = None
            return cmd_run(args)
        if args.command == "scenarios":
            return cmd_scenarios(args)
        if args.command == "web":
            return cmd_web(args)
        if args.command in LAZY_COMMANDS:
            return int(args.func(args))
    except (UsageError, SourceError) as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, like other command-line tools
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    parser.print_help()
    return EXIT_USAGE

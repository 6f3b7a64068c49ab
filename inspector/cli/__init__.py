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

Each command lives in its own module (inspector/cli/<command>.py) and is imported only when it is the one asked
for: `inspector --help` imports none of them, so no command pays for another's imports (the SDK, Textual, uvicorn).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from inspector import __version__
from inspector.cli.common import EXIT_CANCELLED, EXIT_OK, EXIT_USAGE, Stopped, err
from inspector.core.errors import InspectorError

# command -> (module, its add_parser function, one-line help)
COMMANDS = {
    "run": ("inspector.cli.run", "add_parser", "run the agent loop on a scenario or the real API"),
    "replay": (
        "inspector.cli.run",
        "add_replay_parser",
        "replay a recording through the same pipeline (tools not executed)",
    ),
    "dump": ("inspector.cli.dump", "add_parser", "decode and assemble a recording or SSE text file, headless"),
    "watch": ("inspector.cli.watch", "add_parser", "run an agent against an embedded proxy and watch it"),
    "export": ("inspector.cli.export", "add_parser", "write a self-contained HTML page of a recording"),
    "scenarios": ("inspector.cli.scenarios", "add_parser", "list the built-in scenarios"),
    "scenario": ("inspector.cli.scenario", "add_parser", "check, create or convert scenario files"),
    "web": ("inspector.cli.web", "add_parser", "serve the dashboard to a browser (textual-serve) on 127.0.0.1"),
    "serve": (
        "inspector.cli.serve",
        "add_parser",
        "serve the scenarios over HTTP: an Anthropic-compatible fake API with faults",
    ),
    "proxy": (
        "inspector.cli.proxy",
        "add_parser",
        "a recording pass-through proxy in front of the API, to watch another harness",
    ),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as ONE line on stderr (exit 2), not argparse's usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        import os

        from inspector.core.redaction import env_secrets, learn, mask_known

        learn(env_secrets(os.environ), pin=True)  # (the message can quote an argument: a key typed in the wrong place)
        self.exit(2, mask_known(f"{self.prog}: {message} (see {self.prog.split()[0]} --help)") + "\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` gets its full subparser (its module is imported)."""
    p = _Parser(
        prog="inspector", description="Stream Inspector: see what an LLM agent harness really receives and does."
    )
    p.add_argument("--version", action="version", version=f"inspector {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    wanted = words[0] if words else None
    for name, (module, fn, help_text) in COMMANDS.items():
        if wanted == name:
            getattr(importlib.import_module(module), fn)(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run a command. Everything it prints or logs goes through the output guard: the keys of the environment and
    every credential a request is seen to carry are masked in stdout, stderr, log records and tracebacks."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    if not words and any(a in ("-h", "--help", "--version") for a in (sys.argv[1:] if argv is None else argv)):
        return _main(argv)  # the top-level help: no secret to mask, and `inspector --help` stays fast
    import os

    from inspector.core.redaction import OutputGuard

    with OutputGuard(os.environ):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            return EXIT_USAGE if e.code not in (0, None) else EXIT_OK
        if args.command is None:
            from inspector.cli.common import interactive

            argv2 = ["run", *([] if interactive() else ["--headless"])]
            args = build_parser(argv2).parse_args(argv2)
        func = getattr(args, "func", None)
        if func is None:
            parser.print_help()
            return EXIT_USAGE
        return int(func(args))
    except InspectorError as e:
        err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except Stopped as e:  # (SIGTERM / SIGHUP in a command that cleans up on them: cli.common.stops_raise)
        return 128 + e.signum
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, like other command-line tools
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK

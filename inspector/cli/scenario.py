"""`inspector scenario ...`: scenario files (docs/scenario-format.md).

    inspector scenario check FILE...          every problem as file:line:column: message; exit 1 if any
    inspector scenario new NAME [--write]     a commented template (stdout, or NAME.yaml)
    inspector scenario from-recording REC     an editable scenario that replays a recording (stdout, or -o FILE)
    inspector scenario schema                 the JSON Schema of scenario files (docs/scenario.schema.json is it)

None of them imports the SDK or Textual.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inspector.cli.common import EXIT_FAIL, EXIT_OK
from inspector.core.errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "scenario",
        help="check, create or convert scenario files",
        description="Scenario files: check them, start one from a template, or make one from a recording.",
    )
    cmds = p.add_subparsers(dest="scenario_command", metavar="{check,new,from-recording,schema}")
    c = cmds.add_parser("check", help="check scenario files: each problem with file:line:column; exit 1 if any")
    c.add_argument("files", nargs="+", metavar="FILE")
    c.set_defaults(func=cmd_check)
    n = cmds.add_parser("new", help="print a commented scenario template (or write NAME.yaml with --write)")
    n.add_argument("name", metavar="NAME")
    n.add_argument(
        "--write",
        action="store_true",
        help="write NAME.yaml in the current directory, never overwriting (default: print to stdout)",
    )
    n.set_defaults(func=cmd_new)
    r = cmds.add_parser("from-recording", help="turn a recording (or HAR / SSE file) into an editable scenario file")
    r.add_argument("recording", metavar="REC")
    r.add_argument("-o", "--output", metavar="FILE", help="write the scenario here (default: stdout; never overwrites)")
    r.add_argument("--name", help="the scenario's name (default: from the recording)")
    r.set_defaults(func=cmd_from_recording)
    s = cmds.add_parser(
        "schema",
        help="print the JSON Schema of scenario files (made from the loader's declaration; "
        "docs/scenario.schema.json is this output)",
    )
    s.set_defaults(func=cmd_schema)
    p.set_defaults(func=lambda args: _usage(p))
    return p


def _usage(p: argparse.ArgumentParser) -> int:
    raise UsageError("inspector scenario: say check, new, from-recording or schema (see inspector scenario --help)")


def cmd_check(args: argparse.Namespace) -> int:
    from inspector.scenarios.fileformat import check_file

    failed = False
    for f in args.files:
        problems = check_file(f)
        for p in problems:
            print(p)
        if problems:
            failed = True
        else:
            print(f"{f}: ok")
    return EXIT_FAIL if failed else EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from inspector.scenarios.fileformat import json_schema_text

    sys.stdout.write(json_schema_text())
    return EXIT_OK


def _write_new(path: Path, text: str) -> None:
    try:
        with path.open("x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UsageError(f"{path} already exists; not overwriting it") from None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_new(args: argparse.Namespace) -> int:
    from inspector.scenarios.template import template, valid_name

    if not valid_name(args.name):
        raise UsageError(f"scenario name {args.name!r}: use letters, digits, '_', '-' or '.' (no extension)")
    text = template(args.name)
    if args.write:
        path = Path(f"{args.name}.yaml")
        _write_new(path, text)
        print(f"wrote {path}; check it with: inspector scenario check {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_from_recording(args: argparse.Namespace) -> int:
    from inspector.core.errors import RecordingError
    from inspector.record.har import load_any
    from inspector.scenarios.fileformat import dump_scenario
    from inspector.scenarios.fromrec import scenario_from_recording
    from inspector.scenarios.template import valid_name

    if args.name is not None and not valid_name(args.name):
        raise UsageError(f"scenario name {args.name!r}: use letters, digits, '_', '-' or '.' (no extension)")
    try:
        rec = load_any(args.recording)
    except FileNotFoundError:
        raise UsageError(f"no such file: {args.recording}") from None
    except OSError as e:  # (as dump says it: "Is a directory", not "[Errno 21] Is a directory: 'PATH'")
        raise UsageError(f"cannot read {args.recording}: {e.strerror or e}") from None
    except RecordingError as e:
        raise UsageError(f"{args.recording}: {e}") from None
    try:
        sc = scenario_from_recording(rec, name=args.name)
    except ValueError as e:
        raise UsageError(f"{args.recording}: {e}") from None
    text = dump_scenario(
        sc,
        header=f"Made by `inspector scenario from-recording {Path(args.recording).name}`: edit freely.\n"
        "Format: docs/scenario-format.md (check with `inspector scenario check FILE`).",
    )
    if args.output:
        from inspector.core.redaction import mask_known

        _write_new(Path(args.output), mask_known(text))  # (stdout masks what the process knows: the file too)
        print(f"wrote {args.output} ({len(sc.turns)} turns)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    made = sc.expected.get("from_recording") or {}
    if made.get("other_conversations"):
        n = made["other_conversations"]
        print(
            f"inspector scenario: {args.recording} holds {n + 1} conversations: the scenario is the first one's "
            f"({made['conversation']}); " + ("the other is left out" if n == 1 else f"the {n} others are left out"),
            file=sys.stderr,
        )
    return EXIT_OK

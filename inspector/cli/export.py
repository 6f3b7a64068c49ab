"""`inspector export REC -o session.html`: a self-contained HTML page of a session (or of a bundled scenario, run
headless first), offline, searchable, with time travel. See inspector/record/htmlexport.py."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import tempfile
from pathlib import Path

from inspector.cli.common import EXIT_OK, EXIT_USAGE, err, stops_raise


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="write a self-contained HTML page of a recording (or of a scenario run)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("path", nargs="?", help="a recording (.jsonl), a plain SSE file or a HAR export")
    src.add_argument(
        "--scenario",
        help="run this scenario (bundled name or file) headless, then export it (default: none: export PATH)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="the HTML file to write (default: the input's name with .html, in its folder; for --scenario, NAME.html here)",
    )
    p.add_argument(
        "--max-size",
        type=float,
        default=MAX_EXPORT_MIB,
        metavar="MiB",
        help=f"refuse a session of more stream bytes than this (default: {MAX_EXPORT_MIB:g} MiB): the page inlines every "
        "byte, and holds several times that in the browser",
    )
    p.set_defaults(func=cmd)


# The most stream bytes (every read of every attempt) a page inlines by default: the page is about 6x that, and the
# export holds about 35x that in memory while it writes it (20 MiB of stream made a 120 MB page, 694 MB at peak)
MAX_EXPORT_MIB = 32.0


def _record_scenario(name: str, path: Path) -> None:
    from inspector.sessions import sources

    session = sources.scenario_session(name, speed=math.inf, record=path)
    try:
        asyncio.run(session.run())
    finally:
        session.close()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def cmd(args: argparse.Namespace) -> int:
    if not args.max_size > 0:
        err("--max-size must be a positive number of MiB")
        return EXIT_USAGE
    # a scenario is run into a recording in a temporary directory, removed however the export ends: SIGTERM and
    # SIGHUP too (killed where it was, it was left in /tmp)
    with stops_raise(), contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="inspector-export-")) if args.scenario else ""
        return _export(args, tmp)


def _export(args: argparse.Namespace, tmp: str) -> int:
    from inspector.core.errors import InspectorError
    from inspector.record.har import load_any
    from inspector.record.htmlexport import export

    if args.scenario:
        source = Path(tmp) / "session.jsonl"
        try:
            _record_scenario(args.scenario, source)
        except InspectorError as e:
            err(str(e))
            return EXIT_USAGE
        default_out = Path(f"{Path(args.scenario).stem}.html")
        title = f"scenario {args.scenario}"
    else:
        source = Path(args.path)
        default_out = source.with_suffix(".html")
        title = source.name
    out = Path(args.output) if args.output else default_out
    if _same_file(out, source) or (args.scenario and _same_file(out, Path(args.scenario))):
        err(f"{out} is the input: not overwritten (say another file with -o)")
        return EXIT_USAGE
    try:
        recording = load_any(source)
    except OSError as e:
        err(f"cannot read {source}: {e.strerror or e}")
        return EXIT_USAGE
    except ValueError as e:
        err(f"{source}: {e}")
        return EXIT_USAGE
    total = sum(len(r.data) for a in recording.attempts() for r in a.reads)
    if total > args.max_size * 1024 * 1024:
        err(
            f"{source}: {total / 2**20:,.1f} MiB of stream bytes, more than an export page holds "
            f"({args.max_size:g} MiB, --max-size): not written"
        )
        return EXIT_USAGE
    try:
        size = export(recording, out, title=title)
    except OSError as e:
        err(f"cannot write {out}: {e.strerror or e}")
        return EXIT_USAGE
    print(f"wrote {out} ({size:,} bytes, {sum(len(a.reads) for a in recording.attempts()):,} reads)")
    return EXIT_OK

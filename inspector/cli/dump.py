"""`inspector dump`: decode and assemble a recording, a plain SSE file or a HAR, headless."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from inspector.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from inspector.cli.common import err as _err
from inspector.core import exactjson


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser("dump", help="decode and assemble a recording or SSE text file, headless")
    d.add_argument("path", help="a recording (.jsonl) or plain SSE text (what curl -N prints); - for stdin")
    d.add_argument("--json", action="store_true", help="one JSON object on stdout (default: a text summary)")
    d.add_argument(
        "--events", action="store_true", help="with --json: one JSON object per decoded SSE event (default: off)"
    )
    d.add_argument(
        "--timing",
        action="store_true",
        help="timing analysis per turn: headers, first byte, first token, gaps, buffering verdict (default: off)",
    )

    d.add_argument(
        "--max-size",
        type=float,
        default=64,
        metavar="MIB",
        help="largest line or SSE event kept, in MiB (default 64): a bigger one is a warning/diagnostic",
    )
    d.set_defaults(func=cmd)


def cmd(args: argparse.Namespace) -> int:
    from inspector.record.dump import Dumper, dump_ok, event_line, format_turns
    from inspector.record.har import load_any

    if args.events and not args.json:
        _err("--events needs --json")
        return EXIT_USAGE
    if not args.max_size > 0:
        _err("--max-size must be a positive number of MiB")
        return EXIT_USAGE
    max_size = max(1, int(args.max_size * 1024 * 1024))
    out_bytes = sys.stdout.buffer

    def write_event(e: Any) -> None:
        out_bytes.write(event_line(e, dumper.current))

    # decoded as read: the reads are not kept (memory does not grow with the input), except for --timing
    dumper = Dumper(on_event=write_event if args.events else None, max_event=max_size)
    source: Any = sys.stdin.buffer if args.path == "-" else Path(args.path)
    try:
        recording = load_any(source, max_line=max_size, on_read=dumper.feed, keep_reads=bool(args.timing))
    except BrokenPipeError:
        raise  # our stdout was closed (`| head`), not the file: the CLI ends quietly (cli.main)
    except OSError as e:
        _err(f"cannot read {args.path}: {e.strerror or e}")
        return EXIT_USAGE
    except ValueError as e:
        _err(f"{args.path}: {e}")
        return EXIT_USAGE
    turns = dumper.turns(recording)
    from inspector.record.dump import conversations_of, grouped_text, turn_name

    # a proxy recording of many conversations (None: one): each turn entry names its conversation, so dump_ok
    # judges each on its own; --json lists them; the text groups the turns under each (format_turns is that, then)
    conversations = conversations_of(recording, turns)
    # grouped when there are conversations to tell apart, or side requests to list (a harness's non-streamed calls)
    grouped = conversations is not None and (
        sum(c["id"] is not None for c in conversations) > 1 or any(c["side_requests"] for c in conversations)
    )
    if grouped:
        assert conversations is not None
        format_turns = grouped_text(conversations)  # type: ignore[assignment]  # (the same signature)
    totals: dict[str, Any] | None = None
    if (args.json and not args.events) or args.timing:
        from inspector.record.accounting import account, requests_of

        totals = account(turns, requests_of(recording.turns))
    timing: dict[str, Any] | None = None
    if args.timing:
        from inspector.record.timing import timing_json

        timing = timing_json(recording)
    ok = dump_ok(turns) and not (timing or {}).get("diagnostics")  # a buffered stream (timing.buffered) fails
    if args.events:
        out_bytes.flush()
        return EXIT_OK if ok else EXIT_FAIL
    if args.json:
        import orjson

        out: dict[str, Any] = {"turns": turns}
        if conversations is not None:
            out["conversations"] = conversations
        if totals is not None:
            out["total"] = totals
        if recording.warnings:
            out["warnings"] = recording.warnings
        if not turns and _nothing_ran(recording):
            out["nothing_ran"] = True
        if timing is not None:
            out["timing"] = timing
        out_bytes.write(exactjson.dumps(out, option=orjson.OPT_NON_STR_KEYS) + b"\n")
        out_bytes.flush()
    else:  # text for a terminal: what the stream holds is escaped (see fmt.terminal); --json stays exact
        from inspector.core.fmt import terminal

        for w in recording.warnings:
            print(terminal(f"warning: {w}"))
        if turns or grouped:
            print(terminal(format_turns(turns)))
        elif _nothing_ran(recording):  # (a session stopped before it was made: recorder.write_nothing_ran)
            print("nothing ran: the session was stopped before it started")
        else:
            print("no turns in this file")
        if timing is not None:
            from inspector.record.accounting import format_accounting
            from inspector.record.timing import format_timing_json

            # each turn named as the grouped text above names it (the session's number alone, `turn 6`, read as
            # a turn of a conversation that has two)
            names = {t["turn"]: turn_name(t) for t in turns} if grouped else None
            print()
            print(terminal(format_timing_json(timing, names)))
            if totals is not None:
                print()
                print(terminal(format_accounting(turns, totals, names)))
    return EXIT_OK if ok else EXIT_FAIL


def _nothing_ran(recording: Any) -> bool:
    """(recorder.nothing_ran, imported only for a recording without turns: the recorder's imports are ~80 ms of
    `dump`'s start, tools/bench_startup.py)"""
    from inspector.record.recorder import nothing_ran

    return nothing_ran(recording)

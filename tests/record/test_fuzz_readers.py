"""Mutation fuzzing of every reader: valid recordings, plain SSE files and HAR files are damaged (field types
flipped, values swapped, lines cut, dropped or repeated, garbage bytes inserted) and `load_any`, `dump_turns`,
`format_turns`, the timing analysis and the `dump` CLI in every mode must never raise: exit 0/1/2 with text.

Examples: 120 recordings + 80 plain SSE + 80 HAR = 280 cases, each through the library and 3 CLI modes."""

from __future__ import annotations

import contextlib
import io
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.cli import main
from inspector.core import exactjson
from inspector.core.errors import InspectorError
from inspector.core.pacing import Pacer
from inspector.record.dump import dump_ok, dump_turns, format_turns
from inspector.record.har import load_any
from inspector.record.recording import RecordingWriter
from inspector.record.replay import recorded_tools
from inspector.record.timing import format_timing, timing_json
from inspector.sessions.sources import replay_session
from inspector.testing.hyp import examples
from inspector.testing.streamgen import generate, sse, text_turn, tool_turn

JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just({"type": "message", "content": 1}),
    st.just([{"role": 3}]),
)


def base_recording() -> bytes:
    out = io.BytesIO()
    with RecordingWriter(out, source={"type": "scenario", "name": "fuzz"}) as w:
        body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "stream": True}
        w.request(0, 0, 0.0, "POST", "http://t/v1/messages", {"anthropic-version": "x"}, body)
        w.response(0, 0, 0.1, 429, {"content-type": "application/json", "retry-after": "1"})
        w.read(0, 0, 0.2, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}')
        w.end(0, 0, 0.3, "failed", "http 429")
        w.request(0, 1, 1.0, "POST", "http://t/v1/messages", {}, body)
        w.response(0, 1, 0.1, 200, {"content-type": "text/event-stream"})
        data = sse(*tool_turn(['{"path": "x"}']))
        w.read(0, 1, 0.2, data[:150])
        w.read(0, 1, 0.25, data[150:])
        w.end(0, 1, 0.4, "complete")
        w.observation({"type": "tool_state", "id": "toolu_1", "name": "read", "state": "queued", "safe": False})
        w.observation(
            {
                "type": "tool_state",
                "id": "toolu_1",
                "name": "read",
                "state": "succeeded",
                "times": {"running": 1.0, "succeeded": 1.5},
            }
        )
        w.request(1, 0, 2.0, "POST", "http://t/v1/messages", {}, body)
        w.response(1, 0, 0.1, 200, {"content-type": "application/json"})
        w.read(
            1,
            0,
            0.2,
            orjson.dumps(
                {
                    "type": "message",
                    "id": "m",
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 1},
                }
            ),
        )
        w.end(1, 0, 0.3, "complete")
        w.observation({"type": "loop_finished", "messages": [{"role": "user", "content": "hi"}]})
    return out.getvalue()


def base_har() -> bytes:
    def entry(text: str, status: int = 200, ctype: str = "text/event-stream") -> dict[str, Any]:
        return {
            "startedDateTime": "2025-01-01T00:00:00.000Z",
            "time": 12.5,
            "request": {
                "method": "POST",
                "url": "https://x/v1/messages",
                "headers": [{"name": "a", "value": "b"}],
                "postData": {"mimeType": "application/json", "text": '{"model": "m"}'},
            },
            "response": {
                "status": status,
                "headers": [{"name": "content-type", "value": ctype}],
                "content": {"mimeType": ctype, "text": text},
            },
            "timings": {"blocked": 0, "send": 1, "wait": 5, "receive": 3},
        }

    entries = [entry(sse(*text_turn("hi")).decode()), entry('{"type":"error"}', 529, "text/event-stream")]
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})


RECORDING = base_recording()
HAR = base_har()
PLAIN = [generate(seed).data for seed in range(8)]


def paths(value: object, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def replace(doc: object, path: tuple[Any, ...], new: object) -> object:
    if not path:
        return new
    *head, last = path
    target = doc
    for k in head:
        target = target[k]  # type: ignore[index]
    target[last] = new  # type: ignore[index]
    return doc


@st.composite
def mutated_json_lines(draw: st.DrawFn, raw: bytes) -> bytes:
    """Damage a JSON-lines (or one-document JSON) file."""
    lines = raw.split(b"\n")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "swap", "cut", "drop", "repeat", "garbage"]))
        i = draw(st.integers(0, len(lines) - 1))
        try:
            doc = orjson.loads(lines[i])
        except orjson.JSONDecodeError:
            doc = None
        if op in ("flip", "swap") and doc is not None:
            all_paths = list(paths(doc))
            path = draw(st.sampled_from(all_paths))
            if op == "flip":
                new = draw(JSON_VALUES)
            else:  # a value from elsewhere in the file
                j = draw(st.integers(0, len(lines) - 1))
                try:
                    other = orjson.loads(lines[j])
                    q = draw(st.sampled_from(list(paths(other))))
                    new = other
                    for k in q:
                        new = new[k]
                except (orjson.JSONDecodeError, TypeError, KeyError):
                    new = None
            lines[i] = exactjson.dumps(replace(doc, path, new), option=orjson.OPT_NON_STR_KEYS)  # big ints too
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, max(0, len(lines[i]))))]
        elif op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "garbage":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.binary(min_size=1, max_size=12)) + lines[i][pos:]
    return b"\n".join(lines)


@st.composite
def mutated_bytes(draw: st.DrawFn, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["insert", "delete", "flip", "truncate"]))
        pos = draw(st.integers(0, len(data)))
        if op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
        elif op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


@contextlib.contextmanager
def captured() -> Iterator[list[bytes]]:
    """stdout (text and .buffer) captured: the bytes are in the yielded list once the block ends."""
    got: list[bytes] = []
    out, err = sys.stdout, sys.stderr
    wrapper = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    sys.stdout = wrapper
    sys.stderr = io.StringIO()
    try:
        yield got
    finally:
        sys.stdout, sys.stderr = out, err
        wrapper.flush()
        got.append(wrapper.detach().getvalue())


def check(data: bytes, tmp: Path) -> None:
    try:
        rec = load_any(data)
    except InspectorError as e:
        assert "\n" not in str(e)
        rec = None
    except ValueError as e:  # RecordingError
        assert "\n" not in str(e)
        rec = None
    if rec is not None:
        turns = dump_turns(rec)
        assert isinstance(format_turns(turns), str)
        dump_ok(turns)
        exactjson.dumps(turns, option=orjson.OPT_NON_STR_KEYS)  # as `dump --json` writes them
        timing_json(rec)
        format_timing(rec)
        recorded_tools(rec, Pacer(math.inf))
        replay_session(rec)  # what the replay derives from the recording (config, tools) before it runs
    path = tmp / "input"
    path.write_bytes(data)
    for argv in (
        ["dump", str(path)],
        ["dump", str(path), "--json", "--timing"],
        ["dump", str(path), "--events", "--json"],
    ):
        with captured() as got:
            code = main(argv)
        assert code in (0, 1, 2), argv
        [out] = got
        out.decode("utf-8")  # text
        if code != 2 and "--json" in argv:
            for line in out.splitlines():
                orjson.loads(line)


def fuzz(ci_count: int) -> settings:
    return settings(
        max_examples=examples(ci_count),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@fuzz(120)
@given(data=mutated_json_lines(RECORDING))
def test_fuzz_recordings(tmp_path: Path, data: bytes) -> None:
    check(data, tmp_path)


@fuzz(80)
@given(base=st.sampled_from(PLAIN), seed=st.data())
def test_fuzz_plain_sse(tmp_path: Path, base: bytes, seed: st.DataObject) -> None:
    check(seed.draw(mutated_bytes(base)), tmp_path)


@fuzz(80)
@given(data=st.one_of(mutated_json_lines(HAR), mutated_bytes(HAR)))
def test_fuzz_har(tmp_path: Path, data: bytes) -> None:
    check(data, tmp_path)


def test_a_tool_input_integer_beyond_64_bits_goes_through_every_reader(tmp_path: Path) -> None:
    # Found by test_fuzz_plain_sse in CI: a dropped delta joined two numbers into one beyond 2**64
    data = sse(*tool_turn(['{"a": 1844674407370955161', "55161}"]))
    rec = load_any(data)
    [turn] = dump_turns(rec)
    assert b"184467440737095516155161" in exactjson.dumps(turn, option=orjson.OPT_NON_STR_KEYS)
    check(data, tmp_path)

"""Scenario files that cannot explode (issue 19): alias bombs, integers too long to read, absurd durations and counts,
texts that render millions of events, HTTP statuses out of range, built-in tools without a workspace, devices and
huge files, names that are paths. Each is refused by `inspector scenario check` with file:line:column, and by
load; the bounds are in the JSON Schema (docs/limits.md lists them)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from inspector.cli import main
from inspector.scenarios import fileformat as ff
from inspector.scenarios.fileformat import ScenarioFileError, check_text, load_file
from inspector.scenarios.model import TextBlock

REPO = Path(__file__).resolve().parents[2]

BASE = """\
version: 1
name: t
description: d
prompt: p
tools:
  - name: lookup
    input_schema: {type: object}
    result: ok
turns:
  - blocks:
      - text: hi
      - tool_use: lookup
        input: {q: a}
    stop_reason: tool_use
    pacing: {ttfb: 0.2}
  - blocks: [{text: done}]
"""


def _check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`inspector scenario check` on ``text``: it must fail (exit 1) and print only positioned problems."""
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["scenario", "check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith(f"{path}:") for line in out), out
    with pytest.raises(ScenarioFileError):
        load_file(path)
    return [line[len(str(path)) + 1 :] for line in out]


def test_the_base_file_is_valid() -> None:
    assert check_text(BASE, "f.yaml") == []


# --- alias bombs ---------------------------------------------------------------------------------------------------


def _bomb(levels: int = 9, width: int = 10) -> str:
    """A "billion laughs" in one flow value: each anchor a list of ``width`` aliases of the one before, so the last
    holds width ** levels strings; a few hundred bytes that construct cheaply (the nodes are shared) and expand to
    gigabytes once serialized."""
    items = ["&l0 [" + ", ".join(["lol"] * width) + "]"]
    items += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


BOMB_AT = {
    "tool input": ("        input: {q: a}", "        input: {q: BOMB}"),
    "tool result": ("    result: ok", "    result: BOMB"),
    "input schema": ("    input_schema: {type: object}", "    input_schema: {type: object, items: BOMB}"),
    "whole block": ("  - blocks: [{text: done}]", "  - blocks: [{text: done}, {block: {type: r, content: BOMB}}]"),
    "expected": ("prompt: p", "prompt: p\nexpected: {x: BOMB}"),
}


@pytest.mark.parametrize("where", sorted(BOMB_AT))
def test_an_alias_bomb_is_refused_at_load_with_its_position(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = BOMB_AT[where]
    text = BASE.replace(old, new.replace("BOMB", _bomb()))
    assert text != BASE
    out = _check(tmp_path, text, capsys)
    assert len(out) == 1 and "with its aliases expanded the file holds" in out[0], out
    line, col = (int(x) for x in out[0].split(":")[:2])
    assert text.splitlines()[line - 1][col - 1 :].startswith("&l7 ["), out  # the anchor whose copies weigh most
    assert f"more than {ff.MAX_VALUES} values; the anchor here is used 11 times" in out[0]


def test_a_recursive_alias_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _check(tmp_path, BASE.replace("        input: {q: a}", "        input: &r {q: [*r]}"), capsys)
    assert "recursive alias" in out[0] and out[0].startswith("13:16:"), out


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!custom"])
def test_an_unknown_tag_is_refused_where_it_is(tag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The problem is at the tagged value (line 13, column 16), not at the file's 1:1."""
    out = _check(tmp_path, BASE.replace("        input: {q: a}", f"        input: {tag} {{q: a}}"), capsys)
    assert len(out) == 1 and out[0].startswith("13:16: cannot read this value:") and "constructor" in out[0], out


def test_nesting_too_deep_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "[" * 150 + "]" * 150
    out = _check(tmp_path, BASE.replace("        input: {q: a}", f"        input: {{q: {deep}}}"), capsys)
    assert f"nested more than {ff.MAX_DEPTH} deep" in out[0], out


def _in_document_order(node: yaml.Node) -> Iterator[yaml.Node]:
    """Every value of a composed document as the file writes them (a mapping's key, then its value)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
        elif isinstance(n, yaml.MappingNode):
            stack.extend(x for pair in reversed(n.value) for x in reversed(pair))


def test_a_file_of_more_values_than_the_bound_is_refused_where_it_passes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that writes more than MAX_VALUES values itself (no alias) is refused where the first value past the
    bound begins, and read no further (the broken YAML after it is not reached). It was read whole first, every
    value a node of ~280 bytes (a 16 MiB file of one-character numbers: 8 million values, 4.2 GB of RSS, 86 s), then
    refused at 1:1 for its number of values 'with its aliases expanded'."""
    monkeypatch.setattr(ff, "MAX_VALUES", 1000)
    numbers = ", ".join(str(i) for i in range(2000))
    text = BASE.replace("    pacing: {ttfb: 0.2}", f"    pacing: {{ttfb: 0.2, read_events: [{numbers}]}}")
    out = _check(tmp_path, text + "oops: [\n", capsys)
    root = yaml.compose(text, Loader=yaml.SafeLoader)  # (PyYAML's own count)
    assert root is not None
    past = list(_in_document_order(root))[1000].start_mark
    assert out == [
        f"{past.line + 1}:{past.column + 1}: YAML: the file holds more than 1000 values (lists, mappings and "
        "scalars): this is value 1001; not read further"
    ]


def test_an_alias_bomb_within_the_bound_on_written_values_is_refused_at_its_anchor_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound on the values the file writes comes first; the one on values once aliases are expanded is as it was."""
    monkeypatch.setattr(ff, "MAX_VALUES", 10_000)
    text = BASE.replace("        input: {q: a}", "        input: {q: " + _bomb(5) + "}")
    out = [str(p) for p in check_text(text, "f.yaml")]
    assert len(out) == 1 and "with its aliases expanded the file holds" in out[0], out
    assert "more than 10000 values; the anchor here is used 11 times" in out[0], out


def test_shared_anchors_of_ordinary_size_still_load(tmp_path: Path) -> None:
    text = BASE.replace("    pacing: {ttfb: 0.2}", "    pacing: &p {ttfb: 0.2}").replace(
        "  - blocks: [{text: done}]", "  - blocks: [{text: done}]\n    pacing: *p"
    )
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    sc = load_file(path)
    assert sc.turns[1].pacing.ttfb == 0.2


# --- integers too long to read -------------------------------------------------------------------------------------


LONG_INTS = {
    "version": ("version: 1", "version: " + "9" * 5000, "1:10:", "an integer of 5000 characters (at most 100)"),
    "seed": ("prompt: p", "prompt: p\nseed: " + "7" * 5000, "5:7:", "an integer of 5000 characters"),
    "in a tool input": ("input: {q: a}", "input: {q: " + "1" * 5000 + "}", "13:20:", "an integer of 5000 characters"),
    "in a tool result": ("result: ok", "result: -" + "3" * 5000, "8:13:", "an integer of 5001 characters"),
    "sexagesimal": (
        "prompt: p",
        "prompt: p\nseed: " + ":".join(["59"] * 2000),
        "5:7:",
        "an integer of 5999 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(LONG_INTS))
def test_an_integer_too_long_is_one_line_with_its_position(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, position, message = LONG_INTS[case]
    out = _check(tmp_path, BASE.replace(old, new), capsys)
    assert out == [f"{position} {message}"] or (out[0].startswith(position) and message in out[0]), out
    assert all(len(line) < 400 for line in out)  # the number is not echoed


# --- every number is bounded where it is declared --------------------------------------------------------------------

# case: (replace, with, the literal the problem points at, the message)
NUMBERS = {
    "ttfb 1e12": (
        "ttfb: 0.2",
        "ttfb: 1.0e+12",
        "1.0e+12",
        "turns[0].pacing.ttfb: expected a number <= 3600, got 1e+12",
    ),
    "ttfb as an integer": (
        "ttfb: 0.2",
        "ttfb: 1000000000000",
        "1000000000000",
        "turns[0].pacing.ttfb: expected a number <= 3600, got 1e+12",
    ),
    "jitter 2": ("ttfb: 0.2", "jitter: 2", "2}", "turns[0].pacing.jitter: expected a number <= 1, got 2"),
    "stall pings 1e9": (
        "    pacing: {ttfb: 0.2}",
        "    faults: [{type: stall_with_pings, pings: 1000000000}]",
        "1000000000",
        "turns[0].faults[0].pings: expected an integer <= 10000, got 1000000000",
    ),
    "ping interval": (
        "    pacing: {ttfb: 0.2}",
        "    faults: [{type: stall_with_pings, ping_interval: 1.0e+9}]",
        "1.0e+9",
        "turns[0].faults[0].ping_interval: expected a number <= 3600",
    ),
    "input_tokens 1e32": (
        "    pacing: {ttfb: 0.2}",
        "    usage: {input_tokens: 100000000000000000000000000000000}",
        "1000",
        "turns[0].usage.input_tokens: expected an integer <= 1000000000, got 100000000000000000000000000000000",
    ),
    "tool duration": (
        "    result: ok",
        "    result: ok\n    duration: 1.0e+12",
        "1.0e+12",
        "tools[0].duration: expected a number <= 3600, got 1e+12",
    ),
    "tool duration range": (
        "    result: ok",
        "    result: ok\n    duration: [1, 99999]",
        "99999",
        "tools[0].duration[1]: expected a number <= 3600, got 99999",
    ),
    "tool timeout": (
        "    result: ok",
        "    result: ok\n    timeout: 1.0e+12",
        "1.0e+12",
        "tools[0].timeout: expected a number <= 3600",
    ),
    "huge chunk": (
        "      - text: hi",
        "      - text: hi\n        chunk: 99999999999",
        "99999999999",
        "turns[0].blocks[0].chunk: expected an integer <= 1000000",
    ),
    "max_tokens": (
        "prompt: p",
        "prompt: p\nmax_tokens: 99999999999",
        "9999",
        "max_tokens: expected an integer <= 1000000000",
    ),
    "idle_timeout": (
        "prompt: p",
        "prompt: p\nidle_timeout: 1.0e+12",
        "1.0e+12",
        "idle_timeout: expected a number <= 3600",
    ),
    "attempts": (
        "    pacing: {ttfb: 0.2}",
        "    faults: [{type: max_tokens_cut, block: 0, attempts: [99999]}]",
        "99999",
        "turns[0].faults[0].attempts[0]: expected an integer <= 100",
    ),
    "http status 99999": (
        "    pacing: {ttfb: 0.2}",
        "    http_errors: [{status: 99999}]",
        "99999",
        "turns[0].http_errors[0].status: expected an integer <= 599, got 99999",
    ),
    "http status -1": (
        "    pacing: {ttfb: 0.2}",
        "    http_errors: [{status: -1}]",
        "-1",
        "turns[0].http_errors[0].status: expected an integer >= 200, got -1",
    ),
    "retry_after_ms": (
        "    pacing: {ttfb: 0.2}",
        "    http_errors: [{retry_after_ms: 99999999999}]",
        "9999",
        "turns[0].http_errors[0].retry_after_ms: expected an integer <= 3600000",
    ),
}


@pytest.mark.parametrize("case", sorted(NUMBERS))
def test_an_absurd_number_is_refused_with_its_position(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, literal, message = NUMBERS[case]
    text = BASE.replace(old, new)
    assert text != BASE
    out = _check(tmp_path, text, capsys)
    line, col, rest = out[0].split(":", 2)
    assert rest.startswith(f" {message}"), out
    assert text.splitlines()[int(line) - 1][int(col) - 1 :].startswith(literal), out


def test_a_text_that_renders_millions_of_events_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("      - text: hi", "      - text: " + "x" * 1_000_000 + "\n        chunk: 1")
    out = _check(tmp_path, text, capsys)
    assert out[0].startswith("11:9: turns[0]: this turn renders up to 1000"), out
    assert f"more than {ff.MAX_EVENTS_PER_TURN} (blocks[0]" in out[0]


def test_many_pings_every_event_count_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("      - text: hi", "      - text: " + "x" * 60_000 + "\n        chunk: 1").replace(
        "pacing: {ttfb: 0.2}", "pacing: {ttfb: 0.2, ping_every: 1}"
    )
    out = _check(tmp_path, text, capsys)
    assert "this turn renders up to" in out[0], out


def test_a_long_text_in_big_chunks_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(BASE.replace("      - text: hi", "      - text: " + "x" * 1_000_000 + "\n        chunk: 100"))
    block = load_file(path).turns[0].blocks[0]
    assert isinstance(block, TextBlock) and len(block.text) == 1_000_000


# --- enums, names, tools ---------------------------------------------------------------------------------------------


def test_an_unknown_stop_reason_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _check(tmp_path, BASE.replace("stop_reason: tool_use", "stop_reason: tool_usee"), capsys)
    assert out[0].startswith(
        "14:18: turns[0].stop_reason: unknown value 'tool_usee' (did you mean 'tool_use'?); expected one of: end_turn,"
    ), out


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "x y", "-rf", "a" * 101])
def test_a_name_that_is_a_path_is_refused(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _check(tmp_path, BASE.replace("name: t", f"name: '{name}'"), capsys)
    assert out[0].startswith("2:7: name: expected letters, digits"), out


def test_a_builtin_tool_without_a_workspace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BASE.replace("tools:\n", "tools:\n  - read_file\n")
    out = _check(tmp_path, text, capsys)
    assert out[0].startswith("6:5: tools: built-in tools (read_file) run over a workspace: set `workspace:`"), out
    ok = tmp_path / "ok.yaml"
    ok.write_text(text + "workspace: parse_date\n")
    assert load_file(ok).tools == ["read_file"]


@pytest.mark.parametrize("workspace", ['"a\\0b"', "a" * 300, "a/" * 3000], ids=["nul", "long-name", "long-path"])
def test_a_workspace_the_system_cannot_look_up_is_no_folder_not_a_traceback(
    workspace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (a NUL: ValueError from os.stat; a name over 255 bytes or a path over 4096: OSError ENAMETOOLONG)
    out = _check(tmp_path, BASE + f"workspace: {workspace}\n", capsys)
    assert len(out) == 1 and out[0].startswith("17:12: workspace: no folder "), out


# --- the file itself ---------------------------------------------------------------------------------------------------


def test_a_device_is_refused_not_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "check", "/dev/zero"]) == 1
    assert (
        capsys.readouterr().out
        == "/dev/zero:1:1: cannot read the file: not a regular file (a device, FIFO or socket)\n"
    )


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    assert main(["scenario", "check", str(fifo)]) == 1  # no writer: a blocking open would never return
    assert "not a regular file" in capsys.readouterr().out


def test_a_scenario_path_that_is_not_a_file_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --scenario`, `serve --scenario`, `watch --serve` given a folder or a FIFO: what it is, as `scenario check`
    says it, not 'no scenario file' of a path that exists."""
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    for path, what in [(fifo, "not a regular file"), (tmp_path, "a folder")]:
        assert main(["run", "--headless", "--scenario", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"inspector: {path}:1:1: cannot read the file: ") and what in err, err
    assert main(["run", "--headless", "--scenario", str(tmp_path / "none.yaml")]) == 2
    assert "no scenario file" in capsys.readouterr().err


def test_a_folder_and_a_huge_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as fh:
        fh.truncate(ff.MAX_FILE_BYTES + 1)  # sparse: no disk used
    assert main(["scenario", "check", str(huge), str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == f"{huge}:1:1: the file has {ff.MAX_FILE_BYTES + 1} bytes, more than {ff.MAX_FILE_BYTES} (docs/limits.md)"
    )
    assert out[1] == f"{tmp_path}:1:1: cannot read the file: a folder"


def test_the_real_cli_on_dev_zero_ends_at_once_in_one_line() -> None:
    """Through `python -m inspector` under a 1 GiB address-space limit: before, it read until MemoryError."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _LIMITED, "scenario", "check", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip().endswith("not a regular file (a device, FIFO or socket)") and not proc.stderr


_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from inspector.cli import main
sys.exit(main(sys.argv[1:]))
"""


RUN_REFUSES = {
    "built-in tool without a workspace": (BASE.replace("tools:\n", "tools:\n  - read_file\n"), "6:5: tools: built-in"),
    "HTTP status 99999": (
        BASE.replace("    pacing: {ttfb: 0.2}", "    http_errors: [{status: 99999}]"),
        "15:28: turns[0].http_errors[0].status",
    ),
    "alias bomb": (BASE.replace("    result: ok", "    result: " + _bomb()), "8:"),
    "a million events": (
        BASE.replace("      - text: hi", "      - text: " + "x" * 1_000_000 + "\n        chunk: 1"),
        "11:9:",
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_REFUSES))
def test_run_refuses_the_file_in_one_line_before_anything_starts(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspector run --headless --scenario FILE`: before, these passed check and then traced back, hung or grew to
    gigabytes; now run refuses the file with the first problem, as a usage error."""
    text, position = RUN_REFUSES[case]
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["run", "--headless", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}:{position}" in err[0], err


@pytest.mark.parametrize("name", ["../../x", "a/b", "a\\b", "..", ".", "", "x\0y"])
def test_a_scenario_made_in_python_that_copies_its_workspace_cannot_be_named_a_path(name: str) -> None:
    from inspector.scenarios.model import Scenario, TextBlock, TurnScript

    turns = [TurnScript([TextBlock("hi")])]
    with pytest.raises(ValueError, match="a name names temporary folders"):
        Scenario(name=name, description="d", prompt="p", turns=turns, workspace="parse_date", workspace_copy=True)
    Scenario(name="ok-name.1", description="d", prompt="p", turns=turns, workspace="parse_date", workspace_copy=True)
    Scenario(name="stand-in/end", description="d", prompt="p", turns=turns)  # no copy: an internal name may say more


def test_keys_that_are_not_strings_or_twice_are_refused_where_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BASE.replace("        input: {q: a}", "        input: {1: a, q: b, q: c}")
    out = _check(tmp_path, text, capsys)
    assert out == [
        "13:17: turns[0].blocks[1].input: keys must be strings, got 1",
        "13:29: turns[0].blocks[1].input: duplicate key 'q'",
    ], out


def test_thousands_of_unknown_keys_are_each_reported_where_they_are_finding_each_mapping_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each problem's key is found in its mapping through an index made once per mapping: a file of 16,000 unknown
    keys took 9 s of CPU (one scan of the mapping per problem), 1.6 s now. Every key is still reported at its line."""
    built: list[int] = []
    real = ff._keys_of

    def counting(node: object) -> object:
        if node not in ff._KEY_INDEX:
            built.append(id(node))
        return real(node)  # type: ignore[arg-type]

    monkeypatch.setattr(ff, "_keys_of", counting)
    n = 2000
    extra = "".join(f"k{i}: {i}\n" for i in range(n))
    out = _check(tmp_path, BASE + extra, capsys)
    first = BASE.count("\n") + 1
    assert [line.split(": ", 1)[0] for line in out] == [f"{first + i}:1" for i in range(n)]
    assert out[-1].startswith(f"{first + n - 1}:1: scenario: unknown key 'k{n - 1}'")
    # the top-level mapping, indexed once for its 2,000 problems, in each of the two reads (`check`, then load_file)
    assert len(built) == len(set(built)) == 2


def test_a_yaml_date_where_a_number_belongs_is_named_as_the_file_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """YAML reads `2001-12-14` as a date: the problem says what the file says, not a Python repr
    (it said `got datetime.datetime(2001, 12, 14, 21, 5...`)."""
    out = _check(tmp_path, BASE.replace("description: d\n", "description: d\nseed: 2001-12-14\n"), capsys)
    assert out == ["4:7: seed: expected an integer, got date 2001-12-14"]


@pytest.mark.parametrize(
    ("value", "message"),
    [("2001-13-45", "month must be in 1..12"), ("!!int abc", "invalid literal for int() with base 10: 'abc'")],
)
def test_a_value_yaml_cannot_construct_is_reported_where_it_is(
    value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scalar YAML resolves (a date, a tag) but cannot construct: at its line and column (it was 1:1, the
    document's mapping, whatever the line)."""
    out = _check(tmp_path, BASE.replace("prompt: p\n", f"prompt: {value}\n"), capsys)
    assert out == [f"4:9: cannot read this value: {message}"]


# --- tools that never answer ----------------------------------------------------------------------------------------

HANGS = {
    "the tool": ("    result: ok\n", "    result: ok\n    hang: true\n", "9:11: tools[0].hang: 'lookup' never answers"),
    "a case": (
        "    result: ok\n",
        "    result: ok\n    cases:\n      - {input: {q: b}, result: x}\n      - {input: {q: a}, hang: true}\n",
        "11:31: tools[0].cases[1].hang: 'lookup' never answers",
    ),
}


@pytest.mark.parametrize("where", sorted(HANGS))
def test_a_tool_that_hangs_without_a_timeout_is_refused(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hang: true` and no timeout: check said ok, and `run --headless` then never ended (only Ctrl-C stopped it).
    Refused at the `hang` key, naming the fix; with a timeout the file loads (the call times out)."""
    old, new, problem = HANGS[where]
    text = BASE.replace(old, new)
    out = _check(tmp_path, text, capsys)
    assert out == [
        f"{problem} and has no timeout: a run waiting on it never ends; set `timeout:` (seconds) on the tool"
    ]
    ok = tmp_path / "ok.yaml"
    ok.write_text(text.replace("    result: ok\n", "    result: ok\n    timeout: 0.5\n", 1), encoding="utf-8")
    assert load_file(ok).simulated_tools[0].timeout == 0.5


def test_a_scenario_made_in_python_whose_tool_hangs_needs_a_timeout() -> None:
    from inspector.scenarios.model import Scenario, SimulatedTool, TurnScript

    turns = [TurnScript([TextBlock("hi")])]
    with pytest.raises(ValueError, match="'stuck' never answers"):
        Scenario(
            name="x", description="d", prompt="p", turns=turns, simulated_tools=[SimulatedTool("stuck", hang=True)]
        )
    sim = SimulatedTool("stuck", hang=True)
    Scenario(name="x", description="d", prompt="p", turns=turns, simulated_tools=[sim], tool_timeouts={"stuck": 1.0})


# --- where a workspace may be ---------------------------------------------------------------------------------------

OUTSIDE = {
    "the root": ("/", "'/' is an absolute path"),
    "an absolute path": ("{outside}", "'{outside}' is an absolute path"),
    "up two": ("../..", "'../..' leads out of the scenario file's folder (to {up2})"),
    "up one": ("..", "'..' leads out of the scenario file's folder (to {up1})"),  # (was the package's scenarios/)
    "a symlink out": ("link", "'link' leads out of the scenario file's folder (to {outside})"),
    "down and out": ("inner/../../host", "'inner/../../host' leads out of the scenario file's folder (to {outside})"),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_a_workspace_outside_the_scenario_file_s_folder_is_refused(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workspace is a bundled one or a folder under the scenario file's folder. `/`, an absolute path, `../..` or a
    symlink leading out passed check, and the built-in tools then listed and read what the file pointed at (`/`:
    the whole machine; `..` was even taken for a bundled name: the package's own scenarios folder)."""
    home = tmp_path / "home"
    (home / "inner").mkdir(parents=True)
    outside = tmp_path / "host"
    outside.mkdir()
    (home / "link").symlink_to(outside)
    ws, message = OUTSIDE[case]
    fill = {"outside": outside, "up1": tmp_path, "up2": tmp_path.parent}
    out = _check(
        home, BASE.replace("tools:\n", "tools:\n  - read_file\n") + f"workspace: '{ws.format(**fill)}'\n", capsys
    )
    assert len(out) == 1 and out[0].startswith(f"18:12: workspace: {message.format(**fill)}"), out
    assert out[0].endswith("; move or copy it there"), out


@pytest.mark.parametrize("ws", [".", "inner", "./inner/", "../home/inner", "inner_link", "parse_date"])
def test_a_workspace_under_the_scenario_file_s_folder_loads(ws: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "inner").mkdir(parents=True)
    (home / "inner_link").symlink_to("inner")  # (a symlink that stays inside)
    path = home / "s.yaml"
    path.write_text(BASE.replace("tools:\n", "tools:\n  - read_file\n") + f"workspace: '{ws}'\n", encoding="utf-8")
    sc = load_file(path)
    if ws == "parse_date":  # (a bundled one, by its name)
        assert sc.workspace == "parse_date"
    else:
        assert sc.workspace_path == (home if ws == "." else home / "inner")

"""What checking a big scenario file costs grows with the file, not faster (tools/bench_scenario_check.py has the
figures; nothing is timed here). The work is counted: Python lines run (a quadratic step runs 16 times the lines for
a file 4 times bigger, a linear one about 4), comparisons of tool names (a list's count() runs in C: no line to
count), the memory held beside the composed document, and the cyclic collector's passes."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml

from inspector.scenarios import model as M
from inspector.scenarios.fileformat import _compose_compact, check_text
from inspector.testing.bigscenario import SHAPES, big_scenario

BUNDLED = Path(M.__file__).parent / "bundled_files"


def _lines(text: str) -> int:
    """Python lines run to check ``text`` (which must be valid)."""
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "line":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        problems = check_text(text, "f.yaml")
    finally:
        sys.settrace(None)
    assert problems == [], problems[:3]
    return n


@pytest.mark.parametrize("shape", SHAPES)
def test_checking_a_file_4_times_bigger_runs_about_4_times_the_lines(shape: str) -> None:
    """Before: a turn's transport faults were each compared with every earlier one (a 600 KB file of faults took
    14 s; 8.5 times the lines for 4 times the file)."""
    small, big = _lines(big_scenario(shape, 15_000)), _lines(big_scenario(shape, 60_000))
    assert big / small < 5, (small, big)


class _Name(str):
    """A tool name that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Name.compared += 1
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        return str.__hash__(self)


def test_tool_names_are_compared_a_bounded_number_of_times_each() -> None:
    """Tools offered twice were found with names.count(name) for each name (in the file check and the model): a file
    of 20,000 tools compared names 400,000,000 times (20 s). Counting them compares each name a few times."""
    n = 2_000
    sims = [M.SimulatedTool(_Name(f"tool_{i}")) for i in range(n)]
    turns = [M.TurnScript([M.ToolUseBlock(_Name(f"tool_{i}")) for i in range(0, n, 10)])]
    _Name.compared = 0
    M.Scenario(name="x", description="d", prompt="p", turns=turns, simulated_tools=sims)
    assert _Name.compared < 10 * n, _Name.compared
    assert M.repeated([_Name("a"), _Name("b"), _Name("a")]) == ["a"]
    _Name.compared = 0
    assert M.repeated(_Name(f"t{i % (n // 2)}") for i in range(n)) == sorted(f"t{i}" for i in range(n // 2))
    assert _Name.compared < 10 * n, _Name.compared


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_check_holds_little_more_than_the_composed_document() -> None:
    """The graph check (aliases, depth, size) kept four dicts with an entry per value, and a path string per value
    for the key check: checking a file of long number lists (what `scenario from-recording` writes) held 1.7 times
    the composed document, twice at 2.4 MB (580 MB)."""
    text = big_scenario("recorded", 200_000)
    composed = _peak(lambda: yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    checked = _peak(lambda: check_text(text, "f.yaml"))
    assert checked < 1.35 * composed, (composed, checked)


@pytest.fixture
def collections() -> Iterator[list[int]]:
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(count)
    try:
        yield passes
    finally:
        gc.callbacks.remove(count)


def test_the_cyclic_collector_does_not_walk_the_document_while_it_is_read(collections: list[int]) -> None:
    """It walked every node, mark and model again and again as they were made: more than half the time of checking a
    2.4 MB file (7.1 s; 3.0 s without). Off while a file is read, on again after (and off stays off): at most the one
    pass it makes when it is on again (it had made 250 for this file)."""
    text = big_scenario("steps", 200_000)
    assert gc.isenabled()
    assert check_text(text, "f.yaml") == []
    assert len(collections) <= 1 and gc.isenabled(), collections
    gc.disable()
    try:
        assert check_text(text, "f.yaml") == [] and not gc.isenabled()
    finally:
        gc.enable()


def test_the_reader_holds_less_than_half_what_yaml_compose_held_for_a_file_of_numbers() -> None:
    """yaml.compose kept two marks and a node of five attributes for each value (about 280 bytes for a one-character
    number): checking a file of numbers peaked at 183 times its size (a 4 MiB file: 1.1 GB of RSS). Its own compact
    nodes (tag, value, position) and shared short values: 76 times. A file of long number lists (what
    `scenario from-recording` writes): 67 times, now 35."""
    for shape, before, bound in (("numbers", 183, 110), ("recorded", 67, 50)):
        text = big_scenario(shape, 200_000)
        peak = _peak(lambda text=text: check_text(text, "f.yaml"))
        assert peak < bound * len(text), (shape, peak / len(text), before)


_TRICKY = [
    "a: &x {b: [1, 2, &y three]}\nc: *x\nd: *y\n",
    "base: &b {k: 1, l: 2}\nm:\n  <<: *b\n  k: 3\n",
    "t: !!str 12\nu: !custom x\nv: ! 12\nw: !!int '7'\nx: !!binary aGk=\n",
    "q: 'single'\nr: \"double \\u00e9\"\ns: |\n  block\n  text\nf: >\n  folded\n  text\n",
    "? [complex, key]\n: value\n? {k: v}\n: w\n",
    "- [a, {b: c}, [d, [e]]]\n- ~\n- null\n- yes\n- 0x1F\n- 1e400\n- .inf\n- 2024-01-02\n- 12:30:00\n",
    "# only a comment\n",
    "",
    "a: 1\n---\nb: 2\n",
    "a: *nope\n",
    "a: &x 1\nb: &x 2\n",
    "a: [1, 2\n",
    "a:\n\t- 1\n",
    "x: &r [*r]\n",
    "k: v\nk: w\n",
    "é: ü\n'\U0001f600': \"\\U0001F600\"\n",
]


def _shape(node: Any, seen: dict[int, int]) -> Any:
    """A composed document as plain data: each node's class, tag, value, line and column; a node met again (an
    alias) as the number of its first meeting."""
    if id(node) in seen:
        return ("alias", seen[id(node)])
    seen[id(node)] = len(seen)
    mark = node.start_mark
    head = (node.id, node.tag, mark.line, mark.column)  # (scalar, sequence, mapping)
    if isinstance(node, yaml.ScalarNode):
        return (*head, node.value)
    if isinstance(node, yaml.SequenceNode):
        return (*head, [_shape(n, seen) for n in node.value])
    return (*head, [(_shape(k, seen), _shape(v, seen)) for k, v in node.value])


def _composed(compose: Any, text: str) -> Any:
    try:
        node = compose(text)
    except yaml.MarkedYAMLError as e:
        marks = [(m.line, m.column) if m is not None else None for m in (e.context_mark, e.problem_mark)]
        return (type(e).__name__, e.context, e.problem, marks)
    return None if node is None else _shape(node, {})


@pytest.mark.parametrize("text", _TRICKY + [p.read_text() for p in sorted(BUNDLED.glob("*.yaml"))])
def test_the_compact_nodes_are_what_yaml_compose_gives(text: str) -> None:
    """The reader's own composition gives the nodes yaml.compose gives (class, tag, value, where each starts, which
    are the same node through an alias), and the same errors with the same positions."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert _composed(_compose_compact, text) == _composed(lambda t: yaml.compose(t, Loader=loader), text)

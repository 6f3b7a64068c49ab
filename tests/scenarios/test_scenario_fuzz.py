"""Fuzz: structure-aware scenario files (the file's own keys, with extreme numbers, wrong types, aliases, alias bombs,
recursive aliases, integers too long to read) through `inspector scenario check`, load and render, in a subprocess
whose address space is capped at 1 GiB: no traceback, no MemoryError, every problem one positioned line."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.scenarios import model as M
from inspector.scenarios.fileformat import fault_types
from inspector.testing.hyp import examples

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LIMIT = 1 << 30  # RLIMIT_AS of the fuzzing process

# --- values --------------------------------------------------------------------------------------------------------

EXTREME_INTS = st.sampled_from([0, 1, -1, 599, 600, 99999, 2**31, 2**63, 10**18, 10**32, -(10**40), 10**99])
WILD = st.one_of(
    EXTREME_INTS,
    st.integers(-1000, 1000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e12, 1e300, -0.0, 3600.0, 3600.5, 0.5]),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-2, 5), max_size=3),
    st.dictionaries(st.sampled_from(["min", "max", "x"]), st.integers(-2, 50), max_size=2),
)

SANE = st.one_of(st.integers(0, 5), st.floats(0, 2))


def mostly(sane: st.SearchStrategy, wild: st.SearchStrategy, odds: int = 4) -> st.SearchStrategy:
    """``wild`` one time in ``odds``: a file with a few wild values, not only wild ones."""
    return st.integers(0, odds - 1).flatmap(lambda i: wild if i == 0 else sane)


MOSTLY_SANE = mostly(SANE, WILD)


def fields_of(cls: type) -> list[str]:
    import dataclasses

    return [f.name for f in dataclasses.fields(cls) if f.init]


def mapping(keys: list[str], extra_keys: tuple[str, ...] = ("bogus",)) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from([*keys, *extra_keys]), MOSTLY_SANE, max_size=4)


CHUNK = st.one_of(
    st.integers(-1, 30),
    EXTREME_INTS,
    st.lists(st.integers(0, 5), max_size=3),
    st.fixed_dictionaries({"min": st.integers(0, 9), "max": st.integers(0, 9)}),
)
BLOCK = st.one_of(
    st.builds(lambda t, c: {"text": t, "chunk": c}, st.text(max_size=40), CHUNK),
    st.builds(lambda t: {"thinking": t}, st.text(max_size=20)),
    st.just({"redacted_thinking": None}),
    st.builds(
        lambda n, i, f: {"tool_use": n, "input": i, "fragment": f},
        st.sampled_from(["lookup", "read_file", "x"]),
        st.dictionaries(st.text(max_size=3), WILD, max_size=3),
        CHUNK,
    ),
    st.builds(lambda c, r: {"block": c, "result_of": r}, st.fixed_dictionaries({"type": st.text(max_size=5)}), WILD),
    WILD,
)
FAULT = st.builds(
    lambda t, rest: {"type": t, **rest},
    st.sampled_from([*fault_types(), "drop_afterr"]),
    st.dictionaries(
        st.sampled_from(
            ["n_events", "inside_block", "block", "pings", "ping_interval", "attempts", "cut_bytes", "keep_fragments"]
        ),
        WILD,
        max_size=3,
    ),
)
TURN = st.fixed_dictionaries(
    {"blocks": st.lists(BLOCK, max_size=4)},
    optional={
        "stop_reason": st.sampled_from([*M.STOP_REASONS, "tool_usee", ""]),
        "usage": mapping(fields_of(M.Usage)),
        "pacing": mapping(fields_of(M.Pacing)),
        "faults": st.lists(FAULT, max_size=2),
        "http_errors": st.lists(mapping(fields_of(M.HttpError)), max_size=2),
    },
)
TOOL = st.one_of(
    st.sampled_from(["read_file", "sleep", "nope"]),
    st.fixed_dictionaries(
        {"builtin": st.sampled_from(["read_file", "x"])}, optional={"duration": WILD, "timeout": WILD}
    ),
    st.fixed_dictionaries(
        {"name": st.sampled_from(["lookup", "a/b", ""])},
        optional={"result": WILD, "duration": WILD, "timeout": WILD, "input_schema": st.just({"type": "object"})},
    ),
)
DOC = st.fixed_dictionaries(
    {
        "version": mostly(st.just(1), WILD, odds=10),
        "name": mostly(st.just("t"), st.sampled_from(["../../x", "a/b", "..", "ok-name.1", "x" * 101]), odds=8),
        "description": st.just("d"),
        "prompt": st.just("p"),
        "turns": st.lists(TURN, min_size=1, max_size=3),
    },
    optional={
        "seed": mostly(st.integers(1, 5000), WILD),
        "max_tokens": mostly(st.integers(1, 5000), WILD),
        "thinking_budget": mostly(st.integers(1, 5000), WILD),
        "idle_timeout": mostly(st.floats(0, 100), WILD),
        "workspace": st.sampled_from(["parse_date", "nowhere", None]),
        "tools": st.lists(TOOL, max_size=3),
    },
)


def _bomb(levels: int, width: int, name: str = "b") -> str:
    items = [f"&{name}0 [" + ", ".join(["lol"] * width) + "]"]
    items += [f"&{name}{i} [" + ", ".join([f"*{name}{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


# what goes at the end of the file (a top-level key) or of its turns (one more turn): the hostile parts
TAILS = st.one_of(
    st.builds(lambda lv, w: f"expected: {{x: {_bomb(lv, w)}}}\n", st.integers(1, 12), st.integers(1, 12)),
    st.just("expected: &r {x: [*r]}\n"),
    st.builds(lambda n: f"seed: {'9' * n}\n", st.sampled_from([5, 19, 101, 4301, 6000])),
    st.builds(lambda n: "expected: {x: " + "[" * n + "]" * n + "}\n", st.sampled_from([5, 99, 101, 400, 2000])),
    st.just("expected: *undefined\n"),
)
TURN_TAILS = st.one_of(
    st.builds(
        lambda lv, w: f"- blocks: [{{block: {{type: r, content: {_bomb(lv, w, 't')}}}}}]\n",
        st.integers(1, 9),
        st.integers(1, 10),
    ),
    st.builds(
        lambda n, c: f"- blocks: [{{text: {'x' * n}, chunk: {c}}}]\n",
        st.sampled_from([10, 100_000, 2_000_000]),
        st.sampled_from([1, 1000]),
    ),
    st.builds(
        lambda n: f"- blocks: [{{text: hi}}]\n  faults: [{{type: stall_with_pings, pings: {n}, then: eof}}]\n",
        st.sampled_from([3, 10_000, 10**9]),
    ),
    st.builds(
        lambda v: f"- blocks: [{{text: hi}}]\n  pacing: {{ttfb: {v}, event_gap: {v}}}\n",
        st.sampled_from(["0.1", "1.0e+12", "1000000000000", ".inf", ".nan", "-1"]),
    ),
    st.builds(
        lambda v: f"- blocks: [{{text: hi}}]\n  http_errors: [{{status: {v}}}]\n", st.sampled_from([-1, 99999, 429])
    ),
)


@st.composite
def scenario_texts(draw: st.DrawFn) -> str:
    doc = draw(DOC)
    turns = doc.pop("turns")
    try:
        text: str = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        text += yaml.safe_dump({"turns": turns}, sort_keys=False, allow_unicode=True)
    except (ValueError, yaml.YAMLError):  # a value PyYAML cannot write: still a file to check
        text = "version: 1\n"
    text += draw(mostly(st.just(""), TURN_TAILS, odds=3))
    tail = draw(mostly(st.just(""), TAILS, odds=3))
    if tail:
        key = tail.split(":", 1)[0] + ":"
        text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(key)) + tail
    return text


# --- the check -------------------------------------------------------------------------------------------------------


def check_load_render(text: str, folder: str) -> None:
    """`inspector scenario check` on the text: exit 0 or 1, every line positioned; then load and render what passed."""
    from inspector.cli import main
    from inspector.scenarios.fileformat import ScenarioFileError, load_file
    from inspector.scenarios.render import render_turn

    path = os.path.join(folder, "fuzz.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["scenario", "check", path])
    lines = out.getvalue().splitlines()
    assert code in (0, 1), (code, lines)
    assert lines and all(line.startswith(f"{path}:") for line in lines), lines
    try:
        sc = load_file(path)
    except ScenarioFileError:
        assert code == 1
        return
    assert code == 0, lines
    for t in range(len(sc.turns)):
        for a in range(2):
            render_turn(sc, t, a)


def run_fuzz(max_examples: int) -> None:
    folder = tempfile.mkdtemp(prefix="scenario-fuzz-")

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(scenario_texts())
    def fuzz(text: str) -> None:
        check_load_render(text, folder)

    fuzz()


_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
sys.path.insert(0, {here!r})
import test_scenario_fuzz
from inspector.testing import hyp
hyp.load()  # the parent's profile (HYPOTHESIS_PROFILE / CI pass through the environment)
test_scenario_fuzz.run_fuzz(hyp.examples({n}))
print("fuzz: done")
"""


def test_fuzzed_scenario_files_never_trace_back_under_1_gib() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD.format(limit=LIMIT, here=str(HERE), n=250)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=str(REPO),
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("fuzz: done"), proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario_texts())
def test_fuzzed_scenario_files_in_process(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """The same property in process, so that hypothesis shrinks a failure to a small file."""
    check_load_render(text, str(tmp_path_factory.mktemp("fuzz")))

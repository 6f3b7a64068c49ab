"""The Hypothesis profiles (inspector/testing/hyp.py, loaded by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.testing import hyp


def current() -> settings:
    """The loaded profile's settings (``settings.default`` is None only before Hypothesis has loaded one)."""
    loaded = settings.default
    assert loaded is not None
    return loaded


@pytest.fixture
def restore_profile() -> Iterator[None]:
    before = current()
    yield
    settings.load_profile(hyp.profile_name())  # (the conftest's choice; the suite runs without --hypothesis-profile)
    assert current().max_examples == before.max_examples


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({}, "dev"),
        ({"CI": ""}, "dev"),
        ({"CI": "1"}, "ci"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "nightly"}, "nightly"),
        ({"HYPOTHESIS_PROFILE": "ci"}, "ci"),
        ({"HYPOTHESIS_PROFILE": " dev "}, "dev"),
    ],
)
def test_the_profile_is_chosen_by_hypothesis_profile_then_ci(env: dict[str, str], name: str) -> None:
    assert hyp.profile_name(env) == name


def test_an_unknown_profile_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match=r"HYPOTHESIS_PROFILE='fast': expected one of dev, ci, nightly"):
        hyp.profile_name({"HYPOTHESIS_PROFILE": "fast"})


def test_the_suite_runs_under_the_profile_the_environment_names() -> None:
    assert current().max_examples == round(100 * hyp.SCALES[hyp.profile_name()])


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("dev", {300: 30, 25: 5, 3: 3, 1: 1}),
        ("ci", {300: 300, 25: 25, 3: 3, 1: 1}),
        ("nightly", {300: 3000, 25: 250, 3: 30, 1: 10}),
    ],
)
def test_examples_scale_a_tests_ci_count_with_the_profile(
    restore_profile: None, name: str, counts: dict[int, int]
) -> None:
    hyp.load(name)
    assert {n: hyp.examples(n) for n in counts} == counts
    assert current().max_examples == hyp.examples(100)


@pytest.mark.parametrize("name", list(hyp.SCALES))
def test_no_profile_derandomizes_and_each_prints_the_blob(restore_profile: None, name: str) -> None:
    hyp.load(name)
    assert not current().derandomize
    assert current().print_blob
    assert current().deadline == hyp.DEADLINES[name]
    assert hyp.DEADLINES == {"dev": timedelta(milliseconds=200), "ci": None, "nightly": None}


def test_the_profiles_do_not_inherit_what_was_loaded_before_them(restore_profile: None) -> None:
    # with CI set, Hypothesis loads its own ci profile at import (derandomized, no deadline, no database): the
    # official CI's dev profile inherited its deadline=None, which this suite pinned only on a machine without CI
    settings.register_profile("inherited", derandomize=True, deadline=None, database=None, max_examples=7)
    settings.load_profile("inherited")
    hyp.load("dev")
    assert current().deadline == timedelta(milliseconds=200)
    assert not current().derandomize
    assert current().database is not None  # Hypothesis's default example database, as without CI


def test_two_runs_draw_different_examples(restore_profile: None) -> None:
    hyp.load("ci")
    runs: list[list[int]] = []

    @settings(max_examples=20, database=None)
    @given(st.integers(min_value=0, max_value=2**60))
    def draw(n: int) -> None:
        runs[-1].append(n)

    for _ in range(2):
        runs.append([])
        draw()
    assert runs[0] != runs[1]  # the same 20 draws from 2**60 twice only if the seed were fixed


def test_a_failure_prints_how_to_reproduce_it(restore_profile: None) -> None:
    hyp.load("ci")

    @settings(max_examples=50, database=None)
    @given(st.integers())
    def fails(n: int) -> None:
        assert n < 10

    with pytest.raises(AssertionError) as info:
        fails()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "fails(\n    n=10,\n)" in notes  # the smallest failing example
    assert "@reproduce_failure(" in notes


# the test packages whose properties issue 17 §5 moved onto the profiles (inspector/agent and inspector/state have none)
SCALED_AREAS = ("agent", "state")


def _example_counts(profile: str) -> dict[str, int]:
    """max_examples of every Hypothesis test in SCALED_AREAS, each module executed afresh under `profile` (under its
    own name: the modules pytest collected are not touched)."""
    import importlib.util
    import inspect
    import sys
    from pathlib import Path

    hyp.load(profile)
    counts: dict[str, int] = {}
    for area in SCALED_AREAS:
        for path in sorted((Path(__file__).resolve().parents[1] / area).glob("test_*.py")):
            spec = importlib.util.spec_from_file_location(f"_profile_probe_{area}_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # (dataclasses look their module up there)
            try:
                spec.loader.exec_module(module)
            finally:
                del sys.modules[spec.name]
            found = [(name, obj) for name, obj in vars(module).items() if inspect.isfunction(obj)]
            for cname, cls in [(n, o) for n, o in vars(module).items() if inspect.isclass(o) and n.startswith("Test")]:
                found += [(f"{cname}.{n}", o) for n, o in vars(cls).items() if inspect.isfunction(o)]
            for name, fn in found:
                if getattr(fn, "is_hypothesis_test", False):
                    counts[f"{area}/{path.name}::{name}"] = vars(fn)["_hypothesis_internal_use_settings"].max_examples
    return counts


def test_agent_and_state_properties_scale_with_the_profile(restore_profile: None) -> None:
    """Every property of tests/agent and tests/state runs ten times as many examples under nightly as under ci: none
    keeps a fixed max_examples (write max_examples=examples(N))."""
    ci, nightly = _example_counts("ci"), _example_counts("nightly")
    assert len(ci) >= 10 and ci.keys() == nightly.keys()
    fixed = {name: n for name, n in ci.items() if nightly[name] != 10 * n}
    assert fixed == {}, f"max_examples that ignore the profile: {fixed}"

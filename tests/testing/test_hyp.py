"""The Hypothesis profiles (inspector/testing/hyp.py, loaded by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.testing import hyp


@pytest.fixture
def restore_profile() -> Iterator[None]:
    before = settings.default
    yield
    settings.load_profile(hyp.profile_name())  # (the conftest's choice; the suite runs without --hypothesis-profile)
    assert settings.default.max_examples == before.max_examples


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
def test_the_profile_is_chosen_by_hypothesis_profile_then_ci(env, name):
    assert hyp.profile_name(env) == name


def test_an_unknown_profile_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"HYPOTHESIS_PROFILE='fast': expected one of dev, ci, nightly"):
        hyp.profile_name({"HYPOTHESIS_PROFILE": "fast"})


def test_the_suite_runs_under_the_profile_the_environment_names():
    assert settings.default.max_examples == round(100 * hyp.SCALES[hyp.profile_name()])


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("dev", {300: 30, 25: 5, 3: 3, 1: 1}),
        ("ci", {300: 300, 25: 25, 3: 3, 1: 1}),
        ("nightly", {300: 3000, 25: 250, 3: 30, 1: 10}),
    ],
)
def test_examples_scale_a_tests_ci_count_with_the_profile(restore_profile, name, counts):
    hyp.load(name)
    assert {n: hyp.examples(n) for n in counts} == counts
    assert settings.default.max_examples == hyp.examples(100)


@pytest.mark.parametrize("name", list(hyp.SCALES))
def test_no_profile_derandomizes_and_each_prints_the_blob(restore_profile, name):
    hyp.load(name)
    assert not settings.default.derandomize
    assert settings.default.print_blob
    assert settings.default.deadline == hyp.DEADLINES[name]
    assert hyp.DEADLINES == {"dev": timedelta(milliseconds=200), "ci": None, "nightly": None}


def test_the_profiles_do_not_inherit_what_was_loaded_before_them(restore_profile):
    # with CI set, Hypothesis loads its own ci profile at import (derandomized, no deadline, no database): the
    # official CI's dev profile inherited its deadline=None, which this suite pinned only on a machine without CI
    settings.register_profile("inherited", derandomize=True, deadline=None, database=None, max_examples=7)
    settings.load_profile("inherited")
    hyp.load("dev")
    assert settings.default.deadline == timedelta(milliseconds=200)
    assert not settings.default.derandomize
    assert settings.default.database is not None  # Hypothesis's default example database, as without CI


def test_two_runs_draw_different_examples(restore_profile):
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


def test_a_failure_prints_how_to_reproduce_it(restore_profile):
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


# the packages whose properties issue 17 §5 moved onto the profiles: a fixed count there ignores dev and nightly
SCALED_AREAS = ("tests/agent", "tests/state", "inspector/agent", "inspector/state")


def test_agent_and_state_properties_scale_with_the_profile():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    fixed = re.compile(r"max_examples\s*=\s*\d")
    found = [
        f"{path.relative_to(root)}:{n}"
        for area in SCALED_AREAS
        for path in sorted((root / area).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if fixed.search(line)
    ]
    assert found == [], f"write max_examples=examples(N) (inspector/testing/hyp.py) instead of a fixed count: {found}"

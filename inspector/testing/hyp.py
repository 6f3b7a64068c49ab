"""Hypothesis settings profiles for the test suite (issue 17 §5): one place decides how hard the properties search.

- ``dev``: a tenth of the CI counts, for the edit-test loop on a laptop;
- ``ci``: the counts the suite was tuned with (a test's ``examples(N)`` is N);
- ``nightly``: ten times as many, for a long search.

``ci`` and ``nightly`` have no deadline (a busy machine is not a failure); ``dev`` keeps Hypothesis's 200 ms.

The profile is chosen by ``HYPOTHESIS_PROFILE``; without it, ``ci`` when ``CI`` is set, else ``dev``. No profile
derandomizes: every run draws new examples (seeds vary run to run), and a failure prints what reproduces it (the
falsifying example, and with ``print_blob`` the ``@reproduce_failure`` line to paste).

A test that needs more (or fewer) examples than the profile's default writes ``max_examples=examples(N)``, N being
its CI count: the profile scales it. Used by tests/conftest.py; nothing in the package imports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta

from hypothesis import settings

# the profile's max_examples, and what a test's CI count is multiplied by under it
SCALES: dict[str, float] = {"dev": 0.1, "ci": 1.0, "nightly": 10.0}
DEADLINES: dict[str, timedelta | None] = {"dev": timedelta(milliseconds=200), "ci": None, "nightly": None}
CI_DEFAULT_EXAMPLES = 100  # Hypothesis's own default: what a test without max_examples ran in CI so far
DEV_FLOOR = 5  # under `dev`, a test still tries at least this many (or its whole CI count, if smaller)


def register() -> None:
    """Register the three profiles with Hypothesis (idempotent).

    Each is built on Hypothesis's own ``default`` profile, never on whatever is loaded: when ``CI`` is set, Hypothesis
    loads its built-in ``ci`` profile at import (derandomized, no deadline, no database), and a profile registered on
    top of it would inherit that silently (the official CI ran ``dev`` checks with no deadline).
    """
    base = settings.get_profile("default")
    for name, scale in SCALES.items():
        settings.register_profile(
            name,
            parent=base,
            max_examples=max(1, round(CI_DEFAULT_EXAMPLES * scale)),
            derandomize=False,
            print_blob=True,
            # dev keeps Hypothesis's 200 ms deadline (a slow example shows in the edit loop); on a loaded CI machine
            # a slow example is not a failure, as in Hypothesis's own ci profile
            deadline=DEADLINES[name],
        )


def profile_name(env: Mapping[str, str] | None = None) -> str:
    """The profile to run under: HYPOTHESIS_PROFILE, else ``ci`` when CI is set (non-empty), else ``dev``."""
    env = os.environ if env is None else env
    name = env.get("HYPOTHESIS_PROFILE", "").strip()
    if name:
        if name not in SCALES:
            raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: expected one of {', '.join(SCALES)}")
        return name
    return "ci" if env.get("CI", "").strip() else "dev"


def load(name: str | None = None) -> str:
    """Register the profiles and load ``name`` (default: `profile_name()`); the name loaded."""
    register()
    name = profile_name() if name is None else name
    settings.load_profile(name)
    return name


def scale() -> float:
    """The loaded profile's scale (its max_examples over the CI default)."""
    return settings().max_examples / CI_DEFAULT_EXAMPLES  # (settings(): the loaded profile's values)


def examples(ci_count: int) -> int:
    """``max_examples`` for a test whose CI count is ``ci_count``, under the loaded profile."""
    n = round(ci_count * scale())
    return max(n, min(ci_count, DEV_FLOOR), 1)

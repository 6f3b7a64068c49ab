"""The suite's Hypothesis profile (inspector/testing/hyp.py): `dev` by default, `ci` when CI is set, or the one
HYPOTHESIS_PROFILE names (`dev`, `ci`, `nightly`). Loaded here, before any test module is imported, so that the
`examples(N)` in their decorators scale with it. (Hypothesis's own `--hypothesis-profile` still wins.)

Each test also starts with the secrets the process knew before it: `core.redaction` learns every credential it sees
process-wide and never forgets one (a forgotten key would print in clear), so a key made up by one test (a
generated one can be `00000000`) would otherwise mask the digits in a later test's output."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inspector.core import redaction
from inspector.testing import hyp

hyp.load()


@pytest.fixture(autouse=True)
def _process_secrets_per_test() -> Iterator[None]:
    known = list(redaction.PROCESS_SECRETS.secrets)
    yield
    s = redaction.PROCESS_SECRETS
    if s.secrets != known:  # emptied in place (holders of the list see it), then the known ones again
        s.secrets[:] = []
        s.forms, s.first, s.chars, s.max = [], set(), frozenset(), 0
        s.add(known)

"""The suite's Hypothesis profile (inspector/testing/hyp.py): `dev` by default, `ci` when CI is set, or the one
HYPOTHESIS_PROFILE names (`dev`, `ci`, `nightly`). Loaded here, before any test module is imported, so that the
`examples(N)` in their decorators scale with it. (Hypothesis's own `--hypothesis-profile` still wins.)"""

from inspector.testing import hyp

hyp.load()

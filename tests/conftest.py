"""The suite's Hypothesis profile (inspector/testing/hyp.py): `dev` by default, `ci` when CI is set, or the one
HYPOTHESIS_PROFILE names (`dev`, `ci`, `nightly`). Loaded here, before any test module is imported, so that the
`examples(N)` in their decorators scale with it. (Hypothesis's own `--hypothesis-profile` still wins.)

Each test also starts with the secrets the process knew before it: `core.redaction` learns every credential it sees
process-wide and never forgets one (a forgotten key would print in clear), so a key made up by one test (a
generated one can be `00000000`) would otherwise mask the digits in a later test's output.

And every fuzz test (`test_fuzz*`: the readers of recordings, SSE, HAR, raw upstream answers through the proxy, live
faults...) runs with the address space bounded (RLIMIT_AS, 1 GiB above what the process maps): an input that made a
reader's memory explode fails as a MemoryError in that test, instead of passing on a machine with memory to spare.

And no server thread (`BackgroundServer`'s `uvicorn-...`) outlives the test that started it: one whose stop timed out
goes on running in the worker (an upstream that spun after its client left burned a CPU for the rest of the run and
slowed every later test of that worker 3-4 times).

And the stop-signal tests see the default dispositions whatever started the run: they send SIGINT and SIGHUP to
the commands they start and expect them handled, but a run started under nohup, or as a script's background job,
has them ignored, which every child inherits and, rightly, keeps (core.signals). This process ignores them with a
handler that does nothing instead (still ignored here; a handler is reset to the default in a child), and says so
to the xdist workers it starts (IGNORED_ENV), which do the same."""

from __future__ import annotations

import os
import resource
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from inspector.core import redaction
from inspector.testing import hyp

hyp.load()

IGNORED_ENV = "INSPECTOR_TESTS_IGNORED_SIGNALS"  # the stop signals the run was started with ignored (numbers)


def _ignore(signum: int, frame: object) -> None:
    """Ignores a stop signal, as SIG_IGN did, without a child inheriting it."""


def _children_get_default_stops() -> None:
    ignored = {int(x) for x in os.environ.get(IGNORED_ENV, "").split(",") if x}
    ignored |= {int(s) for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) is signal.SIG_IGN}
    for sig in ignored:
        signal.signal(sig, _ignore)
    if ignored:
        os.environ[IGNORED_ENV] = ",".join(map(str, sorted(ignored)))


_children_get_default_stops()


@pytest.fixture(autouse=True)
def _process_secrets_per_test() -> Iterator[None]:
    known = list(redaction.PROCESS_SECRETS.secrets)
    environment = list(redaction.ENVIRONMENT_KEYS)
    yield
    redaction.ENVIRONMENT_KEYS[:] = environment  # (an in-process `main` learns the environment's: not for the next)
    s = redaction.PROCESS_SECRETS
    if s.secrets != known:  # emptied in place (holders of the list see it), then the known ones again
        s.clear()
        s.add(known)


HEADROOM = 1 << 30  # bytes of address space a fuzz test may map above what the process maps when it starts


def _mapped() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(autouse=True)
def _fuzz_memory_bound(request: pytest.FixtureRequest) -> Iterator[None]:
    if not request.node.name.startswith("test_fuzz") or not Path("/proc/self/status").exists():
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped() + HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


SERVER_THREAD = "uvicorn-"  # the name prefix of BackgroundServer's threads (inspector.net.server)


def _server_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(SERVER_THREAD) and t.is_alive()}


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test() -> Iterator[None]:
    before = _server_threads()  # (a module- or session-scoped server is up already: not this test's)
    yield
    left = sorted(t.name for t in _server_threads() - before)
    assert not left, f"server threads still running after the test (their stop timed out): {left}"


STOPS = ("SIGINT", "SIGTERM", "SIGHUP")  # (by name: SIGHUP is POSIX only)


@pytest.fixture(autouse=True)
def _no_stop_left_ignored() -> Iterator[None]:
    """A test that leaves a stop signal ignored in the test process (``inspector.__main__.entry`` ignores them once
    its command returned: the console script's process exits then) makes every process started after it inherit it
    ignored: a proxy or serve child then outlived SIGTERM, or ended 0 on SIGHUP, in unrelated tests."""
    sigs = [getattr(signal, name) for name in STOPS if hasattr(signal, name)]
    before = {sig: signal.getsignal(sig) for sig in sigs}
    yield
    left = [sig for sig in sigs if signal.getsignal(sig) == signal.SIG_IGN and before[sig] != signal.SIG_IGN]
    for sig in left:
        signal.signal(sig, before[sig])
    assert not left, f"the test left {[signal.Signals(s).name for s in left]} ignored"

"""The readers' fuzz tests run with the address space bounded (RLIMIT_AS): an input that made a reader's memory
explode fails as a MemoryError in that test, instead of passing on a machine with memory to spare."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

HEADROOM = 1 << 30  # 1 GiB above what the test process already maps


def _mapped() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(autouse=True)
def _bounded_memory(request: pytest.FixtureRequest) -> Iterator[None]:
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

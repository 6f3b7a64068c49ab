"""The address-space bound of the fuzz tests (tests/conftest.py) is in force while they run."""

from __future__ import annotations

import pytest


def test_fuzz_the_memory_bound_is_in_force() -> None:
    with pytest.raises(MemoryError):
        bytearray(3 << 30)  # 3 GiB: past the 1 GiB above what the process maps

"""The process-wide collector policy (inspector/core/gcpolicy.py): the command's entry point applies it; a caller of
``inspector.cli.main`` keeps its own settings."""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Iterator

import pytest

import inspector.cli
from inspector.core.gcpolicy import FIRST_THRESHOLD, tune_gc


@pytest.fixture
def thresholds() -> Iterator[tuple[int, ...]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield before
    gc.set_threshold(*before)


def test_tune_gc_raises_only_the_first_threshold(thresholds: tuple[int, ...]) -> None:
    assert tune_gc() == (700, 10, 10)
    assert gc.get_threshold() == (FIRST_THRESHOLD, 10, 10)
    assert gc.isenabled()  # cycles are still collected: less often, not never


def test_tune_gc_never_lowers_a_higher_threshold(thresholds: tuple[int, ...]) -> None:
    gc.set_threshold(FIRST_THRESHOLD * 3, 5, 7)
    tune_gc()
    assert gc.get_threshold() == (FIRST_THRESHOLD * 3, 5, 7)


def test_the_entry_point_applies_it_before_the_command_runs(
    thresholds: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from inspector.__main__ import entry

    seen: list[tuple[int, ...]] = []

    def main() -> int:
        seen.append(gc.get_threshold())
        return 0

    monkeypatch.setattr(inspector.cli, "main", main)
    monkeypatch.setattr(sys, "argv", ["inspector", "scenarios"])
    # (entry() is the process's: once the command returned, it ignores SIGINT, SIGTERM and SIGHUP until the process
    # exits; this process goes on, and the processes it starts would inherit them ignored)
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.getsignal(sig) for sig in stops}
    try:
        assert entry() == 0
        assert {sig: signal.getsignal(sig) for sig in stops} == dict.fromkeys(stops, signal.SIG_IGN)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert seen == [(FIRST_THRESHOLD, 10, 10)]


def test_main_called_in_process_keeps_the_callers_settings(
    thresholds: tuple[int, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert inspector.cli.main(["scenarios"]) == 0
    assert gc.get_threshold() == (700, 10, 10)

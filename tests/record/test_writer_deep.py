"""The recording writer with a hostile value: as deep as orjson reads, with a lone surrogate, and a key to mask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inspector.core import exactjson
from inspector.record.writer import RecordingWriter

KEY = "sk-ant-api03-writer-deep-canary-0123456789"


@pytest.mark.parametrize("depth", [1000, 1023, 1030])
def test_a_deep_value_with_a_lone_surrogate_and_a_key_is_written_masked(tmp_path: Path, depth: int) -> None:
    """The surrogate makes orjson refuse the line, so the writer scrubs it; it then parsed its own line back to
    mask the key, which raised past orjson's read limit (1,024 levels; found in review). The line is written, the
    key masked, the surrogate replaced."""
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    path = tmp_path / "deep.jsonl"
    w = RecordingWriter(path, source={"kind": "test"}, secrets=[KEY])
    w.observation({"kind": "x", "v": {"a": value, "s": f"lone \udc80 {KEY}"}})
    w.close()
    text = path.read_text()
    assert KEY not in text and "[redacted]" in text
    last = text.splitlines()[-1]
    assert "lone" in last and "\\udc80" not in last
    with exactjson.deep_recursion():
        assert last.count("[") >= depth

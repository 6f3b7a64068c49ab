"""Big scenario files, for the cost of checking one (tools/bench_scenario_check.py, tests/scenarios): the text of a
valid scenario file of a given shape, about ``size`` bytes.

Shapes (each grows one part of a file):

- ``steps``: many turns, each a text and a tool call (a long agent session);
- ``recorded``: per turn, the per-delta sizes and per-read event counts and delays ``scenario from-recording`` writes
  (long lists of small numbers: the most values per byte);
- ``tools``: many simulated tools offered;
- ``faults``: many faults on one turn (``attempts: []``: none applies, each is still checked against the others);
- ``blocks``: turns of 20,000 blocks;
- ``numbers``: one list of one-character numbers (a turn's ``read_events``): the most values a byte can hold, two
  bytes each (a file of more than MAX_VALUES of them, past 2 MiB, is refused: it is the worst case for the reader).
"""

from __future__ import annotations

SHAPES = ("steps", "recorded", "tools", "faults", "blocks", "numbers")

_HEAD = """\
format: stream-inspector-scenario
version: 1
name: big
description: A big scenario file.
prompt: go
"""


def _repeat(size: int, head: str, tail: str, unit: str) -> str:
    """``head``, then ``unit`` (formatted with ``i``: its braces doubled) until the text is about ``size`` bytes (at
    least once), then ``tail``."""
    parts, total, i = [head], len(head) + len(tail), 0
    while total < size or i == 0:
        u = unit.format(i=i)
        parts.append(u)
        total += len(u)
        i += 1
    parts.append(tail)
    return "".join(parts)


def big_scenario(shape: str, size: int) -> str:
    """A valid scenario file of ``shape`` (one of SHAPES) of about ``size`` bytes (at least one unit)."""
    if shape == "steps":
        return _repeat(
            size,
            _HEAD + "tools:\n- name: step\n  description: One step.\n  result: done\nturns:\n",
            "- blocks: [{text: done}]\n",
            "- blocks:\n  - {{text: 'Step {i}.'}}\n  - tool_use: step\n    input: {{n: {i}}}\n  stop_reason: tool_use\n"
            "  usage: {{input_tokens: 100}}\n",
        )
    if shape == "recorded":
        sizes = ", ".join(["5"] * 40)
        reads = ", ".join(["1"] * 44)
        delays = ", ".join(["0.01"] * 44)
        return _repeat(
            size,
            _HEAD + "turns:\n",
            "",
            f"- blocks: [{{{{text: '{'x' * 200}', chunk: [{sizes}]}}}}]\n"
            f"  pacing: {{{{read_events: [{reads}], read_delays: [{delays}]}}}}\n",
        )
    if shape == "tools":
        return _repeat(
            size,
            _HEAD + "tools:\n",
            "turns:\n- blocks: [{text: done}]\n",
            "- name: tool_{i}\n  description: Tool number {i}.\n  result: done {i}\n",
        )
    if shape == "faults":
        return _repeat(
            size,
            _HEAD + "turns:\n- blocks: [{text: done}]\n  faults:\n",
            "",
            "  - {{type: error_event_after, n_events: {i}, attempts: []}}\n",
        )
    if shape == "blocks":  # (a new turn every 20,000 blocks: a turn renders at most 100,000 events)
        text = _repeat(size, _HEAD + "turns:\n- blocks:\n", "", "  - {{text: 'Block {i}.', chunk: 100}}\n")
        lines = text.split("\n")
        head = len(_HEAD.split("\n"))
        for at in range(len(lines) - 1 - 20_000, head, -20_000):
            lines.insert(at, "- blocks:")
        return "\n".join(lines)
    if shape == "numbers":
        first = _HEAD + "turns:\n- blocks: [{text: done}]\n  pacing: {read_events: [1"
        return first + ",1" * max(0, (size - len(first) - 3) // 2) + "]}\n"
    raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")

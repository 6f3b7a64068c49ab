"""The commented template ``inspector scenario new NAME`` writes: a complete, valid scenario to edit."""

from __future__ import annotations

import re

TEMPLATE = """\
# Scenario {name}: a scripted conversation the fake Messages API serves (inspector run/serve/web --scenario FILE).
# Format: docs/scenario-format.md; JSON Schema: docs/scenario.schema.json. Check it: inspector scenario check FILE
format: stream-inspector-scenario
version: 1
name: {name}
description: One line for `inspector scenarios`; say what this scenario shows.
prompt: What is the weather in Paris, and what is in the project README?
# system: null                  # no system prompt (default: a short coding-assistant prompt)
# model: claude-sonnet-4-6
# max_tokens: 4096
seed: 1                         # ids, jitter and random chunk sizes all derive from name + seed
workspace: parse_date           # a bundled workspace, or a folder under this file's folder (built-in tools use it)

tools:
  - builtin: read_file          # a built-in tool over the workspace, really run ...
    duration: [0.2, 0.6]        # ... after a simulated delay (seconds, or [min, max] drawn per call)
  - name: get_weather           # a simulated tool: never run, it answers what the file says
    description: Get the current weather in a given location.
    input_schema:
      type: object
      properties:
        location: {{type: string}}
      required: [location]
    duration: 0.3               # scenario seconds (scaled by --speed)
    result: {{temperature: 18, unit: celsius, conditions: partly cloudy}}
    cases:                      # first case whose input matches (a subset of the call's input) wins
      - input: {{location: Tokyo}}
        result: {{temperature: 24, unit: celsius, conditions: clear}}
      - input: {{location: Atlantis}}
        error: no such place    # the call fails: an is_error tool_result
    # hang: true                # never answers (then set timeout: seconds)
    # timeout: 1.5

turns:                          # turn i answers the request with i assistant messages
  - blocks:
      - text: Let me check the weather and read the README.
        chunk: {{min: 3, max: 14}} # characters per text_delta: N, [n1, n2, ...] (in turn) or {{min, max}} (seeded)
      - tool_use: get_weather
        input: {{location: Paris}}
        fragment: 12            # characters per input_json_delta
      - tool_use: read_file
        input: {{path: README.md}}
    stop_reason: tool_use
    usage: {{input_tokens: 600}}
    pacing:                     # scenario seconds; every field is optional
      ttfb: 0.4                 # request -> first byte
      event_gap: 0.04           # between events
      jitter: 0.3               # each gap * uniform(1 - jitter, 1 + jitter)
      events_per_read: 2        # events per network read
      ping_every: 25
      pad: true                 # trailing spaces after the data JSON, like the real API
    faults:                     # what goes wrong, per attempt (0 = the first request of the turn)
      - type: error_event_after # HTTP 200, 5 events, then an overloaded_error event: the harness must retry
        n_events: 5
        attempts: [0]
    # http_errors:
    #   - {{status: 429, attempt: 0, retry_after_ms: 200}}
  - blocks:
      - text: It is 18 °C and partly cloudy in Paris; the README describes a small date-parsing library.
    usage: {{input_tokens: 900}}

expected:                       # what a headless run should end in (checked by the test suite for bundled files)
  status: finished
  turns: 2
  requests: 3
  final_stop_reason: end_turn
"""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def valid_name(name: str) -> bool:
    """A name a scenario file may carry (as ``filemodel``'s check: at most MAX_NAME, no newline), without an
    extension. (fullmatch: ``$`` would let a trailing newline through, and ``abc\\n.yaml`` be written.)"""
    from inspector.scenarios.filemodel import MAX_NAME

    return len(name) <= MAX_NAME and bool(_NAME.fullmatch(name)) and not name.endswith((".yaml", ".yml"))


def template(name: str) -> str:
    return TEMPLATE.format(name=name)

"""The bundled scenarios as they were defined in Python before they became files (test-only: the files in
inspector/scenarios/bundled/ must load into the same scenarios and render the same bytes).

``expected`` says what a headless run of the agent loop should end in:
    status            "finished" | "error" | "cancelled"
    turns             assistant turns whose stream completed (retried attempts not counted)
    requests          HTTP requests the server sees, SDK retries (429/529) and one harness retry per failed stream
    final_stop_reason stop_reason of the last completed turn
    tool_calls        [{"name", "outcome"}] for the tool_use blocks of completed turns, in order; outcome is a
                      ToolState value: "succeeded" | "failed" | "timed_out" | "not_run" (never started: invalid
                      or unterminated input)
"""

from __future__ import annotations

import asyncio
from typing import Any

from inspector.agent.toolbox.spec import ToolSpec
from inspector.core.errors import UnknownScenario
from inspector.scenarios.model import (
    DropAfter,
    ErrorEventAfter,
    HttpError,
    InvalidToolJson,
    MaxTokensCut,
    Pacing,
    RedactedThinkingBlock,
    Scenario,
    Sizes,
    StallWithPings,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    TurnScript,
    Usage,
)


def realistic(**over) -> Pacing:
    """Pacing close to the real API: ~0.4 s TTFB, 25-65 ms between events, a few events per read, pings, padding."""
    base: dict[str, Any] = dict(
        ttfb=0.4, event_gap=0.045, jitter=0.45, events_per_read=2, ping_every=25, pad=True, block_pause=0.08
    )
    base.update(over)
    return Pacing(**base)


def fast(**over) -> Pacing:
    """Short pacing for the fault scenarios: the fault is the point, not the typing effect."""
    base: dict[str, Any] = dict(ttfb=0.3, event_gap=0.03, jitter=0.3, events_per_read=1, ping_every=30, pad=True)
    base.update(over)
    return Pacing(**base)


def _ok(name: str) -> dict:
    return {"name": name, "outcome": "succeeded"}


# --- parse_date: the default demo ------------------------------------------------------------------------------

PARSE_DATE_PROMPT = (
    "parse_date in src/dates.py fails on some inputs from the CSV importer, but all the tests pass. Why? Suggest a fix."
)

PARSE_DATE_ANSWER = """The failures come from the month-name branch of `parse_date`, and there is a second, quieter bug \
in the ISO branch.

**1. Full month names raise `KeyError`.** `_MONTHS` is keyed by three-letter abbreviations (`"mar"`), but the lookup \
uses the whole word: `_MONTHS[month_name.lower()]`. So `"5 Mar 2024"` works while `"5 March 2024"` looks up `"march"` \
and raises `KeyError: 'march'`. The 1.3.0 changelog promises full names, and 1.1.0 promises that only `ValueError` \
escapes, so importers that catch `ValueError` crash. The tests only use abbreviations, which is why they pass.

**2. ISO dates accept trailing garbage.** `_ISO.match` anchors only at the start, so `"2024-03-055"` quietly parses \
as 5 March 2024.

A fix:

```python
_FULL = ["january", "february", "march", "april", "may", "june", "july",
         "august", "september", "october", "november", "december"]
_MONTHS = {name: i for i, full in enumerate(_FULL, 1) for name in (full, full[:3])}
_MONTHS["sept"] = 9

    m = _ISO.fullmatch(text)
    ...
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unknown month: {month_name!r}")
```

Add `("5 March 2024", date(2024, 3, 5))` to the accepted cases and `"2024-03-055"` to the rejected ones, so both \
regressions stay covered."""

PARSE_DATE = Scenario(
    name="parse_date",
    description="Default demo: three parallel read_file calls, then an answer with a fix (about 7 s at 1x).",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file", "list_dir", "search_text"],
    workspace="parse_date",
    seed=101,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("I'll look at the parser, its tests and the changelog."),
                ToolUseBlock("read_file", {"path": "src/dates.py"}),
                ToolUseBlock("read_file", {"path": "tests/test_dates.py"}),
                ToolUseBlock("read_file", {"path": "CHANGELOG.md"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=1480),
            pacing=realistic(),
        ),
        TurnScript(
            blocks=[TextBlock(PARSE_DATE_ANSWER, chunk=Sizes(6, 18))],
            stop_reason="end_turn",
            usage=Usage(input_tokens=3120),
            pacing=realistic(ttfb=0.6, event_gap=0.036, events_per_read=3),
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file")] * 3,
    },
)


# --- weather ---------------------------------------------------------------------------------------------------

_WEATHER = {"paris": (18, "partly cloudy"), "london": (14, "light rain"), "tokyo": (24, "clear")}


def _get_weather(args: dict) -> dict:
    city = str(args.get("location", "")).split(",")[0].strip().lower()
    temp_c, conditions = _WEATHER.get(city, (20, "clear"))
    unit = args.get("unit", "celsius")
    temp = temp_c if unit == "celsius" else round(temp_c * 9 / 5 + 32)
    return {"location": args.get("location"), "temperature": temp, "unit": unit, "conditions": conditions}


GET_WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather in a given location.",
    input_schema={
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["location"],
    },
    fn=_get_weather,
    concurrency_safe=True,
)

WEATHER = Scenario(
    name="weather",
    description="The classic: one get_weather call, then a one-line answer.",
    prompt="What's the weather like in Paris right now?",
    system=None,
    extra_tools=[GET_WEATHER],
    seed=202,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Let me check the current weather in Paris."),
                ToolUseBlock("get_weather", {"location": "Paris, France", "unit": "celsius"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=410),
            pacing=realistic(),
        ),
        TurnScript(
            blocks=[TextBlock("It's 18 °C and partly cloudy in Paris right now: a light jacket should do.")],
            usage=Usage(input_tokens=520),
            pacing=realistic(),
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("get_weather")],
    },
)


# --- thinking --------------------------------------------------------------------------------------------------

THINKING = Scenario(
    name="thinking",
    description="Extended thinking: thinking + signature deltas, a redacted block, then a list_dir call.",
    prompt="What is in this project, and where would date parsing live?",
    tools=["list_dir", "read_file"],
    workspace="parse_date",
    thinking_budget=2048,
    seed=303,
    turns=[
        TurnScript(
            blocks=[
                ThinkingBlock(
                    "The user wants an overview of the project and where date parsing would be. I don't know the "
                    "layout yet, so the first step is to list the top-level directory. If there is a src/ folder "
                    "I can look for a module with 'date' in its name; tests/ would confirm which functions are "
                    "public. Listing '.' is cheap and safe, so start there.",
                    signature="ErUBCkYIBRgCIkCzZ3pGkFXJbO0wDv2BqGxmQWFh7b6pOc1mFkRz0UeYt2C0cmVhc29uaW5nEgx"
                    "hc2lnbmF0dXJlGgxzY2VuYXJpby1maWxlIjBAY2xhdWRlLXNjZW5hcmlvLXRoaW5raW5nLXNpZw==",
                ),
                RedactedThinkingBlock(),
                TextBlock("Let me see how the project is laid out."),
                ToolUseBlock("list_dir", {"path": "."}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=690),
            pacing=realistic(),
        ),
        TurnScript(
            blocks=[
                TextBlock(
                    "It's a small library, `invoicekit`: `src/dates.py` holds `parse_date` (ISO, day-first "
                    "slashed dates and month names), `tests/test_dates.py` covers it, and `CHANGELOG.md` tracks "
                    "the formats added per release. Date parsing lives in `src/dates.py`."
                )
            ],
            usage=Usage(input_tokens=980),
            pacing=realistic(),
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("list_dir")],
    },
)


# --- big_input -------------------------------------------------------------------------------------------------


def _big_csv(target_bytes: int = 200 * 1024) -> str:
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    lines = ["id,raw,expected"]
    size, i = len(lines[0]) + 1, 0
    while size < target_bytes:
        y, m, d = 1990 + i % 35, 1 + i % 12, 1 + i % 28
        raw = (f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}", f"{d} {months[m - 1]} {y}")[i % 3]
        line = f'{i},"{raw}",{y}-{m:02d}-{d:02d}'
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines) + "\n"


BIG_CSV = _big_csv()

BIG_INPUT = Scenario(
    name="big_input",
    description="write_file with ~200 KB of content in 20-byte fragments: where O(n^2) re-parsing hurts.",
    prompt="Generate a 200 KB CSV fixture of dates in all three formats at tests/fixtures/dates_200k.csv.",
    tools=["write_file", "read_file"],
    workspace="parse_date",
    workspace_copy=True,
    allow_write=True,
    seed=404,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Writing the fixture now."),
                ToolUseBlock("write_file", {"path": "tests/fixtures/dates_200k.csv", "content": BIG_CSV}, fragment=20),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=520, output_tokens=61_000),
            pacing=Pacing(ttfb=0.4, event_gap=0.0005, events_per_read=40, ping_every=500, pad=True),
        ),
        TurnScript(
            blocks=[
                TextBlock(
                    f"Done: tests/fixtures/dates_200k.csv has {BIG_CSV.count(chr(10)) - 1} rows "
                    f"({len(BIG_CSV.encode()):,} bytes), cycling through ISO, day-first and month-name "
                    "formats."
                )
            ],
            usage=Usage(input_tokens=700),
            pacing=realistic(),
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("write_file")],
    },
)


# --- exclusive_mix ---------------------------------------------------------------------------------------------

EXCLUSIVE_MIX = Scenario(
    name="exclusive_mix",
    description="read, write, read in one turn: the write is a barrier the second read may not overtake.",
    prompt="Read the parser, write a NOTES.md summarising it, and read the changelog.",
    tools=["read_file", "write_file"],
    workspace="parse_date",
    workspace_copy=True,
    allow_write=True,
    seed=505,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Reading, writing the notes, then the changelog."),
                ToolUseBlock("read_file", {"path": "src/dates.py"}),
                ToolUseBlock(
                    "write_file",
                    {
                        "path": "NOTES.md",
                        "content": (
                            "# Notes\n\n- `parse_date` accepts ISO, day-first slashed dates and month names.\n"
                            "- Month names are looked up by their first three letters.\n"
                        ),
                    },
                ),
                ToolUseBlock("read_file", {"path": "CHANGELOG.md"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=900),
            pacing=realistic(),
        ),
        TurnScript(
            blocks=[TextBlock("NOTES.md is written; the changelog confirms full month names were promised in 1.3.0.")],
            usage=Usage(input_tokens=1900),
            pacing=realistic(),
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file"), _ok("write_file"), _ok("read_file")],
    },
)


# --- fault scenarios -------------------------------------------------------------------------------------------

_LOOK = "I'll read the parser first."
_SHORT_ANSWER = (
    "`_MONTHS` is keyed by three-letter abbreviations but looked up with the full word, so "
    "\"5 March 2024\" raises KeyError: 'march'. Look up `month_name[:3].lower()` or add the full names."
)


def _read_turn(pacing: Pacing, *faults, http_errors=(), extra_blocks=()) -> TurnScript:
    return TurnScript(
        blocks=[TextBlock(_LOOK), ToolUseBlock("read_file", {"path": "src/dates.py"}), *extra_blocks],
        stop_reason="tool_use",
        usage=Usage(input_tokens=1300),
        pacing=pacing,
        faults=list(faults),
        http_errors=list(http_errors),
    )


def _answer_turn(pacing: Pacing | None = None, text: str = _SHORT_ANSWER, **kw) -> TurnScript:
    return TurnScript(blocks=[TextBlock(text)], usage=Usage(input_tokens=2400), pacing=pacing or fast(), **kw)


OVERLOADED_MIDSTREAM = Scenario(
    name="overloaded_midstream",
    description="HTTP 200, some text, then an overloaded_error event: the SDK does not retry, the harness must.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    seed=606,
    turns=[
        _read_turn(fast(), ErrorEventAfter(n_events=5, error_type="overloaded_error", message="Overloaded")),
        _answer_turn(),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 3,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file")],
    },
)

DROP_MID_JSON = Scenario(
    name="drop_mid_json",
    description="The connection drops inside the second tool's JSON (the first one was complete); the retry works.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    seed=707,
    turns=[
        _read_turn(
            fast(),
            DropAfter(inside_block=2, after_fragments=2, cut_bytes=60),
            extra_blocks=[ToolUseBlock("read_file", {"path": "tests/test_dates.py"})],
        ),
        _answer_turn(),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 3,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file"), _ok("read_file")],
    },
)

STALL_WITH_PINGS = Scenario(
    name="stall_with_pings",
    description="After message_start only pings, then silence: an idle timeout (2 s) must fire; the retry works.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    seed=808,
    idle_timeout=2.0,
    turns=[
        _read_turn(fast(), StallWithPings(after_events=1, ping_interval=0.5, pings=20, then="hang")),
        _answer_turn(),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 3,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file")],
    },
)

INVALID_JSON = Scenario(
    name="invalid_json",
    description="Fine-grained streaming: the second of two parallel calls ends with invalid JSON; it must not run.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    eager_input_streaming=True,
    seed=909,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("I'll read the parser and the changelog."),
                ToolUseBlock("read_file", {"path": "src/dates.py"}),
                ToolUseBlock("read_file", {"path": "CHANGELOG.md"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=1300),
            pacing=fast(),
            # Cut inside a key: the SDK's partial parser turns this into {"path": "CHANGELOG.md"} and would run it.
            faults=[InvalidToolJson(block=2, raw_json='{"path": "CHANGELOG.md", "max_by')],
        ),
        _answer_turn(
            text="The changelog call failed (its input arrived as invalid JSON), but the parser is enough: "
            + _SHORT_ANSWER
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file"), {"name": "read_file", "outcome": "not_run"}],
    },
)

MAX_TOKENS_CUT = Scenario(
    name="max_tokens_cut",
    description="max_tokens hits inside a write_file call: no content_block_stop; the tool must not run.",
    prompt="Rewrite src/dates.py with full month-name support.",
    tools=["read_file", "write_file"],
    workspace="parse_date",
    workspace_copy=True,
    allow_write=True,
    max_tokens=256,
    seed=1010,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Here is the rewritten module."),
                ToolUseBlock(
                    "write_file",
                    {
                        "path": "src/dates.py",
                        "content": (
                            '"""Parse the date formats our invoices and exports actually contain."""\n\n'
                            "from __future__ import annotations\n\nimport re\nfrom datetime import date\n\n"
                            '_FULL = ["january", "february", "march", "april", "may", "june", "july",\n'
                            '         "august", "september", "october", "november", "december"]\n'
                        ),
                    },
                ),
            ],
            stop_reason="tool_use",  # what it would have been; MaxTokensCut turns it into max_tokens
            usage=Usage(input_tokens=1500, output_tokens=256),
            pacing=fast(),
            faults=[MaxTokensCut(block=1)],
        )
    ],
    expected={
        "status": "finished",
        "turns": 1,
        "requests": 1,
        "final_stop_reason": "max_tokens",
        "tool_calls": [{"name": "write_file", "outcome": "not_run"}],
    },
)

RATE_LIMITED = Scenario(
    name="rate_limited",
    description="429 with retry-after-ms, then 529 overloaded on the next turn: the SDK retries both by itself.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    seed=1111,
    turns=[
        _read_turn(fast(), http_errors=[HttpError(429, attempt=0, retry_after_ms=200, retry_after=1)]),
        _answer_turn(http_errors=[HttpError(529, attempt=0, retry_after_ms=300)]),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 4,
        "final_stop_reason": "end_turn",
        "tool_calls": [_ok("read_file")],
    },
)


def _run_tests(args: dict) -> str:
    raise RuntimeError(
        "pytest could not start: ImportError while loading conftest (ModuleNotFoundError: No module named 'src')"
    )


RUN_TESTS = ToolSpec(
    name="run_tests",
    description="Run the project's test suite (optionally a subset) and return the report.",
    input_schema={"type": "object", "properties": {"select": {"type": "string"}}},
    fn=_run_tests,
    concurrency_safe=True,
)

TOOL_RAISES = Scenario(
    name="tool_raises",
    description="A tool raises: its call gets an is_error result, the parallel read still succeeds.",
    prompt="Run the date tests and show me the parser.",
    tools=["read_file"],
    extra_tools=[RUN_TESTS],
    workspace="parse_date",
    seed=1212,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Running the tests and reading the parser."),
                ToolUseBlock("run_tests", {"select": "tests/test_dates.py"}),
                ToolUseBlock("read_file", {"path": "src/dates.py"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=1100),
            pacing=fast(),
        ),
        _answer_turn(
            text="The test run failed before collecting anything (the `src` package is not importable "
            "from the test runner's working directory); here is the parser meanwhile. " + _SHORT_ANSWER
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [{"name": "run_tests", "outcome": "failed"}, _ok("read_file")],
    },
)


async def _wait_for_ci(args: dict) -> str:
    await asyncio.Event().wait()  # the CI never answers
    return "unreachable"  # pragma: no cover


WAIT_FOR_CI = ToolSpec(
    name="wait_for_ci",
    description="Wait for the CI run of a branch to finish and return its status.",
    input_schema={"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]},
    fn=_wait_for_ci,
    concurrency_safe=True,
)

TOOL_HANGS = Scenario(
    name="tool_hangs",
    description="A tool never returns: after its 1.5 s timeout it gets a timed_out result; the model answers.",
    prompt="Is CI green on main? And show me the parser.",
    tools=["read_file"],
    extra_tools=[WAIT_FOR_CI],
    tool_timeouts={"wait_for_ci": 1.5},
    workspace="parse_date",
    seed=1313,
    turns=[
        TurnScript(
            blocks=[
                TextBlock("Checking CI and reading the parser."),
                ToolUseBlock("wait_for_ci", {"branch": "main"}),
                ToolUseBlock("read_file", {"path": "src/dates.py"}),
            ],
            stop_reason="tool_use",
            usage=Usage(input_tokens=1000),
            pacing=fast(),
        ),
        _answer_turn(
            text="CI did not answer within the timeout, so I can't tell whether main is green. "
            "The parser is in src/dates.py; note that " + _SHORT_ANSWER
        ),
    ],
    expected={
        "status": "finished",
        "turns": 2,
        "requests": 2,
        "final_stop_reason": "end_turn",
        "tool_calls": [{"name": "wait_for_ci", "outcome": "timed_out"}, _ok("read_file")],
    },
)

PROXY_BUFFERED = Scenario(
    name="proxy_buffered",
    description="A buffering proxy holds the SSE back: nothing for seconds, then the whole answer in one burst.",
    prompt=PARSE_DATE_PROMPT,
    tools=["read_file"],
    workspace="parse_date",
    seed=1414,
    turns=[_answer_turn(realistic(proxy_buffer=1 << 20), text=PARSE_DATE_ANSWER)],
    expected={"status": "finished", "turns": 1, "requests": 1, "final_stop_reason": "end_turn", "tool_calls": []},
)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        PARSE_DATE,
        WEATHER,
        THINKING,
        BIG_INPUT,
        EXCLUSIVE_MIX,
        OVERLOADED_MIDSTREAM,
        DROP_MID_JSON,
        STALL_WITH_PINGS,
        INVALID_JSON,
        MAX_TOKENS_CUT,
        RATE_LIMITED,
        TOOL_RAISES,
        TOOL_HANGS,
        PROXY_BUFFERED,
    )
}

DEFAULT_SCENARIO = "parse_date"


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UnknownScenario(f"unknown scenario {name!r}; available: {', '.join(SCENARIOS)}") from None


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) for every bundled scenario, default first."""
    return [(s.name, s.description) for s in SCENARIOS.values()]


__all__ = ["SCENARIOS", "DEFAULT_SCENARIO", "get_scenario", "describe"]

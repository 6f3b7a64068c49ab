"""Scripted conversations served by an in-process fake Messages API, through the real anthropic SDK.

    from inspector.scenarios import get_scenario, ScenarioServer, make_client
    server = ScenarioServer(get_scenario("parse_date"), Pacer(2.0))
    client = make_client(server)
"""

from .bundled import DEFAULT_SCENARIO, SCENARIOS, describe, get_scenario
from .model import (
    Block,
    DropAfter,
    ErrorEventAfter,
    Fault,
    HttpError,
    InvalidToolJson,
    MaxTokensCut,
    Pacing,
    RedactedThinkingBlock,
    Scenario,
    ServerToolUseBlock,
    Sizes,
    StallWithPings,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    TurnScript,
    Usage,
    WholeBlock,
)
from .render import (
    PlannedRead,
    ResponsePlan,
    expected_blocks,
    expected_stop_reason,
    render_turn,
    render_turn_events,
)
from .transport import DROP_MESSAGE, RecordedRequest, ScenarioServer, ServedResponse, drop_error, make_client

__all__ = [
    "Block", "DEFAULT_SCENARIO", "DROP_MESSAGE", "DropAfter", "ErrorEventAfter", "Fault", "HttpError",
    "InvalidToolJson", "MaxTokensCut", "Pacing", "PlannedRead", "RecordedRequest", "RedactedThinkingBlock",
    "ResponsePlan", "SCENARIOS", "Scenario", "ScenarioServer", "ServedResponse", "ServerToolUseBlock", "Sizes",
    "StallWithPings", "TextBlock", "ThinkingBlock", "ToolUseBlock", "TurnScript", "Usage", "WholeBlock",
    "describe", "drop_error", "expected_blocks", "expected_stop_reason", "get_scenario", "make_client",
    "render_turn", "render_turn_events",
]

"""The in-process fake API with serve's faults (an ``httpx2.MockTransport`` handler): the same bytes as
``inspector serve --scenario S --fault F`` for the same requests, without a socket."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspector.core.pacing import Pacer
from inspector.net.faults import FaultSpec, apply_faults, parse_faults, plan_faults
from inspector.scenarios.model import (
    Scenario,
)
from inspector.scenarios.render import ResponsePlan, render_turn
from inspector.scenarios.render_openai import render_openai_turn
from inspector.scenarios.transport import ScenarioServer


class FaultedScenarioServer(ScenarioServer):
    """The in-process fake API (``httpx2.MockTransport`` handler) with serve's faults: the same bytes as
    ``inspector serve --scenario S --fault F`` for the same requests. It serves ``apply_faults(scenario, faults)``
    and renders with :meth:`render_plan` (render_turn + the plan-level faults), through ScenarioServer's
    ``render`` hook."""

    def __init__(
        self,
        scenario: Scenario,
        faults: str | Sequence[FaultSpec | str] | None = None,
        pacer: Pacer | None = None,
        **kw: Any,
    ) -> None:
        self.faults = parse_faults(faults)
        self.original = scenario
        super().__init__(
            apply_faults(scenario, self.faults),
            pacer,
            render=self.render_plan,
            render_openai=self.render_openai_plan,
            **kw,
        )

    def render_plan(self, faulted: Scenario, turn: int, attempt: int) -> ResponsePlan:
        """What serve sends for this turn and attempt (``faulted`` is this server's ``apply_faults`` scenario)."""
        return plan_faults(faulted, self.faults, render_turn(faulted, turn, attempt))

    def render_openai_plan(
        self, faulted: Scenario, turn: int, attempt: int, api: str, include_usage: bool, echo: dict
    ) -> ResponsePlan:
        """What serve sends for this turn and attempt to ``/v1/chat/completions`` (``api="chat"``) or
        ``/v1/responses`` (``echo``: the request fields its Response echoes)."""
        plan = render_openai_turn(faulted, turn, attempt, api=api, include_usage=include_usage, echo=echo)  # type: ignore[arg-type]
        return plan_faults(faulted, self.faults, plan)

"""The in-process fake API with serve's faults (an ``httpx2.MockTransport`` handler): the same bytes as
``inspector serve --scenario S --fault F`` for the same requests, without a socket."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from inspector.core.pacing import Pacer
from inspector.net.faults import FaultSpec, apply_faults, changes, faults_key, in_effect, parse_faults, plan_faults
from inspector.scenarios.fakeapi import Decision
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
        # the scenario with each set of faults in effect built in (at most 2 ** the @once faults: a handful)
        self._by_faults: dict[str, Scenario] = {}
        self._faults_of: dict[int, tuple[FaultSpec, ...]] = {}  # id of such a scenario -> its faults
        # the last request's @once faults and what became of them (FakeApi.hold_once)
        self.once_notes: dict[FaultSpec, str] = {}
        super().__init__(
            apply_faults(scenario, self.faults),
            pacer,
            render=self.render_plan,
            render_openai=self.render_openai_plan,
            **kw,
        )

    def plan_for(self, decision: Decision, api: str | None, body: Any) -> tuple[Scenario, ResponsePlan]:
        """The faults in effect for this request (the ``@turn`` ones, and the ``@once`` ones this turn holds: the
        first turn one changes takes it, as in serve), the scenario with them built in, and its plan."""
        once = [f for f in self.faults if f.once]
        if not once:
            return super().plan_for(decision, api, body)
        where = f"turn {(decision.turn or 0) + 1} attempt {(decision.attempt or 0) + 1}"

        def render(fs: tuple[FaultSpec, ...]) -> ResponsePlan:
            return self.render_with(self._faulted(fs), decision, api, body)

        def changed(held: Sequence[Hashable], fault: Hashable) -> bool:
            return changes(self.faults, held, fault, render)

        held, notes = self.api.hold_once(decision, once, changed, where)
        self.once_notes = {f: notes[f] for f in once}  # (hold_once notes each of them)
        now = in_effect(self.faults, held)
        return self._faulted(now), render(now)

    def _faulted(self, faults: tuple[FaultSpec, ...]) -> Scenario:
        key = faults_key(faults)
        sc = self._by_faults.get(key)
        if sc is None:
            sc = self._by_faults[key] = apply_faults(self.original, faults)
            self._faults_of[id(sc)] = faults  # (kept alive by _by_faults: the id stays its own)
        return sc

    def render_plan(self, faulted: Scenario, turn: int, attempt: int, seed: str = "") -> ResponsePlan:
        """What serve sends for this turn and attempt (``faulted`` is this server's ``apply_faults`` scenario;
        ``seed``: the conversation's message id seed, with ``seed_ids``)."""
        faults = self._faults_of.get(id(faulted), self.faults)
        return plan_faults(faulted, faults, render_turn(faulted, turn, attempt, seed))

    def render_openai_plan(
        self,
        faulted: Scenario,
        turn: int,
        attempt: int,
        api: str,
        include_usage: bool,
        echo: dict[str, Any],
        choices: int = 1,
    ) -> ResponsePlan:
        """What serve sends for this turn and attempt to ``/v1/chat/completions`` (``api="chat"``) or
        ``/v1/responses`` (``echo``: the request fields its Response echoes)."""
        plan = render_openai_turn(
            faulted,
            turn,
            attempt,
            api=api,  # type: ignore[arg-type]  # an OpenAIRenderer's api is a str: "chat" / "responses" (OPENAI_PATHS)
            include_usage=include_usage,
            echo=echo,
            choices=choices,
        )
        return plan_faults(faulted, self._faults_of.get(id(faulted), self.faults), plan)

"""Command palette: built from the App's BINDINGS (their descriptions, groups and tooltips), so there is one list of
commands, not two. Namespaced by what they do ("control: step event", "view: timing", "time travel: first")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

NAMESPACES = {
    "pause": "control",
    "step": "control",
    "cancel": "control",
    "restart": "control",
    "faster": "control",
    "slower": "control",
    "export": "export",
    "cursor": "time travel",
    "quit": "app",
}


def namespace(binding: Binding) -> str:
    bid = binding.id or binding.action
    for prefix, ns in NAMESPACES.items():
        if bid.startswith(prefix):
            return ns
    return "view"


def command_name(binding: Binding) -> str:
    """`control: step event` from the binding's group ("Step") and description ("Event")."""
    label = binding.description
    if binding.group is not None:
        label = f"{binding.group.description} {label}"
    return f"{namespace(binding)}: {label.lower()}"


def binding_commands(bindings: list[Any], get_key_display: Callable[[Binding], str]) -> Iterator[tuple[str, str, str]]:
    """(name, action, help) for every binding with an id (help: the key, then the tooltip)."""
    for b in bindings:
        if not isinstance(b, Binding) or not b.id or not b.description:
            continue
        yield command_name(b), b.action, f"{get_key_display(b)} · {b.tooltip or b.description}"


class InspectorCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app = self.app
        return [
            (name, partial(app.run_action, action), help_text)
            for name, action, help_text in binding_commands(list(type(app).BINDINGS), app.get_key_display)
        ]

    async def discover(self) -> Hits:
        for name, fn, help_text in self._commands():
            yield DiscoveryHit(name, fn, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, fn, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), fn, help=help_text)

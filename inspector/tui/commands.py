"""Command palette: every control and view action, namespaced ("control: pause", "view: raw bytes", ...)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider


class InspectorCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: Any = self.app
        return [
            ("control: pause / resume", app.action_toggle_pause, "space · running tools go on, queued ones wait"),
            ("control: step one event", partial(app.action_step, "event"), "n · process one SSE event, then pause"),
            (
                "control: step to the next block stop",
                partial(app.action_step, "block"),
                "b · run to content_block_stop",
            ),
            ("control: step to the end of the turn", partial(app.action_step, "turn"), "t · tools included"),
            ("control: cancel", app.action_cancel, "c · close the response, cancel tools, keep the history valid"),
            ("control: restart", app.action_restart, "r · the scenario or replay from the top"),
            ("control: faster", app.action_faster, "+ · scripted and replayed pacing"),
            ("control: slower", app.action_slower, "- · scripted and replayed pacing"),
            ("view: raw bytes / events", app.action_toggle_raw, "v · the SSE pane shows reads and their bytes"),
            ("view: timing", app.action_timing, "i · per-turn timing, gap histograms, pings, the buffering verdict"),
            ("view: maximize SSE events", partial(app.action_maximize, 1), "1"),
            ("view: maximize blocks", partial(app.action_maximize, 2), "2"),
            ("view: maximize tools", partial(app.action_maximize, 3), "3"),
            ("view: maximize assistant", partial(app.action_maximize, 4), "4"),
            ("time travel: first event", partial(app.action_cursor, "home"), "home"),
            ("time travel: one event back", partial(app.action_cursor, "prev"), "left"),
            ("time travel: one event forward", partial(app.action_cursor, "next"), "right"),
            ("time travel: back to live", partial(app.action_cursor, "end"), "end"),
            ("export: recording", app.action_export, "e · JSON Lines, replayable with `inspector replay`"),
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

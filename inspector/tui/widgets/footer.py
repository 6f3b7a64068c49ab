"""The key footer: Textual's Footer, made to fit any width.

The stock Footer lays every shown binding out in one scrolling row: at 80 columns it pushes `q Quit` off the screen
(leaving a stray first letter of the next key under the palette key), and its compact groups print their keys and
label without spaces (`nbt Stepc Cancel`). This one keeps the same FooterKey widgets (clickable, dimmed when
disabled, with tooltips) but:

- groups read `n/b/t Step`, with a space before the next key;
- when the row does not fit, the least important keys are left out (by `PRIORITY`, binding ids): pause, step,
  cancel and quit always stay. Everything left out is still in the command palette (ctrl+p) and still works.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

# Binding ids, most important first (what stays at 80 columns): the essentials, then by how often they are used.
PRIORITY = (
    "quit",
    "pause",
    "step-event",
    "step-block",
    "step-turn",
    "cancel",
    "conversations",
    "follow-newest",
    "restart",
    "faster",
    "slower",
    "detail",
    "request",
    "timing",
    "raw",
    "export",
    "max-events",
    "max-blocks",
    "max-tools",
    "max-assistant",
)
ESSENTIAL = frozenset({"quit", "pause", "step-event", "step-block", "step-turn", "cancel"})
PALETTE_WIDTH = 12  # "^p palette" docked on the right, with its border


class ExplainingKey(FooterKey):
    """A footer key that, when disabled and clicked, says why (the App's `run_action` explains a refused action)."""

    def on_mouse_down(self) -> None:
        # FooterKey.on_mouse_down (called too: handlers run along the MRO) rings the bell for a disabled key
        if self._disabled:
            self.app.call_later(self.app.run_action, self.action)


def _layout(signature: tuple[object, ...]) -> tuple[object, ...]:
    """What decides which keys the footer shows and where (`KeyFooter._signature` without each key's enabled state
    and tooltip)."""
    width, palette, keys = signature
    return (width, palette, tuple(k[:7] for k in keys))  # type: ignore[attr-defined]


def _key_tooltip(binding: Binding, tooltip: str, kind: str) -> str:
    """A key's tooltip, as `KeyFooter.compose` gives it and `_update_keys` keeps it (``kind``: "grouped", "single"
    or "palette"; ``tooltip``: the active binding's own, e.g. why it is disabled)."""
    if kind == "palette":
        return binding.tooltip or binding.description
    if kind == "grouped":
        return tooltip or binding.tooltip or binding.description
    return tooltip or binding.tooltip


def _rank(binding: Binding) -> int:
    bid = binding.id or binding.action
    return PRIORITY.index(bid) if bid in PRIORITY else len(PRIORITY)


class KeyFooter(Footer):
    """A footer whose keys fit the width: essentials always shown, groups spaced, no horizontal scrolling."""

    DEFAULT_CSS = """
    KeyFooter {
        overflow-x: hidden;
        KeyGroup.-compact { margin: 0 1 0 0; padding-left: 0; }
        KeyGroup.-compact FooterKey.-grouped { margin: 0; }
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(compact=True, **kw)
        self._fit_width = -1
        self.hidden_ids: list[str] = []  # what did not fit (tests)
        self._shown: tuple[object, ...] | None = None  # what the last compose showed (`_signature`)
        self.recomposed = 0  # composes with keys (tests)

    def _signature(self) -> tuple[object, ...]:
        """Everything the keys are made from: each active binding, enabled or not, its tooltip; the width."""
        active = self.screen.active_bindings
        keys = tuple(
            (key, b.id, b.action, b.show, b.description, b.group, b.tooltip, enabled, tooltip)
            for key, (_, b, enabled, tooltip) in active.items()
        )
        return (self.size.width or self.app.size.width, self.show_command_palette, keys)

    def bindings_changed(self, screen: Any) -> None:
        """(Textual's Footer recomposes, mounting every key again, at each bindings signal: a focus change, the screen
        stack, any `bindings=True` reactive. Most change nothing the keys show; those are skipped. One that only
        enables or disables keys, or changes their tooltips (the session starts, pauses, ends), updates the keys in
        place: mounting them again cost a layout of the screen, ~50 ms of the UI thread at each.)"""
        if self._bindings_ready and self._shown is not None and screen is self.screen and self.is_attached:
            signature = self._signature()
            if signature == self._shown:
                return
            if _layout(signature) == _layout(self._shown) and self._update_keys():
                self._shown = signature
                return
        super().bindings_changed(screen)

    def _update_keys(self) -> bool:
        """Each key's enabled state and tooltip from the active bindings, as `compose` makes them; False when a key
        shown has no binding (then the footer is composed again)."""
        active = self.screen.active_bindings
        keys = list(self.query(FooterKey))
        found = [active.get(k.key) for k in keys]
        if not keys or any(f is None for f in found):
            return False
        for key, (_, binding, enabled, tooltip) in zip(keys, found, strict=True):  # type: ignore[misc]
            kind = (
                "palette" if key.has_class("-command-palette") else "grouped" if key.has_class("-grouped") else "single"
            )
            tip = _key_tooltip(binding, tooltip, kind)
            if key._disabled != (not enabled):  # noqa: SLF001 (FooterKey's own flag: its click reads it)
                key._disabled = not enabled  # noqa: SLF001
                key.set_class(not enabled, "-disabled")
            if key.tooltip != (tip or None):
                key.tooltip = tip or None
        return True

    def on_resize(self) -> None:
        if self.size.width != self._fit_width and self._bindings_ready:
            self._fit_width = self.size.width
            self.call_after_refresh(self.recompose)

    @staticmethod
    def entry_width(bindings: list[tuple[Binding, str]]) -> int:
        """Cells one footer entry takes: `k Label ` or, for a group, `a/b/c Label `."""
        first = bindings[0][0]
        if first.group is not None and len(bindings) > 1:
            keys = "/".join(display for _, display in bindings)
            return cell_len(keys) + 1 + cell_len(first.group.description) + 1
        _, display = bindings[0]
        return cell_len(display) + 1 + cell_len(first.description) + 1

    def choose(self, entries: list[list[tuple[Binding, bool, str]]], width: int) -> list[int]:
        """Indices of the entries to show in `width` cells: by priority, the essentials whatever the width."""
        get_display = self.app.get_key_display
        widths = [self.entry_width([(b, get_display(b)) for b, _, _ in entry]) for entry in entries]
        order = sorted(range(len(entries)), key=lambda i: min(_rank(b) for b, _, _ in entries[i]))
        chosen: set[int] = set()
        used = 0
        for i in order:
            essential = any((b.id or "") in ESSENTIAL for b, _, _ in entries[i])
            if used + widths[i] <= width or essential:
                chosen.add(i)
                used += widths[i]
        return sorted(chosen)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        self._shown = self._signature()
        self.recomposed += 1
        active = self.screen.active_bindings
        by_action: defaultdict[str, list[tuple[Binding, bool, str]]] = defaultdict(list)
        for _, binding, enabled, tooltip in active.values():
            if binding.show:
                by_action[binding.action].append((binding, enabled, tooltip))
        # entries: consecutive actions of one group make one entry
        entries: list[list[tuple[Binding, bool, str]]] = []
        for items in by_action.values():
            first = items[0]
            group = first[0].group
            if entries and group is not None and entries[-1][0][0].group == group:
                entries[-1].append(first)
            else:
                entries.append([first])
        width = self.size.width or self.app.size.width
        self._fit_width = width  # (a resize to this width has nothing to fit again: `on_resize`)
        palette = self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE
        room = max(0, width - (PALETTE_WIDTH if palette else 0))
        shown = self.choose(entries, room)
        self.hidden_ids = [b.id or b.action for i, e in enumerate(entries) if i not in shown for b, _, _ in e]
        get_display = self.app.get_key_display
        for i in shown:
            entry = entries[i]
            binding, enabled, tooltip = entry[0]
            if binding.group is not None and len(entry) > 1:
                with KeyGroup(classes="-compact"):
                    for n, (b, on, tip) in enumerate(entry):
                        display = get_display(b) + ("/" if n < len(entry) - 1 else "")
                        yield ExplainingKey(
                            b.key,
                            display,
                            "",
                            b.action,
                            disabled=not on,
                            tooltip=_key_tooltip(b, tip, "grouped"),
                            classes="-grouped",
                        ).data_bind(compact=Footer.compact)
                    yield FooterLabel(f" {binding.group.description}")  # `n/b/t Step`, never `nbtStep`
            else:
                yield ExplainingKey(
                    binding.key,
                    get_display(binding),
                    binding.description,
                    binding.action,
                    disabled=not enabled,
                    tooltip=_key_tooltip(binding, tooltip, "single"),
                ).data_bind(compact=Footer.compact)
        if palette:
            try:
                _node, binding, enabled, tooltip = active[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            yield FooterKey(
                binding.key,
                get_display(binding),
                binding.description,
                binding.action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=_key_tooltip(binding, tooltip, "palette"),
            )


__all__ = ["KeyFooter", "PRIORITY", "ESSENTIAL"]

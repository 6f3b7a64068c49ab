"""The Tools pane: a row per tool call (executor state, elapsed, input and result summaries) and a timeline that
draws the model stream and each tool as bars on one time axis, with what streaming execution saved."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from inspector.core.fmt import duration
from inspector.observe.states import TOOL_TERMINAL
from inspector.state.fold import DashboardState, Savings, ToolEntry, call_summary
from inspector.tui.widgets.base import Line, SectionView, text_strip
from inspector.tui.widgets.wording import turn_label, turn_tag

GLYPH = {
    "streaming_input": "⋯",
    "queued": "◌",
    "running": "▶",
    "succeeded": "✓",
    "failed": "✗",
    "timed_out": "⏱",
    "cancelled": "⊘",
    "discarded": "⊘",
    "not_run": "⊘",
    "unknown": "?",
}
STATE_CLASS = {
    "streaming_input": "tool--streaming",
    "queued": "tool--queued",
    "running": "tool--running",
    "succeeded": "tool--ok",
    "failed": "tool--failed",
    "timed_out": "tool--failed",
    "cancelled": "tool--cancelled",
    "discarded": "tool--cancelled",
    "not_run": "tool--failed",
    "unknown": "tool--queued",
}
STATE_LABEL = {"streaming_input": "input", "timed_out": "timed out", "not_run": "not run"}
# a tool call whose times are inferred (the proxy: another harness ran it), never measured
INFERRED_LABEL = "inferred from the next request"
INFERRED_GLYPH = "≈"


def _ended(state: DashboardState, t: ToolEntry) -> bool:
    tr = state.turns.get(t.turn)
    return tr is not None and tr.t_end is not None


class _Done:
    """The settled prefix of the Tools pane's items: its first `tools` tool calls (each in a final state, its attempt
    and its turn ended) make its first `items` items, drawn for `state` as of its `rev_settled`. A settled tool may
    still change (a late result, an inferred run, a request's tool_result error): the fold bumps `rev_settled` then,
    and the prefix no longer `holds`."""

    __slots__ = ("state", "tools", "items", "turn", "rev", "many")

    def __init__(self, state: DashboardState | None = None) -> None:
        self.state = state
        self.tools = self.items = 0
        self.turn: int | None = None
        self.rev = -1 if state is None else state.rev_settled
        # several conversations: the turn rules name whose turn it is (`turn_label`), from the second one on
        self.many = state is not None and len(state.conversations) > 1

    def add(self, items: int, turn: int) -> None:
        self.tools += 1
        self.items, self.turn = items, turn

    def holds(self) -> bool:
        """No tool call or attempt of an ended turn changed since the prefix was drawn (O(1))."""
        state = self.state
        return state is not None and state.rev_settled == self.rev and (len(state.conversations) > 1) == self.many


class ToolsView(SectionView):
    """One row per tool call, grouped by turn."""

    COMPONENT_CLASSES = {
        "tool--turn",
        "tool--head",
        "tool--streaming",
        "tool--queued",
        "tool--running",
        "tool--ok",
        "tool--failed",
        "tool--cancelled",
        "tool--call",
        "tool--result",
        "tool--elapsed",
        "tool--error",
        "tool--empty",
        "tool--inferred",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    ToolsView > .tool--turn { color: $primary; text-style: bold; }
    ToolsView > .tool--head { color: $foreground-muted; }
    ToolsView > .tool--streaming { color: $foreground-muted; }
    ToolsView > .tool--queued { color: $warning; }
    ToolsView > .tool--running { color: $accent; text-style: bold; }
    ToolsView > .tool--ok { color: $success; }
    ToolsView > .tool--failed { color: $error; text-style: bold; }
    ToolsView > .tool--cancelled { color: $foreground-darken-3; }
    ToolsView > .tool--call { color: $foreground; }
    ToolsView > .tool--result { color: $foreground-muted; }
    ToolsView > .tool--elapsed { color: $foreground-muted; }
    ToolsView > .tool--error { color: $error; }
    ToolsView > .tool--empty { color: $foreground-darken-3; text-style: italic; }
    ToolsView > .tool--inferred { color: $warning-lighten-1; text-style: italic; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.now = 0.0
        self._seen: tuple[object, ...] = ()
        # the leading tools that are settled (a final state, their attempt and turn ended): their items are kept
        # from one frame to the next, as the Blocks pane keeps its ended attempts' (see `_settled`)
        self._done = _Done()

    def revisions(self, state: DashboardState) -> tuple[object, ...]:
        return (state.rev_tools, state.status.finished)

    def _settled(self, state: DashboardState, width: int) -> _Done:
        """The settled prefix of the last frame, if it still holds: the same state and width, and no tool in it (nor
        its attempt) changed since (the fold's `rev_settled`)."""
        done = self._done
        if done.state is not state or done.items > self.kept_items(width) or not done.holds():
            return _Done(state)
        return done

    def rebuild(self) -> None:
        state = self.state
        if state is None:
            return
        console = self.app.console
        width = self.content_width
        # a frame walks the tools from the first one not settled, not the whole session's (a long session has
        # thousands: walking them all cost ~20 ms a frame at 3,000)
        done = self._settled(state, width)
        start = done.items
        items: list[tuple[Hashable, Hashable, Any]] = []
        turn = done.turn
        order = state.tool_order
        settling = True
        for j in range(done.tools, len(order)):
            key = order[j]
            t = state.tools[key]
            if t.turn != turn:
                turn = t.turn
                label = f"── {turn_label(state, turn)} "
                items.append(
                    (
                        ("turn", turn),
                        label,
                        lambda w, label=label: [
                            text_strip(
                                Text(label + "─" * max(0, w - len(label)), self.cstyle("tool--turn")), console, w
                            )
                        ],
                    )
                )
            live = self.now if t.state == "running" else None
            a = state.attempts.get((t.turn, t.attempt))
            failed = a is not None and a.failed
            item = ("tool", key)
            items.append((item, (t.version, live, failed), lambda w, t=t, f=failed: self.render_tool(t, f, w)))
            if settling and t.state in TOOL_TERMINAL and a is not None and a.status is not None and _ended(state, t):
                done.add(start + len(items), turn)
            else:
                settling = False
        if not items and not start:
            finished = bool(state.status.finished)
            label = "no tool calls" + ("" if finished else " yet")
            items.append(
                ("empty", finished, lambda w: [text_strip(Text(label, self.cstyle("tool--empty")), console, w)])
            )
        self._done = done
        self.set_items(items, width, start=start)

    def detail_at(self, row: int) -> tuple[str, Any] | None:
        key = self.item_key_at(row)
        if isinstance(key, tuple) and key[0] == "tool" and self.state is not None and key[1] in self.state.tools:
            return ("tool", key[1])
        if isinstance(key, tuple) and key[0] == "turn":
            return ("turn", key[1])
        return None

    def render_tool(self, t: ToolEntry, failed: bool, width: int) -> list[Line]:
        console = self.app.console
        state_style = self.cstyle(STATE_CLASS.get(t.state, "tool--queued"))
        row = Text(no_wrap=True, overflow="ellipsis")
        label = STATE_LABEL.get(t.state, t.state)
        row.append(f"{GLYPH.get(t.state, '?')} {label:<9} ", state_style)
        el = t.elapsed(self.now)
        if t.inferred:  # an upper bound (block stop -> next request), not a run time
            row.append(f"{'≤' + duration(el) if el is not None else duration(el):>8} ", self.cstyle("tool--inferred"))
        else:
            row.append(f"{duration(el):>8} ", self.cstyle("tool--elapsed"))
        call = t.input_summary or streaming_call(self.state, t)
        wide = width >= 72
        call_w = max(16, (width - 19) * 11 // 20) if wide else width - 19
        if len(call) > call_w:
            call = call[: call_w - 1] + "…"
        row.append(f"{call:<{call_w}} " if wide else call, self.cstyle("tool--call"))
        lines = [row]
        result = t.error if (t.error and t.state != "succeeded") else t.result_summary
        if result:
            rstyle = (
                self.cstyle("tool--error")
                if (t.is_error or t.state in ("failed", "timed_out", "not_run"))
                else self.cstyle("tool--result")
            )
            if wide:
                row.append("→ " + result, rstyle)
            else:
                lines.append(Text("             → " + result, rstyle, no_wrap=True, overflow="ellipsis"))
        if t.inferred and t.state != "unknown":  # (unknown: no next request came; its error says why)
            lines.append(Text(f"{'':13}{INFERRED_GLYPH} {INFERRED_LABEL}", self.cstyle("tool--inferred"), no_wrap=True))
        if failed:
            for line in lines:
                line.stylize(self.cstyle("tool--cancelled"))
        return [text_strip(line, console, width) for line in lines]


def streaming_call(state: DashboardState | None, t: ToolEntry) -> str:
    """`name(arg="partial…` from the live partial parse of the tool's block while its input streams."""
    b = state.blocks.get((t.turn, t.attempt, t.index)) if state is not None else None
    if b is None or b.closed or not b.fragments:
        return f"{t.name}(…)"
    value, _err = b.preview()
    if isinstance(value, dict) and value:
        return call_summary(t.name, value)[:-1] + "…"
    return f"{t.name}(…)"


# ------------------------------------------------------------------------------------------------ timeline


@dataclass
class Bar:
    label: str
    segments: list[tuple[float, float, str]]  # (start, end, component class)
    note: str = ""


def turn_bars(state: DashboardState, turn: int, now: float) -> tuple[list[Bar], Savings | None]:
    """Bars of one turn (its attempts' streams with their failed HTTP tries, SDK waits and the user's holds, then
    its tools) and what streamed execution saved (`DashboardState.turn_savings`: used tools only)."""
    tr = state.turns.get(turn)
    if tr is None:
        return [], None
    bars: list[Bar] = []
    for a_no in tr.attempts:
        a = state.attempts.get((turn, a_no))
        if a is None:
            continue
        end = a.t_end if a.t_end is not None else now
        cls = "tl--failed" if a.failed else "tl--stream"
        segs: list[tuple[float, float, str]] = []
        sent = a.t_start
        for ht in a.tries:  # each failed try, then the SDK's wait before the next one
            segs.append((ht.t_sent, ht.t, "tl--failed"))
            if ht.t_retry is not None:
                segs.append((ht.t, min(ht.t_retry, end), "tl--retry"))
                sent = ht.t_retry
        first = a.t_first_byte if a.t_first_byte is not None else end
        segs += [(min(sent, end), min(first, end), "tl--wait"), (min(first, end), end, cls)]
        for h0, h1, _by in state.holds:  # the user's holds: not the stream's time
            h1 = now if h1 is None else h1
            if h1 > a.t_start and h0 < end:
                segs.append((max(h0, a.t_start), min(h1, end), "tl--held"))
        name = f"model {turn_tag(state, turn)}" + (f".{a_no + 1}" if len(tr.attempts) > 1 else "")
        bars.append(Bar(name, segs))
    for key in tr.tools:
        t = state.tools.get(key)
        if t is None:
            continue
        segs = []
        if t.t_queued is not None:
            closed = t.t_queued
        elif t.t_started is not None:
            closed = t.t_started
        elif len(t.history) > 1:  # its input's end: its next state (a call that never ran: not_run, discarded)
            closed = t.history[1][1]
        else:
            closed = t.t_finished if t.t_finished is not None else now
        segs.append((t.t_created, closed, "tl--input"))
        if t.t_queued is not None:
            segs.append(
                (
                    t.t_queued,
                    t.t_started if t.t_started is not None else (t.t_finished if t.t_finished is not None else now),
                    "tl--queued",
                )
            )
        if t.t_started is not None:
            end = t.t_finished if t.t_finished is not None else now
            segs.append((t.t_started, end, "tl--inferred" if t.inferred else STATE_TL.get(t.state, "tl--ok")))
        bars.append(
            Bar(f"{INFERRED_GLYPH}{t.name}" if t.inferred else t.name, segs, INFERRED_LABEL if t.inferred else "")
        )
    return bars, state.turn_savings(turn)


STATE_TL = {
    "running": "tl--running",
    "succeeded": "tl--ok",
    "failed": "tl--bad",
    "timed_out": "tl--bad",
    "cancelled": "tl--cancelled",
    "discarded": "tl--cancelled",
}

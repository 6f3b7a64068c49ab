"""The timeline under the Tools pane: every turn (compact: one line with its "saved" figure), the latest turns in
full as bars on one time axis, the sequential alternative that "saved" is measured against as a ghost bar, and a
legend of the glyphs. Supersedes `tools.Timeline` (the bars and the saved figure still come from `tools.turn_bars`).

saved vs sequential = (model stream + every tool's run time, one after the other) − (stream start → last tool end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.geometry import Size

from inspector.core.fmt import duration
from inspector.state.entries import ToolKey
from inspector.state.fold import DashboardState
from inspector.tui.messages import DetailRequested
from inspector.tui.widgets.base import TextLines
from inspector.tui.widgets.tools import INFERRED_GLYPH, INFERRED_LABEL, Bar, turn_bars
from inspector.tui.widgets.wording import savings_text, turn_label

SOLID = frozenset({"tl--stream", "tl--running", "tl--ok", "tl--bad", "tl--failed", "tl--cancelled"})
GLYPHS = {
    "tl--input": "░",
    "tl--queued": "·",
    "tl--wait": "╌",
    "tl--ghost": "┈",
    "tl--held": "▒",
    "tl--retry": "╳",
    "tl--inferred": INFERRED_GLYPH,
}
LEGEND = (
    ("╌", "tl--wait", "waiting"),
    ("█", "tl--stream", "stream"),
    ("░", "tl--input", "input"),
    ("·", "tl--queued", "queued"),
    ("█", "tl--running", "running"),
    ("┈", "tl--ghost", "sequential"),
)
# in the legend only when drawn: the user's pause / step holds, and the waits before an SDK retry
# and a tool run the proxy inferred (another harness's tool: block stop -> its next request), never a measured run
OCCASIONAL = (
    ("▒", "tl--held", "held"),
    ("╳", "tl--retry", "retry wait"),
    (INFERRED_GLYPH, "tl--inferred", INFERRED_LABEL),
)
EXPLAIN = (
    "saved vs sequential = (model stream + each tool's run time, one after another) − "
    "(stream start → last tool end): what starting each tool at its block's stop saved"
)

NOTE_W = 14  # " saved 830 ms" after the ghost bar
SHORT_EXPLAIN = "saved = sequential (stream + Σ tool runs) − actual (stream start → last tool end)"


@dataclass
class TurnFigures:
    """One turn's bars and the figures of "saved vs sequential"."""

    turn: int
    bars: list[Bar]
    saved: float | None
    start: float | None = None  # the answered stream's start
    actual: float | None = None  # stream start → last tool end
    sequential: float | None = None  # stream + every tool run, one after the other
    explain: str = ""  # the figure's sum, with its numbers

    @property
    def tools(self) -> int:
        return sum(1 for b in self.bars if not b.label.startswith("model "))


def figures_key(state: DashboardState, turn: int, now: float) -> tuple[object, ...] | None:
    """What a turn's figures depend on: the versions of its turn, attempts and tools, the holds that may overlap it,
    and the clock while anything of it is open (None: no such turn)."""
    tr = state.turns.get(turn)
    if tr is None:
        return None
    attempts = [state.attempts.get((turn, n)) for n in tr.attempts]
    tools = [state.tools.get(i) for i in tr.tools]
    holds = state.holds
    is_open = (
        any(a is not None and a.t_end is None for a in attempts)
        or any(t is not None and t.t_finished is None for t in tools)
        or (bool(holds) and holds[-1][1] is None)
    )
    return (
        tr.version,
        tuple(None if a is None else a.version for a in attempts),
        tuple(None if t is None else t.version for t in tools),
        len(holds),
        now if is_open else None,
        len(state.conversations) > 1,  # (several conversations: its labels name whose turn it is)
    )


def figures(state: DashboardState, turn: int, now: float) -> TurnFigures:
    """The turn's bars and its savings (`DashboardState.turn_savings`: only the tools whose results were used)."""
    bars, savings = turn_bars(state, turn, now)
    fig = TurnFigures(turn, bars, None if savings is None else savings.saved)
    model = [b for b in bars if b.label.startswith("model ") and b.segments and b.segments[-1][2] == "tl--stream"]
    if savings is not None and model:
        fig.start = model[-1].segments[0][0]
        fig.actual = savings.actual
        fig.sequential = savings.sequential
        fig.explain = savings_text(savings)
    return fig


class Timeline(TextLines):
    """The model stream and every tool, turn by turn, on one time axis (click a bar: its detail)."""

    COMPONENT_CLASSES = {
        "tl--axis",
        "tl--label",
        "tl--wait",
        "tl--stream",
        "tl--failed",
        "tl--input",
        "tl--queued",
        "tl--running",
        "tl--ok",
        "tl--bad",
        "tl--cancelled",
        "tl--saved",
        "tl--empty",
        "tl--ghost",
        "tl--turn",
        "tl--held",
        "tl--retry",
        "tl--inferred",
    }
    DEFAULT_CSS = """
    Timeline { text-wrap: nowrap; text-overflow: ellipsis; }
    Timeline > .tl--ghost { color: $foreground-darken-2; }
    Timeline > .tl--turn { color: $foreground-muted; }
    """
    LABEL_W = 12

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.now = 0.0
        self._seen: tuple[object, ...] = ()
        self._wanted = 1
        self._rows: list[tuple[str, Any] | None] = []  # what each rendered row opens (detail)
        # each turn's figures, kept while its versions stay (a frame recomputes the open turns only, not the history)
        self._figs: dict[int, tuple[tuple[object, ...], TurnFigures]] = {}
        self._figs_state: DashboardState | None = None
        self.tooltip = EXPLAIN

    def show(self, state: DashboardState, now: float, live: bool) -> None:
        limit = max(1, self.app.size.height)
        key = (id(state), state.rev_tools, state.rev_status, round(now, 2) if live else None, limit)
        if key == self._seen:
            return
        self._seen = key
        self.state, self.now = state, now
        # capped at the terminal's height (the CSS caps the timeline below it: asking for more changes nothing)
        wanted = self._wanted_rows(limit)
        # a new height needs a screen relayout (a full-screen reflow) only if it changes the drawn height: once the
        # CSS cap holds the timeline below what it asks for (its height is less than that), asking for more is moot
        height = self.size.height
        capped = 0 < height < self._wanted and wanted >= height
        if wanted != self._wanted and not capped:
            self._text_for = None  # (drawn again at its new height)
            self.refresh(layout=True)
        else:
            self.update_lines()  # the lines that changed (none: a frame where no bar moved)
        self._wanted = wanted

    def _wanted_rows(self, limit: int) -> int:
        """The rows the timeline asks for, at most `limit`: from the newest turn back, only as many turns as it
        takes (a frame's cost does not grow with the session; once the cap is reached no new turn relayouts the
        screen, which costs a full-screen reflow)."""
        state = self.state
        if state is None or not state.turns:
            return 1
        # header, every turn in full (bars and ghost bar), axis, legend, the line saying how "saved" is computed;
        # the CSS caps the height: `layout` then draws the earlier turns compact
        rows = 1 + 3
        for t in sorted(state.turns, reverse=True):
            if rows >= limit:
                return limit
            f = self.figures(state, t)
            rows += len(f.bars) + (1 if f.sequential else 0)
        return min(rows, limit)

    def figures(self, state: DashboardState, turn: int) -> TurnFigures:
        """`figures(state, turn, self.now)`, from the cache while the turn is unchanged (same state object: another
        state, a moment of the past or one conversation's view, starts a new cache)."""
        if state is not self._figs_state:
            self._figs, self._figs_state = {}, state
        key = figures_key(state, turn, self.now)
        hit = self._figs.get(turn)
        if hit is not None and key is not None and hit[0] == key:
            return hit[1]
        fig = figures(state, turn, self.now)
        if key is not None:
            self._figs[turn] = (key, fig)
        return fig

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._wanted

    # -------------------------------------------------------------------------------------------- rendering
    def render(self) -> Text:
        state = self.state
        width, height = self.size.width, max(1, self.size.height)
        self._rows = []
        if state is None or not state.turns:
            return Text("timeline: nothing yet", self.cstyle("tl--empty"))
        turns = sorted(state.turns)
        figs = [self.figures(state, t) for t in turns]
        expanded, compact = self.plan_rows(figs, height)
        lw = self.LABEL_W
        note_w = NOTE_W if any(f.sequential is not None for f in expanded) else 0
        cols = max(4, width - lw - 1 - note_w)  # room after the ghost bar for its "saved" figure
        out = Text(no_wrap=True, overflow="ellipsis")
        # header
        saved_total = sum(f.saved for f in figs if f.saved is not None)
        segs = [s for f in expanded for b in f.bars for s in b.segments]
        t0 = min((s[0] for s in segs), default=0.0)
        t1 = max((s[1] for s in segs), default=t0 + 1)
        for f in expanded:
            if f.start is not None and f.sequential is not None:
                t1 = max(t1, f.start + f.sequential)
        span = max(t1 - t0, 1e-3)
        scale = cols / span
        out.append(f"{'timeline':<{lw}} ", self.cstyle("tl--label"))
        if any(f.saved is not None for f in figs):
            out.append(f"saved vs sequential {duration(saved_total)}", self.cstyle("tl--saved"))
            out.append(" · ", self.cstyle("tl--axis"))
        # the header spans the whole run, whatever the height let us draw in full (the axis is the drawn turns')
        out.append(f"span {run_span(figs):.2f} s", self.cstyle("tl--axis"))
        self._rows.append(None)
        for f in compact[: max(0, height - 1)]:  # (the lines beyond the height are not seen: not drawn)
            out.append("\n")
            out.append_text(self._compact_line(f))
            self._rows.append(("turn", f.turn))
        for f in expanded:
            for bar in f.bars:
                out.append("\n")
                out.append(f"{bar.label[:lw]:<{lw}} ", self.cstyle("tl--label"))
                self._draw(out, bar.segments, t0, scale, cols)
                self._rows.append(self._target(f, bar))
            if f.start is not None and f.sequential is not None:
                out.append("\n")
                out.append(f"{'sequential':<{lw}} ", self.cstyle("tl--ghost"))
                self._draw(out, [(f.start, f.start + f.sequential, "tl--ghost")], t0, scale, cols)
                out.append(f" saved {duration(f.saved)}", self.cstyle("tl--saved"))
                self._rows.append(("turn", f.turn))
        if expanded:
            out.append("\n")
            out.append_text(self._axis(t0, t1, span, scale, cols))
        rows = len(self._rows) + (1 if expanded else 0)
        if rows < height:
            out.append("\n")
            drawn = {seg[2] for f in figs for b in f.bars for seg in b.segments}
            out.append_text(self._legend(width, drawn))
        if rows + 1 < height and any(f.saved is not None for f in figs):
            out.append("\n")
            last = next((f for f in reversed(figs) if f.explain), None)
            out.append(SHORT_EXPLAIN + (f" {last.explain}" if last else ""), self.cstyle("tl--label"))
        return out

    @staticmethod
    def plan_rows(figs: list[TurnFigures], height: int) -> tuple[list[TurnFigures], list[TurnFigures]]:
        """Which turns are drawn in full (the latest that fit, with the axis) and which in one compact line each:
        every turn is always shown, at least compactly."""
        expanded: list[TurnFigures] = []
        room = height - 1 - 1  # the header and the axis
        used = len(figs)  # one compact line per turn to begin with
        for fig in reversed(figs):
            need = len(fig.bars) + (1 if fig.sequential else 0) - 1  # replaces its compact line
            if used + need > room:
                break
            expanded.insert(0, fig)
            used += need
        return expanded, [f for f in figs if f not in expanded]

    def _compact_line(self, f: TurnFigures) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        model = [b for b in f.bars if b.label.startswith("model ")]
        t.append(f"{turn_label(self.state, f.turn)} ", self.cstyle("tl--turn"))
        if f.saved is not None:
            t.append(f"saved {duration(f.saved)} · ", self.cstyle("tl--saved"))
        if model:
            seg = model[-1].segments
            t.append(f"model {duration(seg[-1][1] - seg[0][0])}", self.cstyle("tl--turn"))
        if f.tools:
            t.append(f" · {f.tools} tool{'s' if f.tools != 1 else ''}", self.cstyle("tl--turn"))
        if f.sequential is not None and f.actual is not None:
            t.append(f" · {duration(f.actual)} vs {duration(f.sequential)} sequential", self.cstyle("tl--turn"))
        return t

    def _target(self, f: TurnFigures, bar: Bar) -> tuple[str, Any] | None:
        if bar.label.startswith("model "):
            return ("turn", f.turn)
        return ("tool", self._tool_of(f, bar))

    def _tool_of(self, f: TurnFigures, bar: Bar) -> ToolKey:
        """The tool key of a tool bar (bars follow the turn's tool order after its model bars)."""
        state = self.state
        assert state is not None
        tools = [b for b in f.bars if not b.label.startswith("model ")]
        ids = [i for i in state.turns[f.turn].tools if i in state.tools]
        return ids[tools.index(bar)]

    def _draw(self, out: Text, segments: list[tuple[float, float, str]], t0: float, scale: float, cols: int) -> None:
        cells = [" "] * cols
        styles: list[str | None] = [None] * cols
        for start, end, cls in segments:
            if end < start:
                continue
            a = int((start - t0) * scale)
            b = max(a + 1, int(round((end - t0) * scale))) if end > start or cls in SOLID else a
            ch = "█" if cls in SOLID else GLYPHS.get(cls, "╌")
            for x in range(max(0, a), min(cols, b)):
                cells[x], styles[x] = ch, cls
        run_start = 0
        while run_start < cols:
            run_cls = styles[run_start]
            run_end = run_start
            while run_end < cols and styles[run_end] == run_cls:
                run_end += 1
            out.append("".join(cells[run_start:run_end]), self.cstyle(run_cls) if run_cls else None)
            run_start = run_end

    def _axis(self, t0: float, t1: float, span: float, scale: float, cols: int) -> Text:
        marks = Text(" " * (self.LABEL_W + 1), no_wrap=True)
        step = _nice_step(span, max(1, cols // 10))
        labels = [" "] * cols
        tick = math.ceil(t0 / step - 1e-9) * step
        while tick <= t1 + 1e-9:
            x = int((tick - t0) * scale)
            lab = f"{tick:.2f}".rstrip("0").rstrip(".") + "s"
            if 0 <= x and x + len(lab) <= cols and all(c == " " for c in labels[max(0, x - 1) : x + len(lab) + 1]):
                labels[x : x + len(lab)] = list(lab)
            tick += step
        marks.append("".join(labels), self.cstyle("tl--axis"))
        return marks

    def _legend(self, width: int, drawn: set[str] | frozenset[str] = frozenset()) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        for i, (glyph, cls, label) in enumerate((*LEGEND, *(e for e in OCCASIONAL if e[1] in drawn))):
            if i:
                t.append(" ")
            t.append(glyph, self.cstyle(cls))
            t.append(f" {label}", self.cstyle("tl--label"))
        return t

    def on_click(self, event: events.Click) -> None:
        row = event.y
        if 0 <= row < len(self._rows) and self._rows[row] is not None:
            kind, key = self._rows[row]  # type: ignore[misc]
            self.post_message(DetailRequested(kind, key))


def run_span(figs: list[TurnFigures]) -> float:
    """Seconds from the first drawn segment of any turn to the last end (a ghost "sequential" bar included)."""
    segs = [s for f in figs for b in f.bars for s in b.segments]
    if not segs:
        return 0.0
    t0 = min(s[0] for s in segs)
    t1 = max(s[1] for s in segs)
    for f in figs:
        if f.start is not None and f.sequential is not None:
            t1 = max(t1, f.start + f.sequential)
    return max(0.0, t1 - t0)


def _nice_step(span: float, ticks: int) -> float:
    raw = span / max(1, ticks)
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600):
        if step >= raw:
            return step
    return raw


__all__ = ["EXPLAIN", "LEGEND", "Timeline", "TurnFigures", "figures"]

"""The status line: source, loop state, turn and attempt, event k of n, timings, tokens, stop reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from inspector.core.fmt import duration
from inspector.state.fold import DashboardState
from inspector.tui.widgets.base import TextLines
from inspector.tui.widgets.wording import try_label, whose_turn

STATE_LABEL = {
    "idle": "○ idle",
    "streaming": "● streaming",
    "paused": "❚❚ paused",
    "stepping": "▸ stepping",
    "running_tools": "▶ running tools",
    "waiting_retry": "↻ waiting to retry",
    "finished": "■ finished",
    "cancelled": "⊘ cancelled",
    "error": "✗ error",
}


def source_label(source: dict[str, Any]) -> str:
    kind = source.get("type") or "?"
    if kind == "scenario":
        return f"scenario {source.get('name', '?')}"
    if kind == "replay":
        return f"replay {source.get('file', '')}".strip()
    if kind == "api":
        base = source.get("base_url")
        return f"api {source.get('model', '')}" + (f" via {base}" if base else "")
    if kind == "generated":
        return f"generated {source.get('events', '')} events"
    if kind in ("proxy", "serve"):  # the address to point a harness at has its own line, in full
        return f"{kind} {source.get('name') or source.get('upstream') or ''}".strip()
    return " ".join(str(v) for v in source.values())[:40] or kind


def cost_label(state: DashboardState) -> str:
    """`$0.0163 · cache 0%` over the session's ended attempts (failed ones too); `unpriced` when a model has no
    price (never a guess); "" before any attempt has ended. The price source is in the request view (`s`)."""
    if not state.attempts:  # nothing to price yet (the first frame: the pricing modules are not even imported)
        return ""
    from inspector.record.cost import USAGE_NOT_REPORTED, fmt_usd
    from inspector.state.costs import session_cost

    sc = session_cost(state, budget=PRICES_PER_RENDER)
    if sc.pending:
        return "pricing…"
    if not sc.priced or not sc.usage.reported:
        return ""
    if sc.cost.total is None and sc.cost.unpriced == USAGE_NOT_REPORTED:  # an answer came without its usage
        return "cost unknown"
    rate = sc.usage.hit_rate
    return fmt_usd(sc.cost) + ("" if rate is None else f" · cache {rate:.0%}")


PRICES_PER_RENDER = 50  # new attempts priced per frame at most (~20 ms): a long replay opened at its end


@dataclass
class StatusInfo:
    """What the status line shows besides the state itself."""

    total_events: int = 0  # events received so far (live)
    cursor: int | None = None  # event cursor (time travel), None when live
    speed: str = ""
    note: str = ""  # app-level problem (session failed to start...)
    replay: bool = False
    timing_note: str = ""  # a caveat about the source's timing (HAR: per response, not per read)
    live_state: str = ""  # the live loop's state, shown beside a moment of the past (time travel)
    conversation: str | None = None  # the conversation the panes show (None: the whole session)


# a conversation's state (state/conversations.py), as the status line says it while the panes show that conversation
CONVERSATION_STATE_LABEL = {
    "streaming": "● streaming",
    "waiting for tools": "▶ waiting for tools",
    "idle": "○ idle",
    "finished": "■ finished",
    "failed": "✗ failed",
    "ended unfinished": "◌ ended unfinished",
}
_CONVERSATION_STATE_CLASS = {"finished": "st--done", "failed": "st--bad"}  # (else st--streaming)
_SESSION_STATES = ("paused", "stepping", "waiting_retry", "finished", "cancelled", "error")  # said whatever is shown


def _fit_fields(line: Text, width: int, ends: list[int], source_at: int) -> None:
    """Fit the first line in `width` cells: the source's name is cut at its end when a few of its characters fit,
    else whole fields are left out from the end (`…`), never one cut in the middle (`event 12345 of 123…`)."""
    if line.cell_len <= width:
        return
    if Text(line.plain[:source_at]).cell_len + 8 <= width:
        line.truncate(width, overflow="ellipsis")
        return
    keep = next((e for e in reversed(ends) if Text(line.plain[:e]).cell_len + 2 <= width), None)
    if keep is None:
        line.truncate(width, overflow="ellipsis")
        return
    line.right_crop(len(line) - keep)
    line.append(" …")


class StatusBar(TextLines):
    COMPONENT_CLASSES = {
        "st--title",
        "st--source",
        "st--sep",
        "st--key",
        "st--value",
        "st--streaming",
        "st--paused",
        "st--done",
        "st--bad",
        "st--travel",
        "st--note",
    }
    # the component classes' styles, with the widget (Toolong's LogLines)
    DEFAULT_CSS = """
    StatusBar > .st--title { color: $accent; text-style: bold; }
    StatusBar > .st--source { color: $foreground; }
    StatusBar > .st--sep { color: $foreground-darken-3; }
    StatusBar > .st--key { color: $foreground-muted; }
    StatusBar > .st--value { color: $foreground; text-style: bold; }
    StatusBar > .st--streaming { color: $success; text-style: bold; }
    StatusBar > .st--paused { color: $warning; text-style: bold; }
    StatusBar > .st--done { color: $success; }
    StatusBar > .st--bad { color: $error; text-style: bold; }
    StatusBar > .st--travel { color: $background; background: $accent; text-style: bold; }
    StatusBar > .st--note { color: $error; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: DashboardState | None = None
        self.info = StatusInfo()
        self._seen: tuple[object, ...] = ()

    def show(self, state: DashboardState, info: StatusInfo) -> None:
        key = (
            id(state),
            state.rev_status,
            state.conversations.side_requests,
            state.status.events,
            info.total_events,
            info.cursor,
            info.speed,
            info.note,
            info.timing_note,
            info.live_state,
            self.size.width,
        )
        if key == self._seen:
            return
        self._seen = key
        self.state, self.info = state, info
        self.update_lines()  # (the lines that changed: while streaming, the counts of the first)

    def render(self) -> Text:
        state, info = self.state, self.info
        out = Text(no_wrap=True, overflow="ellipsis")
        line2 = Text(no_wrap=True, overflow="ellipsis")
        sep = (" │ ", self.cstyle("st--sep"))
        narrow = self.size.width < 110
        out.append(" Inspector" if narrow else " Stream Inspector", self.cstyle("st--title"))
        if state is None:
            out.append("  starting…")
            return out
        st = state.status
        out.append(*sep)
        ls = st.loop_state
        # one conversation shown: its own state, turn, events and model, not the session's (a pause, a step or the
        # session's end is still the session's)
        entry = state.conversations.by_id.get(info.conversation) if info.conversation is not None else None
        if entry is not None and ls not in _SESSION_STATES:
            label = CONVERSATION_STATE_LABEL.get(entry.state, entry.state)
            cls = _CONVERSATION_STATE_CLASS.get(entry.state, "st--streaming")
        else:
            label = STATE_LABEL.get(ls, ls)
            cls = {
                "paused": "st--paused",
                "stepping": "st--paused",
                "waiting_retry": "st--paused",
                "finished": "st--done",
                "error": "st--bad",
                "cancelled": "st--paused",
            }.get(ls, "st--streaming")
        out.append(label, self.cstyle(cls))
        if state.turns:
            out.append(*sep)
            # its own turn, then the session's (#), as the list says; in the view of all of them too, whose turn it
            # is (it said "turn 5": the panes' rules call that turn "[c3] turn 2 (#5)", and no conversation has a 5th)
            whose = whose_turn(state, st.turn) if entry is None else None
            cid, own = (entry.id, entry.own_turn(st.turn)) if entry is not None else whose or (None, None)
            if cid is not None and own is not None:
                out.append(f"{cid} turn ", self.cstyle("st--key"))
                out.append(str(own + 1), self.cstyle("st--value"))
                out.append(f" (#{st.turn + 1})" if not narrow else "", self.cstyle("st--key"))
            else:
                out.append("turn ", self.cstyle("st--key"))
                out.append(str(st.turn + 1), self.cstyle("st--value"))
            out.append(" · attempt " if not narrow else ".", self.cstyle("st--key"))
            out.append(str(st.attempt + 1), self.cstyle("st--value"))
        spent = "" if narrow else cost_label(state)  # the session's so far: `$0.0163 · cache 0%` (80x24: no room)
        if spent == "pricing…":  # the rest on the next frames
            self.set_timer(0.05, self.update_lines)
        if spent:
            out.append(*sep)
            out.append(spent, self.cstyle("st--value"))
        out.append(*sep)
        if info.cursor is not None:
            said = f"◀ event {info.cursor}/" if narrow else f"◀ viewing event {info.cursor} of "
            out.append(f"{said}{info.total_events} ", self.cstyle("st--travel"))
            if info.live_state:  # the past's figures, the present's loop state: never mixed up
                live = STATE_LABEL.get(info.live_state, info.live_state).split(" ", 1)[-1]
                out.append(f"· loop {live} ", self.cstyle("st--travel"))
            if not narrow:
                out.append("  ←/→ home end=live", self.cstyle("st--key"))
        else:
            total = st.events if entry is not None else info.total_events  # (a conversation's own events)
            out.append("event ", self.cstyle("st--key"))
            out.append(f"{st.events}", self.cstyle("st--value"))
            out.append(f" of {total}" if not narrow else f"/{total}", self.cstyle("st--key"))
        side = state.conversations.side_requests  # a proxy's requests that are no turns: said, never hidden
        if side:
            out.append(*sep)
            out.append(str(side), self.cstyle("st--value"))
            out.append(" side" if narrow else f" side request{'s' if side != 1 else ''}", self.cstyle("st--key"))
        if info.speed:
            out.append(*sep)
            if not narrow:
                out.append("speed ", self.cstyle("st--key"))
            out.append(info.speed, self.cstyle("st--value"))
        out.append(*sep)
        source_at = len(out)  # the source and model: a name, cut at its end when there is no room (else whole fields)
        src = source_label(st.source) if st.source else ("replay" if info.replay else "…")
        out.append(src, self.cstyle("st--source"))
        # the model of the conversation shown, else of the turn shown (the session's first request's model is only
        # the fallback: an agent may ask several models at once, and the turn shown may be another's)
        of_turn = entry
        if of_turn is None and state.turns:
            of_turn = state.conversations.by_id.get(state.conversations.by_turn.get(st.turn, ""))
        model = of_turn.model if of_turn is not None and of_turn.model else st.model
        if model and not narrow:
            out.append(f" · {model}", self.cstyle("st--source"))
        first, out = out, line2
        a = state.current_attempt
        metrics: list[tuple[str, str]] = []
        if a is not None:
            if a.status_code is not None and not narrow:
                tries = "".join(f"{t.status or 'no response'} → " for t in a.tries)
                metrics.append(("HTTP", f"{tries}{a.status_code}"))
            # the stream's own clock: the user's holds (pause, step) are left out of every figure
            if a.ttfb is not None:
                metrics.append(("TTFB", duration(a.ttfb)))
            if a.first_token is not None:
                metrics.append(("1st token" if narrow else "first token", duration(a.first_token)))
            if a.last_gap is not None:
                metrics.append(("gap" if narrow else "last gap", duration(a.last_gap)))
            if not narrow:
                metrics.append(("reads", f"{a.reads}"))
            if a.held and not narrow:
                metrics.append(("held", f"{duration(a.held)} (not counted)"))
        tin, tout, missing = state.token_totals()
        if tin or tout:
            # (turns answered without usage: their counts are unknown, not in these; said, as dump's total says it)
            part = (
                ""
                if not missing
                else f" +{missing}?"
                if narrow
                else f" + {missing} turn{'s' if missing > 1 else ''} unknown"
            )
            metrics.append(("tok" if narrow else "tokens", f"{tin:,} in / {tout:,} out{part}"))
        elif missing:
            metrics.append(("tok" if narrow else "tokens", "unknown (usage not reported)"))
        if a is not None and a.stop_reason:
            metrics.append(("stop", a.stop_reason))

        width = max(1, self.size.width)
        out.append(" ")
        if ls == "waiting_retry" and st.last_try:
            out.append(try_label(st.last_try), self.cstyle("st--paused"))
            out.append(" │ " if metrics else "", self.cstyle("st--sep"))
        # the notes (a timing caveat, the error or cancel) are said whole; the metrics take the room left, each one
        # whole or not at all (never cut in the middle of a number: `tok 12,345,6…`)
        notes = Text()
        if info.timing_note:
            notes.append("   ")
            notes.append(f"⚠ {info.timing_note}", self.cstyle("st--paused"))
        problem = info.note or (st.error if st.loop_state in ("error", "cancelled") else "")
        hint = Text("  (r restart · q quit)", self.cstyle("st--key"))
        if problem:
            notes.append("   ")
            notes.append(
                problem, self.cstyle("st--bad") if st.loop_state == "error" or info.note else self.cstyle("st--paused")
            )
        room = width - out.cell_len - notes.cell_len
        for i, (k, v) in enumerate(metrics):
            field = Text.assemble(*([(" · ", self.cstyle("st--sep"))] if i else []), (f"{k} ", self.cstyle("st--key")))
            field.append(v, self.cstyle("st--value"))
            if field.cell_len + (2 if i + 1 < len(metrics) else 0) > room:
                out.append(" …" if i else "…", self.cstyle("st--sep"))
                room = 0
                break
            out.append_text(field)
            room -= field.cell_len
        out.append_text(notes)
        if problem and hint.cell_len <= room:  # (when every figure fits too: the keys are in the footer)
            out.append_text(hint)
        out.truncate(width, overflow="ellipsis")
        _fit_fields(first, width, self._field_ends(first, sep[0], source_at), source_at)
        return Text("\n", no_wrap=True).join([first, out])

    @staticmethod
    def _field_ends(line: Text, sep: str, source_at: int) -> list[int]:
        """Where the status line's fields end (before each separator), up to the source."""
        plain = line.plain[:source_at]
        ends, at = [], plain.find(sep)
        while at >= 0:
            ends.append(at)
            at = plain.find(sep, at + 1)
        return ends

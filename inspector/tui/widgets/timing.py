"""The timing view (key `i`): per-turn timing, gap histograms, events per read, pings and the buffering verdict of
the session so far, from `inspector.record.timing` on a Recording rebuilt from the dashboard's observations.

Computed when opened, then at most `REFRESH_HZ` times a second while open, and only when something changed (new
observations, the time-travel cursor): never per event. The Recording is built incrementally (only new
observations are added) and each attempt's analysis is cached until that attempt gets a new read or ends. In time
travel the view shows the observations up to the cursor. A source without per-read timing (a HAR replay, whose
source says "HAR timing is per response, not per read") shows the original recording's report instead: the
replayed reads' times are the replay's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from inspector.core.fmt import count, latency, seconds
from inspector.record.recording import RecordedAttempt, Recording
from inspector.record.timing import RecordingBuilder, analyze_attempt, as_far_as, histogram_rows, timing_json
from inspector.state.travel import History

REFRESH_HZ = 4
HAR_NOTE = "HAR timing is per response, not per read"
VERDICT_ORDER = ("buffered", "suspect", "not buffered", "inconclusive")


@dataclass
class TimingInputs:
    """What the timing view analyses: the history, the time-travel cursor, the source's timing caveat, and the
    original recording of a source without per-read timing (a HAR import)."""

    history: History
    cursor: int | None = None
    note: str = ""
    original: Any = None
    source: dict[str, Any] | None = None
    running: bool = False
    # how to name a (session) turn: `[c2] turn 1 (#2)` in a session of several conversations, as every pane does
    name: Callable[[int], str] | None = None


def _turn_name(name: Callable[[int], str] | None, turn: int) -> str:
    return name(turn) if name is not None else f"turn {turn + 1}"


class TimingAnalysis:
    """The timing of the first `cut` observations of a history, recomputed incrementally."""

    def __init__(self) -> None:
        self._history: History | None = None
        self._builder: RecordingBuilder | None = None
        self._cache: dict[tuple[int, int], tuple[tuple[object, ...], dict[str, Any]]] = {}
        self._whole: tuple[Recording, dict[str, Any]] | None = None

    def compute(
        self,
        history: History,
        cut: int,
        source: dict[str, Any] | None = None,
        *,
        timed_reads: bool = True,
        original: Recording | None = None,
    ) -> dict[str, Any]:
        """`timed_reads=False` when the source has no per-read timing (a HAR replay): the replayed reads' times
        are the replay's, not the original's, so the analysis must not judge them. ``original``: the recording a
        replay replays: the report is its own times, as far as the first `cut` observations replayed it."""
        b = self._builder
        if history is not self._history or b is None or b.timed_reads != timed_reads:
            self._cache.clear()  # (within one history the cache stays valid: observations are only appended)
        if history is not self._history or b is None or cut < b.count or b.timed_reads != timed_reads:
            self._history = history
            self._builder = RecordingBuilder(source=source, timed_reads=timed_reads)
        builder = self._builder
        assert builder is not None
        obs = history.observations
        for i in range(builder.count, min(cut, len(obs))):
            builder.add(obs[i])
        if original is not None:
            return timing_json(as_far_as(original, builder.recording), analyze=self._analyze)
        return timing_json(builder.recording, analyze=self._analyze)

    def compute_recording(self, recording: Recording) -> dict[str, Any]:
        """The timing of a whole recording (a HAR replay's original: its per-response times are the real ones)."""
        if self._whole is None or self._whole[0] is not recording:
            self._whole = (recording, timing_json(recording))
        return self._whole[1]

    def _analyze(self, att: RecordedAttempt, holds: Sequence[tuple[float, float]] = ()) -> dict[str, Any]:
        sig = (len(att.reads), att.response is not None, att.end is not None, tuple(holds))
        hit = self._cache.get((att.turn, att.attempt))
        if hit is None or hit[0] != sig:
            hit = self._cache[(att.turn, att.attempt)] = (sig, analyze_attempt(att, holds))
        return hit[1]


def overall_verdict(data: dict[str, Any], name: Callable[[int], str] | None = None) -> tuple[str, list[str]]:
    """The session's verdict (the worst of its attempts) and which attempts carry it (``name``: each turn's name)."""
    attempts = data.get("attempts") or []
    if not attempts:
        return "no attempts yet", []
    verdicts = [a["buffering"]["verdict"] for a in attempts]
    worst = min(verdicts, key=lambda v: VERDICT_ORDER.index(v) if v in VERDICT_ORDER else len(VERDICT_ORDER))
    where = [
        f"{_turn_name(name, a['turn'])} attempt {a['attempt'] + 1}"
        for a, v in zip(attempts, verdicts, strict=True)
        if v == worst
    ]
    return worst, where


class TimingReport(Static):
    """The report text, colored by meaning."""

    COMPONENT_CLASSES = {"tm--head", "tm--buffered", "tm--suspect", "tm--ok", "tm--muted", "tm--note", "tm--bar"}
    DEFAULT_CSS = """
    TimingReport { height: auto; }
    TimingReport > .tm--head { color: $primary; text-style: bold; }
    TimingReport > .tm--buffered { color: $error; text-style: bold; }
    TimingReport > .tm--suspect { color: $warning; text-style: bold; }
    TimingReport > .tm--ok { color: $success; text-style: bold; }
    TimingReport > .tm--muted { color: $foreground-muted; }
    TimingReport > .tm--note { color: $warning; }
    TimingReport > .tm--bar { color: $primary-lighten-2; }
    """

    def c(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True, default=Style())

    def verdict_style(self, verdict: str) -> Style:
        return self.c(
            {"buffered": "tm--buffered", "suspect": "tm--suspect", "not buffered": "tm--ok"}.get(verdict, "tm--muted")
        )

    def render_data(self, data: dict[str, Any], name: Callable[[int], str] | None = None) -> Text:
        """The report, built from the timing data itself (each part styled by what it is, never by its text);
        ``name``: how to name each turn (the session's number alone read as a turn of the wrong conversation)."""
        out = Text()
        head, muted, note, bar = self.c("tm--head"), self.c("tm--muted"), self.c("tm--note"), self.c("tm--bar")

        def line(text: str = "", style: Style | None = None) -> None:
            out.append(text + "\n", style or Style())

        if data.get("timing") == "per-response":
            line(
                "note: timing is per response, not per read (HAR / plain SSE): gaps, bursts and buffering cannot be "
                "judged",
                note,
            )
        for w in data.get("warnings") or ():
            line(f"warning: {w}", note)
        attempts = data.get("attempts") or []
        if not attempts:
            line("no attempts in this recording", muted)
        for a in attempts:
            if out:
                line()
            status = a["status"] if a.get("status") is not None else "?"
            line(
                f"{_turn_name(name, a['turn'])} attempt {a['attempt'] + 1}: HTTP {status}, {count(a['reads'], 'read')}, "
                f"{count(a['events'], 'event')}, {count(a['bytes'], 'byte')}, end {a.get('end') or '-'}",
                head,
            )
            times = (
                f"  headers {seconds(a.get('headers_s'))} | first byte {seconds(a.get('first_byte_s'))} | first content "
                f"{seconds(a.get('first_content_s'))} | message_stop {seconds(a.get('message_stop_s'))} | last byte "
                f"{seconds(a.get('last_byte_s'))}"
            )
            line(times + (f" | end {seconds(a['end_s'])}" if a.get("end_s") is not None else ""))
            for key, title in (("read_gaps", "gaps between reads"), ("event_gaps", "gaps between events")):
                g = a.get(key) or {}
                if not g.get("count"):
                    continue
                line(
                    f"  {title} ({g['count']}): min {latency(g['min'])}, median {latency(g['median'])}, p90 {latency(g['p90'])}, "
                    f"max {latency(g['max'])}"
                )
                for label, n, width in histogram_rows(g.get("histogram") or []):
                    out.append(f"      {label:>10} |", muted)
                    out.append(f"{'#' * width:<30}", bar)
                    out.append(f" {n}\n", muted)
            held = a.get("held") or {}
            if held.get("count"):
                line(
                    f"  held by the user (pause / step): {held['seconds']:.3f} s in {held['count']} interval(s), "
                    "left out of every figure"
                )
            epr = a.get("events_per_read") or {}
            if epr.get("mean") is not None:
                line(f"  events per read: mean {epr['mean']:.2f}, max {epr['max']}")
            p = a.get("pings") or {}
            if p.get("count"):
                iv = p.get("interval")
                cadence = (
                    f", every {latency(iv['mean'])} on average (min {latency(iv['min'])}, max {latency(iv['max'])})"
                    if iv
                    else ""
                )
                line(f"  pings: {p['count']}{cadence}")
            else:
                line("  pings: none", muted)
            b = a.get("buffering") or {}
            verdict = str(b.get("verdict", ""))
            out.append("  buffering: ")
            out.append(verdict.upper(), self.verdict_style(verdict))
            line(f": {b.get('reason', '')}")
            bursts = b.get("held_bursts") or []
            for hb in bursts[:10]:
                line(
                    f"    held burst at {hb['start']:.3f} s after {hb['silence']:.3f} s of silence: {hb['reads']} "
                    f"read(s), {hb['events']} events, {hb['bytes']} bytes ({hb['share']:.0%})"
                )
            if len(bursts) > 10:
                line(f"    ... {len(bursts) - 10} more held bursts", muted)
            if verdict in ("buffered", "suspect"):
                line(f"    rule: {b.get('rule', '')}", muted)
                line(
                    "    an intermediary (relay, reverse proxy) probably buffers the event stream; for nginx: "
                    "`X-Accel-Buffering: no` / proxy_buffering off",
                    note,
                )
        out.rstrip()
        return out


class TimingScreen(ModalScreen[None]):
    """A modal over the dashboard: the timing report of the session so far (or as of the time-travel cursor)."""

    BINDINGS = [
        Binding("escape,i", "close", "Close", id="timing-close", tooltip="Close the timing view"),
        Binding("q", "app.quit", "Quit", show=False),
        Binding("left", "app.cursor('prev')", "Back", show=False),
        Binding("right", "app.cursor('next')", "Forward", show=False),
        Binding("home", "app.cursor('home')", "First event", show=False),
        Binding("end", "app.cursor('end')", "Live", show=False),
        Binding("space", "app.toggle_pause", "Pause", show=False),
    ]
    DEFAULT_CSS = """
    TimingScreen { align: center middle; }
    TimingScreen > #timing-box {
        width: 96%; height: 92%;
        border: round $accent; border-title-color: $accent; border-title-style: bold;
        border-subtitle-color: $foreground-muted;
        background: $surface; padding: 0 1;
    }
    TimingScreen #timing-scroll { height: 1fr; scrollbar-gutter: stable; }
    """

    def __init__(
        self, analysis: TimingAnalysis | None = None, inputs: Callable[[], TimingInputs] | None = None
    ) -> None:
        """`inputs` says what to analyse, each time the report refreshes (the dashboard passes its own; the screen
        never reaches into the App for it)."""
        super().__init__()
        self.analysis = analysis or TimingAnalysis()
        self.inputs = inputs or (lambda: TimingInputs(History()))
        self.data: dict[str, Any] | None = None
        self.verdict = ""
        self.text = ""  # the plain text shown (tests)
        self.computations = 0
        self._key: tuple[object, ...] = ()
        self._next = 0.0  # no live recomputation before this time (monotonic)

    def compose(self) -> ComposeResult:
        box = Vertical(id="timing-box")
        box.border_title = "Timing"
        box.border_subtitle = "i / esc close · ←/→ home end: time travel"
        with box:
            with VerticalScroll(id="timing-scroll"):
                yield TimingReport(id="timing-report")

    def on_mount(self) -> None:
        self.report = self.query_one(TimingReport)
        self.box = self.query_one("#timing-box")
        self.update_report()
        self.set_interval(1 / REFRESH_HZ, self.update_report, name="timing-refresh")
        self.query_one("#timing-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def update_report(self) -> None:
        """Recompute when the observations or the cursor changed since the last time (called by the timer)."""
        inputs = self.inputs()
        history = inputs.history
        cursor = inputs.cursor
        cut: int | None = len(history) if cursor is None else history.cut(cursor)
        note = inputs.note
        # a source without per-read timing (HAR): the replayed reads' times are the replay's, so the report is the
        # original recording's (its time to headers and total time are real), whole, whatever the cursor
        original = inputs.original if note else None
        if isinstance(original, Recording):
            cut = cursor = None
        # a replay of a recording with per-read timing: its reads come at the replay's speed (at max speed with no
        # silence left), so the report is the recording's own times, as far as it was replayed (record/timing.py:
        # as_far_as)
        replayed = inputs.original if not note and isinstance(inputs.original, Recording) else None
        key = (id(history), cut, cursor, note, id(original or replayed))
        now = time.monotonic()
        growing = bool(self._key) and key[0] == self._key[0] and cursor is None and self._key[2] is None
        if key == self._key or (growing and now < self._next):  # live growth waits for the throttle
            return
        self._key = key
        try:
            if isinstance(original, Recording):
                data = self.analysis.compute_recording(original)
            else:
                data = self.analysis.compute(
                    history,
                    len(history) if cut is None else cut,
                    inputs.source or None,
                    timed_reads=not note,
                    original=replayed,
                )
            self.data = data
        except Exception as e:  # noqa: BLE001 (a report bug must not take the dashboard down)
            self.data, self.verdict = None, "error"
            self.text = f"timing analysis failed: {type(e).__name__}: {e}"
            self.report.update(Text(self.text, self.report.c("tm--buffered")))
            return
        self.computations += 1
        # a huge stream makes the analysis slow: keep it under ~20 % of the time while the session runs
        self._next = now + 4 * (time.monotonic() - now)
        self.verdict, where = overall_verdict(data, inputs.name)
        r = self.report
        out = Text()
        if isinstance(original, Recording):
            title = "Timing · the whole imported recording"
        elif replayed is not None:
            upto = f"as of event {cursor} of {history.event_count}" if cursor is not None else "as far as replayed"
            title = f"Timing · the recording's own times, {upto}"
        elif cursor is not None:
            title = f"Timing · as of event {cursor} of {history.event_count} (time travel)"
        else:
            title = f"Timing · {'live' if inputs.running else 'session'} · {history.event_count} events"
        if note and not any(str(w).startswith(note) for w in data.get("warnings") or ()):
            out.append(f"⚠ {note}\n", r.c("tm--note"))
        out.append("verdict: ", r.c("tm--muted"))
        out.append(self.verdict.upper(), r.verdict_style(self.verdict))
        if where and self.verdict in ("buffered", "suspect"):
            out.append(f" ({', '.join(where[:6])}{' …' if len(where) > 6 else ''})", r.c("tm--muted"))
        out.append("\n\n")
        out.append_text(r.render_data(data, inputs.name))
        self.text = f"{title}\n{out.plain}"
        self.box.border_title = title
        r.update(out)


__all__ = [
    "HAR_NOTE",
    "REFRESH_HZ",
    "TimingAnalysis",
    "TimingInputs",
    "TimingReport",
    "TimingScreen",
    "overall_verdict",
]

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

import re
import time
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from inspector.record.recording import RecordedAttempt, Recording
from inspector.record.timing import RecordingBuilder, analyze_attempt, format_timing_json, timing_json
from inspector.state.travel import History

REFRESH_HZ = 4
HAR_NOTE = "HAR timing is per response, not per read"
VERDICT_ORDER = ("buffered", "suspect", "not buffered", "inconclusive")
BAR = re.compile(r"^\s+\S+ \|#* *\d+$")  # a histogram row of format_timing: "    10-50ms |#####    12"


class TimingAnalysis:
    """The timing of the first `cut` observations of a history, recomputed incrementally."""

    def __init__(self) -> None:
        self._history: History | None = None
        self._builder: RecordingBuilder | None = None
        self._cache: dict[tuple[int, int], tuple[tuple, dict]] = {}
        self._whole: tuple[Recording, dict] | None = None

    def compute(self, history: History, cut: int, source: dict | None = None, *, timed_reads: bool = True) -> dict:
        """`timed_reads=False` when the source has no per-read timing (a HAR replay): the replayed reads' times
        are the replay's, not the original's, so the analysis must not judge them."""
        b = self._builder
        if history is not self._history or b is None or b.timed_reads != timed_reads:
            self._cache.clear()  # (within one history the cache stays valid: observations are only appended)
        if history is not self._history or b is None or cut < b.count or b.timed_reads != timed_reads:
            self._history = history
            self._builder = RecordingBuilder(source=source, timed_reads=timed_reads)
        builder = self._builder
        obs = history.observations
        for i in range(builder.count, min(cut, len(obs))):
            builder.add(obs[i])
        return timing_json(builder.recording, analyze=self._analyze)

    def compute_recording(self, recording: Recording) -> dict:
        """The timing of a whole recording (a HAR replay's original: its per-response times are the real ones)."""
        if self._whole is None or self._whole[0] is not recording:
            self._whole = (recording, timing_json(recording))
        return self._whole[1]

    def _analyze(self, att: RecordedAttempt, holds: Any = ()) -> dict:
        sig = (len(att.reads), att.response is not None, att.end is not None, tuple(holds))
        hit = self._cache.get((att.turn, att.attempt))
        if hit is None or hit[0] != sig:
            hit = self._cache[(att.turn, att.attempt)] = (sig, analyze_attempt(att, holds))
        return hit[1]


def overall_verdict(data: dict) -> tuple[str, list[str]]:
    """The session's verdict (the worst of its attempts) and which attempts carry it."""
    attempts = data.get("attempts") or []
    if not attempts:
        return "no attempts yet", []
    verdicts = [a["buffering"]["verdict"] for a in attempts]
    worst = min(verdicts, key=lambda v: VERDICT_ORDER.index(v) if v in VERDICT_ORDER else len(VERDICT_ORDER))
    where = [f"turn {a['turn'] + 1} attempt {a['attempt'] + 1}" for a, v in zip(attempts, verdicts) if v == worst]
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

    def line_style(self, line: str) -> Style:
        s = line.strip()
        if s.startswith("turn "):
            return self.c("tm--head")
        if s.startswith("buffering: "):
            verdict = s[len("buffering: ") :].split(":", 1)[0].lower()
            return self.c(
                {"buffered": "tm--buffered", "suspect": "tm--suspect", "not buffered": "tm--ok"}.get(
                    verdict, "tm--muted"
                )
            )
        if s.startswith(("note:", "warning:", "an intermediary")):
            return self.c("tm--note")
        if s.startswith("rule:"):
            return self.c("tm--muted")
        if BAR.match(line):
            return self.c("tm--bar")
        return Style()


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

    def __init__(self, analysis: TimingAnalysis | None = None) -> None:
        super().__init__()
        self.analysis = analysis or TimingAnalysis()
        self.data: dict | None = None
        self.verdict = ""
        self.text = ""  # the plain text shown (tests)
        self.computations = 0
        self._key: tuple = ()
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
        app: Any = self.app
        history: History = app.history
        cursor = app.cursor
        cut = len(history) if cursor is None else history.cut(cursor)
        note = app.timing_note()
        # a source without per-read timing (HAR): the replayed reads' times are the replay's, so the report is the
        # original recording's (its time to headers and total time are real), whole, whatever the cursor
        original = getattr(app.session, "recording", None) if note else None
        if isinstance(original, Recording):
            cut = cursor = None
        key = (id(history), cut, cursor, note, id(original))
        now = time.monotonic()
        growing = bool(self._key) and key[0] == self._key[0] and cursor is None and self._key[2] is None
        if key == self._key or (growing and now < self._next):  # live growth waits for the throttle
            return
        self._key = key
        try:
            if isinstance(original, Recording):
                data = self.analysis.compute_recording(original)
            else:
                data = self.analysis.compute(history, cut, app.source or None, timed_reads=not note)
            self.data = data
        except Exception as e:  # a report bug must not take the dashboard down
            self.data, self.verdict = None, "error"
            self.text = f"timing analysis failed: {type(e).__name__}: {e}"
            self.report.update(Text(self.text, self.report.c("tm--buffered")))
            return
        self.computations += 1
        # a huge stream makes the analysis slow: keep it under ~20 % of the time while the session runs
        self._next = now + 4 * (time.monotonic() - now)
        self.verdict, where = overall_verdict(data)
        r = self.report
        out = Text()
        if isinstance(original, Recording):
            title = "Timing · the whole imported recording"
        elif cursor is not None:
            title = f"Timing · as of event {cursor} of {history.event_count} (time travel)"
        else:
            title = f"Timing · {'live' if app.session_running else 'session'} · {history.event_count} events"
        if note and not any(str(w).startswith(note) for w in data.get("warnings") or ()):
            out.append(f"⚠ {note}\n", r.c("tm--note"))
        out.append("verdict: ", r.c("tm--muted"))
        out.append(self.verdict.upper(), r.line_style(f"buffering: {self.verdict}:"))
        if where and self.verdict in ("buffered", "suspect"):
            out.append(f" ({', '.join(where[:6])}{' …' if len(where) > 6 else ''})", r.c("tm--muted"))
        out.append("\n\n")
        for line in format_timing_json(data).splitlines():
            out.append(line + "\n", r.line_style(line))
        out.rstrip()
        self.text = f"{title}\n{out.plain}"
        self.box.border_title = title
        r.update(out)


__all__ = ["HAR_NOTE", "REFRESH_HZ", "TimingAnalysis", "TimingReport", "TimingScreen", "overall_verdict"]

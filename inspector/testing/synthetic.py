"""Synthetic observation sequences: realistic loop output without the loop (tests, snapshots, demos, benchmarks).

`StreamScript` writes the observations an agent loop would publish for a scripted stream: the network reads (with
the exact SSE bytes), the decoded events, block opens/deltas/closes, tool calls and the executor's states, all on a
fake clock. `parse_date_observations()` is the classic turn: text, three parallel `read_file` calls streamed as
input_json_delta fragments and run while the stream goes on, then a second turn that answers. No Textual here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.stream.diagnostics import Diagnostic
from inspector.stream.sse import SSEEvent

if TYPE_CHECKING:
    import random

MODEL = "claude-sonnet-4-5"
SOURCE = {"type": "scenario", "name": "parse_date"}
PROMPT = "parse_date('03/04/2025') returns April 3rd for US users. Find the bug and propose a fix."


# one HTTP try the SDK retried: (status or None for a connection error, error type, message, seconds it waited)
FailedTry: TypeAlias = tuple[int | None, str | None, str | None, float | None]


def _q(text: str, limit: int = 80) -> str:
    """A fragment with visible quotes and escapes, as in an event row."""
    s = orjson.dumps(text).decode()
    return s if len(s) <= limit else s[: limit - 1] + "…"


class StreamScript:
    """Builds a list of observations on a fake clock. Every method appends what the loop would publish."""

    def __init__(self, *, source: dict[str, Any] | None = None, model: str = MODEL, t0: float = 0.0) -> None:
        self.obs: list[O.Observation] = []
        self.t = t0
        self.model = model
        self.source = source or dict(SOURCE)
        self.turn = -1  # the loop counts turns and attempts from 0
        self.attempt = -1
        self.seq = 0  # SSE seq within the attempt
        self.offset = 0  # stream offset within the attempt
        self.read_index = 0
        self.t_request0 = 0.0
        self.blocks: dict[int, dict[str, Any]] = {}
        self.fragments: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.tools: dict[str, dict[str, Any]] = {}  # id -> name, index, turn, attempt, times (state -> time)
        self.turn_tool_ids: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.n_events = 0

    # ---------------------------------------------------------------------------------------------- plumbing
    def emit(self, obs: O.Observation) -> O.Observation:
        self.obs.append(obs)
        return obs

    def wait(self, seconds: float) -> StreamScript:
        self.t = round(self.t + seconds, 6)
        return self

    def loop_started(self, prompt: str = PROMPT) -> None:
        self.emit(O.LoopStarted(self.t, self.source, self.model, prompt))
        self.emit(O.LoopStateChanged(self.t, LoopState.STREAMING))

    def state(self, state: str, detail: str = "") -> None:
        self.emit(O.LoopStateChanged(self.t, state, detail))

    def start_turn(self) -> None:
        self.turn += 1
        self.attempt = -1
        self.turn_tool_ids = []
        self.emit(O.TurnStarted(self.t, self.turn))

    def hold(self, seconds: float, by: str = "pause") -> None:
        """The user holds the stream for `seconds` (pause, or the wait after a step): the loop reads nothing."""
        control = "pause" if by == "pause" else "step_event"
        self.emit(O.ControlApplied(self.t, control))
        self.emit(O.StreamHeld(self.t, self.turn, self.attempt, by))
        if by == "pause":
            self.state(LoopState.PAUSED, "paused by user")
        self.wait(seconds)
        if by == "pause":
            self.emit(O.ControlApplied(self.t, "resume"))
        self.emit(O.StreamReleased(self.t, self.turn, self.attempt, round(seconds, 6)))
        if by == "pause":
            self.state(LoopState.STREAMING)

    def failed_try(
        self,
        status: int | None,
        error_type: str | None = None,
        message: str | None = None,
        *,
        retry_in: float | None = 0.5,
        took: float = 0.05,
        connection_error: str | None = None,
    ) -> None:
        """An HTTP try of the current attempt that failed before a stream; the SDK waits `retry_in`, then tries
        again (the loop shows it as WAITING_RETRY)."""
        t_sent = self.t
        self.wait(took)
        headers = {"retry-after-ms": str(int(retry_in * 1000))} if retry_in is not None else {}
        body = {"type": "error", "error": {"type": error_type, "message": message}} if error_type else None
        try_index = sum(
            1 for o in self.obs if isinstance(o, O.HttpTryFailed) and o.turn == self.turn and o.attempt == self.attempt
        )
        self.emit(
            O.HttpTryFailed(
                self.t,
                self.turn,
                self.attempt,
                try_index,
                "POST",
                "https://api.anthropic.com/v1/messages",
                t_sent,
                status,
                headers,
                error_type,
                message,
                body,
                connection_error,
                retry_in,
            )
        )
        if retry_in is not None:
            what = f"HTTP {status} {error_type}" if status is not None else "connection error"
            self.state(LoopState.WAITING_RETRY, f"{what} · SDK retries in {retry_in:.1f} s")
            self.wait(retry_in)
            self.state(LoopState.STREAMING)

    def start_attempt(self, *, status: int = 200, ttfb: float = 0.35, failed_tries: tuple[FailedTry, ...] = ()) -> None:
        """A new attempt; `failed_tries`: ``(status, error_type, message, retry_in)`` per HTTP try the SDK retried
        before the answered one."""
        self.attempt += 1
        self.seq = self.offset = self.read_index = 0
        self.blocks, self.fragments, self.usage, self.stop_reason = {}, {}, {}, None
        self.t_request0 = self.t
        body = {"model": self.model, "max_tokens": 4096, "stream": True, "messages": list(self.messages)}
        self.emit(
            O.AttemptStarted(
                self.t,
                self.turn,
                self.attempt,
                "POST",
                "https://api.anthropic.com/v1/messages",
                {"content-type": "application/json"},
                body,
            )
        )
        for try_status, error_type, message, retry_in in failed_tries:
            self.failed_try(try_status, error_type, message, retry_in=retry_in)
        self.wait(ttfb)
        self.emit(
            O.ResponseStarted(
                self.t,
                self.turn,
                self.attempt,
                status,
                {"content-type": "text/event-stream" if status == 200 else "application/json"},
            )
        )

    def _read(self, data: bytes) -> None:
        self.emit(
            O.ReadReceived(self.t, self.turn, self.attempt, self.read_index, round(self.t - self.t_request0, 6), data)
        )
        self.read_index += 1
        self.offset += len(data)

    def event(
        self,
        etype: str,
        payload: dict[str, Any],
        summary: str,
        *,
        index: int | None = None,
        split: int | None = None,
        gap: float = 0.0,
        pad: str = "",
    ) -> SSEEvent:
        """One SSE event in its own read (or split into two reads at byte `split`), then its SSEEventSeen."""
        if gap:
            self.wait(gap)
        data = orjson.dumps(payload).decode() + pad
        raw = f"event: {etype}\ndata: {data}\n\n".encode()
        start = self.offset
        if split:
            self._read(raw[:split])
            self.wait(0.004)
            self._read(raw[split:])
        else:
            self._read(raw)
        sse = SSEEvent(self.seq, etype, data, "", None, start, start + len(raw), self.read_index - 1)
        self.emit(O.SSEEventSeen(self.t, self.turn, self.attempt, sse, etype, index, summary))
        self.seq += 1
        self.n_events += 1
        return sse

    # ---------------------------------------------------------------------------------------------- events
    def message_start(self, input_tokens: int = 1850) -> None:
        msg: dict[str, Any] = {
            "id": f"msg_01{self.turn}{self.attempt}Xq7bZ",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        }
        self.event(
            "message_start", {"type": "message_start", "message": msg}, f"{msg['id']} {self.model} in={input_tokens}"
        )
        self.usage = dict(msg["usage"])
        self.emit(O.MessageStarted(self.t, self.turn, self.attempt, msg))

    def ping(self, gap: float = 0.05) -> None:
        self.event("ping", {"type": "ping"}, "", gap=gap)

    def block_start(self, index: int, block: dict[str, Any], gap: float = 0.02) -> None:
        btype = block["type"]
        label = " ".join(str(x) for x in (btype, block.get("name"), block.get("id")) if x)
        self.event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
            label,
            index=index,
            gap=gap,
        )
        self.blocks[index] = block
        self.fragments[index] = []
        self.emit(
            O.BlockOpened(self.t, self.turn, self.attempt, index, btype, block.get("id"), block.get("name"), block)
        )

    def delta(self, index: int, fragment: str, gap: float = 0.03, split: int | None = None) -> None:
        btype = self.blocks[index]["type"]
        if btype == "text":
            delta, dtype = {"type": "text_delta", "text": fragment}, "text_delta"
        elif btype == "thinking":
            delta, dtype = {"type": "thinking_delta", "thinking": fragment}, "thinking_delta"
        else:
            delta, dtype = {"type": "input_json_delta", "partial_json": fragment}, "input_json_delta"
        sse = self.event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
            _q(fragment),
            index=index,
            gap=gap,
            split=split,
        )
        self.fragments[index].append(fragment)
        self.emit(O.BlockDelta(self.t, self.turn, self.attempt, index, dtype, fragment, sse.seq))

    def block_stop(self, index: int, gap: float = 0.02) -> O.BlockClosed:
        sse = self.event("content_block_stop", {"type": "content_block_stop", "index": index}, "", index=index, gap=gap)
        block = dict(self.blocks[index])
        buf = "".join(self.fragments[index])
        error = None
        if block["type"] == "text":
            block["text"] = buf
        elif block["type"] in ("tool_use", "server_tool_use"):
            try:
                block["input"] = orjson.loads(buf) if buf else {}
            except orjson.JSONDecodeError as e:
                error = f"{e.msg} at line {e.lineno} column {e.colno} (char {e.pos})"
                block["input"], block["input_raw"] = None, buf
        closed = O.BlockClosed(self.t, self.turn, self.attempt, index, block, error)
        self.emit(closed)
        if error:
            self.emit(
                O.DiagnosticRaised(
                    self.t,
                    self.turn,
                    self.attempt,
                    Diagnostic(
                        "tool_input.invalid_json",
                        "error",
                        f"tool block {index} ({block.get('name')}): input is not valid JSON: {error}",
                        sse.seq,
                        block_index=index,
                        raw=buf.encode(),
                    ),
                )
            )
        return closed

    def message_delta(self, stop_reason: str, output_tokens: int, gap: float = 0.02) -> None:
        usage = {"output_tokens": output_tokens}
        self.event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": usage},
            f"stop_reason={stop_reason} out={output_tokens}",
            gap=gap,
        )
        self.stop_reason = stop_reason
        self.usage.update(usage)
        self.emit(O.MessageUpdated(self.t, self.turn, self.attempt, stop_reason, usage))

    def message_stop(self, gap: float = 0.01) -> None:
        self.event("message_stop", {"type": "message_stop"}, "", gap=gap)

    def error_event(self, etype: str = "overloaded_error", message: str = "Overloaded", gap: float = 0.05) -> None:
        sse = self.event(
            "error", {"type": "error", "error": {"type": etype, "message": message}}, f"{etype}: {message}", gap=gap
        )
        self.emit(
            O.DiagnosticRaised(
                self.t,
                self.turn,
                self.attempt,
                Diagnostic("protocol.error_event", "error", f"error event: {etype}: {message}", sse.seq),
            )
        )

    def end_attempt(self, status: str = "complete", reason: str | None = None, outcome: str | None = None) -> None:
        self.emit(O.AttemptEnded(self.t, self.turn, self.attempt, status, reason, outcome))

    # ---------------------------------------------------------------------------------------------- composites
    def text_block(self, index: int, pieces: list[str], gap: float = 0.03) -> None:
        self.block_start(index, {"type": "text", "text": ""})
        for p in pieces:
            self.delta(index, p, gap=gap)
        self.block_stop(index)

    def tool_block(
        self,
        index: int,
        tool_id: str,
        name: str,
        pieces: list[str],
        *,
        gap: float = 0.03,
        close: bool = True,
        split_at: int | None = None,
    ) -> O.BlockClosed | None:
        self.block_start(index, {"type": "tool_use", "id": tool_id, "name": name, "input": {}})
        for i, p in enumerate(pieces):
            self.delta(index, p, gap=gap, split=40 if split_at == i else None)
        if not close:
            return None
        closed = self.block_stop(index)
        self.tools[tool_id] = {"name": name, "index": index, "turn": self.turn, "attempt": self.attempt}
        self.turn_tool_ids.append(tool_id)
        if closed.input_error is None:
            tool_input = closed.content["input"]
            self.emit(O.ToolUse(self.t, self.turn, self.attempt, tool_id, name, index, tool_input))
            self.tool_state(tool_id, "queued", input=tool_input)
        else:
            self.tool_state(tool_id, "not_run", error=f"invalid tool input: {closed.input_error}")
            self.tool_result(
                tool_id, f"Error: the tool input was not valid JSON ({closed.input_error}); not run", True, "not_run"
            )
        return closed

    def tool_state(
        self,
        tool_id: str,
        state: str,
        *,
        input: dict[str, Any] | None = None,
        error: str | None = None,
        preview: str | None = None,
    ) -> None:
        info = self.tools[tool_id]
        times = info.setdefault("times", {})
        times[state] = self.t  # like the executor: state value -> time entered
        self.emit(
            O.ToolStateChanged(
                self.t,
                info["turn"],
                info["attempt"],
                tool_id,
                info["name"],
                info["index"],
                state,
                input,
                error,
                preview,
                dict(times),
            )
        )

    def tool_result(self, tool_id: str, content: str, is_error: bool = False, state: str = "succeeded") -> None:
        info = self.tools[tool_id]
        self.emit(O.ToolResult(self.t, info["turn"], info["attempt"], tool_id, info["name"], content, is_error, state))

    def run_tool(self, tool_id: str, result: str, *, state: str = "succeeded") -> None:
        self.tool_state(tool_id, state, preview=result[:200])
        self.tool_result(tool_id, result, state != "succeeded", state)

    def end_turn(self, outcome: str) -> None:
        self.emit(O.TurnEnded(self.t, self.turn, outcome, self.stop_reason, dict(self.usage)))

    def finish(self, status: str = "finished", error: str | None = None) -> None:
        self.state(status if status != "finished" else LoopState.FINISHED, error or "")
        tools = [
            {"id": i, "name": v["name"], "state": "succeeded", **v.get("times", {})} for i, v in self.tools.items()
        ]
        self.emit(O.LoopFinished(self.t, status, self.turn, list(self.messages), tools, error))


# ---------------------------------------------------------------------------------------------- the scenario

FILES = {
    "toolu_01Rd1": (
        "src/dates/parse.py",
        'def parse_date(text, locale="en_US"):\n    month, day, year = text.split("/")\n'
        "    return date(int(year), int(day), int(month))\n",
    ),
    "toolu_01Rd2": (
        "tests/test_parse.py",
        "def test_us_format():\n    assert parse_date('03/04/2025') == date(2025, 3, 4)\n",
    ),
    "toolu_01Rd3": ("CHANGELOG.md", "## 1.4.0\n- parse_date: accept ISO dates\n"),
}
TOOL_PIECES = {
    "toolu_01Rd1": ["", '{"pa', 'th": "src/d', "ates/par", 'se.py"}'],
    "toolu_01Rd2": ['{"path"', ': "tests/t', "est_par", 'se.py"}'],
    "toolu_01Rd3": ['{"path": "CHA', "NGELOG", '.md"}'],
}
INVALID_PIECES = ['{"path": "tests/t', "est_par", 'se.py", "lines": 1-', "40}"]
INTRO = ["I'll look at", " the date parser,", " its tests and", " the changelog", " to find the bug."]
ANSWER = [
    "The bug is in `parse_date`: the US branch unpacks `month, day, year`",
    " but builds `date(year, day, month)`, swapping day and month.\n\n",
    'Fix:\n\n```python\nmonth, day, year = text.split("/")\n',
    "return date(int(year), int(month), int(day))\n```\n\n",
    "The existing test `test_us_format` covers it once the fix is in.",
]


def parse_date_observations(stop: str | None = None, *, variant: str = "ok") -> list[O.Observation]:
    """The parse_date session as observations.

    `stop` cuts the sequence at a named moment: "opening" (request sent), "mid_tool_json" (second tool's input
    half streamed), "tools_running" (three tools running while the stream ends), "turn1" (end of turn 1), None (all).
    `variant`: "ok", "invalid_json" (the second tool's JSON is broken: not run), "overloaded" (an error event after
    HTTP 200 in turn 2, retried once), "overloaded_fatal" (retries exhausted: loop error), "cancelled" (cancel while
    the tools run).
    """
    s = StreamScript()
    s.loop_started()
    s.start_turn()
    s.start_attempt()
    if stop == "opening":
        return s.obs
    s.message_start()
    s.ping(gap=0.02)
    s.text_block(0, INTRO)
    ids = list(FILES)
    s.tool_block(1, ids[0], "read_file", TOOL_PIECES[ids[0]], split_at=2)
    # tool 1 runs while tool 2 streams
    s.wait(0.01).tool_state(ids[0], "running")
    pieces2 = INVALID_PIECES if variant == "invalid_json" else TOOL_PIECES[ids[1]]
    if stop == "mid_tool_json":
        s.block_start(2, {"type": "tool_use", "id": ids[1], "name": "read_file", "input": {}})
        for p in pieces2[:2]:
            s.delta(2, p)
        s.state(LoopState.PAUSED, "paused by user")
        return s.obs
    s.tool_block(2, ids[1], "read_file", pieces2)
    if variant != "invalid_json":
        s.wait(0.01).tool_state(ids[1], "running")
    s.tool_block(3, ids[2], "read_file", TOOL_PIECES[ids[2]])
    s.wait(0.01).tool_state(ids[2], "running")
    s.message_delta("tool_use", 187)
    s.message_stop()
    s.end_attempt("complete", None, "tool_use")
    s.state(LoopState.RUNNING_TOOLS)
    if stop == "tools_running":
        s.wait(0.05)
        return s.obs
    if variant == "cancelled":
        s.wait(0.08)
        s.state(LoopState.CANCELLED, "cancelled by user")
        for i in ids:
            if i in s.tools:
                s.tool_state(i, "cancelled", error="cancelled by user")
                s.tool_result(i, "Error: cancelled by user", True, "cancelled")
        s.end_turn("cancelled")
        s.emit(O.LoopFinished(s.t, "cancelled", s.turn, [], [], "cancelled by user"))
        return s.obs
    s.wait(0.12).run_tool(ids[0], FILES[ids[0]][1])
    if variant != "invalid_json":
        s.wait(0.05).run_tool(ids[1], FILES[ids[1]][1])
    s.wait(0.02).run_tool(ids[2], FILES[ids[2]][1])
    s.end_turn("tool_use")
    s.emit(O.MessageAppended(s.t, 0, {"role": "assistant", "content": []}))
    s.emit(O.MessageAppended(s.t, 0, {"role": "user", "content": []}))
    if stop == "turn1":
        return s.obs
    s.state(LoopState.STREAMING)
    s.start_turn()
    s.start_attempt(ttfb=0.42)
    s.message_start(2630)
    if variant in ("overloaded", "overloaded_fatal"):
        s.block_start(0, {"type": "text", "text": ""})
        s.delta(0, ANSWER[0])
        s.error_event()
        s.end_attempt("failed", "overloaded_error: Overloaded", "error")
        if variant == "overloaded_fatal":
            s.end_turn("error")
            s.finish("error", "overloaded_error: Overloaded (after 2 retries)")
            return s.obs
        s.state(LoopState.WAITING_RETRY, "retry in 0.5 s")
        s.wait(0.5)
        s.state(LoopState.STREAMING)
        s.start_attempt(ttfb=0.3)
        s.message_start(2630)
    s.text_block(0, ANSWER, gap=0.05)
    s.message_delta("end_turn", 164)
    s.message_stop()
    s.end_attempt("complete", None, "text_finish")
    s.emit(O.MessageAppended(s.t, 1, {"role": "assistant", "content": []}))
    s.emit(O.TextFinish(s.t, 1, "".join(ANSWER), "end_turn"))
    s.end_turn("text_finish")
    s.finish()
    return s.obs


_WORDS = "the quick brown fox jumps over a lazy dog while streaming tokens arrive one by one".split()


def _generated_turn(s: StreamScript, rnd: random.Random, tool_every: int) -> None:
    """One turn of a generated session: a text block of `tool_every` deltas, then one read_file call that runs."""
    s.start_turn()
    s.start_attempt(ttfb=0.1)
    s.message_start()
    s.block_start(0, {"type": "text", "text": ""})
    for _ in range(tool_every):
        s.delta(0, " " + " ".join(rnd.choices(_WORDS, k=3)), gap=0.001)
    s.block_stop(0)
    tool_id = f"toolu_{s.turn:06d}"
    s.tool_block(1, tool_id, "read_file", ['{"path": "', f"src/file_{s.turn}", '.py"}'], gap=0.001)
    s.tool_state(tool_id, "running")
    s.message_delta("tool_use", 300)
    s.message_stop()
    s.end_attempt("complete", None, "tool_use")
    s.wait(0.01).run_tool(tool_id, "x = 1\n")
    s.end_turn("tool_use")


def generated_observations(n_events: int, *, tool_every: int = 400, seed: int = 7) -> list[O.Observation]:
    """A long synthetic session of about `n_events` SSE events: many turns of text and tool calls (benchmarks)."""
    import random

    rnd = random.Random(seed)
    s = StreamScript(source={"type": "generated", "events": n_events})
    s.loop_started("generated")
    while True:
        _generated_turn(s, rnd, tool_every)
        if s.n_events >= n_events:
            break
    s.finish()
    return s.obs


def rate_limited_observations() -> list[O.Observation]:
    """The rate_limited scenario as observations: turn 1 gets HTTP 429 (retry-after-ms 200) and turn 2 HTTP 529
    (retry-after-ms 300) before their streams, each retried by the SDK: 4 HTTP requests in 2 turns."""
    s = StreamScript(source={"type": "scenario", "name": "rate_limited"})
    s.loop_started()
    s.start_turn()
    s.start_attempt(
        failed_tries=((429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", 0.2),)
    )
    s.message_start()
    s.text_block(0, INTRO[:2])
    tool_id = "toolu_01Rd1"
    s.tool_block(1, tool_id, "read_file", TOOL_PIECES[tool_id])
    s.wait(0.01).tool_state(tool_id, "running")
    s.message_delta("tool_use", 120)
    s.message_stop()
    s.end_attempt("complete", None, "tool_use")
    s.wait(0.1).run_tool(tool_id, FILES[tool_id][1])
    s.end_turn("tool_use")
    s.start_turn()
    s.start_attempt(failed_tries=((529, "overloaded_error", "Overloaded", 0.3),))
    s.message_start(2630)
    s.text_block(0, ANSWER[:2])
    s.message_delta("end_turn", 90)
    s.message_stop()
    s.end_attempt("complete", None, "text_finish")
    s.emit(O.TextFinish(s.t, 1, "".join(ANSWER[:2]), "end_turn"))
    s.end_turn("text_finish")
    s.finish()
    return s.obs


def buffered_observations(*, buffered: bool = True, hold_in_silence: float = 0.0) -> list[O.Observation]:
    """One text turn behind a relay that holds the body (`buffered`): message_start at once, then 3 s of silence and
    every other event in one burst; `buffered=False` streams the same events 60 ms apart. `hold_in_silence`: the user
    pauses the stream for that long during the silence (the burst after the release is the socket's backlog)."""
    s = StreamScript(source={"type": "scenario", "name": "proxy_buffered"})
    s.loop_started()
    s.start_turn()
    s.start_attempt()
    s.message_start()
    if hold_in_silence:
        s.hold(hold_in_silence)
    s.wait(3.0 if buffered else 0.06)
    gap = 0.0 if buffered else 0.06
    s.block_start(0, {"type": "text", "text": ""}, gap=gap)
    for piece in ANSWER * 4:
        s.delta(0, piece, gap=gap)
    s.block_stop(0, gap=gap)
    s.message_delta("end_turn", 164, gap=gap)
    s.message_stop(gap=gap)
    s.end_attempt("complete", None, "text_finish")
    s.end_turn("text_finish")
    s.finish()
    return s.obs


def generated_stream(n_events: int, *, tool_every: int = 1000, seed: int = 7) -> Iterator[O.Observation]:
    """`generated_observations`, yielded turn by turn (soak benchmarks: a million events without holding them)."""
    import random

    rnd = random.Random(seed)
    s = StreamScript(source={"type": "generated", "events": n_events})
    s.loop_started("generated")
    while True:
        _generated_turn(s, rnd, tool_every)
        done = s.n_events >= n_events
        if done:
            s.finish()
        yield from s.obs
        s.obs.clear()
        s.tools.clear()
        if done:
            return

"""Test support for "no known key reaches the dashboard": the observations a publisher (the agent loop, the proxy)
makes of some network reads, and every text the dashboard's state can show."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import orjson

from inspector.observe import observations as O
from inspector.observe.stepobs import step_observations
from inspector.state.fold import DashboardState
from inspector.stream.assembler import TurnStream
from inspector.stream.family import new_stream

__all__ = [
    "KEY_LEAK_LIMIT",
    "KeyEchoedInTwoReads",
    "assert_no_key",
    "dashboard_texts",
    "longest_common_substring",
    "stream_observations",
]


def stream_observations(
    reads: Iterable[bytes], turn: int = 0, attempt: int = 0, family: str = "anthropic"
) -> list[O.Observation]:
    """What the loop and the proxy publish for one attempt that received ``reads``: AttemptStarted, then each
    ReadReceived followed by the observations of the events it completed, the stream's closing diagnostics and
    AttemptEnded. Times are the read's number (in ms). ``family``: the wire family (``openai_chat``,
    ``openai_responses``: the request path and the stream engine are that family's)."""
    ts = TurnStream() if family == "anthropic" else new_stream(family)  # type: ignore[arg-type]
    path = {"openai_chat": "/v1/chat/completions", "openai_responses": "/v1/responses"}.get(family, "/v1/messages")
    out: list[O.Observation] = [
        O.AttemptStarted(0.0, turn, attempt, "POST", "https://api.example" + path, {}, {"model": "m"})
    ]
    t = 0.0
    for i, data in enumerate(reads):
        t = (i + 1) / 1000
        out.append(O.ReadReceived(t, turn, attempt, i, t, data))
        for step in ts.feed(data):
            out.extend(step_observations(step, ts.assembler, t, turn, attempt))
    for d in ts.close():
        out.append(O.DiagnosticRaised(t, turn, attempt, d))
    status = "complete" if ts.assembler.stopped else "failed"
    out.append(O.AttemptEnded(t, turn, attempt, status, None, ts.outcome))
    return out


def dashboard_texts(state: DashboardState) -> list[str]:
    """Every text the dashboard's panes and detail views are made of, one string per thing a reader can see
    whole: the raw reads joined per attempt (the SSE pane's raw view), the event rows, each block's buffer (the
    Blocks pane, the Assistant pane's text) and content, the tools (inputs, errors, results), the transcript notes,
    the diagnostics, the requests and the status."""
    out: list[str] = []
    reads = state.reads
    per_attempt: dict[tuple[int, int], list[bytes]] = {}
    for i in range(len(reads)):
        per_attempt.setdefault((reads.turn[i], reads.attempt[i]), []).append(reads.data[i])
    for chunks in per_attempt.values():
        out.append(b"".join(chunks).decode("utf-8", "replace"))
    events = state.events
    out.extend(events.summary[i] for i in range(len(events)))
    for b in state.blocks.values():
        out.append(b.joined())
        out.append(_dumps([b.start, b.content, b.input_error]))
        if b.is_tool:
            out.append(_dumps(b.preview()))
    for tool in state.tools.values():
        out.append(_dumps([tool.input, tool.input_summary, tool.error, tool.result_preview, tool.result_summary]))
    out.append(_dumps(state.transcript))
    out.append(_dumps([(d.code, d.message) for d in state.diagnostics]))
    out.append(_dumps([list(state.requests.values()), list(state.sent_results.items())]))
    st = state.status
    out.append(_dumps([st.source, st.model, st.prompt, st.detail, st.error, st.last_try]))
    for a in state.attempts.values():
        out.append(_dumps([a.url, a.reason, a.model, a.message_id, a.usage, a.stop_reason, a.tries]))
    return out


def _dumps(value: object) -> str:
    return orjson.dumps(value, default=repr, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")


KEY_LEAK_LIMIT = 12  # the longest piece of a key an output may hold (a preview's prefix, a shared "sk-ant-api03-")


def longest_common_substring(key: str, text: str) -> int:
    """The length of the longest piece of ``key`` found in ``text`` (0 if none): a binary search on the length,
    each step a substring test per position of the key (a piece of length n holds every shorter piece)."""
    lo, hi = 0, len(key)
    while lo < hi:
        n = (lo + hi + 1) // 2
        if any(key[i : i + n] in text for i in range(len(key) - n + 1)):
            lo = n
        else:
            hi = n - 1
    return lo


def _views(output: str | bytes) -> list[str]:
    """An output as text, as it reads once percent-decoded and once JSON-unescaped (a key hidden by an encoding
    still counts)."""
    from urllib.parse import unquote

    from inspector.core.redaction import _unescape

    text = output.decode("utf-8", "replace") if isinstance(output, (bytes, bytearray)) else str(output)
    return [text, unquote(text), _unescape(text)]


def assert_no_key(key: str, outputs: dict[str, str | bytes], limit: int = KEY_LEAK_LIMIT) -> None:
    """No output holds more than ``limit`` characters in a row of ``key``, as it is, percent-decoded or
    JSON-unescaped. ``outputs``: name -> text or bytes (the name is in the failure message)."""
    for name, output in outputs.items():
        for view in _views(output):
            n = longest_common_substring(key, view)
            if n > limit:
                at = max(view.find(key[i : i + n]) for i in range(len(key) - n + 1))
                raise AssertionError(
                    f"{name}: {n} characters of the key: ...{view[max(0, at - 40) : at + n + 40]!r}..."
                )


class KeyEchoedInTwoReads:
    """An upstream (an ASGI app) whose streamed answer echoes ``key`` in its text, in two network reads cut ten
    characters into the key; the second is sent once `release()` was called (from any thread; it waits at most
    ``wait`` seconds). ``others``: requests to another path than ``/v1/messages`` get this JSON body at once instead
    (None: every request gets the stream)."""

    def __init__(self, key: str, *, others: bytes | None = None, wait: float = 30.0) -> None:
        from inspector.testing.streamgen import (
            block_stop,
            message_delta,
            message_start,
            message_stop,
            sse,
            text_delta,
            text_start,
        )

        self.key, self.others, self.wait = key, others, wait
        self.body = sse(
            message_start(), text_start(0), text_delta(0, f"your key is {key}, keep it"), block_stop(0),
            message_delta("end_turn"), message_stop(),
        )  # fmt: skip
        self.cut = self.body.index(key.encode()) + 10
        self._second = threading.Event()

    def release(self) -> None:
        self._second.set()

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return
        if self.others is not None and scope["path"] != "/v1/messages":
            json = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": json})
            await send({"type": "http.response.body", "body": self.others})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": self.body[: self.cut], "more_body": True})
        await asyncio.to_thread(self._second.wait, self.wait)
        await send({"type": "http.response.body", "body": self.body[self.cut :], "more_body": False})

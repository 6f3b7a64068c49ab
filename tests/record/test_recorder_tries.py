"""The recorder's numbering of HTTP tries, as a property: whatever mix of failed tries (HTTP errors, connection
failures), loop attempts (complete, failed, cancelled) and turns, every recorded attempt is one HTTP request with its
request and end lines, numbered 0, 1, 2... within its turn, in order, and the file reads back without a warning."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.observe import observations as O
from inspector.record.recorder import Recorder
from inspector.record.recording import read_recording
from inspector.testing.hyp import examples

# one loop attempt: how many failed tries before it (each: an HTTP status or None for a connection failure), then
# how it ends: complete / failed (after the first byte) / cancelled (mid-stream) / gave_up (the SDK's last try failed)
# / cancelled_waiting (cancelled while the SDK waited to retry)
ATTEMPT = st.tuples(
    st.lists(st.sampled_from([429, 529, 500, None]), max_size=3),
    st.sampled_from(["complete", "failed", "cancelled", "gave_up", "cancelled_waiting"]),
)
RUN = st.lists(st.lists(ATTEMPT, min_size=1, max_size=3), min_size=1, max_size=4)


def observations(
    run: list[list[tuple[list[Any], str]]],
) -> tuple[list[O.Observation], list[list[tuple[int | None, str]]]]:
    """The loop's observations for `run`, and the recorded attempts expected per turn: (HTTP status, end status)."""
    out: list[O.Observation] = []
    expected: list[list[tuple[int | None, str]]] = []
    t = 0.0

    def tick() -> float:
        nonlocal t
        t += 0.25
        return t

    for turn, attempts in enumerate(run):
        rec: list[tuple[int | None, str]] = []
        for attempt, (failures, end) in enumerate(attempts):
            out.append(O.AttemptStarted(tick(), turn, attempt, "POST", "http://x/v1/messages", {}, {"messages": []}))
            if end == "gave_up" and not failures:
                failures = [429]
            for k, status in enumerate(failures):
                last = end == "gave_up" and k == len(failures) - 1
                body = {"type": "error", "error": {"type": "x", "message": "m"}} if status else None
                out.append(
                    O.HttpTryFailed(
                        tick(),
                        turn,
                        attempt,
                        k,
                        "POST",
                        "u",
                        t,
                        status,
                        {},
                        "x" if status else None,
                        "m" if status else None,
                        body,
                        None if status else "ConnectError: refused",
                        None if last else 0.5,
                    )
                )
                rec.append((status, "http_error" if status else "connection_error"))
            k = len(failures)
            if end == "gave_up":
                out.append(O.AttemptEnded(tick(), turn, attempt, "failed", "HTTP 429", None))
                break
            if end == "cancelled_waiting":
                out.append(O.AttemptEnded(tick(), turn, attempt, "cancelled", "cancelled by user", None))
                rec.append((None, "cancelled"))  # after failed tries: the try the SDK would have sent
                break
            out.append(O.ResponseStarted(tick(), turn, attempt, 200, {}, k, t))
            out.append(O.ReadReceived(tick(), turn, attempt, 0, 0.1, b"event: ping\ndata: {}\n\n"))
            status = {"complete": "complete", "failed": "failed", "cancelled": "cancelled"}[end]
            out.append(O.AttemptEnded(tick(), turn, attempt, status, None, None))
            rec.append((200, status))
            if end != "failed":
                break
        expected.append(rec)
        if rec and rec[-1][1] != "complete":
            break
    return out, expected


@settings(max_examples=examples(200), deadline=None)
@given(RUN)
def test_every_try_is_one_recorded_attempt(run: list[list[tuple[list[Any], str]]]) -> None:
    obs, expected = observations(run)
    buf = io.BytesIO()
    recorder = Recorder(buf, source={"type": "test"})
    for o in obs:
        recorder(o)
    assert recorder.error is None
    rec = read_recording(buf.getvalue())
    assert rec.warnings == []
    got = [[((a.response or {}).get("status"), (a.end or {})["status"]) for a in turn.attempts] for turn in rec.turns]
    assert got == expected
    for turn in rec.turns:
        assert [a.attempt for a in turn.attempts] == list(range(len(turn.attempts)))
        for a in turn.attempts:
            assert a.request is not None and a.end is not None
            if a.end["status"] in ("http_error",):
                assert a.reads and a.reads[0].data.startswith(b'{"type":"error"')
            assert a.end["t"] >= 0 and (a.response is None or a.response["t"] >= 0)

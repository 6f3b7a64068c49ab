"""Watched sessions (`inspector proxy` / `serve --tui` in the dashboard): what another program's traffic looks like
as observations. Real sockets on loopback; the servers are started and stopped by the tests."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import cast

import anthropic
from anthropic.types import ContentBlockParam, MessageParam, ToolResultBlockParam

from inspector.observe import observations as O
from inspector.observe.states import LoopState
from inspector.sessions.watch import serve_session
from inspector.state.fold import DashboardState

KEY = "sk-ant-api03-CANARY-watch-0123456789"


async def _converse(base_url: str) -> list[str | None]:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0)
    msgs: list[MessageParam] = [{"role": "user", "content": "why does parse_date fail?"}]
    stops: list[str | None] = []
    for _ in range(3):
        async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=msgs) as s:
            m = await s.get_final_message()
        stops.append(m.stop_reason)
        # the blocks as JSON, as a harness sends them back (the SDK's param type is that JSON's TypedDict)
        content = [cast(ContentBlockParam, b.model_dump(exclude_none=True)) for b in m.content]
        msgs.append({"role": "assistant", "content": content})
        uses = [b for b in m.content if b.type == "tool_use"]
        if not uses:
            break
        results: list[ToolResultBlockParam] = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "text"} for b in uses[:-1]
        ]
        results.append({"type": "tool_result", "tool_use_id": uses[-1].id, "content": "boom", "is_error": True})
        msgs.append({"role": "user", "content": results})
    await client.close()
    return stops


async def test_serve_session_shows_what_clients_get_and_infers_their_tools() -> None:
    session = serve_session("parse_date", None, speed=math.inf, host="127.0.0.1", port=0)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    runner = asyncio.ensure_future(session.run())
    try:
        stops = await asyncio.wait_for(_converse(session.source["listen"]), 30)
    finally:
        session.controller.cancel()
        result = await asyncio.wait_for(runner, 30)
    assert stops == ["tool_use", "end_turn"]
    assert result.status == "cancelled" and session.state == LoopState.CANCELLED
    started = seen[0]
    assert isinstance(started, O.LoopStarted) and started.source["type"] == "serve"
    assert [o.turn for o in seen if isinstance(o, O.TurnStarted)] == [0, 1]
    # the other harness's tool calls: streaming input, then "running" in that harness from the block stop until
    # the next request carries the results (succeeded, or failed when is_error)
    states: dict[str, list[str]] = {}
    for o in seen:
        if isinstance(o, O.ToolStateChanged):
            states.setdefault(o.id, []).append(o.state)
    assert len(states) == 4  # parse_date: run_tests + 3 reads
    finals = [v[-1] for v in states.values()]
    assert all(v[:2] == ["streaming_input", "running"] for v in states.values())
    assert sorted(finals) == ["failed", "succeeded", "succeeded", "succeeded"]
    # the dashboard's fold takes it as it takes the loop's observations
    st = DashboardState()
    for o in seen:
        st.apply(o)
    assert st.status.events == sum(isinstance(o, O.SSEEventSeen) for o in seen) > 50
    # pause and step do not apply to another program's stream: nothing changes, the controller says why
    session.controller.pause()
    assert "does not apply" in session.controller.note
    assert KEY not in repr([o.to_json() for o in seen])


async def test_a_stop_with_a_reason_is_the_sessions_normal_end_and_a_stop_without_one_a_cancellation() -> None:
    """`inspector watch` stops its session with a reason when the command exited: the session finished (the
    dashboard, the headless lines and the recording say so), and the reason is the final state's detail. A stop
    from outside (no reason; the controller's cancel) is a cancellation."""
    for reason, status, state in (
        ("the command exited with status 0", "finished", LoopState.FINISHED),
        (None, "cancelled", LoopState.CANCELLED),
    ):
        session = serve_session("weather", None, speed=math.inf, host="127.0.0.1", port=0)
        seen: list[O.Observation] = []
        session.bus.subscribe(seen.append)
        runner = asyncio.ensure_future(session.run())
        session.stop(reason)
        session.stop("a later reason does not replace the first stop's")
        result = await asyncio.wait_for(runner, 30)
        assert result.status == status and session.state == state
        last_state = [o for o in seen if isinstance(o, O.LoopStateChanged)][-1]
        assert last_state.state == state and last_state.detail == (reason or "stopped")
        finished = seen[-1]
        assert isinstance(finished, O.LoopFinished) and finished.status == status and finished.error is None


async def test_the_watched_commands_exit_ends_the_session_as_finished_saying_how() -> None:
    """`watch` with the dashboard: the session ends when the command exits (as finished, with its exit status),
    so the dashboard says so and the recording is closed complete, while the dashboard stays open on it. (It kept
    serving, "idle", until the user quit.)"""
    import subprocess
    import sys

    session = serve_session("weather", None, speed=math.inf, host="127.0.0.1", port=0)
    seen: list[O.Observation] = []
    session.bus.subscribe(seen.append)
    code = "import sys; sys.stdin.read(); sys.exit(3)"  # runs until its stdin closes, then exits 3
    gate = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)  # noqa: ASYNC220 (watch's is a Popen)
    session.command = gate
    runner = asyncio.ensure_future(session.run())
    assert gate.stdin is not None
    gate.stdin.close()  # the command ends now (status 3)
    result = await asyncio.wait_for(runner, 30)
    assert result.status == "finished" and session.state == LoopState.FINISHED
    last_state = [o for o in seen if isinstance(o, O.LoopStateChanged)][-1]
    assert last_state.detail == "the command exited with status 3"


async def test_the_recording_ends_with_the_sessions_end(tmp_path: Path) -> None:
    """The recording of a watched session ends with its loop_finished (finished when the command exited,
    cancelled when stopped from outside), after the attempts' end lines, as the dashboard and the headless lines
    say it. (The server's shutdown closed the recording first: its last line was the last attempt's.)"""
    from inspector.record.reader import read_recording

    for reason, status in (("the command exited with status 0", "finished"), (None, "cancelled")):
        rec = tmp_path / f"{status}.jsonl"
        session = serve_session("weather", None, speed=math.inf, host="127.0.0.1", port=0, record=str(rec))
        runner = asyncio.ensure_future(session.run())
        try:
            assert await asyncio.wait_for(_one_turn(session.source["listen"]), 30) == "tool_use"
        finally:
            session.stop(reason)
            result = await asyncio.wait_for(runner, 30)
        assert result.status == status
        last = read_recording(rec).observations[-1]
        assert last["type"] == "loop_finished" and last["status"] == status and last["turns"] == 1
        assert [line for line in rec.read_text().splitlines() if '"loop_finished"' in line] == [
            rec.read_text().splitlines()[-1]
        ]


async def test_a_session_cancelled_again_while_it_stops_still_closes_its_recording(tmp_path: Path) -> None:
    """The dashboard quits (a second Ctrl-C, q): it stops the session and its closing loop cancels the session's
    task again while the server stops. That second cancellation skipped close(): the recording never got its end
    (no loop_finished) and the socket and the fake API were left open."""
    from inspector.record.reader import read_recording

    rec = tmp_path / "quit.jsonl"
    session = serve_session("weather", None, speed=math.inf, host="127.0.0.1", port=0, record=str(rec))
    runner = asyncio.ensure_future(session.run())
    assert await asyncio.wait_for(_one_turn(session.source["listen"]), 30) == "tool_use"
    session.controller.cancel()
    for _ in range(1000):  # until run() waits for the server to stop (it began closing the proxy)
        if session.proxy.closing().is_set():
            break
        await asyncio.sleep(0)
    assert session.proxy.closing().is_set()
    runner.cancel()  # the loop closing
    try:
        await asyncio.wait_for(runner, 30)
    except asyncio.CancelledError:
        pass
    assert session.sock.fileno() == -1 and session.upstream_server is None
    last = read_recording(rec).observations[-1]
    assert last["type"] == "loop_finished" and last["status"] == "cancelled"


async def test_a_signal_is_left_to_the_commands_handler_which_ends_the_session_in_order(tmp_path: Path) -> None:
    """SIGTERM to a dashboard whose watched session serves on its loop (the main thread): the embedded uvicorn
    server's own handler, installed while it served, caught it and stopped the server at once; an open stream was
    cut without its end line, and the command's handler (the dashboard's: cli.common.DashboardStops; watch's) heard
    of it only once the server had stopped (uvicorn raised it again). The signal is now the command's: here a
    handler that cancels the session as the dashboard's quit does. The open stream ends (its end line), and the
    recording with the session's loop_finished."""
    import json
    import os
    import signal

    from inspector.record.reader import read_recording

    rec = tmp_path / "signalled.jsonl"
    session = serve_session("weather", "stall:1000", speed=1.0, host="127.0.0.1", port=0, record=str(rec))
    got: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        got.append(signum)
        session.controller.cancel()

    previous = signal.signal(signal.SIGTERM, stop)
    writer = None
    try:
        session.sock.listen(2048)  # (connections queue until uvicorn accepts them, as watch has it)
        runner = asyncio.ensure_future(session.run())
        host, port = session.source["listen"].removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        body = json.dumps(
            {
                "model": "claude-sonnet-4-6",
                "max_tokens": 50,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        writer.write(
            f"POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nx-api-key: {KEY}\r\n"
            f"anthropic-version: 2023-06-01\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await asyncio.wait_for(reader.readuntil(b"message_start"), 30)  # the stream is open (then it stalls)
        os.kill(os.getpid(), signal.SIGTERM)
        result = await asyncio.wait_for(runner, 30)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if writer is not None:
            writer.close()
    assert got == [signal.SIGTERM] and result.status == "cancelled"
    recording = read_recording(rec)
    ends = [a.end for a in recording.attempts()]
    assert len(ends) == 1 and ends[0] is not None, list(recording.attempts())
    last = recording.observations[-1]
    assert last["type"] == "loop_finished" and last["status"] == "cancelled"


async def test_watch_controller_cancel_before_any_request_stops_cleanly() -> None:
    session = serve_session("weather", None, speed=math.inf, host="127.0.0.1", port=0)
    session.controller.cancel()  # before it even started: run() ends at once, cleanly
    runner = asyncio.ensure_future(session.run())
    result = await asyncio.wait_for(runner, 30)
    assert result.status == "cancelled"
    assert session.sock.fileno() == -1  # the listening socket is closed


def test_watch_session_refuses_a_proxy_without_a_bus() -> None:
    """A watched proxy must publish what passes: one built without a bus is refused at once (a named error, the
    socket left to its owner), not a session that shows nothing."""
    import socket

    import pytest

    from inspector.net.proxy import ProxyApp
    from inspector.sessions.watch import WatchSession

    proxy = ProxyApp("http://127.0.0.1:9", bus=None)
    with socket.socket() as sock, pytest.raises(ValueError, match="observation bus"):
        WatchSession(proxy, sock, source={"type": "proxy"})
    proxy.close()


def test_the_session_is_streaming_while_any_conversation_streams() -> None:
    """Concurrent conversations: the end of one turn set the status to idle while others were still streaming
    (the dashboard said "○ idle" beside a list of streaming conversations). Idle once the last open attempt ends."""
    import socket

    from inspector.net.proxy import ProxyApp
    from inspector.sessions.watch import WatchSession

    bus = O.ObservationBus()
    with socket.socket() as sock:
        session = WatchSession(ProxyApp("http://127.0.0.1:9", bus=bus), sock, source={"type": "proxy"})

        def state() -> LoopState:
            return session.state

        for turn in (0, 1):
            bus.publish(O.AttemptStarted(0.1 * turn, turn, 0, "POST", "http://x/v1/messages", {}, {}))
        assert state() == LoopState.STREAMING
        bus.publish(O.AttemptEnded(0.5, 0, 0, "complete", None, "text_finish"))
        bus.publish(O.TurnEnded(0.5, 0, "text_finish", "end_turn", {}))
        assert state() == LoopState.STREAMING  # (turn 1 still streams)
        bus.publish(O.AttemptEnded(0.6, 1, 0, "complete", None, "text_finish"))
        bus.publish(O.TurnEnded(0.6, 1, "text_finish", "end_turn", {}))
        assert state() == LoopState.IDLE
        bus.publish(O.AttemptStarted(0.7, 2, 0, "POST", "http://x/v1/messages", {}, {}))
        bus.publish(O.TurnEnded(0.8, 2, "error", None, {}))  # (a turn that ends without its attempt's end)
        assert state() == LoopState.IDLE
        # an attempt answered with an error status (no TurnEnded follows): the session said "● streaming" ever after
        bus.publish(O.AttemptStarted(0.9, 3, 0, "POST", "http://x/v1/messages", {}, {}))
        assert state() == LoopState.STREAMING
        bus.publish(O.AttemptEnded(1.0, 3, 0, "http_error", "HTTP 400 invalid_request_error: messages.2: ...", "error"))
        assert state() == LoopState.IDLE


async def _one_turn(base_url: str) -> str | None:
    """A harness that streams one turn (the model asks for tools) and quits before sending their results."""
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base_url, max_retries=0)
    msgs: list[MessageParam] = [{"role": "user", "content": "why does parse_date fail?"}]
    async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=msgs) as s:
        m = await s.get_final_message()
    await client.close()
    return m.stop_reason


async def test_a_tool_still_running_when_the_session_ends_ends_unknown_and_its_conversation_unfinished(
    tmp_path: Path,
) -> None:
    """A watched command that exits while its tool calls are shown running (inferred): no next request will say
    how they went. They end `unknown`, saying why, with no run time (it stopped growing: not "running" for ever),
    and their conversation is `ended unfinished`, not "waiting for tools". The recording keeps it, once. A stop
    from outside (no command) says the session ended instead."""
    from inspector.record.reader import read_recording
    from inspector.state.conversations import ENDED, WAITING_TOOLS

    for reason, words in (
        ("the command exited with status 0", "the command ended before a next request showed its result"),
        (None, "the session ended before a next request showed its result"),
    ):
        rec = tmp_path / f"{reason is None}.jsonl"
        session = serve_session("parse_date", None, speed=math.inf, host="127.0.0.1", port=0, record=str(rec))
        seen: list[O.Observation] = []
        session.bus.subscribe(seen.append)
        runner = asyncio.ensure_future(session.run())
        try:
            assert await asyncio.wait_for(_one_turn(session.source["listen"]), 30) == "tool_use"
            before = DashboardState().apply_all(list(seen))
            assert [c.state for c in before.conversations] == [WAITING_TOOLS]
            assert {t.state for t in before.tools.values()} == {"running"}
        finally:
            session.stop(reason)
            await asyncio.wait_for(runner, 30)
        ended = [o for o in seen if isinstance(o, O.ToolStateChanged) and o.state == "unknown"]
        assert len(ended) == 4 and all(o.inferred and o.error == words for o in ended)  # parse_date: 4 calls
        assert seen.index(ended[-1]) < len(seen) - 1 and isinstance(seen[-1], O.LoopFinished)
        st = DashboardState().apply_all(seen)
        assert {t.state for t in st.tools.values()} == {"unknown"}
        assert all(t.elapsed(1e9) is None and t.t_finished is not None for t in st.tools.values())
        assert st.turn_savings(0) is None
        assert [c.state for c in st.conversations] == [ENDED]
        assert [c.t_last for c in st.conversations] == [c.t_last for c in before.conversations]  # (not the end's)
        kept = [o for o in read_recording(rec).observations if o.get("type") == "tool_state"]
        assert [o["error"] for o in kept if o["state"] == "unknown"] == [words] * 4
        session.proxy.close()  # (closed twice: nothing more is said)
        assert not session.proxy.seen_tools
    # a replay of the recording has no result to give them: it says why not (it said only "no recorded result")
    from inspector.sessions.sources import load_recording, replay_session

    replay = replay_session(load_recording(str(tmp_path / "False.jsonl")), speed=math.inf)
    replayed: list[O.Observation] = []
    replay.bus.subscribe(replayed.append)
    await replay.run()
    errors = [o.error or "" for o in replayed if isinstance(o, O.ToolStateChanged) and o.state == "failed"]
    assert len(errors) == 4 and all(e.startswith("no recorded result for ") for e in errors)
    assert all(e.endswith(": the command ended before a next request showed its result") for e in errors)

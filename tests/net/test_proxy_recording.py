"""One recording path: the proxy's recording is the Recorder's, and equals the loop's recording of the same bytes.

The agent loop (`api_session`, the path of `inspector run --record`) talks to `serve` THROUGH the proxy: the same
bytes pass both, and each writes its recording with the same Recorder, the loop from its bus and the proxy from its
own. What the two must agree on is the wire."""

from __future__ import annotations

import errno
import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

import httpx2
import pytest

from inspector.core.pacing import Pacer
from inspector.net.proxy import ProxyApp
from inspector.net.serve import ServeApp
from inspector.net.server import BackgroundServer
from inspector.observe import observations as O
from inspector.record.reader import Recording
from inspector.record.recording import read_recording
from inspector.scenarios.bundled import get_scenario
from inspector.sessions.sources import api_session
from inspector.testing.loop import run_observed

KEY = "sk-ant-api03-CANARY-seam-0123456789abcdefghijkl"
# headers one side cannot see as the other does: hop-by-hop and per-connection ones (the proxy forwards a request
# without them and the HTTP layers set them again), and those the SDK's client adds for itself
_LINK_HEADERS = {"connection", "content-length", "host", "transfer-encoding", "keep-alive"}


def _wire(path: Path) -> tuple[Recording, dict[tuple[int, int], dict[str, Any]]]:
    """A recording's wire facts, per (turn, attempt): the request (method, the URL's path, headers, body), the
    response (status, headers), ALL the bytes received joined, how the attempt ended."""
    rec = read_recording(path)
    out = {}
    for a in rec.attempts():
        req, resp = a.request, a.response
        assert req is not None  # every recorded attempt starts with its request
        url = req["url"]
        out[(a.turn, a.attempt)] = {
            "method": req["method"],
            "path": url[url.index("/v1/") :],
            "headers": {k: v for k, v in req["headers"].items() if k not in _LINK_HEADERS},
            "body": req["body"],
            "status": resp["status"] if resp else None,
            "response_headers": {k: v for k, v in (resp or {}).get("headers", {}).items() if k not in _LINK_HEADERS},
            "data": a.data,
            "end": (a.end or {}).get("status"),
        }
    return rec, out


async def test_the_proxys_and_the_loops_recordings_of_the_same_bytes_are_equal(tmp_path: Path) -> None:
    """`equal` means: the same attempts, numbered the same (turn, attempt); for each, the same request (method, path,
    the body as JSON; the loop records the request it built, so its body lacks the SDK's ``"stream": true`` and its
    headers are a subset of those that went out, each with the value recorded), the same response status and headers
    (but the hop-by-hop/connection ones the HTTP layers own), the same bytes received (joined: where a network read ends depends on the socket and the scheduler, not
    on what passed, so read boundaries and read counts are not compared), and the same end status. Not compared:
    times (two clocks, and the proxy is one hop nearer upstream), the URL's host (each recorded the address it sent
    to), and the free-form obs lines: the loop knows its tool runs (tool_state / tool_result, measured), the proxy
    only infers them from the next request (tool_inferred, ToolStateChanged with inferred=True) -- for those the
    tool call ids must agree. Neither file may hold the API key."""
    scenario = get_scenario("weather")
    loop_rec, proxy_rec = tmp_path / "loop.jsonl", tmp_path / "proxy.jsonl"
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as serve:
        proxy = ProxyApp(serve.base_url, record=proxy_rec)
        with BackgroundServer(proxy) as px:
            session = api_session(
                scenario.model,
                scenario.prompt or "hi",
                api_key=KEY,
                base_url=px.base_url,
                builtin=False,
                user_tools=scenario.resolve_tools(None, pacer=Pacer(math.inf)),
                system=scenario.system,
                max_tokens=scenario.max_tokens,
                record=loop_rec,
                http_client=httpx2.AsyncClient(
                    headers={"x-inspector-scenario": scenario.name, "x-inspector-session": "seam"}, timeout=30
                ),
            )
            result, obs = await run_observed(session)
        proxy.close()
    assert result.status == "finished", result.error
    lrec, loop_wire = _wire(loop_rec)
    prec, proxy_wire = _wire(proxy_rec)
    assert len(loop_wire) >= 2  # a tool turn and the final turn at least
    assert list(proxy_wire) == list(loop_wire)
    for key in loop_wire:
        mine, theirs = proxy_wire[key], loop_wire[key]
        # the loop records the request it built: its body without the SDK's "stream" flag, and not the headers the
        # SDK and its HTTP client add when sending; every header it recorded went out as recorded
        assert mine["headers"].items() >= theirs["headers"].items(), key
        assert mine.pop("body") == {**theirs.pop("body"), "stream": True}, key
        mine.pop("headers"), theirs.pop("headers")
        assert mine == theirs, key
    # tool calls: measured by the loop, inferred by the proxy, the same ids
    ran = {o["tool_use_id"] for o in lrec.observations if o.get("type") == "tool_result"}
    inferred = {o["tool_use_id"] for o in prec.observations if o.get("type") == "tool_inferred"}
    assert ran and inferred == ran
    inferred_states = [o for o in prec.observations if o.get("type") == "tool_state"]
    # a tool's input streaming is seen on the wire; its run and end are inferred
    assert inferred_states and all(o["inferred"] == (o["state"] != "streaming_input") for o in inferred_states)
    assert {o["state"] for o in inferred_states if o["inferred"]} >= {"running", "succeeded"}
    assert not any(o.get("inferred") for o in lrec.observations if o.get("type") == "tool_state")
    for path in (loop_rec, proxy_rec):
        assert KEY.encode() not in path.read_bytes()
    assert any(isinstance(o, O.ReadReceived) for o in obs.items)


def _types_into(got: list[type]) -> Callable[[O.Observation], None]:
    return lambda o: got.append(type(o))


class _FullDisk(io.RawIOBase):  # (a binary file, not typed as IO: cast where one is expected)
    def __init__(self, room: int) -> None:
        self.room, self.data = room, b""

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:  # (any buffer, as RawIOBase.write takes)
        if len(self.data) + len(b) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.data += bytes(b)
        return len(b)


@pytest.mark.parametrize("room", [0, 700])
def test_a_recorder_that_cannot_write_stops_once_and_says_so(room: int) -> None:
    """The Recorder's failure path, as the proxy uses it: one on_error call, one line, the producer goes on."""
    from inspector.record.recorder import Recorder

    disk = _FullDisk(room)
    errors: list[str] = []
    if room == 0:  # not even the header
        with pytest.raises(OSError):
            Recorder(cast(IO[bytes], disk), source={}, batched=True, on_error=errors.append)
        return
    rec = Recorder(cast(IO[bytes], disk), source={}, batched=True, on_error=errors.append)
    for i in range(50):
        rec(O.ReadReceived(float(i), 0, 0, i, float(i), b"x" * 40))
    rec.close()
    rec.close()
    assert len(errors) == 1 and errors[0] == rec.error
    assert "recording stopped" in errors[0] and "no space left on device" in errors[0]
    assert "\n" not in errors[0]


@pytest.mark.parametrize("inferred", [True, False])
async def test_a_replay_takes_measured_tool_times_only(tmp_path: Path, inferred: bool) -> None:
    """A proxy recording's tool times are inferred bounds (block stop -> next request): replaying it must not make
    the tools take that long. A measured time (the loop's) is replayed as recorded."""
    from inspector.record.recording import RecordingWriter
    from inspector.record.replay import recorded_tools

    path = tmp_path / "r.jsonl"
    use = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "text"}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }
    with RecordingWriter(path, source={"type": "proxy"}) as w:
        w.request(0, 0, 0.0, "POST", "http://x/v1/messages", {}, body)
        times = {"running": 1.0, "succeeded": 3.5}
        state = O.ToolStateChanged(3.5, 0, 0, "toolu_1", "read_file", 1, "succeeded", {"path": "a"}, None, None, times)
        line = state.to_json()
        line["inferred"] = inferred
        w.observation(line)
    slept: list[float] = []

    async def sleeper(s: float) -> None:
        slept.append(s)

    tools, _ = recorded_tools(read_recording(path), Pacer(1.0, sleeper=sleeper))
    assert await tools["read_file"].fn({"path": "a"}) is not None
    assert slept == ([] if inferred else [pytest.approx(2.5)])


def test_the_recorders_bookkeeping_does_not_grow_with_ended_attempts() -> None:
    """A proxy runs for days: the recorder keeps what numbers and times an attempt's tries only while it is under
    way (it kept every attempt's request time and try count forever)."""
    from inspector.record.recorder import Recorder

    rec = Recorder(io.BytesIO(), source={})
    for turn in range(3000):
        rec(O.AttemptStarted(float(turn), turn, 0, "POST", "http://x/v1/messages", {}, {"model": "m"}))
        rec(O.ReadReceived(turn + 0.1, turn, 0, 0, 0.1, b"data: x\n\n"))
        rec(O.AttemptEnded(turn + 0.2, turn, 0, "failed" if turn % 2 else "complete", None, None))
        if turn % 2:  # a retry, after its failed attempt ended
            rec(O.AttemptStarted(turn + 0.3, turn, 1, "POST", "http://x/v1/messages", {}, {"model": "m"}))
            rec(O.AttemptEnded(turn + 0.4, turn, 1, "complete", None, None))
    sizes = [len(d) for d in (rec._sent, rec._tries, rec._started, rec._ended, rec._first)]
    assert sizes == [0, 0, 0, 0, 0]
    rec.close()


async def test_a_recording_alone_does_not_make_the_proxy_build_the_streams_observations() -> None:
    """Only a watcher (the caller's bus) needs the events and blocks: a recording keeps the reads, the attempts and
    the tools, so for it the stream is parsed in one go per batch and no event observation is built; with a bus,
    every one is published."""
    seen: dict[str, list[type]] = {}
    with BackgroundServer(ServeApp(speed=math.inf, lenient=True)) as serve:
        for label in ("record", "bus"):
            bus = O.ObservationBus() if label == "bus" else None
            proxy = ProxyApp(serve.base_url, record=io.BytesIO(), bus=bus)
            proxy.open_recording()
            got: list[type] = []
            proxy._bus.subscribe(_types_into(got))
            with BackgroundServer(proxy) as px:
                async with httpx2.AsyncClient(timeout=30) as h:
                    r = await h.post(
                        f"{px.base_url}/v1/messages",
                        json={
                            "model": "m",
                            "max_tokens": 9,
                            "stream": True,
                            "messages": [{"role": "user", "content": "x"}],
                        },
                        headers={"x-api-key": KEY, "x-inspector-scenario": "parse_date"},
                    )
                    assert r.status_code == 200
            proxy.close()
            seen[label] = got
    assert O.SSEEventSeen not in seen["record"] and O.BlockDelta not in seen["record"]
    assert O.ReadReceived in seen["record"] and O.AttemptEnded in seen["record"]
    assert O.ToolStateChanged in seen["record"]  # the tools it saw, still inferred and recorded
    assert O.SSEEventSeen in seen["bus"] and O.BlockDelta in seen["bus"]

"""Fuzz: the readers `inspector serve` adds never fail with anything but their one-line error. Recording files of
any bytes load or raise RecordingError; request bodies of any JSON get 200 or the API's 4xx error shape, never a
500 or a traceback; request diffs of any JSON are one line plus a bounded diff."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.core.errors import RecordingError
from inspector.net.recorded import DIFF_LINES, RecordingSource, request_diff
from inspector.net.serve import ServeApp, body_problem
from inspector.testing.hyp import examples

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
HEADER = b'{"kind": "header", "format": "stream-inspector-recording", "version": 1}\n'
LINE = st.sampled_from(
    [
        b'{"kind": "response", "turn": 0, "attempt": 0, "t": 0.1, "status": 200, "headers": {}}\n',
        b'{"kind": "read", "turn": 0, "attempt": 0, "t": 0.2, "data": "event: ping\\ndata: {}\\n\\n"}\n',
        b'{"kind": "read", "turn": 1, "attempt": 0, "t": null, "b64": "ZXZlbnQ6IHg="}\n',
        b'{"kind": "end", "turn": 0, "attempt": 0, "t": 0.3, "status": "failed"}\n',
        b'{"kind": "request", "turn": 0, "attempt": 0, "t": 0, "body": {"model": 1}}\n',
        b'{"kind": "read", "turn": "x"}\n',
        b"\xff\xfe garbage\n",
        b"event: message_stop\ndata: {}\n\n",
    ]
)


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=300), st.lists(LINE, max_size=8).map(lambda ls: HEADER + b"".join(ls))))
def test_any_file_loads_or_is_a_recording_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.rec"
    path.write_bytes(data)
    try:
        source = RecordingSource.load(path)
    except RecordingError as e:
        assert "\n" not in str(e) and str(e)
        return
    for k in range(len(source.turns)):
        for a in range(3):
            plan = source.plan(k, a)
            assert 100 <= plan.status < 600 and plan.end in ("eof", "drop", "hang")
            assert all(r.delay >= 0 for r in plan.reads)


@settings(max_examples=examples(200))
@given(recorded=JSON, got=JSON)
def test_request_diff_of_any_json(recorded: Any, got: Any) -> None:
    rec = recorded if isinstance(recorded, dict) else None
    summary, lines = request_diff(rec, got if isinstance(got, dict) else {})
    assert summary is None or ("\n" not in summary and summary)
    assert len(lines) <= DIFF_LINES + 1


@settings(max_examples=examples(300))
@given(body=st.dictionaries(st.sampled_from(["model", "max_tokens", "messages", "stream", "x"]), JSON, max_size=5))
def test_body_problem_never_raises(body: dict[str, Any]) -> None:
    problem = body_problem(body)
    assert problem is None or (": " in problem and "\n" not in problem)


APP = ServeApp(speed=math.inf, history=50)
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


@settings(max_examples=examples(120), deadline=None)
@given(body=JSON | st.dictionaries(st.sampled_from(["model", "max_tokens", "messages", "stream"]), JSON, max_size=4))
async def test_any_json_body_gets_200_or_the_api_error_shape(body: object) -> None:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP.app), base_url="http://serve") as h:
        r = await h.post("/v1/messages", content=json.dumps(body), headers=HEADERS)
    assert r.status_code in (200, 400), r.content
    if r.status_code == 400:
        obj = r.json()
        assert set(obj) == {"type", "error", "request_id"} and obj["error"]["type"] == "invalid_request_error"

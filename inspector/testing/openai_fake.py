"""A fake OpenAI endpoint for the agent-loop tests: scripted replies (SSE streams, error statuses) served to the
official openai SDK through an httpx2 transport (no socket), or over a loopback HTTP server for the CLI tests. A
stream can wait on an ``asyncio.Event`` between two parts (a test makes it go on when the loop did something: no
sleeps)."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import httpx2
import orjson

KEY = "sk-proj-CANARY-openai-loop-0123456789abcdefABCDEF"


@dataclass
class Stream:
    """A 200 text/event-stream reply: bytes, or an asyncio.Event the body waits on before going on (or a
    threading.Event, for the loopback server)."""

    parts: Sequence[bytes | asyncio.Event | threading.Event]


@dataclass
class Status:
    """A reply with this status and a JSON body (``body``: any JSON value; None is sent as ``null``)."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeRequest(TypedDict):
    """A request the fake received: its headers' names lower-cased, its body parsed (None when not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def sse(*objs: Any, done: bool = False, events: bool = False) -> bytes:
    """SSE events: each object as ``data: <json>`` (with ``event: <type>`` for Responses), then ``[DONE]``."""
    out: list[bytes] = []
    for o in objs:
        head = f"event: {o['type']}\n".encode() if events and isinstance(o, dict) and "type" in o else b""
        out.append(head + b"data: " + orjson.dumps(o) + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


# ---------------------------------------------------------------------------------------------- Chat Completions
def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    cid: str = "chatcmpl-1",
) -> dict[str, Any]:
    """A chat.completion.chunk: one choice with this delta (none when ``delta`` is None: the usage chunk)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": choices,
        "usage": usage,
    }


def tool_delta(index: int, *, id: str | None = None, name: str | None = None, args: str = "") -> dict[str, Any]:
    tc: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if id is not None:
        tc["id"], tc["type"] = id, "function"
        tc["function"]["name"] = name
    return {"tool_calls": [tc]}


def chat_text(text: str, usage: dict[str, Any] | None = None) -> bytes:
    return sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text}),
        chunk({}, "stop"),
        chunk(None, usage=usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}),
        done=True,
    )


# ---------------------------------------------------------------------------------------------- Responses
class ResponsesScript:
    """Responses events with their sequence numbers."""

    def __init__(self, rid: str = "resp_1") -> None:
        self.rid = rid
        self.n = 0

    def ev(self, type_: str, **fields: Any) -> bytes:
        obj = {"type": type_, "sequence_number": self.n, **fields}
        self.n += 1
        return sse(obj, events=True)

    def response(
        self, status: str, output: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        r: dict[str, Any] = {"id": self.rid, "object": "response", "status": status, "model": "gpt-test"}
        r["output"] = output or []
        if usage is not None:
            r["usage"] = usage
        return r


def responses_text(text: str) -> bytes:
    s = ResponsesScript("resp_text")
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    done_item = {**item, "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    usage = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
    return b"".join(
        [
            s.ev("response.created", response=s.response("in_progress")),
            s.ev("response.output_item.added", output_index=0, item=item),
            s.ev(
                "response.content_part.added",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            ),
            s.ev("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=text),
            s.ev("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text=text),
            s.ev("response.output_item.done", output_index=0, item=done_item),
            s.ev("response.completed", response=s.response("completed", [done_item], usage)),
        ]
    )


# ---------------------------------------------------------------------------------------------- the endpoint
class FakeOpenAI:
    """Serves ``replies`` in order, one per request; keeps each request (method, path, headers, parsed body)."""

    def __init__(self, replies: Sequence[Stream | Status]) -> None:
        self.replies = list(replies)
        self.requests: list[FakeRequest] = []

    def _next(self, method: str, path: str, headers: Iterable[tuple[str, str]], raw: bytes) -> Stream | Status:
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(
            {"method": method, "path": path, "headers": {k.lower(): v for k, v in headers}, "body": body}
        )
        if not self.replies:
            return Status(400, {"error": {"type": "invalid_request_error", "message": "no more scripted replies"}})
        return self.replies.pop(0)

    # in process (httpx2 transport)
    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        raw = await request.aread()
        reply = self._next(request.method, request.url.path, request.headers.items(), raw)
        if isinstance(reply, Status):
            return httpx2.Response(
                reply.status, headers={"content-type": "application/json", **reply.headers}, json=reply.body
            )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(reply.parts))

    def client(self, **kw: Any) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=_Transport(self), **kw)

    # over loopback (the CLI tests)
    def serve(self) -> tuple[str, http.server.ThreadingHTTPServer]:
        """Start a loopback server on 127.0.0.1 (an ephemeral port): (its base URL with /v1, the server). The caller
        shuts it down (``server.shutdown(); server.server_close()``)."""
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                reply = fake._next("POST", self.path, self.headers.items(), raw)
                if isinstance(reply, Status):
                    data = orjson.dumps(reply.body)
                    self.send_response(reply.status)
                    for k, v in {"content-type": "application/json", **reply.headers}.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for part in reply.parts:
                    if isinstance(part, threading.Event):
                        part.wait(20)
                        continue
                    if isinstance(part, asyncio.Event):
                        raise TypeError(
                            "a Stream part: an asyncio.Event waits only in client(); give serve() a threading.Event"
                        )
                    self.wfile.write(part)
                    self.wfile.flush()
                self.close_connection = True

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="fake-openai", daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/v1", server


class _Transport(httpx2.AsyncBaseTransport):
    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self.fake.handler(request)


class _Body(httpx2.AsyncByteStream):
    def __init__(self, parts: Sequence[bytes | asyncio.Event | threading.Event]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if isinstance(part, asyncio.Event):
                await part.wait()
                continue
            if isinstance(part, threading.Event):
                raise TypeError(
                    "a Stream part: a threading.Event waits only in serve(); give client() an asyncio.Event"
                )
            yield part

    async def aclose(self) -> None:
        return None

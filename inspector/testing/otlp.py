"""A small OTLP/HTTP trace receiver on 127.0.0.1 for tests: it decodes the protobuf with opentelemetry-proto and
keeps every span (name, attributes, ids, times, status). Shared by the tests of `--otel` (tests never import each
other)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span it got, as (name, attributes, ids)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []  # name, attrs, id, parent, trace, start, end, status
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                receiver.requests += 1
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            attrs: dict[str, Any] = {}
                            for kv in s.attributes:
                                v = kv.value
                                which = v.WhichOneof("value")
                                attrs[kv.key] = (
                                    [x.string_value for x in v.array_value.values]
                                    if which == "array_value"
                                    else getattr(v, which)
                                )
                            receiver.spans.append(
                                {
                                    "name": s.name,
                                    "attrs": attrs,
                                    "id": s.span_id.hex(),
                                    "parent": s.parent_span_id.hex(),
                                    "trace": s.trace_id.hex(),
                                    "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano,
                                    "status": s.status.code,
                                }
                            )
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: the default 0.5 s made each close() cost about 0.5 s
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

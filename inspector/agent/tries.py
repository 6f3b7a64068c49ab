"""Every HTTP try under the SDK: a wrapping ``httpx2`` transport that tells the agent loop about each request the SDK
sends, including the ones it retries by itself inside one ``create()`` call (429, 529, 5xx, connection errors).

    tap = observe_client(client)        # wraps the client's transport(s) in place; idempotent
    tap.listener = my_listener          # has try_sent(request, try_index) and try_failed(failure)
    tap.rewrite = fn                    # optional: every try is sent as fn(request) (the loop's spliced history)

A failed try is a non-2xx status (its body is read here, small, and handed on unchanged) or a transport error before
a response (connection refused, reset, timeout). ``retry_in`` mirrors the SDK's own rule (``anthropic._base_client``:
``_should_retry``, ``_calculate_retry_timeout``): ``x-should-retry`` wins, else 408/409/429/5xx are retried, connection
errors always, while retries remain; the wait is ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)
when positive, else the backoff ``min(0.5 * 2**k, 8)`` s (the SDK takes up to 25 % off that at random: the value
here is the upper bound). The openai SDK's rule differs in one point (``openai._base_client``): a wait asked for above
120 s means no retry at all, and a wait outside (0, 120] s is replaced by the backoff (``TryTap.max_retry_after``).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx2

__all__ = [
    "ClientGaveUp",
    "RETRY_HEADERS",
    "ObservedTransport",
    "TryFailure",
    "TryListener",
    "TryTap",
    "observe_client",
    "parse_retry_after",
    "retry_wait",
    "sdk_would_retry",
]

# the response headers that explain a retry (kept on HttpTryFailed)
RETRY_HEADERS = ("retry-after", "retry-after-ms", "request-id", "x-should-retry")
INITIAL_RETRY_DELAY = 0.5  # anthropic._constants
MAX_RETRY_DELAY = 8.0
MAX_ERROR_BODY = 1 << 20  # an error body larger than this is cut (it is only shown)


class ClientGaveUp(Exception):
    """Raised by a stream's body where the recorded client gave up on it (a proxy recording: it closed the stream,
    then sent its request again): the replay's attempt ends there, at the recorded time, as the client's did (not
    after the loop's own idle timeout: 30 s at 1x). ``silence``: the recorded seconds from the last read to the
    close."""

    def __init__(self, silence: float) -> None:
        super().__init__(f"the recorded client closed the stream after {silence:.3g} s without a read, and resent it")
        self.silence = silence


@dataclass(frozen=True, slots=True)
class TryFailure:
    try_index: int  # x-stainless-retry-count of the request: 0 for the first try of a create() call
    method: str
    url: str
    status: int | None  # None: no response (connection failure)
    headers: dict[str, str]  # RETRY_HEADERS only
    body: bytes  # the (decoded) error body; b"" for a connection failure
    connection_error: str | None
    retry_in: float | None  # the SDK's wait before its next try; None when it will not retry


class TryListener(Protocol):
    def try_sent(self, request: httpx2.Request, try_index: int) -> None: ...

    def try_failed(self, failure: TryFailure) -> None: ...


class TryTap:
    """What the wrapped transports report to: one listener (the agent loop) and the SDK client's max_retries."""

    def __init__(self, max_retries: int = 2, max_retry_after: float | None = None) -> None:
        self.listener: TryListener | None = None
        self.max_retries = max_retries
        # the openai SDK's rule (MAX_RETRY_AFTER_DELAY): a server-asked wait is honoured up to this many seconds and
        # a longer one means no retry at all; None: the anthropic SDK's (any positive wait is honoured)
        self.max_retry_after = max_retry_after
        # while set, each request the SDK sends goes out as rewrite(request) (transcript.SplicedMessages.rewrite)
        self.rewrite: Callable[[httpx2.Request], httpx2.Request] | None = None


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks to wait, as the SDK reads them: retry-after-ms, else retry-after (seconds, or an HTTP
    date); None when neither parses."""
    try:
        # (absent: float(None) raises TypeError, caught below, as in the SDK's own reading)
        return float(headers.get("retry-after-ms", None)) / 1000  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    try:
        return float(value)  # type: ignore[arg-type]  # (None: TypeError, caught below)
    except (TypeError, ValueError):
        pass
    if value is None:
        return None
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return float(email.utils.mktime_tz(parsed) - time.time())


OPENAI_MAX_RETRY_AFTER = 120.0  # openai._constants.MAX_RETRY_AFTER_DELAY


def sdk_would_retry(status: int, headers: Mapping[str, str], max_retry_after: float | None = None) -> bool:
    if max_retry_after is not None:  # the openai SDK: a wait asked for beyond its limit is no retry, whatever else
        after = parse_retry_after(headers)
        if after is not None and math.isfinite(after) and after > max_retry_after:
            return False
    should = headers.get("x-should-retry")
    if should == "true":
        return True
    if should == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def retry_wait(retries_taken: int, headers: Mapping[str, str] | None, max_retry_after: float | None = None) -> float:
    """The SDK's wait before its next try (the backoff without its random reduction of up to 25 %)."""
    after = parse_retry_after(headers) if headers is not None else None
    if max_retry_after is not None:  # the openai SDK honours 0 < wait <= its limit, else backs off
        if after is not None and math.isfinite(after) and 0 < after <= max_retry_after:
            return after
    elif after is not None and after > 0:
        return min(after, 4_294_967.0)
    return min(INITIAL_RETRY_DELAY * pow(2.0, min(retries_taken, 1000)), MAX_RETRY_DELAY)


def _try_index(request: httpx2.Request) -> int:
    try:
        return max(0, int(request.headers.get("x-stainless-retry-count", "0")))
    except ValueError:
        return 0


class ObservedTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport: reports each request and each failed try to ``tap.listener`` (when set)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, tap: TryTap) -> None:
        self.inner = inner
        self.tap = tap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.tap.rewrite is not None:
            request = self.tap.rewrite(request)
        listener = self.tap.listener
        if listener is None:
            return await self.inner.handle_async_request(request)
        k = _try_index(request)
        remaining = self.tap.max_retries - k
        listener.try_sent(request, k)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.TransportError as e:
            listener.try_failed(
                TryFailure(
                    k,
                    request.method,
                    str(request.url),
                    None,
                    {},
                    b"",
                    _describe(e),
                    retry_wait(k, None, self.tap.max_retry_after) if remaining > 0 else None,
                )
            )
            raise
        if 200 <= response.status_code < 300:
            return response
        # an error status: read its (small) body, report it, hand on an equivalent response
        status, headers = response.status_code, response.headers
        try:
            # (an async transport's response: its stream is the AsyncByteStream of the union)
            raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
        except httpx2.TransportError as e:
            listener.try_failed(
                TryFailure(k, request.method, str(request.url), status, _kept(headers), b"", _describe(e), None)
            )
            raise
        finally:
            close = getattr(response.stream, "aclose", None)
            if close is not None:
                await close()
        retry = remaining > 0 and sdk_would_retry(status, headers, self.tap.max_retry_after)
        decoded = _decoded(status, headers, raw)
        listener.try_failed(
            TryFailure(
                k,
                request.method,
                str(request.url),
                status,
                _kept(headers),
                decoded[:MAX_ERROR_BODY],
                None,
                retry_wait(k, headers, self.tap.max_retry_after) if retry else None,
            )
        )
        return httpx2.Response(
            status, headers=headers, stream=httpx2.ByteStream(raw), extensions=response.extensions, request=request
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _kept(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: headers[k] for k in RETRY_HEADERS if k in headers}


def _decoded(status: int, headers: httpx2.Headers, raw: bytes) -> bytes:
    """The body as the client will see it (content-encoding undone); the raw bytes when decoding fails."""
    if "content-encoding" not in headers:
        return raw
    try:
        return httpx2.Response(status, headers=headers, content=raw).read()
    except httpx2.DecodingError:  # a body that does not decode is still shown, as received
        return raw


def observe_client(client: object) -> TryTap | None:
    """Wrap the transports of an ``anthropic.AsyncAnthropic``'s (or an ``openai.AsyncOpenAI``'s) HTTP client (in place) so every try is reported;
    the same tap when already wrapped; None when the client has no transport to wrap."""
    http = getattr(client, "_client", None)
    inner = getattr(http, "_transport", None)
    if isinstance(inner, ObservedTransport):
        return inner.tap
    if not isinstance(inner, httpx2.AsyncBaseTransport):
        return None
    is_openai = type(client).__module__.split(".", 1)[0] == "openai"
    tap = TryTap(int(getattr(client, "max_retries", 2) or 0), OPENAI_MAX_RETRY_AFTER if is_openai else None)
    # (httpx2's client has no public way to wrap the transport it was built with, and the SDK built this one)
    # (http is not None: it has the transport found above)
    http._transport = ObservedTransport(inner, tap)  # type: ignore[union-attr]  # noqa: SLF001
    mounts = getattr(http, "_mounts", None)
    if isinstance(mounts, dict):  # proxies from the environment
        for pattern, transport in list(mounts.items()):
            if isinstance(transport, httpx2.AsyncBaseTransport):
                mounts[pattern] = ObservedTransport(transport, tap)
    return tap

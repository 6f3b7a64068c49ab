"""A recording -> an editable scenario that replays the same content with the same splits.

    scenario_from_recording(load_any("session.jsonl"), name="session") -> Scenario
    dump_scenario(scenario) -> the YAML file text (``inspector scenario from-recording REC``)

A recording of many conversations (``watch``, ``proxy``) gives the scenario of its first one (the others are counted
in ``Scenario.expected["from_recording"]["other_conversations"]``): their turns are not turns of that conversation.

Per turn, the content comes from the turn's last attempt that streamed (HTTP 200 with a message_start): every block
with its deltas kept as they came (``chunk`` / ``fragment`` are the lists of delta sizes, the first empty
partial_json kept as ``empty_first``), the message and tool ids, the stop reason and usage. The splits: the events of
each read (``pacing.read_events``) and each read's delay (``pacing.read_delays``, from the read times; the response
headers' time is the TTFB). Earlier attempts become faults of the same turn: an HTTP error status an ``http_errors``
entry (type, message, retry headers), a stream that ended with an ``error`` event ``error_event_after`` and one that
broke off ``drop_after``, after as many events as that attempt received.

What is not kept: pings (``ping_every`` is the scenario's way to send them), padding and the exact JSON formatting of
event data (the scenario serializes events compactly), and events of a kind the scenario model has no place for
(they are counted in ``Scenario.expected["from_recording"]["skipped_events"]``). Tools become simulated tools with
the definitions the requests offered; each call's result is the ``tool_result`` the next request carried for it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from inspector.record.recording import RecordedAttempt, Recording
from inspector.stream.sse import SSEDecoder

from . import model as M
from .fileformat import MAX_DEPTH

_SKIP_NAMES = ("ping",)
_NOT_JSON = object()


# levels a tool input may nest and still be written as a mapping: the file's nesting limit less the levels above a
# block's `input` (the file, turns, a turn, blocks, a block) and a scalar's own; deeper: `raw_json`, a string (a
# 150-level input made a file `scenario check` refused; a 900-level one a RecursionError in the YAML dumper)
_INPUT_MAX_DEPTH = MAX_DEPTH - 6


def _depth(value: Any) -> int:
    """Levels of lists and mappings in ``value`` (0 for a scalar), without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
        else:
            deepest = max(deepest, d)
            continue
        deepest = max(deepest, d + 1)
    return deepest


def _loads(text: str) -> Any:
    """``json.loads(text)``, or _NOT_JSON for text that is not JSON or nests too deep for it to read (a recording is
    untrusted input: 5,000 ``[`` in an event's data raised RecursionError, a traceback)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _events_by_read(attempt: RecordedAttempt) -> tuple[list[tuple[str, dict[str, Any]]], list[int], list[float | None]]:
    """Decoded (name, data) events without pings, events completed per read (reads that completed none folded into
    the next) and the time of each kept read (seconds since the request; None when unknown)."""
    dec = SSEDecoder()
    events: list[tuple[str, dict[str, Any]]] = []
    per_read: list[int] = []
    times: list[float | None] = []
    pending = 0
    for read in attempt.reads:
        n = 0
        for ev in dec.feed(read.data):
            if ev.event in _SKIP_NAMES:
                continue
            data = _loads(ev.data)
            if isinstance(data, dict):
                events.append((ev.event, data))
                n += 1
        pending += n
        if pending:
            per_read.append(pending)
            times.append(read.t)
            pending = 0
    for ev in dec.close():
        if ev.event not in _SKIP_NAMES:
            data = _loads(ev.data)
            if isinstance(data, dict):
                events.append((ev.event, data))
                if per_read:
                    per_read[-1] += 1
                else:
                    per_read.append(1)
                    times.append(attempt.reads[-1].t if attempt.reads else None)
    return events, per_read, times


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status(attempt: RecordedAttempt) -> int | None:
    resp = attempt.response or {}
    status = resp.get("status")
    return status if isinstance(status, int) else None


def _headers(attempt: RecordedAttempt) -> dict[str, str]:
    h = (attempt.response or {}).get("headers") or {}
    if isinstance(h, dict):
        return {str(k).lower(): str(v) for k, v in h.items()}
    return {}


def _streamed(attempt: RecordedAttempt) -> bool:
    # status None: plain SSE text has no response line
    return _status(attempt) in (200, None) and any(n == "message_start" for n, _ in _events_by_read(attempt)[0])


def _sizes(pieces: list[str]) -> list[int]:
    return [len(p) for p in pieces if p]


def _chunk(pieces: list[str], default: M.ChunkSpec) -> M.ChunkSpec:
    sizes = _sizes(pieces)
    if not sizes:
        return default
    return sizes[0] if len(set(sizes)) == 1 and len(sizes) > 1 else sizes


class _Blocks:
    """Rebuilds scenario blocks from content events."""

    def __init__(self) -> None:
        self.starts: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}
        self.signature: dict[int, str] = {}
        self.order: list[int] = []
        self.skipped = 0

    def feed(self, name: str, data: dict[str, Any]) -> None:
        if name == "content_block_start" and isinstance(data.get("content_block"), dict):
            i = data.get("index")
            if isinstance(i, int) and i not in self.starts:
                self.starts[i] = data["content_block"]
                self.pieces[i] = []
                self.order.append(i)
                return
        elif name == "content_block_delta" and isinstance(data.get("delta"), dict):
            i, d = data.get("index"), data["delta"]
            if i in self.starts:
                kind = d.get("type")
                if kind == "text_delta":
                    self.pieces[i].append(str(d.get("text", "")))
                    return
                if kind == "thinking_delta":
                    self.pieces[i].append(str(d.get("thinking", "")))
                    return
                if kind == "input_json_delta":
                    self.pieces[i].append(str(d.get("partial_json", "")))
                    return
                if kind == "signature_delta":
                    self.signature[i] = str(d.get("signature", ""))
                    return
        elif name == "content_block_stop":
            return
        self.skipped += 1

    def blocks(self) -> tuple[list[M.Block], list[int]]:
        out: list[M.Block] = []
        for i in self.order:
            start, pieces = self.starts[i], self.pieces[i]
            kind = start.get("type")
            if _depth(start) > _INPUT_MAX_DEPTH:  # (a block written whole, or a tool block's `extra`: no text form)
                raise ValueError(
                    f"content block {i} nests {_depth(start)} levels: more than a scenario file may hold "
                    f"({MAX_DEPTH} levels in all)"
                )
            if kind == "text":
                out.append(M.TextBlock("".join(pieces), chunk=_chunk(pieces, M.Sizes(3, 14))))
            elif kind == "thinking":
                sig = self.signature.get(i, str(start.get("signature") or ""))
                out.append(M.ThinkingBlock("".join(pieces), signature=sig, chunk=_chunk(pieces, M.Sizes(8, 40))))
            elif kind == "redacted_thinking":
                out.append(M.RedactedThinkingBlock(str(start.get("data", ""))))
            elif kind in ("tool_use", "server_tool_use"):
                raw = "".join(pieces)
                kw: dict[str, Any] = {
                    "name": str(start.get("name", "")),
                    "fragment": _chunk(pieces, M.Sizes(8, 20)),
                    "empty_first": bool(pieces) and pieces[0] == "",
                    "id": start.get("id") if isinstance(start.get("id"), str) else None,
                    "extra": {k: v for k, v in start.items() if k not in ("type", "id", "name", "input")},
                }
                parsed = _loads(raw) if raw else {}
                if (
                    isinstance(parsed, dict)
                    and _depth(parsed) <= _INPUT_MAX_DEPTH
                    and json.dumps(parsed, ensure_ascii=False) == raw
                ):
                    kw["input"] = parsed
                elif isinstance(parsed, dict) and not raw:
                    kw["input"] = {}
                else:
                    kw["raw_json"] = raw
                cls = M.ToolUseBlock if kind == "tool_use" else M.ServerToolUseBlock
                out.append(cls(**kw))
            else:
                out.append(M.WholeBlock(dict(start)))
        return out, self.order


def _error_of(attempt: RecordedAttempt) -> tuple[str | None, str | None]:
    text = attempt.data.decode("utf-8", "replace")
    body = _loads(text)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return (
            str(err.get("type")) if err.get("type") else None,
            str(err.get("message")) if err.get("message") is not None else None,
        )
    return None, None


def _http_error(attempt: RecordedAttempt, index: int) -> M.HttpError:
    h = _headers(attempt)
    etype, message = _error_of(attempt)
    kw: dict[str, Any] = {"status": _status(attempt) or 500, "attempt": index, "error_type": etype, "message": message}
    if "retry-after-ms" in h:
        try:
            kw["retry_after_ms"] = int(float(h["retry-after-ms"]))
        except ValueError:
            pass
    if "retry-after" in h:
        try:
            kw["retry_after"] = float(h["retry-after"])
        except ValueError:
            pass
    if h.get("x-should-retry") in ("true", "false"):
        kw["should_retry"] = h["x-should-retry"] == "true"
    t = (attempt.response or {}).get("t")
    if isinstance(t, (int, float)) and t >= 0:
        kw["delay"] = float(t)
    return M.HttpError(**kw)


def _stream_fault(attempt: RecordedAttempt, index: int) -> M.Fault | None:
    events, _, _ = _events_by_read(attempt)
    err = next(((n, d) for n, d in events if n == "error"), None)
    before = sum(1 for n, _ in events if n != "error")
    if err is not None:
        e = _dict(err[1].get("error"))
        return M.ErrorEventAfter(
            n_events=before,
            error_type=str(e.get("type") or "overloaded_error"),
            message=str(e.get("message") or ""),
            attempts=(index,),
        )
    if any(n == "message_stop" for n, _ in events):
        return None  # a complete stream the harness retried anyway (idle timeout...): the content repeats
    return M.DropAfter(n_events=before, attempts=(index,))


def _pacing(attempt: RecordedAttempt, per_read: list[int], times: list[float | None], line_ending: str) -> M.Pacing:
    kw: dict[str, Any] = {"jitter": 0.0, "pad": False, "line_ending": line_ending}
    header_t = (attempt.response or {}).get("t")
    known = [t for t in times if t is not None]
    if isinstance(header_t, (int, float)) and len(known) == len(times) and times:
        kw.update(ttfb=max(0.0, float(header_t)), header_share=1.0)
        delays, prev = [], float(header_t)
        for t in known:
            delays.append(round(max(0.0, t - prev), 6))
            prev = max(prev, t)
        kw["read_delays"] = tuple(delays)
    kw["read_events"] = tuple(per_read)
    if per_read:
        kw["events_per_read"] = per_read[-1]
    return M.Pacing(**kw)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return json.dumps(content, ensure_ascii=False)


def _request_body(attempt: RecordedAttempt) -> dict[str, Any]:
    body = (attempt.request or {}).get("body")
    return body if isinstance(body, dict) else {}


def _tool_results(recording: Recording) -> dict[str, tuple[Any, bool]]:
    """tool_use_id -> (content, is_error) from every request's tool_result blocks."""
    out: dict[str, tuple[Any, bool]] = {}
    for attempt in recording.attempts():
        for msg in _request_body(attempt).get("messages") or []:
            if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
                continue
            for b in msg["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                    content = b.get("content")
                    if isinstance(content, list) and all(
                        isinstance(c, dict) and c.get("type") == "text" for c in content
                    ):
                        content = "\n".join(str(c.get("text", "")) for c in content)
                    out[b["tool_use_id"]] = (content, bool(b.get("is_error")))
    return out


def _name_of(recording: Recording, name: str | None) -> str:
    if name:
        return name
    src = recording.header.get("source") if isinstance(recording.header, dict) else None
    base = src.get("name") if isinstance(src, dict) and isinstance(src.get("name"), str) else "recorded"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{base}_recorded")


def scenario_from_recording(recording: Recording, name: str | None = None) -> M.Scenario:
    """The scenario that replays ``recording`` (see the module doc); InspectorError-free: a recording without any
    streamed turn raises ValueError."""
    turns: list[M.TurnScript] = []
    first_request: dict[str, Any] = {}
    skipped = 0
    streamed_model: str | None = None
    calls: list[tuple[str, str | None, dict[str, Any]]] = []  # (tool name, id, input) of every tool_use, in order
    convs = turn_conversations(recording)
    chosen = next((convs[t.turn] for t in recording.turns if t.turn in convs), None)
    for rturn in recording.turns:
        if convs.get(rturn.turn, chosen) != chosen:  # another conversation's turn: not a turn of this one
            continue
        attempts = rturn.attempts
        if not first_request:
            first_request = next((_request_body(a) for a in attempts if _request_body(a)), {})
        content = next((a for a in reversed(attempts) if _streamed(a)), None)
        if content is None:
            break
        index = attempts.index(content)
        events, per_read, times = _events_by_read(content)
        blocks = _Blocks()
        message: dict[str, Any] = {}
        delta: dict[str, Any] = {}
        out_tokens: int | None = None
        for n, d in events:
            if n == "message_start" and isinstance(d.get("message"), dict):
                message = d["message"]
                if streamed_model is None and isinstance(message.get("model"), str):
                    streamed_model = message["model"]
            elif n == "message_delta":
                delta = _dict(d.get("delta"))
                u = _dict(d.get("usage"))
                if isinstance(u.get("output_tokens"), int):
                    out_tokens = u["output_tokens"]
            elif n in ("content_block_start", "content_block_delta", "content_block_stop"):
                blocks.feed(n, d)
            elif n != "message_stop":
                skipped += 1
        skipped += blocks.skipped
        block_list, _ = blocks.blocks()
        for b in block_list:
            if isinstance(b, M.ToolUseBlock):
                calls.append((b.name, b.id, b.input if b.input is not None else {}))
        usage = _dict(message.get("usage"))
        line_ending = "\r\n" if b"\r\n" in content.data[:400] else ("\r" if b"\r" in content.data[:400] else "\n")
        faults: list[M.Fault] = []
        http_errors: list[M.HttpError] = []
        for i, a in enumerate(attempts[:index]):
            if _status(a) not in (None, 200):
                http_errors.append(_http_error(a, i))
            else:
                fault = _stream_fault(a, i)
                if fault is not None:
                    faults.append(fault)
        turns.append(
            M.TurnScript(
                blocks=block_list,
                stop_reason=str(delta.get("stop_reason") or "end_turn"),
                stop_sequence=delta.get("stop_sequence") if isinstance(delta.get("stop_sequence"), str) else None,
                usage=M.Usage(
                    input_tokens=int(usage.get("input_tokens") or 0),
                    output_tokens=out_tokens,
                    cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
                    cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
                ),
                pacing=_pacing(content, per_read, times, line_ending),
                faults=faults,
                http_errors=http_errors,
                message_id=message.get("id") if isinstance(message.get("id"), str) else None,
            )
        )
    if not turns:
        from inspector.record.replay import recording_family  # (httpx2: only here, `scenario` commands stay light)

        family = recording_family(recording)
        if family != "anthropic":  # (an OpenAI stream has no message_start: say why, not what is missing)
            api = "Chat Completions" if family == "openai_chat" else "Responses"
            raise ValueError(
                f"the recording is of OpenAI's {api} API, and a scenario scripts the Messages API's streams: "
                "serve the recording as it is with `inspector serve --recording FILE`"
            )
        raise ValueError("the recording has no streamed turn (no HTTP 200 response with a message_start)")

    results = _tool_results(recording)
    tools: list[M.SimulatedTool] = []
    offered = [t for t in first_request.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    used = {name for name, _, _ in calls}
    names = [t["name"] for t in offered] + sorted(used - {t["name"] for t in offered})
    eager = any(t.get("eager_input_streaming") for t in offered)
    for tname in names:
        d = next((t for t in offered if t["name"] == tname), {})
        cases = []
        for called, tid, inp in calls:
            if called == tname and tid in results:
                content, is_error = results[tid]
                if is_error:
                    cases.append(M.ToolCase(input=inp, error=_text_of(content)))
                else:
                    cases.append(M.ToolCase(input=inp, result=content))
        tools.append(
            M.SimulatedTool(
                name=tname,
                description=str(d.get("description") or ""),
                input_schema=_dict(d.get("input_schema")) or {"type": "object"},
                cases=cases,
            )
        )
    messages = first_request.get("messages") or []
    prompt = next((_text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"), "")
    system = first_request.get("system")
    thinking = first_request.get("thinking")
    scenario_name = _name_of(recording, name)
    model = streamed_model or first_request.get("model") or "claude-sonnet-4-6"
    return M.Scenario(
        name=scenario_name,
        description=f"Replays the recording {recording.header.get('started_at') or ''} turn by turn".strip()
        + f" ({len(turns)} turn{'s' if len(turns) != 1 else ''}).",
        prompt=prompt or "(no prompt recorded)",
        turns=turns,
        system=_text_of(system) if system is not None else None,
        model=str(model),
        max_tokens=int(first_request.get("max_tokens") or 4096),
        eager_input_streaming=bool(eager),
        thinking_budget=int(thinking["budget_tokens"])
        if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int)
        else None,
        simulated_tools=tools,
        expected=_provenance(skipped, chosen, len(set(convs.values()) - {chosen})),
    )


def _provenance(skipped: int, conversation: str | None, others: int) -> dict[str, Any]:
    """What ``expected["from_recording"]`` says of the recording's parts a scenario has no place for."""
    out: dict[str, Any] = {"skipped_events": skipped} if skipped else {}
    if others:
        out |= {"conversation": conversation, "other_conversations": others}
    return {"from_recording": out} if out else {}


def turn_conversations(recording: Recording) -> dict[int, str]:
    """Turn -> conversation id, from a proxy recording's ``conversation`` lines (``watch``, ``proxy``: many
    conversations may share one file); empty for a recording of one conversation (the loop's own)."""
    out: dict[int, str] = {}
    for line in recording.observations:
        turn, cid = line.get("turn"), line.get("conversation")
        if line.get("type") == "conversation" and isinstance(turn, int) and isinstance(cid, str):
            out.setdefault(turn, cid)
    return out

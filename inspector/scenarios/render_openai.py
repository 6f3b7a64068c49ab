"""Scenario -> OpenAI bytes: the same scripted turn as ``render.render_turn``, in the wire format of the endpoint that
is called, ``/v1/chat/completions`` (``api="chat"``) or ``/v1/responses`` (``api="responses"``).

One scenario model, two renderers. The text and tool-argument fragments are the Anthropic renderer's (the same
seeded chunking), the pacing is the same (``render._timeline``: gaps, reads, splits, relays), the faults are the
same objects, each in this family's own form:

- text -> ``delta.content`` chunks / a ``message`` item with ``response.output_text.delta``;
- tool_use -> ``delta.tool_calls[i]`` (index per tool call, ``id`` and ``name`` on the first chunk only,
  ``function.arguments`` fragments) / a ``function_call`` item with ``response.function_call_arguments.delta`` and
  ``.done``; thinking -> ``delta.reasoning_content`` / a ``reasoning`` item with reasoning summary events;
  redacted thinking -> nothing (chat) / a ``reasoning`` item with ``encrypted_content``; server tool blocks and whole
  blocks have no OpenAI form and are left out;
- stop reasons: end_turn / stop_sequence / pause_turn -> ``stop`` / ``completed``; tool_use -> ``tool_calls`` /
  ``completed``; max_tokens -> ``length`` / ``incomplete`` (``max_output_tokens``); refusal -> ``content_filter``
  / ``incomplete`` (``content_filter``);
- usage in a last ``choices: []`` chunk when ``stream_options.include_usage`` is set (chat; every other chunk then
  carries ``usage: null``) and in ``response.completed`` (Responses); chat ends with ``data: [DONE]``;
- ErrorEventAfter -> ``data: {"error": {...}}`` (chat) / ``event: error`` with an ``error`` object (Responses, as
  recorded OpenAI streams send it: the SDK raises APIError on both); stall pings -> SSE comments ``: keep-alive``
  (OpenAI sends no ping events; ``Pacing.ping_every`` adds none); HttpError -> the OpenAI error JSON with
  ``x-request-id``, ``retry-after`` / ``retry-after-ms`` / ``x-should-retry`` (what the openai SDK reads).

``plan.events`` holds (name, data): chat chunks are ``("chunk", chunk)``, the end ``("[DONE]", {})``, a mid-stream
error ``("error", {"error": ...})``, a stall ping ``("ping", {"type": "ping"})``; Responses events are named by
their ``type``. Ids are seeded like the Anthropic ones (``chatcmpl-``, ``resp_``, ``msg_``, ``rs_``, ``fc_``,
``call_``): same inputs, same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import string
from typing import Any, Literal

import orjson

from .model import (
    ErrorEventAfter,
    HttpError,
    MaxTokensCut,
    Pacing,
    RedactedThinkingBlock,
    Scenario,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from .render import (
    PlannedRead,
    ResponsePlan,
    _block_json_texts,
    _chunks,
    _estimate_tokens,
    _Ev,
    _rng,
    _timeline,
    plan_of_timeline,
)

Api = Literal["chat", "responses"]
APIS: tuple[Api, ...] = ("chat", "responses")

CREATED = 1767225600  # 2026-01-01T00:00:00Z: the ``created`` / ``created_at`` of every rendered answer (+ turn)
KEEP_ALIVE = b": keep-alive"
MAX_CHOICES = 128  # the largest ``n`` OpenAI takes
_B62 = string.digits + string.ascii_letters
_HEX = "0123456789abcdef"

CHAT_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
# Responses: (status, incomplete_details.reason)
RESPONSES_STATUS = {
    "max_tokens": ("incomplete", "max_output_tokens"),
    "model_context_window_exceeded": ("incomplete", "max_output_tokens"),
    "refusal": ("incomplete", "content_filter"),
}

# Anthropic error type -> (OpenAI error type, code, default message)
_ERRORS = {
    "rate_limit_error": ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    "overloaded_error": ("server_error", None, "The engine is currently overloaded, please try again later."),
    "api_error": ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    "authentication_error": ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    "permission_error": ("invalid_request_error", None, "You are not allowed to make this request."),
    "not_found_error": ("invalid_request_error", None, "Not found."),
    "request_too_large": ("invalid_request_error", None, "Request too large."),
    "invalid_request_error": ("invalid_request_error", None, "Invalid request."),
}


def openai_error(etype: str, message: str | None = None) -> dict[str, Any]:
    """The OpenAI ``error`` object for an Anthropic error type (``{"message", "type", "param", "code"}``)."""
    otype, code, default = _ERRORS.get(etype, ("server_error", None, "The server had an error."))
    return {"message": message or default, "type": otype, "param": None, "code": code}


def _id(rng: random.Random, prefix: str, n: int, alphabet: str = _B62) -> str:
    return prefix + "".join(rng.choice(alphabet) for _ in range(n))


class _Ids:
    """A turn's ids, seeded by the scenario, turn and attempt, and ``seed``: a Responses answer's conversation
    (:data:`ID_SEED`), so that two conversations of one scenario never share a response id."""

    def __init__(self, scenario: Scenario, turn_index: int, attempt: int, seed: str = "") -> None:
        self.seed = seed
        rng = _rng(f"ids-openai:{seed}" if seed else "ids-openai", scenario, turn_index, attempt)
        self.completion = _id(rng, "chatcmpl-", 29)
        self.response = _id(rng, "resp_", 48, _HEX)
        self.fingerprint = _id(rng, "fp_", 10, _HEX)
        self.request = _id(rng, "req_", 32, _HEX)
        self.items: list[str] = []
        self.calls: list[str] = []
        for block in scenario.turns[turn_index].blocks:
            prefix = {TextBlock: "msg_", ThinkingBlock: "rs_", RedactedThinkingBlock: "rs_"}.get(type(block), "fc_")
            self.items.append(_id(rng, prefix, 48, _HEX))
            given = getattr(block, "id", None)
            self.calls.append(given if isinstance(given, str) and given.startswith("call_") else _id(rng, "call_", 24))


def _pieces(scenario: Scenario, turn_index: int, attempt: int) -> tuple[list[tuple[str, list[str]]], int | None, int]:
    """Per block: (kind, the Anthropic renderer's delta texts, same seeded chunks), the block a MaxTokensCut cuts
    (None) and how many of its pieces it keeps. kind: text | thinking | tool | redacted | none."""
    turn = scenario.turns[turn_index]
    crng = _rng("chunks", scenario, turn_index, attempt)  # consumed in the Anthropic renderer's order
    json_texts = _block_json_texts(turn, attempt)
    out: list[tuple[str, list[str]]] = []
    for i, block in enumerate(turn.blocks):
        if isinstance(block, TextBlock):
            out.append(("text", _chunks(block.text, block.chunk, crng)))
        elif isinstance(block, ThinkingBlock):
            # the signature delta has no OpenAI form: an empty piece keeps the Anthropic delta count
            out.append(("thinking", [*_chunks(block.thinking, block.chunk, crng), ""]))
        elif isinstance(block, (ToolUseBlock, ServerToolUseBlock)):
            pieces = _chunks(json_texts[i], block.fragment, crng)
            if block.empty_first:
                pieces.insert(0, "")
            out.append(("tool" if isinstance(block, ToolUseBlock) else "none", pieces))
        elif isinstance(block, RedactedThinkingBlock):
            out.append(("redacted", []))
        else:
            out.append(("none", []))
    cut = next((f for f in turn.faults_for(attempt) if isinstance(f, MaxTokensCut)), None)
    if cut is None:
        return out, None, 0
    n = len(out[cut.block][1])
    keep = cut.keep_fragments if cut.keep_fragments is not None else (n + 1) // 2
    return out, cut.block, max(0, keep)


def _stop(scenario: Scenario, turn_index: int, cut_block: int | None) -> str:
    return "max_tokens" if cut_block is not None else scenario.turns[turn_index].stop_reason


def _output_tokens(scenario: Scenario, turn_index: int, attempt: int) -> int:
    turn = scenario.turns[turn_index]
    if turn.usage.output_tokens is not None:
        return turn.usage.output_tokens
    return _estimate_tokens(turn, _block_json_texts(turn, attempt))


# --- chat completions ------------------------------------------------------------------------------------------


def chat_usage(scenario: Scenario, turn_index: int, attempt: int) -> dict[str, Any]:
    u = scenario.turns[turn_index].usage
    prompt = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    completion = _output_tokens(scenario, turn_index, attempt)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_events(
    scenario: Scenario, turn_index: int, attempt: int, include_usage: bool, choices: int = 1, seed: str = ""
) -> list[_Ev]:
    evs = _one_choice_events(scenario, turn_index, attempt, include_usage, seed)
    if choices == 1:
        return evs
    return _n_choices(scenario, turn_index, attempt, evs, choices, seed)


def _n_choices(
    scenario: Scenario, turn_index: int, attempt: int, evs: list[_Ev], choices: int, seed: str = ""
) -> list[_Ev]:
    """The chunks of ``n`` choices (a request's ``n``): a scenario scripts one answer, so each choice streams that
    same answer, chunk by chunk, the choices in turn (index 0, 1, ... of each chunk: how OpenAI interleaves them).
    Each choice k > 0 has tool call ids of its own (independent samples do); the usage counts every choice's
    completion tokens. A fault's event count counts every choice's chunks."""
    call_ids = {c: [c] for c in _Ids(scenario, turn_index, attempt, seed).calls}
    for k in range(1, choices):
        rng = _rng(f"ids-openai-choice-{k}{':' + seed if seed else ''}", scenario, turn_index, attempt)
        for mine in call_ids.values():
            mine.append(_id(rng, "call_", 24))
    out: list[_Ev] = []
    for ev in evs:
        data = ev.data
        if ev.raw is not None or not data or not data.get("choices"):  # [DONE], the usage chunk
            if data and data.get("usage"):
                usage = dict(data["usage"])
                usage["completion_tokens"] *= choices
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                ev = dataclasses.replace(ev, data={**data, "usage": usage})
            out.append(ev)
            continue
        for k in range(choices):
            choice = {**data["choices"][0], "index": k}
            calls = choice["delta"].get("tool_calls")
            if k and calls:
                delta = dict(choice["delta"])
                delta["tool_calls"] = [
                    {**t, "id": call_ids.get(t["id"], [t["id"]] * choices)[k]} if "id" in t else t for t in calls
                ]
                choice["delta"] = delta
            out.append(
                _Ev(  # (the constructor: dataclasses.replace costs twice as much, per chunk per choice)
                    ev.name,
                    {**data, "choices": [choice]},
                    ev.gap,
                    ev.block,
                    ev.delta_no,
                    ev.standalone,
                    ev.starts_block and not k,
                    ev.stops_block,
                    ev.raw,
                )
            )
    return out


def _one_choice_events(
    scenario: Scenario, turn_index: int, attempt: int, include_usage: bool, seed: str = ""
) -> list[_Ev]:
    ids = _Ids(scenario, turn_index, attempt, seed)
    blocks, cut_block, keep = _pieces(scenario, turn_index, attempt)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        c: dict[str, Any] = {
            "id": ids.completion,
            "object": "chat.completion.chunk",
            "created": CREATED + turn_index,
            "model": scenario.model,
            "service_tier": "default",
            "system_fingerprint": ids.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            c["usage"] = None
        return c

    evs = [_Ev("chunk", chunk({"role": "assistant", "content": "", "refusal": None}))]
    calls = 0
    for i, (kind, pieces) in enumerate(blocks):
        if i == cut_block:
            pieces = pieces[:keep]
        if kind in ("text", "thinking"):
            field = "content" if kind == "text" else "reasoning_content"
            for n, piece in enumerate(pieces, 1):
                if piece:
                    evs.append(_Ev("chunk", chunk({field: piece}), block=i, delta_no=n, starts_block=n == 1))
        elif kind == "tool":
            block = scenario.turns[turn_index].blocks[i]
            assert isinstance(block, ToolUseBlock)
            first = {"index": calls, "id": ids.calls[i], "type": "function"}
            first["function"] = {"name": block.name, "arguments": ""}
            empty_first = bool(pieces) and pieces[0] == "" and block.empty_first
            evs.append(
                _Ev(
                    "chunk",
                    chunk({"tool_calls": [first]}),
                    block=i,
                    delta_no=1 if empty_first else None,
                    starts_block=True,
                )
            )
            for n, piece in enumerate(pieces, 1):
                if n == 1 and empty_first:
                    continue
                delta = {"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}
                evs.append(_Ev("chunk", chunk(delta), block=i, delta_no=n))
            calls += 1
        if i == cut_block:
            break
    finish = CHAT_FINISH.get(_stop(scenario, turn_index, cut_block), "stop")
    evs.append(_Ev("chunk", chunk({}, finish)))
    if include_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = chat_usage(scenario, turn_index, attempt)
        evs.append(_Ev("chunk", last))
    evs.append(_Ev("[DONE]", {}, raw=b"[DONE]"))
    return evs


def chat_error_data(etype: str) -> dict[str, Any]:
    """The data of a Chat Completions mid-stream error (``data: {"error": {...}}``: the SDK raises APIError)."""
    return {"error": openai_error(etype, None)}


def responses_error_data(etype: str, sequence_number: int) -> dict[str, Any]:
    """The data of a Responses ``error`` event, as recorded OpenAI streams send it (an ``error`` object: the SDK
    raises APIError)."""
    err = openai_error(etype, None)
    return {"type": "error", "sequence_number": sequence_number, "error": {**err, "code": err["code"] or err["type"]}}


def _chat_error(fault: ErrorEventAfter) -> _Ev:
    return _Ev("error", chat_error_data(fault.error_type), standalone=True)


def _ping() -> _Ev:
    return _Ev("ping", None)


def _serialize_chat(ev: _Ev, p: Pacing, frng: random.Random) -> bytes:
    le = p.line_ending.encode()
    if ev.data is None:
        return KEEP_ALIVE + le + le
    data = ev.raw if ev.raw is not None else orjson.dumps(ev.data)
    if p.pad and ev.raw is None:
        data += b" " * frng.randint(1, 8)
    return b"data: " + data + le + le


# --- responses -------------------------------------------------------------------------------------------------


def responses_usage(scenario: Scenario, turn_index: int, attempt: int) -> dict[str, Any]:
    u = scenario.turns[turn_index].usage
    inp = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    out = _output_tokens(scenario, turn_index, attempt)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inp + out,
    }


# The request fields a Response object echoes back (as OpenAI's does), when the request has them.
RESPONSE_ECHO = (
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
)


# response_echo's key for what seeds a Responses answer's ids (not echoed): the request's ``previous_response_id``
# when it continues a conversation (itself seeded so), else a digest of its ``input`` (the conversation's first
# request). Two conversations of one scenario served together then never share an id: with shared ids, a second
# conversation's ``previous_response_id`` named the first's response, and a proxy (or serve's retry count) could not
# tell the two apart. The same conversation gets the same ids on every run.
ID_SEED = "id_seed"


def _id_seed(body: dict[str, Any]) -> str:
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous:
        return previous
    if "input" not in body:
        return ""
    return seed_digest(body["input"])


def seed_digest(value: Any) -> str:
    """What seeds a conversation's ids: a digest of ``value`` (how it starts), keys sorted."""
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # (an integer past 64 bits, too deep: the repr then)
        raw = repr(value).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def response_echo(body: object) -> dict[str, Any]:
    """The fields of a Responses request its Response object echoes (see :data:`RESPONSE_ECHO`), and what seeds the
    answer's ids (:data:`ID_SEED`, not echoed)."""
    if not isinstance(body, dict):
        return {}
    echo = {k: body[k] for k in RESPONSE_ECHO if k in body}
    seed = _id_seed(body)
    if seed:
        echo[ID_SEED] = seed
    return echo


def chat_echo(body: object) -> dict[str, Any]:
    """What seeds a Chat Completions answer's ids (:data:`ID_SEED`; a chat answer echoes no field): a digest of its
    messages up to its first user message, the same on each turn of a conversation that sends its whole history and
    different for two conversations that start differently, so that two conversations served together never share a
    completion id or a tool call id (a system prompt alone, often the same, does not tell them apart). {} when the
    body has no messages."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        return {}
    first_user = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), 0)
    return {ID_SEED: seed_digest(messages[: first_user + 1])}


def echo_key(echo: dict[str, Any] | None) -> str | None:
    """What tells two echoes apart in a plan cache (a digest of the fields, keys sorted; None: no echo)."""
    if not echo:
        return None
    return hashlib.sha256(orjson.dumps(echo, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _response_obj(
    scenario: Scenario,
    turn_index: int,
    ids: _Ids,
    status: str,
    output: list[dict[str, Any]],
    echo: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj = {
        "id": ids.response,
        "object": "response",
        "created_at": CREATED + turn_index,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": scenario.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }
    if echo:
        obj.update((k, v) for k, v in echo.items() if k != ID_SEED)
    return obj


def _responses_events(
    scenario: Scenario, turn_index: int, attempt: int, echo: dict[str, Any] | None = None
) -> list[_Ev]:
    ids = _Ids(scenario, turn_index, attempt, (echo or {}).get(ID_SEED, ""))
    blocks, cut_block, keep = _pieces(scenario, turn_index, attempt)
    turn = scenario.turns[turn_index]
    evs: list[_Ev] = []

    def ev(etype: str, block: int | None = None, **fields: Any) -> _Ev:
        e = _Ev(etype, {"type": etype, "sequence_number": len(evs), **fields}, block=block)
        evs.append(e)
        return e

    ev("response.created", response=_response_obj(scenario, turn_index, ids, "in_progress", [], echo))
    ev("response.in_progress", response=_response_obj(scenario, turn_index, ids, "in_progress", [], echo))
    output: list[dict[str, Any]] = []
    for i, (kind, pieces) in enumerate(blocks):
        cut = i == cut_block
        if cut:
            pieces = pieces[:keep]
        o, item_id = len(output), ids.items[i]
        status = "incomplete" if cut else "completed"
        if kind == "text":
            item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
            ev("response.output_item.added", i, output_index=o, item=item).starts_block = True
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            ev("response.content_part.added", i, item_id=item_id, output_index=o, content_index=0, part=part)
            for n, piece in enumerate(pieces, 1):
                if piece:
                    d = ev("response.output_text.delta", i, item_id=item_id, output_index=o, content_index=0)
                    d.data = {**(d.data or {}), "delta": piece, "logprobs": []}
                    d.delta_no = n
            text = "".join(pieces)
            done_part = {**part, "text": text}
            final = {**item, "status": status, "content": [done_part]}
            if not cut:
                ev("response.output_text.done", i, item_id=item_id, output_index=o, content_index=0, text=text)
                evs[-1].data = {**(evs[-1].data or {}), "logprobs": []}
                evs[-1].stops_block = True
                ev("response.content_part.done", i, item_id=item_id, output_index=o, content_index=0, part=done_part)
                ev("response.output_item.done", i, output_index=o, item=final)
            output.append(final)
        elif kind in ("thinking", "redacted"):
            item = {"id": item_id, "type": "reasoning", "summary": []}
            block = turn.blocks[i]
            if isinstance(block, RedactedThinkingBlock):
                item["encrypted_content"] = block.data
            ev("response.output_item.added", i, output_index=o, item=item).starts_block = True
            text = "".join(pieces)
            final = dict(item)
            if kind == "thinking":
                part = {"type": "summary_text", "text": ""}
                ev("response.reasoning_summary_part.added", i, item_id=item_id, output_index=o, summary_index=0)
                evs[-1].data = {**(evs[-1].data or {}), "part": part}
                for n, piece in enumerate(pieces, 1):
                    if piece:
                        d = ev("response.reasoning_summary_text.delta", i, item_id=item_id, output_index=o)
                        d.data = {**(d.data or {}), "summary_index": 0, "delta": piece}
                        d.delta_no = n
                final["summary"] = [{"type": "summary_text", "text": text}]
                if not cut:
                    ev("response.reasoning_summary_text.done", i, item_id=item_id, output_index=o, summary_index=0)
                    evs[-1].data = {**(evs[-1].data or {}), "text": text}
                    evs[-1].stops_block = True
                    ev("response.reasoning_summary_part.done", i, item_id=item_id, output_index=o, summary_index=0)
                    evs[-1].data = {**(evs[-1].data or {}), "part": final["summary"][0]}
            if not cut:
                ev("response.output_item.done", i, output_index=o, item=final)
            output.append(final)
        elif kind == "tool":
            block = turn.blocks[i]
            assert isinstance(block, ToolUseBlock)
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": ids.calls[i],
                "name": block.name,
            }
            added = ev("response.output_item.added", i, output_index=o, item=item)
            added.starts_block = True
            empty_first = bool(pieces) and pieces[0] == "" and block.empty_first
            if empty_first:
                added.delta_no = 1
            for n, piece in enumerate(pieces, 1):
                if n == 1 and empty_first:
                    continue
                d = ev("response.function_call_arguments.delta", i, item_id=item_id, output_index=o, delta=piece)
                d.delta_no = n
            args = "".join(pieces)
            final = {**item, "status": status, "arguments": args}
            if not cut:
                ev("response.function_call_arguments.done", i, item_id=item_id, output_index=o, arguments=args)
                evs[-1].stops_block = True
                ev("response.output_item.done", i, output_index=o, item=final)
            output.append(final)
        if cut:
            break
    status, reason = RESPONSES_STATUS.get(_stop(scenario, turn_index, cut_block), ("completed", None))
    final_response = _response_obj(scenario, turn_index, ids, status, output, echo)
    final_response["usage"] = responses_usage(scenario, turn_index, attempt)
    if reason is not None:
        final_response["incomplete_details"] = {"reason": reason}
    ev(f"response.{status}", response=final_response)
    return evs


def _responses_error(fault: ErrorEventAfter) -> _Ev:
    # as recorded OpenAI streams send it (an ``error`` object: the SDK raises APIError); sequence_number set later
    return _Ev("error", responses_error_data(fault.error_type, 0), standalone=True)


def _serialize_responses(ev: _Ev, p: Pacing, frng: random.Random) -> bytes:
    le = p.line_ending.encode()
    if ev.data is None:
        return KEEP_ALIVE + le + le
    data = orjson.dumps(ev.data)
    if p.pad:
        data += b" " * frng.randint(1, 8)
    return b"event: " + ev.name.encode() + le + b"data: " + data + le + le


# --- the plan --------------------------------------------------------------------------------------------------


def render_openai_turn(
    scenario: Scenario,
    turn_index: int,
    attempt: int = 0,
    *,
    api: Api,
    include_usage: bool = False,
    echo: dict[str, Any] | None = None,
    choices: int = 1,
) -> ResponsePlan:
    """The turn's answer to ``POST /v1/chat/completions`` (``api="chat"``; ``include_usage``: the request's
    ``stream_options.include_usage``; ``choices``: its ``n``, each choice the same scripted answer) or ``POST
    /v1/responses`` (``api="responses"``; ``echo``: the request fields its Response object echoes,
    :func:`response_echo`; for chat, :func:`chat_echo`: only what seeds its ids), with ``stream: true``."""
    if api not in APIS:
        raise ValueError(f"api must be one of {APIS}, not {api!r}")
    if not 1 <= choices <= MAX_CHOICES:
        raise ValueError(f"choices must be 1 to {MAX_CHOICES}, not {choices}")
    if not 0 <= turn_index < len(scenario.turns):
        raise IndexError(f"scenario {scenario.name!r} has {len(scenario.turns)} turns, no turn {turn_index}")
    turn = scenario.turns[turn_index]
    ids = _Ids(scenario, turn_index, attempt, (echo or {}).get(ID_SEED, ""))  # (chat: chat_echo's seed only)
    http_error = turn.http_error_for(attempt)
    if http_error is not None:
        return _render_http_error(scenario, turn_index, attempt, http_error, ids)
    if api == "chat":
        evs = _chat_events(scenario, turn_index, attempt, include_usage, choices, ids.seed)
        timeline = _timeline(
            scenario, turn_index, attempt, evs, error_event=_chat_error, ping=_ping, periodic_pings=False
        )
        serialize = _serialize_chat
    else:
        evs = _responses_events(scenario, turn_index, attempt, echo)
        timeline = _timeline(
            scenario, turn_index, attempt, evs, error_event=_responses_error, ping=_ping, periodic_pings=False
        )
        seq = 0
        for e in timeline[0]:  # the error event takes the next sequence number after the events sent
            if e.data is not None and "sequence_number" in e.data:
                if e.name == "error":
                    e.data = {**e.data, "sequence_number": seq}
                seq = e.data["sequence_number"] + 1
        serialize = _serialize_responses
    headers = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-request-id": ids.request,
        "openai-processing-ms": "120",
        "x-scenario": f"{scenario.name}; turn={turn_index}; attempt={attempt}; api={api}",
    }
    return plan_of_timeline(scenario, turn_index, attempt, timeline, serialize, headers)


def _render_http_error(scenario: Scenario, turn_index: int, attempt: int, err: HttpError, ids: _Ids) -> ResponsePlan:
    body = orjson.dumps({"error": openai_error(err.resolved_type(), err.message)})
    headers = {
        "content-type": "application/json",
        "x-request-id": ids.request,
        "x-scenario": f"{scenario.name}; turn={turn_index}; attempt={attempt}",
    }
    if err.retry_after_ms is not None:
        headers["retry-after-ms"] = str(err.retry_after_ms)
    if err.retry_after is not None:
        headers["retry-after"] = f"{err.retry_after:g}"
    if err.should_retry is not None:
        headers["x-should-retry"] = "true" if err.should_retry else "false"
    return ResponsePlan(err.status, headers, [PlannedRead(0.0, body)], "eof", err.delay, [], turn_index, attempt)


# --- stream: false ---------------------------------------------------------------------------------------------


class MalformedAnswer(ValueError):
    """An answer's events are not the shapes their API names (a recorded chunk whose ``choices[0]`` is a list, a
    ``response.completed`` whose ``response`` is a string, ...): nothing to assemble for a ``stream: false`` request.
    The message names the event (1-based, as counted in the answer) and the field."""


_KINDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an int"}


def _expect(value: object, want: type, what: str, n: int, name: str, optional: bool = True) -> None:
    """Raise :class:`MalformedAnswer` unless ``value`` is a ``want`` (or None, when ``optional``); a bool is no int."""
    if (value is None and optional) or (isinstance(value, want) and not (isinstance(value, bool) and want is int)):
        return
    kind = "null" if value is None else _KINDS.get(type(value), "a number")
    raise MalformedAnswer(f"event {n} ({name}): {what} is {kind}, not {_KINDS[want]}")


def assembled_chat(plan: ResponsePlan) -> dict[str, Any]:
    """The ``chat.completion`` a non-streaming request gets: the plan's chunks merged (content, reasoning_content,
    tool calls by index, finish_reason, usage). A chunk that is not the shape a chat chunk has (a recorded one:
    ``choices`` not a list, a choice or its ``delta`` not an object, an index not an int, a text not a string, ...)
    raises :class:`MalformedAnswer` naming it: nothing is skipped or repaired."""
    merged: dict[int, dict[str, Any]] = {}  # choice index -> its content, reasoning, calls, finish_reason
    usage = None
    head: dict[str, Any] = {}
    for n, (name, c) in enumerate(plan.events, 1):
        if name != "chunk":
            continue
        _expect(c, dict, "the chunk", n, "a chat chunk", optional=False)
        head = head or c
        _expect(c.get("usage"), dict, "usage", n, "a chat chunk")
        if c.get("usage"):
            usage = c["usage"]
        choices = c.get("choices", [])
        _expect(choices, list, "choices", n, "a chat chunk", optional=False)
        for k, choice in enumerate(choices):
            at = f"choices[{k}]"
            _expect(choice, dict, at, n, "a chat chunk", optional=False)
            _expect(choice.get("index"), int, f"{at}.index", n, "a chat chunk")
            index = choice.get("index") if isinstance(choice.get("index"), int) else 0
            m = merged.setdefault(index, {"content": [], "reasoning": [], "calls": {}, "finish": None})
            delta = choice.get("delta")
            _expect(delta, dict, f"{at}.delta", n, "a chat chunk")
            delta = delta or {}
            _expect(delta.get("content"), str, f"{at}.delta.content", n, "a chat chunk")
            _expect(delta.get("reasoning_content"), str, f"{at}.delta.reasoning_content", n, "a chat chunk")
            _expect(choice.get("finish_reason"), str, f"{at}.finish_reason", n, "a chat chunk")
            m["content"].append(delta.get("content") or "")
            m["reasoning"].append(delta.get("reasoning_content") or "")
            calls = delta.get("tool_calls")
            _expect(calls, list, f"{at}.delta.tool_calls", n, "a chat chunk")
            for j, tc in enumerate(calls or []):
                tat = f"{at}.delta.tool_calls[{j}]"
                _expect(tc, dict, tat, n, "a chat chunk", optional=False)
                _expect(tc.get("index"), int, f"{tat}.index", n, "a chat chunk", optional=False)
                _expect(tc.get("id"), str, f"{tat}.id", n, "a chat chunk")
                fn = tc.get("function")
                _expect(fn, dict, f"{tat}.function", n, "a chat chunk")
                fn = fn or {}
                _expect(fn.get("name"), str, f"{tat}.function.name", n, "a chat chunk")
                _expect(fn.get("arguments"), str, f"{tat}.function.arguments", n, "a chat chunk")
                call = m["calls"].setdefault(
                    tc["index"], {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = tc.get("id") or call["id"]
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
            m["finish"] = choice.get("finish_reason") or m["finish"]
    out_choices = []
    for index in sorted(merged) or [0]:
        m = merged.get(index) or {"content": [], "reasoning": [], "calls": {}, "finish": None}
        message: dict[str, Any] = {"role": "assistant", "content": "".join(m["content"]) or None, "refusal": None}
        if any(m["reasoning"]):
            message["reasoning_content"] = "".join(m["reasoning"])
        if m["calls"]:
            message["tool_calls"] = [m["calls"][k] for k in sorted(m["calls"])]
        out_choices.append({"index": index, "message": message, "logprobs": None, "finish_reason": m["finish"]})
    return {
        "id": head.get("id"),
        "object": "chat.completion",
        "created": head.get("created"),
        "model": head.get("model"),
        "system_fingerprint": head.get("system_fingerprint"),
        "choices": out_choices,
        "usage": usage,
    }


FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def assembled_response(plan: ResponsePlan) -> dict[str, Any]:
    """The ``response`` a non-streaming request gets: the one ``response.completed`` / ``.incomplete`` / ``.failed``
    carries. None of them: ValueError; one whose data or ``response`` is not an object: :class:`MalformedAnswer`
    naming it."""
    for n in range(len(plan.events), 0, -1):
        name, data = plan.events[n - 1]
        if name in FINAL_EVENTS:
            _expect(data, dict, "its data", n, name, optional=False)
            _expect(data.get("response"), dict, "its response", n, name, optional=False)
            return dict(data["response"])
    raise ValueError("the plan has no final response event")


def tool_arguments(plan: ResponsePlan, api: Api) -> list[str]:
    """The argument texts of the plan's tool calls, in order (for tests and diagnostics)."""
    if api == "chat":
        return [c["function"]["arguments"] for c in assembled_chat(plan)["choices"][0]["message"].get("tool_calls", [])]
    return [i["arguments"] for i in assembled_response(plan)["output"] if i["type"] == "function_call"]


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None

"""Every block and delta kind the API sends, folded as the official SDK's beta accumulator folds them
(`client.beta.messages.stream`): differential tests on generated beta streams, and the pre-filled message_start of
programmatic tool calling."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from inspector.observe.stepobs import step_observations
from inspector.stream import diagnostics as D
from inspector.stream.assembler import TurnStream, assemble
from inspector.testing.streamgen import (
    BETA_SHAPES,
    block_start,
    block_stop,
    delta,
    generate_beta,
    message_delta,
    message_start,
    message_stop,
    sse,
    text_delta,
    text_start,
)


def strip_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: strip_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [strip_none(x) for x in v]
    return v


def split_reads(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.choice([1, 7, 64, 500, 4096, 65536])
        out.append(data[i : i + n])
        i += n
    return out


async def sdk_final(reads: list[bytes], beta: bool = True) -> Any:
    async def body() -> AsyncIterator[bytes]:
        for r in reads:
            yield r

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        client = anthropic.AsyncAnthropic(api_key="k", base_url="http://t", http_client=http, max_retries=0)
        api = client.beta.messages if beta else client.messages
        async with api.stream(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
            return await s.get_final_message()


def dump(model: Any) -> Any:
    """What the wire said, as the SDK has it: JSON mode, wire names (`from`), without the nulls it adds."""
    return strip_none(model.model_dump(mode="json", by_alias=True))


async def compare_beta(data: bytes, rng: random.Random, expected: dict[str, Any]) -> TurnStream:
    reads = split_reads(data, rng)
    sdk = await sdk_final(reads)
    ts = assemble(reads)
    assert ts.diagnostics == [], [d.message for d in ts.diagnostics]
    ours = ts.final_message()
    assert strip_none(ours) == dump(sdk)
    assert strip_none(ours) == strip_none(expected)
    return ts


@pytest.mark.parametrize("seed", range(60))
async def test_generated_beta_stream_matches_the_beta_accumulator(seed: int) -> None:
    g = generate_beta(seed)
    await compare_beta(g.data, random.Random(seed), g.message)


@pytest.mark.parametrize("shape", BETA_SHAPES)
async def test_every_beta_shape_matches_the_beta_accumulator(shape: str) -> None:
    for seed in range(4):
        g = generate_beta(100 + seed, shape)
        await compare_beta(g.data, random.Random(seed), g.message)


def test_the_beta_streams_cover_every_beta_block_and_delta_type() -> None:
    blocks, deltas, citations = set(), set(), set()
    for seed in range(200):
        for name, payload in generate_beta(seed).events:
            if name == "content_block_start":
                blocks.add(payload["content_block"]["type"])
            elif name == "content_block_delta":
                deltas.add(payload["delta"]["type"])
                if payload["delta"]["type"] == "citations_delta":
                    citations.add(payload["delta"]["citation"]["type"])
            elif name == "message_start":
                blocks.update(b["type"] for b in payload["message"]["content"])
    from anthropic.types.beta import BetaRawContentBlockDeltaEvent, BetaRawContentBlockStartEvent, BetaTextCitation

    def literals(union: Any) -> set[str]:
        import typing

        if typing.get_origin(union) is typing.Annotated:
            union = typing.get_args(union)[0]
        return {m.model_fields["type"].annotation.__args__[0] for m in typing.get_args(union)}

    sdk_blocks = literals(BetaRawContentBlockStartEvent.model_fields["content_block"].annotation)
    sdk_deltas = literals(BetaRawContentBlockDeltaEvent.model_fields["delta"].annotation)
    sdk_citations = literals(BetaTextCitation)
    assert sdk_blocks and sdk_deltas and sdk_citations
    assert sdk_blocks - blocks == set()
    assert sdk_deltas - deltas == set()
    assert sdk_citations - citations == set()


@pytest.mark.parametrize("seed", range(8))
async def test_prefilled_and_citation_streams_match_the_plain_accumulator_too(seed: int) -> None:
    """Where the plain accumulator (`client.messages.stream`) knows every block: GA blocks only."""
    g = generate_beta(seed, "prefilled" if seed % 2 else "citations")
    sdk = await sdk_final([g.data], beta=False)
    ours = assemble(g.data).final_message()
    assert strip_none(ours["content"]) == [strip_none(b.model_dump(mode="json")) for b in sdk.content]
    assert (ours["stop_reason"], ours["model"]) == (sdk.stop_reason, sdk.model)


# ------------------------------------------------------------------------------------------ pre-filled message_start
def test_prefilled_message_start_reports_blocks_and_a_tool_use_the_loop_can_run() -> None:
    g = generate_beta(3, "prefilled")
    ts = TurnStream()
    steps = ts.feed(g.data)
    ts.close()
    tools = [b for b in g.message["content"] if b["type"] == "tool_use"]
    first = steps[0]
    assert first.event.type == "message_start"
    expected_changes: list[tuple[Any, ...]] = [("message_start",)]
    for i in range(len(tools)):
        expected_changes += [("block_opened", i), ("block_closed", i)]
    assert [c[:1] if c[0] == "message_start" else c for c in first.changes] == expected_changes
    assert first.changes[0][1]["content"] == []  # (the message as of message_start: its blocks come as changes)
    assert ts.outcome == "tool_use" and ts.assembler.stop_reason == "tool_use"
    assert [(b.id, b.name, b.input) for b in ts.assembler.tool_blocks()] == [
        (t["id"], t["name"], t["input"]) for t in tools
    ]
    assert ts.final_message()["content"] == tools  # `caller` and all, as sent
    obs = step_observations(first, ts.assembler, 0.0, 0, 0)
    uses: list[Any] = [o for o in obs if type(o).__name__ == "ToolUse"]
    assert [(u.id, u.name, u.input) for u in uses] == [(t["id"], t["name"], t["input"]) for t in tools]


def test_prefilled_blocks_then_streamed_ones_continue_the_indices() -> None:
    start = message_start(content=[{"type": "text", "text": "pre"}])
    ts = assemble(sse(start, text_start(1), text_delta(1, "post"), block_stop(1), message_delta(), message_stop()))
    assert ts.diagnostics == []
    assert [b["text"] for b in ts.final_message()["content"]] == ["pre", "post"]


# ------------------------------------------------------------------------------------------------------ compaction
def test_compaction_deltas_fill_the_block_as_the_beta_accumulator_does() -> None:
    ts = assemble(
        sse(
            message_start(),
            block_start(0, {"type": "compaction", "content": None}),
            delta(0, {"type": "compaction_delta", "content": "Summary of the", "encrypted_content": "E1"}),
            delta(0, {"type": "compaction_delta", "content": "Summary of the conversation"}),
            block_stop(0),
            message_delta(),
            message_stop(),
        )
    )
    assert ts.diagnostics == []
    assert ts.final_message()["content"] == [
        {"type": "compaction", "content": "Summary of the conversation", "encrypted_content": None}
    ]
    # every fragment the wire carried stays in the block buffer and its events
    assert ts.assembler.blocks[0].texts == ["Summary of the", "Summary of the conversation"]


def test_compaction_delta_for_a_text_block_is_a_mismatch() -> None:
    ts = assemble(
        sse(
            message_start(),
            text_start(0),
            delta(0, {"type": "compaction_delta", "content": "x"}),
            block_stop(0),
            message_delta(),
            message_stop(),
        )
    )
    assert [d.code for d in ts.diagnostics] == [D.DELTA_TYPE_MISMATCH]


def test_container_and_context_management_from_message_delta() -> None:
    c = {"id": "container_1", "expires_at": "2025-11-30T12:00:00Z"}
    cm: dict[str, Any] = {"applied_edits": []}
    ts = assemble(
        sse(
            message_start(container={"id": "container_0", "expires_at": "2025-11-30T11:00:00Z"}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "container": c},
                    "usage": {"output_tokens": 3},
                    "context_management": cm,
                },
            ),
            message_stop(),
        )
    )
    msg = ts.final_message()
    assert (msg["container"], msg["context_management"]) == (c, cm)


async def test_the_loop_runs_a_tool_use_from_a_prefilled_message_start() -> None:
    """Programmatic tool calling end to end: the loop runs the tool_use that came whole in message_start (with its
    caller) and answers it in the next request."""
    import asyncio

    import orjson

    from inspector.agent.loop import AgentLoop, LoopConfig
    from inspector.agent.toolbox import ToolSpec
    from inspector.testing.streamgen import text_delta as td

    tool_use = {
        "type": "tool_use",
        "id": "toolu_prefilled_1",
        "name": "add",
        "input": {"a": 2, "b": 3},
        "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"},
    }
    first = sse(
        message_start(
            content=[tool_use],
            stop_reason="tool_use",
            usage={"input_tokens": 0, "output_tokens": 0},
            container={"id": "container_1", "expires_at": "2025-11-30T12:00:00Z"},
        ),
        message_stop(),
    )
    second = sse(message_start(), text_start(0), td(0, "5"), block_stop(0), message_delta(), message_stop())
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(orjson.loads(request.content))
        data = first if len(bodies) == 1 else second
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    tools = {
        "add": ToolSpec(
            "add", "add two numbers", {"type": "object"}, fn=lambda i: i["a"] + i["b"], concurrency_safe=True
        )
    }
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        client = anthropic.AsyncAnthropic(api_key="k", base_url="http://t", http_client=http, max_retries=0)
        loop = AgentLoop(client, LoopConfig(model="claude-test", prompt="add", retries=0), tools)
        result = await asyncio.wait_for(loop.run(), 20)
    assert result.status == "finished", result.error
    assert [(c.name, c.input, c.result) for c in result.tools] == [("add", {"a": 2, "b": 3}, "5")]
    assert bodies[1]["messages"][1] == {"role": "assistant", "content": [tool_use]}
    assert bodies[1]["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_prefilled_1", "content": "5"}
    ]

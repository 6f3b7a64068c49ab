"""A small agent on the openai SDK (Chat Completions), to try `inspector watch` with:

    inspector watch --serve weather -- python examples/openai_weather_agent.py          # offline: the fake API
    OPENAI_API_KEY=... inspector watch -- python examples/openai_weather_agent.py        # the real API

It asks for the weather in a few cities, in parallel conversations (one per city), streams each answer with
`stream=True`, runs the `get_weather` tool calls the model makes (assembled from their argument fragments by index)
and sends the results back as `tool` messages until the model answers in text. `inspector watch` points
OPENAI_BASE_URL at its proxy (with /v1); nothing here knows about the inspector.

With `--serve weather` every conversation gets that scenario's scripted answers (a call for Paris, 18 °C),
whatever city it asked about: the fake API plays a script, it is not a model.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a given location.",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["location"],
            },
        },
    }
]
FAKE = {"Paris": 18, "Rome": 24, "Oslo": 9}


def get_weather(location: str, unit: str = "celsius") -> dict:
    city = location.split(",")[0].strip()
    return {"location": location, "temperature": FAKE.get(city, 20), "unit": unit, "conditions": "clear"}


async def converse(client: openai.AsyncOpenAI, city: str, model: str) -> str:
    messages: list = [{"role": "user", "content": f"What's the weather like in {city} right now?"}]
    for _ in range(5):
        stream = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True)
        text, calls = "", {}
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tc in choice.delta.tool_calls or []:  # fragments, by index
                    call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                    call["id"] = call["id"] or tc.id
                    if tc.function is not None:
                        call["name"] = call["name"] or tc.function.name
                        call["arguments"] += tc.function.arguments or ""
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls.values()
                ],
            }
        )
        for c in calls.values():
            result = get_weather(**json.loads(c["arguments"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps(result)})
    return "(no answer after 5 turns)"


async def main() -> int:
    cities = sys.argv[1:] or ["Paris", "Rome", "Oslo"]
    model = os.environ.get("MODEL", "gpt-4o-mini")
    client = openai.AsyncOpenAI(api_key=os.environ.get("OPENAI_API_KEY", "sk-offline-example"))
    answers = await asyncio.gather(*(converse(client, c, model) for c in cities))
    for city, answer in zip(cities, answers, strict=True):
        print(f"{city}: {answer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

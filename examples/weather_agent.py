"""A small agent on the Anthropic SDK, to try `inspector watch` with:

    inspector watch --serve weather -- python examples/weather_agent.py          # offline, the fake API answers
    ANTHROPIC_API_KEY=... inspector watch -- python examples/weather_agent.py    # the real API

It asks for the weather in a few cities, in parallel conversations (one per city), runs the `get_weather` tool
calls the model makes and sends the results back until the model answers in text. `inspector watch` points
ANTHROPIC_BASE_URL at its proxy; nothing here knows about the inspector.

With `--serve weather` every conversation gets that scenario's scripted answers (a call for Paris, 18 °C),
whatever city it asked about: the fake API plays a script, it is not a model.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import anthropic

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a given location.",
        "input_schema": {
            "type": "object",
            "properties": {
                "location": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    }
]
FAKE = {"Paris": 18, "Rome": 24, "Oslo": 9}


def get_weather(location: str, unit: str = "celsius") -> dict:
    city = location.split(",")[0].strip()
    return {"location": location, "temperature": FAKE.get(city, 20), "unit": unit, "conditions": "clear"}


async def converse(client: anthropic.AsyncAnthropic, city: str, model: str) -> str:
    messages: list = [{"role": "user", "content": f"What's the weather like in {city} right now?"}]
    for _ in range(5):
        async with client.messages.stream(model=model, max_tokens=512, tools=TOOLS, messages=messages) as stream:
            message = await stream.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        calls = [b for b in message.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in message.content if b.type == "text")
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": json.dumps(get_weather(**c.input))} for c in calls
        ]
        messages.append({"role": "user", "content": results})
    return "(no answer after 5 turns)"


async def main() -> int:
    cities = sys.argv[1:] or ["Paris", "Rome", "Oslo"]
    model = os.environ.get("MODEL", "claude-sonnet-4-6")
    client = anthropic.AsyncAnthropic(api_key=os.environ.get("ANTHROPIC_API_KEY", "sk-ant-offline-example"))
    answers = await asyncio.gather(*(converse(client, c, model) for c in cities))
    for city, answer in zip(cities, answers, strict=True):
        print(f"{city}: {answer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

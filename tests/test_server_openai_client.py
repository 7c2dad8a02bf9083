"""The README's example: the official ``openai`` package calls a tool through the gateway."""

from __future__ import annotations

import json
from pathlib import Path

import openai

from toolwire.backends import OpenAIBackend
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_the_official_client_gets_a_tool_call_and_sends_the_result_back() -> None:
    with FakeOpenAIServer() as upstream:
        # the engine behind writes its call as text; the gateway hands it over as tool_calls
        upstream.add_stream(text_deltas('{"name": "get_weather", "arguments": {"city": "Paris"}}'))
        upstream.add_stream(text_deltas("It is sunny in Paris."))
        app = create_app(OpenAIBackend("engine", base_url=upstream.base_url), model_name="gw")
        with ServedApp(app) as gateway:
            client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused")
            messages: list = [{"role": "user", "content": "Weather in Paris?"}]
            first = client.chat.completions.create(model="gw", messages=messages, tools=[WEATHER])
            choice = first.choices[0]
            assert choice.finish_reason == "tool_calls" and choice.message.content is None
            call = choice.message.tool_calls[0]
            assert call.function.name == "get_weather"
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            messages += [
                choice.message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
            ]
            second = client.chat.completions.create(model="gw", messages=messages, tools=[WEATHER])
            assert second.choices[0].message.content == "It is sunny in Paris."
    sent = upstream.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == call.id


def test_the_official_client_streams_from_the_local_model(
    llama_backend: LlamaCppBackend, qwen_gguf: Path
) -> None:
    with ServedApp(create_app(llama_backend)) as gateway:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused")
        stream = client.chat.completions.create(
            model="toolwire",
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=[WEATHER],
            stream=True,
            max_tokens=48,
            temperature=0,
        )
        finish = None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
    assert finish in ("stop", "tool_calls", "length")

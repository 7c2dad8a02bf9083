"""Structured outputs on the real default model in-process, through the gateway, with the
official clients' own helpers: the reply is written under the schema's grammar from its
first token, so each helper gets a parsed object of the schema — in all three APIs.

Few generations, each short (the machine is slow): one per API, and one plain
``json_object``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from pydantic import BaseModel

from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.server import create_app
from toolwire.testing import ServedApp


class Capital(BaseModel):
    country: str
    city: str


ASK = [{"role": "user", "content": "What is the capital of France? Answer in JSON."}]


@pytest.fixture(scope="module")
def gateway(llama_backend: LlamaCppBackend) -> Iterator[str]:
    with ServedApp(create_app(llama_backend, model_name="local")) as served:
        yield served.url


def _notices(extra: dict[str, Any] | None) -> list[str]:
    return [n["code"] for n in (extra or {}).get("toolwire", {}).get("notices", [])]


def test_chat_completions_parse_on_the_local_model(gateway: str) -> None:
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    done = client.chat.completions.parse(
        model="local",
        messages=ASK,  # type: ignore[arg-type]
        response_format=Capital,
        max_tokens=100,
        temperature=0,
    )
    message = done.choices[0].message
    assert isinstance(message.parsed, Capital)
    assert "paris" in message.parsed.city.lower()
    # the template's family (Hermes) reads no call in it: the JSON is the content, whole
    assert not message.tool_calls and "<tool_call>" not in (message.content or "")
    assert Capital.model_validate_json(message.content or "") == message.parsed
    assert _notices(done.model_extra) == ["constrained-output"]


def test_streamed_the_parse_helper_gets_the_same_object(gateway: str) -> None:
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    with client.chat.completions.stream(
        model="local",
        messages=ASK,  # type: ignore[arg-type]
        response_format=Capital,
        max_tokens=100,
        temperature=0,
    ) as stream:
        final = stream.get_final_completion()
    parsed = final.choices[0].message.parsed
    assert isinstance(parsed, Capital) and "paris" in parsed.city.lower()


def test_responses_parse_on_the_local_model(gateway: str) -> None:
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    done = client.responses.parse(
        model="local",
        input=ASK[0]["content"],
        text_format=Capital,
        max_output_tokens=100,
        temperature=0,
    )
    assert isinstance(done.output_parsed, Capital)
    assert "paris" in done.output_parsed.city.lower()


def test_messages_parse_on_the_local_model(gateway: str) -> None:
    client = anthropic.Anthropic(base_url=gateway, api_key="unused", max_retries=0)
    done = client.messages.parse(
        model="local",
        max_tokens=100,
        messages=ASK,  # type: ignore[arg-type]
        output_format=Capital,
    )  # this client's parse takes no temperature: the engine's default is 0
    assert isinstance(done.parsed_output, Capital)
    assert "paris" in done.parsed_output.city.lower()
    assert done.stop_reason == "end_turn"


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,  # the client's parse helper takes strict tools only
    },
}


def test_with_tools_the_local_model_calls_or_answers_in_the_schema(gateway: str) -> None:
    """Either is right; prose is neither, and the grammar leaves no room for it."""
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    done = client.chat.completions.parse(
        model="local",
        messages=ASK,  # type: ignore[arg-type]
        tools=[WEATHER],  # type: ignore[list-item]
        response_format=Capital,
        max_tokens=100,
        temperature=0,
    )
    message = done.choices[0].message
    if message.tool_calls:
        assert message.tool_calls[0].function.name == "get_weather"
        assert done.choices[0].finish_reason == "tool_calls"
    else:
        assert isinstance(message.parsed, Capital)
    assert _notices(done.model_extra)[0] == "constrained-output"


def test_json_object_on_the_local_model(gateway: str) -> None:
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    done = client.chat.completions.create(
        model="local",
        messages=[
            {
                "role": "user",
                "content": 'Give the capital of France as a JSON object {"capital": ...}.',
            }
        ],
        response_format={"type": "json_object"},
        max_tokens=100,
        temperature=0,
    )
    choice = done.choices[0]
    assert choice.finish_reason == "stop"
    value = json.loads(choice.message.content or "")
    assert isinstance(value, dict) and value
    assert "output-not-schema" not in _notices(done.model_extra)

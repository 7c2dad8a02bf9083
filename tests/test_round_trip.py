"""The README's round trip on each packaged model, as a new user runs it: ``toolwire
serve``'s app on the model in-process, the official ``openai`` client asks for the weather,
gets the call, sends the result back and gets an answer in words that uses it — for five
cities, streamed and not, on the default 0.5B model and on the 1.5B.

Small models, given a tool's result, write their call again (the default model repeats it
and echoes the result); the reply pipeline asks once more for an answer. What is pinned
here is the user's view: one call, then text that carries the result, never a second call.
The 1.5B model writes its repeat in the doubled braces its template shows; it is the same.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire.server.app import create_app
from toolwire.testing import ServedApp

openai = pytest.importorskip("openai")

CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo"]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module", params=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def client(request: pytest.FixtureRequest) -> Any:
    if request.param == "qwen2.5-coder-0.5b":
        backend = request.getfixturevalue("llama_backend")
    else:
        from toolwire.backends.llamacpp import LlamaCppBackend

        backend = LlamaCppBackend(request.getfixturevalue("qwen15_gguf"), n_ctx=2048, n_threads=2)
    with ServedApp(create_app(backend)) as served:
        yield openai.OpenAI(base_url=served.url + "/v1", api_key="unused", timeout=300)


def _answer(client: Any, messages: list[dict[str, Any]], *, stream: bool) -> tuple[str, int, str]:
    """The second turn's text, how many calls it made, and its finish reason."""
    if not stream:
        reply = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
        choice = reply.choices[0]
        calls = len(choice.message.tool_calls or [])
        return choice.message.content or "", calls, choice.finish_reason
    text, calls, finish = "", 0, ""
    chunks = client.chat.completions.create(
        model="m", messages=messages, tools=[WEATHER], stream=True
    )
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            calls += len(choice.delta.tool_calls or [])
            finish = choice.finish_reason or finish
    return text, calls, finish


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("city", CITIES)
def test_call_result_answer(client: Any, city: str, stream: bool) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"What's the weather in {city}?"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": city}
    messages.append(
        {
            "role": "assistant",
            "content": choice.message.content or "",
            "tool_calls": [call.model_dump()],
        }
    )
    result = {"city": city, "forecast": "sunny", "temperature_c": 21}
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    text, calls, finish = _answer(client, messages, stream=stream)
    assert calls == 0 and finish == "stop"
    assert "sunny" in text.lower() or "21" in text, text  # the answer uses the result
    assert "get_weather" not in text and "{" not in text  # no call markup as the answer

"""Ollama's native API against the fake server over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from toolwire.backends import Request, stream_sync
from toolwire.backends.ollama import OllamaBackend, to_ollama
from toolwire.conversation import Conversation
from toolwire.errors import BackendError
from toolwire.events import CallEnd, Done, ReasoningDelta, TextDelta, ToolResult
from toolwire.loop import run_loop_sync
from toolwire.pipeline import ModelMemory
from toolwire.pipeline.lessons import PROBE_MESSAGE
from toolwire.testing import FakeOpenAIServer
from toolwire.tools import Toolbox

from .replies import TOOLS


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def events(server: FakeOpenAIServer, request: Request) -> list[Any]:
    return list(stream_sync(OllamaBackend("qwen3", base_url=server.ollama_url).stream(request)))


def test_thinking_text_and_calls(server: FakeOpenAIServer) -> None:
    server.add_ollama(
        [
            {"content": "", "thinking": "They want weather. <tool_call>not this</tool_call>"},
            {"content": "Checking."},
            {
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}
                ],
            },
        ],
        prompt_eval_count=40,
        eval_count=12,
    )
    got = events(
        server,
        Request(
            [{"role": "user", "content": "Weather?"}],
            TOOLS,
            think=True,
            temperature=0,
            max_tokens=50,
        ),
    )
    assert next(e.text for e in got if isinstance(e, ReasoningDelta)).startswith("They want")
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Checking."]
    (end,) = [e for e in got if isinstance(e, CallEnd)]
    assert end.call.name == "get_weather" and end.call.arguments == {"city": "Paris", "days": 3}
    assert got[-1] == Done("tool_calls", {"prompt_tokens": 40, "completion_tokens": 12})
    sent = server.requests[0]
    assert sent["think"] is True and sent["options"] == {"temperature": 0, "num_predict": 50}
    assert sent["tools"][2]["function"]["name"] == "set_flags"  # bare form normalised


def test_the_next_request_carries_the_exchange_in_ollamas_encoding(
    server: FakeOpenAIServer,
) -> None:
    box = Toolbox()

    @box.tool(read_only=True)
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    server.add_ollama(
        [
            {
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                    {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                ],
            }
        ]
    )
    server.add_ollama([{"content": "Sunny in both."}])
    conv = Conversation()
    conv.add_user("Oslo and Rome?")
    got = list(run_loop_sync(OllamaBackend("m", base_url=server.ollama_url), conv, box))
    assert [e.content for e in got if isinstance(e, ToolResult)] == [
        "sunny in Oslo",
        "sunny in Rome",
    ]
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert second[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Oslo"}
    assert [m["tool_name"] for m in second[2:]] == ["get_weather", "get_weather"]
    assert [m["content"] for m in second[2:]] == ["sunny in Oslo", "sunny in Rome"]


def test_to_ollama_keeps_unreadable_arguments_visible() -> None:
    out = to_ollama(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "bad"},
        ]
    )
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"_raw": "{oops"}
    assert out[1] == {"role": "tool", "content": "bad", "tool_name": "f"}
    assert json.dumps(out)  # plain JSON all the way


def test_another_refusal_is_a_backend_error(server: FakeOpenAIServer) -> None:
    server.add_error(404, 'model "qwen9" not found, try pulling it first')
    with pytest.raises(BackendError) as info:
        events(server, Request([{"role": "user", "content": "hi"}], TOOLS))
    assert info.value.status == 404 and "not found" in str(info.value)
    assert len(server.requests) == 1  # nothing to heal


def test_a_model_without_tools_gets_them_in_words(server: FakeOpenAIServer) -> None:
    refusal = "registry.ollama.ai/library/gemma:2b does not support tools"
    server.add_error(400, refusal)
    server.add_error(400, refusal)  # the gateway's own probe, refused alike: a lesson
    server.add_ollama(
        [
            {
                "content": '<tool_call>\n{"name": "get_weather", "arguments": '
                '{"city": "Lima"}}\n</tool_call>'
            }
        ]
    )
    server.add_ollama([{"content": "Sunny."}])
    backend = OllamaBackend("gemma-no-tools", base_url=server.ollama_url, memory=ModelMemory())
    got = list(stream_sync(backend.stream(Request([{"role": "user", "content": "Lima?"}], TOOLS))))
    (end,) = [e for e in got if isinstance(e, CallEnd)]
    assert end.call.arguments == {"city": "Lima"}
    assert got[-1].finish_reason == "tool_calls"
    probe = server.requests[1]  # nothing of the client's: a fixed message and tool
    assert probe["messages"] == [{"role": "user", "content": PROBE_MESSAGE}] and probe["tools"]
    second = server.requests[2]
    assert "tools" not in second and "<tool_call>" in second["messages"][0]["content"]
    # remembered: the next turn goes in words at once
    list(stream_sync(backend.stream(Request([{"role": "user", "content": "Hi"}], TOOLS))))
    assert "tools" not in server.requests[3] and len(server.requests) == 4


def test_a_reply_is_read_to_its_end_so_the_connection_is_reused(server: FakeOpenAIServer) -> None:
    import asyncio

    from toolwire.backends.http import new_client

    async def three() -> list[list[Any]]:
        async with new_client() as client:
            backend = OllamaBackend("qwen3", base_url=server.ollama_url, client=client)
            request = Request([{"role": "user", "content": "Hi"}])
            replies = []
            for _ in range(3):
                replies.append([e async for e in backend.stream(request)])
            return replies

    for n in range(3):
        server.add_ollama([{"content": f"Hello {n}."}])
    replies = asyncio.run(three())
    assert [[e.text for e in r if isinstance(e, TextDelta)] for r in replies] == [
        ["Hello 0."],
        ["Hello 1."],
        ["Hello 2."],
    ]
    assert len(server.peers) == 3 and len(set(server.peers)) == 1

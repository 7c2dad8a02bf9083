"""The OpenAI-compatible backend against a fake server speaking real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend, Request, stream_sync
from toolwire.errors import BackendError
from toolwire.events import (
    CallArgsDelta,
    CallEnd,
    CallStart,
    Done,
    ReasoningDelta,
    TextDelta,
)
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

from .replies import TOOLS


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def run(backend: OpenAIBackend, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


USER = [{"role": "user", "content": "Weather in Paris and Rome?"}]


def test_text_streams_and_the_request_carries_the_tools(server: FakeOpenAIServer) -> None:
    server.add_stream(
        text_deltas("Hello there."), usage={"prompt_tokens": 5, "completion_tokens": 3}
    )
    backend = OpenAIBackend("m1", base_url=server.base_url, api_key="sk-test")
    events = run(backend, Request(USER, TOOLS, tool_choice="auto", temperature=0.0))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there."
    assert events[-1] == Done("stop", {"prompt_tokens": 5, "completion_tokens": 3})
    sent = server.requests[0]
    assert sent["model"] == "m1" and sent["stream"] is True and sent["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "get_weather",
        "write_file",
        "set_flags",
    ]
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_parallel_calls_split_mid_string_with_null_content(server: FakeOpenAIServer) -> None:
    a = json.dumps({"city": "Paris", "days": 3})
    b = json.dumps({"city": 'Rome "the eternal"', "days": 1})
    server.add_stream(
        tool_call_deltas(
            [("call_a", "get_weather", a), ("call_b", "get_weather", b)], size=4, interleave=True
        ),
        finish_reason="tool_calls",
    )
    events = run(OpenAIBackend("m", base_url=server.base_url), Request(USER, TOOLS))
    starts = [e for e in events if isinstance(e, CallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_a", "get_weather"),
        (1, "call_b", "get_weather"),
    ]
    for index, text in ((0, a), (1, b)):
        assert (
            "".join(e.text for e in events if isinstance(e, CallArgsDelta) and e.index == index)
            == text
        )
    ends = [e.call for e in events if isinstance(e, CallEnd)]
    assert [c.arguments for c in ends] == [json.loads(a), json.loads(b)]
    assert [c.arguments_text for c in ends] == [a, b]
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert events[-1] == Done("tool_calls", None)


def test_malformed_arguments_keep_their_text(server: FakeOpenAIServer) -> None:
    bad = "{'city': 'Paris',"
    server.add_stream(tool_call_deltas([("c1", "get_weather", bad)]), finish_reason="tool_calls")
    events = run(OpenAIBackend("m", base_url=server.base_url), Request(USER, TOOLS))
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    # the text as the model wrote it is kept; the arguments are read and typed once, at the
    # pipeline's end, each repair named
    assert end.call.arguments_text == bad and end.call.arguments == {"city": "Paris"}
    assert end.arguments == '{"city": "Paris"}' and end.invalid is None
    (notice,) = [e for e in events if getattr(e, "code", "") == "arguments-repaired"]
    assert "single-quotes" in notice.message or "quote" in notice.message


def test_reasoning_is_reasoning_and_never_a_call(server: FakeOpenAIServer) -> None:
    server.add_stream(
        [
            {"reasoning_content": 'I could call <tool_call>{"name": "x"}</tool_call>'},
            {"reasoning": " or not."},
            {"content": "Sunny."},
        ]
    )
    events = run(OpenAIBackend("m", base_url=server.base_url), Request(USER, TOOLS))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)).endswith("or not.")
    assert not [e for e in events if isinstance(e, (CallStart, CallEnd))]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Sunny."]


def test_a_refusal_is_a_backend_error_with_what_the_provider_said(
    server: FakeOpenAIServer,
) -> None:
    server.add_error(400, {"message": "max_tokens is too large for this model"})
    with pytest.raises(BackendError) as info:
        run(OpenAIBackend("m", base_url=server.base_url), Request(USER, TOOLS))
    assert info.value.status == 400
    assert "max_tokens is too large" in str(info.value) and "too large" in info.value.body
    assert len(server.requests) == 1  # not a refusal over tools: nothing to heal


def test_a_refused_schema_is_sent_again_in_the_strict_dialect(server: FakeOpenAIServer) -> None:
    refusal = {
        "message": "Invalid schema for function 'set_flags': "
        "'additionalProperties' is not permitted"
    }
    server.add_error(400, refusal)
    server.add_error(400, refusal)  # the gateway's probe, refused the same way: a lesson
    server.add_stream(text_deltas("ok"))
    server.add_stream(text_deltas("again"))
    backend = OpenAIBackend("schema-picky", base_url=server.base_url)
    tools = [
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"a": {"type": "string", "title": "A"}},
            },
        }
    ]
    events = run(backend, Request(USER, tools))
    assert [e.code for e in events if hasattr(e, "code")] == ["healed-schema"]
    probe = server.requests[1]["tools"][0]
    assert probe["function"]["name"] == "toolwire_probe"
    assert "additionalProperties" in probe["function"]["parameters"]
    first, second = server.requests[0]["tools"][0], server.requests[2]["tools"][0]
    assert "additionalProperties" in first["function"]["parameters"]
    assert second["function"]["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    run(backend, Request(USER, tools))  # remembered: the next turn is strict at once
    assert "additionalProperties" not in server.requests[3]["tools"][0]["function"]["parameters"]


def test_a_model_without_tools_gets_them_in_words(server: FakeOpenAIServer) -> None:
    server.add_error(400, "registry.ollama.ai/library/gemma:2b does not support tools")
    server.add_stream(text_deltas("ok"))  # the gateway's probe, taken: for this request only
    server.add_stream(
        text_deltas(
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        )
    )
    events = run(OpenAIBackend("gemma", base_url=server.base_url), Request(USER, TOOLS))
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert end.call.arguments == {"city": "Paris"}
    assert events[-1] == Done("tool_calls", None)
    assert server.requests[1]["tools"][0]["function"]["name"] == "toolwire_probe"
    second = server.requests[2]
    assert "tools" not in second
    assert second["messages"][0]["role"] == "system"
    assert "<tool_call>" in second["messages"][0]["content"]
    assert "get_weather" in second["messages"][0]["content"]


def test_unreachable_server_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="could not be reached"):
        run(OpenAIBackend("m", base_url="http://127.0.0.1:9/v1"), Request(USER))


def test_a_chunk_that_is_not_json(server: FakeOpenAIServer) -> None:
    server.add_raw(['{"choices": [{"delta": {"content": "a"}}]}', "{oops"])
    with pytest.raises(BackendError, match="not JSON"):
        run(OpenAIBackend("m", base_url=server.base_url), Request(USER))


def test_an_injected_client_is_used() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = 'data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
        return httpx.Response(200, text=body + "data: [DONE]\n\n")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    backend = OpenAIBackend("m", base_url="https://example.invalid/v1", client=client)
    events = run(backend, Request(USER))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hi"]
    assert str(seen[0].url) == "https://example.invalid/v1/chat/completions"
    asyncio.run(client.aclose())


def test_stream_sync_closes_the_stream_when_left_early(server: FakeOpenAIServer) -> None:
    server.add_stream(text_deltas("x" * 300, size=1))
    events = stream_sync(OpenAIBackend("m", base_url=server.base_url).stream(Request(USER)))
    assert isinstance(next(events), TextDelta)
    events.close()  # must not hang or raise


def test_a_model_listed_without_tools_gets_them_in_words_at_once(
    server: FakeOpenAIServer,
) -> None:
    server.add_stream(text_deltas('{"name": "get_weather", "arguments": {"city": "Rome"}}'))
    backend = OpenAIBackend("plain", base_url=server.base_url, words=True)
    events = run(backend, Request(USER, TOOLS))
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert end.call.arguments == {"city": "Rome"}  # a reply that is only the call's JSON
    assert "tools" not in server.requests[0] and len(server.requests) == 1

"""The gateway tells its client what the pipeline did, and takes ``toolwire.strict``.

Over real HTTP: the gateway before the fake upstream, read raw and with the official
``openai`` client (which must ignore the extension).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from toolwire.backends import OpenAIBackend
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.testing import (
    FakeOpenAIServer,
    ScriptedLlama,
    ServedApp,
    text_deltas,
    tool_call_deltas,
)

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
ASK = {
    "model": "gw",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": TOOLS,
}
BARE = '{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}'


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("up", base_url=upstream.base_url, memory=ModelMemory())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def _post(gateway: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gateway + "/v1/chat/completions", json=body, timeout=10)


def _stream(gateway: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", gateway + "/v1/chat/completions", json={**body, "stream": True}, timeout=10
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[6:]) for line in lines[:-1]]


def _codes(notices: list[dict[str, str]]) -> list[str]:
    return [n["code"] for n in notices]


def test_a_recovered_call_and_repaired_arguments_are_told_in_the_body(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(BARE))
    reply = _post(gateway, ASK).json()
    (call,) = reply["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "days": 3}
    notices = reply["toolwire"]["notices"]
    assert _codes(notices) == ["recovered-bare-json", "arguments-repaired"]
    assert "number-from-string" in notices[1]["message"]


def test_the_same_notices_arrive_streamed_in_a_chunk_before_done(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(BARE))
    chunks = _stream(gateway, ASK)
    last = chunks[-1]
    assert last["choices"] == []
    assert _codes(last["toolwire"]["notices"]) == ["recovered-bare-json", "arguments-repaired"]
    assert all("toolwire" not in c for c in chunks[:-1])


def test_a_plain_reply_carries_an_empty_list_streamed_and_not(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Sunny."))
    assert _post(gateway, ASK).json()["toolwire"] == {"notices": []}
    upstream.add_stream(text_deltas("Sunny."))
    assert _stream(gateway, ASK)[-1]["toolwire"] == {"notices": []}


def test_strict_asked_by_the_client_turns_recovery_and_repairs_off(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(BARE))
    reply = _post(gateway, {**ASK, "toolwire": {"strict": True}}).json()
    message = reply["choices"][0]["message"]
    assert message["content"] == BARE and "tool_calls" not in message
    assert reply["toolwire"]["notices"] == []
    # a native call with a string for the integer: strict sends it as written, and says why
    upstream.add_stream(
        tool_call_deltas([("c1", "get_weather", '{"city": "Paris", "days": "3"}')]),
        finish_reason="tool_calls",
    )
    chunks = _stream(gateway, {**ASK, "toolwire": {"strict": True}})
    sent = [
        tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    # streamed as it came: the pieces joined are the arguments as written
    written = "".join(tc["function"].get("arguments", "") for tc in sent)
    assert json.loads(written) == {"city": "Paris", "days": "3"}
    (notice,) = chunks[-1]["toolwire"]["notices"]
    assert notice["code"] == "arguments-invalid" and "days" in notice["message"]


def test_an_abandoned_call_is_reported_streamed_and_not() -> None:
    # the local model (scripted under the published Qwen2.5 template) opens a call and the
    # reply ends inside it: the call is withdrawn, its text stays, and the client is told
    template = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    cut = 'Checking. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    backend = LlamaCppBackend("scripted", llama=ScriptedLlama(template, cut), memory=ModelMemory())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        reply = _post(served.url, ASK).json()
        chunks = _stream(served.url, ASK)
    message = reply["choices"][0]["message"]
    assert message["content"] == cut and "tool_calls" not in message
    for notices in (reply["toolwire"]["notices"], chunks[-1]["toolwire"]["notices"]):
        assert _codes(notices) == ["call-abandoned", "call-not-read"]
        assert "ended inside the call" in notices[0]["message"]


def test_a_call_the_reader_withdraws_itself_is_told_once() -> None:
    # Qwen3-Coder's XML call without its <tool_call>, cut short: the reader withdraws the
    # call it began and says so in its own notice; the gateway adds none of its own for it
    template = (FIXTURES / "Qwen3-Coder.jinja").read_text()
    cut = "Checking. <function=get_weather>\n<parameter=city>\nPar"
    backend = LlamaCppBackend("scripted", llama=ScriptedLlama(template, cut), memory=ModelMemory())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        reply = _post(served.url, ASK).json()
        chunks = _stream(served.url, ASK)
    assert reply["choices"][0]["message"]["content"] == cut
    for notices in (reply["toolwire"]["notices"], chunks[-1]["toolwire"]["notices"]):
        assert _codes(notices) == ["call-abandoned"]


def test_parallel_calls_cut_to_one_are_reported(upstream: FakeOpenAIServer, gateway: str) -> None:
    calls = [
        ("c1", "get_weather", '{"city": "Paris"}'),
        ("c2", "get_weather", '{"city": "Rome"}'),
    ]
    upstream.add_stream(tool_call_deltas(calls), finish_reason="tool_calls")
    reply = _post(gateway, {**ASK, "parallel_tool_calls": False}).json()
    assert len(reply["choices"][0]["message"]["tool_calls"]) == 1
    assert "calls-dropped" in _codes(reply["toolwire"]["notices"])
    upstream.add_stream(tool_call_deltas(calls), finish_reason="tool_calls")
    chunks = _stream(gateway, {**ASK, "parallel_tool_calls": False})
    assert "calls-dropped" in _codes(chunks[-1]["toolwire"]["notices"])


@pytest.mark.parametrize(
    ("extension", "field"),
    [
        ("strict", "toolwire"),
        ({"strict": "yes"}, "toolwire.strict"),
        ({"strict": True, "loose": 1}, "toolwire.loose"),
        ({"constrained": "no"}, "toolwire.constrained"),
    ],
)
def test_a_malformed_extension_gets_a_400_that_names_the_field(
    gateway: str, extension: Any, field: str
) -> None:
    r = _post(gateway, {**ASK, "toolwire": extension})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == field


def test_the_extension_sets_strict_and_constrained() -> None:
    from toolwire.server.validate import validate_chat as _parse

    body = {**ASK, "tools": TOOLS, "toolwire": {"constrained": False}}
    request = _parse(body)
    assert request.constrained is False and request.strict is False
    request = _parse({**body, "toolwire": {"strict": True}})
    assert request.strict is True and request.constrained is True
    request = _parse({**ASK, "tools": TOOLS})
    assert request.constrained is True


def test_the_official_client_ignores_the_extension(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    client = OpenAI(base_url=gateway + "/v1", api_key="unused")
    upstream.add_stream(text_deltas(BARE))
    reply = client.chat.completions.create(model="gw", messages=ASK["messages"], tools=TOOLS)  # type: ignore[arg-type]
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    upstream.add_stream(text_deltas(BARE))
    names = [
        tc.function.name
        for chunk in client.chat.completions.create(
            model="gw",
            messages=ASK["messages"],
            tools=TOOLS,
            stream=True,  # type: ignore[arg-type]
        )
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
        if tc.function and tc.function.name  # a call's first chunk names it; its pieces follow
    ]
    assert names == ["get_weather"]

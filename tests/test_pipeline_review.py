"""Regressions from an adversarial review of the reply pipeline and the gateway.

Each test names the fault it pins: the same reply or request now gives the same result
through every transport, and hostile requests get a 400, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire import (
    CallEnd,
    Done,
    FormatError,
    LlamaCppBackend,
    Notice,
    OllamaBackend,
    OpenAIBackend,
    ReasoningDelta,
    Request,
    TextDelta,
    stream_sync,
)
from toolwire.errors import BackendError
from toolwire.formats.words import UNREADABLE
from toolwire.pipeline import ModelMemory, Plan, read
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ScriptedLlama, ServedApp, text_deltas

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
HERMES = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
QWEN3 = (FIXTURES / "Qwen-Qwen3-0.6B.jinja").read_text()
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "flag": {"type": "boolean"}},
        },
    },
}
USER = [{"role": "user", "content": "go"}]
CALL = '{"name": "calc", "arguments": {"n": 1}}'


@pytest.fixture()
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


def _run(backend: Any, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


def _calls(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.call.name, e.call.arguments) for e in events if isinstance(e, CallEnd)]


def _codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


# ------------------------------------------------------------------------ the gateway


@pytest.fixture()
def gateway(server: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("up", base_url=server.base_url, memory=ModelMemory())
    with ServedApp(create_app(backend)) as served:
        yield served.url


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"anyOf": [schema]}
    return schema


@pytest.mark.parametrize(
    ("tools", "messages"),
    [
        ([{"type": "function", "function": {}}], USER),
        ([{"type": "custom", "function": {"name": "x"}}], USER),
        ([{"type": "function", "function": {"name": "x", "parameters": [1]}}], USER),
        ([{"type": "function", "function": {"name": "x", "parameters": _deep(400)}}], USER),
        (
            None,
            [
                *USER,
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"},
            ],
        ),
    ],
)
def test_malformed_tools_and_calls_get_a_400_not_a_500(
    gateway: str, tools: Any, messages: Any
) -> None:
    body: dict[str, Any] = {"model": "m", "messages": messages}
    if tools is not None:
        body["tools"] = tools
    for stream in (False, True):
        r = httpx.post(gateway + "/v1/chat/completions", json={**body, "stream": stream})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["type"] == "invalid_request_error"


def test_a_huge_number_in_text_is_refused_not_a_500(server: FakeOpenAIServer, gateway: str) -> None:
    from toolwire.testing import tool_call_deltas

    server.add_stream(
        tool_call_deltas([("c1", "calc", '{"n": "1e5000"}')]), finish_reason="tool_calls"
    )
    r = httpx.post(
        gateway + "/v1/chat/completions", json={"model": "m", "messages": USER, "tools": [CALC]}
    )
    assert r.status_code == 200
    (call,) = r.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"n": "1e5000"}  # as the model wrote
    assert [n["code"] for n in r.json()["toolwire"]["notices"]] == ["arguments-invalid"]


def test_calls_dropped_are_told_alike_streamed_or_not(
    server: FakeOpenAIServer, gateway: str
) -> None:
    from toolwire.testing import tool_call_deltas

    three = [(f"c{i}", "calc", f'{{"n": {i}}}') for i in range(3)]  # three different calls
    body = {"model": "m", "messages": USER, "tools": [CALC], "parallel_tool_calls": False}
    server.add_stream(tool_call_deltas(three), finish_reason="tool_calls")
    whole = httpx.post(gateway + "/v1/chat/completions", json=body).json()["toolwire"]
    server.add_stream(tool_call_deltas(three), finish_reason="tool_calls")
    with httpx.stream("POST", gateway + "/v1/chat/completions", json={**body, "stream": True}) as r:
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: {")]
    streamed = json.loads(lines[-1][6:])["toolwire"]
    assert whole == streamed
    assert [n["code"] for n in whole["notices"]] == ["calls-dropped", "calls-dropped"]


# ------------------------------------------------------------------------ tools in words


def _words(server: FakeOpenAIServer, reply: str, *, strict: bool) -> list[Any]:
    server.add_stream(text_deltas(reply, 7))
    backend = OpenAIBackend("m", base_url=server.base_url, words=True, memory=ModelMemory())
    return _run(backend, Request(USER, [CALC], strict=strict))


def test_words_name_every_repair_and_strict_reads_only_the_asked_form(
    server: FakeOpenAIServer,
) -> None:
    sloppy = '<tool_call>{"name": "calc", "arguments": {"n": "3", "flag": True,}}</tool_call>'
    events = _words(server, sloppy, strict=False)
    # read leniently, then typed once by the schema at the pipeline's end ("3" is 3)
    assert _calls(events) == [("calc", {"n": 3, "flag": True})]
    (repaired,) = [e for e in events if isinstance(e, Notice) and e.code == "recovered-repairs"]
    assert "python-literals" in repaired.message and "trailing-comma" in repaired.message
    strict = _words(server, sloppy, strict=True)
    assert [name for name, _ in _calls(strict)] == [UNREADABLE]  # told how to write one
    for shape in (CALL, f"```json\n{CALL}\n```", '<function=calc>{"n": 1}</function>'):
        events = _words(server, shape, strict=True)
        assert (
            _calls(events) == []
            and "".join(e.text for e in events if isinstance(e, TextDelta)) == shape
        )
        loose = _words(server, shape, strict=False)
        assert _calls(loose) == [("calc", {"n": 1})]
        assert [c for c in _codes(loose) if c.startswith("recovered-")]


# ------------------------------------------------------------------------ transports alike


def test_a_cut_stream_is_an_error_through_ollama_as_through_openai(
    server: FakeOpenAIServer,
) -> None:
    server.add_ollama([{"content": "Hel"}], complete=False)
    with pytest.raises(BackendError, match="ended before"):
        _run(OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory()), Request(USER))


def test_a_nameless_call_is_dropped_alike_and_the_turn_does_not_end_in_calls(
    server: FakeOpenAIServer,
) -> None:
    server.add_stream(
        [{"tool_calls": [{"index": 0, "id": "c", "function": {"name": "", "arguments": "{}"}}]}],
        finish_reason="tool_calls",
    )
    server.add_ollama(
        [{"content": "", "tool_calls": [{"function": {"name": "", "arguments": {}}}]}]
    )
    for backend in (
        OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory()),
        OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory()),
    ):
        events = _run(backend, Request(USER, [CALC]))
        assert _calls(events) == []
        assert "call-not-read" in _codes(events)
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"


def test_tool_choice_none_offers_no_tools_through_every_transport(
    server: FakeOpenAIServer,
) -> None:
    server.add_stream(text_deltas("hi"))
    server.add_ollama([{"content": "hi"}])
    llama = ScriptedLlama(HERMES, "hi")
    request = Request(USER, [CALC], tool_choice="none")
    for backend in (
        OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory()),
        OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory()),
        LlamaCppBackend("x", llama=llama, memory=ModelMemory()),
    ):
        _run(backend, request)
    assert all("tools" not in body for body in server.requests)
    assert "calc" not in llama.prompts[0]


def test_a_named_tool_choice_offers_that_tool_alone(server: FakeOpenAIServer) -> None:
    other = {"type": "function", "function": {"name": "other", "parameters": {}}}
    server.add_ollama([{"content": "hi"}])
    choice = {"type": "function", "function": {"name": "calc"}}
    backend = OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory())
    _run(backend, Request(USER, [other, CALC], tool_choice=choice))
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["calc"]


def test_an_unknown_tool_format_is_refused_by_every_transport(server: FakeOpenAIServer) -> None:
    for backend in (
        OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory()),
        OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory()),
        LlamaCppBackend("x", llama=ScriptedLlama(HERMES, "hi"), memory=ModelMemory()),
    ):
        with pytest.raises(FormatError):
            _run(backend, Request(USER, [CALC], tool_format="bogus"))
    assert server.requests == []


def test_a_named_format_reads_calls_a_native_engine_left_in_its_text(
    server: FakeOpenAIServer,
) -> None:
    hermes = f"Sure. <tool_call>\n{CALL}\n</tool_call>"
    server.add_stream(text_deltas(hermes, 5))
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = _run(backend, Request(USER, [CALC], tool_format="hermes", strict=True))
    assert _calls(events) == [("calc", {"n": 1})]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sure. "


def test_thinking_left_in_the_text_is_reasoning_and_the_call_after_it_is_read_alike(
    server: FakeOpenAIServer,
) -> None:
    reply = f"<think>\nI should call calc.\n</think>\n\n{CALL}"
    server.add_stream(text_deltas(reply, 6))
    server.add_ollama([{"content": d["content"]} for d in text_deltas(reply, 6)])
    for backend in (
        OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory()),
        OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory()),
        LlamaCppBackend("x", llama=ScriptedLlama(QWEN3, reply), memory=ModelMemory()),
    ):
        events = _run(backend, Request(USER, [CALC]))
        assert _calls(events) == [("calc", {"n": 1})], backend.name
        thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        assert thought.strip() == "I should call calc."
        assert not any(isinstance(e, TextDelta) and e.text.strip() for e in events)


def test_a_closed_tag_from_a_native_engine_is_named_tagged_not_unclosed(
    server: FakeOpenAIServer,
) -> None:
    server.add_stream(text_deltas(f"<tool_call>\n{CALL}\n</tool_call>"))
    events = _run(
        OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory()), Request(USER, [CALC])
    )
    assert _calls(events) == [("calc", {"n": 1})]
    assert "recovered-tagged" in _codes(events) and "recovered-unclosed-tag" not in _codes(events)


def test_reasoning_is_not_held_back_while_text_may_still_be_a_call() -> None:
    asked: list[int] = []
    seen_before_more: list[bool] = []
    outputs: list[Any] = []

    async def raw() -> AsyncIterator[Any]:
        asked.append(1)
        yield ReasoningDelta("thinking")
        seen_before_more.append(any(isinstance(e, ReasoningDelta) for e in outputs))
        yield TextDelta('{"name": "calc", "arg')
        yield ReasoningDelta(" more")
        seen_before_more.append(sum(isinstance(e, ReasoningDelta) for e in outputs) == 2)
        yield TextDelta('uments": {"n": 1}}')
        yield Done("stop")

    async def collect() -> None:
        async for event in read(raw(), Plan("native"), Request(USER, [CALC])):
            outputs.append(event)

    import asyncio

    asyncio.run(collect())
    assert seen_before_more == [True, True]
    assert _calls(outputs) == [("calc", {"n": 1})]


def test_a_refusal_after_the_model_wrote_is_not_healed(server: FakeOpenAIServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": '{"na'}, "finish_reason": None}]}
    server.add_raw([json.dumps(chunk), json.dumps({"error": "m does not support tools"})])
    memory = ModelMemory()
    backend = OpenAIBackend("m", base_url=server.base_url, memory=memory)
    with pytest.raises(BackendError, match="does not support tools"):
        _run(backend, Request(USER, [CALC]))
    assert len(server.requests) == 1 and not memory.recall(backend.endpoint, "m").words

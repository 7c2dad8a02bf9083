"""A turn that offered no tools: a reply written as a call stays text, and says so.

The loop's last turn, the retry after a repeated call and a gateway request without tools
(or with ``tool_choice: none``) offer the model no tools, and the default local model still
answers some of them with a call, in JSON. Nothing there is a call and nothing runs; a reply
that is, as a whole, a call in one of drift recovery's shapes gets a ``call-without-tools``
notice at its end, through every transport and the gateway, ``strict`` or not. Prose that
only mentions JSON gets none.
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
    Conversation,
    Done,
    LlamaCppBackend,
    Notice,
    OllamaBackend,
    OpenAIBackend,
    Request,
    TextDelta,
    Toolbox,
    ToolRun,
    run_loop_sync,
    stream_sync,
)
from toolwire import events as ev
from toolwire.errors import BackendError
from toolwire.formats.recovery import written_calls
from toolwire.pipeline import ModelMemory, Plan, read
from toolwire.server import create_app
from toolwire.testing import (
    FakeOpenAIServer,
    ScriptedLlama,
    ServedApp,
    text_deltas,
    tool_call_deltas,
)

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
HERMES_TEMPLATE = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()

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
USER = [{"role": "user", "content": "Remind me to buy milk."}]
MILK = json.dumps({"name": "buy_milk", "arguments": {"litres": 2}})
OTHER = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})

#: Whole replies that are a call, in each shape drift recovery reads, and the shape named.
CALLS = {
    "bare": (MILK, "bare-json"),
    "parameters-key": (
        json.dumps({"type": "function", "name": "buy_milk", "parameters": {}}),
        "bare-json",
    ),
    "fenced": (f"```json\n{MILK}\n```", "fenced-json"),
    "plain-fence": (f"```\n{MILK}\n```\n", "fenced-json"),
    "doubled-braces": ("{" + MILK + "}", "doubled-braces"),
    "fenced-doubled": ("```json\n{" + MILK + "}\n```", "doubled-braces"),
    "list": (f"[{MILK}, {OTHER}]", "bare-json"),
    "json-lines": (f"{MILK}\n{OTHER}", "json-lines"),
    "tagged": (f"<tool_call>\n{MILK}\n</tool_call>", "tagged"),
    "unclosed-tag": (f"<tool_call>\n{MILK}", "unclosed-tag"),
    "padded": (f"\n  {MILK}  \n", "bare-json"),
}

#: Replies that are not a call as a whole: never a notice.
PROSE = {
    "plain": "You should buy two litres of milk.",
    "prose-then-json": f"Here is how the call would look: {MILK}",
    "json-then-prose": f"{MILK}\nThat is the call I would make, but I have no tools.",
    "fence-then-prose": f"```json\n{MILK}\n```\nThat is what it would look like.",
    "python-fence": f"```python\n{MILK}\n```",
    "other-object": json.dumps({"name": "Alice", "age": 31}),
    "arguments-not-object": json.dumps({"name": "buy_milk", "arguments": "two litres"}),
    "extra-key": json.dumps({"name": "buy_milk", "arguments": {}, "why": "asked"}),
    "empty-name": json.dumps({"name": "", "arguments": {}}),
    "list-of-numbers": "[1, 2, 3]",
    "list-with-prose-item": json.dumps([json.loads(MILK), "and then"]),
    "empty-list": "[]",
    "braces-in-prose": "{this is not JSON} but it opens like it",
    "empty": "",
}


def _openai(server: FakeOpenAIServer, reply: str) -> Any:
    server.add_stream(text_deltas(reply, 4))
    return OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())


def _ollama(server: FakeOpenAIServer, reply: str) -> Any:
    server.add_ollama([{"content": d["content"]} for d in text_deltas(reply, 4)])
    return OllamaBackend("m", base_url=server.ollama_url, memory=ModelMemory())


def _local(server: FakeOpenAIServer, reply: str) -> Any:
    del server
    llama = ScriptedLlama(HERMES_TEMPLATE, reply)
    return LlamaCppBackend("scripted", llama=llama, memory=ModelMemory())


TRANSPORTS = {"openai": _openai, "ollama": _ollama, "local": _local}


@pytest.fixture()
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as s:
        yield s


def _run(backend: Any, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


def _codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


def _text(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("case", sorted(CALLS))
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_call_written_without_tools_stays_text_with_a_notice(
    server: FakeOpenAIServer, transport: str, case: str
) -> None:
    reply, shape = CALLS[case]
    events = _run(TRANSPORTS[transport](server, reply), Request(USER))
    assert _text(events) == reply  # the reply as the model wrote it
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert _codes(events) == ["call-without-tools"]
    notice, done = events[-2:]  # at the end, after all the text
    assert isinstance(notice, Notice) and isinstance(done, Done)
    assert "buy_milk" in notice.message and f"written as {shape}" in notice.message
    assert "nothing was run" in notice.message
    assert done.finish_reason == "stop"


@pytest.mark.parametrize("case", sorted(PROSE))
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_prose_that_mentions_json_gets_no_notice(
    server: FakeOpenAIServer, transport: str, case: str
) -> None:
    reply = PROSE[case]
    events = _run(TRANSPORTS[transport](server, reply), Request(USER))
    assert _text(events) == reply and _codes(events) == []


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_tool_choice_none_offers_no_tools_and_names_a_call_to_a_declared_one(
    server: FakeOpenAIServer, transport: str
) -> None:
    events = _run(
        TRANSPORTS[transport](server, OTHER), Request(USER, [WEATHER], tool_choice="none")
    )
    assert _text(events) == OTHER  # never recovered: the turn offered no tools
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert _codes(events) == ["call-without-tools"]
    assert events[-1].finish_reason == "stop"


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_strict_keeps_the_text_and_still_names_it(server: FakeOpenAIServer, transport: str) -> None:
    # a notice is no recovery: strict changes nothing here
    events = _run(TRANSPORTS[transport](server, MILK), Request(USER, strict=True))
    assert _text(events) == MILK and _codes(events) == ["call-without-tools"]


def test_a_native_call_on_a_turn_with_tool_choice_none_is_not_passed_on(
    server: FakeOpenAIServer,
) -> None:
    # the engine was sent no tools, yet answers with one of the request's: never a call
    deltas = tool_call_deltas([("c1", "get_weather", '{"city": "Paris"}')])
    server.add_stream(deltas, finish_reason="tool_calls")
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = _run(backend, Request(USER, [WEATHER], tool_choice="none"))
    assert "tools" not in server.requests[0]
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert _codes(events) == ["undeclared-tool"] and events[-1].finish_reason == "stop"
    server.add_stream(deltas, finish_reason="tool_calls")
    with pytest.raises(BackendError) as raised:
        _run(backend, Request(USER, [WEATHER], tool_choice="none", strict=True))
    assert raised.value.kind == "undeclared-tool"


def test_calls_cut_at_the_token_limit_are_named(server: FakeOpenAIServer) -> None:
    reply = MILK + "\n" + MILK[:20]
    server.add_stream(text_deltas(reply, 4), finish_reason="length")
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = _run(backend, Request(USER))
    assert _text(events) == reply and _codes(events) == ["call-without-tools"]
    assert "json-lines-cut" in events[-2].message
    server.add_stream(text_deltas(reply, 4))  # not cut: not nothing but calls
    assert _codes(_run(backend, Request(USER))) == []


async def _aiter(items: list[ev.Event], pulled: list[int]) -> AsyncIterator[ev.Event]:
    for item in items:
        pulled.append(1)
        yield item


@pytest.mark.parametrize("reply", [MILK, "Buy two litres of milk."])
def test_the_text_streams_as_it_comes_and_the_notice_comes_last(reply: str) -> None:
    # whether or not the reply turns out to be a call, nothing is held back
    import asyncio

    raw: list[ev.Event] = [ev.TextDelta(reply[i : i + 5]) for i in range(0, len(reply), 5)]
    raw.append(ev.Done("stop"))
    pulled: list[int] = []

    async def go() -> list[tuple[int, ev.Event]]:
        seen = []
        async for event in read(_aiter(raw, pulled), Plan("plain"), Request(USER)):
            seen.append((len(pulled), event))
        return seen

    seen = asyncio.run(go())
    texts = [(n, e) for n, e in seen if isinstance(e, TextDelta)]
    assert [n for n, _ in texts] == list(range(1, len(raw)))  # each as soon as it came
    assert "".join(e.text for _, e in texts) == reply
    notices = [e for _, e in seen if isinstance(e, Notice)]
    assert [e.code for e in notices] == (["call-without-tools"] if reply == MILK else [])
    assert isinstance(seen[-1][1], Done)


def test_a_reply_past_the_bound_is_not_read() -> None:
    # the recovery's own bound: a reply this long is never one call, and is never decoded
    huge = '{"name": "buy_milk", "arguments": {"note": "' + "x" * 300_000 + '"}}'
    assert written_calls(huge) is None
    assert written_calls(MILK) == (["buy_milk"], "bare-json")


def test_the_loops_last_turn_names_a_call_written_as_its_answer() -> None:
    box = Toolbox()
    ran: list[str] = []

    @box.tool(read_only=True)
    def get_weather(city: str) -> str:
        """The weather.

        Args:
            city: The city.
        """
        ran.append(city)
        return "sunny"

    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    lyon = '{"name": "get_weather", "arguments": {"city": "Lyon"}}'
    llama = ScriptedLlama(HERMES_TEMPLATE, call, lyon)
    backend = LlamaCppBackend("scripted", llama=llama, memory=ModelMemory())
    conversation = Conversation(settings={"max_tool_iters": 1})
    conversation.add_user("Weather in Paris, then Lyon?")
    events = list(run_loop_sync(backend, conversation, box))
    assert ran == ["Paris"]  # the last turn's call never runs
    assert [e.call.name for e in events if isinstance(e, ToolRun)] == ["get_weather"]
    assert "<tools>" in llama.prompts[0] and "<tools>" not in llama.prompts[1]
    assert _codes(events) == ["call-without-tools"]
    assert conversation.messages[-1] == {"role": "assistant", "content": lyon}


def test_the_retry_after_a_repeat_names_a_call_written_again(server: FakeOpenAIServer) -> None:
    args = '{"city": "Paris"}'
    messages = [
        *USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    server.add_stream(tool_call_deltas([("c2", "get_weather", args)]), finish_reason="tool_calls")
    server.add_stream(text_deltas(f"```json\n{OTHER}\n```"))  # asked to answer: the call again
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    events = _run(backend, Request(messages, [WEATHER]))
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]
    assert _codes(events) == ["repeated-call", "call-without-tools"]
    assert _text(events) == f"```json\n{OTHER}\n```" and events[-1].finish_reason == "stop"


def _chunks(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=10
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[6:]) for line in lines[:-1]]


ANTHROPIC_WEATHER = {
    "name": "get_weather",
    "description": "Get the weather for a city.",
    "input_schema": WEATHER["function"]["parameters"],  # type: ignore[index]
}


@pytest.mark.parametrize("choice_none", [False, True], ids=["no-tools", "choice-none"])
def test_the_gateway_returns_the_text_with_the_notice(
    server: FakeOpenAIServer, choice_none: bool
) -> None:
    backend = OpenAIBackend("up", base_url=server.base_url, memory=ModelMemory())
    body: dict[str, Any] = {"model": "gw", "messages": USER}
    anthropic: dict[str, Any] = {**body, "max_tokens": 64}
    if choice_none:
        body |= {"tools": [WEATHER], "tool_choice": "none"}
        anthropic |= {"tools": [ANTHROPIC_WEATHER], "tool_choice": {"type": "none"}}
    with ServedApp(create_app(backend, model_name="gw")) as gateway:
        server.add_stream(text_deltas(MILK, 4))
        reply = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10).json()
        server.add_stream(text_deltas(MILK, 4))
        chunks = _chunks(gateway.url, body)
        server.add_stream(text_deltas(MILK, 4))
        messages = httpx.post(gateway.url + "/v1/messages", json=anthropic, timeout=10).json()
        server.add_stream(text_deltas("Two litres of milk, noted.", 4))
        plain = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10).json()
    assert all("tools" not in sent for sent in server.requests)
    (choice,) = reply["choices"]
    assert choice["message"]["content"] == MILK and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    (notice,) = reply["toolwire"]["notices"]
    assert notice["code"] == "call-without-tools" and "buy_milk" in notice["message"]
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )
    assert streamed == MILK
    assert not [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert [n["code"] for n in chunks[-1]["toolwire"]["notices"]] == ["call-without-tools"]
    assert [b["type"] for b in messages["content"]] == ["text"]
    assert messages["stop_reason"] == "end_turn"
    assert [n["code"] for n in messages["toolwire"]["notices"]] == ["call-without-tools"]
    assert plain["toolwire"]["notices"] == []

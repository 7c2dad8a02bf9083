"""Repeated calls, caught once in the reply pipeline: the same through the local model, an
OpenAI-compatible server, the tool loop and the gateway; ``strict`` keeps the old way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire import Conversation, Toolbox, run_loop_sync
from toolwire.backends import OpenAIBackend
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.events import CallEnd, Done, Notice, TextDelta, ToolRun
from toolwire.pipeline import ModelMemory, Request, stream_sync
from toolwire.pipeline.repeats import ANSWER_NOW
from toolwire.server.app import create_app
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
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
ANSWER = "It is sunny in Paris for the next 3 days."


def hermes(arguments: str) -> str:
    return f'<tool_call>\n{{"name": "get_weather", "arguments": {arguments}}}\n</tool_call>'


#: the model's call after the result: the same call, "3" where the schema wants an integer
REPEAT = hermes('{"city": "Paris", "days": "3"}')
TWICE = hermes('{"city": "Paris", "days": 3}') + "\n" + hermes('{"days": 3, "city": "Paris"}')
#: what follows when a model does not stop: never to be read
TAIL = "\n" + "x" * 200_000


def answered(**options: Any) -> Request:
    """A conversation whose last messages are get_weather(Paris, 3) and its result."""
    messages = [
        {"role": "user", "content": "Weather in Paris for 3 days?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris", "days": 3}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "sunny"}'},
    ]
    return Request(messages, [WEATHER], **options)


def asked(**options: Any) -> Request:
    return Request([{"role": "user", "content": "Weather in Paris?"}], [WEATHER], **options)


def local(*replies: str) -> tuple[ScriptedLlama, LlamaCppBackend]:
    llama = ScriptedLlama(HERMES_TEMPLATE, *replies)
    return llama, LlamaCppBackend("scripted", llama=llama, memory=ModelMemory())


def run(backend: Any, request: Request) -> list[Any]:
    return list(stream_sync(backend.stream(request)))


def calls(events: list[Any]) -> list[Any]:
    return [e.call for e in events if isinstance(e, CallEnd)]


def codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


def text(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def finish(events: list[Any]) -> str:
    assert isinstance(events[-1], Done)
    return str(events[-1].finish_reason)


def test_the_call_just_answered_written_again_asks_for_an_answer_without_tools() -> None:
    llama, backend = local(REPEAT, ANSWER)
    events = run(backend, answered())
    assert calls(events) == [] and text(events) == ANSWER
    assert codes(events) == ["repeated-call"] and finish(events) == "stop"
    (notice,) = [e for e in events if isinstance(e, Notice)]
    assert "get_weather" in notice.message
    assert len(llama.prompts) == 2
    assert "<tools>" in llama.prompts[0] and "<tools>" not in llama.prompts[1]
    assert ANSWER_NOW in llama.prompts[1]  # asked to answer, for this retry only


def test_an_answer_that_is_the_call_again_as_text_is_named() -> None:
    _, backend = local(REPEAT, REPEAT)
    events = run(backend, answered())
    assert calls(events) == [] and text(events) == REPEAT
    # the repeat, then the retry's answer: the call again as text, on a turn without tools
    assert codes(events) == ["repeated-call", "call-without-tools"] and finish(events) == "stop"


def test_a_call_repeated_in_one_reply_is_one_call_and_generation_stops() -> None:
    llama, backend = local(TWICE + TAIL)
    events = run(backend, asked())
    (call,) = calls(events)
    assert call.name == "get_weather"
    assert codes(events) == ["repeated-call"] and finish(events) == "tool_calls"
    assert llama.taken[0] < len(TWICE + TAIL) // 2  # closed early: the tail was never read
    assert "x" not in text(events)


def test_text_already_said_stands_and_the_repeat_is_dropped_without_asking_again() -> None:
    llama, backend = local("Checking again.\n" + REPEAT, ANSWER)
    events = run(backend, answered())
    assert calls(events) == [] and text(events).strip() == "Checking again."
    assert codes(events) == ["repeated-call"] and finish(events) == "stop"
    assert len(llama.prompts) == 1


def test_another_call_after_a_result_is_returned() -> None:
    _, backend = local(hermes('{"city": "Lyon", "days": 3}'))
    events = run(backend, answered())
    assert [c.arguments for c in calls(events)] == [{"city": "Lyon", "days": 3}]
    assert codes(events) == [] and finish(events) == "tool_calls"


#: the default model after a result: the call again, bare, then the result it was given echoed
ECHOED = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n{"forecast": "sunny"}'
#: the 1.5B model after a result: the call again in its template's doubled braces
DOUBLED = '{{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}'


@pytest.mark.parametrize(
    "reply",
    [
        ECHOED,
        DOUBLED,
        "```json\n" + DOUBLED + "\n```",
        "```json\n" + ECHOED + "\n```",
        DOUBLED + "\nThe weather is sunny.",
    ],
    ids=["echoed", "doubled", "fenced-doubled", "fenced-echoed", "doubled-goes-on"],
)
def test_the_answered_call_in_any_drift_shape_asks_for_an_answer(reply: str) -> None:
    llama, backend = local(reply, ANSWER)
    events = run(backend, answered())
    assert calls(events) == [] and text(events) == ANSWER
    assert "repeated-call" in codes(events) and finish(events) == "stop"
    assert len(llama.prompts) == 2 and ANSWER_NOW in llama.prompts[1]


def test_a_drifted_call_repeated_as_json_lines_is_one_call_and_named() -> None:
    line = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    _, backend = local("\n".join([line, line.replace("3}", '"3"}'), line]))
    events = run(backend, asked())
    (call,) = calls(events)
    assert call.arguments == {"city": "Paris", "days": 3}
    assert codes(events) == ["recovered-json-lines", "repeated-call"]
    assert finish(events) == "tool_calls"
    assert events[-1].usage is not None  # the reply was over: read to its end, usage kept
    assert sum(isinstance(e, Done) for e in events) == 1


def test_a_reply_opening_with_another_call_that_runs_on_stays_text() -> None:
    other = ECHOED.replace("Paris", "Lyon")
    llama, backend = local(other, ANSWER)
    events = run(backend, answered())
    assert calls(events) == [] and text(events) == other
    assert codes(events) == ["call-not-read"] and len(llama.prompts) == 1


def test_doubled_braces_are_recovered_as_a_named_repair_on_a_first_turn() -> None:
    _, backend = local("```json\n" + DOUBLED + "\n```")
    events = run(backend, asked())
    assert [c.arguments for c in calls(events)] == [{"city": "Paris", "days": 3}]
    assert codes(events) == ["recovered-doubled-braces"] and finish(events) == "tool_calls"
    _, backend = local(DOUBLED)
    assert calls(run(backend, asked(strict=True))) == []  # strict: no repair


@pytest.mark.parametrize("case", ["answered", "twice"])
def test_strict_returns_repeats_as_before(case: str) -> None:
    if case == "answered":
        llama, backend = local(REPEAT, ANSWER)
        events = run(backend, answered(strict=True))
        assert len(calls(events)) == 1 and len(llama.prompts) == 1
    else:
        llama, backend = local(TWICE)
        events = run(backend, asked(strict=True))
        assert len(calls(events)) == 2
    assert "repeated-call" not in codes(events) and finish(events) == "tool_calls"


@pytest.fixture()
def server() -> Any:
    with FakeOpenAIServer() as s:
        yield s


def test_an_openai_engine_gets_the_same_decisions(server: FakeOpenAIServer) -> None:
    backend = OpenAIBackend("m", base_url=server.base_url, memory=ModelMemory())
    server.add_stream(
        tool_call_deltas([("call_9", "get_weather", '{"city": "Paris", "days": 3}')]),
        finish_reason="tool_calls",
    )
    server.add_stream(text_deltas(ANSWER))
    events = run(backend, answered())
    assert calls(events) == [] and text(events) == ANSWER
    assert codes(events) == ["repeated-call"]
    assert "tools" in server.requests[0] and "tools" not in server.requests[1]

    args = '{"city": "Paris", "days": 3}'
    server.add_stream(
        tool_call_deltas([("call_a", "get_weather", args), ("call_b", "get_weather", args)]),
        finish_reason="tool_calls",
    )
    events = run(backend, asked())
    assert [c.id for c in calls(events)] == ["call_a"]
    assert codes(events) == ["repeated-call"] and finish(events) == "tool_calls"


def weather_box() -> tuple[Toolbox, list[dict[str, Any]]]:
    box = Toolbox()
    ran: list[dict[str, Any]] = []

    @box.tool(read_only=True)
    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        """The forecast for a city.

        Args:
            city: The city's name.
            days: How many days ahead.
        """
        ran.append({"city": city, "days": days})
        return {"city": city, "forecast": "sunny", "days": days}

    return box, ran


@pytest.mark.parametrize("strict", [False, True])
def test_the_loop_runs_the_call_once_and_ends_with_an_answer(strict: bool) -> None:
    box, ran = weather_box()
    call = hermes('{"city": "Paris", "days": 3}')
    _, backend = local(call, call, ANSWER)
    conversation = Conversation(settings={"max_tool_iters": 4, "strict": strict})
    conversation.add_user("Weather in Paris for 3 days?")
    events = list(run_loop_sync(backend, conversation, box))
    runs = [e for e in events if isinstance(e, ToolRun)]
    if strict:  # as before: the repeat runs, and the next reply is the answer
        assert len(runs) == 2 and "repeated-call" not in codes(events)
    else:
        assert len(runs) == 1 and ran == [{"city": "Paris", "days": 3}]
        assert codes(events) == ["repeated-call"]
    assert text(events).endswith(ANSWER)
    assert conversation.messages[-1] == {"role": "assistant", "content": ANSWER}


def test_the_gateway_answers_instead_of_repeating_the_call() -> None:
    _, backend = local(REPEAT, ANSWER)
    body = {"model": "toolwire", "messages": list(answered().messages), "tools": [WEATHER]}
    with ServedApp(create_app(backend)) as served:
        url = served.url + "/v1/chat/completions"
        reply = httpx.post(url, json=body, timeout=30).json()
        _, again = local(TWICE + TAIL)
        with ServedApp(create_app(again)) as second:
            streamed = httpx.post(
                second.url + "/v1/chat/completions",
                json={**body, "messages": body["messages"][:1], "stream": True},
                timeout=30,
            ).text
    choice = reply["choices"][0]
    assert choice["message"]["content"] == ANSWER and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert [n["code"] for n in reply["toolwire"]["notices"]] == ["repeated-call"]
    chunks = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")]
    sent = [
        c for chunk in chunks for ch in chunk["choices"] for c in ch["delta"].get("tool_calls", [])
    ]
    # one call (its first chunk names it, its arguments stream after), the repeat never
    assert {c["index"] for c in sent} == {0} and sent[0]["function"]["name"] == "get_weather"
    assert [c["function"]["name"] for c in sent if c["function"].get("name")] == ["get_weather"]
    assert [n["code"] for n in chunks[-1]["toolwire"]["notices"]] == ["repeated-call"]

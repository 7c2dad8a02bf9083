"""The gateway's four APIs — Chat Completions, Responses, Anthropic Messages, Gemini — tested
with the official ``openai``, ``anthropic`` and ``google-genai`` clients over real HTTP,
against a fake upstream speaking real HTTP on 127.0.0.1: the same upstream reply gives the
same calls in each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
CHAT_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather.", "parameters": SCHEMA},
}
RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": SCHEMA,
}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather.", "input_schema": SCHEMA}

ROME = {"name": "get_weather", "arguments": {"city": "Rome", "days": "2"}}
#: What an upstream may send for one call: left in the text three ways, or native.
REPLIES: dict[str, list[dict[str, Any]]] = {
    "bare JSON": text_deltas(json.dumps(ROME), size=4),
    "fenced JSON": text_deltas("```json\n" + json.dumps(ROME, indent=2) + "\n```", size=5),
    "Hermes tags": text_deltas("<tool_call>\n" + json.dumps(ROME) + "\n</tool_call>", size=3),
    "native": tool_call_deltas([("call_r1", "get_weather", '{"city": "Rome", "days": "2"}')]),
}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def _anthropic(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)


def calls_via_chat(url: str, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    client = _openai(url)
    ask: dict[str, Any] = {
        "model": "gw",
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [CHAT_TOOL],
    }
    if not stream:
        message = client.chat.completions.create(**ask).choices[0].message
        return [
            (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []
        ]
    calls: dict[int, list[str]] = {}
    for chunk in client.chat.completions.create(**ask, stream=True):
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(tc.index, ["", ""])
            slot[0] += tc.function.name or "" if tc.function else ""
            slot[1] += tc.function.arguments or "" if tc.function else ""
    return [(n, json.loads(a)) for n, a in calls.values()]


def calls_via_responses(url: str, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    client = _openai(url)
    ask: dict[str, Any] = {"model": "gw", "input": "Weather in Rome?", "tools": [RESPONSES_TOOL]}
    if stream:
        with client.responses.stream(**ask) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**ask)
    return [(o.name, json.loads(o.arguments)) for o in response.output if o.type == "function_call"]


def calls_via_messages(url: str, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    client = _anthropic(url)
    ask: dict[str, Any] = {
        "model": "gw",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [ANTHROPIC_TOOL],
    }
    if stream:
        with client.messages.stream(**ask) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**ask)
    assert message.stop_reason == "tool_use"
    return [(b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]


def calls_via_gemini(url: str, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    client = genai.Client(api_key="unused", http_options=genai_types.HttpOptions(base_url=url))
    tool = genai_types.Tool(
        function_declarations=[
            genai_types.FunctionDeclaration(
                name="get_weather", description="Weather.", parameters_json_schema=SCHEMA
            )
        ]
    )
    config = genai_types.GenerateContentConfig(
        tools=[tool],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
    )
    ask: dict[str, Any] = {"model": "gw", "contents": "Weather in Rome?", "config": config}
    if stream:
        calls = [
            c
            for chunk in client.models.generate_content_stream(**ask)
            for c in chunk.function_calls or []
        ]
    else:
        calls = client.models.generate_content(**ask).function_calls or []
    return [(c.name or "", dict(c.args or {})) for c in calls]


VIA = {
    "chat": calls_via_chat,
    "responses": calls_via_responses,
    "messages": calls_via_messages,
    "gemini": calls_via_gemini,
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", list(REPLIES))
def test_the_same_upstream_reply_gives_the_same_call_through_each_api(
    upstream: FakeOpenAIServer, gateway: str, reply: str, stream: bool
) -> None:
    got = {}
    for api, via in VIA.items():
        upstream.add_stream(
            REPLIES[reply], finish_reason="tool_calls" if reply == "native" else "stop"
        )
        got[api] = via(gateway, stream)
    # typed by the schema ("2" for an integer is 2), in every API alike
    assert got["chat"] == [("get_weather", {"city": "Rome", "days": 2})]
    assert got["responses"] == got["chat"] and got["messages"] == got["chat"]
    assert got["gemini"] == got["chat"]


def test_responses_round_trip_with_the_official_client(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    client = _openai(gateway)
    for stream in (False, True):
        upstream.add_stream(REPLIES["bare JSON"])
        upstream.add_stream(text_deltas("It is sunny in Rome, 24 degrees."))
        ask: dict[str, Any] = {
            "model": "gw",
            "instructions": "Be brief.",
            "input": [{"role": "user", "content": "Weather in Rome?"}],
            "tools": [RESPONSES_TOOL],
        }
        if stream:
            with client.responses.stream(**ask) as events:
                first = events.get_final_response()
        else:
            first = client.responses.create(**ask)
        (call,) = [o for o in first.output if o.type == "function_call"]
        assert first.status == "completed" and call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": "Rome", "days": 2}
        items = [
            *ask["input"],
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'},
        ]
        if stream:
            with client.responses.stream(**{**ask, "input": items}) as events:
                second = events.get_final_response()
        else:
            second = client.responses.create(**{**ask, "input": items})
        assert second.output_text == "It is sunny in Rome, 24 degrees."
        assert not [o for o in second.output if o.type == "function_call"]
        sent = upstream.requests[-1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
        assert sent[2]["tool_calls"][0]["id"] == call.call_id == sent[3]["tool_call_id"]
        assert sent[3]["content"] == '{"sky": "sunny"}'


def test_messages_round_trip_with_the_official_client(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    client = _anthropic(gateway)
    for stream in (False, True):
        upstream.add_stream(REPLIES["fenced JSON"])
        upstream.add_stream(text_deltas("Sunny in Rome."))
        ask: dict[str, Any] = {
            "model": "gw",
            "max_tokens": 200,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": "Weather in Rome?"}],
            "tools": [ANTHROPIC_TOOL],
        }

        def ask_for(body: dict[str, Any], stream: bool = stream) -> anthropic.types.Message:
            if stream:
                with client.messages.stream(**body) as events:
                    return events.get_final_message()
            return client.messages.create(**body)

        first = ask_for(ask)
        (use,) = [b for b in first.content if b.type == "tool_use"]
        assert first.stop_reason == "tool_use" and use.input == {"city": "Rome", "days": 2}
        history = [
            *ask["messages"],
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ]
        second = ask_for({**ask, "messages": history})
        assert second.stop_reason == "end_turn"
        assert [b.text for b in second.content if b.type == "text"] == ["Sunny in Rome."]
        sent = upstream.requests[-1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
        assert sent[2]["tool_calls"][0]["id"] == use.id == sent[3]["tool_call_id"]


def test_parallel_calls_and_their_limit_alike_in_each_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    two = tool_call_deltas(
        [
            ("call_a", "get_weather", '{"city": "Oslo"}'),
            ("call_b", "get_weather", '{"city": "Lima"}'),
        ]
    )
    upstream.add_stream(two, finish_reason="tool_calls")
    response = _openai(gateway).responses.create(
        model="gw", input="Oslo and Lima?", tools=[RESPONSES_TOOL], parallel_tool_calls=False
    )
    assert [o.call_id for o in response.output if o.type == "function_call"] == ["call_a"]
    assert "calls-dropped" in json.dumps(response.model_dump())
    upstream.add_stream(two, finish_reason="tool_calls")
    message = _anthropic(gateway).messages.create(
        model="gw",
        max_tokens=50,
        messages=[{"role": "user", "content": "Oslo and Lima?"}],
        tools=[ANTHROPIC_TOOL],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert [b.id for b in message.content if b.type == "tool_use"] == ["call_a"]
    upstream.add_stream(two, finish_reason="tool_calls")
    message = _anthropic(gateway).messages.create(
        model="gw",
        max_tokens=50,
        messages=[{"role": "user", "content": "Oslo and Lima?"}],
        tools=[ANTHROPIC_TOOL],
    )
    assert [b.id for b in message.content if b.type == "tool_use"] == ["call_a", "call_b"]


def test_tool_choice_reaches_the_engine_from_each_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    other = {**ANTHROPIC_TOOL, "name": "get_time"}
    for choice, want in (
        ({"type": "any"}, "required"),
        (
            {"type": "tool", "name": "get_time"},
            {"type": "function", "function": {"name": "get_time"}},
        ),
        ({"type": "none"}, None),
    ):
        upstream.add_stream(text_deltas("Hello."))
        _anthropic(gateway).messages.create(
            model="gw",
            max_tokens=20,
            messages=[{"role": "user", "content": "Hi"}],
            tools=[ANTHROPIC_TOOL, other],
            tool_choice=choice,  # type: ignore[arg-type]
        )
        assert upstream.requests[-1].get("tool_choice") == want
    upstream.add_stream(text_deltas("Hello."))
    _openai(gateway).responses.create(
        model="gw",
        input="Hi",
        tools=[RESPONSES_TOOL, {**RESPONSES_TOOL, "name": "get_time"}],
        tool_choice={"type": "function", "name": "get_time"},
    )
    sent = upstream.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_time"]


def test_strict_and_notices_alike_in_each_api(upstream: FakeOpenAIServer, gateway: str) -> None:
    # strict: a call left in the text stays text, in every API
    for api in ("chat", "responses", "messages"):
        upstream.add_stream(REPLIES["bare JSON"])
        body: dict[str, Any] = {"model": "gw", "toolwire": {"strict": True}}
        if api == "chat":
            body |= {"messages": [{"role": "user", "content": "Rome?"}], "tools": [CHAT_TOOL]}
            r = httpx.post(gateway + "/v1/chat/completions", json=body).json()
            assert r["choices"][0]["message"]["content"] == json.dumps(ROME)
        elif api == "responses":
            body |= {"input": "Rome?", "tools": [RESPONSES_TOOL]}
            r = httpx.post(gateway + "/v1/responses", json=body).json()
            assert [o["type"] for o in r["output"]] == ["message"]
        else:
            body |= {
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "Rome?"}],
                "tools": [ANTHROPIC_TOOL],
            }
            r = httpx.post(gateway + "/v1/messages", json=body).json()
            assert [b["type"] for b in r["content"]] == ["text"] and r["stop_reason"] == "end_turn"
    # not strict: the repair is named the same way in every API's notices
    codes = {}
    for api, path, body in (
        (
            "chat",
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Rome?"}], "tools": [CHAT_TOOL]},
        ),
        ("responses", "/v1/responses", {"input": "Rome?", "tools": [RESPONSES_TOOL]}),
        (
            "messages",
            "/v1/messages",
            {
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "Rome?"}],
                "tools": [ANTHROPIC_TOOL],
            },
        ),
    ):
        upstream.add_stream(REPLIES["bare JSON"])
        r = httpx.post(gateway + path, json={"model": "gw", **body}).json()
        codes[api] = sorted(n["code"] for n in r["toolwire"]["notices"])
    assert codes["chat"] and codes["responses"] == codes["chat"] == codes["messages"]
    assert "arguments-repaired" in codes["chat"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "x", "store": True}, "store"),
        ({"input": 3}, "input"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": "x", "parallel_tool_calls": "no"}, "parallel_tool_calls"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]},
            "input[0].call_id",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "detail": "auto"}]}]},
            "input[0].content[0]",
        ),
        ({"input": "x", "tools": [{"type": "function", "name": ""}]}, "tools[0].name"),
        (
            {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": "x"}]},
            "tools[0].parameters",
        ),
        ({"input": "x", "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "toolwire": {"fast": True}}, "toolwire.fast"),
    ],
)
def test_malformed_responses_requests_name_the_field(
    upstream: FakeOpenAIServer, gateway: str, body: dict[str, Any], field: str
) -> None:
    r = httpx.post(gateway + "/v1/responses", json={"model": "gw", **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].source.type",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}
                ]
            },
            "messages[0].content[0].tool_use_id",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": "x"}],
                    }
                ]
            },
            "messages[0].content[0].input",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]},
            "tools[0].input_schema",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "sometimes"}},
            "tool_choice.type",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "tool"}},
            "tool_choice.name",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "stop_sequences": [5]},
            "stop_sequences[0]",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}, "max_tokens"),
    ],
)
def test_malformed_messages_requests_get_anthropic_errors_naming_the_field(
    upstream: FakeOpenAIServer, gateway: str, body: dict[str, Any], field: str
) -> None:
    r = httpx.post(gateway + "/v1/messages", json={"model": "gw", "max_tokens": 9, **body})
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"]
    assert upstream.requests == []


def test_the_anthropic_client_raises_its_own_errors(gateway: str) -> None:
    with pytest.raises(anthropic.BadRequestError, match="stop_sequences"):
        _anthropic(gateway).messages.create(
            model="gw",
            max_tokens=5,
            stop_sequences=[""],
            messages=[{"role": "user", "content": "x"}],
        )


def test_count_tokens_estimates_for_an_upstream(gateway: str) -> None:
    counted = _anthropic(gateway).messages.count_tokens(
        model="gw", messages=[{"role": "user", "content": "word " * 400}], tools=[ANTHROPIC_TOOL]
    )
    assert 400 <= counted.input_tokens <= 700
    # the upstream has no tokenizer to ask: an estimate, and it says so
    notices = (counted.model_extra or {})["toolwire"]["notices"]
    assert [n["code"] for n in notices] == ["tokens-estimated"]


def test_upstream_failures_in_each_api_shape(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_error(500, "boom")
    r = httpx.post(gateway + "/v1/responses", json={"model": "gw", "input": "x"})
    assert r.status_code == 502 and "error" in r.json()
    upstream.add_error(500, "boom")
    r = httpx.post(
        gateway + "/v1/messages",
        json={"model": "gw", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 502 and r.json()["type"] == "error"
    # streamed, a failure before the reply begins gets its status, in the API's shape
    upstream.add_error(500, "boom")
    r = httpx.post(
        gateway + "/v1/messages",
        json={
            "model": "gw",
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert r.status_code == 502 and r.json()["error"]["type"] == "api_error"
    assert "boom" not in r.text and "127.0.0.1" not in r.text
    upstream.add_error(429, "slow down")
    r = httpx.post(gateway + "/v1/responses", json={"model": "gw", "input": "x", "stream": True})
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error"
    # a failure after it began is the stream's last event, in the API's shape
    half = [json.dumps({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}), "{not json"]
    upstream.add_raw(half)
    body = {"model": "gw", "max_tokens": 5, "stream": True}
    with httpx.stream(
        "POST",
        gateway + "/v1/messages",
        json={**body, "messages": [{"role": "user", "content": "x"}]},
    ) as streamed:
        text = streamed.read().decode()
    assert "event: message_start" in text and "Hel" in text
    assert text.rstrip().splitlines()[-2] == "event: error" and "message_stop" not in text
    upstream.add_raw(half)
    with httpx.stream(
        "POST", gateway + "/v1/responses", json={"model": "gw", "input": "x", "stream": True}
    ) as streamed:
        text = streamed.read().decode()
    assert "Hel" in text and text.rstrip().splitlines()[-2] == "event: response.failed"


def test_the_key_is_taken_as_bearer_or_x_api_key(upstream: FakeOpenAIServer) -> None:
    backend = OpenAIBackend("engine", base_url=upstream.base_url)
    with ServedApp(create_app(backend, api_key="sekret")) as served:
        upstream.add_stream(text_deltas("Hi."))
        message = anthropic.Anthropic(
            base_url=served.url, api_key="sekret", max_retries=0
        ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert message.content[0].type == "text"
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(
                base_url=served.url, api_key="wrong", max_retries=0
            ).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        upstream.add_stream(text_deltas("Hi."))
        assert (
            _openai_keyed(served.url, "sekret").responses.create(model="m", input="x").output_text
            == "Hi."
        )
        with pytest.raises(openai.AuthenticationError):
            _openai_keyed(served.url, "wrong").responses.create(model="m", input="x")


def _openai_keyed(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def test_tools_of_other_kinds_are_left_out_with_a_notice(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Hi."))
    r = httpx.post(
        gateway + "/v1/responses",
        json={"model": "gw", "input": "x", "tools": [{"type": "web_search"}, RESPONSES_TOOL]},
    ).json()
    assert r["output"][0]["content"][0]["text"] == "Hi."
    (told,) = [n for n in r["toolwire"]["notices"] if n["code"] == "tool-not-served"]
    assert "tools[0]" in told["message"] and "web_search" in told["message"]
    upstream.add_stream(text_deltas("Hi."))
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    r = httpx.post(
        gateway + "/v1/messages",
        json={
            "model": "gw",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "x"}],
            "tools": [ANTHROPIC_TOOL, server_tool],
        },
    ).json()
    assert r["content"] == [{"type": "text", "text": "Hi."}]
    assert any(n["code"] == "tool-not-served" for n in r["toolwire"]["notices"])
    sent = [[t["function"]["name"] for t in q["tools"]] for q in upstream.requests]
    assert sent == [["get_weather"], ["get_weather"]]

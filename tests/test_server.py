"""The gateway over real HTTP, in front of the fake upstream (and the real local model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.cli import main
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

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
ASK = {"model": "x", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS}
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "Sunny."}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    # wired as `toolwire serve --upstream` wires it: one pooled client to the upstream
    backend = OpenAIBackend("up-model", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def streamed_calls(gateway: str, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The calls of a streamed reply, accumulated by index as OpenAI clients do."""
    chunks: list[Any] = []
    with httpx.stream(
        "POST", gateway + "/v1/chat/completions", json={**body, "stream": True}, timeout=10
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        if not c["choices"]:  # the last chunk carries only toolwire's notices
            continue
        for tc in c["choices"][0]["delta"].get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.get("id", slot["id"])
            slot["name"] += tc.get("function", {}).get("name", "")
            slot["arguments"] += tc.get("function", {}).get("arguments", "")
    return [(v["id"], v["name"], v["arguments"]) for _, v in sorted(calls.items())]


def test_calls_left_in_content_come_back_as_tool_calls(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(
        text_deltas('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```')
    )
    r = httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10)
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert upstream.requests[0]["tools"][0]["function"]["name"] == "get_weather"


def test_streamed_calls_carry_their_index(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(
        tool_call_deltas(
            [("a", "get_weather", '{"city": "Oslo"}'), ("b", "get_weather", '{"city": "Rome"}')]
        ),
        finish_reason="tool_calls",
    )
    chunks: list[Any] = []
    with httpx.stream(
        "POST", gateway + "/v1/chat/completions", json={**ASK, "stream": True}, timeout=10
    ) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
            if line:
                last = line
    assert last == "data: [DONE]"
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        if not c["choices"]:  # the last chunk carries only toolwire's notices
            continue
        for tc in c["choices"][0]["delta"].get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.get("id", slot["id"])
            slot["name"] += tc.get("function", {}).get("name", "")
            slot["arguments"] += tc.get("function", {}).get("arguments", "")
    assert [(v["id"], v["name"], json.loads(v["arguments"])) for _, v in sorted(calls.items())] == [
        ("a", "get_weather", {"city": "Oslo"}),
        ("b", "get_weather", {"city": "Rome"}),
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and "notices" in chunks[-1]["toolwire"]


@pytest.mark.parametrize(
    ("sent", "given"),
    [
        # read forgivingly and typed by the schema: "3" for an integer is 3
        ("{'city': 'Paris', 'days': '3',}", '{"city": "Paris", "days": 3}'),
        ('{"city": "Paris", "days": 3.0}', '{"city": "Paris", "days": 3}'),
        # readable but not what the schema asks: the value as read, nothing invented
        ('{"days": "3"}', '{"days": "3"}'),
        # a field the schema does not list is dropped (and named), as the loop drops it
        ('{"city": "Paris", "town": "x"}', '{"city": "Paris"}'),
        ("", "{}"),
    ],
)
def test_arguments_are_repaired_alike_streamed_or_not(
    upstream: FakeOpenAIServer, gateway: str, sent: str, given: str
) -> None:
    for _ in range(2):
        upstream.add_stream(
            tool_call_deltas([("a", "get_weather", sent)]), finish_reason="tool_calls"
        )
    r = httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10)
    (call,) = r.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == given
    assert streamed_calls(gateway, ASK) == [("a", "get_weather", given)]


@pytest.mark.parametrize("sent", ['["Paris"]', "city=Paris"])
def test_arguments_that_are_no_object_are_never_a_call(
    upstream: FakeOpenAIServer, gateway: str, sent: str
) -> None:
    """Never an empty object a client would run: the model's own text, as text."""
    for _ in range(2):
        upstream.add_stream(
            tool_call_deltas([("a", "get_weather", sent)]), finish_reason="tool_calls"
        )
    reply = httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10).json()
    message = reply["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"] == sent
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert "call-not-read" in [n["code"] for n in reply["toolwire"]["notices"]]
    assert streamed_calls(gateway, ASK) == []


def test_the_connection_to_the_upstream_is_reused(upstream: FakeOpenAIServer, gateway: str) -> None:
    for _ in range(3):
        upstream.add_stream(
            tool_call_deltas([("a", "get_weather", '{"city": "Oslo"}')]),
            finish_reason="tool_calls",
        )
    httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10)
    streamed_calls(gateway, ASK)
    httpx.post(gateway + "/v1/chat/completions", json=ASK, timeout=10)
    assert len(upstream.peers) == 3 and len(set(upstream.peers)) == 1


def test_tool_choice_none_sends_no_tools_and_parallel_false_keeps_one(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Hi."))
    r = httpx.post(
        gateway + "/v1/chat/completions", json={**ASK, "tool_choice": "none"}, timeout=10
    )
    assert r.json()["choices"][0]["message"]["content"] == "Hi."
    assert "tools" not in upstream.requests[0]
    upstream.add_stream(
        tool_call_deltas(
            [("a", "get_weather", '{"city": "A"}'), ("b", "get_weather", '{"city": "B"}')]
        ),
        finish_reason="tool_calls",
    )
    r = httpx.post(
        gateway + "/v1/chat/completions", json={**ASK, "parallel_tool_calls": False}, timeout=10
    )
    assert len(r.json()["choices"][0]["message"]["tool_calls"]) == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[]", None),
        (b'{"messages": []}', "messages"),
        # a tool message must answer a call an earlier assistant message made, by its id
        (
            json.dumps({**ASK, "messages": [*ASK["messages"], RESULT]}).encode(),
            "messages[1].tool_call_id",
        ),
        (
            json.dumps(
                {**ASK, "messages": [*ASK["messages"], CALLED, {**RESULT, "tool_call_id": "zz"}]}
            ).encode(),
            "messages[2].tool_call_id",
        ),
        (
            json.dumps(
                {**ASK, "messages": [*ASK["messages"], CALLED, {"role": "tool", "content": "x"}]}
            ).encode(),
            "messages[2].tool_call_id",
        ),
        (
            json.dumps(
                {**ASK, "messages": [*ASK["messages"], {**CALLED, "tool_calls": "x"}]}
            ).encode(),
            "messages[1].tool_calls",
        ),
        (json.dumps({**ASK, "tools": [1]}).encode(), "tools[0]"),
        (
            json.dumps(
                {**ASK, "tool_choice": {"type": "function", "function": {"name": "zz"}}}
            ).encode(),
            "tool_choice.function.name",
        ),
    ],
)
def test_malformed_requests_get_a_400_in_openais_shape(
    upstream: FakeOpenAIServer, gateway: str, body: bytes, param: str | None
) -> None:
    r = httpx.post(
        gateway + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param
    assert upstream.requests == []  # refused before any upstream call


def test_a_tool_message_that_echoes_its_call_goes_through(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("It is sunny."))
    body = {**ASK, "messages": [*ASK["messages"], CALLED, RESULT]}
    r = httpx.post(gateway + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "It is sunny."
    sent = upstream.requests[0]["messages"]
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "c1"


def test_limits_auth_models_and_health(upstream: FakeOpenAIServer) -> None:
    app = create_app(
        OpenAIBackend("m", base_url=upstream.base_url), api_key="s3cret", max_body_bytes=1000
    )
    with ServedApp(app) as served:
        assert httpx.get(served.url + "/health").json() == {"status": "ok"}
        assert httpx.get(served.url + "/v1/models").status_code == 401
        ok = httpx.get(served.url + "/v1/models", headers={"authorization": "Bearer s3cret"})
        assert ok.json()["data"][0]["id"] == "toolwire"
        big = {**ASK, "messages": [{"role": "user", "content": "x" * 2000}]}
        r = httpx.post(
            served.url + "/v1/chat/completions",
            json=big,
            headers={"authorization": "Bearer s3cret"},
        )
        assert r.status_code == 413
        assert httpx.post(served.url + "/v1/chat/completions", json=ASK).status_code == 401


def test_an_upstream_failure_is_a_502() -> None:
    app = create_app(OpenAIBackend("m", base_url="http://127.0.0.1:9/v1"))
    with ServedApp(app) as served:
        r = httpx.post(served.url + "/v1/chat/completions", json=ASK, timeout=10)
    assert r.status_code == 502 and "could not be reached" in r.json()["error"]["message"]


def test_serve_needs_a_token_beyond_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["serve", "--host", "0.0.0.0", "--upstream", "http://x/v1", "--upstream-model", "m"])
        == 2
    )
    assert "--api-key" in capsys.readouterr().err


def test_the_local_model_behind_the_gateway(fresh_llama_backend: LlamaCppBackend) -> None:
    with ServedApp(create_app(fresh_llama_backend)) as served:
        r = httpx.post(
            served.url + "/v1/chat/completions",
            json={**ASK, "max_tokens": 48, "temperature": 0},
            timeout=120,
        )
    assert r.status_code == 200
    (choice,) = r.json()["choices"]
    # at temperature 0 the model calls the tool (and picks a number of days on its own: 7
    # without flash attention, 5 with it; the engine's arithmetic, not the pipeline's)
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] is None
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    arguments = json.loads(call["function"]["arguments"])
    assert arguments.keys() == {"city", "days"} and arguments["city"] == "Paris"
    assert type(arguments["days"]) is int and arguments["days"] > 0

"""The gateway's Gemini API, tested with Google's official ``google-genai`` client over real
HTTP, in front of a fake upstream speaking real HTTP on 127.0.0.1: a call the upstream left
in its text reaches the client as a ``functionCall``, whole and streamed, and its
``functionResponse`` goes back to the model as the call's result, matched by id or by
name and order; the request's fields reach the engine, and a malformed one is refused in
Google's error shape, naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.server.gemini_input import json_schema
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas, tool_call_deltas

ROME = {"name": "get_weather", "arguments": {"city": "Rome", "days": "2"}}
HERMES = text_deltas("<tool_call>\n" + json.dumps(ROME) + "\n</tool_call>", size=3)
DECLARATION = types.FunctionDeclaration(
    name="get_weather",
    description="Weather.",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={
            "city": types.Schema(type=types.Type.STRING),
            "days": types.Schema(type=types.Type.INTEGER, nullable=True),
        },
        required=["city"],
    ),
)
MODEL = "gemini-2.5-flash"
USER = [types.Content(role="user", parts=[types.Part(text="Weather in Rome?")])]


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def _client(url: str) -> genai.Client:
    return genai.Client(api_key="unused", http_options=types.HttpOptions(base_url=url))


def _config(**more: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[DECLARATION])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        **more,
    )


def _ask(
    client: genai.Client, contents: Any, config: types.GenerateContentConfig, stream: bool
) -> tuple[list[types.FunctionCall], str, types.Content, list[Any]]:
    """The calls, the text, the model's content (as a client keeps it) and the finish
    reasons of one turn, whole or streamed."""
    if not stream:
        reply = client.models.generate_content(model=MODEL, contents=contents, config=config)
        candidate = reply.candidates[0]  # type: ignore[index]
        assert candidate.content is not None
        return (
            list(reply.function_calls or []),
            reply.text or "",
            candidate.content,
            [candidate.finish_reason],
        )
    chunks = list(
        client.models.generate_content_stream(model=MODEL, contents=contents, config=config)
    )
    calls = [c for chunk in chunks for c in chunk.function_calls or []]
    text = "".join(chunk.text or "" for chunk in chunks)
    parts = [types.Part(function_call=c) for c in calls] or [types.Part(text=text)]
    reasons = [chunk.candidates[0].finish_reason for chunk in chunks if chunk.candidates]
    return calls, text, types.Content(role="model", parts=parts), reasons


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_round_trip_with_the_official_client(
    upstream: FakeOpenAIServer, gateway: str, stream: bool
) -> None:
    client = _client(gateway)
    config = _config(system_instruction="Be brief.", temperature=0.2, top_k=40, seed=7)
    upstream.add_stream(HERMES)
    upstream.add_stream(text_deltas("Sunny in Rome."))
    calls, _, content, reasons = _ask(client, USER, config, stream)
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Rome", "days": 2})]
    assert reasons[-1] == types.FinishReason.STOP and calls[0].id
    # the engine got the sampling fields in its own words
    first = upstream.requests[-1]
    assert (first["temperature"], first["top_k"], first["seed"]) == (0.2, 40, 7)
    assert first["tools"][0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
        "required": ["city"],
    }
    result = types.Part.from_function_response(name="get_weather", response={"output": "sunny"})
    history = [*USER, content, types.Content(role="user", parts=[result])]
    calls, text, _, reasons = _ask(client, history, config, stream)
    assert not calls and text == "Sunny in Rome." and reasons[-1] == types.FinishReason.STOP
    sent = upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"]
    assert sent[3]["content"] == "sunny"


def test_results_without_ids_answer_the_calls_by_name_and_order(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """Two calls of one tool and one of another, made with no ids (as Gemini makes them):
    the results, in another order, each answer the first open call of their name."""
    other = types.FunctionDeclaration(name="get_time", parameters=types.Schema(type="OBJECT"))
    config = _config()
    config.tools = [types.Tool(function_declarations=[DECLARATION, other])]
    call = lambda name, city: types.Part(  # noqa: E731
        function_call=types.FunctionCall(name=name, args={"city": city} if city else {})
    )
    answer = lambda name, out: types.Part.from_function_response(  # noqa: E731
        name=name, response={"output": out}
    )
    history = [
        *USER,
        types.Content(
            role="model",
            parts=[call("get_weather", "Rome"), call("get_time", ""), call("get_weather", "Oslo")],
        ),
        types.Content(
            role="user",
            parts=[
                answer("get_time", "noon"),
                answer("get_weather", "sun"),
                answer("get_weather", "snow"),
            ],
        ),
    ]
    upstream.add_stream(text_deltas("Done."))
    client = _client(gateway)  # (kept: a client let go closes its connections)
    client.models.generate_content(model=MODEL, contents=history, config=config)
    sent = upstream.requests[-1]["messages"]
    ids = {
        json.loads(c["function"]["arguments"]).get("city", "time"): c["id"]
        for c in sent[1]["tool_calls"]
    }
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results == {ids["time"]: "noon", ids["Rome"]: "sun", ids["Oslo"]: "snow"}


def _post(
    url: str, body: dict[str, Any], method: str = "generateContent", **params: str
) -> httpx.Response:
    return httpx.post(f"{url}/v1beta/models/{MODEL}:{method}", json=body, params=params, timeout=30)


CONTENTS = [{"role": "user", "parts": [{"text": "Weather in Rome?"}]}]
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
            }
        ]
    }
]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"contents": []}, "contents"),
        ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts"),
        ({"contents": [{"role": "robot", "parts": [{"text": "hi"}]}]}, "contents[0].role"),
        (
            {"contents": CONTENTS, "generationConfig": {"candidateCount": 2}},
            "generationConfig.candidateCount",
        ),
        ({"contents": CONTENTS, "generationConfig": {"topP": 3}}, "generationConfig.topP"),
        (
            {"contents": CONTENTS, "generationConfig": {"temperature": "hot"}},
            "generationConfig.temperature",
        ),
        (
            {
                "contents": [
                    *CONTENTS,
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "get_weather", "response": {}}}],
                    },
                ],
                "tools": TOOLS,
            },
            "contents[1].parts[0].functionResponse",
        ),
        (
            {
                "contents": CONTENTS,
                "tools": TOOLS,
                "toolConfig": {
                    "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["nope"]}
                },
            },
            "toolConfig.functionCallingConfig.allowedFunctionNames[0]",
        ),
        ({"contents": CONTENTS, "cachedContent": "cachedContents/abc"}, "cachedContent"),
        # a part that holds nothing a model reads, or holds it in the wrong content
        ({"contents": [{"role": "user", "parts": [{"text": 5}]}]}, "contents[0].parts[0].text"),
        ({"contents": [{"role": "user", "parts": [{}]}]}, "contents[0].parts[0]"),
        ({"contents": [{"parts": [{"text": "a", "inlineData": {}}]}]}, "contents[0].parts[0]"),
        ({"contents": [{"parts": [{"text": "t", "thought": True}]}]}, "contents"),
        (
            {"contents": [{"parts": [{"functionCall": {"name": "get_weather"}}]}], "tools": TOOLS},
            "contents[0].parts[0]",
        ),
        (
            {
                "contents": [
                    *CONTENTS,
                    {"role": "model", "parts": [{"functionResponse": {"name": "f"}}]},
                ]
            },
            "contents[1].parts[0]",
        ),
        (
            {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png;x#", "data": "AA"}}]}]},
            "contents[0].parts[0].inlineData.mimeType",
        ),
        # two calls of one id
        (
            {
                "contents": [
                    *CONTENTS,
                    {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}},
                            {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}},
                        ],
                    },
                ],
                "tools": TOOLS,
            },
            "contents[1].parts[1].functionCall.id",
        ),
        # OpenAPI schemas a nullable cannot be added to: refused by the schema check
        (
            {
                "contents": CONTENTS,
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "OBJECT",
                                    "properties": {
                                        "a": {"type": "STRING", "nullable": True, "enum": "abc"}
                                    },
                                },
                            }
                        ]
                    }
                ],
            },
            "tools[0].functionDeclarations[0].parameters",
        ),
        (
            {"contents": CONTENTS, "generationConfig": {"responseSchema": {"type": "OBJECT"}}},
            "generationConfig.responseMimeType",
        ),
        (
            {"contents": CONTENTS, "generationConfig": {"responseMimeType": "text/x.enum"}},
            "generationConfig.responseMimeType",
        ),
        (
            {"contents": CONTENTS, "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
            "toolConfig.functionCallingConfig.mode",
        ),
    ],
)
def test_a_malformed_request_is_a_400_in_google_s_shape_naming_the_field(
    gateway: str, body: dict[str, Any], field: str
) -> None:
    reply = _post(gateway, body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert field in error["message"]


def test_the_official_client_raises_google_s_error(gateway: str) -> None:
    client = _client(gateway)
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(
            model=MODEL, contents="hi", config=types.GenerateContentConfig(candidate_count=3)
        )
    assert raised.value.code == 400 and "candidateCount" in str(raised.value.message)


def test_an_unknown_method_is_a_404(gateway: str) -> None:
    reply = _post(gateway, {"contents": CONTENTS}, method="embedContent")
    assert reply.status_code == 404 and reply.json()["error"]["status"] == "NOT_FOUND"


def test_the_key_is_read_from_google_s_header_and_query(upstream: FakeOpenAIServer) -> None:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, api_key="sesame")) as served:
        denied = _post(served.url, {"contents": CONTENTS})
        assert denied.status_code == 401 and denied.json()["error"]["status"] == "UNAUTHENTICATED"
        upstream.add_stream(text_deltas("one"))
        assert _post(served.url, {"contents": CONTENTS}, key="sesame").status_code == 200
        upstream.add_stream(text_deltas("two"))
        client = genai.Client(api_key="sesame", http_options=types.HttpOptions(base_url=served.url))
        reply = client.models.generate_content(model=MODEL, contents="hi")
        assert reply.text == "two"
        # the query's key is the Gemini API's alone
        listed = httpx.get(f"{served.url}/v1/models", params={"key": "sesame"})
        assert listed.status_code == 401
        one = httpx.get(f"{served.url}/v1/models/toolwire", params={"key": "sesame"})
        assert one.status_code == 401
        # Google's client lists the models on /v1 with it
        google = {"x-goog-api-client": "google-genai-sdk"}
        listed = httpx.get(f"{served.url}/v1/models", params={"key": "sesame"}, headers=google)
        assert listed.status_code == 200 and "models" in listed.json()


def test_without_alt_sse_the_stream_is_one_json_array(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(HERMES)
    reply = _post(gateway, {"contents": CONTENTS, "tools": TOOLS}, method="streamGenerateContent")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    chunks = reply.json()
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert [p["functionCall"]["name"] for p in parts if "functionCall" in p] == ["get_weather"]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "usageMetadata" in chunks[-1] and "toolwire" in chunks[-1]


def test_a_streamed_call_goes_whole_and_text_in_pieces(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    native = tool_call_deltas([("call_7", "get_weather", '{"city": "Rome"}')], size=2)
    upstream.add_stream([*text_deltas("Let me look.", size=2), *native], finish_reason="tool_calls")
    reply = _post(
        gateway, {"contents": CONTENTS, "tools": TOOLS}, method="streamGenerateContent", alt="sse"
    )
    events = [
        json.loads(line[6:]) for line in reply.text.split("\n\n") if line.startswith("data: ")
    ]
    parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    texts = [p["text"] for p in parts if "text" in p]
    assert len(texts) > 1 and "".join(texts) == "Let me look."
    assert [p["functionCall"] for p in parts if "functionCall" in p] == [
        {"id": "call_7", "name": "get_weather", "args": {"city": "Rome"}}
    ]


def test_thoughts_are_shown_when_asked_and_a_zero_budget_turns_thinking_off(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    client = _client(gateway)
    thinking = [{"reasoning_content": "Hmm, Rome."}, *text_deltas("Sunny.")]
    for shown in (True, False):
        upstream.add_stream(thinking)
        config = types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(include_thoughts=shown, thinking_budget=1024)
        )
        reply = client.models.generate_content(model=MODEL, contents="Rome?", config=config)
        parts = reply.candidates[0].content.parts  # type: ignore[index, union-attr]
        assert [(p.text, bool(p.thought)) for p in parts or []] == (
            [("Hmm, Rome.", True), ("Sunny.", False)] if shown else [("Sunny.", False)]
        )
    # the switch reaches an engine that takes one (llama-server: its template's variable)
    backend = OpenAIBackend(
        "engine", base_url=upstream.base_url, client=new_client(), engine="llama-server"
    )
    with ServedApp(create_app(backend)) as served:
        upstream.add_stream(text_deltas("Sunny."))
        budget = types.ThinkingConfig(thinking_budget=0)
        client = _client(served.url)
        config = types.GenerateContentConfig(thinking_config=budget)
        client.models.generate_content(model=MODEL, contents="Rome?", config=config)
    assert upstream.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_tool_config_becomes_the_tool_choice(upstream: FakeOpenAIServer, gateway: str) -> None:
    other = {"name": "get_time", "parameters": {"type": "OBJECT", "properties": {}}}
    tools = [{"functionDeclarations": [*TOOLS[0]["functionDeclarations"], other]}]
    for config, choice, names in (
        ({"mode": "ANY"}, "required", ["get_weather", "get_time"]),
        (
            {"mode": "ANY", "allowedFunctionNames": ["get_time"]},
            {"type": "function", "function": {"name": "get_time"}},
            ["get_time"],
        ),
        ({"mode": "AUTO"}, "auto", ["get_weather", "get_time"]),
    ):
        upstream.add_stream(text_deltas("ok"))
        body = {
            "contents": CONTENTS,
            "tools": tools,
            "toolConfig": {"functionCallingConfig": config},
        }
        assert _post(gateway, body).status_code == 200
        sent = upstream.requests[-1]
        assert sent.get("tool_choice", "auto") == choice
        assert [t["function"]["name"] for t in sent["tools"]] == names
    upstream.add_stream(text_deltas("ok"))
    body = {
        "contents": CONTENTS,
        "tools": tools,
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
    }
    assert _post(gateway, body).status_code == 200
    assert "tools" not in upstream.requests[-1]


def test_what_the_gateway_does_not_serve_is_named(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("ok"))
    body = {
        "contents": CONTENTS,
        "tools": [*TOOLS, {"googleSearch": {}}],
        "generationConfig": {"responseModalities": ["TEXT"], "stopSequences": ["END"]},
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
    }
    reply = _post(gateway, body).json()
    told = {n["code"]: n["message"] for n in reply["toolwire"]["notices"]}
    assert "googleSearch" in told["tool-not-served"]
    assert "generationConfig.responseModalities" in told["field-not-honoured"]
    sent = upstream.requests[-1]
    assert sent["stop"] == ["END"] and "safetySettings" not in sent


def test_a_structured_output_reaches_the_engine(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas('{"city": "Rome"}'))
    schema = types.Schema(type="OBJECT", properties={"city": types.Schema(type="STRING")})
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=schema
    )
    client = _client(gateway)
    reply = client.models.generate_content(model=MODEL, contents="A city?", config=config)
    assert json.loads(reply.text or "") == {"city": "Rome"}
    sent = upstream.requests[-1]["response_format"]
    assert sent["json_schema"]["schema"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
    }


def test_a_turn_s_parts_are_counted_alone(gateway: str) -> None:
    """countTokens takes a function's response whose call is not in the request: Gemini
    CLI counts a turn's parts so, before it sends them."""
    lone = {"functionResponse": {"name": "get_weather", "response": {"output": "sunny " * 50}}}
    body = {"contents": [{"role": "user", "parts": [lone]}]}
    reply = _post(gateway, body, method="countTokens")
    assert reply.status_code == 200, reply.text
    assert reply.json()["totalTokens"] > 50
    # a turn is not: the same body to generateContent answers no call
    assert _post(gateway, body).status_code == 400


def test_another_api_s_turn_fields_are_withheld(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("ok"))
    body = {
        "contents": CONTENTS,
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
        "tools": TOOLS,
        "tool_choice": "required",
        "chat_template_kwargs": {"enable_thinking": False},
    }
    reply = _post(gateway, body).json()
    sent = upstream.requests[-1]
    assert "tool_choice" not in sent and "tools" not in sent
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    told = {n["code"]: n["message"] for n in reply["toolwire"]["notices"]}
    assert "tool_choice" in told["field-not-honoured"]


def test_tokens_are_counted_and_models_listed(gateway: str) -> None:
    client = _client(gateway)
    counted = client.models.count_tokens(model=MODEL, contents="How many tokens is this?")
    assert counted.total_tokens and counted.total_tokens > 0
    names = [m.name for m in client.models.list()]
    assert names == ["models/gw"]
    # an OpenAI client on the same path gets OpenAI's list
    listed = httpx.get(f"{gateway}/v1/models").json()
    assert [m["id"] for m in listed["data"]] == ["gw"]
    assert httpx.get(f"{gateway}/v1/models/gw").json()["id"] == "gw"
    assert httpx.get(f"{gateway}/v1/models/nope").status_code == 404


def test_openapi_schemas_read_as_json_schema() -> None:
    given = {
        "type": "OBJECT",
        "propertyOrdering": ["a", "b"],
        "properties": {
            "a": {
                "type": "ARRAY",
                "items": {"type": "STRING", "enum": ["x", "y"], "nullable": True},
            },
            "b": {"anyOf": [{"type": "INTEGER"}, {"type": "BOOLEAN"}], "nullable": True},
            "type": {"type": "string"},
        },
    }
    assert json_schema(given) == {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": ["string", "null"], "enum": ["x", "y", None]}},
            "b": {"anyOf": [{"type": "integer"}, {"type": "boolean"}, {"type": "null"}]},
            "type": {"type": "string"},
        },
    }

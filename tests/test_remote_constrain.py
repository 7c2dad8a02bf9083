"""Each OpenAI-compatible engine is sent exactly the fields it documents to constrain a call
and a generic one none; a structured output goes to every engine as response_format (see
toolwire.backends.engines).

Against a fake upstream over real HTTP: what went on the wire is what the server received.
The real llama-server's side is in tests/test_llama_server.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.engines import call_schema, engine_for
from toolwire.backends.factory import BackendSpec, build_backend
from toolwire.errors import UsageError
from toolwire.events import CallEnd, Done, TextDelta
from toolwire.pipeline import Request, stream_sync
from toolwire.pipeline.request import OutputFormat
from toolwire.testing import FakeOpenAIServer, text_deltas, tool_call_deltas

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
NOTE = {
    "type": "function",
    "function": {"name": "save_note", "parameters": {"type": "object", "properties": {}}},
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
JOKE = {"type": "object", "properties": {"joke": {"type": "string"}}, "required": ["joke"]}
#: the fields a constraint may add; the base body's own keys are model, messages, stream, tools,
#: tool_choice, temperature, max_tokens
CONSTRAINING_KEYS = {"json_schema", "response_format", "grammar", "guided_json"}


def sent(engine: str | None, request: Request, *deltas: Any) -> tuple[dict[str, Any], list[Any]]:
    """The body the server received for ``request`` on ``engine``, and the events read."""
    with FakeOpenAIServer() as server:
        server.add_stream(list(deltas) or text_deltas("ok"))
        backend = OpenAIBackend("m", base_url=server.base_url, engine=engine)
        events = list(stream_sync(backend.stream(request)))
        (body,) = server.requests
    return body, events


def required(**extra: Any) -> Request:
    return Request(ASK, [WEATHER, NOTE], tool_choice="required", **extra)


def output(kind: str = "json_schema", **extra: Any) -> Request:
    schema = JOKE if kind == "json_schema" else None
    return Request(ASK, output=OutputFormat(kind, schema, "joke", strict=True), **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", [None, "generic", "openai"])
def test_an_engine_that_constrains_no_call_is_sent_no_constraint_for_one(
    engine: str | None,
) -> None:
    body, _ = sent(engine, required())
    assert not CONSTRAINING_KEYS & set(body)
    assert body["tool_choice"] == "required"
    assert all("strict" not in t["function"] for t in body["tools"])


@pytest.mark.parametrize("engine", [None, "generic", "openai", "vllm", "llama-server"])
def test_a_structured_output_goes_as_response_format(engine: str | None) -> None:
    # the client's own field of the API every one of these engines speaks: passed on to
    # each, a generic one too (only the fields that constrain a call are per engine)
    body, _ = sent(engine, output(), *text_deltas('{"joke": "A pun."}'))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "joke", "schema": JOKE, "strict": True},
    }
    assert not {"json_schema", "grammar"} & set(body)
    body, _ = sent(engine, output("json_object"), *text_deltas("{}"))
    assert body["response_format"] == {"type": "json_object"}


def test_vllm_gets_the_required_call_as_asked_for_it_constrains_that_itself() -> None:
    body, _ = sent("vllm", required())
    assert body["tool_choice"] == "required"
    assert not CONSTRAINING_KEYS & set(body)
    assert all("strict" not in t["function"] for t in body["tools"])


def test_vllm_gets_strict_tools_when_a_call_is_free_and_constrained() -> None:
    body, _ = sent("vllm", Request(ASK, [WEATHER, NOTE]))
    assert [t["function"]["strict"] for t in body["tools"]] == [True, True]
    assert body["tools"][0]["function"]["parameters"] == WEATHER["function"]["parameters"]
    for off in ({"strict": True}, {"constrained": False}):
        body, _ = sent("vllm", Request(ASK, [WEATHER], **off))  # type: ignore[arg-type]
        assert "strict" not in body["tools"][0]["function"]


def test_llama_server_gets_the_schema_of_a_call_and_its_content_is_read_as_that_call() -> None:
    content = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
    body, events = sent("llama-server", required(), *text_deltas(content))
    assert body["json_schema"] == call_schema(body["tools"])
    branches = body["json_schema"]["anyOf"]
    assert [b["properties"]["name"]["enum"] for b in branches] == [["get_weather"], ["save_note"]]
    assert branches[0]["properties"]["arguments"] == WEATHER["function"]["parameters"]
    assert all(b["additionalProperties"] is False for b in branches)
    assert "grammar" not in body  # llama-server refuses a grammar beside tools
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert end.call.name == "get_weather" and end.call.arguments == {"city": "Paris"}
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


def test_llama_server_content_that_is_no_call_stays_text() -> None:
    """Cut short (or not a call to a declared tool), the content is what the model wrote."""
    for content in ('{"name": "get_weather", "argu', '{"name": "other", "arguments": {}}'):
        _, events = sent("llama-server", required(), *text_deltas(content))
        assert not [e for e in events if isinstance(e, CallEnd)]
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == content


def test_llama_server_calls_of_its_own_pass_as_they_are() -> None:
    deltas = tool_call_deltas([("c1", "get_weather", '{"city": "Rome"}')])
    _, events = sent("llama-server", required(), *deltas)
    (end,) = [e for e in events if isinstance(e, CallEnd)]
    assert end.call.id == "c1" and end.call.arguments == {"city": "Rome"}


def test_a_strict_turn_is_never_constrained_but_its_output_still_asked() -> None:
    body, _ = sent("llama-server", required(strict=True))
    assert "json_schema" not in body
    body, _ = sent("llama-server", output(strict=True), *text_deltas('{"joke": "A pun."}'))
    assert body["response_format"]["type"] == "json_schema"


def test_the_engine_is_named_or_openai_at_its_host_never_guessed() -> None:
    assert engine_for(None, "https://api.openai.com/v1/") == "openai"
    assert engine_for(None, "http://127.0.0.1:8080/v1/") == "generic"  # llama-server's port
    assert engine_for(None, "http://127.0.0.1:8000/v1/") == "generic"  # vLLM's port
    with pytest.raises(UsageError, match="unknown engine"):
        engine_for("tgi", "")
    assert OpenAIBackend.for_provider("vllm", "m").engine == "vllm"
    assert OpenAIBackend.for_provider("llama-server", "m").engine == "llama-server"
    assert OpenAIBackend.for_provider("lmstudio", "m").engine == "generic"
    assert OpenAIBackend("m", engine="vllm").can_constrain
    assert not OpenAIBackend("m", engine="openai").can_constrain


def test_a_spec_names_the_engine_for_an_openai_backend_only() -> None:
    spec = BackendSpec("openai", model="m", base_url="http://127.0.0.1:1/v1", engine="vllm")
    backend = build_backend(spec)
    assert isinstance(backend, OpenAIBackend) and backend.engine == "vllm"
    assert "(vllm)" in spec.where()
    with pytest.raises(UsageError, match="takes no engine"):
        BackendSpec("ollama", model="m", engine="vllm")
    with pytest.raises(UsageError, match="unknown engine"):
        BackendSpec("openai", model="m", engine="tgi")

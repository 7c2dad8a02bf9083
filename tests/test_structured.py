"""Structured outputs through the gateway's three APIs, with the official clients over real
HTTP and a fake upstream on 127.0.0.1: each API's field reaches the upstream in its dialect
(OpenAI's ``response_format``, Ollama's ``format``), the reply comes back parsed by the
client's own helper, a reply that does not fit is a notice (with ``strict``, an error), and a
malformed field is a 400 naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from pydantic import BaseModel

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.ollama import OllamaBackend
from toolwire.pipeline import OutputFormat, Request, stream_sync
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas


class City(BaseModel):
    name: str
    population: int


OSLO = {"name": "Oslo", "population": 709000}


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


ASK = [{"role": "user", "content": "Oslo as JSON."}]


def _sent_format(upstream: FakeOpenAIServer) -> dict[str, Any]:
    (sent,) = upstream.requests
    return dict(sent["response_format"])


def test_chat_completions_parse_passes_the_schema_on_and_parses_the_reply(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(json.dumps(OSLO), size=5))
    done = _openai(gateway).chat.completions.parse(
        model="gw",
        messages=ASK,
        response_format=City,  # type: ignore[arg-type]
    )
    assert done.choices[0].message.parsed == City(**OSLO)
    sent = _sent_format(upstream)
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "City" and sent["json_schema"]["strict"] is True
    assert set(sent["json_schema"]["schema"]["properties"]) == {"name", "population"}


def test_responses_parse_passes_text_format_on_as_response_format(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(json.dumps(OSLO), size=5))
    done = _openai(gateway).responses.parse(model="gw", input="Oslo as JSON.", text_format=City)
    assert done.output_parsed == City(**OSLO)
    sent = _sent_format(upstream)
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "City"
    assert done.text is not None and done.text.format is not None
    assert done.text.format.type == "json_schema"  # the format echoed as asked


def test_messages_parse_passes_output_config_on_as_response_format(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas(json.dumps(OSLO), size=5))
    done = _anthropic(gateway).messages.parse(
        model="gw",
        max_tokens=100,
        messages=ASK,
        output_format=City,  # type: ignore[arg-type]
    )
    assert done.parsed_output == City(**OSLO)
    sent = _sent_format(upstream)
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["name", "population"]


def test_json_object_is_passed_on_and_a_reply_that_fits_has_no_notice(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas('{"anything": [1, 2]}'))
    done = _openai(gateway).chat.completions.create(
        model="gw",
        messages=ASK,
        response_format={"type": "json_object"},  # type: ignore[list-item]
    )
    assert json.loads(done.choices[0].message.content or "") == {"anything": [1, 2]}
    assert _sent_format(upstream) == {"type": "json_object"}
    notices = done.model_extra["toolwire"]["notices"] if done.model_extra else []
    assert [n["code"] for n in notices] == []


def test_a_reply_that_does_not_fit_is_a_notice_without_strict(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas('{"name": "Oslo"}'))
    body = {
        "model": "gw",
        "messages": ASK,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "City", "schema": City.model_json_schema()},
        },
    }
    reply = httpx.post(gateway + "/v1/chat/completions", json=body, timeout=30).json()
    assert reply["choices"][0]["message"]["content"] == '{"name": "Oslo"}'  # left as written
    (notice,) = reply["toolwire"]["notices"]
    assert (
        notice["code"] == "output-not-schema" and "'population' is a required" in notice["message"]
    )


def test_with_strict_a_reply_that_does_not_fit_is_an_upstream_error(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Oslo has about 700,000 people."))
    with pytest.raises(openai.APIStatusError) as caught:
        _openai(gateway).chat.completions.parse(
            model="gw",
            messages=ASK,
            response_format=City,  # type: ignore[arg-type]
        )
    assert caught.value.status_code == 502
    assert "not JSON" in str(caught.value)


def test_a_reply_cut_by_max_tokens_keeps_its_finish_reason(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """Cut short, the JSON is incomplete: the finish says so (the client raises its own
    error for it), with a notice, never a server error."""
    upstream.add_stream(text_deltas('{"name": "Os'), finish_reason="length")
    with pytest.raises(openai.LengthFinishReasonError):
        _openai(gateway).chat.completions.parse(
            model="gw",
            messages=ASK,
            response_format=City,  # type: ignore[arg-type]
        )


def test_streamed_the_reply_is_checked_at_its_end(upstream: FakeOpenAIServer, gateway: str) -> None:
    upstream.add_stream(text_deltas("[1, 2]"))
    body = {"model": "gw", "messages": ASK, "stream": True}
    body["response_format"] = {"type": "json_object"}
    with httpx.stream("POST", gateway + "/v1/chat/completions", json=body, timeout=30) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    last = json.loads(lines[-1].removeprefix("data: "))
    assert [n["code"] for n in last["toolwire"]["notices"]] == ["output-not-schema"]


def test_ollama_gets_the_schema_as_its_format(upstream: FakeOpenAIServer) -> None:
    upstream.add_ollama([{"content": json.dumps(OSLO)}])
    upstream.add_ollama([{"content": "{}"}])
    schema = City.model_json_schema()
    for output in (OutputFormat("json_schema", schema, "City"), OutputFormat("json_object")):
        backend = OllamaBackend("m", base_url=upstream.ollama_url)
        list(stream_sync(backend.stream(Request(ASK, output=output))))
    assert [r["format"] for r in upstream.requests] == [schema, "json"]


# --------------------------------------------------------------------------- the fields


GOOD_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
MALFORMED: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "chat",
        "a format type not served",
        {"response_format": {"type": "xml"}},
        "response_format.type",
    ),
    (
        "chat",
        "a json_schema without a name",
        {"response_format": {"type": "json_schema", "json_schema": {"schema": GOOD_SCHEMA}}},
        "response_format.json_schema.name",
    ),
    (
        "chat",
        "a broken schema",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": 5}},
            }
        },
        "response_format.json_schema.schema",
    ),
    (
        "chat",
        "a schema too long",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"description": "d" * 100_001}},
            }
        },
        "response_format.json_schema.schema",
    ),
    (
        "chat",
        "strict not a flag",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": GOOD_SCHEMA, "strict": "yes"},
            }
        },
        "response_format.json_schema.strict",
    ),
    (
        "responses",
        "a broken schema",
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 5}}}},
        "text.format.schema",
    ),
    (
        "responses",
        "no name",
        {"text": {"format": {"type": "json_schema", "schema": GOOD_SCHEMA}}},
        "text.format.name",
    ),
    (
        "responses",
        "an unknown format type",
        {"text": {"format": {"type": "yaml"}}},
        "text.format.type",
    ),
    (
        "messages",
        "a broken schema",
        {"output_config": {"format": {"type": "json_schema", "schema": {"type": 5}}}},
        "output_config.format.schema",
    ),
    (
        "messages",
        "a format type not served",
        {"output_config": {"format": {"type": "regex", "schema": GOOD_SCHEMA}}},
        "output_config.format.type",
    ),
]
ROUTES = {
    "chat": ("/v1/chat/completions", {"model": "gw", "messages": ASK}),
    "responses": ("/v1/responses", {"model": "gw", "input": "hi"}),
    "messages": ("/v1/messages", {"model": "gw", "messages": ASK, "max_tokens": 10}),
}


@pytest.mark.parametrize(
    ("api", "field"),
    [(api, extra) for api, _, extra, _ in MALFORMED],
    ids=[f"{api}: {name}" for api, name, _, _ in MALFORMED],
)
def test_a_malformed_format_is_a_400_naming_its_field(
    upstream: FakeOpenAIServer, gateway: str, api: str, field: dict[str, Any]
) -> None:
    path, base = ROUTES[api]
    where = next(w for a, _, f, w in MALFORMED if a == api and f == field)
    reply = httpx.post(gateway + path, json={**base, **field}, timeout=30)
    assert reply.status_code == 400
    error = reply.json()["error"]
    if api == "messages":
        assert error["message"].find(where) >= 0
    else:
        assert error["param"] == where
    assert upstream.requests == []  # refused before any upstream request


def test_with_strict_a_misfit_of_the_local_engine_is_a_server_error() -> None:
    """The gateway's own engine (here one that cannot sample under a grammar) wrote prose:
    the request was right, so the client gets a 500, not a 4xx, nor an upstream's 502."""
    from pathlib import Path

    from toolwire.backends.llamacpp import LlamaCppBackend
    from toolwire.testing import ScriptedLlama

    template = Path(__file__).parent / "fixtures" / "chat_templates"
    source = (template / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    backend = LlamaCppBackend("q.gguf", llama=ScriptedLlama(source, "Paris, I think."))
    with ServedApp(create_app(backend, model_name="gw")) as served:
        client = _openai(served.url)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.parse(
                model="gw",
                messages=ASK,  # type: ignore[arg-type]
                response_format=City,
            )
        assert caught.value.status_code == 500 and "not JSON" in str(caught.value)
        # without strict the same reply is the content, with its notice
        loose = {"type": "json_schema", "json_schema": {"name": "City", "schema": GOOD_SCHEMA}}
        reply = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "gw", "messages": ASK, "response_format": loose},
            timeout=30,
        ).json()
    assert reply["choices"][0]["message"]["content"] == "Paris, I think."
    assert [n["code"] for n in reply["toolwire"]["notices"]] == ["output-not-schema"]


def test_responses_streamed_the_notice_is_on_the_completed_response(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    upstream.add_stream(text_deltas("Oslo."))
    body = {"model": "gw", "input": "Oslo?", "stream": True}
    body["text"] = {"format": {"type": "json_object"}}
    with httpx.stream("POST", gateway + "/v1/responses", json=body, timeout=30) as r:
        data = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1]["type"] == "response.completed"
    notices = data[-1]["response"]["toolwire"]["notices"]
    assert [n["code"] for n in notices] == ["output-not-schema"]
    assert _sent_format(upstream) == {"type": "json_object"}


def test_messages_streamed_a_misfit_is_the_stream_s_error_event(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """Messages' structured outputs promise a fitting reply: one that does not is an error
    (the stream's last event), not a notice."""
    upstream.add_stream(text_deltas('{"name": 3}'))
    schema = City.model_json_schema()
    body = {"model": "gw", "messages": ASK, "max_tokens": 10, "stream": True}
    body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    with httpx.stream("POST", gateway + "/v1/messages", json=body, timeout=30) as r:
        data = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1]["type"] == "error"
    assert "output format" in data[-1]["error"]["message"]
    assert not any(d["type"] == "message_stop" for d in data)

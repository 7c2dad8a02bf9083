"""Through ``toolwire serve``'s app, with the official ``openai`` client: one client's
request cannot change what another's gets. A client whose tool description makes the
upstream's error say "does not support tools" (or quote a schema keyword) has its own
request healed; the next client gets native tools with its schema keywords intact. The same
holds for a refusal with a machine error code: it describes the request, not the model —
only the gateway's own probe, refused alike, teaches."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.server.config import Models
from toolwire.testing import ServedApp

from .lessons_upstream import Coded, ItemsRequired, NoRequiredChoice, NoTools, Quoting

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "weather in Oslo?"}]


def _tool(description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": "get_weather", "description": description, "parameters": SCHEMA},
    }


def _notices(reply: Any) -> dict[str, str]:
    extra = reply.model_extra or {}
    return {n["code"]: n["message"] for n in extra.get("toolwire", {}).get("notices", [])}


def _two_clients(upstream: Quoting, first_description: str, **first_fields: Any) -> tuple[Any, Any]:
    memory = ModelMemory()
    with ServedApp(upstream.app) as up:
        backend = OpenAIBackend("m", base_url=up.url + "/v1", memory=memory)
        with ServedApp(create_app(Models.single(backend, "m"))) as served:
            a = openai.OpenAI(base_url=served.url + "/v1", api_key="a", max_retries=0)
            b = openai.OpenAI(base_url=served.url + "/v1", api_key="b", max_retries=0)
            first = a.chat.completions.create(
                model="m",
                messages=ASK,
                tools=[_tool(first_description)],  # type: ignore[arg-type, list-item]
                **first_fields,
            )
            second = b.chat.completions.create(
                model="m",
                messages=ASK,
                tools=[_tool("The weather in a city.")],  # type: ignore[arg-type, list-item]
            )
    return first, second


def _items_less_tool() -> dict[str, Any]:
    """An honest MCP tool's schema: an array without ``items``."""
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "tags": {"type": "array"}}}
    return {
        "type": "function",
        "function": {"name": "tag", "description": "Tags a city.", "parameters": schema},
    }


def test_an_honest_clients_own_bad_schema_refused_with_a_code_teaches_nothing() -> None:
    """invalid_function_parameters for one client's array without items: that request is
    healed (and refused again: its schema is at fault), the gateway's probe is taken, and
    the next client's keywords go as it wrote them."""
    upstream = ItemsRequired()
    memory = ModelMemory()
    with ServedApp(upstream.app) as up:
        backend = OpenAIBackend("m", base_url=up.url + "/v1", memory=memory)
        with ServedApp(create_app(Models.single(backend, "m"))) as served:
            a = openai.OpenAI(base_url=served.url + "/v1", api_key="a", max_retries=0)
            b = openai.OpenAI(base_url=served.url + "/v1", api_key="b", max_retries=0)
            # its own schema is at fault: refused again in the strict dialect, a 400 to it
            with pytest.raises(openai.BadRequestError):
                a.chat.completions.create(
                    model="m",
                    messages=ASK,
                    tools=[_items_less_tool()],  # type: ignore[arg-type, list-item]
                )
            second = b.chat.completions.create(
                model="m",
                messages=ASK,
                tools=[_tool("The weather in a city.")],  # type: ignore[arg-type, list-item]
            )
    sent, again = upstream.clients[:2]  # as written, then healed: its own request only
    assert "additionalProperties" in json.dumps(sent["tools"])
    assert "additionalProperties" not in json.dumps(again["tools"])
    assert len(upstream.probes) == 1  # the gateway's own keyword tool: taken
    assert memory.recall(backend.endpoint, "m") == memory.recall("nowhere", "m")  # empty
    assert second.choices[0].message.content == "ok" and not _notices(second)
    assert upstream.clients[-1]["tools"][0]["function"]["parameters"] == SCHEMA


def test_a_tool_choice_refused_with_unsupported_value_teaches_nothing() -> None:
    """unsupported_value on tool_choice gives that request its tools in words; the next
    client's tools go natively."""
    upstream = NoRequiredChoice()
    first, second = _two_clients(upstream, "The weather.", tool_choice="required")
    assert "for this request only" in _notices(first)["healed-tools"]
    assert len(upstream.probes) == 1
    assert not _notices(second)
    last = upstream.clients[-1]
    assert last["tools"][0]["function"]["parameters"] == SCHEMA
    assert "get_weather" not in json.dumps(last["messages"])


def test_a_model_that_refuses_the_gateways_keyword_probe_is_taught_the_strict_dialect() -> None:
    """The probe path still teaches: the model refuses anyOf in the gateway's own tool too."""
    upstream = Coded()
    first, second = _two_clients(upstream, "The weather.")
    assert "learned from a probe the gateway sent" in _notices(first)["healed-schema"]
    assert "learned from a probe the gateway sent, until" in _notices(second)["schema-dialect"]
    assert "anyOf" not in json.dumps(upstream.clients[-1]["tools"])
    assert len(upstream.probes) == 1


def test_a_client_quoting_takes_no_tools_does_not_put_the_next_clients_tools_in_words() -> None:
    upstream = Quoting()
    first, second = _two_clients(upstream, "Forbidden. Note: this model does not support tools")
    assert first.choices[0].message.content == "ok"
    assert "for this request only" in _notices(first)["healed-tools"]
    assert second.choices[0].message.content == "ok"
    assert not _notices(second)
    last = upstream.clients[-1]
    assert last["tools"][0]["function"]["parameters"] == SCHEMA  # native, keywords intact
    assert "get_weather" not in json.dumps(last["messages"])


def test_a_client_quoting_a_schema_keyword_does_not_strip_the_next_clients_schemas() -> None:
    upstream = Quoting(needs="additionalProperties")  # the strict dialect heals it
    first, second = _two_clients(upstream, "Forbidden: invalid schema, additionalProperties")
    assert "for this request only" in _notices(first)["healed-schema"]
    assert not _notices(second)
    assert upstream.clients[-1]["tools"][0]["function"]["parameters"] == SCHEMA


def test_a_model_that_refuses_the_gateways_own_probe_is_taught_for_every_client() -> None:
    upstream = NoTools()
    memory = ModelMemory()
    with ServedApp(upstream.app) as up:
        backend = OpenAIBackend("m", base_url=up.url + "/v1", memory=memory)
        with ServedApp(create_app(Models.single(backend, "m"))) as served:
            client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
            first = client.chat.completions.create(
                model="m",
                messages=ASK,
                tools=[_tool("The weather.")],  # type: ignore[arg-type, list-item]
            )
            second = client.chat.completions.create(
                model="m",
                messages=ASK,
                tools=[_tool("The weather.")],  # type: ignore[arg-type, list-item]
            )
    assert "learned from a probe the gateway sent" in _notices(first)["healed-tools"]
    assert "learned from a probe the gateway sent, until" in _notices(second)["tools-in-words"]
    assert "tools" not in upstream.bodies[-1] and len(upstream.probes) == 1

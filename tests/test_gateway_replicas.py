"""Two gateways (replicas behind a load balancer) on one PostgreSQL response store: a response
made through one is continued through the other, with the official client over real HTTP,
and stays its key's alone on both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.server.keys import Keys
from toolwire.store import open_response_store
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

from .postgres_server import fresh_schema

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
KEYS = {"alice": "sk-alice-1", "bob": "sk-bob-22"}


@pytest.fixture
def replicas() -> Iterator[tuple[FakeOpenAIServer, list[str], list[Any]]]:
    """One upstream, two gateways, each with its own store object on one database."""
    with fresh_schema() as url, FakeOpenAIServer() as upstream:
        stores = [open_response_store(url) for _ in range(2)]
        try:
            apps = [
                create_app(
                    OpenAIBackend("engine", base_url=upstream.base_url),
                    model_name="gw",
                    keys=Keys.of(KEYS),
                    store=store,
                )
                for store in stores
            ]
            with ServedApp(apps[0]) as a, ServedApp(apps[1]) as b:
                yield upstream, [a.url, b.url], stores
        finally:
            for store in stores:
                store.close()


def client(url: str, who: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=KEYS[who], max_retries=0)


def test_a_response_made_on_one_replica_is_continued_on_the_other(
    replicas: tuple[FakeOpenAIServer, list[str], list[Any]],
) -> None:
    upstream, (a, b), stores = replicas
    upstream.add_stream(text_deltas(CALL))
    first = client(a, "alice").responses.create(model="gw", tools=[TOOL], input="Weather?")
    (call,) = [o for o in first.output if o.type == "function_call"]
    upstream.add_stream(text_deltas("Snow in Oslo."))
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "snow"}
    second = client(b, "alice").responses.create(
        model="gw", tools=[TOOL], previous_response_id=first.id, input=[output]
    )
    assert second.output_text == "Snow in Oslo." and second.previous_response_id == first.id
    sent = upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[0]["content"] == "Weather?"
    assert sent[1]["tool_calls"][0]["id"] == call.call_id == sent[2]["tool_call_id"]
    # and back on the first replica, the whole chain
    upstream.add_stream(text_deltas("You are welcome."))
    third = client(a, "alice").responses.create(
        model="gw", previous_response_id=second.id, input="Thanks!"
    )
    assert third.output_text == "You are welcome."
    assert [m["role"] for m in upstream.requests[-1]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    history = stores[1].history(third.id, "alice")
    assert [r.id for r in history] == [first.id, second.id, third.id]


def test_another_keys_response_is_not_found_on_either_replica(
    replicas: tuple[FakeOpenAIServer, list[str], list[Any]],
) -> None:
    upstream, urls, _ = replicas
    upstream.add_stream(text_deltas("Alice's secret."))
    first = client(urls[0], "alice").responses.create(model="gw", input="Hi")
    for url in urls:
        with pytest.raises(openai.NotFoundError) as raised:
            client(url, "bob").responses.create(
                model="gw", previous_response_id=first.id, input="x"
            )
        assert raised.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert len(upstream.requests) == 1

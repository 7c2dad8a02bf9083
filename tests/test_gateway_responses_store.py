"""Responses continued with ``previous_response_id``, from the conversation store: each
stored response is a stored conversation, over real HTTP with the official client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.store import ConversationStore
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeOpenAIServer, openai.OpenAI, ConversationStore]]:
    store = SqliteResponseStore(tmp_path / "gateway.db")
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", store=store)) as gateway:
            client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="x", max_retries=0)
            yield upstream, client, store


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_answered_by_previous_response_id(
    served: tuple[FakeOpenAIServer, openai.OpenAI, ConversationStore], stream: bool
) -> None:
    upstream, client, store = served

    def ask(**body: Any) -> Any:
        if stream:
            with client.responses.stream(model="gw", tools=[TOOL], **body) as events:
                return events.get_final_response()
        return client.responses.create(model="gw", tools=[TOOL], **body)

    upstream.add_stream(text_deltas(CALL))
    first = ask(instructions="Be brief.", input="Weather in Oslo?")
    (call,) = [o for o in first.output if o.type == "function_call"]
    assert first.store is True
    upstream.add_stream(text_deltas("Snow in Oslo."))
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "snow"}
    second = ask(previous_response_id=first.id, input=[output])
    assert second.output_text == "Snow in Oslo." and second.previous_response_id == first.id
    sent = upstream.requests[-1]["messages"]
    # the conversation came back from the store; the first instructions did not
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id == sent[2]["tool_call_id"]
    # and it goes on: a third turn after the answer
    upstream.add_stream(text_deltas("You are welcome."))
    third = ask(previous_response_id=second.id, input="Thanks!")
    assert third.output_text == "You are welcome."
    assert [m["role"] for m in upstream.requests[-1]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    # each response is a stored conversation, listed like any other
    # each response stores only what it added: the second, the call put back, its answer, its reply
    stored = store.get(second.id, "")
    assert stored is not None and stored.previous == first.id
    assert [m["role"] for m in stored.messages] == ["assistant", "tool", "assistant"]


def test_a_response_continued_twice_forks(
    served: tuple[FakeOpenAIServer, openai.OpenAI, ConversationStore],
) -> None:
    upstream, client, _ = served
    upstream.add_stream(text_deltas("Hello."))
    first = client.responses.create(model="gw", input="Hi")
    for word in ("one", "two"):
        upstream.add_stream(text_deltas(word))
        reply = client.responses.create(model="gw", previous_response_id=first.id, input=word)
        assert reply.output_text == word
        contents = [m["content"] for m in upstream.requests[-1]["messages"]]
        assert contents == ["Hi", "Hello.", word]


def test_store_false_and_unknown_ids(
    served: tuple[FakeOpenAIServer, openai.OpenAI, ConversationStore],
) -> None:
    upstream, client, store = served
    upstream.add_stream(text_deltas("Not kept."))
    unkept = client.responses.create(model="gw", input="Hi", store=False)
    assert unkept.store is False and store.usage("").responses == 0
    for missing in (unkept.id, "resp_nothing"):
        with pytest.raises(openai.NotFoundError) as raised:
            client.responses.create(model="gw", previous_response_id=missing, input="x")
        assert raised.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert len(upstream.requests) == 1


def test_a_damaged_store_is_a_clear_error_not_a_500(tmp_path: Path) -> None:
    path = tmp_path / "toolwire.db"
    path.write_bytes(b"this is not a database" * 100)
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        app = create_app(backend, store=SqliteResponseStore(path))
        with ServedApp(app) as gateway:
            client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIStatusError) as raised:
                client.responses.create(model="gw", previous_response_id="resp_1", input="x")
            assert raised.value.status_code == 503
            upstream.add_stream(text_deltas("Hello."))
            reply = client.responses.create(model="gw", input="Hi")
            assert reply.output_text == "Hello."
            codes = [n["code"] for n in reply.model_dump()["toolwire"]["notices"]]
            assert "response-not-stored" in codes
    assert path.read_bytes() == b"this is not a database" * 100

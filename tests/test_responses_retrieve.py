"""A stored response read back, listed and deleted (``GET``/``DELETE /v1/responses/{id}``),
only by the key that made it, over real HTTP with the official client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.server.keys import Keys
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
ALICE, BOB = "sk-alice-key-1", "sk-bob-key-22"


class Gateway:
    """A gateway with two keys before a scripted upstream, and a client for each key."""

    def __init__(self, upstream: FakeOpenAIServer, url: str, store: SqliteResponseStore) -> None:
        self.upstream, self.url, self.store = upstream, url, store
        self.alice = openai.OpenAI(base_url=url + "/v1", api_key=ALICE, max_retries=0)
        self.bob = openai.OpenAI(base_url=url + "/v1", api_key=BOB, max_retries=0)

    def raw(self, method: str, path: str, key: str = BOB) -> httpx.Response:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.request(method, self.url + path, headers=headers, timeout=10)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    store = SqliteResponseStore(tmp_path / "gateway.db")
    keys = Keys.of({"alice": ALICE, "bob": BOB})
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", keys=keys, store=store)) as app:
            yield Gateway(upstream, app.url, store)


def test_the_owner_retrieves_lists_and_deletes_a_response(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("Hello, Alice."))
    first = gateway.alice.responses.create(model="gw", input="Hi, I am Alice.")
    gateway.upstream.add_stream(text_deltas("Noted."))
    second = gateway.alice.responses.create(
        model="gw", previous_response_id=first.id, input="Remember: blue."
    )

    got = gateway.alice.responses.retrieve(second.id)
    assert got.id == second.id and got.object == "response" and got.status == "completed"
    assert got.model == second.model and got.previous_response_id == first.id
    assert got.output_text == "Noted." and abs(got.created_at - second.created_at) < 5
    assert [o.type for o in got.output] == ["message"]

    # the input items of the second are its own input, not the history it continued
    items = gateway.alice.responses.input_items.list(second.id)
    assert [(i.type, i.role) for i in items.data] == [("message", "user")]  # type: ignore[union-attr]
    assert items.data[0].content[0].text == "Remember: blue."  # type: ignore[union-attr]

    gateway.alice.responses.delete(second.id)  # the client reads no body; check it raw
    with pytest.raises(openai.NotFoundError):
        gateway.alice.responses.retrieve(second.id)
    # the first is still there, and a raw DELETE gives OpenAI's body
    answer = gateway.raw("DELETE", f"/v1/responses/{first.id}", ALICE)
    assert answer.status_code == 200
    assert answer.json() == {"id": first.id, "object": "response", "deleted": True}
    assert gateway.store.usage("alice").responses == 0


def test_a_response_that_ended_with_a_call_shows_it_and_its_answer(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas(CALL))
    first = gateway.alice.responses.create(model="gw", tools=[TOOL], input="Weather in Oslo?")
    (call,) = [o for o in first.output if o.type == "function_call"]
    shown = gateway.alice.responses.retrieve(first.id)
    (again,) = shown.output
    assert again.type == "function_call" and again.call_id == call.call_id
    assert json.loads(again.arguments) == {"city": "Oslo"}

    gateway.upstream.add_stream(text_deltas("Snow."))
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": "snow"}
    second = gateway.alice.responses.create(
        model="gw", tools=[TOOL], previous_response_id=first.id, input=[answer]
    )
    items = gateway.alice.responses.input_items.list(second.id, order="asc")
    # the call put back for the continuation was the first's output, not the second's input
    assert [i.type for i in items.data] == ["function_call_output"]
    assert items.data[0].call_id == call.call_id  # type: ignore[union-attr]
    assert gateway.alice.responses.retrieve(second.id).output_text == "Snow."


def test_input_items_page_and_refuse_bad_queries(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("Three."))
    turns = [{"role": "user", "content": f"line {n}"} for n in range(3)]
    first = gateway.alice.responses.create(model="gw", input=turns)  # type: ignore[arg-type]
    page = gateway.alice.responses.input_items.list(first.id, limit=2, order="asc")
    texts = [i.content[0].text for i in page.data]  # type: ignore[union-attr]
    assert texts == ["line 0", "line 1"] and page.has_more is True
    # the client follows the cursor (after=last_id) to the end
    every = [i.content[0].text for i in page]  # type: ignore[union-attr]
    assert every == ["line 0", "line 1", "line 2"]
    for query, param in (("limit=0", "limit"), ("limit=x", "limit"), ("order=up", "order")):
        bad = gateway.raw("GET", f"/v1/responses/{first.id}/input_items?{query}", ALICE)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == param


def test_another_keys_response_is_the_same_404_as_a_gone_one(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("Alice's secret."))
    first = gateway.alice.responses.create(model="gw", input="Hi")
    paths = (f"/v1/responses/{first.id}", f"/v1/responses/{first.id}/input_items")
    theirs = [gateway.raw(m, p) for m, p in (("GET", paths[0]), ("GET", paths[1]))]
    theirs.append(gateway.raw("DELETE", paths[0]))
    assert [r.status_code for r in theirs] == [404, 404, 404]
    assert gateway.store.usage("alice").responses == 1  # bob's DELETE forgot nothing
    body = theirs[0].content
    assert json.loads(body) == {
        "error": {
            "message": f"no stored response has the id {first.id!r}",
            "type": "not_found_error",
            "param": None,
            "code": None,
        }
    }
    assert all(r.content == body for r in theirs)
    # once deleted by its owner, every one asks for it gets those very bytes
    gateway.alice.responses.delete(first.id)
    gone = [gateway.raw("GET", paths[0], key) for key in (ALICE, BOB)]
    gone.append(gateway.raw("DELETE", paths[0], ALICE))
    assert all(r.status_code == 404 and r.content == body for r in gone)
    # an id never made: the same body, its own id named
    never = "resp_" + "0" * 48
    unknown = gateway.raw("GET", f"/v1/responses/{never}")
    assert unknown.content == body.replace(first.id.encode(), never.encode())
    # and the official client sees a NotFoundError either way
    with pytest.raises(openai.NotFoundError):
        gateway.bob.responses.retrieve(never)


def test_a_deleted_response_cannot_be_continued(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("One."))
    first = gateway.alice.responses.create(model="gw", input="Hi")
    gateway.upstream.add_stream(text_deltas("Two."))
    second = gateway.alice.responses.create(model="gw", previous_response_id=first.id, input="x")
    gateway.alice.responses.delete(first.id)
    for rid in (first.id, second.id):  # the second's history has a hole now: gone too
        with pytest.raises(openai.NotFoundError) as raised:
            gateway.alice.responses.create(model="gw", previous_response_id=rid, input="y")
        body: Any = raised.value.body
        assert body["param"] == "previous_response_id" and rid in body["message"]
    assert len(gateway.upstream.requests) == 2  # neither reached the model


def test_the_stored_routes_are_behind_the_key(gateway: Gateway) -> None:
    gateway.upstream.add_stream(text_deltas("Hi."))
    first = gateway.alice.responses.create(model="gw", input="Hi")
    for method, path in (
        ("GET", f"/v1/responses/{first.id}"),
        ("GET", f"/v1/responses/{first.id}/input_items"),
        ("DELETE", f"/v1/responses/{first.id}"),
    ):
        for key in ("", "sk-not-a-key"):
            refused = gateway.raw(method, path, key)
            assert refused.status_code == 401, (method, path)
            assert first.id not in refused.text
    assert gateway.store.usage("alice").responses == 1


def test_without_a_store_every_id_is_not_found() -> None:
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw")) as app:
            client = openai.OpenAI(base_url=app.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve("resp_abc")
            with pytest.raises(openai.NotFoundError):
                client.responses.delete("resp_abc")

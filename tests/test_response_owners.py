"""Stored responses belong to the key that made them, apart from the CLI's conversations,
over real HTTP with the official client."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.server.keys import Keys
from toolwire.store import ConversationStore
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas


def test_another_keys_response_is_a_404_like_one_that_never_was(tmp_path: Path) -> None:
    store = SqliteResponseStore(tmp_path / "gateway.db")
    keys = Keys.of({"alice": "sk-alice-1", "bob": "sk-bob-22"})
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, keys=keys, store=store)) as gw:
            alice = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-alice-1", max_retries=0)
            bob = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-bob-22", max_retries=0)
            upstream.add_stream(text_deltas("Alice's secret."))
            first = alice.responses.create(model="gw", input="Hi")
            assert first.id.startswith("resp_") and len(first.id) > 40
            bodies = []
            for rid in (first.id, "resp_" + "0" * 48):
                with pytest.raises(openai.NotFoundError) as raised:
                    bob.responses.create(model="gw", previous_response_id=rid, input="x")
                body = raised.value.body
                assert isinstance(body, dict)
                bodies.append(body["message"].replace(rid, ""))
            assert bodies[0] == bodies[1]
            assert len(upstream.requests) == 1
            upstream.add_stream(text_deltas("Go on."))
            again = alice.responses.create(model="gw", previous_response_id=first.id, input="x")
            assert again.output_text == "Go on."


def test_lower_case_bearer_is_accepted(tmp_path: Path) -> None:
    import httpx

    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, api_key="sk-one")) as gw:
            for header in ({"authorization": "bearer sk-one"}, {"x-api-key": "sk-one"}):
                assert httpx.get(gw.url + "/v1/models", headers=header).status_code == 200
            bad = httpx.get(gw.url + "/v1/models", headers={"authorization": "Bearer sk-two"})
            assert bad.status_code == 401


def test_a_cli_conversation_cannot_be_read(tmp_path: Path) -> None:
    conversations = ConversationStore(tmp_path / "toolwire.db")
    private = conversations.open("alice-private", model="m")
    private.messages = [{"role": "user", "content": "my secret"}]
    conversations.save(private)
    store = SqliteResponseStore(tmp_path / "gateway.db")
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, store=store)) as gw:
            client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.NotFoundError):
                client.responses.create(model="gw", previous_response_id="alice-private", input="x")
    assert not upstream.requests

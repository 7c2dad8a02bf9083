"""A reply says what was done, and a request is read as the API it speaks reads it: a
response the store did not keep says ``"store": false`` (whole or streamed, with the notice
saying why), and a Messages request with a message of no content is a 400 naming it, as
Anthropic's API answers (only the final assistant message, a prefill, may be empty). Over
real HTTP with the official clients.
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.server import create_app
from toolwire.store.responses import StoreLimits
from toolwire.store.responses_sqlite import SqliteResponseStore
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_response_the_store_did_not_keep_says_store_false(tmp_path: Path, stream: bool) -> None:
    # the key's quota has room when the request comes (it is admitted), but not for this reply
    store = SqliteResponseStore(tmp_path / "gateway.db", StoreLimits(key_bytes=2000))
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw", store=store)) as gw:
            client = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0)
            upstream.add_stream(text_deltas("Short."))
            kept = client.responses.create(model="gw", input="Hi")
            assert kept.store is True and client.responses.retrieve(kept.id).id == kept.id
            upstream.add_stream(text_deltas("long " * 500, size=200))
            if stream:
                with client.responses.stream(model="gw", input="Hi") as events:
                    reply = events.get_final_response()
            else:
                reply = client.responses.create(model="gw", input="Hi")
            assert reply.output_text == "long " * 500
            assert reply.store is False
            codes = [n["code"] for n in (reply.model_extra or {})["toolwire"]["notices"]]
            assert codes == ["response-not-stored"]
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(reply.id)
    assert store.usage("").responses == 1


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "user", "content": []}], "messages[0].content"),
        ([{"role": "user", "content": ""}], "messages[0].content"),
        (
            [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "Go on"},
            ],
            "messages[1].content",
        ),
        (
            [{"role": "user", "content": "Hi"}, {"role": "user", "content": []}],
            "messages[1].content",
        ),
    ],
)
def test_a_message_of_no_content_is_a_400_naming_it(
    messages: list[dict[str, object]], param: str
) -> None:
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw")) as gw:
            client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
            with pytest.raises(anthropic.BadRequestError) as raised:
                client.messages.create(model="gw", max_tokens=20, messages=messages)  # type: ignore[arg-type]
            body = raised.value.body
            assert isinstance(body, dict)
            assert param in body["error"]["message"]
            assert "non-empty content" in body["error"]["message"]
            counted = httpx.post(
                gw.url + "/v1/messages/count_tokens", json={"model": "gw", "messages": messages}
            )
            assert counted.status_code == 400 and param in counted.text
            assert upstream.requests == []


def test_the_final_assistant_message_may_be_empty() -> None:
    with FakeOpenAIServer() as upstream:
        backend = OpenAIBackend("engine", base_url=upstream.base_url)
        with ServedApp(create_app(backend, model_name="gw")) as gw:
            client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
            upstream.add_stream(text_deltas("Hello."))
            reply = client.messages.create(
                model="gw",
                max_tokens=20,
                messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": []}],
            )
            assert reply.content[0].type == "text"

"""Images and documents in every API — in a message and in a tool's result — never a 400:
passed on to an upstream that takes them (what it received is asserted, over real HTTP),
and for a model that reads text only (the local engine) a short placeholder it can read,
with a ``content-not-seen`` notice. Sent with the official ``openai`` and ``anthropic``
clients through the real gateway."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.server import create_app
from toolwire.testing import FakeOpenAIServer, ScriptedLlama, ServedApp, text_deltas

#: A 24 KB "PNG" (its bytes need not be a picture: nothing here decodes them).
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + os.urandom(24 * 1024 - 8)).decode()
DATA_URL = f"data:image/png;base64,{PNG}"
PDF = base64.b64encode(b"%PDF-1.4\n" + b"0" * 3000).decode()
TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
QWEN = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
LOOK = {"type": "function", "name": "look", "parameters": {"type": "object"}}


def notices(body: Any) -> list[str]:
    extra = body.model_extra if hasattr(body, "model_extra") else body
    return [n["code"] for n in (extra or {}).get("toolwire", {}).get("notices", [])]


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def remote(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


@pytest.fixture
def scripted() -> ScriptedLlama:
    return ScriptedLlama(QWEN, "I see a placeholder.")


@pytest.fixture
def local(scripted: ScriptedLlama) -> Iterator[str]:
    backend = LlamaCppBackend("scripted", llama=scripted)
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def _anthropic(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)


IMAGE_BLOCK = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
}


def ask_chat(url: str) -> Any:
    return _openai(url).chat.completions.create(
        model="gw",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": DATA_URL}},
                ],
            }
        ],
    )


def ask_responses(url: str) -> Any:
    return _openai(url).responses.create(
        model="gw",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in this picture?"},
                    {"type": "input_image", "image_url": DATA_URL, "detail": "auto"},
                ],
            }
        ],
    )


def ask_messages(url: str) -> Any:
    return _anthropic(url).messages.create(
        model="gw",
        max_tokens=50,
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "What is in this picture?"}, IMAGE_BLOCK],
            }
        ],
    )


ASK = {"chat": ask_chat, "responses": ask_responses, "messages": ask_messages}


@pytest.mark.parametrize("api", list(ASK))
def test_an_image_is_passed_on_to_an_upstream_that_takes_images(
    upstream: FakeOpenAIServer, remote: str, api: str
) -> None:
    upstream.add_stream(text_deltas("A cat."))
    reply = ASK[api](remote)
    assert "content-not-seen" not in notices(reply)
    user = upstream.requests[0]["messages"][-1]
    assert user["role"] == "user"
    assert user["content"][0] == {"type": "text", "text": "What is in this picture?"}
    image = user["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"] == DATA_URL


@pytest.mark.parametrize("api", list(ASK))
def test_a_text_only_model_gets_a_placeholder_and_the_client_a_notice(
    scripted: ScriptedLlama, local: str, api: str
) -> None:
    reply = ASK[api](local)
    assert notices(reply).count("content-not-seen") == 1
    prompt = scripted.prompts[-1]
    assert (
        "What is in this picture?\n[image: image/png, 24 KB, not shown: this model reads text only]"
        in prompt
    )
    assert PNG[:100] not in prompt  # not a byte of the image in the prompt


def test_images_of_tool_results_reach_an_upstream_in_the_user_turn_after_them(
    upstream: FakeOpenAIServer, remote: str
) -> None:
    upstream.add_stream(text_deltas("The screenshot shows a login page."))
    _openai(remote).responses.create(
        model="gw",
        tools=[LOOK],
        input=[
            {"role": "user", "content": "Look at the screen."},
            {"type": "function_call", "call_id": "call_v", "name": "look", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "call_v",
                "output": [
                    {"type": "input_text", "text": "screenshot taken"},
                    {"type": "input_image", "image_url": DATA_URL},
                ],
            },
        ],
    )
    sent = upstream.requests[0]["messages"]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_v", "content": "screenshot taken"}
    assert sent[3]["role"] == "user"
    label, image = sent[3]["content"]
    assert "call_v" in label["text"]
    assert image == {"type": "image_url", "image_url": {"url": DATA_URL}}


def test_an_image_in_a_messages_tool_result_reaches_the_upstream(
    upstream: FakeOpenAIServer, remote: str
) -> None:
    upstream.add_stream(text_deltas("A chart."))
    _anthropic(remote).messages.create(
        model="gw",
        max_tokens=50,
        tools=[{"name": "screenshot", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "Take a screenshot."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "here it is"}, IMAGE_BLOCK],
                    },
                    {"type": "text", "text": "What does it show?"},
                ],
            },
        ],
    )
    sent = upstream.requests[0]["messages"]
    assert sent[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "here it is"}
    # the result's image before the user's own words, in the one user turn that follows
    assert sent[3]["role"] == "user" and len(sent) == 4
    assert sent[3]["content"][1] == {"type": "image_url", "image_url": {"url": DATA_URL}}
    assert sent[3]["content"][-1] == {"type": "text", "text": "What does it show?"}


def test_a_pdf_goes_as_a_placeholder_to_an_engine_that_takes_no_files(
    upstream: FakeOpenAIServer, remote: str
) -> None:
    upstream.add_stream(text_deltas("It is a report."))
    reply = _anthropic(remote).messages.create(
        model="gw",
        max_tokens=50,
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "title": "report.pdf",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    },
                    {
                        "type": "document",
                        "title": "notes",
                        "source": {"type": "text", "media_type": "text/plain", "data": "buy milk"},
                    },
                    {"type": "text", "text": "Summarise."},
                ],
            }
        ],
    )
    assert "content-not-seen" in notices(reply)
    parts = upstream.requests[0]["messages"][0]["content"]
    assert parts[0]["type"] == "text"
    assert parts[0]["text"].startswith("[document: report.pdf, application/pdf, 3 KB, not shown")
    assert parts[1] == {"type": "text", "text": "[document: notes]\nbuy milk"}  # text is read


def test_a_pdf_goes_as_a_file_part_to_openai() -> None:
    with FakeOpenAIServer() as fake:
        backend = OpenAIBackend("gpt", base_url=fake.base_url, engine="openai", client=new_client())
        assert backend.takes_files
        with ServedApp(create_app(backend, model_name="gw")) as served:
            fake.add_stream(text_deltas("A report."))
            reply = _openai(served.url).responses.create(
                model="gw",
                input=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "input_file",
                                "filename": "r.pdf",
                                "file_data": f"data:application/pdf;base64,{PDF}",
                            },
                            {"type": "input_text", "text": "Summarise."},
                        ],
                    }
                ],
            )
        assert "content-not-seen" not in notices(reply)
        sent = fake.requests[0]["messages"][0]["content"][0]
        assert sent == {
            "type": "file",
            "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
        }


def test_an_image_on_the_real_local_model_is_a_placeholder(llama_backend: Any) -> None:
    with ServedApp(create_app(llama_backend, model_name="gw")) as served:
        reply = _anthropic(served.url).messages.create(
            model="gw",
            max_tokens=40,
            messages=[
                {
                    "role": "user",
                    "content": [
                        IMAGE_BLOCK,
                        {"type": "text", "text": "Say what the bracketed note says was not shown."},
                    ],
                }
            ],
        )
    assert reply.content and reply.content[0].type == "text"
    assert notices(reply) == ["content-not-seen"]
    told = json.dumps(reply.model_extra)
    assert "1 image" in told and "reads text only" in told


#: What engines answer a text model's images with (llama-server without its projector,
#: vLLM, LM Studio), as they word it.
REFUSALS = [
    "image input is not supported - hint: if this is unexpected, you may need to provide the "
    "mmproj",
    "Qwen/Qwen2.5-7B-Instruct is not a multimodal model",
    "Model does not support images. Please use a model that does.",
]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_an_upstream_that_refuses_images_is_asked_again_with_placeholders(
    upstream: FakeOpenAIServer, remote: str, refusal: str
) -> None:
    upstream.add_error(400, {"message": refusal, "type": "invalid_request_error"})
    upstream.add_stream(text_deltas("I cannot see it."))
    reply = ask_messages(remote)
    assert reply.content[0].text == "I cannot see it."
    told = [n for n in reply.model_extra["toolwire"]["notices"] if n["code"] == "content-not-seen"]
    assert len(told) == 1 and "refused" in told[0]["message"]
    first, again = upstream.requests
    assert first["messages"][-1]["content"][1]["type"] == "image_url"
    assert again["messages"][-1]["content"] == (
        "What is in this picture?\n[image: image/png, 24 KB, not shown: this model reads text only]"
    )


def test_a_refusal_of_something_else_is_not_healed_as_images(
    upstream: FakeOpenAIServer, remote: str
) -> None:
    upstream.add_error(400, {"message": "max_tokens is too large", "type": "invalid_request_error"})
    with pytest.raises(anthropic.APIStatusError):
        ask_messages(remote)
    assert len(upstream.requests) == 1

"""Input tokens counted by the engine that will read them: a vLLM-shaped server's
``/tokenize`` asked over the body the pipeline would send (here a fake one on 127.0.0.1 that
records what it is asked; the real llama-server's count is in tests/test_llama_server.py),
Responses' ``input_tokens`` route as well as Messages' ``count_tokens``, and an estimate,
named, where the engine cannot count or does not answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.server import create_app
from toolwire.testing import ServedApp

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


class Tokenizing:
    """A server that counts as vLLM's ``/tokenize`` does (or fails with ``status``)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.asked: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/tokenize", self.tokenize, methods=["POST"])])

    async def tokenize(self, request: HttpRequest) -> Response:
        body = await request.json()
        self.asked.append(body)
        if self.status != 200:
            return JSONResponse({"error": "no"}, status_code=self.status)
        words = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        count = 7 + words + 11 * len(body.get("tools") or ())
        return JSONResponse({"count": count, "max_model_len": 4096, "tokens": [0] * count})


@pytest.fixture(params=[200, 500])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Tokenizing, str]]:
    engine = Tokenizing(request.param)
    with ServedApp(engine.app) as upstream:
        backend = OpenAIBackend(
            "served-model", base_url=upstream.url + "/v1/", engine="vllm", client=new_client()
        )
        with ServedApp(create_app(backend, model_name="gw")) as gateway:
            yield engine, gateway.url


def test_the_engine_counts_or_the_estimate_says_so(served: tuple[Tokenizing, str]) -> None:
    engine, url = served
    messages = [{"role": "user", "content": "one two three four"}]
    counted = httpx.post(
        url + "/v1/messages/count_tokens",
        json={
            "model": "gw",
            "messages": messages,
            "tools": [{"name": "f", "input_schema": SCHEMA}],
        },
    ).json()
    responses = httpx.post(
        url + "/v1/responses/input_tokens",
        json={"model": "gw", "input": "one two three four"},
    ).json()
    asked = engine.asked[0]
    assert asked["model"] == "served-model" and asked["add_generation_prompt"] is True
    assert asked["messages"] == messages
    assert asked["tools"][0]["function"]["name"] == "f"  # the tools as the engine gets them
    if engine.status == 200:
        assert counted["input_tokens"] == 7 + 4 + 11
        assert responses == {
            "object": "response.input_tokens",
            "input_tokens": 7 + 4,
            "toolwire": {"notices": []},
        }
    else:  # the engine did not answer: an estimate, named
        for body in (counted, responses):
            assert body["input_tokens"] > 0
            codes = [n["code"] for n in body["toolwire"]["notices"]]
            assert codes == ["tokens-estimated"]


def test_a_malformed_count_request_is_a_400_naming_the_field(
    served: tuple[Tokenizing, str],
) -> None:
    _, url = served
    r = httpx.post(url + "/v1/responses/input_tokens", json={"model": "gw", "input": 5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"

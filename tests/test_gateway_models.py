"""Many models behind one address (``serve --config models.toml``), and the round trip
through Responses and Anthropic Messages on the real local model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from toolwire.backends.factory import BackendSpec, build_backend
from toolwire.cli import _parser
from toolwire.cli.serve import served_models
from toolwire.errors import UsageError
from toolwire.server import create_app
from toolwire.server.config import ModelEntry, Models, read_config
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas


@pytest.fixture
def two() -> Iterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        yield a, b


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_a_config_serves_each_model_by_name(
    tmp_path: Path, two: tuple[FakeOpenAIServer, FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    monkeypatch.setenv("KEY_B", "b-secret")
    path = _config(
        tmp_path,
        f"""
[[models]]
name = "alpha"
upstream = "{a.base_url}"
upstream_model = "engine-a"

[[models]]
name = "beta"
upstream = "{b.base_url}"
upstream_model = "engine-b"
api_key_env = "KEY_B"
words = true
""",
    )
    args = _parser().parse_args(["serve", "--config", str(path)])
    with ServedApp(create_app(served_models(args))) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
        assert [m.id for m in client.models.list()] == ["alpha", "beta"]
        a.add_stream(text_deltas("from a"))
        b.add_stream(text_deltas("from b"))
        chat = client.chat.completions.create(
            model="beta", messages=[{"role": "user", "content": "hi"}]
        )
        assert chat.model == "beta" and chat.choices[0].message.content == "from b"
        response = client.responses.create(model="alpha", input="hi")
        assert response.model == "alpha" and response.output_text == "from a"
        assert a.requests[0]["model"] == "engine-a" and b.requests[0]["model"] == "engine-b"
        assert b.headers[0]["authorization"] == "Bearer b-secret"
        # an unknown name: a 404 in each API's own shape, nothing sent upstream
        with pytest.raises(openai.NotFoundError, match="no model named 'gamma'"):
            client.chat.completions.create(
                model="gamma", messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model="gamma", input="x")
        with pytest.raises(anthropic.NotFoundError, match="alpha, beta"):
            anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0).messages.create(
                model="gamma", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert len(a.requests) == len(b.requests) == 1


def test_without_upstream_model_the_clients_model_is_passed_on(
    two: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    a, _ = two
    args = _parser().parse_args(["serve", "--upstream", a.base_url])
    with ServedApp(create_app(served_models(args))) as served:
        for name in ("gpt-x", "gpt-y", "gpt-x"):
            a.add_stream(text_deltas("ok"))
            r = httpx.post(
                served.url + "/v1/chat/completions",
                json={"model": name, "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.status_code == 200 and r.json()["model"] == name
        r = httpx.post(
            served.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    assert [q["model"] for q in a.requests] == ["gpt-x", "gpt-y", "gpt-x"]
    # one pool per upstream, shared by every model named there, and reused: each request
    # rode the same kept connection
    assert a.peers[0][1] == a.peers[1][1] == a.peers[2][1]


def test_flags_keep_working_with_any_model_name(
    two: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    a, _ = two
    args = _parser().parse_args(["serve", "--upstream", a.base_url, "--upstream-model", "eng"])
    with ServedApp(create_app(served_models(args))) as served:
        a.add_stream(text_deltas("ok"))
        r = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "whatever", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 200 and a.requests[0]["model"] == "eng"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "lists no [[models]]"),
        ("[[models]]\nname = 'a'\n", "either upstream, ollama or gguf"),
        ("[[models]]\nname = 'a'\nupstream = 'http://x'\n", "needs upstream_model"),
        ("[[models]]\nname = 'a'\ngguf = 'm.gguf'\nupstream = 'http://x'\n", "not both"),
        ("[[models]]\nupstream = 'http://x'\nupstream_model = 'm'\n", "needs a name"),
        ("[[models]]\nname = 'a'\ngguf = 'x'\nport = 3\n", "port"),
        ("[[models]]\nname = 'a'\ngguf = 'x'\nctx = 'big'\n", "ctx"),
        ("[[models]]\nname = 'a'\ngguf = 'x'\napi_key_env = 'K'\n", "mixes keys"),
        ("[[models]]\nname = 'a'\ngguf = 'x'\n[[models]]\nname = 'a'\ngguf = 'y'\n", "twice"),
        ("[[models]\nname=", "not valid TOML"),
        ("[server]\nport = 3\n", "only [[models]]"),
    ],
)
def test_a_bad_config_says_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("[", r"\[")):
        read_config(_config(tmp_path, text))


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _required_call(served_url: str) -> httpx.Response:
    return httpx.post(
        served_url + "/v1/chat/completions",
        json={
            "model": "a",
            "messages": [{"role": "user", "content": "Weather in Oslo?"}],
            "tools": [WEATHER],
            "tool_choice": "required",
        },
    )


def test_the_engine_of_an_upstream_comes_from_its_config_entry_or_the_flag(
    tmp_path: Path, two: tuple[FakeOpenAIServer, FakeOpenAIServer]
) -> None:
    # llama-server is asked for a required call by the json_schema field it documents; a
    # server of no named engine gets nothing beyond the API's own fields
    a, b = two
    path = _config(
        tmp_path,
        f"[[models]]\nname = 'a'\nupstream = '{a.base_url}'\nupstream_model = 'm'\n"
        "engine = 'llama-server'\n",
    )
    args = _parser().parse_args(["serve", "--config", str(path)])
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    with ServedApp(create_app(served_models(args))) as served:
        a.add_stream(text_deltas(call))
        r = _required_call(served.url)
    assert r.status_code == 200, r.text
    assert a.requests[0]["json_schema"]["properties"]["name"]["enum"] == ["get_weather"]
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    for flags, engine_field in (([], False), (["--engine", "llama-server"], True)):
        args = _parser().parse_args(
            ["serve", "--upstream", b.base_url, "--upstream-model", "m", *flags]
        )
        with ServedApp(create_app(served_models(args))) as served:
            b.add_stream(text_deltas(call))
            assert _required_call(served.url).status_code == 200
        assert ("json_schema" in b.requests[-1]) is engine_field


def test_an_unknown_engine_is_told_at_start(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "[[models]]\nname = 'a'\nupstream = 'http://x'\nupstream_model = 'm'\nengine = 'tgi'\n",
    )
    with pytest.raises(UsageError, match="unknown engine"):
        read_config(path)
    args = _parser().parse_args(["serve", "--model", "m.gguf", "--engine", "vllm"])
    with pytest.raises(UsageError, match="--engine"):
        served_models(args)


def test_a_config_with_flags_is_refused(tmp_path: Path) -> None:
    path = _config(tmp_path, "[[models]]\nname = 'a'\ngguf = 'x'\n")
    args = _parser().parse_args(["serve", "--config", str(path), "--model", "y"])
    with pytest.raises(UsageError, match="--config"):
        served_models(args)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_the_local_model_loads_on_first_use_and_round_trips_in_each_api(
    qwen_gguf: Path, two: tuple[FakeOpenAIServer, FakeOpenAIServer]
) -> None:
    """Two upstreams and the real default model behind one config, chosen by ``model``: the
    local model is not loaded until asked; then a tool round trip through Responses and
    Messages, streamed and not: the call comes back typed, the result goes back by id, and
    an answer in words arrives."""
    built: list[str] = []

    def build(entry: ModelEntry) -> Any:
        built.append(entry.name)
        assert entry.spec is not None
        return build_backend(entry.spec)

    a, b = two
    entries = [
        ModelEntry("up-a", BackendSpec("openai", model="engine-a", base_url=a.base_url)),
        ModelEntry("local", BackendSpec("local", model=str(qwen_gguf), ctx=2048)),
        ModelEntry("up-b", BackendSpec("openai", model="engine-b", base_url=b.base_url)),
    ]
    models = Models(entries, build)
    with ServedApp(create_app(models)) as served:
        for name, fake in (("up-a", a), ("up-b", b)):
            fake.add_stream(text_deltas(f"from {name}"))
            r = httpx.post(
                served.url + "/v1/chat/completions",
                json={"model": name, "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.json()["choices"][0]["message"]["content"] == f"from {name}"
        assert built == ["up-a", "up-b"]  # the local model: not yet
        oa = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0, timeout=300)
        an = anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0, timeout=300)
        tool = {
            "type": "function",
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": SCHEMA,
        }
        for stream in (False, True):
            ask: dict[str, Any] = {
                "model": "local",
                "input": "What is the weather in Oslo?",
                "tools": [tool],
                "temperature": 0,
            }
            if stream:
                with oa.responses.stream(**ask) as events:
                    first = events.get_final_response()
            else:
                first = oa.responses.create(**ask)
            (call,) = [o for o in first.output if o.type == "function_call"]
            assert (
                call.name == "get_weather" and json.loads(call.arguments)["city"].lower() == "oslo"
            )
            items = [
                {"role": "user", "content": ask["input"]},
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": '{"forecast": "snow", "temp_c": -3}',
                },
            ]
            if stream:
                with oa.responses.stream(**{**ask, "input": items}) as events:
                    second = events.get_final_response()
            else:
                second = oa.responses.create(**{**ask, "input": items})
            assert not [o for o in second.output if o.type == "function_call"]
            assert "snow" in second.output_text.lower() or "-3" in second.output_text

            zero = {"temperature": 0}  # this client no longer takes it as an argument
            body: dict[str, Any] = {
                "model": "local",
                "max_tokens": 128,
                "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "Get the weather.",
                        "input_schema": SCHEMA,
                    }
                ],
            }
            if stream:
                with an.messages.stream(**body, extra_body=zero) as events:
                    message = events.get_final_message()
            else:
                message = an.messages.create(**body, extra_body=zero)
            (use,) = [b for b in message.content if b.type == "tool_use"]
            assert message.stop_reason == "tool_use" and use.input["city"].lower() == "oslo"
            body["messages"] += [
                {"role": "assistant", "content": [b.model_dump() for b in message.content]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": use.id,
                            "content": '{"forecast": "snow", "temp_c": -3}',
                        }
                    ],
                },
            ]
            if stream:
                with an.messages.stream(**body, extra_body=zero) as events:
                    answer = events.get_final_message()
            else:
                answer = an.messages.create(**body, extra_body=zero)
            text = "".join(b.text for b in answer.content if b.type == "text")
            assert answer.stop_reason == "end_turn" and ("snow" in text.lower() or "-3" in text)
        counted = an.messages.count_tokens(
            model="local", messages=[{"role": "user", "content": "Hello there"}]
        )
        assert 3 <= counted.input_tokens <= 60  # exact: the template's own tokens
    assert built == ["up-a", "up-b", "local"]  # loaded once

"""What a client sends reaches the engine: the sampling fields, the engine's own fields and
fields no API lists, through each of the three APIs, streamed and not, as the official
clients send them, to a recording upstream speaking real HTTP (and to Ollama's API in its
``options``); a stop text is cut by the gateway, never inside a call; an engine that cannot
honour a field says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from toolwire import events as ev
from toolwire.backends import OllamaBackend, OpenAIBackend, stream_sync
from toolwire.backends.http import new_client
from toolwire.pipeline import Request, Sampling
from toolwire.pipeline.stops import Stops
from toolwire.server import create_app
from toolwire.server.passing import table
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

ASK = [{"role": "user", "content": "Weather in Rome?"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}

#: Every field of the issue's list, with the value a client sends.
SAMPLING = {
    "top_p": 0.8,
    "top_k": 20,
    "min_p": 0.05,
    "seed": 1234,
    "presence_penalty": 1.5,
    "frequency_penalty": 0.25,
    "repetition_penalty": 1.1,
    "logit_bias": {"50256": -100},
}
ENGINE = {
    "reasoning_effort": "low",
    "prompt_cache_key": "conversation-7",
    "user": "user-9",
    "chat_template_kwargs": {"enable_thinking": False},
    "an_engine_field": {"nested": [1, 2]},
}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def gateway(upstream: FakeOpenAIServer) -> Iterator[str]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield served.url


def _answer(upstream: FakeOpenAIServer) -> None:
    upstream.add_stream(text_deltas("Sunny.", size=3))


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_passes_every_field(
    upstream: FakeOpenAIServer, gateway: str, stream: bool
) -> None:
    _answer(upstream)
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    extra = {k: v for k, v in {**SAMPLING, **ENGINE}.items() if k not in _OPENAI_ARGS}
    kwargs = {k: v for k, v in {**SAMPLING, **ENGINE}.items() if k in _OPENAI_ARGS}
    reply = client.chat.completions.create(
        model="gw",
        messages=ASK,  # type: ignore[arg-type]
        tools=[TOOL],  # type: ignore[list-item]
        stop=["\nUser:"],
        stream=stream,
        extra_body=extra,
        **kwargs,
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in reply if c.choices)  # type: ignore[union-attr]
    else:
        text = reply.choices[0].message.content  # type: ignore[union-attr]
    assert text == "Sunny."
    sent = upstream.requests[-1]
    for key, value in {**SAMPLING, **ENGINE}.items():
        assert sent[key] == value, key
    assert sent["stop"] == ["\nUser:"]  # native tools: the engine reads the calls and cuts


#: The fields the official client takes as arguments (the rest go in ``extra_body``).
_OPENAI_ARGS = {
    "top_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "reasoning_effort",
    "prompt_cache_key",
    "user",
}


@pytest.mark.parametrize("stream", [False, True])
def test_responses_passes_every_field(
    upstream: FakeOpenAIServer, gateway: str, stream: bool
) -> None:
    _answer(upstream)
    client = openai.OpenAI(base_url=gateway + "/v1", api_key="unused", max_retries=0)
    extra = {k: v for k, v in {**SAMPLING, **ENGINE}.items() if k not in ("top_p", "user")}
    del extra["reasoning_effort"]
    reply = client.responses.create(
        model="gw",
        input="Weather in Rome?",
        top_p=0.8,
        user="user-9",
        reasoning={"effort": "low"},
        stream=stream,
        extra_body=extra,
    )
    if stream:
        text = "".join(e.delta for e in reply if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    else:
        text = reply.output_text  # type: ignore[union-attr]
    assert text == "Sunny."
    sent = upstream.requests[-1]
    for key, value in {**SAMPLING, **ENGINE}.items():
        assert sent[key] == value, key
    assert "reasoning" not in sent and "input" not in sent  # the API's own, translated


@pytest.mark.parametrize("stream", [False, True])
def test_messages_passes_every_field(
    upstream: FakeOpenAIServer, gateway: str, stream: bool
) -> None:
    _answer(upstream)
    client = anthropic.Anthropic(base_url=gateway, api_key="unused", max_retries=0)
    extra = {k: v for k, v in {**SAMPLING, **ENGINE}.items() if k != "user"}
    ask: dict[str, Any] = {
        "model": "gw",
        "max_tokens": 50,
        "messages": ASK,
        "stop_sequences": ["\nUser:"],
        "metadata": {"user_id": "user-9"},
        "extra_body": extra,
    }
    if stream:
        with client.messages.stream(**ask) as events:
            text = events.get_final_text()
    else:
        message = client.messages.create(**ask)
        text = "".join(b.text for b in message.content if b.type == "text")
    assert text == "Sunny."
    sent = upstream.requests[-1]
    for key, value in {**SAMPLING, **ENGINE}.items():
        assert sent[key] == value, key
    assert sent["stop"] == ["\nUser:"]
    assert "stop_sequences" not in sent and "metadata" not in sent


def test_a_field_toolwire_sets_is_not_overridden(upstream: FakeOpenAIServer, gateway: str) -> None:
    """A field the client's API does not have, but that toolwire sets on the engine's
    request (the usage of a stream), stays toolwire's: a client cannot turn it off."""
    _answer(upstream)
    body = {
        "model": "gw",
        "max_tokens": 9,
        "stream": True,
        "messages": ASK,
        "stream_options": {"include_usage": False},
    }
    with httpx.stream("POST", gateway + "/v1/messages", json=body) as r:
        assert r.status_code == 200
        r.read()
    assert upstream.requests[-1]["stream_options"] == {"include_usage": True}
    assert upstream.requests[-1]["model"] == "engine"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"top_p": 2}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"seed": "7"}, "seed"),
        ({"stop_sequences": "x"}, "stop_sequences"),
        ({"stop_sequences": ["x"] * 17}, "stop_sequences"),
        ({"logit_bias": {"1": 101}}, "logit_bias.1"),
    ],
)
def test_a_malformed_sampling_field_is_a_400_in_messages(
    upstream: FakeOpenAIServer, gateway: str, body: dict[str, Any], field: str
) -> None:
    r = httpx.post(
        gateway + "/v1/messages",
        json={"model": "gw", "max_tokens": 9, "messages": ASK, **body},
    )
    assert r.status_code == 400, r.text
    assert field.split(".")[0] in r.json()["error"]["message"]
    assert not upstream.requests


def test_ollama_takes_the_sampling_fields_in_its_options() -> None:
    with FakeOpenAIServer() as fake:
        fake.add_ollama([{"content": "Sunny."}])
        backend = OllamaBackend("engine", base_url=fake.ollama_url)
        request = Request(
            ASK,
            sampling=Sampling(top_p=0.8, top_k=20, seed=3, stop=("X",), repetition_penalty=1.1),
            extra={"keep_alive": "5m", "options": {"num_ctx": 8192}},
        )
        events = list(stream_sync(backend.stream(request)))
        sent = fake.requests[-1]
    assert sent["options"] == {
        "num_ctx": 8192,
        "top_p": 0.8,
        "top_k": 20,
        "seed": 3,
        "stop": ["X"],
        "repeat_penalty": 1.1,
    }
    assert sent["keep_alive"] == "5m"
    assert not [e for e in events if isinstance(e, ev.Notice)]
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Sunny."


def test_ollama_names_what_it_cannot_honour() -> None:
    with FakeOpenAIServer() as fake:
        fake.add_ollama([{"content": "Sunny."}])
        backend = OllamaBackend("engine", base_url=fake.ollama_url)
        request = Request(ASK, sampling=Sampling(logit_bias={"1": 5.0}))
        events = list(stream_sync(backend.stream(request)))
    told = [e for e in events if isinstance(e, ev.Notice) and e.code == "field-not-honoured"]
    assert told and "logit_bias" in told[0].message


# ------------------------------------------------------------------ stop texts


def test_a_stop_text_in_the_reply_ends_it_there() -> None:
    """An upstream whose calls toolwire reads from its text (here a model given its tools
    in words) is not given ``stop``: the gateway cuts the reply's text, never a call."""
    with FakeOpenAIServer() as fake:
        code = "def f():\n\n    return 1"
        call = json.dumps({"name": "write", "arguments": {"code": code}})
        fake.add_stream(text_deltas(f"<tool_call>{call}</tool_call>Done.\n\nMore text", size=4))
        backend = OpenAIBackend("engine", base_url=fake.base_url, client=new_client(), words=True)
        tool = {
            "type": "function",
            "function": {
                "name": "write",
                "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
            },
        }
        request = Request(ASK, [tool], sampling=Sampling(stop=("\n\n",)))
        events = list(stream_sync(backend.stream(request)))
        assert "stop" not in fake.requests[-1]
    ends = [e for e in events if isinstance(e, ev.CallEnd)]
    assert [c.call.arguments for c in ends] == [{"code": code}]  # its blank line kept
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Done."
    assert isinstance(events[-1], ev.Done)


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_stops_cut_at_any_split(size: int) -> None:
    text = "Hello there. STOP here, and STOP again"
    stops = Stops(["STOP", "ST!"])
    out: list[ev.Event] = []
    for i in range(0, len(text), size):
        out += stops.push(ev.TextDelta(text[i : i + size]))
        if stops.closed:
            break
    assert "".join(e.text for e in out if isinstance(e, ev.TextDelta)) == "Hello there. "
    assert isinstance(out[-1], ev.Done) and out[-1].finish_reason == "stop"
    # a text that only begins like a stop is given back whole, in order, at the next event
    stops = Stops(["STOP"])
    got = stops.push(ev.TextDelta("a ST")) + stops.push(ev.Done("stop"))
    assert [type(e) for e in got] == [ev.TextDelta, ev.TextDelta, ev.Done]
    assert "".join(e.text for e in got if isinstance(e, ev.TextDelta)) == "a ST"


def test_the_docs_table_is_made_from_the_rule() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[1] / "docs" / "gateway.md").read_text(encoding="utf-8")
    assert table() in docs


def test_a_call_required_with_no_tools_is_the_same_400_in_every_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """One decision for the three APIs: the reply could not be what was asked."""
    asks = {
        "/v1/chat/completions": {"messages": ASK, "tool_choice": "required"},
        "/v1/responses": {"input": "Weather?", "tool_choice": "required"},
        "/v1/messages": {"messages": ASK, "max_tokens": 9, "tool_choice": {"type": "any"}},
    }
    for path, body in asks.items():
        r = httpx.post(gateway + path, json={"model": "gw", **body})
        assert r.status_code == 400, (path, r.text)
        assert "no tools to call" in json.dumps(r.json()), path
    assert not upstream.requests


def test_an_unknown_field_reaches_the_engine_from_every_api(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    asks = {
        "/v1/chat/completions": {"messages": ASK},
        "/v1/responses": {"input": "Weather?"},
        "/v1/messages": {"messages": ASK, "max_tokens": 9},
    }
    for path, body in asks.items():
        _answer(upstream)
        r = httpx.post(
            gateway + path, json={"model": "gw", "vendor_knob": [1, {"a": None}], **body}
        )
        assert r.status_code == 200, (path, r.text)
        assert upstream.requests[-1]["vendor_knob"] == [1, {"a": None}], path


def test_ollama_takes_the_thinking_switch_and_heals_a_model_that_cannot_think() -> None:
    with FakeOpenAIServer() as fake:
        fake.add_ollama([{"content": "Sunny."}])
        backend = OllamaBackend("engine", base_url=fake.ollama_url)
        off = Request(ASK, think=False, extra={"reasoning_effort": "none"})
        list(stream_sync(backend.stream(off)))
        assert fake.requests[-1]["think"] is False
        assert "reasoning_effort" not in fake.requests[-1]  # read into its think
        fake.add_error(400, '"engine" does not support thinking')
        fake.add_ollama([{"content": "Sunny."}])
        events = list(stream_sync(backend.stream(Request(ASK, think=True))))
        assert "think" not in fake.requests[-1] and fake.requests[-2]["think"] is True
    told = [e for e in events if isinstance(e, ev.Notice)]
    assert [e.code for e in told] == ["field-not-honoured"] and "thinking" in told[0].message
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Sunny."


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"logit_bias": {"²": 5}}, "logit_bias"),
        ({"logit_bias": {str(i): 1 for i in range(301)}}, "logit_bias"),
    ],
)
def test_a_logit_bias_is_token_ids_and_bounded(
    upstream: FakeOpenAIServer, gateway: str, body: dict[str, Any], field: str
) -> None:
    r = httpx.post(gateway + "/v1/chat/completions", json={"model": "gw", "messages": ASK, **body})
    assert r.status_code == 400 and r.json()["error"]["param"].startswith(field), r.text
    assert not upstream.requests


def test_an_upstream_whose_calls_toolwire_reads_is_never_given_stop() -> None:
    with FakeOpenAIServer() as fake:
        fake.add_stream(
            text_deltas('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>')
        )
        backend = OpenAIBackend("m", base_url=fake.base_url, tool_format="hermes")
        list(stream_sync(backend.stream(Request(ASK, [TOOL], sampling=Sampling(stop=("\n",))))))
        assert "stop" not in fake.requests[-1]


def test_stops_end_where_the_first_stop_is_finished_whatever_the_pieces() -> None:
    import random

    rng = random.Random(7)
    for _ in range(3000):
        stops = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 3))) for _ in range(2)]
        text = "".join(rng.choice("abc") for _ in range(rng.randint(0, 12)))
        results = set()
        for _ in range(4):
            cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, max(0, len(text) - 1))))
            pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            got = Stops(stops)
            out: list[ev.Event] = []
            for piece in pieces:
                out += got.push(ev.TextDelta(piece))
            out += got.push(ev.Done("length"))
            results.add("".join(e.text for e in out if isinstance(e, ev.TextDelta)))
        assert len(results) == 1, (stops, text, results)


def test_fields_that_would_change_the_engine_for_every_client_are_withheld(
    upstream: FakeOpenAIServer, gateway: str
) -> None:
    """A client may not set another token limit beside its API's, an engine's queue
    priority or slot, how long it keeps the model, or Ollama's load options; more than one
    choice is refused. Each withheld field is named."""
    _answer(upstream)
    body = {
        "model": "gw",
        "max_tokens": 9,
        "messages": ASK,
        "max_completion_tokens": 100_000,
        "n_predict": -1,
        "priority": -100,
        "keep_alive": 0,
        "options": {"num_ctx": 131_072, "top_k": 5},
    }
    r = httpx.post(gateway + "/v1/messages", json=body)
    assert r.status_code == 200, r.text
    sent = upstream.requests[-1]
    for key in ("max_completion_tokens", "n_predict", "priority", "keep_alive"):
        assert key not in sent, key
    assert sent["options"] == {"top_k": 5} and sent["max_tokens"] == 9
    (told,) = [n for n in r.json()["toolwire"]["notices"] if n["code"] == "field-not-honoured"]
    for key in ("max_completion_tokens", "n_predict", "priority", "keep_alive", "options.num_ctx"):
        assert key in told["message"], key
    for path, ask in (
        ("/v1/messages", {"messages": ASK, "max_tokens": 9, "n": 5}),
        ("/v1/responses", {"input": "x", "n": 2}),
        ("/v1/chat/completions", {"messages": ASK, "best_of": 3}),
        ("/v1/responses", {"input": "x", "conversation": "conv_1"}),
        ("/v1/responses", {"input": "x", "prompt": {"id": "pmpt_1"}}),
    ):
        r = httpx.post(gateway + path, json={"model": "gw", **ask})
        assert r.status_code == 400, (path, r.text)


@pytest.mark.parametrize("stream", [False, True])
def test_messages_says_which_stop_sequence_ended_the_reply(stream: bool) -> None:
    """Where the gateway cuts the reply (a model given its tools in words), Messages says
    ``stop_sequence`` and names it, as Anthropic's API does."""
    with FakeOpenAIServer() as fake:
        fake.add_stream(text_deltas("Hello there.\n\nMore text.", size=3))
        backend = OpenAIBackend("m", base_url=fake.base_url, words=True)
        with ServedApp(create_app(backend, model_name="gw")) as served:
            client = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
            ask: dict[str, Any] = {
                "model": "gw",
                "max_tokens": 50,
                "messages": ASK,
                "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
                "stop_sequences": ["\n\n"],
            }
            if stream:
                with client.messages.stream(**ask) as events:
                    message = events.get_final_message()
            else:
                message = client.messages.create(**ask)
    assert [b.text for b in message.content if b.type == "text"] == ["Hello there."]
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "\n\n"

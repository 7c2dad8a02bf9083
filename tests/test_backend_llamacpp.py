"""The local backend end to end with llama-cpp-python and the real Qwen2.5-Coder-0.5B GGUF.

These check the pipeline, not the model's skill: the template and family come from the
model itself, the tools reach the prompt, special tokens survive decoding, generation ends
at the model's own end token or the limit, and the reply goes through the family parser.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire.backends import Request, stream_sync
from toolwire.backends.llamacpp import LlamaCppBackend, engine_threads
from toolwire.errors import UsageError
from toolwire.events import Done, Notice, TextDelta
from toolwire.formats.base import assemble
from toolwire.pipeline import planned, reply
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .replies import TOOLS

USER = [{"role": "user", "content": "What is the weather in Paris for 3 days?"}]


def test_template_and_family_come_from_the_model(llama_backend: LlamaCppBackend) -> None:
    assert llama_backend.family is not None and llama_backend.family.name == "hermes"
    assert llama_backend.template.eos_token == "<|im_end|>"


def test_the_tools_are_in_the_prompt_and_counted(llama_backend: LlamaCppBackend) -> None:
    with_tools = llama_backend.prompt(*planned(llama_backend, Request(USER, TOOLS)))
    without = llama_backend.prompt(*planned(llama_backend, Request(USER)))
    assert "<tools>" in with_tools and '"name": "get_weather"' in with_tools
    assert "<tools>" not in without
    assert llama_backend.count_tokens(with_tools) > llama_backend.count_tokens(without) + 50


def test_special_tokens_and_split_characters_survive_decoding(
    llama_backend: LlamaCppBackend,
) -> None:
    text = 'caf\u00e9 \u2615 \u65e5\u672c <tool_call>\n{"name": "x"}\n</tool_call><|im_end|>'
    tokens = llama_backend.llama.tokenize(text.encode(), add_bos=False, special=True)
    assert len(tokens) < len(text)  # the markers are single special tokens
    assert llama_backend.decode(tokens) == text


def test_a_generation_runs_through_the_family_parser(
    fresh_llama_backend: LlamaCppBackend,
) -> None:
    """At temperature 0 the model writes its call in a ```json fence, not in its template's
    <tool_call> tags, and ends its turn; the fence is read as the call, and named. The call
    it began is finished under the grammar of the declared tools, and that is named too."""
    request = Request(USER, TOOLS, max_tokens=60, temperature=0.0)
    events: list[Any] = list(stream_sync(fresh_llama_backend.stream(request)))
    done = events[-1]
    assert isinstance(done, Done)
    assert done.usage is not None
    prompt = fresh_llama_backend.prompt(*planned(fresh_llama_backend, request))
    prompt_tokens = fresh_llama_backend.count_tokens(prompt)
    assert done.usage == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 35,
        "cached_tokens": 0,
    }
    assert done.finish_reason == "tool_calls"
    result = assemble(events)
    assert result.content == "" and result.reasoning == ""
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris", "days": 3})
    ]
    assert result.calls[0].arguments_text == '{"city": "Paris", "days": 3}'
    assert [e.code for e in events if isinstance(e, Notice)] == [
        "constrained-call",
        "recovered-fenced-json",
    ]
    assert not [e for e in events if isinstance(e, TextDelta)]


def test_the_context_budget_counts_the_tools(llama_backend: LlamaCppBackend) -> None:
    long = [{"role": "user", "content": "word " * 2500}]  # one turn: nothing to drop
    with pytest.raises(UsageError, match="context"):
        list(stream_sync(llama_backend.stream(Request(long, TOOLS, max_tokens=10))))


def test_closing_the_stream_stops_generation(llama_backend: LlamaCppBackend) -> None:
    request = Request([{"role": "user", "content": "Count from 1 to 200."}], max_tokens=300)
    events = stream_sync(llama_backend.stream(request))
    first = next(events)
    assert isinstance(first, TextDelta)
    events.close()  # type: ignore[attr-defined]
    # the context is free again: another generation runs to its end
    again = list(stream_sync(llama_backend.stream(Request(USER, max_tokens=5))))
    assert isinstance(again[-1], Done)


def test_an_old_turn_is_dropped_to_fit(llama_backend: LlamaCppBackend) -> None:
    old_turn = [
        {"role": "user", "content": "Tell me a long story. " + "word " * 1900},
        {"role": "assistant", "content": "Once upon a time."},
    ]
    request = Request([*old_turn, *USER], TOOLS, max_tokens=5)
    events = list(stream_sync(llama_backend.stream(request)))
    assert isinstance(events[-1], Done)
    assert events[-1].usage is not None
    # the prompt that ran is the one without the old turn
    assert events[-1].usage["prompt_tokens"] == llama_backend.count_tokens(
        llama_backend.prompt(*planned(llama_backend, Request(USER, TOOLS)))
    )


def test_max_tokens_is_a_ceiling_not_a_reservation(llama_backend: LlamaCppBackend) -> None:
    """Claude Code asks 128,000 tokens of any model: the reply may run to the room the prompt
    leaves, and the conversation is not pruned for the rest."""
    old_turn = [
        {"role": "user", "content": "Tell me a story. " + "word " * 900},
        {"role": "assistant", "content": "Once upon a time."},
    ]
    request = Request([*old_turn, *USER], TOOLS, max_tokens=128_000)
    sent, plan = planned(llama_backend, request)
    prepared = llama_backend.prepare(sent, plan)
    assert len(prepared.request.messages) == 3  # the old turn kept
    assert prepared.request.max_tokens == llama_backend.n_ctx - len(prepared.payload)
    events = list(stream_sync(llama_backend.stream(Request(USER, max_tokens=128_000))))
    assert isinstance(events[-1], Done)


def test_a_prompt_that_cannot_fit_is_the_client_s_error(llama_backend: LlamaCppBackend) -> None:
    alone = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(UsageError, match="context is 2048"):
        list(stream_sync(llama_backend.stream(Request(alone, max_tokens=128_000))))


def test_through_the_gateway_a_prompt_too_long_is_a_400_in_each_api(
    llama_backend: LlamaCppBackend,
) -> None:
    long = "word " * 3000
    asks = {
        "/v1/chat/completions": {"messages": [{"role": "user", "content": long}]},
        "/v1/responses": {"input": long},
        "/v1/messages": {"messages": [{"role": "user", "content": long}], "max_tokens": 128_000},
    }
    with ServedApp(create_app(llama_backend, model_name="local")) as served:
        for path, body in asks.items():
            for stream in (False, True):
                r = httpx.post(
                    served.url + path,
                    json={"model": "local", "stream": stream, **body},
                    timeout=300,
                )
                assert r.status_code == 400, (path, stream, r.text)
                assert "context is 2048" in r.text
        ok = httpx.post(
            served.url + "/v1/messages",
            json={"model": "local", "max_tokens": 128_000, "messages": USER},
            timeout=300,
        )
        assert ok.status_code == 200, ok.text


def test_threads_are_one_per_physical_core(tmp_path: Path) -> None:
    # a machine of two cores with two hardware threads each, as Linux describes it
    for cpu, core in enumerate([0, 1, 0, 1]):
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text("0\n")
        (topology / "core_id").write_text(f"{core}\n")
    assert engine_threads([0, 1, 2, 3], tmp_path) == 2
    assert engine_threads([0, 2], tmp_path) == 1  # two threads of one core
    assert engine_threads([0, 1, 2, 3], tmp_path / "elsewhere") == 4  # topology unknown
    assert 1 <= engine_threads() <= len(os.sched_getaffinity(0))


def test_the_engine_is_set_as_llama_server_sets_it(qwen_gguf: Path) -> None:
    """Every token on every physical core, flash attention on: llama-cpp-python's defaults
    (half the CPUs per token, no flash attention) were half llama-server's decode speed."""
    import llama_cpp

    backend = LlamaCppBackend(qwen_gguf, n_ctx=256)
    params = backend.llama.context_params
    assert params.n_threads == params.n_threads_batch == engine_threads()
    assert params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED


def test_every_reply_is_generated_on_one_thread(
    llama_backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread per reply made a pool of llama.cpp's threads per reply (see ``_Worker``)."""
    seen: list[threading.Thread] = []
    generation = llama_backend.generation

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread())
        return generation(*args, **kwargs)

    monkeypatch.setattr(llama_backend, "generation", recorded)
    request = Request([{"role": "user", "content": "Say hi."}], [], max_tokens=2)
    for _ in range(3):
        assert list(stream_sync(reply(llama_backend, request)))
    assert len(seen) == 3
    assert seen[0] is seen[1] is seen[2]
    assert seen[0] is not threading.main_thread()

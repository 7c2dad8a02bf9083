"""The local model honours the sampling fields llama-server honours: a seed gives the same
reply again and another seed another one; ``top_k`` 1 is the most likely token at any
temperature; a stop text ends the reply, never inside a call the grammar finishes; what it
cannot honour is named. On the default model, in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from toolwire.backends import stream_sync
from toolwire.backends.constrain import _pick
from toolwire.backends.prompt import TemplateTransport
from toolwire.events import CallEnd, Done, Notice, TextDelta
from toolwire.pipeline import Request, Sampling
from toolwire.templates import ChatTemplate

ASK = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def _run(backend: Any, request: Request) -> list[Any]:
    backend.llama.reset()
    return list(stream_sync(backend.stream(request)))


def _text(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_a_seed_gives_the_same_reply_and_another_seed_another(llama_backend: Any) -> None:
    """As a server meets it: other requests between, the model's context left as they left
    it (a kept prefix would change the logits a little: a seeded prompt is evaluated whole)."""

    def reply(seed: int) -> str:
        request = Request(ASK, temperature=1.3, max_tokens=24, sampling=Sampling(seed=seed))
        return _text(list(stream_sync(llama_backend.stream(request))))

    def other() -> None:
        list(stream_sync(llama_backend.stream(Request([ASK[0], *ASK], max_tokens=3))))

    other()
    first = reply(11)
    assert first and reply(11) == first  # its prompt whole in the context already
    other()
    assert reply(11) == first
    assert any(reply(seed) != first for seed in (12, 13, 14))


def test_top_k_one_is_the_most_likely_token_at_any_temperature(llama_backend: Any) -> None:
    greedy = _text(_run(llama_backend, Request(ASK, temperature=0, max_tokens=16)))
    hot = Request(ASK, temperature=1.8, max_tokens=16, sampling=Sampling(top_k=1, seed=5))
    assert _text(_run(llama_backend, hot)) == greedy


def test_a_stop_text_ends_the_reply(llama_backend: Any) -> None:
    whole = _text(_run(llama_backend, Request(ASK, temperature=0, max_tokens=40)))
    words = whole.split()
    stop = words[len(words) // 2]
    events = _run(
        llama_backend, Request(ASK, temperature=0, max_tokens=40, sampling=Sampling(stop=(stop,)))
    )
    assert _text(events) == whole[: whole.index(stop)]
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"


def test_a_stop_text_inside_a_call_does_not_cut_it(llama_backend: Any) -> None:
    """The call's own text holds the stop text (``"`` is in every JSON call): the call is
    read whole, under the grammar."""
    ask = [{"role": "user", "content": "What's the weather in Paris for 3 days?"}]
    request = Request(ask, [WEATHER], max_tokens=80, sampling=Sampling(stop=('"', "Paris")))
    events = _run(llama_backend, request)
    (call,) = [e.call for e in events if isinstance(e, CallEnd)]
    assert call.name == "get_weather" and call.arguments["city"] == "Paris"
    jsonschema.validate(call.arguments, WEATHER["function"]["parameters"])  # type: ignore[index]


def test_logit_bias_forces_and_bans_tokens(llama_backend: Any) -> None:
    (banana,) = llama_backend.llama.tokenize(b" banana", add_bos=False)
    forced = Request(
        ASK, max_tokens=3, sampling=Sampling(logit_bias={str(banana): 100, "999999999": 5})
    )
    assert _text(_run(llama_backend, forced)) == " banana" * 3
    greedy = _run(llama_backend, Request(ASK, temperature=0, max_tokens=6))
    first = next(e for e in greedy if isinstance(e, TextDelta)).text
    (token, *_) = llama_backend.llama.tokenize(first.encode(), add_bos=False)
    banned = Request(
        ASK, temperature=0, max_tokens=6, sampling=Sampling(logit_bias={str(token): -100})
    )
    assert not _text(_run(llama_backend, banned)).startswith(first)


def test_what_the_local_engine_cannot_honour_is_named(llama_backend: Any) -> None:
    request = Request(
        ASK,
        max_tokens=4,
        sampling=Sampling(logit_bias={"1": 2.0}, seed=3),
        extra={"chat_template_kwargs": {"x": 1}, "cache_prompt": True},
    )
    (told,) = [e for e in _run(llama_backend, request) if isinstance(e, Notice)]
    assert told.code == "field-not-honoured"
    assert "cache_prompt" in told.message
    for used in ("seed", "logit_bias", "chat_template_kwargs"):
        assert used not in told.message


QWEN3 = ChatTemplate(
    (Path(__file__).parent / "fixtures" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize(
    ("extra", "think"),
    [
        ({"chat_template_kwargs": {"enable_thinking": False}}, False),
        ({"chat_template_kwargs": {"enable_thinking": True}}, True),
        ({"reasoning_effort": "none"}, False),
        ({"reasoning_effort": "high"}, True),
        ({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, False),
    ],
)
def test_chat_template_kwargs_and_reasoning_effort_reach_the_template(
    extra: dict[str, Any], think: bool
) -> None:
    """Qwen3's switch, as vLLM, SGLang and llama-server users turn its thinking off."""
    prompt = TemplateTransport(QWEN3).planned_prompt(Request(ASK, extra=extra))
    assert prompt.endswith("<|im_start|>assistant\n") is think
    assert prompt.endswith("<think>\n\n</think>\n\n") is not think


def test_a_template_variable_the_client_may_not_set_is_left_out() -> None:
    template = ChatTemplate("{{ messages | length }}|{{ greeting }}|{{ add_generation_prompt }}")
    prompt = template.render(
        ASK,
        template_kwargs={"greeting": "hi", "messages": [], "add_generation_prompt": 5, "_x": 1},
    )
    assert prompt == "1|hi|True"


def test_the_constrained_sampler_honours_top_k_top_p_and_min_p() -> None:
    """Under a grammar the token is drawn in Python, as llama.cpp's samplers draw it."""
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    rng = np.random.default_rng(0)

    def drawn(sampling: Sampling) -> set[int]:
        return {_pick(logits, 1.0, rng, sampling) for _ in range(400)}

    assert drawn(Sampling(top_k=1)) == {0}
    assert drawn(Sampling(top_k=2, min_p=0, top_p=1)) == {0, 1}
    assert drawn(Sampling(top_k=0, min_p=0, top_p=0.7)) == {0, 1}
    assert drawn(Sampling(top_k=0, min_p=0.5, top_p=1)) == {0, 1}
    assert drawn(Sampling(top_k=0, min_p=0, top_p=1)) == {0, 1, 2, 3}
    # as llama.cpp's chain: the cuts see the probabilities before temperature
    hot = np.log(np.array([0.6, 0.35, 0.05], dtype=np.float32))
    assert {_pick(hot, 2.0, rng, Sampling(top_k=0, top_p=1, min_p=0.1)) for _ in range(400)} == {
        0,
        1,
    }
    with pytest.raises(ValueError):
        _pick(np.full(4, -np.inf, dtype=np.float32), 1.0, rng)


def test_a_negative_seed_is_any_seed_and_the_grammar_still_holds(llama_backend: Any) -> None:
    """llama.cpp's tools say ``seed: -1`` for "any": a required call is still written
    under its grammar (a negative seed used to fail the grammar's sampler)."""
    request = Request(
        [{"role": "user", "content": "Weather in Paris?"}],
        [WEATHER],
        tool_choice="required",
        temperature=0.7,
        max_tokens=60,
        sampling=Sampling(seed=-1),
    )
    events = _run(llama_backend, request)
    (call,) = [e.call for e in events if isinstance(e, CallEnd)]
    assert call.name == "get_weather"
    assert "constrained-call" in [e.code for e in events if isinstance(e, Notice)]

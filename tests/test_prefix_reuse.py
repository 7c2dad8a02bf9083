"""The prompt prefix kept between turns on the real default model: turn 2 evaluates only its
new tokens, after a free reply and after a call constrained from its first token; two
conversations taking turns each get their own prefix back; the usage counts the whole
prompt, and the part not evaluated again as ``cached_tokens``.

Counted, never timed: every token the model evaluates goes through ``Llama.eval``, which
these tests count on the real model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolwire import events as ev
from toolwire.backends import Request, stream_sync
from toolwire.backends.prefix import SavedPrefixes, common_prefix
from toolwire.pipeline import planned

READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the project.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file's path."}},
            "required": ["path"],
        },
    },
}


def _system(topic: str) -> str:
    """A system prompt of some 500 tokens, as an agent's are (longer than the least
    prefix worth saving)."""
    rules = [
        f"Rule {i}: when the user asks about {topic}, be precise and brief." for i in range(30)
    ]
    return f"You are a coding agent working on {topic}.\n" + "\n".join(rules)


class Counted:
    """The real model's evaluations, counted: the tokens of each ``eval`` call."""

    def __init__(self, llama: Any) -> None:
        self.calls: list[int] = []
        self._eval = llama.eval
        llama.eval = self

    def __call__(self, tokens: Any) -> None:
        self.calls.append(len(tokens))
        self._eval(tokens)


@pytest.fixture(scope="module")
def backend(qwen_gguf: Path) -> Iterator[Any]:
    pytest.importorskip("llama_cpp", reason="the local extra: pip install 'toolwire[local]'")
    from toolwire.backends.llamacpp import LlamaCppBackend

    yield LlamaCppBackend(qwen_gguf, n_ctx=4096, n_threads=2)


@pytest.fixture
def counted(backend: Any) -> Iterator[Counted]:
    backend.llama.reset()
    backend.prefixes = SavedPrefixes()
    counter = Counted(backend.llama)
    yield counter
    del backend.llama.eval  # the instance's own eval, uncounted, again


def _prompt(backend: Any, request: Request) -> list[int]:
    sent, plan = planned(backend, request)
    tokens: list[int] = backend.prepare(sent, plan).payload
    return tokens


def _turn(backend: Any, counted: Counted, request: Request) -> tuple[list[ev.Event], int]:
    """The turn's events, and the tokens of the prompt evaluated (the first ``eval``)."""
    counted.calls.clear()
    events = list(stream_sync(backend.stream(request)))
    return events, (counted.calls[0] if counted.calls else 0)


def _conversation(topic: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": _system(topic)},
        {"role": "user", "content": f"Read the file {topic}.md and tell me what it says."},
    ]


def _answered(messages: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The conversation after a call to read_file and its result."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'},
    }
    return [
        *messages,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"# {path}\nIt says hello."},
    ]


def _usage(events: list[ev.Event]) -> dict[str, int]:
    done = events[-1]
    assert isinstance(done, ev.Done) and done.usage is not None
    return done.usage


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_turn_two_evaluates_only_its_new_tokens(
    backend: Any, counted: Counted, choice: str
) -> None:
    """After a reply (free, its call finished under the grammar; or constrained from its
    first token), the next turn's prompt is evaluated from where turn 1's prompt ended."""
    first = Request(
        _conversation("billing"), [READ], tool_choice=choice, max_tokens=24, temperature=0.0
    )
    events, evaluated = _turn(backend, counted, first)
    one = _prompt(backend, first)
    assert evaluated == len(one)
    usage = _usage(events)
    assert usage == {
        "prompt_tokens": len(one),
        "completion_tokens": usage["completion_tokens"],
        "cached_tokens": 0,
    }
    # every token written was evaluated but the last one when the limit cut the reply (the
    # finish reason says so unless a call was read whole before the cut: then "tool_calls")
    cut = usage["completion_tokens"] == first.max_tokens
    assert backend.llama.n_tokens == len(one) + usage["completion_tokens"] - cut
    if choice == "required":
        assert "constrained-call" in [e.code for e in events if isinstance(e, ev.Notice)]

    second = Request(_answered(first.messages, "billing.md"), [READ], max_tokens=1, temperature=0.0)
    events, evaluated = _turn(backend, counted, second)
    two = _prompt(backend, second)
    assert common_prefix(one, two) == len(one)  # the template renders turn 1 as it was
    assert evaluated == len(two) - len(one)
    assert _usage(events) == {
        "prompt_tokens": len(two),
        "completion_tokens": 1,
        "cached_tokens": len(one),
    }
    assert backend.prefixes.saved == backend.prefixes.loaded == 0  # one conversation: no copies


def test_two_conversations_taking_turns_each_keep_their_prefix(
    backend: Any, counted: Counted
) -> None:
    """A1, B1, A2, B2: each second turn evaluates only its new tokens, from a saved context."""
    a1 = Request(_conversation("billing"), [READ], max_tokens=1, temperature=0.0)
    b1 = Request(_conversation("shipping"), [READ], max_tokens=1, temperature=0.0)
    a2 = Request(_answered(a1.messages, "billing.md"), [READ], max_tokens=1, temperature=0.0)
    b2 = Request(_answered(b1.messages, "shipping.md"), [READ], max_tokens=1, temperature=0.0)
    prompts = {
        name: _prompt(backend, r) for name, r in (("a1", a1), ("b1", b1), ("a2", a2), ("b2", b2))
    }
    shared = common_prefix(prompts["a1"], prompts["b1"])
    assert shared < 32  # the two share little: only the template's first line
    evaluated = {}
    for name, request in (("a1", a1), ("b1", b1), ("a2", a2), ("b2", b2)):
        events, evaluated[name] = _turn(backend, counted, request)
        assert _usage(events)["prompt_tokens"] == len(prompts[name])
        if name in ("a2", "b2"):
            first = prompts[name[0] + "1"]
            assert _usage(events)["cached_tokens"] == len(first)
    assert evaluated["a2"] == len(prompts["a2"]) - len(prompts["a1"])
    assert evaluated["b2"] == len(prompts["b2"]) - len(prompts["b1"])
    assert backend.prefixes.loaded == 2 and backend.prefixes.saved >= 2


def test_without_saved_contexts_the_other_conversation_is_evaluated_again(
    backend: Any, counted: Counted
) -> None:
    """What the saved contexts spare: with none kept, A2 after B1 evaluates A's whole
    prompt again, but what it shares with B's."""
    backend.prefixes = SavedPrefixes(0)
    a1 = Request(_conversation("billing"), [READ], max_tokens=1, temperature=0.0)
    b1 = Request(_conversation("shipping"), [READ], max_tokens=1, temperature=0.0)
    a2 = Request(_answered(a1.messages, "billing.md"), [READ], max_tokens=1, temperature=0.0)
    for request in (a1, b1):
        _turn(backend, counted, request)
    events, evaluated = _turn(backend, counted, a2)
    shared = common_prefix(_prompt(backend, b1), _prompt(backend, a2))
    assert evaluated == len(_prompt(backend, a2)) - shared
    assert _usage(events)["cached_tokens"] == shared
    assert backend.prefixes.saved == backend.prefixes.loaded == 0

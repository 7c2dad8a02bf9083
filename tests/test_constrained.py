"""Constrained calls: the grammar of the declared tools, the triggers that start it, and the
real default model generating under it (llama-cpp-python's own grammar engine)."""

from __future__ import annotations

import json
import threading
from typing import Any

import jsonschema
import pytest

from toolwire.events import CallEnd, Done, Notice, TextDelta
from toolwire.formats.gbnf import Constraint, Trigger, constraint_for
from toolwire.formats.registry import family_names
from toolwire.pipeline import Request, plan_turn, stream_sync

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
NOTE = {
    "type": "function",
    "function": {
        "name": "save_note",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "meta": {"$ref": "#/$defs/meta"},
            },
            "required": ["title", "tags"],
            "$defs": {"meta": {"type": "object", "properties": {"pinned": {"type": "boolean"}}}},
        },
    },
}


def weather() -> Constraint:
    found = constraint_for("hermes", [WEATHER, NOTE])
    assert found is not None
    return found


# ---------------------------------------------------------------------- triggers (pure)


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ('{"name": "get_weather"', "opening"),
        ('  \n{ "name" : "save_note"', "opening"),
        ('```json\n{\n  "name": "get_weather"', "opening"),
        ('{{"name": "get_weather"', "opening"),  # doubled braces, as the 1.5B's template shows
        ("Let me check.\n<tool_call>", "family"),
        ("<tool_call>", "family"),
    ],
)
def test_a_call_beginning_triggers_the_grammar(text: str, form: str) -> None:
    trigger = weather().trigger(text)
    assert trigger is not None and trigger.form == form
    assert text[trigger.at :].startswith("<tool_call>" if form == "family" else text[:1])


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weathe',  # the name not finished: it may yet be another word
        '{"name": "cat joke"',  # not a declared tool: a JSON answer stays free
        '{"city": "Paris"',  # data, not a call
        'Here is the JSON: {"name": "get_weather"',  # not the reply's opening
        '```python\n{"name": "get_weather"',
        "<tool_",  # a marker not yet complete
    ],
)
def test_other_text_is_never_constrained(text: str) -> None:
    assert weather().trigger(text) is None


def test_no_trigger_inside_thinking_and_the_search_is_incremental() -> None:
    constraint = weather()
    assert constraint.trigger("<think>maybe <tool_call>", thinking=True) is None
    text = "x" * 10_000 + "<tool_call>"
    found = constraint.trigger(text, searched=10_000 - 3)  # the marker straddles the old end
    assert found is not None and found.at == 10_000
    assert constraint.trigger("x" * 10_000, searched=9_990) is None


def test_a_reply_without_a_family_still_constrains_openings_and_required() -> None:
    constraint = constraint_for(None, [WEATHER], required=True)
    assert constraint is not None and constraint.form is None and constraint.required
    assert constraint.trigger("<tool_call>") is None
    assert constraint.trigger('{"name": "get_weather"') is not None
    assert "tool0" in constraint.grammar("required")
    assert constraint_for("hermes", []) is None
    assert constraint_for("hermes", [{"type": "function", "function": {"name": ""}}]) is None


def test_every_family_s_own_marker_triggers_its_grammar() -> None:
    mistral = constraint_for("mistral", [WEATHER])
    assert mistral is not None and mistral.form is not None
    found = mistral.trigger("Sure. [TOOL_CALLS]")
    assert found is not None and (found.at, found.form) == (6, "family")
    assert mistral.trigger("<tool_call>") is None  # another family's marker is text here
    # a bare Python list is a call only where it opens the reply
    pythonic = constraint_for("pythonic", [WEATHER])
    assert pythonic is not None
    assert pythonic.trigger("[get_weather(") == Trigger(0, "start")
    assert pythonic.trigger("see [get_weather(") is None
    assert pythonic.trigger("[get_weathe") is None


def test_the_grammar_names_each_declared_tool_and_no_other_key() -> None:
    grammar = weather().grammar("family")
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    assert '"<tool_call>"' in rules["root"] and '"</tool_call>"' in grammar  # the framing
    assert rules["call"] == "tool0 | tool1"
    assert '"\\"get_weather\\""' in rules["tool0"] and '"\\"save_note\\""' in rules["tool1"]
    assert '"\\"celsius\\""' in grammar  # the enum's values, and nothing else there
    lead = weather().grammar("family", lead='a "quoted"\n')
    assert dict(line.split(" ::= ", 1) for line in lead.splitlines())["root"].startswith(
        '"a \\"quoted\\"\\n" '
    )


# ---------------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def backend(llama_backend: Any) -> Any:
    return llama_backend


def run(backend: Any, request: Request) -> list[Any]:
    backend.llama.reset()
    return list(stream_sync(backend.stream(request)))


def codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


def calls(events: list[Any]) -> list[Any]:
    return [e.call for e in events if isinstance(e, CallEnd)]


def schema_of(name: str) -> dict[str, Any]:
    tool = {t["function"]["name"]: t for t in (WEATHER, NOTE)}[name]
    return dict(tool["function"]["parameters"])


@pytest.mark.parametrize(
    "schema",
    [
        WEATHER["function"]["parameters"],
        NOTE["function"]["parameters"],
        {},  # no parameters
        {"type": "object", "properties": {"n": {"type": "number"}, "x": {"type": "null"}}},
        {
            "type": "object",
            "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        },
        {"$ref": "https://example.com/remote.json"},  # not fetched: any object instead
        {"type": "object", "properties": {"deep": _deep}} if (_deep := {"type": "object"}) else {},
    ],
)
def test_every_grammar_is_accepted_by_the_engine(backend: Any, schema: dict[str, Any]) -> None:
    from toolwire.backends.constrain import GrammarSampler

    tool = {"type": "function", "function": {"name": "t.x-1", "parameters": schema}}
    constraint = constraint_for("hermes", [tool])
    assert constraint is not None
    for form in ("family", "opening", "required"):
        GrammarSampler(backend.vocabulary, constraint.grammar(form)).close()


@pytest.mark.parametrize("family", family_names())
def test_every_family_s_grammar_is_accepted_by_the_engine(backend: Any, family: str) -> None:
    """The engine takes each family's grammars over the real model's vocabulary (the tests
    of tests/test_grammars.py match strings against them), the awkward schemas too."""
    from toolwire.backends.constrain import GrammarSampler

    tools = [WEATHER, NOTE, {"type": "function", "function": {"name": "t.x-1"}}]
    for parallel in (True, False):
        constraint = constraint_for(family, tools, parallel=parallel)
        assert constraint is not None
        for form in ("family", "opening", "required"):
            GrammarSampler(backend.vocabulary, constraint.grammar(form, lead=" <")).close()


def test_a_deep_hostile_schema_falls_back_to_any_object(backend: Any) -> None:
    from toolwire.backends.constrain import GrammarSampler

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(3000):
        deep = {"type": "object", "properties": {"a": deep}}
    tool = {"type": "function", "function": {"name": "t", "parameters": deep}}
    constraint = constraint_for(None, [tool])
    assert constraint is not None
    grammar = constraint.grammar("opening")
    assert "tool0-arguments-any" in grammar
    GrammarSampler(backend.vocabulary, grammar).close()


def test_the_sampler_keeps_the_free_choice_when_allowed(backend: Any) -> None:
    from toolwire.backends.constrain import GrammarSampler

    yes = backend.llama.tokenize(b"yes", add_bos=False)
    maybe = backend.llama.tokenize(b"maybe", add_bos=False)
    with GrammarSampler(backend.vocabulary, 'root ::= "yes" | "no"') as sampler:
        assert sampler.allows(yes[0]) and not sampler.allows(maybe[0])
        import numpy as np

        logits = np.zeros(backend.llama.n_vocab(), dtype=np.float32)
        logits[maybe[0]] = 10.0  # the free choice is refused: chosen again among the allowed
        logits[yes[0]] = 5.0
        assert sampler.choose(logits, 0.0) == yes[0]
    with pytest.raises(ValueError):
        GrammarSampler(backend.vocabulary, 'root ::= "unclosed')


def test_the_mask_engine_refuses_every_token_the_grammar_does_not_allow(backend: Any) -> None:
    """llguidance, over the model's vocabulary: a required call's grammar allows its opening
    token and refuses prose, in the check of one token and in the whole mask alike; a
    refused token is never accepted; the end of the turn only where the grammar may end."""
    import numpy as np

    from toolwire.backends.constrain import GrammarSampler

    llama = backend.llama
    constraint = constraint_for("hermes", [WEATHER])
    assert constraint is not None
    opening = llama.tokenize(b"<tool_call>", add_bos=False, special=True)
    hello = llama.tokenize(b"Hello", add_bos=False)
    end = int(llama.token_eos())
    assert len(opening) == 1  # one special token, matched by the grammar's literal of it
    with GrammarSampler(backend.vocabulary, constraint.grammar("required")) as sampler:
        assert sampler.allows(opening[0])
        assert not sampler.allows(hello[0]) and not sampler.allows(end)
        allowed = sampler.allowed()
        assert allowed.shape == (llama.n_vocab(),)
        assert allowed[opening[0]] and not allowed[hello[0]] and not allowed[end]
        # whitespace and the opening (or the first bytes of it), nothing else
        others = [int(t) for t in np.flatnonzero(allowed) if t != opening[0]]
        texts = [llama.detokenize([t], special=True).decode("utf-8", "replace") for t in others]
        assert texts and all("<tool_call>".startswith(text.strip()) for text in texts)
        assert not any(text.strip() for text in texts if "<" not in text)
        logits = np.zeros(llama.n_vocab(), dtype=np.float32)
        logits[hello[0]] = 50.0  # the model wants prose: it gets the best allowed token
        logits[opening[0]] = 1.0
        assert sampler.choose(logits, 0.0, end=end) == opening[0]
        assert np.isneginf(sampler.allowed_logits(logits)[hello[0]])
        with pytest.raises(ValueError, match="refused"):
            sampler.accept(hello[0])
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    with GrammarSampler(backend.vocabulary, constraint.grammar("required")) as sampler:
        for token in llama.tokenize(call.encode(), add_bos=False, special=True):
            assert sampler.allows(token)
            sampler.accept(token)
        assert sampler.allows(end)  # complete: the turn may end


def test_the_end_token_is_never_matched_as_text_and_the_vocabulary_is_built_once(
    backend: Any,
) -> None:
    from toolwire.backends.constrain import GrammarSampler

    end = int(backend.llama.token_eos())
    text = backend.llama.detokenize([end], special=True).decode()
    tokenizer = backend.vocabulary.tokenizer
    with GrammarSampler(backend.vocabulary, f'root ::= "{text}"') as sampler:
        assert not sampler.allows(end)  # written as text, piece by piece, never the end
    ask = [{"role": "user", "content": "Tell me a joke."}]
    run(backend, Request(ask, [WEATHER], tool_choice="required", max_tokens=30))
    assert backend.vocabulary.tokenizer is tokenizer


def test_a_required_call_is_written_under_the_grammar_from_the_first_token(backend: Any) -> None:
    """Asked for a joke, with a call required: a call to a declared tool, with arguments
    its schema accepts — never a joke, never an undeclared name."""
    ask = [{"role": "user", "content": "Tell me a joke about cats."}]
    events = run(backend, Request(ask, [WEATHER, NOTE], tool_choice="required", max_tokens=80))
    found = calls(events)
    assert found and all(c.name in ("get_weather", "save_note") for c in found)
    for call in found:
        jsonschema.validate(call.arguments, schema_of(call.name))
    assert "constrained-call" in codes(events) and "tool-choice-not-enforced" not in codes(events)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "tool_calls"


def test_a_call_the_model_begins_is_finished_under_the_grammar(backend: Any) -> None:
    ask = [{"role": "user", "content": "What's the weather in Paris for 3 days, in celsius?"}]
    events = run(backend, Request(ask, [WEATHER], max_tokens=80))
    (call,) = calls(events)
    assert call.name == "get_weather" and call.arguments["city"] == "Paris"
    jsonschema.validate(call.arguments, schema_of("get_weather"))
    assert codes(events)[0] == "constrained-call"
    assert not "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("off", [{"constrained": False}, {"strict": True}])
def test_constrained_false_and_strict_leave_generation_free(
    backend: Any, off: dict[str, Any]
) -> None:
    ask = [{"role": "user", "content": "What's the weather in Paris for 3 days?"}]
    request = Request(ask, [WEATHER], max_tokens=80, **off)
    plan, _, _ = plan_turn(backend, request)
    assert plan.constraint is None
    assert "constrained-call" not in codes(run(backend, request))


def test_a_plain_answer_is_never_constrained(backend: Any) -> None:
    ask = [{"role": "user", "content": "Write a haiku about the sea."}]
    events = run(backend, Request(ask, [WEATHER], max_tokens=20))
    assert calls(events) == [] and "constrained-call" not in codes(events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()


def test_a_call_to_a_tool_never_declared_is_never_made_a_declared_one(backend: Any) -> None:
    """Asked to say hello, the model writes a call to ``say_hello``, which nobody declared:
    the grammar never starts, so no get_weather call is invented out of it."""
    ask = [{"role": "user", "content": "Say hello in French."}]
    events = run(backend, Request(ask, [WEATHER], max_tokens=40))
    assert calls(events) == [] and "constrained-call" not in codes(events)
    assert "say_hello" in "".join(e.text for e in events if isinstance(e, TextDelta))


def test_stopping_mid_call_stops_the_constrained_generation(backend: Any) -> None:
    """Closing the stream while the grammar holds ends generation (the worker sees it)."""

    ask = [{"role": "user", "content": "Tell me a joke about cats."}]
    request = Request(ask, [NOTE], tool_choice="required", max_tokens=200)
    plan, sent, _ = plan_turn(backend, request)
    prepared = backend.prepare(sent, plan)
    stop = threading.Event()
    pieces: list[Any] = []

    def put(item: Any) -> None:
        pieces.append(item)
        if sum(isinstance(p, str) for p in pieces) == 3:
            stop.set()

    backend.llama.reset()
    backend.generation(prepared, put=put, stop=stop, max_tokens=200).run()
    assert pieces[-1] == ("stop", 3)
    assert json.dumps(pieces[:1], default=str)  # the notice came first
    assert isinstance(pieces[0], Notice) and pieces[0].code == "constrained-call"


class _Triggered(Exception):
    pass


class _Watching(Constraint):
    """Records where a grammar would start, instead of starting it."""

    def grammar(self, form: str, lead: str = "") -> str:
        raise _Triggered(form)


@pytest.mark.parametrize(
    ("reply", "opened", "fires"),
    [
        ("<think>maybe <tool_call> later</think>The answer.", False, False),
        ("<think>plan</think>\n<tool_call>", False, True),
        ("still thinking <tool_call> here</think>done", True, False),  # the prompt opened it
        ("done thinking</think><tool_call>", True, True),
        ("[THINK]a <tool_call>[/THINK]b", False, False),
    ],
)
def test_a_marker_inside_thinking_never_starts_the_grammar(
    reply: str, opened: bool, fires: bool
) -> None:
    from toolwire.backends.generate import Generation
    from toolwire.testing import ScriptedLlama

    llama = ScriptedLlama("", reply)
    found = constraint_for("hermes", [WEATHER])
    assert found is not None
    watching = _Watching(found.tools, found.form)
    pieces: list[Any] = []
    generation = Generation(
        llama,
        [1],
        max_tokens=1000,
        temperature=0.0,
        constraint=watching,
        is_end=lambda t: t == 0,
        put=pieces.append,
        stop=threading.Event(),
        thinking=opened,
    )
    if fires:
        with pytest.raises(_Triggered, match="family"):
            generation.run()
    else:
        generation.run()
        assert "".join(p for p in pieces if isinstance(p, str)) == reply
        assert pieces[-1] == ("stop", len(reply))


def test_a_marker_that_may_open_text_triggers_only_before_a_declared_name() -> None:
    """Functionary v3.2's ``>>>`` opens a call (``>>>get_weather``) or text for the user
    (``>>>all``): only the call is constrained, so a plain answer is never forced into one."""
    constraint = constraint_for("functionary-v3.2", [WEATHER])
    assert constraint is not None
    assert constraint.trigger("all\nHi.>>>all\nMore text") is None
    text = "all\nLet me look.>>>get_weather\n"
    found = constraint.trigger(text, searched=len(text) - 3)  # the name straddles the old end
    assert found is not None and (found.at, found.form) == (text.index(">>>"), "family")
    assert constraint.trigger("get_weather\n{") == Trigger(0, "start")
    command_r = constraint_for("command-r-plus", [WEATHER])
    assert command_r is not None
    assert command_r.trigger("Action: none needed") is None
    assert command_r.trigger("Action:\n```json\n[") is not None


def test_parallel_calls_off_lets_the_grammar_write_one_call(backend: Any) -> None:
    """With ``parallel_tool_calls`` false the grammar itself holds one call: the model asked
    for two cities writes one call, not two of which one would be dropped afterwards."""
    ask = [{"role": "user", "content": "What's the weather in Paris, and in Rome?"}]
    request = Request(ask, [WEATHER], tool_choice="required", parallel_calls=False, max_tokens=120)
    plan, sent, _ = plan_turn(backend, request)
    assert plan.constraint is not None and plan.constraint.parallel is False
    prepared = backend.prepare(sent, plan)
    pieces: list[Any] = []
    backend.llama.reset()
    backend.generation(prepared, put=pieces.append, stop=threading.Event(), max_tokens=120).run()
    text = "".join(p for p in pieces if isinstance(p, str))
    assert text.count('"name"') == 1, text
    assert len(calls(run(backend, request))) == 1

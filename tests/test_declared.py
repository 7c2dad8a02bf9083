"""Families declared as syntax values (:mod:`toolwire.formats.syntax`), beside the
hand-written readers they are to replace.

For each declaration: over every development corpus case of its family (the llama.cpp,
vLLM and SGLang development cases; the held-out set is not read here) and a set of near
misses, the declared reader and the hand-written one give the same result, strict and not,
and the same events at every chunking; the differences still left are listed, each with its
reason, and a listed difference that goes away fails the run (the list only shrinks). The
declaration's writer writes calls its own grammar takes and its reader reads back, and its
markers and kept tokens — computed from the syntax, never listed — are the hand-written
family's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from toolwire import events as ev
from toolwire import get_family
from toolwire.formats.base import Family, ParseResult
from toolwire.formats.declared import DECLARED
from toolwire.formats.gbnf import constraint_for
from toolwire.formats.reasoning import opens_reasoning
from toolwire.formats.syntax import Syntax, special_words

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load(ROOT / "benchmarks" / "peer_cases.py", "peer_cases_declared")

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "get_time", "search")
]

#: Replies near each family's syntax: what the two readers must also agree on.
NEAR: dict[str, list[str]] = {
    "hermes": [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        'Sure.<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
        "</tool_call> done",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',  # unclosed
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}</tool_call>',
        "<tool_call>not json</tool_call> after",
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        '<think>plan</think><tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        'Write <tool_call> in prose, then {"name": "x"}.',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "P"}, "extra": 1}</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    ],
}

#: Differences still left, by family: (corpus or ``near``, case), why. A listed difference
#: that is gone fails the run: take it off the list.
KNOWN: dict[str, dict[tuple[str, str], str]] = {
    "hermes": {
        ("near", "unopened"): (
            "a call object right after a closed call, its <tool_call> left out (vLLM's"
            " hermes_2_pro template): the hand-written reader reads it"
            " (recovered-unopened-call); the engine has no sibling framing yet"
        ),
    },
}
#: The hand-written Hermes reader's sibling framing, as a near miss of its own.
UNOPENED = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1}}\n</tool_call>\n'
    '{"name": "get_time", "arguments": {}}\n</tool_call>'
)


def _cases(family: str) -> list[tuple[str, str, str, list[dict[str, Any]], bool]]:
    """Every development case of ``family``: (corpus, id, reply, tools, reasoning opened)."""
    out = []
    for corpus in ("llama_cpp_cases.json", "vllm_cases.json", "sglang_cases.json"):
        doc = bench.load(corpus)
        for case in doc["cases"]:
            try:
                if bench.family_of(case) != family:
                    continue
            except KeyError:
                continue
            tools = [{"type": "function", "function": doc["tools"][k]} for k in case["tools"]]
            opened = opens_reasoning(case.get("thinking_opener") or "")
            out.append((corpus, case["id"], case["input"], tools, opened))
    for i, reply in enumerate(NEAR.get(family, [])):
        out.append(("near", str(i), reply, TOOLS, False))
    out.append(("near", "unopened", UNOPENED, TOOLS, False))
    return out


def _key(result: ParseResult) -> tuple[Any, ...]:
    calls = [(c.name, c.arguments, c.arguments_text, c.text_values) for c in result.calls]
    return result.content, result.reasoning, calls, list(result.notices)


def _events(family: Family, reply: str, tools: Any, opened: bool, size: int) -> list[Any]:
    """The events of ``reply`` fed ``size`` characters at a time, adjacent pieces of one
    text joined (where a reader cuts its text is not part of what it reads)."""
    stream = family.stream(tools, reasoning_open=opened, make_id=lambda i: f"call_{i}")
    events = []
    for start in range(0, len(reply), size):
        events.extend(stream.feed(reply[start : start + size]))
    joined: list[Any] = []
    for event in events + stream.finish():
        last = joined[-1] if joined else None
        if isinstance(event, _PIECES) and type(last) is type(event) and _same_call(last, event):
            joined[-1] = replace(last, text=last.text + event.text)
        else:
            joined.append(event)
    return joined


_PIECES = (ev.TextDelta, ev.ReasoningDelta, ev.CallArgsDelta)


def _same_call(a: Any, b: Any) -> bool:
    return getattr(a, "index", None) == getattr(b, "index", None)


PAIRS = [(name, case) for name in sorted(DECLARED) for case in _cases(name)]


@pytest.mark.parametrize(
    ("name", "case"), PAIRS, ids=[f"{n}:{c[0].split('_')[0]}:{c[1]}" for n, c in PAIRS]
)
def test_the_declaration_reads_as_the_hand_written_reader(
    name: str, case: tuple[str, str, str, list[dict[str, Any]], bool]
) -> None:
    corpus, cid, reply, tools, opened = case
    old, new = get_family(name), DECLARED[name].family
    same = all(
        _key(old.parse(reply, tools, reasoning_open=opened, strict=strict))
        == _key(new.parse(reply, tools, reasoning_open=opened, strict=strict))
        for strict in (False, True)
    ) and all(
        _events(old, reply, tools, opened, size) == _events(new, reply, tools, opened, size)
        for size in (1, 3, 7, len(reply) or 1)
    )
    why = KNOWN.get(name, {}).get((corpus, cid))
    if why is None:
        assert same, (corpus, cid, reply)
    else:
        assert not same, f"({corpus}, {cid}) now agrees: take it off KNOWN ({why})"


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_tokens_are_computed_as_the_hand_written_family_lists_them(name: str) -> None:
    old, new = get_family(name), DECLARED[name].family
    assert new.markers == old.markers
    assert set(new.kept_tokens) == set(old.kept_tokens)
    assert new.end_tokens == old.end_tokens and new.reasoning == old.reasoning
    assert new.label == old.label


CALLS: list[tuple[str, Mapping[str, Any]]] = [
    ("get_weather", {"city": "Paris", "days": 3}),
    ("get_time", {"zone": "Europe/Paris", "precise": True, "tags": ["a", "b"]}),
]
WEATHER_TIME = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city", "days"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {
                    "zone": {"type": "string"},
                    "precise": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["zone", "precise", "tags"],
            },
        },
    },
]


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_writer_writes_what_the_grammar_takes_and_the_reader_reads_back(name: str) -> None:
    syntax: Syntax = DECLARED[name]
    reply = syntax.reply(CALLS)
    family = syntax.family
    got = family.parse(reply, WEATHER_TIME)
    assert [(c.name, c.arguments) for c in got.calls] == [(n, dict(a)) for n, a in CALLS]
    assert got.content == "" and not got.notices
    for size in (1, 5):  # streamed, at any chunking, the same
        events = _events(family, reply, WEATHER_TIME, False, size)
        assert events == _events(family, reply, WEATHER_TIME, False, len(reply))
    llguidance = pytest.importorskip("llguidance")
    tokenizer = llguidance.LLTokenizer("byte")
    constraint = constraint_for(family, WEATHER_TIME)
    assert constraint is not None

    def takes(text: str) -> bool:
        grammar = llguidance.grammar_from("gbnf", constraint.grammar(constraint.form))
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        assert not matcher.is_error(), matcher.get_error()
        tokens = tokenizer.tokenize_str(text)
        return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())

    assert takes(reply)
    assert takes(syntax.write(*CALLS[0]))
    assert not takes(reply.replace("get_time", "get_tme"))  # no such tool
    assert not takes(syntax.write("get_weather", {"city": "Paris", "days": "3"}))  # a string


def test_special_words_are_found_in_the_framing() -> None:
    assert special_words(("<|tool_calls_begin|>", "</tool_call>", "[TOOL_CALLS]", "{")) == (
        "<|tool_calls_begin|>",
        "</tool_call>",
        "[TOOL_CALLS]",
    )
    assert special_words(("functions.", ":", "\n")) == ()


def test_a_declaration_is_a_few_lines() -> None:
    """Adding a family like Hermes is one declaration of at most ~30 lines."""
    source = (ROOT / "src" / "toolwire" / "formats" / "declared.py").read_text()
    start = source.index("HERMES = Syntax(")
    end = source.index("\n)\n", start)
    assert source[start:end].count("\n") + 1 <= 30
    assert json.dumps(DECLARED["hermes"].shape.to_json())  # the syntax is plain data

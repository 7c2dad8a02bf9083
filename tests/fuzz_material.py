"""What the fuzz campaign (tests/test_fuzz_parsers.py) feeds the parsers and checks of
their events: the parsers under test, the text made of each one's grammar, the chunkings,
and the checks every stream must pass."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import sys
from typing import Any

from hypothesis import strategies as st

from toolwire import family_names, get_family
from toolwire.arguments.read import MAX_ARGUMENT_DEPTH
from toolwire.events import (
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
)
from toolwire.formats import reasoning
from toolwire.formats.base import MAX_JSON_DEPTH, Family
from toolwire.formats.derived import NUMBER, DerivedShape
from toolwire.formats.words import UNREADABLE, Words

from .test_families_streaming import REPLIES

# ------------------------------------------------------------------------------ the parsers

#: Grammars the learner finds for published templates (``tests/test_derived.py`` learns them
#: from the templates named here), and for the hand-written templates there; written out so
#: the fuzz needs no template rendering.
DERIVED: dict[str, DerivedShape] = {
    # test_derived.py ANGLE
    "derived-angle": DerivedShape(
        kind="name-json",
        opening=("<<call",),
        post=("<<end>>",),
        next_call=("<<call",),
        name_end=(">>",),
    ),
    # test_derived.py TILDES
    "derived-tildes": DerivedShape(
        kind="tags",
        opening=("@@",),
        post=("@@/",),
        next_call=("@@",),
        key_open=("~",),
        key_mid=("~",),
        value_end=(";;",),
        value_lead=" ",
        value_tail=" ",
    ),
    # test_derived.py SEMI_LIST
    "derived-semi-list": DerivedShape(
        kind="json",
        opening=("CALLS>>", "["),
        next_call=(";",),
        trail=("]", "<<CALLS"),
        name_key="tool",
        args_key="parameters",
    ),
    # Kimi-K2-Instruct.jinja: the call's number after its name
    "derived-kimi-k2": DerivedShape(
        kind="name-json",
        opening=("<|tool_calls_section_begin|>", "<|tool_call_begin|>functions."),
        post=("<|tool_call_end|>",),
        next_call=("<|tool_call_begin|>functions.",),
        trail=("<|tool_calls_section_end|>",),
        name_end=(":", NUMBER, "<|tool_call_argument_begin|>"),
    ),
    # GLM-4.6.jinja
    "derived-glm": DerivedShape(
        kind="tags",
        opening=("<tool_call>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
        key_open=("<arg_key>",),
        key_mid=("</arg_key>", "<arg_value>"),
        value_end=("</arg_value>",),
    ),
    # mistralai-Mistral-Nemo-Instruct-2407.jinja: an id that changes per call
    "derived-nemo": DerivedShape(
        kind="json",
        opening=("[TOOL_CALLS][",),
        next_call=(",",),
        trail=("]",),
        strings=("id",),
    ),
    # CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja
    "derived-command-r7b": DerivedShape(
        kind="json",
        opening=("<|START_ACTION|>[",),
        next_call=(",",),
        trail=("]", "<|END_ACTION|>"),
        name_key="tool_name",
        args_key="parameters",
        strings=("tool_call_id",),
    ),
    # Qwen3-Coder.jinja: whitespace around values
    "derived-qwen3-coder": DerivedShape(
        kind="tags",
        opening=("<tool_call>", "<function="),
        post=("</function>", "</tool_call>"),
        next_call=("<tool_call>", "<function="),
        name_end=(">",),
        key_open=("<parameter=",),
        key_mid=(">",),
        value_end=("</parameter>",),
        value_lead="\n",
        value_tail="\n",
    ),
}

PARSERS: dict[str, Family] = {
    **{name: get_family(name) for name in family_names()},
    "words": Words(),
    **{name: shape.family for name, shape in DERIVED.items()},
}

#: Grammars that drop tokens of their own from a reply with no call: those that declare it
#: (``Family.drops_tokens``, each module saying which tokens: channel headers, Gemma's stray
#: ``<channel|>``, MiniMax M3's bare ``</mm:think>``, Functionary's ``>>>all``, Command R+'s
#: ``<|CHATBOT_TOKEN|>``, the ``<tool_response>`` a model writes to itself in words, ...).
DROPS_TOKENS = {name for name, parser in PARSERS.items() if parser.drops_tokens}

# ------------------------------------------------------------------------------ the material

_TAGS = reasoning.known_tags()
_THINKING = sorted({*_TAGS.openers, *_TAGS.closers, *_TAGS.answers, *_TAGS.answers.values()})


def _module_tokens(family: Family) -> set[str]:
    """The short strings written in the modules that define a family and its stream: its
    markers and special tokens, with no list to keep up to date."""
    found: set[str] = set(family.markers)
    for cls in (type(family), family.stream_class):
        tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and 0 < len(node.value) <= 40
                and node.value.count(" ") <= 1  # messages are not grammar
            ):
                found.add(node.value)
    return found


def _shape_tokens(shape: DerivedShape) -> set[str]:
    found: set[str] = {"0", "17", "9" * 40, shape.name_key, shape.args_key, *shape.strings}
    for key in ("opening", "post", "next_call", "trail", "name_end", "key_open", "key_mid"):
        found.update(w for w in getattr(shape, key) if w != NUMBER)
    found.update(shape.value_end)
    return found


@functools.cache
def _tokens(name: str) -> list[str]:
    if name in DERIVED:
        return sorted(_shape_tokens(DERIVED[name]))
    return sorted(_module_tokens(PARSERS[name]))


#: Replies in each grammar, from the families' own tests: cut up, they give near misses.
_SEEDS: dict[str, list[str]] = {name: [] for name in PARSERS}
for _family, _reply in REPLIES:
    _SEEDS[_family].append(_reply)
_SEEDS["words"] = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "Sure.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>",
    '```json\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "<tool_response>\nsunny\n</tool_response>\nIt is sunny.",
]
_SEEDS["derived-angle"] = ['Sure. <<call get_weather>>{"city": "Paris"}<<end>>']
_SEEDS["derived-tildes"] = ["@@get_weather\n~city~ Paris ;;\n@@/"]
_SEEDS["derived-semi-list"] = [
    'CALLS>>[{"tool": "get_weather", "parameters": {"city": "Paris"}}]<<CALLS'
]
_SEEDS["derived-kimi-k2"] = [
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'
]
_SEEDS["derived-glm"] = [
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
]
_SEEDS["derived-nemo"] = [
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]'
]
_SEEDS["derived-command-r7b"] = [
    '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
    '"parameters": {"city": "Paris"}}]<|END_ACTION|>'
]
_SEEDS["derived-qwen3-coder"] = [
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
]

_JSON_BITS = [
    *"{}[]\":,\\'",
    "\\u",
    "\\ud800",
    "\\udc00",
    '"name"',
    '"arguments"',
    '"parameters"',
    '"get_weather"',
    '"set_flags"',
    "get_weather",
    "set_flags",
    "write_file",
    '{"city": "Oslo"}',
    '{"name": "get_weather", "arguments": {"city": "x"}}',
    "true",
    "null",
    "True",
    "None",
    "NaN",
    "Infinity",
    "=",
    ">",
    "<",
    "</",
    "(",
    ")",
    ";",
    "```",
    "```json\n",
    "functions.get_weather:0",
    "to=functions.get_weather",
    'get_weather(city="x")',
]
_ODD_TEXT = ["\n", "\r\n", "\t", " ", "\x00", "\u2028", "\ud800", "\udfff", "\U0001f600", "｜", "▁"]
#: Numbers no float holds, and digits past ``int()``'s limit (4300 in CPython).
_NUMBERS = ["1e999", "-1e400", "1" * 400, "9" * 4301, "0." + "1" * 5000, "-0"]


def _deep(depth: int, kind: int) -> str:
    if kind == 0:
        return "[" * depth + "]" * depth
    if kind == 1:
        return '{"a":' * depth + "1" + "}" * depth
    if kind == 2:
        return "[" * depth  # never closed
    return '{"a":[' * (depth // 2) + "]}" * (depth // 2)


_DEPTHS = [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, MAX_ARGUMENT_DEPTH + 2, 1000]
_DEEP = st.builds(_deep, st.sampled_from(_DEPTHS), st.integers(0, 3))
_HOSTILE_VALUES = st.one_of(
    _DEEP,
    st.sampled_from(_NUMBERS),
    st.sampled_from(['"\\ud800"', '"\ud800"', '{"a": 1, "a": 2}', '"' + "x" * 3000 + '"']),
)
_UNICODE = st.lists(
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), max_size=6
).map("".join)


def _slice(seed: str, a: int, b: int) -> str:
    a, b = sorted((a % (len(seed) + 1), b % (len(seed) + 1)))
    return seed[a:b]


def _hostile_seed(seed: str, value: str) -> str:
    """A reply of the grammar with a hostile value where it had ``Paris``."""
    if '"Paris"' in seed:
        return seed.replace('"Paris"', value, 1)
    return seed.replace("Paris", value, 1)


def _material(name: str) -> st.SearchStrategy[str]:
    seeds = _SEEDS[name] or ["<tool_call>"]
    pieces = [
        st.sampled_from(_tokens(name)),
        st.sampled_from(_THINKING + _JSON_BITS + _ODD_TEXT),
        st.sampled_from(seeds),
        st.builds(_slice, st.sampled_from(seeds), st.integers(0, 10**6), st.integers(0, 10**6)),
        st.builds(_hostile_seed, st.sampled_from(seeds), _HOSTILE_VALUES),
        _HOSTILE_VALUES,
        _UNICODE,
    ]
    return st.one_of(*pieces)


_REPLIES = {name: st.lists(_material(name), max_size=24).map("".join) for name in PARSERS}
#: Where to cut a reply (taken modulo its length), or ``None`` (one time in four): one
#: character at a time (for the first ``_ONE_BY_ONE`` characters, then the rest at once).
_CUTS = st.one_of(
    st.lists(st.integers(0, 10**6), max_size=10),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=10),
    st.lists(st.integers(0, 10**6), max_size=3),
    st.none(),
)
_ONE_BY_ONE = 300


def _cut(reply: str, cuts: list[int] | None) -> list[str]:
    if cuts is None:
        return [*reply[:_ONE_BY_ONE], reply[_ONE_BY_ONE:]]
    points = sorted(c % (len(reply) + 1) for c in cuts)
    return [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]


# ------------------------------------------------------------------------------ the checks


def _ids(index: int) -> str:
    return f"call{index}"


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def check_events(events: list[Event]) -> None:
    """Calls well formed: each starts once, gets argument text only while open, and ends or
    aborts exactly once; an ended call has a name, its id, and arguments that are a mapping
    whose JSON is its argument text (the words reader's unreadable call keeps the raw text
    the model wrote, which is what its result shows the model)."""
    started: dict[int, CallStart] = {}
    args: dict[int, list[str]] = {}
    ended: set[int] = set()
    for event in events:
        if isinstance(event, CallStart):
            assert event.index not in started, event
            assert event.name and event.id, event
            started[event.index] = event
            args[event.index] = []
        elif isinstance(event, CallArgsDelta):
            assert event.index in started and event.index not in ended, event
            args[event.index].append(event.text)
        elif isinstance(event, (CallEnd, CallAbort)):
            assert event.index in started and event.index not in ended, event
            ended.add(event.index)
            start = started[event.index]
            if isinstance(event, CallAbort):
                assert event.id == start.id
                continue
            call = event.call
            assert (call.id, call.name) == (start.id, start.name)
            assert isinstance(call.arguments, dict)
            text = "".join(args[event.index])
            assert call.arguments_text in (text, text.strip()), (text, call.arguments_text)
            if call.name == UNREADABLE:
                assert call.arguments == {}
                continue
            assert _strict_json(call.arguments_text) == call.arguments
            assert _finite(call.arguments)
        elif isinstance(event, (TextDelta, ReasoningDelta)):
            assert event.text, event
        else:
            assert isinstance(event, Notice) and event.code, event
    assert ended == set(started), "a call neither ended nor aborted"


def _in_order(part: str, whole: str) -> bool:
    """Is ``part`` made of ``whole``'s characters, in order (nothing invented, nothing
    repeated)?"""
    rest = iter(whole)
    return all(c in rest for c in part)


def _stream(family: Family, chunks: list[str], tools: Any, **kw: Any) -> list[Event]:
    s = family.stream(tools, make_id=_ids, **kw)
    events: list[Event] = []
    for chunk in chunks:
        events += s.feed(chunk)
    events += s.finish()
    return events


_MARKUP = set("<>[]{}|\\`")


def _has_markup(reply: str, name: str) -> bool:
    """Does the reply hold any of the grammar's tokens, a thinking marker or markup?"""
    tokens = [t for t in _tokens(name) if len(t) > 1]
    return any(c in _MARKUP for c in reply) or any(t in reply for t in (*tokens, *_THINKING))

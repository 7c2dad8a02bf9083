"""A fuzz campaign over every stream parser, the drift reader and the argument reader.

Each parser is fed arbitrary text made of its own grammar (its markers and special tokens,
pieces of the replies its own tests read), the thinking markers, JSON fragments, any unicode
(lone surrogates too), numbers too large for a float or for ``int()``, and nesting at and past
the depth limits, cut into arbitrary chunks. What the parsers promise, and is checked here:

- only the documented errors leave them: a reply stream raises :class:`LimitError` past its
  ``max_chars`` and :class:`UsageError` when fed after ``finish()``, and nothing else, whatever
  the text; :func:`recover_calls` and :class:`DriftGuard` raise nothing; :func:`read_json`
  raises :class:`ReadError` only;
- the events are well formed: every call starts once, gets argument text only while open,
  and ends or aborts exactly once; an ended call's argument text is the JSON of its arguments;
- chunked feeding gives what whole feeding gives (:mod:`toolwire.formats.base` promises it);
- nothing is invented: reply text and reasoning are each made of the reply's own characters,
  in order; and nothing is lost: a reply with no call and no thinking is its own text, every
  character of it (markup that is not a call stays text), except in the grammars that name
  tokens they drop (:data:`DROPS_TOKENS`);
- the work stays linear, counted, not timed (:func:`_work`), on the replies that were found
  quadratic; elsewhere the inputs are bounded and the parsers' own limits do the rest.

The parsers are every family in the registry (so a new family is fuzzed as soon as it is
registered), the reader for tools in words, and grammars learned from templates
(:data:`DERIVED`). Every example is seeded (``derandomize``) and the file runs in well under a
minute.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire import LimitError, UsageError, family_names, get_family
from toolwire.arguments.read import MAX_ARGUMENT_DEPTH, ReadError, read_json
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
from toolwire.formats.base import MAX_JSON_DEPTH, Family, assemble
from toolwire.formats.derived import NUMBER, DerivedShape
from toolwire.formats.drift import DriftGuard, recover_calls
from toolwire.formats.words import UNREADABLE, Words

from .replies import TOOLS
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

#: Grammars that drop tokens of their own from a reply with no call, each as its module says:
#: channel headers (gpt-oss, Glimmer, Kimi K3: "no header reaches the reply's text"), Gemma's
#: stray ``<channel|>``, MiniMax M3's bare ``</mm:think>``, Functionary's ``>>>all``, Command
#: R+'s ``<|CHATBOT_TOKEN|>``, and the ``<tool_response>`` a model writes to itself in words.
DROPS_TOKENS = {
    "gpt-oss",
    "glimmer",
    "kimi-k3",
    "gemma4",
    "minimax-m3",
    "functionary-v3.2",
    "command-r-plus",
    "words",
}

# ------------------------------------------------------------------------------ the material

_THINKING = sorted(
    {
        *reasoning.OPENERS,
        *reasoning.CLOSERS,
        *reasoning.PROMPT_OPENERS,
        *reasoning.ANSWERS,
        *reasoning.ANSWERS.values(),
        *reasoning.CHANNEL_OPENERS,
    }
)


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


# ------------------------------------------------------------------------------ the campaign

_SETTINGS = settings(
    derandomize=True,
    database=None,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", sorted(PARSERS))
@_SETTINGS
@given(data=st.data())
def test_any_text_in_any_chunks(name: str, data: st.DataObject) -> None:
    family = PARSERS[name]
    reply = data.draw(_REPLIES[name], label="reply")
    chunks = _cut(reply, data.draw(_CUTS, label="cuts"))
    tools = data.draw(st.sampled_from([TOOLS, None]), label="tools")
    kw = {
        "reasoning_open": data.draw(st.booleans(), label="reasoning_open"),
        "strict": data.draw(st.booleans(), label="strict"),
    }
    whole = family.parse(reply, tools, make_id=_ids, **kw)
    events = _stream(family, chunks, tools, **kw)
    check_events(events)
    assert assemble(events) == whole
    assert _in_order(whole.content, reply)
    assert _in_order(whole.reasoning, reply)
    if whole.calls or kw["reasoning_open"]:
        return
    if name not in DROPS_TOKENS and not any(m in reply for m in _THINKING):
        assert whole.content == reply  # markup that is no call stays text, all of it
    elif not _has_markup(reply, name):
        assert whole.content == reply


_PLAIN = st.lists(
    st.one_of(
        st.sampled_from([*_ODD_TEXT, *_NUMBERS[:2], "Hello, world.", "a: b", "é", '"', "'"]),
        _UNICODE,
    ),
    max_size=12,
).map("".join)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(derandomize=True, database=None, max_examples=25, deadline=None)
@given(text=_PLAIN, cuts=_CUTS, tools=st.sampled_from([TOOLS, None]))
def test_plain_text_passes_through_whole(
    name: str, text: str, cuts: list[int] | None, tools: Any
) -> None:
    # Text holding no markup at all is the reply's text, every character, in every grammar.
    events = _stream(PARSERS[name], _cut(text, cuts), tools)
    result = assemble(events)
    assert result.content == text and not result.calls and not result.reasoning
    assert [e for e in events if not isinstance(e, TextDelta)] == []


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(derandomize=True, database=None, max_examples=15, deadline=None)
@given(data=st.data())
def test_the_reply_limit_is_the_only_error(name: str, data: st.DataObject) -> None:
    family = PARSERS[name]
    reply = data.draw(_REPLIES[name], label="reply")
    limit = data.draw(st.integers(0, len(reply) + 2), label="max_chars")
    chunks = _cut(reply, data.draw(_CUTS, label="cuts"))
    if len(reply) > limit:
        with pytest.raises(LimitError):
            family.parse(reply, TOOLS, max_chars=limit)
    else:
        family.parse(reply, TOOLS, max_chars=limit)
    s = family.stream(TOOLS, max_chars=limit)
    fed = 0
    for chunk in chunks:
        fed += len(chunk)
        if fed > limit:  # the chunk that passes the limit is refused, none before it
            with pytest.raises(LimitError):
                s.feed(chunk)
            return
        s.feed(chunk)
    s.finish()
    assert s.finish() == []
    with pytest.raises(UsageError):
        s.feed("more")


# ------------------------------------------------------------------------------ drift


@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(
    text=_REPLIES["words"],
    cuts=_CUTS,
    lenient=st.booleans(),
    was_cut=st.booleans(),
    repeats=st.booleans(),
)
def test_drift_recovery_reads_only_calls_to_declared_tools(
    text: str, cuts: list[int] | None, lenient: bool, was_cut: bool, repeats: bool
) -> None:
    found = recover_calls(text, TOOLS, lenient=lenient, cut=was_cut, repeats=repeats)
    if found is not None:
        calls, _shape = found
        assert calls
        for name, arguments, raw in calls:
            assert name in {"get_weather", "write_file", "set_flags"}
            assert isinstance(arguments, dict) and _strict_json(raw) == arguments
    assert recover_calls(text, None) is None  # no tools declared: nothing is recovered
    for release_on_start in (False, True):
        guard = DriftGuard(TOOLS, make_id=_ids, release_on_start=release_on_start)
        events: list[Event] = [ReasoningDelta("thinking")]
        for piece in _cut(text, cuts):
            if piece:
                events += guard.push([TextDelta(piece)])
        events += guard.end(cut=was_cut)
        check_events(events)
        result = assemble(events)
        assert result.reasoning == "thinking"
        if not result.calls:
            assert result.content == text  # held text is released whole


# ------------------------------------------------------------------------------ arguments


@settings(derandomize=True, database=None, max_examples=600, deadline=None)
@given(
    text=st.one_of(_REPLIES["hermes"], _REPLIES["words"], _HOSTILE_VALUES),
    strict=st.booleans(),
    max_depth=st.sampled_from([1, 5, MAX_ARGUMENT_DEPTH]),
    max_chars=st.sampled_from([10, 1000, 4 * 1024 * 1024]),
)
def test_the_argument_reader_raises_only_read_errors(
    text: str, strict: bool, max_depth: int, max_chars: int
) -> None:
    try:
        result = read_json(text, strict=strict, max_depth=max_depth, max_chars=max_chars)
    except ReadError as exc:
        assert str(exc)
        return
    assert len(text) <= max_chars
    assert _finite(result.value)
    assert not (strict and result.repairs)
    json.dumps(result.value)  # a value JSON can write: no NaN smuggled, no odd types


# ------------------------------------------------------------------------------ linear work

_FORMATS_DIR = inspect.getfile(reasoning).rsplit("/", 1)[0]
#: ``str`` methods that take a start position: what they read is not the string's length.
_POSITIONED = {"find", "rfind", "index", "rindex", "count", "startswith", "endswith"}


def _work(family: Family, reply: str, chunk: int) -> int:
    """How many characters the parser's own code looks at while streaming ``reply``.

    Counted, not timed: every ``str`` method the formats' code calls is charged the length
    of the string it is called on (but for the searches given where to start, which a
    profiler cannot see), and every search of the shared scanners (a marker's,
    ``Markers.scan``; a name's, ``NameReader``) the text from where it started to where it
    stopped looking.
    """
    seen = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal seen
        code = frame.f_code
        if event == "c_call" and code.co_filename.startswith(_FORMATS_DIR):
            receiver = getattr(arg, "__self__", None)
            if isinstance(receiver, str) and arg.__name__ not in _POSITIONED:
                seen += len(receiver)
        elif event == "return" and code.co_name == "scan" and code.co_filename.endswith("scan.py"):
            j, marker = arg
            local = frame.f_locals
            seen += (j + len(marker) if marker else local["stop"]) - local["start"]
        elif (
            event == "return"
            and code.co_name == "_look"
            and code.co_filename.endswith("textargs.py")
        ):
            local = frame.f_locals
            m = local["m"]
            seen += (m.end() if m is not None else local["end"]) - local["i"]

    s = family.stream(TOOLS)
    sys.setprofile(profile)
    try:
        for i in range(0, len(reply), chunk):
            s.feed(reply[i : i + chunk])
        s.finish()
    finally:
        sys.setprofile(None)
    return seen


#: Replies once quadratic, each found by this campaign.
QUADRATIC = [
    # many call markers, each opening a name whose end never comes: the name's end was looked
    # for in all the text left, once per marker (every family reading names: LFM2, Gemma 4,
    # Functionary, GLM, MiniMax, Solar, the learned grammars...)
    pytest.param(
        "lfm2", lambda n: "<|tool_call_start|>[get_weather(cit" * (n // 35), 10**6, id="lfm2-name"
    ),
    pytest.param("functionary-v3.1", lambda n: "<function=" * (n // 10), 10**6, id="v3.1-name"),
    pytest.param(
        "functionary-v3.2", lambda n: ">>>get_weather" * (n // 14), 10**6, id="v3.2-recipient"
    ),
    pytest.param("functionary-v3.2", lambda n: ">" * n, 10**6, id="v3.2-markers"),
    # header openers with no header end: the end was looked for in all the text left
    pytest.param("gpt-oss", lambda n: "<|channel|>" * (n // 11), 10**6, id="harmony-header"),
    pytest.param("glimmer", lambda n: "<|start|>" * (n // 9), 10**6, id="glimmer-header"),
    pytest.param(
        "kimi-k3",
        lambda n: "<|open|>tools<|sep|>" + '<|open|>call tool="f' * (n // 20),
        10**6,
        id="kimi-k3-attributes",
    ),
    # a reply of blanks streamed in small pieces: MiniMax M3 joined and stripped all of them
    # again for each piece, while it waited to see whether thinking opens the reply
    pytest.param("minimax-m3", lambda n: "\u2028" * n, 7, id="minimax-m3-blanks"),
    pytest.param("minimax-m3", lambda n: " " * n, 7, id="minimax-m3-spaces"),
]


@pytest.mark.parametrize(("name", "reply", "chunk"), QUADRATIC)
def test_work_is_linear_on_the_replies_once_quadratic(
    name: str, reply: Callable[[int], str], chunk: int
) -> None:
    family = PARSERS[name]
    small, large = reply(3_000), reply(12_000)
    ratio = _work(family, large, chunk) / max(1, _work(family, small, chunk))
    # four times the text: about four times the work (quadratic work would be sixteen)
    assert ratio < 4 * 1.5, ratio
    assert _work(family, large, chunk) < 40 * len(large)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_work_is_linear_for_every_marker_repeated(name: str) -> None:
    # Each of the grammar's markers, written again and again: the work grows with the text.
    family = PARSERS[name]
    for marker in family.markers:
        small, large = marker * (2_000 // len(marker)), marker * (8_000 // len(marker))
        for chunk in (5, 1_000_000):
            ratio = _work(family, large, chunk) / max(1, _work(family, small, chunk))
            assert ratio < 4 * 1.5, (marker, chunk, ratio)


# ------------------------------------------------------------------------------ regressions


def test_kimi_k2_call_broken_after_its_arguments_is_not_also_a_call() -> None:
    # The call's JSON was whole, then the section ended with no <|tool_call_end|>: the call
    # broke and was aborted, its text given back as reply text, yet it also ended as a call
    # (CallAbort, then CallEnd for the same index): one text both shown and run.
    reply = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_calls_section_end|>'
    )
    for chunks in ([reply], list(reply)):
        events = _stream(PARSERS["kimi-k2"], chunks, TOOLS)
        check_events(events)
        result = assemble(events)
        assert result.calls == [] and result.content == reply


def test_kimi_k2_refuses_a_reply_past_its_limit_while_it_holds_a_piece_back() -> None:
    # Kimi K2 holds back a piece that may begin a call token (thinking may still end there)
    # and counted it against the limit only once it passed it on: a reply over the limit was
    # refused by a later call, or by finish(), instead of by the feed that passed the limit.
    s = PARSERS["kimi-k2"].stream(TOOLS, max_chars=3)
    s.feed("ab")
    with pytest.raises(LimitError):
        s.feed("<|")
    with pytest.raises(LimitError):  # refused once, refused from then on
        s.feed("")

"""Adversarial checks of the stream parsers: regressions for bugs found, and properties.

The regression tests state the behaviour the contract asks for; the property tests check
that calls written in each family's grammar with hostile values read back, one-shot and
streamed, however the reply is cut.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import (
    ArgumentsError,
    CallAbort,
    CallArgsDelta,
    CallEnd,
    CallStart,
    ChatTemplate,
    ReasoningDelta,
    TextDelta,
    assemble,
    detect_format,
    get_family,
    prepare_arguments,
)
from toolwire.formats.base import ParseResult
from toolwire.formats.reasoning import known_tags

from .family_cases import text_kept
from .replies import TOOLS


def ids(i: int) -> str:
    return f"id{i}"


def parse(family: str, text: str, tools: Any = TOOLS, **kw: Any) -> ParseResult:
    return get_family(family).parse(text, tools, make_id=ids, **kw)


def stream_events(family: str, chunks: list[str], tools: Any = TOOLS, **kw: Any) -> list[Any]:
    s = get_family(family).stream(tools, make_id=ids, **kw)
    events: list[Any] = []
    for chunk in chunks:
        events += s.feed(chunk)
    events += s.finish()
    return events


def check_events(events: list[Any]) -> None:
    """Every call starts once, gets deltas only while open, and ends exactly once."""
    started: dict[int, CallStart] = {}
    args: dict[int, list[str]] = {}
    ended: set[int] = set()
    for event in events:
        if isinstance(event, CallStart):
            assert event.index not in started
            started[event.index] = event
            args[event.index] = []
        elif isinstance(event, CallArgsDelta):
            assert event.index in started and event.index not in ended
            args[event.index].append(event.text)
        elif isinstance(event, (CallEnd, CallAbort)):
            assert event.index in started and event.index not in ended
            ended.add(event.index)
            if isinstance(event, CallEnd):
                assert event.call.id == started[event.index].id
                assert event.call.name == started[event.index].name
                assert "".join(args[event.index]).strip() == event.call.arguments_text
            else:
                assert event.id == started[event.index].id
    assert ended == set(started)


def strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)


def finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


# ------------------------------------------------------------------ regressions


def test_llama3_notice_does_not_depend_on_where_the_reply_is_cut() -> None:
    # The untagged name is not a declared tool, and the object breaks right after it. Whole,
    # the broken object is reported; cut after the name, the undeclared name is. A one-shot
    # parse and any stream must give the same result, notices included.
    reply = '{"name": "set_flags "parameters": {}}'
    whole = parse("llama3", reply)
    cut = reply.index('"parameters') + 1
    assert assemble(stream_events("llama3", [reply[:cut], reply[cut:]])) == whole


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        (
            "hermes",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}, '
            '"arguments": {"city": "Rome"}}\n</tool_call>',
        ),
        ("llama3", '{"name": "get_weather", "parameters": {"city": "Oslo"}, "parameters": {}}'),
        (
            "mistral",
            '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, '
            '"arguments": {"city": "Rome"}}]',
        ),
    ],
)
def test_a_repeated_arguments_key_never_gives_argument_text_that_is_not_the_arguments(
    family: str, reply: str
) -> None:
    # Which object is the arguments is ambiguous, and streaming both run together
    # ('{"city": "Oslo"}{"city": "Rome"}') would give argument text no consumer can read:
    # the reply is not a call, as with two different names, and stays text.
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        (
            "hermes",
            '<tool_call>\n{"name": "set_flags", "arguments": {"ratio": 1e999}}\n</tool_call>',
        ),
        ("llama3", '{"name": "set_flags", "parameters": {"ratio": -1e400}}'),
        ("mistral", '[TOOL_CALLS]set_flags[ARGS]{"ratio": 1e999}'),
        (
            "qwen-xml",
            "<tool_call>\n<function=set_flags>\n<parameter=ratio>\n1e999\n</parameter>\n"
            "</function>\n</tool_call>",
        ),
    ],
)
def test_numbers_out_of_float_range_never_become_infinity(family: str, reply: str) -> None:
    # loads_json promises JSON without NaN/Infinity, yet 1e999 reads as float('inf'); the
    # typed call then serialises as the non-JSON token Infinity (and Qwen XML streams
    # '{"ratio": Infinity}' as the argument text).
    for call in parse(family, reply).calls:
        assert finite(call.arguments)
        strict_json(call.arguments_text)


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        (
            "hermes",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        ),
        (
            "mistral",
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Par\n'
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        ),
    ],
)
def test_a_broken_call_does_not_swallow_the_complete_call_after_it(family: str, reply: str) -> None:
    # JSON strings cannot hold a raw newline, so the first call breaks at that newline and
    # its text up to there stays text. The scanner does not see it and reads on inside the
    # "string" into the next call, so the complete call that follows becomes text too.
    result = parse(family, reply)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]


def test_a_self_referencing_schema_is_not_a_crash() -> None:
    # Schemas with $refs resolved in place can be cyclic. Reading the call does not depend
    # on the schema, so the call is read; typing its arguments refuses the schema with the
    # one error the argument pipeline raises, never a RecursionError.
    node: dict[str, Any] = {}
    node["anyOf"] = [node, {"type": "integer"}]
    schema = {"type": "object", "properties": {"n": node}}
    reply = '<tool_call>\n{"name": "f", "arguments": {"n": "3"}}\n</tool_call>'
    result = parse("hermes", reply, tools=[{"name": "f", "parameters": schema}])
    assert [(c.name, c.arguments_text) for c in result.calls] == [("f", '{"n": "3"}')]
    with pytest.raises(ArgumentsError, match="Circular reference"):
        prepare_arguments(result.calls[0].arguments_text, schema, name="f")


_CHATML_CALLS = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>\n"
    "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}\n"
    "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\nGEN{% endif %}"
)


def test_detection_when_the_generation_prompt_opens_thinking() -> None:
    # The probe diffs the prompt with the rendered call turn character by character. When
    # the prompt ends "<think>\n" and the turn starts "<tool_call>", the shared "<t" is
    # counted as prompt and the probe parses "ool_call>…": the template reads as "none".
    assert detect_format(ChatTemplate(_CHATML_CALLS.replace("GEN", ""))).format == "hermes"
    opening = ChatTemplate(_CHATML_CALLS.replace("GEN", "<think>\n"))
    assert detect_format(opening).format == "hermes"


# ------------------------------------------------------------------ properties

_TRICKY = [
    "",
    "\\",
    '"',
    "\\u0041",
    "</tool_call>",
    "<tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<think>",
    "</think>",
    "</function>",
    "<parameter=x>",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\u2028",
    "\ud800",
    "\udfff",
    "\U0001f600",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
]
_STRINGS = st.lists(st.sampled_from(_TRICKY) | st.text(max_size=3), max_size=6).map("".join)
_SCALARS = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | _STRINGS
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_STRINGS, inner, max_size=3),
    max_leaves=8,
)
_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_ARGS = st.dictionaries(_STRINGS, _VALUES, max_size=4)
_XML_ARGS = st.dictionaries(_NAMES, _STRINGS.filter(lambda v: "</parameter>" not in v), max_size=4)
_CHUNKS = st.lists(st.integers(0, 10_000), max_size=10)


def _cut(reply: str, cuts: list[int]) -> list[str]:
    points = sorted(c % (len(reply) + 1) for c in cuts)
    return [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]


def _dumps(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


def _write(family: str, name: str, args: dict[str, Any], form: int, ascii_only: bool) -> str:
    if family == "hermes":
        return f"<tool_call>\n{_dumps({'name': name, 'arguments': args}, ascii_only)}\n</tool_call>"
    if family == "llama3":
        return _dumps({"name": name, "parameters": args}, ascii_only)
    if family == "mistral":
        if form == 0:
            item = {"name": name, "arguments": args, "id": "abcdefghi"}
            return "[TOOL_CALLS]" + _dumps([item], ascii_only)
        return f"[TOOL_CALLS]{name}[ARGS]{_dumps(args, ascii_only)}"
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


#: Markup a reply's text must not hold to stay text: the calls' markers, and the thinking and
#: answer tags every stream recognises (an answer's opener at the start is dropped, as meant).
_MARKUP = ("<tool_call>", "[TOOL_CALLS]", *known_tags().openers, *known_tags().answers)
_PLAIN_TEXT = st.text(max_size=8).filter(lambda t: not any(m in t for m in _MARKUP))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["hermes", "qwen-xml", "llama3", "mistral"]),
    calls=st.lists(st.tuples(_NAMES, _ARGS, _XML_ARGS), min_size=1, max_size=3),
    texts=st.lists(_PLAIN_TEXT, min_size=4, max_size=4),
    form=st.integers(0, 1),
    ascii_only=st.booleans(),
    cuts=_CHUNKS,
)
def test_calls_with_hostile_values_read_back_however_cut(
    family: str,
    calls: list[tuple[str, dict[str, Any], dict[str, str]]],
    texts: list[str],
    form: int,
    ascii_only: bool,
    cuts: list[int],
) -> None:
    parts: list[str] = []
    expected: list[tuple[str, Any]] = []
    content = ""
    for i, (name, args, xml_args) in enumerate(calls):
        a = xml_args if family == "qwen-xml" else args
        if family == "llama3":
            parts.append("; " if i else "<|python_tag|>")
        else:
            parts.append(texts[i])
            content += texts[i]
        parts.append(_write(family, name, a, form, ascii_only))
        # "\ud800" + "\udfff" escaped reads back as one astral character, as JSON says
        expected.append((name, a if family == "qwen-xml" else json.loads(_dumps(a, ascii_only))))
    if family != "llama3":
        parts.append(texts[3])
        content += texts[3]
    reply = "".join(parts)
    whole = parse(family, reply, tools=None)
    assert [(c.name, c.arguments) for c in whole.calls] == expected
    assert whole.content == content
    for call in whole.calls:
        assert strict_json(call.arguments_text) == call.arguments
    events = stream_events(family, _cut(reply, cuts), tools=None)
    assert assemble(events) == whole
    check_events(events)
    one_by_one = stream_events(family, list(reply), tools=None)
    assert assemble(one_by_one) == whole
    check_events(one_by_one)


_PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<think>",
    "</think>",
    "[THINK]",
    "[/THINK]",
    '{"name": "get_weather", ',
    '{"name": "set_flags", ',
    '"arguments": ',
    '"parameters": ',
    '"id": ',
    '"type": "function"',
    '{"city": "x"}',
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "\\u00",
    ",",
    ":",
    ";",
    "\n",
    "\r\n",
    " ",
    "get_weather",
    "days",
    "city",
    ">",
    "3",
    "\ud800",
    "\U0001f600",
]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    family=st.sampled_from(["hermes", "qwen-xml", "mistral"]),
    pieces=st.lists(st.sampled_from(_PIECES), max_size=30),
    cuts=_CHUNKS,
    opened=st.booleans(),
    tools=st.sampled_from([TOOLS, None]),
)
def test_marker_families_agree_on_any_text(
    family: str, pieces: list[str], cuts: list[int], opened: bool, tools: Any
) -> None:
    reply = "".join(pieces)
    whole = parse(family, reply, tools=tools, reasoning_open=opened)
    events = stream_events(family, _cut(reply, cuts), tools=tools, reasoning_open=opened)
    assert assemble(events) == whole
    check_events(events)
    # Nothing is lost: reply text, reasoning and each call's text account for every
    # character but the whitespace around a thinking block and the markup every reader drops.
    if not whole.calls and not opened and not reply.lstrip().startswith(("<think>", "[THINK]")):
        assert whole.content == text_kept(family, reply)


@pytest.mark.parametrize("family", ["hermes", "qwen-xml", "llama3", "mistral"])
def test_calls_inside_reasoning_are_never_read(family: str) -> None:
    call = {
        "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>',
        "qwen-xml": "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
        "llama3": '<|python_tag|>{"name": "get_weather", "parameters": {}}',
        "mistral": "[TOOL_CALLS]get_weather[ARGS]{}",
    }[family]
    for reply, opened in [
        (f"<think>{call}</think>", False),
        (f"[THINK]{call}[/THINK]", False),
        (f"  <think>\n{call}", False),
        (f"{call}</think>", True),
        (call, True),
    ]:
        for chunks in ([reply], list(reply)):
            # strict: a call at a line's start does not end a block the prompt opened
            events = stream_events(family, chunks, reasoning_open=opened, strict=True)
            assert not any(isinstance(e, (CallStart, CallEnd)) for e in events), reply
            reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
            assert call in reasoning
            assert not any(isinstance(e, TextDelta) and e.text.strip() for e in events)

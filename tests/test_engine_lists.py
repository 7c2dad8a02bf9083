"""Call objects where a syntax's framing holds a call written otherwise, read by the engine
for every such syntax, declared or learned, each named and refused by strict reading:

- a JSON list of call objects where the framing holds one call object
  (``<tool_call>[{…}, {…}]</tool_call>``, ``recovered-call-list``): SGLang's JSON readers
  take a list wherever an object is due (its K2 Horizon tests write one in
  ``<ifm|tool_call>``); a model trained on a list family or on OpenAI's ``tool_calls`` array
  writes it;
- a call object where a tagged syntax's name is due, right after a tag (Hermes' body in
  GLM's ``<tool_call>``, ``recovered-json-call``), and a list of them.

The replies are built from each syntax's own words, so a family declared later is covered
too; each is read whole and at every split point.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import Notice
from toolwire.formats.base import Family, assemble
from toolwire.formats.declared import DECLARED
from toolwire.formats.derived import DerivedShape
from toolwire.formats.detect import detect_format
from toolwire.templates import ChatTemplate

from .replies import TOOLS
from .test_engine_behaviours import _events, _every_split


def _framed_one(shape: DerivedShape) -> bool:
    """A form whose framing holds one call object (not a list form, not a whole reply)."""
    listed = shape.kind == "json" and bool(shape.trail) and not shape.trail_optional
    json_call = shape.kind == "json" or (shape.kind == "tags" and shape.json_too)
    plain = not (shape.name_is_key or shape.id_key or shape.constants or shape.strings)
    return json_call and plain and not listed and not shape.whole


def _own_list(forms: tuple[DerivedShape, ...], shape: DerivedShape) -> bool:
    """Another form at the same marker opens a list: a list there is the family's own
    grammar (LFM2 writes its call list either as Python or as JSON), no repair."""
    return any(f.marker == shape.marker and "[" in f.opening for f in forms)


#: (family, form) of every declared form that frames one call object.
FORMS = [
    (name, i)
    for name, syntax in DECLARED.items()
    for i, shape in enumerate(syntax.forms)
    if _framed_one(shape) and not _own_list(syntax.forms, shape)
]


def _joined(words: tuple[str, ...]) -> str:
    return "".join(words)


def _list_reply(shape: DerivedShape, objects: list[str]) -> str:
    block = _joined(shape.opening) + "\n[" + ", ".join(objects) + "]\n" + _joined(shape.post)
    return block + ("\n" + _joined(shape.trail) if shape.trail else "")


def _object(shape: DerivedShape, city: str) -> str:
    return json.dumps({shape.name_key: "get_weather", shape.args_key: {"city": city}})


def _codes(family: Family, tools: Any, reply: str) -> list[str]:
    return [e.code for e in _events(family, tools, [reply], False) if isinstance(e, Notice)]


def test_the_forms_are_those_expected() -> None:
    # (the list is computed: this says it holds the families peers read a list in)
    assert {name for name, _ in FORMS} >= {"hermes", "k2v3-ifm", "internlm2", "longcat"}


@pytest.mark.parametrize(("name", "form"), FORMS)
def test_a_list_of_call_objects_in_one_call_s_framing_is_read(name: str, form: int) -> None:
    shape = DECLARED[name].forms[form]
    family = get_family(name)
    reply = _list_reply(shape, [_object(shape, "Paris"), _object(shape, "Rome")])
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
    ], reply
    assert result.content.strip() == ""
    assert _codes(family, TOOLS, reply).count("recovered-call-list") == 1
    strict = family.parse(reply, TOOLS, strict=True)
    assert not strict.calls and strict.content == reply


@pytest.mark.parametrize(("name", "form"), FORMS)
def test_a_list_that_is_not_one_of_call_objects_is_text(name: str, form: int) -> None:
    shape = DECLARED[name].forms[form]
    family = get_family(name)
    good = _object(shape, "Paris")
    for objects in ([good + " x"], ["1", good], []):
        reply = _list_reply(shape, objects)
        result = family.parse(reply, TOOLS)
        assert not result.calls, reply
        assert result.content == reply
        assert "call-not-read" in _codes(family, TOOLS, reply)


def test_a_list_the_reply_cut_after_a_whole_call_gives_that_call() -> None:
    family = get_family("hermes")
    paris = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    for reply in (f"<tool_call>\n[{paris}, ", f"<tool_call>\n[{paris}]"):
        result = assemble(_every_split(family, TOOLS, reply, False))
        assert [c.arguments for c in result.calls] == [{"city": "Paris"}], reply
        assert "recovered-unclosed-tag" in _codes(family, TOOLS, reply)
    # cut inside the second object: the list is no whole call list, and stays text
    cut = f'<tool_call>\n[{paris}, {{"name": "get_w'
    assert not family.parse(cut, TOOLS).calls


def test_a_family_whose_calls_are_a_list_reads_no_list_in_a_list() -> None:
    # Mistral's [TOOL_CALLS] list is its grammar: a list inside it is no call
    family = get_family("mistral")
    reply = '[TOOL_CALLS][[{"name": "get_weather", "arguments": {"city": "Paris"}}]]'
    assert not family.parse(reply, TOOLS).calls


#: A template no family reads, whose calls are each one JSON object in ``<<call>>`` tags.
_TAGGED_JSON = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<|a|>{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<<call>>"
    '{"name": {{ c.function.name | tojson }}, "arguments": {{ c.function.arguments | tojson }}}'
    "<</call>>{% endfor %}<|end|>"
    "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|a|>{% endif %}"
)


def test_a_learned_syntax_reads_a_list_in_its_framing_too() -> None:
    found = detect_format(ChatTemplate(_TAGGED_JSON, eos_token="<|end|>"), families=())
    assert found.format == "derived" and found.family is not None
    shape = found.shape
    assert isinstance(shape, DerivedShape) and shape.kind == "json"
    family = found.family
    reply = '<<call>>[{"name": "get_weather", "arguments": {"city": "Paris"}},'
    reply += ' {"name": "get_weather", "arguments": {"city": "Rome"}}]<</call>>'
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [c.arguments for c in result.calls] == [{"city": "Paris"}, {"city": "Rome"}]
    assert "recovered-call-list" in _codes(family, TOOLS, reply)


def _tag_named(shape: DerivedShape) -> bool:
    """A tagged or Python-call form whose name comes right after a tag (not an attribute)."""
    last = shape.opening[-1] if shape.opening else ""
    kinds = ("tags", "name-python")
    return shape.kind in kinds and not shape.json_too and last.endswith((">", "|"))


def _own_json(forms: tuple[DerivedShape, ...], shape: DerivedShape) -> bool:
    """Another form at the same marker is a JSON call object: one there is the family's own
    grammar (LongCat writes its call either way), no repair."""
    return any(f.marker == shape.marker and f.kind == "json" for f in forms if f is not shape)


#: (family, form) of every declared form whose name comes right after a tag.
TAGGED = [
    (name, i)
    for name, syntax in DECLARED.items()
    for i, shape in enumerate(syntax.forms)
    if _tag_named(shape) and not _own_json(syntax.forms, shape)
]


def _in_tags(shape: DerivedShape, body: str) -> str:
    post = _joined(shape.post) + ("\n" + _joined(shape.trail) if shape.trail else "")
    return _joined(shape.opening) + body + post


def test_the_tagged_forms_are_those_expected() -> None:
    assert {name for name, _ in TAGGED} >= {"glm", "tagged-pythonic", "hunyuan"}
    assert "minimax" not in {name for name, _ in TAGGED}  # its name is an attribute's value


@pytest.mark.parametrize(("name", "form"), TAGGED)
def test_a_call_object_where_a_tagged_syntax_s_name_is_due_is_read(name: str, form: int) -> None:
    shape = DECLARED[name].forms[form]
    family = get_family(name)
    paris = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    rome = '{"name": "get_weather", "parameters": {"city": "Rome"}}'
    bodies = [(paris, ["Paris"]), (f"[{paris}, {rome}]", ["Paris", "Rome"])]
    if _own_list(DECLARED[name].forms, shape):  # a [ there opens the family's own list
        bodies = bodies[:1]
    for body, cities in bodies:
        reply = _in_tags(shape, body)
        result = assemble(_every_split(family, TOOLS, reply, False))
        assert [(c.name, c.arguments["city"]) for c in result.calls] == [
            ("get_weather", city) for city in cities
        ], reply
        assert result.content.strip() == ""
        assert "recovered-json-call" in _codes(family, TOOLS, reply)
        strict = family.parse(reply, TOOLS, strict=True)
        assert not strict.calls and strict.content == reply
    # an object that is no call stays text
    for body in ('{"city": "Paris"}', '{"name": "get_weather"} x', "{not json}"):
        reply = _in_tags(shape, body)
        assert not family.parse(reply, TOOLS).calls, reply


@pytest.mark.parametrize(
    ("name", "reply", "key"),
    [
        (
            "hermes",
            '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>',
            "parameters",
        ),
        (
            "granite",
            '<|tool_call|>[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
            "parameters",
        ),
        (
            "longcat",
            '<longcat_tool_call>{"name": "get_weather", "parameters": {"city": "Paris"}}'
            "</longcat_tool_call>",
            "parameters",
        ),
        (
            "mistral",
            '[TOOL_CALLS][{"name": "get_weather", "parameters": {"city": "Paris"}}]',
            "parameters",
        ),
    ],
)
def test_the_arguments_under_the_other_key_models_write_are_read(
    name: str, reply: str, key: str
) -> None:
    """``parameters`` where the family writes ``arguments`` (and back): read for every JSON
    syntax, named (recovered-arguments-key), as SGLang's JSON readers and tools in words read
    it; strict refuses it."""
    family = get_family(name)
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert "recovered-arguments-key" in _codes(family, TOOLS, reply)
    assert family.parse(reply, TOOLS, strict=True).calls == []


def _python_lists() -> list[str]:
    """The declared families whose calls are a list of Python calls inside closing words."""
    return sorted(
        name
        for name, syntax in DECLARED.items()
        if syntax.shape.kind == "name-python" and syntax.shape.trail
    )


def test_the_python_lists_are_those_expected() -> None:
    assert {"olmo3", "lfm2", "pythonic", "tagged-pythonic"} <= set(_python_lists())


#: Values that are no Python literal a call's arguments may hold: a bytes value, a number
#: past a float's range, and one inside a nested list after a string holding ``)``.
_NO_LITERAL = ["b'z'", "1e999", "[1, (2, 'a)'), b'q']"]


@pytest.mark.parametrize("value", _NO_LITERAL)
@pytest.mark.parametrize("name", _python_lists())
def test_a_python_call_whose_value_is_no_literal_is_left_out_and_the_others_are_read(
    name: str, value: str
) -> None:
    """Issue 39's one malformed element, for lists of Python calls (Olmo 3's peers read the
    good calls of ``<function_calls>bad(x=b'z')\\nget_weather(…)``): the broken call given
    back as text with a ``call-not-read`` notice, the others read, strict refusing it."""
    import re

    syntax = DECLARED[name]
    calls = [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"})]
    reply = syntax.reply([*calls, ("get_weather", {"city": "Rome"})])
    reply, n = re.subn(r"""zone=(['"])UTC\1""", f"zone={value}", reply)
    assert n == 1
    family = get_family(name)
    events = _every_split(family, TOOLS, reply, False)
    result = assemble(events)
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
    ]
    assert result.content.strip() == f"get_time(zone={value})"  # given back, nothing lost
    assert [e.code for e in events if isinstance(e, Notice)] == ["call-not-read"]
    strict = family.parse(reply, TOOLS, strict=True)
    assert strict.calls == [] and strict.content == reply


@pytest.mark.parametrize(
    ("name", "reply"),
    [("olmo3", "<function_calls>bad(x=b'z')</function_calls>"), ("pythonic", "[bad(x=b'z')]")],
)
def test_a_python_list_none_of_whose_calls_is_read_stays_text(name: str, reply: str) -> None:
    result = get_family(name).parse(reply, TOOLS)
    assert result.calls == [] and result.content == reply


def test_a_python_call_after_a_semicolon_is_left_out_alone() -> None:
    """``a(); bad(); b()`` on one line: only the broken call is left out."""
    reply = "<function_calls>get_weather(city='Paris'); bad(x=b'z'); get_weather(city='Rome')"
    reply += "</function_calls>"
    family = get_family("olmo3")
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [c.arguments["city"] for c in result.calls] == ["Paris", "Rome"]
    assert result.content.strip() == "bad(x=b'z')"


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        # a triple-quoted string: a bracket count cannot pair its quotes, so no call in it
        (
            "pythonic",
            "<|python_start|>[get_time(zone=b'''a'), get_weather(city=\"Paris\"), "
            "get_time(zone=b'c''')]<|python_end|>",
        ),
        # a positional argument: prose or code, not a call to leave out
        ("pythonic", "[get_weather(city='Paris'), get_time(x, y)] are the two calls I'd make."),
        ("olmo3", "<function_calls>\nget_weather(city='Paris')\nget_time(zone)\n</function_calls>"),
    ],
)
def test_a_python_list_whose_broken_call_cannot_be_ended_for_certain_is_text(
    name: str, reply: str
) -> None:
    family = get_family(name)
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert result.calls == [] and result.content == reply


def test_a_broken_first_call_gives_back_its_own_text() -> None:
    reply = "<|python_start|>[get_time(zone=b'z'), get_weather(city='Paris')]<|python_end|>"
    result = get_family("pythonic").parse(reply, TOOLS)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert result.content == "get_time(zone=b'z')"


def test_the_rest_of_a_broken_call_is_held_no_further_than_its_bound() -> None:
    """A broken call that never ends: past MAX_ITEM the block is text, and the reply after it
    streams as it comes, not held to the end."""
    from toolwire.events import TextDelta
    from toolwire.formats.listitems import MAX_ITEM

    stream = get_family("olmo3").stream(TOOLS)
    stream.feed("<function_calls>\nget_weather(city='Paris')\nbad(x=b'z'\n</function_calls>\n")
    piece = "I'll explain (more) here. "
    shown = 0
    for _ in range(2 * MAX_ITEM // len(piece)):
        shown += sum(len(e.text) for e in stream.feed(piece) if isinstance(e, TextDelta))
    assert shown > MAX_ITEM // 2
    result = assemble(stream.finish())
    assert result.calls == []

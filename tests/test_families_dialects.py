"""SGLang's tagged dialects, declared as syntax from the start: Python calls in Qwen's
``<tool_call>`` (``tagged-pythonic``), gpt-oss's Harmony header with JSON arguments there
(``tagged-harmony``), and MiniMax M2's invokes in a plain ``<tool_calls>`` block, each value's
type in its tag where written (``invoke-xml``), as SGLang's multi-format reader reads them;
and K2 Horizon's ``<ifm|…>`` tags (``k2v3-ifm``), as SGLang's K2-v3 reader reads them; and
xLAM's JSON call list (``xlam``), bare as the whole reply or after a tag, as vLLM's xLAM
reader reads it.

The replies below are written from that reader's grammar and its tests' replies; the peers'
own cases are read in ``tests/test_peer_cases.py`` (SGLang's development set). Each family
shares its marker with Hermes, Qwen XML and GLM: the matrix proves no family reads another's
calls, and every engine behaviour (a block the reply ends before its closing tag, thinking,
end tokens) is theirs as it is every declared family's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire import get_family

from .family_checks import check_foreign, check_near_miss, check_valid
from .replies import FLAGS, TOOLS, WEATHER, WRITE
from .test_formats import check_stream, parse

Call = tuple[str, dict[str, Any]]


def tagged_pythonic(*calls: Call) -> str:
    lines = [f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls]
    return "<tool_call>\n" + "\n".join(lines) + "\n</tool_call>"


def tagged_harmony(*calls: Call, assistant: bool = True, kind: bool = True) -> str:
    head = "assistant " if assistant else ""
    json_word = " json" if kind else ""
    return "".join(
        f"<tool_call>{head}to=functions.{n}{json_word}\n{json.dumps(a)}\n</tool_call>"
        for n, a in calls
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def invoke_xml(*calls: Call, typed: bool = True) -> str:
    def param(k: str, v: Any) -> str:
        kind = f' string="{str(isinstance(v, str)).lower()}"' if typed else ""
        return f'<parameter name="{k}"{kind}>{_text(v)}</parameter>'

    invokes = "".join(
        f'<invoke name="{n}">' + "".join(param(k, v) for k, v in a.items()) + "</invoke>"
        for n, a in calls
    )
    return f"<tool_calls>{invokes}</tool_calls>"


def k2v3(*calls: Call, section: bool = True) -> str:
    def call(n: str, a: dict[str, Any]) -> str:
        args = "".join(
            f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>{_text(v)}</ifm|arg_value>"
            for k, v in a.items()
        )
        return f"<ifm|tool_call>{n}{args}</ifm|tool_call>"

    if not section:
        return "".join(call(n, a) for n, a in calls)
    body = "\n".join(call(n, a) for n, a in calls)
    return f"<ifm|tool_calls>\n{body}\n</ifm|tool_calls>"


def xlam(*calls: Call, lead: str = "", tail: str = "") -> str:
    items = ", ".join(json.dumps({"name": n, "arguments": a}) for n, a in calls)
    return f"{lead}[{items}]{tail}"


MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {
    "xlam": [
        (xlam(WEATHER), "", [WEATHER]),
        ("\n " + xlam(WRITE, FLAGS) + "\n", "", [WRITE, FLAGS]),
        ("Sure." + xlam(FLAGS, lead="<tool_call>", tail="</tool_call>"), "Sure.", [FLAGS]),
        ("<think>plan</think>" + xlam(WEATHER), "", [WEATHER]),
    ],
    "tagged-pythonic": [
        (tagged_pythonic(WEATHER), "", [WEATHER]),
        ("Sure. " + tagged_pythonic(WRITE, FLAGS), "Sure. ", [WRITE, FLAGS]),
        ("<think>plan</think>" + tagged_pythonic(WEATHER), "", [WEATHER]),
        # one call a block, two blocks
        (tagged_pythonic(WEATHER) + tagged_pythonic(FLAGS), "", [WEATHER, FLAGS]),
        ("<tool_call>get_weather(city='Paris', days=3)</tool_call>", "", [WEATHER]),
    ],
    "tagged-harmony": [
        (tagged_harmony(WEATHER), "", [WEATHER]),
        ("Some preamble.\n" + tagged_harmony(WRITE, FLAGS), "Some preamble.\n", [WRITE, FLAGS]),
        (tagged_harmony(WEATHER, assistant=False), "", [WEATHER]),
        (tagged_harmony(WEATHER, kind=False), "", [WEATHER]),
        (tagged_harmony(WEATHER, assistant=False, kind=False), "", [WEATHER]),
        ("<think>plan</think>" + tagged_harmony(FLAGS), "", [FLAGS]),
    ],
    "invoke-xml": [
        (invoke_xml(WEATHER), "", [WEATHER]),
        ("Sure. " + invoke_xml(WRITE, FLAGS), "Sure. ", [WRITE, FLAGS]),
        (invoke_xml(WEATHER, typed=False), "", [WEATHER]),
        ("<think>plan</think>" + invoke_xml(FLAGS), "", [FLAGS]),
    ],
    "k2v3-ifm": [
        (k2v3(WEATHER), "", [WEATHER]),
        ("Sure. " + k2v3(WRITE, FLAGS), "Sure. ", [WRITE, FLAGS]),
        (k2v3(WEATHER, FLAGS, section=False), "", [WEATHER, FLAGS]),
        ("<ifm|think_fast>plan</ifm|think_fast>\n" + k2v3(WEATHER), "", [WEATHER]),
        (
            '<ifm|tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
            "</ifm|tool_call>",
            "",
            [WEATHER],
        ),
    ],
}

MY_NEAR_MISSES: dict[str, list[str]] = {
    "xlam": [
        xlam(WEATHER) + "and some text after it",  # a bare list, prose not set apart
        '[{"name": "get_weather", "arguments": {"city": "Par',
        '[{"name": "nope", "arguments": {}}]',  # a whole reply names declared tools only
        "[TOOL_CALLS]not a list",
        '<tool_call>[{"name": "get_weather", "arguments": [1]}]</tool_call>',
    ],
    "tagged-pythonic": [
        "<tool_call>\nget_weather('Paris')\n</tool_call>",  # positional
        "<tool_call>\nget_weather(city='Par",
        "<tool_call>\nget_weather(city='Paris', city='Rome')\n</tool_call>",
        # (Hermes' JSON body in the tag is read, named: tests/test_engine_lists.py)
        '<tool_call>\n{"name": "get_weather", "arguments": {}} x\n</tool_call>',
    ],
    "tagged-harmony": [
        "<tool_call>assistant to=functions.get_weather json\nnot json\n</tool_call>",
        '<tool_call>assistant to=functions.get_weather json\n{"city": "Par',
        '<tool_call>assistant to=get_weather json\n{"city": "Paris"}\n</tool_call>',
        '<tool_call>assistant to=functions.get_weather yaml\n{"city": "Paris"}\n</tool_call>',
    ],
    "invoke-xml": [
        '<tool_calls><invoke name="get_weather"><parameter name="city">Par',
        '<tool_calls><invoke name="get_weather"><city>Paris</city></invoke></tool_calls>',
        '<tool_calls><invoke name="get weather"></invoke></tool_calls>',
        '<tool_calls>[{"name": "get_weather", "arguments": {}}]</tool_calls>',  # Apriel's
    ],
    "k2v3-ifm": [
        "<ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Par",
        "<ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_type>"
        + "x" * 80
        + "</ifm|arg_type><ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call>",
        '<ifm|tool_call>{"name": "get_weather", "arguments": [1]}</ifm|tool_call>',
        "<ifm|tool_calls><ifm|tool_call>get weather</ifm|tool_call></ifm|tool_calls>",
    ],
}

#: Every reply above, for the streaming and "nothing is lost" properties every family has.
MY_REPLIES = [(f, r) for f, cases in MY_VALID.items() for r, _, _ in cases] + [
    (f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs
]


@pytest.mark.parametrize(
    ("family", "reply", "content", "calls"),
    [(f, *case) for f, cases in MY_VALID.items() for case in cases],
)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Any]) -> None:
    check_valid(family, reply, content, calls)


@pytest.mark.parametrize(
    ("family", "reply"), [(f, r) for f, rs in MY_NEAR_MISSES.items() for r in rs]
)
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    check_near_miss(family, reply)


def test_a_call_to_a_tool_not_declared_is_read_as_sglang_forwards_it() -> None:
    """SGLang forwards a call to a name the request did not declare (its tests say so): the
    reader reads it; whether it runs is the tool loop's decision, as for every family."""
    reply = '<tool_call>assistant to=functions.not_registered json\n{"x": "NYC"}\n</tool_call>'
    assert [c.name for c in parse("tagged-harmony", reply, TOOLS).calls] == ["not_registered"]
    python = '<tool_call>not_registered(x="NYC")</tool_call>'
    assert [c.name for c in parse("tagged-pythonic", python, TOOLS).calls] == ["not_registered"]


def test_xlam_peer_cases_pass() -> None:
    """vLLM's xLAM reader's own cases (the development set of the later grammars)."""
    from .test_families_declared_new import NEW_OUT

    xlam_cases = {k: o for k, o in NEW_OUT.items() if o.family == "xlam"}
    assert len(xlam_cases) >= 6
    assert all(o.passed for o in xlam_cases.values()), xlam_cases


@pytest.mark.parametrize(
    "reply", ["[1, 2, 3]", "[1] A footnote.", "[link](https://example.com)", '[{"a": 1}]', "[]"]
)
def test_xlam_a_bracket_that_never_names_a_call_is_text_without_a_notice(reply: str) -> None:
    result = parse("xlam", reply, TOOLS)
    assert (result.content, result.calls, result.notices) == (reply, [], [])


def test_xlam_reads_mistral_s_list_as_vllm_s_xlam_reader_does() -> None:
    reply = "I'll check. " + xlam(WEATHER, lead="[TOOL_CALLS]")
    result = parse("xlam", reply, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [WEATHER]
    assert result.content == "I'll check. " and not result.notices
    # the form is read, never written: Mistral's own
    assert all("[TOOL_CALLS]" not in get_family("xlam").sample(i) for i in range(2))


def test_xlam_one_malformed_item_loses_only_itself() -> None:
    reply = xlam(WEATHER)[:-1] + ", 15:30]"
    result = parse("xlam", reply, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [WEATHER]
    assert result.content == "15:30" and len(result.notices) == 1
    assert parse("xlam", reply, TOOLS, strict=True).calls == []


def test_xlam_a_last_block_after_prose_must_fit_its_tools() -> None:
    """After prose the list is a guess: read only when every call fits its tool's schema."""
    result = parse("xlam", "Let me look that up.\n" + xlam(WEATHER), TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [WEATHER]
    assert result.content == "Let me look that up.\n"
    assert result.notices == ["read the call to get_weather the reply ends with, after its prose"]
    reply = 'Here it is:\n[{"name": "get_weather", "arguments": {"days": "many"}}]'
    result = parse("xlam", reply, TOOLS)
    assert result.calls == [] and result.content == reply
    assert parse("xlam", "Here it is:\n" + xlam(WEATHER), TOOLS, strict=True).calls == []


@pytest.mark.parametrize("name", ["tagged-pythonic", "tagged-harmony"])
def test_the_dialects_never_read_the_families_sharing_their_marker(name: str) -> None:
    """Hermes's JSON, Qwen XML's tags and GLM's keys in the same ``<tool_call>``: none is a
    call of these dialects (Hermes' JSON body only under the named sibling repair), and none
    of their calls is a call of those families."""
    others = {
        "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call>",
        "qwen-xml": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n</function>\n</tool_call>",
        "glm": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        "</tool_call>",
    }
    for other, reply in others.items():
        check_foreign(name, reply)  # (Hermes' JSON in the tag: a named repair only)
        own = MY_VALID[name][0][0]
        assert get_family(other).parse(own, TOOLS).calls == [], other


@pytest.mark.parametrize(
    ("family", "opening", "closing"),
    [
        ("tagged-pythonic", "<tool_call>", "</tool_call>"),
        ("olmo3", "<function_calls>\n", "\n</function_calls>"),
    ],
)
def test_python_s_own_syntax_is_read_in_every_python_family(
    family: str, opening: str, closing: str
) -> None:
    """Python's statement separator between two calls on a line, and a tuple (read as a
    list: JSON has none), in every syntax of Python calls, strict or not."""
    reply = opening + "get_weather(city='Paris', days=(1, 2)); set_flags(a=(3,), b=())" + closing
    for strict in (False, True):
        result = parse(family, reply, strict=strict)
        assert [(c.name, c.arguments) for c in result.calls] == [
            ("get_weather", {"city": "Paris", "days": [1, 2]}),
            ("set_flags", {"a": [3], "b": []}),
        ]
        assert result.content == "" and not result.notices
    for k in range(len(reply) + 1):
        check_stream(family, reply, [reply[:k], reply[k:]])


def test_a_value_s_type_in_its_tag_is_the_grammar_s_strict_or_not() -> None:
    """``string="true"``: the value is its text exactly, quotes and all; ``"false"``: JSON,
    a JSON string read as that string. The grammar's own: no notice, strict reads it too.
    Another attribute there is read past as in every syntax, named; strict refuses it."""
    reply = (
        '<tool_calls><invoke name="get_weather"><parameter name="city" string="true">"P"'
        '</parameter><parameter name="days" string="false">"3"</parameter></invoke></tool_calls>'
    )
    for strict in (False, True):
        result = parse("invoke-xml", reply, strict=strict)
        assert [c.arguments for c in result.calls] == [{"city": '"P"', "days": "3"}]
        assert not result.notices
    other = reply.replace('string="true"', 'type="string"')
    assert [n for n in parse("invoke-xml", other).notices if "read past" in n]
    assert parse("invoke-xml", other, strict=True).calls == []


def test_a_value_s_type_is_written_and_constrained() -> None:
    """The writer writes each value's type as the dialect does; the grammar asks for it."""
    from toolwire.formats.declared import INVOKE_XML
    from toolwire.formats.gbnf import constraint_for

    reply = INVOKE_XML.write("get_weather", {"city": "Paris", "days": 3})
    assert 'name="city" string="true">Paris<' in reply and 'string="false">3<' in reply
    constraint = constraint_for("invoke-xml", TOOLS)
    grammar = constraint.grammar("family") if constraint is not None else ""
    assert '"city" space "\\" string=\\"true\\">"' in grammar
    assert '"days" space "\\" string=\\"false\\">" space integer' in grammar


def test_a_value_s_type_tag_is_read_for_that_value() -> None:
    """K2 Horizon's ``<ifm|arg_type>``: ``string`` keeps the value's text exactly (its
    quotes too); another type reads it as JSON. The grammar's own: no notice, strict too."""

    def reply(kind: str) -> str:
        return (
            "<ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>\n"
            f"<ifm|arg_type>{kind}</ifm|arg_type>\n"
            '<ifm|arg_value>"P"</ifm|arg_value></ifm|tool_call>'
        )

    for strict in (False, True):
        text = parse("k2v3-ifm", reply("string"), strict=strict)
        assert [c.arguments for c in text.calls] == [{"city": '"P"'}] and not text.notices
        as_json = parse("k2v3-ifm", reply("object"), strict=strict)
        assert [c.arguments for c in as_json.calls] == [{"city": "P"}] and not as_json.notices
    assert "<ifm|arg_type>" in get_family("k2v3-ifm").kept_tokens

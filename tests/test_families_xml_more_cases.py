"""llama.cpp's parser cases (tests/test-chat.cpp) for Seed-OSS, MiniCPM5 and MiniMax M3."""

from __future__ import annotations

from typing import Any

import pytest

from .prepared import prepared, typed
from .test_families_xml_more import _INT, _NUM, _STR, NS, _tool, seed
from .test_formats import check_stream, parse

# ----------------------------------------------------------------------- llama.cpp cases


LLAMA_TOOLS = [
    _tool("special_function", {"arg1": _INT}),
    _tool("special_function_with_opt", {"arg1": _INT, "arg2": _INT}),
    _tool("empty_args", {}),
    _tool("python", {"code": _STR}),
    _tool("html", {"markup": _STR}),
    _tool("get_time", {"city": _STR}),
    _tool("get_weather", {"city": _STR}),
    _tool("todo_list", {"todos": {"type": "array"}}),
    _tool("edit", {"filename": _STR, "oldString": _STR, "newString": _STR}),
    _tool("magic_int", {"ref": _INT, "name": _STR}),
    _tool("amount", {"orig": _NUM}),
    _tool("toggle", {"enabled": {"type": "boolean"}}),
    _tool(
        "imaginary_number",
        {"number": {"type": "object", "properties": {"real": _NUM, "imaginary": _NUM}}},
    ),
    _tool(
        "nested_args",
        {
            "tags": {"type": "array", "items": _STR},
            "entries": {
                "type": "array",
                "items": {"type": "object", "properties": {"id": _INT, "label": _STR}},
            },
        },
    ),
    _tool(
        "union_args",
        {
            "filter": {
                "anyOf": [
                    {"type": "array", "items": _STR},
                    {"type": "object", "properties": {"field": _STR, "op": _STR}},
                ]
            },
            "label": {"oneOf": [_STR, {"type": "object", "properties": {"text": _STR}}]},
            "limit": {
                "oneOf": [
                    _INT,
                    {"type": "object", "properties": {"max": _INT}, "required": ["max"]},
                ]
            },
        },
    ),
]

Case = tuple[str, str, bool, str, str, list[tuple[str, dict[str, Any]]]]


def _m3_call(name: str, params: str) -> str:
    return f'{NS}<tool_call>\n{NS}<invoke name="{name}">{params}{NS}</invoke>\n{NS}</tool_call>'


_SEED_EDIT = (
    "<seed:tool_call>\n<function=edit>\n<parameter=filename>foo.cpp</parameter>\n"
    '<parameter=oldString>def foo(arg = "14"):\n    return arg + "bar"\n</parameter>\n'
    '<parameter=newString>def foo(arg = "15"):\n    pass\n</parameter>\n'
    "</function>\n</seed:tool_call>"
)
_TODOS = [
    {"item": "Check stuff", "selected": False},
    {"item": "Prepare stuff", "selected": True},
]
#: (family, model output, generation prompt opened thinking, reasoning, content, calls)
LLAMA_CPP: list[Case] = [
    ("seed-oss", "Hello, world!\nWhat's up?", False, "", "Hello, world!\nWhat's up?", []),
    (
        "seed-oss",
        "<seed:think>I'm thinking about the answer</seed:think>\nHello, world!",
        False,
        "I'm thinking about the answer",
        "Hello, world!",
        [],
    ),
    (
        "seed-oss",
        seed("special_function", {"arg1": 1}),
        False,
        "",
        "",
        [("special_function", {"arg1": 1})],
    ),
    (
        "seed-oss",
        seed("special_function", {"arg1": 1})
        + "\n"
        + seed("special_function_with_opt", {"arg1": 1, "arg2": 2}),
        False,
        "",
        "\n",
        [("special_function", {"arg1": 1}), ("special_function_with_opt", {"arg1": 1, "arg2": 2})],
    ),
    (
        "seed-oss",
        seed("todo_list", {"todos": _TODOS}),
        False,
        "",
        "",
        [("todo_list", {"todos": _TODOS})],
    ),
    (
        "seed-oss",
        _SEED_EDIT,
        False,
        "",
        "",
        [
            (
                "edit",
                {
                    "filename": "foo.cpp",
                    "oldString": 'def foo(arg = "14"):\n    return arg + "bar"\n',
                    "newString": 'def foo(arg = "15"):\n    pass\n',
                },
            )
        ],
    ),
    ("minicpm5", "Hello, world!\nWhat's up?", False, "", "Hello, world!\nWhat's up?", []),
    (
        "minicpm5",
        """<function name="python"><param name="code">print('Hello, World!')</param></function>""",
        False,
        "",
        "",
        [("python", {"code": "print('Hello, World!')"})],
    ),
    ("minicpm5", '<function name="empty_args"></function>', False, "", "", [("empty_args", {})]),
    (
        "minicpm5",
        """<function name="python"><param name="code">print('x')</param></function>""",
        False,
        "",
        "",
        [("python", {"code": "print('x')"})],
    ),
    (
        "minicpm5",
        '<function name="html"><param name="markup"><![CDATA[<a href="/x">hi</a> </param>]]>'
        "</param></function>",
        False,
        "",
        "",
        [("html", {"markup": '<a href="/x">hi</a> </param>'})],
    ),
    (
        "minicpm5",
        """I'm thinking</think><function name="python"><param name="code">print('hey')"""
        "</param></function>",
        True,
        "I'm thinking",
        "",
        [("python", {"code": "print('hey')"})],
    ),
    (
        "minicpm5",
        """<function name="python"><param name="code">print('x')</param></function>\n"""
        """<function name="python"><param name="code">print('y')</param></function>""",
        False,
        "",
        "\n",
        [("python", {"code": "print('x')"}), ("python", {"code": "print('y')"})],
    ),
    (
        "minimax-m3",
        "</mm:think>Hello, world!\nWhat's up?",
        False,
        "",
        "Hello, world!\nWhat's up?",
        [],
    ),
    (
        "minimax-m3",
        "<mm:think>I'm\nthinking</mm:think>Hello, world!\nWhat's up?",
        False,
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
        [],
    ),
    (
        "minimax-m3",
        "<mm:think>Let me check the time</mm:think>"
        + _m3_call("get_time", f"{NS}<city>Tokyo{NS}</city>"),
        False,
        "Let me check the time",
        "",
        [("get_time", {"city": "Tokyo"})],
    ),
    (
        "minimax-m3",
        "</mm:think>" + _m3_call("special_function", f"{NS}<arg1>1{NS}</arg1>"),
        False,
        "",
        "",
        [("special_function", {"arg1": 1})],
    ),
    (
        "minimax-m3",
        "<mm:think>Let's call a tool:</mm:think>" + _m3_call("empty_args", ""),
        False,
        "Let's call a tool:",
        "",
        [("empty_args", {})],
    ),
    (
        "minimax-m3",
        f"<mm:think>Calling both</mm:think>{NS}<tool_call>\n"
        f'{NS}<invoke name="get_time">{NS}<city>Paris{NS}</city>{NS}</invoke>\n'
        f'{NS}<invoke name="get_weather">{NS}<city>Paris{NS}</city>{NS}</invoke>\n'
        f"{NS}</tool_call>",
        False,
        "Calling both",
        "",
        [("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"})],
    ),
    (
        "minimax-m3",
        "<mm:think>Thinking about it</mm:think>Let me call the function."
        + _m3_call("special_function", f"{NS}<arg1>1{NS}</arg1>"),
        False,
        "Thinking about it",
        "Let me call the function.",
        [("special_function", {"arg1": 1})],
    ),
    (
        "minimax-m3",
        "<mm:think>Test negative</mm:think>" + _m3_call("magic_int", f"{NS}<ref>-14{NS}</ref>"),
        False,
        "Test negative",
        "",
        [("magic_int", {"ref": -14})],
    ),
    (
        "minimax-m3",
        "<mm:think>Test decimal</mm:think>" + _m3_call("amount", f"{NS}<orig>3.14{NS}</orig>"),
        False,
        "Test decimal",
        "",
        [("amount", {"orig": 3.14})],
    ),
    (
        "minimax-m3",
        "<mm:think>Test boolean</mm:think>"
        + _m3_call("toggle", f"{NS}<enabled>true{NS}</enabled>"),
        False,
        "Test boolean",
        "",
        [("toggle", {"enabled": True})],
    ),
    (
        "minimax-m3",
        "<mm:think>Multi-arg call</mm:think>"
        + _m3_call("magic_int", f"{NS}<ref>42{NS}</ref>{NS}<name>foo bar{NS}</name>"),
        False,
        "Multi-arg call",
        "",
        [("magic_int", {"ref": 42, "name": "foo bar"})],
    ),
    (
        "minimax-m3",
        "<mm:think>Nested object</mm:think>"
        + _m3_call(
            "imaginary_number",
            f"{NS}<number>{NS}<real>1.5{NS}</real>{NS}<imaginary>-2.5{NS}</imaginary>{NS}</number>",
        ),
        False,
        "Nested object",
        "",
        [("imaginary_number", {"number": {"real": 1.5, "imaginary": -2.5}})],
    ),
    (
        "minimax-m3",
        "<mm:think>Nested arrays</mm:think>"
        + _m3_call(
            "nested_args",
            f"{NS}<tags>{NS}<item>alpha{NS}</item>{NS}<item>beta{NS}</item>{NS}</tags>"
            f"{NS}<entries>{NS}<item>{NS}<id>1{NS}</id>{NS}<label>one{NS}</label>{NS}</item>"
            f"{NS}</entries>",
        ),
        False,
        "Nested arrays",
        "",
        [("nested_args", {"tags": ["alpha", "beta"], "entries": [{"id": 1, "label": "one"}]})],
    ),
    (
        "minimax-m3",
        "<mm:think>Union array</mm:think>"
        + _m3_call(
            "union_args",
            f"{NS}<filter>{NS}<item>alpha{NS}</item>{NS}<item>beta{NS}</item>{NS}</filter>",
        ),
        False,
        "Union array",
        "",
        [("union_args", {"filter": ["alpha", "beta"]})],
    ),
    (
        "minimax-m3",
        "<mm:think>Union scalar</mm:think>" + _m3_call("union_args", f"{NS}<limit>5{NS}</limit>"),
        False,
        "Union scalar",
        "",
        [("union_args", {"limit": 5})],
    ),
    (
        "minimax-m3",
        "<mm:think>Union nested</mm:think>"
        + _m3_call("union_args", f"{NS}<limit>{NS}<max>10{NS}</max>{NS}</limit>"),
        False,
        "Union nested",
        "",
        [("union_args", {"limit": {"max": 10}})],
    ),
    (
        "minimax-m3",
        "<mm:think>Union string</mm:think>" + _m3_call("union_args", f"{NS}<label>hi{NS}</label>"),
        False,
        "Union string",
        "",
        [("union_args", {"label": "hi"})],
    ),
    (
        "minimax-m3",
        "<mm:think></mm:think>" + _m3_call("get_time", f"{NS}<city>XYZCITY{NS}</city>"),
        False,
        "",
        "",
        [("get_time", {"city": "XYZCITY"})],
    ),
]


@pytest.mark.parametrize(
    ("family", "reply", "opened", "reasoning", "content", "calls"),
    LLAMA_CPP,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(LLAMA_CPP)],
)
def test_llama_cpp_cases(
    family: str,
    reply: str,
    opened: bool,
    reasoning: str,
    content: str,
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    result = parse(family, reply, LLAMA_TOOLS, reasoning_open=opened)
    assert (result.reasoning, result.content) == (reasoning, content)
    assert [(c.name, typed(c, LLAMA_TOOLS)) for c in result.calls] == calls
    assert not result.notices
    for call in result.calls:  # what the model wrote is what it meant: nothing repaired
        assert prepared(call, LLAMA_TOOLS, strict=True).repairs == ()
    check_stream(family, reply, list(reply), tools=LLAMA_TOOLS, reasoning_open=opened)


def test_m3_a_string_written_as_elements_is_read_as_the_object() -> None:
    # llama.cpp reads this by the schema (label may be a string: the raw markup); without the
    # schema the nested elements are the object they spell, kept as its JSON text
    reply = _m3_call("union_args", f"{NS}<label>{NS}<text>hi{NS}</text>{NS}</label>")
    (call,) = parse("minimax-m3", reply, LLAMA_TOOLS).calls
    assert call.arguments == {"label": '{"text": "hi"}'}

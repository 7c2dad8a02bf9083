"""llama.cpp's parser cases (tests/test-chat.cpp) for gpt-oss, Muse Glimmer and Kimi K3."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .prepared import typed
from .test_families_channels import _K3_EMPTY, LLAMA_TOOLS, MINE
from .test_formats import check_stream, parse

# ------------------------------------------------------------------- llama.cpp's cases

_SF = ("special_function", {"arg1": 1})
_CM = (
    '<atem:function_calls>\n<atem:invoke name="special_function">\n'
    '<atem:parameter name="arg1">1</atem:parameter>\n</atem:invoke>\n</atem:function_calls>'
)
_HELLO = "Hello, world!\nWhat's up?"
_K3_CALL = (
    '<|open|>call tool="special_function" index="1"<|sep|>'
    '<|open|>argument key="arg1" type="number"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|>'
)
_K3_OPT = (
    '<|open|>call tool="special_function_with_opt" index="2"<|sep|>'
    '<|open|>argument key="arg1" type="number"<|sep|>1<|close|>argument<|sep|>'
    '<|open|>argument key="arg2" type="number"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|>'
)
_K3_TAIL = "<|close|>tools<|sep|><|close|>message<|sep|>"
_EDIT = {"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {"}

# (family, model output, reasoning_open, content, reasoning, calls): llama.cpp's inputs and
# expectations, without the cases about continued messages (prefill) or reasoning_format=none
# (toolwire always separates reasoning). Its two gpt-oss cases of a message to a built-in tool
# are below: llama.cpp drops that message, toolwire keeps it as text with a notice.
LLAMA_CASES: list[tuple[str, str, bool, str, str, list[tuple[str, dict[str, Any]]]]] = [
    ("gpt-oss", "<|channel|>final<|message|>" + _HELLO, False, _HELLO, "", []),
    ("gpt-oss", "<|channel|>commentary<|message|>" + _HELLO, False, _HELLO, "", []),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
        "<|message|>" + _HELLO,
        False,
        _HELLO,
        "I'm\nthinking",
        [],
    ),
    (
        "gpt-oss",
        ' to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        False,
        "",
        "",
        [_SF],
    ),
    (
        "gpt-oss",
        '<|channel|>analysis to=functions.special_function<|message|>{"arg1": 1}',
        False,
        "",
        "",
        [_SF],
    ),
    (
        "gpt-oss",
        ' to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{"arg1": 1}',
        False,
        "",
        "",
        [_SF],
    ),
    (
        "gpt-oss",
        '<|channel|>commentary to=functions.special_function<|message|>{"arg1": 1}',
        False,
        "",
        "",
        [_SF],
    ),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions."
        'special_function<|channel|>analysis<|message|>{"arg1": 1}',
        False,
        "",
        "I'm\nthinking",
        [_SF],
    ),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>"
        "commentary to=functions.edit <|constrain|>json<|message|>"
        + json.dumps({**_EDIT, "replaceAll": False}),
        False,
        "",
        "Thinking about edit...",
        [("edit", {**_EDIT, "replaceAll": False})],
    ),
    (
        "gpt-oss",
        "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        "<|start|>assistant<|channel|>final<|message|>" + _HELLO,
        False,
        _HELLO,
        "I'm\nthinking",
        [],
    ),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>"
        "commentary to=assistant<|channel|>final<|message|>" + _HELLO,
        False,
        _HELLO,
        "I'm\nthinking",
        [],
    ),
    # partial output and JSON-schema response mode, which read the same way
    ("gpt-oss", "<|channel|>analysis<|message|>I'm\nthinking", False, "", "I'm\nthinking", []),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>I need to output the invoice details in JSON<|end|>"
        '<|start|>assistant<|channel|>final <|constrain|>json<|message|>{"amount": 123.45, '
        '"date": "2025-12-03"}',
        False,
        '{"amount": 123.45, "date": "2025-12-03"}',
        "I need to output the invoice details in JSON",
        [],
    ),
    ("glimmer", " to=user<|message|>" + _HELLO + "<|eot|>", False, _HELLO, "", []),
    (
        "glimmer",
        " to=user<|message|>"
        + _HELLO
        + "<|eom|><|start|>assistant to=special_function<|message|>"
        + _CM,
        False,
        _HELLO,
        "",
        [_SF],
    ),
    (
        "glimmer",
        " to=user<|message|>You invoke it like this:\n" + _CM + "<|eot|>",
        False,
        "You invoke it like this:\n" + _CM,
        "",
        [],
    ),
    (
        "glimmer",
        " to=self<|message|>I could use " + _CM + " here<|eom|><|start|>assistant to=user"
        "<|message|>Hello!<|eot|>",
        False,
        "Hello!",
        "I could use " + _CM + " here",
        [],
    ),
    (
        "kimi-k3",
        "<|open|>response<|sep|>" + _HELLO + "<|close|>response<|sep|><|close|>message<|sep|>",
        False,
        _HELLO,
        "",
        [],
    ),
    (
        "kimi-k3",
        "I'm thinking about this<|close|>think<|sep|><|open|>response<|sep|>"
        + _HELLO
        + "<|close|>response<|sep|><|close|>message<|sep|>",
        True,
        _HELLO,
        "I'm thinking about this",
        [],
    ),
    (
        "kimi-k3",
        "<|open|>response<|sep|>Use the response tag, then message the handler."
        "<|close|>response<|sep|><|close|>message<|sep|>",
        False,
        "Use the response tag, then message the handler.",
        "",
        [],
    ),
    (
        "kimi-k3",
        "I was still thinking when the budget ran out",
        True,
        "",
        "I was still thinking when the budget ran out",
        [],
    ),
    ("kimi-k3", _K3_EMPTY + "<|open|>tools<|sep|>" + _K3_CALL + _K3_TAIL, False, "", "", [_SF]),
    (
        "kimi-k3",
        "I should call it<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response"
        "<|sep|><|open|>tools<|sep|>" + _K3_CALL + _K3_TAIL,
        True,
        "On it.",
        "I should call it",
        [_SF],
    ),
    (
        "kimi-k3",
        _K3_EMPTY + "<|open|>tools<|sep|>" + _K3_OPT.replace('index="2"', 'index="1"') + _K3_TAIL,
        False,
        "",
        "",
        [("special_function_with_opt", {"arg1": 1, "arg2": 2})],
    ),
    (
        "kimi-k3",
        _K3_EMPTY + "<|open|>tools<|sep|>" + _K3_CALL + _K3_OPT + _K3_TAIL,
        False,
        "",
        "",
        [_SF, ("special_function_with_opt", {"arg1": 1, "arg2": 2})],
    ),
    (
        "kimi-k3",
        _K3_EMPTY + '<|open|>tools<|sep|><|open|>call tool="python" index="1"<|sep|>'
        '<|open|>argument key="code" type="string"<|sep|>print(\'hey\')<|close|>argument<|sep|>'
        "<|close|>call<|sep|>" + _K3_TAIL,
        False,
        "",
        "",
        [("python", {"code": "print('hey')"})],
    ),
]


@pytest.mark.parametrize(
    ("family", "reply", "opened", "content", "reasoning", "calls"), LLAMA_CASES
)
def test_llama_cpp_cases(
    family: str, reply: str, opened: bool, content: str, reasoning: str, calls: list[Any]
) -> None:
    result = parse(family, reply, LLAMA_TOOLS, reasoning_open=opened)
    assert (result.content, result.reasoning) == (content, reasoning)
    assert [(c.name, typed(c, LLAMA_TOOLS)) for c in result.calls] == calls
    assert not result.notices
    check_stream(family, reply, list(reply), tools=LLAMA_TOOLS, reasoning_open=opened)


def test_llama_cpp_case_counts() -> None:
    counts = {f: sum(1 for case in LLAMA_CASES if case[0] == f) for f in MINE}
    assert counts == {"gpt-oss": 13, "glimmer": 4, "kimi-k3": 9}


@pytest.mark.parametrize(
    "reply",
    [
        "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant"
        " to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'",
        "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant"
        '<|channel|>commentary to=python <|constrain|>code<|message|>print("hello")',
    ],
)
def test_gpt_oss_message_to_a_builtin_tool_stays_text_with_a_notice(reply: str) -> None:
    # llama.cpp drops these messages; toolwire runs no built-in tool, never drops text
    # silently, and names the recipient.
    result = parse("gpt-oss", reply, LLAMA_TOOLS)
    assert result.calls == [] and result.reasoning == "I will execute python to say hello"
    assert "hello" in result.content and "<|" not in result.content
    assert len(result.notices) == 1 and "which is not a declared function" in result.notices[0]

"""llama.cpp's parser cases for LFM2 and Gemma 4 (``tests/test-chat.cpp``), read by toolwire."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_families_pythonic_gemma import CE, LLAMA_TOOLS, C, E, Q, S
from .test_formats import check_stream, parse

# ------------------------------------------------------------------ llama.cpp's cases
# (reply, content, reasoning, [(name, arguments JSON)]) from llama.cpp's tests/test-chat.cpp,
# as facts about what these models write and what it means. Cases about partial output,
# prefill/continuation and the "reasoning_format none" setting are left out.

LLAMA_LFM2: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", "", []),
    (f"{S}[special_function(arg1=1)]{E}", "", "", [("special_function", '{"arg1": 1}')]),
    (f'{S}[get_time(city="XYZCITY")]{E}', "", "", [("get_time", '{"city":"XYZCITY"}')]),
    (f"{S}[toggle(enabled=True)]{E}", "", "", [("toggle", '{"enabled": true}')]),
    (f"{S}[set_nullable(value=None)]{E}", "", "", [("set_nullable", '{"value": null}')]),
    (
        f'{S}[set_config(config={{"enabled": True, "count": 3}})]{E}',
        "",
        "",
        [("set_config", '{"config": {"enabled": true, "count": 3}}')],
    ),
    (
        f'{S}[set_config(config={{"enabled": true, "note": null}})]{E}',
        "",
        "",
        [("set_config", '{"config": {"enabled": true, "note": null}}')],
    ),
    (
        f'{S}[Calendar.create_event(title="demo", participants=["Alice", "Bob"], '
        f'metadata={{"priority": "high", "reminder": true}})]{E}',
        "",
        "",
        [
            (
                "Calendar.create_event",
                '{"title": "demo", "participants": ["Alice", "Bob"], '
                '"metadata": {"priority": "high", "reminder": true}}',
            )
        ],
    ),
    (
        "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).",
        "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).",
        "",
        [],
    ),
    (
        f"{S}[python(code=\"def hello():\\n    print('hey')\")]{E}",
        "",
        "",
        [("python", '{"code": "def hello():\\n    print(\'hey\')"}')],
    ),
    (
        f'{S}[python(code="First line\\nSecond line\\tindented")]{E}',
        "",
        "",
        [("python", '{"code": "First line\\nSecond line\\tindented"}')],
    ),
    (
        f'{S}[python(code="print(\\"hi\\")")]{E}',
        "",
        "",
        [("python", '{"code": "print(\\"hi\\")"}')],
    ),
    (
        f'Let me check the time.{S}[get_time(city="Paris")]{E}',
        "Let me check the time.",
        "",
        [("get_time", '{"city":"Paris"}')],
    ),
    (
        f"{S}[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]{E}",
        "",
        "",
        [
            ("special_function", '{"arg1": 1}'),
            ("special_function_with_opt", '{"arg1": 1, "arg2": 2}'),
        ],
    ),
    (f"{S}[empty_args()]{E}", "", "", [("empty_args", "{}")]),
    # LFM2.5-8B-A1B, the one that thinks
    (
        f"<think>I'm\nthinking</think>{S}[special_function(arg1=1)]{E}",
        "",
        "I'm\nthinking",
        [("special_function", '{"arg1":1}')],
    ),
    (
        "<think>I need to call a function</think>"
        f'Let me check the time.{S}[get_time(city="Paris")]{E}',
        "Let me check the time.",
        "I need to call a function",
        [("get_time", '{"city":"Paris"}')],
    ),
    (
        f"<think>Let me think about {S}[special_function(arg1=1)]{E} hmm</think>"
        f"{S}[special_function(arg1=1)]{E}",
        "",
        f"Let me think about {S}[special_function(arg1=1)]{E} hmm",
        [("special_function", '{"arg1": 1}')],
    ),
    (
        "<think>I'm\nthinking</think>Hello, world!\nWhat's up?",
        "Hello, world!\nWhat's up?",
        "I'm\nthinking",
        [],
    ),
]

HELLO = "Hello, world!\nWhat's up?"
LLAMA_GEMMA4: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("Hello, world!", "Hello, world!", "", []),
    (f"<|channel>thought\nI'm\nthinking<channel|>{HELLO}", HELLO, "I'm\nthinking", []),
    (f"<|channel>thought<channel|>{HELLO}", HELLO, "", []),
    (f"{C}get_time{{city:{Q}London{Q}}}{CE}", "", "", [("get_time", '{"city": "London"}')]),
    (
        f"{C}get_time{{city:{Q}San Francisco{Q}}}{CE}",
        "",
        "",
        [("get_time", '{"city": "San Francisco"}')],
    ),
    (f"{C}empty_args{{}}{CE}", "", "", [("empty_args", "{}")]),
    (f"{HELLO}{C}get_time{{city:{Q}Paris{Q}}}{CE}", HELLO, "", [("get_time", '{"city": "Paris"}')]),
    (
        f"{C}get_time{{city:{Q}London{Q}}}{CE}{C}get_weather{{city:{Q}Paris{Q}}}{CE}",
        "",
        "",
        [("get_time", '{"city": "London"}'), ("get_weather", '{"city": "Paris"}')],
    ),
    (f"{C}special_function{{arg1:42}}{CE}", "", "", [("special_function", '{"arg1": 42}')]),
    (f"{C}special_function{{arg1:-7}}{CE}", "", "", [("special_function", '{"arg1": -7}')]),
    (f"{C}amount{{orig:3.14}}{CE}", "", "", [("amount", '{"orig": 3.14}')]),
    (f"{C}toggle{{enabled:true}}{CE}", "", "", [("toggle", '{"enabled": true}')]),
    (f"{C}toggle{{enabled:false}}{CE}", "", "", [("toggle", '{"enabled": false}')]),
    (f"{C}set_nullable{{value:null}}{CE}", "", "", [("set_nullable", '{"value": null}')]),
    (
        f"{C}todo_list{{todos:[{Q}buy milk{Q},{Q}walk dog{Q}]}}{CE}",
        "",
        "",
        [("todo_list", '{"todos":["buy milk","walk dog"]}')],
    ),
    (
        f"{C}set_config{{config:{{theme:{Q}dark{Q},count:3}}}}{CE}",
        "",
        "",
        [("set_config", '{"config":{"theme":"dark","count":3}}')],
    ),
    (f"{C}todo_list{{todos:[]}}{CE}", "", "", [("todo_list", '{"todos":[]}')]),
    (f"{C}set_config{{config:{{}}}}{CE}", "", "", [("set_config", '{"config":{}}')]),
    (f"{C}amount{{orig:1.5e10}}{CE}", "", "", [("amount", '{"orig": 1.5e10}')]),
    (f"<|channel>thought\n<channel|>{HELLO}<channel|>", HELLO, "", []),
    (f"<|channel>thought\n<channel|>{HELLO}<|channel>thought\n<channel|>", HELLO, "", []),
    (f"<|channel>thought\n<channel|>{HELLO}<|channel>thought\n<channel|><channel|>", HELLO, "", []),
    (f"<|channel><|channel>thought\n<channel|>{HELLO}", HELLO, "", []),
]
LLAMA = [("lfm2", *c) for c in LLAMA_LFM2] + [("gemma4", *c) for c in LLAMA_GEMMA4]


def _check(family: str, reply: str, content: str, reasoning: str, calls: list[Any]) -> None:
    result = parse(family, reply, LLAMA_TOOLS)
    assert (result.content, result.reasoning) == (content, reasoning)
    assert [(c.name, c.arguments) for c in result.calls] == [(n, json.loads(a)) for n, a in calls]
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
        assert not call.text_values
    assert not result.notices


@pytest.mark.parametrize(("family", "reply", "content", "reasoning", "calls"), LLAMA)
def test_llama_cpp_cases(
    family: str, reply: str, content: str, reasoning: str, calls: list[tuple[str, str]]
) -> None:
    _check(family, reply, content, reasoning, calls)
    check_stream(family, reply, list(reply), tools=LLAMA_TOOLS)


def test_llama_cpp_case_counts() -> None:
    assert (len(LLAMA_LFM2), len(LLAMA_GEMMA4)) == (19, 23)

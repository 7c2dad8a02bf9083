"""The families that write a call's JSON arguments after its name or role: Functionary v3.1
and v3.2, GigaChat 3/3.1, Command R+, MiniMax M1, Solar Open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import CallStart, LimitError, family_names, get_family, load_template
from toolwire.formats.detect import assistant_text, detect_format
from toolwire.messages import ToolCall

from .prepared import typed
from .replies import FLAGS, ONE_CALL, TOOLS, WEATHER, WRITE
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

MINE = [
    "functionary-v3.1",
    "functionary-v3.2",
    "gigachat",
    "command-r-plus",
    "minimax-m1",
    "solar-open",
]

Call = tuple[str, dict[str, Any]]


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _named(name: str, args: dict[str, Any]) -> str:
    return _j({"name": name, "arguments": args})


def functionary_v31(*calls: Call) -> str:
    return "".join(f"<function={n}>{_j(a)}</function>" for n, a in calls)


def functionary_v32(*calls: Call) -> str:
    return "".join(f">>>{n}\n{_j(a)}" for n, a in calls)


GIGA_CALL = "<|message_sep|>\n\nfunction call<|role_sep|>\n"


def gigachat(*calls: Call) -> str:
    return "".join(GIGA_CALL + _named(n, a) for n, a in calls) + "<|message_sep|>\n\n"


def command_r_plus(*calls: Call) -> str:
    items = [{"tool_name": n, "parameters": a} for n, a in calls]
    return "Action:\n```json\n" + _j(items) + "\n```"


def minimax_m1(*calls: Call) -> str:
    return "<tool_calls>\n" + "".join(_named(n, a) + "\n" for n, a in calls) + "</tool_calls>"


def solar_block(call_id: str, name: str, args: dict[str, Any] | str) -> str:
    text = args if isinstance(args, str) else _j(args)
    return (
        f"<|tool_call:begin|>{call_id}<|tool_call:name|>{name}"
        f"<|tool_call:args|>{text}<|tool_call:end|>"
    )


def solar_open(*calls: Call) -> str:
    blocks = "".join(solar_block(f"id{k}", n, a) for k, (n, a) in enumerate(calls))
    return "<|tool_calls|>" + blocks + "<|calls|>"


WRITERS = {
    "functionary-v3.1": functionary_v31,
    "functionary-v3.2": functionary_v32,
    "gigachat": gigachat,
    "command-r-plus": command_r_plus,
    "minimax-m1": minimax_m1,
    "solar-open": solar_open,
}
#: What each writer leaves in the reply text around its calls (GigaChat: the blank line
#: after a call message's separator; the white space a reply ends with after its calls is
#: dropped, for every family).
AFTER = {"gigachat": "\n\n"}

# family -> (reply, content, calls)
VALID: list[tuple[str, str, str, list[Call]]] = []
for _fam, _write in WRITERS.items():
    _after = AFTER.get(_fam, "")
    VALID += [
        (_fam, _write(WEATHER), "", [WEATHER]),
        (
            _fam,
            "Let me check. " + _write(WRITE, FLAGS) + "\nDone.",
            "Let me check. " + _after + "\nDone.",
            [WRITE, FLAGS],
        ),
        (_fam, _write(WEATHER) + _write(FLAGS), _after, [WEATHER, FLAGS]),
    ]
VALID += [
    # v3.2: the prompt wrote ">>>", so the reply starts at the recipient
    ("functionary-v3.2", 'get_weather\n{"city": "Paris", "days": 3}', "", [WEATHER]),
    ("functionary-v3.2", "all\nSure." + functionary_v32(FLAGS), "Sure.", [FLAGS]),
    ("functionary-v3.2", "set_flags\n{}>>>all\nok", "ok", [("set_flags", {})]),
    # GigaChat 3.1
    ("gigachat", "<|function_call|>" + _named(*WEATHER), "", [WEATHER]),
    ("gigachat", "Hi<|function_call|>" + _named(*WEATHER) + " bye", "Hi bye", [WEATHER]),
    # Command R+ as the model card shows it: "Action: ```json" on one line
    ("command-r-plus", "Action: ```json\n" + _j([{"tool_name": "set_flags", "parameters": {}}])
     + "\n```", "", [("set_flags", {})]),
    ("command-r-plus", "<|CHATBOT_TOKEN|>" + command_r_plus(WEATHER), "", [WEATHER]),
]  # fmt: skip

NEAR_MISSES: dict[str, list[str]] = {
    "functionary-v3.1": [
        "<function=get_weather>",
        '<function=get_weather>{"city": "Paris"} trailing</function>',
        "<function=get_weather>[1]</function>",
        '<function=get weather>{"city": "Paris"}</function>',
        '<function=get_weather>{"city": NaN}</function>',
        '<|python_tag|>print("hi")',  # no python tool declared
    ],
    "functionary-v3.2": [
        '>>>get_weather\n{"city": "Par',
        ">>>get_weather\nParis",
        '>>>get_weather\n["Paris"]',
        '>>>python\nprint("hi")',  # v3.2's python recipient takes raw code: not read
        'get_weather\n{"city": "Paris"',
    ],
    "gigachat": [
        GIGA_CALL,
        GIGA_CALL + '{"name": "get_weather", "arguments": {}',
        GIGA_CALL + '{"name": "get_weather", "args": {}}',
        GIGA_CALL + "get_weather",
        "<|function_call|>[]",
    ],
    "command-r-plus": [
        # (a list whose calls are whole, its fence left open, is read: the reply ended)
        'Action:\n```json\n[{"tool_name": "get_weather", "parameters": {}',
        'Action:\n```json\n[{"tool_name": "get_weather", "parameters": {}}]\nnot a fence',
        'Action:\n```json\n[{"name": "get_weather", "arguments": {}}]\n```',
        'Action:\n```json\n{"tool_name": "get_weather", "parameters": {}}\n```',
        "Action:\n```json\n[]\n```",
        'Action:\n```json\n[{"tool_name": "get_weather", "parameters": []}]\n```',
    ],
    "minimax-m1": [
        "<tool_calls>\n</tool_calls>",
        '<tool_calls>\n{"name": "get_weather", "arguments": {}}\ntext\n</tool_calls>',
        '<tool_calls>[{"name": "get_weather", "arguments": {}}]</tool_calls>',  # Apriel's
        '<tool_calls>\n{"name": "get_weather", "args": {}}\n</tool_calls>',
    ],
    "solar-open": [
        "<|tool_calls|>",
        "<|tool_calls|><|tool_call:end|>",
        "<|tool_calls|>" + solar_block("a", "get_weather", "{'city': 'Paris'}"),
        "<|tool_calls|>" + solar_block("a", "get_weather", '{"city": "Par'),
        "<|tool_calls|>" + solar_block("a", "get weather", "{}"),
        "<|tool_calls|><|tool_call:begin|>a<|tool_call:args|>{}<|tool_call:end|>",
    ],
}

# Text that only looks like a marker's neighbour: no call, no notice.
PLAIN = [
    ("functionary-v3.2", "Hello, world!\nWhat's up?"),
    ("functionary-v3.2", "In Python, >>> print(1) shows the prompt."),
    ("functionary-v3.2", "nope\nthis is prose"),
    ("functionary-v3.2", ">>"),
    ("gigachat", "Hello.<|message_sep|>\n\n"),
    ("command-r-plus", "Thought: easy. Action: answer at once."),
    ("command-r-plus", "<|CHATBOT"),
    ("functionary-v3.1", "Use <functions> wisely"),
]

ALL = [(f, r) for f, r, _, _ in VALID] + [(f, r) for f, rs in NEAR_MISSES.items() for r in rs]


def test_registered_at_the_end() -> None:
    names = family_names()
    assert names[:4] == ["qwen-xml", "hermes", "llama3", "mistral"]
    assert [n for n in names if n in MINE] == MINE
    for name in MINE:
        fam = get_family(name)
        assert fam.name == name and fam.label and fam.markers


@pytest.mark.parametrize(("family", "reply", "content", "calls"), VALID)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Call]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:  # JSON as written is the arguments: nothing typed, nothing left
        assert (call.name, call.arguments) in calls and not call.text_values
        assert json.loads(call.arguments_text) == call.arguments
    assert not result.notices
    assert [c.id for c in result.calls] == [f"id{i}" for i in range(len(calls))]


@pytest.mark.parametrize("family", MINE)
def test_a_call_is_announced_once_its_arguments_start(family: str) -> None:
    reply = WRITERS[family](WEATHER, FLAGS)
    cut = reply.index('"Paris') + 3  # inside the first call's arguments
    s = get_family(family).stream(TOOLS)
    events = s.feed(reply[:cut])
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_weather"]
    events += s.feed(reply[cut:]) + s.finish()
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_weather", "set_flags"]


@pytest.mark.parametrize(("family", "reply"), [(f, r) for f, rs in NEAR_MISSES.items() for r in rs])
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    assert any("is not a call" in n for n in result.notices)


@pytest.mark.parametrize(("family", "reply"), PLAIN)
def test_plain_text_is_text_without_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert (result.calls, result.content, result.notices) == ([], reply, [])


@pytest.mark.parametrize("family", MINE)
def test_reply_size_is_bounded(family: str) -> None:
    reply = WRITERS[family](WRITE)
    with pytest.raises(LimitError):
        parse(family, reply, max_chars=len(reply) - 1)
    assert len(parse(family, reply, max_chars=len(reply)).calls) == 1


@pytest.mark.parametrize("family", MINE)
def test_adversarial_calls_are_text(family: str) -> None:
    deep = WRITERS[family](("get_weather", {"x": 1})).replace('{"x": 1}', "[" * 5000)
    bad_escape = WRITERS[family](("get_weather", {"x": "?"})).replace('"?"', '"\\u12"')
    replies = [deep, bad_escape]
    if family in ("functionary-v3.1", "functionary-v3.2", "solar-open"):
        replies.append(WRITERS[family](("n" * 5000, {})))  # a name outside the JSON: bounded
    for reply in replies:
        result = parse(family, reply)
        assert result.calls == [] and result.content == reply


# ----------------------------------------------------------------- llama.cpp's own cases

SPECIAL = [
    {
        "type": "function",
        "function": {
            "name": "special_function",
            "description": "I'm special",
            "parameters": {
                "type": "object",
                "properties": {"arg1": {"type": "integer", "description": "The arg."}},
                "required": ["arg1"],
            },
        },
    }
]
HELLO = "Hello, world!\nWhat's up?"
SPECIAL_CALL = [("special_function", {"arg1": 1})]
_GIGA_SPECIAL = '{"name": "special_function", "arguments": {"arg1": 1}}'

# (family, model output, content, calls): llama.cpp tests/test-chat.cpp, for the templates
# meetkai-functionary-medium-v3.1/v3.2, GigaChat3/3.1-10B-A1.8B and c4ai-command-r-plus.
# Command R+'s text case ends with <|END_OF_TURN_TOKEN|>, the turn's end token, which a
# backend stops at before the reply reaches a parser: it is left out here.
LLAMA_CPP = [
    ("functionary-v3.1", HELLO, HELLO, []),
    (
        "functionary-v3.1",
        '<function=special_function>{"arg1": 1}</function>',
        "",
        SPECIAL_CALL,
    ),
    ("functionary-v3.2", "all\n" + HELLO, HELLO, []),
    ("functionary-v3.2", 'special_function\n{"arg1": 1}', "", SPECIAL_CALL),
    ("gigachat", HELLO, HELLO, []),
    ("gigachat", GIGA_CALL + _GIGA_SPECIAL, "", SPECIAL_CALL),
    ("gigachat", HELLO + GIGA_CALL + _GIGA_SPECIAL, HELLO, SPECIAL_CALL),
    ("gigachat", "<|function_call|>" + _GIGA_SPECIAL, "", SPECIAL_CALL),
    ("gigachat", HELLO + "<|function_call|>" + _GIGA_SPECIAL, HELLO, SPECIAL_CALL),
    ("command-r-plus", "<|CHATBOT_TOKEN|>" + HELLO, HELLO, []),
    (
        "command-r-plus",
        'Action:\n```json\n[{"tool_name": "special_function", "parameters": {"arg1": 1}}]\n```',
        "",
        SPECIAL_CALL,
    ),
]


@pytest.mark.parametrize(("family", "output", "content", "calls"), LLAMA_CPP)
def test_llama_cpp_cases(family: str, output: str, content: str, calls: list[Call]) -> None:
    result = parse(family, output, SPECIAL)
    assert result.content == content and not result.notices
    assert [(c.name, c.arguments) for c in result.calls] == calls
    for k in range(len(output) + 1):
        check_stream(family, output, [output[:k], output[k:]], tools=SPECIAL)


# ------------------------------------------------------------- decisions the grammars need


PYTHON = [
    {
        "type": "function",
        "function": {"name": "python", "description": "Run Python code.", "parameters": {}},
    }
]


def test_functionary_python_tag_is_a_call_to_a_declared_python_tool_only() -> None:
    code = 'print("a < b")\nx = {"k": 1}'
    result = parse("functionary-v3.1", "<|python_tag|>" + code + "<|eom_id|>", PYTHON)
    assert [(c.name, c.arguments, c.text_values) for c in result.calls] == [
        ("python", {"code": code}, True)
    ]
    # as the template renders a past call: the arguments themselves
    result = parse("functionary-v3.1", '<|python_tag|>{"code": "1 + 1"}', PYTHON)
    assert [(c.name, c.arguments) for c in result.calls] == [("python", {"code": "1 + 1"})]
    # code that only starts like JSON is code
    result = parse("functionary-v3.1", "<|python_tag|>{1: 2} | {3: 4}", PYTHON)
    assert [c.arguments for c in result.calls] == [{"code": "{1: 2} | {3: 4}"}]
    # no python tool: the tag and the code stay text, said so
    result = parse("functionary-v3.1", "<|python_tag|>1 + 1", TOOLS)
    assert result.calls == [] and result.content == "<|python_tag|>1 + 1"
    assert result.notices == [
        "text opening with <|python_tag|> is not a call (python is not a declared tool);"
        " it stays reply text"
    ]
    for reply in (
        "Let me run it.<|python_tag|>" + code,
        '<|python_tag|> {"code": "1"}<function=python>{"code": "2"}</function>',
        "<|python_tag|>{1: 2}<|eom_id|>",
    ):
        for k in range(len(reply) + 1):
            check_stream("functionary-v3.1", reply, [reply[:k], reply[k:]], tools=PYTHON)


def test_functionary_v31_last_call_without_its_closer_is_read_unless_strict() -> None:
    # the reply ended (its end token stripped) where only </function> was due
    reply = '<function=get_weather>{"city": "Paris"}'
    result = parse("functionary-v3.1", reply)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert len(result.notices) == 1 and "closing words never came" in result.notices[0]
    strict = get_family("functionary-v3.1").parse(reply, TOOLS, strict=True)
    assert strict.calls == [] and strict.content == reply


def test_functionary_v32_recipient_at_the_start_must_be_declared() -> None:
    # the reply starts where the prompt's ">>>" left off: an undeclared word is prose
    result = parse("functionary-v3.2", 'Note\n{"a": 1} is JSON.')
    assert result.calls == [] and result.content == 'Note\n{"a": 1} is JSON.'
    assert not result.notices
    # after a ">>>" the model wrote, the recipient is a call whatever its name
    result = parse("functionary-v3.2", 'all\nok>>>other\n{"a": 1}')
    assert [(c.name, c.arguments) for c in result.calls] == [("other", {"a": 1})]
    assert result.content == "ok"


def test_command_r_plus_directly_answer_is_no_call() -> None:
    direct = {"tool_name": "directly-answer", "parameters": {}}
    reply = "Action: ```json\n" + _j([direct]) + "\n```"
    result = parse("command-r-plus", reply)
    assert result.calls == [] and result.content == ""
    assert result.notices == ["the model chose to answer in text, not a tool"]
    weather = {"tool_name": "get_weather", "parameters": {"city": "Paris"}}
    result = parse("command-r-plus", "Action: ```json\n" + _j([direct, weather]) + "\n```")
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert not result.notices
    # a tool the caller declared under that name is called like any other
    declared = [{"name": "directly-answer", "parameters": {"type": "object"}}]
    result = parse("command-r-plus", reply, declared)
    assert [c.name for c in result.calls] == ["directly-answer"]
    for k in range(len(reply) + 1):
        check_stream("command-r-plus", reply, [reply[:k], reply[k:]])


def test_minimax_m1_and_apriel_never_read_each_other() -> None:
    m1 = minimax_m1(WEATHER)
    apriel = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'
    assert [c.name for c in parse("minimax-m1", m1).calls] == ["get_weather"]
    assert [c.name for c in parse("apriel", apriel).calls] == ["get_weather"]
    for reader, reply in (("apriel", m1), ("minimax-m1", apriel)):
        result = parse(reader, reply)
        assert result.calls == [] and result.content == reply and result.notices


def test_solar_keeps_the_model_ids_unless_repeated_or_missing() -> None:
    reply = (
        "<|tool_calls|>"
        + solar_block("a1b2c3d4e5", *WEATHER)
        + solar_block("a1b2c3d4e5", *FLAGS)
        + solar_block("", "get_weather", {})
    )
    result = parse("solar-open", reply)
    assert [c.id for c in result.calls] == ["a1b2c3d4e5", "id1", "id2"]
    assert [c.name for c in result.calls] == ["get_weather", "set_flags", "get_weather"]


def test_solar_text_after_the_calls_is_text() -> None:
    reply = "Checking.<|tool_calls|>" + solar_block("x", *WEATHER) + " Then more."
    result = parse("solar-open", reply)
    assert result.content == "Checking. Then more." and len(result.calls) == 1


# ----------------------------------------------------------------- the cross-family matrix

OTHERS = {**ONE_CALL, **{f: [w(WEATHER)] for f, w in WRITERS.items()}}


@pytest.mark.parametrize("family", sorted(set(OTHERS) | set(MINE)))
@pytest.mark.parametrize("other", sorted(OTHERS))
def test_cross_family_matrix(family: str, other: str) -> None:
    if family not in MINE and other not in MINE:
        return  # the others among themselves are tested elsewhere
    for reply in OTHERS[other]:
        result = parse(family, reply)
        if family == other:
            assert [(c.name, typed(c)) for c in result.calls] == [WEATHER], reply
        else:
            assert result.calls == [], (family, reply)
            assert result.content == reply


# ------------------------------------------------------------ round trips through templates

CALLS = [
    ToolCall("call_one", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall("call_two", "set_flags", {"enabled": False, "tags": ["a b"]}),
]
USER = {"role": "user", "content": "Weather in Paris, and set the flags."}


def _turn(calls: list[ToolCall]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in calls]}


#: Command R+'s template writes each parameter's description and an object's value type,
#: and recurses forever on a type list holding "null" (as Hermes 2 Pro's does).
DESCRIBED = json.loads(json.dumps(TOOLS))
del DESCRIBED[2]["parameters"]["properties"]["ratio"]
for _tool in DESCRIBED:
    for _key, _prop in _tool.get("function", _tool)["parameters"]["properties"].items():
        _prop["description"] = f"The {_key}."
        if _prop.get("type") == "object":
            _prop["additionalProperties"] = {}

TEMPLATES = {
    "meetkai-functionary-medium-v3.1.jinja": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2.jinja": "functionary-v3.2",
    "GigaChat3-10B-A1.8B.jinja": "gigachat",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command-r-plus",
}


@pytest.mark.parametrize(("name", "family"), sorted(TEMPLATES.items()))
def test_template_round_trip(name: str, family: str) -> None:
    tpl = load_template(FIXTURES / name)
    assert detect_format(tpl).format == family
    calls = CALLS[:1] if family == "gigachat" else CALLS  # GigaChat renders a turn's first call
    text, opened = assistant_text(tpl, [USER], [_turn(calls)], DESCRIBED)
    result = get_family(family).parse(text, DESCRIBED, reasoning_open=opened)
    assert [(c.name, typed(c)) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert result.content.strip() == "" and not result.notices


def test_functionary_v32_prompt_ends_with_the_recipient_marker() -> None:
    tpl = load_template(FIXTURES / "meetkai-functionary-medium-v3.2.jinja")
    prompt = tpl.render([USER], TOOLS, add_generation_prompt=True)
    assert prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n>>>")
    found = detect_format(tpl)
    assert found.call_text == 'get_weather\n{"city": "Paris", "days": 3}'


def test_functionary_v31_template_python_call_round_trip() -> None:
    tpl = load_template(FIXTURES / "meetkai-functionary-medium-v3.1.jinja")
    tools = PYTHON + TOOLS
    call = ToolCall("c1", "python", {"code": 'print("hi")'})
    text, _ = assistant_text(tpl, [USER], [_turn([call, CALLS[0]])], tools)
    assert text.startswith('<|python_tag|>{"code": ') and "<function=get_weather>" in text
    result = get_family("functionary-v3.1").parse(text, tools)
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("python", {"code": 'print("hi")'}),
        ("get_weather", {"city": "Paris", "days": 3}),
    ]


def test_functionary_v32_template_text_then_calls() -> None:
    tpl = load_template(FIXTURES / "meetkai-functionary-medium-v3.2.jinja")
    turn = {**_turn(CALLS), "content": "Let me check."}
    text, _ = assistant_text(tpl, [USER], [turn], TOOLS)
    assert text.startswith("all\nLet me check.>>>get_weather\n")
    result = get_family("functionary-v3.2").parse(text, TOOLS)
    assert result.content == "Let me check." and not result.notices
    assert [(c.name, typed(c)) for c in result.calls] == [(c.name, c.arguments) for c in CALLS]


def test_gigachat_template_renders_only_the_first_call() -> None:
    tpl = load_template(FIXTURES / "GigaChat3-10B-A1.8B.jinja")
    text, _ = assistant_text(tpl, [USER], [_turn(CALLS)], TOOLS)
    assert text.count("function call<|role_sep|>") == 1 and "set_flags" not in text


# ------------------------------------------------------------------ any text, however cut

_PIECES = [
    *(w(WEATHER) for w in WRITERS.values()),
    "<function=",
    "</function>",
    "<|python_tag|>",
    ">>>",
    "all\n",
    "get_weather\n",
    GIGA_CALL,
    "<|message_sep|>",
    "<|function_call|>",
    "Action:",
    "```json",
    "```",
    "<|CHATBOT_TOKEN|>",
    "<tool_calls>",
    "</tool_calls>",
    "<|tool_calls|>",
    "<|tool_call:begin|>",
    "<|tool_call:name|>",
    "<|tool_call:args|>",
    "<|tool_call:end|>",
    "<|calls|>",
    '{"name": "get_weather", ',
    '"arguments": {}',
    '"tool_name": "x", "parameters": {}',
    "[",
    "]",
    "{",
    "}",
    '"',
    ",",
    " ",
    "\n",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(
    family=st.sampled_from(MINE),
    pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=30),
    data=st.data(),
)
def test_any_text_reads_the_same_however_it_is_cut(
    family: str, pieces: list[str], data: st.DataObject
) -> None:
    reply = "".join(pieces)
    tools = PYTHON + TOOLS
    result = parse(family, reply, tools)
    if not result.calls and "<think>" not in reply and "[THINK]" not in reply:
        dropped = ("all\n", ">>>", "<|CHATBOT_TOKEN|>", "Action:")  # recipients, role, answer
        if not any(d in reply for d in dropped):
            assert result.content == reply
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks, tools=tools)

"""What the one engine reads for every declared or learned syntax, where the hand-written
readers each did it or did not: a block the reply ended before its closing words, calls
written in a thinking block that never closed, a list of calls with one bad item or a
separator left out, and a block of framed calls with one broken call.

Each case is read whole and streamed at every split point (the two must agree), and strict
reading refuses each repair.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import CallStart, Notice, ReasoningDelta, TextDelta
from toolwire.formats.base import Family, assemble
from toolwire.formats.reasoning import PENDING_CHARS

from .replies import TOOLS
from .test_derived import PLAIN_TOOLS, unseen

_W = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_T = '{"name": "get_weather", "arguments": {"city": "Rome"}}'
_GLM = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{}</arg_value>\n"


def _family(name: str) -> tuple[Family, Any]:
    if name.startswith("learned:"):
        return unseen(name.split(":", 1)[1]), PLAIN_TOOLS
    return get_family(name), TOOLS


def _events(family: Family, tools: Any, chunks: list[str], opened: bool) -> list[Any]:
    stream = family.stream(tools, reasoning_open=opened, make_id=lambda i: f"id{i}")
    events: list[Any] = []
    for chunk in chunks:
        events += stream.feed(chunk)
    return events + stream.finish()


def _every_split(family: Family, tools: Any, reply: str, opened: bool) -> list[Any]:
    """The events of ``reply`` read whole, checked equal (assembled) at every split."""
    whole = _events(family, tools, [reply], opened)
    for k in range(len(reply) + 1):
        split = _events(family, tools, [reply[:k], reply[k:]], opened)
        assert assemble(split) == assemble(whole), k
    return whole


#: Replies that end where only closing words were due: (family, reply, the calls' cities).
UNCLOSED = [
    ("hermes", f"<tool_call>\n{_W}", ["Paris"]),
    # a second call unterminated: two calls, not one
    ("hermes", f"<tool_call>\n{_W}\n</tool_call>\n<tool_call>\n{_T}\n", ["Paris", "Rome"]),
    ("granite", f"<|tool_call|>[{_W}, {_T}", ["Paris", "Rome"]),
    ("nemotron-v2", f"<TOOLCALL>[{_W}]", ["Paris"]),
    ("nemotron-v2", f"<TOOLCALL>[{_W}]</TOOL", ["Paris"]),  # the closing word cut short
    ("learned:semi-list", 'CALLS>> [{"tool": "get_weather", "parameters": {"city": "Paris"}}', []),
    ("apertus", '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]', ["Paris"]),
    (
        "command-r7b",
        '<|START_ACTION|>[{"tool_name": "get_weather", "parameters": {"city": "Paris"}}]',
        ["Paris"],
    ),
    ("apriel", f"<tool_calls>[{_W}, {_T}]\n</tool_", ["Paris", "Rome"]),
    (  # the call closed by its own </function>: only the block's closer was due
        "seed-oss",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
        "</function>\n",
        ["Paris"],
    ),
    (
        "minimax",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
        "</parameter>\n</invoke>\n",
        ["Paris"],
    ),
    ("gemma4", '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}', ["Paris"]),
    ("lfm2", "<|tool_call_start|>[get_weather(city='Paris')]", ["Paris"]),
    (  # the call's closing word cut short
        "solar-open",
        "<|tool_calls|><|tool_call:begin|>a<|tool_call:name|>get_weather<|tool_call:args|>"
        '{"city": "Paris"}<|tool_call:',
        ["Paris"],
    ),
    (  # the call's closing word cut short
        "deepseek-r1",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Paris"}\n```<｜tool▁call▁end',
        ["Paris"],
    ),
    (
        "deepseek-v3.1",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Paris"}<｜tool▁call▁end｜>',
        ["Paris"],
    ),
]


@pytest.mark.parametrize(("name", "reply", "cities"), UNCLOSED)
def test_a_block_the_reply_ended_before_its_closing_words_is_read(
    name: str, reply: str, cities: list[str]
) -> None:
    family, tools = _family(name)
    events = _every_split(family, tools, reply, False)
    result = assemble(events)
    assert [c.name for c in result.calls] == ["get_weather"] * max(1, len(cities))
    if cities:
        assert [c.arguments["city"] for c in result.calls] == cities
    assert result.content.strip() == ""
    assert "recovered-unclosed-tag" in [e.code for e in events if isinstance(e, Notice)]
    strict = family.parse(reply, tools, strict=True)
    closed = len(cities) - 1 if name in ("hermes", "glm") else 0  # blocks of one call each
    assert len(strict.calls) == closed  # strict: the closed calls only, no repair
    assert strict.content.strip() and reply.endswith(strict.content)


#: Replies cut where a call may not be whole: they stay text (a value may be cut short).
#: Replies cut inside a call: a tagged call cut after a whole value is one (more arguments
#: may have been to come), as SGLang's MiniCPM and MiniMax and vLLM's GLM readers read it.
CUT = [
    ("glm", _GLM.format("Paris")),
    ("seed-oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"),
    ("minicpm5", '<function name="get_weather"><param name="city">Paris</param>'),
    (
        "minimax",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
        "</parameter>",
    ),
    ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"),
    ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n"),  # a key, no value yet
    ("glm", "<tool_call>get_weather\n"),  # a name: its arguments may have been to come
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'),
    ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Pa'),
    ("learned:tildes", "@@get_weather\n~city~ Paris"),
]


@pytest.mark.parametrize(("name", "reply"), CUT)
def test_a_reply_cut_inside_a_call_is_no_call(name: str, reply: str) -> None:
    family, tools = _family(name)
    result = assemble(_every_split(family, tools, reply, False))
    assert result.calls == [] and result.content == reply


def test_a_whole_call_before_one_the_reply_cut_is_read() -> None:
    family = get_family("glm")
    cut = _GLM.format("Rome")
    reply = _GLM.format("Paris") + "</tool_call>" + cut
    result = assemble(_every_split(family, TOOLS, reply, False))
    assert [c.arguments["city"] for c in result.calls] == ["Paris"]
    assert result.content == cut


#: Calls written inside a thinking block that never closed: (family, reply, opened by the
#: prompt, the thinking read, the calls' cities).
IN_THINKING = [
    ("hermes", f"Let me think<tool_call>{_W}</tool_call>", True, "Let me think", ["Paris"]),
    ("hermes", f"<think>first<tool_call>{_W}</tool_call>", False, "first", ["Paris"]),
    (
        "hermes",
        f"plan<tool_call>{_W}</tool_call> then <tool_call>{_T}</tool_call> more",
        True,
        "plan then  more",
        ["Paris", "Rome"],
    ),
    # both repairs at once: in unclosed thinking, and the call's own closing tag left out
    ("glm", "<think>first" + _GLM.format("Paris") + "</tool_call>", False, "first", ["Paris"]),
]


@pytest.mark.parametrize(("name", "reply", "opened", "thinking", "cities"), IN_THINKING)
def test_a_call_in_a_thinking_block_that_never_closed_is_read(
    name: str, reply: str, opened: bool, thinking: str, cities: list[str]
) -> None:
    family, tools = _family(name)
    events = _every_split(family, tools, reply, opened)
    result = assemble(events)
    assert [c.arguments["city"] for c in result.calls] == cities
    assert result.reasoning == thinking
    assert result.content == ""
    assert "recovered-call-ended-thinking" in [e.code for e in events if isinstance(e, Notice)]
    strict = family.parse(reply, tools, reasoning_open=opened, strict=True)
    assert strict.calls == []  # strict: thinking is thinking


def test_a_marker_in_a_thinking_block_that_closes_is_thinking() -> None:
    family = get_family("hermes")
    reply = f"<think>I could write <tool_call>{_W}</tool_call> here</think>Done."
    events = _every_split(family, TOOLS, reply, False)
    result = assemble(events)
    assert result.calls == [] and result.content == "Done."
    assert result.reasoning == f"I could write <tool_call>{_W}</tool_call> here"
    assert not any(isinstance(e, CallStart) for e in events)
    # the thinking after a marker is held, not lost, until the block's end says what it is
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == result.reasoning
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Done."


_DEEP = '{"name": "get_weather", "arguments": {"a": ' + "[" * 300 + "]" * 300 + "}}"
_LEARNED_LIST = 'CALLS>> [{"tool": "get_weather", "parameters": {"city": "Paris"}}'

#: Lists of calls with one item that is not a call: (family, reply, the calls' cities, the
#: text left: the item that is not a call).
BAD_ITEM = [
    ("granite", f"<|tool_call|>[{_W}, 15:30]", ["Paris"], "15:30"),
    ("granite", f'<|tool_call|>[{_W}, "x", {_T}]', ["Paris", "Rome"], '"x"'),
    (
        "nemotron-v2",
        f'<TOOLCALL>[{_W}, {{"name": "get_weather", "arguments": {{"at": 15:30}}}}, {_T}]'
        "</TOOLCALL>",
        ["Paris", "Rome"],
        '{"name": "get_weather", "arguments": {"at": 15:30}}',
    ),
    # broken inside a string and a nested list: the item still ends at its own comma
    (
        "firefunction",
        f'functools[{{"name": "get_weather", "arguments": {{"a": [1, "x]",]}}}}, {_T}]',
        ["Rome"],
        '{"name": "get_weather", "arguments": {"a": [1, "x]",]}}',
    ),
    ("learned:semi-list", _LEARNED_LIST + "; 15:30]\n<<CALLS", [], "15:30"),
    # one call a line, nothing between: the bad line's object ends the item
    (
        "minimax-m1",
        f'<tool_calls>\n{_W}\n{{"name": "get_weather", "arguments": {{"at": 15:30}}}}\n{_T}\n'
        "</tool_calls>",
        ["Paris", "Rome"],
        '{"name": "get_weather", "arguments": {"at": 15:30}}',
    ),
    # nested past the reader's depth: the object breaks mid-way, read on to its end
    ("granite", f"<|tool_call|>[{_DEEP}, {_T}]", ["Rome"], _DEEP),
]


@pytest.mark.parametrize(("name", "reply", "cities", "left"), BAD_ITEM)
def test_a_list_item_that_is_no_call_is_left_out_and_the_others_are_read(
    name: str, reply: str, cities: list[str], left: str
) -> None:
    family, tools = _family(name)
    events = _every_split(family, tools, reply, False)
    result = assemble(events)
    assert [c.name for c in result.calls] == ["get_weather"] * max(1, len(cities))
    if cities:
        assert [c.arguments["city"] for c in result.calls] == cities
    assert result.content.strip() == left  # the item given back, nothing lost
    assert "call-not-read" in [e.code for e in events if isinstance(e, Notice)]
    strict = family.parse(reply, tools, strict=True)
    assert strict.calls == [] and strict.content == reply


def _framed() -> list[tuple[str, str]]:
    """The declared families whose block frames each call in words of its own, and how a
    call of each breaks: its name, or (where arguments are JSON: a tagged value is any text
    up to its closing tag, and cannot be cut short) its arguments."""
    from toolwire.formats.blockends import shape_frames
    from toolwire.formats.declared import DECLARED

    framed = sorted(n for n, syntax in DECLARED.items() if shape_frames(syntax.shape))
    json_args = [n for n in framed if DECLARED[n].shape.kind != "tags"]
    return [(n, "name") for n in framed] + [(n, "arguments") for n in json_args]


@pytest.mark.parametrize(("name", "broken"), _framed())
def test_a_broken_call_in_a_framed_block_is_left_out_and_the_others_are_read(
    name: str, broken: str
) -> None:
    """One call that breaks (a name with a space in it, or arguments cut short) inside a
    block that frames each call in words of its own: its text given back, named, the
    block's other calls read, strict refusing it; as Kimi K2's readers in vLLM and SGLang
    do, for every such syntax."""
    from toolwire.formats.declared import DECLARED

    syntax = DECLARED[name]
    reply = syntax.reply([("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"})])
    if broken == "name":
        reply = reply.replace("get_weather", "get weather", 1)
    else:  # the first call's JSON arguments left unclosed (Kimi K2's peers' case)
        reply = reply.replace('"Paris"}', '"Paris" ', 1)
    family = get_family(name)
    events = _every_split(family, TOOLS, reply, False)
    result = assemble(events)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_time", {"zone": "UTC"})]
    assert "Par" in result.content and "get_time" not in result.content
    notices = [e for e in events if isinstance(e, Notice)]
    assert [e.code for e in notices] == ["call-not-read"], notices
    # strict refuses the repair: the block is text up to where it broke (a family that also
    # writes each call alone, K2 Horizon, reads the next call so, as its own block)
    strict = family.parse(reply, TOOLS, strict=True)
    alone = any(form.opening == syntax.shape.next_call for form in syntax.forms)
    assert [c.name for c in strict.calls] == (["get_time"] if alone else [])
    assert strict.content.startswith(reply[: reply.index("Par")])


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        (
            "glm",
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value>"
            "<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
        ),
        (
            "seed-oss",
            "<seed:tool_call><function=get_weather><parameter=city>Rome</parameter>"
            "<parameter=days>3</parameter><parameter=city>Paris</parameter></function>"
            "</seed:tool_call>",
        ),
        ("learned:tildes", "@@get_weather\n~city~ Rome ;;\n~city~ Paris ;;\n@@/"),
        (
            "minimax",
            '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Rome'
            '</parameter><parameter name="city">Paris</parameter></invoke></minimax:tool_call>',
        ),
    ],
)
def test_an_argument_given_twice_is_no_call(name: str, reply: str) -> None:
    """Which of the two values the model meant is not known: the call is not read (as
    SGLang's MiniCPM tests assert), for every tagged syntax, strict or not."""
    family, tools = _family(name)
    for strict in (False, True):
        result = family.parse(reply, tools, strict=strict)
        assert result.calls == [] and result.content == reply
        assert any("given twice" in n for n in result.notices)
    assert assemble(_every_split(family, tools, reply, False)).calls == []


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        (
            "functiongemma",
            "<start_function_call>call:get_weather{city:<escape>Paris<escape>days:3}"
            "<end_function_call>",
        ),
        ("gemma4", '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>days:3}<tool_call|>'),
    ],
)
def test_a_comma_left_out_between_two_entries_of_a_literal_mapping_is_read(
    name: str, reply: str
) -> None:
    """Bare keys say where an entry starts: the comma is read as there (vLLM's FunctionGemma
    reader reads entries so), named; strict refuses."""
    family, tools = _family(name)
    events = _every_split(family, tools, reply, False)
    result = assemble(events)
    assert [c.arguments for c in result.calls] == [{"city": "Paris", "days": 3}]
    assert any("a comma left out" in n for n in result.notices)
    assert family.parse(reply, tools, strict=True).calls == []


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        (
            "functiongemma",
            '<start_function_call>call:get_weather{city:"Paris \\"FR\\"",days:3}'
            "<end_function_call>",
        ),
        (  # Ollama's Gemma 4 tests: a JSON string beside the dialect's own
            "gemma4",
            '<|tool_call>call:get_weather{city:"Paris \\"FR\\"",days:3}<tool_call|>',
        ),
    ],
)
def test_a_json_string_where_a_literal_dialect_delimits_its_own_is_read(
    name: str, reply: str
) -> None:
    """A mapping whose keys are bare words, a value in JSON's quotes instead of the dialect's
    delimiter: read, named; strict refuses."""
    family, tools = _family(name)
    result = assemble(_every_split(family, tools, reply, False))
    assert [c.arguments for c in result.calls] == [{"city": 'Paris "FR"', "days": 3}]
    assert any("a quoted string" in n for n in result.notices)
    assert family.parse(reply, tools, strict=True).calls == []


def test_a_list_with_no_call_in_it_is_text() -> None:
    family = get_family("nemotron-v2")
    for reply in ("<TOOLCALL>[15:30]</TOOLCALL>", '<TOOLCALL>[15:30, "x"]</TOOLCALL>'):
        result = assemble(_every_split(family, TOOLS, reply, False))
        assert result.calls == [] and result.content == reply


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("granite", f"<|tool_call|>[{_W} {_T}]"),
        ("nemotron-v2", f"<TOOLCALL>[{_W}\n{_T}]</TOOLCALL>"),
    ],
)
def test_a_separator_left_out_between_two_calls_is_read(name: str, reply: str) -> None:
    family, tools = _family(name)
    events = _every_split(family, tools, reply, False)
    result = assemble(events)
    assert [c.arguments["city"] for c in result.calls] == ["Paris", "Rome"]
    assert result.content == ""
    assert "recovered-list-separator" in [e.code for e in events if isinstance(e, Notice)]
    assert family.parse(reply, tools, strict=True).calls == []


@pytest.mark.parametrize("name", ["hermes", "glm", "qwen-xml", "mistral", "learned:semi-list"])
def test_a_reply_opening_with_a_thinking_closer_drops_it(name: str) -> None:
    family, tools = _family(name)
    for reply in ("</think>\n\nThe answer is 4.", "  </think>The answer is 4."):
        result = assemble(_every_split(family, tools, reply, False))
        assert result.content == "The answer is 4." and result.reasoning == ""
    # anywhere else, or not quite the closer, it is the answer's text
    for reply in ("The answer: </think> is a tag.", "</thinking about it"):
        assert assemble(_every_split(family, tools, reply, False)).content == reply


@pytest.mark.parametrize("name", ["hermes", "glm", "qwen-xml", "learned:semi-list"])
def test_the_opener_written_again_in_a_block_the_prompt_opened_is_dropped(name: str) -> None:
    # Qwen3.5, Nemotron 3 and Laguna write <think> though their prompt ends in it (Ollama's
    # parser tests): the template's own token, not thinking
    family, tools = _family(name)
    for reply in ("<think>\nplan</think>The answer.", "\n<think>plan</think>The answer."):
        result = assemble(_every_split(family, tools, reply, True))
        assert (result.reasoning.strip(), result.content) == ("plan", "The answer."), reply
    # not the opener, or later in the block: thinking as written
    for reply, thinking in [
        ("<thinking>plan</think>The answer.", "<thinking>plan"),
        ("plan <think> more</think>The answer.", "plan <think> more"),
    ]:
        result = assemble(_every_split(family, tools, reply, True))
        assert (result.reasoning, result.content) == (thinking, "The answer."), reply


def test_a_declared_family_s_end_token_at_the_reply_s_end_is_no_text() -> None:
    family = get_family("hermes")  # <|im_end|>, <|endoftext|>
    for reply, content, calls in [
        ("Hi<|im_end|>", "Hi", 0),
        ("Hi<|endoftext|>\n", "Hi", 0),
        (f"<tool_call>{_W}</tool_call><|im_end|>", "", 1),
        ("Hi <|im_end|> there", "Hi <|im_end|> there", 0),  # not at the end: text
        ("Hi<|im_", "Hi<|im_", 0),  # only its start: text
    ]:
        result = assemble(_every_split(family, TOOLS, reply, False))
        assert (result.content, len(result.calls)) == (content, calls), reply


@pytest.mark.parametrize(
    ("name", "reply", "strict_reads"),
    [
        # R1's block may end with the turn: its end token there is its grammar
        (
            "deepseek-r1",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
            '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜end▁of▁sentence｜>\n',
            True,
        ),
        # V3.1's must close: the end token says the turn ended where only that was due
        (
            "deepseek-v3.1",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
            '{"city": "Paris"}<｜tool▁call▁end｜><｜end▁of▁sentence｜>',
            False,
        ),
        (
            "minimax",
            '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Paris'
            "</parameter></invoke>[e~[",
            False,
        ),
    ],
)
def test_an_end_token_where_a_block_s_next_words_were_due_ends_the_turn(
    name: str, reply: str, strict_reads: bool
) -> None:
    family, tools = _family(name)
    result = assemble(_every_split(family, tools, reply, False))
    assert [c.arguments["city"] for c in result.calls] == ["Paris"]
    assert result.content == ""
    strict = family.parse(reply, tools, strict=True)
    assert (len(strict.calls) == 1) is strict_reads
    # anything after the token: the block is text
    assert family.parse(reply + " more", tools).calls == []


def test_thinking_long_after_a_marker_streams_on_and_is_thinking() -> None:
    family = get_family("hermes")
    after = "x" * (PENDING_CHARS + 10)
    reply = f"<think>I might write <tool_call> {after} and more"  # never closed
    stream = family.stream(TOOLS)
    first = stream.feed(reply[: len(reply) - 8])
    # held no longer than the bound: what came after the marker streams before the end
    assert sum(len(e.text) for e in first if isinstance(e, ReasoningDelta)) > PENDING_CHARS
    result = assemble(first + stream.feed(reply[len(reply) - 8 :]) + stream.finish())
    assert result.calls == [] and result.content == ""
    assert result.reasoning == reply.removeprefix("<think>")


#: A call closed in its own tag (no arguments), for every syntax writing its name as an
#: attribute: (family, reply). DeepSeek V4 writes it; SGLang reads it.
SELF_CLOSED = [
    ("minimax", '<minimax:tool_call>\n<invoke name="get_weather"/>\n</minimax:tool_call>'),
    ("minicpm5", '<function name="get_weather"/>'),
    (
        "deepseek-dsml",
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather"/>\n</｜DSML｜tool_calls>',
    ),
    (
        "gigachat-gcml",
        '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weather"/>\n</｜GCML｜tool_calls>',
    ),
]


@pytest.mark.parametrize(("name", "reply"), SELF_CLOSED)
def test_a_call_closed_in_its_own_tag_is_a_call_with_no_arguments(name: str, reply: str) -> None:
    family, tools = _family(name)
    result = assemble(_every_split(family, tools, reply, False))
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {})]
    assert result.content.strip() == ""
    assert "recovered-self-closing" in [n.code for n in _notices(family, tools, reply)]
    strict = family.parse(reply, tools, strict=True)
    assert not strict.calls and strict.content == reply


#: A tagged call's arguments written as one JSON object where its first tag was due.
JSON_BODY = [
    (
        "minimax",
        '<minimax:tool_call>\n<invoke name="get_weather">\n{"city": "Paris", "n": 2}\n'
        "</invoke>\n</minimax:tool_call>",
    ),
    ("glm", '<tool_call>get_weather\n{"city": "Paris", "n": 2}\n</tool_call>'),
    (
        "qwen-xml",
        '<tool_call>\n<function=get_weather>\n{"city": "Paris", "n": 2}\n</function>\n</tool_call>',
    ),
    (
        "deepseek-dsml",
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '{"city": "Paris", "n": 2}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>',
    ),
]


@pytest.mark.parametrize(("name", "reply"), JSON_BODY)
def test_a_tagged_call_s_arguments_as_one_json_object_are_read(name: str, reply: str) -> None:
    family, tools = _family(name)
    result = assemble(_every_split(family, tools, reply, False))
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris", "n": 2})
    ]
    assert json.loads(result.calls[0].arguments_text) == {"city": "Paris", "n": 2}
    assert "recovered-json-arguments" in [n.code for n in _notices(family, tools, reply)]
    assert not family.parse(reply, tools, strict=True).calls
    # tags and a JSON body never mix; text after the object breaks the call
    for broken in (
        reply.replace('{"city": "Paris", "n": 2}', '{"city": "Paris"} x'),
        reply.replace('{"city": "Paris", "n": 2}', '{"city": "Paris"}{"n": 2}'),
    ):
        assert not family.parse(broken, tools).calls, broken


def test_a_value_its_tag_says_is_json_is_read_as_json_and_strictly() -> None:
    family, tools = _family("deepseek-dsml")
    p = '<｜DSML｜parameter name="{}" string="{}">{}</｜DSML｜parameter>\n'
    body = p.format("n", "false", "[1, 2]") + p.format("city", "true", "[1, 2]")
    reply = f'<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n{body}</｜DSML｜invoke>'
    (call,) = assemble(_every_split(family, tools, reply, False)).calls
    assert call.arguments == {"n": [1, 2], "city": "[1, 2]"} and not call.text_values
    bad = reply.replace(">[1, 2]<", ">[1, 2<", 1)
    assert not family.parse(bad, tools).calls


def test_a_damaged_block_tag_is_read_past_only_where_a_call_follows() -> None:
    family, tools = _family("deepseek-dsml")
    call = (
        '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">'
        "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    reply = "Checking.\n<｜DSML｜toolcalls>\n" + call
    result = assemble(_every_split(family, tools, reply, False))
    assert [c.arguments for c in result.calls] == [{"city": "Paris"}]
    assert result.content == "Checking.\n"
    prose = "Write <｜DSML｜toolcalls> in prose.\nAnd more."
    assert family.parse(prose, tools).content == prose
    fenced = "```\n<｜DSML｜tool_calls>\n" + call + "\n```\n"
    assert family.parse(fenced, tools).content == fenced and not family.parse(fenced, tools).calls


def _notices(family: Family, tools: Any, reply: str) -> list[Notice]:
    return [e for e in _events(family, tools, [reply], False) if isinstance(e, Notice)]

"""Shapes of the peers' development material, written anew: each fix reads a whole shape.

The peers' cases (``tests/fixtures/peer``) showed where a family misread a real reply; the
replies here are new ones of the same shape (other tools, other text, other places in the
reply), so a fix that fitted one case would fail them. Every reply is also streamed cut at
every point, and a character at a time: the events must fold into the one-shot parse.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.events import TOLERANCES, Notice
from toolwire.formats.base import ParseResult

from .test_formats import check_stream, parse, stream_events

NOTE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "save_note",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "body": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "pages": {"type": "integer"},
                },
            },
        },
    }
]


def _calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


def _codes(family: str, reply: str, tools: Any, **kw: Any) -> list[str]:
    return [e.code for e in stream_events(family, [reply], tools, **kw) if isinstance(e, Notice)]


def _every_cut(family: str, reply: str, tools: Any = NOTE_TOOLS, **kw: Any) -> None:
    for k in range(len(reply) + 1):
        check_stream(family, reply, [reply[:k], reply[k:]], tools=tools, **kw)
    check_stream(family, reply, list(reply), tools=tools, **kw)


# -- an end-of-turn token the engine left at the reply's end

GIGA_CALL = (
    '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "save_note", "arguments": '
    '{"title": "milk"}}'
)
TURN_ENDS = [
    ("gigachat", "Noted.</s>", "Noted.", []),
    ("gigachat", "Noted." + GIGA_CALL + "</s>\n", "Noted.", [("save_note", {"title": "milk"})]),
    ("gigachat", GIGA_CALL + " </s>", "", [("save_note", {"title": "milk"})]),
    ("command-r-plus", "<|CHATBOT_TOKEN|>Fine, thanks.<|END_OF_TURN_TOKEN|>", "Fine, thanks.", []),
    (
        "deepseek-dsml",
        'Saving.<｜DSML｜function_calls>\n<｜DSML｜invoke name="save_note">\n'
        '<｜DSML｜parameter name="title" string="true">milk</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>",
        "Saving.",
        [("save_note", {"title": "milk"})],
    ),
]


@pytest.mark.parametrize(("family", "reply", "content", "calls"), TURN_ENDS)
def test_a_turn_end_token_at_the_reply_end_is_no_text(
    family: str, reply: str, content: str, calls: list[Any]
) -> None:
    result = parse(family, reply, NOTE_TOOLS)
    assert result.content.strip() == content
    assert _calls(result) == calls
    assert not any(c in TOLERANCES for c in _codes(family, reply, NOTE_TOOLS))
    _every_cut(family, reply)


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        ("gigachat", "Close a tag with </s> like this."),
        ("gigachat", "</s></s>x"),
        ("deepseek-dsml", "A <｜end▁of▁sentence｜> token, then more prose"),
        ("command-r-plus", "<|CHATBOT_TOKEN|>a<|END_OF_TURN_TOKEN|>b"),
    ],
)
def test_a_turn_end_token_inside_the_text_stays_text(family: str, reply: str) -> None:
    result = parse(family, reply, NOTE_TOOLS)
    expected = reply.removeprefix("<|CHATBOT_TOKEN|>")
    assert result.content == expected
    assert result.calls == []
    _every_cut(family, reply)


# -- Qwen XML: a call written with neither <tool_call> nor </tool_call>

BARE_A = "<function=save_note>\n<parameter=title>\nbread\n</parameter>\n</function>"
BARE_B = "<function=save_note>\n<parameter=pages>\n4\n</parameter>\n</function>"


@pytest.mark.parametrize(
    ("reply", "content", "calls"),
    [
        (BARE_A, "", [("save_note", {"title": "bread"})]),
        ("I'll save it.\n" + BARE_A + "\n", "I'll save it.", [("save_note", {"title": "bread"})]),
        (
            BARE_A + "\n" + BARE_B,
            "",
            [("save_note", {"title": "bread"}), ("save_note", {"pages": "4"})],
        ),
        (BARE_A + "\n<function=sa", "<function=sa", [("save_note", {"title": "bread"})]),
    ],
)
def test_qwen_a_bare_function_call_is_read_and_named(
    reply: str, content: str, calls: list[Any]
) -> None:
    result = parse("qwen-xml", reply, NOTE_TOOLS)
    assert result.content.strip() == content
    assert _calls(result) == calls
    assert "recovered-unopened-call" in _codes("qwen-xml", reply, NOTE_TOOLS)
    assert parse("qwen-xml", reply, NOTE_TOOLS, strict=True).calls == []
    _every_cut("qwen-xml", reply)


@pytest.mark.parametrize(
    ("reply", "tools"),
    [
        (BARE_A.replace("save_note", "drop_table"), NOTE_TOOLS),  # no such tool
        (BARE_A, None),  # no tools declared: nothing confirms it
        (BARE_A + "\nThat is how a call looks.", NOTE_TOOLS),  # prose after it
        (BARE_A[:-4], NOTE_TOOLS),  # cut before </function>
    ],
)
def test_qwen_a_bare_function_not_confirmed_stays_text(reply: str, tools: Any) -> None:
    result = parse("qwen-xml", reply, tools)
    assert result.calls == []
    assert result.content == reply
    _every_cut("qwen-xml", reply, tools)


# -- GLM: the newlines between the tags written escaped, as a backslash and n

GLM_ESCAPED = [
    (
        "<tool_call>save_note\\n<arg_key>title</arg_key>\\n<arg_value>eggs</arg_value>\\n"
        "</tool_call>",
        [("save_note", {"title": "eggs"})],
    ),
    (  # a value that is JSON, its quotes escaped too, and a second call
        "Two notes.<tool_call>save_note\\n<arg_key>body</arg_key>\\n"
        '<arg_value>{\\"lines\\": [\\"a\\\\nb\\"]}</arg_value></tool_call>\n'
        "<tool_call>save_note\\n<arg_key>pages</arg_key>\\n<arg_value>2</arg_value>"
        "</tool_call>",
        [("save_note", {"body": '{"lines": ["a\\nb"]}'}), ("save_note", {"pages": "2"})],
    ),
]


@pytest.mark.parametrize(("reply", "calls"), GLM_ESCAPED)
def test_glm_escaped_newlines_between_tags_are_read_and_named(reply: str, calls: list[Any]) -> None:
    result = parse("glm", reply, NOTE_TOOLS)
    assert _calls(result) == calls
    codes = _codes("glm", reply, NOTE_TOOLS)
    assert codes.count("recovered-escaped-newline") == len(calls)  # told once a call
    assert "recovered-escaped-newline" in TOLERANCES
    assert parse("glm", reply, NOTE_TOOLS, strict=True).calls == []
    _every_cut("glm", reply)


def test_glm_an_escaped_newline_inside_a_value_is_its_text() -> None:
    reply = (
        "<tool_call>save_note\n<arg_key>title</arg_key>\n<arg_value>a\\nb</arg_value>\n</tool_call>"
    )
    result = parse("glm", reply, NOTE_TOOLS)
    assert _calls(result) == [("save_note", {"title": "a\\nb"})]
    assert "recovered-escaped-newline" not in _codes("glm", reply, NOTE_TOOLS)
    _every_cut("glm", reply)


@pytest.mark.parametrize(
    "reply",
    [
        "<tool_call>save_note\\t<arg_key>title</arg_key><arg_value>x</arg_value></tool_call>",
        "<tool_call>save\\note<arg_key>title</arg_key><arg_value>x</arg_value></tool_call>",
    ],
)
def test_glm_other_backslashes_between_tags_stay_text(reply: str) -> None:
    result = parse("glm", reply, NOTE_TOOLS)
    assert result.calls == []
    assert result.content == reply
    _every_cut("glm", reply)


# -- MiniCPM4's XML calls: MiniCPM5's grammar, read by its family


def test_minicpm4_calls_between_prose_are_read_by_the_minicpm5_family() -> None:
    reply = (
        "Saving both.\n"
        '<function name="save_note"><param name="title">tea</param></function>\n'
        '<function name="save_note"><param name="body"><![CDATA[a <b>\nc]]></param>'
        '<param name="pages">3</param></function>\nDone.\n'
    )
    result = parse("minicpm5", reply, NOTE_TOOLS)
    assert _calls(result) == [
        ("save_note", {"title": "tea"}),
        ("save_note", {"body": "a <b>\nc", "pages": "3"}),
    ]
    assert result.content.split() == ["Saving", "both.", "Done."]
    _every_cut("minicpm5", reply)

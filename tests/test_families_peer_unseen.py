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
        "Saving.<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"save_note\">\n"
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

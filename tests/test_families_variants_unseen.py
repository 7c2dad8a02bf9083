"""Variants of families toolwire has, written by real models, that it used to misread.

Each reply here is a peer's test input (SGLang's function-call detector tests, vLLM's tool
parser tests) or the shape a template itself teaches; each is read as the peers expect, as a
tolerance named in a notice (refused when strict), or kept as text with a notice — never lost.
Every case is also cut at every point and streamed: the events must fold into the one-shot
parse (``check_stream``).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.events import TOLERANCES, CallAbort, CallStart, Notice
from toolwire.formats.base import ParseResult

from .test_formats import check_stream, parse, stream_events


def _calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in result.calls]


def _codes(family: str, reply: str, tools: Any, **kw: Any) -> list[str]:
    events = stream_events(family, [reply], tools, **kw)
    return [e.code for e in events if isinstance(e, Notice)]


def _every_cut(family: str, reply: str, tools: Any, **kw: Any) -> None:
    """Streamed in two pieces cut anywhere, and a character at a time, the reply reads as
    it does whole."""
    for k in range(len(reply) + 1):
        check_stream(family, reply, [reply[:k], reply[k:]], tools=tools, **kw)
    check_stream(family, reply, list(reply), tools=tools, **kw)


def _tool(name: str, properties: dict[str, Any], required: list[str] | None = None) -> Any:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"type": "function", "function": {"name": name, "parameters": schema}}


# --------------------------------------------------------------------------- DeepSeek DSML

SUBMIT = _tool("submit", {})
SPOT = _tool("get_favorite_tourist_spot", {"city": {"type": "string"}}, ["city"])
SEARCH = _tool(
    "search",
    {"query": {"type": "string"}, "topn": {"type": "integer"}, "source": {"type": "string"}},
    ["query"],
)
DSML_TOOLS = [SPOT, SEARCH, SUBMIT]

# SGLang's TestDeepSeekV4Detector.test_self_closing_zero_arg_invoke
DSML_SELF_CLOSED = (
    "Final answer.\n"
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="submit"/>\n'
    "</｜DSML｜tool_calls>"
)
# SGLang's test_self_closing_mixed_with_long_form
DSML_MIXED = (
    "<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="get_favorite_tourist_spot">\n'
    '<｜DSML｜parameter name="city" string="true">SF</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="submit"/>\n'
    "</｜DSML｜tool_calls>"
)
# SGLang's TestDeepSeekV32Detector.test_detect_and_parse_json_format
DSML_JSON = """I'll help you with information about San Francisco and get its favorite tourist spot for you.

        <｜DSML｜function_calls>
            <｜DSML｜invoke name="get_favorite_tourist_spot">
            {
                "city": "San Francisco"
            }
        </｜DSML｜invoke>
            <｜DSML｜invoke name="search">
            {
                "query": "WebNav benchmark",
                "topn": 10,
                "source": "web"
            }
        </｜DSML｜invoke>
        </｜DSML｜function_calls>
        """


def test_dsml_a_self_closed_invoke_is_a_call_with_no_arguments() -> None:
    result = parse("deepseek-dsml", DSML_SELF_CLOSED, DSML_TOOLS)
    assert _calls(result) == [("submit", {})]
    assert result.calls[0].arguments_text == "{}"
    assert result.content == "Final answer.\n"
    assert "DSML" not in result.content
    assert _codes("deepseek-dsml", DSML_SELF_CLOSED, DSML_TOOLS) == ["recovered-self-closing"]


def test_dsml_a_self_closed_invoke_after_a_long_one() -> None:
    result = parse("deepseek-dsml", DSML_MIXED, DSML_TOOLS)
    assert _calls(result) == [("get_favorite_tourist_spot", {"city": "SF"}), ("submit", {})]
    assert result.content == ""


def test_dsml_a_json_bodied_invoke_is_read_as_its_arguments() -> None:
    result = parse("deepseek-dsml", DSML_JSON, DSML_TOOLS)
    assert _calls(result) == [
        ("get_favorite_tourist_spot", {"city": "San Francisco"}),
        ("search", {"query": "WebNav benchmark", "topn": 10, "source": "web"}),
    ]
    assert result.content.startswith("I'll help you with information")
    assert "DSML" not in result.content
    assert _codes("deepseek-dsml", DSML_JSON, DSML_TOOLS) == ["recovered-json-arguments"] * 2


@pytest.mark.parametrize("reply", [DSML_SELF_CLOSED, DSML_MIXED, DSML_JSON])
def test_dsml_variants_are_tolerances_strict_refuses(reply: str) -> None:
    result = parse("deepseek-dsml", reply, DSML_TOOLS, strict=True)
    assert result.calls == []
    assert "<｜DSML｜" in result.content
    assert all("is not a call" in n for n in result.notices) and result.notices
    assert {"recovered-self-closing", "recovered-json-arguments"} <= TOLERANCES


@pytest.mark.parametrize("reply", [DSML_SELF_CLOSED, DSML_MIXED, DSML_JSON])
def test_dsml_variants_stream_as_they_read_whole(reply: str) -> None:
    _every_cut("deepseek-dsml", reply, DSML_TOOLS)


@pytest.mark.parametrize(
    "reply",
    [
        # parameters and a JSON body in one invoke: neither shape
        DSML_MIXED.replace("</｜DSML｜parameter>\n", '</｜DSML｜parameter>\n{"city": "x"}\n'),
        # a JSON body that is not an object, or is broken
        DSML_JSON.replace('{\n                "city": "San Francisco"\n            }', "[1]"),
        DSML_JSON.replace('"San Francisco"\n', '"San Francisco"\n,'),
        # a self-closed invoke cut short
        DSML_SELF_CLOSED.replace('"/>', '"/'),
    ],
)
def test_dsml_near_variants_stay_text_with_a_notice(reply: str) -> None:
    result = parse("deepseek-dsml", reply, DSML_TOOLS)
    assert result.calls == []
    assert result.content == reply
    assert any("is not a call" in n for n in result.notices)


def test_dsml_a_tolerance_of_a_block_that_breaks_later_is_not_told() -> None:
    reply = DSML_SELF_CLOSED.replace("</｜DSML｜tool_calls>", "</｜DSML｜invoke>")
    codes = _codes("deepseek-dsml", reply, DSML_TOOLS)
    assert codes == ["call-not-read"]
    events = stream_events("deepseek-dsml", [reply], DSML_TOOLS)
    assert [type(e) for e in events if isinstance(e, (CallStart, CallAbort))] == [
        CallStart,
        CallAbort,
    ]

"""Variants of families toolwire has, written by real models, that it used to misread.

Each reply here is a peer's test input (SGLang's function-call detector tests, vLLM's tool
parser tests) or the shape a template itself teaches; each is read as the peers expect, as a
tolerance named in a notice (refused when strict), or kept as text with a notice — never lost.
Every case is also cut at every point and streamed: the events must fold into the one-shot
parse (``check_stream``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire import ChatTemplate, prepare_arguments
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
    'Final answer.\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="submit"/>\n</｜DSML｜tool_calls>'
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
DSML_JSON = (
    "I'll help you with information about San Francisco and get its favorite tourist spot "
    "for you."
    + """

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
)


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
    ("reply", "read"),
    [
        # parameters and a JSON body in one invoke: neither shape; the block's other call read
        (
            DSML_MIXED.replace("</｜DSML｜parameter>\n", '</｜DSML｜parameter>\n{"city": "x"}\n'),
            ["submit"],
        ),
        # a JSON body that is not an object, or is broken; the block's other call read
        (
            DSML_JSON.replace('{\n                "city": "San Francisco"\n            }', "[1]"),
            ["search"],
        ),
        (DSML_JSON.replace('"San Francisco"\n', '"San Francisco"\n,'), ["search"]),
        # a self-closed invoke cut short
        (DSML_SELF_CLOSED.replace('"/>', '"/'), []),
    ],
)
def test_dsml_near_variants_are_no_call_with_a_notice(reply: str, read: list[str]) -> None:
    """A call that breaks in a block that frames each call is left out, its text kept and
    named, the block's other calls read, as for every such syntax; strict reads none."""
    result = parse("deepseek-dsml", reply, DSML_TOOLS)
    assert [c.name for c in result.calls] == read
    assert "call-not-read" in _codes("deepseek-dsml", reply, DSML_TOOLS)
    assert parse("deepseek-dsml", reply, DSML_TOOLS, strict=True).calls == []


def test_dsml_a_tolerance_of_a_block_that_breaks_later_is_not_told() -> None:
    reply = DSML_SELF_CLOSED.replace("</｜DSML｜tool_calls>", "</｜DSML｜invoke>")
    codes = _codes("deepseek-dsml", reply, DSML_TOOLS)
    assert codes == ["call-not-read"]
    events = stream_events("deepseek-dsml", [reply], DSML_TOOLS)
    assert [type(e) for e in events if isinstance(e, (CallStart, CallAbort))] == [
        CallStart,
        CallAbort,
    ]


# --------------------------------------------------------------------------- Kimi K2

# vLLM's tests/tool_parsers/test_kimi_k2_tool_parser.py: its tools and its _tool/_wrap shapes
K2_WEATHER = _tool("get_weather", {"city": {"type": "string"}, "unit": {"type": "string"}})
K2_READ = _tool("read_file", {"path": {"type": "string"}})
K2_FLIGHT = _tool("book_flight", {"city": {"type": "string"}})


def _k2(*calls: tuple[str, str]) -> str:
    body = "".join(
        f"<|tool_call_begin|>{cid} <|tool_call_argument_begin|>{args}<|tool_call_end|>"
        for cid, args in calls
    )
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


K2_NO_PREFIX = "No prefix. " + _k2(("get_weather:0", '{"city": "Tokyo"}'))
K2_COUNTER = "Let me check. " + _k2(("0", '{"city": "Tokyo", "unit": "celsius"}'))
K2_COUNTER_AMBIGUOUS = "Let me check. " + _k2(("0", '{"city": "Tokyo"}'))


def test_kimi_an_id_without_its_namespace_names_its_tool() -> None:
    result = parse("kimi-k2", K2_NO_PREFIX, [K2_WEATHER])
    assert _calls(result) == [("get_weather", {"city": "Tokyo"})]
    assert [c.id for c in result.calls] == ["get_weather:0"]  # the id as written, as vLLM
    assert result.content == "No prefix. "
    assert _codes("kimi-k2", K2_NO_PREFIX, [K2_WEATHER]) == ["recovered-bare-id"]


@pytest.mark.parametrize(
    "tools", [[K2_WEATHER], [K2_READ, K2_WEATHER]], ids=["one tool", "inferred by arguments"]
)
def test_kimi_a_bare_counter_is_the_one_tool_its_arguments_fit(tools: Any) -> None:
    result = parse("kimi-k2", K2_COUNTER, tools)
    assert _calls(result) == [("get_weather", {"city": "Tokyo", "unit": "celsius"})]
    assert [c.id for c in result.calls] == ["0"]
    assert result.content == "Let me check. "
    assert _codes("kimi-k2", K2_COUNTER, tools) == ["recovered-bare-id"]
    _every_cut("kimi-k2", K2_COUNTER, tools)


@pytest.mark.parametrize(
    ("reply", "tools"),
    [
        (K2_COUNTER_AMBIGUOUS, [K2_WEATHER, K2_FLIGHT]),  # two tools take {"city"}
        ("Let me check. " + _k2(("0", '{"city": "Tokyo"')), [K2_WEATHER, K2_FLIGHT]),
        (K2_COUNTER, None),  # no tool list: nothing to name the call by
        (K2_COUNTER.replace('"unit"', '"units"'), [K2_READ, K2_WEATHER]),  # fits neither
    ],
    ids=["ambiguous", "malformed json", "no tools", "fits no tool"],
)
def test_kimi_a_bare_counter_no_single_tool_fits_stays_text(reply: str, tools: Any) -> None:
    result = parse("kimi-k2", reply, tools)
    assert result.calls == []
    assert result.content == reply
    assert _codes("kimi-k2", reply, tools) == ["call-not-read"]
    events = stream_events("kimi-k2", [reply], tools)
    assert not any(isinstance(e, CallStart) for e in events)  # nothing announced, then taken back


def test_kimi_a_bare_counter_beside_a_named_call_breaks_alone() -> None:
    reply = _k2(("0", '{"city": "Tokyo"}'), ("functions.get_weather:1", '{"city": "Paris"}'))
    result = parse("kimi-k2", reply, [K2_WEATHER, K2_FLIGHT])
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert _codes("kimi-k2", reply, [K2_WEATHER, K2_FLIGHT]) == ["call-not-read"]
    _every_cut("kimi-k2", reply, [K2_WEATHER, K2_FLIGHT])


@pytest.mark.parametrize("reply", [K2_NO_PREFIX, K2_COUNTER])
def test_kimi_bare_ids_are_a_tolerance_strict_refuses(reply: str) -> None:
    result = parse("kimi-k2", reply, [K2_WEATHER], strict=True)
    assert result.calls == [] and result.content == reply
    assert "recovered-bare-id" in TOLERANCES


@pytest.mark.parametrize(
    "cid", ["functions.invalid.0", "invalid_get_weather.0", "call_3", "functions.get_weather"]
)
def test_kimi_other_ids_are_still_no_call(cid: str) -> None:
    reply = _k2((cid, '{"city": "Tokyo"}'))
    result = parse("kimi-k2", reply, [K2_WEATHER])
    assert result.calls == [] and result.content == reply


# --------------------------------------------------------------------------- Muse Glimmer

GLIMMER_TEMPLATE = Path(__file__).parent / "fixtures" / "chat_templates" / "muse-glimmer.jinja"
GLIMMER_WEATHER = _tool("get_weather", {"city": {"type": "string"}}, ["city"])
GLIMMER_DOTTED = _tool("weather.current", {"city": {"type": "string"}}, ["city"])


def _atem(recipient: str, invoke: str) -> str:
    return (
        f" to=self<|message|>I should check the weather.<|eom|>"
        f"<|start|>assistant to={recipient}<|message|><atem:function_calls>\n"
        f'<atem:invoke name="{invoke}">\n'
        '<atem:parameter name="city">Paris</atem:parameter>\n'
        "</atem:invoke>\n</atem:function_calls><|eot|>"
    )


def test_glimmer_the_template_lists_a_tools_own_namespace_as_a_recipient() -> None:
    """Where the doubled name comes from: the template names each tool's namespace (its name
    up to the first dot) and lists NS.* as a valid recipient."""
    tpl = ChatTemplate(GLIMMER_TEMPLATE.read_text(), name="muse-glimmer")
    described = {
        "type": "function",
        "function": {**GLIMMER_WEATHER["function"], "description": "w"},
    }
    prompt = tpl.render([{"role": "user", "content": "Weather in Paris?"}], [described])
    assert '"get_weather.*"' in prompt
    assert '{"name": "get_weather", "description": ""}' in prompt  # the namespace line


@pytest.mark.parametrize(
    ("recipient", "invoke"),
    [
        ("get_weather.get_weather", "get_weather.get_weather"),
        ("get_weather.get_weather", "get_weather"),
        ("get_weather", "get_weather.get_weather"),
    ],
)
def test_glimmer_a_tool_in_its_own_namespace_is_that_tool(recipient: str, invoke: str) -> None:
    reply = _atem(recipient, invoke)
    result = parse("glimmer", reply, [GLIMMER_WEATHER])
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert result.reasoning == "I should check the weather."
    assert result.content == "" and not result.notices
    _every_cut("glimmer", reply, [GLIMMER_WEATHER])


def test_glimmer_a_dotted_tool_keeps_its_name_and_its_namespace_rule() -> None:
    written = parse("glimmer", _atem("weather.current", "weather.current"), [GLIMMER_DOTTED])
    assert _calls(written) == [("weather.current", {"city": "Paris"})]
    doubled = parse(
        "glimmer", _atem("weather.weather.current", "weather.weather.current"), [GLIMMER_DOTTED]
    )
    assert _calls(doubled) == [("weather.current", {"city": "Paris"})]


@pytest.mark.parametrize(
    ("recipient", "tools"),
    [
        ("get_weather.forecast", [GLIMMER_WEATHER]),  # another function: not get_weather
        ("weather.get_weather", [GLIMMER_WEATHER]),  # not get_weather's namespace
        ("get_weather.get_weather", None),  # no tool list: nothing says what is declared
        ("get_weather.get_weather", [GLIMMER_WEATHER, _tool("get_weather.get_weather", {})]),
    ],
)
def test_glimmer_other_dotted_names_are_read_as_written(recipient: str, tools: Any) -> None:
    result = parse("glimmer", _atem(recipient, recipient), tools)
    assert _calls(result) == [(recipient, {"city": "Paris"})]


# --------------------------------------------------------------------------- Qwen XML, cut short

QWEN_WEATHER = _tool(
    "get_current_weather",
    {"city": {"type": "string"}, "state": {"type": "string"}, "unit": {"type": "string"}},
    ["city", "state"],
)
# vLLM's test_qwen3coder_tool_parser.py, "single_tool_with_content"
QWEN_FULL = """Sure! Let me check the weather for you.<tool_call>
<function=get_current_weather>
<parameter=city>
Dallas
</parameter>
<parameter=state>
TX
</parameter>
<parameter=unit>
fahrenheit
</parameter>
</function>
</tool_call>"""
QWEN_PROSE = "Sure! Let me check the weather for you."
QWEN_ARGS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}


def _cut_points(reply: str) -> list[int]:
    return list(range(len(QWEN_PROSE), len(reply)))


@pytest.mark.parametrize("strict", [False, True])
def test_qwen_a_call_cut_short_is_never_lost(strict: bool) -> None:
    """At every point the reply may end inside the call: the call is read whole (only its
    closing tag missing), or withdrawn with its text kept and a notice — and the stream says
    the same."""
    whole_at = QWEN_FULL.index("</function>") + len("</function>")
    for k in _cut_points(QWEN_FULL):
        reply = QWEN_FULL[:k]
        result = parse("qwen-xml", reply, [QWEN_WEATHER], strict=strict)
        codes = _codes("qwen-xml", reply, [QWEN_WEATHER], strict=strict)
        if k >= whole_at and not strict:
            assert _calls(result) == [("get_current_weather", QWEN_ARGS)], reply
            assert result.content == QWEN_PROSE
            assert codes == ["recovered-unclosed-tag"]
        else:
            assert result.calls == [], reply
            assert result.content == reply
            rest = reply[len(QWEN_PROSE) :]
            cut_in_marker = len(rest) < len("<tool_call>") and "<tool_call>".startswith(rest)
            assert codes == ([] if cut_in_marker else ["call-not-read"]), reply
            events = stream_events("qwen-xml", [reply], [QWEN_WEATHER], strict=strict)
            started = [e.index for e in events if isinstance(e, CallStart)]
            assert [e.index for e in events if isinstance(e, CallAbort)] == started
        check_stream("qwen-xml", reply, [reply[: k // 2], reply[k // 2 :]], tools=[QWEN_WEATHER])
        check_stream("qwen-xml", reply, list(reply), tools=[QWEN_WEATHER], strict=strict)


def test_qwen_the_unclosed_call_is_a_tolerance() -> None:
    assert "recovered-unclosed-tag" in TOLERANCES
    reply = QWEN_FULL.removesuffix("</tool_call>")
    assert parse("qwen-xml", reply, [QWEN_WEATHER], strict=True).content == reply


def test_qwen_a_second_call_cut_short_leaves_the_first() -> None:
    one = QWEN_FULL[len(QWEN_PROSE) :]
    reply = QWEN_PROSE + one + "\n" + one[: one.index("Dallas") + 3]
    result = parse("qwen-xml", reply, [QWEN_WEATHER])
    assert _calls(result) == [("get_current_weather", QWEN_ARGS)]
    assert result.content == QWEN_PROSE + "\n" + one[: one.index("Dallas") + 3]
    assert _codes("qwen-xml", reply, [QWEN_WEATHER]) == ["call-not-read"]
    _every_cut("qwen-xml", reply, [QWEN_WEATHER])


def test_qwen_an_unopened_call_cut_short_stays_text() -> None:
    """Qwen3-Coder's call without <tool_call>, cut short after its name was announced, is
    withdrawn with a notice (whole, with neither tag, it is read: test_families_peer_unseen)."""
    reply = "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
    result = parse("qwen-xml", reply, [QWEN_WEATHER])
    assert result.calls == [] and result.content == reply
    assert _codes("qwen-xml", reply, [QWEN_WEATHER]) == ["call-abandoned"]


# --------------------------------------------------------------------------- GLM

GLM_WEATHER = _tool(
    "get_weather",
    {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "opts": {"type": "object"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    ["city"],
)
GLM_SCHEMA = GLM_WEATHER["function"]["parameters"]
# the GLM-4.7 shape of the peers' case (a JSON-quoted string beside a number), as SGLang's
# GLM detector reads it: the value is decoded as JSON first
GLM_QUOTED = (
    '<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>"Paris"</arg_value>'
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
)
# JSON copied with its quotes escaped: SGLang unescapes, then decodes
GLM_ESCAPED = (
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    '<arg_key>opts</arg_key>\n<arg_value>{\\"strict\\": true}</arg_value>\n'
    '<arg_key>tags</arg_key>\n<arg_value>[\\"a\\", \\"b\\"]</arg_value>\n</tool_call>'
)
# a key the model left without its value (SGLang's pair regex skips it)
GLM_NO_VALUE = (
    "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n<arg_key>tags</arg_key>\n</tool_call>"
)


def _typed(result: ParseResult) -> list[dict[str, Any]]:
    return [
        dict(prepare_arguments(c.arguments_text, GLM_SCHEMA, text_values=True).arguments)
        for c in result.calls
    ]


def test_glm_a_json_quoted_string_is_the_string() -> None:
    result = parse("glm", GLM_QUOTED, [GLM_WEATHER])
    assert _calls(result) == [("get_weather", {"city": "Paris", "days": "3"})]
    assert _typed(result) == [{"city": "Paris", "days": 3}]
    assert _codes("glm", GLM_QUOTED, [GLM_WEATHER]) == ["arguments-repaired"]
    assert "JSON string" in result.notices[0]


def test_glm_escaped_json_is_that_json() -> None:
    result = parse("glm", GLM_ESCAPED, [GLM_WEATHER])
    assert _typed(result) == [{"city": "Paris", "opts": {"strict": True}, "tags": ["a", "b"]}]
    assert _codes("glm", GLM_ESCAPED, [GLM_WEATHER]) == ["arguments-repaired"] * 2


def test_glm_a_key_without_a_value_is_left_out() -> None:
    result = parse("glm", GLM_NO_VALUE, [GLM_WEATHER])
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert result.content == ""
    notices = result.notices
    assert len(notices) == 2 and "'days'" in notices[0] and "'tags'" in notices[1]
    assert set(_codes("glm", GLM_NO_VALUE, [GLM_WEATHER])) == {"arguments-repaired"}


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("line1\\nline2", "line1\\nline2"),  # escapes in a text value are its text
        ('say \\"hi\\"', 'say \\"hi\\"'),  # an escaped quote in text is not JSON
        ("", ""),  # an empty value is the empty text, as the grammar writes it
        ('"unclosed', '"unclosed'),  # no JSON string: text
        ("{not json}", "{not json}"),
        ('"line1\\nline2"', "line1\nline2"),  # a JSON string: its escapes decoded
    ],
)
def test_glm_other_values_are_their_text(value: str, read: str) -> None:
    reply = (
        f"<tool_call>get_weather<arg_key>city</arg_key><arg_value>{value}</arg_value></tool_call>"
    )
    result = parse("glm", reply, [GLM_WEATHER])
    assert _calls(result) == [("get_weather", {"city": read})]
    assert bool(result.notices) == (value != read)


@pytest.mark.parametrize("reply", [GLM_QUOTED, GLM_ESCAPED, GLM_NO_VALUE])
def test_glm_variants_stream_as_they_read_whole(reply: str) -> None:
    _every_cut("glm", reply, [GLM_WEATHER])


def test_glm_strict_reads_values_as_written_and_wants_every_value() -> None:
    quoted = parse("glm", GLM_QUOTED, [GLM_WEATHER], strict=True)
    assert _calls(quoted) == [("get_weather", {"city": '"Paris"', "days": "3"})]
    assert not quoted.notices
    escaped = parse("glm", GLM_ESCAPED, [GLM_WEATHER], strict=True)
    assert escaped.calls[0].arguments["opts"] == '{\\"strict\\": true}'
    missing = parse("glm", GLM_NO_VALUE, [GLM_WEATHER], strict=True)
    assert missing.calls == [] and missing.content == GLM_NO_VALUE


def test_glm_a_repair_of_a_call_that_breaks_later_is_not_told() -> None:
    reply = GLM_QUOTED.replace("</tool_call>", "<arg_key>city</arg_key></tool_call>")
    result = parse("glm", reply, [GLM_WEATHER])
    assert result.calls == [] and result.content == reply
    assert _codes("glm", reply, [GLM_WEATHER]) == ["call-not-read"]


def test_glm_the_peers_argumentless_call() -> None:
    """llama.cpp's #20650 case: a call with no argument tags at all."""
    reply = "<tool_call>read_file_diff_md</tool_call>"
    result = parse("glm", reply, [_tool("read_file_diff_md", {"review_id": {"type": "string"}})])
    assert _calls(result) == [("read_file_diff_md", {})] and not result.notices

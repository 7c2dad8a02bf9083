"""Inkling's typed blocks and Hunyuan's replies, read as the peers' own tests read them.

The replies are facts transcribed from the peers' unit tests, each case noting where it came
from, with what toolwire reads from it; where toolwire reads a reply otherwise than the peer,
the case says so and why (no call is ever invented, and one broken call never takes its
neighbours down with it: a stream cannot take back a call it has passed on).

- SGLang ``test/registered/unit/function_call/test_inkling_detector.py`` (commit
  4d9d5463471c51ebba11e22afa37aac988a3e5fa and the version before it, the
  ``TestInklingDetector`` cases);
- vLLM ``tests/tool_parsers/test_hunyuan_a13b_tool_parser.py`` (commit
  10a67515200ceb7bd3f91f6e5aba0c4c13e6ef8f): Hunyuan A13B, whose calls are the ``apriel``
  grammar's ``<tool_calls>[...]</tool_calls>``;
- SGLang ``test/registered/unit/function_call/test_hunyuan_detector.py`` (commit
  0ff9c986c7d25f30d8bf16c9e1b0ffeab3bcc0cf): Hunyuan's ``<tool_sep>`` grammar.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import Notice
from toolwire.formats.base import ParseResult

from .test_formats import check_stream

Call = tuple[str, dict[str, Any]]

M = "<|message_model|>"
JSON = "<|content_invoke_tool_json|>"
RAW = "<|content_invoke_tool_text|>"
TEXT = "<|content_text|>"
THINK = "<|content_thinking|>"
END = "<|end_message|>"
END_SAMPLING = "<|content_model_end_sampling|>"

SF: Call = ("weather", {"city": "SF"})
NY: Call = ("weather", {"city": "NY"})


def ink(name: str, args: dict[str, Any], header: str | None = None) -> str:
    """One call block as Inkling's renderer writes it (the header is the tool's name)."""
    payload = json.dumps({"name": name, "args": args}, separators=(",", ":"))
    return f"{M}{name if header is None else header}{JSON}{payload}{END}"


def parse(family: str, reply: str, **kw: Any) -> ParseResult:
    return get_family(family).parse(reply, **kw)


def notice_codes(family: str, reply: str, **kw: Any) -> list[str]:
    stream = get_family(family).stream(None, **kw)
    events = stream.feed(reply) + stream.finish()
    return [e.code for e in events if isinstance(e, Notice)]


def calls_of(result: ParseResult) -> list[Call]:
    return [(c.name, c.arguments) for c in result.calls]


# --------------------------------------------------------------------------- Inkling

#: (reply, content, calls): replies read with no notice.
INKLING_VALID: list[tuple[str, str, list[Call]]] = [
    # SGLang: the canonical header is not visible content
    (ink(*SF), "", [SF]),
    # SGLang: the header is author metadata; the payload's name decides
    (ink(*SF, header="other"), "", [SF]),
    # SGLang: a headerless (pre-canonical) block still parses
    (JSON + '{"name":"weather","args":{"city":"SF"}}' + END, "", [SF]),
    # SGLang: two calls, one after the other
    (ink(*SF) + ink(*NY), "", [SF, NY]),
    # SGLang: three calls with differing headers all stream
    (
        ink(*SF) + ink("weather", {"city": "XX"}, "other") + ink(*NY),
        "",
        [SF, ("weather", {"city": "XX"}), NY],
    ),
    # SGLang: visible text before a call survives; its header does not
    ("Sure, let me check." + ink(*SF), "Sure, let me check.", [SF]),
    # SGLang: a call to a tool the request did not declare is read (the pipeline decides)
    (ink("document_search", {"query": "q"}), "", [("document_search", {"query": "q"})]),
    # SGLang: a text block after the call is kept
    (ink(*SF) + M + TEXT + "Here you go." + END, "Here you go.", [SF]),
    # SGLang (reasoning parser): thinking, then a call
    (
        M + THINK + "need tool" + END + M + JSON + '{"name":"weather","args":{}}' + END,
        "",
        [("weather", {})],
    ),
    # the renderer's own turn: thinking, text, a call, the end of sampling
    (
        M
        + THINK
        + "The user wants SF."
        + END
        + M
        + TEXT
        + "Checking."
        + END
        + ink(*SF)
        + END_SAMPLING,
        "Checking.",
        [SF],
    ),
    # the reply starts in the header the prompt opened (generation after <|message_model|>)
    ("weather" + JSON + '{"name":"weather","args":{"city":"SF"}}' + END, "", [SF]),
    # whitespace around the JSON, nested arguments, non-ASCII text
    (
        JSON + ' \n{"name": "f", "args": {"a": {"b": [1, "北京"]}}}\n ' + END,
        "",
        [("f", {"a": {"b": [1, "北京"]}})],
    ),
]

#: (reply, content, calls, notice codes): replies that stray from the grammar.
INKLING_NEAR: list[tuple[str, str, list[Call], list[str]]] = [
    # SGLang: a payload that is no JSON stays text, without the control tokens
    (M + "weather" + JSON + "{not json at all" + END, "{not json at all", [], ["call-not-read"]),
    # SGLang drops every call of a reply with one broken call; here the good one is read,
    # as it was already passed on to a streaming client
    (
        ink(*SF) + M + "weather" + JSON + "{not json at all" + END,
        "{not json at all",
        [SF],
        ["call-not-read"],
    ),
    # SGLang reads an empty name as a call to ""; no tool has that name
    (JSON + '{"name":"","args":{}}' + END, '{"name":"","args":{}}', [], ["call-not-read"]),
    # SGLang: a block interrupted by the next call's kind token; the next one is read
    (
        M + "weather" + JSON + "garbage" + JSON + '{"name":"weather","args":{"city":"SF"}}' + END,
        "garbage",
        [SF],
        ["call-not-read"],
    ),
    # SGLang recovers NaN; it is not JSON, so it is no call here
    (
        JSON + '{"name":"weather","args":{"v":NaN}}' + END,
        '{"name":"weather","args":{"v":NaN}}',
        [],
        ["call-not-read"],
    ),
    # SGLang reads a raw-text invocation as a call to "" with {"text": body}; vLLM shows it
    # as text. It names no tool: text, with a notice
    (RAW + "search the web" + END, "search the web", [], ["call-not-read"]),
    (M + "weather" + RAW + "search the web" + END, "search the web", [], ["call-not-read"]),
    # SGLang: an unterminated raw-text block is text
    (RAW + "search the web", "search the web", [], ["call-not-read"]),
    # SGLang: a call whose block never closed is read through the end of the reply
    (
        "Sure, let me check." + JSON + '{"name":"weather","args":{"city":"SF"}}',
        "Sure, let me check.",
        [SF],
        ["recovered-unclosed-tag"],
    ),
    # SGLang: a control token after the JSON ends the call's block
    (
        JSON + '{"name":"weather","args":{}}' + THINK + END,
        "",
        [("weather", {})],
        ["recovered-unclosed-tag"],
    ),
    # SGLang: degenerate payloads are no call
    (JSON + END, "", [], ["call-not-read"]),
    (JSON + "[1, 2, 3]" + END, "[1, 2, 3]", [], ["call-not-read"]),
    (JSON + '{"args":{}}' + END, '{"args":{}}', [], ["call-not-read"]),
    (JSON + '{"name":"weather"}' + END, '{"name":"weather"}', [], ["call-not-read"]),
    (
        JSON + '{"name":"weather","args":[]}' + END,
        '{"name":"weather","args":[]}',
        [],
        ["call-not-read"],
    ),
    (
        JSON + '{"name":"weather","args":{},"id":"x"}' + END,
        '{"name":"weather","args":{},"id":"x"}',
        [],
        ["call-not-read"],
    ),
    # vLLM reads the arguments under "arguments" or "parameters" too: a named tolerance
    (
        JSON + '{"name":"weather","arguments":{"city":"SF"}}' + END,
        "",
        [SF],
        ["recovered-arguments-key"],
    ),
]

#: Text that is no call, read exactly as it was written (SGLang: text without a marker).
INKLING_PLAIN = [
    ("  Ordinary assistant text.  ", "  Ordinary assistant text.  "),
    ("Hi" + M + TEXT + "there" + END, "Hithere"),
    ("the token <|content_invoke_tool is cut", "the token <|content_invoke_tool is cut"),
    ('a {"name": "weather", "args": {}} in prose', 'a {"name": "weather", "args": {}} in prose'),
    # SGLang: the whole control alphabet is stripped from the text
    (M + THINK + "leak" + END + "<|message_user|>x<|content_audio_input|><|audio_end|>", "x"),
]


@pytest.mark.parametrize(("reply", "content", "calls"), INKLING_VALID)
def test_inkling_valid_replies(reply: str, content: str, calls: list[Call]) -> None:
    result = parse("inkling", reply)
    assert (result.content, calls_of(result), result.notices) == (content, calls, [])
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments
    assert len({c.id for c in result.calls}) == len(result.calls)


@pytest.mark.parametrize(("reply", "content", "calls", "codes"), INKLING_NEAR)
def test_inkling_near_misses(reply: str, content: str, calls: list[Call], codes: list[str]) -> None:
    got = notice_codes("inkling", reply)
    result = parse("inkling", reply)
    assert (result.content, calls_of(result), got) == (content, calls, codes)
    assert "<|" not in result.content


@pytest.mark.parametrize(("reply", "content"), INKLING_PLAIN)
def test_inkling_plain_text(reply: str, content: str) -> None:
    result = parse("inkling", reply)
    assert (result.content, result.calls) == (content, [])


def test_inkling_thinking_is_reasoning_and_the_prompt_may_open_it() -> None:
    reply = M + THINK + "plan" + END + ink(*SF)
    assert parse("inkling", reply).reasoning == "plan"
    # the prompt ended inside a thinking block: the reply starts in it
    result = parse("inkling", "still thinking" + END + ink(*SF), reasoning_open=True)
    assert (result.reasoning, result.content, calls_of(result)) == ("still thinking", "", [SF])
    # a call written inside thinking text is reasoning, never a call
    result = parse("inkling", M + THINK + 'maybe {"name":"weather","args":{}}' + END)
    assert result.calls == [] and "weather" in result.reasoning


def test_inkling_strict_refuses_its_tolerances() -> None:
    unclosed = JSON + '{"name":"weather","args":{"city":"SF"}}'
    other_key = JSON + '{"name":"weather","arguments":{"city":"SF"}}' + END
    for reply in (unclosed, other_key):
        assert parse("inkling", reply).calls
        assert parse("inkling", reply, strict=True).calls == []


def test_inkling_a_header_too_long_for_a_name_is_text() -> None:
    prose = "x" * 300
    result = parse("inkling", M + prose + JSON + '{"name":"weather","args":{}}' + END)
    assert result.content == prose and calls_of(result) == [("weather", {})]


INKLING_REPLIES = (
    [r for r, _, _ in INKLING_VALID]
    + [r for r, _, _, _ in INKLING_NEAR]
    + [r for r, _ in INKLING_PLAIN]
)


@pytest.mark.parametrize("reply", INKLING_REPLIES)
def test_inkling_streams_as_it_reads_whole(reply: str) -> None:
    """SGLang's streaming cases: cut anywhere, one character at a time, the same events."""
    for cut in range(len(reply) + 1):
        check_stream("inkling", reply, [reply[:cut], reply[cut:]])
    check_stream("inkling", reply, list(reply))


# --------------------------------------------------------------------------- Hunyuan (hy_v3)

BLOCK, CALL, SEP = "<tool_calls>", "<tool_call>", "<tool_sep>"
CALL_END, BLOCK_END = "</tool_call>", "</tool_calls>"
DATE: Call = ("get_current_date", {})


def kv(key: str, value: str, sep: str = "") -> str:
    return f"<arg_key>{key}</arg_key>{sep}<arg_value>{value}</arg_value>{sep}"


def hy(*calls: str, sep: str = "") -> str:
    return BLOCK + sep + "".join(calls) + BLOCK_END


def hy_call(name: str, args: str = "", sep: str = "") -> str:
    return f"{CALL}{name}{SEP}{sep}{args}{CALL_END}{sep}"


#: (reply, content, calls): SGLang's Hunyuan cases; values are text, typed by the pipeline.
HUNYUAN_VALID: list[tuple[str, str, list[Call]]] = [
    (hy(hy_call("get_current_date")), "", [DATE]),
    (hy(hy_call("get_current_date", sep="\n"), sep="\n"), "", [DATE]),
    (hy(hy_call("get_weather", kv("city", "Beijing"))), "", [("get_weather", {"city": "Beijing"})]),
    (
        hy(hy_call("get_weather", kv("city", "Beijing") + kv("date", "2026-03-30"))),
        "",
        [("get_weather", {"city": "Beijing", "date": "2026-03-30"})],
    ),
    (
        hy(
            hy_call(
                "get_weather", kv("city", "Beijing", "\n") + kv("date", "2026-03-30", "\n"), "\n"
            ),
            sep="\n",
        ),
        "",
        [("get_weather", {"city": "Beijing", "date": "2026-03-30"})],
    ),
    ("Checking." + hy(hy_call("get_current_date", sep="\n"), sep="\n"), "Checking.", [DATE]),
    (
        hy(
            hy_call("get_weather", kv("city", "Beijing", "\n"), "\n"),
            hy_call("get_weather", kv("city", "Hangzhou", "\n"), "\n"),
            sep="\n",
        ),
        "",
        [("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Hangzhou"})],
    ),
    (
        hy(
            hy_call("get_weather", kv("city", "Beijing")),
            hy_call("get_weather", kv("city", "Tokyo")),
            hy_call("get_current_date"),
        ),
        "",
        [("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Tokyo"}), DATE],
    ),
    # SGLang skips an undeclared tool; here the call is read and the pipeline holds it back
    (hy(hy_call("nonexistent_func", kv("x", "1"))), "", [("nonexistent_func", {"x": "1"})]),
    # values are the text between the tags: "5" for an integer, JSON for a string-typed value
    (
        hy(hy_call("search", kv("query", "restaurants") + kv("count", "5"))),
        "",
        [("search", {"query": "restaurants", "count": "5"})],
    ),
    (
        hy(hy_call("search", kv("query", '{"key": "value"}'))),
        "",
        [("search", {"query": '{"key": "value"}'})],
    ),
    (
        "Let me look.\n" + hy(hy_call("get_current_date")) + "\nDone.",
        "Let me look.\n\nDone.",
        [DATE],
    ),
]

#: (reply, notice codes): not this grammar, read as text.
HUNYUAN_NEAR: list[tuple[str, list[str]]] = [
    # Hunyuan A13B's JSON list (the apriel grammar)
    ('<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', ["call-not-read"]),
    (BLOCK + BLOCK_END, ["call-not-read"]),
    (hy(hy_call("f", kv("a", "1") + kv("a", "2"))), ["call-not-read"]),
    (BLOCK + hy_call("get_current_date") + "\nand prose", ["call-not-read"]),  # never closed
    (BLOCK + CALL + "get weather" + SEP + CALL_END + BLOCK_END, ["call-not-read"]),
    (BLOCK + CALL + "f" + SEP + "<arg_key>a</arg_key><arg_value>1" + BLOCK_END, ["call-not-read"]),
]


@pytest.mark.parametrize(("reply", "content", "calls"), HUNYUAN_VALID)
def test_hunyuan_valid_replies(reply: str, content: str, calls: list[Call]) -> None:
    result = parse("hunyuan", reply)
    assert (result.content, calls_of(result), result.notices) == (content, calls, [])
    for call in result.calls:
        assert call.text_values and json.loads(call.arguments_text) == call.arguments


def test_hunyuan_values_are_typed_by_the_schema() -> None:
    """SGLang types "5" as an integer and "true" as a boolean by the schema: so does the
    argument pipeline, for every text-valued call."""
    from toolwire.arguments import prepare_arguments

    schema = {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "verbose": {"type": "boolean"},
            "q": {"type": "string"},
        },
    }
    (call,) = parse(
        "hunyuan", hy(hy_call("f", kv("count", "5") + kv("verbose", "true") + kv("q", "12")))
    ).calls
    done = prepare_arguments(call.arguments_text, schema, text_values=True)
    assert done.arguments == {"count": 5, "verbose": True, "q": "12"}


@pytest.mark.parametrize(("reply", "codes"), HUNYUAN_NEAR)
def test_hunyuan_near_misses_are_text(reply: str, codes: list[str]) -> None:
    result = parse("hunyuan", reply)
    assert (result.content, result.calls, notice_codes("hunyuan", reply)) == (reply, [], codes)


def test_what_every_tagged_syntax_reads_hunyuan_reads() -> None:
    """A separator tag after a name left out (HY4's, here without a namespace) and a block
    the reply ended where only its closer was due are read for every declared syntax, each
    named, strict refusing (tests/test_engine_forms.py, test_engine_behaviours.py)."""
    for reply, code in (
        (hy(f"{CALL}get_weather{kv('city', 'Beijing')}{CALL_END}"), "recovered-separator-missing"),
        (BLOCK + hy_call("get_current_date"), "recovered-unclosed-tag"),
    ):
        assert calls_of(parse("hunyuan", reply)) != [], reply
        assert notice_codes("hunyuan", reply) == [code]
        assert parse("hunyuan", reply, strict=True).calls == []


def test_hunyuan_thinking_is_reasoning() -> None:
    result = parse(
        "hunyuan", "<think>\nneed the date\n</think>\n" + hy(hy_call("get_current_date"))
    )
    assert (result.reasoning, result.content, calls_of(result)) == ("\nneed the date\n", "", [DATE])


HUNYUAN_REPLIES = [r for r, _, _ in HUNYUAN_VALID] + [r for r, _ in HUNYUAN_NEAR]


@pytest.mark.parametrize("reply", HUNYUAN_REPLIES)
def test_hunyuan_streams_as_it_reads_whole(reply: str) -> None:
    for cut in range(len(reply) + 1):
        check_stream("hunyuan", reply, [reply[:cut], reply[cut:]])
    check_stream("hunyuan", reply, list(reply))


# --------------------------------------------------------------------------- Hunyuan A13B

BOSTON: Call = ("get_weather", {"city": "Boston"})
SF_C: Call = ("get_weather", {"city": "San Francisco", "metric": "celsius"})
USER_CALL: Call = (
    "register_user",
    {
        "name": "John Doe",
        "age": 37,
        "address": {"city": "San Francisco", "state": "CA"},
        "role": None,
        "passed_test": True,
        "aliases": ["John", "Johnny"],
    },
)


def a13b(*calls: Call) -> str:
    """Calls as vLLM's cases write them: a JSON list, ``", "`` and ``": "`` between items."""
    items = [{"name": name, "arguments": args} for name, args in calls]
    return "<tool_calls>" + json.dumps(items, ensure_ascii=False) + "</tool_calls>"


SEATTLE: Call = ("get_weather", {"city": "Seattle"})
DEEP: Call = ("complex_tool", {"level1": {"level2": {"level3": {"value": 123}}}})
BEIJING: Call = ("get_weather", {"city": "北京"})

#: (reply, content, calls): vLLM's hunyuan_a13b cases, read by the apriel family.
A13B: list[tuple[str, str, list[Call]]] = [
    ("How can I help you today?", "How can I help you today?", []),
    (a13b(SF_C), "", [SF_C]),
    (a13b(SF_C, USER_CALL), "", [SF_C, USER_CALL]),
    ("I will call the tool now. " + a13b(BOSTON), "I will call the tool now. ", [BOSTON]),
    # vLLM drops the text after the calls; here prose after a call stays content
    (a13b(SEATTLE) + "\nThank you!", "\nThank you!", [SEATTLE]),
    (a13b(DEEP), "", [DEEP]),
    (a13b(BEIJING), "", [BEIJING]),
    (a13b(("a", {}), ("b", {"x": 42})), "", [("a", {}), ("b", {"x": 42})]),
    (a13b(("a", {"x": 42}), ("b", {})), "", [("a", {"x": 42}), ("b", {})]),
    # vLLM's streamed case ends with the answer's closer; the model wraps its answer so
    ("<answer>\n" + a13b(BOSTON) + "\n</answer>", "\n\n", [BOSTON]),
]


@pytest.mark.parametrize(("reply", "content", "calls"), A13B)
def test_hunyuan_a13b_replies_are_the_apriel_grammar(
    reply: str, content: str, calls: list[Call]
) -> None:
    result = parse("apriel", reply)
    assert (result.content, calls_of(result), result.notices) == (content, calls, [])
    assert parse("hunyuan", reply).calls == []


def test_hunyuan_a13b_thinking_and_answer_tags_are_not_text() -> None:
    reply = (
        "<think>\nThe user wants the weather.\n</think>\n<answer>\n" + a13b(BOSTON) + "\n</answer>"
    )
    result = parse("apriel", reply)
    assert (result.reasoning, result.content.strip(), calls_of(result)) == (
        "\nThe user wants the weather.\n",
        "",
        [BOSTON],
    )
    answer = parse("apriel", "<think>\nok\n</think>\n<answer>\nIt is sunny.\n</answer>")
    assert answer.content == "\nIt is sunny.\n"
    # <answer> later in the text is the text's own
    assert parse("apriel", "Say <answer> now").content == "Say <answer> now"


def test_hunyuan_a13b_template_is_detected_and_round_trips_two_calls() -> None:
    from pathlib import Path

    from toolwire import detect_format, load_template
    from toolwire.formats.detect import DERIVE_TOOLS, assistant_text
    from toolwire.messages import ToolCall

    tpl = load_template(
        Path(__file__).parent
        / "fixtures"
        / "chat_templates"
        / "tencent-Hunyuan-A13B-Instruct.jinja"
    )
    found = detect_format(tpl)
    assert (found.format, found.via) == ("apriel", "probe")
    calls = [
        ToolCall("c1", "get_weather", {"city": "Paris", "days": 3}),
        ToolCall("c2", "set_alarm", {"time": "07:30", "loud": True}),
    ]
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in calls]}
    text, opened = assistant_text(
        tpl, [{"role": "user", "content": "Paris, then an alarm."}], [turn], DERIVE_TOOLS
    )
    result = get_family("apriel").parse(text, reasoning_open=opened)
    assert [(c.name, c.arguments) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert result.content.strip() == ""


A13B_REPLIES = [r for r, _, _ in A13B]


# --------------------------------------------------------------------------- shared lists

#: What the cross-family matrix and the streaming tests read for these families.
MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {
    "inkling": INKLING_VALID,
    "hunyuan": HUNYUAN_VALID,
    "apriel": [case for case in A13B if case[2]],
}
MY_REPLIES = (
    [("inkling", r) for r in INKLING_REPLIES]
    + [("hunyuan", r) for r in HUNYUAN_REPLIES]
    + [("apriel", r) for r in A13B_REPLIES]
)

"""GigaChat 3.5's GCML calls: DSML's grammar under the ``<｜GCML｜`` prefix.

Its published template (``tests/fixtures/unseen_templates/GigaChat3.5.jinja``, verbatim)
writes a past turn's calls as ``<｜GCML｜tool_calls>`` around one ``<｜GCML｜invoke>`` a call,
its parameters typed by ``string="true|false"``, the invokes and parameters joined by line
breaks; its reasoning goes in ``<think>…</think>`` before them, and with ``reasoning=True``
its generation prompt opens ``<think>``. The reply shapes below are facts from the peers'
tests of the same grammar (vLLM ``tests/tool_parsers/test_gigachat35_tool_parser.py``: the
parts with no line breaks, the empty invoke, the broken blocks; vLLM's GigaChat 3.5
reasoning test: the thinking the prompt opened, then ``\\n\\n`` and the block).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import detect_format, get_family, load_template
from toolwire.events import Notice
from toolwire.formats.base import ParseResult
from toolwire.formats.detect import DERIVE_CALLS, DERIVE_TOOLS, assistant_text
from toolwire.formats.gbnf import constraint_for
from toolwire.messages import ToolCall

from .test_formats import check_stream

TEMPLATE = Path(__file__).parent / "fixtures" / "unseen_templates" / "GigaChat3.5.jinja"
FAMILY = "gigachat-gcml"
G = "<｜GCML｜"
START, END = f"{G}tool_calls>", "</｜GCML｜tool_calls>"

Call = tuple[str, dict[str, Any]]
TOKYO: Call = ("get_weather", {"city": "Tokyo"})
TIME: Call = ("get_time", {"timezone": "Asia/Tokyo"})
MOSCOW: Call = ("get_weather", {"city": "Москва"})
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "get_time", "typed_args", "empty_args", "escaped", "store")
]


def invoke(name: str, *params: tuple[str, str, bool], sep: str = "") -> str:
    """An invoke as the peers' cases write it (``sep=""``) or the template (``"\\n"``)."""
    body = "".join(
        f'{sep}{G}parameter name="{k}" string="{str(is_text).lower()}">{v}</｜GCML｜parameter>'
        for k, v, is_text in params
    )
    return f'{G}invoke name="{name}">{body}{sep}</｜GCML｜invoke>'


def block(*invokes: str, sep: str = "") -> str:
    return START + sep + sep.join(invokes) + sep + END


def parse(reply: str, **kw: Any) -> ParseResult:
    return get_family(FAMILY).parse(reply, **kw)


def codes(reply: str, **kw: Any) -> list[str]:
    stream = get_family(FAMILY).stream(kw.pop("tools", None), **kw)
    return [e.code for e in stream.feed(reply) + stream.finish() if isinstance(e, Notice)]


def calls_of(result: ParseResult) -> list[Call]:
    return [(c.name, c.arguments) for c in result.calls]


TYPED = invoke(
    "typed_args",
    ("string_field", '"hello"', False),
    ("int_field", "7", False),
    ("float_field", "3.5", False),
    ("bool_field", "true", False),
    ("null_field", "null", False),
    ("array_field", "[1, 2, 3]", False),
    ("object_field", '{"nested": true}', False),
)
TYPED_ARGS = {
    "string_field": "hello",
    "int_field": 7,
    "float_field": 3.5,
    "bool_field": True,
    "null_field": None,
    "array_field": [1, 2, 3],
    "object_field": {"nested": True},
}
TEMPLATE_SHAPE = block(
    invoke("get_weather", ("city", "Tokyo", True), sep="\n"),
    invoke("get_time", ("timezone", "Asia/Tokyo", True), sep="\n"),
    sep="\n",
)

#: (reply, content, calls): replies read with no notice.
GCML_VALID: list[tuple[str, str, list[Call]]] = [
    (block(invoke("get_weather", ("city", "Tokyo", True))), "", [TOKYO]),
    (
        block(
            invoke("get_weather", ("city", "Tokyo", True)),
            invoke("get_time", ("timezone", "Asia/Tokyo", True)),
        ),
        "",
        [TOKYO, TIME],
    ),
    (TEMPLATE_SHAPE, "", [TOKYO, TIME]),
    (block(TYPED), "", [("typed_args", TYPED_ARGS)]),
    (block(invoke("empty_args")), "", [("empty_args", {})]),
    (
        "I will check." + block(invoke("get_weather", ("city", "Tokyo", True))),
        "I will check.",
        [TOKYO],
    ),
    (
        block(invoke("escaped", ("text", 'line 1\\n"quoted"', True))),
        "",
        [("escaped", {"text": 'line 1\\n"quoted"'})],
    ),
    (
        block(invoke("store", ("payload", '{"a": 1}', False))),
        "",
        [("store", {"payload": {"a": 1}})],
    ),
    # the model's end-of-sequence token left in the reply is where the turn stopped
    (TEMPLATE_SHAPE + "</s>", "", [TOKYO, TIME]),
]

#: (reply, content, calls, notice codes): not GCML calls; their text stays text.
GCML_NEAR: list[tuple[str, str, list[Call], list[str]]] = [
    # vLLM's malformed inputs: an invoke never closed, a parameter outside an invoke, no invoke
    (
        f'{START}{G}invoke name="broken">',
        f'{START}{G}invoke name="broken">',
        [],
        ["call-not-read"],
    ),
    (
        f'{START}{G}parameter name="x">1</｜GCML｜parameter>',
        f'{START}{G}parameter name="x">1</｜GCML｜parameter>',
        [],
        ["call-not-read"],  # the block given back, its markers text with it
    ),
    (START + END, START + END, [], ["call-not-read"]),
    # the prefixes never mix: a GCML block closed with DSML's tags is no call
    (
        START + invoke("get_weather", ("city", "Tokyo", True)) + "</｜DSML｜tool_calls>",
        START + invoke("get_weather", ("city", "Tokyo", True)) + "</｜DSML｜tool_calls>",
        [],
        ["call-not-read"],
    ),
]

#: Text that is no call markup at all, read as it is, with no notice.
GCML_PLAIN = [
    "Plain answer without a tool call.",
    # DeepSeek's DSML is another family's markup: text here
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n</｜DSML｜invoke>\n'
    "</｜DSML｜tool_calls>",
    "Use ｜GCML｜ to say something.",
]


@pytest.mark.parametrize(("reply", "content", "calls"), GCML_VALID)
def test_gcml_valid_replies(reply: str, content: str, calls: list[Call]) -> None:
    result = parse(reply)
    assert (result.content, calls_of(result), result.notices) == (content, calls, [])
    for call in result.calls:
        assert json.loads(call.arguments_text) == call.arguments


@pytest.mark.parametrize(("reply", "content", "calls", "notices"), GCML_NEAR)
def test_gcml_near_misses_stay_text(
    reply: str, content: str, calls: list[Call], notices: list[str]
) -> None:
    result = parse(reply)
    assert (result.content, calls_of(result), codes(reply)) == (content, calls, notices)


@pytest.mark.parametrize("reply", GCML_PLAIN)
def test_gcml_plain_text(reply: str) -> None:
    result = parse(reply)
    assert (result.content, result.calls, result.notices) == (reply, [], [])


def test_the_dsml_family_reads_no_gcml_and_gcml_reads_no_dsml() -> None:
    for reply, _, _ in GCML_VALID:
        assert get_family("deepseek-dsml").parse(reply).calls == []
    dsml = get_family("deepseek-dsml").sample(0)
    assert get_family("deepseek-dsml").parse(dsml).calls
    assert parse(dsml).calls == []


# ------------------------------------------------------------------ tolerances and strict

BARE = invoke("get_weather", ("city", "Tokyo", True), sep="\n")


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (block(f'{G}invoke name="empty_args"/>'), "recovered-self-closing"),
        (
            block(f'{G}invoke name="store">{{"payload": 1}}</｜GCML｜invoke>'),
            "recovered-json-arguments",
        ),
        ("Looking it up.\n" + BARE, "recovered-unopened-call"),
        (f"{G}toolcalls>\n{BARE}\n{END}", "recovered-misspelt-tag"),
    ],
)
def test_gcml_tolerances_are_dsmls_and_strict_refuses_them(reply: str, code: str) -> None:
    """The same body reads both prefixes: each shape DSML tolerates under a notice, GCML
    tolerates alike, and strict keeps it text."""
    result = parse(reply, tools=TOOLS)
    assert len(result.calls) == 1
    assert code in codes(reply, tools=TOOLS)
    strict = parse(reply, tools=TOOLS, strict=True)
    assert strict.calls == []
    assert G in strict.content
    dsml = reply.replace("｜GCML｜", "｜DSML｜")
    assert len(get_family("deepseek-dsml").parse(dsml, tools=TOOLS).calls) == 1
    assert get_family("deepseek-dsml").parse(dsml, tools=TOOLS, strict=True).calls == []


def test_a_bare_invoke_needs_a_declared_tool() -> None:
    assert parse("Looking it up.\n" + BARE).calls == []


def test_strict_reads_the_templates_own_shape() -> None:
    result = parse(TEMPLATE_SHAPE, strict=True)
    assert (calls_of(result), result.notices) == ([TOKYO, TIME], [])


def test_gcml_quoted_in_a_code_fence_is_prose() -> None:
    reply = f"Example:\n```xml\n{TEMPLATE_SHAPE}\n```\n"
    result = parse(reply, tools=TOOLS)
    assert (result.calls, result.content) == ([], reply)


# ------------------------------------------------------------------ streaming


def pieces(reply: str, size: int) -> list[str]:
    return [reply[k : k + size] for k in range(0, len(reply), size)]


GCML_REPLIES = [r for r, _, _ in GCML_VALID] + [r for r, _, _, _ in GCML_NEAR] + GCML_PLAIN + [BARE]


@pytest.mark.parametrize("reply", GCML_REPLIES)
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_gcml_streams_as_it_reads_whole(reply: str, size: int) -> None:
    """In chunks of any of these sizes, the same calls, text and notices, and no markup
    of a call read reaches the text."""
    check_stream(FAMILY, reply, pieces(reply, size), tools=TOOLS)
    check_stream(FAMILY, reply, pieces(reply, size), tools=TOOLS, strict=True)


# ------------------------------------------------------------------ the template itself


def test_the_template_is_claimed_by_proof() -> None:
    found = detect_format(load_template(TEMPLATE))
    assert (found.format, found.via) == (FAMILY, "probe")
    assert found.call_text.startswith(START + "\n" + G + 'invoke name="get_weather">\n')


def test_the_templates_two_calls_round_trip() -> None:
    """Two calls rendered through the template, read back: the same names and arguments,
    no text left over, no notice."""
    tpl = load_template(TEMPLATE)
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in DERIVE_CALLS]}
    user = {"role": "user", "content": "Paris, then an alarm."}
    text, opened = assistant_text(tpl, [user], [turn], DERIVE_TOOLS)
    assert text.count(G + "invoke name=") == 2
    result = get_family(FAMILY).parse(text, DERIVE_TOOLS, reasoning_open=opened)
    assert calls_of(result) == [(c.name, c.arguments) for c in DERIVE_CALLS]
    assert (result.content.strip(), result.notices) == ("", [])
    for size in (1, 2, 3, 7):
        check_stream(FAMILY, text, pieces(text, size), tools=DERIVE_TOOLS)


def test_the_grammar_takes_the_templates_two_calls() -> None:
    """The constrained form takes exactly the template's block, and refuses it broken."""
    pytest.importorskip("llguidance")
    from .test_grammars import broken, cut, matches

    tpl = load_template(TEMPLATE)
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in DERIVE_CALLS]}
    text, _ = assistant_text(tpl, [{"role": "user", "content": "Paris."}], [turn], DERIVE_TOOLS)
    constraint = constraint_for(FAMILY, DERIVE_TOOLS)
    assert constraint is not None
    block_text, form = cut(constraint, text)
    assert block_text == text.strip()
    assert matches(constraint.grammar(form), block_text)
    for why, bad in broken(block_text).items():
        assert not matches(constraint.grammar(form), bad), why


def test_a_past_turn_with_thinking_and_text_reads_back() -> None:
    """The template joins a past turn's thinking, text and calls with blank lines."""
    tpl = load_template(TEMPLATE)
    call = ToolCall("c1", "get_weather", {"city": "Москва", "days": 2})
    messages = [
        {"role": "user", "content": "Погода в Москве?"},
        {
            "role": "assistant",
            "reasoning_content": "Need the weather tool.",
            "content": "Checking.",
            "tool_calls": [call.to_openai()],
        },
    ]
    rendered = tpl.render(messages, DERIVE_TOOLS, add_generation_prompt=False)
    turn = rendered[rendered.rindex("assistant<|role_sep|>\n") + len("assistant<|role_sep|>\n") :]
    assert turn.startswith("<think>Need the weather tool.</think>\n\nChecking.\n\n" + START)
    result = get_family(FAMILY).parse(turn, DERIVE_TOOLS)
    assert (result.reasoning, result.content.strip()) == ("Need the weather tool.", "Checking.")
    assert calls_of(result) == [("get_weather", {"city": "Москва", "days": 2})]


def test_a_real_reply_after_the_reasoning_prompt() -> None:
    """With ``reasoning=True`` the generation prompt opens ``<think>``; the model closes it
    and writes its calls after a blank line (the peers' GigaChat 3.5 reasoning case)."""
    tpl = load_template(TEMPLATE)
    prompt = tpl.render([{"role": "user", "content": "Погода?"}], DERIVE_TOOLS, reasoning=True)
    assert prompt.endswith("assistant<|role_sep|>\n<think>")
    reply = (
        "Need the weather tool.</think>\n\n"
        + block(invoke("get_weather", ("city", "Москва", True), sep="\n"), sep="\n")
        + "</s>"
    )
    result = parse(reply, tools=TOOLS, reasoning_open=True)
    assert (result.reasoning, result.content.strip()) == ("Need the weather tool.", "")
    assert (calls_of(result), result.notices) == ([MOSCOW], [])
    for size in (1, 2, 3, 7):
        check_stream(FAMILY, reply, pieces(reply, size), tools=TOOLS, reasoning_open=True)


# ------------------------------------------------------------------ shared lists

#: What the cross-family matrix and the streaming tests read for this family.
MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {FAMILY: GCML_VALID}
MY_REPLIES = [(FAMILY, r) for r in GCML_REPLIES]

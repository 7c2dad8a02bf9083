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


# --------------------------------------------------------------------------- shared lists

#: What the cross-family matrix and the streaming tests read for these families.
MY_VALID: dict[str, list[tuple[str, str, list[Call]]]] = {"inkling": INKLING_VALID}
MY_REPLIES = [("inkling", r) for r in INKLING_REPLIES]

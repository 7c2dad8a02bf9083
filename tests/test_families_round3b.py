"""Llama 3, pythonic, Mistral and the words path on the peers' development cases: what the
grammar marks is read, a deviation is a named notice, JSON in the middle of prose stays prose.

The replies are SGLang's and vLLM's parser-test inputs (tests/fixtures/peer/); each read is
also streamed cut at every point and one character at a time, which must give the same."""

from __future__ import annotations

import pytest

from toolwire.events import Notice
from toolwire.formats.base import assemble

from .test_formats import check_stream, parse, stream_events

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SIGHTS = {
    "type": "function",
    "function": {
        "name": "get_tourist_attractions",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}

# SGLang TestLlama32Detector.test_multiple_json_with_separator_customized
TAG_TWICE = (
    '<|python_tag|>{"name": "get_weather", "parameters": {}}'
    '<|python_tag|>{"name": "get_tourist_attractions", "parameters": {}}'
)


def _codes(family: str, reply: str, **kw: object) -> list[str]:
    """The codes of the notices a reply gives, in order."""
    return [e.code for e in stream_events(family, [reply], **kw) if isinstance(e, Notice)]


def _streams(family: str, reply: str, **kw: object) -> None:
    for k in range(1, len(reply)):
        check_stream(family, reply, [reply[:k], reply[k:]], **kw)
    check_stream(family, reply, list(reply), **kw)


@pytest.mark.parametrize("lead", ["", "Let me check both. "])
def test_llama3_each_call_after_its_own_python_tag(lead: str) -> None:
    reply = lead + TAG_TWICE
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert [c.name for c in got.calls] == ["get_weather", "get_tourist_attractions"]
    assert got.content.strip() == lead.strip()
    assert got.notices == []
    _streams("llama3", reply, tools=[WEATHER, SIGHTS])


def test_llama3_tag_after_a_bare_call_opens_the_only_call() -> None:
    """An untagged reply has no tag to repeat: the bare object before the tag is prose, and
    the tag, the model's own token for a call, opens the one call read."""
    bare = '{"name": "get_weather", "parameters": {}}'
    reply = bare + '<|python_tag|>{"name": "get_tourist_attractions", "parameters": {}}'
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert [c.name for c in got.calls] == ["get_tourist_attractions"]
    assert got.content == bare


@pytest.mark.parametrize(
    "reply",
    [
        # vLLM llama3_json:simple: bare JSON in the middle of prose stays prose
        'Here is the result: {"name": "get_weather", "parameters": {}} Would you like more?',
    ],
)
def test_llama3_bare_json_in_prose_stays_prose(reply: str) -> None:
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert got.calls == []
    assert got.content == reply


@pytest.mark.parametrize("lead", ["", "Let me look. "])
def test_llama3_text_after_a_tagged_call_is_reply_text(lead: str) -> None:
    # the tag makes the call certain: text after it is the reply's, as after any block
    reply = lead + '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}} Done.'
    for strict in (False, True):
        got = parse("llama3", reply, tools=[WEATHER, SIGHTS], strict=strict)
        assert [(c.name, c.arguments) for c in got.calls] == [("get_weather", {"city": "Oslo"})]
        assert got.content == lead + " Done." and not got.notices
    _streams("llama3", reply, tools=[WEATHER, SIGHTS])


@pytest.mark.parametrize("cut", [None, 3, 40, 60])
def test_llama3_calls_parted_by_a_semicolon_and_the_tag_again(cut: int | None) -> None:
    """``;`` between two calls, the second opened by the tag again (llama.cpp's grammar for
    Llama 3 allows both): every call read, the ``;`` no text."""
    call = '{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    reply = "<|python_tag|>" + call + "; " + call + "; <|python_tag|>" + call
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert [c.arguments for c in got.calls] == [{"city": "Oslo"}] * 3
    assert got.content == "" and not got.notices
    chunks = [reply] if cut is None else [reply[:cut], reply[cut:]]
    assert assemble(stream_events("llama3", chunks, tools=[WEATHER, SIGHTS])) == got
    # a semicolon after the calls and prose: the calls stand, the rest is text
    got = parse("llama3", "<|python_tag|>" + call + "; and more", tools=[WEATHER, SIGHTS])
    assert len(got.calls) == 1 and got.content == "; and more"


def test_llama3_piece_of_a_tag_after_a_tagged_call_is_text() -> None:
    reply = '<|python_tag|>{"name": "get_weather", "parameters": {}}<|py'
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert [c.name for c in got.calls] == ["get_weather"]
    assert got.content == "<|py"
    _streams("llama3", reply, tools=[WEATHER, SIGHTS])


# SGLang TestPythonicDetector.test_detect_and_parse_with_python_start_and_end_token
MARS = (
    "User wants to get the weather in Mars. <|python_start|>[get_weather(location='Mars', "
    "unit='celsius')]<|python_end|> In this way we will get the weather in Mars."
)
MARS_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
        },
    },
}


def test_pythonic_tagged_list_in_the_middle_of_text() -> None:
    got = parse("pythonic", MARS, tools=[MARS_TOOL])
    assert [(c.name, c.arguments) for c in got.calls] == [
        ("get_weather", {"location": "Mars", "unit": "celsius"})
    ]
    assert got.content == (
        "User wants to get the weather in Mars.  In this way we will get the weather in Mars."
    )
    # the tags mark exactly where the list is: the text after it is the reply's, strict too
    assert _codes("pythonic", MARS, tools=[MARS_TOOL]) == []
    strict = parse("pythonic", MARS, tools=[MARS_TOOL], strict=True)
    assert strict.calls == got.calls and strict.content == got.content
    _streams("pythonic", MARS, tools=[MARS_TOOL])


_PARIS = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
LEADING = [
    # SGLang TestLlama32Detector.test_json_with_trailing_text
    ("llama3", _PARIS + " Some follow-up text", "Some follow-up text"),
    ("llama3", _PARIS + "\n\nI will wait.", "I will wait."),
    (
        "pythonic",
        "[get_weather(city='Paris')] In this way we will know.",
        "In this way we will know.",
    ),
    ("xlam", '[{"name": "get_weather", "arguments": {"city": "Paris"}}] and then', "and then"),
]


@pytest.mark.parametrize(("family", "reply", "prose"), LEADING)
def test_a_whole_reply_form_s_calls_set_apart_from_prose_after_them_are_read(
    family: str, reply: str, prose: str
) -> None:
    """A reply that opens with calls to declared tools whose arguments fit, then prose set
    apart by white space: the calls stand and the prose is content, named (the mirror of a
    trailing call); strict keeps the whole reply text."""
    got = parse(family, reply, tools=[WEATHER, SIGHTS])
    assert [(c.name, c.arguments) for c in got.calls] == [("get_weather", {"city": "Paris"})]
    assert got.content.strip() == prose
    assert _codes(family, reply, tools=[WEATHER, SIGHTS]) == ["recovered-leading-call"]
    strict = parse(family, reply, tools=[WEATHER, SIGHTS], strict=True)
    assert strict.calls == [] and strict.content == reply
    _streams(family, reply, tools=[WEATHER, SIGHTS])


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "get_weather", "parameters": {"city": "Paris"}}Hope that helps!',
        '{"name": "get_weather", "parameters": {"city": "Paris"}} {"a": 1}',
        '{"name": "nope", "parameters": {}} Some follow-up text',
    ],
)
def test_a_leading_call_not_set_apart_or_to_no_declared_tool_is_text(reply: str) -> None:
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert got.calls == [] and got.content == reply


def test_a_leading_call_whose_arguments_do_not_fit_is_read_and_checked_as_any_call() -> None:
    # SGLang TestLlama32Detector.test_json_with_trailing_text: no arguments for a tool that
    # requires one; the call is the model's, and its arguments' check tells it what is missing
    reply = '{"name": "get_weather", "parameters": {}} Some follow-up text'
    got = parse("llama3", reply, tools=[WEATHER, SIGHTS])
    assert [(c.name, c.arguments) for c in got.calls] == [("get_weather", {})]
    assert got.content.strip() == "Some follow-up text"
    # a tool not declared: nothing says the block is a call, and it stays text
    assert parse("llama3", reply, tools=[SIGHTS]).calls == []


def test_pythonic_positional_argument_stays_text_with_a_notice() -> None:
    """SGLang's test_positional_arguments_ignored reads ``get_weather('Tokyo')`` as a call with
    no arguments; that would run the tool without the city the model gave. Mapping by order is
    no better: a JSON schema's properties carry no order a client must keep, so the first
    property is not a signature's first parameter. The call stays text, and the user is told."""
    reply = "[get_weather('Tokyo')]"
    got = parse("pythonic", reply, tools=[WEATHER, SIGHTS])
    assert got.calls == [] and got.content == reply
    assert "call-not-read" in _codes("pythonic", reply, tools=[WEATHER, SIGHTS])
    assert any("key=value" in n for n in got.notices)


CALL_JSON = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    ("reply", "codes"),
    [
        ("Sure, I will check.\n" + CALL_JSON, ["recovered-trailing-call"]),
        (CALL_JSON, ["recovered-bare-json"]),
    ],
)
def test_words_one_call_one_notice(reply: str, codes: list[str]) -> None:
    """A call after prose is named once, as what it is; a reply that is only the call, too."""
    from toolwire.formats.words import Words

    stream = Words().stream([WEATHER])
    events = stream.feed(reply) + stream.finish()
    assert [e.code for e in events if isinstance(e, Notice)] == codes
    calls = [e.call for e in events if hasattr(e, "call")]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Paris"})]


# vLLM test_mistral_tool_parser v11 cases: the arguments right after the name, no [ARGS]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
    },
}


@pytest.mark.parametrize("lead", ["", "Adding. "])
def test_mistral_arguments_without_args_marker_are_a_named_tolerance(lead: str) -> None:
    reply = lead + '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}'
    got = parse("mistral", reply, tools=[ADD])
    assert [(c.name, c.arguments) for c in got.calls] == [
        ("add", {"a": 3.5, "b": 4}),
        ("add", {"a": 1, "b": 2}),
    ]
    assert got.content == lead
    assert _codes("mistral", reply, tools=[ADD]) == ["recovered-separator-missing"]
    strict = parse("mistral", reply, tools=[ADD], strict=True)
    assert [c.arguments for c in strict.calls] == [{"a": 1, "b": 2}]
    _streams("mistral", reply, tools=[ADD])


@pytest.mark.parametrize("reply", ['[TOOL_CALLS]{"a": 1}', '[TOOL_CALLS]add{"a": '])
def test_mistral_no_name_or_unfinished_arguments_stay_text(reply: str) -> None:
    got = parse("mistral", reply, tools=[ADD])
    assert got.calls == [] and got.content == reply
    assert "recovered-separator-missing" not in _codes("mistral", reply, tools=[ADD])


def test_mistral_nested_arguments_are_read_whole() -> None:
    """SGLang test_tool_call_with_nested_json: the reader keeps the nested object; the peer
    benchmark's failure is the schema typing dropping a property the schema does not list."""
    reply = (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": '
        '{"city": "Beijing", "options": {"detailed": true}}}]'
    )
    (call,) = parse("mistral", reply, tools=[WEATHER]).calls
    assert call.arguments == {"city": "Beijing", "options": {"detailed": True}}


def test_mistral_unreadable_list_stays_text_with_a_notice() -> None:
    """SGLang test_json_array_with_invalid_json drops the text; here call markup that is not
    read is shown, never dropped silently, as in every family."""
    reply = "[TOOL_CALLS] [not valid json]"
    got = parse("mistral", reply, tools=[WEATHER])
    assert got.calls == [] and got.content == reply
    assert "call-not-read" in _codes("mistral", reply, tools=[WEATHER])

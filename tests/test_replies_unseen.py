"""Replies toolwire used to lose: a call whose JSON strings hold raw line breaks or tabs, a
call written as the last block after prose, and LFM2's JSON form.

Each sample call is the one the family declares (``Family.samples``, read from the registry,
so a family added there is checked here too), changed only as the model strays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwire import family_names, get_family
from toolwire.events import TOLERANCES, CallArgsDelta, CallEnd, CallStart, Event, Notice
from toolwire.formats.base import Family
from toolwire.formats.declared import DECLARED
from toolwire.formats.samples import SAMPLE_TOOLS, sample_content
from toolwire.formats.words import Words


def _family(name: str) -> Family:
    """A family by name, or the reader for tools in words."""
    return Words() if name == "words" else get_family(name)


def _call(family: str, i: int) -> str:
    """Sample call ``i`` in ``family``'s grammar, as the family declares it."""
    return get_family(family).sample(i)


TOOLS = SAMPLE_TOOLS


def _events(family: str, text: str, chunk: int, *, strict: bool = False) -> list[Event]:
    stream = get_family(family).stream(TOOLS, strict=strict)
    out: list[Event] = []
    for at in range(0, len(text), chunk):
        out += stream.feed(text[at : at + chunk])
    return out + stream.finish()


def _codes(events: list[Event]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


# ------------------------------------------------------------ raw controls in JSON strings


#: The families whose call body is JSON (the sample writes its string escapes as \\n, \\t).
def _own_literals(name: str) -> bool:
    """The family's calls are Python's or Gemma's literals, not JSON (MiniCPM3 writes JSON's
    literals in Python calls: JSON's rules hold there)."""
    syntax = DECLARED.get(name)
    return syntax is not None and all(
        form.kind in ("name-python", "name-literal")
        and form.literal != "json"
        and not form.json_too
        for form in syntax.forms
    )


JSON_BODIED = [
    name
    for name in family_names()
    # Python's and Gemma's literals are no JSON: their strings' escapes are their own
    # (both samples the tests below read: a family with a tagged form besides, dots', is
    # JSON-bodied only in that other form)
    if name not in ("lfm2", "pythonic")
    and not _own_literals(name)
    and all("\\n" in _call(name, i) for i in (0, 1))
]


def _raw(text: str) -> str:
    """The sample with its escaped line breaks and tabs written raw, as a model writing code
    into an argument does."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


def test_the_json_families_are_the_ones_expected() -> None:
    # the selection is by the sample's text: make sure it found the JSON grammars
    for name in (
        "hermes",
        "llama3",
        "mistral",
        "granite",
        "deepseek-v3.1",
        "functionary-v3.2",
        "gigachat",
        "kimi-k2",
        "gpt-oss",
        "minimax-m1",
        "command-r7b",
    ):
        assert name in JSON_BODIED
    assert "qwen-xml" not in JSON_BODIED and "glm" not in JSON_BODIED


@pytest.mark.parametrize("family", JSON_BODIED)
@pytest.mark.parametrize("i", [0, 1])
def test_raw_line_breaks_in_a_json_call_are_read_and_named(family: str, i: int) -> None:
    text = _raw(_call(family, i))
    assert "\n" in text and "\t" in text
    whole = get_family(family).parse(text, TOOLS)
    assert [c.name for c in whole.calls] == ["write_file"]
    assert whole.calls[0].arguments["content"] == sample_content(i)
    for chunk in (1, 7, len(text)):
        events = _events(family, text, chunk)
        assert _codes(events).count("recovered-raw-controls") == 1, chunk
        ends = [e for e in events if isinstance(e, CallEnd)]
        assert [e.call.arguments for e in ends] == [whole.calls[0].arguments]
        # what streamed is JSON a client can run (json.loads refuses a raw control in a
        # string): the raw characters went out escaped
        streamed = "".join(e.text for e in events if isinstance(e, CallArgsDelta))
        assert json.loads(streamed) == whole.calls[0].arguments
        assert json.loads(ends[0].call.arguments_text) == whole.calls[0].arguments


@pytest.mark.parametrize("family", JSON_BODIED)
def test_strict_refuses_raw_line_breaks_and_says_so(family: str) -> None:
    assert "recovered-raw-controls" in TOLERANCES
    text = _raw(_call(family, 1))
    events = _events(family, text, 5, strict=True)
    assert not [e for e in events if isinstance(e, CallEnd)]
    assert "recovered-raw-controls" not in _codes(events)
    assert "call-not-read" in _codes(events)


@pytest.mark.parametrize("family", JSON_BODIED)
def test_other_control_characters_still_fail_with_a_notice(family: str) -> None:
    text = _call(family, 1).replace("\\t", "\x01", 1)
    result = get_family(family).parse(text, TOOLS)
    assert result.calls == []
    assert result.content  # the text stays, never lost
    events = _events(family, text, 9)
    assert "call-not-read" in _codes(events)


def test_the_hermes_reply_of_the_issue() -> None:
    text = (
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.py", '
        '"content": "def f():\n\treturn 1\n"}}\n</tool_call>'
    )
    result = get_family("hermes").parse(text, TOOLS)
    assert [c.arguments for c in result.calls] == [
        {"path": "a.py", "content": "def f():\n\treturn 1\n"}
    ]
    assert result.content == ""
    events = _events("hermes", text, 3)
    starts = [e for e in events if isinstance(e, CallStart)]
    assert len(starts) == 1 and "recovered-raw-controls" in _codes(events)


def test_a_raw_line_break_between_json_tokens_is_no_repair() -> None:
    # whitespace outside strings is JSON: nothing to name
    text = '<tool_call>\n{"name": "write_file",\n\t"arguments": {"path": "a.py"}}\n</tool_call>'
    events = _events("hermes", text, 4)
    assert [e.call.arguments for e in events if isinstance(e, CallEnd)] == [{"path": "a.py"}]
    assert "recovered-raw-controls" not in _codes(events)


# ------------------------------------------------------------------- LFM2's JSON form

LFM2_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
]

#: SGLang's Lfm2Detector tests and docstring (test_lfm2_detector.py): the JSON list form, a
#: single object in the envelope, and the Python form beside them; (reply, content, calls).
LFM2_CASES = [
    (
        '<|tool_call_start|>[{"name": "search", "arguments": {"query": "sglang"}}]'
        "<|tool_call_end|>",
        "",
        [("search", {"query": "sglang"})],
    ),
    (
        '<|tool_call_start|>[{"name": "calculator", "arguments": {"expression": "5 * 7"}}]'
        "<|tool_call_end|>",
        "",
        [("calculator", {"expression": "5 * 7"})],
    ),
    (
        '<|tool_call_start|>{"name": "get_weather", "arguments": {"city": "Vienna"}}'
        "<|tool_call_end|>",
        "",
        [("get_weather", {"city": "Vienna"})],
    ),
    (
        'Sure! <|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": {"query": "restaurants"}}]<|tool_call_end|>',
        "Sure! ",
        [("get_weather", {"city": "Paris"}), ("search", {"query": "restaurants"})],
    ),
    (
        '<|tool_call_start|>[get_weather(city="Tokyo"), search(query="restaurants")]'
        "<|tool_call_end|>",
        "",
        [("get_weather", {"city": "Tokyo"}), ("search", {"query": "restaurants"})],
    ),
]


@pytest.mark.parametrize(("reply", "content", "calls"), LFM2_CASES)
def test_lfm2_reads_its_json_form_and_its_python_form(
    reply: str, content: str, calls: list[tuple[str, dict[str, object]]]
) -> None:
    whole = get_family("lfm2").parse(reply, LFM2_TOOLS)
    assert [(c.name, c.arguments) for c in whole.calls] == calls
    assert whole.content == content and whole.notices == []
    for chunk in (1, 3, 11):
        stream = get_family("lfm2").stream(LFM2_TOOLS)
        events: list[Event] = []
        for at in range(0, len(reply), chunk):
            events += stream.feed(reply[at : at + chunk])
        events += stream.finish()
        ends = [e.call for e in events if isinstance(e, CallEnd)]
        assert [(c.name, c.arguments) for c in ends] == calls
        # the JSON form streams its arguments as written, as every JSON family does
        for index, call in enumerate(ends):
            text = "".join(
                e.text for e in events if isinstance(e, CallArgsDelta) and e.index == index
            )
            assert json.loads(text) == call.arguments


@pytest.mark.parametrize(
    "reply",
    [
        # a list is one form: JSON, then a Python call
        '<|tool_call_start|>[{"name": "search", "arguments": {}}, search(query="x")]'
        "<|tool_call_end|>",
        # not the call shape: no arguments, another key, not closed
        '<|tool_call_start|>[{"name": "search"}]<|tool_call_end|>',
        '<|tool_call_start|>[{"name": "search", "arguments": {}, "x": 1}]<|tool_call_end|>',
        '<|tool_call_start|>[{"name": "search", "arguments": {}}<|tool_call_end|>',
        '<|tool_call_start|>{"name": "search", "arguments": {}}] <|tool_call_end|>',
    ],
)
def test_lfm2_json_that_is_not_a_call_stays_text_with_a_notice(reply: str) -> None:
    result = get_family("lfm2").parse(reply, LFM2_TOOLS)
    assert result.calls == []
    assert result.content == reply
    assert any("is not a call" in n for n in result.notices)


def test_lfm2_does_not_read_json_lists_of_other_families() -> None:
    for family in ("granite", "nemotron-v2", "apriel", "hermes", "mistral", "llama3"):
        assert get_family("lfm2").parse(_call(family, 1), TOOLS).calls == [], family


# ------------------------------------------------------------- a call after prose, last

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
PARIS = {"city": "Paris"}
LLAMA_CALL = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
BARE_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def _read(family: str, reply: str, chunk: int, *, strict: bool = False) -> list[Event]:
    stream = _family(family).stream([WEATHER], strict=strict)
    out: list[Event] = []
    for at in range(0, len(reply), chunk):
        out += stream.feed(reply[at : at + chunk])
    return out + stream.finish()


def _text(events: list[Event]) -> str:
    from toolwire.events import TextDelta

    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _calls(events: list[Event]) -> list[tuple[str, dict[str, object]]]:
    return [(e.call.name, e.call.arguments) for e in events if isinstance(e, CallEnd)]


#: (family, reply, prose kept, whether the read is a guess named recovered-trailing-call)
TRAILING = [
    ("llama3", "I'll look that up.\n" + LLAMA_CALL, "I'll look that up.\n", True),
    ("llama3", "I'll look that up.\n" + LLAMA_CALL + "\n", "I'll look that up.\n", True),
    # vLLM's llama3_json test "Here is the result: {...}", as the reply's last block
    ("llama3", "Here is the result:\n" + LLAMA_CALL, "Here is the result:\n", True),
    ("llama3", "Let me check. <|python_tag|>" + LLAMA_CALL, "Let me check. ", False),
    ("pythonic", 'I will check.\n[get_weather(city="Paris")]', "I will check.\n", True),
    # vLLM's llama4_pythonic python_tag case, after an intro sentence; with and without its end
    (
        "pythonic",
        "Sure. <|python_start|>[get_weather(city='Paris')]<|python_end|>",
        "Sure. ",
        False,
    ),
    ("pythonic", "Sure. <|python_start|>[get_weather(city='Paris')]", "Sure. ", False),
    ("words", "Sure, I will check.\n" + BARE_CALL, "Sure, I will check.\n", True),
]


@pytest.mark.parametrize(("family", "reply", "prose", "guess"), TRAILING)
def test_a_call_that_ends_the_reply_after_prose_is_read(
    family: str, reply: str, prose: str, guess: bool
) -> None:
    for chunk in (1, 4, len(reply)):
        events = _read(family, reply, chunk)
        assert _calls(events) == [("get_weather", PARIS)], chunk
        assert _text(events) == prose
        assert ("recovered-trailing-call" in _codes(events)) == guess
        if guess:
            assert "recovered-trailing-call" in TOLERANCES


@pytest.mark.parametrize(("family", "reply", "prose", "guess"), TRAILING)
def test_strict_reads_only_the_tagged_call_after_prose(
    family: str, reply: str, prose: str, guess: bool
) -> None:
    events = _read(family, reply, 3, strict=True)
    if guess:
        assert _calls(events) == [] and _text(events) == reply
        assert "recovered-trailing-call" not in _codes(events)
    else:
        assert _calls(events) == [("get_weather", PARIS)]


def test_the_prose_streams_and_only_the_candidate_is_held() -> None:
    stream = get_family("llama3").stream([WEATHER])
    prose = "I'll look that up for you, one moment.\n"
    assert _text(stream.feed(prose)) == prose.rstrip("\n")  # the line break may open one
    assert _text(stream.feed(LLAMA_CALL[:20])) == "\n"  # the candidate is not text yet
    assert _text(stream.feed(LLAMA_CALL[20:])) == ""
    events = stream.finish()
    assert _calls(events) == [("get_weather", PARIS)] and _text(events) == ""


@pytest.mark.parametrize(
    ("family", "call"),
    [("llama3", LLAMA_CALL), ("words", BARE_CALL), ("pythonic", '[get_weather(city="Paris")]')],
)
def test_a_call_in_the_middle_of_prose_stays_prose(family: str, call: str) -> None:
    reply = "Here is what I would send:\n" + call + "\nbut I did not send it."
    for chunk in (1, 5, len(reply)):
        events = _read(family, reply, chunk)
        assert _calls(events) == [] and _text(events) == reply
        assert "recovered-trailing-call" not in _codes(events)


@pytest.mark.parametrize(
    ("family", "call", "why"),
    [
        ("llama3", '{"name": "get_time", "parameters": {"city": "Paris"}}', "undeclared"),
        ("llama3", '{"name": "get_weather", "parameters": {"town": "Paris"}}', "invalid"),
        ("llama3", '{"name": "get_weather", "parameters": {"city": 3}}', "invalid"),
        ("words", '{"name": "get_time", "arguments": {"city": "Paris"}}', "undeclared"),
        ("words", '{"name": "get_weather", "arguments": {}}', "invalid"),
        ("pythonic", '[get_time(city="Paris")]', "undeclared"),
        ("pythonic", "[get_weather(city=3)]", "invalid"),
    ],
)
def test_a_trailing_call_to_an_undeclared_tool_or_with_invalid_arguments_stays_text(
    family: str, call: str, why: str
) -> None:
    reply = "Sure.\n" + call
    events = _read(family, reply, 3)
    assert _calls(events) == [] and _text(events) == reply
    assert "recovered-trailing-call" not in _codes(events)
    # a declared tool called with arguments it cannot take is named, never shown silently
    assert ("call-not-read" in _codes(events)) == (why == "invalid")


def test_a_trailing_call_without_known_tools_is_no_guess() -> None:
    result = get_family("llama3").parse("Sure.\n" + LLAMA_CALL)
    assert result.calls == [] and result.content == "Sure.\n" + LLAMA_CALL


@pytest.mark.parametrize("family", ["llama3", "pythonic", "words"])
def test_many_brace_lines_after_prose_stay_linear(family: str) -> None:
    from .test_fuzz_parsers import _work

    def reply(n: int) -> str:
        return "Intro.\n" + '{"name": "x", "a": [1, {"b": "}"}]} then text\n[f(a=1)] so\n' * n

    fam = _family(family)
    small, large = reply(100), reply(400)
    for chunk in (3, 10**6):
        ratio = _work(fam, large, chunk) / max(1, _work(fam, small, chunk))
        assert ratio < 4 * 1.5, (chunk, ratio)
    assert fam.parse(large, [WEATHER]).content == large


def test_an_unclosed_brace_line_is_released_as_text_at_the_end() -> None:
    reply = 'Sure.\n{"name": "get_weather", "parameters": {"city": "Paris"'
    events = _read("llama3", reply, 2)
    assert _calls(events) == [] and _text(events) == reply


# ----------------------------------------------------------------- through the pipeline

_HERMES_TEMPLATE = (
    Path(__file__).parent / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
).read_text()


def _turn(reply: str, **options: object) -> list[Event]:
    from toolwire import LlamaCppBackend, Request, stream_sync
    from toolwire.pipeline import ModelMemory
    from toolwire.testing import ScriptedLlama

    backend = LlamaCppBackend(
        "scripted", llama=ScriptedLlama(_HERMES_TEMPLATE, reply), memory=ModelMemory()
    )
    request = Request([{"role": "user", "content": "Weather in Paris?"}], [WEATHER], **options)
    return list(stream_sync(backend.stream(request)))


def test_drift_recovery_reads_a_bare_call_after_prose_in_a_hermes_reply() -> None:
    reply = "Sure, I will check.\n" + BARE_CALL
    events = _turn(reply)
    assert _calls(events) == [("get_weather", PARIS)]
    assert _text(events) == "Sure, I will check.\n"
    assert "recovered-trailing-call" in _codes(events)
    assert events[-1].finish_reason == "tool_calls"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "reply",
    [
        "Sure.\n" + BARE_CALL + "\nThat is the call I would make.",
        "Sure.\n" + BARE_CALL.replace("get_weather", "get_time"),
        "Sure.\n" + BARE_CALL.replace('"city"', '"town"'),
    ],
)
def test_drift_recovery_leaves_json_that_is_not_the_last_valid_call_as_text(reply: str) -> None:
    events = _turn(reply)
    assert _calls(events) == [] and _text(events) == reply
    assert "recovered-trailing-call" not in _codes(events)


def test_strict_refuses_a_bare_call_after_prose() -> None:
    reply = "Sure, I will check.\n" + BARE_CALL
    events = _turn(reply, strict=True)
    assert _calls(events) == [] and _text(events) == reply


def test_a_hermes_call_with_raw_line_breaks_through_the_pipeline() -> None:
    reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris\n"}}\n</tool_call>'
    events = _turn(reply)
    assert [name for name, _ in _calls(events)] == ["get_weather"]
    assert "recovered-raw-controls" in _codes(events)
    strict = _turn(reply, strict=True)
    assert _calls(strict) == [] and _text(strict) == reply
    assert "call-not-read" in _codes(strict)


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        (
            "hermes",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        ),
        (
            "mistral",
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Par\n'
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        ),
        (
            "granite",
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par\n'
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        ),
    ],
)
def test_a_string_cut_short_at_a_line_break_does_not_swallow_the_next_call(
    family: str, reply: str
) -> None:
    # the tolerance for raw line breaks must not let a string run across the family's own
    # marker: the next call is read, however the reply is cut (the marker split included)
    for chunk in (1, 2, 3, 5, 8, len(reply)):
        events = _read(family, reply, chunk)
        assert _calls(events) == [("get_weather", PARIS)], chunk
        assert "call-not-read" in _codes(events)
        assert "recovered-raw-controls" not in _codes(events)

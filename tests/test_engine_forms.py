"""What the one engine reads for every declared syntax that says so, moved from the
hand-written readers that each had it alone: a call opened with the family's opening words
left out, a value's closing tag drifted, a separator after a name left out, a line break
written ``\\r\\n`` around a value, a block whose closing words the reply may leave out, a call
id the model did not write or wrote after the arguments, a plain-word marker, a template's
pseudo-tool and turn opener; and a family of several forms, each read by the same stream,
the forms parting right after the marker or after a name.

Each case is read whole and streamed at every split point (the two must agree); each repair
is named, and strict reading refuses it.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolwire import get_family
from toolwire.events import CallAbort, CallEnd, CallStart, Notice
from toolwire.formats.base import assemble
from toolwire.formats.declared import DECLARED

from .replies import TOOLS

_QX = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"


def _events(name: str, chunks: list[str], *, strict: bool = False) -> list[Any]:
    stream = get_family(name).stream(TOOLS, make_id=lambda i: f"id{i}", strict=strict)
    events: list[Any] = []
    for chunk in chunks:
        events += stream.feed(chunk)
    return events + stream.finish()


class Read:
    """A reply read whole, checked equal (assembled) to it streamed at every split."""

    def __init__(self, name: str, reply: str, *, strict: bool = False) -> None:
        whole = _events(name, [reply], strict=strict)
        for k in range(len(reply) + 1):
            split = _events(name, [reply[:k], reply[k:]], strict=strict)
            assert assemble(split) == assemble(whole), k
        self.result = assemble(whole)
        parsed = get_family(name).parse(reply, TOOLS, strict=strict)
        assert parsed.content == self.result.content
        assert [(c.name, c.arguments) for c in parsed.calls] == [
            (c.name, c.arguments) for c in self.result.calls
        ]
        self.notices = [e for e in whole if isinstance(e, Notice)]
        self.codes = [e.code for e in self.notices]
        self.calls = self.result.calls
        self.content = self.result.content


def _read(name: str, reply: str, *, strict: bool = False) -> Read:
    return Read(name, reply, strict=strict)


def _codes(read: Read) -> list[str]:
    return read.codes


def _calls(result: Read) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, dict(c.arguments)) for c in result.calls]


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        (_QX + "\n</tool_call>", ""),  # its closing word confirms it
        ("Let me look.\n" + _QX, "Let me look.\n"),  # bare, naming a declared tool, then the end
        (_QX + "\n" + _QX, ""),  # two bare calls
    ],
)
def test_a_call_opened_with_its_opening_words_left_out_is_read(reply: str, text: str) -> None:
    result = _read("qwen-xml", reply)
    assert _calls(result) == [("get_weather", {"city": "Paris"})] * reply.count("<function=")
    assert result.content == text
    assert set(_codes(result)) == {"recovered-unopened-call"}
    strict = _read("qwen-xml", reply, strict=True)
    assert strict.calls == [] and strict.content == reply


@pytest.mark.parametrize(
    "reply",
    [
        _QX + " and prose after it",  # nothing confirms it: text, the call withdrawn
        _QX.replace("get_weather", "nope"),  # a bare call names no declared tool
        "Write <function=get_weather> in prose.",
        _QX[:30],  # cut short
    ],
)
def test_an_unconfirmed_call_with_its_opening_left_out_stays_text(reply: str) -> None:
    result = _read("qwen-xml", reply)
    assert result.calls == [] and result.content == reply
    events = _events("qwen-xml", [reply])
    started = [e.index for e in events if isinstance(e, CallStart)]
    assert [e.index for e in events if isinstance(e, CallAbort)] == started
    # a call announced and withdrawn is named; text that never was one is not
    assert _codes(result) == (["call-abandoned"] if started else [])
    assert not any(isinstance(e, CallEnd) for e in events)


@pytest.mark.parametrize(
    ("name", "reply", "drifted"),
    [
        (
            "qwen-xml",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter1>\n"
            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
            "</parameter1>",
        ),
        (
            "qwen-xml",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter\n"
            "</function>\n</tool_call>",
            "</parameter",
        ),
        (  # every tagged syntax whose value ends at a closing tag
            "glm",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value_x>\n"
            "</tool_call>",
            "</arg_value_x>",
        ),
        (
            "minimax",
            '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
            "</parameter2>\n</invoke>\n</minimax:tool_call>",
            "</parameter2>",
        ),
    ],
)
def test_a_drifted_closing_tag_before_the_next_tag_ends_the_value(
    name: str, reply: str, drifted: str
) -> None:
    result = _read(name, reply)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert result.calls[0].arguments["city"] == "Paris"
    assert _codes(result) == ["recovered-misspelt-tag"]
    assert drifted in result.notices[0].message
    # strict reads the grammar: the drifted tag is the value's text, or no call
    strict = _read(name, reply, strict=True)
    assert all(c.arguments.get("city") != "Paris" for c in strict.calls)
    assert "recovered-misspelt-tag" not in strict.codes


def test_a_value_holding_a_closing_tag_s_likeness_is_read_to_its_true_end() -> None:
    """A tag is drifted only where the next tag follows it: in a value, it is the value."""
    value = "see </parameter1> here"
    reply = (
        f"<tool_call>\n<function=write_file>\n<parameter=path>\na.md\n</parameter>\n"
        f"<parameter=content>\n{value}\n</parameter>\n</function>\n</tool_call>"
    )
    result = _read("qwen-xml", reply)
    assert _calls(result) == [("write_file", {"path": "a.md", "content": value})]
    assert _codes(result) == []


@pytest.mark.parametrize(
    "reply",
    [
        "<tool_calls:opensource><tool_call:opensource>get_weather<arg_key:opensource>city"
        "</arg_key:opensource><arg_value:opensource>Paris</arg_value:opensource>"
        "</tool_call:opensource></tool_calls:opensource>",
        "<tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        "</tool_call></tool_calls>",
    ],
)
def test_a_separator_after_a_name_left_out_is_read(reply: str) -> None:
    result = _read("hunyuan", reply)
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert _codes(result) == ["recovered-separator-missing"]
    assert _read("hunyuan", reply, strict=True).calls == []


def test_a_name_s_closing_bracket_is_no_separator() -> None:
    """Only a separator that is a tag of its own may be left out: Qwen's ``>`` after a name
    ends the name, and a name running into the next tag is no name."""
    reply = "<tool_call>\n<function=get_weather<parameter=city>\nParis\n</parameter>\n</function>"
    assert _read("qwen-xml", reply + "\n</tool_call>").calls == []


def test_a_family_keeps_a_quoted_value_verbatim_where_its_peers_do() -> None:
    """Qwen XML keeps ``"Paris"`` quoted (llama.cpp's tests); GLM reads a value written as a
    JSON string as that string (SGLang's): each family's declaration says which."""
    qwen = '<tool_call>\n<function=get_weather>\n<parameter=city>\n"Paris"\n</parameter>\n'
    result = _read("qwen-xml", qwen + "</function>\n</tool_call>")
    assert _calls(result) == [("get_weather", {"city": '"Paris"'})] and _codes(result) == []
    glm = '<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>"Paris"</arg_value>\n'
    result = _read("glm", glm + "</tool_call>")
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert _codes(result) == ["arguments-repaired"]


def test_windows_line_endings_around_a_value_are_the_template_s() -> None:
    reply = (
        "<tool_call>\r\n<function=write_file>\r\n<parameter=path>\r\na.py\r\n</parameter>\r\n"
        "<parameter=content>\r\nx = 1\r\ny = 2\r\n</parameter>\r\n</function>\r\n</tool_call>"
    )
    result = _read("qwen-xml", reply)
    assert _calls(result) == [("write_file", {"path": "a.py", "content": "x = 1\r\ny = 2"})]


_SO = "<|tool_calls|><|tool_call:begin|>{id}<|tool_call:name|>get_weather<|tool_call:args|>"


def test_a_block_whose_closing_words_may_be_left_out_ends_at_text() -> None:
    call = _SO.format(id="c1") + '{"city": "Paris"}<|tool_call:end|>'
    for reply, text in ((call + "<|calls|>", ""), (call, ""), (call + " and prose", " and prose")):
        result = _read("solar-open", reply)
        assert _calls(result) == [("get_weather", {"city": "Paris"})], reply
        assert result.content == text and _codes(result) == [], reply
        assert [c.id for c in result.calls] == ["c1"]


def test_a_call_id_the_model_did_not_write_is_a_fresh_one() -> None:
    second = _SO.format(id="c1").removeprefix("<|tool_calls|>")  # the block's next call
    reply = _SO.format(id="") + "{}<|tool_call:end|>" + second + "{}<|tool_call:end|><|calls|>"
    result = _read("solar-open", reply)
    ids = [c.id for c in result.calls]
    assert len(ids) == 2 and ids[1] == "c1" and ids[0] not in ("", "c1")


_GC3 = '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_weather", "arguments": {}}'
_GC31 = '<|function_call|>{"name": "write_file", "arguments": {"path": "a", "content": "b"}}'


def test_a_family_of_two_forms_reads_each_in_one_reply() -> None:
    result = _read("gigachat", "Sure." + _GC31 + _GC3 + "<|message_sep|>")
    assert [c.name for c in result.calls] == ["write_file", "get_weather"]
    assert result.content == "Sure."


@pytest.mark.parametrize("name", ["gigachat", "hunyuan", "mistral"])
def test_each_form_of_a_family_is_written_taken_by_its_grammar_and_read_back(name: str) -> None:
    syntax = DECLARED[name]
    family = syntax.family
    assert len(family.samples) == len(syntax.forms) >= 2
    assert set(family.markers) == {form.marker for form in syntax.forms}
    for form in range(len(syntax.forms)):
        reply = syntax.reply([("get_weather", {"city": "Paris"})], 0, form)
        assert reply.startswith(syntax.forms[form].marker)
        assert _calls(_read(name, reply)) == [("get_weather", {"city": "Paris"})]


_LF = "<|tool_call_start|>"
_LF_END = "<|tool_call_end|>"


@pytest.mark.parametrize(
    "reply",
    [
        _LF + '[get_weather(city="Paris"), write_file(path="a", content="b")]' + _LF_END,
        # the same list in JSON: its first call says how the list writes its calls
        _LF
        + '[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        + '{"name": "write_file", "arguments": {"path": "a", "content": "b"}}]'
        + _LF_END,
        # a trailing comma, as Python writes one
        _LF + '[get_weather(city="Paris"), write_file(path="a", content="b"),]' + _LF_END,
    ],
)
def test_a_list_of_calls_is_read_in_either_way_its_family_writes_it(reply: str) -> None:
    for strict in (False, True):
        result = _read("lfm2", reply, strict=strict)
        assert [c.name for c in result.calls] == ["get_weather", "write_file"]
        assert result.content == "" and result.codes == []


def test_one_list_is_written_one_way() -> None:
    reply = _LF + '[get_weather(city="Paris"), {"name": "get_time", "arguments": {}}]' + _LF_END
    result = _read("lfm2", reply)
    assert result.calls == [] and result.content == reply
    assert result.codes == ["call-not-read"]


def test_forms_sharing_a_marker_are_chosen_by_what_follows_it() -> None:
    """LFM2's list and its one JSON object open with the same token: the next character
    chooses the form, whoever reads the reply, however it is cut."""
    one = _LF + '{"name": "get_weather", "arguments": {"city": "Paris"}}' + _LF_END
    listed = _LF + '[get_weather(city="Paris")]' + _LF_END
    result = _read("lfm2", one + " then " + listed)
    assert [c.name for c in result.calls] == ["get_weather", "get_weather"]
    assert result.content == " then "
    assert _read("lfm2", _LF + " nothing" + _LF_END).calls == []


def test_a_string_cut_short_never_runs_across_any_form_s_marker() -> None:
    """A call's JSON string that a raw line break leaves open ends at the marker of any of
    the family's forms, however the marker is cut (it holds a line break of its own)."""
    broken = '<|function_call|>{"name": "get_time", "arguments": {"a": "x\n'
    for reply in (broken + _GC31, '<|function_call|>{"x\n' + _GC3):
        result = _read("gigachat", reply)
        assert len(result.calls) == 1 and result.content.startswith("<|function_call|>")
        one_by_one = assemble(_events("gigachat", list(reply)))
        assert [c.name for c in one_by_one.calls] == [c.name for c in result.calls]


def test_another_call_s_start_the_reply_ended_on_is_text() -> None:
    """After whole calls, the start of another call cut short is reply text; the block's
    own closing words cut short are not."""
    hy = "<tool_calls>\n<tool_call>get_weather<tool_sep>\n</tool_call>\n"
    assert _read("hunyuan", hy + "<tool_ca").content == "<tool_ca"
    assert _read("hunyuan", hy + "</tool_ca").content == ""
    assert _read("lfm2", _LF + "[get_weather(city='Paris')] <|tool_call_e").content == ""


@pytest.mark.parametrize("name", ["d`ays", "da.ys", "da|ys"])
def test_a_keyword_argument_is_a_python_name_strict_or_not(name: str) -> None:
    reply = _LF + f"[get_weather(city='Paris', {name}=3)]" + _LF_END
    for strict in (False, True):
        result = _read("lfm2", reply, strict=strict)
        assert result.calls == [] and result.content == reply


_TC = "[TOOL_CALLS]"


def test_forms_parting_after_a_name_are_read_in_one_reply() -> None:
    """Mistral's ``NAME[CALL_ID]ID[ARGS]`` and ``NAME[ARGS]`` part at the word after the name;
    the id the model wrote is the call's, and a call is announced once its id is read."""
    reply = _TC + 'get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}' + _TC + "set_flags[ARGS]{}"
    result = _read("mistral", reply)
    assert _calls(result) == [("get_weather", {"city": "Paris"}), ("set_flags", {})]
    assert [c.id for c in result.calls] == ["a1b2c3d4e", "id1"]
    assert _codes(result) == [] and result.content == ""
    # the id is whole before the call begins: no call starts inside it
    cut = reply.index("a1b2") + 2
    assert not [e for e in _events("mistral", [reply[:cut]]) if isinstance(e, CallStart)]


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("mistral", _TC + 'get_weather{"city": "Paris"}'),
        (
            "deepseek-v3.1",
            '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather{"city": "Paris"}'
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ),
    ],
)
def test_a_separator_before_the_arguments_left_out_is_read(name: str, reply: str) -> None:
    """The separator token due after a name (``[ARGS]``, ``<｜tool▁sep｜>``) left out, the
    arguments' ``{`` right after the name: read for every syntax, named; strict refuses."""
    result = _read(name, reply)
    assert _calls(result) == [("get_weather", {"city": "Paris"})]
    assert _codes(result) == ["recovered-separator-missing"]
    strict = _read(name, reply, strict=True)
    assert strict.calls == [] and strict.content == reply


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("mistral", _TC + '[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "%s"}]'),
        (
            "apriel",
            '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "%s"}]'
            "</tool_calls>",
        ),
    ],
)
def test_an_id_written_after_the_arguments_is_the_call_s(name: str, reply: str) -> None:
    """Where the family's templates write a call's id after its arguments, the model's id is
    kept (as llama.cpp keeps it): the call is announced once whole, with it."""
    result = _read(name, reply % "k3j4h5g6f")
    assert [(c.name, c.id) for c in result.calls] == [("get_weather", "k3j4h5g6f")]
    # none written: a fresh one
    assert [c.id for c in _read(name, reply.replace(', "id": "%s"', "")).calls] == ["id0"]


@pytest.mark.parametrize(
    "reply",
    ["Action: answer at once.", "Thought: easy.\nAction:\n```python\nx = 1\n```", "Action:"],
)
def test_a_plain_word_marker_without_its_next_word_is_prose(reply: str) -> None:
    """``Action:`` is a plain word: only the fence after it makes a call. Without it the text
    is prose, no notice; with it, a broken block is call markup, named."""
    result = _read("command-r-plus", reply)
    assert result.calls == [] and result.content == reply and result.notices == []
    broken = 'Action:\n```json\n{"tool_name": "get_weather"}\n```'
    assert _codes(_read("command-r-plus", broken)) == ["call-not-read"]


def test_a_plain_word_marker_s_grammar_waits_for_its_next_word() -> None:
    shape = DECLARED["command-r-plus"].shape
    assert shape.plain_marker and shape.trigger == "Action:{space}```json"
    assert not DECLARED["hermes"].shape.plain_marker
    assert DECLARED["hermes"].shape.trigger == "<tool_call>"


def test_a_template_s_pseudo_tool_is_no_call_and_its_turn_opener_is_dropped() -> None:
    direct = '{"tool_name": "directly-answer", "parameters": {}}'
    weather = '{"tool_name": "get_weather", "parameters": {"city": "Paris"}}'
    alone = _read("command-r-plus", "<|CHATBOT_TOKEN|>Action:\n```json\n[" + direct + "]\n```")
    assert alone.calls == [] and alone.content == "" and _codes(alone) == ["directly-answer"]
    both = _read("command-r-plus", "Action:\n```json\n[" + direct + ", " + weather + "]\n```")
    assert _calls(both) == [("get_weather", {"city": "Paris"})] and _codes(both) == []
    # only at the reply's start: elsewhere the token is the model's text
    inside = _read("command-r-plus", "Hi <|CHATBOT_TOKEN|>")
    assert inside.content == "Hi <|CHATBOT_TOKEN|>"


def test_a_code_form_with_no_closing_word_runs_to_the_reply_s_end() -> None:
    """A code form (``kind="code"``) whose template writes nothing after the code: the code
    is the rest of the reply, however the reply is cut."""
    from toolwire.formats.derived import DerivedShape
    from toolwire.formats.syntax import Syntax

    shape = DerivedShape(kind="name-json", opening=("<call>",), name_end=(">",))
    code = DerivedShape(kind="code", opening=("<run>",), code=("python", "code"))
    family = Syntax(name="coded", label="a code form (tests)", shape=shape, also=(code,)).family
    tools = [{"type": "function", "function": {"name": "python", "parameters": {}}}]
    reply = "Running it.<run>print('a <b>')\nx = 1"
    whole = family.parse(reply, tools)
    assert [(c.name, c.arguments) for c in whole.calls] == [
        ("python", {"code": "print('a <b>')\nx = 1"})
    ]
    assert whole.content == "Running it."
    for k in range(len(reply) + 1):
        stream = family.stream(tools)
        events = stream.feed(reply[:k]) + stream.feed(reply[k:]) + stream.finish()
        assert [(c.name, c.arguments) for c in assemble(events).calls] == [
            (c.name, c.arguments) for c in whole.calls
        ]

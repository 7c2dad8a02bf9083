"""Grammars learned from a template's own renderings, tested on templates held out.

Derivation runs here with the registered families switched off (``families=()``), so
templates a family already reads serve as ground truth for the learner: the learned family
must read the template's rendering of two calls it never saw during learning (the shared
round-trip calls: code text, a boolean, a list, a nested object) exactly as the template's
own family would.

DEVELOPMENT lists the templates whose renderings were looked at while the learner was written
and fixed; HELD_OUT lists templates that were not looked at: they were only run, once the
learner was done. A hand-written template in grammars of no published model checks the
learner on shapes nobody has seen.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import ChatTemplate, LimitError, detect_format, load_template, resolve_format
from toolwire.events import CallEnd, CallStart
from toolwire.formats.base import Family, ParseResult, assemble
from toolwire.formats.derived import DerivedShape
from toolwire.formats.detect import DERIVE_TOOLS, Detection, assistant_text
from toolwire.messages import ToolCall

from .prepared import typed
from .test_detect import CALLS, PLAIN_TOOLS, USER

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

#: Looked at while writing the learner (what each taught it in brackets).
DEVELOPMENT = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "json",  # JSON between tags
    "GLM-4.6.jinja": "tags",  # a thinking block before the calls
    "Qwen3.5-4B.jinja": "tags",  # whitespace around values
    "Kimi-K2-Instruct.jinja": "name-json",  # the call's number after its name
    "meetkai-functionary-medium-v3.1.jinja": "name-json",
    "deepseek-ai-DeepSeek-V3.1.jinja": "name-json",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "json",  # an id that changes per call
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "json",  # other keys, ]<|END|>
    "unsloth-mistral-Devstral-Small-2507.jinja": "name-json",  # nothing after the arguments
    "ByteDance-Seed-OSS.jinja": "tags",
}
#: Never looked at: run only once the learner was written.
HELD_OUT = {
    "Apertus-8B-Instruct.jinja": "name-json",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "json",
    "unsloth-Apriel-1.5.jinja": "json",
    "Bielik-11B-v3.0-Instruct.jinja": "json",
    "MiMo-VL.jinja": "json",
    "Reka-Edge.jinja": "json",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "json",
    "Qwen-Qwen3-0.6B.jinja": "json",
    "ibm-granite-granite-4.0.jinja": "json",
    "NVIDIA-Nemotron-Nano-v2.jinja": "json",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "json",
    "Cohere2MoE.jinja": "json",
    "Qwen3-Coder.jinja": "tags",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "tags",
    "MiniMax-M2.jinja": "tags",
    "poolside-Laguna-S-2.1.jinja": "tags",
    "poolside-Laguna-XS-2.1.jinja": "tags",
    "moonshotai-Kimi-K2.jinja": "name-json",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "name-json",
    "llama-cpp-deepseek-r1.jinja": "name-json",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "name-json",
}
#: Templates no shape is learned for, and why: the proof must fail, so nothing is claimed.
NOT_DERIVED = {
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "a bare JSON object: no text marks a call",
    "deepseek-ai-DeepSeek-V3.2.jinja": "a string attribute that differs by value type",
    "openbmb-MiniCPM5-1B.jinja": "values with markup are wrapped in CDATA",
    "Kimi-K3.jinja": "the type of each value written beside its key",
    "LFM2.5-8B-A1B.jinja": "Python call syntax, not a learnable shape",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "one call's block is left unclosed",
    "microsoft-Phi-3.5-mini-instruct.jinja": "calls are not rendered at all",
}


@functools.cache
def derived(name: str) -> Detection:
    return detect_format(load_template(FIXTURES / name), families=())


def _assistant(calls: list[ToolCall]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in calls]}


@pytest.mark.parametrize("name", sorted({**DEVELOPMENT, **HELD_OUT}))
def test_learned_family_reads_the_templates_own_two_calls(name: str) -> None:
    found = derived(name)
    assert (found.format, found.via) == ("derived", "derived")
    assert found.shape is not None and found.shape.kind == {**DEVELOPMENT, **HELD_OUT}[name]
    family = found.family
    assert family is not None and family.name == "derived"
    tpl = load_template(FIXTURES / name)
    text, opened = assistant_text(
        tpl, [USER], [_assistant(CALLS)], PLAIN_TOOLS, call_ids=family.call_ids
    )
    result = family.parse(text, PLAIN_TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in result.calls] == [
        (c.name, c.arguments) for c in CALLS
    ]
    assert result.content.strip() == "" and not result.notices


@pytest.mark.parametrize("name", sorted(NOT_DERIVED))
def test_nothing_is_claimed_without_proof(name: str) -> None:
    found = derived(name)
    assert (found.format, found.shape, found.family) == ("none", None, None)


def test_registered_families_come_first() -> None:
    tpl = load_template(FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja")
    assert (detect_format(tpl).format, detect_format(tpl).via) == ("hermes", "probe")
    assert derived("Qwen-Qwen2.5-7B-Instruct.jinja").format == "derived"


# ------------------------------------------------------------------ grammars nobody has seen

_HEAD = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<|a|>{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}"
)
_TAIL = (
    "{% endfor %}<|end|>{% elif m.role == 'tool' %}<|t|>{{ m.content }}<|end|>"
    "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|a|>{% endif %}"
)
#: ``<<call NAME>>{json}<<end>>`` for each call.
ANGLE = _HEAD + "<<call {{ c.function.name }}>>{{ c.function.arguments | tojson }}<<end>>" + _TAIL
#: ``@@NAME`` then ``~key~ value ;;`` lines, then ``@@/``.
TILDES = (
    _HEAD
    + "@@{{ c.function.name }}\n{% for k, v in c.function.arguments.items() %}"
    + "~{{ k }}~ {{ v if v is string else v | tojson }} ;;\n{% endfor %}@@/\n"
    + _TAIL
)
#: ``CALLS>> [{"tool": NAME, "parameters": {...}}; ...] <<CALLS``.
SEMI_LIST = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<|a|>{{ m.content or '' }}"
    "{% if m.tool_calls %}CALLS>> [{% for c in m.tool_calls %}{% if not loop.first %}; "
    '{% endif %}{"tool": {{ c.function.name | tojson }}, "parameters": '
    "{{ c.function.arguments | tojson }}}{% endfor %}] <<CALLS{% endif %}<|end|>"
    "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|a|>{% endif %}"
)
#: Tags namespaced by a suffix (the shape of Hunyuan's templates): ``<tool_calls:x>`` around
#: ``<tool_call:x>NAME<tool_sep:x>`` and ``<arg_key:x>K</arg_key:x><arg_value:x>V</arg_value:x>``;
#: two tags ending alike (``<tool_sep:x>``, ``</arg_value:x>``) must not blur the key's opener.
NAMESPACED = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<|a|>{{ m.content or '' }}"
    "{% if m.tool_calls %}<tool_calls:x>\n{% for c in m.tool_calls %}"
    "<tool_call:x>{{ c.function.name }}<tool_sep:x>\n"
    "{% for k, v in c.function.arguments.items() %}<arg_key:x>{{ k }}</arg_key:x>\n"
    "<arg_value:x>{{ v if v is string else v | tojson }}</arg_value:x>\n{% endfor %}"
    "</tool_call:x>\n{% endfor %}</tool_calls:x>{% endif %}<|end|>"
    "{% elif m.role == 'tool' %}<|t|>{{ m.content }}<|end|>"
    "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|a|>{% endif %}"
)
UNSEEN = {"angle": ANGLE, "tildes": TILDES, "semi-list": SEMI_LIST, "namespaced": NAMESPACED}


@functools.cache
def unseen(key: str) -> Family:
    # derivation alone: a shape a family has come to read (Hunyuan's namespaced tags) is
    # still learned from the template's renderings
    found = detect_format(ChatTemplate(UNSEEN[key], eos_token="<|end|>"), families=())
    assert (found.format, found.via) == ("derived", "derived")
    family = found.family
    assert family is not None
    return family


def test_unseen_shapes_are_described() -> None:
    shapes = {}
    for key, source in UNSEEN.items():
        shape = detect_format(ChatTemplate(source, eos_token="<|end|>"), families=()).shape
        assert isinstance(shape, DerivedShape)
        shapes[key] = shape
    assert shapes["angle"].kind == "name-json" and shapes["angle"].marker == "<<call"
    assert shapes["tildes"].kind == "tags" and shapes["tildes"].key_open == ("~",)
    assert (shapes["semi-list"].name_key, shapes["semi-list"].args_key) == ("tool", "parameters")
    assert shapes["semi-list"].next_call == (";",) and shapes["semi-list"].trail == ("]", "<<CALLS")
    spaced = shapes["namespaced"]
    assert (spaced.kind, spaced.marker) == ("tags", "<tool_calls:x>")
    assert (spaced.name_end, spaced.key_open) == (("<tool_sep:x>",), ("<arg_key:x>",))
    assert (spaced.value_end, spaced.trail) == (("</arg_value:x>",), ("</tool_calls:x>",))
    assert "<<call" in unseen("angle").label


def test_no_family_claims_the_unseen_shapes() -> None:
    # with the families registered, no family reads these shapes, so they are learned: the
    # namespaced one too, Hunyuan's tags in a namespace of its own (``:x``), where the
    # hunyuan family declares its models' two forms (plain and ``:opensource``)
    for key, source in UNSEEN.items():
        found = detect_format(ChatTemplate(source, eos_token="<|end|>"))
        assert (found.format, found.via) == ("derived", "derived"), key


@pytest.mark.parametrize("key", sorted(UNSEEN))
def test_unseen_grammar_reads_its_own_two_calls(key: str) -> None:
    tpl = ChatTemplate(UNSEEN[key], eos_token="<|end|>")
    text, opened = assistant_text(tpl, [USER], [_assistant(CALLS)], PLAIN_TOOLS)
    result = unseen(key).parse("Sure. " + text, PLAIN_TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in result.calls] == [
        (c.name, c.arguments) for c in CALLS
    ]
    assert result.content.strip() == "Sure." and not result.notices


def test_resolve_format_auto_gives_the_learned_family() -> None:
    tpl = ChatTemplate(ANGLE, eos_token="<|end|>")
    family = resolve_format("auto", tpl)
    assert family is not None and family.name == "derived"
    assert family.parse('<<call f>>{"a": 1}<<end>>').calls[0].arguments == {"a": 1}


# ------------------------------------------------------------------ streaming and limits

REPLIES = {
    "angle": 'Hi <<call get_weather>>{"city": "Oslo", "days": 2}<<end>> then '
    '<<call write_file>> {"path": "a", "content": "x}<<end>>"} <<end>> done',
    "tildes": "Ok\n@@get_weather\n~city~ São Paulo ;;\n~days~ 2 ;;\n@@/\nand more text",
    "semi-list": 'CALLS>> [{"tool": "get_weather", "parameters": {"city": "Rome"}};\n'
    ' {"tool": "set_flags", "parameters": {"enabled": true}}]\n<<CALLS tail',
    "namespaced": "Checking.<tool_calls:x>\n<tool_call:x>get_weather<tool_sep:x>\n"
    "<arg_key:x>city</arg_key:x>\n<arg_value:x>Paris</arg_value:x>\n</tool_call:x>\n"
    "<tool_call:x>set_flags<tool_sep:x><arg_key:x>enabled</arg_key:x>"
    "<arg_value:x>true</arg_value:x></tool_call:x></tool_calls:x> done",
}


def _ids(i: int) -> str:
    return f"id{i}"


def _events(family: Family, chunks: list[str]) -> list[Any]:
    s = family.stream(PLAIN_TOOLS, make_id=_ids)
    events: list[Any] = []
    for chunk in chunks:
        events += s.feed(chunk)
    return events + s.finish()


def _parse(family: Family, text: str) -> ParseResult:
    return family.parse(text, PLAIN_TOOLS, make_id=_ids)


def test_replies_in_the_learned_grammars() -> None:
    angle = _parse(unseen("angle"), REPLIES["angle"])
    assert [c.name for c in angle.calls] == ["get_weather", "write_file"]
    assert angle.calls[1].arguments == {"path": "a", "content": "x}<<end>>"}
    assert angle.content == "Hi  then  done"
    tildes = _parse(unseen("tildes"), REPLIES["tildes"])
    assert tildes.calls[0].arguments == {"city": "São Paulo", "days": "2"}
    assert tildes.calls[0].text_values and tildes.content == "Ok\n\nand more text"
    listed = _parse(unseen("semi-list"), REPLIES["semi-list"])
    assert [c.arguments for c in listed.calls] == [{"city": "Rome"}, {"enabled": True}]
    assert listed.content == " tail"
    spaced = _parse(unseen("namespaced"), REPLIES["namespaced"])
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in spaced.calls] == [
        ("get_weather", {"city": "Paris"}),
        ("set_flags", {"enabled": True}),
    ]
    assert spaced.content == "Checking. done"


@pytest.mark.parametrize("key", sorted(REPLIES))
def test_stream_every_split_point(key: str) -> None:
    family = unseen(key)
    reply = REPLIES[key]
    whole = _parse(family, reply)
    for k in range(len(reply) + 1):
        assert assemble(_events(family, [reply[:k], reply[k:]])) == whole, k
    events = _events(family, list(reply))
    assert assemble(events) == whole
    starts = [e.index for e in events if isinstance(e, CallStart)]
    ends = [e.index for e in events if isinstance(e, CallEnd)]
    assert starts == ends == list(range(len(whole.calls)))


@pytest.mark.parametrize("name", ["Kimi-K2-Instruct.jinja", "Qwen3.5-4B.jinja"])
def test_stream_a_real_rendering_at_every_split_point(name: str) -> None:
    family = derived(name).family
    assert family is not None
    tpl = load_template(FIXTURES / name)
    text, _ = assistant_text(tpl, [USER], [_assistant(CALLS)], PLAIN_TOOLS, call_ids="alnum9")
    whole = _parse(family, text)
    assert len(whole.calls) == 2
    for k in range(0, len(text) + 1, 3):
        assert assemble(_events(family, [text[:k], text[k:]])) == whole, k


NEAR_MISSES = {
    "angle": [
        '<<call get_weather>>{"city": 1',  # truncated
        "<<call get weather>>{}<<end>>",  # a space in the name
        "<<call get_weather>>[1]<<end>>",  # not an object
        "<<call get_weather>>{}<<stop>>",  # the wrong closer
        "<<call " + "n" * 300 + ">>{}<<end>>",  # a name too long
        '<<call f>>{"a": ' + "[" * 200 + "]" * 200 + "}<<end>>",  # too deep
        "<<call>>",
    ],
    "tildes": [
        "@@get_weather\n~city~ Paris",  # the reply ends inside a value
        "@@get_weather\n~city~ Paris ;;\n~city~ Rome ;;\n@@/",  # a key twice
        "@@\n~city~ Paris ;;\n@@/",  # no name
        '~get_weather@@/Paris~@@city{"a": 1} ;;',  # the marker again inside a broken key
        "@@" + "n" * 257 + "\n@@/",  # a name one character too long
    ],
    "semi-list": [
        "CALLS>> []  <<CALLS",  # empty
        'CALLS>> [{"tool": "f", "parameters": {}}] <<DONE',  # the wrong closer
        'CALLS>> [{"name": "f", "parameters": {}}] <<CALLS',  # another shape's key
    ],
    "namespaced": [
        "<tool_calls:x>\n<tool_call:x>get_weather<tool_sep:x>\n<arg_key:x>city</arg_key:x>\n"
        "<arg_value:x>Paris",  # the reply ends inside a value
        "<tool_calls:x>\n<tool_call:y>get_weather<tool_sep:x>\n</tool_call:x>\n"
        "</tool_calls:x>",  # another namespace
        "<tool_calls:x>\n<tool_call:x>get_weather<tool_sep:x>\n<arg_key:x>city</arg_key>\n"
        "<arg_value:x>Paris</arg_value:x>\n</tool_call:x>\n</tool_calls:x>",  # a tag unspaced
    ],
}
NEAR = [(key, reply) for key, replies in NEAR_MISSES.items() for reply in replies]


@pytest.mark.parametrize(("key", "reply"), NEAR)
def test_near_misses_stay_text_with_a_notice(key: str, reply: str) -> None:
    result = _parse(unseen(key), reply)
    assert result.calls == [] and result.content == reply
    assert any("not a call" in n for n in result.notices)
    for k in range(len(reply) + 1):
        assert assemble(_events(unseen(key), [reply[:k], reply[k:]])) == result
    assert assemble(_events(unseen(key), list(reply))) == result


def test_a_name_of_the_longest_length_is_read() -> None:
    name = "n" * 256
    result = _parse(unseen("tildes"), f"@@{name}\n~k~ v ;;\n@@/")
    assert [(c.name, c.arguments) for c in result.calls] == [(name, {"k": "v"})]


def test_text_without_the_marker_is_text() -> None:
    text = "call <get_weather> with {json} @ and CALLS> [1] <<cal"
    for key in UNSEEN:
        assert _parse(unseen(key), text) == ParseResult(text)


def test_reply_size_is_bounded() -> None:
    s = unseen("angle").stream(max_chars=100)
    s.feed("<<call f>>" + "x" * 80)
    with pytest.raises(LimitError):
        s.feed("y" * 20)


def test_a_huge_value_streams_in_linear_pieces() -> None:
    family = unseen("tildes")
    value = "v" * 200_000
    chunks = (
        ["@@f\n~k~ "] + [value[i : i + 1000] for i in range(0, len(value), 1000)] + [" ;;\n@@/"]
    )
    result = assemble(_events(family, chunks))
    assert result.calls[0].arguments == {"k": value}


def test_detect_json_shows_the_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from toolwire.cli import main

    path = tmp_path / "angle.jinja"
    path.write_text(ANGLE, encoding="utf-8")
    main(["detect", "--json", str(path)])
    out = capsys.readouterr().out
    first, rest = out.split("\n", 1)
    data = json.loads(rest)
    assert first == "derived" and data["via"] == "derived"
    assert data["shape"]["kind"] == "name-json" and data["shape"]["opening"] == ["<<call"]
    assert data["shape"]["post"] == ["<<end>>"] and DERIVE_TOOLS[1]["function"]["name"]


#: A template that writes each call as the whole OpenAI call object, its id included.
WHOLE_CALL_OBJECTS = (
    "{%- for m in messages %}{%- if m.tool_calls %}<|assistant|><calls>{{ m.tool_calls | tojson }}"
    "</calls><|end|>\n{% elif m.role == 'tool' %}<|tool|>{{ m.content }}<|end|>\n"
    "{% else %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_call_id_the_template_writes_is_learned_as_any_id() -> None:
    """The id in the framing is the model's own, not the probe's: learned as a slot any id
    fills (kept as the call's id), never as the probe's literal text, which a real model's
    reply would not hold (a claim proved only with the probe's own ids)."""
    found = detect_format(ChatTemplate(WHOLE_CALL_OBJECTS, eos_token="<|end|>"), families=())
    assert found.format == "derived" and found.shape is not None
    assert "ID" in found.shape.describe() and "a1b2c3d4e" not in found.shape.describe()
    family = found.shape.family
    reply = (
        '<calls>[{"id": "call_XyZ123", "type": "function", "function": {"name": "get_weather",'
        ' "arguments": {"city": "Rome"}}}, {"id": "call_2", "type": "function", "function":'
        ' {"name": "get_weather", "arguments": {"city": "Oslo"}}}]</calls>'
    )
    result = family.parse(reply, PLAIN_TOOLS)
    assert [(c.id, c.arguments["city"]) for c in result.calls] == [
        ("call_XyZ123", "Rome"),
        ("call_2", "Oslo"),
    ]
    assert result.content == "" and not result.notices
    # an id no id holds breaks the call: it stays text
    broken = reply.replace("call_XyZ123", "call XyZ")
    assert family.parse(broken, PLAIN_TOOLS).calls == []

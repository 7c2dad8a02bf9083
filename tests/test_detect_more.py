"""Detection of templates that need more than the plain probe.

- DeepSeek R1 Distill Llama writes an assistant's calls only when its content is None, and
  leaves one call's block unclosed.
- Firefunction v2 reads its tools as the variable ``functions`` and the date as ``datetime``,
  as llama.cpp passes them.
- Granite 3.3 never writes an assistant's calls; its prompt with tools states the format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import ChatTemplate, detect_format, family_names, get_family, load_template
from toolwire.events import CallEnd
from toolwire.formats.base import Family, assemble
from toolwire.formats.detect import PROBE_TOOLS

from .prepared import typed
from .test_detect import CALLS, PLAIN_TOOLS, USER

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

R1_DISTILL = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
FIREFUNCTION = "fireworks-ai-llama-3-firefunction-v2.jinja"
GRANITE = "ibm-granite-granite-3.3-2B-Instruct.jinja"

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
WEATHER = f'{CALL_BEGIN}function{SEP}get_weather\n```json\n{{"city": "Paris"}}\n```{CALL_END}'


def template(name: str) -> ChatTemplate:
    return load_template(FIXTURES / name)


def _ids(i: int) -> str:
    return f"id{i}"


def _split_everywhere(family: Family, reply: str, **kw: Any) -> None:
    whole = family.parse(reply, PLAIN_TOOLS, make_id=_ids, **kw)
    for k in range(len(reply) + 1):
        s = family.stream(PLAIN_TOOLS, make_id=_ids, **kw)
        events = s.feed(reply[:k]) + s.feed(reply[k:]) + s.finish()
        assert assemble(events) == whole, k


# ------------------------------------------------------------------ DeepSeek R1 Distill Llama


def test_r1_distill_is_detected_from_a_call_beside_none_content() -> None:
    found = detect_format(template(R1_DISTILL))
    assert (found.format, found.via, found.none_content) == ("deepseek-r1", "probe", True)
    assert found.call_text.startswith(CALLS_BEGIN) and CALLS_END not in found.call_text
    assert found.reasoning_open  # its generation prompt opens <think>


def test_r1_distill_renders_calls_only_beside_none_content() -> None:
    tpl = template(R1_DISTILL)
    turn = {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in CALLS]}
    assert "write_file" not in tpl.render([USER, turn], PLAIN_TOOLS)
    assert "write_file" in tpl.render([USER, turn], PLAIN_TOOLS, keep_call_none=True)


def test_r1_reads_one_call_whose_block_ends_with_the_turn() -> None:
    r1 = get_family("deepseek-r1")
    result = r1.parse(CALLS_BEGIN + WEATHER, PLAIN_TOOLS, make_id=_ids)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.content == "" and not result.notices
    # the closed block reads the same
    assert r1.parse(CALLS_BEGIN + WEATHER + CALLS_END, PLAIN_TOOLS, make_id=_ids) == result
    _split_everywhere(r1, CALLS_BEGIN + WEATHER + "\n")


@pytest.mark.parametrize(
    "reply",
    [
        CALLS_BEGIN + WEATHER + "and then some text",  # text where the next call or end goes
        CALLS_BEGIN + WEATHER + "\n" + CALL_BEGIN,  # a second call begun, never finished
    ],
)
def test_r1_unclosed_block_that_is_no_call_stays_text(reply: str) -> None:
    result = get_family("deepseek-r1").parse(reply, PLAIN_TOOLS, make_id=_ids)
    assert result.calls == [] and result.content == reply and result.notices


@pytest.mark.parametrize(
    "reply",
    [
        CALLS_BEGIN + WEATHER[:-3],  # stops inside the call's closer
        CALLS_BEGIN + WEATHER.replace("```" + CALL_END, ""),  # no closing fence
    ],
)
def test_r1_a_whole_call_the_reply_ended_in_is_a_named_repair(reply: str) -> None:
    """The JSON object closed: only closing words were due (the engine's reading for every
    syntax, tests/test_engine_behaviours.py); strict refuses it."""
    r1 = get_family("deepseek-r1")
    result = r1.parse(reply, PLAIN_TOOLS, make_id=_ids)
    assert [c.name for c in result.calls] == ["get_weather"] and result.content == ""
    assert any("closing words never came" in n for n in result.notices)
    assert r1.parse(reply, PLAIN_TOOLS, strict=True).calls == []


def test_v31_needs_its_closer_when_strict() -> None:
    v31 = f'{CALLS_BEGIN}{CALL_BEGIN}get_weather{SEP}{{"city": "Paris"}}{CALL_END}'
    family = get_family("deepseek-v3.1")
    strict = family.parse(v31, PLAIN_TOOLS, strict=True)
    assert strict.calls == [] and strict.content == v31
    lenient = family.parse(v31, PLAIN_TOOLS)
    assert [c.name for c in lenient.calls] == ["get_weather"] and lenient.notices


def test_r1_distill_round_trip_of_one_call() -> None:
    """The template closes a block only after a second call: one call is the case it leaves
    open, and it reads back."""
    tpl = template(R1_DISTILL)
    call = CALLS[0]
    turn = {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]}
    before = tpl.render([USER], PLAIN_TOOLS)
    text = tpl.render([USER, turn], PLAIN_TOOLS, add_generation_prompt=False, keep_call_none=True)
    reply = text[before.rindex("<｜Assistant｜>") + len("<｜Assistant｜>") :]
    result = get_family("deepseek-r1").parse(reply, PLAIN_TOOLS)
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in result.calls] == [(call.name, call.arguments)]


# llama.cpp's cases for this template (reasoning; the generation prompt opens <think>)
R1_DISTILL_CASES = [
    ("</think>Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?"),
    (
        "I'm\nthinking</think>Hello, world!\nWhat's up?",
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
    ),
]


@pytest.mark.parametrize(("reply", "reasoning", "content"), R1_DISTILL_CASES)
def test_llama_cpp_cases_r1_distill(reply: str, reasoning: str, content: str) -> None:
    result = get_family("deepseek-r1").parse(reply, reasoning_open=True)
    assert (result.reasoning, result.content, result.calls) == (reasoning, content, [])


# ------------------------------------------------------------------ Firefunction v2


def test_firefunction_is_detected() -> None:
    found = detect_format(template(FIREFUNCTION))
    assert (found.format, found.via) == ("firefunction", "probe")
    assert found.call_text.strip().startswith("functools[")


def test_firefunction_reads_its_tools_and_date_as_llama_cpp_passes_them() -> None:
    tpl = template(FIREFUNCTION)
    prompt = tpl.render([USER], PROBE_TOOLS)
    assert json.dumps(PROBE_TOOLS, indent=2) in prompt
    assert "\nToday is " in prompt and " GMT." in prompt
    fixed = ChatTemplate(tpl.source, variables={"datetime": "Jan 02 2026 10:00:00 GMT"})
    assert "Today is Jan 02 2026 10:00:00 GMT." in fixed.render([USER], PROBE_TOOLS)
    # a render keyword wins over both
    assert "Today is X." in fixed.render([USER], PROBE_TOOLS, datetime="X")


def test_only_templates_reading_the_variables_get_them() -> None:
    tpl = ChatTemplate("{{ functions is defined }} {{ datetime is defined }}")
    assert tpl.render([USER], PROBE_TOOLS) == "True True"
    local = ChatTemplate("{% set functions = 'mine' %}{{ functions }}")
    assert local.render([USER], PROBE_TOOLS) == "mine"
    assert ChatTemplate("{{ functions }}").render([USER], None) == ""


FIREFUNCTION_CASES = [  # llama.cpp's cases for this template
    (' functools[{"name": "special_function", "arguments": {"arg1": 1}}]', "", 1),
    ("Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", 0),
]


@pytest.mark.parametrize(("reply", "content", "n"), FIREFUNCTION_CASES)
def test_llama_cpp_cases_firefunction(reply: str, content: str, n: int) -> None:
    tools = [{"type": "function", "function": {"name": "special_function", "parameters": {}}}]
    result = get_family("firefunction").parse(reply, tools)
    assert result.content.strip() == content.strip() and len(result.calls) == n
    if n:
        assert result.calls[0].name == "special_function"
        assert result.calls[0].arguments == {"arg1": 1}


# ------------------------------------------------------------------ Granite 3.3: the prompt


def test_granite_33_is_claimed_from_its_prompt() -> None:
    found = detect_format(template(GRANITE))
    assert (found.format, found.via, found.candidates) == ("granite", "prompt", ("granite",))
    family = found.family
    assert family is not None and family.prompt_markers == ("<|tool_call|>",)


def test_granite_33_replies_read() -> None:
    reply = 'Let me check.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Rome"}}]'
    result = get_family("granite").parse(reply, PLAIN_TOOLS)
    assert result.content == "Let me check." and result.calls[0].arguments == {"city": "Rome"}


_CHAT = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_prompt_marker_counts_only_when_tools_bring_it() -> None:
    with_tools = "{% if tools %}<|system|>Call tools as <|tool_call|>[...]<|end|>{% endif %}"
    found = detect_format(ChatTemplate(with_tools + _CHAT, eos_token="<|end|>"))
    assert (found.format, found.via) == ("granite", "prompt")
    always = "<|system|>Call tools as <|tool_call|>[...]<|end|>"
    found = detect_format(ChatTemplate(always + _CHAT, eos_token="<|end|>"))
    assert (found.format, found.via, found.family) == ("none", "", None)
    # a marker mentioned only in the template's source, never rendered, claims nothing
    hidden = "{% if false %}<|tool_call|>{% endif %}"
    assert detect_format(ChatTemplate(hidden + _CHAT, eos_token="<|end|>")).format == "none"


def test_prompt_claims_only_from_the_given_families() -> None:
    tpl = template(GRANITE)
    assert detect_format(tpl, families=()).format == "none"
    assert detect_format(tpl, families=[get_family("granite")]).via == "prompt"
    assert detect_format(tpl, families=[get_family("hermes")]).format == "none"


def test_lfm2_is_claimed_from_its_prompt_by_its_family_only() -> None:
    """LFM2 8B's template shows no calls; its prompt lists the tools in <|tool_list_start|>,
    which the lfm2 family claims — and nothing else does."""
    tpl = template("LFM2-8B-A1B.jinja")
    assert "<|tool_list_start|>" in tpl.render([USER], PROBE_TOOLS)
    found = detect_format(tpl)
    assert (found.format, found.via) == ("lfm2", "prompt")
    others = [get_family(name) for name in family_names() if name != "lfm2"]
    assert detect_format(tpl, families=others).format == "none"


def test_a_detection_ends_in_a_family_that_streams() -> None:
    for name in (R1_DISTILL, FIREFUNCTION, GRANITE):
        family = detect_format(template(name)).family
        assert family is not None
        events = family.stream(PLAIN_TOOLS).feed("plain text")
        assert not any(isinstance(e, CallEnd) for e in events)


GRANITE_CASES = [  # llama.cpp's cases for this template
    ("Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?"),
    (
        "<think>I'm\nthinking</think>Hello, world!\nWhat's up?",
        "I'm\nthinking",
        "Hello, world!\nWhat's up?",
    ),
]


@pytest.mark.parametrize(("reply", "reasoning", "content"), GRANITE_CASES)
def test_llama_cpp_cases_granite(reply: str, reasoning: str, content: str) -> None:
    result = get_family("granite").parse(reply)
    assert (result.reasoning, result.content, result.calls) == (reasoning, content, [])

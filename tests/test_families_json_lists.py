"""The families that write a marker, then a JSON list of calls: Granite 3.3, Nemotron Nano v2,
Apriel, Apertus, Firefunction v2, Command R7B / Cohere2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire import CallStart, LimitError, family_names, get_family, load_template
from toolwire.formats.detect import assistant_text, detect_format
from toolwire.messages import ToolCall

from .prepared import typed
from .replies import FLAGS, ONE_CALL, TOOLS, WEATHER, WRITE
from .test_formats import check_stream, parse

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

MINE = ["granite", "nemotron-v2", "apriel", "apertus", "firefunction", "command-r7b"]

Call = tuple[str, dict[str, Any]]


def _items(calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    return [{"name": n, "arguments": a} for n, a in calls]


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def granite(*calls: Call) -> str:
    return "<|tool_call|>" + _j(_items(calls))


def nemotron(*calls: Call) -> str:
    return "<TOOLCALL>" + _j(_items(calls)) + "</TOOLCALL>"


def apriel(*calls: Call) -> str:
    return "\n<tool_calls>" + _j(_items(calls)) + "</tool_calls>"


def apertus(*calls: Call) -> str:
    return "<|tools_prefix|>" + _j([{n: a} for n, a in calls]) + "<|tools_suffix|>"


def firefunction(*calls: Call) -> str:
    return " functools" + _j(_items(calls))


def cohere(*calls: Call) -> str:
    items = [
        {"tool_call_id": str(i), "tool_name": n, "parameters": a} for i, (n, a) in enumerate(calls)
    ]
    return "<|START_ACTION|>[\n    " + ",\n    ".join(map(_j, items)) + "\n]<|END_ACTION|>"


WRITERS = {
    "granite": granite,
    "nemotron-v2": nemotron,
    "apriel": apriel,
    "apertus": apertus,
    "firefunction": firefunction,
    "command-r7b": cohere,
}

# family -> (reply, content, calls)
VALID: list[tuple[str, str, str, list[Call]]] = []
for _fam, _write in WRITERS.items():
    _lead = _write(WEATHER)[: len(_write(WEATHER)) - len(_write(WEATHER).lstrip())]
    VALID += [
        (_fam, _write(WEATHER), _lead, [WEATHER]),
        (
            _fam,
            "Let me check. " + _write(WRITE, FLAGS) + "\nDone.",
            "Let me check. " + _lead + "\nDone.",
            [WRITE, FLAGS],
        ),
        (_fam, _write(WEATHER) + _write(FLAGS), _lead + _lead, [WEATHER, FLAGS]),
    ]

NEAR_MISSES: dict[str, list[str]] = {
    "granite": [
        '<|tool_call|>{"name": "get_weather", "arguments": {}}',
        "<|tool_call|>[]",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par',
        '<|tool_call|>[{"name": "get_weather", "args": {}}]',
        '<|tool_call|>[{"name": "get_weather", "arguments": {"a": NaN}}]',
        "<|tool_call|>",
    ],
    "nemotron-v2": [
        '<TOOLCALL>[{"name": "get_weather", "arguments": {}}] x</TOOLCALL>',
        '<TOOLCALL>{"name": "get_weather", "arguments": {}}</TOOLCALL>',
        "<TOOLCALL>[]</TOOLCALL>",
    ],
    "apriel": [
        '<tool_calls>{"name": "get_weather", "arguments": {}}</tool_calls>',
        '<tool_calls>[{"name": "get_weather", "arguments": {}, "extra": 1}]</tool_calls>',
        '<tool_calls>[{"name": "get_weather", "arguments": {}}]</tool_call>',
        '<tool_calls>[{"name": "get_weather", "arguments": {}, "id": 7}]</tool_calls>',
        "<tool_calls>\n- name: get_weather\n  arguments: {}\n</tool_calls>",
    ],
    "apertus": [
        '<|tools_prefix|>[{"name": "get_weather", "arguments": {}}]<|tools_suffix|>',
        '<|tools_prefix|>[{"get_weather": "Paris"}]<|tools_suffix|>',
        '<|tools_prefix|>[{"get_weather": {}, "write_file": {}}]<|tools_suffix|>',
        '<|tools_prefix|>[{"get_weather": {}, "get_weather": {}}]<|tools_suffix|>',
        '<|tools_prefix|>[{"": {}}]<|tools_suffix|>',
        "<|tools_prefix|>[{}]<|tools_suffix|>",
    ],
    "firefunction": [
        'functools[{"name": "get_weather"}]',
        "functools[]",
        'functools["get_weather"]',
        'functools[{"name": "get_weather", "arguments": {}} trailing',
        'functools[{"name": "get_weather", "arguments": {"city": "Par',
    ],
    "command-r7b": [
        '<|START_ACTION|>[{"name": "get_weather", "arguments": {}}]<|END_ACTION|>',
        '<|START_ACTION|>[{"tool_call_id": 0, "tool_name": "get_weather", "parameters": {}}]'
        "<|END_ACTION|>",
        '<|START_ACTION|>[{"tool_name": "get_weather", "parameters": []}]<|END_ACTION|>',
        '<|START_ACTION|>{"tool_name": "get_weather", "parameters": {}}<|END_ACTION|>',
    ],
}

# Text that only looks like a marker's neighbour: no call, no notice.
PLAIN = {
    "firefunction": "import functools\nfunctools.reduce(f, xs)",
    "apriel": "The <tool_call> tag is Hermes's, not Apriel's.",
    "nemotron-v2": "<TOOLCALLS> is not <TOOLCAL",
}

ALL = [(f, r) for f, r, _, _ in VALID] + [(f, r) for f, rs in NEAR_MISSES.items() for r in rs]


def test_registered_after_the_first_four() -> None:
    names = family_names()
    assert names[:4] == ["qwen-xml", "hermes", "llama3", "mistral"]
    assert [n for n in names if n in MINE] == MINE and names.index(MINE[0]) >= 4
    for name in MINE:
        fam = get_family(name)
        assert fam.name == name and fam.label and fam.markers


@pytest.mark.parametrize(("family", "reply", "content", "calls"), VALID)
def test_valid_replies(family: str, reply: str, content: str, calls: list[Call]) -> None:
    result = parse(family, reply)
    assert result.content == content
    assert [(c.name, typed(c)) for c in result.calls] == calls
    for call in result.calls:  # JSON as written is the arguments: nothing typed, nothing left
        assert (call.name, call.arguments) in calls and not call.text_values
        assert json.loads(call.arguments_text) == call.arguments
    assert not result.notices
    # the model's own ids are kept (the Cohere writer writes tool_call_id) while unique in the
    # reply; otherwise toolwire gives its own
    ids = [c.id for c in result.calls]
    assert len(set(ids)) == len(ids)
    if family == "command-r7b":
        assert ids[0] == "0" and all(c in ("0", "1", f"id{i}") for i, c in enumerate(ids))
    else:
        assert ids == [f"id{i}" for i in range(len(calls))]


#: The families whose templates write a call's id after its arguments.
ID_LAST = ["apriel"]


@pytest.mark.parametrize("family", [f for f in MINE if f not in ID_LAST])
def test_a_call_is_announced_once_its_name_is_read(family: str) -> None:
    reply = WRITERS[family](WEATHER, FLAGS)
    cut = reply.index('"Paris') + 3  # inside the first call's arguments
    s = get_family(family).stream(TOOLS)
    events = s.feed(reply[:cut])
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_weather"]
    events += s.feed(reply[cut:]) + s.finish()
    assert [e.name for e in events if isinstance(e, CallStart)] == ["get_weather", "set_flags"]


@pytest.mark.parametrize("family", ID_LAST)
def test_a_call_whose_id_comes_last_is_announced_whole_with_the_model_s_id(family: str) -> None:
    """The id the model wrote is the call's (as llama.cpp keeps it): the call waits for it."""
    items = [{**item, "id": f"{i}a2b3c4d5"} for i, item in enumerate(_items((WEATHER, FLAGS)))]
    reply = WRITERS[family]().replace("[]", _j(items))
    cut = reply.index('"id"')  # the first call's arguments written, its id not yet
    s = get_family(family).stream(TOOLS)
    events = s.feed(reply[:cut])
    assert not [e for e in events if isinstance(e, CallStart)]
    events += s.feed(reply[cut:]) + s.finish()
    starts = [(e.name, e.id) for e in events if isinstance(e, CallStart)]
    assert starts == [("get_weather", "0a2b3c4d5"), ("set_flags", "1a2b3c4d5")]


@pytest.mark.parametrize(("family", "reply"), [(f, r) for f, rs in NEAR_MISSES.items() for r in rs])
def test_near_misses_are_text_with_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert result.calls == []
    assert result.content == reply
    assert any("is not a call" in n for n in result.notices)


@pytest.mark.parametrize(
    ("family", "reply"),
    [
        ("nemotron-v2", '<TOOLCALL>[{"name": "get_weather", "arguments": "{}"}]</TOOLCALL>'),
        ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": "{\\"a\\": 1}"}]'),
    ],
)
def test_arguments_encoded_twice_are_a_named_repair(family: str, reply: str) -> None:
    """The families declared as syntax read a string holding the arguments' JSON object, as
    every JSON syntax does (named; strict refuses it)."""
    result = parse(family, reply)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert isinstance(result.calls[0].arguments, dict)
    assert any("string" in n for n in result.notices), result.notices
    strict = get_family(family).parse(reply, strict=True)
    assert strict.calls == [] and strict.content == reply


@pytest.mark.parametrize(("family", "reply"), sorted(PLAIN.items()))
def test_plain_text_is_text_without_a_notice(family: str, reply: str) -> None:
    result = parse(family, reply)
    assert (result.calls, result.content, result.notices) == ([], reply, [])


@pytest.mark.parametrize("family", MINE)
def test_reply_size_is_bounded(family: str) -> None:
    reply = WRITERS[family](WRITE)
    with pytest.raises(LimitError):
        parse(family, reply, max_chars=len(reply) - 1)
    assert len(parse(family, reply, max_chars=len(reply)).calls) == 1


# ----------------------------------------------------------------- the cross-family matrix

OTHERS = {**ONE_CALL, **{f: [w(WEATHER)] for f, w in WRITERS.items()}}


@pytest.mark.parametrize("family", sorted(set(OTHERS) | set(MINE)))
@pytest.mark.parametrize("other", sorted(OTHERS))
def test_cross_family_matrix(family: str, other: str) -> None:
    if family not in MINE and other not in MINE:
        return  # the first four among themselves: tests/test_formats.py
    for reply in OTHERS[other]:
        result = parse(family, reply)
        if family == other:
            assert [(c.name, typed(c)) for c in result.calls] == [WEATHER], reply
        else:
            assert result.calls == [], (family, reply)
            assert result.content == reply


# ------------------------------------------------------------ round trips through templates

CALLS = [
    ToolCall("call_one", "get_weather", {"city": "Paris", "days": 3}),
    ToolCall("call_two", "set_flags", {"enabled": False, "tags": ["a b"]}),
]
USER = {"role": "user", "content": "Weather in Paris, and set the flags."}
TURN = {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in CALLS]}

TEMPLATES = {
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron-v2",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
    "unsloth-Apriel-1.5.jinja": "apriel",
    "Apertus-8B-Instruct.jinja": "apertus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command-r7b",
    "Cohere2MoE.jinja": "command-r7b",
}


def _check_round_trip(family: str, text: str, opened: bool = False) -> None:
    result = get_family(family).parse(text, TOOLS, reasoning_open=opened)
    assert [(c.name, typed(c)) for c in result.calls] == [(c.name, c.arguments) for c in CALLS]
    assert result.content.strip() == "" and not result.notices


@pytest.mark.parametrize(("name", "family"), sorted(TEMPLATES.items()))
def test_template_round_trip(name: str, family: str) -> None:
    tpl = load_template(FIXTURES / name)
    assert detect_format(tpl).format == family
    text, opened = assistant_text(tpl, [USER], [TURN], TOOLS)
    _check_round_trip(family, text, opened)


def test_firefunction_template_round_trip() -> None:
    # The template reads `functions` and `datetime`, which llama.cpp passes; so does every
    # render now, for a template that reads them (tests/test_detect_more.py).
    tpl = load_template(FIXTURES / "fireworks-ai-llama-3-firefunction-v2.jinja")
    assert detect_format(tpl).format == "firefunction"
    extra = {"functions": json.dumps(TOOLS), "datetime": "2026-01-01"}
    a = tpl.render([USER], TOOLS, add_generation_prompt=True, **extra)
    b = tpl.render([USER, TURN], TOOLS, add_generation_prompt=False, **extra)
    p = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    text = b[p:].split("<|eot_id|>")[0]
    assert text.startswith(" functools[")
    _check_round_trip("firefunction", text)


def test_granite_3_3_template_renders_no_calls() -> None:
    # Granite 3.3's template writes only a message's content: a call it cannot show, the probe
    # cannot learn; its system prompt names the grammar (`<|tool_call|>` then a JSON list),
    # which detection reads as the family's prompt marker.
    tpl = load_template(FIXTURES / "ibm-granite-granite-3.3-2B-Instruct.jinja")
    found = detect_format(tpl)
    assert (found.format, found.via) == ("granite", "prompt")
    assert "get_weather" not in found.call_text
    assert "<|tool_call|> followed by a JSON list" in tpl.render([USER], TOOLS)
    _check_round_trip("granite", granite(*[(c.name, c.arguments) for c in CALLS]))


# ------------------------------------------------------------------ any text, however cut

_PIECES = [
    *(w(WEATHER) for w in WRITERS.values()),
    "<|tool_call|>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<tool_calls>",
    "</tool_calls>",
    "<tool_call>",
    "<|tools_prefix|>",
    "<|tools_suffix|>",
    "functools[",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    '{"name": "get_weather", ',
    '"arguments": {}',
    '"tool_name": "x", "parameters": {}',
    '{"get_weather": {}}',
    "[",
    "]",
    "{",
    "}",
    '"',
    "\\",
    ",",
    " ",
    "\n",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(
    family=st.sampled_from(MINE),
    pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=30),
    data=st.data(),
)
def test_any_text_reads_the_same_however_it_is_cut(
    family: str, pieces: list[str], data: st.DataObject
) -> None:
    reply = "".join(pieces)
    result = parse(family, reply)
    if not result.calls and "<think>" not in reply and "[THINK]" not in reply:
        assert result.content == reply
    cuts = sorted(data.draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    chunks = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)], strict=True)]
    check_stream(family, reply, chunks)

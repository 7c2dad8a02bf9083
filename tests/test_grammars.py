"""Every family's call grammar (GBNF), matched with llguidance against what the family's own
templates render.

For each template of the corpus (tests/fixtures/chat_templates/) whose family detection
finds, the template renders an assistant turn making the probe's two calls (and one call
alone); the call block is cut from the rendering — from where the family's trigger finds the
call's start to the block's end (the turn's end token left out) — and the family's grammar,
built for the rendered tools' schemas, must accept exactly that text, and refuse it with a
wrong tool name, a missing closer, or an argument of the wrong type. With parallel calls off
the grammar takes the one call and refuses the two. Families with no template in the corpus
are proved the same way on a reply written in their grammar, which their own reader reads
back as the two calls first.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from toolwire import family_names, get_family, load_template
from toolwire.errors import TemplateError
from toolwire.formats.detect import (
    COMMON_END_TOKENS,
    DERIVE_CALLS,
    DERIVE_TOOLS,
    _reads,
    _turn,
    assistant_text,
    detect_format,
)
from toolwire.formats.gbnf import Constraint, constraint_for
from toolwire.messages import ToolCall

from . import test_families_peers_new as peers_new

llguidance = pytest.importorskip("llguidance")

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
USER = {"role": "user", "content": "What will the weather be in Paris over the next 3 days?"}
TOKENIZER = llguidance.LLTokenizer("byte")


def matches(grammar: str, text: str) -> bool:
    """Does ``grammar`` take exactly ``text``: every byte of it, and end there?"""
    matcher = llguidance.LLMatcher(TOKENIZER, llguidance.grammar_from("gbnf", grammar))
    assert not matcher.is_error(), matcher.get_error()
    tokens = TOKENIZER.tokenize_str(text)
    return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())


@cache
def detected() -> dict[str, tuple[str, Any]]:
    """Each corpus template a family claims by its probe: its family and detection."""
    out = {}
    for path in sorted(TEMPLATES.glob("*.jinja")):
        found = detect_format(load_template(path))
        if found.via == "probe":
            out[path.name] = (found.format, found)
    return out


def rendered(name: str, calls: tuple[ToolCall, ...]) -> str | None:
    """The assistant text the template writes for ``calls``; None when it writes no call
    of them (it refuses two calls, or writes the first alone)."""
    family_name, found = detected()[name]
    family = get_family(family_name)
    content = None if found.none_content else ""
    try:
        text, _ = assistant_text(
            load_template(TEMPLATES / name),
            [USER],
            _turn(calls, content, False),
            DERIVE_TOOLS,
            call_ids=family.call_ids,
            keep_call_none=found.none_content,
            start=found.start,
        )
    except TemplateError:
        return None
    if not all(c.name in text for c in calls):
        return None
    return text


def cut(constraint: Constraint, text: str) -> tuple[str, str]:
    """The call block of a rendering: from its trigger to its end, end tokens left out;
    and the trigger's form."""
    trigger = constraint.trigger(text)
    if trigger is None or trigger.form == "opening":
        # a family whose form starts the reply only: its own start pattern, else the text
        trigger = constraint.trigger(text.lstrip()) or trigger
        text = text.lstrip()
    assert trigger is not None, f"no trigger in {text!r}"
    return without_ends(text[trigger.at :]), trigger.form


def without_ends(block: str, own: tuple[str, ...] = ()) -> str:
    """A call block without the end tokens after it (the model's, not the grammar's):
    the common ones and a family's ``own``."""
    block = block.rstrip()
    ends = sorted({*COMMON_END_TOKENS, *own}, key=len, reverse=True)
    while any(block.endswith(end) for end in ends):
        end = next(e for e in ends if block.endswith(e))
        block = block[: -len(end)].rstrip()
    return block


def grammar(family: str, *, parallel: bool = True, form: str = "family") -> str:
    constraint = constraint_for(family, DERIVE_TOOLS, parallel=parallel)
    assert constraint is not None
    return constraint.grammar(form)


def broken(block: str) -> dict[str, str]:
    """The same block, malformed three ways (the integer ``days``, or else the boolean
    ``loud``, given a string)."""
    wrong_type = re.sub(r"(days.{0,80}?)3", r'\1"three"', block, count=1, flags=re.S)
    if wrong_type == block:
        wrong_type = re.sub(r"(loud.{0,80}?)[Tt]rue", r'\1"yes"', block, count=1, flags=re.S)
    assert wrong_type != block
    return {
        "wrong name": re.sub(r"get_weather|set_alarm", "get_weathr", block, count=1),
        "missing closer": block[:-1],
        "wrong type": wrong_type,
    }


def _corpus() -> list[str]:
    return sorted(detected())


def renderings(name: str) -> list[str]:
    """The template's two calls, or each call alone when it renders one call a turn."""
    both = rendered(name, DERIVE_CALLS)
    if both is not None:
        return [both]
    return [t for c in DERIVE_CALLS if (t := rendered(name, (c,))) is not None]


@pytest.mark.parametrize("name", _corpus())
def test_the_grammar_takes_what_the_template_renders(name: str) -> None:
    family = detected()[name][0]
    texts = renderings(name)
    assert texts, f"{name} renders no call"
    for text in texts:
        check_rendering(family, text)


def check_rendering(family: str, text: str) -> None:
    constraint = constraint_for(family, DERIVE_TOOLS)
    assert constraint is not None
    block, form = cut(constraint, text)
    assert matches(constraint.grammar(form), block), (family, block)
    # the same from the reply's first token (tool_choice required)
    assert matches(constraint_for(family, DERIVE_TOOLS, required=True).grammar("required"), block)  # type: ignore[union-attr]
    for why, bad in broken(block).items():
        assert not matches(constraint.grammar(form), bad), (why, bad)


@pytest.mark.parametrize("name", _corpus())
def test_one_call_with_parallel_calls_off(name: str) -> None:
    family = detected()[name][0]
    one = rendered(name, DERIVE_CALLS[:1])
    two = rendered(name, DERIVE_CALLS)
    assert one is not None
    single = constraint_for(family, DERIVE_TOOLS, parallel=False)
    assert single is not None
    block, form = cut(single, one)
    assert matches(single.grammar(form), block)
    if two is not None and get_family(family).one_call_per_message is False:
        both, form = cut(single, two)
        assert matches(grammar(family, form=form), both)
        assert not matches(single.grammar(form), both)


def test_every_family_has_a_grammar() -> None:
    missing = [name for name in family_names() if get_family(name).grammar is None]
    assert missing == []


def _args(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def _own() -> dict[str, str]:
    """Replies in the grammar of each family no corpus template renders two calls for,
    written from the family module's own description."""
    a, b = DERIVE_CALLS
    j = {c.name: json.dumps({"name": c.name, "arguments": c.arguments}) for c in DERIVE_CALLS}
    kv = "".join
    hy = {
        c.name: f"<tool_call>{c.name}<tool_sep>\n"
        + kv(
            f"<arg_key>{k}</arg_key>\n<arg_value>"
            f"{v if isinstance(v, str) else json.dumps(v)}</arg_value>\n"
            for k, v in c.arguments.items()
        )
        + "</tool_call>\n"
        for c in DERIVE_CALLS
    }
    inkling = {
        c.name: "<|content_invoke_tool_json|>"
        + json.dumps({"name": c.name, "args": c.arguments})
        + "<|end_message|>"
        for c in DERIVE_CALLS
    }
    # GigaChat 3.5's template (tests/fixtures/unseen_templates/) joins invokes and parameters
    # with line breaks; tests/test_families_gigachat35.py proves the grammar on its rendering
    gcml = {
        c.name: f'<｜GCML｜invoke name="{c.name}">\n'
        + "\n".join(
            f'<｜GCML｜parameter name="{k}" string="{str(isinstance(v, str)).lower()}">'
            f"{v if isinstance(v, str) else json.dumps(v)}</｜GCML｜parameter>"
            for k, v in c.arguments.items()
        )
        + "\n</｜GCML｜invoke>"
        for c in DERIVE_CALLS
    }
    return {
        "gigachat-gcml": "<｜GCML｜tool_calls>\n"
        + gcml[a.name]
        + "\n"
        + gcml[b.name]
        + "\n</｜GCML｜tool_calls>",
        "hunyuan": "<tool_calls>\n" + hy[a.name] + hy[b.name] + "</tool_calls>",
        # HY3's namespaced tags (llama.cpp's tencent-Hy3 template writes them)
        "hunyuan-hy3": "<tool_calls:opensource>\n"
        + re.sub(
            r"<(/?)(tool_call|tool_sep|arg_key|arg_value)>",
            r"<\1\2:opensource>",
            hy[a.name] + hy[b.name],
        )
        + "</tool_calls:opensource>",
        "inkling": inkling[a.name] + "<|message_model|>set_alarm" + inkling[b.name],
        "minimax-m1": f"<tool_calls>\n{j[a.name]}\n{j[b.name]}\n</tool_calls>",
        # vLLM's MiniCPM3 template (tests/fixtures/unseen_templates/), as it renders the calls
        "minicpm3": "<|tool_call_start|>\n```python\n"
        + kv(
            c.name
            + "("
            + ",".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c.arguments.items())
            + ")\n"
            for c in DERIVE_CALLS
        )
        + "```\n<|tool_call_end|>",
        "solar-open": "<|tool_calls|>"
        + kv(
            f"<|tool_call:begin|>{c.id}<|tool_call:name|>{c.name}<|tool_call:args|>"
            f"{_args(c)}<|tool_call:end|>"
            for c in DERIVE_CALLS
        )
        + "<|calls|>",
        "granite": f"<|tool_call|>[{j[a.name]}, {j[b.name]}]",
        "pythonic": "[get_weather(city='Paris', days=3), "
        "set_alarm(time='07:30\\n<b>\"wake\" & go</b>', loud=True)]",
        "llama3": "<|python_tag|>"
        + json.dumps({"name": a.name, "parameters": a.arguments})
        + "; "
        + json.dumps({"name": b.name, "parameters": b.arguments}),
        "gigachat": f"<|function_call|>{j[a.name]}<|function_call|>{j[b.name]}",
        "gpt-oss": "<|channel|>commentary to=functions.get_weather <|constrain|>json"
        f"<|message|>{_args(a)}",
        # the families declared from the start, each as its peers' parser tests write it
        "internlm2": kv(
            "<|action_start|><|plugin|>\n"
            + json.dumps({"name": c.name, "parameters": c.arguments})
            + "<|action_end|>"
            for c in DERIVE_CALLS
        ),
        "longcat": kv(f"<longcat_tool_call>{j[c.name]}</longcat_tool_call>" for c in DERIVE_CALLS),
        "step3": "<｜tool_calls_begin｜>"
        + kv(
            f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{c.name}">'
            + kv(
                f'<steptml:parameter name="{k}">'
                f"{v if isinstance(v, str) else json.dumps(v)}</steptml:parameter>"
                for k, v in c.arguments.items()
            )
            + "</steptml:invoke><｜tool_call_end｜>"
            for c in DERIVE_CALLS
        )
        + "<｜tool_calls_end｜>",
        "functiongemma": kv(
            f"<start_function_call>call:{c.name}{{"
            + ",".join(
                f"{k}:<escape>{v}<escape>" if isinstance(v, str) else f"{k}:{json.dumps(v)}"
                for k, v in sorted(c.arguments.items())
            )
            + "}<end_function_call>"
            for c in DERIVE_CALLS
        ),
        "olmo3": "<function_calls>\n"
        + kv(
            c.name + "(" + ", ".join(f"{k}={v!r}" for k, v in c.arguments.items()) + ")\n"
            for c in DERIVE_CALLS
        )
        + "</function_calls>",
        # SGLang's tagged dialects, as its multi-format reader's tests write them
        "tagged-pythonic": "<tool_call>\n"
        + kv(
            c.name + "(" + ", ".join(f"{k}={v!r}" for k, v in c.arguments.items()) + ")\n"
            for c in DERIVE_CALLS
        )
        + "</tool_call>",
        "k2v3-ifm": "<ifm|tool_calls>\n"
        + kv(
            f"<ifm|tool_call>{c.name}"
            + kv(
                f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>"
                f"{v if isinstance(v, str) else json.dumps(v)}</ifm|arg_value>"
                for k, v in c.arguments.items()
            )
            + "</ifm|tool_call>\n"
            for c in DERIVE_CALLS
        )
        + "</ifm|tool_calls>",
        "invoke-xml": "<tool_calls>"
        + kv(
            f'<invoke name="{c.name}">'
            + kv(
                f'<parameter name="{k}" string="{str(isinstance(v, str)).lower()}">'
                f"{v if isinstance(v, str) else json.dumps(v)}</parameter>"
                for k, v in c.arguments.items()
            )
            + "</invoke>"
            for c in DERIVE_CALLS
        )
        + "</tool_calls>",
        "xlam": "["
        + ", ".join(json.dumps({"name": c.name, "arguments": c.arguments}) for c in DERIVE_CALLS)
        + "]",
        "tagged-harmony": kv(
            f"<tool_call>assistant to=functions.{c.name} json\n{_args(c)}\n</tool_call>"
            for c in DERIVE_CALLS
        ),
        # the families declared from the peers' readers, as tests/test_families_peers_new.py
        # writes them by hand from those readers
        **{
            name: writer(*((c.name, c.arguments) for c in DERIVE_CALLS))
            for name, writer in peers_new.WRITERS.items()
        },
    }


@pytest.mark.parametrize(("family", "reply"), sorted(_own().items()))
def test_families_without_a_corpus_rendering(family: str, reply: str) -> None:
    family = family.removesuffix("-hy3")
    calls = DERIVE_CALLS[:1] if family == "gpt-oss" else DERIVE_CALLS
    assert _reads(get_family(family), reply, False, calls), "the family's own reader"
    constraint = constraint_for(family, DERIVE_TOOLS)
    assert constraint is not None
    block, form = cut(constraint, reply)
    assert matches(constraint.grammar(form), block), block
    for why, bad in broken(block).items():
        assert not matches(constraint.grammar(form), bad), (why, bad)


# ------------------------------------------------------------------ learned shapes


def _learned() -> list[str]:
    from .test_derived import DEVELOPMENT, HELD_OUT, UNSEEN

    return sorted({**DEVELOPMENT, **HELD_OUT}) + sorted(UNSEEN)


@pytest.mark.parametrize("name", _learned())
def test_a_learned_shape_s_grammar_takes_what_its_template_renders(name: str) -> None:
    """Every learned shape has a grammar too: the family derivation builds for a template
    no family reads (here: derived from each template as if no family were registered)."""
    from toolwire import ChatTemplate

    from .test_derived import UNSEEN

    if name in UNSEEN:
        template = ChatTemplate(UNSEEN[name], eos_token="<|end|>")
    else:
        template = load_template(TEMPLATES / name)
    found = detect_format(template, families=())
    family = found.family
    assert family is not None and family.grammar is not None and found.shape is not None
    text, _ = assistant_text(
        template,
        [USER],
        _turn(DERIVE_CALLS, None if found.none_content else "", False),
        DERIVE_TOOLS,
        call_ids=family.call_ids,
        keep_call_none=found.none_content,
        start=found.start,
    )
    constraint = constraint_for(family, DERIVE_TOOLS)
    assert constraint is not None
    block, form = cut(constraint, text)
    assert matches(constraint.grammar(form), block), (found.shape.describe(), block)
    for why, bad in broken(block).items():
        assert not matches(constraint.grammar(form), bad), (why, bad)


NOTE = {
    "type": "function",
    "function": {
        "name": "save_note",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "meta": {"type": "object", "properties": {"pinned": {"type": "boolean"}}},
                "extra": {},
            },
            "required": ["title", "tags"],
        },
    },
}


@pytest.mark.parametrize(
    ("reply", "taken"),
    [
        ('call:save_note{tags:[<|"|>a<|"|>,<|"|>b<|"|>],title:<|"|>x<|"|>}', True),
        (
            'call:save_note{extra:{a:[1,<|"|>q<|"|>]},meta:{pinned:true},tags:[],title:<|"|>x<|"|>}',
            True,
        ),
        ('call:save_note{tags:["a"],title:<|"|>x<|"|>}', False),  # a JSON string is not Gemma's
        ('call:save_note{title:<|"|>x<|"|>}', False),  # a required argument left out
    ],
)
def test_gemma_s_nested_values_are_its_own_syntax(reply: str, taken: bool) -> None:
    """Lists and mappings inside Gemma 4's arguments are written in its own literal syntax,
    which its reader reads: a grammar of JSON there would make calls the family cannot read."""
    reply = f"<|tool_call>{reply}<tool_call|>"
    constraint = constraint_for("gemma4", [NOTE])
    assert constraint is not None
    assert matches(constraint.grammar("family"), reply) is taken
    if taken:
        assert len(get_family("gemma4").parse(reply, [NOTE]).calls) == 1


def test_every_family_s_grammar_is_proved_on_a_rendering() -> None:
    """Each registered family is proved above: on its corpus templates, or on a reply in
    its own grammar."""
    proved = {family for family, _ in detected().values()} | {
        name.removesuffix("-hy3") for name in _own()
    }
    assert set(family_names()) - proved == set()


def test_a_json_string_holds_no_raw_control_character() -> None:
    """Under the grammar a call is strict JSON: a raw line break inside a string (which a
    reader takes only as a tolerance) is refused, its escape taken."""
    g = grammar("hermes")
    call = '<tool_call>{"name": "set_alarm", "arguments": {"time": "07:30%s"}}</tool_call>'
    assert matches(g, call % "\\n")
    assert not matches(g, call % "\n")
    assert not matches(g, call % "\t")


@pytest.mark.parametrize(
    ("reply", "taken"),
    [
        ("[save_note(title='x', tags=['a', \"b\"])]", True),
        ("[save_note(title='x', tags=[], meta={'pinned': True}, extra={'a': [1, None]})]", True),
        ("[save_note(title='x', tags=[], meta={'pinned': true})]", False),  # JSON's true
        ("[save_note(tags=[])]", False),  # a required argument left out
    ],
)
def test_python_nested_values_are_python_literals(reply: str, taken: bool) -> None:
    """Inside a Python call, lists and dicts are Python literals too, as the family's reader
    reads them: ``True`` and ``None``, not JSON's ``true`` and ``null``."""
    constraint = constraint_for("pythonic", [NOTE])
    assert constraint is not None
    assert matches(constraint.grammar("start"), reply) is taken
    if taken:
        assert len(get_family("pythonic").parse(reply, [NOTE]).calls) == 1


@pytest.mark.parametrize(
    ("value", "taken"),
    [
        ("\nParis\n", True),
        ("Paris", True),
        ("07:30\n<b>wake</b>", True),  # markup of the value's own is text
        ("\n    Paris\n  ", False),  # an indent would be the value's text
        ("Paris</function>", False),  # the form's own tags are never a value's text
        ("Paris<parameter=days>", False),
        ("\n</tool_call >\n", False),  # a tag of the form's, however it ends
        ("Paris</parameter name>", False),  # the closer's own name ends only as the closer
    ],
)
def test_a_string_between_tags_is_text_not_the_form_s_markup(value: str, taken: bool) -> None:
    reply = (
        "<tool_call>\n<function=get_weather>\n"
        f"<parameter=city>{value}</parameter>\n</function>\n</tool_call>"
    )
    assert matches(grammar("qwen-xml"), reply) is taken


@pytest.mark.parametrize(
    "block",
    [
        # vLLM's Hermes template: "arguments" before "name", a space before the line break
        '<tool_call>\n{ "arguments": {"city": "Paris", "days": 3}, "name": "get_weather"}\n'
        '</tool_call> \n<tool_call>\n{"name": "set_alarm", "arguments": {"time": "07:30"}}\n'
        "</tool_call>",
        # a run of spaces, then the next call on its own line
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
        '        \n<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
    ],
)
def test_json_members_in_either_order_and_white_space_as_templates_write_it(block: str) -> None:
    assert matches(grammar("hermes"), block)
    assert not matches(grammar("hermes"), block.replace('"name"', '"nam"', 1))


@pytest.mark.parametrize("typed", [False, True])
def test_a_value_s_type_tag_may_be_written_under_the_grammar(typed: bool) -> None:
    """K2 Horizon's ``<ifm|arg_type>`` before a value: its grammar takes a call with it
    (the schema's type between the tags) and without, and no other type."""
    kind = "<ifm|arg_type>string</ifm|arg_type>" if typed else ""
    reply = (
        f"<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>{kind}"
        "<ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"
    )
    weather = {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    constraint = constraint_for("k2v3-ifm", [{"type": "function", "function": weather}])
    assert constraint is not None
    assert matches(constraint.grammar("family"), reply)
    wrong = reply.replace("string</ifm", "integer</ifm") if typed else reply + "x"
    assert not matches(constraint.grammar("family"), wrong)

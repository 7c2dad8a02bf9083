"""The families that write a call's name before a JSON object of its arguments, declared as
syntax values (:mod:`.syntax`): DeepSeek R1 and V3.1, Solar Open, SGLang's tagged Harmony
dialect and Functionary; and DeepSeek's DSML grammar (V3.2, V4, GigaChat 3.5). Gathered with
the others in :mod:`.declared`.
"""

from __future__ import annotations

from .derived import CALL_ID, NUMBER, DerivedShape
from .reasoning import THINK, ReasoningTags
from .syntax import TOOL_RESPONSE, Syntax

__all__ = [
    "DEEPSEEK_DSML",
    "DEEPSEEK_R1",
    "DEEPSEEK_V31",
    "FUNCTIONARY_V31",
    "FUNCTIONARY_V32",
    "GIGACHAT_GCML",
    "KIMI_K2",
    "MINIMAX_M3",
    "SOLAR_OPEN",
    "TAGGED_HARMONY",
]

_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"

_CALLS_END = "<｜tool▁calls▁end｜>"

_CALL_BEGIN = "<｜tool▁call▁begin｜>"

_CALL_END = "<｜tool▁call▁end｜>"

_R1_TYPE = "function<｜tool▁sep｜>"

#: DeepSeek R1 and its distills: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>``
#: ``function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>``. The
#: templates close the block only after a second call, so one call's turn ends right after
#: its ``<｜tool▁call▁end｜>``: that is the family's grammar, not a repair.
#: How DeepSeek's templates frame the tools' results (R1's and V3's; V3.1's the inner pair).
_DEEPSEEK_OUTPUTS = (
    ("<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"),
    ("<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"),
)

DEEPSEEK_R1 = Syntax(
    name="deepseek-r1",
    tool_outputs=_DEEPSEEK_OUTPUTS,
    label="DeepSeek R1 function<｜tool▁sep｜>NAME + fenced JSON (DeepSeek R1 and its distills)",
    shape=DerivedShape(
        kind="name-json",
        opening=(_CALLS_BEGIN, _CALL_BEGIN, _R1_TYPE),
        name_end=("```json",),
        post=("```", _CALL_END),
        next_call=(_CALL_BEGIN, _R1_TYPE),
        trail=(_CALLS_END,),
        ends_with_turn=True,
    ),
    reasoning=THINK,
    end_tokens=("<｜end▁of▁sentence｜>",),
)

#: DeepSeek V3.1: R1's block without the type and the fence,
#: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>``.
DEEPSEEK_V31 = Syntax(
    name="deepseek-v3.1",
    tool_outputs=_DEEPSEEK_OUTPUTS,
    label="DeepSeek V3.1 NAME<｜tool▁sep｜>JSON (DeepSeek V3.1)",
    shape=DerivedShape(
        kind="name-json",
        opening=(_CALLS_BEGIN, _CALL_BEGIN),
        name_end=("<｜tool▁sep｜>",),
        post=(_CALL_END,),
        next_call=(_CALL_BEGIN,),
        trail=(_CALLS_END,),
    ),
    reasoning=THINK,
    end_tokens=("<｜end▁of▁sentence｜>",),
)


_SOLAR_CALL = ("<|tool_call:begin|>", CALL_ID, "<|tool_call:name|>")

#: Solar Open (Upstage): ``<|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME``
#: ``<|tool_call:args|>{...}<|tool_call:end|>``, each call's part repeated, and ``<|calls|>``,
#: with which the template ends a turn of calls, after the last (the reply may stop before it:
#: text after a call is reply text). The model's id is kept (a fresh one when it writes none).
SOLAR_OPEN = Syntax(
    name="solar-open",
    label=(
        "Solar Open <|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...} (Solar Open)"
    ),
    shape=DerivedShape(
        kind="name-json",
        opening=("<|tool_calls|>", *_SOLAR_CALL),
        name_end=("<|tool_call:args|>",),
        post=("<|tool_call:end|>",),
        next_call=_SOLAR_CALL,
        trail=("<|calls|>",),
        trail_optional=True,
    ),
)


def _tagged_harmony(lead: tuple[str, ...], name_end: tuple[str, ...]) -> DerivedShape:
    """A Harmony header in Qwen's tags, with or without its ``assistant`` and ``json``."""
    opening = ("<tool_call>", *lead, "to=functions.")
    return DerivedShape(
        kind="name-json",
        opening=opening,
        name_end=name_end,
        post=("</tool_call>",),
        next_call=opening,
    )


#: SGLang's tagged Harmony dialect: ``<tool_call>assistant to=functions.NAME json\n{...}``
#: ``\n</tool_call>``, gpt-oss's call header and JSON arguments in Qwen's tags; ``assistant``
#: and ``json`` may each be left out (four forms, the words after the marker and after the
#: name telling them apart).
TAGGED_HARMONY = Syntax(
    name="tagged-harmony",
    tool_outputs=TOOL_RESPONSE,
    label="Harmony to=functions.NAME in <tool_call> (models served with SGLang's"
    " multi-format reader)",
    shape=_tagged_harmony(("assistant",), ("json",)),
    also=(
        _tagged_harmony(("assistant",), ()),
        _tagged_harmony((), ("json",)),
        _tagged_harmony((), ()),
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)


_FUNCTION = "<function="

#: Functionary v3.1 (MeetKai, Llama 3.1 based): ``<function=NAME>{...}</function>``, several in
#: a row. The template writes a call to a tool named ``python`` as ``<|python_tag|>`` and
#: then the code itself, up to ``<|eom_id|>`` or the reply's end: a form of its own, read only
#: when a ``python`` tool is declared (the code interpreter its "Environment: ipython" line
#: announces), ``{"code": CODE}``; a JSON object there is the arguments.
FUNCTIONARY_V31 = Syntax(
    name="functionary-v3.1",
    label="Functionary <function=NAME>{...}</function> (Functionary v3.1 Llama 3.1)",
    shape=DerivedShape(
        kind="name-json",
        opening=(_FUNCTION,),
        name_end=(">",),
        post=("</function>",),
        next_call=(_FUNCTION,),
    ),
    also=(
        DerivedShape(
            kind="code", opening=("<|python_tag|>",), post=("<|eom_id|>",), code=("python", "code")
        ),
    ),
    end_tokens=("<|eot_id|>", "<|eom_id|>"),
)

#: Functionary v3.2: ``>>>NAME\n{...}``, repeated; ``>>>all\n`` opens text for the user. The
#: generation prompt ends with ``>>>``, so a reply starts with the recipient itself
#: (``get_weather\n{...}`` or ``all\nHello``); one that opens with no declared tool's name and
#: arguments there is prose. The recipient ``python`` takes raw code in v3.2: not read.
FUNCTIONARY_V32 = Syntax(
    name="functionary-v3.2",
    label="Functionary >>>NAME\\n{...} (Functionary v3.2)",
    shape=DerivedShape(
        kind="name-json",
        opening=(">>>",),
        name_end=("\n",),
        next_call=(">>>",),
        text_recipients=("all",),
    ),
    end_tokens=("<|eot_id|>",),
    primed=True,
)


_K2_CALL = ("<|tool_call_begin|>", "functions.")

#: Kimi K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0``
#: ``<|tool_call_argument_begin|>{...}<|tool_call_end|>…<|tool_calls_section_end|>``. The id
#: the model writes names the tool and is kept as the call's (its templates read a call's
#: tool back from it: a conversation's ids are reshaped so). Kimi K2 Thinking writes calls
#: with no section around them, and ids without their ``functions.`` (or only the counter:
#: the call is then to the one declared tool its arguments fit), each read, named.
KIMI_K2 = Syntax(
    name="kimi-k2",
    label="Kimi K2 <|tool_calls_section_begin|> functions.NAME:N + JSON (Kimi K2)",
    shape=DerivedShape(
        kind="name-json",
        opening=("<|tool_calls_section_begin|>", *_K2_CALL),
        left_out=1,
        name_end=(":", NUMBER, "<|tool_call_argument_begin|>"),
        post=("<|tool_call_end|>",),
        next_call=_K2_CALL,
        trail=("<|tool_calls_section_end|>",),
        id_words=True,
    ),
    reasoning=THINK,
    call_ids="functions",
)


def _dsml(word: str, block: str) -> DerivedShape:
    """DSML's calls block under the prefix ``<｜word｜`` (``DSML``, ``GCML``), opened by
    ``block``."""
    m = f"<｜{word}｜"
    return DerivedShape(
        kind="tags",
        opening=(m, f"{block}>", f"{m}invoke", 'name="'),
        left_out=2,
        name_end=('">',),
        key_open=(f"{m}parameter", 'name="'),
        key_mid=('">',),
        value_end=(f"</｜{word}｜parameter>",),
        post=(f"</｜{word}｜invoke>",),
        next_call=(f"{m}invoke", 'name="'),
        trail=(f"</｜{word}｜{block}>",),
        type_attr="string",
        damaged_opening=True,
    )


def _dsml_spaced(word: str, block: str) -> DerivedShape:
    """DSML's calls block as DeepSeek V4.1 writes it, a space after the prefix of every tag
    (``<｜DSML｜ calls>``, ``<｜DSML｜ invoke name="NAME">``, ``</｜DSML｜ parameter>``): the
    prefix a word of its own, so the space is the white space between two words."""
    m, c = f"<｜{word}｜", f"</｜{word}｜"
    return DerivedShape(
        kind="tags",
        opening=(m, f"{block}>", m, "invoke", 'name="'),
        name_end=('">',),
        key_open=(m, "parameter", 'name="'),
        key_mid=('">',),
        value_end=(c, "parameter>"),
        post=(c, "invoke>"),
        next_call=(m, "invoke", 'name="'),
        trail=(c, f"{block}>"),
        type_attr="string",
    )


#: DeepSeek V3.2 and V4 "DSML": ``<｜DSML｜function_calls>`` (V3.2; V4 writes ``tool_calls``)
#: holding ``<｜DSML｜invoke name="NAME">`` calls, each value in ``<｜DSML｜parameter name="K"``
#: ``string="true|false">V</｜DSML｜parameter>``: ``true``, the text exactly; ``false``, JSON
#: (the grammar's own types, read strictly). What V4 writes besides, as SGLang reads it: an
#: invoke with no calls block around it (a declared tool's), a damaged block tag, an invoke
#: closed in its own tag, its arguments as one JSON object; DSML quoted in a code fence is
#: prose. V4.1 writes its block ``calls`` and a space after the prefix of every tag
#: (``<｜DSML｜ invoke name="NAME">``), as its template in llama.cpp's forks does.
DEEPSEEK_DSML = Syntax(
    name="deepseek-dsml",
    label="DeepSeek DSML <｜DSML｜invoke>/<｜DSML｜parameter> (DeepSeek V3.2, V4, V4.1)",
    shape=_dsml("DSML", "tool_calls"),
    also=(_dsml("DSML", "function_calls"), _dsml_spaced("DSML", "calls")),
    reasoning=THINK,
    end_tokens=("<｜end▁of▁sentence｜>",),
    quoted_in_fences=True,
)

#: GigaChat 3.5 "GCML": DSML's grammar under ``<｜GCML｜``, its block ``tool_calls`` only, its
#: turn ended by ``</s>``; a block opened with one prefix is never closed with the other's.
GIGACHAT_GCML = Syntax(
    name="gigachat-gcml",
    label="GigaChat GCML <｜GCML｜invoke>/<｜GCML｜parameter> (GigaChat 3.5)",
    shape=_dsml("GCML", "tool_calls"),
    reasoning=THINK,
    end_tokens=("</s>",),
    quoted_in_fences=True,
)

_NS = "]<]minimax[>["

#: MiniMax M3: every tag prefixed by the ``]<]minimax[>[`` token (``NS``), one block of calls,
#: ``NS<tool_call>\nNS<invoke name="NAME">NS<KEY>VALUE NS</KEY>…NS</invoke>\nNS</tool_call>``.
#: A parameter's tag is its name, and its value text or, for an object or a list, nested
#: elements (:mod:`.elements`). Thinking is ``<mm:think>…</mm:think>`` at the reply's start;
#: a turn without it starts with a bare ``</mm:think>``, which is no text.
MINIMAX_M3 = Syntax(
    name="minimax-m3",
    label="MiniMax M3 ]<]minimax[>[<invoke name=…> with nested XML arguments (MiniMax M3)",
    shape=DerivedShape(
        kind="tags",
        opening=(_NS + "<tool_call>", _NS + "<invoke", 'name="'),
        name_end=('">',),
        key_open=(_NS + "<",),
        key_mid=(">",),
        value_end=(_NS + "</{key}>",),
        post=(_NS + "</invoke>",),
        next_call=(_NS + "<invoke", 'name="'),
        trail=(_NS + "</tool_call>",),
        nested=True,
    ),
    reasoning=ReasoningTags(blocks={"<mm:think>": "</mm:think>"}),
)

"""The families declared as syntax values (:mod:`.syntax`), moved here one at a time.

Each declaration runs beside its family's hand-written reader over every corpus
(``tests/test_declared.py``: the peers' parser cases, the family's own sample calls, every
split point of a streamed reply) until the two agree event for event, notices included; then
it replaces the hand-written family in the registry (every one here has). Until then the registry
keeps the hand-written reader, and the declaration is read by the tests only. The families
whose calls are JSON objects are declared in :mod:`.declared_json`; the others (tagged
arguments, a name before its arguments, Python calls, literal mappings) here.
"""

from __future__ import annotations

from dataclasses import replace

from .declared_json import (
    APERTUS,
    APRIEL,
    COMMAND_R7B,
    COMMAND_R_PLUS,
    FIREFUNCTION,
    GIGACHAT,
    GRANITE,
    HERMES,
    INTERNLM2,
    LLAMA3,
    LONGCAT,
    MINIMAX_M1,
    MISTRAL,
    NEMOTRON_V2,
    XLAM,
)
from .declared_named import (
    DEEPSEEK_DSML,
    DEEPSEEK_R1,
    DEEPSEEK_V31,
    FUNCTIONARY_V31,
    FUNCTIONARY_V32,
    GIGACHAT_GCML,
    KIMI_K2,
    MINIMAX_M3,
    SOLAR_OPEN,
    TAGGED_HARMONY,
)
from .declared_peers import (
    DOTS,
    GRANITE_20B,
    IQUEST,
    OPENPANGU,
    PLAMO3,
    QWEN25_CODER,
    RWKV,
    SOLAR_OPEN2,
    STEP_AUDIO2,
    TELECHAT4,
)
from .derived import DerivedShape
from .gemma_channel import GemmaChannel
from .reasoning import THINK, ReasoningTags
from .syntax import TOOL_RESPONSE, Syntax

__all__ = [
    "APERTUS",
    "APRIEL",
    "COMMAND_R7B",
    "COMMAND_R_PLUS",
    "DECLARED",
    "DEEPSEEK_DSML",
    "DEEPSEEK_R1",
    "DEEPSEEK_V31",
    "DOTS",
    "FIREFUNCTION",
    "FUNCTIONARY_V31",
    "FUNCTIONARY_V32",
    "FUNCTION_GEMMA",
    "GEMMA4",
    "GIGACHAT",
    "GIGACHAT_GCML",
    "GLM",
    "GRANITE",
    "GRANITE_20B",
    "HERMES",
    "HUNYUAN",
    "INTERNLM2",
    "INVOKE_XML",
    "IQUEST",
    "K2V3_IFM",
    "KIMI_K2",
    "LFM2",
    "LLAMA3",
    "LONGCAT",
    "MINICPM3",
    "MINICPM5",
    "MINIMAX",
    "MINIMAX_M1",
    "MINIMAX_M3",
    "MISTRAL",
    "NEMOTRON_V2",
    "OLMO3",
    "OPENPANGU",
    "PLAMO3",
    "PYTHONIC",
    "QWEN25_CODER",
    "QWEN_XML",
    "RWKV",
    "SEED_OSS",
    "SOLAR_OPEN",
    "SOLAR_OPEN2",
    "STEP3",
    "STEP_AUDIO2",
    "TAGGED_HARMONY",
    "TAGGED_PYTHONIC",
    "TELECHAT4",
    "XLAM",
]

#: GLM: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>``, written
#: by GLM 4.5/4.6/4.7 (a newline after the name and between the tags) and poolside Laguna (the
#: same tags, with or without the newlines). Each value is the text between its tags: the
#: templates write strings as they are and other values as their JSON (the argument pipeline
#: types each by the tool's schema). What GLM models write besides (a value as a JSON string
#: or as JSON with its quotes escaped, a key with no value, newlines between the tags written
#: as ``\\n``) the engine reads for every tagged syntax, each repair named.
GLM = Syntax(
    name="glm",
    tool_outputs=TOOL_RESPONSE,
    label="GLM <tool_call>NAME<arg_key>…<arg_value>… (GLM 4.5/4.6/4.7, poolside Laguna)",
    shape=DerivedShape(
        kind="tags",
        opening=("<tool_call>",),
        key_open=("<arg_key>",),
        key_mid=("</arg_key>", "<arg_value>"),
        value_end=("</arg_value>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
    ),
    reasoning=THINK,
    end_tokens=("</assistant>",),  # poolside Laguna
)

#: Qwen XML: ``<tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>``
#: ``\n</tool_call>``, a block a call (Qwen3-Coder, Qwen3.5/3.6, Nemotron-3-Nano). A value is
#: the text between its tags less the newline the template writes on each side, kept as
#: written, quotes and all (llama.cpp's tests keep ``"foo"`` quoted), typed by the tool's
#: schema. Qwen3-Coder leaves ``<tool_call>`` out, or both tags (vLLM and SGLang read it):
#: ``left_out`` reads such a call when its ``</tool_call>`` confirms it, or, bare, when it names
#: a declared tool and the reply ends or another such call follows.
QWEN_XML = Syntax(
    name="qwen-xml",
    tool_outputs=TOOL_RESPONSE,
    label="Qwen XML <function=…><parameter=…> (Qwen3-Coder, Qwen3.5/3.6, Nemotron-3-Nano)",
    shape=DerivedShape(
        kind="tags",
        opening=("<tool_call>", "<function="),
        left_out=1,
        name_end=(">",),
        key_open=("<parameter=",),
        key_mid=(">",),
        value_lead="\n",
        value_end=("</parameter>",),
        value_tail="\n",
        verbatim=True,
        post=("</function>", "</tool_call>"),
        next_call=("<tool_call>", "<function="),
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)

#: Seed-OSS: ``<seed:tool_call>\n<function=NAME>\n<parameter=K>V</parameter>\n</function>``
#: ``\n</seed:tool_call>``, one block a call. A value is every character between its tags,
#: newlines included (the template writes it right against them): strings as they are,
#: others through Jinja's ``string`` (``True``, Python's lists), typed by the tool's schema.
#: Thinking is ``<seed:think>…</seed:think>``; with a thinking budget the model reflects on
#: it inside the block (``<seed:cot_budget_reflect>…``), kept verbatim as reasoning.
SEED_OSS = Syntax(
    name="seed-oss",
    label="Seed-OSS <seed:tool_call><function=…><parameter=…> (ByteDance Seed-OSS)",
    shape=DerivedShape(
        kind="tags",
        opening=("<seed:tool_call>", "<function="),
        name_end=(">",),
        key_open=("<parameter=",),
        key_mid=(">",),
        value_end=("</parameter>",),
        post=("</function>", "</seed:tool_call>"),
        next_call=("<seed:tool_call>", "<function="),
    ),
    reasoning=ReasoningTags(blocks={"<seed:think>": "</seed:think>"}),
    end_tokens=("<seed:eos>",),
)

#: MiniMax M2: ``<minimax:tool_call>\n<invoke name="NAME">\n<parameter name="K">V</parameter>``
#: ``\n</invoke>\n</minimax:tool_call>``, one block holding every call of the turn. A value
#: is the text between its tags: strings as they are, other values as their JSON. Attributes a
#: model adds beside a name (``description="…"``, ``type="string"``) the engine reads past for
#: every syntax that writes a name as an attribute, named.
MINIMAX = Syntax(
    name="minimax",
    label="MiniMax <minimax:tool_call><invoke name=…><parameter name=…> (MiniMax M2)",
    shape=DerivedShape(
        kind="tags",
        opening=("<minimax:tool_call>", "<invoke", 'name="'),
        name_end=('">',),
        key_open=("<parameter", 'name="'),
        key_mid=('">',),
        value_end=("</parameter>",),
        post=("</invoke>",),
        next_call=("<invoke", 'name="'),
        trail=("</minimax:tool_call>",),
    ),
    reasoning=THINK,
    end_tokens=("[e~[",),
)

#: MiniCPM5 (and MiniCPM4, in the same grammar): ``<function name="NAME"><param name="K">V``
#: ``</param>…</function>``, no wrapping tag, each call written anywhere in the reply. A value is
#: the text between its tags; a string holding ``<``, ``&`` or a line break is wrapped in
#: ``<![CDATA[…]]>``, whose inside is the value (so it may hold ``</param>``). Other values are
#: Jinja's rendering (``True``, Python's lists), typed by the tool's schema.
MINICPM5 = Syntax(
    name="minicpm5",
    tool_outputs=TOOL_RESPONSE,
    label="MiniCPM5 <function name=…><param name=…> (openbmb MiniCPM5)",
    shape=DerivedShape(
        kind="tags",
        opening=('<function name="',),
        name_end=('">',),
        key_open=("<param", 'name="'),
        key_mid=('">',),
        value_end=("</param>",),
        post=("</function>",),
        next_call=('<function name="',),
        cdata=True,
    ),
    reasoning=THINK,
)

_STEP_INVOKE = ("<｜tool_call_begin｜>", "function<｜tool_sep｜>", "<steptml:invoke", 'name="')

#: Step3 (StepFun): ``<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>``
#: ``<steptml:invoke name="NAME"><steptml:parameter name="K">V</steptml:parameter>…``
#: ``</steptml:invoke><｜tool_call_end｜>…<｜tool_calls_end｜>``; a value is the text between its
#: tags, typed by the tool's schema. Step-DeepResearch writes the invokes in
#: ``<steptml:toolcall>…</steptml:toolcall>``.
STEP3 = Syntax(
    name="step3",
    label="Step3 <｜tool_calls_begin｜> <steptml:invoke name=…> (Step3, Step-DeepResearch)",
    shape=DerivedShape(
        kind="tags",
        opening=("<｜tool_calls_begin｜>", *_STEP_INVOKE),
        name_end=('">',),
        key_open=("<steptml:parameter", 'name="'),
        key_mid=('">',),
        value_end=("</steptml:parameter>",),
        post=("</steptml:invoke>", "<｜tool_call_end｜>"),
        next_call=_STEP_INVOKE,
        trail=("<｜tool_calls_end｜>",),
    ),
    # Step-DeepResearch (vLLM's step_deepresearch): the same invokes in <steptml:toolcall>
    also=(
        DerivedShape(
            kind="tags",
            opening=("<steptml:toolcall>", "<steptml:invoke", 'name="'),
            name_end=('">',),
            key_open=("<steptml:parameter", 'name="'),
            key_mid=('">',),
            value_end=("</steptml:parameter>",),
            post=("</steptml:invoke>",),
            next_call=("<steptml:invoke", 'name="'),
            trail=("</steptml:toolcall>",),
        ),
    ),
    reasoning=THINK,
)

#: FunctionGemma: ``<start_function_call>call:NAME{key:<escape>text<escape>,n:3}``
#: ``<end_function_call>``: Gemma's literal syntax (bare keys, numbers, ``true``, lists and
#: mappings), strings between ``<escape>`` delimiters, verbatim.
FUNCTION_GEMMA = Syntax(
    name="functiongemma",
    label="FunctionGemma <start_function_call>call:NAME{…} (FunctionGemma)",
    shape=DerivedShape(
        kind="name-literal",
        opening=("<start_function_call>", "call:"),
        post=("<end_function_call>",),
        next_call=("<start_function_call>", "call:"),
        literal="function-gemma",
    ),
    # a turn that calls tools stops where the results would follow
    end_tokens=("<start_function_response>", "<end_of_turn>"),
)

#: Olmo 3: ``<function_calls>\nNAME(key=value, ...)\n…</function_calls>``, one Python call a
#: line (keyword arguments, values Python literals, read by hand, never evaluated).
OLMO3 = Syntax(
    name="olmo3",
    label="Olmo 3 <function_calls> Python calls, one a line (Olmo 3)",
    shape=DerivedShape(
        kind="name-python", opening=("<function_calls>",), trail=("</function_calls>",)
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)

#: Gemma 4: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>``, a block a call, in
#: Gemma's literal syntax (bare keys, strings between ``<|"|>`` verbatim, numbers, ``true``,
#: lists and mappings). Thinking is Gemma's channel (:mod:`.gemma_channel`). A turn that
#: calls tools ends with ``<|tool_response>`` (the engine's cue to run them), one without with
#: ``<turn|>``: end tokens, not text.
GEMMA4 = Syntax(
    name="gemma4",
    label='Gemma 4 <|tool_call>call:NAME{key:<|"|>…<|"|>}<tool_call|> (Gemma 4)',
    shape=DerivedShape(
        kind="name-literal",
        opening=("<|tool_call>", "call:"),
        post=("<tool_call|>",),
        next_call=("<|tool_call>", "call:"),
        literal="gemma",
    ),
    end_tokens=("<|tool_response>", "<turn|>"),
    stream_layer=GemmaChannel,
)


def _hunyuan(namespace: str = "") -> DerivedShape:
    """Hunyuan's tags, each in ``namespace`` (``:opensource`` in HY3's and HY4's)."""

    def tag(word: str) -> str:
        return word[:-1] + namespace + ">"

    return DerivedShape(
        kind="tags",
        opening=(tag("<tool_calls>"), tag("<tool_call>")),
        name_end=(tag("<tool_sep>"),),
        key_open=(tag("<arg_key>"),),
        key_mid=(tag("</arg_key>"), tag("<arg_value>")),
        value_end=(tag("</arg_value>"),),
        verbatim=True,
        post=(tag("</tool_call>"),),
        next_call=(tag("<tool_call>"),),
        trail=(tag("</tool_calls>"),),
    )


#: Hunyuan (Tencent ``hy_v3``): ``<tool_calls>\n<tool_call>NAME<tool_sep>\n<arg_key>K</arg_key>``
#: ``\n<arg_value>V</arg_value>\n</tool_call>\n</tool_calls>``, one block holding the turn's
#: calls; a value is the text between its tags, verbatim, typed by the tool's schema. HY3 and
#: HY4 write every tag in the ``:opensource`` namespace (``<tool_calls:opensource>``…), a
#: form of its own; HY4 sometimes leaves ``<tool_sep…>`` out, which the engine reads for every
#: syntax whose separator after a name is a tag. (Hunyuan A13B writes Apriel's grammar.)
HUNYUAN = Syntax(
    name="hunyuan",
    tool_outputs=TOOL_RESPONSE,
    label="Hunyuan <tool_calls><tool_call>NAME<tool_sep><arg_key>…<arg_value>… (Hunyuan hy_v3)",
    shape=_hunyuan(),
    also=(_hunyuan(":opensource"),),
    reasoning=THINK,
    end_tokens=("<|eos|>", "<｜hy_eos:opensource｜>"),
)

#: MiniCPM3: ``<|tool_call_start|>\n```python\nNAME(key=value,...)\n…```\n<|tool_call_end|>``,
#: one Python call a line in a fenced block, each value as the template's ``tojson`` writes it
#: (JSON literals; Python's own read too, by hand, never evaluated). LFM2 opens its calls with
#: the same token but writes a bracketed list there: the fence tells the two apart.
MINICPM3 = Syntax(
    name="minicpm3",
    label="MiniCPM3 <|tool_call_start|>```python NAME(key=value)``` (openbmb MiniCPM3)",
    shape=DerivedShape(
        kind="name-python",
        opening=("<|tool_call_start|>", "```python"),
        trail=("```", "<|tool_call_end|>"),
        literal="json",
    ),
    reasoning=ReasoningTags(blocks={"<|thought_start|>": "<|thought_end|>"}),
    end_tokens=("<|im_end|>",),
)

_LFM2_START = "<|tool_call_start|>"

#: LFM2 and LFM2.5: ``<|tool_call_start|>[NAME(key=value), ...]<|tool_call_end|>``, Python
#: calls in a list (literals read by hand, never evaluated), anywhere in the reply. Some LFM2
#: models write the list's calls as JSON objects instead, ``{"name": NAME, "arguments": {...}}``
#: (``parameters`` too, as SGLang reads them), or one such object after the token with no list:
#: the list's first call says which (one list, one way), the token's next character which form.
LFM2 = Syntax(
    name="lfm2",
    tool_outputs=(("<|tool_response_start|>", "<|tool_response_end|>"),),
    label="LFM2 <|tool_call_start|>[NAME(key=value)]<|tool_call_end|> (LFM2, LFM2.5)",
    shape=DerivedShape(
        kind="name-python",
        opening=(_LFM2_START, "["),
        next_call=(",",),
        trail=("]", "<|tool_call_end|>"),
        json_too=True,
        args_also=("parameters",),
    ),
    also=(
        DerivedShape(
            kind="json",
            opening=(_LFM2_START,),
            post=("<|tool_call_end|>",),
            next_call=(_LFM2_START,),
            args_also=("parameters",),
        ),
        # the list without its <|tool_call_start|> (as Ollama and peers read it): the whole
        # reply's, or a trailing block's, calls to declared tools only; a named repair
        DerivedShape(
            kind="name-python",
            opening=("[",),
            next_call=(",",),
            trail=("]",),
            json_too=True,
            args_also=("parameters",),
            whole=True,
            written=False,
            repair="recovered-unopened-call",
        ),
    ),
    # LFM2 8B's template shows no calls; its prompt lists the tools between these tokens
    prompt_markers=("<|tool_list_start|>",),
)

#: SGLang's tagged Python dialect (its multi-format reader): ``<tool_call>NAME(key=value)``
#: ``</tool_call>``, Python calls one a line in Qwen's tags (values Python literals, read by
#: hand, never evaluated).
TAGGED_PYTHONIC = Syntax(
    name="tagged-pythonic",
    tool_outputs=TOOL_RESPONSE,
    label="Python calls in <tool_call> (models served with SGLang's multi-format reader)",
    shape=DerivedShape(kind="name-python", opening=("<tool_call>",), trail=("</tool_call>",)),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)


#: SGLang's invoke XML dialect (its multi-format reader's ``minimax`` and ``dsv32``):
#: ``<tool_calls><invoke name="NAME"><parameter name="K" string="true">V</parameter></invoke>``
#: ``</tool_calls>``, MiniMax M2's calls (DeepSeek V3.2's without its DSML prefix) in a plain
#: block. A value's ``string`` attribute, where written, says whether it is text or JSON.
INVOKE_XML = Syntax(
    name="invoke-xml",
    label="<tool_calls><invoke name=…><parameter name=…> (models served with SGLang's"
    " multi-format reader)",
    shape=replace(
        MINIMAX.shape,
        opening=("<tool_calls>", *MINIMAX.shape.opening[1:]),
        trail=("</tool_calls>",),
        type_attr="string",
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)

_IFM_CALL = "<ifm|tool_call>"


def _ifm(*section: str) -> DerivedShape:
    """K2 Horizon's calls, in its section (``section``: its opening tag) or each alone."""
    return DerivedShape(
        kind="tags",
        opening=(*section, _IFM_CALL),
        key_open=("<ifm|arg_key>",),
        key_mid=("</ifm|arg_key>", "<ifm|arg_value>"),
        value_end=("</ifm|arg_value>",),
        post=("</ifm|tool_call>",),
        next_call=(_IFM_CALL,),
        trail=("</ifm|tool_calls>",) if section else (),
        json_too=True,
        args_also=("parameters",),
        type_tag=("<ifm|arg_type>", "</ifm|arg_type>"),
    )


#: K2 Horizon (K2-v3, its IFM format): ``<ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>K``
#: ``</ifm|arg_key><ifm|arg_value>V</ifm|arg_value></ifm|tool_call></ifm|tool_calls>``, GLM's
#: tags under the ``ifm|`` prefix, the section around the calls or not, a value's type in
#: an ``<ifm|arg_type>`` tag where written; a call may also be a JSON object in its tags.
#: Thinking in ``<ifm|think>`` (or ``_fast``, ``_faster``).
K2V3_IFM = Syntax(
    name="k2v3-ifm",
    label="K2 Horizon <ifm|tool_call>NAME<ifm|arg_key>…<ifm|arg_value>… (K2 Horizon, K2-v3)",
    shape=_ifm("<ifm|tool_calls>"),
    also=(_ifm(),),
    reasoning=ReasoningTags(
        blocks={f"<ifm|{t}>": f"</ifm|{t}>" for t in ("think", "think_fast", "think_faster")}
    ),
)

_PY_START = "<|python_start|>"


def _py_list(
    *opening: str,
    trail: tuple[str, ...] = (),
    whole: bool = False,
    written: bool = True,
    ends_with_turn: bool = False,
) -> DerivedShape:
    """Llama 4's Python calls after ``opening``, a comma between two."""
    return DerivedShape(
        kind="name-python",
        opening=opening,
        next_call=(",",),
        trail=trail,
        whole=whole,
        written=written,
        ends_with_turn=ends_with_turn,
    )


#: Llama 4's Python call list (``pythonic``), ``[NAME(key=value), ...]``: the whole reply
#: (values Python literals, read by hand, never evaluated), or anywhere after
#: ``<|python_start|>`` (its ``<|python_end|>`` may be left out where the reply ends).
PYTHONIC = Syntax(
    name="pythonic",
    label="Python call list [NAME(key=value), ...] as the whole reply (Llama 4)",
    shape=_py_list(_PY_START, "[", trail=("]", "<|python_end|>"), ends_with_turn=True),
    also=(
        _py_list("[", trail=("]",), whole=True),
        # the list without its brackets (SGLang's Llama 4 template), tools known, or after
        # the token: read, never written
        _py_list(whole=True, written=False),
        _py_list(_PY_START, trail=("<|python_end|>",), ends_with_turn=True, written=False),
    ),
    end_tokens=("<|eot|>",),
    message_ends=("<|eom|>",),
)


#: Every declared family, by name.
DECLARED: dict[str, Syntax] = {
    s.name: s
    for s in (
        QWEN_XML,
        HERMES,
        GRANITE,
        NEMOTRON_V2,
        FIREFUNCTION,
        GLM,
        APRIEL,
        APERTUS,
        COMMAND_R7B,
        SEED_OSS,
        MINIMAX,
        DEEPSEEK_R1,
        DEEPSEEK_V31,
        MINICPM5,
        INTERNLM2,
        LONGCAT,
        STEP3,
        FUNCTION_GEMMA,
        OLMO3,
        MINIMAX_M1,
        GEMMA4,
        SOLAR_OPEN,
        GIGACHAT,
        HUNYUAN,
        MINICPM3,
        LFM2,
        MISTRAL,
        COMMAND_R_PLUS,
        TAGGED_PYTHONIC,
        TAGGED_HARMONY,
        INVOKE_XML,
        K2V3_IFM,
        FUNCTIONARY_V31,
        FUNCTIONARY_V32,
        PYTHONIC,
        LLAMA3,
        XLAM,
        KIMI_K2,
        DEEPSEEK_DSML,
        GIGACHAT_GCML,
        MINIMAX_M3,
        DOTS,
        IQUEST,
        TELECHAT4,
        PLAMO3,
        SOLAR_OPEN2,
        GRANITE_20B,
        QWEN25_CODER,
        STEP_AUDIO2,
        OPENPANGU,
        RWKV,
    )
}

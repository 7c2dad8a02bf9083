"""Families whose grammars peers read, declared from the peers' readers (vLLM's and SGLang's
tool parsers): each one syntax value (:mod:`.syntax`), everything else derived. Where a
published template exists it says so; the rest are declared from the readers alone, and
read, written and constrained as every declared family is. Gathered with the others in
:mod:`.declared`.
"""

from __future__ import annotations

from .derived import DerivedShape
from .reasoning import THINK, ReasoningTags
from .syntax import TOOL_RESPONSE, Syntax

__all__ = [
    "DOTS",
    "GRANITE_20B",
    "IQUEST",
    "OPENPANGU",
    "PLAMO3",
    "QWEN25_CODER",
    "RWKV",
    "SOLAR_OPEN2",
    "STEP_AUDIO2",
    "TELECHAT4",
]


def _invoke_xml(block: str) -> DerivedShape:
    """MiniMax M2's invokes, ``<invoke name="NAME"><parameter name="K">V</parameter>…``
    ``</invoke>``, in the block ``<block>…</block>``."""
    return DerivedShape(
        kind="tags",
        opening=(f"<{block}>", "<invoke", 'name="'),
        name_end=('">',),
        key_open=("<parameter", 'name="'),
        key_mid=('">',),
        value_end=("</parameter>",),
        post=("</invoke>",),
        next_call=("<invoke", 'name="'),
        trail=(f"</{block}>",),
    )


#: dots (rednote hi lab's dots models, vLLM's and SGLang's ``dots`` readers): MiniMax M2's
#: invokes in ``<dots_function_call>…</dots_function_call>``, or a call object there instead
#: (``{"name": NAME, "arguments": {...}}``, ``parameters`` too); each value the text between
#: its tags, typed by the tool's schema.
DOTS = Syntax(
    name="dots",
    label="dots <dots_function_call><invoke name=…> or a JSON call (dots)",
    shape=_invoke_xml("dots_function_call"),
    also=(
        DerivedShape(
            kind="json",
            opening=("<dots_function_call>",),
            post=("</dots_function_call>",),
            next_call=("<dots_function_call>",),
            args_also=("parameters",),
        ),
    ),
)


def _glm_tags(tag: str, key: str = "arg_key", value: str = "arg_value") -> DerivedShape:
    """GLM's calls, ``NAME<key>K</key><value>V</value>…``, each in ``<tag>…</tag>``."""
    return DerivedShape(
        kind="tags",
        opening=(f"<{tag}>",),
        key_open=(f"<{key}>",),
        key_mid=(f"</{key}>", f"<{value}>"),
        value_end=(f"</{value}>",),
        post=(f"</{tag}>",),
        next_call=(f"<{tag}>",),
    )


#: IQuest (IQuest Q1, SGLang's ``iquest_q1``; IQuest-Coder V2, vLLM's ``iquest_coder_v2``):
#: GLM's argument tags in a tag of its own, ``<iquest_tool_call>`` or
#: ``<iquestcoder_tool_call>``, one call a tag; a value the text between its tags, typed by
#: the tool's schema.
IQUEST = Syntax(
    name="iquest",
    label="IQuest <iquest_tool_call>NAME<arg_key>…<arg_value>… (IQuest Q1, IQuest-Coder V2)",
    shape=_glm_tags("iquest_tool_call"),
    also=(_glm_tags("iquestcoder_tool_call"),),
    reasoning=THINK,
    tool_outputs=TOOL_RESPONSE,
)

#: TeleChat4 (and SGLang's Xing4 and XingChen4 readers): GLM's calls with their own tags,
#: ``<tool_call>NAME<param_key>K</param_key><param_value>V</param_value></tool_call>``. A call
#: object in the tag (Hermes' body, which SGLang's reader takes too) is read as the engine
#: reads one in every tagged syntax's tag, a named repair.
TELECHAT4 = Syntax(
    name="telechat4",
    label="TeleChat4 <tool_call>NAME<param_key>…<param_value>… (TeleChat4)",
    shape=DerivedShape(
        kind="tags",
        opening=("<tool_call>",),
        key_open=("<param_key>",),
        key_mid=("</param_key>", "<param_value>"),
        value_end=("</param_value>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
    ),
    reasoning=THINK,
    tool_outputs=TOOL_RESPONSE,
)

_PLAMO = "<|plamo:{}:plamo|>"

#: PLaMo 3 (Preferred Networks; vLLM's and SGLang's ``plamo3`` readers): the calls in
#: ``begin_tool_requests`` … ``end_tool_requests`` tokens, each call its name and then its
#: arguments as a JSON object after ``<|plamo:constrain|>json<|plamo:msg|>``; thinking in
#: ``begin_think`` … ``end_think``.
PLAMO3 = Syntax(
    name="plamo3",
    label="PLaMo 3 <|plamo:begin_tool_requests:plamo|>… NAME … JSON (PLaMo 3)",
    shape=DerivedShape(
        kind="name-json",
        opening=(
            _PLAMO.format("begin_tool_requests"),
            _PLAMO.format("begin_tool_request"),
            _PLAMO.format("begin_tool_name"),
        ),
        name_end=(
            _PLAMO.format("end_tool_name"),
            _PLAMO.format("begin_tool_arguments"),
            "<|plamo:constrain|>json<|plamo:msg|>",
        ),
        post=(_PLAMO.format("end_tool_arguments"), _PLAMO.format("end_tool_request")),
        next_call=(_PLAMO.format("begin_tool_request"), _PLAMO.format("begin_tool_name")),
        trail=(_PLAMO.format("end_tool_requests"),),
    ),
    reasoning=ReasoningTags(blocks={_PLAMO.format("begin_think"): _PLAMO.format("end_think")}),
)

#: Solar Open2 (Upstage; vLLM's ``solar_open2``): ``<|tool_call:start|>NAME`` then each
#: argument ``<|tool_arg:start|>K<|tool_arg:value|>V<|tool_arg:end|>``, then
#: ``<|tool_call:end|>``, one call a block; a value the text between its tokens, typed by
#: the tool's schema; thinking in ``<|think:start|>`` … ``<|think:end|>``.
SOLAR_OPEN2 = Syntax(
    name="solar-open2",
    label="Solar Open2 <|tool_call:start|>NAME<|tool_arg:start|>… (Upstage Solar Open2)",
    shape=DerivedShape(
        kind="tags",
        opening=("<|tool_call:start|>",),
        name_end=("\n",),
        key_open=("<|tool_arg:start|>",),
        key_mid=("<|tool_arg:value|>",),
        value_end=("<|tool_arg:end|>",),
        post=("<|tool_call:end|>",),
        next_call=("<|tool_call:start|>",),
    ),
    reasoning=ReasoningTags(blocks={"<|think:start|>": "<|think:end|>"}),
    end_tokens=("<|im:end|>",),
    tool_outputs=(("<|tool_response:start|>", "<|tool_response:end|>"),),
)

#: Granite-20B-FunctionCalling (vLLM's ``granite-20b-fc`` and its published template
#: ``examples/tool_chat_template_granite_20b_fc.jinja``): each call ``<function_call> {"name":
#: NAME, "arguments": {...}}``, nothing closing it, the next call's marker after it.
GRANITE_20B = Syntax(
    name="granite-20b-fc",
    label="Granite <function_call> {JSON} (Granite-20B-FunctionCalling)",
    shape=DerivedShape(kind="json", opening=("<function_call>",), next_call=("<function_call>",)),
    end_tokens=("<|endoftext|>",),
)

#: Qwen2.5-Coder as vLLM serves it (``qwen2_5_coder``, and its published template
#: ``examples/tool_chat_template_qwen2_5_coder.jinja``, which teaches the form by example):
#: Hermes' call objects in ``<tools>…</tools>``, one call a block.
QWEN25_CODER = Syntax(
    name="qwen25-coder",
    label="Qwen2.5-Coder <tools>{JSON}</tools> (Qwen2.5-Coder, as vLLM serves it)",
    shape=DerivedShape(
        kind="json",
        opening=("<tools>",),
        post=("</tools>",),
        next_call=("<tools>",),
        args_also=("parameters",),
    ),
    end_tokens=("<|im_end|>", "<|endoftext|>"),
    tool_outputs=TOOL_RESPONSE,
)

#: Step-Audio 2 (StepFun; vLLM's ``step_audio_2``): Qwen's ``<tool_call>`` holding the call's
#: type, its name and its arguments' JSON object, a line each:
#: ``<tool_call>function\nNAME\n{...}</tool_call>``.
STEP_AUDIO2 = Syntax(
    name="step-audio2",
    label="Step-Audio 2 <tool_call>function\\nNAME\\n{JSON}</tool_call> (Step-Audio 2)",
    shape=DerivedShape(
        kind="name-json",
        opening=("<tool_call>", "function", "\n"),
        name_end=("\n",),
        post=("</tool_call>",),
        next_call=("<tool_call>", "function", "\n"),
    ),
    reasoning=THINK,
    tool_outputs=TOOL_RESPONSE,
)

#: openPangu (Huawei; vLLM's ``pangu`` and ``openpangu_v2``, where its tokenizer has no
#: ``<|tool_call_start|>``, whose form is LFM2's JSON list): a JSON list of call objects
#: between ``[unused11]`` and ``[unused12]``.
OPENPANGU = Syntax(
    name="openpangu",
    label="openPangu [unused11][{JSON}, ...][unused12] (openPangu)",
    shape=DerivedShape(
        kind="json",
        opening=("[unused11]", "["),
        next_call=(",",),
        trail=("]", "[unused12]"),
        args_also=("parameters",),
    ),
    reasoning=ReasoningTags(blocks={"[unused16]": "[unused17]"}),
)

#: RWKV (vLLM's ``rwkv``): each call a JSON object in a ``json`` fence after the words
#: ``**Tool Call:**``.
RWKV = Syntax(
    name="rwkv",
    label="RWKV **Tool Call:** then a ```json fence (RWKV)",
    shape=DerivedShape(
        kind="json",
        opening=("**Tool Call:**", "```json"),
        post=("```",),
        next_call=("**Tool Call:**", "```json"),
    ),
    reasoning=THINK,
)

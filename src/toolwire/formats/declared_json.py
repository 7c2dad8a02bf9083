"""The families whose calls are JSON objects, declared as syntax values (:mod:`.syntax`): a
call object alone in its tags, a list of them, or a name before a JSON object of arguments
(Mistral's newer form). Gathered with the others in :mod:`.declared`.
"""

from __future__ import annotations

from dataclasses import replace

from .derived import CALL_ID, DerivedShape
from .reasoning import THINK, ReasoningTags
from .syntax import TOOL_RESPONSE, Syntax

__all__ = [
    "APERTUS",
    "APRIEL",
    "COMMAND_R7B",
    "COMMAND_R_PLUS",
    "FIREFUNCTION",
    "GIGACHAT",
    "GRANITE",
    "HERMES",
    "INTERNLM2",
    "LLAMA3",
    "LONGCAT",
    "MINIMAX_M1",
    "MISTRAL",
    "NEMOTRON_V2",
    "XLAM",
]

#: Hermes: ``<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>``, each call in
#: its own tags (Qwen2.5, Qwen3, Hermes 2/3, Granite 4 and many fine-tunes of them).
HERMES = Syntax(
    name="hermes",
    tool_outputs=TOOL_RESPONSE,
    label="Hermes <tool_call> JSON (Qwen2.5, Qwen3, Hermes 2/3, Granite 4)",
    shape=DerivedShape(
        kind="json",
        opening=("<tool_call>",),
        post=("</tool_call>",),
        next_call=("<tool_call>",),
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>", "<|endoftext|>"),
)

#: Granite 3.x: ``<|tool_call|>[{"name": NAME, "arguments": {...}}, ...]``.
GRANITE = Syntax(
    name="granite",
    label="Granite <|tool_call|>[...] (Granite 3.x)",
    shape=DerivedShape(kind="json", opening=("<|tool_call|>", "["), next_call=(",",), trail=("]",)),
    end_tokens=("<|end_of_text|>",),
    # its template writes no call, but states the format in the prompt with the marker
    prompt_markers=("<|tool_call|>",),
)

#: Nemotron Nano v2: ``<TOOLCALL>[{"name": NAME, "arguments": {...}}, ...]</TOOLCALL>``.
NEMOTRON_V2 = Syntax(
    name="nemotron-v2",
    label="Nemotron <TOOLCALL>[...]</TOOLCALL> (Nemotron Nano v2)",
    shape=DerivedShape(
        kind="json", opening=("<TOOLCALL>", "["), next_call=(",",), trail=("]", "</TOOLCALL>")
    ),
    end_tokens=("<SPECIAL_12>",),
)

#: Firefunction v2: ``functools[{"name": NAME, "arguments": {...}}, ...]`` (the marker holds
#: the ``[``: the word "functools" alone in a reply is no call's start).
FIREFUNCTION = Syntax(
    name="firefunction",
    label="Firefunction functools[...] (Firefunction v2)",
    shape=DerivedShape(kind="json", opening=("functools[",), next_call=(",",), trail=("]",)),
)

#: Apriel 1.5/1.6: ``<tool_calls>[{"name": NAME, "arguments": {...}, "id": ID}, ...]</tool_calls>``.
#: The templates write the id after the arguments: a call is announced once whole, with the
#: model's id.
APRIEL = Syntax(
    name="apriel",
    label="Apriel <tool_calls>[...]</tool_calls> (Apriel 1.5, 1.6)",
    shape=DerivedShape(
        kind="json",
        opening=("<tool_calls>", "["),
        next_call=(",",),
        trail=("]", "</tool_calls>"),
        id_key="id",
    ),
    reasoning=ReasoningTags(
        # Apriel 1.6's prompt ends with this line; its answer follows the closer
        prompt_blocks={"Here are my reasoning steps:": "[BEGIN FINAL RESPONSE]"},
        answer_after={"[BEGIN FINAL RESPONSE]": "[END FINAL RESPONSE]"},
        # Hunyuan A13B (read as this family): <think>…</think> then <answer>…</answer>
        blocks={"<think>": "</think>"},
        answers={"<answer>": "</answer>"},
    ),
)

#: Apertus: ``<|tools_prefix|>[{NAME: {...}}, ...]<|tools_suffix|>``, the name the one key.
APERTUS = Syntax(
    name="apertus",
    label='Apertus <|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|> (Apertus)',
    shape=DerivedShape(
        kind="json",
        opening=("<|tools_prefix|>", "["),
        next_call=(",",),
        trail=("]", "<|tools_suffix|>"),
        name_is_key=True,
    ),
)

#: Command R7B / Cohere2: ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME,
#: "parameters": {...}}, ...]<|END_ACTION|>``; the id comes first, so the model's is kept.
COMMAND_R7B = Syntax(
    name="command-r7b",
    label="Cohere <|START_ACTION|>[...]<|END_ACTION|> (Command R7B, Cohere2)",
    shape=DerivedShape(
        kind="json",
        opening=("<|START_ACTION|>", "["),
        next_call=(",",),
        trail=("]", "<|END_ACTION|>"),
        name_key="tool_name",
        args_key="parameters",
        id_key="tool_call_id",
        id_first=True,
    ),
    reasoning=ReasoningTags(
        blocks={"<|START_THINKING|>": "<|END_THINKING|>"},
        answers={"<|START_RESPONSE|>": "<|END_RESPONSE|>", "<|START_TEXT|>": "<|END_TEXT|>"},
    ),
    end_tokens=("<|END_OF_TURN_TOKEN|>",),
)

#: InternLM2 and Intern-S1: ``<|action_start|><|plugin|>\n{"name": NAME, "parameters": {...}}``
#: ``<|action_end|>``, a block a call. InternLM's own format names the arguments
#: ``parameters``; vLLM's template writes ``arguments``: both are the family's.
INTERNLM2 = Syntax(
    name="internlm2",
    label="InternLM <|action_start|><|plugin|> JSON <|action_end|> (InternLM2, Intern-S1)",
    shape=DerivedShape(
        kind="json",
        opening=("<|action_start|>", "<|plugin|>"),
        post=("<|action_end|>",),
        next_call=("<|action_start|>", "<|plugin|>"),
        args_key="parameters",
        args_also=("arguments",),
    ),
    reasoning=THINK,
    end_tokens=("<|im_end|>",),
)

#: LongCat Flash: Hermes's calls in its own tags, ``<longcat_tool_call>{"name": NAME,``
#: ``"arguments": {...}}</longcat_tool_call>``; or GLM's tags in LongCat's words,
#: ``<longcat_tool_call>NAME<longcat_arg_key>K</longcat_arg_key><longcat_arg_value>V``
#: ``</longcat_arg_value>…</longcat_tool_call>`` (mlx-lm's LongCat reader takes both).
LONGCAT = Syntax(
    name="longcat",
    label="LongCat <longcat_tool_call> JSON or NAME<longcat_arg_key>… (LongCat Flash)",
    shape=DerivedShape(
        kind="json",
        opening=("<longcat_tool_call>",),
        post=("</longcat_tool_call>",),
        next_call=("<longcat_tool_call>",),
    ),
    also=(
        DerivedShape(
            kind="tags",
            opening=("<longcat_tool_call>",),
            key_open=("<longcat_arg_key>",),
            key_mid=("</longcat_arg_key>", "<longcat_arg_value>"),
            value_end=("</longcat_arg_value>",),
            post=("</longcat_tool_call>",),
            next_call=("<longcat_tool_call>",),
        ),
    ),
    reasoning=THINK,
)

#: MiniMax M1: ``<tool_calls>\n{"name": NAME, "arguments": {...}}\n{...}\n</tool_calls>``, one
#: JSON call a line and nothing between them. (Apriel opens its calls with the same tag but
#: writes one JSON list there: neither reads the other's.)
MINIMAX_M1 = Syntax(
    name="minimax-m1",
    label="MiniMax M1 <tool_calls> JSON lines </tool_calls> (MiniMax M1)",
    shape=DerivedShape(kind="json", opening=("<tool_calls>",), trail=("</tool_calls>",)),
)

_GIGACHAT3_CALL = "<|message_sep|>\n\nfunction call<|role_sep|>"

#: GigaChat 3 and 3.1 (Sber): the call is a message of its own, one JSON object. GigaChat 3
#: ends the assistant's message and writes a ``function call`` message,
#: ``<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": NAME, "arguments": {...}}``,
#: itself ended by ``<|message_sep|>`` (the whole separator, role and all, opens the call:
#: ``<|message_sep|>`` alone only ends a message); GigaChat 3.1 writes
#: ``<|function_call|>{...}``. The templates render one call a turn; a second call message
#: is read as a second call.
GIGACHAT = Syntax(
    name="gigachat",
    label="GigaChat function call<|role_sep|> JSON (GigaChat 3, 3.1)",
    shape=DerivedShape(
        kind="json",
        opening=(_GIGACHAT3_CALL,),
        next_call=(_GIGACHAT3_CALL,),
        trail=("<|message_sep|>",),
        trail_optional=True,
    ),
    also=(
        DerivedShape(kind="json", opening=("<|function_call|>",), next_call=("<|function_call|>",)),
    ),
    end_tokens=("</s>",),
    one_call_per_message=True,
)

_MISTRAL = "[TOOL_CALLS]"


def _mistral(*name_end: str) -> DerivedShape:
    """A Mistral call of the newer form, each opened by its own marker."""
    return DerivedShape(
        kind="name-json", opening=(_MISTRAL,), name_end=name_end, next_call=(_MISTRAL,)
    )


#: Mistral, two generations: ``[TOOL_CALLS][{"name": NAME, "arguments": {...}, "id": ID}, ...]``
#: (7B v0.3, Nemo: a list, the id after the arguments), and ``[TOOL_CALLS]NAME[ARGS]{...}``
#: or ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}`` (Small 3.2, Ministral 3, Devstral: each call
#: opened by its own marker). The marker's next character tells the list from a name, and the
#: word after the name whether an id is written. Its templates insist on ids of nine letters
#: and digits: a conversation's ids are reshaped to them.
MISTRAL = Syntax(
    name="mistral",
    label="Mistral [TOOL_CALLS] (7B v0.3, Nemo, Small 3.2, Ministral 3, Devstral)",
    shape=DerivedShape(
        kind="json", opening=(_MISTRAL, "["), next_call=(",",), trail=("]",), id_key="id"
    ),
    also=(_mistral("[CALL_ID]", CALL_ID, "[ARGS]"), _mistral("[ARGS]")),
    reasoning=ReasoningTags(blocks={"[THINK]": "[/THINK]"}),
    end_tokens=("</s>",),
    call_ids="alnum9",
)

#: Command R+: ``Action:\n```json\n[{"tool_name": NAME, "parameters": {...}}, ...]\n```````.
#: ``Action:`` is a plain word: only the fence after it makes a call. ``directly-answer`` is
#: the template's pseudo-tool for "answer in text", no call. A reply may open with the role
#: token the template's turn starts with, dropped there (as llama.cpp drops it).
COMMAND_R_PLUS = Syntax(
    name="command-r-plus",
    label="Cohere Action: ```json [...]``` (Command R+)",
    shape=DerivedShape(
        kind="json",
        opening=("Action:", "```json", "["),
        next_call=(",",),
        trail=("]", "```"),
        name_key="tool_name",
        args_key="parameters",
        no_tools=("directly-answer",),
    ),
    # a call's turn is written without its end: the next turn's start ends it
    end_tokens=("<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>"),
    turn_opener="<|CHATBOT_TOKEN|>",
)


def _llama3(*opening: str, whole: bool = False) -> DerivedShape:
    """Llama 3's call object, after ``opening`` (or the whole reply)."""
    return DerivedShape(
        kind="json",
        opening=opening,
        args_key="parameters",
        args_also=("arguments",),
        allowed=(("type", "function"),),
        whole=whole,
    )


#: Llama 3.1–3.3: the whole reply is ``{"name": NAME, "parameters": {...}}`` (several calls
#: one after another, white space or ``;`` between), or such calls anywhere after
#: ``<|python_tag|>``, the model's token for "a call follows". The arguments may come under
#: ``"arguments"`` (what most JSON grammars write, and Llama models often answer with), and
#: ``"type": "function"`` may stand beside them.
LLAMA3 = Syntax(
    name="llama3",
    label='Llama 3 JSON reply {"name", "parameters"} (Llama 3.1–3.3)',
    shape=_llama3("<|python_tag|>"),
    also=(_llama3(whole=True),),
    end_tokens=("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"),
    one_call_per_message=True,
)


def _json_list(*opening: str, trail: tuple[str, ...] = (), whole: bool = False) -> DerivedShape:
    """A list of JSON call objects, after ``opening`` (or the whole reply)."""
    return DerivedShape(
        kind="json",
        opening=(*opening, "["),
        next_call=(",",),
        trail=("]", *trail),
        whole=whole,
    )


#: xLAM (Salesforce): ``[{"name": NAME, "arguments": {...}}, ...]``, the whole reply, or
#: anywhere after ``[TOOL_CALLS]`` or in ``<tool_call>…</tool_call>`` (as vLLM's xLAM reader
#: takes it); an item that is no call is left out, the list's other calls read.
XLAM = Syntax(
    name="xlam",
    label='JSON call list [{"name", "arguments"}], bare or after a tag (Salesforce xLAM)',
    shape=_json_list(whole=True),
    also=(
        _json_list("<tool_call>", trail=("</tool_call>",)),
        # Mistral's syntax, which vLLM's xLAM reader takes too: read, never written
        replace(_json_list("[TOOL_CALLS]"), written=False),
    ),
    reasoning=THINK,
)

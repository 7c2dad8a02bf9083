"""Each family's call form, in the vocabulary of :mod:`toolwire.formats.grammar`.

A family declares its form in one line (``grammar = forms.HERMES``); the forms are written
here, from the family's own grammar as its module describes it and as its templates render
calls (tests/test_grammars.py proves each on every corpus template of the family). The texts
are the families' markers; white space between them is free (bounded), as templates and models
break lines differently.
"""

from __future__ import annotations

from .grammar import (
    AnyOf,
    Body,
    CallForm,
    Gemma,
    JsonCall,
    NamedJson,
    Pythonic,
    Tagged,
    cat,
    lit,
)

__all__ = [
    "APERTUS",
    "APRIEL",
    "COMMAND_R7B",
    "COMMAND_R_PLUS",
    "DEEPSEEK_DSML",
    "DEEPSEEK_R1",
    "DEEPSEEK_V31",
    "FIREFUNCTION",
    "FUNCTIONARY_V31",
    "FUNCTIONARY_V32",
    "GEMMA4",
    "GIGACHAT",
    "GLIMMER",
    "GLM",
    "GPT_OSS",
    "GRANITE",
    "HERMES",
    "HUNYUAN",
    "INKLING",
    "KIMI_K2",
    "KIMI_K3",
    "LFM2",
    "LLAMA3",
    "MINICPM5",
    "MINIMAX",
    "MINIMAX_M1",
    "MINIMAX_M3",
    "MISTRAL",
    "NEMOTRON_V2",
    "PYTHONIC",
    "QWEN_XML",
    "SEED_OSS",
    "SOLAR_OPEN",
    "json_list",
    "tag_block",
]

_NAME_ARGS = JsonCall()
_INDEX = "[0-9]{1,4}"
_ID = "[A-Za-z0-9_-]{0,40}"


def json_list(marker: str, body: JsonCall = _NAME_ARGS, end: str = "") -> CallForm:
    """``marker[{…}, {…}]end``: a JSON list of call objects after a marker."""
    open_ = f'{lit(marker)} space "["'
    close = cat('"]"', lit(end) if end else "")
    return CallForm(body, open=open_, close=close, sep='","', triggers=(marker,))


def tag_block(open_: str, close: str, body: Body) -> CallForm:
    """Each call between ``open_`` and ``close``, the tags repeated for the next call."""
    return CallForm(body, open=lit(open_), close=lit(close), blocks=True, triggers=(open_,))


# ------------------------------------------------------------ a JSON call object in tags

HERMES = tag_block("<tool_call>", "</tool_call>", _NAME_ARGS)
MINIMAX_M1 = CallForm(
    _NAME_ARGS, open=lit("<tool_calls>"), close=lit("</tool_calls>"), triggers=("<tool_calls>",)
)
GIGACHAT = AnyOf(
    (
        CallForm(
            _NAME_ARGS,
            open=lit("<|message_sep|>\n\nfunction call<|role_sep|>"),
            close=f"({lit('<|message_sep|>')})?",
            blocks=True,
            triggers=("<|message_sep|>\n\nfunction call<|role_sep|>",),
        ),
        CallForm(
            _NAME_ARGS, open=lit("<|function_call|>"), blocks=True, triggers=("<|function_call|>",)
        ),
    )
)
INKLING = CallForm(
    JsonCall(args_key="args"),
    open=lit("<|content_invoke_tool_json|>"),
    close=f"({lit('<|end_message|>')})?",
    sep=f"{lit('<|message_model|>')} [^<]{{0,64}}",
    blocks=True,
    triggers=("<|content_invoke_tool_json|>",),
    prefix=f"{lit('<|message_model|>')} [^<\\n]{{0,64}}",
)
_LLAMA = JsonCall(args_key="parameters")
LLAMA3 = AnyOf(
    (
        CallForm(
            _LLAMA,
            open=lit("<|python_tag|>"),
            sep=f'";"? space {lit("<|python_tag|>")}?',
            triggers=("<|python_tag|>",),
        ),
        CallForm(_LLAMA, sep='";"?'),
    )
)

# ------------------------------------------------------------ a JSON list of call objects

GRANITE = json_list("<|tool_call|>")
NEMOTRON_V2 = json_list("<TOOLCALL>", end="</TOOLCALL>")
APRIEL = json_list("<tool_calls>", JsonCall(id_key="id"), "</tool_calls>")
APERTUS = json_list("<|tools_prefix|>", JsonCall(name_is_key=True), "<|tools_suffix|>")
FIREFUNCTION = CallForm(
    _NAME_ARGS, open='"functools["', close='"]"', sep='","', triggers=("functools[",)
)
_COHERE = JsonCall("tool_name", "parameters", id_key="tool_call_id", id_first=True)
COMMAND_R7B = json_list("<|START_ACTION|>", _COHERE, "<|END_ACTION|>")
COMMAND_R_PLUS = CallForm(
    JsonCall("tool_name", "parameters"),
    open=f'{lit("Action:")} space {lit("```json")} space "["',
    close='"]" space "```"',
    sep='","',
    triggers=("Action:\n```json",),  # "Action:" alone may be prose
    prefix=lit("<|CHATBOT_TOKEN|>"),
)

# ------------------------------------------------------------ the name, then JSON arguments

_DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
_DS_CALL = (lit("<｜tool▁call▁begin｜>"), lit("<｜tool▁call▁end｜>"))
DEEPSEEK_V31 = CallForm(
    NamedJson(between=lit("<｜tool▁sep｜>")),
    open=lit(_DS_CALLS[0]),
    close=lit(_DS_CALLS[1]),
    call_open=_DS_CALL[0],
    call_close=_DS_CALL[1],
    triggers=(_DS_CALLS[0],),
)
# the R1 distills' templates render a single call without the block's closing token
DEEPSEEK_R1 = CallForm(
    NamedJson(
        before=lit("function<｜tool▁sep｜>"), between=lit("\n```json"), after='"```"', lead=False
    ),
    open=lit(_DS_CALLS[0]),
    close=f"({lit(_DS_CALLS[1])})?",
    call_open=_DS_CALL[0],
    call_close=_DS_CALL[1],
    triggers=(_DS_CALLS[0],),
)
_KIMI_BODY = NamedJson(
    before=lit("functions."),
    between=f'":" {_INDEX} {lit("<|tool_call_argument_begin|>")}',
    lead=False,
)
_KIMI_CALL = (lit("<|tool_call_begin|>"), lit("<|tool_call_end|>"))
KIMI_K2 = AnyOf(
    (
        CallForm(
            _KIMI_BODY,
            open=lit("<|tool_calls_section_begin|>"),
            close=lit("<|tool_calls_section_end|>"),
            call_open=_KIMI_CALL[0],
            call_close=_KIMI_CALL[1],
            triggers=("<|tool_calls_section_begin|>",),
        ),
        CallForm(
            _KIMI_BODY,
            call_open=_KIMI_CALL[0],
            call_close=_KIMI_CALL[1],
            triggers=("<|tool_call_begin|>",),
        ),
    )
)
FUNCTIONARY_V31 = CallForm(
    NamedJson(before=lit("<function="), between='">"', after=lit("</function>")),
    blocks=True,
    triggers=("<function=",),
)
_V32 = NamedJson(between='"\\n"')
FUNCTIONARY_V32 = AnyOf(
    (
        CallForm(_V32, open='">>>"', blocks=True, triggers=(">>>{name}\n",)),
        CallForm(_V32, sep='">>>"', blocks=True, starts=("{name}\n",)),
    )
)
MISTRAL = AnyOf(
    (
        json_list("[TOOL_CALLS]", JsonCall(id_key="id")),
        CallForm(
            NamedJson(between=f'("[CALL_ID]" {_ID})? "[ARGS]"'),
            open='"[TOOL_CALLS]"',
            blocks=True,
            triggers=("[TOOL_CALLS]",),
        ),
    )
)
SOLAR_OPEN = CallForm(
    NamedJson(
        before=f"{lit('<|tool_call:begin|>')} {_ID} {lit('<|tool_call:name|>')}",
        between=lit("<|tool_call:args|>"),
        after=lit("<|tool_call:end|>"),
    ),
    open=lit("<|tool_calls|>"),
    close=f"({lit('<|calls|>')})?",
    triggers=("<|tool_calls|>",),
)
GPT_OSS = CallForm(
    NamedJson(
        before=lit("to=functions."),
        between=f'(" "? {lit("<|channel|>")} "commentary")? " "? {lit("<|constrain|>")}? "json"? '
        f"{lit('<|message|>')}",
    ),
    sep=f'{lit("<|call|><|start|>assistant")} ({lit("<|channel|>commentary")} " "?)?',
    blocks=True,
    triggers=("to=functions.",),
    prefix=f'{lit("<|channel|>commentary")} " "?',
)

# ------------------------------------------------------------ each argument in tags of its own


def _xml_invoke(prefix: str, invoke: str, parameter: str, ns: str = "") -> Tagged:
    """``<invoke name="N"><parameter name="K">V</parameter></invoke>`` and its kin."""
    return Tagged(
        before=lit(f'{ns}<{prefix}{invoke} name="'),
        between='"\\">"',
        after=lit(f"{ns}</{prefix}{invoke}>"),
        arg_open=(f'{ns}<{prefix}{parameter} name="{{key}}">',),
        arg_close=(f"{ns}</{prefix}{parameter}>",),
    )


_QWEN = Tagged(
    before=lit("<function="),
    between='">"',
    after=lit("</function>"),
    arg_open=("<parameter={key}>",),
    arg_close=("</parameter>",),
)
QWEN_XML = tag_block("<tool_call>", "</tool_call>", _QWEN)
SEED_OSS = tag_block("<seed:tool_call>", "</seed:tool_call>", _QWEN)
_ARG_KV = (("<arg_key>{key}</arg_key>", "<arg_value>"), ("</arg_value>",))
GLM = tag_block(
    "<tool_call>", "</tool_call>", Tagged('""', '""', '""', *_ARG_KV, markup=("</tool_call>",))
)


def _hunyuan(ns: str = "") -> CallForm:
    """Hunyuan's tags, each with the namespace ``ns`` (``:opensource`` in HY3's)."""
    return CallForm(
        Tagged(
            '""',
            lit(f"<tool_sep{ns}>"),
            '""',
            (f"<arg_key{ns}>{{key}}</arg_key{ns}>", f"<arg_value{ns}>"),
            (f"</arg_value{ns}>",),
            markup=(f"</tool_call{ns}>",),
        ),
        open=lit(f"<tool_calls{ns}>"),
        close=lit(f"</tool_calls{ns}>"),
        call_open=lit(f"<tool_call{ns}>"),
        call_close=lit(f"</tool_call{ns}>"),
        triggers=(f"<tool_calls{ns}>",),
    )


HUNYUAN = AnyOf((_hunyuan(), _hunyuan(":opensource")))

MINIMAX = CallForm(
    _xml_invoke("", "invoke", "parameter"),
    open=lit("<minimax:tool_call>"),
    close=lit("</minimax:tool_call>"),
    triggers=("<minimax:tool_call>",),
)
_M3 = "]<]minimax[>["
MINIMAX_M3 = CallForm(
    Tagged(
        before=lit(_M3 + '<invoke name="'),
        between='"\\">"',
        after=lit(_M3 + "</invoke>"),
        arg_open=(_M3 + "<{key}>",),
        arg_close=(_M3 + "</{key}>",),
    ),
    open=lit(_M3 + "<tool_call>"),
    close=lit(_M3 + "</tool_call>"),
    triggers=(_M3 + "<tool_call>",),
)
_DSML = "<｜DSML｜"
_DSML_BODY = Tagged(
    before=lit(_DSML + 'invoke name="'),
    between='"\\">"',
    after=lit("</｜DSML｜invoke>"),
    arg_open=(_DSML + 'parameter name="{key}" string="{type}">',),
    arg_close=("</｜DSML｜parameter>",),
    types=(("string", "true"), ("*", "false")),
)
DEEPSEEK_DSML = AnyOf(
    tuple(
        CallForm(
            _DSML_BODY,
            open=lit(f"{_DSML}{block}>"),
            close=lit(f"</｜DSML｜{block}>"),
            triggers=(_DSML,),
        )
        for block in ("function_calls", "tool_calls")
    )
)
MINICPM5 = CallForm(
    Tagged(
        before=lit('<function name="'),
        between='"\\">"',
        after=lit("</function>"),
        arg_open=('<param name="{key}">',),
        arg_close=("</param>",),
    ),
    blocks=True,
    triggers=('<function name="',),
)
_RECIPIENT = '"to=" [^<\\n ]{1,128} ' + lit("<|message|>")
GLIMMER = CallForm(
    _xml_invoke("atem:", "invoke", "parameter"),
    open=lit("<atem:function_calls>"),
    close=lit("</atem:function_calls>"),
    sep=f"{lit('<|eom|><|start|>assistant')} space {_RECIPIENT}",
    blocks=True,
    triggers=("<atem:function_calls>",),
    prefix=_RECIPIENT,
)
_K3_OPEN, _K3_CLOSE, _K3_SEP = "<|open|>", "<|close|>", "<|sep|>"
KIMI_K3 = CallForm(
    Tagged(
        before=lit(_K3_OPEN + 'call tool="'),
        between=f'"\\" index=\\"" {_INDEX} {lit(chr(34) + _K3_SEP)}',
        after=lit(_K3_CLOSE + "call" + _K3_SEP),
        arg_open=(_K3_OPEN + 'argument key="{key}" type="{type}"' + _K3_SEP,),
        arg_close=(_K3_CLOSE + "argument" + _K3_SEP,),
        types=(("integer", "number"),),
    ),
    open=lit(_K3_OPEN + "tools" + _K3_SEP),
    close=f"{lit(_K3_CLOSE + 'tools' + _K3_SEP)} ({lit(_K3_CLOSE + 'message' + _K3_SEP)})?",
    triggers=(_K3_OPEN + "tools" + _K3_SEP,),
)

# ------------------------------------------------------------ Python calls, and Gemma's

PYTHONIC = AnyOf(
    (
        CallForm(
            Pythonic(),
            open=f'{lit("<|python_start|>")} space "["',
            close=f'"]" space ({lit("<|python_end|>")})?',
            triggers=("<|python_start|>",),
            sep='","',
        ),
        CallForm(Pythonic(), open='"["', close='"]"', starts=("[{name}(",), sep='","'),
    )
)
_LFM2 = ("<|tool_call_start|>", "<|tool_call_end|>")
LFM2 = AnyOf(
    (
        CallForm(
            Pythonic(),
            open=f'{lit(_LFM2[0])} space "["',
            close=f'"]" space {lit(_LFM2[1])}',
            triggers=(_LFM2[0],),
            sep='","',
        ),
        json_list(_LFM2[0], end=_LFM2[1]),
    )
)
GEMMA4 = tag_block("<|tool_call>", "<tool_call|>", Gemma())

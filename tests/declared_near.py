"""Replies near each migrated family's syntax, read by its hand-written reader and its
declaration alike (``tests/declared_reading.py``): what the two must also agree on, beside
the peers' development cases."""

from __future__ import annotations

_H1 = '{ "arguments": {"city": "Paris", "days": 3}, "name": "get_weather"}'
_H2 = '{ "arguments": {"time": "07:30"}, "name": "get_time"}'

#: Replies near each family's syntax: what the readers must also agree on.
NEAR: dict[str, list[str]] = {
    "hermes": [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        'Sure.<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
        "</tool_call> done",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',  # unclosed
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}</tool_call>',
        "<tool_call>not json</tool_call> after",
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        '<think>plan</think><tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        'Write <tool_call> in prose, then {"name": "x"}.',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "P"}, "extra": 1}</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
        # later calls with their <tool_call> left out (vLLM's hermes_2_pro template)
        f"<tool_call>\n{_H1}\n</tool_call> {_H2}\n</tool_call> ",
        f"<tool_call>\n{_H1}\n</tool_call> {_H2} and then prose",
        f'<tool_call>\n{_H1}\n</tool_call> {{"not": "a call"}}\n</tool_call>',
        f"<tool_call>\n{_H1}\n</tool_call>\nSo that is it. {_H2}\n</tool_call>",
        f"<tool_call>\n{_H1}\n</tool_call>" + " " * 40 + f"{_H2}\n</tool_call>",
    ],
}


_A = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_B = '{"name": "get_time", "arguments": {}}'


def _list_near(opening: str, closing: str, a: str = _A, b: str = _B) -> list[str]:
    """Near misses of a syntax that writes ``opening[`` calls ``]closing`` (``a`` and ``b``
    two calls in its item shape)."""
    return [
        f"{opening}[{a}]{closing}",
        f"Sure. {opening}[{a}, {b}]{closing}",
        f"{opening}[\n  {a},\n  {b}\n]{closing}\n",
        f"{opening}[{a}, {b}",  # cut short
        f"{opening}[]{closing}",
        f"{opening}[{a}, 15:30]{closing}",  # one malformed item
        f"{opening}[{a} {b}]{closing}",  # a comma left out
        f"{opening}{a}{closing}",  # no list
        f"{opening}[{a}]{closing} and more text",
        f"{opening}[{a}]",  # the closing left out
        f'{opening}[{{"name": "nope", "arguments": {{}}}}]{closing}',
        f"prose about {opening} and [lists].",
    ]


NEAR["granite"] = [
    *_list_near("<|tool_call|>", ""),
    '<|tool_call|>[{"name": "get_weather", "parameters": {}}]',
    '<|tool_call|>[{"name": "get_weather", "arguments": {}}, "x"]',
    '<|tool_call|>[{"name": "get_weather", "arguments": {"a": NaN}}]',
    '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par',
    "<|tool_call|>",
]
NEAR["firefunction"] = [
    'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    'Sure. functools[{"name": "get_weather", "arguments": {}}, {"name": "get_time", '
    '"arguments": {}}]',
    'functools[{"name": "get_weather"}]',
    "functools[]",
    'functools["get_weather"]',
    'functools[{"name": "get_weather", "arguments": {}} trailing',
    'functools[{"name": "get_weather", "arguments": {"city": "Par',
    'functools[{"name": "get_weather", "arguments": {}}, 15:30]',
    "the functools module and [lists]",
    'functools[\n  {"name": "get_time", "arguments": {}}\n]\n',
]
NEAR["nemotron-v2"] = [
    *_list_near("<TOOLCALL>", "</TOOLCALL>"),
    '<TOOLCALL>[{"name": "get_weather", "arguments": {}}] x</TOOLCALL>',
    '<TOOLCALL>[{"name": "get_weather", "arguments": "{}"}]</TOOLCALL>',
    '<TOOLCALL>[{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]</TOOLCALL>',
]

NEAR["glm"] = [
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
    "Sure.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    "<tool_call>get_time<arg_key>zone</arg_key><arg_value>UTC</arg_value></tool_call> done",
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>",  # unclosed
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",  # cut in a value
    "<tool_call>get_weather<arg_key>a</arg_key><arg_key>b</arg_key><arg_value>1</arg_value>"
    "</tool_call>",  # a key with no value
    "<tool_call>get_weather<arg_key>a</arg_key>\n</tool_call>",
    '<tool_call>get_weather<arg_key>city</arg_key><arg_value>"Paris"</arg_value></tool_call>',
    '<tool_call>get_weather<arg_key>o</arg_key><arg_value>{\\"a\\": 1}</arg_value></tool_call>',
    '<tool_call>get_weather<arg_key>o</arg_key><arg_value>{"a": [1, 2]}</arg_value></tool_call>',
    '<tool_call>get_weather<arg_key>o</arg_key><arg_value>"unclosed</arg_value></tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    "<tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>",
    "<tool_call>get_weather<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key>"
    "<arg_value>2</arg_value></tool_call>",  # a key given twice
    "<tool_call>get_weather\\n<arg_key>a</arg_key>\\n<arg_value>x\\ny</arg_value>\\n"
    "</tool_call>",  # escaped newlines between the tags; one in a value is its text
    "<tool_call>get_weather\\t<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    "<tool_call>get_weather<arg_key>a</arg_key><arg_value></arg_value></tool_call>",
    "<tool_call>nope<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    "<think>plan</think><tool_call>get_time</tool_call>",
    "<tool_call>get_time</tool_call> and then prose <tool_call>",
    "Write <tool_call> in prose.",
    "<tool_call>get weather<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    "<tool_call>get_weather<arg_key>a b</arg_key><arg_value>1</arg_value></tool_call>",
    "<tool_call>get_weather<arg_key>a</arg_key>junk<arg_value>1</arg_value></tool_call>",
    "<tool_call>get_weather<arg_key>a</arg_key><arg_value>1</arg_value>junk</tool_call>",
]

NEAR["apriel"] = [
    *_list_near("<tool_calls>", "</tool_calls>"),
    '<tool_calls>[{"name": "get_time", "arguments": {}, "id": "abc123"}]</tool_calls>',
    '<tool_calls>[{"id": "abc123", "name": "get_time", "arguments": {}}]</tool_calls>',
    '<think>plan</think><tool_calls>[{"name": "get_time", "arguments": {}}]</tool_calls>',
    "Here are my reasoning steps:\nplan[BEGIN FINAL RESPONSE]<tool_calls>[]</tool_calls>",
]
_COHERE_A = '{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}'
_COHERE_B = '{"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}'
NEAR["command-r7b"] = [
    *_list_near("<|START_ACTION|>", "<|END_ACTION|>", _COHERE_A, _COHERE_B),
    '<|START_ACTION|>[{"tool_name": "get_time", "parameters": {}}]<|END_ACTION|>',
    '<|START_ACTION|>[{"tool_name": "get_time", "parameters": {}, "tool_call_id": "7"}]'
    "<|END_ACTION|>",
    '<|START_ACTION|>[{"tool_call_id": 3, "tool_name": "get_time", "parameters": {}}]'
    "<|END_ACTION|>",
    "<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hi<|END_RESPONSE|>",
    '<|START_ACTION|>[{"name": "get_time", "arguments": {}}]<|END_ACTION|>',
]
NEAR["apertus"] = [
    *_list_near(
        "<|tools_prefix|>",
        "<|tools_suffix|>",
        '{"get_weather": {"city": "Paris"}}',
        '{"get_time": {}}',
    ),
    '<|tools_prefix|>[{"get_weather": {"city": "Paris"}, "get_time": {}}]<|tools_suffix|>',
    '<|tools_prefix|>[{"get_weather": "Paris"}]<|tools_suffix|>',
    '<|tools_prefix|>[{"name": "get_weather", "arguments": {}}]<|tools_suffix|>',
]
_SEED = "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
NEAR["seed-oss"] = [
    _SEED + "</function>\n</seed:tool_call>",
    "Sure. " + _SEED + "</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=get_time>\n"
    "</function>\n</seed:tool_call> done",
    _SEED + "</function>",  # unclosed
    _SEED + "</function>\n</seed:tool_call><seed:eos>",
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Par",  # cut in a value
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</seed:tool_call>",
    "<seed:tool_call><function=get_weather><parameter=days>3</parameter><parameter=x>True"
    "</parameter></function></seed:tool_call>",
    "<seed:tool_call><function=nope></function></seed:tool_call>",
    "<seed:think>plan<seed:cot_budget_reflect>ok</seed:cot_budget_reflect></seed:think>"
    "<seed:tool_call><function=get_time></function></seed:tool_call>",
    '<seed:tool_call>{"name": "get_time", "arguments": {}}</seed:tool_call>',
    "Write <seed:tool_call> in prose.",
    "<seed:tool_call><function=get_weather><parameter=a>1</parameter>junk</function>"
    "</seed:tool_call>",
    "<seed:tool_call><function=get_weather><parameter=a>1</parameter><parameter=a>2"
    "</parameter></function></seed:tool_call>",
    "<seed:tool_call><function=get weather></function></seed:tool_call>",
]

_MM = '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
NEAR["minimax"] = [
    _MM + "</invoke>\n</minimax:tool_call>",
    "Sure. " + _MM + '</invoke>\n<invoke name="get_time">\n</invoke>\n</minimax:tool_call> done',
    _MM + "</invoke>",  # unclosed
    _MM + "</invoke>\n</minimax:tool_call>[e~[",
    '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Par',
    '<minimax:tool_call><invoke name="get_weather" description="x"><parameter name="city" '
    'type="string">Paris</parameter></invoke></minimax:tool_call>',
    '<minimax:tool_call><invoke name="get_weather" broken><parameter name="city">Paris'
    "</parameter></invoke></minimax:tool_call>",
    '<minimax:tool_call><invoke name="get_weather" d="' + "x" * 600 + '"></invoke>'
    "</minimax:tool_call>",
    "<minimax:tool_call></minimax:tool_call>",
    '<minimax:tool_call><invoke name="nope"></invoke></minimax:tool_call>',
    '<minimax:tool_call><invoke name="get_weather"><parameter name="a">1</parameter>'
    '<parameter name="a">2</parameter></invoke></minimax:tool_call>',
    '<minimax:tool_call><invoke name="get_weather"><parameter name="a">1</parameter>junk'
    "</invoke></minimax:tool_call>",
    '<think>plan</think><minimax:tool_call><invoke name="get_time"></invoke></minimax:tool_call>',
    "Write <minimax:tool_call> in prose.",
    '<minimax:tool_call><invoke name= "get_weather"></invoke></minimax:tool_call>',
    '<minimax:tool_call>{"name": "get_time", "arguments": {}}</minimax:tool_call>',
]

_DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
_DS_END = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
_R1 = _DS + 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'
_R1_TIME = (
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜>"
)
NEAR["deepseek-r1"] = [
    _R1 + _DS_END,
    "Sure. " + _R1 + "<｜tool▁call▁end｜>\n" + _R1_TIME + "<｜tool▁calls▁end｜> done",
    _R1 + "<｜tool▁call▁end｜>",  # one call's block, as the templates write it
    _R1 + "<｜tool▁call▁end｜> and prose",
    _R1,  # cut before the call's end
    _R1 + "<｜tool▁call▁end｜><｜end▁of▁sentence｜>",
    _DS + 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Par',
    _DS + 'get_weather<｜tool▁sep｜>{"city": "Paris"}' + _DS_END,  # V3.1's shape
    _DS + 'function<｜tool▁sep｜>get_weather\n{"city": "Paris"}\n' + _DS_END,  # no fence
    _DS + "function<｜tool▁sep｜>get weather\n```json\n{}\n```" + _DS_END,
    _DS + "function<｜tool▁sep｜>get_weather\n```json\n[1]\n```" + _DS_END,
    "<think>plan</think>" + _R1 + _DS_END,
    "Write <｜tool▁calls▁begin｜> in prose.",
    _DS + "function<｜tool▁sep｜>get_weather\n```json\n{}\n```junk" + _DS_END,
]
_V31 = _DS + 'get_weather<｜tool▁sep｜>{"city": "Paris"}'
NEAR["deepseek-v3.1"] = [
    _V31 + _DS_END,
    "Sure. "
    + _V31
    + "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
    + _DS_END
    + " done",
    _V31 + "<｜tool▁call▁end｜>",  # unclosed
    _V31,
    _V31 + _DS_END + "<｜end▁of▁sentence｜>",
    _DS + 'get_weather<｜tool▁sep｜>{"city": "Par',
    _R1 + _DS_END,  # R1's shape
    _DS + "get weather<｜tool▁sep｜>{}" + _DS_END,
    _DS + "get_weather<｜tool▁sep｜>[1]" + _DS_END,
    _DS + "get_weather <｜tool▁sep｜> {}" + _DS_END,
    _DS + "get_weather<｜tool▁sep｜>{}junk" + _DS_END,
    "<think>plan</think>" + _V31 + _DS_END,
]

_CPM = '<function name="get_weather"><param name="city">Paris</param>'
NEAR["minicpm5"] = [
    _CPM + "</function>",
    "Sure.\n" + _CPM + '</function>\n<function name="get_time"></function>\ndone',
    _CPM,  # unclosed
    '<function name="get_weather"><param name="city">Par',
    '<function name="get_weather"><param name="city"><![CDATA[a</param>b]]></param></function>',
    '<function name="get_weather"><param name="city"><![CDATA[Paris]]>x</param></function>',
    '<function name="get_weather"><param name="city"><![CDATA[Par',
    '<function name="get_weather"><param name="city"> <![CDATA[Paris]]></param></function>',
    '<function name="get weather"></function>',
    '<function name=""></function>',
    '<function name="get_weather"><param name="a">1</param><param name="a">2</param></function>',
    '<function name="get_weather" type="x"><param name="city" t="s">Paris</param></function>',
    '<function name="nope"></function>',
    "<think>plan</think>" + _CPM + "</function>",
    "Write <function name= in prose.",
    '<function name="get_weather">junk</function>',
    '<function name="get_weather"><param name="city">Paris</param></function><|im_end|>',
]

_M1 = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_M1B = '{"name": "get_time", "arguments": {}}'
NEAR["minimax-m1"] = [
    f"<tool_calls>\n{_M1}\n</tool_calls>",
    f"Sure. <tool_calls>\n{_M1}\n{_M1B}\n</tool_calls> done",
    f"<tool_calls>\n{_M1}\n{_M1B}",  # unclosed
    f"<tool_calls>\n{_M1}\n15:30\n{_M1B}\n</tool_calls>",
    f"<tool_calls>\n{_M1}\n"
    '{"name": "get_time", "arguments": {"at": 15:30}}'
    f"\n{_M1B}\n</tool_calls>",
    '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Par',
    "<tool_calls>\n</tool_calls>",
    f"<tool_calls>[{_M1}]</tool_calls>",  # Apriel's list
    f"<tool_calls>\n{_M1} {_M1B}\n</tool_calls>",  # two on one line
    f"<tool_calls>\n{_M1}\n</tool_calls><end_of_sentence>",
    '<tool_calls>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"P\\"}"}\n</tool_calls>',
    f"<think>plan</think><tool_calls>\n{_M1}\n</tool_calls>",
    "Write <tool_calls> in prose.",
    '<tool_calls>\n{"name": "nope", "arguments": {}}\n</tool_calls>',
]

_G4 = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>'
NEAR["gemma4"] = [
    _G4,
    "Sure. " + _G4 + "<|tool_call>call:get_time{}<tool_call|> done",
    _G4[: -len("<tool_call|>")],  # unclosed
    _G4 + "<|tool_response>",
    '<|tool_call>call:get_weather{city:<|"|>Par',
    '<|tool_call>call:get_weather{city:"Paris"}<tool_call|>',
    "<|tool_call>call:get_weather[1]<tool_call|>",
    "<|tool_call>get_weather{}<tool_call|>",
    "<|tool_call>call:get weather{}<tool_call|>",
    "<|tool_call>call:get_weather{a:1,a:2}<tool_call|>",
    "<|channel>thought\nplan<channel|>" + _G4,
    "<|channel>thought\nI could " + _G4 + " here<channel|>Done.",
    "Write <|tool_call> in prose.",
    _G4 + " and prose",
    '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><tool_call|>',
]

_QX = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
_QX_BARE = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
NEAR["qwen-xml"] = [
    _QX + "</function>\n</tool_call>",
    "Sure. " + _QX + "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n"
    "</tool_call> done",
    _QX + "</function>",  # unclosed
    _QX + "</function>\n</tool_call><|im_end|>",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",  # cut in a value
    _QX_BARE + "\n</tool_call>",  # its opening left out
    _QX_BARE,  # bare
    _QX_BARE + "\n<function=get_time>\n</function>",  # two bare
    "<function=nope>\n</function>",  # bare, no such tool
    "<function=get_weather>\n</function> and prose",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter1>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",  # a drifted closer
    _QX.replace("</parameter>", "</parameter") + "</function>\n</tool_call>",
    "<tool_call><function=get_weather><parameter=days>3</parameter><parameter=x>True"
    "</parameter></function></tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n"
    "</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    "Write <tool_call> in prose.",
    "<think>plan</think>" + _QX + "</function>\n</tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=a>\n1\n</parameter>\njunk</function>\n"
    "</tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\nline 2\n</parameter>\n"
    "</function>\n</tool_call>",
    _QX_BARE + "\n<function=get_ti",  # a second bare call cut short
    "Try <function=get_weather> in prose.",
    '<tool_call>\n<function=get_weather>\n<parameter=city>\n"Paris"\n</parameter>\n'
    "</function>\n</tool_call>",
]

_SO = "<|tool_calls|><|tool_call:begin|>call_1<|tool_call:name|>get_weather<|tool_call:args|>"
_SO_TIME = (
    "<|tool_call:begin|>call_2<|tool_call:name|>get_time<|tool_call:args|>{}<|tool_call:end|>"
)
NEAR["solar-open"] = [
    _SO + '{"city": "Paris"}<|tool_call:end|><|calls|>',
    "Sure. " + _SO + '{"city": "Paris"}<|tool_call:end|>' + _SO_TIME + "<|calls|>",
    _SO + '{"city": "Paris"}<|tool_call:end|>',  # the block not closed
    _SO + '{"city": "Paris"}<|tool_call:end|> and prose',
    _SO + '{"city": "Paris"}<|tool_call:end|><|calls|> and prose',
    _SO + '{"city": "Par',  # cut in the arguments
    _SO + '{"city": "Paris"}',  # cut before the call's end
    "<|tool_calls|><|tool_call:begin|><|tool_call:name|>get_weather<|tool_call:args|>{}"
    "<|tool_call:end|>",  # no id
    _SO + "{}<|tool_call:end|>" + _SO_TIME.replace("call_2", "call_1"),  # an id used twice
    _SO + "[1]<|tool_call:end|>",
    "<|tool_calls|><|tool_call:begin|>call_1<|tool_call:name|>get weather<|tool_call:args|>{}"
    "<|tool_call:end|>",
    "<|tool_calls|><|tool_call:begin|>call 1<|tool_call:name|>get_weather<|tool_call:args|>{}"
    "<|tool_call:end|>",
    "Write <|tool_calls|> in prose.",
    _SO + "{}junk<|tool_call:end|>",
    _SO + " {} <|tool_call:end|>",
    _SO + "{}<|tool_call:end|><|end|>",
    "<|tool_calls|>" + _SO_TIME,
]

_GC3 = "<|message_sep|>\n\nfunction call<|role_sep|>\n"
_GC31 = "<|function_call|>"
NEAR["gigachat"] = [
    _GC3 + _H1 + "<|message_sep|>\n\n",
    "Sure." + _GC3 + _H1 + _GC3 + _H2,  # two call messages
    _GC3 + _H1 + "<|message_sep|>\n\nAnd prose after.",
    _GC3 + _H1 + " and prose",
    _GC31 + _H1,
    "Sure. " + _GC31 + _H1 + _GC31 + _H2,
    _GC31 + _H1 + " and prose",
    _GC3 + '{"name": "get_weather", "arguments": {"city": "Par',
    _GC31 + "[1]",
    "<|message_sep|>\n\nJust a message.",
    _GC3 + _H1 + "</s>",
    _GC3 + _H1 + "<|message_sep|>",
    _GC31 + _H1 + "\n",
    _GC31 + _H1 + "<|func",
    _GC3 + '{"name": "get_weather", "arguments": "{\\"city\\": \\"P\\"}"}',
    _GC31 + '{"name": "nope", "arguments": {}}',
]

_HY = (
    "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n"
)
_HY_NS = _HY.replace(">", ":opensource>")  # every tag in the namespace
NEAR["hunyuan"] = [
    _HY + "</tool_call>\n</tool_calls>",
    "Sure. "
    + _HY
    + "</tool_call>\n<tool_call>get_time<tool_sep>\n</tool_call>\n</tool_calls> done",
    _HY + "</tool_call>",  # unclosed
    _HY + "</tool_call>\n</tool_calls><|eos|>",
    "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n<arg_value>Par",
    _HY_NS + "</tool_call:opensource>\n</tool_calls:opensource>",
    _HY_NS.replace("<tool_sep:opensource>", "") + "</tool_call:opensource></tool_calls:opensource>",
    "<tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "</tool_call></tool_calls>",  # GLM's spelling inside <tool_calls>
    "<tool_calls><tool_call>get_weather<tool_sep><arg_key>a</arg_key><arg_value>1</arg_value>"
    "<arg_key>a</arg_key><arg_value>2</arg_value></tool_call></tool_calls>",
    "<tool_calls><tool_call>get weather<tool_sep></tool_call></tool_calls>",
    "<tool_calls><tool_call>nope<tool_sep></tool_call></tool_calls>",
    "<tool_calls></tool_calls>",
    "Write <tool_calls> in prose.",
    "<think>plan</think>" + _HY + "</tool_call>\n</tool_calls>",
    _HY + "</tool_call>\n</tool_calls><｜hy_eos:opensource｜>",
    "<tool_calls><tool_call>get_weather<tool_sep><arg_key>a</arg_key><arg_value>1</arg_value>"
    "junk</tool_call></tool_calls>",
    '<tool_calls><tool_call>get_weather<tool_sep><arg_key>a</arg_key><arg_value>"x"</arg_value>'
    "</tool_call></tool_calls>",
]

_CPM3 = '<|tool_call_start|>\n```python\nget_weather(city="Paris",days=3)\n'
NEAR["minicpm3"] = [
    _CPM3 + "```\n<|tool_call_end|>",
    "Sure.\n" + _CPM3 + 'get_time(zone="UTC",exact=true)\n```\n<|tool_call_end|>\nDone.',
    _CPM3 + "```",  # the block not closed
    _CPM3,  # cut after a call
    '<|tool_call_start|>\n```python\nget_weather(city="Par',
    "<|tool_call_start|>\n```python\nget_weather(city='Paris', days=3, flag=True, x=None)\n```\n"
    "<|tool_call_end|>",
    '<|tool_call_start|>\n```python\nget_weather("Paris")\n```\n<|tool_call_end|>',
    '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>',  # LFM2's block
    '<|tool_call_start|>\n```python\nget weather(city="Paris")\n```\n<|tool_call_end|>',
    "<|tool_call_start|>\n```python\nnope(a=1)\n```\n<|tool_call_end|>",
    "<|thought_start|>\nplan\n<|thought_end|>\n" + _CPM3 + "```\n<|tool_call_end|>",
    "Write <|tool_call_start|> in prose.",
    _CPM3 + "```\n<|tool_call_end|><|im_end|>",
    '<|tool_call_start|>\n```python\nget_weather(city="Paris", city="Rome")\n```\n'
    "<|tool_call_end|>",
    '<|tool_call_start|>\n```python\nget_weather(city="Paris") get_time()\n```\n<|tool_call_end|>',
    '<|tool_call_start|>\n```python\nget_weather(tags=["a", "b"], opts={"k": 1})\n```\n'
    "<|tool_call_end|>",
    "<|tool_call_start|>\n```python\n```\n<|tool_call_end|>",
]

_LF = "<|tool_call_start|>"
_LF_END = "<|tool_call_end|>"
NEAR["lfm2"] = [
    _LF + '[get_weather(city="Paris", days=3)]' + _LF_END,
    "Sure. " + _LF + '[get_weather(city="Paris"), get_time()]' + _LF_END + " done",
    _LF + '[get_weather(city="Paris")]',  # the block not closed
    _LF + '[get_weather(city="Paris")',  # cut before the list's end
    _LF + '[get_weather(city="Par',
    _LF + '[{"name": "get_weather", "arguments": {"city": "Paris"}}]' + _LF_END,
    _LF + '{"name": "get_weather", "arguments": {"city": "Paris"}}' + _LF_END,  # one object
    _LF + '[{"name": "get_weather", "parameters": {"city": "Paris"}}]' + _LF_END,
    _LF + '[get_weather(city="Paris"), {"name": "get_time", "arguments": {}}]' + _LF_END,
    _LF + "[get_weather(city=Paris, days=3)]" + _LF_END,  # an unquoted value
    _LF + '[get_weather("Paris")]' + _LF_END,
    _LF + "[]" + _LF_END,
    _LF + _LF_END,
    _LF + '\n```python\nget_weather(city="Paris")\n```\n' + _LF_END,  # MiniCPM3's block
    _LF + '[get weather(city="Paris")]' + _LF_END,
    _LF + '[get_weather(city="Paris")]' + _LF_END + "<|im_end|>",
    "Write <|tool_call_start|> in prose.",
    "<think>plan</think>" + _LF + "[get_time()]" + _LF_END,
    _LF + '[get_weather(city="Paris", city="Rome")]' + _LF_END,
    _LF + '[get_weather(city="Paris") get_time()]' + _LF_END,
    _LF + '[get_weather(text="a\nb")]' + _LF_END,  # a raw line break in a string
    _LF + '[get_weather(city="Paris"),]' + _LF_END,
]

_TC = "[TOOL_CALLS]"
_ML = '{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}'
NEAR["mistral"] = [
    _TC + "[" + _ML + "]",
    "Sure. " + _TC + "[" + _ML + ', {"name": "get_time", "arguments": {}, "id": "b2c3d4e5f"}]',
    _TC + '[{"name": "get_weather", "arguments": {"city": "Paris"}}]</s>',
    _TC + "[" + _ML + ", 15:30]",  # one malformed item
    _TC + "[" + _ML,  # cut short
    _TC + "[]",
    _TC + 'get_weather[ARGS]{"city": "Paris"}',
    _TC + 'get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}',
    _TC + 'get_weather[ARGS]{"city": "Paris"}' + _TC + "get_time[ARGS]{}",
    _TC + 'get_weather[CALL_ID]a1b2c3d4e[ARGS]{"a": 1}' + _TC + "get_time[CALL_ID]b2[ARGS]{}",
    _TC + 'get_weather{"city": "Paris"}',  # [ARGS] left out
    _TC + 'get_weather[CALL_ID]a1b2c3d4e{"city": "Paris"}',
    _TC + 'get_weather[ARGS]{"city": "Par',  # cut in the arguments
    _TC + "get_weather[ARGS]",
    _TC + "get_weather",
    _TC + 'get weather[ARGS]{"a": 1}',
    _TC + 'get_weather[ARGS]["Paris"]',
    _TC + 'get_weather[ARG]{"a": 1}',
    _TC + 'nope[ARGS]{"a": 1}',
    _TC + 'get_weather[ARGS]{"city": "Paris"} and then prose',
    _TC + 'get_weather[ARGS]{"city": "Paris"}</s>',
    "[THINK]plan[/THINK]" + _TC + "get_time[ARGS]{}",
    "Write [TOOL_CALLS] in prose.",
    _TC + '  get_weather [ARGS] {"city": "Paris"}',
    _TC + '\n[{"name": "get_time", "arguments": {}}]',
    _TC + "[" + _ML + "]" + _TC + "get_time[ARGS]{}",
    _TC + 'get_weather[CALL_ID]a-b_c[ARGS]{"a": 1}',
    _TC + 'get_weather[CALL_ID]a b[ARGS]{"a": 1}',
    _TC + 'get_weather[ARGS]{"text": "a\nb"}',  # a raw line break in a string
]

_ACT = "Action:\n```json\n"
_CR = '{"tool_name": "get_weather", "parameters": {"city": "Paris"}}'
_CR_DIRECT = '{"tool_name": "directly-answer", "parameters": {}}'
NEAR["command-r-plus"] = [
    _ACT + "[" + _CR + "]\n```",
    "Sure. " + _ACT + "[" + _CR + ', {"tool_name": "get_time", "parameters": {}}]\n```',
    "<|CHATBOT_TOKEN|>" + _ACT + "[" + _CR + "]\n```",
    "<|CHATBOT_TOKEN|>Hello there.<|END_OF_TURN_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|CHATBOT",
    _ACT + "[" + _CR_DIRECT + "]\n```",
    _ACT + "[" + _CR_DIRECT + ", " + _CR + "]\n```",
    _ACT + "[" + _CR + ", " + _CR_DIRECT + "]\n```",
    "Thought: easy. Action: answer at once.",
    "Action: ```json\n[" + _CR + "]```",
    _ACT + "[" + _CR + "]",  # the fence left open
    _ACT + "[" + _CR + ", 15:30]\n```",  # one malformed item
    _ACT + "[" + _CR + " " + _CR + "]\n```",  # a comma left out
    _ACT + "[]\n```",
    _ACT + "[" + _CR,  # cut short
    _ACT + '[{"name": "get_weather", "arguments": {}}]\n```',
    _ACT + "[" + _CR + "]\n```<|END_OF_TURN_TOKEN|>",
    _ACT + "[" + _CR + "]\n``` and more text",
    _ACT + '[{"tool_name": "nope", "parameters": {}}]\n```',
    "Action:\n```python\nprint(1)\n```",
    "Action:",
    _ACT + "[" + _CR_DIRECT.replace("{}", "{") + "]\n```",
]

NEAR["hermes"].append(
    '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1}}\n</tool_call>\n'
    '{"name": "get_time", "arguments": {}}\n</tool_call>'
)

# the near misses of the families whose calls are no JSON object in tags (Functionary,
# Llama 3 and 4, Kimi K2), and the tools they need beside these
try:
    from .declared_near_named import MORE, NEAR_TOOLS
except ImportError:  # run as a script, from tests/
    from declared_near_named import MORE, NEAR_TOOLS  # type: ignore[no-redef]

NEAR.update(MORE)

__all__ = ["NEAR", "NEAR_TOOLS"]

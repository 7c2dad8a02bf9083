"""Replies near the syntax of the families that write a call's name before its arguments,
a whole reply or a tool's code (Functionary v3.1 and v3.2, Llama 3, Llama 4's list, Kimi
K2): what each hand-written reader and its declaration must agree on, beside the peers'
development cases (gathered in ``tests/declared_near.py``)."""

from __future__ import annotations

#: The near misses, by family.
MORE: dict[str, list[str]] = {}

#: Tools declared beside ``get_weather``, ``get_time`` and ``search`` for a family's near
#: misses (a form only a tool of that name takes).
NEAR_TOOLS: dict[str, tuple[str, ...]] = {"functionary-v3.1": ("python",)}

_FN = '<function=get_weather>{"city": "Paris"}</function>'
_CODE = 'print("a < b")\nx = {"k": 1}'

MORE["functionary-v3.1"] = [
    _FN,
    "Sure. " + _FN + ' <function=get_time>{"zone": "UTC"}</function> done',
    _FN + _FN,
    "<function=get_weather>",
    '<function=get_weather>{"city": "Paris"}',  # unclosed
    '<function=get_weather>{"city": "Paris"} trailing</function>',
    "<function=get_weather>[1]</function>",
    '<function=get weather>{"city": "Paris"}</function>',
    '<function=get_weather>{"city": NaN}</function>',
    "<function=nope>{}</function>",
    '<function=get_weather> {"city": "Par',
    "<function=get_weather>{}</function><|eot_id|>",
    "<function=get_weather>{}</function><|eom_id|>",
    "Use <functions> wisely",
    "<|python_tag|>" + _CODE + "<|eom_id|>",
    "<|python_tag|>" + _CODE,
    '<|python_tag|>{"code": "1 + 1"}',
    '<|python_tag|>{"code": "1 + 1"}<|eom_id|>',
    "<|python_tag|>{1: 2} | {3: 4}",
    "<|python_tag|>{1: 2}<|eom_id|>",
    '<|python_tag|> {"code": "1"}<function=python>{"code": "2"}</function>',
    "Let me run it.<|python_tag|>" + _CODE,
    "<|python_tag|>",
    "<|python_tag|>   ",
    "<|python_tag|><|eom_id|>",
    '<|python_tag|>{"code": "1"',
    "<|python_tag|>[1, 2]",
    "<|python_tag|>x = 1<|eom_id|> and text after",
    "<|python_tag|>x = 1<|eom_id|>" + _FN,
    "<|python_t",
    "<think>plan</think>" + _FN,
]

MORE["functionary-v3.2"] = [
    'get_weather\n{"city": "Paris", "days": 3}',
    'all\nSure.>>>get_weather\n{"city": "Paris"}',
    "get_time\n{}>>>all\nok",
    'all\nok>>>other\n{"a": 1}',
    'Note\n{"a": 1} is JSON.',
    'nope\n{"a": 1}',
    "Hello, world!\nWhat's up?",
    "In Python, >>> print(1) shows the prompt.",
    "nope\nthis is prose",
    ">>",
    ">>>",
    ">>>all\nHi",
    '>>>get_weather\n{"city": "Paris"}>>>get_time\n{}',
    '>>>get_weather\n{"city": "Par',
    ">>>get_weather\nParis",
    '>>>get_weather\n["Paris"]',
    '>>>python\nprint("hi")',
    'get_weather\n{"city": "Paris"',
    "get_weather\nParis",
    "get_weather",
    "get_weather\n",
    "all",
    "all\n",
    "",
    "   ",
    '  get_weather\n{"city": "Paris"}',
    'get_weather {"city": "Paris"}',
    'get_weather\n\n{"city": "Paris"}',
    'get_weather\n{"city": "Paris"} and text',
    'get_weather\n{"city": "Paris"}\n>>>get_time\n{}',
    "all\nText with >>> inside it.",
    "all\nText>>>all\nmore",
    'get_weather\n{"city": "Paris"}<|eot_id|>',
    '<think>plan</think>get_weather\n{"city": "Paris"}',
    "search\n{}",
    ">>>nope\n{}",
]

_PW = "get_weather(city='Paris', days=3)"
_PS = "<|python_start|>"
_PE = "<|python_end|>"

MORE["pythonic"] = [
    f"[{_PW}]",
    f"\n  [{_PW}, get_time()]\n",
    f"{_PS}[{_PW}]{_PE}",
    f"{_PS}[{_PW}]",
    f"{_PS}[{_PW}]{_PE} and then prose",
    f"Sure. {_PS}[{_PW}]{_PE} done",
    f"Sure. {_PS}[{_PW}]",
    f"<think>plan</think>[{_PW}]",
    f"[\n  {_PW},\n  get_time(),\n]",
    f"[{_PW}]<|eom|>",
    f"[{_PW}]<|eot|>",
    f"[{_PW}]\n",
    "[link text](url) and more",
    "[Wikipedia](https://www.wikipedia.org)",
    "[1] A footnote.",
    "[1, 2, 3]",
    '["a", "b"]',
    "[]",
    "[get_weather]",
    "[get_weather](https://example.com)",
    "[get_weather (city='Paris')]",
    "Sure: [get_weather(city='Paris')]",
    f"{_PS}print('hi')",
    "<|python_st",
    "   ",
    "",
    "[get_weather(city='Paris')] Done.",
    "[get_weather(city='Paris')][get_time()]",
    "[get_weather('Paris')]",
    "[unknown_tool(a=1)]",
    "[get_weather(city='Paris'), unknown_tool()]",
    "[get_weather(city='Par",
    "[get_weather(city='Paris'",
    f"{_PS}[get_weather(city='Paris')]<|python_e",
    "[get_weather(city=Paris)]",  # unquoted text
    '[get_weather(city="say "hi"")]',  # quotes left unescaped
    "[get_weather(city='Paris'days=3)]",  # a comma left out
    "get_weather(city='Paris'), get_time()",  # the list without its brackets
    "get_weather(city='Paris')",
    "I think so.\n[get_weather(city='Paris')]",  # a trailing call after prose
    "I think so.\n[get_weather(city='Paris')]\nmore",
    "I think so.\n[get_weather(citi=3)]",
    "I think so.\n[nope()]",
    f"Text. {_PS}[nope()]{_PE}",
    "[get_weather(city='Paris'); get_time()]",
    "[search(query={'a': [1, 2]}), get_time()]",
    "  \n",
]

_LJ = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
_LT = "<|python_tag|>"

MORE["llama3"] = [
    _LJ,
    "  " + _LJ + "\n",
    _LT + _LJ,
    _LT + _LJ + _LT + '{"name": "get_time", "parameters": {}}',
    _LJ + '; {"name": "get_time", "parameters": {}}',
    _LJ + ' {"name": "get_time", "parameters": {}}',
    _LJ + '\n{"name": "get_time", "parameters": {}}',
    _LJ + " and text after",
    _LT + _LJ + " and text after",
    "Sure. " + _LT + _LJ,
    "Sure. " + _LT + _LJ + " after",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
    '{"type": "other", "name": "get_weather", "parameters": {}}',
    '{"name": "nope", "parameters": {}}',
    _LT + '{"name": "nope", "parameters": {}}',
    '{"a": 1}',
    "{not json}",
    '{"name": "get_weather", "parameters": {"city": "Par',
    '{"name": "get_weather", "parameters": {"city": "Paris"}',
    _LJ + "<|eot_id|>",
    _LJ + "<|eom_id|>",
    "<|python_ta",
    _LT,
    _LT + "   ",
    _LT + "print(1)",
    "<think>plan</think>" + _LJ,
    "I will check.\n" + _LJ,
    "I will check.\n" + _LJ + "\nmore",
    'I will check.\n{"name": "get_weather", "parameters": {"city": 3}}',
    "I will check.\n" + '{"name": "nope", "parameters": {}}',
    '{"name": "get_weather", "parameters": {"city": "a\nb"}}',
    "",
    "   ",
    '{"name": "get_weather", "parameters": "{\\"city\\": \\"Paris\\"}"}',
    '[{"name": "get_weather", "parameters": {}}]',
]

_KS = "<|tool_calls_section_begin|>"
_KE = "<|tool_calls_section_end|>"


def _k2(call_id: str, args: str = '{"city": "Paris"}', end: str = "<|tool_call_end|>") -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{args}{end}"


MORE["kimi-k2"] = [
    _KS + _k2("functions.get_weather:0") + _KE,
    "Sure. " + _KS + _k2("functions.get_weather:0") + _k2("functions.get_time:1", "{}") + _KE,
    _KS + " " + _k2("functions.get_weather:0") + " " + _KE + " done",
    _KS + _k2("functions.get_weather:0"),  # the section left open
    _KS + _k2("functions.get_weather:0", end=""),
    _KS + _k2("functions.get_weather:0", '{"city": "Par'),
    _KS
    + _k2("functions.get_weather:0", '{"city": "Paris"')
    + _k2("functions.get_time:1", "{}")
    + _KE,
    _KS + _k2("functions.get_weather.0") + _k2("functions.get_time:1", "{}") + _KE,
    _KS + _k2("get_weather:0") + _KE,  # the namespace left out
    _KS + _k2("0") + _KE,  # a bare counter, several tools it may be for
    _KS + _k2("functions.nope:0") + _KE,
    _KS + _KE,
    _KS,
    _k2("functions.get_weather:0"),  # no section
    _k2("functions.get_weather:0") + " and then text",
    _k2("functions.get_weather:0", end="") + _k2("functions.get_time:1", "{}", end=""),
    "<think>plan" + _KS + _k2("functions.get_weather:0") + _KE,
    "<think>plan" + _k2("functions.get_weather:0"),
    "<think>plan</think>" + _KS + _k2("functions.get_weather:0") + _KE,
    _KS + _k2("functions.get weather:0") + _KE,
    _KS + _k2("functions.get_weather:x") + _KE,
    _KS + _k2("functions.get_weather:0", "[1]") + _KE,
    "Write <|tool_call in prose.",
    _KS + _k2("functions.get_weather:0") + _k2("functions.get_weather:0") + _KE,  # id twice
    _KS + _k2("functions.get_weather:0") + "junk" + _KE,
]


def _dsml(word: str, block: str = "tool_calls") -> list[str]:
    """Near misses of the DSML grammar under one prefix (DeepSeek's ``DSML``, GigaChat's
    ``GCML``): the shapes the models write beside their templates', and the breaks."""
    m, e = f"<｜{word}｜", f"</｜{word}｜"
    p = f'{m}parameter name="city" string="true">Paris{e}parameter>\n'
    n = f'{m}parameter name="days" string="false">3{e}parameter>\n'
    inv = f'{m}invoke name="get_weather">\n{p}{n}{e}invoke>\n'
    two = inv + f'{m}invoke name="get_time">\n{e}invoke>\n'
    open_, close = f"{m}{block}>\n", f"{e}{block}>"
    return [
        "Sure. " + open_ + two + close + " done",
        open_ + inv + close + "\n\nMore text after.",
        open_ + f'{m}invoke name="get_time"/>\n' + close,  # self-closed
        open_ + inv + f'{m}invoke name="get_time"/>\n' + close,
        open_
        + f'{m}invoke name="get_weather">\n{{"city": "Paris", "days": 3}}\n{e}invoke>\n'
        + close,  # the arguments as one JSON object
        open_ + f'{m}invoke name="get_weather">\n{p}{{"days": 3}}\n{e}invoke>\n' + close,
        open_ + f'{m}invoke name="get_weather">\n{{"city": "Paris"}} x\n{e}invoke>\n' + close,
        f"{m}toolcalls>\n" + inv + close,  # a damaged block tag
        f"{m}tool_calls\n" + inv + close,
        f"{m} word>\n{m}{block}>\n" + inv + close,
        f"{m}toolcalls>\nno call after it",
        inv,  # a bare invoke of a declared tool
        inv.replace("get_weather", "nope"),
        open_
        + f'{m}invoke name="get_weather">\n{m}parameter name="city">x{e}parameter>\n'
        + f"{e}invoke>\n"
        + close
        + "\n"
        + inv,  # a block that broke, then a bare invoke
        "```\n" + open_ + inv + close + "\n```\nThat is how it looks.",
        "~~~\n" + inv + "~~~\n" + open_ + inv + close,
        open_ + inv.replace(' string="true"', ""),
        open_ + inv.replace('string="true"', 'string="yes"') + close,
        open_ + inv.replace(">3<", ">three<") + close,
        open_ + inv,  # the block's closer left out
        open_ + inv[:-12],  # cut inside the invoke
        open_ + f'{m}invoke name="get_weather">\n{m}parameter name="city" string="true">Par',
        open_ + inv + f"{e}function_calls>",
        f"Write {m} in prose.",
        open_ + inv + close + "<｜end▁of▁sentence｜>",
        open_ + inv + close + "</s>",
        "<think>plan</think>" + open_ + inv + close,
        open_ + inv.replace('name="days"', 'name="city"') + close,  # a parameter twice
        open_ + f'{m}invoke name="get weather">\n{e}invoke>\n' + close,
        open_ + f'{m}invoke name="get_weather" x="1">\n{e}invoke>\n' + close,
        open_ + inv + "junk\n" + close,
        open_
        + f'{m}invoke name="search">\n{m}parameter name="q" string="false">'
        + f'{{"a": [1, 2]}}{e}parameter>\n{m}parameter name="r" string="true">a < b & c'
        + f"{e}parameter>\n{e}invoke>\n"
        + close,
        open_ + close,
    ]


MORE["deepseek-dsml"] = _dsml("DSML", "function_calls") + _dsml("DSML")[:4]
MORE["gigachat-gcml"] = [
    *_dsml("GCML"),
    '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_time">\n</｜GCML｜invoke>\n'
    "</｜DSML｜tool_calls>",  # the prefixes never mix
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n'
    "</｜DSML｜tool_calls>",
]

_NS = "]<]minimax[>["


def _m3(*params: str, name: str = "get_weather") -> str:
    """A MiniMax M3 call block holding one invoke of ``params`` (each ``key>value``)."""
    body = "".join(f"{_NS}<{k}>{v}{_NS}</{k}>" for k, v in (p.split(">", 1) for p in params))
    return f'{_NS}<tool_call>\n{_NS}<invoke name="{name}">{body}{_NS}</invoke>\n{_NS}</tool_call>'


MORE["minimax-m3"] = [
    "Sure. " + _m3("city>Paris", "days>3") + " done",
    _m3("city>Paris") + "\n" + _m3("zone>UTC", name="get_time"),
    _m3(f"loc>{_NS}<city>Paris{_NS}</city>{_NS}<n>2{_NS}</n>"),  # an object
    _m3(f"days>{_NS}<item>1{_NS}</item>{_NS}<item>2{_NS}</item>"),  # a list
    _m3(f"deep>{_NS}<a>{_NS}<item>x{_NS}</item>{_NS}</a>"),
    _m3("city>  Paris  ", "empty>"),
    _m3(f"bad>{_NS}<a>1{_NS}</b>"),  # a closer of another element
    _m3(f"bad>text{_NS}<a>1{_NS}</a>"),  # an element inside text
    _m3(f"bad>{_NS}<a>1{_NS}</a>text"),  # text beside elements
    _m3(f"bad>{_NS}<a>1{_NS}</a>{_NS}<a>2{_NS}</a>"),  # a key given twice
    _m3("city>Paris", "city>Rome"),
    _m3("city>Paris")[:-20],  # cut short
    _m3("city>Par")[: len(_NS) * 2 + 40],
    f'{_NS}<tool_call>\n{_NS}<invoke name="get_weather">{_NS}<city>Paris{_NS}</invoke>',
    f"{_NS}<tool_call>\nno invoke{_NS}</tool_call>",
    "<mm:think>plan</mm:think>" + _m3("city>Paris"),
    "</mm:think>Hello.",
    "</mm:think>" + _m3("city>Paris"),
    "<mm:think>plan without end",
    "Write ]<]minimax[>[ in prose.",
    _m3("city>Paris", name="nope"),
    _m3("city>Paris", name="get weather"),
    _m3("city>a < b & c"),
    _m3("n>1.5", "b>true", "z>null", "s>42abc"),
]

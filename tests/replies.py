"""Replies in each family's grammar, written by hand from the grammars, for the tests."""

from __future__ import annotations

from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "name": "set_flags",
        "description": "Bare schema form, as some callers send it.",
        "parameters": {
            "type": "object",
            "properties": {
                "enabled": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "object"},
                "ratio": {"type": ["number", "null"]},
            },
        },
    },
]

CODE = 'def f(x):\n    return {"x": x}  # </tool_call> in a string\n\n\tend'

WEATHER = ("get_weather", {"city": "Paris", "days": 3})
WRITE = ("write_file", {"path": "a.py", "content": CODE})
FLAGS = ("set_flags", {"enabled": True, "tags": ["a", "b"], "options": {"k": [1, 2]}, "ratio": 0.5})


def _j(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def hermes(name: str, args: dict[str, Any]) -> str:
    return f"<tool_call>\n{_j({'name': name, 'arguments': args})}\n</tool_call>"


def qwen_xml(name: str, args: dict[str, Any]) -> str:
    out = f"<tool_call>\n<function={name}>\n"
    for key, value in args.items():
        text = (
            value
            if isinstance(value, str)
            else _j(value)
            if isinstance(value, (dict, list))
            else str(value)
        )
        out += f"<parameter={key}>\n{text}\n</parameter>\n"
    return out + "</function>\n</tool_call>"


def llama3(name: str, args: dict[str, Any]) -> str:
    return _j({"name": name, "parameters": args})


def mistral_list(*calls: tuple[str, dict[str, Any]]) -> str:
    items = [{"name": n, "arguments": a, "id": f"abcde{i:04d}"} for i, (n, a) in enumerate(calls)]
    return "[TOOL_CALLS]" + _j(items)


def mistral_named(name: str, args: dict[str, Any], call_id: str | None = None) -> str:
    mid = f"[CALL_ID]{call_id}" if call_id else ""
    return f"[TOOL_CALLS]{name}{mid}[ARGS]{_j(args)}"


# family -> list of (reply, expected content, expected [(name, args)])
VALID: dict[str, list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]] = {
    "hermes": [
        (hermes(*WEATHER), "", [WEATHER]),
        (
            "Let me check.\n" + hermes(*WEATHER) + "\n" + hermes(*WRITE) + "\n" + hermes(*FLAGS),
            "Let me check.\n\n\n",
            [WEATHER, WRITE, FLAGS],
        ),
        (
            "Just text, with <b>tags</b> and {braces}.",
            "Just text, with <b>tags</b> and {braces}.",
            [],
        ),
    ],
    "qwen-xml": [
        (qwen_xml(*WEATHER), "", [WEATHER]),
        (
            "I'll do both.\n\n" + qwen_xml(*WRITE) + "\n" + qwen_xml(*FLAGS) + qwen_xml(*WEATHER),
            "I'll do both.\n\n\n",
            [WRITE, FLAGS, WEATHER],
        ),
        ("<function=x> outside a call is text", "<function=x> outside a call is text", []),
    ],
    "llama3": [
        (llama3(*WEATHER), "", [WEATHER]),
        ("<|python_tag|>" + llama3(*WRITE) + "; " + llama3(*FLAGS), "", [WRITE, FLAGS]),
        ("  \n" + llama3(*WEATHER) + "\n", "", [WEATHER]),
        ("The answer is {42}.", "The answer is {42}.", []),
    ],
    "mistral": [
        (mistral_list(WEATHER, WRITE), "", [WEATHER, WRITE]),
        (
            "Sure." + mistral_named(*WEATHER, call_id="a1b2c3d4e") + mistral_named(*FLAGS),
            "Sure.",
            [WEATHER, FLAGS],
        ),
        ("[INST] is not a call [TOOL_RESULTS]", "[INST] is not a call [TOOL_RESULTS]", []),
    ],
}

# One call of each family, for the cross-family matrix.
ONE_CALL: dict[str, list[str]] = {
    "hermes": [hermes(*WEATHER)],
    "qwen-xml": [qwen_xml(*WEATHER)],
    "llama3": [llama3(*WEATHER), "<|python_tag|>" + llama3(*WEATHER)],
    "mistral": [
        mistral_list(WEATHER),
        mistral_named(*WEATHER),
        mistral_named(*WEATHER, "abcdefghi"),
    ],
}

# Near misses: text that is not a complete call in the family's markup.
NEAR_MISSES: dict[str, list[str]] = {
    "hermes": [
        '<tool_call>\n{{"name": "get_weather", "arguments": {"city": "Paris"}}}\n</tool_call>',
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
        # (``parameters`` for ``arguments`` is read, named: tests/test_engine_lists.py)
        '<tool_call>\n{"name": "get_weather", "args": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": "Paris"}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {}} trailing\n</tool_call>',
        '<tool_call>["get_weather"]</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"a": NaN}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "name": "write_file", "arguments": {}}\n</tool_call>',
        "<tool_call>",
        "<tool_ca",
    ],
    "qwen-xml": [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
        "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\nParis\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n</function>\nextra</tool_call>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        "<tool_call></tool_call>",
    ],
    "llama3": [
        '{"name": "Alice", "age": 30}',
        '{"type": "function", "function": '
        '{"name": "get_weather", "parameters": {"city": "Paris"}}}',
        # (a call set apart from prose after it is read: tests/test_families_round3b.py)
        '{"name": "get_weather", "parameters": {"city": "Paris"}}Hope that helps!',
        'Here you go: {"name": "get_weather", "parameters": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": {"city": "Par',
        '{"type": "tool", "name": "get_weather", "parameters": {}}',
        '{"name": "get_weather", "parameters": ["Paris"]}',
        '{{"name": "get_weather", "parameters": {}}}',
        '[{"name": "get_weather", "parameters": {}}]',
    ],
    "mistral": [
        "[TOOL_CALLS]get weather[ARGS]{}",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Par',
        "[TOOL_CALLS]get_weather[ARGS]Paris",
        # (a list whose last call is whole, cut before its "]", is read: the reply ended)
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {}',
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {}, "extra": 1}]',
        '[TOOL_CALLS][{"name": "get_weather"}]',
        '[TOOL_CALLS]["get_weather"]',
        "[TOOL_CALLS]get_weather[CALL_ID]abc[ARGZ]{}",
        "[TOOL_CALLS]",
    ],
}

"""Fuzzed agent-shaped requests — images, documents, system messages anywhere, custom and
namespace tools, their calls in the history — read by the Responses and Messages readers
and given to a model by the pipeline: a malformed one is a :class:`RequestError` naming a
field, never another exception; a well-formed one reaches a text-only model as text alone.

Bounded and seeded (``derandomize``), so it runs the same every time."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.backends.prompt import TemplateTransport
from toolwire.pipeline import planned
from toolwire.server.anthropic_input import parse_messages
from toolwire.server.responses_input import parse_responses
from toolwire.server.validate import RequestError
from toolwire.templates import ChatTemplate

KEYS = [
    "type",
    "role",
    "content",
    "name",
    "text",
    "id",
    "call_id",
    "input",
    "output",
    "arguments",
    "namespace",
    "tools",
    "format",
    "syntax",
    "definition",
    "source",
    "media_type",
    "data",
    "url",
    "image_url",
    "file_id",
    "file_data",
    "filename",
    "title",
    "tool_use_id",
    "parameters",
]
WORDS = [
    "user",
    "assistant",
    "system",
    "developer",
    "message",
    "text",
    "input_text",
    "input_image",
    "input_file",
    "image",
    "document",
    "base64",
    "url",
    "file",
    "content",
    "custom",
    "namespace",
    "function",
    "grammar",
    "regex",
    "lark",
    "custom_tool_call",
    "custom_tool_call_output",
    "function_call",
    "function_call_output",
    "tool_use",
    "tool_result",
    "c1",
    "data:image/png;base64,AAAA",
    "(a+)+",
]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6), st.sampled_from(WORDS)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=30,
)


def either(*good: Any) -> Any:
    """A field's value: mostly one of the good ones, else anything."""
    chosen = st.sampled_from(good)
    return st.one_of(chosen, chosen, chosen, chosen, values)


text = st.one_of(st.text(max_size=8), st.sampled_from(["", "*** Begin Patch\n", "5"]))
part = st.fixed_dictionaries(
    {"type": either("input_text", "output_text", "input_image", "input_file", "refusal")},
    optional={
        "text": either("hi", ""),
        "refusal": either("no"),
        "image_url": either("data:image/png;base64,AAAA", "https://x/y.png", "data:,"),
        "file_id": either("file-1"),
        "file_data": either("data:application/pdf;base64,JVBE"),
        "file_url": either("https://x/r.pdf"),
        "filename": either("r.pdf"),
        "detail": either("auto", "high"),
    },
)
content = st.one_of(text, st.lists(part, max_size=3))
call_ids = either("c1", "c2")
item = st.one_of(
    st.fixed_dictionaries(
        {"role": either("user", "system", "developer", "assistant"), "content": content},
        optional={"type": either("message")},
    ),
    st.fixed_dictionaries(
        {
            "type": either("function_call", "custom_tool_call"),
            "call_id": call_ids,
            "name": either("apply_patch", "calculator", "exec"),
        },
        optional={
            "arguments": either("{}", '{"a": 2}', "not json"),
            "input": text,
            "namespace": either("mcp__calc", "mcp__other"),
        },
    ),
    st.fixed_dictionaries(
        {
            "type": either("function_call_output", "custom_tool_call_output"),
            "call_id": call_ids,
            "output": content,
        }
    ),
)
fmt = st.fixed_dictionaries(
    {"type": either("text", "grammar")},
    optional={
        "syntax": either("lark", "regex"),
        "definition": either("[0-9]+", "(a+)+", "start: x", "(", "a{2,}b|c"),
    },
)
function = st.fixed_dictionaries(
    {"type": either("function"), "name": either("exec", "calculator", "mcp__calc__calculator")},
    optional={"parameters": either({"type": "object"}), "description": either("d")},
)
custom = st.fixed_dictionaries(
    {"type": either("custom"), "name": either("apply_patch", "calculator")},
    optional={"format": st.one_of(fmt, values), "description": either("d")},
)
namespace = st.fixed_dictionaries(
    {
        "type": either("namespace"),
        "name": either("mcp__calc", "mcp__" + "n" * 70, "a b"),
        "tools": st.one_of(st.lists(st.one_of(function, custom), max_size=3), values),
    }
)
tool = st.one_of(function, custom, namespace, function, custom, namespace, values)
source = st.fixed_dictionaries(
    {"type": either("base64", "url", "file", "text", "content")},
    optional={
        "media_type": either("image/png", "application/pdf", "text/plain"),
        "data": either("AAAA", "hello"),
        "url": either("https://x/y.png"),
        "file_id": either("file_1"),
        "content": st.one_of(text, st.lists(values, max_size=2)),
    },
)
block = st.one_of(
    st.fixed_dictionaries({"type": either("text"), "text": either("hi")}),
    st.fixed_dictionaries(
        {"type": either("image", "document"), "source": st.one_of(source, values)},
        optional={"title": either("notes")},
    ),
    st.fixed_dictionaries(
        {"type": either("tool_result"), "tool_use_id": either("t1", "t2")},
        optional={
            "content": st.one_of(text, st.lists(values, max_size=2)),
            "is_error": values,
        },
    ),
    st.fixed_dictionaries(
        {"type": either("tool_use"), "id": either("t1"), "name": either("f"), "input": values}
    ),
)
turn = st.fixed_dictionaries(
    {
        "role": either("user", "assistant", "system"),
        "content": st.one_of(text, st.lists(block, max_size=3)),
    }
)

TEMPLATE = ChatTemplate(
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}",
    name="plain",
)
TEXT_ONLY = TemplateTransport(TEMPLATE)
#: How many fuzzed requests each reader took (not refused).
PARSED = {"responses": 0, "messages": 0}


def _all_text(messages: Any) -> bool:
    return all(
        isinstance(m.get("content"), str) or m.get("content") is None
        for m in messages
        if isinstance(m, Mapping)
    )


FUZZ = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(st.lists(item, max_size=3), st.one_of(st.none(), st.lists(tool, max_size=2)))
def test_responses_input_and_tools(items: list[Any], tools: list[Any] | None) -> None:
    body: dict[str, Any] = {"model": "m", "input": items or "hi"}
    if tools is not None:
        body["tools"] = tools
    try:
        call = asyncio.run(parse_responses(body))
    except RequestError as exc:
        assert exc.message
        return
    sent, _ = planned(TEXT_ONLY, call.request)
    assert _all_text(sent.messages)
    PARSED["messages"] += 1
    PARSED["responses"] += 1


@FUZZ
@given(st.lists(turn, min_size=1, max_size=4))
def test_messages_blocks(turns: list[Any]) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, *turns]}
    try:
        call = parse_messages(body)
    except RequestError as exc:
        assert exc.message
        return
    sent, _ = planned(TEXT_ONLY, call.request)
    assert _all_text(sent.messages)
    PARSED["messages"] += 1


def test_the_fuzzing_reaches_well_formed_requests() -> None:
    """Enough of the fuzzed requests are read (not refused) for the two above to mean
    something: run again, counted."""
    PARSED.update(responses=0, messages=0)
    test_responses_input_and_tools()
    test_messages_blocks()
    # the count moves with what the strategies draw (14 to 36 seen): at least ten of each
    assert PARSED["responses"] >= 10 and PARSED["messages"] >= 10, PARSED

"""Rendering chat templates: every published fixture, the sandbox, the limits, the shaping."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.errors import LimitError, TemplateError, TemplateLimitError, TemplateSecurityError
from toolwire.messages import ToolCall
from toolwire.templates import (
    ChatTemplate,
    TemplateBudget,
    load_template,
    normalize_tools,
    shape_messages,
)
from toolwire.templates import budget as budget_module
from toolwire.templates.sandbox import MAX_OUTPUT_CHARS, MAX_TEMPLATE_BYTES
from toolwire.templates.shaping import Arguments, alnum9

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
SOURCES: dict[str, dict[str, Any]] = json.loads((FIXTURES / "sources.json").read_text())
NAMES = sorted(p.name for p in FIXTURES.glob("*.jinja"))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city's name."},
                    "days": {"type": "integer", "description": "How many days ahead."},
                },
                "required": ["city"],
            },
        },
    }
]
PLAIN = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a joke"},
]
TOOL_CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What will the weather be in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "sunny"}'},
    {"role": "assistant", "content": "It will be sunny."},
    {"role": "user", "content": "Thanks, and the day after?"},
]

#: Templates that take no system message: they get the plain conversation without one.
NO_SYSTEM = {"google-gemma-2-2b-it.jinja"}
#: Named ``tool_use`` variants: they exist to render tools and iterate them unconditionally.
TOOLS_REQUIRED = {
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
}
#: Templates that print no generation prompt at all (the model's turn needs no header).
NO_GENERATION_PROMPT = {
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    "fireworks-ai-llama-3-firefunction-v2.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja",
    "tencent-Hunyuan-A13B-Instruct.jinja",  # never reads add_generation_prompt
}
#: Templates that take their tools and date as variables of their own (fireworks' serving).
EXTRA_VARIABLES = {
    "fireworks-ai-llama-3-firefunction-v2.jinja": {
        "functions": json.dumps([tool["function"] for tool in TOOLS]),
        "datetime": "2024-07-01",
    }
}


def fixture(name: str) -> ChatTemplate:
    return ChatTemplate((FIXTURES / name).read_text(encoding="utf-8"), name=name, bos_token="<s>")


def call_ids(name: str) -> str:
    """Mistral's templates demand nine-alphanumeric call ids."""
    return "alnum9" if "mistral" in name.lower() else "keep"


# --- fixtures are the published bytes ------------------------------------------------------------


def test_every_fixture_matches_sources_json() -> None:
    assert sorted(SOURCES) == NAMES
    for name in NAMES:
        data = (FIXTURES / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == SOURCES[name]["sha256"], name
        assert len(data) == SOURCES[name]["bytes"], name


def test_template_sha256_is_the_file_checksum() -> None:
    name = "Qwen-Qwen2.5-7B-Instruct.jinja"
    assert fixture(name).sha256 == SOURCES[name]["sha256"]
    assert ChatTemplate("a", tool_source="b").sha256 != ChatTemplate("ab").sha256


# --- every published template renders ------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_plain_conversation_renders(name: str) -> None:
    template = fixture(name)
    messages = PLAIN[1:] if name in NO_SYSTEM else PLAIN
    tools = TOOLS if name in TOOLS_REQUIRED else None
    extra = EXTRA_VARIABLES.get(name, {})
    prompt = template.render(messages, tools, **extra)
    without = template.render(messages, tools, add_generation_prompt=False, **extra)
    assert "Tell me a joke" in prompt
    assert "Hello! How can I help?" in prompt
    if name in NO_GENERATION_PROMPT:
        assert prompt == without
    else:
        assert prompt != without


def test_a_template_raises_its_own_message() -> None:
    with pytest.raises(TemplateError, match="System role not supported"):
        fixture("google-gemma-2-2b-it.jinja").render(PLAIN)


@pytest.mark.parametrize(
    "name", [n for n in NAMES if "tools" in (FIXTURES / n).read_text(encoding="utf-8")]
)
def test_tool_conversation_renders(name: str) -> None:
    template = fixture(name)
    messages = TOOL_CONVERSATION[1:] if name in NO_SYSTEM else TOOL_CONVERSATION
    prompt = template.render(
        messages, TOOLS, call_ids=call_ids(name), **EXTRA_VARIABLES.get(name, {})
    )
    for text in ("get_weather", "Paris", "sunny", "It will be sunny.", "the day after?"):
        assert text in prompt, text


def test_mistral_refuses_ids_that_are_not_alnum9() -> None:
    template = fixture("mistralai-Mistral-Nemo-Instruct-2407.jinja")
    with pytest.raises(TemplateError, match="alphanumeric strings with length 9"):
        template.render(TOOL_CONVERSATION, TOOLS)
    assert alnum9("call_1") in template.render(TOOL_CONVERSATION, TOOLS, call_ids="alnum9")


def test_qwen_renders_tools_and_calls_as_trained() -> None:
    prompt = fixture("Qwen-Qwen2.5-7B-Instruct.jinja").render(TOOL_CONVERSATION, TOOLS)
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in prompt
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'
        "</tool_call><|im_end|>"
    ) in prompt
    assert '<tool_response>\n{"forecast": "sunny"}\n</tool_response>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_arguments_print_as_json_where_a_template_wants_text() -> None:
    # functionary v3.2 concatenates the arguments to a string.
    prompt = fixture("meetkai-functionary-medium-v3.2.jinja").render(TOOL_CONVERSATION, TOOLS)
    assert '>>>get_weather\n{"city": "Paris", "days": 3}<|eot_id|>' in prompt


def test_kimi_queues_call_ids_in_its_namespace() -> None:
    prompt = fixture("Kimi-K2-Instruct.jinja").render(TOOL_CONVERSATION, TOOLS)
    assert "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" in prompt
    assert "## Return of functions.get_weather:0" in prompt


def test_enable_thinking_reaches_the_template_only_when_set() -> None:
    qwen3 = fixture("Qwen-Qwen3-0.6B.jinja")
    assert qwen3.render(PLAIN, enable_thinking=False).endswith("<think>\n\n</think>\n\n")
    assert qwen3.render(PLAIN).endswith("<|im_start|>assistant\n")
    probe = ChatTemplate("{{ enable_thinking is defined }}")
    assert probe.render([]) == "False"
    assert probe.render([], enable_thinking=True) == "True"


# --- variables -----------------------------------------------------------------------------------


def test_tools_are_none_without_tools_and_openai_shaped_with() -> None:
    probe = ChatTemplate("{{ tools is none }}|{{ tools | tojson if tools else '' }}")
    assert probe.render([]) == "True|"
    assert probe.render([], []) == "True|"
    bare = {"name": "f", "description": "d"}
    out = probe.render([], [bare])
    assert out == (
        'False|[{"type": "function", "function": {"name": "f", "description": "d", '
        '"parameters": {"type": "object", "properties": {}}}}]'
    )


def test_special_tokens_and_extra_variables() -> None:
    probe = ChatTemplate(
        "{{ bos_token }}|{{ eos_token }}|{{ today }}", bos_token="<s>", eos_token="</s>"
    )
    assert probe.render([], today="Monday") == "<s>|</s>|Monday"
    assert probe.render([], bos_token="") == "|</s>|"


def test_tool_use_source_is_used_only_with_tools() -> None:
    template = ChatTemplate("default", tool_source="tools: {{ tools[0].function.name }}")
    assert template.render([]) == "default"
    assert template.render([], [{"name": "f"}]) == "tools: f"


def test_end_tokens_are_eos_then_extra_deduplicated() -> None:
    template = ChatTemplate("", eos_token="<|im_end|>", end_tokens=["", "<|eot|>", "<|im_end|>"])
    assert template.end_tokens == ("<|im_end|>", "<|eot|>")
    assert ChatTemplate("").end_tokens == ()


def test_generation_tag_renders_its_body() -> None:
    source = (
        "{% for m in messages %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}"
    )
    assert ChatTemplate(source).render([{"role": "user", "content": "a"}]) == "[a]"


def test_strftime_now_and_loop_controls() -> None:
    out = ChatTemplate(
        "{{ strftime_now('%Y') }}{% for i in range(9) %}{% if i > 1 %}{% break %}{% endif %}"
        "{{ i }}{% endfor %}"
    ).render([])
    assert out[:4].isdigit()
    assert out[4:] == "01"


def test_concurrent_renders_agree() -> None:
    template = fixture("Qwen-Qwen2.5-7B-Instruct.jinja")
    expected = template.render(TOOL_CONVERSATION, TOOLS)
    results: list[str] = []

    def work() -> None:
        for _ in range(20):
            results.append(template.render(TOOL_CONVERSATION, TOOLS))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 80


# --- tojson --------------------------------------------------------------------------------------


def render(source: str, **variables: Any) -> str:
    return ChatTemplate(source).render([], **variables)


def test_tojson_keeps_non_ascii_and_html_characters() -> None:
    assert render("{{ x | tojson }}", x={"city": "Zürich <&>'"}) == '{"city": "Zürich <&>\'"}'
    assert render("{{ x | tojson(ensure_ascii=True) }}", x="é") == '"\\u00e9"'


def test_tojson_honours_indent_separators_sort_keys() -> None:
    x = {"b": 1, "a": [1, 2]}
    assert render("{{ x | tojson(indent=2) }}", x=x) == json.dumps(x, indent=2)
    assert render("{{ x | tojson(separators=(',', ':')) }}", x=x) == '{"b":1,"a":[1,2]}'
    assert render("{{ x | tojson(sort_keys=True) }}", x=x) == '{"a": [1, 2], "b": 1}'


def test_tojson_result_is_plain_text() -> None:
    # A Markup result would HTML-escape whatever is appended to it.
    assert render("{{ x | tojson + '<b>' }}", x=1) == "1<b>"


def test_tojson_serialises_jinja_generators() -> None:
    out = render(
        "{{ items | map(attribute='name') | tojson }}", items=[{"name": "a"}, {"name": "b"}]
    )
    assert out == '["a", "b"]'


# --- the sandbox ---------------------------------------------------------------------------------


ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ self.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ lipsum.__globals__['os'].popen('touch MARKER') }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ config.__class__ }}",
    "{{ ''.__class__ }}",
    "{{ messages.__class__.__base__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ range.__globals__ }}",
    "{{ '{0.__class__}'.format('') }}",
    "{% set x = [] %}{{ x.append(1) }}",
    "{% set d = {} %}{{ d.update({'a': 1}) }}",
    "{{ messages.append(1) }}",
    "{{ messages[0].update({'role': 'x'}) }}",
    "{{ messages[0].clear() }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_sandbox_refuses_escapes(source: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    messages = [{"role": "user", "content": "hi"}]
    before = copy.deepcopy(messages)
    with pytest.raises(TemplateSecurityError, match=r"unsafe|not safely callable"):
        ChatTemplate(source.replace("MARKER", str(marker))).render(messages)
    assert not marker.exists()
    assert messages == before


@pytest.mark.parametrize("source", ["{{ request.application }}", "{{ url_for.__globals__ }}"])
def test_unknown_names_are_template_errors(source: str) -> None:
    with pytest.raises(TemplateError):
        ChatTemplate(source).render([])


def test_raise_exception_message_and_line() -> None:
    with pytest.raises(TemplateError, match=r"t raised \(line 3\): roles must alternate$"):
        ChatTemplate("a\nb\n{{ raise_exception('roles must alternate') }}", name="t").render([])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{% for x in %}", "syntax error on line 1"),
        ("{{ x | no_such_filter }}", "no_such_filter"),
        ("{{ 1 + 'a' }}", "TypeError"),
        ("{{ {}['a']['b'] }}", "has no attribute 'a'"),
        ("{{ (1 / 0) }}", "ZeroDivisionError"),
        ("{{ '' | from_json }}", "JSONDecodeError"),
        ("{{ 10.0 ** 400 }}", "OverflowError"),
    ],
)
def test_template_failures_become_template_errors(source: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        ChatTemplate(source, name="t").render([])


# --- the limits ----------------------------------------------------------------------------------


LIMITS = [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% set s = 'x' * 100000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
    "{% for i in range(1000) %}{{ range(100000) | join | length }}{% endfor %}",
    "{{ range(1000000) | list | length }}",
    "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
    "{{ 'a' * 1000000000 }}",
    "{{ [0] * 1000000000 }}",
    "{{ 2 ** 100000 }}",
    "{{ 'x' | center(1000000000) }}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}",
    "{% macro f(s, n) %}{% if n < 64 %}{{ f(s ~ s, n + 1) }}{% endif %}{% endmacro %}"
    "{{ f('a', 0) }}",
    "{% set ns = namespace(s='a' * 4000000) %}{% set x %}{% for i in range(1000) %}{{ ns.s }}"
    "{% endfor %}{% endset %}{{ x | length }}",
    "{% set ns = namespace(s='a' * 4000000) %}{{ '%s%s' % (ns.s, ns.s) }}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{% set big = [0] * 4000000 %}{% set ns = namespace(x=[]) %}{% for i in range(100) %}"
    "{% set ns.x = big %}{% endfor %}",
]


@pytest.mark.parametrize("source", LIMITS)
def test_limits(source: str) -> None:
    with pytest.raises(LimitError):
        ChatTemplate(source).render([])


def test_output_limit_counts_characters() -> None:
    times = MAX_OUTPUT_CHARS // 1024
    exact = "{% for i in range(" + str(times) + ") %}{{ 'x' * 1024 }}{% endfor %}"
    assert len(ChatTemplate(exact).render([])) == MAX_OUTPUT_CHARS
    with pytest.raises(LimitError, match="rendered prompt"):
        ChatTemplate(exact + "!").render([])


def test_slow_loops_stop_at_the_deadline() -> None:
    slow = "{% set big = [0] * 100000 %}{% for i in range(100000) %}{{ big | join | length }}"
    budget = TemplateBudget(seconds=0.2, memory=10**12)
    with pytest.raises(TemplateLimitError, match=r"0\.2 s"):
        ChatTemplate(slow + "{% endfor %}").render([], budget=budget)
    assert budget.exhausted


def test_budget_is_per_render(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a budget of its own, each render gets a fresh default one.
    monkeypatch.setattr(budget_module, "MAX_ITERATIONS", 1000)
    loop = ChatTemplate("{% for i in range(300) %}{% endfor %}")  # 600 units: loop and range
    for _ in range(5):
        assert loop.render([]) == ""
    with pytest.raises(TemplateLimitError, match="1,000 loop iterations"):
        ChatTemplate("{% for i in range(600) %}{% endfor %}").render([])


def test_source_size_limit() -> None:
    ChatTemplate("x" * MAX_TEMPLATE_BYTES)
    with pytest.raises(TemplateError, match="bytes"):
        ChatTemplate("x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(TemplateError, match="tool_use"):
        ChatTemplate("", tool_source="é" * MAX_TEMPLATE_BYTES)


FRAGMENTS = [
    "{{", "}}", "{%", "%}", " for x in ", " endfor ", " if ", " endif ", " set ns = ", " else ",
    "range(", ")", "(", "[", "]", ",", "messages", "tools", "x", "ns", "namespace(", "'a'",
    "9", "99999", "*", "**", "+", "~", "%", "|tojson", "|length", "|join", ".__class__",
    ".content", "[0]", "loop.index", "raise_exception(", "cycler", "macro m()", "endmacro",
    "m()", "caller()", "\n", "text",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join))
def test_only_toolwire_errors_escape_render(source: str) -> None:
    template = ChatTemplate(source)
    try:
        out = template.render([{"role": "user", "content": "hi"}], [{"name": "f"}])
    except (TemplateError, LimitError):
        return
    assert isinstance(out, str)


# --- load_template -------------------------------------------------------------------------------


def test_load_template_from_a_jinja_file() -> None:
    template = load_template(FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja")
    assert template.name == "Qwen-Qwen2.5-7B-Instruct"
    assert template.sha256 == SOURCES["Qwen-Qwen2.5-7B-Instruct.jinja"]["sha256"]


def test_load_template_refusals(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="cannot read"):
        load_template(tmp_path / "missing.jinja")
    big = tmp_path / "big.jinja"
    big.write_text("x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(TemplateError, match="over"):
        load_template(big)
    latin = tmp_path / "latin.jinja"
    latin.write_bytes(b"caf\xe9")
    with pytest.raises(TemplateError, match="not UTF-8"):
        load_template(latin)


# --- shape_messages ------------------------------------------------------------------------------


def test_shape_messages_makes_template_ready_copies() -> None:
    before = copy.deepcopy(TOOL_CONVERSATION)
    shaped = shape_messages(TOOL_CONVERSATION)
    assert before == TOOL_CONVERSATION
    call = shaped[2]["tool_calls"][0]
    assert shaped[2]["content"] == ""
    assert call == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
    }
    assert isinstance(call["function"]["arguments"], Arguments)
    assert str(call["function"]["arguments"]) == '{"city": "Paris", "days": 3}'
    assert shaped[3]["name"] == "get_weather"
    shaped[0]["content"] = "changed"
    assert TOOL_CONVERSATION[0]["content"] == "You are a helpful assistant."


def test_shape_messages_keeps_what_is_not_a_json_object() -> None:
    calls = [
        {"id": "a", "function": {"name": "f", "arguments": "not json"}},
        {"id": "b", "function": {"name": "f", "arguments": "[1, 2]"}},
        {"id": "c", "function": {"name": "f"}},
    ]
    shaped = shape_messages([{"role": "assistant", "tool_calls": calls}])[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in shaped] == ["not json", "[1, 2]", {}]


def test_shape_messages_content_parts_are_kept() -> None:
    parts = [{"type": "text", "text": "hi"}]
    assert shape_messages([{"role": "user", "content": parts}])[0]["content"] == parts


def test_alnum9_ids_match_between_calls_and_results() -> None:
    shaped = shape_messages(TOOL_CONVERSATION, call_ids="alnum9")
    call_id = shaped[2]["tool_calls"][0]["id"]
    assert len(call_id) == 9 and call_id.isascii() and call_id.isalnum()
    assert shaped[3]["tool_call_id"] == call_id
    assert shape_messages(TOOL_CONVERSATION, call_ids="alnum9") == shaped
    assert alnum9("abcDEF123") == "abcDEF123"
    assert alnum9("call_1") != alnum9("call_2")
    assert shape_messages(TOOL_CONVERSATION)[2]["tool_calls"][0]["id"] == "call_1"


def test_shape_messages_accepts_toolcall_and_flat_calls_and_fills_ids() -> None:
    messages = [
        {
            "role": "assistant",
            "tool_calls": [
                ToolCall("t1", "get_weather", {"city": "Paris"}),
                {"name": "get_time", "arguments": {"tz": "CET"}},
            ],
        },
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "noon"},
    ]
    shaped = shape_messages(messages)
    calls = shaped[0]["tool_calls"]
    assert calls[0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert calls[1]["id"] == "call_1"
    assert [m["tool_call_id"] for m in shaped[1:]] == ["t1", "call_1"]
    assert [m["name"] for m in shaped[1:]] == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    "messages",
    [
        ["not a mapping"],
        [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}],
        [{"role": "assistant", "tool_calls": ["call"]}],
    ],
)
def test_shape_messages_refuses_malformed_input(messages: list[Any]) -> None:
    with pytest.raises(ValueError):
        shape_messages(messages)


def test_shape_messages_refuses_unknown_call_id_mode() -> None:
    with pytest.raises(ValueError, match="call_ids"):
        shape_messages([], call_ids="short")  # type: ignore[arg-type]


# --- normalize_tools -----------------------------------------------------------------------------


def test_normalize_tools_shapes() -> None:
    openai = TOOLS[0]
    bare = {"name": "f", "description": "d"}
    flat = {"type": "function", "name": "g", "parameters": {"type": "object", "properties": {}}}
    before = copy.deepcopy([openai, bare, flat])
    out = normalize_tools([openai, bare, flat])
    assert [openai, bare, flat] == before
    assert out[0] == openai and out[0] is not openai
    assert out[1] == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert out[2] == {
        "type": "function",
        "function": {"name": "g", "parameters": flat["parameters"]},
    }


@pytest.mark.parametrize(
    "tool",
    [
        {"description": "no name"},
        {"type": "function", "function": {"name": ""}},
        {"type": "retrieval"},
        "f",
    ],
)
def test_normalize_tools_refuses_tools_without_a_name(tool: Any) -> None:
    with pytest.raises(ValueError, match="tool 0"):
        normalize_tools([tool])

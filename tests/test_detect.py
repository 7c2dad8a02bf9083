"""Detection of every fixture template, and round trips through the real templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import ChatTemplate, detect_format, get_family, load_template, resolve_format
from toolwire.errors import FormatError, LimitError
from toolwire.formats.detect import assistant_text
from toolwire.messages import ToolCall

from .prepared import prepared, typed
from .replies import CODE, TOOLS

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

# The family each published template teaches, read from the template by hand.
EXPECTED = {
    "Qwen3-Coder.jinja": "qwen-xml",
    "Qwen3.5-4B.jinja": "qwen-xml",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen-xml",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "Bielik-11B-v3.0-Instruct.jinja": "hermes",
    "MiMo-VL.jinja": "hermes",
    "Reka-Edge.jinja": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
    "GLM-4.6.jinja": "glm",
    "poolside-Laguna-S-2.1.jinja": "glm",
    "poolside-Laguna-XS-2.1.jinja": "glm",
    "Kimi-K2-Instruct.jinja": "kimi-k2",
    "moonshotai-Kimi-K2.jinja": "kimi-k2",
    "MiniMax-M2.jinja": "minimax",
    # Templates that ignore tools or write calls in a grammar toolwire does not speak yet.
    "Apertus-8B-Instruct.jinja": "apertus",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
    "ByteDance-Seed-OSS.jinja": "seed-oss",
    "Cohere2MoE.jinja": "command-r7b",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command-r-plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command-r7b",
    "GigaChat3-10B-A1.8B.jinja": "gigachat",
    "HuggingFaceTB-SmolLM3-3B.jinja": "none",
    "Kimi-K3.jinja": "kimi-k3",
    "LFM2-8B-A1B.jinja": "lfm2",
    "LFM2.5-8B-A1B.jinja": "lfm2",
    "MiniMax-M3.jinja": "minimax-m3",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron-v2",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3.1",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek-dsml",
    "deepseek-ai-DeepSeek-V4.jinja": "deepseek-dsml",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction",
    "google-gemma-2-2b-it.jinja": "none",
    "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
    "google-gemma-4-31B-it.jinja": "gemma4",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "llama-cpp-deepseek-r1.jinja": "deepseek-r1",
    "llama-cpp-rwkv-world.jinja": "none",
    "meetkai-functionary-medium-v3.1.jinja": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2.jinja": "functionary-v3.2",
    "microsoft-Phi-3.5-mini-instruct.jinja": "none",
    "muse-glimmer.jinja": "glimmer",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
    "unsloth-Apriel-1.5.jinja": "apriel",
    # Hunyuan A13B writes Apriel's grammar, <tool_calls>[...]</tool_calls>
    "tencent-Hunyuan-A13B-Instruct.jinja": "apriel",
}
#: Families whose templates render one call a turn.
ONE_CALL_A_TURN = frozenset({"llama3", "gigachat", "gpt-oss"})
WITH_FAMILY = sorted(k for k, v in EXPECTED.items() if v != "none")
# Found from the prompt (``via="prompt"``): the template never writes an assistant's calls,
# so there is no rendering of calls to read back.
PROMPT_ONLY = {"ibm-granite-granite-3.3-2B-Instruct.jinja", "LFM2-8B-A1B.jinja"}


def family_of(name: str) -> Any:
    """The family a row names; ``derived`` is the grammar learned from that template."""
    if EXPECTED[name] == "derived":
        return detect_format(template(name)).family
    return get_family(EXPECTED[name])


def template(name: str) -> ChatTemplate:
    return load_template(FIXTURES / name)


def test_the_table_covers_every_fixture() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in FIXTURES.glob("*.jinja"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detection(name: str) -> None:
    assert detect_format(template(name)).format == EXPECTED[name]


def test_detection_is_cached_by_hash_not_by_name() -> None:
    source = (FIXTURES / "Qwen3-Coder.jinja").read_text(encoding="utf-8")
    a = detect_format(ChatTemplate(source, name="a"))
    b = detect_format(ChatTemplate(source, name="renamed"))
    assert a is b and a.format == "qwen-xml"
    # The same grammar under other words is still found: no source fingerprints.
    edited = source.replace("If you choose to call a tool", "When calling a tool")
    assert edited != source
    assert detect_format(ChatTemplate(edited)).format == "qwen-xml"


def test_a_template_that_only_mentions_tool_call_is_none() -> None:
    fake = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if tools %}Use <tool_call> tags!{% endif %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    assert detect_format(ChatTemplate(fake)).format == "none"


def test_generation_prompt_that_opens_thinking() -> None:
    found = detect_format(template("Qwen3.5-4B.jinja"))
    assert found.reasoning_open and found.format == "qwen-xml"
    assert not detect_format(template("Qwen3-Coder.jinja")).reasoning_open


def test_resolve_format_setting() -> None:
    qwen = template("Qwen-Qwen2.5-7B-Instruct.jinja")
    assert resolve_format("auto", qwen) is get_family("hermes")
    assert resolve_format("none", qwen) is None
    assert resolve_format("mistral", qwen) is get_family("mistral")
    assert resolve_format("auto", template("microsoft-Phi-3.5-mini-instruct.jinja")) is None
    with pytest.raises(FormatError):
        resolve_format("auto")
    with pytest.raises(FormatError):
        resolve_format("xml")


# ------------------------------------------------------------------ round trips

CALLS = [
    ToolCall("call_one", "write_file", {"path": "src/a.py", "content": CODE}),
    ToolCall(
        "call_two",
        "set_flags",
        {"enabled": True, "tags": ["x", "y z"], "options": {"deep": {"n": [1, 2.5]}}},
    ),
]
USER = {"role": "user", "content": "Write the file and set the flags."}

# Hermes 2 Pro's template recurses forever on a type list holding a type it does not map
# ("null" is a string, and it iterates strings): the sandbox stops it (see below), so these
# round trips use tools every template can describe.
PLAIN_TOOLS = json.loads(json.dumps(TOOLS))
del PLAIN_TOOLS[2]["parameters"]["properties"]["ratio"]
# Command R+'s template writes every parameter's description and an object's value type,
# and fails on a parameter without them.
for _tool in PLAIN_TOOLS:
    for _key, _prop in _tool.get("function", _tool)["parameters"]["properties"].items():
        _prop.setdefault("description", f"The {_key}.")
        if _prop.get("type") == "object":
            _prop.setdefault("additionalProperties", {})


def test_a_template_that_recurses_forever_is_stopped() -> None:
    tpl = template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")
    with pytest.raises(LimitError, match="recursion"):
        tpl.render([USER], TOOLS)
    assert "set_flags" in tpl.render([USER], PLAIN_TOOLS)


def _assistant(calls: list[ToolCall]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in calls]}


# These templates write a list or an object through Jinja's own rendering, which is Python's
# syntax (['x', 'y z']), as their models then write it too: reading it is a named repair.
PYTHON_SYNTAX_TEMPLATES = {"ByteDance-Seed-OSS.jinja", "openbmb-MiniCPM5-1B.jinja"}
PYTHON_SYNTAX = {"single-quotes", "json-from-string"}


@pytest.mark.parametrize("name", sorted(set(WITH_FAMILY) - PROMPT_ONLY))
def test_calls_rendered_by_the_template_parse_back_typed(name: str) -> None:
    tpl = template(name)
    family = family_of(name)
    # Llama 3 writes one call a turn; the GigaChat and gpt-oss templates render only a turn's
    # first call (gpt-oss: "We assume max 1 tool call per message"): the model writes each in
    # its own message
    calls = CALLS[:1] if family.name in ONE_CALL_A_TURN else CALLS
    text, opened = assistant_text(
        tpl,
        [USER],
        [_assistant(calls)],
        PLAIN_TOOLS,
        call_ids=family.call_ids,
        keep_call_none=detect_format(tpl).none_content,
    )
    result = family.parse(text, PLAIN_TOOLS, reasoning_open=opened)
    # typed once by the argument pipeline, as every call is before it runs
    assert [(c.name, typed(c, PLAIN_TOOLS)) for c in result.calls] == [
        (c.name, c.arguments) for c in calls
    ]
    for call in result.calls:
        if call.text_values:  # the XML templates write values as text, True as "True"
            assert set(prepared(call, PLAIN_TOOLS).repairs) <= {"python-literals"} | (
                PYTHON_SYNTAX if name in PYTHON_SYNTAX_TEMPLATES else set()
            )
        else:  # JSON templates write the values themselves: nothing left to type
            assert (call.name, call.arguments) in [(c.name, c.arguments) for c in calls]
    assert result.content.strip() == ""


@pytest.mark.parametrize("name", WITH_FAMILY)
def test_whole_tool_conversation_renders(name: str) -> None:
    tpl = template(name)
    family = family_of(name)
    call = ToolCall("call_weather_1", "get_weather", {"city": "Paris", "days": 3})
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call.to_openai()]},
        {
            "role": "tool",
            "tool_call_id": call.id,
            "name": call.name,
            "content": json.dumps({"forecast": "sunny-and-mild"}),
        },
        {"role": "assistant", "content": "Sunny and mild."},
        {"role": "user", "content": "Thanks! And tomorrow?"},
    ]
    prompt = tpl.render(
        messages,
        PLAIN_TOOLS,
        add_generation_prompt=True,
        call_ids=family.call_ids,
        keep_call_none=detect_format(tpl).none_content,
    )
    for needle in ("get_weather", "sunny-and-mild", "Sunny and mild.", "And tomorrow?"):
        assert needle in prompt


def test_gguf_default_model_is_hermes(qwen_gguf: Path) -> None:
    tpl = load_template(qwen_gguf)
    found = detect_format(tpl)
    assert found.format == "hermes"
    assert "<tool_call>" in found.call_text and tpl.eos_token == "<|im_end|>"


def test_gguf_smollm2_has_no_tool_format(smollm2_gguf: Path) -> None:
    assert detect_format(load_template(smollm2_gguf)).format == "none"

"""A turn of parallel calls, and an assistant's reasoning, rendered through templates that
want them their own way (gpt-oss, Llama 3, GigaChat render one call per message)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire import get_family, load_template
from toolwire.errors import TemplateError
from toolwire.messages import ToolCall
from toolwire.templates.shaping import shape_messages

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"

A = ToolCall("call_a", "get_weather", {"city": "Paris"})
B = ToolCall("call_b", "get_time", {"city": "Rome"})
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": "Look it up.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city."}},
            },
        },
    }
    for name in ("get_weather", "get_time")
]


def _turn(reasoning: str = "") -> list[dict[str, Any]]:
    assistant: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [A.to_openai(), B.to_openai()],
    }
    if reasoning:
        assistant["reasoning_content"] = reasoning
    return [
        {"role": "user", "content": "The weather here, and the time there?"},
        assistant,
        # the results in the other order: each still follows its own call
        {"role": "tool", "tool_call_id": "call_b", "content": "noon-result"},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny-result"},
    ]


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("openai-gpt-oss-120b.jinja", "gpt-oss"),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"),
        ("GigaChat3-10B-A1.8B.jinja", "gigachat"),
    ],
)
def test_each_call_is_its_own_message_followed_by_its_result(name: str, family: str) -> None:
    assert get_family(family).one_call_per_message
    prompt = load_template(FIXTURES / name).render(_turn(), TOOLS, one_call_per_message=True)
    where = [prompt.find(text) for text in ("Paris", "sunny-result", "Rome", "noon-result")]
    assert -1 not in where and where == sorted(where), where


def test_without_the_split_a_template_loses_or_refuses_the_second_call() -> None:
    gpt_oss = load_template(FIXTURES / "openai-gpt-oss-120b.jinja").render(_turn(), TOOLS)
    assert "Rome" not in gpt_oss  # it renders only a turn's first call
    with pytest.raises(TemplateError, match="single tool-calls"):
        load_template(FIXTURES / "meta-llama-Llama-3.1-8B-Instruct.jinja").render(_turn(), TOOLS)


def test_the_split_keeps_text_and_reasoning_with_the_first_call() -> None:
    turn = _turn("I will look both up")
    turn[1]["content"] = "Checking."
    shaped = shape_messages(turn, one_call_per_message=True)
    assert [m["role"] for m in shaped] == ["user", "assistant", "tool", "assistant", "tool"]
    first, second = shaped[1], shaped[3]
    assert first["content"] == "Checking." and first["reasoning_content"] == "I will look both up"
    assert second["content"] == "" and "reasoning_content" not in second
    assert [m["tool_call_id"] for m in (shaped[2], shaped[4])] == ["call_a", "call_b"]
    # a result that answers no call of the turn is kept, after the turn
    stray = [*_turn(), {"role": "tool", "tool_call_id": "call_zzz", "content": "stray"}]
    assert shape_messages(stray, one_call_per_message=True)[-1]["content"] == "stray"


def test_reasoning_reaches_gpt_oss_as_its_analysis_channel() -> None:
    prompt = load_template(FIXTURES / "openai-gpt-oss-120b.jinja").render(
        _turn("I will look both up"), TOOLS, one_call_per_message=True
    )
    assert "<|channel|>analysis<|message|>I will look both up<|end|>" in prompt


def test_reasoning_goes_by_both_names_but_never_beside_calls_and_content() -> None:
    (shaped,) = shape_messages([{"role": "assistant", "content": "x", "thinking": "hmm"}])
    assert shaped["reasoning_content"] == "hmm"
    (shaped,) = shape_messages(
        [
            {
                "role": "assistant",
                "content": "Let me check.",
                "reasoning_content": "hmm",
                "tool_calls": [A.to_openai()],
            }
        ]
    )
    assert "thinking" not in shaped  # gpt-oss refuses content and thinking beside a call
    (shaped,) = shape_messages([{"role": "user", "content": "q", "reasoning_content": "r"}])
    assert "thinking" not in shaped

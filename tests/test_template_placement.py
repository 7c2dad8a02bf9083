"""Where a template takes what the conversation holds, when that is not where the standard
shape puts it: Kimi's call ids that name their call, and tools as a text on the system
message (Phi-4-mini's template)."""

from __future__ import annotations

import json
from pathlib import Path

from toolwire import ChatTemplate, get_family, load_template

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"


def test_kimi_s_templates_get_ids_that_name_their_call() -> None:
    """Kimi's templates write a call as ``functions.NAME:N`` and a result by its
    ``tool_call_id``: a client's own id (``call_abc``) is written as the id the call got, so
    the result still names its call (moonshotai's Kimi K2 template wrote ``Return of
    call_abc`` after ``functions.get_weather:0``)."""
    assert get_family("kimi-k2").call_ids == "functions"
    tpl = load_template(FIXTURES / "moonshotai-Kimi-K2.jinja")
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "functions.get_time:1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "sunny"},
        {"role": "tool", "tool_call_id": "functions.get_time:1", "content": "noon"},
    ]
    text = tpl.render(messages, call_ids="functions")
    assert "Return of functions.get_weather:0" in text
    assert "Return of functions.get_time:1" in text  # an id already so is kept
    assert "call_abc" not in text
    assert "Return of call_abc" in tpl.render(messages, call_ids="keep")


def test_a_template_that_takes_its_tools_on_the_system_message_gets_them_there() -> None:
    """Phi-4-mini's template reads no ``tools`` variable: it writes a system message's own
    ``tools`` text. Learned by rendering (once a template), the tools go there, the system
    message made when the conversation has none; a template that reads ``tools`` is left
    as it is."""
    unseen = Path(__file__).parent / "fixtures" / "unseen_templates"
    tpl = load_template(unseen / "microsoft-Phi-4-mini-instruct-tools-on-system.jinja")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    user = {"role": "user", "content": "hi"}
    text = tpl.render([user], tools)
    assert text.startswith('<|system|><|tool|>[{"name": "get_weather"')
    assert text.endswith("<|/tool|><|end|><|user|>hi<|end|><|assistant|>")
    kept = tpl.render([{"role": "system", "content": "Be brief."}, user], tools)
    assert kept.startswith("<|system|>Be brief.<|tool|>[") and "get_weather" in kept
    assert tpl.render([user]) == "<|user|>hi<|end|><|assistant|>"  # no tools: as it was
    # a template that reads the tools variable gets them there, its messages untouched
    reads = ChatTemplate("{{ messages | tojson }}|{{ tools | length }}")
    assert reads.render([user], tools) == json.dumps([user]) + "|1"

"""A stored tool exchange replays in each backend's encoding, and a conversation's own
format is the one its replies are read in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import load_template
from toolwire.backends import Request, stream_sync
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.backends.ollama import to_ollama
from toolwire.conversation import Conversation
from toolwire.events import CallEnd, ToolRun
from toolwire.loop import run_loop_sync
from toolwire.messages import ToolCall, assistant_message, tool_message
from toolwire.testing import ScriptedLlama
from toolwire.tools import Toolbox

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"
CALL = ToolCall(
    "call_7Xq", "get_weather", {"city": "Oslo", "days": 2}, '{"city": "Oslo", "days": 2}'
)
STORED = [
    {"role": "user", "content": "Weather in Oslo?"},
    assistant_message("", [CALL]),
    tool_message(CALL.id, CALL.name, "rain, 7 C"),
    {"role": "assistant", "content": "Rain, 7 C."},
    {"role": "user", "content": "And tomorrow?"},
]
TOOLS = [
    {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    }
]


def test_openai_wire() -> None:
    assistant = STORED[1]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["function"]["arguments"] == CALL.arguments_text
    assert STORED[2] == {
        "role": "tool",
        "tool_call_id": "call_7Xq",
        "name": "get_weather",
        "content": "rain, 7 C",
    }
    json.dumps(STORED)  # plain JSON


def test_ollama_encoding() -> None:
    out = to_ollama(STORED)
    assert out[1]["tool_calls"] == [
        {"function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}}
    ]
    assert out[2] == {"role": "tool", "content": "rain, 7 C", "tool_name": "get_weather"}


@pytest.mark.parametrize(
    ("name", "call_text"),
    [
        ("Qwen-Qwen2.5-7B-Instruct.jinja", '<tool_call>\n{"name": "get_weather", "arguments": '),
        ("Qwen3-Coder.jinja", "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>"),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", '"parameters": {"city": "Oslo", "days": 2}'),
        ("mistralai-Mistral-Nemo-Instruct-2407.jinja", '[TOOL_CALLS][{"name": "get_weather"'),
    ],
)
def test_template_encodings(name: str, call_text: str) -> None:
    template = load_template(FIXTURES / name)
    call_ids: Any = "alnum9" if "Mistral" in name else "keep"
    prompt = template.render(STORED, TOOLS, call_ids=call_ids)
    assert call_text in prompt and "rain, 7 C" in prompt and "And tomorrow?" in prompt


def test_the_conversations_format_wins_over_the_process_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    reply = '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}'
    backend = LlamaCppBackend("scripted", llama=ScriptedLlama(source, reply))
    assert backend.family is not None and backend.family.name == "hermes"
    monkeypatch.setenv("TOOLWIRE_TOOL_FORMAT", "hermes")
    box = Toolbox()

    @box.tool(read_only=True)
    def get_weather(city: str) -> str:
        """Weather."""
        return "rain"

    conv = Conversation(settings={"tool_format": "mistral", "max_tool_iters": 0})
    conv.add_user("Oslo?")
    request = Request(conv.messages, box.schemas(), tool_format="mistral", max_tokens=200)
    events = list(stream_sync(backend.stream(request)))
    assert [e.call.name for e in events if isinstance(e, CallEnd)] == ["get_weather"]
    # the loop passes the conversation's format on
    conv2 = Conversation(settings={"tool_format": "mistral", "max_tool_iters": 1})
    conv2.add_user("Oslo?")
    backend.llama.reply = reply
    got = []
    for event in run_loop_sync(backend, conv2, box):
        got.append(event)
        if isinstance(event, ToolRun):
            break
    assert [e.call.arguments for e in got if isinstance(e, ToolRun)] == [{"city": "Oslo"}]

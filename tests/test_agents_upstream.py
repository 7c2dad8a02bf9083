"""The scripted upstream the agent tests stand behind the gateway, checked with the official
``openai`` client: it must speak Chat Completions as providers do, or the agent tests would
prove nothing (a call cut into pieces, a usage chunk when asked, calls as text for the weak
model mode), and it must pick each tool by its shape in the request."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.agents.upstream import NO_STEP, ScriptedUpstream, answer, patch, shell

BASH: Any = {
    "type": "function",
    "function": {
        "name": "Bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
EXEC: Any = {
    "type": "function",
    "function": {
        "name": "exec_command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}
#: a custom tool as a gateway offers it upstream: a function of one string
PATCH_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "apply_patch",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}
USER: Any = [{"role": "user", "content": "go"}]


def _client(up: ScriptedUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=up.base_url, api_key="unused", max_retries=0)


def test_native_call_is_streamed_in_pieces_with_a_usage_chunk() -> None:
    with ScriptedUpstream([shell("echo hi"), answer("ok")], mode="native", piece=3) as up:
        stream = _client(up).chat.completions.create(
            model="m",
            messages=USER,
            tools=[BASH],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    pieces = [
        c.choices[0].delta.tool_calls[0].function.arguments
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    ]
    assert len(pieces) > 5
    args = json.loads("".join(p or "" for p in pieces))
    assert args["command"] == "echo hi"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0
    assert up.usage == [chunks[-1].usage.model_dump(exclude_none=True)]


def test_no_usage_chunk_unless_asked() -> None:
    with ScriptedUpstream([answer("ok")]) as up:
        chunks = list(_client(up).chat.completions.create(model="m", messages=USER, stream=True))
    assert all(c.usage is None for c in chunks)
    assert up.usage == []
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"


def test_text_mode_writes_the_call_in_the_content() -> None:
    with ScriptedUpstream([shell("ls")], mode="text") as up:
        reply = _client(up).chat.completions.create(
            model="m",
            messages=USER,
            tools=[EXEC],
        )
    message = reply.choices[0].message
    assert message.tool_calls is None
    content = message.content or ""
    assert content.startswith("<tool_call>") and content.endswith("</tool_call>")
    inner = content.removeprefix("<tool_call>").removesuffix("</tool_call>")
    assert json.loads(inner) == {"name": "exec_command", "arguments": {"cmd": "ls"}}


def _conversation(results: int) -> Any:
    messages: list[dict[str, Any]] = list(USER)
    for i in range(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out {i}"})
    return messages


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        (0, {"name": "apply_patch", "arguments": {"text": "P"}}),
        (1, {"name": "exec_command", "arguments": {"cmd": "cat f"}}),
    ],
)
def test_steps_follow_the_tool_results(results: int, expected: dict[str, Any]) -> None:
    steps = [patch("P"), shell("cat f"), answer("done")]
    with ScriptedUpstream(steps, mode="native") as up:
        reply = _client(up).chat.completions.create(
            model="m",
            messages=_conversation(results),
            tools=[EXEC, PATCH_TOOL],
        )
    call = reply.choices[0].message.tool_calls[0]
    assert {"name": call.function.name, "arguments": json.loads(call.function.arguments)} == (
        expected
    )
    assert up.requests[0]["messages"][-1]["role"] == ("tool" if results else "user")


def test_the_last_step_answers_and_a_missing_tool_says_so() -> None:
    with ScriptedUpstream([shell("x"), answer("done")]) as up:
        client = _client(up)
        done = client.chat.completions.create(model="m", messages=_conversation(1))
        lost = client.chat.completions.create(model="m", messages=USER)
    assert done.choices[0].message.content == "done"
    # no shell tool offered: the step cannot be taken, and the answer says so
    assert lost.choices[0].message.content == NO_STEP
    assert len(up.requests) == 2

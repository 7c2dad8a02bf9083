"""A call's arguments reach each API's official client as the upstream writes them.

The gateway stands over real HTTP in front of a paced upstream (real HTTP too) that writes a
call's arguments in 20 pieces over 2 seconds: as the engine's own ``tool_calls`` deltas, or
as Hermes ``<tool_call>`` text read by the family's reader. Each official client — ``openai``
streaming Chat Completions and ``responses.stream``, ``anthropic`` ``messages.stream`` —
must receive many argument deltas, the first well before the upstream's last pieces left
(bounds generous for a busy machine), and the deltas joined must be the call's final
arguments, typed by the schema.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import replace
from typing import Any

import anthropic
import pytest
from openai import OpenAI

from toolwire.backends import OpenAIBackend
from toolwire.events import Event
from toolwire.pipeline import ModelMemory, Request
from toolwire.server import create_app
from toolwire.testing import ServedApp

from .streamed_upstream import Paced, PacedUpstream, native_call, text_pieces

WRITE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "mode": {"type": "integer"},
            },
            "required": ["path", "content"],
        },
    },
}
CONTENT = "line of the file that is being written, " * 12
#: As the model writes it: the mode as text, which typing makes the integer it must be.
WRITTEN = json.dumps({"path": "notes/today.md", "content": CONTENT, "mode": "644"})
TYPED = json.dumps({"path": "notes/today.md", "content": CONTENT, "mode": 644}, ensure_ascii=False)
ASK = [{"role": "user", "content": "Write my notes."}]


class _Hermes:
    """The upstream's model writes its calls as Hermes text: read by that family."""

    def __init__(self, inner: OpenAIBackend) -> None:
        self._inner = inner
        self.name = inner.name

    def stream(self, request: Request) -> AsyncGenerator[Event, None]:
        return self._inner.stream(replace(request, tool_format="hermes"))


@pytest.fixture
def upstream() -> Iterator[PacedUpstream]:
    with PacedUpstream() as up:
        yield up


def _served(up: PacedUpstream, hermes: bool) -> ServedApp:
    backend = OpenAIBackend("m", base_url=up.base_url, memory=ModelMemory())
    return ServedApp(create_app(_Hermes(backend) if hermes else backend, model_name="gw"))


def _script(up: PacedUpstream, hermes: bool) -> Paced:
    if hermes:
        call = '<tool_call>\n{"name": "write_file", "arguments": ' + WRITTEN + "}\n</tool_call>"
        return up.add(Paced(text_pieces(call, 20), every=0.1))
    return up.add(
        Paced(
            native_call("call_1", "write_file", WRITTEN, 20), every=0.1, finish_reason="tool_calls"
        )
    )


def _check(reply: Paced, got: list[tuple[float, str]], joined: str) -> None:
    assert joined == TYPED  # the pieces concatenate to the call's typed arguments
    assert len(got) >= 8, got  # many deltas, not the call in one
    assert len(reply.sent) == 20 or len(reply.sent) == 21
    # the first argument bytes well before the upstream's last pieces left (the fifteenth of
    # twenty: a loaded machine delays the first bytes by a few pieces, never to the end)
    assert got[0][0] < reply.sent[14], (got[0][0] - reply.sent[0], reply.sent[14] - reply.sent[0])


@pytest.mark.parametrize("hermes", [False, True], ids=["native", "hermes-text"])
def test_chat_completions_streams_the_arguments(upstream: PacedUpstream, hermes: bool) -> None:
    reply = _script(upstream, hermes)
    with _served(upstream, hermes) as served:
        client = OpenAI(base_url=served.url + "/v1", api_key="unused")
        got: list[tuple[float, str]] = []
        names = []
        for chunk in client.chat.completions.create(
            model="gw",
            messages=ASK,
            tools=[WRITE],
            stream=True,  # type: ignore[arg-type]
        ):
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    if tc.function and tc.function.name:
                        names.append(tc.function.name)
                    if tc.function and tc.function.arguments:
                        got.append((time.monotonic(), tc.function.arguments))
    assert names == ["write_file"]
    _check(reply, got, "".join(text for _, text in got))


@pytest.mark.parametrize("hermes", [False, True], ids=["native", "hermes-text"])
def test_responses_streams_the_arguments(upstream: PacedUpstream, hermes: bool) -> None:
    reply = _script(upstream, hermes)
    with _served(upstream, hermes) as served:
        client = OpenAI(base_url=served.url + "/v1", api_key="unused")
        got: list[tuple[float, str]] = []
        with client.responses.stream(
            model="gw",
            input="Write my notes.",
            tools=[{"type": "function", **WRITE["function"]}],  # type: ignore[list-item]
        ) as stream:
            for event in stream:
                if event.type == "response.function_call_arguments.delta":
                    got.append((time.monotonic(), event.delta))
            final = stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert call.name == "write_file" and call.arguments == TYPED
    _check(reply, got, "".join(text for _, text in got))


@pytest.mark.parametrize("hermes", [False, True], ids=["native", "hermes-text"])
def test_messages_streams_the_input(upstream: PacedUpstream, hermes: bool) -> None:
    reply = _script(upstream, hermes)
    with _served(upstream, hermes) as served:
        client = anthropic.Anthropic(base_url=served.url, api_key="unused")
        got: list[tuple[float, str]] = []
        tool: dict[str, Any] = {
            "name": "write_file",
            "description": "Write a file.",
            "input_schema": WRITE["function"]["parameters"],  # type: ignore[index]
        }
        with client.messages.stream(
            model="gw",
            max_tokens=1000,
            messages=ASK,
            tools=[tool],  # type: ignore[list-item]
        ) as stream:
            for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                    got.append((time.monotonic(), event.delta.partial_json))
            final = stream.get_final_message()
    (use,) = [block for block in final.content if block.type == "tool_use"]
    assert use.name == "write_file" and use.input == json.loads(TYPED)
    assert final.stop_reason == "tool_use"
    _check(reply, got, "".join(text for _, text in got))

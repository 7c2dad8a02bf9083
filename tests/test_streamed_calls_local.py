"""The local engine's calls, read from its text by the template's family, stream to each
API's client as they are generated; a call withdrawn after its first bytes went out is
rendered so that no client runs it as complete.

The engine is :class:`~toolwire.testing.ScriptedLlama` under the published Qwen2.5 template
(the Hermes family), paced one character every few milliseconds; the gateway over real HTTP;
the official clients.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anthropic
from openai import OpenAI

from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.pipeline import ModelMemory
from toolwire.server import create_app
from toolwire.testing import ScriptedLlama, ServedApp

TEMPLATE = Path(__file__).parent / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "note": {"type": "string"}},
    "required": ["city"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
NOTE = "a note the model writes at some length, " * 6
ARGUMENTS = json.dumps({"city": "Paris", "note": NOTE})
CALL = '<tool_call>\n{"name": "get_weather", "arguments": ' + ARGUMENTS + "}\n</tool_call>"
CUT = 'Checking. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'


class PacedLlama(ScriptedLlama):
    """Writes its reply a character every ``every`` seconds, noting when each left."""

    def __init__(self, template: str, reply: str, every: float) -> None:
        super().__init__(template, reply)
        self.every = every
        self.times: list[float] = []

    def generate(self, tokens: Sequence[int], **options: Any) -> Iterator[int]:
        for token in super().generate(tokens, **options):
            time.sleep(self.every)
            self.times.append(time.monotonic())
            yield token


def _served(llama: ScriptedLlama) -> ServedApp:
    backend = LlamaCppBackend("scripted", llama=llama, memory=ModelMemory())
    return ServedApp(create_app(backend, model_name="gw"))


def test_a_family_call_streams_as_the_model_writes_it() -> None:
    llama = PacedLlama(TEMPLATE.read_text(), CALL, every=0.004)
    with _served(llama) as served:
        client = OpenAI(base_url=served.url + "/v1", api_key="unused")
        got: list[tuple[float, str]] = []
        for chunk in client.chat.completions.create(
            model="gw",
            messages=ASK,
            tools=TOOLS,
            stream=True,  # type: ignore[arg-type]
        ):
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    if tc.function and tc.function.arguments:
                        got.append((time.monotonic(), tc.function.arguments))
    assert "".join(text for _, text in got) == ARGUMENTS
    assert len(got) >= 10
    # the first argument bytes left before the model had written half its call
    half = llama.times[len(CALL) // 2]
    assert got[0][0] < half, (got[0][0] - llama.times[0], half - llama.times[0])


def test_a_call_withdrawn_after_its_bytes_went_out_is_never_complete() -> None:
    """The reply ends inside the call: what streamed never closes as JSON, the turn does not
    finish in calls, the client is told, and the text the model wrote follows as text."""
    with _served(ScriptedLlama(TEMPLATE.read_text(), CUT)) as served:
        client = OpenAI(base_url=served.url + "/v1", api_key="unused")
        # Chat Completions: the call's chunks stop; the finish is not tool_calls
        arguments, finish, content = "", None, ""
        for chunk in client.chat.completions.create(
            model="gw",
            messages=ASK,
            tools=TOOLS,
            stream=True,  # type: ignore[arg-type]
        ):
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    arguments += (tc.function and tc.function.arguments) or ""
                content += choice.delta.content or ""
                finish = choice.finish_reason or finish
        assert arguments.startswith('{"city": "Par') and not arguments.endswith("}")
        assert finish == "stop" and "<tool_call>" in content
        # Responses: the call's item ends incomplete, and is not a call of the response
        responses = client.responses.create(
            model="gw",
            input="Weather in Paris?",
            stream=True,
            tools=[{"type": "function", "name": "get_weather", "parameters": PARAMETERS}],
        )
        done = [e.item for e in responses if e.type == "response.output_item.done"]
        (cut,) = [item for item in done if item.type == "function_call"]
        assert cut.status == "incomplete" and not cut.arguments.endswith("}")
        # Messages: the tool_use block closed as it stood; stop_reason is not tool_use
        claude = anthropic.Anthropic(base_url=served.url, api_key="unused")
        tool = {"name": "get_weather", "input_schema": PARAMETERS}
        with claude.messages.stream(
            model="gw",
            max_tokens=100,
            messages=ASK,
            tools=[tool],  # type: ignore[list-item]
        ) as stream:
            seen = list(stream)
            final = stream.get_final_message()
        kinds = [e.type for e in seen]
        assert kinds.count("content_block_start") == kinds.count("content_block_stop")
        assert final.stop_reason == "end_turn"
        assert [b.type for b in final.content] == ["text", "tool_use", "text"]
        (delta,) = [e for e in seen if e.type == "message_delta"]
        notices = (delta.model_extra or {}).get("toolwire", {}).get("notices", [])
        assert "call-abandoned" in [n["code"] for n in notices]

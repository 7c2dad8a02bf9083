"""System messages inside the conversation, as coding agents send them: Claude Code 2.1.x puts
a ``role: "system"`` message after the first user turn of a Messages request (LangChain's
ChatAnthropic too); Codex opens a Responses input with two developer messages. They reach
the model where the client put them when its template reads them there, and are moved —
the ones at the start made one, a later one given in the next user turn as a marked system
note, with a ``system-moved`` notice — when the template refuses them or drops them. One
decision for every API (:mod:`toolwire.pipeline.content`); tested with the official
``anthropic`` and ``openai`` clients through the real gateway, against a fake upstream over
real HTTP, the real default model and its template, and published templates that refuse."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.backends.llamacpp import LlamaCppBackend
from toolwire.backends.prompt import TemplateTransport
from toolwire.errors import ToolwireError
from toolwire.pipeline import Request, planned
from toolwire.server import create_app
from toolwire.server.anthropic_input import parse_messages
from toolwire.server.responses_input import parse_responses
from toolwire.templates import ChatTemplate
from toolwire.templates.roles import system_in_place
from toolwire.testing import FakeOpenAIServer, ScriptedLlama, ServedApp, text_deltas

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
#: Refuses a system message anywhere but first: "System message must be at the beginning."
REFUSES = (TEMPLATES / "Qwen3.5-4B.jinja").read_text()
ENV = "<env>cwd: /work/project, platform: linux</env>"
BASH = {
    "name": "Bash",
    "description": "Runs a shell command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def claude_code_turns(second: bool) -> list[dict[str, Any]]:
    """Claude Code's conversation, in its shape: the prompt as two text blocks, then a
    system message (text blocks first, a string after), then the call and its result."""
    turns: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>Be careful.</system-reminder>"},
                {"type": "text", "text": "Run: echo hello"},
            ],
        },
        {
            "role": "system",
            "content": ENV if second else [{"type": "text", "text": ENV}],
        },
    ]
    if second:
        turns += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "echo hello"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}],
            },
        ]
    return turns


SYSTEM = [{"type": "text", "text": "You are a coding agent."}]


def notices(body: Any) -> list[str]:
    return [n["code"] for n in (body.model_extra or {}).get("toolwire", {}).get("notices", [])]


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def remote(upstream: FakeOpenAIServer) -> Iterator[anthropic.Anthropic]:
    backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
    with ServedApp(create_app(backend, model_name="gw")) as served:
        yield anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("second", [False, True], ids=["first request", "with the result"])
def test_a_system_message_inside_a_messages_conversation_reaches_the_upstream_in_place(
    upstream: FakeOpenAIServer, remote: anthropic.Anthropic, second: bool, stream: bool
) -> None:
    upstream.add_stream(text_deltas("hello"))
    ask: dict[str, Any] = {
        "model": "claude-opus-5-5",
        "max_tokens": 100,
        "system": SYSTEM,
        "tools": [BASH],
        "messages": claude_code_turns(second),
    }
    if stream:
        with remote.messages.stream(**ask) as events:
            message = events.get_final_message()
    else:
        message = remote.messages.create(**ask)
    assert message.content[0].type == "text" and message.content[0].text == "hello"
    sent = upstream.requests[0]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "system", *(["assistant", "tool"] if second else [])]
    assert sent[2] == {"role": "system", "content": ENV}
    assert sent[1]["content"] == "<system-reminder>Be careful.</system-reminder>\nRun: echo hello"
    assert "system-moved" not in notices(message)


def test_a_system_message_first_in_messages_is_still_refused_naming_it(
    remote: anthropic.Anthropic,
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        remote.messages.create(
            model="gw", max_tokens=10, messages=[{"role": "system", "content": "x"}]
        )
    assert "messages[0].role" in str(caught.value) and "'system'" in str(caught.value)


def test_a_template_that_refuses_it_gets_it_as_a_note_in_the_next_user_turn() -> None:
    llama = ScriptedLlama(REFUSES, "Done.")
    backend = LlamaCppBackend("scripted", llama=llama)
    assert not backend.system_in_place()
    with ServedApp(create_app(backend, model_name="gw")) as served:
        client = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
        message = client.messages.create(
            model="gw",
            max_tokens=50,
            system=SYSTEM,
            messages=[*claude_code_turns(True), {"role": "system", "content": "Be brief."}],
        )
    assert message.content[0].text == "Done."
    assert notices(message) == ["system-moved"]
    prompt = llama.prompts[-1]
    assert prompt.count("<|im_start|>system") == 1  # the one at the start
    # the system message after the first user turn: at the start of the next user turn
    # (the tool's result, here the user's), marked; the last one after the last user turn
    assert f"<system>\n{ENV}\n</system>" in prompt
    assert "<system>\nBe brief.\n</system>" in prompt
    assert prompt.index("Run: echo hello") < prompt.index(ENV) < prompt.index("Be brief.")


def test_codex_developer_messages_at_the_start_become_one_where_the_template_takes_one() -> None:
    llama = ScriptedLlama(REFUSES, "Done.")
    with ServedApp(create_app(LlamaCppBackend("scripted", llama=llama), model_name="gw")) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
        response = client.responses.create(
            model="gw",
            input=[
                {
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "You are Codex."}],
                },
                {"role": "developer", "content": [{"type": "input_text", "text": "Skills: none."}]},
                {"role": "user", "content": [{"type": "input_text", "text": "Run: echo hello"}]},
            ],
        )
    assert response.output_text == "Done."
    assert notices(response) == ["system-moved"]
    prompt = llama.prompts[-1]
    assert prompt.count("<|im_start|>system") == 1
    assert "You are Codex.\n\nSkills: none." in prompt


def _corpus() -> list[Path]:
    return sorted(TEMPLATES.glob("*.jinja"))


TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echoes a text.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to echo."}},
        },
    },
}
TURNS = [
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "an answer"},
    {"role": "system", "content": "probe note 42"},
    {"role": "user", "content": "second question"},
]
#: Templates that refuse the conversation even without the system message inside it.
REFUSE_ANYWAY = {"google-gemma-2-2b-it"}  # no system message at all: not the tools' either


def _prompt(template: ChatTemplate, messages: list[dict[str, Any]]) -> tuple[Request, str]:
    transport = TemplateTransport(template)
    sent, plan = planned(transport, Request(messages, [TOOL]))
    return sent, transport.prompt(sent, plan)


def _template(path: Path) -> ChatTemplate:
    return ChatTemplate(path.read_text(), bos_token="<s>", eos_token="</s>", name=path.stem)


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_every_published_template_is_given_the_system_message_somewhere_it_reads_it(
    path: Path,
) -> None:
    template = _template(path)
    without = [m for m in TURNS if m["role"] != "system"]
    if path.stem in REFUSE_ANYWAY:
        with pytest.raises(ToolwireError):
            _prompt(template, without)
        return
    _prompt(template, without)  # the conversation renders without the system message
    sent, prompt = _prompt(template, TURNS)  # and with it, where the template reads it
    assert prompt.index("an answer") < prompt.index("probe note 42")
    assert prompt.index("probe note 42") < prompt.index("second question")
    holder = next(m for m in sent.messages if "probe note 42" in str(m["content"]))
    if system_in_place(template):
        assert holder == {"role": "system", "content": "probe note 42"}
    else:
        assert holder["role"] == "user"
        assert holder["content"].startswith("<system>\nprobe note 42\n</system>")


def test_the_default_models_template_takes_it_in_place(llama_backend: Any) -> None:
    """The real default model (Qwen2.5-Coder-0.5B): its own template reads a system message
    where Claude Code puts it, so it is given there; and the real model answers."""
    assert llama_backend.system_in_place()
    call = parse_messages(
        {
            "model": "gw",
            "max_tokens": 20,
            "system": SYSTEM,
            "tools": [BASH],
            "messages": claude_code_turns(False),
        }
    )
    prompt = llama_backend.planned_prompt(call.request)
    turn = f"<|im_start|>system\n{ENV}<|im_end|>"
    assert prompt.index("Run: echo hello") < prompt.index(turn)
    with ServedApp(create_app(llama_backend, model_name="gw")) as served:
        client = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
        message = client.messages.create(
            model="gw",
            max_tokens=20,
            system=SYSTEM,
            messages=claude_code_turns(False),
        )
    assert message.content and "system-moved" not in notices(message)


#: The requests real Claude Code and Codex sent (recorded under tests/fixtures/agents/).
CAPTURED = Path(__file__).parent / "fixtures" / "agents"
TAKES = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()


def _captured() -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for path in sorted(CAPTURED.glob("*.json")):
        for i, sent in enumerate(json.loads(path.read_text())["requests"]):
            if sent["method"] == "POST" and sent["path"].split("?")[0] in (
                "/v1/messages",
                "/v1/responses",
            ):
                out.append((path.stem, i, sent))
    return out


@pytest.mark.parametrize(
    ("name", "index", "sent"), _captured(), ids=lambda v: v if isinstance(v, (str, int)) else ""
)
def test_every_captured_agent_request_is_read_and_rendered(
    name: str, index: int, sent: dict[str, Any]
) -> None:
    """Each request a real agent sent is read (no 400) and reaches a template that takes a
    system message anywhere and one that refuses it, with every tool the agent can run."""
    body = sent["body"]
    if sent["path"].startswith("/v1/messages"):
        call: Any = parse_messages(body)
    else:
        call = asyncio.run(parse_responses(body))
    names = [t["function"]["name"] for t in call.request.tools or ()]
    if "apply_patch" in json.dumps(body.get("tools")):
        assert "apply_patch" in names
    for source in (TAKES, REFUSES):
        transport = TemplateTransport(ChatTemplate(source))
        request, plan = planned(transport, call.request)
        prompt = transport.prompt(request, plan)
        for message in body.get("messages", ()):
            if message.get("role") == "system":  # Claude Code's, inside the conversation
                text = message["content"]
                first = text if isinstance(text, str) else text[0]["text"]
                assert first[:200] in prompt

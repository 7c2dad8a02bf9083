"""A scripted OpenAI-compatible Chat Completions server, standing in for a model behind
``toolwire serve`` while a real coding agent drives the gateway.

It answers each request by a script keyed on the conversation so far: step *n* is taken
when the conversation holds *n* tool results (``role: "tool"`` messages), so the first
request gets the first call, the request carrying its result the next one, and so on to a
final answer. Each step picks its tool from the tools the request offers, by what the tool
does, not by one client's spelling: a shell step takes ``Bash`` (Claude Code),
``exec_command``/``shell_command``/``shell`` (Codex's shells, by model), ``bash``
(opencode), ``run_shell_command`` (Gemini CLI, Qwen Code), with each one's
argument shape; a patch step takes ``apply_patch`` however it arrives (a function with one
string parameter, as the gateway offers a custom tool upstream, or a JSON-argument function).

Two ways of writing a call:

- ``mode="text"``: a weak model; the call is written in the content as
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (or bare JSON with
  ``text_form="json"``), and the gateway has to read it;
- ``mode="native"``: ``tool_calls`` deltas, the arguments cut into many small pieces,
  with an optional delay between chunks.

It honours ``stream`` (server-sent events or one JSON completion) and
``stream_options.include_usage`` (a last chunk with ``usage`` and no choices, as OpenAI
sends it), and records every request body (and every usage it sent) so a test can assert on
what reached the model and on the counts the client shows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolwire.testing import ServedApp, text_deltas, tool_call_deltas

#: What the scripted upstream answers when no step fits (a test then fails on its answer).
NO_STEP = "scripted upstream: no step fits this request"


@dataclass(frozen=True)
class Call:
    """A call the model makes: a tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """A final answer in plain text."""

    text: str


#: A step: from the request's offered tools (name -> its function object) to what to say.
Step = Callable[[Mapping[str, Mapping[str, Any]]], "Call | Answer | None"]


def offered(body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The request's function tools by name (``{"type": "function", "function": {...}}``)."""
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            tools[fn["name"]] = fn
    return tools


def _properties(fn: Mapping[str, Any]) -> dict[str, Any]:
    params = fn.get("parameters")
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


#: The shell tools of the agents, by name: Claude Code's, Codex's (by model), opencode's,
#: Gemini CLI's and Qwen Code's.
SHELLS = (
    "Bash",
    "exec_command",
    "shell_command",
    "shell",
    "local_shell",
    "bash",
    "run_shell_command",
)


def shell(command: str) -> Step:
    """Run ``command`` with whichever shell tool is offered, in that tool's argument shape."""

    def step(tools: Mapping[str, Mapping[str, Any]]) -> Call | None:
        for name in SHELLS:
            fn = tools.get(name)
            if fn is None:
                continue
            props = _properties(fn)
            if "cmd" in props:
                return Call(name, {"cmd": command})
            if props.get("command", {}).get("type") == "array":
                return Call(name, {"command": ["bash", "-lc", command]})
            if "description" in props:  # (Claude Code's, opencode's: a required one)
                return Call(name, {"command": command, "description": "Run the command"})
            return Call(name, {"command": command})
        return None

    return step


def patch(text: str) -> Step:
    """Apply the patch ``text`` with the ``apply_patch`` tool, whatever form it arrives in:
    a function of one string parameter (a custom tool offered as a function) gets the patch
    as that parameter; a function taking ``input`` or ``patch`` gets it there."""

    def step(tools: Mapping[str, Mapping[str, Any]]) -> Call | None:
        fn = tools.get("apply_patch")
        if fn is None:
            return None
        props = _properties(fn)
        strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
        for key in ("input", "patch"):
            if key in props:
                return Call("apply_patch", {key: text})
        if len(strings) == 1:
            return Call("apply_patch", {strings[0]: text})
        return None

    return step


def answer(text: str) -> Step:
    return lambda tools: Answer(text)


def tool_results(body: Mapping[str, Any]) -> list[str]:
    """The text of every tool result in the conversation, in order."""
    out = []
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            out.append(str(content))
    return out


@dataclass
class ScriptedUpstream:
    """``with ScriptedUpstream([shell("echo hi"), answer("done")], mode="native") as up:``;
    ``up.base_url`` ends in ``/v1``; ``up.requests`` holds every request body."""

    steps: Sequence[Step]
    mode: str = "native"
    text_form: str = "tag"
    piece: int = 4
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: every usage object sent (a usage chunk, asked for, or a whole completion's)
    usage: list[dict[str, int]] = field(default_factory=list)
    base_url: str = ""
    _served: ServedApp | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("native", "text"):
            raise ValueError(f"mode is native or text, not {self.mode!r}")

    def decide(self, body: Mapping[str, Any]) -> Call | Answer:
        """The step for this conversation: the one after as many steps as it has results."""
        done = len(tool_results(body))
        if done >= len(self.steps):
            return Answer(NO_STEP)
        said = self.steps[done](offered(body))
        return said if said is not None else Answer(NO_STEP)

    # -- rendering

    def _text_of(self, call: Call) -> str:
        payload = json.dumps({"name": call.name, "arguments": call.arguments})
        return payload if self.text_form == "json" else f"<tool_call>\n{payload}\n</tool_call>"

    def _deltas(self, said: Call | Answer, n: int) -> tuple[list[dict[str, Any]], str]:
        if isinstance(said, Answer):
            return text_deltas(said.text, self.piece), "stop"
        if self.mode == "text":
            return text_deltas(self._text_of(said), self.piece), "stop"
        args = json.dumps(said.arguments)
        return tool_call_deltas([(f"call_{n}", said.name, args)], size=self.piece), "tool_calls"

    def _message(self, said: Call | Answer, n: int) -> tuple[dict[str, Any], str]:
        if isinstance(said, Answer):
            return {"role": "assistant", "content": said.text}, "stop"
        if self.mode == "text":
            return {"role": "assistant", "content": self._text_of(said)}, "stop"
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": said.name, "arguments": json.dumps(said.arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"

    def _usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """A usage object (recorded): a quarter of the messages' JSON length as the prompt's
        tokens, so each request's count differs and a sum proves each one was counted."""
        prompt = len(json.dumps(body.get("messages") or [])) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}
        self.usage.append(usage)
        return usage

    async def _events(self, body: Mapping[str, Any], said: Call | Answer) -> AsyncIterator[str]:
        n = len(self.requests)
        base = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", ""),
        }
        deltas, finish = self._deltas(said, n)
        for i, delta in enumerate(deltas):
            d = {"role": "assistant", **delta} if i == 0 else delta
            chunk = {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
            if self.delay:
                await asyncio.sleep(self.delay)
        end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        yield f"data: {json.dumps(end)}\n\n"
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            yield f"data: {json.dumps({**base, 'choices': [], 'usage': self._usage(body)})}\n\n"
        yield "data: [DONE]\n\n"

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        said = self.decide(body)
        if body.get("stream"):
            return StreamingResponse(self._events(body, said), media_type="text/event-stream")
        message, finish = self._message(said, len(self.requests))
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self._usage(body),
            }
        )

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": []})

    def start(self) -> str:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        self._served = ServedApp(app)
        self.base_url = self._served.start() + "/v1"
        return self.base_url

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    def __enter__(self) -> ScriptedUpstream:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

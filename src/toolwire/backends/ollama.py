"""Ollama's native ``/api/chat``, streamed as JSON lines.

Tools in the request; calls arrive whole, with arguments as objects; ``think`` asks a
thinking model to think and ``message.thinking`` is reasoning, never read for calls. The
conversation is sent in Ollama's encoding: a call's arguments as an object, a result with
``tool_name``; a structured output as ``format`` (its JSON schema, or ``"json"``). A
transport: it sends and reads; the reply pipeline decides the rest.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import events as ev
from ..errors import BackendError
from ..events import Event
from ..messages import ToolCall
from ..pipeline import Prepared, Request
from ..pipeline.structured import ollama_format
from .http import HttpTransport, Records, Reply

__all__ = ["OllamaBackend", "to_ollama"]

#: The sampling fields Ollama takes in its ``options``, by the name it gives each.
_OPTIONS = {
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "repetition_penalty": "repeat_penalty",
}


def to_ollama(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages in Ollama's encoding."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        m = dict(message)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except ValueError:
                        args = {"_raw": args}  # what the model wrote, kept visible
                names[str(call.get("id", ""))] = fn.get("name", "")
                calls.append({"function": {"name": fn.get("name", ""), "arguments": args}})
            m["tool_calls"] = calls
            m["content"] = m.get("content") or ""
        if m.get("role") == "assistant" and "reasoning_content" in m:
            m["thinking"] = m.pop("reasoning_content")  # Ollama's name for it
        elif m.get("role") == "tool":
            name = m.pop("name", None) or names.get(str(m.get("tool_call_id", "")), "")
            m.pop("tool_call_id", None)
            m["tool_name"] = name
        if m.get("content") is None:
            m["content"] = ""
        out.append(m)
    return out


class OllamaBackend(HttpTransport):
    """A model behind Ollama's ``POST {base_url}/api/chat``."""

    name = "ollama"
    sampling_fields = frozenset(_OPTIONS)
    default_base_url = "http://127.0.0.1:11434"
    path = "api/chat"
    default_timeout = 300.0
    default_context_tokens = 8192

    @staticmethod
    def normal_base(base_url: str) -> str:
        return base_url.rstrip("/")

    def body(self, request: Request, dialect: str) -> dict[str, Any]:
        """The JSON body of an ``/api/chat`` request, schemas in ``dialect``; streamed unless
        the caller takes the reply whole (``request.stream``)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_ollama(request.messages),
            "stream": request.stream,
        }
        if request.tools:
            body["tools"] = self.tools_on_wire(request.tools, dialect)
        if request.think is not None:
            body["think"] = request.think
        if request.output is not None:  # a structured output: the schema, or "json"
            body["format"] = ollama_format(request.output)
        sent = request.extra.get("options")
        options: dict[str, Any] = dict(sent) if isinstance(sent, Mapping) else {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        for key, value in request.sampling.given().items():
            if key in _OPTIONS:
                options[_OPTIONS[key]] = value
        if options:
            body["options"] = options
        for key, value in request.extra.items():
            if key != "reasoning_effort":  # read into ``think``
                body.setdefault(key, value)
        return body

    def read(self, reply: Reply) -> AsyncGenerator[Event, None]:
        return _read_lines(reply)

    async def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """The reply's events; asked again without ``think`` when the model refused to think
        before saying a word (Ollama answers 400 "… does not support thinking" to a model
        that cannot): the turn's thinking switch is named as not applied, once."""
        heard = False
        try:
            async for event in super().send(prepared):
                heard = True
                yield event
        except BackendError as exc:
            body = prepared.payload
            refused = exc.status == 400 and "thinking" in (exc.body or str(exc))
            if heard or not refused or body.get("think") is not True:
                raise
            yield ev.Notice(
                "field-not-honoured",
                f"not applied on {self.model}: thinking (the model does not think)",
            )
            again = replace(prepared, payload={k: v for k, v in body.items() if k != "think"})
            async for event in super().send(again):
                yield event


async def _read_lines(reply: Reply) -> AsyncGenerator[Event, None]:
    calls: list[ToolCall] = []
    finish = "stop"
    usage: dict[str, int] | None = None
    records = Records(reply, sse=False, who="Ollama", is_last=lambda r: bool(r.get("done")))
    async for chunk in records:
        message = chunk.get("message") or {}
        if not isinstance(message, dict):
            shown = json.dumps(chunk)[:200]
            raise BackendError(
                f"Ollama sent a message that is not an object: {shown}", kind="unreadable"
            )
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            yield ev.ReasoningDelta(message["thinking"])
        if isinstance(message.get("content"), str) and message["content"]:
            yield ev.TextDelta(message["content"])
        sent = message.get("tool_calls")
        if isinstance(sent, dict):
            sent = [sent]
            yield ev.Notice(
                "recovered-tool-calls-object",
                "Ollama sent tool_calls as one object, not a list; it was read as one call",
            )
        elif sent is not None and not isinstance(sent, list):
            sent = None
            yield ev.Notice(
                "call-not-read", "Ollama sent tool_calls that are not a list; nothing was read"
            )
        for call in sent or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                yield ev.Notice(
                    "call-not-read", "Ollama sent a call without a name; it was dropped"
                )
                continue
            args = fn.get("arguments")
            text = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            arguments = args if isinstance(args, dict) else {}
            index = len(calls)
            cid = str(call.get("id") or "call_" + secrets.token_hex(8))
            call_obj = ToolCall(cid, fn["name"], arguments, text)
            calls.append(call_obj)
            yield ev.CallStart(index, cid, fn["name"])
            yield ev.CallArgsDelta(index, text)
            yield ev.CallEnd(index, call_obj)
        if chunk.get("done"):
            finish = str(chunk.get("done_reason") or "stop")
            counts = {
                "prompt_tokens": chunk.get("prompt_eval_count"),
                "completion_tokens": chunk.get("eval_count"),
            }
            usage = {k: v for k, v in counts.items() if isinstance(v, int)} or None
    if not records.ended:
        raise BackendError("the stream ended before the reply was complete", kind="unreadable")
    yield ev.Done(finish, usage)

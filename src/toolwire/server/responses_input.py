"""A Responses request (``POST /v1/responses``) read into one turn.

In: ``input`` as a string or items (messages, ``function_call``, ``function_call_output``),
``instructions``, function ``tools``, ``tool_choice``, ``parallel_tool_calls``,
``max_output_tokens``, ``temperature``, ``stream``, ``text.format`` (a structured output:
``json_object`` or ``json_schema``, see :mod:`toolwire.pipeline.structured`). The items
become the Chat Completions messages the core takes, so every engine and every repair is
the same as for the other APIs. Not served (a 400 that names the field): input images and
files. Tools other than functions are left out with a ``tool-not-served`` notice.
:attr:`ResponsesCall.tools` says, for a tool the engine is offered under another name or
shape than the client declared it, how the client knows it
(:class:`~toolwire.server.responses_items.ClientTool`), so the reply names it as the client
expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..pipeline import Request
from .core import Told
from .fields import check, options
from .output import responses_format
from .remember import ResponseMemory
from .responses_items import ClientTool
from .validate import RequestError

__all__ = ["ResponsesCall", "parse_responses"]


class _Fields(BaseModel):
    """The top-level fields read; strict types, so ``"yes"`` is not a boolean."""

    model_config = ConfigDict(extra="allow", strict=True)

    model: str | None = None
    input: str | list[Any]
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(default=None, ge=1, le=10**9)
    temperature: float | int | None = Field(default=None, ge=0, le=2)
    stream: bool = False
    store: bool | None = None
    previous_response_id: str | None = None
    text: dict[str, Any] | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["function"]
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ResponsesCall:
    """A parsed Responses request: the engine request and what the reply echoes."""

    def __init__(
        self,
        request: Request,
        fields: _Fields,
        conversation: list[dict[str, Any]],
        memory: ResponseMemory | None,
    ) -> None:
        self.request = request
        self.stream = fields.stream
        #: The conversation without the instructions, to store with the output.
        self.conversation = conversation
        #: What the request was told before the turn (tools left out).
        self.notices: list[Told] = []
        #: The tools the client knows under another name or kind than the engine's
        #: function of that name (custom tools, tools in a namespace), by the engine's name.
        self.tools: dict[str, ClientTool] = {}
        #: Where the response is stored, when it is.
        self.memory = memory if memory is not None and fields.store is not False else None
        self.model = fields.model
        self.echo: dict[str, Any] = {
            "instructions": fields.instructions,
            "tools": [dict(t) for t in fields.tools or ()],
            "tool_choice": fields.tool_choice or "auto",
            "parallel_tool_calls": fields.parallel_tool_calls,
            "temperature": fields.temperature,
            "max_output_tokens": fields.max_output_tokens,
            "previous_response_id": fields.previous_response_id,
            "store": self.memory is not None,
            "text": fields.text or {"format": {"type": "text"}},
        }


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or text parts (``input_text``/``output_text``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"'{where}' must be a string or a list of text parts", where)
    out: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text") or not isinstance(
            part.get("text"), str
        ):
            raise RequestError(
                f"'{where}[{j}]' must be a text part such as "
                '{"type": "input_text", "text": "..."}; images and files are not served',
                f"{where}[{j}]",
            )
        out.append(part["text"])
    return "".join(out)


def _messages(fields: _Fields, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input items as Chat Completions messages after ``history`` (calls folded into
    the assistant message before them, as Chat Completions has them)."""
    messages: list[dict[str, Any]] = list(history)
    if isinstance(fields.input, str):
        messages.append({"role": "user", "content": fields.input})
        return messages
    called = {c["id"] for m in history for c in m.get("tool_calls") or () if "id" in c}
    for i, item in enumerate(fields.input):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise RequestError(f"'{where}' must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(
                    f"'{where}.role' must be user, system, developer or assistant",
                    f"{where}.role",
                )
            text = _text(item.get("content"), f"{where}.content")
            messages.append({"role": "system" if role == "developer" else role, "content": text})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str) or not item[key]:
                    raise RequestError(
                        f"'{where}.{key}' must be a non-empty string", f"{where}.{key}"
                    )
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last.get("_answered"):
                last.setdefault("tool_calls", []).append(call)
                if not last.get("content"):
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            called.add(item["call_id"])
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or call_id not in called:
                raise RequestError(
                    f"'{where}.call_id' must echo the call_id of an earlier function_call",
                    f"{where}.call_id",
                )
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output, f"{where}.output")
            for m in reversed(messages):
                if m["role"] == "assistant":
                    m["_answered"] = True
                    break
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "reasoning":
            continue  # the model's own earlier thinking: not sent back to it
        else:
            raise RequestError(
                f"'{where}.type' {str(kind)[:40]!r} is not served: message, function_call, "
                "function_call_output or reasoning",
                f"{where}.type",
            )
    for m in messages:
        m.pop("_answered", None)
    return messages


def _tools(fields: _Fields, skipped: list[Told]) -> list[dict[str, Any]] | None:
    """Function tools for the engine; a tool of another kind (a provider's own: web search,
    a shell, a free-form ``custom`` tool) is left out with a ``tool-not-served`` notice,
    so a client that offers them still gets its function tools."""
    if fields.tools is None:
        return None
    out = []
    for i, given in enumerate(fields.tools):
        kind = given.get("type") if isinstance(given, dict) else None
        if isinstance(kind, str) and kind != "function":
            skipped.append(_not_served(f"tools[{i}]", kind, given.get("name")))
            continue
        tool = check(_Tool, given, f"tools[{i}]")
        fn: dict[str, Any] = {
            "name": tool.name,
            "parameters": tool.parameters or {"type": "object"},
        }
        if tool.description is not None:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def _not_served(where: str, kind: str, name: Any) -> Told:
    named = f" {name[:80]!r}" if isinstance(name, str) else ""
    return Told(
        "tool-not-served",
        f"{where} (a {kind[:40]!r} tool{named}) was left out: only function tools are served",
    )


async def parse_responses(
    data: Mapping[str, Any], memory: ResponseMemory | None = None
) -> ResponsesCall:
    """The engine request for a Responses body (already JSON, an object); ``memory``
    serves ``previous_response_id`` and stores responses."""
    fields = check(_Fields, data, "")
    if memory is None and fields.previous_response_id is not None:
        raise RequestError(
            "'previous_response_id' is not served: this gateway keeps no conversations; "
            "send the whole input instead",
            "previous_response_id",
        )
    if memory is None and fields.store:
        raise RequestError(
            "'store: true' is not served: this gateway keeps no conversations", "store"
        )
    history = []
    if memory is not None and fields.previous_response_id is not None:
        history = await memory.history(fields.previous_response_id)
    conversation = _messages(fields, history)
    if not conversation:
        raise RequestError("'input' must not be empty", "input")
    messages = conversation
    if fields.instructions:
        messages = [{"role": "system", "content": fields.instructions}, *conversation]
    skipped: list[Told] = []
    tools = _tools(fields, skipped)
    choice: Any = fields.tool_choice
    if isinstance(choice, dict):
        name = choice.get("name")
        if choice.get("type") != "function" or not isinstance(name, str):
            raise RequestError(
                "'tool_choice' must be auto, none, required or "
                '{"type": "function", "name": "..."}',
                "tool_choice",
            )
        if not any(t["function"]["name"] == name for t in tools or ()):
            raise RequestError(
                f"tool_choice names {name[:80]!r}, which is not in 'tools'", "tool_choice"
            )
        choice = {"type": "function", "function": {"name": name}}
    settings = options(data)
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        messages,
        tools or None,
        tool_choice=choice,
        parallel_calls=fields.parallel_tool_calls,
        temperature=fields.temperature,
        max_tokens=fields.max_output_tokens,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=responses_format(fields.text),
    )
    call = ResponsesCall(request, fields, conversation, memory)
    call.notices = skipped
    return call

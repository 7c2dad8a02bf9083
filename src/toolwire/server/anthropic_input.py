"""An Anthropic Messages request (``POST /v1/messages``, ``/v1/messages/count_tokens``)
read into one turn.

In: ``system``, ``messages`` with content blocks ``text``, ``tool_use``, ``tool_result``
(a string or text blocks, ``is_error``) and ``thinking``; ``tools`` with ``input_schema``;
``tool_choice`` ``auto``/``any``/``tool``/``none`` (``disable_parallel_tool_use``);
``max_tokens``, ``temperature``, ``thinking``, ``stream``, ``output_config.format`` (a
structured output, ``json_schema``; ``output_config.effort`` is ignored).

Not served (a 400 naming the field): images and documents, ``stop_sequences``. Server tools
(web search, code execution…) are left out with a ``tool-not-served`` notice.
``metadata``, ``top_p``, ``top_k``, ``service_tier`` change nothing here and are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..conversation import _estimate
from ..pipeline import Backend, Request, Transport, planned
from .core import Told, dumps
from .fields import check, options
from .output import messages_format
from .validate import RequestError

__all__ = ["MessagesCall", "count_tokens", "parse_messages"]


class _Fields(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    model: str | None = None
    messages: list[Any] = Field(min_length=1)
    system: str | list[Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=10**9)
    temperature: float | int | None = Field(default=None, ge=0, le=1)
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    stream: bool = False
    stop_sequences: list[str] | None = None
    output_config: dict[str, Any] | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


class MessagesCall:
    """A parsed Messages request: the turn, the model asked for, what it was told."""

    def __init__(self, request: Request, model: str | None, notices: list[Told]) -> None:
        self.request, self.model = request, model
        #: What the request was told before the turn (tools left out).
        self.notices = notices


def _texts(blocks: Any, where: str) -> str:
    """Text blocks (or a string) as one text."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise RequestError(f"'{where}' must be a string or a list of text blocks", where)
    out = []
    for j, block in enumerate(blocks):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise RequestError(
                f"'{where}[{j}]' must be a text block; images and documents are not served",
                f"{where}[{j}]",
            )
        out.append(block["text"])
    return "\n".join(out)


def _user(blocks: list[Any], where: str, called: set[str]) -> list[dict[str, Any]]:
    """A user turn's blocks: tool results first (as ``tool`` messages), then its text."""
    results: list[dict[str, Any]] = []
    text: list[str] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_result":
            use = block.get("tool_use_id")
            if not isinstance(use, str) or use not in called:
                raise RequestError(
                    f"'{at}.tool_use_id' must echo the id of an earlier tool_use block",
                    f"{at}.tool_use_id",
                )
            content = _texts(block.get("content", ""), f"{at}.content")
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RequestError(f"'{at}.is_error' must be true or false", f"{at}.is_error")
            if is_error:
                content = f"error: {content}"
            results.append({"role": "tool", "tool_call_id": use, "content": content})
        else:
            raise RequestError(
                f"'{at}' must be a text or tool_result block; images and documents are not served",
                f"{at}.type",
            )
    if text:
        results.append({"role": "user", "content": "\n".join(text)})
    return results


def _assistant(blocks: list[Any], where: str, called: set[str]) -> dict[str, Any]:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise RequestError(f"'{at}.id' must be a non-empty string", f"{at}.id")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise RequestError(f"'{at}.name' must be a non-empty string", f"{at}.name")
            if not isinstance(block.get("input"), dict):
                raise RequestError(f"'{at}.input' must be an object", f"{at}.input")
            called.add(block["id"])
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": dumps(block["input"])},
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's own earlier thinking: not sent back to it
        else:
            raise RequestError(f"'{at}' must be a text, tool_use or thinking block", f"{at}.type")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(fields: _Fields) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if fields.system:
        out.append({"role": "system", "content": _texts(fields.system, "system")})
    called: set[str] = set()
    for i, given in enumerate(fields.messages):
        where = f"messages[{i}]"
        role = given.get("role") if isinstance(given, dict) else None
        if role not in ("user", "assistant"):
            raise RequestError(f"'{where}.role' must be user or assistant", f"{where}.role")
        content = given.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise RequestError(
                f"'{where}.content' must be a string or a list of blocks", f"{where}.content"
            )
        if role == "user":
            out += _user(content, f"{where}.content", called)
        else:
            out.append(_assistant(content, f"{where}.content", called))
    return out


def _tools(fields: _Fields, skipped: list[Told]) -> list[dict[str, Any]] | None:
    """Client tools for the engine; a server tool (web search, code execution…) is left
    out with a ``tool-not-served`` notice, so a client offering one still gets the rest."""
    if fields.tools is None:
        return None
    out = []
    for i, given in enumerate(fields.tools):
        kind = given.get("type") if isinstance(given, dict) else None
        if isinstance(kind, str) and kind != "custom":
            name = given.get("name")
            named = f" {name[:80]!r}" if isinstance(name, str) else ""
            skipped.append(
                Told(
                    "tool-not-served",
                    f"tools[{i}] (a {kind[:40]!r} tool{named}) was left out: only tools with "
                    "an input_schema are served",
                )
            )
            continue
        tool = check(_Tool, given, f"tools[{i}]")
        fn: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
        if tool.description is not None:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def parse_messages(data: Mapping[str, Any]) -> MessagesCall:
    """The engine request for a Messages body (already JSON, an object)."""
    fields = check(_Fields, data, "")
    if fields.stop_sequences:
        raise RequestError("'stop_sequences' is not served by this gateway", "stop_sequences")
    skipped: list[Told] = []
    tools = _tools(fields, skipped)
    choice: Any = None
    parallel = True
    if fields.tool_choice is not None:
        picked = check(_Choice, fields.tool_choice, "tool_choice")
        parallel = not picked.disable_parallel_tool_use
        if picked.type == "tool":
            if not picked.name:
                raise RequestError(
                    "'tool_choice.name' is required with type tool", "tool_choice.name"
                )
            if not any(t["function"]["name"] == picked.name for t in tools or ()):
                raise RequestError(
                    f"tool_choice names {picked.name[:80]!r}, which is not in 'tools'",
                    "tool_choice.name",
                )
            choice = {"type": "function", "function": {"name": picked.name}}
        elif picked.type == "none":
            choice = "none"
        else:
            choice = {"auto": "auto", "any": "required"}[picked.type]
    think = None
    if fields.thinking is not None:
        kind = fields.thinking.get("type")
        if kind not in ("enabled", "disabled", "adaptive"):
            raise RequestError(
                "'thinking.type' must be enabled, disabled or adaptive", "thinking.type"
            )
        think = kind != "disabled"
    settings = options(data)
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        _messages(fields),
        tools or None,
        tool_choice=choice,
        parallel_calls=parallel,
        temperature=fields.temperature,
        max_tokens=fields.max_tokens,
        think=think,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=messages_format(fields.output_config),
    )
    return MessagesCall(request, fields.model, skipped)


def count_tokens(backend: Backend, request: Request) -> int:
    """The request's input tokens: exact where the engine renders the prompt itself (a
    local model: its template and tokenizer), else estimated (4 characters a token)."""
    prompt = getattr(backend, "prompt", None)
    if isinstance(backend, Transport) and callable(prompt):
        # the prompt as the pipeline plans it (tools in the template, in words, or none)
        return int(backend.count_tokens(prompt(*planned(backend, request))))
    tools = sum(len(json.dumps(t)) for t in request.tools or ()) // 4
    return sum(_estimate(m) for m in request.messages) + tools

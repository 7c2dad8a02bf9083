"""An Anthropic Messages request (``POST /v1/messages``, ``/v1/messages/count_tokens``)
read into one turn.

In: ``system``, ``messages`` with roles ``user``, ``assistant`` and ``system`` (a system
message anywhere in the conversation, as Claude Code sends one after the first user turn:
passed on in place, and :mod:`toolwire.pipeline.content` decides how a model whose template
takes it only first is given it), content blocks ``text``, ``image`` (base64, url or file
source), ``document`` (base64 PDF, plain text, content or url source), ``tool_use``,
``tool_result`` (a string or text, image and document blocks, ``is_error``) and
``thinking`` (a message's content never empty, as Anthropic's API has it: only the final
assistant message, a prefill, may be); ``tools`` with ``input_schema``; ``tool_choice``
``auto``/``any``/``tool``/``none`` (``disable_parallel_tool_use``); ``max_tokens``,
``temperature``, ``thinking``, ``stream``, ``output_config.format`` (a structured output,
``json_schema``; ``output_config.effort`` is ignored).

Images and documents become Chat Completions parts (``image_url`` with a ``data:`` URL for a
base64 source, ``file`` for a PDF; a text document becomes its text): an engine that takes
them gets them, a model that reads text only a placeholder and a ``content-not-seen``
notice (:mod:`toolwire.pipeline.content`). Server tools (web search, code execution…) are
left out with a ``tool-not-served`` notice. ``top_p``, ``top_k`` and ``stop_sequences`` go
to the engine as its sampling fields, ``metadata.user_id`` as ``user``, and a field this API
does not have as sent (``chat_template_kwargs``): :mod:`toolwire.server.passing`.
``service_tier``, ``context_management`` and ``cache_control`` change nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..budget import WorkBudget
from ..pipeline import Request
from .core import Told, dumps
from .fields import check, options
from .output import messages_format
from .passing import engine_fields
from .validate import Declared, Origins, RequestError, check_turn, required_needs_tools

__all__ = ["MessagesCall", "parse_messages"]


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
    defer_loading: bool = False


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
            raise RequestError(f"'{where}[{j}]' must be a text block", f"{where}[{j}]")
        out.append(block["text"])
    return "\n".join(out)


def _string(block: dict[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise RequestError(f"'{where}.{key}' must be a non-empty string", f"{where}.{key}")
    return value


def _source(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, dict):
        raise RequestError(f"'{where}.source' must be an object", f"{where}.source")
    return source


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An ``image`` block as a Chat Completions part: a ``data:`` URL for base64 data."""
    source = _source(block, where)
    at = f"{where}.source"
    kind = source.get("type")
    if kind == "base64":
        media = _string(source, "media_type", at)
        url = f"data:{media};base64,{_string(source, 'data', at)}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "url":
        return {"type": "image_url", "image_url": {"url": _string(source, "url", at)}}
    if kind == "file":
        return {"type": "file", "file": {"file_id": _string(source, "file_id", at)}}
    raise RequestError(f"'{at}.type' must be base64, url or file", f"{at}.type")


def _document(block: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A ``document`` block as Chat Completions parts: its text where it is text (a plain
    text source, a content source), else a ``file`` part (a PDF) or its URL."""
    source = _source(block, where)
    at = f"{where}.source"
    title = block.get("title")
    heading = f"[document: {title[:200]}]\n" if isinstance(title, str) and title else ""
    kind = source.get("type")
    if kind == "text":
        return [{"type": "text", "text": heading + _string(source, "data", at)}]
    if kind == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return [{"type": "text", "text": heading + inner}]
        if not isinstance(inner, list):
            raise RequestError(
                f"'{at}.content' must be a string or a list of blocks", f"{at}.content"
            )
        parts = _media(inner, f"{at}.content", kinds=("text", "image"))
        return [{"type": "text", "text": heading}, *parts] if heading else parts
    name = title if isinstance(title, str) and title else None
    if kind == "base64":
        media = _string(source, "media_type", at)
        file = {"file_data": f"data:{media};base64,{_string(source, 'data', at)}"}
    elif kind == "file":
        file = {"file_id": _string(source, "file_id", at)}
    elif kind == "url":
        return [{"type": "text", "text": f"{heading}[document at {_string(source, 'url', at)}]"}]
    else:
        raise RequestError(f"'{at}.type' must be base64, text, content, url or file", f"{at}.type")
    if name is not None:
        file["filename"] = name[:200]
    return [{"type": "file", "file": file}]


#: What a tool result holds: text, images, documents, and the tools a search loaded.
_RESULT_BLOCKS = ("text", "image", "document", "tool_reference")


def _media(
    blocks: list[Any], where: str, kinds: tuple[str, ...] = ("text", "image", "document")
) -> list[dict[str, Any]]:
    """Text, image and document blocks as Chat Completions parts."""
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in kinds:
            raise RequestError(f"'{at}' must be a {', '.join(kinds)} block", f"{at}.type")
        if kind == "tool_reference":
            name = _reference(block, at)
            parts.append({"type": "text", "text": f"Tool {name} is loaded: it can be called."})
        else:
            parts += _media_at(block, at)
    return parts


def _reference(block: dict[str, Any], at: str) -> str:
    """The tool a ``tool_reference`` block names (a tool search's answer: that tool, deferred,
    is loaded from then on)."""
    name = block.get("tool_name")
    if not isinstance(name, str) or not name:
        raise RequestError(f"'{at}.tool_name' must be a non-empty string", f"{at}.tool_name")
    return name


def _referenced(messages: list[Any]) -> set[str]:
    """The tools the conversation's tool searches loaded: every ``tool_reference`` in a
    ``tool_result`` (malformed ones are refused where the results are read)."""
    names: set[str] = set()
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if not isinstance(inner, list):
                continue
            for ref in inner:
                if isinstance(ref, dict) and ref.get("type") == "tool_reference":
                    name = ref.get("tool_name")
                    if isinstance(name, str):
                        names.add(name)
    return names


def _string_or_empty(block: dict[str, Any], where: str) -> str:
    if not isinstance(block.get("text"), str):
        raise RequestError(f"'{where}.text' must be a string", f"{where}.text")
    return str(block["text"])


def _content(parts: list[dict[str, Any]], joiner: str = "\n") -> str | list[dict[str, Any]]:
    """Parts as a string when they are all text (joined as the Messages API's text blocks
    were), else the parts (for the pipeline to give as the model can take them)."""
    if all(p["type"] == "text" for p in parts):
        return joiner.join(p["text"] for p in parts)
    return parts


def _user(blocks: list[Any], where: str, origins: Origins, at_message: int) -> list[dict[str, Any]]:
    """A user turn's blocks: tool results first (as ``tool`` messages, the first of them
    message ``at_message`` of the turn, each one's ``tool_use_id`` kept in ``origins``),
    then its text, images and documents."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("text", "image", "document"):
            parts += _media_at(block, at)
        elif kind == "tool_result":
            use = block.get("tool_use_id")
            if not isinstance(use, str) or not use:
                raise RequestError(
                    f"'{at}.tool_use_id' must be a non-empty string: the id of the tool_use "
                    "block it answers",
                    f"{at}.tool_use_id",
                )
            given = block.get("content", "")
            if isinstance(given, str):
                content: str | list[dict[str, Any]] = given
            elif isinstance(given, list):
                content = _content(_media(given, f"{at}.content", kinds=_RESULT_BLOCKS))
            else:
                raise RequestError(
                    f"'{at}.content' must be a string or a list of blocks", f"{at}.content"
                )
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RequestError(f"'{at}.is_error' must be true or false", f"{at}.is_error")
            if is_error:
                content = (
                    f"error: {content}"
                    if isinstance(content, str)
                    else [{"type": "text", "text": "error: "}, *content]
                )
            origins.results[at_message + len(results)] = f"{at}.tool_use_id"
            results.append({"role": "tool", "tool_call_id": use, "content": content})
        else:
            raise RequestError(
                f"'{at}' must be a text, image, document or tool_result block", f"{at}.type"
            )
    if parts:
        results.append({"role": "user", "content": _content(parts)})
    return results


def _media_at(block: dict[str, Any], at: str) -> list[dict[str, Any]]:
    """One text, image or document block as parts, its errors named at ``at``."""
    kind = block["type"]
    if kind == "text":
        return [{"type": "text", "text": _string_or_empty(block, at)}]
    if kind == "image":
        return [_image(block, at)]
    return _document(block, at)


def _assistant(blocks: list[Any], where: str, origins: Origins, at_message: int) -> dict[str, Any]:
    """An assistant turn's blocks as message ``at_message`` of the turn, each call's id
    kept in ``origins``."""
    text: list[str] = []
    thought: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            thought.append(block["thinking"])  # the model's own, given back to it
        elif kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise RequestError(f"'{at}.id' must be a non-empty string", f"{at}.id")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise RequestError(f"'{at}.name' must be a non-empty string", f"{at}.name")
            if not isinstance(block.get("input"), dict):
                raise RequestError(f"'{at}.input' must be an object", f"{at}.input")
            origins.calls[(at_message, len(calls))] = f"{at}.id"
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": dumps(block["input"])},
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # encrypted, or no text: nothing a model other than its maker reads
        else:
            raise RequestError(f"'{at}' must be a text, tool_use or thinking block", f"{at}.type")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls
    if thought:
        message["reasoning_content"] = "\n\n".join(thought)
    return message


def _messages(fields: _Fields, origins: Origins) -> list[dict[str, Any]]:
    """The messages as Chat Completions messages, where each call and result stands kept
    in ``origins``."""
    out: list[dict[str, Any]] = []
    if fields.system:
        out.append({"role": "system", "content": _texts(fields.system, "system")})
    for i, given in enumerate(fields.messages):
        where = f"messages[{i}]"
        role = given.get("role") if isinstance(given, dict) else None
        if role not in ("user", "assistant", "system"):
            raise RequestError(f"'{where}.role' must be user, assistant or system", f"{where}.role")
        content = given.get("content")
        if role == "system" and i == 0:
            raise RequestError(
                f"'{where}.role' must be user or assistant: the system prompt goes in 'system'",
                f"{where}.role",
            )
        if role == "system":  # where the client put it; the pipeline sees how it is given
            out.append({"role": "system", "content": _texts(content, f"{where}.content")})
            continue
        last = i == len(fields.messages) - 1
        if content in ("", []) and not (last and role == "assistant"):
            raise RequestError(
                f"'{where}.content' is empty: all messages must have non-empty content "
                "except for the optional final assistant message",
                f"{where}.content",
            )
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise RequestError(
                f"'{where}.content' must be a string or a list of blocks", f"{where}.content"
            )
        if role == "user":
            out += _user(content, f"{where}.content", origins, len(out))
        else:
            out.append(_assistant(content, f"{where}.content", origins, len(out)))
    return out


def _tools(
    fields: _Fields, skipped: list[Told], declared: list[Declared]
) -> list[dict[str, Any]] | None:
    """Client tools for the engine (each as declared, in ``declared``); a server tool (web
    search, code execution…) is left out with a ``tool-not-served`` notice, so a client
    offering one still gets the rest. A tool marked ``defer_loading`` is offered only once a
    tool search of the conversation loaded it (a ``tool_reference`` names it): until then the
    model knows its name alone, as the client's tool search tells it (Claude Code's
    ``ToolSearch``), and hundreds of MCP tools do not fill a small model's context."""
    if fields.tools is None:
        return None
    loaded = _referenced(fields.messages)
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
        declared.append(
            Declared(tool.name, f"tools[{i}].name", tool.input_schema, f"tools[{i}].input_schema")
        )
        if tool.defer_loading and tool.name not in loaded:
            continue
        fn: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
        if tool.description is not None:
            fn["description"] = tool.description
        out.append({"type": "function", "function": fn})
    return out


def parse_messages(data: Mapping[str, Any], budget: WorkBudget | None = None) -> MessagesCall:
    """The engine request for a Messages body (already JSON, an object)."""
    fields = check(_Fields, data, "")
    skipped: list[Told] = []
    declared: list[Declared] = []
    tools = _tools(fields, skipped, declared)
    origins = Origins()
    messages = _messages(fields, origins)
    check_turn(messages, declared, origins)
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
            required_needs_tools(choice, tools, "tool_choice.type")
    think = None
    if fields.thinking is not None:
        kind = fields.thinking.get("type")
        if kind not in ("enabled", "disabled", "adaptive"):
            raise RequestError(
                "'thinking.type' must be enabled, disabled or adaptive", "thinking.type"
            )
        think = kind != "disabled"
    settings = options(data)
    sampling, passed, withheld = engine_fields(data, "messages")
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        messages,
        tools or None,
        tool_choice=choice,
        parallel_calls=parallel,
        temperature=fields.temperature,
        max_tokens=fields.max_tokens,
        think=think,
        sampling=sampling,
        extra=passed,
        withheld=withheld,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=messages_format(fields.output_config),
        budget=budget or WorkBudget(),
    )
    return MessagesCall(request, fields.model, skipped)

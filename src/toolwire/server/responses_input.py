"""A Responses request (``POST /v1/responses``) read into one turn.

In: ``input`` as a string or items (messages, ``function_call``, ``function_call_output``,
``custom_tool_call``, ``custom_tool_call_output``, ``tool_search_call``,
``tool_search_output`` (the tools a client-run search found are offered from then on),
``additional_tools`` (tools declared in the input), ``reasoning``), ``instructions``,
``tools`` (``function``, ``custom`` and ``namespace`` tools: see
:mod:`toolwire.server.responses_tools`), ``tool_choice`` (a function or custom tool by name,
with its ``namespace`` or by its flat name), ``parallel_tool_calls``, ``max_output_tokens``,
``temperature``, ``stream``, ``text.format`` (a structured output: ``json_object`` or
``json_schema``, see :mod:`toolwire.pipeline.structured`). The items become the Chat
Completions messages the core takes, so every engine and every repair is the same as for
the other APIs: a ``custom_tool_call`` is a call of the function its tool is offered as
(its ``input`` the one string argument), a ``function_call`` with a ``namespace`` a call
under its tool's flat name, an output of either its tool message.

Content parts ``input_text``, ``output_text``, ``refusal``, ``input_image`` (``image_url``,
a URL or a ``data:`` URL, or ``file_id``) and ``input_file`` (``file_data``, ``file_id``;
a ``file_url`` as the text naming it), in messages and in a call's output list, become
Chat Completions parts; :mod:`toolwire.pipeline.content` gives them to an engine that takes
them, and to a model that reads text only as placeholders with a ``content-not-seen``
notice. Tools of other kinds (web search, a hosted tool search, a hosted shell) are left out with a
``tool-not-served`` notice. :attr:`ResponsesCall.tools` says, for a tool the engine is
offered under another name or shape than the client declared it, how the client knows it
(:class:`~toolwire.server.responses_items.ClientTool`), so the reply names it as the client
expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..budget import WorkBudget
from ..pipeline import Request
from .core import Told
from .fields import check, options
from .output import responses_format
from .passing import engine_fields, thinking
from .remember import ResponseMemory
from .responses_items import ClientTool, engine_call
from .responses_tools import Offered, found, listed, offered, tool_choice
from .validate import Declared, Origins, RequestError, check_turn, required_needs_tools

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


def _image(part: dict[str, Any], where: str) -> dict[str, Any]:
    """An ``input_image`` part as a Chat Completions part."""
    url, file_id = part.get("image_url"), part.get("file_id")
    if isinstance(url, str) and url:
        image: dict[str, Any] = {"url": url}
        if part.get("detail") in ("auto", "low", "high"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if isinstance(file_id, str) and file_id:
        return {"type": "file", "file": {"file_id": file_id}}
    raise RequestError(f"'{where}' must have an image_url or a file_id (a non-empty string)", where)


def _file(part: dict[str, Any], where: str) -> dict[str, Any]:
    """An ``input_file`` part as a Chat Completions part (a URL, which Chat Completions
    cannot carry, as the text that names it)."""
    name = part.get("filename")
    file: dict[str, Any] = {"filename": name[:200]} if isinstance(name, str) and name else {}
    for key in ("file_data", "file_id"):
        if isinstance(part.get(key), str) and part[key]:
            file[key] = part[key]
            return {"type": "file", "file": file}
    url = part.get("file_url")
    if isinstance(url, str) and url:
        return {"type": "text", "text": f"[file at {url[:500]}]"}
    raise RequestError(
        f"'{where}' must have file_data, file_id or file_url (a non-empty string)", where
    )


def _content(content: Any, where: str) -> str | list[dict[str, Any]]:
    """A message's content, or a call's output: a string, or parts — text
    (``input_text``/``output_text``), ``refusal``, ``input_image``, ``input_file`` — as one
    string when they are all text, else as Chat Completions parts for the pipeline to give
    as the model can take them."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"'{where}' must be a string or a list of content parts", where)
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": part["refusal"]})
        elif kind == "input_image":
            parts.append(_image(part, at))
        elif kind == "input_file":
            parts.append(_file(part, at))
        else:
            raise RequestError(
                f"'{at}' must be a content part: input_text, output_text, input_image or "
                'input_file, such as {"type": "input_text", "text": "..."}',
                f"{at}.type",
            )
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _answer(
    messages: list[dict[str, Any]], call_id: str, content: Any, origins: Origins, where: str
) -> None:
    """A call's output as its tool message; the assistant turn before it is answered."""
    for m in reversed(messages):
        if m["role"] == "assistant":
            m["_answered"] = True
            break
    origins.results[len(messages)] = f"{where}.call_id"
    messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def _call(
    messages: list[dict[str, Any]], call: dict[str, Any], origins: Origins, where: str
) -> None:
    """A call of the history in the assistant turn before it (as Chat Completions has
    them), or a turn of its own."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and not last.get("_answered"):
        calls = last.setdefault("tool_calls", [])
        origins.calls[(len(messages) - 1, len(calls))] = f"{where}.call_id"
        calls.append(call)
        if not last.get("content"):
            last["content"] = None
    else:
        origins.calls[(len(messages), 0)] = f"{where}.call_id"
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _output_id(item: dict[str, Any], where: str) -> str:
    """The ``call_id`` an output echoes (which call it answers, :func:`check_turn` says)."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError(
            f"'{where}.call_id' must be a non-empty string: the call_id of the call it answers",
            f"{where}.call_id",
        )
    return call_id


def _searched(given: str | list[Any]) -> list[tuple[str, Any]]:
    """The tools the history's tool searches found, and those an ``additional_tools`` item
    declares (Codex's way for some models): offered beside the request's own."""
    out: list[tuple[str, Any]] = []
    for i, item in enumerate(given if isinstance(given, list) else ()):
        if isinstance(item, dict) and item.get("type") in (
            "tool_search_output",
            "additional_tools",
        ):
            out += found(item.get("tools"), f"input[{i}].tools")
    return out


def _messages(
    fields: _Fields, history: list[dict[str, Any]], offer: Offered, origins: Origins
) -> list[dict[str, Any]]:
    """The input items as Chat Completions messages after ``history`` (calls folded into
    the assistant message before them, as Chat Completions has them; each call under the
    engine's name of its tool), where each call and output stands kept in ``origins``."""
    messages: list[dict[str, Any]] = list(history)
    thought: list[str] = []  # reasoning items not yet given to the model's next message
    if isinstance(fields.input, str):
        messages.append({"role": "user", "content": fields.input})
        return messages
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
            content = _content(item.get("content"), f"{where}.content")
            messages.append({"role": "system" if role == "developer" else role, "content": content})
            if role == "assistant":
                _reasoned(messages[-1], thought)  # the answer its reasoning came before
            thought.clear()
        elif kind in ("function_call", "custom_tool_call"):
            custom = kind == "custom_tool_call"
            for key in ("call_id", "name", "input" if custom else "arguments"):
                if not isinstance(item.get(key), str) or (key != "input" and not item[key]):
                    what = "a string" if key == "input" else "a non-empty string"
                    raise RequestError(f"'{where}.{key}' must be {what}", f"{where}.{key}")
            namespace = item.get("namespace")
            if namespace is not None and not isinstance(namespace, str):
                raise RequestError(f"'{where}.namespace' must be a string", f"{where}.namespace")
            name = offer.engine_name("custom" if custom else "function", namespace, item["name"])
            _call(messages, engine_call(item, name), origins, where)
            _reasoned(messages[-1], thought)
        elif kind == "tool_search_call":
            call_id, arguments = item.get("call_id"), item.get("arguments", {})
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(
                    f"'{where}.call_id' must be a non-empty string", f"{where}.call_id"
                )
            if not isinstance(arguments, dict):
                raise RequestError(f"'{where}.arguments' must be an object", f"{where}.arguments")
            searched = engine_call(item, offer.engine_name("tool_search", None, "tool_search"))
            _call(messages, searched, origins, where)
            _reasoned(messages[-1], thought)
        elif kind == "tool_search_output":
            call_id = _output_id(item, where)
            _answer(messages, call_id, listed(offer, item.get("tools")), origins, where)
            thought.clear()
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = _output_id(item, where)
            output = _content(item.get("output"), f"{where}.output")
            _answer(messages, call_id, output, origins, where)
            thought.clear()
        elif kind == "reasoning":
            # the model's own earlier thinking, given back to it with the answer or the
            # calls that follow it (as Chat Completions' reasoning_content); reasoning that
            # nothing of the model's follows (the turn was cut) is given to none
            text = _reasoning_text(item)
            if text:
                thought.append(text)
        elif kind == "additional_tools":
            continue  # tools, offered with the request's own (see _searched)
        else:
            raise RequestError(
                f"'{where}.type' {str(kind)[:40]!r} is not served: message, function_call, "
                "function_call_output, custom_tool_call, custom_tool_call_output, "
                "tool_search_call, tool_search_output, additional_tools or reasoning",
                f"{where}.type",
            )
    for m in messages:
        m.pop("_answered", None)
    return messages


def _reasoned(message: dict[str, Any], thought: list[str]) -> None:
    """``message`` (the model's) given the reasoning that came before it, then none held."""
    if thought:
        given = message.get("reasoning_content")
        message["reasoning_content"] = "\n\n".join([*([given] if given else []), *thought])
        thought.clear()


def _reasoning_text(item: dict[str, Any]) -> str:
    """A reasoning item's text: its ``reasoning_text`` parts, else its summary's."""
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key)
        texts = [
            part["text"]
            for part in (parts if isinstance(parts, list) else ())
            if isinstance(part, dict)
            and part.get("type") == kind
            and isinstance(part.get("text"), str)
        ]
        if texts:
            return "\n\n".join(texts)
    return ""


def _declared(tools: list[Any] | None, searched: list[tuple[str, Any]]) -> list[Declared]:
    """The tools as the client declared them, for :func:`check_turn`: each function and
    custom tool keyed by its namespace and name (unique as the client names them, whatever
    flat name the engine is offered), each schema given checked; a tool a search found
    may be found again, so only its schema is. (:func:`offered` read their shapes first.)"""
    out: list[Declared] = []

    def add(tool: Any, where: str, namespace: str | None, own: bool) -> None:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "namespace" and namespace is None and isinstance(tool.get("tools"), list):
            for j, inner in enumerate(tool["tools"]):
                add(inner, f"{where}.tools[{j}]", str(tool.get("name")), own)
        elif kind in ("function", "custom") or (
            kind == "tool_search" and tool.get("execution") == "client"
        ):  # the rest is left out, with a notice
            # a tool search is named by the gateway, not the client
            key = (namespace, tool.get("name")) if own and kind != "tool_search" else (where,)
            schema = tool.get("parameters") if kind != "custom" else None
            out.append(Declared(key, f"{where}.name", schema, f"{where}.parameters"))

    for i, tool in enumerate(tools or ()):
        add(tool, f"tools[{i}]", None, True)
    for where, tool in searched:
        add(tool, where, None, False)
    return out


async def parse_responses(
    data: Mapping[str, Any],
    memory: ResponseMemory | None = None,
    budget: WorkBudget | None = None,
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
    searched = _searched(fields.input)
    offer = offered(fields.tools, searched)
    origins = Origins(elsewhere="previous_response_id")
    conversation = _messages(fields, history, offer, origins)
    if not conversation:
        raise RequestError("'input' must not be empty", "input")
    check_turn(conversation, _declared(fields.tools, searched), origins)
    messages = conversation
    if fields.instructions:
        messages = [{"role": "system", "content": fields.instructions}, *conversation]
    tools = offer.tools
    choice = tool_choice(offer, fields.tool_choice)
    required_needs_tools(choice, tools, "tool_choice")
    settings = options(data)
    sampling, passed, withheld = engine_fields(data, "responses")
    request = Request(  # the turn settles the choice: a named tool alone, none: no tools
        messages,
        tools or None,
        tool_choice=choice,
        parallel_calls=fields.parallel_tool_calls,
        temperature=fields.temperature,
        max_tokens=fields.max_output_tokens,
        think=thinking(passed.get("reasoning_effort")),
        sampling=sampling,
        extra=passed,
        withheld=withheld,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
        stream=bool(fields.stream),
        output=responses_format(fields.text),
        budget=budget or WorkBudget(),
    )
    call = ResponsesCall(request, fields, conversation, memory)
    call.notices = offer.skipped
    call.tools = offer.client
    return call

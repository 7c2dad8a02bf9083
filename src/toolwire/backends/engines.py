"""What each OpenAI-compatible engine documents for constraining a reply, and nothing more.

An engine behind ``/v1/chat/completions`` may say, in its own documentation, how a request
asks it to decode under a schema. Where it does, a turn that must be a call (``tool_choice``
``required`` or a named function) and a structured output (:class:`~toolwire.pipeline.
request.OutputFormat`) are sent with those fields; an engine that documents nothing gets
nothing extra, because an unknown field is at best ignored and at worst refused.

The engines (``engine=`` of :class:`~toolwire.backends.openai.OpenAIBackend`):

``openai``
    OpenAI's own API: structured outputs as ``response_format`` ``json_schema`` (or
    ``json_object``); ``tool_choice`` ``required`` and named are its own. Tools are not
    made ``strict``: OpenAI then requires every property required and no other keys, which
    would change the tools' meaning.
``vllm``
    vLLM: ``tool_choice`` ``required`` and named are decoded under the tools' schemas by
    vLLM itself (docs/features/tool_calling.md, "Constrained Decoding Behavior"); with
    ``auto``, ``strict: true`` on a tool opts in to the same (structural tags); structured
    outputs as ``response_format``.
``llama-server``
    llama.cpp's server: its ``json_schema`` request field ("Set a JSON schema for
    grammar-based sampling", tools/server/README.md) and ``response_format``. It takes
    ``tool_choice`` ``required`` but does not decode under it for every template (measured
    with the default model: a joke, not a call), and a custom ``grammar`` is refused beside
    tools ("Cannot use custom grammar constraints with tools"). So a required call is asked
    with ``json_schema``: the schema of one call object, ``{"name": …, "arguments": …}``,
    one branch per tool. The server's own parser does not read that object as a call (it
    is the content), so the reply's content is read back as the call it was made to be:
    :func:`calls_from_content`.
``generic`` (any other server)
    Nothing extra for a call.

A structured output is the client's own field of the API all of them speak: it goes to every
engine, a generic one too, as ``response_format``
(:func:`~toolwire.pipeline.structured.response_format`), and the reply is checked against
the schema either way.

A turn's thinking switch (Messages' ``thinking``, Responses' and Chat Completions'
``reasoning_effort`` read into ``Request.think``) reaches vLLM and llama-server as the
template variable their users set, ``chat_template_kwargs: {"enable_thinking": …}``
(:func:`thinking_fields`; a client's own ``chat_template_kwargs`` win). Other engines
document no such switch: the turn names it in a ``field-not-honoured`` notice.

A streamed reply's usage is asked of every engine, a generic one too, with
``stream_options: {"include_usage": true}`` (:data:`STREAM_USAGE`): OpenAI, vLLM and
llama-server document it, and so do the servers a generic engine usually is (Ollama's
``/v1``, LM Studio, LiteLLM); the usage then comes in a last chunk with no choices. A
server that refuses the field (a 400 or 422 naming it: :func:`refuses_stream_options`, as
a strict request model refuses an extra field) gets the request again without it, once,
and is not asked again: the usage is worth less than the request.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

from .. import events as ev
from ..errors import BackendError, UsageError
from ..messages import ToolCall
from ..pipeline import Request
from ..pipeline.structured import response_format

__all__ = [
    "CONSTRAINING",
    "ENGINES",
    "STREAM_USAGE",
    "THINKING",
    "Body",
    "call_schema",
    "calls_from_content",
    "constraint_fields",
    "engine_for",
    "refuses_stream_options",
    "thinking_fields",
]

#: The engines this module knows, and those among them that constrain a call.
ENGINES = ("openai", "vllm", "llama-server", "generic")
CONSTRAINING = frozenset({"vllm", "llama-server"})
#: The field that asks a streamed reply's usage, sent to every engine (see the module).
STREAM_USAGE: dict[str, Any] = {"stream_options": {"include_usage": True}}


class Body(dict[str, Any]):
    """A request body that remembers whether its reply's content is a call (a
    ``json_schema`` of a call was sent): the reader needs to know, the wire does not."""

    calls_in_content: bool = False


def engine_for(engine: str | None, base_url: str) -> str:
    """The engine named (checked), or the one a base URL shows (OpenAI's host), else
    ``generic``: an engine is never guessed from a port or a model's name."""
    if engine is not None:
        if engine not in ENGINES:
            raise UsageError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
        return engine
    return "openai" if "api.openai.com" in base_url else "generic"


def refuses_stream_options(error: BackendError) -> bool:
    """Whether ``error`` is a server refusing ``stream_options`` itself: a 400 or 422 whose
    body names the field (``Unrecognized request argument supplied: stream_options``,
    ``"loc": ["body", "stream_options"]``, ``property 'stream_options' is unsupported``)."""
    return (
        error.kind == "refused"
        and error.status in (400, 422)
        and "stream_options" in (error.body or str(error))
    )


def constraint_fields(
    request: Request, engine: str, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[dict[str, Any], bool]:
    """The fields ``engine`` documents for constraining ``request``, and whether the reply's
    content is then a call. ``tools`` are the tools as they go on the wire.

    A call is constrained when the turn is (``constrained`` and not ``strict``: the model's
    own output is what a strict turn asks for); a structured output is always sent, to
    every engine, since the caller asked for it in the API the engine speaks. A required
    call comes first: with both, the reply is the call.
    """
    fields: dict[str, Any] = {}
    constrains = request.constrained and not request.strict and bool(tools)
    if constrains and request.required and engine == "llama-server":
        fields["json_schema"] = call_schema(tools or [])
        return fields, True
    if constrains and engine == "vllm" and not request.required:
        fields["tools"] = [_strict(t) for t in tools or []]
    if request.output is not None and not request.required:
        fields["response_format"] = response_format(request.output)
    return fields, False


def call_schema(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call to one of ``tools``: its name, and arguments under that
    tool's parameters, nothing else."""
    branches = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [t["function"]["name"]]},
                "arguments": t["function"].get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _strict(tool: Mapping[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if not isinstance(function, Mapping) or "strict" in function:
        return dict(tool)
    return {**tool, "function": {**function, "strict": True}}


async def calls_from_content(
    events: AsyncIterator[ev.Event], tools: Sequence[Mapping[str, Any]]
) -> AsyncGenerator[ev.Event, None]:
    """The events of a reply whose content was decoded as one call object: the content is
    held, and at the end given as that call when it is one to a declared tool (the server
    read no call of its own); otherwise (cut short, or the server read calls itself) as the
    text it is. Other events pass as they come."""
    names = {t["function"]["name"] for t in tools}
    held: list[str] = []
    called = False
    async for event in events:
        if isinstance(event, ev.TextDelta):
            held.append(event.text)
            continue
        if isinstance(event, ev.CallStart):
            called = True
        if isinstance(event, ev.Done):
            text = "".join(held)
            call = None if called else _call_in(text, names)
            if call is not None:
                yield ev.CallStart(0, call.id, call.name)
                yield ev.CallArgsDelta(0, call.arguments_text)
                yield ev.CallEnd(0, call)
            elif text:
                yield ev.TextDelta(text)
        yield event


def _call_in(text: str, names: set[str]) -> ToolCall | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
        return None
    name, arguments = value["name"], value["arguments"]
    if name not in names or not isinstance(arguments, dict):
        return None
    shown = json.dumps(arguments, ensure_ascii=False)
    return ToolCall("call_" + secrets.token_hex(8), name, arguments, shown)


#: The engines that take a turn's thinking switch (see the module).
THINKING = frozenset({"vllm", "llama-server"})


def thinking_fields(request: Request, engine: str) -> dict[str, Any]:
    """The thinking switch of ``request`` in ``engine``'s dialect (none where the request
    sets none, or the engine has no switch); the client's own ``chat_template_kwargs`` are
    kept, and win."""
    if request.think is None or engine not in THINKING:
        return {}
    given = request.extra.get("chat_template_kwargs")
    kwargs = dict(given) if isinstance(given, Mapping) else {}
    kwargs.setdefault("enable_thinking", request.think)
    return {"chat_template_kwargs": kwargs}

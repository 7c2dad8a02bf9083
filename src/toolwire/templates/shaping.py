"""Messages and tools in the shape every published chat template accepts.

Callers hold conversations in OpenAI's chat-completions shape, but templates disagree on the
details: some index ``tool_call.function.arguments`` as a mapping, some print ``content``
even when it is ``None``, Mistral's refuse call ids that are not nine alphanumerics. Shaping
once, here, keeps those quirks out of every caller.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import string
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from toolwire.budget import paid
from toolwire.errors import UsageError
from toolwire.messages import ToolCall

__all__ = ["Arguments", "CallIds", "alnum9", "normalize_tools", "shape_messages"]

#: How :func:`shape_messages` treats tool-call ids: ``"keep"`` leaves them as given;
#: ``"alnum9"`` maps each to nine ASCII letters and digits (Mistral's templates demand it).
CallIds = Literal["keep", "alnum9", "functions"]
#: An id as Kimi's templates write and read it: ``functions.NAME:N``.
_FUNCTIONS_ID = re.compile(r"functions\.[^\s:]+:\d+\Z")

_ALNUM = string.ascii_letters + string.digits
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class Arguments(dict[str, Any]):
    """Tool-call arguments: a mapping that prints as JSON.

    Templates disagree on what ``function.arguments`` is. Most iterate it or pass it to
    ``tojson`` (a mapping); some print it or concatenate it to a string (functionary v3.2
    writes ``'\n' + arguments``), as if it were OpenAI's JSON text. This is both: a ``dict``
    whose ``str()`` and ``+`` give JSON, the exact text the caller sent when it came as text.
    """

    def __init__(self, mapping: Mapping[str, Any], text: str | None = None) -> None:
        super().__init__(mapping)
        self.text = text

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return json.dumps(self, ensure_ascii=False)

    def __add__(self, other: object) -> str:
        if isinstance(other, str):
            return str(self) + other
        return NotImplemented

    def __radd__(self, other: object) -> str:
        if isinstance(other, str):
            return other + str(self)
        return NotImplemented


def alnum9(call_id: str) -> str:
    """Nine ASCII alphanumerics standing for ``call_id``, the same on every run.

    An id that already is nine alphanumerics is kept, so ids a Mistral model produced
    round-trip unchanged. Others are derived from a SHA-256 of the id (62**9 values, so two
    ids in one conversation collide with negligible probability).
    """
    if len(call_id) == 9 and call_id.isascii() and call_id.isalnum():
        return call_id
    number = int.from_bytes(
        hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).digest()[:8], "big"
    )
    chars = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALNUM))
        chars.append(_ALNUM[digit])
    return "".join(chars)


def shape_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    call_ids: CallIds = "keep",
    keep_call_none: bool = False,
    one_call_per_message: bool = False,
) -> list[dict[str, Any]]:
    """Template-ready deep copies of OpenAI-style ``messages`` (the input is never changed).

    * ``content`` that is ``None`` or missing becomes ``""`` (templates concatenate it);
      a list of content parts is kept as is. With ``keep_call_none``, a message with tool
      calls and no content (``None`` or ``""``) gets ``None``: some templates (DeepSeek R1's
      distills) write the calls only when the content is none.
    * Each tool call becomes ``{"id", "type": "function", "function": {"name",
      "arguments"}}`` with ``arguments`` an :class:`Arguments` mapping, which prints as JSON
      for templates that treat it as text: a JSON-object string is decoded (and kept as
      that mapping's text), any other string is kept as given. A
      :class:`~toolwire.messages.ToolCall` is accepted, and so is a flat ``{"id", "name",
      "arguments"}`` call. A call without an id gets ``call_<n>``, n counting calls from 0
      across the conversation.
    * A tool result without ``tool_call_id`` answers the oldest unanswered call; one without
      ``name`` gets the name of the call it answers (Kimi's and Gemma's templates print it).
    * ``call_ids="alnum9"`` maps every call id and ``tool_call_id`` through :func:`alnum9`;
      ``call_ids="functions"`` writes every id that is not already ``functions.NAME:N`` as
      that, N counting calls across the conversation (Kimi's templates read a call's name
      from its id), and the results that answer it with the same id.
    * An assistant's reasoning goes by both names templates read: ``reasoning_content``
      (Qwen3, GLM) and ``thinking`` (gpt-oss) — except ``thinking`` beside calls and content,
      where gpt-oss reads the content as the reasoning and refuses both.
    * ``one_call_per_message`` splits a turn of several calls into one assistant message per
      call, each followed by its result (templates that render only a turn's first call, or
      refuse more: gpt-oss, Llama 3, GigaChat).

    Raises :class:`~toolwire.errors.UsageError` (a ``ValueError``) for a message that is not a
    mapping, a call without a name, or an unknown ``call_ids``.
    """
    if call_ids not in ("keep", "alnum9", "functions"):
        raise UsageError(f"call_ids must be 'keep', 'alnum9' or 'functions', not {call_ids!r}")
    renamed: dict[str, str] = {}  # call_ids="functions": the client's id, the one written
    shaped: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    unanswered: deque[str] = deque()
    n_calls = 0
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise UsageError(f"message {index} is a {type(message).__name__}, not a mapping")
        out = {key: copy.deepcopy(value) for key, value in message.items() if key != "tool_calls"}
        calls = message.get("tool_calls")
        _name_reasoning(out, bool(calls))
        if keep_call_none and calls and not out.get("content"):
            out["content"] = None
        elif out.get("content") is None:
            out["content"] = ""
        if calls:
            out["tool_calls"] = []
            for call in calls:
                shaped_call = _shape_call(call, f"message {index}", n_calls, call_ids)
                if call_ids == "functions" and not _FUNCTIONS_ID.match(shaped_call["id"]):
                    given = shaped_call["id"]
                    name = shaped_call["function"]["name"]
                    shaped_call["id"] = renamed[given] = f"functions.{name}:{n_calls}"
                n_calls += 1
                out["tool_calls"].append(shaped_call)
                names[shaped_call["id"]] = shaped_call["function"]["name"]
                unanswered.append(shaped_call["id"])
        elif "tool_calls" in message:
            out["tool_calls"] = copy.deepcopy(calls)
        if out.get("role") == "tool":
            answered = out.get("tool_call_id")
            if answered is None and unanswered:
                answered = unanswered[0]
            elif isinstance(answered, str) and call_ids == "alnum9":
                answered = alnum9(answered)
            elif isinstance(answered, str) and answered in renamed:
                answered = renamed[answered]
            if answered is not None:
                out["tool_call_id"] = answered
                if answered in unanswered:
                    unanswered.remove(answered)
                if "name" not in out and answered in names:
                    out["name"] = names[answered]
        shaped.append(out)
    return _one_call_each(shaped) if one_call_per_message else shaped


def _name_reasoning(message: dict[str, Any], has_calls: bool) -> None:
    """Give an assistant's reasoning both of the names templates read it by."""
    if message.get("role") != "assistant":
        return
    reasoning, thinking = message.get("reasoning_content"), message.get("thinking")
    if isinstance(reasoning, str) and reasoning and "thinking" not in message:
        if not (has_calls and message.get("content")):
            message["thinking"] = reasoning
    elif isinstance(thinking, str) and thinking and "reasoning_content" not in message:
        message["reasoning_content"] = thinking


def _one_call_each(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each assistant message of several calls becomes one message per call, each followed
    by the results that answer it among the tool messages right after the turn."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or len(calls) < 2:
            out.append(message)
            i += 1
            continue
        j = i + 1
        while j < len(messages) and messages[j].get("role") == "tool":
            j += 1
        results = messages[i + 1 : j]
        placed: set[int] = set()
        for n, call in enumerate(calls):
            part = dict(message, tool_calls=[call])
            if n:  # the turn's text and reasoning go with its first call
                part["content"] = None if message.get("content") is None else ""
                part.pop("reasoning_content", None)
                part.pop("thinking", None)
            out.append(part)
            for k, result in enumerate(results):
                if k not in placed and result.get("tool_call_id") == call["id"]:
                    out.append(result)
                    placed.add(k)
        out += [result for k, result in enumerate(results) if k not in placed]
        i = j
    return out


def _shape_call(call: Any, where: str, number: int, call_ids: CallIds) -> dict[str, Any]:
    if isinstance(call, ToolCall):
        call = call.to_openai()
    if not isinstance(call, Mapping):
        raise UsageError(f"{where}: a tool call is a {type(call).__name__}, not a mapping")
    function = call.get("function", call)
    if not isinstance(function, Mapping):
        raise UsageError(f"{where}: tool call 'function' is not a mapping")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: a tool call has no name")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{number}"
    if call_ids == "alnum9":
        call_id = alnum9(call_id)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": _arguments(function.get("arguments"))},
    }


def _arguments(arguments: Any) -> Any:
    """:class:`Arguments` when they are a mapping or a JSON object in a string; otherwise
    (text that is not a JSON object) the value as given."""
    if arguments is None:
        return Arguments({})
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return arguments
        return Arguments(decoded, arguments) if isinstance(decoded, dict) else arguments
    if isinstance(arguments, Mapping):
        return Arguments(copy.deepcopy(dict(arguments)))
    return copy.deepcopy(arguments)


def normalize_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Tools in OpenAI's ``{"type": "function", "function": schema}`` shape (deep copies).

    Accepts that shape, a bare ``{"name", "description", "parameters"}`` schema, or the flat
    ``{"type": "function", "name", …}`` of the Responses API. A schema without
    ``parameters`` gets an empty object schema, because templates print it unconditionally.

    Raises :class:`~toolwire.errors.UsageError` (a ``ValueError``) for a tool that is not a
    mapping, is not a function tool, or has no name: a tool the model cannot call by name is a
    caller's bug, better seen at once than rendered into a prompt.
    """
    normalized: list[dict[str, Any]] = []
    for index, tool in enumerate(tools or ()):
        paid(1)  # many tools shaped in a worker thread: the event loop gets its turn
        if not isinstance(tool, Mapping):
            raise UsageError(f"tool {index} is a {type(tool).__name__}, not a mapping")
        kind = tool.get("type", "function")
        if kind != "function":
            raise UsageError(f"tool {index} has type {kind!r}; only function tools render")
        if "function" in tool:
            schema = tool["function"]
            if not isinstance(schema, Mapping):
                raise UsageError(f"tool {index}: 'function' is not a mapping")
            schema = dict(schema)
        else:
            schema = {key: value for key, value in tool.items() if key != "type"}
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise UsageError(f"tool {index} has no name")
        schema = copy.deepcopy(schema)
        if schema.get("parameters") is None:
            schema["parameters"] = copy.deepcopy(_EMPTY_PARAMETERS)
        normalized.append({"type": "function", "function": schema})
    return normalized

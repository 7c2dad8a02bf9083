"""The gateway's request check: body bytes in, ``(Request, stream, parallel)`` out, or a
:class:`RequestError` that names the field at fault (``tools[0].function.name``).

It is one function, :func:`validate_chat_request`, over declared pydantic models of every
Chat Completions request field, so that the later wire APIs (Responses, Anthropic Messages)
can sit beside it as other functions into the same :class:`~toolwire.pipeline.Request`. The
request is checked whole, before the backend sees any of it: a malformed one costs no model
call and no upstream request.

The body is read as strict JSON first: UTF-8 only, no ``NaN`` or ``Infinity`` (Python's json
reads both; no other JSON reader does), no number too large for a float, no lone surrogate
(``"\\ud800"`` decodes to a string that cannot be encoded again), no key given twice (two
readers may keep different ones). Then the models, strictly typed — nothing is coerced:
``"stream": "yes"`` and ``"parallel_tool_calls": "no"`` are refused, not read as true, and
``1.0`` is not a whole number; free-form values (a tool's schema) are nested at most
:data:`~toolwire.server.chat_request.MAX_DEPTH` levels (they are copied recursively later).

What each field gets is declared in :mod:`toolwire.server.chat_request`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import ValidationError

from ..arguments.schema import validator_for
from ..budget import WorkBudget, WorkExceeded, paid
from ..errors import ArgumentsError
from ..pipeline import Request
from .chat_request import MAX_DEPTH, MESSAGES, TAG, ChatCompletionsRequest
from .output import chat_format
from .passing import engine_fields, thinking
from .refusal import RequestError

__all__ = [
    "MAX_BODY_DEPTH",
    "MAX_DEPTH",
    "Declared",
    "Origins",
    "RequestError",
    "check_turn",
    "decode_body",
    "required_needs_tools",
    "validate_chat",
    "validate_chat_request",
]


# --------------------------------------------------------------------------- strict JSON


class _Refused:
    """Stands where the JSON held a value refused at the edge, until its path is known."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Duplicated(dict[str, Any]):
    """An object in which a key was given twice: ``key``."""

    def __init__(self, made: dict[str, Any], key: str) -> None:
        super().__init__(made)
        self.key = key


_SURROGATE = re.compile("[\ud800-\udfff]")
#: What the raw text must hold for a lone surrogate to be decoded: the escape of one half.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return ""


def _lone_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


#: A step (:mod:`toolwire.budget`) is paid for every 16 objects a body's reading makes or
#: walks (a mask: ``count & _OBJECTS_A_STEP`` is 0 every 16th).
_OBJECTS_A_STEP = 15


def _decode(body: bytes) -> Any:
    """The body as JSON, refusing what strict JSON readers refuse (see the module's doc).

    The decoder marks what it refuses (``NaN``, a float too large, a key given twice) and the
    raw text tells whether a surrogate escape is there; only then is the decoded value
    walked, to name the path at fault: a body of 200,000 small messages is not walked value
    by value."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not UTF-8 (byte {exc.start})") from None
    marked: list[bool] = []

    def constant(name: str) -> _Refused:
        marked.append(True)
        return _Refused(f"{name} is not a JSON number")

    def number(digits: str) -> float | _Refused:
        value = float(digits)
        if math.isfinite(value):
            return value
        marked.append(True)
        return _Refused(f"the number {digits[:40]} is too large")

    read = [0]

    def mapping(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # a step for every few objects read: in the worker, a large body's reading gives the
        # event loop its turns (the body's size has paid for it)
        read[0] += 1
        if not read[0] & _OBJECTS_A_STEP:
            paid(1)
        made = dict(pairs)
        if len(made) == len(pairs):
            return made
        marked.append(True)
        return _Duplicated(made, _repeated(pairs))

    try:
        data = json.loads(
            text, parse_constant=constant, parse_float=number, object_pairs_hook=mapping
        )
    except RecursionError:
        raise RequestError("the request body is nested too deep to read") from None
    except ValueError as exc:
        raise RequestError(f"the request body is not JSON: {str(exc)[:200]}") from None
    if marked or _SURROGATE_ESCAPE.search(text):
        _check_values(data)
    return data


Link = Union[tuple["Link", str | int], None]  # noqa: UP007 - a recursive alias


def _check_values(data: Any) -> None:
    """Refuse refused numbers, lone surrogates and repeated keys, naming the path. One pass,
    iterative; a path is built only for the value at fault."""
    stack: list[tuple[Any, Link]] = [(data, None)]
    while stack:
        item, link = stack.pop()
        problem = None
        if isinstance(item, str):
            if _lone_surrogate(item):
                problem = "holds a lone surrogate (\\ud800-\\udfff), which is not text"
        elif isinstance(item, dict):
            if isinstance(item, _Duplicated):
                link = (link, item.key)
                problem = "this key is given twice in one object"
            else:
                for key, value in item.items():
                    if _lone_surrogate(key):
                        problem = "has a key holding a lone surrogate, which is not text"
                        break
                    stack.append((value, (link, key)))
        elif isinstance(item, list):
            stack.extend((value, (link, i)) for i, value in enumerate(item))
        elif isinstance(item, _Refused):
            problem = item.reason
        if problem is not None:
            path = _linked_path(link)
            raise RequestError(f"{path or 'the request body'}: {problem}", path or None)


def _linked_path(link: Link) -> str:
    keys: list[str | int] = []
    while link is not None:
        link, key = link
        keys.append(key)
    return _path(reversed(keys))


def _path(keys: Any) -> str:
    """``("tools", 0, "function", "name")`` as ``tools[0].function.name``."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif not str(key).startswith(TAG):
            # any key the client sent, made sendable (a lone surrogate escaped)
            name = str(key)[:100].encode("utf-8", "backslashreplace").decode("utf-8")
            out += f".{name}" if out else name
    return out


_FRIENDLY = {
    "modalities": "is not served (only text): the gateway answers in text",
}
#: pydantic's words for a wrong type, in JSON's.
_TYPES = {
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "a list",
    "none_required": "null",
}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    for types, kind in (
        (str, "a string"),
        (int, "a whole number"),
        (float, "a number"),
        (dict, "an object"),
        (list, "a list"),
    ):
        if isinstance(value, types):
            return kind
    return "something else"


def _explain(error: Mapping[str, Any]) -> RequestError:
    """One pydantic error as the client reads it: the path, and what is wrong there."""
    loc = list(error["loc"])
    kind = error["type"]
    if kind in ("wrong_role", "wrong_type") and isinstance(error.get("input"), dict):
        loc.append(kind.removeprefix("wrong_"))
    path = _path(loc)
    message = str(error["msg"])
    if not path and kind in ("model_type", "dict_type"):
        return RequestError("the request body must be a JSON object")
    if kind == "extra_forbidden":
        message = "is not a field of the request here"
    elif kind == "missing":
        message = "is required"
    elif kind == "too_short" and not error.get("input"):
        message = "must not be empty"
    elif kind == "string_pattern_mismatch" and path.endswith("function.name"):
        message = "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'"
    elif kind in _TYPES:
        message = f"must be {_TYPES[kind]}, not {_json_kind(error.get('input'))}"
    elif kind == "literal_error" and any(path.startswith(p) for p in _FRIENDLY):
        message = next(f for p, f in _FRIENDLY.items() if path.startswith(p))
    else:
        message = message[0].lower() + message[1:]
    return RequestError(f"{path or 'the request body'}: {message}", path or None)


#: Messages are checked this many at a time: pydantic holds the GIL through one call, and a
#: worker thread checking a large body must let the event loop run between slices.
_SLICE = 2000


def _checked(data: Any) -> ChatCompletionsRequest:
    """The request as its model, its messages checked a slice at a time."""
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list) or len(messages) <= _SLICE:
        messages = []
    try:
        if not messages:
            return ChatCompletionsRequest.model_validate(data)
        parsed = ChatCompletionsRequest.model_validate({**data, "messages": messages[:_SLICE]})
    except ValidationError as exc:
        raise _refusal(exc.errors(include_url=False)) from None
    for start in range(_SLICE, len(messages), _SLICE):
        try:
            MESSAGES.validate_python(messages[start : start + _SLICE])
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            for error in errors:
                index, *rest = error["loc"]
                error["loc"] = ("messages", start + int(index), *rest)
            raise _refusal(errors) from None
    return parsed


def _refusal(errors: list[Any]) -> RequestError:
    """The first error, saying how many more there are."""
    first = _explain(errors[0])
    if len(errors) > 1:
        first.message += f" (and {len(errors) - 1} more problem(s))"
        first.args = (first.message,)
    return first


#: Request bodies nested deeper than this (from the body itself) are refused with 400.
MAX_BODY_DEPTH = 64


def _check_depth(data: Any, limit: int = MAX_BODY_DEPTH) -> None:
    """Refuse a body nested deeper than ``limit``, naming the path where it goes too deep
    (values are copied recursively later). One pass, iterative; a path is built only for
    the value at fault."""
    stack: list[tuple[Any, Link, int]] = [(data, None, 0)]
    walked = 0
    while stack:
        item, link, depth = stack.pop()
        walked += 1
        if not walked & _OBJECTS_A_STEP:
            paid(1)  # as reading the body (see _decode)
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        if depth >= limit and item:
            path = _linked_path(link)
            raise RequestError(
                f"{path or 'the request body'}: is nested deeper than {limit} levels",
                path or None,
            )
        stack.extend(
            (value, (link, key), depth + 1)
            for key, value in children
            if isinstance(value, (dict, list))
        )


def decode_body(body: bytes) -> Any:
    """A request body read as strict JSON (every API's), within :data:`MAX_BODY_DEPTH`
    levels, or a :class:`RequestError` naming what it refuses and where."""
    data = _decode(body)
    _check_depth(data)
    return data


def validate_chat_request(body: bytes) -> Request:
    """The turn of a Chat Completions body (whether to stream and whether parallel calls
    are allowed are the turn's ``stream`` and ``parallel_calls``); a :class:`RequestError`
    naming the field for anything malformed."""
    return validate_chat(decode_body(body))


def validate_chat(data: Any, budget: WorkBudget | None = None) -> Request:
    """:func:`validate_chat_request` for a body already decoded by :func:`decode_body`;
    ``budget`` is the request's work budget (see :mod:`toolwire.budget`)."""
    parsed = _checked(data)
    tools = data.get("tools")
    check_turn(
        data["messages"],
        [
            Declared(
                t["function"]["name"],
                f"tools[{i}].function.name",
                t["function"].get("parameters"),
                f"tools[{i}].function.parameters",
            )
            for i, t in enumerate(parsed.tools or ())
        ],
        _ChatOrigins(),
    )
    _check_choice(parsed, tools)
    options = parsed.toolwire or {}
    sampling, passed, withheld = engine_fields(data, "chat", _explain)
    return Request(  # the turn settles the choice: a named tool alone, none: no tools
        data["messages"],
        tools or None,
        tool_choice=data.get("tool_choice"),
        parallel_calls=parsed.parallel_tool_calls is not False,
        temperature=parsed.temperature,
        max_tokens=parsed.max_tokens or parsed.max_completion_tokens,
        strict=bool(options.get("strict")),
        constrained=options.get("constrained") is not False,
        stream=bool(parsed.stream),
        output=chat_format(parsed.response_format),
        think=thinking(data.get("reasoning_effort")),
        sampling=sampling,
        extra=passed,
        withheld=withheld,
        budget=budget or WorkBudget(),
    )


def _check_choice(parsed: ChatCompletionsRequest, tools: list[dict[str, Any]] | None) -> None:
    """A ``tool_choice`` naming a function names one of the tools; ``required`` needs
    some. (What the choice offers, the turn settles.)"""
    choice = parsed.tool_choice
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        if not any(t["function"]["name"] == name for t in tools or ()):
            raise RequestError(
                f"tool_choice.function.name {name[:80]!r} is not in 'tools'",
                "tool_choice.function.name",
            )
    required_needs_tools(choice, tools, "tool_choice")


def required_needs_tools(choice: Any, tools: Sequence[Any] | None, field: str) -> None:
    """A call required (``required``, Messages' ``any``) with no tool to call is the client's
    error, in every API: the reply could not be what was asked."""
    if choice == "required" and not tools:
        raise RequestError(f"{field} asks for a call, but there are no tools to call", field)


# ------------------------------------------------- the calls and tools of a turn, in every API


@dataclass(frozen=True)
class Declared:
    """A tool as the client declared it: ``key`` is what must be unique (its name, with
    its namespace where the API has them), ``schema`` its JSON schema (None: none given),
    each with the path of its field in the client's request."""

    key: Hashable
    name_at: str
    schema: Any
    schema_at: str


@dataclass
class Origins:
    """Where the calls and results of a turn's messages (Chat Completions messages, as
    every API's input becomes) stand in the client's request, so that a fault is named in
    the client's own fields (``input[3].call_id``, ``messages[2].content[0].tool_use_id``).
    ``calls`` by (message, call) index, ``results`` by message index; what was not
    recorded (a conversation the gateway stored) is named ``elsewhere``."""

    calls: dict[tuple[int, int], str] = field(default_factory=dict)
    results: dict[int, str] = field(default_factory=dict)
    elsewhere: str = "messages"

    def call(self, message: int, index: int) -> str:
        return self.calls.get((message, index), self.elsewhere)

    def result(self, message: int) -> str:
        return self.results.get(message, self.elsewhere)


class _ChatOrigins(Origins):
    """Chat Completions' messages are the client's own: each path follows from its index."""

    def call(self, message: int, index: int) -> str:
        return f"messages[{message}].tool_calls[{index}].id"

    def result(self, message: int) -> str:
        return f"messages[{message}].tool_call_id"


def check_turn(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Declared], origins: Origins
) -> None:
    """The checks every API makes of a turn alike, whatever its wire: each tool's name
    unique and its schema a JSON schema of an object; each call's id unique in the
    conversation; each result answering a call made before it, and no call answered twice.

    A call not answered before the next user turn is taken, as Chat Completions always took
    it: an agent interrupted mid-call sends one, and the model can still answer the turn.
    One pass over the messages, one over the tools."""
    _check_tools(tools)
    called: set[str] = set()
    answered: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for j, call in enumerate(message.get("tool_calls") or ()):
                cid = call.get("id")
                if not isinstance(cid, str):
                    continue
                if cid in called:
                    at = origins.call(i, j)
                    raise RequestError(
                        f"{at} {cid[:80]!r} is the id of an earlier call: each call's id "
                        "must be unique in the conversation",
                        at,
                    )
                called.add(cid)
        elif role == "tool":
            cid = message.get("tool_call_id")
            if not isinstance(cid, str):
                continue  # each API's own model refuses it, naming it
            if cid not in called:
                at = origins.result(i)
                raise RequestError(
                    f"{at} {cid[:80]!r} answers no call made before it: it must echo the "
                    "id of the call it answers",
                    at,
                )
            if cid in answered:
                at = origins.result(i)
                raise RequestError(
                    f"{at} {cid[:80]!r} answers a call answered before: each call takes one result",
                    at,
                )
            answered.add(cid)


def _check_tools(tools: Sequence[Declared]) -> None:
    seen: set[Hashable] = set()
    for tool in tools:
        paid(1)  # a worker thread reading many tools gives the event loop its turn
        if tool.key in seen:
            raise RequestError(
                f"{tool.name_at} {_shown(tool.key)} names a tool given before it: each "
                "tool's name must be unique",
                tool.name_at,
            )
        seen.add(tool.key)
        problem = schema_problem(tool.schema)
        if problem is not None:
            raise RequestError(f"{tool.schema_at}: {problem}", tool.schema_at)


def _shown(key: Hashable) -> str:
    """A tool's key as the client reads it: ``'name'``, or ``'name' in namespace 'ns'``."""
    if isinstance(key, tuple) and len(key) == 2 and key[0] is not None:
        return f"{str(key[1])[:80]!r} in namespace {str(key[0])[:80]!r}"
    name = key[1] if isinstance(key, tuple) and len(key) == 2 else key
    return repr(str(name)[:80])


def schema_problem(schema: Any) -> str | None:
    """What is wrong with a tool's schema (None: nothing, or no schema given): it must be
    a JSON schema (Draft 2020-12) of an object — the one check of every API."""
    if schema is None:
        return None
    if not isinstance(schema, dict):
        return "must be a JSON schema (an object)"
    if schema.get("type", "object") != "object":
        return "must be a JSON schema of type object"
    try:
        validator_for(schema)
    except ArgumentsError as exc:
        return str(exc)[:300]
    except WorkExceeded as exc:  # the request's work budget: its tools cost too much
        return str(exc)[:300]
    return None

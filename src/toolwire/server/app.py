"""The OpenAI-compatible gateway: working tool calls for any OpenAI client, before any engine.

``POST /v1/chat/completions`` (streamed or not), ``GET /v1/models``, ``GET /health``. Behind
it stands a backend — the local GGUF model in-process, or an upstream OpenAI-compatible
server — and the reply pipeline in front of it: calls left in the text are recovered as
``tool_calls``, refused tools are healed into words, refused schemas sent again plainly.
The gateway never runs tools: the client does, and sends the results back as ``tool``
messages.

Replies follow OpenAI's shape: ``arguments`` is a JSON string, ``content`` is null when the
reply is only calls, ``finish_reason`` is ``tool_calls``, streamed calls carry their own
``index``. Arguments are read forgivingly and typed by the tool's schema, streamed or not;
a streamed call is sent whole when it is complete. A malformed request gets a 400 in
OpenAI's error shape; a failing engine the status of its failure, with a short message of
ours (see :mod:`toolwire.server.failures`), streamed or not.

Every completion also carries ``"toolwire": {"notices": [...]}``, a top-level extension
that OpenAI clients ignore: each decision and recovery the pipeline made, a call it
abandoned, arguments it repaired — in the body, or streamed in a chunk before ``[DONE]``. A
request may send ``"toolwire": {"strict": true}``: no recovery, arguments only as sent;
``"toolwire": {"constrained": false}``: a local model's calls generated free.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..arguments import prepare_arguments
from ..arguments.read import ReadError, read_json
from ..errors import ArgumentsError, ToolwireError, UsageError
from ..events import CallAbort, CallEnd, Done, Event, Notice, ReasoningDelta, TextDelta
from ..formats.base import assemble
from ..messages import ToolCall
from ..pipeline import Backend, Request
from .failures import failure

__all__ = ["MAX_BODY_BYTES", "arguments_json", "create_app"]

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Request bodies nested deeper than this are refused with 400.
MAX_DEPTH = 64


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status_code=status,
    )


_SETTINGS = ("strict", "constrained")


def _options(data: Mapping[str, Any]) -> dict[str, bool]:
    """The request's ``toolwire`` extension: ``strict`` and ``constrained``, as given."""
    given = data.get("toolwire")
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise _BadRequest("'toolwire' must be an object such as {\"strict\": true}", "toolwire")
    unknown = sorted(set(given) - set(_SETTINGS))
    if unknown:
        raise _BadRequest(
            f"'toolwire' takes only 'strict' and 'constrained', not "
            f"{', '.join(map(repr, unknown))[:200]}",
            "toolwire." + str(unknown[0])[:100],
        )
    for key, value in given.items():
        if not isinstance(value, bool):
            raise _BadRequest(f"'toolwire.{key}' must be true or false", f"toolwire.{key}")
    return dict(given)


def _parse(body: bytes) -> tuple[Request, bool, bool]:
    """The engine request, whether to stream, whether parallel calls are allowed."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _BadRequest("the request body must be a JSON object")
    if _deeper_than(data, MAX_DEPTH):
        raise _BadRequest(f"the request body is nested deeper than {MAX_DEPTH} levels")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("'messages' must be a non-empty list", "messages")
    called: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _BadRequest(f"messages[{i}] must be an object with a 'role'", "messages")
        calls = m.get("tool_calls") if m["role"] == "assistant" else None
        if calls is not None:
            if not isinstance(calls, list) or not all(
                isinstance(c, dict)
                and isinstance(c.get("function"), dict)
                and _a_name(c["function"].get("name"))
                for c in calls
            ):
                raise _BadRequest(
                    f"messages[{i}].tool_calls must be a list of {{id, type, function}}",
                    "messages",
                )
            called.update(c["id"] for c in calls if isinstance(c.get("id"), str))
        if m["role"] == "tool":
            answers = m.get("tool_call_id")
            if not isinstance(answers, str):
                raise _BadRequest(
                    f"messages[{i}] is a tool message without a 'tool_call_id'", "messages"
                )
            if answers not in called:
                raise _BadRequest(
                    f"messages[{i}].tool_call_id {answers[:80]!r} answers no call in an "
                    "earlier assistant message; it must echo the id of the call it answers",
                    "messages",
                )
    tools = data.get("tools")
    if tools is not None and (
        not isinstance(tools, list)
        or not all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools)
    ):
        raise _BadRequest("'tools' must be a list of {type: function, function: {...}}", "tools")
    for i, tool in enumerate(tools or ()):
        fn = tool["function"]
        if tool.get("type", "function") != "function":
            raise _BadRequest(f"tools[{i}].type must be 'function'", "tools")
        if not _a_name(fn.get("name")):
            raise _BadRequest(f"tools[{i}].function.name must be a non-empty string", "tools")
        if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
            raise _BadRequest(f"tools[{i}].function.parameters must be an object", "tools")
    choice = data.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required"):
        function = choice.get("function") if isinstance(choice, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise _BadRequest(
                "'tool_choice' must be auto, none, required or a named function", "tool_choice"
            )
        tools = [t for t in tools or () if t["function"].get("name") == name]
        if not tools:
            raise _BadRequest(
                f"tool_choice names {name[:80]!r}, which is not in 'tools'", "tool_choice"
            )
    if choice == "none":
        tools = None
    temperature = data.get("temperature")
    if temperature is not None and not _finite(temperature):
        raise _BadRequest("'temperature' must be a number", "temperature")
    max_tokens = None
    for key in ("max_tokens", "max_completion_tokens"):
        value = data.get(key)
        if value is None:
            continue
        if not _finite(value) or value != int(value) or not 0 < value <= 10**9:
            raise _BadRequest(f"'{key}' must be a whole number of at least 1", key)
        max_tokens = max_tokens or int(value)
    options = _options(data)
    request = Request(
        messages,
        tools or None,
        tool_choice=choice if tools else None,
        temperature=temperature,
        max_tokens=max_tokens,
        strict=options.get("strict", False),
        constrained=options.get("constrained", True),
    )
    return request, bool(data.get("stream")), data.get("parallel_tool_calls", True) is not False


def _a_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _deeper_than(value: Any, limit: int) -> bool:
    """Is the decoded JSON nested deeper than ``limit`` (schemas are copied recursively)?"""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _finite(value: Any) -> bool:
    """A JSON number that is not NaN or infinite (Python's json reads both)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) <= 10**18


def _dumps(value: Any) -> str:
    """JSON text that can always be sent as UTF-8.

    JSON may carry the escape of a lone surrogate (``"\\ud800"``); decoded, it cannot be
    encoded again as UTF-8, so such a value is sent with its escapes kept instead.
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def _schemas(request: Request) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for tool in request.tools or ():
        fn = tool["function"]
        params = fn.get("parameters")
        if isinstance(fn.get("name"), str):
            out[fn["name"]] = params if isinstance(params, Mapping) else {"type": "object"}
    return out


def arguments_json(
    call: ToolCall, schema: Mapping[str, Any] | None, *, strict: bool = False
) -> tuple[str, Notice | None]:
    """The call's arguments as the JSON text a client will run the tool with, and a notice
    when they are not exactly what the model wrote.

    Read forgivingly and typed by the tool's schema where that works and drops nothing
    (``"3"`` for an integer becomes ``3``, single quotes and trailing commas are repaired;
    with ``strict``, nothing is). Where it does not, the value as read, or else the model's
    own text unchanged: a client must never run a tool with arguments the model did not
    send, so an unreadable call is not made an empty one.
    """
    raw: str | dict[str, Any] = (
        call.arguments_text if call.arguments_text.strip() else call.arguments
    )
    if schema is not None:
        try:
            done = prepare_arguments(
                raw, schema, name=call.name, strict=strict, text_values=call.text_values
            )
        except ArgumentsError as exc:
            problem = Notice("arguments-invalid", exc.explanation)
        else:
            # typed only where nothing is lost: a field the schema does not list is the
            # client's to judge, not ours to drop
            if not done.dropped:
                notice = None
                if done.repairs:
                    notice = Notice(
                        "arguments-repaired",
                        f"the arguments of {call.name} ({call.id}) were repaired: "
                        + ", ".join(done.repairs),
                    )
                return _dumps(done.arguments), notice
            problem = Notice(
                "arguments-unknown-fields",
                f"the arguments of {call.name} ({call.id}) have fields its schema does not "
                f"list ({', '.join(done.dropped)}); sent as the model wrote them",
            )
    else:
        problem = Notice("unknown-tool", f"{call.name} is not among the request's tools")
    if isinstance(raw, dict):
        return _dumps(raw), problem
    try:
        value = read_json(raw, strict=strict).value
    except ReadError:
        return raw, problem
    return (_dumps(value) if isinstance(value, dict) else raw), problem


def _call_json(
    call: ToolCall, index: int, schemas: Mapping[str, Mapping[str, Any]], strict: bool
) -> tuple[dict[str, Any], Notice | None]:
    arguments, notice = arguments_json(call, schemas.get(call.name), strict=strict)
    wire = {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
    return wire, notice


def _dropped(call: ToolCall) -> dict[str, str]:
    """The notice for a call not sent because the client asked for one call at most."""
    return {
        "code": "calls-dropped",
        "message": f"parallel_tool_calls is false: {call.name} ({call.id}) was not sent",
    }


def _notice(event: Event) -> dict[str, str] | None:
    """What the client is told of a pipeline event, if anything."""
    if isinstance(event, Notice):
        return {"code": event.code, "message": event.message}
    if isinstance(event, CallAbort):
        return {
            "code": "call-abandoned",
            "message": f"a call the model began ({event.id}) was not one: {event.reason}",
        }
    return None


def create_app(
    backend: Backend,
    *,
    model_name: str = "toolwire",
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The gateway as an ASGI app in front of ``backend``."""

    def authorised(request: HttpRequest) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "")
        return secrets.compare_digest(given.encode(), f"Bearer {api_key}".encode())

    async def health(_: HttpRequest) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(request: HttpRequest) -> Response:
        if not authorised(request):
            return _error(401, "a valid bearer token is required", "authentication_error")
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": model_name, "object": "model", "created": 0, "owned_by": "toolwire"}
                ],
            }
        )

    async def chat(request: HttpRequest) -> Response:
        if not authorised(request):
            return _error(401, "a valid bearer token is required", "authentication_error")
        body = b""
        async for piece in request.stream():
            body += piece
            if len(body) > max_body_bytes:
                return _error(
                    413,
                    f"the request body is larger than {max_body_bytes} bytes",
                    "invalid_request_error",
                )
        try:
            engine_request, stream, parallel = _parse(body)
        except _BadRequest as exc:
            return _error(exc.status, exc.message, "invalid_request_error", exc.param)
        rid = "chatcmpl-" + secrets.token_hex(12)
        try:
            if stream:
                # the reply's first event is awaited before the 200 is sent, so a failure
                # before it (refused, unreachable, timed out) gets its own status
                events = _Started(backend.stream(engine_request))
                await events.start()
                return StreamingResponse(
                    _sse(events, engine_request, rid, model_name, parallel),
                    media_type="text/event-stream",
                )
            reply = await _complete(backend, engine_request, rid, model_name, parallel)
            return Response(_dumps(reply), media_type="application/json")
        except UsageError as exc:  # a request the model behind cannot take
            return _error(400, str(exc), "invalid_request_error")
        except ToolwireError as exc:
            failed = failure(exc)
            return JSONResponse(failed.body(), status_code=failed.status, headers=failed.headers)

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


async def _complete(
    backend: Backend, request: Request, rid: str, model: str, parallel: bool
) -> dict[str, Any]:
    events = [event async for event in backend.stream(request)]
    result = assemble(events)
    notices = [n for n in map(_notice, events) if n is not None]
    done = next((e for e in reversed(events) if isinstance(e, Done)), Done("stop"))
    calls = result.calls if parallel else result.calls[:1]
    reasoning = result.reasoning
    message: dict[str, Any] = {
        "role": "assistant",
        "content": result.content if result.content or not calls else None,
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        schemas = _schemas(request)
        message["tool_calls"] = []
        for i, c in enumerate(calls):
            wire, notice = _call_json(c, i, schemas, request.strict)
            del wire["index"]
            message["tool_calls"].append(wire)
            if notice is not None:
                notices.append({"code": notice.code, "message": notice.message})
    notices += [_dropped(c) for c in result.calls[len(calls) :]]
    finish = "tool_calls" if calls else done.finish_reason
    reply: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "toolwire": {"notices": notices},
    }
    if done.usage:
        usage = dict(done.usage)
        usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        reply["usage"] = usage
    return reply


class _Started:
    """A reply's events with the first ones taken early: the notices the pipeline gives
    before it sends, and the first event of the reply itself (or its failure)."""

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._held: list[Event] = []

    async def start(self) -> None:
        """Take events up to the first that is not a notice; a failure is raised here."""
        try:
            async for event in self._events:
                self._held.append(event)
                if not isinstance(event, Notice):
                    return
        except BaseException:
            await self._events.aclose()
            raise

    async def __aiter__(self) -> AsyncIterator[Event]:
        async with aclosing(self._events) as events:
            for event in self._held:
                yield event
            self._held = []
            async for event in events:
                yield event


async def _sse(
    events: _Started, request: Request, rid: str, model: str, parallel: bool
) -> AsyncIterator[str]:
    base = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> str:
        body = {**base, "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}]}
        return "data: " + _dumps(body) + "\n\n"

    yield chunk({"role": "assistant", "content": ""})
    schemas = _schemas(request)
    sent = 0
    finish = "stop"
    notices: list[dict[str, str]] = []
    try:
        async for event in events:
            told = _notice(event)
            if told is not None:
                notices.append(told)
            # A call is sent whole once it is complete: one the model abandons never reaches
            # the client, and its arguments are the repaired ones, as in a reply not streamed.
            if isinstance(event, CallEnd):
                if parallel or not sent:
                    wire, notice = _call_json(event.call, sent, schemas, request.strict)
                    if notice is not None:
                        notices.append({"code": notice.code, "message": notice.message})
                    yield chunk({"tool_calls": [wire]})
                    sent += 1
                else:
                    notices.append(_dropped(event.call))
            elif isinstance(event, TextDelta):
                yield chunk({"content": event.text})
            elif isinstance(event, ReasoningDelta):
                yield chunk({"reasoning_content": event.text})
            elif isinstance(event, Done):
                finish = "tool_calls" if sent else event.finish_reason
    except ToolwireError as exc:
        # the 200 is sent: the failure is the stream's last event, in OpenAI's error shape
        yield "data: " + json.dumps(failure(exc).body()) + "\n\n"
        return
    yield chunk({}, finish)
    yield "data: " + _dumps({**base, "choices": [], "toolwire": {"notices": notices}}) + "\n\n"
    yield "data: [DONE]\n\n"

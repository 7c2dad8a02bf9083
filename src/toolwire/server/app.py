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
OpenAI's error shape, whose ``param`` is the path of the field at fault (see
:mod:`toolwire.server.validate`), before the backend is called; a failing engine a 502.

Every completion also carries ``"toolwire": {"notices": [...]}``, a top-level extension
that OpenAI clients ignore: each decision and recovery the pipeline made, a call it
abandoned, arguments it repaired — in the body, or streamed in a chunk before ``[DONE]``. A
request may send ``"toolwire": {"strict": true}``: no recovery, arguments only as sent;
``"toolwire": {"constrained": false}``: a local model's calls generated free.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..arguments import prepare_arguments
from ..arguments.read import ReadError, read_json
from ..errors import ArgumentsError, BackendError, ToolwireError, UsageError
from ..events import CallAbort, CallEnd, Done, Event, Notice, ReasoningDelta, TextDelta
from ..formats.base import assemble
from ..messages import ToolCall
from ..pipeline import Backend, Request
from .validate import RequestError, validate_chat_request

__all__ = ["BODY_TIMEOUT", "MAX_BODY_BYTES", "arguments_json", "create_app"]

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Seconds a client has to send the whole request body; then it gets a 408.
BODY_TIMEOUT = 30.0
#: Bodies larger than this are checked in a worker thread, so the event loop (``/health``,
#: other streams) is not held while a large request is read.
_THREAD_FROM = 64 * 1024
_CLOSE = {"connection": "close"}


def _error(
    status: int,
    message: str,
    kind: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status_code=status,
        headers=headers,
    )


class _BodyTooLarge(Exception):
    pass


async def _read_body(request: HttpRequest, limit: int) -> bytes:
    """The body, its pieces kept in a list and joined once: linear however it is split. One
    declared too large is refused before a byte of it is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _BodyTooLarge
    pieces: list[bytes] = []
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > limit:
            raise _BodyTooLarge
        pieces.append(piece)
    return b"".join(pieces)


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
    body_timeout: float = BODY_TIMEOUT,
) -> Starlette:
    """The gateway as an ASGI app in front of ``backend``.

    A request is checked whole by :func:`~toolwire.server.validate.validate_chat_request`
    before the backend sees it; its body must arrive within ``body_timeout`` seconds and
    ``max_body_bytes`` bytes (a slow or endless body gets a 408 or 413, and the connection is
    closed). Headers are bounded by the server: see :mod:`toolwire.server.guard`.
    """

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
        # the rest of a body not read cannot be skipped: the connection is closed after
        try:
            body = await asyncio.wait_for(_read_body(request, max_body_bytes), body_timeout)
        except _BodyTooLarge:
            return _error(
                413,
                f"the request body is larger than {max_body_bytes} bytes",
                "invalid_request_error",
                headers=_CLOSE,
            )
        except asyncio.TimeoutError:
            return _error(
                408,
                f"the request body was not received within {body_timeout:g} s",
                "invalid_request_error",
                headers=_CLOSE,
            )
        except ClientDisconnect:
            return Response(status_code=400, headers=_CLOSE)
        try:
            if len(body) >= _THREAD_FROM:
                checked = await run_in_threadpool(validate_chat_request, body)
            else:
                checked = validate_chat_request(body)
        except RequestError as exc:
            return _error(exc.status, exc.message, "invalid_request_error", exc.param)
        engine_request, stream, parallel = checked
        rid = "chatcmpl-" + secrets.token_hex(12)
        if stream:
            return StreamingResponse(
                _sse(backend, engine_request, rid, model_name, parallel),
                media_type="text/event-stream",
            )
        try:
            reply = await _complete(backend, engine_request, rid, model_name, parallel)
            return Response(_dumps(reply), media_type="application/json")
        except UsageError as exc:  # a request the model behind cannot take
            return _error(400, str(exc), "invalid_request_error")
        except (BackendError, ToolwireError) as exc:
            return _error(502, f"the model behind the gateway failed: {exc}", "upstream_error")

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


async def _sse(
    backend: Backend, request: Request, rid: str, model: str, parallel: bool
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
        async for event in backend.stream(request):
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
    except (BackendError, ToolwireError) as exc:
        error = {
            "error": {
                "message": f"the model behind the gateway failed: {exc}",
                "type": "upstream_error",
                "param": None,
                "code": None,
            }
        }
        yield "data: " + json.dumps(error) + "\n\n"
        return
    yield chunk({}, finish)
    yield "data: " + _dumps({**base, "choices": [], "toolwire": {"notices": notices}}) + "\n\n"
    yield "data: [DONE]\n\n"

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
OpenAI's error shape; a failing engine a 502.

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
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import ToolwireError, UsageError
from ..events import Event
from ..pipeline import Backend, Request
from ..store import ConversationStore
from .anthropic import count_tokens, error_body, parse_messages, reply, reply_stream
from .chat import complete, complete_stream
from .config import Models, UnknownModel
from .core import Started, WireError, arguments_json, dumps
from .failures import Failure, failure
from .fields import options
from .remember import ResponseMemory
from .responses import parse_responses, respond, respond_stream

__all__ = ["MAX_BODY_BYTES", "arguments_json", "create_app"]

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Request bodies nested deeper than this are refused with 400.
MAX_DEPTH = 64


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


def _model(data: Mapping[str, Any]) -> str | None:
    model = data.get("model")
    return model if isinstance(model, str) else None


def _parse(data: Mapping[str, Any]) -> tuple[Request, bool, bool]:
    """The engine request, whether to stream, whether parallel calls are allowed."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError("'messages' must be a non-empty list", "messages")
    called: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise WireError(f"messages[{i}] must be an object with a 'role'", "messages")
        calls = m.get("tool_calls") if m["role"] == "assistant" else None
        if calls is not None:
            if not isinstance(calls, list) or not all(
                isinstance(c, dict)
                and isinstance(c.get("function"), dict)
                and _a_name(c["function"].get("name"))
                for c in calls
            ):
                raise WireError(
                    f"messages[{i}].tool_calls must be a list of {{id, type, function}}",
                    "messages",
                )
            called.update(c["id"] for c in calls if isinstance(c.get("id"), str))
        if m["role"] == "tool":
            answers = m.get("tool_call_id")
            if not isinstance(answers, str):
                raise WireError(
                    f"messages[{i}] is a tool message without a 'tool_call_id'", "messages"
                )
            if answers not in called:
                raise WireError(
                    f"messages[{i}].tool_call_id {answers[:80]!r} answers no call in an "
                    "earlier assistant message; it must echo the id of the call it answers",
                    "messages",
                )
    tools = data.get("tools")
    if tools is not None and (
        not isinstance(tools, list)
        or not all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools)
    ):
        raise WireError("'tools' must be a list of {type: function, function: {...}}", "tools")
    for i, tool in enumerate(tools or ()):
        fn = tool["function"]
        if tool.get("type", "function") != "function":
            raise WireError(f"tools[{i}].type must be 'function'", "tools")
        if not _a_name(fn.get("name")):
            raise WireError(f"tools[{i}].function.name must be a non-empty string", "tools")
        if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
            raise WireError(f"tools[{i}].function.parameters must be an object", "tools")
    choice = data.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required"):
        function = choice.get("function") if isinstance(choice, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise WireError(
                "'tool_choice' must be auto, none, required or a named function", "tool_choice"
            )
        tools = [t for t in tools or () if t["function"].get("name") == name]
        if not tools:
            raise WireError(
                f"tool_choice names {name[:80]!r}, which is not in 'tools'", "tool_choice"
            )
    if choice == "none":
        tools = None
    temperature = data.get("temperature")
    if temperature is not None and not _finite(temperature):
        raise WireError("'temperature' must be a number", "temperature")
    max_tokens = None
    for key in ("max_tokens", "max_completion_tokens"):
        value = data.get(key)
        if value is None:
            continue
        if not _finite(value) or value != int(value) or not 0 < value <= 10**9:
            raise WireError(f"'{key}' must be a whole number of at least 1", key)
        max_tokens = max_tokens or int(value)
    settings = options(data)
    request = Request(
        messages,
        tools or None,
        tool_choice=choice if tools else None,
        temperature=temperature,
        max_tokens=max_tokens,
        strict=settings.get("strict", False),
        constrained=settings.get("constrained", True),
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


def _load(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object, within the depth limit."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise WireError("the request body must be a JSON object")
    if _deeper_than(data, MAX_DEPTH):
        raise WireError(f"the request body is nested deeper than {MAX_DEPTH} levels")
    return data


def _openai_error(exc: Exception) -> dict[str, Any] | None:
    """A failure mid-stream as the OpenAI error object a last event carries."""
    if isinstance(exc, UsageError):
        return {
            "error": {
                "message": str(exc),
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    return failure(exc).body() if isinstance(exc, ToolwireError) else None


def _anthropic_error(exc: Exception) -> dict[str, Any] | None:
    """A failure mid-stream as the Anthropic error object a last event carries."""
    if isinstance(exc, UsageError):
        return error_body(400, str(exc))
    if not isinstance(exc, ToolwireError):
        return None
    failed = failure(exc)
    return error_body(failed.status, failed.message)


def create_app(
    backend: Backend | Models,
    *,
    model_name: str = "toolwire",
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    store: ConversationStore | None = None,
) -> Starlette:
    """The gateway as an ASGI app in front of ``backend`` (one model, answering to any
    name, listed as ``model_name``) or of :class:`Models` (many, by name)."""
    models = backend if isinstance(backend, Models) else Models.single(backend, model_name)
    memory = ResponseMemory(store) if store is not None else None

    def authorised(request: HttpRequest) -> bool:
        if api_key is None:
            return True
        bearer = request.headers.get("authorization", "").encode()
        key = request.headers.get("x-api-key", "").encode()
        return secrets.compare_digest(bearer, f"Bearer {api_key}".encode()) or (
            secrets.compare_digest(key, api_key.encode())
        )

    async def body_of(request: HttpRequest) -> dict[str, Any]:
        if not authorised(request):
            raise WireError("a valid API key is required", status=401)
        declared = request.headers.get("content-length", "")
        too_big = WireError(f"the request body is larger than {max_body_bytes} bytes", status=413)
        if declared.isdigit() and int(declared) > max_body_bytes:
            raise too_big
        pieces: list[bytes] = []
        size = 0
        async for piece in request.stream():
            size += len(piece)
            if size > max_body_bytes:
                raise too_big
            pieces.append(piece)
        body = b"".join(pieces)
        return _load(body)

    async def health(_: HttpRequest) -> Response:
        return JSONResponse({"status": "ok"})

    async def listed(request: HttpRequest) -> Response:
        if not authorised(request):
            return _error(401, "a valid API key is required", "authentication_error")
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "toolwire"}
            for name in models.names()
        ]
        return JSONResponse({"object": "list", "data": data})

    def openai_refusal(exc: WireError) -> Response:
        kinds = {401: "authentication_error", 404: "not_found_error"}
        kind = kinds.get(exc.status, "invalid_request_error")
        return _error(exc.status, exc.message, kind, exc.param)

    def unknown(asked: str) -> WireError:
        served = ", ".join(models.names()[:20])
        return WireError(f"no model named {asked[:80]!r} here; served: {served}", "model", 404)

    async def serve(
        engine: Backend,
        request: Request,
        stream: bool,
        whole: Callable[[AsyncIterable[Event]], Awaitable[dict[str, Any]]],
        streamed: Callable[[AsyncIterable[Event]], AsyncIterator[str]],
        refuse: Callable[[Failure], Response],
    ) -> Response:
        """One turn, whole or streamed, in the API's shape. A streamed reply's first event
        is awaited before the 200 is sent, so a failure before it (refused, unreachable,
        timed out) gets its own status."""
        events = Started(engine.stream(request))
        try:
            if stream:
                await events.start()
                return StreamingResponse(streamed(events), media_type="text/event-stream")
            return Response(dumps(await whole(events)), media_type="application/json")
        except UsageError as exc:  # a request the model behind cannot take
            return refuse(Failure(400, "invalid_request_error", str(exc)))
        except ToolwireError as exc:
            return refuse(failure(exc))

    def openai_failed(failed: Failure) -> Response:
        return JSONResponse(failed.body(), status_code=failed.status, headers=failed.headers)

    def anthropic_failed(failed: Failure) -> Response:
        body = error_body(failed.status, failed.message)
        return JSONResponse(body, status_code=failed.status, headers=failed.headers)

    async def chat(request: HttpRequest) -> Response:
        try:
            data = await body_of(request)
            asked, (engine_request, stream, parallel) = _model(data), _parse(data)
            engine, name = await models.backend(asked), models.served_name(asked)
        except WireError as exc:
            return openai_refusal(exc)
        except UnknownModel as exc:
            return openai_refusal(unknown(str(exc)))
        return await serve(
            engine,
            engine_request,
            stream,
            lambda events: complete(events, engine_request, name, parallel=parallel),
            lambda events: complete_stream(
                events, engine_request, name, parallel=parallel, failed=_openai_error
            ),
            openai_failed,
        )

    async def responses(request: HttpRequest) -> Response:
        try:
            call = await parse_responses(await body_of(request), memory)
            engine, name = await models.backend(call.model), models.served_name(call.model)
        except WireError as exc:
            return openai_refusal(exc)
        except UnknownModel as exc:
            return openai_refusal(unknown(str(exc)))
        return await serve(
            engine,
            call.request,
            call.stream,
            lambda events: respond(events, call, name),
            lambda events: respond_stream(events, call, name, _openai_error),
            openai_failed,
        )

    def anthropic_refusal(exc: WireError) -> Response:
        message = exc.message
        if exc.param and exc.param not in message:
            message = f"{exc.param}: {message}"
        return JSONResponse(error_body(exc.status, message), status_code=exc.status)

    async def messages(request: HttpRequest) -> Response:
        try:
            call = parse_messages(await body_of(request))
            engine, name = await models.backend(call.model), models.served_name(call.model)
        except WireError as exc:
            return anthropic_refusal(exc)
        except UnknownModel as exc:
            return anthropic_refusal(unknown(str(exc)))
        return await serve(
            engine,
            call.request,
            call.stream,
            lambda events: reply(events, call, name),
            lambda events: reply_stream(events, call, name, _anthropic_error),
            anthropic_failed,
        )

    async def counted(request: HttpRequest) -> Response:
        try:
            call = parse_messages(await body_of(request))
            tokens = count_tokens(await models.backend(call.model), call.request)
        except WireError as exc:
            return anthropic_refusal(exc)
        except UnknownModel as exc:
            return anthropic_refusal(unknown(str(exc)))
        except UsageError as exc:
            return anthropic_failed(Failure(400, "invalid_request_error", str(exc)))
        except ToolwireError as exc:
            return anthropic_failed(failure(exc))
        return JSONResponse({"input_tokens": tokens})

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", listed, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", counted, methods=["POST"]),
        ]
    )

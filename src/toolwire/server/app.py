"""The OpenAI-compatible gateway: working tool calls for any OpenAI client, before any engine.

``POST /v1/chat/completions`` (streamed or not), ``POST /v1/responses`` (and a stored
response's ``GET``, ``GET …/input_items`` and ``DELETE``, for the key that made it),
``POST /v1/messages``, ``GET /v1/models``, ``GET /health``. Behind
it stands a backend — the local GGUF model in-process, or an upstream OpenAI-compatible
server — and the reply pipeline in front of it: calls left in the text are recovered as
``tool_calls``, refused tools are healed into words, refused schemas sent again plainly.
The gateway never runs tools: the client does, and sends the results back as ``tool``
messages.

Replies follow OpenAI's shape: ``arguments`` is a JSON string, ``content`` is null when the
reply is only calls, ``finish_reason`` is ``tool_calls``, streamed calls carry their own
``index``. Arguments are read forgivingly and typed by the tool's schema, streamed or not;
a streamed call's arguments go out as they are generated, in pieces that typing cannot
change (:mod:`toolwire.arguments.streamed`). A malformed request gets a 400 in
OpenAI's error shape; a failing engine a 502.

Every completion also carries ``"toolwire": {"notices": [...]}``, a top-level extension
that OpenAI clients ignore: each decision and recovery the pipeline made, a call it
abandoned, arguments it repaired — in the body, or streamed in a chunk before ``[DONE]``. A
request may send ``"toolwire": {"strict": true}``: no recovery, arguments only as sent;
``"toolwire": {"constrained": false}``: a local model's calls generated free.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..budget import WorkBudget, WorkExceeded
from ..errors import ToolwireError, UsageError
from ..pipeline import Backend
from ..store.responses import ResponseStore
from .anthropic import Messages
from .api import Api, error
from .chat import ChatCompletions
from .config import Models, UnknownModel
from .core import Started, dumps, with_keepalives
from .counting import count_input
from .failures import Failure, failure
from .gemini import METHODS as GEMINI_METHODS
from .gemini import Gemini
from .keys import Keys
from .metrics import CONTENT_TYPE, Metrics
from .observe import Observer
from .priority import Priority
from .remember import ResponseMemory, not_found
from .responses import Responses, deleted, listed_items, retrieved
from .sending import SEND_TIMEOUT, ClosingStream, SendDeadline
from .validate import RequestError, decode_body
from .work import Busy, Work

__all__ = [
    "BODY_TIMEOUT",
    "FIRST_EVENT_WAIT",
    "KEEPALIVE_EVERY",
    "MAX_BODY_BYTES",
    "create_app",
]

T = TypeVar("T")

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Bytes of a body past the limit read and dropped, so that its client, still sending, can
#: read the 413 (see :func:`_read_body`).
DRAIN_BYTES = 16 * 1024 * 1024
#: Seconds the rest of a refused body is read for, at most.
DRAIN_SECONDS = 10.0
#: Seconds a client has to send the whole request body; then it gets a 408.
BODY_TIMEOUT = 30.0
#: Seconds between keep-alives while a streamed reply waits on the model (Claude Code, for
#: one, gives up after minutes of silence; a long prompt on a CPU model takes that long).
#: Well inside the 15 s idle timers clients set, so a keep-alive never races one.
KEEPALIVE_EVERY = 10.0
#: Seconds a streamed reply's first event is awaited before the 200 is sent: a failure known
#: by then (refused, unreachable) gets its own status; one after, the stream's error event.
FIRST_EVENT_WAIT = 1.0
#: Bodies larger than this are decoded in a worker thread, so the event loop (``/health``,
#: other streams) is not held while a large request is read.
_THREAD_FROM = 64 * 1024


def _gemini(request: HttpRequest) -> bool:
    """Whether a request is the Gemini API's (which takes its key as ``?key=`` too): its
    own paths, a model's method (``/v1/models/NAME:generateContent``), or Google's client
    asking for the model list."""
    path = request.url.path
    if path.startswith(("/v1beta/", "/v1alpha/")):
        return True
    if path.startswith("/v1/models/") and ":" in path:
        return True
    return path.startswith("/v1/models") and "x-goog-api-client" in request.headers


def _lane(request: HttpRequest, who: str | None) -> str:
    """Whose lane a request's costly work waits in: its key's, or on a gateway without
    keys, its client address's (see :mod:`toolwire.server.work`)."""
    if who:
        return f"key:{who}"
    client = request.client
    return f"address:{client.host if client is not None else ''}"


def _busy(exc: Busy) -> Failure:
    kind = "rate_limit_error" if exc.status == 429 else "server_error"
    return Failure(exc.status, kind, str(exc), {"Retry-After": str(exc.retry_after)})


def _load(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object: strict JSON within the depth limit (see
    :func:`decode_body`)."""
    data = decode_body(body)
    if not isinstance(data, dict):
        raise RequestError("the request body must be a JSON object")
    return data


async def _read_body(request: HttpRequest, limit: int) -> bytes:
    """The body, its pieces kept in a list and joined once: linear however it is split.

    One past the limit gets a 413, and the client must be able to read it: a client sends
    its whole body before it reads the answer, and a connection closed with its bytes
    unread is reset, the answer lost. So the rest of a body past the limit is read and
    dropped (:func:`_drain`), up to :data:`DRAIN_BYTES` more within :data:`DRAIN_SECONDS`;
    one declared larger still is refused before a byte of it is read."""
    too_big = RequestError(
        f"the request body is larger than the {limit} bytes this gateway takes", status=413
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        if len(declared) <= 18 and int(declared) <= limit + DRAIN_BYTES:
            await _drain(request.stream(), limit + DRAIN_BYTES)
        raise too_big
    pieces: list[bytes] = []
    size = 0
    stream = request.stream()
    async for piece in stream:
        size += len(piece)
        if size > limit:
            pieces.clear()
            break
        pieces.append(piece)
    else:
        return b"".join(pieces)
    await _drain(stream, limit + DRAIN_BYTES - size)
    raise too_big


async def _drain(stream: AsyncIterator[bytes], bound: int) -> None:
    """Read and drop the rest of a refused body, up to ``bound`` bytes and
    :data:`DRAIN_SECONDS` (past either, the connection is closed unread)."""

    async def drop() -> None:
        size = 0
        async for piece in stream:
            size += len(piece)
            if size > bound:
                return

    with contextlib.suppress(asyncio.TimeoutError, ClientDisconnect):
        await asyncio.wait_for(drop(), DRAIN_SECONDS)


def create_app(
    backend: Backend | Models,
    *,
    model_name: str = "toolwire",
    api_key: str | None = None,
    keys: Keys | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    store: ResponseStore | None = None,
    body_timeout: float = BODY_TIMEOUT,
    keepalive_every: float = KEEPALIVE_EVERY,
    first_event_wait: float = FIRST_EVENT_WAIT,
    send_timeout: float = SEND_TIMEOUT,
    metrics: Metrics | None = None,
    tracer: Any = None,
) -> Starlette:
    """The gateway as an ASGI app in front of ``backend`` (one model, answering to any
    name, listed as ``model_name``) or of :class:`Models` (many, by name).

    A request is checked whole (Chat Completions by
    :func:`~toolwire.server.validate.validate_chat`) before the backend sees it; its body
    must arrive within ``body_timeout`` seconds and ``max_body_bytes`` bytes (a slow or
    endless body gets a 408 or 413, and the connection is closed). Headers are bounded by
    the server: see :mod:`toolwire.server.guard`. ``store`` keeps Responses conversations.
    Each client API is a translation (:mod:`toolwire.server.api`) over one handler.

    A streamed reply waits up to ``first_event_wait`` seconds for the model's first event
    (a failure by then gets its own status); then the 200 goes out, and the API's
    keep-alive every ``keepalive_every`` seconds the stream is otherwise silent. A client
    that takes none of a reply's bytes for ``send_timeout`` seconds is cut, and the reply's
    upstream stream closed with it (under the guarded protocols: :mod:`.sending`).

    Every request is observed (:mod:`toolwire.server.observe`): counted in ``metrics``
    (its own :class:`Metrics` unless one is given, each model by a configured name or as
    ``other``), served at ``/metrics`` to an operator's key (``api_key``, or one marked
    ``operator`` in ``keys``; anyone with no keys), and traced by ``tracer`` (an
    OpenTelemetry tracer) when given.
    """
    models = backend if isinstance(backend, Models) else Models.single(backend, model_name)
    known = Keys.joined([keys or Keys(), Keys.single(api_key) if api_key is not None else Keys()])

    observer = Observer(metrics if metrics is not None else Metrics(), tracer, models.names())

    def owner(request: HttpRequest) -> str | None:
        """The name of the request's key ("" with no keys), None when it has none of them;
        the name goes in the request's log line."""
        headers = request.headers
        sent = headers.get("x-api-key", "") or headers.get("x-goog-api-key", "")
        if not sent and _gemini(request):
            sent = request.query_params.get("key", "")  # Gemini's clients may send it so
        who = known.owner(headers.get("authorization", ""), sent)
        if who:
            observer.keyed(request.scope, who)
        return who

    def authorised(request: HttpRequest) -> bool:
        return owner(request) is not None

    work = Work()

    async def body_of(request: HttpRequest) -> tuple[dict[str, Any], WorkBudget]:
        """The request's body, decoded: within ``max_body_bytes`` and ``body_timeout`` (the
        rest of a body not read cannot be skipped: the connection is closed after); and the
        work budget its size gives it."""
        who = owner(request)
        if who is None:
            raise RequestError("a valid API key is required", status=401)
        try:
            body = await asyncio.wait_for(_read_body(request, max_body_bytes), body_timeout)
        except asyncio.TimeoutError:
            raise RequestError(
                f"the request body was not received within {body_timeout:g} s", status=408
            ) from None
        except ClientDisconnect:
            raise RequestError("the client went away before its body ended") from None
        budget = work.budget(len(body), _lane(request, who))
        work.admit(budget)
        # a large body is decoded off the event loop, so /health and other streams go on
        if len(body) >= _THREAD_FROM:
            return await work.apart(budget, partial(_load, body)), budget
        return _load(body), budget

    def unknown(asked: str) -> RequestError:
        served = ", ".join(models.names()[:20])
        return RequestError(f"no model named {asked[:80]!r} here; served: {served}", "model", 404)

    async def parsed(api: Api, request: HttpRequest) -> tuple[Any, Backend]:
        """A request's body read, checked and parsed in ``api``'s shape (its work budget is
        the turn's), and the backend that serves the model it names."""
        data, budget = await body_of(request)
        who = owner(request) or ""
        memory = ResponseMemory(store, who) if store is not None else None
        call = await work.run(budget, lambda: api.parse(data, memory, budget))
        return call, await models.backend(call.model)

    def unserved(api: Api, exc: Exception) -> Response:
        """The answer, in ``api``'s shape, to a request that failed before its turn began:
        the client's error a 4xx naming it, the gateway's or an engine's their own status."""
        if isinstance(exc, RequestError):
            return api.refusal(exc)
        if isinstance(exc, WorkExceeded):
            return api.refusal(RequestError(str(exc)))
        if isinstance(exc, Busy):
            return api.failed(_busy(exc))
        if isinstance(exc, UnknownModel):
            return api.refusal(unknown(str(exc)))
        if isinstance(exc, UsageError):
            return api.failed(Failure(400, "invalid_request_error", str(exc)))
        assert isinstance(exc, ToolwireError)
        return api.failed(failure(exc))

    def turn_route(api: Api) -> Any:
        """The route of a client API: :func:`served` with ``api``."""
        return partial(served, api)

    async def served(api: Api, request: HttpRequest) -> Response:
        """The one handler of every client API: checked, parsed into a turn, served whole
        or streamed. A streamed reply's first event is awaited a short while before the 200
        is sent, so a failure before it (refused, unreachable) gets its own status; then
        keep-alives fill the silence until the model speaks."""
        try:
            call, engine = await parsed(api, request)
            name = models.served_name(call.model)
        except (ToolwireError, WorkExceeded, Busy, UnknownModel) as exc:
            return unserved(api, exc)  # (a local model that could not be loaded, too)
        events = Started(observer.turn(request.scope, name, engine.stream(call.request)))
        try:
            if call.request.stream:
                first = events.begin()
                try:
                    await asyncio.wait_for(asyncio.shield(first), first_event_wait)
                except asyncio.TimeoutError:
                    pass  # still silent: the 200 goes, and keep-alives until it speaks
                except asyncio.CancelledError:
                    first.cancel()
                    raise
                stream = with_keepalives(
                    api.stream(events, call, name), keepalive_every, api.keepalive
                )
                return ClosingStream(stream, media_type=api.stream_type)
            body = await api.whole(events, call, name)
            return Response(dumps(body), media_type="application/json")
        except UsageError as exc:  # a request the model behind cannot take
            return api.failed(Failure(400, "invalid_request_error", str(exc)))
        except ToolwireError as exc:
            return api.failed(failure(exc))

    async def health(_: HttpRequest) -> Response:
        return JSONResponse({"status": "ok"})

    async def listed(request: HttpRequest) -> Response:
        """The models served (``GET /v1/models``, and one: ``/v1/models/NAME``), in the shape
        of the client asking: Google's clients (which send ``x-goog-api-key`` or
        ``x-goog-api-client``, and use ``/v1`` too) get Gemini's."""
        headers = request.headers
        if "x-goog-api-key" in headers or "x-goog-api-client" in headers:
            return await gemini_models(request)
        if not authorised(request):
            return error(401, "a valid API key is required", "authentication_error")
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "toolwire"}
            for name in models.names()
        ]
        asked = request.path_params.get("spec")
        if asked is None:
            return JSONResponse({"object": "list", "data": data})
        found = next((m for m in data if m["id"] == asked), None)
        if found is None:
            return unserved(ChatCompletions(), unknown(asked))
        return JSONResponse(found)

    async def scraped(request: HttpRequest) -> Response:
        who = owner(request)
        if who is None:
            return error(401, "a valid API key is required", "authentication_error")
        if not known.operator(who):
            return error(403, "/metrics is read with an operator's key", "permission_error")
        return Response(observer.metrics.exposition(), media_type=CONTENT_TYPE)

    responses = Responses()

    def kept_route(show: Any) -> Any:
        """A stored response's route: ``show(memory, id, query)`` shapes it (a gateway
        without a store has none: every id is the same 404 as an unknown one)."""

        async def handle(request: HttpRequest) -> Response:
            who = owner(request)
            if who is None:
                return error(401, "a valid API key is required", "authentication_error")
            rid = request.path_params["rid"]
            try:
                if store is None:
                    raise not_found(rid)
                body = await show(ResponseMemory(store, who), rid, request.query_params)
            except RequestError as exc:
                return responses.refusal(exc)
            return Response(dumps(body), media_type="application/json")

        return handle

    messages = Messages()

    def count_route(api: Api, shape: Any) -> Any:
        """A route that counts a request's input tokens in ``api``'s request shape (Messages'
        ``count_tokens``, Responses' ``input_tokens``): ``shape(tokens)`` is its answer."""
        return partial(counted, api, shape)

    async def counted(api: Api, shape: Any, request: HttpRequest) -> Response:
        try:
            call, engine = await parsed(api, request)
            tokens, told = await count_input(engine, call.request, call.request.budget, work)
        except (ToolwireError, WorkExceeded, Busy, UnknownModel) as exc:
            return unserved(api, exc)
        told = [*getattr(call, "notices", ()), *told]  # what parsing told (tools left out)
        notices = [t.wire() for t in told]
        return JSONResponse({**shape(tokens), "toolwire": {"notices": notices}})

    async def gemini(request: HttpRequest) -> Response:
        """A Gemini model's method: ``NAME:generateContent``, ``:streamGenerateContent``
        (``alt=sse``: server-sent events), ``:countTokens``."""
        name, _, method = request.path_params["spec"].rpartition(":")
        api = Gemini(name or None, method, request.query_params.get("alt") == "sse")
        if not name or method not in GEMINI_METHODS:
            shown = method[:60] if name else request.path_params["spec"][:60]
            why = f"models/{{model}}:{shown} is not served: the methods are " + ", ".join(
                GEMINI_METHODS
            )
            return api.refusal(RequestError(why, status=404))
        if method == "countTokens":
            return await counted(api, lambda n: {"totalTokens": n}, request)
        return await served(api, request)

    async def gemini_models(request: HttpRequest) -> Response:
        """Gemini's model list (``GET /v1beta/models``) and one model
        (``GET /v1beta/models/NAME``)."""
        if not authorised(request):
            return Gemini().refusal(RequestError("a valid API key is required", status=401))
        methods = ["generateContent", "streamGenerateContent", "countTokens"]
        shown = [
            {"name": f"models/{n}", "displayName": n, "supportedGenerationMethods": methods}
            for n in models.names()
        ]
        asked = request.path_params.get("spec")
        if asked is None:
            return JSONResponse({"models": shown})
        found = next((m for m in shown if m["displayName"] == asked), None)
        if found is None:
            return Gemini().refusal(unknown(asked))
        return JSONResponse(found)

    return Starlette(
        middleware=[
            Priority().middleware(),
            observer.middleware(),
            SendDeadline.middleware(send_timeout, observer.cut),
        ],
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/metrics", scraped, methods=["GET"]),
            Route("/v1/models", listed, methods=["GET"]),
            Route("/v1/models/{spec}", listed, methods=["GET"]),
            Route("/v1/chat/completions", turn_route(ChatCompletions()), methods=["POST"]),
            Route("/v1/responses", turn_route(responses), methods=["POST"]),
            Route(
                "/v1/responses/input_tokens",
                count_route(
                    responses, lambda n: {"object": "response.input_tokens", "input_tokens": n}
                ),
                methods=["POST"],
            ),
            Route(
                "/v1/responses/{rid}",
                kept_route(lambda memory, rid, _: retrieved(memory, rid)),
                methods=["GET"],
            ),
            Route(
                "/v1/responses/{rid}",
                kept_route(lambda memory, rid, _: deleted(memory, rid)),
                methods=["DELETE"],
            ),
            Route("/v1/responses/{rid}/input_items", kept_route(listed_items), methods=["GET"]),
            Route("/v1/messages", turn_route(messages), methods=["POST"]),
            *(
                Route(f"/{version}/models/{{spec}}", gemini, methods=["POST"])
                for version in ("v1beta", "v1alpha", "v1")
            ),
            *(
                Route(f"/{version}/models", gemini_models, methods=["GET"])
                for version in ("v1beta", "v1alpha")
            ),
            *(
                Route(f"/{version}/models/{{spec}}", gemini_models, methods=["GET"])
                for version in ("v1beta", "v1alpha")
            ),
            Route(
                "/v1/messages/count_tokens",
                count_route(messages, lambda n: {"input_tokens": n}),
                methods=["POST"],
            ),
        ],
    )

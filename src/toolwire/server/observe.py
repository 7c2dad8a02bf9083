"""What the gateway tells its operator of each request, in one place: the metrics
(:mod:`.metrics`), the trace (:mod:`.tracing`, when asked for) and the access log
(:mod:`.logs`).

:meth:`Observer.middleware` is an ASGI middleware around the whole app: it makes a request's
:class:`~toolwire.server.metrics.Turn` when the request arrives, reads its status from the
response as it starts, and records it once the response's last byte is sent (a stream is
timed to its end). :meth:`Observer.turn` wraps the events of a turn, as the handler reads
them: the model served, each notice, call and token, and the kind of an upstream failure.
A model's metric label is its name only when the gateway was configured with that name
(``other`` else: a client's names never become series).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from starlette.middleware import Middleware

from ..errors import BackendError
from ..events import CallEnd, Done, Event, Notice
from .logs import log_cut, log_request
from .metrics import OTHER, Metrics, Turn
from .tracing import Tracing

__all__ = ["Observed", "Observer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The client API of each path; a path not here is ``other``.
APIS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/responses/input_tokens": "count_tokens",
    "/v1/models": "models",
    "/health": "health",
    "/metrics": "metrics",
}


def api_of(path: str) -> str:
    """The client API a path belongs to (``other``: none). A Gemini model's method is in
    its path (``/v1beta/models/NAME:generateContent``)."""
    found = APIS.get(path)
    if found is not None:
        return found
    if path.startswith(("/v1beta/models/", "/v1/models/", "/v1alpha/models/")):
        method = path.rpartition(":")[2]
        if method in ("generateContent", "streamGenerateContent"):
            return "gemini"
        if method == "countTokens":
            return "count_tokens"
        return "models"
    return "other"


#: Where a request's Turn waits in its ASGI scope, for the handler to fill in.
_KEY = "toolwire.turn"
_SPAN = "toolwire.span"


class Observer:
    """The metrics, and the trace when ``tracer`` is given, of every request; ``models``
    are the names the gateway was configured with, the only model labels."""

    def __init__(self, metrics: Metrics, tracer: Any = None, models: Iterable[str] = ()) -> None:
        self.metrics = metrics
        self._tracing = Tracing(tracer) if tracer is not None else None
        self._models = frozenset(models)

    def middleware(self) -> Middleware:
        """The ASGI middleware of the app, observing each HTTP request."""
        return Middleware(Observed, observer=self)

    async def observe(self, app: Asgi, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request by ``app``, observed."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path = scope.get("path", "")
        turn = Turn(scope.get("method", ""), path, api_of(path))
        state = scope.setdefault("state", {})
        state[_KEY] = turn
        span = self._tracing.request(turn) if self._tracing is not None else None
        state[_SPAN] = span
        began = time.perf_counter()
        done = False

        def record() -> None:
            nonlocal done
            if done:
                return
            done = True
            turn.seconds = time.perf_counter() - began
            self.metrics.record(turn)
            log_request(turn)
            if span is not None and self._tracing is not None:
                self._tracing.end(span, turn, route(scope))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                turn.status = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                record()  # before the last byte leaves: a client that has it sees it counted
            await send(message)

        try:
            await app(scope, receive, sending)
        except BaseException:
            turn.status = turn.status or 500
            raise
        finally:
            record()

    def cut(self, scope: Scope) -> None:
        """The request's connection was cut: its client took none of the reply's bytes for
        the send deadline (:mod:`toolwire.server.sending`). Counted by API, and logged."""
        turn: Turn | None = scope.get("state", {}).get(_KEY)
        if turn is None:
            path = scope.get("path", "")
            turn = Turn(scope.get("method", ""), path, api_of(path))
        self.metrics.cut.labels(turn.api).inc()
        log_cut(turn)

    def keyed(self, scope: Scope, name: str) -> None:
        """The name of the API key the request came with, for its log line."""
        turn: Turn | None = scope.get("state", {}).get(_KEY)
        if turn is not None:
            turn.key = name

    def turn(
        self, scope: Scope, model: str, events: AsyncGenerator[Event, None]
    ) -> AsyncGenerator[Event, None]:
        """``events`` as they are, each counted into the request's Turn on its way."""
        state = scope.get("state", {})
        turn: Turn | None = state.get(_KEY)
        if turn is None:  # the app is served without the middleware
            return events
        turn.model = model
        turn.label = model if model in self._models else OTHER
        parent = state.get(_SPAN)
        return self._counted(turn, events, parent)

    async def _counted(
        self, turn: Turn, events: AsyncGenerator[Event, None], parent: Any
    ) -> AsyncGenerator[Event, None]:
        tracing = self._tracing if parent is not None else None
        span = tracing.upstream(parent, turn.model) if tracing is not None else None
        try:
            async for event in events:
                if isinstance(event, Notice):
                    turn.notices[event.code] += 1
                elif isinstance(event, CallEnd):
                    turn.calls += 1
                elif isinstance(event, Done) and event.usage:
                    turn.prompt_tokens += _count(event.usage.get("prompt_tokens"))
                    turn.completion_tokens += _count(event.usage.get("completion_tokens"))
                yield event
        except BackendError as exc:
            turn.upstream_error = exc.kind
            raise
        finally:
            await events.aclose()
            if span is not None and tracing is not None:
                tracing.end_upstream(span, turn)


def route(scope: Scope) -> str:
    """The route a request matched, as its template (``/v1/responses/{rid}``): its path
    with each path parameter's value put back as the parameter's name; ``""`` when it
    matched none (a client's own path is no name of anything)."""
    template = getattr(scope.get("route"), "path", None)  # Starlette's matched route
    if isinstance(template, str):
        return template
    if "endpoint" not in scope:
        return ""
    path = str(scope.get("path", ""))
    params = scope.get("path_params") or {}
    segments = path.split("/")
    for name, value in params.items():
        segments = [f"{{{name}}}" if s == str(value) else s for s in segments]
    return "/".join(segments)


def _count(value: object) -> int:
    """A token count from a usage, 0 when it is not a count."""
    return value if type(value) is int and value > 0 else 0


class Observed:
    """The ASGI middleware of :meth:`Observer.middleware`."""

    def __init__(self, app: Asgi, observer: Observer) -> None:
        self._app = app
        self._observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._observer.observe(self._app, scope, receive, send)

"""A client that stops reading is cut: the app's side of the send deadline.

The deadline itself is kept at the connection, by the guarded protocols
(:mod:`toolwire.server.deadlines`): there a reply's bytes are seen to wait unsent, and the
connection can be aborted (a close would wait for ever to send them). What the app does:
:class:`SendDeadline`, an ASGI middleware, gives each request's connection the gateway's
deadline (``create_app(send_timeout=…)``, ``serve --send-timeout``) and what to call when it
cuts (the observer counts it); :class:`ClosingStream`, the streamed reply, closes its stream
as soon as the response ends, however it ends, so the upstream connection the stream holds
is freed then, not when the stream is collected.

Under a server without the guarded protocols (no hook in the scope) there is no send
deadline: a client that stops reading holds its reply until the server gives it up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware import Middleware
from starlette.responses import StreamingResponse

from .deadlines import SEND_DEADLINE, SEND_TIMEOUT
from .priority import metered

__all__ = ["SEND_TIMEOUT", "ClosingStream", "SendDeadline"]

Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Any, Any], Awaitable[None]]


class SendDeadline:
    """ASGI middleware: each HTTP request sets its connection's send deadline to
    ``seconds``, and ``on_cut(scope)`` is called if the connection is cut by it."""

    def __init__(self, app: Asgi, seconds: float, on_cut: Callable[[Scope], None]) -> None:
        self._app = app
        self._seconds = seconds
        self._on_cut = on_cut

    @classmethod
    def middleware(cls, seconds: float, on_cut: Callable[[Scope], None]) -> Middleware:
        """The middleware of an app (``seconds`` is checked now, not at its first request)."""
        if not seconds > 0:
            raise ValueError(f"the send deadline must be some time above 0 s, not {seconds!r}")
        return Middleware(cls, seconds=seconds, on_cut=on_cut)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            hook = (scope.get("extensions") or {}).get(SEND_DEADLINE)
            if hook is not None:
                on_cut = self._on_cut
                hook(self._seconds, lambda: on_cut(scope))
        await self._app(scope, receive, send)


class ClosingStream(StreamingResponse):
    """A streamed reply whose stream is closed when the response ends: sent whole, or cut
    (its client gone, or cut by the send deadline while a write waited)."""

    async def stream_response(self, send: Any) -> None:
        # sent in a task of its own: its steps are timed against the request's meter too
        await metered(super().stream_response(send))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            closer = getattr(self.body_iterator, "aclose", None)
            if closer is not None:
                await closer()

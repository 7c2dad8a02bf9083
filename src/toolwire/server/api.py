"""What one client API is to the gateway: pure translation, over one generic handler.

An API (Chat Completions, Responses, Anthropic Messages) only translates: its request body
into a typed turn (:meth:`Api.parse`), the turn's one stream of outputs
(:func:`toolwire.server.core.turn`) into its reply whole or streamed, and a refusal or a
failure into its own error shape. Everything a turn decides — tools, tool choice, parallel
calls, typing, the finish reason, healing, notices — the pipeline decided before. The
handler in :mod:`toolwire.server.app` does the rest for every API alike: the key, the body's
limits, the model asked for, a streamed reply's failure before it begins, keep-alives.

Adding a client API is one module: a class with these methods, and its route.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Protocol

from starlette.responses import JSONResponse, Response

from ..budget import WorkBudget
from ..errors import ToolwireError, UsageError
from ..events import Event
from ..pipeline import Request
from .failures import Failure, failure
from .remember import ResponseMemory
from .validate import RequestError

__all__ = ["SSE_COMMENT", "Api", "OpenAIErrors", "Parsed", "ShapedErrors", "closing"]


class Parsed(Protocol):
    """A request as an API parsed it: the turn, and the model the client asked for."""

    @property
    def request(self) -> Request: ...

    @property
    def model(self) -> str | None: ...


#: A comment line of server-sent events: OpenAI's clients skip it (Chat Completions and
#: Responses keep-alives).
SSE_COMMENT = ": keep-alive\n\n"


class Api(Protocol):
    """One client API (see the module's doc)."""

    #: What is sent while a streamed reply waits on the model, in this API's own form.
    keepalive: str
    #: The media type of a streamed reply.
    stream_type: str

    async def parse(
        self, data: dict[str, Any], memory: ResponseMemory | None, budget: WorkBudget | None = None
    ) -> Parsed:
        """The turn of a decoded body; a :class:`RequestError` naming the field at fault.
        ``budget``: the request's work budget, which the turn carries to its reply."""

    async def whole(self, events: AsyncIterable[Event], call: Any, model: str) -> dict[str, Any]:
        """The reply, not streamed, as this API's JSON body."""

    def stream(self, events: AsyncIterable[Event], call: Any, model: str) -> AsyncIterator[str]:
        """The reply as this API's server-sent events; a failure mid-stream is its last."""

    def refusal(self, exc: RequestError) -> Response:
        """A request refused before any model saw it (4xx), in this API's error shape."""

    def failed(self, failed: Failure) -> Response:
        """The model behind failed before the reply began, in this API's error shape."""


class ShapedErrors:
    """Errors in an API's own shape, made by its ``body(status, message)`` (Messages',
    Gemini's): a refusal names its field in its message, a failure before the reply keeps
    its status and headers, one mid-stream becomes the error object that ends the stream."""

    @staticmethod
    def body(status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def refusal(self, exc: RequestError) -> Response:
        message = exc.message
        if exc.param and exc.param not in message:
            message = f"{exc.param}: {message}"
        body = self.body(exc.status, message)
        return JSONResponse(body, status_code=exc.status, headers=closing(exc))

    def failed(self, failed: Failure) -> Response:
        body = self.body(failed.status, failed.message)
        return JSONResponse(body, status_code=failed.status, headers=failed.headers)

    def mid_stream(self, exc: Exception) -> dict[str, Any] | None:
        """A failure mid-stream as this API's error object (None: not one of toolwire's own:
        re-raised)."""
        if isinstance(exc, UsageError):
            return self.body(400, str(exc))
        if not isinstance(exc, ToolwireError):
            return None
        failed = failure(exc)
        return self.body(failed.status, failed.message)


def closing(exc: RequestError) -> dict[str, str] | None:
    """A body refused before it was read whole (408, 413) leaves the connection unusable."""
    return {"connection": "close"} if exc.status in (408, 413) else None


class OpenAIErrors:
    """Errors in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``), for
    Chat Completions and Responses alike."""

    _KINDS: Mapping[int, str] = {401: "authentication_error", 404: "not_found_error"}
    keepalive = SSE_COMMENT
    stream_type = "text/event-stream"

    def refusal(self, exc: RequestError) -> Response:
        kind = self._KINDS.get(exc.status, "invalid_request_error")
        return error(exc.status, exc.message, kind, exc.param, closing(exc))

    def failed(self, failed: Failure) -> Response:
        return JSONResponse(failed.body(), status_code=failed.status, headers=failed.headers)

    @staticmethod
    def mid_stream(exc: Exception) -> dict[str, Any] | None:
        """A failure mid-stream as the OpenAI error object a last event carries (None: not
        one of toolwire's own: re-raised)."""
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


def error(
    status: int,
    message: str,
    kind: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error in OpenAI's shape."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": None}},
        status_code=status,
        headers=headers,
    )

"""Slow clients: a deadline for every request's headers and body, at the connection.

uvicorn's servers have no read timeout: their keep-alive timer runs only between requests,
and is cancelled by any byte received, so a client that sends its headers (or a body the app
does not read) one byte at a time, or connects and sends nothing, holds a connection for as
long as it likes. The guarded protocols arm a deadline when a connection opens and when the
first byte of each request arrives: the headers must be complete within
:data:`HEADER_TIMEOUT` seconds (or the client gets a 408 and the connection is closed), and
the whole request within :data:`REQUEST_TIMEOUT` (then the connection is closed). The gateway
answers a body still coming after its own, shorter ``body_timeout`` with a 408 first (see
:func:`~toolwire.server.create_app`). A request's head is bounded in size
(:data:`MAX_HEADER_BYTES`): past it the client gets a 400 and the connection is closed.
A client that takes none of a reply's bytes for :data:`SEND_TIMEOUT` seconds (or the app's
``send_timeout``) is cut, and the reply's stream closed (the send deadline, in
:mod:`toolwire.server.deadlines`).

The deadlines are one piece of logic (:class:`Deadlines`) over either of uvicorn's HTTP
protocols: :class:`GuardedHttpToolsProtocol` (httptools' C parser, with uvloop: the fast
server, used whenever both are installed) and :class:`GuardedH11Protocol` (pure Python, the
fallback). ``uvicorn.run(app, **uvicorn_settings())`` — ``toolwire serve`` does that.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .deadlines import (
    HEADER_TIMEOUT,
    MAX_HEADER_BYTES,
    REQUEST_TIMEOUT,
    SEND_TIMEOUT,
    Deadlines,
    SendWatch,
)

__all__ = [
    "HEADER_TIMEOUT",
    "HTTPTOOLS_PROTOCOL",
    "MAX_HEADER_BYTES",
    "REQUEST_TIMEOUT",
    "SEND_TIMEOUT",
    "Deadlines",
    "GuardedH11Protocol",
    "fast_server",
    "httptools_protocol",
    "uvicorn_settings",
]


def _head_size(request: h11.Request) -> int:
    """The bytes of a request's head, as sent (within a few for the request line)."""
    return len(request.target) + sum(len(name) + len(value) + 4 for name, value in request.headers)


class GuardedH11Protocol(Deadlines, SendWatch, H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers and body, and for
    each reply's bytes to be taken (the send deadline).

    h11 bounds only a head it holds incomplete; one that arrives whole is measured as it is
    read, and past :data:`MAX_HEADER_BYTES` it is a protocol error (a 400, and closed)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("headers", self.header_timeout)
        self._offer_send_deadline()
        read = self.conn.next_event

        def bounded() -> Any:
            event = read()
            if isinstance(event, h11.Request) and _head_size(event) > MAX_HEADER_BYTES:
                raise h11.RemoteProtocolError(f"the request head is over {MAX_HEADER_BYTES} bytes")
            return event

        self.conn.next_event = bounded  # type: ignore[method-assign]

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm("headers", self.header_timeout)
        self._heard = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()
        self._watch_unsent()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_sending()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._resumed_sending()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._unwatch()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _follow(self) -> None:
        """Move the deadline on as the client's side of the request moves."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.request_timeout)
        elif state is not h11.IDLE:
            self._cancel()


def fast_server() -> bool:
    """Whether uvloop and httptools are installed (then the server uses both)."""
    return all(importlib.util.find_spec(name) is not None for name in ("uvloop", "httptools"))


#: Where the guarded httptools protocol is, as uvicorn imports it (by name, so that the
#: settings can be sent to ``serve --workers`` processes).
HTTPTOOLS_PROTOCOL = "toolwire.server.guard_httptools:GuardedHttpToolsProtocol"


def httptools_protocol() -> type[Any]:
    """``GuardedHttpToolsProtocol``, from the module that holds it (it imports httptools, so
    it is imported only where httptools is installed)."""
    from .guard_httptools import GuardedHttpToolsProtocol

    return GuardedHttpToolsProtocol


def uvicorn_settings(*, fast: bool | None = None) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run``/``uvicorn.Config`` for the gateway: the
    guarded protocol, on uvloop with httptools when they are installed (``fast=None``),
    or as ``fast`` says (``fast=True`` with either missing is an ``ImportError``)."""
    if fast is None:
        fast = fast_server()
    if fast:
        return {
            "http": HTTPTOOLS_PROTOCOL,
            "loop": "uvloop",
            "timeout_keep_alive": 5,
        }
    return {
        "http": GuardedH11Protocol,
        "loop": "asyncio",
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        "timeout_keep_alive": 5,
    }

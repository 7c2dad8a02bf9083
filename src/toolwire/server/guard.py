"""Slow clients: a deadline for every request's headers and body, at the connection.

uvicorn's h11 server has no read timeout: its keep-alive timer runs only between requests,
and is cancelled by any byte received, so a client that sends its headers (or a body the app
does not read) one byte at a time, or connects and sends nothing, holds a connection for as
long as it likes. :class:`GuardedH11Protocol` arms a deadline when a connection opens and when
the first byte of each request arrives: the headers must be complete within
:data:`HEADER_TIMEOUT` seconds (or the client gets a 408 and the connection is closed), and
the whole request within :data:`REQUEST_TIMEOUT` (then the connection is closed). The gateway
answers a body still coming after its own, shorter ``body_timeout`` with a 408 first (see
:func:`~toolwire.server.create_app`). Headers are also bounded in size (16 KiB).

``uvicorn.run(app, **uvicorn_settings())`` — ``toolwire serve`` does that.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "REQUEST_TIMEOUT", "GuardedH11Protocol", "uvicorn_settings"]

#: Seconds from a connection's opening, or a request's first byte, to its last header.
HEADER_TIMEOUT = 10.0
#: Seconds from a request's last header to its last body byte (above the app's own 30 s).
REQUEST_TIMEOUT = 45.0
#: The largest request head, in bytes (uvicorn's default, said here).
MAX_HEADER_BYTES = 16 * 1024

_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 38\r\n\r\nthe request headers came in too slowly"
)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers and body."""

    header_timeout: float = HEADER_TIMEOUT
    request_timeout: float = REQUEST_TIMEOUT

    _deadline: asyncio.TimerHandle | None = None
    _phase = ""
    #: Whether bytes of the request the deadline is for have arrived (a connection opened
    #: and left silent is closed without a word).
    _heard = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("headers", self.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm("headers", self.header_timeout)
        self._heard = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Move the deadline on as the client's side of the request moves."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.request_timeout)
        elif state is not h11.IDLE:
            self._cancel()

    def _arm(self, phase: str, seconds: float) -> None:
        self._cancel()
        self._phase = phase
        self._heard = False
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = ""

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "headers" and self._heard and self.conn.their_state is h11.IDLE:
            self.transport.write(_TIMED_OUT)
        self._phase = ""
        self.transport.close()


def uvicorn_settings() -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run``/``uvicorn.Config`` that bound slow clients."""
    return {
        "http": GuardedH11Protocol,
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        "timeout_keep_alive": 5,
    }

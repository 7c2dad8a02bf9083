"""The deadlines and bounds of a request's head and body, shared by the gateway's two guarded
HTTP protocols (:mod:`toolwire.server.guard` over h11, :mod:`toolwire.server.guard_httptools`
over httptools).

Its own module so that each protocol depends on it and neither on the other: the h11 one
names the httptools one only to hand it to uvicorn, which imports it where httptools is
installed."""

from __future__ import annotations

import asyncio

__all__ = [
    "HEADER_TIMEOUT",
    "HEAD_TOO_LARGE",
    "MAX_HEADER_BYTES",
    "REQUEST_TIMEOUT",
    "TIMED_OUT",
    "Deadlines",
]

#: Seconds from a connection's opening, or a request's first byte, to its last header.
HEADER_TIMEOUT = 10.0
#: Seconds from a request's last header to its last body byte (above the app's own 30 s).
REQUEST_TIMEOUT = 45.0
#: The largest request head, in bytes (uvicorn's h11 default, said here).
MAX_HEADER_BYTES = 16 * 1024

#: What a client whose headers came too slowly is sent before its connection is closed, and
#: what one whose head is too large is sent.
TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 38\r\n\r\nthe request headers came in too slowly"
)
HEAD_TOO_LARGE = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 37\r\n\r\nthe request headers are over 16384 B"
)


class Deadlines:
    """The deadline of the request part a connection is waiting for: ``headers`` from its
    first byte (or the connection's opening) to its last header, then ``body`` to its last
    byte. A protocol calls :meth:`_arm`, :meth:`_cancel` and :meth:`_follow` as the
    request moves; it needs ``loop`` and ``transport``."""

    header_timeout: float = HEADER_TIMEOUT
    request_timeout: float = REQUEST_TIMEOUT

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _deadline: asyncio.TimerHandle | None = None
    _phase = ""
    #: Whether bytes of the request the deadline is for have arrived (a connection opened
    #: and left silent is closed without a word).
    _heard = False

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

    def _waiting_for_headers(self) -> bool:
        """Whether the request in progress has not yet sent its last header."""
        raise NotImplementedError

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "headers" and self._heard and self._waiting_for_headers():
            self.transport.write(TIMED_OUT)
        self._phase = ""
        self.transport.close()

"""The deadlines and bounds of a request's head and body, and the send deadline of its reply,
shared by the gateway's two guarded HTTP protocols (:mod:`toolwire.server.guard` over h11,
:mod:`toolwire.server.guard_httptools` over httptools).

The send deadline: a client that reads nothing makes every write to it wait for ever (its
socket's buffers fill, and uvicorn pauses the app's ``send`` until they drain), and the
reply's upstream stream, with the upstream connection it holds, waits with it. While bytes
wait unsent — writing paused, or a reply's end still in the buffer — the client must take some
every :data:`SEND_TIMEOUT` seconds; one that takes none is cut (the connection aborted: the
app's ``send`` returns, starlette sees the disconnect and closes the reply's stream, and the
upstream connection is freed). The app sets the deadline, and hears of each cut, through the
hook each request's scope carries (:data:`SEND_DEADLINE`, :mod:`toolwire.server.sending`).

Its own module so that each protocol depends on it and neither on the other: the h11 one
names the httptools one only to hand it to uvicorn, which imports it where httptools is
installed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = [
    "HEADER_TIMEOUT",
    "HEAD_TOO_LARGE",
    "MAX_HEADER_BYTES",
    "REQUEST_TIMEOUT",
    "SEND_DEADLINE",
    "SEND_TIMEOUT",
    "TIMED_OUT",
    "Deadlines",
    "SendWatch",
]

#: Seconds from a connection's opening, or a request's first byte, to its last header.
HEADER_TIMEOUT = 10.0
#: Seconds from a request's last header to its last body byte (above the app's own 30 s).
REQUEST_TIMEOUT = 45.0
#: The largest request head, in bytes (uvicorn's h11 default, said here).
MAX_HEADER_BYTES = 16 * 1024
#: Seconds a reply waits on a client that takes none of its bytes; then the connection is cut.
SEND_TIMEOUT = 30.0
#: The key, in a request's ASGI ``scope["extensions"]``, of its connection's
#: ``hook(seconds, on_cut)``: the send deadline from now on, and what to call when it cuts.
SEND_DEADLINE = "toolwire.send_deadline"
#: How often, within a send deadline, the bytes unsent are looked at.
LOOKS = 4

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


class SendWatch:
    """The send deadline of a connection (see the module): a protocol calls
    :meth:`_offer_send_deadline` when it is made, :meth:`_watch_sending` when writing
    pauses or a reply ends with bytes unsent, :meth:`_resumed_sending` when writing resumes,
    and :meth:`_unwatch` when the connection is lost; it needs ``loop``, ``transport`` and
    ``app``."""

    send_timeout: float = SEND_TIMEOUT

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    app: Any
    _watchdog: asyncio.TimerHandle | None = None
    #: What the app asked to be called when the connection is cut (its latest request's).
    _on_cut: Callable[[], None] | None = None
    #: The bytes unsent, and the times writing resumed, when the watch last looked.
    _unsent = 0
    _resumes = 0
    _resumes_seen = 0
    #: The looks in a row that saw the client take nothing.
    _still = 0

    def _offer_send_deadline(self) -> None:
        """Each request's scope gets the hook that sets this connection's send deadline
        (in ``extensions``, for the app to find)."""
        inner = self.app
        hook = self._set_send_deadline

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope.setdefault("extensions", {})[SEND_DEADLINE] = hook
            await inner(scope, receive, send)

        self.app = app

    def _set_send_deadline(self, seconds: float, on_cut: Callable[[], None] | None) -> None:
        self.send_timeout = seconds
        self._on_cut = on_cut

    def _watch_sending(self) -> None:
        """Watch the bytes waiting unsent: the connection is cut once the client has taken
        none of them for :attr:`send_timeout` seconds (looked at every quarter of it, so
        the cut comes within a quarter past the deadline)."""
        if self._watchdog is None:
            self._unsent = self.transport.get_write_buffer_size()
            self._resumes_seen = self._resumes
            self._still = 0
            self._watchdog = self.loop.call_later(self.send_timeout / LOOKS, self._look)

    def _resumed_sending(self) -> None:
        """Writing resumes: the client took bytes (the watch goes on while any are unsent)."""
        self._resumes += 1

    def _watch_unsent(self) -> None:
        """A reply has ended: watched on while any of it is unsent."""
        if self.transport.get_write_buffer_size():
            self._watch_sending()

    def _look(self) -> None:
        self._watchdog = None
        unsent = self.transport.get_write_buffer_size()
        if not unsent:
            return
        took = unsent < self._unsent or self._resumes != self._resumes_seen
        self._still = 0 if took else self._still + 1
        if self._still >= LOOKS:
            on_cut, self._on_cut = self._on_cut, None
            try:
                if on_cut is not None:
                    on_cut()
            finally:
                self.transport.abort()  # not close(): that would wait to send the bytes
            return
        self._unsent = unsent
        self._resumes_seen = self._resumes
        self._watchdog = self.loop.call_later(self.send_timeout / LOOKS, self._look)

    def _unwatch(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = None

"""The slow-client guards of :mod:`toolwire.server.guard` over uvicorn's httptools protocol.

Its own module because it imports httptools (the C parser of the fast server), which the
guard module must not need; uvicorn imports it by name
(:data:`~toolwire.server.guard.HTTPTOOLS_PROTOCOL`), so ``serve --workers`` can pass it on.
It shares the deadlines of :mod:`toolwire.server.deadlines` and knows nothing of the guard
module itself.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .deadlines import HEAD_TOO_LARGE, MAX_HEADER_BYTES, Deadlines, SendWatch

__all__ = ["GuardedHttpToolsProtocol"]


class GuardedHttpToolsProtocol(Deadlines, SendWatch, HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers and
    body, a bound on the size of its head (httptools itself has none), and a deadline for
    each reply's bytes to be taken (the send deadline).

    The head is measured twice: as parsed (the path and each header as the parser
    gives them; past the bound, the parser is stopped, and uvicorn answers a 400 and
    closes), and as received while the head is incomplete (the parser holds a header
    it has not finished, so a head that never ends is bounded too)."""

    #: Where the request in progress is: ``""`` between requests, ``head`` until its
    #: last header, ``body`` until its last byte, ``done`` until the next begins.
    _part = ""
    _head_bytes = 0
    _parsed_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("headers", self.header_timeout)
        self._offer_send_deadline()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self._part in ("", "done"):
            self._arm("headers", self.header_timeout)
        self._heard = True
        if self._waiting_for_headers():
            self._head_bytes += len(data)
        super().data_received(data)
        if self._waiting_for_headers() and self._head_bytes > MAX_HEADER_BYTES:
            self._cancel()
            if not self.transport.is_closing():
                self.transport.write(HEAD_TOO_LARGE)
                self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._part = "head"
        self._parsed_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _parsed(self, size: int) -> None:
        self._parsed_bytes += size
        if self._parsed_bytes > MAX_HEADER_BYTES:
            # the parser stops with a callback error: uvicorn answers 400 and closes
            raise ValueError(f"the request head is over {MAX_HEADER_BYTES} bytes")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._part = "body"
        self._head_bytes = 0
        self._arm("body", self.request_timeout)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._part = "done"
        self._head_bytes = 0
        self._cancel()

    def on_response_complete(self) -> None:
        super().on_response_complete()
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
        return self._part in ("", "done", "head")

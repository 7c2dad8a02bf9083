"""What the gateway's client is told when the model behind it fails: one decision, here.

The client gets the class of the failure as an HTTP status and a short message written
here; never the upstream's body, its URL or a traceback, which may hold an internal host, a
key in a query string or a server's stack trace. Those go to the log (the
``toolwire.gateway`` logger), where the operator reads them.

Statuses, from the :class:`~toolwire.errors.BackendError`'s ``kind`` and ``status``:

============================================  ======  =====================================
the upstream …                                status  why
============================================  ======  =====================================
answered 429                                  429     the client's retry logic backs off;
                                                      ``Retry-After`` passed on when given
answered 400, 413 or 422                      400     the request was refused as invalid
answered 503                                  503     unavailable for now: worth a retry
answered 408 or 504, or passed the deadline   504     a timeout
(``--upstream-timeout``, ``--connect-timeout``)
answered any other error (401, 404, 500 …)    502     the gateway's upstream failed; the
                                                      client cannot fix it
could not be reached                          502
sent a reply that cannot be read (not JSON,   502
too long, cut short)
failed mid-stream                             502
a local model that could not be loaded        503     the operator's to fix (the message
(``unloadable``)                                      names the config's entry; the log,
                                                      the file and llama.cpp's words)
============================================  ======  =====================================

A structured output whose reply does not fit its schema, with ``strict``, is a 502 when an
upstream wrote it (its reply is not what was asked of it) and a 500 when the gateway's own
engine did (the server failed; the request was right), each naming why.

A call to a tool the request did not declare, with ``strict``, is a 502 naming the tool; an
engine in-process that fails (``kind`` ``engine``) and toolwire's own errors keep their
message, which is toolwire's own words.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..errors import BackendError, ToolwireError

__all__ = ["Failure", "failure"]

log = logging.getLogger("toolwire.gateway")

_WHO = "the model behind the gateway"


@dataclass(frozen=True)
class Failure:
    """An HTTP status, an error ``type`` in OpenAI's error shape, our message, headers."""

    status: int
    kind: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """OpenAI's error shape."""
        return {"error": {"message": self.message, "type": self.kind, "param": None, "code": None}}


def failure(exc: ToolwireError) -> Failure:
    """What the client is told of ``exc``; what it is not told is logged."""
    if not isinstance(exc, BackendError):
        log.warning("the request failed: %s", exc)
        return Failure(502, "upstream_error", f"{_WHO} failed: {str(exc)[:500]}")
    log.warning(
        "the backend failed (%s, status %s): %s%s",
        exc.kind,
        exc.status or "none",
        exc,
        f"; it said: {exc.body[:2000]}" if exc.body else "",
        exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
    )
    if exc.kind == "refused" and exc.status:
        return _refused(exc)
    if exc.kind == "refused":
        return Failure(502, "upstream_error", f"{_WHO} failed while it answered")
    if exc.kind == "timeout":
        return Failure(504, "timeout_error", f"{_WHO} did not answer within its deadline")
    if exc.kind == "unreachable":
        return Failure(502, "upstream_error", f"{_WHO} could not be reached")
    if exc.kind == "unreadable":
        return Failure(502, "upstream_error", f"{_WHO} sent a reply that could not be read")
    if exc.kind == "unloadable":  # toolwire's own words, naming the entry, not the file
        return Failure(503, "server_error", str(exc)[:500])
    if exc.kind == "output-schema":  # the upstream's reply is not the format asked for
        return Failure(502, "upstream_error", str(exc)[:500])
    if exc.kind == "output-schema-local":  # our own engine's: the server failed, not the client
        return Failure(500, "server_error", str(exc)[:500])
    return Failure(502, "upstream_error", f"{_WHO} failed: {str(exc)[:500]}")


def _refused(exc: BackendError) -> Failure:
    status = exc.status
    if status == 429:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
        return Failure(
            429, "rate_limit_error", f"{_WHO} is rate-limited (429); try again later", headers
        )
    if status in (400, 413, 422):
        return Failure(
            400, "invalid_request_error", f"{_WHO} refused the request as invalid ({status})"
        )
    if status == 503:
        return Failure(503, "upstream_error", f"{_WHO} is unavailable (503); try again later")
    if status in (408, 504):
        return Failure(504, "timeout_error", f"{_WHO} timed out ({status})")
    return Failure(502, "upstream_error", f"{_WHO} refused the request ({status})")

"""The gateway's logs: ``serve --log-format json`` writes one JSON object a line on stderr.

Each line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``; a request's
line (the ``toolwire.access`` logger, once its response has ended) adds ``method``,
``path``, ``status``, ``duration_ms``, ``api``, ``model`` and ``key`` (the name of the
API key it came with, when keys are set) — never a request's body, its query string or
the key itself; a request whose client was cut for reading nothing of its reply has a line
of its own too, with ``cut``. uvicorn's own lines (its start, its shutdown, an error) are
written the same way. An exception logged with its traceback keeps it, in
``exception``, within the line.

With the text format (the default) nothing is set up here: warnings go to stderr as they
always did, and requests are not logged line by line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

from .metrics import Turn

__all__ = ["ACCESS", "FORMATS", "JsonFormatter", "log_cut", "log_request", "use_format"]

#: The formats ``--log-format`` takes.
FORMATS = ("text", "json")
#: The logger of one line per request.
ACCESS = "toolwire.access"
_access = logging.getLogger(ACCESS)
#: The fields of a request's line, and the longest a text field may be in it.
_REQUEST = "toolwire_request"
_LONGEST = 200


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, _REQUEST, None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def use_format(name: str) -> None:
    """Set up the process's logs for ``--log-format name`` (each worker process calls it)."""
    if name == "text":
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for name_ in ("toolwire", ACCESS, "uvicorn", "uvicorn.error"):
        logging.getLogger(name_).setLevel(logging.INFO)
    for name_ in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name_)
        logger.handlers[:] = []
        logger.propagate = True
    # toolwire.access has each request's line: uvicorn's, which has the query string, not
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)


def log_request(turn: Turn) -> None:
    """One line for a request whose response has ended (at INFO: shown by the JSON format)."""
    if not _access.isEnabledFor(logging.INFO):
        return
    fields = {
        "method": turn.method,
        "path": turn.path[:_LONGEST],
        "status": turn.status,
        "duration_ms": round(turn.seconds * 1000, 3),
        "api": turn.api,
        "model": turn.model[:_LONGEST],
    }
    if turn.key:
        fields["key"] = turn.key[:_LONGEST]
    if turn.upstream_error:
        fields["upstream_error"] = turn.upstream_error
    _access.info("%s %s %s", turn.method, fields["path"], turn.status, extra={_REQUEST: fields})


def log_cut(turn: Turn) -> None:
    """One line for a request whose client was cut, having taken none of its reply's bytes
    for the send deadline (at INFO, as a request's line)."""
    if not _access.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "method": turn.method,
        "path": turn.path[:_LONGEST],
        "api": turn.api,
        "model": turn.model[:_LONGEST],
        "cut": "the client read nothing of its reply for the send deadline",
    }
    if turn.key:
        fields["key"] = turn.key[:_LONGEST]
    _access.info(
        "cut %s %s: the client stopped reading",
        turn.method,
        fields["path"],
        extra={_REQUEST: fields},
    )

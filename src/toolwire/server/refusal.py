"""What the gateway answers a request it refuses: the one error type every check raises.

Its own module, below every check (the request models, the structured-output fields, the
whole-body validation), so each can raise it without importing another.
"""

from __future__ import annotations

from ..errors import UsageError

__all__ = ["RequestError"]


class RequestError(UsageError):
    """A request the gateway refuses: ``message`` for the client, ``param`` the field at fault
    (a path such as ``messages[2].content``; None for the body as a whole), ``status`` the
    HTTP status (400)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status

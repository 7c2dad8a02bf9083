"""The exception tree.

Every error toolwire raises on purpose derives from :class:`ToolwireError`, so a caller can
catch one type at the edge. Parsers and readers raise only the errors documented here; anything
else escaping them is a bug.

A :class:`UsageError` is a call to toolwire that cannot work as made (a bad setting, message,
tool or option). It is also a ``ValueError``, so code written to catch ``ValueError`` before
the tree existed keeps working.
"""

from __future__ import annotations

__all__ = [
    "ArgumentsError",
    "BackendError",
    "FormatError",
    "GGUFError",
    "LabbookError",
    "LimitError",
    "ModelNotFoundError",
    "StoreError",
    "TemplateError",
    "TemplateLimitError",
    "TemplateSecurityError",
    "ToolwireError",
    "UsageError",
]


class ToolwireError(Exception):
    """Base of every error toolwire raises on purpose."""


class UsageError(ToolwireError, ValueError):
    """A call to toolwire that cannot work: a bad setting, message, tool or option.

    Nothing was sent or run; fixing the call is the only remedy, which is why it is kept apart
    from errors of the model, the provider or the input it produced.
    """


class LimitError(ToolwireError):
    """An input went past a documented limit (size, depth, work)."""


class TemplateError(ToolwireError):
    """A chat template failed to compile or render (including its own ``raise_exception``)."""


class TemplateSecurityError(TemplateError):
    """A chat template tried something the sandbox forbids; nothing was run."""


class TemplateLimitError(TemplateError, LimitError):
    """A chat template went past a limit of the sandbox (size, time, memory, loop steps).

    Both a :class:`TemplateError` (the template failed) and a :class:`LimitError` (a bound
    stopped it), so code catching either keeps working.
    """


class GGUFError(ToolwireError):
    """A GGUF file could not be read, or lacks what was asked of it."""


class LabbookError(ToolwireError):
    """A bench labbook could not be read or drawn: missing, too large, or with no runs in it."""


class FormatError(UsageError):
    """An unknown tool-call format name, or a format used where it cannot work."""


class ModelNotFoundError(ToolwireError):
    """A local model cannot be had: a bundled model's packages are not installed or its bytes
    fail the checksum (the message names the command that fixes it), or a model was asked for
    by a name toolwire does not know and no file has that path (the message lists the names)."""


class StoreError(ToolwireError):
    """The conversation store cannot be used as it is; it was left untouched.

    ``kind`` says why: ``"corrupt"`` (the file is not a readable toolwire store),
    ``"newer"`` (a newer toolwire made it: its schema version is above the one this one
    knows), ``"busy"`` (another process held it for longer than the wait allowed) or
    ``"gone"`` (another process deleted the conversation being written). A store in one of
    the first two states is never written to, so nothing in it is lost by trying.
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ArgumentsError(ToolwireError):
    """A call's arguments could not be read, or do not fit the tool's schema.

    ``explanation`` is written for the model: what was wrong, where, and what the tool takes,
    so it can call again. ``problems`` lists the individual findings, one line each.
    ``kind`` is ``"unreadable"``, ``"invalid"`` (read but does not fit) or ``"limit"``.
    """

    def __init__(
        self, explanation: str, *, kind: str = "invalid", problems: tuple[str, ...] = ()
    ) -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.kind = kind
        self.problems = problems


class BackendError(ToolwireError):
    """A model provider or engine failed: it refused the request, or could not be reached.

    ``status`` is the HTTP status when there was one (0 otherwise); ``body`` is what the
    provider said, kept so that a refusal can be classified and healed. ``kind`` says what
    went wrong, so an edge (the gateway) can answer without repeating what the provider
    said: ``refused`` (an HTTP error status, or an error sent mid-stream), ``unreachable``,
    ``timeout`` (the connect timeout or the request's deadline passed), ``unreadable`` (a
    reply that is not what the API sends: not JSON, too long, cut short, malformed),
    ``undeclared-tool`` (with ``strict``, a call to a tool the request did not declare) or
    ``engine`` (an engine in-process failed). ``retry_after`` is the seconds a refusing
    provider asked to wait, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        body: str = "",
        kind: str = "engine",
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.kind = kind
        self.retry_after = retry_after

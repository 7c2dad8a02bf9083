"""Reading request fields for every API: declared models, errors that name the field.

A malformed field is refused with a :class:`~toolwire.server.core.RequestError` whose
``param`` is its path (``tools[0].name``), so a client learns what to fix, in the error
shape of the API it speaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .refusal import RequestError

__all__ = ["check", "options", "path"]

M = TypeVar("M", bound=BaseModel)

_SETTINGS = ("strict", "constrained")
#: Parts of a pydantic location that name a type tried, not a field.
_TAGS = frozenset({"str", "int", "float", "bool", "none", "dict", "list", "is-instance"})


def path(where: str, loc: tuple[int | str, ...]) -> str:
    """``where`` and a pydantic location as one field path: ``tools[0].name``."""
    out = where
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and "[" not in part and part not in _TAGS:
            out += f".{part}" if out else part
    return out


def check(model: type[M], data: Any, where: str) -> M:
    """``data`` read as ``model``; the first problem as a :class:`RequestError`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        field = path(where, tuple(first["loc"])) or where or None
        message = first["msg"]
        if first["type"] == "missing":
            message = "is required"
        raise RequestError(
            f"'{field}' {message[:200]}" if field else message[:200], field
        ) from None


def options(data: Mapping[str, Any]) -> dict[str, bool]:
    """The request's ``toolwire`` extension: ``strict`` and ``constrained``, as given."""
    given = data.get("toolwire")
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise RequestError("'toolwire' must be an object such as {\"strict\": true}", "toolwire")
    unknown = sorted(set(given) - set(_SETTINGS))
    if unknown:
        raise RequestError(
            f"'toolwire' takes only 'strict' and 'constrained', not "
            f"{', '.join(map(repr, unknown))[:200]}",
            "toolwire." + str(unknown[0])[:100],
        )
    for key, value in given.items():
        if not isinstance(value, bool):
            raise RequestError(f"'toolwire.{key}' must be true or false", f"toolwire.{key}")
    return dict(given)

"""Structured-output fields, as each API gives them, read into the one
:class:`~toolwire.pipeline.OutputFormat`: Chat Completions ``response_format``, Responses
``text.format``, Messages ``output_config.format``.

The schema is checked as a tool's schema is — a JSON schema the validator takes (Draft
2020-12), an object — and bounded: at most :data:`MAX_SCHEMA_CHARS` characters of JSON (a
grammar is built from it for every turn). A malformed one is a 400 naming its field
(``response_format.json_schema.schema``). What the reply must then be, and how it is made
so, is :mod:`toolwire.pipeline.structured`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from ..arguments.schema import validator_for
from ..budget import WorkExceeded
from ..errors import ArgumentsError
from ..pipeline import OutputFormat
from .refusal import RequestError

__all__ = [
    "MAX_SCHEMA_CHARS",
    "FormatName",
    "chat_format",
    "messages_format",
    "output_schema",
    "responses_format",
]

#: The longest schema taken, in characters of its JSON.
MAX_SCHEMA_CHARS = 100_000
#: A format's name, as OpenAI takes it.
FormatName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


def _problem(value: Any) -> str | None:
    """What is wrong with ``value`` as an output's schema, if anything."""
    try:
        size = len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return "must be a JSON schema"
    if size > MAX_SCHEMA_CHARS:
        return f"is longer than {MAX_SCHEMA_CHARS} characters of JSON"
    try:
        validator_for(value)
    except (ArgumentsError, WorkExceeded) as exc:
        return str(exc)[:300]
    return None


def output_schema(value: dict[str, Any]) -> dict[str, Any]:
    """A pydantic check of an output's schema (Chat Completions' declared request)."""
    problem = _problem(value)
    if problem is not None:
        raise PydanticCustomError("schema", "{why}", {"why": problem})
    return value


def chat_format(given: Mapping[str, Any] | None) -> OutputFormat | None:
    """Chat Completions' ``response_format``, checked already by its declared model."""
    if given is None or given["type"] == "text":
        return None
    if given["type"] == "json_object":
        return OutputFormat("json_object")
    spec = given["json_schema"]
    return OutputFormat(
        "json_schema",
        spec.get("schema") or {},
        name=spec["name"],
        strict=bool(spec.get("strict")),
    )


_STRICT = ConfigDict(extra="forbid", strict=True)


class _ResponsesFormat(BaseModel):
    model_config = _STRICT

    type: Literal["text", "json_object", "json_schema"]
    name: FormatName | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class _ResponsesText(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # verbosity and the like: ignored

    format: dict[str, Any] | None = None


class _MessagesFormat(BaseModel):
    model_config = _STRICT

    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class _OutputConfig(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # effort: ignored

    format: dict[str, Any] | None = None


def _schema(value: dict[str, Any], where: str) -> dict[str, Any]:

    problem = _problem(value)
    if problem is not None:
        raise RequestError(f"'{where}' {problem}", where)
    return value


def responses_format(text: Any) -> OutputFormat | None:
    """Responses' ``text.format``: ``text``, ``json_object``, or ``json_schema`` with
    ``name`` and ``schema`` (``strict`` as given)."""
    from .fields import check

    if text is None:
        return None
    given = check(_ResponsesText, text, "text").format
    if given is None:
        return None
    spec = check(_ResponsesFormat, given, "text.format")
    if spec.type == "text":
        return None
    if spec.type == "json_object":
        return OutputFormat("json_object")
    if spec.name is None:
        raise RequestError(
            "'text.format.name' is required with type json_schema", "text.format.name"
        )
    if spec.schema_ is None:
        raise RequestError(
            "'text.format.schema' is required with type json_schema", "text.format.schema"
        )
    schema = _schema(spec.schema_, "text.format.schema")
    return OutputFormat("json_schema", schema, name=spec.name, strict=bool(spec.strict))


def messages_format(config: Any, where: str = "output_config") -> OutputFormat | None:
    """Messages' ``output_config.format`` (``json_schema`` with ``schema``). Anthropic
    promises such a reply fits its schema, so the format is strict: one that does not fit
    is an error, not a notice."""
    from .fields import check

    if config is None:
        return None
    given = check(_OutputConfig, config, where).format
    if given is None:
        return None
    spec = check(_MessagesFormat, given, f"{where}.format")
    schema = _schema(spec.schema_, f"{where}.format.schema")
    return OutputFormat("json_schema", schema, name="output", strict=True)
